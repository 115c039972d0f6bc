/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window-experiments.c: the window's experiments.
 *
 * Every run of several trainings the window starts is the engine's experiment
 * (tdm-experiment.h), made, started and owned here, driven by a TdmExperimentRunner
 * that keeps its record in the window's run history (the store's folder); the record
 * is read into the History page as the experiment ends, and the pages only show the
 * runner they are handed. One at a time, and never beside a training run, since each
 * measures the devices: "compare with one device" and "compare strategies", through
 * the window's own run path (tdm_window_launch: each training is the window's run,
 * drawn live, kept in the run history under the name the experiment gives it, stopped
 * by Stop), and the Scaling page's sweep (bare runs that only the page draws);
 * tandem-train compare, compare-strategies and scaling run the same experiments.
 * Beside them, the learning-rate tests (win.lr-find), each shown in a window of its
 * own and kept in the history the same way: a test measures no speed, so it may run
 * beside a training or another test. What is here besides is what each comparison
 * shows: its progress and result on the History page, the N-device curve kept drawn
 * under the one-device run, and the two strategies' mean steps one above the other on
 * the Devices page, each device with how much of its communication ran hidden under
 * its backward pass. Not the order of the runs (the experiment's), the timeline
 * (TdmTimeline draws what it is given) nor the history (TdmHistoryStore).
 */

#include <glib/gi18n.h>
#include <math.h>
#include <string.h>

#include "tdm-error.h"
#include "tdm-format.h"
#include "tdm-history-view.h"
#include "tdm-window-private.h"

static TdmExperimentKind
tdm_window_experiment_kind (TdmWindow *self)
{
  return tdm_experiment_get_kind (tdm_experiment_runner_get_experiment (self->experiment));
}

/* The experiment's progress or result, under its button on the History page. */
static void
tdm_window_experiment_say (TdmWindow  *self,
                           const char *text)
{
  TdmHistoryView *view = TDM_HISTORY_VIEW (self->history_view);

  if (tdm_window_experiment_kind (self) == TDM_EXPERIMENT_COMPARE)
    tdm_history_view_set_compare_result (view, text);
  else
    tdm_history_view_set_strategy_result (view, text);
}

/* The runner's launch function: the training as the window's run. */
static TdmRun *
tdm_window_launch_training (const TdmExperimentTraining *training,
                            TdmExperimentRunner         *runner,
                            gpointer                     data)
{
  TdmWindow *self = data;

  if (!tdm_window_launch (self, training->config, training->name, runner, NULL))
    return NULL;
  return g_object_ref (self->run);
}

static void
tdm_window_training_started (TdmWindow *self,
                             TdmRun    *run)
{
  TdmExperiment *experiment = tdm_experiment_runner_get_experiment (self->experiment);

  /* A sweep's progress is the Scaling page's. */
  if (tdm_window_experiment_kind (self) != TDM_EXPERIMENT_SCALING)
    tdm_window_experiment_say (self, tdm_experiment_get_training (experiment)->status);
}

static void
tdm_window_training_done (TdmWindow *self,
                          TdmRun    *run)
{
  TdmRunItem *item;

  /* The N-device curve stays on the charts, faint, under the one-device run. */
  if (tdm_window_experiment_kind (self) != TDM_EXPERIMENT_COMPARE ||
      tdm_run_get_record_id (run) == NULL)
    return;
  item = tdm_history_store_find (self->history, tdm_run_get_record_id (run));
  if (item != NULL && tdm_experiment_runner_get_n_done (self->experiment) == 1)
    tdm_run_item_set_overlay (item, TRUE);
}

/* One run of a strategy comparison as the timeline draws it: its lanes named as the
 * run's pages name its devices, each with its overlap under it. */
static gboolean
tdm_window_strategies_describe (TdmWindow      *self,
                                const char     *id,
                                TdmPhasesEvent *step,
                                TdmTimelineRun *run,
                                char          **texts)
{
  TdmRunItem *item = id != NULL ? tdm_history_store_find (self->history, id) : NULL;
  const TdmRunRecord *record;
  TdmStartedEvent started = { 0 };

  memset (run, 0, sizeof *run);
  if (item == NULL || !tdm_run_item_mean_step (item, step))
    return FALSE;
  record = tdm_run_item_get_record (item);
  /* Translators: a strategy comparison's title over one run's lanes on the Devices
   * timeline: the strategy and its mean time a step, e.g. "main · 4.25 ms a step" */
  texts[0] = g_strdup_printf (_("%s · %.2f ms a step"), tdm_strategy_name (record->config->strategy),
                              tdm_timeline_step_duration (step));
  run->step = step;
  run->title = texts[0];
  tdm_started_event_set_devices (&started, record->config->devices,
                                 MIN (record->config->replicas, TDM_MAX_REPLICAS));
  started.replicas = MIN (step->replicas, TDM_MAX_REPLICAS);
  for (int r = 0; r < started.replicas; r++)
    {
      double overlap = tdm_device_phases_overlap (&step->device[r]);
      g_autofree char *percent = isfinite (overlap) ? g_strdup_printf ("%.0f %%", overlap)
                                                    : g_strdup ("—");

      texts[1 + 2 * r] = tdm_format_replica (&started, r);
      texts[2 + 2 * r] = r == record->config->main_replica
                         /* Translators: under the main device's lane in a strategy
                          * comparison: its communication hidden under backward */
                         ? g_strdup_printf (_("main · %s hidden"), percent)
                         /* Translators: under a device's lane in a strategy comparison:
                          * its communication hidden under backward, e.g. "12 % hidden" */
                         : g_strdup_printf (_("%s hidden"), percent);
      run->lane_names[r] = texts[1 + 2 * r];
      run->lane_notes[r] = texts[2 + 2 * r];
    }
  return TRUE;
}

/* Both strategies' runs are in: the Devices page shows them side by side. */
static void
tdm_window_strategies_show (TdmWindow *self)
{
  TdmPhasesEvent steps[2];
  TdmTimelineRun runs[2];
  char *texts[2][1 + 2 * TDM_MAX_REPLICAS] = { { NULL } };
  gboolean shown = TRUE;

  for (int i = 0; i < 2; i++)
    shown = tdm_window_strategies_describe (self,
                                            tdm_experiment_runner_get_record_id (self->experiment, i),
                                            &steps[i], &runs[i], texts[i]) && shown;
  if (shown)
    {
      /* Translators: the result of "compare strategies"; the two runs' titles */
      g_autofree char *result = g_strdup_printf (_("%s; %s: see the Devices page"),
                                                 runs[0].title, runs[1].title);

      tdm_devices_page_set_comparison (self->devices_page, &runs[0], &runs[1],
                                       _("Above the line: the run with “main” (reduce onto the main device, update there, broadcast back). Below it: the run with “allreduce” (every device sums the gradients and updates its own copy). Each is its mean step from the run history, on the same time axis; under each device, how much of its communication ran hidden under its backward pass."));
      tdm_window_experiment_say (self, result);
      tdm_window_set_page (self, "devices");
    }
  else
    tdm_window_experiment_say (self, _("The two runs sampled no steps to compare."));
  for (int i = 0; i < 2; i++)
    for (guint k = 0; k < G_N_ELEMENTS (texts[i]); k++)
      g_free (texts[i][k]);
}

/* "Compare with one device" is over: its words, naming the network it measured. */
static void
tdm_window_compare_show (TdmWindow *self)
{
  TdmExperiment *experiment = tdm_experiment_runner_get_experiment (self->experiment);
  g_autofree char *text = tdm_experiment_dup_result (experiment);

  self->compare_difference = tdm_experiment_get_difference (experiment, NULL, NULL);
  g_free (self->compare_network);
  self->compare_network = g_strdup (tdm_experiment_get_config (experiment)->network);
  g_free (self->compare_result);
  /* Translators: a comparison's result and the network it measured: "mlp: 2 devices
   * against one, …" */
  self->compare_result = g_strdup_printf (_("%s: %s"), self->compare_network, text);
  tdm_window_experiment_say (self, self->compare_result);
  tdm_window_toast (self, self->compare_result);
}

/* The experiment's own record (its runs and result) joins its runs in the history. */
static void
tdm_window_experiment_keep (TdmWindow *self)
{
  const char *id = tdm_experiment_runner_get_history_id (self->experiment);
  g_autoptr(GError) error = NULL;

  if (id != NULL && !tdm_history_store_add_run (self->history, id, &error))
    {
      g_autofree char *sentence = tdm_format_sentence (error->message);

      tdm_window_toast (self, sentence);
    }
}

static void
tdm_window_experiment_finished (TdmWindow    *self,
                                const GError *error)
{
  TdmExperimentKind kind = tdm_window_experiment_kind (self);

  if (kind == TDM_EXPERIMENT_SCALING)
    {
      /* Its end is the Scaling page's to show; the History page lists it. */
      tdm_window_history_sweep_done (self, self->experiment, error);
      tdm_window_update_state (self);
      return;
    }
  tdm_window_experiment_keep (self);
  if (error == NULL && kind == TDM_EXPERIMENT_COMPARE)
    tdm_window_compare_show (self);
  else if (error == NULL)
    tdm_window_strategies_show (self);
  else if (g_error_matches (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION))
    {
      /* The runs went, but what they left cannot be compared: the engine says why. */
      g_autofree char *sentence = tdm_format_sentence (error->message);

      tdm_window_experiment_say (self, sentence);
    }
  else
    /* Stopped, or a run failed (its error is shown). */
    tdm_window_experiment_say (self, _("The comparison was stopped before its end."));
  tdm_window_update_state (self);
}

/* Starts `experiment` (taken) as the window's one experiment, its record kept in the
 * window's run history: a comparison's trainings through the window's run path, a
 * sweep's as bare runs. FALSE with the error when its first training could not
 * start (through the run path, tdm_window_launch has said why). */
static gboolean
tdm_window_start_experiment (TdmWindow      *self,
                             TdmExperiment  *experiment,
                             GError        **error)
{
  if (self->experiment != NULL)
    g_signal_handlers_disconnect_by_data (self->experiment, self);
  g_clear_object (&self->experiment);
  self->experiment = tdm_experiment_runner_new (experiment);
  /* A sweep measures speed with trainings the dashboard does not draw. */
  if (tdm_window_experiment_kind (self) != TDM_EXPERIMENT_SCALING)
    tdm_experiment_runner_set_launch (self->experiment, tdm_window_launch_training, self);
  tdm_experiment_runner_set_history (self->experiment,
                                     tdm_history_store_get_history (self->history));
  g_signal_connect_object (self->experiment, "training-started",
                           G_CALLBACK (tdm_window_training_started), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->experiment, "training-done",
                           G_CALLBACK (tdm_window_training_done), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->experiment, "finished",
                           G_CALLBACK (tdm_window_experiment_finished), self, G_CONNECT_SWAPPED);
  return tdm_experiment_runner_start (self->experiment, error);
}

/* Whether the window's experiment (a comparison or a sweep) is under way. */
static gboolean
tdm_window_get_experimenting (TdmWindow *self)
{
  return self->experiment != NULL && tdm_experiment_runner_get_running (self->experiment);
}

/* Starts the comparison of `kind` of the settings as they stand, showing `page`;
 * says why not when it cannot start. */
static void
tdm_window_compare (TdmWindow         *self,
                    TdmExperimentKind  kind,
                    const char        *page)
{
  g_autoptr(TdmConfig) config = NULL;
  g_autoptr(GError) error = NULL;
  TdmExperiment *experiment = NULL;
  int steps = tdm_history_view_get_compare_steps (TDM_HISTORY_VIEW (self->history_view));

  if (self->run != NULL || tdm_window_get_experimenting (self))
    return;
  config = tdm_run_form_build_config (self->sidebar, &error);
  if (config != NULL)
    experiment = kind == TDM_EXPERIMENT_COMPARE
                 ? tdm_experiment_new_compare (config, steps, &error)
                 : tdm_experiment_new_strategies (config, steps, &error);
  if (experiment == NULL)
    {
      tdm_window_show_error (self, _("The comparison cannot start."), error->message);
      return;
    }
  if (kind == TDM_EXPERIMENT_COMPARE)
    {
      self->compare_difference = NAN;
      /* Earlier overlays would only blur the two curves being compared. */
      for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->history)); i++)
        {
          g_autoptr(TdmRunItem) item = g_list_model_get_item (G_LIST_MODEL (self->history), i);

          tdm_run_item_set_overlay (item, FALSE);
        }
    }
  /* A training that cannot start has said why (tdm_window_launch). */
  if (tdm_window_start_experiment (self, experiment, NULL))
    tdm_window_set_page (self, page);
}

void
tdm_window_compare_one_device (GtkWidget  *widget,
                               const char *action_name,
                               GVariant   *parameter)
{
  /* The two curves are the point: show them. */
  tdm_window_compare (TDM_WINDOW (widget), TDM_EXPERIMENT_COMPARE, "charts");
}

void
tdm_window_compare_strategies (GtkWidget  *widget,
                               const char *action_name,
                               GVariant   *parameter)
{
  /* The timeline is the point: show it. */
  tdm_window_compare (TDM_WINDOW (widget), TDM_EXPERIMENT_STRATEGIES, "devices");
}

/* Scaling sweep ------------------------------------------------------------ */

/* win.scaling-run: the Scaling page's sweep of the settings as they stand. */
void
tdm_window_scaling_run (GtkWidget  *widget,
                        const char *action_name,
                        GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  g_autoptr(TdmConfig) config = NULL;
  g_autoptr(GError) error = NULL;
  TdmExperiment *experiment = NULL;

  /* A sweep and a training would measure each other: one at a time. */
  if (self->run != NULL || tdm_window_get_experimenting (self))
    return;

  config = tdm_run_form_build_config (self->sidebar, &error);
  /* A scaling run measures speed: it keeps no checkpoint. */
  if (config != NULL)
    {
      g_clear_pointer (&config->save_path, g_free);
      experiment = tdm_scaling_page_new_experiment (self->scaling_page, config, &error);
    }
  if (experiment == NULL || !tdm_window_start_experiment (self, experiment, &error))
    {
      tdm_window_show_error (self, _("The scaling run cannot start."), error->message);
      return;
    }
  tdm_scaling_page_show_runner (self->scaling_page, self->experiment);
  gtk_revealer_set_reveal_child (self->error_revealer, FALSE);
  tdm_window_set_page (self, "scaling");
  if (adw_flap_get_folded (self->flap))
    adw_flap_set_reveal_flap (self->flap, FALSE);
  tdm_window_update_state (self);
}

/* win.scaling-cancel: the sweep stops; the page says so until it ends. */
void
tdm_window_scaling_cancel (GtkWidget  *widget,
                           const char *action_name,
                           GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);

  if (tdm_window_get_scaling (self))
    tdm_scaling_page_cancel (self->scaling_page);
}

gboolean
tdm_window_get_scaling (TdmWindow *self)
{
  return tdm_window_get_experimenting (self) &&
         tdm_window_experiment_kind (self) == TDM_EXPERIMENT_SCALING;
}

/* Learning-rate tests -------------------------------------------------------- */

/* A test is over: the History page lists it (its own window says how it ended). */
static void
tdm_window_lr_find_finished (TdmExperimentRunner *runner,
                             const GError        *error,
                             TdmWindow           *self)
{
  tdm_window_history_lr_find_done (self, runner);
}

/* The suggestion, taken, becomes the form's rate through the setting the form is
 * bound to; the test's window closes. */
static void
tdm_window_use_rate (TdmWindow     *self,
                     double         rate,
                     TdmLrFindView *view)
{
  g_autofree char *text = g_strdup_printf (_("Learning rate set to %.3g"), rate);

  g_settings_set_double (self->settings, "learning-rate", rate);
  adw_toast_overlay_add_toast (self->toast_overlay, adw_toast_new (text));
  gtk_window_close (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (view))));
}

/* Starts the test `experiment` (taken) for the window, kept in its run history, shown
 * by `view` (closing the view's window stops it); FALSE with the error when it could
 * not start. */
static gboolean
tdm_window_start_lr_find (TdmWindow      *self,
                          TdmExperiment  *experiment,
                          TdmLrFindView  *view,
                          GError        **error)
{
  g_autoptr(TdmExperimentRunner) runner = tdm_experiment_runner_new (experiment);

  /* The tests that are over have been listed: let go of them. */
  for (guint i = self->lr_finds->len; i-- > 0;)
    if (!tdm_experiment_runner_get_running (g_ptr_array_index (self->lr_finds, i)))
      g_ptr_array_remove_index (self->lr_finds, i);
  tdm_experiment_runner_set_history (runner, tdm_history_store_get_history (self->history));
  g_signal_connect_object (runner, "finished", G_CALLBACK (tdm_window_lr_find_finished), self,
                           0);
  if (!tdm_experiment_runner_start (runner, error))
    {
      g_signal_handlers_disconnect_by_data (runner, self);
      return FALSE;
    }
  tdm_lr_find_view_show_runner (view, runner);
  g_signal_connect_object (view, "destroy", G_CALLBACK (tdm_experiment_runner_stop), runner,
                           G_CONNECT_SWAPPED);
  g_ptr_array_add (self->lr_finds, g_steal_pointer (&runner));
  return TRUE;
}

/* win.lr-find, "Find a Learning Rate…": the range test of the form's choices, in a
 * window of its own. */
void
tdm_window_lr_find (GtkWidget  *widget,
                    const char *action_name,
                    GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmConfig) config = tdm_run_form_build_config (self->sidebar, &error);
  TdmExperiment *experiment;
  TdmLrFindView *view;
  GtkWindow *window;

  if (config == NULL)
    {
      tdm_window_show_error (self, _("Cannot test learning rates"), error->message);
      return;
    }
  window = tdm_lr_find_view_window_new (GTK_WINDOW (self), &view);
  g_signal_connect_object (view, "use-rate", G_CALLBACK (tdm_window_use_rate), self,
                           G_CONNECT_SWAPPED);
  experiment = tdm_experiment_new_lr_find (config, NULL, &error);
  if (experiment == NULL || !tdm_window_start_lr_find (self, experiment, view, &error))
    tdm_lr_find_view_show_error (view, error->message);
  gtk_window_present (window);
}

/* The settings changed: a comparison of another network than the one chosen now is
 * not this one's result, and says so. */
void
tdm_window_experiments_settings_changed (TdmWindow *self)
{
  g_autoptr(TdmConfig) config = NULL;
  g_autofree char *text = NULL;

  if (self->compare_result == NULL || tdm_window_get_experimenting (self))
    return;
  config = tdm_run_form_build_config (self->sidebar, NULL);
  if (config != NULL && g_strcmp0 (config->network, self->compare_network) == 0)
    text = g_strdup (self->compare_result);
  else
    /* Translators: under "compare with one device" once another network is chosen;
     * %s is the last comparison's result, which names its network */
    text = g_strdup_printf (_("Not compared yet with the network chosen now. The last comparison, of another network: %s"),
                            self->compare_result);
  tdm_history_view_set_compare_result (TDM_HISTORY_VIEW (self->history_view), text);
}

gboolean
tdm_window_get_comparing (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);

  return tdm_window_get_experimenting (self) &&
         tdm_window_experiment_kind (self) == TDM_EXPERIMENT_COMPARE;
}

gboolean
tdm_window_get_comparing_strategies (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);

  return tdm_window_get_experimenting (self) &&
         tdm_window_experiment_kind (self) == TDM_EXPERIMENT_STRATEGIES;
}

double
tdm_window_get_compare_difference (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), NAN);

  return self->compare_difference;
}

void
tdm_window_experiments_init (TdmWindow *self)
{
  self->compare_difference = NAN;
  self->lr_finds = g_ptr_array_new_with_free_func (g_object_unref);
}

void
tdm_window_experiments_dispose (TdmWindow *self)
{
  /* Dropping a runner stops its training; its thread winds down by itself. */
  if (self->experiment != NULL)
    g_signal_handlers_disconnect_by_data (self->experiment, self);
  g_clear_object (&self->experiment);
  for (guint i = 0; self->lr_finds != NULL && i < self->lr_finds->len; i++)
    {
      TdmExperimentRunner *runner = g_ptr_array_index (self->lr_finds, i);

      g_signal_handlers_disconnect_by_data (runner, self);
      tdm_experiment_runner_stop (runner);
    }
  g_clear_pointer (&self->lr_finds, g_ptr_array_unref);
}

void
tdm_window_experiments_finalize (TdmWindow *self)
{
  g_clear_pointer (&self->compare_result, g_free);
  g_clear_pointer (&self->compare_network, g_free);
}
