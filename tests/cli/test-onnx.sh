#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-onnx.sh — tandem-train --resume FILE --export-onnx MODEL: bad input (one line,
# exit 2, an existing file left as it was), then the mlp, cnn and resnet presets and
# specs that between them hold every kind of layer, and a run with --normalize, each
# trained briefly, exported, passed through onnx.checker and evaluated outside Tandem
# (onnx-check.py: numpy, and onnxruntime where installed) against the engine's own
# logits on test images.
# TAP on stdout; meson passes tandem-train, onnx-helper, onnx-check.py and whether
# this build has ONNX export (1 or 0).
set -u
train=${1:?usage: test-onnx.sh TANDEM-TRAIN ONNX-HELPER ONNX-CHECK ENABLED}
helper=${2:?}
check=${3:?}
enabled=${4:?}
. "$(dirname "$0")/cli-common.sh"
cli_scratch onnx

# name, dataset, network: the presets on 28 × 28 grey, and on 12 × 12 RGB specs that
# cover conv with stride, padding and without bias, max, average and global pools,
# bn of images and of features, dropout, scale, explicit and implicit flatten,
# residual blocks with and without a projection (conv on images, fc on features).
cases=(
  "mlp grey10 mlp"
  "cnn grey10 cnn"
  "resnet grey10 resnet"
  "blocks rgb3 conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,pool2,flatten,bn,drop0.25,fc24,relu,fc3,scale0.5"
  "strided rgb3 conv8k5s2p2nb,relu,avg2,conv12k2,relu,fc3"
  "features rgb3 conv8k3p1,relu,res(conv8k3,relu,conv8k3p2),gmp,res(fc8,relu),res(fc16),gap,bn,fc3"
  "normalized rgb3 conv8k3p1,bn,relu,pool2,fc3"
)
# Cases trained with options of their own: a run with --normalize saves its mean and
# std in the checkpoint, and the graph must apply them as the run's gather did.
declare -A options=([normalized]="--normalize dataset")
total=$((6 + 3 * ${#cases[@]} + 3))
echo "1..$total"

"$helper" folders "$tmp" || { echo "Bail out! onnx-helper folders failed"; exit 1; }
"$train" --dataset "$tmp/rgb3" --network fc8,relu,fc3 --epochs 1 --batch 6 --quiet \
  --save "$tmp/small.st" 2>"$tmp/err" || { echo "Bail out! training failed: $(cat "$tmp/err")"; exit 1; }

# --- bad input --------------------------------------------------------------------

expect_bad_text "--export-onnx needs --resume" "--export-onnx: needs --resume" \
  --export-onnx "$tmp/x.onnx"
if [ "$enabled" != 1 ]; then
  expect_bad_text "a build without protobuf-c says so" "built without ONNX export" \
    --resume "$tmp/small.st" --export-onnx "$tmp/x.onnx"
  for i in $(seq $((n + 1)) "$total"); do
    skip "export" "this build has no ONNX export (protobuf-c missing)"
  done
  exit 0
fi
expect_bad_text "a folder that does not exist" \
  "--export-onnx: $tmp/nowhere/m.onnx: cannot write there: the folder $tmp/nowhere does not exist" \
  --resume "$tmp/small.st" --export-onnx "$tmp/nowhere/m.onnx"
expect_bad_text "a folder as the file" "--export-onnx: $tmp: is a folder" \
  --resume "$tmp/small.st" --export-onnx "$tmp"
expect_bad_text "the checkpoint itself" "is the checkpoint being exported" \
  --resume "$tmp/small.st" --export-onnx "$tmp/small.st"

# A checkpoint that does not load: blamed on --resume, and a model already at the
# path stays as it was. (Read-only folders are tried where they stop us: not as root.)
printf 'not a checkpoint' >"$tmp/bad.st"
printf 'keep me' >"$tmp/kept.onnx"
"$train" --resume "$tmp/bad.st" --export-onnx "$tmp/kept.onnx" 2>"$tmp/err"
status=$?
if [ $status -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "--resume: .*bad.st" "$tmp/err" &&
   [ "$(cat "$tmp/kept.onnx")" = "keep me" ]; then
  ok "a checkpoint that does not load: one line, exit 2, the old file kept"
else
  not_ok "a checkpoint that does not load: one line, exit 2, the old file kept" \
    "status $status" "$(cat "$tmp/err")" "$(head -c 40 "$tmp/kept.onnx")"
fi
if [ "$(id -u)" -ne 0 ]; then
  mkdir "$tmp/locked" && chmod 555 "$tmp/locked"
  expect_bad_text "a folder that cannot be written" "cannot write in the folder $tmp/locked" \
    --resume "$tmp/small.st" --export-onnx "$tmp/locked/m.onnx"
else
  skip "a folder that cannot be written" "running as root, who writes anywhere"
fi

# --- each network: export, check, compare -------------------------------------------

python=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import onnx, numpy' 2>/dev/null; then python=$p; break; fi
done

for c in "${cases[@]}"; do
  read -r name set network <<<"$c"
  st="$tmp/$name.st" model="$tmp/$name.onnx"
  read -r -a opts <<<"${options[$name]:-}"
  "$train" --dataset "$tmp/$set" --network "$network" --epochs 1 --batch 8 --quiet \
    "${opts[@]}" --save "$st" 2>"$tmp/err" &&
    "$train" --resume "$st" --export-onnx "$model" 2>"$tmp/err"
  status=$?
  if [ $status -eq 0 ] && [ -s "$model" ] && grep -q "wrote $model" "$tmp/err"; then
    ok "$name: trained and exported"
  else
    not_ok "$name: trained and exported" "status $status" "$(cat "$tmp/err")"
    skip "$name: the same file again" "no export"
    skip "$name: onnx.checker and Tandem's logits" "no export"
    continue
  fi
  # The same checkpoint gives the same bytes (through the export command, as through
  # --export-onnx), and a second export replaces the first whole, leaving no
  # temporary behind.
  cp "$model" "$tmp/first.onnx"
  "$train" export --resume "$st" "$model" --quiet 2>"$tmp/err"
  status=$?
  leftovers=$(find "$tmp" -maxdepth 1 -name "$name.onnx?*" | wc -l)
  if [ $status -eq 0 ] && cmp -s "$model" "$tmp/first.onnx" && [ "$leftovers" -eq 0 ] &&
     [ ! -s "$tmp/err" ]; then
    ok "$name: the same file again, no temporary left"
  else
    not_ok "$name: the same file again, no temporary left" "status $status, $leftovers left" \
      "$(cat "$tmp/err")"
  fi
  if [ -z "$python" ]; then
    skip "$name: onnx.checker and Tandem's logits" "no python3 with onnx and numpy"
    continue
  fi
  if [ "$set" = grey10 ]; then
    images=("$tmp"/grey10/test/c*/*.png)
    shape="28 28 1"
  else
    images=("$tmp"/rgb3/*/00[0-3].png)
    shape="12 12 3"
  fi
  extra=()
  if [ "$name" = blocks ]; then
    "$helper" normalized "$st" "$tmp/$name-normalized.onnx" && extra=(--normalized "$tmp/$name-normalized.onnx")
  fi
  if "$helper" logits "$st" "$tmp/samples" "$tmp/logits" "${images[@]}" 2>"$tmp/err" &&
     "$python" "$check" "$model" "$tmp/samples" "$tmp/logits" $shape "${extra[@]}" \
       >"$tmp/out" 2>&1; then
    ok "$name: onnx.checker and Tandem's logits on ${#images[@]} images"
    sed 's/^/# /' "$tmp/out"
  else
    not_ok "$name: onnx.checker and Tandem's logits" "$(cat "$tmp/err" "$tmp/out")"
  fi
done

# --- the checkpoint's metadata travels ----------------------------------------------

if [ -n "$python" ]; then
  if "$python" - "$tmp/cnn.onnx" "$tmp/blocks.onnx" >"$tmp/out" 2>&1 <<'EOF'
import json, sys, onnx
cnn, blocks = (onnx.load(p) for p in sys.argv[1:3])
props = {p.key: p.value for p in blocks.metadata_props}
assert json.loads(props["class_names"]) == ["ant", "bee", "cat"], props
assert props["network"].startswith("conv8k3p1,bn,relu,res("), props
inputs = [(d.dim_param or d.dim_value) for d in cnn.graph.input[0].type.tensor_type.shape.dim]
assert inputs == ["batch", 1, 28, 28], inputs
names = {t.name for t in cnn.graph.initializer}
assert {"conv1.weight", "conv1.bias", "fc2.weight"} <= names, names
assert not any(n.op_type == "Dropout" for n in blocks.graph.node)
EOF
  then
    ok "class names, spec, input shape and PyTorch's tensor names are in the file"
  else
    not_ok "class names, spec, input shape and PyTorch's tensor names are in the file" \
      "$(cat "$tmp/out")"
  fi
else
  skip "class names, spec, input shape and PyTorch's tensor names are in the file" \
    "no python3 with onnx"
fi

# The classifier (which the export loads checkpoints through) reads a network that
# ends in scale items, as the resnet preset does.
"$train" --resume "$tmp/resnet.st" --classify "$tmp/grey10/test/c3/000.png" >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q "000.png: c" "$tmp/out"; then
  ok "--classify with the resnet preset's checkpoint"
else
  not_ok "--classify with the resnet preset's checkpoint" "$(cat "$tmp/out" "$tmp/err")"
fi

"$train" --resume "$tmp/small.st" --export-onnx "$tmp/q.onnx" --classify "$tmp/rgb3/ant/000.png" \
  >/dev/null 2>"$tmp/err"
if [ $? -eq 2 ] && grep -q -- "--export-onnx: cannot be combined with --classify" "$tmp/err"; then
  ok "--export-onnx with --classify is refused"
else
  not_ok "--export-onnx with --classify is refused" "$(cat "$tmp/err")"
fi
