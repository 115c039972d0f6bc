/* tdm-history-sweep.c: a kept scaling run in a window of its own.
 *
 * Built in code: a header bar titled with the run's name (bound, so a rename from the
 * History page shows at once), then in a scrolling column the settings line, how it
 * ended, the chart and the table. The chart and table are filled once from the
 * record: a kept sweep does not change.
 */

#include <glib/gi18n.h>

#include "tdm-format.h"
#include "tdm-history-sweep.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling-table.h"

struct _TdmHistorySweep
{
  AdwWindow   parent_instance;

  TdmRunItem *item;
  GtkWidget  *chart;
  GtkWidget  *table;
};

G_DEFINE_FINAL_TYPE (TdmHistorySweep, tdm_history_sweep, ADW_TYPE_WINDOW)

static void
tdm_history_sweep_dispose (GObject *object)
{
  TdmHistorySweep *self = TDM_HISTORY_SWEEP (object);

  g_clear_object (&self->item);

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

/* "fc16,relu,fc10 on synthetic · strong scaling, 200 steps per device count": what the
 * description under the title does not say already. */
static char *
describe_settings (const TdmRunRecord *r)
{
  const char *mode = r->sweep.mode == TDM_SCALING_WEAK
                     /* Translators: a scaling run that keeps the batch per device */
                     ? _("weak scaling: the same batch per device")
                     /* Translators: a scaling run that keeps the global batch */
                     : _("strong scaling: the same global batch");

  /* Translators: a kept scaling run's settings: network, dataset, the scaling mode
   * and the steps measured at each device count */
  return g_strdup_printf (_("%s on %s · %s · %ld steps per device count"),
                          r->config->network, r->config->dataset, mode, r->sweep.steps);
}

static char *
describe_end (const TdmRunRecord *r)
{
  guint n = r->sweep.points->len;

  if (r->failed)
    {
      g_autofree char *sentence = tdm_format_sentence (r->error != NULL ? r->error : "");

      /* Translators: a kept scaling run failed; %s says why */
      return g_strdup_printf (_("It failed: %s"), sentence);
    }
  if (r->finished && r->final.stopped)
    /* Translators: a kept scaling run was cancelled; %u points of %d */
    return g_strdup_printf (_("Cancelled after %u of %d device counts."), n, r->sweep.count);
  if (!r->finished)
    /* Translators: a kept scaling run whose file ends early (a crash) */
    return g_strdup_printf (_("Its record ends after %u of %d device counts."), n, r->sweep.count);
  return NULL;
}

GtkWidget *
tdm_history_sweep_new (GtkWindow  *parent,
                       TdmRunItem *item)
{
  TdmHistorySweep *self;
  const TdmRunRecord *r;
  GtkWidget *toolbar, *header, *title, *scroller, *clamp, *box, *label, *table_scroller;
  g_autofree char *subtitle = NULL;
  g_autofree char *settings = NULL;
  g_autofree char *end = NULL;

  g_return_val_if_fail (TDM_IS_RUN_ITEM (item), NULL);
  g_return_val_if_fail (tdm_run_item_is_sweep (item), NULL);

  self = g_object_new (TDM_TYPE_HISTORY_SWEEP,
                       "transient-for", parent,
                       "default-width", 760,
                       "default-height", 640,
                       NULL);
  self->item = g_object_ref (item);
  r = tdm_run_item_get_record (item);

  toolbar = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  header = adw_header_bar_new ();
  subtitle = tdm_run_item_describe (item);
  title = adw_window_title_new (tdm_run_item_get_name (item), subtitle);
  g_object_bind_property (item, "name", title, "title", G_BINDING_DEFAULT);
  g_object_bind_property (item, "name", self, "title", G_BINDING_SYNC_CREATE);
  adw_header_bar_set_title_widget (ADW_HEADER_BAR (header), title);
  gtk_box_append (GTK_BOX (toolbar), header);

  scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroller), GTK_POLICY_NEVER,
                                  GTK_POLICY_AUTOMATIC);
  gtk_widget_set_vexpand (scroller, TRUE);
  gtk_box_append (GTK_BOX (toolbar), scroller);
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
  for (guint i = 0; i < r->sweep.points->len; i++)
    tdm_scaling_chart_add_point (TDM_SCALING_CHART (self->chart),
                                 &g_array_index (r->sweep.points, TdmScalingPoint, i));
  gtk_box_append (GTK_BOX (box), self->chart);

  self->table = tdm_scaling_table_new ();
  tdm_scaling_table_set_points (self->table,
                                (const TdmScalingPoint *) r->sweep.points->data,
                                r->sweep.points->len);
  table_scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (table_scroller),
                                  GTK_POLICY_AUTOMATIC, GTK_POLICY_NEVER);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (table_scroller), self->table);
  gtk_box_append (GTK_BOX (box), table_scroller);

  adw_window_set_content (ADW_WINDOW (self), toolbar);
  return GTK_WIDGET (self);
}

TdmRunItem *
tdm_history_sweep_get_item (TdmHistorySweep *self)
{
  g_return_val_if_fail (TDM_IS_HISTORY_SWEEP (self), NULL);

  return self->item;
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
