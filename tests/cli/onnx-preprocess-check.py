#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""onnx-preprocess-check.py — the README's Python preprocessing against Tandem's own.

    onnx-preprocess-check.py README MODEL CLASSIFY.jsonl

Runs the README's tandem_input() (its ```python block that defines it, as a reader
would copy it) on each image that `tandem-train --classify --json` classified in
CLASSIFY.jsonl, at the size and colour the model's "preprocessing" metadata gives,
evaluates MODEL on it with onnx-check.py's numpy evaluator (onnxruntime is not in
Debian) and compares the softmax with Tandem's probabilities: every class within 1e-5,
the same order where that cannot swap two. Needs python3-pil, numpy and python3-onnx (exit 77 without). Exits 1 on
the first difference, naming the image.
"""
import importlib.util
import json
import os
import re
import sys

try:
    import numpy as np
    import onnx
    import PIL  # noqa: F401  (the README's block imports it)
except ImportError as e:
    print("skip: %s" % e)
    sys.exit(77)


TOLERANCE = 1e-5


def readme_block(path):
    text = open(path, encoding="utf-8").read()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        if "def tandem_input" in block:
            return block
    raise SystemExit("onnx-preprocess-check: the README has no tandem_input() block")


def main(argv):
    readme, model_path, classified = argv[1:4]
    scope = {}
    # The block as printed, indentation of its list item removed.
    lines = readme_block(readme).split("\n")
    indent = min(len(l) - len(l.lstrip()) for l in lines if l.strip())
    exec("\n".join(l[indent:] for l in lines), scope)
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("onnx_check", os.path.join(here, "onnx-check.py"))
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)

    model = onnx.load(model_path)
    meta = {p.key: p.value for p in model.metadata_props}
    pre = json.loads(meta["preprocessing"])
    size, mode = pre["size"][0], ("L" if pre["channels"] == "grey" else "RGB")
    worst, count = 0.0, 0
    for line in open(classified):
        c = json.loads(line)
        if c.get("type") != "classification":
            continue
        want = {t["class"]: t["probability"] for t in c["top"]}
        x = scope["tandem_input"](c["file"], size, mode)
        logits = check.evaluate(model, x)[0]
        p = np.exp(logits - logits.max())
        p /= p.sum()
        for k, v in want.items():
            worst = max(worst, abs(p[k] - v))
        # Tandem's order: each place holds the class ranked there here, or one within
        # the tolerance of it (a near tie may go either way in float32).
        order = [t["class"] for t in c["top"]]
        ranked = np.argsort(-p)[:len(order)]
        swapped = any(p[r] - p[o] > 2 * TOLERANCE for r, o in zip(ranked, order))
        if worst > TOLERANCE or swapped:
            raise SystemExit(f"onnx-preprocess-check: {c['file']}: probabilities {p} "
                             f"against Tandem's {want}")
        count += 1
    if count == 0:
        raise SystemExit("onnx-preprocess-check: nothing was classified")
    print(f"{count} images: probabilities within {worst:.1e} of Tandem's, same order")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
