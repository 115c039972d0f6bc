/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-options.c — tandem-train's flags as text, their help, and their conversion
 * onto a TdmConfig. Flags are kept as text until applied, so a bad number gets a
 * message that names its flag and an absent flag leaves a resumed value alone. Not
 * the program's flow (tandem-train.c).
 */
#include "tdm-build-config.h"
#include <glib/gi18n.h>
#include "tdm-cli-options.h"

#include "tdm-base-recipe.h"
#include "tdm-choice.h"
#include "tdm-dataset-folder.h"
#include "tdm-error.h"
#include "tdm-exact.h"
#include "tdm-file.h"
#include "tdm-network-catalogue.h"
#include "tdm-suggest.h"

#include <errno.h>
#include <math.h>
#include <string.h>

void
tdm_cli_options_clear(TdmCliOptions *o)
{
  char **strings[] = {
    &o->dataset, &o->network, &o->devices, &o->main_replica, &o->batch, &o->epochs,
    &o->optimizer, &o->lr, &o->momentum, &o->beta1, &o->beta2, &o->eps, &o->weight_decay,
    &o->schedule, &o->step_epochs, &o->gamma, &o->strategy, &o->precision, &o->seed,
    &o->eval_batch, &o->max_steps, &o->save, &o->resume, &o->image_size, &o->color, &o->top,
    &o->batchnorm, &o->decay_on, &o->warmup, &o->smoothing, &o->crop, &o->flip,
    &o->test_shift, &o->run_name, &o->history, &o->pace, &o->scaling, &o->scaling_steps,
    &o->prewarm, &o->export_onnx, &o->val_split, &o->save_best, &o->save_every,
    &o->early_stop, &o->config, &o->show_run, &o->export_run, &o->monitor, &o->monitor_mode,
    &o->min_delta, &o->plateau_patience, &o->accumulate, &o->clip_grad_norm,
    &o->resized_crop, &o->resized_crop_ratio, &o->jitter, &o->erase, &o->lr_find_range,
    &o->lr_find_steps, &o->tensorboard, &o->export_tensorboard,
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
  "Starting from weights: --init FILE loads the tensors of a state_dict whose names\n"
  "and shapes match, from a .pth file of torch.save (read without running any of it)\n"
  "or safetensors (torchvision's for resnet18/34/50; --init torchvision takes the file\n"
  "torchvision downloaded to ~/.cache/torch/hub/checkpoints; a head of another class\n"
  "count starts afresh); --freeze and --train head keep modules fixed (their BN in\n"
  "inference mode), --lr-scale slows some down, --normalize imagenet normalizes the\n"
  "inputs as torchvision's models expect. --network N --init FILE --classify IMAGE\n"
  "classifies with such weights as they are, and --export-onnx writes them.\n"
  "Batch norm across devices (--batchnorm): per-replica normalizes each device's\n"
  "share with its own statistics (PyTorch DDP's default); sync combines them over\n"
  "all devices every step, so N devices train exactly as one with the same batch.\n"
  "Exact mode (--exact, chunks of --exact-chunk samples): see the end.\n"
  "Augmentation: --crop P shifts each image by up to P pixels (zero padded),\n"
  "--flip mirrors half of them (auto: not for digits, mnist and synthetic); for\n"
  "photos --resized-crop A,B crops A to B of the area and resizes it back, --jitter\n"
  "changes brightness, contrast and saturation, --erase P blanks a rectangle (the\n"
  "built-in networks' recipes turn these on for a folder of images). All depend only\n"
  "on the seed, epoch and sample, never on the number of devices.\n"
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
  "  tandem-train --val-split 0.1 --early-stop 5 --save-best best.st\n"
  "  tandem-train --batch 64 --accumulate 8 --clip-grad-norm 1\n"
  "  tandem-train --network cnn --lr-find > lr.csv\n"
  "\n"
  "Validation: --val-split 0.1 holds out a tenth of the training set (chosen by the\n"
  "seed) and evaluates it every epoch; --save-best FILE keeps the checkpoint of the\n"
  "best epoch by --monitor (val_loss unless told), --early-stop P ends a run after P\n"
  "epochs without a better one, --schedule plateau lowers the rate after\n"
  "--plateau-patience. The test set stays the final measure.\n"
  "\n"
  "Gradients: --accumulate N trains N micro-batches of --batch a step and combines\n"
  "the gradients once (the others' communication is skipped, as DDP's no_sync);\n"
  "--clip-grad-norm X scales the combined gradient down to norm X. --lr-find runs\n"
  "Smith's range test instead of training and suggests a --lr.\n"
  "\n"
  "Runs: --record keeps a run in the history that the window lists;\n"
  "  tandem-train runs                       lists them (--json: one object a line)\n"
  "  tandem-train --show-run ID              its settings and epochs\n"
  "  tandem-train --export-run ID > run.csv  its metrics, as the window exports them\n"
  "  tandem-train runs --export-tensorboard DIR  every run as TensorBoard event files\n"
  "  tandem-train --tensorboard DIR …          a run's scalars live in TensorBoard\n"
  "                                          (tensorboard --logdir DIR shows them)\n"
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

/* The long names of the last context's entries (static strings). */
static GPtrArray *option_names;

char *
tdm_cli_unknown_option(char **argv)
{
  g_return_val_if_fail(option_names != NULL, NULL);
  for (int i = 1; argv != NULL && argv[i] != NULL; i++) {
    const char *arg = argv[i];
    if (g_str_equal(arg, "--"))
      break;
    if (!g_str_has_prefix(arg, "--") || arg[2] == '\0')
      continue;
    g_autofree char *name = g_strndup(arg + 2, strcspn(arg + 2, "="));
    gboolean known = FALSE;
    for (guint k = 0; k < option_names->len && !known; k++)
      known = g_str_equal(name, g_ptr_array_index(option_names, k));
    if (known)
      continue;
    const char *near = tdm_suggest(name, (const char *const *)option_names->pdata,
                                   (int)option_names->len);
    if (near != NULL)
      return g_strdup_printf(_("unknown option --%s; did you mean --%s? (--help lists every "
                               "option)"), name, near);
    return g_strdup_printf(_("unknown option --%s (--help lists every option)"), name);
  }
  return NULL;
}

GOptionContext *
tdm_cli_options_context(TdmCliOptions *o)
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
     N_("Factor at each step of --schedule step or plateau (0.1)"), "X"},
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
    {"resized-crop", 0, 0, G_OPTION_ARG_STRING, &o->resized_crop,
     N_("Random resized crop: a part of A to B of each image's area, resized to the sample "
        "(e.g. 0.08,1; default off)"), "A,B"},
    {"resized-crop-ratio", 0, 0, G_OPTION_ARG_STRING, &o->resized_crop_ratio,
     N_("With --resized-crop: the crop's aspect ratios, width over height (default "
        "0.75,1.333)"), "A,B"},
    {"jitter", 0, 0, G_OPTION_ARG_STRING, &o->jitter,
     N_("Colour jitter: brightness, contrast and saturation each times 1 ± X (one X for all "
        "three, e.g. 0.4; default off)"), "B,C,S"},
    {"erase", 0, 0, G_OPTION_ARG_STRING, &o->erase,
     /* xgettext:no-c-format */
     N_("Random erasing: with probability P, a rectangle of 2–33 % of the image set to 0 "
        "(default 0: off)"), "P"},
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
     N_("Keep the checkpoint of the epoch with the best --monitor metric"), "FILE"},
    {"early-stop", 0, 0, G_OPTION_ARG_STRING, &o->early_stop,
     N_("End after P epochs without a better --monitor metric (default 0: never)"), "P"},
    {"monitor", 0, 0, G_OPTION_ARG_STRING, &o->monitor,
     choice_help(N_("What --early-stop, --save-best and --schedule plateau watch: %s "
                    "(val_…: needs --val-split)"), TDM_TYPE_MONITOR, d->monitor), "METRIC"},
    {"monitor-mode", 0, 0, G_OPTION_ARG_STRING, &o->monitor_mode,
     choice_help(N_("Whether the --monitor metric improves downwards or upwards: %s (auto: min "
                    "for a loss, max for an accuracy)"), TDM_TYPE_MONITOR_MODE, d->monitor_mode),
     "MODE"},
    {"min-delta", 0, 0, G_OPTION_ARG_STRING, &o->min_delta,
     N_("The least change of the --monitor metric that counts as better (default 0)"), "X"},
    {"plateau-patience", 0, 0, G_OPTION_ARG_STRING, &o->plateau_patience,
     number_help(N_("--schedule plateau: epochs without a better --monitor metric before the "
                    "rate is multiplied by --gamma (default %d)"), d->plateau_patience), "N"},
    {"accumulate", 0, 0, G_OPTION_ARG_STRING, &o->accumulate,
     N_("Micro-batches of --batch an optimizer step, gradients combined once, after the last "
        "(DDP's no_sync; default 1)"), "N"},
    {"clip-grad-norm", 0, 0, G_OPTION_ARG_STRING, &o->clip_grad_norm,
     N_("Scale the gradient down to this global norm where it is larger, after combining "
        "(default 0: off)"), "X"},
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
     N_("Start from the weights of a state_dict: a .pth file of torch.save or safetensors "
     "(PyTorch's names and shapes); torchvision: its download for resnet18/34/50"),
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
     N_("Write the --resume checkpoint's network (or --network's with --init's weights) as "
     "an ONNX model for inference and exit (input: float NCHW images in [0, 1]; output: "
     "logits)"), "FILE"},
    {"record", 0, 0, G_OPTION_ARG_NONE, &o->record,
     N_("Keep the run in the run history (the window lists it)"), NULL},
    {"run-name", 0, 0, G_OPTION_ARG_STRING, &o->run_name,
     N_("Name of the recorded run (default: its date)"), "NAME"},
    {"tensorboard", 0, 0, G_OPTION_ARG_FILENAME, &o->tensorboard,
     N_("Write the run's scalars as TensorBoard event files, in a folder of DIR named "
     "after the run (--run-name, else its date)"), "DIR"},
    {"export-tensorboard", 0, 0, G_OPTION_ARG_FILENAME, &o->export_tensorboard,
     N_("With runs: write every run of the history as TensorBoard event files, a folder "
     "of DIR each, and exit"), "DIR"},
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
    {"lr-find", 0, 0, G_OPTION_ARG_NONE, &o->lr_find,
     N_("Instead of training: a learning-rate range test (Smith's); prints each step's rate "
        "and loss as CSV and suggests a rate"), NULL},
    {"lr-find-range", 0, 0, G_OPTION_ARG_STRING, &o->lr_find_range,
     N_("With --lr-find: the first and last rate, growing exponentially (default 1e-7,10)"),
     "A,B"},
    {"lr-find-steps", 0, 0, G_OPTION_ARG_STRING, &o->lr_find_steps,
     N_("With --lr-find: steps from the first rate to the last (default 100)"), "N"},
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
  /* The names, for the advice on a mistyped one. */
  g_clear_pointer(&option_names, g_ptr_array_unref);
  option_names = g_ptr_array_new();
  for (gsize i = 0; entries[i].long_name != NULL; i++)
    g_ptr_array_add(option_names, (gpointer)entries[i].long_name);
  g_ptr_array_add(option_names, (gpointer) "help");
  g_ptr_array_add(option_names, (gpointer) "help-all");
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

gboolean
tdm_cli_bad_option(GError **error, const char *format, ...)
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
    return tdm_cli_bad_option(error, _("%s: “%s” is not a whole number"), flag, text);
  *out = (int)v;
  return TRUE;
}

gboolean
tdm_cli_parse_double(const char *flag, const char *text, double *out, GError **error)
{
  if (text == NULL)
    return TRUE;
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod(text, &end);
  if (*text == '\0' || g_ascii_isspace(*text) || *end != '\0' || errno == ERANGE ||
      !isfinite(v))
    return tdm_cli_bad_option(error, _("%s: “%s” is not a number"), flag, text);
  *out = v;
  return TRUE;
}

#define NAME_OPTION(flag, text, parse, out, choices)                                        \
  do {                                                                                     \
    if ((text) != NULL && !parse((text), (out)))                                           \
      return tdm_cli_bad_option(error, "%s: unknown value “%s” (choose %s)", flag, (text), choices); \
  } while (0)
/* The same for a choice with a GEnum: the names listed are its nicks. */
#define ENUM_OPTION(flag, text, parse, out, type)                                          \
  do {                                                                                     \
    if ((text) != NULL && !parse((text), (out)))                                           \
      return unknown_choice(error, flag, (text), (type));                                  \
  } while (0)

/* A value a GEnum does not name: the nearest that it does, and all of them. */
static gboolean
unknown_choice(GError **error, const char *flag, const char *text, GType type)
{
  g_autofree char *choices = tdm_choice_list(type, -1);
  guint count = tdm_choice_count(type);
  g_autofree const char **names = g_new0(const char *, count + 1);
  for (guint i = 0; i < count; i++)
    names[i] = tdm_choice_name(type, (int)i);
  const char *near = tdm_suggest(text, names, (int)count);
  if (near != NULL)
    return tdm_cli_bad_option(error, _("%s: unknown value “%s”; did you mean %s? (choose %s)"),
                              flag, text, near, choices);
  return tdm_cli_bad_option(error, "%s: unknown value “%s” (choose %s)", flag, text, choices);
}

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
finetune_options_apply(const TdmCliOptions *o, TdmConfig *c, GError **error)
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
      return tdm_cli_bad_option(error, _("--train: unknown value “%s” (choose head or all)"), o->train);
    c->train_head = g_str_equal(o->train, "head");
  }
  return TRUE;
}

/* "A,B" (or "A,B,C") into out[n]; with `one_for_all`, a single "A" fills every
 * place. */
static gboolean
parse_numbers(const char *flag, const char *text, double *out, int n, gboolean one_for_all,
              GError **error)
{
  if (text == NULL)
    return TRUE;
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  int given = (int)g_strv_length(parts);
  if (given != n && !(one_for_all && given == 1))
    return tdm_cli_bad_option(error, n == 2 ? _("%s: “%s”: expected two numbers, A,B")
                                            : _("%s: “%s”: expected one number or three, "
                                                "B,C,S"), flag, text);
  for (int i = 0; i < n; i++) {
    const char *part = g_strstrip(parts[given == 1 ? 0 : i]);
    if (!tdm_cli_parse_double(flag, part, &out[i], error))
      return FALSE;
  }
  return TRUE;
}

/* --monitor and the other training controls (tdm-config-controls.c). */
static gboolean
controls_options_apply(const TdmCliOptions *o, TdmConfig *c, GError **error)
{
  ENUM_OPTION("--monitor", o->monitor, tdm_monitor_from_name, &c->monitor, TDM_TYPE_MONITOR);
  ENUM_OPTION("--monitor-mode", o->monitor_mode, tdm_monitor_mode_from_name, &c->monitor_mode,
              TDM_TYPE_MONITOR_MODE);
  if (!tdm_cli_parse_double("--min-delta", o->min_delta, &c->min_delta, error) ||
      !parse_int("--plateau-patience", o->plateau_patience, &c->plateau_patience, error) ||
      !parse_int("--accumulate", o->accumulate, &c->accumulate, error) ||
      !tdm_cli_parse_double("--clip-grad-norm", o->clip_grad_norm, &c->clip_grad_norm, error) ||
      !parse_numbers("--resized-crop", o->resized_crop, c->crop_scale, 2, FALSE, error) ||
      !parse_numbers("--resized-crop-ratio", o->resized_crop_ratio, c->crop_ratio, 2, FALSE,
                     error) ||
      !parse_numbers("--jitter", o->jitter, c->jitter, 3, TRUE, error) ||
      !tdm_cli_parse_double("--erase", o->erase, &c->erase, error))
    return FALSE;
  if (o->resized_crop_ratio != NULL && c->crop_scale[0] <= 0)
    return tdm_cli_bad_option(error, _("--resized-crop-ratio: only with --resized-crop"));
  return TRUE;
}

/* Applies the flags that were given over `c` (defaults or a resumed run). */
gboolean
tdm_cli_options_apply(const TdmCliOptions *o, TdmConfig *c, GError **error)
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
      !tdm_cli_parse_double("--lr", o->lr, &c->lr, error) ||
      !tdm_cli_parse_double("--momentum", o->momentum, &c->momentum, error) ||
      !tdm_cli_parse_double("--beta1", o->beta1, &c->beta1, error) ||
      !tdm_cli_parse_double("--beta2", o->beta2, &c->beta2, error) ||
      !tdm_cli_parse_double("--eps", o->eps, &c->eps, error) ||
      !tdm_cli_parse_double("--weight-decay", o->weight_decay, &c->weight_decay, error) ||
      !parse_int("--step-epochs", o->step_epochs, &c->step_epochs, error) ||
      !tdm_cli_parse_double("--gamma", o->gamma, &c->gamma, error) ||
      !parse_int("--eval-batch", o->eval_batch, &c->eval_batch, error) ||
      !tdm_cli_parse_double("--warmup", o->warmup, &c->warmup_epochs, error) ||
      !tdm_cli_parse_double("--label-smoothing", o->smoothing, &c->label_smoothing, error) ||
      !parse_int("--crop", o->crop, &c->crop_pad, error) ||
      !parse_int("--test-shift", o->test_shift, &c->test_shift, error) ||
      !parse_int("--image-size", o->image_size, &c->image_size, error) ||
      !tdm_cli_parse_double("--val-split", o->val_split, &c->val_split, error) ||
      !parse_int("--save-every", o->save_every, &c->save_every, error) ||
      !parse_int("--early-stop", o->early_stop, &c->early_stop, error))
    return FALSE;
  if (o->save_best) {
    g_free(c->save_best_path);
    c->save_best_path = g_strdup(o->save_best);
  }
  if (!controls_options_apply(o, c, error))
    return FALSE;
  if (o->test_flip && o->no_test_flip)
    return tdm_cli_bad_option(error, _("--test-flip and --no-test-flip: give one of them"));
  if (o->test_flip || o->no_test_flip)
    c->test_flip = o->test_flip;
  if (o->exact)
    c->exact = TRUE;
  if (o->exact_chunk && !o->exact && !c->exact)
    return tdm_cli_bad_option(error, _("--exact-chunk: only with --exact"));
  if (!parse_int("--exact-chunk", o->exact_chunk, &c->exact_chunk, error))
    return FALSE;
  NAME_OPTION("--color", o->color, tdm_color_from_name, &c->image_channels,
              "auto, grey or rgb");
  gint64 max_steps;
  if (o->max_steps) {
    if (!g_ascii_string_to_signed(o->max_steps, 10, G_MINLONG, G_MAXLONG, &max_steps, NULL))
      return tdm_cli_bad_option(error, _("--max-steps: “%s” is not a whole number"), o->max_steps);
    c->max_steps = (long)max_steps;
  } else if (o->resume) {
    /* A limit counts steps in all, so an inherited one would end the resumed run
     * before it began. */
    c->max_steps = 0;
  }
  if (o->seed && !g_ascii_string_to_unsigned(o->seed, 10, 0, G_MAXUINT64, &c->seed, NULL))
    return tdm_cli_bad_option(error, _("--seed: “%s” is not a non-negative whole number"), o->seed);
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

typedef struct {
  const char *flag, *path;
} NamedPath;

/* An output must not be an input: compared by device and inode, so "./val/../val/b.st"
 * is val/b.st and a link is its target (the two outputs are one another's in
 * tdm_config_validate). Going on with a run saves it where it was found (--save is
 * --resume): that one pair is the point. */
static gboolean
check_paths(const TdmCliOptions *o, const TdmConfig *c, GError **error)
{
  const NamedPath outputs[] = {{"--save", c->save_path}, {"--save-best", c->save_best_path}};
  const NamedPath inputs[] = {{"--config", o->config}, {"--init", o->init},
                              {"--resume", o->resume}};
  for (gsize i = 0; i < G_N_ELEMENTS(outputs); i++) {
    if (outputs[i].path == NULL)
      continue;
    for (gsize k = 0; k < G_N_ELEMENTS(inputs); k++) {
      if (inputs[k].path == NULL || (i == 0 && g_str_equal(inputs[k].flag, "--resume")))
        continue;
      if (tdm_file_same(outputs[i].path, inputs[k].path))
        return tdm_cli_bad_option(error, _("%s %s: the same file as %s %s, which it would "
                                           "overwrite"), outputs[i].flag, outputs[i].path,
                                  inputs[k].flag, inputs[k].path);
    }
  }
  return TRUE;
}

/* Flags that only mean something for some runs are refused elsewhere, not ignored. */
gboolean
tdm_cli_options_check(const TdmCliOptions *o, const TdmConfig *c, GError **error)
{
  if (!check_paths(o, c, error))
    return FALSE;
  if (o->history != NULL && !o->record)
    return tdm_cli_bad_option(error, _("--history: only with --record (the run history to keep the "
                             "run in)"));
  if (o->image_size != NULL && !tdm_dataset_is_image_folder(c->dataset))
    return tdm_cli_bad_option(error, _("--image-size: only for a folder of images; dataset “%s” is "
                             "not one"), c->dataset);
  return TRUE;
}
