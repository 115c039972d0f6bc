#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""A Tandem network as a PyTorch module, and safetensors files without the safetensors
package.

    import torch_module as tm
    model = tm.from_checkpoint("run.safetensors")   # spec and input shape from its metadata
    model = tm.TandemNet("conv32k3p1,relu,pool2,fc10", (28, 28, 1))
    model.load_state_dict(tm.load_safetensors("run.safetensors"), strict=False)

The module takes NCHW float tensors (Tandem's inputs: pixels / 255, then the run's
normalization) and returns logits. Its state_dict has exactly the names and shapes of
Tandem's checkpoints: convolutions conv1, conv2 …, batch norms bn1 …, fully connected
layers fc1 … (a network's only top-level fc is "fc"), residual blocks layerS.B with
their projection as layerS.B.downsample.0 (conv) and .1 (bn), as torchvision's ResNets
name theirs; an fc after a convolution reads nn.Flatten's (channel, row, column) order,
which is how Tandem saves it. Specs are Tandem's, repeats and ResNet block items
included (the built-in names are not: use a checkpoint's "network" metadata, or
torchvision's own resnet18/34/50, which these equal).

Run as a script it prints the module for a spec:
    tools/torch_module.py "conv32k3p1,relu,pool2,fc10" 28 28 1
"""
import json
import re
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def save_safetensors(tensors, path, metadata=None):
    """Writes {name: tensor} as safetensors (float32, and int64 for counters)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.int64:
            dtype, data = "I64", t.numpy().astype("<i8").tobytes()
        else:
            dtype, data = "F32", t.float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Returns ({name: tensor}, metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        kind = {"F32": "<f4", "I64": "<i8"}[e["dtype"]]
        arr = np.frombuffer(data[b:end], dtype=kind).reshape(e["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, metadata


def load_safetensors(path):
    return read_safetensors(path)[0]


def expand(spec):
    """A spec with repeats (N*item, N*(…)) and ResNet block items (basicC[sS],
    bottleneckW[sS]) written out, as Tandem's parser reads them."""
    spec = spec.replace(" ", "")

    def block(tok):
        m = re.fullmatch(r"basic(\d+)(?:s(\d+))?", tok)
        if m:
            c, s = int(m.group(1)), int(m.group(2) or 1)
            return "res(conv%dk3s%dp1,bn,relu,conv%dk3p1,bn),relu" % (c, s, c)
        m = re.fullmatch(r"bottleneck(\d+)(?:s(\d+))?", tok)
        if m:
            w, s = int(m.group(1)), int(m.group(2) or 1)
            return ("res(conv%dk1,bn,relu,conv%dk3s%dp1,bn,relu,conv%dk1,bn),relu"
                    % (w, w, s, 4 * w))
        return None

    def parse_list(i):
        items = []
        while True:
            part, i = parse_item(i)
            items += part
            if i < len(spec) and spec[i] == ",":
                i += 1
                continue
            return items, i

    def parse_item(i):
        m = re.match(r"(\d+)\*", spec[i:])
        repeat = 1
        if m:
            repeat, i = int(m.group(1)), i + m.end()
        if spec.startswith("res(", i):
            inner, i = parse_list(i + 4)
            body = ["res(" + ",".join(inner) + ")"]
            i += 1  # ")"
        elif spec.startswith("(", i):
            body, i = parse_list(i + 1)
            i += 1
        else:
            m = re.match(r"[^,()]+", spec[i:])
            tok, i = m.group(0), i + m.end()
            text = block(tok)
            body = expand(text).split(",") if text else [tok]
        return body * repeat, i

    items, _ = parse_list(0)
    return ",".join(items).replace("res(,", "res(").replace(",)", ")")


class _Block(nn.Module):
    """A residual block's modules (conv1, bn1 … and downsample)."""


class TandemNet(nn.Module):
    def __init__(self, spec, input_shape):
        super().__init__()
        h, w, c = input_shape
        tokens = re.findall(r"res\(|\)|[^,()]+", expand(spec))
        # Shapes first (projections depend on them), then names as Tandem gives them.
        stack, items = [], []
        for i, tok in enumerate(tokens):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
            if tok == "res(":
                stack.append((len(items), h, w, c))
                items.append(["begin", None, None])
                continue
            if tok == ")":
                begin, bh, bw, bc = stack.pop()
                proj = None
                if (bh, bw, bc) != (h, w, c):
                    s = next(s for s in range(1, max(bh, bw) + 1)
                             if (bh - 1) // s + 1 == h and (bw - 1) // s + 1 == w)
                    proj = (bc, c, s)
                items.append(["end", (begin, proj), None])
                items[begin][1] = len(items) - 1
                continue
            m = re.fullmatch(r"fc(\d+)(nb)?", tok)
            if m:
                out = int(m.group(1))
                items.append(["fc", (h * w * c, out, not m.group(2) and nxt != "bn",
                                     (h, w, c)), None])
                h, w, c = 1, 1, out
                continue
            m = re.fullmatch(r"conv(\d+)k(\d+)(?:s(\d+))?(?:p(\d+))?(nb)?", tok)
            if m:
                out, k = int(m.group(1)), int(m.group(2))
                s, p = int(m.group(3) or 1), int(m.group(4) or 0)
                items.append(["conv", (c, out, k, s, p, not m.group(5) and nxt != "bn"),
                              None])
                h, w, c = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1, out
                continue
            m = re.fullmatch(r"(pool|avg)(\d+)(?:s(\d+)p(\d+))?", tok)
            if m:
                k = int(m.group(2))
                s, p = (int(m.group(3)), int(m.group(4))) if m.group(3) else (k, 0)
                items.append([m.group(1), (k, s, p), None])
                h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
                continue
            if tok == "bn":
                items.append(["bn", (c,), None])
            elif tok in ("relu", "gap", "gmp", "flatten"):
                items.append([tok, None, None])
                if tok in ("gap", "gmp"):
                    h = w = 1
                elif tok == "flatten":
                    h, w, c = 1, 1, h * w * c
            elif tok.startswith("drop"):
                items.append(["drop", None, None])
            elif tok.startswith("scale"):
                items.append(["scale", (float(tok[5:]),), None])
            else:
                raise ValueError("unknown spec item " + tok)
        self._build(items)
        self.items = items

    def _build(self, items):
        top_fcs = sum(1 for it in items if it[0] == "fc" and self._depth(items, it) == 0)
        levels = [dict(prefix="", conv=0, bn=0, fc=0, stage=0, block=0, module=self)]
        for it in items:
            lv = levels[-1]
            kind, args = it[0], it[1]
            dot = "." if lv["prefix"] else ""
            if kind == "begin":
                proj = items[args][1][1]
                if lv["stage"] == 0 or proj is not None:
                    lv["stage"] += 1
                    lv["block"] = 0
                else:
                    lv["block"] += 1
                stage_name = "layer%d" % lv["stage"]
                parent = lv["module"]
                if not hasattr(parent, stage_name):
                    parent.add_module(stage_name, nn.Module())
                block = _Block()
                getattr(parent, stage_name).add_module(str(lv["block"]), block)
                levels.append(dict(prefix="%s%s%s.%d" % (lv["prefix"], dot, stage_name,
                                                         lv["block"]),
                                   conv=0, bn=0, fc=0, stage=0, block=0, module=block))
                it[2] = block
            elif kind == "end":
                begin, proj = args
                if proj is not None:
                    cin, cout, s = proj
                    ds = nn.Sequential(nn.Conv2d(cin, cout, 1, s, bias=False),
                                       nn.BatchNorm2d(cout))
                    lv["module"].add_module("downsample", ds)
                    it[2] = ds
                levels.pop()
            elif kind == "conv":
                cin, cout, k, s, p, bias = args
                lv["conv"] += 1
                mod = nn.Conv2d(cin, cout, k, s, p, bias=bias)
                lv["module"].add_module("conv%d" % lv["conv"], mod)
                it[2] = mod
            elif kind == "bn":
                lv["bn"] += 1
                mod = nn.BatchNorm2d(args[0])
                lv["module"].add_module("bn%d" % lv["bn"], mod)
                it[2] = mod
            elif kind == "fc":
                fin, fout, bias, _ = args
                if len(levels) == 1 and top_fcs == 1:
                    name = "fc"
                else:
                    lv["fc"] += 1
                    name = "fc%d" % lv["fc"]
                mod = nn.Linear(fin, fout, bias=bias)
                lv["module"].add_module(name, mod)
                it[2] = mod

    @staticmethod
    def _depth(items, target):
        depth = 0
        for it in items:
            if it is target:
                return depth
            depth += it[0] == "begin"
            depth -= it[0] == "end"
        return depth

    def forward(self, x):
        saved = []
        for kind, args, mod in self.items:
            if kind == "begin":
                saved.append(x)
            elif kind == "end":
                skip = saved.pop()
                x = x + (mod(skip) if mod is not None else skip)
            elif kind == "fc":
                x = mod(torch.flatten(x, 1))
            elif kind in ("conv", "bn"):
                if kind == "bn" and x.dim() == 2:
                    x = F.batch_norm(x, mod.running_mean, mod.running_var, mod.weight,
                                     mod.bias, self.training, mod.momentum, mod.eps)
                else:
                    x = mod(x)
            elif kind == "pool":
                x = F.max_pool2d(x, args[0], args[1], args[2])
            elif kind == "avg":
                x = F.avg_pool2d(x, args[0], args[1], args[2], count_include_pad=True)
            elif kind == "gap":
                x = F.adaptive_avg_pool2d(x, 1)
            elif kind == "gmp":
                x = F.adaptive_max_pool2d(x, 1)
            elif kind == "relu":
                x = F.relu(x)
            elif kind == "flatten":
                x = torch.flatten(x, 1)
            elif kind == "scale":
                x = x * args[0]
        return x


def from_checkpoint(path):
    """The module of a Tandem checkpoint, its weights loaded (BN counters aside)."""
    tensors, meta = read_safetensors(path)
    h, w, c = (int(v) for v in meta["input_shape"].split(","))
    model = TandemNet(meta["network"], (h, w, c))
    state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    for k, v in model.state_dict().items():
        if k.endswith("num_batches_tracked") and k in state:
            state[k] = state[k].to(torch.int64).reshape(v.shape)
    model.load_state_dict(state)
    return model


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: torch_module.py SPEC HEIGHT WIDTH CHANNELS")
    print(TandemNet(sys.argv[1], tuple(int(v) for v in sys.argv[2:5])))
