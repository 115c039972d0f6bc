/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-history-hostile.c: the window's History against hostile run folders.
 *
 * A FIFO named x.jsonl (which would block a plain open for ever), a run file whose
 * one line nests 100,000 arrays deep (which would overflow the loading thread's
 * stack), one whose second line is 3 MB of numbers (which a reader that parses
 * whatever it is given would turn into hundreds of MB of tree), and two hundred real
 * runs beside them: the store's listing thread comes back with every real run and one
 * problem naming each bad file (the long line's naming the limit), while the History
 * page on the store stays up. Runs under the Xvfb that
 * xvfb-run-test.sh starts; the waits only bound a hung run.
 */

#include <string.h>
#include <sys/stat.h>

#include <glib/gstdio.h>
#include <adwaita.h>

#include "tdm-history-store.h"
#include "tdm-history-view.h"
#include "window-test-util.h"

#define RUNS 200

static void
write_runs(const char *dir)
{
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) config = tdm_config_new();

  for (int i = 0; i < RUNS; i++) {
    g_autoptr(GError) error = NULL;
    g_autofree char *name = g_strdup_printf("run %d", i);
    TdmRunRecorder *rec = tdm_run_recorder_new(history, config, name, &error);

    g_assert_no_error(error);
    for (int s = 1; s <= 20; s++) {
      TdmEvent e = {.kind = TDM_EVENT_STEP};

      e.step.step = s * 10;
      e.step.train_loss = 2.0 / s;
      e.step.elapsed = s * 0.1;
      tdm_run_recorder_add(&e, rec);
    }
    g_assert_true(tdm_run_recorder_finish(rec, &error));
    tdm_run_recorder_free(rec);
  }
}

static void
test_hostile_folder(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-hostile-XXXXXX", NULL);
  g_autofree char *fifo = g_build_filename(dir, "x.jsonl", NULL);
  g_autofree char *deep = g_build_filename(dir, "deep.jsonl", NULL);
  g_autofree char *wide = g_build_filename(dir, "wide.jsonl", NULL);
  GString *line = g_string_new("{\"type\":\"settings\",\"config\":");
  g_autoptr(TdmHistoryStore) store = NULL;
  g_auto(GStrv) problems = NULL;
  gboolean saw_fifo = FALSE, saw_deep = FALSE, saw_wide = FALSE;
  GtkWidget *window, *view;

  write_runs(dir);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  for (int i = 0; i < 100000; i++)
    g_string_append_c(line, '[');
  for (int i = 0; i < 100000; i++)
    g_string_append_c(line, ']');
  g_string_append(line, "}\n");
  g_assert_true(g_file_set_contents(deep, line->str, (gssize) line->len, NULL));
  g_string_free(line, TRUE);
  {
    g_autoptr(TdmConfig) config = tdm_config_new();
    g_autofree char *json = tdm_config_to_json(config);
    GString *text = g_string_new("{\"type\":\"settings\",\"config\":");

    g_string_append_printf(text, "%s}\n{\"type\":\"phases\",\"devices\":[", json);
    while (text->len < 3000000)
      g_string_append(text, "[0],");
    g_string_append(text, "[0]]}\n");
    g_assert_true(g_file_set_contents(wide, text->str, (gssize) text->len, NULL));
    g_string_free(text, TRUE);
  }

  store = tdm_history_store_new(dir);
  window = gtk_window_new();
  view = tdm_history_view_new(store);
  gtk_window_set_child(GTK_WINDOW(window), view);
  gtk_window_present(GTK_WINDOW(window));
  tdm_history_store_reload_async(store);
  g_assert_true(tdm_history_store_get_loading(store));
  /* The page answers while the thread reads. */
  drain();
  g_assert_true(wait_for(not_loading, store, 120));

  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, RUNS);
  problems = tdm_history_store_get_problems(store);
  g_assert_cmpuint(g_strv_length(problems), ==, 3);
  for (guint i = 0; problems[i] != NULL; i++) {
    saw_fifo |= strstr(problems[i], "x.jsonl") != NULL && strstr(problems[i], "FIFO") != NULL;
    saw_deep |= strstr(problems[i], "deep.jsonl") != NULL && strstr(problems[i], "nest") != NULL;
    saw_wide |= strstr(problems[i], "wide.jsonl") != NULL &&
                strstr(problems[i], "line 2 is longer than 1.0 MB") != NULL;
  }
  g_assert_true(saw_fifo);
  g_assert_true(saw_deep);
  g_assert_true(saw_wide);

  /* A second listing supersedes a first still under way; the last one's answer
   * stands. */
  tdm_history_store_reload_async(store);
  tdm_history_store_reload_async(store);
  g_assert_true(wait_for(not_loading, store, 120));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, RUNS);

  gtk_window_destroy(GTK_WINDOW(window));
  drain();
  g_clear_object(&store);
  remove_folder(dir);
}

int
main(int argc, char **argv)
{
  gtk_test_init(&argc, &argv, NULL);
  adw_init();
  g_test_add_func("/history-hostile/folder", test_hostile_folder);
  return g_test_run();
}
