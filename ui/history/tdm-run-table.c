/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-table.c: the comparison table of the run history.
 *
 * Cells are labels filled from tdm_run_table_cell_text(), the one place that turns a
 * record into the table's words, so tests read the table without widgets. The
 * speed-up depends on the baseline, and is only given for runs of the baseline's
 * network and data (tdm_run_record_same_work): when it changes the view is given
 * its model again, which rebinds every visible cell (there are a few dozen runs, not
 * thousands). Compute, communication and wait are the engine's mean per step over
 * the run (tdm_run_record_device_means); memory is the most each device held.
 */

#include <math.h>
#include <glib/gi18n.h>

#include "tdm-format.h"
#include "tdm-run-table.h"

struct _TdmRunTable
{
  GtkWidget        parent_instance;

  TdmHistoryStore *store;
  GtkColumnView   *view;
  GtkFilter       *filter;        /* which runs the table compares */
};

G_DEFINE_FINAL_TYPE (TdmRunTable, tdm_run_table, GTK_TYPE_WIDGET)

static const char *const titles[TDM_RUN_TABLE_N_COLUMNS] = {
  N_("Run"),
  N_("Network"),
  N_("Devices"),
  N_("Strategy"),
  N_("Batch"),
  N_("Time"),
  N_("Samples/s"),
  N_("Final loss"),
  N_("Accuracy"),
  N_("Speed-up"),
  /* Translators: a column: compute time per step, in ms */
  N_("Compute ms"),
  /* Translators: a column: communication time per step, in ms */
  N_("Comm. ms"),
  /* Translators: a column: time spent waiting per step, in ms */
  N_("Wait ms"),
  /* Translators: a column: milliseconds in each phase of a step (forward, backward,
   * all-reduce…), the mean over the devices */
  N_("Phases, ms"),
  /* Translators: a column: the most memory each device held */
  N_("Memory/device"),
  /* Translators: a column: bytes each device sent and received per step */
  N_("Traffic/device"),
};

static double
record_time (const TdmRunRecord *r)
{
  if (r->finished && isfinite (r->final.elapsed))
    return r->final.elapsed;
  if (r->points->len > 0)
    return g_array_index (r->points, TdmHistoryPoint, r->points->len - 1).elapsed;
  return NAN;
}

/* The most each device held, in replica order: "59 MiB · 59 MiB"; with `main` the
 * main device's optimizer state shows as a larger first figure. */
static char *
peak_memory (const TdmRunRecord *r)
{
  gint64 peak[TDM_MAX_REPLICAS];
  int devices = 0;
  g_autoptr(GString) text = g_string_new (NULL);

  for (int d = 0; d < TDM_MAX_REPLICAS; d++)
    peak[d] = -1;
  for (guint i = 0; i < r->device_points->len; i++)
    {
      const TdmHistoryDevicePoint *p = &g_array_index (r->device_points,
                                                       TdmHistoryDevicePoint, i);

      if (p->device < 0 || p->device >= TDM_MAX_REPLICAS)
        continue;
      peak[p->device] = MAX (peak[p->device], p->tandem_bytes);
      devices = MAX (devices, p->device + 1);
    }
  for (int d = 0; d < devices; d++)
    {
      g_autofree char *size = tdm_format_size (peak[d], G_FORMAT_SIZE_IEC_UNITS);

      if (d > 0)
        g_string_append (text, " · ");
      g_string_append (text, size);
    }
  return devices > 0 ? g_string_free (g_steal_pointer (&text), FALSE) : g_strdup ("—");
}

/* "forward 0.12 · backward 0.20 · all-reduce 0.05 · update 0.01": the phases a step
 * spent time in, the mean over devices, named as the timeline names them. With
 * `main` the reduce, the update on the main device and the broadcast show as such. */
static char *
phase_text (const TdmRunRecord *r)
{
  double ms[TDM_PHASE_COUNT];
  g_autoptr(GString) text = g_string_new (NULL);

  if (tdm_run_record_phase_means (r, -1, ms) == 0)
    return g_strdup ("—");
  for (int k = 0; k < TDM_PHASE_COUNT; k++)
    {
      if (!(ms[k] > 0))
        continue;
      if (text->len > 0)
        g_string_append (text, " · ");
      g_string_append_printf (text, "%s %.2f", tdm_format_phase (k), ms[k]);
    }
  return text->len > 0 ? g_string_free (g_steal_pointer (&text), FALSE) : g_strdup ("—");
}

/* Bytes each device's collectives moved per step, out ↑ and in ↓, in replica order:
 * "↑ 7.2 MB ↓ 7.2 MB · ↑ 7.2 MB ↓ 7.2 MB"; with `main` on CPU workers the main
 * device's figures are N−1 times the others'. */
static char *
traffic_text (const TdmRunRecord *r)
{
  g_autoptr(GString) text = g_string_new (NULL);

  for (int d = 0; d < r->replicas && d < TDM_MAX_REPLICAS; d++)
    {
      guint64 sent, received;
      g_autofree char *out = NULL;
      g_autofree char *in = NULL;

      if (!tdm_run_record_bytes_per_step (r, d, &sent, &received))
        return g_strdup ("—");
      out = tdm_format_size ((gint64) sent, G_FORMAT_SIZE_DEFAULT);
      in = tdm_format_size ((gint64) received, G_FORMAT_SIZE_DEFAULT);
      if (d > 0)
        g_string_append (text, " · ");
      g_string_append_printf (text, "↑ %s ↓ %s", out, in);
    }
  return text->len > 0 ? g_string_free (g_steal_pointer (&text), FALSE) : g_strdup ("—");
}

static char *
number (double value,
        int    digits)
{
  if (!isfinite (value))
    return g_strdup ("—");
  return g_strdup_printf ("%.*f", digits, value);
}

char *
tdm_run_table_cell_text (TdmRunItem        *item,
                         TdmRunItem        *baseline,
                         TdmRunTableColumn  column)
{
  const TdmRunRecord *r;

  g_return_val_if_fail (TDM_IS_RUN_ITEM (item), NULL);

  r = tdm_run_item_get_record (item);
  switch (column)
    {
    case TDM_RUN_TABLE_NAME:
      return g_strdup (r->name);
    case TDM_RUN_TABLE_NETWORK:
      return g_strdup (r->config->network);
    case TDM_RUN_TABLE_DEVICES:
      return tdm_run_item_format_devices (item);
    case TDM_RUN_TABLE_STRATEGY:
      return g_strdup (tdm_strategy_name (r->config->strategy));
    case TDM_RUN_TABLE_BATCH:
      return g_strdup_printf ("%d", r->config->batch);
    case TDM_RUN_TABLE_TIME:
      {
        double t = record_time (r);

        return isfinite (t) ? g_strdup_printf ("%.1f s", t) : g_strdup ("—");
      }
    case TDM_RUN_TABLE_SAMPLES_PER_SECOND:
      {
        double sps = tdm_run_record_samples_per_second (r);

        return sps > 0 ? tdm_format_count (sps) : g_strdup ("—");
      }
    case TDM_RUN_TABLE_LOSS:
      return number (r->finished && isfinite (r->final.test_loss)
                     ? r->final.test_loss : tdm_run_record_final_train_loss (r), 4);
    case TDM_RUN_TABLE_ACCURACY:
      if (r->finished && isfinite (r->final.test_accuracy))
        return g_strdup_printf ("%.1f %%", 100.0 * r->final.test_accuracy);
      return g_strdup ("—");
    case TDM_RUN_TABLE_SPEEDUP:
      {
        double ours = tdm_run_record_samples_per_second (r);
        /* Only like with like: another network's samples cost another amount. */
        double theirs = baseline != NULL &&
                        tdm_run_record_same_work (r, tdm_run_item_get_record (baseline))
                        ? tdm_run_record_samples_per_second (tdm_run_item_get_record (baseline))
                        : 0;

        if (ours > 0 && theirs > 0)
          return g_strdup_printf ("%.2f×", ours / theirs);
        return g_strdup ("—");
      }
    case TDM_RUN_TABLE_COMPUTE:
    case TDM_RUN_TABLE_COMMUNICATION:
    case TDM_RUN_TABLE_WAIT:
      {
        double ms[3];

        tdm_run_record_device_means (r, -1, ms);
        return number (ms[column - TDM_RUN_TABLE_COMPUTE], 2);
      }
    case TDM_RUN_TABLE_PHASES:
      return phase_text (r);
    case TDM_RUN_TABLE_MEMORY:
      return peak_memory (r);
    case TDM_RUN_TABLE_TRAFFIC:
      return r->replicas > 1 ? traffic_text (r) : g_strdup ("—");
    case TDM_RUN_TABLE_N_COLUMNS:
    default:
      g_return_val_if_reached (NULL);
    }
}

static void
setup_cell (GtkSignalListItemFactory *factory,
            GtkListItem              *list_item,
            gpointer                  user_data)
{
  TdmRunTableColumn column = GPOINTER_TO_INT (user_data);
  GtkWidget *label = gtk_label_new (NULL);

  /* Names read from the left, figures line up on the right. */
  gtk_label_set_xalign (GTK_LABEL (label), column <= TDM_RUN_TABLE_STRATEGY ? 0 : 1);
  /* A name is the row's whole point: never cut; the table scrolls sideways. A
   * custom network's spec can run to hundreds of characters: it wraps at its
   * commas instead. */
  if (column == TDM_RUN_TABLE_NAME)
    gtk_label_set_width_chars (GTK_LABEL (label), 12);
  else if (column == TDM_RUN_TABLE_NETWORK)
    {
      gtk_label_set_wrap (GTK_LABEL (label), TRUE);
      gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
      gtk_label_set_max_width_chars (GTK_LABEL (label), 32);
    }
  else
    gtk_widget_add_css_class (label, "numeric");
  gtk_list_item_set_child (list_item, label);
}

static void
bind_cell (GtkSignalListItemFactory *factory,
           GtkListItem              *list_item,
           gpointer                  user_data)
{
  TdmRunTable *self = g_object_get_data (G_OBJECT (factory), "table");
  TdmRunTableColumn column = GPOINTER_TO_INT (user_data);
  TdmRunItem *item = gtk_list_item_get_item (list_item);
  g_autofree char *text = NULL;

  text = tdm_run_table_cell_text (item, tdm_history_store_get_baseline (self->store), column);
  gtk_label_set_label (GTK_LABEL (gtk_list_item_get_child (list_item)), text);
  /* A rename shows at once, not at the next reload. */
  if (column == TDM_RUN_TABLE_NAME)
    g_object_set_data (G_OBJECT (gtk_list_item_get_child (list_item)), "tdm-binding",
                       g_object_bind_property (item, "name", gtk_list_item_get_child (list_item),
                                               "label", G_BINDING_DEFAULT));
}

static void
unbind_cell (GtkSignalListItemFactory *factory,
             GtkListItem              *list_item,
             gpointer                  user_data)
{
  TdmRunTableColumn column = GPOINTER_TO_INT (user_data);
  GtkWidget *label = gtk_list_item_get_child (list_item);
  GBinding *binding;

  if (column != TDM_RUN_TABLE_NAME || label == NULL)
    return;
  binding = g_object_steal_data (G_OBJECT (label), "tdm-binding");
  if (binding != NULL)
    g_binding_unbind (binding);
}

gboolean
tdm_run_table_compares (TdmRunItem *item,
                        gboolean    any_ticked)
{
  const TdmRunRecord *r;

  g_return_val_if_fail (TDM_IS_RUN_ITEM (item), FALSE);

  r = tdm_run_item_get_record (item);
  /* Experiments have none of these columns (no loss, no accuracy; a sweep's one figure
   * per device count rather than per run): a sweep shows its own table when opened,
   * a comparison's runs are rows of their own. */
  if (tdm_run_item_is_experiment (item))
    return FALSE;
  /* A run that failed or ended before its first step has no figures to compare. */
  if (r->failed || (r->finished && r->final.steps <= 0))
    return FALSE;
  return !any_ticked || tdm_run_item_get_overlay (item);
}

static gboolean
tdm_run_table_filter_func (gpointer item,
                           gpointer user_data)
{
  TdmRunTable *self = user_data;
  g_autoptr(GPtrArray) ticked = tdm_history_store_get_overlays (self->store);

  return tdm_run_table_compares (item, ticked->len > 0);
}

static void
tdm_run_table_rebind (TdmRunTable *self)
{
  GtkFilterListModel *runs = gtk_filter_list_model_new (g_object_ref (G_LIST_MODEL (self->store)),
                                                        g_object_ref (self->filter));
  g_autoptr(GtkNoSelection) selection = gtk_no_selection_new (G_LIST_MODEL (runs));

  gtk_column_view_set_model (self->view, GTK_SELECTION_MODEL (selection));
}

static void
tdm_run_table_ticks_changed (TdmRunTable *self)
{
  gtk_filter_changed (self->filter, GTK_FILTER_CHANGE_DIFFERENT);
}

static void
tdm_run_table_dispose (GObject *object)
{
  TdmRunTable *self = TDM_RUN_TABLE (object);

  if (self->view != NULL)
    gtk_widget_unparent (GTK_WIDGET (self->view));
  self->view = NULL;
  g_clear_object (&self->filter);
  g_clear_object (&self->store);

  G_OBJECT_CLASS (tdm_run_table_parent_class)->dispose (object);
}

static void
tdm_run_table_class_init (TdmRunTableClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_run_table_dispose;
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "runtable");
}

static void
tdm_run_table_init (TdmRunTable *self)
{
  self->view = GTK_COLUMN_VIEW (gtk_column_view_new (NULL));
  gtk_column_view_set_show_column_separators (self->view, TRUE);
  gtk_column_view_set_reorderable (self->view, FALSE);
  gtk_widget_add_css_class (GTK_WIDGET (self->view), "data-table");
  gtk_widget_set_parent (GTK_WIDGET (self->view), GTK_WIDGET (self));

  for (int c = 0; c < TDM_RUN_TABLE_N_COLUMNS; c++)
    {
      GtkListItemFactory *factory = gtk_signal_list_item_factory_new ();
      GtkColumnViewColumn *column;

      g_object_set_data (G_OBJECT (factory), "table", self);
      g_signal_connect (factory, "setup", G_CALLBACK (setup_cell), GINT_TO_POINTER (c));
      g_signal_connect (factory, "bind", G_CALLBACK (bind_cell), GINT_TO_POINTER (c));
      g_signal_connect (factory, "unbind", G_CALLBACK (unbind_cell), GINT_TO_POINTER (c));
      column = gtk_column_view_column_new (_(titles[c]), factory);
      gtk_column_view_column_set_expand (column, c == TDM_RUN_TABLE_NAME);
      gtk_column_view_column_set_resizable (column, TRUE);
      gtk_column_view_append_column (self->view, column);
      g_object_unref (column);
    }
}

GtkWidget *
tdm_run_table_new (TdmHistoryStore *store)
{
  TdmRunTable *self;

  g_return_val_if_fail (TDM_IS_HISTORY_STORE (store), NULL);

  self = g_object_new (TDM_TYPE_RUN_TABLE, NULL);
  self->store = g_object_ref (store);
  self->filter = GTK_FILTER (gtk_custom_filter_new (tdm_run_table_filter_func, self, NULL));
  tdm_run_table_rebind (self);
  g_signal_connect_object (store, "overlays-changed",
                           G_CALLBACK (tdm_run_table_ticks_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (store, "baseline-changed",
                           G_CALLBACK (tdm_run_table_rebind), self, G_CONNECT_SWAPPED);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->view),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, _("Comparison of runs"), -1);

  return GTK_WIDGET (self);
}
