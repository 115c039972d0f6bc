/* tdm-dashboard.c: the live charts and status line of a training run.
 *
 * Loss and accuracy are drawn against epochs (fractional for the training curves,
 * whole for the test points) or steps, a setting of those two charts, never against
 * the clock: a recorded run's summaries come every few steps, so two runs of one
 * configuration give the same points and overlay exactly. Earlier runs from the
 * history are drawn there as faint curves (their training curves, one legend entry
 * each). Everything about devices is drawn against training time, so a stall on one
 * device lines up with a dip in throughput. Every replica
 * keeps one colour, tdm_chart_device_colour() of its index, in every chart.
 *
 * Memory and load of a GPU come from NVML telemetry, sampled here twice a second
 * while a run uses GPUs; when NVML is missing, and always for CPU workers, they come
 * from the engine's per-device events (bytes held by Tandem, and the busy share of
 * each step as the load). The step-time chart stacks compute, communication and
 * waiting for one replica at a time, picked in the chart's corner; the log keeps all
 * of them, so switching replays that replica's history.
 *
 * Until the first run starts there is nothing to chart, so an AdwStatusPage says what
 * to do instead of six empty cards. The cards sit in a GtkFlowBox: three columns on
 * a wide window, two, then one, each card no narrower than CARD_MIN_WIDTH.
 *
 * Throughput is the engine's figure, samples over the last second of training time
 * (tdm-trainer.c says why not over one summary), drawn as it comes: the window
 * derives no rate of its own, so it shows what `tandem-train --json` prints.
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

#include "tdm-dashboard.h"
#include "tdm-format.h"
#include "tdm-pacer.h"
#include "tdm-status-line.h"
#include "tdm-telemetry.h"

#define TELEMETRY_INTERVAL_MS 500

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

/* Fixed colours for the phases of a step, far apart in hue and lightness, so the
 * three areas never read as one. */
#define PHASE_COMPUTE 0x3584e4
#define PHASE_COMM    0xe5a50a
#define PHASE_WAIT    0x9a9996

typedef struct
{
  guint  series;
  double x, y;
} Pending;

/* The live run's loss and accuracy points, kept to redraw them on another x axis. */
typedef struct
{
  long   step;
  double epoch;
  double loss, accuracy;   /* accuracy in % */
  gboolean test;
} LivePoint;

typedef struct
{
  char   *name;
  GArray *points;          /* of TdmHistoryPoint */
  guint   loss_series, accuracy_series;
} Overlay;

/* Series each of the loss and accuracy charts has before any overlay. */
#define N_LIVE_SERIES 2
/* Overlaid runs named in the legend; the others are counted. */
#define MAX_OVERLAY_NAMES 3

typedef enum
{
  CHART_LOSS,
  CHART_ACCURACY,
  CHART_THROUGHPUT,
  CHART_MEMORY,
  CHART_LOAD,
  CHART_STEP_TIME,
  N_CHARTS
} ChartId;

/* The pacer's slot for the status line; the charts' are their ChartIds. */
#define STATUS_SLOT N_CHARTS

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

struct _TdmDashboard
{
  GtkWidget        parent_instance;

  GtkStack        *view_stack;
  AdwStatusPage   *empty_page;
  GtkFlowBox      *chart_grid;
  GtkWidget       *status_separator;
  GtkWidget       *status_box;
  TdmStatusLine   *status_line;
  GtkProgressBar  *progress_bar;

  TdmChart        *charts[N_CHARTS];
  GArray          *pending[N_CHARTS];   /* of Pending */
  TdmPacer        *pacer;
  GMenu           *step_time_devices;   /* the step-time menu's list of replicas */
  GMenu           *x_axis_menu;         /* the loss and accuracy charts' x axes */

  TdmMetricsLog   *log;
  TdmExportInfo   *next_info;   /* the settings of the run being started */
  TdmExportInfo   *info;        /* the settings of the run shown, for exports */

  /* The run being shown. */
  TdmStartedEvent  started;
  gboolean         have_started;
  int              gpu[TDM_MAX_REPLICAS];          /* CUDA ordinal, or −1 */
  guint            memory_series[TDM_MAX_REPLICAS];
  guint            load_series[TDM_MAX_REPLICAS];
  /* A replica on a GPU an earlier replica also uses: the driver's memory and load
   * are the whole GPU's, so that GPU has one line (the first replica's), not one
   * identical line per replica. */
  gboolean         shares_gpu[TDM_MAX_REPLICAS];
  int              capacity_series[TDM_MAX_REPLICAS]; /* −1 where another replica has it */
  gboolean         telemetry_memory[TDM_MAX_REPLICAS];
  gboolean         telemetry_load[TDM_MAX_REPLICAS];
  guint            loss_train, loss_test, accuracy_train, accuracy_test, throughput;
  guint            step_series[3];
  int              step_replica;

  TdmStepEvent     last_step;
  gboolean         have_step;
  gboolean         paused;
  double           last_elapsed;
  gint64           last_elapsed_at;   /* monotonic µs when last_elapsed arrived */

  TdmTelemetry    *telemetry;
  guint            telemetry_source;

  gboolean         status_stale;        /* news for the status line while not shown */

  TdmDashboardXAxis x_axis;
  GArray          *live;                /* of LivePoint */
  GPtrArray       *overlays;            /* of Overlay */
};

enum {
  PROP_0,
  PROP_STEP_REPLICA,
  PROP_X_AXIS,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmDashboard, tdm_dashboard, GTK_TYPE_WIDGET)

static void
rgba_from_hex (GdkRGBA *out,
               guint32  hex)
{
  out->red = ((hex >> 16) & 0xff) / 255.0;
  out->green = ((hex >> 8) & 0xff) / 255.0;
  out->blue = (hex & 0xff) / 255.0;
  out->alpha = 1;
}

static int
chart_index (const char *id)
{
  for (int i = 0; i < N_CHARTS; i++)
    if (g_strcmp0 (chart_info[i].id, id) == 0)
      return i;

  return -1;
}

static void
overlay_free (gpointer data)
{
  Overlay *o = data;

  g_free (o->name);
  g_array_unref (o->points);
  g_free (o);
}

static double
tdm_dashboard_x (TdmDashboard *self,
                 long          step,
                 double        epoch)
{
  return self->x_axis == TDM_DASHBOARD_X_STEP ? (double) step : epoch;
}

/* As the CSV export names it too (tdm-format.h). */
static char *
replica_label (const TdmStartedEvent *started,
               int                    replica)
{
  return tdm_format_replica (started, replica);
}

static char *
format_duration (double seconds)
{
  gint64 s;

  if (!isfinite (seconds) || seconds < 0)
    return g_strdup ("—");

  s = (gint64) (seconds + 0.5);
  if (s >= 3600)
    return g_strdup_printf ("%" G_GINT64_FORMAT ":%02d:%02d",
                            s / 3600, (int) (s / 60 % 60), (int) (s % 60));

  return g_strdup_printf ("%d:%02d", (int) (s / 60), (int) (s % 60));
}

#define format_count tdm_format_count

static void
tdm_dashboard_flush_chart (TdmDashboard *self,
                           ChartId       id)
{
  GArray *pending = self->pending[id];

  for (guint i = 0; i < pending->len; i++)
    {
      const Pending *p = &g_array_index (pending, Pending, i);

      tdm_chart_append (self->charts[id], p->series, p->x, p->y);
    }
  g_array_set_size (pending, 0);
  tdm_pacer_unmark (self->pacer, id);
}

static void
tdm_dashboard_queue (TdmDashboard *self,
                     ChartId       id,
                     guint         series,
                     double        x,
                     double        y)
{
  Pending p = { series, x, y };

  /* A chart not shown draws nothing, so its points need no pacing: they go
   * straight in, and the pacer is not woken for them. */
  if (!gtk_widget_get_mapped (GTK_WIDGET (self)))
    {
      if (self->pending[id]->len > 0)
        tdm_dashboard_flush_chart (self, id);
      tdm_chart_append (self->charts[id], series, x, y);
      return;
    }
  g_array_append_val (self->pending[id], p);
  tdm_pacer_mark (self->pacer, id);
}

/* The status line, at the pacer's pace while it is shown, at once when it is shown
 * again. */
static void
tdm_dashboard_status_changed (TdmDashboard *self)
{
  if (gtk_widget_get_mapped (GTK_WIDGET (self)))
    tdm_pacer_mark (self->pacer, STATUS_SLOT);
  else
    self->status_stale = TRUE;
}

/* Training time now, moving on between events so telemetry samples spread out. */
static double
tdm_dashboard_now (TdmDashboard *self)
{
  if (self->paused || self->last_elapsed_at == 0)
    return self->last_elapsed;

  return self->last_elapsed + (g_get_monotonic_time () - self->last_elapsed_at) / 1e6;
}

static void
tdm_dashboard_note_elapsed (TdmDashboard *self,
                            double        elapsed)
{
  if (!isfinite (elapsed))
    return;

  self->last_elapsed = elapsed;
  self->last_elapsed_at = g_get_monotonic_time ();
}

static void
tdm_dashboard_update_status (TdmDashboard *self)
{
  const TdmStepEvent *s = &self->last_step;
  g_autofree char *epoch = NULL;
  g_autofree char *step = NULL;
  g_autofree char *rate = NULL;
  g_autofree char *elapsed = NULL;
  g_autofree char *eta = NULL;
  g_autofree char *steps_done = NULL;
  g_autofree char *steps_total = NULL;
  g_autofree char *samples = NULL;
  g_autofree char *elapsed_time = NULL;
  g_autofree char *eta_time = NULL;
  g_autofree char *text = NULL;

  tdm_pacer_unmark (self->pacer, STATUS_SLOT);
  self->status_stale = FALSE;
  if (!self->have_started)
    return;

  epoch = g_strdup_printf (_("Epoch %d of %d"),
                           MIN (s->epoch + 1, self->started.epochs), self->started.epochs);
  steps_done = format_count (s->step);
  steps_total = format_count (self->started.total_steps);
  step = g_strdup_printf (_("Step %s of %s"), steps_done, steps_total);
  samples = format_count (s->samples_per_second);
  rate = g_strdup_printf (_("%s samples/s"), samples);
  elapsed_time = format_duration (s->elapsed);
  elapsed = g_strdup_printf (_("%s elapsed"), elapsed_time);
  eta_time = format_duration (s->eta);
  eta = g_strdup_printf (_("%s left"), eta_time);

  text = g_strjoin (" · ", epoch, step, rate, elapsed, eta, NULL);
  if (self->paused)
    {
      g_autofree char *body = g_steal_pointer (&text);

      text = g_strjoin (" · ", _("Paused"), body, NULL);
    }

  tdm_status_line_set_text (self->status_line, text);
  gtk_progress_bar_set_fraction (self->progress_bar, CLAMP (s->fraction, 0.0, 1.0));
}

static void
tdm_dashboard_paced (guint    slot,
                     gpointer user_data)
{
  TdmDashboard *self = user_data;

  if (slot == STATUS_SLOT)
    tdm_dashboard_update_status (self);
  else if (slot < N_CHARTS)
    tdm_dashboard_flush_chart (self, slot);
}

static void
tdm_dashboard_drop_pending (TdmDashboard *self,
                            ChartId       id)
{
  g_array_set_size (self->pending[id], 0);
  tdm_pacer_unmark (self->pacer, id);
}

static void
tdm_dashboard_append_step_time (double   elapsed,
                                double   compute_ms,
                                double   comm_ms,
                                double   wait_ms,
                                gpointer user_data)
{
  TdmDashboard *self = user_data;

  tdm_dashboard_queue (self, CHART_STEP_TIME, self->step_series[0], elapsed, compute_ms);
  tdm_dashboard_queue (self, CHART_STEP_TIME, self->step_series[1], elapsed, comm_ms);
  tdm_dashboard_queue (self, CHART_STEP_TIME, self->step_series[2], elapsed, wait_ms);
}

static void
tdm_dashboard_setup_step_time (TdmDashboard *self)
{
  TdmChart *chart = self->charts[CHART_STEP_TIME];
  gboolean alone = self->have_started && self->started.replicas <= 1;
  GdkRGBA compute, comm, wait;

  /* Queued points name the old series; the replay below brings them back. */
  tdm_dashboard_drop_pending (self, CHART_STEP_TIME);
  tdm_chart_remove_all_series (chart);

  rgba_from_hex (&compute, PHASE_COMPUTE);
  rgba_from_hex (&comm, PHASE_COMM);
  rgba_from_hex (&wait, PHASE_WAIT);

  self->step_series[0] = tdm_chart_add_series (chart, _("Compute"), &compute,
                                               TDM_CHART_STYLE_STACKED);
  self->step_series[1] = tdm_chart_add_series (chart, _("Communication"), &comm,
                                               TDM_CHART_STYLE_STACKED);
  self->step_series[2] = tdm_chart_add_series (chart, _("Waiting"), &wait,
                                               TDM_CHART_STYLE_STACKED);
  /* One device neither talks to nor waits for another: no such entries. */
  tdm_chart_set_series_visible (chart, self->step_series[1], !alone);
  tdm_chart_set_series_visible (chart, self->step_series[2], !alone);

  if (self->have_started && self->started.replicas > 1)
    {
      g_autofree char *label = replica_label (&self->started, self->step_replica);
      /* Translators: the step-time chart's title when it shows one of several
       * devices; %s is the device, e.g. "cpu 2" */
      g_autofree char *title = g_strdup_printf (_("Step time · %s"), label);

      tdm_chart_set_title (chart, title);
    }
  else
    tdm_chart_set_title (chart, _(chart_info[CHART_STEP_TIME].title));

  if (self->have_started)
    {
      tdm_metrics_log_foreach_step_time (self->log, self->step_replica,
                                         tdm_dashboard_append_step_time, self);
      tdm_dashboard_flush_chart (self, CHART_STEP_TIME);
    }
}

static void
tdm_dashboard_set_step_replica (TdmDashboard *self,
                                int           replica)
{
  if (replica == self->step_replica ||
      replica < 0 || (self->have_started && replica >= self->started.replicas))
    return;

  self->step_replica = replica;
  tdm_dashboard_setup_step_time (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STEP_REPLICA]);
}

static gboolean
tdm_dashboard_sample_telemetry (gpointer user_data)
{
  TdmDashboard *self = user_data;
  double now;

  if (self->telemetry == NULL || self->paused)
    return G_SOURCE_CONTINUE;

  now = tdm_dashboard_now (self);
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
          tdm_dashboard_queue (self, CHART_MEMORY, self->memory_series[r],
                            now, (double) sample.memory_used);
          if (self->capacity_series[r] >= 0)
            tdm_dashboard_queue (self, CHART_MEMORY, self->capacity_series[r],
                              now, (double) sample.memory_total);
        }
      if (sample.valid_utilization)
        tdm_dashboard_queue (self, CHART_LOAD, self->load_series[r],
                          now, sample.utilization);

      if (sample.valid_memory || sample.valid_utilization)
        tdm_metrics_log_add_telemetry (self->log, now, r,
                                       sample.valid_memory ? (double) sample.memory_used : NAN,
                                       sample.valid_memory ? (double) sample.memory_total : NAN,
                                       sample.valid_utilization ? sample.utilization : NAN);
    }

  return G_SOURCE_CONTINUE;
}

static void
tdm_dashboard_stop_telemetry (TdmDashboard *self)
{
  g_clear_handle_id (&self->telemetry_source, g_source_remove);
  g_clear_pointer (&self->telemetry, tdm_telemetry_free);
}

static void
tdm_dashboard_show_charts (TdmDashboard *self)
{
  gtk_stack_set_visible_child_name (self->view_stack, "charts");
  gtk_widget_set_visible (self->status_separator, TRUE);
  gtk_widget_set_visible (self->status_box, TRUE);
}

/* The loss and accuracy charts from scratch: the overlays, then the live run's
 * points so far, on the chosen x axis. */
static void
tdm_dashboard_replot (TdmDashboard *self)
{
  static const ChartId ids[] = { CHART_LOSS, CHART_ACCURACY };
  gboolean by_step = self->x_axis == TDM_DASHBOARD_X_STEP;

  for (guint c = 0; c < G_N_ELEMENTS (ids); c++)
    {
      TdmChart *chart = self->charts[ids[c]];

      tdm_dashboard_drop_pending (self, ids[c]);
      tdm_chart_truncate_series (chart, N_LIVE_SERIES);
      tdm_chart_clear (chart);
      tdm_chart_set_x_label (chart, by_step ? _("Step") : _("Epoch"));
    }

  for (guint i = 0; i < self->overlays->len; i++)
    {
      Overlay *o = g_ptr_array_index (self->overlays, i);
      GdkRGBA colour;

      /* Far from the live run's blue and red: device colours from the third on. */
      tdm_chart_device_colour (2 + i, &colour);
      o->loss_series = tdm_chart_add_series (self->charts[CHART_LOSS], o->name, &colour,
                                             TDM_CHART_STYLE_OVERLAY);
      o->accuracy_series = tdm_chart_add_series (self->charts[CHART_ACCURACY], o->name,
                                                 &colour, TDM_CHART_STYLE_OVERLAY);
      /* Smoothed as the live training curve is, so equal runs draw equal curves. */
      tdm_chart_set_series_smoothing (self->charts[CHART_LOSS], o->loss_series, 0.6);
      tdm_chart_set_series_smoothing (self->charts[CHART_ACCURACY], o->accuracy_series, 0.6);
      /* Twenty names would leave no room to plot: the first few are named, the
       * others counted in one entry below. */
      if (i >= MAX_OVERLAY_NAMES)
        {
          tdm_chart_set_series_in_legend (self->charts[CHART_LOSS], o->loss_series, FALSE);
          tdm_chart_set_series_in_legend (self->charts[CHART_ACCURACY], o->accuracy_series,
                                          FALSE);
        }
      for (guint k = 0; k < o->points->len; k++)
        {
          const TdmHistoryPoint *p = &g_array_index (o->points, TdmHistoryPoint, k);
          double x = tdm_dashboard_x (self, p->step, p->epoch);

          tdm_chart_append (self->charts[CHART_LOSS], o->loss_series, x, p->train_loss);
          tdm_chart_append (self->charts[CHART_ACCURACY], o->accuracy_series, x,
                            100.0 * p->train_accuracy);
        }
    }

  if (self->overlays->len > MAX_OVERLAY_NAMES)
    {
      guint more = self->overlays->len - MAX_OVERLAY_NAMES;
      /* Translators: the legend entry for the earlier runs drawn but not named */
      g_autofree char *label = g_strdup_printf (ngettext ("%u more run", "%u more runs", more),
                                                more);
      GdkRGBA grey = { 0.55, 0.55, 0.55, 1 };

      for (guint c = 0; c < G_N_ELEMENTS (ids); c++)
        tdm_chart_add_series (self->charts[ids[c]], label, &grey, TDM_CHART_STYLE_OVERLAY);
    }

  for (guint k = 0; k < self->live->len; k++)
    {
      const LivePoint *p = &g_array_index (self->live, LivePoint, k);
      double x = tdm_dashboard_x (self, p->step, p->epoch);

      tdm_chart_append (self->charts[CHART_LOSS], p->test ? self->loss_test : self->loss_train,
                        x, p->loss);
      tdm_chart_append (self->charts[CHART_ACCURACY],
                        p->test ? self->accuracy_test : self->accuracy_train, x, p->accuracy);
    }
}

void
tdm_dashboard_set_x_axis (TdmDashboard      *self,
                          TdmDashboardXAxis  axis)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));
  g_return_if_fail (axis == TDM_DASHBOARD_X_EPOCH || axis == TDM_DASHBOARD_X_STEP);

  if (axis == self->x_axis)
    return;

  self->x_axis = axis;
  tdm_dashboard_replot (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_X_AXIS]);
}

TdmDashboardXAxis
tdm_dashboard_get_x_axis (TdmDashboard *self)
{
  g_return_val_if_fail (TDM_IS_DASHBOARD (self), TDM_DASHBOARD_X_EPOCH);

  return self->x_axis;
}

void
tdm_dashboard_set_overlays (TdmDashboard *self,
                            GPtrArray    *records)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));

  g_ptr_array_set_size (self->overlays, 0);
  for (guint i = 0; records != NULL && i < records->len; i++)
    {
      const TdmRunRecord *record = g_ptr_array_index (records, i);
      Overlay *o = g_new0 (Overlay, 1);

      o->name = g_strdup (record->name);
      o->points = g_array_copy (record->points);
      g_ptr_array_add (self->overlays, o);
    }

  tdm_dashboard_replot (self);
  /* Earlier runs are worth seeing before any run of this session. */
  if (self->overlays->len > 0)
    tdm_dashboard_show_charts (self);
}

int
tdm_dashboard_get_overlay_series (TdmDashboard *self,
                                  const char   *chart_id,
                                  guint         index)
{
  Overlay *o;

  g_return_val_if_fail (TDM_IS_DASHBOARD (self), -1);

  if (index >= self->overlays->len)
    return -1;
  o = g_ptr_array_index (self->overlays, index);
  if (g_strcmp0 (chart_id, "loss") == 0)
    return (int) o->loss_series;
  if (g_strcmp0 (chart_id, "accuracy") == 0)
    return (int) o->accuracy_series;
  return -1;
}

static void
tdm_dashboard_begin (TdmDashboard          *self,
                     const TdmStartedEvent *started)
{
  TdmChart *memory = self->charts[CHART_MEMORY];
  TdmChart *load = self->charts[CHART_LOAD];
  gboolean any_gpu = FALSE;

  tdm_dashboard_stop_telemetry (self);

  self->started = *started;
  self->started.replicas = CLAMP (started->replicas, 0, TDM_MAX_REPLICAS);
  self->have_started = TRUE;
  self->have_step = FALSE;
  self->paused = FALSE;
  self->last_elapsed = 0;
  self->last_elapsed_at = g_get_monotonic_time ();
  memset (&self->last_step, 0, sizeof self->last_step);
  tdm_dashboard_show_charts (self);

  tdm_metrics_log_begin (self->log, &self->started);
  /* Only now do the charts show the run those settings belong to. */
  if (self->next_info != NULL)
    {
      g_clear_pointer (&self->info, tdm_export_info_free);
      self->info = g_steal_pointer (&self->next_info);
    }
  for (int id = 0; id < N_CHARTS; id++)
    tdm_dashboard_drop_pending (self, id);

  /* The live curves start over; the overlays stay as they are (redrawing twenty of
   * them at each Start would cost a frame). */
  g_array_set_size (self->live, 0);
  tdm_series_clear (tdm_chart_get_series (self->charts[CHART_LOSS], self->loss_train));
  tdm_series_clear (tdm_chart_get_series (self->charts[CHART_LOSS], self->loss_test));
  tdm_series_clear (tdm_chart_get_series (self->charts[CHART_ACCURACY], self->accuracy_train));
  tdm_series_clear (tdm_chart_get_series (self->charts[CHART_ACCURACY], self->accuracy_test));
  gtk_widget_queue_draw (GTK_WIDGET (self->charts[CHART_LOSS]));
  gtk_widget_queue_draw (GTK_WIDGET (self->charts[CHART_ACCURACY]));
  tdm_chart_clear (self->charts[CHART_THROUGHPUT]);
  tdm_chart_remove_all_series (memory);
  tdm_chart_remove_all_series (load);

  for (int r = 0; r < self->started.replicas; r++)
    {
      g_autofree char *label = replica_label (&self->started, r);
      const char *id = self->started.device[r];
      int on_gpu = 1;
      GdkRGBA colour;

      tdm_chart_device_colour (r, &colour);
      self->gpu[r] = -1;
      self->shares_gpu[r] = FALSE;
      if (g_str_has_prefix (id, "cuda:"))
        {
          self->gpu[r] = (int) g_ascii_strtoll (id + 5, NULL, 10);
          any_gpu = TRUE;
          for (int q = 0; q < r; q++)
            self->shares_gpu[r] |= self->gpu[q] == self->gpu[r];
          for (int q = r + 1; q < self->started.replicas; q++)
            on_gpu += g_strcmp0 (self->started.device[q], id) == 0;
        }
      self->telemetry_memory[r] = FALSE;
      self->telemetry_load[r] = FALSE;
      if (self->shares_gpu[r])
        continue;
      if (on_gpu > 1)
        {
          g_free (label);
          /* Translators: the memory and load charts' line for a GPU that several
           * replicas share, e.g. "cuda:0 · 3 replicas" */
          label = g_strdup_printf (_("%.32s · %d replicas"), id, on_gpu);
        }

      self->memory_series[r] = tdm_chart_add_series (memory, label, &colour,
                                                     TDM_CHART_STYLE_LINE);
      self->load_series[r] = tdm_chart_add_series (load, label, &colour,
                                                   TDM_CHART_STYLE_LINE);
    }

  /* One capacity line per GPU, kept by the first replica on it; the CPU's "capacity"
   * is all of the machine's memory, which would flatten everything else, so it has
   * none. */
  for (int r = 0; r < self->started.replicas; r++)
    {
      g_autofree char *label = NULL;
      gboolean shared = FALSE;
      GdkRGBA colour;

      self->capacity_series[r] = -1;
      if (self->gpu[r] < 0)
        continue;

      for (int q = 0; q < r; q++)
        shared |= self->gpu[q] == self->gpu[r];
      if (shared)
        continue;

      tdm_chart_device_colour (r, &colour);
      /* Translators: the memory chart's line for a GPU's total memory; %s is "cuda:0" */
      label = g_strdup_printf (_("%.32s capacity"), self->started.device[r]);
      self->capacity_series[r] = tdm_chart_add_series (memory, label, &colour,
                                                       TDM_CHART_STYLE_REFERENCE);
    }

  /* The step-time chart starts on the main replica; its menu offers the others. */
  g_menu_remove_all (self->step_time_devices);
  for (int r = 0; self->started.replicas > 1 && r < self->started.replicas; r++)
    {
      g_autofree char *label = replica_label (&self->started, r);
      g_autoptr(GMenuItem) item = g_menu_item_new (label, NULL);

      g_menu_item_set_action_and_target_value (item, "dashboard.step-replica",
                                               g_variant_new_int32 (r));
      g_menu_append_item (self->step_time_devices, item);
    }
  self->step_replica = CLAMP (started->main_replica, 0, MAX (self->started.replicas - 1, 0));
  tdm_dashboard_setup_step_time (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STEP_REPLICA]);

  if (any_gpu)
    {
      self->telemetry = tdm_telemetry_new (TELEMETRY_INTERVAL_MS);
      self->telemetry_source = g_timeout_add (TELEMETRY_INTERVAL_MS,
                                              tdm_dashboard_sample_telemetry, self);
    }

  gtk_progress_bar_set_fraction (self->progress_bar, 0);
  {
    g_autofree char *text = g_strdup_printf (ngettext ("Starting: %d replica, batch %d",
                                                       "Starting: %d replicas, batch %d",
                                                       self->started.replicas),
                                             self->started.replicas, self->started.batch);
    tdm_status_line_set_text (self->status_line, text);
    self->status_stale = FALSE;
  }
}

static void
tdm_dashboard_handle_devices (TdmDashboard          *self,
                              const TdmDevicesEvent *devices)
{
  int n = MIN (devices->replicas, self->started.replicas);
  double x = devices->elapsed;

  for (int r = 0; r < n; r++)
    {
      double busy = devices->device[r].compute_ms + devices->device[r].comm_ms +
                    devices->device[r].wait_ms;
      gint64 bytes;
      double load;

      if (self->shares_gpu[r])
        continue;
      if (!self->telemetry_memory[r])
        {
          bytes = devices->device[r].tandem_bytes;
          if (self->gpu[r] >= 0 && devices->device[r].used_bytes >= 0)
            bytes = devices->device[r].used_bytes;
          if (bytes >= 0)
            tdm_dashboard_queue (self, CHART_MEMORY, self->memory_series[r],
                              x, (double) bytes);
          if (self->capacity_series[r] >= 0 && devices->device[r].total_bytes > 0)
            tdm_dashboard_queue (self, CHART_MEMORY, self->capacity_series[r],
                              x, (double) devices->device[r].total_bytes);
        }

      if (!self->telemetry_load[r])
        {
          load = devices->device[r].utilization;
          if (load < 0)
            load = busy > 0 ? 100.0 * devices->device[r].compute_ms / busy : NAN;
          tdm_dashboard_queue (self, CHART_LOAD, self->load_series[r], x, load);
        }
    }

  if (self->step_replica >= 0 && self->step_replica < n)
    tdm_dashboard_append_step_time (x,
                                    devices->device[self->step_replica].compute_ms,
                                    devices->device[self->step_replica].comm_ms,
                                    devices->device[self->step_replica].wait_ms,
                                    self);
}

void
tdm_dashboard_handle_event (TdmDashboard   *self,
                            const TdmEvent *event)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));
  g_return_if_fail (event != NULL);

  if (event->kind == TDM_EVENT_STARTED)
    {
      tdm_dashboard_begin (self, &event->started);
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

        self->last_step = *s;
        self->have_step = TRUE;
        tdm_dashboard_note_elapsed (self, s->elapsed);
        {
          LivePoint p = { s->step, s->epoch_float, s->train_loss,
                          100.0 * s->train_accuracy, FALSE };
          double x = tdm_dashboard_x (self, s->step, s->epoch_float);

          g_array_append_val (self->live, p);
          tdm_dashboard_queue (self, CHART_LOSS, self->loss_train, x, p.loss);
          tdm_dashboard_queue (self, CHART_ACCURACY, self->accuracy_train, x, p.accuracy);
        }
        tdm_dashboard_queue (self, CHART_THROUGHPUT, self->throughput,
                             s->elapsed, s->samples_per_second);
        tdm_dashboard_status_changed (self);
      }
      break;

    case TDM_EVENT_DEVICES:
      tdm_dashboard_note_elapsed (self, event->devices.elapsed);
      tdm_dashboard_handle_devices (self, &event->devices);
      break;

    case TDM_EVENT_EPOCH:
      tdm_dashboard_note_elapsed (self, event->epoch.elapsed);
      {
        LivePoint p = { event->epoch.step, event->epoch.epoch, event->epoch.test_loss,
                        100.0 * event->epoch.test_accuracy, TRUE };
        double x = tdm_dashboard_x (self, p.step, p.epoch);

        g_array_append_val (self->live, p);
        tdm_dashboard_queue (self, CHART_LOSS, self->loss_test, x, p.loss);
        tdm_dashboard_queue (self, CHART_ACCURACY, self->accuracy_test, x, p.accuracy);
      }
      break;

    case TDM_EVENT_PAUSED:
      self->last_elapsed = tdm_dashboard_now (self);
      self->paused = TRUE;
      tdm_dashboard_update_status (self);
      break;

    case TDM_EVENT_RESUMED:
      self->paused = FALSE;
      self->last_elapsed_at = g_get_monotonic_time ();
      tdm_dashboard_update_status (self);
      break;

    case TDM_EVENT_FINISHED:
      {
        const TdmFinishedEvent *f = &event->finished;
        g_autofree char *elapsed = format_duration (f->elapsed);
        g_autofree char *steps = format_count (f->steps);
        g_autofree char *text = NULL;

        /* The charts catch up at their pace; the status line says it is over now. */
        self->paused = FALSE;
        tdm_pacer_unmark (self->pacer, STATUS_SLOT);
        self->status_stale = FALSE;
        if (f->stopped)
          text = g_strdup_printf (_("Stopped after %s steps in %s"), steps, elapsed);
        else if (isfinite (f->test_accuracy))
          text = g_strdup_printf (_("Finished in %s · test accuracy %.1f %% · test loss %.4f"),
                                  elapsed, 100.0 * f->test_accuracy, f->test_loss);
        else
          text = g_strdup_printf (_("Finished in %s"), elapsed);
        tdm_status_line_set_text (self->status_line, text);
        if (!f->stopped)
          gtk_progress_bar_set_fraction (self->progress_bar, 1.0);
      }
      break;

    case TDM_EVENT_FAILED:
      tdm_pacer_unmark (self->pacer, STATUS_SLOT);
      self->status_stale = FALSE;
      tdm_status_line_set_text (self->status_line, _("Training failed"));
      break;

    case TDM_EVENT_STARTED:
    default:
      break;
    }
}

void
tdm_dashboard_end (TdmDashboard *self)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));

  /* Points still queued reach the charts over the next few ticks, one chart a tick,
   * rather than all six redrawing in one frame. */
  tdm_dashboard_stop_telemetry (self);
  self->paused = FALSE;
}

void
tdm_dashboard_set_status (TdmDashboard *self,
                          const char   *text)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));

  tdm_pacer_unmark (self->pacer, STATUS_SLOT);
  self->status_stale = FALSE;
  tdm_status_line_set_text (self->status_line, text ? text : "");
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

  if (g_str_equal (format, "png"))
    return tdm_chart_export_png (chart, path, width, height, self->info, error);
  if (g_str_equal (format, "svg"))
    return tdm_chart_export_svg (chart, path, width, height, self->info, error);
  if (g_str_equal (format, "csv"))
    return tdm_chart_export_csv (chart, path, self->info, error);

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
  g_return_val_if_fail (path != NULL, FALSE);

  return tdm_metrics_log_write_csv (self->log, path, self->info, error);
}

void
tdm_dashboard_set_export_info (TdmDashboard  *self,
                               TdmExportInfo *info)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));

  g_clear_pointer (&self->next_info, tdm_export_info_free);
  self->next_info = info;
}

const TdmExportInfo *
tdm_dashboard_get_export_info (TdmDashboard *self)
{
  g_return_val_if_fail (TDM_IS_DASHBOARD (self), NULL);

  return self->info;
}

TdmMetricsLog *
tdm_dashboard_get_log (TdmDashboard *self)
{
  g_return_val_if_fail (TDM_IS_DASHBOARD (self), NULL);

  return self->log;
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

  tdm_dashboard_stop_telemetry (self);
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

  g_clear_pointer (&self->log, tdm_metrics_log_free);
  g_clear_pointer (&self->info, tdm_export_info_free);
  g_clear_pointer (&self->next_info, tdm_export_info_free);
  for (int id = 0; id < N_CHARTS; id++)
    g_clear_pointer (&self->pending[id], g_array_unref);
  g_clear_object (&self->step_time_devices);
  g_clear_object (&self->x_axis_menu);
  g_clear_pointer (&self->live, g_array_unref);
  g_clear_pointer (&self->overlays, g_ptr_array_unref);

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
      g_value_set_int (value, self->step_replica);
      break;

    case PROP_X_AXIS:
      g_value_set_string (value, self->x_axis == TDM_DASHBOARD_X_STEP ? "step" : "epoch");
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
                                        ? TDM_DASHBOARD_X_STEP : TDM_DASHBOARD_X_EPOCH);
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

  self->log = tdm_metrics_log_new ();
  for (int id = 0; id < N_CHARTS; id++)
    self->pending[id] = g_array_new (FALSE, FALSE, sizeof (Pending));
  self->pacer = tdm_pacer_new (PACE_MS, REFRESH_MS, tdm_dashboard_paced, self);
  self->step_time_devices = g_menu_new ();
  self->step_replica = 0;
  self->live = g_array_new (FALSE, FALSE, sizeof (LivePoint));
  self->overlays = g_ptr_array_new_with_free_func (overlay_free);
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
  tdm_dashboard_setup_step_time (self);

  gtk_widget_set_visible (self->status_separator, FALSE);
  gtk_widget_set_visible (self->status_box, FALSE);
  tdm_dashboard_set_can_start (self, FALSE);
}

void
tdm_dashboard_set_can_start (TdmDashboard *self,
                             gboolean      can_start)
{
  g_return_if_fail (TDM_IS_DASHBOARD (self));

  /* Never "press Start" while Start cannot be pressed. */
  adw_status_page_set_description (self->empty_page,
                                   can_start ? _("Press Start (Ctrl+Enter) to train with the settings on the left.")
                                             : _("Choose a dataset, a network and at least one device in the settings (F9)."));
}

GtkWidget *
tdm_dashboard_new (void)
{
  return g_object_new (TDM_TYPE_DASHBOARD, NULL);
}
