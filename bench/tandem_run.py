# SPDX-License-Identifier: GPL-3.0-or-later
"""What a `tandem-train --json` run says, read for the benchmarks: its JSON events
(one object a line on stdout), the convolution engine's choices from its debug lines
(G_MESSAGES_DEBUG=Tandem-Compute; GLib writes them to stdout or stderr, so both are
read) and the engine's disk cache (TANDEM_CONV_CACHE), where each timed choice keeps
its milliseconds. No PyTorch and no GPU needed: tests/cli/test-bench-events.py checks
it against the events of a real CPU run.

What Tandem reports per convolution is the choice for each shape and direction
("fwd n512 h32 w32 c64 o64 k3 p1 s1 bf16 x16 → cudnn:e62:r0:h (0.124 ms)") and the
chosen candidate's time as the engine measured it while choosing (CUDA events, the
mean of 3 runs after one to warm up, in the pre-warm), not its time inside a step;
a choice read back from the cache says "untimed" with 0 ms, and the cache file has
the time it was chosen with. The `started` event counts the choices by kind
(`conv_choices`: cudnn_fused, cudnn, own, im2col).
"""
import json
import re

# tdm-backend-cuda-conv-engine.c, choose(): "%s: %s → %s (%.3f ms%s)" with key_of()'s key.
# In a locale that is not UTF-8 GLib writes the arrow as "?" (or, in some versions,
# "\u2192").
CHOICE = re.compile(r"((fwd|dgrad|wgrad) n(\d+) h(\d+) w(\d+) c(\d+) o(\d+) k(\d+) p(\d+) "
                    r"s(\d+) (fp32|tf32|bf16)((?: [a-z0-9]+)*)) (?:→|\?|\\u2192) (\S+) "
                    r"\(([\d.]+) ms(, untimed)?\)")


def events(lines):
    """The JSON objects among the lines, in order (anything else is skipped)."""
    out = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and "type" in e:
            out.append(e)
    return out


def of_type(evs, kind):
    return [e for e in evs if e.get("type") == kind]


def throughput(evs, batch):
    """Samples/s over the run's second half, from the step events' step counts and
    training seconds (evaluation excluded): (rate, steps, seconds), or None when the
    run has fewer than two step events. Every step of these runs is a full batch."""
    steps = [(e["step"], e["elapsed"]) for e in of_type(evs, "step")]
    if len(steps) < 2:
        return None
    last_step, last_elapsed = steps[-1]
    start = next((s for s in steps if s[0] >= last_step / 2), steps[0])
    if start[0] == last_step:
        start = steps[-2]
    n, seconds = last_step - start[0], last_elapsed - start[1]
    if n <= 0 or seconds <= 0:
        return None
    return n * batch / seconds, n, seconds


def memory(evs):
    """Tandem's own count of its device memory, in bytes: the last `memory` event's
    first device (the plan; after the pre-warm its workspace is the chosen
    convolutions', its basis says which), the most the `devices` events saw held
    (`tandem_bytes`, what the backend holds when the event is written: `held`) and the
    backend's own peak (`peak_bytes`, counted at each allocation since the backend was
    made, the pre-warm included: `counted_peak`). `above_data` takes the parameters and
    the dataset out of that peak, as PyTorch's figure takes its model and its batch
    out. None when the run had no memory event."""
    mem = of_type(evs, "memory")
    if not mem:
        return None
    last = mem[-1]
    dev = last["devices"][0]
    devs = [e["devices"][0] for e in of_type(evs, "devices") if e.get("devices")]
    held = max((d.get("tandem_bytes") or 0 for d in devs), default=None)
    # A tandem-train older than peak_bytes: the most seen held stands for it.
    peak = max((d["peak_bytes"] for d in devs if "peak_bytes" in d), default=held)
    out = {k: dev[k] for k in ("parameters", "gradients", "optimizer", "activations",
                               "workspace", "dataset", "total")}
    out.update(basis=last.get("workspace_basis"), gpu_total=last.get("gpu_total"),
               estimates=[m["devices"][0]["total"] for m in mem], held=held, counted_peak=peak,
               above_data=None if peak is None else peak - dev["parameters"] - dev["dataset"])
    return out


def started(evs):
    s = of_type(evs, "started")
    return s[0] if s else None


def failure(evs, stderr_lines):
    """Why the run failed: its `failed` event's message, else stderr's last line."""
    for e in of_type(evs, "failed"):
        return e.get("message") or "failed"
    text = [line.strip() for line in stderr_lines if line.strip()
            and "-DEBUG" not in line and not line.startswith("{")]
    return text[-1] if text else None


def time_to_accuracy(evs, target):
    """The training seconds (evaluation excluded) at the end of the first epoch whose
    test accuracy is at least target, the accuracies of every epoch, and the pre-warm."""
    epochs = of_type(evs, "epoch")
    reached = next((e["elapsed"] for e in epochs if e["test_accuracy"] >= target), None)
    s = started(evs)
    return {"seconds": reached, "accuracies": [e["test_accuracy"] for e in epochs],
            "trained": epochs[-1]["elapsed"] if epochs else None,
            "prewarm_seconds": s.get("prewarm_seconds") if s else None}


def conv_flop(c):
    """Multiply-adds × 2 of one convolution (forward, input gradient and weight gradient
    alike): batch × output pixels × output channels × k² × input channels."""
    oh = (c["h"] + 2 * c["p"] - c["k"]) // c["s"] + 1
    ow = (c["w"] + 2 * c["p"] - c["k"]) // c["s"] + 1
    return 2.0 * c["n"] * oh * ow * c["o"] * c["k"] * c["k"] * c["c"]


def cache_times(path):
    """{key: (candidate, ms)} of the engine's disk cache (choices only), {} when the
    file is missing or not the cache's format."""
    out = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    if not lines or not lines[0].startswith("tandem-conv-choices "):
        return out
    for line in lines[1:]:
        f = line.split("\t")
        if len(f) == 3 and not f[0].startswith("workspace "):
            try:
                out[f[0]] = (f[1], float(f[2]))
            except ValueError:
                pass
    return out


def conv_choices(lines, batch=None, cache=None):
    """Each shape's choice from the debug lines, in the order first met (the pre-warm's
    forward goes through the layers in order): dicts with the key, direction, n h w c
    o k p s, the flags after the precision, the candidate, its ms and whether it was
    timed in this run (else the ms is the cache's, when it has that candidate for the
    key, or None). batch keeps one batch size (the evaluation's chunks have others)."""
    found = {}  # key → choice; a key keeps its first place when its choice is replaced
    for line in lines:
        m = CHOICE.search(line)
        if not m:
            continue
        c = dict(key=m.group(1), dir=m.group(2), precision=m.group(11),
                 flags=m.group(12).split(), name=m.group(13), ms=float(m.group(14)),
                 timed=m.group(15) is None)
        c.update(zip("nhwcokps", map(int, m.groups()[2:10])))
        if batch is not None and c["n"] != batch:
            continue
        old = found.get(c["key"])
        if old is None or c["timed"] or not old["timed"]:
            found[c["key"]] = c
    out = list(found.values())
    for c in out:
        if not c["timed"]:
            known = (cache or {}).get(c["key"])
            c["ms"] = known[1] if known and known[0] == c["name"] and known[1] > 0 else None
        c["tflops"] = conv_flop(c) / c["ms"] / 1e9 if c["ms"] else None
    return out
