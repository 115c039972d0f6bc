/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-axis.h: tick placement and number formatting for TdmChart.
 *
 * Private to the chart (and its tests): nice-number ticks (1, 2, 5 × 10^k)
 * on linear, log and time axes, and labels with SI suffixes (k, M, G) or time
 * units (s, min, h). Two units climb a ladder instead of taking SI suffixes:
 * "B" (bytes, shown in KiB, MiB, GiB as they grow) and "ms" (shown in s from
 * 1,000 ms). Pure functions: no drawing, no GTK.
 */

#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define TDM_CHART_AXIS_MAX_TICKS 48

typedef enum
{
  TDM_CHART_AXIS_LINEAR,
  TDM_CHART_AXIS_LOG,
  TDM_CHART_AXIS_TIME,   /* data in seconds, shown in s, min or h */
} TdmChartAxisKind;

typedef struct
{
  TdmChartAxisKind kind;
  double           lo, hi;       /* the range drawn, in data units */
  double           ticks[TDM_CHART_AXIS_MAX_TICKS];
  guint            n_ticks;
  double           step;         /* between ticks, in data units (decades on log) */
  double           scale;        /* labels show value / scale ... */
  const char      *suffix;       /* ... followed by this (SI prefix or "") */
  const char      *unit;         /* TIME: "s", "min" or "h"; a unit's ladder: "MiB",
                                  * "GiB", "s"…; for the axis title, or NULL */
  int              decimals;
} TdmChartAxis;

void  tdm_chart_axis_linear        (TdmChartAxis *axis,
                                    double        lo,
                                    double        hi,
                                    guint         max_ticks,
                                    gboolean      extend);
void  tdm_chart_axis_log           (TdmChartAxis *axis,
                                    double        lo,
                                    double        hi,
                                    guint         max_ticks,
                                    gboolean      extend);
void  tdm_chart_axis_time          (TdmChartAxis *axis,
                                    double        lo,
                                    double        hi,
                                    guint         max_ticks);
void  tdm_chart_axis_in_unit       (TdmChartAxis *axis,
                                    const char   *unit,
                                    double        lo,
                                    double        hi,
                                    guint         max_ticks,
                                    gboolean      extend);

double tdm_chart_axis_nice_step    (double        span,
                                    guint         max_ticks);
void  tdm_chart_axis_format_tick   (const TdmChartAxis *axis,
                                    double        value,
                                    char         *buf,
                                    gsize         size);
void  tdm_chart_format_value       (double        value,
                                    char         *buf,
                                    gsize         size);
void  tdm_chart_format_in_unit     (double        value,
                                    const char   *unit,
                                    char         *buf,
                                    gsize         size);
void  tdm_chart_format_duration    (double        seconds,
                                    char         *buf,
                                    gsize         size);

G_END_DECLS
