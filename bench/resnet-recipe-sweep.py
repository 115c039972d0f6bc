#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Recipe sweep for the resnet preset's time to 94 % on Fashion-MNIST
(bench/NOTES.md "a 7-epoch recipe"). Not a test: it asserts nothing.

Runs candidates × seeds of tandem-train on one GPU, JOBS processes at a time: Tandem's
runs are deterministic, so sharing the GPU changes their times, not their accuracies.
Then one solo 3-epoch run per distinct (network, batch) gives the epoch times, and the
table estimates each seed's time to 94 % as first epoch + (k − 1) × steady epoch, k
the epoch it first reaches 94 %. Candidates are overrides of BASE, the recipe before
the first sweep (10 epochs, lr 0.2, no test flips); `--test-flip` is on unless tf=False. Ends by
writing the flags of the fastest candidate whose every seed ends ≥ 94.03 % (else
≥ 94 %) to $OUT/pick.txt; with SOLO=0, of the one with the fewest epochs, then the
highest lowest seed, whose every seed ends ≥ 94 %.

Environment: G (the folder with bin/tandem-train, as tools/gpu-prepare makes .gpu),
OUT (logs), SWEEP (1 to 7, or several as "1 2": which of the sweeps below; default
2), SEEDS ("0 1 2"), JOBS (4), DEVICES (cuda:0), SOLO (1; 0 skips the solo epoch
times, and with them the estimates; the pick is then by epochs and accuracy). Every run is pre-warmed
(tandem-train's default on a GPU), so a first epoch costs what a later one does."""
import concurrent.futures as cf, json, os, subprocess, sys, time

G = os.environ["G"]
OUT = os.environ["OUT"]
BIN = f"{G}/bin/tandem-train"
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0 1 2").split()]
JOBS = int(os.environ.get("JOBS", "4"))
RESNET = ("conv32k3p1,bn,relu,conv64k3p1,bn,relu,pool2,res(conv64k3p1,bn,relu,conv64k3p1,bn,relu),"
          "conv128k3p1,bn,relu,pool2,conv256k3p1,bn,relu,pool2,res(conv256k3p1,bn,relu,conv256k3p1,bn,relu),"
          "gmp,fc10nb,scale0.125")
NO32 = ("conv64k3p1,bn,relu,pool2,res(conv64k3p1,bn,relu,conv64k3p1,bn,relu),"
        "conv128k3p1,bn,relu,pool2,conv256k3p1,bn,relu,pool2,res(conv256k3p1,bn,relu,conv256k3p1,bn,relu),"
        "gmp,fc10nb,scale0.125")
POOL32 = ("conv32k3p1,bn,relu,pool2,conv64k3p1,bn,relu,res(conv64k3p1,bn,relu,conv64k3p1,bn,relu),"
          "conv128k3p1,bn,relu,pool2,conv256k3p1,bn,relu,pool2,res(conv256k3p1,bn,relu,conv256k3p1,bn,relu),"
          "gmp,fc10nb,scale0.125")
BASE = dict(network=RESNET, batch="512", optimizer="nesterov", lr="0.2", momentum="0.9",
            **{"weight-decay": "5e-4", "weight-decay-on": "weights", "schedule": "linear",
               "warmup": "1", "label-smoothing": "0.1", "crop": "2", "flip": "auto",
               "batchnorm": "sync", "precision": "bf16", "epochs": "10"})

def cand(name, tf=True, **kw):
    d = dict(BASE)
    for k, v in kw.items():
        d[k.replace("_", "-")] = str(v)
    return (name, d, tf)

SWEEPS = {}
# The first sweep.
SWEEPS["1"] = [
    cand("e10-tf", epochs=10),
    cand("e8-tf", epochs=8),
    cand("e7-tf", epochs=7),
    cand("e6-tf", epochs=6),
    cand("e7-tf-ls2", epochs=7, label_smoothing=0.2),
    cand("e7-tf-lr4", epochs=7, lr=0.4),
    cand("e7-tf-b1024", epochs=7, batch=1024, lr=0.4),
    cand("no32-e8-tf", epochs=8, network=NO32),
    cand("no32-e10-tf", epochs=10, network=NO32),
    cand("pool32-e8-tf", epochs=8, network=POOL32),
    cand("e6-tf-lr4-ls2", epochs=6, lr=0.4, label_smoothing=0.2),
]
# The second sweep: higher peak lr over shorter schedules.
SWEEPS["2"] = [
    cand("e8-lr4", epochs=8, lr=0.4),
    cand("e7-lr6", epochs=7, lr=0.6),
    cand("e7-lr8", epochs=7, lr=0.8),
    cand("e6-lr6", epochs=6, lr=0.6),
    cand("e6-lr8", epochs=6, lr=0.8),
    cand("e5-lr8", epochs=5, lr=0.8),
    cand("e7-lr6-wd25", epochs=7, lr=0.6, weight_decay=2.5e-4),
    cand("e7-lr6-wd10", epochs=7, lr=0.6, weight_decay=1e-3),
    cand("e7-lr6-wu05", epochs=7, lr=0.6, warmup=0.5),
    cand("e6-lr8-wu05", epochs=6, lr=0.8, warmup=0.5),
]
# The third sweep: six epochs at the preset's lr 0.6 reached 93.95-94.11 %;
# the shape of the schedule (where the peak falls, cosine), the peak, the crop, the
# smoothing and the batch, each alone.
SWEEPS["3"] = [
    cand("e6-lr6-wu05", epochs=6, lr=0.6, warmup=0.5),
    cand("e6-lr6-wu15", epochs=6, lr=0.6, warmup=1.5),
    cand("e6-lr6-wu2", epochs=6, lr=0.6, warmup=2),
    cand("e6-lr6-cos", epochs=6, lr=0.6, schedule="cosine"),
    cand("e6-lr5", epochs=6, lr=0.5),
    cand("e6-lr7", epochs=6, lr=0.7),
    cand("e6-lr6-ls05", epochs=6, lr=0.6, label_smoothing=0.05),
    cand("e6-lr6-crop1", epochs=6, lr=0.6, crop=1),
    cand("e6-lr6-crop3", epochs=6, lr=0.6, crop=3),
    cand("e6-b384-lr45", epochs=6, batch=384, lr=0.45),
    cand("e6-lr6-m85", epochs=6, lr=0.6, momentum=0.85),
]
# The fourth sweep: 1-pixel crops made six epochs; five, around them.
SWEEPS["4"] = [
    cand("e5-lr6-crop1", epochs=5, lr=0.6, crop=1),
    cand("e5-lr7-crop1", epochs=5, lr=0.7, crop=1),
    cand("e5-lr5-crop1", epochs=5, lr=0.5, crop=1),
    cand("e5-lr6-crop1-wu05", epochs=5, lr=0.6, crop=1, warmup=0.5),
    cand("e5-lr6-crop1-ls05", epochs=5, lr=0.6, crop=1, label_smoothing=0.05),
    cand("e5-lr6-crop1-cos", epochs=5, lr=0.6, crop=1, schedule="cosine"),
    cand("e5-lr6-crop0", epochs=5, lr=0.6, crop=0),
    cand("e6-lr6-crop0", epochs=6, lr=0.6, crop=0),
    cand("e6-lr5-crop1", epochs=6, lr=0.5, crop=1),
    cand("e6-lr7-crop1", epochs=6, lr=0.7, crop=1),
]
# The fifth sweep: without crops (flips only) five epochs made 94 %; four,
# and five around it.
SWEEPS["5"] = [
    cand("e4-lr6-crop0", epochs=4, lr=0.6, crop=0),
    cand("e4-lr8-crop0", epochs=4, lr=0.8, crop=0),
    cand("e5-lr7-crop0", epochs=5, lr=0.7, crop=0),
    cand("e5-lr5-crop0", epochs=5, lr=0.5, crop=0),
    cand("e5-lr6-crop0-ls05", epochs=5, lr=0.6, crop=0, label_smoothing=0.05),
    cand("e5-lr6-crop0-wu05", epochs=5, lr=0.6, crop=0, warmup=0.5),
]
# The sixth sweep: four epochs with test-time shifts (--test-shift P: each test
# image also evaluated shifted P pixels up, down, left and right, each mirrored too;
# evaluation is not timed), around the peak lr, and five epochs with them for the margin.
SWEEPS["6"] = [
    cand("e4-lr6-ts1", epochs=4, lr=0.6, crop=0, test_shift=1),
    cand("e4-lr7-ts1", epochs=4, lr=0.7, crop=0, test_shift=1),
    cand("e4-lr8-ts1", epochs=4, lr=0.8, crop=0, test_shift=1),
    cand("e4-lr9-ts1", epochs=4, lr=0.9, crop=0, test_shift=1),
    cand("e4-lr10-ts1", epochs=4, lr=1.0, crop=0, test_shift=1),
    cand("e4-lr6-ts2", epochs=4, lr=0.6, crop=0, test_shift=2),
    cand("e4-lr8-ts2", epochs=4, lr=0.8, crop=0, test_shift=2),
    cand("e4-lr8-wu05-ts1", epochs=4, lr=0.8, crop=0, warmup=0.5, test_shift=1),
    cand("e4-lr7-wu05-ts1", epochs=4, lr=0.7, crop=0, warmup=0.5, test_shift=1),
    cand("e4-lr8-ls05-ts1", epochs=4, lr=0.8, crop=0, label_smoothing=0.05, test_shift=1),
    cand("e4-lr8-crop1-ts1", epochs=4, lr=0.8, crop=1, test_shift=1),
    cand("e5-lr6-ts1", epochs=5, lr=0.6, crop=0, test_shift=1),
]
# The seventh sweep: shifts cost accuracy (sweep 6), so four epochs with flips
# alone, around the third to fifth sweeps' e4 lr 0.8 (93.96, 93.96, 93.97): warm-up, smoothing, peak,
# decay shape, batch, weight decay and momentum, each moved alone (and two pairs).
def e4(name, **kw):
    return cand(name, epochs=4, crop=0, **kw)

SWEEPS["7"] = [
    e4("e4-lr8-wu05", lr=0.8, warmup=0.5),
    e4("e4-lr8-wu15", lr=0.8, warmup=1.5),
    e4("e4-lr8-ls05", lr=0.8, label_smoothing=0.05),
    e4("e4-lr8-ls0", lr=0.8, label_smoothing=0),
    e4("e4-lr7", lr=0.7),
    e4("e4-lr9", lr=0.9),
    e4("e4-lr9-wu05", lr=0.9, warmup=0.5),
    e4("e4-lr10-wu05", lr=1.0, warmup=0.5),
    e4("e4-lr8-cos", lr=0.8, schedule="cosine"),
    e4("e4-lr8-wu05-ls05", lr=0.8, warmup=0.5, label_smoothing=0.05),
    e4("e4-b384-lr6", batch=384, lr=0.6),
    e4("e4-b384-lr7", batch=384, lr=0.7),
    e4("e4-lr8-wd25", lr=0.8, weight_decay=2.5e-4),
    e4("e4-lr8-wd75", lr=0.8, weight_decay=7.5e-4),
    e4("e4-lr8-m85", lr=0.8, momentum=0.85),
    e4("e4-lr8-m95", lr=0.8, momentum=0.95),
]
CANDS = [c for k in os.environ.get("SWEEP", "2").split() for c in SWEEPS[k]]

def args_of(d, tf, seed):
    a = [BIN, "--devices", os.environ.get("DEVICES", "cuda:0"), "--json", "--quiet", "--seed", str(seed)]
    for k, v in d.items():
        a += [f"--{k}", v]
    if tf:
        a.append("--test-flip")
    return a

def run(name, d, tf, seed):
    p = subprocess.run(args_of(d, tf, seed), capture_output=True, text=True, timeout=300)
    accs, times = [], []
    for line in p.stdout.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("type") == "epoch":
            accs.append(e["test_accuracy"])
            times.append(e["elapsed"])
    if p.returncode != 0:
        print(f"FAILED {name} seed {seed}: rc {p.returncode} {p.stderr[-300:]}", flush=True)
    return accs, times

t0 = time.time()
results = {}
with cf.ThreadPoolExecutor(JOBS) as ex:
    futs = {ex.submit(run, n, d, tf, s): (n, s) for n, d, tf in CANDS for s in SEEDS}
    for f in cf.as_completed(futs):
        results[futs[f]] = f.result()
        n, s = futs[f]
        print(f"# run {n} seed {s}: {' '.join('%.4f' % a for a in results[(n, s)][0])}", flush=True)
print(f"# shared runs done in {time.time() - t0:.0f} s", flush=True)

# Solo epoch times per (network, batch): 3 epochs of seed 0.
solo = {}
if os.environ.get("SOLO", "1") == "1":
    for n, d, tf in CANDS:
        key = (d["network"], d["batch"])
        if key in solo:
            continue
        dd = dict(d, epochs="3")
        accs, times = run("solo", dd, tf, 0)
        if len(times) == 3:
            solo[key] = (times[0], (times[2] - times[0]) / 2)
            print(f"# solo {n}: first epoch {times[0]:.3f} s, steady {(times[2]-times[0])/2:.4f} s", flush=True)

picks = []
print("| candidate | seed | first epoch >= 94 % | final | est. time to 94 % | accuracies by epoch |")
for n, d, tf in CANDS:
    ests, ok = [], True
    for s in SEEDS:
        accs, times = results[(n, s)]
        first = next((i + 1 for i, a in enumerate(accs) if a >= 0.94), None)
        est = None
        key = (d["network"], d["batch"])
        if first and key in solo:
            est = solo[key][0] + (first - 1) * solo[key][1]
            ests.append(est)
        if not accs or accs[-1] < 0.94 or first is None:
            ok = False
        print(f"| {n} | {s} | {first} | {accs[-1] if accs else None} | "
              f"{'%.3f' % est if est else '-'} | {' '.join('%.4f' % a for a in accs)} |", flush=True)
    if ok and len(ests) == len(SEEDS):
        print(f"# {n}: all seeds >= 94 %, mean est. {sum(ests)/len(ests):.3f} s", flush=True)
        low = min(results[(n, s)][0][-1] for s in SEEDS)
        picks.append((sum(ests) / len(ests), low, n, d, tf))
    else:
        print(f"# {n}: not every seed >= 94 %", flush=True)

# The pick: the least estimated time among candidates whose every seed ends at least
# 0.03 points over 94 %, else at least at 94 %; its flags (beside --network) to pick.txt.
sure = [p for p in picks if p[1] >= 0.9403] or picks
if not solo:
    # Without epoch times (SOLO=0): the fewest epochs, then the highest lowest seed,
    # among candidates whose every seed ends at least at 94 %.
    sure = []
    for n, d, tf in CANDS:
        finals = [results[(n, s)][0][-1] if results[(n, s)][0] else 0 for s in SEEDS]
        if min(finals) >= 0.94:
            sure.append((int(d["epochs"]) - min(finals), min(finals), n, d, tf))
if sure:
    est, low, n, d, tf = min(sure, key=lambda p: p[0])
    flags = []
    for k, v in d.items():
        if k not in ("network", "precision", "batchnorm"):
            flags += [f"--{k}", v]
    if tf:
        flags.append("--test-flip")
    open(os.path.join(OUT, "pick.txt"), "w").write(" ".join([n] + flags))
    print(f"# pick: {n} (est. {est:.3f}{' s' if solo else ', epochs - lowest final'}, "
          f"lowest final {low:.4f})", flush=True)
