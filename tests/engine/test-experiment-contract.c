/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-experiment-contract.c — what an experiment may ask of its trainings
 * (tdm-experiment.h), through a fake kind whose steps are counted: the trainer's
 * options a training carries (a summary at every step, a learning-rate range), the
 * experiment's own stop from its observer (reduced as an outcome), and a stop by the
 * person that a kind keeps (complete, said stopped) or does not (cancelled). Then the
 * learning-rate finder as an experiment: its curve on the range, its end once the
 * loss diverges, its options checked, and its record read back from the history. On
 * 1 or 2 CPU workers and a synthetic set; every count follows from the steps asked. */
#include "synthetic-idx.h"
#include "tdm-error.h"
#include "tdm-experiment-private.h"
#include "tdm-history.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#define MAX_SEEN 1024

static char *dataset;

static TdmConfig *
config(const char *devices)
{
  TdmConfig *cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup("fc32,relu,fc10");
  cfg->batch = 100;
  cfg->seed = 5;
  cfg->epochs = 1000;
  cfg->optimizer = TDM_OPTIMIZER_MOMENTUM;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  return cfg;
}

/* ---- a fake kind ------------------------------------------------------------------ */

typedef struct {
  TdmExperiment parent;
  int trainings;                /* asked for */
  int stop_at;                  /* the observer stops the training at its step (0: never) */
  int steps_seen;               /* step events, over every training */
  int training_steps;           /* of the training under way */
  double lr[MAX_SEEN];          /* each step's rate, in order */
  int reduced;
} Fake;

static gboolean
fake_next(TdmExperiment *e)
{
  Fake *f = (Fake *)e;
  if (e->training.index >= f->trainings)
    return FALSE;
  TdmConfig *cfg = tdm_config_copy(e->config);
  cfg->max_steps = e->steps;
  tdm_experiment_set_training(e, cfg, NULL, "fake", FALSE);
  e->training.summary_steps = 1;
  e->training.lr_range[0] = 1e-3;
  e->training.lr_range[1] = 1e-1;
  e->training.lr_range_steps = (int)e->steps;
  f->training_steps = 0;
  return TRUE;
}

static void
fake_observe(TdmExperiment *e, const TdmEvent *event)
{
  Fake *f = (Fake *)e;
  if (event->kind != TDM_EVENT_STEP)
    return;
  if (f->steps_seen < MAX_SEEN)
    f->lr[f->steps_seen] = event->step.lr;
  f->steps_seen++;
  f->training_steps++;
  if (f->training_steps == f->stop_at)
    tdm_experiment_stop_training(e);
}

static gboolean
fake_reduce(TdmExperiment *e, const float *parameters, size_t count, GError **error)
{
  ((Fake *)e)->reduced++;
  return TRUE;
}

static char *
fake_dup_result(const TdmExperiment *e)
{
  return g_strdup_printf("%d steps", ((const Fake *)e)->steps_seen);
}

static const TdmExperimentClass fake_class = {
  .stopped = "the fake was stopped",
  .next = fake_next,
  .observe = fake_observe,
  .reduce = fake_reduce,
  .dup_result = fake_dup_result,
};

static const TdmExperimentClass fake_keeping_class = {
  .stopped = "the fake was stopped",
  .keeps_stopped = TRUE,
  .next = fake_next,
  .observe = fake_observe,
  .reduce = fake_reduce,
  .dup_result = fake_dup_result,
};

static Fake *
fake_new(const TdmExperimentClass *klass, const char *devices, long steps, int trainings,
         int stop_at)
{
  g_autoptr(TdmConfig) cfg = config(devices);
  Fake *f = g_new0(Fake, 1);
  tdm_experiment_init(&f->parent, klass, TDM_EXPERIMENT_COMPARE, cfg, steps);
  f->trainings = trainings;
  f->stop_at = stop_at;
  return f;
}

/* Every training takes the options it carries: a summary at every step (so a step
 * event each), and the range as its schedule, whatever the configuration's. */
static void
test_training_options(void)
{
  Fake *f = fake_new(&fake_class, "cpu:2", 20, 2, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_experiment_run(&f->parent, NULL, NULL, NULL, &error));
  g_assert_no_error(error);
  g_assert_true(tdm_experiment_is_complete(&f->parent));
  g_assert_false(tdm_experiment_get_stopped(&f->parent));
  g_assert_cmpint(f->reduced, ==, 2);
  g_assert_cmpint(f->steps_seen, ==, 40);
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < 20; i++) {
      double expected = 1e-3 * pow(100.0, i / 19.0);
      g_assert_cmpfloat_with_epsilon(f->lr[20 * t + i], expected, 1e-9 * expected);
    }
  tdm_experiment_free(&f->parent);
}

/* The observer stops the training: it ends well before its steps, and its end is an
 * outcome, reduced, the next training asked for. */
static void
test_observer_stop(void)
{
  Fake *f = fake_new(&fake_class, "cpu", 500, 2, 5);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_experiment_run(&f->parent, NULL, NULL, NULL, &error));
  g_assert_no_error(error);
  g_assert_true(tdm_experiment_is_complete(&f->parent));
  g_assert_false(tdm_experiment_get_stopped(&f->parent));
  g_assert_cmpint(f->reduced, ==, 2);
  g_test_message("%d steps seen of 2 x 500", f->steps_seen);
  g_assert_cmpint(f->steps_seen, >=, 10);
  g_assert_cmpint(f->steps_seen, <, 1000);
  g_autofree char *result = tdm_experiment_dup_result(&f->parent);
  g_assert_nonnull(result);
  tdm_experiment_free(&f->parent);
}

/* The experiment's own stop covers whatever the training says of its end: a training
 * that failed once stopped (a loss gone NaN) is reduced all the same. */
static void
test_observer_stop_events(void)
{
  Fake *f = fake_new(&fake_class, "cpu", 50, 1, 1);
  g_autoptr(GError) error = NULL;
  const TdmExperimentTraining *t = tdm_experiment_next(&f->parent);
  g_assert_nonnull(t);
  g_assert_nonnull(t->stop);
  g_assert_false(g_cancellable_is_cancelled(t->stop));
  TdmEvent step = {.kind = TDM_EVENT_STEP, .step = {.step = 1, .lr = 1e-3}};
  tdm_experiment_observe(&step, &f->parent);
  g_assert_true(g_cancellable_is_cancelled(t->stop));
  g_autoptr(GError) why = g_error_new_literal(TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DIVERGED,
                                              "the training loss became NaN");
  TdmEvent failure = {.kind = TDM_EVENT_FAILED, .failed = why};
  tdm_experiment_observe(&failure, &f->parent);
  g_assert_true(tdm_experiment_reduce(&f->parent, NULL, 0, &error));
  g_assert_no_error(error);
  g_assert_cmpint(f->reduced, ==, 1);
  g_assert_null(tdm_experiment_next(&f->parent));
  g_assert_true(tdm_experiment_is_complete(&f->parent));
  tdm_experiment_free(&f->parent);
}

typedef struct {
  GCancellable *cancellable;
  int steps, stop_at;
} Stopper;

static void
stop_at_step(const TdmEvent *event, gpointer data)
{
  Stopper *s = data;
  if (event->kind == TDM_EVENT_STEP && ++s->steps == s->stop_at)
    g_cancellable_cancel(s->cancellable);
}

/* The person stops the first of two trainings: a kind that keeps it completes there,
 * said stopped, with one reduction; another is cancelled, with none. */
static void
test_person_stop(void)
{
  for (int keeps = 0; keeps < 2; keeps++) {
    Fake *f = fake_new(keeps ? &fake_keeping_class : &fake_class, "cpu", 500, 2, 0);
    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    Stopper stopper = {cancellable, 0, 5};
    g_autoptr(GError) error = NULL;
    gboolean ok = tdm_experiment_run(&f->parent, stop_at_step, &stopper, cancellable, &error);
    g_assert_cmpint(f->steps_seen, >=, 5);
    g_assert_cmpint(f->steps_seen, <, 500);
    if (keeps) {
      g_assert_true(ok);
      g_assert_no_error(error);
      g_assert_true(tdm_experiment_is_complete(&f->parent));
      g_assert_true(tdm_experiment_get_stopped(&f->parent));
      g_assert_cmpint(f->reduced, ==, 1);
    } else {
      g_assert_false(ok);
      g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED);
      g_assert_false(tdm_experiment_is_complete(&f->parent));
      g_assert_cmpint(f->reduced, ==, 0);
    }
    g_assert_null(tdm_experiment_next(&f->parent));
    tdm_experiment_free(&f->parent);
  }
}

/* ---- the learning-rate finder ------------------------------------------------------ */

typedef struct {
  int count;
  int last_step;
  gboolean in_order;
} Points;

static void
count_point(const TdmLrFindPoint *p, gpointer data)
{
  Points *points = data;
  points->in_order &= p->step == points->last_step + 1;
  points->last_step = p->step;
  points->count++;
}

/* One training on the range: a point a step, each rate the one before times the
 * range's ratio to the power 1/(steps − 1); momentum SGD learns the set between 1e-2
 * and a few, where the suggestion falls. */
static void
test_lr_find_run(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu");
  cfg->save_path = g_strdup("/nonexistent/never-written.safetensors");
  TdmLrFindOptions options = {1e-4, 10.0, 100};
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) e = tdm_experiment_new_lr_find(cfg, &options, &error);
  g_assert_no_error(error);
  g_assert_cmpint(tdm_experiment_get_kind(e), ==, TDM_EXPERIMENT_LR_FIND);
  Points seen = {0, 0, TRUE};
  tdm_experiment_set_lr_point_sink(e, count_point, &seen);
  g_assert_true(tdm_experiment_run(e, NULL, NULL, NULL, &error));
  g_assert_no_error(error);
  g_assert_true(tdm_experiment_is_complete(e));
  int count = 0;
  const TdmLrFindPoint *p = tdm_experiment_get_lr_points(e, &count);
  g_assert_cmpint(seen.count, ==, count);
  g_assert_true(seen.in_order);
  g_assert_cmpint(count, >=, 10);
  g_assert_cmpint(count, <=, 100);
  g_assert_cmpfloat_with_epsilon(p[0].lr, 1e-4, 1e-16);
  for (int i = 1; i < count; i++)
    g_assert_cmpfloat_with_epsilon(p[i].lr / p[i - 1].lr, pow(1e5, 1.0 / 99), 1e-9);
  if (count < 100)
    g_assert_true(tdm_experiment_get_lr_diverged(e));
  double suggested = tdm_experiment_get_lr_suggestion(e);
  g_test_message("%d points, suggestion %.3g", count, suggested);
  g_assert_true(isfinite(suggested));
  g_assert_cmpfloat(suggested, >=, 1e-3);
  g_assert_cmpfloat(suggested, <=, 5.0);
  g_autofree char *result = tdm_experiment_dup_result(e);
  g_assert_nonnull(strstr(result, "suggested learning rate"));
}

/* Rates up to 10⁴ blow any loss up: the finder stops its training itself, long before
 * its steps, and that is its result, not a failure. */
static void
test_lr_find_diverges(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2");
  TdmLrFindOptions options = {1e-3, 1e4, 400};
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) e = tdm_experiment_new_lr_find(cfg, &options, &error);
  g_assert_true(tdm_experiment_run(e, NULL, NULL, NULL, &error));
  g_assert_no_error(error);
  int count = 0;
  tdm_experiment_get_lr_points(e, &count);
  g_test_message("%d points of 400", count);
  g_assert_true(tdm_experiment_get_lr_diverged(e));
  g_assert_false(tdm_experiment_get_stopped(e));
  g_assert_cmpint(count, >=, 2);
  g_assert_cmpint(count, <, 400);
  g_autofree char *result = tdm_experiment_dup_result(e);
  g_assert_nonnull(strstr(result, "diverged"));
}

static void
test_lr_find_options(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu");
  g_autoptr(GError) error = NULL;
  TdmLrFindOptions reversed = {1.0, 1e-3, 100};
  g_assert_null(tdm_experiment_new_lr_find(cfg, &reversed, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
  g_assert_nonnull(strstr(error->message, "range"));
  g_clear_error(&error);
  TdmLrFindOptions few = {1e-5, 1.0, 2};
  g_assert_null(tdm_experiment_new_lr_find(cfg, &few, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
  g_clear_error(&error);
  cfg->batch = 0;
  g_assert_null(tdm_experiment_new_lr_find(cfg, NULL, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
}

/* Kept in the history as every experiment is: its range, its curve point for point,
 * its suggestion and result; a damaged point line is skipped, not the record. */
static void
test_lr_find_record(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp("tandem-lr-find-XXXXXX", &error);
  g_assert_no_error(error);
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = config("cpu");
  TdmLrFindOptions options = {1e-4, 10.0, 60};
  g_autoptr(TdmExperiment) e = tdm_experiment_new_lr_find(cfg, &options, &error);
  TdmRunRecorder *rec = tdm_run_recorder_new_experiment(history, e, NULL, &error);
  g_assert_no_error(error);
  g_assert_true(tdm_experiment_run(e, NULL, NULL, NULL, &error));
  tdm_run_recorder_end_experiment(rec, e, NULL);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_autofree char *id = g_strdup(tdm_run_recorder_get_id(rec));
  tdm_run_recorder_free(rec);

  g_autoptr(TdmRunRecord) r = tdm_history_load(history, id, &error);
  g_assert_no_error(error);
  g_assert_cmpint(r->kind, ==, TDM_RUN_EXPERIMENT);
  g_assert_cmpint(r->experiment.kind, ==, TDM_EXPERIMENT_LR_FIND);
  g_assert_cmpfloat(r->experiment.lr_options.lr_first, ==, 1e-4);
  g_assert_cmpfloat(r->experiment.lr_options.lr_last, ==, 10.0);
  g_assert_cmpint(r->experiment.lr_options.steps, ==, 60);
  int count = 0;
  const TdmLrFindPoint *p = tdm_experiment_get_lr_points(e, &count);
  g_assert_cmpint(r->experiment.lr_points->len, ==, count);
  for (int i = 0; i < count; i++) {
    const TdmLrFindPoint *q = &g_array_index(r->experiment.lr_points, TdmLrFindPoint, i);
    g_assert_cmpint(q->step, ==, p[i].step);
    g_assert_cmpfloat_with_epsilon(q->lr, p[i].lr, 1e-12 * p[i].lr);
  }
  double suggestion = tdm_experiment_get_lr_suggestion(e);
  g_assert_cmpfloat(isfinite(r->experiment.lr_suggestion), ==, isfinite(suggestion));
  if (isfinite(suggestion))
    g_assert_cmpfloat_with_epsilon(r->experiment.lr_suggestion, suggestion, 1e-12 * suggestion);
  g_assert_true(r->finished);
  g_assert_false(r->final.stopped);
  g_autofree char *result = tdm_experiment_dup_result(e);
  g_assert_cmpstr(r->experiment.result, ==, result);

  /* A line of a rate that is no rate, before the end: skipped. */
  g_autofree char *path = g_strdup_printf("%s/%s.jsonl", dir, id);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  char *end = strstr(text, "{\"type\":\"finished\"");
  g_assert_nonnull(end);
  g_autoptr(GString) damaged = g_string_new_len(text, end - text);
  g_string_append(damaged, "{\"type\":\"lr_point\",\"step\":999,\"lr\":-1,\"loss\":1}\n");
  g_string_append(damaged, end);
  g_assert_true(g_file_set_contents(path, damaged->str, -1, NULL));
  g_autoptr(TdmRunRecord) again = tdm_history_load(history, id, &error);
  g_assert_no_error(error);
  g_assert_cmpint(again->experiment.lr_points->len, ==, count);

  g_assert_cmpint(g_remove(path), ==, 0);
  g_assert_cmpint(g_rmdir(dir), ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/experiment-contract/training-options", test_training_options);
  g_test_add_func("/experiment-contract/observer-stop", test_observer_stop);
  g_test_add_func("/experiment-contract/observer-stop-events", test_observer_stop_events);
  g_test_add_func("/experiment-contract/person-stop", test_person_stop);
  g_test_add_func("/experiment-contract/lr-find-run", test_lr_find_run);
  g_test_add_func("/experiment-contract/lr-find-diverges", test_lr_find_diverges);
  g_test_add_func("/experiment-contract/lr-find-options", test_lr_find_options);
  g_test_add_func("/experiment-contract/lr-find-record", test_lr_find_record);
  dataset = test_synthetic_idx_new(0, 3000, 500);
  int status = g_test_run();
  test_remove_synthetic_idx(dataset);
  return status;
}
