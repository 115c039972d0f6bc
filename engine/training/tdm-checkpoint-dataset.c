/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-checkpoint-dataset.c — where a checkpoint's dataset is, kept so that it is found
 * again after the checkpoint moved (tdm-checkpoint.h).
 *
 * A run's configuration holds the dataset as it was given, often relative to the
 * folder the run started in. The checkpoint also records the folder's absolute path
 * and its path relative to the checkpoint's own folder: a checkpoint copied elsewhere
 * on the same machine finds the first, a project folder moved or copied with both
 * finds the second. Not the checkpoint's tensors (tdm-trainer-checkpoint.c).
 */
#include "tdm-checkpoint.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-file.h"
#include "tdm-i18n.h"

#include <string.h>

/* The path of target (absolute) from folder (absolute), both without "." or "..". */
static char *
relative_path(const char *folder, const char *target)
{
  g_auto(GStrv) from = g_strsplit(folder, G_DIR_SEPARATOR_S, -1);
  g_auto(GStrv) to = g_strsplit(target, G_DIR_SEPARATOR_S, -1);
  /* g_canonicalize_filename leaves no empty part but the root's (and "/"'s own). */
  guint n_from = g_strv_length(from), n_to = g_strv_length(to), common = 0;
  while (n_from > 0 && from[n_from - 1][0] == '\0')
    n_from--;
  while (common < n_from && common < n_to && g_str_equal(from[common], to[common]))
    common++;
  GString *out = g_string_new(NULL);
  for (guint i = common; i < n_from; i++)
    g_string_append(out, ".." G_DIR_SEPARATOR_S);
  for (guint i = common; i < n_to; i++)
    if (to[i][0] != '\0')
      g_string_append_printf(out, "%s" G_DIR_SEPARATOR_S, to[i]);
  if (out->len == 0)
    g_string_append(out, "." G_DIR_SEPARATOR_S);
  g_string_truncate(out, out->len - 1);
  return g_string_free(out, FALSE);
}

static char *
folder_of(const char *checkpoint_path)
{
  g_autofree char *dir = g_path_get_dirname(checkpoint_path);
  return g_canonicalize_filename(dir, NULL);
}

void
tdm_checkpoint_set_dataset_place(TdmCheckpoint *ckpt, const char *checkpoint_path,
                                 const char *dataset)
{
  g_return_if_fail(ckpt != NULL && checkpoint_path != NULL && dataset != NULL);
  g_autofree char *absolute = tdm_dataset_folder_path(dataset);
  if (absolute == NULL)
    return;
  g_autofree char *folder = folder_of(checkpoint_path);
  g_autofree char *relative = relative_path(folder, absolute);
  tdm_checkpoint_set_metadata(ckpt, "dataset_path", absolute);
  tdm_checkpoint_set_metadata(ckpt, "dataset_relative", relative);
}

gboolean
tdm_checkpoint_find_dataset(TdmCheckpoint *ckpt, const char *checkpoint_path,
                            TdmConfig *config, GError **error)
{
  g_return_val_if_fail(ckpt != NULL && checkpoint_path != NULL && config != NULL, FALSE);
  if (config->dataset == NULL)
    return TRUE;
  g_autofree char *saved = tdm_dataset_folder_path(config->dataset);
  if (saved == NULL)
    return TRUE;   /* a built-in set: wherever this machine keeps it */
  const char *absolute = tdm_checkpoint_get_metadata(ckpt, "dataset_path");
  const char *relative = tdm_checkpoint_get_metadata(ckpt, "dataset_relative");
  g_autofree char *folder = folder_of(checkpoint_path);
  g_autofree char *joined = NULL;
  if (relative != NULL && !g_path_is_absolute(relative)) {
    g_autofree char *path = g_build_filename(folder, relative, NULL);
    joined = g_canonicalize_filename(path, NULL);
  }
  /* The very folder it trained on first, then the one beside the checkpoint, then
   * the setting as given (checkpoints of earlier versions record only that). */
  const char *candidates[] = {absolute, joined, saved};
  for (gsize i = 0; i < G_N_ELEMENTS(candidates); i++) {
    if (candidates[i] != NULL && g_path_is_absolute(candidates[i]) &&
        tdm_file_present(candidates[i])) {
      g_free(config->dataset);
      config->dataset = g_strdup(candidates[i]);
      return TRUE;
    }
  }
  g_autofree char *display = g_filename_display_name(checkpoint_path);
  if (absolute != NULL && joined != NULL)
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("--resume %s: the dataset it was saved with is neither at %s nor at %s "
                  "(%s from the checkpoint): give its folder with --dataset FOLDER"),
                display, absolute, joined, relative);
  else
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("--resume %s: the dataset it was saved with, %s, is not there: give its "
                  "folder with --dataset FOLDER"),
                display, saved);
  return FALSE;
}
