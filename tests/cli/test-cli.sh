#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli.sh — tandem-train as a person and a script use it: --help, --list-devices,
# one clear line and exit status 2 for each kind of bad input (and no checkpoint left
# behind), a short real run with --json and --save, resuming it, and Ctrl-C.
# TAP on stdout; meson passes the paths of tandem-train and synthetic-helper.
set -u
train=${1:?usage: test-cli.sh PATH-TO-TANDEM-TRAIN PATH-TO-SYNTHETIC-HELPER}
helper=${2:?usage: test-cli.sh PATH-TO-TANDEM-TRAIN PATH-TO-SYNTHETIC-HELPER}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The runs' dataset: the synthetic set's images, 16,000 to train on (an epoch of 80
# steps at batch 200) and 1,000 to test, read as IDX files. "--dataset synthetic"
# would make 70,000 in every run.
syn=$tmp/synthetic
"$helper" "$syn" 16000 1000 || { echo "Bail out! synthetic-helper failed"; exit 1; }

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}
diag() { sed 's/^/# /'; }

have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1

plan=72
echo "1..$plan"

# --- help and listings -------------------------------------------------------------

"$train" --help >"$tmp/help" 2>&1
status=$?
missing=()
for flag in --dataset --network --devices --main --batch --epochs --optimizer --lr \
            --momentum --weight-decay --schedule --strategy --precision --seed --save \
            --resume --list-devices --json --quiet --version --batchnorm --weight-decay-on \
            --warmup --label-smoothing --crop --flip --test-flip --no-test-flip --test-shift; do
  grep -q -- "$flag" "$tmp/help" || missing+=("$flag")
done
# Exact mode's guarantee, in the engine's words (tdm_exact_describe), wrapped.
tr '\n' ' ' <"$tmp/help" | grep -q "Batch norm normalizes each 16-sample chunk" \
  || missing+=("exact mode's guarantee")
if [ $status -eq 0 ] && [ ${#missing[@]} -eq 0 ] && grep -q Examples "$tmp/help"; then
  ok "--help documents every flag"
else
  not_ok "--help documents every flag" "status $status, missing: ${missing[*]:-none}"
fi

out=$("$train" --version 2>&1)
if [ $? -eq 0 ] && [[ $out == "tandem-train "[0-9]* ]]; then
  ok "--version"
else
  not_ok "--version" "$out"
fi

out=$("$train" --list-devices 2>&1)
if [ $? -eq 0 ] && grep -q '^cpu' <<<"$out"; then
  ok "--list-devices lists the CPU"
else
  not_ok "--list-devices lists the CPU" "$out"
fi
command_out=$("$train" devices 2>&1)
if [ $? -eq 0 ] && [ "$command_out" = "$out" ]; then
  ok "tandem-train devices lists what --list-devices lists"
else
  not_ok "tandem-train devices" "$command_out"
fi

# A command's help is its options: classify's has --top, not the run's --epochs.
"$train" classify --help >"$tmp/classify-help" 2>&1
if [ $? -eq 0 ] && grep -q -- "--top" "$tmp/classify-help" && grep -q -- "--resume" "$tmp/classify-help" &&
   ! grep -q -- "--epochs" "$tmp/classify-help" && grep -q "tandem-train classify" "$tmp/classify-help"; then
  ok "tandem-train classify --help lists classify's options only"
else
  not_ok "tandem-train classify --help" "$(head -5 "$tmp/classify-help")"
fi

# --- bad input: exit 2, one line on stderr naming the culprit, nothing saved -------

# A dataset folder whose IDX files have the wrong magic number.
mkdir "$tmp/bad-idx"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
         t10k-labels-idx1-ubyte; do
  printf '\x00\x00\x08\x07\x00\x00\x00\x01\x00\x00\x00\x1c\x00\x00\x00\x1c' >"$tmp/bad-idx/$f"
done
echo "this is not a checkpoint" >"$tmp/not-a-checkpoint.safetensors"

# expect_bad NEEDLE ARGS...: exit status 2, exactly one stderr line "tandem-train: …"
# containing NEEDLE, nothing on stdout but a log's set-up lines (the memory estimate,
# the network's set-up begun), and no checkpoint file written.
expect_bad() {
  local needle=$1
  shift
  local ckpt="$tmp/never.safetensors"
  # --save first, so a test's own --save (given later) wins; a bad input must fail
  # quickly, so a run that goes on is cut short rather than hang the suite.
  timeout 60 "$train" --save "$ckpt" "$@" >"$tmp/out" 2>"$tmp/err"
  local status=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  local err
  err=$(cat "$tmp/err")
  if [ $status -eq 2 ] && [ "$lines" -eq 1 ] && [[ $err == "tandem-train: "* ]] &&
     [[ $err == *"$needle"* ]] && [ ! -e "$ckpt" ] &&
     ! grep -qv -e '^memory estimate: ' -e '^setting up the network$' "$tmp/out" &&
     [ -z "$(ls -A "$tmp" | grep '^\.never')" ]; then
    ok "$* → exit 2: $err"
  else
    not_ok "$* → exit 2 naming “$needle”" "status $status, $lines stderr lines:" \
      "$err" "stdout: $(head -c 300 "$tmp/out")" "checkpoint: $(ls "$ckpt" 2>&1)"
  fi
  rm -f "$ckpt"
}

expect_bad "--batch" --batch 0
expect_bad "--batch 3 is smaller than the 4 devices" --batch 3 --devices cpu:4
expect_bad "--epochs" --epochs 0
expect_bad "bogus" --dataset "$syn" --network bogus
expect_bad "gpu:1" --devices gpu:1
expect_bad "cpu:0" --devices cpu:0
expect_bad "/nonexistent" --dataset /nonexistent
expect_bad "$tmp/bad-idx" --dataset "$tmp/bad-idx"
expect_bad "$tmp/not-a-checkpoint.safetensors" --resume "$tmp/not-a-checkpoint.safetensors"
expect_bad "--batch" --batch abc
expect_bad "--lr" --lr -1
expect_bad "--lr" --lr 1e-3x
expect_bad "--optimizer" --optimizer rmsprop
expect_bad "--no-such-flag" --no-such-flag
expect_bad "--main" --main 2 --devices cpu:2
expect_bad "/no/such/folder" --dataset "$syn" --save /no/such/folder/x.safetensors
expect_bad "--pace" --dataset "$syn" --pace -1
expect_bad "--prewarm" --dataset "$syn" --prewarm sometimes
expect_bad "--history" --dataset "$syn" --record --history /proc/no-such-folder
expect_bad "--scaling" --dataset "$syn" --devices cpu:2 --scaling huge
expect_bad "--exact-chunk: only with --exact" --dataset "$syn" --exact-chunk 8
expect_bad "--exact-chunk 0" --dataset "$syn" --exact --exact-chunk 0
expect_bad "two devices" --dataset "$syn" --devices cpu --scaling strong
# A command is the first word, so these go without expect_bad's --save in front.
for bad in "scaling: give strong|weak@scaling --dataset $syn --devices cpu:2" \
           "--scaling: unknown value “huge”@scaling huge --dataset $syn --devices cpu:2" \
           "classify: give@classify --resume $tmp/not-a-checkpoint.safetensors"; do
  needle=${bad%%@*}
  read -r -a args <<<"${bad#*@}"
  timeout 60 "$train" "${args[@]}" >"$tmp/out" 2>"$tmp/err"
  status=$?
  if [ $status -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF -- "$needle" "$tmp/err" &&
     [ ! -s "$tmp/out" ]; then
    ok "${args[*]} → exit 2: $(cat "$tmp/err")"
  else
    not_ok "${args[*]} → exit 2 naming $needle" "status $status" "$(cat "$tmp/err")"
  fi
done
expect_bad "--scaling-steps" --dataset "$syn" --devices cpu:2 --scaling-steps 5
expect_bad "--scaling-steps" --dataset "$syn" --devices cpu:2 --scaling weak --scaling-steps 0
expect_bad "--resume" --devices cpu:2 --scaling weak --resume "$tmp/not-a-checkpoint.safetensors"
expect_bad "--dataset" --dataset /nonexistent --devices cpu:2 --scaling strong
expect_bad "--history" --dataset "$syn" --devices cpu:2 --scaling strong --record --history /proc/no-such-folder
# Specs that cannot work, and the recipe's flags.
expect_bad "--network: network spec, layer 1 “bn”: bn before any layer" \
  --dataset "$syn" --network bn,fc10
expect_bad "layer 2 “res(”: the block turns its 28×28×8 input into 30×30×8" \
  --dataset "$syn" --network "conv8k3p1,res(conv8k3p2),gap,fc10"
expect_bad "stride 15 is larger" --dataset "$syn" --network "conv8k3s9,conv8k3s15,fc10"
expect_bad "--batchnorm" --batchnorm global
expect_bad "--flip" --flip maybe
expect_bad "--label-smoothing" --label-smoothing 1.5
expect_bad "--crop" --crop -2
expect_bad "--test-flip and --no-test-flip" --dataset "$syn" --test-flip --no-test-flip
expect_bad "--test-shift -1: give the shift in pixels, 0 (off) to 8" --dataset "$syn" --test-shift -1
expect_bad "--test-shift 9: give the shift in pixels, 0 (off) to 8" --dataset "$syn" --test-shift 9
expect_bad "--test-shift" --dataset "$syn" --test-shift one
expect_bad "--warmup" --warmup 30 --epochs 2

# bf16 on CPU workers: their convolutions multiply bfloat16 operands, as a GPU's do.
if timeout 300 "$train" --dataset "$syn" --network cnn --precision bf16 --devices cpu:2 \
     --max-steps 4 >"$tmp/bf16.out" 2>"$tmp/err" &&
   grep -q '^recipe: .*precision bf16' "$tmp/bf16.out" && grep -q '^finished: ' "$tmp/bf16.out"; then
  ok "--precision bf16 --devices cpu:2 trains"
else
  not_ok "--precision bf16 --devices cpu:2 trains" "$(cat "$tmp/err")" \
    "$(tail -c 300 "$tmp/bf16.out")"
fi

# A network too big for the host (~1.9e9 parameters) is refused with the figures before
# anything big is allocated. Under an address-space limit, so that a regression fails
# to allocate instead of eating the machine; a sanitizer's shadow memory cannot
# live under one, so sanitized builds skip it.
if ldd "$train" 2>/dev/null | grep -qE "lib(asan|tsan)"; then
  ok "--network fc1048576,fc1000,fc10 refused for memory # SKIP sanitizer build"
else
  printf '#!/usr/bin/env bash\nulimit -v 4194304\nexec "%s" "$@"\n' "$train" >"$tmp/limited-train"
  chmod +x "$tmp/limited-train"
  unlimited=$train
  train=$tmp/limited-train
  expect_bad "GiB available (the address-space limit (ulimit -v))" --dataset "$syn" \
    --network fc1048576,fc1000,fc10
  train=$unlimited
fi

# --- hostile files: refused before any work, one line naming them -------

# A FIFO where a dataset file or the checkpoint to resume should be: opening it for
# reading would block for ever (expect_bad's timeout turns a hang into a failure).
mkdir "$tmp/fifo-idx"
cp "$tmp/bad-idx/"* "$tmp/fifo-idx/"
rm "$tmp/fifo-idx/train-images-idx3-ubyte"
mkfifo "$tmp/fifo-idx/train-images-idx3-ubyte" "$tmp/fifo.safetensors"
expect_bad "train-images-idx3-ubyte: a FIFO" --dataset "$tmp/fifo-idx"
expect_bad "fifo.safetensors: a FIFO" --resume "$tmp/fifo.safetensors"
ln -s loop.safetensors "$tmp/loop.safetensors"
expect_bad "loop.safetensors: a symbolic link loop" --resume "$tmp/loop.safetensors"
ln -s gone.safetensors "$tmp/dangling.safetensors"
expect_bad "dangling.safetensors: a dangling symbolic link" --resume "$tmp/dangling.safetensors"
# /proc takes no new files, whoever asks (root included): found at start, not at
# the first save after an epoch of work.
expect_bad "cannot save there" --dataset "$syn" --save /proc/tandem-test.safetensors

# A gzipped IDX header that claims 5 million 28×28 images (3.9 GB), padded to 4 MB
# so it passes the compression-ratio check, under a 3 GB address-space limit: the
# reader must not allocate what the file has not delivered. AddressSanitizer
# reserves terabytes of address space, so the limit cannot apply to its build.
mkdir "$tmp/huge-idx"
printf '\x00\x00\x08\x03\x00\x4c\x4b\x40\x00\x00\x00\x1c\x00\x00\x00\x1c' | gzip -c \
  >"$tmp/huge-idx/train-images-idx3-ubyte.gz"
head -c 4000000 /dev/zero >>"$tmp/huge-idx/train-images-idx3-ubyte.gz"
{ printf '\x00\x00\x08\x01\x00\x4c\x4b\x40'; head -c 5000000 /dev/zero; } | gzip -c \
  >"$tmp/huge-idx/train-labels-idx1-ubyte.gz"
cp "$tmp/bad-idx/t10k-"* "$tmp/huge-idx/"
if ldd "$train" 2>/dev/null | grep -qE "lib(asan|tsan)"; then
  ok "4 MB IDX claiming 3.9 GB under ulimit -v # SKIP sanitizer build (it reserves terabytes of address space)"
else
  (ulimit -v 3000000; exec "$train" --dataset "$tmp/huge-idx" --max-steps 1) \
    >"$tmp/out" 2>"$tmp/err"
  status=$?
  err=$(cat "$tmp/err")
  if [ $status -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
     [[ $err == *"train-images-idx3-ubyte.gz: truncated"* ]]; then
    ok "4 MB IDX claiming 3.9 GB under ulimit -v 3000000 → exit 2: $err"
  else
    not_ok "4 MB IDX claiming 3.9 GB under ulimit -v 3000000 → exit 2 naming the file" \
      "status $status" "$err"
  fi
fi

# --- a real run --------------------------------------------------------------------

# check_json FILE: every line is one JSON object; prints a summary the tests grep.
check_json() {
  python3 - "$1" <<'EOF'
import json, sys
events = []
for number, line in enumerate(open(sys.argv[1]), 1):
    try:
        event = json.loads(line)
    except ValueError as e:
        print("line %d is not JSON (%s): %s" % (number, e, line.strip()[:200]))
        sys.exit(1)
    if not isinstance(event, dict) or "type" not in event:
        print("line %d has no type: %s" % (number, line.strip()[:200]))
        sys.exit(1)
    events.append(event)
types = [e["type"] for e in events]
started = [e for e in events if e["type"] == "started"]
memory = [e for e in events if e["type"] == "memory"]
if memory:
    m = memory[0]
    parts = sum(d["total"] for d in m["devices"] if d["host"])
    print("memory", "ok" if m["host_devices"] == parts and
          m["host_total"] == m["host_dataset"] + m["host_copies"] + parts and
          types.index("memory") < types.index("started") else "inconsistent")
epochs = [e for e in events if e["type"] == "epoch"]
finished = [e for e in events if e["type"] == "finished"]
print("types", " ".join(sorted(set(types))))
print("first", types[0] if types else "-", "last", types[-1] if types else "-")
if started:
    s = started[0]
    print("replicas", s["replicas"], "shards", ",".join(map(str, s["shards"])),
          "start_step", s["start_step"], "steps_per_epoch", s["steps_per_epoch"])
print("epochs", " ".join(str(e["epoch"]) for e in epochs))
if finished:
    f = finished[-1]
    acc = f["test_accuracy"]
    print("accuracy", "ok" if acc is not None and acc >= 0.9 else "low (%s)" % acc)
    print("steps", f["steps"], "stopped", f["stopped"])
EOF
}

run_json="$tmp/run.json"
ckpt="$tmp/c.safetensors"
start=$(date +%s)
"$train" --dataset "$syn" --network mlp --epochs 1 --devices cpu:2 --batch 200 --json \
  --save "$ckpt" >"$run_json" 2>"$tmp/err"
status=$?
seconds=$(( $(date +%s) - start ))
if [ $status -eq 0 ] && [ ! -s "$tmp/err" ]; then
  ok "1 epoch on the synthetic set, 2 CPU workers, --json ($seconds s)"
else
  not_ok "1 epoch on the synthetic set, 2 CPU workers, --json" "status $status" "$(cat "$tmp/err")"
fi

# One set of defaults: another optimizer named without --lr starts from its own rate
# (the engine's base recipe, tdm_base_recipe_lr, as the window does).
if "$train" --dataset "$syn" --network fc10 --epochs 1 --max-steps 1 --optimizer sgd \
     --json 2>"$tmp/err" | grep -q '"type":"step".*"lr":0.01[,}]'; then
  ok "--optimizer sgd without --lr: 0.01"
else
  not_ok "--optimizer sgd without --lr: 0.01" "$(cat "$tmp/err")"
fi

if [ $have_python -eq 1 ]; then
  summary=$(check_json "$run_json")
  if [ $? -eq 0 ] && grep -q "types.*started" <<<"$summary" && grep -q "types.*epoch" <<<"$summary" &&
     grep -q "types.*finished" <<<"$summary" && grep -q "types.*step" <<<"$summary" &&
     grep -q "first memory last finished" <<<"$summary" && grep -q "^memory ok" <<<"$summary" &&
     grep -q "replicas 2 shards 100,100 start_step 0" <<<"$summary" &&
     grep -q "^epochs 1$" <<<"$summary" && grep -q "accuracy ok" <<<"$summary"; then
    ok "every stdout line is a JSON event: started … epoch … finished, accuracy ≥ 0.9"
  else
    not_ok "JSON lines" $summary
  fi
else
  ok "JSON lines # SKIP no python3"
fi

# What a window draws comes in the same JSON: phases per device, the batch split, and
# the test set's predictions, whose confusion matrix sums to the test set and whose
# diagonal is the reported accuracy.
if [ $have_python -eq 1 ]; then
  out=$(python3 - "$run_json" <<'EOF'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
phases = [e for e in events if e["type"] == "phases"]
batches = [e for e in events if e["type"] == "batch"]
predictions = [e for e in events if e["type"] == "predictions"]
epochs = [e for e in events if e["type"] == "epoch"]
assert phases and len(phases[0]["devices"]) == 2, "phases"
names = {span["phase"] for device in phases[0]["devices"] for span in device}
assert {"forward", "backward", "all-reduce", "update"} <= names, names
started = next(e for e in events if e["type"] == "started")
gradient = 4 * started["parameters"]
assert phases[0]["bytes"] == [{"sent": gradient, "received": gradient}] * 2, phases[0]["bytes"]
assert batches and [d["size"] for d in batches[0]["devices"]] == [100, 100], "batch"
assert len(predictions) == 1, "one evaluation, one predictions event"
p = predictions[0]
total = sum(map(sum, p["confusion"]))
diagonal = sum(p["confusion"][i][i] for i in range(p["classes"]))
assert total == p["test_count"] and diagonal == p["correct"], (total, diagonal)
assert round(epochs[0]["test_accuracy"] * p["test_count"]) == p["correct"]
print("%d phases events, matrix of %d, %d correct" % (len(phases), total, diagonal))
EOF
)
  if [ $? -eq 0 ]; then
    ok "--json carries phases, batch split and predictions ($out)"
  else
    not_ok "--json carries phases, batch split and predictions" "$out"
  fi
else
  ok "phases, batch, predictions # SKIP no python3"
fi

# --scaling over 1 and 2 workers: a row a point on stdout, and with --record a sweep
# record in the history, written by the engine as the window's Scaling page writes it.
"$train" --dataset "$syn" --network fc16,relu,fc10 --devices cpu:2 --scaling weak \
  --scaling-steps 20 --record --run-name "sweep" --history "$tmp/sweeps" \
  >"$tmp/out" 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] && [ "$(grep -c '^ *[12] ' "$tmp/out")" -eq 2 ] &&
   grep -q '^ *2 *100 ' "$tmp/out"; then
  ok "--scaling weak: 2 points"
else
  not_ok "--scaling weak prints 2 points" "status $status" "$(cat "$tmp/out" "$tmp/err")"
fi
if [ $have_python -eq 1 ]; then
  out=$(python3 - "$tmp/sweeps" <<'EOF'
import glob, json, sys
files = glob.glob(sys.argv[1] + "/*.jsonl")
assert len(files) == 1, files
lines = [json.loads(l) for l in open(files[0])]
head = lines[0]
assert head["type"] == "settings" and head["kind"] == "experiment" and head["name"] == "sweep", head
assert head["experiment"] == {"kind": "scaling", "steps": 20, "mode": "weak",
                              "device_counts": [1, 2]}, head
points = [l for l in lines if l["type"] == "point"]
assert [(p["devices"], p["batch"]) for p in points] == [(1, 50), (2, 100)], points
assert all(len(p["memory_bytes"]) == p["devices"] for p in points), points
# Devices alike (one BLAS thread a worker, the one-worker point too), each point
# repeated, its median between the slowest and the fastest run.
assert all(p["cpu_threads"] == 1 and 3 <= p["runs"] <= 5 for p in points), points
assert all(p["samples_per_second_min"] <= p["samples_per_second"] <= p["samples_per_second_max"]
           for p in points), points
assert lines[-1] == {"type": "finished", "stopped": False, "result": "2 points measured"}, lines[-1]
print("a sweep record, 2 points")
EOF
)
  if [ $? -eq 0 ]; then
    ok "--scaling --record: $out"
  else
    not_ok "--scaling --record keeps a sweep record" "$out" "$(cat "$tmp/err")"
  fi
else
  ok "--scaling --record # SKIP no python3"
fi

# The kept sweep exported: the engine's one scaling table (the Scaling page writes it
# too; test-classroom compares the two byte for byte), the recorded points at nine
# digits with a memory column per device.
sweep_id=$(basename "$(ls "$tmp/sweeps"/*.jsonl 2>/dev/null | head -1)" .jsonl)
"$train" --export-run "$sweep_id" --history "$tmp/sweeps" >"$tmp/sweep.csv" 2>"$tmp/err"
status=$?
if [ $have_python -eq 1 ]; then
  out=$(python3 - "$tmp/sweeps/$sweep_id.jsonl" "$tmp/sweep.csv" <<'EOF'
import json, math, sys
points = [p for p in map(json.loads, open(sys.argv[1])) if p["type"] == "point"]
rows = [l for l in open(sys.argv[2]).read().split("\n") if not l.startswith("#")]
def num(v):
    return "%.9g" % v if math.isfinite(v) else ""
want = ["devices,batch,steps,samples_per_second,speedup,efficiency,compute_ms,comm_ms,"
        "wait_ms,samples_per_second_min,samples_per_second_max,speedup_min,speedup_max,"
        "runs,cpu_threads,memory_bytes_1,memory_bytes_2"]
for p in points:
    cells = [str(p["devices"]), str(p["batch"]), str(p["steps"])]
    cells += [num(p[k]) for k in ("samples_per_second", "speedup", "efficiency",
                                  "compute_ms", "comm_ms", "wait_ms",
                                  "samples_per_second_min", "samples_per_second_max",
                                  "speedup_min", "speedup_max")]
    cells += [str(p["runs"]), str(p["cpu_threads"])]
    cells += [str(b) for b in p["memory_bytes"]] + [""] * (2 - len(p["memory_bytes"]))
    want.append(",".join(cells))
want.append("")
assert len(points) == 2 and rows == want, (rows, want)
print("%d points" % len(points))
EOF
)
  checked=$?
  if [ $status -eq 0 ] && [ $checked -eq 0 ]; then
    ok "--export-run of a sweep: the scaling table, $out"
  else
    not_ok "--export-run of a sweep" "status $status" "$out" "$(cat "$tmp/err")"
  fi
else
  ok "--export-run of a sweep # SKIP no python3"
fi

# --record keeps runs in the history folder; two runs of one configuration record
# the same series by step (what lets the window overlay them exactly).
for i in 1 2; do
  "$train" --dataset "$syn" --network fc16,relu,fc10 --devices cpu:2 --max-steps 40 \
    --record --run-name "run $i" --history "$tmp/history" --quiet 2>"$tmp/err"
done
if [ $have_python -eq 1 ]; then
  out=$(python3 - "$tmp/history" <<'EOF'
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/*.jsonl"))
assert len(files) == 2, files
series = []
for f in files:
    lines = [json.loads(l) for l in open(f)]
    assert lines[0]["type"] == "settings" and lines[-1]["type"] == "finished", f
    series.append([(e["step"], e["train_loss"]) for e in lines if e["type"] == "step"])
assert series[0] == series[1] and len(series[0]) == 4, series
print("2 runs, %d points each, equal" % len(series[0]))
EOF
)
  if [ $? -eq 0 ]; then
    ok "--record: $out"
  else
    not_ok "--record keeps identical runs identical" "$out" "$(cat "$tmp/err")"
  fi
else
  ok "--record # SKIP no python3"
fi

# The checkpoint, read the way safetensors' own readers do it.
if [ $have_python -eq 1 ] && [ -f "$ckpt" ]; then
  out=$(python3 - "$ckpt" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
assert 8 + n <= len(data) and n % 8 == 0, "header length"
header = json.loads(data[8:8 + n])
meta = header.pop("__metadata__")
assert all(isinstance(v, str) for v in meta.values()), "metadata must be strings"
config = json.loads(meta["config"])
assert config["epochs"] == 1 and config["batch"] == 200, config
end = 0
for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    assert t["dtype"] == "F32", name
    b, e = t["data_offsets"]
    count = 1
    for d in t["shape"]:
        count *= d
    assert b == end and e - b == 4 * count, name
    end = e
assert 8 + n + end == len(data), "data length"
print("%d tensors, %d bytes" % (len(header), end))
EOF
)
  if [ $? -eq 0 ]; then
    ok "--save wrote a valid safetensors file ($out)"
  else
    not_ok "--save wrote a valid safetensors file" "$out"
  fi
else
  if [ -f "$ckpt" ]; then ok "--save wrote a checkpoint # SKIP no python3 to read it"
  else not_ok "--save wrote a checkpoint"; fi
fi

# Resume: epoch 2 only, printed as plain lines (not a terminal: no progress bar).
cp "$ckpt" "$tmp/c-epoch1.safetensors"
"$train" --resume "$ckpt" --epochs 2 >"$tmp/out" 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] && [ ! -s "$tmp/err" ] &&
   grep -Eq '^epoch 2/2  train loss [0-9.]+ acc [0-9.]+%  test loss [0-9.]+ acc [0-9.]+%  [0-9.]+ s$' "$tmp/out" &&
   ! grep -q '^epoch 1/' "$tmp/out" && grep -q '^finished: test accuracy' "$tmp/out" &&
   ! grep -q $'\r' "$tmp/out"; then
  ok "--resume --epochs 2 continues with epoch 2"
else
  not_ok "--resume --epochs 2 continues with epoch 2" "status $status" "$(cat "$tmp/out" "$tmp/err")"
fi

# Resuming saves to the resumed file: it now records two epochs.
if [ $have_python -eq 1 ]; then
  epochs=$(python3 -c '
import json, struct, sys
d = open(sys.argv[1], "rb").read(); (n,) = struct.unpack("<Q", d[:8])
m = json.loads(d[8:8 + n])["__metadata__"]
print(m["epoch"], json.loads(m["config"])["epochs"])' "$ckpt")
  if [ "$epochs" = "2 2" ]; then
    ok "the resumed run saved over its checkpoint (epoch 2 of 2)"
  else
    not_ok "the resumed run saved over its checkpoint" "epoch, epochs: $epochs"
  fi
else
  ok "resumed checkpoint # SKIP no python3"
fi

# --- Ctrl-C ------------------------------------------------------------------------

# Job control puts the run in its own process group with SIGINT not ignored, as an
# interactive shell would.
# Epochs enough that it is still training when Ctrl-C comes on any machine.
set -m
"$train" --resume "$tmp/c-epoch1.safetensors" --save "$tmp/stopped.safetensors" --epochs 100 \
  --json >"$tmp/stopped.json" 2>"$tmp/err" &
pid=$!
# Wait until it is well into training, two summaries (at most 60 s), then press Ctrl-C
# once.
for _ in $(seq 600); do
  [ "$(grep -c '"type":"step"' "$tmp/stopped.json" 2>/dev/null)" -ge 2 ] && break
  sleep 0.1
done
kill -INT $pid 2>/dev/null
wait $pid 2>/dev/null
status=$?
set +m
summary=""
[ $have_python -eq 1 ] && summary=$(check_json "$tmp/stopped.json")
if [ $status -eq 130 ] && [ -f "$tmp/stopped.safetensors" ] &&
   { [ $have_python -eq 0 ] || grep -q "last finished" <<<"$summary" && grep -q "stopped True" <<<"$summary"; }; then
  ok "Ctrl-C stops the run, saves, exits 130"
else
  not_ok "Ctrl-C stops the run, saves, exits 130" "status $status" $summary "$(cat "$tmp/err")"
fi

# Ctrl-C while the run is still loading: nothing is written, least of all over the
# checkpoint being resumed. Its stdout is a pipe that is already full, so the run
# stops at its first event (the memory estimate, before training starts), blocked in
# write() until Ctrl-C: held there, not timed.
cp "$tmp/c-epoch1.safetensors" "$tmp/early.safetensors"
mkfifo "$tmp/full"
exec 3<>"$tmp/full"
dd if=/dev/zero of="$tmp/full" bs=4096 count=1024 oflag=nonblock 2>/dev/null
set -m
"$train" --resume "$tmp/early.safetensors" --epochs 3 --json >"$tmp/full" 2>"$tmp/err" 3>&- &
pid=$!
blocked=0
for _ in $(seq 600); do
  case $(cat /proc/$pid/wchan 2>/dev/null) in *pipe_write*) blocked=1; break ;; esac
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
kill -INT $pid 2>/dev/null
wait $pid 2>/dev/null
status=$?
set +m
exec 3>&-
if [ $blocked -eq 0 ]; then
  ok "Ctrl-C before training started # SKIP the run was not seen blocked on its output (/proc/PID/wchan)"
elif [ $status -eq 130 ] && grep -q "before training started" "$tmp/err" &&
     cmp -s "$tmp/early.safetensors" "$tmp/c-epoch1.safetensors"; then
  ok "Ctrl-C before training started leaves the resumed checkpoint alone"
else
  not_ok "Ctrl-C before training started leaves the resumed checkpoint alone" "status $status" \
    "$(cat "$tmp/err")"
fi

# The stopped checkpoint is mid-epoch; a resume picks up there (a few steps only).
if [ $have_python -eq 1 ] && [ -f "$tmp/stopped.safetensors" ]; then
  "$train" --resume "$tmp/stopped.safetensors" --json >"$tmp/resumed.json" 2>"$tmp/err" &
  pid=$!
  # Only the first events matter here: stop it once it has started.
  for _ in $(seq 600); do
    grep -q '"type":"step"' "$tmp/resumed.json" 2>/dev/null && break
    sleep 0.1
  done
  kill -TERM $pid 2>/dev/null
  wait $pid 2>/dev/null
  status=$?
  summary=$(check_json "$tmp/resumed.json")
  start_step=$(sed -n 's/.*start_step \([0-9]*\).*/\1/p' <<<"$summary")
  if [ $status -eq 130 ] && [ -n "$start_step" ] && [ "$start_step" -gt 80 ] &&
     grep -q "last finished" <<<"$summary" && grep -q "stopped True" <<<"$summary"; then
    ok "resuming a stopped run starts at its step ($start_step); SIGTERM stops too"
  else
    not_ok "resuming a stopped run" "status $status" $summary "$(cat "$tmp/err")"
  fi
else
  ok "resuming a stopped run # SKIP no python3 or no checkpoint"
fi

# A bad value inside a checkpoint's saved configuration is the checkpoint's fault,
# named with its key, never blamed on a flag that was not given.
if [ $have_python -eq 1 ] && [ -f "$tmp/c-epoch1.safetensors" ]; then
  python3 - "$tmp/c-epoch1.safetensors" "$tmp/bad-config.safetensors" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
config = json.loads(header["__metadata__"]["config"])
config["batch"] = -7
header["__metadata__"]["config"] = json.dumps(config)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
EOF
  expect_bad "--resume: checkpoint $tmp/bad-config.safetensors: bad value in its saved run configuration: key “batch” = -7" \
    --resume "$tmp/bad-config.safetensors"
else
  ok "a bad value in a checkpoint's configuration # SKIP no python3 or no checkpoint"
fi

# No temporary files were left anywhere along the way.
leftovers=$(ls -A "$tmp" | grep '^\.' || true)
if [ -z "$leftovers" ]; then
  ok "no temporary checkpoint files left behind"
else
  not_ok "no temporary checkpoint files left behind" "$leftovers"
fi

if [ $n -ne $plan ]; then
  echo "# planned $plan tests but ran $n"
  exit 1
fi
exit $((failed > 0))
