/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-table.h: the comparison table of the run history.
 *
 * A GtkColumnView over a TdmHistoryStore's training runs (its scaling sweeps have
 * tables of their own, see TdmHistorySweep), one row a run: devices, strategy, batch,
 * time, samples/s, final loss and accuracy, speed-up against the store's baseline,
 * compute, communication and waiting per step, each phase's time per sampled step,
 * and the memory each device held at most; the ticked runs only, once any is ticked,
 * and never a failed or empty run. Every figure
 * comes from the run files (tdm-history.h); nothing is measured here. Read-only: the
 * list above it on the History page renames, deletes and ticks.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-history-store.h"

G_BEGIN_DECLS

typedef enum
{
  TDM_RUN_TABLE_NAME,
  TDM_RUN_TABLE_NETWORK,
  TDM_RUN_TABLE_DEVICES,
  TDM_RUN_TABLE_STRATEGY,
  TDM_RUN_TABLE_BATCH,
  TDM_RUN_TABLE_TIME,
  TDM_RUN_TABLE_SAMPLES_PER_SECOND,
  TDM_RUN_TABLE_LOSS,
  TDM_RUN_TABLE_ACCURACY,
  TDM_RUN_TABLE_SPEEDUP,
  TDM_RUN_TABLE_COMPUTE,
  TDM_RUN_TABLE_COMMUNICATION,
  TDM_RUN_TABLE_WAIT,
  TDM_RUN_TABLE_PHASES,
  TDM_RUN_TABLE_MEMORY,
  TDM_RUN_TABLE_TRAFFIC,
  TDM_RUN_TABLE_N_COLUMNS
} TdmRunTableColumn;

#define TDM_TYPE_RUN_TABLE (tdm_run_table_get_type ())

G_DECLARE_FINAL_TYPE (TdmRunTable, tdm_run_table, TDM, RUN_TABLE, GtkWidget)

GtkWidget *tdm_run_table_new       (TdmHistoryStore   *store);

/* What the cell of `item` in `column` says, against `baseline` (may be NULL). */
char      *tdm_run_table_cell_text (TdmRunItem        *item,
                                    TdmRunItem        *baseline,
                                    TdmRunTableColumn  column);

/* Whether the table has a row for `item`: a training run with figures (not failed,
 * not ended before its first step), and ticked when any run is (`any_ticked`). */
gboolean   tdm_run_table_compares  (TdmRunItem        *item,
                                    gboolean           any_ticked);

G_END_DECLS
