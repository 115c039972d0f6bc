#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# Runs one GUI test (or any program) on a private Xvfb server, which it starts on a
# free display (Xvfb -displayfd picks it; 1920×1200, so the widest layout test fits)
# and stops afterwards. Without Xvfb it
# reports a TAP skip, so the 'gui' suite passes on machines that cannot run it.
#   usage: xvfb-run-test.sh PROGRAM [ARGS...]

if ! command -v Xvfb >/dev/null 2>&1; then
  echo "1..0 # SKIP Xvfb not installed"
  exit 0
fi

fdfile=$(mktemp "${TMPDIR:-/tmp}/tdm-xvfb.XXXXXX") || exit 1
Xvfb -displayfd 3 -screen 0 1920x1200x24 -nolisten tcp 3>"$fdfile" 2>/dev/null &
xvfb_pid=$!

cleanup() {
  kill "$xvfb_pid" 2>/dev/null
  wait "$xvfb_pid" 2>/dev/null
  rm -f "$fdfile"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Xvfb writes the display number once it accepts connections.
tries=0
while [ ! -s "$fdfile" ]; do
  if ! kill -0 "$xvfb_pid" 2>/dev/null || [ "$tries" -ge 100 ]; then
    echo "Bail out! Xvfb did not start"
    exit 1
  fi
  tries=$((tries + 1))
  sleep 0.1
done

DISPLAY=":$(head -n 1 "$fdfile")"
GDK_BACKEND=x11
GSK_RENDERER=cairo
GSETTINGS_BACKEND=memory
NO_AT_BRIDGE=1
# GTK 4 ignores NO_AT_BRIDGE; without this it warns that there is no session bus.
GTK_A11Y=none
export DISPLAY GDK_BACKEND GSK_RENDERER GSETTINGS_BACKEND NO_AT_BRIDGE GTK_A11Y
unset WAYLAND_DISPLAY

"$@"
