/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-history-experiments.c — part of test-history: experiments and their records.
 * The scaling driver's points on 1 and 2 CPU workers, strong and weak, and cancelled;
 * scaling sweeps and comparisons as records of their own kind: written and read back,
 * renamed, exported, cancelled, failed, cut by a crash, beside files written before
 * there were kinds; the one scaling table (its CSV). */
#include "tdm-error.h"
#include "tdm-history.h"
#include "tdm-scaling.h"
#include "test-history.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

typedef struct {
  GArray *points;
  GCancellable *cancel_after_first;
  TdmRunRecorder *record;       /* each point appended as it comes, or NULL */
} Points;

static void
on_point(const TdmScalingPoint *point, gpointer data)
{
  Points *p = data;
  if (p->record != NULL)
    tdm_run_recorder_add_point(point, p->record);
  g_array_append_val(p->points, *point);
  if (p->cancel_after_first != NULL)
    g_cancellable_cancel(p->cancel_after_first);
}

/* The scaling experiment of `cfg` on this thread, each point to `p`. */
static gboolean
scaling_run(const TdmConfig *cfg, TdmScalingMode mode, Points *p, GCancellable *cancel,
            GError **error)
{
  g_autoptr(TdmExperiment) e = tdm_experiment_new_scaling(cfg, mode, 30, error);
  g_assert_nonnull(e);
  tdm_experiment_set_point_sink(e, on_point, p);
  return tdm_experiment_run(e, NULL, NULL, cancel, error);
}

/* 1 and 2 CPU workers: two points, in order, the first the baseline; throughput is
 * measured, never compared with a number. */
static void
test_scaling_two_points(gconstpointer data)
{
  TdmScalingMode mode = GPOINTER_TO_INT(data);
  g_autoptr(TdmConfig) cfg = config("cpu:2", 0);
  Points p = {g_array_new(FALSE, FALSE, sizeof(TdmScalingPoint)), NULL};
  g_autoptr(GError) error = NULL;
  g_assert_true(scaling_run(cfg, mode, &p, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(p.points->len, ==, 2);
  for (int i = 0; i < 2; i++) {
    const TdmScalingPoint *q = &g_array_index(p.points, TdmScalingPoint, i);
    g_assert_cmpint(q->index, ==, i);
    g_assert_cmpint(q->count, ==, 2);
    g_assert_cmpint(q->devices, ==, i + 1);
    g_assert_cmpint(q->batch, ==, mode == TDM_SCALING_WEAK ? 50 * (i + 1) : 100);
    g_assert_cmpfloat(q->samples_per_second, >, 0);
    g_assert_cmpfloat(fabs(q->efficiency - q->speedup / q->devices), <, 1e-12);
    /* Devices alike: the one-worker point too runs one BLAS thread, as the engine
     * reports it (not as a time would suggest). */
    g_assert_cmpint(q->cpu_threads, ==, 1);
    /* Repeated, the median between the slowest and the fastest run. */
    g_assert_cmpint(q->runs, >=, TDM_SCALING_RUNS);
    g_assert_cmpint(q->runs, <=, TDM_SCALING_RUNS_MAX);
    g_assert_cmpfloat(q->samples_per_second_min, <=, q->samples_per_second);
    g_assert_cmpfloat(q->samples_per_second, <=, q->samples_per_second_max);
    g_assert_cmpfloat(q->speedup_min, <=, q->speedup);
    g_assert_cmpfloat(q->speedup, <=, q->speedup_max);
  }
  const TdmScalingPoint *first = &g_array_index(p.points, TdmScalingPoint, 0);
  g_assert_cmpfloat(first->speedup, ==, 1.0);
  g_array_unref(p.points);
}

static void
test_scaling_cancel(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2", 0);
  g_autoptr(GCancellable) cancel = g_cancellable_new();
  Points p = {g_array_new(FALSE, FALSE, sizeof(TdmScalingPoint)), cancel};
  g_autoptr(GError) error = NULL;
  g_assert_false(scaling_run(cfg, TDM_SCALING_STRONG, &p, cancel, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED);
  g_assert_cmpuint(p.points->len, ==, 1);
  g_array_unref(p.points);
}

/* ---- scaling sweeps ---------------------------------------------------------------- */

static char *
file_of(const char *dir, const char *id)
{
  g_autofree char *file = g_strconcat(id, ".jsonl", NULL);
  return g_build_filename(dir, file, NULL);
}

/* A sweep as tandem-train scaling --record keeps it: the experiment on this thread,
 * each point appended to its record (and to `points`) as it comes, the outcome at the
 * end. */
typedef struct {
  TdmExperiment *experiment;
  TdmRunRecorder *rec;
} Sweep;

static void
sweep_open(Sweep *s, TdmHistory *history, const TdmConfig *cfg, TdmScalingMode mode,
           const char *name, Points *points)
{
  g_autoptr(GError) error = NULL;
  s->experiment = tdm_experiment_new_scaling(cfg, mode, 20, &error);
  g_assert_no_error(error);
  s->rec = tdm_run_recorder_new_experiment(history, s->experiment, name, &error);
  g_assert_no_error(error);
  points->record = s->rec;
  tdm_experiment_set_point_sink(s->experiment, on_point, points);
}

static gboolean
sweep_run(Sweep *s, GCancellable *cancel, GError **error)
{
  GError *local = NULL;
  gboolean ok = tdm_experiment_run(s->experiment, NULL, NULL, cancel, &local);
  tdm_run_recorder_end_experiment(s->rec, s->experiment, local);
  if (local != NULL)
    g_propagate_error(error, local);
  return ok;
}

static void
sweep_close(Sweep *s)
{
  g_clear_pointer(&s->experiment, tdm_experiment_free);
  g_clear_pointer(&s->rec, tdm_run_recorder_free);
}

/* A sweep over 1 and 2 CPU workers, recorded as it goes: read back (as after a
 * restart) it has its settings and the very points the driver reported, it is listed
 * beside a training run, renamed and exported like one. */
static void
test_sweep_record(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmConfig) cfg = config("cpu:2", 0);
  cfg->strategy = TDM_STRATEGY_MAIN;
  g_autofree char *training = NULL;
  g_autofree char *id = NULL;
  Points p = {g_array_new(FALSE, FALSE, sizeof(TdmScalingPoint)), NULL};
  g_autoptr(GError) error = NULL;
  {
    g_autoptr(TdmHistory) history = tdm_history_new(dir);
    g_autoptr(TdmConfig) one = config("cpu", 10);
    training = record_run(history, one, "a training run");
    Sweep sweep;
    sweep_open(&sweep, history, cfg, TDM_SCALING_WEAK, "sweep", &p);
    g_assert_true(sweep_run(&sweep, NULL, &error));
    g_assert_no_error(error);
    g_assert_true(tdm_run_recorder_finish(sweep.rec, &error));
    g_assert_no_error(error);
    g_assert_true(tdm_run_recorder_get_kept(sweep.rec));
    id = g_strdup(tdm_run_recorder_get_id(sweep.rec));
    sweep_close(&sweep);
  }
  g_assert_cmpuint(p.points->len, ==, 2);

  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) runs = tdm_history_list(history, problems);
  g_assert_cmpuint(problems->len, ==, 0);
  g_assert_cmpuint(runs->len, ==, 2);
  TdmRunRecord *t = g_str_equal(((TdmRunRecord *)runs->pdata[0])->id, training)
                    ? runs->pdata[0] : runs->pdata[1];
  TdmRunRecord *r = t == runs->pdata[0] ? runs->pdata[1] : runs->pdata[0];
  g_assert_cmpint(t->kind, ==, TDM_RUN_TRAINING);
  g_assert_cmpuint(t->experiment.points->len, ==, 0);
  g_assert_cmpstr(r->id, ==, id);
  g_assert_cmpint(r->kind, ==, TDM_RUN_EXPERIMENT);
  g_assert_cmpint(r->experiment.kind, ==, TDM_EXPERIMENT_SCALING);
  g_assert_true(tdm_run_record_is_sweep(r));
  g_assert_false(tdm_run_record_is_sweep(t));
  g_assert_cmpstr(r->experiment.result, ==, "2 points measured");
  g_assert_cmpuint(r->experiment.runs->len, ==, 0);
  g_assert_cmpstr(r->name, ==, "sweep");
  g_assert_cmpint(r->experiment.mode, ==, TDM_SCALING_WEAK);
  g_assert_cmpint(r->experiment.steps, ==, 20);
  g_assert_cmpint(r->experiment.count, ==, 2);
  g_assert_cmpint(r->replicas, ==, 2);
  g_assert_cmpint(r->config->strategy, ==, TDM_STRATEGY_MAIN);
  g_assert_cmpstr(r->config->network, ==, "fc16,relu,fc10");
  g_assert_true(r->finished);
  g_assert_false(r->failed);
  g_assert_false(r->final.stopped);
  g_assert_cmpuint(r->points->len, ==, 0);
  g_assert_cmpuint(r->experiment.points->len, ==, 2);
  for (guint i = 0; i < 2; i++) {
    const TdmScalingPoint *a = &g_array_index(p.points, TdmScalingPoint, i);
    const TdmScalingPoint *b = &g_array_index(r->experiment.points, TdmScalingPoint, i);
    g_assert_cmpint(b->index, ==, (int)i);
    g_assert_cmpint(b->count, ==, 2);
    g_assert_cmpint(b->devices, ==, a->devices);
    g_assert_cmpint(b->batch, ==, a->batch);
    g_assert_cmpint(b->steps, ==, 20);
    g_assert_cmpfloat(b->samples_per_second, ==, a->samples_per_second);
    g_assert_cmpfloat(b->speedup, ==, a->speedup);
    g_assert_cmpfloat(b->efficiency, ==, a->efficiency);
    g_assert_cmpfloat(b->compute_ms, ==, a->compute_ms);
    g_assert_cmpfloat(b->comm_ms, ==, a->comm_ms);
    g_assert_cmpfloat(b->wait_ms, ==, a->wait_ms);
    g_assert_cmpfloat(b->samples_per_second_min, ==, a->samples_per_second_min);
    g_assert_cmpfloat(b->samples_per_second_max, ==, a->samples_per_second_max);
    g_assert_cmpfloat(b->speedup_min, ==, a->speedup_min);
    g_assert_cmpfloat(b->speedup_max, ==, a->speedup_max);
    g_assert_cmpint(b->runs, ==, a->runs);
    g_assert_cmpint(b->cpu_threads, ==, 1);
    /* Every device of the point held the network at least; none beyond it. */
    for (int d = 0; d < TDM_MAX_REPLICAS; d++) {
      g_assert_cmpint(b->memory_bytes[d], ==, a->memory_bytes[d]);
      if (d < b->devices)
        g_assert_cmpint(b->memory_bytes[d], >, 0);
      else
        g_assert_cmpint(b->memory_bytes[d], ==, 0);
    }
  }
  g_assert_cmpint(g_array_index(r->experiment.points, TdmScalingPoint, 1).batch, ==, 100);

  /* Renamed like a training run; exported as its own table after its settings. */
  g_assert_true(tdm_history_rename(history, id, "1 → 2 workers", &error));
  g_assert_no_error(error);
  g_autofree char *csv = g_build_filename(dir, "sweep.csv", NULL);
  g_assert_true(tdm_history_export_csv(history, id, csv, &error));
  g_assert_no_error(error);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(csv, &text, NULL, NULL));
  g_unlink(csv);
  g_auto(GStrv) all = g_strsplit(text, "\n", -1);
  g_assert_cmpstr(all[0], ==, "# run: 1 → 2 workers");
  g_assert_nonnull(strstr(text, "\n# kind: scaling\n"));
  g_assert_nonnull(strstr(text, "\n# scaling: weak\n"));
  g_assert_nonnull(strstr(text, "\n# steps per device count: 20\n"));
  g_assert_nonnull(strstr(text, "\n# devices: cpu,cpu\n"));
  g_assert_nonnull(strstr(text, "\n# strategy: main\n"));
  char **lines = all;
  while (*lines != NULL && (*lines)[0] == '#')
    lines++;
  g_assert_cmpstr(lines[0], ==, "devices,batch,steps,samples_per_second,speedup,efficiency,"
                                "compute_ms,comm_ms,wait_ms,samples_per_second_min,"
                                "samples_per_second_max,speedup_min,speedup_max,runs,"
                                "cpu_threads,memory_bytes_1,memory_bytes_2");
  g_assert_true(g_str_has_prefix(lines[1], "1,50,20,"));
  g_assert_true(g_str_has_suffix(lines[1], ","));   /* one device: no second memory */
  g_assert_true(g_str_has_prefix(lines[2], "2,100,20,"));
  g_assert_cmpstr(lines[3], ==, "");
  g_assert_null(lines[4]);

  /* Deleted like one. */
  g_assert_true(tdm_history_delete(history, id, &error));
  g_assert_no_error(error);
  g_autoptr(GPtrArray) left = tdm_history_list(history, NULL);
  g_assert_cmpuint(left->len, ==, 1);
  g_array_unref(p.points);
  remove_folder(dir);
}

/* Cancelled after its first point the sweep is kept, stopped, with that point;
 * cancelled before any, nothing is kept. A failed sweep says why. */
static void
test_sweep_cancel_fail(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = config("cpu:2", 0);
  g_autoptr(GError) error = NULL;

  g_autoptr(GCancellable) cancel = g_cancellable_new();
  Points p = {g_array_new(FALSE, FALSE, sizeof(TdmScalingPoint)), cancel};
  Sweep rec;
  sweep_open(&rec, history, cfg, TDM_SCALING_STRONG, NULL, &p);
  g_assert_false(sweep_run(&rec, cancel, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED);
  g_clear_error(&error);
  g_assert_true(tdm_run_recorder_finish(rec.rec, &error));
  g_assert_true(tdm_run_recorder_get_kept(rec.rec));
  g_autoptr(TdmRunRecord) r = tdm_history_load(history, tdm_run_recorder_get_id(rec.rec), &error);
  sweep_close(&rec);
  g_assert_no_error(error);
  g_assert_cmpint(r->kind, ==, TDM_RUN_EXPERIMENT);
  g_assert_cmpuint(r->experiment.points->len, ==, 1);
  g_assert_true(r->finished);
  g_assert_true(r->final.stopped);
  /* Named by its date, as training runs are. */
  g_assert_nonnull(r->name);
  g_assert_cmpstr(r->name, !=, r->id);

  g_autoptr(GCancellable) early = g_cancellable_new();
  g_cancellable_cancel(early);
  Sweep none;
  Points none_points = {p.points, NULL, NULL};
  sweep_open(&none, history, cfg, TDM_SCALING_STRONG, "nothing", &none_points);
  g_autofree char *none_path = file_of(dir, tdm_run_recorder_get_id(none.rec));
  g_assert_true(g_file_test(none_path, G_FILE_TEST_EXISTS));
  g_assert_false(sweep_run(&none, early, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED);
  g_clear_error(&error);
  g_assert_true(tdm_run_recorder_finish(none.rec, &error));
  g_assert_false(tdm_run_recorder_get_kept(none.rec));
  g_assert_false(g_file_test(none_path, G_FILE_TEST_EXISTS));
  sweep_close(&none);

  g_autoptr(TdmConfig) bad = config("cpu:2", 0);
  bad->dataset = (g_free(bad->dataset), g_strdup("/nonexistent/tandem-dataset"));
  Sweep failing;
  Points failing_points = {p.points, NULL, NULL};
  sweep_open(&failing, history, bad, TDM_SCALING_STRONG, "fails", &failing_points);
  g_assert_false(sweep_run(&failing, NULL, &error));
  g_assert_nonnull(error);
  g_autofree char *message = g_strdup(error->message);
  g_clear_error(&error);
  g_assert_true(tdm_run_recorder_finish(failing.rec, &error));
  g_autoptr(TdmRunRecord) f =
    tdm_history_load(history, tdm_run_recorder_get_id(failing.rec), &error);
  sweep_close(&failing);
  g_assert_no_error(error);
  g_assert_true(f->failed);
  g_assert_cmpstr(f->error, ==, message);
  g_assert_cmpuint(f->experiment.points->len, ==, 0);

  g_autoptr(GPtrArray) runs = tdm_history_list(history, NULL);
  g_assert_cmpuint(runs->len, ==, 2);
  g_array_unref(p.points);
  remove_folder(dir);
}

/* A comparison's record: the one shape of every experiment's, with the runs it kept
 * (named by id, in order) and its result once complete; exported as its settings. */
static void
test_comparison_record(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = config("cpu:2", 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) e = tdm_experiment_new_compare(cfg, 5, &error);
  g_assert_no_error(error);
  g_autoptr(TdmRunRecorder) rec = tdm_run_recorder_new_experiment(history, e, "both", &error);
  g_assert_no_error(error);
  g_assert_true(tdm_experiment_run(e, NULL, NULL, NULL, &error));
  g_assert_no_error(error);
  tdm_run_recorder_add_run(rec, "20250101-120000-000000-0001");
  tdm_run_recorder_add_run(rec, "20250101-120000-000000-0002");
  tdm_run_recorder_end_experiment(rec, e, NULL);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_assert_no_error(error);
  /* Lines of damaged or hostile runs: ids no run file could have are left out. */
  g_autofree char *path = file_of(dir, tdm_run_recorder_get_id(rec));
  append(path, "{\"type\":\"run\",\"id\":\"../outside\"}\n{\"type\":\"run\",\"id\":7}\n");

  g_autoptr(TdmRunRecord) r = tdm_history_load(history, tdm_run_recorder_get_id(rec), &error);
  g_assert_no_error(error);
  g_assert_cmpint(r->kind, ==, TDM_RUN_EXPERIMENT);
  g_assert_cmpint(r->experiment.kind, ==, TDM_EXPERIMENT_COMPARE);
  g_assert_false(tdm_run_record_is_sweep(r));
  g_assert_cmpint(r->experiment.steps, ==, 5);
  g_assert_cmpuint(r->experiment.points->len, ==, 0);
  g_assert_cmpuint(r->experiment.runs->len, ==, 2);
  g_assert_cmpstr(r->experiment.runs->pdata[0], ==, "20250101-120000-000000-0001");
  g_assert_cmpstr(r->experiment.runs->pdata[1], ==, "20250101-120000-000000-0002");
  g_autofree char *result = tdm_experiment_dup_result(e);
  g_assert_nonnull(result);
  g_assert_cmpstr(r->experiment.result, ==, result);
  g_assert_true(r->finished);
  g_assert_false(r->final.stopped);
  g_assert_cmpint(r->replicas, ==, 2);

  g_autofree char *csv = g_build_filename(dir, "both.csv", NULL);
  g_assert_true(tdm_history_export_csv(history, r->id, csv, &error));
  g_assert_no_error(error);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(csv, &text, NULL, NULL));
  g_unlink(csv);
  g_assert_nonnull(strstr(text, "\n# kind: compare\n"));
  g_assert_nonnull(strstr(text, "\n# steps: 5\n"));
  g_assert_nonnull(strstr(text, "\n# run 2: 20250101-120000-000000-0002\n"));
  g_assert_nonnull(strstr(text, "\n# result: "));
  remove_folder(dir);
}

/* Files as earlier versions wrote them (no kind) load as training runs; a sweep file
 * written by hand loads as one, and a crash mid-line leaves its points before it; a
 * kind this version does not know is named as unreadable, not shown wrong. */
static void
test_sweep_files(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = config("cpu:2", 0);
  g_autofree char *config_json = tdm_config_to_json(cfg);
  g_autoptr(GError) error = NULL;

  g_autofree char *old = g_build_filename(dir, "20250101-120000-000000-0001.jsonl", NULL);
  g_autofree char *old_text = g_strdup_printf(
    "{\"type\":\"settings\",\"name\":\"old\",\"created\":1735732800,\"config\":%s}\n"
    "{\"type\":\"started\",\"replicas\":2,\"steps_per_epoch\":30,\"total_steps\":30}\n"
    "{\"type\":\"step\",\"step\":10,\"epoch\":0.5,\"train_loss\":1.5,\"train_accuracy\":0.5,"
    "\"samples_per_second\":1000,\"elapsed\":1}\n"
    "{\"type\":\"finished\",\"steps\":10,\"elapsed\":1,\"test_loss\":1.2,"
    "\"test_accuracy\":0.6,\"stopped\":true}\n", config_json);
  g_assert_true(g_file_set_contents(old, old_text, -1, NULL));
  g_autoptr(TdmRunRecord) o = tdm_history_load(history, "20250101-120000-000000-0001", &error);
  g_assert_no_error(error);
  g_assert_cmpint(o->kind, ==, TDM_RUN_TRAINING);
  g_assert_cmpstr(o->name, ==, "old");
  g_assert_cmpuint(o->points->len, ==, 1);
  g_assert_cmpuint(o->experiment.points->len, ==, 0);
  g_assert_true(o->finished);

  g_autofree char *sweep = g_build_filename(dir, "20250101-130000-000000-0002.jsonl", NULL);
  g_autofree char *sweep_text = g_strdup_printf(
    "{\"type\":\"settings\",\"kind\":\"scaling\",\"name\":\"by hand\",\"created\":1735736400,"
    "\"config\":%s,\"scaling\":{\"mode\":\"strong\",\"steps\":200,\"device_counts\":[1,2]}}\n"
    "{\"type\":\"point\",\"devices\":1,\"batch\":100,\"steps\":200,\"samples_per_second\":4000,"
    "\"speedup\":1,\"efficiency\":1,\"compute_ms\":20,\"comm_ms\":0,\"wait_ms\":0,"
    "\"memory_bytes\":[1048576]}\n"
    "{\"type\":\"point\",\"devices\":2,\"batch\":100,\"steps\":200,\"samples_per_second\":7000,"
    "\"speedup\":1.75,\"efficiency\":0.875,\"compute_ms\":10,\"comm_ms\":1,\"wait_ms\":0.5,"
    "\"memory_bytes\":[1048576,1048576]}\n", config_json);
  g_assert_true(g_file_set_contents(sweep, sweep_text, -1, NULL));
  /* The crash: the end line cut short. */
  append(sweep, "{\"type\":\"finished\",\"poi");
  g_autoptr(TdmRunRecord) s = tdm_history_load(history, "20250101-130000-000000-0002", &error);
  g_assert_no_error(error);
  g_assert_cmpint(s->kind, ==, TDM_RUN_EXPERIMENT);
  g_assert_cmpint(s->experiment.kind, ==, TDM_EXPERIMENT_SCALING);
  g_assert_null(s->experiment.result);
  g_assert_cmpint(s->experiment.mode, ==, TDM_SCALING_STRONG);
  g_assert_cmpint(s->experiment.steps, ==, 200);
  g_assert_cmpuint(s->experiment.points->len, ==, 2);
  g_assert_false(s->finished);
  const TdmScalingPoint *two = &g_array_index(s->experiment.points, TdmScalingPoint, 1);
  g_assert_cmpint(two->devices, ==, 2);
  g_assert_cmpint(two->index, ==, 1);
  g_assert_cmpfloat(two->speedup, ==, 1.75);
  g_assert_cmpfloat(two->efficiency, ==, 0.875);
  g_assert_cmpfloat(two->comm_ms, ==, 1);
  g_assert_cmpint(two->memory_bytes[1], ==, 1048576);

  /* A crash between lines leaves whole lines: the same, read again. */
  g_assert_true(g_file_set_contents(sweep, sweep_text, -1, NULL));
  g_autoptr(TdmRunRecord) whole = tdm_history_load(history, "20250101-130000-000000-0002", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(whole->experiment.points->len, ==, 2);

  g_autofree char *future = g_build_filename(dir, "20250101-140000-000000-0003.jsonl", NULL);
  g_autofree char *future_text = g_strdup_printf(
    "{\"type\":\"settings\",\"kind\":\"hologram\",\"name\":\"?\",\"created\":1,\"config\":%s}\n",
    config_json);
  g_assert_true(g_file_set_contents(future, future_text, -1, NULL));
  /* An experiment of a kind a newer version runs: named, not shown as another. */
  g_autofree char *newer = g_build_filename(dir, "20250101-150000-000000-0004.jsonl", NULL);
  g_autofree char *newer_text = g_strdup_printf(
    "{\"type\":\"settings\",\"kind\":\"experiment\",\"name\":\"?\",\"created\":1,"
    "\"config\":%s,\"experiment\":{\"kind\":\"time-travel\",\"steps\":5}}\n", config_json);
  g_assert_true(g_file_set_contents(newer, newer_text, -1, NULL));
  g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) runs = tdm_history_list(history, problems);
  g_assert_cmpuint(runs->len, ==, 2);
  g_assert_cmpuint(problems->len, ==, 2);
  g_assert_nonnull(strstr(problems->pdata[0], future));
  g_assert_nonnull(strstr(problems->pdata[0], "hologram"));
  g_assert_nonnull(strstr(problems->pdata[1], newer));
  g_assert_nonnull(strstr(problems->pdata[1], "time-travel"));
  remove_folder(dir);
}

/* The one scaling table: the columns, C-notation numbers to nine digits whatever the
 * locale, an empty cell for what is not finite, a memory column per device of the
 * widest point. The Scaling page and --export-run write with it (test-classroom.c
 * compares the two). */
static void
test_scaling_csv_table(void)
{
  TdmScalingPoint points[2] = {
    {.devices = 1, .batch = 50, .steps = 20, .samples_per_second = 1234.5, .speedup = 1,
     .efficiency = 1, .compute_ms = 0.123456789012, .comm_ms = NAN, .wait_ms = 1e-7,
     .samples_per_second_min = 1200, .samples_per_second_max = 1250.5, .speedup_min = 1,
     .speedup_max = 1, .runs = 3, .cpu_threads = 1, .memory_bytes = {1048576}},
    {.devices = 2, .batch = 100, .steps = 20, .samples_per_second = 2000.25,
     .speedup = 2000.25 / 1234.5, .efficiency = 2000.25 / 1234.5 / 2, .compute_ms = 2,
     .comm_ms = 0.5, .wait_ms = INFINITY, .samples_per_second_min = 1900,
     .samples_per_second_max = NAN, .speedup_min = 1.5, .speedup_max = 1.75, .runs = 5,
     .cpu_threads = 1, .memory_bytes = {3000000000, 7}},
  };
  g_autoptr(GString) s = g_string_new("# kept\n");
  tdm_scaling_points_to_csv(s, points, 2);
  g_assert_cmpstr(s->str, ==,
                  "# kept\n"
                  "devices,batch,steps,samples_per_second,speedup,efficiency,compute_ms,"
                  "comm_ms,wait_ms,samples_per_second_min,samples_per_second_max,"
                  "speedup_min,speedup_max,runs,cpu_threads,memory_bytes_1,memory_bytes_2\n"
                  "1,50,20,1234.5,1,1,0.123456789,,1e-07,1200,1250.5,1,1,3,1,1048576,\n"
                  "2,100,20,2000.25,1.62029162,0.810145808,2,0.5,,1900,,1.5,1.75,5,1,"
                  "3000000000,7\n");
  /* No points: the header alone, without memory columns. */
  g_string_truncate(s, 0);
  tdm_scaling_points_to_csv(s, NULL, 0);
  g_assert_cmpstr(s->str, ==, "devices,batch,steps,samples_per_second,speedup,efficiency,"
                              "compute_ms,comm_ms,wait_ms,samples_per_second_min,"
                              "samples_per_second_max,speedup_min,speedup_max,runs,"
                              "cpu_threads\n");
}

/* Registers this part's tests (test-history.c's main, in its order). */
void
test_history_add_experiments(void)
{
  g_test_add_data_func("/scaling/strong", GINT_TO_POINTER(TDM_SCALING_STRONG),
                       test_scaling_two_points);
  g_test_add_data_func("/scaling/weak", GINT_TO_POINTER(TDM_SCALING_WEAK),
                       test_scaling_two_points);
  g_test_add_func("/scaling/cancel", test_scaling_cancel);
  g_test_add_func("/scaling/sweep-record", test_sweep_record);
  g_test_add_func("/history/comparison-record", test_comparison_record);
  g_test_add_func("/scaling/sweep-cancel-fail", test_sweep_cancel_fail);
  g_test_add_func("/scaling/sweep-files", test_sweep_files);
  g_test_add_func("/scaling/csv-table", test_scaling_csv_table);
}
