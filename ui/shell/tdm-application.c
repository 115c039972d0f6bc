/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-application.c: Tandem's AdwApplication.
 *
 * The application owns nothing but its windows. Quitting closes every window
 * rather than stopping the main loop outright: a window that is closed during a run
 * stops its trainer, and the run holds the application until its thread has been
 * joined, so the process never exits with a training thread still running. Quitting
 * closes them the way the close button does, so each remembers its size.
 *
 * Being an AdwApplication gives the system's light, dark and high-contrast styles
 * (AdwStyleManager follows the desktop's settings) and loads style.css from the
 * resource base path; nothing here sets a theme.
 */

#include <locale.h>
#include <glib/gi18n.h>

#include "tdm-build-config.h"

#include "tdm-application.h"
#include "tdm-i18n.h"
#include "tdm-renderer.h"
#include "tdm-window.h"

struct _TdmApplication
{
  AdwApplication parent_instance;

  gboolean       start_on_activate;
  gboolean       scaling_on_activate;
  char          *page;            /* --page, until the window shows it */
};

G_DEFINE_FINAL_TYPE (TdmApplication, tdm_application, ADW_TYPE_APPLICATION)

void
tdm_application_init_i18n (void)
{
  tdm_i18n_bind (GETTEXT_PACKAGE, "po");
  textdomain (GETTEXT_PACKAGE);
}

void
tdm_application_init_uninstalled (void)
{
  g_autofree char *schemas = NULL;

  if (g_getenv ("GSETTINGS_SCHEMA_DIR") != NULL || !tdm_running_from_build_tree ())
    return;

  schemas = g_build_filename (TDM_BUILD_DIR, "data", NULL);
  g_setenv ("GSETTINGS_SCHEMA_DIR", schemas, TRUE);
}

/* --start: press Start as soon as the remembered choices allow it (the dataset has
 * to load first). For demonstrations and tools/screenshot. */
static void
tdm_application_start_when_ready (GtkWidget *window,
                                  GParamSpec *pspec,
                                  gpointer    action)
{
  gboolean can_start = FALSE;

  g_object_get (window, "can-start", &can_start, NULL);
  if (!can_start)
    return;

  g_signal_handlers_disconnect_by_func (window, tdm_application_start_when_ready, action);
  gtk_widget_activate_action (window, action, NULL);
}

static void
tdm_application_activate (GApplication *app)
{
  TdmApplication *self = TDM_APPLICATION (app);
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (app));

  if (window == NULL)
    window = GTK_WINDOW (tdm_window_new (self));

  if (self->start_on_activate || self->scaling_on_activate)
    {
      /* A static string: it outlives the handler. */
      const char *action = self->scaling_on_activate ? "win.scaling-run" : "win.start";

      self->start_on_activate = FALSE;
      self->scaling_on_activate = FALSE;
      g_signal_connect (window, "notify::can-start",
                        G_CALLBACK (tdm_application_start_when_ready), (gpointer) action);
      tdm_application_start_when_ready (GTK_WIDGET (window), NULL, (gpointer) action);
    }
  if (self->page != NULL)
    {
      tdm_window_set_page (TDM_WINDOW (window), self->page);
      g_clear_pointer (&self->page, g_free);
    }

  gtk_window_present (window);
}

static int
tdm_application_handle_local_options (GApplication *app,
                                      GVariantDict *options)
{
  TdmApplication *self = TDM_APPLICATION (app);
  const char *page = NULL;

  if (g_variant_dict_contains (options, "version"))
    {
      g_print ("tandem %s\n", TDM_VERSION);
      return 0;
    }
  if (g_variant_dict_contains (options, "start"))
    self->start_on_activate = TRUE;
  if (g_variant_dict_contains (options, "scaling"))
    self->scaling_on_activate = TRUE;
  if (g_variant_dict_lookup (options, "page", "&s", &page))
    {
      if (!tdm_window_has_page (page))
        {
          /* Translators: a bad --page; %s is what was given */
          g_printerr (_("tandem: --page: there is no page “%s”; the pages are charts, devices, predictions, scaling and history\n"),
                      page);
          return 2;
        }
      g_free (self->page);
      self->page = g_strdup (page);
    }

  return -1;
}

static void
tdm_application_quit (GSimpleAction *action,
                      GVariant      *parameter,
                      gpointer       user_data)
{
  GtkApplication *app = user_data;
  GList *windows = g_list_copy_deep (gtk_application_get_windows (app),
                                     (GCopyFunc) (void (*) (void)) g_object_ref, NULL);

  /* Closing, not destroying: close-request is where a window saves its size. */
  for (GList *l = windows; l != NULL; l = l->next)
    gtk_window_close (l->data);
  g_list_free_full (windows, g_object_unref);
}

static void
tdm_application_shortcuts (GSimpleAction *action,
                           GVariant      *parameter,
                           gpointer       user_data)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (user_data));

  if (window != NULL)
    gtk_widget_activate_action (GTK_WIDGET (window), "win.show-help-overlay", NULL);
}

static void
tdm_application_about (GSimpleAction *action,
                       GVariant      *parameter,
                       gpointer       user_data)
{
  static const char *developers[] = { "The Tandem developers", NULL };
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (user_data));
  GtkWidget *about;

  about = g_object_new (ADW_TYPE_ABOUT_WINDOW,
                        "transient-for", window,
                        "modal", TRUE,
                        "application-name", "Tandem",
                        "application-icon", TDM_APP_ID,
                        "developer-name", "The Tandem developers",
                        "version", TDM_VERSION,
                        "comments", _("Train neural networks on several devices at once and watch them learn"),
                        "license-type", GTK_LICENSE_GPL_3_0,
                        "developers", developers,
                        /* Translators: put your names here, one per line */
                        "translator-credits", _("translator-credits"),
                        "copyright", "© 2025 The Tandem developers",
                        NULL);
  gtk_window_present (GTK_WINDOW (about));
}

static const GActionEntry app_actions[] = {
  { "quit", tdm_application_quit, NULL, NULL, NULL, { 0 } },
  { "shortcuts", tdm_application_shortcuts, NULL, NULL, NULL, { 0 } },
  { "about", tdm_application_about, NULL, NULL, NULL, { 0 } },
};

static const struct {
  const char *action;
  const char *accels[3];
} accelerators[] = {
  { "app.quit", { "<Control>q", NULL } },
  { "app.shortcuts", { "<Control>question", NULL } },
  { "win.start", { "<Control>Return", NULL } },
  { "win.pause", { "<Control>p", NULL } },
  { "win.stop", { "<Control>period", NULL } },
  { "win.export", { "<Control>e", NULL } },
  { "win.open", { "<Control>o", NULL } },
  { "win.save", { "<Control>s", NULL } },
  { "win.open-folder", { "<Control><Shift>o", NULL } },
  { "win.preferences", { "<Control>comma", NULL } },
  { "window.close", { "<Control>w", NULL } },
};

static void
tdm_application_startup (GApplication *app)
{
  G_APPLICATION_CLASS (tdm_application_parent_class)->startup (app);

  /* GTK is initialized now and no window exists yet: the one moment to keep GTK's
   * OpenGL renderer off a software rasterizer (tdm-renderer.c says why). */
  tdm_renderer_choose (gdk_display_get_default (), NULL);

  g_action_map_add_action_entries (G_ACTION_MAP (app), app_actions,
                                   G_N_ELEMENTS (app_actions), app);
  for (guint i = 0; i < G_N_ELEMENTS (accelerators); i++)
    gtk_application_set_accels_for_action (GTK_APPLICATION (app),
                                           accelerators[i].action,
                                           accelerators[i].accels);

  /* AdwApplication loads style.css, the shortcuts window and the icons from the
   * resource base path by itself. */
  gtk_window_set_default_icon_name (TDM_APP_ID);
}

static void
tdm_application_finalize (GObject *object)
{
  g_free (TDM_APPLICATION (object)->page);

  G_OBJECT_CLASS (tdm_application_parent_class)->finalize (object);
}

static void
tdm_application_class_init (TdmApplicationClass *klass)
{
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = tdm_application_finalize;

  app_class->activate = tdm_application_activate;
  app_class->handle_local_options = tdm_application_handle_local_options;
  app_class->startup = tdm_application_startup;
}

static const GOptionEntry options[] = {
  { "start", 0, 0, G_OPTION_ARG_NONE, NULL,
    N_("Start training with the last choices as soon as the window opens"), NULL },
  { "scaling", 0, 0, G_OPTION_ARG_NONE, NULL,
    N_("Start a scaling run over the chosen devices as soon as the window opens"), NULL },
  { "page", 0, 0, G_OPTION_ARG_STRING, NULL,
    N_("Show this page first: charts, devices, predictions, scaling or history"), N_("PAGE") },
  { "version", 0, 0, G_OPTION_ARG_NONE, NULL, N_("Print the version and exit"), NULL },
  { NULL }
};

static void
tdm_application_init (TdmApplication *self)
{
  g_application_add_main_option_entries (G_APPLICATION (self), options);
}

TdmApplication *
tdm_application_new (void)
{
  return g_object_new (TDM_TYPE_APPLICATION,
                       "application-id", TDM_APP_ID,
                       "flags", G_APPLICATION_DEFAULT_FLAGS,
                       "resource-base-path", "/io/github/tandem/Tandem",
                       NULL);
}
