/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-dashboard.c: the live charts and status line of a training run.
 *
 * A view of a TdmSession: the session turns events into points of named series and
 * a status; this file lays out six chart cards, their menus and the status line,
 * and tdm-dashboard-plot.c puts the session's points on them. Loss and
 * accuracy are drawn against epochs or steps, a setting of those two charts, with
 * earlier runs from the history as faint curves (their training curves, one legend
 * entry each). Every replica keeps one colour, tdm_chart_device_colour() of its
 * index, in every chart. The step-time chart stacks compute, communication and
 * waiting for one replica at a time, picked in the chart's corner; the session's log
 * keeps all of them, so switching replays that replica's history.
 *
 * Until the first run starts there is nothing to chart, so an AdwStatusPage says what
 * to do instead of six empty cards. The cards sit in a GtkFlowBox: three columns on
 * a wide window, two, then one, each card no narrower than CARD_MIN_WIDTH.
 *
 * Redrawing a chart costs a few milliseconds of a frame's 16 on a slow CPU, and a new
 * status line a redraw (a relayout of the window when it needs another number of
 * lines, tdm-status-line.c); events come twenty times a second. So
 * points are queued here, and a TdmPacer hands each chart its points, and the status
 * line its latest figures, at most once a second, one of them per tick: the window
 * stays live and no frame pays for more than one.
 */

#include <math.h>
#include <string.h>
#include <glib/gi18n.h>

#include <adwaita.h>

#include "tdm-dashboard-private.h"

/* Each chart, and the status line, is a slot of the pacer: one slot is updated per
 * PACE_MS (about four frames), and each at most every REFRESH_MS. Where training
 * keeps every core busy, what the window draws is taken from training, and more:
 * each wake-up of the main thread puts a replica off its core while the others wait
 * for it. At 2 Hz the window cost mlp on cpu:2 about 8 % of its throughput (main
 * thread 2.8 % of a core), at 1 Hz about 2 % (1.5 %); bench/NOTES.md, "GUI". */
#define PACE_MS    60
#define REFRESH_MS 1000

#define CARD_MIN_WIDTH       240
#define CARD_MIN_HEIGHT      200
/* The card's ⋮ button, margins included: the chart keeps this corner free. */
#define CARD_BUTTON_RESERVE  44

static const struct
{
  const char *id;
  const char *title;
  const char *x_label;
  const char *x_unit;
  const char *y_label;
  const char *y_unit;
} chart_info[N_CHARTS] = {
  { "loss", N_("Loss"), N_("Epoch"), NULL, N_("Loss"), NULL },
  { "accuracy", N_("Accuracy"), N_("Epoch"), NULL, N_("Accuracy"), "%" },
  { "throughput", N_("Throughput"), N_("Time"), "s", N_("Throughput"),
    /* Translators: the unit of throughput on a chart axis */
    N_("samples/s") },
  /* Bytes and milliseconds: the chart shows them in MiB or GiB, ms or s, whichever
   * reads best for the values (tdm-chart-axis.h). */
  { "memory", N_("Memory per device"), N_("Time"), "s", N_("Memory"), "B" },
  { "load", N_("Load per device"), N_("Time"), "s", N_("Load"), "%" },
  { "step-time", N_("Step time"), N_("Time"), "s", N_("Time per step"), "ms" },
};

enum {
  PROP_0,
  PROP_STEP_REPLICA,
  PROP_X_AXIS,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmDashboard, tdm_dashboard, GTK_TYPE_WIDGET)


static int
chart_index (const char *id)
{
  for (int i = 0; i < N_CHARTS; i++)
    if (g_strcmp0 (chart_info[i].id, id) == 0)
      return i;

  return -1;
}

static void
tdm_dashboard_set_step_replica (TdmDashboard *self,
                                int           replica)
{
  if (!tdm_session_set_step_replica (self->session, replica))
    return;

  tdm_dashboard_setup_step_time (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STEP_REPLICA]);
}

/* The "x-axis" property: what the loss and accuracy charts are drawn against. */
static void
tdm_dashboard_set_x_axis (TdmDashboard    *self,
                          TdmSessionXAxis  axis)
{
  if (axis == tdm_session_get_x_axis (self->session))
    return;

  tdm_session_set_x_axis (self->session, axis);
  tdm_dashboard_replot (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_X_AXIS]);
}

void
tdm_dashboard_set_overlays (TdmDashboard *self,
                            GPtrArray    *records)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));

  tdm_session_set_overlays (self->session, records);
  tdm_dashboard_replot (self);
  /* Earlier runs are worth seeing before any run of this session. */
  if (tdm_session_get_n_overlays (self->session) > 0)
    tdm_dashboard_show_charts (self);
}

int
tdm_dashboard_get_overlay_series (TdmDashboard *self,
                                  const char   *chart_id,
                                  guint         index)
{
  g_return_val_if_fail (TDM_IS_DASHBOARD (self), -1);

  if (2 * index >= self->overlay_series->len)
    return -1;
  if (g_strcmp0 (chart_id, "loss") == 0)
    return (int) g_array_index (self->overlay_series, guint, 2 * index);
  if (g_strcmp0 (chart_id, "accuracy") == 0)
    return (int) g_array_index (self->overlay_series, guint, 2 * index + 1);
  return -1;
}

void
tdm_dashboard_handle_event (TdmDashboard   *self,
                            const TdmEvent *event)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));
  g_return_if_fail (event != NULL);

  tdm_session_handle_event (self->session, event);
}

void
tdm_dashboard_set_status (TdmDashboard *self,
                          const char   *text)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));

  tdm_session_set_status (self->session, text);
  gtk_widget_set_visible (self->status_separator, TRUE);
  gtk_widget_set_visible (self->status_box, TRUE);
}

TdmChart *
tdm_dashboard_get_chart (TdmDashboard *self,
                         const char   *id)
{
  int i;

  g_return_val_if_fail (TDM_IS_DASHBOARD (self), NULL);

  i = chart_index (id);

  return i < 0 ? NULL : self->charts[i];
}

const char *
tdm_dashboard_get_chart_title (TdmDashboard *self,
                               const char   *id)
{
  int i;

  g_return_val_if_fail (TDM_IS_DASHBOARD (self), NULL);

  i = chart_index (id);

  return i < 0 ? NULL : _(chart_info[i].title);
}

gboolean
tdm_dashboard_export_chart (TdmDashboard  *self,
                            const char    *id,
                            const char    *format,
                            const char    *path,
                            GError       **error)
{
  const TdmExportInfo *info;
  TdmChart *chart;
  int width, height;

  g_return_val_if_fail (TDM_IS_DASHBOARD (self), FALSE);
  g_return_val_if_fail (format != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  chart = tdm_dashboard_get_chart (self, id);
  if (chart == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   _("There is no chart called “%s”."), id);
      return FALSE;
    }

  tdm_dashboard_flush_chart (self, chart_index (id));

  /* What is on screen, but never smaller than a readable figure. */
  width = MAX (gtk_widget_get_width (GTK_WIDGET (chart)), 960);
  height = MAX (gtk_widget_get_height (GTK_WIDGET (chart)), 600);
  info = tdm_session_get_export_info (self->session);

  if (g_str_equal (format, "png"))
    return tdm_chart_export_png (chart, path, width, height, info, error);
  if (g_str_equal (format, "svg"))
    return tdm_chart_export_svg (chart, path, width, height, info, error);
  if (g_str_equal (format, "csv"))
    return tdm_chart_export_csv (chart, path, info, error);

  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
               _("Charts can be saved as PNG, SVG or CSV, not “%s”."), format);
  return FALSE;
}

gboolean
tdm_dashboard_export_metrics (TdmDashboard  *self,
                              const char    *path,
                              GError       **error)
{
  g_return_val_if_fail (TDM_IS_DASHBOARD (self), FALSE);

  return tdm_session_export_metrics (self->session, path, error);
}

const TdmExportInfo *
tdm_dashboard_get_export_info (TdmDashboard *self)
{
  g_return_val_if_fail (TDM_IS_DASHBOARD (self), NULL);

  return tdm_session_get_export_info (self->session);
}

static void
tdm_dashboard_unbind (TdmDashboard *self)
{
  if (self->session == NULL)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (self->session_handlers); i++)
    g_clear_signal_handler (&self->session_handlers[i], self->session);
  g_clear_object (&self->session);
}

void
tdm_dashboard_set_session (TdmDashboard *self,
                           TdmSession   *session)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));
  g_return_if_fail (TDM_IS_SESSION (session));

  if (session == self->session)
    return;

  tdm_dashboard_unbind (self);
  self->session = g_object_ref (session);
  self->session_handlers[0] = g_signal_connect (session, "started",
                                                G_CALLBACK (tdm_dashboard_started), self);
  self->session_handlers[1] = g_signal_connect (session, "point",
                                                G_CALLBACK (tdm_dashboard_point), self);
  self->session_handlers[2] = g_signal_connect (session, "status-changed",
                                                G_CALLBACK (tdm_dashboard_status_changed),
                                                self);
  if (tdm_session_get_started (session) != NULL)
    tdm_dashboard_started (session, self);
  else
    tdm_dashboard_setup_step_time (self);
  tdm_dashboard_replot (self);
}

static GtkWidget *
tdm_dashboard_make_card (TdmDashboard *self,
                         ChartId       id,
                         GMenuModel   *extra)
{
  static const struct { const char *label; const char *format; } items[] = {
    { N_("Save as _PNG…"), "png" },
    { N_("Save as _SVG…"), "svg" },
    { N_("Save Data as _CSV…"), "csv" },
  };
  GtkWidget *overlay = gtk_overlay_new ();
  GtkWidget *chart = tdm_chart_new ();
  GtkWidget *menu_button = gtk_menu_button_new ();
  g_autoptr(GMenu) menu = g_menu_new ();
  g_autoptr(GMenu) export = g_menu_new ();
  g_autofree char *tooltip = NULL;

  self->charts[id] = TDM_CHART (chart);
  tdm_chart_set_title (self->charts[id], _(chart_info[id].title));
  tdm_chart_set_x_label (self->charts[id], _(chart_info[id].x_label));
  tdm_chart_set_x_unit (self->charts[id], chart_info[id].x_unit);
  tdm_chart_set_y_label (self->charts[id], _(chart_info[id].y_label));
  tdm_chart_set_y_unit (self->charts[id],
                        chart_info[id].y_unit ? _(chart_info[id].y_unit) : NULL);
  tdm_chart_set_corner_reserve (self->charts[id], CARD_BUTTON_RESERVE, CARD_BUTTON_RESERVE);
  gtk_widget_set_hexpand (chart, TRUE);
  gtk_widget_set_vexpand (chart, TRUE);
  gtk_widget_set_size_request (chart, CARD_MIN_WIDTH, CARD_MIN_HEIGHT);
  gtk_overlay_set_child (GTK_OVERLAY (overlay), chart);

  for (guint i = 0; i < G_N_ELEMENTS (items); i++)
    {
      g_autoptr(GMenuItem) item = g_menu_item_new (_(items[i].label), NULL);
      g_autofree char *target = g_strdup_printf ("%s:%s", chart_info[id].id, items[i].format);

      g_menu_item_set_action_and_target (item, "win.export-chart", "s", target);
      g_menu_append_item (export, item);
    }
  if (extra != NULL)
    /* Translators: heading of the step-time chart's list of devices, and of the
     * loss and accuracy charts' choice of x axis */
    g_menu_append_section (menu, _("Show"), extra);
  g_menu_append_section (menu, NULL, G_MENU_MODEL (export));
  gtk_menu_button_set_menu_model (GTK_MENU_BUTTON (menu_button), G_MENU_MODEL (menu));
  gtk_menu_button_set_icon_name (GTK_MENU_BUTTON (menu_button), "view-more-symbolic");
  gtk_menu_button_set_has_frame (GTK_MENU_BUTTON (menu_button), FALSE);
  /* Translators: tooltip of a chart's menu; %s is the chart's title */
  tooltip = g_strdup_printf (_("Options for “%s”"), _(chart_info[id].title));
  gtk_widget_set_tooltip_text (menu_button, tooltip);
  gtk_accessible_update_property (GTK_ACCESSIBLE (menu_button),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, tooltip,
                                  -1);

  gtk_widget_set_halign (menu_button, GTK_ALIGN_END);
  gtk_widget_set_valign (menu_button, GTK_ALIGN_START);
  gtk_widget_set_margin_top (menu_button, 4);
  gtk_widget_set_margin_end (menu_button, 4);
  gtk_overlay_add_overlay (GTK_OVERLAY (overlay), menu_button);

  gtk_widget_add_css_class (overlay, "chart-card");
  gtk_widget_set_overflow (overlay, GTK_OVERFLOW_HIDDEN);

  return overlay;
}

static void
tdm_dashboard_dispose (GObject *object)
{
  TdmDashboard *self = (TdmDashboard *)object;

  GtkWidget *child;

  tdm_dashboard_unbind (self);
  g_clear_pointer (&self->pacer, tdm_pacer_free);
  gtk_widget_dispose_template (GTK_WIDGET (self), TDM_TYPE_DASHBOARD);
  /* Whatever the template left behind. */
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (child);

  G_OBJECT_CLASS (tdm_dashboard_parent_class)->dispose (object);
}

static void
tdm_dashboard_finalize (GObject *object)
{
  TdmDashboard *self = (TdmDashboard *)object;

  for (int id = 0; id < N_CHARTS; id++)
    g_clear_pointer (&self->pending[id], g_array_unref);
  g_clear_object (&self->step_time_devices);
  g_clear_object (&self->x_axis_menu);
  g_clear_pointer (&self->overlay_series, g_array_unref);

  G_OBJECT_CLASS (tdm_dashboard_parent_class)->finalize (object);
}

static void
tdm_dashboard_get_property (GObject    *object,
                            guint       prop_id,
                            GValue     *value,
                            GParamSpec *pspec)
{
  TdmDashboard *self = TDM_DASHBOARD (object);

  switch (prop_id)
    {
    case PROP_STEP_REPLICA:
      g_value_set_int (value, tdm_session_get_step_replica (self->session));
      break;

    case PROP_X_AXIS:
      g_value_set_string (value, tdm_session_get_x_axis (self->session) == TDM_SESSION_X_STEP
                                 ? "step" : "epoch");
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_dashboard_set_property (GObject      *object,
                            guint         prop_id,
                            const GValue *value,
                            GParamSpec   *pspec)
{
  TdmDashboard *self = TDM_DASHBOARD (object);

  switch (prop_id)
    {
    case PROP_STEP_REPLICA:
      tdm_dashboard_set_step_replica (self, g_value_get_int (value));
      break;

    case PROP_X_AXIS:
      tdm_dashboard_set_x_axis (self, g_strcmp0 (g_value_get_string (value), "step") == 0
                                        ? TDM_SESSION_X_STEP : TDM_SESSION_X_EPOCH);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

/* Another page is shown: what is queued goes in now, and nothing more wakes the
 * pacer until the charts are shown again (a page not shown needs no ticks). */
static void
tdm_dashboard_unmap (GtkWidget *widget)
{
  TdmDashboard *self = TDM_DASHBOARD (widget);

  for (int id = 0; id < N_CHARTS; id++)
    if (self->pending[id]->len > 0)
      tdm_dashboard_flush_chart (self, id);
  GTK_WIDGET_CLASS (tdm_dashboard_parent_class)->unmap (widget);
}

static void
tdm_dashboard_map (GtkWidget *widget)
{
  TdmDashboard *self = TDM_DASHBOARD (widget);

  GTK_WIDGET_CLASS (tdm_dashboard_parent_class)->map (widget);
  if (self->status_stale)
    {
      self->status_stale = FALSE;
      tdm_dashboard_update_status (self);
    }
}

static void
tdm_dashboard_class_init (TdmDashboardClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  widget_class->map = tdm_dashboard_map;
  widget_class->unmap = tdm_dashboard_unmap;

  object_class->dispose = tdm_dashboard_dispose;
  object_class->finalize = tdm_dashboard_finalize;
  object_class->get_property = tdm_dashboard_get_property;
  object_class->set_property = tdm_dashboard_set_property;

  properties[PROP_STEP_REPLICA] =
    g_param_spec_int ("step-replica", NULL, NULL, 0, TDM_MAX_REPLICAS - 1, 0,
                      G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  /* "epoch" or "step": a string, so that the charts' menus can offer it as radio
   * items through a property action. */
  properties[PROP_X_AXIS] =
    g_param_spec_string ("x-axis", NULL, NULL, "epoch",
                         G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_install_property_action (widget_class, "dashboard.step-replica",
                                            "step-replica");
  gtk_widget_class_install_property_action (widget_class, "dashboard.x-axis", "x-axis");

  g_type_ensure (TDM_TYPE_STATUS_LINE);
  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-dashboard.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmDashboard, view_stack);
  gtk_widget_class_bind_template_child (widget_class, TdmDashboard, empty_page);
  gtk_widget_class_bind_template_child (widget_class, TdmDashboard, chart_grid);
  gtk_widget_class_bind_template_child (widget_class, TdmDashboard, status_separator);
  gtk_widget_class_bind_template_child (widget_class, TdmDashboard, status_box);
  gtk_widget_class_bind_template_child (widget_class, TdmDashboard, status_line);
  gtk_widget_class_bind_template_child (widget_class, TdmDashboard, progress_bar);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "dashboard");
}

static void
tdm_dashboard_init (TdmDashboard *self)
{
  GtkLayoutManager *layout;
  GdkRGBA train, test;
  GtkWidget *card;

  gtk_widget_init_template (GTK_WIDGET (self));

  layout = gtk_widget_get_layout_manager (GTK_WIDGET (self));
  gtk_orientable_set_orientation (GTK_ORIENTABLE (layout), GTK_ORIENTATION_VERTICAL);

  for (int id = 0; id < N_CHARTS; id++)
    self->pending[id] = g_array_new (FALSE, FALSE, sizeof (Pending));
  self->pacer = tdm_pacer_new (PACE_MS, REFRESH_MS, tdm_dashboard_paced, self);
  self->step_time_devices = g_menu_new ();
  self->overlay_series = g_array_new (FALSE, FALSE, sizeof (guint));
  self->x_axis_menu = g_menu_new ();
  g_menu_append (self->x_axis_menu, _("By _Epoch"), "dashboard.x-axis::epoch");
  g_menu_append (self->x_axis_menu, _("By _Step"), "dashboard.x-axis::step");

  for (int i = 0; i < N_CHARTS; i++)
    {
      GtkWidget *flow_child;
      GMenuModel *extra = NULL;

      if (i == CHART_STEP_TIME)
        extra = G_MENU_MODEL (self->step_time_devices);
      else if (i == CHART_LOSS || i == CHART_ACCURACY)
        extra = G_MENU_MODEL (self->x_axis_menu);
      card = tdm_dashboard_make_card (self, i, extra);
      gtk_flow_box_append (self->chart_grid, card);
      /* The cards are not items to pick: Tab goes straight to their menus. */
      flow_child = gtk_widget_get_parent (card);
      gtk_widget_set_focusable (flow_child, FALSE);
      gtk_widget_set_vexpand (flow_child, TRUE);
    }

  rgba_from_hex (&train, 0x1c71d8);
  rgba_from_hex (&test, 0xc01c28);

  tdm_chart_set_log_scale (self->charts[CHART_LOSS], TRUE);
  self->loss_train = tdm_chart_add_series (self->charts[CHART_LOSS], _("Training"),
                                           &train, TDM_CHART_STYLE_LINE);
  tdm_chart_set_series_smoothing (self->charts[CHART_LOSS], self->loss_train, 0.6);
  self->loss_test = tdm_chart_add_series (self->charts[CHART_LOSS], _("Test"),
                                          &test, TDM_CHART_STYLE_POINTS);

  tdm_chart_set_y_range (self->charts[CHART_ACCURACY], 0, 100);
  self->accuracy_train = tdm_chart_add_series (self->charts[CHART_ACCURACY], _("Training"),
                                               &train, TDM_CHART_STYLE_LINE);
  tdm_chart_set_series_smoothing (self->charts[CHART_ACCURACY], self->accuracy_train, 0.6);
  self->accuracy_test = tdm_chart_add_series (self->charts[CHART_ACCURACY], _("Test"),
                                              &test, TDM_CHART_STYLE_POINTS);

  /* Already a one-second average: no smoothing, so what is drawn is what is read. */
  self->throughput = tdm_chart_add_series (self->charts[CHART_THROUGHPUT], _("Training"),
                                           &train, TDM_CHART_STYLE_LINE);
  tdm_chart_set_nested_lines (self->charts[CHART_MEMORY], TRUE);
  tdm_chart_set_nested_lines (self->charts[CHART_LOAD], TRUE);

  tdm_chart_set_y_range (self->charts[CHART_LOAD], 0, 100);
  {
    g_autoptr(TdmSession) session = tdm_session_new ();

    tdm_dashboard_set_session (self, session);
  }

  gtk_widget_set_visible (self->status_separator, FALSE);
  gtk_widget_set_visible (self->status_box, FALSE);
  tdm_dashboard_set_can_start (self, FALSE);
}

void
tdm_dashboard_set_can_start (TdmDashboard *self,
                             gboolean      can_start)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));

  /* Never "press Start" while Start cannot be pressed, nor "pick a dataset" once
   * one is picked. */
  adw_status_page_set_title (self->empty_page,
                             can_start ? _("Ready to Train") : _("Settings Needed"));
  adw_status_page_set_description (self->empty_page,
                                   can_start ? _("Press Start (Ctrl+Enter) to train with the settings on the left.")
                                             : _("Choose a dataset, a network and at least one device in the settings (F9)."));
}

void
tdm_dashboard_set_problem (TdmDashboard *self,
                           const char   *problem)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));

  if (problem != NULL)
    adw_status_page_set_description (self->empty_page, problem);
}

void
tdm_dashboard_set_waiting (TdmDashboard *self,
                           const char   *what)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));
  g_return_if_fail (what != NULL);

  adw_status_page_set_title (self->empty_page, _("Getting Ready"));
  adw_status_page_set_description (self->empty_page, what);
}
