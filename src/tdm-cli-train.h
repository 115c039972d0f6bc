/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-train.h — the work of tandem-train's train, scaling, compare, export and
 * devices commands, once tdm-cli.c has checked their input; and how a failure reads: its
 * exit status and the flag (or the checkpoint) it comes back to.
 */
#pragma once

#include "tdm-cli.h"
#include "tdm-experiment.h"

G_BEGIN_DECLS

/* Each returns the exit status, having printed any failure. */
int tdm_cli_train (TdmCli *cli, const TdmConfig *config);
int tdm_cli_scaling_run (TdmCli *cli, const TdmConfig *config);
int tdm_cli_lr_find_run (TdmCli *cli, const TdmConfig *config);
/* compare and compare-strategies: the engine's experiment of that kind. */
int tdm_cli_experiment_run (TdmCli *cli, const TdmConfig *config, TdmExperimentKind kind);
/* export: the --resume checkpoint's network, or (weights not NULL) its --network with
 * --init's weights and input settings. */
int tdm_cli_export (TdmCli *cli, const TdmConfig *weights);
int tdm_cli_devices (void);

/* A checkpoint that cannot be written would only fail after the first epoch's work:
 * FALSE, naming `flag`, when `path` (NULL: none) cannot be. */
gboolean tdm_cli_check_save_path (const char *path, const char *flag, GError **error);
/* Whether this process writes the run's files (under mpirun, the main device's rank). */
gboolean tdm_cli_saves_here (const TdmConfig *config);
/* The flag a failure of the engine comes back to ("--network"), or the checkpoint
 * being resumed when that is where the value came from; NULL when it is no one
 * flag's fault. */
char *tdm_cli_source_of (const TdmCli *cli, const GError *error, gboolean stepped);

G_END_DECLS
