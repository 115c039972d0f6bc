#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-inputs.sh — tandem-train against the third round of hostile inputs, each
# made here: --config on a FIFO, a link to /dev/zero, a 3 GB file, a run file nested
# 100,000 deep, a bad value and an unknown key; outputs that are inputs or each other
# spelled another way; --resume with --init, and a resume once --init's file moved; a
# checkpoint with a 3 GB tensor nothing uses; NaN and 3e38 weights for --init; a pool
# window whose canonical spec must read back; exact mode with a frozen block; names
# with escape codes and newlines in --classify, runs, --show-run and --export-run;
# --history on a file; --export-onnx onto a dangling link. One line and exit 2 (0 where
# the input is fine) each. TAP on stdout; meson passes the paths of tandem-train and
# image-helper.
set -u
train=${1:?usage: test-cli-inputs.sh TANDEM-TRAIN IMAGE-HELPER}
helper=${2:?usage: test-cli-inputs.sh TANDEM-TRAIN IMAGE-HELPER}
. "$(dirname "$0")/cli-common.sh"
cli_scratch cli-inputs
export XDG_DATA_HOME="$tmp/data"
# check NAME COMMAND…: the shell command's status says whether the test passed.
check() {
  local name=$1
  shift
  if "$@"; then ok "$name"; else not_ok "$name" "$(head -c 600 "$tmp/err" 2>/dev/null)"; fi
}
no_escape() { ! LC_ALL=C grep -q $'\x1b' "$1"; }

have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1

echo "1..38"
"$helper" "$tmp" || { echo "Bail out! image-helper failed"; exit 1; }
run=(--epochs 1 --batch 6 --network fc8,relu,fc3 --quiet)
"$train" --dataset "$tmp/good" "${run[@]}" --save "$tmp/good.st" 2>"$tmp/err" ||
  { echo "Bail out! a first run failed: $(cat "$tmp/err")"; exit 1; }
"$train" --dataset "$tmp/good" "${run[@]}" --print-config >"$tmp/c.json" 2>"$tmp/err" ||
  { echo "Bail out! --print-config failed: $(cat "$tmp/err")"; exit 1; }

# --- --config: what is read, and how much -----------------------------------------

mkfifo "$tmp/f.json"
expect 2 "--config on a FIFO: refused at once" "FIFO" --config "$tmp/f.json"
ln -s /dev/zero "$tmp/zero.json"
expect 2 "--config on a link to /dev/zero: refused" "a device" --config "$tmp/zero.json"
printf '{' >"$tmp/big.json"
truncate -s 3G "$tmp/big.json"
expect 2 "--config on a 3 GB file: the cap is named" "larger than 1.0 MB" --config "$tmp/big.json"
deep=$(printf '%*s' 100000 '' | tr ' ' '[')1$(printf '%*s' 100000 '' | tr ' ' ']')
printf '{"type":"settings","config":{"x":%s}}\n' "$deep" >"$tmp/deep.jsonl"
expect 2 "--config on a run file nested 100,000 deep" "nest deeper than" \
  --config "$tmp/deep.jsonl"
sed 's/"batch":6/"batch":0/' "$tmp/c.json" >"$tmp/batch0.json"
expect 2 "a bad value from --config names the file and its key, not --batch" \
  "batch0.json: bad value.*key “batch” = 0" --config "$tmp/batch0.json"
check "… and no flag that was not typed" eval '! grep -q -- "--batch" "$tmp/err"'
sed 's/"bucket_bytes":[0-9]*/"bucket_bytes":0/' "$tmp/c.json" >"$tmp/bucket0.json"
expect 2 "bucket_bytes 0 from --config names the key, not a flag that does not exist" \
  "key “bucket_bytes”" --config "$tmp/bucket0.json"
check "… and never --bucket-bytes" eval '! grep -q -- "--bucket-bytes" "$tmp/err"'
sed 's/"batch":6/"bacth":6,"batch":6/' "$tmp/c.json" >"$tmp/typo.json"
expect 2 "an unknown key in --config is named" "unknown key “bacth”" --config "$tmp/typo.json"

# --- outputs are files, compared as files --------------------------------------------

cp "$tmp/c.json" "$tmp/keep.json"
expect 2 "--config c.json --save c.json is refused" "--save .*the same file as --config" \
  --config "$tmp/keep.json" --save "$tmp/keep.json" --max-steps 1
check "… and the configuration is still there" cmp -s "$tmp/keep.json" "$tmp/c.json"
mkdir -p "$tmp/val"
expect 2 "--save val/b.st --save-best ./val/../val/b.st is refused" \
  "the same file as --save" --dataset "$tmp/good" "${run[@]}" --val-split 0.3 \
  --save "$tmp/val/b.st" --save-best "$tmp/val/../val/b.st"
expect 2 "--init w.st --save w.st is refused" "--save .*the same file as --init" \
  --dataset "$tmp/good" "${run[@]}" --init "$tmp/good.st" --save "$tmp/./good.st"

# --- --resume and --init -------------------------------------------------------------

expect 2 "--resume A --init B is refused" "--init: cannot be combined with --resume" \
  --resume "$tmp/good.st" --init "$tmp/good.st" --max-steps 1
cp "$tmp/good.st" "$tmp/start.st"
"$train" --dataset "$tmp/good" "${run[@]}" --init "$tmp/start.st" --save "$tmp/tuned.st" \
  2>"$tmp/err" >/dev/null
rm -f "$tmp/start.st"
timeout 120 "$train" --resume "$tmp/tuned.st" --epochs 2 --quiet >/dev/null 2>"$tmp/err"
check "a run started from --init resumes once that file moved" test $? -eq 0

# --- checkpoints: used tensors only, checked values ------------------------------------

if [ $have_python -eq 1 ]; then
  python3 - "$tmp/good.st" "$tmp/huge-unused.st" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body = data[8 + n:]
size = 3_000_000_000
header["unused.big"] = {"dtype": "F32", "shape": [size // 4],
                        "data_offsets": [len(body), len(body) + size]}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + body)
    f.truncate(8 + len(text) + len(body) + size)
EOF
  timeout 120 "$train" --resume "$tmp/huge-unused.st" --classify "$tmp/good/ant/000.png" \
    >"$tmp/out" 2>"$tmp/err"
  check "--classify with a 3 GB unused tensor in the checkpoint" \
    eval '[ $? -eq 0 ] && grep -q "%" "$tmp/out"'
  timeout 120 "$train" --dataset "$tmp/good" "${run[@]}" --init "$tmp/huge-unused.st" \
    --max-steps 1 >/dev/null 2>"$tmp/err"
  check "--init with a 3 GB unused tensor" test $? -eq 0
  for bad in nan 3e38; do
    python3 - "$tmp/good.st" "$tmp/$bad.st" "$bad" <<'EOF'
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
begin = 8 + n + header["fc1.weight"]["data_offsets"][0]
data[begin:begin + 4] = struct.pack("<f", float(sys.argv[3]))
open(sys.argv[2], "wb").write(bytes(data))
EOF
  done
  expect 2 "--init with a NaN weight names the tensor" "“fc1.weight”.*not a finite number" \
    --dataset "$tmp/good" "${run[@]}" --init "$tmp/nan.st"
  expect 2 "--init with a 3e38 weight names the tensor" "“fc1.weight”.*beyond ±1e12" \
    --dataset "$tmp/good" "${run[@]}" --init "$tmp/3e38.st"
  expect 2 "--classify with --init and a 3e38 weight" "beyond ±1e12" \
    --network fc8,relu,fc3 --image-size 10 --color grey --init "$tmp/3e38.st" \
    --classify "$tmp/good/ant/000.png"
else
  for i in 1 2 3 4 5; do ok "checkpoint rewrites # SKIP no python3"; done
fi

# --- networks ----------------------------------------------------------------------------

"$train" --dataset "$tmp/good" --network pool4p1,fc3 --epochs 1 --batch 6 --quiet \
  --save "$tmp/pool.st" >/dev/null 2>"$tmp/err"
timeout 120 "$train" --resume "$tmp/pool.st" --classify "$tmp/good/ant/000.png" \
  >"$tmp/out" 2>>"$tmp/err"
check "a pool strided by its window saves a spec that reads back" test $? -eq 0
"$train" --dataset "$tmp/good" --network pool16p1,fc3 --image-size 32 --epochs 1 --batch 6 \
  --quiet --save "$tmp/pool16.st" >/dev/null 2>"$tmp/err"
timeout 120 "$train" --resume "$tmp/pool16.st" --classify "$tmp/good/ant/000.png" \
  >"$tmp/out" 2>>"$tmp/err"
check "pool16p1: its checkpoint classifies (pool16s16p1 parses)" test $? -eq 0
timeout 300 "$train" --dataset synthetic --network avg65536p32768,fc10 --max-steps 2 \
  --batch 16 --json >"$tmp/out" 2>"$tmp/err"
check "avg65536p32768 trains two steps with a finite loss" \
  eval '[ $? -eq 0 ] && grep -q "\"type\":\"finished\"" "$tmp/out" && ! grep -qi "nan\|diverged" "$tmp/out"'
expect 2 "fc16,basic8 is refused as fc16,conv… is" "flat vector" \
  --dataset synthetic --network fc16,basic8,fc10 --max-steps 1
timeout 300 "$train" --dataset synthetic --network "conv8k3p1,bn,relu,res(conv8k3p1,bn),fc10" \
  --freeze conv1,bn1,layer1 --exact --batch 32 --max-steps 3 --quiet >/dev/null 2>"$tmp/err"
check "--exact with a frozen block that holds BN trains" test $? -eq 0
expect 2 "--lr-scale conv2=0 out of order is --lr-scale's" "--lr-scale “conv2=0”" \
  --dataset synthetic --network conv8k3p1,bn,relu,conv8k3p1,bn,relu,fc10 \
  --lr-scale conv2=0 --max-steps 1

# --- names on the terminal ----------------------------------------------------------------

mkdir -p "$tmp/odd"
esc=$'\x1b[31mred'
cp "$tmp/good/ant/000.png" "$tmp/odd/${esc}.png"
cp "$tmp/good/ant/000.png" "$tmp/odd/new"$'\n'"line.png"
"$train" --resume "$tmp/good.st" --classify "$tmp/odd" >"$tmp/out" 2>"$tmp/err"
check "--classify DIR: escape codes and newlines in file names are escaped" \
  eval 'no_escape "$tmp/out" && [ "$(wc -l <"$tmp/out")" -eq 2 ] && grep -q "new\\\\x0aline" "$tmp/out"'
deepdir="$tmp/nest"
for i in $(seq 1 40); do deepdir="$deepdir/d"; done
mkdir -p "$deepdir"
cp "$tmp/good/ant/000.png" "$deepdir/deep.png"
"$train" --resume "$tmp/good.st" --classify "$tmp/nest" >"$tmp/out" 2>"$tmp/err"
check "--classify DIR finds an image 40 folders down" eval '[ $? -eq 0 ] && grep -q "deep.png" "$tmp/out"'
mkdir -p "$tmp/outside" "$tmp/linked"
cp "$tmp/good/bee/000.png" "$tmp/outside/far.png"
ln -s "$tmp/outside" "$tmp/linked/elsewhere"
ln -s . "$tmp/linked/self"
timeout 120 "$train" --resume "$tmp/good.st" --classify "$tmp/linked" >"$tmp/out" 2>"$tmp/err"
check "--classify DIR follows a linked folder, and a link back up once" \
  eval '[ $? -eq 0 ] && grep -q "far.png" "$tmp/out" && [ "$(wc -l <"$tmp/out")" -eq 1 ] && grep -q "already looked through" "$tmp/err"'

"$train" --dataset "$tmp/good" "${run[@]}" --record --history "$tmp/runs" \
  --run-name $'evil\x1b]0;title\x07\nsecond' 2>"$tmp/err"
"$train" runs --history "$tmp/runs" >"$tmp/out" 2>"$tmp/err"
check "runs: a run name's escape codes and newline reach the terminal escaped" \
  eval 'no_escape "$tmp/out" && [ "$(wc -l <"$tmp/out")" -eq 2 ] && grep -q "evil" "$tmp/out"'
id=$(ls "$tmp/runs" | sed -n 's/\.jsonl$//p' | head -1)
"$train" --show-run "$id" --history "$tmp/runs" >"$tmp/out" 2>"$tmp/err"
check "--show-run: the name escaped on its one line" \
  eval 'no_escape "$tmp/out" && [ "$(grep -c "^second" "$tmp/out")" -eq 0 ]'
"$train" --export-run "$id" --history "$tmp/runs" >"$tmp/out" 2>"$tmp/err"
check "--export-run: a newline in the name does not break the CSV's header" \
  eval '[ "$(grep -vc "^#" "$tmp/out")" -ge 1 ] && head -1 "$tmp/out" | grep -q "^# run: evil" && sed -n 2p "$tmp/out" | grep -q "^#"'
expect 2 "runs --history FILE says it is not a folder" "not a folder" runs --history "$tmp/c.json"
expect 2 "… and so does --export-tensorboard" "not a folder" \
  runs --history "$tmp/c.json" --export-tensorboard "$tmp/tb"
check "… which writes nothing" test ! -e "$tmp/tb"

ln -s "$tmp/nowhere/model.onnx" "$tmp/dangling.onnx"
expect 2 "--export-onnx onto a dangling link is refused" "dangling symbolic link\|without ONNX" \
  --resume "$tmp/good.st" --export-onnx "$tmp/dangling.onnx"
check "… and the link stays a link" test -L "$tmp/dangling.onnx"
expect 2 "--export-onnx onto the checkpoint itself is refused" \
  "checkpoint being exported\|without ONNX" --resume "$tmp/good.st" \
  --export-onnx "$tmp/./good.st"

[ $failed -eq 0 ]
