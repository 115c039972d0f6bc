#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-tensorboard.sh — a run's figures out of Tandem: --tensorboard DIR writes
# TensorBoard event files as the run goes, tandem-train runs --export-tensorboard DIR
# converts the same run from the history, and tensorboard-check.py reads both from the
# outside (CRCs computed afresh, Events parsed by python3-protobuf) against the run's
# --json; --export-run's CSV has the validation figures and names its units; bad
# folders give one line and exit 2.
# TAP on stdout; meson passes tandem-train, image-helper and tensorboard-check.py.
set -u
train=${1:?usage: test-cli-tensorboard.sh TANDEM-TRAIN IMAGE-HELPER TENSORBOARD-CHECK}
helper=${2:?}
check=${3:?}
. "$(dirname "$0")/cli-common.sh"
cli_scratch cli-tensorboard

echo "1..7"
"$helper" "$tmp" || { echo "Bail out! image-helper failed"; exit 1; }
cd "$tmp"
# Two CPU workers, a validation split, epochs of 5 steps: every kind of figure.
"$train" --dataset good --network fc8,relu,fc3 --epochs 6 --batch 6 --devices cpu:2 \
  --val-split 0.2 --tensorboard logs --run-name "two workers" --record --history runs \
  --json >run.jsonl 2>err.txt
if [ $? -eq 0 ] && [ -n "$(ls logs/"two workers"/events.out.tfevents.* 2>/dev/null)" ]; then
  ok "--tensorboard writes an event file in a folder named after the run"
else
  not_ok "--tensorboard writes an event file in a folder named after the run" "$(cat err.txt)"
fi
"$train" runs --history runs --export-tensorboard converted >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q "1 run written to converted" err.txt &&
   [ -n "$(ls converted/"two workers"/events.out.tfevents.* 2>/dev/null)" ]; then
  ok "runs --export-tensorboard converts the recorded run"
else
  not_ok "runs --export-tensorboard converts the recorded run" "$(cat err.txt)"
fi

python=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import google.protobuf, numpy' 2>/dev/null; then python=$p; break; fi
done
if [ -n "$python" ]; then
  "$python" "$check" logs/"two workers"/events.out.tfevents.* \
    converted/"two workers"/events.out.tfevents.* run.jsonl >out.txt 2>&1
  if [ $? -eq 0 ]; then
    ok "the event files read as TensorBoard reads them, with the run's values: $(cat out.txt)"
  else
    not_ok "the event files read as TensorBoard reads them, with the run's values" "$(cat out.txt)"
  fi
else
  skip "the event files read as TensorBoard reads them" "python3-protobuf is not installed"
fi

# The CSV: units in the header, validation figures on the epoch rows.
id=$(ls runs | sed -n 's/\.jsonl$//p' | head -1)
"$train" --history runs --export-run "$id" >run.csv 2>err.txt
header=$(grep -v '^#' run.csv | head -1)
val=$(awk -F, -v h="$header" 'BEGIN { n = split(h, c, ","); for (i = 1; i <= n; i++) col[c[i]] = i }
  $1 == "epoch" && $(col["val_loss"]) != "" && $(col["val_accuracy"]) != "" { v++ } END { print v + 0 }' run.csv)
if grep -q '^# units: ' run.csv && [[ "$header" == *val_loss,val_accuracy* ]] &&
   [[ "$header" == *elapsed_s* && "$header" == *compute_ms* && "$header" == *memory_bytes* ]] &&
   [ "$val" -eq 6 ] && grep -q '^device,' run.csv && grep -q '^phases,' run.csv; then
  ok "--export-run: every figure, validation included, units named"
else
  not_ok "--export-run: every figure, validation included, units named" "$header" "val rows $val"
fi

# Bad input: one line naming the flag, exit 2.
touch afile
"$train" --dataset good --network fc8,relu,fc3 --epochs 1 --batch 6 --tensorboard afile \
  >out.txt 2>err.txt
if [ $? -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q -- "--tensorboard: .*afile" err.txt; then
  ok "--tensorboard where a file is: one line, exit 2"
else
  not_ok "--tensorboard where a file is: one line, exit 2" "$(cat err.txt)"
fi
"$train" --export-tensorboard somewhere >out.txt 2>err.txt
if [ $? -eq 2 ] && grep -q -- "--export-tensorboard: goes with runs" err.txt; then
  ok "--export-tensorboard without runs says how it is used"
else
  not_ok "--export-tensorboard without runs says how it is used" "$(cat err.txt)"
fi
"$train" runs --history runs --export-tensorboard afile >out.txt 2>err.txt
if [ $? -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q -- "--export-tensorboard: .*afile" err.txt; then
  ok "--export-tensorboard into a file: one line, exit 2"
else
  not_ok "--export-tensorboard into a file: one line, exit 2" "$(cat err.txt)"
fi
exit $((failed > 0))
