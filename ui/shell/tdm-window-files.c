/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window-files.c: the window's file choosers: opening an image folder,
 * exporting the metrics, a chart, a scaling run or the run's network as ONNX. Part of TdmWindow
 * (tdm-window-private.h); what gets written is the session's, the dashboard's and
 * the scaling page's.
 */

#include <glib/gi18n.h>
#include <string.h>

#include "tdm-classify-view.h"
#include "tdm-dashboard.h"
#include "tdm-onnx-export.h"
#include "tdm-run-form.h"
#include "tdm-scaling-page.h"
#include "tdm-window-private.h"

void
tdm_window_chooser_done (TdmWindow *self)
{
  if (self->chooser == NULL)
    return;

  gtk_native_dialog_destroy (self->chooser);
  g_clear_object (&self->chooser);
}

GtkFileChooser *
tdm_window_new_chooser (TdmWindow            *self,
                        const char           *title,
                        GtkFileChooserAction  action,
                        const char           *accept_label)
{
  GtkFileChooserNative *native;

  tdm_window_chooser_done (self);

  native = gtk_file_chooser_native_new (title, GTK_WINDOW (self), action,
                                        accept_label, _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (native), TRUE);
  self->chooser = GTK_NATIVE_DIALOG (native);

  return GTK_FILE_CHOOSER (native);
}

GFile *
tdm_window_chosen_file (TdmWindow       *self,
                        int              response,
                        GtkNativeDialog *dialog)
{
  GFile *file = NULL;

  if (response == GTK_RESPONSE_ACCEPT)
    file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
  tdm_window_chooser_done (self);
  return file;
}

void
tdm_window_toast_saved (TdmWindow *self,
                        GFile     *file)
{
  g_autofree char *name = g_file_get_basename (file);
  /* Translators: a notice after a save or an export; %s is the file's name */
  g_autofree char *text = g_strdup_printf (_("Saved “%s”"), name);

  tdm_window_toast (self, text);
}

void
tdm_window_open_folder (GtkWidget  *widget,
                        const char *action_name,
                        GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);

  tdm_run_form_open_folder (self->sidebar);
}

void
tdm_window_add_filter (GtkFileChooser *chooser,
                       const char     *name,
                       const char     *mime_type,
                       const char     *pattern)
{
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();

  gtk_file_filter_set_name (filter, name);
  gtk_file_filter_add_mime_type (filter, mime_type);
  gtk_file_filter_add_pattern (filter, pattern);
  gtk_file_chooser_add_filter (chooser, filter);
}

static gboolean tdm_window_export_onnx_of (TdmWindow  *self,
                                           const char *checkpoint,
                                           const char *path);

void
tdm_window_export_chosen (TdmWindow       *self,
                          int              response,
                          GtkNativeDialog *dialog)
{
  g_autofree char *target = g_strdup (g_object_get_data (G_OBJECT (dialog), "target"));
  g_autofree char *checkpoint = g_strdup (g_object_get_data (G_OBJECT (dialog), "checkpoint"));
  g_autoptr(GFile) file = tdm_window_chosen_file (self, response, dialog);
  g_autofree char *path = NULL;
  g_autoptr(GError) error = NULL;
  gboolean ok;

  if (file == NULL)
    return;

  path = g_file_get_path (file);
  if (path == NULL)
    {
      tdm_window_show_error (self, _("The file could not be saved."),
                             _("Only folders on this computer can be written to."));
      return;
    }

  if (target != NULL && g_str_equal (target, "onnx"))
    {
      /* The export says how it went in a toast of its own. */
      tdm_window_export_onnx_of (self, checkpoint, path);
      return;
    }
  if (target == NULL)
    ok = tdm_dashboard_export_metrics (self->dashboard, path, &error);
  else if (g_str_equal (target, "scaling:csv"))
    ok = tdm_scaling_page_write_csv (self->scaling_page, path, &error);
  else if (g_str_equal (target, "scaling:svg"))
    ok = tdm_scaling_page_write_svg (self->scaling_page, path, 800, 500, &error);
  else
    {
      g_auto(GStrv) parts = g_strsplit (target, ":", 2);

      ok = tdm_dashboard_export_chart (self->dashboard, parts[0], parts[1], path, &error);
    }

  if (!ok)
    tdm_window_show_error (self, _("The file could not be saved."), error->message);
  else
    tdm_window_toast_saved (self, file);
}

void
tdm_window_export (GtkWidget  *widget,
                   const char *action_name,
                   GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  GtkFileChooser *chooser;

  chooser = tdm_window_new_chooser (self, _("Export Metrics"),
                                    GTK_FILE_CHOOSER_ACTION_SAVE, _("_Save"));
  gtk_file_chooser_set_current_name (chooser, "tandem-metrics.csv");
  tdm_window_add_filter (chooser, _("CSV files"), "text/csv", "*.csv");
  g_signal_connect_object (chooser, "response", G_CALLBACK (tdm_window_export_chosen),
                           self, G_CONNECT_SWAPPED);
  gtk_native_dialog_show (self->chooser);
}

void
tdm_window_export_chart (GtkWidget  *widget,
                         const char *action_name,
                         GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  const char *target = g_variant_get_string (parameter, NULL);
  g_auto(GStrv) parts = g_strsplit (target, ":", 2);
  g_autofree char *title = NULL;
  g_autofree char *name = NULL;
  GtkFileChooser *chooser;
  const char *chart_title;

  chart_title = tdm_dashboard_get_chart_title (self->dashboard, parts[0]);
  if (chart_title == NULL || parts[1] == NULL)
    return;

  /* Translators: title of the file chooser that saves a chart; %s is its title */
  title = g_strdup_printf (_("Save “%s”"), chart_title);
  chooser = tdm_window_new_chooser (self, title, GTK_FILE_CHOOSER_ACTION_SAVE, _("_Save"));
  name = g_strdup_printf ("tandem-%s.%s", parts[0], parts[1]);
  gtk_file_chooser_set_current_name (chooser, name);
  if (g_str_equal (parts[1], "png"))
    tdm_window_add_filter (chooser, _("PNG images"), "image/png", "*.png");
  else if (g_str_equal (parts[1], "svg"))
    tdm_window_add_filter (chooser, _("SVG images"), "image/svg+xml", "*.svg");
  else
    tdm_window_add_filter (chooser, _("CSV files"), "text/csv", "*.csv");
  g_object_set_data_full (G_OBJECT (chooser), "target", g_strdup (target), g_free);
  g_signal_connect_object (chooser, "response", G_CALLBACK (tdm_window_export_chosen),
                           self, G_CONNECT_SWAPPED);
  gtk_native_dialog_show (self->chooser);
}

/* Writes checkpoint (NULL: none) as ONNX at path; a toast says how it went. */
static gboolean
tdm_window_export_onnx_of (TdmWindow  *self,
                           const char *checkpoint,
                           const char *path)
{
  g_autofree char *name = NULL;
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;

  name = g_filename_display_basename (path);
  if (checkpoint == NULL)
    {
      tdm_window_toast (self, _("No network to export yet: train one, or open a checkpoint to classify with"));
      return FALSE;
    }
  if (!tdm_onnx_export_available ())
    {
      tdm_window_toast (self, _("This Tandem was built without ONNX export (protobuf-c)"));
      return FALSE;
    }
  if (!tdm_onnx_export_checkpoint (checkpoint, path, &error))
    {
      /* Translators: a notice; the first %s is the file's name, the second why it
       * could not be written (the engine's words) */
      text = g_strdup_printf (_("“%s” was not exported: %s"), name, error->message);
      tdm_window_toast (self, text);
      return FALSE;
    }
  /* Translators: a notice after an ONNX export; %s is the file's name */
  text = g_strdup_printf (_("Exported “%s”"), name);
  tdm_window_toast (self, text);
  return TRUE;
}

gboolean
tdm_window_export_onnx (TdmWindow  *self,
                        const char *path)
{
  g_autofree char *checkpoint = NULL;

  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  checkpoint = tdm_window_get_run_checkpoint (self);
  return tdm_window_export_onnx_of (self, checkpoint, path);
}

void
tdm_window_export_onnx_chooser (GtkWidget  *widget,
                                const char *action_name,
                                GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  g_autofree char *checkpoint = tdm_window_get_run_checkpoint (self);

  if (checkpoint == NULL)
    {
      tdm_window_toast (self, _("No network to export yet: train one, or open a checkpoint to classify with"));
      return;
    }
  tdm_window_ask_export_onnx (self, checkpoint);
}

void
tdm_window_ask_export_onnx (TdmWindow  *self,
                            const char *checkpoint)
{
  g_autofree char *base = NULL;
  g_autofree char *name = NULL;
  GtkFileChooser *chooser;

  chooser = tdm_window_new_chooser (self, _("Export Network as ONNX"),
                                    GTK_FILE_CHOOSER_ACTION_SAVE, _("_Export"));
  /* photos.safetensors becomes photos.onnx. */
  base = g_path_get_basename (checkpoint);
  if (g_str_has_suffix (base, ".safetensors"))
    base[strlen (base) - strlen (".safetensors")] = '\0';
  name = g_strconcat (base, ".onnx", NULL);
  gtk_file_chooser_set_current_name (chooser, name);
  tdm_window_add_filter (chooser, _("ONNX models"), "application/octet-stream", "*.onnx");
  g_object_set_data_full (G_OBJECT (chooser), "target", g_strdup ("onnx"), g_free);
  g_object_set_data_full (G_OBJECT (chooser), "checkpoint", g_strdup (checkpoint), g_free);
  g_signal_connect_object (chooser, "response", G_CALLBACK (tdm_window_export_chosen),
                           self, G_CONNECT_SWAPPED);
  gtk_native_dialog_show (self->chooser);
}
