/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer-step.c — what every local replica's thread does in lock-step: the jobs
 * (train a shard, metrics, evaluation, broadcast), the collectives that combine
 * gradients (all-reduce, or reduce to the main replica and broadcast; buckets that
 * overlap all-reduces with backward; synchronized BN's sums), the update (inside the
 * step's graph where nothing comes between backward and it), and the per-phase
 * timing of sampled steps. The loop that hands out the jobs, set-up and events are
 * in tdm-trainer.c.
 */
#include "tdm-trainer-private.h"
#include "tdm-i18n.h"
#include "tdm-backend.h"
#include "tdm-barrier.h"
#include "tdm-communicator.h"
#include "tdm-error.h"
#include "tdm-exact.h"
#include "tdm-network.h"
#include "tdm-optimizer.h"
#include "tdm-replica.h"

#include <math.h>
#include <string.h>

/* Appends a span to the replica's record of a sampled step. */
static void
mark_phase(TdmTrainer *t, Timing *tm, TdmPhase phase, double start, double end)
{
  TdmDevicePhases *p = &tm->phases;
  if (!t->options.step_detail || p->spans >= TDM_MAX_PHASE_SPANS)
    return;
  p->span[p->spans].start_ms = (float)(1e3 * (start - t->job.origin));
  p->span[p->spans].end_ms = (float)(1e3 * (end - t->job.origin));
  p->span[p->spans].phase = phase;
  p->spans++;
}

static void
on_forward_done(TdmReplica *rep, gpointer data)
{
  Timing *tm = data;
  tdm_backend_synchronize(rep->backend);
  tm->forward_end = tdm_trainer_span_seconds(tm->trainer);
}

static gboolean
communicate(TdmTrainer *t, int r, gboolean (*op)(TdmTrainer *, int, GError **), Timing *tm,
            gboolean timed, TdmPhase phase)
{
  TdmBackend *b = t->backends[r];
  GError *error = NULL;
  double t0 = timed ? tdm_trainer_span_seconds(t) : 0;
  if (!tdm_barrier_wait(&t->pre_comm))
    return FALSE;
  double t1 = timed ? tdm_trainer_span_seconds(t) : 0;
  if (!op(t, r, &error) || !t->comm->ops->wait(t->comm, r, &error)) {
    if (error != NULL)
      tdm_trainer_fail_worker(t, error);
    return FALSE;
  }
  if (timed) {
    tdm_backend_synchronize(b);
    double t2 = tdm_trainer_span_seconds(t);
    tm->wait += t1 - t0;
    tm->comm += t2 - t1;
    if (t->job.timed) {
      mark_phase(t, tm, TDM_PHASE_WAIT, t0, t1);
      mark_phase(t, tm, phase, t1, t2);
    }
  }
  return TRUE;
}

static gboolean
op_allreduce(TdmTrainer *t, int r, GError **error)
{
  return tdm_communicator_allreduce(t->comm, r, t->reps[r]->grads, 0,
                                 t->net->parameter_count, error);
}

static gboolean
op_reduce(TdmTrainer *t, int r, GError **error)
{
  return tdm_communicator_reduce(t->comm, r, t->reps[r]->grads, t->net->parameter_count,
                              t->config->main_replica, error);
}

/* Per-replica BN: each replica's running averages moved with its own shard's
 * statistics; their mean becomes every replica's, so they stay identical (and equal
 * to averages moved by the mean of the shards' statistics). */
static gboolean
op_average_bn_state(TdmTrainer *t, int r, GError **error)
{
  TdmReplica *rep = t->reps[r];
  if (!tdm_communicator_allreduce(t->comm, r, rep->state, 0, t->net->state_count, error) ||
      !t->comm->ops->wait(t->comm, r, error))
    return FALSE;
  tdm_backend_scale(t->backends[r], rep->state, 1.0f / (float)t->world, t->net->state_count);
  return TRUE;
}

/* Synchronized BN's hook (tdm-replica.h): the small per-channel sums, all-reduced. */
gboolean
tdm_trainer_on_bn_reduce(TdmReplica *rep, float *buffer, size_t count, gpointer data)
{
  TdmTrainer *t = data;
  int r = 0;
  while (t->reps[r] != rep)
    r++;
  GError *error = NULL;
  if (tdm_communicator_allreduce(t->comm, r, buffer, 0, count, &error) &&
      t->comm->ops->wait(t->comm, r, &error))
    return TRUE;
  if (error != NULL)
    tdm_trainer_fail_worker(t, error);
  return FALSE;
}

static gboolean
op_exact_sum(TdmTrainer *t, int r, GError **error)
{
  return tdm_trainer_exact_combine(t, r, error);
}

static gboolean
op_broadcast(TdmTrainer *t, int r, GError **error)
{
  return tdm_communicator_broadcast(t->comm, r, t->reps[r]->params, t->net->parameter_count,
                                 t->config->main_replica, error);
}


static void
flush_bucket(Buckets *bk)
{
  TdmTrainer *t = bk->trainer;
  if (bk->lo == bk->hi || bk->failed)
    return;
  /* A sampled step notes when its communication could first set off: when the first
   * bucket's gradients were ready on the device (a GPU runs behind the host), not
   * when the host queued it. The step is timed anyway; one wait more. */
  if (t->job.timed && t->options.step_detail && bk->first_launch == 0) {
    tdm_backend_synchronize(t->backends[bk->replica]);
    bk->first_launch = tdm_trainer_span_seconds(t);
  }
  /* With --accumulate this is the last micro-batch: the earlier ones' gradients join
   * the range as it leaves. */
  if (bk->add_accumulated) {
    TdmBackend *b = t->backends[bk->replica];
    tdm_backend_add(b, t->reps[bk->replica]->grads + bk->lo, t->grad_acc[bk->replica] + bk->lo,
                bk->hi - bk->lo);
  }
  GError *error = NULL;
  if (!tdm_communicator_start_allreduce(t->comm, bk->replica, t->reps[bk->replica]->grads,
                                        bk->lo, bk->hi - bk->lo, &error)) {
    bk->failed = TRUE;
    if (error != NULL)
      tdm_trainer_fail_worker(t, error);
  }
  bk->hi = bk->lo;
}

void
tdm_trainer_on_grads_ready(TdmReplica *rep, size_t offset, size_t count, gpointer data)
{
  Buckets *bk = data;
  if (bk->lo == bk->hi)
    bk->hi = offset + count;
  bk->lo = offset;
  if ((bk->hi - bk->lo) * sizeof(float) >= bk->trainer->config->bucket_bytes)
    flush_bucket(bk);
}

/* A replica with no samples this step still takes part in every bucket. */
static void
announce_all_gradients(TdmTrainer *t, int r)
{
  const TdmNetwork *net = t->net;
  for (int i = net->layer_count - 1; i >= 0; i--) {
    const TdmLayer *l = &net->layers[i];
    if (l->param_count > 0)
      tdm_trainer_on_grads_ready(t->reps[r], l->param_offset, l->param_count, &t->buckets[r]);
  }
}

gboolean
tdm_trainer_sync_bn(const TdmTrainer *t)
{
  /* Exact mode's BN groups are the same whatever the split (tdm-trainer-exact.c). */
  return t->world > 1 && t->net->bn_count > 0 && t->config->batchnorm == TDM_BATCHNORM_SYNC &&
         !t->config->exact;
}

gboolean
tdm_trainer_buckets_wanted(const TdmTrainer *t)
{
  /* Overlap needs communication that runs beside backward: a GPU's communication
   * stream, or the host communicator's lanes (threads) for CPU workers, whose sums in
   * replica order give the same bits in buckets as in one piece. MPI's collectives
   * block the caller. Synchronized BN's all-reduces during backward would interleave
   * with the buckets' differently on a replica with an empty shard; it goes without
   * buckets. */
  return t->world > 1 && t->config->strategy == TDM_STRATEGY_ALLREDUCE &&
         !t->config->exact && t->config->bucket_bytes > 0 && !tdm_trainer_sync_bn(t) &&
         (g_str_equal(t->comm->kind, "nccl") || g_str_equal(t->comm->kind, "peer") ||
          g_str_equal(t->comm->kind, "host"));
}

/* The ordinary step's forward and backward passes: the job's batch in micro-batches of
 * config->batch (one, unless --accumulate), each split over the replicas as a batch
 * is. Every micro-batch but the last adds its gradients into grad_acc and
 * communicates nothing (DDP's no_sync); the last's join them on their way out (the
 * buckets) or after its backward. A sampled step records each micro-batch's forward,
 * backward and accumulation while there is room for them and the last one's. Returns
 * when the last micro-batch began, where its forward span starts. */
static double
train_micro_batches(TdmTrainer *t, int r, Timing *tm, gboolean detail, double start)
{
  TdmReplica *rep = t->reps[r];
  TdmBackend *b = t->backends[r];
  const Job *job = &t->job;
  Buckets *bk = t->buckets != NULL ? &t->buckets[r] : NULL;
  size_t p = t->net->parameter_count;
  int micro = t->grad_acc != NULL ? t->config->batch : job->count;
  TdmGradsReady ready = rep->grads_ready;
  double begun = start;
  for (int first = 0; first < MAX(job->count, 1); first += micro) {
    int n = MIN(micro, job->count - first);
    gboolean last = first + n >= job->count;
    int offset, size;
    tdm_trainer_shard(t, n, t->rank0 + r, &offset, &size);
    rep->global_count = n;
    rep->grads_ready = last ? ready : NULL;
    if (bk != NULL)
      bk->add_accumulated = last && first > 0;
    if (detail && first > 0) {
      begun = tdm_trainer_span_seconds(t);
      tm->forward_end = begun;
    }
    if (size > 0) {
      tdm_replica_train_step(rep, job->indices + first + offset, size, 1.0f / (float)job->count);
    } else {
      tdm_replica_train_idle(rep);
      if (last && bk != NULL)
        announce_all_gradients(t, r);
    }
    if (last || tdm_trainer_aborted(t))
      break;
    /* Spans for this micro-batch, leaving room for the last one and its collectives. */
    gboolean shown = detail && tm->phases.spans + 3 <= TDM_MAX_PHASE_SPANS - 8;
    double backward_end = 0;
    if (shown) {
      tdm_backend_synchronize(b);
      backward_end = tdm_trainer_span_seconds(t);
    }
    if (first == 0)
      tdm_backend_copy(b, t->grad_acc[r], rep->grads, p * sizeof(float));
    else
      tdm_backend_add(b, t->grad_acc[r], rep->grads, p);
    if (shown) {
      tdm_backend_synchronize(b);
      double added = tdm_trainer_span_seconds(t);
      mark_phase(t, tm, TDM_PHASE_FORWARD, begun, tm->forward_end);
      mark_phase(t, tm, TDM_PHASE_BACKWARD, tm->forward_end, backward_end);
      mark_phase(t, tm, TDM_PHASE_ACCUMULATE, backward_end, added);
    }
  }
  rep->grads_ready = ready;
  if (t->grad_acc != NULL && bk == NULL && job->count > micro)
    tdm_backend_add(b, rep->grads, t->grad_acc[r], p);
  return begun;
}

/* Clipping and the optimizer's update as one replica's step tail (tdm-replica.h):
 * device operations only, the rates prepared before the step. */
static void
update_in_step(TdmReplica *rep, gpointer data)
{
  TdmTrainer *t = data;
  int r = 0;
  while (t->reps[r] != rep)
    r++;
  if (t->clip_work != NULL)
    tdm_backend_clip_norm(t->backends[r], rep->grads, t->net->parameter_count,
                          (float)t->config->clip_grad_norm, t->clip_work[r]);
  tdm_optimizer_update(t->opts[r], rep->params, rep->grads);
  t->timing[r].tail_ran = TRUE;
}

/* Whether the update joins the step's body, and with it the step's graph: where
 * nothing comes between backward and the update. One replica in one process: several
 * combine their gradients between the two, by collectives that a graph here does not
 * hold (NCCL's and the peers' run beside the step's stream with waits on the host;
 * the host's lanes and MPI are the host's), so they keep the update eager, and so do
 * micro-batches (their sums), exact mode (its fixed-point sums on the host) and
 * sampled steps that time the update apart. */
static gboolean
update_in_graph(const TdmTrainer *t, int r, gboolean detail)
{
  return t->world == 1 && t->opts[r] != NULL && t->exact == NULL && t->grad_acc == NULL &&
         t->buckets == NULL && t->job.count > 0 && !detail;
}

static void
job_train(TdmTrainer *t, int r)
{
  TdmReplica *rep = t->reps[r];
  TdmBackend *b = t->backends[r];
  Timing *tm = &t->timing[r];
  const Job *job = &t->job;
  gboolean timed = job->timed || b->kind == TDM_BACKEND_CPU;
  gboolean is_main = r == t->main_local;
  double start = timed ? tdm_trainer_span_seconds(t) : 0;
  /* Sampled steps also record their phases: forward and backward apart (the hook
   * takes the step off its graph), each collective and each wait. */
  gboolean detail = job->timed && t->options.step_detail;
  if (detail) {
    tm->phases.spans = 0;
    tm->phases.hidden_ms = 0;
    tdm_communicator_take_bytes(t->comm, r, NULL, NULL);   /* from unsampled steps */
    if (t->buckets != NULL)
      tdm_communicator_take_in_flight(t->comm, r);         /* likewise */
    tm->forward_end = start;
    tm->trainer = t;
    rep->forward_done = on_forward_done;
    rep->forward_done_data = tm;
  }

  Buckets *bk = t->buckets != NULL ? &t->buckets[r] : NULL;
  if (bk != NULL) {
    bk->lo = bk->hi = 0;
    bk->failed = FALSE;
    bk->first_launch = 0;
    bk->add_accumulated = FALSE;
  }
  rep->epoch = (guint32)job->epoch;
  rep->global_count = job->count;
  guint64 ops_before = b->operations;
  rep->step_graph_ops = 0;
  rep->step_captured_ops = 0;
  double issue_start = tdm_trainer_span_seconds(t);
  gboolean tail = update_in_graph(t, r, detail);
  tm->tail_ran = FALSE;
  if (tail) {
    if (job->momentum > 0)
      tdm_optimizer_set_momentum(t->opts[r], job->momentum);
    tdm_optimizer_prepare(t->opts[r], job->lr);
    rep->step_tail = update_in_step;
    rep->step_tail_data = t;
  }
  double last_start = start;
  if (t->exact != NULL)
    tdm_trainer_exact_compute(t, r);
  else
    last_start = train_micro_batches(t, r, tm, detail, start);
  rep->step_tail = NULL;
  /* The update ran where the body was issued through to its tail, or where a graph
   * holding it was launched. A stop before the body reached it: the update this step
   * counted (Adam's t) did not happen. */
  if (tail && (tm->tail_ran || rep->step_graph_ops > 0)) {
    if (is_main)
      t->main_updated = TRUE;
  } else if (tail) {
    t->opts[r]->t--;
  }
  /* Where the communicator can tell, the buckets' time under way until now, when
   * backward has ended; the last bucket, started after it, hides nothing. */
  double in_flight = detail && bk != NULL ? tdm_communicator_take_in_flight(t->comm, r) : NAN;
  if (bk != NULL)
    flush_bucket(bk);
  if (timed) {
    tdm_backend_synchronize(b);
    double end = tdm_trainer_span_seconds(t);
    tm->compute += end - start;
    if (detail) {
      rep->forward_done = NULL;
      mark_phase(t, tm, TDM_PHASE_FORWARD, last_start, tm->forward_end);
      mark_phase(t, tm, TDM_PHASE_BACKWARD, tm->forward_end, end);
      /* Buckets set off before backward ended were under way beside it. The host
       * communicator's lanes count that time; on a GPU's communication stream, from
       * the first bucket's launch on is an upper bound, where the stream had work
       * queued throughout. */
      if (isfinite(in_flight))
        tm->phases.hidden_ms = (float)(1e3 * MIN(in_flight, end - tm->forward_end));
      else if (bk != NULL && bk->first_launch > 0 && bk->first_launch < end)
        tm->phases.hidden_ms = (float)(1e3 * (end - MAX(bk->first_launch, tm->forward_end)));
    }
  }
  /* A stop mid-step leaves the step undone on every replica (see trainer_step). */
  if (tdm_trainer_aborted(t))
    return;

  gboolean ok = TRUE;
  if (bk != NULL) {
    /* The buckets are on their way: only wait for them to land. */
    GError *error = NULL;
    double t1 = timed ? tdm_trainer_span_seconds(t) : 0;
    ok = !bk->failed && t->comm->ops->wait(t->comm, r, &error);
    if (error != NULL)
      tdm_trainer_fail_worker(t, error);
    if (timed) {
      tdm_backend_synchronize(b);
      double t2 = tdm_trainer_span_seconds(t);
      tm->comm += t2 - t1;
      if (job->timed)
        mark_phase(t, tm, TDM_PHASE_ALLREDUCE, t1, t2);
    }
  } else if (t->exact != NULL) {
    ok = communicate(t, r, op_exact_sum, tm, timed,
                     t->config->strategy == TDM_STRATEGY_ALLREDUCE ? TDM_PHASE_ALLREDUCE
                                                                  : TDM_PHASE_REDUCE);
  } else if (t->world > 1) {
    if (t->config->strategy == TDM_STRATEGY_ALLREDUCE)
      ok = communicate(t, r, op_allreduce, tm, timed, TDM_PHASE_ALLREDUCE);
    else
      ok = communicate(t, r, op_reduce, tm, timed, TDM_PHASE_REDUCE);
  }
  if (ok && t->world > 1 && t->net->state_count > 0 && t->exact == NULL &&
      t->config->batchnorm == TDM_BATCHNORM_PER_REPLICA)
    ok = communicate(t, r, op_average_bn_state, tm, timed, TDM_PHASE_ALLREDUCE);
  if (!ok)
    return;

  double update_start = timed ? tdm_trainer_span_seconds(t) : 0;
  /* Clipped where the update runs, after the combination: the norm of the gradient
   * every replica (or the main one) holds now is the norm over all of them. */
  if (!tail && t->opts[r] != NULL && t->clip_work != NULL)
    tdm_backend_clip_norm(b, rep->grads, t->net->parameter_count,
                          (float)t->config->clip_grad_norm, t->clip_work[r]);
  if (!tail && t->opts[r] != NULL) {
    if (job->momentum > 0)
      tdm_optimizer_set_momentum(t->opts[r], job->momentum);
    tdm_optimizer_step(t->opts[r], rep->params, rep->grads, job->lr);
    if (is_main)
      t->main_updated = TRUE;
  }
  if (timed) {
    tdm_backend_synchronize(b);
    double end = tdm_trainer_span_seconds(t);
    tm->compute += end - update_start;
    if (job->timed && t->opts[r] != NULL)
      mark_phase(t, tm, TDM_PHASE_UPDATE, update_start, end);
  }
  if (t->world > 1 && t->config->strategy == TDM_STRATEGY_MAIN)
    communicate(t, r, op_broadcast, tm, timed, TDM_PHASE_BROADCAST);

  /* What the step issued from the host (an operation captured into a new graph is
   * not one of them: the launch that runs it is) and what it ran from a graph. */
  tm->steps++;
  tm->graph_ops += (guint64)rep->step_graph_ops;
  tm->host_ops += b->operations - ops_before - (guint64)rep->step_captured_ops;
  if (!timed) {
    tm->issue += tdm_trainer_span_seconds(t) - issue_start;
    tm->issued_steps++;
  }
  if (timed) {
    tm->wall += tdm_trainer_span_seconds(t) - start;
    tm->timed_steps++;
  }
}

static void
job_metrics(TdmTrainer *t, int r)
{
  TdmMetrics m = tdm_replica_take_metrics(t->reps[r]);
  double values[3] = {m.loss_sum, m.correct, r == 0 ? t->job.stop_vote : 0};
  GError *error = NULL;
  gboolean exact_ok = t->exact == NULL ||
                      tdm_trainer_exact_metrics(t, r, &values[0], &values[1], &error);
  /* Exact sums are every replica's already: the first replica alone passes them on
   * (adding zeros keeps them exact). */
  if (t->exact != NULL && t->rank0 + r != 0)
    values[0] = values[1] = 0;
  if (!exact_ok || !t->comm->ops->sum_doubles(t->comm, r, values, 3, &error)) {
    if (error != NULL)
      tdm_trainer_fail_worker(t, error);
    return;
  }
  if (r == 0)
    memcpy(t->metrics_out, values, sizeof values);
}

/* How many samples an evaluation pass takes. Exact mode's shards are whole chunks of the
 * capacity, and each pass's sums are added exactly: passes must start on the same
 * samples for any split, so they step by a divisor of the capacity. */
static int
evaluation_stride(const TdmTrainer *t, const TdmReplica *rep)
{
  if (t->exact == NULL)
    return rep->eval_capacity;
  int stride = MAX(1, MIN(rep->eval_capacity, rep->capacity));
  while (rep->capacity % stride != 0)
    stride--;
  return stride;
}

/* The first local replica (the calling thread, which may send events) reports the
 * evaluation's progress once it has run TDM_EVALUATION_QUIET_S, then every second,
 * counting the samples of the whole set by its own share's progress. Not the
 * pre-warm's evaluation (eval_start_us 0), which is part of its own phase. */
static void
evaluation_progress(TdmTrainer *t, int r, int done, int count, int total)
{
  if (r != 0 || count <= 0 || t->eval_start_us == 0)
    return;
  gint64 now = tdm_trainer_clock_us(t);
  gint64 since = t->eval_said_us != 0 ? t->eval_said_us : t->eval_start_us;
  gint64 quiet = t->eval_said_us != 0 ? G_USEC_PER_SEC
                                      : (gint64)(TDM_EVALUATION_QUIET_S * G_USEC_PER_SEC);
  if (now - since < quiet)
    return;
  t->eval_said_us = now;
  long seen = (long)((double)MIN(done, count) / count * total);
  tdm_trainer_emit_phase(t, t->job.validation ? TDM_SETUP_VALIDATION : TDM_SETUP_EVALUATION,
                         FALSE, seen, total, (now - t->eval_start_us) / 1e6);
}

static void
job_evaluate(TdmTrainer *t, int r)
{
  TdmReplica *rep = t->reps[r];
  gboolean validation = t->job.validation;
  int total = validation ? t->val_count : t->data->test->count;
  int first, count;
  /* Exact mode: whole chunks of the capacity (the same for any number of devices
   * there), each chunk's sums added exactly, so the test loss has the same bits too. */
  if (t->exact != NULL)
    tdm_exact_shard_of(total, rep->capacity, t->world, t->rank0 + r, &first, &count);
  else
    tdm_shard_of(total, t->world, t->rank0 + r, &first, &count);
  /* Passes of the inference buffers' size (eval_capacity), which may be smaller than
   * a training shard's. */
  int stride = evaluation_stride(t, rep);
  if (validation) {
    for (int done = 0; done < count && !tdm_trainer_aborted(t); done += stride) {
      tdm_replica_evaluate_train(rep, t->val_indices + first + done, MIN(stride, count - done));
      if (t->exact != NULL)
        tdm_trainer_exact_add_metrics(t, r, tdm_replica_take_metrics(rep));
      evaluation_progress(t, r, done + stride, count, total);
    }
    return;
  }
  int classes = t->net->classes;
  g_autofree float *logits =
      t->predicted != NULL ? g_new(float, (size_t)stride * classes) : NULL;
  for (int done = 0; done < count && !tdm_trainer_aborted(t); done += stride) {
    int chunk = MIN(stride, count - done);
    tdm_replica_evaluate(rep, first + done, chunk);
    if (t->exact != NULL)
      tdm_trainer_exact_add_metrics(t, r, tdm_replica_take_metrics(rep));
    evaluation_progress(t, r, done + chunk, count, total);
    if (logits == NULL)
      continue;
    /* The same rule as the loss's correct count (the first maximum wins), so the
     * confusion matrix's diagonal is the reported accuracy. */
    TdmBackend *b = t->backends[r];
    tdm_backend_download(b, logits, tdm_replica_outputs(rep),
                         (size_t)chunk * classes * sizeof(float));
    for (int i = 0; i < chunk; i++) {
      const float *z = logits + (size_t)i * classes;
      int best = 0;
      for (int j = 1; j < classes; j++)
        if (z[j] > z[best])
          best = j;
      t->predicted[first + done + i] = best;
    }
  }
}

static void
job_broadcast(TdmTrainer *t, int r)
{
  GError *error = NULL;
  if (t->world > 1 && (!op_broadcast(t, r, &error) || !t->comm->ops->wait(t->comm, r, &error))) {
    if (error != NULL)
      tdm_trainer_fail_worker(t, error);
  }
}

static void
run_job(TdmTrainer *t, int r)
{
  switch (t->job.kind) {
  case JOB_TRAIN:
    job_train(t, r);
    break;
  case JOB_METRICS:
    job_metrics(t, r);
    break;
  case JOB_EVALUATE:
    job_evaluate(t, r);
    break;
  case JOB_BROADCAST:
    job_broadcast(t, r);
    break;
  }
  /* No wait here: the device runs ahead of the host until a summary reads metrics. */
  GError *error = NULL;
  if (!tdm_backend_check_queued(t->backends[r], &error))
    tdm_trainer_fail_worker(t, error);
}


gpointer
tdm_trainer_worker_main(gpointer data)
{
  WorkerArgs *args = data;
  TdmTrainer *t = args->trainer;
  int r = args->replica;
  g_free(args);
  for (;;) {
    if (!tdm_barrier_wait(&t->start) || g_atomic_int_get(&t->quit_workers))
      break;
    run_job(t, r);
    if (!tdm_barrier_wait(&t->end))
      break;
  }
  return NULL;
}

/* Runs t->job on every local replica; FALSE with the first error when one failed. */
gboolean
tdm_trainer_run_all(TdmTrainer *t, GError **error)
{
  if (!tdm_barrier_wait(&t->start))
    goto failed;
  run_job(t, 0);
  if (!tdm_barrier_wait(&t->end))
    goto failed;
  if (t->worker_error == NULL)
    return TRUE;
failed:
  g_mutex_lock(&t->error_lock);
  if (t->worker_error != NULL) {
    g_propagate_error(error, t->worker_error);
    t->worker_error = NULL;
  } else if (!tdm_trainer_aborted(t)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND,
                _("a replica's worker stopped unexpectedly"));
  }
  g_mutex_unlock(&t->error_lock);
  return FALSE;
}
