#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-mpi.sh — tandem-train --distributed under mpirun, on CPU ranks: 2 and 3 ranks
# train exactly as one process does with the same global batch (either strategy, the
# main replica on any rank, an uneven last batch, evaluation split across ranks),
# only the main rank reports and saves, and a rank that fails ends the whole job,
# without a hang, with its own message. Oversubscribed, so it runs on a 2-core CI
# machine, as root there. TAP on stdout; meson passes tandem-train as $1 and the
# mpi-helper tool (IDX writer, checkpoint comparison) as $2.
set -u
train=${1:?usage: test-mpi.sh PATH-TO-TANDEM-TRAIN PATH-TO-MPI-HELPER}
helper=${2:?usage: test-mpi.sh PATH-TO-TANDEM-TRAIN PATH-TO-MPI-HELPER}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-mpi-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Containers forbid the cross-memory attach Open MPI's shared-memory transport uses
# by default; one machine needs no network transport; more ranks than cores is the
# point here.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl=self,vader
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_orte_base_help_aggregate=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}
# A hang is a failure too: nothing here should take a minute.
run_mpi() { timeout 60 mpirun --oversubscribe --allow-run-as-root --bind-to none "$@"; }
field() { grep -o "\"$2\":[^,}]*" "$1" | head -n 1 | cut -d: -f2; }
# same_accuracy A B: test accuracies of the 301 test images within one image: parameters
# within rounding of each other may still put one image's two best logits either way
# of a tie (the test loss, compared to 1e-5, shows any real difference).
same_accuracy() {
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1.5 / 301) }'
}

plan=19
echo "1..$plan"

# 983 training samples in batches of 50: 19 full batches and a short one of 33, so
# the epoch, and the run, ends at step 20 (shards 17+17+16 then 11+11+11 on 3 ranks,
# 25+25 then 17+16 on 2); 301 test samples split unevenly for the evaluation.
data=$tmp/data
if ! "$helper" idx "$data" 983 301; then
  echo "Bail out! could not write the test dataset"
  exit 1
fi
common=(--dataset "$data" --network conv4k3p1,relu,pool2,fc16,relu,fc10 --batch 50
        --epochs 1 --seed 3 --json)

# --- the reference: one process, one CPU worker, the same global batch ---------------

"$train" "${common[@]}" --devices cpu --save "$tmp/ref.safetensors" >"$tmp/ref.json" \
  2>"$tmp/ref.err"
status=$?
if [ $status -eq 0 ] && [ -f "$tmp/ref.safetensors" ] &&
   grep -q '"type":"epoch"' "$tmp/ref.json"; then
  ok "single-process reference run (20 steps, one epoch)"
else
  not_ok "single-process reference run" "status $status" "$(cat "$tmp/ref.err")"
fi
ref_accuracy=$(field "$tmp/ref.json" test_accuracy)
ref_loss=$(field "$tmp/ref.json" test_loss)

# --- N ranks train as one process does ------------------------------------------------

# same_as_reference NAME RANKS ARGS...: runs, then checks the checkpoint, the one
# report from the main rank and the evaluation against the reference.
same_as_reference() {
  local name=$1 ranks=$2
  shift 2
  local out=$tmp/$name
  local start=$SECONDS
  run_mpi -np "$ranks" "$train" --distributed "${common[@]}" --save "$out.safetensors" "$@" \
    >"$out.json" 2>"$out.err"
  local status=$? seconds=$((SECONDS - start))
  local compared
  compared=$("$helper" compare "$out.safetensors" "$tmp/ref.safetensors" 1e-5 2>&1)
  local same=$?
  local started epochs accuracy loss loss_close
  started=$(grep -c '"type":"started"' "$out.json")
  epochs=$(grep -c '"type":"epoch"' "$out.json")
  accuracy=$(field "$out.json" test_accuracy)
  loss=$(field "$out.json" test_loss)
  loss_close=$(awk -v a="$loss" -v b="$ref_loss" \
    'BEGIN { d = a - b; if (d < 0) d = -d; print (a != "" && d <= 1e-5 * (b < 0 ? -b : b)) }')
  if [ $status -eq 0 ] && [ $same -eq 0 ] && [ "$started" = 1 ] && [ "$epochs" = 1 ] &&
     grep -q "\"replicas\":$ranks" "$out.json" && same_accuracy "$accuracy" "$ref_accuracy" &&
     [ "$loss_close" = 1 ]; then
    ok "$name: parameters after 20 steps equal one process's ($compared; ${seconds} s)"
  else
    not_ok "$name: parameters after 20 steps equal one process's" "status $status" \
      "$compared" "reports: $started started, $epochs epoch lines" \
      "test accuracy $accuracy (reference $ref_accuracy), loss $loss ($ref_loss)" \
      "$(head -c 2000 "$out.err")"
  fi
}

same_as_reference "2 ranks, allreduce" 2 --devices cpu
same_as_reference "3 ranks, allreduce" 3 --devices cpu
same_as_reference "2 ranks, main on rank 1" 2 --devices cpu,cpu --strategy main --main 1

# The agreement behind it (tdm_distributed_first_without()): on 3 ranks every rank learns
# the lowest rank that has not, whichever ranks say so, and -1 where all have.
agreed=yes
for case in "1:1" "2:2" "2,1:1" "0,2:0" "none:-1"; do
  without=${case%%:*} want=${case##*:}
  got=$(run_mpi -np 3 "$helper" first-without "$without" 2>&1)
  lines=$(grep -c "^rank [0-2]: first $want\$" <<<"$got")
  [ "$lines" = 3 ] || { agreed="ranks without $without: $got"; break; }
done
if [ "$agreed" = yes ]; then
  ok "3 ranks agree on the lowest rank without (5 cases)"
else
  not_ok "3 ranks agree on the lowest rank without" "$agreed"
fi

# The default precision, auto, agreed among the ranks (each knows only its own machine's
# devices): on CPU ranks every rank computes in fp32, the report says so and why, and
# the checkpoint keeps what was asked.
out="$tmp/2 ranks, allreduce"
asked=$(head -c 65536 "$out.safetensors" | grep -a -o 'precision\\*"*:\\*"[a-z0-9]*' | head -n 1)
if grep -q '"precision":"fp32","precision_asked":"auto","precision_why":"cpu has no bfloat16 tensor cores"' \
     "$out.json" && [ "${asked##*\"}" = auto ]; then
  ok "2 ranks: precision auto computed in fp32, said why; the checkpoint keeps auto"
else
  not_ok "2 ranks: precision auto computed in fp32, said why; the checkpoint keeps auto" \
    "started: $(grep '"type":"started"' "$out.json" | head -c 600)" "checkpoint: $asked"
fi

# Synchronized BN through MPI_Allreduce: a residual BN network with crops, flips and
# Nesterov SGD on 3 ranks trains as one process does (parameters and running
# statistics, which the checkpoints hold, to 1e-5; the same test accuracy, within an
# image).
bn=(--dataset "$data" --network "conv4k3p1,bn,relu,res(conv8k3s2p1,bn,relu,conv8k3p1,bn),relu,gap,fc10"
    --batch 50 --epochs 1 --seed 3 --json --batchnorm sync --optimizer nesterov --lr 0.05
    --weight-decay 5e-4 --weight-decay-on weights --crop 2 --flip on)
"$train" "${bn[@]}" --devices cpu --save "$tmp/bn-ref.safetensors" >"$tmp/bn-ref.json" \
  2>"$tmp/bn-ref.err"
status=$?
if [ $status -eq 0 ] && [ -f "$tmp/bn-ref.safetensors" ]; then
  ok "single-process reference run with synchronized BN"
else
  not_ok "single-process reference run with synchronized BN" "status $status" \
    "$(cat "$tmp/bn-ref.err")"
fi
run_mpi -np 3 "$train" --distributed "${bn[@]}" --devices cpu --save "$tmp/bn3.safetensors" \
  >"$tmp/bn3.json" 2>"$tmp/bn3.err"
status=$?
compared=$("$helper" compare "$tmp/bn3.safetensors" "$tmp/bn-ref.safetensors" 1e-5 2>&1)
same=$?
if [ $status -eq 0 ] && [ $same -eq 0 ] &&
   same_accuracy "$(field "$tmp/bn3.json" test_accuracy)" "$(field "$tmp/bn-ref.json" test_accuracy)"; then
  ok "3 ranks, synchronized BN: parameters and BN statistics equal one process's ($compared)"
else
  not_ok "3 ranks, synchronized BN equal one process" "status $status" "$compared" \
    "$(head -c 2000 "$tmp/bn3.err")"
fi
same_as_reference "3 ranks, main on rank 2" 3 --devices cpu:3 --strategy main --main 2

# Exact mode: 3 ranks (chunks of 16: 32 + 16 + 0 samples of the last batch's 33, one
# rank idle) and 2 ranks with main write checkpoints whose every value, Adam's state
# included, has the same bits as one process's; the same for a BN network.
exact_same() {
  local name=$1 ref=$2 ranks=$3
  shift 3
  local out=$tmp/exact-$ranks-$RANDOM
  run_mpi -np "$ranks" "$train" --distributed --save "$out.safetensors" "$@" \
    >"$out.json" 2>"$out.err"
  local status=$?
  local compared
  compared=$("$helper" identical "$out.safetensors" "$ref" 2>&1)
  local same=$?
  if [ $status -eq 0 ] && [ $same -eq 0 ]; then
    ok "$name: bit-identical to one process ($compared)"
  else
    not_ok "$name: bit-identical to one process" "status $status" "$compared" \
      "$(head -c 2000 "$out.err")"
  fi
}
exact=("${common[@]}" --exact --optimizer adam)
exact_bn=("${bn[@]}" --exact --optimizer adam --lr 1e-3)
"$train" "${exact[@]}" --devices cpu --save "$tmp/exact-ref.safetensors" >/dev/null \
  2>"$tmp/exact-ref.err" &&
  "$train" "${exact_bn[@]}" --devices cpu --save "$tmp/exact-bn-ref.safetensors" >/dev/null \
  2>>"$tmp/exact-ref.err"
status=$?
if [ $status -eq 0 ]; then
  ok "single-process exact-mode references (Adam; a BN network)"
else
  not_ok "single-process exact-mode references" "status $status" "$(cat "$tmp/exact-ref.err")"
fi
exact_same "exact, 3 ranks, allreduce, Adam" "$tmp/exact-ref.safetensors" 3 "${exact[@]}" \
  --devices cpu
exact_same "exact, 2 ranks, main on rank 1, Adam" "$tmp/exact-ref.safetensors" 2 \
  "${exact[@]}" --devices cpu,cpu --strategy main --main 1
exact_same "exact, 3 ranks, BN network (sync), Adam" "$tmp/exact-bn-ref.safetensors" 3 \
  "${exact_bn[@]}" --devices cpu

# Only the main rank writes checkpoints, so only its --save folder must exist: the
# other ranks are given one that does not (as on machines without a shared disk).
mkdir "$tmp/saves"
run_mpi -np 1 "$train" --distributed "${common[@]}" --save "$tmp/saves/run.safetensors" : \
  -np 2 "$train" --distributed "${common[@]}" --save "$tmp/nowhere/run.safetensors" \
  >"$tmp/one-writer.json" 2>"$tmp/one-writer.err"
status=$?
files=$(ls "$tmp/saves")
if [ $status -eq 0 ] && [ "$files" = run.safetensors ]; then
  ok "only the main rank writes the checkpoint"
else
  not_ok "only the main rank writes the checkpoint" "status $status, files: $files" \
    "$(cat "$tmp/one-writer.err")"
fi

# --- failures end the whole job, with the failing rank's message ----------------------

# expect_failure NAME PATTERN MPIRUN-ARGS...: mpirun must fail, not hang (run_mpi's
# timeout ends a hang with 124), and its output name the rank and what went wrong. The
# seconds it took are said, not bounded: on a loaded machine a clean failure can take
# longer than any bound that a hang would not also meet.
expect_failure() {
  local name=$1 pattern=$2
  shift 2
  local start=$SECONDS
  run_mpi "$@" >"$tmp/fail.out" 2>"$tmp/fail.err"
  local status=$? seconds=$((SECONDS - start))
  if [ $status -ne 0 ] && [ $status -ne 124 ] && grep -q -- "$pattern" "$tmp/fail.err"; then
    ok "$name (exit $status after ${seconds} s)"
  else
    not_ok "$name" "status $status after $seconds s (124: mpirun timed out, a hang)" \
      "expected on stderr: $pattern" "$(head -c 2000 "$tmp/fail.err")" \
      "last output: $(tail -n 3 "$tmp/fail.out")"
  fi
}

# Rank 1 of 3 is given a dataset folder that does not exist (mpirun's MPMD syntax
# gives each rank its own flags); ranks 0 and 2 load theirs and wait for it.
expect_failure "a rank with a broken dataset path ends the job with its message" \
  "rank 1: --dataset: $tmp/missing" \
  -np 1 "$train" --distributed "${common[@]}" : \
  -np 1 "$train" --distributed "${common[@]}" --dataset "$tmp/missing" : \
  -np 1 "$train" --distributed "${common[@]}"

# The same once training has begun: the main rank's checkpoint folder disappears
# once the first checkpoint is in it, so its next save fails while the others wait
# for it.
mkdir -p "$tmp/gone/deleted"
# Moved, not removed: rm -rf could race with a save creating its temporary file there.
(for _ in $(seq 600); do
   [ -e "$tmp/gone/deleted/run.safetensors" ] && break
   sleep 0.1
 done
 mv "$tmp/gone/deleted" "$tmp/gone/moved") &
expect_failure "a rank failing mid-run ends the job with its message" \
  "rank 0: .*$tmp/gone/deleted" \
  -np 3 "$train" --distributed "${common[@]}" --epochs 10000 \
  --save "$tmp/gone/deleted/run.safetensors"
wait

expect_failure "--devices must match the number of ranks" \
  "--devices lists 2 devices but mpirun started 3 ranks" \
  -np 3 "$train" --distributed "${common[@]}" --devices cpu,cpu

expect_failure "every rank must use the same kind of device" \
  "mixes CPU workers and GPUs" \
  -np 2 "$train" --distributed "${common[@]}" --devices cpu,cuda:0

# --- without mpirun: a job of one rank ----------------------------------------------

timeout 60 "$train" --distributed "${common[@]}" --devices cpu \
  --save "$tmp/single.safetensors" >"$tmp/single.json" 2>"$tmp/single.err"
status=$?
compared=$("$helper" compare "$tmp/single.safetensors" "$tmp/ref.safetensors" 0 2>&1)
same=$?
if [ $status -eq 0 ] && [ $same -eq 0 ]; then
  ok "--distributed without mpirun is one rank, bit-exact ($compared)"
else
  not_ok "--distributed without mpirun is one rank" "status $status" "$compared" \
    "$(cat "$tmp/single.err")"
fi

[ $n -eq $plan ] || echo "# ran $n of $plan tests"
[ $failed -eq 0 ]
