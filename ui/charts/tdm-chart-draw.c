/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-draw.c: one frame of TdmChart, everything but the series.
 *
 * Lays the frame out (title, legend, tick labels, plot area), draws the grid,
 * axes and the "No data yet" message, and calls tdm-chart-legend.c for the
 * legend, tdm-chart-readout.c for the hover readout and tdm-chart-plot.c for the
 * series. The widget's snapshot, the PNG and SVG
 * exports and the benchmark all come through tdm_chart_frame_draw(), so what
 * is exported is what is seen.
 */

#include "tdm-chart-private.h"
#include "tdm-draw.h"

#include <string.h>

#include <glib/gi18n.h>

void
tdm_chart_text_size (Frame                      *f,
                     const PangoFontDescription *font,
                     const char                 *text,
                     int                        *w,
                     int                        *h)
{
  pango_layout_set_font_description (f->layout, font);
  pango_layout_set_text (f->layout, text, -1);
  pango_layout_get_pixel_size (f->layout, w, h);
}

void
tdm_chart_draw_text (Frame                      *f,
                     const PangoFontDescription *font,
                     const char                 *text,
                     double                      x,
                     double                      y,
                     double                      ax,
                     double                      ay,
                     double                      alpha)
{
  int w, h;

  tdm_chart_text_size (f, font, text, &w, &h);
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

  tdm_chart_text_size (f, f->font, "Ag", &w, &f->normal_h);
  tdm_chart_text_size (f, f->small, "Ag", &w, &f->small_h);

  if (self->title && *self->title)
    {
      tdm_chart_text_size (f, f->bold, self->title, &w, &h);
      f->title_w = MIN (w, MAX (0, title_room (self, f)));
      top += h + 4;
    }
  f->body_top = top;
  f->empty = !has_data (self);
  f->has_plot = FALSE;
  if (f->empty)
    return FALSE;

  /* The legend's rows beside the corner's button stop short of it; the plot
   * starts below it. */
  f->legend_y = top;
  top += tdm_chart_legend_fit (self, f);
  top = ceil (MAX (top + f->small_h / 2.0, self->reserve_h));

  x_title = tdm_chart_axis_title (self->x_label, tdm_chart_x_is_time (self) ? NULL : self->x_unit);
  bottom = f->height - PAD - f->small_h - 4;
  if (x_title || tdm_chart_x_is_time (self))
    bottom -= f->normal_h + 2;
  bottom = floor (bottom);

  ph_guess = bottom - top;
  compute_y_axis (self, f, (guint) CLAMP (ph_guess / 32, 2, 12));
  for (guint i = 0; i < f->ya.n_ticks; i++)
    {
      tdm_chart_axis_format_tick (&f->ya, f->ya.ticks[i], buf, sizeof buf);
      tdm_chart_text_size (f, f->small, buf, &w, &h);
      widest = MAX (widest, w);
    }

  left = PAD + widest + 6;
  if ((self->y_label && *self->y_label) || (self->y_unit && *self->y_unit))
    left += f->normal_h + 6;
  left = ceil (left);
  right = f->width - PAD - 12;

  data_x_range (self, &x_lo, &x_hi);
  if (tdm_chart_x_is_time (self))
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

  /* The y axis's title stands left of the tick labels, beside the plot and its
   * x tick labels, and beside the x axis's title too where that is centred far
   * enough from it: the legend spans the width above. */
  f->y_band_top = top;
  f->y_band_bottom = bottom + f->small_h + 4;
  f->y_tick_w = widest;
  g_clear_pointer (&x_title, g_free);
  x_title = tdm_chart_axis_title (self->x_label, tdm_chart_x_is_time (self) ? f->xa.unit : self->x_unit);
  w = 0;
  if (x_title)
    tdm_chart_text_size (f, f->font, x_title, &w, &h);
  if (f->map.px + f->map.pw / 2 - w / 2.0 > PAD + f->normal_h + 6)
    f->y_band_bottom = f->height - PAD;

  f->has_plot = right - left >= 16 && bottom - top >= 16;

  return f->has_plot;
}

/* ---- axes, hover, frame ---------------------------------------------------- */

/* "Throughput (samples/s)", or the unit alone where the whole does not fit beside
 * the plot (the chart's title above names the quantity). */
static char *
y_axis_title (TdmChart *self,
              Frame    *f)
{
  char *title = tdm_chart_axis_title (self->y_label, f->ya.unit);
  int w, h;

  if (title == NULL || f->ya.unit == NULL || *f->ya.unit == '\0')
    return title;
  tdm_chart_text_size (f, f->font, title, &w, &h);
  if (w <= f->y_band_bottom - f->y_band_top)
    return title;
  g_free (title);
  return g_strdup (f->ya.unit);
}

static void
draw_axes (TdmChart *self,
           Frame    *f)
{
  const Mapping *m = &f->map;
  cairo_t *cr = f->cr;
  g_autofree char *y_title = y_axis_title (self, f);
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
      tdm_chart_draw_text (f, f->small, buf, m->px - 6, map_y (m, f->ya.ticks[i]), 1, 0.5, 0.7);
    }
  for (guint i = 0; i < f->xa.n_ticks; i++)
    {
      tdm_chart_axis_format_tick (&f->xa, f->xa.ticks[i], buf, sizeof buf);
      tdm_chart_draw_text (f, f->small, buf, map_x (m, f->xa.ticks[i]), m->py + m->ph + 4, 0.5, 0, 0.7);
    }

  x_title = tdm_chart_axis_title (self->x_label, tdm_chart_x_is_time (self) ? f->xa.unit : self->x_unit);
  if (x_title)
    tdm_chart_draw_text (f, f->font, x_title, m->px + m->pw / 2, f->height - PAD, 0.5, 1, 0.85);

  if (y_title)
    {
      /* Ellipsized rather than cut where the plot is shorter than the title. */
      double room = MAX (1, f->y_band_bottom - f->y_band_top);

      cairo_save (cr);
      cairo_translate (cr, PAD, f->y_band_top + room / 2);
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

static GdkRectangle
box (double x,
     double y,
     double w,
     double h)
{
  return (GdkRectangle) { (int) floor (x), (int) floor (y),
                          (int) (ceil (x + w) - floor (x)), (int) (ceil (y + h) - floor (y)) };
}

/* Where draw_axes() and the legend put their text, as tdm_chart_frame_draw() draws it. */
static void
tdm_chart_frame_boxes (TdmChart       *self,
                       Frame          *f,
                       TdmChartLayout *layout)
{
  const Mapping *m = &f->map;
  g_autofree char *y_title = NULL;
  g_autofree char *x_title = NULL;
  char buf[64];
  int w, h;

  memset (layout, 0, sizeof *layout);
  if (self->title && *self->title)
    {
      tdm_chart_text_size (f, f->bold, self->title, &w, &h);
      layout->title = box (PAD, PAD, f->title_w, h);
    }
  if (f->empty)
    return;
  if (f->legend_rows > 0)
    layout->legend = box (PAD, f->legend_y, f->legend_right - PAD,
                          f->legend_rows * (MAX (f->normal_h, SWATCH_H) + 4) - 4);
  layout->legend_named = f->legend_shown;
  layout->legend_more = f->legend_hidden;
  if (!f->has_plot)
    return;
  layout->plot = box (m->px, m->py, m->pw, m->ph);

  for (guint i = 0; i < f->ya.n_ticks; i++)
    {
      GdkRectangle r;

      tdm_chart_axis_format_tick (&f->ya, f->ya.ticks[i], buf, sizeof buf);
      tdm_chart_text_size (f, f->small, buf, &w, &h);
      r = box (m->px - 6 - w, map_y (m, f->ya.ticks[i]) - h / 2.0, w, h);
      if (i == 0)
        layout->y_ticks = r;
      else
        gdk_rectangle_union (&layout->y_ticks, &r, &layout->y_ticks);
    }
  for (guint i = 0; i < f->xa.n_ticks; i++)
    {
      GdkRectangle r;

      tdm_chart_axis_format_tick (&f->xa, f->xa.ticks[i], buf, sizeof buf);
      tdm_chart_text_size (f, f->small, buf, &w, &h);
      r = box (map_x (m, f->xa.ticks[i]) - w / 2.0, m->py + m->ph + 4, w, h);
      if (i == 0)
        layout->x_ticks = r;
      else
        gdk_rectangle_union (&layout->x_ticks, &r, &layout->x_ticks);
    }

  x_title = tdm_chart_axis_title (self->x_label, tdm_chart_x_is_time (self) ? f->xa.unit : self->x_unit);
  if (x_title)
    {
      tdm_chart_text_size (f, f->font, x_title, &w, &h);
      layout->x_title = box (m->px + m->pw / 2 - w / 2.0, f->height - PAD - h, w, h);
    }
  y_title = y_axis_title (self, f);
  if (y_title)
    {
      double room = MAX (1, f->y_band_bottom - f->y_band_top);

      tdm_chart_text_size (f, f->font, y_title, &w, &h);
      layout->y_title_whole = w <= room;
      layout->y_title = box (PAD, f->y_band_top + (room - MIN (w, room)) / 2, h, MIN (w, room));
    }
}

gboolean
tdm_chart_get_layout (TdmChart       *self,
                      int             width,
                      int             height,
                      TdmChartLayout *layout)
{
  cairo_surface_t *surface;
  cairo_t *cr;
  gboolean ok;
  Frame f;

  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (layout != NULL, FALSE);

  surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1, 1);
  cr = cairo_create (surface);
  tdm_chart_frame_init (self, &f, cr, width, height, FALSE);
  ok = tdm_chart_frame_layout (self, &f);
  tdm_chart_frame_boxes (self, &f, layout);
  /* The plot's box as the series are mapped, drawn or not. */
  layout->plot = (GdkRectangle) { (int) f.map.px, (int) f.map.py, (int) f.map.pw, (int) f.map.ph };
  tdm_chart_frame_clear (&f);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);

  return ok;
}

/**
 * tdm_chart_get_plot_area:
 * @area: (out): where data is drawn in a render of this size
 *
 * Returns: %FALSE when no plot would be drawn (no data, or too small)
 */
gboolean
tdm_chart_get_plot_area (TdmChart     *self,
                         int           width,
                         int           height,
                         GdkRectangle *area)
{
  TdmChartLayout layout;
  gboolean ok;

  g_return_val_if_fail (area != NULL, FALSE);

  ok = tdm_chart_get_layout (self, width, height, &layout);
  *area = layout.plot;
  return ok;
}

gboolean
tdm_chart_get_title_area (TdmChart     *self,
                          int           width,
                          int           height,
                          GdkRectangle *area)
{
  TdmChartLayout layout;

  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (area != NULL, FALSE);

  if (self->title == NULL || self->title[0] == '\0')
    return FALSE;
  tdm_chart_get_layout (self, width, height, &layout);
  *area = layout.title;
  return TRUE;
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
      tdm_chart_draw_text (f, f->font, _("No data yet"), f->width / 2.0,
                 (f->body_top + f->height) / 2.0, 0.5, 0.5, 0.55);
      return;
    }

  tdm_chart_legend_draw (self, f);
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
    tdm_chart_draw_readout (self, f);
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
