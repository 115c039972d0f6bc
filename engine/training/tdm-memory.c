/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-memory.c — see tdm-memory.h. Every figure here mirrors an allocation elsewhere:
 * the replica's (tdm_replica_plan(), which tdm-replica.c allocates by), the
 * optimizer's (tdm-optimizer.c), a GPU backend's own workspace
 * (tdm_backend_own_bytes()), the peer communicator's staging buffer, the
 * trainer's host copies (tdm-trainer.c, tdm-trainer-checkpoint.c) and exact mode's
 * buffers (tdm_exact_buffers(), which tdm-trainer-exact.c allocates by). A change
 * there is a change here; tests/engine/test-memory.c compares the two on the CPU
 * backend's counter (and exact mode's on what its set-up allocated). */
#include "tdm-memory.h"
#include "tdm-exact.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-iterator.h"
#include "tdm-optimizer.h"
#include "tdm-precision-auto.h"
#include "tdm-replica.h"
#include "tdm-build-config.h"
#include "tdm-conv-columns.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* tdm-communicator-peer.c's staging buffer, per GPU replica that cannot reach another
 * directly. */
#define PEER_STAGING_BYTES ((guint64)4 << 20)

TdmReplicaBytes
tdm_memory_replica(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
                   int capacity, int eval_capacity, int train_count, int test_count)
{
  TdmReplicaBytes rb = {0};
  TdmReplicaPlan plan = tdm_replica_plan(net, kind, precision, capacity, eval_capacity);
  guint64 sample = (guint64)net->in_h * net->in_w * net->in_c;
  rb.parameters = plan.parameters;
  rb.gradients = plan.gradients;
  rb.activations = plan.activations;
  rb.workspace = plan.workspace;
  rb.columns = plan.columns;
  rb.inference = plan.inference;
  if (!tdm_replica_shares_datasets(kind))
    rb.dataset = (guint64)MAX(train_count, 0) * (sample + 1) +
                 (guint64)MAX(test_count, 0) * (sample + 1);
  rb.total = tdm_replica_plan_total(&plan) + rb.dataset;
  return rb;
}

/* What the run computes in: auto resolved for its devices, as the trainer resolves it. */
static TdmPrecision
run_precision(const TdmConfig *cfg)
{
  return tdm_precision_resolve_here(cfg->precision, cfg->devices,
                                    tdm_config_replica_count(cfg));
}

int
tdm_memory_capacity(const TdmConfig *cfg, int world, int test_count)
{
  (void)test_count;
  world = MAX(world, 1);
  int shard = MAX(1, tdm_shard_largest(cfg->batch, world));
  if (cfg->exact)
    shard = MIN(cfg->exact_chunk, cfg->batch);   /* one chunk a pass */
  return shard;
}

int
tdm_memory_eval_capacity(const TdmConfig *cfg, const TdmNetwork *net, TdmBackendKind kind,
                         int world, int test_count)
{
  int wanted = MIN(cfg->eval_batch, MAX(1, test_count));
  return tdm_replica_eval_capacity(net, kind, run_precision(cfg),
                                   tdm_memory_capacity(cfg, world, test_count), wanted);
}

/* tdm_optimizer_new's state buffers, its rates (one group's: fine-tuning's groups by
 * layer add 8 bytes each) and its weight-decay mask (a byte a parameter) where decay
 * skips biases and BN parameters. */
static guint64
optimizer_bytes(const TdmConfig *cfg, size_t parameters)
{
  int states = cfg->optimizer == TDM_OPTIMIZER_ADAM ? 2 : cfg->optimizer == TDM_OPTIMIZER_SGD ? 0 : 1;
  guint64 bytes = (guint64)states * parameters * sizeof(float) + TDM_OPTIMIZER_RATES_BYTES(0);
  if (cfg->decay_scope == TDM_DECAY_WEIGHTS && cfg->weight_decay > 0)
    bytes += parameters;
  return bytes;
}

/* A replica's device bytes for the training controls: --accumulate's gradient sum
 * (not in exact mode) and --clip-grad-norm's work where the replica `updates`. The
 * trainer's set-up allocates by it. */
static guint64
tdm_memory_controls_bytes(const TdmConfig *cfg, size_t parameters, gboolean updates)
{
  guint64 bytes = 0;
  if (cfg->accumulate > 1 && !cfg->exact)
    bytes += (guint64)parameters * sizeof(float);
  if (cfg->clip_grad_norm > 0 && updates)
    bytes += TDM_CLIP_WORK_DOUBLES * sizeof(double);
  return bytes;
}

/* Whether GPU replicas may stage through the peer communicator: it serves them when
 * one GPU holds several replicas or NCCL is not built in (tdm_communicator_new), and
 * stages between two different GPUs that lack peer access, which only CUDA can tell:
 * so two different GPUs count as staging, an upper bound. */
static gboolean
peer_staging(const TdmConfig *cfg, int world)
{
  gboolean repeated = FALSE, different = FALSE;
  for (int i = 0; i < world; i++)
    for (int j = i + 1; j < world; j++) {
      if (tdm_device_id_equal(cfg->devices[i], cfg->devices[j]))
        repeated = TRUE;
      else
        different = TRUE;
    }
#if TDM_HAVE_NCCL
  /* NCCL serves distinct GPUs, with buffers of its own outside Tandem's counter. */
  if (!repeated)
    return FALSE;
#else
  (void)repeated;   /* without NCCL every GPU pair stages through the peer communicator */
#endif
  return different;
}

/* Replica r's shard of a full batch. */
static int
shard_of(const TdmConfig *cfg, int world, int r)
{
  int offset, shard;
  if (cfg->exact)
    tdm_exact_shard_of(cfg->batch, cfg->exact_chunk, world, r, &offset, &shard);
  else
    tdm_shard_of(cfg->batch, world, r, &offset, &shard);
  return shard;
}

char *
tdm_memory_workspace_plan(const TdmConfig *cfg, const TdmNetwork *net, int replica,
                          int train_count, int test_count)
{
  int world = tdm_config_replica_count(cfg);
  int capacity = tdm_memory_capacity(cfg, world, test_count);
  int eval = tdm_memory_eval_capacity(cfg, net, TDM_BACKEND_CUDA, world, test_count);
  TdmPrecision precision = run_precision(cfg);
  g_autofree char *freeze = cfg->freeze != NULL ? g_strjoinv(",", cfg->freeze) : g_strdup("");
  const char *conv = g_getenv("TANDEM_CONV"), *cudnn = g_getenv("TANDEM_CUDNN");
  return g_strdup_printf("net=%s in=%dx%dx%d classes=%d precision=%s exact=%d/%d batch=%d "
                         "accumulate=%d replica=%d/%d shard=%d capacity=%d eval=%d "
                         "train=%d test=%d freeze=%s conv=%s cudnn=%s bf16-activations=%d "
                         "bn-store=%zu chunk=%zu",
                         cfg->network, net->in_h, net->in_w, net->in_c, net->classes,
                         tdm_precision_name(precision), cfg->exact, cfg->exact_chunk,
                         cfg->batch, cfg->accumulate, replica, world,
                         shard_of(cfg, world, replica), capacity, eval, train_count, test_count,
                         freeze, conv != NULL ? conv : "", cudnn != NULL ? cudnn : "",
                         tdm_replica_bf16_activations(),
                         tdm_replica_bn_store(net, TDM_BACKEND_CUDA, precision, capacity),
                         tdm_conv_chunk_bytes(precision));
}

TdmWorkspaceBasis
tdm_memory_recall_workspaces(const TdmConfig *cfg, const TdmNetwork *net, int train_count,
                             int test_count, guint64 *columns)
{
  int world = tdm_config_replica_count(cfg);
  gboolean gpu = FALSE, all = TRUE;
  for (int r = 0; r < world; r++) {
    columns[r] = 0;
    if (!tdm_device_id_is_gpu(cfg->devices[r]))
      continue;
    gpu = TRUE;
    g_autofree char *plan = tdm_memory_workspace_plan(cfg, net, r, train_count, test_count);
    all = all && tdm_backend_conv_workspace_recall(cfg->devices[r], plan, &columns[r]);
  }
  if (!gpu)
    return TDM_WORKSPACE_COLUMNS;
  /* --exact chooses by a rule, never by a timing, and its estimate stays the upper
   * bound whatever was remembered. */
  if (all && !cfg->exact)
    return TDM_WORKSPACE_CHOSEN;
  memset(columns, 0, (size_t)world * sizeof *columns);
  return TDM_WORKSPACE_UPPER_BOUND;
}

void
tdm_memory_estimate(const TdmConfig *cfg, const TdmNetwork *net, int train_count,
                    int test_count, TdmMemoryEvent *e)
{
  int world = tdm_config_replica_count(cfg);
  g_autofree guint64 *columns = g_new0(guint64, MAX(world, 1));
  TdmWorkspaceBasis basis =
      tdm_memory_recall_workspaces(cfg, net, train_count, test_count, columns);
  tdm_memory_estimate_with(cfg, net, train_count, test_count, columns, basis, e);
}

void
tdm_memory_estimate_with(const TdmConfig *cfg, const TdmNetwork *net, int train_count,
                         int test_count, const guint64 *columns, TdmWorkspaceBasis basis,
                         TdmMemoryEvent *e)
{
  memset(e, 0, sizeof *e);
  int world = tdm_config_replica_count(cfg);
  int capacity = tdm_memory_capacity(cfg, world, test_count);
  /* CPU workers and GPUs keep different convolution buffers, and so may evaluate in
   * different chunks. */
  int cpu_eval = tdm_memory_eval_capacity(cfg, net, TDM_BACKEND_CPU, world, test_count);
  int gpu_eval = tdm_memory_eval_capacity(cfg, net, TDM_BACKEND_CUDA, world, test_count);
  TdmPrecision precision = run_precision(cfg);
  TdmReplicaBytes cpu_rb = tdm_memory_replica(net, TDM_BACKEND_CPU, precision, capacity,
                                              cpu_eval, train_count, test_count);
  TdmReplicaBytes gpu_rb = tdm_memory_replica(net, TDM_BACKEND_CUDA, precision, capacity,
                                              gpu_eval, train_count, test_count);
  guint64 param_bytes = (guint64)net->parameter_count * sizeof(float);
  guint64 opt_bytes = optimizer_bytes(cfg, net->parameter_count);
  gboolean staging = peer_staging(cfg, world);

  e->workspace_basis = basis;
  e->replicas = MIN(world, TDM_MAX_REPLICAS);
  e->batch = cfg->batch;
  e->capacity = capacity;
  e->eval_capacity = world > 0 && !tdm_device_id_is_gpu(cfg->devices[0]) ? cpu_eval : gpu_eval;
  for (int r = 0; r < world; r++) {
    gboolean cpu = !tdm_device_id_is_gpu(cfg->devices[r]);
    TdmReplicaBytes rb = cpu ? cpu_rb : gpu_rb;
    /* A GPU replica's column workspace as its choices size it, where known. */
    if (!cpu && columns != NULL && columns[r] > 0 && rb.columns > 0) {
      rb.workspace = rb.workspace - rb.columns + columns[r];
      rb.total = rb.total - rb.columns + columns[r];
      rb.columns = columns[r];
    }
    gboolean updates = cfg->strategy == TDM_STRATEGY_ALLREDUCE || r == cfg->main_replica;
    guint64 optimizer = updates ? opt_bytes : 0;
    guint64 communication = !cpu && staging ? PEER_STAGING_BYTES : 0;
    guint64 own = tdm_backend_own_bytes(cfg->devices[r]);
    /* Exact mode's sums, on a GPU: there the chunks are added on the device. */
    guint64 exact = cfg->exact && !cpu
                        ? tdm_exact_device_bytes(net->parameter_count, net->state_count)
                        : 0;
    guint64 controls = tdm_memory_controls_bytes(cfg, net->parameter_count, updates);
    guint64 total = rb.total + optimizer + communication + own + exact + controls;
    if (cpu)
      e->host_devices += total;
    else
      e->gpu_total += total;
    if (r >= TDM_MAX_REPLICAS)
      continue;
    TdmMemoryDevice *d = &e->device[r];
    tdm_device_id_name(cfg->devices[r], d->device);
    d->shard = shard_of(cfg, world, r);
    d->host = cpu;
    d->parameters = rb.parameters;
    d->gradients = rb.gradients;
    d->optimizer = optimizer;
    d->activations = rb.activations;
    /* The inference pass's buffers are scratch too: no backward reads them. */
    d->workspace = rb.workspace + rb.inference + own + exact + controls;
    d->dataset = rb.dataset;
    d->communication = communication;
    d->total = total;
  }

  /* The host's own copy of both splits (tdm_dataset_new: one spare byte for each of
   * images and labels) and the iterator's shuffled order. */
  guint64 sample = (guint64)net->in_h * net->in_w * net->in_c;
  e->host_dataset = (guint64)train_count * sample + 1 + (guint64)train_count + 1 +
                    (guint64)test_count * sample + 1 + (guint64)test_count + 1;
  guint64 copies = (guint64)train_count * sizeof(int32_t);
  /* The initial parameters, later the downloaded ones (t->host_params); a checkpoint
   * adds its copy of them, a download buffer and its copies of the optimizer's state. */
  copies += param_bytes;
  if (cfg->save_path != NULL)
    copies += 2 * param_bytes + opt_bytes;
  /* Exact mode's fixed-point sums and staging buffers, per replica, on the host
   * whatever the device. */
  if (cfg->exact)
    copies += (guint64)world * tdm_exact_buffers(net->parameter_count, net->state_count).bytes;
  e->host_copies = copies;
  e->host_total = e->host_dataset + e->host_copies + e->host_devices;
}

gboolean
tdm_memory_fits(const TdmMemoryEvent *e, guint64 host_budget, guint64 gpu_budget)
{
  g_return_val_if_fail(e != NULL, FALSE);
  if (host_budget != 0 && e->host_total > host_budget)
    return FALSE;
  for (int r = 0; r < e->replicas && r < TDM_MAX_REPLICAS; r++)
    if (!e->device[r].host && gpu_budget != 0 && e->device[r].total > gpu_budget)
      return FALSE;
  return TRUE;
}

int
tdm_memory_largest_batch(const TdmConfig *cfg, const TdmNetwork *net, int train_count,
                         int test_count, guint64 host_budget, guint64 gpu_budget)
{
  g_autoptr(TdmConfig) trial = tdm_config_copy(cfg);
  g_autofree TdmMemoryEvent *e = g_new(TdmMemoryEvent, 1);

  /* Needs grow with the batch, so the fitting batches are a prefix of 1 … count. */
  int lo = 0, hi = MAX(train_count, 0);
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    trial->batch = mid;
    tdm_memory_estimate(trial, net, train_count, test_count, e);
    if (tdm_memory_fits(e, host_budget, gpu_budget))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* A "Key:  1234 kB" line of a /proc file, in bytes; FALSE when absent. */
static gboolean
proc_kib(const char *path, const char *key, guint64 *bytes)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return FALSE;
  size_t klen = strlen(key);
  for (const char *line = text; line != NULL && *line != '\0';) {
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      guint64 kib = g_ascii_strtoull(line + klen + 1, NULL, 10);
      *bytes = kib * 1024;
      return TRUE;
    }
    line = strchr(line, '\n');
    if (line != NULL)
      line++;
  }
  return FALSE;
}

guint64
tdm_memory_host_available(const char **why)
{
  guint64 best = G_MAXUINT64;
  const char *reason = "available memory";
  guint64 bytes;
  if (proc_kib("/proc/meminfo", "MemAvailable", &bytes))
    best = bytes;

  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    guint64 used = 0;
    proc_kib("/proc/self/status", "VmSize", &used);
    guint64 left = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
    if (left < best) {
      best = left;
      reason = "the address-space limit (ulimit -v)";
    }
  }
  if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    guint64 used = 0;
    proc_kib("/proc/self/status", "VmData", &used);
    guint64 left = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
    if (left < best) {
      best = left;
      reason = "the data-size limit (ulimit -d)";
    }
  }
  if (why != NULL)
    *why = reason;
  return best;
}

/* "22.4 GiB", "310.5 MiB": the figures of the refusal, in plain ASCII so that they
 * read (and grep) the same everywhere. */
static char *
format_bytes(guint64 bytes)
{
  if (bytes >= ((guint64)1 << 30))
    return g_strdup_printf("%.1f GiB", bytes / 1073741824.0);
  if (bytes >= ((guint64)1 << 20))
    return g_strdup_printf("%.1f MiB", bytes / 1048576.0);
  return g_strdup_printf("%.1f KiB", bytes / 1024.0);
}

gboolean
tdm_memory_check_host(const TdmMemoryEvent *e, guint64 available, guint64 allocated,
                      const char *why, GError **error)
{
  guint64 more = e->host_total > allocated ? e->host_total - allocated : 0;
  if (more <= available)
    return TRUE;
  g_autofree char *need = format_bytes(more);
  g_autofree char *have = format_bytes(available);
  g_autofree char *workers = format_bytes(e->host_devices);
  /* Where the evaluation chunk is larger than a step's shard, it sizes the
   * activations: that is the knob to name. */
  int shard = 0;
  for (int r = 0; r < e->replicas && r < TDM_MAX_REPLICAS; r++)
    shard = MAX(shard, e->device[r].shard);
  gboolean by_eval = e->capacity > shard && shard > 0;
  if (by_eval)
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                _("not enough host memory: the run needs %s, %s available (%s); %s of it "
                  "for the CPU workers' parameters, gradients, optimizer state, activations "
                  "and dataset copies at evaluation batch (--eval-batch) %d: choose a smaller "
                  "--eval-batch"),
                need, have, why != NULL ? why : _("available memory"), workers, e->capacity);
  else
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                _("not enough host memory: the run needs %s, %s available (%s); %s of it "
                  "for the CPU workers' parameters, gradients, optimizer state, activations "
                  "and dataset copies at batch %d: choose a smaller network or batch"),
                need, have, why != NULL ? why : _("available memory"), workers, e->batch);
  return FALSE;
}

size_t
tdm_replica_bytes_needed(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
                         int capacity, int eval_capacity, const TdmDataset *train,
                         const TdmDataset *test)
{
  return tdm_memory_replica(net, kind, precision, capacity, eval_capacity, train->count,
                            test->count).total;
}
