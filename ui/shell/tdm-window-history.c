/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window-history.c: the window's run history.
 *
 * Every run the window starts is recorded (tdm_window_launch hands TdmRun a recorder
 * from the store); when it ends the run is read into the History page's list, and the
 * runs ticked there are drawn on the charts (and remembered in GSettings). Scaling
 * runs and learning-rate tests are kept in the same history as experiment records
 * (the runner of tdm-window-experiments.c writes them); when one ends it is read into
 * the list too. Not the page itself
 * (TdmHistoryView), the list (TdmHistoryStore) nor the comparisons
 * (tdm-window-experiments.c).
 */

#include <math.h>
#include <glib/gi18n.h>

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


/* A run is over: the history lists it (with what it recorded). */
void
tdm_window_history_run_done (TdmWindow *self,
                             TdmRun    *run,
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
}

/* An experiment the window ran outside its run path is over: the History page lists
 * `runner`'s record (when it kept one), a toast says why the history could not be
 * written in full, or, once it completed, `kept` (a format of the record's name). */
static void
tdm_window_history_keep (TdmWindow           *self,
                         TdmExperimentRunner *runner,
                         gboolean             completed,
                         const char          *kept)
{
  const char *id = tdm_experiment_runner_get_history_id (runner);
  const GError *record_error = tdm_experiment_runner_get_history_error (runner);
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
  if (completed && item != NULL)
    {
      g_autofree char *text = g_strdup_printf (kept, tdm_run_item_get_name (item));

      tdm_window_toast (self, text);
    }
}

void
tdm_window_history_sweep_done (TdmWindow           *self,
                               TdmExperimentRunner *runner,
                               const GError        *error)
{
  tdm_window_history_keep (self, runner, error == NULL,
                           /* Translators: a toast after a scaling run; %s is its name in
                            * the run history */
                           _("Scaling run kept in the history as “%s”"));
}

void
tdm_window_history_lr_find_done (TdmWindow           *self,
                                 TdmExperimentRunner *runner)
{
  /* The finder's own window says its end: only a history that failed is told. */
  tdm_window_history_keep (self, runner, FALSE, NULL);
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
  /* The history is read on a thread: a long one must not hold the window up. */
  self->history = tdm_history_store_new (NULL);
  self->history_view = tdm_history_view_new (self->history);
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
  /* The page is the view stack's child; the store, ours. */
  self->history_view = NULL;
  if (self->history != NULL)
    g_signal_handlers_disconnect_by_data (self->history, self);
  g_clear_object (&self->history);
}
