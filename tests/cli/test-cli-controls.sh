#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# test-cli-controls.sh — tandem-train's training controls and its answers to
# mistakes: "did you mean" for options, networks, spec items and choices; a GPU asked
# for where there is none; mpirun without --distributed; the default batch on a small
# folder; the log's header and progress lines; --monitor with early stopping and the
# summary, the run listing and --show-run; --accumulate, --clip-grad-norm and the
# schedules in the settings and the JSON; --lr-find's CSV; the man page's examples and
# the completion of file names, commands and the words after scaling and runs. Every assertion follows from the options and step
# counts, none from the clock. TAP on stdout; meson passes tandem-train, image-helper
# and the completion file.
set -u
train=${1:?usage: test-cli-controls.sh TANDEM-TRAIN IMAGE-HELPER COMPLETION}
helper=${2:?usage: test-cli-controls.sh TANDEM-TRAIN IMAGE-HELPER COMPLETION}
completion=${3:?usage: test-cli-controls.sh TANDEM-TRAIN IMAGE-HELPER COMPLETION}
. "$(dirname "$0")/cli-common.sh"
cli_scratch cli-controls
unset OMPI_COMM_WORLD_SIZE PMI_SIZE PMIX_SIZE MV2_COMM_WORLD_SIZE

echo "1..31"
small=(--dataset synthetic --network fc16,relu,fc10 --batch 500 --seed 3)

# --- mistakes, answered with the way out ----------------------------------------------

expect_bad "--epoch: did you mean --epochs" 'unknown option --epoch; did you mean --epochs? (--help' \
  --epoch 1
expect_bad "an option near none points to --help" 'unknown option --frobnicate (--help lists' \
  --frobnicate
expect_bad "--network cnnn: did you mean cnn, and the built-in networks" \
  'unknown network “cnnn”: did you mean cnn?.*mlp, cnn, resnet, resnet18' \
  --dataset synthetic --network cnnn --max-steps 1
expect_bad "a spec item: did you mean relu" 'did you mean relu?' \
  --dataset synthetic --network fc16,rellu,fc10 --max-steps 1
expect_bad "--optimizer adma: did you mean adam" 'unknown value “adma”; did you mean adam?' \
  --optimizer adma
if "$train" --list-devices 2>/dev/null | grep -q '^cuda:'; then
  skip "cuda:1 without a GPU suggests cpu:N" "this machine has a GPU"
else
  expect_bad "cuda:0,cuda:1 without a GPU suggests cpu:2" 'use --devices cpu:2' \
    --dataset synthetic --devices cuda:0,cuda:1 --max-steps 1
fi
OMPI_COMM_WORLD_SIZE=4 expect_bad "under mpirun without --distributed: a refusal naming the flag" \
  'one of 4 processes (OMPI_COMM_WORLD_SIZE) without --distributed.*add --distributed' \
  "${small[@]}" --max-steps 1
PMI_SIZE=1 "$train" "${small[@]}" --epochs 1 --max-steps 2 --quiet 2>"$tmp/err"
if [ $? -eq 0 ]; then
  ok "a job of one process trains as usual"
else
  not_ok "a job of one process trains as usual" "$(cat "$tmp/err")"
fi

# --- a small folder: the default batch that fits, the image size in the header ----------

"$helper" "$tmp" || { echo "Bail out! image-helper failed"; exit 1; }
"$train" --dataset "$tmp/good" --network fc8,relu,fc3 --epochs 1 2>"$tmp/err" | cat >"$tmp/folder.out"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ] && grep -q '^batch 4: the default 100 is more than the 30 training samples allow; --batch chooses another' "$tmp/folder.out" &&
   grep -q '^devices: cpu; batch 4 = 4' "$tmp/folder.out"; then
  ok "a small folder trains at a batch that fits, and says so"
else
  not_ok "the default batch adapts" "status $status" "$(head -6 "$tmp/folder.out")" "$(cat "$tmp/err")"
fi
if grep -q '^images: [0-9]*×[0-9]* [a-zA-Z]*, as the images are (--image-size and --color choose)' "$tmp/folder.out"; then
  ok "the header names the image size and colours chosen for the folder"
else
  not_ok "the header names the image size" "$(head -6 "$tmp/folder.out")"
fi
expect_bad "a batch given is kept and refused, with one that fits" 'try --batch 4' \
  --dataset "$tmp/good" --network fc8,relu,fc3 --batch 100

# --- the log ------------------------------------------------------------------------

"$train" "${small[@]}" --epochs 1 2>&1 | cat >"$tmp/log.out"
progress=$(grep -c '^epoch 1/1 .*% *step .* loss [0-9.]* acc [0-9.]*% (now [0-9.]*, [0-9.]*%) .*samples/s  elapsed [0-9]*:[0-9][0-9]  ETA ' "$tmp/log.out")
if [ "$progress" -eq 9 ]; then
  ok "each progress line has the epoch's running figures, the last step's and the time"
else
  not_ok "progress lines with running figures and elapsed time" "$progress lines" "$(head -8 "$tmp/log.out")"
fi
"$train" --dataset "$tmp/good" --network cnn --epochs 1 --max-steps 1 2>&1 | cat >"$tmp/preset.out"
if grep -q '^training cnn (.*), [0-9,]* parameters' "$tmp/preset.out"; then
  ok "a built-in network is named by its name and what it is, not a cut spec"
else
  not_ok "the header names a preset" "$(head -3 "$tmp/preset.out")"
fi
"$train" --dataset "$tmp/good" --network resnet --print-config >"$tmp/photo.json" 2>"$tmp/err"
"$train" --dataset synthetic --network resnet --print-config >"$tmp/digits.json" 2>>"$tmp/err"
if grep -q '"crop_pad":0' "$tmp/photo.json" && grep -q '"crop_scale":\[0\.3[45]' "$tmp/photo.json" &&
   grep -q '"jitter":\[0\.2' "$tmp/photo.json" && grep -q '"erase":0\.25' "$tmp/photo.json" &&
   grep -q '"crop_pad":0' "$tmp/digits.json" && ! grep -q '"crop_scale"\|"jitter"\|"erase"' "$tmp/digits.json"; then
  ok "a built-in recipe on a photo folder turns on resized crops, jitter and erasing; on digits not"
else
  not_ok "the photo recipe" "$(cat "$tmp/photo.json" "$tmp/digits.json" "$tmp/err")"
fi

# --- the monitored metric --------------------------------------------------------------

# Nothing after the first epoch counts as better (a change of 10⁹): early stop at 3.
"$train" "${small[@]}" --epochs 5 --val-split 0.1 --early-stop 2 --min-delta 1e9 \
  --save-best "$tmp/best.st" --record --history "$tmp/runs" --run-name early 2>&1 |
  cat >"$tmp/early.out"
if grep -q '^stopped early at epoch 3 (best 1): its val_loss [0-9.]* was not bettered in 2 epochs' "$tmp/early.out" &&
   grep -q "^  best: epoch 1 by val_loss [0-9.]*: val loss [0-9.]* acc [0-9.]*%, test loss [0-9.]* acc [0-9.]*%; saved in $tmp/best.st" "$tmp/early.out" &&
   [ -f "$tmp/best.st" ]; then
  ok "--early-stop by val_loss: the summary names the epochs and the best one's figures and file"
else
  not_ok "early stop summary" "$(tail -6 "$tmp/early.out")"
fi
"$train" runs --history "$tmp/runs" >"$tmp/runs.out" 2>&1
"$train" --show-run "$(sed -n 's/^\([^ ]*\) .* early$/\1/p' "$tmp/runs.out" | head -1)" \
  --history "$tmp/runs" >"$tmp/show.out" 2>&1
if grep -q 'stopped early at epoch 3 (best 1)' "$tmp/runs.out" &&
   grep -q 'outcome: .*stopped early at epoch 3 (best 1)' "$tmp/show.out"; then
  ok "runs and --show-run say the run stopped early and which epoch was best"
else
  not_ok "runs and --show-run" "$(cat "$tmp/runs.out")" "$(head -4 "$tmp/show.out")"
fi
expect_bad "--early-stop on val_loss without --val-split names the way out" \
  'watches val_loss (--monitor), which needs --val-split; or --monitor test_loss' \
  "${small[@]}" --early-stop 2

# --- accumulation, clipping, schedules ----------------------------------------------------

"$train" "${small[@]}" --accumulate 4 --clip-grad-norm 1.5 --schedule plateau --monitor test_loss \
  --plateau-patience 2 --print-config >"$tmp/config.json" 2>"$tmp/err"
if grep -q '"accumulate":4' "$tmp/config.json" && grep -q '"clip_grad_norm":1.5' "$tmp/config.json" &&
   grep -q '"schedule":"plateau"' "$tmp/config.json" && grep -q '"monitor":"test_loss"' "$tmp/config.json" &&
   grep -q '"plateau_patience":2' "$tmp/config.json"; then
  ok "--print-config holds the controls, and --config takes them back"
else
  not_ok "--print-config with the controls" "$(cat "$tmp/config.json" "$tmp/err")"
fi
"$train" --config "$tmp/config.json" --epochs 1 --max-steps 4 --batch 50 --json >"$tmp/acc.json" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q '"type":"started".*"accumulate":4' "$tmp/acc.json" &&
   grep '"type":"step"' "$tmp/acc.json" | grep -q '"grad_norm":[0-9]' &&
   grep '"type":"phases"' "$tmp/acc.json" | grep -q '"accumulate"'; then
  ok "--accumulate 4 runs, its skipped communication shows as accumulate spans; the norm is reported"
else
  not_ok "--accumulate and --clip-grad-norm run" "$(cat "$tmp/err")" "$(grep -m2 '"phases"\|"started"' "$tmp/acc.json")"
fi
expect_bad "--resized-crop with --crop is refused" 'not with --crop 2' \
  "${small[@]}" --resized-crop 0.35,1 --crop 2
expect_bad "--schedule onecycle with --warmup is refused" 'warms up by itself' \
  "${small[@]}" --schedule onecycle --warmup 1

# --- the range test -----------------------------------------------------------------------

"$train" --dataset synthetic --network fc32,relu,fc10 --batch 128 --optimizer momentum --lr-find \
  --lr-find-steps 100 --lr-find-range 1e-4,10 >"$tmp/lr.csv" 2>"$tmp/lr.err"
status=$?
lines=$(grep -c '^[0-9]*,[0-9.e+-]*,[0-9.e+-]*,[0-9.e+-]*$' "$tmp/lr.csv")
if [ $status -eq 0 ] && [ "$(head -1 "$tmp/lr.csv")" = "step,lr,loss,smoothed_loss" ] &&
   [ "$lines" -ge 10 ] && [ "$lines" -le 100 ] && grep -q '^1,0.0001,' "$tmp/lr.csv" &&
   grep -q 'suggested learning rate [0-9.e+-]*' "$tmp/lr.err"; then
  ok "--lr-find writes its points as CSV and suggests a rate"
else
  not_ok "--lr-find" "status $status, $lines lines" "$(head -3 "$tmp/lr.csv")" "$(cat "$tmp/lr.err")"
fi
expect_bad "--lr-find-steps without --lr-find" 'only with --lr-find' "${small[@]}" --lr-find-steps 10
expect_bad "lr-find refuses a range that is none" '--lr-find-range.*not a range' \
  lr-find "${small[@]}" --lr-find-range 1,0.001
# Kept in the history with --record, as the window keeps it: its curve point for point,
# its suggestion in the listing.
"$train" lr-find --dataset synthetic --network fc32,relu,fc10 --batch 128 --optimizer momentum \
  --lr-find-steps 60 --lr-find-range 1e-4,10 --record --history "$tmp/lr-runs" \
  >"$tmp/lr2.csv" 2>"$tmp/lr2.err"
status=$?
"$train" runs --history "$tmp/lr-runs" --json >"$tmp/lr-runs.json" 2>>"$tmp/lr2.err"
points=$(grep -c '^[0-9]*,' "$tmp/lr2.csv")
kept=$(cat "$tmp"/lr-runs/*.jsonl 2>/dev/null | grep -c '"type":"lr_point"')
if [ $status -eq 0 ] && [ "$points" -ge 10 ] && [ "$kept" -eq "$points" ] &&
   grep -q 'recorded as run' "$tmp/lr2.err" &&
   grep -q '"kind":"experiment","experiment":"lr-find".*"outcome":"lr-find: suggested learning rate' \
     "$tmp/lr-runs.json"; then
  ok "lr-find --record keeps the test's curve and suggestion in the history"
else
  not_ok "lr-find --record" "status $status, $points points, $kept kept" "$(cat "$tmp/lr-runs.json")" \
    "$(cat "$tmp/lr2.err")"
fi

# --- packaging ------------------------------------------------------------------------

man="$(dirname "$train")/tandem-train.1"
if [ ! -f "$man" ]; then
  skip "the man page has one example a line" "no man page built (help2man missing)"
elif awk '/^\.SH EXAMPLES/ {in_ex = 1; next} /^\.SH/ {in_ex = 0}
          in_ex && /^tandem\\-train/ { if (prev ~ /^tandem\\-train/) bad = 1 } { prev = $0 }
          END { exit bad }' "$man" && grep -q '^\.br$' "$man"; then
  ok "the man page has one example a line"
else
  not_ok "the man page's examples" "$(grep -n -A4 '^\.SH EXAMPLES' "$man")"
fi
touch "$tmp/weights.safetensors"
# The completion asks the program for its flags; run it as bash would, from $tmp.
words=""
for flag in --init --export-onnx --config --resume --save-best; do
  got=$(cd "$tmp" && bash -c '
    compopt() { :; }
    source "$1"
    COMP_WORDS=("$2" "$3" "wei"); COMP_CWORD=2
    _tandem_train
    printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$train" "$flag")
  [ "$got" = "weights.safetensors" ] || words="$words $flag:[$got]"
done
got=$(cd "$tmp" && bash -c '
  compopt() { :; }
  source "$1"
  COMP_WORDS=("$2" --history "goo"); COMP_CWORD=2
  _tandem_train
  printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$train")
[ "$got" = "good" ] || words="$words --history:[$got]"
if [ -z "$words" ]; then
  ok "completion offers files after every option that takes one, folders after --history"
else
  not_ok "completion of file names" "$words"
fi
# offers WORD…: what the completion offers for the command line tandem-train WORD…
# (the last word the one being completed), run as bash would from $tmp, each offer
# followed by a space.
offers() {
  (cd "$tmp" && bash -c '
    compopt() { :; }
    source "$1"
    shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    _tandem_train
    printf "%s " "${COMPREPLY[@]}"' _ "$completion" "$train" "$@")
}
# The first word completes to the program's commands, as its --help lists them (also
# when the person's language is Japanese: the completion reads the untranslated list).
got=$(LANGUAGE=ja offers comp)
all=$(offers "")
if [ "$got" = "compare compare-strategies " ] &&
   [ "$all" = "train classify runs export scaling compare compare-strategies lr-find devices " ]; then
  ok "completion offers the commands of --help as the first word"
else
  not_ok "completion of commands" "comp: [$got]" "all: [$all]"
fi
# usage_words COMMAND: the lower-case words of the command's usage line ("tandem-train
# scaling [OPTION…] strong|weak"), each followed by a space.
usage_words() {
  LC_ALL=C LANGUAGE= "$train" "$1" --help | sed -n 's/^  tandem-train [a-z-]* \[OPTION[^]]*\]//p' |
    grep -o '[a-z][a-z-]*' | tr '\n' ' '
}
# The word after scaling completes to the engine's modes, as the usage line of its
# --help lists them (also in Japanese): each one the --scaling help names and the
# command takes, and a word it does not offer is refused.
got=$(LANGUAGE=ja offers scaling "")
modes=$(LC_ALL=C LANGUAGE= "$train" --help | grep -- '--scaling=')
bad=""
for mode in $got; do
  [[ $modes == *" $mode "* ]] || bad="$bad $mode:not-in-help"
  "$train" scaling "$mode" --print-config >/dev/null 2>"$tmp/err" ||
    bad="$bad $mode:refused($(cat "$tmp/err"))"
done
if [ "$got" = "strong weak " ] && [ "$got" = "$(usage_words scaling)" ] && [ -z "$bad" ] &&
   ! "$train" scaling sideways --print-config >/dev/null 2>&1 &&
   [ "$(offers scaling w)" = "weak " ]; then
  ok "completion offers the modes of scaling's usage line, each one it takes"
else
  not_ok "completion after scaling" "got: [$got]" "usage: [$(usage_words scaling)]" "$bad"
fi
# The word after --precision completes to the choices --help names (auto among them),
# each one taken.
got=$(offers --precision "")
named=$(LC_ALL=C LANGUAGE= "$train" --help |
  sed -n 's/^ *--precision=NAME *\([^(]*\).*/\1/p' | sed 's/,//g; s/ or / /; s/ *$//')
bad=""
for word in $got; do
  "$train" --precision "$word" --print-config >/dev/null 2>&1 || bad="$bad $word"
done
if [ "$(echo $got | tr ' ' '\n' | sort)" = "$(echo $named | tr ' ' '\n' | sort)" ] &&
   [[ " $got " == *" auto "* ]] && [ -z "$bad" ]; then
  ok "completion offers the precisions --help names, each one taken"
else
  not_ok "completion after --precision" "got: [$got]" "help: [$named]" "refused:$bad"
fi
# The word after runs completes to its verbs, as its usage line lists them: each one
# the command takes before a run's id (the id is then looked for), and a word it does
# not offer is refused as unexpected.
got=$(LANGUAGE=ja offers runs "")
bad=""
for verb in $got; do
  "$train" runs "$verb" no-such-run --history "$tmp/no-runs" >/dev/null 2>"$tmp/err"
  if grep -q "unexpected argument" "$tmp/err" || ! grep -q "no-such-run" "$tmp/err"; then
    bad="$bad $verb:[$(cat "$tmp/err")]"
  fi
done
"$train" runs sideways no-such-run --history "$tmp/no-runs" >/dev/null 2>"$tmp/err"
if [ "$got" = "show export " ] && [ "$got" = "$(usage_words runs)" ] && [ -z "$bad" ] &&
   grep -q "unexpected argument" "$tmp/err"; then
  ok "completion offers the verbs of runs' usage line, each one it takes"
else
  not_ok "completion after runs" "got: [$got]" "usage: [$(usage_words runs)]" "$bad"
fi
