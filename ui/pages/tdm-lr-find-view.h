/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-lr-find-view.h: the learning-rate range test of the next run's settings, plotted.
 *
 * Runs the engine's learning-rate finder (tdm_experiment_new_lr_find) through a
 * TdmExperimentRunner, as the window runs every experiment, and draws each step's
 * loss and its smoothed curve against log₁₀ of the rate as they arrive; at the end it
 * names the engine's suggestion, which "Use This Rate" hands to whoever listens
 * ("use-rate"), and the test is kept in the run history. A kept test is drawn again
 * from its record. Closing or starting again stops a test under way. Not the
 * training window, and no rule of its own: the rates, the smoothing and the
 * suggestion are the engine's.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-config.h"
#include "tdm-history.h"

G_BEGIN_DECLS

#define TDM_TYPE_LR_FIND_VIEW (tdm_lr_find_view_get_type ())

G_DECLARE_FINAL_TYPE (TdmLrFindView, tdm_lr_find_view, TDM, LR_FIND_VIEW, GtkWidget)

/* Starts the test of `config` (copied), the default range and steps. */
void       tdm_lr_find_view_start      (TdmLrFindView   *self,
                                        const TdmConfig *config);
/* Stops a test under way (its points stay, and their suggestion). */
void       tdm_lr_find_view_stop       (TdmLrFindView   *self);
/* Draws a kept test (a record of kind lr-find) and its suggestion. */
void       tdm_lr_find_view_show_record (TdmLrFindView      *self,
                                         const TdmRunRecord *record);
/* Where tests are kept (a run history's folder); NULL, the default: not kept. */
void       tdm_lr_find_view_set_history_folder (TdmLrFindView *self,
                                                const char    *folder);
/* Once a test is over: its record's id when it was kept, and why the history could
 * not be written in full (NULL when it could). */
const char   *tdm_lr_find_view_get_record_id    (TdmLrFindView *self);
const GError *tdm_lr_find_view_get_record_error (TdmLrFindView *self);

/* Whether a test runs; the points drawn; the suggestion (NaN: none yet). */
gboolean   tdm_lr_find_view_get_running    (TdmLrFindView *self);
guint      tdm_lr_find_view_get_n_points   (TdmLrFindView *self);
double     tdm_lr_find_view_get_suggestion (TdmLrFindView *self);
/* The status line's text (what runs, the suggestion, or why it failed). */
const char *tdm_lr_find_view_get_status    (TdmLrFindView *self);

/* A window holding a view, transient for `parent`, destroyed on close (which stops
 * the test). */
GtkWindow *tdm_lr_find_view_window_new (GtkWindow       *parent,
                                        TdmLrFindView  **view);

G_END_DECLS
