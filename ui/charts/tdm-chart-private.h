/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-private.h: what the files of TdmChart share.
 *
 * The widget's state, the per-frame drawing context and the data-to-pixel
 * mapping, for tdm-chart.c (the widget and its API), tdm-chart-draw.c (layout,
 * axes), tdm-chart-legend.c (the legend), tdm-chart-readout.c (hover),
 * tdm-chart-plot.c (the series themselves) and tdm-chart-export.c (files). Both drawing files stroke, fill and show text through
 * tdm-chart-svg.h's hooks, so an SVG export writes what they draw. Not for use
 * outside ui/tdm-chart*.c (and the chart's tests).
 */

#pragma once

#include <math.h>

#include "tdm-chart.h"
#include "tdm-chart-axis.h"
#include "tdm-chart-svg.h"

G_BEGIN_DECLS

#define PAD           8.0
#define LINE_WIDTH    2.0
#define POINT_RADIUS  3.5
#define SWATCH_W      18
#define SWATCH_H      10
#define MAX_READOUT   24
#define STACK_FILL_ALPHA 0.6
#define OVERLAY_ALPHA 0.45
#define OVERLAY_WIDTH 1.5
#define OVERLAY_STEP  3.0     /* pixels between an overlay's vertices, exported */
#define OVERLAY_RASTER_STEP 2.0  /* the same on screen (tdm-chart-raster.c) */

/* An image's pixels being drawn into by tdm-chart-raster.c: the clip rectangle in
 * device pixels, and per vertical line (SUB per pixel column) the interval covered so
 * far. The lines are kept between uses: they only grow. */
typedef struct
{
  guint32 *pixels;
  int      stride;            /* in pixels */
  double   scale;
  int      x0, y0, x1, y1;
  float   *top, *bottom;
  guint    n_allocated;
  int      lo, hi;            /* the lines touched since the last blend */
} TdmChartRaster;

typedef struct
{
  TdmSeries     *series;
  GdkRGBA        colour;
  TdmChartStyle  style;
  gboolean       visible;
  gboolean       no_legend;
} Entry;

/* One pixel column of a series, in device coordinates. */
typedef struct
{
  double   x, y;          /* mean position */
  double   top, bottom;   /* envelope */
  gboolean start;         /* a gap (or nothing) comes before it */
} Column;

struct _TdmChart
{
  GtkWidget  parent_instance;

  char      *title;
  char      *x_label;
  char      *x_unit;
  char      *y_label;
  char      *y_unit;
  gboolean   log_scale;
  int        reserve_w, reserve_h;   /* top-right corner kept for the card's button */
  gboolean   nested_lines;
  gboolean   fixed_range;
  double     fixed_min, fixed_max;

  GPtrArray *entries;     /* of Entry, in drawing (and stacking) order */

  gboolean   hovering;
  double     hover_x, hover_y;

  Column    *cols;
  guint      n_cols_allocated;
  double    *scratch;
  guint      n_scratch_allocated;

  /* The overlaid runs drawn once into an image and painted from it while neither
   * they nor the mapping change (tdm-chart-plot.c); `overlay_serial` counts their
   * changes. */
  guint64          overlay_serial;
  TdmChartRaster   raster;
  double          *curve_x, *curve_y;   /* one overlay in device units, for the raster */
  guint            n_curve_allocated;
  cairo_surface_t *overlay_cache;
  guint64          cache_serial;
  int              cache_w, cache_h, cache_scale;
  double           cache_map[9];
};

/* Device coordinates of the plot area and the data ranges mapped onto it. */
typedef struct
{
  double   px, py, pw, ph;
  double   x_lo, x_hi;
  double   ty_lo, ty_hi;    /* y range after the log transform, if any */
  gboolean log;
} Mapping;

typedef struct
{
  cairo_t              *cr;
  PangoLayout          *layout;
  PangoFontDescription *font;
  PangoFontDescription *small;
  PangoFontDescription *bold;
  GdkRGBA               fg;
  GdkRGBA               box_bg;
  int                   width, height;
  gboolean              interactive;

  /* Filled in by tdm_chart_frame_layout(). */
  int                   normal_h, small_h;
  int                   title_w;          /* the title's width as drawn (ellipsized) */
  double                body_top;
  double                legend_y;
  int                   legend_rows;      /* tdm-chart-legend.c's fit: */
  guint                 legend_shown;     /* entries named, */
  guint                 legend_hidden;    /* entries left to "+N more", */
  double                legend_cap;       /* the widest a name is drawn, */
  double                legend_right;     /* where the legend ends on the right */
  double                y_band_top;       /* where the y axis's title may go */
  double                y_band_bottom;
  int                   y_tick_w;         /* the widest y tick label */
  gboolean              empty;
  gboolean              has_plot;
  TdmChartAxis          xa, ya;
  Mapping               map;
} Frame;

/* An x axis of seconds is drawn as durations. */
static inline gboolean
tdm_chart_x_is_time (TdmChart *self)
{
  return g_strcmp0 (self->x_unit, "s") == 0;
}

static inline double
map_x (const Mapping *m,
       double         x)
{
  return m->px + (x - m->x_lo) / (m->x_hi - m->x_lo) * m->pw;
}

static inline double
unmap_x (const Mapping *m,
         double         px)
{
  return m->x_lo + (px - m->px) / m->pw * (m->x_hi - m->x_lo);
}

/* NaN where the value cannot be shown (a gap, or <= 0 on a log scale). */
static inline double
map_y (const Mapping *m,
       double         y)
{
  if (m->log)
    {
      if (!(y > 0))
        return NAN;
      y = log10 (y);
    }

  return m->py + m->ph - (y - m->ty_lo) / (m->ty_hi - m->ty_lo) * m->ph;
}

/* Like map_y(), but values a log scale cannot show sit on the bottom edge. */
static inline double
map_y_floor (const Mapping *m,
             double         y)
{
  double v = map_y (m, y);

  return isnan (v) && !isnan (y) ? m->py + m->ph : v;
}

static inline Entry *
get_entry (TdmChart *self,
           guint     id)
{
  return g_ptr_array_index (self->entries, id);
}

static inline void
set_source (cairo_t       *cr,
            const GdkRGBA *c,
            double         alpha)
{
  cairo_set_source_rgba (cr, c->red, c->green, c->blue, c->alpha * alpha);
}

/* tdm-chart-draw.c */
void      tdm_chart_frame_init      (TdmChart   *self,
                                     Frame      *f,
                                     cairo_t    *cr,
                                     int         width,
                                     int         height,
                                     gboolean    interactive);
void      tdm_chart_frame_clear     (Frame      *f);
gboolean  tdm_chart_frame_layout    (TdmChart   *self,
                                     Frame      *f);
void      tdm_chart_frame_draw      (TdmChart   *self,
                                     Frame      *f);
void      tdm_chart_place_readout   (int         width,
                                     int         height,
                                     double      x,
                                     double      top,
                                     double     *bw,
                                     double     *bh,
                                     double     *bx,
                                     double     *by);
char     *tdm_chart_axis_title      (const char *label,
                                     const char *unit);
void      tdm_chart_text_size       (Frame                      *f,
                                     const PangoFontDescription *font,
                                     const char                 *text,
                                     int                        *w,
                                     int                        *h);
/* ax, ay: which point of the text box lands on (x, y), 0..1 each way. */
void      tdm_chart_draw_text       (Frame                      *f,
                                     const PangoFontDescription *font,
                                     const char                 *text,
                                     double                      x,
                                     double                      y,
                                     double                      ax,
                                     double                      ay,
                                     double                      alpha);

/* tdm-chart-readout.c: the values under the cursor. */
void      tdm_chart_draw_readout    (TdmChart   *self,
                                     Frame      *f);

/* tdm-chart-legend.c: fits the legend into the rows it may take, from
 * f->legend_y down, and returns its height; draws it as fitted. */
double    tdm_chart_legend_fit      (TdmChart   *self,
                                     Frame      *f);
void      tdm_chart_legend_draw     (TdmChart   *self,
                                     Frame      *f);

/* tdm-chart-raster.c */
void      tdm_chart_raster_init     (TdmChartRaster  *r,
                                     cairo_surface_t *image,
                                     double           scale,
                                     double           clip_x,
                                     double           clip_y,
                                     double           clip_w,
                                     double           clip_h);
void      tdm_chart_raster_curve    (TdmChartRaster  *r,
                                     const double    *x,
                                     const double    *y,
                                     guint            n,
                                     double           width,
                                     const GdkRGBA   *colour,
                                     double           alpha);
void      tdm_chart_raster_clear    (TdmChartRaster  *r);

/* tdm-chart-plot.c */
void      tdm_chart_overlays_changed (TdmChart  *self);
double   *tdm_chart_ensure_scratch  (TdmChart   *self,
                                     guint       n);
void      tdm_chart_plot_series     (TdmChart   *self,
                                     Frame      *f);

G_END_DECLS
