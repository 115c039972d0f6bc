/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-chart-render.c — part of test-chart: TdmChart drawn through its export path
 * onto an image surface and checked on pixels. A known value lands on the expected
 * row in the series colour, the legend's colours and entries, the title and the
 * legend clear of the card's corner, the hover readout inside the chart, empty and
 * odd data, and a million points. Not the realized widget (test-chart-widget.c).
 */

#include <math.h>
#include <string.h>

#include <gtk/gtk.h>

#include "tdm-chart.h"
#include "tdm-chart-private.h"
#include "tdm-series.h"
#include "test-chart.h"

#define W 800
#define H 400

/* ---- helpers ---------------------------------------------------------------- */

static int
colour_distance(Pixel p, const GdkRGBA *c)
{
  return abs(p.r - (int)round(c->red * 255)) + abs(p.g - (int)round(c->green * 255)) +
         abs(p.b - (int)round(c->blue * 255));
}

/* Pixels in [x0, x1) × [y0, y1) within `tolerance` of the colour. */
static int
count_colour(cairo_surface_t *s, int x0, int y0, int x1, int y1, const GdkRGBA *c,
             int tolerance)
{
  int n = 0;

  for (int y = MAX(y0, 0); y < MIN(y1, cairo_image_surface_get_height(s)); y++)
    for (int x = MAX(x0, 0); x < MIN(x1, cairo_image_surface_get_width(s)); x++)
      if (colour_distance(pixel_at(s, x, y), c) <= tolerance)
        n++;
  return n;
}

/* Pixels that are the colour at some opacity >= 15 % over white, as the
 * translucent min/max band is. */
static int
count_tinted(cairo_surface_t *s, int x0, int y0, int x1, int y1, const GdkRGBA *c)
{
  double cc[3] = {c->red * 255, c->green * 255, c->blue * 255};
  int k = 0, n = 0;

  for (int i = 1; i < 3; i++)
    if (cc[i] < cc[k])
      k = i;

  for (int y = MAX(y0, 0); y < MIN(y1, cairo_image_surface_get_height(s)); y++)
    for (int x = MAX(x0, 0); x < MIN(x1, cairo_image_surface_get_width(s)); x++) {
      Pixel p = pixel_at(s, x, y);
      int pc[3] = {p.r, p.g, p.b};
      double alpha = (255 - pc[k]) / (255 - cc[k]);
      gboolean ok = alpha >= 0.15;

      for (int i = 0; i < 3 && ok; i++)
        ok = fabs(pc[i] - (255 - alpha * (255 - cc[i]))) < 25;
      if (ok)
        n++;
    }
  return n;
}

static cairo_surface_t *
render(TdmChart *chart, int width, int height)
{
  cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
  cairo_t *cr = cairo_create(s);

  tdm_chart_render(chart, cr, width, height);
  g_assert_cmpint(cairo_status(cr), ==, CAIRO_STATUS_SUCCESS);
  cairo_destroy(cr);
  cairo_surface_flush(s);
  return s;
}

static void
test_render_line_row(void)
{
  TdmChart *chart = new_chart();
  cairo_surface_t *s;
  GdkRectangle area;
  GdkRGBA blue;
  guint id;
  double sum = 0, expected;
  int n = 0, x;

  tdm_chart_device_colour(0, &blue);
  tdm_chart_set_y_range(chart, 0, 100);
  id = tdm_chart_add_series(chart, "load", &blue, TDM_CHART_STYLE_LINE);
  for (int i = 0; i <= 100; i++)
    tdm_chart_append(chart, id, i, 50);

  g_assert_true(tdm_chart_get_plot_area(chart, W, H, &area));
  g_assert_cmpint(area.width, >, W / 2);
  g_assert_cmpint(area.height, >, H / 2);

  s = render(chart, W, H);
  x = area.x + area.width / 2;
  for (int y = area.y; y < area.y + area.height; y++)
    if (colour_distance(pixel_at(s, x, y), &blue) <= 30) {
      sum += y + 0.5;
      n++;
    }
  expected = area.y + area.height / 2.0;
  g_assert_cmpint(n, >=, 1);
  g_assert_cmpint(n, <=, 3);
  g_assert_cmpfloat(fabs(sum / n - expected), <=, 1.0);

  /* Nothing of the series colour far from the line. */
  g_assert_cmpint(count_colour(s, area.x, area.y, area.x + area.width, (int)expected - 4,
                               &blue, 30), ==, 0);
  g_assert_cmpint(count_colour(s, area.x, (int)expected + 4, area.x + area.width,
                               area.y + area.height, &blue, 30), ==, 0);

  cairo_surface_destroy(s);
  g_assert_finalize_object(chart);
}

static void
test_render_colours_legend(void)
{
  TdmChart *chart = new_chart();
  cairo_surface_t *s;
  GdkRectangle area;
  GdkRGBA c0, c1;
  guint a, b;

  tdm_chart_device_colour(0, &c0);
  tdm_chart_device_colour(1, &c1);
  g_assert_false(gdk_rgba_equal(&c0, &c1));

  tdm_chart_set_title(chart, "Load");
  tdm_chart_set_y_range(chart, 0, 100);
  a = tdm_chart_add_series(chart, "GPU 0", &c0, TDM_CHART_STYLE_LINE);
  b = tdm_chart_add_series(chart, "GPU 1", &c1, TDM_CHART_STYLE_DASHED);
  for (int i = 0; i <= 100; i++) {
    tdm_chart_append(chart, a, i, 25);
    tdm_chart_append(chart, b, i, 75);
  }

  g_assert_true(tdm_chart_get_plot_area(chart, W, H, &area));
  s = render(chart, W, H);

  /* Legend: above the plot area, a swatch of each colour. */
  g_assert_cmpint(count_colour(s, 0, 0, W, area.y - 2, &c0, 6), >=, 20);
  g_assert_cmpint(count_colour(s, 0, 0, W, area.y - 2, &c1, 6), >=, 20);
  /* Both lines in the plot, each in its own half. */
  g_assert_cmpint(count_colour(s, area.x, area.y + area.height / 2, area.x + area.width,
                               area.y + area.height, &c0, 30), >=, 100);
  g_assert_cmpint(count_colour(s, area.x, area.y, area.x + area.width,
                               area.y + area.height / 2, &c1, 30), >=, 50);
  g_assert_cmpint(count_colour(s, area.x, area.y, area.x + area.width,
                               area.y + area.height / 2, &c0, 30), ==, 0);

  cairo_surface_destroy(s);
  g_assert_finalize_object(chart);
}

/* Two devices with the same memory both show (nested stripes). */
static void
test_render_coinciding(void)
{
  TdmChart *chart = new_chart();
  cairo_surface_t *s;
  GdkRectangle area;
  GdkRGBA c0, c1;
  guint a, b;

  tdm_chart_device_colour(0, &c0);
  tdm_chart_device_colour(1, &c1);
  tdm_chart_set_nested_lines(chart, TRUE);
  a = tdm_chart_add_series(chart, "cpu 1", &c0, TDM_CHART_STYLE_LINE);
  b = tdm_chart_add_series(chart, "cpu 2", &c1, TDM_CHART_STYLE_LINE);
  for (int i = 0; i <= 100; i++) {
    tdm_chart_append(chart, a, i, 64);
    tdm_chart_append(chart, b, i, 64);
  }
  g_assert_true(tdm_chart_get_plot_area(chart, W, H, &area));
  s = render(chart, W, H);
  g_assert_cmpint(count_colour(s, area.x, area.y, area.x + area.width, area.y + area.height,
                               &c0, 30), >=, 100);
  g_assert_cmpint(count_colour(s, area.x, area.y, area.x + area.width, area.y + area.height,
                               &c1, 30), >=, 100);
  cairo_surface_destroy(s);
  g_assert_finalize_object(chart);
}

/* The title stops short of the card's ⋮ corner, and so does the legend. */
static void
test_title_corner(void)
{
  TdmChart *chart = new_chart();
  GdkRectangle title, area;
  GdkRGBA c0;
  guint a;

  tdm_chart_device_colour(0, &c0);
  tdm_chart_set_title(chart, "A very long chart title that cannot fit in a narrow card");
  tdm_chart_set_corner_reserve(chart, 44, 40);
  a = tdm_chart_add_series(chart, "Training", &c0, TDM_CHART_STYLE_LINE);
  for (int i = 0; i <= 10; i++)
    tdm_chart_append(chart, a, i, i);
  for (int width = 240; width <= 640; width += 100) {
    g_assert_true(tdm_chart_get_title_area(chart, width, 240, &title));
    g_assert_cmpint(title.x + title.width, <=, width - 44);
    g_assert_true(tdm_chart_get_plot_area(chart, width, 240, &area));
    g_assert_cmpint(area.y, >=, 40);
  }
  g_assert_finalize_object(chart);
}

/* The legend's entries stand side by side, each name as wide as it is measured
 * alone (a wrong width drew the next swatch over a name); names that do not fit
 * the rows a legend may take give way to "+N more", however narrow the card. */
static void
test_legend_fits(void)
{
  TdmChart *chart = new_chart();
  PangoLayout *layout = gtk_widget_create_pango_layout(GTK_WIDGET(chart), NULL);
  const char *names[] = {"Training", "Test", "a run with a rather long name", "another run"};
  TdmChartLayout l;
  GdkRGBA c0;
  int sum = 0;

  tdm_chart_device_colour(0, &c0);
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    guint a = tdm_chart_add_series(chart, names[i], &c0, TDM_CHART_STYLE_LINE);
    int w;

    for (int x = 0; x <= 10; x++)
      tdm_chart_append(chart, a, x, x + i);
    pango_layout_set_text(layout, names[i], -1);
    pango_layout_get_pixel_size(layout, &w, NULL);
    sum += w;
  }
  /* Wide and tall: every name whole, all in one row. */
  g_assert_true(tdm_chart_get_layout(chart, 1600, 600, &l));
  g_assert_cmpuint(l.legend_named, ==, G_N_ELEMENTS(names));
  g_assert_cmpuint(l.legend_more, ==, 0);
  g_assert_cmpint(l.legend.width, >=, sum);
  /* Narrow and short: one row, the rest counted. */
  for (int width = 200; width <= 400; width += 50) {
    g_assert_true(tdm_chart_get_layout(chart, width, 180, &l));
    g_assert_cmpuint(l.legend_named + l.legend_more, ==, G_N_ELEMENTS(names));
    g_assert_cmpint(l.legend.height, <=, 180 / 6);
    g_assert_cmpint(l.legend.x + l.legend.width, <=, width);
  }
  g_object_unref(layout);
  g_assert_finalize_object(chart);
}

/* The hover readout stays inside the chart, whatever its size and side. */
static void
test_readout_inside(void)
{
  const int widths[] = {240, 400, 960};

  for (guint i = 0; i < G_N_ELEMENTS(widths); i++)
    for (double x = 0; x <= widths[i]; x += widths[i] / 8.0) {
      double bw = 300, bh = 260, bx, by;

      tdm_chart_place_readout(widths[i], 200, x, 30, &bw, &bh, &bx, &by);
      g_assert_cmpfloat(bx, >=, 2);
      g_assert_cmpfloat(by, >=, 2);
      g_assert_cmpfloat(bx + bw, <=, widths[i] - 2);
      g_assert_cmpfloat(by + bh, <=, 200 - 2);
      /* Beside the cursor line where there is room, never over it. */
      if (widths[i] >= 960)
        g_assert_true(bx > x || bx + bw < x);
    }
}

static void
test_render_empty(void)
{
  TdmChart *chart = new_chart();
  cairo_surface_t *s;
  GdkRectangle area;
  guint id;

  g_assert_false(tdm_chart_get_plot_area(chart, W, H, &area));
  s = render(chart, W, H);
  /* "No data yet" in the middle, nothing in the corners. */
  g_assert_cmpint(count_dark(s, W / 2 - 150, H / 2 - 30, W / 2 + 150, H / 2 + 30), >, 20);
  g_assert_cmpint(count_dark(s, 0, H - 60, 200, H), ==, 0);
  cairo_surface_destroy(s);

  /* A series with nothing (or only gaps) in it is still no data. */
  id = tdm_chart_add_series(chart, "loss", NULL, TDM_CHART_STYLE_LINE);
  for (int i = 0; i < 1000; i++)
    tdm_chart_append(chart, id, i, NAN);
  g_assert_false(tdm_chart_get_plot_area(chart, W, H, &area));
  s = render(chart, W, H);
  g_assert_cmpint(count_dark(s, W / 2 - 150, H / 2 - 30, W / 2 + 150, H / 2 + 30), >, 20);
  cairo_surface_destroy(s);

  g_assert_finalize_object(chart);
}

static void
test_render_edge_cases(void)
{
  TdmChart *chart = new_chart();
  cairo_surface_t *s;
  GdkRectangle area;
  GdkRGBA c;
  guint line, pts, gap, stack0, stack1, ref;

  tdm_chart_set_title(chart, "Everything");
  tdm_chart_set_x_label(chart, "Elapsed");
  tdm_chart_set_x_unit(chart, "s");
  tdm_chart_set_y_label(chart, "Memory");
  tdm_chart_set_y_unit(chart, "GiB");

  /* A single point. */
  line = tdm_chart_add_series(chart, "single", NULL, TDM_CHART_STYLE_LINE);
  tdm_chart_append(chart, line, 5, 1);
  g_assert_true(tdm_chart_get_plot_area(chart, W, H, &area));
  s = render(chart, W, H);
  tdm_chart_device_colour(0, &c);
  g_assert_cmpint(count_colour(s, area.x - 4, area.y, area.x + area.width + 4,
                               area.y + area.height, &c, 40), >, 0);
  cairo_surface_destroy(s);

  /* Every style at once, with gaps. */
  pts = tdm_chart_add_series(chart, "test", NULL, TDM_CHART_STYLE_POINTS);
  gap = tdm_chart_add_series(chart, "gappy", NULL, TDM_CHART_STYLE_DASHED);
  stack0 = tdm_chart_add_series(chart, "compute", NULL, TDM_CHART_STYLE_STACKED);
  stack1 = tdm_chart_add_series(chart, "communication", NULL, TDM_CHART_STYLE_STACKED);
  ref = tdm_chart_add_series(chart, "capacity", NULL, TDM_CHART_STYLE_REFERENCE);
  for (int i = 0; i < 600; i++) {
    tdm_chart_append(chart, line, i, 1 + 0.5 * sin(i * 0.1));
    if (i % 60 == 59)
      tdm_chart_append(chart, pts, i, 1.2);
    tdm_chart_append(chart, gap, i, (i / 50) % 2 ? NAN : 2);
    tdm_chart_append(chart, stack0, i, 0.5);
    tdm_chart_append(chart, stack1, i % 3 ? i : i + 0.5, 0.25);
  }
  tdm_chart_append(chart, ref, 0, 3);
  tdm_chart_append(chart, ref, 0, 4);
  g_assert_cmpuint(tdm_chart_get_n_series(chart), ==, 6);
  {
    guint n;
    tdm_series_get_buckets(tdm_chart_get_series(chart, ref), &n);
    g_assert_cmpuint(n, ==, 1);
  }
  tdm_chart_set_series_smoothing(chart, line, 0.8);
  s = render(chart, W, H);
  cairo_surface_destroy(s);

  /* The same on a log scale, with zeros and negatives in it. */
  tdm_chart_append(chart, line, 600, 0);
  tdm_chart_append(chart, line, 601, -3);
  tdm_chart_set_log_scale(chart, TRUE);
  s = render(chart, W, H);
  cairo_surface_destroy(s);
  /* A fixed range from zero on a log scale (a chart of its own: a range stays). */
  {
    TdmChart *fixed = new_chart();
    guint only = tdm_chart_add_series(fixed, "loss", NULL, TDM_CHART_STYLE_LINE);

    tdm_chart_append(fixed, only, 0, 2);
    tdm_chart_append(fixed, only, 1, 0);
    tdm_chart_set_log_scale(fixed, TRUE);
    tdm_chart_set_y_range(fixed, 0, 10);
    s = render(fixed, W, H);
    cairo_surface_destroy(s);
    g_assert_finalize_object(fixed);
  }

  /* Only non-positive values on a log scale. */
  tdm_chart_remove_all_series(chart);
  line = tdm_chart_add_series(chart, "loss", NULL, TDM_CHART_STYLE_LINE);
  for (int i = 0; i < 10; i++)
    tdm_chart_append(chart, line, i, -i);
  s = render(chart, W, H);
  cairo_surface_destroy(s);

  /* Tiny and odd sizes. */
  tdm_chart_set_log_scale(chart, FALSE);
  s = render(chart, 20, 10);
  cairo_surface_destroy(s);
  s = render(chart, 1, 1);
  cairo_surface_destroy(s);

  /* Hidden series do not count as data. */
  tdm_chart_set_series_visible(chart, line, FALSE);
  g_assert_false(tdm_chart_get_plot_area(chart, W, H, &area));

  tdm_chart_clear(chart);
  g_assert_cmpuint(tdm_series_get_n_appended(tdm_chart_get_series(chart, line)), ==, 0);

  g_assert_finalize_object(chart);
}

static void
test_render_million(void)
{
  TdmChart *chart = new_chart();
  cairo_surface_t *s;
  GdkRectangle area;
  GdkRGBA c;
  TdmSeries *series;
  guint id, n;
  int spike_x, hits = 0;

  tdm_chart_device_colour(2, &c);
  tdm_chart_set_y_range(chart, 0, 100);
  id = tdm_chart_add_series(chart, "throughput", &c, TDM_CHART_STYLE_LINE);
  for (int i = 0; i < 1000000; i++)
    tdm_chart_append(chart, id, i, i == 777777 ? 95 : 10 + (i % 7));

  series = tdm_chart_get_series(chart, id);
  tdm_series_get_buckets(series, &n);
  g_assert_cmpuint(n, <=, tdm_series_get_capacity(series));

  g_assert_true(tdm_chart_get_plot_area(chart, W, H, &area));
  s = render(chart, W, H);

  /* The one spike still reaches near the top, around its x. */
  spike_x = area.x + (int)round(777777.0 / 999999.0 * area.width);
  hits = count_tinted(s, spike_x - 3, area.y, spike_x + 4, area.y + area.height / 4, &c);
  g_assert_cmpint(hits, >=, area.height / 8);
  /* And nowhere else. */
  g_assert_cmpint(count_tinted(s, area.x, area.y, spike_x - 6, area.y + area.height / 4, &c), ==,
                  0);
  g_assert_cmpint(count_tinted(s, spike_x + 6, area.y, area.x + area.width,
                               area.y + area.height / 4, &c),
                  ==, 0);

  cairo_surface_destroy(s);
  g_assert_finalize_object(chart);
}

void
test_chart_add_render(void)
{
  g_test_add_func("/chart/render/line-row", test_render_line_row);
  g_test_add_func("/chart/render/colours-legend", test_render_colours_legend);
  g_test_add_func("/chart/render/empty", test_render_empty);
  g_test_add_func("/chart/render/coinciding", test_render_coinciding);
  g_test_add_func("/chart/title-corner", test_title_corner);
  g_test_add_func("/chart/readout-inside", test_readout_inside);
  g_test_add_func("/chart/legend-fits", test_legend_fits);
  g_test_add_func("/chart/render/edge-cases", test_render_edge_cases);
  g_test_add_func("/chart/render/million", test_render_million);
}
