/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-window-runs.c — runs a person keeps: every run's network is kept beside its
 * History entry and the next run leaves it alone; Save copies the last one; a
 * checkpoint resumes where it stopped and ends with the same bits as a run that
 * never stopped; the kept networks stay under the limit, oldest first, their
 * entries staying; a History row classifies with its own run's network. Small runs
 * on one CPU worker and the synthetic set, in a data folder of the test's own. */
#include <string.h>
#include <glib/gstdio.h>
#include <adwaita.h>
#include "tdm-application.h"
#include "tdm-checkpoint.h"
#include "tdm-classify-view.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-row.h"
#include "tdm-history-store.h"
#include "tdm-devices-page.h"
#include "tdm-spec-entry.h"
#include "tdm-timeline.h"
#include "tdm-window.h"
#include "window-test-util.h"

static char *tmp_dir;

static TdmWindow *
window_for_runs(int epochs)
{
  TdmWindow *window;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_present(GTK_WINDOW(window));
  choose_small_run(window, 1, "synthetic", 200, epochs);
  g_assert_true(wait_for(not_loading, tdm_window_get_history(window), 30));
  return window;
}

static gboolean
idle(gpointer window)
{
  return !tdm_window_get_running(window);
}

/* The newest run's id, once the history lists it. */
static const char *
newest_run(TdmWindow *window)
{
  GListModel *runs = G_LIST_MODEL(tdm_window_get_history(window));
  guint n = g_list_model_get_n_items(runs);
  g_autoptr(TdmRunItem) item = NULL;

  g_assert_cmpuint(n, >, 0);
  item = g_list_model_get_item(runs, n - 1);
  return g_intern_string(tdm_run_item_get_id(item));
}

/* Starts a run and waits for it to end; returns its id. */
static const char *
run_once(TdmWindow *window)
{
  guint before = g_list_model_get_n_items(G_LIST_MODEL(tdm_window_get_history(window)));

  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(wait_for(idle, window, 300));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(tdm_window_get_history(window))), ==,
                   before + 1);
  return newest_run(window);
}

static GBytes *
contents(const char *path)
{
  char *data = NULL;
  gsize length = 0;

  g_assert_true(g_file_get_contents(path, &data, &length, NULL));
  return g_bytes_new_take(data, length);
}

/* Every tensor of a and b, bit for bit. */
static void
assert_same_tensors(const char *a, const char *b)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmCheckpoint) ca = tdm_checkpoint_load(a, &error);
  g_autoptr(TdmCheckpoint) cb = tdm_checkpoint_load(b, &error);

  g_assert_no_error(error);
  g_assert_cmpint(tdm_checkpoint_count(ca), >, 0);
  g_assert_cmpint(tdm_checkpoint_count(ca), ==, tdm_checkpoint_count(cb));
  for (int i = 0; i < tdm_checkpoint_count(ca); i++) {
    const TdmTensor *ta = tdm_checkpoint_nth(ca, i);
    const TdmTensor *tb = tdm_checkpoint_get(cb, ta->name);
    size_t n = 1;

    g_assert_nonnull(tb);
    g_assert_cmpint(ta->rank, ==, tb->rank);
    for (int d = 0; d < ta->rank; d++) {
      g_assert_cmpint(ta->shape[d], ==, tb->shape[d]);
      n *= (size_t)ta->shape[d];
    }
    g_assert_cmpmem(ta->data, n * sizeof(float), tb->data, n * sizeof(float));
  }
}

/* Two runs: each keeps its own network, the second does not touch the first's, and
 * Save writes a copy of the last. */
static void
test_each_run_kept(void)
{
  TdmWindow *window = window_for_runs(1);
  g_autofree char *saved = g_build_filename(tmp_dir, "mine.safetensors", NULL);
  g_autofree char *first_path = NULL, *second_path = NULL;
  g_autoptr(GBytes) first = NULL, first_after = NULL, second = NULL, copy = NULL;
  g_autoptr(GError) error = NULL;
  const char *a, *b;

  tdm_window_set_max_steps(window, 20);
  a = run_once(window);
  first_path = tdm_window_weights_path(window, a);
  g_assert_true(g_file_test(first_path, G_FILE_TEST_IS_REGULAR));
  first = contents(first_path);
  g_assert_true(gtk_widget_is_sensitive(GTK_WIDGET(window)));

  tdm_window_set_max_steps(window, 40);
  b = run_once(window);
  g_assert_cmpstr(a, !=, b);
  second_path = tdm_window_weights_path(window, b);
  g_assert_cmpstr(first_path, !=, second_path);
  first_after = contents(first_path);
  second = contents(second_path);
  g_assert_true(g_bytes_equal(first, first_after));
  g_assert_false(g_bytes_equal(first, second));

  /* Save: the last run's network, as a file of one's own. */
  g_assert_true(tdm_window_save_network(window, saved, &error));
  g_assert_no_error(error);
  copy = contents(saved);
  g_assert_true(g_bytes_equal(copy, second));

  /* A History row classifies with its own run's network. */
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.classify-run", "s", a));
  {
    g_autofree char *checkpoint = tdm_window_get_run_checkpoint(window);

    g_assert_cmpstr(checkpoint, ==, first_path);
  }
  destroy_window(window);
}

/* Stopped at step 450 of 2 × 300, resumed to its end: the same bits as one run
 * that never stopped, optimizer state and the epoch's shuffle included. */
static void
test_resume_bit_exact(void)
{
  TdmWindow *window = window_for_runs(2);
  g_autofree char *whole = NULL, *part = NULL, *resumed = NULL;
  g_autoptr(GError) error = NULL;
  const char *id;

  tdm_window_set_max_steps(window, 0);
  whole = tdm_window_weights_path(window, run_once(window));
  tdm_window_set_max_steps(window, 450);
  part = tdm_window_weights_path(window, run_once(window));

  tdm_window_set_max_steps(window, 0);
  g_assert_true(tdm_window_resume(window, part, 0, &error));
  g_assert_no_error(error);
  g_assert_true(wait_for(idle, window, 300));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  id = newest_run(window);
  {
    TdmRunItem *item = tdm_history_store_find(tdm_window_get_history(window), id);
    const TdmRunRecord *record = tdm_run_item_get_record(item);
    const TdmHistoryPoint *first;

    /* It went on where the checkpoint stopped, and on to the end. */
    g_assert_cmpuint(record->points->len, >, 0);
    first = &g_array_index(record->points, TdmHistoryPoint, 0);
    g_assert_cmpint(first->step, >, 450);
    g_assert_cmpint(record->final.steps, ==, 600);
    g_assert_false(record->final.stopped);
  }
  resumed = tdm_window_weights_path(window, id);
  assert_same_tensors(whole, resumed);

  /* A run that trained all its epochs goes on only when asked for more. */
  g_assert_false(tdm_window_resume(window, whole, 0, &error));
  g_assert_nonnull(strstr(error->message, "choose more epochs"));
  g_clear_error(&error);
  g_assert_true(tdm_window_resume(window, whole, 3, &error));
  g_assert_no_error(error);
  g_assert_true(wait_for(idle, window, 300));
  g_assert_cmpint(tdm_run_item_get_record(tdm_history_store_find(tdm_window_get_history(window),
                                                                 newest_run(window)))->final.steps,
                  ==, 900);
  destroy_window(window);
}

/* A limit of 0: only the newest run keeps its network; older runs stay listed, and
 * asking one of them for its network says why there is none. */
static void
test_limit(void)
{
  TdmWindow *window = window_for_runs(1);
  g_autoptr(GSettings) settings = g_settings_new("io.github.tandem.Tandem");
  g_autofree char *first_path = NULL, *second_path = NULL;
  const char *a, *b;

  tdm_window_set_max_steps(window, 10);
  a = run_once(window);
  first_path = tdm_window_weights_path(window, a);
  g_assert_true(g_file_test(first_path, G_FILE_TEST_IS_REGULAR));
  g_settings_set_int(settings, "kept-networks-limit", 0);
  /* The newest keeps its own whatever the limit. */
  g_assert_true(g_file_test(first_path, G_FILE_TEST_IS_REGULAR));
  b = run_once(window);
  second_path = tdm_window_weights_path(window, b);
  g_assert_false(g_file_test(first_path, G_FILE_TEST_EXISTS));
  g_assert_true(g_file_test(second_path, G_FILE_TEST_IS_REGULAR));
  g_assert_nonnull(tdm_history_store_find(tdm_window_get_history(window), a));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.resume-run", "s", a));
  g_assert_false(tdm_window_get_running(window));
  destroy_window(window);
  reset_settings();
}

/* A run that took no step has nothing to show: it is not kept (here a checkpoint
 * resumed at the step its run must end at). */
static void
test_no_step_not_kept(void)
{
  TdmWindow *window = window_for_runs(1);
  GListModel *runs = G_LIST_MODEL(tdm_window_get_history(window));
  g_autofree char *weights = NULL;
  g_autoptr(GError) error = NULL;
  guint kept;

  tdm_window_set_max_steps(window, 20);
  weights = tdm_window_weights_path(window, run_once(window));
  kept = g_list_model_get_n_items(runs);
  g_assert_true(tdm_window_resume(window, weights, 0, &error));
  g_assert_no_error(error);
  g_assert_true(wait_for(idle, window, 300));
  g_assert_cmpuint(g_list_model_get_n_items(runs), ==, kept);
  tdm_history_store_reload(tdm_window_get_history(window));
  g_assert_cmpuint(g_list_model_get_n_items(runs), ==, kept);
  destroy_window(window);
}

/* Two ticked runs, of one and of two workers: the timeline shows the first under
 * the live run until the other is chosen from its History menu. */
static void
test_timeline_reference(void)
{
  TdmWindow *window = window_for_runs(1);
  TdmTimeline *timeline = TDM_TIMELINE(template_child(window_child(window, "devices_page"),
                                                      "timeline"));
  TdmHistoryStore *store = tdm_window_get_history(window);
  const char *one, *two;

  tdm_window_set_max_steps(window, 20);
  one = run_once(window);
  tdm_device_row_set_workers(cpu_row(window), 2);
  two = run_once(window);
  tdm_run_item_set_overlay(tdm_history_store_find(store, one), TRUE);
  tdm_run_item_set_overlay(tdm_history_store_find(store, two), TRUE);
  g_assert_nonnull(tdm_timeline_get_reference(timeline));
  g_assert_cmpint(tdm_timeline_get_reference(timeline)->replicas, ==, 1);

  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.timeline-reference", "s", two));
  g_assert_cmpint(tdm_timeline_get_reference(timeline)->replicas, ==, 2);
  /* Unticked, it gives the place back to the first ticked run. */
  tdm_run_item_set_overlay(tdm_history_store_find(store, two), FALSE);
  g_assert_cmpint(tdm_timeline_get_reference(timeline)->replicas, ==, 1);
  destroy_window(window);
}

int
main(int argc, char **argv)
{
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  tmp_dir = g_dir_make_tmp("tandem-runs-XXXXXX", NULL);
  g_setenv("XDG_DATA_HOME", tmp_dir, TRUE);
  window_test_init(&argc, &argv);

  g_test_add_func("/window-runs/each-run-kept", test_each_run_kept);
  g_test_add_func("/window-runs/resume-bit-exact", test_resume_bit_exact);
  g_test_add_func("/window-runs/limit", test_limit);
  g_test_add_func("/window-runs/no-step-not-kept", test_no_step_not_kept);
  g_test_add_func("/window-runs/timeline-reference", test_timeline_reference);

  int status = g_test_run();
  remove_folder(tmp_dir);
  g_free(tmp_dir);
  return status;
}
