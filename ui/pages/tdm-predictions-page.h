/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-predictions-page.h: the window's "Predictions" page.
 *
 * After each evaluation: the test set's confusion matrix (TdmConfusionView, with the
 * dataset's class names) and a gallery of test images with their true and predicted
 * labels, mistakes first (TdmPredictionGallery), under a line with the epoch and the
 * accuracy the matrix's diagonal gives. It shows PREDICTIONS events; it does not
 * evaluate anything itself.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-dataset.h"
#include "tdm-events.h"
#include "tdm-session.h"

G_BEGIN_DECLS

#define TDM_TYPE_PREDICTIONS_PAGE (tdm_predictions_page_get_type ())

G_DECLARE_FINAL_TYPE (TdmPredictionsPage, tdm_predictions_page, TDM, PREDICTIONS_PAGE, GtkWidget)

/* STARTED clears the page, PREDICTIONS fills it (thumbnails from `data`'s test set,
 * may be NULL); others are ignored. */
/* Shows the session's run: each of its events (and its dataset) as below. */
void       tdm_predictions_page_set_session   (TdmPredictionsPage   *self,
                                               TdmSession           *session);

G_END_DECLS
