#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-hardening.sh — tandem-train against the second round of hostile inputs,
# each made here: stdout on a full disk (--json, --classify, --list-devices, --help),
# values a resumed checkpoint gave (a device, a relative dataset path, another
# dataset, a network over 4,096 layers) named as the checkpoint's, a renamed dataset
# folder known by its content, paces out of
# bounds, option values that are not UTF-8, flags that do not apply, specs and
# checkpoint headers nested 100,000 deep, class names with escape codes, NaN weights,
# a save onto a dangling link. One line and exit 2 (1 for a failure while running)
# each. TAP on stdout; meson passes the paths of tandem-train and image-helper.
set -u
train=${1:?usage: test-cli-hardening.sh TANDEM-TRAIN IMAGE-HELPER}
helper=${2:?usage: test-cli-hardening.sh TANDEM-TRAIN IMAGE-HELPER}
. "$(dirname "$0")/cli-common.sh"
cli_scratch cli-hardening
export XDG_DATA_HOME="$tmp/data"
# full NAME ARGS…: stdout to /dev/full gives exit 1 and a message saying so.
full() {
  local name=$1
  shift
  "$train" "$@" >/dev/full 2>"$tmp/err" </dev/null
  local status=$?
  if [ $status -eq 1 ] && grep -q "cannot write to the standard output" "$tmp/err"; then
    ok "$name"
  else
    not_ok "$name" "status $status:" "$(head -c 600 "$tmp/err")"
  fi
}

have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1
# rewrite IN OUT PYTHON: the checkpoint's metadata dict `m` (and its decoded run
# configuration `c`) changed by the Python statements, written to OUT.
rewrite() {
  python3 - "$1" "$2" "$3" <<'EOF'
import json, struct, sys
src, dst, code = sys.argv[1:4]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
m = header["__metadata__"]
c = json.loads(m["config"])
exec(code)
m["config"] = json.dumps(c)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
EOF
}

echo "1..30"
"$helper" "$tmp" || { echo "Bail out! image-helper failed"; exit 1; }
run=(--epochs 1 --batch 6 --network fc8,relu,fc3 --quiet)
"$train" --dataset "$tmp/good" "${run[@]}" --save "$tmp/good.st" 2>"$tmp/err" ||
  { echo "Bail out! a first run failed: $(cat "$tmp/err")"; exit 1; }

# --- stdout on a full disk ------------------------------------------------------------

full "--help > /dev/full: exit 1 with a message" --help
full "--list-devices > /dev/full: exit 1 with a message" --list-devices
full "--json > /dev/full: exit 1 with a message" --dataset synthetic --network fc10 \
  --max-steps 2 --json
full "--classify > /dev/full: exit 1 with a message" --resume "$tmp/good.st" \
  --classify "$tmp/good/ant/000.png"

# --- values from a checkpoint are named as its own -----------------------------------

expect 2 "--resume on another dataset names both datasets, not --network" \
  "“good”.*“Synthetic”\|“good”.*“synthetic”" --resume "$tmp/good.st" --dataset synthetic
if ! grep -q -- "--network" "$tmp/err"; then ok "… and does not blame --network"
else not_ok "… and does not blame --network" "$(cat "$tmp/err")"; fi

mkdir -p "$tmp/here/data" "$tmp/elsewhere"
cp -r "$tmp/good" "$tmp/here/data/medium"
(cd "$tmp/here" && "$train" --dataset data/medium "${run[@]}" --save ../rel.st 2>"$tmp/err") ||
  { echo "Bail out! a relative run failed: $(cat "$tmp/err")"; exit 1; }
# Resumed from another folder, the checkpoint finds its dataset where it was; with the
# dataset gone, the message names the checkpoint, the places tried and --dataset.
mv "$tmp/here/data/medium" "$tmp/here/data/gone"
(cd "$tmp/elsewhere" && "$train" --resume ../rel.st --max-steps 1 >"$tmp/out" 2>"$tmp/err")
status=$?
if [ $status -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "--resume ../rel.st" "$tmp/err" &&
   grep -q "data/medium" "$tmp/err" && grep -q -- "--dataset FOLDER" "$tmp/err"; then
  ok "a dataset gone from where a checkpoint saw it: the checkpoint, the places and --dataset named"
else
  not_ok "a dataset gone from where a checkpoint saw it: the checkpoint, the places and --dataset named" \
    "status $status" "$(cat "$tmp/err")"
fi
# Given with --dataset, the renamed folder is the dataset it was: known by its content
# (shape, classes, training samples of each), not by its name. The run goes on from
# the checkpoint's step (5: one epoch of 30 samples in batches of 6).
(cd "$tmp/elsewhere" && "$train" --resume ../rel.st --dataset ../here/data/gone --epochs 2 \
   --save "$tmp/moved.st" --json >"$tmp/out" 2>"$tmp/err")
status=$?
if [ $status -eq 0 ] && [ ! -s "$tmp/err" ] &&
   grep -q '"type":"started".*"start_step":5,.*"dataset":"gone"' "$tmp/out"; then
  ok "--resume with --dataset at the renamed folder goes on from the checkpoint's step"
else
  not_ok "--resume with --dataset at the renamed folder goes on from the checkpoint's step" \
    "status $status" "$(cat "$tmp/err")" "$(grep '"started"' "$tmp/out" | head -c 600)"
fi
# A folder of the same name with other content is another dataset: one sample fewer,
# or a class renamed, each said.
mkdir -p "$tmp/fewer" "$tmp/renamed"
cp -r "$tmp/here/data/gone" "$tmp/fewer/medium"
rm "$tmp/fewer/medium/bee/000.png"
expect 2 "--resume on a folder of its name with a sample fewer: the class and its counts named" \
  "“medium”, but this run uses “medium”, another one (its class “bee” had [0-9]* training samples" \
  --resume "$tmp/rel.st" --dataset "$tmp/fewer/medium" --epochs 2
cp -r "$tmp/here/data/gone" "$tmp/renamed/medium"
mv "$tmp/renamed/medium/cat" "$tmp/renamed/medium/cow"
expect 2 "--resume on a folder of its name with a class renamed: both names said" \
  "its class 2 was “cat”, this run's is “cow”" \
  --resume "$tmp/rel.st" --dataset "$tmp/renamed/medium" --epochs 2
mv "$tmp/here/data/gone" "$tmp/here/data/medium"

if [ $have_python -eq 1 ]; then
  rewrite "$tmp/good.st" "$tmp/cuda99.st" 'c["devices"] = ["cuda:99"]'
  expect 2 "a cuda:99 saved in a checkpoint is the checkpoint's, not --devices" \
    "cuda:99" --resume "$tmp/cuda99.st" --max-steps 1
  if grep -q "checkpoint $tmp/cuda99.st" "$tmp/err" && ! grep -q "tandem-train: --devices" "$tmp/err"
  then ok "… naming the checkpoint"; else not_ok "… naming the checkpoint" "$(cat "$tmp/err")"; fi

  rewrite "$tmp/good.st" "$tmp/long.st" \
    'c["network"] = ",".join(["fc4"] * 300000 + ["fc3"]); m["network"] = c["network"]'
  expect 2 "a saved spec over 4,096 layers: one short line" "more than 4096 layers" \
    --resume "$tmp/long.st" --max-steps 1

  rewrite "$tmp/good.st" "$tmp/deepspec.st" \
    'c["network"] = "(" * 1000000 + "fc8" + ")" * 1000000 + ",fc3"; m["network"] = c["network"]'
  expect 2 "a saved spec nested 10⁶ deep (--resume)" "nest deeper than" \
    --resume "$tmp/deepspec.st" --max-steps 1
  expect 2 "a saved spec nested 10⁶ deep (--classify)" "nest deeper than" \
    --resume "$tmp/deepspec.st" --classify "$tmp/good/ant/000.png"

  rewrite "$tmp/good.st" "$tmp/escape.st" \
    'm["class_names"] = json.dumps(["\x1b[31mant\x1b[0m", "new\nline", "cat\x9b2J"])'
  "$train" --resume "$tmp/escape.st" --classify "$tmp/good/ant/000.png" --top 3 \
    >"$tmp/out" 2>"$tmp/err"
  status=$?
  if [ $status -eq 0 ] && ! LC_ALL=C grep -q $'\x1b' "$tmp/out" &&
     ! LC_ALL=C grep -q $'\xc2\x9b' "$tmp/out" && grep -q 'new\\x0aline' "$tmp/out" &&
     [ "$(grep -c . "$tmp/out")" -eq "$(grep -c '%' "$tmp/out")" ]; then
    ok "--classify: escape codes and newlines in class names reach the terminal escaped"
  else
    not_ok "--classify: escape codes and newlines in class names reach the terminal escaped" \
      "status $status" "$(cat -v "$tmp/out" "$tmp/err")"
  fi

  rewrite "$tmp/good.st" "$tmp/short.st" 'm["class_names"] = json.dumps(["ant"])'
  expect 2 "--classify: a short class_names list is refused" \
    "holds 1 names, but the network has 3" --resume "$tmp/short.st" \
    --classify "$tmp/good/ant/000.png"

  python3 - "$tmp/good.st" "$tmp/nan.st" <<'EOF'
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = sorted(k for k in header if k != "__metadata__")[0]
begin = 8 + n + header[name]["data_offsets"][0]
data[begin:begin + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(bytes(data))
print(name, file=open(sys.argv[2] + ".name", "w"))
EOF
  tensor=$(cat "$tmp/nan.st.name")
  expect 2 "--classify: NaN weights name the tensor" "tensor “$tensor”.*not a finite number" \
    --resume "$tmp/nan.st" --classify "$tmp/good/ant/000.png"
  expect 2 "--resume: NaN weights name the tensor, before any step" \
    "tensor “$tensor”.*not a finite number" --resume "$tmp/nan.st" --max-steps 2
else
  for i in 1 2 3 4 5 6 7 8 9; do ok "checkpoint rewrites # SKIP no python3"; done
fi

python3 -c 'import struct,sys; h=b"{\"w\":"+b"["*100000+b"1"+b"]"*100000+b"}"; h+=b" "*(-len(h)%8); sys.stdout.buffer.write(struct.pack("<Q",len(h))+h)' \
  >"$tmp/deep.st" 2>/dev/null || printf 'x' >"$tmp/deep.st"
if [ $have_python -eq 1 ]; then
  expect 2 "a checkpoint header nested 100,000 deep" "nest deeper than" --resume "$tmp/deep.st"
else
  ok "a checkpoint header nested 100,000 deep # SKIP no python3"
fi
deep=$(printf '%*s' 60000 '' | tr ' ' '(')fc10$(printf '%*s' 60000 '' | tr ' ' ')')
expect 2 "--network nested 60,000 deep" "nest deeper than" --dataset synthetic --network "$deep"

# --- bounds and flags ------------------------------------------------------------------

expect 2 "--pace 1e-9 is refused" "--pace: 1e-09 is not a number of steps a second" \
  --dataset synthetic --pace 1e-9
expect 2 "--pace 0.001 is refused" "--pace" --dataset synthetic --pace 0.001
expect 2 "a non-UTF-8 --network is named" "--network: its value is not valid text" \
  --network $'fc10\xff'
expect 2 "a non-UTF-8 --run-name is named" "--run-name: its value is not valid text" \
  --run-name=$'run\xfe' --record
expect 2 "--top without --classify" "--top: only with --classify" --dataset synthetic --top 2
expect 2 "--history without --record" "--history: only with --record" --dataset synthetic \
  --history "$tmp/h"
expect 2 "--image-size on a dataset that is not a folder of images" "--image-size: only for" \
  --dataset synthetic --image-size 32

ln -s "$tmp/nowhere/run.st" "$tmp/dangling.st"
expect 2 "--save onto a dangling link is refused" "dangling symbolic link" \
  --dataset synthetic --network fc10 --max-steps 1 --save "$tmp/dangling.st"
if [ -L "$tmp/dangling.st" ]; then ok "… and the link stays a link"
else not_ok "… and the link stays a link"; fi

[ $failed -eq 0 ]
