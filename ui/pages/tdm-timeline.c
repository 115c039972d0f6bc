/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-timeline.c: the timeline's layout (pure arithmetic on the kept events, so it
 * is tested without pixels) and its Cairo drawing: lane labels on the left, boxes,
 * step boundaries, a time axis in ms under them (tdm-timeline-axis.c), a legend of
 * the phases below. */

#include "tdm-timeline.h"
#include "tdm-timeline-private.h"
#include "tdm-draw.h"

#include <glib/gi18n.h>
#include <math.h>
#include <string.h>

#include "tdm-format.h"

G_DEFINE_FINAL_TYPE (TdmTimeline, tdm_timeline, GTK_TYPE_WIDGET)

/* Okabe & Ito's palette: distinguishable with the common colour-vision deficiencies
 * and in greyscale by lightness where it matters (forward dark, backward light). */
static const char *const phase_colours[TDM_PHASE_COUNT] = {
  [TDM_PHASE_FORWARD] = "#0072B2",
  [TDM_PHASE_BACKWARD] = "#56B4E9",
  [TDM_PHASE_REDUCE] = "#CC79A7",
  [TDM_PHASE_ALLREDUCE] = "#D55E00",
  [TDM_PHASE_BROADCAST] = "#009E73",
  [TDM_PHASE_UPDATE] = "#E69F00",
  [TDM_PHASE_WAIT] = "#A0A0A0",
  [TDM_PHASE_ACCUMULATE] = "#F0E442",
};

/* Presentation mode, for a projector in a lit room: fully saturated colours far apart
 * in lightness, every box outlined, so neighbouring phases never blend. */
static const char *const phase_colours_high_contrast[TDM_PHASE_COUNT] = {
  [TDM_PHASE_FORWARD] = "#0033CC",
  [TDM_PHASE_BACKWARD] = "#33CCFF",
  [TDM_PHASE_REDUCE] = "#CC00CC",
  [TDM_PHASE_ALLREDUCE] = "#FF3300",
  [TDM_PHASE_BROADCAST] = "#00AA00",
  [TDM_PHASE_UPDATE] = "#FFCC00",
  [TDM_PHASE_WAIT] = "#FFFFFF",
  [TDM_PHASE_ACCUMULATE] = "#996600",
};

static void
tdm_timeline_colour (TdmTimeline *self,
                     TdmPhase     phase,
                     GdkRGBA     *colour)
{
  if (self->high_contrast)
    gdk_rgba_parse (colour, phase_colours_high_contrast[phase]);
  else
    tdm_timeline_phase_colour (phase, colour);
}

void
tdm_timeline_set_main_device (TdmTimeline *self,
                              int          device)
{
  g_return_if_fail (TDM_IS_TIMELINE (self));

  self->main_device = device;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_timeline_set_high_contrast (TdmTimeline *self,
                                gboolean     high_contrast)
{
  g_return_if_fail (TDM_IS_TIMELINE (self));

  self->high_contrast = !!high_contrast;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

gboolean
tdm_timeline_get_high_contrast (TdmTimeline *self)
{
  g_return_val_if_fail (TDM_IS_TIMELINE (self), FALSE);

  return self->high_contrast;
}

void
tdm_timeline_phase_colour (TdmPhase  phase,
                           GdkRGBA  *colour)
{
  g_return_if_fail (phase >= 0 && phase < TDM_PHASE_COUNT);
  gdk_rgba_parse (colour, phase_colours[phase]);
}

static int
tdm_timeline_replicas (TdmTimeline *self)
{
  int replicas = 0;

  for (guint i = 0; i < self->n_steps; i++)
    replicas = MAX (replicas, self->steps[i]->replicas);
  return replicas;
}

/* A step lasts until its last device's last phase ends. */
static double
tdm_timeline_step_ms (const TdmPhasesEvent *e)
{
  double end = 0;

  for (int r = 0; r < e->replicas && r < TDM_MAX_REPLICAS; r++)
    for (int i = 0; i < e->device[r].spans; i++)
      end = MAX (end, e->device[r].span[i].end_ms);
  return end;
}

static int
tdm_timeline_box_compare (gconstpointer a,
                          gconstpointer b)
{
  const TdmTimelineBox *x = a, *y = b;

  if (x->y != y->y)
    return x->y < y->y ? -1 : 1;
  return x->x < y->x ? -1 : x->x > y->x;
}

/* One step above another from 0: a reference, or a comparison. */
gboolean
tdm_timeline_stacked (TdmTimeline *self)
{
  return self->reference != NULL || self->compared[0].step != NULL;
}

/* Room for a title over each compared run's lanes. */
static double
tdm_timeline_title_height (TdmTimeline *self)
{
  return self->compared[0].step != NULL ? TITLE_HEIGHT : 0;
}

/* The oldest kept step shown at `width`: every kept step where each gets two
 * labelled ticks on its own clock, else fewer, the newest (four steps side by side
 * on a phone would each show only their "0"). */
static guint
tdm_timeline_first_shown (TdmTimeline *self,
                          double       width)
{
  double plot_width = width - self->label_width;

  for (guint first = 0; first + 1 < self->n_steps; first++)
    {
      double total = 0, shortest = G_MAXDOUBLE, axis;

      for (guint i = first; i < self->n_steps; i++)
        {
          double ms = tdm_timeline_step_ms (self->steps[i]);

          total += ms;
          shortest = MIN (shortest, ms);
        }
      axis = total * (1 + STEP_GAP * (self->n_steps - first - 1));
      if (axis > 0 && plot_width > 0
          && tdm_timeline_choose_tick (shortest, plot_width / axis, self->tick_px) > 0)
        return first;
    }
  return self->n_steps > 0 ? self->n_steps - 1 : 0;
}

guint
tdm_timeline_shown (TdmTimeline      *self,
                    double            width,
                    TdmTimelineShown  shown[TDM_TIMELINE_STEPS + 1],
                    double           *axis,
                    int              *lanes)
{
  guint n = 0;

  *axis = 0;
  *lanes = 0;
  if (self->compared[0].step != NULL)
    {
      for (int g = 0; g < 2; g++)
        {
          const TdmPhasesEvent *e = self->compared[g].step;

          shown[n++] = (TdmTimelineShown) { e, 0, *lanes, g == 1, g };
          *axis = MAX (*axis, tdm_timeline_step_ms (e));
          *lanes += MIN (e->replicas, TDM_MAX_REPLICAS);
        }
      return n;
    }
  if (self->reference == NULL)
    {
      double total = 0, gap, at = 0;
      guint first = tdm_timeline_first_shown (self, width);

      for (guint i = first; i < self->n_steps; i++)
        total += tdm_timeline_step_ms (self->steps[i]);
      /* Gaps between steps are a share of the drawn time, so they scale with it. */
      gap = total * STEP_GAP;
      for (guint i = first; i < self->n_steps; i++)
        {
          shown[n++] = (TdmTimelineShown) { self->steps[i], at, 0, FALSE, 0 };
          at += tdm_timeline_step_ms (self->steps[i]) + gap;
        }
      *axis = n > 0 ? total + gap * (n - 1) : 0;
      *lanes = tdm_timeline_replicas (self);
      return n;
    }

  if (self->n_steps > 0)
    {
      const TdmPhasesEvent *last = self->steps[self->n_steps - 1];

      shown[n++] = (TdmTimelineShown) { last, 0, 0, FALSE, 0 };
      *axis = tdm_timeline_step_ms (last);
      *lanes = MIN (last->replicas, TDM_MAX_REPLICAS);
    }
  shown[n++] = (TdmTimelineShown) { self->reference, 0, *lanes, TRUE, 1 };
  *axis = MAX (*axis, tdm_timeline_step_ms (self->reference));
  *lanes += MIN (self->reference->replicas, TDM_MAX_REPLICAS);
  return n;
}

GArray *
tdm_timeline_layout (TdmTimeline *self,
                     double       width,
                     double       height)
{
  GArray *boxes = g_array_new (FALSE, FALSE, sizeof (TdmTimelineBox));
  double plot_width = width - self->label_width;
  double title = tdm_timeline_title_height (self);
  double plot_height = height - self->legend_height - AXIS_HEIGHT - 2 * title;
  TdmTimelineShown shown[TDM_TIMELINE_STEPS + 1];
  double axis, lane;
  int lanes;
  guint n;

  g_return_val_if_fail (TDM_IS_TIMELINE (self), boxes);

  n = tdm_timeline_shown (self, width, shown, &axis, &lanes);
  if (lanes == 0 || axis <= 0 || plot_width <= 0 || plot_height <= 0)
    return boxes;

  lane = plot_height / lanes;
  for (guint i = 0; i < n; i++)
    {
      const TdmPhasesEvent *e = shown[i].e;

      for (int r = 0; r < e->replicas && r < TDM_MAX_REPLICAS; r++)
        for (int k = 0; k < e->device[r].spans && k < TDM_MAX_PHASE_SPANS; k++)
          {
            double start = MAX (0.0, e->device[r].span[k].start_ms);
            double end = MAX (start, e->device[r].span[k].end_ms);
            TdmTimelineBox box = {
              .x = self->label_width + (shown[i].offset + start) / axis * plot_width,
              .y = (shown[i].first_lane + r) * lane + (shown[i].group + 1) * title + LANE_GAP / 2,
              .width = (end - start) / axis * plot_width,
              .height = MAX (1.0, lane - LANE_GAP),
              .device = r,
              .phase = e->device[r].span[k].phase,
              .step = e->step,
              .reference = shown[i].reference,
            };

            g_array_append_val (boxes, box);
          }
      /* Communication that ran hidden under backward: a strip of the all-reduce's
       * colour across the bottom of backward's box, ending where backward ends. */
      for (int r = 0; r < e->replicas && r < TDM_MAX_REPLICAS; r++)
        for (int k = 0; k < e->device[r].spans && k < TDM_MAX_PHASE_SPANS; k++)
          {
            const TdmDevicePhases *d = &e->device[r];
            double start, end, height;
            TdmTimelineBox box;

            if (d->span[k].phase != TDM_PHASE_BACKWARD || !(d->hidden_ms > 0))
              continue;
            end = MAX (0.0, d->span[k].end_ms);
            start = MAX (MAX (0.0, d->span[k].start_ms), end - d->hidden_ms);
            height = MAX (1.0, lane - LANE_GAP);
            box = (TdmTimelineBox) {
              .x = self->label_width + (shown[i].offset + start) / axis * plot_width,
              .y = (shown[i].first_lane + r) * lane + (shown[i].group + 1) * title + LANE_GAP / 2 +
                   0.6 * height,
              .width = (end - start) / axis * plot_width,
              .height = 0.4 * height,
              .device = r,
              .phase = TDM_PHASE_ALLREDUCE,
              .step = e->step,
              .reference = shown[i].reference,
              .hidden = TRUE,
            };
            g_array_append_val (boxes, box);
          }
    }
  /* Lanes top to bottom, each in time order (the kept steps are in time order). */
  g_array_sort (boxes, tdm_timeline_box_compare);
  return boxes;
}

/* A box in a phase's colour: a bar of a lane, or a legend swatch; outlined in black
 * in presentation mode's high contrast. */
static void
tdm_timeline_fill_phase (TdmTimeline *self,
                         cairo_t     *cr,
                         int          phase,
                         double       x,
                         double       y,
                         double       width,
                         double       height)
{
  GdkRGBA colour;

  tdm_timeline_colour (self, phase, &colour);
  gdk_cairo_set_source_rgba (cr, &colour);
  cairo_rectangle (cr, x, y, width, height);
  if (self->high_contrast)
    {
      cairo_fill_preserve (cr);
      cairo_set_source_rgb (cr, 0, 0, 0);
      cairo_set_line_width (cr, 1.5);
      cairo_stroke (cr);
    }
  else
    cairo_fill (cr);
}

/* A comparison's texts: each run's title over its lanes (the lower one under a
 * line), each lane's name and its note under it. */
static void
tdm_timeline_draw_compared (TdmTimeline *self,
                            cairo_t     *cr,
                            double       width,
                            double       height,
                            int          lanes)
{
  double title = tdm_timeline_title_height (self);
  double lane = (height - self->legend_height - AXIS_HEIGHT - 2 * title) / lanes;
  int first = 0;

  cairo_set_line_width (cr, 1);
  for (int g = 0; g < 2; g++)
    {
      int n = MIN (self->compared[g].step->replicas, TDM_MAX_REPLICAS);
      double top = first * lane + g * title;

      if (g > 0)
        {
          cairo_move_to (cr, 0, floor (top) + 0.5);
          cairo_line_to (cr, width, floor (top) + 0.5);
          cairo_stroke (cr);
        }
      if (self->compared[g].title != NULL)
        tdm_draw_text (cr, 4, top + title - 5, self->compared[g].title);
      for (int r = 0; r < n; r++)
        {
          double mid = top + title + (r + 0.5) * lane;
          const char *name = self->compared[g].names[r];
          const char *note = self->compared[g].notes[r];

          tdm_draw_text (cr, 4, mid + (note != NULL ? -3 : 5), name);
          if (note != NULL)
            tdm_draw_text (cr, 4, mid + 11, note);
        }
      first += n;
    }
}

static void
tdm_timeline_snapshot (GtkWidget   *widget,
                       GtkSnapshot *snapshot)
{
  TdmTimeline *self = TDM_TIMELINE (widget);
  double width = gtk_widget_get_width (widget);
  double height = gtk_widget_get_height (widget);
  TdmTimelineShown shown[TDM_TIMELINE_STEPS + 1];
  double axis;
  int replicas;
  g_autoptr(GArray) boxes = NULL;
  GdkRGBA fg;
  cairo_t *cr;

  cr = tdm_draw_begin (widget, snapshot, &fg);
  if (cr == NULL)
    return;

  /* How many rows the legend takes at this width, before the lanes are laid out
   * above it (the same walk as the legend's drawing below). */
  {
    double x = 4;
    int rows = 1;

    for (int p = 0; p < TDM_PHASE_COUNT; p++)
      {
        double w = tdm_draw_text_width (cr, tdm_format_phase (p));

        if (p > 0 && x + 16 + w > width)
          {
            x = 4;
            rows++;
          }
        x += 16 + w + 12;
      }
    self->legend_height = LEGEND_HEIGHT + (rows - 1) * LEGEND_ROW;
  }
  /* The labels' column as wide as its widest text (a comparison's notes, a long
   * device name, another language's words), up to a third of the width. */
  {
    double widest = 0;

    for (int r = 0; r < TDM_MAX_REPLICAS; r++)
      {
        const char *texts[] = {
          self->lane_names[r], self->reference_names[r], self->compared[0].names[r],
          self->compared[0].notes[r], self->compared[1].names[r], self->compared[1].notes[r],
        };

        for (guint k = 0; k < G_N_ELEMENTS (texts); k++)
          if (texts[k] != NULL)
            widest = MAX (widest, tdm_draw_text_width (cr, texts[k]));
      }
    widest = MAX (widest, tdm_draw_text_width (cr, _("main")));
    self->label_width = MAX (LABEL_WIDTH, MIN (widest + 12, width / 3));
  }
  /* The ticks' spacing before the lanes: it decides how many steps are shown. */
  tdm_timeline_measure_ticks (self, cr);
  boxes = tdm_timeline_layout (self, width, height);

  for (guint i = 0; i < boxes->len; i++)
    {
      const TdmTimelineBox *b = &g_array_index (boxes, TdmTimelineBox, i);

      tdm_timeline_fill_phase (self, cr, b->phase, b->x, b->y, MAX (1.0, b->width), b->height);
    }

  gdk_cairo_set_source_rgba (cr, &fg);
  tdm_timeline_shown (self, width, shown, &axis, &replicas);
  if (replicas > 0 && self->compared[0].step != NULL)
    {
      tdm_timeline_draw_axis (self, cr, width, height - self->legend_height - AXIS_HEIGHT);
      tdm_timeline_draw_compared (self, cr, width, height, replicas);
    }
  else if (replicas > 0)
    {
      double lane = (height - self->legend_height - AXIS_HEIGHT) / replicas;
      int live = self->reference != NULL ? replicas - self->reference->replicas : replicas;

      tdm_timeline_draw_axis (self, cr, width, height - self->legend_height - AXIS_HEIGHT);
      /* The reference's lanes under a line of their own. */
      if (self->reference != NULL && live > 0)
        {
          cairo_set_line_width (cr, 1);
          cairo_move_to (cr, 0, floor (live * lane) + 0.5);
          cairo_line_to (cr, width, floor (live * lane) + 0.5);
          cairo_stroke (cr);
        }
      for (int r = 0; r < replicas; r++)
        {
          const char *label = r < live ? (self->lane_names[r] != NULL ? self->lane_names[r] : "")
                                       : (self->reference_names[r - live] != NULL
                                          ? self->reference_names[r - live] : "");
          gboolean is_main = r < live && r == self->main_device;

          tdm_draw_text (cr, 4, r * lane + lane / 2 + (is_main ? -3 : 5), label);
          /* The main device reduces, updates and broadcasts with `main`: say which. */
          if (is_main)
            tdm_draw_text (cr, 4, r * lane + lane / 2 + 14, _("main"));
        }
    }
  else
    {
      tdm_draw_text (cr, 4, (height - self->legend_height) / 2,
                     _("Phases appear once a run has timed a step"));
    }

  /* The legend: a swatch and the name of each phase. */
  double x = 4, y = height - self->legend_height + 4;
  for (int p = 0; p < TDM_PHASE_COUNT; p++)
    {
      const char *name = tdm_format_phase (p);

      tdm_timeline_fill_phase (self, cr, p, x, y + 2, 12, 12);
      gdk_cairo_set_source_rgba (cr, &fg);
      tdm_draw_text (cr, x + 16, y + 13, name);
      x += 16 + tdm_draw_text_width (cr, name) + 12;
      /* The next entry on a new row when it would not fit this one. */
      if (p + 1 < TDM_PHASE_COUNT)
        {
          if (x + 16 + tdm_draw_text_width (cr, tdm_format_phase (p + 1)) > width)
            {
              x = 4;
              y += LEGEND_ROW;
            }
        }
    }
  cairo_destroy (cr);
}

void
tdm_timeline_add_phases (TdmTimeline          *self,
                         const TdmPhasesEvent *phases)
{
  g_return_if_fail (TDM_IS_TIMELINE (self));
  g_return_if_fail (phases != NULL);

  if (self->n_steps == TDM_TIMELINE_STEPS)
    {
      g_free (self->steps[0]);
      memmove (self->steps, self->steps + 1, sizeof self->steps[0] * (TDM_TIMELINE_STEPS - 1));
      self->n_steps--;
    }
  self->steps[self->n_steps++] = g_memdup2 (phases, sizeof *phases);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_timeline_set_lane_name (TdmTimeline *self,
                            int          device,
                            const char  *name)
{
  g_return_if_fail (TDM_IS_TIMELINE (self));
  g_return_if_fail (device >= 0 && device < TDM_MAX_REPLICAS);

  g_free (self->lane_names[device]);
  self->lane_names[device] = g_strdup (name);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

const char *
tdm_timeline_get_lane_name (TdmTimeline *self,
                            int          device)
{
  g_return_val_if_fail (TDM_IS_TIMELINE (self), NULL);
  g_return_val_if_fail (device >= 0 && device < TDM_MAX_REPLICAS, NULL);

  return self->lane_names[device];
}

void
tdm_timeline_set_reference (TdmTimeline          *self,
                            const TdmPhasesEvent *step,
                            const char *const    *names)
{
  g_return_if_fail (TDM_IS_TIMELINE (self));

  g_clear_pointer (&self->reference, g_free);
  for (int r = 0; r < TDM_MAX_REPLICAS; r++)
    g_clear_pointer (&self->reference_names[r], g_free);
  if (step != NULL && step->replicas > 0)
    {
      self->reference = g_memdup2 (step, sizeof *step);
      for (int r = 0; names != NULL && r < step->replicas && r < TDM_MAX_REPLICAS && names[r] != NULL; r++)
        self->reference_names[r] = g_strdup (names[r]);
    }
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

double
tdm_timeline_step_duration (const TdmPhasesEvent *step)
{
  g_return_val_if_fail (step != NULL, 0);
  return tdm_timeline_step_ms (step);
}

static void
tdm_timeline_clear_compared (TdmTimeline *self)
{
  for (int g = 0; g < 2; g++)
    {
      g_clear_pointer (&self->compared[g].step, g_free);
      g_clear_pointer (&self->compared[g].title, g_free);
      for (int r = 0; r < TDM_MAX_REPLICAS; r++)
        {
          g_clear_pointer (&self->compared[g].names[r], g_free);
          g_clear_pointer (&self->compared[g].notes[r], g_free);
        }
    }
}

void
tdm_timeline_set_comparison (TdmTimeline          *self,
                             const TdmTimelineRun *above,
                             const TdmTimelineRun *below)
{
  const TdmTimelineRun *runs[2] = { above, below };

  g_return_if_fail (TDM_IS_TIMELINE (self));

  tdm_timeline_clear_compared (self);
  if (above != NULL && below != NULL && above->step != NULL && below->step != NULL
      && above->step->replicas > 0 && below->step->replicas > 0)
    for (int g = 0; g < 2; g++)
      {
        self->compared[g].step = g_memdup2 (runs[g]->step, sizeof *runs[g]->step);
        self->compared[g].title = g_strdup (runs[g]->title);
        for (int r = 0; r < MIN (runs[g]->step->replicas, TDM_MAX_REPLICAS); r++)
          {
            self->compared[g].names[r] = g_strdup (runs[g]->lane_names[r]);
            self->compared[g].notes[r] = g_strdup (runs[g]->lane_notes[r]);
          }
      }
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

gboolean
tdm_timeline_has_comparison (TdmTimeline *self)
{
  g_return_val_if_fail (TDM_IS_TIMELINE (self), FALSE);
  return self->compared[0].step != NULL;
}

const char *
tdm_timeline_get_title (TdmTimeline *self,
                        int          which)
{
  g_return_val_if_fail (TDM_IS_TIMELINE (self), NULL);
  g_return_val_if_fail (which == 0 || which == 1, NULL);
  return self->compared[which].title;
}

const char *
tdm_timeline_get_lane_note (TdmTimeline *self,
                            int          which,
                            int          device)
{
  g_return_val_if_fail (TDM_IS_TIMELINE (self), NULL);
  g_return_val_if_fail (which == 0 || which == 1, NULL);
  g_return_val_if_fail (device >= 0 && device < TDM_MAX_REPLICAS, NULL);
  return self->compared[which].notes[device];
}

gboolean
tdm_timeline_has_reference (TdmTimeline *self)
{
  g_return_val_if_fail (TDM_IS_TIMELINE (self), FALSE);
  return self->reference != NULL;
}

const TdmPhasesEvent *
tdm_timeline_get_reference (TdmTimeline *self)
{
  g_return_val_if_fail (TDM_IS_TIMELINE (self), NULL);
  return self->reference;
}

void
tdm_timeline_clear (TdmTimeline *self)
{
  g_return_if_fail (TDM_IS_TIMELINE (self));
  for (guint i = 0; i < self->n_steps; i++)
    g_clear_pointer (&self->steps[i], g_free);
  self->n_steps = 0;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

guint
tdm_timeline_get_n_steps (TdmTimeline *self)
{
  g_return_val_if_fail (TDM_IS_TIMELINE (self), 0);
  return self->n_steps;
}

gboolean
tdm_timeline_has_phase (TdmTimeline *self,
                        TdmPhase     phase)
{
  g_return_val_if_fail (TDM_IS_TIMELINE (self), FALSE);
  for (guint i = 0; i < self->n_steps; i++)
    for (int r = 0; r < self->steps[i]->replicas && r < TDM_MAX_REPLICAS; r++)
      for (int k = 0; k < self->steps[i]->device[r].spans; k++)
        if (self->steps[i]->device[r].span[k].phase == (int) phase)
          return TRUE;
  return FALSE;
}

static void
tdm_timeline_finalize (GObject *object)
{
  TdmTimeline *self = TDM_TIMELINE (object);

  for (guint i = 0; i < self->n_steps; i++)
    g_free (self->steps[i]);
  for (int r = 0; r < TDM_MAX_REPLICAS; r++)
    {
      g_free (self->lane_names[r]);
      g_free (self->reference_names[r]);
    }
  g_free (self->reference);
  tdm_timeline_clear_compared (self);
  G_OBJECT_CLASS (tdm_timeline_parent_class)->finalize (object);
}

static void
tdm_timeline_class_init (TdmTimelineClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->finalize = tdm_timeline_finalize;
  widget_class->snapshot = tdm_timeline_snapshot;
  gtk_widget_class_set_css_name (widget_class, "timeline");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
tdm_timeline_init (TdmTimeline *self)
{
  gtk_widget_set_size_request (GTK_WIDGET (self), 320, 120);
  self->main_device = -1;
  self->legend_height = LEGEND_HEIGHT;
  self->label_width = LABEL_WIDTH;
  self->tick_px = TICK_SPACING;
}

GtkWidget *
tdm_timeline_new (void)
{
  return g_object_new (TDM_TYPE_TIMELINE, NULL);
}
