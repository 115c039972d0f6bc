/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-help.c — the summary and the notes of tandem-train's --help
 * (tdm-cli-help.h). */
#include "tdm-build-config.h"
#include <glib/gi18n.h>
#include "tdm-cli-help.h"

#include "tdm-dataset-folder.h"
#include "tdm-exact.h"
#include "tdm-network.h"
#include "tdm-network-catalogue.h"

static const char *const summary = N_(
  "Trains a neural network with data parallelism: each batch is split across the\n"
  "devices, gradients are combined, and every device keeps the same parameters.\n"
  "On a terminal a live line shows progress; in a log (stdout not a terminal, or\n"
  "under mpirun) a header says what runs where, and plain lines follow at each tenth\n"
  "of an epoch and every 10 s, with each checkpoint saved; each epoch ends with a line\n"
  "of train (validation) and test figures. --json prints every event as one JSON\n"
  "object per line instead.");

/* One %s: the folder of the default dataset. */
static const char *const run_notes = N_(
  "Datasets: fashion-mnist (the default, in %s),\n"
  "mnist, synthetic (built in, needs no files), or a folder of IDX files, of\n"
  "CIFAR-10 batches, or of class folders of PNG/JPEG images (FOLDER/CLASS/IMAGE, or\n"
  "FOLDER/train/CLASS/… and FOLDER/test/CLASS/…; --image-size and --color choose\n"
  "the samples; the decoded set is cached in ~/.cache/tandem/images).\n"
  "Networks: a built-in one (listed below, with the recipe it brings; flags given\n"
  "override any of it) or a spec such as\n"
  "  conv32k3p1,relu,pool2,fc128,relu,fc10\n"
  "  conv32k3p1,bn,relu,res(conv32k3p1,bn,relu,conv32k3p1,bn),relu,gap,fc10\n"
  "(the grammar of specs is below).\n"
  "Starting from weights: --init FILE loads the tensors of a state_dict whose names\n"
  "and shapes match, from a .pth file of torch.save (read without running any of it)\n"
  "or safetensors (torchvision's for resnet18/34/50; --init torchvision takes the file\n"
  "torchvision downloaded to ~/.cache/torch/hub/checkpoints; a head of another class\n"
  "count starts afresh); --freeze and --train head keep modules fixed (their BN in\n"
  "inference mode), --lr-scale slows some down, --normalize imagenet normalizes the\n"
  "inputs as torchvision's models expect. tandem-train classify --network N --init\n"
  "FILE IMAGE classifies with such weights as they are, and tandem-train export\n"
  "--network N --init FILE MODEL.onnx writes them.\n"
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
  "Devices: cpu, cpu:N (N CPU workers), cuda:N (GPU N; cuda alone is cuda:0); a GPU\n"
  "may be named twice.\n"
  "Strategies: allreduce all-reduces the gradients and every device updates (as\n"
  "ChainerMN and PyTorch DDP); main reduces them onto the main device, updates\n"
  "there and broadcasts the parameters (as Chainer's ParallelUpdater).\n");

static const char *const examples = N_(
  "Examples:\n"
  "  tandem-train --dataset synthetic --epochs 1\n"
  "  tandem-train --devices cpu:4 --batch 256 --save run.safetensors\n"
  "  tandem-train --devices cuda:0,cuda:1 --network cnn --strategy main --main 1\n"
  "  tandem-train --resume run.safetensors --epochs 40\n"
  "  tandem-train --dataset synthetic --epochs 1 --json | jq .type\n"
  "  tandem-train --dataset ~/photos --image-size 64 --color rgb --save photos.st\n"
  "  tandem-train classify --resume photos.st cat.jpg dog.png ~/more-photos\n"
  "  tandem-train export --resume photos.st photos.onnx\n"
  "  tandem-train scaling strong --devices cpu:4 --record\n"
  "  tandem-train compare --devices cpu:2 --network mlp --compare-steps 30\n"
  "  tandem-train compare-strategies --devices cuda:0,cuda:1 --record\n"
  "  tandem-train --val-split 0.1 --early-stop 5 --save-best best.st\n"
  "  tandem-train --batch 64 --accumulate 8 --clip-grad-norm 1\n"
  "  tandem-train lr-find --network cnn > lr.csv\n"
  "\n"
  "Validation: --val-split 0.1 holds out a tenth of the training set (chosen by the\n"
  "seed) and evaluates it every epoch; --save-best FILE keeps the checkpoint of the\n"
  "best epoch by --monitor (val_loss unless told), --early-stop P ends a run after P\n"
  "epochs without a better one, --schedule plateau lowers the rate after\n"
  "--plateau-patience. The test set stays the final measure.\n"
  "\n"
  "Gradients: --accumulate N trains N micro-batches of --batch a step and combines\n"
  "the gradients once (the others' communication is skipped, as DDP's no_sync);\n"
  "--clip-grad-norm X scales the combined gradient down to norm X. tandem-train\n"
  "lr-find (or --lr-find) runs Smith's range test instead of training and suggests\n"
  "a --lr.\n"
  "\n"
  "Comparisons: tandem-train compare trains the settings in exact mode on every\n"
  "device, then on the main device alone, and says whether the parameters came out\n"
  "the same; compare-strategies trains them with main, then with allreduce, and\n"
  "prints each one's mean step and the communication hidden under backward. Both\n"
  "take --compare-steps steps a run; --record keeps the runs, as the window does.\n"
  "\n"
  "Runs: --record keeps a run in the history that the window lists;\n"
  "  tandem-train runs                       lists them (--json: one object a line)\n"
  "  tandem-train runs show ID               its settings and epochs\n"
  "  tandem-train runs export ID > run.csv   its metrics, as the window exports them\n"
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
  "every rank of the job.\n");

char *
tdm_cli_help_summary(const char *command_summary)
{
  if (command_summary != NULL)
    return g_strdup(_(command_summary));
  return g_strdup(_(summary));
}

/* Appends `paragraph` to text in lines of at most `width` characters, broken at
 * spaces (a word longer than the width keeps its own line), each after `indent`. */
static void
append_wrapped(GString *text, const char *paragraph, glong width, const char *indent)
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
    if (column == 0) {
      g_string_append(text, indent);
      column = g_utf8_strlen(indent, -1);
    }
    g_string_append(text, words[i]);
    column += length;
  }
  g_string_append_c(text, '\n');
}

/* The built-in networks from the engine's catalogue, each with the flags its recipe
 * sets: the recipe is the catalogue's code, read back through the field table. */
static void
append_networks(GString *text)
{
  g_string_append(text,
                  _("\nBuilt-in networks (their last fc follows the dataset's classes):\n"));
  int presets = 0;
  const TdmNetworkPreset *preset = tdm_network_presets(&presets);
  for (int i = 0; i < presets; i++) {
    g_string_append_printf(text, "  %-10s %s\n", preset[i].name, preset[i].summary);
    g_autoptr(TdmConfig) recipe = tdm_config_new();
    if (!tdm_config_apply_preset(recipe, preset[i].name))
      continue;
    g_autofree char *flags = tdm_config_to_flags(recipe);
    /* TRANSLATORS: a built-in network's recipe, the flags it sets: "recipe: --epochs 5
     * --batch 512 …" */
    g_autofree char *line = g_strdup_printf(_("recipe: %s"), flags);
    append_wrapped(text, line, 80, "             ");
  }
}

char *
tdm_cli_help_description(const char *command, const char *commands,
                         const TdmConfig *defaults)
{
  static const char *const run_commands[] = {"train", "scaling", "compare",
                                             "compare-strategies", "lr-find", NULL};
  if (command != NULL && !g_strv_contains(run_commands, command))
    return NULL;
  GString *text = g_string_new(NULL);
  g_string_append_printf(text, _(run_notes), TDM_FASHION_MNIST_DIR);
  if (commands != NULL && commands[0] != '\0') {
    g_string_append(text, _("\nCommands (tandem-train COMMAND --help says more of each):\n"));
    g_string_append(text, commands);
  }
  g_string_append_c(text, '\n');
  g_string_append(text, _(examples));
  append_networks(text);
  g_string_append(text, _("\nNetwork specs (--network):\n"));
  g_string_append(text, tdm_network_spec_help());
  g_string_append_c(text, '\n');
  /* What exact mode guarantees, in the engine's words (the window shows them too). */
  g_string_append_printf(text,
                         _("\nExact mode (--exact; --exact-chunk N, %d by default):\n"),
                         defaults->exact_chunk);
  g_autofree char *exact = tdm_exact_describe(defaults->exact_chunk);
  append_wrapped(text, exact, 80, "");
  return g_string_free(text, FALSE);
}
