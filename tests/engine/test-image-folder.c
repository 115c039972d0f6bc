/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-image-folder.c — folders of class folders of images as datasets, and the
 * classifier that uses a trained network on image files.
 *
 * Every image is written by the test (libpng, libjpeg). The central check: a folder of
 * PNGs made from a slice of Fashion-MNIST (the synthetic set where the package is
 * missing) holds the same bytes as the slice written as IDX, and one epoch on each
 * ends with bit-identical parameters.
 */
#include "image-writer.h"
#include "remove-tree.h"
#include "tdm-classifier.h"
#include "tdm-dataset-folder.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-image.h"
#include "tdm-trainer.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

static char *
make_tmp(void)
{
  GError *error = NULL;
  char *dir = g_dir_make_tmp("tdm-images-XXXXXX", &error);
  g_assert_no_error(error);
  return dir;
}

static void
mkdirs(const char *a, const char *b, const char *c)
{
  g_autofree char *path = g_build_filename(a, b, c, NULL);
  g_assert_cmpint(g_mkdir_with_parents(path, 0755), ==, 0);
}

/* The slice: Fashion-MNIST's first train and test images, or the synthetic set. */
static TdmDatasetPair *
source_slice(int train_count, int test_count)
{
  g_autoptr(GError) error = NULL;
  TdmDatasetPair *pair = NULL;
  if (g_file_test(TDM_FASHION_MNIST_DIR, G_FILE_TEST_IS_DIR))
    pair = tdm_dataset_open("fashion-mnist", &error);
  if (pair == NULL) {
    g_test_message("Fashion-MNIST not installed: the synthetic set stands in");
    return tdm_dataset_synthetic(5, train_count, test_count);
  }
  pair->train->count = MIN(pair->train->count, train_count);
  pair->test->count = MIN(pair->test->count, test_count);
  return pair;
}

/* The samples of `d` ordered class by class, keeping their order within a class: the
 * order a folder yields (files sorted by name, named by position). */
static TdmDataset *
by_class(const TdmDataset *d)
{
  TdmDataset *out = tdm_dataset_new(d->name, d->count, d->height, d->width, d->channels,
                                     d->classes);
  int n = tdm_dataset_sample_size(d), k = 0;
  for (int c = 0; c < d->classes; c++)
    for (int i = 0; i < d->count; i++)
      if (d->labels[i] == c) {
        memcpy(out->images + (size_t)k * n, d->images + (size_t)i * n, n);
        out->labels[k++] = (uint8_t)c;
      }
  return out;
}

static void
write_idx(const char *path, guint32 magic, const guint32 *dims, int rank, const uint8_t *data,
          size_t bytes)
{
  FILE *fp = fopen(path, "wb");
  g_assert_nonnull(fp);
  guint32 be = GUINT32_TO_BE(magic);
  fwrite(&be, 4, 1, fp);
  for (int i = 0; i < rank; i++) {
    be = GUINT32_TO_BE(dims[i]);
    fwrite(&be, 4, 1, fp);
  }
  fwrite(data, 1, bytes, fp);
  fclose(fp);
}

static void
write_split(const char *idx_dir, const char *png_dir, const char *prefix, const char *split,
            const TdmDataset *d)
{
  int n = tdm_dataset_sample_size(d);
  g_autofree char *images = g_strdup_printf("%s/%s-images-idx3-ubyte", idx_dir, prefix);
  g_autofree char *labels = g_strdup_printf("%s/%s-labels-idx1-ubyte", idx_dir, prefix);
  guint32 dims[3] = {(guint32)d->count, (guint32)d->height, (guint32)d->width};
  write_idx(images, 0x803, dims, 3, d->images, (size_t)d->count * n);
  write_idx(labels, 0x801, dims, 1, d->labels, (size_t)d->count);
  for (int i = 0; i < d->count; i++) {
    char cls[8], file[32];
    g_snprintf(cls, sizeof cls, "%d", d->labels[i]);
    g_snprintf(file, sizeof file, "%05d.png", i);
    mkdirs(png_dir, split, cls);
    g_autofree char *path = g_build_filename(png_dir, split, cls, file, NULL);
    test_write_png(path, d->width, d->height, d->channels, d->images + (size_t)i * n);
  }
}

static void
assert_same_dataset(const TdmDataset *a, const TdmDataset *b)
{
  g_assert_cmpint(a->count, ==, b->count);
  g_assert_cmpint(a->height, ==, b->height);
  g_assert_cmpint(a->width, ==, b->width);
  g_assert_cmpint(a->channels, ==, b->channels);
  g_assert_cmpint(a->classes, ==, b->classes);
  g_assert_cmpmem(a->labels, a->count, b->labels, b->count);
  g_assert_true(memcmp(a->images, b->images, (size_t)a->count * tdm_dataset_sample_size(a)) == 0);
}

typedef struct {
  double test_accuracy;
  int test_count;
  char notice[1024];
} Outcome;

static void
on_event(const TdmEvent *e, gpointer data)
{
  Outcome *o = data;
  if (e->kind == TDM_EVENT_STARTED) {
    o->test_count = e->started.test_count;
    g_strlcpy(o->notice, e->started.notice, sizeof o->notice);
  }
  if (e->kind == TDM_EVENT_FINISHED)
    o->test_accuracy = e->finished.test_accuracy;
}

/* One epoch on one CPU worker; returns the parameters. */
static float *
train_one_epoch(const char *dataset, const char *save, size_t *count, Outcome *outcome)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup("fc32,relu,fc10");
  cfg->epochs = 1;
  cfg->batch = 50;
  cfg->seed = 11;
  cfg->save_path = g_strdup(save);
  Outcome local = {0};
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, on_event, outcome ? outcome : &local);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  g_assert_nonnull(params);
  return g_memdup2(params, *count * sizeof(float));
}

static void
test_equals_idx(void)
{
  g_autofree char *root = make_tmp();
  g_autofree char *idx = g_build_filename(root, "idx", NULL);
  g_autofree char *png = g_build_filename(root, "png", NULL);
  g_mkdir(idx, 0755);
  g_mkdir(png, 0755);
  g_autoptr(TdmDatasetPair) slice = source_slice(600, 100);
  g_autoptr(TdmDataset) train = by_class(slice->train);
  g_autoptr(TdmDataset) test = by_class(slice->test);
  write_split(idx, png, "train", "train", train);
  write_split(idx, png, "t10k", "test", test);

  g_autoptr(GError) error = NULL;
  g_autoptr(TdmDatasetPair) from_idx = tdm_dataset_open(idx, &error);
  g_assert_no_error(error);
  g_autoptr(TdmDatasetPair) from_png = tdm_dataset_open(png, &error);
  g_assert_no_error(error);
  g_assert_null(from_png->notice);
  /* Chosen from the images: their own size and grey. */
  assert_same_dataset(from_idx->train, from_png->train);
  assert_same_dataset(from_idx->test, from_png->test);
  g_assert_cmpstr(from_png->train->class_names[0], ==, "0");
  g_assert_cmpstr(from_png->train->class_names[9], ==, "9");

  size_t n_idx = 0, n_png = 0;
  g_autofree float *p_idx = train_one_epoch(idx, NULL, &n_idx, NULL);
  g_autofree float *p_png = train_one_epoch(png, NULL, &n_png, NULL);
  g_assert_cmpuint(n_idx, ==, n_png);
  g_assert_true(memcmp(p_idx, p_png, n_idx * sizeof(float)) == 0);
  test_remove_tree(root);
}

/* Three classes of flat images, `per_class` each, shades that differ by class. */
static void
write_classes(const char *root, int per_class, int size)
{
  const char *names[] = {"ant", "bee", "cat"};
  for (int c = 0; c < 3; c++) {
    mkdirs(root, names[c], NULL);
    for (int i = 0; i < per_class; i++) {
      g_autofree char *path = g_strdup_printf("%s/%s/%03d.png", root, names[c], i);
      test_write_flat_png(path, size, size, 1, (uint8_t)(40 + 80 * c + i % 7));
    }
  }
}

static void
test_bad_files(void)
{
  g_autofree char *root = make_tmp();
  write_classes(root, 10, 12);
  g_autofree char *trunc = g_build_filename(root, "ant", "truncated.png", NULL);
  test_write_truncated_png(trunc, 120);
  g_autofree char *text = g_build_filename(root, "ant", "notes.txt", NULL);
  g_assert_true(g_file_set_contents(text, "not an image", -1, NULL));
  g_autofree char *bomb = g_build_filename(root, "bee", "bomb.png", NULL);
  test_write_bomb_png(bomb);
  g_autofree char *fifo = g_build_filename(root, "bee", "fifo.png", NULL);
  g_assert_cmpint(mkfifo(fifo, 0644), ==, 0);
  g_autofree char *loop = g_build_filename(root, "cat", "loop.png", NULL);
  g_assert_cmpint(symlink("loop.png", loop), ==, 0);
  /* A class folder that links back to the root: it holds folders, never entered. */
  g_autofree char *back = g_build_filename(root, "cat", "back", NULL);
  g_assert_cmpint(symlink(root, back), ==, 0);
  g_autofree char *jpeg_cut = g_build_filename(root, "cat", "cut.jpg", NULL);
  {
    uint8_t pixels[32 * 32 * 3];
    for (size_t i = 0; i < sizeof pixels; i++)
      pixels[i] = (uint8_t)(i * 13);
    g_autofree char *whole = g_build_filename(root, "whole.jpg", NULL);
    test_write_jpeg(whole, 32, 32, 3, pixels, 90);
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(whole, &bytes, &len, NULL));
    g_assert_true(g_file_set_contents(jpeg_cut, bytes, (gssize)len / 2, NULL));
    g_unlink(whole);
  }
  mkdirs(root, "empty", NULL);
  gboolean root_user = geteuid() == 0;
  g_autofree char *locked = g_build_filename(root, "ant", "locked.png", NULL);
  test_write_flat_png(locked, 12, 12, 1, 9);
  chmod(locked, 0);

  g_autoptr(GError) error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open(root, &error);
  g_assert_no_error(error);
  g_assert_cmpint(pair->train->classes, ==, 3);
  int good = 30 + (root_user ? 1 : 0);
  g_assert_cmpint(pair->train->count + pair->test->count, ==, good);
  g_assert_nonnull(pair->notice);
  g_test_message("%s", pair->notice);
  int bad = 6 + (root_user ? 0 : 1);
  g_autofree char *head = g_strdup_printf("%d of %d files could not be read: ", bad, good + bad);
  g_assert_true(g_str_has_prefix(pair->notice, head));
  /* The first five by name are spelled out, the rest counted in. */
  g_assert_nonnull(strstr(pair->notice, "ant/notes.txt (not a PNG or JPEG image)"));
  g_assert_nonnull(strstr(pair->notice, "ant/truncated.png (truncated)"));
  g_assert_nonnull(strstr(pair->notice, "bee/bomb.png (60000 × 60000 pixels is above the limit"));
  g_assert_nonnull(strstr(pair->notice, "bee/fifo.png (not a regular file)"));
  g_assert_nonnull(strstr(pair->notice, "class folder “empty” holds no files and is left out"));

  /* Each reason once more through the decoder, where the list above stops. */
  uint8_t out[16];
  g_autoptr(GError) e1 = NULL;
  g_assert_false(tdm_image_load(loop, 2, 1, out, &e1));
  g_assert_nonnull(strstr(e1->message, "symbolic links"));
  g_autoptr(GError) e2 = NULL;
  g_assert_false(tdm_image_load(jpeg_cut, 2, 1, out, &e2));
  g_assert_cmpstr(e2->message, ==, "truncated");
  /* Sides of 2^32 − 1 each: refused from the header, their product never formed
   * (it overflows 64 bits; the fuzzer found it). */
  {
    static const uint8_t huge[] = {
      0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 8, 0, 0, 0, 0, 0, 0, 0, 0};
    g_autofree char *path = g_build_filename(root, "huge.png", NULL);
    g_assert_true(g_file_set_contents(path, (const char *)huge, sizeof huge, NULL));
    g_autoptr(GError) e4 = NULL;
    g_assert_false(tdm_image_load(path, 2, 1, out, &e4));
    g_assert_cmpstr(e4->message, ==, "4294967295 × 4294967295 pixels is above the limit of "
                                     "64 megapixels (not decoded)");
  }
  if (!root_user) {
    g_autoptr(GError) e3 = NULL;
    g_assert_false(tdm_image_load(locked, 2, 1, out, &e3));
    g_assert_nonnull(strstr(e3->message, "Permission denied"));
  }
  test_remove_tree(root);
}

static void
test_too_few_classes(void)
{
  g_autofree char *root = make_tmp();
  mkdirs(root, "only", NULL);
  for (int i = 0; i < 4; i++) {
    g_autofree char *path = g_strdup_printf("%s/only/%d.png", root, i);
    test_write_flat_png(path, 8, 8, 1, 100);
  }
  mkdirs(root, "hollow", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open(root, &error);
  g_assert_null(pair);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET);
  g_assert_true(g_str_has_prefix(error->message, root));
  g_assert_nonnull(strstr(error->message, "at least two class folders holding images; found 1"));

  /* Two folders, but one holds nothing that decodes. */
  for (int i = 0; i < 3; i++) {
    g_autofree char *path = g_strdup_printf("%s/hollow/%d.png", root, i);
    g_assert_true(g_file_set_contents(path, "junk", -1, NULL));
  }
  g_clear_error(&error);
  pair = tdm_dataset_open(root, &error);
  g_assert_null(pair);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET);
  g_assert_nonnull(strstr(error->message, "at least two classes with images that can be read; 1 has"));
  g_assert_nonnull(strstr(error->message, "3 of 7 files could not be read"));
  test_remove_tree(root);
}

typedef struct {
  int calls, last_done, last_total;
} Progress;

static void
on_progress(int done, int total, gpointer data)
{
  Progress *p = data;
  g_assert_cmpint(done, >=, p->last_done);
  p->calls++;
  p->last_done = done;
  p->last_total = total;
}

static void
test_cache(void)
{
  g_autofree char *root = make_tmp();
  write_classes(root, 8, 10);
  TdmImageOptions options = {.size = 6, .channels = 3, .seed = 1};
  g_autofree char *cache = tdm_image_folder_cache_path(root, &options);
  g_assert_true(g_str_has_prefix(cache, g_get_user_cache_dir()));
  g_assert_false(g_file_test(cache, G_FILE_TEST_EXISTS));

  g_autoptr(GError) error = NULL;
  Progress first = {0};
  g_autoptr(TdmDatasetPair) a =
      tdm_dataset_load_image_folder(root, &options, on_progress, &first, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(first.last_total, ==, 24);   /* decoded: one step per file */
  g_assert_true(g_file_test(cache, G_FILE_TEST_IS_REGULAR));

  Progress second = {0};
  g_autoptr(TdmDatasetPair) b =
      tdm_dataset_load_image_folder(root, &options, on_progress, &second, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(second.last_total, ==, 1);   /* read back whole */
  assert_same_dataset(a->train, b->train);
  assert_same_dataset(a->test, b->test);
  g_assert_cmpstr(b->train->class_names[2], ==, "cat");
  g_assert_cmpstr(b->name, ==, a->name);

  /* Other options are another cache. */
  TdmImageOptions grey = options;
  grey.channels = 1;
  Progress other = {0};
  g_autoptr(TdmDatasetPair) c =
      tdm_dataset_load_image_folder(root, &grey, on_progress, &other, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(other.last_total, ==, 24);
  g_assert_cmpint(c->train->channels, ==, 1);

  /* A changed file invalidates it: new pixels, a later time. */
  g_autofree char *changed = g_strdup_printf("%s/ant/000.png", root);
  test_write_flat_png(changed, 10, 10, 1, 250);
  struct utimbuf later = {.actime = time(NULL) + 100, .modtime = time(NULL) + 100};
  g_assert_cmpint(utime(changed, &later), ==, 0);
  Progress third = {0};
  g_autoptr(TdmDatasetPair) d =
      tdm_dataset_load_image_folder(root, &options, on_progress, &third, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(third.last_total, ==, 24);
  gboolean found = FALSE;
  for (int s = 0; s < 2; s++) {
    TdmDataset *set = s == 0 ? d->train : d->test;
    for (int i = 0; i < set->count; i++)
      found |= set->images[(size_t)i * tdm_dataset_sample_size(set)] == 250;
  }
  g_assert_true(found);

  /* Cancelled: nothing returned, the error says so, the cache is left alone. */
  TdmImageOptions other_size = options;
  other_size.size = 5;
  g_autoptr(GCancellable) cancel = g_cancellable_new();
  g_cancellable_cancel(cancel);
  g_autoptr(GError) cancelled = NULL;
  g_assert_null(tdm_dataset_load_image_folder(root, &other_size, NULL, NULL, cancel, &cancelled));
  g_assert_error(cancelled, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED);
  g_autofree char *other_cache = tdm_image_folder_cache_path(root, &other_size);
  g_assert_false(g_file_test(other_cache, G_FILE_TEST_EXISTS));

  /* A damaged cache is a miss, not an error, and is written anew. */
  g_autofree char *bytes = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(cache, &bytes, &len, NULL));
  g_assert_true(g_file_set_contents(cache, bytes, (gssize)len - 7, NULL));
  Progress fourth = {0};
  g_autoptr(TdmDatasetPair) e =
      tdm_dataset_load_image_folder(root, &options, on_progress, &fourth, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(fourth.last_total, ==, 24);
  assert_same_dataset(d->train, e->train);
  Progress fifth = {0};
  g_autoptr(TdmDatasetPair) f =
      tdm_dataset_load_image_folder(root, &options, on_progress, &fifth, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(fifth.last_total, ==, 1);
  test_remove_tree(root);
}

/* Loads through the cache; *hit says whether the set was read back whole. */
static TdmDatasetPair *
load_counting(const char *root, const TdmImageOptions *options, gboolean *hit)
{
  Progress p = {0};
  g_autoptr(GError) error = NULL;
  TdmDatasetPair *pair = tdm_dataset_load_image_folder(root, options, on_progress, &p, NULL,
                                                       &error);
  g_assert_no_error(error);
  *hit = p.last_total == 1;
  return pair;
}

/* After a change to the folder: the cache misses, the set is what decoding the folder
 * now gives, and the next start reads that back. Returns the new set. */
static TdmDatasetPair *
assert_invalidated(const char *root, const TdmImageOptions *options, const char *change)
{
  g_test_message("folder change: %s", change);
  gboolean hit = TRUE;
  TdmDatasetPair *got = load_counting(root, options, &hit);
  g_assert_false(hit);
  TdmImageOptions plain = *options;
  plain.no_cache = TRUE;
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmDatasetPair) want =
      tdm_dataset_load_image_folder(root, &plain, NULL, NULL, NULL, &error);
  g_assert_no_error(error);
  assert_same_dataset(got->train, want->train);
  assert_same_dataset(got->test, want->test);
  g_autoptr(TdmDatasetPair) again = load_counting(root, options, &hit);
  g_assert_true(hit);
  assert_same_dataset(again->train, want->train);
  assert_same_dataset(again->test, want->test);
  return got;
}

static gboolean
same_sets(const TdmDatasetPair *a, const TdmDatasetPair *b)
{
  const TdmDataset *x[2] = {a->train, a->test}, *y[2] = {b->train, b->test};
  for (int s = 0; s < 2; s++)
    if (x[s]->count != y[s]->count || memcmp(x[s]->labels, y[s]->labels, x[s]->count) != 0 ||
        memcmp(x[s]->images, y[s]->images,
               (size_t)x[s]->count * tdm_dataset_sample_size(x[s])) != 0)
      return FALSE;
  return TRUE;
}

/* File times come from a coarse clock: waits (on a file of the root, which the scan
 * does not look at) until a change made now gets another status-change time than
 * `path` has. Counts on the clock moving, never on how fast. */
static void
wait_past_ctime(const char *root, const char *path)
{
  struct stat old, now;
  g_assert_cmpint(stat(path, &old), ==, 0);
  g_autofree char *probe = g_build_filename(root, ".probe", NULL);
  for (;;) {
    g_assert_true(g_file_set_contents(probe, "tick", -1, NULL));
    g_assert_cmpint(stat(probe, &now), ==, 0);
    if (now.st_ctim.tv_sec != old.st_ctim.tv_sec || now.st_ctim.tv_nsec != old.st_ctim.tv_nsec)
      break;
    g_thread_yield();
  }
  g_unlink(probe);
}

static void
set_mtime(const char *path, time_t seconds)
{
  struct timespec times[2] = {{.tv_sec = seconds}, {.tv_sec = seconds}};
  g_assert_cmpint(utimensat(AT_FDCWD, path, times, 0), ==, 0);
}

static off_t
file_size(const char *path)
{
  struct stat st;
  g_assert_cmpint(stat(path, &st), ==, 0);
  return st.st_size;
}

/* Every way a folder changes misses the cache, including those that keep every name,
 * size and modification time (only the status-change time tells them). */
static void
test_cache_invalidation(void)
{
  g_autofree char *root = make_tmp();
  write_classes(root, 8, 10);
  g_autofree char *a = g_build_filename(root, "ant", "001.png", NULL);
  g_autofree char *b = g_build_filename(root, "ant", "002.png", NULL);
  g_autofree char *solo = g_build_filename(root, "ant", "solo.png", NULL);
  test_write_flat_png(solo, 10, 10, 1, 77);
  /* Two files of one size (shades below 144 take as many bits in deflate) and one
   * time whose pixels differ. */
  test_write_flat_png(a, 10, 10, 1, 11);
  test_write_flat_png(b, 10, 10, 1, 130);
  g_assert_cmpint(file_size(a), ==, file_size(b));
  set_mtime(a, 1000000000);
  set_mtime(b, 1000000000);
  TdmImageOptions options = {.size = 6, .channels = 1, .seed = 3};
  gboolean hit = TRUE;
  g_autoptr(TdmDatasetPair) first = load_counting(root, &options, &hit);
  g_assert_false(hit);
  g_autoptr(TdmDatasetPair) second = load_counting(root, &options, &hit);
  g_assert_true(hit);
  assert_same_dataset(first->train, second->train);

  /* Touched: the same bytes, a new time. */
  set_mtime(a, 1000000100);
  g_autoptr(TdmDatasetPair) touched = assert_invalidated(root, &options, "touched");
  g_assert_true(same_sets(touched, second));
  set_mtime(a, 1000000000);
  g_autoptr(TdmDatasetPair) back = assert_invalidated(root, &options, "time set back");

  /* Swapped: the two files trade places by renaming and get their time back, so
   * every name, size and modification time is as it was. */
  wait_past_ctime(root, b);
  g_autofree char *tmp = g_build_filename(root, "ant", "swap.tmp", NULL);
  g_assert_cmpint(g_rename(a, tmp), ==, 0);
  g_assert_cmpint(g_rename(b, a), ==, 0);
  g_assert_cmpint(g_rename(tmp, b), ==, 0);
  set_mtime(a, 1000000000);
  set_mtime(b, 1000000000);
  g_autoptr(TdmDatasetPair) swapped = assert_invalidated(root, &options, "swapped");
  g_assert_false(same_sets(swapped, back));

  /* Replaced: another file of the same size renamed over one, its time set to the
   * old file's. */
  wait_past_ctime(root, a);
  g_autofree char *fresh = g_build_filename(root, "fresh.png", NULL);
  test_write_flat_png(fresh, 10, 10, 1, 100);
  g_assert_cmpint(file_size(fresh), ==, file_size(a));
  set_mtime(fresh, 1000000000);
  g_assert_cmpint(g_rename(fresh, a), ==, 0);
  g_autoptr(TdmDatasetPair) replaced = assert_invalidated(root, &options, "replaced");
  g_assert_false(same_sets(replaced, swapped));

  /* Rewritten in place with new pixels of the same size, its time set back. */
  wait_past_ctime(root, a);
  test_write_flat_png(a, 10, 10, 1, 99);
  g_assert_cmpint(file_size(a), ==, file_size(b));
  set_mtime(a, 1000000000);
  g_autoptr(TdmDatasetPair) rewritten = assert_invalidated(root, &options, "rewritten");
  g_assert_false(same_sets(rewritten, replaced));

  /* Added, removed, renamed, moved to another class under the same name. */
  g_autofree char *added = g_build_filename(root, "bee", "new.png", NULL);
  test_write_flat_png(added, 10, 10, 1, 33);
  g_autoptr(TdmDatasetPair) more = assert_invalidated(root, &options, "added");
  g_assert_cmpint(more->train->count + more->test->count, ==,
                  rewritten->train->count + rewritten->test->count + 1);
  g_assert_cmpint(g_unlink(added), ==, 0);
  g_autoptr(TdmDatasetPair) fewer = assert_invalidated(root, &options, "removed");
  g_assert_true(same_sets(fewer, rewritten));
  g_autofree char *renamed = g_build_filename(root, "ant", "zzz.png", NULL);
  g_assert_cmpint(g_rename(a, renamed), ==, 0);
  tdm_dataset_pair_free(assert_invalidated(root, &options, "renamed"));
  g_autofree char *moved = g_build_filename(root, "bee", "solo.png", NULL);
  g_assert_cmpint(g_rename(solo, moved), ==, 0);
  g_autoptr(TdmDatasetPair) relabelled = assert_invalidated(root, &options, "moved to another class");
  /* An empty class folder changes nothing in the set but the notice. */
  mkdirs(root, "dog", NULL);
  g_autoptr(TdmDatasetPair) with_empty = assert_invalidated(root, &options, "empty class added");
  g_assert_true(same_sets(with_empty, relabelled));
  g_assert_nonnull(strstr(with_empty->notice, "“dog” holds no files"));
  test_remove_tree(root);
}

static void
test_split_and_defaults(void)
{
  g_autofree char *root = make_tmp();
  const char *names[] = {"red", "green"};
  for (int c = 0; c < 2; c++) {
    mkdirs(root, names[c], NULL);
    for (int i = 0; i < 20; i++) {
      uint8_t px[40 * 30 * 3];
      for (int k = 0; k < 40 * 30; k++) {
        px[3 * k] = c == 0 ? 200 : 10;
        px[3 * k + 1] = c == 1 ? 200 : 10;
        px[3 * k + 2] = (uint8_t)i;
      }
      g_autofree char *path = g_strdup_printf("%s/%s/%02d.%s", root, names[c], i,
                                              i % 2 ? "png" : "jpg");
      if (i % 2)
        test_write_png(path, 40, 30, 3, px);
      else
        test_write_jpeg(path, 40, 30, 3, px, 95);
    }
  }
  g_autoptr(GError) error = NULL;
  TdmImageOptions o1 = {.seed = 1, .no_cache = TRUE};
  g_autoptr(TdmDatasetPair) a = tdm_dataset_load_image_folder(root, &o1, NULL, NULL, NULL, &error);
  g_assert_no_error(error);
  /* Colour images 40 × 30: RGB, the shorter side. 15 % of 20 per class held out. */
  g_assert_cmpint(a->train->channels, ==, 3);
  g_assert_cmpint(a->train->height, ==, 30);
  g_assert_cmpint(a->test->count, ==, 6);
  g_assert_cmpint(a->train->count, ==, 34);
  /* Class order and colour survive (JPEG within a few levels). */
  g_assert_cmpstr(a->train->class_names[0], ==, "green");
  for (int i = 0; i < a->train->count; i++) {
    const uint8_t *p = a->train->images + (size_t)i * tdm_dataset_sample_size(a->train);
    int green = a->train->labels[i] == 0;
    g_assert_cmpint(abs(p[0] - (green ? 10 : 200)), <=, 4);
    g_assert_cmpint(abs(p[1] - (green ? 200 : 10)), <=, 4);
  }
  g_autoptr(TdmDatasetPair) again =
      tdm_dataset_load_image_folder(root, &o1, NULL, NULL, NULL, &error);
  assert_same_dataset(a->test, again->test);
  /* Another seed holds out other files (same counts). */
  gboolean differs = FALSE;
  for (guint64 seed = 2; seed < 6 && !differs; seed++) {
    TdmImageOptions o2 = {.seed = seed, .no_cache = TRUE};
    g_autoptr(TdmDatasetPair) b =
        tdm_dataset_load_image_folder(root, &o2, NULL, NULL, NULL, &error);
    g_assert_cmpint(b->test->count, ==, 6);
    differs = memcmp(a->test->images, b->test->images,
                     (size_t)6 * tdm_dataset_sample_size(a->test)) != 0;
  }
  g_assert_true(differs);

  /* The same classes under train/ with no test/: the same split, names under train/. */
  g_autofree char *nested = g_build_filename(root, "nested", NULL);
  g_mkdir_with_parents(nested, 0755);
  g_autofree char *target = g_build_filename(nested, "train", NULL);
  g_assert_cmpint(symlink(root, target), ==, 0);
  g_autoptr(TdmDatasetPair) n = tdm_dataset_load_image_folder(nested, &o1, NULL, NULL, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(n->train->count + n->test->count, ==, 40);
  g_assert_cmpint(n->train->classes, ==, 2);
  g_unlink(target);

  /* Chosen options: a grey 8 × 8 of averaged RGB. */
  TdmImageOptions o3 = {.size = 8, .channels = 1, .no_cache = TRUE};
  g_autoptr(TdmDatasetPair) g = tdm_dataset_load_image_folder(root, &o3, NULL, NULL, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(g->train->height, ==, 8);
  g_assert_cmpint(g->train->channels, ==, 1);
  test_remove_tree(root);
}

/* Files above the size read whole (256 KiB) are streamed instead: the same pixels
 * come out, and one cut short is still called truncated. */
static void
test_large_files(void)
{
  g_autofree char *root = make_tmp();
  const int side = 520;
  g_autofree uint8_t *pixels = g_malloc((size_t)side * side * 3);
  GRand *rand = g_rand_new_with_seed(5);
  for (size_t i = 0; i < (size_t)side * side * 3; i++)
    pixels[i] = (uint8_t)g_rand_int_range(rand, 0, 256);
  g_rand_free(rand);
  g_autofree char *png = g_build_filename(root, "noise.png", NULL);
  test_write_png(png, side, side, 3, pixels);
  g_assert_cmpint(file_size(png), >, 256 * 1024);
  uint8_t got[12 * 12 * 3], want[12 * 12 * 3];
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_image_load(png, 12, 3, got, &error));
  g_assert_no_error(error);
  tdm_image_resample(pixels, side, side, side * 3, 3, 12, want);
  g_assert_cmpmem(got, sizeof got, want, sizeof want);

  g_autofree char *jpeg = g_build_filename(root, "noise.jpg", NULL);
  test_write_jpeg(jpeg, side, side, 3, pixels, 95);
  g_assert_cmpint(file_size(jpeg), >, 256 * 1024);
  g_assert_true(tdm_image_load(jpeg, 12, 3, got, &error));
  g_assert_no_error(error);

  const char *paths[2] = {png, jpeg};
  for (int i = 0; i < 2; i++) {
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(paths[i], &bytes, &len, NULL));
    g_autofree char *cut = g_strconcat(paths[i], ".cut", NULL);
    g_assert_true(g_file_set_contents(cut, bytes, (gssize)(len - 1000), NULL));
    g_assert_cmpint(file_size(cut), >, 256 * 1024);
    g_autoptr(GError) e = NULL;
    g_assert_false(tdm_image_load(cut, 12, 3, got, &e));
    g_assert_cmpstr(e->message, ==, "truncated");
  }
  test_remove_tree(root);
}

static void
test_resample(void)
{
  /* 4 × 4 → 2 × 2: each output is the mean of a 2 × 2 block. */
  const uint8_t src[16] = {0, 2, 10, 10, 4, 6, 10, 10, 100, 100, 0, 0, 100, 100, 0, 255};
  uint8_t out[4];
  tdm_image_resample(src, 4, 4, 4, 1, 2, out);
  g_assert_cmpint(out[0], ==, 3);
  g_assert_cmpint(out[1], ==, 10);
  g_assert_cmpint(out[2], ==, 100);
  g_assert_cmpint(out[3], ==, 64);
  /* 6 × 2 → 2 × 2 keeps the centre square (columns 2 and 3). */
  const uint8_t wide[12] = {9, 9, 1, 2, 9, 9, 9, 9, 3, 4, 9, 9};
  tdm_image_resample(wide, 6, 2, 6, 1, 2, out);
  g_assert_cmpmem(out, 4, ((uint8_t[]){1, 2, 3, 4}), 4);
  /* 3 → 2: a third of the middle pixel goes to each side. */
  const uint8_t three[9] = {0, 90, 180, 0, 90, 180, 0, 90, 180};
  tdm_image_resample(three, 3, 3, 3, 1, 2, out);
  g_assert_cmpint(out[0], ==, 30);
  g_assert_cmpint(out[1], ==, 150);
  /* 2 × 6 → 2 × 2 at scale 1 is a copy of the centre rows (2 and 3). */
  const uint8_t tall[12] = {9, 9, 9, 9, 5, 6, 7, 8, 9, 9, 9, 9};
  tdm_image_resample(tall, 2, 6, 2, 1, 2, out);
  g_assert_cmpmem(out, 4, ((uint8_t[]){5, 6, 7, 8}), 4);
  /* Enlarged, 2 × 2 → 6 × 6 RGB: one source row feeds three output rows, each
   * output pixel lies in one source pixel and is that pixel. */
  const uint8_t small[12] = {10, 11, 12, 20, 21, 22, 30, 31, 32, 40, 41, 42};
  uint8_t big[6 * 6 * 3];
  tdm_image_resample(small, 2, 2, 6, 3, 6, big);
  for (int y = 0; y < 6; y++)
    for (int x = 0; x < 6; x++)
      for (int k = 0; k < 3; k++)
        g_assert_cmpint(big[(y * 6 + x) * 3 + k], ==, small[((y / 3) * 2 + x / 3) * 3 + k]);
}

static void
test_classify(void)
{
  g_autofree char *root = make_tmp();
  g_autofree char *png = g_build_filename(root, "png", NULL);
  g_autofree char *idx = g_build_filename(root, "idx", NULL);
  g_mkdir(png, 0755);
  g_mkdir(idx, 0755);
  g_autoptr(TdmDatasetPair) slice = source_slice(600, 100);
  g_autoptr(TdmDataset) train = by_class(slice->train);
  g_autoptr(TdmDataset) test = by_class(slice->test);
  write_split(idx, png, "train", "train", train);
  write_split(idx, png, "t10k", "test", test);
  g_autofree char *ckpt = g_build_filename(root, "run.safetensors", NULL);
  size_t count = 0;
  Outcome outcome = {0};
  g_autofree float *params = train_one_epoch(png, ckpt, &count, &outcome);

  g_autoptr(GError) error = NULL;
  g_autoptr(TdmClassifier) cl = tdm_classifier_load(ckpt, &error);
  g_assert_no_error(error);
  g_assert_cmpint(tdm_classifier_classes(cl), ==, 10);
  g_assert_cmpstr(tdm_classifier_class_name(cl, 7), ==, "7");
  int h, w, c;
  tdm_classifier_input(cl, &h, &w, &c);
  g_assert_cmpint(h, ==, train->height);
  g_assert_cmpint(c, ==, 1);
  /* Every test file, decoded and classified here, against the trainer's evaluation:
   * the same number right, and each file as its in-memory sample. */
  int right = 0;
  float probs[10], again[10];
  for (int i = 0; i < test->count; i++) {
    g_autofree char *path = g_strdup_printf("%s/test/%d/%05d.png", png, test->labels[i], i);
    g_assert_true(tdm_classifier_run_file(cl, path, probs, &error));
    g_assert_no_error(error);
    g_assert_true(tdm_classifier_run(cl, test->images + (size_t)i * tdm_dataset_sample_size(test),
                                     again, &error));
    g_assert_cmpmem(probs, sizeof probs, again, sizeof again);
    float sum = 0;
    for (int k = 0; k < 10; k++)
      sum += probs[k];
    g_assert_cmpfloat_with_epsilon(sum, 1.0f, 1e-5f);
    int best;
    tdm_classifier_rank(probs, 10, 1, &best);
    right += best == test->labels[i];
  }
  g_assert_cmpint(outcome.test_count, ==, test->count);
  g_assert_cmpint(right, ==, (int)(outcome.test_accuracy * test->count + 0.5));
  g_test_message("classified %d of %d test files right; the evaluation said %.3f", right,
                 test->count, outcome.test_accuracy);

  g_autoptr(GError) missing = NULL;
  g_assert_false(tdm_classifier_run_file(cl, "/nonexistent.png", probs, &missing));
  g_assert_error(missing, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET);
  g_assert_true(g_str_has_prefix(missing->message, "/nonexistent.png: cannot open"));
  test_remove_tree(root);
}

int
main(int argc, char **argv)
{
  /* A cache folder of the test's own, set before GLib reads it (GLib's
   * G_TEST_OPTION_ISOLATE_DIRS would do this, but leaks under LeakSanitizer). */
  g_autofree char *cache = make_tmp();
  g_setenv("XDG_CACHE_HOME", cache, TRUE);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/image-folder/resample", test_resample);
  g_test_add_func("/image-folder/large-files", test_large_files);
  g_test_add_func("/image-folder/equals-idx", test_equals_idx);
  g_test_add_func("/image-folder/bad-files", test_bad_files);
  g_test_add_func("/image-folder/too-few-classes", test_too_few_classes);
  g_test_add_func("/image-folder/cache", test_cache);
  g_test_add_func("/image-folder/cache-invalidation", test_cache_invalidation);
  g_test_add_func("/image-folder/split-and-defaults", test_split_and_defaults);
  g_test_add_func("/image-folder/classify", test_classify);
  int status = g_test_run();
  test_remove_tree(cache);
  return status;
}
