/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-preferences-window.c: the window's preferences (tdm-preferences-window.h).
 *
 * The rows are bound to GSettings, so a change holds at once and for the next run;
 * nothing is applied on closing. The folder row shows the folder the files really go
 * in, the default spelled out, so that the user knows what to give tensorboard
 * --logdir.
 */

#include <glib/gi18n.h>

#include "tdm-build-config.h"
#include "tdm-preferences-window.h"

struct _TdmPreferencesWindow
{
  AdwPreferencesWindow  parent_instance;

  AdwActionRow         *tensorboard_row;
  GtkSwitch            *tensorboard_switch;
  AdwActionRow         *folder_row;
  GtkButton            *default_button;
  GtkButton            *choose_button;

  GSettings            *settings;
  GtkFileChooserNative *chooser;
};

G_DEFINE_FINAL_TYPE (TdmPreferencesWindow, tdm_preferences_window, ADW_TYPE_PREFERENCES_WINDOW)

char *
tdm_preferences_tensorboard_folder (GSettings *settings)
{
  g_autofree char *folder = NULL;

  g_return_val_if_fail (G_IS_SETTINGS (settings), NULL);

  folder = g_settings_get_string (settings, "tensorboard-folder");
  if (*folder == '\0')
    return g_build_filename (g_get_user_data_dir (), "tandem", "tensorboard", NULL);
  /* Set by hand (gsettings set …) relative: taken from the home folder, as a shell
   * in it would. */
  if (!g_path_is_absolute (folder))
    return g_build_filename (g_get_home_dir (), folder, NULL);
  return g_steal_pointer (&folder);
}

static void
tdm_preferences_window_folder_changed (TdmPreferencesWindow *self)
{
  g_autofree char *folder = tdm_preferences_tensorboard_folder (self->settings);
  g_autofree char *custom = g_settings_get_string (self->settings, "tensorboard-folder");
  g_autofree char *display = g_filename_display_name (folder);

  adw_action_row_set_subtitle (self->folder_row, display);
  gtk_widget_set_visible (GTK_WIDGET (self->default_button), *custom != '\0');
}

/* The folder chooser shown, if any, is gone. */
static void
tdm_preferences_window_chooser_done (TdmPreferencesWindow *self)
{
  if (self->chooser != NULL)
    gtk_native_dialog_destroy (GTK_NATIVE_DIALOG (self->chooser));
  g_clear_object (&self->chooser);
}

static void
tdm_preferences_window_chosen (TdmPreferencesWindow *self,
                               int                   response,
                               GtkNativeDialog      *dialog)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      g_autofree char *path = file != NULL ? g_file_get_path (file) : NULL;

      /* A folder with no local path (a remote location) cannot take the files. */
      if (path != NULL)
        g_settings_set_string (self->settings, "tensorboard-folder", path);
    }
  tdm_preferences_window_chooser_done (self);
}

static void
tdm_preferences_window_choose (TdmPreferencesWindow *self)
{
  g_autofree char *folder = tdm_preferences_tensorboard_folder (self->settings);

  tdm_preferences_window_chooser_done (self);
  self->chooser = gtk_file_chooser_native_new (_("TensorBoard Folder"), GTK_WINDOW (self),
                                               GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER,
                                               _("_Select"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (self->chooser), TRUE);
  if (g_file_test (folder, G_FILE_TEST_IS_DIR))
    {
      g_autoptr(GFile) start = g_file_new_for_path (folder);

      gtk_file_chooser_set_current_folder (GTK_FILE_CHOOSER (self->chooser), start, NULL);
    }
  g_signal_connect_object (self->chooser, "response",
                           G_CALLBACK (tdm_preferences_window_chosen), self, G_CONNECT_SWAPPED);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (self->chooser));
}

static void
tdm_preferences_window_use_default (TdmPreferencesWindow *self)
{
  g_settings_reset (self->settings, "tensorboard-folder");
}

static void
tdm_preferences_window_dispose (GObject *object)
{
  TdmPreferencesWindow *self = TDM_PREFERENCES_WINDOW (object);

  tdm_preferences_window_chooser_done (self);
  g_clear_object (&self->settings);

  G_OBJECT_CLASS (tdm_preferences_window_parent_class)->dispose (object);
}

static void
tdm_preferences_window_class_init (TdmPreferencesWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_preferences_window_dispose;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-preferences-window.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmPreferencesWindow, tensorboard_row);
  gtk_widget_class_bind_template_child (widget_class, TdmPreferencesWindow, tensorboard_switch);
  gtk_widget_class_bind_template_child (widget_class, TdmPreferencesWindow, folder_row);
  gtk_widget_class_bind_template_child (widget_class, TdmPreferencesWindow, default_button);
  gtk_widget_class_bind_template_child (widget_class, TdmPreferencesWindow, choose_button);
  gtk_widget_class_bind_template_callback (widget_class, tdm_preferences_window_choose);
  gtk_widget_class_bind_template_callback (widget_class, tdm_preferences_window_use_default);
}

static void
tdm_preferences_window_init (TdmPreferencesWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));

  self->settings = g_settings_new (TDM_APP_ID);
  g_settings_bind (self->settings, "tensorboard", self->tensorboard_switch, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "tensorboard", self->folder_row, "sensitive",
                   G_SETTINGS_BIND_GET);
  g_signal_connect_object (self->settings, "changed::tensorboard-folder",
                           G_CALLBACK (tdm_preferences_window_folder_changed), self,
                           G_CONNECT_SWAPPED);
  tdm_preferences_window_folder_changed (self);
}

TdmPreferencesWindow *
tdm_preferences_window_new (GtkWindow *parent)
{
  return g_object_new (TDM_TYPE_PREFERENCES_WINDOW, "transient-for", parent, NULL);
}
