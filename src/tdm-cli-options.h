/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-options.h — tandem-train's own options, beside the run's (the engine's field
 * table, tdm_config_fields()): how to run and print, and each command's settings, as
 * one struct described by rows of the same kind, so their flags, defaults, checks and
 * help come from the same code. Not which command takes which (the command table in tdm-cli.c).
 */
#pragma once

#include <glib.h>

#include "tdm-error.h"
#include "tdm-field.h"
#include "tdm-scaling.h"
#include "tdm-trainer.h"

G_BEGIN_DECLS

typedef struct {
  /* train */
  char *resume;              /* a checkpoint to go on from */
  char *config;              /* settings from a file */
  gboolean print_config;
  gboolean record;           /* keep the run in the history */
  char *run_name, *history;
  char *tensorboard;         /* a folder for the run's TensorBoard event files */
  double pace;               /* steps a second at most; 0: no limit */
  TdmPrewarm prewarm;
  gboolean distributed;
  /* classify */
  int top;
  /* export */
  char *export_onnx;
  /* scaling */
  TdmScalingMode scaling;
  long scaling_steps;
  /* compare, compare-strategies */
  long compare_steps;
  /* lr-find */
  gboolean lr_find;
  double lr_find_range[2];   /* the first and last rate */
  int lr_find_steps;
  /* runs */
  gboolean list_runs;
  char *show_run, *export_run;
  char *export_tensorboard;  /* every run as TensorBoard event files, under it */
  /* devices, and every command */
  gboolean list_devices, version, json, quiet;
} TdmCliSettings;

/* The rows of TdmCliSettings. */
const TdmField *tdm_cli_settings_fields (guint *count);
/* The defaults into `s` (zeroed by the caller), and what they own freed. */
void tdm_cli_settings_init (TdmCliSettings *s);
void tdm_cli_settings_clear (TdmCliSettings *s);

/* Sets TDM_ENGINE_ERROR_INVALID_OPTION with the formatted message; returns FALSE. */
#define tdm_cli_bad_option(error, ...) \
  tdm_error_set ((error), TDM_ENGINE_ERROR_INVALID_OPTION, __VA_ARGS__)

G_END_DECLS
