/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-item.c: one run of the history, as an item of a list model.
 *
 * The record is loaded once and kept; only the name changes afterwards (a rename is
 * an appended line on disk, mirrored here). The two choices are plain properties, so
 * rows bind their check buttons to them. A scaling sweep is an item too, but it has
 * no curves to draw and no run to be measured against: it never takes either.
 */

#include <math.h>
#include <string.h>
#include <glib/gi18n.h>

#include "tdm-run-item.h"

struct _TdmRunItem
{
  GObject       parent_instance;

  TdmRunRecord *record;
  gboolean      overlay;
  gboolean      baseline;
};

enum {
  PROP_0,
  PROP_NAME,
  PROP_OVERLAY,
  PROP_BASELINE,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmRunItem, tdm_run_item, G_TYPE_OBJECT)

static void
tdm_run_item_finalize (GObject *object)
{
  TdmRunItem *self = TDM_RUN_ITEM (object);

  g_clear_pointer (&self->record, tdm_run_record_free);

  G_OBJECT_CLASS (tdm_run_item_parent_class)->finalize (object);
}

static void
tdm_run_item_get_property (GObject    *object,
                           guint       prop_id,
                           GValue     *value,
                           GParamSpec *pspec)
{
  TdmRunItem *self = TDM_RUN_ITEM (object);

  switch (prop_id)
    {
    case PROP_NAME:
      g_value_set_string (value, tdm_run_item_get_name (self));
      break;
    case PROP_OVERLAY:
      g_value_set_boolean (value, self->overlay);
      break;
    case PROP_BASELINE:
      g_value_set_boolean (value, self->baseline);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_run_item_set_property (GObject      *object,
                           guint         prop_id,
                           const GValue *value,
                           GParamSpec   *pspec)
{
  TdmRunItem *self = TDM_RUN_ITEM (object);

  switch (prop_id)
    {
    case PROP_NAME:
      tdm_run_item_set_name (self, g_value_get_string (value));
      break;
    case PROP_OVERLAY:
      tdm_run_item_set_overlay (self, g_value_get_boolean (value));
      break;
    case PROP_BASELINE:
      tdm_run_item_set_baseline (self, g_value_get_boolean (value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_run_item_class_init (TdmRunItemClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = tdm_run_item_finalize;
  object_class->get_property = tdm_run_item_get_property;
  object_class->set_property = tdm_run_item_set_property;

  properties[PROP_NAME] =
    g_param_spec_string ("name", NULL, NULL, NULL,
                         G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_OVERLAY] =
    g_param_spec_boolean ("overlay", NULL, NULL, FALSE,
                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_BASELINE] =
    g_param_spec_boolean ("baseline", NULL, NULL, FALSE,
                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
tdm_run_item_init (TdmRunItem *self)
{
}

TdmRunItem *
tdm_run_item_new (TdmRunRecord *record)
{
  TdmRunItem *self;

  g_return_val_if_fail (record != NULL, NULL);

  self = g_object_new (TDM_TYPE_RUN_ITEM, NULL);
  self->record = record;

  return self;
}

const TdmRunRecord *
tdm_run_item_get_record (TdmRunItem *self)
{
  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), NULL);

  return self->record;
}

const char *
tdm_run_item_get_id (TdmRunItem *self)
{
  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), NULL);

  return self->record->id;
}

const char *
tdm_run_item_get_name (TdmRunItem *self)
{
  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), NULL);

  return self->record->name;
}

void
tdm_run_item_set_name (TdmRunItem *self,
                       const char *name)
{
  g_return_if_fail (TDM_IS_RUN_ITEM (self));
  g_return_if_fail (name != NULL);

  if (g_strcmp0 (name, self->record->name) == 0)
    return;
  g_free (self->record->name);
  self->record->name = g_strdup (name);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_NAME]);
}

gboolean
tdm_run_item_get_overlay (TdmRunItem *self)
{
  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), FALSE);

  return self->overlay;
}

void
tdm_run_item_set_overlay (TdmRunItem *self,
                          gboolean    overlay)
{
  g_return_if_fail (TDM_IS_RUN_ITEM (self));

  if (self->overlay == !!overlay || (overlay && tdm_run_item_is_experiment (self)))
    return;
  self->overlay = !!overlay;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_OVERLAY]);
}

gboolean
tdm_run_item_get_baseline (TdmRunItem *self)
{
  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), FALSE);

  return self->baseline;
}

void
tdm_run_item_set_baseline (TdmRunItem *self,
                           gboolean    baseline)
{
  g_return_if_fail (TDM_IS_RUN_ITEM (self));

  if (self->baseline == !!baseline || (baseline && tdm_run_item_is_experiment (self)))
    return;
  self->baseline = !!baseline;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_BASELINE]);
}

/* "cpu ×2" when every replica is on one device, else the devices in order. */
static char *
describe_devices (const TdmConfig *config)
{
  g_autoptr(GString) s = g_string_new (NULL);
  int n = MIN (config->replicas, TDM_MAX_REPLICAS);
  gboolean same = n > 0;
  char name[TDM_DEVICE_NAME_MAX];

  for (int i = 1; i < n; i++)
    same &= tdm_device_id_equal (config->devices[i], config->devices[0]);
  if (n == 0)
    return g_strdup ("—");
  if (same && n > 1)
    return g_strdup_printf ("%s ×%d", tdm_device_id_name (config->devices[0], name), n);
  for (int i = 0; i < n; i++)
    {
      if (i > 0)
        g_string_append (s, ", ");
      g_string_append (s, tdm_device_id_name (config->devices[i], name));
    }
  return g_string_free (g_steal_pointer (&s), FALSE);
}

gboolean
tdm_run_item_is_experiment (TdmRunItem *self)
{
  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), FALSE);

  return self->record->kind == TDM_RUN_EXPERIMENT;
}

gboolean
tdm_run_item_is_sweep (TdmRunItem *self)
{
  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), FALSE);

  return tdm_run_record_is_sweep (self->record);
}

/* "scaling, strong · cpu ×2 · allreduce · batch 200 · 1.85× on 2": the sweep's
 * settings, then the speed-up it reached at its most devices, or how it ended. */
static char *
describe_sweep (const TdmRunRecord *r)
{
  g_autofree char *devices = describe_devices (r->config);
  g_autofree char *kind = NULL;
  g_autofree char *batch = NULL;
  g_autofree char *outcome = NULL;
  guint n = r->experiment.points->len;

  /* Translators: how a scaling run in the history is marked: strong or weak */
  kind = g_strdup (r->experiment.mode == TDM_SCALING_WEAK ? _("scaling, weak") : _("scaling, strong"));
  /* Translators: the batch a scaling run started from, in the run history */
  batch = g_strdup_printf (_("batch %d"), r->config->batch);
  if (r->failed)
    outcome = g_strdup (_("failed"));
  else if (n > 0 && (!r->finished || r->final.stopped) && (int) n < r->experiment.count)
    /* Translators: a scaling run that ended early; %u points measured of %d */
    outcome = g_strdup_printf (_("stopped after %u of %d"), n, r->experiment.count);
  else if (n > 0)
    {
      const TdmScalingPoint *last = &g_array_index (r->experiment.points, TdmScalingPoint, n - 1);

      /* Translators: the speed-up a scaling run reached and on how many devices */
      outcome = g_strdup_printf (_("%.2f× on %d"), last->speedup, last->devices);
    }
  else
    outcome = g_strdup (_("unfinished"));
  return g_strjoin (" · ", kind, devices, tdm_strategy_name (r->config->strategy), batch,
                    outcome, NULL);
}

/* "compare with one device · cpu ×2 · 2 devices against one, after 50 steps: identical…":
 * the comparison, its devices, then its result or how it ended. */
static char *
describe_comparison (const TdmRunRecord *r)
{
  g_autofree char *devices = describe_devices (r->config);
  const char *outcome;

  if (r->failed)
    outcome = _("failed");
  else if (r->experiment.result != NULL)
    outcome = r->experiment.result;
  else if (r->finished)
    outcome = _("stopped");
  else
    outcome = _("unfinished");
  return g_strjoin (" · ", r->experiment.kind == TDM_EXPERIMENT_COMPARE
                           /* Translators: how a comparison in the history is marked */
                           ? _("compare with one device")
                           /* Translators: how a comparison in the history is marked */
                           : _("compare strategies"),
                    devices, outcome, NULL);
}

/* "learning-rate test · cpu ×2 · batch 128 · suggested learning rate 0.012 (100 steps)":
 * the test, its devices and batch, then its result or how it ended. */
static char *
describe_lr_find (const TdmRunRecord *r)
{
  g_autofree char *devices = describe_devices (r->config);
  g_autofree char *batch = g_strdup_printf (_("batch %d"), r->config->batch);
  const char *outcome;

  if (r->failed)
    outcome = _("failed");
  else if (r->experiment.result != NULL)
    outcome = r->experiment.result;
  else
    outcome = _("unfinished");
  /* Translators: how a learning-rate range test in the history is marked */
  return g_strjoin (" · ", _("learning-rate test"), devices, batch, outcome, NULL);
}

gboolean
tdm_run_item_is_lr_find (TdmRunItem *self)
{
  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), FALSE);

  return self->record->kind == TDM_RUN_EXPERIMENT &&
         self->record->experiment.kind == TDM_EXPERIMENT_LR_FIND;
}

char *
tdm_run_item_describe (TdmRunItem *self)
{
  const TdmRunRecord *r;
  g_autofree char *devices = NULL;
  g_autofree char *batch = NULL;
  g_autofree char *outcome = NULL;
  g_autofree char *early = NULL;

  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), NULL);

  r = self->record;
  if (tdm_run_record_is_sweep (r))
    return describe_sweep (r);
  if (tdm_run_item_is_lr_find (self))
    return describe_lr_find (r);
  if (r->kind == TDM_RUN_EXPERIMENT)
    return describe_comparison (r);
  devices = describe_devices (r->config);
  /* Translators: the global batch size of a run, in the run history */
  batch = g_strdup_printf (_("batch %d"), r->config->batch);
  early = r->finished ? tdm_finished_early_stop_text (&r->final, TRUE) : NULL;
  if (r->failed)
    outcome = g_strdup (_("failed"));
  else if (r->finished && isfinite (r->final.test_accuracy) && early != NULL)
    /* Translators: a run's test accuracy, then "stopped early at epoch 9 (best 6)" */
    outcome = g_strdup_printf (_("%.1f %%, %s"), 100.0 * r->final.test_accuracy, early);
  else if (r->finished && isfinite (r->final.test_accuracy))
    outcome = g_strdup_printf ("%.1f %%", 100.0 * r->final.test_accuracy);
  else if (r->finished && !r->final.stopped)
    /* Translators: a run that reached its end (its step limit) with no test score */
    outcome = g_strdup (_("finished"));
  else if (r->finished)
    outcome = g_strdup (_("stopped"));
  else
    /* Translators: a run whose file ends before its end (it crashed or still runs) */
    outcome = g_strdup (_("unfinished"));

  return g_strjoin (" · ", devices, tdm_strategy_name (r->config->strategy), batch,
                    outcome, NULL);
}

char *
tdm_run_item_format_date (TdmRunItem *self)
{
  g_autoptr(GDateTime) date = NULL;

  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), NULL);

  date = g_date_time_new_from_unix_local (self->record->created);
  if (date == NULL)
    return g_strdup ("—");
  /* Translators: a run's date in the run history, strftime format; the same as a
   * run's default name (its start, to the second), so the two read alike */
  return g_date_time_format (date, _("%Y-%m-%d %H:%M:%S"));
}

char *
tdm_run_item_format_devices (TdmRunItem *self)
{
  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), NULL);

  return describe_devices (self->record->config);
}

static void
add_span (TdmDevicePhases *d,
          TdmPhase         phase,
          double           start,
          double           end)
{
  if (end - start <= 1e-6 || d->spans >= TDM_MAX_PHASE_SPANS)
    return;
  d->span[d->spans].phase = phase;
  d->span[d->spans].start_ms = (float) start;
  d->span[d->spans].end_ms = (float) end;
  d->spans++;
}

/* The device's mean communication hidden under backward, ms, over the samples
 * tdm_run_record_phase_means() takes (the first step left out where others came). */
static double
mean_hidden_ms (const TdmRunRecord *r,
                int                 device)
{
  long first = G_MAXLONG, last = G_MINLONG;
  double sum = 0;
  int n = 0;

  for (guint i = 0; i < r->phases->len; i++)
    {
      long step = g_array_index (r->phases, TdmHistoryPhases, i).step;

      first = MIN (first, step);
      last = MAX (last, step);
    }
  for (guint i = 0; i < r->phases->len; i++)
    {
      const TdmHistoryPhases *p = &g_array_index (r->phases, TdmHistoryPhases, i);

      if (p->device != device || (p->step == first && last > first))
        continue;
      sum += p->hidden_ms;
      n++;
    }
  return n > 0 ? sum / n : 0;
}

gboolean
tdm_run_item_mean_step (TdmRunItem     *self,
                        TdmPhasesEvent *step)
{
  const TdmRunRecord *r;
  double ms[TDM_MAX_REPLICAS][TDM_PHASE_COUNT];
  double ready[TDM_MAX_REPLICAS], done[TDM_MAX_REPLICAS];
  double start = 0, end = 0;
  int n, main_replica;
  gboolean main_strategy;

  g_return_val_if_fail (TDM_IS_RUN_ITEM (self), FALSE);
  g_return_val_if_fail (step != NULL, FALSE);

  r = self->record;
  memset (step, 0, sizeof *step);
  if (r->kind != TDM_RUN_TRAINING || r->config == NULL)
    return FALSE;
  n = MIN (tdm_config_replica_count (r->config), TDM_MAX_REPLICAS);
  for (int d = 0; d < n; d++)
    if (tdm_run_record_phase_means (r, d, ms[d]) == 0)
      return FALSE;
  if (n <= 0)
    return FALSE;
  main_strategy = r->config->strategy == TDM_STRATEGY_MAIN;
  main_replica = CLAMP (r->config->main_replica, 0, n - 1);
  step->replicas = n;

  /* Forward and backward from 0; the first collective when the last device is ready. */
  for (int d = 0; d < n; d++)
    {
      TdmDevicePhases *p = &step->device[d];

      p->hidden_ms = (float) mean_hidden_ms (r, d);
      add_span (p, TDM_PHASE_FORWARD, 0, ms[d][TDM_PHASE_FORWARD]);
      ready[d] = ms[d][TDM_PHASE_FORWARD] + ms[d][TDM_PHASE_BACKWARD];
      add_span (p, TDM_PHASE_BACKWARD, ms[d][TDM_PHASE_FORWARD], ready[d]);
      /* --accumulate's local sums come before the step's collectives. */
      if (ms[d][TDM_PHASE_ACCUMULATE] > 0)
        {
          add_span (p, TDM_PHASE_ACCUMULATE, ready[d], ready[d] + ms[d][TDM_PHASE_ACCUMULATE]);
          ready[d] += ms[d][TDM_PHASE_ACCUMULATE];
        }
      start = MAX (start, ready[d]);
    }
  for (int d = 0; d < n; d++)
    {
      TdmDevicePhases *p = &step->device[d];
      double comm = ms[d][TDM_PHASE_REDUCE] + ms[d][TDM_PHASE_ALLREDUCE];

      add_span (p, TDM_PHASE_WAIT, ready[d], start);
      add_span (p, main_strategy ? TDM_PHASE_REDUCE : TDM_PHASE_ALLREDUCE, start, start + comm);
      done[d] = start + comm;
      /* All-reduce: each device updates its own copy at once. */
      if (!main_strategy)
        add_span (p, TDM_PHASE_UPDATE, done[d], done[d] + ms[d][TDM_PHASE_UPDATE]);
      end = MAX (end, done[d]);
    }
  if (!main_strategy || n < 2)
    {
      if (main_strategy)
        add_span (&step->device[0], TDM_PHASE_UPDATE, done[0], done[0] + ms[0][TDM_PHASE_UPDATE]);
      return TRUE;
    }
  /* `main`: the main device updates once every gradient is in; the others wait for
   * the broadcast of what it computed. */
  add_span (&step->device[main_replica], TDM_PHASE_WAIT, done[main_replica], end);
  add_span (&step->device[main_replica], TDM_PHASE_UPDATE, end, end + ms[main_replica][TDM_PHASE_UPDATE]);
  start = end + ms[main_replica][TDM_PHASE_UPDATE];
  for (int d = 0; d < n; d++)
    {
      TdmDevicePhases *p = &step->device[d];

      if (d != main_replica)
        add_span (p, TDM_PHASE_WAIT, done[d], start);
      add_span (p, TDM_PHASE_BROADCAST, start, start + ms[d][TDM_PHASE_BROADCAST]);
    }
  return TRUE;
}
