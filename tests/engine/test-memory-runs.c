/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-memory-runs.c — the memory estimate against whole runs (tdm-memory.h): mlp and
 * cnn, two batch sizes, 1 and 2 workers, both strategies, against the counters the
 * trainer reports and the process's peak RSS growth, within 10 %; deep networks' runs;
 * exact mode's host buffers against what its set-up allocated; a freed buffer going back
 * to the system. The replica-level checks are in test-memory.c. */
#include "resnet18-cifar.h"
#include "synthetic-idx.h"
#include "tdm-backend.h"
#include "tdm-build-config.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-event-json.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-optimizer.h"
#include "tdm-replica.h"
#include "tdm-replica-private.h"
#include "tdm-trainer.h"
#include "tdm-trainer-private.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gint64
status_kib(const char *key)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/self/status", &text, NULL, NULL))
    return -1;
  const char *line = strstr(text, key);
  return line != NULL ? g_ascii_strtoll(line + strlen(key) + 1, NULL, 10) : -1;
}

typedef struct {
  TdmMemoryEvent estimate;
  gboolean have_estimate, have_devices;
  gint64 tandem_bytes[TDM_MAX_REPLICAS], peak_bytes[TDM_MAX_REPLICAS];
  int replicas;
} Seen;

static void
on_event(const TdmEvent *e, gpointer data)
{
  Seen *seen = data;
  if (e->kind == TDM_EVENT_MEMORY) {
    g_assert_false(seen->have_devices);
    seen->estimate = e->memory;
    seen->have_estimate = TRUE;
  } else if (e->kind == TDM_EVENT_DEVICES) {
    seen->replicas = e->devices.replicas;
    for (int r = 0; r < e->devices.replicas; r++) {
      seen->tandem_bytes[r] = e->devices.device[r].tandem_bytes;
      seen->peak_bytes[r] = e->devices.device[r].peak_bytes;
    }
    seen->have_devices = TRUE;
  }
}

/* The runs' dataset, read from its folder within each run as a user's is: 1,100
 * training images (two steps of 512) and 300 test images (three evaluation chunks of
 * a ResNet-18 and of the resnet preset, more than one of the cnn's). */
static char *run_dataset;

static TdmConfig *
run_config(const char *network, const char *devices, int batch, TdmStrategy strategy)
{
  TdmConfig *cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(run_dataset);
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  g_assert_true(tdm_config_set_devices(cfg, devices, NULL));
  cfg->batch = batch;
  cfg->strategy = strategy;
  cfg->epochs = 1;
  cfg->max_steps = 2;
  /* Evaluation chunks no larger than a shard, so that the steps touch every page of
   * the activations and RSS can see them. */
  cfg->eval_batch = (batch + 1) / 2;
  return cfg;
}

static void
run(const TdmConfig *cfg, Seen *seen)
{
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, on_event, seen);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
}

static gboolean
can_reset_peak(void)
{
  /* Writing 5 resets the peak (VmHWM) to the current RSS; not where /proc forbids it. */
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f == NULL)
    return FALSE;
  gboolean ok = fputs("5", f) >= 0;
  ok = fclose(f) == 0 && ok;
  return ok && status_kib("VmHWM:") > 0;
}

/* Runs cfg; with rss, returns how many bytes the process's peak RSS grew by during
 * the run (0 without). */
static double
run_measured(const TdmConfig *cfg, gboolean rss, Seen *seen)
{
  /* What earlier runs freed but malloc kept would be reused unseen. */
  malloc_trim(0);
  gint64 before = rss ? status_kib("VmRSS:") : 0;
  if (rss)
    g_assert_true(can_reset_peak());
  run(cfg, seen);
  g_assert_true(seen->have_estimate && seen->have_devices);
  return rss ? (status_kib("VmHWM:") - before) * 1024.0 : 0;
}

/* The estimate against the CPU backend's counters (exact by construction) and the
 * process's peak RSS growth during the run (within 10 %). */
static void
test_runs_measured(void)
{
  static const char *const networks[] = {"mlp", "cnn"};
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  static const int batches[] = {64}; /* every run is ~5× slower; the counters suffice */
#else
  static const int batches[] = {64, 512};
#endif
  static const char *const devices[] = {"cpu", "cpu:2"};
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  gboolean rss = FALSE; /* shadow memory and quarantine are not the run's */
#else
  gboolean rss = can_reset_peak();
#endif
  if (!rss)
    g_test_message("peak RSS cannot be reset here (or a sanitizer owns memory): "
                   "counters only");

  /* Warm up: OpenBLAS's buffers and the threads' first allocations are the process's,
   * not a run's. */
  for (guint n = 0; n < G_N_ELEMENTS(networks); n++)
    for (guint d = 0; d < G_N_ELEMENTS(devices); d++) {
      g_autoptr(TdmConfig) cfg = run_config(networks[n], devices[d], 512, TDM_STRATEGY_ALLREDUCE);
      Seen seen = {0};
      run(cfg, &seen);
    }

  for (guint n = 0; n < G_N_ELEMENTS(networks); n++)
    for (guint bi = 0; bi < G_N_ELEMENTS(batches); bi++)
      for (guint d = 0; d < G_N_ELEMENTS(devices); d++)
        for (int strategy = TDM_STRATEGY_MAIN; strategy <= TDM_STRATEGY_ALLREDUCE; strategy++) {
          if (d == 0 && strategy == TDM_STRATEGY_MAIN)
            continue; /* one worker: the strategies are the same run */
          g_autoptr(TdmConfig) cfg = run_config(networks[n], devices[d], batches[bi], strategy);
          Seen seen = {0};
          double grown = run_measured(cfg, rss, &seen);
          const TdmMemoryEvent *m = &seen.estimate;
          g_assert_cmpint(m->replicas, ==, seen.replicas);
          /* What the plan counts is what is held, and never more at once: the event's
           * peak is the plan too. */
          for (int r = 0; r < seen.replicas; r++) {
            g_assert_cmpuint(m->device[r].total, ==, (guint64)seen.tandem_bytes[r]);
            g_assert_cmpint(seen.peak_bytes[r], ==, seen.tandem_bytes[r]);
          }
          if (strategy == TDM_STRATEGY_MAIN)
            g_assert_cmpuint(m->device[1].optimizer, ==, 0);
          else
            g_assert_cmpuint(m->device[0].optimizer, ==,
                             m->device[0].gradients * 2 + TDM_OPTIMIZER_RATES_BYTES(0));
          if (!rss)
            continue;
          double ratio = grown / (double)m->host_total;
          g_test_message("%s %s batch %d %s: estimate %.1f MiB, peak RSS grew %.1f MiB "
                         "(%.3f)", networks[n], devices[d], batches[bi],
                         tdm_strategy_name(strategy), m->host_total / 1048576.0,
                         grown / 1048576.0, ratio);
          g_assert_cmpfloat(ratio, >=, 0.9);
          g_assert_cmpfloat(ratio, <=, 1.1);
        }
}

/* Networks of real depth on the CPU: the ResNet-18 at a small size (28×28
 * synthetic digits, batch 8, evaluation chunks chosen by the engine) and the resnet
 * preset (its recipe at batch 16). The estimate equals the counters, and the peak RSS
 * the run adds stays within 10 % of the estimate's host total. */
static void
test_deep_runs_measured(void)
{
  static const struct {
    const char *network;
    int batch;
  } runs[] = {{resnet18, 8}, {"resnet", 16}};
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  gboolean rss = FALSE;
#else
  gboolean rss = can_reset_peak();
#endif
  for (guint k = 0; k < G_N_ELEMENTS(runs); k++) {
    g_autoptr(TdmConfig) cfg = run_config(runs[k].network, "cpu", runs[k].batch,
                                          TDM_STRATEGY_ALLREDUCE);
    cfg->eval_batch = 1000;
    cfg->max_steps = 1;
    cfg->optimizer = TDM_OPTIMIZER_NESTEROV;
    Seen seen = {0};
    double grown = run_measured(cfg, rss, &seen);
    const TdmMemoryEvent *m = &seen.estimate;
    g_assert_cmpuint(m->device[0].total, ==, (guint64)seen.tandem_bytes[0]);
    g_assert_cmpint(m->capacity, ==, runs[k].batch);
    g_assert_cmpint(m->eval_capacity, >=, 1);
    g_assert_cmpint(m->eval_capacity, <=, 1000);
    if (!rss)
      continue;
    double ratio = grown / (double)m->host_total;
    g_test_message("%.40s... batch %d, evaluation chunk %d: estimate %.1f MiB, peak RSS grew "
                   "%.1f MiB (%.3f)", runs[k].network, runs[k].batch, m->eval_capacity,
                   m->host_total / 1048576.0, grown / 1048576.0, ratio);
    g_assert_cmpfloat(ratio, >=, 0.9);
    g_assert_cmpfloat(ratio, <=, 1.1);
  }
}

/* Exact mode's host buffers (the fixed-point sums, the staging of gradients and BN
 * statistics) are in the estimate's host figures, byte for byte what its set-up
 * allocated, for networks with and without BN statistics and 1 to 3 workers; the
 * ordinary mode allocates none. */
static void
test_exact_buffers(void)
{
  static const char *const networks[] = {"conv4k3p1,relu,pool2,fc10",
                                         "conv4k3p1,bn,relu,gap,fc10"};
  static const char *const devices[] = {"cpu", "cpu:2", "cpu:3"};
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 96, 32);
  for (guint n = 0; n < G_N_ELEMENTS(networks); n++)
    for (guint d = 0; d < G_N_ELEMENTS(devices); d++)
      for (int exact = 0; exact <= 1; exact++) {
        g_autoptr(TdmConfig) cfg = run_config(networks[n], devices[d], 48,
                                              TDM_STRATEGY_ALLREDUCE);
        cfg->max_steps = 1;
        cfg->exact = exact;
        cfg->exact_chunk = 16;
        Seen seen = {0};
        g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, on_event, &seen);
        tdm_trainer_set_dataset(trainer, data);
        g_autoptr(GError) error = NULL;
        g_assert_true(tdm_trainer_run(trainer, NULL, &error));
        g_assert_no_error(error);
        g_assert_true(seen.have_estimate);

        /* The same run without exact mode, estimated: its host copies differ by exact
         * mode's buffers (its replicas' by the chunk, which sizes their activations),
         * and they count in the host total that the fit test reads. */
        g_autoptr(TdmConfig) plain = tdm_config_copy(cfg);
        plain->exact = FALSE;
        g_autoptr(TdmNetwork) net = tdm_network_new(cfg->network, 28, 28, 1, 10, &error);
        g_assert_no_error(error);
        g_autofree TdmMemoryEvent *base = g_new(TdmMemoryEvent, 1);
        tdm_memory_estimate(plain, net, data->train->count, data->test->count, base);
        const TdmMemoryEvent *m = &seen.estimate;
        guint64 allocated = trainer->exact_bytes;
        g_assert_cmpuint(m->host_copies - base->host_copies, ==, allocated);
        g_assert_cmpuint(m->host_total, ==, m->host_dataset + m->host_copies + m->host_devices);
        g_assert_cmpuint(m->gpu_total, ==, 0);
        if (!exact) {
          g_assert_cmpuint(allocated, ==, 0);
          continue;
        }
        /* At least the two int64 limbs of every gradient, on every worker. */
        g_assert_cmpuint(allocated, >=,
                         (guint64)m->replicas * 2 * net->parameter_count * sizeof(gint64));
        g_test_message("exact %s on %s: %" G_GUINT64_FORMAT " host bytes", networks[n],
                       devices[d], allocated);
      }
}

/* The fit rule at its edges: a budget met exactly fits, a byte over does not; 0 is no
 * limit; a CPU worker's bytes count against the host only, a GPU's against its own
 * budget only. */
static void
test_buffers_returned(void)
{
#if defined(__SANITIZE_ADDRESS__)
  g_test_skip("AddressSanitizer keeps freed memory in quarantine");
  return;
#endif
  /* A freed 16 MiB mapping raises glibc's threshold to 16 MiB: blocks below it would
   * come from the heap from now on. */
  void *big = malloc((size_t)16 << 20);
  g_assert_nonnull(big);
  ((volatile char *)big)[0] = 1;
  free(big);

  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  size_t bytes = (size_t)8 << 20;
  gint64 before = status_kib("RssAnon:");
  g_assert_cmpint(before, >, 0);
  char *block = tdm_backend_alloc(b, bytes, &error);
  g_assert_no_error(error);
  memset(block, 1, bytes);
  gint64 held = status_kib("RssAnon:");
  tdm_backend_release(b, block);
  gint64 after = status_kib("RssAnon:");
  g_test_message("RssAnon %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT
                 " KiB", before, held, after);
  g_assert_cmpint(held - before, >=, 7 * 1024);
  g_assert_cmpint(held - after, >=, 7 * 1024);
  tdm_backend_free(b);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* The convolution engine's choices and workspaces stay in the process, empty. */
  g_setenv("TANDEM_CONV_CACHE", "0", TRUE);
  g_test_add_func("/memory/exact-buffers", test_exact_buffers);
  g_test_add_func("/memory/buffers-returned", test_buffers_returned);
  g_test_add_func("/memory/runs-measured", test_runs_measured);
  g_test_add_func("/memory/deep-runs-measured", test_deep_runs_measured);
  run_dataset = test_synthetic_idx_new(0, 1100, 300);
  int status = g_test_run();
  test_remove_synthetic_idx(run_dataset);
  return status;
}
