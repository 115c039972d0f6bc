/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-timeline-private.h: what the parts of TdmTimeline share (tdm-timeline.c, the
 * lanes, and tdm-timeline-axis.c, the time axis): the instance, its sizes, and the
 * steps shown at a width. Not for other files. */

#pragma once

#include "tdm-timeline.h"

G_BEGIN_DECLS

#define LABEL_WIDTH   72.0   /* the lane labels' column, at least */
#define LEGEND_ROW    20.0
#define LEGEND_HEIGHT 24.0   /* one row of it; more where the width makes it wrap */
#define LANE_GAP      6.0
#define AXIS_HEIGHT   18.0   /* the time axis under the lanes: ticks and their ms */
#define TITLE_HEIGHT  18.0   /* a compared run's title, over its lanes */
#define TICK_SPACING  64.0   /* pixels between ticks, at least */
/* Between two kept steps, as a share of the whole time axis. */
#define STEP_GAP      0.02

struct _TdmTimeline
{
  GtkWidget       parent_instance;
  TdmPhasesEvent *steps[TDM_TIMELINE_STEPS];   /* oldest first */
  guint           n_steps;
  gboolean        high_contrast;
  int             main_device;   /* its lane says "main"; −1 for none */
  char           *lane_names[TDM_MAX_REPLICAS];   /* as the run names its devices */
  /* Another run's step under this one's (NULL: none), and its lanes' labels. */
  TdmPhasesEvent *reference;
  char           *reference_names[TDM_MAX_REPLICAS];
  /* Two runs side by side (step NULL: none): above, then below. */
  struct
  {
    TdmPhasesEvent *step;
    char           *title;
    char           *names[TDM_MAX_REPLICAS];
    char           *notes[TDM_MAX_REPLICAS];
  } compared[2];
  double          legend_height; /* as last drawn: LEGEND_HEIGHT, or more rows */
  double          label_width;   /* as last drawn: LABEL_WIDTH, or the widest label's */
  double          tick_px;       /* as last drawn: TICK_SPACING, or a wider tick label's */
};

/* The steps drawn, where each starts on the time axis and on which lane its first
 * device goes: the kept steps one after another; with a reference, the last kept
 * step above the reference's, both from 0 on one scale. */
typedef struct
{
  const TdmPhasesEvent *e;
  double                offset;       /* ms */
  int                   first_lane;
  gboolean              reference;
  int                   group;        /* 0 above, 1 below (titles' room) */
} TdmTimelineShown;

/* One step above another from 0: a reference, or a comparison. */
gboolean tdm_timeline_stacked        (TdmTimeline      *self);
/* The steps shown at `width` into `shown`, how many; the time axis's length in ms
 * and the lanes' count. */
guint    tdm_timeline_shown          (TdmTimeline      *self,
                                      double            width,
                                      TdmTimelineShown  shown[TDM_TIMELINE_STEPS + 1],
                                      double           *axis,
                                      int              *lanes);
/* The ticks' least spacing for the labels they may carry, in `cr`'s font. */
void     tdm_timeline_measure_ticks  (TdmTimeline      *self,
                                      cairo_t          *cr);
/* The axis under the lanes, from `y` down. */
void     tdm_timeline_draw_axis      (TdmTimeline      *self,
                                      cairo_t          *cr,
                                      double            width,
                                      double            y);

G_END_DECLS
