/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-chart.c: TdmSeries, the axis helpers and TdmChart.
 *
 * Rendering is checked on pixels: the chart is drawn through its export path
 * onto an image surface, and a known value must land on the expected row in
 * the series colour. The widget itself is realized in a window on the Xvfb
 * that xvfb-run-test.sh starts, snapshotted, hovered and finalized.
 */

#include <math.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <gtk/gtk.h>

#include "tdm-chart-axis.h"
#include "tdm-chart.h"
#include "tdm-chart-private.h"
#include "tdm-export-info.h"
#include "tdm-run-export-info.h"
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

/* ---- TdmSeries -------------------------------------------------------------- */

static void
test_series_basic(void)
{
  g_autoptr(TdmSeries) s = tdm_series_new("loss", 8);
  const TdmSeriesBucket *b;
  double lo, hi;
  guint n;

  g_assert_false(tdm_series_get_x_range(s, &lo, &hi));
  g_assert_false(tdm_series_get_y_range(s, FALSE, &lo, &hi));
  b = tdm_series_get_buckets(s, &n);
  g_assert_cmpuint(n, ==, 0);

  for (int i = 0; i < 5; i++)
    tdm_series_append(s, i, 10 - i);
  b = tdm_series_get_buckets(s, &n);
  g_assert_cmpuint(n, ==, 5);
  g_assert_cmpuint(tdm_series_get_bucket_width(s), ==, 1);
  g_assert_cmpfloat(tdm_series_bucket_mean(&b[2]), ==, 8);
  g_assert_true(tdm_series_get_y_range(s, FALSE, &lo, &hi));
  g_assert_cmpfloat(lo, ==, 6);
  g_assert_cmpfloat(hi, ==, 10);

  /* Nine points in eight buckets: one merge, width 2. */
  for (int i = 5; i < 9; i++)
    tdm_series_append(s, i, 10 - i);
  b = tdm_series_get_buckets(s, &n);
  g_assert_cmpuint(n, ==, 5);
  g_assert_cmpuint(tdm_series_get_bucket_width(s), ==, 2);
  g_assert_cmpfloat(b[0].x_min, ==, 0);
  g_assert_cmpfloat(b[0].x_max, ==, 1);
  g_assert_cmpfloat(b[0].y_max, ==, 10);
  g_assert_cmpfloat(b[0].y_min, ==, 9);
  g_assert_cmpfloat(tdm_series_bucket_mean(&b[0]), ==, 9.5);
  g_assert_cmpuint(b[4].n_points, ==, 1);
  g_assert_cmpuint(tdm_series_get_n_appended(s), ==, 9);

  tdm_series_clear(s);
  tdm_series_get_buckets(s, &n);
  g_assert_cmpuint(n, ==, 0);
  g_assert_cmpuint(tdm_series_get_bucket_width(s), ==, 1);
}

static void
test_series_million(void)
{
  g_autoptr(TdmSeries) s = tdm_series_new("loss", 0);
  const guint64 n_points = 1000000, spike_at = 654321, dip_at = 123457;
  const TdmSeriesBucket *b;
  guint64 total = 0;
  guint n, spikes = 0, dips = 0;
  double lo, hi;

  g_assert_cmpuint(tdm_series_get_capacity(s), ==, TDM_SERIES_DEFAULT_CAPACITY);

  for (guint64 i = 0; i < n_points; i++) {
    double y = 1 + 0.1 * sin(i * 0.01);

    if (i == spike_at)
      y = 1000;
    else if (i == dip_at)
      y = -500;
    tdm_series_append(s, (double)i, y);
  }

  b = tdm_series_get_buckets(s, &n);
  g_assert_cmpuint(n, <=, tdm_series_get_capacity(s));
  g_assert_cmpuint(n, >=, tdm_series_get_capacity(s) / 2);
  g_assert_cmpuint(tdm_series_get_n_appended(s), ==, n_points);

  for (guint i = 0; i < n; i++) {
    total += b[i].n_points;
    if (b[i].y_max > 2) {
      spikes++;
      g_assert_cmpfloat(b[i].y_max, ==, 1000);
      g_assert_cmpfloat(b[i].x_min, <=, spike_at);
      g_assert_cmpfloat(b[i].x_max, >=, spike_at);
    }
    if (b[i].y_min < 0) {
      dips++;
      g_assert_cmpfloat(b[i].y_min, ==, -500);
    }
    if (i + 1 < n)
      g_assert_cmpuint(b[i].n_points, ==, tdm_series_get_bucket_width(s));
    if (i > 0)
      g_assert_cmpfloat(b[i].x_min, >, b[i - 1].x_max);
  }
  g_assert_cmpuint(total, ==, n_points);
  g_assert_cmpuint(spikes, ==, 1);
  g_assert_cmpuint(dips, ==, 1);

  g_assert_true(tdm_series_get_x_range(s, &lo, &hi));
  g_assert_cmpfloat(lo, ==, 0);
  g_assert_cmpfloat(hi, ==, n_points - 1);
  g_assert_true(tdm_series_get_y_range(s, FALSE, &lo, &hi));
  g_assert_cmpfloat(lo, ==, -500);
  g_assert_cmpfloat(hi, ==, 1000);
}

static void
test_series_nan(void)
{
  g_autoptr(TdmSeries) gaps = tdm_series_new("gaps", 16);
  g_autoptr(TdmSeries) all_nan = tdm_series_new("nan", 16);
  const TdmSeriesBucket *b;
  double lo, hi, x, y;
  guint n, idx;

  tdm_series_append(gaps, 0, 1);
  tdm_series_append(gaps, 1, NAN);
  tdm_series_append(gaps, 2, 3);
  tdm_series_append(gaps, NAN, 5); /* dropped */
  tdm_series_append(gaps, 3, INFINITY);
  b = tdm_series_get_buckets(gaps, &n);
  g_assert_cmpuint(n, ==, 4);
  g_assert_true(isnan(tdm_series_bucket_mean(&b[1])));
  g_assert_true(isnan(b[1].y_max));
  g_assert_cmpuint(b[1].n_points, ==, 1);
  g_assert_cmpuint(b[1].n_finite, ==, 0);
  g_assert_true(tdm_series_get_y_range(gaps, FALSE, &lo, &hi));
  g_assert_cmpfloat(lo, ==, 1);
  g_assert_cmpfloat(hi, ==, 3);
  g_assert_true(tdm_series_get_last(gaps, &x, &y));
  g_assert_cmpfloat(x, ==, 3);

  g_assert_true(tdm_series_lookup(gaps, 1.4, &idx));
  g_assert_cmpuint(idx, ==, 1);
  g_assert_true(tdm_series_lookup(gaps, 1.6, &idx));
  g_assert_cmpuint(idx, ==, 2);
  g_assert_cmpfloat(tdm_series_mean_between(gaps, 0, 0.5), ==, 1);
  g_assert_true(isnan(tdm_series_mean_between(gaps, 10, 11)));

  for (int i = 0; i < 100; i++)
    tdm_series_append(all_nan, i, NAN);
  g_assert_true(tdm_series_get_x_range(all_nan, &lo, &hi));
  g_assert_false(tdm_series_get_y_range(all_nan, FALSE, &lo, &hi));
  g_assert_false(tdm_series_get_y_range(all_nan, TRUE, &lo, &hi));
  b = tdm_series_get_buckets(all_nan, &n);
  g_assert_cmpuint(n, <=, 16);
  for (guint i = 0; i < n; i++)
    g_assert_cmpuint(b[i].n_finite, ==, 0);
}

static void
test_series_positive_range(void)
{
  g_autoptr(TdmSeries) s = tdm_series_new("loss", 0);
  double lo, hi;

  tdm_series_append(s, 0, -1);
  tdm_series_append(s, 1, 0);
  g_assert_false(tdm_series_get_y_range(s, TRUE, &lo, &hi));
  tdm_series_append(s, 2, 0.5);
  tdm_series_append(s, 3, 2);
  g_assert_true(tdm_series_get_y_range(s, TRUE, &lo, &hi));
  g_assert_cmpfloat(lo, ==, 0.5);
  g_assert_cmpfloat(hi, ==, 2);
  g_assert_true(tdm_series_get_y_range(s, FALSE, &lo, &hi));
  g_assert_cmpfloat(lo, ==, -1);
}

static void
test_series_smoothing(void)
{
  g_autoptr(TdmSeries) s = tdm_series_new("loss", 64);
  double out[64];
  guint n;

  for (int i = 0; i < 50; i++)
    tdm_series_append(s, i, i < 25 ? 2 : 4);

  /* Off: the means themselves. */
  n = tdm_series_get_smoothed(s, out, G_N_ELEMENTS(out));
  g_assert_cmpuint(n, ==, 50);
  g_assert_cmpfloat(out[10], ==, 2);
  g_assert_cmpfloat(out[30], ==, 4);

  tdm_series_set_smoothing(s, 0.6);
  g_assert_cmpfloat(tdm_series_get_smoothing(s), ==, 0.6);
  n = tdm_series_get_smoothed(s, out, G_N_ELEMENTS(out));
  /* Debiased: a constant start stays exactly constant. */
  g_assert_cmpfloat_with_epsilon(out[0], 2, 1e-12);
  g_assert_cmpfloat_with_epsilon(out[24], 2, 1e-12);
  /* After the step it moves towards 4 monotonically, lagging behind. */
  g_assert_cmpfloat(out[25], >, 2);
  g_assert_cmpfloat(out[25], <, 4);
  for (int i = 26; i < 50; i++)
    g_assert_cmpfloat(out[i], >=, out[i - 1]);
  g_assert_cmpfloat_with_epsilon(out[49], 4, 1e-3);
  /* The debias term is 1 - 0.6^26 here: negligible. */
  g_assert_cmpfloat_with_epsilon(out[25], 2 * 0.6 + 4 * 0.4, 1e-5);

  /* Decimation does not change the character of the curve. */
  for (int i = 50; i < 1000; i++)
    tdm_series_append(s, i, 4);
  n = tdm_series_get_smoothed(s, out, G_N_ELEMENTS(out));
  g_assert_cmpuint(n, <=, 64);
  g_assert_cmpfloat_with_epsilon(out[n - 1], 4, 1e-6);
}

static void
test_series_csv(void)
{
  g_autoptr(TdmSeries) train = tdm_series_new("train loss", 0);
  g_autoptr(TdmSeries) test = tdm_series_new("test \"loss\", epoch", 0);
  g_autofree char *csv = NULL;
  TdmSeries *both[2];

  tdm_series_append(train, 0, 2.5);
  tdm_series_append(train, 1, NAN);
  tdm_series_append(train, 2, 1.25);
  tdm_series_append(test, 2, 0.5);
  tdm_series_append(test, 3.5, 0.25);
  both[0] = train;
  both[1] = test;

  csv = tdm_series_to_csv(both, 2, "step");
  g_assert_cmpstr(csv, ==,
                  "step,\"train loss\",\"test \"\"loss\"\", epoch\"\n"
                  "0,2.5,\n"
                  "1,,\n"
                  "2,1.25,0.5\n"
                  "3.5,,0.25\n");
}

/* ---- axis helpers ----------------------------------------------------------- */

static void
test_axis_ticks(void)
{
  TdmChartAxis a;
  char buf[64];

  g_assert_cmpfloat(tdm_chart_axis_nice_step(100, 5), ==, 20);
  g_assert_cmpfloat(tdm_chart_axis_nice_step(1, 10), ==, 0.1);
  g_assert_cmpfloat(tdm_chart_axis_nice_step(7, 3), ==, 5);

  tdm_chart_axis_linear(&a, 0, 100, 6, FALSE);
  g_assert_cmpuint(a.n_ticks, ==, 6);
  g_assert_cmpfloat(a.ticks[5], ==, 100);

  tdm_chart_axis_linear(&a, 0.13, 0.87, 5, TRUE);
  g_assert_cmpfloat_with_epsilon(a.lo, 0, 1e-12);
  g_assert_cmpfloat_with_epsilon(a.hi, 1, 1e-12);
  tdm_chart_axis_format_tick(&a, a.ticks[1], buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "0.2");

  tdm_chart_axis_linear(&a, 0, 3000, 6, TRUE);
  tdm_chart_axis_format_tick(&a, 2500, buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "2.5k");
  tdm_chart_axis_format_tick(&a, 0, buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "0");

  tdm_chart_axis_linear(&a, 0, 4e6, 4, TRUE);
  tdm_chart_axis_format_tick(&a, 2e6, buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "2M");

  /* A flat range still gets an axis; non-negative data stays non-negative. */
  tdm_chart_axis_linear(&a, 5, 5, 5, TRUE);
  g_assert_cmpfloat(a.lo, <, 5);
  g_assert_cmpfloat(a.hi, >, 5);
  g_assert_cmpfloat(a.lo, >=, 0);

  tdm_chart_axis_log(&a, 0.03, 2.3, 8, TRUE);
  g_assert_cmpfloat_with_epsilon(a.lo, 0.01, 1e-12);
  g_assert_cmpfloat_with_epsilon(a.hi, 10, 1e-9);
  tdm_chart_axis_format_tick(&a, a.ticks[0], buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "0.01");

  tdm_chart_axis_log(&a, -1, -0.5, 8, TRUE); /* nothing positive: must not crash */
  g_assert_cmpfloat(a.lo, >, 0);

  tdm_chart_axis_time(&a, 0, 600, 6);
  g_assert_cmpstr(a.unit, ==, "min");
  tdm_chart_axis_format_tick(&a, 300, buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "5");
  tdm_chart_axis_time(&a, 0, 90, 6);
  g_assert_cmpstr(a.unit, ==, "s");
  tdm_chart_axis_time(&a, 0, 5 * 3600, 6);
  g_assert_cmpstr(a.unit, ==, "h");

  /* Bytes and milliseconds climb their ladders; ticks are nice in the unit shown. */
  tdm_chart_axis_in_unit(&a, "B", 0, 80.0 * 1073741824, 6, TRUE);
  g_assert_cmpstr(a.unit, ==, "GiB");
  tdm_chart_axis_format_tick(&a, a.ticks[1], buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "20");
  g_assert_cmpfloat_with_epsilon(a.hi, 80.0 * 1073741824, 1);
  tdm_chart_axis_in_unit(&a, "B", 0, 77.6e6, 6, TRUE);
  g_assert_cmpstr(a.unit, ==, "MiB");
  tdm_chart_axis_format_tick(&a, a.ticks[1], buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "20");
  tdm_chart_axis_in_unit(&a, "B", 0, 1010.0 * 1048576, 6, TRUE);
  g_assert_cmpstr(a.unit, ==, "GiB"); /* never "1k MiB" */
  tdm_chart_axis_in_unit(&a, "ms", 0, 1500, 6, TRUE);
  g_assert_cmpstr(a.unit, ==, "s");
  tdm_chart_axis_format_tick(&a, a.ticks[1], buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "0.5");
  tdm_chart_axis_in_unit(&a, "ms", 0, 40, 6, TRUE);
  g_assert_cmpstr(a.unit, ==, "ms");
  tdm_chart_axis_in_unit(&a, "%", 0, 100, 6, FALSE);
  g_assert_cmpstr(a.unit, ==, "%");
  tdm_chart_format_in_unit(77.6e6, "B", buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "74.01 MiB");
  tdm_chart_format_in_unit(1500, "ms", buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "1.5 s");
  tdm_chart_format_in_unit(87.5, "%", buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "87.5 %");

  /* A short range on a narrow axis still gets two ticks, never one. */
  tdm_chart_axis_linear(&a, 0.05, 3, 2, FALSE);
  g_assert_cmpuint(a.n_ticks, >=, 2);
  g_assert_cmpfloat(a.ticks[0], >=, 0.05);
  g_assert_cmpfloat(a.ticks[a.n_ticks - 1], <=, 3);
  tdm_chart_axis_time(&a, 0.3, 25, 2);
  g_assert_cmpuint(a.n_ticks, >=, 2);
  g_assert_cmpfloat(a.ticks[1] - a.ticks[0], <=, 10);
  for (guint ticks = 2; ticks <= 12; ticks++) {
    tdm_chart_axis_linear(&a, 0.3, 2.9, ticks, FALSE);
    g_assert_cmpuint(a.n_ticks, >=, 2);
  }

  tdm_chart_format_value(12345, buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "12.35k");
  tdm_chart_format_value(0.25, buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "0.25");
  tdm_chart_format_duration(187, buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "3:07");
  tdm_chart_format_duration(3723, buf, sizeof buf);
  g_assert_cmpstr(buf, ==, "1:02:03");
}

/* ---- rendering -------------------------------------------------------------- */

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

/* ---- the widget ------------------------------------------------------------- */

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

int
main(int argc, char **argv)
{
  gtk_test_init(&argc, &argv, NULL);

  g_test_add_func("/series/basic", test_series_basic);
  g_test_add_func("/series/million", test_series_million);
  g_test_add_func("/series/nan", test_series_nan);
  g_test_add_func("/series/positive-range", test_series_positive_range);
  g_test_add_func("/series/smoothing", test_series_smoothing);
  g_test_add_func("/series/csv", test_series_csv);
  g_test_add_func("/chart/axis-ticks", test_axis_ticks);
  g_test_add_func("/chart/render/line-row", test_render_line_row);
  g_test_add_func("/chart/render/colours-legend", test_render_colours_legend);
  g_test_add_func("/chart/render/empty", test_render_empty);
  g_test_add_func("/chart/render/coinciding", test_render_coinciding);
  g_test_add_func("/chart/title-corner", test_title_corner);
  g_test_add_func("/chart/readout-inside", test_readout_inside);
  g_test_add_func("/chart/legend-fits", test_legend_fits);
  g_test_add_func("/chart/render/edge-cases", test_render_edge_cases);
  g_test_add_func("/chart/render/million", test_render_million);
  test_chart_add_export();
  g_test_add_func("/chart/properties", test_properties);
  g_test_add_func("/chart/reference-range", test_reference_range);
  g_test_add_func("/chart/device-colours", test_device_colours);
  g_test_add_func("/chart/widget-realized", test_widget_realized);

  return g_test_run();
}
