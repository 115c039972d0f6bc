/* SPDX-License-Identifier: GPL-3.0-or-later */
/* synthetic-idx.h — the built-in synthetic dataset at a size the test chooses, written
 * as raw IDX files (train-… and t10k-…), so a test can name it as a dataset folder.
 *
 * The dataset "synthetic" has 60,000 training and 10,000 test images, generated anew
 * by every run, and a run cut short by max_steps evaluates all 10,000: most of what
 * a short test run costs. A few hundred images of the same generator say the same
 * thing about what a test checks. Header-only, so engine tests and the CLI's helpers
 * share it.
 */
#pragma once

#include "tdm-dataset.h"

#include <glib.h>
#include <errno.h>
#include <glib/gstdio.h>

static inline void
test_idx_put_be32(GString *out, guint32 v)
{
  guint32 be = GUINT32_TO_BE(v);
  g_string_append_len(out, (const char *)&be, 4);
}

static inline gboolean
test_write_idx_split(const char *folder, const char *prefix, const TdmDataset *d,
                     GError **error)
{
  g_autoptr(GString) images = g_string_new(NULL);
  test_idx_put_be32(images, 0x00000803);
  test_idx_put_be32(images, d->count);
  test_idx_put_be32(images, d->height);
  test_idx_put_be32(images, d->width);
  g_string_append_len(images, (const char *)d->images,
                      (gssize)d->count * tdm_dataset_sample_size(d));
  g_autoptr(GString) labels = g_string_new(NULL);
  test_idx_put_be32(labels, 0x00000801);
  test_idx_put_be32(labels, d->count);
  g_string_append_len(labels, (const char *)d->labels, d->count);

  g_autofree char *images_path = g_strdup_printf("%s/%s-images-idx3-ubyte", folder, prefix);
  g_autofree char *labels_path = g_strdup_printf("%s/%s-labels-idx1-ubyte", folder, prefix);
  return g_file_set_contents(images_path, images->str, images->len, error) &&
         g_file_set_contents(labels_path, labels->str, labels->len, error);
}

/* Writes tdm_dataset_synthetic(seed, train, test) into folder (created if missing). */
static inline gboolean
test_write_synthetic_idx(const char *folder, guint64 seed, int train, int test,
                         GError **error)
{
  if (g_mkdir_with_parents(folder, 0755) != 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: cannot create",
                folder);
    return FALSE;
  }
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_synthetic(seed, train, test);
  return test_write_idx_split(folder, "train", pair->train, error) &&
         test_write_idx_split(folder, "t10k", pair->test, error);
}

/* A temporary folder holding such a set; test_remove_synthetic_idx removes it. */
static inline char *
test_synthetic_idx_new(guint64 seed, int train, int test)
{
  g_autoptr(GError) error = NULL;
  char *folder = g_dir_make_tmp("tandem-synthetic-XXXXXX", &error);
  g_assert_no_error(error);
  g_assert_true(test_write_synthetic_idx(folder, seed, train, test, &error));
  g_assert_no_error(error);
  return folder;
}

static inline void
test_remove_synthetic_idx(char *folder)
{
  static const char *const names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                      "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *path = g_build_filename(folder, names[i], NULL);
    g_remove(path);
  }
  g_rmdir(folder);
  g_free(folder);
}
