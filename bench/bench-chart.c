/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-chart.c: how long TdmChart takes to draw a frame.
 *
 * Appends 1,000,000 points, then renders 100 frames of 800x400 onto an image
 * surface through tdm_chart_render(), the function the exports use, and prints the
 * median time per frame (target: under 5 ms), wall clock and the thread's CPU time.
 * The last chart is the loss chart with twenty earlier runs of the history overlaid
 * (the history's overlay), drawn the widget's way (tdm_chart_render_live): painted from the
 * chart's cached image of them as during a run, then drawn anew every frame, each
 * way that happens: one overlay changed, the live run left their x range, the chart
 * was resized. Not a test; it needs a display for
 * GTK: tests/gui/xvfb-run-test.sh build/bench/bench-chart
 */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gtk/gtk.h>

#include "tdm-chart.h"
#include "tdm-bench.h"

#define N_POINTS 1000000
#define N_FRAMES 100
#define WIDTH 800
#define HEIGHT 400

typedef void (*FillFunc)(TdmChart *chart);
typedef void (*FrameFunc)(TdmChart *chart);
typedef void (*RenderFunc)(TdmChart *chart, cairo_t *cr, int width, int height);

/* One noisy loss curve, as the first row of the table. */
static void
fill_line(TdmChart *chart)
{
  guint id = tdm_chart_add_series(chart, "train", NULL, TDM_CHART_STYLE_LINE);
  GRand *rand = g_rand_new_with_seed(1);

  for (int i = 0; i < N_POINTS; i++)
    tdm_chart_append(chart, id, i * 0.01, 2.3 * exp(-i / 2e5) + 0.2 * g_rand_double(rand));
  g_rand_free(rand);
}

/* The loss chart as the window shows it: log scale, smoothing, test points. */
static void
fill_loss(TdmChart *chart)
{
  guint train = tdm_chart_add_series(chart, "train", NULL, TDM_CHART_STYLE_LINE);
  guint test = tdm_chart_add_series(chart, "test", NULL, TDM_CHART_STYLE_POINTS);
  GRand *rand = g_rand_new_with_seed(2);

  tdm_chart_set_log_scale(chart, TRUE);
  tdm_chart_set_x_unit(chart, "s");
  tdm_chart_set_series_smoothing(chart, train, 0.6);
  for (int i = 0; i < N_POINTS; i++) {
    double loss = 2.3 * exp(-i / 2e5) + 0.05;
    tdm_chart_append(chart, train, i * 0.01, loss * (0.8 + 0.4 * g_rand_double(rand)));
    if (i % 20000 == 19999)
      tdm_chart_append(chart, test, i * 0.01, loss);
  }
  g_rand_free(rand);
}

#define N_OVERLAYS 20

/* The loss chart with the history on: the live run as above, and twenty earlier runs
 * as faint smoothed overlays of a tenth as many points each (runs recorded every ten
 * steps, as the window records them). */
static void
fill_overlays(TdmChart *chart)
{
  GRand *rand = g_rand_new_with_seed(4);

  fill_loss(chart);
  for (int r = 0; r < N_OVERLAYS; r++) {
    g_autofree char *name = g_strdup_printf("run %d", r + 1);
    guint id = tdm_chart_add_series(chart, name, NULL, TDM_CHART_STYLE_OVERLAY);

    tdm_chart_set_series_smoothing(chart, id, 0.6);
    /* As the dashboard does it: three names, the others counted in one entry. */
    if (r >= 3)
      tdm_chart_set_series_in_legend(chart, id, FALSE);
    for (int i = 0; i < N_POINTS / 10; i++) {
      double loss = 2.3 * exp(-i / (2e4 * (1 + 0.05 * r))) + 0.05;
      tdm_chart_append(chart, id, i * 0.1, loss * (0.8 + 0.4 * g_rand_double(rand)));
    }
  }
  tdm_chart_add_series(chart, "17 more runs", NULL, TDM_CHART_STYLE_OVERLAY);
  g_rand_free(rand);
}

/* Compute / communication / wait stacked, a million points each. */
static void
fill_stacked(TdmChart *chart)
{
  guint ids[3];
  GRand *rand = g_rand_new_with_seed(3);

  ids[0] = tdm_chart_add_series(chart, "compute", NULL, TDM_CHART_STYLE_STACKED);
  ids[1] = tdm_chart_add_series(chart, "communication", NULL, TDM_CHART_STYLE_STACKED);
  ids[2] = tdm_chart_add_series(chart, "wait", NULL, TDM_CHART_STYLE_STACKED);
  for (int i = 0; i < N_POINTS; i++)
    for (int s = 0; s < 3; s++)
      tdm_chart_append(chart, ids[s], i * 0.01, (3 - s) * (1 + g_rand_double(rand)));
  g_rand_free(rand);
}

/* Before each frame: the overlays change, so none is painted from the cached image
 * (what a frame costs after the overlays, the plot's size or its ranges changed). */
static void
touch_overlays(TdmChart *chart)
{
  tdm_chart_set_series_smoothing(chart, tdm_chart_get_n_series(chart) - 2, 0.6);
}

/* --only SUBSTRING: the rows whose name has it (to profile one); --png PREFIX: each
 * row's last frame written to PREFIX-ROW.png (to look at what was timed). */
static const char *only_rows;
static const char *png_prefix;

/* Before each frame: the live run's curve reaches one step further than any point
 * so far, so the x range, and with it the mapping, changes every frame (a live run
 * that runs past the earlier runs' range re-renders them each time it draws). */
static void
extend_live(TdmChart *chart)
{
  static double x = 1e4;

  x += 10;
  tdm_chart_append(chart, 0, x, 0.06);
}

/* Rendered alternately 800 and 760 px wide: a window being resized. */
static int frame_width = WIDTH;

static void
alternate_width(TdmChart *chart)
{
  frame_width = frame_width == WIDTH ? WIDTH - 40 : WIDTH;
}

static void
run(const char *name, FillFunc fill, FrameFunc before_frame, RenderFunc render)
{
  TdmChart *chart = TDM_CHART(g_object_ref_sink(tdm_chart_new()));
  cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, WIDTH, HEIGHT);
  cairo_t *cr = cairo_create(surface);
  double times[N_FRAMES], cpu[N_FRAMES], append_s, c0;
  gint64 t0;

  if (only_rows != NULL && strstr(name, only_rows) == NULL) {
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
    g_object_unref(chart);
    return;
  }
  tdm_chart_set_title(chart, name);
  tdm_chart_set_x_label(chart, "Elapsed");
  t0 = g_get_monotonic_time();
  fill(chart);
  append_s = (g_get_monotonic_time() - t0) / 1e6;

  for (int i = 0; i < 5; i++) /* warm-up: fonts, glyph caches, scratch buffers */
    render(chart, cr, WIDTH, HEIGHT);
  for (int i = 0; i < N_FRAMES; i++) {
    if (before_frame != NULL)
      before_frame(chart);
    /* Each frame on a clear surface, as GTK's are (not timed). */
    cairo_save(cr);
    cairo_set_operator(cr, CAIRO_OPERATOR_CLEAR);
    cairo_paint(cr);
    cairo_restore(cr);
    t0 = g_get_monotonic_time();
    c0 = tdm_bench_thread_cpu_ms();
    render(chart, cr, frame_width, HEIGHT);
    cairo_surface_flush(surface);
    cpu[i] = tdm_bench_thread_cpu_ms() - c0;
    times[i] = (g_get_monotonic_time() - t0) / 1e3;
  }
  if (png_prefix != NULL) {
    g_autofree char *row = g_strdelimit(g_strstrip(g_strdup(name)), " ,:", '-');
    g_autofree char *path = g_strdup_printf("%s-%s.png", png_prefix, row);

    cairo_surface_write_to_png(surface, path);
  }
  qsort(times, N_FRAMES, sizeof times[0], tdm_bench_compare_doubles);
  qsort(cpu, N_FRAMES, sizeof cpu[0], tdm_bench_compare_doubles);

  printf("%-28s %8u %10.1f %8.2f %8.2f %8.2f %8.2f\n", name,
         tdm_series_get_capacity(tdm_chart_get_series(chart, 0)),
         append_s * 1e9 / N_POINTS / tdm_chart_get_n_series(chart), times[0],
         times[N_FRAMES / 2], times[N_FRAMES * 9 / 10], cpu[N_FRAMES / 2]);

  cairo_destroy(cr);
  cairo_surface_destroy(surface);
  g_object_unref(chart);
}

int
main(int argc, char **argv)
{
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--only") == 0)
      only_rows = argv[i + 1];
    else if (strcmp(argv[i], "--png") == 0)
      png_prefix = argv[i + 1];
  }
  if (!gtk_init_check()) {
    fprintf(stderr, "bench-chart: no display; run it under tests/gui/xvfb-run-test.sh\n");
    return 77;
  }

  printf("TdmChart: %d points per series, %d frames of %dx%d (ms per frame)\n", N_POINTS,
         N_FRAMES, WIDTH, HEIGHT);
  printf("%-28s %8s %10s %8s %8s %8s %8s\n", "chart", "buckets", "ns/append", "min",
         "median", "p90", "cpu med");
  run("line, 1M points", fill_line, NULL, tdm_chart_render);
  run("loss: log, smoothed, points", fill_loss, NULL, tdm_chart_render);
  run("stacked 3 x 1M points", fill_stacked, NULL, tdm_chart_render);
  /* As the window draws it: exports (tdm_chart_render) draw overlays anew each time. */
  run("loss + 20 overlaid runs", fill_overlays, NULL, tdm_chart_render_live);
  /* The three ways a frame has to draw the overlays anew (every frame here): one of
   * them changed, the live run left their range, the chart was resized. */
  run("  overlays redrawn: changed", fill_overlays, touch_overlays, tdm_chart_render_live);
  run("  overlays redrawn: x range", fill_overlays, extend_live, tdm_chart_render_live);
  run("  overlays redrawn: resized", fill_overlays, alternate_width, tdm_chart_render_live);
  frame_width = WIDTH;
  return 0;
}
