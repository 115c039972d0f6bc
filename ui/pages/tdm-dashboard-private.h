/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dashboard-private.h: what tdm-dashboard.c (the layout) and
 * tdm-dashboard-plot.c (the session's points on the charts) share. */

#pragma once

#include <adwaita.h>

#include "tdm-dashboard.h"
#include "tdm-pacer.h"
#include "tdm-status-line.h"

G_BEGIN_DECLS

/* Fixed colours for the phases of a step, far apart in hue and lightness, so the
 * three areas never read as one. */
#define PHASE_COMPUTE 0x3584e4
#define PHASE_COMM    0xe5a50a
#define PHASE_WAIT    0x9a9996

typedef struct
{
  guint  series;
  double x, y;
} Pending;

/* Series each of the loss and accuracy charts has before any overlay. */
#define N_LIVE_SERIES 2
/* Overlaid runs named in the legend; the others are counted. */
#define MAX_OVERLAY_NAMES 3

typedef enum
{
  CHART_LOSS,
  CHART_ACCURACY,
  CHART_THROUGHPUT,
  CHART_MEMORY,
  CHART_LOAD,
  CHART_STEP_TIME,
  N_CHARTS
} ChartId;

/* The pacer's slot for the status line; the charts' are their ChartIds. */
#define STATUS_SLOT N_CHARTS

struct _TdmDashboard
{
  GtkWidget        parent_instance;

  GtkStack        *view_stack;
  AdwStatusPage   *empty_page;
  GtkFlowBox      *chart_grid;
  GtkWidget       *status_separator;
  GtkWidget       *status_box;
  TdmStatusLine   *status_line;
  GtkProgressBar  *progress_bar;

  TdmSession      *session;
  gulong           session_handlers[3];

  TdmChart        *charts[N_CHARTS];
  GArray          *pending[N_CHARTS];   /* of Pending */
  TdmPacer        *pacer;
  GMenu           *step_time_devices;   /* the step-time menu's list of replicas */
  GMenu           *x_axis_menu;         /* the loss and accuracy charts' x axes */

  /* Each replica's series on the memory and load charts (where the session gives it
   * a line), the capacity's (−1 where it has none), and each overlay's. */
  guint            memory_series[TDM_MAX_REPLICAS];
  guint            load_series[TDM_MAX_REPLICAS];
  int              capacity_series[TDM_MAX_REPLICAS];
  GArray          *overlay_series;      /* of guint pairs: loss, accuracy */
  guint            loss_train, loss_test, accuracy_train, accuracy_test, throughput;
  guint            step_series[3];

  gboolean         status_stale;        /* news for the status line while not shown */
};

static inline void
rgba_from_hex (GdkRGBA *out,
               guint32  hex)
{
  out->red = ((hex >> 16) & 0xff) / 255.0;
  out->green = ((hex >> 8) & 0xff) / 255.0;
  out->blue = (hex & 0xff) / 255.0;
  out->alpha = 1;
}

/* tdm-dashboard-plot.c */
void tdm_dashboard_flush_chart     (TdmDashboard          *self,
                                    ChartId                id);
void tdm_dashboard_update_status   (TdmDashboard          *self);
/* The pacer's callback: one chart's queued points, or the status line. */
void tdm_dashboard_paced           (guint                  slot,
                                    gpointer               user_data);
void tdm_dashboard_setup_step_time (TdmDashboard          *self);
void tdm_dashboard_show_charts     (TdmDashboard          *self);
void tdm_dashboard_replot          (TdmDashboard          *self);
/* The session's signals. */
void tdm_dashboard_started         (TdmSession            *session,
                                    TdmDashboard          *self);
void tdm_dashboard_point           (TdmSession            *session,
                                    const TdmSessionPoint *p,
                                    TdmDashboard          *self);
void tdm_dashboard_status_changed  (TdmSession            *session,
                                    gboolean               at_once,
                                    TdmDashboard          *self);

G_END_DECLS
