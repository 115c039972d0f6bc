/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-sweep.h: a scaling run kept in the history, opened in a window of its
 * own.
 *
 * Shows one sweep record as the Scaling page showed it live: what it ran (network,
 * dataset, devices, strategy, batch, strong or weak, steps per device count), the
 * speed-up chart (TdmScalingChart, the Scaling page's widget) and the table of its
 * points, with how it ended, and exports it (the points as CSV through the store,
 * the chart as SVG). Read-only otherwise: the History page's row renames and deletes
 * it. Everything comes from the record; nothing is measured or derived here.
 */

#pragma once

#include <adwaita.h>

#include "tdm-history-store.h"
#include "tdm-run-item.h"

G_BEGIN_DECLS

#define TDM_TYPE_HISTORY_SWEEP (tdm_history_sweep_get_type ())

G_DECLARE_FINAL_TYPE (TdmHistorySweep, tdm_history_sweep, TDM, HISTORY_SWEEP, AdwWindow)

/* `item` must be a sweep (tdm_run_item_is_sweep) of `store`. */
GtkWidget  *tdm_history_sweep_new       (GtkWindow       *parent,
                                         TdmHistoryStore *store,
                                         TdmRunItem      *item);
GtkWidget  *tdm_history_sweep_get_chart (TdmHistorySweep *self);
GtkWidget  *tdm_history_sweep_get_table (TdmHistorySweep *self);
/* What the header bar's buttons do once a file is chosen: the points as CSV (as the
 * History page's export), or the chart as SVG with the sweep's settings. */
gboolean    tdm_history_sweep_export    (TdmHistorySweep *self,
                                         const char      *path,
                                         gboolean         svg,
                                         GError         **error);

G_END_DECLS
