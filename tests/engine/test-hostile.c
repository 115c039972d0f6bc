/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-hostile.c — hostile inputs, each made here by the test: a
 * gzipped IDX header claiming 38 million images padded past the ratio check, a
 * multi-member gzip, FIFOs, devices, symlink loops and dangling links where dataset
 * files and checkpoints belong, a stray label, stale checkpoint temporaries beside a
 * live one, a checkpoint folder that takes no files, resuming on another dataset and
 * a bad value in a checkpoint's saved configuration. Each must give one error naming
 * the file and what is wrong, without hanging, crashing or allocating what the file
 * does not hold. The ordinary formats are test-dataset.c's and test-checkpoint.c's. */
#include "tdm-checkpoint.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-trainer.h"
#include "remove-tree.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- helpers ---------------------------------------------------------------- */

static char *
make_tmp(const char *name)
{
  g_autofree char *top = g_dir_make_tmp("tdm-hostile-XXXXXX", NULL);
  g_assert_nonnull(top);
  char *dir = g_build_filename(top, name, NULL);
  g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
  return dir;
}

static void
rm_tmp(const char *dir)
{
  g_autofree char *top = g_path_get_dirname(dir);
  test_remove_tree(top);
}

static void
put_be32(GByteArray *a, guint32 v)
{
  guint8 b[4] = {v >> 24, v >> 16, v >> 8, v};
  g_byte_array_append(a, b, 4);
}

static GByteArray *
idx_images(guint32 count, guint32 h, guint32 w, gboolean body)
{
  GByteArray *a = g_byte_array_new();
  put_be32(a, 0x803);
  put_be32(a, count);
  put_be32(a, h);
  put_be32(a, w);
  for (guint32 i = 0; body && i < count * h * w; i++) {
    guint8 p = (guint8)(i * 13 + 5);
    g_byte_array_append(a, &p, 1);
  }
  return a;
}

static GByteArray *
idx_labels(guint32 count, int classes)
{
  GByteArray *a = g_byte_array_new();
  put_be32(a, 0x801);
  put_be32(a, count);
  for (guint32 i = 0; i < count; i++) {
    guint8 l = (guint8)(i % classes);
    g_byte_array_append(a, &l, 1);
  }
  return a;
}

/* One gzip member of data, as gzip(1) writes it. */
static GByteArray *
gzip_member(const guint8 *data, gsize len)
{
  z_stream z = {0};
  g_assert_cmpint(deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), ==,
                  Z_OK);
  GByteArray *out = g_byte_array_sized_new(deflateBound(&z, len));
  g_byte_array_set_size(out, deflateBound(&z, len));
  z.next_in = (Bytef *)data;
  z.avail_in = (uInt)len;
  z.next_out = out->data;
  z.avail_out = out->len;
  g_assert_cmpint(deflate(&z, Z_FINISH), ==, Z_STREAM_END);
  g_byte_array_set_size(out, z.total_out);
  deflateEnd(&z);
  return out;
}

static char *
write_bytes(const char *folder, const char *name, const guint8 *data, gsize len)
{
  char *path = g_build_filename(folder, name, NULL);
  GError *error = NULL;
  g_file_set_contents(path, (const char *)data, (gssize)len, &error);
  g_assert_no_error(error);
  return path;
}

/* A good small IDX set of `classes` classes: 12 training and 6 test images of 3×3. */
static void
write_idx_set(const char *folder, int classes)
{
  g_autoptr(GByteArray) ti = idx_images(12, 3, 3, TRUE), tl = idx_labels(12, classes);
  g_autoptr(GByteArray) vi = idx_images(6, 3, 3, TRUE), vl = idx_labels(6, classes);
  g_free(write_bytes(folder, "train-images-idx3-ubyte", ti->data, ti->len));
  g_free(write_bytes(folder, "train-labels-idx1-ubyte", tl->data, tl->len));
  g_free(write_bytes(folder, "t10k-images-idx3-ubyte", vi->data, vi->len));
  g_free(write_bytes(folder, "t10k-labels-idx1-ubyte", vl->data, vl->len));
}

static void
assert_error(const GError *error, TdmEngineError code, const char *needle1,
             const char *needle2)
{
  g_assert_nonnull(error);
  g_assert_true(error->domain == TDM_ENGINE_ERROR);
  if (error->code != (int)code || strstr(error->message, needle1) == NULL ||
      (needle2 != NULL && strstr(error->message, needle2) == NULL))
    g_error("error %d “%s” is not %d naming “%s” and “%s”", error->code, error->message,
            code, needle1, needle2 ? needle2 : "");
  g_assert_null(strchr(error->message, '\n'));
}

static void
expect_dataset_error(const char *folder, const char *needle1, const char *needle2)
{
  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open(folder, &error);
  g_assert_null(pair);
  assert_error(error, TDM_ENGINE_ERROR_DATASET, needle1, needle2);
  g_clear_error(&error);
}

/* ---- headers that lie about what the gzip holds --------------------- */

static void
test_idx_lying_gzip_header(void)
{
  g_autofree char *dir = make_tmp("lying");
  write_idx_set(dir, 3);
  /* 38 million 28×28 images are 29.8 GB. The stream holds the header and 3 MB of
   * pixels; 27.1 MB of padding carry the file past the 1100:1 ratio check. Before
   * the fix the reader asked g_malloc0 for 29.8 GB and aborted. */
  const guint32 count = 38000000;
  g_autoptr(GByteArray) images = idx_images(count, 28, 28, FALSE);
  gsize header_len = images->len;
  g_byte_array_set_size(images, header_len + 3000000);
  memset(images->data + header_len, 7, 3000000);
  g_autoptr(GByteArray) file = gzip_member(images->data, images->len);
  gsize padded = (gsize)count * 28 * 28 / 1100 + 4096;
  gsize at = file->len;
  g_byte_array_set_size(file, padded);
  memset(file->data + at, 0, padded - at);
  g_autofree char *ip = write_bytes(dir, "train-images-idx3-ubyte.gz", file->data, file->len);
  g_autofree char *raw = g_build_filename(dir, "train-images-idx3-ubyte", NULL);
  g_unlink(raw);
  /* The labels are all there, so the counts agree and the images are read. */
  g_autoptr(GByteArray) labels = idx_labels(count, 3);
  g_autoptr(GByteArray) packed = gzip_member(labels->data, labels->len);
  g_autofree char *lp = write_bytes(dir, "train-labels-idx1-ubyte.gz", packed->data, packed->len);
  g_autofree char *raw_labels = g_build_filename(dir, "train-labels-idx1-ubyte", NULL);
  g_unlink(raw_labels);

  expect_dataset_error(dir, "train-images-idx3-ubyte.gz: truncated",
                       "holds 3000016 bytes once inflated");
  rm_tmp(dir);
}

/* ---- several gzip members, as zcat reads them ------------------------ */

static void
test_idx_multi_member_gzip(void)
{
  g_autofree char *dir = make_tmp("members");
  write_idx_set(dir, 3);
  g_autoptr(GByteArray) images = idx_images(12, 3, 3, TRUE);
  /* Cut inside the header and inside the pixels: members need not respect records. */
  gsize cuts[] = {0, 5, 40, images->len};
  g_autoptr(GByteArray) file = g_byte_array_new();
  for (guint i = 0; i + 1 < G_N_ELEMENTS(cuts); i++) {
    g_autoptr(GByteArray) m = gzip_member(images->data + cuts[i], cuts[i + 1] - cuts[i]);
    g_byte_array_append(file, m->data, m->len);
  }
  g_autofree char *raw = g_build_filename(dir, "train-images-idx3-ubyte", NULL);
  g_unlink(raw);
  g_autofree char *ip = write_bytes(dir, "train-images-idx3-ubyte.gz", file->data, file->len);

  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open(dir, &error);
  g_assert_no_error(error);
  g_assert_cmpint(pair->train->count, ==, 12);
  g_assert_cmpmem(pair->train->images, 12 * 9, images->data + 16, 12 * 9);

  /* Bytes after the last member that start no member: refused, by name. */
  static const guint8 junk[] = "not gzip";
  g_byte_array_append(file, junk, sizeof junk);
  g_free(write_bytes(dir, "train-images-idx3-ubyte.gz", file->data, file->len));
  expect_dataset_error(dir, "train-images-idx3-ubyte.gz: 9 bytes after the end of the gzip",
                       NULL);
  rm_tmp(dir);
}

/* ---- what is not a regular file is refused without being read ------- */

static void
test_idx_not_regular(void)
{
  g_autofree char *dir = make_tmp("special");
  write_idx_set(dir, 3);
  g_autofree char *ip = g_build_filename(dir, "train-images-idx3-ubyte", NULL);

  /* A FIFO: opening it for reading would wait for a writer for ever. */
  g_unlink(ip);
  g_assert_cmpint(mkfifo(ip, 0644), ==, 0);
  expect_dataset_error(dir, "train-images-idx3-ubyte: a FIFO", NULL);

  /* A device, through a link. */
  g_unlink(ip);
  g_assert_cmpint(symlink("/dev/zero", ip), ==, 0);
  expect_dataset_error(dir, "train-images-idx3-ubyte: a device", NULL);

  /* A symlink loop and a dangling link say so, not "missing file". */
  g_unlink(ip);
  g_assert_cmpint(symlink("train-images-idx3-ubyte", ip), ==, 0);
  expect_dataset_error(dir, "train-images-idx3-ubyte: a symbolic link loop", NULL);
  g_unlink(ip);
  g_assert_cmpint(symlink("elsewhere/images", ip), ==, 0);
  expect_dataset_error(dir, "train-images-idx3-ubyte: a dangling symbolic link",
                       "elsewhere/images");

  /* The folder itself: a loop and a dangling link are named, not "no such folder". */
  g_autofree char *top = g_path_get_dirname(dir);
  g_autofree char *folder_loop = g_build_filename(top, "folder-loop", NULL);
  g_assert_cmpint(symlink("folder-loop", folder_loop), ==, 0);
  expect_dataset_error(folder_loop, "folder-loop: a symbolic link loop", NULL);
  g_autofree char *folder_gone = g_build_filename(top, "folder-gone", NULL);
  g_assert_cmpint(symlink("no-such-set", folder_gone), ==, 0);
  expect_dataset_error(folder_gone, "folder-gone: a dangling symbolic link", NULL);

  /* A link to a good file is fine. */
  g_unlink(ip);
  g_autoptr(GByteArray) images = idx_images(12, 3, 3, TRUE);
  g_autofree char *real = write_bytes(dir, "images.real", images->data, images->len);
  g_assert_cmpint(symlink("images.real", ip), ==, 0);
  GError *error = NULL;
  g_autoptr(TdmDatasetPair) pair = tdm_dataset_open(dir, &error);
  g_assert_no_error(error);
  g_assert_cmpint(pair->train->count, ==, 12);
  rm_tmp(dir);
}

static void
test_cifar_fifo(void)
{
  g_autofree char *dir = make_tmp("cifar");
  static const char *const names[] = {"data_batch_1.bin", "data_batch_2.bin",
                                      "data_batch_3.bin", "data_batch_4.bin",
                                      "data_batch_5.bin"};
  guint8 record[3073] = {3};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++)
    g_free(write_bytes(dir, names[i], record, sizeof record));
  g_autofree char *test = g_build_filename(dir, "test_batch.bin", NULL);
  g_assert_cmpint(mkfifo(test, 0644), ==, 0);
  expect_dataset_error(dir, "test_batch.bin: a FIFO", NULL);
  rm_tmp(dir);
}

/* ---- a label out of range names the file, the index and the value ---- */

static void
test_idx_stray_label(void)
{
  /* A folder with no known name: the labels decide the classes, and a stray 200
   * among 0 to 9 is a damaged label file, not a set of 201 classes. */
  g_autofree char *dir = make_tmp("stray");
  write_idx_set(dir, 10);
  g_autoptr(GByteArray) images = idx_images(30, 3, 3, TRUE);
  g_autoptr(GByteArray) labels = idx_labels(30, 10);
  labels->data[8 + 17] = 200;
  g_free(write_bytes(dir, "train-images-idx3-ubyte", images->data, images->len));
  g_autoptr(GByteArray) packed = gzip_member(labels->data, labels->len);
  g_autofree char *raw = g_build_filename(dir, "train-labels-idx1-ubyte", NULL);
  g_unlink(raw);
  g_free(write_bytes(dir, "train-labels-idx1-ubyte.gz", packed->data, packed->len));
  expect_dataset_error(dir,
                       "train-labels-idx1-ubyte.gz: label 200 at index 17 is out of range "
                       "for 10 classes",
                       NULL);
  rm_tmp(dir);
}

/* ---- checkpoints: what is not a regular file, for --resume ---------------------------------------- */

static void
expect_load_error(const char *path, const char *needle)
{
  GError *error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
  g_assert_null(ckpt);
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, path, needle);
  g_clear_error(&error);
}

static void
test_checkpoint_not_regular(void)
{
  g_autofree char *dir = make_tmp("ckpt");
  g_autofree char *fifo = g_build_filename(dir, "fifo.safetensors", NULL);
  g_assert_cmpint(mkfifo(fifo, 0644), ==, 0);
  expect_load_error(fifo, "a FIFO");
  g_autofree char *loop = g_build_filename(dir, "loop.safetensors", NULL);
  g_assert_cmpint(symlink("loop.safetensors", loop), ==, 0);
  expect_load_error(loop, "a symbolic link loop");
  g_autofree char *dangling = g_build_filename(dir, "dangling.safetensors", NULL);
  g_assert_cmpint(symlink("gone.safetensors", dangling), ==, 0);
  expect_load_error(dangling, "a dangling symbolic link");
  g_autofree char *device = g_build_filename(dir, "device.safetensors", NULL);
  g_assert_cmpint(symlink("/dev/zero", device), ==, 0);
  expect_load_error(device, "a device");
  expect_load_error(dir, "a folder");
  rm_tmp(dir);
}

/* ---- a place that cannot be written is found before any work ---------- */

static int
entries(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  int n = 0;
  while (d != NULL && g_dir_read_name(d) != NULL)
    n++;
  if (d != NULL)
    g_dir_close(d);
  return n;
}

static void
test_check_writable(void)
{
  GError *error = NULL;
  /* /proc takes no new files, root's included. */
  g_assert_false(tdm_checkpoint_check_writable("/proc/tandem.safetensors", &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, "/proc/tandem.safetensors",
               "cannot save there");
  g_clear_error(&error);

  g_autofree char *dir = make_tmp("writable");
  g_autofree char *missing = g_build_filename(dir, "no", "run.safetensors", NULL);
  g_assert_false(tdm_checkpoint_check_writable(missing, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, missing, "does not exist");
  g_clear_error(&error);
  g_assert_false(tdm_checkpoint_check_writable(dir, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, dir, "is a folder");
  g_clear_error(&error);

  /* A good place: the probe leaves nothing behind. */
  g_autofree char *good = g_build_filename(dir, "run.safetensors", NULL);
  g_assert_true(tdm_checkpoint_check_writable(good, &error));
  g_assert_no_error(error);
  g_assert_cmpint(entries(dir), ==, 0);

  if (geteuid() != 0) {
    g_chmod(dir, 0555);
    g_assert_false(tdm_checkpoint_check_writable(good, &error));
    assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, good, "cannot save there");
    g_clear_error(&error);
    g_chmod(dir, 0755);
  }
  rm_tmp(dir);
}

/* ---- stale temporaries of a killed save ------------------------------- */

static char *
touch(const char *dir, const char *name)
{
  static const char text[] = "leftover";
  return write_bytes(dir, name, (const guint8 *)text, sizeof text);
}

static void
test_stale_temporaries(void)
{
  g_autofree char *dir = make_tmp("stale");
  g_autofree char *target = g_build_filename(dir, "run.safetensors", NULL);
  /* Two leftovers of run.safetensors from killed saves. */
  g_autofree char *stale1 = touch(dir, ".run.safetensors.AbC123");
  g_autofree char *stale2 = touch(dir, ".run.safetensors.zz9ZZ9");
  /* One a live writer holds (its flock, as tdm_checkpoint_save holds it). */
  g_autofree char *live = touch(dir, ".run.safetensors.L1veW0");
  int live_fd = open(live, O_RDONLY);
  g_assert_cmpint(live_fd, >=, 0);
  g_assert_cmpint(flock(live_fd, LOCK_EX), ==, 0);
  /* And files that are not temporaries of this checkpoint. */
  const char *others[] = {".other.safetensors.AbC123", "run.safetensors.AbC123",
                          ".run.safetensors.bak", ".run.safetensors.AbC1234",
                          ".run.safetensors.Ab-123"};
  for (guint i = 0; i < G_N_ELEMENTS(others); i++)
    g_free(touch(dir, others[i]));

  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_new();
  const gint64 shape[1] = {3};
  const float values[3] = {1, 2, 3};
  tdm_checkpoint_add(ckpt, "x", 1, shape, values);
  GError *error = NULL;
  g_assert_true(tdm_checkpoint_save(ckpt, target, &error));
  g_assert_no_error(error);

  g_assert_false(g_file_test(stale1, G_FILE_TEST_EXISTS));
  g_assert_false(g_file_test(stale2, G_FILE_TEST_EXISTS));
  g_assert_true(g_file_test(live, G_FILE_TEST_EXISTS));
  for (guint i = 0; i < G_N_ELEMENTS(others); i++) {
    g_autofree char *p = g_build_filename(dir, others[i], NULL);
    g_assert_true(g_file_test(p, G_FILE_TEST_EXISTS));
  }
  /* The checkpoint, the live temporary and the five others: no temporary of ours. */
  g_assert_cmpint(entries(dir), ==, 1 + 1 + (int)G_N_ELEMENTS(others));

  /* Once its writer is gone, the next save removes it too. */
  close(live_fd);
  g_assert_true(tdm_checkpoint_save(ckpt, target, &error));
  g_assert_false(g_file_test(live, G_FILE_TEST_EXISTS));
  g_assert_cmpint(entries(dir), ==, 1 + (int)G_N_ELEMENTS(others));
  rm_tmp(dir);
}

/* ---- the trainer: an unwritable place through the engine, a bad label on resume ----------------- */

typedef struct {
  int started, steps;
} Counts;

static void
count_events(const TdmEvent *event, gpointer user_data)
{
  Counts *c = user_data;
  if (event->kind == TDM_EVENT_STARTED)
    c->started++;
  else if (event->kind == TDM_EVENT_STEP)
    c->steps++;
}

static TdmConfig *
small_run(const char *dataset, const char *save)
{
  TdmConfig *c = tdm_config_new();
  g_free(c->dataset);
  c->dataset = g_strdup(dataset);
  g_free(c->network);
  c->network = g_strdup("fc3");
  g_assert_true(tdm_config_set_devices(c, "cpu", NULL));
  c->batch = 4;
  c->epochs = 1;
  c->eval_batch = 6;
  c->max_steps = 1;
  c->save_path = g_strdup(save);
  return c;
}

static void
test_trainer_unwritable_save(void)
{
  /* The window starts runs through the trainer: it must refuse before any work. */
  g_autofree char *dir = make_tmp("set");
  write_idx_set(dir, 3);
  g_autoptr(TdmConfig) c = small_run(dir, "/proc/tandem-run.safetensors");
  Counts counts = {0};
  g_autoptr(TdmTrainer) t = tdm_trainer_new(c, count_events, &counts);
  GError *error = NULL;
  g_assert_false(tdm_trainer_run(t, NULL, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, "/proc/tandem-run.safetensors",
               "cannot save there");
  g_clear_error(&error);
  g_assert_cmpint(counts.started, ==, 0);
  g_assert_cmpint(counts.steps, ==, 0);
  rm_tmp(dir);
}

static void
test_resume_other_dataset(void)
{
  g_autofree char *a = make_tmp("set-a");
  write_idx_set(a, 3);
  g_autofree char *top = g_path_get_dirname(a);
  g_autofree char *b = g_build_filename(top, "set-b", NULL);
  g_assert_cmpint(g_mkdir(b, 0755), ==, 0);
  write_idx_set(b, 3);
  /* Another dataset, not set-a renamed (a checkpoint knows its dataset by its content
   * and resumes on a moved copy): one training sample of class 0 is of class 1 here. */
  g_autoptr(GByteArray) labels = idx_labels(12, 3);
  labels->data[8] = 1;
  g_free(write_bytes(b, "train-labels-idx1-ubyte", labels->data, labels->len));
  g_autofree char *ckpt = g_build_filename(top, "run.safetensors", NULL);

  GError *error = NULL;
  {
    g_autoptr(TdmConfig) c = small_run(a, ckpt);
    g_autoptr(TdmTrainer) t = tdm_trainer_new(c, NULL, NULL);
    g_assert_true(tdm_trainer_run(t, NULL, &error));
    g_assert_no_error(error);
  }
  g_autoptr(TdmConfig) c = small_run(b, NULL);
  c->max_steps = 2;
  Counts counts = {0};
  g_autoptr(TdmTrainer) t = tdm_trainer_new(c, count_events, &counts);
  tdm_trainer_set_resume_path(t, ckpt);
  g_assert_false(tdm_trainer_run(t, NULL, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, "“set-a”", "“set-b”");
  g_clear_error(&error);
  g_assert_cmpint(counts.steps, ==, 0);
  rm_tmp(a);
}

static void
test_saved_config_bad_value(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  GError *error = NULL;
  g_assert_true(tdm_config_validate_saved(c, "checkpoint run.safetensors", &error));
  g_assert_no_error(error);

  c->batch = -7;
  g_assert_false(tdm_config_validate_saved(c, "checkpoint run.safetensors", &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, "checkpoint run.safetensors",
               "key “batch” = -7: the batch size must be at least 1");
  g_assert_null(strstr(error->message, "--batch"));
  g_clear_error(&error);

  c->batch = 64;
  c->main_replica = 3;
  g_assert_false(tdm_config_validate_saved(c, "checkpoint run.safetensors", &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, "key “main_replica” = 3", NULL);
  g_assert_null(strstr(error->message, "--main"));
  g_clear_error(&error);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/hostile/idx/lying-gzip-header", test_idx_lying_gzip_header);
  g_test_add_func("/hostile/idx/multi-member-gzip", test_idx_multi_member_gzip);
  g_test_add_func("/hostile/idx/not-regular", test_idx_not_regular);
  g_test_add_func("/hostile/idx/stray-label", test_idx_stray_label);
  g_test_add_func("/hostile/cifar/fifo", test_cifar_fifo);
  g_test_add_func("/hostile/checkpoint/not-regular", test_checkpoint_not_regular);
  g_test_add_func("/hostile/checkpoint/check-writable", test_check_writable);
  g_test_add_func("/hostile/checkpoint/stale-temporaries", test_stale_temporaries);
  g_test_add_func("/hostile/trainer/unwritable-save", test_trainer_unwritable_save);
  g_test_add_func("/hostile/trainer/resume-other-dataset", test_resume_other_dataset);
  g_test_add_func("/hostile/config/saved-bad-value", test_saved_config_bad_value);
  return g_test_run();
}
