/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-chart-raster.c: the overlaid runs' rasterizer (tdm-chart-raster.c), the
 * chart's image of the overlays, and the smoothed values a series keeps.
 *
 * The rasterizer is held against cairo's own stroke of the same polylines (round
 * caps and joins, same width and alpha): the ink laid down and where it lies must
 * agree. The chart is checked on the pixels of tdm_chart_render_live(): the overlay
 * lands on the row its value maps to, and moves when the mapping changes, so the
 * image it is painted from is not stale.
 */

#include <math.h>
#include <string.h>

#include <gtk/gtk.h>

#include "tdm-chart.h"
#include "tdm-chart-private.h"
#include "tdm-series.h"

#define W 200
#define H 120

static cairo_surface_t *
new_image(int width, int height)
{
  cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);

  cairo_surface_flush(s);
  memset(cairo_image_surface_get_data(s), 0,
         (gsize)cairo_image_surface_get_stride(s) * height);
  cairo_surface_mark_dirty(s);
  return s;
}

static int
alpha_at(cairo_surface_t *s, int x, int y)
{
  const guint8 *data = cairo_image_surface_get_data(s);
  guint32 v = *(const guint32 *)(data + y * cairo_image_surface_get_stride(s) + 4 * x);

  return (v >> 24) & 0xff;
}

static void
stroke_with_cairo(cairo_surface_t *s, const double *x, const double *y, guint n, double width,
                  const GdkRGBA *colour, double alpha)
{
  cairo_t *cr = cairo_create(s);
  gboolean open = FALSE;

  for (guint i = 0; i < n; i++) {
    if (!isfinite(x[i]) || !isfinite(y[i])) {
      open = FALSE;
      continue;
    }
    if (!open) {
      gboolean lone = i + 1 == n || !isfinite(x[i + 1]) || !isfinite(y[i + 1]);

      cairo_move_to(cr, x[i], y[i]);
      /* Cairo strokes a lone point with a round cap only if it has a length. */
      if (lone)
        cairo_line_to(cr, x[i], y[i] + 1e-3);
    } else {
      cairo_line_to(cr, x[i], y[i]);
    }
    open = TRUE;
  }
  cairo_set_source_rgba(cr, colour->red, colour->green, colour->blue, alpha);
  cairo_set_line_width(cr, width);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_stroke(cr);
  cairo_destroy(cr);
  cairo_surface_flush(s);
}

static void
raster(cairo_surface_t *s, TdmChartRaster *r, const double *x, const double *y, guint n,
       double width, const GdkRGBA *colour, double alpha)
{
  cairo_surface_flush(s);
  tdm_chart_raster_init(r, s, 1, 0, 0, cairo_image_surface_get_width(s),
                        cairo_image_surface_get_height(s));
  tdm_chart_raster_curve(r, x, y, n, width, colour, alpha);
  cairo_surface_mark_dirty(s);
}

typedef struct {
  double ink_a, ink_b;   /* alpha summed over the image */
  int inked;             /* pixels either image inks past a tenth of the line's alpha */
  int disagree;          /* of those, where one inks past half of it and the other not a tenth */
  int max_diff;          /* largest alpha difference of one pixel */
} Comparison;

static Comparison
compare(cairo_surface_t *a, cairo_surface_t *b, double alpha)
{
  int line = (int)round(alpha * 255);
  Comparison c = {0};

  for (int y = 0; y < cairo_image_surface_get_height(a); y++)
    for (int x = 0; x < cairo_image_surface_get_width(a); x++) {
      int pa = alpha_at(a, x, y), pb = alpha_at(b, x, y);

      c.ink_a += pa;
      c.ink_b += pb;
      if (pa > line / 10 || pb > line / 10) {
        c.inked++;
        if ((pa > line / 2 && pb < line / 10) || (pb > line / 2 && pa < line / 10))
          c.disagree++;
      }
      c.max_diff = MAX(c.max_diff, abs(pa - pb));
    }
  return c;
}

/* A shallow wave, a steep drop, a spike, a gap, a lone point and a turn back: the
 * ink matches cairo's stroke within 10 %, and no pixel that one inks plainly is
 * left bare by the other, but for a few at the bends. */
static void
test_raster_like_cairo(void)
{
  static const GdkRGBA colour = {0.0, 0.45, 0.7, 1};
  enum { N = 64 };
  double x[N], y[N];
  struct {
    const char *name;
    guint n;
  } shapes[] = {{"wave", 0}, {"steep", 0}, {"spike", 0}, {"gap and dot", 0}, {"turn", 0}};
  TdmChartRaster r = {0};

  for (guint s = 0; s < G_N_ELEMENTS(shapes); s++) {
    cairo_surface_t *mine = new_image(W, H), *theirs = new_image(W, H);
    guint n = 0;
    Comparison c;

    switch (s) {
    case 0:
      for (int i = 0; i < 50; i++, n++)
        x[n] = 10 + i * 3.5, y[n] = 60 + 25 * sin(i * 0.25);
      break;
    case 1:
      x[n] = 20, y[n++] = 10;
      x[n] = 60, y[n++] = 15;
      x[n] = 62, y[n++] = 100;
      x[n] = 150, y[n++] = 105;
      break;
    case 2:
      x[n] = 20, y[n++] = 90;
      x[n] = 90, y[n++] = 90;
      x[n] = 92, y[n++] = 20;
      x[n] = 94, y[n++] = 90;
      x[n] = 180, y[n++] = 90;
      break;
    case 3:
      x[n] = 10, y[n++] = 40;
      x[n] = 60, y[n++] = 50;
      x[n] = NAN, y[n++] = NAN;
      x[n] = 100, y[n++] = 70;
      x[n] = NAN, y[n++] = NAN;
      x[n] = 130, y[n++] = 60;
      x[n] = 190, y[n++] = 30;
      break;
    default:
      x[n] = 20, y[n++] = 30;
      x[n] = 150, y[n++] = 40;
      x[n] = 40, y[n++] = 90;
      x[n] = 170, y[n++] = 100;
      break;
    }

    raster(mine, &r, x, y, n, 1.5, &colour, 0.45);
    stroke_with_cairo(theirs, x, y, n, 1.5, &colour, 0.45);
    c = compare(mine, theirs, 0.45);
    g_test_message("%s: ink %.0f vs cairo %.0f, %d of %d pixels disagree, largest difference %d",
                   shapes[s].name, c.ink_a, c.ink_b, c.disagree, c.inked, c.max_diff);
    g_assert_cmpfloat(c.ink_b, >, 0);
    g_assert_cmpfloat(fabs(c.ink_a - c.ink_b), <=, 0.10 * c.ink_b);
    g_assert_cmpint(c.disagree, <=, MAX(2, c.inked / 50));
    cairo_surface_destroy(mine);
    cairo_surface_destroy(theirs);
  }
  tdm_chart_raster_clear(&r);
}

/* The colour itself: a horizontal line through the middle of a row covers it whole, so
 * that row is the colour at the given alpha over what was there, and the rows beside it
 * get the rest of the width. */
static void
test_raster_blend(void)
{
  static const GdkRGBA red = {1, 0, 0, 1};
  cairo_surface_t *s = new_image(W, H);
  cairo_t *cr = cairo_create(s);
  TdmChartRaster r = {0};
  double x[] = {20, 180}, y[] = {50.5, 50.5};
  const guint8 *data;
  guint32 v;

  /* Opaque white underneath. */
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_destroy(cr);
  raster(s, &r, x, y, 2, 2.0, &red, 0.5);
  data = cairo_image_surface_get_data(s);
  v = *(const guint32 *)(data + 50 * cairo_image_surface_get_stride(s) + 4 * 100);
  /* Half red over white: 255, 255, 128, 128. */
  g_assert_cmpint((v >> 24) & 0xff, ==, 255);
  g_assert_cmpint((v >> 16) & 0xff, ==, 255);
  g_assert_cmpint((v >> 8) & 0xff, >=, 126);
  g_assert_cmpint((v >> 8) & 0xff, <=, 129);
  g_assert_cmpint(v & 0xff, >=, 126);
  g_assert_cmpint(v & 0xff, <=, 129);
  /* The line is 2 px wide around y = 50.5: rows 49 and 51 get half of it each. */
  v = *(const guint32 *)(data + 49 * cairo_image_surface_get_stride(s) + 4 * 100);
  g_assert_cmpint((v >> 8) & 0xff, >=, 185);
  g_assert_cmpint((v >> 8) & 0xff, <=, 195);
  v = *(const guint32 *)(data + 47 * cairo_image_surface_get_stride(s) + 4 * 100);
  g_assert_cmpuint(v, ==, 0xffffffff);
  cairo_surface_destroy(s);
  tdm_chart_raster_clear(&r);
}

/* Nothing lands outside the clip rectangle, whatever the curve does. */
static void
test_raster_clip(void)
{
  static const GdkRGBA colour = {0, 0, 0, 1};
  cairo_surface_t *s = new_image(W, H);
  TdmChartRaster r = {0};
  /* Points far off the image too (a range that maps them there): no overflow. */
  double x[] = {-1e15, -50, 40, 100, 300, 1e15}, y[] = {3e14, -40, 60, 200, 10, -1e18};
  int inside = 0;

  cairo_surface_flush(s);
  tdm_chart_raster_init(&r, s, 1, 30, 20, 100, 70);
  tdm_chart_raster_curve(&r, x, y, G_N_ELEMENTS(x), 3, &colour, 1);
  cairo_surface_mark_dirty(s);
  for (int py = 0; py < H; py++)
    for (int px = 0; px < W; px++) {
      gboolean in = px >= 30 && px < 130 && py >= 20 && py < 90;

      if (!in)
        g_assert_cmpint(alpha_at(s, px, py), ==, 0);
      else
        inside += alpha_at(s, px, py) > 0;
    }
  g_assert_cmpint(inside, >, 100);
  cairo_surface_destroy(s);
  tdm_chart_raster_clear(&r);
}

/* A surface of device scale 2 (a HiDPI screen): the same curve in user units, drawn on
 * twice as many pixels, twice as wide in them. */
static void
test_raster_scale(void)
{
  static const GdkRGBA colour = {0, 0, 0, 1};
  cairo_surface_t *s = new_image(2 * W, 2 * H);
  TdmChartRaster r = {0};
  double x[] = {10, 190}, y[] = {60, 60};
  int rows = 0;

  cairo_surface_flush(s);
  tdm_chart_raster_init(&r, s, 2, 0, 0, W, H);
  tdm_chart_raster_curve(&r, x, y, 2, 2, &colour, 1);
  cairo_surface_mark_dirty(s);
  for (int py = 0; py < 2 * H; py++)
    rows += alpha_at(s, 200, py) > 200;
  /* 2 user units wide: 4 device pixels, centred on device row 120. */
  g_assert_cmpint(rows, ==, 4);
  g_assert_cmpint(alpha_at(s, 200, 118), >, 200);
  g_assert_cmpint(alpha_at(s, 200, 121), >, 200);
  g_assert_cmpint(alpha_at(s, 2 * 190 + 3, 120), ==, 0);
  cairo_surface_destroy(s);
  tdm_chart_raster_clear(&r);
}

/* ---- the chart's image of the overlays ------------------------------------------ */

static cairo_surface_t *
render_live(TdmChart *chart)
{
  cairo_surface_t *s = new_image(400, 240);
  cairo_t *cr = cairo_create(s);

  tdm_chart_render_live(chart, cr, 400, 240);
  cairo_destroy(cr);
  cairo_surface_flush(s);
  return s;
}

/* Grid lines are drawn at a tenth of the text colour's alpha: an overlay (0.45)
 * inks a pixel well past this, a grid line or nothing stays under it. */
#define GRID_ALPHA 60

/* The darkest row of a column inside the plot, off its edges (the live run drawn
 * along the top, the axis along the bottom): where the earlier run crosses it. */
static int
inked_row(cairo_surface_t *s, int x, const GdkRectangle *area)
{
  int best = -1, best_alpha = 0;

  for (int y = area->y + 5; y < area->y + area->height - 4; y++)
    if (alpha_at(s, x, y) > best_alpha)
      best_alpha = alpha_at(s, x, y), best = y;
  return best;
}

/* An earlier run drawn under the live one lands where its value maps to, and follows
 * the mapping when the y range changes or the chart is resized: the image it is
 * painted from is drawn again, not reused. Hidden, it is gone. */
static void
test_overlay_follows_mapping(void)
{
  TdmChart *chart = TDM_CHART(g_object_ref_sink(tdm_chart_new()));
  GdkRGBA grey = {0.3, 0.3, 0.3, 1};
  GdkRectangle area;
  cairo_surface_t *s;
  guint live, overlay;
  int row, expected;

  tdm_chart_set_y_range(chart, 0, 100);
  live = tdm_chart_add_series(chart, "live", NULL, TDM_CHART_STYLE_LINE);
  overlay = tdm_chart_add_series(chart, "earlier", &grey, TDM_CHART_STYLE_OVERLAY);
  tdm_chart_set_series_smoothing(chart, overlay, 0.6);
  /* The live run at the top edge, out of the way; the earlier one at 25. */
  for (int i = 0; i <= 100; i++) {
    tdm_chart_append(chart, live, i, 100);
    tdm_chart_append(chart, overlay, i, 25);
  }

  /* The plot area of an export; the screen's text may differ by a pixel, hence the
   * tolerance (a stale image would be tens of pixels off). */
  g_assert_true(tdm_chart_get_plot_area(chart, 400, 240, &area));
  s = render_live(chart);
  expected = (int)floor(area.y + area.height * 0.75);
  row = inked_row(s, area.x + area.width / 2, &area);
  g_assert_cmpint(abs(row - expected), <=, 3);
  cairo_surface_destroy(s);

  /* Another range: the same value is now halfway up. */
  tdm_chart_set_y_range(chart, 0, 50);
  g_assert_true(tdm_chart_get_plot_area(chart, 400, 240, &area));
  s = render_live(chart);
  expected = (int)floor(area.y + area.height * 0.5);
  row = inked_row(s, area.x + area.width / 2, &area);
  g_assert_cmpint(abs(row - expected), <=, 3);
  cairo_surface_destroy(s);

  /* The live run leaves the range: the x axis grows, the earlier run now ends at the
   * plot's middle, and nothing of it is drawn past there. */
  for (int i = 101; i <= 200; i++)
    tdm_chart_append(chart, live, i, 50);
  g_assert_true(tdm_chart_get_plot_area(chart, 400, 240, &area));
  s = render_live(chart);
  g_assert_cmpint(abs(inked_row(s, area.x + area.width / 4, &area) - expected), <=, 3);
  for (int y = area.y + area.height / 4; y < area.y + area.height * 3 / 4; y++)
    g_assert_cmpint(alpha_at(s, area.x + area.width * 3 / 4 + 2, y), <, GRID_ALPHA);
  cairo_surface_destroy(s);

  tdm_chart_set_series_visible(chart, overlay, FALSE);
  s = render_live(chart);
  for (int y = area.y + area.height / 4; y < area.y + area.height * 3 / 4; y++)
    g_assert_cmpint(alpha_at(s, area.x + area.width / 4 + 2, y), <, GRID_ALPHA);
  cairo_surface_destroy(s);

  g_assert_finalize_object(chart);
}

/* ---- the smoothed values a series keeps ------------------------------------------ */

static void
assert_peek_matches(TdmSeries *series)
{
  guint n, nb;
  const double *kept = tdm_series_peek_smoothed(series, &n);
  g_autofree double *fresh = NULL;

  tdm_series_get_buckets(series, &nb);
  g_assert_cmpuint(n, ==, nb);
  fresh = g_new(double, nb + 1);
  g_assert_cmpuint(tdm_series_get_smoothed(series, fresh, nb), ==, nb);
  for (guint i = 0; i < n; i++)
    if (isnan(fresh[i]))
      g_assert_true(isnan(kept[i]));
    else
      g_assert_cmpfloat(kept[i], ==, fresh[i]);
}

/* Kept until the series changes: appending, clearing and a new weight all show. */
static void
test_series_peek_smoothed(void)
{
  g_autoptr(TdmSeries) series = tdm_series_new("loss", 64);
  const double *kept;
  guint n;

  tdm_series_set_smoothing(series, 0.6);
  for (int i = 0; i < 500; i++)
    tdm_series_append(series, i, i % 7 == 0 ? NAN : 1.0 / (1 + i));
  assert_peek_matches(series);
  kept = tdm_series_peek_smoothed(series, &n);
  g_assert_true(kept == tdm_series_peek_smoothed(series, &n));

  tdm_series_append(series, 500, 5.0);
  assert_peek_matches(series);
  tdm_series_set_smoothing(series, 0.9);
  assert_peek_matches(series);
  tdm_series_clear(series);
  tdm_series_peek_smoothed(series, &n);
  g_assert_cmpuint(n, ==, 0);
  tdm_series_append(series, 1, 2.0);
  kept = tdm_series_peek_smoothed(series, &n);
  g_assert_cmpuint(n, ==, 1);
  g_assert_cmpfloat(kept[0], ==, 2.0);
}

int
main(int argc, char **argv)
{
  gtk_test_init(&argc, &argv, NULL);

  g_test_add_func("/chart/raster/like-cairo", test_raster_like_cairo);
  g_test_add_func("/chart/raster/blend", test_raster_blend);
  g_test_add_func("/chart/raster/clip", test_raster_clip);
  g_test_add_func("/chart/raster/scale", test_raster_scale);
  g_test_add_func("/chart/overlay/follows-mapping", test_overlay_follows_mapping);
  g_test_add_func("/series/peek-smoothed", test_series_peek_smoothed);

  return g_test_run();
}
