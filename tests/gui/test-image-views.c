/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-image-views.c: the folder preview (classes, decoding, Cancel) and the classify
 * view (a checkpoint, images added, their predictions), with the main loop turning.
 *
 * The folders are written by the test (tests/image-writer.h); the checkpoint comes
 * from a short real run of the engine. Every widget must be finalized at the end
 * (g_assert_finalize_object), so a reference kept by a worker task shows up here.
 */

#include <string.h>

#include <glib/gstdio.h>
#include <gtk/gtk.h>

#include "../image-writer.h"
#include "tdm-classifier.h"
#include "tdm-classify-view.h"
#include "tdm-config.h"
#include "tdm-folder-preview.h"
#include "tdm-trainer.h"

static gboolean
tick (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

/* The button below `widget` labelled `label`, or NULL. */
static GtkWidget *
find_button (GtkWidget  *widget,
             const char *label)
{
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *found;

      if (GTK_IS_BUTTON (c) && g_strcmp0 (gtk_button_get_label (GTK_BUTTON (c)), label) == 0)
        return c;
      if ((found = find_button (c, label)) != NULL)
        return found;
    }
  return NULL;
}

/* Turns the main loop until cond(data) holds; the deadline only keeps a broken build
 * from hanging, nothing is timed. */
static gboolean
wait_for (gboolean (*cond) (gpointer), gpointer data)
{
  gint64 end = g_get_monotonic_time () + 120 * G_USEC_PER_SEC;
  guint source = g_timeout_add (5, tick, NULL);
  gboolean ok;

  while (!(ok = cond (data)) && g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (source);
  return ok;
}

static void
write_folder (const char *root,
              int         per_class,
              int         side)
{
  const char *names[] = { "dark", "light" };

  for (int c = 0; c < 2; c++)
    {
      g_autofree char *dir = g_build_filename (root, names[c], NULL);

      g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
      for (int i = 0; i < per_class; i++)
        {
          g_autofree char *path = g_strdup_printf ("%s/%04d.png", dir, i);
          test_write_flat_png (path, side, side, 1, (uint8_t) (c == 0 ? 30 + i % 20 : 200 + i % 20));
        }
    }
}

typedef struct
{
  int started, loaded, failed;
  char *message;
} Signals;

static void
on_started (TdmFolderPreview *preview, Signals *s)
{
  s->started++;
}

static void
on_loaded (TdmFolderPreview *preview, Signals *s)
{
  s->loaded++;
}

static void
on_failed (TdmFolderPreview *preview, const char *message, Signals *s)
{
  s->failed++;
  g_free (s->message);
  s->message = g_strdup (message);
}

static gboolean
settled (gpointer data)
{
  Signals *s = data;

  return s->loaded + s->failed > 0;
}

static void
test_folder_preview (void)
{
  g_autofree char *root = g_dir_make_tmp ("tdm-preview-XXXXXX", NULL);
  GtkWidget *window = gtk_window_new ();
  TdmFolderPreview *preview = TDM_FOLDER_PREVIEW (tdm_folder_preview_new ());
  Signals s = { 0 };
  int train, test, h, w, c, classes;

  write_folder (root, 1500, 64);
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (preview));
  gtk_window_present (GTK_WINDOW (window));
  g_signal_connect (preview, "started", G_CALLBACK (on_started), &s);
  g_signal_connect (preview, "loaded", G_CALLBACK (on_loaded), &s);
  g_signal_connect (preview, "failed", G_CALLBACK (on_failed), &s);

  /* Cancelled at once: 3,000 files cannot all be decoded before the worker sees it. */
  tdm_folder_preview_set_folder (preview, root);
  g_assert_cmpint (s.started, ==, 1);
  g_signal_emit_by_name (find_button (GTK_WIDGET (preview), "Cancel"), "clicked");
  g_assert_true (wait_for (settled, &s));
  g_assert_cmpint (s.loaded, ==, 0);
  g_assert_cmpint (s.failed, ==, 1);
  g_assert_nonnull (strstr (s.message, "cancelled"));
  g_assert_false (tdm_folder_preview_get_facts (preview, &train, NULL, NULL, NULL, NULL, NULL));

  /* Chosen size and colour, decoded to the end. */
  s.failed = 0;
  tdm_folder_preview_set_folder (preview, root);
  g_assert_true (wait_for (settled, &s));
  g_assert_cmpint (s.failed, ==, 0);
  g_assert_cmpint (s.loaded, ==, 1);
  g_assert_true (tdm_folder_preview_get_facts (preview, &train, &test, &h, &w, &c, &classes));
  g_assert_cmpint (classes, ==, 2);
  g_assert_cmpint (train + test, ==, 3000);
  g_assert_cmpint (h, ==, 64);
  g_assert_cmpint (c, ==, 1);
  g_assert_null (tdm_folder_preview_get_notice (preview));

  gtk_window_destroy (GTK_WINDOW (window));
  g_free (s.message);
}

typedef struct
{
  TdmClassifyView *view;
  guint            want;
} Waiting;

static gboolean
view_ready (gpointer data)
{
  return tdm_classify_view_get_ready (((Waiting *) data)->view);
}

static gboolean
view_done (gpointer data)
{
  Waiting *w = data;

  return tdm_classify_view_get_n_results (w->view) >= w->want;
}

static void
ignore_event (const TdmEvent *event, gpointer data)
{
}

static void
test_classify_view (void)
{
  g_autofree char *root = g_dir_make_tmp ("tdm-classify-XXXXXX", NULL);
  g_autofree char *set = g_build_filename (root, "set", NULL);
  g_autofree char *ckpt = g_build_filename (root, "run.safetensors", NULL);
  g_autoptr(TdmConfig) cfg = tdm_config_new ();
  g_autoptr(GError) error = NULL;
  TdmClassifyView *view;
  GtkWindow *window;
  GSList *files = NULL;
  Waiting w;

  write_folder (set, 30, 12);
  g_free (cfg->dataset);
  cfg->dataset = g_strdup (set);
  g_free (cfg->network);
  cfg->network = g_strdup ("fc8,relu,fc2");
  cfg->epochs = 3;
  cfg->batch = 10;
  cfg->save_path = g_strdup (ckpt);
  {
    g_autoptr(TdmTrainer) trainer = tdm_trainer_new (cfg, ignore_event, NULL);
    g_assert_true (tdm_trainer_run (trainer, NULL, &error));
  }

  window = tdm_classify_view_window_new (NULL, &view);
  gtk_window_present (window);
  files = g_slist_append (files, g_file_new_build_filename (set, "dark", "0003.png", NULL));
  files = g_slist_append (files, g_file_new_build_filename (root, "missing.png", NULL));
  /* Added before a network is there: classified once it is. */
  tdm_classify_view_add_files (view, files);
  g_assert_cmpuint (tdm_classify_view_get_n_results (view), ==, 0);
  tdm_classify_view_set_checkpoint (view, ckpt);
  w.view = view;
  w.want = 2;
  g_assert_true (wait_for (view_ready, &w));
  g_assert_true (wait_for (view_done, &w));
  g_assert_true (g_str_has_prefix (tdm_classify_view_get_result (view, 0), "dark ") ||
                 g_str_has_prefix (tdm_classify_view_get_result (view, 0), "light "));
  g_assert_nonnull (strstr (tdm_classify_view_get_result (view, 0), " %"));
  g_assert_true (g_str_has_prefix (tdm_classify_view_get_result (view, 1), "cannot open: "));

  /* The same answer as the engine's classifier gives directly. */
  {
    g_autoptr(TdmClassifier) cl = tdm_classifier_load (ckpt, &error);
    g_autofree char *path = g_build_filename (set, "dark", "0003.png", NULL);
    float probs[2];
    int best;

    g_assert_no_error (error);
    g_assert_true (tdm_classifier_run_file (cl, path, probs, &error));
    tdm_classifier_rank (probs, 2, 1, &best);
    g_assert_true (g_str_has_prefix (tdm_classify_view_get_result (view, 0),
                                     tdm_classifier_class_name (cl, best)));
  }

  g_object_ref (view);
  gtk_window_destroy (window);
  g_assert_finalize_object (view);
  g_slist_free_full (files, g_object_unref);
}

/* Whether the window has a shortcut from `keyval` + `mods` to the named action. */
static gboolean
has_shortcut (GtkWidget       *widget,
              guint            keyval,
              GdkModifierType  mods,
              const char      *action)
{
  g_autoptr(GListModel) controllers = gtk_widget_observe_controllers (widget);

  for (guint i = 0; i < g_list_model_get_n_items (controllers); i++)
    {
      g_autoptr(GtkEventController) c = g_list_model_get_item (controllers, i);

      if (!GTK_IS_SHORTCUT_CONTROLLER (c))
        continue;
      for (guint j = 0; j < g_list_model_get_n_items (G_LIST_MODEL (c)); j++)
        {
          g_autoptr(GtkShortcut) shortcut = g_list_model_get_item (G_LIST_MODEL (c), j);
          GtkShortcutTrigger *trigger = gtk_shortcut_get_trigger (shortcut);
          GtkShortcutAction *named = gtk_shortcut_get_action (shortcut);

          if (GTK_IS_KEYVAL_TRIGGER (trigger)
              && gtk_keyval_trigger_get_keyval (GTK_KEYVAL_TRIGGER (trigger)) == keyval
              && gtk_keyval_trigger_get_modifiers (GTK_KEYVAL_TRIGGER (trigger)) == mods
              && GTK_IS_NAMED_ACTION (named)
              && g_str_equal (gtk_named_action_get_action_name (GTK_NAMED_ACTION (named)), action))
            return TRUE;
        }
    }
  return FALSE;
}

/* The Classify window closes as a dialog does: Escape and Ctrl+W. */
static void
test_classify_window_keys (void)
{
  GtkWindow *window = tdm_classify_view_window_new (NULL, NULL);

  g_assert_true (has_shortcut (GTK_WIDGET (window), GDK_KEY_Escape, 0, "window.close"));
  g_assert_true (has_shortcut (GTK_WIDGET (window), GDK_KEY_w, GDK_CONTROL_MASK, "window.close"));
  gtk_window_present (window);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "window.close", NULL));
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (window)));
  gtk_window_destroy (window);
}

int
main (int argc, char **argv)
{
  g_autofree char *cache = g_dir_make_tmp ("tdm-gui-cache-XXXXXX", NULL);

  /* Before anything asks GLib for the cache folder: decoded sets go there. */
  g_setenv ("XDG_CACHE_HOME", cache, TRUE);
  gtk_test_init (&argc, &argv, NULL);
  g_test_add_func ("/image-views/folder-preview", test_folder_preview);
  g_test_add_func ("/image-views/classify-view", test_classify_view);
  g_test_add_func ("/image-views/classify-window-keys", test_classify_window_keys);
  return g_test_run ();
}
