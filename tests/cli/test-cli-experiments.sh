#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-experiments.sh — tandem-train compare and compare-strategies, the engine's
# experiments that the window's Compare buttons run: on two CPU workers, compare's
# one-device twin comes out bit for bit the same (exact mode), with --json's training
# and result lines; compare-strategies trains main then allreduce and reports both
# runs' sampled steps; --record keeps the runs under the names the window gives them;
# one device, a bad --compare-steps and --compare-steps outside the comparisons are
# refused. Every assertion follows from the options and step counts, none from the
# clock. TAP on stdout; meson passes tandem-train.
set -u
train=${1:?usage: test-cli-experiments.sh TANDEM-TRAIN}
. "$(dirname "$0")/cli-common.sh"
cli_scratch cli-experiments

echo "1..10"
small=(--dataset synthetic --network fc16,relu,fc10 --batch 64 --seed 5 --devices cpu:2)

# --- compare with one device ---------------------------------------------------------

"$train" compare "${small[@]}" --compare-steps 20 >"$tmp/out" 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] &&
   tail -1 "$tmp/out" | grep -qE '^2 devices against one, after 20 steps: identical: 0 of [1-9][0-9]* values differ$' &&
   [ "$(grep -c 'Compare: ' "$tmp/err")" -eq 2 ]; then
  ok "compare: two CPU workers and the main one alone end bit for bit the same"
else
  not_ok "compare" "status $status" "$(cat "$tmp/out" "$tmp/err")"
fi

"$train" compare "${small[@]}" --compare-steps 20 --json >"$tmp/json" 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] &&
   grep -q '^{"type":"experiment_training","experiment":"compare","index":0,"name":"Compare: 2 devices","devices":2,.*"steps":20}$' "$tmp/json" &&
   grep -q '^{"type":"experiment_training","experiment":"compare","index":1,"name":"Compare: one device","devices":1,.*"steps":20}$' "$tmp/json" &&
   [ "$(grep -c '^{"type":"finished","steps":20,' "$tmp/json")" -eq 2 ] &&
   grep -q '^{"type":"compare_result","devices":2,"steps":20,"values":[1-9][0-9]*,"differing":0,"difference":0' "$tmp/json" &&
   [ ! -s "$tmp/err" ]; then
  ok "compare --json: each training announced, both trained 20 steps, nothing differs"
else
  not_ok "compare --json" "status $status" "$(grep -v '"type":"\(step\|devices\|phases\|batch\|memory\|setup\)"' "$tmp/json" | head -c 1500)" "$(cat "$tmp/err")"
fi

expect_bad "compare on one device is refused" 'needs at least two devices' \
  compare --dataset synthetic --network fc16,relu,fc10 --devices cpu --compare-steps 5

# --- compare strategies ----------------------------------------------------------------

"$train" compare-strategies "${small[@]}" --compare-steps 40 --json >"$tmp/json" 2>"$tmp/err"
status=$?
result=$(grep '^{"type":"strategies_result"' "$tmp/json")
if [ $status -eq 0 ] &&
   grep -q '"index":0,"name":"Strategies: main","devices":2,"strategy":"main","steps":40}$' "$tmp/json" &&
   grep -q '"index":1,"name":"Strategies: allreduce","devices":2,"strategy":"allreduce","steps":40}$' "$tmp/json" &&
   grep -q '^{"type":"strategies_result","runs":\[{"strategy":"main","step_ms":[0-9.e-]*,"samples":[1-9][0-9]*,"devices":\[{"device":"cpu",.*},{"device":"cpu",[^]]*\]},{"strategy":"allreduce","step_ms":[0-9.e-]*,"samples":[1-9][0-9]*,"devices":\[{"device":"cpu",.*},{"device":"cpu",[^]]*\]}\]}$' <<<"$result"; then
  ok "compare-strategies --json: main then allreduce, both runs' sampled steps on two devices"
else
  not_ok "compare-strategies --json" "status $status" "$result" "$(cat "$tmp/err")"
fi

"$train" compare-strategies "${small[@]}" --compare-steps 40 >"$tmp/out" 2>/dev/null
status=$?
if [ $status -eq 0 ] && grep -q '^main: [0-9.]* ms a step' "$tmp/out" &&
   grep -q '^allreduce: [0-9.]* ms a step' "$tmp/out" &&
   [ "$(grep -c '^  [01] cpu  *communication ' "$tmp/out")" -eq 4 ]; then
  ok "compare-strategies prints each strategy's step and each device's communication"
else
  not_ok "compare-strategies" "status $status" "$(cat "$tmp/out")"
fi

# --- kept in the history as the window keeps them ---------------------------------------

"$train" compare "${small[@]}" --compare-steps 10 --record --history "$tmp/runs" --quiet \
  >/dev/null 2>"$tmp/err"
status=$?
"$train" runs --history "$tmp/runs" --json >"$tmp/runs.json" 2>>"$tmp/err"
if [ $status -eq 0 ] && [ "$(wc -l <"$tmp/runs.json")" -eq 3 ] &&
   grep -q '"name":"Compare: 2 devices"' "$tmp/runs.json" &&
   grep -q '"name":"Compare: one device"' "$tmp/runs.json" &&
   grep -q '"kind":"experiment","experiment":"compare".*"outcome":"compare: 2 devices against one' \
     "$tmp/runs.json"; then
  ok "compare --record keeps both runs, named as the window names them, and its own record"
else
  not_ok "compare --record" "status $status" "$(cat "$tmp/runs.json" "$tmp/err")"
fi

# --- options ----------------------------------------------------------------------------

expect_bad "--compare-steps 0 is refused" '--compare-steps' compare "${small[@]}" --compare-steps 0
expect_bad "--compare-steps is not an option of train" 'not an option of tandem-train train' \
  "${small[@]}" --compare-steps 5

"$train" compare "${small[@]}" --print-config >"$tmp/config" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q '"network" *: *"fc16,relu,fc10"' "$tmp/config" && [ ! -s "$tmp/err" ]; then
  ok "compare --print-config prints the settings it would compare"
else
  not_ok "compare --print-config" "$(head -5 "$tmp/config")" "$(cat "$tmp/err")"
fi

"$train" --help >"$tmp/help" 2>&1
"$train" compare-strategies --help >"$tmp/help-strategies" 2>&1
if grep -q '^  compare  *Train on every device' "$tmp/help" &&
   grep -A1 '^  compare-strategies$' "$tmp/help" | grep -q 'Train with main, then with allreduce' &&
   grep -q -- '--compare-steps=N.*default 50' "$tmp/help-strategies"; then
  ok "--help lists both commands; compare-strategies --help its steps and their default"
else
  not_ok "--help" "$(grep -i compare "$tmp/help" "$tmp/help-strategies")"
fi

exit $((failed > 0))
