/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dashboard.h: the live charts and status line of a training run.
 *
 * The right-hand side of the window: six TdmCharts (loss, accuracy, throughput,
 * memory, load and step time per device) and a status line with epoch, step,
 * samples/s, elapsed time and ETA, a view of a TdmSession (its own, or the window's
 * through tdm_dashboard_set_session()), which holds the run's state, samples
 * telemetry and keeps the metrics log. It does not start or stop runs.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-chart.h"
#include "tdm-events.h"
#include "tdm-history.h"
#include "tdm-export-info.h"
#include "tdm-metrics-log.h"
#include "tdm-session.h"

G_BEGIN_DECLS

#define TDM_TYPE_DASHBOARD (tdm_dashboard_get_type ())

G_DECLARE_FINAL_TYPE (TdmDashboard, tdm_dashboard, TDM, DASHBOARD, GtkWidget)

/* The session shown (a new one of its own at first). */
void           tdm_dashboard_set_session  (TdmDashboard  *self,
                                           TdmSession    *session);

/* Hands the event to the session: a STARTED event starts over; the others add to
 * the charts and the status. */
void           tdm_dashboard_handle_event (TdmDashboard  *self,
                                           const TdmEvent *event);
/* Replaces the status line, when no run tells what to show. */
void           tdm_dashboard_set_status   (TdmDashboard  *self,
                                           const char    *text);

/* Charts by id: "loss", "accuracy", "throughput", "memory", "load", "step-time". */
TdmChart      *tdm_dashboard_get_chart    (TdmDashboard  *self,
                                           const char    *id);
const char    *tdm_dashboard_get_chart_title (TdmDashboard *self,
                                              const char   *id);
/* Writes a chart as "png", "svg" or "csv", with the settings of the run shown. */
gboolean       tdm_dashboard_export_chart (TdmDashboard  *self,
                                           const char    *id,
                                           const char    *format,
                                           const char    *path,
                                           GError       **error);

/* Every figure of the run shown as CSV, its settings first (tdm-metrics-log.h). */
gboolean       tdm_dashboard_export_metrics (TdmDashboard *self,
                                             const char   *path,
                                             GError      **error);
/* The settings of the run shown, which its exports carry. */
const TdmExportInfo *tdm_dashboard_get_export_info (TdmDashboard *self);

/* What the loss and accuracy charts are drawn against is the property "x-axis",
 * "epoch" or "step" (the session's axis, tdm-session.h, never the clock), which the
 * action "dashboard.x-axis" of the charts' menu sets. */

/* Earlier runs, drawn as faint curves under the current one on the loss and
 * accuracy charts: `records` holds TdmRunRecord pointers, read here and not kept
 * (NULL or empty: none). */
void           tdm_dashboard_set_overlays (TdmDashboard  *self,
                                           GPtrArray     *records);
/* The chart's series number of overlay `index` (in the order given), on "loss" or
 * "accuracy"; −1 when there is no such overlay. For tests. */
int            tdm_dashboard_get_overlay_series (TdmDashboard *self,
                                                 const char   *chart_id,
                                                 guint         index);

/* Whether Start can be pressed now: the empty state says what to do next. */
void           tdm_dashboard_set_can_start  (TdmDashboard  *self,
                                             gboolean       can_start);
/* What stops Start, in the settings' words (NULL: nothing, or not known): the empty
 * state says it instead of a general hint. */
void           tdm_dashboard_set_problem    (TdmDashboard  *self,
                                             const char    *problem);
/* Start waits for the dataset or the devices: the empty state says what it waits for
 * ("Reading the dataset…") rather than asking for settings. */
void           tdm_dashboard_set_waiting    (TdmDashboard  *self,
                                             const char    *what);

G_END_DECLS
