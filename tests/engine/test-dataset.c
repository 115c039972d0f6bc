/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-dataset.c — the dataset loaders against files written here: small IDX sets,
 * raw and gzipped, every byte compared; malformed files, each expected to fail
 * with its own message; CIFAR-10 batches; the synthetic set's determinism and
 * balance; and Fashion-MNIST itself when the Debian package is installed. It does
 * not test training on the data (test-trainer.c does). */
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "remove-tree.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------------- */

static char *
make_tmp(void)
{
  GError *error = NULL;
  char *dir = g_dir_make_tmp("tandem-dataset-XXXXXX", &error);
  g_assert_no_error(error);
  return dir;
}

static GBytes *
gzip_bytes(const guint8 *data, gsize len)
{
  g_autoptr(GZlibCompressor) deflater = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 9);
  g_autoptr(GOutputStream) memory = g_memory_output_stream_new_resizable();
  g_autoptr(GOutputStream) out = g_converter_output_stream_new(memory, G_CONVERTER(deflater));
  GError *error = NULL;
  gsize written = 0;
  g_assert_true(g_output_stream_write_all(out, data, len, &written, NULL, &error));
  g_assert_no_error(error);
  g_assert_true(g_output_stream_close(out, NULL, &error));
  g_assert_no_error(error);
  return g_memory_output_stream_steal_as_bytes(G_MEMORY_OUTPUT_STREAM(memory));
}

/* Writes data to folder/name, gzipped when gzip is set (the name is taken as is). */
static char *
write_file(const char *folder, const char *name, const guint8 *data, gsize len, gboolean gzip)
{
  char *path = g_build_filename(folder, name, NULL);
  GError *error = NULL;
  if (gzip) {
    g_autoptr(GBytes) packed = gzip_bytes(data, len);
    gsize packed_len = 0;
    const char *packed_data = g_bytes_get_data(packed, &packed_len);
    g_file_set_contents(path, packed_data, (gssize)packed_len, &error);
  } else {
    g_file_set_contents(path, (const char *)data, (gssize)len, &error);
  }
  g_assert_no_error(error);
  return path;
}

static void
put_be32(GByteArray *a, guint32 v)
{
  guint8 b[4] = {v >> 24, v >> 16, v >> 8, v};
  g_byte_array_append(a, b, 4);
}

static guint8
pixel_at(int split, int i, int k)
{
  return (guint8)(i * 31 + k * 7 + split * 101 + 3);
}

static GByteArray *
idx_images(int split, int count, int h, int w)
{
  GByteArray *a = g_byte_array_new();
  put_be32(a, 0x00000803);
  put_be32(a, count);
  put_be32(a, h);
  put_be32(a, w);
  for (int i = 0; i < count; i++)
    for (int k = 0; k < h * w; k++) {
      guint8 p = pixel_at(split, i, k);
      g_byte_array_append(a, &p, 1);
    }
  return a;
}

static guint8
label_at(int split, int i)
{
  return (guint8)((i * 3 + split) % 10);
}

static GByteArray *
idx_labels(int split, int count)
{
  GByteArray *a = g_byte_array_new();
  put_be32(a, 0x00000801);
  put_be32(a, count);
  for (int i = 0; i < count; i++) {
    guint8 l = label_at(split, i);
    g_byte_array_append(a, &l, 1);
  }
  return a;
}

#define TRAIN_N 23
#define TEST_N 7
#define IMG_H 5
#define IMG_W 4

/* A good IDX folder; bits 0-3 of gz_mask say which of the four files are gzipped,
 * and gzipped files are named .gz unless bit 4 drops the suffix from every name or
 * bit 5 puts it on every name, whatever the content: the format is sniffed. */
static void
write_idx_folder(const char *folder, guint gz_mask)
{
  const char *bases[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  GByteArray *files[4] = {idx_images(0, TRAIN_N, IMG_H, IMG_W), idx_labels(0, TRAIN_N),
                          idx_images(1, TEST_N, IMG_H, IMG_W), idx_labels(1, TEST_N)};
  for (int i = 0; i < 4; i++) {
    gboolean gz = (gz_mask >> i) & 1;
    gboolean suffix = (gz_mask & 16) ? FALSE : (gz_mask & 32) ? TRUE : gz;
    g_autofree char *name = suffix ? g_strconcat(bases[i], ".gz", NULL) : g_strdup(bases[i]);
    g_autofree char *path = write_file(folder, name, files[i]->data, files[i]->len, gz);
    g_byte_array_unref(files[i]);
  }
}

static void
check_split(const TdmDataset *d, int split, int count)
{
  g_assert_nonnull(d);
  g_assert_cmpint(d->count, ==, count);
  g_assert_cmpint(d->height, ==, IMG_H);
  g_assert_cmpint(d->width, ==, IMG_W);
  g_assert_cmpint(d->channels, ==, 1);
  g_assert_cmpint(d->classes, ==, 10);
  for (int i = 0; i < count; i++) {
    g_assert_cmpuint(d->labels[i], ==, label_at(split, i));
    for (int k = 0; k < IMG_H * IMG_W; k++)
      g_assert_cmpuint(d->images[i * IMG_H * IMG_W + k], ==, pixel_at(split, i, k));
  }
}

/* Asserts a dataset error whose message holds every fragment given. */
static void
assert_dataset_error(GError *error, ...)
{
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET);
  va_list args;
  va_start(args, error);
  const char *fragment;
  while ((fragment = va_arg(args, const char *)) != NULL) {
    if (strstr(error->message, fragment) == NULL)
      g_error("error message “%s” lacks “%s”", error->message, fragment);
  }
  va_end(args);
  g_test_message("expected error: %s", error->message);
}

/* ---- IDX: good files -------------------------------------------------------- */

static void
test_idx_roundtrip(gconstpointer data)
{
  guint gz_mask = GPOINTER_TO_UINT(data);
  g_autofree char *dir = make_tmp();
  write_idx_folder(dir, gz_mask);

  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_load_idx_folder(dir, &error);
  g_assert_no_error(error);
  check_split(pair->train, 0, TRAIN_N);
  check_split(pair->test, 1, TEST_N);
  g_assert_cmpstr(pair->source, ==, dir);
  g_assert_nonnull(pair->train->class_names);
  g_assert_cmpstr(pair->train->class_names[3], ==, "3");
  g_assert_null(pair->train->class_names[10]);

  /* The same through tdm_dataset_open, which detects the format. */
  g_autoptr(TdmDatasetPair) opened = tdm_dataset_open(dir, &error);
  g_assert_no_error(error);
  check_split(opened->train, 0, TRAIN_N);
  check_split(opened->test, 1, TEST_N);
  test_remove_tree(dir);
}

static void
test_idx_single(void)
{
  g_autofree char *dir = make_tmp();
  g_autoptr(GByteArray) images = idx_images(0, TRAIN_N, IMG_H, IMG_W);
  g_autoptr(GByteArray) labels = idx_labels(0, TRAIN_N);
  g_autofree char *ip = write_file(dir, "i.gz", images->data, images->len, TRUE);
  g_autofree char *lp = write_file(dir, "l", labels->data, labels->len, FALSE);

  GError *error = NULL;
  g_autoptr(TdmDataset) d = tdm_dataset_load_idx(ip, lp, "tiny", &error);
  g_assert_no_error(error);
  check_split(d, 0, TRAIN_N);
  g_assert_cmpstr(d->name, ==, "tiny");
  test_remove_tree(dir);
}

/* MNIST-shaped sets have 10 classes even when a small subset lacks some. */
static void
test_idx_mnist_classes(void)
{
  g_autofree char *dir = make_tmp();
  g_autoptr(GByteArray) images = idx_images(0, 3, 28, 28);
  g_autoptr(GByteArray) labels = idx_labels(0, 3); /* labels 0, 3, 6 */
  g_autofree char *ip = write_file(dir, "i", images->data, images->len, FALSE);
  g_autofree char *lp = write_file(dir, "l", labels->data, labels->len, FALSE);
  GError *error = NULL;
  g_autoptr(TdmDataset) d = tdm_dataset_load_idx(ip, lp, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(d->classes, ==, 10);
  test_remove_tree(dir);
}

/* Only what is there is offered: "mnist" follows TANDEM_MNIST_DIR. */
static void
test_is_installed(void)
{
  g_autofree char *dir = make_tmp();
  g_autofree char *empty = g_build_filename(dir, "empty", NULL);

  g_assert_true(tdm_dataset_is_installed("synthetic"));
  g_assert_false(tdm_dataset_is_installed("no-such-set"));
  g_assert_false(tdm_dataset_is_installed(dir));
  g_assert_cmpint(tdm_dataset_is_installed("fashion-mnist"), ==,
                  g_file_test(TDM_FASHION_MNIST_DIR, G_FILE_TEST_IS_DIR));

  g_assert_cmpint(g_mkdir(empty, 0700), ==, 0);
  g_setenv("TANDEM_MNIST_DIR", empty, TRUE);
  g_assert_false(tdm_dataset_is_installed("mnist"));
  write_idx_folder(dir, 0);
  g_setenv("TANDEM_MNIST_DIR", dir, TRUE);
  g_assert_true(tdm_dataset_is_installed("mnist"));
  g_unsetenv("TANDEM_MNIST_DIR");
  test_remove_tree(dir);
}

/* ---- IDX: malformed files ---------------------------------------------------- */

typedef enum {
  BREAK_WRONG_MAGIC,
  BREAK_LABEL_MAGIC,
  BREAK_ELEMENT_TYPE,
  BREAK_SHORT_MAGIC,
  BREAK_SHORT_HEADER,
  BREAK_TRUNCATED,
  BREAK_TRAILING,
  BREAK_COUNT_MISMATCH,
  BREAK_ZERO_HEIGHT,
  BREAK_HUGE_WIDTH,
  BREAK_ZERO_COUNT,
  BREAK_HUGE_COUNT,
  BREAK_EMPTY_FILE,
} Breakage;

typedef struct {
  const char *name;
  Breakage breakage;
  gboolean in_labels; /* the message names the labels file rather than the images */
  const char *fragments[3];
} BrokenCase;

static const BrokenCase broken_cases[] = {
    {"wrong-magic", BREAK_WRONG_MAGIC, FALSE, {"wrong magic", "0x12340803"}},
    {"labels-magic-in-images", BREAK_LABEL_MAGIC, FALSE, {"wrong magic", "0x00000801"}},
    {"element-type", BREAK_ELEMENT_TYPE, FALSE, {"element type 0x0D", "float"}},
    {"short-magic", BREAK_SHORT_MAGIC, FALSE, {"truncated header", "holds 3 bytes"}},
    {"short-header", BREAK_SHORT_HEADER, FALSE, {"truncated header", "16 header bytes"}},
    {"truncated-data", BREAK_TRUNCATED, FALSE, {"truncated", "23 images of 5×4", "460 bytes"}},
    {"trailing", BREAK_TRAILING, FALSE, {"trailing data", "3 bytes"}},
    {"count-mismatch", BREAK_COUNT_MISMATCH, TRUE, {"22 labels", "23 images", "must match"}},
    {"zero-height", BREAK_ZERO_HEIGHT, FALSE, {"absurd image height 0"}},
    {"huge-width", BREAK_HUGE_WIDTH, FALSE, {"absurd image width 5000"}},
    {"zero-count", BREAK_ZERO_COUNT, FALSE, {"absurd image count 0"}},
    {"huge-count", BREAK_HUGE_COUNT, FALSE, {"truncated", "2000000000 images"}},
    {"empty-file", BREAK_EMPTY_FILE, FALSE, {"truncated header", "holds 0 bytes"}},
};

static void
set_be32(GByteArray *a, int offset, guint32 v)
{
  a->data[offset] = v >> 24;
  a->data[offset + 1] = v >> 16;
  a->data[offset + 2] = v >> 8;
  a->data[offset + 3] = v;
}

static void
run_broken_case(const BrokenCase *c, gboolean gzip)
{
  g_autofree char *dir = make_tmp();
  g_autoptr(GByteArray) images = idx_images(0, TRAIN_N, IMG_H, IMG_W);
  g_autoptr(GByteArray) labels = idx_labels(0, TRAIN_N);

  switch (c->breakage) {
  case BREAK_WRONG_MAGIC:
    set_be32(images, 0, 0x12340803);
    break;
  case BREAK_LABEL_MAGIC:
    set_be32(images, 0, 0x00000801);
    break;
  case BREAK_ELEMENT_TYPE:
    set_be32(images, 0, 0x00000D03);
    break;
  case BREAK_SHORT_MAGIC:
    g_byte_array_set_size(images, 3);
    break;
  case BREAK_SHORT_HEADER:
    g_byte_array_set_size(images, 10);
    break;
  case BREAK_TRUNCATED:
    g_byte_array_set_size(images, images->len - 5);
    break;
  case BREAK_TRAILING:
    g_byte_array_append(images, (const guint8 *)"xyz", 3);
    break;
  case BREAK_COUNT_MISMATCH:
    set_be32(labels, 4, TRAIN_N - 1);
    g_byte_array_set_size(labels, labels->len - 1);
    break;
  case BREAK_ZERO_HEIGHT:
    set_be32(images, 8, 0);
    break;
  case BREAK_HUGE_WIDTH:
    set_be32(images, 12, 5000);
    break;
  case BREAK_ZERO_COUNT:
    set_be32(images, 4, 0);
    break;
  case BREAK_HUGE_COUNT:
    set_be32(images, 4, 2000000000);
    set_be32(labels, 4, 2000000000);
    break;
  case BREAK_EMPTY_FILE:
    g_byte_array_set_size(images, 0);
    break;
  }

  g_autofree char *ip =
      write_file(dir, gzip ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte",
                 images->data, images->len, gzip);
  g_autofree char *lp =
      write_file(dir, "train-labels-idx1-ubyte", labels->data, labels->len, FALSE);
  GError *error = NULL;
  g_autoptr(TdmDataset) d = tdm_dataset_load_idx(ip, lp, NULL, &error);
  g_assert_null(d);
  assert_dataset_error(error, c->in_labels ? lp : ip, c->fragments[0], c->fragments[1],
                       c->fragments[2], NULL);
  g_error_free(error);
  test_remove_tree(dir);
}

static void
test_idx_broken_raw(gconstpointer data)
{
  run_broken_case(data, FALSE);
}

static void
test_idx_broken_gzip(gconstpointer data)
{
  const BrokenCase *c = data;
  /* An empty file is not gzip at all; the raw case covers it. */
  if (c->breakage == BREAK_EMPTY_FILE) {
    g_test_skip("an empty gzip file is not a gzip file");
    return;
  }
  run_broken_case(c, TRUE);
}

static void
test_idx_bad_gzip(void)
{
  g_autofree char *dir = make_tmp();
  g_autoptr(GByteArray) images = idx_images(0, TRAIN_N, IMG_H, IMG_W);
  g_autoptr(GByteArray) labels = idx_labels(0, TRAIN_N);
  g_autoptr(GBytes) packed = gzip_bytes(images->data, images->len);
  gsize len = 0;
  guint8 *bytes = g_memdup2(g_bytes_get_data(packed, &len), g_bytes_get_size(packed));
  /* Damage the deflate stream after the 10-byte gzip header. */
  for (gsize i = 12; i < len - 8; i++)
    bytes[i] ^= 0x5a;
  g_autofree char *ip = write_file(dir, "images.gz", bytes, len, FALSE);
  g_free(bytes);
  g_autofree char *lp = write_file(dir, "labels", labels->data, labels->len, FALSE);

  GError *error = NULL;
  g_autoptr(TdmDataset) d = tdm_dataset_load_idx(ip, lp, NULL, &error);
  g_assert_null(d);
  assert_dataset_error(error, ip, "gzip", NULL);
  g_error_free(error);
  test_remove_tree(dir);
}

/* A gzip file cut short, as an interrupted download leaves it. */
static void
test_idx_cut_gzip(void)
{
  g_autofree char *dir = make_tmp();
  g_autoptr(GByteArray) images = idx_images(0, 2000, 28, 28);
  g_autoptr(GByteArray) labels = idx_labels(0, 2000);
  g_autoptr(GBytes) packed = gzip_bytes(images->data, images->len);
  gsize len = g_bytes_get_size(packed);
  g_autofree char *ip =
      write_file(dir, "images.gz", g_bytes_get_data(packed, NULL), len / 2, FALSE);
  g_autofree char *lp = write_file(dir, "labels", labels->data, labels->len, FALSE);

  GError *error = NULL;
  g_autoptr(TdmDataset) d = tdm_dataset_load_idx(ip, lp, NULL, &error);
  g_assert_null(d);
  assert_dataset_error(error, ip, "truncated gzip", NULL);
  g_error_free(error);
  test_remove_tree(dir);
}

/* A label the training set never has cannot be a class. */
static void
test_idx_label_out_of_range(void)
{
  g_autofree char *dir = make_tmp();
  write_idx_folder(dir, 0);
  g_autoptr(GByteArray) labels = idx_labels(1, TEST_N);
  labels->data[8 + 4] = 12;
  g_autofree char *lp =
      write_file(dir, "t10k-labels-idx1-ubyte", labels->data, labels->len, FALSE);
  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_load_idx_folder(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, lp, "label 12 at index 4", "out of range", NULL);
  g_clear_error(&error);
  test_remove_tree(dir);
}

/* A folder known as Fashion-MNIST or MNIST must have labels 0 to 9. */
static void
test_idx_label_out_of_range_named(void)
{
  g_autofree char *root = make_tmp();
  g_autofree char *dir = g_build_filename(root, "fashion-mnist", NULL);
  g_mkdir(dir, 0755);
  write_idx_folder(dir, 0);
  g_autoptr(GByteArray) labels = idx_labels(0, TRAIN_N);
  labels->data[8 + 17] = 10;
  g_autofree char *lp =
      write_file(dir, "train-labels-idx1-ubyte", labels->data, labels->len, FALSE);
  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, lp, "label 10 at index 17", "out of range for 10 classes (fashion-mnist has labels 0 to 9)", NULL);
  g_clear_error(&error);

  /* TANDEM_MNIST_DIR names the folder; "mnist" insists on 10 classes. */
  g_setenv("TANDEM_MNIST_DIR", dir, TRUE);
  pair = tdm_dataset_open("mnist", &error);
  g_assert_null(pair);
  assert_dataset_error(error, lp, "label 10 at index 17", "out of range for 10 classes (mnist has labels 0 to 9)", NULL);
  g_clear_error(&error);
  g_unsetenv("TANDEM_MNIST_DIR");
  test_remove_tree(root);
}

static void
test_idx_missing_file(void)
{
  g_autofree char *dir = make_tmp();
  write_idx_folder(dir, 0);
  g_autofree char *victim = g_build_filename(dir, "t10k-labels-idx1-ubyte", NULL);
  g_unlink(victim);

  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_load_idx_folder(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, dir, "missing file", "t10k-labels-idx1-ubyte", NULL);
  g_clear_error(&error);

  g_autofree char *ip = g_build_filename(dir, "train-images-idx3-ubyte", NULL);
  g_autoptr(TdmDataset) d = tdm_dataset_load_idx(ip, victim, NULL, &error);
  g_assert_null(d);
  assert_dataset_error(error, victim, "missing file", NULL);
  g_clear_error(&error);
  test_remove_tree(dir);
}

static void
test_idx_unreadable(void)
{
  g_autofree char *dir = make_tmp();
  write_idx_folder(dir, 0);

  /* A folder where a file should be: unreadable for root too. */
  g_autofree char *ip = g_build_filename(dir, "train-images-idx3-ubyte", NULL);
  g_unlink(ip);
  g_mkdir(ip, 0755);
  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_load_idx_folder(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, ip, "a folder, not a file", NULL);
  g_clear_error(&error);
  g_rmdir(ip);

  if (geteuid() == 0) {
    g_test_message("running as root: permission bits cannot make files unreadable");
  } else {
    g_autoptr(GByteArray) images = idx_images(0, TRAIN_N, IMG_H, IMG_W);
    g_autofree char *path =
        write_file(dir, "train-images-idx3-ubyte", images->data, images->len, FALSE);
    g_chmod(path, 0);
    pair = tdm_dataset_load_idx_folder(dir, &error);
    g_assert_null(pair);
    assert_dataset_error(error, path, "cannot read", NULL);
    g_clear_error(&error);

    g_chmod(dir, 0);
    pair = tdm_dataset_open(dir, &error);
    g_assert_null(pair);
    assert_dataset_error(error, dir, NULL);
    g_clear_error(&error);
    g_chmod(dir, 0755);
  }
  test_remove_tree(dir);
}

static void
test_open_errors(void)
{
  g_autofree char *dir = make_tmp();
  GError *error = NULL;

  /* An empty folder holds neither format. */
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, dir, "neither", "IDX", "CIFAR-10", NULL);
  g_clear_error(&error);
  pair = tdm_dataset_load_idx_folder(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, dir, "missing file", "train-images-idx3-ubyte", NULL);
  g_clear_error(&error);

  g_autofree char *nowhere = g_build_filename(dir, "nowhere", NULL);
  pair = tdm_dataset_open(nowhere, &error);
  g_assert_null(pair);
  assert_dataset_error(error, nowhere, "no such folder", NULL);
  g_clear_error(&error);

  g_autofree char *file = write_file(dir, "plain", (const guint8 *)"x", 1, FALSE);
  pair = tdm_dataset_open(file, &error);
  g_assert_null(pair);
  assert_dataset_error(error, file, "not a folder", NULL);
  g_clear_error(&error);

  pair = tdm_dataset_open("fashoin-mnist", &error);
  g_assert_null(pair);
  assert_dataset_error(error, "unknown dataset", "fashoin-mnist", NULL);
  g_clear_error(&error);

  g_setenv("TANDEM_MNIST_DIR", nowhere, TRUE);
  pair = tdm_dataset_open("mnist", &error);
  g_assert_null(pair);
  assert_dataset_error(error, nowhere, "TANDEM_MNIST_DIR", NULL);
  g_clear_error(&error);
  g_unsetenv("TANDEM_MNIST_DIR");
  test_remove_tree(dir);
}

static void
test_open_mnist_env(void)
{
  g_autofree char *dir = make_tmp();
  write_idx_folder(dir, 0x3);
  g_setenv("TANDEM_MNIST_DIR", dir, TRUE);
  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open("mnist", &error);
  g_assert_no_error(error);
  g_assert_cmpstr(pair->name, ==, "mnist");
  g_assert_cmpstr(pair->train->name, ==, "mnist (train)");
  check_split(pair->train, 0, TRAIN_N);
  check_split(pair->test, 1, TEST_N);
  g_unsetenv("TANDEM_MNIST_DIR");
  test_remove_tree(dir);
}

/* "~/x" is the home folder's x. HOME is set in main, before GLib caches it. */
static void
test_open_tilde(void)
{
  g_autofree char *dir = g_build_filename(g_get_home_dir(), "idx-set", NULL);
  g_mkdir(dir, 0755);
  write_idx_folder(dir, 0);
  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open("~/idx-set", &error);
  g_assert_no_error(error);
  check_split(pair->train, 0, TRAIN_N);
  g_assert_cmpstr(pair->source, ==, dir);
  test_remove_tree(dir);
}

/* ---- CIFAR-10 ------------------------------------------------------------------ */

#define CIFAR_RECORD 3073

static guint8
cifar_value(int file, int record, int channel, int pixel)
{
  return (guint8)(file * 17 + record * 29 + channel * 83 + pixel * 5);
}

static int
cifar_label(int file, int record)
{
  return (file * 3 + record) % 10;
}

static void
write_cifar_file(const char *dir, const char *name, int file, int records)
{
  g_autofree guint8 *data = g_malloc((gsize)records * CIFAR_RECORD);
  for (int r = 0; r < records; r++) {
    guint8 *rec = data + (gsize)r * CIFAR_RECORD;
    rec[0] = (guint8)cifar_label(file, r);
    for (int ch = 0; ch < 3; ch++)
      for (int p = 0; p < 1024; p++)
        rec[1 + ch * 1024 + p] = cifar_value(file, r, ch, p);
  }
  g_autofree char *path = write_file(dir, name, data, (gsize)records * CIFAR_RECORD, FALSE);
}

static void
write_cifar_folder(const char *dir)
{
  for (int f = 1; f <= 5; f++) {
    g_autofree char *name = g_strdup_printf("data_batch_%d.bin", f);
    write_cifar_file(dir, name, f, f == 3 ? 1 : 2);
  }
  write_cifar_file(dir, "test_batch.bin", 0, 3);
}

static void
check_cifar(const TdmDatasetPair *pair)
{
  g_assert_cmpstr(pair->name, ==, "cifar10");
  g_assert_cmpint(pair->train->count, ==, 9);
  g_assert_cmpint(pair->test->count, ==, 3);
  g_assert_cmpint(pair->train->height, ==, 32);
  g_assert_cmpint(pair->train->width, ==, 32);
  g_assert_cmpint(pair->train->channels, ==, 3);
  g_assert_cmpint(pair->train->classes, ==, 10);
  g_assert_cmpstr(pair->train->class_names[0], ==, "airplane");
  g_assert_cmpstr(pair->test->class_names[9], ==, "truck");

  int index = 0;
  for (int f = 1; f <= 5; f++)
    for (int r = 0; r < (f == 3 ? 1 : 2); r++, index++) {
      g_assert_cmpint(pair->train->labels[index], ==, cifar_label(f, r));
      const guint8 *img = pair->train->images + (gsize)index * 3072;
      for (int p = 0; p < 1024; p++)
        for (int ch = 0; ch < 3; ch++)
          g_assert_cmpuint(img[p * 3 + ch], ==, cifar_value(f, r, ch, p));
    }
  for (int r = 0; r < 3; r++) {
    g_assert_cmpint(pair->test->labels[r], ==, cifar_label(0, r));
    const guint8 *img = pair->test->images + (gsize)r * 3072;
    for (int p = 0; p < 1024; p++)
      for (int ch = 0; ch < 3; ch++)
        g_assert_cmpuint(img[p * 3 + ch], ==, cifar_value(0, r, ch, p));
  }
}

static void
test_cifar_roundtrip(void)
{
  g_autofree char *dir = make_tmp();
  write_cifar_folder(dir);
  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open(dir, &error);
  g_assert_no_error(error);
  check_cifar(pair);

  /* The archive's own layout: batches inside cifar-10-batches-bin/. */
  g_autofree char *root = make_tmp();
  g_autofree char *inner = g_build_filename(root, "cifar-10-batches-bin", NULL);
  g_mkdir(inner, 0755);
  write_cifar_folder(inner);
  g_autoptr(TdmDatasetPair) nested = tdm_dataset_open(root, &error);
  g_assert_no_error(error);
  check_cifar(nested);
  g_assert_cmpstr(nested->source, ==, inner);
  test_remove_tree(dir);
  test_remove_tree(root);
}

static void
test_cifar_broken(void)
{
  g_autofree char *dir = make_tmp();
  GError *error = NULL;

  /* A record short by one byte. */
  write_cifar_folder(dir);
  g_autofree char *b2 = g_build_filename(dir, "data_batch_2.bin", NULL);
  g_autofree char *contents = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(b2, &contents, &len, NULL));
  g_assert_true(g_file_set_contents(b2, contents, (gssize)len - 1, NULL));
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_load_cifar10_folder(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, b2, "6145 bytes", "multiple", "3073", NULL);
  g_clear_error(&error);

  /* A label of 10. */
  write_cifar_folder(dir);
  g_autofree char *test = g_build_filename(dir, "test_batch.bin", NULL);
  g_clear_pointer(&contents, g_free);
  g_assert_true(g_file_get_contents(test, &contents, &len, NULL));
  contents[2 * CIFAR_RECORD] = 10;
  g_assert_true(g_file_set_contents(test, contents, (gssize)len, NULL));
  pair = tdm_dataset_load_cifar10_folder(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, test, "label 10 in record 2", "out of range", NULL);
  g_clear_error(&error);

  /* A missing batch. */
  write_cifar_folder(dir);
  g_autofree char *b4 = g_build_filename(dir, "data_batch_4.bin", NULL);
  g_unlink(b4);
  pair = tdm_dataset_open(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, b4, "missing", NULL);
  g_clear_error(&error);

  /* An empty batch. */
  write_cifar_folder(dir);
  g_assert_true(g_file_set_contents(b4, "", 0, NULL));
  pair = tdm_dataset_open(dir, &error);
  g_assert_null(pair);
  assert_dataset_error(error, b4, "size 0 bytes", NULL);
  g_clear_error(&error);
  test_remove_tree(dir);
}

/* ---- synthetic ----------------------------------------------------------------- */

static void
test_synthetic(void)
{
  g_autoptr(TdmDatasetPair) a = tdm_dataset_synthetic(42, 2000, 500);
  g_autoptr(TdmDatasetPair) b = tdm_dataset_synthetic(42, 2000, 500);
  g_autoptr(TdmDatasetPair) c = tdm_dataset_synthetic(43, 2000, 500);

  g_assert_cmpstr(a->name, ==, "synthetic");
  g_assert_null(a->source);
  TdmDataset *splits[2] = {a->train, a->test};
  for (int s = 0; s < 2; s++) {
    TdmDataset *d = splits[s];
    g_assert_cmpint(d->height, ==, 28);
    g_assert_cmpint(d->width, ==, 28);
    g_assert_cmpint(d->channels, ==, 1);
    g_assert_cmpint(d->classes, ==, 10);
    g_assert_nonnull(d->class_names);
    for (int k = 0; k < 10; k++)
      g_assert_nonnull(d->class_names[k]);
    g_assert_null(d->class_names[10]);

    int per_class[10] = {0};
    for (int i = 0; i < d->count; i++) {
      g_assert_cmpuint(d->labels[i], <, 10);
      per_class[d->labels[i]]++;
    }
    for (int k = 0; k < 10; k++)
      g_assert_cmpint(per_class[k], ==, d->count / 10);
  }
  g_assert_cmpint(a->train->count, ==, 2000);
  g_assert_cmpint(a->test->count, ==, 500);

  g_assert_cmpmem(a->train->images, 2000 * 784, b->train->images, 2000 * 784);
  g_assert_cmpmem(a->train->labels, 2000, b->train->labels, 2000);
  g_assert_cmpmem(a->test->images, 500 * 784, b->test->images, 500 * 784);
  g_assert_true(memcmp(a->train->images, c->train->images, 2000 * 784) != 0);
  g_assert_true(memcmp(a->train->labels, c->train->labels, 2000) != 0);
  /* The two splits are different draws, not copies. */
  g_assert_true(memcmp(a->train->images, a->test->images, 500 * 784) != 0);

  /* Not blank, not saturated: the mean pixel sits well inside the range. */
  guint64 sum = 0;
  for (int i = 0; i < 2000 * 784; i++)
    sum += a->train->images[i];
  double mean = (double)sum / (2000.0 * 784.0);
  g_assert_cmpfloat(mean, >, 10.0);
  g_assert_cmpfloat(mean, <, 120.0);

  /* Images of one class differ from each other (jitter, noise). */
  int first = -1;
  for (int i = 0; i < 2000; i++)
    if (a->train->labels[i] == 2) {
      if (first < 0)
        first = i;
      else {
        g_assert_true(memcmp(a->train->images + first * 784, a->train->images + i * 784, 784));
        break;
      }
    }
}

static void
test_synthetic_open(void)
{
  GError *error = NULL;
  gint64 start = g_get_monotonic_time();
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open("synthetic", &error);
  g_test_message("synthetic 60000+10000 in %.3f s",
                 (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC);
  g_assert_no_error(error);
  g_assert_cmpint(pair->train->count, ==, 60000);
  g_assert_cmpint(pair->test->count, ==, 10000);

  g_autoptr(TdmDatasetPair) again = tdm_dataset_synthetic(0, 60000, 10000);
  g_assert_cmpmem(pair->train->images, 60000 * 784, again->train->images, 60000 * 784);
}

/* ---- Fashion-MNIST, when installed ---------------------------------------------- */

static void
test_fashion_mnist(void)
{
  if (!g_file_test(TDM_FASHION_MNIST_DIR, G_FILE_TEST_IS_DIR)) {
    g_test_skip(TDM_FASHION_MNIST_DIR " is not there (Debian package dataset-fashion-mnist)");
    return;
  }
  GError *error = NULL;
  gint64 start = g_get_monotonic_time();
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open("fashion-mnist", &error);
  g_test_message("fashion-mnist loaded in %.3f s",
                 (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC);
  g_assert_no_error(error);
  g_assert_cmpstr(pair->name, ==, "fashion-mnist");
  g_assert_cmpstr(pair->train->name, ==, "fashion-mnist (train)");
  TdmDataset *splits[2] = {pair->train, pair->test};
  const int counts[2] = {60000, 10000};
  for (int s = 0; s < 2; s++) {
    TdmDataset *d = splits[s];
    g_assert_cmpint(d->count, ==, counts[s]);
    g_assert_cmpint(d->height, ==, 28);
    g_assert_cmpint(d->width, ==, 28);
    g_assert_cmpint(d->channels, ==, 1);
    g_assert_cmpint(d->classes, ==, 10);
    g_assert_cmpstr(d->class_names[0], ==, "T-shirt/top");
    g_assert_cmpstr(d->class_names[9], ==, "Ankle boot");
    int per_class[10] = {0};
    for (int i = 0; i < d->count; i++) {
      g_assert_cmpuint(d->labels[i], <, 10);
      per_class[d->labels[i]]++;
    }
    /* Fashion-MNIST is exactly balanced. */
    for (int k = 0; k < 10; k++)
      g_assert_cmpint(per_class[k], ==, counts[s] / 10);
  }
}

int
main(int argc, char **argv)
{
  g_autofree char *home = g_dir_make_tmp("tandem-home-XXXXXX", NULL);
  g_assert_nonnull(home);
  g_setenv("HOME", home, TRUE);
  g_unsetenv("TANDEM_MNIST_DIR");

  g_test_init(&argc, &argv, NULL);

  g_test_add_data_func("/dataset/idx/raw", GUINT_TO_POINTER(0x0), test_idx_roundtrip);
  g_test_add_data_func("/dataset/idx/gzip", GUINT_TO_POINTER(0xf), test_idx_roundtrip);
  g_test_add_data_func("/dataset/idx/mixed", GUINT_TO_POINTER(0x5), test_idx_roundtrip);
  g_test_add_data_func("/dataset/idx/gzip-without-suffix", GUINT_TO_POINTER(0x1f),
                       test_idx_roundtrip);
  g_test_add_data_func("/dataset/idx/raw-with-suffix", GUINT_TO_POINTER(0x20),
                       test_idx_roundtrip);
  g_test_add_func("/dataset/idx/single", test_idx_single);
  g_test_add_func("/dataset/idx/mnist-classes", test_idx_mnist_classes);
  g_test_add_func("/dataset/is-installed", test_is_installed);
  for (guint i = 0; i < G_N_ELEMENTS(broken_cases); i++) {
    g_autofree char *raw = g_strdup_printf("/dataset/idx/broken/raw/%s", broken_cases[i].name);
    g_autofree char *gz = g_strdup_printf("/dataset/idx/broken/gzip/%s", broken_cases[i].name);
    g_test_add_data_func(raw, &broken_cases[i], test_idx_broken_raw);
    g_test_add_data_func(gz, &broken_cases[i], test_idx_broken_gzip);
  }
  g_test_add_func("/dataset/idx/bad-gzip", test_idx_bad_gzip);
  g_test_add_func("/dataset/idx/cut-gzip", test_idx_cut_gzip);
  g_test_add_func("/dataset/idx/label-out-of-range", test_idx_label_out_of_range);
  g_test_add_func("/dataset/idx/label-out-of-range-named", test_idx_label_out_of_range_named);
  g_test_add_func("/dataset/idx/missing-file", test_idx_missing_file);
  g_test_add_func("/dataset/idx/unreadable", test_idx_unreadable);
  g_test_add_func("/dataset/open/errors", test_open_errors);
  g_test_add_func("/dataset/open/mnist-env", test_open_mnist_env);
  g_test_add_func("/dataset/open/tilde", test_open_tilde);
  g_test_add_func("/dataset/cifar/roundtrip", test_cifar_roundtrip);
  g_test_add_func("/dataset/cifar/broken", test_cifar_broken);
  g_test_add_func("/dataset/synthetic/determinism", test_synthetic);
  g_test_add_func("/dataset/synthetic/open", test_synthetic_open);
  g_test_add_func("/dataset/fashion-mnist", test_fashion_mnist);

  int status = g_test_run();
  test_remove_tree(home);
  return status;
}
