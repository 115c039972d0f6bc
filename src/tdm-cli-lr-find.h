/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-lr-find.h — tandem-train --lr-find: the engine's learning-rate range test
 * (tdm-lr-find.h) from the command line. Its points go to stdout as CSV as they are
 * measured (JSON lines with --json), the suggestion to stderr at the end (a last JSON
 * line with --json). Not the options (tdm-cli-options.c, tdm-cli.c) nor Ctrl-C
 * (tdm-cli-train.c).
 */
#pragma once

#include <gio/gio.h>

#include "tdm-config.h"

G_BEGIN_DECLS

/* Runs the test of `config`; FALSE with the training's error when it could not run. */
gboolean tdm_cli_lr_find (const TdmConfig *config, double lr_first, double lr_last, int steps,
                          gboolean json, gboolean quiet, GCancellable *cancellable,
                          GError **error);

G_END_DECLS
