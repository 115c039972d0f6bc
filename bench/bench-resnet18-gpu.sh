#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The CIFAR-layout ResNet-18 (bench/bench-cpu-memory.py's spec) on the lent GPU at 32, 64
# and 128 px, bf16, batches 512, 256, 128 — the sizes of shared/anchors/real-networks.md —
# from .gpu/ (tools/gpu-prepare copies this script there). Random pixels (bench_data.py):
# CIFAR-10 binary batches at 32 px, folders of PNG files at 64 and 128 px. The whole
# issue-31 table in one run (eager and torch.compile, verdicts) is bench-real-networks.py. For each size:
# samples/s over the last half of the steps (the step events' rate), the memory event's
# GPU estimate, Tandem's own count of device bytes, and the driver's peak for the GPU
# (nvidia-smi, sampled every 100 ms while the run lasts). With TORCH=1, PyTorch eager
# (bf16 autocast, channels_last, cudnn.benchmark) on the same network, batch and size
# beside it, in the same call. NETWORK=resnet18 SIZES=224:128 runs the torchvision
# layout instead (torchvision's resnet18 on PyTorch's side). CONVS="auto im2col" runs
# Tandem with its convolution engine choosing (and prints each layer's choice, its time
# and TFLOP/s) and with the engine off. Logs go to $OUT. Not a test: it asserts nothing.
set -u
G=${G:-$PWD/.gpu}
STEPS=${STEPS:-40}
SIZES=${SIZES:-32:512 64:256 128:128}
SPEC=${NETWORK:-"conv64k3p1,bn,relu,2*(res(conv64k3p1,bn,relu,conv64k3p1,bn),relu),res(conv128k3s2p1,bn,relu,conv128k3p1,bn),relu,res(conv128k3p1,bn,relu,conv128k3p1,bn),relu,res(conv256k3s2p1,bn,relu,conv256k3p1,bn),relu,res(conv256k3p1,bn,relu,conv256k3p1,bn),relu,res(conv512k3s2p1,bn,relu,conv512k3p1,bn),relu,res(conv512k3p1,bn,relu,conv512k3p1,bn),relu,gap,fc10"}
D=${DATA:-/tmp/r18data}
mkdir -p $D
python3 $G/bench_data.py $D "$SIZES"
for item in $SIZES; do
  side=${item%:*} batch=${item#*:}
  for conv in ${CONVS:-auto}; do
  tag=$side$([ $conv = auto ] || echo "-$conv")
  echo "== ${NETWORK:-ResNet-18 (CIFAR layout)}, $side px, batch $batch, bf16, convolutions: $conv"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > $OUT/smi-$tag.txt 2>/dev/null &
  smi=$!
  # The engine's choices (Tandem-Compute's debug lines) go to the .err file; TANDEM_CONV
  # unset lets it choose, im2col turns it off.
  env $([ $conv = auto ] || echo TANDEM_CONV=$conv) G_MESSAGES_DEBUG=Tandem-Compute \
  timeout 240 $G/bin/tandem-train --devices ${DEVICES:-cuda:0} --dataset $D/$side-$batch $([ $side = 32 ] || echo --image-size $side) \
    --network "$SPEC" --batch $batch --precision ${PRECISION:-bf16} --optimizer nesterov --lr 0.05 \
    --max-steps $STEPS --json --quiet > $OUT/r18-$tag.json 2> $OUT/r18-$tag.err
  echo "exit $?"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  python3 - $OUT/r18-$tag.json $OUT/smi-$tag.txt $side $batch $OUT/r18-$tag.err <<'PY'
import json, re, sys
path, smi, side, batch, err = sys.argv[1:]
rates, memories, tandem_bytes, failed, step_ops = [], [], 0, None, None
# Each timed choice: "cuda:0: fwd n512 h32 w32 c64 o64 k3 p1 s1 bf16 y16 → NAME (0.123 ms)"
# (GLib writes the arrow as "?" in a locale that is not UTF-8).
pattern = re.compile(r"(fwd|dgrad|wgrad) n(\d+) h(\d+) w(\d+) c(\d+) o(\d+) k(\d+) p(\d+) s(\d+)"
                     r"([^→?]*)(?:→|\?) (\S+) \(([\d.]+) ms")
# GLib prints debug lines to stdout, among the JSON lines: both files are read.
for line in list(open(err, errors="replace")) + list(open(path, errors="replace")):
    m = pattern.search(line)
    if not m:
        continue
    d, n, h, w, c, o, k, p, s = m.group(1), *map(int, m.groups()[1:9])
    if n != int(batch):
        continue  # the evaluation's and the last batch's shapes
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    flop = 2.0 * n * oh * ow * o * k * k * c
    ms = float(m.group(12))
    rate = f"{flop / ms / 1e9:7.1f} TFLOP/s" if ms > 0 else "  (cached)"
    print(f"  {d:5} n{n} {h}x{w}x{c}->{o} k{k} s{s}{m.group(10).rstrip():12} {m.group(11):18} {ms:8.4f} ms {rate}")
for line in open(path, errors="replace"):
    if not line.startswith("{"):
        continue
    e = json.loads(line)
    if e["type"] == "started" and "conv_choices" in e:
        print("  conv choices:", json.dumps(e["conv_choices"]))
    if e["type"] == "memory":
        memories.append(e)
    elif e["type"] == "step":
        rates.append(e["samples_per_second"])
    elif e["type"] == "devices":
        for d in e.get("devices", []):
            tandem_bytes = max(tandem_bytes, d.get("tandem_bytes") or 0)
        if e.get("devices"):
            step_ops = e["devices"][0]
    elif e["type"] == "failed":
        failed = e.get("message")
used = [int(x) for x in open(smi).read().split() if x.strip().isdigit()]
tail = sorted(rates[len(rates) // 2:])
print(f"tandem {side}px batch {batch}: samples/s median {tail[len(tail) // 2] if tail else None:.0f}"
      if tail else f"tandem {side}px batch {batch}: no steps")
# The estimate before the run, and again after the pre-warm sized the workspace by the
# convolutions' choices ("workspace_basis").
for memory in memories:
    print(f"  memory ({memory.get('workspace_basis')}): gpu_total {memory['gpu_total'] / 2**30:.2f} GiB; "
          f"eval_capacity {memory.get('eval_capacity')}; devices {json.dumps(memory['devices'][0])[:400]}")
print(f"  tandem_bytes peak {tandem_bytes / 2**30:.2f} GiB; driver peak {max(used) if used else None} MiB "
      f"(idle {min(used) if used else None} MiB)")
# A step's operations issued from the host and run from its graph (means over the run),
# and the host's time issuing a step it does not wait for (TDM_CUDA_GRAPHS=0: no graph).
if step_ops and "host_operations" in step_ops:
    print(f"  a step's operations: host {step_ops['host_operations']:.1f}, graph "
          f"{step_ops['graph_operations']:.1f}; host issuing a step "
          f"{step_ops.get('issue_ms', float('nan')):.3f} ms")
if failed:
    print("  failed:", failed)
PY
  done
  if [ "${TORCH:-0}" = 1 ]; then
    timeout 200 python3 - $side $batch $STEPS "$SPEC" <<'PY'
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
side, batch, steps = map(int, sys.argv[1:4])
torch.backends.cudnn.benchmark = True
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
if sys.argv[4] in ("resnet18", "resnet34", "resnet50"):
    import torchvision
    net = getattr(torchvision.models, sys.argv[4])(num_classes=10)
net = net.cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
x = torch.rand(batch, 3, side, side, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 10, (batch,), device="cuda")
base = torch.cuda.memory_allocated()
torch.cuda.reset_peak_memory_stats()
def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(net(x), y)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
for _ in range(10):
    step()
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(steps):
    step()
torch.cuda.synchronize()
dt = time.perf_counter() - t
print(f"torch {sys.argv[4][:12]} {side}px batch {batch}: samples/s {steps * batch / dt:.0f}; peak "
      f"{(torch.cuda.max_memory_allocated() - base) / 2**30:.2f} GiB above the data")
PY
  fi
done
