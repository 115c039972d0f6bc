#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# bench-exact.sh — what exact mode costs: CPU seconds per training step of the cnn
# preset (Adam, batch 200, synthetic data) on the given devices, without --exact and
# with it at chunks of 16, 32 and 64 samples. Each figure is the difference between
# a 40-step and a 10-step run, so set-up and the first steps cancel; user + system
# seconds rather than wall-clock, so that other work on a shared machine weighs less.
# Usage: bench/bench-exact.sh [TANDEM-TRAIN] [DEVICES]   (build/src/tandem-train, cpu:2)
set -eu
train=${1:-build/src/tandem-train}
devices=${2:-cpu:2}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
seconds() {   # steps, then flags: CPU seconds of the run
  local steps=$1
  shift
  /usr/bin/time -f "%U %S" -o "$tmp" "$train" --network cnn --optimizer adam --batch 200 \
    --devices "$devices" --max-steps "$steps" --quiet --dataset synthetic --seed 1 "$@" \
    >/dev/null
  awk '{ print $1 + $2 }' "$tmp"
}
printf "%-28s %14s\n" "mode ($devices)" "CPU ms/step"
for mode in "" "--exact" "--exact --exact-chunk 32" "--exact --exact-chunk 64"; do
  # shellcheck disable=SC2086
  short=$(seconds 10 $mode)
  # shellcheck disable=SC2086
  long=$(seconds 40 $mode)
  printf "%-28s %14.1f\n" "${mode:-ordinary}" "$(echo "($long - $short) * 1000 / 30" | bc -l)"
done
