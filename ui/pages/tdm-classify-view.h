/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-classify-view.h: images dropped or opened, and what a trained network says.
 *
 * Holds a checkpoint (the last run's, or one opened here) loaded into the engine's
 * classifier (tdm-classifier.h) and a list of images, each with a thumbnail and its
 * top three classes with probabilities. Images arrive by drag and drop (a
 * GtkDropTarget for files, also installed on the main window) or an Open button.
 * Loading and classifying run on worker threads. Not the training window.
 */

#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define TDM_TYPE_CLASSIFY_VIEW (tdm_classify_view_get_type ())

G_DECLARE_FINAL_TYPE (TdmClassifyView, tdm_classify_view, TDM, CLASSIFY_VIEW, GtkWidget)

/* Loads the network to classify with; images already shown are classified again.
 * Property "ready" turns TRUE once it is loaded. */
void        tdm_classify_view_set_checkpoint (TdmClassifyView *self,
                                              const char      *path);
const char *tdm_classify_view_get_checkpoint (TdmClassifyView *self);
gboolean    tdm_classify_view_get_ready      (TdmClassifyView *self);

/* Adds images (classified as soon as a network is loaded). */
void        tdm_classify_view_add_files      (TdmClassifyView *self,
                                              GSList          *files);

/* For tests: how many images have a result, and the text of the i-th. */
guint       tdm_classify_view_get_n_results  (TdmClassifyView *self);
const char *tdm_classify_view_get_result     (TdmClassifyView *self,
                                              guint            i);

/* A window holding a view, transient for `parent`, hidden (not destroyed) on close. */
GtkWindow  *tdm_classify_view_window_new     (GtkWindow        *parent,
                                              TdmClassifyView **view);

G_END_DECLS
