/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window-history.c: the window's run history and "compare with one device".
 *
 * Every run the window starts is recorded (tdm_window_launch hands TdmRun a recorder
 * from the store); when it ends the run is read into the History page's list, and the
 * runs ticked there are drawn on the charts (and remembered in GSettings). "Compare
 * with one device" runs the current settings, then their one-device twin
 * (tdm_compare_one_device_config) with the same batch and seed, through the window's
 * own run path, keeps both runs' parameters and reports the engine's words for how far
 * apart they ended. Scaling runs are kept by the Scaling page in the same history, as
 * sweep records; when one ends it is read into the list too. Not the page itself
 * (TdmHistoryView) nor the list (TdmHistoryStore).
 */

#include <math.h>
#include <glib/gi18n.h>

#include "tdm-compare.h"
#include "tdm-format.h"
#include "tdm-history-view.h"
#include "tdm-window-private.h"

/* A ticked run that sampled steps goes under the current run on the Devices
 * timeline, so `main`'s reduce → update → broadcast is seen against an all-reduce:
 * the one chosen in its History menu ("Show under the Timeline"), else the first. */
static void
tdm_window_update_reference (TdmWindow *self)
{
  g_autofree char *chosen = g_settings_get_string (self->settings, "timeline-reference");
  TdmRunItem *preferred = chosen[0] != '\0' ? tdm_history_store_find (self->history, chosen)
                                            : NULL;
  TdmPhasesEvent step;

  if (preferred != NULL && !tdm_run_item_get_overlay (preferred))
    preferred = NULL;
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->history)); i++)
    {
      g_autoptr(TdmRunItem) item = g_list_model_get_item (G_LIST_MODEL (self->history), i);

      if (preferred != NULL && item != preferred)
        continue;
      if (tdm_run_item_get_overlay (item) && tdm_run_item_mean_step (item, &step))
        {
          const TdmRunRecord *r = tdm_run_item_get_record (item);
          /* Translators: a run named on the Devices page: its name and its strategy */
          g_autofree char *title = g_strdup_printf (_("%s, %s"), tdm_run_item_get_name (item),
                                                    tdm_strategy_name (r->config->strategy));

          tdm_devices_page_set_reference (self->devices_page, &step, title, r->config);
          return;
        }
    }
  tdm_devices_page_set_reference (self->devices_page, NULL, NULL, NULL);
}

/* "Show under the Timeline" in a run's History menu: it is ticked (drawn) and
 * becomes the timeline's reference. */
static void
tdm_window_timeline_reference (GtkWidget  *widget,
                               const char *action_name,
                               GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  const char *id = g_variant_get_string (parameter, NULL);
  TdmRunItem *item = tdm_history_store_find (self->history, id);
  TdmPhasesEvent step;

  if (item == NULL)
    return;
  if (!tdm_run_item_mean_step (item, &step))
    {
      /* Translators: a toast; %s is a run's name in the history */
      g_autofree char *text = g_strdup_printf (_("“%s” sampled no step to show on the timeline"),
                                               tdm_run_item_get_name (item));

      tdm_window_toast (self, text);
      return;
    }
  g_settings_set_string (self->settings, "timeline-reference", id);
  tdm_run_item_set_overlay (item, TRUE);
  tdm_window_update_reference (self);
}

void
tdm_window_history_class_init (GtkWidgetClass *widget_class)
{
  gtk_widget_class_install_action (widget_class, "win.timeline-reference", "s",
                                   tdm_window_timeline_reference);
}

static void
tdm_window_overlays_changed (TdmWindow *self)
{
  g_autoptr(GPtrArray) records = tdm_history_store_get_overlays (self->history);
  g_autoptr(GStrvBuilder) ids = g_strv_builder_new ();
  g_auto(GStrv) strv = NULL;

  tdm_dashboard_set_overlays (self->dashboard, records);
  tdm_window_update_reference (self);
  /* Remembered, so the same runs are drawn after a restart. */
  for (guint i = 0; i < records->len; i++)
    g_strv_builder_add (ids, ((const TdmRunRecord *) g_ptr_array_index (records, i))->id);
  strv = g_strv_builder_end (ids);
  g_settings_set_strv (self->settings, "overlay-runs", (const char *const *) strv);
}

/* Once the history is first read: the runs ticked when the window was last closed,
 * where they still exist; from then on the ticks are the person's. */
static void
tdm_window_restore_overlays (TdmWindow *self)
{
  g_auto(GStrv) ids = g_settings_get_strv (self->settings, "overlay-runs");
  g_autoptr(GPtrArray) records = NULL;

  g_signal_handlers_disconnect_by_func (self->history, tdm_window_restore_overlays, self);
  for (guint i = 0; ids[i] != NULL; i++)
    {
      TdmRunItem *item = tdm_history_store_find (self->history, ids[i]);

      if (item != NULL)
        tdm_run_item_set_overlay (item, TRUE);
    }
  records = tdm_history_store_get_overlays (self->history);
  tdm_dashboard_set_overlays (self->dashboard, records);
  tdm_window_update_reference (self);
  g_signal_connect_object (self->history, "overlays-changed",
                           G_CALLBACK (tdm_window_overlays_changed), self, G_CONNECT_SWAPPED);
}


/* A run is over: the history lists it (with what it recorded), and a comparison
 * takes the parameters it kept. */
void
tdm_window_history_run_done (TdmWindow *self,
                             TdmRun    *run,
                             gboolean   completed,
                             gboolean   trained)
{
  const GError *record_error = tdm_run_get_record_error (run);

  if (record_error != NULL)
    {
      g_autofree char *sentence = tdm_format_sentence (record_error->message);
      /* Translators: a toast; %s says why the run history could not be written */
      g_autofree char *text = g_strdup_printf (_("The run history could not be written in full. %s"),
                                               sentence);

      tdm_window_toast (self, text);
    }
  /* Only the new run is read: the others have not changed. */
  if (tdm_run_get_record_id (run) != NULL && trained)
    {
      g_autoptr(GError) error = NULL;

      if (!tdm_history_store_add_run (self->history, tdm_run_get_record_id (run), &error))
        {
          g_autofree char *sentence = tdm_format_sentence (error->message);

          tdm_window_toast (self, sentence);
        }
    }

  tdm_window_strategies_run_done (self, run, completed);
  if (self->compare_stage == 0)
    return;
  if (!completed)
    {
      self->compare_stage = 0;
      tdm_history_view_set_compare_result (TDM_HISTORY_VIEW (self->history_view),
                                           _("The comparison was stopped before its end."));
      return;
    }

  if (self->compare_stage == 1)
    {
      size_t count = 0;
      const float *parameters = tdm_run_get_parameters (run, &count);
      TdmRunItem *item = tdm_history_store_find (self->history, tdm_run_get_record_id (run));

      g_clear_pointer (&self->compare_parameters, g_free);
      self->compare_parameters = parameters != NULL ? g_memdup2 (parameters, count * sizeof (float))
                                                    : NULL;
      self->compare_count = count;
      /* The N-device curve stays on the charts, faint, under the one-device run. */
      if (item != NULL)
        tdm_run_item_set_overlay (item, TRUE);
      self->compare_stage = 2;
    }
  else if (self->compare_stage == 2)
    {
      size_t count = 0;
      const float *one = tdm_run_get_parameters (run, &count);
      g_autofree char *words = NULL;
      g_autofree char *text = NULL;
      int replicas = tdm_config_replica_count (self->compare_config);

      self->compare_stage = 0;
      if (one == NULL || self->compare_parameters == NULL || count != self->compare_count)
        {
          tdm_history_view_set_compare_result (TDM_HISTORY_VIEW (self->history_view),
                                               _("The two runs have no parameters to compare."));
          return;
        }
      self->compare_difference = tdm_compare_parameters (self->compare_parameters, one, count);
      words = tdm_compare_describe_values (self->compare_parameters, one, count);
      /* Translators: the result of "compare with one device"; %d devices against one
       * after %ld steps, then the engine's words, e.g. "largest difference 2.1 × 10⁻⁷:
       * the same up to rounding" */
      text = g_strdup_printf (ngettext ("%d device against one, after %ld steps: %s",
                                        "%d devices against one, after %ld steps: %s",
                                        replicas),
                              replicas, self->compare_config->max_steps, words);
      /* The result belongs to the network it measured, and says which. */
      g_free (self->compare_result);
      /* Translators: a comparison's result and the network it measured: "mlp: 2 devices
       * against one, …" */
      self->compare_result = g_strdup_printf (_("%s: %s"), self->compare_config->network, text);
      tdm_history_view_set_compare_result (TDM_HISTORY_VIEW (self->history_view),
                                           self->compare_result);
      tdm_window_toast (self, self->compare_result);
      g_clear_pointer (&self->compare_parameters, g_free);
    }
}

void
tdm_window_history_sweep_done (TdmWindow      *self,
                               const GError   *error,
                               TdmScalingPage *page)
{
  const GError *record_error = tdm_scaling_page_get_record_error (page);
  const char *id = tdm_scaling_page_get_record_id (page);
  g_autoptr(GError) load_error = NULL;
  TdmRunItem *item;

  if (record_error != NULL)
    {
      g_autofree char *sentence = tdm_format_sentence (record_error->message);
      /* Translators: a toast; %s says why the run history could not be written */
      g_autofree char *text = g_strdup_printf (_("The run history could not be written in full. %s"),
                                               sentence);

      tdm_window_toast (self, text);
    }
  if (id == NULL)
    return;
  if (!tdm_history_store_add_run (self->history, id, &load_error))
    {
      g_autofree char *sentence = tdm_format_sentence (load_error->message);

      tdm_window_toast (self, sentence);
      return;
    }
  item = tdm_history_store_find (self->history, id);
  if (error == NULL && item != NULL)
    {
      /* Translators: a toast after a scaling run; %s is its name in the run history */
      g_autofree char *text = g_strdup_printf (_("Scaling run kept in the history as “%s”"),
                                               tdm_run_item_get_name (item));

      tdm_window_toast (self, text);
    }
}

/* The settings changed: a comparison of another network than the one chosen now is
 * not this one's result, and says so. */
void
tdm_window_history_settings_changed (TdmWindow *self)
{
  g_autoptr(TdmConfig) config = NULL;
  g_autofree char *text = NULL;

  if (self->compare_result == NULL || self->compare_stage != 0)
    return;
  config = tdm_run_form_build_config (self->sidebar, NULL);
  if (config != NULL && g_strcmp0 (config->network, self->compare_config->network) == 0)
    text = g_strdup (self->compare_result);
  else
    /* Translators: under "compare with one device" once another network is chosen;
     * %s is the last comparison's result, which names its network */
    text = g_strdup_printf (_("Not compared yet with the network chosen now. The last comparison, of another network: %s"),
                            self->compare_result);
  tdm_history_view_set_compare_result (TDM_HISTORY_VIEW (self->history_view), text);
}

/* After the N-device run of a comparison: the same on the main device alone. */
void
tdm_window_compare_next (TdmWindow *self)
{
  g_autoptr(TdmConfig) one = NULL;

  if (self->compare_stage != 2 || self->run != NULL)
    return;

  one = tdm_compare_one_device_config (self->compare_config, self->compare_config->max_steps);
  tdm_history_view_set_compare_result (TDM_HISTORY_VIEW (self->history_view),
                                       _("Training on the main device alone…"));
  if (!tdm_window_launch (self, one, _("Compare: one device"), TRUE, NULL))
    self->compare_stage = 0;
}

void
tdm_window_compare_one_device (GtkWidget  *widget,
                               const char *action_name,
                               GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  g_autoptr(TdmConfig) config = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *name = NULL;
  int replicas;

  if (self->run != NULL)
    return;

  config = tdm_run_form_build_config (self->sidebar, &error);
  if (config == NULL)
    {
      tdm_window_show_error (self, _("The comparison cannot start."), error->message);
      return;
    }
  replicas = tdm_config_replica_count (config);
  if (replicas < 2)
    {
      tdm_window_show_error (self, _("The comparison cannot start."),
                             _("compare with one device needs at least two devices (or CPU workers) ticked in the settings"));
      return;
    }
  tdm_compare_prepare (config, tdm_history_view_get_compare_steps (TDM_HISTORY_VIEW (self->history_view)));

  g_clear_pointer (&self->compare_config, tdm_config_free);
  self->compare_config = tdm_config_copy (config);
  self->compare_difference = NAN;
  /* Earlier overlays would only blur the two curves being compared. */
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->history)); i++)
    {
      g_autoptr(TdmRunItem) item = g_list_model_get_item (G_LIST_MODEL (self->history), i);

      tdm_run_item_set_overlay (item, FALSE);
    }
  /* Translators: the name of a comparison's first run in the history; %d devices */
  name = g_strdup_printf (ngettext ("Compare: %d device", "Compare: %d devices", replicas),
                          replicas);
  self->compare_stage = 1;
  tdm_history_view_set_compare_result (TDM_HISTORY_VIEW (self->history_view),
                                       _("Training on every device…"));
  if (!tdm_window_launch (self, config, name, TRUE, NULL))
    {
      self->compare_stage = 0;
      return;
    }
  /* The two curves are the point: show them. */
  tdm_window_set_page (self, "charts");
}

TdmHistoryStore *
tdm_window_get_history (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), NULL);

  return self->history;
}

GtkWidget *
tdm_window_get_history_view (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), NULL);

  return self->history_view;
}

gboolean
tdm_window_get_comparing (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);

  return self->compare_stage != 0;
}

double
tdm_window_get_compare_difference (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), NAN);

  return self->compare_difference;
}


/* The History page: the runs, "compare with one device" and the comparison table
 * (TdmHistoryView over the window's TdmHistoryStore). */
static void
tdm_window_fill_history_slot (TdmWindow *self,
                              GtkBox    *slot)
{
  gtk_widget_set_vexpand (self->history_view, TRUE);
  gtk_box_append (slot, self->history_view);
}


void
tdm_window_history_init (TdmWindow *self)
{
  self->compare_difference = NAN;
  /* The history is read on a thread: a long one must not hold the window up. */
  self->history = tdm_history_store_new (NULL);
  self->history_view = tdm_history_view_new (self->history);
  /* Sweeps go where the training runs go. */
  tdm_scaling_page_set_history_folder (self->scaling_page,
                                       tdm_history_get_folder (tdm_history_store_get_history (self->history)));
  g_signal_connect_object (self->history, "loaded",
                           G_CALLBACK (tdm_window_restore_overlays), self, G_CONNECT_SWAPPED);
  tdm_history_store_reload_async (self->history);
  g_settings_bind (self->settings, "chart-x-axis", self->dashboard, "x-axis",
                   G_SETTINGS_BIND_DEFAULT);
  tdm_window_fill_history_slot (self, self->history_slot);
}

void
tdm_window_history_dispose (TdmWindow *self)
{
  self->compare_stage = 0;
  /* The page is the view stack's child; the store, ours. */
  self->history_view = NULL;
  if (self->history != NULL)
    g_signal_handlers_disconnect_by_data (self->history, self);
  g_clear_object (&self->history);
}

void
tdm_window_history_finalize (TdmWindow *self)
{
  g_clear_pointer (&self->compare_result, g_free);
  g_clear_pointer (&self->compare_config, tdm_config_free);
  g_clear_pointer (&self->compare_parameters, g_free);
}
