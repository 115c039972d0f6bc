/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-memory.c — the memory estimate (tdm-memory.h) against what is allocated: a
 * replica's and an optimizer's bytes on the CPU backend's counter, exactly; the
 * inference pass's buffers; the largest batch that fits against the estimate; the
 * refusal's message. Its parts: what a bf16 run stores as bf16 (test-memory-bf16.c);
 * the column workspace by its basis, the plan's breakdown and the activation arena
 * (test-memory-workspace.c); ResNet-50's bottlenecks (test-memory-bottleneck.c). Whole
 * runs against the counters and the RSS: test-memory-runs.c. */
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
#include "test-memory.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char *const specs[] = {
  "mlp",
  "cnn",
  "conv8k3p1,relu,pool2,flatten,fc10",          /* a fused first conv, a flatten */
  "conv4k3,relu,conv8k3p1,relu,pool2,fc32,fc10", /* first conv not fused */
  "conv40k3p1,pool2,fc10",                       /* too many outputs to fuse, no relu */
  "resnet",                                      /* BN, residual blocks, projections */
  "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv16k3s2p1,bn),avg2,drop0.5,gmp,fc10",
  /* torchvision's stem and blocks in small: bf16 gradients through the pool */
  "conv8k3s2p1,bn,relu,pool3s2p1,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
  "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
  /* torchvision's bottlenecks in small: 1×1 convs (the bns before them normalized as
   * they read), projections of strides 1 and 2, bf16 block outputs and gradients */
  "conv8k3p1,bn,relu,pool3s2p1,bottleneck4,bottleneck4,bottleneck8s2,gap,fc10",
};

/* Every buffer a replica and its optimizer allocate is in the estimate, byte for byte. */
static void
test_replica_exact(void)
{
  /* The one window of the gradient buffers, apart from the arena, as derived here (the
   * windows: test_gradient_windows). */
  g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 200, 90);
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  cfg->optimizer = TDM_OPTIMIZER_ADAM;
  for (guint s = 0; s < G_N_ELEMENTS(specs); s++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmNetwork) net = tdm_network_new(specs[s], 28, 28, 1, 10, &error);
    g_assert_no_error(error);
    TdmBackend *b = tdm_backend_cpu_new(&error);
    g_assert_no_error(error);
    /* Evaluation chunks smaller, equal and larger than the shard. */
    static const int evals[][2] = {{1, 1}, {1, 7}, {37, 37}, {37, 5}};
    for (guint c = 0; c < G_N_ELEMENTS(evals); c++) {
      int capacity = evals[c][0], eval = evals[c][1];
      TdmReplica *r = tdm_replica_new_sized(b, net, capacity, eval, data->train, data->test,
                                            &error);
      g_assert_no_error(error);
      TdmReplicaBytes rb = tdm_memory_replica(net, TDM_BACKEND_CPU, TDM_PRECISION_FP32,
                                              capacity, eval, 200, 90);
      g_assert_cmpuint(b->bytes_in_use, ==, rb.total);
      g_assert_cmpuint(tdm_replica_bytes_needed(net, TDM_BACKEND_CPU, TDM_PRECISION_FP32,
                                                capacity, eval, data->train, data->test), ==,
                       rb.total);
      /* A CPU worker under bf16 composes its convolutions from bf16 columns instead of
       * running them whole: its own figures, allocated as estimated, with the bn store
       * as this file plans (none) and as a run does by default (the plan's choice). */
      for (int store = 0; store < 2; store++) {
        if (store == 1)
          g_unsetenv("TANDEM_BN_STORE");
        TdmBackend *b16 = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
        g_assert_no_error(error);
        TdmReplica *r16 = tdm_replica_new_sized(b16, net, capacity, eval, data->train,
                                                data->test, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(b16->bytes_in_use, ==,
                         tdm_memory_replica(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, capacity,
                                            eval, 200, 90).total);
        tdm_replica_free(r16);
        tdm_backend_free(b16);
        g_assert_true(g_setenv("TANDEM_BN_STORE", "0", TRUE));
      }
      /* A GPU under bf16 keeps the parameters as bf16 too, a conv's output that only
       * the bn after it reads (a projection's too) and the blocks' inputs and outputs
       * in half the bytes, no output for a bn whose conv or pool normalizes as it reads,
       * blocks' skip gradients as bf16 (or a projection's compact) where their
       * gradients are kept so, and gradient buffers as wide as the widest gradient as
       * written (tdm_replica_gradient_bytes()); it adds the blocks' ReLU masks as bits
       * beside their bf16 outputs. Its column workspace, in chunks
       * (test_chunked_columns), differs by precision too: compared apart. */
      TdmReplicaBytes gpu32 = tdm_memory_replica(net, TDM_BACKEND_CUDA, TDM_PRECISION_FP32,
                                                 capacity, eval, 200, 90);
      TdmReplicaBytes gpu16 = tdm_memory_replica(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16,
                                                 capacity, eval, 200, 90);
      size_t halves = (size_t)capacity *
                      (bf16_conv_outputs(net) + bf16_projection_outputs(net) +
                       bf16_block_outputs(net) + bf16_pool_outputs(net)) *
                      sizeof(uint16_t);
      size_t elided =
          (size_t)capacity *
              (bf16_bn_outputs_to_conv(net) + bf16_bn_outputs_to_pool(net) +
               bf16_bn_outputs_to_pool2d(net) + bf16_bn_outputs_to_block_end(net)) *
              sizeof(float) +
          (size_t)capacity *
              (bf16_stem_outputs_recomputed(net) + bf16_projection_outputs_recomputed(net)) *
              sizeof(uint16_t);
      size_t skips = (size_t)capacity *
                     (skip_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_FP32) -
                      skip_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16));
      size_t grads = 2 * (size_t)capacity *
                     (tdm_replica_gradient_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_FP32) -
                      tdm_replica_gradient_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16));
      size_t bits = bf16_relu_bits_bytes(net, (size_t)capacity);
      g_assert_cmpuint((gpu16.total - gpu16.columns - gpu16.inference) + halves + elided +
                           skips + grads - (gpu32.total - gpu32.columns - gpu32.inference),
                       ==, MAX(1, net->parameter_count) * sizeof(uint16_t) + bits);
      g_assert_cmpuint(gpu32.activations - gpu16.activations, ==, halves + elided - bits);
      /* The inference pass's buffers lie over the training's activations (one arena),
       * counted only where they need more. */
      TdmReplicaBytes all[] = {rb, gpu32, gpu16};
      const gboolean stores16[] = {FALSE, FALSE,
                                   tdm_replica_stores_bf16(TDM_BACKEND_CUDA, TDM_PRECISION_BF16)};
      for (guint k = 0; k < G_N_ELEMENTS(all); k++)
        g_assert_cmpuint(
            all[k].activations + all[k].inference, ==,
            MAX(all[k].activations, tdm_replica_infer_arena_bytes(net, stores16[k], eval)));
      /* A CPU replica reads the host's datasets; a GPU keeps a copy. */
      g_assert_cmpuint(rb.dataset, ==, 0);
      g_assert_cmpuint(gpu32.dataset, ==, 200 * 785 + 90 * 785);
      TdmOptimizer *opt = tdm_optimizer_new(b, cfg, net->parameter_count, NULL, &error);
      g_assert_no_error(error);
      g_assert_cmpuint(b->bytes_in_use - rb.total, ==,
                       2 * net->parameter_count * sizeof(float) + TDM_OPTIMIZER_RATES_BYTES(0));
      tdm_optimizer_free(opt);
      tdm_replica_free(r);
      g_assert_cmpuint(b->bytes_in_use, ==, 0);
    }
    tdm_backend_free(b);
  }
  g_unsetenv("TANDEM_GRADIENT_WINDOWS");
}

/* The inference pass keeps three buffers of the widest activation for a network of
 * single-level blocks, four for blocks in blocks; none of the training's. Its memory
 * grows with the widest layer, never with the depth: ResNet-18 needs no more than a
 * plain conv of the same width. They lie over the training's activations (one arena):
 * the plan counts what they need beyond them. */
static void
test_inference_buffers(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpint(tdm_replica_infer_count(net), ==, 3);
  g_assert_cmpuint(tdm_replica_infer_floats(net), ==, 32 * 32 * 64);
  g_assert_cmpuint(tdm_replica_infer_argmax_bytes(net), ==, 0);
  g_autoptr(TdmNetwork) nested =
      tdm_network_new("conv8k3p1,res(conv8k3p1,res(conv8k3p1,relu),relu),pool2,fc10", 28, 28, 1,
                      10, &error);
  g_assert_no_error(error);
  g_assert_cmpint(tdm_replica_infer_count(nested), ==, 4);
  /* A tiling pool's int32 indices; a 3×3 window's position in a byte (maxpool2d's). */
  g_assert_cmpuint(tdm_replica_infer_argmax_bytes(nested), ==, 14 * 14 * 8 * sizeof(int32_t));
  g_autoptr(TdmNetwork) windowed =
      tdm_network_new("conv8k3p1,pool3s2p1,conv4k3p1,pool17s1p8,fc10", 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(tdm_replica_infer_argmax_bytes(windowed), ==,
                   MAX(14 * 14 * 8 * sizeof(uint8_t), 14 * 14 * 4 * sizeof(int32_t)));
  g_autoptr(TdmNetwork) plain = tdm_network_new("conv64k3p1,relu,gap,fc10", 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  for (int kind = TDM_BACKEND_CPU; kind <= TDM_BACKEND_CUDA; kind++) {
    TdmReplicaPlan deep = tdm_replica_plan(net, kind, TDM_PRECISION_FP32, 8, 100);
    TdmReplicaPlan flat = tdm_replica_plan(plain, kind, TDM_PRECISION_FP32, 8, 100);
    g_assert_cmpuint(tdm_replica_infer_arena_bytes(net, FALSE, 100), ==,
                     tdm_replica_infer_arena_bytes(plain, FALSE, 100) + 100 * 32 * 32 * 64 * sizeof(float));
    g_assert_cmpuint(deep.inference, ==, tdm_replica_infer_arena_bytes(net, FALSE, 100) - deep.activations);
    g_assert_cmpuint(flat.inference, ==, tdm_replica_infer_arena_bytes(plain, FALSE, 100) - flat.activations);
  }
  /* The chunk: the configured one where it fits, smaller where the budget says so. */
  g_assert_cmpint(tdm_replica_eval_capacity(plain, TDM_BACKEND_CPU, TDM_PRECISION_FP32, 8, 100),
                  ==, 100);
  int chunk = tdm_replica_eval_capacity(net, TDM_BACKEND_CPU, TDM_PRECISION_FP32, 8, 1000);
  g_assert_cmpint(chunk, >=, 1);
  g_assert_cmpint(chunk, <, 1000);
  TdmReplicaPlan train = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_FP32, 8, 0);
  size_t budget = MAX(train.activations, TDM_EVAL_BUDGET_FLOOR);
  TdmReplicaPlan at = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_FP32, 8, chunk);
  TdmReplicaPlan over = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_FP32, 8, chunk + 1);
  g_test_message("resnet18 on cpu, batch 8: evaluation chunk %d (budget %.1f MiB)", chunk,
                 budget / 1048576.0);
  g_assert_cmpuint(tdm_replica_infer_arena_bytes(net, FALSE, chunk) + at.workspace - train.workspace, <=,
                   budget);
  g_assert_cmpuint(at.workspace - train.workspace, <=, TDM_EVAL_BUDGET_FLOOR);
  g_assert_true(tdm_replica_infer_arena_bytes(net, FALSE, chunk + 1) + over.workspace - train.workspace >
                    budget ||
                over.workspace - train.workspace > TDM_EVAL_BUDGET_FLOOR);

  /* The GPU sizes in bf16 (its old figures: 24.9 GB at 32 px, 99 GB at 64 px,
   * a refusal for "183.2 GiB" at 128 px): every one now fits in a fraction of an H200,
   * and evaluation adds no more than training holds. */
  static const int sizes[][2] = {{32, 512}, {64, 256}, {128, 128}};
  for (guint s = 0; s < G_N_ELEMENTS(sizes); s++) {
    int px = sizes[s][0], batch = sizes[s][1];
    g_autoptr(TdmNetwork) big = tdm_network_new(resnet18, px, px, 3, 10, &error);
    g_assert_no_error(error);
    int eval = tdm_replica_eval_capacity(big, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, batch, 1000);
    TdmReplicaBytes rb = tdm_memory_replica(big, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, batch,
                                            eval, 0, 0);
    g_test_message("resnet18 %d px, batch %d on a GPU, bf16: %.2f GiB (activations %.2f, "
                   "workspace %.2f, inference %.2f at chunks of %d)", px, batch,
                   rb.total / 1073741824.0, rb.activations / 1073741824.0,
                   rb.workspace / 1073741824.0, rb.inference / 1073741824.0, eval);
    g_assert_cmpuint(rb.total, <, (guint64)24 << 30);
    g_assert_cmpuint(rb.inference, <=, MAX(rb.activations, TDM_EVAL_BUDGET_FLOOR));
  }
}

/* Logits of samples [0, count) of data through the training's buffers, in chunks of
 * `chunk`: forward passes in evaluation mode, as evaluation ran before it had buffers
 * of its own. */
static float *
logits_in_training_buffers(TdmBackend *b, const TdmNetwork *net, const TdmDataset *data,
                           int count, int chunk, const float *params, const float *state)
{
  g_autoptr(GError) error = NULL;
  TdmReplica *r = tdm_replica_new_sized(b, net, chunk, 1, data, data, &error);
  g_assert_no_error(error);
  tdm_backend_upload(b, r->params, params, net->parameter_count * sizeof(float));
  tdm_backend_upload(b, r->state, state, net->state_count * sizeof(float));
  float *logits = g_new(float, (size_t)count * net->classes);
  g_autofree int32_t *indices = g_new(int32_t, count);
  for (int i = 0; i < count; i++)
    indices[i] = i;
  for (int first = 0; first < count; first += chunk) {
    int n = MIN(chunk, count - first);
    tdm_backend_upload(b, r->indices, indices + first, (size_t)n * sizeof(int32_t));
    tdm_backend_gather(b, r->acts[0], r->labels, r->test_images, r->test_labels, r->indices, n,
                       r->sample_size, 1.0f / 255.0f);
    tdm_replica_forward(r, n, MODE_EVAL);
    tdm_backend_download(b, logits + (size_t)first * net->classes, r->acts[net->layer_count],
                         (size_t)n * net->classes * sizeof(float));
  }
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_replica_free(r);
  return logits;
}

/* The same through the inference pass, in chunks of `chunk`, beside a training shard
 * of 3. */
static float *
logits_in_inference_buffers(TdmBackend *b, const TdmNetwork *net, const TdmDataset *data,
                            int count, int chunk, const float *params, const float *state)
{
  g_autoptr(GError) error = NULL;
  TdmReplica *r = tdm_replica_new_sized(b, net, 3, chunk, data, data, &error);
  g_assert_no_error(error);
  tdm_backend_upload(b, r->params, params, net->parameter_count * sizeof(float));
  tdm_backend_upload(b, r->state, state, net->state_count * sizeof(float));
  float *logits = g_new(float, (size_t)count * net->classes);
  for (int first = 0; first < count; first += chunk)
    tdm_replica_predict(r, first, MIN(chunk, count - first),
                        logits + (size_t)first * net->classes);
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_replica_free(r);
  return logits;
}

/* Evaluation on its rotating buffers computes what the training's buffers computed, for
 * to the bit, for every kind of layer the buffers are laid out for: a fused first conv + pool, blocks
 * with and without projections, blocks in blocks, flatten, pools with argmax,
 * dropout, BN. */
static void
test_inference_matches_training_buffers(void)
{
  static const char *const nets[] = {
    "cnn",
    "conv8k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,"
    "res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,avg2,conv16k3p1,bn,relu,gmp,fc32,bn,relu,"
    "drop0.25,fc10",
    "conv8k3p1,relu,res(conv8k3p1,bn,res(conv8k3p1,relu,conv8k3p1),relu,"
    "res(conv16k1s2,bn)),pool2,flatten,fc10",
    "conv8k3p1,bn,relu,pool2,res(conv8k3p1,bn,relu,conv8k3p1,bn,relu),gap,fc10nb,scale0.125",
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) rng = g_rand_new_with_seed(11);
  const int count = 23;
  g_autoptr(TdmDataset) data = tdm_dataset_new("inference", count, 12, 12, 3, 10);
  for (int i = 0; i < count * 12 * 12 * 3; i++)
    data->images[i] = (uint8_t)g_rand_int_range(rng, 0, 256);
  for (int i = 0; i < count; i++)
    data->labels[i] = (uint8_t)g_rand_int_range(rng, 0, 10);
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++) {
    g_autoptr(TdmNetwork) net = tdm_network_new(nets[k], 12, 12, 3, 10, &error);
    g_assert_no_error(error);
    g_autofree float *params = g_new(float, MAX(1, net->parameter_count));
    tdm_network_init_parameters(net, 3, params);
    g_autofree float *state = g_new(float, MAX(1, net->state_count));
    for (size_t i = 0; i < net->state_count; i++)
      state[i] = (float)g_rand_double_range(rng, 0.2, 1.5);
    for (int chunk = 1; chunk <= 23; chunk += 11) {
      g_autofree float *want =
          logits_in_training_buffers(b, net, data, count, chunk, params, state);
      g_autofree float *got =
          logits_in_inference_buffers(b, net, data, count, chunk, params, state);
      /* The same operations on the same shapes: the same bits. */
      g_assert_cmpmem(got, (size_t)count * net->classes * sizeof(float), want,
                      (size_t)count * net->classes * sizeof(float));
    }
    g_assert_cmpuint(b->bytes_in_use, ==, 0);
  }
  tdm_backend_free(b);
}

static void
test_fits(void)
{
  TdmMemoryEvent *e = g_new0(TdmMemoryEvent, 1);
  e->replicas = 2;
  e->device[0].host = TRUE;
  e->device[0].total = 500;
  e->device[1].total = 1000;
  e->host_total = 2000;

  g_assert_true(tdm_memory_fits(e, 0, 0));
  g_assert_true(tdm_memory_fits(e, 2000, 1000));
  g_assert_false(tdm_memory_fits(e, 1999, 1000));
  g_assert_false(tdm_memory_fits(e, 2000, 999));
  g_assert_true(tdm_memory_fits(e, 0, 1000));
  g_assert_false(tdm_memory_fits(e, 0, 999));
  /* The CPU worker's 500 bytes are not held against a GPU budget below them. */
  e->device[1].host = TRUE;
  g_assert_true(tdm_memory_fits(e, 2000, 100));
  /* A replica past the count the estimate has is not looked at. */
  e->replicas = 1;
  e->device[1].host = FALSE;
  g_assert_true(tdm_memory_fits(e, 2000, 100));
  g_free(e);
}

/* The largest batch that fits is where the estimate crosses the budget. */
static void
test_largest_batch(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new("cnn", 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_assert_true(tdm_config_set_devices(cfg, "cpu:2", NULL));
  cfg->eval_batch = 100;
  TdmMemoryEvent *e = g_new(TdmMemoryEvent, 1);

  cfg->batch = 3000;
  tdm_memory_estimate(cfg, net, 60000, 10000, e);
  guint64 budget = e->host_total + 12345;
  int largest = tdm_memory_largest_batch(cfg, net, 60000, 10000, budget, 0);
  g_assert_cmpint(largest, >=, 3000);
  cfg->batch = largest;
  tdm_memory_estimate(cfg, net, 60000, 10000, e);
  g_assert_cmpuint(e->host_total, <=, budget);
  cfg->batch = largest + 1;
  tdm_memory_estimate(cfg, net, 60000, 10000, e);
  g_assert_cmpuint(e->host_total, >, budget);

  /* No budget: every batch the dataset allows; too small a budget: none. */
  g_assert_cmpint(tdm_memory_largest_batch(cfg, net, 60000, 10000, 0, 0), ==, 60000);
  g_assert_cmpint(tdm_memory_largest_batch(cfg, net, 60000, 10000, 1 << 20, 0), ==, 0);

  /* A GPU budget limits the GPU's share only. */
  g_assert_true(tdm_config_set_devices(cfg, "cuda:0,cuda:0", NULL));
  cfg->batch = 1000;
  tdm_memory_estimate(cfg, net, 60000, 10000, e);
  g_assert_cmpuint(e->host_devices, ==, 0);
  g_assert_cmpuint(e->gpu_total, ==, e->device[0].total + e->device[1].total);
  /* Replicas on one GPU copy directly: no staging buffers. */
  g_assert_cmpuint(e->device[0].communication, ==, 0);
  g_assert_cmpuint(e->device[0].optimizer, ==,
                   2 * e->device[0].gradients + TDM_OPTIMIZER_RATES_BYTES(0));
  guint64 gpu_budget = e->device[0].total;
  int gpu_largest = tdm_memory_largest_batch(cfg, net, 60000, 10000, 0, gpu_budget);
  g_assert_cmpint(gpu_largest, >=, 1000);
  g_assert_cmpint(gpu_largest, <, 60000);
  cfg->batch = gpu_largest;
  tdm_memory_estimate(cfg, net, 60000, 10000, e);
  g_assert_cmpuint(e->device[0].total, <=, gpu_budget);
  cfg->batch = gpu_largest + 1;
  tdm_memory_estimate(cfg, net, 60000, 10000, e);
  g_assert_cmpuint(e->device[0].total, >, gpu_budget);

  /* Two GPUs: NCCL's buffers are its own; without NCCL the peer communicator may
   * stage through 4 MiB on each. With `main` only the main one holds Adam's state. */
  g_assert_true(tdm_config_set_devices(cfg, "cuda:0,cuda:1", NULL));
  cfg->strategy = TDM_STRATEGY_MAIN;
  cfg->main_replica = 1;
  tdm_memory_estimate(cfg, net, 60000, 10000, e);
  g_assert_cmpuint(e->device[0].communication, ==, TDM_HAVE_NCCL ? 0 : 4 << 20);
  g_assert_cmpuint(e->device[0].optimizer, ==, 0);
  g_assert_cmpuint(e->device[1].optimizer, ==,
                   2 * e->device[1].gradients + TDM_OPTIMIZER_RATES_BYTES(0));
  g_assert_cmpuint(e->device[1].total - e->device[0].total, ==, e->device[1].optimizer);
  g_free(e);
}

/* The refusal names both figures and the limit; runs that fit pass. */
static void
test_check_host(void)
{
  TdmMemoryEvent *e = g_new0(TdmMemoryEvent, 1);
  e->host_total = (guint64)24051816857; /* 22.4 GiB */
  e->host_dataset = 1000;
  e->batch = 100;
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_memory_check_host(e, (guint64)19434830234, 1000, "available memory",
                                       &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull(strstr(error->message, "needs 22.4 GiB, 18.1 GiB available"));
  g_assert_true(tdm_memory_check_host(e, e->host_total - 1000, 1000, NULL, NULL));
  g_assert_true(tdm_memory_host_available(NULL) > 0);
  g_free(e);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* The convolution engine's choices and workspaces stay in the process, empty. */
  g_setenv("TANDEM_CONV_CACHE", "0", TRUE);
  /* The layouts these files sum are those of the plan that stores no bn output for its
   * conv; by default a bf16 run stores some, as many as its plan allows
   * (test-bn-store.c's /bn-store/auto), which /memory/replica-exact allocates too. */
  g_setenv("TANDEM_BN_STORE", "0", TRUE);
  g_test_add_func("/memory/replica-exact", test_replica_exact);
  g_test_add_func("/memory/inference-buffers", test_inference_buffers);
  test_memory_add_bf16();
  g_test_add_func("/memory/inference-matches-training-buffers",
                  test_inference_matches_training_buffers);
  g_test_add_func("/memory/fits", test_fits);
  g_test_add_func("/memory/largest-batch", test_largest_batch);
  g_test_add_func("/memory/check-host", test_check_host);
  test_memory_add_workspace();
  test_memory_add_bottleneck();
  test_memory_add_skip();
  return g_test_run();
}
