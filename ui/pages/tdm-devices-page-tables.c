/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-devices-page-tables.c: the Devices page's phase and memory tables.
 *
 * The phase table shows the mean milliseconds of each phase per device, the bytes
 * each device's collectives moved and the share of communication hidden under the
 * backward pass; the memory table, the engine's estimate beside the measured peaks.
 * Both are grids of labels, one row per device.
 */

#include <adwaita.h>
#include <glib/gi18n.h>
#include <math.h>
#include <string.h>

#include "tdm-devices-page-private.h"
#include "tdm-format.h"
#include "tdm-timeline.h"

static GtkWidget *
cell (const char *text,
      gboolean    numeric)
{
  GtkWidget *label = gtk_label_new (text);

  gtk_label_set_xalign (GTK_LABEL (label), numeric ? 1 : 0);
  if (numeric)
    gtk_widget_add_css_class (label, "numeric");
  return label;
}

/* The run's phases as the session took them in. */
const TdmPhaseStats *
tdm_devices_page_stats (TdmDevicesPage *self)
{
  return self->session != NULL ? tdm_session_get_phase_stats (self->session) : self->no_stats;
}

/* Bytes the device's collectives sent (k = 0) or received (1) in the last timed step. */
static guint64
tdm_devices_page_bytes (const TdmPhaseStats *stats,
                        int                  device,
                        int                  k)
{
  guint64 bytes[2];

  tdm_phase_stats_get_bytes (stats, device, &bytes[0], &bytes[1]);
  return bytes[k];
}

/* The share of the device's communication hidden under its backward pass: over the
 * window (which = 0) or in the last timed step (1). "—" where it communicated nothing. */
static char *
tdm_devices_page_overlap_text (TdmDevicesPage *self,
                               int             device,
                               int             which)
{
  double percent = tdm_phase_stats_get_overlap (tdm_devices_page_stats (self), device, which != 0);

  if (!isfinite (percent))
    return g_strdup ("—");
  return g_strdup_printf ("%.0f %%", percent);
}

/* Mean milliseconds per timed step in each phase, per device: the numbers behind the
 * timeline's boxes, so `main` and `allreduce` can be compared phase by phase. Only
 * the phases some device spent time in get a column. */
void
tdm_devices_page_fill_phases (TdmDevicesPage *self)
{
  GtkGrid *grid = GTK_GRID (self->phase_grid);
  GtkWidget *child;
  guint mask = 0;
  int column = 1;

  const TdmPhaseStats *stats = tdm_devices_page_stats (self);
  int timed_steps = self->phase_replicas > 0 ? tdm_phase_stats_get_timed_steps (stats) : 0;

  for (int p = 0; p < TDM_PHASE_COUNT; p++)
    for (int r = 0; r < self->phase_replicas; r++)
      if (tdm_phase_stats_get_spans (stats, r, p) > 0)
        mask |= 1u << p;

  gtk_widget_set_visible (self->phase_grid, timed_steps > 0);

  /* The same columns as before: only the figures change (twenty times a second). */
  if (timed_steps > 0 && mask == self->phase_mask && mask != 0)
    {
      for (int p = 0; p < TDM_PHASE_COUNT; p++)
        for (int r = 0; r < self->phase_replicas; r++)
          if (self->phase_cell[r][p] != NULL)
            {
              char text[32];

              g_snprintf (text, sizeof text, "%.2f", tdm_phase_stats_get_mean_ms (stats, r, p));
              gtk_label_set_label (GTK_LABEL (self->phase_cell[r][p]), text);
            }
      for (int r = 0; r < self->phase_replicas; r++)
        for (int k = 0; k < 2; k++)
          if (self->bytes_cell[r][k] != NULL)
            {
              g_autofree char *text = tdm_format_size ((gint64) tdm_devices_page_bytes (stats, r, k), G_FORMAT_SIZE_DEFAULT);

              gtk_label_set_label (GTK_LABEL (self->bytes_cell[r][k]), text);
            }
      for (int r = 0; r < self->phase_replicas; r++)
        for (int k = 0; k < 2; k++)
          if (self->overlap_cell[r][k] != NULL)
            {
              g_autofree char *text = tdm_devices_page_overlap_text (self, r, k);

              gtk_label_set_label (GTK_LABEL (self->overlap_cell[r][k]), text);
            }
      return;
    }

  while ((child = gtk_widget_get_first_child (self->phase_grid)) != NULL)
    gtk_grid_remove (grid, child);
  memset (self->phase_cell, 0, sizeof self->phase_cell);
  memset (self->bytes_cell, 0, sizeof self->bytes_cell);
  memset (self->overlap_cell, 0, sizeof self->overlap_cell);
  self->phase_mask = mask;
  if (timed_steps == 0)
    return;

  {
    GtkWidget *label = cell (_("ms per step"), FALSE);

    gtk_widget_add_css_class (label, "dim-label");
    gtk_grid_attach (grid, label, 0, 0, 1, 1);
  }
  for (int r = 0; r < self->phase_replicas; r++)
    {
      g_autofree char *name = r == self->main_replica
                              /* Translators: the main device's row in the phase table */
                              ? g_strdup_printf (_("%s (main)"), self->device_name[r])
                              : g_strdup (self->device_name[r]);

      gtk_grid_attach (grid, cell (name, FALSE), 0, r + 1, 1, 1);
    }
  for (int p = 0; p < TDM_PHASE_COUNT; p++)
    {
      GtkWidget *header;

      if (!(mask & (1u << p)))
        continue;
      header = cell (tdm_format_phase (p), TRUE);
      gtk_widget_add_css_class (header, "dim-label");
      gtk_grid_attach (grid, header, column, 0, 1, 1);
      for (int r = 0; r < self->phase_replicas; r++)
        {
          g_autofree char *text = g_strdup_printf ("%.2f", tdm_phase_stats_get_mean_ms (stats, r, p));

          self->phase_cell[r][p] = cell (text, TRUE);
          gtk_grid_attach (grid, self->phase_cell[r][p], column, r + 1, 1, 1);
        }
      column++;
    }

  /* What the strategy costs in traffic: `main` loads its main device, all-reduce
   * spreads the same over all of them. Only where something moves (two devices or more). */
  if (self->phase_replicas < 2)
    return;
  for (int k = 0; k < 2; k++)
    {
      /* Translators: columns of the phase table: bytes out of / into a device per step */
      GtkWidget *header = cell (k == 0 ? _("sent") : _("received"), TRUE);

      gtk_widget_add_css_class (header, "dim-label");
      gtk_grid_attach (grid, header, column, 0, 1, 1);
      for (int r = 0; r < self->phase_replicas; r++)
        {
          g_autofree char *text = tdm_format_size ((gint64) tdm_devices_page_bytes (stats, r, k), G_FORMAT_SIZE_DEFAULT);

          self->bytes_cell[r][k] = cell (text, TRUE);
          gtk_grid_attach (grid, self->bytes_cell[r][k], column, r + 1, 1, 1);
        }
      column++;
    }

  /* How much of the communication ran under backward (bucketed all-reduce on GPUs):
   * over the window, and in the last timed step. */
  for (int k = 0; k < 2; k++)
    {
      /* Translators: columns of the phase table: the share of a device's
       * communication hidden under its backward pass, mean and last step */
      GtkWidget *header = cell (k == 0 ? _("hidden") : _("hidden, last step"), TRUE);

      gtk_widget_add_css_class (header, "dim-label");
      gtk_widget_set_tooltip_text (header, _("The share of the device’s communication that ran while its backward pass was still computing, hidden from the step’s time"));
      gtk_grid_attach (grid, header, column, 0, 1, 1);
      for (int r = 0; r < self->phase_replicas; r++)
        {
          g_autofree char *text = tdm_devices_page_overlap_text (self, r, k);

          self->overlap_cell[r][k] = cell (text, TRUE);
          gtk_grid_attach (grid, self->overlap_cell[r][k], column, r + 1, 1, 1);
        }
      column++;
    }
}

/* The table, rebuilt whole: it is a handful of labels and changes once a second. */
void
tdm_devices_page_fill_memory (TdmDevicesPage *self)
{
  static const char *headers[] = {
    N_("Device"), N_("Parameters"), N_("Gradients"), N_("Optimizer"),
    N_("Activations"), N_("Workspace"), N_("Dataset"), N_("Estimate"), N_("Measured peak"),
    N_("GPU in use"),
  };
  gboolean any_gpu = FALSE;

  for (int r = 0; r < self->replicas; r++)
    any_gpu |= self->device_peak[r] >= 0;
  GtkGrid *grid = GTK_GRID (self->memory_grid);
  GtkWidget *child;

  while ((child = gtk_widget_get_first_child (self->memory_grid)) != NULL)
    gtk_grid_remove (grid, child);

  for (guint c = 0; c < G_N_ELEMENTS (headers) - (any_gpu ? 0 : 1); c++)
    {
      GtkWidget *label = cell (_(headers[c]), c > 0);

      gtk_widget_add_css_class (label, "dim-label");
      gtk_grid_attach (grid, label, c, 0, 1, 1);
    }

  for (int r = 0; r < self->replicas; r++)
    {
      const TdmMemoryDevice *d = &self->estimate.device[r];
      /* Workspace: convolution columns, pool indices, gradient buffers, the backend's
       * own scratch, and the communicator's staging buffers; the row adds up. */
      guint64 figures[] = { d->parameters, d->gradients, d->optimizer, d->activations,
                            d->workspace + d->communication, d->dataset, d->total };
      g_autofree char *name = NULL;
      g_autofree char *peak = tdm_format_size (self->peak[r], G_FORMAT_SIZE_IEC_UNITS);

      /* Translators: a row of the memory table: the device and its share of a batch */
      name = g_strdup_printf (_("%s · %d a step"), d->device, d->shard);
      gtk_grid_attach (grid, cell (name, FALSE), 0, r + 1, 1, 1);
      for (guint c = 0; c < G_N_ELEMENTS (figures); c++)
        {
          g_autofree char *text = tdm_format_size (self->has_estimate ? (gint64) figures[c] : -1,
                                                  G_FORMAT_SIZE_IEC_UNITS);

          gtk_grid_attach (grid, cell (text, TRUE), c + 1, r + 1, 1, 1);
        }
      gtk_grid_attach (grid, cell (peak, TRUE), G_N_ELEMENTS (figures) + 1, r + 1, 1, 1);
      if (any_gpu)
        {
          g_autofree char *in_use = tdm_format_size (self->device_peak[r], G_FORMAT_SIZE_IEC_UNITS);

          gtk_grid_attach (grid, cell (in_use, TRUE), G_N_ELEMENTS (figures) + 2, r + 1, 1, 1);
        }
    }
}

