/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dataset-folder.h — datasets from a folder of class folders of PNG and JPEG.
 *
 * Layout: FOLDER/<class>/<image> (a seeded share of each class is held out for the
 * test split), or FOLDER/train/<class>/… and FOLDER/test/<class>/…. Classes are the
 * sub-folders in byte order of their names; samples are class by class, files in byte
 * order of their names within a class, so the order is known and repeatable. Images
 * are decoded on every core (tdm-image.h), and the decoded set is cached under
 * g_get_user_cache_dir()/tandem/images/, keyed by the folder's path, its files'
 * names, sizes, modification and status-change times and the options. Files that cannot be used are
 * skipped and reported once in the pair's notice; fewer than two classes with images
 * is an error. Not the decoder (tdm-image.c) and not the cache file (tdm-image-cache.c).
 */
#pragma once

#include <gio/gio.h>
#include "tdm-dataset.h"

G_BEGIN_DECLS

/* Share of each class held out for testing when there is no test/ folder, in percent. */
#define TDM_FOLDER_TEST_PERCENT 15

/* Called on the loading thread with the files decoded so far. */
typedef void (*TdmFolderProgress) (int done, int total, gpointer user_data);

/* TRUE when `folder` looks like a folder of class folders (some sub-folder holds a
 * file, or it has train/ and test/); decides nothing about the files themselves. */
gboolean tdm_dataset_is_image_folder (const char *folder);

/* Loads (or reads from the cache) the pair. options may be NULL for the defaults.
 * Cancelling returns NULL with TDM_ENGINE_ERROR_CANCELLED. */
TdmDatasetPair *tdm_dataset_load_image_folder (const char *folder,
                                               const TdmImageOptions *options,
                                               TdmFolderProgress progress,
                                               gpointer user_data,
                                               GCancellable *cancellable,
                                               GError **error);

/* What the window shows before decoding: classes, counts, a few files each. */
typedef struct {
  char *name;
  int count;           /* regular files in the class folder(s) */
  char **examples;     /* up to TDM_FOLDER_EXAMPLES full paths, NULL-terminated */
} TdmFolderClass;

#define TDM_FOLDER_EXAMPLES 4

typedef struct {
  char *folder;
  gboolean split;      /* has train/ and test/ */
  int class_count;
  TdmFolderClass *classes;
  int files;
} TdmFolderSummary;

TdmFolderSummary *tdm_image_folder_scan (const char *folder, GError **error);
void tdm_folder_summary_free (TdmFolderSummary *summary);

/* Where the cache of `folder` with `options` lives (whether or not it exists). */
char *tdm_image_folder_cache_path (const char *folder, const TdmImageOptions *options);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmFolderSummary, tdm_folder_summary_free)

G_END_DECLS
