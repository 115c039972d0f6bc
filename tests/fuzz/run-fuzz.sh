#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# run-fuzz.sh HARNESS CORPUS SECONDS [libFuzzer flags…] — runs a libFuzzer harness
# over its seed corpus and then fuzzes for SECONDS. New inputs go to a temporary
# folder, never into the seed corpus in the tree; a crash, leak or timeout is kept
# under fuzz-artifacts/ in the current folder and fails the run.
#
# The mutations follow a fixed seed (TANDEM_FUZZ_SEED, 1 unless set; 0 lets libFuzzer
# pick one), so ./test explores the same inputs on every machine and a CI failure is a
# regression, not a new finding by luck. Longer campaigns with fresh seeds find those:
#   TANDEM_FUZZ_SEED=0 tests/fuzz/run-fuzz.sh build-fuzz/tests/fuzz/fuzz-idx \
#     tests/fuzz/corpus/idx 600
set -euo pipefail
harness=$1 corpus=$2 seconds=$3
shift 3
[ -d "$corpus" ] || { echo "run-fuzz.sh: $corpus: no such corpus folder" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tandem-fuzz-corpus-XXXXXX")
trap 'rm -rf "$work"' EXIT
artifacts="$PWD/fuzz-artifacts/$(basename "$harness")/"
mkdir -p "$artifacts"
# -rss_limit_mb and -malloc_limit_mb: a reader that allocates what a header claims
# rather than what the file holds is a finding, not a slow run. -max_len: inputs up
# to 256 KB, enough for the 100,000-deep nesting of the seeds (libFuzzer's default
# follows the largest seed, and 4 KB never reached a stack overflow); a later
# -max_len among the flags given wins. -error_exitcode: libFuzzer's own, 77, is what meson
# reads as a skipped test, so a finding would pass for a skip.
exec "$harness" -error_exitcode=1 -seed="${TANDEM_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
  -malloc_limit_mb=1024 -max_len=262144 -print_final_stats=1 -artifact_prefix="$artifacts" \
  "$@" "$work" "$corpus"
