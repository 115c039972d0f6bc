/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-scaling.c — how training throughput scales with the number of replicas, and
 * how fast the gradient all-reduce moves its bytes, as markdown tables.
 *
 * For n = 1, 2, 4, 8 replicas (as many as the device list allows) it trains mlp and
 * cnn through tdm_trainer_run with a fixed per-replica batch (weak scaling: the
 * global batch grows with n) and with a fixed global batch (strong scaling), and
 * prints samples/s, the speedup and efficiency against n = 1, and the mean compute,
 * communication and wait ms per step from the trainer's DEVICES events. Each
 * configuration gets a warm-up run, then `--repeat` runs of a fixed number of steps
 * (TdmConfig.max_steps); the median run is shown. A run is timed between its first
 * and last STEP event (summaries read the metrics back, so the device has caught up
 * there), without the epoch-end evaluations; the steps before the first summary
 * (graph capture, first-touch costs) are left out.
 *
 * Then the all-reduce: a run with a single gradient bucket (the whole gradient,
 * S = parameters × 4 bytes, all-reduced once backward is done) gives the trainer's
 * communication time t per step, so algbw = S / t and busbw = algbw · 2(n−1)/n as
 * nccl-tests defines them; beside it a bare ncclAllReduce of the same bytes on the
 * same GPUs (ncclCommInitAll, back-to-back calls timed with cudaEvents, median).
 * Not a test: it asserts nothing.
 *
 *   bench-scaling                          every GPU found (or the CPU cores)
 *   bench-scaling --gpus cuda:0,cuda:1     those GPUs
 *   bench-scaling --replicas-per-gpu 2     two replicas on each GPU (one GPU is enough)
 *   bench-scaling --cpu 2                  CPU workers
 */
#include "tdm-build-config.h"
#include "tdm-dataset.h"
#include "tdm-device.h"
#include "tdm-scaling.h"
#include "tdm-trainer.h"
#include "tdm-bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if TDM_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#if TDM_HAVE_NCCL
#include <nccl.h>
#endif

#define TDM_SCALE_MAX_REPEAT 15
#define TDM_SCALE_MAX_BATCHES 8
/* Runs whose timed window came out shorter than half of --min-seconds are redone
 * with more steps, at most this many times. */
#define TDM_SCALE_MAX_RECALIBRATIONS 4

/* One run is measured by the engine's scaling meter (tdm-scaling.h), which the
 * window's scaling run uses too. */

/* ---- one configuration: warm-up, then repeats ------------------------------------ */

typedef struct {
  char **networks;
  int weak[TDM_SCALE_MAX_BATCHES], n_weak;
  int strong[TDM_SCALE_MAX_BATCHES], n_strong;
  long steps, warmup_steps;
  double min_seconds;
  int repeat;
  char *dataset;
  TdmPrecision precision;
  TdmStrategy strategy;
  size_t bucket_bytes;
  int bare_trials, bare_iterations;
} TdmScaleOptions;

static TdmConfig *
tdm_scale_config(const TdmScaleOptions *o, const char *network, const char *devices,
                 int batch, GError **error)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(o->dataset);
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  if (!tdm_config_set_devices(cfg, devices, error))
    return NULL;
  cfg->batch = batch;
  /* max_steps ends every run; the epochs only need to outlast it. */
  cfg->epochs = 1000000;
  cfg->precision = o->precision;
  cfg->strategy = o->strategy;
  cfg->bucket_bytes = o->bucket_bytes;
  if (!tdm_config_validate(cfg, error))
    return NULL;
  return g_steal_pointer(&cfg);
}

static int
tdm_scale_by_rate(const void *a, const void *b)
{
  double x = ((const TdmScalingResult *)a)->samples_per_second;
  double y = ((const TdmScalingResult *)b)->samples_per_second;
  return (x > y) - (x < y);
}

static int
tdm_scale_by_comm(const void *a, const void *b)
{
  double x = ((const TdmScalingResult *)a)->comm_least_ms;
  double y = ((const TdmScalingResult *)b)->comm_least_ms;
  return (x > y) - (x < y);
}

/* Warm-up run, then o->repeat timed runs of one step count, sized so that each
 * window lasts about o->min_seconds; the median by `order`. FALSE with error when a
 * run fails. */
static gboolean
tdm_scale_measure(const TdmScaleOptions *o, TdmConfig *cfg,
                  int (*order)(const void *, const void *), TdmScalingResult *median,
                  GError **error)
{
  TdmScalingResult results[TDM_SCALE_MAX_REPEAT];
  g_autofree TdmScalingMeter *run = g_new0(TdmScalingMeter, 1);
  if (!tdm_scaling_measure_once(cfg, o->warmup_steps, run, NULL, error))
    return FALSE;
  /* The first summary comes 50 ms into a run: leave room for it. */
  double per_step = tdm_scaling_meter_seconds_per_step(run);
  long steps = MAX(o->steps, (long)ceil((o->min_seconds + 0.06) / per_step));
  int recalibrations = 0;
  for (int i = 0; i < o->repeat; i++) {
    if (!tdm_scaling_measure_once(cfg, steps, run, NULL, error))
      return FALSE;
    gboolean ok = tdm_scaling_meter_result(run, steps, &results[i]);
    if ((!ok || results[i].from_start || results[i].seconds < o->min_seconds / 2) &&
        recalibrations < TDM_SCALE_MAX_RECALIBRATIONS && steps < o->steps * 100000L) {
      /* Too short to trust: that run becomes a warm-up and all repeats start over. */
      per_step = tdm_scaling_meter_seconds_per_step(run);
      long more = (long)ceil((o->min_seconds + 0.06) / per_step);
      steps = MAX(more, steps * 2);
      recalibrations++;
      i = -1;
      continue;
    }
    if (!ok) {
      g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                  "%ld steps gave no timed window (no STEP event)", steps);
      return FALSE;
    }
  }
  qsort(results, o->repeat, sizeof results[0], order);
  *median = results[o->repeat / 2];
  return TRUE;
}

/* ---- the device sets -------------------------------------------------------------- */

typedef struct {
  gboolean cpu;
  int cpu_workers;
  char **gpus;                 /* "cuda:0", … distinct */
  int replicas_per_gpu;
  int available;               /* replicas the set can hold */
} TdmScaleDevices;

/* The devices for n replicas: CPU workers, or the GPUs in turn (so replicas land on
 * distinct GPUs before any GPU gets a second). */
static char *
tdm_scale_devices_for(const TdmScaleDevices *d, int n)
{
  if (d->cpu)
    return g_strdup_printf("cpu:%d", n);
  int gpus = g_strv_length(d->gpus);
  GString *s = g_string_new(NULL);
  for (int i = 0; i < n; i++)
    g_string_append_printf(s, "%s%s", i ? "," : "", d->gpus[i % gpus]);
  return g_string_free(s, FALSE);
}

/* The column text: the list itself up to four replicas, first…last beyond. */
static char *
tdm_scale_devices_label(const TdmScaleDevices *d, int n)
{
  g_autofree char *list = tdm_scale_devices_for(d, n);
  if (d->cpu || n <= 4)
    return g_steal_pointer(&list);
  int gpus = g_strv_length(d->gpus);
  return g_strdup_printf("%s…%s (%d)", d->gpus[0], d->gpus[(n - 1) % gpus], n);
}

static gboolean
tdm_scale_distinct_gpus(const TdmScaleDevices *d, int n)
{
  return !d->cpu && n <= (int)g_strv_length(d->gpus);
}

static int
tdm_scale_counts(const TdmScaleDevices *d, int *counts)
{
  int k = 0;
  for (int n = 1; n <= d->available && n <= TDM_MAX_REPLICAS; n *= 2)
    counts[k++] = n;
  return k;
}

/* ---- scaling tables ------------------------------------------------------------- */

/* Configurations already measured, so weak and strong runs that coincide (same
 * network, devices and global batch) are run once. */
typedef struct {
  char *key;
  TdmScalingResult result;
  gboolean ok;
} TdmScaleCached;

static const TdmScaleCached *
tdm_scale_lookup(GPtrArray *cache, const TdmScaleOptions *o, const char *network,
                 const char *devices, int batch)
{
  g_autofree char *key = g_strdup_printf("%s|%s|%d", network, devices, batch);
  for (guint i = 0; i < cache->len; i++) {
    TdmScaleCached *c = g_ptr_array_index(cache, i);
    if (g_str_equal(c->key, key))
      return c;
  }
  TdmScaleCached *c = g_new0(TdmScaleCached, 1);
  c->key = g_steal_pointer(&key);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmConfig) cfg = tdm_scale_config(o, network, devices, batch, &error);
  c->ok = cfg != NULL && tdm_scale_measure(o, cfg, tdm_scale_by_rate, &c->result, &error);
  if (!c->ok)
    g_printerr("bench-scaling: %s on %s, batch %d: %s\n", network, devices, batch,
               error != NULL ? error->message : "failed");
  g_ptr_array_add(cache, c);
  return c;
}

static void
tdm_scale_cached_free(gpointer data)
{
  TdmScaleCached *c = data;
  g_free(c->key);
  g_free(c);
}

/* Weak (per_replica TRUE: batch is per replica) or strong (batch is global). Returns
 * the efficiency at the largest n, or NAN. */
static double
tdm_scale_table(GPtrArray *cache, const TdmScaleOptions *o, const TdmScaleDevices *d,
                const char *network, gboolean weak, const int *batches, int n_batches)
{
  int counts[8];
  int n_counts = tdm_scale_counts(d, counts);
  double last_efficiency = NAN;
  printf("\n### %s, %s scaling (%s)\n\n", network, weak ? "weak" : "strong",
         weak ? "fixed batch per replica; global batch = per replica × n"
              : "fixed global batch, split over the replicas");
  printf("| %s | n | devices | global batch | steps | samples/s | speedup | efficiency | "
         "compute ms | comm ms | wait ms |\n", weak ? "per replica" : "global");
  printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int j = 0; j < n_batches; j++) {
    double base = NAN;
    for (int i = 0; i < n_counts; i++) {
      int n = counts[i];
      int global = weak ? batches[j] * n : batches[j];
      if (global < n)
        continue;
      g_autofree char *devices = tdm_scale_devices_for(d, n);
      g_autofree char *label = tdm_scale_devices_label(d, n);
      const TdmScaleCached *c = tdm_scale_lookup(cache, o, network, devices, global);
      if (!c->ok) {
        printf("| %d | %d | %s | %d | — | failed | | | | | |\n", batches[j], n, label, global);
        fflush(stdout);
        continue;
      }
      const TdmScalingResult *r = &c->result;
      if (n == 1)
        base = r->samples_per_second;
      /* Both kinds: speedup over one replica, per replica. Weak scaling keeps each
       * replica's work fixed, so ideal is n× the samples/s; strong as well, with less
       * work per replica as n grows. */
      double speedup = r->samples_per_second / base;
      double efficiency = speedup / n;
      last_efficiency = efficiency;
      printf("| %d | %d | %s | %d | %ld | %.0f%s | %.2f× | %.0f %% | %.3f | %.3f | %.3f |\n",
             batches[j], n, label, global, r->steps, r->samples_per_second,
             r->from_start ? " †" : "", speedup, 100 * efficiency, r->compute_ms, r->comm_ms,
             r->wait_ms);
      fflush(stdout);
    }
  }
  return last_efficiency;
}

/* ---- the bare all-reduce ---------------------------------------------------------- */

#if TDM_HAVE_NCCL
static gboolean
tdm_scale_cuda_ok(cudaError_t err, const char *call, int line)
{
  if (G_LIKELY(err == cudaSuccess))
    return TRUE;
  g_printerr("bench-scaling: %s failed: %s (line %d)\n", call, cudaGetErrorString(err), line);
  return FALSE;
}
#define TDM_SCALE_CUDA(call) tdm_scale_cuda_ok((call), #call, __LINE__)

static gboolean
tdm_scale_nccl_ok(ncclResult_t res, const char *call, int line)
{
  if (G_LIKELY(res == ncclSuccess))
    return TRUE;
  g_printerr("bench-scaling: %s failed: %s (line %d)\n", call, ncclGetErrorString(res), line);
  return FALSE;
}
#define TDM_SCALE_NCCL(call) tdm_scale_nccl_ok((call), #call, __LINE__)

/* Device work that holds a stream while the host enqueues a trial: memsets of this
 * size (a fraction of a millisecond each on a current GPU). */
#define TDM_SCALE_GATE_BYTES ((size_t)256 << 20)
#define TDM_SCALE_MAX_GATES 64

/* Seconds for one ncclAllReduce of `count` floats in place over the GPUs `ordinals`,
 * or NAN on failure. A trial is `iterations` back-to-back calls between cudaEvents on
 * every rank's stream. One thread enqueues every rank's calls, which can take longer
 * than the GPUs need for small buffers; so each stream first runs memsets long enough
 * to cover the enqueueing (sized in the warm-up trials), and the calls then run from
 * a full queue: the time is the GPUs', not the host's launch rate. A trial's time is
 * the rank with the shortest span (it waited least for the others); the result is
 * the median of `trials`. */
static double
tdm_scale_bare_allreduce(const int *ordinals, int n, size_t count, int trials, int iterations)
{
  ncclComm_t comms[TDM_MAX_REPLICAS] = {0};
  cudaStream_t streams[TDM_MAX_REPLICAS] = {0};
  cudaEvent_t gates[TDM_MAX_REPLICAS] = {0};
  cudaEvent_t starts[TDM_MAX_REPLICAS] = {0}, ends[TDM_MAX_REPLICAS] = {0};
  float *buffers[TDM_MAX_REPLICAS] = {0};
  void *scratch[TDM_MAX_REPLICAS] = {0};
  double times[TDM_SCALE_MAX_REPEAT * 2];
  trials = CLAMP(trials, 1, (int)G_N_ELEMENTS(times));
  int gate_count = 1;
  gboolean ok = n >= 2 && n <= TDM_MAX_REPLICAS &&
                TDM_SCALE_NCCL(ncclCommInitAll(comms, n, ordinals));
  for (int r = 0; ok && r < n; r++)
    ok = TDM_SCALE_CUDA(cudaSetDevice(ordinals[r])) &&
         TDM_SCALE_CUDA(cudaMalloc((void **)&buffers[r], count * sizeof(float))) &&
         /* Zeros stay zeros under a sum: no overflow however many calls. */
         TDM_SCALE_CUDA(cudaMemset(buffers[r], 0, count * sizeof(float))) &&
         TDM_SCALE_CUDA(cudaMalloc(&scratch[r], TDM_SCALE_GATE_BYTES)) &&
         TDM_SCALE_CUDA(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking)) &&
         TDM_SCALE_CUDA(cudaEventCreate(&gates[r])) &&
         TDM_SCALE_CUDA(cudaEventCreate(&starts[r])) &&
         TDM_SCALE_CUDA(cudaEventCreate(&ends[r]));
  for (int r = 0; ok && r < n; r++)
    ok = TDM_SCALE_CUDA(cudaSetDevice(ordinals[r])) && TDM_SCALE_CUDA(cudaDeviceSynchronize());

  /* Trials −2 and −1 warm up (NCCL connects lazily) and size the gate. */
  for (int trial = -2; ok && trial < trials; trial++) {
    for (int r = 0; ok && r < n; r++) {
      ok = TDM_SCALE_CUDA(cudaSetDevice(ordinals[r])) &&
           TDM_SCALE_CUDA(cudaEventRecord(gates[r], streams[r]));
      for (int g = 0; ok && g < gate_count; g++)
        ok = TDM_SCALE_CUDA(cudaMemsetAsync(scratch[r], g & 0xff, TDM_SCALE_GATE_BYTES,
                                            streams[r]));
      ok = ok && TDM_SCALE_CUDA(cudaEventRecord(starts[r], streams[r]));
    }
    gint64 enqueue_us = g_get_monotonic_time();
    for (int i = 0; ok && i < iterations; i++) {
      /* One thread drives every rank: a group lets each rank's call be enqueued
       * without waiting for the others. */
      ok = TDM_SCALE_NCCL(ncclGroupStart());
      for (int r = 0; ok && r < n; r++)
        ok = TDM_SCALE_NCCL(ncclAllReduce(buffers[r], buffers[r], count, ncclFloat, ncclSum,
                                          comms[r], streams[r]));
      ok = TDM_SCALE_NCCL(ncclGroupEnd()) && ok;
    }
    for (int r = 0; ok && r < n; r++)
      ok = TDM_SCALE_CUDA(cudaSetDevice(ordinals[r])) &&
           TDM_SCALE_CUDA(cudaEventRecord(ends[r], streams[r]));
    double enqueue_ms = (g_get_monotonic_time() - enqueue_us) / 1e3;
    double least = INFINITY;
    float gate_ms = 0;
    for (int r = 0; ok && r < n; r++) {
      float ms = 0;
      ok = TDM_SCALE_CUDA(cudaSetDevice(ordinals[r])) &&
           TDM_SCALE_CUDA(cudaEventSynchronize(ends[r])) &&
           TDM_SCALE_CUDA(cudaEventElapsedTime(&ms, starts[r], ends[r]));
      least = MIN(least, ms / 1e3 / iterations);
      if (ok && r == 0)
        ok = TDM_SCALE_CUDA(cudaEventElapsedTime(&gate_ms, gates[r], starts[r]));
    }
    if (ok && trial == -1 && gate_ms > 0)
      gate_count = CLAMP((int)ceil(1.5 * enqueue_ms / (gate_ms / gate_count)), 1,
                         TDM_SCALE_MAX_GATES);
    if (ok && trial >= 0)
      times[trial] = least;
  }

  for (int r = 0; r < n; r++) {
    if (cudaSetDevice(ordinals[r]) != cudaSuccess)
      continue;
    if (streams[r] != NULL)
      (void)TDM_SCALE_CUDA(cudaStreamSynchronize(streams[r]));
    if (comms[r] != NULL)
      (void)TDM_SCALE_NCCL(ncclCommDestroy(comms[r]));
    if (buffers[r] != NULL)
      (void)TDM_SCALE_CUDA(cudaFree(buffers[r]));
    if (scratch[r] != NULL)
      (void)TDM_SCALE_CUDA(cudaFree(scratch[r]));
    if (gates[r] != NULL)
      (void)TDM_SCALE_CUDA(cudaEventDestroy(gates[r]));
    if (starts[r] != NULL)
      (void)TDM_SCALE_CUDA(cudaEventDestroy(starts[r]));
    if (ends[r] != NULL)
      (void)TDM_SCALE_CUDA(cudaEventDestroy(ends[r]));
    if (streams[r] != NULL)
      (void)TDM_SCALE_CUDA(cudaStreamDestroy(streams[r]));
  }
  if (!ok)
    return NAN;
  qsort(times, trials, sizeof times[0], tdm_bench_compare_doubles);
  return times[trials / 2];
}
#endif

/* ---- the bandwidth table ---------------------------------------------------------- */

static double
tdm_scale_busbw(double algbw, int n)
{
  return algbw * 2.0 * (n - 1) / n;
}

/* The GPU ordinals of the first n replicas, when they are distinct GPUs. */
static gboolean
tdm_scale_ordinals(const TdmScaleDevices *d, int n, int *ordinals)
{
  if (!tdm_scale_distinct_gpus(d, n))
    return FALSE;
  for (int i = 0; i < n; i++)
    ordinals[i] = atoi(d->gpus[i] + strlen("cuda:"));
  return TRUE;
}

/* Returns the lowest trainer/bare busbw ratio seen, or NAN. */
static double
tdm_scale_bandwidth(const TdmScaleOptions *o, const TdmScaleDevices *d, int per_replica)
{
  int counts[8];
  int n_counts = tdm_scale_counts(d, counts);
  double worst = NAN;
  printf("\n## Gradient all-reduce bandwidth\n\n"
         "Trainer: allreduce strategy with one bucket holding the whole gradient (so it is "
         "all-reduced once, after backward), %d samples per replica; t = the communication "
         "ms per step of the replica that communicated least (the others also waited for "
         "it). Bare: ncclAllReduce of the same bytes on the same GPUs, %d back-to-back "
         "calls per trial from a queue filled before the GPUs reach it, median of %d "
         "trials. algbw = S / t, busbw = algbw · 2(n−1)/n "
         "(nccl-tests); 1 GB = 1e9 bytes.\n\n", per_replica, o->bare_iterations,
         o->bare_trials);
  printf("| network | S (MB) | n | devices | communicator | trainer t ms | algbw GB/s | "
         "busbw GB/s | bare t ms | bare algbw GB/s | bare busbw GB/s | trainer / bare |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int k = 0; o->networks[k] != NULL; k++) {
    const char *network = o->networks[k];
    for (int i = 0; i < n_counts; i++) {
      int n = counts[i];
      g_autofree char *devices = tdm_scale_devices_for(d, n);
      g_autofree char *label = tdm_scale_devices_label(d, n);
      const char *kind = d->cpu ? "host" : tdm_scale_distinct_gpus(d, n) && TDM_HAVE_NCCL
                                               ? "nccl" : "peer";
      if (n == 1) {
        printf("| %s | | 1 | %s | none | — | — | busbw undefined: one replica, no "
               "all-reduce | — | — | — | — |\n", network, label);
        continue;
      }
      TdmScaleOptions single = *o;
      single.strategy = TDM_STRATEGY_ALLREDUCE;
      /* Larger than any gradient: the one bucket is flushed when backward is done. */
      single.bucket_bytes = (size_t)1 << 40;
      g_autoptr(GError) error = NULL;
      g_autoptr(TdmConfig) cfg = tdm_scale_config(&single, network, devices, per_replica * n,
                                                  &error);
      TdmScalingResult r;
      if (cfg == NULL || !tdm_scale_measure(&single, cfg, tdm_scale_by_comm, &r, &error)) {
        g_printerr("bench-scaling: all-reduce run, %s on %s: %s\n", network, devices,
                   error != NULL ? error->message : "failed");
        printf("| %s | | %d | %s | %s | failed | | | | | | |\n", network, n, label, kind);
        continue;
      }
      double bytes = (double)r.parameters * sizeof(float);
      double t = r.comm_least_ms / 1e3;
      double algbw = bytes / t / 1e9, busbw = tdm_scale_busbw(algbw, n);
      printf("| %s | %.2f | %d | %s | %s | %.4f | %.1f | %.1f |", network, bytes / 1e6, n,
             label, kind, r.comm_least_ms, algbw, busbw);
      int ordinals[TDM_MAX_REPLICAS];
      if (!tdm_scale_ordinals(d, n, ordinals)) {
        printf(" n/a | n/a | n/a | n/a (%s) |\n",
               d->cpu ? "CPU workers" : "replicas share a GPU; NCCL needs distinct GPUs");
        fflush(stdout);
        continue;
      }
#if TDM_HAVE_NCCL
      double bare = tdm_scale_bare_allreduce(ordinals, n, r.parameters, o->bare_trials,
                                             o->bare_iterations);
      if (isnan(bare)) {
        printf(" failed | | | |\n");
      } else {
        double bare_algbw = bytes / bare / 1e9, bare_busbw = tdm_scale_busbw(bare_algbw, n);
        double ratio = busbw / bare_busbw;
        worst = isnan(worst) ? ratio : MIN(worst, ratio);
        printf(" %.4f | %.1f | %.1f | %.0f %% %s |\n", bare * 1e3, bare_algbw, bare_busbw,
               100 * ratio, ratio >= 0.9 ? "✓" : "✗");
      }
#else
      printf(" n/a | n/a | n/a | n/a (built without NCCL) |\n");
#endif
      fflush(stdout);
    }
  }
  return worst;
}

/* ---- main ------------------------------------------------------------------------- */

static int
tdm_scale_parse_batches(const char *text, int *out, const char *what)
{
  if (text == NULL)
    return -1;
  if (g_str_equal(text, "none"))
    return 0;
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  int k = 0;
  for (int i = 0; parts[i] != NULL; i++) {
    char *end = NULL;
    long v = strtol(parts[i], &end, 10);
    if (end == parts[i] || *end != '\0' || v < 1 || v > G_MAXINT / TDM_MAX_REPLICAS ||
        k == TDM_SCALE_MAX_BATCHES) {
      g_printerr("bench-scaling: --%s: “%s” is not a list of up to %d batch sizes\n", what,
                 text, TDM_SCALE_MAX_BATCHES);
      return -2;
    }
    out[k++] = (int)v;
  }
  return k;
}

/* Every CUDA GPU tdm_device_list() finds, or those of --gpus ("cuda:0,1" or "0,1"). */
static char **
tdm_scale_find_gpus(const char *list)
{
  g_autoptr(GArray) all = tdm_device_list();
  g_autoptr(GStrvBuilder) found = g_strv_builder_new();
  if (list == NULL) {
    for (guint i = 0; i < all->len; i++) {
      const TdmDeviceInfo *info = &g_array_index(all, TdmDeviceInfo, i);
      if (info->kind == TDM_BACKEND_CUDA)
        g_strv_builder_add(found, info->id);
    }
    return g_strv_builder_end(found);
  }
  g_auto(GStrv) parts = g_strsplit(list, ",", -1);
  for (int i = 0; parts[i] != NULL; i++) {
    const char *p = g_str_has_prefix(parts[i], "cuda:") ? parts[i] + 5 : parts[i];
    g_autofree char *id = g_strdup_printf("cuda:%s", p);
    gboolean known = FALSE;
    for (guint j = 0; j < all->len; j++)
      known |= g_str_equal(g_array_index(all, TdmDeviceInfo, j).id, id);
    for (int j = 0; j < i; j++) {
      const char *q = g_str_has_prefix(parts[j], "cuda:") ? parts[j] + 5 : parts[j];
      if (g_str_equal(p, q))
        known = FALSE;   /* listed twice: --replicas-per-gpu says how to share */
    }
    if (!known) {
      g_printerr("bench-scaling: --gpus: “%s” is not a distinct CUDA GPU here\n", parts[i]);
      return NULL;
    }
    g_strv_builder_add(found, id);
  }
  return g_strv_builder_end(found);
}

/* `nvidia-smi topo -m` into the output, when there is one: scaling depends on it. */
static void
tdm_scale_print_topology(void)
{
  const char *argv[] = {"nvidia-smi", "topo", "-m", NULL};
  g_autofree char *out = NULL;
  int status = 0;
  if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                    NULL, NULL, &out, NULL, &status, NULL) ||
      !g_spawn_check_wait_status(status, NULL)) {
    printf("(nvidia-smi topo -m: not available)\n");
    return;
  }
  printf("`nvidia-smi topo -m`:\n\n```\n%s```\n", out);
}

int
main(int argc, char **argv)
{
  g_autofree char *gpus = NULL, *networks = NULL, *weak = NULL, *strong = NULL;
  g_autofree char *dataset = NULL, *precision = NULL, *strategy = NULL;
  int replicas_per_gpu = 1, cpu = 0, steps = 50, warmup_steps = 20, repeat = 3;
  int bandwidth_batch = 256, bare_trials = 9, bare_iterations = 20;
  gint64 bucket_bytes = 4 << 20;
  double min_seconds = 0.5;
  gboolean no_bandwidth = FALSE;
  GOptionEntry entries[] = {
    {"gpus", 0, 0, G_OPTION_ARG_STRING, &gpus, "GPUs (default: every CUDA GPU found)",
     "cuda:0,cuda:1"},
    {"replicas-per-gpu", 0, 0, G_OPTION_ARG_INT, &replicas_per_gpu,
     "Replicas on each GPU (default 1)", "K"},
    {"cpu", 0, 0, G_OPTION_ARG_INT, &cpu, "Up to N CPU workers instead of GPUs", "N"},
    {"networks", 0, 0, G_OPTION_ARG_STRING, &networks, "Networks (default mlp,cnn)", "LIST"},
    {"weak", 0, 0, G_OPTION_ARG_STRING, &weak,
     "Batches per replica for weak scaling (default 256,1024; none to skip)", "LIST"},
    {"strong", 0, 0, G_OPTION_ARG_STRING, &strong,
     "Global batches for strong scaling (default 1024,4096; none to skip)", "LIST"},
    {"steps", 0, 0, G_OPTION_ARG_INT, &steps, "Least steps per timed run (default 50)", "N"},
    {"warmup-steps", 0, 0, G_OPTION_ARG_INT, &warmup_steps,
     "Steps of the warm-up run (default 20)", "N"},
    {"min-seconds", 0, 0, G_OPTION_ARG_DOUBLE, &min_seconds,
     "Steps are added until a timed window lasts about this long (default 0.5)", "S"},
    {"repeat", 0, 0, G_OPTION_ARG_INT, &repeat, "Timed runs, median taken (default 3)", "N"},
    {"dataset", 0, 0, G_OPTION_ARG_STRING, &dataset, "Dataset (default fashion-mnist)", "NAME"},
    {"precision", 0, 0, G_OPTION_ARG_STRING, &precision, "fp32 or tf32 (default fp32)", "P"},
    {"strategy", 0, 0, G_OPTION_ARG_STRING, &strategy,
     "allreduce or main for the scaling runs (default allreduce)", "S"},
    {"bucket-bytes", 0, 0, G_OPTION_ARG_INT64, &bucket_bytes,
     "Gradient bucket for the scaling runs (default 4 MiB, the engine's)", "BYTES"},
    {"bandwidth-batch", 0, 0, G_OPTION_ARG_INT, &bandwidth_batch,
     "Samples per replica in the all-reduce runs (default 256)", "N"},
    {"bare-trials", 0, 0, G_OPTION_ARG_INT, &bare_trials,
     "Trials of the bare ncclAllReduce, median taken (default 9)", "N"},
    {"bare-iterations", 0, 0, G_OPTION_ARG_INT, &bare_iterations,
     "Back-to-back calls per bare trial (default 20)", "N"},
    {"no-bandwidth", 0, 0, G_OPTION_ARG_NONE, &no_bandwidth, "Skip the all-reduce table", NULL},
    {NULL},
  };
  g_autoptr(GOptionContext) context = g_option_context_new("— Tandem scaling over replicas");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    g_printerr("bench-scaling: %s\n", error->message);
    return 2;
  }

  TdmScaleOptions o = {0};
  o.steps = MAX(1, steps);
  o.warmup_steps = MAX(1, warmup_steps);
  o.min_seconds = MAX(0.0, min_seconds);
  o.repeat = CLAMP(repeat, 1, TDM_SCALE_MAX_REPEAT);
  o.bare_trials = CLAMP(bare_trials, 1, 2 * TDM_SCALE_MAX_REPEAT);
  o.bare_iterations = MAX(1, bare_iterations);
  o.bucket_bytes = (size_t)MAX(bucket_bytes, (gint64)sizeof(float));
  o.dataset = g_strdup(dataset != NULL ? dataset
                       : g_file_test(TDM_FASHION_MNIST_DIR, G_FILE_TEST_IS_DIR) ? "fashion-mnist"
                                                                              : "synthetic");
  o.precision = TDM_PRECISION_FP32;
  o.strategy = TDM_STRATEGY_ALLREDUCE;
  if ((precision != NULL && !tdm_precision_from_name(precision, &o.precision)) ||
      (strategy != NULL && !tdm_strategy_from_name(strategy, &o.strategy))) {
    g_printerr("bench-scaling: unknown --precision or --strategy\n");
    return 2;
  }
  o.networks = g_strsplit(networks != NULL ? networks : "mlp,cnn", ",", -1);
  o.n_weak = tdm_scale_parse_batches(weak, o.weak, "weak");
  o.n_strong = tdm_scale_parse_batches(strong, o.strong, "strong");
  if (o.n_weak == -2 || o.n_strong == -2)
    return 2;
  if (o.n_weak < 0) {
    o.weak[0] = 256;
    o.weak[1] = 1024;
    o.n_weak = 2;
  }
  if (o.n_strong < 0) {
    o.strong[0] = 1024;
    o.strong[1] = 4096;
    o.n_strong = 2;
  }

  TdmScaleDevices d = {0};
  if (cpu <= 0 && (gpus != NULL || replicas_per_gpu > 1)) {
    d.gpus = tdm_scale_find_gpus(gpus);
    if (d.gpus == NULL)
      return 2;
  } else if (cpu <= 0) {
    d.gpus = tdm_scale_find_gpus(NULL);
  }
  if (cpu > 0 || d.gpus == NULL || d.gpus[0] == NULL) {
    if (cpu <= 0 && (gpus != NULL || replicas_per_gpu > 1)) {
      g_printerr("bench-scaling: no CUDA GPU found%s\n",
                 TDM_HAVE_CUDA ? "" : " (this build has no CUDA backend)");
      return 2;
    }
    d.cpu = TRUE;
    d.cpu_workers = cpu > 0 ? cpu : MIN((int)g_get_num_processors(), 8);
    d.available = MIN(d.cpu_workers, TDM_MAX_REPLICAS);
  } else {
    d.replicas_per_gpu = CLAMP(replicas_per_gpu, 1, TDM_MAX_REPLICAS);
    d.available = MIN((int)g_strv_length(d.gpus) * d.replicas_per_gpu, TDM_MAX_REPLICAS);
  }

  g_autofree char *all_devices = tdm_scale_devices_for(&d, d.available);
  printf("# Tandem scaling: %s\n\n", all_devices);
  printf("dataset %s, Adam, %s, strategy %s, bucket %zu bytes; per configuration a warm-up "
         "run of %ld steps, then %d runs of at least %ld steps (more where a run would last "
         "under %.2f s), median shown; timed between the first and the last summary, "
         "epoch-end evaluations excluded; compute/comm/wait are the trainer's DEVICES "
         "figures (steps it synchronized to time), mean over replicas.%s\n\n",
         o.dataset, tdm_precision_name(o.precision), tdm_strategy_name(o.strategy),
         o.bucket_bytes, o.warmup_steps, o.repeat, o.steps, o.min_seconds,
         d.cpu ? "" : (d.replicas_per_gpu > 1 ? " Replicas that share a GPU go through the "
                                                "peer communicator." : ""));
  if (!d.cpu)
    tdm_scale_print_topology();

  g_autoptr(GPtrArray) cache = g_ptr_array_new_with_free_func(tdm_scale_cached_free);
  double cnn_weak_1024 = NAN;
  for (int k = 0; o.networks[k] != NULL; k++) {
    const char *network = o.networks[k];
    printf("\n## %s\n", network);
    if (o.n_weak > 0) {
      double e = tdm_scale_table(cache, &o, &d, network, TRUE, o.weak, o.n_weak);
      /* The target row: cnn at 1024 per replica, at the largest n. */
      if (g_str_equal(network, "cnn") && o.weak[o.n_weak - 1] == 1024)
        cnn_weak_1024 = e;
    }
    if (o.n_strong > 0)
      tdm_scale_table(cache, &o, &d, network, FALSE, o.strong, o.n_strong);
  }
  double worst_ratio = NAN;
  if (!no_bandwidth)
    worst_ratio = tdm_scale_bandwidth(&o, &d, bandwidth_batch);

  int counts[8];
  int largest = counts[tdm_scale_counts(&d, counts) - 1];
  printf("\n## Targets\n\n");
  printf("- weak-scaling efficiency ≥ 90 %% at 8 GPUs for cnn at 1024 per GPU: ");
  if (d.cpu || largest < 8 || !tdm_scale_distinct_gpus(&d, 8) || isnan(cnn_weak_1024))
    printf("not measured here (largest n %d%s)\n", largest,
           d.cpu ? ", CPU workers" : tdm_scale_distinct_gpus(&d, largest) ? "" : ", shared GPUs");
  else
    printf("%.0f %% %s\n", 100 * cnn_weak_1024, cnn_weak_1024 >= 0.9 ? "✓" : "✗");
  printf("- gradient all-reduce ≥ 90 %% of a bare ncclAllReduce's busbw: ");
  if (isnan(worst_ratio))
    printf("not measured here (needs at least 2 distinct GPUs and NCCL)\n");
  else
    printf("lowest %.0f %% %s\n", 100 * worst_ratio, worst_ratio >= 0.9 ? "✓" : "✗");

  g_strfreev(o.networks);
  g_free(o.dataset);
  g_strfreev(d.gpus);
  return 0;
}
