/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-timeline-axis.c: the timeline's time axis: which ticks, 1, 2 or 5 × 10^k ms
 * apart, the room each shown step has allows, which of them get a label, and their
 * drawing. Part of TdmTimeline (tdm-timeline.c lays out and draws the rest). */

#include "tdm-timeline.h"
#include "tdm-timeline-private.h"
#include "tdm-draw.h"

#include <glib/gi18n.h>
#include <math.h>

double
tdm_timeline_choose_tick (double span_ms,
                          double px_per_ms,
                          double min_px)
{
  static const double nice[] = { 1, 2, 5, 10 };
  double want, decade, tick = 0;

  if (span_ms <= 0 || px_per_ms <= 0 || min_px <= 0)
    return 0;
  want = min_px / px_per_ms;
  decade = pow (10, floor (log10 (want)));
  for (guint i = 0; i < G_N_ELEMENTS (nice) && tick == 0; i++)
    if (nice[i] * decade >= want * (1 - 1e-12))
      tick = nice[i] * decade;
  /* Two labelled ticks, 0 and `tick`, or none worth drawing. */
  return tick <= span_ms * (1 + 1e-9) ? tick : 0;
}

double
tdm_timeline_get_tick_ms (TdmTimeline *self,
                          double       width)
{
  TdmTimelineShown shown[TDM_TIMELINE_STEPS + 1];
  double axis, plot_width = width - self->label_width, span;
  int lanes;
  guint n;

  g_return_val_if_fail (TDM_IS_TIMELINE (self), 0);

  n = tdm_timeline_shown (self, width, shown, &axis, &lanes);
  if (n == 0 || axis <= 0 || plot_width <= 0)
    return 0;
  /* Each shown step has its own clock: the shortest must hold two ticks. One scale
   * for steps stacked from 0. */
  span = axis;
  if (!tdm_timeline_stacked (self))
    for (guint i = 0; i < n; i++)
      span = MIN (span, tdm_timeline_step_duration (shown[i].e));
  return tdm_timeline_choose_tick (span, plot_width / axis, self->tick_px);
}

/* Ticks at least as far apart as the widest label they may carry ("12.25 ms"),
 * with room between: the number's digits as the longest kept step has them. */
void
tdm_timeline_measure_ticks (TdmTimeline *self,
                            cairo_t     *cr)
{
  double longest = 0, sample;
  char text[48];

  for (guint i = 0; i < self->n_steps; i++)
    longest = MAX (longest, tdm_timeline_step_duration (self->steps[i]));
  if (self->reference != NULL)
    longest = MAX (longest, tdm_timeline_step_duration (self->reference));
  for (int g = 0; g < 2; g++)
    if (self->compared[g].step != NULL)
      longest = MAX (longest, tdm_timeline_step_duration (self->compared[g].step));
  /* 9.25, 99.25, …: as many digits as the longest step's whole ms. */
  sample = pow (10, longest >= 1 ? floor (log10 (longest)) + 1 : 1) - 0.75;
  g_snprintf (text, sizeof text, _("%g ms"), sample);
  self->tick_px = MAX (TICK_SPACING, tdm_draw_text_width (cr, text) + 12);
}

GArray *
tdm_timeline_axis_ticks (TdmTimeline *self,
                         cairo_t     *cr,
                         double       width)
{
  GArray *ticks = g_array_new (FALSE, FALSE, sizeof (TdmTimelineTick));
  TdmTimelineShown shown[TDM_TIMELINE_STEPS + 1];
  double axis, tick, plot_width, last_end = -G_MAXDOUBLE;
  gboolean last_is_zero = FALSE;
  int lanes;
  guint n;

  g_return_val_if_fail (TDM_IS_TIMELINE (self), ticks);
  g_return_val_if_fail (cr != NULL, ticks);

  tdm_timeline_measure_ticks (self, cr);
  n = tdm_timeline_shown (self, width, shown, &axis, &lanes);
  tick = tdm_timeline_get_tick_ms (self, width);
  plot_width = width - self->label_width;
  if (n == 0 || axis <= 0 || tick <= 0)
    return ticks;
  /* With a reference or a comparison both start at 0: one scale, drawn once. */
  if (tdm_timeline_stacked (self))
    n = 1;
  for (guint i = 0; i < n; i++)
    {
      double step_ms = tdm_timeline_stacked (self) ? axis : tdm_timeline_step_duration (shown[i].e);

      for (int k = 0; k * tick <= step_ms * (1 + 1e-9); k++)
        {
          TdmTimelineTick t = { .ms = k * tick, .step = i };

          t.x = self->label_width + (shown[i].offset + t.ms) / axis * plot_width;
          t.text_x = t.x + 2;
          /* The unit once, on the first step's second tick: the rest are numbers. */
          if (i == 0 && k == 1)
            g_snprintf (t.text, sizeof t.text, _("%g ms"), t.ms);
          else
            g_snprintf (t.text, sizeof t.text, "%g", t.ms);
          t.text_width = tdm_draw_text_width (cr, t.text);
          if (t.text_x + t.text_width > width)
            continue;
          /* A step's "0" rather than the previous step's last number. */
          if (t.text_x < last_end + 4)
            {
              if (k > 0 || last_is_zero || ticks->len == 0)
                continue;
              g_array_remove_index (ticks, ticks->len - 1);
            }
          g_array_append_val (ticks, t);
          last_end = t.text_x + t.text_width;
          last_is_zero = k == 0;
        }
    }
  return ticks;
}

/* Under the lanes: each step's own clock, 0 at the moment it was handed out, ticks
 * every tdm_timeline_get_tick_ms(), those with room labelled, the first step's
 * second with its unit. */
void
tdm_timeline_draw_axis (TdmTimeline *self,
                        cairo_t     *cr,
                        double       width,
                        double       y)
{
  g_autoptr(GArray) ticks = tdm_timeline_axis_ticks (self, cr, width);
  TdmTimelineShown shown[TDM_TIMELINE_STEPS + 1];
  double axis, tick = tdm_timeline_get_tick_ms (self, width);
  double plot_width = width - self->label_width;
  int lanes;
  guint n = tdm_timeline_shown (self, width, shown, &axis, &lanes);

  if (axis <= 0 || tick <= 0)
    return;
  cairo_set_line_width (cr, 1);
  for (guint i = 0; i < n && (i == 0 || !tdm_timeline_stacked (self)); i++)
    {
      double step_ms = tdm_timeline_stacked (self) ? axis : tdm_timeline_step_duration (shown[i].e);

      for (int k = 0; k * tick <= step_ms * (1 + 1e-9); k++)
        {
          double x = self->label_width + (shown[i].offset + k * tick) / axis * plot_width;

          cairo_move_to (cr, floor (x) + 0.5, y);
          cairo_line_to (cr, floor (x) + 0.5, y + 4);
          cairo_stroke (cr);
        }
    }
  for (guint i = 0; i < ticks->len; i++)
    {
      const TdmTimelineTick *t = &g_array_index (ticks, TdmTimelineTick, i);

      tdm_draw_text (cr, t->text_x, y + 14, t->text);
    }
}
