/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-layout-charts.c — the window's charts at 360, 700 and 1024 px, in English and
 * in Japanese, with a run going and five earlier runs of long names ticked: in every
 * chart the title, the legend, the y axis's title and tick labels, the plot and the
 * x axis's labels lie inside the card and apart from each other, the y axis's title
 * is whole, and the plot keeps at least half of the card's height below the title.
 * Boxes from tdm_chart_get_layout() at the charts' allocated sizes, not pixels; runs
 * under xvfb-run-test.sh.
 */

#include <locale.h>
#include <string.h>

#include <adwaita.h>

#include "tdm-application.h"
#include "tdm-chart.h"
#include "tdm-dashboard.h"
#include "tdm-history.h"
#include "tdm-history-store.h"
#include "tdm-window.h"
#include "window-test-util.h"

#define N_RUNS 5

/* A run of the history written by hand: a few summaries and an end. */
static void
earlier_run(TdmHistory *history, int index)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecorder) rec = NULL;
  g_autofree char *name = g_strdup_printf("learning rate %d with a long name", index + 1);
  TdmEvent e = {.kind = TDM_EVENT_STARTED};

  g_free(cfg->dataset);
  cfg->dataset = g_strdup("synthetic");
  rec = tdm_run_recorder_new(history, cfg, name, &error);
  g_assert_no_error(error);
  e.started.replicas = 1;
  tdm_run_recorder_add(&e, rec);
  for (int i = 1; i <= 8; i++) {
    memset(&e, 0, sizeof e);
    e.kind = TDM_EVENT_STEP;
    e.step.step = 10 * i;
    e.step.epoch_float = 0.125 * i;
    e.step.train_loss = 2.0 / (i + index);
    e.step.train_accuracy = 0.1 * i;
    e.step.samples_per_second = 1000;
    e.step.elapsed = 0.5 * i;
    tdm_run_recorder_add(&e, rec);
  }
  memset(&e, 0, sizeof e);
  e.kind = TDM_EVENT_FINISHED;
  e.finished.steps = 80;
  e.finished.elapsed = 4;
  e.finished.test_loss = 0.5;
  e.finished.test_accuracy = 0.8;
  tdm_run_recorder_add(&e, rec);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
}

/* The live run: started on two CPU workers, a few steps and device figures in. */
static void
live_run(TdmDashboard *dashboard)
{
  TdmEvent e = {.kind = TDM_EVENT_STARTED};

  e.started.replicas = 2;
  for (int r = 0; r < 2; r++)
    g_strlcpy(e.started.device[r], "cpu", sizeof e.started.device[r]);
  e.started.batch = 100;
  e.started.epochs = 1;
  e.started.steps_per_epoch = 100;
  e.started.total_steps = 100;
  tdm_dashboard_handle_event(dashboard, &e);
  for (int i = 1; i <= 6; i++) {
    memset(&e, 0, sizeof e);
    e.kind = TDM_EVENT_STEP;
    e.step.step = 10 * i;
    e.step.epoch_float = 0.1 * i;
    e.step.fraction = 0.1 * i;
    e.step.train_loss = 1.5 / i;
    e.step.train_accuracy = 0.12 * i;
    e.step.samples_per_second = 12345;
    e.step.elapsed = i;
    tdm_dashboard_handle_event(dashboard, &e);
    memset(&e, 0, sizeof e);
    e.kind = TDM_EVENT_DEVICES;
    e.devices.step = 10 * i;
    e.devices.replicas = 2;
    for (int r = 0; r < 2; r++) {
      e.devices.device[r].compute_ms = 4;
      e.devices.device[r].comm_ms = 1;
      e.devices.device[r].wait_ms = 0.5;
      e.devices.device[r].tandem_bytes = (gint64)(r + 1) << 24;
      e.devices.device[r].used_bytes = -1;
      e.devices.device[r].total_bytes = -1;
      e.devices.device[r].utilization = 50;
    }
    tdm_dashboard_handle_event(dashboard, &e);
  }
}

/* The chart draws a plot at its size: the dashboard's pacer has given it its points. */
static gboolean
has_plot(gpointer chart)
{
  TdmChartLayout l;

  return tdm_chart_get_layout(chart, gtk_widget_get_width(chart), gtk_widget_get_height(chart), &l);
}

static gboolean
apart(const GdkRectangle *a, const GdkRectangle *b)
{
  return a->width <= 0 || a->height <= 0 || b->width <= 0 || b->height <= 0 ||
         !gdk_rectangle_intersect(a, b, NULL);
}

static void
check_chart(TdmChart *chart, const char *id, int window_width)
{
  int width = gtk_widget_get_width(GTK_WIDGET(chart)), height = gtk_widget_get_height(GTK_WIDGET(chart));
  TdmChartLayout l;
  const struct {
    const char *name;
    const GdkRectangle *box;
  } parts[] = {
    {"title", &l.title}, {"legend", &l.legend}, {"y title", &l.y_title}, {"y ticks", &l.y_ticks},
    {"plot", &l.plot}, {"x ticks", &l.x_ticks}, {"x title", &l.x_title},
  };

  g_assert_true(gtk_widget_get_mapped(GTK_WIDGET(chart)));
  if (!tdm_chart_get_layout(chart, width, height, &l))
    g_error("%d px: the %s chart (%d × %d) draws no plot", window_width, id, width, height);
  g_test_message("%d px: %s chart %d × %d: legend %d rows high (%u named, %u more), plot %d px high",
                 window_width, id, width, height, l.legend.height, l.legend_named, l.legend_more,
                 l.plot.height);
  for (guint i = 0; i < G_N_ELEMENTS(parts); i++) {
    const GdkRectangle *r = parts[i].box;

    if (r->width <= 0 || r->height <= 0)
      continue;
    if (r->x < 0 || r->y < 0 || r->x + r->width > width || r->y + r->height > height)
      g_error("%d px: the %s chart's %s (%d,%d %d×%d) leaves its %d × %d card", window_width, id,
              parts[i].name, r->x, r->y, r->width, r->height, width, height);
    for (guint j = i + 1; j < G_N_ELEMENTS(parts); j++)
      if (!apart(r, parts[j].box))
        g_error("%d px: the %s chart's %s (%d,%d %d×%d) overlaps its %s (%d,%d %d×%d)", window_width,
                id, parts[i].name, r->x, r->y, r->width, r->height, parts[j].name, parts[j].box->x,
                parts[j].box->y, parts[j].box->width, parts[j].box->height);
  }
  if (l.y_title.height > 0 && !l.y_title_whole)
    g_error("%d px: the %s chart's y axis title is cut to %d px", window_width, id, l.y_title.height);
  /* The plot keeps the larger part of the card under its title, however many runs
   * the legend names. */
  if (l.plot.height * 2 < height - (l.title.y + l.title.height))
    g_error("%d px: the %s chart's plot is %d px high of %d", window_width, id, l.plot.height, height);
}

static void
check_width(int width)
{
  static const char *ids[] = {"loss", "accuracy", "throughput", "memory", "load", "step-time"};
  TdmWindow *window;
  TdmDashboard *dashboard;
  TdmHistoryStore *store;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_set_default_size(GTK_WINDOW(window), width, 800);
  gtk_window_present(GTK_WINDOW(window));
  adw_flap_set_reveal_flap(window_child(window, "flap"), FALSE);
  tdm_window_set_page(window, "charts");
  dashboard = window_child(window, "dashboard");
  live_run(dashboard);
  /* The earlier runs ticked in History. */
  store = tdm_window_get_history(window);
  g_assert_true(wait_for(not_loading, store, 30));
  /* The window done with what it reads on its own (the dataset, for Start). */
  g_assert_true(wait_for(can_start, window, 60));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, N_RUNS);
  for (guint i = 0; i < N_RUNS; i++) {
    g_autoptr(TdmRunItem) item = g_list_model_get_item(G_LIST_MODEL(store), i);

    tdm_run_item_set_overlay(item, TRUE);
  }
  for (int i = 0; i < 2000 && gtk_widget_get_width(GTK_WIDGET(window)) < width - 12; i++)
    settle(1);
  wait_for_rest(GTK_WIDGET(window), 2);
  g_assert_cmpint(gtk_widget_get_width(GTK_WIDGET(window)), <=, width);
  /* Every run is in the loss chart's legend, by name or among "+N more". */
  {
    TdmChart *loss = tdm_dashboard_get_chart(dashboard, "loss");
    TdmChartLayout l;

    tdm_chart_get_layout(loss, gtk_widget_get_width(GTK_WIDGET(loss)),
                         gtk_widget_get_height(GTK_WIDGET(loss)), &l);
    g_test_message("loss chart: %u series", tdm_chart_get_n_series(loss));
    g_assert_cmpuint(l.legend_named + l.legend_more, >=, 2 + 1);
  }
  for (guint i = 0; i < G_N_ELEMENTS(ids); i++) {
    TdmChart *chart = tdm_dashboard_get_chart(dashboard, ids[i]);

    wait_for(has_plot, chart, 30);
    check_chart(chart, ids[i], width);
  }
  destroy_window(window);
}

static void
check_widths(void)
{
  check_width(360);
  check_width(700);
  check_width(1024);
}

static void
test_charts(void)
{
  check_widths();
}

static void
test_charts_japanese_subprocess(void)
{
  g_setenv("LANGUAGE", "ja", TRUE);
  tdm_application_init_i18n();
  check_widths();
}

static void
test_charts_japanese(void)
{
  g_test_trap_subprocess("/layout/charts/japanese/subprocess", 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

int
main(int argc, char **argv)
{
  g_autofree char *xdg = g_dir_make_tmp("tandem-xdg-XXXXXX", NULL);
  int status;

  /* gettext ignores LANGUAGE in the "C" locale; the Japanese tests set it. */
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  g_setenv("XDG_DATA_HOME", xdg, TRUE);
  setlocale(LC_ALL, "");
  window_test_init(&argc, &argv);
  {
    g_autofree char *runs = g_build_filename(g_get_user_data_dir(), "tandem", "runs", NULL);
    g_autoptr(TdmHistory) history = tdm_history_new(runs);

    for (int i = 0; i < N_RUNS; i++)
      earlier_run(history, i);
  }
  /* A phone's title bar: a close button alone. */
  g_object_set(gtk_settings_get_default(), "gtk-decoration-layout", "appmenu:close", NULL);

  g_test_add_func("/layout/charts", test_charts);
  g_test_add_func("/layout/charts/japanese", test_charts_japanese);
  g_test_add_func("/layout/charts/japanese/subprocess", test_charts_japanese_subprocess);

  status = g_test_run();
  remove_folder(xdg);
  return status;
}
