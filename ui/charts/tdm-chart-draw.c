/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-draw.c: one frame of TdmChart, everything but the series.
 *
 * Lays the frame out (title, legend, tick labels, plot area), draws the grid,
 * axes, legend, the "No data yet" message and the hover readout, and calls
 * tdm-chart-plot.c for the series. The widget's snapshot, the PNG and SVG
 * exports and the benchmark all come through tdm_chart_frame_draw(), so what
 * is exported is what is seen.
 */

#include "tdm-chart-private.h"
#include "tdm-draw.h"

#include <string.h>

#include <glib/gi18n.h>

static void
text_size (Frame                      *f,
           const PangoFontDescription *font,
           const char                 *text,
           int                        *w,
           int                        *h)
{
  pango_layout_set_font_description (f->layout, font);
  pango_layout_set_text (f->layout, text, -1);
  pango_layout_get_pixel_size (f->layout, w, h);
}

/* ax, ay: which point of the text box lands on (x, y), 0..1 each way. */
static void
draw_text (Frame                      *f,
           const PangoFontDescription *font,
           const char                 *text,
           double                      x,
           double                      y,
           double                      ax,
           double                      ay,
           double                      alpha)
{
  int w, h;

  text_size (f, font, text, &w, &h);
  set_source (f->cr, &f->fg, alpha);
  cairo_move_to (f->cr, round (x - ax * w), round (y - ay * h));
  tdm_chart_show_layout (f->cr, f->layout, ax);
}

char *
tdm_chart_axis_title (const char *label,
                      const char *unit)
{
  gboolean has_label = label && *label;
  gboolean has_unit = unit && *unit;

  if (has_label && has_unit)
    /* TRANSLATORS: an axis title, "Memory (GiB)" */
    return g_strdup_printf (_("%s (%s)"), label, unit);
  if (has_label)
    return g_strdup (label);
  if (has_unit)
    return g_strdup (unit);

  return NULL;
}

static gboolean
x_is_time (TdmChart *self)
{
  return g_strcmp0 (self->x_unit, "s") == 0;
}

/* ---- ranges -------------------------------------------------------------- */

static gboolean
data_x_range (TdmChart *self,
              double   *lo,
              double   *hi)
{
  gboolean found = FALSE;

  *lo = INFINITY;
  *hi = -INFINITY;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      double a, b;

      if (!e->visible || e->style == TDM_CHART_STYLE_REFERENCE)
        continue;
      if (!tdm_series_get_y_range (e->series, FALSE, NULL, NULL))
        continue;
      tdm_series_get_x_range (e->series, &a, &b);
      *lo = MIN (*lo, a);
      *hi = MAX (*hi, b);
      found = TRUE;
    }

  return found;
}

/* The tallest stack, evaluated at the buckets of the first stacked series. */
static double
stack_max (TdmChart *self)
{
  Entry *first = NULL;
  const TdmSeriesBucket *buckets;
  double best = -INFINITY;
  guint n;

  for (guint i = 0; i < self->entries->len && first == NULL; i++)
    {
      Entry *e = get_entry (self, i);

      if (e->visible && e->style == TDM_CHART_STYLE_STACKED)
        first = e;
    }
  if (first == NULL)
    return NAN;

  buckets = tdm_series_get_buckets (first->series, &n);
  for (guint b = 0; b < n; b++)
    {
      double x = tdm_series_bucket_x (&buckets[b]);
      double sum = 0;

      for (guint i = 0; i < self->entries->len; i++)
        {
          Entry *e = get_entry (self, i);
          const TdmSeriesBucket *other;
          guint idx = b, n_other;
          double v;

          if (!e->visible || e->style != TDM_CHART_STYLE_STACKED)
            continue;
          other = tdm_series_get_buckets (e->series, &n_other);
          /* Series appended together line up bucket for bucket. */
          if ((b >= n_other || tdm_series_bucket_x (&other[b]) != x)
              && !tdm_series_lookup (e->series, x, &idx))
            continue;
          v = tdm_series_bucket_mean (&other[idx]);
          if (isfinite (v))
            sum += v;
        }
      best = MAX (best, sum);
    }

  return best;
}

static gboolean
data_y_range (TdmChart *self,
              gboolean  positive_only,
              double   *lo,
              double   *hi)
{
  gboolean found = FALSE, stacked = FALSE, references = FALSE;

  *lo = INFINITY;
  *hi = -INFINITY;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      double a, b;

      if (!e->visible)
        continue;
      if (e->style == TDM_CHART_STYLE_STACKED)
        {
          stacked = TRUE;
          continue;
        }
      if (e->style == TDM_CHART_STYLE_REFERENCE)
        {
          references = TRUE;
          continue;
        }
      if (!tdm_series_get_y_range (e->series, positive_only, &a, &b))
        continue;
      *lo = MIN (*lo, a);
      *hi = MAX (*hi, b);
      found = TRUE;
    }

  if (stacked)
    {
      double top = stack_max (self);

      if (isfinite (top) && (!positive_only || top > 0))
        {
          /* Stacks grow from zero. */
          if (!positive_only)
            *lo = MIN (*lo, 0);
          else
            for (guint i = 0; i < self->entries->len; i++)
              {
                Entry *e = get_entry (self, i);
                double a;

                if (e->visible && e->style == TDM_CHART_STYLE_STACKED
                    && tdm_series_get_y_range (e->series, TRUE, &a, NULL))
                  *lo = MIN (*lo, a);
              }
          *hi = MAX (*hi, top);
          found = TRUE;
        }
    }

  /* A reference line (a GPU's capacity) widens the range only when the data come
   * within half of it: 141 GiB of capacity would press 2 GiB in use flat against
   * the axis. Beyond that it stays in the legend and the hover readout. */
  for (guint i = 0; references && found && i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      double a, b;

      if (e->visible && e->style == TDM_CHART_STYLE_REFERENCE
          && tdm_series_get_y_range (e->series, positive_only, &a, &b)
          && b <= 2 * *hi)
        {
          *lo = MIN (*lo, a);
          *hi = MAX (*hi, b);
        }
    }

  return found;
}

static gboolean
has_data (TdmChart *self)
{
  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);

      if (e->visible && e->style != TDM_CHART_STYLE_REFERENCE
          && tdm_series_get_y_range (e->series, FALSE, NULL, NULL))
        return TRUE;
    }

  return FALSE;
}

/* ---- layout -------------------------------------------------------------- */

/* How wide the title may be: the width less the padding and the corner kept free. */
static int
title_room (TdmChart *self,
            Frame    *f)
{
  return (int) (f->width - 2 * PAD - (self->reserve_w > 0 ? self->reserve_w : 0));
}

/* Lays the legend out in rows from the left; draws it if asked. */
static double
legend_pass (TdmChart *self,
             Frame    *f,
             gboolean  draw)
{
  double x = PAD, y = f->legend_y;
  double row_h = MAX (f->normal_h, SWATCH_H) + 4;
  gboolean any = FALSE;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      const char *name = tdm_series_get_name (e->series);
      int w, h;
      double item_w;

      if (!e->visible || e->no_legend)
        continue;

      text_size (f, f->font, name, &w, &h);
      item_w = SWATCH_W + 5 + w + 14;
      if (x > PAD && x + item_w > f->width - PAD)
        {
          x = PAD;
          y += row_h;
        }
      any = TRUE;

      if (draw)
        {
          double sx = round (x), sy = round (y + (row_h - 4 - SWATCH_H) / 2);
          double mid = sy + SWATCH_H / 2;

          set_source (f->cr, &e->colour, 1);
          switch (e->style)
            {
            case TDM_CHART_STYLE_LINE:
              cairo_rectangle (f->cr, sx, mid - 2, SWATCH_W, 4);
              break;
            case TDM_CHART_STYLE_DASHED:
            case TDM_CHART_STYLE_REFERENCE:
              cairo_rectangle (f->cr, sx, mid - 2, 7, 4);
              cairo_rectangle (f->cr, sx + 11, mid - 2, 7, 4);
              break;
            case TDM_CHART_STYLE_POINTS:
              cairo_arc (f->cr, sx + SWATCH_W / 2.0, mid, POINT_RADIUS + 1, 0, 2 * G_PI);
              break;
            case TDM_CHART_STYLE_OVERLAY:
              set_source (f->cr, &e->colour, OVERLAY_ALPHA);
              cairo_rectangle (f->cr, sx, mid - 1, SWATCH_W, 2);
              break;
            case TDM_CHART_STYLE_STACKED:
            default:
              /* As the area is drawn: the fill at its own opacity, a full-colour
               * top edge, so swatch and area read as the same colour. */
              cairo_rectangle (f->cr, sx + 2, sy, SWATCH_W - 4, SWATCH_H);
              set_source (f->cr, &e->colour, STACK_FILL_ALPHA);
              tdm_chart_fill (f->cr);
              set_source (f->cr, &e->colour, 1);
              cairo_rectangle (f->cr, sx + 2, sy, SWATCH_W - 4, 1.5);
              break;
            }
          tdm_chart_fill (f->cr);

          draw_text (f, f->font, name, x + SWATCH_W + 5, y + (row_h - 4) / 2, 0, 0.5, 0.85);
        }

      x += item_w;
    }

  return any ? y + row_h - f->legend_y : 0;
}

static void
compute_y_axis (TdmChart *self,
                Frame    *f,
                guint     max_ticks)
{
  double lo, hi;
  gboolean found;

  if (self->log_scale)
    {
      found = data_y_range (self, TRUE, &lo, &hi);
      if (self->fixed_range)
        {
          if (self->fixed_min > 0)
            lo = self->fixed_min;
          else if (!found)
            lo = self->fixed_max / 1000;
          tdm_chart_axis_log (&f->ya, lo, self->fixed_max, max_ticks, FALSE);
        }
      else
        tdm_chart_axis_log (&f->ya, found ? lo : NAN, found ? hi : NAN, max_ticks, TRUE);
      f->ya.unit = self->y_unit && *self->y_unit ? self->y_unit : NULL;
      return;
    }

  if (self->fixed_range)
    {
      tdm_chart_axis_in_unit (&f->ya, self->y_unit, self->fixed_min, self->fixed_max,
                              max_ticks, FALSE);
      return;
    }

  found = data_y_range (self, FALSE, &lo, &hi);
  if (found && hi > lo)
    {
      double pad = (hi - lo) * 0.05;

      lo = lo >= 0 && lo - pad < 0 ? 0 : lo - pad;
      hi += pad;
    }
  tdm_chart_axis_in_unit (&f->ya, self->y_unit, found ? lo : 0, found ? hi : 1, max_ticks, TRUE);
}

gboolean
tdm_chart_frame_layout (TdmChart *self,
                        Frame    *f)
{
  g_autofree char *x_title = NULL;
  char buf[64];
  double top = PAD, bottom, left, right, ph_guess, x_lo, x_hi;
  int w, h, widest = 0;

  text_size (f, f->font, "Ag", &w, &f->normal_h);
  text_size (f, f->small, "Ag", &w, &f->small_h);

  if (self->title && *self->title)
    {
      text_size (f, f->bold, self->title, &w, &h);
      f->title_w = MIN (w, MAX (0, title_room (self, f)));
      top += h + 4;
    }
  f->body_top = top;
  f->empty = !has_data (self);
  f->has_plot = FALSE;
  if (f->empty)
    return FALSE;

  /* The legend's first row would run under the corner's button. */
  top = MAX (top, self->reserve_h);
  f->legend_y = top;
  top += legend_pass (self, f, FALSE);
  top = ceil (top + f->small_h / 2.0);

  x_title = tdm_chart_axis_title (self->x_label, x_is_time (self) ? NULL : self->x_unit);
  bottom = f->height - PAD - f->small_h - 4;
  if (x_title || x_is_time (self))
    bottom -= f->normal_h + 2;
  bottom = floor (bottom);

  ph_guess = bottom - top;
  compute_y_axis (self, f, (guint) CLAMP (ph_guess / 32, 2, 12));
  for (guint i = 0; i < f->ya.n_ticks; i++)
    {
      tdm_chart_axis_format_tick (&f->ya, f->ya.ticks[i], buf, sizeof buf);
      text_size (f, f->small, buf, &w, &h);
      widest = MAX (widest, w);
    }

  left = PAD + widest + 6;
  if ((self->y_label && *self->y_label) || (self->y_unit && *self->y_unit))
    left += f->normal_h + 6;
  left = ceil (left);
  right = f->width - PAD - 12;

  data_x_range (self, &x_lo, &x_hi);
  if (x_is_time (self))
    tdm_chart_axis_time (&f->xa, x_lo, x_hi, (guint) CLAMP ((right - left) / 80, 2, 12));
  else
    tdm_chart_axis_linear (&f->xa, x_lo, x_hi, (guint) CLAMP ((right - left) / 80, 2, 12), FALSE);

  f->map.px = left;
  f->map.py = top;
  f->map.pw = MAX (1, floor (right) - left);
  f->map.ph = MAX (1, bottom - top);
  f->map.x_lo = f->xa.lo;
  f->map.x_hi = f->xa.hi;
  f->map.log = self->log_scale;
  f->map.ty_lo = self->log_scale ? log10 (f->ya.lo) : f->ya.lo;
  f->map.ty_hi = self->log_scale ? log10 (f->ya.hi) : f->ya.hi;
  if (!(f->map.ty_hi > f->map.ty_lo))
    f->map.ty_hi = f->map.ty_lo + 1;
  if (!(f->map.x_hi > f->map.x_lo))
    f->map.x_hi = f->map.x_lo + 1;

  f->has_plot = right - left >= 16 && bottom - top >= 16;

  return f->has_plot;
}

/* ---- axes, hover, frame ---------------------------------------------------- */

static void
draw_axes (TdmChart *self,
           Frame    *f)
{
  const Mapping *m = &f->map;
  cairo_t *cr = f->cr;
  g_autofree char *y_title = tdm_chart_axis_title (self->y_label, f->ya.unit);
  g_autofree char *x_title = NULL;
  char buf[64];

  cairo_set_line_width (cr, 1);
  set_source (cr, &f->fg, 0.1);
  for (guint i = 0; i < f->ya.n_ticks; i++)
    {
      double y = floor (map_y (m, f->ya.ticks[i])) + 0.5;

      cairo_move_to (cr, m->px, y);
      cairo_line_to (cr, m->px + m->pw, y);
    }
  for (guint i = 0; i < f->xa.n_ticks; i++)
    {
      double x = floor (map_x (m, f->xa.ticks[i])) + 0.5;

      cairo_move_to (cr, x, m->py);
      cairo_line_to (cr, x, m->py + m->ph);
    }
  tdm_chart_stroke (cr);

  set_source (cr, &f->fg, 0.45);
  cairo_move_to (cr, m->px - 0.5, m->py);
  cairo_line_to (cr, m->px - 0.5, m->py + m->ph + 0.5);
  cairo_line_to (cr, m->px + m->pw, m->py + m->ph + 0.5);
  tdm_chart_stroke (cr);

  for (guint i = 0; i < f->ya.n_ticks; i++)
    {
      tdm_chart_axis_format_tick (&f->ya, f->ya.ticks[i], buf, sizeof buf);
      draw_text (f, f->small, buf, m->px - 6, map_y (m, f->ya.ticks[i]), 1, 0.5, 0.7);
    }
  for (guint i = 0; i < f->xa.n_ticks; i++)
    {
      tdm_chart_axis_format_tick (&f->xa, f->xa.ticks[i], buf, sizeof buf);
      draw_text (f, f->small, buf, map_x (m, f->xa.ticks[i]), m->py + m->ph + 4, 0.5, 0, 0.7);
    }

  x_title = tdm_chart_axis_title (self->x_label, x_is_time (self) ? f->xa.unit : self->x_unit);
  if (x_title)
    draw_text (f, f->font, x_title, m->px + m->pw / 2, f->height - PAD, 0.5, 1, 0.85);

  if (y_title)
    {
      /* Along the card's whole height, not only the plot's (the strip left of the
       * tick labels is free top to bottom): "Accuracy (%)" whole on a laptop's
       * cards; only a phone's short chart gets it ellipsized rather than cut. */
      double room = MAX (1, f->height - 2 * PAD);

      cairo_save (cr);
      cairo_translate (cr, PAD, PAD + room / 2);
      cairo_rotate (cr, -G_PI / 2);
      pango_layout_set_font_description (f->layout, f->font);
      pango_layout_set_text (f->layout, y_title, -1);
      pango_layout_set_width (f->layout, (int) room * PANGO_SCALE);
      pango_layout_set_ellipsize (f->layout, PANGO_ELLIPSIZE_END);
      pango_layout_set_alignment (f->layout, PANGO_ALIGN_CENTER);
      set_source (cr, &f->fg, 0.85);
      cairo_move_to (cr, -room / 2.0, 0);
      tdm_chart_show_layout (cr, f->layout, 0.5);
      pango_layout_set_width (f->layout, -1);
      pango_layout_set_ellipsize (f->layout, PANGO_ELLIPSIZE_NONE);
      pango_layout_set_alignment (f->layout, PANGO_ALIGN_LEFT);
      cairo_restore (cr);
    }
}

typedef struct
{
  const GdkRGBA *colour;
  char           text[160];
} ReadoutRow;

/* Cuts " unit" off `value` when `other` ends in the same unit. */
static void
drop_shared_unit (char       *value,
                  const char *other)
{
  const char *a = strrchr (value, ' ');
  const char *b = strrchr (other, ' ');

  if (a != NULL && b != NULL && g_str_equal (a, b))
    value[a - value] = '\0';
}

static void
format_x (TdmChart *self,
          double    x,
          char     *buf,
          gsize     size)
{
  if (x_is_time (self))
    tdm_chart_format_duration (x, buf, size);
  else
    {
      tdm_chart_format_value (x, buf, size);
      if (self->x_unit && *self->x_unit)
        {
          g_strlcat (buf, " ", size);
          g_strlcat (buf, self->x_unit, size);
        }
    }
}

static void
draw_hover (TdmChart *self,
            Frame    *f)
{
  const Mapping *m = &f->map;
  ReadoutRow rows[MAX_READOUT];
  char header[64], value[48], smooth_value[48];
  double best_x = NAN, best_d = INFINITY, X, bw, bh, bx, by, y;
  guint n_rows = 0;
  int w, h, header_w;

  if (self->hover_x < m->px || self->hover_x > m->px + m->pw)
    return;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      guint idx;
      double bxv;

      if (!e->visible || e->style == TDM_CHART_STYLE_REFERENCE
          || !tdm_series_lookup (e->series, unmap_x (m, self->hover_x), &idx))
        continue;
      bxv = tdm_series_bucket_x (&tdm_series_get_buckets (e->series, NULL)[idx]);
      if (fabs (map_x (m, bxv) - self->hover_x) < best_d)
        {
          best_d = fabs (map_x (m, bxv) - self->hover_x);
          best_x = bxv;
        }
    }
  if (isnan (best_x))
    return;

  X = floor (map_x (m, best_x)) + 0.5;
  set_source (f->cr, &f->fg, 0.45);
  cairo_set_line_width (f->cr, 1);
  cairo_move_to (f->cr, X, m->py);
  cairo_line_to (f->cr, X, m->py + m->ph);
  tdm_chart_stroke (f->cr);

  for (guint i = 0; i < self->entries->len && n_rows < MAX_READOUT; i++)
    {
      Entry *e = get_entry (self, i);
      const TdmSeriesBucket *buckets;
      double v = NAN, marker = NAN, lo, hi, w_smooth;
      guint idx, nb;

      /* Runs overlaid but not named in the legend would only lengthen the box. */
      if (!e->visible || e->no_legend)
        continue;

      buckets = tdm_series_get_buckets (e->series, &nb);
      w_smooth = tdm_series_get_smoothing (e->series);
      smooth_value[0] = '\0';

      if (e->style == TDM_CHART_STYLE_REFERENCE)
        tdm_series_get_last (e->series, NULL, &v);
      else if (!tdm_series_lookup (e->series, best_x, &idx))
        continue;
      else if (e->style == TDM_CHART_STYLE_POINTS)
        {
          if (fabs (map_x (m, tdm_series_bucket_x (&buckets[idx])) - X) > 6)
            continue;
          v = tdm_series_bucket_mean (&buckets[idx]);
        }
      else
        {
          tdm_series_get_x_range (e->series, &lo, &hi);
          if (best_x < lo || best_x > hi)
            continue;
          v = tdm_series_mean_between (e->series, best_x, best_x);
          if (w_smooth > 0)
            {
              double *smooth = tdm_chart_ensure_scratch (self, nb + 1);

              tdm_series_get_smoothed (e->series, smooth, nb);
              tdm_chart_format_in_unit (smooth[idx], self->y_unit,
                                        smooth_value, sizeof smooth_value);
              marker = smooth[idx];
            }
        }
      if (!smooth_value[0])
        marker = v;

      tdm_chart_format_in_unit (v, self->y_unit, value, sizeof value);
      /* "3.85k samples/s (raw 6.22k)": the unit once, when both share it. */
      if (smooth_value[0])
        drop_shared_unit (value, smooth_value);
      rows[n_rows].colour = &e->colour;
      if (smooth_value[0])
        /* TRANSLATORS: hover readout of a smoothed series: name, smoothed
         * value and raw value, each with its unit: "Train: 25.3 % (raw 31.2 %)" */
        g_snprintf (rows[n_rows].text, sizeof rows[n_rows].text, _("%s: %s (raw %s)"),
                    tdm_series_get_name (e->series), smooth_value, value);
      else
        g_snprintf (rows[n_rows].text, sizeof rows[n_rows].text, "%s: %s",
                    tdm_series_get_name (e->series), value);
      n_rows++;

      if (e->style != TDM_CHART_STYLE_REFERENCE && !isnan (map_y (m, marker))
          && e->style != TDM_CHART_STYLE_STACKED)
        {
          cairo_new_sub_path (f->cr);
          cairo_arc (f->cr, X, map_y (m, marker), 3, 0, 2 * G_PI);
          set_source (f->cr, &e->colour, 1);
          tdm_chart_fill (f->cr);
        }
    }

  format_x (self, best_x, header, sizeof header);
  text_size (f, f->small, header, &header_w, &h);
  bw = header_w;
  for (guint i = 0; i < n_rows; i++)
    {
      text_size (f, f->small, rows[i].text, &w, &h);
      bw = MAX (bw, w + 14);
    }
  bw += 12;
  bh = (n_rows + 1) * (f->small_h + 2) + 10;
  tdm_chart_place_readout (f->width, f->height, X, m->py, &bw, &bh, &bx, &by);

  cairo_save (f->cr);
  cairo_rectangle (f->cr, round (bx) + 0.5, round (by) + 0.5, round (bw), round (bh));
  set_source (f->cr, &f->box_bg, 0.92);
  cairo_fill_preserve (f->cr);
  set_source (f->cr, &f->fg, 0.25);
  cairo_stroke_preserve (f->cr);
  /* A readout wider than a small chart is cut at its own edge, not the card's. */
  cairo_clip (f->cr);

  y = by + 5;
  draw_text (f, f->small, header, bx + 6, y, 0, 0, 0.7);
  for (guint i = 0; i < n_rows; i++)
    {
      y += f->small_h + 2;
      set_source (f->cr, rows[i].colour, 1);
      cairo_rectangle (f->cr, round (bx + 6), round (y + f->small_h / 2.0 - 4), 8, 8);
      tdm_chart_fill (f->cr);
      draw_text (f, f->small, rows[i].text, bx + 20, y, 0, 0, 0.9);
    }
  cairo_restore (f->cr);
}

/* Beside the cursor line at x, on whichever side has room, and always inside the
 * chart (2 px margin): the box shrinks to the chart when it is larger. */
void
tdm_chart_place_readout (int     width,
                         int     height,
                         double  x,
                         double  top,
                         double *bw,
                         double *bh,
                         double *bx,
                         double *by)
{
  *bw = MIN (*bw, MAX (width - 5, 1));
  *bh = MIN (*bh, MAX (height - 5, 1));
  *bx = x + 10 + *bw <= width - 3 ? x + 10 : x - 10 - *bw;
  *bx = CLAMP (*bx, 2, width - 3 - *bw);
  *by = CLAMP (top + 6, 2, height - 3 - *bh);
}

void
tdm_chart_frame_draw (TdmChart *self,
                      Frame    *f)
{
  cairo_t *cr = f->cr;
  const Mapping *m = &f->map;

  tdm_chart_frame_layout (self, f);

  if (self->title && *self->title)
    {
      /* Ellipsized short of the corner's button (fault: titles ran under ⋮). */
      pango_layout_set_font_description (f->layout, f->bold);
      pango_layout_set_text (f->layout, self->title, -1);
      pango_layout_set_width (f->layout, MAX (1, title_room (self, f)) * PANGO_SCALE);
      pango_layout_set_ellipsize (f->layout, PANGO_ELLIPSIZE_END);
      set_source (cr, &f->fg, 1);
      cairo_move_to (cr, PAD, PAD);
      tdm_chart_show_layout (cr, f->layout, 0);
      pango_layout_set_width (f->layout, -1);
      pango_layout_set_ellipsize (f->layout, PANGO_ELLIPSIZE_NONE);
    }

  if (f->empty)
    {
      draw_text (f, f->font, _("No data yet"), f->width / 2.0,
                 (f->body_top + f->height) / 2.0, 0.5, 0.5, 0.55);
      return;
    }

  legend_pass (self, f, TRUE);
  if (!f->has_plot)
    return;

  draw_axes (self, f);

  cairo_save (cr);
  cairo_rectangle (cr, m->px - POINT_RADIUS, m->py - 2,
                   m->pw + 2 * POINT_RADIUS, m->ph + 4);
  cairo_clip (cr);

  tdm_chart_plot_series (self, f);
  cairo_restore (cr);

  if (f->interactive && self->hovering)
    draw_hover (self, f);
}

void
tdm_chart_frame_init (TdmChart *self,
                      Frame    *f,
                      cairo_t  *cr,
                      int       width,
                      int       height,
                      gboolean  interactive)
{
  PangoContext *context = gtk_widget_get_pango_context (GTK_WIDGET (self));
  const PangoFontDescription *base = pango_context_get_font_description (context);
  int size;

  memset (f, 0, sizeof *f);
  f->cr = cr;
  f->width = width;
  f->height = height;
  f->interactive = interactive;

  if (interactive)
    {
      double lum;

      tdm_draw_get_foreground (GTK_WIDGET (self), &f->fg);
      lum = 0.2126 * f->fg.red + 0.7152 * f->fg.green + 0.0722 * f->fg.blue;
      f->box_bg = lum > 0.5 ? (GdkRGBA) { 0.14, 0.14, 0.15, 1 } : (GdkRGBA) { 1, 1, 1, 1 };
      f->layout = gtk_widget_create_pango_layout (GTK_WIDGET (self), NULL);
    }
  else
    {
      /* Files get a fixed light look, whatever the desktop theme. */
      f->fg = (GdkRGBA) { 0.12, 0.12, 0.13, 1 };
      f->box_bg = (GdkRGBA) { 1, 1, 1, 1 };
      f->layout = pango_cairo_create_layout (cr);
    }

  f->font = base ? pango_font_description_copy (base) : pango_font_description_new ();
  if (pango_font_description_get_size (f->font) <= 0)
    pango_font_description_set_size (f->font, 10 * PANGO_SCALE);
  size = pango_font_description_get_size (f->font);

  f->small = pango_font_description_copy (f->font);
  if (pango_font_description_get_size_is_absolute (f->font))
    pango_font_description_set_absolute_size (f->small, size * 0.85);
  else
    pango_font_description_set_size (f->small, (int) (size * 0.85));

  f->bold = pango_font_description_copy (f->font);
  pango_font_description_set_weight (f->bold, PANGO_WEIGHT_BOLD);
}

void
tdm_chart_frame_clear (Frame *f)
{
  g_clear_object (&f->layout);
  g_clear_pointer (&f->font, pango_font_description_free);
  g_clear_pointer (&f->small, pango_font_description_free);
  g_clear_pointer (&f->bold, pango_font_description_free);
}
