/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-experiment-scaling.c — the scaling sweep as an experiment (tdm-experiment.h):
 * for n = 1 … N, a short warm-up training, then timed trainings of the same
 * configuration, TDM_SCALING_RUNS of them or more while their rates spread wider than
 * TDM_SCALING_SPREAD; the median becomes the point. The meter (tdm-scaling.c) times
 * each training from its events, on the thread that trains it. */
#include "tdm-experiment-private.h"
#include "tdm-error.h"
#include "tdm-i18n.h"
#include "tdm-iterator.h"
#include "tdm-precision-auto.h"

#include <math.h>
#include <string.h>

/* Steps of the warm-up training before each point (first-touch costs, thread start-up). */
#define WARMUP_STEPS 10

typedef struct {
  TdmExperiment parent;
  TdmScalingMode mode;
  int count;                    /* N */
  int per_device;               /* weak scaling's batch per device */
  int n;                        /* the point being measured, 1 … N */
  gboolean warming;             /* the training under way is the warm-up */
  TdmScalingMeter meter;
  TdmScalingResult results[TDM_SCALING_RUNS_MAX];
  int runs;                     /* of the point being measured */
  double base;                  /* samples/s at n = 1 */
  GArray *points;               /* TdmScalingPoint */
  TdmScalingSink sink;
  gpointer sink_data;
} Scaling;

/* The configuration of point n: its first n devices, every run alike. */
static TdmConfig *
point_config(const Scaling *s, long steps)
{
  const TdmConfig *config = s->parent.config;
  TdmConfig *cfg = tdm_config_copy(config);
  cfg->replicas = s->n;
  cfg->main_replica = MIN(config->main_replica, s->n - 1);
  cfg->batch = s->mode == TDM_SCALING_WEAK ? s->per_device * s->n : config->batch;
  /* max_steps ends every run; the epochs only need to outlast it. */
  cfg->epochs = MAX(cfg->epochs, 1000000);
  cfg->max_steps = steps;
  /* Devices alike at every n: a lone CPU worker would otherwise take every core's
   * BLAS threads, and the speed-up over it would not be like for like. */
  cfg->cpu_threads = 1;
  /* And alike in precision: auto as all the devices resolve it, not the first n (a
   * newer GPU alone would compute in bf16 where the sweep's others make it fp32). */
  cfg->precision = tdm_precision_resolve_here(config->precision, config->devices,
                                              tdm_config_replica_count(config));
  g_clear_pointer(&cfg->save_path, g_free);
  return cfg;
}

static gboolean
scaling_next(TdmExperiment *e)
{
  Scaling *s = (Scaling *)e;
  if (s->n > s->count)
    return FALSE;
  long steps = s->warming ? WARMUP_STEPS : e->steps;
  TdmConfig *cfg = point_config(s, steps);
  memset(&s->meter, 0, sizeof s->meter);
  s->meter.batch = cfg->batch;
  /* Translators: a scaling sweep's progress: measuring n devices of N */
  g_autofree char *status = g_strdup_printf(
    tdm_engine_ngettext("Measuring %d device of %d…", "Measuring %d devices of %d…", s->n), s->n,
    s->count);
  tdm_experiment_set_training(e, cfg, NULL, status, FALSE);
  return TRUE;
}

static void
scaling_observe(TdmExperiment *e, const TdmEvent *event)
{
  tdm_scaling_meter_event(event, &((Scaling *)e)->meter);
}

/* The median run's index among results[0, n) by samples per second. */
static int
median_run(const TdmScalingResult *results, int n)
{
  int order[TDM_SCALING_RUNS_MAX];
  for (int i = 0; i < n; i++)
    order[i] = i;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && results[order[j]].samples_per_second <
                                 results[order[j - 1]].samples_per_second; j--) {
      int swap = order[j];
      order[j] = order[j - 1];
      order[j - 1] = swap;
    }
  return order[(n - 1) / 2];
}

static void
add_point(Scaling *s)
{
  double slowest = INFINITY, fastest = 0;
  for (int i = 0; i < s->runs; i++) {
    slowest = MIN(slowest, s->results[i].samples_per_second);
    fastest = MAX(fastest, s->results[i].samples_per_second);
  }
  const TdmScalingResult *median = &s->results[median_run(s->results, s->runs)];
  if (s->n == 1)
    s->base = median->samples_per_second;
  TdmScalingPoint point = {
    .index = s->n - 1,
    .count = s->count,
    .devices = s->n,
    .batch = s->parent.training.config->batch,
    .steps = s->parent.steps,
    .samples_per_second = median->samples_per_second,
    .speedup = median->samples_per_second / s->base,
    .compute_ms = median->compute_ms,
    .comm_ms = median->comm_ms,
    .wait_ms = median->wait_ms,
    .samples_per_second_min = slowest,
    .samples_per_second_max = fastest,
    .speedup_min = slowest / s->base,
    .speedup_max = fastest / s->base,
    .runs = s->runs,
    .cpu_threads = median->cpu_threads,
  };
  point.efficiency = point.speedup / s->n;
  memcpy(point.memory_bytes, median->peak_bytes, sizeof point.memory_bytes);
  g_array_append_val(s->points, point);
  if (s->sink != NULL)
    s->sink(&point, s->sink_data);
}

static gboolean
scaling_reduce(TdmExperiment *e, const float *parameters, size_t count, GError **error)
{
  Scaling *s = (Scaling *)e;
  if (s->warming) {
    s->warming = FALSE;
    s->runs = 0;
    return TRUE;
  }
  if (!tdm_scaling_meter_result(&s->meter, e->steps, &s->results[s->runs])) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("%ld steps on %d devices were too few to time: give more steps"), e->steps,
                s->n);
    return FALSE;
  }
  s->runs++;
  if (s->runs < TDM_SCALING_RUNS)
    return TRUE;
  double slowest = INFINITY, fastest = 0;
  for (int i = 0; i < s->runs; i++) {
    slowest = MIN(slowest, s->results[i].samples_per_second);
    fastest = MAX(fastest, s->results[i].samples_per_second);
  }
  double middle = s->results[median_run(s->results, s->runs)].samples_per_second;
  if (fastest - slowest > TDM_SCALING_SPREAD * middle && s->runs < TDM_SCALING_RUNS_MAX)
    return TRUE;
  add_point(s);
  s->n++;
  s->warming = TRUE;
  return TRUE;
}

static char *
scaling_dup_result(const TdmExperiment *e)
{
  const Scaling *s = (const Scaling *)e;
  /* Translators: a scaling sweep is over; %d is the number of points */
  return g_strdup_printf(tdm_engine_ngettext("%d point measured",
                                     "%d points measured", s->points->len),
                         s->points->len);
}

static void
scaling_finalize(TdmExperiment *e)
{
  g_array_unref(((Scaling *)e)->points);
}

static const TdmExperimentClass scaling_class = {
  .stopped = N_("the scaling run was stopped"),
  .next = scaling_next,
  .observe = scaling_observe,
  .reduce = scaling_reduce,
  .dup_result = scaling_dup_result,
  .finalize = scaling_finalize,
};

TdmExperiment *
tdm_experiment_new_scaling(const TdmConfig *config, TdmScalingMode mode, long steps,
                           GError **error)
{
  g_return_val_if_fail(config != NULL && steps > 0, NULL);
  int count = tdm_config_replica_count(config);
  if (count < 1) {
    g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                        _("a scaling run needs at least one device"));
    return NULL;
  }
  Scaling *s = g_new0(Scaling, 1);
  tdm_experiment_init(&s->parent, &scaling_class, TDM_EXPERIMENT_SCALING, config, steps);
  s->mode = mode;
  s->count = count;
  s->per_device = tdm_shard_largest(config->batch, count);
  s->n = 1;
  s->warming = TRUE;
  s->points = g_array_new(FALSE, TRUE, sizeof(TdmScalingPoint));
  /* Each point's configuration must hold, not only the one given. */
  for (int n = 1; n <= count; n++) {
    s->n = n;
    g_autoptr(TdmConfig) cfg = point_config(s, steps);
    if (!tdm_config_validate(cfg, error)) {
      tdm_experiment_free(&s->parent);
      return NULL;
    }
  }
  s->n = 1;
  return &s->parent;
}

TdmScalingMode
tdm_experiment_get_scaling_mode(const TdmExperiment *e)
{
  g_return_val_if_fail(e != NULL && e->kind == TDM_EXPERIMENT_SCALING, TDM_SCALING_STRONG);
  return ((const Scaling *)e)->mode;
}

void
tdm_experiment_set_point_sink(TdmExperiment *e, TdmScalingSink sink, gpointer user_data)
{
  g_return_if_fail(e != NULL && e->kind == TDM_EXPERIMENT_SCALING);
  Scaling *s = (Scaling *)e;
  s->sink = sink;
  s->sink_data = user_data;
}
