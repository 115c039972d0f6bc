#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-interop.sh — weights and checkpoints that travel: a checkpoint moved with its
# dataset (found relative to the checkpoint), moved without it (found where it was),
# or with neither there (one line naming --dataset, exit 2; --dataset then resumes);
# a run started from --init FILE resumes after FILE moved; --init torchvision without
# torchvision's file names the file and where to put it. With python3-torch: --init
# of a .pth file that torch.save wrote, --init torchvision from a fake torch.hub folder
# classifying and exporting ONNX, and a whole pickled module refused in one line.
# With python3-pil and python3-onnx: the README's Python preprocessing gives, through
# an exported model, Tandem's own probabilities on JPEG and PNG files of other sizes
# than the network's (onnx-preprocess-check.py).
# TAP on stdout; meson passes tandem-train, image-helper and whether this build has
# ONNX export (1 or 0).
set -u
train=${1:?usage: test-cli-interop.sh TANDEM-TRAIN IMAGE-HELPER ONNX-ENABLED}
helper=${2:?}
onnx=${3:-0}
here=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/cli-common.sh"
cli_scratch cli-interop
export TORCH_HOME="$tmp/torch-home"
# expect_bad_all NAME ARGS… (with PATTERNS in $patterns): exit 2, one stderr line holding
# every pattern.
expect_bad_all() {
  local name=$1
  shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local status=$? lines pattern
  lines=$(wc -l <"$tmp/err")
  for pattern in "${patterns[@]}"; do
    if ! grep -qF -- "$pattern" "$tmp/err"; then
      not_ok "$name" "status $status, no “$pattern” in:" "$(cat "$tmp/err")"
      return
    fi
  done
  if [ $status -eq 2 ] && [ "$lines" -eq 1 ]; then
    ok "$name"
  else
    not_ok "$name" "status $status, $lines lines:" "$(cat "$tmp/err")"
  fi
}
# expect_ok NAME ARGS…: exit 0.
expect_ok() {
  local name=$1
  shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then
    ok "$name"
  else
    not_ok "$name" "status $?" "$(cat "$tmp/err")"
  fi
}

echo "1..15"
common=(--network fc8,relu,fc3 --batch 6 --quiet --seed 5)

# --- a checkpoint and its dataset ---------------------------------------------------

mkdir -p "$tmp/project" "$tmp/elsewhere"
"$helper" "$tmp/project" || { echo "Bail out! image-helper failed"; exit 1; }
# Trained from inside the project, the dataset given relative to it.
(cd "$tmp/project" && "$train" --dataset good "${common[@]}" --epochs 1 --save run.st) \
  2>"$tmp/err" || { echo "Bail out! training failed: $(cat "$tmp/err")"; exit 1; }

# The checkpoint copied elsewhere alone: the dataset is where it was.
cp "$tmp/project/run.st" "$tmp/elsewhere/alone.st"
expect_ok "a checkpoint copied elsewhere finds its dataset where it was" \
  "$train" --resume "$tmp/elsewhere/alone.st" --epochs 2 --quiet

# The whole project moved: the dataset beside the checkpoint, as it was. (Saved
# elsewhere, so that run.st keeps the places it was written with.)
mv "$tmp/project" "$tmp/moved"
expect_ok "a project moved with its checkpoint finds the dataset beside it" \
  "$train" --resume "$tmp/moved/run.st" --epochs 2 --quiet --save "$tmp/resaved.st"

# Neither: one line naming both places and --dataset; then --dataset resumes.
mkdir "$tmp/hidden"
mv "$tmp/moved/good" "$tmp/hidden/good"
patterns=("--resume $tmp/moved/run.st" "$tmp/project/good" "$tmp/moved/good" "--dataset FOLDER")
expect_bad_all "a dataset found nowhere: the places tried and --dataset" \
  "$train" --resume "$tmp/moved/run.st" --epochs 3
expect_ok "--dataset gives the moved dataset's folder" \
  "$train" --resume "$tmp/moved/run.st" --dataset "$tmp/hidden/good" --epochs 3 --quiet \
  --save "$tmp/resaved.st"
mv "$tmp/hidden/good" "$tmp/moved/good"

# --- --init, and resuming after its file moved ------------------------------------

cd "$tmp"
expect_ok "a run started from --init FILE" \
  "$train" --dataset moved/good "${common[@]}" --max-steps 2 --init moved/run.st \
  --save started.st
mv moved/run.st moved/gone.st
expect_ok "resumes after the --init file moved" \
  "$train" --resume started.st --max-steps 4 --quiet

patterns=("resnet18-f37072fd.pth" "$TORCH_HOME/hub/checkpoints" "download.pytorch.org"
          "--init FILE.pth")
expect_bad_all "--init torchvision without its file: which file, and where" \
  "$train" --network resnet18 --init torchvision --classify "$tmp/moved/good/ant/000.png"
patterns=("resnet18, resnet34 and resnet50" "“cnn”")
expect_bad_all "--init torchvision for another network" \
  "$train" --network cnn --image-size 28 --color grey --init torchvision \
  --classify "$tmp/moved/good/ant/000.png"

# --- the README's preprocessing for an exported model ----------------------------

pil=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import PIL, numpy, onnx' 2>/dev/null; then pil=$p; break; fi
done
if [ -z "$pil" ] || [ "$onnx" != 1 ]; then
  skip "a model exported for the README's preprocessing" "needs python3-pil, python3-onnx and ONNX export"
  skip "the README's preprocessing gives Tandem's probabilities" "needs python3-pil, python3-onnx and ONNX export"
else
  "$pil" - "$tmp" <<'PY'
import sys
import numpy as np
from PIL import Image
out = sys.argv[1]
y, x = np.mgrid[0:97, 0:131]
rgb = np.stack([(x * 2) % 256, (y * 3 + x) % 256, (128 + 60 * np.sin(x / 7.0) * np.cos(y / 5.0))],
               axis=-1).astype(np.uint8)
Image.fromarray(rgb).save(out + "/photo.jpg", quality=90)        # JPEG, DCT-scaled to 12
Image.fromarray(rgb[:31, :45]).save(out + "/crop.png")            # PNG, 45 × 31
Image.fromarray(rgb[:20, :17]).convert("RGBA").save(out + "/alpha.png")
Image.fromarray(rgb[:13, :40, 1]).save(out + "/grey.jpg", quality=95)
PY
  "$train" --dataset moved/good --color rgb --image-size 12 --network conv4k3p1,relu,pool2,fc3 \
    --normalize dataset --epochs 2 --batch 6 --quiet --save pre.st &&
    "$train" --resume pre.st --export-onnx pre.onnx --quiet 2>"$tmp/err"
  if [ $? -eq 0 ]; then
    ok "a model exported for the README's preprocessing"
  else
    not_ok "a model exported for the README's preprocessing" "$(cat "$tmp/err")"
  fi
  "$train" --resume pre.st --classify photo.jpg crop.png alpha.png grey.jpg --json --top 3 \
    >classified.jsonl 2>"$tmp/err" &&
    "$pil" "$here/onnx-preprocess-check.py" "$here/../../README.md" pre.onnx \
      classified.jsonl >"$tmp/out" 2>&1
  if [ $? -eq 0 ]; then
    ok "the README's preprocessing gives Tandem's probabilities: $(cat "$tmp/out")"
  else
    not_ok "the README's preprocessing gives Tandem's probabilities" "$(cat "$tmp/out" "$tmp/err")"
  fi
fi

# --- .pth files from torch.save -------------------------------------------------

python=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import torch, torchvision' 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ]; then
  for i in $(seq $((n + 1)) 15); do skip "torch.save's files" "python3-torch is not installed"; done
  exit $((failed > 0))
fi
mkdir -p "$TORCH_HOME/hub/checkpoints"
"$python" - "$tmp" <<'PY' || { echo "Bail out! torch failed"; exit 1; }
import sys, torch, torchvision
out = sys.argv[1]
torch.manual_seed(0)
net = torch.nn.Sequential()
net.add_module("fc1", torch.nn.Linear(100, 8))
net.add_module("relu", torch.nn.ReLU())
net.add_module("fc2", torch.nn.Linear(8, 3))
torch.save(net.state_dict(), out + "/fc.pth")
torch.save(net, out + "/module.pth")
model = torchvision.models.resnet18()
torch.save(model.state_dict(), out + "/torch-home/hub/checkpoints/resnet18-f37072fd.pth")
PY

"$train" --dataset moved/good --network fc8,relu,fc3 --batch 6 --max-steps 1 --init fc.pth \
  >"$tmp/out" 2>&1
if [ $? -eq 0 ] && grep -q -- "--init: loaded 4 of the network's 4 tensors" "$tmp/out"; then
  ok "--init of a .pth file torch.save wrote loads every tensor"
else
  not_ok "--init of a .pth file torch.save wrote loads every tensor" "$(cat "$tmp/out")"
fi
patterns=("module.pth" "torch.nn.modules.container.Sequential" "model.state_dict()")
expect_bad_all "a whole pickled module: refused in one line, naming its class" \
  "$train" --dataset moved/good "${common[@]}" --max-steps 1 --init module.pth
"$train" --network resnet18 --init torchvision --classify moved/good/ant/000.png --top 2 \
  >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q "^moved/good/ant/000.png: " "$tmp/out"; then
  ok "--init torchvision classifies with torch.hub's resnet18 file"
else
  not_ok "--init torchvision classifies with torch.hub's resnet18 file" "$(cat "$tmp/out" "$tmp/err")"
fi
if [ "$onnx" = 1 ]; then
  expect_ok "--export-onnx from --network resnet18 --init torchvision" \
    "$train" --network resnet18 --init torchvision --export-onnx "$tmp/r18.onnx" --quiet
  if [ -s "$tmp/r18.onnx" ]; then
    ok "the ONNX file is written"
  else
    not_ok "the ONNX file is written" "$(cat "$tmp/err")"
  fi
else
  skip "--export-onnx from --init torchvision" "this build has no ONNX export"
  skip "the ONNX file is written" "this build has no ONNX export"
fi
exit $((failed > 0))
