/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer.c — the data-parallel training loop.
 *
 * One thread per local replica: the calling thread drives replica 0 and coordinates,
 * worker threads drive the others. Each step is a "job" that every thread runs in
 * lock-step between two barriers: train a shard, combine gradients (all-reduce, or
 * reduce to the main replica and broadcast its parameters back), update. Metrics,
 * evaluation and stop votes are jobs too, so processes under MPI stay in step.
 * This file is the loop that hands out the jobs and the summaries it makes; the jobs
 * themselves and the collectives are in tdm-trainer-step.c, set-up and tear-down in
 * tdm-trainer-setup.c, checkpoints (what goes in, how a run resumes) in
 * tdm-trainer-checkpoint.c, the other events in tdm-trainer-events.c, what callers set
 * in tdm-trainer-settings.c.
 */
#include "tdm-trainer-private.h"
#include "tdm-i18n.h"
#include "tdm-backend.h"
#include "tdm-barrier.h"
#include "tdm-communicator.h"
#include "tdm-dataset.h"
#include "tdm-distributed.h"
#include "tdm-error.h"
#include "tdm-iterator.h"
#include "tdm-network.h"
#include "tdm-optimizer.h"
#include "tdm-replica.h"
#include "tdm-telemetry.h"
#include "tdm-build-config.h"

#include <math.h>
#include <string.h>

#define SUMMARY_INTERVAL_US (50 * 1000)
#define DEVICES_INTERVAL_US (250 * 1000)
/* Across processes summaries come every so many steps, the same on every rank. */
#define DISTRIBUTED_SUMMARY_STEPS 20
/* Throughput is measured over the last second of training time, not over one
 * summary: a summary covers 50 ms, one to three steps of a mid-sized network, so any
 * one step that waited for a core (the window drawing, another process, the first
 * step after an evaluation) halved it, and the figure swung 2× and more in a regular
 * sawtooth. RATE_HISTORY summaries are kept to find the start
 * of the window; with summaries every step and a fast clock the window is shorter. */
#define RATE_WINDOW_S 1.0
#define RATE_HISTORY 64


TdmTrainer *
tdm_trainer_new(const TdmConfig *config, TdmEventSink sink, gpointer user_data)
{
  g_return_val_if_fail(config != NULL, NULL);
  TdmTrainer *t = g_new0(TdmTrainer, 1);
  t->config = tdm_config_copy(config);
  t->sink = sink;
  t->sink_data = user_data;
  g_mutex_init(&t->pause_lock);
  g_cond_init(&t->pause_cond);
  g_mutex_init(&t->error_lock);
  g_mutex_init(&t->abort_lock);
  tdm_trainer_init_options(t);
  return t;
}


gint64
tdm_trainer_clock_us(TdmTrainer *t)
{
  return tdm_clock_now_us(&t->clock);
}

static gint64
now_us(TdmTrainer *t)
{
  return tdm_trainer_clock_us(t);
}

void
tdm_trainer_free(TdmTrainer *t)
{
  if (t == NULL)
    return;
  tdm_config_free(t->config);
  g_free(t->resume_path);
  g_free(t->host_params);
  g_free(t->planned_columns);
  g_clear_pointer(&t->host_states, g_ptr_array_unref);
  g_mutex_clear(&t->pause_lock);
  g_cond_clear(&t->pause_cond);
  g_mutex_clear(&t->error_lock);
  g_mutex_clear(&t->abort_lock);
  g_free(t);
}


/* Every local replica's BN running statistics, for tdm_trainer_get_bn_state(). */
static gboolean
download_states(TdmTrainer *t, GError **error)
{
  g_clear_pointer(&t->host_states, g_ptr_array_unref);
  t->host_states = g_ptr_array_new_with_free_func(g_free);
  t->host_state_count = t->net->state_count;
  for (int r = 0; r < t->replicas; r++) {
    float *state = g_new0(float, MAX(1, t->net->state_count));
    g_ptr_array_add(t->host_states, state);
    TdmBackend *b = t->backends[r];
    tdm_backend_download(b, state, t->reps[r]->state, t->net->state_count * sizeof(float));
    if (!tdm_backend_check(b, error))
      return FALSE;
  }
  return TRUE;
}


/* ---- failures from any thread -------------------------------------------------- */

/* Called with abort_lock held: a stop may come from another thread while the run is
 * being torn down, which clears the barriers and the communicator under that lock. */
void
tdm_trainer_abort_locked(TdmTrainer *t)
{
  g_atomic_int_set(&t->abort_flag, 1);
  if (!t->live)
    return;
  tdm_barrier_break(&t->start);
  tdm_barrier_break(&t->end);
  tdm_barrier_break(&t->pre_comm);
  tdm_communicator_abort(t->comm);
}

static void
abort_run(TdmTrainer *t)
{
  g_mutex_lock(&t->abort_lock);
  tdm_trainer_abort_locked(t);
  g_mutex_unlock(&t->abort_lock);
}

void
tdm_trainer_fail_worker(TdmTrainer *t, GError *error)
{
  g_mutex_lock(&t->error_lock);
  if (t->worker_error == NULL)
    t->worker_error = error;
  else
    g_error_free(error);
  g_mutex_unlock(&t->error_lock);
  abort_run(t);
}

gboolean
tdm_trainer_aborted(TdmTrainer *t)
{
  return g_atomic_int_get(&t->abort_flag) != 0;
}

/* ---- the loop -------------------------------------------------------------------- */

typedef struct {
  double loss_sum, correct;     /* since the last summary */
  long samples;
  double epoch_loss, epoch_correct;
  long epoch_samples;
  gint64 last_summary_us, last_devices_us;
  long samples_total;           /* trained since the run (or its resumption) began */
  /* (training time, samples_total) at recent summaries and at the start, oldest
   * first from rate_head - rate_len: the throughput window's ends. */
  double rate_elapsed[RATE_HISTORY];
  long rate_samples[RATE_HISTORY];
  int rate_head, rate_len;
  double trained_seconds;       /* pauses and evaluation excluded */
  gint64 segment_start_us;
  gboolean next_timed;
  gboolean stepped; /* the step about to run was let through by a single step */
  double start_fraction;        /* of the whole run, when this process began training */
} RunStats;


static double
run_fraction(TdmTrainer *t)
{
  double done = t->it->epoch + (double)t->it->position / t->it->count;
  return MIN(1.0, done / t->config->epochs);
}

/* Where the run will end, as a fraction: 1, or earlier at --max-steps. */
static double
end_fraction(TdmTrainer *t)
{
  long total = (long)tdm_iterator_batches_per_epoch(t->it) * t->config->epochs;
  if (t->config->max_steps <= 0 || total <= 0 || t->config->max_steps >= total)
    return 1.0;
  return (double)t->config->max_steps / total;
}

/* Time left: the rate of this process's training (a resumed run's earlier part took
 * no time here) over what remains until the run's end. */
static double
time_left(TdmTrainer *t, const RunStats *st, double fraction, double elapsed)
{
  double done = fraction - st->start_fraction;
  if (done <= 0)
    return -1;
  return MAX(0.0, elapsed * (end_fraction(t) - fraction) / done);
}

static double
elapsed_training(TdmTrainer *t, RunStats *st)
{
  return st->trained_seconds + (now_us(t) - st->segment_start_us) / 1e6;
}

/* Collects metrics over every replica (and process) and votes on stopping. */
static gboolean
collect_metrics(TdmTrainer *t, gboolean want_stop, double *loss_sum, double *correct,
                gboolean *stop, GError **error)
{
  t->job.kind = JOB_METRICS;
  t->job.stop_vote = want_stop ? 1 : 0;
  if (!tdm_trainer_run_all(t, error))
    return FALSE;
  *loss_sum = t->metrics_out[0];
  *correct = t->metrics_out[1];
  if (stop != NULL)
    *stop = t->metrics_out[2] > 0;
  return TRUE;
}

static void
emit_devices(TdmTrainer *t, RunStats *st)
{
  TdmEvent e = {.kind = TDM_EVENT_DEVICES};
  TdmDevicesEvent *d = &e.devices;
  d->step = t->step;
  d->elapsed = elapsed_training(t, st);
  d->replicas = MIN(t->replicas, TDM_MAX_REPLICAS);
  for (int r = 0; r < d->replicas; r++) {
    Timing *tm = &t->timing[r];
    TdmBackend *b = t->backends[r];
    int steps = MAX(1, tm->timed_steps);
    d->device[r].compute_ms = 1e3 * tm->compute / steps;
    d->device[r].comm_ms = 1e3 * tm->comm / steps;
    d->device[r].wait_ms = 1e3 * tm->wait / steps;
    d->device[r].tandem_bytes = (gint64)b->bytes_in_use;
    d->device[r].peak_bytes = (gint64)b->bytes_peak;
    guint64 counted = MAX(tm->steps, 1);
    d->device[r].host_operations = (double)tm->host_ops / counted;
    d->device[r].graph_operations = (double)tm->graph_ops / counted;
    d->device[r].operations_per_step = (int)((tm->host_ops + tm->graph_ops) / counted);
    d->device[r].issue_ms = tm->issued_steps > 0 ? 1e3 * tm->issue / tm->issued_steps : NAN;
    d->device[r].used_bytes = -1;
    d->device[r].total_bytes = -1;
    d->device[r].utilization = -1;
    d->device[r].temperature = -1;
    d->device[r].power = -1;
    if (b->kind == TDM_BACKEND_CPU && tm->wall > 0) {
      /* A CPU worker's load is the share of the step it spent computing. */
      d->device[r].utilization = MIN(100.0, 100.0 * tm->compute / tm->wall);
    } else if (b->kind == TDM_BACKEND_CUDA && t->telemetry != NULL) {
      TdmTelemetrySample s = tdm_telemetry_get(t->telemetry, b->device_index);
      if (s.valid_memory) {
        d->device[r].used_bytes = s.memory_used;
        d->device[r].total_bytes = s.memory_total;
      }
      if (s.valid_utilization)
        d->device[r].utilization = s.utilization;
      if (s.valid_temperature)
        d->device[r].temperature = s.temperature;
      if (s.valid_power)
        d->device[r].power = s.power;
    }
    memset(tm, 0, sizeof *tm);
  }
  tdm_trainer_emit(t, &e);
}


static gboolean
check_finite(TdmTrainer *t, double loss_sum, GError **error)
{
  if (isfinite(loss_sum))
    return TRUE;
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DIVERGED,
              _("the training loss became %s at step %ld (epoch %d): training diverged; "
              "try a smaller learning rate than --lr %g"),
              isnan(loss_sum) ? "NaN" : "infinite", t->step, t->it->epoch + 1, t->config->lr);
  return FALSE;
}

/* Notes (elapsed, samples_total) and returns the samples per second of training time
 * since the newest noted point at least RATE_WINDOW_S older (else the oldest kept,
 * at worst the run's start); NaN when no training time has passed. */
static double
rate_over_window(RunStats *st, double elapsed)
{
  int newest = st->rate_head;
  st->rate_elapsed[newest] = elapsed;
  st->rate_samples[newest] = st->samples_total;
  st->rate_head = (st->rate_head + 1) % RATE_HISTORY;
  st->rate_len = MIN(st->rate_len + 1, RATE_HISTORY);

  int base = (newest + RATE_HISTORY - (st->rate_len - 1)) % RATE_HISTORY;
  for (int back = 1; back < st->rate_len; back++) {
    int k = (newest + RATE_HISTORY - back) % RATE_HISTORY;
    if (elapsed - st->rate_elapsed[k] >= RATE_WINDOW_S) {
      base = k;
      break;
    }
  }
  double span = elapsed - st->rate_elapsed[base];
  if (!(span > 0))
    return NAN;
  return (st->samples_total - st->rate_samples[base]) / span;
}

static gboolean
summarize(TdmTrainer *t, RunStats *st, gboolean want_stop, gboolean *stop, GError **error)
{
  double loss_sum, correct;
  if (!collect_metrics(t, want_stop, &loss_sum, &correct, stop, error))
    return FALSE;
  if (!check_finite(t, loss_sum, error))
    return FALSE;
  st->epoch_loss += loss_sum;
  st->epoch_correct += correct;

  gint64 now = now_us(t);
  long samples = st->samples;
  double interval = (now - st->last_summary_us) / 1e6;
  double elapsed = st->trained_seconds + (now - st->segment_start_us) / 1e6;
  st->samples_total += samples;
  double rate = rate_over_window(st, elapsed);
  TdmEvent e = {.kind = TDM_EVENT_STEP};
  TdmStepEvent *s = &e.step;
  s->step = t->step;
  s->epoch = MIN(t->it->epoch, t->config->epochs - 1);
  s->fraction = run_fraction(t);
  s->epoch_float = s->fraction * t->config->epochs;
  s->train_loss = samples > 0 ? loss_sum / samples : NAN;
  s->train_accuracy = samples > 0 ? correct / samples : NAN;
  s->epoch_loss = st->epoch_samples > 0 ? st->epoch_loss / st->epoch_samples : NAN;
  s->epoch_accuracy = st->epoch_samples > 0 ? st->epoch_correct / st->epoch_samples : NAN;
  s->samples_per_second = isfinite(rate) ? rate : interval > 0 ? samples / interval : 0;
  s->grad_norm = NAN;
  if (t->clip_work != NULL && t->main_local >= 0 && t->clip_work[t->main_local] != NULL) {
    TdmBackend *b = t->backends[t->main_local];
    tdm_backend_download(b, &s->grad_norm, t->clip_work[t->main_local], sizeof(double));
  }
  s->lr = t->job.lr;
  s->elapsed = elapsed;
  s->eta = time_left(t, st, s->fraction, s->elapsed);
  tdm_trainer_emit(t, &e);

  st->samples = 0;
  st->last_summary_us = now;
  st->next_timed = TRUE;
  if (now - st->last_devices_us >= DEVICES_INTERVAL_US) {
    emit_devices(t, st);
    st->last_devices_us = now;
  }
  return TRUE;
}

/* The test set, or with `validation` the held-out training samples. */
static gboolean
evaluate_set(TdmTrainer *t, gboolean validation, double *loss, double *accuracy,
             GError **error)
{
  t->job.kind = JOB_EVALUATE;
  t->job.validation = validation;
  t->eval_start_us = now_us(t);
  t->eval_said_us = 0;
  gboolean ran = tdm_trainer_run_all(t, error);
  t->job.validation = FALSE;
  gint64 began = t->eval_start_us;
  t->eval_start_us = 0;
  if (!ran)
    return FALSE;
  if (t->eval_said_us != 0) {
    long total = validation ? t->val_count : t->data->test->count;
    tdm_trainer_emit_phase(t, validation ? TDM_SETUP_VALIDATION : TDM_SETUP_EVALUATION, TRUE,
                           total, total, (now_us(t) - began) / 1e6);
  }
  double loss_sum, correct;
  if (!collect_metrics(t, FALSE, &loss_sum, &correct, NULL, error))
    return FALSE;
  int count = validation ? t->val_count : t->data->test->count;
  *loss = loss_sum / count;
  *accuracy = correct / count;
  return TRUE;
}

static gboolean
evaluate(TdmTrainer *t, double *loss, double *accuracy, GError **error)
{
  return evaluate_set(t, FALSE, loss, accuracy, error);
}

/* Waits while paused, unless single steps were asked for (each one lets one step
 * through and the run rests again); FALSE when the run was stopped meanwhile. */
static gboolean
wait_while_paused(TdmTrainer *t, RunStats *st)
{
  g_mutex_lock(&t->pause_lock);
  gboolean rest = t->paused && t->single_steps == 0;
  g_mutex_unlock(&t->pause_lock);
  if (rest) {
    st->trained_seconds = elapsed_training(t, st);
    TdmEvent e = {.kind = TDM_EVENT_PAUSED};
    tdm_trainer_emit(t, &e);
  }
  g_mutex_lock(&t->pause_lock);
  while (t->paused && t->single_steps == 0 && !tdm_trainer_aborted(t)) {
    gint64 deadline = g_get_monotonic_time() + 50 * 1000;
    g_cond_wait_until(&t->pause_cond, &t->pause_lock, deadline);
  }
  gboolean stepping = t->paused && t->single_steps > 0;
  if (stepping)
    t->single_steps--;
  g_mutex_unlock(&t->pause_lock);
  if (rest) {
    /* The steps trained since the last summary stay counted: their loss and correct
     * answers are still in the replicas' sums, which the next summary divides by. */
    st->segment_start_us = now_us(t);
    st->last_summary_us = st->segment_start_us;
    if (!stepping) {
      TdmEvent e = {.kind = TDM_EVENT_RESUMED};
      tdm_trainer_emit(t, &e);
    }
  }
  /* A single step is always sampled and summarized: whoever steps through wants to
   * see it, on the timeline and on the status line and charts. */
  if (stepping)
    st->next_timed = TRUE;
  st->stepped = stepping;
  return !tdm_trainer_aborted(t);
}

/* Holds the next step back until the pace allows it (on the trainer's clock, so a
 * test can count steps against simulated time); FALSE when stopped meanwhile. */
static gboolean
wait_for_pace(TdmTrainer *t)
{
  g_mutex_lock(&t->pause_lock);
  for (;;) {
    if (tdm_trainer_aborted(t))
      break;
    double pace = t->pace;
    gint64 now = now_us(t);
    if (pace <= 0 || t->last_step_us == 0) {
      t->last_step_us = now;
      break;
    }
    gint64 due = t->last_step_us + (gint64)(1e6 / pace);
    if (now >= due) {
      /* Catch up at most one step: a slow step is not followed by a burst. */
      t->last_step_us = MAX(due, now - (gint64)(1e6 / pace));
      break;
    }
    /* Woken early by a change of pace, a pause or a stop; long waits are cut in
     * pieces so a clock that is not the real one still gets read again. */
    gint64 wait = MIN(due - now, 50 * 1000);
    g_cond_wait_until(&t->pause_cond, &t->pause_lock, g_get_monotonic_time() + wait);
  }
  g_mutex_unlock(&t->pause_lock);
  return !tdm_trainer_aborted(t);
}


/* The step's learning rate: the range test's, or the schedule's at that point of the
 * run (times the plateau schedule's reductions). */
static double
step_lr(TdmTrainer *t, double epoch)
{
  if (t->options.lr_range_steps > 0) {
    double x = t->options.lr_range_steps > 1 ? (double)t->step / (t->options.lr_range_steps - 1) : 0;
    return t->options.lr_range[0] * pow(t->options.lr_range[1] / t->options.lr_range[0], MIN(x, 1.0));
  }
  return tdm_config_lr_at(t->config, epoch) * t->plateau_scale;
}


/* An epoch's end: the monitored metric (from metrics: validation loss and
 * accuracy, test loss and accuracy) against the best so far, and the plateau
 * schedule's count. TRUE when this epoch is the new best. */
static gboolean
watch_metric(TdmTrainer *t, const double metrics[4])
{
  const TdmConfig *cfg = t->config;
  double value = metrics[cfg->monitor];
  if (tdm_config_monitors_validation(cfg) && t->val_count == 0)
    return FALSE;
  gboolean better = t->best_epoch == 0 || tdm_config_monitor_improves(cfg, value, t->best_value);
  if (better && isfinite(value)) {
    t->best_epoch = t->epochs_done;
    t->best_value = value;
    memcpy(t->best_metrics, metrics, sizeof t->best_metrics);
  }
  if (cfg->schedule == TDM_SCHEDULE_PLATEAU) {
    /* ReduceLROnPlateau: more than `patience` epochs without a gain lower the rate. */
    if (tdm_config_monitor_improves(cfg, value, t->plateau_best)) {
      t->plateau_best = value;
      t->plateau_bad = 0;
    } else if (++t->plateau_bad > cfg->plateau_patience) {
      t->plateau_scale *= cfg->gamma;
      t->plateau_bad = 0;
    }
  }
  return better && isfinite(value);
}

static gboolean
train_loop(TdmTrainer *t, RunStats *st, gboolean *stopped, double *final_loss,
           double *final_accuracy, GError **error)
{
  const TdmConfig *cfg = t->config;
  /* The step of the last evaluation, so a run cut short by --max-steps ends with one
   * unless its last step ended an epoch. */
  long evaluated_step = -1;

  while (t->it->epoch < cfg->epochs) {
    if (cfg->max_steps > 0 && t->step >= cfg->max_steps) {
      gboolean stop;
      if (st->samples > 0 && !summarize(t, st, FALSE, &stop, error))
        return FALSE;
      if (evaluated_step != t->step && t->options.lr_range_steps == 0) {
        st->trained_seconds = elapsed_training(t, st);
        if (!evaluate(t, final_loss, final_accuracy, error)) {
          if (tdm_trainer_aborted(t) && (error == NULL || *error == NULL)) {
            *stopped = TRUE;
            break;
          }
          return FALSE;
        }
        tdm_trainer_emit_predictions(t, t->it->epoch + 1);
        st->segment_start_us = now_us(t);
      }
      break;
    }
    if (!wait_while_paused(t, st) || !wait_for_pace(t) || tdm_trainer_aborted(t)) {
      *stopped = TRUE;
      break;
    }
    int epoch_before = t->it->epoch, position_before = t->it->position;
    double epoch_float = epoch_before + (double)position_before / t->it->count;
    int count;
    gboolean epoch_end;
    const int32_t *indices = tdm_iterator_next(t->it, &count, &epoch_end);
    if (t->train_map != NULL) {
      for (int i = 0; i < count; i++)
        t->mapped[i] = t->train_map[indices[i]];
      indices = t->mapped;
    }
    /* Which 1/parts of the epoch the step ends in, against where it began. */
    gboolean part_passed =
        t->options.summary_parts > 0 &&
        (epoch_end || (long)t->it->position * t->options.summary_parts / t->it->count !=
                          (long)position_before * t->options.summary_parts / t->it->count);

    t->job.kind = JOB_TRAIN;
    t->job.indices = indices;
    t->job.count = count;
    t->job.epoch = epoch_before;
    t->job.lr = step_lr(t, epoch_float);
    double momentum = tdm_config_momentum_at(cfg, epoch_float);
    t->job.momentum = isfinite(momentum) ? momentum : 0;
    t->job.timed = st->next_timed;
    t->job.origin = tdm_trainer_span_seconds(t);
    t->main_updated = FALSE;
    st->next_timed = FALSE;
    if (!tdm_trainer_run_all(t, error) || tdm_trainer_aborted(t)) {
      if (!tdm_trainer_aborted(t) || (error != NULL && *error != NULL))
        return FALSE;
      /* Stopped mid-step: keep the step only if the main replica applied it. */
      if (!t->main_updated)
        tdm_iterator_seek(t->it, epoch_before, position_before);
      else
        t->step++;
      *stopped = TRUE;
      break;
    }
    t->step++;
    st->samples += count;
    st->epoch_samples += count;
    if (t->job.timed && t->options.step_detail)
      tdm_trainer_emit_step_detail(t);

    gint64 now = now_us(t);
    gboolean due = tdm_trainer_distributed(t)       ? t->step % DISTRIBUTED_SUMMARY_STEPS == 0
                   : t->options.summary_steps > 0 ? t->step % t->options.summary_steps == 0
                                          : now - st->last_summary_us >= SUMMARY_INTERVAL_US;
    /* Under mpirun every rank sees the same positions, so this grid is agreed too. */
    due = due || part_passed || (st->stepped && !tdm_trainer_distributed(t));
    if (epoch_end || due) {
      gboolean stop = FALSE;
      if (!summarize(t, st, g_atomic_int_get(&t->stop_requested), &stop, error))
        return FALSE;
      if (stop) {
        *stopped = TRUE;
        break;
      }
    }
    if (epoch_end) {
      st->trained_seconds = elapsed_training(t, st);
      double test_loss = NAN, test_accuracy = NAN;
      if (t->options.lr_range_steps == 0 && !evaluate(t, &test_loss, &test_accuracy, error)) {
        if (tdm_trainer_aborted(t) && (error == NULL || *error == NULL)) {
          *stopped = TRUE;
          break;
        }
        return FALSE;
      }
      double val_loss = NAN, val_accuracy = NAN;
      if (t->val_count > 0 && t->options.lr_range_steps == 0 &&
          !evaluate_set(t, TRUE, &val_loss, &val_accuracy, error)) {
        if (tdm_trainer_aborted(t) && (error == NULL || *error == NULL)) {
          *stopped = TRUE;
          break;
        }
        return FALSE;
      }
      TdmEvent e = {.kind = TDM_EVENT_EPOCH};
      e.epoch.val_loss = val_loss;
      e.epoch.val_accuracy = val_accuracy;
      e.epoch.epoch = epoch_before + 1;
      e.epoch.step = t->step;
      e.epoch.train_loss = st->epoch_loss / MAX(1, st->epoch_samples);
      e.epoch.train_accuracy = st->epoch_correct / MAX(1, st->epoch_samples);
      e.epoch.test_loss = test_loss;
      e.epoch.test_accuracy = test_accuracy;
      e.epoch.elapsed = st->trained_seconds;
      tdm_trainer_emit(t, &e);
      if (t->options.lr_range_steps == 0)
        tdm_trainer_emit_predictions(t, epoch_before + 1);
      *final_loss = test_loss;
      *final_accuracy = test_accuracy;
      evaluated_step = t->step;
      st->epoch_loss = st->epoch_correct = 0;
      st->epoch_samples = 0;
      /* The best epoch so far by the monitored metric (the first of equals): its
       * checkpoint, and the count of epochs since, for early stopping; and the
       * plateau schedule's count. Known before the epoch's checkpoint is written,
       * which carries them to a resumed run. */
      double metrics[4] = {val_loss, val_accuracy, test_loss, test_accuracy};
      t->epochs_done = epoch_before + 1;
      gboolean better = watch_metric(t, metrics);
      if (!tdm_trainer_save_checkpoint(t, error))
        return FALSE;
      if (better && cfg->save_best_path != NULL &&
          !tdm_trainer_save_checkpoint_to(t, cfg->save_best_path, TRUE, error))
        return FALSE;
      st->segment_start_us = st->last_summary_us = now_us(t);
      st->samples = 0;
      if (cfg->early_stop > 0 && t->best_epoch > 0 &&
          epoch_before + 1 - t->best_epoch >= cfg->early_stop && t->it->epoch < cfg->epochs) {
        t->early_stopped = TRUE;
        break;
      }
    } else if (cfg->save_every > 0 && t->step % cfg->save_every == 0) {
      /* Writing is not training: the clock stops meanwhile. */
      st->trained_seconds = elapsed_training(t, st);
      if (!tdm_trainer_save_checkpoint(t, error))
        return FALSE;
      st->segment_start_us = now_us(t);
    }
  }
  return TRUE;
}

/* The loop, and what every way out of it must leave: the run's training time for
 * the FINISHED event (a stop can end the loop inside any collective) and, unless it
 * failed, the last device figures however short it was. */
static gboolean
train_epochs(TdmTrainer *t, gboolean *stopped, double *final_loss, double *final_accuracy,
             GError **error)
{
  RunStats st = {0};
  st.segment_start_us = st.last_summary_us = st.last_devices_us = now_us(t);
  st.next_timed = TRUE;
  /* The throughput window's first end: no samples, no training time yet. */
  st.rate_len = 1;
  st.rate_head = 1;
  st.start_fraction = run_fraction(t);
  *final_loss = *final_accuracy = NAN;
  gboolean ok = train_loop(t, &st, stopped, final_loss, final_accuracy, error);
  /* A stop can leave workers in their last job, still writing their timing: read it
   * once they are gone. */
  tdm_trainer_stop_workers(t);
  t->trained_seconds = elapsed_training(t, &st);
  if (ok || (tdm_trainer_aborted(t) && (error == NULL || *error == NULL)))
    emit_devices(t, &st);
  return ok;
}

gboolean
tdm_trainer_run(TdmTrainer *t, GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail(t != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  GError *local = NULL;
  gboolean stopped = FALSE;
  double test_loss = NAN, test_accuracy = NAN;
  t->trained_seconds = 0;
  t->abort_flag = 0;
  t->quit_workers = 0;
  t->stop_requested = 0;
  t->main_local = 0;
  t->step = 0;
  t->saved_step = -1;
  t->last_step_us = 0;
  t->best_epoch = 0;
  t->best_value = NAN;
  for (int i = 0; i < 4; i++)
    t->best_metrics[i] = NAN;
  t->early_stopped = FALSE;
  t->epochs_done = 0;
  t->plateau_scale = 1.0;
  t->plateau_best = NAN;
  t->plateau_bad = 0;
  t->batch_asked = 0;

  if (!tdm_trainer_check_options(t, &local) || !tdm_trainer_setup(t, cancellable, &local))
    goto failed;
  if (cancellable != NULL) {
    t->cancellable = g_object_ref(cancellable);
    t->cancel_handler = g_cancellable_connect(cancellable, G_CALLBACK(tdm_trainer_on_cancelled), t, NULL);
  }
  if (!tdm_trainer_initialize_parameters(t, &local) || !tdm_trainer_prewarm(t, &local))
    goto failed_or_stopped;
  if (t->resume_path != NULL && !tdm_trainer_restore_checkpoint(t, t->resume_path, &local))
    goto failed;
  t->epochs_done = t->it->epoch;

  tdm_trainer_emit_started(t);
  if (!train_epochs(t, &stopped, &test_loss, &test_accuracy, &local))
    goto failed_or_stopped;

finish:
  /* With the workers gone, the main replica's state can be read whatever stopped. */
  tdm_trainer_stop_workers(t);
  t->abort_flag = 0;
  /* However the run ended (stopped, or at --max-steps), its last state is saved. */
  if (t->step > 0 && t->step != t->saved_step && !tdm_trainer_save_checkpoint(t, &local))
    goto failed;
  if (!tdm_trainer_download_parameters(t, &local) || !download_states(t, &local))
    goto failed;
  {
    TdmEvent e = {.kind = TDM_EVENT_FINISHED};
    e.finished.steps = t->step;
    /* The same clock as every STEP and EPOCH event (pauses and evaluation left out),
     * so "stopped after N steps in T" agrees with the status line and the charts. */
    e.finished.elapsed = t->trained_seconds;
    e.finished.test_loss = test_loss;
    e.finished.test_accuracy = test_accuracy;
    e.finished.stopped = stopped;
    e.finished.early_stopped = t->early_stopped;
    e.finished.epochs_done = t->epochs_done;
    e.finished.best_epoch = t->best_epoch;
    e.finished.monitor = t->config->monitor;
    e.finished.best_value = t->best_value;
    e.finished.best_val_loss = t->best_metrics[0];
    e.finished.best_accuracy = t->best_metrics[1];
    e.finished.best_test_loss = t->best_metrics[2];
    e.finished.best_test_accuracy = t->best_metrics[3];
    tdm_trainer_emit(t, &e);
  }
  tdm_trainer_teardown(t);
  return TRUE;

failed_or_stopped:
  if (local == NULL && tdm_trainer_aborted(t)) {
    stopped = TRUE;
    goto finish;
  }
failed:
  if (local == NULL)
    g_set_error(&local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND, _("training stopped"));
  if (t->sink != NULL) {
    /* Every process reports its own failure, not only the main one's. */
    TdmEvent e = {.kind = TDM_EVENT_FAILED};
    e.failed = local;
    t->sink(&e, t->sink_data);
  }
  /* The other processes may be waiting in a collective for this one, which must not
   * wait for them in turn while tearing down (NCCL's or MPI's clean-up). */
  if (tdm_trainer_distributed(t))
    tdm_communicator_abort(t->comm);
  tdm_trainer_teardown(t);
  g_propagate_error(error, local);
  return FALSE;
}
