/* tdm-trainer.c — the data-parallel training loop.
 *
 * One thread per local replica: the calling thread drives replica 0 and coordinates,
 * worker threads drive the others. Each step is a "job" that every thread runs in
 * lock-step between two barriers: train a shard, combine gradients (all-reduce, or
 * reduce to the main replica and broadcast its parameters back), update. Metrics,
 * evaluation and stop votes are jobs too, so processes under MPI stay in step.
 * Checkpoints (what goes in, how a run resumes) live in tdm-trainer-checkpoint.c.
 */
#include "tdm-trainer-private.h"
#include "tdm-backend.h"
#include "tdm-barrier.h"
#include "tdm-checkpoint.h"
#include "tdm-communicator.h"
#include "tdm-dataset.h"
#include "tdm-distributed.h"
#include "tdm-error.h"
#include "tdm-iterator.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-optimizer.h"
#include "tdm-replica.h"
#include "tdm-telemetry.h"
#include "tdm-build-config.h"

#include <cblas.h>
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
 * sawtooth (issue 12, fault 13). RATE_HISTORY summaries are kept to find the start
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
  t->step_detail = TRUE;
  return t;
}

void
tdm_trainer_set_clock(TdmTrainer *t, TdmClockFunc clock, gpointer user_data)
{
  g_return_if_fail(t != NULL);
  t->clock = clock;
  t->clock_data = user_data;
}

static gint64
now_us(TdmTrainer *t)
{
  return t->clock != NULL ? t->clock(t->clock_data) : g_get_monotonic_time();
}

void
tdm_trainer_free(TdmTrainer *t)
{
  if (t == NULL)
    return;
  tdm_config_free(t->config);
  g_free(t->resume_path);
  g_free(t->host_params);
  g_clear_pointer(&t->host_states, g_ptr_array_unref);
  g_mutex_clear(&t->pause_lock);
  g_cond_clear(&t->pause_cond);
  g_mutex_clear(&t->error_lock);
  g_mutex_clear(&t->abort_lock);
  g_free(t);
}

void
tdm_trainer_set_resume_path(TdmTrainer *t, const char *path)
{
  g_free(t->resume_path);
  t->resume_path = g_strdup(path);
}

void
tdm_trainer_set_paused(TdmTrainer *t, gboolean paused)
{
  g_mutex_lock(&t->pause_lock);
  t->paused = paused;
  g_cond_broadcast(&t->pause_cond);
  g_mutex_unlock(&t->pause_lock);
}

gboolean
tdm_trainer_get_paused(TdmTrainer *t)
{
  g_mutex_lock(&t->pause_lock);
  gboolean paused = t->paused;
  g_mutex_unlock(&t->pause_lock);
  return paused;
}

const float *
tdm_trainer_get_parameters(TdmTrainer *t, size_t *count)
{
  if (count != NULL)
    *count = t->host_params_count;
  return t->host_params;
}

const float *
tdm_trainer_get_bn_state(TdmTrainer *t, int replica, size_t *count)
{
  if (count != NULL)
    *count = t->host_state_count;
  if (t->host_states == NULL || replica < 0 || (guint)replica >= t->host_states->len)
    return NULL;
  return g_ptr_array_index(t->host_states, replica);
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
    b->ops->download(b, state, t->reps[r]->state, t->net->state_count * sizeof(float));
    if (!tdm_backend_check(b, error))
      return FALSE;
  }
  return TRUE;
}

static void
emit(TdmTrainer *t, const TdmEvent *event)
{
  if (t->sink != NULL && t->main_local >= 0)
    t->sink(event, t->sink_data);
}

/* ---- failures from any thread -------------------------------------------------- */

/* Called with abort_lock held: a stop may come from another thread while the run is
 * being torn down, which clears the barriers and the communicator under that lock. */
static void
abort_run_locked(TdmTrainer *t)
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
  abort_run_locked(t);
  g_mutex_unlock(&t->abort_lock);
}

static void
fail_worker(TdmTrainer *t, GError *error)
{
  g_mutex_lock(&t->error_lock);
  if (t->worker_error == NULL)
    t->worker_error = error;
  else
    g_error_free(error);
  g_mutex_unlock(&t->error_lock);
  abort_run(t);
}

static gboolean
aborted(TdmTrainer *t)
{
  return g_atomic_int_get(&t->abort_flag) != 0;
}

/* ---- the jobs, run by every local replica's thread -------------------------------- */

static double
now_seconds(void)
{
  return g_get_monotonic_time() / 1e6;
}

/* Appends a span to the replica's record of a sampled step. */
static void
mark_phase(TdmTrainer *t, Timing *tm, TdmPhase phase, double start, double end)
{
  TdmDevicePhases *p = &tm->phases;
  if (!t->step_detail || p->spans >= TDM_MAX_PHASE_SPANS)
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
  rep->backend->ops->synchronize(rep->backend);
  tm->forward_end = now_seconds();
}

static gboolean
communicate(TdmTrainer *t, int r, gboolean (*op)(TdmTrainer *, int, GError **), Timing *tm,
            gboolean timed, TdmPhase phase)
{
  TdmBackend *b = t->backends[r];
  GError *error = NULL;
  double t0 = timed ? now_seconds() : 0;
  if (!tdm_barrier_wait(&t->pre_comm))
    return FALSE;
  double t1 = timed ? now_seconds() : 0;
  if (!op(t, r, &error) || !t->comm->ops->wait(t->comm, r, &error)) {
    if (error != NULL)
      fail_worker(t, error);
    return FALSE;
  }
  if (timed) {
    b->ops->synchronize(b);
    double t2 = now_seconds();
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
  t->backends[r]->ops->scale(t->backends[r], rep->state, 1.0f / (float)t->world,
                             t->net->state_count);
  return TRUE;
}

/* Synchronized BN's hook (tdm-replica.h): the small per-channel sums, all-reduced. */
static gboolean
on_bn_reduce(TdmReplica *rep, float *buffer, size_t count, gpointer data)
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
    fail_worker(t, error);
  return FALSE;
}

static gboolean
op_broadcast(TdmTrainer *t, int r, GError **error)
{
  return tdm_communicator_broadcast(t->comm, r, t->reps[r]->params, t->net->parameter_count,
                                 t->config->main_replica, error);
}

/* Gradient buckets: during backward each layer hands over its finished gradients (the
 * last layer's first); once a bucket's worth has gathered, its all-reduce starts on
 * the communication stream while backward goes on. Every replica forms the same
 * buckets in the same order, as collectives require. */
typedef struct Buckets {
  TdmTrainer *trainer;
  int replica;
  size_t lo, hi;                /* the pending range [lo, hi); empty when lo == hi */
  gboolean failed;
} Buckets;

static void
flush_bucket(Buckets *bk)
{
  TdmTrainer *t = bk->trainer;
  if (bk->lo == bk->hi || bk->failed)
    return;
  GError *error = NULL;
  if (!tdm_communicator_allreduce(t->comm, bk->replica, t->reps[bk->replica]->grads, bk->lo,
                               bk->hi - bk->lo, &error)) {
    bk->failed = TRUE;
    if (error != NULL)
      fail_worker(t, error);
  }
  bk->hi = bk->lo;
}

static void
on_grads_ready(TdmReplica *rep, size_t offset, size_t count, gpointer data)
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
      on_grads_ready(t->reps[r], l->param_offset, l->param_count, &t->buckets[r]);
  }
}

static gboolean
sync_bn(const TdmTrainer *t)
{
  return t->world > 1 && t->net->bn_count > 0 && t->config->batchnorm == TDM_BATCHNORM_SYNC;
}

static gboolean
buckets_wanted(const TdmTrainer *t)
{
  /* Overlap pays where a communication stream runs beside the compute stream; CPU
   * workers would only do the same work sooner on the same cores. */
  /* Synchronized BN's all-reduces during backward would interleave with the buckets'
   * differently on a replica with an empty shard; it goes without buckets. */
  return t->world > 1 && t->config->strategy == TDM_STRATEGY_ALLREDUCE &&
         t->config->bucket_bytes > 0 && !sync_bn(t) &&
         (g_str_equal(t->comm->kind, "nccl") || g_str_equal(t->comm->kind, "peer"));
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
  double start = timed ? now_seconds() : 0;
  /* Sampled steps also record their phases: forward and backward apart (the hook
   * takes the step off its graph), each collective and each wait. */
  if (job->timed && t->step_detail) {
    tm->phases.spans = 0;
    tdm_communicator_take_bytes(t->comm, r, NULL, NULL);   /* from unsampled steps */
    tm->forward_end = start;
    rep->forward_done = on_forward_done;
    rep->forward_done_data = tm;
  }

  int offset, size;
  tdm_shard_of(job->count, t->world, t->rank0 + r, &offset, &size);
  Buckets *bk = t->buckets != NULL ? &t->buckets[r] : NULL;
  if (bk != NULL) {
    bk->lo = bk->hi = 0;
    bk->failed = FALSE;
  }
  rep->epoch = (guint32)job->epoch;
  rep->global_count = job->count;
  if (size > 0) {
    tdm_replica_train_step(rep, job->indices + offset, size, 1.0f / (float)job->count);
  } else {
    tdm_replica_train_idle(rep);
    if (bk != NULL)
      announce_all_gradients(t, r);
  }
  if (bk != NULL)
    flush_bucket(bk);
  if (timed) {
    b->ops->synchronize(b);
    double end = now_seconds();
    tm->compute += end - start;
    if (job->timed && t->step_detail) {
      rep->forward_done = NULL;
      mark_phase(t, tm, TDM_PHASE_FORWARD, start, tm->forward_end);
      mark_phase(t, tm, TDM_PHASE_BACKWARD, tm->forward_end, end);
    }
  }
  /* A stop mid-step leaves the step undone on every replica (see trainer_step). */
  if (aborted(t))
    return;

  gboolean ok = TRUE;
  if (bk != NULL) {
    /* The buckets are on their way: only wait for them to land. */
    GError *error = NULL;
    double t1 = timed ? now_seconds() : 0;
    ok = !bk->failed && t->comm->ops->wait(t->comm, r, &error);
    if (error != NULL)
      fail_worker(t, error);
    if (timed) {
      b->ops->synchronize(b);
      double t2 = now_seconds();
      tm->comm += t2 - t1;
      if (job->timed)
        mark_phase(t, tm, TDM_PHASE_ALLREDUCE, t1, t2);
    }
  } else if (t->world > 1) {
    if (t->config->strategy == TDM_STRATEGY_ALLREDUCE)
      ok = communicate(t, r, op_allreduce, tm, timed, TDM_PHASE_ALLREDUCE);
    else
      ok = communicate(t, r, op_reduce, tm, timed, TDM_PHASE_REDUCE);
  }
  if (ok && t->world > 1 && t->net->state_count > 0 &&
      t->config->batchnorm == TDM_BATCHNORM_PER_REPLICA)
    ok = communicate(t, r, op_average_bn_state, tm, timed, TDM_PHASE_ALLREDUCE);
  if (!ok)
    return;

  double update_start = timed ? now_seconds() : 0;
  if (t->opts[r] != NULL) {
    tdm_optimizer_step(t->opts[r], rep->params, rep->grads, job->lr);
    if (is_main)
      t->main_updated = TRUE;
  }
  if (timed) {
    b->ops->synchronize(b);
    double end = now_seconds();
    tm->compute += end - update_start;
    if (job->timed && t->opts[r] != NULL)
      mark_phase(t, tm, TDM_PHASE_UPDATE, update_start, end);
  }
  if (t->world > 1 && t->config->strategy == TDM_STRATEGY_MAIN)
    communicate(t, r, op_broadcast, tm, timed, TDM_PHASE_BROADCAST);

  if (timed) {
    tm->wall += now_seconds() - start;
    tm->timed_steps++;
  }
}

static void
job_metrics(TdmTrainer *t, int r)
{
  TdmMetrics m = tdm_replica_take_metrics(t->reps[r]);
  double values[3] = {m.loss_sum, m.correct, r == 0 ? t->job.stop_vote : 0};
  GError *error = NULL;
  if (!t->comm->ops->sum_doubles(t->comm, r, values, 3, &error)) {
    if (error != NULL)
      fail_worker(t, error);
    return;
  }
  if (r == 0)
    memcpy(t->metrics_out, values, sizeof values);
}

static void
job_evaluate(TdmTrainer *t, int r)
{
  TdmReplica *rep = t->reps[r];
  int total = t->data->test->count;
  int first, count;
  tdm_shard_of(total, t->world, t->rank0 + r, &first, &count);
  int classes = t->net->classes;
  g_autofree float *logits = t->predicted != NULL ? g_new(float, (size_t)rep->capacity * classes)
                                                  : NULL;
  for (int done = 0; done < count && !aborted(t); done += rep->capacity) {
    int chunk = MIN(rep->capacity, count - done);
    tdm_replica_evaluate(rep, first + done, chunk);
    if (logits == NULL)
      continue;
    /* The same rule as the loss's correct count (the first maximum wins), so the
     * confusion matrix's diagonal is the reported accuracy. */
    TdmBackend *b = t->backends[r];
    b->ops->download(b, logits, tdm_replica_outputs(rep), (size_t)chunk * classes * sizeof(float));
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
      fail_worker(t, error);
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
    fail_worker(t, error);
}

typedef struct {
  TdmTrainer *trainer;
  int replica;
} WorkerArgs;

static gpointer
worker_main(gpointer data)
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
static gboolean
run_all(TdmTrainer *t, GError **error)
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
  } else if (!aborted(t)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND,
                "a replica's worker stopped unexpectedly");
  }
  g_mutex_unlock(&t->error_lock);
  return FALSE;
}

/* ---- set-up and tear-down ----------------------------------------------------- */

/* Ends the worker threads; after this only the calling thread touches replicas. */
static void
stop_workers(TdmTrainer *t)
{
  if (t->threads == NULL)
    return;
  g_atomic_int_set(&t->quit_workers, 1);
  /* Workers wait at `start`; a broken barrier releases them too. */
  if (!tdm_barrier_wait(&t->start))
    tdm_barrier_break(&t->start);
  for (int r = 1; r < t->replicas; r++)
    if (t->threads[r] != NULL)
      g_thread_join(t->threads[r]);
  g_clear_pointer(&t->threads, g_free);
}

static void
teardown(TdmTrainer *t)
{
  stop_workers(t);
  if (t->cancel_handler != 0)
    g_cancellable_disconnect(t->cancellable, t->cancel_handler);
  t->cancel_handler = 0;
  g_clear_object(&t->cancellable);
  /* A stop from another thread (on_cancelled) may still be on its way. */
  g_mutex_lock(&t->abort_lock);
  t->live = FALSE;
  g_clear_pointer(&t->comm, tdm_communicator_free);
  tdm_barrier_clear(&t->start);
  tdm_barrier_clear(&t->end);
  tdm_barrier_clear(&t->pre_comm);
  g_mutex_unlock(&t->abort_lock);
  for (int r = 0; r < t->replicas; r++) {
    if (t->opts != NULL)
      tdm_optimizer_free(t->opts[r]);
    if (t->reps != NULL)
      tdm_replica_free(t->reps[r]);
    if (t->backends != NULL)
      tdm_backend_free(t->backends[r]);
  }
  g_clear_pointer(&t->opts, g_free);
  g_clear_pointer(&t->reps, g_free);
  g_clear_pointer(&t->backends, g_free);
  g_clear_pointer(&t->timing, g_free);
  g_clear_pointer(&t->buckets, g_free);
  g_clear_pointer(&t->it, tdm_iterator_free);
  g_clear_pointer(&t->predicted, g_free);
  g_clear_pointer(&t->telemetry, tdm_telemetry_free);
  g_clear_pointer(&t->net, tdm_network_free);
  if (t->data == t->borrowed_data)
    t->data = NULL;
  g_clear_pointer(&t->data, tdm_dataset_pair_free);
  g_clear_error(&t->worker_error);
  t->replicas = 0;
}

/* Whether other processes take part: then every decision that changes the sequence of
 * collectives (summaries, stopping) must be taken the same way on every rank. */
static gboolean
distributed(const TdmTrainer *t)
{
  return t->world > t->replicas;
}

static void
on_cancelled(GCancellable *cancellable, gpointer data)
{
  TdmTrainer *t = data;
  /* Within one process a stop may cut a step short; across processes the ranks must
   * agree first, which they do at the next summary. */
  g_mutex_lock(&t->abort_lock);
  if (t->live && distributed(t))
    g_atomic_int_set(&t->stop_requested, 1);
  else
    abort_run_locked(t);
  g_mutex_unlock(&t->abort_lock);
  /* Wake a paused run so it can see the stop. */
  tdm_trainer_set_paused(t, tdm_trainer_get_paused(t));
}

/* Replicas need room for a full shard and for an evaluation chunk. */
static int
replica_capacity(const TdmTrainer *t)
{
  int shard = (t->config->batch + t->world - 1) / t->world;
  int eval = MIN(t->config->eval_batch, MAX(1, t->data->test->count));
  return MAX(shard, eval);
}

static gboolean
build_replicas(TdmTrainer *t, GError **error)
{
  const TdmConfig *cfg = t->config;
  int capacity = replica_capacity(t);
  t->backends = g_new0(TdmBackend *, t->replicas);
  t->reps = g_new0(TdmReplica *, t->replicas);
  t->opts = g_new0(TdmOptimizer *, t->replicas);
  t->timing = g_new0(Timing, t->replicas);

  for (int r = 0; r < t->replicas; r++) {
    const char *device = cfg->devices[t->rank0 + r];
    t->backends[r] = tdm_backend_new(device, cfg->precision, error);
    if (t->backends[r] == NULL)
      return FALSE;
    g_autoptr(GError) local = NULL;
    t->reps[r] = tdm_replica_new(t->backends[r], t->net, capacity, t->data->train,
                                 t->data->test, &local);
    if (t->reps[r] == NULL) {
      if (g_error_matches(local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY)) {
        /* The whole replica's figure first, then the one buffer that failed: both in
         * the same units, and worded so the reader sees they are not the same sum. */
        size_t need = tdm_replica_bytes_needed(t->net, capacity, t->data->train,
                                               t->data->test);
        g_autofree char *whole = g_format_size_full(need, G_FORMAT_SIZE_IEC_UNITS);
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                    "%s: the replica needs %s in all (parameters, gradients, activations "
                    "for %d samples and the dataset) and did not fit: %s",
                    device, whole, capacity, local->message);
      } else {
        g_propagate_error(error, g_steal_pointer(&local));
      }
      return FALSE;
    }
    t->reps[r]->abort_flag = &t->abort_flag;
    t->backends[r]->abort_flag = &t->abort_flag;
    TdmReplica *rep = t->reps[r];
    rep->seed = cfg->seed;
    rep->smoothing = (float)cfg->label_smoothing;
    rep->augment_pad = cfg->crop_pad;
    rep->augment_flip = tdm_config_flips(cfg, t->data->name) ? TDM_FLIP_RANDOM : TDM_FLIP_NEVER;
    rep->test_flip = cfg->test_flip;
    gboolean updates = cfg->strategy == TDM_STRATEGY_ALLREDUCE || t->rank0 + r == cfg->main_replica;
    if (updates) {
      g_autofree uint8_t *mask = NULL;
      if (cfg->decay_scope == TDM_DECAY_WEIGHTS) {
        mask = g_malloc(MAX(1, t->net->parameter_count));
        tdm_network_decay_mask(t->net, mask);
      }
      t->opts[r] = tdm_optimizer_new(t->backends[r], cfg, t->net->parameter_count, mask,
                                     error);
      if (t->opts[r] == NULL)
        return FALSE;
    }
  }
  return TRUE;
}

static gboolean
start_workers(TdmTrainer *t, GError **error)
{
  t->threads = g_new0(GThread *, t->replicas);
  for (int r = 1; r < t->replicas; r++) {
    WorkerArgs *args = g_new(WorkerArgs, 1);
    args->trainer = t;
    args->replica = r;
    char name[32];
    g_snprintf(name, sizeof name, "tdm-replica-%d", r);
    t->threads[r] = g_thread_try_new(name, worker_main, args, error);
    if (t->threads[r] == NULL) {
      g_free(args);
      tdm_barrier_break(&t->start);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
all_cpu(const TdmConfig *cfg)
{
  for (int i = 0; cfg->devices[i] != NULL; i++)
    if (!g_str_equal(cfg->devices[i], "cpu"))
      return FALSE;
  return TRUE;
}

/* Reports the memory estimate, and refuses a run whose host needs exceed what is left
 * before anything large is allocated (the dataset is loaded already: it counts as
 * allocated). Under mpirun each process estimates every replica, so it only reports. */
static gboolean
estimate_memory(TdmTrainer *t, GError **error)
{
  const TdmConfig *cfg = t->config;
  int train = t->data->train->count, test = t->data->test->count;
  g_autofree TdmEvent *e = g_new0(TdmEvent, 1);
  e->kind = TDM_EVENT_MEMORY;
  TdmMemoryEvent *m = &e->memory;
  tdm_memory_estimate(cfg, t->net, train, test, m);
  const char *why = NULL;
  guint64 available = tdm_memory_host_available(&why);
  m->host_available = available;
  m->largest_batch = -1;
  if (available != G_MAXUINT64)
    m->largest_batch = tdm_memory_largest_batch(cfg, t->net, train, test,
                                                available + m->host_dataset, 0);
  emit(t, e);
  if (distributed(t))
    return TRUE;
  return tdm_memory_check_host(m, available, m->host_dataset, why, error);
}

static gboolean
setup(TdmTrainer *t, GCancellable *cancellable, GError **error)
{
  const TdmConfig *cfg = t->config;
  tdm_barrier_init(&t->start, 1);
  tdm_barrier_init(&t->end, 1);
  tdm_barrier_init(&t->pre_comm, 1);
  g_mutex_lock(&t->abort_lock);
  t->live = TRUE;
  g_mutex_unlock(&t->abort_lock);
  /* Under mpirun (tdm-distributed.h) every process is one replica, and its device is
   * its rank's entry in --devices, once a single device is made one per rank. */
  if (tdm_distributed_active() && !tdm_distributed_resolve_devices(t->config, error))
    return FALSE;
  if (!tdm_config_validate(cfg, error))
    return FALSE;
  /* A checkpoint that cannot be written would fail only after the first epoch's
   * work; the process that saves finds out now. */
  if (cfg->save_path != NULL &&
      (!tdm_distributed_active() || cfg->main_replica == tdm_distributed_rank()) &&
      !tdm_checkpoint_check_writable(cfg->save_path, error))
    return FALSE;

  /* Decoding an image folder can take minutes: a stop ends it too. */
  TdmImageOptions image = {.size = cfg->image_size, .channels = cfg->image_channels,
                           .seed = cfg->seed, .cancellable = cancellable};
  t->data = t->borrowed_data != NULL ? (TdmDatasetPair *)t->borrowed_data
                                      : tdm_dataset_open_with(cfg->dataset, &image, error);
  if (t->data == NULL)
    return FALSE;
  const TdmDataset *train = t->data->train;
  if (cfg->batch > train->count) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                "--batch %d is larger than the %d training samples of %s", cfg->batch,
                train->count, t->data->name);
    return FALSE;
  }
  t->net = tdm_network_new(cfg->network, train->height, train->width, train->channels,
                           train->classes, error);
  if (t->net == NULL)
    return FALSE;

  t->world = tdm_config_replica_count(cfg);
  t->rank0 = 0;
  t->replicas = t->world;
  if (tdm_distributed_active()) {
    /* Ranks are global replica indices: shards, evaluation chunks and the main
     * replica's rank follow from them (see distributed()). */
    t->world = tdm_distributed_size();
    t->rank0 = tdm_distributed_rank();
    t->replicas = 1;
  }
  t->main_local = cfg->main_replica - t->rank0;
  if (t->main_local < 0 || t->main_local >= t->replicas)
    t->main_local = -1;

  /* One OpenBLAS thread per worker; a lone worker may use every core, or under
   * mpirun its share of the machine's. */
  if (all_cpu(cfg)) {
    int cores = MAX(1, (int)g_get_num_processors() / tdm_distributed_local_size());
    openblas_set_num_threads(t->replicas == 1 ? cores : 1);
  }

  t->start.parties = t->end.parties = t->pre_comm.parties = t->replicas;

  if (!estimate_memory(t, error))
    return FALSE;
  if (!build_replicas(t, error))
    return FALSE;
#if TDM_HAVE_MPI
  if (tdm_distributed_active())
    t->comm = tdm_communicator_mpi_new(t->backends[0], error);
  else
#endif
    t->comm = tdm_communicator_new(t->backends, t->replicas, error);
  if (t->comm == NULL)
    return FALSE;
  if (sync_bn(t))
    for (int r = 0; r < t->replicas; r++)
      if (!tdm_replica_sync_bn(t->reps[r], on_bn_reduce, t, t->rank0 + r, t->world, error))
        return FALSE;
  if (buckets_wanted(t)) {
    t->buckets = g_new0(Buckets, t->replicas);
    for (int r = 0; r < t->replicas; r++) {
      t->buckets[r].trainer = t;
      t->buckets[r].replica = r;
      t->reps[r]->grads_ready = on_grads_ready;
      t->reps[r]->grads_ready_data = &t->buckets[r];
    }
  }
  t->it = tdm_iterator_new(cfg->seed, train->count, cfg->batch);
  /* Predictions need every test sample's answer in this process. */
  if (!tdm_distributed_active() && t->data->test->count > 0)
    t->predicted = g_new0(int32_t, t->data->test->count);
  if (!all_cpu(cfg))
    t->telemetry = tdm_telemetry_new(500);
  return start_workers(t, error);
}

/* Seeded parameters on the main replica, then broadcast: every replica starts equal. */
static gboolean
initialize_parameters(TdmTrainer *t, GError **error)
{
  size_t n = t->net->parameter_count;
  g_autofree float *params = g_new(float, n);
  tdm_network_init_parameters(t->net, t->config->seed, params);
  if (t->main_local >= 0) {
    TdmBackend *b = t->backends[t->main_local];
    b->ops->upload(b, t->reps[t->main_local]->params, params, n * sizeof(float));
  }
  t->job.kind = JOB_BROADCAST;
  return run_all(t, error);
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
} RunStats;

static void
emit_started(TdmTrainer *t)
{
  const TdmConfig *cfg = t->config;
  TdmEvent e = {.kind = TDM_EVENT_STARTED};
  TdmStartedEvent *s = &e.started;
  s->replicas = t->world;
  s->main_replica = cfg->main_replica;
  for (int r = 0; r < t->world && r < TDM_MAX_REPLICAS; r++) {
    g_strlcpy(s->device[r], cfg->devices[r], sizeof s->device[r]);
    int offset;
    tdm_shard_of(cfg->batch, t->world, r, &offset, &s->shard[r]);
  }
  s->batch = cfg->batch;
  s->epochs = cfg->epochs;
  s->steps_per_epoch = tdm_iterator_batches_per_epoch(t->it);
  s->total_steps = (long)s->steps_per_epoch * cfg->epochs;
  s->start_step = t->step;
  s->parameters = t->net->parameter_count;
  g_strlcpy(s->network, t->net->spec, sizeof s->network);
  g_strlcpy(s->dataset, t->data->name, sizeof s->dataset);
  s->train_count = t->data->train->count;
  s->test_count = t->data->test->count;
  g_strlcpy(s->notice, t->data->notice != NULL ? t->data->notice : "", sizeof s->notice);
  emit(t, &e);
}

static double
run_fraction(TdmTrainer *t)
{
  double done = t->it->epoch + (double)t->it->position / t->it->count;
  return MIN(1.0, done / t->config->epochs);
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
  if (!run_all(t, error))
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
    /* The step body, the upload of its indices and the optimizer's one operation. */
    d->device[r].operations_per_step = t->reps[r]->ops_per_step + 2;
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
  emit(t, &e);
}

/* The sampled step just run: each local replica's phases, then how its batch split. */
static void
emit_step_detail(TdmTrainer *t)
{
  TdmEvent e = {.kind = TDM_EVENT_PHASES};
  TdmPhasesEvent *p = &e.phases;
  p->step = t->step;
  p->replicas = MIN(t->replicas, TDM_MAX_REPLICAS);
  for (int r = 0; r < p->replicas; r++) {
    p->device[r] = t->timing[r].phases;
    tdm_communicator_take_bytes(t->comm, r, &p->device[r].bytes_sent,
                                &p->device[r].bytes_received);
  }
  emit(t, &e);

  memset(&e, 0, sizeof e);
  e.kind = TDM_EVENT_BATCH;
  TdmBatchEvent *bt = &e.batch;
  const TdmDataset *train = t->data->train;
  bt->step = t->step;
  bt->batch = t->job.count;
  bt->replicas = MIN(t->world, TDM_MAX_REPLICAS);
  for (int r = 0; r < bt->replicas; r++) {
    tdm_shard_of(t->job.count, t->world, r, &bt->device[r].offset, &bt->device[r].size);
    bt->device[r].shown = MIN(bt->device[r].size, TDM_BATCH_SAMPLES_SHOWN);
    for (int i = 0; i < bt->device[r].shown; i++) {
      int32_t index = t->job.indices[bt->device[r].offset + i];
      bt->device[r].index[i] = index;
      bt->device[r].label[i] = train->labels[index];
    }
  }
  emit(t, &e);
}

/* After an evaluation: the confusion matrix and the sample list from t->predicted. */
static void
emit_predictions(TdmTrainer *t, int epoch)
{
  if (t->predicted == NULL)
    return;
  const TdmDataset *test = t->data->test;
  TdmEvent *e = g_new0(TdmEvent, 1);
  e->kind = TDM_EVENT_PREDICTIONS;
  TdmPredictionsEvent *p = &e->predictions;
  p->epoch = epoch;
  p->step = t->step;
  p->classes = test->classes;
  p->has_matrix = test->classes <= TDM_MAX_CONFUSION_CLASSES;
  p->test_count = test->count;
  for (int c = 0; c < MIN(test->classes, TDM_MAX_CONFUSION_CLASSES); c++)
    if (test->class_names != NULL && test->class_names[c] != NULL)
      g_strlcpy(p->class_name[c], test->class_names[c], TDM_CLASS_NAME_SIZE);
  for (int i = 0; i < test->count; i++) {
    int truth = test->labels[i], predicted = t->predicted[i];
    if (truth == predicted)
      p->correct++;
    if (p->has_matrix)
      p->matrix[truth][predicted]++;
  }
  /* Mistakes first, then right answers, each in test-set order. */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < test->count && p->samples < TDM_PREDICTION_SAMPLES; i++) {
      gboolean right = test->labels[i] == t->predicted[i];
      if (right != (pass == 1))
        continue;
      p->sample[p->samples].index = i;
      p->sample[p->samples].truth = test->labels[i];
      p->sample[p->samples].predicted = (uint8_t)t->predicted[i];
      p->samples++;
    }
  emit(t, e);
  g_free(e);
}

static gboolean
check_finite(TdmTrainer *t, double loss_sum, GError **error)
{
  if (isfinite(loss_sum))
    return TRUE;
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DIVERGED,
              "the training loss became %s at step %ld (epoch %d): training diverged; "
              "try a smaller learning rate than --lr %g",
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
  s->samples_per_second = isfinite(rate) ? rate : interval > 0 ? samples / interval : 0;
  s->lr = t->job.lr;
  s->elapsed = elapsed;
  s->eta = s->fraction > 0 ? s->elapsed * (1 - s->fraction) / s->fraction : -1;
  emit(t, &e);

  st->samples = 0;
  st->last_summary_us = now;
  st->next_timed = TRUE;
  if (now - st->last_devices_us >= DEVICES_INTERVAL_US) {
    emit_devices(t, st);
    st->last_devices_us = now;
  }
  return TRUE;
}

static gboolean
evaluate(TdmTrainer *t, double *loss, double *accuracy, GError **error)
{
  t->job.kind = JOB_EVALUATE;
  if (!run_all(t, error))
    return FALSE;
  double loss_sum, correct;
  if (!collect_metrics(t, FALSE, &loss_sum, &correct, NULL, error))
    return FALSE;
  *loss = loss_sum / t->data->test->count;
  *accuracy = correct / t->data->test->count;
  return TRUE;
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
    emit(t, &e);
  }
  g_mutex_lock(&t->pause_lock);
  while (t->paused && t->single_steps == 0 && !aborted(t)) {
    gint64 deadline = g_get_monotonic_time() + 50 * 1000;
    g_cond_wait_until(&t->pause_cond, &t->pause_lock, deadline);
  }
  gboolean stepping = t->paused && t->single_steps > 0;
  if (stepping)
    t->single_steps--;
  g_mutex_unlock(&t->pause_lock);
  if (rest) {
    st->segment_start_us = now_us(t);
    st->last_summary_us = st->segment_start_us;
    st->samples = 0;
    if (!stepping) {
      TdmEvent e = {.kind = TDM_EVENT_RESUMED};
      emit(t, &e);
    }
  }
  /* A single step is always sampled: whoever steps through wants to see it. */
  if (stepping)
    st->next_timed = TRUE;
  return !aborted(t);
}

/* Holds the next step back until the pace allows it (on the trainer's clock, so a
 * test can count steps against simulated time); FALSE when stopped meanwhile. */
static gboolean
wait_for_pace(TdmTrainer *t)
{
  g_mutex_lock(&t->pause_lock);
  for (;;) {
    if (aborted(t))
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
  return !aborted(t);
}

void
tdm_trainer_set_dataset(TdmTrainer *t, const TdmDatasetPair *data)
{
  g_return_if_fail(t != NULL && data != NULL && data->train != NULL && data->test != NULL);
  t->borrowed_data = data;
}

void
tdm_trainer_set_step_detail(TdmTrainer *t, gboolean detail)
{
  g_return_if_fail(t != NULL);
  t->step_detail = detail;
}

void
tdm_trainer_set_summary_steps(TdmTrainer *t, int steps)
{
  g_return_if_fail(t != NULL && steps >= 0);
  t->summary_steps = steps;
}

void
tdm_trainer_set_pace(TdmTrainer *t, double steps_per_second)
{
  g_return_if_fail(t != NULL);
  g_mutex_lock(&t->pause_lock);
  t->pace = MAX(0.0, steps_per_second);
  g_cond_broadcast(&t->pause_cond);
  g_mutex_unlock(&t->pause_lock);
}

double
tdm_trainer_get_pace(TdmTrainer *t)
{
  g_mutex_lock(&t->pause_lock);
  double pace = t->pace;
  g_mutex_unlock(&t->pause_lock);
  return pace;
}

void
tdm_trainer_single_step(TdmTrainer *t)
{
  g_return_if_fail(t != NULL);
  g_mutex_lock(&t->pause_lock);
  if (t->paused)
    t->single_steps++;
  g_cond_broadcast(&t->pause_cond);
  g_mutex_unlock(&t->pause_lock);
}

static gboolean
train_epochs(TdmTrainer *t, gboolean *stopped, double *final_loss, double *final_accuracy,
             GError **error)
{
  const TdmConfig *cfg = t->config;
  RunStats st = {0};
  st.segment_start_us = st.last_summary_us = st.last_devices_us = now_us(t);
  st.next_timed = TRUE;
  /* The throughput window's first end: no samples, no training time yet. */
  st.rate_len = 1;
  st.rate_head = 1;
  *final_loss = *final_accuracy = NAN;

  while (t->it->epoch < cfg->epochs) {
    if (cfg->max_steps > 0 && t->step >= cfg->max_steps) {
      gboolean stop;
      if (st.samples > 0 && !summarize(t, &st, FALSE, &stop, error))
        return FALSE;
      break;
    }
    if (!wait_while_paused(t, &st) || !wait_for_pace(t) || aborted(t)) {
      *stopped = TRUE;
      break;
    }
    int epoch_before = t->it->epoch, position_before = t->it->position;
    double epoch_float = epoch_before + (double)position_before / t->it->count;
    int count;
    gboolean epoch_end;
    const int32_t *indices = tdm_iterator_next(t->it, &count, &epoch_end);

    t->job.kind = JOB_TRAIN;
    t->job.indices = indices;
    t->job.count = count;
    t->job.epoch = epoch_before;
    t->job.lr = tdm_config_lr_at(cfg, epoch_float);
    t->job.timed = st.next_timed;
    t->job.origin = now_seconds();
    t->main_updated = FALSE;
    st.next_timed = FALSE;
    if (!run_all(t, error) || aborted(t)) {
      if (!aborted(t) || (error != NULL && *error != NULL))
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
    st.samples += count;
    st.epoch_samples += count;
    if (t->job.timed && t->step_detail)
      emit_step_detail(t);

    gint64 now = now_us(t);
    gboolean due = distributed(t)       ? t->step % DISTRIBUTED_SUMMARY_STEPS == 0
                   : t->summary_steps > 0 ? t->step % t->summary_steps == 0
                                          : now - st.last_summary_us >= SUMMARY_INTERVAL_US;
    if (epoch_end || due) {
      gboolean stop = FALSE;
      if (!summarize(t, &st, g_atomic_int_get(&t->stop_requested), &stop, error))
        return FALSE;
      if (stop) {
        *stopped = TRUE;
        break;
      }
    }
    if (epoch_end) {
      st.trained_seconds = elapsed_training(t, &st);
      double test_loss, test_accuracy;
      if (!evaluate(t, &test_loss, &test_accuracy, error)) {
        if (aborted(t) && (error == NULL || *error == NULL)) {
          *stopped = TRUE;
          break;
        }
        return FALSE;
      }
      TdmEvent e = {.kind = TDM_EVENT_EPOCH};
      e.epoch.epoch = epoch_before + 1;
      e.epoch.step = t->step;
      e.epoch.train_loss = st.epoch_loss / MAX(1, st.epoch_samples);
      e.epoch.train_accuracy = st.epoch_correct / MAX(1, st.epoch_samples);
      e.epoch.test_loss = test_loss;
      e.epoch.test_accuracy = test_accuracy;
      e.epoch.elapsed = st.trained_seconds;
      emit(t, &e);
      emit_predictions(t, epoch_before + 1);
      *final_loss = test_loss;
      *final_accuracy = test_accuracy;
      st.epoch_loss = st.epoch_correct = 0;
      st.epoch_samples = 0;
      if (!tdm_trainer_save_checkpoint(t, error))
        return FALSE;
      st.segment_start_us = st.last_summary_us = now_us(t);
      st.samples = 0;
    }
  }
  /* The last figures of the run, however short it was. A stop can leave workers in
   * their last job, still writing their timing: read it once they are gone. */
  stop_workers(t);
  emit_devices(t, &st);
  t->trained_seconds = elapsed_training(t, &st);
  return TRUE;
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

  if (!setup(t, cancellable, &local))
    goto failed;
  if (cancellable != NULL) {
    t->cancellable = g_object_ref(cancellable);
    t->cancel_handler = g_cancellable_connect(cancellable, G_CALLBACK(on_cancelled), t, NULL);
  }
  if (!initialize_parameters(t, &local))
    goto failed_or_stopped;
  if (t->resume_path != NULL && !tdm_trainer_restore_checkpoint(t, t->resume_path, &local))
    goto failed;

  emit_started(t);
  if (!train_epochs(t, &stopped, &test_loss, &test_accuracy, &local))
    goto failed_or_stopped;

finish:
  /* With the workers gone, the main replica's state can be read whatever stopped. */
  stop_workers(t);
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
    emit(t, &e);
  }
  teardown(t);
  return TRUE;

failed_or_stopped:
  if (local == NULL && aborted(t)) {
    stopped = TRUE;
    goto finish;
  }
failed:
  if (local == NULL)
    g_set_error(&local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND, "training stopped");
  if (t->sink != NULL) {
    /* Every process reports its own failure, not only the main one's. */
    TdmEvent e = {.kind = TDM_EVENT_FAILED};
    e.failed = local;
    t->sink(&e, t->sink_data);
  }
  /* The other processes may be waiting in a collective for this one, which must not
   * wait for them in turn while tearing down (NCCL's or MPI's clean-up). */
  if (distributed(t))
    tdm_communicator_abort(t->comm);
  teardown(t);
  g_propagate_error(error, local);
  return FALSE;
}
