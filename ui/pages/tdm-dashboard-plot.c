/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dashboard-plot.c: the session's points and status on the dashboard's charts.
 *
 * The part of TdmDashboard that follows its TdmSession: each point goes to its
 * chart's series through the pacer, a STARTED event rebuilds the device charts'
 * series, the loss and accuracy charts are redrawn on another x axis or with other
 * overlays. The cards and their menus are tdm-dashboard.c's.
 */

#include <math.h>
#include <glib/gi18n.h>

#include "tdm-dashboard-private.h"
#include "tdm-format.h"

void
tdm_dashboard_flush_chart (TdmDashboard *self,
                           ChartId       id)
{
  GArray *pending = self->pending[id];

  for (guint i = 0; i < pending->len; i++)
    {
      const Pending *p = &g_array_index (pending, Pending, i);

      tdm_chart_append (self->charts[id], p->series, p->x, p->y);
    }
  g_array_set_size (pending, 0);
  tdm_pacer_unmark (self->pacer, id);
}

static void
tdm_dashboard_queue (TdmDashboard *self,
                     ChartId       id,
                     guint         series,
                     double        x,
                     double        y)
{
  Pending p = { series, x, y };

  /* A chart not shown draws nothing, so its points need no pacing: they go
   * straight in, and the pacer is not woken for them. */
  if (!gtk_widget_get_mapped (GTK_WIDGET (self)))
    {
      if (self->pending[id]->len > 0)
        tdm_dashboard_flush_chart (self, id);
      tdm_chart_append (self->charts[id], series, x, y);
      return;
    }
  g_array_append_val (self->pending[id], p);
  tdm_pacer_mark (self->pacer, id);
}

void
tdm_dashboard_update_status (TdmDashboard *self)
{
  g_autofree char *text = NULL;
  double fraction;

  tdm_pacer_unmark (self->pacer, STATUS_SLOT);
  self->status_stale = FALSE;
  text = tdm_session_dup_status (self->session, &fraction);
  if (text == NULL)
    return;

  tdm_status_line_set_text (self->status_line, text);
  gtk_progress_bar_set_fraction (self->progress_bar, fraction);
}

/* The status line, at once for news such as Paused, at the pacer's pace for a
 * step's figures while it is shown, and when it is shown again otherwise. */
void
tdm_dashboard_status_changed (TdmSession   *session,
                              gboolean      at_once,
                              TdmDashboard *self)
{
  if (at_once)
    tdm_dashboard_update_status (self);
  else if (gtk_widget_get_mapped (GTK_WIDGET (self)))
    tdm_pacer_mark (self->pacer, STATUS_SLOT);
  else
    self->status_stale = TRUE;
}

void
tdm_dashboard_paced (guint    slot,
                     gpointer user_data)
{
  TdmDashboard *self = user_data;

  if (slot == STATUS_SLOT)
    tdm_dashboard_update_status (self);
  else if (slot < N_CHARTS)
    tdm_dashboard_flush_chart (self, slot);
}

static void
tdm_dashboard_drop_pending (TdmDashboard *self,
                            ChartId       id)
{
  g_array_set_size (self->pending[id], 0);
  tdm_pacer_unmark (self->pacer, id);
}

/* Where a session's point goes: its chart and that chart's series. */
void
tdm_dashboard_point (TdmSession            *session,
                     const TdmSessionPoint *p,
                     TdmDashboard          *self)
{
  int r = p->replica;

  switch (p->series)
    {
    case TDM_SESSION_LOSS_TRAIN:
      tdm_dashboard_queue (self, CHART_LOSS, self->loss_train, p->x, p->y);
      break;
    case TDM_SESSION_LOSS_TEST:
      tdm_dashboard_queue (self, CHART_LOSS, self->loss_test, p->x, p->y);
      break;
    case TDM_SESSION_ACCURACY_TRAIN:
      tdm_dashboard_queue (self, CHART_ACCURACY, self->accuracy_train, p->x, p->y);
      break;
    case TDM_SESSION_ACCURACY_TEST:
      tdm_dashboard_queue (self, CHART_ACCURACY, self->accuracy_test, p->x, p->y);
      break;
    case TDM_SESSION_THROUGHPUT:
      tdm_dashboard_queue (self, CHART_THROUGHPUT, self->throughput, p->x, p->y);
      break;
    case TDM_SESSION_MEMORY:
      tdm_dashboard_queue (self, CHART_MEMORY, self->memory_series[r], p->x, p->y);
      break;
    case TDM_SESSION_CAPACITY:
      if (self->capacity_series[r] >= 0)
        tdm_dashboard_queue (self, CHART_MEMORY, self->capacity_series[r], p->x, p->y);
      break;
    case TDM_SESSION_LOAD:
      tdm_dashboard_queue (self, CHART_LOAD, self->load_series[r], p->x, p->y);
      break;
    case TDM_SESSION_STEP_COMPUTE:
    case TDM_SESSION_STEP_COMM:
    case TDM_SESSION_STEP_WAIT:
      tdm_dashboard_queue (self, CHART_STEP_TIME,
                           self->step_series[p->series - TDM_SESSION_STEP_COMPUTE],
                           p->x, p->y);
      break;
    case TDM_SESSION_N_SERIES:
    default:
      break;
    }
}

static void
tdm_dashboard_replay_point (const TdmSessionPoint *p,
                            gpointer               user_data)
{
  tdm_dashboard_point (NULL, p, user_data);
}

void
tdm_dashboard_setup_step_time (TdmDashboard *self)
{
  TdmChart *chart = self->charts[CHART_STEP_TIME];
  int replicas = tdm_session_get_n_replicas (self->session);
  GdkRGBA compute, comm, wait;

  /* Queued points name the old series; the replay below brings them back. */
  tdm_dashboard_drop_pending (self, CHART_STEP_TIME);
  tdm_chart_remove_all_series (chart);

  rgba_from_hex (&compute, PHASE_COMPUTE);
  rgba_from_hex (&comm, PHASE_COMM);
  rgba_from_hex (&wait, PHASE_WAIT);

  self->step_series[0] = tdm_chart_add_series (chart, _("Compute"), &compute,
                                               TDM_CHART_STYLE_STACKED);
  self->step_series[1] = tdm_chart_add_series (chart, _("Communication"), &comm,
                                               TDM_CHART_STYLE_STACKED);
  self->step_series[2] = tdm_chart_add_series (chart, _("Waiting"), &wait,
                                               TDM_CHART_STYLE_STACKED);
  /* One device neither talks to nor waits for another: no such entries. */
  tdm_chart_set_series_visible (chart, self->step_series[1], replicas > 1);
  tdm_chart_set_series_visible (chart, self->step_series[2], replicas > 1);

  if (replicas > 1)
    {
      g_autofree char *label =
        tdm_format_replica (tdm_session_get_started (self->session),
                            tdm_session_get_step_replica (self->session));
      /* Translators: the step-time chart's title when it shows one of several
       * devices; %s is the device, e.g. "cpu 2" */
      g_autofree char *title = g_strdup_printf (_("Step time · %s"), label);

      tdm_chart_set_title (chart, title);
    }
  else
    tdm_chart_set_title (chart, tdm_dashboard_get_chart_title (self, "step-time"));

  tdm_session_replay_step_time (self->session, tdm_dashboard_replay_point, self);
  tdm_dashboard_flush_chart (self, CHART_STEP_TIME);
}

void
tdm_dashboard_show_charts (TdmDashboard *self)
{
  gtk_stack_set_visible_child_name (self->view_stack, "charts");
  gtk_widget_set_visible (self->status_separator, TRUE);
  gtk_widget_set_visible (self->status_box, TRUE);
}

typedef struct
{
  TdmDashboard *self;
  guint         loss, accuracy;
} Replot;

static void
tdm_dashboard_replot_point (double   x,
                            double   loss,
                            double   accuracy,
                            gboolean test,
                            gpointer user_data)
{
  Replot *replot = user_data;

  tdm_chart_append (replot->self->charts[CHART_LOSS], replot->loss, x, loss);
  tdm_chart_append (replot->self->charts[CHART_ACCURACY], replot->accuracy, x, accuracy);
}

static void
tdm_dashboard_live_point (double   x,
                          double   loss,
                          double   accuracy,
                          gboolean test,
                          gpointer user_data)
{
  TdmDashboard *self = user_data;

  tdm_chart_append (self->charts[CHART_LOSS], test ? self->loss_test : self->loss_train,
                    x, loss);
  tdm_chart_append (self->charts[CHART_ACCURACY],
                    test ? self->accuracy_test : self->accuracy_train, x, accuracy);
}

/* The loss and accuracy charts from scratch: the overlays, then the live run's
 * points so far, on the session's x axis. */
/* Earlier runs drawn under this one: device colours far from the live run's blue
 * (its raw curve a lighter blue) and red, so not the sky blue nor the vermillion;
 * from the sixth run on, the same darkened. */
static void
tdm_dashboard_overlay_colour (guint    i,
                              GdkRGBA *colour)
{
  static const int far[] = { 2, 1, 5, 6, 7 };   /* green, orange, purple, yellow, grey */

  tdm_chart_device_colour (far[i % G_N_ELEMENTS (far)]
                           + TDM_CHART_N_DEVICE_COLOURS * (int) (i / G_N_ELEMENTS (far)),
                           colour);
}

void
tdm_dashboard_replot (TdmDashboard *self)
{
  static const ChartId ids[] = { CHART_LOSS, CHART_ACCURACY };
  gboolean by_step = tdm_session_get_x_axis (self->session) == TDM_SESSION_X_STEP;
  guint n_overlays = tdm_session_get_n_overlays (self->session);

  for (guint c = 0; c < G_N_ELEMENTS (ids); c++)
    {
      TdmChart *chart = self->charts[ids[c]];

      tdm_dashboard_drop_pending (self, ids[c]);
      tdm_chart_truncate_series (chart, N_LIVE_SERIES);
      tdm_chart_clear (chart);
      tdm_chart_set_x_label (chart, by_step ? _("Step") : _("Epoch"));
    }

  g_array_set_size (self->overlay_series, 0);
  for (guint i = 0; i < n_overlays; i++)
    {
      const char *name = tdm_session_get_overlay_name (self->session, i);
      Replot replot = { self, 0, 0 };
      GdkRGBA colour;

      tdm_dashboard_overlay_colour (i, &colour);
      replot.loss = tdm_chart_add_series (self->charts[CHART_LOSS], name, &colour,
                                          TDM_CHART_STYLE_OVERLAY);
      replot.accuracy = tdm_chart_add_series (self->charts[CHART_ACCURACY], name, &colour,
                                              TDM_CHART_STYLE_OVERLAY);
      g_array_append_val (self->overlay_series, replot.loss);
      g_array_append_val (self->overlay_series, replot.accuracy);
      /* Smoothed as the live training curve is, so equal runs draw equal curves. */
      tdm_chart_set_series_smoothing (self->charts[CHART_LOSS], replot.loss, 0.6);
      tdm_chart_set_series_smoothing (self->charts[CHART_ACCURACY], replot.accuracy, 0.6);
      /* Twenty names would leave no room to plot: the first few are named, the
       * others counted in one entry below. */
      if (i >= MAX_OVERLAY_NAMES)
        {
          tdm_chart_set_series_in_legend (self->charts[CHART_LOSS], replot.loss, FALSE);
          tdm_chart_set_series_in_legend (self->charts[CHART_ACCURACY], replot.accuracy,
                                          FALSE);
        }
      tdm_session_foreach_overlay_point (self->session, i, tdm_dashboard_replot_point,
                                         &replot);
    }

  if (n_overlays > MAX_OVERLAY_NAMES)
    {
      guint more = n_overlays - MAX_OVERLAY_NAMES;
      /* Translators: the legend entry for the earlier runs drawn but not named */
      g_autofree char *label = g_strdup_printf (ngettext ("%u more run", "%u more runs", more),
                                                more);
      GdkRGBA grey = { 0.55, 0.55, 0.55, 1 };

      for (guint c = 0; c < G_N_ELEMENTS (ids); c++)
        tdm_chart_add_series (self->charts[ids[c]], label, &grey, TDM_CHART_STYLE_OVERLAY);
    }

  tdm_session_foreach_live_point (self->session, tdm_dashboard_live_point, self);
}

/* A STARTED event: the charts start over for the run the session now holds. */
void
tdm_dashboard_started (TdmSession   *session,
                       TdmDashboard *self)
{
  TdmChart *memory = self->charts[CHART_MEMORY];
  TdmChart *load = self->charts[CHART_LOAD];
  int replicas = tdm_session_get_n_replicas (session);

  tdm_dashboard_show_charts (self);
  for (int id = 0; id < N_CHARTS; id++)
    tdm_dashboard_drop_pending (self, id);

  /* The live curves start over; the overlays stay as they are (redrawing twenty of
   * them at each Start would cost a frame). */
  tdm_series_clear (tdm_chart_get_series (self->charts[CHART_LOSS], self->loss_train));
  tdm_series_clear (tdm_chart_get_series (self->charts[CHART_LOSS], self->loss_test));
  tdm_series_clear (tdm_chart_get_series (self->charts[CHART_ACCURACY], self->accuracy_train));
  tdm_series_clear (tdm_chart_get_series (self->charts[CHART_ACCURACY], self->accuracy_test));
  gtk_widget_queue_draw (GTK_WIDGET (self->charts[CHART_LOSS]));
  gtk_widget_queue_draw (GTK_WIDGET (self->charts[CHART_ACCURACY]));
  tdm_chart_clear (self->charts[CHART_THROUGHPUT]);
  tdm_chart_remove_all_series (memory);
  tdm_chart_remove_all_series (load);

  for (int r = 0; r < replicas; r++)
    {
      g_autofree char *label = NULL;
      GdkRGBA colour;

      if (!tdm_session_replica_has_line (session, r))
        continue;

      tdm_chart_device_colour (r, &colour);
      label = tdm_session_dup_line_label (session, r);
      self->memory_series[r] = tdm_chart_add_series (memory, label, &colour,
                                                     TDM_CHART_STYLE_LINE);
      self->load_series[r] = tdm_chart_add_series (load, label, &colour,
                                                   TDM_CHART_STYLE_LINE);
    }

  /* The capacities after every device's line, as a group at the legend's end. */
  for (int r = 0; r < replicas; r++)
    {
      g_autofree char *label = NULL;
      GdkRGBA colour;

      self->capacity_series[r] = -1;
      if (!tdm_session_replica_has_capacity (session, r))
        continue;

      tdm_chart_device_colour (r, &colour);
      label = tdm_session_dup_capacity_label (session, r);
      self->capacity_series[r] = tdm_chart_add_series (memory, label, &colour,
                                                       TDM_CHART_STYLE_REFERENCE);
    }

  /* The step-time chart starts on the main replica; its menu offers the others. */
  g_menu_remove_all (self->step_time_devices);
  for (int r = 0; replicas > 1 && r < replicas; r++)
    {
      g_autofree char *label = tdm_format_replica (tdm_session_get_started (session), r);
      g_autoptr(GMenuItem) item = g_menu_item_new (label, NULL);

      g_menu_item_set_action_and_target_value (item, "dashboard.step-replica",
                                               g_variant_new_int32 (r));
      g_menu_append_item (self->step_time_devices, item);
    }
  tdm_dashboard_setup_step_time (self);
  g_object_notify (G_OBJECT (self), "step-replica");
}
