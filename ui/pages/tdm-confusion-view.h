/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-confusion-view.h: the test set's confusion matrix after an evaluation.
 *
 * Rows are the true classes, columns the predicted ones, each cell shaded by its
 * share of its row (so a class with few samples reads as clearly as a large one),
 * with the count written where it fits and class names along the left. A tooltip
 * says "37 Shirt taken for T-shirt/top". It shows what a PREDICTIONS event holds and
 * computes nothing the engine did not report. Main-thread only.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-events.h"

G_BEGIN_DECLS

#define TDM_TYPE_CONFUSION_VIEW (tdm_confusion_view_get_type ())

G_DECLARE_FINAL_TYPE (TdmConfusionView, tdm_confusion_view, TDM, CONFUSION_VIEW, GtkWidget)

GtkWidget *tdm_confusion_view_new             (void);
/* Keeps a copy; an event without a matrix (too many classes) shows a note instead. */
void       tdm_confusion_view_set_predictions (TdmConfusionView          *self,
                                               const TdmPredictionsEvent *predictions);
void       tdm_confusion_view_clear           (TdmConfusionView          *self);
/* Classes shown (0 when there is no matrix). */
int        tdm_confusion_view_get_classes     (TdmConfusionView          *self);
/* The matrix's sum (the test samples) and its diagonal (those predicted right). */
long       tdm_confusion_view_get_total       (TdmConfusionView          *self);
long       tdm_confusion_view_get_correct     (TdmConfusionView          *self);
/* The cell (truth, predicted) at width × height; FALSE outside the matrix. */
gboolean   tdm_confusion_view_cell_rect       (TdmConfusionView          *self,
                                               double                     width,
                                               double                     height,
                                               int                        truth,
                                               int                        predicted,
                                               graphene_rect_t           *rect);
/* How far right the slanted column names reach at width × height (the grid leaves
 * them room inside the widget); 0 with no grid. */
double     tdm_confusion_view_get_names_right (TdmConfusionView          *self,
                                               double                     width,
                                               double                     height);
/* Whether each cell shows its count at width × height (cells of 18 px or more). */
gboolean   tdm_confusion_view_shows_counts    (TdmConfusionView          *self,
                                               double                     width,
                                               double                     height);
/* Which cell a point falls in; FALSE outside every cell. */
gboolean   tdm_confusion_view_cell_at         (TdmConfusionView          *self,
                                               double                     width,
                                               double                     height,
                                               double                     x,
                                               double                     y,
                                               int                       *truth,
                                               int                       *predicted);

G_END_DECLS
