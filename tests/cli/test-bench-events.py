#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# test-bench-events.py: bench/bench-real-networks.py reads what tandem-train says. On the
# CPU: the random-pixel datasets bench_data.py writes (CIFAR binaries, PNG folders) are
# read by tandem-train with the counts and shapes asked; tandem_run.py's readings of
# real --json event streams (samples/s from the step events, the memory counts, the
# time to an accuracy, a failure's message); its reading of the convolution engine's
# choice lines, rendered from the format strings in the engine's source (so a changed
# format fails here) beside a cache file in the engine's format; and the whole command
# on a CPU row without PyTorch, its JSON and its tables, and a bad --row refused.
# TAP. Arguments: tandem-train, the source tree.
import json
import os
import re
import subprocess
import sys
import tempfile

train, source = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(source, "bench"))
import bench_data  # noqa: E402
import tandem_run  # noqa: E402

NET = "conv8k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10"
count = 0
failed = False


def check(ok, name, *detail):
    global count, failed
    count += 1
    print(f"{'ok' if ok else 'not ok'} {count} - {name}")
    if not ok:
        failed = True
        for d in detail:
            print(f"# {d}")


def run(*args):
    p = subprocess.run([train, "--devices", "cpu", "--precision", "bf16", "--json", "--quiet",
                        *args], capture_output=True, text=True, timeout=240)
    return p.returncode, p.stdout.splitlines(), p.stderr.splitlines()


print("1..9")
tmp = tempfile.mkdtemp(prefix="tdm-bench-events-")

# The datasets: twelve full steps an epoch, the test count asked, the shape.
cifar = bench_data.write(tmp, 32, 8, test=40)
# Recorded, so that the step events fall on the history's grid of steps (and epoch
# ends), not on the clock: a quiet machine runs these steps faster than one summary
# interval.
rc, out, err = run("--dataset", cifar, "--network", NET, "--batch", "8", "--max-steps", "30",
                   "--optimizer", "nesterov", "--lr", "0.05", "--record",
                   "--history", os.path.join(tmp, "runs"))
evs = tandem_run.events(out)
s = tandem_run.started(evs) or {}
check(rc == 0 and s.get("sample") == [32, 32, 3] and s.get("train_count") == 96 and
      s.get("test_count") == 40 and s.get("steps_per_epoch") == 12,
      "the CIFAR-layout folder: 96 training images (8 × 12), 40 test, 32×32×3",
      f"exit {rc}", json.dumps(s)[:300], *err[-3:])
png = bench_data.write(tmp, 20, 4, test=20)
rc2, out2, err2 = run("--dataset", png, "--image-size", "20", "--network", NET, "--batch", "4",
                      "--max-steps", "2")
s2 = tandem_run.started(tandem_run.events(out2)) or {}
check(rc2 == 0 and s2.get("sample") == [20, 20, 3] and s2.get("train_count") == 48 and
      s2.get("test_count") == 20, "the PNG folder: 48 training images (4 × 12), 20 test, 20×20×3",
      f"exit {rc2}", json.dumps(s2)[:300], *err2[-3:])

# Samples/s over the run's second half: steps counted from the events, ending at the
# run's last step, the seconds between two of them.
steps = [(e["step"], e["elapsed"]) for e in tandem_run.of_type(evs, "step")]
rate = tandem_run.throughput(evs, 8)
ok = rate is not None and steps and steps[-1][0] == 30
if ok:
    r, n, seconds = rate
    start = [p for p in steps if p[0] == 30 - n]
    ok = (len(start) == 1 and 30 - n >= 15 and abs(seconds - (steps[-1][1] - start[0][1])) < 1e-9
          and abs(r - n * 8 / seconds) < 1e-6 * r)
check(ok, "samples/s: the steps after the run's middle to its last (--max-steps 30), over "
      "their training seconds", f"steps {steps}", f"rate {rate}")

# Memory: on the CPU what the replica holds is what the plan counts, and its peak
# (the devices events' peak_bytes) too; above the data takes out the parameters and
# the dataset.
m = tandem_run.memory(evs)
plan = tandem_run.of_type(evs, "memory")[-1]["devices"][0] if m else {}
devices = tandem_run.of_type(evs, "devices")
check(m is not None and devices and all("peak_bytes" in e["devices"][0] for e in devices) and
      m["counted_peak"] == m["held"] == plan.get("total") > 0 and
      m["above_data"] == plan["total"] - plan["parameters"] - plan["dataset"] and
      m["activations"] == plan["activations"],
      "memory: the peak and what is held equal the memory event's total on the CPU",
      json.dumps(m))

# Time to an accuracy: the first epoch at or above the target, training seconds.
rc3, out3, err3 = run("--dataset", cifar, "--network", NET, "--batch", "8", "--epochs", "2")
evs3 = tandem_run.events(out3)
epochs = tandem_run.of_type(evs3, "epoch")
low, high = tandem_run.time_to_accuracy(evs3, 0.0), tandem_run.time_to_accuracy(evs3, 1.01)
check(rc3 == 0 and len(epochs) == 2 and low["seconds"] == epochs[0]["elapsed"] and
      high["seconds"] is None and high["accuracies"] == [e["test_accuracy"] for e in epochs]
      and high["trained"] == epochs[1]["elapsed"],
      "time to accuracy: the first epoch reaching the target, None when none does",
      json.dumps(low), json.dumps(high), *err3[-3:])

# A failed run: its failed event's message.
rc4, out4, err4 = run("--dataset", cifar, "--network", "conv8k3p1,bogus", "--max-steps", "1")
why = tandem_run.failure(tandem_run.events(out4), err4)
check(rc4 != 0 and why is not None and "bogus" in why, "a failed run's message", f"{rc4} {why}")

# The engine's choice lines, as choose() in tdm-backend-cuda-conv-engine.c formats them
# with key_of()'s key, read with a cache file in tdm-backend-cuda-conv-cache.c's format.
engine_c = open(os.path.join(source, "engine", "compute", "cuda",
                             "tdm-backend-cuda-conv-engine.c"), encoding="utf-8").read()
key_fmt = re.search(r'key_of\(.*?g_strdup_printf\("([^"]+)"', engine_c, re.S).group(1)
line_fmt = re.search(r'g_debug\("(%s: %s → %s \([^"]+)"', engine_c).group(1)
header = re.search(r'#define CACHE_HEADER "([^"]+)"', open(os.path.join(
    source, "engine", "compute", "cuda", "tdm-backend-cuda-conv-cache.c"),
    encoding="utf-8").read()).group(1)


def key(d, n, h, c, o, k, p, s, *flags):
    """A key as key_of() writes it: the flags in their places (bn, linear, x16, y16, dx16,
    exact)."""
    slots = key_fmt.count("%") - 10
    return key_fmt % ((d, n, h, h, c, o, k, p, s, "bf16") + flags + ("",) * (slots - len(flags)))


k1 = key("fwd", 512, 32, 64, 64, 3, 1, 1, "", " x16")
k2 = key("wgrad", 512, 32, 3, 64, 3, 1, 1)
k3 = key("dgrad", 512, 16, 128, 128, 3, 1, 1, "", "", "", " dx16")
k4 = key("fwd", 1000, 32, 64, 64, 3, 1, 1, "", " x16")  # an evaluation chunk: left out
k5 = key("fwd", 512, 16, 128, 128, 3, 1, 1, " bn", "", " x16", " y16")  # cuDNN's fused
prefix = "Tandem-Compute-DEBUG: 03:30:00.123: "
lines = [prefix + line_fmt % ("cuda:0", k2, "im2col", 0.0, ", untimed"),
         prefix + line_fmt % ("cuda:0", k1, "cudnn:e62:r0:h", 0.1, ""),
         prefix + line_fmt % ("cuda:0", k4, "own", 0.2, ""),
         # GLib in a locale that is not UTF-8 writes the arrow as "?".
         (prefix + line_fmt % ("cuda:0", k3, "own", 0.0, ", untimed")).replace("→", "?"),
         prefix + line_fmt % ("cuda:0", k2, "cudnn:e33:r0:h", 0.25, ""),
         prefix + line_fmt % ("cuda:0", k5, "cudnn-fused:e5:r1:h", 0.05, "")]
cache = os.path.join(tmp, "cache.txt")
with open(cache, "w", encoding="utf-8") as f:
    f.write(f"{header}\n{k3}\town\t0.040000\nworkspace 0123\t4096\t0.000000\n")
got = tandem_run.conv_choices(lines, 512, tandem_run.cache_times(cache))
flop = 2.0 * 512 * 32 * 32 * 64 * 64 * 9
want = [(k2, "cudnn:e33:r0:h", 0.25, True), (k1, "cudnn:e62:r0:h", 0.1, True),
        (k3, "own", 0.04, False), (k5, "cudnn-fused:e5:r1:h", 0.05, True)]
check([(c["key"], c["name"], c["ms"], c["timed"]) for c in got] == want and
      got[1]["flags"] == ["x16"] and got[2]["flags"] == ["dx16"] and
      got[3]["flags"] == ["bn", "x16", "y16"] and
      abs(got[1]["tflops"] - flop / 0.1 / 1e9) < 1e-6 and
      (got[1]["n"], got[1]["h"], got[1]["c"], got[1]["o"], got[1]["k"]) == (512, 32, 64, 64, 3),
      "conv choices: the engine's lines (in a C locale too), the timed choice over an "
      "untimed one, the cache's ms for a choice read back, other batch sizes left out, "
      "TFLOP/s from the shape",
      *(json.dumps(c) for c in got), *lines[:2])

# The whole command on a CPU row, PyTorch left out: its JSON and its tables.
data = os.path.join(tmp, "work")
p = subprocess.run([sys.executable, os.path.join(source, "bench", "bench-real-networks.py"),
                    "--device", "cpu", "--rows", "none", "--no-torch", "--no-preset",
                    "--tandem", train, "--work", data, "--row", f"tiny={NET}@32:8:15"],
                   capture_output=True, text=True, timeout=240)
try:
    res = json.load(open(os.path.join(data, "real-networks.json"), encoding="utf-8"))
    row = res["rows"][0]
    ok = (p.returncode == 0 and row["tandem"]["error"] is None and
          row["tandem"]["samples_per_second"] > 0 and row["eager"] is None and
          row["compile"] is None and res["verdicts"]["rows"]["tiny"]["speed_vs_eager"] is None
          and "| tiny, 32 px, 8 | " in p.stdout and "Verdicts:" in p.stdout and
          os.path.exists(os.path.join(data, "real-networks.md")))
except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
    ok, res = False, repr(e)
check(ok, "bench-real-networks.py on a CPU row: Tandem's samples/s, PyTorch not run, "
      "verdicts n/a, the tables", p.stdout[-600:], p.stderr[-600:])

p = subprocess.run([sys.executable, os.path.join(source, "bench", "bench-real-networks.py"),
                    "--device", "cpu", "--tandem", train, "--row", "tiny@32"],
                   capture_output=True, text=True, timeout=60)
check(p.returncode != 0 and "--row 'tiny@32'" in p.stderr and
      "LABEL=SPEC@SIDE:BATCH" in p.stderr, "a bad --row: one line naming it", p.stderr)

subprocess.run(["rm", "-rf", tmp])
sys.exit(1 if failed else 0)
