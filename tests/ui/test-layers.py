#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# test-layers.py: the ui libraries' include boundaries hold.
#
# Each ui library compiles with its own include directories (ui/*/meson.build). For
# each library this preprocesses a one-line file, with that library's own compiler
# command from compile_commands.json, including a header it may use (it must be
# found, with everything it includes) and headers from the wrong side of a boundary
# (they must not be found). So a dependency added the wrong way in a meson.build fails
# here, by name. Preprocessing answers that at a third of a compile's cost. TAP.
import json
import os
import shlex
import subprocess
import sys
import tempfile

build = sys.argv[1]

# library folder: (headers it may include, headers it must not reach)
RULES = {
    'charts': (['tdm-chart.h', 'tdm-series.h', 'gtk/gtk.h'],
               ['tdm-events.h', 'tdm-config.h', 'tdm-session.h', 'tdm-dashboard.h']),
    'session': (['tdm-events.h', 'tdm-series.h', 'tdm-export-info.h'],
                ['gtk/gtk.h', 'tdm-chart.h', 'tdm-dashboard.h']),
    'pages': (['tdm-session.h', 'tdm-chart.h', 'tdm-events.h'],
              ['tdm-run-form.h', 'tdm-history-store.h', 'tdm-window.h']),
    'form': (['tdm-session.h', 'tdm-run.h'],
             ['tdm-classify-view.h', 'tdm-dashboard.h', 'tdm-history-store.h', 'tdm-window.h']),
    'history': (['tdm-scaling-page.h', 'tdm-session.h'],
                ['tdm-run-form.h', 'tdm-window.h']),
    'shell': (['tdm-run-form.h', 'tdm-history-view.h', 'tdm-dashboard.h'], []),
}

with open(os.path.join(build, 'compile_commands.json')) as f:
    commands = json.load(f)


def command_for(folder, gtk):
    """A compile command of one of the folder's C files; for charts, one of the GTK
    part's (gtk=True) or of chart-data's (gtk=False)."""
    for entry in commands:
        path = entry['file']
        if not path.endswith('.c') or '/ui/%s/' % folder not in '/' + path:
            continue
        if folder == 'charts':
            name = os.path.basename(path)
            in_data = name in ('tdm-series.c', 'tdm-pacer.c', 'tdm-export-info.c')
            if in_data == gtk:
                continue
        return entry
    return None


def found(entry, header, tmp):
    probe = os.path.join(tmp, 'probe.c')
    with open(probe, 'w') as f:
        f.write('#include "%s"\n' % header if '/' not in header else '#include <%s>\n' % header)
    args = shlex.split(entry['command'])
    # The target's flags, this probe instead of its source and object.
    out, skip = [], 0
    for a in args:
        if skip:
            skip -= 1
            continue
        if a in ('-o', '-MQ', '-MF', '-c'):
            skip = 1
            continue
        if a == '-MD':
            continue
        out.append(a)
    cmd = out + ['-E', '-o', os.devnull, probe]
    return subprocess.run(cmd, cwd=entry.get('directory', build),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


cases = []
for folder, (allowed, forbidden) in RULES.items():
    for h in allowed:
        part = 'charts' if folder == 'charts' and h in ('tdm-chart.h', 'gtk/gtk.h') else None
        cases.append((folder, h, True, part is not None or folder != 'charts'))
    for h in forbidden:
        cases.append((folder, h, False, True))
# chart-data is GLib only.
cases.append(('charts', 'gtk/gtk.h', False, False))

print('1..%d' % len(cases))
failed = 0
with tempfile.TemporaryDirectory() as tmp:
    for i, (folder, header, allowed, gtk) in enumerate(cases, 1):
        entry = command_for(folder, gtk)
        lib = folder if folder != 'charts' else ('charts' if gtk else 'chart-data')
        what = '%s %s %s' % (lib, 'includes' if allowed else 'cannot include', header)
        if entry is None:
            print('not ok %d - %s: no compile command for ui/%s' % (i, what, folder))
            failed += 1
            continue
        ok = found(entry, header, tmp) == allowed
        failed += not ok
        print('%s %d - %s' % ('ok' if ok else 'not ok', i, what))
sys.exit(1 if failed else 0)
