/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-raster.c: thin anti-aliased curves straight into an image's pixels.
 *
 * The overlaid runs are a few dozen faint polylines, redrawn together whenever they,
 * the plot's size or its ranges change. Cairo 1.16 strokes a 1.5 px line of 250
 * vertices in about 0.35 ms on this project's 2-core machine (its generic stroker
 * and a 256-sample scan converter), so twenty cost 7 ms of a frame. A curve of a
 * chart is a function of x, which makes a cheaper exact method possible: each pixel
 * column is cut into SUB vertical lines, every segment's stroke (a capsule: the
 * segment widened by half the width, with round ends) is intersected with the lines
 * it reaches, and a pixel's coverage is the mean over its lines of how much of the
 * pixel the interval covers. Coverage is exact vertically and in steps of 1 / SUB
 * horizontally; a stretch is blended once, so where segments meet nothing is inked
 * twice, as with a stroke. Against cairo's stroke of the same curves the ink differs
 * by under 2 % (tests/gui/test-chart-raster.c).
 *
 * It writes CAIRO_FORMAT_ARGB32 pixels (premultiplied, native endian) of an image
 * surface the caller flushed and marks dirty afterwards; it knows nothing of charts
 * beyond that, and is not used for exports (those stay paths).
 */

#include "tdm-chart-private.h"

#include <string.h>

#define SUB 2     /* vertical lines per pixel column */

void
tdm_chart_raster_init (TdmChartRaster  *r,
                       cairo_surface_t *image,
                       double           scale,
                       double           clip_x,
                       double           clip_y,
                       double           clip_w,
                       double           clip_h)
{
  int width = cairo_image_surface_get_width (image);
  int height = cairo_image_surface_get_height (image);
  guint n;

  g_return_if_fail (cairo_image_surface_get_format (image) == CAIRO_FORMAT_ARGB32);

  r->pixels = (guint32 *) cairo_image_surface_get_data (image);
  r->stride = cairo_image_surface_get_stride (image) / 4;
  r->scale = scale;
  r->x0 = CLAMP ((int) floor (clip_x * scale), 0, width);
  r->y0 = CLAMP ((int) floor (clip_y * scale), 0, height);
  r->x1 = CLAMP ((int) ceil ((clip_x + clip_w) * scale), r->x0, width);
  r->y1 = CLAMP ((int) ceil ((clip_y + clip_h) * scale), r->y0, height);

  n = (guint) (r->x1 - r->x0) * SUB;
  if (n > r->n_allocated)
    {
      r->top = g_renew (float, r->top, n);
      r->bottom = g_renew (float, r->bottom, n);
      r->n_allocated = n;
    }
  for (guint i = 0; i < n; i++)
    {
      r->top[i] = INFINITY;
      r->bottom[i] = -INFINITY;
    }
  r->lo = G_MAXINT;
  r->hi = -1;
}

void
tdm_chart_raster_clear (TdmChartRaster *r)
{
  g_clear_pointer (&r->top, g_free);
  g_clear_pointer (&r->bottom, g_free);
  r->n_allocated = 0;
}

/* Widens the interval of line k to [a, b]. */
static inline void
cover (TdmChartRaster *r,
       int             k,
       double          a,
       double          b)
{
  if (a < r->top[k])
    r->top[k] = (float) a;
  if (b > r->bottom[k])
    r->bottom[k] = (float) b;
  r->lo = MIN (r->lo, k);
  r->hi = MAX (r->hi, k);
}

/* The capsule around (ax, ay)–(bx, by) of radius `rad`, in device pixels, cut by each
 * vertical line it reaches. Its cut is an interval whose ends lie on the capsule's
 * edge: on one of the two sides parallel to the segment, or on an end's circle; every
 * candidate below lies on that edge, so their extremes are the interval. Where a
 * flat segment meets another, the circle there adds nothing that the other's sides
 * do not give the same lines (the lines' intervals gather every segment's), beyond a
 * wedge outside the bend far under a pixel: `cap_a` and `cap_b` say whether the
 * stroke ends there, and only ends and steep segments pay the square roots. */
static void
add_segment (TdmChartRaster *r,
             double          ax,
             double          ay,
             double          bx,
             double          by,
             double          rad,
             gboolean        cap_a,
             gboolean        cap_b)
{
  double dx, dy, len, nx, ny, slope, rad2 = rad * rad;
  int k0, k1, n = (r->x1 - r->x0) * SUB;

  if (bx < ax)
    {
      double t = ax;
      gboolean c = cap_a;

      ax = bx, bx = t;
      t = ay, ay = by, by = t;
      cap_a = cap_b, cap_b = c;
    }
  dx = bx - ax, dy = by - ay, len = sqrt (dx * dx + dy * dy);
  /* The normal, `rad` long, pointing to larger x (or along x for a dot). */
  nx = len > 0 ? fabs (dy) / len * rad : rad;
  ny = len > 0 ? (dy > 0 ? -dx : dx) / len * rad : 0;
  slope = dx > 0 ? dy / dx : 0;
  /* A steep segment's sides leave the lines near its ends to its circles: where it
   * meets a flat neighbour, that neighbour's sides do not reach them. */
  if (nx > 0.3 * rad)
    cap_a = cap_b = TRUE;

  /* Clamped as doubles: a point far off the plot must not overflow an int. */
  k0 = (int) CLAMP (ceil ((ax - rad - r->x0) * SUB - 0.5), 0.0, (double) n);
  k1 = (int) CLAMP (floor ((bx + rad - r->x0) * SUB - 0.5), -1.0, (double) (n - 1));
  for (int k = k0; k <= k1; k++)
    {
      double xs = r->x0 + (k + 0.5) / SUB;
      double lo = INFINITY, hi = -INFINITY, d;

      d = xs - ax;
      if (cap_a && d * d <= rad2)
        {
          double h = sqrt (rad2 - d * d);

          lo = ay - h, hi = ay + h;
        }
      d = xs - bx;
      if (cap_b && d * d <= rad2)
        {
          double h = sqrt (rad2 - d * d);

          lo = MIN (lo, by - h), hi = MAX (hi, by + h);
        }
      if (dx > 0)
        {
          /* The two sides: the segment moved by ±(nx, ny). */
          if (xs >= ax - nx && xs <= bx - nx)
            {
              double y = ay - ny + (xs - ax + nx) * slope;

              lo = MIN (lo, y), hi = MAX (hi, y);
            }
          if (xs >= ax + nx && xs <= bx + nx)
            {
              double y = ay + ny + (xs - ax - nx) * slope;

              lo = MIN (lo, y), hi = MAX (hi, y);
            }
        }
      if (lo <= hi)
        cover (r, k, lo, hi);
    }
}

/* v / 255, rounded, for v up to 255 × 255, without a division. */
static inline guint32
div255 (guint32 v)
{
  v += 128;
  return (v + (v >> 8)) >> 8;
}

/* Blends what the lines hold into the pixels, in `colour` at `alpha`, and empties
 * them. */
static void
flush (TdmChartRaster *r,
       const GdkRGBA  *colour,
       double          alpha)
{
  guint32 src[4];
  int c0, c1;

  if (r->hi < r->lo)
    return;

  /* The colour opaque, per channel, in cairo's ARGB32 order. */
  src[0] = 255;
  src[1] = (guint32) CLAMP (colour->red * 255 + 0.5, 0, 255);
  src[2] = (guint32) CLAMP (colour->green * 255 + 0.5, 0, 255);
  src[3] = (guint32) CLAMP (colour->blue * 255 + 0.5, 0, 255);
  alpha = CLAMP (alpha * colour->alpha, 0, 1);

  c0 = r->lo / SUB;
  c1 = r->hi / SUB;
  for (int c = c0; c <= c1; c++)
    {
      float *top = r->top + c * SUB, *bottom = r->bottom + c * SUB;
      double ymin = INFINITY, ymax = -INFINITY;
      int row0, row1;

      for (int s = 0; s < SUB; s++)
        if (top[s] <= bottom[s])
          {
            ymin = MIN (ymin, top[s]);
            ymax = MAX (ymax, bottom[s]);
          }
      if (ymin > ymax)
        continue;

      row0 = (int) CLAMP (floor (ymin), (double) r->y0, (double) r->y1);
      row1 = (int) CLAMP (ceil (ymax), (double) r->y0, (double) r->y1);
      for (int row = row0; row < row1; row++)
        {
          double sum = 0;
          guint32 *p, a8, d, out;

          for (int s = 0; s < SUB; s++)
            sum += MAX (0.0, MIN ((double) bottom[s], row + 1.0) - MAX ((double) top[s], (double) row));
          a8 = (guint32) (sum / SUB * alpha * 255 + 0.5);
          if (a8 == 0)
            continue;
          a8 = MIN (a8, 255u);

          p = r->pixels + (gsize) row * r->stride + r->x0 + c;
          d = *p;
          out = 0;
          for (int ch = 0; ch < 4; ch++)
            {
              guint32 dc = (d >> (24 - 8 * ch)) & 0xff;
              guint32 v = div255 (src[ch] * a8 + dc * (255 - a8));

              out |= v << (24 - 8 * ch);
            }
          *p = out;
        }

      for (int s = 0; s < SUB; s++)
        {
          top[s] = INFINITY;
          bottom[s] = -INFINITY;
        }
    }

  r->lo = G_MAXINT;
  r->hi = -1;
}

/**
 * tdm_chart_raster_curve:
 * @x: (array length=n): in user units (the surface's device scale applies)
 * @y: (array length=n): NaN for a gap
 * @width: the stroke's width, in user units
 *
 * Draws the polyline through the points, with round ends, clipped to the
 * rectangle given to tdm_chart_raster_init(). Points in order of x draw as one
 * stroke; where x turns back, what came before is blended first, so a curve that
 * turns back over itself is inked twice where its legs cross, and otherwise right.
 */
void
tdm_chart_raster_curve (TdmChartRaster *r,
                        const double   *x,
                        const double   *y,
                        guint           n,
                        double          width,
                        const GdkRGBA  *colour,
                        double          alpha)
{
  double rad = MAX (width, 0) * r->scale / 2, px = NAN, py = NAN;
  gboolean capped = TRUE;   /* the next segment begins the stroke */
  int dir = 0;              /* which way x went so far in this stroke: +1, −1, 0 */

  if (r->x1 <= r->x0 || r->y1 <= r->y0 || rad <= 0)
    return;

  for (guint i = 0; i < n; i++)
    {
      double cx = x[i] * r->scale, cy = y[i] * r->scale;
      gboolean last = i + 1 == n || !isfinite (x[i + 1]) || !isfinite (y[i + 1]);

      if (!isfinite (cx) || !isfinite (cy))
        {
          px = py = NAN;
          continue;
        }

      if (isnan (px))
        {
          capped = TRUE;
          dir = 0;
          /* A lone point is a dot; otherwise the next segment covers it. */
          if (last)
            add_segment (r, cx, cy, cx, cy, rad, TRUE, TRUE);
        }
      else
        {
          int d = cx > px ? 1 : cx < px ? -1 : 0;
          double nx = last ? cx : x[i + 1] * r->scale;

          /* Where x turns, the stroke so far is blended and a new one begins: the
           * lines would otherwise join one leg to the other. */
          if (d != 0 && dir != 0 && d != dir)
            {
              flush (r, colour, alpha);
              capped = TRUE;
            }
          if (d != 0)
            dir = d;
          add_segment (r, px, py, cx, cy, rad, capped,
                       last || (dir > 0 && nx < cx) || (dir < 0 && nx > cx));
          capped = FALSE;
        }
      px = cx, py = cy;
    }

  flush (r, colour, alpha);
}
