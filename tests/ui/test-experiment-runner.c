/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-experiment-runner.c: TdmExperimentRunner, the window's driver of experiments,
 * without a display.
 *
 * On 2 CPU workers: "compare with one device" through bare runs (two trainings, each
 * started and done once, the twin bit for bit the same), through a launch function
 * (called for each training), stopped during its first training (cancelled, no
 * second), and dropped while a training runs (its thread ends by itself); a scaling
 * sweep's points come as signals and its record is kept with them; a comparison's
 * record names the runs a launch function kept. The main loop is
 * iterated until what a test waits for has happened; nothing is timed.
 */

#include <math.h>
#include <string.h>

#include "synthetic-idx.h"
#include "tdm-error.h"
#include "tdm-experiment-runner.h"

static char *dataset;

typedef struct
{
  int started, done, points, launched;
  gboolean finished;
  GError *error;
} Seen;

static void
on_started (TdmExperimentRunner *runner, TdmRun *run, Seen *seen)
{
  seen->started++;
}

static void
on_done (TdmExperimentRunner *runner, TdmRun *run, Seen *seen)
{
  seen->done++;
}

static void
on_point (TdmExperimentRunner *runner, const TdmScalingPoint *point, Seen *seen)
{
  g_assert_cmpint (point->devices, ==, seen->points + 1);
  seen->points++;
}

static void
on_finished (TdmExperimentRunner *runner, const GError *error, Seen *seen)
{
  g_assert_false (seen->finished);
  seen->finished = TRUE;
  seen->error = error != NULL ? g_error_copy (error) : NULL;
}

static void
watch (TdmExperimentRunner *runner, Seen *seen)
{
  g_signal_connect (runner, "training-started", G_CALLBACK (on_started), seen);
  g_signal_connect (runner, "training-done", G_CALLBACK (on_done), seen);
  g_signal_connect (runner, "point", G_CALLBACK (on_point), seen);
  g_signal_connect (runner, "finished", G_CALLBACK (on_finished), seen);
}

/* Iterates the main loop until *flag; a hang fails after `seconds` instead of
 * holding the suite. */
static void
wait_for (const gboolean *flag, guint seconds)
{
  gint64 end = g_get_monotonic_time () + seconds * G_USEC_PER_SEC;

  while (!*flag && g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, TRUE);
  g_assert_true (*flag);
}

static gboolean
no_threads (gpointer data)
{
  return tdm_run_get_n_threads () == 0;
}

static TdmConfig *
config (void)
{
  TdmConfig *cfg = tdm_config_new ();
  g_autoptr(GError) error = NULL;

  g_free (cfg->dataset);
  cfg->dataset = g_strdup (dataset);
  g_free (cfg->network);
  cfg->network = g_strdup ("fc16,relu,fc10");
  cfg->batch = 50;
  cfg->seed = 5;
  g_assert_true (tdm_config_set_devices (cfg, "cpu:2", &error));
  return cfg;
}

static void
test_compare (void)
{
  g_autoptr(TdmConfig) cfg = config ();
  g_autoptr(GError) error = NULL;
  TdmExperiment *experiment = tdm_experiment_new_compare (cfg, 12, &error);
  g_autoptr(TdmExperimentRunner) runner = tdm_experiment_runner_new (experiment);
  Seen seen = { 0 };
  size_t differing = 1;

  watch (runner, &seen);
  g_assert_true (tdm_experiment_runner_start (runner, &error));
  g_assert_no_error (error);
  g_assert_true (tdm_experiment_runner_get_running (runner));
  wait_for (&seen.finished, 120);
  g_assert_no_error (seen.error);
  g_assert_cmpint (seen.started, ==, 2);
  g_assert_cmpint (seen.done, ==, 2);
  g_assert_cmpint (tdm_experiment_runner_get_n_done (runner), ==, 2);
  g_assert_false (tdm_experiment_runner_get_running (runner));
  /* Bare runs are not recorded. */
  g_assert_null (tdm_experiment_runner_get_record_id (runner, 0));
  g_assert_true (tdm_experiment_is_complete (experiment));
  g_assert_cmpfloat (tdm_experiment_get_difference (experiment, &differing, NULL), ==, 0);
  g_assert_cmpuint (differing, ==, 0);
}

static TdmRun *
launch (const TdmExperimentTraining *training,
        TdmExperimentRunner         *runner,
        gpointer                     data)
{
  Seen *seen = data;
  g_autoptr(TdmRun) run = tdm_run_new (training->config);

  g_assert_cmpint (training->index, ==, seen->launched);
  seen->launched++;
  tdm_experiment_runner_prepare_run (runner, run);
  g_assert_true (tdm_run_start (run, NULL));
  return g_steal_pointer (&run);
}

/* A launch function makes each training's run; the experiment still observes it. */
static void
test_launch (void)
{
  g_autoptr(TdmConfig) cfg = config ();
  g_autoptr(GError) error = NULL;
  TdmExperiment *experiment = tdm_experiment_new_strategies (cfg, 20, &error);
  g_autoptr(TdmExperimentRunner) runner = tdm_experiment_runner_new (experiment);
  Seen seen = { 0 };
  int count = 0;

  watch (runner, &seen);
  tdm_experiment_runner_set_launch (runner, launch, &seen);
  g_assert_true (tdm_experiment_runner_start (runner, &error));
  wait_for (&seen.finished, 120);
  g_assert_no_error (seen.error);
  g_assert_cmpint (seen.launched, ==, 2);
  g_assert_cmpint (seen.started, ==, 2);
  tdm_experiment_get_strategies (experiment, &count);
  g_assert_cmpint (count, ==, 2);
}

/* Stopped during the first training: cancelled, and no second starts. */
static void
test_stop (void)
{
  g_autoptr(TdmConfig) cfg = config ();
  g_autoptr(GError) error = NULL;
  TdmExperiment *experiment = tdm_experiment_new_compare (cfg, 1000000, &error);
  g_autoptr(TdmExperimentRunner) runner = tdm_experiment_runner_new (experiment);
  Seen seen = { 0 };

  watch (runner, &seen);
  g_assert_true (tdm_experiment_runner_start (runner, &error));
  tdm_experiment_runner_stop (runner);
  wait_for (&seen.finished, 120);
  g_assert_error (seen.error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED);
  g_clear_error (&seen.error);
  g_assert_cmpint (seen.started, ==, 1);
  g_assert_cmpint (seen.done, ==, 0);
  g_assert_false (tdm_experiment_is_complete (experiment));
}

/* Dropped while a training runs: the training stops and its thread ends by itself,
 * still observing into the experiment, which outlives the runner until then. */
static void
test_drop (void)
{
  g_autoptr(TdmConfig) cfg = config ();
  g_autoptr(GError) error = NULL;
  TdmExperiment *experiment = tdm_experiment_new_compare (cfg, 1000000, &error);
  TdmExperimentRunner *runner = tdm_experiment_runner_new (experiment);
  gboolean ended = FALSE;

  g_assert_true (tdm_experiment_runner_start (runner, &error));
  g_assert_finalize_object (runner);
  while (!ended)
    {
      g_main_context_iteration (NULL, TRUE);
      ended = no_threads (NULL);
    }
  g_assert_cmpuint (tdm_run_get_n_threads (), ==, 0);
}

/* A sweep over 1 and 2 workers: a point a device count, in order, and its record
 * kept with both. */
static void
test_sweep (void)
{
  g_autoptr(TdmConfig) cfg = config ();
  g_autoptr(GError) error = NULL;
  g_autofree char *folder = g_dir_make_tmp ("tdm-runner-XXXXXX", &error);
  g_autoptr(TdmHistory) history = tdm_history_new (folder);
  TdmExperiment *experiment = tdm_experiment_new_scaling (cfg, TDM_SCALING_STRONG, 20, &error);
  g_autoptr(TdmExperimentRunner) runner = tdm_experiment_runner_new (experiment);
  g_autoptr(TdmRunRecord) record = NULL;
  Seen seen = { 0 };

  g_assert_no_error (error);
  watch (runner, &seen);
  tdm_experiment_runner_set_history (runner, history);
  g_assert_true (tdm_experiment_runner_start (runner, &error));
  wait_for (&seen.finished, 300);
  g_assert_no_error (seen.error);
  g_assert_cmpint (seen.points, ==, 2);
  g_assert_null (tdm_experiment_runner_get_history_error (runner));
  g_assert_nonnull (tdm_experiment_runner_get_history_id (runner));
  record = tdm_history_load (history, tdm_experiment_runner_get_history_id (runner), &error);
  g_assert_no_error (error);
  g_assert_true (tdm_run_record_is_sweep (record));
  g_assert_cmpuint (record->experiment.points->len, ==, 2);
  /* A sweep's measurements are not runs of their own. */
  g_assert_cmpuint (record->experiment.runs->len, ==, 0);
  g_assert_false (record->final.stopped);
  g_assert_true (tdm_history_delete (history, tdm_experiment_runner_get_history_id (runner), NULL));
  g_rmdir (folder);
}

static TdmHistory *launch_history;

/* The window's way: each training a run of its own in the history. */
static TdmRun *
launch_recorded (const TdmExperimentTraining *training,
                 TdmExperimentRunner         *runner,
                 gpointer                     data)
{
  g_autoptr(TdmRun) run = tdm_run_new (training->config);
  g_autoptr(GError) error = NULL;
  TdmRunRecorder *recorder = tdm_run_recorder_new (launch_history, training->config,
                                                   training->name, &error);

  g_assert_no_error (error);
  tdm_experiment_runner_prepare_run (runner, run);
  tdm_run_set_recorder (run, recorder);
  g_assert_true (tdm_run_start (run, NULL));
  return g_steal_pointer (&run);
}

/* A comparison kept in the history: a record of the experiment's own naming the two
 * runs the window kept, in the order they ran, and its result. */
static void
test_record (void)
{
  g_autoptr(TdmConfig) cfg = config ();
  g_autoptr(GError) error = NULL;
  g_autofree char *folder = g_dir_make_tmp ("tdm-runner-XXXXXX", &error);
  g_autoptr(TdmHistory) history = tdm_history_new (folder);
  TdmExperiment *experiment = tdm_experiment_new_compare (cfg, 12, &error);
  g_autoptr(TdmExperimentRunner) runner = tdm_experiment_runner_new (experiment);
  g_autoptr(TdmRunRecord) record = NULL;
  g_autofree char *result = NULL;
  Seen seen = { 0 };

  launch_history = history;
  watch (runner, &seen);
  tdm_experiment_runner_set_launch (runner, launch_recorded, NULL);
  tdm_experiment_runner_set_history (runner, history);
  g_assert_true (tdm_experiment_runner_start (runner, &error));
  wait_for (&seen.finished, 120);
  g_assert_no_error (seen.error);
  g_assert_nonnull (tdm_experiment_runner_get_history_id (runner));
  record = tdm_history_load (history, tdm_experiment_runner_get_history_id (runner), &error);
  g_assert_no_error (error);
  g_assert_cmpint (record->kind, ==, TDM_RUN_EXPERIMENT);
  g_assert_cmpint (record->experiment.kind, ==, TDM_EXPERIMENT_COMPARE);
  g_assert_cmpint (record->experiment.steps, ==, 12);
  g_assert_cmpuint (record->experiment.runs->len, ==, 2);
  for (int i = 0; i < 2; i++)
    {
      const char *id = tdm_experiment_runner_get_record_id (runner, i);
      g_autoptr(TdmRunRecord) run = NULL;

      g_assert_nonnull (id);
      g_assert_cmpstr (record->experiment.runs->pdata[i], ==, id);
      run = tdm_history_load (history, id, &error);
      g_assert_no_error (error);
      g_assert_cmpint (run->kind, ==, TDM_RUN_TRAINING);
      g_assert_true (tdm_history_delete (history, id, NULL));
    }
  result = tdm_experiment_dup_result (experiment);
  g_assert_cmpstr (record->experiment.result, ==, result);
  g_assert_true (tdm_history_delete (history, tdm_experiment_runner_get_history_id (runner), NULL));
  launch_history = NULL;
  g_rmdir (folder);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/experiment-runner/compare", test_compare);
  g_test_add_func ("/experiment-runner/launch", test_launch);
  g_test_add_func ("/experiment-runner/stop", test_stop);
  g_test_add_func ("/experiment-runner/drop", test_drop);
  g_test_add_func ("/experiment-runner/sweep", test_sweep);
  g_test_add_func ("/experiment-runner/record", test_record);
  dataset = test_synthetic_idx_new (0, 3000, 500);
  status = g_test_run ();
  test_remove_synthetic_idx (dataset);
  return status;
}
