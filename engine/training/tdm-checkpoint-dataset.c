/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-checkpoint-dataset.c — which dataset a checkpoint was saved with, and where it
 * is, kept so that it is found again after the checkpoint or the dataset moved
 * (tdm-checkpoint.h).
 *
 * A run's configuration holds the dataset as it was given, often relative to the
 * folder the run started in. The checkpoint also records the folder's absolute path
 * and its path relative to the checkpoint's own folder: a checkpoint copied elsewhere
 * on the same machine finds the first, a project folder moved or copied with both
 * finds the second. A dataset is known by its content, not by its folder's name: the
 * shape of its samples, its classes' names and how many training samples each has,
 * so a folder renamed or moved resumes with --dataset, and another one with the same
 * name does not. Not the checkpoint's tensors (tdm-trainer-checkpoint.c).
 */
#include "tdm-checkpoint.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-file.h"
#include "tdm-i18n.h"
#include "tdm-json.h"

#include <stdio.h>
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
  if (absolute != NULL && joined != NULL && !g_str_equal(absolute, joined))
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("--resume %s: the dataset it was saved with is neither at %s nor at %s "
                  "(%s from the checkpoint): give its folder with --dataset FOLDER"),
                display, absolute, joined, relative);
  else
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("--resume %s: the dataset it was saved with, %s, is not there: give its "
                  "folder with --dataset FOLDER"),
                display, absolute != NULL ? absolute : saved);
  return FALSE;
}

/* ---- which dataset -------------------------------------------------------------- */

void
tdm_checkpoint_set_dataset_content(TdmCheckpoint *ckpt, const TdmDataset *train)
{
  g_return_if_fail(ckpt != NULL && train != NULL);
  g_autofree int *counts = g_new0(int, MAX(1, train->classes));
  for (int i = 0; i < train->count; i++)
    if (train->labels[i] < train->classes)
      counts[train->labels[i]]++;
  GString *text = g_string_new("[");
  for (int k = 0; k < train->classes; k++)
    g_string_append_printf(text, "%s%d", k > 0 ? "," : "", counts[k]);
  g_string_append_c(text, ']');
  tdm_checkpoint_set_metadata(ckpt, "class_counts", text->str);
  g_string_free(text, TRUE);
}

/* A metadata value that is a JSON list, or NULL (absent, or not a list: a checkpoint
 * that says nothing usable about its dataset, which the name then decides). */
static JsonArray *
metadata_list(TdmCheckpoint *ckpt, const char *key, JsonNode **root)
{
  const char *text = tdm_checkpoint_get_metadata(ckpt, key);
  *root = text != NULL ? tdm_json_parse(text, -1, TDM_ENGINE_ERROR_CHECKPOINT, NULL) : NULL;
  if (*root == NULL || !JSON_NODE_HOLDS_ARRAY(*root))
    return NULL;
  return json_node_get_array(*root);
}

/* Entry k of a JSON list as a number, or −1. */
static gint64
list_count(JsonArray *list, guint k)
{
  JsonNode *node = json_array_get_element(list, k);
  if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64)
    return -1;
  return json_node_get_int(node);
}

/* Entry k of a JSON list as a text, or NULL. */
static const char *
list_text(JsonArray *list, guint k)
{
  JsonNode *node = json_array_get_element(list, k);
  if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string(node);
}

/* How the dataset recorded in ckpt differs from train, in words, or NULL when nothing
 * recorded differs. *known: the checkpoint records the training samples of each class,
 * so its content alone says which dataset it is. */
static char *
content_difference(TdmCheckpoint *ckpt, const TdmDataset *train, gboolean *known)
{
  const char *shape = tdm_checkpoint_get_metadata(ckpt, "input_shape");
  int h, w, c;
  if (shape != NULL && sscanf(shape, "%d,%d,%d", &h, &w, &c) == 3 &&
      (h != train->height || w != train->width || c != train->channels))
    return g_strdup_printf(_("its samples were %d×%d×%d, this run's are %d×%d×%d"), h, w, c,
                           train->height, train->width, train->channels);

  g_autoptr(JsonNode) counts_root = NULL;
  g_autoptr(JsonNode) names_root = NULL;
  JsonArray *counts = metadata_list(ckpt, "class_counts", &counts_root);
  JsonArray *names = metadata_list(ckpt, "class_names", &names_root);
  *known = counts != NULL && shape != NULL;
  guint classes = counts != NULL ? json_array_get_length(counts)
                  : names != NULL ? json_array_get_length(names) : (guint)train->classes;
  if (classes != (guint)train->classes)
    return g_strdup_printf(_("it had %u classes, this run's dataset has %d"), classes,
                           train->classes);

  for (guint k = 0; names != NULL && k < classes; k++) {
    const char *saved = list_text(names, k);
    g_autofree char *number = g_strdup_printf("%u", k);
    const char *ours = train->class_names != NULL && train->class_names[k] != NULL
                           ? train->class_names[k] : number;
    if (saved == NULL || !g_str_equal(saved, ours))
      return g_strdup_printf(_("its class %u was “%s”, this run's is “%s”"), k,
                             saved != NULL ? saved : "?", ours);
  }
  if (counts == NULL)
    return NULL;
  g_autofree int *ours = g_new0(int, MAX(1, train->classes));
  for (int i = 0; i < train->count; i++)
    if (train->labels[i] < train->classes)
      ours[train->labels[i]]++;
  for (guint k = 0; k < classes; k++) {
    gint64 saved = list_count(counts, k);
    if (saved != ours[k]) {
      g_autofree char *number = g_strdup_printf("%u", k);
      g_autofree char *had = g_strdup_printf("%" G_GINT64_FORMAT, saved);
      const char *name = train->class_names != NULL && train->class_names[k] != NULL
                             ? train->class_names[k] : number;
      return g_strdup_printf(_("its class “%s” had %s training samples, this run's has %d"),
                             name, saved >= 0 ? had : "?", ours[k]);
    }
  }
  return NULL;
}

gboolean
tdm_checkpoint_same_dataset(TdmCheckpoint *ckpt, const char *checkpoint_path,
                            const TdmDatasetPair *data, GError **error)
{
  g_return_val_if_fail(ckpt != NULL && checkpoint_path != NULL && data != NULL, FALSE);
  const char *name = tdm_checkpoint_get_metadata(ckpt, "dataset");
  gboolean same_name = name != NULL && g_str_equal(name, data->name);
  gboolean known = FALSE;
  g_autofree char *difference = content_difference(ckpt, data->train, &known);
  /* Checkpoints of earlier versions record the classes' names at most: their name
   * must match, or their names and shape must, with something to compare. */
  if (difference == NULL &&
      (known || same_name ||
       (tdm_checkpoint_get_metadata(ckpt, "class_names") != NULL &&
        tdm_checkpoint_get_metadata(ckpt, "input_shape") != NULL)))
    return TRUE;
  if (difference == NULL)
    difference = g_strdup(_("the checkpoint, of an earlier Tandem, does not record enough "
                            "of its dataset to know it by its content"));
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
              _("%s: the checkpoint was saved training on dataset “%s”, but this run uses "
                "“%s”, another one (%s); resume with the dataset it was saved with"),
              checkpoint_path, name != NULL ? name : "(none)", data->name, difference);
  return FALSE;
}
