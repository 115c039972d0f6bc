/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-window-strategies.c — the window's "compare strategies" on 2 CPU workers: one
 * action runs the settings with `main`, then with `allreduce`; both runs are kept in
 * the history under names that say which; the Devices timeline then shows both
 * runs' steps one above the other, each titled with its strategy and its time a step,
 * each device with its overlap. With one device it refuses and starts nothing. The
 * test waits on the window's state, never on a clock. */
#include <locale.h>
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <adwaita.h>
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-device.h"
#include "tdm-history.h"
#include "tdm-devices-page.h"
#include "tdm-history-store.h"
#include "tdm-history-view.h"
#include "tdm-run-item.h"
#include "tdm-spec-entry.h"
#include "tdm-timeline.h"
#include "tdm-window.h"
#include "window-test-util.h"

static char *data_home;

static gboolean
not_comparing(gpointer data)
{
  return !tdm_window_get_comparing_strategies(data) && !tdm_window_get_running(data);
}

/* Two CPU workers, the synthetic set, a small network. */
static TdmWindow *
window_for_run(void)
{
  g_autoptr(GArray) devices = cpu_devices();
  TdmWindow *window;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_present(GTK_WINDOW(window));
  tdm_window_set_devices(window, devices);
  choose_small_run(window, 2, "synthetic", 200, 1);
  g_assert_true(wait_for(not_loading, tdm_window_get_history(window), 30));
  return window;
}

static TdmRunItem *
item_named(TdmHistoryStore *store, const char *name)
{
  for (guint i = 0; i < g_list_model_get_n_items(G_LIST_MODEL(store)); i++) {
    g_autoptr(TdmRunItem) item = g_list_model_get_item(G_LIST_MODEL(store), i);

    if (g_str_equal(tdm_run_item_get_name(item), name))
      return item;
  }
  return NULL;
}

static void
test_compare_strategies(void)
{
  TdmWindow *window = window_for_run();
  TdmHistoryStore *store = tdm_window_get_history(window);
  TdmHistoryView *view = TDM_HISTORY_VIEW(tdm_window_get_history_view(window));
  TdmDevicesPage *page = window_child(window, "devices_page");
  TdmTimeline *timeline = TDM_TIMELINE(template_child(page, "timeline"));
  const char *strategies[2] = { "main", "allreduce" };

  tdm_history_view_set_compare_steps(view, 12);
  g_assert_false(tdm_timeline_has_comparison(timeline));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.compare-strategies", NULL));
  g_assert_true(tdm_window_get_comparing_strategies(window));
  g_assert_true(wait_for(not_comparing, window, 180));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));

  /* The comparison's own record, naming both runs in the order they ran; then both
   * runs, named by their strategy, each trained with it for 12 steps. The page lists
   * records by when they began, as a reload lists them: the comparison began first. */
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 3);
  g_autoptr(TdmRunItem) first = g_list_model_get_item(G_LIST_MODEL(store), 0);
  const TdmRunRecord *both = tdm_run_item_get_record(first);
  g_assert_cmpint(both->kind, ==, TDM_RUN_EXPERIMENT);
  g_assert_cmpint(both->experiment.kind, ==, TDM_EXPERIMENT_STRATEGIES);
  g_assert_cmpuint(both->experiment.runs->len, ==, 2);
  for (int i = 0; i < 2; i++) {
    g_autofree char *name = g_strdup_printf("Strategies: %s", strategies[i]);
    TdmRunItem *item = item_named(store, name);
    g_autoptr(TdmRunItem) listed = g_list_model_get_item(G_LIST_MODEL(store), 1 + i);
    const TdmRunRecord *record;

    g_assert_nonnull(item);
    g_assert_true(listed == item);
    g_assert_cmpstr(both->experiment.runs->pdata[i], ==, tdm_run_item_get_id(item));
    record = tdm_run_item_get_record(item);
    g_assert_cmpstr(tdm_strategy_name(record->config->strategy), ==, strategies[i]);
    g_assert_cmpint(record->final.steps, ==, 12);
    g_assert_cmpint(record->replicas, ==, 2);
  }

  /* The Devices page shows both steps, one above the other, titled with the strategy
   * and its time a step, each device's overlap under its name. */
  g_assert_cmpstr(adw_view_stack_get_visible_child_name(window_child(window, "view_stack")), ==,
                  "devices");
  g_assert_true(tdm_timeline_has_comparison(timeline));
  for (int i = 0; i < 2; i++) {
    const char *title = tdm_timeline_get_title(timeline, i);
    g_autofree char *prefix = g_strdup_printf("%s · ", strategies[i]);
    double ms;

    g_assert_nonnull(title);
    g_test_message("%s", title);
    g_assert_true(g_str_has_prefix(title, prefix));
    g_assert_true(g_str_has_suffix(title, " ms a step"));
    ms = g_ascii_strtod(title + strlen(prefix), NULL);
    g_assert_cmpfloat(ms, >, 0);
    for (int d = 0; d < 2; d++) {
      const char *note = tdm_timeline_get_lane_note(timeline, i, d);

      g_assert_nonnull(note);
      g_assert_true(g_str_has_suffix(note, " hidden"));
    }
    /* Device 0 is the main device: its note says so. */
    g_assert_true(g_str_has_prefix(tdm_timeline_get_lane_note(timeline, i, 0), "main · "));
  }
  g_assert_nonnull(strstr(tdm_history_view_get_strategy_result(view), "see the Devices page"));

  /* Both steps on one axis: `main`'s lanes above, `allreduce`'s under them, and only
   * `main` broadcasts. */
  {
    g_autoptr(GArray) boxes = tdm_timeline_layout(timeline, 800, 400);
    double above_bottom = 0, below_top = INFINITY;
    gboolean broadcast[2] = { FALSE, FALSE }, all_reduce[2] = { FALSE, FALSE };

    g_assert_cmpuint(boxes->len, >, 0);
    for (guint i = 0; i < boxes->len; i++) {
      const TdmTimelineBox *b = &g_array_index(boxes, TdmTimelineBox, i);
      int g = b->reference ? 1 : 0;

      if (g == 0)
        above_bottom = MAX(above_bottom, b->y + b->height);
      else
        below_top = MIN(below_top, b->y);
      broadcast[g] |= b->phase == TDM_PHASE_BROADCAST;
      all_reduce[g] |= b->phase == TDM_PHASE_ALLREDUCE;
      g_assert_cmpfloat(b->x + b->width, <=, 800 + 1e-6);
    }
    g_assert_cmpfloat(below_top, >, above_bottom);
    g_assert_true(broadcast[0]);
    g_assert_false(broadcast[1]);
    g_assert_true(all_reduce[1]);
    g_assert_false(all_reduce[0]);
  }

  /* Read again from the folder, the page lists them in the same order. */
  assert_reload_keeps_order(window);

  /* The next run shows itself again, not the comparison. */
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(wait_for(not_comparing, window, 120));
  g_assert_false(tdm_timeline_has_comparison(timeline));

  /* Stopped during its first run: it ends there, says so, starts no second run. */
  tdm_history_view_set_compare_steps(view, 100000);
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.compare-strategies", NULL));
  g_assert_true(tdm_window_get_running(window));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.stop", NULL));
  g_assert_true(wait_for(not_comparing, window, 120));
  g_assert_cmpstr(tdm_history_view_get_strategy_result(view), ==, "The comparison was stopped before its end.");
  g_assert_false(tdm_timeline_has_comparison(timeline));

  /* One device has nothing to compare: said, nothing started. */
  tdm_device_row_set_workers(cpu_row(window), 1);
  g_assert_true(wait_for(can_start, window, 10));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.compare-strategies", NULL));
  g_assert_false(tdm_window_get_running(window));
  g_assert_false(tdm_window_get_comparing_strategies(window));
  g_assert_true(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));

  destroy_window(window);
}

/* A kept run's mean step carries each device's mean communication hidden under
 * backward (over the sampled steps but the first), so the side-by-side timeline
 * gives each device the overlap the phase table gave it live. */
static void
test_mean_step_overlap(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-runs-XXXXXX", NULL);
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecorder) rec = NULL;
  g_autoptr(TdmHistoryStore) store = NULL;
  TdmPhasesEvent step;
  TdmEvent e = { 0 };

  g_assert_true(tdm_config_set_devices(cfg, "cpu:2", &error));
  cfg->strategy = TDM_STRATEGY_ALLREDUCE;
  rec = tdm_run_recorder_new(history, cfg, "overlap", &error);
  g_assert_no_error(error);
  e.kind = TDM_EVENT_STARTED;
  e.started.replicas = 2;
  tdm_run_recorder_add(&e, rec);
  for (int i = 1; i <= 3; i++) {
    memset(&e, 0, sizeof e);
    e.kind = TDM_EVENT_PHASES;
    e.phases.step = i;
    e.phases.replicas = 2;
    for (int r = 0; r < 2; r++) {
      TdmDevicePhases *d = &e.phases.device[r];

      d->spans = 3;
      d->span[0].phase = TDM_PHASE_FORWARD;
      d->span[0].end_ms = 1;
      d->span[1].phase = TDM_PHASE_BACKWARD;
      d->span[1].start_ms = 1;
      d->span[1].end_ms = 3;
      d->span[2].phase = TDM_PHASE_ALLREDUCE;
      d->span[2].start_ms = 3;
      d->span[2].end_ms = 4;
      /* The first step (left out) hid much more; then 3 ms and 1 ms, per device. */
      d->hidden_ms = i == 1 ? 100 : (r == 0 ? 3 : 1);
    }
    tdm_run_recorder_add(&e, rec);
  }
  memset(&e, 0, sizeof e);
  e.kind = TDM_EVENT_FINISHED;
  e.finished.steps = 3;
  tdm_run_recorder_add(&e, rec);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_assert_no_error(error);

  store = tdm_history_store_new(dir);
  tdm_history_store_reload(store);
  g_assert_true(tdm_run_item_mean_step(tdm_history_store_find(store, tdm_run_recorder_get_id(rec)), &step));
  g_assert_cmpint(step.replicas, ==, 2);
  g_assert_cmpfloat(step.device[0].hidden_ms, ==, 3);
  g_assert_cmpfloat(step.device[1].hidden_ms, ==, 1);
  /* 3 ms hidden against 1 exposed: 75 %; 1 against 1: 50 %. */
  g_assert_cmpfloat(fabs(tdm_device_phases_overlap(&step.device[0]) - 75), <, 1e-4);
  g_assert_cmpfloat(fabs(tdm_device_phases_overlap(&step.device[1]) - 50), <, 1e-4);
  g_clear_object(&store);
  remove_folder(dir);
}

int
main(int argc, char **argv)
{
  int status;

  /* Before GLib reads it: the window's history goes to a folder of this test. */
  data_home = g_dir_make_tmp("tandem-xdg-XXXXXX", NULL);
  g_setenv("XDG_DATA_HOME", data_home, TRUE);
  g_setenv("LANGUAGE", "C", TRUE);
  setlocale(LC_ALL, "");
  gtk_test_init(&argc, &argv, NULL);
  adw_init();

  g_test_add_func("/window-strategies/compare", test_compare_strategies);
  g_test_add_func("/window-strategies/mean-step-overlap", test_mean_step_overlap);

  status = g_test_run();
  remove_folder(data_home);
  g_free(data_home);
  return status;
}
