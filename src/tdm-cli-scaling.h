/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-scaling.h — tandem-train --scaling: a scaling run from the command line.
 *
 * Trains the configuration on its first 1, 2, … N devices through the engine's
 * driver and prints each point as it is measured (a table, or one JSON line a point
 * with --json); with --record the run is kept in the history as a sweep record,
 * written by the engine exactly as the window's Scaling page writes it. Not the
 * option parsing (tdm-cli-options.c) nor Ctrl-C (tandem-train.c).
 */
#pragma once

#include <gio/gio.h>

#include "tdm-config.h"
#include "tdm-scaling.h"

G_BEGIN_DECLS

typedef struct {
  TdmScalingMode mode;
  long steps;                /* timed steps at each device count */
  gboolean json, quiet;
  gboolean record;           /* keep it in the history */
  const char *history;       /* the history folder, NULL: the user's */
  const char *name;          /* of the record, NULL: its date */
} TdmCliScaling;

/* FALSE with the error when the scaling run did not complete (cancelled: the
 * engine's TDM_ENGINE_ERROR_CANCELLED), after `*points` points. A record that could
 * not be made (2: the history folder cannot be used; nothing is run then) or written
 * in full (1) is said on stderr and sets `*record_status`, else 0. */
gboolean tdm_cli_scaling (const TdmConfig *config, const TdmCliScaling *options,
                          GCancellable *cancellable, int *points, int *record_status,
                          GError **error);

G_END_DECLS
