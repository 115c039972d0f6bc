#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-runs.sh — run settings as a file and the run history from the command line:
# --print-config then --config (from that file, from a run file, from a checkpoint)
# trains the same parameters bit for bit on the CPU; tandem-train runs (show ID,
# export ID) and the flags that did it before (--list-runs, --show-run, --export-run)
# read the history the window keeps, and say the same; bad ids and files get one line
# and exit 2; a flag a command does not take is refused.
# TAP on stdout; meson passes the path of tandem-train as $1.
set -u
train=${1:?usage: test-cli-runs.sh PATH-TO-TANDEM-TRAIN}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-cli-runs-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}

echo "1..16"

# tensors_equal A B: every tensor of two safetensors files, byte for byte (the
# metadata names the file it was saved as, so it differs).
tensors_equal() {
  python3 - "$1" "$2" <<'EOF'
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {k: body[v["data_offsets"][0]:v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
print("same %d" % len(a) if a and a == b else "differ")
EOF
}

flags=(--dataset synthetic --network fc24,relu,fc10 --devices cpu:2 --batch 300 --epochs 2
       --max-steps 250 --optimizer momentum --lr 0.05 --weight-decay 1e-4 --schedule cosine
       --seed 11 --val-split 0.05)
"$train" "${flags[@]}" --save "$tmp/a.st" --record --history "$tmp/runs" -q
status_a=$?
"$train" "${flags[@]}" --print-config >"$tmp/run.json" 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] && [ $status_a -eq 0 ] && python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
assert c["network"] == "fc24,relu,fc10" and c["devices"] == ["cpu", "cpu"]
assert c["schedule"] == "cosine" and c["seed"] == 11 and c["val_split"] == 0.05
assert c["max_steps"] == 250 and c["save_path"] is None
' "$tmp/run.json"; then
  ok "--print-config prints the effective settings as JSON"
else
  not_ok "--print-config" "status $status" "$(cat "$tmp/run.json" "$tmp/err")"
fi

"$train" --config "$tmp/run.json" --save "$tmp/b.st" -q
same=$(tensors_equal "$tmp/a.st" "$tmp/b.st")
if [[ $same == same* ]]; then
  ok "--config of --print-config's file trains the same parameters, bit for bit (${same#same } tensors)"
else
  not_ok "--config of --print-config's file reproduces the run" "$same"
fi

run_file=$(ls "$tmp/runs"/*.jsonl 2>/dev/null | head -1)
id=$(basename "${run_file:-none}" .jsonl)
"$train" --config "$run_file" --save "$tmp/c.st" -q
same=$(tensors_equal "$tmp/a.st" "$tmp/c.st")
if [[ $same == same* ]]; then
  ok "--config of the run file reproduces the run, bit for bit"
else
  not_ok "--config of the run file reproduces the run" "$same"
fi

# From the checkpoint: its own --save is left out, so nothing is written over it.
cp "$tmp/a.st" "$tmp/a-before.st"
"$train" --config "$tmp/a.st" --save "$tmp/d.st" -q
same=$(tensors_equal "$tmp/a.st" "$tmp/d.st")
"$train" --config "$tmp/a.st" --epochs 3 --max-steps 10 -q
if [[ $same == same* ]] && cmp -s "$tmp/a.st" "$tmp/a-before.st"; then
  ok "--config of a checkpoint reproduces its run, and does not write over it"
else
  not_ok "--config of a checkpoint" "$same" "$(cmp "$tmp/a.st" "$tmp/a-before.st" 2>&1)"
fi

out=$("$train" runs --history "$tmp/runs" 2>&1)
status=$?
listed=$("$train" --list-runs --history "$tmp/runs" --json 2>&1)
if [ $status -eq 0 ] && grep -q "^$id .*fc24,relu,fc *synthetic *cpu,cpu *300 *2  [0-9.]* %" <<<"$out" &&
   python3 -c 'import json, sys; r = json.loads(sys.argv[1]); assert r["id"] == sys.argv[2] and r["finished"] and not r["stopped"] and 0 < r["test_accuracy"] <= 1' "$listed" "$id"; then
  ok "tandem-train runs and --list-runs --json list the recorded run and its accuracy"
else
  not_ok "tandem-train runs" "status $status" "$out" "$listed"
fi

out=$("$train" --show-run "$id" --history "$tmp/runs" 2>&1)
status=$?
if [ $status -eq 0 ] && grep -q '^  schedule: cosine$' <<<"$out" &&
   grep -q '^  precision: fp32 (auto)$' <<<"$out" &&
   grep -q '^  val_split: 0.05$' <<<"$out" && grep -q '^epoch 1  train loss .* val loss .* test loss' <<<"$out" &&
   grep -q '^250 steps in ' <<<"$out"; then
  ok "--show-run prints the settings (the precision as computed), the epochs with validation, the steps"
else
  not_ok "--show-run" "status $status" "$out"
fi

shown=$("$train" --show-run "$id" --history "$tmp/runs" --json 2>&1)
if python3 -c 'import json, sys; r = json.loads(sys.argv[1]); assert r["config"]["precision"] == "auto" and r["precision_used"] == "fp32", r' "$shown"; then
  ok "--show-run --json: the precision asked (auto) and as computed (fp32)"
else
  not_ok "--show-run --json: the precision asked and as computed" "$(head -c 600 <<<"$shown")"
fi

"$train" --export-run "$id" --history "$tmp/runs" >"$tmp/export.csv" 2>"$tmp/err"
status=$?
header=$(grep -v '^#' "$tmp/export.csv" | head -1)
rows=$(grep -c '^step,[0-9]' "$tmp/export.csv")
if [ $status -eq 0 ] && grep -q '^# run: ' "$tmp/export.csv" && grep -q '^# schedule: cosine$' "$tmp/export.csv" &&
   grep -q '^# precision: fp32 (auto)$' "$tmp/export.csv" &&
   [[ $header == kind,step,epoch,* ]] && [ "$rows" -gt 5 ] && grep -q '^epoch,' "$tmp/export.csv"; then
  ok "--export-run prints the window's CSV ($rows rows)"
else
  not_ok "--export-run" "status $status, header $header, $rows rows" "$(head -3 "$tmp/err")"
fi

# The commands say what the flags say.
"$train" runs show "$id" --history "$tmp/runs" >"$tmp/show-command" 2>&1
show_status=$?
"$train" --show-run "$id" --history "$tmp/runs" >"$tmp/show-flag" 2>&1
"$train" runs export "$id" --history "$tmp/runs" >"$tmp/export-command.csv" 2>&1
export_status=$?
if [ $show_status -eq 0 ] && cmp -s "$tmp/show-command" "$tmp/show-flag" &&
   [ $export_status -eq 0 ] && cmp -s "$tmp/export-command.csv" "$tmp/export.csv"; then
  ok "tandem-train runs show / runs export print what --show-run / --export-run print"
else
  not_ok "runs show / runs export" "status $show_status $export_status" \
    "$(diff "$tmp/show-command" "$tmp/show-flag" | head -3)"
fi
"$train" train "${flags[@]}" --print-config >"$tmp/train-command.json" 2>"$tmp/err"
if [ $? -eq 0 ] && cmp -s "$tmp/train-command.json" "$tmp/run.json"; then
  ok "tandem-train train --print-config is the default command's"
else
  not_ok "tandem-train train --print-config" "$(cat "$tmp/err")"
fi

# Bad input: one line on stderr, exit 2, nothing trained.
expect_bad() {
  local needle=$1
  shift
  "$train" "$@" >"$tmp/out" 2>"$tmp/err"
  local status=$?
  if [ $status -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$needle" "$tmp/err" &&
     [ ! -s "$tmp/out" ]; then
    ok "$* → exit 2: $(cat "$tmp/err")"
  else
    not_ok "$* → exit 2 naming $needle" "status $status" "$(cat "$tmp/err" "$tmp/out" | head -3)"
  fi
}
expect_bad "--show-run" --show-run no-such-run --history "$tmp/runs"
expect_bad "--config: .*nothing.json" --config "$tmp/nothing.json"
sed 's/"batch":300/"batch":"many"/' "$tmp/run.json" >"$tmp/bad.json"
expect_bad "--config: $tmp/bad.json: .*batch" --config "$tmp/bad.json"
expect_bad "no-such-run" runs show no-such-run --history "$tmp/runs"
expect_bad "epochs" runs --epochs 3 --history "$tmp/runs"
expect_bad "runs: give" runs show --history "$tmp/runs"
