/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-prediction-gallery.h: test images with their true and predicted labels.
 *
 * A grid of the samples a PREDICTIONS event lists, mistakes first (the engine's
 * order), each a thumbnail framed in vermillion when wrong and blue when right, with
 * "truth → prediction" under it (cut with "…" where a cell is too narrow, whole in
 * the tooltip). Pixels are copied from the test set when the event
 * is set, so the widget holds no dataset. Main-thread only.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-dataset.h"
#include "tdm-events.h"

G_BEGIN_DECLS

#define TDM_TYPE_PREDICTION_GALLERY (tdm_prediction_gallery_get_type ())

G_DECLARE_FINAL_TYPE (TdmPredictionGallery, tdm_prediction_gallery, TDM, PREDICTION_GALLERY,
                      GtkWidget)

GtkWidget *tdm_prediction_gallery_new             (void);
/* `test` is the run's test set, read during the call only. */
void       tdm_prediction_gallery_set_predictions (TdmPredictionGallery      *self,
                                                   const TdmPredictionsEvent *predictions,
                                                   const TdmDataset          *test);
/* Back to the empty gallery (a new run). */
void       tdm_prediction_gallery_clear           (TdmPredictionGallery      *self);
guint      tdm_prediction_gallery_get_n_items     (TdmPredictionGallery      *self);
/* Whether item i is a mistake (its prediction differs from the truth). */
gboolean   tdm_prediction_gallery_is_mistake      (TdmPredictionGallery      *self,
                                                   guint                      i);
/* Item i's thumbnail at width × height (a grid row by row); FALSE when it does not
 * fit or there is no such item. */
gboolean   tdm_prediction_gallery_item_rect       (TdmPredictionGallery      *self,
                                                   double                     width,
                                                   double                     height,
                                                   guint                      i,
                                                   graphene_rect_t           *rect);
/* Item i's caption line (0: the truth, 1: "→ prediction", NULL for a right one) as
 * last drawn: whole, or cut with "…" to its cell's width; `width` and `room` (may be
 * NULL) get its drawn width and the cell's. NULL before it was drawn. */
const char *tdm_prediction_gallery_get_caption   (TdmPredictionGallery      *self,
                                                   guint                      i,
                                                   int                        line,
                                                   double                    *width,
                                                   double                    *room);
/* The tooltip over a point of the widget: the item's whole "truth → prediction"
 * ("truth" for a right one); NULL off the items. */
char       *tdm_prediction_gallery_get_tooltip_at (TdmPredictionGallery     *self,
                                                   double                     x,
                                                   double                     y);

G_END_DECLS
