#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-po.sh — the translations: both domains' catalogues ('tandem': the window and
# tandem-train; 'tandem-engine': the engine's messages) pass msgfmt --check, Japanese
# has no untranslated or fuzzy message, and every source file with a marked string is
# listed in its domain's POTFILES.in (else its strings would never reach a catalogue).
# With tandem-train given, its messages, the engine's and its own, come out in
# Japanese under LANGUAGE=ja (the build tree's catalogues).
# TAP on stdout; meson passes the source folder as $1 and tandem-train as $2.
set -u
top=${1:?usage: test-po.sh SOURCE-DIR [TANDEM-TRAIN]}
train=${2:-}
cd "$top"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-po-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "1..8"
for po in po/ja.po po/engine/ja.po; do
  if out=$(msgfmt --check -o /dev/null "$po" 2>&1); then
    ok "msgfmt --check $po"
  else
    not_ok "msgfmt --check $po" "$out"
  fi
  # Against the sources as they are now, not the last regenerated template: the
  # strings are extracted afresh and the catalogue merged with them.
  dir=$(dirname "$po")
  xgettext --from-code=UTF-8 --keyword=_ --keyword=N_ --keyword=C_:1c,2 --keyword=NC_:1c,2 \
    --keyword=g_dngettext:2,3 --add-comments=Translators: -f "$dir/POTFILES.in" \
    -o "$tmp/current.pot" 2>"$tmp/xgettext.err"
  if [ -f "$tmp/current.pot" ]; then
    msgmerge -q --no-fuzzy-matching "$po" "$tmp/current.pot" -o "$tmp/merged.po"
  else
    cp "$po" "$tmp/merged.po"
  fi
  rm -f "$tmp/current.pot"
  stats=$(LC_ALL=C msgfmt --statistics -o /dev/null "$tmp/merged.po" 2>&1)
  po=$tmp/merged.po
  if [[ $stats != *untranslated* && $stats != *fuzzy* ]] && [[ $stats == *" translated message"* ]]; then
    ok "$dir/ja.po: every current message translated, none fuzzy ($stats)"
  else
    not_ok "$dir/ja.po: every current message translated, none fuzzy" "$stats" \
      "$(msgattrib --untranslated --only-fuzzy "$po" 2>/dev/null | grep -m5 '^msgid')" \
      "$(msgattrib --untranslated "$po" 2>/dev/null | grep -m5 '^msgid ')"
  fi
done
# marked_files DIR…: files holding _("…") or N_("…").
marked_files() { grep -rlE '(^|[^A-Za-z0-9_])N?_ *\( *"' --include='*.c' "$@" 2>/dev/null | sort; }
missing=$(comm -23 <(marked_files engine) <(grep -v '^#' po/engine/POTFILES.in | sort))
if [ -z "$missing" ]; then
  ok "po/engine/POTFILES.in lists every engine file with a marked string"
else
  not_ok "po/engine/POTFILES.in lists every engine file with a marked string" $missing
fi
missing=$(comm -23 <(marked_files src ui) <(grep -v '^#' po/POTFILES.in | sort))
if [ -z "$missing" ]; then
  ok "po/POTFILES.in lists every program and window file with a marked string"
else
  not_ok "po/POTFILES.in lists every program and window file with a marked string" $missing
fi

if [ -z "$train" ]; then
  echo "ok 7 - the engine's messages in Japanese # SKIP no tandem-train given"
  echo "ok 8 - tandem-train's messages in Japanese # SKIP no tandem-train given"
  exit 0
fi
err=$(LANGUAGE=ja LC_ALL=C.UTF-8 "$train" --dataset synthetic --batch 0 2>&1 >/dev/null)
if [[ $err == "tandem-train: --batch 0: バッチサイズは 1 以上にしてください" ]]; then
  ok "the engine's messages in Japanese: $err"
else
  not_ok "the engine's messages in Japanese" "$err"
fi
err=$(LANGUAGE=ja LC_ALL=C.UTF-8 "$train" --classify x.png 2>&1 >/dev/null)
if [[ $err == *"--resume CHECKPOINT が必要です"* ]]; then
  ok "tandem-train's own messages in Japanese: $err"
else
  not_ok "tandem-train's own messages in Japanese" "$err"
fi
