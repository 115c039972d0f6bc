/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-experiment.c — experiments as one kind of object (tdm-experiment.h): the
 * trainings compare-with-one-device and compare-strategies ask for, their reducers'
 * results on 2 CPU workers (the twin bit-identical in exact mode; each strategy's
 * sampled steps), the strategies' reducer on hand-made phases, a training stopped or
 * failed ending the experiment, the driver cancelled, and one device refused. */
#include "synthetic-idx.h"
#include "tdm-error.h"
#include "tdm-experiment.h"
#include "ticking-clock.h"

#include <math.h>
#include <string.h>

static char *dataset;

static TdmConfig *
config(const char *devices)
{
  TdmConfig *cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup("fc16,relu,fc10");
  cfg->batch = 50;
  cfg->seed = 5;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  return cfg;
}

/* What compare asks for: the run in exact mode on both workers keeping its
 * parameters, then its twin on the main worker alone with the same batch. */
static void
test_compare_trainings(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2");
  cfg->main_replica = 1;
  cfg->save_path = g_strdup("/nonexistent/never-written.safetensors");
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) e = tdm_experiment_new_compare(cfg, 12, &error);
  g_assert_no_error(error);
  g_assert_cmpint(tdm_experiment_get_kind(e), ==, TDM_EXPERIMENT_COMPARE);
  g_assert_cmpstr(tdm_experiment_kind_name(TDM_EXPERIMENT_STRATEGIES), ==, "compare-strategies");

  const TdmExperimentTraining *t = tdm_experiment_next(e);
  g_assert_nonnull(t);
  g_assert_true(tdm_experiment_get_training(e) == t);
  g_assert_cmpint(t->index, ==, 0);
  g_assert_cmpstr(t->name, ==, "Compare: 2 devices");
  g_assert_true(t->keep_parameters);
  g_assert_true(t->config->exact);
  g_assert_cmpint(t->config->max_steps, ==, 12);
  g_assert_cmpint(tdm_config_replica_count(t->config), ==, 2);
  g_assert_null(t->config->save_path);
  /* The N-device run's outcome, as a run that reached its end tells it. */
  TdmEvent finished = {.kind = TDM_EVENT_FINISHED};
  tdm_experiment_observe(&finished, e);
  float first[3] = {1, 2, 3};
  g_assert_true(tdm_experiment_reduce(e, first, 3, &error));
  g_assert_null(tdm_experiment_get_training(e));

  t = tdm_experiment_next(e);
  g_assert_cmpint(t->index, ==, 1);
  g_assert_cmpstr(t->name, ==, "Compare: one device");
  g_assert_cmpint(tdm_config_replica_count(t->config), ==, 1);
  g_assert_true(tdm_device_id_equal(t->config->devices[0], cfg->devices[1]));
  g_assert_cmpint(t->config->batch, ==, 50);
  g_assert_true(t->config->exact);
  tdm_experiment_observe(&finished, e);
  float second[3] = {1, 2, 3.5f};
  g_assert_true(tdm_experiment_reduce(e, second, 3, &error));
  g_assert_null(tdm_experiment_next(e));
  g_assert_true(tdm_experiment_is_complete(e));
  size_t differing = 0, count = 0;
  double difference = tdm_experiment_get_difference(e, &differing, &count);
  g_assert_cmpuint(differing, ==, 1);
  g_assert_cmpuint(count, ==, 3);
  /* 0.5 off, the largest magnitude 3.5 (the second run's, the reference) */
  g_assert_cmpfloat(fabs(difference - 0.5 / 3.5), <, 1e-12);
  g_autofree char *result = tdm_experiment_dup_result(e);
  g_assert_true(g_str_has_prefix(result, "2 devices against one, after 12 steps: 1 of 3 values "
                                         "differ; largest difference"));
}

/* Run through the driver: 2 CPU workers end bit for bit where their twin ends. */
static void
test_compare_run(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2");
  cfg->optimizer = TDM_OPTIMIZER_ADAM;
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) e = tdm_experiment_new_compare(cfg, 15, &error);
  g_assert_true(tdm_experiment_run(e, NULL, NULL, NULL, &error));
  g_assert_no_error(error);
  size_t differing = 1, count = 0;
  g_assert_cmpfloat(tdm_experiment_get_difference(e, &differing, &count), ==, 0);
  g_assert_cmpuint(differing, ==, 0);
  g_assert_cmpuint(count, >, 0);
  g_autofree char *result = tdm_experiment_dup_result(e);
  g_autofree char *expected =
    g_strdup_printf("2 devices against one, after 15 steps: identical: 0 of %zu values differ",
                    count);
  g_assert_cmpstr(result, ==, expected);
}

typedef struct {
  int started, finished;
  TdmStrategy strategy[2];
} Seen;

static void
count_events(const TdmEvent *event, gpointer data)
{
  Seen *seen = data;
  if (event->kind == TDM_EVENT_STARTED)
    seen->started++;
  if (event->kind == TDM_EVENT_FINISHED)
    seen->finished++;
}

/* main, then allreduce, each run's sampled steps kept; the driver's sink sees both. */
static void
test_strategies_run(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2");
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) e = tdm_experiment_new_strategies(cfg, 30, &error);
  Seen seen = {0};
  /* A step summary every 10 steps: each run samples its steps whatever the clock,
   * and times them on one that ticks at each reading. */
  tdm_experiment_set_summary_steps(e, 10);
  gint ticks = 0;
  tdm_experiment_set_span_clock(e, test_ticking_clock, &ticks);
  g_assert_true(tdm_experiment_run(e, count_events, &seen, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpint(seen.started, ==, 2);
  g_assert_cmpint(seen.finished, ==, 2);
  int count = 0;
  const TdmStrategyFigures *runs = tdm_experiment_get_strategies(e, &count);
  g_assert_cmpint(count, ==, 2);
  g_assert_cmpint(runs[0].strategy, ==, TDM_STRATEGY_MAIN);
  g_assert_cmpint(runs[1].strategy, ==, TDM_STRATEGY_ALLREDUCE);
  for (int i = 0; i < 2; i++) {
    g_assert_cmpint(runs[i].replicas, ==, 2);
    g_assert_cmpint(runs[i].samples, >=, 1);
    g_assert_cmpfloat(runs[i].step_ms, >, 0);
  }
  g_autofree char *result = tdm_experiment_dup_result(e);
  g_assert_true(g_str_has_prefix(result, "main · "));
  g_assert_nonnull(strstr(result, " ms a step; allreduce · "));
}

static TdmEvent
phases(long step, float end_ms, float comm_start, float comm_end, float hidden)
{
  TdmEvent event = {.kind = TDM_EVENT_PHASES};
  event.phases.step = step;
  event.phases.replicas = 2;
  for (int r = 0; r < 2; r++) {
    TdmDevicePhases *d = &event.phases.device[r];
    d->spans = 3;
    d->span[0].phase = TDM_PHASE_BACKWARD;
    d->span[0].start_ms = 0;
    d->span[0].end_ms = comm_start;
    d->span[1].phase = TDM_PHASE_ALLREDUCE;
    d->span[1].start_ms = comm_start;
    d->span[1].end_ms = comm_end;
    d->span[2].phase = TDM_PHASE_UPDATE;
    d->span[2].start_ms = comm_end;
    d->span[2].end_ms = r == 0 ? end_ms : end_ms - 1;
    d->hidden_ms = hidden;
  }
  return event;
}

/* The reducer's means, on phases made by hand: the first sample (the first step's
 * costs) is left out once others came; a step lasts until the last device ends. */
static void
test_strategies_means(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2");
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) e = tdm_experiment_new_strategies(cfg, 30, &error);
  g_assert_nonnull(tdm_experiment_next(e));
  TdmEvent first = phases(1, 100, 50, 90, 7);
  TdmEvent a = phases(11, 10, 4, 6, 1);
  TdmEvent b = phases(21, 14, 4, 8, 3);
  TdmEvent finished = {.kind = TDM_EVENT_FINISHED};
  tdm_experiment_observe(&first, e);
  tdm_experiment_observe(&a, e);
  tdm_experiment_observe(&b, e);
  tdm_experiment_observe(&finished, e);
  g_assert_true(tdm_experiment_reduce(e, NULL, 0, &error));
  int count = 0;
  const TdmStrategyFigures *runs = tdm_experiment_get_strategies(e, &count);
  g_assert_cmpint(count, ==, 1);
  g_assert_cmpint(runs[0].samples, ==, 2);
  g_assert_cmpfloat(runs[0].step_ms, ==, 12);          /* (10 + 14) / 2 */
  g_assert_cmpfloat(runs[0].exposed_ms[1], ==, 3);     /* (2 + 4) / 2 */
  g_assert_cmpfloat(runs[0].hidden_ms[0], ==, 2);      /* (1 + 3) / 2 */

  /* The second run sampled one step only: that one counts. */
  g_assert_nonnull(tdm_experiment_next(e));
  tdm_experiment_observe(&first, e);
  tdm_experiment_observe(&finished, e);
  g_assert_true(tdm_experiment_reduce(e, NULL, 0, &error));
  runs = tdm_experiment_get_strategies(e, &count);
  g_assert_cmpint(count, ==, 2);
  g_assert_cmpint(runs[1].samples, ==, 1);
  g_assert_cmpfloat(runs[1].step_ms, ==, 100);
  g_assert_null(tdm_experiment_next(e));
  g_assert_true(tdm_experiment_is_complete(e));
}

/* A training stopped before its end, or failed, ends the experiment with that. */
static void
test_stopped_or_failed(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2");
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) stopped = tdm_experiment_new_strategies(cfg, 30, &error);
  g_assert_nonnull(tdm_experiment_next(stopped));
  TdmEvent finished = {.kind = TDM_EVENT_FINISHED, .finished.stopped = TRUE};
  tdm_experiment_observe(&finished, stopped);
  g_assert_false(tdm_experiment_reduce(stopped, NULL, 0, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED);
  g_clear_error(&error);
  g_assert_null(tdm_experiment_next(stopped));
  g_assert_false(tdm_experiment_is_complete(stopped));
  g_assert_null(tdm_experiment_dup_result(stopped));

  g_autoptr(TdmExperiment) failed = tdm_experiment_new_compare(cfg, 30, &error);
  g_assert_nonnull(tdm_experiment_next(failed));
  g_autoptr(GError) why = g_error_new_literal(TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                                              "no such dataset");
  TdmEvent failure = {.kind = TDM_EVENT_FAILED, .failed = why};
  tdm_experiment_observe(&failure, failed);
  g_assert_false(tdm_experiment_reduce(failed, NULL, 0, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET);
  g_assert_cmpstr(error->message, ==, "no such dataset");
  g_assert_null(tdm_experiment_next(failed));
}

static void
test_cancelled(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu:2");
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) e = tdm_experiment_new_compare(cfg, 30, &error);
  g_autoptr(GCancellable) cancellable = g_cancellable_new();
  Seen seen = {0};
  g_cancellable_cancel(cancellable);
  g_assert_false(tdm_experiment_run(e, count_events, &seen, cancellable, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED);
  g_assert_cmpint(seen.finished, <=, 1);
  g_assert_null(tdm_experiment_next(e));
  g_assert_false(tdm_experiment_is_complete(e));
}

/* A comparison needs two devices; a scaling sweep takes one configuration. */
static void
test_one_device(void)
{
  g_autoptr(TdmConfig) cfg = config("cpu");
  g_autoptr(GError) error = NULL;
  g_assert_null(tdm_experiment_new_compare(cfg, 10, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
  g_assert_nonnull(strstr(error->message, "two devices"));
  g_clear_error(&error);
  g_assert_null(tdm_experiment_new_strategies(cfg, 10, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
  g_clear_error(&error);
  g_autoptr(TdmConfig) two = config("cpu:2");
  two->batch = 0;
  g_assert_null(tdm_experiment_new_scaling(two, TDM_SCALING_STRONG, 10, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/experiment/compare-trainings", test_compare_trainings);
  g_test_add_func("/experiment/compare-run", test_compare_run);
  g_test_add_func("/experiment/strategies-run", test_strategies_run);
  g_test_add_func("/experiment/strategies-means", test_strategies_means);
  g_test_add_func("/experiment/stopped-or-failed", test_stopped_or_failed);
  g_test_add_func("/experiment/cancelled", test_cancelled);
  g_test_add_func("/experiment/one-device", test_one_device);
  dataset = test_synthetic_idx_new(0, 3000, 500);
  int status = g_test_run();
  test_remove_synthetic_idx(dataset);
  return status;
}
