#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""One PyTorch measurement of bench/bench-real-networks.py, in a process of its own (so
the driver's peak is this measurement's alone, and a compiler that fails or hangs is
killed without the rest): the network of a Tandem spec (tools/torch_module.py's
TandemNet, Tandem's own layers) or torchvision's resnet18/34/50, trained on one
random batch kept on the device with SGD (Nesterov, momentum 0.9, lr 0.05), bf16
autocast on CUDA, channels_last, cudnn.benchmark, in eager mode or under
torch.compile (mode default: the model, forward and backward, compiled; the optimizer
step eager).

    torch_row.py --model SPEC|resnet18|resnet50 --side 32 --batch 512 --steps 60 \
        --mode eager|compile [--device cuda] [--warmup 10]
    torch_row.py --mode ceiling      (bf16 8192³ matrix products: {"tflops": …})

Prints one JSON line: samples_per_second over --steps steps after --warmup (and, under
compile, after the first step, which compiles: compile_seconds), the peak of
torch.cuda.max_memory_allocated above what was allocated once the model and the batch
were on the device (peak_above_data, bytes; compiled, from after the compiling step),
and with --shapes each convolution's input geometry (module name, n h w c o k p s).
--compile-only stops after the compiling step: torch.compile's caches on disk (FX
graphs, AOTAutograd) then hold the graphs, and the next process of the same row loads
them instead of compiling. A failure is the line's "error" (an old PyTorch without
torch.compile, a compiler error); the exit status is 0 when the line was written.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "tools")]


def build(name, side):
    import torch_module
    if name in ("resnet18", "resnet34", "resnet50"):
        import torchvision
        return getattr(torchvision.models, name)(num_classes=10)
    return torch_module.TandemNet(name, (side, side, 3))


def conv_shapes(torch, net, x):
    """Each nn.Conv2d's geometry as Tandem's convolution keys write it, in call order."""
    shapes, hooks = [], []
    for name, mod in net.named_modules():
        if isinstance(mod, torch.nn.Conv2d):
            def hook(m, inputs, _out, name=name):
                n, c, h, w = inputs[0].shape
                shapes.append(dict(layer=name, n=n, h=h, w=w, c=c, o=m.out_channels,
                                   k=m.kernel_size[0], p=m.padding[0], s=m.stride[0]))
            hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        net(x)
    for h in hooks:
        h.remove()
    return shapes


def measure(a, out):
    import torch
    import torch.nn.functional as F
    out["torch"] = torch.__version__
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA device")
    if a.mode == "compile" and not hasattr(torch, "compile"):
        raise RuntimeError(f"torch.compile needs PyTorch 2.0 or later; this is {torch.__version__}")
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    device = torch.device(a.device)
    net = build(a.model, a.side).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    x = torch.rand(a.batch, 3, a.side, a.side, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (a.batch,), device=device)
    if a.shapes:
        out["convs"] = conv_shapes(torch, net, x)
    model = torch.compile(net) if a.mode == "compile" else net
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    base = torch.cuda.memory_allocated() if cuda else 0
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    if a.mode == "compile":
        t = time.perf_counter()
        step()
        sync()
        out["compile_seconds"] = round(time.perf_counter() - t, 2)
        if a.compile_only:
            return
        if cuda:  # the compiler's own allocations are not the training's
            torch.cuda.reset_peak_memory_stats()
    for _ in range(a.warmup):
        step()
    sync()
    t = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    seconds = time.perf_counter() - t
    out.update(samples_per_second=a.steps * a.batch / seconds, steps=a.steps, seconds=seconds)
    if cuda:
        out.update(peak_above_data=torch.cuda.max_memory_allocated() - base, base=base,
                   reserved_peak=torch.cuda.max_memory_reserved())


def matmul_ceiling(a, out):
    """The bf16 tensor cores' reach as cuBLAS shows it: 8192×8192×8192 products on
    random data, the mean of 10 after 3 to warm up (the issue's "~780 TFLOP/s")."""
    import torch
    out["torch"] = torch.__version__
    if not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA device")
    n = 8192
    x, y = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        x @ y
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        x @ y
    torch.cuda.synchronize()
    out["tflops"] = 10 * 2.0 * n ** 3 / (time.perf_counter() - t) / 1e12


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model")
    p.add_argument("--side", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--mode", choices=("eager", "compile", "ceiling"), default="eager")
    p.add_argument("--device", default="cuda")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--shapes", action="store_true", help="list each convolution's geometry")
    p.add_argument("--compile-only", action="store_true",
                   help="--mode compile: stop after the compiling step (fills the caches)")
    a = p.parse_args()
    if a.mode != "ceiling" and None in (a.model, a.side, a.batch, a.steps):
        p.error("--model, --side, --batch and --steps are needed but for --mode ceiling")
    out = {"mode": a.mode, "error": None}
    try:
        (matmul_ceiling if a.mode == "ceiling" else measure)(a, out)
    except Exception as e:  # noqa: BLE001 — any failure is the row's, reported in it
        first = str(e).strip().splitlines()
        out["error"] = f"{type(e).__name__}: {first[0][:300] if first else ''}"
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
