#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-classify.sh — tandem-train --classify DIR: every PNG and JPEG under a folder
# (recursively, in name order; other files and hidden ones left alone), each result
# saying how its image was adapted to the network's input when it was not of it, and
# one warning when an input is far from the training samples' size or colour; and, in a
# log, the decoding of an image folder with its count and rate (not again from the
# cache). TAP on stdout; meson passes the path of tandem-train as $1.
set -u
train=${1:?usage: test-cli-classify.sh PATH-TO-TANDEM-TRAIN}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-cli-classify-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}

# The first Python that has PIL (a user's own python3 may lack Debian's python3-pil).
py=
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import PIL' 2>/dev/null; then py=$candidate; break; fi
done
if [ -z "$py" ]; then
  echo "1..0 # SKIP no python3 with PIL to write the images"
  exit 0
fi
echo "1..8"

# A network of 28×28 grey inputs (the built-in set's).
"$train" --dataset synthetic --network fc16,relu,fc10 --batch 500 --epochs 1 --max-steps 20 \
  --save "$tmp/net.st" -q
mkdir -p "$tmp/photos/b/c" "$tmp/photos/d"
"$py" - "$tmp/photos" <<'PY'
import sys
from PIL import Image
root = sys.argv[1]
Image.new("L", (28, 28), 90).save(root + "/a-grey28.png")
Image.new("RGB", (720, 477), (200, 40, 40)).save(root + "/b/photo.jpg")
Image.new("L", (56, 56), 30).save(root + "/b/c/grey56.PNG")
Image.new("L", (28, 28), 10).save(root + "/.hidden.png")
open(root + "/d/notes.txt", "w").write("not an image\n")
PY

"$train" --resume "$tmp/net.st" --classify "$tmp/photos" --top 2 >"$tmp/out" 2>"$tmp/err"
status=$?
mapfile -t lines <"$tmp/out"
if [ $status -eq 0 ] && [ ${#lines[@]} -eq 3 ] &&
   [[ ${lines[0]} == "$tmp/photos/a-grey28.png: "* ]] &&
   [[ ${lines[1]} == "$tmp/photos/b/c/grey56.PNG: "* ]] &&
   [[ ${lines[2]} == "$tmp/photos/b/photo.jpg: "* ]]; then
  ok "--classify DIR classifies every PNG and JPEG under it, in name order, and nothing else"
else
  not_ok "--classify DIR" "status $status" "$(cat "$tmp/out" "$tmp/err")"
fi
"$train" classify --resume "$tmp/net.st" --top 2 "$tmp/photos" >"$tmp/command-out" 2>"$tmp/command-err"
if [ $? -eq 0 ] && cmp -s "$tmp/command-out" "$tmp/out" && cmp -s "$tmp/command-err" "$tmp/err"; then
  ok "tandem-train classify IMAGE… prints what --classify prints"
else
  not_ok "tandem-train classify" "$(diff "$tmp/command-out" "$tmp/out" | head -3)" "$(cat "$tmp/command-err")"
fi
if [[ ${lines[0]:-} =~ %$ ]]; then
  ok "an image of the network's size and colour has no note"
else
  not_ok "an image of the network's size and colour has no note" "${lines[0]:-}"
fi
if [[ ${lines[1]:-} == *" % (scaled from 56×56 to 28×28)" ]] &&
   [[ ${lines[2]:-} == *" % (centre 477×477 of 720×477 scaled to 28×28, colour made grey)" ]]; then
  ok "each adapted image says how: cropped, scaled, made grey"
else
  not_ok "each adapted image says how" "${lines[1]:-}" "${lines[2]:-}"
fi
if [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
   grep -q "^tandem-train: warning: the network was trained on 28×28 grey images; $tmp/photos/b/photo.jpg is 720×477 colour, far from them" "$tmp/err"; then
  ok "one warning for inputs far from the training samples"
else
  not_ok "one warning for inputs far from the training samples" "$(cat "$tmp/err")"
fi

"$train" --resume "$tmp/net.st" --classify "$tmp/photos/b" --json >"$tmp/out" 2>/dev/null
if [ "$(grep -c '"type":"classification"' "$tmp/out")" -eq 2 ] &&
   grep 'photo.jpg' "$tmp/out" | grep -q '"adapted":"centre 477×477 of 720×477 scaled to 28×28, colour made grey"' &&
   grep 'grey56' "$tmp/out" | grep -q '"adapted":"scaled from 56×56 to 28×28"'; then
  ok "--json: one object per image, with \"adapted\""
else
  not_ok "--classify DIR --json" "$(cat "$tmp/out")"
fi

# A log of a run on an image folder: the decoding's first count and its end, once; a
# second start reads the cache and decodes nothing.
export XDG_CACHE_HOME="$tmp/cache"
"$py" - "$tmp/shapes" <<'PY'
import os, sys
from PIL import Image
root = sys.argv[1]
for k, shade in enumerate((40, 200)):
    os.makedirs("%s/c%d" % (root, k))
    for i in range(12):
        Image.new("L", (8, 8), shade + i).save("%s/c%d/%02d.png" % (root, k, i))
PY
"$train" --dataset "$tmp/shapes" --network fc8,relu,fc2 --batch 4 --epochs 1 >"$tmp/log" 2>&1
status=$?
if [ $status -eq 0 ] && grep -q '^decoding images: [0-9]* of 24 ([0-9,]* a second)$' "$tmp/log" &&
   grep -q '^decoded 24 images in [0-9.]* s ([0-9,]* a second)$' "$tmp/log" &&
   [ "$(grep -c '^decoded ' "$tmp/log")" -eq 1 ]; then
  ok "a log tells of the image decoding: a count with its rate, then the total"
else
  not_ok "a log tells of the image decoding" "status $status" "$(head -5 "$tmp/log")"
fi
"$train" --dataset "$tmp/shapes" --network fc8,relu,fc2 --batch 4 --epochs 1 >"$tmp/log" 2>&1
if [ $? -eq 0 ] && ! grep -q 'decod' "$tmp/log" && grep -q '^epoch 1/1  train loss' "$tmp/log"; then
  ok "from the cache nothing is decoded, and the log says nothing of it"
else
  not_ok "from the cache nothing is decoded" "$(head -5 "$tmp/log")"
fi
