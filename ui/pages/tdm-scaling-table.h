/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling-table.h: a scaling sweep's points as a table of labels.
 *
 * One row a point: devices, batch, samples/s, speed-up, efficiency, compute,
 * communication and wait per step, and the most memory each device held. The Scaling
 * page shows the sweep going on with it, the History page a kept one: the same words
 * in both. It shows the engine's TdmScalingPoint values and computes none. Not a
 * class: a GtkGrid and the function that fills it.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-scaling.h"

G_BEGIN_DECLS

GtkWidget *tdm_scaling_table_new       (void);
/* The same table turned: one column a point, one row a figure, the figures' names
 * down the left. Narrow where a sweep has few points (a kept sweep's window), where
 * twelve columns side by side would not fit a phone's width. */
GtkWidget *tdm_scaling_table_new_transposed (void);
/* Replaces the rows with `n` points, a header row first. */
void       tdm_scaling_table_set_points (GtkWidget             *table,
                                         const TdmScalingPoint *points,
                                         guint                  n);
/* What the table says for one point, column by column (NULL-terminated, free with
 * g_strfreev): the cells' text, for tests and for the table itself. */
GStrv      tdm_scaling_table_row_text   (const TdmScalingPoint *point);

G_END_DECLS
