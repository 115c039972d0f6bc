#!/bin/bash
# Issue 10's GPU benchmark, run on the lent H200 from .gpu/ (tools/gpu-prepare copies
# this script there): time to 94 % on Fashion-MNIST (training seconds, evaluation
# excluded, three seeds) of Tandem's resnet preset and of a ResNet-9-style spec
# ("myrtle") in bf16, beside PyTorch eager with bf16 autocast on the same networks
# and recipe (bench/torch_reference.py --time-to-accuracy); then samples/s at batch 512
# in fp32, tf32 and bf16 (bench-train, which prints the achieved TFLOP/s). Logs go
# to $OUT. Not a test: it asserts nothing.
set -u
G=${G:-$PWD/.gpu}
MYRTLE="conv32k3p1,bn,relu,conv64k3p1,bn,relu,pool2,res(conv64k3p1,bn,relu,conv64k3p1,bn,relu),conv128k3p1,bn,relu,pool2,conv256k3p1,bn,relu,pool2,res(conv256k3p1,bn,relu,conv256k3p1,bn,relu),gmp,fc10"
# The preset's recipe, spelled out for a spec (a spec brings none).
RECIPE="--epochs 10 --batch 512 --optimizer nesterov --lr 0.2 --momentum 0.9 --weight-decay 5e-4 --weight-decay-on weights --schedule linear --warmup 1 --label-smoothing 0.1 --crop 2 --flip on"
SEEDS=${SEEDS:-0 1 2}

to94() { # name, then tandem-train's arguments
  local name=$1
  shift
  for seed in $SEEDS; do
    timeout 120 $G/bin/tandem-train --devices cuda:0 --json --quiet --seed $seed "$@" \
      > $OUT/t94-$name-$seed.json 2> $OUT/t94-$name-$seed.err
    python3 - "$name" "$seed" $OUT/t94-$name-$seed.json <<'PY'
import json, sys
name, seed, path = sys.argv[1:]
first, accs, trained = None, [], 0.0
for line in open(path):
    e = json.loads(line)
    if e.get("type") == "epoch":
        accs.append(e["test_accuracy"])
        trained = e["elapsed"]
        if first is None and e["test_accuracy"] >= 0.94:
            first = e["elapsed"]
print(f"tandem {name} seed={seed} first={first} final={accs[-1] if accs else None} "
      f"trained={trained:.3f} accs={' '.join(f'{a:.4f}' for a in accs)}", flush=True)
PY
  done
}

echo "== time to 94 %, Tandem bf16"
to94 resnet --network resnet --precision bf16 | tee -a $OUT/t94.txt
to94 myrtle --network "$MYRTLE" $RECIPE --batchnorm sync --precision bf16 | tee -a $OUT/t94.txt
echo "== time to 94 %, PyTorch eager bf16 autocast"
for net in resnet myrtle; do
  for seed in $SEEDS; do
    echo "torch $net seed=$seed $(timeout 100 python3 $G/torch_reference.py --device cuda \
      --network $net --batch 512 --precision bf16 --time-to-accuracy --seed $seed 2>&1 |
      tr '\n' ' ')" | tee -a $OUT/t94.txt
  done
done
echo "== samples/s at batch 512"
for p in fp32 tf32 bf16; do
  timeout 150 $G/bin/bench-train --devices cuda:0 --network resnet --batch 512 --repeat 2 \
    --precision $p --torch 2>&1 | tail -4 | tee -a $OUT/throughput.txt
  timeout 150 $G/bin/bench-train --devices cuda:0 --network "$MYRTLE" --batch 512 --repeat 2 \
    --precision $p 2>&1 | tail -2 | tee -a $OUT/throughput.txt
done
