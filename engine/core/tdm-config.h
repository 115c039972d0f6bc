/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config.h — everything that defines a training run, as one plain struct.
 *
 * The CLI fills it from flags, the GUI from its controls and GSettings; the trainer
 * validates it before any work starts, and checkpoints carry it as JSON so a run can
 * be resumed with the same choices. Not the run's state (that is the trainer's).
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include "tdm-device-id.h"
#include "tdm-field.h"
#include "tdm-precision.h"

G_BEGIN_DECLS

/* test_shift's largest value, in pixels: translations are for the few pixels an
 * object sits off centre; more only moves it out of the picture. */
#define TDM_TEST_SHIFT_MAX 8

/* An image folder's sample side (image_size): what a person may choose, and the
 * largest the images choose by themselves when image_size is 0. */
#define TDM_IMAGE_SIZE_MIN 4
#define TDM_IMAGE_SIZE_MAX 512
#define TDM_IMAGE_SIZE_AUTO_MAX 64

typedef enum {
  TDM_OPTIMIZER_SGD,
  TDM_OPTIMIZER_MOMENTUM,
  TDM_OPTIMIZER_ADAM,
  TDM_OPTIMIZER_NESTEROV,  /* PyTorch's SGD with Nesterov momentum (v = μv + g,
                            * p −= lr·(g + μv)) */
} TdmOptimizerKind;

typedef enum {
  TDM_STRATEGY_MAIN,       /* reduce to the main replica, update there, broadcast */
  TDM_STRATEGY_ALLREDUCE,  /* all-reduce the gradients, every replica updates */
} TdmStrategy;

typedef enum {
  TDM_SCHEDULE_CONSTANT,
  TDM_SCHEDULE_STEP,       /* lr · gamma^(epoch / step_epochs) */
  TDM_SCHEDULE_COSINE,     /* cosine decay to 0 over the run (after any warm-up) */
  TDM_SCHEDULE_LINEAR,     /* linear decay to 0 over the run (after any warm-up) */
  TDM_SCHEDULE_ONECYCLE,   /* Smith's one cycle, as PyTorch's OneCycleLR: lr/25 up to lr
                            * over 30 % of the run, then down to lr/25e4 (cosine), the
                            * momentum (or Adam's beta1) the other way, 0.95 ↔ 0.85 */
  TDM_SCHEDULE_PLATEAU,    /* lr times gamma whenever the monitored metric has not
                            * improved for plateau_patience epochs (ReduceLROnPlateau) */
} TdmSchedule;

/* The metric that --early-stop, --save-best and the plateau schedule watch, as Keras
 * and Lightning name them. */
typedef enum {
  TDM_MONITOR_VAL_LOSS,       /*< nick=val_loss >*/
  TDM_MONITOR_VAL_ACCURACY,   /*< nick=val_accuracy >*/
  TDM_MONITOR_TEST_LOSS,      /*< nick=test_loss >*/
  TDM_MONITOR_TEST_ACCURACY,  /*< nick=test_accuracy >*/
} TdmMonitor;

/* Whether the monitored metric improves downwards or upwards; auto: down for a loss,
 * up for an accuracy. */
typedef enum {
  TDM_MONITOR_MODE_AUTO,
  TDM_MONITOR_MODE_MIN,
  TDM_MONITOR_MODE_MAX,
} TdmMonitorMode;

typedef enum {
  TDM_BATCHNORM_PER_REPLICA, /* each replica normalizes with its shard's statistics */
  TDM_BATCHNORM_SYNC,        /* statistics over the whole batch, every replica */
} TdmBatchNorm;

typedef enum {
  TDM_DECAY_ALL,           /* weight decay on every parameter (Chainer's) */
  TDM_DECAY_WEIGHTS,       /* on conv and fc weights only: not biases, not BN */
} TdmDecayScope;

/* An image folder's samples: grey or RGB, or as the images are (--color). The values
 * are the channels. */
typedef enum {
  TDM_COLOR_AUTO = 0,
  TDM_COLOR_GREY = 1,
  TDM_COLOR_RGB = 3,
} TdmColor;

/* What trains when starting from weights (--train): everything, or the last fc alone. */
typedef enum {
  TDM_TRAIN_ALL,
  TDM_TRAIN_HEAD,
} TdmTrainPart;

typedef enum {
  TDM_FLIP_AUTO,           /* on, except for digits (mnist, synthetic), where a mirror
                            * image is another or no digit */
  TDM_FLIP_ON,
  TDM_FLIP_OFF,
} TdmFlipSetting;

typedef struct {
  char *dataset;           /* name or folder, see tdm_dataset_open() */
  char *network;           /* "mlp", "cnn" or a one-line spec */
  TdmDeviceId devices[TDM_MAX_REPLICAS]; /* one per replica: cpu, cpu, cuda:0 … */
  int replicas;            /* how many of `devices` the run has */
  int main_replica;        /* index into devices */
  int batch;               /* global batch size */
  int epochs;
  TdmOptimizerKind optimizer;
  double lr;               /* learning rate; Adam's alpha */
  double momentum;         /* MomentumSGD */
  double beta1, beta2, eps;/* Adam */
  double weight_decay;
  TdmSchedule schedule;
  int step_epochs;         /* TDM_SCHEDULE_STEP */
  double gamma;            /* TDM_SCHEDULE_STEP */
  TdmStrategy strategy;
  TdmPrecision precision;
  guint64 seed;
  char *save_path;         /* checkpoint written at every epoch end and at the end; or NULL */
  int eval_batch;          /* evaluation chunk size */
  size_t bucket_bytes;     /* gradient bucket size for overlapped all-reduce */
  long max_steps;          /* stop after this many steps in all (0: run every epoch);
                            * for tests and benchmarks */
  /* The resnet recipe's settings. JSON readers take these as optional (older checkpoints lack
   * them and mean the defaults). */
  TdmBatchNorm batchnorm;
  TdmDecayScope decay_scope;
  double warmup_epochs;    /* linear warm-up from lr/10 to lr, then the schedule */
  double label_smoothing;  /* in [0, 1) */
  int crop_pad;            /* random crop: pad by this many pixels and shift; 0 off */
  TdmFlipSetting flip;     /* random horizontal flip in training */
  gboolean test_flip;      /* evaluate each test image and its mirror, average logits */
  int test_shift;          /* and its copies shifted this many pixels up, down, left and
                            * right (each mirrored too with test_flip); 0 off */
  int image_size;          /* image folders: side of the samples (0: from the images) */
  int image_channels;      /* image folders: a TdmColor, 1 grey, 3 RGB (0: from the images) */
  /* Exact mode (tdm-exact.h): parameters bit-identical for any number of devices.
   * Optional in JSON (absent: off, the default chunk). */
  gboolean exact;
  int exact_chunk;         /* samples a chunk, the unit of the split (and the group that
                            * batch normalization's statistics run over in exact mode) */
  /* BLAS threads each CPU worker runs: 0 lets a lone worker take every core (its
   * share under mpirun) and gives more workers one each; exact mode runs one. How a
   * run is executed, not what it computes: not saved with it. */
  int cpu_threads;
  /* Validation and checkpoints beyond save_path. JSON holds them only when set, and
   * readers take them as optional. */
  double val_split;        /* fraction of the training set held out (seeded) and
                            * evaluated every epoch; 0: none */
  char *save_best_path;    /* the checkpoint of the best validation accuracy; or NULL */
  int save_every;          /* also save save_path every this many steps; 0: epochs only */
  int early_stop;          /* end after this many epochs without a better monitored
                            * metric; 0: never */
  /* What early stopping, the best checkpoint and the plateau schedule watch. JSON
   * always holds them; absent where early_stop or save_best_path is set, they mean
   * what runs meant before them (validation accuracy, at any gain). */
  TdmMonitor monitor;
  TdmMonitorMode monitor_mode;
  double min_delta;        /* the least change that counts as better (≥ 0) */
  int plateau_patience;    /* TDM_SCHEDULE_PLATEAU: epochs without improvement first */
  /* Gradients: micro-batches of `batch` an optimizer step (one all-reduce, after the
   * last); the global norm clipped to at most clip_grad_norm (0: off). */
  int accumulate;
  double clip_grad_norm;
  /* Augmentation for photos (tdm-augment.h), each off at 0: random resized crop to
   * the sample's size from an area of [crop_scale[0], crop_scale[1]] of the image at
   * an aspect ratio in [crop_ratio[0], crop_ratio[1]]; colour jitter of brightness,
   * contrast and saturation by factors in [1 − j, 1 + j]; random erasing of a
   * rectangle with probability erase. */
  double crop_scale[2];
  double crop_ratio[2];
  double jitter[3];
  double erase;
  /* Starting from weights and normalizing inputs (tdm-finetune.h); JSON readers take
   * these as optional. */
  char *normalize;         /* "none", "dataset", "imagenet" or "M,M,M/S,S,S"; NULL: none */
  char *init_path;         /* a safetensors state_dict to start from, or NULL */
  char **freeze;           /* module-name prefixes kept fixed, or NULL */
  gboolean train_head;     /* only the last fc trains (TDM_TRAIN_HEAD) */
  char **lr_scale;         /* "PREFIX=X" learning-rate factors, or NULL */
} TdmConfig;

/* The defaults (the field table's: Fashion-MNIST, mlp, batch 100, 20 epochs, Adam at
 * its learning rate, tdm-base-recipe.h) on one CPU worker. */
TdmConfig *tdm_config_new (void);
TdmConfig *tdm_config_copy (const TdmConfig *config);
void tdm_config_free (TdmConfig *config);

/* Every option of a run, one row each (tdm-config-fields.c): its flag, JSON key, type,
 * default, range, help and GSettings key. The defaults, the checks, the JSON, the
 * description, the CLI's flags and the schema's test all go by it. */
const TdmField *tdm_config_fields (guint *count);
/* The row called `key` (its JSON key or its flag), or NULL. */
const TdmField *tdm_config_field (const char *key);

/* Parses "cpu:4", "cuda:0,cuda:1", "cpu,cuda:0" into config->devices
 * (tdm_device_list_parse()); a failure leaves them alone. */
gboolean tdm_config_set_devices (TdmConfig *config, const char *list, GError **error);
/* The same from devices already chosen (the window's picker): `count` of them, which
 * must be 1 to TDM_MAX_REPLICAS. */
gboolean tdm_config_set_device_list (TdmConfig *config, const TdmDeviceId *devices,
                                     int count, GError **error);
int tdm_config_replica_count (const TdmConfig *config);
/* The device list as --devices writes it: "cpu,cpu,cuda:1". */
char *tdm_config_devices_text (const TdmConfig *config);

/* Whether random flips are on for a dataset of this name under config->flip. */
gboolean tdm_config_flips (const TdmConfig *config, const char *dataset_name);

/* Checks what can be checked without loading anything: every row's range, then the
 * rules between fields. Messages name the option. */
gboolean tdm_config_validate (const TdmConfig *config, GError **error);
/* The same checks for a configuration read from a file (a checkpoint's metadata):
 * the error is the file's, TDM_ENGINE_ERROR_CHECKPOINT, and names the source and the
 * key ("checkpoint run.safetensors: bad value in its saved configuration: key
 * “batch” = -7: …"), never a flag the person did not give. */
gboolean tdm_config_validate_saved (const TdmConfig *config, const char *source,
                                    GError **error);

/* Whether a global batch of `batch` gives each of `replicas` replicas at least one
 * sample: the one rule that validation and the window's form both apply. */
gboolean tdm_config_batch_splits (int batch, int replicas);

/* The samples of one optimizer step: the batch times the micro-batches accumulated. */
int tdm_config_step_batch (const TdmConfig *config);

/* The batch for a training set of `samples` when the one asked for is larger: the
 * largest power of two that leaves at least four steps an epoch, but one sample for
 * each of `replicas` at least and never more than `samples`. */
int tdm_config_batch_fitting (int samples, int replicas);

/* Names ↔ enums for flags, settings and JSON (the GEnums' nicks, tdm-choice.h);
 * parsers return FALSE on unknown names. The choices the engine names in its own
 * messages and events; any other goes through tdm_choice_name() with its GType
 * (TDM_TYPE_OPTIMIZER_KIND, TDM_TYPE_SCHEDULE, TDM_TYPE_COLOR…), as the field rows do. */
const char *tdm_strategy_name (TdmStrategy strategy);
gboolean tdm_strategy_from_name (const char *name, TdmStrategy *strategy);
const char *tdm_precision_name (TdmPrecision precision);
gboolean tdm_precision_from_name (const char *name, TdmPrecision *precision);
/* A run's precision as its description says it, where it is known what the run computed
 * in: "bf16 (auto)" for auto resolved to bf16; the name of what was asked otherwise. Free
 * it. */
char *tdm_precision_describe_used (TdmPrecision asked, TdmPrecision used);
const char *tdm_monitor_name (TdmMonitor monitor);
gboolean tdm_monitor_from_name (const char *name, TdmMonitor *monitor);

/* Whether the monitored metric is the validation split's (it then needs val_split). */
gboolean tdm_config_monitors_validation (const TdmConfig *config);
/* Whether `value` of the monitored metric is better than `best` by more than
 * min_delta in the monitor's direction; any finite value beats a NaN best. */
gboolean tdm_config_monitor_improves (const TdmConfig *config, double value, double best);
/* What watches the monitored metric, for messages ("--early-stop", "--save-best",
 * "--schedule plateau"): the first that is set, or NULL. */
const char *tdm_config_watcher (const TdmConfig *config);

/* The settings that shape the training, for people and exports: a NULL-terminated
 * array of alternating keys and values ("dataset", "fashion-mnist", "network",
 * "mlp", "devices", "cpu,cpu", …), keys as the JSON and flags name them, numbers in
 * the C locale. Free with g_strfreev(). */
char **tdm_config_describe (const TdmConfig *config);
/* The flags that turn the defaults into `config`: "--epochs 5 --batch 512 …". */
char *tdm_config_to_flags (const TdmConfig *config);

/* JSON round trip, for checkpoints. */
char *tdm_config_to_json (const TdmConfig *config);
TdmConfig *tdm_config_from_json (const char *json, GError **error);
/* The first member of a configuration's JSON object (text) that is none of the keys
 * tdm_config_to_json writes, or NULL: a typo in a hand-written --config file is
 * named, not ignored. Free with g_free. */
char *tdm_config_json_unknown_key (const char *json);

/* The largest configuration file read (tandem-train --config): one is a few KB, a
 * network of 4,096 layers included. */
#define TDM_CONFIG_MAX_BYTES (1 << 20)

/* The learning rate at a fractional epoch under the configured schedule (the
 * plateau schedule's reductions are the trainer's state: times those). */
double tdm_config_lr_at (const TdmConfig *config, double epoch);
/* The momentum (Adam's beta1) the one-cycle schedule sets at a fractional epoch; NaN
 * under the other schedules, which leave the optimizer's own. */
double tdm_config_momentum_at (const TdmConfig *config, double epoch);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmConfig, tdm_config_free)

/* The training controls (tdm-config-controls.c): the rules between them and other
 * fields, part of tdm_config_validate(); a file from before --monitor (no "monitor"
 * member) read as it was meant: validation accuracy at any gain. */
gboolean tdm_controls_config_validate (const TdmConfig *config, GError **error);
void tdm_controls_config_from_json (JsonObject *object, TdmConfig *config);

G_END_DECLS
