/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window-runs.c: the runs a person keeps. Each run the window starts saves its
 * trained network beside its History entry (tdm_history_weights_path()), so the next
 * run never overwrites it; the kept networks stay under the size chosen on the
 * History page, the oldest going first (tdm_history_limit_weights()). Save (Ctrl+S)
 * copies the last network to a file of the person's choice; Open (Ctrl+O) resumes
 * a checkpoint where it stopped, optimizer state and epoch included, as
 * tandem-train --resume does; each History row resumes, classifies with or exports
 * its own run's network. Part of TdmWindow (tdm-window-private.h).
 */

#include <glib/gi18n.h>
#include <string.h>

#include "tdm-classify-view.h"
#include "tdm-devices-page.h"
#include "tdm-error.h"
#include "tdm-format.h"
#include "tdm-history-view.h"
#include "tdm-trainer.h"
#include "tdm-window-private.h"

static TdmHistory *
tdm_window_runs_history (TdmWindow *self)
{
  return tdm_history_store_get_history (self->history);
}

char *
tdm_window_weights_path (TdmWindow  *self,
                         const char *run_id)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), NULL);

  return run_id != NULL ? tdm_history_weights_path (tdm_window_runs_history (self), run_id)
                        : NULL;
}

/* The network of a run the history lists, or NULL with a toast saying why not. */
static char *
tdm_window_kept_weights (TdmWindow  *self,
                         const char *run_id)
{
  g_autofree char *path = tdm_window_weights_path (self, run_id);
  TdmRunItem *item = run_id != NULL ? tdm_history_store_find (self->history, run_id) : NULL;
  g_autofree char *text = NULL;

  if (path != NULL && g_file_test (path, G_FILE_TEST_IS_REGULAR))
    return g_steal_pointer (&path);
  /* Translators: a toast; %s is a run's name in the history */
  text = g_strdup_printf (_("“%s” has no trained network kept: it took no step, or older runs’ networks made room for newer ones (the limit is on the History page)"),
                          item != NULL ? tdm_run_item_get_name (item) : run_id);
  tdm_window_toast (self, text);
  return NULL;
}

/* Keeping ------------------------------------------------------------------- */

static void
tdm_window_limit_weights (TdmWindow  *self,
                          const char *keep)
{
  guint64 limit = (guint64) g_settings_get_int (self->settings, "kept-networks-limit") << 20;
  g_autoptr(GError) error = NULL;

  if (tdm_history_limit_weights (tdm_window_runs_history (self), limit, keep, &error) < 0)
    {
      g_autofree char *sentence = tdm_format_sentence (error->message);

      tdm_window_toast (self, sentence);
    }
  tdm_history_view_update_kept (TDM_HISTORY_VIEW (self->history_view));
}

void
tdm_window_runs_done (TdmWindow *self,
                      TdmRun    *run)
{
  g_autofree char *weights = tdm_window_weights_path (self, tdm_run_get_record_id (run));

  if (weights == NULL || !g_file_test (weights, G_FILE_TEST_IS_REGULAR))
    return;
  g_free (self->last_weights);
  self->last_weights = g_steal_pointer (&weights);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.save", TRUE);
  tdm_window_limit_weights (self, tdm_run_get_record_id (run));
}

char *
tdm_window_get_run_checkpoint (TdmWindow *self)
{
  g_autofree char *newest = NULL;
  g_autofree char *last = NULL;

  g_return_val_if_fail (TDM_IS_WINDOW (self), NULL);

  if (self->classify_view != NULL &&
      tdm_classify_view_get_checkpoint (self->classify_view) != NULL)
    return g_strdup (tdm_classify_view_get_checkpoint (self->classify_view));
  if (self->last_weights != NULL && g_file_test (self->last_weights, G_FILE_TEST_IS_REGULAR))
    return g_strdup (self->last_weights);
  /* A new window: the newest run kept, else what a Tandem before kept runs saved. */
  newest = tdm_history_newest_weights (tdm_window_runs_history (self));
  if (newest != NULL)
    return g_steal_pointer (&newest);
  last = tdm_run_last_network_path ();
  if (g_file_test (last, G_FILE_TEST_IS_REGULAR))
    return g_steal_pointer (&last);
  return NULL;
}

/* Save ---------------------------------------------------------------------- */

gboolean
tdm_window_save_network (TdmWindow  *self,
                         const char *path,
                         GError    **error)
{
  g_autofree char *checkpoint = NULL;
  g_autoptr(GFile) from = NULL;
  g_autoptr(GFile) to = NULL;

  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  checkpoint = tdm_window_get_run_checkpoint (self);
  if (checkpoint == NULL)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                           _("No network to save yet: train one first"));
      return FALSE;
    }
  from = g_file_new_for_path (checkpoint);
  to = g_file_new_for_path (path);
  /* A copy written whole or not at all: GIO writes a temporary and renames it. */
  return g_file_copy (from, to, G_FILE_COPY_OVERWRITE, NULL, NULL, NULL, error);
}

static void
tdm_window_save_chosen (TdmWindow       *self,
                        int              response,
                        GtkNativeDialog *dialog)
{
  g_autoptr(GFile) file = tdm_window_chosen_file (self, response, dialog);
  g_autofree char *path = NULL;
  g_autoptr(GError) error = NULL;

  if (file == NULL)
    return;
  path = g_file_get_path (file);
  if (path == NULL || !tdm_window_save_network (self, path, &error))
    tdm_window_show_error (self, _("The network could not be saved."),
                           error != NULL ? error->message
                                         : _("Only folders on this computer can be written to."));
  else
    tdm_window_toast_saved (self, file);
}

static void
tdm_window_save (GtkWidget  *widget,
                 const char *action_name,
                 GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  GtkFileChooser *chooser;

  chooser = tdm_window_new_chooser (self, _("Save Network"), GTK_FILE_CHOOSER_ACTION_SAVE,
                                    _("_Save"));
  gtk_file_chooser_set_current_name (chooser, "network.safetensors");
  tdm_window_add_filter (chooser, _("Checkpoints"), "application/octet-stream", "*.safetensors");
  g_signal_connect_object (chooser, "response", G_CALLBACK (tdm_window_save_chosen), self,
                           G_CONNECT_SWAPPED);
  gtk_native_dialog_show (self->chooser);
}

/* Resume -------------------------------------------------------------------- */

gboolean
tdm_window_resume (TdmWindow  *self,
                   const char *checkpoint,
                   int         epochs,
                   GError    **error)
{
  g_autoptr(TdmConfig) config = NULL;
  g_autofree char *base = NULL;
  g_autofree char *name = NULL;
  TdmDeviceId devices[TDM_MAX_REPLICAS];
  TdmCheckpointPlace place;
  int count, main_replica = 0;

  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);
  g_return_val_if_fail (checkpoint != NULL, FALSE);

  if (self->run != NULL)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_BUSY,
                           _("A run is going: stop it before resuming another"));
      return FALSE;
    }
  config = tdm_trainer_checkpoint_config (checkpoint, TRUE, &place, error);
  if (config == NULL)
    return FALSE;
  /* Everything as it was, on the devices ticked now. */
  count = tdm_run_form_get_replicas (self->sidebar, devices, TDM_MAX_REPLICAS, &main_replica);
  if (count > 0)
    {
      if (!tdm_config_set_device_list (config, devices, count, error))
        return FALSE;
      config->main_replica = main_replica;
    }
  if (epochs > 0)
    config->epochs = epochs;
  if (config->epochs <= place.epoch)
    {
      g_set_error (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                   ngettext ("%s has trained its %d epoch: choose more epochs to go on",
                             "%s has trained its %d epochs: choose more epochs to go on",
                             place.epoch),
                   checkpoint, place.epoch);
      return FALSE;
    }
  config->max_steps = self->max_steps;
  if (!tdm_config_validate (config, error))
    return FALSE;

  base = g_filename_display_basename (checkpoint);
  /* Translators: the name of a resumed run in the history; %s the checkpoint's file */
  name = g_strdup_printf (_("Resumed: %s"), base);
  tdm_devices_page_clear (self->devices_page);
  return tdm_window_launch (self, config, name, NULL, checkpoint);
}

static void
tdm_window_resume_response (AdwMessageDialog *dialog,
                            const char       *response,
                            TdmWindow        *self)
{
  GtkSpinButton *spin = g_object_get_data (G_OBJECT (dialog), "epochs");
  const char *checkpoint = g_object_get_data (G_OBJECT (dialog), "checkpoint");
  g_autoptr(GError) error = NULL;

  if (g_str_equal (response, "resume") &&
      !tdm_window_resume (self, checkpoint, gtk_spin_button_get_value_as_int (spin), &error))
    tdm_window_show_error (self, _("The run cannot resume."), error->message);
}

/* Asks how far to go on (the saved run's epochs, or more), then resumes. */
static void
tdm_window_ask_resume (TdmWindow  *self,
                       const char *checkpoint,
                       const char *title)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmConfig) config = NULL;
  g_autofree char *body = NULL;
  g_autofree char *steps = NULL;
  TdmCheckpointPlace place;
  GtkWidget *dialog, *box, *label, *spin;

  config = tdm_trainer_checkpoint_config (checkpoint, TRUE, &place, &error);
  if (config == NULL)
    {
      tdm_window_show_error (self, _("The run cannot resume."), error->message);
      return;
    }
  steps = tdm_format_count ((double) place.step);
  /* Translators: what a checkpoint holds; %s its network, %s its dataset, %d epochs
   * done, %d epochs planned, %s steps taken (with separators) */
  body = g_strdup_printf (_("%s on %s: %d of %d epochs done, %s steps. It goes on where it stopped, with its optimizer’s state, on the devices ticked in the settings."),
                          config->network, config->dataset, place.epoch, config->epochs, steps);
  dialog = adw_message_dialog_new (GTK_WINDOW (self), title, body);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog),
                                    "cancel", _("_Cancel"),
                                    "resume", _("_Resume"),
                                    NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "resume",
                                              ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "resume");
  box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 12);
  gtk_widget_set_halign (box, GTK_ALIGN_CENTER);
  label = gtk_label_new_with_mnemonic (_("Train until _epoch"));
  spin = gtk_spin_button_new_with_range (place.epoch + 1, 10000, 1);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (spin), MAX (config->epochs, place.epoch + 1));
  gtk_label_set_mnemonic_widget (GTK_LABEL (label), spin);
  gtk_box_append (GTK_BOX (box), label);
  gtk_box_append (GTK_BOX (box), spin);
  adw_message_dialog_set_extra_child (ADW_MESSAGE_DIALOG (dialog), box);
  g_object_set_data (G_OBJECT (dialog), "epochs", spin);
  g_object_set_data_full (G_OBJECT (dialog), "checkpoint", g_strdup (checkpoint), g_free);
  g_signal_connect_object (dialog, "response", G_CALLBACK (tdm_window_resume_response), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

static void
tdm_window_open_chosen (TdmWindow       *self,
                        int              response,
                        GtkNativeDialog *dialog)
{
  g_autoptr(GFile) file = tdm_window_chosen_file (self, response, dialog);
  g_autofree char *path = NULL;
  g_autofree char *name = NULL;
  g_autofree char *title = NULL;

  if (file == NULL)
    return;
  path = g_file_get_path (file);
  if (path == NULL)
    {
      tdm_window_show_error (self, _("The run cannot resume."),
                             _("Only files on this computer can be opened."));
      return;
    }
  name = g_file_get_basename (file);
  /* Translators: a dialog's title; %s is a checkpoint's file name */
  title = g_strdup_printf (_("Resume “%s”?"), name);
  tdm_window_ask_resume (self, path, title);
}

static void
tdm_window_open (GtkWidget  *widget,
                 const char *action_name,
                 GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  GtkFileChooser *chooser;

  chooser = tdm_window_new_chooser (self, _("Open a Checkpoint to Resume"),
                                    GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"));
  tdm_window_add_filter (chooser, _("Checkpoints"), "application/octet-stream", "*.safetensors");
  g_signal_connect_object (chooser, "response", G_CALLBACK (tdm_window_open_chosen), self,
                           G_CONNECT_SWAPPED);
  gtk_native_dialog_show (self->chooser);
}

/* A History row's run ------------------------------------------------------- */

static void
tdm_window_resume_run (GtkWidget  *widget,
                       const char *action_name,
                       GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  const char *id = g_variant_get_string (parameter, NULL);
  g_autofree char *weights = tdm_window_kept_weights (self, id);
  TdmRunItem *item = tdm_history_store_find (self->history, id);
  g_autofree char *title = NULL;

  if (weights == NULL)
    return;
  /* Translators: a dialog's title; %s is a run's name in the history */
  title = g_strdup_printf (_("Resume “%s”?"), item != NULL ? tdm_run_item_get_name (item) : id);
  tdm_window_ask_resume (self, weights, title);
}

static void
tdm_window_classify_run (GtkWidget  *widget,
                         const char *action_name,
                         GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  g_autofree char *weights = tdm_window_kept_weights (self, g_variant_get_string (parameter, NULL));

  if (weights == NULL)
    return;
  tdm_classify_view_set_checkpoint (tdm_window_get_classify_view (self), weights);
  gtk_window_present (self->classify_window);
}

static void
tdm_window_export_run_onnx (GtkWidget  *widget,
                            const char *action_name,
                            GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  g_autofree char *weights = tdm_window_kept_weights (self, g_variant_get_string (parameter, NULL));

  if (weights != NULL)
    tdm_window_ask_export_onnx (self, weights);
}

void
tdm_window_runs_class_init (GtkWidgetClass *widget_class)
{
  gtk_widget_class_install_action (widget_class, "win.save", NULL, tdm_window_save);
  gtk_widget_class_install_action (widget_class, "win.open", NULL, tdm_window_open);
  gtk_widget_class_install_action (widget_class, "win.resume-run", "s", tdm_window_resume_run);
  gtk_widget_class_install_action (widget_class, "win.classify-run", "s", tdm_window_classify_run);
  gtk_widget_class_install_action (widget_class, "win.export-run-onnx", "s",
                                   tdm_window_export_run_onnx);
}

static void
tdm_window_limit_changed (TdmWindow *self)
{
  tdm_window_limit_weights (self, NULL);
}

void
tdm_window_runs_init (TdmWindow *self)
{
  g_autofree char *checkpoint = tdm_window_get_run_checkpoint (self);

  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.save", checkpoint != NULL);
  g_signal_connect_object (self->settings, "changed::kept-networks-limit",
                           G_CALLBACK (tdm_window_limit_changed), self, G_CONNECT_SWAPPED);
}
