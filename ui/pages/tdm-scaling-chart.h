/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling-chart.h: a scaling run's points, speed-up against the ideal line.
 *
 * x is the number of devices (1 … N), y the speed-up over one device; the ideal line
 * y = x is drawn dashed, each point's efficiency is written beside it, and a bar
 * under each point splits its step into compute, communication and wait. It shows
 * the TdmScalingPoint values the engine's scaling driver reports and computes none.
 * Main-thread only.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-scaling.h"

G_BEGIN_DECLS

#define TDM_TYPE_SCALING_CHART (tdm_scaling_chart_get_type ())

G_DECLARE_FINAL_TYPE (TdmScalingChart, tdm_scaling_chart, TDM, SCALING_CHART, GtkWidget)

GtkWidget *tdm_scaling_chart_new        (void);
/* Adds or replaces the point for point->devices devices. */
void       tdm_scaling_chart_add_point  (TdmScalingChart       *self,
                                         const TdmScalingPoint *point);
void       tdm_scaling_chart_clear      (TdmScalingChart       *self);
guint      tdm_scaling_chart_get_n_points (TdmScalingChart     *self);
/* Point i, in the order they came. */
const TdmScalingPoint *tdm_scaling_chart_get_point (TdmScalingChart *self,
                                                    guint            i);
/* Draws the chart on any Cairo surface (the widget's, or an SVG file's). */
void       tdm_scaling_chart_draw       (TdmScalingChart       *self,
                                         cairo_t               *cr,
                                         double                 width,
                                         double                 height,
                                         const GdkRGBA         *text_colour);
/* The plot's y range: 0 … the larger of the ideal speed-up and the best measured. */
double     tdm_scaling_chart_get_y_max  (TdmScalingChart       *self);
/* Where the point for `devices` (or the ideal line at `devices`, when `ideal`) is
 * drawn at width × height; FALSE when there is no such point or nothing fits. */
gboolean   tdm_scaling_chart_point_position (TdmScalingChart   *self,
                                             double             width,
                                             double             height,
                                             int                devices,
                                             gboolean           ideal,
                                             graphene_point_t  *position);
/* The rectangle of the label ("1.85× · 93 %") of the point for `devices` at
 * width × height in `cr`'s font: beside the point, off the ideal line and inside
 * the chart where any place is; FALSE when there is no such point. */
gboolean   tdm_scaling_chart_label_rect (TdmScalingChart       *self,
                                         cairo_t               *cr,
                                         double                 width,
                                         double                 height,
                                         int                    devices,
                                         graphene_rect_t       *rect);

G_END_DECLS
