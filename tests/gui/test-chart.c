/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-chart.c: TdmSeries, the axis helpers and TdmChart.
 *
 * Rendering is checked on pixels: the chart is drawn through its export path
 * onto an image surface, and a known value must land on the expected row in
 * the series colour. The widget itself is realized in a window on the Xvfb
 * that xvfb-run-test.sh starts, snapshotted, hovered and finalized.
 *
 * This file holds TdmSeries's tests, the axis helpers' and main(); the rendering
 * is in test-chart-render.c, the exports in test-chart-export.c, the widget in
 * test-chart-widget.c (their helpers in test-chart.h).
 */

#include <math.h>
#include <string.h>

#include <gtk/gtk.h>

#include "tdm-chart-axis.h"
#include "tdm-chart.h"
#include "tdm-series.h"
#include "test-chart.h"

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
  test_chart_add_render();
  test_chart_add_export();
  test_chart_add_widget();

  return g_test_run();
}
