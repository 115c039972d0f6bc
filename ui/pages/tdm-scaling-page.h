/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling-page.h: the window's "Scaling" page: a scaling run and its chart.
 *
 * A scaling run trains the configuration on its first 1, 2, … N devices (strong:
 * the same global batch at every N; weak: the same batch per device) for a few
 * hundred steps each, as the engine's scaling experiment driven by a
 * TdmExperimentRunner (each training on a thread of its own), and plots each point as
 * it arrives: samples/s, speed-up and efficiency
 * against the ideal line, each point's compute / communication / wait. It can be
 * cancelled, is kept in the run history as a sweep record (tdm-history.h) as it goes,
 * and exports as CSV and SVG. The page does not decide the devices: the window hands it
 * the configuration from the run form.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-config.h"
#include "tdm-export-info.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling.h"

G_BEGIN_DECLS

#define TDM_TYPE_SCALING_PAGE (tdm_scaling_page_get_type ())

G_DECLARE_FINAL_TYPE (TdmScalingPage, tdm_scaling_page, TDM, SCALING_PAGE, GtkWidget)


/* Starts a scaling run of `config` over 1 … its device count with the page's mode
 * and steps; FALSE with the error (one device only, a run already going). The
 * property "running" follows it; "finished" is emitted with the error (NULL when
 * it completed, TDM_ENGINE_ERROR_CANCELLED when cancelled). */
gboolean       tdm_scaling_page_start        (TdmScalingPage   *self,
                                              const TdmConfig  *config,
                                              GError          **error);
void           tdm_scaling_page_cancel       (TdmScalingPage   *self);
gboolean       tdm_scaling_page_get_running  (TdmScalingPage   *self);

void           tdm_scaling_page_set_mode     (TdmScalingPage   *self,
                                              TdmScalingMode    mode);
TdmScalingMode tdm_scaling_page_get_mode     (TdmScalingPage   *self);
void           tdm_scaling_page_set_steps    (TdmScalingPage   *self,
                                              long              steps);
long           tdm_scaling_page_get_steps    (TdmScalingPage   *self);

GtkWidget     *tdm_scaling_page_get_chart    (TdmScalingPage   *self);
/* The table of the points (a GtkGrid, tdm-scaling-table.h) inside its scroller. */
GtkWidget     *tdm_scaling_page_get_table    (TdmScalingPage   *self);
/* The run history the runs are kept in; NULL (the default): the user's. */
void           tdm_scaling_page_set_history_folder (TdmScalingPage *self,
                                                    const char     *folder);
/* The history's id of the last run, once it is over, when it was kept (a run
 * cancelled before its first point is not); else NULL, and when the history could
 * not be written, why: */
const char    *tdm_scaling_page_get_record_id     (TdmScalingPage *self);
const GError  *tdm_scaling_page_get_record_error  (TdmScalingPage *self);

/* The sweep's settings as `# key: value` lines, then the points so far as
 * tdm_scaling_points_to_csv() writes them (the engine's one scaling table); written
 * atomically. */
gboolean       tdm_scaling_page_write_csv    (TdmScalingPage   *self,
                                              const char       *path,
                                              GError          **error);
/* The chart as an SVG image of width × height points. */
gboolean       tdm_scaling_page_write_svg    (TdmScalingPage   *self,
                                              const char       *path,
                                              double            width,
                                              double            height,
                                              GError          **error);

/* Any scaling chart as an SVG image of width × height points, with `info` (may be
 * NULL) in its caption and metadata: the page's, or a kept sweep's. */
gboolean       tdm_scaling_write_svg         (TdmScalingChart      *chart,
                                              const TdmExportInfo  *info,
                                              const char           *path,
                                              double                width,
                                              double                height,
                                              GError              **error);

G_END_DECLS
