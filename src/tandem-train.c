/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tandem-train.c — the headless trainer: the engine's choices as flags, a progress
 * bar on a terminal, plain epoch lines in a log, JSON lines with --json.
 *
 * It only turns flags into a TdmConfig, runs tdm_trainer_run() on the main thread and
 * prints the events; all training logic lives in the engine. Exit status: 0 done,
 * 1 a failure while running, 2 bad input (options, dataset, network spec, devices,
 * a checkpoint to resume from), 130 stopped by Ctrl-C.
 */
#include "tdm-build-config.h"
#include <glib/gi18n.h>
#include "tdm-checkpoint.h"
#include "tdm-base-recipe.h"
#include "tdm-config.h"
#include "tdm-choice.h"
#include "tdm-dataset.h"
#include "tdm-dataset-folder.h"
#include "tdm-device.h"
#include "tdm-distributed.h"
#include "tdm-error.h"
#include "tdm-exact.h"
#include "tdm-json.h"
#include "tdm-history.h"
#include "tdm-onnx-export.h"
#include "tdm-i18n.h"
#include "tdm-trainer.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <libintl.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdm-cli-classify.h"
#include "tdm-cli-guard.h"
#include "tdm-network-catalogue.h"
#include "tdm-cli-printer.h"
#include "tdm-cli-runs.h"
#include "tdm-cli-scaling.h"

enum {
  EXIT_RUNTIME = 1,
  EXIT_BAD_INPUT = 2,
  EXIT_INTERRUPTED = 130,
};

/* Flags are read as text and converted here, so a bad number gets a message that
 * names its flag, and an absent flag (NULL) can leave a resumed value alone. */
typedef struct {
  char *dataset, *network, *devices, *main_replica, *batch, *epochs;
  char *optimizer, *lr, *momentum, *beta1, *beta2, *eps, *weight_decay;
  char *schedule, *step_epochs, *gamma, *strategy, *precision, *seed;
  char *eval_batch, *max_steps, *save, *resume, *image_size, *color, *top;
  char *batchnorm, *decay_on, *warmup, *smoothing, *crop, *flip, *test_shift;
  char **classify;
  gboolean test_flip, no_test_flip, list_devices, json, quiet, version, distributed, record;
  char *run_name, *history, *pace, *scaling, *scaling_steps, *prewarm;
  char *export_onnx;
  gboolean exact;
  char *exact_chunk;
  char *val_split, *save_best, *save_every, *early_stop;
  char *config, *show_run, *export_run;
  gboolean print_config, list_runs;
  char *normalize, *init, *train, **freeze, **lr_scale;
} Options;

static void
options_clear(Options *o)
{
  char **strings[] = {
    &o->dataset, &o->network, &o->devices, &o->main_replica, &o->batch, &o->epochs,
    &o->optimizer, &o->lr, &o->momentum, &o->beta1, &o->beta2, &o->eps, &o->weight_decay,
    &o->schedule, &o->step_epochs, &o->gamma, &o->strategy, &o->precision, &o->seed,
    &o->eval_batch, &o->max_steps, &o->save, &o->resume, &o->image_size, &o->color, &o->top,
    &o->batchnorm, &o->decay_on, &o->warmup, &o->smoothing, &o->crop, &o->flip,
    &o->test_shift, &o->run_name, &o->history, &o->pace, &o->scaling, &o->scaling_steps,
    &o->prewarm, &o->export_onnx, &o->val_split, &o->save_best, &o->save_every,
    &o->early_stop, &o->config, &o->show_run, &o->export_run,
  };
  for (gsize i = 0; i < G_N_ELEMENTS(strings); i++)
    g_clear_pointer(strings[i], g_free);
  g_clear_pointer(&o->exact_chunk, g_free);
  g_clear_pointer(&o->classify, g_strfreev);
  g_clear_pointer(&o->normalize, g_free);
  g_clear_pointer(&o->init, g_free);
  g_clear_pointer(&o->train, g_free);
  g_clear_pointer(&o->freeze, g_strfreev);
  g_clear_pointer(&o->lr_scale, g_strfreev);
}

/* The summary is translated by GOption, through the context's translation domain;
 * the description here, since it names the dataset folder (%s). */
static const char *const summary = N_(
  "Trains a neural network with data parallelism: each batch is split across the\n"
  "devices, gradients are combined, and every device keeps the same parameters.\n"
  "On a terminal a live line shows progress; in a log (stdout not a terminal, or\n"
  "under mpirun) a header says what runs where, and plain lines follow at each tenth\n"
  "of an epoch and every 10 s, with each checkpoint saved; each epoch ends with a line\n"
  "of train (validation) and test figures. --json prints every event as one JSON\n"
  "object per line instead.");

static const char *const description = N_(
  "Datasets: fashion-mnist (the default, in %s),\n"
  "mnist, synthetic (built in, needs no files), or a folder of IDX files, of\n"
  "CIFAR-10 batches, or of class folders of PNG/JPEG images (FOLDER/CLASS/IMAGE, or\n"
  "FOLDER/train/CLASS/… and FOLDER/test/CLASS/…; --image-size and --color choose\n"
  "the samples; the decoded set is cached in ~/.cache/tandem/images).\n"
  "Networks: mlp (784-1000-1000-10), cnn, resnet (a ResNet-9-style BN network; it\n"
  "brings its recipe: 5 epochs, batch 512, Nesterov SGD lr 0.6, weight decay 5e-4\n"
  "on weights, 1 epoch of warm-up then linear decay, label smoothing 0.1, crop 0,\n"
  "flip auto, test-time flips, synchronized BN; flags given override any of it), or\n"
  "a spec such as\n"
  "  conv32k3p1,relu,pool2,fc128,relu,fc10\n"
  "  conv32k3p1,bn,relu,res(conv32k3p1,bn,relu,conv32k3p1,bn),relu,gap,fc10\n"
  "Spec items: fcN, convNkK[sS][pP] (N channels, K×K kernel, stride S, padding P),\n"
  "poolK, avgK (max/average pooling), poolKsSpP, avgKsSpP (with stride and padding),\n"
  "basicC[sS], bottleneckW[sS] (torchvision's ResNet blocks), gap, gmp (global\n"
  "average/max pooling), bn,\n"
  "relu, dropP (dropout rate P), scaleS (multiply by S), flatten, res(…) (residual\n"
  "block: its layers plus its input, through a 1×1 conv and bn where the shape\n"
  "changes), N*item and N*(…) (repeats). A conv or fc right before bn has no bias;\n"
  "nb after an fc or conv drops it anywhere (fc10nb). The last fc may be followed\n"
  "by scale items: resnet ends gmp,fc10nb,scale0.125.\n"
  "Starting from weights: --init FILE loads a safetensors state_dict's tensors whose\n"
  "names and shapes match (torchvision's for resnet18/34/50; a head of another class\n"
  "count starts afresh); --freeze and --train head keep modules fixed (their BN in\n"
  "inference mode), --lr-scale slows some down, --normalize imagenet normalizes the\n"
  "inputs as torchvision's models expect. --network N --init FILE --classify IMAGE\n"
  "classifies with such weights as they are.\n"
  "Batch norm across devices (--batchnorm): per-replica normalizes each device's\n"
  "share with its own statistics (PyTorch DDP's default); sync combines them over\n"
  "all devices every step, so N devices train exactly as one with the same batch.\n"
  "Exact mode (--exact, chunks of --exact-chunk samples): see the end.\n"
  "Augmentation: --crop P shifts each image by up to P pixels (zero padded),\n"
  "--flip mirrors half of them (auto: not for digits, mnist and synthetic); both\n"
  "depend only on the seed, epoch and sample, never on the number of devices.\n"
  "Evaluation (not timed): --test-flip averages each test image's logits with its\n"
  "mirror's; --test-shift P adds its copies shifted P pixels up, down, left and\n"
  "right (zero filled; each mirrored too with --test-flip).\n"
  "Devices: cpu, cpu:N (N CPU workers), cuda:N (GPU N); a GPU may be named twice.\n"
  "Strategies: allreduce all-reduces the gradients and every device updates (as\n"
  "ChainerMN and PyTorch DDP); main reduces them onto the main device, updates\n"
  "there and broadcasts the parameters (as Chainer's ParallelUpdater).\n"
  "\n"
  "Examples:\n"
  "  tandem-train --dataset synthetic --epochs 1\n"
  "  tandem-train --devices cpu:4 --batch 256 --save run.safetensors\n"
  "  tandem-train --devices cuda:0,cuda:1 --network cnn --strategy main --main 1\n"
  "  tandem-train --resume run.safetensors --epochs 40\n"
  "  tandem-train --dataset synthetic --epochs 1 --json | jq .type\n"
  "  tandem-train --dataset ~/photos --image-size 64 --color rgb --save photos.st\n"
  "  tandem-train --resume photos.st --classify cat.jpg dog.png ~/more-photos\n"
  "  tandem-train --resume photos.st --export-onnx photos.onnx\n"
  "\n"
  "Validation: --val-split 0.1 holds out a tenth of the training set (chosen by the\n"
  "seed) and evaluates it every epoch; --save-best FILE keeps the checkpoint of the best\n"
  "validation accuracy, --early-stop P ends a run after P epochs without a better one.\n"
  "The test set stays the final measure.\n"
  "\n"
  "Runs: --record keeps a run in the history that the window lists;\n"
  "  tandem-train runs                       lists them (--json: one object a line)\n"
  "  tandem-train --show-run ID              its settings and epochs\n"
  "  tandem-train --export-run ID > run.csv  its metrics, as the window exports them\n"
  "  tandem-train --network cnn --print-config > cnn.json\n"
  "  tandem-train --config cnn.json          the same run again (or --config a run\n"
  "                                          file or a checkpoint; flags override it)\n"
  "\n"
  "With --resume the run's settings come from the checkpoint (all but --max-steps);\n"
  "flags given as well override them (e.g. --epochs to train longer), and\n"
  "checkpoints go on being saved to the resumed file unless --save names another.\n"
  "\n"
  "Exit status: 0 finished, 1 failed while running, 2 bad options or input files,\n"
  "130 stopped by Ctrl-C (a second Ctrl-C quits at once).\n"
  "\n"
  "Across processes and machines, under Open MPI (see docs/distributed.md):\n"
  "  mpirun -np 4 tandem-train --distributed --devices cuda --network cnn\n"
  "With --distributed each process (rank) trains one replica: --devices lists one\n"
  "device per rank, or one for all (cpu; cuda or cuda:N: GPU N plus the rank's\n"
  "number on its machine). The rank of the main device prints progress and saves\n"
  "checkpoints; a rank that fails prints its message after \"rank N:\" and ends\n"
  "every rank of the job.");

/* An option's help with its values' names from their GEnum, the engine's default
 * marked: `format` has one %s for the list. Kept for the program's life, as GOption
 * keeps the pointers. */
static const char *
choice_help(const char *format, GType type, int default_value)
{
  g_autofree char *list = tdm_choice_list(type, default_value);
  g_autofree char *help = g_strdup_printf(_(format), list);
  return g_intern_string(help);
}

/* An option's help with the engine's default number in it (one %d). */
static const char *
number_help(const char *format, int value)
{
  g_autofree char *help = g_strdup_printf(_(format), value);
  return g_intern_string(help);
}

/* Appends `paragraph` to text in lines of at most `width` characters, broken at
 * spaces (a word longer than the width keeps its own line). */
static void
append_wrapped(GString *text, const char *paragraph, glong width)
{
  g_auto(GStrv) words = g_strsplit(paragraph, " ", -1);
  glong column = 0;
  for (int i = 0; words[i] != NULL; i++) {
    glong length = g_utf8_strlen(words[i], -1);
    if (column > 0 && column + 1 + length > width) {
      g_string_append_c(text, '\n');
      column = 0;
    } else if (column > 0) {
      g_string_append_c(text, ' ');
      column++;
    }
    g_string_append(text, words[i]);
    column += length;
  }
  g_string_append_c(text, '\n');
}

/* An option's help with the engine's default name in it (one %s). */
static const char *
name_help(const char *format, const char *value)
{
  g_autofree char *help = g_strdup_printf(_(format), value);
  return g_intern_string(help);
}

/* --lr's help: each optimizer's starting rate, from the base recipe. */
static const char *
lr_help(void)
{
  g_autoptr(GString) rates = g_string_new(NULL);
  char number[G_ASCII_DTOSTR_BUF_SIZE];
  for (guint i = 0; i < tdm_choice_count(TDM_TYPE_OPTIMIZER_KIND); i++)
    g_string_append_printf(rates, "%s%s %s", i ? ", " : "",
                           tdm_choice_name(TDM_TYPE_OPTIMIZER_KIND, (int)i),
                           g_ascii_formatd(number, sizeof number, "%g",
                                           tdm_base_recipe_lr((TdmOptimizerKind)i)));
  return name_help(N_("Learning rate; Adam's alpha (default by optimizer: %s)"), rates->str);
}

static GOptionContext *
options_context(Options *o)
{
  /* The defaults the help names are the engine's. */
  g_autoptr(TdmConfig) d = tdm_config_new();
  const GOptionEntry entries[] = {
    {"dataset", 0, 0, G_OPTION_ARG_FILENAME, &o->dataset,
     name_help(N_("Name or folder (default %s)"), d->dataset), "NAME|FOLDER"},
    {"network", 0, 0, G_OPTION_ARG_STRING, &o->network,
     name_help(N_("mlp, cnn or a layer spec (default %s)"), d->network), "mlp|cnn|SPEC"},
    {"devices", 0, 0, G_OPTION_ARG_STRING, &o->devices,
     N_("Devices, a replica each: cpu:4, cuda:0,cuda:1 (cpu)"), "LIST"},
    {"main", 0, 0, G_OPTION_ARG_STRING, &o->main_replica,
     N_("Which of --devices evaluates and saves (default 0)"), "N"},
    {"batch", 0, 0, G_OPTION_ARG_STRING, &o->batch,
     number_help(N_("Global batch, split across devices (default %d)"), d->batch), "N"},
    {"epochs", 0, 0, G_OPTION_ARG_STRING, &o->epochs,
     number_help(N_("Epochs to train (default %d)"), d->epochs), "N"},
    {"optimizer", 0, 0, G_OPTION_ARG_STRING, &o->optimizer,
     choice_help("%s", TDM_TYPE_OPTIMIZER_KIND, d->optimizer), "NAME"},
    {"lr", 0, 0, G_OPTION_ARG_STRING, &o->lr,
     lr_help(), "X"},
    {"momentum", 0, 0, G_OPTION_ARG_STRING, &o->momentum,
     N_("Momentum of --optimizer momentum (default 0.9)"), "X"},
    {"beta1", 0, 0, G_OPTION_ARG_STRING, &o->beta1, N_("Adam's beta1 (default 0.9)"), "X"},
    {"beta2", 0, 0, G_OPTION_ARG_STRING, &o->beta2, N_("Adam's beta2 (default 0.999)"), "X"},
    {"eps", 0, 0, G_OPTION_ARG_STRING, &o->eps, N_("Adam's epsilon (default 1e-8)"), "X"},
    {"weight-decay", 0, 0, G_OPTION_ARG_STRING, &o->weight_decay,
     N_("Weight decay (default 0)"), "X"},
    {"schedule", 0, 0, G_OPTION_ARG_STRING, &o->schedule,
     choice_help(N_("Learning rate schedule: %s"), TDM_TYPE_SCHEDULE, d->schedule), "NAME"},
    {"step-epochs", 0, 0, G_OPTION_ARG_STRING, &o->step_epochs,
     N_("Epochs between steps of --schedule step (10)"), "N"},
    {"gamma", 0, 0, G_OPTION_ARG_STRING, &o->gamma,
     N_("Factor at each step of --schedule step (0.1)"), "X"},
    {"strategy", 0, 0, G_OPTION_ARG_STRING, &o->strategy,
     choice_help(N_("%s; see below"), TDM_TYPE_STRATEGY, d->strategy), "NAME"},
    {"precision", 0, 0, G_OPTION_ARG_STRING, &o->precision,
     choice_help(N_("%s (GPUs: bf16 GEMMs, fp32 weights)"), TDM_TYPE_PRECISION, d->precision),
     "NAME"},
    {"batchnorm", 0, 0, G_OPTION_ARG_STRING, &o->batchnorm,
     choice_help(N_("Batch norm across devices: %s"), TDM_TYPE_BATCH_NORM, d->batchnorm),
     "MODE"},
    {"exact", 0, 0, G_OPTION_ARG_NONE, &o->exact,
     N_("Exact mode: parameters bit-identical for any number of devices (see below)"), NULL},
    {"exact-chunk", 0, 0, G_OPTION_ARG_STRING, &o->exact_chunk,
     N_("With --exact: samples a chunk, the unit of the split and of BN's statistics "
     "(default 16)"), "N"},
    {"weight-decay-on", 0, 0, G_OPTION_ARG_STRING, &o->decay_on,
     choice_help(N_("What weight decay applies to: %s (weights: not biases, not BN)"),
                 TDM_TYPE_DECAY_SCOPE, d->decay_scope), "WHAT"},
    {"warmup", 0, 0, G_OPTION_ARG_STRING, &o->warmup,
     N_("Epochs of linear learning-rate warm-up before the schedule (default 0)"), "E"},
    {"label-smoothing", 0, 0, G_OPTION_ARG_STRING, &o->smoothing,
     N_("Label smoothing of the training loss, in [0, 1) (default 0)"), "X"},
    {"crop", 0, 0, G_OPTION_ARG_STRING, &o->crop,
     N_("Random crop: shift images by up to P pixels, zero padded (default 0, off)"), "P"},
    {"flip", 0, 0, G_OPTION_ARG_STRING, &o->flip,
     choice_help(N_("Random horizontal flip in training: %s"), TDM_TYPE_FLIP_SETTING, d->flip),
     "WHEN"},
    {"test-flip", 0, 0, G_OPTION_ARG_NONE, &o->test_flip,
     N_("Evaluate each test image and its mirror and average the two"), NULL},
    {"no-test-flip", 0, 0, G_OPTION_ARG_NONE, &o->no_test_flip,
     N_("Evaluate each test image alone (resnet's recipe has --test-flip)"), NULL},
    {"test-shift", 0, 0, G_OPTION_ARG_STRING, &o->test_shift,
     N_("Also evaluate each test image shifted P pixels each way and average (default 0, "
     "off)"), "P"},
    {"seed", 0, 0, G_OPTION_ARG_STRING, &o->seed,
     N_("Seed of initial weights and shuffling (default 0)"), "N"},
    {"eval-batch", 0, 0, G_OPTION_ARG_STRING, &o->eval_batch,
     N_("Samples per evaluation chunk (default 1000)"), "N"},
    {"max-steps", 0, 0, G_OPTION_ARG_STRING, &o->max_steps,
     N_("Stop after N steps in all (default 0: no limit)"), "N"},
    {"save", 0, 0, G_OPTION_ARG_FILENAME, &o->save,
     N_("Save a safetensors checkpoint every epoch"), "FILE"},
    {"save-every", 0, 0, G_OPTION_ARG_STRING, &o->save_every,
     N_("With --save: also save every N steps (default 0: at epoch ends only)"), "N"},
    {"val-split", 0, 0, G_OPTION_ARG_STRING, &o->val_split,
     N_("Hold out this fraction of the training set (seeded) and evaluate it every epoch "
     "(default 0: none)"), "F"},
    {"save-best", 0, 0, G_OPTION_ARG_FILENAME, &o->save_best,
     N_("With --val-split: keep the checkpoint of the best validation accuracy"), "FILE"},
    {"early-stop", 0, 0, G_OPTION_ARG_STRING, &o->early_stop,
     N_("With --val-split: end after P epochs without a better validation accuracy"), "P"},
    {"resume", 0, 0, G_OPTION_ARG_FILENAME, &o->resume,
     N_("Continue the run saved in a checkpoint"), "FILE"},
    {"image-size", 0, 0, G_OPTION_ARG_STRING, &o->image_size,
     N_("Image folders: side of the square samples (default: from the images, at most 64)"),
     "N"},
    {"color", 0, 0, G_OPTION_ARG_STRING, &o->color,
     N_("Image folders: auto, grey or rgb (default auto: grey when every image is)"), "C"},
    {"classify", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &o->classify,
     N_("Classify images with the --resume checkpoint and exit: files, or every PNG and JPEG "
     "under a folder (repeat or list after)"),
     "IMAGE|DIR"},
    {"normalize", 0, 0, G_OPTION_ARG_STRING, &o->normalize,
     N_("Per-channel input normalization: dataset, imagenet, none (the default) or "
     "M,M,M/S,S,S"), "HOW"},
    {"init", 0, 0, G_OPTION_ARG_FILENAME, &o->init,
     N_("Start from the weights of a safetensors state_dict (PyTorch's names and shapes)"),
     "FILE"},
    {"freeze", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->freeze,
     N_("Keep these modules fixed (names as in PyTorch, e.g. conv1,bn1,layer1; repeatable)"),
     "PREFIX"},
    {"train", 0, 0, G_OPTION_ARG_STRING, &o->train,
     N_("head: train only the last fc, everything before it frozen; all (the default)"),
     "WHAT"},
    {"lr-scale", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->lr_scale,
     N_("Multiply the learning rate of a module's parameters by X (repeatable)"),
     "PREFIX=X"},
    {"top", 0, 0, G_OPTION_ARG_STRING, &o->top,
     N_("With --classify: how many classes to print per image (default 3)"), "N"},
    {"export-onnx", 0, 0, G_OPTION_ARG_FILENAME, &o->export_onnx,
     N_("Write the --resume checkpoint's network as an ONNX model for inference and exit "
     "(input: float NCHW images in [0, 1]; output: logits)"), "FILE"},
    {"record", 0, 0, G_OPTION_ARG_NONE, &o->record,
     N_("Keep the run in the run history (the window lists it)"), NULL},
    {"run-name", 0, 0, G_OPTION_ARG_STRING, &o->run_name,
     N_("Name of the recorded run (default: its date)"), "NAME"},
    {"history", 0, 0, G_OPTION_ARG_FILENAME, &o->history,
     N_("Run history folder (default ~/.local/share/tandem/runs)"), "DIR"},
    {"scaling", 0, 0, G_OPTION_ARG_STRING, &o->scaling,
     N_("Instead of training: a scaling run over the first 1, 2, … of the devices, strong "
     "(the same global batch) or weak (the same batch per device); --record keeps it"),
     "MODE"},
    {"scaling-steps", 0, 0, G_OPTION_ARG_STRING, &o->scaling_steps,
     N_("With --scaling: steps a run at each device count (default 200; 3–5 runs, one BLAS "
     "thread per CPU worker, the median with min–max)"), "N"},
    {"pace", 0, 0, G_OPTION_ARG_STRING, &o->pace,
     N_("At most N steps a second, to watch a small network (default 0: no limit)"), "N"},
    {"prewarm", 0, 0, G_OPTION_ARG_STRING, &o->prewarm,
     N_("Before the clock starts, one untimed step of each batch shape, then undone: "
     "auto (default: on with a GPU), on or off"), "WHEN"},
    {"print-config", 0, 0, G_OPTION_ARG_NONE, &o->print_config,
     N_("Print the run's settings as JSON (for --config) and exit"), NULL},
    {"config", 0, 0, G_OPTION_ARG_FILENAME, &o->config,
     N_("Take the settings from FILE: --print-config's output, a run file of the history or "
     "a checkpoint (flags given override them)"), "FILE"},
    {"list-runs", 0, 0, G_OPTION_ARG_NONE, &o->list_runs,
     N_("List the run history (as \"tandem-train runs\") and exit"), NULL},
    {"show-run", 0, 0, G_OPTION_ARG_STRING, &o->show_run,
     N_("Print a run of the history: settings, epochs, outcome"), "ID"},
    {"export-run", 0, 0, G_OPTION_ARG_STRING, &o->export_run,
     N_("Print a run of the history as CSV (the window's export)"), "ID"},
    {"list-devices", 0, 0, G_OPTION_ARG_NONE, &o->list_devices,
     N_("List the devices and exit"), NULL},
    {"json", 0, 0, G_OPTION_ARG_NONE, &o->json,
     N_("Print each event as a JSON line on stdout"), NULL},
    {"quiet", 'q', 0, G_OPTION_ARG_NONE, &o->quiet,
     N_("Print only errors (and JSON lines with --json)"), NULL},
    {"version", 0, 0, G_OPTION_ARG_NONE, &o->version, N_("Print the version and exit"), NULL},
    {"distributed", 0, 0, G_OPTION_ARG_NONE, &o->distributed,
     N_("Run as one rank of mpirun -np N, a device each (see below)"), NULL},
    {NULL},
  };
  GOptionContext *context = g_option_context_new(NULL);
  g_option_context_set_translation_domain(context, GETTEXT_PACKAGE);
  g_option_context_set_summary(context, summary);
  /* The built-in networks, from the engine's catalogue. */
  g_autofree char *intro = g_strdup_printf(_(description), TDM_FASHION_MNIST_DIR);
  GString *text = g_string_new(intro);
  g_string_append(text, _("\nBuilt-in networks (their last fc follows the dataset's classes):\n"));
  int presets = 0;
  const TdmNetworkPreset *preset = tdm_network_presets(&presets);
  for (int i = 0; i < presets; i++)
    g_string_append_printf(text, "  %-10s %s\n", preset[i].name, preset[i].summary);
  /* What exact mode guarantees, in the engine's words (the window shows them too). */
  g_string_append_printf(text,
                         _("\nExact mode (--exact; --exact-chunk N, %d by default):\n"),
                         d->exact_chunk);
  g_autofree char *exact = tdm_exact_describe(d->exact_chunk);
  append_wrapped(text, exact, 80);
  g_option_context_set_description(context, text->str);
  g_string_free(text, TRUE);
  g_option_context_add_main_entries(context, entries, NULL);
  return context;
}

static gboolean
bad_option(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

static gboolean
bad_option(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION, message);
  g_free(message);
  return FALSE;
}

static gboolean
parse_int(const char *flag, const char *text, int *out, GError **error)
{
  gint64 v;
  if (text == NULL)
    return TRUE;
  if (!g_ascii_string_to_signed(text, 10, G_MININT, G_MAXINT, &v, NULL))
    return bad_option(error, _("%s: “%s” is not a whole number"), flag, text);
  *out = (int)v;
  return TRUE;
}

static gboolean
parse_double(const char *flag, const char *text, double *out, GError **error)
{
  if (text == NULL)
    return TRUE;
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod(text, &end);
  if (*text == '\0' || g_ascii_isspace(*text) || *end != '\0' || errno == ERANGE ||
      !isfinite(v))
    return bad_option(error, _("%s: “%s” is not a number"), flag, text);
  *out = v;
  return TRUE;
}

#define NAME_OPTION(flag, text, parse, out, choices)                                        \
  do {                                                                                     \
    if ((text) != NULL && !parse((text), (out)))                                           \
      return bad_option(error, "%s: unknown value “%s” (choose %s)", flag, (text), choices); \
  } while (0)
/* The same for a choice with a GEnum: the names listed are its nicks. */
#define ENUM_OPTION(flag, text, parse, out, type)                                          \
  do {                                                                                     \
    if ((text) != NULL && !parse((text), (out))) {                                         \
      g_autofree char *choices = tdm_choice_list((type), -1);                              \
      return bad_option(error, "%s: unknown value “%s” (choose %s)", flag, (text), choices); \
    }                                                                                      \
  } while (0)

/* "a,b" given once or repeated: one list. */
static char **
split_list(char **given)
{
  GStrvBuilder *all = g_strv_builder_new();
  for (int i = 0; given[i] != NULL; i++) {
    g_auto(GStrv) parts = g_strsplit(given[i], ",", -1);
    for (int k = 0; parts[k] != NULL; k++)
      if (*g_strstrip(parts[k]) != '\0')
        g_strv_builder_add(all, parts[k]);
  }
  char **list = g_strv_builder_end(all);
  g_strv_builder_unref(all);
  return list;
}

/* --normalize, --init, --freeze, --train and --lr-scale (tdm-finetune.h). */
static gboolean
finetune_options_apply(const Options *o, TdmConfig *c, GError **error)
{
  if (o->normalize) {
    g_free(c->normalize);
    c->normalize = g_strdup(o->normalize);
  }
  if (o->init) {
    g_free(c->init_path);
    c->init_path = g_strdup(o->init);
  }
  if (o->freeze) {
    g_strfreev(c->freeze);
    c->freeze = split_list(o->freeze);
  }
  if (o->lr_scale) {
    g_strfreev(c->lr_scale);
    c->lr_scale = split_list(o->lr_scale);
  }
  if (o->train != NULL) {
    if (!g_str_equal(o->train, "head") && !g_str_equal(o->train, "all"))
      return bad_option(error, _("--train: unknown value “%s” (choose head or all)"), o->train);
    c->train_head = g_str_equal(o->train, "head");
  }
  return TRUE;
}

/* Applies the flags that were given over `c` (defaults or a resumed run). */
static gboolean
options_apply(const Options *o, TdmConfig *c, GError **error)
{
  if (o->dataset) {
    g_free(c->dataset);
    c->dataset = g_strdup(o->dataset);
  }
  if (o->network) {
    g_free(c->network);
    c->network = g_strdup(o->network);
    /* A built-in network's recipe, under whatever else was given. A resumed run keeps
     * the recipe it was started with. */
    if (!o->resume)
      tdm_config_apply_preset(c, o->network);
  }
  if (o->devices && !tdm_config_set_devices(c, o->devices, error))
    return FALSE;
  if (!parse_int("--main", o->main_replica, &c->main_replica, error) ||
      !parse_int("--batch", o->batch, &c->batch, error) ||
      !parse_int("--epochs", o->epochs, &c->epochs, error) ||
      !parse_double("--lr", o->lr, &c->lr, error) ||
      !parse_double("--momentum", o->momentum, &c->momentum, error) ||
      !parse_double("--beta1", o->beta1, &c->beta1, error) ||
      !parse_double("--beta2", o->beta2, &c->beta2, error) ||
      !parse_double("--eps", o->eps, &c->eps, error) ||
      !parse_double("--weight-decay", o->weight_decay, &c->weight_decay, error) ||
      !parse_int("--step-epochs", o->step_epochs, &c->step_epochs, error) ||
      !parse_double("--gamma", o->gamma, &c->gamma, error) ||
      !parse_int("--eval-batch", o->eval_batch, &c->eval_batch, error) ||
      !parse_double("--warmup", o->warmup, &c->warmup_epochs, error) ||
      !parse_double("--label-smoothing", o->smoothing, &c->label_smoothing, error) ||
      !parse_int("--crop", o->crop, &c->crop_pad, error) ||
      !parse_int("--test-shift", o->test_shift, &c->test_shift, error) ||
      !parse_int("--image-size", o->image_size, &c->image_size, error) ||
      !parse_double("--val-split", o->val_split, &c->val_split, error) ||
      !parse_int("--save-every", o->save_every, &c->save_every, error) ||
      !parse_int("--early-stop", o->early_stop, &c->early_stop, error))
    return FALSE;
  if (o->save_best) {
    g_free(c->save_best_path);
    c->save_best_path = g_strdup(o->save_best);
  }
  if (o->test_flip && o->no_test_flip)
    return bad_option(error, _("--test-flip and --no-test-flip: give one of them"));
  if (o->test_flip || o->no_test_flip)
    c->test_flip = o->test_flip;
  if (o->exact)
    c->exact = TRUE;
  if (o->exact_chunk && !o->exact && !c->exact)
    return bad_option(error, _("--exact-chunk: only with --exact"));
  if (!parse_int("--exact-chunk", o->exact_chunk, &c->exact_chunk, error))
    return FALSE;
  NAME_OPTION("--color", o->color, tdm_color_from_name, &c->image_channels,
              "auto, grey or rgb");
  gint64 max_steps;
  if (o->max_steps) {
    if (!g_ascii_string_to_signed(o->max_steps, 10, G_MINLONG, G_MAXLONG, &max_steps, NULL))
      return bad_option(error, _("--max-steps: “%s” is not a whole number"), o->max_steps);
    c->max_steps = (long)max_steps;
  } else if (o->resume) {
    /* A limit counts steps in all, so an inherited one would end the resumed run
     * before it began. */
    c->max_steps = 0;
  }
  if (o->seed && !g_ascii_string_to_unsigned(o->seed, 10, 0, G_MAXUINT64, &c->seed, NULL))
    return bad_option(error, _("--seed: “%s” is not a non-negative whole number"), o->seed);
  TdmOptimizerKind optimizer_before = c->optimizer;
  ENUM_OPTION("--optimizer", o->optimizer, tdm_optimizer_from_name, &c->optimizer,
              TDM_TYPE_OPTIMIZER_KIND);
  /* Another optimizer named without --lr starts from its own usual rate, as in the
   * window. */
  if (o->lr == NULL && c->optimizer != optimizer_before)
    c->lr = tdm_base_recipe_lr(c->optimizer);
  ENUM_OPTION("--schedule", o->schedule, tdm_schedule_from_name, &c->schedule, TDM_TYPE_SCHEDULE);
  ENUM_OPTION("--batchnorm", o->batchnorm, tdm_batchnorm_from_name, &c->batchnorm,
              TDM_TYPE_BATCH_NORM);
  ENUM_OPTION("--weight-decay-on", o->decay_on, tdm_decay_scope_from_name, &c->decay_scope,
              TDM_TYPE_DECAY_SCOPE);
  ENUM_OPTION("--flip", o->flip, tdm_flip_setting_from_name, &c->flip, TDM_TYPE_FLIP_SETTING);
  ENUM_OPTION("--strategy", o->strategy, tdm_strategy_from_name, &c->strategy, TDM_TYPE_STRATEGY);
  ENUM_OPTION("--precision", o->precision, tdm_precision_from_name, &c->precision,
              TDM_TYPE_PRECISION);
  if (!finetune_options_apply(o, c, error))
    return FALSE;
  if (o->save) {
    g_free(c->save_path);
    c->save_path = g_strdup(o->save);
  } else if (o->resume) {
    /* Going on with a run means going on saving it where it was found. */
    g_free(c->save_path);
    c->save_path = g_strdup(o->resume);
  }
  return TRUE;
}

/* Flags that only mean something for some runs are refused elsewhere, not ignored. */
static gboolean
check_flags_apply(const Options *o, const TdmConfig *c, GError **error)
{
  if (o->history != NULL && !o->record)
    return bad_option(error, _("--history: only with --record (the run history to keep the "
                             "run in)"));
  if (o->image_size != NULL && !tdm_dataset_is_image_folder(c->dataset))
    return bad_option(error, _("--image-size: only for a folder of images; dataset “%s” is "
                             "not one"), c->dataset);
  return TRUE;
}

/* A checkpoint that cannot be written would only fail after the first epoch's
 * work; say so before any is done. The engine tries what a save does first: create
 * (and remove) the temporary file in the checkpoint's folder. */
static gboolean
check_save_path(const char *path, const char *flag, GError **error)
{
  if (path == NULL)
    return TRUE;
  g_autoptr(GError) local = NULL;
  if (!tdm_checkpoint_check_writable(path, &local))
    return bad_option(error, "%s: %s", flag, local->message);
  return TRUE;
}

static TdmConfig *
config_from_checkpoint(const char *path, GError **error)
{
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, error);
  if (ckpt == NULL)
    return NULL;
  const char *json = tdm_checkpoint_get_metadata(ckpt, "config");
  if (json == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: no run configuration in its metadata (not written by "
                "Tandem?)"), path);
    return NULL;
  }
  g_autoptr(GError) local = NULL;
  g_autoptr(TdmConfig) c = tdm_config_from_json(json, &local);
  if (c == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("checkpoint %s: %s"), path, local->message);
    return NULL;
  }
  /* Checked before the flags apply, so a bad saved value is blamed on the file and
   * its key, not on a flag the person never gave. */
  g_autofree char *source = g_strdup_printf("checkpoint %s", path);
  if (!tdm_config_validate_saved(c, source, error))
    return NULL;
  return g_steal_pointer(&c);
}

/* Ctrl-C (and SIGTERM). The handler only counts and writes a byte to a pipe (both
 * async-signal-safe); a small thread reads the pipe and cancels the run, which the
 * trainer notices within a step. The second Ctrl-C leaves at once. */

static volatile sig_atomic_t interrupts;
static int wake_pipe[2] = {-1, -1};
/* Set once the trainer reports STARTED: from then on a stop saves the run's state. */
static gint training_started;

static void
on_interrupt(int signum)
{
  int saved = errno;
  if (++interrupts >= 2) {
    static const char message[] = "\ntandem-train: interrupted\n";
    (void)!write(STDERR_FILENO, message, sizeof message - 1);
    _exit(EXIT_INTERRUPTED);
  }
  (void)!write(wake_pipe[1], "i", 1);
  errno = saved;
}

static gpointer
interrupt_watch(gpointer data)
{
  GCancellable *cancellable = data;
  char c;
  for (;;) {
    ssize_t n = read(wake_pipe[0], &c, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0 || c == 'q')
      return NULL;
    /* Before training starts there is nothing to keep, and a stop now would have the
     * trainer save freshly initialised parameters over --save (with --resume, over
     * the very checkpoint being resumed). Leave without writing anything. */
    if (!g_atomic_int_get(&training_started)) {
      static const char message[] = "tandem-train: interrupted before training started\n";
      (void)!write(STDERR_FILENO, message, sizeof message - 1);
      _exit(EXIT_INTERRUPTED);
    }
    g_cancellable_cancel(cancellable);
  }
}

static gboolean
interrupts_install(void)
{
  if (pipe(wake_pipe) != 0)
    return FALSE;
  for (int i = 0; i < 2; i++)
    fcntl(wake_pipe[i], F_SETFD, FD_CLOEXEC);
  struct sigaction sa = {0};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = SA_RESTART;
  const int signals[] = {SIGINT, SIGTERM};
  for (gsize i = 0; i < G_N_ELEMENTS(signals); i++) {
    /* A shell starts background jobs with SIGINT ignored, so that Ctrl-C leaves
     * them alone; keep it that way, as Python and most tools do. */
    struct sigaction old;
    if (sigaction(signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
      continue;
    sigaction(signals[i], &sa, NULL);
  }
  return TRUE;
}

/* The printer is told of every event; the interrupt handling needs to know when
 * training has started. */
static void
on_event(const TdmEvent *ev, gpointer user_data)
{
  if (ev->kind == TDM_EVENT_STARTED)
    g_atomic_int_set(&training_started, 1);
  tdm_cli_printer_on_event(ev, user_data);
}

/* 2 for what the person asked for, 1 for what went wrong while doing it. A checkpoint
 * error before the first step is the resumed file; after it, a failed save. */
static int
exit_status_for(const GError *e, gboolean stepped)
{
  if (e->domain != TDM_ENGINE_ERROR)
    return EXIT_RUNTIME;
  switch (e->code) {
  case TDM_ENGINE_ERROR_INVALID_OPTION:
  case TDM_ENGINE_ERROR_INVALID_SPEC:
  case TDM_ENGINE_ERROR_DATASET:
  case TDM_ENGINE_ERROR_DEVICE:
    return EXIT_BAD_INPUT;
  case TDM_ENGINE_ERROR_CHECKPOINT:
  case TDM_ENGINE_ERROR_OUT_OF_MEMORY:
    /* A run refused for memory before its first step asked for too much. */
    return stepped ? EXIT_RUNTIME : EXIT_BAD_INPUT;
  case TDM_ENGINE_ERROR_CANCELLED:
    return EXIT_INTERRUPTED;
  default:
    return EXIT_RUNTIME;
  }
}

/* The flag a failure of the engine comes back to, so the message says where to look;
 * NULL when it is no one flag's fault. */
static const char *
flag_of(const GError *e, gboolean stepped, gboolean resumed)
{
  if (e->domain != TDM_ENGINE_ERROR || g_str_has_prefix(e->message, "--"))
    return NULL;
  switch (e->code) {
  case TDM_ENGINE_ERROR_INVALID_SPEC:
    return "--network";
  case TDM_ENGINE_ERROR_DATASET:
    return "--dataset";
  case TDM_ENGINE_ERROR_DEVICE:
    return "--devices";
  case TDM_ENGINE_ERROR_CHECKPOINT:
    return resumed && !stepped ? "--resume" : NULL;
  default:
    return NULL;
  }
}

/* Like flag_of, but a value the person did not give came from the checkpoint being
 * resumed: then that is what the message names. */
static char *
source_of(const GError *e, gboolean stepped, const Options *o)
{
  const char *flag = flag_of(e, stepped, o->resume != NULL);
  const char *given = NULL, *what = NULL;
  if (flag == NULL || o->resume == NULL)
    return g_strdup(flag);
  if (g_str_equal(flag, "--network"))
    given = o->network, what = "network";
  else if (g_str_equal(flag, "--dataset"))
    given = o->dataset, what = "dataset";
  else if (g_str_equal(flag, "--devices"))
    given = o->devices, what = "devices";
  if (what == NULL || given != NULL)
    return g_strdup(flag);
  return g_strdup_printf("checkpoint %s, its saved %s", o->resume, what);
}

static int
fail(int status, const char *flag, const char *message)
{
  /* Under mpirun the lines of every rank arrive mixed: say whose this is. */
  char rank[32] = "";
  if (tdm_distributed_active())
    g_snprintf(rank, sizeof rank, "rank %d: ", tdm_distributed_rank());
  if (flag != NULL)
    fprintf(stderr, _("tandem-train: %s%s: %s\n"), rank, flag, message);
  else
    fprintf(stderr, _("tandem-train: %s%s\n"), rank, message);
  return status;
}

/* Under mpirun only the rank of the main device writes checkpoints; the folder need
 * not exist on the other ranks' machines. */
static gboolean
saves_here(const TdmConfig *config)
{
  return !tdm_distributed_active() || config->main_replica == tdm_distributed_rank();
}

static int
list_devices(void)
{
  GArray *devices = tdm_device_list();
  for (guint i = 0; i < devices->len; i++) {
    g_autofree char *line = tdm_device_describe(&g_array_index(devices, TdmDeviceInfo, i));
    printf("%s\n", line);
  }
  g_array_unref(devices);
  return 0;
}

static int
run(const TdmConfig *config, const Options *o)
{
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  /* A log (stdout not a terminal, or one rank's output under mpirun) gets plain
   * progress lines; a person at a terminal gets the live line on stderr. */
  gboolean log = !o->json && !o->quiet && (!isatty(STDOUT_FILENO) || tdm_distributed_active());
  TdmCliPrinter printer = {
    .json = o->json,
    .quiet = o->quiet,
    .log = log,
    .bar = !log && !o->json && !o->quiet && isatty(STDERR_FILENO),
    .config = config,
    .setup_phase = -1,
    .setup_said = -1,
    .cancellable = cancellable,
  };
  printer.t_epoch = g_get_monotonic_time();

  GThread *watch = NULL;
  /* Under mpirun, Ctrl-C is mpirun's: it ends every rank with SIGTERM and then
   * SIGKILL, too soon for a stop to be agreed and saved, so the default action is
   * kept (checkpoints of finished epochs stay whole: they are written atomically). */
  if (!tdm_distributed_active() && interrupts_install())
    watch = g_thread_new("tdm-interrupt", interrupt_watch, cancellable);

  g_autoptr(GError) error = NULL;
  double pace = 0;
  if (!parse_double("--pace", o->pace, &pace, &error) ||
      ((pace < 0 || (pace > 0 && (pace < TDM_PACE_MIN || pace > TDM_PACE_MAX))) &&
       !bad_option(&error, _("--pace: %g is not a number of steps a second from %g to %g "
                   "(0: no limit)"), pace, TDM_PACE_MIN, TDM_PACE_MAX)))
    return fail(EXIT_BAD_INPUT, NULL, error->message);
  TdmPrewarm prewarm = TDM_PREWARM_AUTO;
  if (o->prewarm != NULL && !tdm_prewarm_from_name(o->prewarm, &prewarm)) {
    bad_option(&error, _("--prewarm: unknown value “%s” (choose auto, on or off)"), o->prewarm);
    return fail(EXIT_BAD_INPUT, NULL, error->message);
  }
  g_autoptr(TdmHistory) history = NULL;
  g_autoptr(TdmRunRecorder) recorder = NULL;
  if (o->record && saves_here(config)) {
    history = tdm_history_new(o->history);
    recorder = tdm_run_recorder_new(history, config, o->run_name, &error);
    if (recorder == NULL)
      return fail(EXIT_BAD_INPUT, o->history != NULL ? "--history" : "--record", error->message);
    printer.recorder = recorder;
  }

  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(config, on_event, &printer);
  if (o->resume)
    tdm_trainer_set_resume_path(trainer, o->resume);
  /* Recorded runs summarize on a step grid so that runs of one configuration overlay
   * point for point in the history. */
  if (recorder != NULL)
    tdm_trainer_set_summary_steps(trainer, TDM_HISTORY_SUMMARY_STEPS);
  if (printer.log)
    tdm_trainer_set_summary_parts(trainer, 10);
  tdm_trainer_set_pace(trainer, pace);
  tdm_trainer_set_prewarm(trainer, prewarm);
  gboolean ok = tdm_trainer_run(trainer, cancellable, &error);
  tdm_cli_printer_clear_bar(&printer);
  int record_status = 0;
  if (recorder != NULL) {
    g_autoptr(GError) record_error = NULL;
    if (!tdm_run_recorder_finish(recorder, &record_error))
      record_status = fail(EXIT_RUNTIME, "--record", record_error->message);
    else if (!o->json && !o->quiet)
      fprintf(stderr, _("tandem-train: recorded as run %s in %s\n"),
              tdm_run_recorder_get_id(recorder), tdm_history_get_folder(history));
  }

  if (watch) {
    (void)!write(wake_pipe[1], "q", 1);
    g_thread_join(watch);
  }

  if (!ok) {
    int status = exit_status_for(error, printer.stepped);
    if (status == EXIT_INTERRUPTED)
      return status;
    g_autofree char *source = source_of(error, printer.stepped, o);
    return fail(status, source, error->message);
  }
  return g_cancellable_is_cancelled(cancellable) ? EXIT_INTERRUPTED : record_status;
}

/* --export-onnx: the --resume checkpoint's network as an ONNX model; the engine
 * writes it (tdm-onnx-export.h), nothing is trained. */
static int
export_onnx(const Options *o)
{
  if (o->resume == NULL)
    return fail(EXIT_BAD_INPUT, "--export-onnx", _("needs --resume CHECKPOINT: the trained "
                                                 "network to export"));
  if (o->classify != NULL)
    return fail(EXIT_BAD_INPUT, "--export-onnx", _("cannot be combined with --classify"));
  g_autoptr(GError) error = NULL;
  if (!tdm_onnx_export_checkpoint(o->resume, o->export_onnx, &error))
    return fail(EXIT_BAD_INPUT,
                g_error_matches(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT)
                  ? "--export-onnx" : "--resume",
                error->message);
  if (!o->quiet) {
    g_autofree char *display = g_filename_display_name(o->export_onnx);
    fprintf(stderr, _("tandem-train: wrote %s\n"), display);
  }
  return 0;
}

/* --scaling: the options that make no sense with it are refused before anything runs. */
static gboolean
scaling_options(const Options *o, const TdmConfig *config, TdmCliScaling *out, GError **error)
{
  memset(out, 0, sizeof *out);
  if (!tdm_scaling_mode_parse(o->scaling, &out->mode))
    return bad_option(error, _("--scaling: “%s” is not a kind of scaling: strong or weak"),
                      o->scaling);
  gint64 steps = 200;
  if (o->scaling_steps != NULL &&
      !g_ascii_string_to_signed(o->scaling_steps, 10, 1, 1000000, &steps, NULL))
    return bad_option(error, _("--scaling-steps: “%s” is not a whole number from 1 to 1000000"),
                      o->scaling_steps);
  if (o->resume != NULL || o->distributed || o->pace != NULL)
    return bad_option(error, _("--scaling: cannot be combined with %s"),
                      o->resume != NULL ? "--resume" : o->distributed ? "--distributed" : "--pace");
  if (tdm_config_replica_count(config) < 2)
    return bad_option(error, _("--scaling: needs two devices or more (--devices cpu:2, or two "
                             "GPUs), to run on 1, 2, … of them"));
  out->steps = steps;
  out->json = o->json;
  out->quiet = o->quiet;
  out->record = o->record;
  out->history = o->history;
  out->name = o->run_name;
  return TRUE;
}

static int
scaling_run(const TdmConfig *config, const TdmCliScaling *scaling)
{
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  GThread *watch = NULL;
  /* Nothing is saved: Ctrl-C ends the scaling run at once, keeping the points so far. */
  g_atomic_int_set(&training_started, 1);
  if (interrupts_install())
    watch = g_thread_new("tdm-interrupt", interrupt_watch, cancellable);
  g_autoptr(GError) error = NULL;
  int points = 0, record_status = 0;
  gboolean ok = tdm_cli_scaling(config, scaling, cancellable, &points, &record_status, &error);
  if (watch) {
    (void)!write(wake_pipe[1], "q", 1);
    g_thread_join(watch);
  }
  if (record_status == EXIT_BAD_INPUT)
    return EXIT_BAD_INPUT;
  if (!ok) {
    int status = exit_status_for(error, points > 0);
    if (status == EXIT_INTERRUPTED)
      return status;
    return fail(status, flag_of(error, points > 0, FALSE), error->message);
  }
  return record_status;
}

int
main(int argc, char **argv)
{
  tdm_cli_check_stdout_at_exit(EXIT_RUNTIME);
  setlocale(LC_ALL, "");
  /* Decimal points in flags, logs and JSON are '.', whatever the locale. */
  setlocale(LC_NUMERIC, "C");
  /* The program's messages; the engine binds its own domain itself. */
  tdm_i18n_bind(GETTEXT_PACKAGE, "po");
  textdomain(GETTEXT_PACKAGE);

  Options o = {0};
  g_autoptr(GError) error = NULL;
  GOptionContext *context = options_context(&o);
  gboolean parsed = g_option_context_parse(context, &argc, &argv, &error);
  g_option_context_free(context);
  if (!parsed) {
    options_clear(&o);
    g_autofree char *flag =
        error->domain == G_CONVERT_ERROR ? tdm_cli_undecodable_option(argc, argv) : NULL;
    if (flag != NULL)
      return fail(EXIT_BAD_INPUT, flag, _("its value is not valid text in the system's "
                                        "encoding (UTF-8 expected)"));
    return fail(EXIT_BAD_INPUT, NULL, error->message);
  }
  /* tandem-train runs: the history, as --list-runs. */
  if (o.classify == NULL && argc == 2 && g_str_equal(argv[1], "runs")) {
    o.list_runs = TRUE;
    argc = 1;
  }
  /* --classify a.png b.png: the names after the first are arguments too. */
  if (o.classify != NULL && argc > 1) {
    GStrvBuilder *all = g_strv_builder_new();
    g_strv_builder_addv(all, (const char **)o.classify);
    for (int i = 1; i < argc; i++)
      g_strv_builder_add(all, argv[i]);
    g_strfreev(o.classify);
    o.classify = g_strv_builder_end(all);
    g_strv_builder_unref(all);
    argc = 1;
  }
  if (argc > 1) {
    g_autofree char *message = g_strdup_printf(_("unexpected argument “%s” (see --help)"),
                                               argv[1]);
    options_clear(&o);
    return fail(EXIT_BAD_INPUT, NULL, message);
  }

  int status = 0;
  if (o.classify == NULL && o.top != NULL) {
    status = fail(EXIT_BAD_INPUT, "--top", _("only with --classify"));
  } else if (o.classify != NULL && o.image_size != NULL && o.resume != NULL) {
    status = fail(EXIT_BAD_INPUT, "--image-size", _("not with --classify: images are resized "
                                                  "to the checkpoint's input size"));
  } else if (o.version) {
    printf("tandem-train %s\n", TDM_VERSION);
  } else if (o.list_devices) {
    status = list_devices();
  } else if (o.export_onnx != NULL) {
    status = export_onnx(&o);
  } else if (o.list_runs) {
    status = tdm_cli_runs_list(o.history, o.json);
  } else if (o.show_run != NULL) {
    status = tdm_cli_runs_show(o.history, o.show_run, o.json);
  } else if (o.export_run != NULL) {
    status = tdm_cli_runs_export(o.history, o.export_run);
  } else if (o.config != NULL && o.resume != NULL) {
    status = fail(EXIT_BAD_INPUT, "--config", _("cannot be combined with --resume (a resumed "
                                              "run's settings come from its checkpoint)"));
  } else if (o.classify != NULL) {
    gint64 top = 3, size = 0;
    int channels = 0;
    if (o.resume == NULL && (o.init == NULL || o.network == NULL))
      status = fail(EXIT_BAD_INPUT, "--classify", _("needs --resume CHECKPOINT (a trained run) "
                                                  "or --network NAME --init FILE (weights)"));
    else if (o.top != NULL && !g_ascii_string_to_signed(o.top, 10, 1, 1000, &top, NULL))
      status = fail(EXIT_BAD_INPUT, "--top", _("expected a whole number from 1 to 1000"));
    else if (o.resume == NULL && o.image_size != NULL &&
             !g_ascii_string_to_signed(o.image_size, 10, 1, 4096, &size, NULL))
      status = fail(EXIT_BAD_INPUT, "--image-size", _("expected a whole number from 1 to 4096"));
    else if (o.resume == NULL && o.color != NULL && !tdm_color_from_name(o.color, &channels))
      status = fail(EXIT_BAD_INPUT, "--color", _("expected auto, grey or rgb"));
    else if (o.resume == NULL)
      status = tdm_cli_classify_weights(o.network, o.init, (int)size, channels, o.normalize,
                                        (const char *const *)o.classify, (int)top, o.json);
    else
      status = tdm_cli_classify(o.resume, (const char *const *)o.classify, (int)top, o.json);
  } else if (o.distributed && !tdm_distributed_init(&argc, &argv, &error)) {
    status = fail(EXIT_RUNTIME, "--distributed", error->message);
  } else {
    /* Under mpirun, "cuda" is each rank's own GPU, counted from GPU 0. */
    if (o.distributed && g_strcmp0(o.devices, "cuda") == 0) {
      g_free(o.devices);
      o.devices = g_strdup("cuda:0");
    }
    g_autoptr(TdmConfig) config = o.resume   ? config_from_checkpoint(o.resume, &error)
                                  : o.config ? tdm_cli_config_load(o.config, &error)
                                             : tdm_config_new();
    if (config == NULL || !options_apply(&o, config, &error) ||
        !tdm_distributed_resolve_devices(config, &error) ||
        !tdm_config_validate(config, &error) ||
        !check_save_path(saves_here(config) ? config->save_path : NULL,
                         o.save || !o.resume ? "--save" : "--resume", &error) ||
        !check_save_path(saves_here(config) ? config->save_best_path : NULL, "--save-best",
                         &error) ||
        !check_flags_apply(&o, config, &error)) {
      g_autofree char *source = config == NULL && o.config != NULL ? g_strdup("--config")
                                : error != NULL ? source_of(error, FALSE, &o)
                                                : NULL;
      status = fail(EXIT_BAD_INPUT, source, error->message);
    } else if (o.print_config) {
      g_autofree char *json = tdm_config_to_json(config);
      printf("%s\n", json);
    } else if (o.scaling != NULL) {
      TdmCliScaling scaling;
      if (!scaling_options(&o, config, &scaling, &error))
        status = fail(EXIT_BAD_INPUT, NULL, error->message);
      else
        status = scaling_run(config, &scaling);
    } else if (o.scaling_steps != NULL) {
      status = fail(EXIT_BAD_INPUT, "--scaling-steps", _("only with --scaling"));
    } else
      status = run(config, &o);
  }
  options_clear(&o);
  if (tdm_distributed_active()) {
    /* A rank that failed ends the others, which may be waiting for it in a
     * collective; when all went well they all get here and finish together. */
    if (status != 0 && status != EXIT_INTERRUPTED)
      tdm_distributed_abort(status);
    tdm_distributed_finalize();
  }
  return status;
}
