/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-folder-preview.h: what a folder of class folders of images holds, and its
 * decoding.
 *
 * Shows the classes with their file counts and a few thumbnails each, the size and
 * colour the images are decoded to, and a progress bar with Cancel while the engine
 * decodes the folder (tdm_dataset_load_image_folder) on a worker thread; the decoded
 * set lands in the engine's cache, so the trainer's own load a moment later is a
 * cache hit. Not the dataset drop-down (tdm-dataset-chooser.c), which embeds it.
 */

#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define TDM_TYPE_FOLDER_PREVIEW (tdm_folder_preview_get_type ())

G_DECLARE_FINAL_TYPE (TdmFolderPreview, tdm_folder_preview, TDM, FOLDER_PREVIEW, GtkWidget)

GtkWidget  *tdm_folder_preview_new         (void);

/* Scans the folder, shows it and starts decoding; NULL stops everything. Signals:
 * "started" when decoding begins, "loaded" when the set is ready (its figures from
 * get_facts), "failed" (const char *message) when it cannot be used or was
 * cancelled. */
void        tdm_folder_preview_set_folder  (TdmFolderPreview *self,
                                            const char       *folder);

/* The size "Automatic" stands for: a network's input size (a preset's), or 0 for
 * the engine's own choice. A folder shown at "Automatic" is decoded again. */
void        tdm_folder_preview_set_default_size (TdmFolderPreview *self,
                                                 int               size);
/* The choices, as TdmConfig's image_size and image_channels (0: automatic). */
void        tdm_folder_preview_get_options (TdmFolderPreview *self,
                                            int              *size,
                                            int              *channels);

/* After "loaded": the decoded set's figures and what was skipped (or NULL). */
gboolean    tdm_folder_preview_get_facts   (TdmFolderPreview *self,
                                            int              *train_count,
                                            int              *test_count,
                                            int              *height,
                                            int              *width,
                                            int              *channels,
                                            int              *classes);
const char *tdm_folder_preview_get_notice  (TdmFolderPreview *self);

G_END_DECLS
