/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-memory.c — part of test-cuda-train: memory on a GPU. A run that
 * cannot fit is refused with the device named and the GPU trains again; the memory
 * estimate is each GPU's counter to the byte, before and after the pre-warm fits the
 * column workspace; a first run's peak lies above a later run's only by its timings'
 * workspace beyond the fitted one; the activation arena lets an evaluation between two
 * steps change neither; the convs whose output no buffer keeps (the CIFAR stem's, the
 * projections') compute it again with the bits the forward wrote. */
#include "replica-recomputed.h"
#include "replica-step.h"
#include "tdm-backend-cuda-conv-cache.h"
#include "tdm-dataset.h"
#include "tdm-device.h"
#include "tdm-events.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-replica-private.h"
#include "tdm-replica.h"
#include "tdm-trainer.h"
#include "test-cuda-train.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static void
test_out_of_memory_is_reported(void)
{
  if (!have_gpu())
    return;
  /* Activations of 2²⁶ floats a sample at batch 60000 far exceed any GPU. */
  g_autoptr(TdmConfig) cfg = synthetic_run("conv4096k3p1,fc10", "cuda:0");
  cfg->batch = 60000;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_trainer_run(trainer, NULL, &error));
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, "cuda:0"));
  /* The process survives and the GPU can train again. */
  size_t n;
  g_autofree float *params = train("cuda:0", "fc16,fc10", TDM_STRATEGY_ALLREDUCE, 3,
                                   TDM_PRECISION_FP32, &n);
  g_assert_cmpuint(n, >, 0);
}

typedef struct {
  TdmMemoryEvent first, estimate;   /* before the run; the last one */
  gint64 tandem_bytes[TDM_MAX_REPLICAS];
  gint64 peak_bytes[TDM_MAX_REPLICAS];
  int replicas, estimates;
} MemorySeen;

static void
on_memory_event(const TdmEvent *e, gpointer data)
{
  MemorySeen *seen = data;
  if (e->kind == TDM_EVENT_MEMORY) {
    if (seen->estimates == 0)
      seen->first = e->memory;
    seen->estimate = e->memory;
    seen->estimates++;
  } else if (e->kind == TDM_EVENT_DEVICES) {
    seen->replicas = e->devices.replicas;
    for (int r = 0; r < e->devices.replicas; r++) {
      seen->tandem_bytes[r] = e->devices.device[r].tandem_bytes;
      seen->peak_bytes[r] = e->devices.device[r].peak_bytes;
    }
  }
}

/* The memory estimate is what each GPU's backend counter holds during the run, to the
 * byte: replica, optimizer (on the main GPU only with `main`), cuBLAS's workspace. The
 * first estimate sizes the column workspace by its upper bound; after the pre-warm the
 * replicas shrink it to what the chosen convolutions need, and a second memory event
 * says so ("chosen"), at most the first; the same configuration run again in the process
 * starts from that figure (remembered beside the choices), its first estimate already
 * "chosen" and equal to the counter. */
static void
check_memory_estimate(const char *network, const char *devices, TdmStrategy strategy,
                      TdmPrecision precision, gboolean again)
{
  g_autoptr(TdmConfig) cfg = synthetic_run(network, devices);
  cfg->batch = 256;
  cfg->strategy = strategy;
  cfg->precision = precision;
  cfg->max_steps = 3;
  MemorySeen seen = {0};
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, on_memory_event, &seen);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpint(seen.estimates, ==, 2);
  g_assert_cmpint(seen.replicas, ==, seen.estimate.replicas);
  g_assert_cmpint(seen.estimate.workspace_basis, ==, TDM_WORKSPACE_CHOSEN);
  if (again)
    g_assert_cmpint(seen.first.workspace_basis, ==, TDM_WORKSPACE_CHOSEN);
  for (int r = 0; r < seen.replicas; r++) {
    g_test_message("%s on %s, %s, %s%s, replica %d: first estimate %" G_GUINT64_FORMAT
                   " (%s), after the pre-warm %" G_GUINT64_FORMAT " (workspace %" G_GUINT64_FORMAT
                   "), counter %" G_GINT64_FORMAT, network, devices, tdm_strategy_name(strategy),
                   tdm_precision_name(precision), again ? ", again" : "", r,
                   seen.first.device[r].total,
                   tdm_workspace_basis_name(seen.first.workspace_basis),
                   seen.estimate.device[r].total, seen.estimate.device[r].workspace,
                   seen.tandem_bytes[r]);
    g_assert_cmpuint(seen.estimate.device[r].total, ==, (guint64)seen.tandem_bytes[r]);
    g_assert_cmpuint(seen.estimate.device[r].total, <=, seen.first.device[r].total);
    if (again)
      g_assert_cmpuint(seen.first.device[r].total, ==, seen.estimate.device[r].total);
  }
}

static void
test_memory_estimate(void)
{
  if (!have_gpu())
    return;
  static const char *const devices[] = {"cuda:0", "cuda:0,cuda:0"};
  static const char *const networks[] = {NETWORK, "cnn", "mlp"};
  for (guint d = 0; d < G_N_ELEMENTS(devices); d++) {
    for (guint n = 0; n < G_N_ELEMENTS(networks); n++)
      for (int strategy = TDM_STRATEGY_MAIN; strategy <= TDM_STRATEGY_ALLREDUCE; strategy++)
        check_memory_estimate(networks[n], devices[d], strategy, TDM_PRECISION_FP32, FALSE);
    /* bf16 with BN and residual blocks (the convolutions' bf16 layouts), each twice. */
    for (int again = 0; again < 2; again++) {
      check_memory_estimate(BN_NETWORK, devices[d], TDM_STRATEGY_ALLREDUCE, TDM_PRECISION_BF16,
                            again);
      check_memory_estimate(BLOCKS16_NETWORK, devices[d], TDM_STRATEGY_ALLREDUCE,
                            TDM_PRECISION_BF16, again);
      check_memory_estimate(TV_STEM_NETWORK, devices[d], TDM_STRATEGY_ALLREDUCE,
                            TDM_PRECISION_BF16, again);
      check_memory_estimate(REGION_NETWORK, devices[d], TDM_STRATEGY_ALLREDUCE,
                            TDM_PRECISION_BF16, again);
      check_memory_estimate(NETWORK, devices[d], TDM_STRATEGY_ALLREDUCE, TDM_PRECISION_BF16,
                            again);
      check_memory_estimate(PLAIN_NETWORK, devices[d], TDM_STRATEGY_ALLREDUCE,
                            TDM_PRECISION_BF16, again);
      check_memory_estimate(BOTTLENECK_NETWORK, devices[d], TDM_STRATEGY_ALLREDUCE,
                            TDM_PRECISION_BF16, again);
    }
    /* Every bn output a conv reads stored for it (TANDEM_BN_STORE): the estimate counts
     * the buffers the replicas allocate; a run again starts from the workspace remembered
     * for the store (its key names it), not the one without. */
    g_assert_true(g_setenv("TANDEM_BN_STORE", "all", TRUE));
    for (int again = 0; again < 2; again++) {
      check_memory_estimate(BLOCKS16_NETWORK, devices[d], TDM_STRATEGY_ALLREDUCE,
                            TDM_PRECISION_BF16, again);
      check_memory_estimate(BOTTLENECK_NETWORK, devices[d], TDM_STRATEGY_ALLREDUCE,
                            TDM_PRECISION_BF16, again);
    }
    g_unsetenv("TANDEM_BN_STORE");
  }
}

/* One bf16 run of `network` on cuda:0 (batch 256, 3 steps): its devices events' peak, and
 * what the engine's timings asked of the workspace (0 where it timed nothing). */
static gint64
peak_of_run(const char *network, size_t *timed_need)
{
  g_autoptr(TdmConfig) cfg = synthetic_run(network, "cuda:0");
  cfg->batch = 256;
  cfg->strategy = TDM_STRATEGY_ALLREDUCE;
  cfg->precision = TDM_PRECISION_BF16;
  cfg->max_steps = 3;
  MemorySeen seen = {0};
  conv_timing_needs_reset();
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, on_memory_event, &seen);
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpint(seen.replicas, ==, 1);
  size_t most = 0;
  conv_timing_needs(&most, timed_need);
  return seen.peak_bytes[0];
}

/* The column workspace the cache file at `path` remembers for its one configuration. */
static guint64
remembered_workspace(const char *path)
{
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  guint64 bytes = 0;
  int found = 0;
  for (char **line = lines; *line != NULL; line++) {
    if (!g_str_has_prefix(*line, "workspace "))
      continue;
    g_auto(GStrv) f = g_strsplit(*line, "\t", 3);
    g_assert_cmpuint(g_strv_length(f), ==, 3);
    bytes = g_ascii_strtoull(f[1], NULL, 10);
    found++;
  }
  g_assert_cmpint(found, ==, 1);
  return bytes;
}

/* Two runs of one configuration on one fresh cache file: the first times every
 * convolution's candidates, growing the column workspace for them, and fits it to its
 * choices; the later one reads the choices and that workspace, and times nothing. The
 * first's counted peak lies above the later's by no more than its largest timing need
 * beyond the fitted workspace (the workspace alone differs between them): the screen
 * keeps nothing of its own in the workspace (it compared the candidates' results with
 * the reference's through their own scratch), where a copy of the reference's result
 * after the candidates' need once put 64 MiB on a first run of ResNet-18 at 32 px. */
static void
test_first_run_peak(void)
{
  if (!have_gpu())
    return;
  static const char *const networks[] = {REGION_NETWORK, BOTTLENECK_NETWORK};
  g_autoptr(GError) tmp_error = NULL;
  g_autofree char *dir = g_dir_make_tmp("tandem-first-peak-XXXXXX", &tmp_error);
  g_assert_no_error(tmp_error);
  g_autofree char *path = g_build_filename(dir, "conv.txt", NULL);
  for (guint n = 0; n < G_N_ELEMENTS(networks); n++) {
    g_unlink(path);
    g_setenv("TANDEM_CONV_CACHE", path, TRUE);
    tdm_conv_cache_reset();
    size_t first_need = 0, later_need = 0;
    gint64 first = peak_of_run(networks[n], &first_need);
    guint64 fitted = remembered_workspace(path);
    gint64 later = peak_of_run(networks[n], &later_need);
    size_t grown = MAX(MAX(first_need, TDM_REPLICA_WORKSPACE_START), (size_t)fitted);
    g_test_message("%.40s...: first run's peak %" G_GINT64_FORMAT ", later run's %"
                   G_GINT64_FORMAT " (%+" G_GINT64_FORMAT "); timings asked for %zu, the "
                   "fitted workspace %" G_GUINT64_FORMAT " (%zu beyond it)", networks[n],
                   first, later, first - later, first_need, fitted, grown - (size_t)fitted);
    g_assert_cmpuint(first_need, >, 0);
    g_assert_cmpuint(later_need, ==, 0);
    g_assert_cmpint(later, <=, first);
    g_assert_cmpint(first - later, <=, (gint64)(grown - (size_t)fitted));
  }
  g_setenv("TANDEM_CONV_CACHE", "0", TRUE); /* main()'s: this process's table alone */
  tdm_conv_cache_reset();
  g_unlink(path);
  g_rmdir(dir);
}

/* The activation arena on a GPU: the inference pass's buffers lie over the training's
 * activations (test-memory's arena-evaluation-between-steps on the CPU). After a step
 * and an evaluation that let the convolution engine choose, an evaluation between two
 * steps leaves the next step's gradients the bits of a step after a step, and a step
 * between two evaluations (the running statistics put back) leaves the logits the same
 * bits; fp32 and bf16, an evaluation chunk larger than the shard and smaller; the
 * device's counter grows by the plan's total with the replica (beyond the backend's own
 * buffers: cuBLAS's workspace, the sums' partials) and returns to them without it. */
static void
test_arena_evaluation_between_steps(void)
{
  if (!have_gpu())
    return;
  static const char *const nets[] = {BLOCKS16_NETWORK, TV_STEM_NETWORK, REGION_NETWORK};
  static const int shapes[][2] = {{8, 40}, {16, 5}}; /* capacity, evaluation chunk */
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 40);
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++)
    for (int prec = TDM_PRECISION_FP32; prec <= TDM_PRECISION_BF16; prec += 2)
      for (guint s = 0; s < G_N_ELEMENTS(shapes); s++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(TdmNetwork) net = tdm_network_new(nets[k], 28, 28, 1, 10, &error);
        g_assert_no_error(error);
        TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), prec, &error);
        g_assert_no_error(error);
        size_t own = b->bytes_in_use;
        g_assert_cmpuint(own, ==, tdm_backend_own_bytes(TDM_DEVICE_GPU(0)));
        int cap = shapes[s][0], chunk = shapes[s][1];
        TdmReplica *r = tdm_replica_new_sized(b, net, cap, chunk, data->train, data->test,
                                              &error);
        g_assert_no_error(error);
        g_assert_cmpuint(b->bytes_in_use - own, ==,
                         tdm_memory_replica(net, TDM_BACKEND_CUDA, prec, cap, chunk, 64, 40)
                             .total);
        size_t n = net->parameter_count, out = (size_t)chunk * net->classes;
        size_t ns = MAX(1, net->state_count);
        g_autofree float *params = g_new(float, n);
        g_autofree float *state = g_new(float, ns);
        tdm_network_init_parameters(net, 3, params);
        g_autofree float *warm_logits = g_new(float, out);
        g_autofree float *before = g_new(float, out), *after = g_new(float, out);
        tdm_backend_upload(b, r->params, params, n * sizeof(float));
        tdm_backend_download(b, state, r->state, ns * sizeof(float));
        tdm_replica_predict(r, 0, chunk, warm_logits);
        g_autofree float *warm = replica_step_gradients(r, params, cap);
        tdm_backend_upload(b, r->state, state, ns * sizeof(float));
        tdm_replica_predict(r, 0, chunk, before);
        g_autofree float *first = replica_step_gradients(r, params, cap);
        tdm_backend_upload(b, r->state, state, ns * sizeof(float));
        tdm_replica_predict(r, 0, chunk, after);
        g_autofree float *second = replica_step_gradients(r, params, cap);
        gboolean logits_same = memcmp(before, after, out * sizeof(float)) == 0;
        gboolean grads_same = memcmp(first, second, n * sizeof(float)) == 0;
        g_test_message("%.40s..., %s, shard %d, chunk %d: logits %s, gradients %s",
                       nets[k], tdm_precision_name(prec), cap, chunk,
                       logits_same ? "same bits" : "DIFFER", grads_same ? "same bits" : "DIFFER");
        g_assert_true(logits_same);
        g_assert_true(grads_same);
        tdm_replica_free(r);
        g_assert_cmpuint(b->bytes_in_use, ==, own);
        tdm_backend_free(b);
      }
}

/* A CUDA bf16 replica whose stem conv and projections keep no output
 * (stem_output_recomputed(), projection_output_recomputed()): after two steps (the
 * first times the engine's candidates), each such conv's output computed again from the
 * stored input with the replica's own call gives its bn's saved statistics bit for bit
 * (the forward read the same tensor), and the stem bn's parameter gradients are its
 * sums over that output and the output gradient the first block's start left in the
 * skip buffer (the backward read it too). Batch 96 at 32 px: the stem's float32-column
 * way and the projections' 1×1 convs of strides 2 and 1, as the engine chooses them. */
static void
test_outputs_recomputed(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  const char *spec = "conv32k3p1,bn,relu,res(conv32k3p1,bn,relu,conv32k3p1,bn),relu,"
                     "res(conv64k3s2p1,bn,relu,conv64k3p1,bn),relu,"
                     "res(conv96k3p1,bn,relu,conv96k3p1,bn),relu,gap,fc10";
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 96, 32);
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  const int n = 96;
  TdmReplica *r = tdm_replica_new_sized(b, net, n, n, data->train, data->test, &error);
  g_assert_no_error(error);
  g_assert_true(r->stores_bf16);
  g_assert_true(stem_output_recomputed(net, 0, TRUE));
  g_assert_null(r->acts[1]);
  size_t count = net->parameter_count;
  g_autofree float *params = g_new(float, count);
  tdm_network_init_parameters(net, 3, params);
  g_autofree float *first = replica_step_gradients(r, params, n);
  g_autofree float *grads = replica_step_gradients(r, params, n);
  replica_params_again(r, params);
  replica_assert_stem_recomputed(r, n, grads);
  g_assert_cmpint(replica_check_projections_recomputed(r, n), ==, 2);
  tdm_replica_free(r);
  tdm_backend_free(b);
}

void
test_cuda_train_add_memory(void)
{
  g_test_add_func("/cuda-train/out-of-memory", test_out_of_memory_is_reported);
  g_test_add_func("/cuda-train/memory-estimate", test_memory_estimate);
  g_test_add_func("/cuda-train/first-run-peak", test_first_run_peak);
  g_test_add_func("/cuda-train/outputs-recomputed", test_outputs_recomputed);
  g_test_add_func("/cuda-train/arena-evaluation-between-steps",
                  test_arena_evaluation_between_steps);
}
