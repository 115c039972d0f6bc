#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""bench-cpu-memory.py — the CPU's memory and start-up on a real network: the CIFAR-layout
ResNet-18 (BasicBlocks 64-128-256-512, 1×1 projections, gap, fc10) at batch 8 on the
CPU, trained for one short epoch and evaluated on 1,000 test images, as tandem-train
runs it. Prints the peak RSS of the process (getrusage of the child), the seconds from
launch to the first step's summary (wall clock, and the CPU time the process had used
by then: on a shared machine the wall clock counts other programs too), to the end,
and the memory event's estimate.

The data are CIFAR-10 binary batches of random pixels written to a temporary folder
(same layout and sizes as CIFAR-10 for the test split; --train sets how many training
images, 400 by default so that the epoch is short: each 10,000 more add 30 MiB to the
host's copy and 30 MiB to the replica's). Not a test: it asserts nothing.

  bench/bench-cpu-memory.py [--tandem build/src/tandem-train] [--train 400]
                            [--eval-batch 1000] [--torch [--python /usr/bin/python3]]

--torch also runs the same network, batch and evaluation in PyTorch (python3-torch,
torchvision's BasicBlock layout written out here) in a child process and prints its
peak RSS and time to first step, for the comparison in bench/NOTES.md.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

SPEC = ("conv64k3p1,bn,relu,2*(res(conv64k3p1,bn,relu,conv64k3p1,bn),relu),"
        "res(conv128k3s2p1,bn,relu,conv128k3p1,bn),relu,"
        "res(conv128k3p1,bn,relu,conv128k3p1,bn),relu,"
        "res(conv256k3s2p1,bn,relu,conv256k3p1,bn),relu,"
        "res(conv256k3p1,bn,relu,conv256k3p1,bn),relu,"
        "res(conv512k3s2p1,bn,relu,conv512k3p1,bn),relu,"
        "res(conv512k3p1,bn,relu,conv512k3p1,bn),relu,gap,fc10")


def write_cifar(folder, train, test, seed=0):
    import random
    rng = random.Random(seed)
    per = max(1, train // 5)
    for name, count in [(f"data_batch_{i}.bin", per) for i in range(1, 6)] + \
                       [("test_batch.bin", test)]:
        with open(os.path.join(folder, name), "wb") as f:
            for _ in range(count):
                f.write(bytes([rng.randrange(10)]))
                f.write(rng.randbytes(3072))


def run_tandem(args, folder):
    cmd = [args.tandem, "--dataset", folder, "--network", SPEC, "--devices", "cpu",
           "--batch", "8", "--epochs", "1", "--optimizer", "nesterov", "--lr", "0.05",
           "--eval-batch", str(args.eval_batch), "--json", "--quiet"]
    start = time.monotonic()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    first_step = None
    first_cpu = None
    memory = None
    finished = None
    for line in child.stdout:
        e = json.loads(line)
        if e.get("type") == "memory" and memory is None:
            memory = e
        if e.get("type") == "step" and first_step is None:
            first_step = time.monotonic() - start
            first_cpu = cpu_seconds(child.pid)
        if e.get("type") in ("finished", "failed"):
            finished = e
    child.wait()
    total = time.monotonic() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return peak_kib, first_step, first_cpu, total, memory, finished


def cpu_seconds(pid):
    """User + system CPU seconds of a running process (all its threads): on a shared
    machine the wall clock to the first step counts other programs' time too."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


TORCH_CHILD = r'''
import resource, sys, time
start = time.monotonic()
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
train, test, eval_batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
class Block(nn.Module):
    def __init__(s, cin, cout, stride):
        super().__init__()
        s.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False); s.b1 = nn.BatchNorm2d(cout)
        s.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False); s.b2 = nn.BatchNorm2d(cout)
        s.proj = None
        if stride != 1 or cin != cout:
            s.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(s, x):
        y = s.b2(s.c2(F.relu(s.b1(s.c1(x)))))
        return F.relu(y + (s.proj(x) if s.proj is not None else x))
layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
cin = 64
for cout, stride in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)]:
    layers.append(Block(cin, cout, stride)); cin = cout
layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
net = nn.Sequential(*layers)
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
xs = torch.randint(0, 256, (train, 3, 32, 32), dtype=torch.uint8)
ys = torch.randint(0, 10, (train,))
xt = torch.randint(0, 256, (test, 3, 32, 32), dtype=torch.uint8)
yt = torch.randint(0, 10, (test,))
first = None
net.train()
for i in range(0, train, 8):
    x = xs[i:i + 8].float() / 255; y = ys[i:i + 8]
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if first is None:
        first = time.monotonic() - start
net.eval()
correct = 0
with torch.no_grad():
    for i in range(0, test, eval_batch):
        correct += (net(xt[i:i + eval_batch].float() / 255).argmax(1) == yt[i:i + eval_batch]).sum().item()
print(first, time.monotonic() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      torch.__version__)
'''


def run_torch(args):
    out = subprocess.run([args.python, "-c", TORCH_CHILD, str(args.train), "1000",
                          str(args.eval_batch)], capture_output=True, text=True, check=True)
    first, total, peak_kib, version = out.stdout.split()
    return int(peak_kib), float(first), float(total), version


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tandem", default="build/src/tandem-train")
    p.add_argument("--train", type=int, default=400)
    p.add_argument("--eval-batch", type=int, default=1000)
    p.add_argument("--torch", action="store_true")
    p.add_argument("--python", default="/usr/bin/python3",
                   help="the Python that has torch (Debian's python3-torch)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tandem-cifar-") as folder:
        write_cifar(folder, args.train, 1000)
        peak_kib, first, first_cpu, total, memory, finished = run_tandem(args, folder)
    print(f"tandem-train ({args.tandem}): ResNet-18 CIFAR layout, cpu, batch 8, "
          f"{args.train} training images, evaluation of 1000, --eval-batch {args.eval_batch}")
    print(f"  peak RSS            {peak_kib / 1048576:.3f} GiB ({peak_kib * 1024 / 1e9:.3f} GB)")
    print(f"  first step after    {first:.2f} s, {first_cpu:.2f} s of CPU time" if first is not None
          else "  no step")
    print(f"  finished after      {total:.2f} s ({(finished or {}).get('type')})")
    if memory is not None:
        d = memory["devices"][0]
        print(f"  estimate: host {memory['host_total'] / 2**30:.3f} GiB; replica "
              f"{d['total'] / 2**30:.3f} GiB (activations {d['activations'] / 2**20:.1f} MiB, "
              f"workspace {d['workspace'] / 2**20:.1f} MiB), shard {memory['capacity']}, "
              f"evaluation chunk {memory.get('eval_capacity')}")
    if args.torch:
        tpeak, tfirst, ttotal, version = run_torch(args)
        print(f"PyTorch {version} (same network, batch, evaluation, chunk {args.eval_batch}):")
        print(f"  peak RSS            {tpeak / 1048576:.3f} GiB ({tpeak * 1024 / 1e9:.3f} GB)")
        print(f"  first step after    {tfirst:.2f} s (from the interpreter's start of work)")
        print(f"  finished after      {ttotal:.2f} s")


if __name__ == "__main__":
    main()
