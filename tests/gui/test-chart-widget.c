/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-chart-widget.c — part of test-chart: TdmChart as a widget. Its properties and
 * accessible role, the devices' distinct colours, a reference line far above the data
 * left out of the y range, and the chart realized in a window on the Xvfb that
 * xvfb-run-test.sh starts: snapshotted, hovered (a rule and a readout appear) and
 * finalized.
 */

#include <math.h>
#include <string.h>

#include <gtk/gtk.h>

#include "tdm-chart.h"
#include "tdm-chart-private.h"
#include "test-chart.h"

static void
test_properties(void)
{
  TdmChart *chart = new_chart();
  g_autofree char *title = NULL;
  g_autofree char *unit = NULL;
  gboolean log_scale;

  g_object_set(chart, "title", "Throughput", "y-unit", "samples/s", "log-scale", TRUE,
               "x-label", "Step", "x-unit", NULL, "y-label", "Speed", NULL);
  g_object_get(chart, "title", &title, "y-unit", &unit, "log-scale", &log_scale, NULL);
  g_assert_cmpstr(title, ==, "Throughput");
  g_assert_cmpstr(unit, ==, "samples/s");
  g_assert_true(log_scale);
  g_assert_cmpstr(tdm_chart_get_x_label(chart), ==, "Step");
  g_assert_null(tdm_chart_get_x_unit(chart));
  g_assert_cmpstr(tdm_chart_get_y_label(chart), ==, "Speed");
  g_assert_true(tdm_chart_get_log_scale(chart));
  g_assert_cmpint(gtk_accessible_get_accessible_role(GTK_ACCESSIBLE(chart)), ==,
                  GTK_ACCESSIBLE_ROLE_IMG);
  g_assert_finalize_object(chart);
}

static void
test_device_colours(void)
{
  GdkRGBA c[TDM_CHART_N_DEVICE_COLOURS + 1], again;

  for (int i = 0; i <= TDM_CHART_N_DEVICE_COLOURS; i++)
    tdm_chart_device_colour(i, &c[i]);
  for (int i = 0; i <= TDM_CHART_N_DEVICE_COLOURS; i++)
    for (int j = 0; j < i; j++)
      g_assert_false(gdk_rgba_equal(&c[i], &c[j]));
  tdm_chart_device_colour(3, &again);
  g_assert_true(gdk_rgba_equal(&again, &c[3]));
  g_assert_cmpfloat(c[0].alpha, ==, 1);
}

static gboolean
on_timeout(gpointer data)
{
  *(gboolean *)data = TRUE;
  return G_SOURCE_REMOVE;
}

static cairo_surface_t *
snapshot_widget(GtkWidget *widget)
{
  int w = gtk_widget_get_width(widget), h = gtk_widget_get_height(widget);
  GtkSnapshot *snapshot = gtk_snapshot_new();
  GskRenderNode *node;
  cairo_surface_t *s;
  cairo_t *cr;

  GTK_WIDGET_GET_CLASS(widget)->snapshot(widget, snapshot);
  node = gtk_snapshot_free_to_node(snapshot);
  g_assert_nonnull(node);

  s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
  cr = cairo_create(s);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  gsk_render_node_draw(node, cr);
  cairo_destroy(cr);
  cairo_surface_flush(s);
  gsk_render_node_unref(node);
  return s;
}

static void
test_widget_realized(void)
{
  GtkWidget *window = gtk_window_new();
  TdmChart *chart = TDM_CHART(g_object_ref(tdm_chart_new()));
  GtkEventController *motion = NULL;
  g_autoptr(GListModel) controllers = NULL;
  cairo_surface_t *plain, *hovered;
  gboolean timed_out = FALSE;
  guint timeout, id, differ = 0;

  gtk_window_set_default_size(GTK_WINDOW(window), 640, 320);
  gtk_window_set_child(GTK_WINDOW(window), GTK_WIDGET(chart));
  tdm_chart_set_title(chart, "Accuracy");
  tdm_chart_set_y_unit(chart, "%");
  tdm_chart_set_y_range(chart, 0, 100);
  id = tdm_chart_add_series(chart, "train", NULL, TDM_CHART_STYLE_LINE);
  for (int i = 0; i < 200; i++)
    tdm_chart_append(chart, id, i, 50 + 40 * sin(i / 20.0));
  /* A run named in a script of three-byte characters, longer than the readout's row
   * holds: the row is cut at a whole character (Pango warns of text cut inside one). */
  g_autoptr(GString) long_name = g_string_new("x");
  for (int i = 0; i < 60; i++)
    g_string_append(long_name, "日");
  guint named = tdm_chart_add_series(chart, long_name->str, NULL, TDM_CHART_STYLE_LINE);
  for (int i = 0; i < 10000; i += 50)
    tdm_chart_append(chart, named, i, 25);

  gtk_window_present(GTK_WINDOW(window));
  timeout = g_timeout_add_seconds(10, on_timeout, &timed_out);
  while (!gtk_widget_get_mapped(GTK_WIDGET(chart)) && !timed_out)
    g_main_context_iteration(NULL, TRUE);
  g_assert_false(timed_out);
  g_source_remove(timeout);
  g_assert_true(gtk_widget_get_realized(GTK_WIDGET(chart)));

  /* Appending to a mapped chart only queues a draw. */
  for (int i = 200; i < 10000; i++)
    tdm_chart_append(chart, id, i, 50);
  while (g_main_context_iteration(NULL, FALSE))
    ;

  gtk_widget_size_allocate(GTK_WIDGET(chart), &(GtkAllocation){0, 0, 600, 300}, -1);
  g_assert_cmpint(gtk_widget_get_width(GTK_WIDGET(chart)), ==, 600);
  plain = snapshot_widget(GTK_WIDGET(chart));
  g_assert_cmpint(count_dark(plain, 0, 0, 600, 300), >, 100);

  /* Hover in the middle: a rule and a readout appear. */
  controllers = gtk_widget_observe_controllers(GTK_WIDGET(chart));
  for (guint i = 0; i < g_list_model_get_n_items(controllers); i++) {
    g_autoptr(GObject) item = g_list_model_get_item(controllers, i);
    if (GTK_IS_EVENT_CONTROLLER_MOTION(item))
      motion = GTK_EVENT_CONTROLLER(item);
  }
  g_assert_nonnull(motion);
  g_signal_emit_by_name(motion, "motion", 300.0, 150.0);
  hovered = snapshot_widget(GTK_WIDGET(chart));
  for (int y = 0; y < 300; y++)
    for (int x = 0; x < 600; x++) {
      Pixel a = pixel_at(plain, x, y), b = pixel_at(hovered, x, y);
      if (abs(a.r - b.r) + abs(a.g - b.g) + abs(a.b - b.b) > 30)
        differ++;
    }
  g_assert_cmpuint(differ, >, 200);
  g_signal_emit_by_name(motion, "leave");

  cairo_surface_destroy(plain);
  cairo_surface_destroy(hovered);
  g_clear_object(&controllers);

  gtk_window_destroy(GTK_WINDOW(window));
  while (g_main_context_iteration(NULL, FALSE))
    ;
  g_assert_finalize_object(chart);
}

/* A reference line (a GPU's capacity) far above the data is left out of the y range,
 * one the data come near is in it. Checked on the frame's own layout. */
static void
test_reference_range(void)
{
  TdmChart *chart = g_object_ref_sink(TDM_CHART(tdm_chart_new()));
  cairo_rectangle_t extents = {0, 0, 640, 400};
  guint used = tdm_chart_add_series(chart, "cuda:0", NULL, TDM_CHART_STYLE_LINE);
  guint capacity = tdm_chart_add_series(chart, "cuda:0 capacity", NULL, TDM_CHART_STYLE_REFERENCE);

  for (int i = 0; i <= 20; i++)
    tdm_chart_append(chart, used, i, 1.0e9 + 5.0e7 * i);   /* up to 2 GB */
  for (int round = 0; round < 2; round++) {
    double cap = round == 0 ? 150e9 : 3e9;
    tdm_chart_append(chart, capacity, 20, cap);
    cairo_surface_t *surface = cairo_recording_surface_create(CAIRO_CONTENT_COLOR_ALPHA, &extents);
    cairo_t *cr = cairo_create(surface);
    Frame f;
    tdm_chart_frame_init(chart, &f, cr, 640, 400, FALSE);
    g_assert_true(tdm_chart_frame_layout(chart, &f));
    double top = f.ya.ticks[f.ya.n_ticks - 1];
    if (round == 0)
      g_assert_cmpfloat(top, <, 10e9);    /* 150 GB left out: the data fill the plot */
    else
      g_assert_cmpfloat(top, >=, 3e9);    /* 3 GB, within twice the data: shown */
    g_assert_cmpfloat(top, >=, 2e9);
    tdm_chart_frame_clear(&f);
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
  }
  g_object_unref(chart);
}

void
test_chart_add_widget(void)
{
  g_test_add_func("/chart/properties", test_properties);
  g_test_add_func("/chart/reference-range", test_reference_range);
  g_test_add_func("/chart/device-colours", test_device_colours);
  g_test_add_func("/chart/widget-realized", test_widget_realized);
}
