/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-lr-find.h — tandem-train --lr-find: the engine's learning-rate range test
 * (tdm-lr-find.h) from the command line. Its points go to stdout as CSV as they are
 * measured (JSON lines with --json), the suggestion to stderr at the end (a last JSON
 * line with --json). Not the option parsing (tdm-cli-options.c) nor Ctrl-C
 * (tandem-train.c).
 */
#pragma once

#include <gio/gio.h>

#include "tdm-cli-options.h"
#include "tdm-config.h"

G_BEGIN_DECLS

/* The test's range and length from --lr-find-range and --lr-find-steps; FALSE with
 * TDM_ENGINE_ERROR_INVALID_OPTION naming the flag. */
gboolean tdm_cli_lr_find_options (const TdmCliOptions *o, double *lr_first, double *lr_last,
                                  int *steps, GError **error);

/* Runs the test of `config`; FALSE with the training's error when it could not run. */
gboolean tdm_cli_lr_find (const TdmConfig *config, double lr_first, double lr_last, int steps,
                          gboolean json, gboolean quiet, GCancellable *cancellable,
                          GError **error);

G_END_DECLS
