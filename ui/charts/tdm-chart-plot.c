/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-plot.c: the marks of TdmChart's series.
 *
 * Lines, dashed lines, points, reference lines and stacked areas, drawn into
 * the plot area that tdm-chart-draw.c laid out. Series are aggregated per pixel
 * column (min, max, mean) before any path is built, so the cost depends on the
 * width of the chart, not on the number of points. The scratch buffers live in
 * the chart and only grow, so steady drawing does not allocate here.
 */

#include "tdm-chart-private.h"

#include <string.h>

static Column *
tdm_chart_ensure_columns (TdmChart *self,
                          guint     n)
{
  if (n > self->n_cols_allocated)
    {
      self->n_cols_allocated = MAX (n, 2 * self->n_cols_allocated);
      self->cols = g_renew (Column, self->cols, self->n_cols_allocated);
    }

  return self->cols;
}

double *
tdm_chart_ensure_scratch (TdmChart *self,
                          guint     n)
{
  if (n > self->n_scratch_allocated)
    {
      self->n_scratch_allocated = MAX (n, 2 * self->n_scratch_allocated);
      self->scratch = g_renew (double, self->scratch, self->n_scratch_allocated);
    }

  return self->scratch;
}


/* floor() without the libm call the baseline x86-64 target makes of it. */
static inline long
floor_long (double v)
{
  long t = (long) v;

  return t - (v < (double) t);
}

/* Aggregates a series per pixel column; values NULL means bucket means.
 * Without envelope, top and bottom are left meaningless. The column's values are
 * gathered in data units and mapped once per column: on a log scale that is three
 * log10 a column rather than three a bucket, which was a third of a dense chart's
 * frame. The envelope is exact (the log keeps order); the position is the log of the
 * mean rather than the mean of the logs, the same pixel unless the buckets of one
 * column differ by tens of percent. */
static guint
build_columns (TdmChart      *self,
               TdmSeries     *series,
               const double  *values,
               const Mapping *m,
               gboolean       envelope)
{
  const TdmSeriesBucket *buckets;
  Column *cols;
  guint n, nc = 0, count = 0;
  double kx = m->pw / (m->x_hi - m->x_lo);
  double sx = 0, sv = 0, vmax = -INFINITY, vmin = INFINITY;
  gboolean start = TRUE;
  long cur = G_MINLONG;

  buckets = tdm_series_get_buckets (series, &n);
  cols = tdm_chart_ensure_columns (self, n + 1);

#define FLUSH()                                                         \
  G_STMT_START {                                                        \
    if (count > 0)                                                      \
      {                                                                 \
        double y = map_y (m, sv / count);                               \
        double top = y, bottom = y;                                     \
        if (envelope)                                                   \
          {                                                             \
            top = MIN (y, map_y_floor (m, vmax));                       \
            bottom = MAX (y, map_y_floor (m, vmin));                    \
          }                                                             \
        cols[nc++] = (Column) { sx / count, y, top, bottom, start };    \
        start = FALSE;                                                  \
      }                                                                 \
    count = 0; sx = sv = 0; vmax = -INFINITY; vmin = INFINITY;          \
  } G_STMT_END

  for (guint i = 0; i < n; i++)
    {
      const TdmSeriesBucket *b = &buckets[i];
      double v = values ? values[i] : tdm_series_bucket_mean (b);
      double xv;
      long c;

      /* A gap: no value, or one a log scale cannot show. */
      if (b->n_finite == 0 || !isfinite (v) || (m->log && !(v > 0)))
        {
          FLUSH ();
          start = TRUE;
          continue;
        }

      /* map_x(), its division hoisted */
      xv = m->px + (tdm_series_bucket_x (b) - m->x_lo) * kx;
      c = floor_long (xv);
      if (c != cur)
        {
          FLUSH ();
          cur = c;
        }

      sx += xv;
      sv += v;
      count++;
      if (envelope)
        {
          /* fmax/fmin: a bucket's envelope is NaN when it has no finite value. */
          vmax = fmax (vmax, fmax (v, b->y_max));
          vmin = fmin (vmin, fmin (v, b->y_min));
        }
    }
  FLUSH ();

#undef FLUSH

  return nc;
}

static void
stroke_columns (cairo_t      *cr,
                const Column *cols,
                guint         n,
                gboolean      dashed,
                double        width)
{
  static const double dash[] = { 6, 4 };
  gboolean lone = FALSE;
  double lx = 0, ly = 0;

  for (guint i = 0; i < n; i++)
    {
      const Column *c = &cols[i];

      if (c->start)
        {
          cairo_move_to (cr, c->x, c->y);
          lx = c->x, ly = c->y;
          lone |= i + 1 == n || cols[i + 1].start;
          continue;
        }

      /* Smooth stretches need few vertices: drop one that lies within a
       * tenth of a pixel of the chord from the last vertex to the next.
       * Stroking is most of a frame's cost. */
      if (i + 1 < n && !cols[i + 1].start)
        {
          const Column *next = &cols[i + 1];
          double dx = next->x - lx, dy = next->y - ly;
          double cross = (c->x - lx) * dy - (c->y - ly) * dx;

          if (cross * cross < 0.01 * (dx * dx + dy * dy))
            continue;
        }

      cairo_line_to (cr, c->x, c->y);
      lx = c->x, ly = c->y;
    }

  cairo_set_line_width (cr, width);
  cairo_set_line_cap (cr, CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join (cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_dash (cr, dash, dashed ? 2 : 0, 0);
  tdm_chart_stroke (cr);
  cairo_set_dash (cr, NULL, 0, 0);

  if (!lone)
    return;

  /* A point with gaps (or nothing) on both sides strokes to nothing: dot it. */
  for (guint i = 0; i < n; i++)
    if (cols[i].start && (i + 1 == n || cols[i + 1].start))
      {
        cairo_new_sub_path (cr);
        cairo_arc (cr, cols[i].x, cols[i].y, width * 1.25, 0, 2 * G_PI);
      }
  tdm_chart_fill (cr);
}

/* The min/max envelope. Dense columns (about one per pixel, as decimated
 * series are) become one pixel-wide vertical strokes, which tile into a band,
 * keep a lone spike a full pixel wide, and take cairo's fast rectilinear
 * path. Sparse ones are joined into a filled band per unbroken run. */
static void
fill_band (cairo_t       *cr,
           const Column  *cols,
           guint          n,
           double         plot_width,
           const GdkRGBA *colour)
{
  guint s = 0;

  set_source (cr, colour, 0.3);

  if (n >= plot_width * 0.75)
    {
      for (guint i = 0; i < n; i++)
        if (cols[i].bottom - cols[i].top > 0.75)
          {
            double x = floor (cols[i].x) + 0.5;

            cairo_move_to (cr, x, cols[i].top);
            cairo_line_to (cr, x, cols[i].bottom);
          }
      cairo_set_line_width (cr, 1);
      cairo_set_line_cap (cr, CAIRO_LINE_CAP_BUTT);
      tdm_chart_stroke (cr);

      /* Outliers (a column reaching past its neighbours by more than their
       * own spread) are what decimation must not hide: ink them darker. */
      for (guint i = 0; i < n; i++)
        {
          gboolean has_prev = i > 0 && !cols[i].start;
          gboolean has_next = i + 1 < n && !cols[i + 1].start;
          double top, bottom, spread, x = floor (cols[i].x) + 0.5;

          if (!has_prev && !has_next)
            continue;
          top = MIN (has_prev ? cols[i - 1].top : INFINITY,
                     has_next ? cols[i + 1].top : INFINITY);
          bottom = MAX (has_prev ? cols[i - 1].bottom : -INFINITY,
                        has_next ? cols[i + 1].bottom : -INFINITY);
          spread = MAX (6, 1.5 * (bottom - top));
          if (top - cols[i].top > spread)
            {
              cairo_move_to (cr, x, cols[i].top);
              cairo_line_to (cr, x, top);
            }
          if (cols[i].bottom - bottom > spread)
            {
              cairo_move_to (cr, x, bottom);
              cairo_line_to (cr, x, cols[i].bottom);
            }
        }
      set_source (cr, colour, 0.8);
      tdm_chart_stroke (cr);
      return;
    }

  while (s < n)
    {
      guint e = s + 1;
      gboolean wide = cols[s].bottom - cols[s].top > 0.75;

      while (e < n && !cols[e].start)
        {
          wide |= cols[e].bottom - cols[e].top > 0.75;
          e++;
        }

      if (wide)
        {
          cairo_move_to (cr, cols[s].x, cols[s].top);
          for (guint i = s + 1; i < e; i++)
            cairo_line_to (cr, cols[i].x, cols[i].top);
          for (guint i = e; i-- > s;)
            cairo_line_to (cr, cols[i].x, cols[i].bottom);
          cairo_close_path (cr);
        }
      s = e;
    }

  tdm_chart_fill (cr);
}

/* With nested lines, each line is wider by the lines drawn on top of it, so lines
 * that coincide leave a stripe of every colour. */
static double
line_width_for (TdmChart *self,
                Entry    *e)
{
  guint above = 0;
  gboolean seen = FALSE;

  if (!self->nested_lines)
    return LINE_WIDTH;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *other = get_entry (self, i);

      if (other == e)
        seen = TRUE;
      else if (seen && other->visible && (other->style == TDM_CHART_STYLE_LINE ||
                                          other->style == TDM_CHART_STYLE_DASHED))
        above++;
    }

  return LINE_WIDTH + 2.5 * above;
}

static void
draw_line_series (TdmChart *self,
                  Frame    *f,
                  Entry    *e)
{
  double w = tdm_series_get_smoothing (e->series);
  double width = line_width_for (self, e);
  guint n;

  guint nb;

  tdm_series_get_buckets (e->series, &nb);
  n = build_columns (self, e->series, NULL, &f->map, TRUE);
  fill_band (f->cr, self->cols, n, f->map.pw, &e->colour);

  if (w > 0)
    {
      double *smooth;

      /* Raw values faint under the smoothed curve. Where buckets outnumber
       * columns the band already shows them, and a second noisy stroke would
       * double the cost of the frame. */
      if (nb <= n + n / 2)
        {
          set_source (f->cr, &e->colour, 0.35);
          stroke_columns (f->cr, self->cols, n, e->style == TDM_CHART_STYLE_DASHED, width);
        }

      smooth = tdm_chart_ensure_scratch (self, nb + 1);
      tdm_series_get_smoothed (e->series, smooth, nb);
      n = build_columns (self, e->series, smooth, &f->map, FALSE);
    }

  set_source (f->cr, &e->colour, 1);
  stroke_columns (f->cr, self->cols, n, e->style == TDM_CHART_STYLE_DASHED, width);
}

static void
draw_points_series (TdmChart *self,
                    Frame    *f,
                    Entry    *e)
{
  guint n = build_columns (self, e->series, NULL, &f->map, TRUE);

  set_source (f->cr, &e->colour, 1);
  cairo_set_line_width (f->cr, 1.5);
  for (guint i = 0; i < n; i++)
    if (self->cols[i].bottom - self->cols[i].top > 1)
      {
        cairo_move_to (f->cr, self->cols[i].x, self->cols[i].top);
        cairo_line_to (f->cr, self->cols[i].x, self->cols[i].bottom);
      }
  tdm_chart_stroke (f->cr);

  for (guint i = 0; i < n; i++)
    {
      cairo_new_sub_path (f->cr);
      cairo_arc (f->cr, self->cols[i].x, self->cols[i].y, POINT_RADIUS, 0, 2 * G_PI);
    }
  tdm_chart_fill (f->cr);
}

static void
draw_reference_series (Frame *f,
                       Entry *e)
{
  static const double dash[] = { 8, 4 };
  double y;

  if (!tdm_series_get_last (e->series, NULL, &y) || isnan (map_y (&f->map, y)))
    return;

  y = map_y (&f->map, y);
  set_source (f->cr, &e->colour, 1);
  cairo_set_line_width (f->cr, 1.5);
  cairo_set_dash (f->cr, dash, 2, 0);
  cairo_move_to (f->cr, f->map.px, y);
  cairo_line_to (f->cr, f->map.px + f->map.pw, y);
  tdm_chart_stroke (f->cr);
  cairo_set_dash (f->cr, NULL, 0, 0);
}

/* Stacked series share a grid of 2-pixel columns, each the mean of the
 * buckets that fall in it, so series need not have identical x values. */
static void
draw_stacked (TdmChart *self,
              Frame    *f)
{
  const Mapping *m = &f->map;
  guint nc = (guint) ceil (m->pw / 2.0);
  double *base, *top, *val;
  gboolean any = FALSE;

  for (guint i = 0; i < self->entries->len && !any; i++)
    any = get_entry (self, i)->visible
          && get_entry (self, i)->style == TDM_CHART_STYLE_STACKED;
  if (!any || nc == 0)
    return;

  base = tdm_chart_ensure_scratch (self, 3 * nc);
  top = base + nc;
  val = top + nc;
  for (guint c = 0; c < nc; c++)
    base[c] = 0;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      guint s = 0;

      if (!e->visible || e->style != TDM_CHART_STYLE_STACKED)
        continue;

      for (guint c = 0; c < nc; c++)
        {
          double x0 = unmap_x (m, m->px + 2.0 * c);
          double x1 = unmap_x (m, MIN (m->px + 2.0 * c + 2, m->px + m->pw + 1e-6));

          /* The last column is closed on the right, to catch the last point. */
          if (c + 1 == nc)
            x1 = nextafter (x1, INFINITY);
          val[c] = tdm_series_mean_between (e->series, x0, x1);
          top[c] = base[c] + (isfinite (val[c]) ? val[c] : 0);
        }

      while (s < nc)
        {
          guint end;

          if (!isfinite (val[s]))
            {
              s++;
              continue;
            }
          for (end = s; end < nc && isfinite (val[end]); end++)
            ;

          cairo_new_sub_path (f->cr);
          for (guint c = s; c < end; c++)
            cairo_line_to (f->cr, m->px + 2.0 * c + 1, map_y_floor (m, top[c]));
          for (guint c = end; c-- > s;)
            cairo_line_to (f->cr, m->px + 2.0 * c + 1, map_y_floor (m, base[c]));
          cairo_close_path (f->cr);
          s = end;
        }
      set_source (f->cr, &e->colour, STACK_FILL_ALPHA);
      tdm_chart_fill (f->cr);

      s = 0;
      while (s < nc)
        {
          if (isfinite (val[s]))
            {
              gboolean first = s == 0 || !isfinite (val[s - 1]);
              double y = map_y_floor (m, top[s]);

              if (first)
                cairo_move_to (f->cr, m->px + 2.0 * s + 1, y);
              else
                cairo_line_to (f->cr, m->px + 2.0 * s + 1, y);
            }
          s++;
        }
      set_source (f->cr, &e->colour, 1);
      cairo_set_line_width (f->cr, 1.5);
      tdm_chart_stroke (f->cr);

      memcpy (base, top, nc * sizeof *base);
    }
}

/* An earlier run's curve as columns `step` pixels wide: the mean per column of its
 * smoothed values (bucket means where it has none), mapped once per column (see
 * build_columns()). A faint smoothed curve needs no more vertices, and drawing costs
 * by the vertex. */
static guint
overlay_columns (TdmChart *self,
                 Frame    *f,
                 Entry    *e,
                 double    step)
{
  const Mapping *m = &f->map;
  const TdmSeriesBucket *buckets;
  double kx = m->pw / (m->x_hi - m->x_lo);
  const double *smooth = NULL;
  double sx = 0, sv = 0;
  guint nb, nc = 0, count = 0;
  gboolean start = TRUE;
  long cur = G_MINLONG;
  Column *cols;

  buckets = tdm_series_get_buckets (e->series, &nb);
  /* Kept in the series: an earlier run does not change, so it is smoothed once. */
  if (tdm_series_get_smoothing (e->series) > 0)
    smooth = tdm_series_peek_smoothed (e->series, &nb);
  cols = tdm_chart_ensure_columns (self, nb + 1);

#define FLUSH()                                                         \
  G_STMT_START {                                                        \
    if (count > 0)                                                      \
      {                                                                 \
        double y = map_y (m, sv / count);                               \
        cols[nc++] = (Column) { sx / count, y, y, y, start };           \
        start = FALSE;                                                  \
      }                                                                 \
    count = 0; sx = sv = 0;                                             \
  } G_STMT_END

  for (guint i = 0; i < nb; i++)
    {
      double v = smooth ? smooth[i] : tdm_series_bucket_mean (&buckets[i]);
      double xv;
      long c;

      if (buckets[i].n_finite == 0 || !isfinite (v) || (m->log && !(v > 0)))
        {
          FLUSH ();
          start = TRUE;
          continue;
        }
      xv = m->px + (tdm_series_bucket_x (&buckets[i]) - m->x_lo) * kx;
      c = floor_long ((xv - m->px) / step);
      if (c != cur)
        {
          FLUSH ();
          cur = c;
        }
      sx += xv;
      sv += v;
      count++;
    }
  FLUSH ();

#undef FLUSH

  return nc;
}

/* An earlier run under the live one, as a path (for exports: an SVG keeps it as
 * one): its smoothed curve only, thin and faint, so twenty of them still leave the
 * live run readable. */
static void
draw_overlay_series (TdmChart *self,
                     cairo_t  *cr,
                     Frame    *f,
                     Entry    *e)
{
  guint n = overlay_columns (self, f, e, OVERLAY_STEP);

  set_source (cr, &e->colour, OVERLAY_ALPHA);
  stroke_columns (cr, self->cols, n, FALSE, OVERLAY_WIDTH);
}

/* The same curve on screen, a vertex every other pixel, straight into the pixels of
 * the overlays' image (tdm-chart-raster.c): drawing twenty anew costs about 2 ms of
 * a frame on this project's 2-core machine, where cairo's strokes took 7 ms. */
static void
raster_overlay_series (TdmChart *self,
                       Frame    *f,
                       Entry    *e)
{
  guint n = overlay_columns (self, f, e, OVERLAY_RASTER_STEP), m = 0;

  /* Room for a gap before every column. */
  if (2 * n > self->n_curve_allocated)
    {
      self->n_curve_allocated = MAX (2 * n, 2 * self->n_curve_allocated);
      self->curve_x = g_renew (double, self->curve_x, self->n_curve_allocated);
      self->curve_y = g_renew (double, self->curve_y, self->n_curve_allocated);
    }
  for (guint i = 0; i < n; i++)
    {
      if (self->cols[i].start && i > 0)
        {
          self->curve_x[m] = self->curve_y[m] = NAN;
          m++;
        }
      self->curve_x[m] = self->cols[i].x;
      self->curve_y[m] = self->cols[i].y;
      m++;
    }
  tdm_chart_raster_curve (&self->raster, self->curve_x, self->curve_y, m, OVERLAY_WIDTH,
                          &e->colour, OVERLAY_ALPHA);
}

void
tdm_chart_overlays_changed (TdmChart *self)
{
  self->overlay_serial++;
}

static void
mapping_key (const Frame *f,
             double       key[9])
{
  key[0] = f->map.px, key[1] = f->map.py, key[2] = f->map.pw, key[3] = f->map.ph;
  key[4] = f->map.x_lo, key[5] = f->map.x_hi;
  key[6] = f->map.ty_lo, key[7] = f->map.ty_hi, key[8] = f->map.log;
}

/* The overlaid runs. They do not change during a run: they are drawn into an image
 * once and painted from it until they or the mapping (plot area, ranges, scale)
 * change. A frame that misses draws them anew into the same image, rasterized here
 * rather than stroked by cairo (about 2 ms for twenty, against 7 ms). */
static void
draw_overlays (TdmChart *self,
               Frame    *f)
{
  GtkWidget *widget = GTK_WIDGET (self);
  int scale = gtk_widget_get_scale_factor (widget);
  gboolean any = FALSE;
  double key[9];

  for (guint i = 0; i < self->entries->len && !any; i++)
    any = get_entry (self, i)->visible && get_entry (self, i)->style == TDM_CHART_STYLE_OVERLAY
          && tdm_series_get_n_appended (get_entry (self, i)->series) > 0;
  if (!any)
    return;

  /* Exports draw them as they are: an SVG keeps them as paths (tdm-chart-svg.c sees
   * the strokes, not an image), and an export happens once. */
  if (!f->interactive)
    {
      for (guint i = 0; i < self->entries->len; i++)
        {
          Entry *e = get_entry (self, i);

          if (e->visible && e->style == TDM_CHART_STYLE_OVERLAY)
            draw_overlay_series (self, f->cr, f, e);
        }
      return;
    }

  mapping_key (f, key);
  if (self->overlay_cache == NULL || self->cache_serial != self->overlay_serial ||
      self->cache_w != f->width || self->cache_h != f->height || self->cache_scale != scale ||
      memcmp (key, self->cache_map, sizeof key) != 0)
    {
      /* The image is kept while the chart's size is: cleared, not made anew. */
      if (self->overlay_cache == NULL || self->cache_w != f->width ||
          self->cache_h != f->height || self->cache_scale != scale)
        {
          g_clear_pointer (&self->overlay_cache, cairo_surface_destroy);
          self->overlay_cache = cairo_image_surface_create (CAIRO_FORMAT_ARGB32,
                                                            f->width * scale,
                                                            f->height * scale);
          cairo_surface_set_device_scale (self->overlay_cache, scale, scale);
        }
      cairo_surface_flush (self->overlay_cache);
      memset (cairo_image_surface_get_data (self->overlay_cache), 0,
              (gsize) cairo_image_surface_get_stride (self->overlay_cache) *
              cairo_image_surface_get_height (self->overlay_cache));

      tdm_chart_raster_init (&self->raster, self->overlay_cache, scale,
                             f->map.px - POINT_RADIUS, f->map.py - 2,
                             f->map.pw + 2 * POINT_RADIUS, f->map.ph + 4);
      for (guint i = 0; i < self->entries->len; i++)
        {
          Entry *e = get_entry (self, i);

          if (e->visible && e->style == TDM_CHART_STYLE_OVERLAY)
            raster_overlay_series (self, f, e);
        }
      cairo_surface_mark_dirty (self->overlay_cache);

      self->cache_serial = self->overlay_serial;
      self->cache_w = f->width;
      self->cache_h = f->height;
      self->cache_scale = scale;
      memcpy (self->cache_map, key, sizeof key);
    }

  cairo_set_source_surface (f->cr, self->overlay_cache, 0, 0);
  cairo_paint (f->cr);
}

/* Every visible series, overlaid runs and stacked areas first, in the plot area
 * already clipped by the caller. */
void
tdm_chart_plot_series (TdmChart *self,
                       Frame    *f)
{
  draw_overlays (self, f);
  draw_stacked (self, f);
  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);

      if (!e->visible || e->style == TDM_CHART_STYLE_OVERLAY)
        continue;

      switch (e->style)
        {
        case TDM_CHART_STYLE_LINE:
        case TDM_CHART_STYLE_DASHED:
          draw_line_series (self, f, e);
          break;
        case TDM_CHART_STYLE_POINTS:
          draw_points_series (self, f, e);
          break;
        case TDM_CHART_STYLE_REFERENCE:
          draw_reference_series (f, e);
          break;
        case TDM_CHART_STYLE_STACKED:
        default:
          break;
        }
    }
}
