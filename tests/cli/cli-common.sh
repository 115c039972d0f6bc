# SPDX-License-Identifier: GPL-3.0-or-later
# cli-common.sh — what the shell tests of tests/cli share, sourced once they have read
# their arguments ($train is tandem-train): a scratch folder, the TAP lines, and the
# checks of a refusal (its exit status and its one line on stderr). Every diagnostic
# line of a failure is prefixed with "# ", so that a message of several lines stays
# a TAP comment. $failed counts the failures, for a script that exits with them.

# cli_scratch NAME: $tmp, a fresh folder removed on exit (made writable first, for
# the tests that lock one), and the cache inside it.
cli_scratch() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-$1-XXXXXX")
  trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
  export XDG_CACHE_HOME="$tmp/cache"
}

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
# not_ok NAME DIAGNOSTIC…
not_ok() {
  n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"
  shift
  for line in "$@"; do sed 's/^/# /' <<<"$line"; done
}
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

# expect_bad NAME PATTERN ARGS…: exit 2 and exactly one stderr line matching the grep
# pattern PATTERN; expect_bad_text the same with PATTERN a plain string.
expect_bad() { refused_with -q "$@"; }
expect_bad_text() { refused_with -qF "$@"; }
refused_with() {
  local flags=$1 name=$2 pattern=$3
  shift 3
  "$train" "$@" >"$tmp/out" 2>"$tmp/err"
  local status=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $status -eq 2 ] && [ "$lines" -eq 1 ] && grep "$flags" -- "$pattern" "$tmp/err"; then
    ok "$name"
  else
    not_ok "$name" "status $status, $lines lines:" "$(cat "$tmp/err")"
  fi
}

# expect STATUS NAME PATTERN ARGS…: that exit status and exactly one stderr line, of at
# most 1,000 bytes, matching PATTERN; stdin empty. `timeout` turns a hang into a
# failure, not a stuck suite.
expect() {
  local want=$1 name=$2 pattern=$3
  shift 3
  timeout 120 "$train" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local status=$? lines bytes
  lines=$(wc -l <"$tmp/err")
  bytes=$(wc -c <"$tmp/err")
  if [ $status -eq "$want" ] && [ "$lines" -eq 1 ] && [ "$bytes" -le 1000 ] &&
     grep -q -- "$pattern" "$tmp/err"; then
    ok "$name"
  else
    not_ok "$name" "status $status, $lines lines, $bytes bytes:" "$(head -c 600 "$tmp/err")"
  fi
}
