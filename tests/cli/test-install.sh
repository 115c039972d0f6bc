#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-install.sh — `meson install` into a DESTDIR: the man pages, the bash
# completions, the icons, the licence, and a metainfo and desktop file that validate
# where they landed. TAP on stdout; meson passes the build folder as $1.
set -u
build=${1:?usage: test-install.sh BUILD-DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

echo "1..7"
if ! meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >"$tmp/log" 2>&1; then
  echo "Bail out! meson install failed: $(tail -3 "$tmp/log")"
  exit 1
fi
prefix=$(meson introspect "$build" --buildoptions |
         python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
root="$tmp/root$prefix"

man1="$root/share/man/man1"
if [ -f "$man1/tandem-train.1" ] && grep -q '^\.TH TANDEM-TRAIN "1"' "$man1/tandem-train.1" &&
   grep -q 'val\\-split' "$man1/tandem-train.1" && grep -q '^\.SH FILES' "$man1/tandem-train.1"; then
  ok "tandem-train(1) is installed and documents the flags"
else
  not_ok "tandem-train(1) is installed" "$(ls "$man1" 2>&1)"
fi
if [ ! -x "$root/bin/tandem" ]; then
  skip "tandem(1) is installed" "built without the window"
elif [ -f "$man1/tandem.1" ] && grep -q '^\.TH TANDEM "1"' "$man1/tandem.1" &&
     grep -q '\\-\\-version' "$man1/tandem.1" &&
     [[ $(env -u DISPLAY -u WAYLAND_DISPLAY "$build/src/tandem" --version) == "tandem "[0-9]* ]]; then
  ok "tandem(1) is installed; tandem --version"
else
  not_ok "tandem(1) is installed" "$(ls "$man1" 2>&1)"
fi

completion=$(find "$tmp/root" -path '*/bash-completion/completions/tandem-train' | head -1)
if [ -n "$completion" ] && [ -f "${completion%-train}" ] &&
   out=$(bash -c 'source "$1" && complete -p tandem-train' _ "$completion" 2>&1) &&
   [[ $out == *"-F _tandem_train tandem-train"* ]]; then
  # The flags come from --help: complete "--val" with the built program.
  words=$(PATH="$root/bin:$PATH" bash -c 'source "$1"; COMP_WORDS=(tandem-train --val); COMP_CWORD=1;
                                         _tandem_train; echo "${COMPREPLY[*]}"' _ "$completion")
  if [ "$words" = "--val-split" ]; then
    ok "bash completions for tandem-train and tandem are installed; --val completes to --val-split"
  else
    not_ok "tandem-train's completion completes flags" "got “$words”"
  fi
else
  not_ok "bash completions are installed" "$(find "$tmp/root" -name 'tandem*' -path '*completion*')"
fi

if [ -f "$root/share/icons/hicolor/symbolic/apps/io.github.tandem.Tandem-symbolic.svg" ] &&
   [ -f "$root/share/icons/hicolor/scalable/apps/io.github.tandem.Tandem.svg" ]; then
  ok "the app icon and its symbolic version are installed"
else
  not_ok "the app icons are installed"
fi
if cmp -s "$root/share/doc/tandem/COPYING" "$(dirname "$0")/../../COPYING" &&
   grep -q 'GNU GENERAL PUBLIC LICENSE' "$root/share/doc/tandem/COPYING" &&
   grep -q 'Version 3' "$root/share/doc/tandem/COPYING" && [ -f "$root/share/doc/tandem/NEWS" ]; then
  ok "COPYING (the GPL, version 3) and NEWS are installed"
else
  not_ok "COPYING and NEWS are installed"
fi

metainfo="$root/share/metainfo/io.github.tandem.Tandem.metainfo.xml"
if ! command -v appstreamcli >/dev/null; then
  skip "the installed metainfo validates" "no appstreamcli"
elif out=$(appstreamcli validate --no-net --explain "$metainfo" 2>&1) &&
     grep -q '<release version="[0-9.]*" date="2026-12-04"' "$metainfo" &&
     grep -q '<display_length compare="ge">360</display_length>' "$metainfo" &&
     [ "$(grep -c '<screenshot' "$metainfo")" -ge 3 ] && ! grep -q '@VERSION@' "$metainfo"; then
  ok "the installed metainfo validates: screenshots, the release, 360 px"
else
  not_ok "the installed metainfo validates" "$out"
fi
desktop="$root/share/applications/io.github.tandem.Tandem.desktop"
if ! command -v desktop-file-validate >/dev/null; then
  skip "the installed desktop file validates" "no desktop-file-validate"
elif out=$(desktop-file-validate "$desktop" 2>&1); then
  ok "the installed desktop file validates"
else
  not_ok "the installed desktop file validates" "$out"
fi
