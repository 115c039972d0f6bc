/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-timeline.h: one lane per device, the last few sampled steps as phases.
 *
 * TdmTimeline draws what the engine's PHASES events say: forward, backward, each
 * collective (reduce, all-reduce, broadcast), the optimizer update and waiting, as
 * coloured boxes on a shared time axis in ms (each step from its own 0), the kept
 * steps one after another. Colours
 * are the colour-blind-safe Okabe–Ito set (wait in grey), far apart enough for a
 * projector. It keeps copies of the last TDM_TIMELINE_STEPS events; it measures
 * nothing itself. Main-thread only.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-events.h"

G_BEGIN_DECLS

#define TDM_TIMELINE_STEPS 4

/* One drawn box, in widget coordinates (tdm_timeline_layout). */
typedef struct
{
  double x, y, width, height;
  int    device;
  int    phase;   /* TdmPhase */
  long   step;
  gboolean reference;   /* a box of the reference run's step (below the run's own) */
  gboolean hidden;      /* communication hidden under backward: a strip across the
                         * bottom of backward's box (after its lane's boxes) */
} TdmTimelineBox;

#define TDM_TYPE_TIMELINE (tdm_timeline_get_type ())

G_DECLARE_FINAL_TYPE (TdmTimeline, tdm_timeline, TDM, TIMELINE, GtkWidget)

GtkWidget *tdm_timeline_new          (void);
/* Keeps a copy; the oldest kept step goes when more than TDM_TIMELINE_STEPS are. */
void       tdm_timeline_add_phases   (TdmTimeline          *self,
                                      const TdmPhasesEvent *phases);
void       tdm_timeline_clear        (TdmTimeline          *self);
guint      tdm_timeline_get_n_steps  (TdmTimeline          *self);
/* Whether any kept step shows the phase on any device. */
gboolean   tdm_timeline_has_phase    (TdmTimeline          *self,
                                      TdmPhase              phase);
/* The boxes as drawn at width × height: an array of TdmTimelineBox, lanes top to
 * bottom by device, within each lane in time order. */
GArray    *tdm_timeline_layout       (TdmTimeline          *self,
                                      double                width,
                                      double                height);
void       tdm_timeline_phase_colour (TdmPhase              phase,
                                      GdkRGBA              *colour);
/* The lane labelled "main" (−1: none), as the run's STARTED event names it. */
void       tdm_timeline_set_main_device (TdmTimeline       *self,
                                         int                device);
/* A lane's label: the device as the run's other pages name it (tdm_format_replica). */
void       tdm_timeline_set_lane_name (TdmTimeline         *self,
                                       int                  device,
                                       const char          *name);
const char *tdm_timeline_get_lane_name (TdmTimeline        *self,
                                        int                 device);
/* Another run's step to compare with (its lanes under this run's, both steps from
 * 0 on one ms scale, this run's last kept step above), its lanes labelled `names`;
 * NULL: none, the kept steps one after another again. Keeps a copy. */
void       tdm_timeline_set_reference (TdmTimeline         *self,
                                       const TdmPhasesEvent *step,
                                       const char *const   *names);
gboolean   tdm_timeline_has_reference (TdmTimeline         *self);
/* The reference step shown (a copy the timeline keeps), or NULL. */
const TdmPhasesEvent *tdm_timeline_get_reference (TdmTimeline *self);

/* One run of a side-by-side comparison: its step, a title over its lanes (its
 * strategy and time a step), each lane's name and a second line under the name
 * (NULL: none). */
typedef struct
{
  const TdmPhasesEvent *step;
  const char           *title;
  const char           *lane_names[TDM_MAX_REPLICAS];
  const char           *lane_notes[TDM_MAX_REPLICAS];
} TdmTimelineRun;

/* Two runs' steps one above the other, both from 0 on one ms scale, each under its
 * title, in place of the kept steps and the reference (`main` against `allreduce`).
 * NULL: none, the kept steps and the reference again. Keeps copies. */
void       tdm_timeline_set_comparison (TdmTimeline         *self,
                                        const TdmTimelineRun *above,
                                        const TdmTimelineRun *below);
gboolean   tdm_timeline_has_comparison (TdmTimeline         *self);
/* How long a step lasts on the time axis: until its last device's last phase ends. */
double     tdm_timeline_step_duration  (const TdmPhasesEvent *step);
/* The comparison's titles (which: 0 above, 1 below) and lane texts; NULL: none. */
const char *tdm_timeline_get_title     (TdmTimeline         *self,
                                        int                  which);
const char *tdm_timeline_get_lane_note (TdmTimeline         *self,
                                        int                  which,
                                        int                  device);
/* The time axis's tick spacing in ms at this width: 1, 2 or 5 × 10^k, the smallest
 * that keeps ticks apart; 0 with nothing drawn. Where the width cannot give each
 * kept step two labelled ticks, fewer (the newest) steps are shown. */
double     tdm_timeline_get_tick_ms  (TdmTimeline          *self,
                                      double                width);
/* The smallest of 1, 2, 5 × 10^k ms whose ticks lie at least `min_px` apart at
 * `px_per_ms`, where a span of `span_ms` then has two ticks (0 and one more);
 * 0 where none does. Pure arithmetic. */
double     tdm_timeline_choose_tick  (double                span_ms,
                                      double                px_per_ms,
                                      double                min_px);

/* One labelled tick of the time axis as drawn at a width. */
typedef struct
{
  double x;            /* the tick */
  double text_x;       /* its label's left end */
  double text_width;
  double ms;           /* on its step's clock */
  guint  step;         /* which shown step, 0 the leftmost */
  char   text[32];
} TdmTimelineTick;

/* The labelled ticks drawn at `width` in `cr`'s font, left to right: a label that
 * would overlap the one before it or run past the right edge is left out. */
GArray    *tdm_timeline_axis_ticks   (TdmTimeline          *self,
                                      cairo_t              *cr,
                                      double                width);
/* Presentation mode's palette: saturated, outlined boxes. */
void       tdm_timeline_set_high_contrast (TdmTimeline     *self,
                                           gboolean         high_contrast);
gboolean   tdm_timeline_get_high_contrast (TdmTimeline     *self);

G_END_DECLS
