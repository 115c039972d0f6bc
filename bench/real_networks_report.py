# SPDX-License-Identifier: GPL-3.0-or-later
"""bench/bench-real-networks.py's results as markdown, and the verdict on each of issue
31's targets: samples/s ≥ 1.5× PyTorch eager and ≥ torch.compile in every row; Tandem's
memory ≤ PyTorch eager's (its own count above the data against max_memory_allocated
above the data, and the driver's peak against the driver's peak); the `resnet` preset's
time to 94 % ≤ 1.0 s, the mean of its seeds, every seed reaching 94.0 %.

A figure that is missing (a failed or skipped run) makes its verdict None ("n/a"), never
a pass.
"""
import tandem_run

SPEED_VS_EAGER = 1.5
PRESET_SECONDS = 1.0

# Dense bf16 tensor-core TFLOP/s from NVIDIA's datasheets (their "with sparsity"
# figures are twice these), matched on the driver's name, the more specific first;
# the layers are set against the measured matrix product's reach where there is one
# (an H100 or H200 here: 770–800).
CEILINGS = [("H200 NVL", 835), ("H200", 989), ("GH200", 989), ("H100 PCIe", 756),
            ("H100 NVL", 835), ("H100", 989), ("A100", 312), ("L40S", 362), ("L4", 121)]
DIRECTIONS = ("fwd", "dgrad", "wgrad")


def datasheet_tflops(gpu):
    for part, tflops in CEILINGS:
        if gpu and part in gpu:
            return tflops
    return None


def _rate(v):
    return "—" if v is None else f"{v:,.0f}"


def _gib(v):
    return "—" if v is None else f"{v / 2**30:.2f}"


def _ratio(a, b):
    return None if a is None or not b else a / b


def _cell(part, key="samples_per_second", fmt=_rate, why=True):
    """A figure of one measurement, or why it is missing (with why=False, only that it
    failed: the speed table says why)."""
    if part is None:
        return "not run"
    error = part.get("error")
    if part.get(key) is None:
        if not error:
            return "—"
        skipped = str(error).startswith("skipped")
        return (error if skipped else f"failed: {error}") if why else \
            "skipped" if skipped else "failed"
    return fmt(part[key])


def _get(part, *keys):
    for k in keys:
        if part is None:
            return None
        part = part.get(k)
    return part


def _at_least(a, b, factor=1.0):
    return None if a is None or b is None else a >= factor * b


def _at_most(a, b):
    return None if a is None or b is None else a <= b


def _yes(v):
    return "n/a" if v is None else "**yes**" if v else "no"


def progress(r):
    t, e, c = r.get("tandem"), r.get("eager"), r.get("compile")
    return (f"{r['name']}: samples/s Tandem {_cell(t)}, eager {_cell(e)}, compile {_cell(c)}; "
            f"GiB above the data: Tandem {_gib(_get(t, 'memory', 'above_data'))}, eager "
            f"{_cell(e, 'peak_above_data', _gib, False)}")


def verdicts(result, target):
    rows = {}
    for r in result["rows"]:
        t, e, c = r.get("tandem"), r.get("eager"), r.get("compile")
        ts = _get(t, "samples_per_second")
        rows[r["name"]] = dict(
            speed_vs_eager=_at_least(ts, _get(e, "samples_per_second"), SPEED_VS_EAGER),
            speed_vs_compile=_at_least(ts, _get(c, "samples_per_second")),
            memory_own=_at_most(_get(t, "memory", "above_data"), _get(e, "peak_above_data")),
            memory_driver=_at_most(_get(t, "driver_peak"), _get(e, "driver_peak")))
    out = {"rows": rows, "preset": None}
    seeds = result.get("preset")
    if seeds:
        times = [s["seconds"] for s in seeds]
        reached = all(t is not None for t in times)
        mean = sum(times) / len(times) if reached else None
        out["preset"] = dict(mean_seconds=mean, every_seed_reached=reached, target=target,
                             met=reached and mean <= PRESET_SECONDS)
    return out


def _compile_seconds(c):
    """The compile's seconds after the rate, as " (95 s; 12 s from the cache)": the cold
    compile (all rows at once) and the measured process's first step."""
    cold, warm = c.get("cold_compile_seconds"), c.get("compile_seconds")
    if cold is None:
        return "" if warm is None else f" ({warm:.0f} s)"
    return f" ({cold:.0f} s; {warm:.0f} s from the cache)"


def conv_flop_per_sample(convs):
    """A training sample's convolution work from PyTorch's layers: forward, weight
    gradient and input gradient each, but the first layer's input gradient (none)."""
    if not convs:
        return None
    per = [tandem_run.conv_flop({**c, "n": 1}) for c in convs]
    return 3 * sum(per) - per[0]


def _conv_rates(r, parts):
    work = conv_flop_per_sample(_get(r, "eager", "convs"))
    rates = [_get(p, "samples_per_second") for p in parts]
    return " / ".join("—" if not work or x is None else f"{work * x / 1e12:.0f}" for x in rates)


def _speed_table(result):
    yield ("| row | Tandem samples/s | PyTorch eager | torch.compile (its compile) | "
           "Tandem ÷ eager | Tandem ÷ compile | conv TFLOP/s: Tandem / eager / compile |")
    yield "|---|---|---|---|---|---|---|"
    for r in result["rows"]:
        t, e, c = r.get("tandem"), r.get("eager"), r.get("compile")
        ts = _get(t, "samples_per_second")
        comp = _cell(c)
        if _get(c, "samples_per_second") is not None:
            comp += _compile_seconds(c)
        ratios = [_ratio(ts, _get(p, "samples_per_second")) for p in (e, c)]
        yield (f"| {r['title']} | {_cell(t)} | {_cell(e)} | {comp} | " +
               " | ".join("—" if x is None else f"{x:.2f}×" for x in ratios) +
               f" | {_conv_rates(r, (t, e, c))} |")


def _memory_table(result):
    yield ("| row (GiB) | Tandem own count above data | Tandem counted peak | Tandem estimate "
           "(basis) | Tandem driver | eager above data | eager driver | compile above data | "
           "compile driver |")
    yield "|---|---|---|---|---|---|---|---|---|"
    for r in result["rows"]:
        t, e, c = r.get("tandem"), r.get("eager"), r.get("compile")
        m = _get(t, "memory") or {}
        est = f"{_gib(m.get('total'))} ({m.get('basis')})" if m else "—"
        cells = [_gib(m.get("above_data")), _gib(m.get("counted_peak")), est,
                 _gib(_get(t, "driver_peak")), _cell(e, "peak_above_data", _gib, False),
                 _gib(_get(e, "driver_peak")), _cell(c, "peak_above_data", _gib, False),
                 _gib(_get(c, "driver_peak"))]
        yield f"| {r['title']} | " + " | ".join(cells) + " |"


def _preset_table(result, v):
    seeds = result["preset"]
    torch = any("torch" in s for s in seeds)
    yield "| seed | Tandem s to 94 % | accuracy per epoch | pre-warm s |" + \
        (" PyTorch eager s |" if torch else "")
    yield "|---|---|---|---|" + ("---|" if torch else "")
    for s in seeds:
        sec = f"{s['seconds']:.3f}" if s["seconds"] is not None else \
            f"not reached{': ' + s['error'] if s['error'] else ''}"
        accs = " ".join(f"{x:.4f}" for x in s["accuracies"])
        pw = "—" if s["prewarm_seconds"] is None else f"{s['prewarm_seconds']:.2f}"
        extra = ""
        if torch:
            ts = s["torch"]
            extra = f" {ts['seconds']:.3f} |" if ts["seconds"] is not None else \
                f" {ts['error'] or 'not reached'} |"
        yield f"| {s['seed']} | {sec} | {accs} | {pw} |{extra}"
    p = v["preset"]
    got = [s["seconds"] for s in seeds if s["seconds"] is not None]
    mean = f"{p['mean_seconds']:.3f} s" if p["mean_seconds"] is not None else \
        f"{sum(got) / len(got):.3f} s over the {len(got)} seeds that reached it" if got else "—"
    yield f"\nMean {mean}; every seed reached {p['target'] * 100:.1f} %: " \
        f"{_yes(p['every_seed_reached'])}."


def _verdict_table(result, v):
    yield "| row | ≥ 1.5× eager | ≥ torch.compile | own count ≤ eager's | driver ≤ eager's |"
    yield "|---|---|---|---|---|"
    for r in result["rows"]:
        x = v["rows"][r["name"]]
        yield (f"| {r['title']} | {_yes(x['speed_vs_eager'])} | {_yes(x['speed_vs_compile'])} | "
               f"{_yes(x['memory_own'])} | {_yes(x['memory_driver'])} |")
    if v["preset"]:
        p = v["preset"]
        yield f"| `resnet` preset: mean time to 94 % ≤ {PRESET_SECONDS} s, every seed ≥ 94.0 % " \
              f"| {_yes(p['met'])} | | | |"


def _layer_names(convs):
    """{geometry: [module names]} of PyTorch's convolutions, and the geometries' order."""
    names = {}
    for c in convs or []:
        names.setdefault(tuple(c[k] for k in "nhwcokps"), []).append(c["layer"])
    return names


def _conv_total(r):
    """(ms, TFLOP/s, the step's ms) of a step's convolutions, each of PyTorch's layers
    counted at its shape's chosen time; None unless every line has a time and a layer."""
    names = _layer_names(_get(r, "eager", "convs"))
    groups = {}
    for c in _get(r, "tandem", "layers") or []:
        g = tuple(c[k] for k in "nhwcokps")
        if c["ms"] is None or g not in names:
            return None
        groups.setdefault((g, c["dir"]), []).append(c)
    if not groups:
        return None
    ms = sum(sum(c["ms"] for c in cs) / len(cs) * len(names[g]) for (g, _), cs in groups.items())
    flop = sum(tandem_run.conv_flop(cs[0]) * len(names[g]) for (g, _), cs in groups.items())
    rate = _get(r, "tandem", "samples_per_second")
    return ms, flop / ms / 1e9, 1e3 * r["batch"] / rate if rate else None


def _layers_table(r, peak):
    choices = _get(r, "tandem", "layers") or []
    names = _layer_names(_get(r, "eager", "convs"))
    order = {g: i for i, g in enumerate(names)}

    def where(c):
        g = tuple(c[k] for k in "nhwcokps")
        return (order.get(g, len(order)), DIRECTIONS.index(c["dir"]))
    yield ("| layers (PyTorch's names) | direction | n, h×w, c→o, k, stride, pad | flags | chosen "
           "| ms | TFLOP/s | of the bf16 ceiling |")
    yield "|---|---|---|---|---|---|---|---|"
    for c in sorted(choices, key=where):
        layer = names.get(tuple(c[k] for k in "nhwcokps"), [])
        who = "—" if not layer else layer[0] + (f" +{len(layer) - 1}" if len(layer) > 1 else "")
        ms = "—" if c["ms"] is None else f"{c['ms']:.4f}"
        tf = "—" if c["tflops"] is None else f"{c['tflops']:.0f}"
        share = "—" if c["tflops"] is None or not peak else f"{100 * c['tflops'] / peak:.0f} %"
        yield (f"| {who} | {c['dir']} | {c['n']}, {c['h']}×{c['w']}, {c['c']}→{c['o']}, "
               f"k{c['k']}, s{c['s']}, p{c['p']} | {' '.join(c['flags']) or '—'} | "
               f"`{c['name']}` | {ms} | {tf} | {share} |")


def markdown(result):
    """(summary, convolutions): the speed, memory, preset and verdict tables, and each
    row's convolutions, as markdown."""
    v = result["verdicts"]
    out = [f"## Tandem beside PyTorch on {result['device']} ({result['date']}; bf16)", "",
           "Samples/s after warm-up:", ""]
    out += _speed_table(result)
    out += ["", "conv TFLOP/s: the convolutions' work a sample (forward and both gradients, "
            "from PyTorch's layers) times samples/s.", "", "Peak memory (PyTorch's above the model and its batch; the driver's above "
            "the GPU's use before the process):", ""]
    out += _memory_table(result)
    if result.get("preset"):
        out += ["", "The `resnet` preset on Fashion-MNIST, time to 94 % (training seconds):", ""]
        out += _preset_table(result, v)
    out += ["", "Verdicts:", ""]
    out += _verdict_table(result, v)
    return "\n".join(out), "\n".join(_convolutions(result))


def _convolutions(result):
    peak = result.get("ceiling_tflops")
    ceiling_text = "unknown: --ceiling" if not peak else f"{peak:.0f} TFLOP/s bf16" + (
        " measured (PyTorch's 8192³ matrix product)" if peak == result.get("matmul_tflops")
        else "") + (f"; the datasheet's dense figure {result['datasheet_tflops']}"
                    if result.get("datasheet_tflops") else "")
    for r in result["rows"]:
        t = r.get("tandem") or {}
        if not t.get("layers"):
            why = ("not run" if not t else f"none in the log of a run that failed ({t['error']})"
                   if t.get("error") else "no choices in its log (the engine runs on CUDA "
                   "only, and not under TANDEM_CONV=im2col)")
            yield f"Convolutions of {r['title']}: {why}.\n"
            continue
        yield (f"Convolutions of {r['title']} (conv choices {json_counts(t)}; "
               f"ceiling {ceiling_text}):\n")
        yield from _layers_table(r, peak)
        total = _conv_total(r)
        if total:
            ms, tflops, step = total
            yield (f"\nSummed over PyTorch's layers (the lines of one shape and direction "
                   f"averaged): the convolutions ≈ {ms:.2f} ms"
                   + (f" of a {step:.2f}-ms step ({100 * ms / step:.0f} %)" if step else "")
                   + f", at {tflops:.0f} TFLOP/s on the whole.")
        yield ""
    yield ("ms is the engine's own timing of the chosen candidate while choosing (CUDA "
           "events, mean of 3 runs, in the pre-warm), not the layer's time inside a step, "
           "which Tandem does not report; a choice read from the cache has the time it was "
           "chosen with (— where the cache has none). Several PyTorch layers of one shape "
           "share a line (+N); one shape may have several lines, told apart by the flags "
           "(bn: normalized while loaded; x16: input stored bf16; y16/dx16: output written "
           "bf16).")


def json_counts(t):
    c = t.get("conv_choices")
    return "—" if not c else ", ".join(f"{v} {k}" for k, v in c.items())
