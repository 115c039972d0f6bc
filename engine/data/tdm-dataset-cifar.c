/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dataset-cifar.c — the CIFAR-10 binary batches (data_batch_1.bin …
 * data_batch_5.bin, test_batch.bin), in a folder or its cifar-10-batches-bin/
 * subfolder. Records are one label byte and a 32×32 image stored plane by plane
 * (CHW); they are turned into HWC here so that every dataset looks alike to the
 * rest of the engine. Not CIFAR-100 (two label bytes) nor the Python pickles. */
#include "tdm-dataset.h"
#include "tdm-i18n.h"
#include "tdm-error.h"

#include "tdm-file.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define TDM_CIFAR_SIDE 32
#define TDM_CIFAR_PLANE (TDM_CIFAR_SIDE * TDM_CIFAR_SIDE)
#define TDM_CIFAR_IMAGE (3 * TDM_CIFAR_PLANE)
#define TDM_CIFAR_RECORD (1 + TDM_CIFAR_IMAGE)
#define TDM_CIFAR_CLASSES 10
#define TDM_CIFAR_TRAIN_BATCHES 5

static const char *const tdm_cifar10_names[TDM_CIFAR_CLASSES] = {
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
};

/* Returns the number of records in path, checking only its size. */
static gboolean
tdm_cifar_count(const char *path, int *records, GError **error)
{
  struct stat st;
  GError *local = NULL;
  int fd = tdm_file_open_regular(path, "", TDM_ENGINE_ERROR_DATASET, &st, &local);
  if (fd < 0) {
    if (!tdm_file_present(path))
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  _("%s: missing batch file (CIFAR-10 needs data_batch_1.bin … "
                  "data_batch_5.bin and test_batch.bin)"),
                  path);
    else
      g_propagate_error(error, local), local = NULL;
    g_clear_error(&local);
    return FALSE;
  }
  close(fd);
  goffset size = st.st_size;
  if (size <= 0 || size % TDM_CIFAR_RECORD != 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: size %" G_GOFFSET_FORMAT " bytes is not a positive multiple of the "
                "%d-byte CIFAR-10 record (1 label byte + 32×32×3 pixels)",
                path, size, TDM_CIFAR_RECORD);
    return FALSE;
  }
  if (size / TDM_CIFAR_RECORD > G_MAXINT32 / 8) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: absurd size %" G_GOFFSET_FORMAT " bytes for a CIFAR-10 batch", path, size);
    return FALSE;
  }
  *records = (int)(size / TDM_CIFAR_RECORD);
  return TRUE;
}

/* Appends path's records to d at index first. */
static gboolean
tdm_cifar_read(const char *path, TdmDataset *d, int first, int records, GError **error)
{
  struct stat st;
  int fd = tdm_file_open_regular(path, "", TDM_ENGINE_ERROR_DATASET, &st, error);
  if (fd < 0)
    return FALSE;
  /* The size was checked a moment ago; a file that changed since is not trusted. */
  gsize length = (gsize)records * TDM_CIFAR_RECORD;
  if ((guint64)st.st_size != length) {
    close(fd);
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                "%s: changed size while being read (%" G_GOFFSET_FORMAT
                " bytes, expected %" G_GSIZE_FORMAT ")",
                path, (goffset)st.st_size, length);
    return FALSE;
  }
  g_autofree char *contents = g_malloc(length);
  gsize have = 0;
  while (have < length) {
    ssize_t n = read(fd, contents + have, length - have);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = n < 0 ? errno : 0;
      close(fd);
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET, _("%s: cannot read: %s"),
                  path, err ? g_strerror(err) : "the file shrank while being read");
      return FALSE;
    }
    have += (gsize)n;
  }
  close(fd);

  for (int r = 0; r < records; r++) {
    const guint8 *record = (const guint8 *)contents + (gsize)r * TDM_CIFAR_RECORD;
    if (record[0] >= TDM_CIFAR_CLASSES) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  "%s: label %d in record %d (byte offset %" G_GSIZE_FORMAT
                  ") is out of range: CIFAR-10 has 10 classes (0 to 9)",
                  path, record[0], r, (gsize)r * TDM_CIFAR_RECORD);
      return FALSE;
    }
    d->labels[first + r] = record[0];
    const guint8 *red = record + 1, *green = red + TDM_CIFAR_PLANE,
                 *blue = green + TDM_CIFAR_PLANE;
    guint8 *out = d->images + (gsize)(first + r) * TDM_CIFAR_IMAGE;
    for (int p = 0; p < TDM_CIFAR_PLANE; p++) {
      out[3 * p + 0] = red[p];
      out[3 * p + 1] = green[p];
      out[3 * p + 2] = blue[p];
    }
  }
  return TRUE;
}

static TdmDataset *
tdm_cifar_load_split(const char *folder, const char *const *files, int n_files,
                     const char *name, GError **error)
{
  g_auto(GStrv) paths = g_new0(char *, n_files + 1);
  g_autofree int *records = g_new0(int, n_files);
  int total = 0;

  for (int i = 0; i < n_files; i++)
    paths[i] = g_build_filename(folder, files[i], NULL);

  /* Every size is checked before anything is read, so a missing or short last
   * batch is reported at once rather than after reading 150 MB. */
  for (int i = 0; i < n_files; i++) {
    if (!tdm_cifar_count(paths[i], &records[i], error))
      return NULL;
    if (total > G_MAXINT32 / 8 - records[i]) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                  _("%s: absurd total size of the CIFAR-10 batches"), folder);
      return NULL;
    }
    total += records[i];
  }

  TdmDataset *d =
      tdm_dataset_new(name, total, TDM_CIFAR_SIDE, TDM_CIFAR_SIDE, 3, TDM_CIFAR_CLASSES);
  int first = 0;
  for (int i = 0; i < n_files; i++) {
    if (!tdm_cifar_read(paths[i], d, first, records[i], error)) {
      tdm_dataset_free(d);
      return NULL;
    }
    first += records[i];
  }
  d->class_names = g_new0(char *, TDM_CIFAR_CLASSES + 1);
  for (int c = 0; c < TDM_CIFAR_CLASSES; c++)
    d->class_names[c] = g_strdup(tdm_cifar10_names[c]);
  return d;
}

TdmDatasetPair *
tdm_dataset_load_cifar10_folder(const char *folder, GError **error)
{
  g_return_val_if_fail(folder != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  /* The official archive unpacks into cifar-10-batches-bin/; people point at
   * either the folder they unpacked into or that subfolder. */
  g_autofree char *inner = g_build_filename(folder, "cifar-10-batches-bin", NULL);
  g_autofree char *probe = g_build_filename(folder, "data_batch_1.bin", NULL);
  g_autofree char *probe_test = g_build_filename(folder, "test_batch.bin", NULL);
  const char *dir = folder;
  if (!tdm_file_present(probe) && !tdm_file_present(probe_test) &&
      g_file_test(inner, G_FILE_TEST_IS_DIR))
    dir = inner;

  static const char *const train_files[TDM_CIFAR_TRAIN_BATCHES] = {
      "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
      "data_batch_4.bin", "data_batch_5.bin",
  };
  static const char *const test_files[] = {"test_batch.bin"};

  g_autoptr(TdmDataset) train =
      tdm_cifar_load_split(dir, train_files, TDM_CIFAR_TRAIN_BATCHES, "cifar10 (train)", error);
  if (train == NULL)
    return NULL;
  g_autoptr(TdmDataset) test =
      tdm_cifar_load_split(dir, test_files, 1, "cifar10 (test)", error);
  if (test == NULL)
    return NULL;

  TdmDatasetPair *pair = g_new0(TdmDatasetPair, 1);
  pair->name = g_strdup("cifar10");
  pair->source = g_strdup(dir);
  pair->train = g_steal_pointer(&train);
  pair->test = g_steal_pointer(&test);
  return pair;
}
