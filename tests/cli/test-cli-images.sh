#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-images.sh — tandem-train on folders of images and --classify: a run and its
# cached second start, the skip notice, one line and exit status 2 for each kind of bad
# input, and classifying with the saved checkpoint. TAP on stdout; meson passes the
# paths of tandem-train and image-helper.
set -u
train=${1:?usage: test-cli-images.sh TANDEM-TRAIN IMAGE-HELPER}
helper=${2:?usage: test-cli-images.sh TANDEM-TRAIN IMAGE-HELPER}
. "$(dirname "$0")/cli-common.sh"
cli_scratch cli-images

echo "1..11"
"$helper" "$tmp" || { echo "Bail out! image-helper failed"; exit 1; }
run=(--epochs 1 --batch 6 --network fc8,relu,fc3 --quiet)
loud=(--epochs 1 --batch 6 --network fc8,relu,fc3)

"$train" --dataset "$tmp/good" "${run[@]}" --save "$tmp/good.st" 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] && [ -f "$tmp/good.st" ] && ls "$tmp/cache/tandem/images/"*.cache >/dev/null 2>&1; then
  ok "a folder of class folders trains, saves and is cached"
else
  not_ok "a folder of class folders trains, saves and is cached" "status $status" "$(cat "$tmp/err")"
fi

"$train" --dataset "$tmp/good" "${run[@]}" --json >"$tmp/json" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q '"train_count":30' "$tmp/json" && grep -q '"test_count":6' "$tmp/json"; then
  ok "the second start (from the cache) gives the same split"
else
  not_ok "the second start (from the cache) gives the same split" "$(head -n 1 "$tmp/json")"
fi

"$train" --dataset "$tmp/damaged" "${loud[@]}" >/dev/null 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] && [ "$(grep -c 'could not be read' "$tmp/err")" -eq 1 ] &&
   grep -q '3 of 39 files could not be read: ant/cut.png (truncated), bee/notes.txt (not a PNG or JPEG image), cat/pipe.png (not a regular file)' "$tmp/err"; then
  ok "undecodable files are skipped and reported once"
else
  not_ok "undecodable files are skipped and reported once" "status $status" "$(cat "$tmp/err")"
fi

expect_bad "a single class is refused, naming the folder" \
  "--dataset: $tmp/single: needs at least two class folders holding images; found 1" \
  --dataset "$tmp/single" "${run[@]}"
expect_bad "--image-size out of range" "--image-size 2: give 0" \
  --dataset "$tmp/good" --image-size 2 "${run[@]}"
expect_bad "--color unknown" "--color: unknown value “purple”" \
  --dataset "$tmp/good" --color purple "${run[@]}"
expect_bad "--classify needs --resume" "--classify: needs --resume" \
  --classify "$tmp/good/ant/000.png"
expect_bad "--classify of a missing file" "nowhere.png: cannot open" \
  --resume "$tmp/good.st" --classify "$tmp/nowhere.png"
expect_bad "--classify of a decompression bomb" "bomb.png: 60000 × 60000 pixels is above the limit" \
  --resume "$tmp/good.st" --classify "$tmp/bomb.png"

"$train" --resume "$tmp/good.st" --classify "$tmp/good/ant/000.png" "$tmp/good/cat/003.png" \
  --top 2 >"$tmp/out" 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 2 ] &&
   grep -Eq "^$tmp/good/ant/000.png: (ant|bee|cat) [0-9.]+ %, (ant|bee|cat) [0-9.]+ %$" "$tmp/out"; then
  ok "--classify prints the top classes by name with probabilities"
else
  not_ok "--classify prints the top classes by name with probabilities" "status $status" \
    "$(cat "$tmp/out" "$tmp/err")"
fi

"$train" --resume "$tmp/good.st" --classify "$tmp/good/bee/001.png" --json >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q '"type":"classification"' "$tmp/out" && grep -q '"name":"bee"\|"name":"ant"\|"name":"cat"' "$tmp/out"; then
  ok "--classify --json prints one object per image"
else
  not_ok "--classify --json prints one object per image" "$(cat "$tmp/out" "$tmp/err")"
fi

[ $failed -eq 0 ]
