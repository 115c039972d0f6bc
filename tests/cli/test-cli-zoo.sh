#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-zoo.sh — tandem-train starting from weights: --init loads a checkpoint's
# tensors by name and shape and says so, classifies with --network and --init without
# training, and every bad input (a file that matches nothing, tensors of the wrong
# shape, a head of another class count when classifying, --freeze of a module that
# does not exist, a bad --lr-scale or --normalize) gives one clear line and exit 2.
# The safetensors files are written by a few lines of plain Python (no torch).
# TAP on stdout; meson passes the path of tandem-train as $1.
set -u
train=${1:?usage: test-cli-zoo.sh PATH-TO-TANDEM-TRAIN}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-cli-zoo-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}

echo "1..11"
common=(--dataset synthetic --devices cpu --batch 32 --epochs 1 --quiet --seed 3)

# A cnn checkpoint to start from (two steps of training).
"$train" "${common[@]}" --network cnn --max-steps 2 --save "$tmp/cnn.st" >"$tmp/out" 2>&1
if [ $? -eq 0 ] && [ -s "$tmp/cnn.st" ]; then
  ok "a cnn checkpoint to start from"
else
  not_ok "a cnn checkpoint to start from" "$(cat "$tmp/out")"
fi

# --init from it: every tensor loads, and the run says so.
"$train" --dataset synthetic --devices cpu --batch 32 --epochs 1 --seed 3 --network cnn \
  --max-steps 1 --init "$tmp/cnn.st" >"$tmp/out" 2>&1
if [ $? -eq 0 ] && grep -q -- "--init: loaded 8 of the network's 8 tensors" "$tmp/out"; then
  ok "--init loads every matching tensor and says how many"
else
  not_ok "--init loads every matching tensor and says how many" "$(cat "$tmp/out")"
fi

# Frozen convolutions with a smaller rate for the first fc.
"$train" "${common[@]}" --network cnn --max-steps 2 --init "$tmp/cnn.st" \
  --freeze conv1,conv2 --lr-scale fc1=0.1 >"$tmp/out" 2>&1
if [ $? -eq 0 ]; then
  ok "--freeze and --lr-scale train"
else
  not_ok "--freeze and --lr-scale train" "$(cat "$tmp/out")"
fi

# --classify with --network and --init (no run) gives what the run's own checkpoint
# gives: the same probabilities.
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
if $py -c "import PIL" 2>/dev/null; then
  $py -c "
from PIL import Image
Image.frombytes('L', (28, 28), bytes((i * 7) % 256 for i in range(784))).save('$tmp/digit.png')"
  "$train" --network cnn --image-size 28 --color grey --init "$tmp/cnn.st" \
    --classify "$tmp/digit.png" --json >"$tmp/init.json" 2>"$tmp/err"
  s1=$?
  "$train" --resume "$tmp/cnn.st" --classify "$tmp/digit.png" --json >"$tmp/resume.json" 2>>"$tmp/err"
  s2=$?
  p1=$(grep -o '"probability" *: *[0-9.e-]*' "$tmp/init.json")
  p2=$(grep -o '"probability" *: *[0-9.e-]*' "$tmp/resume.json")
  if [ $s1 -eq 0 ] && [ $s2 -eq 0 ] && [ -n "$p1" ] && [ "$p1" = "$p2" ]; then
    ok "--classify with --network and --init predicts what the checkpoint predicts"
  else
    not_ok "--classify with --network and --init predicts what the checkpoint predicts" \
      "status $s1 $s2" "$p1" "$p2" "$(cat "$tmp/err")"
  fi
else
  ok "# skip --classify with --init: python3-pil is not installed"
fi

# Safetensors files written by hand: names and shapes as given.
write_st() {
  python3 - "$@" <<'PY'
import json, struct, sys
path, tensors = sys.argv[1], sys.argv[2:]
header, data = {}, b""
for t in tensors:
    name, shape = t.split(":")
    shape = [int(v) for v in shape.split("x")] if shape else []
    count = 1
    for v in shape:
        count *= v
    blob = struct.pack("<%df" % count, *([0.01] * count))
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
text = json.dumps(header).encode()
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
PY
}

# bad: one line on stderr naming the culprit, exit 2.
expect_bad() {
  local what=$1 pattern=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local status=$?
  if [ $status -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$pattern" "$tmp/err"; then
    ok "$what"
  else
    not_ok "$what" "status $status" "$(cat "$tmp/err")"
  fi
}

write_st "$tmp/nothing.st" "encoder.weight:4x4" "decoder.bias:4"
expect_bad "--init of a file that matches nothing" "none of its 2 tensors matches" \
  "$train" "${common[@]}" --network cnn --init "$tmp/nothing.st"

write_st "$tmp/shape.st" "conv1.weight:32x1x5x5" "conv1.bias:32"
expect_bad "--init with a tensor of the wrong shape" "conv1.weight” is \[32, 1, 5, 5\], but the network's is \[32, 1, 3, 3\]" \
  "$train" "${common[@]}" --network cnn --init "$tmp/shape.st"

expect_bad "--classify with a head of another class count" "fc2.weight” is \[10, 128\], but the network's head is \[4, 128\]" \
  "$train" --network "conv32k3p1,relu,pool2,conv64k3p1,relu,pool2,fc128,relu,fc4" \
  --image-size 28 --color grey --init "$tmp/cnn.st" --classify "$tmp/none.png"

expect_bad "--freeze of a module that does not exist" "--freeze “layer9”: no module of the network is called “layer9”" \
  "$train" "${common[@]}" --network cnn --freeze layer9

expect_bad "--freeze above a trained layer" "“fc2” is frozen but comes after “conv1”" \
  "$train" "${common[@]}" --network cnn --freeze fc2

expect_bad "--lr-scale without a factor" "--lr-scale “conv1”: give PREFIX=X" \
  "$train" "${common[@]}" --network cnn --lr-scale conv1

expect_bad "--normalize of unreadable values" "--normalize “0.5/0”" \
  "$train" "${common[@]}" --network cnn --normalize 0.5/0

exit $((failed > 0))
