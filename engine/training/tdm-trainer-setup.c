/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer-setup.c — a run's set-up and tear-down: the dataset and network, the
 * memory estimate (and the refusal of a run that cannot fit), a backend, replica and
 * optimizer per local replica, the communicator, synchronized BN and gradient
 * buckets, the worker threads, the seeded parameters every replica starts from and
 * the pre-warm that leaves no trace; then all of it freed again. The loop is in
 * tdm-trainer.c.
 */
#include "tdm-trainer-private.h"
#include "tdm-i18n.h"
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

/* Ends the worker threads; after this only the calling thread touches replicas. */
void
tdm_trainer_stop_workers(TdmTrainer *t)
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

void
tdm_trainer_teardown(TdmTrainer *t)
{
  tdm_trainer_stop_workers(t);
  if (t->cancel_handler != 0)
    g_cancellable_disconnect(t->cancellable, t->cancel_handler);
  t->cancel_handler = 0;
  g_clear_object(&t->cancellable);
  /* A stop from another thread (tdm_trainer_on_cancelled) may still be on its way. */
  g_mutex_lock(&t->abort_lock);
  t->live = FALSE;
  g_clear_pointer(&t->comm, tdm_communicator_free);
  tdm_barrier_clear(&t->start);
  tdm_barrier_clear(&t->end);
  tdm_barrier_clear(&t->pre_comm);
  g_mutex_unlock(&t->abort_lock);
  /* Before the backends: exact mode may hold device memory on them. */
  tdm_trainer_exact_free(t);
  for (int r = 0; r < t->replicas; r++) {
    if (t->grad_acc != NULL && t->grad_acc[r] != NULL)
      tdm_backend_release(t->backends[r], t->grad_acc[r]);
    if (t->clip_work != NULL && t->clip_work[r] != NULL)
      tdm_backend_release(t->backends[r], t->clip_work[r]);
    if (t->opts != NULL)
      tdm_optimizer_free(t->opts[r]);
    if (t->reps != NULL && t->reps[r] != NULL)
      t->stem_bn_runs += t->reps[r]->stem_bn_runs;
    if (t->reps != NULL)
      tdm_replica_free(t->reps[r]);
    if (t->backends != NULL)
      tdm_backend_free(t->backends[r]);
  }
  g_clear_pointer(&t->opts, g_free);
  g_clear_pointer(&t->grad_acc, g_free);
  g_clear_pointer(&t->clip_work, g_free);
  g_clear_pointer(&t->reps, g_free);
  g_clear_pointer(&t->backends, g_free);
  g_clear_pointer(&t->timing, g_free);
  g_clear_pointer(&t->buckets, g_free);
  g_clear_pointer(&t->it, tdm_iterator_free);
  g_clear_pointer(&t->predicted, g_free);
  g_clear_pointer(&t->train_map, g_free);
  g_clear_pointer(&t->val_indices, g_free);
  g_clear_pointer(&t->mapped, g_free);
  g_clear_pointer(&t->telemetry, tdm_telemetry_free);
  tdm_trainer_finetune_teardown(t);
  g_clear_pointer(&t->net, tdm_network_free);
  if (t->data == t->borrowed_data)
    t->data = NULL;
  g_clear_pointer(&t->data, tdm_dataset_pair_free);
  g_clear_error(&t->worker_error);
  t->replicas = 0;
}

/* Whether other processes take part: then every decision that changes the sequence of
 * collectives (summaries, stopping) must be taken the same way on every rank. */
gboolean
tdm_trainer_distributed(const TdmTrainer *t)
{
  return t->world > t->replicas;
}

void
tdm_trainer_on_cancelled(GCancellable *cancellable, gpointer data)
{
  TdmTrainer *t = data;
  /* Within one process a stop may cut a step short; across processes the ranks must
   * agree first, which they do at the next summary. */
  g_mutex_lock(&t->abort_lock);
  if (t->live && tdm_trainer_distributed(t))
    g_atomic_int_set(&t->stop_requested, 1);
  else
    tdm_trainer_abort_locked(t);
  g_mutex_unlock(&t->abort_lock);
  /* Wake a paused run so it can see the stop. */
  tdm_trainer_set_paused(t, tdm_trainer_get_paused(t));
}

/* --resized-crop, --jitter and --erase (tdm-augment.h) on replica r. */
static gboolean
photo_augmentation(TdmTrainer *t, int r, GError **error)
{
  const TdmConfig *cfg = t->config;
  TdmReplica *rep = t->reps[r];
  gboolean on = cfg->crop_scale[1] > 0 || cfg->jitter[0] > 0 || cfg->jitter[1] > 0 ||
                cfg->jitter[2] > 0 || cfg->erase > 0;
  if (!on)
    return TRUE;
  if (!tdm_backend_has_gather_photo(t->backends[r]) || t->net->in_c > 4) {
    char device[TDM_DEVICE_NAME_MAX];
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("%s: photo augmentation (--resized-crop, --jitter, --erase) is not available "
                  "on this device for %d-channel samples"),
                tdm_device_id_name(cfg->devices[t->rank0 + r], device), t->net->in_c);
    return FALSE;
  }
  rep->photo = TRUE;
  TdmPhotoAugment *a = &rep->photo_augment;
  a->scale_min = (float)cfg->crop_scale[0];
  a->scale_max = (float)cfg->crop_scale[1];
  a->ratio_min = (float)cfg->crop_ratio[0];
  a->ratio_max = (float)cfg->crop_ratio[1];
  for (int i = 0; i < 3; i++)
    a->jitter[i] = (float)cfg->jitter[i];
  a->erase = (float)cfg->erase;
  return TRUE;
}

/* The device buffers of --accumulate (the earlier micro-batches' gradients, but not
 * in exact mode, whose chunks are summed anyway) and --clip-grad-norm (its work,
 * where the update runs): as tdm_memory_controls_bytes() counts them. */
static gboolean
controls_buffers(TdmTrainer *t, int r, gboolean updates, GError **error)
{
  const TdmConfig *cfg = t->config;
  TdmBackend *b = t->backends[r];
  if (cfg->accumulate > 1 && !cfg->exact) {
    if (t->grad_acc == NULL)
      t->grad_acc = g_new0(float *, t->replicas);
    t->grad_acc[r] = tdm_backend_alloc(b, t->net->parameter_count * sizeof(float), error);
    if (t->grad_acc[r] == NULL)
      return FALSE;
  }
  if (cfg->clip_grad_norm > 0) {
    if (t->clip_work == NULL)
      t->clip_work = g_new0(double *, t->replicas);
    if (updates) {
      t->clip_work[r] = tdm_backend_alloc(b, TDM_CLIP_WORK_DOUBLES * sizeof(double), error);
      if (t->clip_work[r] == NULL)
        return FALSE;
    }
  }
  return TRUE;
}

static gboolean prewarm_wanted (const TdmTrainer *t);

/* The column workspace replica r starts from: what an earlier run of the configuration
 * settled on, where remembered; else, where the pre-warm meets every convolution
 * before a step is captured and the engine sizes it, a small one that grows as the
 * choices are timed (the first run's peak is then the largest need, not the columns'
 * upper bound); else the upper bound (0). */
static size_t
starting_columns(TdmTrainer *t, int r)
{
  size_t planned = t->planned_columns != NULL ? t->planned_columns[t->rank0 + r] : 0;
  if (planned > 0 || !prewarm_wanted(t) || !tdm_backend_has_conv_engine(t->backends[r]))
    return planned;
  return TDM_REPLICA_WORKSPACE_START;
}

static gboolean
build_replicas(TdmTrainer *t, GError **error)
{
  const TdmConfig *cfg = t->config;
  /* A full shard to train, an evaluation chunk that fits: the estimate's rule. */
  int capacity = tdm_memory_capacity(cfg, t->world, t->data->test->count);
  t->backends = g_new0(TdmBackend *, t->replicas);
  t->reps = g_new0(TdmReplica *, t->replicas);
  t->opts = g_new0(TdmOptimizer *, t->replicas);
  t->timing = g_new0(Timing, t->replicas);

  for (int r = 0; r < t->replicas; r++) {
    t->backends[r] = tdm_backend_new(cfg->devices[t->rank0 + r], t->precision.precision,
                                    error);
    if (t->backends[r] == NULL)
      return FALSE;
    t->backends[r]->deterministic = cfg->exact;
    g_autoptr(GError) local = NULL;
    int eval_capacity = tdm_memory_eval_capacity(cfg, t->net, t->backends[r]->kind, t->world,
                                                 t->data->test->count);
    t->reps[r] = tdm_replica_new_planned(t->backends[r], t->net, capacity, eval_capacity,
                                         starting_columns(t, r), t->data->train,
                                         t->data->test, &local);
    if (t->reps[r] == NULL) {
      if (g_error_matches(local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY)) {
        /* The whole replica's figure first, then the one buffer that failed: both in
         * the same units, and worded so the reader sees they are not the same sum. */
        size_t need = tdm_replica_bytes_needed(t->net, t->backends[r]->kind,
                                               t->backends[r]->precision, capacity,
                                               eval_capacity, t->data->train, t->data->test);
        g_autofree char *whole = g_format_size_full(need, G_FORMAT_SIZE_IEC_UNITS);
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                    _("%s: the replica needs %s in all (parameters, gradients, activations "
                    "for %d samples and the dataset) and did not fit: %s"),
                    t->backends[r]->name, whole, capacity, local->message);
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
    rep->test_shift = cfg->test_shift;
    if (!photo_augmentation(t, r, error))
      return FALSE;
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
    tdm_trainer_finetune_replica(t, r);
    if (!controls_buffers(t, r, updates, error))
      return FALSE;
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
    t->threads[r] = g_thread_try_new(name, tdm_trainer_worker_main, args, error);
    if (t->threads[r] == NULL) {
      g_free(args);
      tdm_barrier_break(&t->start);
      return FALSE;
    }
  }
  return TRUE;
}

/* Holds out config->val_split of the training set: a seeded choice (the same for any
 * number of devices, and again on resume), the rest trained on in its order. */
static gboolean
split_validation(TdmTrainer *t, GError **error)
{
  const TdmConfig *cfg = t->config;
  int n = t->data->train->count;
  t->train_used = n;
  t->val_count = 0;
  if (cfg->val_split <= 0)
    return TRUE;
  int held = (int)CLAMP(llround(cfg->val_split * n), 1, (gint64)n - 1);
  /* A batch left to the trainer (options.batch_fits) shrinks to the rest. */
  int step_batch = tdm_config_step_batch(cfg);
  if (n < 2 || (n - held < step_batch && !t->options.batch_fits)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("--val-split %g: leaves %d of the %d training samples of %s, fewer than a "
                "step's %d"),
                cfg->val_split, n - held, n, t->data->name, step_batch);
    return FALSE;
  }
  /* A partial Fisher–Yates shuffle from the seed picks the held-out samples. */
  guint32 words[3] = {(guint32)cfg->seed, (guint32)(cfg->seed >> 32), 0x7661u /* "va" */};
  GRand *rand = g_rand_new_with_seed_array(words, G_N_ELEMENTS(words));
  g_autofree int32_t *order = g_new(int32_t, n);
  for (int i = 0; i < n; i++)
    order[i] = i;
  for (int i = 0; i < held; i++) {
    int j = g_rand_int_range(rand, i, n);
    int32_t swap = order[i];
    order[i] = order[j];
    order[j] = swap;
  }
  g_rand_free(rand);
  g_autofree gboolean *is_held = g_new0(gboolean, n);
  for (int i = 0; i < held; i++)
    is_held[order[i]] = TRUE;
  t->val_indices = g_new(int32_t, held);
  t->train_map = g_new(int32_t, n - held);
  t->mapped = g_new(int32_t, step_batch);
  int v = 0, u = 0;
  for (int i = 0; i < n; i++) {
    if (is_held[i])
      t->val_indices[v++] = i;
    else
      t->train_map[u++] = i;
  }
  t->val_count = held;
  t->train_used = n - held;
  return TRUE;
}

typedef struct {
  TdmTrainer *trainer;
  double since;
  int total;
  gboolean decoding;    /* FALSE when read whole from the cache */
} DatasetProgress;

/* Files decoded so far, from the thread that opens the dataset (this one). */
static void
on_dataset_progress(int done, int total, gpointer data)
{
  DatasetProgress *p = data;
  /* A read from the cache reports 1 of 1; decoding reports its files, the first time
   * perhaps all of them at once (the other threads may have done them all). */
  gboolean first = !p->decoding;
  p->total = total;
  p->decoding = p->decoding || done < total || total > 1;
  if (p->decoding && (done < total || first))
    tdm_trainer_emit_setup(p->trainer, TDM_SETUP_DATASET, FALSE, done, total, p->since);
}

/* A batch nobody chose that is larger than the training set: the one that fits
 * instead, the asked one kept for the STARTED event. FALSE where none does. */
static gboolean
fit_batch(TdmTrainer *t)
{
  int replicas = tdm_config_replica_count(t->config);
  if (!t->options.batch_fits || t->train_used < replicas)
    return FALSE;
  t->batch_asked = t->config->batch;
  /* A step of micro-batches fits as a whole: each is that much smaller. */
  int accumulate = MAX(t->config->accumulate, 1);
  int fits = tdm_config_batch_fitting(t->train_used, replicas * accumulate) / accumulate;
  if (fits < replicas)
    return FALSE;
  t->config->batch = fits;
  return TRUE;
}

static gboolean
all_cpu(const TdmConfig *cfg)
{
  for (int i = 0; i < cfg->replicas; i++)
    if (tdm_device_id_is_gpu(cfg->devices[i]))
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
  int world = tdm_config_replica_count(cfg);
  g_free(t->planned_columns);
  t->planned_columns = g_new0(guint64, MAX(world, 1));
  /* A remembered workspace holds the choices the pre-warm finds again; without a
   * pre-warm, a graph might be captured before a convolution has met its choice. */
  TdmWorkspaceBasis basis =
      tdm_memory_recall_workspaces(cfg, t->net, train, test, t->planned_columns);
  if (basis == TDM_WORKSPACE_CHOSEN && !prewarm_wanted(t)) {
    memset(t->planned_columns, 0, (size_t)MAX(world, 1) * sizeof(guint64));
    basis = TDM_WORKSPACE_UPPER_BOUND;
  }
  tdm_memory_estimate_with(cfg, t->net, train, test, t->planned_columns, basis, m);
  const char *why = NULL;
  guint64 available = tdm_memory_host_available(&why);
  m->host_available = available;
  m->largest_batch = -1;
  if (available != G_MAXUINT64)
    m->largest_batch = tdm_memory_largest_batch(cfg, t->net, train, test,
                                                available + m->host_dataset, 0);
  tdm_trainer_emit(t, e);
  if (tdm_trainer_distributed(t))
    return TRUE;
  return tdm_memory_check_host(m, available, m->host_dataset, why, error);
}

/* Auto resolved once, for every device of the run (tdm-precision-auto.h), into the
 * run's own configuration: the backends, the memory plan and the estimate see only its
 * result; t->precision keeps what was asked and why, and a checkpoint what was asked,
 * so that a resumed run resolves it again for its own devices. Under mpirun a process
 * knows only its own machine's devices: each rank resolves for its own, and where one
 * computes in fp32 every rank does. */
static gboolean
resolve_precision(TdmTrainer *t, GError **error)
{
  TdmConfig *cfg = t->config;
  if (!tdm_distributed_active()) {
    t->precision = tdm_precision_choose_here(cfg->precision, cfg->devices,
                                             tdm_config_replica_count(cfg));
  } else {
    int rank = tdm_distributed_rank(), first = -1;
    t->precision = tdm_precision_choose_here(cfg->precision, &cfg->devices[rank], 1);
    if (cfg->precision == TDM_PRECISION_AUTO &&
        !tdm_distributed_first_without(t->precision.precision == TDM_PRECISION_BF16, &first,
                                       error))
      return FALSE;
    if (first >= 0 && t->precision.precision == TDM_PRECISION_BF16) {
      t->precision.precision = TDM_PRECISION_FP32;
      t->precision.cause = TDM_PRECISION_OTHER_RANK;
      t->precision.device = cfg->devices[first];
      t->precision.rank = first;
    }
  }
  cfg->precision = t->precision.precision;
  return TRUE;
}

gboolean
tdm_trainer_setup(TdmTrainer *t, GCancellable *cancellable, GError **error)
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
  if (!tdm_config_validate(cfg, error) ||
      !tdm_backend_check_gpus(cfg->devices, cfg->replicas, tdm_distributed_active(), error))
    return FALSE;
  if (!resolve_precision(t, error))
    return FALSE;
  /* A checkpoint that cannot be written would fail only after the first epoch's
   * work; the process that saves finds out now. */
  if (cfg->save_path != NULL &&
      (!tdm_distributed_active() || cfg->main_replica == tdm_distributed_rank()) &&
      !tdm_checkpoint_check_writable(cfg->save_path, error))
    return FALSE;

  /* Decoding an image folder can take minutes: a stop ends it too, and its progress
   * is reported. */
  DatasetProgress progress = {.trainer = t, .since = tdm_trainer_now_seconds()};
  TdmImageOptions image = {.size = cfg->image_size, .channels = cfg->image_channels,
                           .seed = cfg->seed, .cancellable = cancellable,
                           .progress = on_dataset_progress, .progress_data = &progress};
  t->data = t->borrowed_data != NULL ? (TdmDatasetPair *)t->borrowed_data
                                      : tdm_dataset_open_with(cfg->dataset, &image, error);
  if (t->data == NULL)
    return FALSE;
  if (progress.decoding)
    tdm_trainer_emit_setup(t, TDM_SETUP_DATASET, TRUE, progress.total, progress.total,
                           progress.since);
  const TdmDataset *train = t->data->train;
  if (!split_validation(t, error))
    return FALSE;
  if (tdm_config_step_batch(cfg) > t->train_used && !fit_batch(t)) {
    int fits = tdm_config_batch_fitting(t->train_used, tdm_config_replica_count(cfg));
    if (cfg->accumulate > 1)
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                  _("--batch %d × --accumulate %d is larger than the %d training samples of "
                    "%s"), cfg->batch, cfg->accumulate, t->train_used, t->data->name);
    else
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                  _("--batch %d is larger than the %d training samples of %s (try --batch %d)"),
                  cfg->batch, t->train_used, t->data->name, fits);
    return FALSE;
  }
  t->net = tdm_network_new(cfg->network, train->height, train->width, train->channels,
                           train->classes, error);
  if (t->net == NULL) {
    /* A resumed network that does not fit is most often resumed on another dataset:
     * then that is what to say, naming both, not the spec's last layer. */
    g_autoptr(GError) other = NULL;
    if (t->resume_path != NULL && !tdm_trainer_check_resume_dataset(t, t->resume_path, &other)) {
      g_clear_error(error);
      g_propagate_error(error, g_steal_pointer(&other));
    }
    return FALSE;
  }
  if (!tdm_trainer_finetune_setup(t, error))
    return FALSE;

  t->world = tdm_config_replica_count(cfg);
  t->rank0 = 0;
  t->replicas = t->world;
  if (tdm_distributed_active()) {
    /* Ranks are global replica indices: shards, evaluation chunks and the main
     * replica's rank follow from them (see tdm_trainer_distributed()). */
    t->world = tdm_distributed_size();
    t->rank0 = tdm_distributed_rank();
    t->replicas = 1;
  }
  t->main_local = cfg->main_replica - t->rank0;
  if (t->main_local < 0 || t->main_local >= t->replicas)
    t->main_local = -1;

  /* One OpenBLAS thread per worker; a lone worker may use every core, or under
   * mpirun its share of the machine's. Not in exact mode: OpenBLAS's sums depend on
   * its thread count, so every worker there runs one, as any other worker does. */
  if (all_cpu(cfg)) {
    int cores = MAX(1, (int)g_get_num_processors() / tdm_distributed_local_size());
    t->cpu_threads = cfg->cpu_threads > 0 ? cfg->cpu_threads : t->replicas == 1 ? cores : 1;
    if (cfg->exact)
      t->cpu_threads = 1;
    openblas_set_num_threads(t->cpu_threads);
  }

  t->start.parties = t->end.parties = t->pre_comm.parties = t->replicas;

  if (!estimate_memory(t, error))
    return FALSE;
  /* Allocating, uploading the dataset and choosing kernels can take seconds. */
  double built = tdm_trainer_now_seconds();
  tdm_trainer_emit_setup(t, TDM_SETUP_NETWORK, FALSE, 0, 0, built);
  if (!build_replicas(t, error) || !tdm_trainer_exact_setup(t, error))
    return FALSE;
#if TDM_HAVE_MPI
  if (tdm_distributed_active())
    t->comm = tdm_communicator_mpi_new(t->backends[0], error);
  else
#endif
    t->comm = tdm_communicator_new(t->backends, t->replicas, error);
  if (t->comm == NULL)
    return FALSE;
  t->comm->clock = t->span_clock;
  if (tdm_trainer_sync_bn(t))
    for (int r = 0; r < t->replicas; r++)
      if (!tdm_replica_sync_bn(t->reps[r], tdm_trainer_on_bn_reduce, t, t->rank0 + r, t->world, error))
        return FALSE;
  if (tdm_trainer_buckets_wanted(t)) {
    t->buckets = g_new0(Buckets, t->replicas);
    for (int r = 0; r < t->replicas; r++) {
      t->buckets[r].trainer = t;
      t->buckets[r].replica = r;
      t->reps[r]->grads_ready = tdm_trainer_on_grads_ready;
      t->reps[r]->grads_ready_data = &t->buckets[r];
    }
  }
  t->it = tdm_iterator_new(cfg->seed, t->train_used, tdm_config_step_batch(cfg));
  /* Predictions need every test sample's answer in this process. */
  if (!tdm_distributed_active() && t->data->test->count > 0)
    t->predicted = g_new0(int32_t, t->data->test->count);
  if (!all_cpu(cfg))
    t->telemetry = tdm_telemetry_new(500);
  if (!start_workers(t, error))
    return FALSE;
  tdm_trainer_emit_setup(t, TDM_SETUP_NETWORK, TRUE, 0, 0, built);
  return TRUE;
}

/* Seeded parameters on the main replica, then broadcast: every replica starts equal. */
gboolean
tdm_trainer_initialize_parameters(TdmTrainer *t, GError **error)
{
  size_t n = t->net->parameter_count;
  g_autofree float *params = g_new(float, n);
  tdm_network_init_parameters(t->net, t->config->seed, params);
  tdm_trainer_finetune_parameters(t, params);
  if (t->main_local >= 0) {
    TdmBackend *b = t->backends[t->main_local];
    tdm_backend_upload(b, t->reps[t->main_local]->params, params, n * sizeof(float));
  }
  t->job.kind = JOB_BROADCAST;
  return tdm_trainer_run_all(t, error);
}

static gboolean
prewarm_wanted(const TdmTrainer *t)
{
  switch (t->options.prewarm) {
  case TDM_PREWARM_ON:
    return TRUE;
  case TDM_PREWARM_OFF:
    return FALSE;
  case TDM_PREWARM_AUTO:
  default:
    /* Decided on the configuration, not on this process's devices: under mpirun
     * every rank must run the pre-warm's collectives, or none. */
    return !all_cpu(t->config);
  }
}

/* Sizes every replica's column workspace by its convolutions' choices
 * (tdm_replica_fit_workspace()), remembers each GPU replica's beside the choices for the
 * next run of this configuration, and reports the memory again, now on that basis. */
static gboolean
fit_workspaces(TdmTrainer *t, GError **error)
{
  const TdmConfig *cfg = t->config;
  int train = t->data->train->count, test = t->data->test->count;
  gboolean engine = FALSE;
  for (int r = 0; r < t->replicas; r++) {
    TdmReplica *rep = t->reps[r];
    if (!tdm_backend_has_conv_engine(t->backends[r]))
      continue;
    if (!tdm_replica_fit_workspace(rep, error))
      return FALSE;
    engine = TRUE;
    g_autofree char *plan =
        tdm_memory_workspace_plan(cfg, t->net, t->rank0 + r, train, test);
    tdm_backend_conv_workspace_remember(t->backends[r], plan, rep->columns_bytes);
    if (t->planned_columns != NULL)
      t->planned_columns[t->rank0 + r] = rep->columns_bytes;
  }
  /* Under mpirun a process knows its own replica's only: the estimate stands. */
  if (!engine || tdm_trainer_distributed(t) || t->planned_columns == NULL)
    return TRUE;
  g_autofree TdmEvent *e = g_new0(TdmEvent, 1);
  e->kind = TDM_EVENT_MEMORY;
  tdm_memory_estimate_with(cfg, t->net, train, test, t->planned_columns, TDM_WORKSPACE_CHOSEN,
                           &e->memory);
  e->memory.host_available = tdm_memory_host_available(NULL);
  e->memory.largest_batch = -1;
  tdm_trainer_emit(t, e);
  return TRUE;
}

/* One pre-warm job on every replica: a training step of `count` samples (the first
 * ones, in order: no shuffle is drawn) or an evaluation. */
static gboolean
prewarm_job(TdmTrainer *t, JobKind kind, const int32_t *indices, int count, gboolean timed,
            GError **error)
{
  t->job = (Job){.kind = kind, .indices = indices, .count = count, .epoch = 0,
                 .lr = t->config->lr, .timed = timed, .origin = tdm_trainer_span_seconds(t)};
  t->main_updated = FALSE;
  return tdm_trainer_run_all(t, error);
}

/* Puts back what the pre-warm's steps moved: optimizer state (velocity, Adam's moments
 * and step count), BN running statistics, the metrics' sums, the per-replica timing
 * and communication counts; the parameters come from their seed again. Gradients,
 * activations, columns and the like are rewritten by every step before they are
 * read. */
static gboolean
prewarm_undo(TdmTrainer *t, GError **error)
{
  const TdmNetwork *net = t->net;
  /* The metrics job takes (and clears) every replica's loss and correct sums. */
  t->job.kind = JOB_METRICS;
  t->job.stop_vote = 0;
  if (!tdm_trainer_run_all(t, error))
    return FALSE;
  g_autofree float *state = NULL;
  if (net->state_count > 0) {
    state = g_new(float, net->state_count);
    tdm_network_init_state(net, state);
  }
  for (int r = 0; r < t->replicas; r++) {
    TdmBackend *b = t->backends[r];
    TdmOptimizer *opt = t->opts[r];
    if (opt != NULL) {
      for (int i = 0; i < opt->state_count; i++)
        tdm_backend_zero(b, opt->state[i], opt->count * sizeof(float));
      opt->t = 0;
    }
    if (state != NULL)
      tdm_backend_upload(b, t->reps[r]->state, state, net->state_count * sizeof(float));
    tdm_backend_synchronize(b);
    if (!tdm_backend_check(b, error))
      return FALSE;
    tdm_communicator_take_bytes(t->comm, r, NULL, NULL);
  }
  memset(t->timing, 0, sizeof(Timing) * t->replicas);
  return tdm_trainer_initialize_parameters(t, error);
}

gboolean
tdm_trainer_prewarm(TdmTrainer *t, GError **error)
{
  t->prewarm_steps = 0;
  t->prewarm_seconds = 0;
  if (!prewarm_wanted(t))
    return TRUE;
  const TdmConfig *cfg = t->config;
  double start = tdm_trainer_now_seconds();
  tdm_trainer_emit_setup(t, TDM_SETUP_PREWARM, FALSE, 0, 0, start);
  /* The configuration was validated (batch > 0); said again so the compiler sees the
   * allocation's size is bounded. */
  g_return_val_if_fail(cfg->batch > 0, FALSE);
  int full = cfg->batch, last = t->data->train->count % cfg->batch;
  g_autofree int32_t *indices = g_new(int32_t, (size_t)full);
  for (int i = 0; i < full; i++)
    indices[i] = i;
  /* A run's steps come in two sizes, and each first as a sampled step (synchronized,
   * hooks on) and then as a plain one, which a GPU captures as a graph and replays:
   * both ways of running a step meet each shape once here. */
  int sizes[2] = {full, last};
  for (int timed = 1; timed >= 0; timed--) {
    for (int k = 0; k < 2; k++) {
      if (sizes[k] == 0)
        continue;
      if (!prewarm_job(t, JOB_TRAIN, indices, sizes[k], timed, error))
        return FALSE;
      t->prewarm_steps++;
    }
    /* Evaluation chunks have other shapes (the replica's eval_capacity, the test set's
     * remainder); it is not on the training clock, but the first one would wait. Once
     * every shape has met the convolution engine, the workspaces shrink to what its
     * choices need, before the plain steps capture their graphs. */
    if (timed && t->data->test->count > 0 &&
        !prewarm_job(t, JOB_EVALUATE, NULL, 0, FALSE, error))
      return FALSE;
    if (timed && !fit_workspaces(t, error))
      return FALSE;
  }
  if (!prewarm_undo(t, error))
    return FALSE;
  t->prewarm_seconds = tdm_trainer_now_seconds() - start;
  tdm_trainer_emit_setup(t, TDM_SETUP_PREWARM, TRUE, t->prewarm_steps, t->prewarm_steps, start);
  return TRUE;
}
