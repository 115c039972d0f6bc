/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-prediction-gallery.h: test images with their true and predicted labels.
 *
 * A grid of the samples a PREDICTIONS event lists, mistakes first (the engine's
 * order), each a thumbnail framed in vermillion when wrong and blue when right, with
 * "truth → prediction" under it. Pixels are copied from the test set when the event
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

G_END_DECLS
