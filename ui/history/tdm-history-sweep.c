/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-sweep.c: a kept scaling run in a window of its own.
 *
 * Built in code: a header bar titled with the run's name (bound, so a rename from the
 * History page shows at once), then in a scrolling column the settings line, how it
 * ended, the chart and the table, under a toast overlay for the exports' notices.
 * The chart and table are filled once from the record: a kept sweep does not change.
 */

#include <glib/gi18n.h>

#include "tdm-format.h"
#include "tdm-history-sweep.h"
#include "tdm-run-export-info.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling-page.h"
#include "tdm-scaling-table.h"

struct _TdmHistorySweep
{
  AdwWindow   parent_instance;

  TdmHistoryStore *store;
  TdmRunItem      *item;
  GtkWidget       *chart;
  GtkWidget       *table;
  AdwToastOverlay *toasts;
  GtkNativeDialog *chooser;
};

G_DEFINE_FINAL_TYPE (TdmHistorySweep, tdm_history_sweep, ADW_TYPE_WINDOW)

static void
tdm_history_sweep_dispose (GObject *object)
{
  TdmHistorySweep *self = TDM_HISTORY_SWEEP (object);

  if (self->chooser != NULL)
    gtk_native_dialog_destroy (self->chooser);
  g_clear_object (&self->chooser);
  g_clear_object (&self->item);
  g_clear_object (&self->store);

  G_OBJECT_CLASS (tdm_history_sweep_parent_class)->dispose (object);
}

static void
tdm_history_sweep_class_init (TdmHistorySweepClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_history_sweep_dispose;
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "window.close", NULL);
}

static void
tdm_history_sweep_init (TdmHistorySweep *self)
{
}

gboolean
tdm_history_sweep_export (TdmHistorySweep  *self,
                          const char       *path,
                          gboolean          svg,
                          GError          **error)
{
  const TdmRunRecord *r;
  g_autoptr(GDateTime) created = NULL;
  g_autoptr(TdmExportInfo) info = NULL;

  g_return_val_if_fail (TDM_IS_HISTORY_SWEEP (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  if (!svg)
    return tdm_history_store_export_csv (self->store, self->item, path, error);
  r = tdm_run_item_get_record (self->item);
  created = g_date_time_new_from_unix_utc (r->created);
  info = tdm_run_export_info_new (r->config, created);
  tdm_run_export_info_set_precision (info, r->config->precision, r->precision_used);
  return tdm_scaling_write_svg (TDM_SCALING_CHART (self->chart), info, path, 800, 500, error);
}

static void
tdm_history_sweep_export_chosen (TdmHistorySweep *self,
                                 int              response,
                                 GtkNativeDialog *dialog)
{
  gboolean svg = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (dialog), "svg"));
  g_autoptr(GFile) file = NULL;
  g_autofree char *path = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;

  if (response == GTK_RESPONSE_ACCEPT)
    file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
  gtk_native_dialog_destroy (dialog);
  g_clear_object (&self->chooser);
  if (file == NULL)
    return;
  path = g_file_get_path (file);
  if (path == NULL)
    text = g_strdup (_("Only folders on this computer can be written to."));
  else if (!tdm_history_sweep_export (self, path, svg, &error))
    text = tdm_format_sentence (error->message);
  else
    {
      g_autofree char *name = g_file_get_basename (file);

      /* Translators: a notice after an export; %s is the file's name */
      text = g_strdup_printf (_("Saved “%s”"), name);
    }
  adw_toast_overlay_add_toast (self->toasts, adw_toast_new (text));
}

static void
tdm_history_sweep_ask_export (GtkButton       *button,
                              TdmHistorySweep *self)
{
  gboolean svg = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (button), "svg"));
  GtkFileChooserNative *native;
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();
  g_autofree char *name = g_strdup_printf (svg ? "tandem-scaling-%s.svg" : "tandem-scaling-%s.csv",
                                           tdm_run_item_get_id (self->item));

  if (self->chooser != NULL)
    return;
  native = gtk_file_chooser_native_new (svg ? _("Save the Scaling Chart") : _("Export the Scaling Run"),
                                        GTK_WINDOW (self), GTK_FILE_CHOOSER_ACTION_SAVE,
                                        _("_Save"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (native), TRUE);
  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (native), name);
  gtk_file_filter_set_name (filter, svg ? _("SVG images") : _("CSV files"));
  gtk_file_filter_add_mime_type (filter, svg ? "image/svg+xml" : "text/csv");
  gtk_file_filter_add_pattern (filter, svg ? "*.svg" : "*.csv");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (native), filter);
  g_object_set_data (G_OBJECT (native), "svg", GINT_TO_POINTER (svg));
  self->chooser = GTK_NATIVE_DIALOG (native);
  g_signal_connect_object (native, "response", G_CALLBACK (tdm_history_sweep_export_chosen),
                           self, G_CONNECT_SWAPPED);
  gtk_native_dialog_show (self->chooser);
}

static GtkWidget *
export_button (TdmHistorySweep *self,
               const char      *icon,
               const char      *label,
               gboolean         svg)
{
  GtkWidget *button = gtk_button_new_from_icon_name (icon);

  gtk_widget_set_tooltip_text (button, label);
  gtk_accessible_update_property (GTK_ACCESSIBLE (button), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  label, -1);
  g_object_set_data (G_OBJECT (button), "svg", GINT_TO_POINTER (svg));
  g_signal_connect (button, "clicked", G_CALLBACK (tdm_history_sweep_ask_export), self);
  return button;
}

/* "fc16,relu,fc10 on synthetic · strong scaling, 200 steps per device count": what the
 * description under the title does not say already. */
static char *
describe_settings (const TdmRunRecord *r)
{
  const char *mode = r->experiment.mode == TDM_SCALING_WEAK
                     /* Translators: a scaling run that keeps the batch per device */
                     ? _("weak scaling: the same batch per device")
                     /* Translators: a scaling run that keeps the global batch */
                     : _("strong scaling: the same global batch");

  /* Translators: a kept scaling run's settings: network, dataset, the scaling mode
   * and the steps measured at each device count */
  return g_strdup_printf (_("%s on %s · %s · %ld steps per device count"),
                          r->config->network, r->config->dataset, mode, r->experiment.steps);
}

static char *
describe_end (const TdmRunRecord *r)
{
  guint n = r->experiment.points->len;

  if (r->failed)
    {
      g_autofree char *sentence = tdm_format_sentence (r->error != NULL ? r->error : "");

      /* Translators: a kept scaling run failed; %s says why */
      return g_strdup_printf (_("It failed: %s"), sentence);
    }
  if (r->finished && r->final.stopped)
    /* Translators: a kept scaling run was cancelled; %u points of %d */
    return g_strdup_printf (_("Cancelled after %u of %d device counts."), n, r->experiment.count);
  if (!r->finished)
    /* Translators: a kept scaling run whose file ends early (a crash) */
    return g_strdup_printf (_("Its record ends after %u of %d device counts."), n, r->experiment.count);
  return NULL;
}

/* The header's title and subtitle whole in its tooltip: at a phone's width both end
 * in "…". Again after a rename. */
static void
title_tooltip (TdmRunItem     *item,
               GParamSpec     *pspec,
               AdwWindowTitle *title)
{
  g_autofree char *whole = g_strdup_printf ("%s\n%s", tdm_run_item_get_name (item),
                                            adw_window_title_get_subtitle (title));

  gtk_widget_set_tooltip_text (GTK_WIDGET (title), whole);
}

GtkWidget *
tdm_history_sweep_new (GtkWindow       *parent,
                       TdmHistoryStore *store,
                       TdmRunItem      *item)
{
  TdmHistorySweep *self;
  const TdmRunRecord *r;
  GtkWidget *toolbar, *header, *title, *scroller, *clamp, *box, *label, *table_scroller;
  g_autofree char *subtitle = NULL;
  g_autofree char *settings = NULL;
  g_autofree char *end = NULL;

  g_return_val_if_fail (TDM_IS_HISTORY_STORE (store), NULL);
  g_return_val_if_fail (TDM_IS_RUN_ITEM (item), NULL);
  g_return_val_if_fail (tdm_run_item_is_sweep (item), NULL);

  self = g_object_new (TDM_TYPE_HISTORY_SWEEP,
                       "transient-for", parent,
                       "default-width", 760,
                       "default-height", 640,
                       NULL);
  self->store = g_object_ref (store);
  self->item = g_object_ref (item);
  r = tdm_run_item_get_record (item);

  toolbar = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  header = adw_header_bar_new ();
  subtitle = tdm_run_item_describe (item);
  title = adw_window_title_new (tdm_run_item_get_name (item), subtitle);
  g_object_bind_property (item, "name", title, "title", G_BINDING_DEFAULT);
  g_object_bind_property (item, "name", self, "title", G_BINDING_SYNC_CREATE);
  adw_header_bar_set_title_widget (ADW_HEADER_BAR (header), title);
  title_tooltip (item, NULL, ADW_WINDOW_TITLE (title));
  g_signal_connect_object (item, "notify::name", G_CALLBACK (title_tooltip), title, 0);
  adw_header_bar_pack_start (ADW_HEADER_BAR (header),
                             export_button (self, "x-office-spreadsheet-symbolic",
                                            _("Export the points as CSV"), FALSE));
  adw_header_bar_pack_start (ADW_HEADER_BAR (header),
                             export_button (self, "image-x-generic-symbolic",
                                            _("Export the chart as SVG"), TRUE));
  gtk_box_append (GTK_BOX (toolbar), header);

  self->toasts = ADW_TOAST_OVERLAY (adw_toast_overlay_new ());
  gtk_widget_set_vexpand (GTK_WIDGET (self->toasts), TRUE);
  gtk_box_append (GTK_BOX (toolbar), GTK_WIDGET (self->toasts));
  scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroller), GTK_POLICY_NEVER,
                                  GTK_POLICY_AUTOMATIC);
  gtk_widget_set_vexpand (scroller, TRUE);
  adw_toast_overlay_set_child (self->toasts, scroller);
  clamp = adw_clamp_new ();
  adw_clamp_set_maximum_size (ADW_CLAMP (clamp), 1000);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroller), clamp);
  box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 12);
  gtk_widget_set_margin_top (box, 18);
  gtk_widget_set_margin_bottom (box, 18);
  gtk_widget_set_margin_start (box, 12);
  gtk_widget_set_margin_end (box, 12);
  adw_clamp_set_child (ADW_CLAMP (clamp), box);

  settings = describe_settings (r);
  label = gtk_label_new (settings);
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  gtk_box_append (GTK_BOX (box), label);

  end = describe_end (r);
  if (end != NULL)
    {
      label = gtk_label_new (end);
      gtk_label_set_wrap (GTK_LABEL (label), TRUE);
      gtk_label_set_xalign (GTK_LABEL (label), 0);
      gtk_widget_add_css_class (label, r->failed ? "error" : "dim-label");
      gtk_box_append (GTK_BOX (box), label);
    }

  self->chart = tdm_scaling_chart_new ();
  gtk_widget_set_size_request (self->chart, 240, 280);
  gtk_widget_set_vexpand (self->chart, TRUE);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->chart), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Speed-up against the number of devices"), -1);
  for (guint i = 0; i < r->experiment.points->len; i++)
    tdm_scaling_chart_add_point (TDM_SCALING_CHART (self->chart),
                                 &g_array_index (r->experiment.points, TdmScalingPoint, i));
  gtk_box_append (GTK_BOX (box), self->chart);

  /* A kept sweep has a few points: a column each fits a narrow window. */
  self->table = tdm_scaling_table_new_transposed ();
  tdm_scaling_table_set_points (self->table,
                                (const TdmScalingPoint *) r->experiment.points->data,
                                r->experiment.points->len);
  table_scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (table_scroller),
                                  GTK_POLICY_AUTOMATIC, GTK_POLICY_NEVER);
  /* Wider than the window (many points), the table says so with a scrollbar that
   * stays, not one that shows only under the pointer. */
  gtk_scrolled_window_set_overlay_scrolling (GTK_SCROLLED_WINDOW (table_scroller), FALSE);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (table_scroller), self->table);
  gtk_box_append (GTK_BOX (box), table_scroller);

  adw_window_set_content (ADW_WINDOW (self), toolbar);
  return GTK_WIDGET (self);
}

GtkWidget *
tdm_history_sweep_get_chart (TdmHistorySweep *self)
{
  g_return_val_if_fail (TDM_IS_HISTORY_SWEEP (self), NULL);

  return self->chart;
}

GtkWidget *
tdm_history_sweep_get_table (TdmHistorySweep *self)
{
  g_return_val_if_fail (TDM_IS_HISTORY_SWEEP (self), NULL);

  return self->table;
}
