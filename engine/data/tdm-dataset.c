/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dataset.c — TdmDataset's life cycle and tdm_dataset_open, which turns a name
 * or a folder into a pair of splits by asking the format loaders in turn. The file
 * formats themselves live in tdm-dataset-idx.c, tdm-dataset-cifar.c,
 * tdm-dataset-folder.c and tdm-dataset-synthetic.c; this file reads no dataset bytes. */
#include "tdm-dataset.h"
#include "tdm-i18n.h"
#include "tdm-dataset-folder.h"
#include "tdm-error.h"
#include "tdm-file.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

TdmDataset *
tdm_dataset_new(const char *name, int count, int height, int width, int channels, int classes)
{
  g_return_val_if_fail(count >= 0 && height > 0 && width > 0 && channels > 0, NULL);
  g_return_val_if_fail(classes > 0 && classes <= 256, NULL);

  TdmDataset *d = g_new0(TdmDataset, 1);
  d->name = g_strdup(name != NULL ? name : "dataset");
  d->count = count;
  d->height = height;
  d->width = width;
  d->channels = channels;
  d->classes = classes;
  /* One spare byte keeps the allocation non-empty when count is 0, so the
   * pointers are never NULL for a valid dataset. */
  d->images = g_malloc0((gsize)count * (gsize)tdm_dataset_sample_size(d) + 1);
  d->labels = g_malloc0((gsize)count + 1);
  d->class_names = NULL;
  return d;
}

TdmDataset *
tdm_dataset_new_take(const char *name, int count, int height, int width, int channels,
                     int classes, uint8_t *images, uint8_t *labels)
{
  g_return_val_if_fail(count > 0 && height > 0 && width > 0 && channels > 0, NULL);
  g_return_val_if_fail(classes > 0 && classes <= 256, NULL);
  g_return_val_if_fail(images != NULL && labels != NULL, NULL);

  TdmDataset *d = g_new0(TdmDataset, 1);
  d->name = g_strdup(name != NULL ? name : "dataset");
  d->count = count;
  d->height = height;
  d->width = width;
  d->channels = channels;
  d->classes = classes;
  d->images = images;
  d->labels = labels;
  return d;
}

void
tdm_dataset_free(TdmDataset *d)
{
  if (d == NULL)
    return;
  g_free(d->name);
  g_free(d->images);
  g_free(d->labels);
  g_strfreev(d->class_names);
  g_free(d);
}

void
tdm_dataset_pair_free(TdmDatasetPair *pair)
{
  if (pair == NULL)
    return;
  g_free(pair->name);
  g_free(pair->source);
  g_free(pair->notice);
  tdm_dataset_free(pair->train);
  tdm_dataset_free(pair->test);
  g_free(pair);
}

/* In tdm-dataset-idx.c: loads an IDX folder as the named set, whatever the folder
 * is called (TANDEM_MNIST_DIR=/data/x still gives "mnist" and its 10 classes). */
TdmDatasetPair *tdm_dataset_load_idx_folder_as(const char *folder, const char *kind,
                                               int classes, GError **error);

static char *
tdm_dataset_expand_path(const char *path)
{
  if (path[0] == '~' && (path[1] == '\0' || path[1] == G_DIR_SEPARATOR))
    return g_build_filename(g_get_home_dir(), path + 1, NULL);
  return g_strdup(path);
}

static gboolean
tdm_dataset_has_idx(const char *folder)
{
  static const char *const bases[] = {"train-images-idx3-ubyte", "t10k-images-idx3-ubyte"};
  for (guint i = 0; i < G_N_ELEMENTS(bases); i++) {
    g_autofree char *raw = g_build_filename(folder, bases[i], NULL);
    g_autofree char *gz = g_strconcat(raw, ".gz", NULL);
    if (tdm_file_present(raw) || tdm_file_present(gz))
      return TRUE;
  }
  return FALSE;
}

static gboolean
tdm_dataset_has_cifar10(const char *folder)
{
  static const char *const places[] = {"", "cifar-10-batches-bin"};
  static const char *const files[] = {"data_batch_1.bin", "test_batch.bin"};
  for (guint i = 0; i < G_N_ELEMENTS(places); i++)
    for (guint j = 0; j < G_N_ELEMENTS(files); j++) {
      g_autofree char *path = g_build_filename(folder, places[i], files[j], NULL);
      if (tdm_file_present(path))
        return TRUE;
    }
  return FALSE;
}

/* Says precisely why a folder cannot be used, before any loader tries it: the
 * loaders' own errors would only say that a file is missing. */
static gboolean
tdm_dataset_check_folder(const char *folder, const char *hint, GError **error)
{
  if (!g_file_test(folder, G_FILE_TEST_EXISTS)) {
    /* A link that leads nowhere is not "no such folder": say what it is. */
    struct stat st;
    if (lstat(folder, &st) == 0 && S_ISLNK(st.st_mode)) {
      int err = stat(folder, &st) == 0 ? 0 : errno;
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, "%s: %s%s", folder,
                  err == ELOOP ? "a symbolic link loop" : "a dangling symbolic link",
                  hint != NULL ? hint : "");
      return FALSE;
    }
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, _("%s: no such folder%s"),
                folder, hint != NULL ? hint : "");
    return FALSE;
  }
  if (!g_file_test(folder, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: not a folder (expected a folder of IDX files, CIFAR-10 batches or "
                "class folders of images)"),
                folder);
    return FALSE;
  }
  GError *local = NULL;
  GDir *dir = g_dir_open(folder, 0, &local);
  if (dir == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("%s: cannot read the folder: %s"), folder, local->message);
    g_error_free(local);
    return FALSE;
  }
  g_dir_close(dir);
  return TRUE;
}

static TdmDatasetPair *
tdm_dataset_open_folder(const char *folder, const TdmImageOptions *options, GError **error)
{
  if (!tdm_dataset_check_folder(folder, NULL, error))
    return NULL;
  if (tdm_dataset_has_idx(folder))
    return tdm_dataset_load_idx_folder(folder, error);
  if (tdm_dataset_has_cifar10(folder))
    return tdm_dataset_load_cifar10_folder(folder, error);
  if (tdm_dataset_is_image_folder(folder))
    return tdm_dataset_load_image_folder(folder, options,
                                         options != NULL ? options->progress : NULL,
                                         options != NULL ? options->progress_data : NULL,
                                         options != NULL ? options->cancellable : NULL, error);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
              _("%s: holds neither IDX files (train-images-idx3-ubyte[.gz] …), CIFAR-10 "
              "binary batches (data_batch_1.bin … test_batch.bin) nor class folders of "
              "images (CLASS/IMAGE.png, or train/CLASS/… and test/CLASS/…)"),
              folder);
  return NULL;
}

static TdmDatasetPair *
tdm_dataset_open_named_idx(const char *name, const char *folder, const char *hint,
                           GError **error)
{
  g_autofree char *full_hint = g_strdup_printf(" (dataset “%s”; %s)", name, hint);
  if (!tdm_dataset_check_folder(folder, full_hint, error))
    return NULL;
  return tdm_dataset_load_idx_folder_as(folder, name, 10, error);
}

/* Where "mnist" is looked for: TANDEM_MNIST_DIR, else Debian's usual place. */
static char *
tdm_dataset_mnist_folder(void)
{
  const char *env = g_getenv("TANDEM_MNIST_DIR");
  if (env != NULL && *env != '\0')
    return tdm_dataset_expand_path(env);
  return g_strdup("/usr/share/datasets/mnist");
}

gboolean
tdm_dataset_is_installed(const char *name)
{
  g_return_val_if_fail(name != NULL, FALSE);

  if (g_str_equal(name, "synthetic"))
    return TRUE;
  if (g_str_equal(name, "fashion-mnist"))
    return tdm_dataset_has_idx(TDM_FASHION_MNIST_DIR);
  if (g_str_equal(name, "mnist")) {
    g_autofree char *folder = tdm_dataset_mnist_folder();
    return tdm_dataset_has_idx(folder);
  }
  return FALSE;
}

char *
tdm_dataset_folder_path(const char *name_or_path)
{
  g_return_val_if_fail(name_or_path != NULL, NULL);
  if (*name_or_path == '\0' || g_str_equal(name_or_path, "synthetic") ||
      g_str_equal(name_or_path, "fashion-mnist") || g_str_equal(name_or_path, "mnist"))
    return NULL;
  g_autofree char *expanded = tdm_dataset_expand_path(name_or_path);
  return g_canonicalize_filename(expanded, NULL);
}

TdmDatasetPair *
tdm_dataset_open(const char *name_or_path, GError **error)
{
  return tdm_dataset_open_with(name_or_path, NULL, error);
}

TdmDatasetPair *
tdm_dataset_open_with(const char *name_or_path, const TdmImageOptions *image_options,
                      GError **error)
{
  g_return_val_if_fail(name_or_path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  if (g_str_equal(name_or_path, "synthetic"))
    return tdm_dataset_synthetic(0, 60000, 10000);

  if (g_str_equal(name_or_path, "fashion-mnist"))
    return tdm_dataset_open_named_idx(
        "fashion-mnist", TDM_FASHION_MNIST_DIR,
        "install Debian's dataset-fashion-mnist package or give a folder", error);

  if (g_str_equal(name_or_path, "mnist")) {
    const char *env = g_getenv("TANDEM_MNIST_DIR");
    g_autofree char *folder = tdm_dataset_mnist_folder();
    return tdm_dataset_open_named_idx("mnist", folder,
                                      env != NULL && *env != '\0'
                                          ? "the folder comes from TANDEM_MNIST_DIR"
                                          : "set TANDEM_MNIST_DIR to its folder",
                                      error);
  }

  if (*name_or_path == '\0') {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("no dataset given: expected fashion-mnist, mnist, synthetic or a folder"));
    return NULL;
  }

  g_autofree char *folder = tdm_dataset_expand_path(name_or_path);
  /* A bare word that is not a folder is most likely a misspelt name. */
  if (!tdm_file_present(folder) && strchr(folder, G_DIR_SEPARATOR) == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                _("unknown dataset “%s”: expected fashion-mnist, mnist, synthetic or a folder "
                "of IDX files, CIFAR-10 batches or class folders of images"),
                name_or_path);
    return NULL;
  }
  return tdm_dataset_open_folder(folder, image_options, error);
}
