/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-lr-find-view.h: the learning-rate range test of the next run's settings, plotted.
 *
 * A view of the engine's learning-rate finder (tdm_experiment_new_lr_find) that the
 * window runs through a TdmExperimentRunner, as it runs every experiment, and keeps
 * in its run history: it draws each step's loss and its smoothed curve against
 * log₁₀ of the rate as they arrive; at the end it names the engine's suggestion,
 * which "Use This Rate" hands to whoever listens ("use-rate"). A kept test is drawn
 * again from its record. Not the training window, and no rule of its own: the rates,
 * the smoothing and the suggestion are the engine's; it starts nothing.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-experiment-runner.h"
#include "tdm-history.h"

G_BEGIN_DECLS

#define TDM_TYPE_LR_FIND_VIEW (tdm_lr_find_view_get_type ())

G_DECLARE_FINAL_TYPE (TdmLrFindView, tdm_lr_find_view, TDM, LR_FIND_VIEW, GtkWidget)

/* Shows the test `runner` drives from now on (a learning-rate experiment just
 * started by its owner, the window): its points as they come, and how it ended. The
 * view holds a reference, and never starts anything; a test shown before is no
 * longer followed (its owner stops it). */
void       tdm_lr_find_view_show_runner (TdmLrFindView       *self,
                                         TdmExperimentRunner *runner);
/* A test that could not start: `message` says why. */
void       tdm_lr_find_view_show_error  (TdmLrFindView   *self,
                                         const char      *message);
/* Draws a kept test (a record of kind lr-find) and its suggestion. */
void       tdm_lr_find_view_show_record (TdmLrFindView      *self,
                                         const TdmRunRecord *record);
/* A window holding a view, transient for `parent`, destroyed on close (the window
 * that started its test stops it then). */
GtkWindow *tdm_lr_find_view_window_new (GtkWindow       *parent,
                                        TdmLrFindView  **view);

G_END_DECLS
