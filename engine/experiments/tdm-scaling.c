/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling.c — the throughput meter and the 1 … N scaling driver (tdm-scaling.h).
 * The meter times between step summaries, so a run's set-up, its first steps (graph
 * capture, first touches) and its epoch-end evaluations stay out of the figure. */
#include "tdm-scaling.h"
#include "tdm-choice.h"
#include "tdm-experiments-enum-types.h"
#include "tdm-iterator.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-trainer.h"

#include <math.h>
#include <string.h>

/* Steps of the warm-up run before each point (first-touch costs, thread start-up). */
#define WARMUP_STEPS 10

void
tdm_scaling_meter_event(const TdmEvent *e, gpointer data)
{
  TdmScalingMeter *run = data;
  gint64 now = g_get_monotonic_time();
  switch (e->kind) {
  case TDM_EVENT_STARTED:
    run->started_us = now;
    run->replicas = MIN(e->started.replicas, TDM_MAX_REPLICAS);
    run->train_count = e->started.train_count;
    run->steps_per_epoch = e->started.steps_per_epoch;
    run->parameters = e->started.parameters;
    run->cpu_threads = e->started.cpu_threads;
    break;
  case TDM_EVENT_STEP:
    if (run->step_events == 0) {
      run->first_step_us = now;
      run->first_step = e->step.step;
    }
    run->last_step_us = now;
    run->last_step = e->step.step;
    run->step_events++;
    break;
  case TDM_EVENT_EPOCH:
    /* The trainer summarizes at every epoch end just before it evaluates, so the
     * gap since the last STEP event is the evaluation. */
    if (run->step_events > 0)
      run->excluded_us += now - run->last_step_us;
    break;
  case TDM_EVENT_DEVICES: {
    for (int r = 0; r < e->devices.replicas && r < TDM_MAX_REPLICAS; r++)
      run->peak_bytes[r] = MAX(run->peak_bytes[r], e->devices.device[r].tandem_bytes);
    double busy = 0;
    for (int r = 0; r < e->devices.replicas; r++)
      busy += e->devices.device[r].compute_ms + e->devices.device[r].comm_ms;
    if (busy <= 0)
      break;   /* no timed step since the last DEVICES event */
    gboolean late = run->all_events > 0;
    for (int r = 0; r < e->devices.replicas && r < TDM_MAX_REPLICAS; r++) {
      double v[3] = {e->devices.device[r].compute_ms, e->devices.device[r].comm_ms,
                     e->devices.device[r].wait_ms};
      for (int k = 0; k < 3; k++) {
        run->all[r][k] += v[k];
        if (late)
          run->late[r][k] += v[k];
      }
    }
    run->all_events++;
    run->late_events += late;
    break;
  }
  case TDM_EVENT_FAILED:
    g_strlcpy(run->failure, e->failed->message, sizeof run->failure);
    break;
  default:
    break;
  }
}

/* Samples trained in the first `step` steps: whole epochs, then full batches (only
 * the last batch of an epoch is short). */
static double
samples_done(const TdmScalingMeter *run, long step)
{
  long per_epoch = MAX(1, run->steps_per_epoch);
  return (double)(step / per_epoch) * run->train_count + (double)(step % per_epoch) * run->batch;
}

gboolean
tdm_scaling_meter_result(const TdmScalingMeter *run, long steps, TdmScalingResult *out)
{
  memset(out, 0, sizeof *out);
  out->steps = steps;
  out->parameters = run->parameters;
  out->replicas = run->replicas;
  out->cpu_threads = run->cpu_threads;
  memcpy(out->peak_bytes, run->peak_bytes, sizeof out->peak_bytes);
  double samples;
  if (run->step_events >= 2 && run->last_step > run->first_step) {
    out->seconds = (run->last_step_us - run->first_step_us - run->excluded_us) / 1e6;
    samples = samples_done(run, run->last_step) - samples_done(run, run->first_step);
  } else if (run->step_events >= 1 && run->last_step > 0) {
    out->seconds = (run->last_step_us - run->started_us - run->excluded_us) / 1e6;
    samples = samples_done(run, run->last_step);
    out->from_start = TRUE;
  } else {
    return FALSE;
  }
  if (out->seconds <= 0)
    return FALSE;
  out->samples_per_second = samples / out->seconds;

  int events = run->late_events > 0 ? run->late_events : run->all_events;
  out->comm_least_ms = INFINITY;
  for (int r = 0; r < run->replicas && events > 0; r++) {
    const double *v = run->late_events > 0 ? run->late[r] : run->all[r];
    out->compute_ms += v[0] / events / run->replicas;
    out->comm_ms += v[1] / events / run->replicas;
    out->wait_ms += v[2] / events / run->replicas;
    out->comm_least_ms = MIN(out->comm_least_ms, v[1] / events);
  }
  if (events == 0)
    out->compute_ms = out->comm_ms = out->wait_ms = out->comm_least_ms = NAN;
  return TRUE;
}

double
tdm_scaling_meter_seconds_per_step(const TdmScalingMeter *run)
{
  if (run->step_events >= 2 && run->last_step > run->first_step)
    return MAX(1e-7, (run->last_step_us - run->first_step_us - run->excluded_us) / 1e6 /
                         (run->last_step - run->first_step));
  return MAX(1e-7, (run->last_step_us - run->started_us - run->excluded_us) / 1e6 /
                       MAX(1, run->last_step));
}

gboolean
tdm_scaling_measure_once(TdmConfig *cfg, long steps, TdmScalingMeter *run,
                         GCancellable *cancellable, GError **error)
{
  memset(run, 0, sizeof *run);
  run->batch = cfg->batch;
  cfg->max_steps = steps;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, tdm_scaling_meter_event, run);
  return tdm_trainer_run(trainer, cancellable, error);
}

/* ---- the driver ------------------------------------------------------------------ */

TDM_CHOICE_NAMES(TdmScalingMode, tdm_scaling_mode, TDM_TYPE_SCALING_MODE)

static gboolean
check_cancelled(GCancellable *cancellable, GError **error)
{
  if (!g_cancellable_is_cancelled(cancellable))
    return FALSE;
  g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED,
                      _("the scaling run was stopped"));
  return TRUE;
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

/* Times cfg TDM_SCALING_RUNS times, more while the spread is wide; the median run in
 * *median, the slowest and fastest rates. */
static gboolean
measure_point(TdmConfig *cfg, long steps, int n, TdmScalingMeter *meter,
              TdmScalingResult *median, double *slowest, double *fastest, int *runs,
              GCancellable *cancellable, GError **error)
{
  TdmScalingResult results[TDM_SCALING_RUNS_MAX];
  int count = 0;
  *slowest = INFINITY;
  *fastest = 0;
  while (count < TDM_SCALING_RUNS_MAX) {
    if (!tdm_scaling_measure_once(cfg, steps, meter, cancellable, error) ||
        check_cancelled(cancellable, error))
      return FALSE;
    if (!tdm_scaling_meter_result(meter, steps, &results[count])) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                  _("%ld steps on %d devices were too few to time: give more steps"), steps, n);
      return FALSE;
    }
    *slowest = MIN(*slowest, results[count].samples_per_second);
    *fastest = MAX(*fastest, results[count].samples_per_second);
    count++;
    if (count < TDM_SCALING_RUNS)
      continue;
    double middle = results[median_run(results, count)].samples_per_second;
    if (*fastest - *slowest <= TDM_SCALING_SPREAD * middle)
      break;
  }
  *median = results[median_run(results, count)];
  *runs = count;
  return TRUE;
}

gboolean
tdm_scaling_run(const TdmConfig *config, TdmScalingMode mode, long steps, TdmScalingSink sink,
                gpointer user_data, GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail(config != NULL && steps > 0, FALSE);
  int count = tdm_config_replica_count(config);
  if (count < 1) {
    g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                        _("a scaling run needs at least one device"));
    return FALSE;
  }
  int per_device = tdm_shard_largest(config->batch, count);
  g_autofree TdmScalingMeter *meter = g_new0(TdmScalingMeter, 1);
  double base = NAN;
  for (int n = 1; n <= count; n++) {
    g_autoptr(TdmConfig) cfg = tdm_config_copy(config);
    cfg->replicas = n;
    cfg->main_replica = MIN(config->main_replica, n - 1);
    cfg->batch = mode == TDM_SCALING_WEAK ? per_device * n : config->batch;
    /* max_steps ends every run; the epochs only need to outlast it. */
    cfg->epochs = MAX(cfg->epochs, 1000000);
    /* Devices alike at every n: a lone CPU worker would otherwise take every core's
     * BLAS threads, and the speed-up over it would not be like for like. */
    cfg->cpu_threads = 1;
    g_clear_pointer(&cfg->save_path, g_free);
    if (!tdm_config_validate(cfg, error))
      return FALSE;

    if (!tdm_scaling_measure_once(cfg, WARMUP_STEPS, meter, cancellable, error) ||
        check_cancelled(cancellable, error))
      return FALSE;
    TdmScalingResult result;
    double slowest, fastest;
    int runs;
    if (!measure_point(cfg, steps, n, meter, &result, &slowest, &fastest, &runs, cancellable,
                       error))
      return FALSE;
    if (n == 1)
      base = result.samples_per_second;
    TdmScalingPoint point = {
      .index = n - 1,
      .count = count,
      .devices = n,
      .batch = cfg->batch,
      .steps = steps,
      .samples_per_second = result.samples_per_second,
      .speedup = result.samples_per_second / base,
      .compute_ms = result.compute_ms,
      .comm_ms = result.comm_ms,
      .wait_ms = result.wait_ms,
      .samples_per_second_min = slowest,
      .samples_per_second_max = fastest,
      .speedup_min = slowest / base,
      .speedup_max = fastest / base,
      .runs = runs,
      .cpu_threads = result.cpu_threads,
    };
    point.efficiency = point.speedup / n;
    memcpy(point.memory_bytes, result.peak_bytes, sizeof point.memory_bytes);
    if (sink != NULL)
      sink(&point, user_data);
  }
  return TRUE;
}

int
tdm_scaling_cores_needed(int workers)
{
  return MAX(1, workers) + 1;
}

int
tdm_scaling_cores_available(void)
{
  return (int)g_get_num_processors();
}
