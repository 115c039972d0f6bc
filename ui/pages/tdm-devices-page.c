/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-devices-page.c: the "Devices" page: timeline, batch strip and memory table.
 *
 * The frame is a template (tdm-devices-page.ui); the tables' rows, one per device
 * and known only once a run is chosen, are built in tdm-devices-page-tables.c. The
 * memory table holds what the engine said (tdm-memory.h's estimate and the DEVICES
 * events' byte counters); the page adds nothing of its own but the peak, the largest
 * of the counters seen.
 */

#include "tdm-devices-page.h"
#include "tdm-devices-page-private.h"

#include <adwaita.h>
#include <glib/gi18n.h>

#include "tdm-batch-strip.h"
#include "tdm-table-scroller.h"
#include "tdm-format.h"
#include "tdm-timeline.h"

G_DEFINE_FINAL_TYPE (TdmDevicesPage, tdm_devices_page, GTK_TYPE_WIDGET)

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
