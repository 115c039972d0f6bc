/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-view.h: the History page of the window.
 *
 * Lists the runs of a TdmHistoryStore (name, date, devices, strategy, batch, final
 * accuracy) with a tick to overlay each on the charts and a menu to rename, export,
 * delete (with an undo toast) or make it the baseline; scaling sweeps beside them,
 * marked, opened rather than ticked; below, "compare with one
 * device" (its steps and its last result), "compare strategies" and the comparison
 * table (TdmRunTable). It starts no runs: its buttons activate the window's
 * "win.compare-one-device" and "win.compare-strategies", which read the steps here.
 */

#pragma once

#include <adwaita.h>

#include "tdm-history-store.h"

G_BEGIN_DECLS

#define TDM_TYPE_HISTORY_VIEW (tdm_history_view_get_type ())

G_DECLARE_FINAL_TYPE (TdmHistoryView, tdm_history_view, TDM, HISTORY_VIEW, GtkWidget)

GtkWidget       *tdm_history_view_new                (TdmHistoryStore *store);

/* Steps of each run of "compare with one device". */
int              tdm_history_view_get_compare_steps  (TdmHistoryView  *self);
void             tdm_history_view_set_compare_steps  (TdmHistoryView  *self,
                                                      int              steps);
/* What the last comparison found, in words (NULL: none yet). */
void             tdm_history_view_set_compare_result (TdmHistoryView  *self,
                                                      const char      *text);
const char      *tdm_history_view_get_compare_result (TdmHistoryView  *self);
/* What the last "compare strategies" (win.compare-strategies, the same steps) said. */
void             tdm_history_view_set_strategy_result (TdmHistoryView *self,
                                                       const char     *text);
const char      *tdm_history_view_get_strategy_result (TdmHistoryView *self);

/* The size the runs' kept networks take now, said again (after a run or a limit). */
void             tdm_history_view_update_kept        (TdmHistoryView  *self);

G_END_DECLS
