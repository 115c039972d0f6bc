#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-log.sh — tandem-train in a batch job: what a log gets through a pipe (the
# header, progress lines driven by the epoch's tenths, "saved FILE"), --max-steps ending
# with an evaluation, the time left after --resume and with --max-steps, the live
# line within a narrow terminal, and validation: --val-split, --save-best (the best
# epoch's parameters, bit for bit), --save-every, --early-stop. No test waits on a
# clock: every line asserted here follows from step counts.
# TAP on stdout; meson passes the path of tandem-train as $1.
set -u
train=${1:?usage: test-cli-log.sh PATH-TO-TANDEM-TRAIN}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-cli-log-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1

echo "1..14"

# A small network on the built-in set: 60,000 training samples, 120 steps an epoch.
small=(--dataset synthetic --network fc32,relu,fc10 --batch 500 --seed 3)

# --- a log through a pipe ---------------------------------------------------------

"$train" "${small[@]}" --epochs 1 --save "$tmp/log.st" 2>"$tmp/log.err" | cat >"$tmp/log.out"
status=${PIPESTATUS[0]}
epoch_line=$(grep -n '^epoch 1/1  train loss' "$tmp/log.out" | head -1 | cut -d: -f1)
progress=$(head -n "${epoch_line:-0}" "$tmp/log.out" | grep -c '^epoch 1/1 .*% *step .*samples/s  elapsed [0-9:]*  ETA ')
if [ "$status" -eq 0 ] && grep -q '^training fc32' "$tmp/log.out" &&
   grep -q '^devices: cpu; batch 500 = 500' "$tmp/log.out" &&
   grep -q '^precision: fp32 (auto: cpu has no bfloat16 tensor cores)$' "$tmp/log.out" &&
   grep -q '^recipe: .*optimizer adam.*precision auto' "$tmp/log.out" &&
   grep -q '(60,000 train, 10,000 test)\|(60000 train, 10000 test)' "$tmp/log.out"; then
  ok "a log gets the header: dataset and size, network and parameters, devices and split, precision (auto resolved), recipe"
else
  not_ok "a log gets the header" "status $status" "$(head -8 "$tmp/log.out")"
fi
# --precision auto on a CPU worker: the bits of --precision fp32, and its start says
# fp32 and why, in --json.
"$train" "${small[@]}" --max-steps 3 --precision fp32 --save "$tmp/fp32.st" >/dev/null 2>&1
"$train" "${small[@]}" --max-steps 3 --precision auto --save "$tmp/auto.st" --json \
  >"$tmp/auto.json" 2>"$tmp/auto.err"
same=0
if [ "$have_python" -eq 1 ] && python3 - "$tmp/fp32.st" "$tmp/auto.st" <<'EOF'
import json, struct, sys
def tensors(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop('__metadata__', None)
    return {k: data[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]]
            for k, v in header.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
sys.exit(0 if a and a == b else 1)
EOF
then
  same=1
fi
started=$(grep '"type":"started"' "$tmp/auto.json")
if [ "$have_python" -eq 0 ]; then
  skip "--precision auto on a CPU worker trains fp32's bits and says so" "no python3"
elif [ "$same" -eq 1 ] && echo "$started" | grep -q '"precision":"fp32","precision_asked":"auto","precision_why":"cpu has no bfloat16 tensor cores"'; then
  ok "--precision auto on a CPU worker trains fp32's bits and says so (--json)"
else
  not_ok "--precision auto on a CPU worker" "same bits: $same" "$started" \
    "$(head -3 "$tmp/auto.err")"
fi
# Tenths 1 to 9 of the epoch, whatever the speed of the machine.
if [ -n "$epoch_line" ] && [ "$progress" -eq 9 ]; then
  ok "a log gets a progress line at each tenth of the epoch before the epoch line ($progress)"
else
  not_ok "progress lines at each tenth of an epoch" "$progress before line ${epoch_line:-none}" \
    "$(head -20 "$tmp/log.out")"
fi
if grep -q "^saved $tmp/log.st (epoch 1, step 120)" "$tmp/log.out" && [ ! -s "$tmp/log.err" ]; then
  ok "a log says where the checkpoint went; nothing on stderr"
else
  not_ok "saved FILE" "$(grep saved "$tmp/log.out")" "stderr: $(head -3 "$tmp/log.err")"
fi
if ! grep -q $'\r\|\033' "$tmp/log.out"; then
  ok "a log holds no carriage returns or escape sequences"
else
  not_ok "a log holds no carriage returns or escape sequences"
fi

# --- --max-steps ends with an evaluation ---------------------------------------------

"$train" "${small[@]}" --epochs 2 --max-steps 30 --record --history "$tmp/runs" \
  >"$tmp/max.out" 2>&1
status=$?
if [ $status -eq 0 ] && grep -q '^finished: test accuracy [0-9.]*% (loss ' "$tmp/max.out" &&
   grep -q '"type":"finished"' "$tmp/runs"/*.jsonl 2>/dev/null &&
   grep '"type":"finished"' "$tmp/runs"/*.jsonl | grep -q '"test_accuracy":[0-9]' &&
   grep '"type":"finished"' "$tmp/runs"/*.jsonl | grep -q '"stopped":false'; then
  ok "--max-steps 30 ends with a test accuracy and is recorded finished"
else
  not_ok "--max-steps ends with an evaluation" "status $status" "$(tail -4 "$tmp/max.out")" \
    "$(ls "$tmp/runs" 2>&1)" "$(grep finished "$tmp/runs"/* 2>&1 | head -2)"
fi

# --- the time left, from the step events' own figures ---------------------------------

if [ $have_python -eq 1 ]; then
  "$train" "${small[@]}" --epochs 2 --max-steps 120 --save "$tmp/half.st" >/dev/null 2>&1
  "$train" --resume "$tmp/half.st" --max-steps 180 --json >"$tmp/resumed.json" 2>"$tmp/resumed.err"
  status=$?
  verdict=$(python3 - "$tmp/resumed.json" <<'EOF'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
start = next(e for e in events if e["type"] == "started")
total = start["total_steps"]
f0 = start["start_step"] / total
f_end = 180 / total
steps = [e for e in events if e["type"] == "step"]
bad = []
for s in steps:
    f = s["fraction"]
    want = s["elapsed"] * (f_end - f) / (f - f0)
    if abs(s["eta"] - want) > 1e-3 * max(1.0, want):
        bad.append((s["step"], s["eta"], want))
last = steps[-1]
if last["step"] != 180 or abs(last["eta"]) > 1e-9:
    bad.append(("last", last["step"], last["eta"]))
print("ok %d" % len(steps) if not bad and steps else "bad %r" % bad[:3])
EOF
)
  if [ $status -eq 0 ] && [[ $verdict == ok* ]]; then
    ok "time left after --resume counts this process's rate up to --max-steps (${verdict#ok } steps)"
  else
    not_ok "time left after --resume and with --max-steps" "status $status: $verdict" \
      "$(head -3 "$tmp/resumed.err")"
  fi
else
  skip "time left after --resume" "no python3"
fi

# --- the live line in a narrow terminal ------------------------------------------------

if command -v script >/dev/null 2>&1; then
  # Both streams on a 50-column terminal: the live line on stderr.
  script -qec "stty cols 50 rows 20; \"$train\" ${small[*]} --epochs 1 --max-steps 40" \
    /dev/null >"$tmp/tty.raw" 2>&1 </dev/null
  longest=$(tr '\r' '\n' <"$tmp/tty.raw" | sed 's/\x1b\[K//g' | grep '^epoch 1/1 .*ETA' |
            awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')
  if [ "$longest" -gt 0 ] && [ "$longest" -le 49 ]; then
    ok "the live line fits a 50-column terminal (longest $longest)"
  else
    not_ok "the live line fits a 50-column terminal" "longest $longest" \
      "$(tr '\r' '\n' <"$tmp/tty.raw" | head -5)"
  fi
else
  skip "the live line fits a narrow terminal" "no script(1)"
fi

# --- validation, the best checkpoint, saving every N steps, early stopping -------------

# Adam at lr 0.1 on this small network wanders: on this machine the validation
# accuracy peaks at epoch 3 of 4, so the best checkpoint is not the last one. The best
# is chosen by validation accuracy here (--monitor; val_loss unless told).
valrun=(--epochs 4 --val-split 0.01 --lr 0.1 --monitor val_accuracy)
"$train" "${small[@]}" "${valrun[@]}" --save "$tmp/v.st" --save-best "$tmp/best.st" \
  --json >"$tmp/val.json" 2>"$tmp/val.err"
status=$?
if [ $have_python -eq 1 ]; then
  verdict=$(python3 - "$tmp/val.json" <<'EOF'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
start = next(e for e in events if e["type"] == "started")
epochs = [e for e in events if e["type"] == "epoch"]
best_saves = [e for e in events if e["type"] == "saved" and e["best"]]
accs = [e["val_accuracy"] for e in epochs]
best = 1 + max(range(len(accs)), key=lambda i: (accs[i], -i))
# 99 % of 60,000 samples train: 59,400 at batch 500 is 119 steps an epoch.
problems = []
if start["train_count"] != 60000 or start["steps_per_epoch"] != 119:
    problems.append("split %d/%d" % (start["train_count"], start["steps_per_epoch"]))
if len(epochs) != 4 or not all(0 < a <= 1 for a in accs):
    problems.append("val accuracies %r" % accs)
if not best_saves or best_saves[-1]["epoch"] != best:
    problems.append("best saves %r, best epoch %d" % ([b["epoch"] for b in best_saves], best))
print("best %d" % best if not problems else "bad " + "; ".join(problems))
EOF
)
  if [ $status -eq 0 ] && [[ $verdict == best* ]]; then
    ok "--val-split 0.01: 119 steps an epoch, a validation accuracy each epoch, --save-best at the best ($verdict)"
  else
    not_ok "--val-split and --save-best" "status $status: $verdict" "$(head -3 "$tmp/val.err")"
  fi
  best=${verdict#best }
  # The same run stopped at the best epoch's end: its parameters, optimizer state and
  # BN statistics are the best checkpoint's, bit for bit.
  if [[ $best =~ ^[0-9]+$ ]]; then
    "$train" "${small[@]}" "${valrun[@]}" --max-steps $((best * 119)) \
      --save "$tmp/at-best.st" >/dev/null 2>&1
    same=$(python3 - "$tmp/best.st" "$tmp/at-best.st" <<'EOF'
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {k: body[v["data_offsets"][0]:v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
print("same %d" % len(a) if a and a == b else "differ: %s" % sorted(k for k in a if a.get(k) != b.get(k))[:3])
EOF
)
    if [[ $same == same* ]]; then
      ok "the best checkpoint is epoch $best's of 4, bit for bit (${same#same } tensors)"
    else
      not_ok "the best checkpoint is the best epoch's, bit for bit" "$same"
    fi
  else
    not_ok "the best checkpoint is the best epoch's, bit for bit" "no best epoch"
  fi
else
  skip "--val-split and --save-best" "no python3"
  skip "the best checkpoint, bit for bit" "no python3"
fi

# Every 50 steps, then the end: steps 50, 100, 130.
"$train" "${small[@]}" --epochs 2 --max-steps 130 --save "$tmp/every.st" --save-every 50 \
  >"$tmp/every.out" 2>&1
saved=$(grep '^saved ' "$tmp/every.out" | grep -o 'step [0-9]*' | grep -o '[0-9]*$' | tr '\n' ' ')
if [ "$saved" = "50 100 120 130 " ]; then
  ok "--save-every 50 saves at steps 50 and 100, the epoch's end (120) and the last step"
else
  not_ok "--save-every 50" "saved at: $saved" "$(tail -3 "$tmp/every.out")"
fi

# A learning rate too small to change a float: the validation accuracy never rises, so
# --early-stop 2 ends the run after epoch 3 (best epoch 1), recorded as finished.
"$train" "${small[@]}" --epochs 6 --optimizer sgd --lr 1e-30 --val-split 0.05 --early-stop 2 \
  --json >"$tmp/early.json" 2>"$tmp/early.err"
status=$?
epochs=$(grep -c '"type":"epoch"' "$tmp/early.json")
if [ $status -eq 0 ] && [ "$epochs" -eq 3 ] &&
   grep '"type":"finished"' "$tmp/early.json" | grep -q '"early_stopped":true' &&
   grep '"type":"finished"' "$tmp/early.json" | grep -q '"stopped":false' &&
   grep '"type":"finished"' "$tmp/early.json" | grep -q '"best_epoch":1'; then
  ok "--early-stop 2 ends after 3 epochs of a run that does not improve"
else
  not_ok "--early-stop 2" "status $status, $epochs epochs" "$(grep finished "$tmp/early.json")" \
    "$(head -3 "$tmp/early.err")"
fi

# Bad combinations: one line, exit 2.
"$train" --dataset synthetic --save-best "$tmp/b.st" >"$tmp/bad.out" 2>"$tmp/bad.err"
status=$?
if [ $status -eq 2 ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] &&
   grep -q -- '--save-best: watches val_loss (--monitor), which needs --val-split' "$tmp/bad.err" &&
   [ ! -e "$tmp/b.st" ]; then
  ok "--save-best without --val-split: exit 2, one line"
else
  not_ok "--save-best without --val-split" "status $status" "$(cat "$tmp/bad.err")"
fi
"$train" --dataset synthetic --val-split 1.5 >"$tmp/bad.out" 2>"$tmp/bad.err"
status=$?
if [ $status -eq 2 ] && grep -q -- '--val-split 1.5' "$tmp/bad.err"; then
  ok "--val-split 1.5: exit 2 naming the flag"
else
  not_ok "--val-split 1.5" "status $status" "$(cat "$tmp/bad.err")"
fi
