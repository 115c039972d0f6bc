#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""PyTorch's side of test-pth: .pth files written by torch.save itself (Debian's
python3-torch), and what their tensors hold. Exits 77 (skip) without torch.

  pth-reference.py DIR   writes into DIR:
    mixed.pth        a state_dict of float32, float16, bfloat16, float64 and int64
                     tensors: conv and fc weights, BN statistics and
                     num_batches_tracked (0-dim int64), a transposed and a sliced view
                     (non-contiguous, and sharing a storage at an offset), an empty
                     tensor and an nn.Parameter
    mixed-p4.pth     the same with pickle protocol 4 (FRAME, MEMOIZE,
                     SHORT_BINUNICODE)
    nested.pth       a training checkpoint: {"epoch", "state_dict": …, "optimizer": …}
    mixed.ref        the expected tensors, each as torch's .float() gives it, in the
                     safetensors layout (F32), for Tandem's own reader
    module.pth       torch.save(model): the whole module, which names its classes
    legacy.pth       the format before PyTorch 1.6 (_use_new_zipfile_serialization=False)
    script.pt        torch.jit.save of a module (a TorchScript archive)
"""
import collections
import json
import os
import struct
import sys

try:
    import torch
except ImportError as e:
    print("skip: PyTorch is not installed (%s)" % e)
    sys.exit(77)


def mixed_state_dict():
    g = torch.Generator().manual_seed(34)
    sd = collections.OrderedDict()
    sd["conv1.weight"] = torch.randn(4, 3, 3, 3, generator=g)
    sd["bn1.weight"] = torch.rand(4, generator=g) + 0.5
    sd["bn1.running_mean"] = torch.randn(4, generator=g)
    sd["bn1.running_var"] = torch.rand(4, generator=g) + 0.1
    sd["bn1.num_batches_tracked"] = torch.tensor(1234, dtype=torch.int64)
    sd["half.weight"] = (torch.randn(3, 5, generator=g) * 100).half()
    # float16's extremes: subnormals, the largest, infinities and a signed zero.
    sd["half.edges"] = torch.tensor([6e-8, -3e-5, 65504.0, float("inf"), float("-inf"), -0.0],
                                    dtype=torch.float16)
    sd["bf16.weight"] = torch.randn(2, 3, 2, generator=g).bfloat16()
    sd["double.weight"] = torch.randn(5, generator=g, dtype=torch.float64)
    sd["long.counts"] = torch.tensor([[-3, 0], [7, 2 ** 40]], dtype=torch.int64)
    base = torch.randn(6, 4, generator=g)
    sd["view.transposed"] = base.t()                 # stride (1, 4)
    sd["view.slice"] = base[2:5, 1:3]                # offset 9, strides (4, 1)
    sd["empty.weight"] = torch.empty(0, 3)
    sd["fc.weight"] = torch.nn.Parameter(torch.randn(10, 8, generator=g))
    sd["fc.bias"] = torch.randn(10, generator=g)
    sd._metadata = collections.OrderedDict([("", {"version": 1}), ("bn1", {"version": 2})])
    return sd


def write_reference(sd, path):
    """The tensors as float32 in the safetensors layout (Tandem's reader reads it)."""
    header, blobs, offset = {}, [], 0
    for name, t in sd.items():
        data = t.detach().float().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main(out):
    sd = mixed_state_dict()
    torch.save(sd, os.path.join(out, "mixed.pth"))
    torch.save(sd, os.path.join(out, "mixed-p4.pth"), pickle_protocol=4)
    write_reference(sd, os.path.join(out, "mixed.ref"))
    optimizer = {"state": {}, "param_groups": [{"lr": 0.01, "momentum": 0.9, "params": [0, 1]}]}
    torch.save({"epoch": 3, "state_dict": sd, "optimizer": optimizer, "best": 0.75},
               os.path.join(out, "nested.pth"))
    model = torch.nn.Sequential(torch.nn.Linear(3, 2))
    torch.save(model, os.path.join(out, "module.pth"))
    torch.save(model.state_dict(), os.path.join(out, "legacy.pth"),
               _use_new_zipfile_serialization=False)
    torch.jit.save(torch.jit.script(model), os.path.join(out, "script.pt"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
