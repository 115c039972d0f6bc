/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window.c: Tandem's main window: the form on the left, the session's pages on
 * the right, the run's life cycle between them; errors in a bar, notices as toasts.
 *
 * Why it is laid out so, and which partial file holds what: docs/ARCHITECTURE.md,
 * "The window".
 */

#include <math.h>
#include <glib/gi18n.h>

#include "tdm-build-config.h"

#include "tdm-classify-view.h"
#include "tdm-config.h"
#include "tdm-dashboard.h"
#include "tdm-devices-page.h"
#include "tdm-error.h"
#include "tdm-format.h"
#include "tdm-onnx-export.h"
#include "tdm-popover-tooltips.h"
#include "tdm-predictions-page.h"
#include "tdm-preferences-window.h"
#include "tdm-run.h"
#include "tdm-run-form.h"
#include "tdm-run-export-info.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling-page.h"
#include "tdm-window.h"
#include "tdm-window-private.h"


enum {
  PROP_0,
  PROP_RUNNING,
  PROP_CAN_START,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmWindow, tdm_window, ADW_TYPE_APPLICATION_WINDOW)


/* Errors ------------------------------------------------------------------ */

static const char *
headline_for_error (const GError *error)
{
  if (error->domain != TDM_ENGINE_ERROR)
    return _("Something went wrong.");

  switch ((TdmEngineError) error->code)
    {
    case TDM_ENGINE_ERROR_INVALID_OPTION:
      return _("One of the settings cannot work.");
    case TDM_ENGINE_ERROR_INVALID_SPEC:
      return _("The network does not fit the dataset.");
    case TDM_ENGINE_ERROR_DATASET:
      return _("The dataset could not be read.");
    case TDM_ENGINE_ERROR_DEVICE:
      return _("A device could not be used.");
    case TDM_ENGINE_ERROR_OUT_OF_MEMORY:
      return _("A device ran out of memory. Try a smaller batch or a smaller network.");
    case TDM_ENGINE_ERROR_BACKEND:
      return _("A computation failed on a device.");
    case TDM_ENGINE_ERROR_COMMUNICATION:
      return _("The devices could not exchange their gradients.");
    case TDM_ENGINE_ERROR_CHECKPOINT:
      return _("The checkpoint could not be saved or read.");
    case TDM_ENGINE_ERROR_DIVERGED:
      return _("Training diverged: the loss is no longer a number. Try a smaller learning rate.");
    case TDM_ENGINE_ERROR_CANCELLED:
      return _("Training was stopped.");
    default:
      return _("Training failed.");
    }
}

void
tdm_window_show_error (TdmWindow  *self,
                       const char *headline,
                       const char *detail)
{
  g_autofree char *markup = NULL;
  g_autofree char *sentence = tdm_format_sentence (detail);

  /* The engine's messages are written for a terminal; here they read as sentences. */
  if (detail != NULL && detail[0] != '\0')
    markup = g_markup_printf_escaped ("<b>%s</b>\n%s", headline, sentence);
  else
    markup = g_markup_printf_escaped ("<b>%s</b>", headline);

  gtk_label_set_markup (self->error_label, markup);
  gtk_revealer_set_reveal_child (self->error_revealer, TRUE);
}

static void
tdm_window_show_gerror (TdmWindow    *self,
                        const GError *error)
{
  tdm_window_show_error (self, headline_for_error (error), error->message);
}

static void
tdm_window_dismiss_error (GtkWidget  *widget,
                          const char *action_name,
                          GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);

  gtk_revealer_set_reveal_child (self->error_revealer, FALSE);
}

/* Devices ----------------------------------------------------------------- */

void
tdm_window_set_devices (TdmWindow *self,
                        GArray    *devices)
{
  g_return_if_fail (TDM_IS_WINDOW (self));
  g_return_if_fail (devices != NULL);

  tdm_run_form_set_devices (self->sidebar, devices);
}

/* State ------------------------------------------------------------------- */

static void
tdm_window_set_subtitle (TdmWindow  *self,
                         const char *text)
{
  adw_view_switcher_title_set_subtitle (self->window_title, text ? text : "");
}

void
tdm_window_toast (TdmWindow  *self,
                  const char *text)
{
  g_return_if_fail (TDM_IS_WINDOW (self));
  g_return_if_fail (text != NULL);

  adw_toast_overlay_add_toast (self->toast_overlay, adw_toast_new (text));
}

/* Locking the form: greying it out restyles and repaints every control in it, 4 ms
 * of a frame on a slow CPU, and the frame after Start already repaints the header,
 * the status line and the charts' first points (bench/NOTES.md, "Stall at Start").
 * So the form stops taking input at once (nothing in it can be clicked) and turns
 * grey in the next frame, after the one that shows the run starting. */
static void
tdm_window_cancel_lock (TdmWindow *self)
{
  if (self->lock_handler != 0)
    g_signal_handler_disconnect (self->lock_clock, self->lock_handler);
  self->lock_handler = 0;
  g_clear_object (&self->lock_clock);
  g_clear_handle_id (&self->lock_timeout, g_source_remove);
}

static void
tdm_window_grey_form (TdmWindow *self)
{
  tdm_window_cancel_lock (self);
  gtk_widget_set_sensitive (GTK_WIDGET (self->sidebar), FALSE);
}

static void
tdm_window_grey_form_after_paint (GdkFrameClock *clock,
                                  TdmWindow     *self)
{
  tdm_window_grey_form (self);
}

static gboolean
tdm_window_grey_form_late (gpointer data)
{
  TdmWindow *self = data;

  self->lock_timeout = 0;
  tdm_window_grey_form (self);
  return G_SOURCE_REMOVE;
}

static void
tdm_window_lock_form (TdmWindow *self,
                      gboolean   locked)
{
  GtkWidget *form = GTK_WIDGET (self->sidebar);
  GdkFrameClock *clock;

  clock = gtk_widget_get_mapped (GTK_WIDGET (self)) ? gtk_widget_get_frame_clock (GTK_WIDGET (self))
                                                    : NULL;
  gtk_widget_set_can_target (form, !locked);
  if (!locked)
    {
      tdm_window_cancel_lock (self);
      if (!gtk_widget_get_sensitive (form))
        self->unlock_frame = clock != NULL ? gdk_frame_clock_get_frame_counter (clock) : -1;
      gtk_widget_set_sensitive (form, TRUE);
      return;
    }
  if (!gtk_widget_get_sensitive (form) || self->lock_handler != 0)
    return;

  /* Greyed at once where it would otherwise flash: unmapped, or ungreyed since the
   * last frame (one run of a comparison ending and the next starting). */
  if (clock == NULL || gdk_frame_clock_get_frame_counter (clock) == self->unlock_frame)
    {
      gtk_widget_set_sensitive (form, FALSE);
      return;
    }
  /* Keys typed into the form meanwhile would change it under the run. */
  if (gtk_widget_get_focus_child (form) != NULL)
    gtk_widget_grab_focus (GTK_WIDGET (self->stop_button));
  self->lock_clock = g_object_ref (clock);
  self->lock_handler = g_signal_connect (clock, "after-paint",
                                         G_CALLBACK (tdm_window_grey_form_after_paint), self);
  self->lock_timeout = g_timeout_add (100, tdm_window_grey_form_late, self);
  gdk_frame_clock_request_phase (clock, GDK_FRAME_CLOCK_PHASE_PAINT);
}

void
tdm_window_update_state (TdmWindow *self)
{
  gboolean running = self->run != NULL;
  gboolean stopping = running && tdm_run_is_stopping (self->run);
  gboolean paused = running && tdm_run_get_paused (self->run);
  gboolean scaling = tdm_window_get_scaling (self);
  gboolean can_start = !running && !scaling && tdm_run_form_get_ready (self->sidebar);

  /* A Start while the last run stops is taken, and waits for it (tdm_window_start). */
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.start",
                                 can_start || (stopping && tdm_run_form_get_ready (self->sidebar)));
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.compare-one-device", can_start);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.compare-strategies", can_start);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.pause", running && !stopping);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.stop", running && !stopping);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.open-folder", !running && !scaling);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.single-step", running && !stopping);
  /* A scaling run and a training run would measure each other: one at a time. */
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.scaling-run",
                                 !running && !scaling && tdm_run_form_get_ready (self->sidebar));
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.scaling-cancel", scaling);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.scaling-export",
                                 tdm_scaling_chart_get_n_points (TDM_SCALING_CHART (tdm_scaling_page_get_chart (self->scaling_page))) > 0);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.export",
                                 tdm_metrics_log_get_n_rows (tdm_session_get_log (self->session)) > 0);

  /* Nothing on the left can change a run in flight. */
  tdm_window_lock_form (self, running || scaling);

  gtk_button_set_icon_name (self->pause_button,
                            paused ? "media-playback-start-symbolic"
                                   : "media-playback-pause-symbolic");
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->pause_button),
                               paused ? _("Resume (Ctrl+P)") : _("Pause (Ctrl+P)"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->pause_button),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  paused ? _("Resume training") : _("Pause training"),
                                  -1);

  tdm_dashboard_set_can_start (self->dashboard, can_start);
  if (!can_start && !running && !scaling)
    {
      g_autofree char *problem = tdm_run_form_dup_problem (self->sidebar);

      if (tdm_run_form_get_loading (self->sidebar) && problem != NULL)
        tdm_dashboard_set_waiting (self->dashboard, problem);
      else
        tdm_dashboard_set_problem (self->dashboard, problem);
    }

  if (running)
    tdm_window_set_subtitle (self, stopping ? _("Stopping…")
                                            : paused ? _("Paused") : _("Training"));

  if (can_start != self->can_start)
    {
      self->can_start = can_start;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CAN_START]);
    }
}

/* Runs -------------------------------------------------------------------- */


/* Classifying ------------------------------------------------------------------ */

TdmClassifyView *
tdm_window_get_classify_view (TdmWindow *self)
{
  if (self->classify_window == NULL)
    self->classify_window = tdm_classify_view_window_new (GTK_WINDOW (self),
                                                          &self->classify_view);
  return self->classify_view;
}

/* "Export Network as ONNX…" in the main menu; greyed out in a build without
 * protobuf-c, saying why in its label (GTK 4.8's menus show no tooltips) and in a
 * "tooltip" attribute for the GTKs whose menus read one. */
static void
tdm_window_offer_onnx (TdmWindow *self)
{
  GMenuModel *menu = gtk_menu_button_get_menu_model (self->primary_menu_button);
  GMenuModel *section = g_menu_model_get_item_link (menu, 0, G_MENU_LINK_SECTION);
  g_autoptr(GMenuItem) item = g_menu_item_new (_("Export _Network as ONNX…"), "win.export-onnx");

  if (!tdm_onnx_export_available ())
    {
      g_menu_item_set_label (item, _("Export Network as ONNX (not in this build)"));
      g_menu_item_set_attribute (item, "tooltip", "s",
                                 _("This Tandem was built without ONNX export (protobuf-c)"));
      gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.export-onnx", FALSE);
    }
  if (G_IS_MENU (section))
    g_menu_append_item (G_MENU (section), item);
  g_clear_object (&section);
}

/* After a run the network it saved answers dropped images. */
static void
tdm_window_classify_with_last_run (TdmWindow *self)
{
  g_autofree char *path = self->last_weights != NULL ? g_strdup (self->last_weights)
                                                     : tdm_window_get_run_checkpoint (self);

  if (path != NULL && g_file_test (path, G_FILE_TEST_IS_REGULAR))
    tdm_classify_view_set_checkpoint (tdm_window_get_classify_view (self), path);
}

static void
tdm_window_classify (GtkWidget  *widget,
                     const char *action_name,
                     GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  TdmClassifyView *view = tdm_window_get_classify_view (self);

  if (tdm_classify_view_get_checkpoint (view) == NULL)
    tdm_window_classify_with_last_run (self);
  gtk_window_present (self->classify_window);
}

static void
tdm_window_preferences (GtkWidget  *widget,
                        const char *action_name,
                        GVariant   *parameter)
{
  gtk_window_present (GTK_WINDOW (tdm_preferences_window_new (GTK_WINDOW (widget))));
}

/* A toast that says a file the run writes beside its training is not written:
 * `format` holds one %s, for the sentence that says why. */
static void
tdm_window_toast_why (TdmWindow    *self,
                      const char   *format,
                      const GError *error)
{
  g_autofree char *sentence = tdm_format_sentence (error->message);
  g_autofree char *text = g_strdup_printf (format, sentence);

  tdm_window_toast (self, text);
}

static gboolean
tdm_window_drop_files (GtkDropTarget *target,
                       const GValue  *value,
                       double         x,
                       double         y,
                       TdmWindow     *self)
{
  if (!G_VALUE_HOLDS (value, GDK_TYPE_FILE_LIST))
    return FALSE;
  tdm_window_classify (GTK_WIDGET (self), "win.classify", NULL);
  tdm_classify_view_add_files (self->classify_view, g_value_get_boxed (value));
  return TRUE;
}

static void
tdm_window_run_event (TdmWindow      *self,
                      const TdmEvent *event,
                      TdmRun         *run)
{
  if (run != self->run)
    return;

  tdm_session_set_dataset (self->session, tdm_run_get_dataset (run));
  tdm_session_handle_event (self->session, event);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.export",
                                 tdm_metrics_log_get_n_rows (tdm_session_get_log (self->session)) > 0);

  switch (event->kind)
    {
    case TDM_EVENT_FAILED:
      if (event->failed != NULL)
        tdm_window_show_gerror (self, event->failed);
      else
        tdm_window_show_error (self, _("Training failed."), NULL);
      self->run_failed = TRUE;
      break;

    case TDM_EVENT_FINISHED:
      self->run_stopped = event->finished.stopped;
      self->run_steps = event->finished.steps - self->run_start_step;
      break;

    case TDM_EVENT_STARTED:
      self->run_start_step = event->started.start_step;
      tdm_window_update_state (self);
      break;

    case TDM_EVENT_PAUSED:
    case TDM_EVENT_RESUMED:
      tdm_window_update_state (self);
      break;

    case TDM_EVENT_MEMORY:
    case TDM_EVENT_STEP:
    case TDM_EVENT_DEVICES:
    case TDM_EVENT_EPOCH:
    case TDM_EVENT_PHASES:
    case TDM_EVENT_BATCH:
    case TDM_EVENT_PREDICTIONS:
    default:
      break;
    }
}

static void tdm_window_start (GtkWidget  *widget,
                              const char *action_name,
                              GVariant   *parameter);

static void
tdm_window_run_done (TdmWindow    *self,
                     const GError *error,
                     TdmRun       *run)
{
  if (run != self->run)
    return;

  if (error != NULL && !self->run_failed)
    tdm_window_show_gerror (self, error);

  /* Made when the run started, so worth a word only if it was (then it was said). */
  if (tdm_run_get_tensorboard_folder (run) != NULL && tdm_run_get_tensorboard_error (run) != NULL)
    /* Translators: a toast; %s says why the file could not be written */
    tdm_window_toast_why (self, _("The run’s TensorBoard event file could not be written in full. %s"),
                          tdm_run_get_tensorboard_error (run));
  /* A run that took no step (stopped at once, failed before training, resumed at
   * its end) has nothing to show: it is not kept. */
  if (self->run_steps <= 0 && tdm_run_get_record_id (run) != NULL)
    tdm_history_delete (tdm_history_store_get_history (self->history),
                        tdm_run_get_record_id (run), NULL);
  else
    tdm_window_runs_done (self, run);
  if (self->classify_view != NULL && self->last_weights != NULL)
    tdm_classify_view_set_checkpoint (self->classify_view, self->last_weights);
  tdm_window_history_run_done (self, run, self->run_steps > 0);
  g_clear_object (&self->run);
  tdm_session_end (self->session);

  if (error != NULL || self->run_failed)
    {
      tdm_window_set_subtitle (self, _("Failed"));
      tdm_dashboard_set_status (self->dashboard, _("Training failed: see the message above."));
    }
  else if (self->run_stopped)
    tdm_window_set_subtitle (self, _("Stopped"));
  else
    tdm_window_set_subtitle (self, _("Finished"));

  tdm_window_update_state (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_RUNNING]);

  /* A Start pressed while this one stopped, now. (The next run of a comparison starts
   * after this, from its runner's own handler of "done".) */
  if (self->start_queued)
    {
      self->start_queued = FALSE;
      if (self->run == NULL && tdm_run_form_get_ready (self->sidebar))
        tdm_window_start (GTK_WIDGET (self), "win.start", NULL);
    }
}

static void
tdm_window_start (GtkWidget  *widget,
                  const char *action_name,
                  GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  g_autoptr(TdmConfig) config = NULL;
  g_autoptr(GError) error = NULL;

  if (self->run != NULL)
    {
      /* Never dropped without a word: it starts once the last run has ended. */
      if (tdm_run_is_stopping (self->run) && !self->start_queued)
        {
          self->start_queued = TRUE;
          tdm_window_toast (self, _("Training starts as soon as the last run has stopped."));
        }
      return;
    }

  config = tdm_run_form_build_config (self->sidebar, &error);
  if (config == NULL)
    {
      tdm_window_show_error (self, _("Training cannot start."), error->message);
      return;
    }
  config->max_steps = self->max_steps;
  /* The last run's split, timeline and peaks are not this one's. */
  tdm_devices_page_clear (self->devices_page);

  tdm_window_launch (self, config, NULL, NULL, NULL);
}

/* Starts `config` as the window's run, recorded in the history under `record_name`
 * (NULL: its date). */
gboolean
tdm_window_launch (TdmWindow           *self,
                   const TdmConfig     *config,
                   const char          *record_name,
                   TdmExperimentRunner *runner,
                   const char          *resume_path)
{
  g_autoptr(TdmRun) run = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) record_error = NULL;
  g_autoptr(TdmConfig) kept = tdm_config_copy (config);
  TdmRunRecorder *recorder;

  /* A run the history cannot keep still trains; the toast says it is not kept. Its
   * network goes beside its entry, where no other run writes. */
  recorder = tdm_history_store_record (self->history, config, record_name, &record_error);
  if (recorder != NULL)
    {
      g_free (kept->save_path);
      kept->save_path = tdm_window_weights_path (self, tdm_run_recorder_get_id (recorder));
    }
  run = tdm_run_new (kept);
  if (runner != NULL)
    tdm_experiment_runner_prepare_run (runner, run);
  tdm_run_set_resume_path (run, resume_path);
  if (recorder != NULL)
    tdm_run_set_recorder (run, recorder);
  /* A folder named as the history names the run (its date and time by default). */
  if (g_settings_get_boolean (self->settings, "tensorboard"))
    {
      g_autofree char *folder = tdm_preferences_tensorboard_folder (self->settings);

      tdm_run_set_tensorboard (run, folder, record_name);
    }
  tdm_run_set_pace (run, gtk_spin_button_get_value (self->pace_spin));
  g_signal_connect_object (run, "event", G_CALLBACK (tdm_window_run_event), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (run, "done", G_CALLBACK (tdm_window_run_done), self,
                           G_CONNECT_SWAPPED);
  if (!tdm_run_start (run, &error))
    {
      tdm_window_show_error (self, _("Training cannot start."), error->message);
      /* Nothing ran: nothing to keep. */
      if (tdm_run_get_record_id (run) != NULL)
        tdm_history_delete (tdm_history_store_get_history (self->history),
                            tdm_run_get_record_id (run), NULL);
      return FALSE;
    }
  if (record_error != NULL)
    {
      g_autofree char *sentence = tdm_format_sentence (record_error->message);
      /* Translators: a toast; %s says why the run history could not be written */
      g_autofree char *text = g_strdup_printf (_("This run is not kept in the history. %s"),
                                               sentence);

      tdm_window_toast (self, text);
    }
  if (tdm_run_get_tensorboard_error (run) != NULL)
    /* Translators: a toast; %s says why the TensorBoard event file could not be made */
    tdm_window_toast_why (self, _("This run writes no TensorBoard event files. %s"),
                          tdm_run_get_tensorboard_error (run));

  tdm_session_set_export_info (self->session, tdm_run_export_info_new (config, NULL));
  gtk_revealer_set_reveal_child (self->error_revealer, FALSE);
  /* On a narrow window the settings cover the charts the user now wants to see. */
  if (adw_flap_get_folded (self->flap))
    adw_flap_set_reveal_flap (self->flap, FALSE);
  self->run = g_steal_pointer (&run);
  self->run_failed = FALSE;
  self->run_stopped = FALSE;
  self->run_start_step = 0;
  self->run_steps = -1;
  tdm_dashboard_set_status (self->dashboard, _("Loading the dataset and building the replicas…"));

  tdm_window_update_state (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_RUNNING]);
  return TRUE;
}

static void
tdm_window_pause (GtkWidget  *widget,
                  const char *action_name,
                  GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);

  if (self->run == NULL)
    return;

  tdm_run_set_paused (self->run, !tdm_run_get_paused (self->run));
  tdm_window_update_state (self);
}

static void
tdm_window_stop (GtkWidget  *widget,
                 const char *action_name,
                 GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);

  if (self->run == NULL)
    return;

  tdm_run_stop (self->run);
  tdm_window_update_state (self);
}

static void
tdm_window_toggle_sidebar (GtkWidget  *widget,
                           const char *action_name,
                           GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);

  adw_flap_set_reveal_flap (self->flap, !adw_flap_get_reveal_flap (self->flap));
}

/* GObject ----------------------------------------------------------------- */

static gboolean
tdm_window_close_request (GtkWindow *window)
{
  TdmWindow *self = TDM_WINDOW (window);
  int width, height;

  gtk_window_get_default_size (window, &width, &height);
  g_settings_delay (self->settings);
  g_settings_set_int (self->settings, "window-width", width);
  g_settings_set_int (self->settings, "window-height", height);
  g_settings_set_boolean (self->settings, "window-maximized", gtk_window_is_maximized (window));
  g_settings_apply (self->settings);

  /* A run still going is stopped when the window lets go of it (dispose). */
  return GTK_WINDOW_CLASS (tdm_window_parent_class)->close_request (window);
}

static void
tdm_window_dispose (GObject *object)
{
  TdmWindow *self = (TdmWindow *)object;

  /* Dropping the run cancels its trainer; its thread winds down on its own. */
  if (self->run != NULL)
    tdm_run_stop (self->run);
  g_clear_object (&self->run);
  g_clear_object (&self->session);

  tdm_window_chooser_done (self);
  tdm_window_cancel_lock (self);
  tdm_window_history_dispose (self);
  tdm_window_experiments_dispose (self);
  /* A toplevel is owned by GTK's list of windows: destroy it to let it go. */
  if (self->classify_window != NULL)
    gtk_window_destroy (self->classify_window);
  self->classify_window = NULL;
  self->classify_view = NULL;
  gtk_widget_dispose_template (GTK_WIDGET (self), TDM_TYPE_WINDOW);

  G_OBJECT_CLASS (tdm_window_parent_class)->dispose (object);
}

static void
tdm_window_finalize (GObject *object)
{
  TdmWindow *self = (TdmWindow *)object;

  g_clear_object (&self->settings);
  g_free (self->last_weights);
  tdm_window_experiments_finalize (self);

  G_OBJECT_CLASS (tdm_window_parent_class)->finalize (object);
}

static void
tdm_window_get_property (GObject    *object,
                         guint       prop_id,
                         GValue     *value,
                         GParamSpec *pspec)
{
  TdmWindow *self = TDM_WINDOW (object);

  switch (prop_id)
    {
    case PROP_RUNNING:
      g_value_set_boolean (value, tdm_window_get_running (self));
      break;

    case PROP_CAN_START:
      g_value_set_boolean (value, tdm_window_get_can_start (self));
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_window_class_init (TdmWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  GtkWindowClass *window_class = GTK_WINDOW_CLASS (klass);

  object_class->dispose = tdm_window_dispose;
  object_class->finalize = tdm_window_finalize;
  object_class->get_property = tdm_window_get_property;

  window_class->close_request = tdm_window_close_request;

  properties[PROP_RUNNING] =
    g_param_spec_boolean ("running", NULL, NULL, FALSE,
                          G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_CAN_START] =
    g_param_spec_boolean ("can-start", NULL, NULL, FALSE,
                          G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  g_type_ensure (TDM_TYPE_RUN_FORM);
  g_type_ensure (TDM_TYPE_DASHBOARD);
  g_type_ensure (TDM_TYPE_DEVICES_PAGE);
  g_type_ensure (TDM_TYPE_PREDICTIONS_PAGE);
  g_type_ensure (TDM_TYPE_SCALING_PAGE);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-window.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, sidebar_button);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, start_button);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, start_icon_button);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, primary_menu_button);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, start_label);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, pause_button);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, stop_button);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, window_title);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, flap);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, error_revealer);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, error_label);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, sidebar);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, view_stack);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, switcher_bar);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, dashboard);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, devices_page);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, predictions_page);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, scaling_page);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, history_slot);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, pace_revealer);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, pace_spin);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, pace_unit_label);
  gtk_widget_class_bind_template_child (widget_class, TdmWindow, step_button);

  gtk_widget_class_install_action (widget_class, "win.start", NULL, tdm_window_start);
  gtk_widget_class_install_action (widget_class, "win.pause", NULL, tdm_window_pause);
  gtk_widget_class_install_action (widget_class, "win.stop", NULL, tdm_window_stop);
  gtk_widget_class_install_action (widget_class, "win.open-folder", NULL, tdm_window_open_folder);
  gtk_widget_class_install_action (widget_class, "win.export", NULL, tdm_window_export);
  gtk_widget_class_install_action (widget_class, "win.export-chart", "s", tdm_window_export_chart);
  gtk_widget_class_install_action (widget_class, "win.export-onnx", NULL, tdm_window_export_onnx_chooser);
  gtk_widget_class_install_action (widget_class, "win.dismiss-error", NULL, tdm_window_dismiss_error);
  gtk_widget_class_install_action (widget_class, "win.toggle-sidebar", NULL, tdm_window_toggle_sidebar);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_F9, 0, "win.toggle-sidebar", NULL);
  gtk_widget_class_install_action (widget_class, "win.classify", NULL, tdm_window_classify);
  gtk_widget_class_install_action (widget_class, "win.preferences", NULL, tdm_window_preferences);
  gtk_widget_class_install_action (widget_class, "win.lr-find", NULL, tdm_window_lr_find);
  gtk_widget_class_install_action (widget_class, "win.compare-one-device", NULL,
                                   tdm_window_compare_one_device);
  gtk_widget_class_install_action (widget_class, "win.compare-strategies", NULL,
                                   tdm_window_compare_strategies);
  gtk_widget_class_install_action (widget_class, "win.single-step", NULL, tdm_window_single_step);
  gtk_widget_class_install_action (widget_class, "win.show-pace", NULL, tdm_window_show_pace);
  gtk_widget_class_install_action (widget_class, "win.presentation", NULL, tdm_window_toggle_presentation);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_F11, 0, "win.presentation", NULL);
  gtk_widget_class_install_action (widget_class, "win.leave-presentation", NULL, tdm_window_leave_presentation);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "win.leave-presentation", NULL);
  gtk_widget_class_install_action (widget_class, "win.scaling-run", NULL, tdm_window_scaling_run);
  gtk_widget_class_install_action (widget_class, "win.scaling-cancel", NULL, tdm_window_scaling_cancel);
  gtk_widget_class_install_action (widget_class, "win.scaling-export", "s", tdm_window_scaling_export);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_i, GDK_CONTROL_MASK, "win.classify", NULL);
  tdm_window_runs_class_init (widget_class);
  tdm_window_history_class_init (widget_class);
}

/* Our own icons (the Charts page's: Adwaita 43 has no chart icon) live in the
 * resources. GtkApplication adds their path to the display's icon theme at start-up;
 * a window made without it (the tests, the benchmarks) adds it here, once. */
static void
tdm_window_add_icons (void)
{
  static const char path[] = "/io/github/tandem/Tandem/icons";
  GdkDisplay *display = gdk_display_get_default ();
  GtkIconTheme *theme;
  g_auto (GStrv) paths = NULL;

  if (display == NULL)
    return;
  theme = gtk_icon_theme_get_for_display (display);
  paths = gtk_icon_theme_get_resource_path (theme);
  if (paths == NULL || !g_strv_contains ((const char *const *) paths, path))
    gtk_icon_theme_add_resource_path (theme, path);
}

static void
tdm_window_init (TdmWindow *self)
{
  tdm_window_add_icons ();
  gtk_widget_init_template (GTK_WIDGET (self));

  self->unlock_frame = -1;
  self->settings = g_settings_new (TDM_APP_ID);
  self->session = tdm_session_new ();
  tdm_dashboard_set_session (self->dashboard, self->session);
  tdm_devices_page_set_session (self->devices_page, self->session);
  tdm_predictions_page_set_session (self->predictions_page, self->session);

  tdm_window_history_init (self);
  tdm_window_experiments_init (self);
  tdm_window_runs_init (self);
  /* No tooltip over a drop-down's list just opened. */
  tdm_popover_tooltips_quiet (GTK_WIDGET (self));
  gtk_window_set_default_size (GTK_WINDOW (self),
                               g_settings_get_int (self->settings, "window-width"),
                               g_settings_get_int (self->settings, "window-height"));
  if (g_settings_get_boolean (self->settings, "window-maximized"))
    gtk_window_maximize (GTK_WINDOW (self));

  g_signal_connect_object (self->sidebar, "notify::ready",
                           G_CALLBACK (tdm_window_update_state), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->sidebar, "changed",
                           G_CALLBACK (tdm_window_settings_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->pace_spin, "value-changed",
                           G_CALLBACK (tdm_window_pace_changed), self,
                           G_CONNECT_SWAPPED);
  tdm_window_pace_changed (self);
  /* The switcher moves to the bottom when the header bar has no room for it. */
  g_object_bind_property (self->window_title, "title-visible",
                          self->switcher_bar, "reveal", G_BINDING_SYNC_CREATE);
  tdm_window_update_estimate (self);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.leave-presentation", FALSE);
  tdm_window_offer_onnx (self);

  /* Images dropped anywhere on the window are classified with the last network. */
  {
    GtkDropTarget *target = gtk_drop_target_new (GDK_TYPE_FILE_LIST, GDK_ACTION_COPY);

    /* Classify is in the main menu (Ctrl+I): the header bar keeps to what fits
     * 360 px. */
    g_signal_connect_object (target, "drop", G_CALLBACK (tdm_window_drop_files), self, 0);
    gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (target));
  }

  /* Ctrl+→ steps from wherever the focus is: a binding of the window's class comes
   * last, after a focused spin button or scrolled page has taken the key for itself.
   * Caught first instead; without a run the action is off and the key goes on. */
  {
    GtkEventController *keys = gtk_shortcut_controller_new ();

    gtk_event_controller_set_propagation_phase (keys, GTK_PHASE_CAPTURE);
    gtk_shortcut_controller_add_shortcut (GTK_SHORTCUT_CONTROLLER (keys),
                                          gtk_shortcut_new (gtk_keyval_trigger_new (GDK_KEY_Right, GDK_CONTROL_MASK),
                                                            gtk_named_action_new ("win.single-step")));
    gtk_widget_add_controller (GTK_WIDGET (self), keys);
  }

  tdm_window_update_state (self);
  tdm_window_set_subtitle (self, NULL);
}

TdmWindow *
tdm_window_new (TdmApplication *app)
{
  g_return_val_if_fail (app == NULL || TDM_IS_APPLICATION (app), NULL);

  return g_object_new (TDM_TYPE_WINDOW,
                       "application", app,
                       NULL);
}

gboolean
tdm_window_get_running (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);

  return self->run != NULL;
}

gboolean
tdm_window_get_can_start (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);

  return self->can_start;
}

void
tdm_window_set_max_steps (TdmWindow *self,
                          long       max_steps)
{
  g_return_if_fail (TDM_IS_WINDOW (self));
  g_return_if_fail (max_steps >= 0);

  self->max_steps = max_steps;
}
