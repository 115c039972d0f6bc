/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config-fields.c — every option of a run, one row each (tdm-field.h says what a
 * row holds). tdm_config_new() starts from the defaults here, tdm_config_validate()
 * checks the ranges here, the JSON of checkpoints and run files, the description that
 * exports carry, tandem-train's flags and their help, and the GSettings schema's test
 * all read the rows. A new option: a field in TdmConfig, a row here (in the order the
 * description lists them), and its meaning where it acts.
 *
 * The defaults are the base recipe, Chainer's MNIST example (Fashion-MNIST, mlp,
 * batch 100, 20 epochs, Adam); the learning rate is each optimizer's own
 * (tdm-base-recipe.h). The built-in networks' recipes are changes over them
 * (tdm-network-catalogue.c).
 */
#include "tdm-config.h"
#include "tdm-base-recipe.h"
#include "tdm-choice.h"
#include "tdm-i18n.h"

#include <math.h>
#include <stddef.h>

#define AT(field) offsetof(TdmConfig, field)

/* --lr's default: each optimizer's starting rate. */
static char *
lr_default(void)
{
  GString *rates = g_string_new(NULL);
  char number[G_ASCII_DTOSTR_BUF_SIZE];
  for (guint i = 0; i < tdm_choice_count(TDM_TYPE_OPTIMIZER_KIND); i++)
    g_string_append_printf(rates, "%s%s %s", i ? ", " : "",
                           tdm_choice_name(TDM_TYPE_OPTIMIZER_KIND, (int)i),
                           g_ascii_formatd(number, sizeof number, "%g",
                                           tdm_base_recipe_lr((TdmOptimizerKind)i)));
  return g_string_free(rates, FALSE);
}

static char *
image_size_default(void)
{
  return g_strdup_printf(_("from the images, at most %d"), TDM_IMAGE_SIZE_AUTO_MAX);
}

static char *
describe_main(gconstpointer target)
{
  const TdmConfig *c = target;
  if (c->main_replica < 0 || c->main_replica >= c->replicas)
    return g_strdup_printf("replica %d", c->main_replica);
  char name[TDM_DEVICE_NAME_MAX];
  return g_strdup_printf("%s (replica %d)", tdm_device_id_name(c->devices[c->main_replica], name),
                         c->main_replica);
}

static char *
describe_exact(gconstpointer target)
{
  return g_strdup_printf("chunks of %d", ((const TdmConfig *)target)->exact_chunk);
}

static gboolean
uses_momentum(gconstpointer target)
{
  const TdmConfig *c = target;
  return c->optimizer == TDM_OPTIMIZER_MOMENTUM || c->optimizer == TDM_OPTIMIZER_NESTEROV;
}

static gboolean
uses_adam(gconstpointer target)
{
  return ((const TdmConfig *)target)->optimizer == TDM_OPTIMIZER_ADAM;
}

static gboolean
decays(gconstpointer target)
{
  return ((const TdmConfig *)target)->weight_decay > 0;
}

static gboolean
steps_schedule(gconstpointer target)
{
  return ((const TdmConfig *)target)->schedule == TDM_SCHEDULE_STEP;
}

static gboolean
multiplies_rate(gconstpointer target)
{
  TdmSchedule schedule = ((const TdmConfig *)target)->schedule;
  return schedule == TDM_SCHEDULE_STEP || schedule == TDM_SCHEDULE_PLATEAU;
}

static gboolean
plateau_schedule(gconstpointer target)
{
  return ((const TdmConfig *)target)->schedule == TDM_SCHEDULE_PLATEAU;
}

/* Whether anything watches the monitored metric (tdm_config_watcher()). */
static gboolean
watched(gconstpointer target)
{
  return tdm_config_watcher(target) != NULL;
}

static gboolean
resized_crop(gconstpointer target)
{
  return ((const TdmConfig *)target)->crop_scale[0] > 0;
}

/* Shorthands for the rows' flags. */
#define SHOWN TDM_FIELD_DESCRIBE
#define SHOWN_SET TDM_FIELD_DESCRIBE_WHEN_SET
#define NEEDED TDM_FIELD_JSON_REQUIRED
#define WHEN_SET TDM_FIELD_JSON_WHEN_SET
#define FILE_NAME TDM_FIELD_FILE

static const TdmField fields[] = {
  {.key = "dataset", .flag = "dataset", .type = TDM_FIELD_STRING, .offset = AT(dataset),
   .fallback = "fashion-mnist", .flags = TDM_FIELD_REQUIRED | FILE_NAME | NEEDED | SHOWN,
   .check = N_("no dataset given (a name such as fashion-mnist, mnist, synthetic, or a "
               "folder)"),
   .help = N_("Name or folder (default %s)"), .arg = "NAME|FOLDER", .settings = "dataset"},
  {.key = "network", .flag = "network", .type = TDM_FIELD_STRING, .offset = AT(network),
   .fallback = "mlp", .flags = TDM_FIELD_REQUIRED | NEEDED | SHOWN,
   .check = N_("no network given (mlp, cnn or a spec such as “fc100,relu,fc10”)"),
   .help = N_("A built-in network (--help lists them) or a layer spec (default %s)"),
   .arg = "NAME|SPEC",
   .settings = "network"},
  {.key = "devices", .flag = "devices", .type = TDM_FIELD_DEVICES, .offset = AT(devices),
   .count_offset = AT(replicas), .fallback = "cpu", .flags = NEEDED | SHOWN,
   .help = N_("Devices, a replica each: cpu:4, cuda:0,cuda:1 (default %s)"), .arg = "LIST"},
  {.key = "main_replica", .flag = "main", .type = TDM_FIELD_INT, .offset = AT(main_replica),
   .flags = NEEDED | SHOWN, .label = "main", .describe = describe_main,
   .help = N_("Which of --devices evaluates and saves (default %s)"), .arg = "N"},
  {.key = "strategy", .flag = "strategy", .type = TDM_FIELD_CHOICE, .offset = AT(strategy),
   .choices = tdm_strategy_get_type, .fallback = "allreduce", .flags = NEEDED | SHOWN,
   .help = N_("%s; see below"), .arg = "NAME", .settings = "strategy"},
  {.key = "batch", .flag = "batch", .type = TDM_FIELD_INT, .offset = AT(batch),
   .fallback = "100", .min = 1, .max = INFINITY, .flags = NEEDED | SHOWN,
   .check = N_("the batch size must be at least %s"),
   .help = N_("Global batch, split across devices (default %s)"), .arg = "N",
   .settings = "batch"},
  {.key = "epochs", .flag = "epochs", .type = TDM_FIELD_INT, .offset = AT(epochs),
   .fallback = "20", .min = 1, .max = INFINITY, .flags = NEEDED | SHOWN,
   .check = N_("train for at least %s epoch"), .help = N_("Epochs to train (default %s)"),
   .arg = "N", .settings = "epochs"},
  {.key = "max_steps", .flag = "max-steps", .type = TDM_FIELD_LONG, .offset = AT(max_steps),
   .min = 0, .max = INFINITY, .flags = NEEDED | SHOWN_SET,
   .check = N_("give 0 (no limit) or a positive number of steps"),
   .help = N_("Stop after N steps in all (default %s: no limit)"), .arg = "N"},
  {.key = "val_split", .flag = "val-split", .type = TDM_FIELD_DOUBLE, .offset = AT(val_split),
   .min = 0, .max = 0.9, .flags = WHEN_SET | SHOWN_SET,
   .check = N_("give the fraction of the training set to hold out, from %s (none) to %s"),
   .help = N_("Hold out this fraction of the training set (seeded) and evaluate it every "
              "epoch (default %s: none)"), .arg = "F"},
  {.key = "early_stop", .flag = "early-stop", .type = TDM_FIELD_INT, .offset = AT(early_stop),
   .min = 0, .max = INFINITY, .flags = WHEN_SET | SHOWN_SET,
   .check = N_("give 0 (never) or a number of epochs"),
   .help = N_("End after P epochs without a better --monitor metric (default %s: never)"),
   .arg = "P"},
  /* What early stopping, the best checkpoint and the plateau schedule watch. Always
   * in the JSON: a file with --early-stop or --save-best but no monitor is from before
   * it, and meant validation accuracy at any gain (tdm_controls_config_from_json()). */
  {.key = "monitor", .flag = "monitor", .type = TDM_FIELD_CHOICE, .offset = AT(monitor),
   .choices = tdm_monitor_get_type, .fallback = "val_loss", .flags = SHOWN, .shown = watched,
   .help = N_("What --early-stop, --save-best and --schedule plateau watch: %s (val_…: "
              "needs --val-split)"), .arg = "METRIC"},
  {.key = "monitor_mode", .flag = "monitor-mode", .type = TDM_FIELD_CHOICE,
   .offset = AT(monitor_mode), .choices = tdm_monitor_mode_get_type, .fallback = "auto",
   .flags = SHOWN_SET, .shown = watched,
   .help = N_("Whether the --monitor metric improves downwards or upwards: %s (auto: min for "
              "a loss, max for an accuracy)"), .arg = "MODE"},
  {.key = "min_delta", .flag = "min-delta", .type = TDM_FIELD_DOUBLE, .offset = AT(min_delta),
   .min = 0, .max = INFINITY, .flags = SHOWN_SET, .shown = watched,
   .check = N_("give 0 or a positive change"),
   .help = N_("The least change of the --monitor metric that counts as better (default %s)"),
   .arg = "X"},
  {.key = "optimizer", .flag = "optimizer", .type = TDM_FIELD_CHOICE, .offset = AT(optimizer),
   .choices = tdm_optimizer_kind_get_type, .fallback = "adam", .flags = NEEDED | SHOWN,
   .help = "%s", .arg = "NAME", .settings = "optimizer"},
  {.key = "lr", .flag = "lr", .type = TDM_FIELD_DOUBLE, .offset = AT(lr), .min = 0,
   .max = INFINITY, .flags = TDM_FIELD_MIN_OPEN | NEEDED | SHOWN,
   .check = N_("the learning rate must be a positive number"),
   .help = N_("Learning rate; Adam's alpha (default by optimizer: %s)"), .arg = "X",
   .default_text = lr_default, .settings = "learning-rate"},
  {.key = "momentum", .flag = "momentum", .type = TDM_FIELD_DOUBLE, .offset = AT(momentum),
   .fallback = "0.9", .min = 0, .max = 1, .flags = TDM_FIELD_MAX_OPEN | NEEDED | SHOWN,
   .check = N_("must be at least %s and less than %s"), .shown = uses_momentum,
   .help = N_("Momentum of --optimizer momentum (default %s)"), .arg = "X"},
  {.key = "beta1", .flag = "beta1", .type = TDM_FIELD_DOUBLE, .offset = AT(beta1),
   .fallback = "0.9", .min = 0, .max = 1, .flags = TDM_FIELD_MAX_OPEN | NEEDED | SHOWN,
   .check = N_("Adam's beta1 must be at least %s and less than %s"), .shown = uses_adam,
   .help = N_("Adam's beta1 (default %s)"), .arg = "X"},
  {.key = "beta2", .flag = "beta2", .type = TDM_FIELD_DOUBLE, .offset = AT(beta2),
   .fallback = "0.999", .min = 0, .max = 1, .flags = TDM_FIELD_MAX_OPEN | NEEDED | SHOWN,
   .check = N_("Adam's beta2 must be at least %s and less than %s"), .shown = uses_adam,
   .help = N_("Adam's beta2 (default %s)"), .arg = "X"},
  {.key = "eps", .flag = "eps", .type = TDM_FIELD_DOUBLE, .offset = AT(eps),
   .fallback = "1e-8", .min = 0, .max = INFINITY,
   .flags = TDM_FIELD_MIN_OPEN | NEEDED | SHOWN,
   .check = N_("Adam's epsilon must be a positive number"), .shown = uses_adam,
   .help = N_("Adam's epsilon (default %s)"), .arg = "X"},
  {.key = "weight_decay", .flag = "weight-decay", .type = TDM_FIELD_DOUBLE,
   .offset = AT(weight_decay), .min = 0, .max = INFINITY, .flags = NEEDED | SHOWN,
   .check = N_("must be 0 or a positive number"), .help = N_("Weight decay (default %s)"),
   .arg = "X"},
  {.key = "weight_decay_on", .flag = "weight-decay-on", .type = TDM_FIELD_CHOICE,
   .offset = AT(decay_scope), .choices = tdm_decay_scope_get_type, .fallback = "all",
   .flags = SHOWN, .shown = decays,
   .help = N_("What weight decay applies to: %s (weights: not biases, not BN)"),
   .arg = "WHAT"},
  {.key = "schedule", .flag = "schedule", .type = TDM_FIELD_CHOICE, .offset = AT(schedule),
   .choices = tdm_schedule_get_type, .fallback = "constant", .flags = NEEDED | SHOWN,
   .help = N_("Learning rate schedule: %s"), .arg = "NAME"},
  {.key = "step_epochs", .flag = "step-epochs", .type = TDM_FIELD_INT,
   .offset = AT(step_epochs), .fallback = "10", .min = 1, .max = INFINITY,
   .flags = NEEDED | SHOWN, .shown = steps_schedule,
   .check = N_("the step schedule needs at least %s epoch between steps"),
   .help = N_("Epochs between steps of --schedule step (default %s)"), .arg = "N"},
  {.key = "gamma", .flag = "gamma", .type = TDM_FIELD_DOUBLE, .offset = AT(gamma),
   .fallback = "0.1", .min = 0, .max = INFINITY,
   .flags = TDM_FIELD_MIN_OPEN | NEEDED | SHOWN, .shown = multiplies_rate,
   .check = N_("the step schedule's factor must be a positive number"),
   .help = N_("Factor at each step of --schedule step or plateau (default %s)"), .arg = "X"},
  {.key = "plateau_patience", .flag = "plateau-patience", .type = TDM_FIELD_INT,
   .offset = AT(plateau_patience), .fallback = "10", .min = 0, .max = 10000,
   .flags = WHEN_SET | SHOWN, .shown = plateau_schedule, .check = N_("give %s to %s epochs"),
   .help = N_("--schedule plateau: epochs without a better --monitor metric before the rate "
              "is multiplied by --gamma (default %s)"), .arg = "N"},
  {.key = "warmup_epochs", .flag = "warmup", .type = TDM_FIELD_DOUBLE,
   .offset = AT(warmup_epochs), .min = 0, .max = INFINITY, .flags = SHOWN,
   .check = N_("give 0 or a number of epochs up to --epochs"),
   .help = N_("Epochs of linear learning-rate warm-up before the schedule (default %s)"),
   .arg = "E"},
  {.key = "label_smoothing", .flag = "label-smoothing", .type = TDM_FIELD_DOUBLE,
   .offset = AT(label_smoothing), .min = 0, .max = 1, .flags = TDM_FIELD_MAX_OPEN | SHOWN,
   .check = N_("must be at least %s and less than %s"),
   .help = N_("Label smoothing of the training loss, in [0, 1) (default %s)"), .arg = "X"},
  {.key = "crop_pad", .flag = "crop", .type = TDM_FIELD_INT, .offset = AT(crop_pad),
   .min = 0, .max = 64, .flags = SHOWN, .label = "crop",
   .check = N_("give the padding in pixels, %s (off) to %s"),
   .help = N_("Random crop: shift images by up to P pixels, zero padded (default %s, off)"),
   .arg = "P"},
  {.key = "flip", .flag = "flip", .type = TDM_FIELD_CHOICE, .offset = AT(flip),
   .choices = tdm_flip_setting_get_type, .fallback = "off", .flags = SHOWN,
   .help = N_("Random horizontal flip in training: %s"), .arg = "WHEN"},
  /* Photo augmentation (tdm-augment.h), each off at 0. */
  {.key = "crop_scale", .flag = "resized-crop", .type = TDM_FIELD_NUMBERS,
   .offset = AT(crop_scale), .count = 2, .min = 0, .max = 1,
   .flags = TDM_FIELD_MIN_OPEN | TDM_FIELD_ZERO_OFF | WHEN_SET | SHOWN_SET,
   .label = "resized_crop",
   .check = N_("give the smallest and largest share of the image's area, 0 < A ≤ B ≤ 1, "
               "e.g. 0.08,1"),
   .help = N_("Random resized crop: a part of A to B of each image's area, resized to the "
              "sample (e.g. 0.08,1; default %s: off)"), .arg = "A,B"},
  {.key = "crop_ratio", .flag = "resized-crop-ratio", .type = TDM_FIELD_NUMBERS,
   .offset = AT(crop_ratio), .count = 2, .fallback = "0.75,1.3333333333333333", .min = 0,
   .max = 100, .flags = TDM_FIELD_MIN_OPEN | WHEN_SET | SHOWN, .shown = resized_crop,
   .label = "ratio",
   .check = N_("give the narrowest and widest aspect ratio, 0 < A ≤ B ≤ 100, e.g. 0.75,1.333"),
   .help = N_("With --resized-crop: the crop's aspect ratios, width over height (default "
              "%s)"), .arg = "A,B"},
  {.key = "jitter", .flag = "jitter", .type = TDM_FIELD_NUMBERS, .offset = AT(jitter),
   .count = 3, .min = 0, .max = 1,
   .flags = TDM_FIELD_MAX_OPEN | TDM_FIELD_ONE_FOR_ALL | WHEN_SET | SHOWN_SET,
   .check = N_("give brightness, contrast and saturation, each at least 0 and less than 1"),
   .help = N_("Colour jitter: brightness, contrast and saturation each times 1 ± X (one X for "
              "all three, e.g. 0.4; default %s: off)"), .arg = "B,C,S"},
  {.key = "erase", .flag = "erase", .type = TDM_FIELD_DOUBLE, .offset = AT(erase), .min = 0,
   .max = 1, .flags = WHEN_SET | SHOWN_SET,
   .check = N_("give the probability of erasing a rectangle, %s to %s"),
   .help = N_("Random erasing: with probability P, a rectangle of 2–33 %% of the image set "
              "to 0 (default %s: off)"), .arg = "P"},
  /* Gradients: micro-batches an optimizer step, and clipping after they are combined. */
  {.key = "accumulate", .flag = "accumulate", .type = TDM_FIELD_INT, .offset = AT(accumulate),
   .fallback = "1", .min = 1, .max = 4096, .flags = WHEN_SET | SHOWN_SET,
   .check = N_("give the micro-batches an optimizer step, %s to %s"),
   .help = N_("Micro-batches of --batch an optimizer step, gradients combined once, after "
              "the last (DDP's no_sync; default %s)"), .arg = "N"},
  {.key = "clip_grad_norm", .flag = "clip-grad-norm", .type = TDM_FIELD_DOUBLE,
   .offset = AT(clip_grad_norm), .min = 0, .max = INFINITY, .flags = WHEN_SET | SHOWN_SET,
   .check = N_("give 0 (off) or the largest norm, a positive number"),
   .help = N_("Scale the gradient down to this global norm where it is larger, after "
              "combining (default %s: off)"), .arg = "X"},
  {.key = "batchnorm", .flag = "batchnorm", .type = TDM_FIELD_CHOICE, .offset = AT(batchnorm),
   .choices = tdm_batch_norm_get_type, .fallback = "per-replica", .flags = SHOWN,
   .help = N_("Batch norm across devices: %s"), .arg = "MODE", .settings = "batchnorm"},
  {.key = "exact", .flag = "exact", .type = TDM_FIELD_BOOL, .offset = AT(exact),
   .flags = SHOWN_SET, .describe = describe_exact,
   .help = N_("Exact mode: parameters bit-identical for any number of devices (see below)")},
  {.key = "precision", .flag = "precision", .type = TDM_FIELD_CHOICE, .offset = AT(precision),
   .choices = tdm_precision_get_type, .fallback = "auto", .flags = NEEDED | SHOWN,
   .help = N_("%s; auto: bf16 where every device is a GPU with bfloat16 tensor cores, else "
              "fp32; bf16: convolutions on bfloat16 operands, fp32 weights"), .arg = "NAME",
   .settings = "precision"},
  {.key = "seed", .flag = "seed", .type = TDM_FIELD_SEED, .offset = AT(seed),
   .flags = NEEDED | SHOWN,
   .help = N_("Seed of initial weights and shuffling (default %s)"), .arg = "N"},
  /* Not in the description: they do not change what is trained. */
  {.key = "save_path", .flag = "save", .type = TDM_FIELD_STRING, .offset = AT(save_path),
   .flags = FILE_NAME | NEEDED | TDM_FIELD_JSON_NULLABLE,
   .check = N_("the file name is empty"),
   .help = N_("Save a safetensors checkpoint every epoch"), .arg = "FILE"},
  {.key = "eval_batch", .flag = "eval-batch", .type = TDM_FIELD_INT, .offset = AT(eval_batch),
   .fallback = "1000", .min = 1, .max = INFINITY, .flags = NEEDED,
   .check = N_("the evaluation batch must be at least %s"),
   .help = N_("Samples per evaluation chunk (default %s)"), .arg = "N"},
  {.key = "bucket_bytes", .type = TDM_FIELD_SIZE, .offset = AT(bucket_bytes),
   .fallback = "4194304", .min = sizeof(float), .max = INFINITY, .flags = NEEDED,
   .check = N_("a gradient bucket must hold at least one value")},
  {.key = "test_flip", .flag = "test-flip", .type = TDM_FIELD_BOOL, .offset = AT(test_flip),
   .no_flag = "no-test-flip",
   .no_help = N_("Evaluate each test image alone (resnet's recipe has --test-flip)"),
   .help = N_("Evaluate each test image and its mirror and average the two")},
  {.key = "test_shift", .flag = "test-shift", .type = TDM_FIELD_INT, .offset = AT(test_shift),
   .min = 0, .max = TDM_TEST_SHIFT_MAX, .check = N_("give the shift in pixels, %s (off) to %s"),
   .help = N_("Also evaluate each test image shifted P pixels each way and average "
              "(default %s, off)"), .arg = "P"},
  {.key = "image_size", .flag = "image-size", .type = TDM_FIELD_INT, .offset = AT(image_size),
   .min = TDM_IMAGE_SIZE_MIN, .max = TDM_IMAGE_SIZE_MAX, .flags = TDM_FIELD_ZERO_OFF,
   .check = N_("give 0 (chosen from the images) or a side from %s to %s pixels"),
   .help = N_("Image folders: side of the square samples (default: %s)"), .arg = "N",
   .default_text = image_size_default},
  {.key = "image_channels", .flag = "color", .type = TDM_FIELD_INT,
   .offset = AT(image_channels), .choices = tdm_color_get_type, .fallback = "auto",
   .flags = TDM_FIELD_JSON_NUMBER,
   .help = N_("Image folders: %s (auto: grey when every image is)"), .arg = "C"},
  {.key = "exact_chunk", .flag = "exact-chunk", .type = TDM_FIELD_INT,
   .offset = AT(exact_chunk), .fallback = "16", .min = 1, .max = 4096,
   .check = N_("give the samples a chunk, %s to %s"),
   .help = N_("With --exact: samples a chunk, the unit of the split and of BN's "
              "statistics (default %s)"), .arg = "N"},
  {.key = "save_best_path", .flag = "save-best", .type = TDM_FIELD_STRING,
   .offset = AT(save_best_path), .flags = FILE_NAME | WHEN_SET | TDM_FIELD_JSON_NULLABLE,
   .check = N_("the file name is empty"),
   .help = N_("Keep the checkpoint of the epoch with the best --monitor metric"),
   .arg = "FILE"},
  {.key = "save_every", .flag = "save-every", .type = TDM_FIELD_INT, .offset = AT(save_every),
   .min = 0, .max = INFINITY, .flags = WHEN_SET,
   .check = N_("give 0 (every epoch only) or a number of steps"),
   .help = N_("With --save: also save every N steps (default %s: at epoch ends only)"),
   .arg = "N"},
  /* Starting from weights (tdm-finetune.h). */
  {.key = "normalize", .flag = "normalize", .type = TDM_FIELD_STRING, .offset = AT(normalize),
   .flags = TDM_FIELD_NULL_NONE,
   .help = N_("Per-channel input normalization: dataset, imagenet, none or M,M,M/S,S,S "
              "(default %s)"), .arg = "HOW"},
  {.key = "init", .flag = "init", .type = TDM_FIELD_STRING, .offset = AT(init_path),
   .flags = FILE_NAME | WHEN_SET,
   .help = N_("Start from the weights of a state_dict: a .pth file of torch.save or "
              "safetensors (PyTorch's names and shapes); torchvision: its download for "
              "resnet18/34/50"), .arg = "FILE", .settings = "init-weights"},
  {.key = "freeze", .flag = "freeze", .type = TDM_FIELD_LIST, .offset = AT(freeze),
   .help = N_("Keep these modules fixed (names as in PyTorch, e.g. conv1,bn1,layer1; "
              "repeatable)"), .arg = "PREFIX"},
  {.key = "train_head", .flag = "train", .type = TDM_FIELD_BOOL, .offset = AT(train_head),
   .choices = tdm_train_part_get_type,
   .help = N_("What trains: %s (head: the last fc alone, everything before it frozen)"),
   .arg = "WHAT"},
  {.key = "lr_scale", .flag = "lr-scale", .type = TDM_FIELD_LIST, .offset = AT(lr_scale),
   .help = N_("Multiply the learning rate of a module's parameters by X (repeatable)"),
   .arg = "PREFIX=X"},
  /* BLAS threads each CPU worker runs: 0 lets a lone worker take every core (its share
   * under mpirun) and gives more workers one each; exact mode runs one. How a run is
   * executed, not what it computes: not saved with it. */
  {.key = "cpu_threads", .type = TDM_FIELD_INT, .offset = AT(cpu_threads), .min = 1,
   .max = 1024, .flags = TDM_FIELD_ZERO_OFF | TDM_FIELD_NOT_SAVED,
   .check = N_("give 0 (automatic) or %s to %s")},
};

const TdmField *
tdm_config_fields(guint *count)
{
  g_return_val_if_fail(count != NULL, NULL);
  *count = G_N_ELEMENTS(fields);
  return fields;
}

const TdmField *
tdm_config_field(const char *key)
{
  return tdm_fields_find(fields, G_N_ELEMENTS(fields), key);
}
