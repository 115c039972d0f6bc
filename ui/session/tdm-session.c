/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-session.c: the live run's model, no widget.
 *
 * Loss and accuracy are kept against both steps and epochs (fractional for the
 * training points, whole for the test points), so the views can redraw them on
 * either axis, never against the clock: a recorded run's summaries come every few
 * steps, so two runs of one configuration give the same points. Everything about
 * devices is against training time, so a stall on one device lines up with a dip in
 * throughput.
 *
 * Memory and load of a GPU come from NVML telemetry, sampled here twice a second
 * while a run uses GPUs; when NVML is missing, and always for CPU workers, they come
 * from the engine's per-device events (bytes held by Tandem, and the busy share of
 * each step as the load). Which replica runs on which GPU is read from the STARTED
 * event's device names here, and only here.
 *
 * Throughput is the engine's figure, samples over the last second of training time
 * (tdm-trainer.c says why not over one summary), passed on as it comes: the window
 * derives no rate of its own, so it shows what `tandem-train --json` prints.
 */

#include <math.h>
#include <string.h>
#include <glib/gi18n.h>

#include "tdm-format.h"
#include "tdm-run-export-info.h"
#include "tdm-session.h"
#include "tdm-telemetry.h"

#define TELEMETRY_INTERVAL_MS 500

/* The live run's loss and accuracy points, kept to give them again on another axis. */
typedef struct
{
  long     step;
  double   epoch;
  double   loss, accuracy;   /* accuracy in % */
  gboolean test;
} LivePoint;

typedef struct
{
  char   *name;
  GArray *points;            /* of TdmHistoryPoint */
} Overlay;

/* What the status line says, worked out when a view asks for it. */
typedef enum
{
  STATUS_NONE,
  STATUS_TEXT,               /* status_text, as set */
  STATUS_STARTING,
  STATUS_RUNNING,
  STATUS_FINISHED,
  STATUS_FAILED,
} StatusKind;

struct _TdmSession
{
  GObject          parent_instance;

  TdmMetricsLog   *log;
  TdmExportInfo   *next_info;   /* the settings of the run being started */
  TdmExportInfo   *info;        /* the settings of the run shown, for exports */
  const TdmDatasetPair *dataset; /* not owned: the run's */

  TdmStartedEvent  started;
  gboolean         have_started;
  TdmPhaseStats   *phases;      /* the run's sampled steps, per device */
  int              gpu[TDM_MAX_REPLICAS];          /* CUDA ordinal, or −1 */
  gboolean         shares_gpu[TDM_MAX_REPLICAS];   /* an earlier replica has its GPU */
  int              on_gpu[TDM_MAX_REPLICAS];       /* replicas on its GPU, from it on */
  gboolean         telemetry_memory[TDM_MAX_REPLICAS];
  gboolean         telemetry_load[TDM_MAX_REPLICAS];
  int              step_replica;

  TdmStepEvent     last_step;
  gboolean         paused;
  double           last_elapsed;
  gint64           last_elapsed_at;   /* monotonic µs when last_elapsed arrived */

  TdmTelemetry    *telemetry;
  guint            telemetry_source;

  StatusKind       status;
  char            *status_text;
  double           fraction;
  TdmFinishedEvent finished;

  TdmSessionXAxis  x_axis;
  GArray          *live;               /* of LivePoint */
  GPtrArray       *overlays;           /* of Overlay */
};

enum {
  SIGNAL_STARTED,
  SIGNAL_POINT,
  SIGNAL_STATUS_CHANGED,
  SIGNAL_EVENT,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (TdmSession, tdm_session, G_TYPE_OBJECT)

static void
overlay_free (gpointer data)
{
  Overlay *o = data;

  g_free (o->name);
  g_array_unref (o->points);
  g_free (o);
}

static double
tdm_session_x (TdmSession *self,
               long        step,
               double      epoch)
{
  return self->x_axis == TDM_SESSION_X_STEP ? (double) step : epoch;
}

static void
tdm_session_emit (TdmSession       *self,
                  TdmSessionSeries  series,
                  int               replica,
                  double            x,
                  double            y)
{
  TdmSessionPoint p = { series, replica, x, y };

  g_signal_emit (self, signals[SIGNAL_POINT], 0, &p);
}

static void
tdm_session_status_changed (TdmSession *self,
                            StatusKind  kind,
                            gboolean    at_once)
{
  self->status = kind;
  g_signal_emit (self, signals[SIGNAL_STATUS_CHANGED], 0, at_once);
}

/* Training time in seconds now, moving on between events (for telemetry samples). */
static double
tdm_session_now (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), 0);

  if (self->paused || self->last_elapsed_at == 0)
    return self->last_elapsed;

  return self->last_elapsed + (g_get_monotonic_time () - self->last_elapsed_at) / 1e6;
}

static void
tdm_session_note_elapsed (TdmSession *self,
                          double      elapsed)
{
  if (!isfinite (elapsed))
    return;

  self->last_elapsed = elapsed;
  self->last_elapsed_at = g_get_monotonic_time ();
}

static gboolean
tdm_session_sample_telemetry (gpointer user_data)
{
  TdmSession *self = user_data;
  double now;

  if (self->telemetry == NULL || self->paused)
    return G_SOURCE_CONTINUE;

  now = tdm_session_now (self);
  for (int r = 0; r < self->started.replicas; r++)
    {
      TdmTelemetrySample sample;

      if (self->gpu[r] < 0 || self->shares_gpu[r])
        continue;

      sample = tdm_telemetry_get (self->telemetry, self->gpu[r]);
      self->telemetry_memory[r] = sample.valid_memory;
      self->telemetry_load[r] = sample.valid_utilization;

      if (sample.valid_memory)
        {
          tdm_session_emit (self, TDM_SESSION_MEMORY, r, now, (double) sample.memory_used);
          if (tdm_session_replica_has_capacity (self, r))
            tdm_session_emit (self, TDM_SESSION_CAPACITY, r, now,
                              (double) sample.memory_total);
        }
      if (sample.valid_utilization)
        tdm_session_emit (self, TDM_SESSION_LOAD, r, now, sample.utilization);

      if (sample.valid_memory || sample.valid_utilization)
        tdm_metrics_log_add_telemetry (self->log, now, r,
                                       sample.valid_memory ? (double) sample.memory_used : NAN,
                                       sample.valid_memory ? (double) sample.memory_total : NAN,
                                       sample.valid_utilization ? sample.utilization : NAN);
    }

  return G_SOURCE_CONTINUE;
}

static void
tdm_session_stop_telemetry (TdmSession *self)
{
  g_clear_handle_id (&self->telemetry_source, g_source_remove);
  g_clear_pointer (&self->telemetry, tdm_telemetry_free);
}

static void
tdm_session_begin (TdmSession            *self,
                   const TdmStartedEvent *started)
{
  gboolean any_gpu = FALSE;
  int n;

  tdm_session_stop_telemetry (self);

  self->started = *started;
  n = self->started.replicas = CLAMP (started->replicas, 0, TDM_MAX_REPLICAS);
  self->have_started = TRUE;
  self->paused = FALSE;
  self->last_elapsed = 0;
  self->last_elapsed_at = g_get_monotonic_time ();
  memset (&self->last_step, 0, sizeof self->last_step);
  self->fraction = 0;

  tdm_metrics_log_begin (self->log, &self->started);
  /* Only now do the pages show the run those settings belong to. */
  if (self->next_info != NULL)
    {
      g_clear_pointer (&self->info, tdm_export_info_free);
      self->info = g_steal_pointer (&self->next_info);
      /* The settings say what was asked; the exports say what auto resolved to. */
      if (started->precision_auto)
        tdm_run_export_info_set_precision (self->info, TDM_PRECISION_AUTO, started->precision);
    }

  /* The live curves start over; the overlays stay as they are. */
  g_array_set_size (self->live, 0);

  for (int r = 0; r < n; r++)
    {
      /* The engine says which GPU each replica runs on (never parsed from its name). */
      self->gpu[r] = self->started.gpu_replicas[r] > 0 ? self->started.gpu[r] : -1;
      self->shares_gpu[r] = FALSE;
      self->on_gpu[r] = 1;
      self->telemetry_memory[r] = FALSE;
      self->telemetry_load[r] = FALSE;
      if (self->gpu[r] < 0)
        continue;

      any_gpu = TRUE;
      for (int q = 0; q < r; q++)
        self->shares_gpu[r] |= self->gpu[q] == self->gpu[r];
      for (int q = r + 1; q < n; q++)
        self->on_gpu[r] += self->started.gpu_replicas[q] > 0
                           && self->started.gpu[q] == self->gpu[r];
    }

  self->step_replica = CLAMP (started->main_replica, 0, MAX (n - 1, 0));

  if (any_gpu)
    {
      self->telemetry = tdm_telemetry_new (TELEMETRY_INTERVAL_MS);
      self->telemetry_source = g_timeout_add (TELEMETRY_INTERVAL_MS,
                                              tdm_session_sample_telemetry, self);
    }

  g_signal_emit (self, signals[SIGNAL_STARTED], 0);
  tdm_session_status_changed (self, STATUS_STARTING, TRUE);
}

static void
tdm_session_emit_step_time (TdmSession *self,
                            double      elapsed,
                            double      compute_ms,
                            double      comm_ms,
                            double      wait_ms)
{
  int r = self->step_replica;

  tdm_session_emit (self, TDM_SESSION_STEP_COMPUTE, r, elapsed, compute_ms);
  tdm_session_emit (self, TDM_SESSION_STEP_COMM, r, elapsed, comm_ms);
  tdm_session_emit (self, TDM_SESSION_STEP_WAIT, r, elapsed, wait_ms);
}

static void
tdm_session_handle_devices (TdmSession            *self,
                            const TdmDevicesEvent *devices)
{
  int n = MIN (devices->replicas, self->started.replicas);
  double x = devices->elapsed;

  for (int r = 0; r < n; r++)
    {
      double compute = devices->device[r].compute_ms;
      double busy = compute + devices->device[r].comm_ms + devices->device[r].wait_ms;

      if (self->shares_gpu[r])
        continue;
      if (!self->telemetry_memory[r])
        {
          gint64 bytes = devices->device[r].tandem_bytes;

          if (self->gpu[r] >= 0 && devices->device[r].used_bytes >= 0)
            bytes = devices->device[r].used_bytes;
          if (bytes >= 0)
            tdm_session_emit (self, TDM_SESSION_MEMORY, r, x, (double) bytes);
          if (tdm_session_replica_has_capacity (self, r) && devices->device[r].total_bytes > 0)
            tdm_session_emit (self, TDM_SESSION_CAPACITY, r, x,
                              (double) devices->device[r].total_bytes);
        }

      if (!self->telemetry_load[r])
        {
          double load = devices->device[r].utilization;

          if (load < 0)
            load = busy > 0 ? 100.0 * compute / busy : NAN;
          tdm_session_emit (self, TDM_SESSION_LOAD, r, x, load);
        }
    }

  if (self->step_replica >= 0 && self->step_replica < n)
    tdm_session_emit_step_time (self, x,
                                devices->device[self->step_replica].compute_ms,
                                devices->device[self->step_replica].comm_ms,
                                devices->device[self->step_replica].wait_ms);
}

static void
tdm_session_add_live (TdmSession *self,
                      LivePoint  *p)
{
  double x = tdm_session_x (self, p->step, p->epoch);

  g_array_append_val (self->live, *p);
  tdm_session_emit (self, p->test ? TDM_SESSION_LOSS_TEST : TDM_SESSION_LOSS_TRAIN, -1,
                    x, p->loss);
  tdm_session_emit (self, p->test ? TDM_SESSION_ACCURACY_TEST : TDM_SESSION_ACCURACY_TRAIN,
                    -1, x, p->accuracy);
}

void
tdm_session_handle_event (TdmSession     *self,
                          const TdmEvent *event)
{
  g_return_if_fail (TDM_IS_SESSION (self));
  g_return_if_fail (event != NULL);

  if (event->kind == TDM_EVENT_STARTED)
    {
      tdm_session_begin (self, &event->started);
      tdm_phase_stats_reset (self->phases, event->started.replicas);
      g_signal_emit (self, signals[SIGNAL_EVENT], 0, event);
      return;
    }

  if (!self->have_started)
    return;

  tdm_metrics_log_add (self->log, event);

  switch (event->kind)
    {
    case TDM_EVENT_STEP:
      {
        const TdmStepEvent *s = &event->step;
        LivePoint p = { s->step, s->epoch_float, s->train_loss, 100.0 * s->train_accuracy,
                        FALSE };

        self->last_step = *s;
        self->fraction = CLAMP (s->fraction, 0.0, 1.0);
        tdm_session_note_elapsed (self, s->elapsed);
        tdm_session_add_live (self, &p);
        tdm_session_emit (self, TDM_SESSION_THROUGHPUT, -1, s->elapsed, s->samples_per_second);
        tdm_session_status_changed (self, STATUS_RUNNING, FALSE);
      }
      break;

    case TDM_EVENT_DEVICES:
      tdm_session_note_elapsed (self, event->devices.elapsed);
      tdm_session_handle_devices (self, &event->devices);
      break;

    case TDM_EVENT_EPOCH:
      {
        LivePoint p = { event->epoch.step, event->epoch.epoch, event->epoch.test_loss,
                        100.0 * event->epoch.test_accuracy, TRUE };

        tdm_session_note_elapsed (self, event->epoch.elapsed);
        tdm_session_add_live (self, &p);
      }
      break;

    case TDM_EVENT_PAUSED:
      self->last_elapsed = tdm_session_now (self);
      self->paused = TRUE;
      tdm_session_status_changed (self, STATUS_RUNNING, TRUE);
      break;

    case TDM_EVENT_RESUMED:
      self->paused = FALSE;
      self->last_elapsed_at = g_get_monotonic_time ();
      tdm_session_status_changed (self, STATUS_RUNNING, TRUE);
      break;

    case TDM_EVENT_FINISHED:
      self->paused = FALSE;
      self->finished = event->finished;
      if (!event->finished.stopped)
        self->fraction = 1.0;
      tdm_session_status_changed (self, STATUS_FINISHED, TRUE);
      break;

    case TDM_EVENT_FAILED:
      tdm_session_status_changed (self, STATUS_FAILED, TRUE);
      break;

    case TDM_EVENT_PHASES:
      tdm_phase_stats_add (self->phases, &event->phases);
      break;

    case TDM_EVENT_STARTED:
    default:
      break;
    }

  g_signal_emit (self, signals[SIGNAL_EVENT], 0, event);
}

void
tdm_session_end (TdmSession *self)
{
  g_return_if_fail (TDM_IS_SESSION (self));

  tdm_session_stop_telemetry (self);
  self->paused = FALSE;
}

void
tdm_session_set_dataset (TdmSession           *self,
                         const TdmDatasetPair *dataset)
{
  g_return_if_fail (TDM_IS_SESSION (self));

  self->dataset = dataset;
}

const TdmPhaseStats *
tdm_session_get_phase_stats (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), NULL);

  return self->phases;
}

const TdmDatasetPair *
tdm_session_get_dataset (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), NULL);

  return self->dataset;
}

const TdmStartedEvent *
tdm_session_get_started (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), NULL);

  return self->have_started ? &self->started : NULL;
}

int
tdm_session_get_n_replicas (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), 0);

  return self->have_started ? self->started.replicas : 0;
}

static gboolean
valid_replica (TdmSession *self,
               int         replica)
{
  return self->have_started && replica >= 0 && replica < self->started.replicas;
}

int
tdm_session_get_gpu (TdmSession *self,
                     int         replica)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), -1);

  return valid_replica (self, replica) ? self->gpu[replica] : -1;
}

gboolean
tdm_session_replica_has_line (TdmSession *self,
                              int         replica)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), FALSE);

  return valid_replica (self, replica) && !self->shares_gpu[replica];
}

gboolean
tdm_session_replica_has_capacity (TdmSession *self,
                                  int         replica)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), FALSE);

  /* The CPU's "capacity" is all of the machine's memory, which would flatten
   * everything else: it has none. */
  return tdm_session_replica_has_line (self, replica) && self->gpu[replica] >= 0;
}

char *
tdm_session_dup_line_label (TdmSession *self,
                            int         replica)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), NULL);
  g_return_val_if_fail (valid_replica (self, replica), NULL);

  if (self->gpu[replica] >= 0 && self->on_gpu[replica] > 1)
    /* Translators: the memory and load charts' line for a GPU that several
     * replicas share, e.g. "cuda:0 · 3 replicas" */
    return g_strdup_printf (_("%.32s · %d replicas"), self->started.device[replica],
                            self->on_gpu[replica]);

  /* As the CSV export names it too (tdm-format.h). */
  return tdm_format_replica (&self->started, replica);
}

char *
tdm_session_dup_capacity_label (TdmSession *self,
                                int         replica)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), NULL);
  g_return_val_if_fail (valid_replica (self, replica), NULL);

  /* Translators: the memory chart's line for a GPU's total memory; %s is "cuda:0" */
  return g_strdup_printf (_("%.32s capacity"), self->started.device[replica]);
}

int
tdm_session_get_step_replica (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), 0);

  return self->step_replica;
}

gboolean
tdm_session_set_step_replica (TdmSession *self,
                              int         replica)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), FALSE);

  if (replica == self->step_replica ||
      replica < 0 || replica >= TDM_MAX_REPLICAS ||
      (self->have_started && replica >= self->started.replicas))
    return FALSE;

  self->step_replica = replica;
  return TRUE;
}

typedef struct
{
  TdmSessionSeriesFunc func;
  gpointer             user_data;
  int                  replica;
} Replay;

static void
replay_step_time (double   elapsed,
                  double   compute_ms,
                  double   comm_ms,
                  double   wait_ms,
                  gpointer user_data)
{
  Replay *replay = user_data;
  TdmSessionPoint p[3] = {
    { TDM_SESSION_STEP_COMPUTE, replay->replica, elapsed, compute_ms },
    { TDM_SESSION_STEP_COMM, replay->replica, elapsed, comm_ms },
    { TDM_SESSION_STEP_WAIT, replay->replica, elapsed, wait_ms },
  };

  for (guint i = 0; i < G_N_ELEMENTS (p); i++)
    replay->func (&p[i], replay->user_data);
}

void
tdm_session_replay_step_time (TdmSession           *self,
                              TdmSessionSeriesFunc  func,
                              gpointer              user_data)
{
  Replay replay = { func, user_data, 0 };

  g_return_if_fail (TDM_IS_SESSION (self));
  g_return_if_fail (func != NULL);

  if (!self->have_started)
    return;
  replay.replica = self->step_replica;
  tdm_metrics_log_foreach_step_time (self->log, self->step_replica, replay_step_time, &replay);
}

void
tdm_session_set_x_axis (TdmSession      *self,
                        TdmSessionXAxis  axis)
{
  g_return_if_fail (TDM_IS_SESSION (self));
  g_return_if_fail (axis == TDM_SESSION_X_EPOCH || axis == TDM_SESSION_X_STEP);

  self->x_axis = axis;
}

TdmSessionXAxis
tdm_session_get_x_axis (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), TDM_SESSION_X_EPOCH);

  return self->x_axis;
}

void
tdm_session_foreach_live_point (TdmSession          *self,
                                TdmSessionPointFunc  func,
                                gpointer             user_data)
{
  g_return_if_fail (TDM_IS_SESSION (self));
  g_return_if_fail (func != NULL);

  for (guint k = 0; k < self->live->len; k++)
    {
      const LivePoint *p = &g_array_index (self->live, LivePoint, k);

      func (tdm_session_x (self, p->step, p->epoch), p->loss, p->accuracy, p->test,
            user_data);
    }
}

void
tdm_session_set_overlays (TdmSession *self,
                          GPtrArray  *records)
{
  g_return_if_fail (TDM_IS_SESSION (self));

  g_ptr_array_set_size (self->overlays, 0);
  for (guint i = 0; records != NULL && i < records->len; i++)
    {
      const TdmRunRecord *record = g_ptr_array_index (records, i);
      Overlay *o = g_new0 (Overlay, 1);

      o->name = g_strdup (record->name);
      o->points = g_array_copy (record->points);
      g_ptr_array_add (self->overlays, o);
    }
}

guint
tdm_session_get_n_overlays (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), 0);

  return self->overlays->len;
}

const char *
tdm_session_get_overlay_name (TdmSession *self,
                              guint       index)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), NULL);
  g_return_val_if_fail (index < self->overlays->len, NULL);

  return ((Overlay *) g_ptr_array_index (self->overlays, index))->name;
}

void
tdm_session_foreach_overlay_point (TdmSession          *self,
                                   guint                index,
                                   TdmSessionPointFunc  func,
                                   gpointer             user_data)
{
  Overlay *o;

  g_return_if_fail (TDM_IS_SESSION (self));
  g_return_if_fail (index < self->overlays->len);
  g_return_if_fail (func != NULL);

  o = g_ptr_array_index (self->overlays, index);
  for (guint k = 0; k < o->points->len; k++)
    {
      const TdmHistoryPoint *p = &g_array_index (o->points, TdmHistoryPoint, k);

      func (tdm_session_x (self, p->step, p->epoch), p->train_loss,
            100.0 * p->train_accuracy, FALSE, user_data);
    }
}

char *
tdm_session_dup_status (TdmSession *self,
                        double     *fraction)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), NULL);

  if (fraction != NULL)
    *fraction = self->fraction;

  switch (self->status)
    {
    case STATUS_TEXT:
      return g_strdup (self->status_text);

    case STATUS_STARTING:
      {
        g_autofree char *precision = tdm_format_precision (&self->started);
        g_autofree char *starting =
          g_strdup_printf (ngettext ("Starting: %d replica, batch %d",
                                     "Starting: %d replicas, batch %d",
                                     self->started.replicas),
                           self->started.replicas, self->started.batch);

        /* What auto resolved to is said here, where the run begins. */
        return g_strdup_printf ("%s · %s", starting, precision);
      }

    case STATUS_RUNNING:
      return tdm_format_progress (&self->started, &self->last_step, self->paused);

    case STATUS_FINISHED:
      return tdm_format_finished (&self->finished);

    case STATUS_FAILED:
      return g_strdup (_("Training failed"));

    case STATUS_NONE:
    default:
      return NULL;
    }
}

void
tdm_session_set_status (TdmSession *self,
                        const char *text)
{
  g_return_if_fail (TDM_IS_SESSION (self));

  g_free (self->status_text);
  self->status_text = g_strdup (text ? text : "");
  tdm_session_status_changed (self, STATUS_TEXT, TRUE);
}

TdmMetricsLog *
tdm_session_get_log (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), NULL);

  return self->log;
}

void
tdm_session_set_export_info (TdmSession    *self,
                             TdmExportInfo *info)
{
  g_return_if_fail (TDM_IS_SESSION (self));

  g_clear_pointer (&self->next_info, tdm_export_info_free);
  self->next_info = info;
}

const TdmExportInfo *
tdm_session_get_export_info (TdmSession *self)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), NULL);

  return self->info;
}

gboolean
tdm_session_export_metrics (TdmSession  *self,
                            const char  *path,
                            GError     **error)
{
  g_return_val_if_fail (TDM_IS_SESSION (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  return tdm_metrics_log_write_csv (self->log, path, self->info, error);
}

static void
tdm_session_dispose (GObject *object)
{
  TdmSession *self = TDM_SESSION (object);

  tdm_session_stop_telemetry (self);

  G_OBJECT_CLASS (tdm_session_parent_class)->dispose (object);
}

static void
tdm_session_finalize (GObject *object)
{
  TdmSession *self = TDM_SESSION (object);

  g_clear_pointer (&self->log, tdm_metrics_log_free);
  g_clear_pointer (&self->info, tdm_export_info_free);
  g_clear_pointer (&self->next_info, tdm_export_info_free);
  g_clear_pointer (&self->live, g_array_unref);
  g_clear_pointer (&self->overlays, g_ptr_array_unref);
  g_clear_pointer (&self->status_text, g_free);
  g_clear_pointer (&self->phases, tdm_phase_stats_free);

  G_OBJECT_CLASS (tdm_session_parent_class)->finalize (object);
}

static void
tdm_session_class_init (TdmSessionClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = tdm_session_dispose;
  object_class->finalize = tdm_session_finalize;

  signals[SIGNAL_STARTED] =
    g_signal_new ("started", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_POINT] =
    g_signal_new ("point", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
  signals[SIGNAL_STATUS_CHANGED] =
    g_signal_new ("status-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_BOOLEAN);
  signals[SIGNAL_EVENT] =
    g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
}

static void
tdm_session_init (TdmSession *self)
{
  self->log = tdm_metrics_log_new ();
  self->live = g_array_new (FALSE, FALSE, sizeof (LivePoint));
  self->overlays = g_ptr_array_new_with_free_func (overlay_free);
  self->phases = tdm_phase_stats_new ();
}

TdmSession *
tdm_session_new (void)
{
  return g_object_new (TDM_TYPE_SESSION, NULL);
}
