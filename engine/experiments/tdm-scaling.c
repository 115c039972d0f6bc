/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling.c — the throughput meter of a scaling sweep (tdm-scaling.h).
 * The meter times between step summaries, so a run's set-up, its first steps (graph
 * capture, first touches) and its epoch-end evaluations stay out of the figure. */
#include "tdm-scaling.h"
#include "tdm-choice.h"
#include "tdm-experiments-enum-types.h"
#include "tdm-trainer.h"

#include <math.h>
#include <string.h>

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

/* The driver is the scaling experiment (tdm-experiment-scaling.c). */

TDM_CHOICE_NAMES(TdmScalingMode, tdm_scaling_mode, TDM_TYPE_SCALING_MODE)

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
