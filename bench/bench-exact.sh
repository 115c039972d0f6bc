#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# bench-exact.sh — what exact mode costs: CPU seconds of the cnn preset (Adam, batch
# 200, synthetic data) on the given devices, without --exact and with it at chunks of
# 64, 32, 16 (the default), 8, 4 and 1 sample (1: the ordinary split). Two figures a
# mode: the whole process of a fixed 40-step run (set-up, the steps and the final
# evaluation, which in exact mode steps by a divisor of the chunk), and a step alone:
# the 40-step run less a 10-step run, over 30 steps, so set-up and evaluation cancel.
# User + system seconds rather than wall-clock, so that other work on a shared
# machine weighs less.
# Usage: bench/bench-exact.sh [TANDEM-TRAIN] [DEVICES]   (build/src/tandem-train, cpu:2)
set -eu
train=${1:-build/src/tandem-train}
devices=${2:-cpu:2}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
seconds() {   # steps, then flags: CPU seconds of the whole process
  local steps=$1
  shift
  /usr/bin/time -f "%U %S" -o "$tmp" "$train" --network cnn --optimizer adam --batch 200 \
    --devices "$devices" --max-steps "$steps" --quiet --dataset synthetic --seed 1 \
    --precision fp32 "$@" \
    >/dev/null
  awk '{ print $1 + $2 }' "$tmp"
}
printf "%-28s %16s %14s %10s\n" "mode ($devices)" "40-step run, s" "CPU ms/step" "vs ordinary"
base=
for mode in "" "--exact --exact-chunk 64" "--exact --exact-chunk 32" "--exact" \
            "--exact --exact-chunk 8" "--exact --exact-chunk 4" "--exact --exact-chunk 1"; do
  # shellcheck disable=SC2086
  short=$(seconds 10 $mode)
  # shellcheck disable=SC2086
  long=$(seconds 40 $mode)
  step=$(echo "($long - $short) * 1000 / 30" | bc -l)
  base=${base:-$step}
  printf "%-28s %16.1f %14.1f %9.2f×\n" "${mode:-ordinary}" "$long" "$step" \
    "$(echo "$step / $base" | bc -l)"
done
