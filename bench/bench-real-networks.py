#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 31's benchmark in one command on one GPU: Tandem beside PyTorch eager and
torch.compile, in the same run on the same GPU, and the verdict on each target.

Rows (--rows picks, comma-separated; all five by default):
  r18-32    CIFAR-layout ResNet-18 (bench/bench-cpu-memory.py's spec), 32 px, batch 512
  r18-64    the same, 64 px, batch 256
  r18-128   the same, 128 px, batch 128
  tv18-224  --network resnet18 (torchvision's layout), 224 px, batch 128
  tv50-224  --network resnet50, 224 px, batch 128
--row 'LABEL=SPEC@SIDE:BATCH[:STEPS]' adds a row of any spec (PyTorch runs Tandem's
layers for it through tools/torch_module.py).

Per row, on random pixels (bench/bench_data.py: CIFAR binaries at 32 px, PNG folders
otherwise), bf16:
- Tandem: tandem-train --max-steps 2×STEPS (Nesterov, lr 0.05, --record: a step event
  every 10 steps), samples/s over the second half from its step events (training seconds, evaluation excluded); its own
  count of device memory: the `memory` event (the plan) and the `devices` events'
  peak_bytes (the backend's peak), less parameters and dataset: "above the data";
  the convolution engine's choice per shape and direction with its time and TFLOP/s
  against the bf16 matrix product's measured reach (tandem_run.py says what Tandem
  reports and what it does not: a layer's time inside a step).
- PyTorch eager and torch.compile (mode default, the model compiled; bench/torch_row.py,
  each in its own process): samples/s over STEPS steps after 10 of warm-up (and,
  compiled, after the compiling first step, whose seconds are reported);
  max_memory_allocated above the model and the batch.
- The driver's peak for each process (bench/driver_memory.py: NVML, else nvidia-smi,
  sampled every 10 ms), above the GPU's use just before it started.
Then the `resnet` preset's time to 94 % on Fashion-MNIST for --seeds (training seconds,
the pre-warm excluded, as tandem-train reports them; --preset-torch adds PyTorch eager's
through bench/torch_reference.py), and the verdicts (bench/real_networks_report.py):
samples/s ≥ 1.5× eager and ≥ compile, Tandem's memory ≤ PyTorch eager's (own count above
the data against max_memory_allocated above the data; driver against driver), the
preset's mean ≤ 1.0 s with every seed reaching 94.0 %.

Order of work: the matrix product's TFLOP/s; every row's torch.compile at once, each
process stopping after its compiling step (compiling is the CPU's work, and the graphs
land in torch.compile's caches on disk), while the datasets are written; every row's
Tandem and eager runs; the preset; then each row's compiled run, which finds its graphs
in the caches. When --budget seconds are spent, what is left is reported as skipped,
so the run ends inside the device's limit. A failure (torch.compile's included) is
written in its row and the run goes on.

Output: markdown tables on stdout (each row's convolutions, then speed, memory, preset
and verdicts last, where a reader of the output's tail sees them) and in --markdown
(default: --json's name ending .md), everything in --json (default
WORK/real-networks.json), each process's output in WORK/logs. On the lent GPU machine,
from the repository root after tools/gpu-prepare (which copies this and its modules
into .gpu/):
    bash .gpu/gpu-run real                  # REAL="--rows r18-32,tv50-224 --no-compile"
or directly (without gpu-run's library paths and Fashion-MNIST in place; the programs
unpacked first, G=$PWD/.gpu . .gpu/gpu-unpack):
    python3 .gpu/bench-real-networks.py --tandem .gpu/bin/tandem-train --json $OUT/real.json
A CPU smoke test (no GPU; a PyTorch without torch.compile says so in its rows):
    /usr/bin/python3 bench/bench-real-networks.py --device cpu --rows none --no-preset \
        --row 'tiny=conv8k3p1,bn,relu,gap,fc10@32:16:4'
"""
import argparse
import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_data  # noqa: E402
import driver_memory  # noqa: E402
import tandem_run  # noqa: E402
import real_networks_report as report  # noqa: E402

CIFAR18 = ("conv64k3p1,bn,relu,2*(res(conv64k3p1,bn,relu,conv64k3p1,bn),relu),"
           "res(conv128k3s2p1,bn,relu,conv128k3p1,bn),relu,res(conv128k3p1,bn,relu,conv128k3p1,bn),relu,"
           "res(conv256k3s2p1,bn,relu,conv256k3p1,bn),relu,res(conv256k3p1,bn,relu,conv256k3p1,bn),relu,"
           "res(conv512k3s2p1,bn,relu,conv512k3p1,bn),relu,res(conv512k3p1,bn,relu,conv512k3p1,bn),relu,"
           "gap,fc10")
ROWS = {
    "r18-32": ("CIFAR ResNet-18, 32 px, 512", CIFAR18, 32, 512, 60),
    "r18-64": ("CIFAR ResNet-18, 64 px, 256", CIFAR18, 64, 256, 60),
    "r18-128": ("CIFAR ResNet-18, 128 px, 128", CIFAR18, 128, 128, 40),
    "tv18-224": ("`--network resnet18`, 224 px, 128", "resnet18", 224, 128, 60),
    "tv50-224": ("`--network resnet50`, 224 px, 128", "resnet50", 224, 128, 30),
}


class Clock:
    """The run's budget: each process gets at most what is left of it."""

    def __init__(self, budget):
        self.end = time.monotonic() + budget

    def limit(self, own):
        """Seconds for a process that may take `own`; None when under 10 s are left."""
        left = self.end - time.monotonic()
        return None if left < 10 else min(own, left)


def parse_rows(a):
    rows = []
    names = [] if a.rows == "none" else list(ROWS) if a.rows == "all" else a.rows.split(",")
    for name in names:
        if name not in ROWS:
            sys.exit(f"bench-real-networks.py: --rows: no row {name!r} (rows: {', '.join(ROWS)})")
        title, spec, side, batch, steps = ROWS[name]
        rows.append(dict(name=name, title=title, spec=spec, side=side, batch=batch, steps=steps))
    for text in a.row:
        label, _, rest = text.partition("=")
        spec, _, shape = rest.rpartition("@")
        nums = shape.split(":")
        if not (label and spec and len(nums) in (2, 3) and all(v.isdigit() and int(v) > 0
                                                              for v in nums)):
            sys.exit(f"bench-real-networks.py: --row {text!r}: expected "
                     "LABEL=SPEC@SIDE:BATCH[:STEPS] (positive integers)")
        side, batch, steps = [int(v) for v in nums] + [20] * (3 - len(nums))
        rows.append(dict(name=label, title=f"{label}, {side} px, {batch}", spec=spec, side=side,
                         batch=batch, steps=steps))
    for r in rows:
        r["steps"] = max(2, round(r["steps"] * a.steps_scale))
    return rows


def start(cmd, out, err, env=None):
    """cmd in a process group of its own (a compiler's worker processes die with it)."""
    return subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True,
                            env={**os.environ, **(env or {})})


def finish(proc, seconds):
    """proc's exit status, or None when it ran out of time (then its group is killed)."""
    try:
        return proc.wait(timeout=max(seconds, 0.1))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def launch(a, clock, own, cmd, log, env=None):
    """Runs cmd with its output in WORK/logs/LOG.{out,err} and the driver's memory
    sampled: (the exit status or why there is none, stdout lines, stderr lines, the
    driver's figures or None)."""
    limit = clock.limit(own)
    if limit is None:
        return "skipped: the run's --budget was spent", [], [], None
    base = os.path.join(a.work, "logs", log)
    watch = driver_memory.DriverMemory(a.gpu) if a.device == "cuda" else contextlib.nullcontext()
    with open(base + ".out", "w") as out, open(base + ".err", "w") as err, watch as driver:
        proc = start(cmd, out, err, env)
        rc = finish(proc, limit)
        if rc is None:
            rc = f"timeout after {limit:.0f} s"
    lines = [open(base + s, encoding="utf-8", errors="replace").read().splitlines() for s in (".out", ".err")]
    return rc, lines[0], lines[1], driver


def tandem_row(a, clock, row, folder):
    cmd = [a.tandem, "--devices", "cuda:0" if a.device == "cuda" else "cpu", "--dataset", folder,
           "--network", row["spec"], "--batch", str(row["batch"]), "--precision", a.precision,
           "--optimizer", "nesterov", "--lr", "0.05", "--max-steps", str(2 * row["steps"]),
           "--json", "--quiet", "--record", "--history", os.path.join(a.work, "runs")]
    # Recorded: the step events fall on the history's grid of 10 steps (and the epoch
    # ends), the same points on any machine, not every 50 ms of the clock.
    if row["side"] != 32:  # a folder of PNG files: read at their size
        cmd += ["--image-size", str(row["side"])]
    rc, out, err, driver = launch(a, clock, 300, cmd, f"{row['name']}-tandem",
                                  {"G_MESSAGES_DEBUG": "Tandem-Compute",
                                   "TANDEM_CONV_CACHE": a.conv_cache})
    evs = tandem_run.events(out)
    rate = tandem_run.throughput(evs, row["batch"])
    s = tandem_run.started(evs) or {}
    res = dict(samples_per_second=rate[0] if rate else None, memory=tandem_run.memory(evs),
               conv_choices=s.get("conv_choices"), prewarm_seconds=s.get("prewarm_seconds"),
               driver_peak=driver.peak_above_idle() if driver else None,
               layers=tandem_run.conv_choices(out + err, row["batch"],
                                              tandem_run.cache_times(a.conv_cache)),
               precision=s.get("precision"), error=None)
    if rc != 0 or rate is None:
        res["error"] = (rc if isinstance(rc, str) else
                        f"exit {rc}: {tandem_run.failure(evs, err) or 'no step events'}")
    elif a.device == "cuda" and s.get("precision") not in (None, "bf16"):
        # The comparison is against PyTorch in bf16: a row that computed otherwise is not it.
        res["error"] = f"computed in {s.get('precision')} ({s.get('precision_why', '')}), not bf16"
    return res


def last_json(lines):
    """The last line that is a JSON object, parsed; None when there is none."""
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def torch_command(a, row, mode, *extra):
    return [a.python, os.path.join(HERE, "torch_row.py"), "--model", row["spec"],
            "--side", str(row["side"]), "--batch", str(row["batch"]), "--steps", str(row["steps"]),
            "--mode", mode, "--device", a.device, *extra]


def precompile_start(a, rows):
    """Starts every row's torch.compile at once, each process stopping after its
    compiling step: compiling is mostly the CPU's work, one process of it leaves most
    cores idle, and the graphs land in torch.compile's caches on disk, where the
    measured process of the row finds them. Nothing is measured meanwhile."""
    if a.no_torch or a.no_compile or not a.precompile or not rows:
        return []
    # Each compiler's pool of worker processes gets its share of the cores.
    threads = {"TORCHINDUCTOR_COMPILE_THREADS": os.environ.get(
        "TORCHINDUCTOR_COMPILE_THREADS", str(max(2, (os.cpu_count() or 2) // len(rows))))}
    started = []
    for r in rows:
        base = os.path.join(a.work, "logs", f"{r['name']}-precompile")
        with open(base + ".out", "w") as out, open(base + ".err", "w") as err:
            started.append((r, base, start(torch_command(a, r, "compile", "--compile-only"),
                                           out, err, threads)))
    return started


def precompile_finish(a, clock, started):
    """Waits for the compiles (within the budget and --compile-timeout) and notes each
    row's cold compile: r["precompile"] = {compile_seconds, error}. A row whose compile
    failed is measured all the same (alone, it may not fail: memory), one that ran out
    of time is not."""
    begin = time.monotonic()
    end = begin + (clock.limit(a.compile_timeout) or 0)
    for r, base, proc in started:
        if finish(proc, end - time.monotonic()) is None:
            r["precompile"] = {"error": f"compiling took over {end - begin:.0f} s "
                                        "(--compile-timeout, or the run's budget)"}
            continue
        res = last_json(open(base + ".out", encoding="utf-8", errors="replace").read().splitlines())
        r["precompile"] = res or {"error": f"exit {proc.returncode}: no output (see {base}.err)"}


def torch_row(a, clock, row, mode):
    if a.no_torch or (mode == "compile" and a.no_compile):
        return None
    cold = row.get("precompile") if mode == "compile" else None
    if cold and str(cold.get("error")).startswith("compiling took over"):
        return {"error": cold["error"]}
    cmd = torch_command(a, row, mode, *(["--shapes"] if mode == "eager" else []))
    own = a.compile_timeout if mode == "compile" else 240
    rc, out, err, driver = launch(a, clock, own, cmd, f"{row['name']}-{mode}")
    res = last_json(out) or {"error": None}
    if cold:
        res["cold_compile_seconds"] = cold.get("compile_seconds")
    res["driver_peak"] = driver.peak_above_idle() if driver else None
    if res.get("error") is None and "samples_per_second" not in res:
        tail = [x for x in err if x.strip()]
        res["error"] = rc if isinstance(rc, str) else \
            f"exit {rc}: {tail[-1][:300] if tail else 'no output'}"
    return res


def matmul_ceiling(a, clock):
    """PyTorch's bf16 matrix product's TFLOP/s on this GPU (torch_row.py --mode
    ceiling), or None (no PyTorch, no GPU, --ceiling given)."""
    if a.no_torch or a.device != "cuda" or a.ceiling:
        return None
    cmd = [a.python, os.path.join(HERE, "torch_row.py"), "--mode", "ceiling"]
    _, out, _, _ = launch(a, clock, 60, cmd, "ceiling")
    return (last_json(out) or {}).get("tflops")


def preset(a, clock):
    """Time to --target of the `resnet` preset for each seed, Tandem (and PyTorch eager
    with --preset-torch)."""
    seeds = []
    for seed in a.seeds.split():
        cmd = [a.tandem, "--devices", "cuda:0" if a.device == "cuda" else "cpu", "--network",
               "resnet", "--precision", "bf16", "--json", "--quiet", "--seed", seed]
        rc, out, err, _ = launch(a, clock, 150, cmd, f"preset-{seed}",
                                 {"TANDEM_CONV_CACHE": a.conv_cache})
        evs = tandem_run.events(out)
        res = dict(seed=int(seed), **tandem_run.time_to_accuracy(evs, a.target), error=None)
        if rc != 0:
            res["error"] = rc if isinstance(rc, str) else f"exit {rc}: {tandem_run.failure(evs, err)}"
        if a.preset_torch:
            res["torch"] = torch_preset(a, clock, seed)
        seeds.append(res)
    return seeds


def torch_preset(a, clock, seed):
    cmd = [a.python, os.path.join(HERE, "torch_reference.py"), "--device", a.device, "--network",
           "resnet", "--batch", "512", "--precision", "bf16", "--time-to-accuracy", "--prewarm",
           "--seed", seed, "--target", str(a.target)]
    rc, out, err, _ = launch(a, clock, 120, cmd, f"preset-{seed}-torch")
    got = dict(line.split("=", 1) for line in out if "=" in line)
    if "time_to_accuracy" not in got:
        return {"seconds": None, "error": rc if isinstance(rc, str) else f"exit {rc}: "
                + (err[-1][:300] if err else "no time_to_accuracy line")}
    t = float(got["time_to_accuracy"])
    return {"seconds": None if t != t else t, "error": None}


def options():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    gpu_bin = os.path.join(HERE, "bin", "tandem-train")
    p.add_argument("--rows", default="all", help="comma-separated row names, all, or none")
    p.add_argument("--row", action="append", default=[], help="LABEL=SPEC@SIDE:BATCH[:STEPS]")
    p.add_argument("--tandem", default=gpu_bin if os.path.exists(gpu_bin) else
                   os.path.join(HERE, "..", "build", "src", "tandem-train"))
    p.add_argument("--python", default=sys.executable, help="the Python with PyTorch")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--precision", choices=("bf16", "auto"), default="bf16",
                   help="Tandem's --precision in the rows (auto: the window's default, "
                        "which must resolve to bf16 on the GPU; PyTorch stays autocast bf16)")
    p.add_argument("--gpu", type=int, default=0, help="the GPU's index for the driver's figures")
    p.add_argument("--work", default="/tmp/bench-real-networks")
    p.add_argument("--json", help="the results' file (default WORK/real-networks.json)")
    p.add_argument("--markdown", help="the tables' file (default: --json's, ending .md)")
    p.add_argument("--fresh-cache", action="store_true",
                   help="forget the convolution choices of earlier runs (WORK/conv-cache.txt)")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--no-preset", action="store_true")
    p.add_argument("--preset-torch", action="store_true", help="PyTorch's time to 94 %% too")
    p.add_argument("--seeds", default="0 1 2")
    p.add_argument("--target", type=float, default=0.94)
    p.add_argument("--steps-scale", type=float, default=1.0, help="times each row's STEPS")
    p.add_argument("--budget", type=float, default=480, help="seconds for the whole run")
    p.add_argument("--compile-timeout", type=float, default=240,
                   help="seconds for compiling (all rows at once) and for each measured compile")
    p.add_argument("--no-precompile", dest="precompile", action="store_false",
                   help="compile each row only when it is measured, one after another")
    p.add_argument("--ceiling", type=float,
                   help="the bf16 TFLOP/s the layers are set against (else PyTorch's "
                        "8192³ bf16 matrix product's, measured first, else the datasheet's)")
    a = p.parse_args()
    a.work = os.path.abspath(a.work)
    a.json = a.json or os.path.join(a.work, "real-networks.json")
    a.markdown = a.markdown or os.path.splitext(a.json)[0] + ".md"
    a.conv_cache = os.path.join(a.work, "conv-cache.txt")
    if not os.access(a.tandem, os.X_OK):
        sys.exit(f"bench-real-networks.py: --tandem {a.tandem}: not an executable "
                 "(run tools/gpu-prepare, or build src/tandem-train)")
    return a


def publish(a, result):
    """The verdicts, the JSON and the markdown file as far as the run has come (a run
    cut short still leaves what it measured); returns the markdown's two parts."""
    result["verdicts"] = report.verdicts(result, a.target)
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    summary, convolutions = report.markdown(result)
    with open(a.markdown, "w", encoding="utf-8") as f:
        f.write(summary + "\n\n" + convolutions + "\n")
    return summary, convolutions


def measure(a, clock, result):
    rows = result["rows"]
    compiling = precompile_start(a, rows)
    folders = [bench_data.write(os.path.join(a.work, "data"), r["side"], r["batch"]) for r in rows]
    precompile_finish(a, clock, compiling)
    for r, folder in zip(rows, folders):
        r["tandem"] = tandem_row(a, clock, r, folder)
        r["eager"] = torch_row(a, clock, r, "eager")
        print(report.progress(r), file=sys.stderr, flush=True)
        publish(a, result)
    if not a.no_preset:
        result["preset"] = preset(a, clock)
        publish(a, result)
    for r in rows:
        r["compile"] = torch_row(a, clock, r, "compile")
        if r["compile"] is not None:
            print(report.progress(r), file=sys.stderr, flush=True)
            publish(a, result)


def main():
    a = options()
    clock = Clock(a.budget)
    rows = parse_rows(a)
    os.makedirs(os.path.join(a.work, "logs"), exist_ok=True)
    if a.fresh_cache and os.path.exists(a.conv_cache):
        os.remove(a.conv_cache)
    gpu = driver_memory.gpu_name(a.gpu) if a.device == "cuda" else "CPU"
    result = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  device=gpu, datasheet_tflops=report.datasheet_tflops(gpu),
                  matmul_tflops=matmul_ceiling(a, clock), command=sys.argv, rows=rows,
                  preset=None)
    result["ceiling_tflops"] = a.ceiling or result["matmul_tflops"] or result["datasheet_tflops"]
    measure(a, clock, result)
    summary, convolutions = publish(a, result)
    # The summary last: a reader of the output's tail sees it.
    print(convolutions + "\n\n" + summary)
    print(f"\n(all of it in {a.markdown} and {a.json}; logs in {os.path.join(a.work, 'logs')})")


if __name__ == "__main__":
    main()
