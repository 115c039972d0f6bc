/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-devices-page.c: the "Devices" page: timeline, batch strip and memory table.
 *
 * The frame is a template (tdm-devices-page.ui); the tables' rows, one per device
 * and known only once a run is chosen, are built here. The memory table holds what the engine said (tdm-memory.h's estimate and
 * the DEVICES events' byte counters); the page adds nothing of its own but the peak,
 * the largest of the counters seen.
 */

#include "tdm-devices-page.h"

#include <adwaita.h>
#include <glib/gi18n.h>
#include <math.h>
#include <string.h>

#include "tdm-batch-strip.h"
#include "tdm-table-scroller.h"
#include "tdm-format.h"
#include "tdm-timeline.h"

struct _TdmDevicesPage
{
  GtkWidget       parent_instance;

  TdmSession     *session;
  gulong          session_event;
  TdmPhaseStats  *no_stats;            /* what the table shows without a session */

  GtkWidget      *scroller;
  GtkWidget      *timeline;
  GtkWidget      *batch_strip;
  GtkWidget      *memory_grid;
  GtkWidget      *warning_label;
  GtkWidget      *memory_note;
  GtkWidget      *phase_grid;
  GtkWidget      *reference_caption;   /* under the timeline, while it compares */
  char           *reference_text;      /* the reference's caption (NULL: none) */
  gboolean        comparing;           /* two runs side by side on the timeline */

  /* The run's devices in the phase table (0 once cleared: the table goes until the
   * next run starts); its figures are the session's (TdmPhaseStats). */
  int             phase_replicas;
  int             main_replica;
  char            device_name[TDM_MAX_REPLICAS][48];
  gboolean        presentation;
  GtkWidget      *overlap_cell[TDM_MAX_REPLICAS][2];
  /* The phase table as built: which phases have columns, and their number cells, so
   * that a new step changes texts instead of rebuilding the table. */
  guint           phase_mask;
  gboolean        phases_stale;   /* figures arrived while the page was not shown */
  GtkWidget      *phase_cell[TDM_MAX_REPLICAS][TDM_PHASE_COUNT];
  /* The cells of the bytes the last timed step's collectives moved out of and into
   * each device (the engine counts them: tdm-communicator.h). */
  GtkWidget      *bytes_cell[TDM_MAX_REPLICAS][2];

  TdmMemoryEvent  estimate;
  gboolean        has_estimate;
  gint64          peak[TDM_MAX_REPLICAS];
  /* The driver's figure for the whole GPU (context, libraries, every process and
   * every replica on it), highest seen; −1 when the device gives none (CPU). */
  gint64          device_peak[TDM_MAX_REPLICAS];
  int             replicas;
  char           *warning;
};

G_DEFINE_FINAL_TYPE (TdmDevicesPage, tdm_devices_page, GTK_TYPE_WIDGET)

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
static const TdmPhaseStats *
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
static void
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
static void
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

void
tdm_devices_page_set_estimate (TdmDevicesPage       *self,
                               const TdmMemoryEvent *estimate,
                               const char           *reason,
                               gboolean              fits,
                               int                   largest_batch)
{
  g_return_if_fail (TDM_IS_DEVICES_PAGE (self));

  g_clear_pointer (&self->warning, g_free);
  if (estimate == NULL)
    {
      self->has_estimate = FALSE;
      self->replicas = 0;
      gtk_label_set_label (GTK_LABEL (self->memory_note),
                           reason ? reason : _("The estimate appears once the choices make a run."));
    }
  else
    {
      self->estimate = *estimate;
      self->has_estimate = TRUE;
      self->replicas = CLAMP (estimate->replicas, 0, TDM_MAX_REPLICAS);
      gtk_label_set_label (GTK_LABEL (self->memory_note),
                           _("The estimate is what the engine will allocate for these choices; "
                             "the peak is what it held while the run trained. On a GPU, "
                             "“GPU in use” is the driver’s count for the whole device: "
                             "it adds the CUDA context and libraries, and other programs "
                             "and replicas on the same GPU."));
      if (!fits)
        {
          if (largest_batch > 0)
            /* Translators: %d is the largest global batch that fits the devices */
            self->warning = g_strdup_printf (_("This run will not fit in memory. The largest batch that fits is %d."),
                                             largest_batch);
          else
            self->warning = g_strdup (_("This run will not fit in memory, not even with a batch of one. Try a smaller network or fewer workers."));
        }
    }
  gtk_label_set_label (GTK_LABEL (self->warning_label), self->warning ? self->warning : "");
  gtk_widget_set_visible (self->warning_label, self->warning != NULL);
  tdm_devices_page_fill_memory (self);
}

void
tdm_devices_page_set_reference (TdmDevicesPage       *self,
                                const TdmPhasesEvent *step,
                                const char           *title,
                                const TdmConfig      *config)
{
  char *names[TDM_MAX_REPLICAS + 1] = { NULL };

  g_return_if_fail (TDM_IS_DEVICES_PAGE (self));

  if (step != NULL && config != NULL)
    {
      TdmStartedEvent started = { 0 };

      /* Its devices named as this run's are: "cpu 1", "cuda:0". */
      tdm_started_event_set_devices (&started, config->devices,
                                     MIN (tdm_config_replica_count (config), TDM_MAX_REPLICAS));
      for (int r = 0; r < started.replicas && r < step->replicas; r++)
        names[r] = tdm_format_replica (&started, r);
    }
  tdm_timeline_set_reference (TDM_TIMELINE (self->timeline), step,
                              (const char *const *) names);
  for (int r = 0; r < TDM_MAX_REPLICAS; r++)
    g_free (names[r]);

  if (step != NULL)
    {
      /* Translators: under the Devices timeline when an earlier run is ticked in the
       * history; %s is that run's name and strategy */
      g_free (self->reference_text);
      self->reference_text = g_strdup_printf (_("Above the line: this run’s last sampled step. Below it: “%s”, its mean step from the run history, on the same time axis. Another ticked run goes there with “Show under the Timeline” in its History menu."),
                                              title != NULL ? title : "");
    }
  else
    g_clear_pointer (&self->reference_text, g_free);
  /* A comparison shown keeps its caption. */
  if (self->comparing)
    return;
  gtk_label_set_label (GTK_LABEL (self->reference_caption),
                       self->reference_text != NULL ? self->reference_text : "");
  gtk_widget_set_visible (self->reference_caption, self->reference_text != NULL);
}

void
tdm_devices_page_set_comparison (TdmDevicesPage       *self,
                                 const TdmTimelineRun *above,
                                 const TdmTimelineRun *below,
                                 const char           *caption)
{
  TdmTimeline *timeline;
  int lanes = 0;

  g_return_if_fail (TDM_IS_DEVICES_PAGE (self));

  timeline = TDM_TIMELINE (self->timeline);
  tdm_timeline_set_comparison (timeline, above, below);
  self->comparing = tdm_timeline_has_comparison (timeline);
  if (self->comparing)
    lanes = above->step->replicas + below->step->replicas;
  /* Two lines a lane (the device and its overlap) and two titles need the room. */
  gtk_widget_set_size_request (self->timeline, 240, MAX (220, 120 + 34 * lanes));
  if (self->comparing)
    {
      gtk_label_set_label (GTK_LABEL (self->reference_caption), caption != NULL ? caption : "");
      gtk_widget_set_visible (self->reference_caption, caption != NULL);
    }
  else
    {
      gtk_label_set_label (GTK_LABEL (self->reference_caption),
                           self->reference_text != NULL ? self->reference_text : "");
      gtk_widget_set_visible (self->reference_caption, self->reference_text != NULL);
    }
}

void
tdm_devices_page_clear (TdmDevicesPage *self)
{
  g_return_if_fail (TDM_IS_DEVICES_PAGE (self));

  for (int r = 0; r < TDM_MAX_REPLICAS; r++)
    self->peak[r] = self->device_peak[r] = -1;
  tdm_timeline_clear (TDM_TIMELINE (self->timeline));
  tdm_batch_strip_clear (TDM_BATCH_STRIP (self->batch_strip));
  if (self->comparing)
    tdm_devices_page_set_comparison (self, NULL, NULL, NULL);
  self->phase_mask = 0;
  self->phases_stale = FALSE;
  self->phase_replicas = 0;
  tdm_devices_page_fill_phases (self);
  tdm_devices_page_fill_memory (self);
}

void
tdm_devices_page_handle_event (TdmDevicesPage       *self,
                               const TdmEvent       *event,
                               const TdmDatasetPair *data)
{
  g_return_if_fail (TDM_IS_DEVICES_PAGE (self));
  g_return_if_fail (event != NULL);

  switch (event->kind)
    {
    case TDM_EVENT_MEMORY:
      for (int r = 0; r < TDM_MAX_REPLICAS; r++)
        self->peak[r] = self->device_peak[r] = -1;
      /* The run's own estimate, computed with the dataset loaded, replaces ours. */
      tdm_devices_page_set_estimate (self, &event->memory, NULL, TRUE, 0);
      break;

    case TDM_EVENT_STARTED:
      tdm_timeline_clear (TDM_TIMELINE (self->timeline));
      /* A new run is shown, not the last comparison. */
      if (self->comparing)
        tdm_devices_page_set_comparison (self, NULL, NULL, NULL);
      tdm_batch_strip_clear (TDM_BATCH_STRIP (self->batch_strip));
      tdm_timeline_set_main_device (TDM_TIMELINE (self->timeline), event->started.main_replica);
      tdm_batch_strip_set_main_device (TDM_BATCH_STRIP (self->batch_strip),
                                       event->started.main_replica);
      self->phase_mask = 0;
      self->phases_stale = FALSE;
      self->phase_replicas = CLAMP (event->started.replicas, 0, TDM_MAX_REPLICAS);
      self->main_replica = event->started.main_replica;
      for (int r = 0; r < self->phase_replicas; r++)
        {
          /* Named as every page names them: "cpu 1", "cuda:0". */
          g_autofree char *name = tdm_format_replica (&event->started, r);

          g_strlcpy (self->device_name[r], name, sizeof self->device_name[r]);
          tdm_timeline_set_lane_name (TDM_TIMELINE (self->timeline), r, name);
          tdm_batch_strip_set_device_name (TDM_BATCH_STRIP (self->batch_strip), r, name);
        }
      tdm_devices_page_fill_phases (self);
      break;

    case TDM_EVENT_PHASES:
      tdm_timeline_add_phases (TDM_TIMELINE (self->timeline), &event->phases);
      /* A new figure in a label relays out the whole window, whether or not the
       * label is shown, a few times a second: the page not shown catches up when
       * it is (bench/NOTES.md, "main-loop wake-ups"). */
      if (gtk_widget_get_mapped (GTK_WIDGET (self)))
        tdm_devices_page_fill_phases (self);
      else
        self->phases_stale = TRUE;
      break;

    case TDM_EVENT_BATCH:
      tdm_batch_strip_set_batch (TDM_BATCH_STRIP (self->batch_strip), &event->batch,
                                 data != NULL ? data->train : NULL);
      break;

    case TDM_EVENT_DEVICES:
      {
        gboolean changed = FALSE;

        for (int r = 0; r < MIN (event->devices.replicas, TDM_MAX_REPLICAS); r++)
          {
            if (event->devices.device[r].tandem_bytes > self->peak[r])
              {
                self->peak[r] = event->devices.device[r].tandem_bytes;
                changed = TRUE;
              }
            if (event->devices.device[r].total_bytes > 0
                && event->devices.device[r].used_bytes > self->device_peak[r])
              {
                self->device_peak[r] = event->devices.device[r].used_bytes;
                changed = TRUE;
              }
          }
        if (changed)
          tdm_devices_page_fill_memory (self);
      }
      break;

    case TDM_EVENT_STEP:
    case TDM_EVENT_EPOCH:
    case TDM_EVENT_PAUSED:
    case TDM_EVENT_RESUMED:
    case TDM_EVENT_FINISHED:
    case TDM_EVENT_FAILED:
    case TDM_EVENT_PREDICTIONS:
    default:
      break;
    }
}

/* The timeline's palette for the back of the room, and for the system's high
 * contrast. */
static void
tdm_devices_page_style_changed (TdmDevicesPage *self)
{
  gboolean high_contrast = adw_is_initialized ()
                           && adw_style_manager_get_high_contrast (adw_style_manager_get_default ());

  tdm_timeline_set_high_contrast (TDM_TIMELINE (self->timeline),
                                  self->presentation || high_contrast);
}

void
tdm_devices_page_set_presentation (TdmDevicesPage *self,
                                   gboolean        presentation)
{
  g_return_if_fail (TDM_IS_DEVICES_PAGE (self));

  self->presentation = presentation;
  tdm_devices_page_style_changed (self);
  /* Taller lanes for the back of the room. */
  gtk_widget_set_size_request (self->timeline, 240, presentation ? 360 : 220);
}

GtkWidget *
tdm_devices_page_get_timeline (TdmDevicesPage *self)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), NULL);
  return self->timeline;
}

int
tdm_devices_page_get_phase_spans (TdmDevicesPage *self,
                                  int             device,
                                  TdmPhase        phase)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), 0);
  g_return_val_if_fail (phase >= 0 && phase < TDM_PHASE_COUNT, 0);

  if (device < 0 || device >= self->phase_replicas)
    return 0;
  return tdm_phase_stats_get_spans (tdm_devices_page_stats (self), device, phase);
}

double
tdm_devices_page_get_phase_ms (TdmDevicesPage *self,
                               int             device,
                               TdmPhase        phase)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), -1);
  g_return_val_if_fail (phase >= 0 && phase < TDM_PHASE_COUNT, -1);

  if (device < 0 || device >= self->phase_replicas
      || tdm_phase_stats_get_spans (tdm_devices_page_stats (self), device, phase) == 0)
    return -1;
  return tdm_phase_stats_get_mean_ms (tdm_devices_page_stats (self), device, phase);
}

/**
 * tdm_devices_page_get_bytes_shown:
 * @sent: (out): the text of the device's "sent" cell, or %NULL
 * @received: (out): the text of its "received" cell, or %NULL
 *
 * What the phase table shows a device's collectives moved in the last timed step.
 * Returns: %FALSE while the table has no such cells (no timed step yet, one device).
 */
gboolean
tdm_devices_page_get_bytes_shown (TdmDevicesPage  *self,
                                  int              device,
                                  const char     **sent,
                                  const char     **received)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), FALSE);

  if (device < 0 || device >= self->phase_replicas || self->bytes_cell[device][0] == NULL)
    return FALSE;
  if (sent != NULL)
    *sent = gtk_label_get_label (GTK_LABEL (self->bytes_cell[device][0]));
  if (received != NULL)
    *received = gtk_label_get_label (GTK_LABEL (self->bytes_cell[device][1]));
  return TRUE;
}

GtkWidget *
tdm_devices_page_get_batch_strip (TdmDevicesPage *self)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), NULL);
  return self->batch_strip;
}

int
tdm_devices_page_get_n_memory_rows (TdmDevicesPage *self)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), 0);
  return self->replicas;
}

gint64
tdm_devices_page_get_estimate_bytes (TdmDevicesPage *self,
                                     int             device)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), -1);

  if (!self->has_estimate || device < 0 || device >= self->replicas)
    return -1;
  return (gint64) self->estimate.device[device].total;
}

gint64
tdm_devices_page_get_peak_bytes (TdmDevicesPage *self,
                                 int             device)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), -1);

  if (device < 0 || device >= TDM_MAX_REPLICAS)
    return -1;
  return self->peak[device];
}

const char *
tdm_devices_page_get_memory_note (TdmDevicesPage *self)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), NULL);

  return gtk_label_get_label (GTK_LABEL (self->memory_note));
}

const char *
tdm_devices_page_get_warning (TdmDevicesPage *self)
{
  g_return_val_if_fail (TDM_IS_DEVICES_PAGE (self), NULL);
  return self->warning;
}

static void
tdm_devices_page_dispose (GObject *object)
{
  TdmDevicesPage *self = TDM_DEVICES_PAGE (object);

  tdm_devices_page_set_session (self, NULL);
  gtk_widget_dispose_template (GTK_WIDGET (self), TDM_TYPE_DEVICES_PAGE);
  g_clear_pointer (&self->warning, g_free);
  g_clear_pointer (&self->reference_text, g_free);

  G_OBJECT_CLASS (tdm_devices_page_parent_class)->dispose (object);
}

static void
tdm_devices_page_map (GtkWidget *widget)
{
  TdmDevicesPage *self = TDM_DEVICES_PAGE (widget);

  GTK_WIDGET_CLASS (tdm_devices_page_parent_class)->map (widget);
  if (self->phases_stale)
    {
      self->phases_stale = FALSE;
      tdm_devices_page_fill_phases (self);
    }
}

static void
tdm_devices_page_finalize (GObject *object)
{
  TdmDevicesPage *self = TDM_DEVICES_PAGE (object);

  tdm_phase_stats_free (self->no_stats);

  G_OBJECT_CLASS (tdm_devices_page_parent_class)->finalize (object);
}

static void
tdm_devices_page_class_init (TdmDevicesPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_devices_page_dispose;
  widget_class->map = tdm_devices_page_map;
  object_class->finalize = tdm_devices_page_finalize;
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "devicespage");

  g_type_ensure (TDM_TYPE_TIMELINE);
  g_type_ensure (TDM_TYPE_BATCH_STRIP);
  g_type_ensure (TDM_TYPE_TABLE_SCROLLER);
  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-devices-page.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmDevicesPage, scroller);
  gtk_widget_class_bind_template_child (widget_class, TdmDevicesPage, timeline);
  gtk_widget_class_bind_template_child (widget_class, TdmDevicesPage, batch_strip);
  gtk_widget_class_bind_template_child (widget_class, TdmDevicesPage, memory_grid);
  gtk_widget_class_bind_template_child (widget_class, TdmDevicesPage, warning_label);
  gtk_widget_class_bind_template_child (widget_class, TdmDevicesPage, memory_note);
  gtk_widget_class_bind_template_child (widget_class, TdmDevicesPage, phase_grid);
}

static void
tdm_devices_page_init (TdmDevicesPage *self)
{
  /* On the heap: a GObject's instance must stay under 64 KiB. */
  for (int r = 0; r < TDM_MAX_REPLICAS; r++)
    self->peak[r] = self->device_peak[r] = -1;

  gtk_widget_init_template (GTK_WIDGET (self));
  self->reference_caption = gtk_label_new (NULL);
  gtk_label_set_wrap (GTK_LABEL (self->reference_caption), TRUE);
  gtk_label_set_xalign (GTK_LABEL (self->reference_caption), 0);
  gtk_widget_add_css_class (self->reference_caption, "dim-label");
  gtk_widget_set_visible (self->reference_caption, FALSE);
  gtk_widget_insert_after (self->reference_caption, gtk_widget_get_parent (self->timeline),
                           self->timeline);
  self->no_stats = tdm_phase_stats_new ();
  tdm_devices_page_set_estimate (self, NULL, NULL, TRUE, 0);
  if (adw_is_initialized ())
    g_signal_connect_object (adw_style_manager_get_default (), "notify::high-contrast",
                             G_CALLBACK (tdm_devices_page_style_changed), self, G_CONNECT_SWAPPED);
  tdm_devices_page_style_changed (self);
}

GtkWidget *
tdm_devices_page_new (void)
{
  return g_object_new (TDM_TYPE_DEVICES_PAGE, NULL);
}

static void
tdm_devices_page_session_event (TdmSession     *session,
                                const TdmEvent *event,
                                TdmDevicesPage *self)
{
  tdm_devices_page_handle_event (self, event, tdm_session_get_dataset (session));
}

void
tdm_devices_page_set_session (TdmDevicesPage *self,
                              TdmSession     *session)
{
  g_return_if_fail (TDM_IS_DEVICES_PAGE (self));
  g_return_if_fail (session == NULL || TDM_IS_SESSION (session));

  if (self->session != NULL)
    g_clear_signal_handler (&self->session_event, self->session);
  g_set_object (&self->session, session);
  if (session != NULL)
    self->session_event = g_signal_connect (session, "event",
                                            G_CALLBACK (tdm_devices_page_session_event), self);
}
