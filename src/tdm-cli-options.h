/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-options.h — tandem-train's flags: the GOption table with its help, and the
 * conversion of the flags given onto a TdmConfig with a message that names the flag.
 * Not what the program does with them (tandem-train.c) nor the engine's own checks
 * of the finished configuration (tdm_config_validate).
 */
#pragma once

#include <glib.h>

#include "tdm-config.h"

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
  char *config, *show_run, *export_run, *tensorboard, *export_tensorboard;
  gboolean print_config, list_runs;
  char *normalize, *init, *train, **freeze, **lr_scale;
  char *monitor, *monitor_mode, *min_delta, *plateau_patience;
  char *accumulate, *clip_grad_norm;
  char *resized_crop, *resized_crop_ratio, *jitter, *erase;
  gboolean lr_find;
  char *lr_find_range, *lr_find_steps;
} TdmCliOptions;

/* After GOption refused an unknown option: the message for the first unknown
 * "--name" in argv (as it was before parsing), with the nearest known option when one
 * is near ("did you mean --epochs?"); NULL when argv holds none. */
char *tdm_cli_unknown_option(char **argv);

/* Frees what GOption filled in; the struct itself is the caller's. */
void tdm_cli_options_clear(TdmCliOptions *o);

/* The program's option context, its entries writing into `o`, its help naming the
 * engine's defaults and the built-in networks. Free with g_option_context_free. */
GOptionContext *tdm_cli_options_context(TdmCliOptions *o);

/* Applies the flags that were given over `c` (the defaults, a --config file or a
 * resumed run); FALSE with TDM_ENGINE_ERROR_INVALID_OPTION naming the flag. */
gboolean tdm_cli_options_apply(const TdmCliOptions *o, TdmConfig *c, GError **error);

/* Refuses flags that mean nothing for the run `c` describes, rather than ignoring
 * them. */
gboolean tdm_cli_options_check(const TdmCliOptions *o, const TdmConfig *c, GError **error);

/* Sets TDM_ENGINE_ERROR_INVALID_OPTION with the formatted message; returns FALSE. */
gboolean tdm_cli_bad_option(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* `text` as a finite number into `out`; NULL text leaves `out` alone. */
gboolean tdm_cli_parse_double(const char *flag, const char *text, double *out, GError **error);
