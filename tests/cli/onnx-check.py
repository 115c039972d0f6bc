#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""onnx-check.py — an ONNX file that tandem-train exported, checked from the outside.

    onnx-check.py MODEL SAMPLES LOGITS H W C [--normalized MODEL2]

Runs onnx.checker (with shape inference) on MODEL, then evaluates it on the images in
SAMPLES (uint8, HWC, as Tandem holds them) fed the way the README says a person feeds
it: NCHW float32, each byte / 255. The logits must equal Tandem's (LOGITS, float32,
from onnx-helper) within a relative 1e-4 (float32's rounding in these networks is
below 1e-6) and rank the classes alike where that cannot swap them. With onnxruntime
importable (the GPU machine has it) it evaluates there too; the small numpy evaluator
below runs always, so the test needs only Debian's python3-onnx and numpy.
--normalized: MODEL2 is MODEL's network exported with per-channel normalization
(mean 0.25·(k+1), std 0.5/(k+1)); its logits on x must be MODEL's on (x − mean) / std.
Prints what it compared; exits 1 on the first difference.
"""
import sys

import numpy as np
import onnx
from onnx import checker, numpy_helper, shape_inference


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def windows(x, kernel, strides, pads, fill):
    """Yields, for each kernel tap, the strided view of the padded x it meets."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw) = kernel, strides
    top, left, bottom, right = pads
    xp = np.full((n, c, h + top + bottom, w + left + right), fill, dtype=x.dtype)
    xp[:, :, top:top + h, left:left + w] = x
    oh = (h + top + bottom - kh) // sh + 1
    ow = (w + left + right - kw) // sw + 1
    for ky in range(kh):
        for kx in range(kw):
            yield ky, kx, xp[:, :, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw]


def window_args(node, x, kernel=None):
    a = attrs(node)
    kernel = kernel or list(a["kernel_shape"])
    strides = list(a.get("strides", [1, 1]))
    pads = list(a.get("pads", [0, 0, 0, 0]))
    assert a.get("auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET"), "auto_pad not evaluated"
    assert list(a.get("dilations", [1, 1])) == [1, 1], "dilations not evaluated"
    assert a.get("group", 1) == 1, "groups not evaluated"
    assert a.get("ceil_mode", 0) == 0, "ceil_mode not evaluated"
    # ONNX's pads are [top, left, bottom, right].
    return kernel, strides, [pads[0], pads[1], pads[2], pads[3]]


def conv(node, x, w, b=None):
    kernel, strides, pads = window_args(node, x, list(w.shape[2:]))
    y = 0
    for ky, kx, view in windows(x, kernel, strides, pads, 0.0):
        y = y + np.einsum("nchw,oc->nohw", view, w[:, :, ky, kx])
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def maxpool(node, x):
    y = None
    for _, _, view in windows(x, *window_args(node, x), -np.inf):
        y = view.copy() if y is None else np.maximum(y, view)
    return y


def avgpool(node, x):
    kernel, strides, pads = window_args(node, x)
    total = 0
    for _, _, view in windows(x, kernel, strides, pads, 0.0):
        total = total + view
    if attrs(node).get("count_include_pad", 0) or not any(pads):
        return total / (kernel[0] * kernel[1])
    ones = np.ones((1, 1) + x.shape[2:], dtype=x.dtype)
    counts = sum(v for _, _, v in windows(ones, kernel, strides, pads, 0.0))
    return total / counts


def gemm(node, a, b, c=None):
    at = attrs(node)
    a = a.T if at.get("transA", 0) else a
    b = b.T if at.get("transB", 0) else b
    y = at.get("alpha", 1.0) * (a @ b)
    return y if c is None else y + at.get("beta", 1.0) * c


def batchnorm(node, x, scale, bias, mean, var):
    eps = attrs(node).get("epsilon", 1e-5)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape)
            + bias.reshape(shape))


def flatten(node, x):
    axis = attrs(node).get("axis", 1)
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


def reshape(node, x, shape):
    shape = [x.shape[i] if d == 0 else int(d) for i, d in enumerate(shape)]
    return x.reshape(shape)


OPS = {
    "Conv": conv,
    "MaxPool": maxpool,
    "AveragePool": avgpool,
    "GlobalAveragePool": lambda n, x: x.mean(axis=(2, 3), keepdims=True),
    "GlobalMaxPool": lambda n, x: x.max(axis=(2, 3), keepdims=True),
    "BatchNormalization": batchnorm,
    "Relu": lambda n, x: np.maximum(x, 0),
    "Gemm": gemm,
    "Flatten": flatten,
    "Reshape": reshape,
    "Transpose": lambda n, x: x.transpose(attrs(n)["perm"]),
    "Add": lambda n, a, b: a + b,
    "Sub": lambda n, a, b: a - b,
    "Mul": lambda n, a, b: a * b,
    "Div": lambda n, a, b: a / b,
    "Identity": lambda n, x: x,
}


def evaluate(model, x):
    """The graph in float64 on numpy: a reference independent of any runtime."""
    g = model.graph
    values = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    values = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in values.items()}
    values[g.input[0].name] = x.astype(np.float64)
    for node in g.node:
        if node.op_type not in OPS:
            raise SystemExit(f"onnx-check: no evaluator for {node.op_type} ({node.name})")
        args = [values[i] for i in node.input if i]
        values[node.output[0]] = OPS[node.op_type](node, *args)
    return values[g.output[0].name]


def runtime(path, x):
    try:
        import onnxruntime
    except ImportError:
        return None
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.astype(np.float32)})[0]


TOLERANCE = 1e-4


def compare(what, got, want):
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got - want).max()) / scale
    # The top class must agree wherever the tolerance cannot swap the first two.
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * TOLERANCE * scale
    same_top = bool((got.argmax(axis=1) == want.argmax(axis=1))[clear].all())
    print(f"{what}: max |difference| / max(1, max |logit|) = {err:.2e}, "
          f"same top class: {same_top} ({int(clear.sum())} of {len(want)} clear of a tie)")
    if err > TOLERANCE or not same_top:
        raise SystemExit(f"onnx-check: {what} differs from Tandem's logits")


def main(argv):
    path, samples, logits_path = argv[1:4]
    h, w, c = (int(v) for v in argv[4:7])
    model = onnx.load(path)
    checker.check_model(model, full_check=True)
    inferred = shape_inference.infer_shapes(model, strict_mode=True)
    out = inferred.graph.output[0].type.tensor_type.shape.dim
    pixels = np.fromfile(samples, dtype=np.uint8).reshape(-1, h, w, c)
    want = np.fromfile(logits_path, dtype=np.float32).reshape(len(pixels), -1)
    assert out[1].dim_value == want.shape[1], "the output's declared class count"
    # What a person feeds it: NCHW, values in [0, 1].
    x = (pixels.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255.0))
    compare(f"numpy on {len(x)} images", evaluate(model, x), want)
    got = runtime(path, x)
    if got is not None:
        compare(f"onnxruntime on {len(x)} images", got, want)
    else:
        print("onnxruntime not installed: numpy's evaluation only")
    if len(argv) > 8 and argv[7] == "--normalized":
        normalized = onnx.load(argv[8])
        checker.check_model(normalized, full_check=True)
        k = np.arange(c, dtype=np.float32).reshape(1, c, 1, 1)
        mean, std = np.float32(0.25) * (k + 1), np.float32(0.5) / (k + 1)
        reference = evaluate(model, (x - mean) / std)
        compare("normalized model", evaluate(normalized, x), reference)
        got = runtime(argv[8], x)
        if got is not None:
            compare("normalized model in onnxruntime", got, reference)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
