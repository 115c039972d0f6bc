/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-legend.c: the legend of a TdmChart, fitted into the rows it may take.
 *
 * The legend gets at most a sixth of the chart's height, so the plot keeps the
 * rest however many runs are overlaid: names first go whole, one or more a row;
 * then each is cut (in the middle, where runs named by date differ) to half the
 * width, two a row; then the last entries give way to "+N more", whose series stay
 * drawn and named in the hover readout. Part of TdmChart's drawing
 * (tdm-chart-draw.c lays the rest of the frame out); not a widget.
 */

#include "tdm-chart-private.h"

#include <glib/gi18n.h>

/* Room between an entry's text and the next entry's swatch. */
#define ENTRY_GAP 14.0

static double
row_height (Frame *f)
{
  return MAX (f->normal_h, SWATCH_H) + 4;
}

/* Where a row at y must end: short of the card's corner button beside it. */
static double
row_end (TdmChart *self,
         Frame    *f,
         double    y)
{
  return y < self->reserve_h ? f->width - MAX (PAD, self->reserve_w) : f->width - PAD;
}

static void
draw_swatch (Frame  *f,
             Entry  *e,
             double  sx,
             double  sy)
{
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
      /* As the area is drawn: the fill at its own opacity, a full-colour top
       * edge, so swatch and area read as the same colour. */
      cairo_rectangle (f->cr, sx + 2, sy, SWATCH_W - 4, SWATCH_H);
      set_source (f->cr, &e->colour, STACK_FILL_ALPHA);
      tdm_chart_fill (f->cr);
      set_source (f->cr, &e->colour, 1);
      cairo_rectangle (f->cr, sx + 2, sy, SWATCH_W - 4, 1.5);
      break;
    }
  tdm_chart_fill (f->cr);
}

/* Text at (x, y), its vertical middle on y, cut in the middle past `room` pixels. */
static void
draw_name (Frame      *f,
           const char *name,
           double      x,
           double      y,
           double      room)
{
  int w, h;

  pango_layout_set_font_description (f->layout, f->font);
  pango_layout_set_text (f->layout, name, -1);
  pango_layout_set_width (f->layout, (int) MAX (1, room) * PANGO_SCALE);
  pango_layout_set_ellipsize (f->layout, PANGO_ELLIPSIZE_MIDDLE);
  pango_layout_get_pixel_size (f->layout, &w, &h);
  set_source (f->cr, &f->fg, 0.85);
  cairo_move_to (f->cr, round (x), round (y - h / 2.0));
  tdm_chart_show_layout (f->cr, f->layout, 0);
  pango_layout_set_width (f->layout, -1);
  pango_layout_set_ellipsize (f->layout, PANGO_ELLIPSIZE_NONE);
}

static char *
more_text (guint hidden)
{
  /* Translators: the last item of a chart's legend when there is no room for
   * the other series' names; they are still drawn and named under the cursor */
  return g_strdup_printf (ngettext ("+%u more", "+%u more", hidden), hidden);
}

/* Walks the legend: the first `shown` entries with names cut to `cap` pixels, then
 * "+N more" for the rest. Draws when asked; says how many rows it took and how far
 * right it reached. */
static int
walk (TdmChart     *self,
      Frame        *f,
      const double *widths,
      double        cap,
      guint         shown,
      gboolean      draw,
      double       *right)
{
  double x = PAD, y = f->legend_y, row_h = row_height (f);
  guint n = 0, hidden = 0, k = 0;
  int rows = 0;

  *right = PAD;
  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      double text_w, item_w;

      if (!e->visible || e->no_legend)
        continue;
      text_w = MIN (widths[k], cap);
      k++;
      if (n >= shown)
        {
          hidden++;
          continue;
        }
      item_w = SWATCH_W + 5 + text_w + ENTRY_GAP;
      if (rows == 0)
        rows = 1;
      else if (x > PAD && x + item_w > row_end (self, f, y))
        {
          x = PAD;
          y += row_h;
          rows++;
        }
      if (draw)
        {
          draw_swatch (f, e, round (x), round (y + (row_h - 4 - SWATCH_H) / 2));
          draw_name (f, tdm_series_get_name (e->series), x + SWATCH_W + 5, y + (row_h - 4) / 2, cap);
        }
      *right = MAX (*right, x + SWATCH_W + 5 + text_w);
      x += item_w;
      n++;
    }

  if (hidden > 0)
    {
      g_autofree char *more = more_text (hidden);
      int w, h;

      tdm_chart_text_size (f, f->font, more, &w, &h);
      if (rows == 0)
        rows = 1;
      else if (x > PAD && x + w > row_end (self, f, y))
        {
          x = PAD;
          y += row_h;
          rows++;
        }
      if (draw)
        tdm_chart_draw_text (f, f->font, more, x, y + (row_h - 4) / 2, 0, 0.5, 0.7);
      *right = MAX (*right, x + w);
    }

  return rows;
}

/* The names' widths, in legend order; their number in *n. */
static double *
name_widths (TdmChart *self,
             Frame    *f,
             guint    *n)
{
  double *widths = g_new0 (double, MAX (self->entries->len, 1));

  *n = 0;
  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      int w, h;

      if (!e->visible || e->no_legend)
        continue;
      tdm_chart_text_size (f, f->font, tdm_series_get_name (e->series), &w, &h);
      widths[(*n)++] = w;
    }
  return widths;
}

double
tdm_chart_legend_fit (TdmChart *self,
                      Frame    *f)
{
  g_autofree double *widths = NULL;
  double row_h = row_height (f), inner = f->width - 2 * PAD, right;
  double caps[2];
  int max_rows = MAX (1, (int) floor (f->height / 6.0 / row_h));
  guint n;

  widths = name_widths (self, f, &n);
  f->legend_rows = 0;
  f->legend_hidden = 0;
  f->legend_right = PAD;
  if (n == 0)
    return 0;

  /* Whole names, one a row at most (the first row may be short of the corner's
   * button); then half the width each. */
  if (f->legend_y < self->reserve_h)
    inner -= MAX (0, self->reserve_w - PAD);
  caps[0] = MAX (1, inner - SWATCH_W - 5 - ENTRY_GAP);
  caps[1] = MAX (1, MIN (caps[0], inner / 2 - SWATCH_W - 5 - ENTRY_GAP));
  for (int c = 0; c < 2; c++)
    {
      f->legend_cap = caps[c];
      f->legend_shown = n;
      f->legend_rows = walk (self, f, widths, caps[c], n, FALSE, &right);
      if (f->legend_rows <= max_rows)
        break;
    }
  /* Then fewer names, "+N more" for the others. */
  while (f->legend_rows > max_rows && f->legend_shown > 0)
    {
      f->legend_shown--;
      f->legend_rows = walk (self, f, widths, f->legend_cap, f->legend_shown, FALSE, &right);
    }
  f->legend_hidden = n - f->legend_shown;
  f->legend_right = right;

  return f->legend_rows * row_h;
}

void
tdm_chart_legend_draw (TdmChart *self,
                       Frame    *f)
{
  g_autofree double *widths = NULL;
  double right;
  guint n;

  if (f->legend_rows == 0)
    return;
  widths = name_widths (self, f, &n);
  walk (self, f, widths, f->legend_cap, f->legend_shown, TRUE, &right);
}
