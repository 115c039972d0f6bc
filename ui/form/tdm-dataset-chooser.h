/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dataset-chooser.h: picks the dataset and says what it holds.
 *
 * A drop-down of the built-in sets (Fashion-MNIST, MNIST, synthetic) plus the last
 * folder opened, a button that opens a folder of IDX files, CIFAR-10 batches or
 * class folders of images (those get a TdmFolderPreview with progress and options),
 * and a line with the dataset's size, classes and image shape, or why it could not
 * be read. The dataset is loaded on a worker thread to learn those figures and then
 * let go: the trainer loads it again for itself.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-dataset.h"

G_BEGIN_DECLS

#define TDM_TYPE_DATASET_CHOOSER (tdm_dataset_chooser_get_type ())

G_DECLARE_FINAL_TYPE (TdmDatasetChooser, tdm_dataset_chooser, TDM, DATASET_CHOOSER, GtkWidget)


/* Property "source": "fashion-mnist", "mnist", "synthetic" or a folder's path, as
 * tdm_dataset_open() takes it. Setting it starts loading, unless held. */
const char *tdm_dataset_chooser_get_source  (TdmDatasetChooser *self);
void        tdm_dataset_chooser_set_source  (TdmDatasetChooser *self,
                                             const char        *source);

/* Asks for a folder (a file chooser transient for the window) and uses it. */
void        tdm_dataset_chooser_open_folder (TdmDatasetChooser *self);

/* Property "ready": the source has loaded; its figures are then known. */
gboolean    tdm_dataset_chooser_get_ready   (TdmDatasetChooser *self);
gboolean    tdm_dataset_chooser_get_shape   (TdmDatasetChooser *self,
                                             int               *height,
                                             int               *width,
                                             int               *channels,
                                             int               *classes);
/* Training and test images; FALSE while not known. */
gboolean    tdm_dataset_chooser_get_counts  (TdmDatasetChooser *self,
                                             int               *train_count,
                                             int               *test_count);
/* For a folder of class folders of images: the size and colour chosen for it (as
 * TdmConfig's image_size and image_channels; 0 automatic). */
void        tdm_dataset_chooser_get_image_options (TdmDatasetChooser *self,
                                                   int               *size,
                                                   int               *channels);

/* The image size "Automatic" stands for in a folder's options (a preset's input
 * size; 0: the engine's choice). */
void        tdm_dataset_chooser_set_default_image_size (TdmDatasetChooser *self,
                                                        int                size);

/* Property "error": why the source could not be loaded, or NULL. */
const char *tdm_dataset_chooser_get_error   (TdmDatasetChooser *self);
/* Neither loaded nor failed: being read, or held with a choice not read yet. */
gboolean    tdm_dataset_chooser_get_loading (TdmDatasetChooser *self);

/* While held, choices are shown ("Reading the dataset…") but not read; releasing
 * reads the one chosen then. */
void        tdm_dataset_chooser_hold        (TdmDatasetChooser *self,
                                             gboolean           hold);

/* What reads a source on the worker thread (tdm_dataset_open() by default; the
 * cancellable is the task's, cancelled when the choice changes or the chooser goes):
 * for a test that holds or fails the load. */
typedef TdmDatasetPair *(*TdmDatasetLoader) (const char   *source,
                                             GCancellable *cancellable,
                                             gpointer      data,
                                             GError      **error);
void        tdm_dataset_chooser_set_loader  (TdmDatasetChooser *self,
                                             TdmDatasetLoader   loader,
                                             gpointer           data);

G_END_DECLS
