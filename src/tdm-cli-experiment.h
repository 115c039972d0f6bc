/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-experiment.h — tandem-train compare and compare-strategies: the engine's
 * experiments (tdm-experiment.h) from the command line, the same code the window runs.
 *
 * Each training of the experiment is printed as a run is (a progress line on a
 * terminal, its summary; JSON lines with --json, each training announced by an
 * "experiment_training" line), and kept in the run history with --record under the
 * name the experiment gives it, as the window keeps it. The result goes to stdout at
 * the end (a "compare_result" or "strategies_result" line with --json). Not the
 * options (tdm-cli-options.c, tdm-cli.c) nor Ctrl-C (tdm-cli-train.c).
 */
#pragma once

#include <gio/gio.h>

#include "tdm-experiment.h"

G_BEGIN_DECLS

typedef struct {
  gboolean json, quiet;
  gboolean record;           /* keep each training in the history */
  const char *history;       /* the history folder, NULL: the user's */
} TdmCliExperiment;

/* Runs `experiment` on this thread. FALSE with the error when it did not complete
 * (cancelled: TDM_ENGINE_ERROR_CANCELLED); `*stepped`: a training took a step. A
 * record that could not be made (2: the history folder cannot be used; nothing more
 * is run then) or written in full (1) is said on stderr and sets `*record_status`. */
gboolean tdm_cli_experiment (TdmExperiment *experiment, const TdmCliExperiment *options,
                             GCancellable *cancellable, gboolean *stepped,
                             int *record_status, GError **error);

G_END_DECLS
