/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart.h: a live line/area chart widget drawn with Cairo.
 *
 * TdmChart shows a few named series (lines, dashed lines, per-epoch points,
 * a stacked area, horizontal reference lines) against a shared x axis, with
 * nice ticks, units, a legend and a hover readout. Each series is a bounded,
 * decimated TdmSeries, so hours of training or a million points cost the same
 * to draw. Appending only queues a redraw, which GTK coalesces to at most one
 * per frame. The same drawing code renders to PNG and SVG files without the
 * widget being shown. It is main-thread only: marshal engine events to the
 * main loop before appending. It is not a plotting library: no zoom, no pan,
 * one y axis.
 *
 * Typical use:
 *
 *   GtkWidget *chart = tdm_chart_new ();
 *   tdm_chart_set_title (TDM_CHART (chart), _("Loss"));
 *   tdm_chart_set_x_label (TDM_CHART (chart), _("Elapsed"));
 *   tdm_chart_set_x_unit (TDM_CHART (chart), "s");    // time ticks: s/min/h
 *   tdm_chart_set_log_scale (TDM_CHART (chart), TRUE);
 *   guint train = tdm_chart_add_series (TDM_CHART (chart), _("Train"),
 *                                       &colour, TDM_CHART_STYLE_LINE);
 *   tdm_chart_set_series_smoothing (TDM_CHART (chart), train, 0.6);
 *   tdm_chart_append (TDM_CHART (chart), train, elapsed_s, loss);
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-export-info.h"
#include "tdm-series.h"

G_BEGIN_DECLS

typedef enum
{
  TDM_CHART_STYLE_LINE,       /* solid line; min/max band once decimated */
  TDM_CHART_STYLE_DASHED,     /* dashed line, e.g. a test curve */
  TDM_CHART_STYLE_POINTS,     /* markers, e.g. per-epoch test values */
  TDM_CHART_STYLE_STACKED,    /* filled area stacked on the previous stacked series */
  TDM_CHART_STYLE_REFERENCE,  /* horizontal line at the latest y, e.g. capacity */
  TDM_CHART_STYLE_OVERLAY,    /* faint thin line under the others: an earlier run */
} TdmChartStyle;

#define TDM_CHART_N_DEVICE_COLOURS 8

#define TDM_TYPE_CHART (tdm_chart_get_type ())

G_DECLARE_FINAL_TYPE (TdmChart, tdm_chart, TDM, CHART, GtkWidget)

GtkWidget  *tdm_chart_new                  (void);

/* Properties "title", "x-label", "x-unit", "y-label", "y-unit", "log-scale". */
void        tdm_chart_set_title            (TdmChart      *chart,
                                            const char    *title);
const char *tdm_chart_get_title            (TdmChart      *chart);
void        tdm_chart_set_x_label          (TdmChart      *chart,
                                            const char    *label);
const char *tdm_chart_get_x_label          (TdmChart      *chart);
void        tdm_chart_set_x_unit           (TdmChart      *chart,
                                            const char    *unit);
const char *tdm_chart_get_x_unit           (TdmChart      *chart);
void        tdm_chart_set_y_label          (TdmChart      *chart,
                                            const char    *label);
const char *tdm_chart_get_y_label          (TdmChart      *chart);
void        tdm_chart_set_y_unit           (TdmChart      *chart,
                                            const char    *unit);
void        tdm_chart_set_log_scale        (TdmChart      *chart,
                                            gboolean       log_scale);
gboolean    tdm_chart_get_log_scale        (TdmChart      *chart);

void        tdm_chart_set_y_range          (TdmChart      *chart,
                                            double         y_min,
                                            double         y_max);

guint       tdm_chart_add_series           (TdmChart      *chart,
                                            const char    *name,
                                            const GdkRGBA *colour,
                                            TdmChartStyle  style);
guint       tdm_chart_get_n_series         (TdmChart      *chart);
TdmSeries  *tdm_chart_get_series           (TdmChart      *chart,
                                            guint          series);
void        tdm_chart_set_series_smoothing (TdmChart      *chart,
                                            guint          series,
                                            double         weight);
gboolean    tdm_chart_get_series_visible   (TdmChart      *chart,
                                            guint          series);
void        tdm_chart_set_series_visible   (TdmChart      *chart,
                                            guint          series,
                                            gboolean       visible);
/* Whether the series has an entry in the legend (it has by default): overlaid runs
 * name one of their series only. */
void        tdm_chart_set_series_in_legend (TdmChart      *chart,
                                            guint          series,
                                            gboolean       in_legend);
gboolean    tdm_chart_get_series_in_legend (TdmChart      *chart,
                                            guint          series);
/* The colour the series was added with. */
void        tdm_chart_get_series_colour    (TdmChart      *chart,
                                            guint          series,
                                            GdkRGBA       *colour);
/* Removes the series numbered `n_series` and up, keeping the first ones. */
void        tdm_chart_truncate_series      (TdmChart      *chart,
                                            guint          n_series);
void        tdm_chart_append               (TdmChart      *chart,
                                            guint          series,
                                            double         x,
                                            double         y);
void        tdm_chart_clear                (TdmChart      *chart);
void        tdm_chart_remove_all_series    (TdmChart      *chart);

void        tdm_chart_render               (TdmChart      *chart,
                                            cairo_t       *cr,
                                            int            width,
                                            int            height);
/* As the widget draws itself, hover aside: for benchmarks. */
void        tdm_chart_render_live          (TdmChart      *chart,
                                            cairo_t       *cr,
                                            int            width,
                                            int            height);
/* Keeps the top-right corner, width × height pixels, free of the title and the
 * legend: a card's menu button sits there. The title is ellipsized short of it. */
void        tdm_chart_set_corner_reserve   (TdmChart      *chart,
                                            int            width,
                                            int            height);

/* Lines drawn earlier are drawn wider, so series that coincide (two devices with
 * the same memory) still show every colour, as nested stripes. */
void        tdm_chart_set_nested_lines     (TdmChart      *chart,
                                            gboolean       nested);

/* Where each part of a chart of width × height is drawn, in pixels from its top
 * left corner (for tests): an empty box for a part not drawn. */
typedef struct
{
  GdkRectangle title;
  GdkRectangle legend;
  GdkRectangle y_title;      /* turned upright, as drawn */
  GdkRectangle y_ticks;      /* the tick labels, all of them */
  GdkRectangle plot;
  GdkRectangle x_ticks;
  GdkRectangle x_title;
  guint        legend_named; /* series named in the legend */
  guint        legend_more;  /* series left to its "+N more" */
  gboolean     y_title_whole; /* not ellipsized */
} TdmChartLayout;

/* FALSE when no plot would be drawn (no data, or too small). */
gboolean    tdm_chart_get_layout           (TdmChart       *chart,
                                            int             width,
                                            int             height,
                                            TdmChartLayout *layout);

/* Where the title lands in a chart of width × height (for tests and exporters);
 * FALSE when there is no title. */
gboolean    tdm_chart_get_title_area       (TdmChart      *chart,
                                            int            width,
                                            int            height,
                                            GdkRectangle  *area);

gboolean    tdm_chart_get_plot_area        (TdmChart      *chart,
                                            int            width,
                                            int            height,
                                            GdkRectangle  *area);
/* Exports: the chart as seen (light, no hover), with the run's settings when `info`
 * is given: PNG text chunks (tEXt::dataset…, Title, Software, Description), an SVG's
 * <metadata> and a caption line under the chart, `# key: value` lines atop a CSV.
 * SVG text stays text (tdm-chart-svg.h). Files are written whole or not at all. */
gboolean    tdm_chart_export_png           (TdmChart      *chart,
                                            const char    *path,
                                            int            width,
                                            int            height,
                                            const TdmExportInfo *info,
                                            GError       **error);
gboolean    tdm_chart_export_svg           (TdmChart      *chart,
                                            const char    *path,
                                            int            width,
                                            int            height,
                                            const TdmExportInfo *info,
                                            GError       **error);
gboolean    tdm_chart_export_csv           (TdmChart      *chart,
                                            const char    *path,
                                            const TdmExportInfo *info,
                                            GError       **error);
/* The SVG document itself, for tests. */
char       *tdm_chart_to_svg               (TdmChart      *chart,
                                            int            width,
                                            int            height,
                                            const TdmExportInfo *info);

void        tdm_chart_device_colour        (int            index,
                                            GdkRGBA       *out);

G_END_DECLS
