/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window-classroom.c: the window's teaching side.
 *
 * What the window does beyond running and charting one run: the memory estimate on
 * the Devices page before Start (asked of the engine through TdmRunForm), the pace
 * control and single steps, presentation mode, the Scaling page's exports, and which
 * page shows (the sweep itself is one of the window's experiments,
 * tdm-window-experiments.c). The pages themselves are their own widgets; this file only
 * wires them to the window's actions and state (tdm-window-private.h).
 */

#include <glib/gi18n.h>

#include "tdm-chart.h"
#include "tdm-format.h"
#include "tdm-scaling-chart.h"
#include "tdm-window-private.h"

/* The chart presentation mode enlarges. */
#define PRESENTATION_CHART "loss"

/* Memory estimate --------------------------------------------------------- */

/* Before Start, the engine's estimate for the choices as they stand. */
void
tdm_window_update_estimate (TdmWindow *self)
{
  TdmMemoryEvent estimate;
  g_autoptr(GError) error = NULL;
  gboolean fits = TRUE;
  int largest = 0;

  /* A run in flight reports its own estimate and peaks. */
  if (self->run != NULL)
    return;

  if (tdm_run_form_estimate_memory (self->sidebar, &estimate, &fits, &largest, &error))
    tdm_devices_page_set_estimate (self->devices_page, &estimate, NULL, fits, largest);
  else
    {
      g_autofree char *reason = tdm_format_sentence (error->message);

      tdm_devices_page_set_estimate (self->devices_page, NULL, reason, TRUE, 0);
    }
}

void
tdm_window_settings_changed (TdmWindow *self)
{
  if (self->run != NULL)
    return;
  tdm_devices_page_clear (self->devices_page);
  tdm_window_update_estimate (self);
  tdm_window_experiments_settings_changed (self);
  /* What stops Start may have changed without Start changing. */
  tdm_window_update_state (self);
}

/* Pace -------------------------------------------------------------------- */

void
tdm_window_pace_changed (TdmWindow *self)
{
  double pace = gtk_spin_button_get_value (self->pace_spin);

  /* 0 is no pace at all: said in words, not left to a number. */
  gtk_label_set_label (self->pace_unit_label,
                       pace > 0 ? _("steps/s") : _("steps/s: full speed"));
  if (self->run != NULL)
    tdm_run_set_pace (self->run, pace);
}

/* The pace holds only while its bar shows: hidden, it goes back to full speed, so
 * no run is slowed by a control nobody sees. */
static void
tdm_window_reveal_pace (TdmWindow *self,
                        gboolean   reveal)
{
  gtk_revealer_set_reveal_child (self->pace_revealer, reveal);
  if (!reveal)
    gtk_spin_button_set_value (self->pace_spin, 0);
}

void
tdm_window_single_step (GtkWidget  *widget,
                        const char *action_name,
                        GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);

  if (self->run == NULL)
    return;

  tdm_run_single_step (self->run);
  tdm_window_update_state (self);
}

void
tdm_window_show_pace (GtkWidget  *widget,
                      const char *action_name,
                      GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);

  tdm_window_reveal_pace (self, !gtk_revealer_get_reveal_child (self->pace_revealer));
}

/* Presentation mode ------------------------------------------------------- */

/* One chart over the whole Charts page: the others step aside and the grid keeps one
 * column. Only the dashboard's public charts and the grid they sit in are touched. */
static void
tdm_window_enlarge_chart (TdmWindow  *self,
                          const char *id)
{
  TdmChart *chart = tdm_dashboard_get_chart (self->dashboard, PRESENTATION_CHART);
  GtkWidget *card = chart ? gtk_widget_get_ancestor (GTK_WIDGET (chart), GTK_TYPE_FLOW_BOX_CHILD) : NULL;
  GtkWidget *grid = card ? gtk_widget_get_parent (card) : NULL;

  if (grid == NULL || !GTK_IS_FLOW_BOX (grid))
    return;

  if (id != NULL && self->grid_columns == 0)
    self->grid_columns = gtk_flow_box_get_max_children_per_line (GTK_FLOW_BOX (grid));
  for (GtkWidget *c = gtk_widget_get_first_child (grid); c; c = gtk_widget_get_next_sibling (c))
    if (GTK_IS_FLOW_BOX_CHILD (c))
      gtk_widget_set_visible (c, id == NULL || c == card);
  if (id != NULL)
    gtk_flow_box_set_max_children_per_line (GTK_FLOW_BOX (grid), 1);
  else if (self->grid_columns > 0)
    {
      gtk_flow_box_set_max_children_per_line (GTK_FLOW_BOX (grid), self->grid_columns);
      self->grid_columns = 0;
    }
}

/* Presentation mode (F11, the menu; Escape leaves it): fullscreen, larger text, the
 * loss chart enlarged, high-contrast phase colours, the pace control shown. */
static void
tdm_window_set_presentation (TdmWindow *self,
                             gboolean   presentation)
{
  g_return_if_fail (TDM_IS_WINDOW (self));

  presentation = !!presentation;
  if (presentation == self->presentation)
    return;
  self->presentation = presentation;

  if (presentation)
    {
      gtk_widget_add_css_class (GTK_WIDGET (self), "presentation");
      gtk_window_fullscreen (GTK_WINDOW (self));
      /* The class looks at the views, not at the settings. */
      adw_flap_set_reveal_flap (self->flap, FALSE);
    }
  else
    {
      gtk_widget_remove_css_class (GTK_WIDGET (self), "presentation");
      gtk_window_unfullscreen (GTK_WINDOW (self));
      if (!adw_flap_get_folded (self->flap))
        adw_flap_set_reveal_flap (self->flap, TRUE);
    }
  tdm_window_enlarge_chart (self, presentation ? PRESENTATION_CHART : NULL);
  tdm_devices_page_set_presentation (self->devices_page, presentation);
  tdm_window_reveal_pace (self, presentation);
  /* Escape leaves presentation mode, and is left to the rest of the window otherwise. */
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.leave-presentation", presentation);
}

gboolean
tdm_window_get_presentation (TdmWindow *self)
{
  g_return_val_if_fail (TDM_IS_WINDOW (self), FALSE);

  return self->presentation;
}

void
tdm_window_toggle_presentation (GtkWidget  *widget,
                                const char *action_name,
                                GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);

  tdm_window_set_presentation (self, !self->presentation);
}

void
tdm_window_leave_presentation (GtkWidget  *widget,
                               const char *action_name,
                               GVariant   *parameter)
{
  tdm_window_set_presentation (TDM_WINDOW (widget), FALSE);
}

/* Pages ------------------------------------------------------------------- */

static const char *const page_names[] = {
  "charts", "devices", "predictions", "scaling", "history",
};

gboolean
tdm_window_has_page (const char *name)
{
  g_return_val_if_fail (name != NULL, FALSE);

  for (guint i = 0; i < G_N_ELEMENTS (page_names); i++)
    if (g_str_equal (page_names[i], name))
      return TRUE;
  return FALSE;
}

void
tdm_window_set_page (TdmWindow  *self,
                     const char *name)
{
  g_return_if_fail (TDM_IS_WINDOW (self));
  g_return_if_fail (name != NULL && tdm_window_has_page (name));

  adw_view_stack_set_visible_child_name (self->view_stack, name);
}

void
tdm_window_scaling_export (GtkWidget  *widget,
                           const char *action_name,
                           GVariant   *parameter)
{
  TdmWindow *self = TDM_WINDOW (widget);
  const char *format = g_variant_get_string (parameter, NULL);
  gboolean svg = g_str_equal (format, "svg");
  GtkFileChooser *chooser;

  chooser = tdm_window_new_chooser (self, svg ? _("Save the Scaling Chart") : _("Export the Scaling Run"),
                                    GTK_FILE_CHOOSER_ACTION_SAVE, _("_Save"));
  gtk_file_chooser_set_current_name (chooser, svg ? "tandem-scaling.svg" : "tandem-scaling.csv");
  if (svg)
    tdm_window_add_filter (chooser, _("SVG images"), "image/svg+xml", "*.svg");
  else
    tdm_window_add_filter (chooser, _("CSV files"), "text/csv", "*.csv");
  g_object_set_data_full (G_OBJECT (chooser), "target",
                          g_strdup (svg ? "scaling:svg" : "scaling:csv"), g_free);
  g_signal_connect_object (chooser, "response", G_CALLBACK (tdm_window_export_chosen),
                           self, G_CONNECT_SWAPPED);
  gtk_native_dialog_show (self->chooser);
}
