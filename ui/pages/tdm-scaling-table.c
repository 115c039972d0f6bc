/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling-table.c: a scaling sweep's points as a table of labels.
 *
 * A GtkGrid rebuilt whole on each change: a sweep has a handful of points (one per
 * device count), so there is nothing to gain from a list model here. Numbers are
 * right-aligned in tabular figures ("numeric"); memory is each device's peak in
 * replica order, as the run comparison table writes it.
 */

#include <glib/gi18n.h>

#include "tdm-format.h"
#include "tdm-scaling-table.h"

static const char *const headers[] = {
  N_("Devices"), N_("Batch"), N_("Samples/s"),
  /* Translators: columns: the speed-up over one device (a factor, 1.75×) and the
   * efficiency (speed-up per device, in %) */
  N_("Speed-up (×)"), N_("Efficiency (%)"),
  N_("Compute ms"), N_("Communication ms"), N_("Wait ms"),
  /* Translators: a column: the most memory each device held */
  N_("Memory/device"),
  /* Translators: columns: the slowest and fastest of a point's runs, and how many */
  N_("Samples/s, min–max"), N_("Speed-up, min–max"), N_("Runs"),
};

static GtkWidget *
cell (const char *text,
      gboolean    numeric,
      gboolean    header)
{
  GtkWidget *label = gtk_label_new (text);

  gtk_label_set_xalign (GTK_LABEL (label), numeric ? 1 : 0);
  if (numeric)
    gtk_widget_add_css_class (label, "numeric");
  if (header)
    gtk_widget_add_css_class (label, "dim-label");
  return label;
}

/* Turned, a cell wraps where the window is narrow ("Samples/s, / min–max",
 * "12,000– / 12,999"): its lines, never a cut. */
static GtkWidget *
turned_cell (GtkWidget *label,
             gboolean   turned)
{
  if (turned)
    {
      gtk_label_set_wrap (GTK_LABEL (label), TRUE);
      gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
      gtk_label_set_justify (GTK_LABEL (label), gtk_label_get_xalign (GTK_LABEL (label)) > 0.5
                                                ? GTK_JUSTIFY_RIGHT : GTK_JUSTIFY_LEFT);
    }
  return label;
}

GtkWidget *
tdm_scaling_table_new_transposed (void)
{
  GtkWidget *grid = tdm_scaling_table_new ();

  g_object_set_data (G_OBJECT (grid), "tdm-transposed", GINT_TO_POINTER (TRUE));
  gtk_grid_set_column_spacing (GTK_GRID (grid), 12);
  tdm_scaling_table_set_points (grid, NULL, 0);
  return grid;
}

GtkWidget *
tdm_scaling_table_new (void)
{
  GtkWidget *grid = gtk_grid_new ();

  gtk_grid_set_column_spacing (GTK_GRID (grid), 18);
  gtk_grid_set_row_spacing (GTK_GRID (grid), 6);
  gtk_accessible_update_property (GTK_ACCESSIBLE (grid), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Points of the scaling run"), -1);
  tdm_scaling_table_set_points (grid, NULL, 0);
  return grid;
}

static char *
memory_text (const TdmScalingPoint *p)
{
  g_autoptr(GString) text = g_string_new (NULL);

  for (int d = 0; d < p->devices && d < TDM_MAX_REPLICAS; d++)
    {
      g_autofree char *size = p->memory_bytes[d] > 0
                              ? tdm_format_size (p->memory_bytes[d], G_FORMAT_SIZE_IEC_UNITS)
                              : g_strdup ("—");

      if (d > 0)
        g_string_append (text, " · ");
      g_string_append (text, size);
    }
  return g_string_free (g_steal_pointer (&text), FALSE);
}

GStrv
tdm_scaling_table_row_text (const TdmScalingPoint *p)
{
  char **row;

  g_return_val_if_fail (p != NULL, NULL);

  row = g_new0 (char *, G_N_ELEMENTS (headers) + 1);
  row[0] = g_strdup_printf ("%d", p->devices);
  row[1] = g_strdup_printf ("%d", p->batch);
  row[2] = tdm_format_count (p->samples_per_second);
  row[3] = g_strdup_printf ("%.2f×", p->speedup);
  row[4] = g_strdup_printf ("%.0f %%", 100 * p->efficiency);
  row[5] = g_strdup_printf ("%.2f", p->compute_ms);
  row[6] = g_strdup_printf ("%.2f", p->comm_ms);
  row[7] = g_strdup_printf ("%.2f", p->wait_ms);
  row[8] = memory_text (p);
  if (p->runs > 1 && p->samples_per_second_max > 0)
    {
      g_autofree char *lo = tdm_format_count (p->samples_per_second_min);
      g_autofree char *hi = tdm_format_count (p->samples_per_second_max);

      row[9] = g_strdup_printf ("%s–%s", lo, hi);
      row[10] = g_strdup_printf ("%.2f–%.2f×", p->speedup_min, p->speedup_max);
    }
  else
    {
      row[9] = g_strdup ("—");
      row[10] = g_strdup ("—");
    }
  row[11] = g_strdup_printf ("%d", p->runs);
  return row;
}

void
tdm_scaling_table_set_points (GtkWidget             *table,
                              const TdmScalingPoint *points,
                              guint                  n)
{
  GtkWidget *child;
  gboolean turned;

  g_return_if_fail (GTK_IS_GRID (table));
  g_return_if_fail (points != NULL || n == 0);

  while ((child = gtk_widget_get_first_child (table)) != NULL)
    gtk_grid_remove (GTK_GRID (table), child);

  /* Turned: the figure's name left (not right-aligned as a number's header is). */
  turned = g_object_get_data (G_OBJECT (table), "tdm-transposed") != NULL;
  for (guint c = 0; c < G_N_ELEMENTS (headers); c++)
    gtk_grid_attach (GTK_GRID (table), turned_cell (cell (_(headers[c]), c > 0 && !turned, TRUE), turned),
                     turned ? 0 : c, turned ? c : 0, 1, 1);

  for (guint i = 0; i < n; i++)
    {
      g_auto(GStrv) texts = tdm_scaling_table_row_text (&points[i]);

      for (guint c = 0; texts[c] != NULL; c++)
        {
          /* Turned, a point's column stays narrow: each device's memory a line. */
          g_auto(GStrv) parts = turned ? g_strsplit (texts[c], " · ", -1) : NULL;
          g_autofree char *text = turned ? g_strjoinv ("\n", parts) : g_strdup (texts[c]);

          gtk_grid_attach (GTK_GRID (table), turned_cell (cell (text, c > 0 || turned, FALSE), turned),
                           turned ? i + 1 : c, turned ? c : i + 1, 1, 1);
        }
    }
}
