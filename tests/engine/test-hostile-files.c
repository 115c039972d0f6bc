/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-hostile-files.c — the third round of hostile inputs, each made here by the
 * test: the one reader of every file (FIFOs, a link to /dev/zero, files past their
 * cap, lines past theirs), run files nested 100,000 deep or holding more samples than
 * a record keeps, a run renamed while its file is thinned, checkpoints with a 3 GB
 * tensor nobody uses, NaN, infinities, 3e38, negative variances and int64 values in
 * weights, output paths spelled two ways, pools whose window overflows an int, a
 * canonical spec that must parse again, exact mode with frozen BN, and names that
 * would drive a terminal. Each must give one clear error or a correct result. The
 * command line's side is tests/cli/test-cli-inputs.sh's. */
#include "tdm-checkpoint.h"
#include "tdm-classifier.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-file.h"
#include "tdm-history.h"
#include "tdm-network.h"
#include "tdm-printable.h"
#include "tdm-trainer.h"
#include "hostile-util.h"
#include "image-writer.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void
write_text(const char *path, const char *text)
{
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

/* ---- the one reader: regular files only, caps named -------------------------- */

static void
test_reader_refuses(void)
{
  g_autofree char *dir = scratch("reader");
  g_autofree char *fifo = g_build_filename(dir, "f.json", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  GError *error = NULL;
  /* Each returns at once: a FIFO without a writer would block an ordinary open. */
  g_assert_null(tdm_file_read_all(fifo, "configuration ", TDM_ENGINE_ERROR_INVALID_OPTION,
                                  1 << 20, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_OPTION, "configuration ", "FIFO");
  g_clear_error(&error);
  g_assert_null(tdm_line_reader_open(fifo, "run file ", TDM_ENGINE_ERROR_HISTORY, 100, 0,
                                     &error));
  assert_error(error, TDM_ENGINE_ERROR_HISTORY, fifo, "FIFO");
  g_clear_error(&error);
  g_assert_null(tdm_file_map(fifo, "checkpoint ", TDM_ENGINE_ERROR_CHECKPOINT, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, fifo, "FIFO");
  g_clear_error(&error);

  /* A link to a device that never ends. */
  g_autofree char *zero = g_build_filename(dir, "zero.json", NULL);
  g_assert_cmpint(symlink("/dev/zero", zero), ==, 0);
  g_assert_null(tdm_file_read_all(zero, "", TDM_ENGINE_ERROR_INVALID_OPTION, 1 << 20, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_OPTION, zero, "a device");
  g_clear_error(&error);

  /* 3 GB (sparse: no disk) against a 1 MB cap: refused before any byte is read. */
  g_autofree char *big = g_build_filename(dir, "big.json", NULL);
  int fd = g_open(big, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  g_assert_cmpint(fd, >=, 0);
  g_assert_cmpint(ftruncate(fd, (off_t)3000000000LL), ==, 0);
  close(fd);
  g_assert_null(tdm_file_read_all(big, "configuration ", TDM_ENGINE_ERROR_INVALID_OPTION,
                                  1 << 20, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_OPTION, "larger than 1.0 MB", "3.0 GB");
  g_clear_error(&error);
  g_assert_null(tdm_line_reader_open(big, "run file ", TDM_ENGINE_ERROR_HISTORY, 100,
                                     1 << 20, &error));
  assert_error(error, TDM_ENGINE_ERROR_HISTORY, "run file ", "larger than 1.0 MB");
  g_clear_error(&error);

  /* Within the cap: the bytes, and a NUL after them. */
  g_autofree char *small = g_build_filename(dir, "small.json", NULL);
  write_text(small, "{\"a\": 1}");
  g_autoptr(GBytes) bytes = tdm_file_read_all(small, "", TDM_ENGINE_ERROR_INVALID_OPTION,
                                              8, &error);
  g_assert_no_error(error);
  gsize size = 0;
  const char *text = g_bytes_get_data(bytes, &size);
  g_assert_cmpuint(size, ==, 8);
  g_assert_cmpint(text[8], ==, '\0');
}

static void
test_reader_lines(void)
{
  g_autofree char *dir = scratch("lines");
  g_autofree char *path = g_build_filename(dir, "run.jsonl", NULL);
  /* Lines of 10, 0, 100,000 and 3 bytes, the last without a newline, one holding a
   * NUL; then the same with a line past the cap. */
  GString *s = g_string_new("0123456789\n\n");
  for (int i = 0; i < 100000; i++)
    g_string_append_c(s, 'a' + i % 26);
  g_string_append(s, "\nx");
  g_string_append_c(s, '\0');
  g_string_append(s, "y");
  g_assert_true(g_file_set_contents(path, s->str, (gssize)s->len, NULL));
  GError *error = NULL;
  g_autoptr(TdmLineReader) r = tdm_line_reader_open(path, "run file ", TDM_ENGINE_ERROR_HISTORY,
                                                    100000, 0, &error);
  g_assert_no_error(error);
  gsize len = 0;
  const gsize want[] = {10, 0, 100000, 3};
  for (int i = 0; i < 4; i++) {
    const char *line = tdm_line_reader_next(r, &len, &error);
    g_assert_no_error(error);
    g_assert_nonnull(line);
    g_assert_cmpuint(len, ==, want[i]);
    g_assert_cmpint(line[len], ==, '\0');
    g_assert_cmpint(tdm_line_reader_number(r), ==, i + 1);
    g_assert_cmpint(tdm_line_reader_unterminated(r), ==, i == 3);
    if (i == 2)
      g_assert_cmpint(line[99999], ==, 'a' + 99999 % 26);
  }
  g_assert_null(tdm_line_reader_next(r, &len, &error));
  g_assert_no_error(error);

  g_autoptr(TdmLineReader) capped = tdm_line_reader_open(path, "run file ",
                                                         TDM_ENGINE_ERROR_HISTORY, 99999, 0,
                                                         &error);
  g_assert_nonnull(tdm_line_reader_next(capped, &len, &error));
  g_assert_nonnull(tdm_line_reader_next(capped, &len, &error));
  g_assert_null(tdm_line_reader_next(capped, &len, &error));
  assert_error(error, TDM_ENGINE_ERROR_HISTORY, "line 3 is longer than", path);
  g_clear_error(&error);
  g_string_free(s, TRUE);
}

/* ---- output paths compared as files, not as spellings ------------------------ */

static void
test_same_file(void)
{
  g_autofree char *dir = scratch("same");
  g_autofree char *val = g_build_filename(dir, "val", NULL);
  g_assert_cmpint(g_mkdir(val, 0755), ==, 0);
  g_autofree char *cwd = g_get_current_dir();
  g_assert_cmpint(g_chdir(dir), ==, 0);
  /* Neither exists yet: one name in one folder. */
  g_assert_true(tdm_file_same("val/b.st", "./val/../val/b.st"));
  g_assert_false(tdm_file_same("val/b.st", "val/c.st"));
  g_assert_false(tdm_file_same("val/b.st", "b.st"));
  /* Existing: a link and a hard link are the file. */
  write_text("val/b.st", "x");
  g_assert_cmpint(symlink("val/b.st", "link.st"), ==, 0);
  g_assert_cmpint(link("val/b.st", "hard.st"), ==, 0);
  g_assert_true(tdm_file_same("link.st", "./val/b.st"));
  g_assert_true(tdm_file_same("hard.st", "val/b.st"));
  g_assert_false(tdm_file_same("val/b.st", "val/new.st"));

  /* The configuration's check of --save against --save-best uses it. */
  g_autoptr(TdmConfig) c = tdm_config_new();
  c->val_split = 0.1;
  c->save_path = g_strdup("val/b2.st");
  c->save_best_path = g_strdup("./val/../val/b2.st");
  GError *error = NULL;
  g_assert_false(tdm_config_validate(c, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_OPTION, "--save-best", "the same file as --save");
  g_clear_error(&error);
  g_assert_cmpint(g_chdir(cwd), ==, 0);
}

/* ---- checkpoints: mapped, and checked as they come in ----------------------- */

/* A safetensors file: the header, then `data` (len bytes), then `sparse` more bytes
 * that take no disk (a hole). */
static void
write_safetensors(const char *path, const char *header, const void *data, gsize len,
                  guint64 sparse)
{
  gsize hlen = strlen(header);
  gsize padded = (hlen + 7) & ~(gsize)7;
  int fd = g_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  g_assert_cmpint(fd, >=, 0);
  guint64 le = GUINT64_TO_LE((guint64)padded);
  g_assert_cmpint(write(fd, &le, 8), ==, 8);
  g_autofree char *h = g_malloc(padded);
  memset(h, ' ', padded);
  memcpy(h, header, hlen);
  g_assert_cmpint(write(fd, h, padded), ==, (ssize_t)padded);
  g_assert_cmpint(write(fd, data, len), ==, (ssize_t)len);
  if (sparse > 0)
    g_assert_cmpint(ftruncate(fd, (off_t)(8 + padded + len + sparse)), ==, 0);
  close(fd);
}

/* fc3 on 2×2 grey inputs: fc.weight [3, 4] and fc.bias [3], 15 floats. */
static TdmNetwork *
fc3(void)
{
  TdmNetwork *net = tdm_network_new("fc3", 2, 2, 1, 3, NULL);
  g_assert_nonnull(net);
  return net;
}

static void
test_checkpoint_unused_tensor(void)
{
  g_autofree char *dir = scratch("unused");
  g_autofree char *path = g_build_filename(dir, "big.safetensors", NULL);
  float values[15];
  for (int i = 0; i < 15; i++)
    values[i] = 0.01f * (float)i;
  /* A 3 GB tensor no network here has, after the two that matter. */
  const char *header =
      "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,48]},"
      "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[48,60]},"
      "\"other.head\":{\"dtype\":\"F32\",\"shape\":[750000000],"
      "\"data_offsets\":[60,3000000060]}}";
  write_safetensors(path, header, values, sizeof values, 3000000000ULL);
  GError *error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) net = fc3();
  float params[15] = {0}, state[1];
  g_autofree char *report = NULL;
  g_assert_true(tdm_checkpoint_read_matching(ckpt, net, path, FALSE, params, state, &report,
                                             &error));
  g_assert_no_error(error);
  g_assert_nonnull(strstr(report, "1 of the file's tensors unused"));
  g_assert_cmpfloat(params[net->layers[0].bias_offset + 2], ==, 0.01f * 14);
  /* Nothing of it was read, let alone copied. */
  const TdmTensor *unused = tdm_checkpoint_find(ckpt, "other.head");
  g_assert_nonnull(unused);
  g_assert_null(unused->data);
  /* The tensors that were used point into the file's mapping, not at copies. */
  g_assert_nonnull(tdm_checkpoint_find(ckpt, "fc.weight")->data);

  /* Classifying with these weights goes the same way. */
  g_autoptr(TdmClassifier) cl = tdm_classifier_load_weights("fc3", path, 2, 1, NULL, &error);
  g_assert_no_error(error);
  g_assert_nonnull(cl);
}

/* A checkpoint of fc3's two tensors whose `index`-th value is `bad`; the bias as I64
 * when `i64_bias`. */
static char *
fc3_file(const char *dir, const char *name, int index, float bad, gboolean i64_bias)
{
  char *path = g_build_filename(dir, name, NULL);
  float w[12];
  for (int i = 0; i < 12; i++)
    w[i] = 0.1f;
  if (index >= 0)
    w[index] = bad;
  if (i64_bias) {
    char data[48 + 24];
    gint64 bias[3] = {GINT64_TO_LE(1), GINT64_TO_LE(2), GINT64_TO_LE(3)};
    memcpy(data, w, 48);
    memcpy(data + 48, bias, 24);
    write_safetensors(path,
                      "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,48]},"
                      "\"fc.bias\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[48,72]}}",
                      data, sizeof data, 0);
  } else {
    float data[15] = {0};
    memcpy(data, w, sizeof w);
    write_safetensors(path,
                      "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,48]},"
                      "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[48,60]}}",
                      data, sizeof data, 0);
  }
  return path;
}

static void
expect_refused(const char *path, const char *needle1, const char *needle2)
{
  GError *error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) net = fc3();
  float params[15], state[1];
  g_assert_false(tdm_checkpoint_read_matching(ckpt, net, path, FALSE, params, state, NULL,
                                              &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, needle1, needle2);
  g_clear_error(&error);
  /* The classifier's way in (--classify with --init) says the same. */
  g_assert_null(tdm_classifier_load_weights("fc3", path, 2, 1, NULL, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, needle1, needle2);
  g_clear_error(&error);
}

static void
test_checkpoint_values_checked(void)
{
  g_autofree char *dir = scratch("values");
  g_autofree char *nan = fc3_file(dir, "nan.st", 5, NAN, FALSE);
  expect_refused(nan, "tensor “fc.weight”", "not a finite number");
  g_autofree char *inf = fc3_file(dir, "inf.st", 0, -INFINITY, FALSE);
  expect_refused(inf, "tensor “fc.weight”", "not a finite number");
  g_autofree char *huge = fc3_file(dir, "huge.st", 11, 3e38f, FALSE);
  expect_refused(huge, "tensor “fc.weight”", "beyond ±1e12");
  g_autofree char *i64 = fc3_file(dir, "i64.st", -1, 0, TRUE);
  expect_refused(i64, "tensor “fc.bias”", "int64");

  /* BN: a negative running variance; an int64 num_batches_tracked is what PyTorch
   * writes, and is taken. */
  g_autoptr(TdmNetwork) net = tdm_network_new("fc4,bn,fc3", 2, 2, 1, 3, NULL);
  g_assert_nonnull(net);
  GString *header = g_string_new("{");
  GByteArray *data = g_byte_array_new();
  const char *names[] = {"fc1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                         "bn1.running_var", "fc2.weight", "fc2.bias"};
  const int counts[] = {16, 4, 4, 4, 4, 12, 3};
  for (int i = 0; i < 7; i++) {
    float v[16];
    for (int k = 0; k < 16; k++)
      v[k] = i == 4 ? (k == 2 ? -0.5f : 1.0f) : 0.1f;
    int dims = i == 0 ? 4 : i == 5 ? 3 : counts[i];
    if (i == 0 || i == 5)
      g_string_append_printf(header, "\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,4],"
                                      "\"data_offsets\":[%u,%u]},",
                             names[i], dims, data->len, data->len + 4 * counts[i]);
    else
      g_string_append_printf(header, "\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
                                      "\"data_offsets\":[%u,%u]},",
                             names[i], dims, data->len, data->len + 4 * counts[i]);
    g_byte_array_append(data, (const guint8 *)v, 4 * counts[i]);
  }
  gint64 tracked = GINT64_TO_LE(7);
  g_string_append_printf(header, "\"bn1.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],"
                                 "\"data_offsets\":[%u,%u]}}", data->len, data->len + 8);
  g_byte_array_append(data, (const guint8 *)&tracked, 8);
  g_autofree char *bn = g_build_filename(dir, "bn.st", NULL);
  write_safetensors(bn, header->str, data->data, data->len, 0);
  GError *error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(bn, &error);
  g_assert_no_error(error);
  g_autofree float *params = g_new0(float, net->parameter_count);
  g_autofree float *state = g_new0(float, net->state_count);
  g_assert_false(tdm_checkpoint_read_matching(ckpt, net, bn, FALSE, params, state, NULL,
                                              &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, "“bn1.running_var”",
               "a negative variance (-0.5 at index 2)");
  g_clear_error(&error);
  g_autofree gint64 *counted = g_new(gint64, net->layer_count);
  tdm_checkpoint_read_tracked(ckpt, net, counted);
  g_assert_cmpint(counted[1], ==, 7);
  g_string_free(header, TRUE);
  g_byte_array_unref(data);
}

/* ---- --config: the run-file branch parses under the depth limit --------------- */

static void
test_run_file_settings(void)
{
  g_autofree char *dir = scratch("settings");
  g_autofree char *deep = g_build_filename(dir, "deep.jsonl", NULL);
  g_autofree char *arrays = nested("[", "1", "]", 100000);
  g_autofree char *line = g_strdup_printf("{\"type\":\"settings\",\"config\":{\"x\":%s}}\n",
                                          arrays);
  write_text(deep, line);
  GError *error = NULL;
  TdmConfig *config = NULL;
  g_assert_false(tdm_history_file_settings(deep, &config, &error));
  g_assert_null(config);
  assert_error(error, TDM_ENGINE_ERROR_HISTORY, deep, "nest deeper than");
  g_clear_error(&error);

  /* A run file whose settings line is past the line cap names the cap. */
  g_autofree char *wide = g_build_filename(dir, "wide.jsonl", NULL);
  GString *s = g_string_new("{\"type\":\"settings\",\"name\":\"");
  while (s->len <= TDM_HISTORY_MAX_LINE)
    g_string_append(s, "xxxxxxxxxxxxxxxx");
  g_string_append(s, "\"}\n");
  write_text(wide, s->str);
  g_string_free(s, TRUE);
  g_assert_false(tdm_history_file_settings(wide, &config, &error));
  assert_error(error, TDM_ENGINE_ERROR_HISTORY, "line 1 is longer than 1.0 MB", NULL);
  g_clear_error(&error);

  /* Not a run file: TRUE, and no configuration. */
  g_autofree char *other = g_build_filename(dir, "config.json", NULL);
  write_text(other, "{\"dataset\": \"synthetic\"}");
  g_assert_true(tdm_history_file_settings(other, &config, &error));
  g_assert_no_error(error);
  g_assert_null(config);

  /* Unknown keys are found; the writer's own are not. */
  g_autoptr(TdmConfig) c = tdm_config_new();
  c->val_split = 0.2;
  g_autofree char *json = tdm_config_to_json(c);
  g_assert_null(tdm_config_json_unknown_key(json));
  g_autofree char *typo = g_strdup_printf("{\"bacth\": 3, %s", json + 1);
  g_autofree char *key = tdm_config_json_unknown_key(typo);
  g_assert_cmpstr(key, ==, "bacth");
}

/* ---- the run history: bounded memory, and renames against thinning ------------ */

static const char *settings_line =
    "{\"type\":\"settings\",\"name\":\"r\",\"created\":1,\"config\":";

static char *
run_file(const char *folder, const char *id)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autofree char *json = tdm_config_to_json(c);
  g_autofree char *file = g_strconcat(id, ".jsonl", NULL);
  char *path = g_build_filename(folder, file, NULL);
  g_autofree char *first = g_strdup_printf("%s%s}\n", settings_line, json);
  write_text(path, first);
  return path;
}

static void
append_text(const char *path, const char *text, gsize len)
{
  int fd = g_open(path, O_WRONLY | O_APPEND, 0);
  g_assert_cmpint(fd, >=, 0);
  g_assert_cmpint(write(fd, text, len), ==, (ssize_t)len);
  close(fd);
}

static void
test_history_bounded(void)
{
  g_autofree char *folder = scratch("bounded");
  g_autoptr(TdmHistory) h = tdm_history_new(folder);
  GError *error = NULL;

  /* A line past the cap: named, with the cap. */
  g_autofree char *wide = run_file(folder, "wide");
  GString *s = g_string_new("{\"type\":\"step\",\"x\":\"");
  while (s->len <= TDM_HISTORY_MAX_LINE)
    g_string_append(s, "0123456789abcdef");
  g_string_append(s, "\"}\n");
  append_text(wide, s->str, s->len);
  g_string_free(s, TRUE);
  g_assert_null(tdm_history_load(h, "wide", &error));
  assert_error(error, TDM_ENGINE_ERROR_HISTORY, "line 2 is longer than 1.0 MB", "wide.jsonl");
  g_clear_error(&error);

  /* More sampled steps than a record keeps, and device lines far wider than the
   * run's one device: what is kept stays bounded, and spans the whole run. */
  g_autofree char *many = run_file(folder, "many");
  const int steps = (1 << 19) + (1 << 17);
  GString *lines = g_string_new(NULL);
  for (int i = 1; i <= steps; i++) {
    g_string_append_printf(lines, "{\"type\":\"step\",\"step\":%d,\"elapsed\":%d}\n", i, i);
    if (i % 4096 == 0) {
      g_string_append_printf(lines, "{\"type\":\"devices\",\"step\":%d,\"devices\":[", i);
      for (int d = 0; d < 200; d++)
        g_string_append_printf(lines, "%s{\"compute_ms\":1}", d ? "," : "");
      g_string_append(lines, "]}\n");
      append_text(many, lines->str, lines->len);
      g_string_truncate(lines, 0);
    }
  }
  append_text(many, lines->str, lines->len);
  g_string_free(lines, TRUE);
  g_autoptr(TdmRunRecord) r = tdm_history_load(h, "many", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r->points->len, <=, 1u << 19);
  g_assert_cmpuint(r->points->len, >=, 1u << 17);
  const TdmHistoryPoint *last = &g_array_index(r->points, TdmHistoryPoint, r->points->len - 1);
  g_assert_cmpint(last->step, >, steps - 8);
  g_assert_cmpint(g_array_index(r->points, TdmHistoryPoint, 0).step, ==, 1);
  /* One device in the run: one figure a line, whatever the line lists. */
  g_assert_cmpuint(r->device_points->len, ==, (guint)(steps / 4096));
}

typedef struct {
  TdmHistory *history;
  gboolean ok;
} Rename;

static gpointer
rename_run(gpointer data)
{
  Rename *job = data;
  job->ok = tdm_history_rename(job->history, "race", "renamed meanwhile", NULL);
  return NULL;
}

/* Whether some process waits for an flock on the file of this inode (/proc/locks
 * lists waiting requests with "->"). */
static gboolean
lock_awaited(ino_t inode)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/locks", &text, NULL, NULL))
    return FALSE;
  g_autofree char *needle = g_strdup_printf(":%lu ", (unsigned long)inode);
  for (char *line = strstr(text, "->"); line != NULL; line = strstr(line + 2, "->")) {
    char *end = strchr(line, '\n');
    if (end != NULL)
      *end = '\0';
    gboolean hit = strstr(line, "FLOCK") != NULL && strstr(line, needle) != NULL;
    if (end != NULL)
      *end = '\n';
    if (hit)
      return TRUE;
  }
  return FALSE;
}

static void
test_history_rename_during_thinning(void)
{
  if (!g_file_test("/proc/locks", G_FILE_TEST_EXISTS)) {
    g_test_skip("no /proc/locks to see the rename wait");
    return;
  }
  g_autofree char *folder = scratch("race");
  g_autoptr(TdmHistory) h = tdm_history_new(folder);
  g_autofree char *path = run_file(folder, "race");
  /* This test plays the thinning: it holds the file's lock, as a compaction does from
   * reading the file to renaming its thinned copy over it. */
  int held = g_open(path, O_WRONLY | O_APPEND, 0);
  g_assert_cmpint(flock(held, LOCK_EX), ==, 0);
  struct stat st;
  g_assert_cmpint(fstat(held, &st), ==, 0);
  Rename job = {h, FALSE};
  GThread *thread = g_thread_new("rename", rename_run, &job);
  /* The rename has opened the old file and waits for its lock. */
  while (!lock_awaited(st.st_ino))
    g_thread_yield();
  g_autofree char *thinned = g_build_filename(folder, "thinned", NULL);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  write_text(thinned, text);
  g_assert_cmpint(g_rename(thinned, path), ==, 0);
  close(held);
  g_thread_join(thread);
  g_assert_true(job.ok);
  /* The name went to the file that is there now, not to the one replaced. */
  GError *error = NULL;
  g_autoptr(TdmRunRecord) r = tdm_history_load(h, "race", &error);
  g_assert_no_error(error);
  g_assert_cmpstr(r->name, ==, "renamed meanwhile");
}

static void
test_history_not_a_folder(void)
{
  g_autofree char *dir = scratch("history-file");
  g_autofree char *file = g_build_filename(dir, "runs", NULL);
  write_text(file, "not a folder");
  g_autoptr(TdmHistory) h = tdm_history_new(file);
  GError *error = NULL;
  g_assert_false(tdm_history_check_folder(h, &error));
  assert_error(error, TDM_ENGINE_ERROR_HISTORY, file, "not a folder");
  g_clear_error(&error);
  g_autofree char *absent = g_build_filename(dir, "not-yet", NULL);
  g_autoptr(TdmHistory) fresh = tdm_history_new(absent);
  g_assert_true(tdm_history_check_folder(fresh, &error));
  g_assert_no_error(error);
}

/* ---- specs and pools ------------------------------------------------------------ */

static TdmConfig *
synthetic_run(const char *network, int batch)
{
  TdmConfig *c = tdm_config_new();
  g_free(c->dataset);
  c->dataset = g_strdup("synthetic");
  g_free(c->network);
  c->network = g_strdup(network);
  c->batch = batch;
  c->epochs = 1;
  c->max_steps = 2;
  c->eval_batch = 200;
  return c;
}

static void
test_pool_windows(void)
{
  GError *error = NULL;
  /* poolK strides by K, which may be past 15: the canonical spec must read back. */
  g_autoptr(TdmNetwork) net = tdm_network_new("pool16p1,fc10", 32, 32, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(net->spec, ==, "pool16s16p1,fc10");
  g_autoptr(TdmNetwork) again = tdm_network_new(net->spec, 32, 32, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(again->spec, ==, net->spec);

  /* Windows whose K² overflows an int, and one a million wide: trained for two steps,
   * the loss finite. Visiting only the window's part inside the input keeps them as
   * cheap as the input. */
  const char *specs[] = {"avg65536p32768,fc10", "pool1048576p524288,fc10"};
  for (gsize i = 0; i < G_N_ELEMENTS(specs); i++) {
    g_autoptr(TdmConfig) c = synthetic_run(specs[i], 16);
    g_autoptr(TdmTrainer) t = tdm_trainer_new(c, NULL, NULL);
    g_assert_true(tdm_trainer_run(t, NULL, &error));
    g_assert_no_error(error);
  }

  /* A flat vector into a block that opens with a conv is refused like fc16,conv…. */
  g_assert_null(tdm_network_new("fc16,basic8,fc10", 28, 28, 1, 10, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_SPEC, "flat vector", NULL);
  g_clear_error(&error);
  g_assert_null(tdm_network_new("fc16,bn,relu,res(conv8k3p1),fc10", 28, 28, 1, 10, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_SPEC, "flat vector", NULL);
  g_clear_error(&error);
}

/* ---- exact mode with frozen BN, and what frozen BN keeps -------------------------- */

static float *
read_values(const char *path, const char *name, gsize *count)
{
  GError *error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
  g_assert_no_error(error);
  const TdmTensor *t = tdm_checkpoint_get(ckpt, name);
  g_assert_nonnull(t);
  gsize n = 1;
  for (int d = 0; d < t->rank; d++)
    n *= (gsize)t->shape[d];
  *count = n;
  return g_memdup2(t->data, MAX(1, n) * sizeof(float));
}

static void
test_exact_frozen_bn(void)
{
  g_autofree char *dir = scratch("exact-frozen");
  const char *spec = "conv8k3p1,bn,relu,res(conv8k3p1,bn),fc10";
  /* The synthetic set's shape with 256 and 64 images: what is checked is the steps,
   * and each run's evaluation of the built-in set's 10,000 test images through the
   * convolutions cost 7 CPU s under AddressSanitizer. */
  TdmDatasetPair *data = tdm_dataset_synthetic(0, 256, 64);
  /* Weights to start from: a run of a few steps, so BN's statistics are not the
   * initial 0 and 1. */
  g_autofree char *init = g_build_filename(dir, "init.st", NULL);
  g_autoptr(TdmConfig) first = synthetic_run(spec, 32);
  first->max_steps = 3;
  first->save_path = g_strdup(init);
  g_autoptr(TdmTrainer) t0 = tdm_trainer_new(first, NULL, NULL);
  tdm_trainer_set_dataset(t0, data);
  GError *error = NULL;
  g_assert_true(tdm_trainer_run(t0, NULL, &error));
  g_assert_no_error(error);

  /* Exact mode, the first layers and the block frozen: it trains, on one worker and
   * on two alike to the bit, and the frozen BN's statistics and count stay. */
  float *saved[2] = {NULL, NULL};
  gsize n = 0;
  for (int k = 0; k < 2; k++) {
    g_autofree char *out = g_strdup_printf("%s/exact-%d.st", dir, k);
    g_autoptr(TdmConfig) c = synthetic_run(spec, 32);
    c->exact = TRUE;
    c->init_path = g_strdup(init);
    c->freeze = g_strsplit("conv1,bn1,layer1", ",", -1);
    c->save_path = g_strdup(out);
    g_assert_true(tdm_config_set_devices(c, k == 0 ? "cpu" : "cpu:2", NULL));
    g_autoptr(TdmTrainer) t = tdm_trainer_new(c, NULL, NULL);
    tdm_trainer_set_dataset(t, data);
    g_assert_true(tdm_trainer_run(t, NULL, &error));
    g_assert_no_error(error);
    saved[k] = read_values(out, "fc.weight", &n);
    gsize m = 0;
    g_autofree float *before = read_values(init, "bn1.running_var", &m);
    g_autofree float *after = read_values(out, "bn1.running_var", &m);
    g_assert_cmpmem(before, m * sizeof(float), after, m * sizeof(float));
    g_autofree float *block_before = read_values(init, "layer1.0.bn1.running_mean", &m);
    g_autofree float *block_after = read_values(out, "layer1.0.bn1.running_mean", &m);
    g_assert_cmpmem(block_before, m * sizeof(float), block_after, m * sizeof(float));
    g_autofree float *count_before = read_values(init, "bn1.num_batches_tracked", &m);
    g_autofree float *count_after = read_values(out, "bn1.num_batches_tracked", &m);
    g_assert_cmpfloat(count_before[0], ==, 3.0f);
    g_assert_cmpfloat(count_after[0], ==, 3.0f);
  }
  g_assert_cmpmem(saved[0], n * sizeof(float), saved[1], n * sizeof(float));
  g_free(saved[0]);
  g_free(saved[1]);
  tdm_dataset_pair_free(data);
}

static void
test_finetune_messages(void)
{
  /* A factor of 0 out of order is --lr-scale's to answer for, not --freeze's. */
  g_autoptr(TdmConfig) c = synthetic_run("conv8k3p1,bn,relu,conv8k3p1,bn,relu,fc10", 32);
  c->lr_scale = g_strsplit("conv2=0", ",", -1);
  g_autoptr(TdmTrainer) t = tdm_trainer_new(c, NULL, NULL);
  GError *error = NULL;
  g_assert_false(tdm_trainer_run(t, NULL, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_OPTION, "--lr-scale “conv2=0”",
               "freezes “conv2”");
  g_assert_null(strstr(error->message, "--freeze"));
  g_clear_error(&error);
}

/* A run started from --init resumes once the file it started from is gone. */
static void
test_resume_without_init(void)
{
  g_autofree char *dir = scratch("init-moved");
  g_autofree char *init = g_build_filename(dir, "init.st", NULL);
  g_autoptr(TdmConfig) first = synthetic_run("fc16,relu,fc10", 32);
  first->save_path = g_strdup(init);
  g_autoptr(TdmTrainer) t0 = tdm_trainer_new(first, NULL, NULL);
  GError *error = NULL;
  g_assert_true(tdm_trainer_run(t0, NULL, &error));
  g_assert_no_error(error);

  g_autofree char *run = g_build_filename(dir, "run.st", NULL);
  g_autoptr(TdmConfig) c = synthetic_run("fc16,relu,fc10", 32);
  c->init_path = g_strdup(init);
  c->save_path = g_strdup(run);
  g_autoptr(TdmTrainer) t1 = tdm_trainer_new(c, NULL, NULL);
  g_assert_true(tdm_trainer_run(t1, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpint(g_unlink(init), ==, 0);

  c->max_steps = 4;
  g_autoptr(TdmTrainer) t2 = tdm_trainer_new(c, NULL, NULL);
  tdm_trainer_set_resume_path(t2, run);
  g_assert_true(tdm_trainer_run(t2, NULL, &error));
  g_assert_no_error(error);
}

/* ---- classifying: the real reason, named ------------------------------------------ */

static void
test_classify_reasons(void)
{
  g_autofree char *dir = scratch("classify");
  g_autofree char *weights = fc3_file(dir, "w.st", -1, 0, FALSE);
  GError *error = NULL;
  /* resnet18 at 2049 px: the activation limit, not a missing head. */
  g_assert_null(tdm_classifier_load_weights("resnet18", weights, 2049, 3, NULL, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_SPEC, "too large", NULL);
  g_assert_null(strstr(error->message, "no “fc.weight”"));
  g_clear_error(&error);

  /* A Tandem checkpoint whose input_shape was changed: the metadata is named. */
  g_autofree char *run = g_build_filename(dir, "run.st", NULL);
  g_autoptr(TdmConfig) c = synthetic_run("fc16,relu,fc10", 32);
  c->save_path = g_strdup(run);
  g_autoptr(TdmTrainer) t = tdm_trainer_new(c, NULL, NULL);
  g_assert_true(tdm_trainer_run(t, NULL, &error));
  g_assert_no_error(error);
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(run, &error);
  g_assert_no_error(error);
  tdm_checkpoint_set_metadata(ckpt, "input_shape", "30,30,1");
  g_autofree char *moved = g_build_filename(dir, "shape.st", NULL);
  g_assert_true(tdm_checkpoint_save(ckpt, moved, &error));
  g_assert_null(tdm_classifier_load(moved, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, "metadata “input_shape” 30,30,1", NULL);
  g_assert_null(strstr(error->message, "tensor"));
  g_clear_error(&error);
}

/* ---- image folders: what is left out is said ------------------------------------- */

static void
test_image_folder_layouts(void)
{
  g_autofree char *dir = scratch("layouts");
  /* test/ alone. */
  g_autofree char *only_test = g_build_filename(dir, "only-test", NULL);
  for (int k = 0; k < 2; k++) {
    g_autofree char *cls = g_strdup_printf("%s/test/c%d", only_test, k);
    g_assert_cmpint(g_mkdir_with_parents(cls, 0755), ==, 0);
    uint8_t pixels[64] = {0};
    g_autofree char *file = g_strdup_printf("%s/0.png", cls);
    test_write_png(file, 8, 8, 1, pixels);
  }
  GError *error = NULL;
  g_assert_null(tdm_dataset_open(only_test, &error));
  assert_error(error, TDM_ENGINE_ERROR_DATASET, "a test/ folder but no train/", NULL);
  g_clear_error(&error);

  /* A class folder that is a link to nothing is named in the notice. */
  g_autofree char *linked = g_build_filename(dir, "linked", NULL);
  for (int k = 0; k < 2; k++) {
    g_autofree char *cls = g_strdup_printf("%s/c%d", linked, k);
    g_assert_cmpint(g_mkdir_with_parents(cls, 0755), ==, 0);
    for (int i = 0; i < 4; i++) {
      uint8_t pixels[64];
      memset(pixels, 60 * k + i, sizeof pixels);
      g_autofree char *file = g_strdup_printf("%s/%d.png", cls, i);
      test_write_png(file, 8, 8, 1, pixels);
    }
  }
  g_autofree char *dangling = g_build_filename(linked, "c9", NULL);
  g_assert_cmpint(symlink("/nonexistent/tandem/class", dangling), ==, 0);
  TdmDatasetPair *pair = tdm_dataset_open(linked, &error);
  g_assert_no_error(error);
  g_assert_nonnull(pair->notice);
  g_assert_nonnull(strstr(pair->notice, "“c9” is a symbolic link that leads nowhere"));
  tdm_dataset_pair_free(pair);
}

static void
test_printable(void)
{
  g_autofree char *a = tdm_printable("ant\x1b[31mred\nline\tx\x7f");
  g_assert_cmpstr(a, ==, "ant\\x1b[31mred\\x0aline\\x09x\\x7f");
  g_autofree char *b = tdm_printable("cat\xc2\x9b" "2J 層");
  g_assert_cmpstr(b, ==, "cat\\u009b2J 層");
  g_autofree char *c = tdm_printable("bad\xff\xfe");
  g_assert_cmpstr(c, ==, "bad\\xff\\xfe");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  scratch_begin("tdm-hostile-files-XXXXXX");

  g_test_add_func("/hostile-files/reader/refuses", test_reader_refuses);
  g_test_add_func("/hostile-files/reader/lines", test_reader_lines);
  g_test_add_func("/hostile-files/paths/same-file", test_same_file);
  g_test_add_func("/hostile-files/checkpoint/unused-tensor", test_checkpoint_unused_tensor);
  g_test_add_func("/hostile-files/checkpoint/values-checked", test_checkpoint_values_checked);
  g_test_add_func("/hostile-files/config/run-file-settings", test_run_file_settings);
  g_test_add_func("/hostile-files/history/bounded", test_history_bounded);
  g_test_add_func("/hostile-files/history/rename-during-thinning",
                  test_history_rename_during_thinning);
  g_test_add_func("/hostile-files/history/not-a-folder", test_history_not_a_folder);
  g_test_add_func("/hostile-files/spec/pool-windows", test_pool_windows);
  g_test_add_func("/hostile-files/exact/frozen-bn", test_exact_frozen_bn);
  g_test_add_func("/hostile-files/finetune/messages", test_finetune_messages);
  g_test_add_func("/hostile-files/resume/without-init", test_resume_without_init);
  g_test_add_func("/hostile-files/classify/reasons", test_classify_reasons);
  g_test_add_func("/hostile-files/dataset/layouts", test_image_folder_layouts);
  g_test_add_func("/hostile-files/printable", test_printable);
  int status = g_test_run();
  scratch_end();
  return status;
}
