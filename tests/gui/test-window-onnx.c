/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-window-onnx.c — the window's "Export Network as ONNX…": offered in the main
 * menu (greyed out in a build without protobuf-c), it writes the last run's network
 * (a run with --normalize included), and a toast names the file written or says why
 * nothing was (no network yet, a folder that does not exist). Checkpoints come from tandem-train, built beside this test. */
#include <locale.h>
#include <string.h>
#include <glib/gstdio.h>
#include <adwaita.h>
#include "tdm-application.h"
#include "tdm-classify-view.h"
#include "tdm-onnx-export.h"
#include "tdm-run.h"
#include "tdm-window.h"
#include "window-test-util.h"

static char *tmp_dir;

/* A new window, shown, with what showing it queued already run. */
static TdmWindow *
new_window(void)
{
  TdmWindow *window = present_window();

  drain();
  return window;
}

/* Trains a small network for two steps with tandem-train into path. */
static void
train(const char *path, const char *extra)
{
  g_autofree char *program = g_test_build_filename(G_TEST_BUILT, "..", "..", "src",
                                                   "tandem-train", NULL);
  g_autofree char *command = g_strdup_printf("%s --dataset synthetic --network "
                                             "conv4k3p1,bn,relu,pool2,fc10 --max-steps 2 "
                                             "--batch 8 --quiet %s --save %s",
                                             program, extra, path);
  g_autofree char *err = NULL;
  int status = 0;
  g_autoptr(GError) error = NULL;

  g_assert_true(g_spawn_command_line_sync(command, NULL, &err, &status, &error));
  g_assert_no_error(error);
  if (!g_spawn_check_wait_status(status, NULL))
    g_error("%s failed: %s", command, err);
}

static gboolean
menu_has_action(GMenuModel *menu, const char *action)
{
  for (int i = 0; i < g_menu_model_get_n_items(menu); i++)
    {
      g_autofree char *name = NULL;
      g_autoptr(GMenuModel) section = g_menu_model_get_item_link(menu, i, G_MENU_LINK_SECTION);

      if (g_menu_model_get_item_attribute(menu, i, G_MENU_ATTRIBUTE_ACTION, "s", &name) &&
          g_str_equal(name, action))
        return TRUE;
      if (section != NULL && menu_has_action(section, action))
        return TRUE;
    }
  return FALSE;
}

static void
test_offered(void)
{
  TdmWindow *window = new_window();
  GMenuModel *menu = gtk_menu_button_get_menu_model(window_child(window, "primary_menu_button"));

  g_assert_true(menu_has_action(menu, "win.export-onnx"));
  /* Enabled exactly when this build can write ONNX. */
  g_assert_cmpint(gtk_widget_activate_action(GTK_WIDGET(window), "win.export-onnx", NULL), ==,
                  tdm_onnx_export_available());
  drop_window(window);
}

static void
test_nothing_yet(void)
{
  TdmWindow *window = new_window();
  g_autofree char *path = g_build_filename(tmp_dir, "none.onnx", NULL);
  g_autofree char *text = NULL;

  g_assert_null(tdm_window_get_run_checkpoint(window));
  g_assert_false(tdm_window_export_onnx(window, path));
  text = toast_text(window);
  g_assert_nonnull(strstr(text, "No network to export yet"));
  g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
  drop_window(window);
}

/* The last run's checkpoint, a normalized one: written, and named in the toast. */
static void
test_last_run(void)
{
  g_autofree char *last = tdm_run_last_network_path();
  g_autofree char *folder = g_path_get_dirname(last);
  g_autofree char *path = g_build_filename(tmp_dir, "last.onnx", NULL);
  g_autofree char *text = NULL;
  g_autofree char *checkpoint = NULL;
  TdmWindow *window;

  if (!tdm_onnx_export_available())
    {
      g_test_skip("this build has no ONNX export (protobuf-c missing)");
      return;
    }
  g_assert_cmpint(g_mkdir_with_parents(folder, 0700), ==, 0);
  train(last, "--normalize dataset");
  window = new_window();
  checkpoint = tdm_window_get_run_checkpoint(window);
  g_assert_cmpstr(checkpoint, ==, last);
  g_assert_true(tdm_window_export_onnx(window, path));
  text = toast_text(window);
  g_assert_nonnull(strstr(text, "Exported “last.onnx”"));
  g_assert_true(g_file_test(path, G_FILE_TEST_IS_REGULAR));
  drop_window(window);
  g_unlink(last);
}

/* A folder that does not exist: the toast says so in the engine's words, and nothing
 * is written. */
static void
test_bad_folder(void)
{
  g_autofree char *last = tdm_run_last_network_path();
  g_autofree char *folder = g_path_get_dirname(last);
  g_autofree char *nowhere = g_build_filename(tmp_dir, "nowhere", "m.onnx", NULL);
  g_autofree char *text = NULL;
  TdmWindow *window;

  if (!tdm_onnx_export_available())
    {
      g_test_skip("this build has no ONNX export (protobuf-c missing)");
      return;
    }
  g_assert_cmpint(g_mkdir_with_parents(folder, 0700), ==, 0);
  train(last, "");
  window = new_window();
  g_assert_false(tdm_window_export_onnx(window, nowhere));
  text = toast_text(window);
  g_assert_nonnull(strstr(text, "“m.onnx” was not exported: "));
  g_assert_nonnull(strstr(text, "does not exist"));
  g_assert_false(g_file_test(nowhere, G_FILE_TEST_EXISTS));
  drop_window(window);
  g_unlink(last);
}

int
main(int argc, char **argv)
{
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  /* Our own data folder: no last run of another test's. */
  tmp_dir = g_dir_make_tmp("tandem-onnx-XXXXXX", NULL);
  g_setenv("XDG_DATA_HOME", tmp_dir, TRUE);
  window_test_init(&argc, &argv);

  g_test_add_func("/window-onnx/offered", test_offered);
  g_test_add_func("/window-onnx/nothing-yet", test_nothing_yet);
  g_test_add_func("/window-onnx/last-run", test_last_run);
  g_test_add_func("/window-onnx/bad-folder", test_bad_folder);

  int status = g_test_run();
  g_autofree char *quoted = g_shell_quote(tmp_dir);
  g_autofree char *command = g_strdup_printf("rm -rf %s", quoted);
  g_spawn_command_line_sync(command, NULL, NULL, NULL, NULL);
  return status;
}
