/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window-strategies.c: the window's "compare strategies".
 *
 * Runs the current settings for a few steps with `main`, then with `allreduce`,
 * through the window's own run path (tdm_window_launch), both recorded in the run
 * history under names that say which is which. When both are in, the Devices page
 * shows their mean steps one above the other on one time axis, each titled with its
 * strategy and time a step, each device with how much of its communication ran
 * hidden under its backward pass. Not the timeline (TdmTimeline draws what it is
 * given) nor the history (TdmHistoryStore reads the runs).
 */

#include <glib/gi18n.h>
#include <math.h>
#include <string.h>

#include "tdm-format.h"
#include "tdm-history-view.h"
#include "tdm-window-private.h"

static const TdmStrategy compared_strategies[2] = { TDM_STRATEGY_MAIN, TDM_STRATEGY_ALLREDUCE };

static void
tdm_window_strategies_say (TdmWindow  *self,
                           const char *text)
{
  tdm_history_view_set_strategy_result (TDM_HISTORY_VIEW (self->history_view), text);
}

/* Starts the run of the stage (1: `main`, 2: `allreduce`); FALSE when it could not. */
static gboolean
tdm_window_strategies_launch (TdmWindow *self)
{
  g_autoptr(TdmConfig) config = tdm_config_copy (self->strategy_config);
  TdmStrategy strategy = compared_strategies[self->strategy_stage - 1];
  /* Translators: the name of a strategy comparison's run in the history; %s is the
   * strategy ("main", "allreduce") */
  g_autofree char *name = g_strdup_printf (_("Strategies: %s"), tdm_strategy_name (strategy));

  config->strategy = strategy;
  return tdm_window_launch (self, config, name, FALSE, NULL);
}

/* One run of the comparison as the timeline draws it: its lanes named as the run's
 * pages name its devices, each with its overlap under it. */
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

/* Both runs are in: the Devices page shows them side by side. */
static void
tdm_window_strategies_show (TdmWindow *self)
{
  TdmPhasesEvent steps[2];
  TdmTimelineRun runs[2];
  char *texts[2][1 + 2 * TDM_MAX_REPLICAS] = { { NULL } };
  gboolean shown = TRUE;

  for (int i = 0; i < 2; i++)
    shown = tdm_window_strategies_describe (self, self->strategy_ids[i], &steps[i], &runs[i],
                                            texts[i]) && shown;
  if (shown)
    {
      /* Translators: the result of "compare strategies"; the two runs' titles */
      g_autofree char *result = g_strdup_printf (_("%s; %s: see the Devices page"),
                                                 runs[0].title, runs[1].title);

      tdm_devices_page_set_comparison (self->devices_page, &runs[0], &runs[1],
                                       _("Above the line: the run with “main” (reduce onto the main device, update there, broadcast back). Below it: the run with “allreduce” (every device sums the gradients and updates its own copy). Each is its mean step from the run history, on the same time axis; under each device, how much of its communication ran hidden under its backward pass."));
      tdm_window_strategies_say (self, result);
      tdm_window_set_page (self, "devices");
    }
  else
    tdm_window_strategies_say (self, _("The two runs sampled no steps to compare."));
  for (int i = 0; i < 2; i++)
    for (guint k = 0; k < G_N_ELEMENTS (texts[i]); k++)
      g_free (texts[i][k]);
}

void
tdm_window_strategies_run_done (TdmWindow *self,
                                TdmRun    *run,
                                gboolean   completed)
{
  if (self->strategy_stage == 0)
    return;
  if (!completed)
    {
      self->strategy_stage = 0;
      tdm_window_strategies_say (self, _("The comparison was stopped before its end."));
      return;
    }
  g_free (self->strategy_ids[self->strategy_stage - 1]);
  self->strategy_ids[self->strategy_stage - 1] = g_strdup (tdm_run_get_record_id (run));
  if (self->strategy_stage == 1)
    {
      /* The next one starts once this one is over and shown (tdm_window_strategies_next). */
      self->strategy_stage = 2;
      self->strategy_next = TRUE;
      return;
    }
  self->strategy_stage = 0;
  tdm_window_strategies_show (self);
}

void
tdm_window_strategies_next (TdmWindow *self)
{
  if (!self->strategy_next || self->run != NULL)
    return;
  self->strategy_next = FALSE;
  tdm_window_strategies_say (self, _("Training with allreduce…"));
  if (!tdm_window_strategies_launch (self))
    self->strategy_stage = 0;
}

void
tdm_window_compare_strategies (GtkWidget  *widget,
                               const char *action_name,
                               GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  g_autoptr(TdmConfig) config = NULL;
  g_autoptr(GError) error = NULL;

  if (self->run != NULL || self->strategy_stage != 0 || self->compare_stage != 0)
    return;

  config = tdm_run_form_build_config (self->sidebar, &error);
  if (config == NULL)
    {
      tdm_window_show_error (self, _("The comparison cannot start."), error->message);
      return;
    }
  if (tdm_config_replica_count (config) < 2)
    {
      tdm_window_show_error (self, _("The comparison cannot start."),
                             _("compare strategies needs at least two devices (or CPU workers) ticked in the settings"));
      return;
    }
  /* A short run of each, measured as it is set (exact mode or not), keeping nothing. */
  config->max_steps = tdm_history_view_get_compare_steps (TDM_HISTORY_VIEW (self->history_view));
  g_clear_pointer (&config->save_path, g_free);
  g_clear_pointer (&self->strategy_config, tdm_config_free);
  self->strategy_config = g_steal_pointer (&config);
  for (int i = 0; i < 2; i++)
    g_clear_pointer (&self->strategy_ids[i], g_free);
  self->strategy_stage = 1;
  self->strategy_next = FALSE;
  tdm_window_strategies_say (self, _("Training with main…"));
  if (!tdm_window_strategies_launch (self))
    {
      self->strategy_stage = 0;
      return;
    }
  /* The timeline is the point: show it. */
  tdm_window_set_page (self, "devices");
}

gboolean
tdm_window_get_comparing_strategies (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);

  return self->strategy_stage != 0;
}

void
tdm_window_strategies_dispose (TdmWindow *self)
{
  self->strategy_stage = 0;
  self->strategy_next = FALSE;
}

void
tdm_window_strategies_finalize (TdmWindow *self)
{
  g_clear_pointer (&self->strategy_config, tdm_config_free);
  for (int i = 0; i < 2; i++)
    g_clear_pointer (&self->strategy_ids[i], g_free);
}
