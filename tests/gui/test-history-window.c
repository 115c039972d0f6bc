/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-history-window.c — part of test-history: the window's own runs. They are
 * recorded and survive a restart, two identical CPU runs overlay point for point
 * (checked on the charts' series), the x axis switches between epochs and steps,
 * "compare with one device" finds the parameters within 1e-5, a scaling run is
 * listed, renamed and deleted, and a history folder that cannot be made leaves the
 * run going. Not the store and the page on runs written by hand (test-history.c).
 */

#include <math.h>
#include <string.h>

#include <glib/gstdio.h>
#include <adwaita.h>

#include "tdm-build-config.h"

#include "tdm-chart.h"
#include "tdm-dashboard.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-device.h"
#include "tdm-devices-page.h"
#include "tdm-history-store.h"
#include "tdm-history-view.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling-page.h"
#include "tdm-series.h"
#include "tdm-scaling.h"
#include "tdm-spec-entry.h"
#include "tdm-timeline.h"
#include "tdm-window.h"
#include "window-test-util.h"
#include "test-history.h"

/* ---- the window ------------------------------------------------------------- */

static gboolean
not_comparing(gpointer data)
{
  return !tdm_window_get_comparing(data) && !tdm_window_get_running(data);
}

/* A window for a small run on two CPU workers and the synthetic set. */
static TdmWindow *
window_for_run(int epochs)
{
  g_autoptr(GArray) devices = cpu_devices();
  TdmWindow *window;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_present(GTK_WINDOW(window));
  tdm_window_set_devices(window, devices);
  choose_small_run(window, 2, "synthetic", 200, epochs);
  g_assert_true(wait_for(not_loading, tdm_window_get_history(window), 30));
  return window;
}

static TdmChart *
chart(TdmWindow *window, const char *id)
{
  return tdm_dashboard_get_chart(window_child(window, "dashboard"), id);
}

static void
run_once(TdmWindow *window)
{
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(wait_for(not_running, window, 120));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
}

/* Every bucket of two series, x and y, equal to the last bit. */
static void
assert_same_series(TdmSeries *a, TdmSeries *b)
{
  guint na, nb;
  const TdmSeriesBucket *ba = tdm_series_get_buckets(a, &na);
  const TdmSeriesBucket *bb = tdm_series_get_buckets(b, &nb);

  g_assert_cmpuint(na, >, 3);
  g_assert_cmpuint(na, ==, nb);
  for (guint i = 0; i < na; i++) {
    g_assert_cmpfloat(ba[i].x_min, ==, bb[i].x_min);
    g_assert_cmpfloat(ba[i].x_max, ==, bb[i].x_max);
    g_assert_cmpfloat(ba[i].y_sum, ==, bb[i].y_sum);
    g_assert_cmpuint(ba[i].n_points, ==, bb[i].n_points);
  }
}

/* Points of the live training curves in the charts: they arrive at the pacer's pace. */
static guint64 expected_points;

static gboolean
loss_caught_up(gpointer data)
{
  return tdm_series_get_n_appended(tdm_chart_get_series(chart(data, "loss"), 0)) >= expected_points &&
         tdm_series_get_n_appended(tdm_chart_get_series(chart(data, "accuracy"), 0)) >= expected_points;
}

static void
test_history_window(void)
{
  g_autofree char *runs = runs_folder();
  TdmWindow *window = window_for_run(1);
  TdmHistoryStore *store = tdm_window_get_history(window);
  TdmDashboard *dashboard = window_child(window, "dashboard");
  const TdmRunRecord *first;
  int series_a, series_b;

  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 0);
  run_once(window);

  /* The run is in the history at once, whole. */
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  first = tdm_run_item_get_record(item_at(store, 0));
  g_assert_true(first->finished);
  g_assert_cmpint(first->replicas, ==, 2);
  g_assert_cmpuint(first->points->len, >, 3);
  /* Its record and its trained network. */
  g_assert_cmpuint(files_in(runs), ==, 2);
  destroy_window(window);

  /* A restart: a new window lists it, from the files alone. */
  window = window_for_run(1);
  store = tdm_window_get_history(window);
  dashboard = window_child(window, "dashboard");
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  first = tdm_run_item_get_record(item_at(store, 0));
  g_assert_true(first->finished);

  /* Ticked, it is drawn on the charts before any run of this window, and its mean
   * step goes under the Devices timeline (it sampled steps). */
  tdm_run_item_set_overlay(item_at(store, 0), TRUE);
  series_a = tdm_dashboard_get_overlay_series(dashboard, "loss", 0);
  g_assert_cmpint(series_a, >=, 2);
  g_assert_true(tdm_timeline_has_reference(
      TDM_TIMELINE(template_child(window_child(window, "devices_page"), "timeline"))));
  g_assert_cmpuint(tdm_series_get_n_appended(tdm_chart_get_series(chart(window, "loss"), series_a)),
                   ==, first->points->len);

  /* The same run again: its live curve lies on the earlier one, point for point. */
  expected_points = first->points->len;
  run_once(window);
  /* The list was read again: its records are new. */
  first = tdm_run_item_get_record(item_at(store, 0));
  g_assert_true(wait_for(loss_caught_up, window, 10));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 2);
  assert_same_series(tdm_chart_get_series(chart(window, "loss"), 0),
                     tdm_chart_get_series(chart(window, "loss"), series_a));
  assert_same_series(tdm_chart_get_series(chart(window, "accuracy"), 0),
                     tdm_chart_get_series(chart(window, "accuracy"),
                                          tdm_dashboard_get_overlay_series(dashboard, "accuracy", 0)));

  /* Both ticked: the two overlays coincide too. */
  tdm_run_item_set_overlay(item_at(store, 1), TRUE);
  series_a = tdm_dashboard_get_overlay_series(dashboard, "loss", 0);
  series_b = tdm_dashboard_get_overlay_series(dashboard, "loss", 1);
  g_assert_cmpint(series_b, >, series_a);
  assert_same_series(tdm_chart_get_series(chart(window, "loss"), series_a),
                     tdm_chart_get_series(chart(window, "loss"), series_b));

  /* An SVG export draws the overlays as paths and names them in its legend. */
  {
    g_autofree char *dir = g_dir_make_tmp("tandem-svg-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "loss.svg", NULL);
    g_autofree char *svg = NULL;
    g_autoptr(GError) error = NULL;

    g_assert_true(tdm_dashboard_export_chart(dashboard, "loss", "svg", path, &error));
    g_assert_no_error(error);
    g_assert_true(g_file_get_contents(path, &svg, NULL, NULL));
    g_assert_nonnull(strstr(svg, tdm_run_item_get_name(item_at(store, 0))));
    g_assert_null(strstr(svg, "<image"));
    remove_folder(dir);
  }

  /* By step: the same points against the step, live and overlaid. */
  g_assert_true(gtk_widget_activate_action_variant(GTK_WIDGET(dashboard), "dashboard.x-axis",
                                                   g_variant_new_string("step")));
  g_assert_cmpstr(tdm_chart_get_x_label(chart(window, "loss")), ==, "Step");
  {
    double x_live, x_overlay;

    g_assert_true(tdm_series_get_last(tdm_chart_get_series(chart(window, "loss"), 0), &x_live, NULL));
    g_assert_true(tdm_series_get_last(tdm_chart_get_series(chart(window, "loss"),
                                                           tdm_dashboard_get_overlay_series(dashboard, "loss", 0)),
                                      &x_overlay, NULL));
    g_assert_cmpfloat(x_live, ==, (double)first->final.steps);
    g_assert_cmpfloat(x_overlay, ==, x_live);
  }
  assert_same_series(tdm_chart_get_series(chart(window, "loss"), 0),
                     tdm_chart_get_series(chart(window, "loss"),
                                          tdm_dashboard_get_overlay_series(dashboard, "loss", 1)));
  g_assert_true(gtk_widget_activate_action_variant(GTK_WIDGET(dashboard), "dashboard.x-axis",
                                                   g_variant_new_string("epoch")));
  {
    g_autofree char *axis = NULL;

    g_object_get(dashboard, "x-axis", &axis, NULL);
    g_assert_cmpstr(axis, ==, "epoch");
  }
  g_assert_cmpstr(tdm_chart_get_x_label(chart(window, "loss")), ==, "Epoch");

  /* The ticks are remembered for the next start. */
  {
    g_autoptr(GSettings) settings = g_settings_new(TDM_APP_ID);
    g_auto(GStrv) ids = g_settings_get_strv(settings, "overlay-runs");

    g_assert_cmpuint(g_strv_length(ids), ==, 2);
    g_assert_cmpstr(ids[0], ==, tdm_run_item_get_id(item_at(store, 0)));
  }

  /* Unticked, gone from the charts. */
  tdm_run_item_set_overlay(item_at(store, 0), FALSE);
  tdm_run_item_set_overlay(item_at(store, 1), FALSE);
  g_assert_cmpint(tdm_dashboard_get_overlay_series(dashboard, "loss", 0), ==, -1);
  g_assert_cmpuint(tdm_chart_get_n_series(chart(window, "loss")), ==, 2);

  destroy_window(window);
  remove_folder(runs);
}

static void
test_history_compare(void)
{
  g_autofree char *runs = runs_folder();
  TdmWindow *window = window_for_run(1);
  TdmHistoryStore *store = tdm_window_get_history(window);
  TdmHistoryView *view = TDM_HISTORY_VIEW(tdm_window_get_history_view(window));
  double difference;

  tdm_history_view_set_compare_steps(view, 30);
  g_assert_true(isnan(tdm_window_get_compare_difference(window)));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.compare-one-device", NULL));
  g_assert_true(tdm_window_get_comparing(window));
  /* One experiment at a time: a sweep asked for now does not start. */
  gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL);
  g_assert_false(sweep_running(window));
  g_assert_true(tdm_window_get_comparing(window));
  g_assert_true(wait_for(not_comparing, window, 180));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));

  difference = tdm_window_get_compare_difference(window);
  g_test_message("2 CPU workers against one device after 30 steps: %g", difference);
  g_assert_true(isfinite(difference));
  /* Compare runs in exact mode: not close, the same bits. */
  g_assert_cmpfloat(difference, ==, 0);
  {
    const char *result = tdm_history_view_get_compare_result(view);

    g_assert_nonnull(result);
    g_assert_nonnull(strstr(result, "identical: 0 of "));
    g_assert_nonnull(strstr(result, "2 devices against one, after 30 steps"));
    /* It names the network it measured. */
    g_assert_true(g_str_has_prefix(result, "fc16,relu,fc10: "));
  }
  /* Another network chosen: the result says it is another network's; the same one
   * again, and it is this one's again. */
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), "fc32,relu,fc10");
  g_assert_true(wait_for(can_start, window, 10));
  g_assert_true(g_str_has_prefix(tdm_history_view_get_compare_result(view),
                                 "Not compared yet with the network chosen now."));
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), "fc16,relu,fc10");
  g_assert_true(wait_for(can_start, window, 10));
  g_assert_true(g_str_has_prefix(tdm_history_view_get_compare_result(view), "fc16,relu,fc10: "));

  /* The comparison's own record, naming both runs and its result, then both runs,
   * 30 steps each; the N-device one stays drawn. The page lists records by when they
   * began, as a reload lists them: the comparison began before its runs. */
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 3);
  {
    const TdmRunRecord *both = tdm_run_item_get_record(item_at(store, 0));
    const TdmRunRecord *many = tdm_run_item_get_record(item_at(store, 1));
    const TdmRunRecord *one = tdm_run_item_get_record(item_at(store, 2));

    g_assert_true(tdm_run_item_is_experiment(item_at(store, 0)));
    g_assert_false(tdm_run_item_is_sweep(item_at(store, 0)));
    g_assert_cmpint(both->experiment.kind, ==, TDM_EXPERIMENT_COMPARE);
    g_assert_cmpuint(both->experiment.runs->len, ==, 2);
    g_assert_cmpstr(both->experiment.runs->pdata[0], ==, many->id);
    g_assert_cmpstr(both->experiment.runs->pdata[1], ==, one->id);
    g_assert_nonnull(strstr(both->experiment.result, "identical: 0 of "));

    g_assert_cmpint(many->replicas, ==, 2);
    g_assert_cmpint(one->replicas, ==, 1);
    g_assert_cmpint(many->final.steps, ==, 30);
    g_assert_cmpint(one->final.steps, ==, 30);
    g_assert_cmpint(one->config->batch, ==, many->config->batch);
    g_assert_true(tdm_run_item_get_overlay(item_at(store, 1)));
  }

  /* Both loss curves on the chart: the one-device run live, the N-device run under
   * it, step for step and equal up to rounding. */
  {
    TdmDashboard *dashboard = window_child(window, "dashboard");
    int overlay = tdm_dashboard_get_overlay_series(dashboard, "loss", 0);
    const TdmRunRecord *one = tdm_run_item_get_record(item_at(store, 2));
    guint na, nb;
    const TdmSeriesBucket *a, *b;

    g_assert_cmpint(overlay, >=, 2);
    expected_points = one->points->len;
    g_assert_true(wait_for(loss_caught_up, window, 10));
    a = tdm_series_get_buckets(tdm_chart_get_series(chart(window, "loss"), 0), &na);
    b = tdm_series_get_buckets(tdm_chart_get_series(chart(window, "loss"), overlay), &nb);
    g_assert_cmpuint(na, ==, nb);
    g_assert_cmpuint(na, >=, 3);
    for (guint i = 0; i < na; i++) {
      g_assert_cmpfloat(a[i].x_min, ==, b[i].x_min);
      g_assert_cmpfloat(fabs(a[i].y_sum - b[i].y_sum), <=, 1e-4 * fabs(b[i].y_sum));
    }
  }

  /* Read again from the folder, the page lists them in the same order. */
  assert_reload_keeps_order(window);

  /* One device alone cannot be compared with one device: said, nothing started. */
  tdm_device_row_set_workers(cpu_row(window), 1);
  g_assert_true(wait_for(can_start, window, 10));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.compare-one-device", NULL));
  g_assert_false(tdm_window_get_running(window));
  g_assert_true(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));

  destroy_window(window);
  remove_folder(runs);
}

/* A scaling run of the window over 1 and 2 CPU workers: it completes, the History
 * page lists it (a sweep, two points), a restart lists it again, it is renamed and
 * deleted for good. */
static void
test_history_window_sweep(void)
{
  g_autofree char *runs = runs_folder();
  TdmWindow *window = window_for_run(1);
  TdmHistoryStore *store = tdm_window_get_history(window);
  TdmScalingPage *page = window_child(window, "scaling_page");
  g_autoptr(GError) error = NULL;
  TdmRunItem *item;
  const TdmRunRecord *record;

  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 0);
  choose_sweep(window, TDM_SCALING_STRONG, 20);
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL));
  g_assert_true(sweep_running(window));
  /* One experiment at a time: a comparison asked for now does not start. */
  gtk_widget_activate_action(GTK_WIDGET(window), "win.compare-one-device", NULL);
  g_assert_false(tdm_window_get_comparing(window));
  g_assert_true(sweep_running(window));
  g_assert_true(wait_for(sweep_over, window, 300));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  /* Listed on the History page as it ended, without a reload. */
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  /* Beside the result, the machine's cores and what two workers need (the engine's
   * rule), whatever this machine has. */
  {
    GtkWidget *label = template_child(page, "cores_label");
    const char *note = gtk_label_get_label(GTK_LABEL(label));
    g_autofree char *have = g_strdup_printf("This machine has %d cores.",
                                            tdm_scaling_cores_available());

    g_assert_true(gtk_widget_get_visible(label));
    g_test_message("%s", note);
    g_assert_true(g_str_has_prefix(note, have));
    if (tdm_scaling_cores_available() < tdm_scaling_cores_needed(2))
      g_assert_nonnull(strstr(note, "2 CPU workers need 3 cores"));
    else
      g_assert_nonnull(strstr(note, "Enough for 2 CPU workers"));
  }

  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  item = item_at(store, 0);
  g_assert_true(tdm_run_item_is_sweep(item));
  /* The toast names the record listed. */
  {
    g_autofree char *toast = toast_text(window);
    g_autofree char *kept_as = g_strdup_printf("Scaling run kept in the history as “%s”",
                                               tdm_run_item_get_name(item));

    g_assert_nonnull(strstr(toast, kept_as));
  }
  record = tdm_run_item_get_record(item);
  g_assert_true(record->finished);
  g_assert_false(record->final.stopped);
  g_assert_cmpint(record->experiment.mode, ==, TDM_SCALING_STRONG);
  g_assert_cmpint(record->experiment.steps, ==, 20);
  g_assert_cmpuint(record->experiment.points->len, ==, 2);
  g_assert_cmpint(g_array_index(record->experiment.points, TdmScalingPoint, 0).devices, ==, 1);
  g_assert_cmpint(g_array_index(record->experiment.points, TdmScalingPoint, 1).devices, ==, 2);
  g_assert_cmpint(g_array_index(record->experiment.points, TdmScalingPoint, 1).batch, ==, 200);
  g_assert_cmpfloat(g_array_index(record->experiment.points, TdmScalingPoint, 1).samples_per_second, >, 0);
  /* The page's points are the record's. */
  {
    TdmScalingChart *chart = TDM_SCALING_CHART(tdm_scaling_page_get_chart(page));

    g_assert_cmpuint(tdm_scaling_chart_get_n_points(chart), ==, 2);
    g_assert_cmpfloat(tdm_scaling_chart_get_point(chart, 1)->speedup, ==,
                      g_array_index(record->experiment.points, TdmScalingPoint, 1).speedup);
  }
  g_assert_cmpuint(files_in(runs), ==, 1);
  destroy_window(window);

  /* A restart: listed from the file alone, renamed, then deleted from the page. */
  window = window_for_run(1);
  store = tdm_window_get_history(window);
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  item = item_at(store, 0);
  g_assert_true(tdm_run_item_is_sweep(item));
  g_assert_cmpuint(tdm_run_item_get_record(item)->experiment.points->len, ==, 2);
  g_assert_true(tdm_history_store_rename(store, item, "1 and 2 workers", &error));
  g_assert_no_error(error);
  destroy_window(window);

  window = window_for_run(1);
  store = tdm_window_get_history(window);
  item = item_at(store, 0);
  g_assert_cmpstr(tdm_run_item_get_name(item), ==, "1 and 2 workers");
  g_assert_true(gtk_widget_activate_action(history_row(tdm_window_get_history_view(window), item),
                                          "run.delete", NULL));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 0);
  g_assert_cmpuint(files_in(runs), ==, 1);   /* until the undo is gone */
  destroy_window(window);
  g_assert_cmpuint(files_in(runs), ==, 0);

  remove_folder(runs);
}

/* A history folder that cannot be made (a file stands in its way): the run still
 * trains and ends normally, and a scaling run measures, only neither is kept. */
static void
test_history_unwritable(void)
{
  g_autofree char *runs = runs_folder();
  TdmWindow *window;

  remove_folder(runs);
  {
    g_autofree char *parent = g_path_get_dirname(runs);

    g_assert_cmpint(g_mkdir_with_parents(parent, 0700), ==, 0);
  }
  g_assert_true(g_file_set_contents(runs, "not a folder", -1, NULL));
  window = window_for_run(1);
  run_once(window);
  g_assert_true(g_str_has_prefix(adw_view_switcher_title_get_subtitle(window_child(window, "window_title")),
                                 "Finished"));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(tdm_window_get_history(window))), ==, 0);
  destroy_window(window);

  /* A scaling run too, in a window whose toasts are its own: it measures both points,
   * only it is not kept, and the toast says why, naming the folder. */
  window = window_for_run(1);
  {
    TdmScalingPage *page = window_child(window, "scaling_page");
    g_autofree char *toast = NULL;

    choose_sweep(window, TDM_SCALING_STRONG, 20);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL));
    g_assert_true(wait_for(sweep_over, window, 300));
    g_assert_cmpuint(tdm_scaling_chart_get_n_points(TDM_SCALING_CHART(tdm_scaling_page_get_chart(page))),
                     ==, 2);
    toast = toast_text(window);
    g_test_message("%s", toast);
    g_assert_nonnull(strstr(toast, "The run history could not be written in full."));
    g_assert_nonnull(strstr(toast, runs));
    g_assert_null(strstr(toast, "kept in the history"));
    g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(tdm_window_get_history(window))), ==, 0);
    g_assert_true(tdm_window_get_can_start(window));
  }
  destroy_window(window);
  g_unlink(runs);
}

void
test_history_add_window(void)
{
  g_test_add_func("/history/window", test_history_window);
  g_test_add_func("/history/compare", test_history_compare);
  g_test_add_func("/history/window-sweep", test_history_window_sweep);
  g_test_add_func("/history/unwritable", test_history_unwritable);
}
