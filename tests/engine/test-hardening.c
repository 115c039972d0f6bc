/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-hardening.c — the second round of hostile inputs, each made here by the test:
 * specs and JSON nested 100,000 deep (in a spec, a checkpoint's header, a saved
 * configuration, a run file), a FIFO among the run files, an image cache changed on
 * disk and the temporaries a killed cache write leaves, a checkpoint resumed on
 * another dataset, a memory refusal sized by the evaluation batch, paces that would
 * wait for ever, class names with escape codes, short name lists and NaN weights in
 * checkpoints, a long run's file (bounded by its own step clock, not by waiting),
 * class folders that hold nothing readable or are links to another class, and a save
 * onto a dangling link. Each must give one clear error or a correct result. The CLI's
 * side (exit statuses, stdout on a full disk) is test-cli-hardening.sh's. */
#include "tdm-checkpoint.h"
#include "tdm-classifier.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-dataset-folder.h"
#include "tdm-error.h"
#include "tdm-file.h"
#include "tdm-history.h"
#include "tdm-json.h"
#include "tdm-memory.h"
#include "tdm-network.h"
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
#include <time.h>
#include <unistd.h>
#include <utime.h>

/* Three classes of 8 × 8 grey PNGs, each class its own brightness with noise. */
static char *
write_folder(const char *name, int per_class)
{
  char *root = scratch(name);
  const char *classes[] = {"dark", "grey", "light"};
  for (int k = 0; k < 3; k++) {
    g_autofree char *dir = g_build_filename(root, classes[k], NULL);
    g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
    for (int i = 0; i < per_class; i++) {
      uint8_t pixels[64];
      for (int p = 0; p < 64; p++)
        pixels[p] = (uint8_t)(40 + 80 * k + g_random_int_range(0, 30));
      g_autofree char *file = g_strdup_printf("%s/%02d.png", dir, i);
      test_write_png(file, 8, 8, 1, pixels);
    }
  }
  return root;
}

static TdmConfig *
small_run(const char *dataset, const char *network, const char *save)
{
  TdmConfig *c = tdm_config_new();
  g_free(c->dataset);
  c->dataset = g_strdup(dataset);
  g_free(c->network);
  c->network = g_strdup(network);
  g_assert_true(tdm_config_set_devices(c, "cpu", NULL));
  c->batch = 4;
  c->epochs = 1;
  c->eval_batch = 6;
  c->max_steps = 2;
  c->image_size = 8;
  c->save_path = g_strdup(save);
  return c;
}

/* A trained fc3 on write_folder's classes, saved once for the tests that read it. */
static const char *
trained_checkpoint(void)
{
  static char *path;
  if (path != NULL)
    return path;
  g_autofree char *folder = write_folder("trained-set", 8);
  path = g_build_filename(top, "trained.safetensors", NULL);
  g_autoptr(TdmConfig) c = small_run(folder, "fc3", path);
  g_autoptr(TdmTrainer) t = tdm_trainer_new(c, NULL, NULL);
  GError *error = NULL;
  g_assert_true(tdm_trainer_run(t, NULL, &error));
  g_assert_no_error(error);
  return path;
}

/* ---- 1, 11: nesting and size in network specs ------------------------------- */

static void
test_spec_nesting(void)
{
  GError *error = NULL;
  g_autofree char *groups = nested("(", "fc10", ")", 60000);
  g_assert_null(tdm_network_new(groups, 28, 28, 1, 10, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_SPEC, "nest deeper than", NULL);
  g_clear_error(&error);

  g_autofree char *repeats = nested("2*(", "relu", ")", 60000);
  g_autofree char *spec = g_strconcat(repeats, ",fc10", NULL);
  g_assert_null(tdm_network_new(spec, 28, 28, 1, 10, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_SPEC, "nest deeper than", NULL);
  g_clear_error(&error);

  /* Sixteen levels of groups still work. */
  g_autofree char *ok = nested("(", "fc10", ")", 16);
  g_autoptr(TdmNetwork) net = tdm_network_new(ok, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_nonnull(net);
}

static void
test_spec_message_bounded(void)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < 300000; i++)
    g_string_append(s, "fc4,");
  g_string_append(s, "fc10");
  GError *error = NULL;
  g_assert_null(tdm_network_new(s->str, 28, 28, 1, 10, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_SPEC, "more than 4096 layers", "…");
  g_clear_error(&error);
  g_string_free(s, TRUE);

  /* A megabyte-long token of three-byte characters is cut by characters too. */
  GString *wide = g_string_new(NULL);
  for (int i = 0; i < 300000; i++)
    g_string_append(wide, "層");
  g_assert_null(tdm_network_new(wide->str, 28, 28, 1, 10, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_SPEC, "層層", "…");
  g_assert_true(g_utf8_validate(error->message, -1, NULL));
  g_clear_error(&error);
  g_string_free(wide, TRUE);
}

/* ---- 2: deep JSON in a checkpoint's header and in a saved configuration ----- */

static void
write_safetensors(const char *path, const char *header)
{
  gsize len = strlen(header);
  guint64 le = GUINT64_TO_LE((guint64)len);
  GString *file = g_string_new_len((const char *)&le, 8);
  g_string_append_len(file, header, (gssize)len);
  g_assert_true(g_file_set_contents(path, file->str, (gssize)file->len, NULL));
  g_string_free(file, TRUE);
}

static void
test_checkpoint_deep_json(void)
{
  g_autofree char *dir = scratch("deep-json");
  g_autofree char *path = g_build_filename(dir, "deep.safetensors", NULL);
  g_autofree char *arrays = nested("[", "1", "]", 100000);
  g_autofree char *header = g_strdup_printf("{\"__metadata__\":{\"x\":\"y\"},\"w\":%s}", arrays);
  write_safetensors(path, header);
  GError *error = NULL;
  g_assert_null(tdm_checkpoint_load(path, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, path, "nest deeper than");
  g_clear_error(&error);

  /* The saved configuration is JSON inside a metadata string. */
  g_autofree char *objects = nested("{\"a\":", "1", "}", 100000);
  g_assert_null(tdm_config_from_json(objects, &error));
  assert_error(error, TDM_ENGINE_ERROR_INVALID_OPTION, "run configuration", "nest deeper");
  g_clear_error(&error);

  /* What Tandem writes nests a few levels: it still parses. */
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autofree char *json = tdm_config_to_json(c);
  g_autoptr(TdmConfig) back = tdm_config_from_json(json, &error);
  g_assert_no_error(error);
  g_assert_nonnull(back);
}

/* ---- 3, 4: the history against a deep line and a FIFO ----------------------- */

static char *
record_one_run(const char *folder)
{
  g_autoptr(TdmHistory) h = tdm_history_new(folder);
  g_autoptr(TdmConfig) c = tdm_config_new();
  GError *error = NULL;
  TdmRunRecorder *rec = tdm_run_recorder_new(h, c, "valid", &error);
  g_assert_no_error(error);
  char *id = g_strdup(tdm_run_recorder_get_id(rec));
  TdmEvent e = {.kind = TDM_EVENT_STEP};
  e.step.step = 10;
  tdm_run_recorder_add(&e, rec);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  tdm_run_recorder_free(rec);
  return id;
}

static void
test_history_deep_line_and_fifo(void)
{
  g_autofree char *folder = scratch("history");
  g_autofree char *id = record_one_run(folder);
  g_autofree char *deep = nested("[", "0", "]", 100000);
  g_autofree char *text = g_strdup_printf("{\"type\":\"settings\",\"config\":%s}\n", deep);
  g_autofree char *deep_path = g_build_filename(folder, "deep.jsonl", NULL);
  g_assert_true(g_file_set_contents(deep_path, text, -1, NULL));
  g_autofree char *fifo = g_build_filename(folder, "x.jsonl", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);

  g_autoptr(TdmHistory) h = tdm_history_new(folder);
  g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) runs = tdm_history_list(h, problems);
  g_assert_cmpuint(runs->len, ==, 1);
  g_assert_cmpstr(((TdmRunRecord *)g_ptr_array_index(runs, 0))->id, ==, id);
  g_assert_cmpuint(problems->len, ==, 2);
  gboolean saw_fifo = FALSE, saw_deep = FALSE;
  for (guint i = 0; i < problems->len; i++) {
    const char *p = g_ptr_array_index(problems, i);
    saw_fifo |= strstr(p, "x.jsonl") != NULL && strstr(p, "FIFO") != NULL;
    saw_deep |= strstr(p, "deep.jsonl") != NULL && strstr(p, "nest deeper") != NULL;
    g_assert_cmpuint(strlen(p), <, 1000);
  }
  g_assert_true(saw_fifo);
  g_assert_true(saw_deep);
}

/* ---- 5, 6: the image cache's integrity and its stale temporaries ------------ */

static TdmDatasetPair *
load_folder(const char *folder)
{
  TdmImageOptions o = {.size = 8, .channels = 1};
  GError *error = NULL;
  TdmDatasetPair *pair = tdm_dataset_load_image_folder(folder, &o, NULL, NULL, NULL, &error);
  g_assert_no_error(error);
  g_assert_nonnull(pair);
  return pair;
}

static void
assert_same_data(const TdmDatasetPair *a, const TdmDatasetPair *b)
{
  const TdmDataset *sa[2] = {a->train, a->test}, *sb[2] = {b->train, b->test};
  for (int s = 0; s < 2; s++) {
    g_assert_cmpint(sa[s]->count, ==, sb[s]->count);
    g_assert_cmpmem(sa[s]->images, (gsize)sa[s]->count * tdm_dataset_sample_size(sa[s]),
                    sb[s]->images, (gsize)sb[s]->count * tdm_dataset_sample_size(sb[s]));
    g_assert_cmpmem(sa[s]->labels, (gsize)sa[s]->count, sb[s]->labels, (gsize)sb[s]->count);
    for (int k = 0; k < sa[s]->classes; k++)
      g_assert_cmpstr(sa[s]->class_names[k], ==, sb[s]->class_names[k]);
  }
}

static void
damage(const char *path, gint64 offset_from_end, guint8 xor)
{
  int fd = open(path, O_RDWR);
  g_assert_cmpint(fd, >=, 0);
  struct stat st;
  g_assert_cmpint(fstat(fd, &st), ==, 0);
  guint8 byte;
  g_assert_cmpint(pread(fd, &byte, 1, st.st_size - offset_from_end), ==, 1);
  byte ^= xor;
  g_assert_cmpint(pwrite(fd, &byte, 1, st.st_size - offset_from_end), ==, 1);
  close(fd);
}

static void
test_cache_checksum(void)
{
  g_autofree char *folder = write_folder("cached", 6);
  TdmImageOptions o = {.size = 8, .channels = 1};
  g_autofree char *cache = tdm_image_folder_cache_path(folder, &o);
  g_autoptr(TdmDatasetPair) fresh = load_folder(folder);
  g_assert_true(g_file_test(cache, G_FILE_TEST_IS_REGULAR));
  g_assert_null(fresh->notice);

  /* A pixel, a label, a byte of a class name: each is found, said, and rebuilt. */
  struct stat st;
  g_assert_cmpint(stat(cache, &st), ==, 0);
  gint64 where[] = {100, 1, st.st_size - 200};
  for (gsize i = 0; i < G_N_ELEMENTS(where); i++) {
    damage(cache, where[i], 0x01);
    g_autoptr(TdmDatasetPair) again = load_folder(folder);
    g_assert_nonnull(again->notice);
    g_assert_nonnull(strstr(again->notice, "damaged"));
    g_assert_nonnull(strstr(again->notice, cache));
    assert_same_data(fresh, again);
    /* Rewritten whole: the next start is a clean hit. */
    g_autoptr(TdmDatasetPair) hit = load_folder(folder);
    g_assert_null(hit->notice);
    assert_same_data(fresh, hit);
  }
}

static void
test_cache_stale_temporaries(void)
{
  g_autofree char *folder = write_folder("stale", 4);
  TdmImageOptions o = {.size = 8, .channels = 1};
  g_autofree char *cache = tdm_image_folder_cache_path(folder, &o);
  g_autofree char *dir = g_path_get_dirname(cache);
  g_autofree char *base = g_path_get_basename(cache);
  g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);

  /* Once before a write (a miss), once before a hit. */
  for (int pass = 0; pass < 2; pass++) {
    /* One left by a killed writer (no lock), one of a writer still at work (locked),
     * a name not of our making, and the older naming: one untouched for two hours
     * (its writer died), one written a moment ago. */
    g_autofree char *dead = g_strdup_printf("%s/.%s.Ab12Cd", dir, base);
    g_autofree char *live = g_strdup_printf("%s/.%s.Ef34Gh", dir, base);
    g_autofree char *other = g_strdup_printf("%s/.%s.notours", dir, base);
    g_autofree char *legacy_old = g_strdup_printf("%s/%s.Ij56Kl", dir, base);
    g_autofree char *legacy_new = g_strdup_printf("%s/%s.Mn78Op", dir, base);
    const char *all[] = {dead, live, other, legacy_old, legacy_new};
    for (gsize i = 0; i < G_N_ELEMENTS(all); i++)
      g_assert_true(g_file_set_contents(all[i], "part of a cache", -1, NULL));
    struct utimbuf two_hours_ago = {time(NULL) - 7200, time(NULL) - 7200};
    g_assert_cmpint(utime(legacy_old, &two_hours_ago), ==, 0);
    int held = open(live, O_RDONLY);
    g_assert_cmpint(flock(held, LOCK_EX), ==, 0);

    g_autoptr(TdmDatasetPair) pair = load_folder(folder);
    g_assert_false(g_file_test(dead, G_FILE_TEST_EXISTS));
    g_assert_false(g_file_test(legacy_old, G_FILE_TEST_EXISTS));
    g_assert_true(g_file_test(live, G_FILE_TEST_EXISTS));
    g_assert_true(g_file_test(other, G_FILE_TEST_EXISTS));
    g_assert_true(g_file_test(legacy_new, G_FILE_TEST_EXISTS));
    g_assert_true(g_file_test(cache, G_FILE_TEST_IS_REGULAR));
    close(held);
    for (gsize i = 0; i < G_N_ELEMENTS(all); i++)
      g_unlink(all[i]);
  }
}

/* ---- 8: a resumed network that does not fit: the other dataset is named ----- */

static void
test_resume_names_datasets(void)
{
  const char *ckpt = trained_checkpoint();
  g_autoptr(TdmConfig) c = small_run("synthetic", "fc3", NULL);
  g_autoptr(TdmTrainer) t = tdm_trainer_new(c, NULL, NULL);
  tdm_trainer_set_resume_path(t, ckpt);
  GError *error = NULL;
  g_assert_false(tdm_trainer_run(t, NULL, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, "“trained-set”", "“synthetic”");
  g_assert_null(strstr(error->message, "fc3"));
  g_clear_error(&error);
}

/* ---- 9: a refusal sized by the evaluation chunk names --eval-batch ---------- */

static void
test_memory_names_eval_batch(void)
{
  TdmMemoryEvent e = {.replicas = 1, .batch = 8, .capacity = 5000, .host_total = 1 << 30};
  e.device[0].shard = 8;
  GError *error = NULL;
  g_assert_false(tdm_memory_check_host(&e, 1 << 20, 0, NULL, &error));
  assert_error(error, TDM_ENGINE_ERROR_OUT_OF_MEMORY, "--eval-batch", "5000");
  g_assert_null(strstr(error->message, "at batch 8"));
  g_clear_error(&error);

  e.capacity = 8;
  g_assert_false(tdm_memory_check_host(&e, 1 << 20, 0, NULL, &error));
  assert_error(error, TDM_ENGINE_ERROR_OUT_OF_MEMORY, "at batch 8", "smaller network or batch");
  g_clear_error(&error);
}

/* ---- 10: paces that would wait for ever are brought within bounds ----------- */

static void
test_pace_bounds(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autoptr(TdmTrainer) t = tdm_trainer_new(c, NULL, NULL);
  tdm_trainer_set_pace(t, 1e-9);
  g_assert_cmpfloat(tdm_trainer_get_pace(t), ==, TDM_PACE_MIN);
  tdm_trainer_set_pace(t, 1e12);
  g_assert_cmpfloat(tdm_trainer_get_pace(t), ==, TDM_PACE_MAX);
  tdm_trainer_set_pace(t, 0);
  g_assert_cmpfloat(tdm_trainer_get_pace(t), ==, 0);
  tdm_trainer_set_pace(t, 5);
  g_assert_cmpfloat(tdm_trainer_get_pace(t), ==, 5);
  /* The longest wait between two steps stays under two minutes. */
  g_assert_cmpfloat(1.0 / TDM_PACE_MIN, <, 120);
}

/* ---- 12: what --classify takes from a checkpoint ---------------------------- */

static char *
rewrite_checkpoint(const char *name, const char *class_names, gboolean nan_weight)
{
  GError *error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(trained_checkpoint(), &error);
  g_assert_no_error(error);
  if (class_names != NULL)
    tdm_checkpoint_set_metadata(ckpt, "class_names", class_names);
  if (nan_weight) {
    /* A loaded tensor's values are the file's, read-only: changed in a copy. */
    const TdmTensor *t = tdm_checkpoint_nth(ckpt, 0);
    gint64 n = 1;
    for (int d = 0; d < t->rank; d++)
      n *= t->shape[d];
    g_autofree float *values = g_memdup2(t->data, (gsize)n * sizeof(float));
    values[1] = NAN;
    g_autofree char *name = g_strdup(t->name);
    gint64 shape[4];
    memcpy(shape, t->shape, sizeof shape);
    tdm_checkpoint_add(ckpt, name, t->rank, shape, values);
  }
  char *path = g_build_filename(top, name, NULL);
  g_assert_true(tdm_checkpoint_save(ckpt, path, &error));
  g_assert_no_error(error);
  return path;
}

static void
test_classify_names_sanitized(void)
{
  g_autofree char *path =
      rewrite_checkpoint("escapes.safetensors",
                         "[\"\\u001b[31mred\\u001b[0m\", \"new\\nline\", \"日本\\u009b2J\"]", FALSE);
  GError *error = NULL;
  TdmClassifier *cl = tdm_classifier_load(path, &error);
  g_assert_no_error(error);
  for (int k = 0; k < 3; k++) {
    const char *name = tdm_classifier_class_name(cl, k);
    for (const char *p = name; *p; p = g_utf8_next_char(p)) {
      gunichar ch = g_utf8_get_char(p);
      g_assert_false(ch < 0x20 || ch == 0x7f || (ch >= 0x80 && ch < 0xa0));
    }
  }
  g_assert_cmpstr(tdm_classifier_class_name(cl, 0), ==, "\\x1b[31mred\\x1b[0m");
  g_assert_cmpstr(tdm_classifier_class_name(cl, 1), ==, "new\\x0aline");
  g_assert_cmpstr(tdm_classifier_class_name(cl, 2), ==, "日本\\u009b2J");
  tdm_classifier_free(cl);
}

static void
test_classify_bad_names(void)
{
  struct {
    const char *json, *needle;
  } cases[] = {
    {"[\"a\", \"b\"]", "holds 2 names, but the network has 3"},
    {"not json", "not a JSON list"},
    {"{\"a\": 1}", "not a JSON list"},
    {"[\"a\", 7, \"c\"]", "entry 1"},
    {"[\"a\", \"\", \"c\"]", "entry 1"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = rewrite_checkpoint("names.safetensors", cases[i].json, FALSE);
    GError *error = NULL;
    g_assert_null(tdm_classifier_load(path, &error));
    assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, path, cases[i].needle);
    g_clear_error(&error);
  }
}

static void
test_nan_weights_named(void)
{
  g_autofree char *path = rewrite_checkpoint("nan.safetensors", NULL, TRUE);
  GError *error = NULL;
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &error);
  const char *tensor = tdm_checkpoint_nth(ckpt, 0)->name;
  g_assert_null(tdm_classifier_load(path, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, path, tensor);
  g_assert_nonnull(strstr(error->message, "not a finite number"));
  g_clear_error(&error);

  /* Resuming it is refused before a step, naming the same tensor. */
  g_autofree char *folder = g_build_filename(top, "trained-set", NULL);
  g_autoptr(TdmConfig) c = small_run(folder, "fc3", NULL);
  g_autoptr(TdmTrainer) t = tdm_trainer_new(c, NULL, NULL);
  tdm_trainer_set_resume_path(t, path);
  g_assert_false(tdm_trainer_run(t, NULL, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, tensor, "not a finite number");
  g_clear_error(&error);
}

/* ---- 13: a long run's file stays bounded, on the run's own clock ------------- */

static void
test_long_run_bounded(void)
{
  g_autofree char *folder = scratch("long-run");
  g_autoptr(TdmHistory) h = tdm_history_new(folder);
  g_autoptr(TdmConfig) c = tdm_config_new();
  GError *error = NULL;
  TdmRunRecorder *rec = tdm_run_recorder_new(h, c, "long", &error);
  g_assert_no_error(error);
  const gint64 budget = 64 * 1024;
  const double recent = 60;
  tdm_run_recorder_set_limits(rec, budget, recent);
  g_autofree char *id = g_strdup(tdm_run_recorder_get_id(rec));
  g_autofree char *path = g_strdup_printf("%s/%s.jsonl", folder, id);

  /* 10,000 sampled steps, two a second of the run's clock (83 minutes), with the
   * device figures of two replicas and an epoch every 250 steps: thinned again and
   * again all the same (40,000 steps proved no more, at 22 CPU s under ASan). */
  const int steps = 10000, per_epoch = 250;
  gint64 largest = 0;
  for (int i = 1; i <= steps; i++) {
    TdmEvent e = {.kind = TDM_EVENT_STEP};
    e.step.step = i;
    e.step.epoch_float = (double)i / per_epoch;
    e.step.train_loss = 1.0 / i;
    e.step.elapsed = i * 0.5;
    tdm_run_recorder_add(&e, rec);
    TdmEvent d = {.kind = TDM_EVENT_DEVICES};
    d.devices.step = i;
    d.devices.replicas = 2;
    tdm_run_recorder_add(&d, rec);
    if (i % per_epoch == 0) {
      TdmEvent ep = {.kind = TDM_EVENT_EPOCH};
      ep.epoch.epoch = i / per_epoch;
      ep.epoch.step = i;
      ep.epoch.elapsed = i * 0.5;
      tdm_run_recorder_add(&ep, rec);
    }
    struct stat st;
    g_assert_cmpint(stat(path, &st), ==, 0);
    largest = MAX(largest, (gint64)st.st_size);
  }
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  tdm_run_recorder_free(rec);
  /* Unthinned, the file would be ~2.3 MB: it never passed twice its budget. */
  g_assert_cmpint(largest, <, 2 * budget);

  g_autoptr(TdmRunRecord) r = tdm_history_load(h, id, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r->epochs->len, ==, steps / per_epoch);
  for (guint k = 0; k < r->epochs->len; k++)
    g_assert_cmpint(g_array_index(r->epochs, TdmEpochEvent, k).epoch, ==, (int)k + 1);
  g_assert_cmpuint(r->points->len, <, (guint)steps / 10);
  /* The last minute whole, step by step. */
  long last_minute = (long)(steps - recent / 0.5);
  guint n = r->points->len;
  for (long s = steps, k = n - 1; s > last_minute; s--, k--)
    g_assert_cmpint(g_array_index(r->points, TdmHistoryPoint, k).step, ==, s);
  /* The thinned part still covers the whole run, evenly: no gap longer than a
   * twentieth of it. */
  const TdmHistoryPoint *p = (const TdmHistoryPoint *)r->points->data;
  g_assert_cmpint(p[0].step, <, steps / 20);
  for (guint k = 1; k < n; k++) {
    g_assert_cmpint(p[k].step, >, p[k - 1].step);
    g_assert_cmpint(p[k].step - p[k - 1].step, <, steps / 20);
  }
}

/* ---- 14: class folders, and a save onto a dangling link --------------------- */

static void
test_class_folders(void)
{
  g_autofree char *folder = write_folder("odd-classes", 5);
  /* A class of files none of which decodes, and a link to another class's folder. */
  g_autofree char *broken = g_build_filename(folder, "broken", NULL);
  g_assert_cmpint(g_mkdir(broken, 0755), ==, 0);
  for (int i = 0; i < 3; i++) {
    g_autofree char *file = g_strdup_printf("%s/%d.png", broken, i);
    g_assert_true(g_file_set_contents(file, "not a png", -1, NULL));
  }
  g_autofree char *twin = g_build_filename(folder, "zz-twin", NULL);
  g_assert_cmpint(symlink("grey", twin), ==, 0);

  g_autoptr(TdmDatasetPair) pair = load_folder(folder);
  g_assert_cmpint(pair->train->classes, ==, 3);
  g_assert_cmpstr(pair->train->class_names[0], ==, "dark");
  g_assert_cmpstr(pair->train->class_names[1], ==, "grey");
  g_assert_cmpstr(pair->train->class_names[2], ==, "light");
  g_assert_null(pair->train->class_names[3]);
  g_assert_cmpint(pair->train->count + pair->test->count, ==, 15);
  for (int i = 0; i < pair->train->count; i++)
    g_assert_cmpint(pair->train->labels[i], <, 3);
  g_assert_nonnull(strstr(pair->notice, "“broken” holds no image that could be read"));
  g_assert_nonnull(strstr(pair->notice, "“zz-twin” is the same folder as another class"));
}

static void
test_save_dangling_link(void)
{
  g_autofree char *dir = scratch("dangling");
  g_autofree char *link = g_build_filename(dir, "run.safetensors", NULL);
  g_assert_cmpint(symlink("/nonexistent/elsewhere.safetensors", link), ==, 0);
  GError *error = NULL;
  g_assert_false(tdm_checkpoint_check_writable(link, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, link, "dangling symbolic link");
  g_clear_error(&error);
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_new();
  g_assert_false(tdm_checkpoint_save(ckpt, link, &error));
  assert_error(error, TDM_ENGINE_ERROR_CHECKPOINT, link, "dangling symbolic link");
  g_clear_error(&error);
  struct stat st;
  g_assert_cmpint(lstat(link, &st), ==, 0);
  g_assert_true(S_ISLNK(st.st_mode));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  scratch_begin("tdm-hardening-XXXXXX");

  g_test_add_func("/hardening/spec/nesting", test_spec_nesting);
  g_test_add_func("/hardening/spec/message-bounded", test_spec_message_bounded);
  g_test_add_func("/hardening/json/checkpoint-and-config", test_checkpoint_deep_json);
  g_test_add_func("/hardening/history/deep-line-and-fifo", test_history_deep_line_and_fifo);
  g_test_add_func("/hardening/cache/checksum", test_cache_checksum);
  g_test_add_func("/hardening/cache/stale-temporaries", test_cache_stale_temporaries);
  g_test_add_func("/hardening/resume/names-datasets", test_resume_names_datasets);
  g_test_add_func("/hardening/memory/eval-batch", test_memory_names_eval_batch);
  g_test_add_func("/hardening/pace/bounds", test_pace_bounds);
  g_test_add_func("/hardening/classify/names-sanitized", test_classify_names_sanitized);
  g_test_add_func("/hardening/classify/bad-names", test_classify_bad_names);
  g_test_add_func("/hardening/checkpoint/nan-weights", test_nan_weights_named);
  g_test_add_func("/hardening/history/long-run-bounded", test_long_run_bounded);
  g_test_add_func("/hardening/dataset/class-folders", test_class_folders);
  g_test_add_func("/hardening/checkpoint/save-dangling-link", test_save_dangling_link);
  int status = g_test_run();
  scratch_end();
  return status;
}
