#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# test-engine-layers.py — the engine's folders against their layering: every
# #include "…" in engine/ (and the engine headers kernels/ includes) must go to the
# file's own folder or to one that LAYERS (engine/layers.py, the one place the
# layering is written down) lets it include. A new cycle, or an include the wrong way
# across a boundary, fails here with the file and the line; a folder missing from
# the table too.   usage: test-engine-layers.py SOURCE_ROOT
import os
import re
import sys

# The table lives beside the build that uses it (engine/layers.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "engine"))
from layers import KERNELS_MAY_INCLUDE, LAYERS, PRIVATE  # noqa: E402

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(top):
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith((".c", ".h", ".cu", ".cuh")):
                yield d, f


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    engine = os.path.join(root, "engine")
    kernels = os.path.join(root, "kernels")
    problems = []

    # The table itself must be a layering: no folder reaches itself through it.
    def reaches(a, seen):
        for b in LAYERS.get(a, []):
            if b not in seen:
                seen.add(b)
                reaches(b, seen)
        return seen
    for a in LAYERS:
        if a in reaches(a, set()):
            problems.append(f"LAYERS: {a} reaches itself (a cycle in the table)")

    # Which folder holds each header, by name (includes name headers without a path).
    where = {}
    for d, f in sources(engine):
        if f.endswith((".h", ".cuh")):
            where.setdefault(f, []).append(os.path.relpath(d, engine).replace(os.sep, "/"))
    for d, f in sources(kernels):
        if f.endswith((".h", ".cuh")):
            where.setdefault(f, []).append("kernels")
    for name, folders in sorted(where.items()):
        if len(folders) > 1:
            problems.append(f"{name}: in {', '.join(folders)}: header names must be unique")

    def check(path, part, allowed):
        text = open(path, encoding="utf-8", errors="replace").read()
        for m in INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            for target in where.get(os.path.basename(m.group(1)), []):
                if target != part and target not in allowed:
                    problems.append(f"{os.path.relpath(path, root)}:{line}: {part}/ includes "
                                    f"{m.group(1)} ({target}/), which it may not")
            readers = PRIVATE.get(os.path.basename(m.group(1)))
            if readers is not None and part not in readers:
                problems.append(f"{os.path.relpath(path, root)}:{line}: {part}/ includes "
                                f"{m.group(1)}, which only {', '.join(readers)} may")

    for d, f in sources(engine):
        part = os.path.relpath(d, engine).replace(os.sep, "/")
        if part not in LAYERS:
            problems.append(f"engine/{part}/{f}: folder {part}/ is not in LAYERS "
                            f"(engine/layers.py); place it there")
            continue
        check(os.path.join(d, f), part, LAYERS[part])
    for d, f in sources(kernels):
        check(os.path.join(d, f), "kernels", KERNELS_MAY_INCLUDE)

    print("1..1")
    for p in problems:
        print("# " + p)
    print(("not ok" if problems else "ok") + " 1 engine folders include only what LAYERS allows")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
