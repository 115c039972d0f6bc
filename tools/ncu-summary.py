#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Sums an `ncu --csv` run of gpu__time_duration.sum and dram__bytes.sum by kernel name:
time, share, launches, bytes and the achieved DRAM rate, largest first. For
tools/gpu-issue10's profile; prints the top N (argument 2, default 30)."""
import collections
import csv
import sys

TIME = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
head, rows = rows[0], rows[1:]
col = {k: head.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")}
us, nbytes, launches = collections.Counter(), collections.Counter(), collections.Counter()
for r in rows:
    value = float(r[col["Metric Value"]].replace(",", ""))
    name = r[col["Kernel Name"]][:100]
    if r[col["Metric Name"]] == "gpu__time_duration.sum":
        us[name] += value * TIME[r[col["Metric Unit"]]]
        launches[name] += 1
    else:
        nbytes[name] += value * BYTES[r[col["Metric Unit"]]]
total = sum(us.values())
print(f"{len({r[col['ID']] for r in rows})} launches, {total:.0f} us, "
      f"{sum(nbytes.values()) / 1e9:.2f} GB")
for name, t in us.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 30):
    print(f"{t:9.0f} us {100 * t / total:5.1f} % {launches[name]:4d}x "
          f"{nbytes[name] / 1e6:8.0f} MB {nbytes[name] / t / 1e6:5.2f} TB/s  {name}")
