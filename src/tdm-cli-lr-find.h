/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-lr-find.h — tandem-train lr-find (or --lr-find): the engine's learning-rate
 * finder (tdm_experiment_new_lr_find) from the command line, the same experiment the
 * window runs. Its points go to stdout as CSV as they are measured (JSON lines with
 * --json), the suggestion to stderr at the end (a last JSON line with --json); with
 * --record the experiment is kept in the run history, its curve and suggestion with
 * it. Not the options (tdm-cli-options.c, tdm-cli.c) nor Ctrl-C (tdm-cli-train.c).
 */
#pragma once

#include <gio/gio.h>

#include "tdm-cli-experiment.h"

G_BEGIN_DECLS

/* Runs the finder `experiment` on this thread; FALSE with the training's error when it
 * could not run (a stopped test keeps its points and returns TRUE). A record that
 * could not be made (2) or written in full (1) is said on stderr and sets
 * `*record_status`. */
gboolean tdm_cli_lr_find (TdmExperiment *experiment, const TdmCliExperiment *options,
                          GCancellable *cancellable, int *record_status, GError **error);

G_END_DECLS
