/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling-page.h: the window's "Scaling" page: a scaling run and its chart.
 *
 * A scaling run trains the configuration on its first 1, 2, … N devices (strong:
 * the same global batch at every N; weak: the same batch per device) for a few
 * hundred steps each, as the engine's scaling experiment, and the page plots each
 * point as it arrives: samples/s, speed-up and efficiency against the ideal line,
 * each point's compute / communication / wait. The page is a view: it makes the
 * experiment of its mode and steps, but the window runs it (its one
 * TdmExperimentRunner, which keeps it in the window's run history as a sweep
 * record) and hands the page the runner to show. It exports as CSV and SVG. The page
 * does not decide the devices: the window hands it the configuration from the run
 * form.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-config.h"
#include "tdm-experiment-runner.h"
#include "tdm-export-info.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling.h"

G_BEGIN_DECLS

#define TDM_TYPE_SCALING_PAGE (tdm_scaling_page_get_type ())

G_DECLARE_FINAL_TYPE (TdmScalingPage, tdm_scaling_page, TDM, SCALING_PAGE, GtkWidget)


/* The scaling experiment of `config` over 1 … its device count with the page's mode
 * and steps, for the window to run; NULL with the error (settings the engine
 * refuses, one device only). */
TdmExperiment *tdm_scaling_page_new_experiment (TdmScalingPage     *self,
                                                const TdmConfig    *config,
                                                GError            **error);
/* Shows the sweep `runner` drives from now on (a scaling experiment just started):
 * the chart and table emptied, then each point as it comes, and how it ended. The
 * page holds a reference, and never starts anything. */
void           tdm_scaling_page_show_runner  (TdmScalingPage      *self,
                                              TdmExperimentRunner *runner);
/* Stops the sweep shown (its Cancel button), saying so until it ends. */
void           tdm_scaling_page_cancel       (TdmScalingPage   *self);

GtkWidget     *tdm_scaling_page_get_chart    (TdmScalingPage   *self);

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
