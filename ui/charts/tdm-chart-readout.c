/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-readout.c: the box of values under the cursor of a TdmChart.
 *
 * The x value nearest the cursor, and each series' value there (its smoothed
 * value beside the raw one where the series is smoothed), in a box beside the
 * cursor line, placed where it has room. Every series is named here, also those
 * the legend left to "+N more". Part of TdmChart's drawing; not a widget.
 */

#include "tdm-chart-private.h"

#include <string.h>

#include <glib/gi18n.h>

typedef struct
{
  const GdkRGBA *colour;
  char           text[160];
} ReadoutRow;

/* Cuts text that a fixed buffer cut short back to its last whole character: a name
 * of many-byte characters (a run's, in Japanese) may end mid-character, and Pango
 * refuses text that is not UTF-8. */
static void
cut_to_characters (char *text)
{
  const char *end;

  if (!g_utf8_validate (text, -1, &end))
    text[end - text] = '\0';
}

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
  if (tdm_chart_x_is_time (self))
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

void
tdm_chart_draw_readout (TdmChart *self,
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
      cut_to_characters (rows[n_rows].text);
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
  cut_to_characters (header);
  tdm_chart_text_size (f, f->small, header, &header_w, &h);
  bw = header_w;
  for (guint i = 0; i < n_rows; i++)
    {
      tdm_chart_text_size (f, f->small, rows[i].text, &w, &h);
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
  tdm_chart_draw_text (f, f->small, header, bx + 6, y, 0, 0, 0.7);
  for (guint i = 0; i < n_rows; i++)
    {
      y += f->small_h + 2;
      set_source (f->cr, rows[i].colour, 1);
      cairo_rectangle (f->cr, round (bx + 6), round (y + f->small_h / 2.0 - 4), 8, 8);
      tdm_chart_fill (f->cr);
      tdm_chart_draw_text (f, f->small, rows[i].text, bx + 20, y, 0, 0, 0.9);
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

