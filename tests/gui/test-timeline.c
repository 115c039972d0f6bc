/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-timeline.c: TdmTimeline's data handling and layout, on events from a real run
 * of each strategy on 2 CPU workers: every phase of both strategies is kept and laid
 * out, one lane per device, boxes in time order inside the widget; the colours are
 * distinct; shown in a window, its boxes are drawn in their phases' colours where the
 * layout puts them. Nothing is timed. */

#include <gtk/gtk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frame-test-util.h"
#include "tdm-draw.h"
#include "tdm-timeline.h"
#include "tdm-trainer.h"

static void
on_event (const TdmEvent *e,
          gpointer        data)
{
  if (e->kind == TDM_EVENT_PHASES)
    tdm_timeline_add_phases (TDM_TIMELINE (data), &e->phases);
}

static void
train_into (TdmTimeline *timeline,
            TdmStrategy  strategy)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new ();
  g_autoptr(GError) error = NULL;

  g_free (cfg->dataset);
  cfg->dataset = g_strdup ("synthetic");
  g_free (cfg->network);
  cfg->network = g_strdup ("fc16,relu,fc10");
  cfg->max_steps = 12;
  cfg->strategy = strategy;
  g_assert_true (tdm_config_set_devices (cfg, "cpu:2", &error));
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new (cfg, on_event, timeline);
  /* Every step summarized, so every step is sampled and timed. */
  tdm_trainer_options (trainer)->summary_steps = 1;
  g_assert_true (tdm_trainer_run (trainer, NULL, &error));
  g_assert_no_error (error);
}

static void
check_layout (TdmTimeline *timeline)
{
  const double W = 800, H = 300;
  g_autoptr(GArray) boxes = tdm_timeline_layout (timeline, W, H);
  double lane_top[2] = { INFINITY, INFINITY };
  double last_x[2] = { -1, -1 };

  g_assert_cmpuint (boxes->len, >, 0);
  for (guint i = 0; i < boxes->len; i++)
    {
      const TdmTimelineBox *b = &g_array_index (boxes, TdmTimelineBox, i);

      g_assert_cmpint (b->device, >=, 0);
      g_assert_cmpint (b->device, <, 2);
      g_assert_cmpfloat (b->x, >=, 0);
      g_assert_cmpfloat (b->x + b->width, <=, W + 1e-6);
      g_assert_cmpfloat (b->y, >=, 0);
      g_assert_cmpfloat (b->y + b->height, <=, H);
      g_assert_cmpfloat (b->width, >=, 0);
      /* Hidden communication lies across the bottom of backward, after its lane. */
      if (b->hidden)
        continue;
      /* Within a lane, time runs left to right. */
      g_assert_cmpfloat (b->x, >=, last_x[b->device] - 1e-6);
      last_x[b->device] = b->x;
      lane_top[b->device] = MIN (lane_top[b->device], b->y);
    }
  /* Device 1's lane lies below device 0's. */
  g_assert_cmpfloat (lane_top[1], >, lane_top[0]);
}

static void
test_strategies (void)
{
  TdmTimeline *timeline = g_object_ref_sink (TDM_TIMELINE (tdm_timeline_new ()));

  train_into (timeline, TDM_STRATEGY_ALLREDUCE);
  g_assert_cmpuint (tdm_timeline_get_n_steps (timeline), ==, TDM_TIMELINE_STEPS);
  g_assert_true (tdm_timeline_has_phase (timeline, TDM_PHASE_FORWARD));
  g_assert_true (tdm_timeline_has_phase (timeline, TDM_PHASE_BACKWARD));
  g_assert_true (tdm_timeline_has_phase (timeline, TDM_PHASE_ALLREDUCE));
  g_assert_true (tdm_timeline_has_phase (timeline, TDM_PHASE_UPDATE));
  /* CPU workers' buckets are all-reduced on their communication threads: waiting
   * for the other device is inside the all-reduce, not a phase before it. */
  g_assert_false (tdm_timeline_has_phase (timeline, TDM_PHASE_WAIT));
  g_assert_false (tdm_timeline_has_phase (timeline, TDM_PHASE_REDUCE));
  check_layout (timeline);

  tdm_timeline_clear (timeline);
  g_assert_cmpuint (tdm_timeline_get_n_steps (timeline), ==, 0);
  g_autoptr(GArray) none = tdm_timeline_layout (timeline, 800, 300);
  g_assert_cmpuint (none->len, ==, 0);

  train_into (timeline, TDM_STRATEGY_MAIN);
  g_assert_true (tdm_timeline_has_phase (timeline, TDM_PHASE_REDUCE));
  g_assert_true (tdm_timeline_has_phase (timeline, TDM_PHASE_UPDATE));
  g_assert_true (tdm_timeline_has_phase (timeline, TDM_PHASE_BROADCAST));
  g_assert_false (tdm_timeline_has_phase (timeline, TDM_PHASE_ALLREDUCE));
  check_layout (timeline);

  /* Only the main device (0) updates under `main`. */
  g_autoptr(GArray) boxes = tdm_timeline_layout (timeline, 800, 300);
  for (guint i = 0; i < boxes->len; i++)
    {
      const TdmTimelineBox *b = &g_array_index (boxes, TdmTimelineBox, i);
      if (b->phase == TDM_PHASE_UPDATE)
        g_assert_cmpint (b->device, ==, 0);
    }
  g_assert_finalize_object (timeline);
}

/* Shown in a window it draws: the widget's own rendering, read back as pixels, has
 * each of the larger boxes tdm_timeline_layout() reports in that box's phase colour
 * (a snapshot that drew nothing, or drew the boxes elsewhere, fails). Then it goes
 * away cleanly. */
static void
test_realized (void)
{
  GtkWidget *window = gtk_window_new ();
  GtkWidget *timeline = tdm_timeline_new ();
  g_autoptr(GdkPaintable) paintable = NULL;
  g_autoptr(GArray) boxes = NULL;
  GskRenderNode *node;
  GtkSnapshot *snapshot;
  cairo_surface_t *surface;
  cairo_t *cr;
  guint checked = 0;
  int width, height;

  gtk_window_set_default_size (GTK_WINDOW (window), 800, 300);
  gtk_window_set_child (GTK_WINDOW (window), timeline);
  train_into (TDM_TIMELINE (timeline), TDM_STRATEGY_MAIN);
  gtk_window_present (GTK_WINDOW (window));
  /* Drawn at its size: a paintable of it paints that drawing. */
  wait_for_rest (timeline, 2);

  g_assert_true (gtk_widget_get_mapped (timeline));
  width = gtk_widget_get_width (timeline);
  height = gtk_widget_get_height (timeline);
  g_assert_cmpint (width, >, 200);
  g_assert_cmpint (height, >, 100);

  paintable = gtk_widget_paintable_new (timeline);
  snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, width, height);
  node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);
  surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, width, height);
  cr = cairo_create (surface);
  gsk_render_node_draw (node, cr);
  cairo_destroy (cr);
  cairo_surface_flush (surface);

  /* The snapshot laid the boxes out at this size (the legend's rows included). */
  boxes = tdm_timeline_layout (TDM_TIMELINE (timeline), width, height);
  g_assert_cmpuint (boxes->len, >, 0);
  for (guint i = 0; i < boxes->len; i++)
    {
      const TdmTimelineBox *b = &g_array_index (boxes, TdmTimelineBox, i);
      int cx = (int) (b->x + b->width / 2), cy = (int) (b->y + b->height / 2);
      const guint8 *row;
      guint32 pixel;
      GdkRGBA want;

      /* Boxes wide enough to sample, and clear of the lane labels at the left. */
      if (b->width < 6 || b->height < 6 || b->x < 90)
        continue;
      row = cairo_image_surface_get_data (surface) + cy * cairo_image_surface_get_stride (surface);
      pixel = ((const guint32 *) row)[cx];
      tdm_timeline_phase_colour (b->phase, &want);
      g_assert_cmpint (abs ((int) ((pixel >> 16) & 0xff) - (int) lround (want.red * 255)), <=, 2);
      g_assert_cmpint (abs ((int) ((pixel >> 8) & 0xff) - (int) lround (want.green * 255)), <=, 2);
      g_assert_cmpint (abs ((int) (pixel & 0xff) - (int) lround (want.blue * 255)), <=, 2);
      checked++;
    }
  g_assert_cmpuint (checked, >, 0);

  cairo_surface_destroy (surface);
  gsk_render_node_unref (node);
  gtk_window_destroy (GTK_WINDOW (window));
}

/* Communication hidden under backward shows on the timeline: a strip of the
 * all-reduce's colour across the bottom of backward's box, as long as the time
 * hidden, ending where backward ends; none where nothing was hidden. */
static void
test_hidden (void)
{
  TdmTimeline *timeline = g_object_ref_sink (TDM_TIMELINE (tdm_timeline_new ()));
  TdmPhasesEvent e = { .step = 7, .replicas = 2 };
  g_autoptr(GArray) boxes = NULL;
  const TdmTimelineBox *backward = NULL, *strip = NULL;
  guint strips = 0;

  for (int r = 0; r < 2; r++)
    {
      TdmDevicePhases *d = &e.device[r];

      d->spans = 4;
      d->span[0].phase = TDM_PHASE_FORWARD, d->span[0].start_ms = 0, d->span[0].end_ms = 4;
      d->span[1].phase = TDM_PHASE_BACKWARD, d->span[1].start_ms = 4, d->span[1].end_ms = 12;
      d->span[2].phase = TDM_PHASE_ALLREDUCE, d->span[2].start_ms = 12, d->span[2].end_ms = 13;
      d->span[3].phase = TDM_PHASE_UPDATE, d->span[3].start_ms = 13, d->span[3].end_ms = 16;
      d->hidden_ms = r == 0 ? 3 : 0;
    }
  tdm_timeline_add_phases (timeline, &e);
  boxes = tdm_timeline_layout (timeline, 800, 300);
  for (guint i = 0; i < boxes->len; i++)
    {
      const TdmTimelineBox *b = &g_array_index (boxes, TdmTimelineBox, i);

      if (b->hidden)
        {
          strips++;
          strip = b;
        }
      else if (b->device == 0 && b->phase == TDM_PHASE_BACKWARD)
        backward = b;
    }
  g_assert_cmpuint (strips, ==, 1);
  g_assert_nonnull (backward);
  g_assert_cmpint (strip->device, ==, 0);
  g_assert_cmpint (strip->phase, ==, TDM_PHASE_ALLREDUCE);
  /* 3 of backward's 8 ms, at its end, in its lower part. */
  g_assert_cmpfloat_with_epsilon (strip->width, backward->width * 3 / 8, 1e-6);
  g_assert_cmpfloat_with_epsilon (strip->x + strip->width, backward->x + backward->width, 1e-6);
  g_assert_cmpfloat (strip->y, >, backward->y);
  g_assert_cmpfloat_with_epsilon (strip->y + strip->height, backward->y + backward->height, 1e-6);
  g_assert_finalize_object (timeline);
}

static void
test_colours_distinct (void)
{
  for (int a = 0; a < TDM_PHASE_COUNT; a++)
    for (int b = a + 1; b < TDM_PHASE_COUNT; b++)
      {
        GdkRGBA x, y;

        tdm_timeline_phase_colour (a, &x);
        tdm_timeline_phase_colour (b, &y);
        double d = fabs (x.red - y.red) + fabs (x.green - y.green) + fabs (x.blue - y.blue);
        g_assert_cmpfloat (d, >, 0.25);
      }
}

/* The time axis: ticks 1, 2 or 5 × 10^k ms apart, wider where the room is less; the
 * lanes are named as the run names its devices. Fed one step by hand. */
static void
test_axis (void)
{
  TdmTimeline *timeline = TDM_TIMELINE (g_object_ref_sink (tdm_timeline_new ()));
  TdmPhasesEvent e = { .step = 1, .replicas = 2 };

  g_assert_cmpfloat (tdm_timeline_get_tick_ms (timeline, 800), ==, 0);
  for (int r = 0; r < 2; r++)
    {
      e.device[r].spans = 2;
      e.device[r].span[0].phase = TDM_PHASE_FORWARD;
      e.device[r].span[0].end_ms = 10;
      e.device[r].span[1].phase = TDM_PHASE_BACKWARD;
      e.device[r].span[1].start_ms = 10;
      e.device[r].span[1].end_ms = 25;
    }
  tdm_timeline_add_phases (timeline, &e);
  /* 25 ms over 728 px: 64 px are 2.2 ms, so 5 ms; over 128 px, 12.5 ms, so 20. */
  g_assert_cmpfloat (tdm_timeline_get_tick_ms (timeline, 800), ==, 5);
  g_assert_cmpfloat (tdm_timeline_get_tick_ms (timeline, 200), ==, 20);

  /* Another run's step under this one's, both from 0 on one scale: the longer of
   * the two (40 ms) fills the width; the reference's lanes come below. */
  {
    TdmPhasesEvent ref = { .step = 9, .replicas = 1 };
    static const char *const names[] = { "cpu", NULL };
    g_autoptr(GArray) boxes = NULL;
    double live_bottom = 0, ref_top = G_MAXDOUBLE;

    ref.device[0].spans = 1;
    ref.device[0].span[0].phase = TDM_PHASE_FORWARD;
    ref.device[0].span[0].end_ms = 40;
    tdm_timeline_set_reference (timeline, &ref, names);
    g_assert_true (tdm_timeline_has_reference (timeline));
    boxes = tdm_timeline_layout (timeline, 800, 300);
    g_assert_cmpuint (boxes->len, ==, 5);
    for (guint i = 0; i < boxes->len; i++)
      {
        const TdmTimelineBox *b = &g_array_index (boxes, TdmTimelineBox, i);

        if (b->reference)
          {
            ref_top = MIN (ref_top, b->y);
            g_assert_cmpfloat (b->width, >, 700);   /* 40 of 40 ms */
          }
        else
          live_bottom = MAX (live_bottom, b->y + b->height);
        if (b->phase == TDM_PHASE_FORWARD)
          g_assert_cmpfloat (fabs (b->x - 72), <, 1e-6);   /* every step from 0 */
      }
    g_assert_cmpfloat (live_bottom, <=, ref_top);
    /* 40 ms over 728 px: 64 px are 3.5 ms, so 5 ms. */
    g_assert_cmpfloat (tdm_timeline_get_tick_ms (timeline, 800), ==, 5);
    tdm_timeline_set_reference (timeline, NULL, NULL);
    g_assert_false (tdm_timeline_has_reference (timeline));
  }

  g_assert_null (tdm_timeline_get_lane_name (timeline, 1));
  tdm_timeline_set_lane_name (timeline, 1, "cpu 2");
  g_assert_cmpstr (tdm_timeline_get_lane_name (timeline, 1), ==, "cpu 2");
  g_object_unref (timeline);
}

static void
set_span (TdmDevicePhases *d,
          int              k,
          TdmPhase         phase,
          float            start_ms,
          float            end_ms)
{
  d->span[k].phase = phase;
  d->span[k].start_ms = start_ms;
  d->span[k].end_ms = end_ms;
}

/* The tick spacing: 1, 2 or 5 × 10^k ms, the smallest that keeps `min_px` between
 * ticks, and none where a span would not hold two ticks. */
static void
test_choose_tick (void)
{
  /* 10 px a ms, 64 px apart: 6.4 ms, so 10 ms; 30 px apart: 3 ms, so 5. */
  g_assert_cmpfloat (tdm_timeline_choose_tick (40, 10, 64), ==, 10);
  g_assert_cmpfloat (tdm_timeline_choose_tick (40, 10, 30), ==, 5);
  g_assert_cmpfloat (tdm_timeline_choose_tick (40, 10, 20), ==, 2);
  /* Exactly on a nice value. */
  g_assert_cmpfloat (tdm_timeline_choose_tick (40, 10, 50), ==, 5);
  /* A 3 ms step at 20 px a ms: 64 px are 3.2 ms, so 5 ms, past its end: none. */
  g_assert_cmpfloat (tdm_timeline_choose_tick (3, 20, 64), ==, 0);
  g_assert_cmpfloat (tdm_timeline_choose_tick (5, 20, 64), ==, 5);
  /* Fractions of a ms. */
  g_assert_cmpfloat (fabs (tdm_timeline_choose_tick (1, 500, 64) - 0.2), <, 1e-12);
  g_assert_cmpfloat (tdm_timeline_choose_tick (0, 10, 64), ==, 0);
  g_assert_cmpfloat (tdm_timeline_choose_tick (10, 0, 64), ==, 0);
}

/* Four kept steps of about 3 ms, two devices: at a phone's width and at 1024 px
 * the labels drawn under the lanes are at least two on one step's clock (0 and
 * more), none over another, all inside the widget; the boxes too. */
static void
check_ticks_at (int width)
{
  GtkWidget *window = gtk_window_new ();
  GtkWidget *widget = tdm_timeline_new ();
  TdmTimeline *timeline = TDM_TIMELINE (widget);
  g_autoptr(GArray) ticks = NULL;
  g_autoptr(GArray) boxes = NULL;
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 4, 4);
  cairo_t *cr = cairo_create (surface);
  guint per_step[TDM_TIMELINE_STEPS] = { 0 }, most = 0;

  gtk_window_set_child (GTK_WINDOW (window), widget);
  gtk_window_set_default_size (GTK_WINDOW (window), width, 300);
  gtk_window_present (GTK_WINDOW (window));
  for (int s = 0; s < TDM_TIMELINE_STEPS; s++)
    {
      TdmPhasesEvent e = { .step = s + 1, .replicas = 2 };

      for (int r = 0; r < 2; r++)
        {
          e.device[r].spans = 3;
          set_span (&e.device[r], 0, TDM_PHASE_FORWARD, 0, 0.9f + 0.1f * r);
          set_span (&e.device[r], 1, TDM_PHASE_BACKWARD, 1.0f, 2.1f + 0.1f * s);
          set_span (&e.device[r], 2, TDM_PHASE_ALLREDUCE, 2.2f + 0.1f * s, 2.9f + 0.15f * s);
        }
      tdm_timeline_add_phases (timeline, &e);
    }
  for (int i = 0; i < 20; i++)
    g_main_context_iteration (NULL, FALSE);
  tdm_draw_set_font (cr, widget);

  ticks = tdm_timeline_axis_ticks (timeline, cr, width);
  g_test_message ("%d px: %u labels, every %g ms", width, ticks->len,
                  tdm_timeline_get_tick_ms (timeline, width));
  for (guint i = 0; i < ticks->len; i++)
    {
      const TdmTimelineTick *t = &g_array_index (ticks, TdmTimelineTick, i);

      g_test_message ("  “%s” at %.1f–%.1f (step %u, %g ms)", t->text, t->text_x,
                      t->text_x + t->text_width, t->step, t->ms);
      g_assert_cmpfloat (t->text_x, >=, 0);
      g_assert_cmpfloat (t->text_x + t->text_width, <=, width);
      g_assert_cmpfloat (t->text_width, >, 0);
      if (i > 0)
        {
          const TdmTimelineTick *before = &g_array_index (ticks, TdmTimelineTick, i - 1);

          g_assert_cmpfloat (t->text_x, >=, before->text_x + before->text_width);
        }
      g_assert_cmpuint (t->step, <, TDM_TIMELINE_STEPS);
      per_step[t->step]++;
      most = MAX (most, per_step[t->step]);
    }
  /* Two labels on one clock: a scale, not only each step's "0". */
  g_assert_cmpuint (most, >=, 2);
  /* The unit once. */
  g_assert_nonnull (strstr (g_array_index (ticks, TdmTimelineTick, 1).text, "ms"));

  boxes = tdm_timeline_layout (timeline, width, 300);
  g_assert_cmpuint (boxes->len, >, 0);
  for (guint i = 0; i < boxes->len; i++)
    {
      const TdmTimelineBox *b = &g_array_index (boxes, TdmTimelineBox, i);

      g_assert_cmpfloat (b->x + b->width, <=, width + 1e-6);
    }
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
  gtk_window_destroy (GTK_WINDOW (window));
}

static void
test_ticks_narrow (void)
{
  check_ticks_at (360);
  check_ticks_at (1024);
}

/* Two runs side by side: each under its title, the first's lanes above the
 * second's, both from 0 on one scale (the longer fills the width), in place of the
 * kept steps; the lane texts as given; gone again with NULL. */
static void
test_comparison (void)
{
  TdmTimeline *timeline = TDM_TIMELINE (g_object_ref_sink (tdm_timeline_new ()));
  TdmPhasesEvent live = { .step = 1, .replicas = 1 }, main_step = { .replicas = 2 },
                 all_step = { .replicas = 2 };
  TdmTimelineRun above = { &main_step, "main · 30.00 ms a step", { "cpu 1", "cpu 2" },
                           { "main · 0 % hidden", "0 % hidden" } };
  TdmTimelineRun below = { &all_step, "allreduce · 20.00 ms a step", { "cpu 1", "cpu 2" },
                           { "main · 25 % hidden", "25 % hidden" } };
  g_autoptr(GArray) boxes = NULL;
  double above_bottom = 0, below_top = G_MAXDOUBLE, widest[2] = { 0, 0 };

  live.device[0].spans = 1;
  live.device[0].span[0].phase = TDM_PHASE_FORWARD;
  live.device[0].span[0].end_ms = 100;
  tdm_timeline_add_phases (timeline, &live);
  for (int r = 0; r < 2; r++)
    {
      main_step.device[r].spans = 2;
      set_span (&main_step.device[r], 0, TDM_PHASE_FORWARD, 0, 10);
      set_span (&main_step.device[r], 1, TDM_PHASE_BROADCAST, 20, 30);
      all_step.device[r].spans = 2;
      set_span (&all_step.device[r], 0, TDM_PHASE_FORWARD, 0, 10);
      set_span (&all_step.device[r], 1, TDM_PHASE_ALLREDUCE, 10, 20);
    }
  g_assert_cmpfloat (tdm_timeline_step_duration (&main_step), ==, 30);
  tdm_timeline_set_comparison (timeline, &above, &below);
  g_assert_true (tdm_timeline_has_comparison (timeline));
  g_assert_cmpstr (tdm_timeline_get_title (timeline, 0), ==, "main · 30.00 ms a step");
  g_assert_cmpstr (tdm_timeline_get_title (timeline, 1), ==, "allreduce · 20.00 ms a step");
  g_assert_cmpstr (tdm_timeline_get_lane_note (timeline, 1, 1), ==, "25 % hidden");

  /* The live step (100 ms) is not drawn: 8 boxes, the longer run fills the width. */
  boxes = tdm_timeline_layout (timeline, 800, 400);
  g_assert_cmpuint (boxes->len, ==, 8);
  for (guint i = 0; i < boxes->len; i++)
    {
      const TdmTimelineBox *b = &g_array_index (boxes, TdmTimelineBox, i);
      int g = b->reference ? 1 : 0;

      if (g == 0)
        above_bottom = MAX (above_bottom, b->y + b->height);
      else
        below_top = MIN (below_top, b->y);
      if (b->phase == TDM_PHASE_FORWARD)
        g_assert_cmpfloat (fabs (b->x - 72), <, 1e-6);
      widest[g] = MAX (widest[g], b->x + b->width);
      /* Under the first title, and inside the lanes' room. */
      g_assert_cmpfloat (b->y, >, 0);
    }
  /* Room for the second title between the two runs. */
  g_assert_cmpfloat (below_top, >, above_bottom + 10);
  g_assert_cmpfloat (fabs (widest[0] - 800), <, 1e-6);
  g_assert_cmpfloat (fabs ((widest[1] - 72) / (widest[0] - 72) - 20.0 / 30), <, 1e-9);

  tdm_timeline_set_comparison (timeline, NULL, NULL);
  g_assert_false (tdm_timeline_has_comparison (timeline));
  g_assert_null (tdm_timeline_get_title (timeline, 0));
  {
    g_autoptr(GArray) again = tdm_timeline_layout (timeline, 800, 400);

    g_assert_cmpuint (again->len, ==, 1);
  }
  g_object_unref (timeline);
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  g_test_add_func ("/timeline/strategies", test_strategies);
  g_test_add_func ("/timeline/axis", test_axis);
  g_test_add_func ("/timeline/realized", test_realized);
  g_test_add_func ("/timeline/colours", test_colours_distinct);
  g_test_add_func ("/timeline/hidden", test_hidden);
  g_test_add_func ("/timeline/comparison", test_comparison);
  g_test_add_func ("/timeline/choose-tick", test_choose_tick);
  g_test_add_func ("/timeline/ticks-narrow", test_ticks_narrow);
  return g_test_run ();
}
