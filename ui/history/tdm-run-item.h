/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-item.h: one run of the history, as an item of a list model.
 *
 * A TdmRunItem holds a TdmRunRecord loaded from the history folder and the two
 * choices a person makes about it in the window: drawn over the charts ("overlay")
 * and the run others are measured against ("baseline"). It reads nothing from disk
 * itself and draws nothing: TdmHistoryStore makes items, TdmHistoryView shows them.
 */

#pragma once

#include <glib-object.h>

#include "tdm-history.h"

G_BEGIN_DECLS

#define TDM_TYPE_RUN_ITEM (tdm_run_item_get_type ())

G_DECLARE_FINAL_TYPE (TdmRunItem, tdm_run_item, TDM, RUN_ITEM, GObject)

/* Takes `record`. */
TdmRunItem         *tdm_run_item_new          (TdmRunRecord *record);
const TdmRunRecord *tdm_run_item_get_record   (TdmRunItem   *self);
const char         *tdm_run_item_get_id       (TdmRunItem   *self);
/* An experiment rather than a training run (TDM_RUN_EXPERIMENT: a scaling sweep, a
 * comparison): it is never drawn on the charts nor made the baseline; the two
 * setters ignore TRUE for it. A sweep is one that opens on its chart, a
 * learning-rate test one that opens on its curve. */
gboolean            tdm_run_item_is_experiment (TdmRunItem  *self);
gboolean            tdm_run_item_is_sweep     (TdmRunItem   *self);
gboolean            tdm_run_item_is_lr_find   (TdmRunItem   *self);
/* Properties "name", "overlay" and "baseline". */
const char         *tdm_run_item_get_name     (TdmRunItem   *self);
void                tdm_run_item_set_name     (TdmRunItem   *self,
                                               const char   *name);
gboolean            tdm_run_item_get_overlay  (TdmRunItem   *self);
void                tdm_run_item_set_overlay  (TdmRunItem   *self,
                                               gboolean      overlay);
gboolean            tdm_run_item_get_baseline (TdmRunItem   *self);
void                tdm_run_item_set_baseline (TdmRunItem   *self,
                                               gboolean      baseline);

/* For lists: "cpu ×2 · allreduce · batch 200 · 85.3 %" (what the run was and how it
 * ended; a sweep: "scaling, strong · cpu ×2 · allreduce · batch 200 · 1.85× on 2"),
 * and its date in the user's locale. */
char               *tdm_run_item_describe     (TdmRunItem   *self);
char               *tdm_run_item_format_date  (TdmRunItem   *self);
/* "cpu ×2", "cuda:0, cuda:1". */
char               *tdm_run_item_format_devices (TdmRunItem *self);
/* The run's mean sampled step as a timeline step: each device's mean time in each
 * phase (its run file keeps no spans), laid out as the strategy runs a step, so its
 * collectives line up across devices (a device that finished its backward pass
 * sooner waits; with `main` the others wait through the main device's update),
 * with each device's mean communication hidden under backward (hidden_ms).
 * FALSE for a run without sampled steps. */
gboolean            tdm_run_item_mean_step    (TdmRunItem     *self,
                                               TdmPhasesEvent *step);

G_END_DECLS
