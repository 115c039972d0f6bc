/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-memory.c — the memory estimate (tdm-memory.h) against what is allocated: a
 * replica's and an optimizer's bytes on the CPU backend's counter, exactly; the
 * largest batch that fits against the estimate; the column workspace by its basis; the
 * refusal's message. Whole runs against the counters and the RSS: test-memory-runs.c. */
#include "replica-step.h"
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
};

static gboolean pool_tensor_bf16 (const TdmNetwork *net, int i);

/* Elements per sample of the conv outputs a bf16 run stores as bf16: each conv without
 * a bias or ReLU of its own whose next layer is a bn and whose bn is not followed by a
 * pool that tiles (its kernel its stride, no padding) other than a bf16 one: it would
 * normalize the conv's output as it reads it, in float32 (tdm-replica-private.h's rule,
 * spelt out here from the layers). */
static size_t
bf16_conv_outputs(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i + 1 < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind == TDM_LAYER_CONV && l->bias_count == 0 && !l->fused_relu &&
        net->layers[i + 1].kind == TDM_LAYER_BN &&
        !(i + 2 < net->layer_count && net->layers[i + 2].kind == TDM_LAYER_POOL &&
          net->layers[i + 2].kernel == net->layers[i + 2].stride &&
          net->layers[i + 2].pad == 0 && !pool_tensor_bf16(net, i + 2)))
      sum += (size_t)l->out_h * l->out_w * l->out_c;
  }
  return sum;
}

/* Elements per sample of the projections' conv outputs, which a bf16 run stores as bf16
 * too (their one reader is the projection's bn). */
static size_t
bf16_projection_outputs(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind == TDM_LAYER_RES_END && l->projection)
      sum += (size_t)l->out_h * l->out_w * l->out_c;
  }
  return sum;
}

/* Elements per sample of the bn outputs a bf16 run keeps no buffer for: each bn whose
 * next layer is a conv with columns (not 1×1 of stride 1 and no padding) whose outputs
 * are no more than its reduction; that conv normalizes the bn's input as it builds its
 * columns. */
static size_t
bf16_bn_outputs_to_conv(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i + 1 < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i], *c = &net->layers[i + 1];
    if (l->kind == TDM_LAYER_BN && c->kind == TDM_LAYER_CONV &&
        !(c->kernel == 1 && c->stride == 1 && c->pad == 0) &&
        c->out_c <= c->in_c * c->kernel * c->kernel)
      sum += (size_t)l->out_h * l->out_w * l->out_c;
  }
  return sum;
}

/* Whether a pool layer tiles its input (its window its stride, no padding). */
static gboolean
pool_tiles(const TdmLayer *l)
{
  return l->kernel == l->stride && l->pad == 0;
}

/* Elements per sample of the bn outputs a bf16 run stores as bf16 for a max pool after
 * them that does not tile (its one reader; torchvision's stem). */
static size_t
bf16_bn_outputs_to_pool2d(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i + 1 < net->layer_count; i++)
    if (net->layers[i].kind == TDM_LAYER_BN && net->layers[i + 1].kind == TDM_LAYER_POOL &&
        !pool_tiles(&net->layers[i + 1]))
      sum += (size_t)net->layers[i].out_h * net->layers[i].out_w * net->layers[i].out_c;
  return sum;
}

static gboolean block_tensor_bf16 (const TdmNetwork *net, int i);

/* Whether every reader of layer i's output reads it as bf16 in a bf16 run: the layer
 * after the blocks that start there reads bf16 (a bn not followed by a pool other than
 * a bf16 one, a global pool, or a conv with columns whose outputs are no more than its
 * reduction), and each of those blocks projects its input or ends in bf16 itself
 * (tdm-replica-private.h's rule, spelt out here). */
static gboolean
readers_bf16(const TdmNetwork *net, int i)
{
  int j = i + 1, count = net->layer_count;
  for (; j < count && net->layers[j].kind == TDM_LAYER_RES_BEGIN; j++) {
    int end = net->layers[j].partner;
    if (!net->layers[end].projection && !block_tensor_bf16(net, end))
      return FALSE;
  }
  if (j >= count)
    return FALSE;
  const TdmLayer *reader = &net->layers[j];
  if (reader->kind == TDM_LAYER_BN)
    return !(j + 1 < count && net->layers[j + 1].kind == TDM_LAYER_POOL &&
             !pool_tensor_bf16(net, j + 1));
  if (reader->kind == TDM_LAYER_GLOBAL_AVG || reader->kind == TDM_LAYER_GLOBAL_MAX)
    return TRUE;
  return reader->kind == TDM_LAYER_CONV &&
         !(reader->kernel == 1 && reader->stride == 1 && reader->pad == 0) &&
         reader->out_c <= reader->in_c * reader->kernel * reader->kernel;
}

/* Whether layer i's output, a residual block's end or a bn or a max pool that does not
 * tile just before a block's start, is stored as bf16 in a bf16 run: where its readers
 * take bf16. */
static gboolean
block_tensor_bf16(const TdmNetwork *net, int i)
{
  const TdmLayer *l = &net->layers[i];
  int j = i + 1, count = net->layer_count;
  if (j >= count ||
      !(l->kind == TDM_LAYER_RES_END ||
        ((l->kind == TDM_LAYER_BN || (l->kind == TDM_LAYER_POOL && !pool_tiles(l))) &&
         net->layers[j].kind == TDM_LAYER_RES_BEGIN)))
    return FALSE;
  return readers_bf16(net, i);
}

/* Whether max pool layer i is a bf16 one in a bf16 run: its windows tile (stride =
 * window, no padding), a bn comes before it (normalized as the pool reads it, the bn
 * keeping no output), and its readers take bf16; its output is then stored as bf16. */
static gboolean
pool_tensor_bf16(const TdmNetwork *net, int i)
{
  const TdmLayer *l = &net->layers[i];
  return l->kind == TDM_LAYER_POOL && l->stride == l->kernel && l->pad == 0 && i >= 1 &&
         net->layers[i - 1].kind == TDM_LAYER_BN && readers_bf16(net, i);
}

/* Elements per sample of the bf16 pools' outputs (stored as bf16), and of their bns'
 * outputs (no buffer). */
static size_t
bf16_pool_outputs(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i < net->layer_count; i++)
    if (pool_tensor_bf16(net, i))
      sum += (size_t)net->layers[i].out_h * net->layers[i].out_w * net->layers[i].out_c;
  return sum;
}

/* Elements per sample of the bn outputs (with their ReLU) that end a block whose end has
 * no ReLU and is stored bf16: the end computes them as it adds (no buffer). */
static size_t
bf16_bn_outputs_to_block_end(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i + 1 < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i], *end = &net->layers[i + 1];
    if (l->kind == TDM_LAYER_BN && l->fused_relu && end->kind == TDM_LAYER_RES_END &&
        !end->fused_relu && end->partner < i && block_tensor_bf16(net, i + 1))
      sum += (size_t)l->out_h * l->out_w * l->out_c;
  }
  return sum;
}

static size_t
bf16_bn_outputs_to_pool(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 1; i < net->layer_count; i++)
    if (pool_tensor_bf16(net, i))
      sum += (size_t)net->layers[i].in_h * net->layers[i].in_w * net->layers[i].in_c;
  return sum;
}

/* Elements per sample of those block tensors. */
static size_t
bf16_block_outputs(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i < net->layer_count; i++)
    if (block_tensor_bf16(net, i))
      sum += (size_t)net->layers[i].out_h * net->layers[i].out_w * net->layers[i].out_c;
  return sum;
}

/* Bytes per sample of the skip-gradient buffers a replica keeps: one per level of
 * nesting, the level's largest skip gradient as kept (tdm_replica_layer_buffers()). */
static size_t
skip_bytes(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision)
{
  size_t level[8] = {0}, sum = 0;
  for (int i = 0; i < net->layer_count; i++) {
    TdmLayerBuffers buf = tdm_replica_layer_buffers(net, i, kind, precision);
    if (buf.skip == 0)
      continue;
    int d = net->layers[i].depth;
    g_assert(d >= 1 && d <= (int)G_N_ELEMENTS(level));
    level[d - 1] = MAX(level[d - 1], buf.skip * tdm_dtype_size(buf.skip_type));
  }
  for (guint d = 0; d < G_N_ELEMENTS(level); d++)
    sum += level[d];
  return sum;
}

/* Every buffer a replica and its optimizer allocate is in the estimate, byte for byte. */
static void
test_replica_exact(void)
{
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
       * running them whole: its own figures, allocated as estimated. */
      {
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
      }
      /* A GPU under bf16 keeps the parameters as bf16 too, a conv's output that only
       * the bn after it reads (a projection's too) and the blocks' inputs and outputs
       * in half the bytes, no output for a bn whose conv normalizes as it reads,
       * blocks' skip gradients as bf16 (or a projection's compact) where their
       * gradients are kept so, and gradient buffers as wide as the widest gradient as
       * written (tdm_replica_gradient_bytes()). Its column workspace, in chunks
       * (test_chunked_columns), differs by precision too: compared apart. */
      TdmReplicaBytes gpu32 = tdm_memory_replica(net, TDM_BACKEND_CUDA, TDM_PRECISION_FP32,
                                                 capacity, eval, 200, 90);
      TdmReplicaBytes gpu16 = tdm_memory_replica(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16,
                                                 capacity, eval, 200, 90);
      size_t halves = (size_t)capacity *
                      (bf16_conv_outputs(net) + bf16_projection_outputs(net) +
                       bf16_block_outputs(net) + bf16_pool_outputs(net) +
                       bf16_bn_outputs_to_pool2d(net)) *
                      sizeof(uint16_t);
      size_t elided = (size_t)capacity *
                      (bf16_bn_outputs_to_conv(net) + bf16_bn_outputs_to_pool(net) +
                       bf16_bn_outputs_to_block_end(net)) *
                      sizeof(float);
      size_t skips = (size_t)capacity *
                     (skip_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_FP32) -
                      skip_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16));
      size_t grads = 2 * (size_t)capacity *
                     (tdm_replica_gradient_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_FP32) -
                      tdm_replica_gradient_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16));
      g_assert_cmpuint((gpu16.total - gpu16.columns - gpu16.inference) + halves + elided +
                           skips + grads - (gpu32.total - gpu32.columns - gpu32.inference),
                       ==, MAX(1, net->parameter_count) * sizeof(uint16_t));
      g_assert_cmpuint(gpu32.activations - gpu16.activations, ==, halves + elided);
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
}

/* A bf16 run stores the outputs of ResNet-18's seventeen 3×3 convs as bf16, each read
 * only by its bn, those of its three 1×1 projections, the stem bn's output and the
 * eight blocks' outputs (read by convs with bf16 columns, the blocks' adds, the
 * projections and the global pool): the activations drop by exactly half those
 * outputs' bytes, on both kinds of backend; an fp32 run stores none.
 * The first bn of each block keeps no output in bf16 (the conv after it normalizes as
 * it reads); in every precision the bn that ends a block keeps none (the block's end
 * computes it as it adds). The totals, counted here from the layers. And a CPU
 * replica allocates what is planned. */
static void
test_bf16_activations(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  /* Per sample: the stem and 4 convs at 32×32×64, 4 at 16×16×128, 4 at 8×8×256, 4 at
   * 4×4×512. */
  const size_t outputs = 5 * 65536 + 4 * 32768 + 4 * 16384 + 4 * 8192;
  g_assert_cmpuint(bf16_conv_outputs(net), ==, outputs);
  /* The projections at 16×16×128, 8×8×256, 4×4×512. */
  const size_t projections = 32768 + 16384 + 8192;
  g_assert_cmpuint(bf16_projection_outputs(net), ==, projections);
  g_assert_cmpuint(bf16_bn_outputs_to_conv(net), ==, 245760);
  /* The stem's bn (65,536) and each block's end (2 blocks at each of 64, 32, 16, 8 Ki
   * elements: 245,760). */
  const size_t blocks = 65536 + 245760;
  g_assert_cmpuint(bf16_block_outputs(net), ==, blocks);
  /* Stored float32 in either precision: the input (3,072), the pool and the logits
   * (522); in fp32 each block's first bn (245,760) and the block tensors too. */
  const size_t floats = 3072 + 522, first_bn = 245760;
  for (int kind = TDM_BACKEND_CPU; kind <= TDM_BACKEND_CUDA; kind++) {
    TdmReplicaPlan p32 = tdm_replica_plan(net, kind, TDM_PRECISION_FP32, 512, 100);
    TdmReplicaPlan p16 = tdm_replica_plan(net, kind, TDM_PRECISION_BF16, 512, 100);
    g_assert_cmpuint(p32.activations, ==,
                     512 * (floats + first_bn + blocks + outputs + projections) * sizeof(float));
    g_assert_cmpuint(p16.activations, ==,
                     512 * (floats * sizeof(float) +
                            (outputs + projections + blocks) * sizeof(uint16_t)));
    /* The numbers of bench/NOTES.md: 1,274,040,320 bytes before, 955,273,216 after. */
    g_assert_cmpuint(p16.activations, ==, 955273216);
    g_test_message("resnet18 32 px, batch 512, %s: activations %.2f GiB in fp32, %.2f GiB in "
                   "bf16", kind == TDM_BACKEND_CPU ? "cpu" : "gpu",
                   p32.activations / 1073741824.0, p16.activations / 1073741824.0);
    int stored = 0, folded = 0, elided = 0;
    for (int i = 0; i < net->layer_count; i++) {
      TdmLayerBuffers b32 = tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_FP32);
      TdmLayerBuffers b16 = tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_BF16);
      g_assert_cmpint(b32.output_type, ==, TDM_DTYPE_F32);
      if (net->layers[i].kind != TDM_LAYER_BN)
        g_assert_cmpuint(b32.output, ==, b16.output);
      stored += b16.output_type == TDM_DTYPE_BF16;
      folded += net->layers[i].kind == TDM_LAYER_BN && b32.output == 0 && b16.output == 0;
      elided += net->layers[i].kind == TDM_LAYER_BN && b32.output > 0 && b16.output == 0;
      if (b16.projection > 0)
        g_assert_cmpint(b16.projection_type, ==, TDM_DTYPE_BF16);
    }
    g_assert_cmpint(stored, ==, 17 + 9);
    g_assert_cmpint(folded, ==, 8);
    g_assert_cmpint(elided, ==, 8);
  }
  /* Allocated as planned, at a small batch. */
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 20, 10);
  g_autoptr(TdmNetwork) small = tdm_network_new(resnet18, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  TdmReplica *r = tdm_replica_new_sized(b, small, 4, 3, data->train, data->test, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(b->bytes_in_use, ==,
                   tdm_memory_replica(small, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 4, 3, 20, 10)
                       .total);
  tdm_replica_free(r);
  tdm_backend_free(b);
}

/* A bf16 run keeps residual blocks' gradients as bf16 (tdm-replica-private.h's
 * block_grad_bf16()): the skip-gradient buffer shrinks, counted here from the layers,
 * and the estimate with it; a CPU replica allocates what is planned (test_replica_exact
 * and test_bf16_activations). */
/* The resnet preset in a bf16 run, on Fashion-MNIST's 28×28×1, both kinds of backend:
 * every conv's, pool's and block end's output stored bf16, no bn keeps an output (the
 * conv or the bf16 pool after it normalizes as it reads, the block's end adds its last
 * bn as it computes it), the blocks' skip gradients bf16, and the gradient buffers as
 * wide as the first pool's bf16 input gradient (28×28×64 × 2 bytes, which is also the
 * stem's float32 28×28×32 scratch). The activations, counted here from the layers:
 * the input, those bf16 outputs, the pools' argmax, the global pool's output and argmax,
 * the logits twice (fc, scale). Before this storage (float32 for the pools, their bns
 * and convs, and the bodies' last bns) the plan said 552,935,424 bytes at batch 512;
 * with every activation float32 (TANDEM_BF16_ACTIVATIONS=0) 703,668,224. And a CPU
 * replica allocates what is planned. */
static void
test_bf16_resnet_preset(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new("resnet", 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  size_t halves = 0, argmax = 0, convs = 0, pools = 0, ends = 0;
  for (int kind = TDM_BACKEND_CPU; kind <= TDM_BACKEND_CUDA; kind++) {
    halves = argmax = convs = pools = ends = 0;
    for (int i = 0; i < net->layer_count; i++) {
      const TdmLayer *l = &net->layers[i];
      TdmLayerBuffers buf = tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_BF16);
      size_t out = (size_t)l->out_h * l->out_w * l->out_c;
      switch (l->kind) {
      case TDM_LAYER_CONV:
      case TDM_LAYER_POOL:
      case TDM_LAYER_RES_END:
        g_assert_cmpuint(buf.output, ==, out);
        g_assert_cmpint(buf.output_type, ==, TDM_DTYPE_BF16);
        halves += out;
        convs += l->kind == TDM_LAYER_CONV;
        pools += l->kind == TDM_LAYER_POOL;
        if (l->kind == TDM_LAYER_RES_END) {
          ends++;
          g_assert_cmpint(buf.skip_type, ==, TDM_DTYPE_BF16);
          g_assert_cmpuint(buf.skip, ==, out);
        }
        break;
      case TDM_LAYER_BN:
        g_assert_cmpuint(buf.output, ==, 0);
        break;
      default:
        break;
      }
      argmax += buf.argmax;
    }
    g_assert_cmpuint(convs, ==, 8);
    g_assert_cmpuint(pools, ==, 3);
    g_assert_cmpuint(ends, ==, 2);
    g_assert_cmpuint(tdm_replica_gradient_bytes(net, kind, TDM_PRECISION_BF16), ==,
                     28 * 28 * 64 * sizeof(uint16_t));
    /* The inference pass's widest output as stored: the second conv's, bf16 (the stem
     * conv's float32 output, 28×28×32, is as wide), half the float32 buffers'. */
    g_assert_cmpuint(tdm_replica_infer_bytes(net, TRUE), ==, 28 * 28 * 64 * sizeof(uint16_t));
    g_assert_cmpuint(tdm_replica_infer_floats(net), ==, 28 * 28 * 64);
    size_t sample = 784 * sizeof(float) + halves * sizeof(uint16_t) + argmax * sizeof(int32_t) +
                    (256 + 10 + 10) * sizeof(float);
    g_assert_cmpuint(sample, ==, 446864);
    TdmReplicaPlan p = tdm_replica_plan(net, kind, TDM_PRECISION_BF16, 512, 512);
    g_assert_cmpuint(p.activations, ==, 512 * sample);
    g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
    TdmReplicaPlan wide = tdm_replica_plan(net, kind, TDM_PRECISION_BF16, 512, 512);
    g_unsetenv("TANDEM_BF16_ACTIVATIONS");
    g_assert_cmpuint(wide.activations, ==, 703668224);
    g_test_message("resnet preset, bf16, %s: activations %zu bytes at batch 512 (every one "
                   "float32: %zu), gradient buffers 2 × %zu bytes a sample",
                   kind == TDM_BACKEND_CPU ? "cpu" : "cuda", p.activations, wide.activations,
                   tdm_replica_gradient_bytes(net, kind, TDM_PRECISION_BF16));
  }
  /* A CPU replica allocates what the plan and the estimate say. */
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 40, 20);
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  TdmReplica *r = tdm_replica_new_sized(b, net, 16, 20, data->train, data->test, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(b->bytes_in_use, ==,
                   tdm_memory_replica(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 16, 20, 40, 20)
                       .total);
  tdm_replica_free(r);
  tdm_backend_free(b);
}

static void
test_bf16_block_gradients(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  /* The skip gradients: one buffer for the one level of blocks, the largest block's.
   * Float32 (as TANDEM_BF16_ACTIVATIONS=0 keeps them): the widest block input,
   * 32×32×64 = 65,536 floats, 262,144 bytes a sample. In bf16 every block keeps its
   * gradients as bf16 (each ends in a bn; before block 1 the stem's bn, before the
   * others a block's end with a bf16 output): the five blocks without a projection keep
   * their output gradient (32×32×64 twice, 16×16×128, 8×8×256, 4×4×512) as bf16, at
   * most 131,072 bytes; the three projections their input gradient at the pixels
   * their stride 2 reads, float32 (16×16×64, 8×8×128, 4×4×256), after their bn's
   * gradient in the same buffer, float32 and larger (16×16×128, 8×8×256, 4×4×512:
   * 131,072, 65,536 and 32,768 bytes). So 131,072 bytes a sample: 67,108,864 fewer at
   * batch 512. */
  for (int kind = TDM_BACKEND_CPU; kind <= TDM_BACKEND_CUDA; kind++) {
    int bf16_skips = 0, compact = 0;
    for (int i = 0; i < net->layer_count; i++) {
      TdmLayerBuffers buf = tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_BF16);
      const TdmLayer *l = &net->layers[i];
      if (l->kind != TDM_LAYER_RES_END)
        continue;
      const TdmLayer *begin = &net->layers[l->partner];
      if (l->projection) {
        g_assert_cmpint(buf.skip_type, ==, TDM_DTYPE_F32);
        g_assert_cmpuint(buf.skip, ==, (size_t)(begin->in_h / 2) * (begin->in_w / 2) *
                                           l->out_c);
        compact++;
      } else {
        g_assert_cmpint(buf.skip_type, ==, TDM_DTYPE_BF16);
        g_assert_cmpuint(buf.skip, ==, (size_t)begin->in_h * begin->in_w * begin->in_c);
        bf16_skips++;
      }
    }
    g_assert_cmpint(bf16_skips, ==, 5);
    g_assert_cmpint(compact, ==, 3);
    g_assert_cmpuint(skip_bytes(net, kind, TDM_PRECISION_BF16), ==, 131072);
    g_assert_cmpuint(skip_bytes(net, kind, TDM_PRECISION_FP32), ==, 262144);
    TdmReplicaPlan with = tdm_replica_plan(net, kind, TDM_PRECISION_BF16, 512, 100);
    g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
    g_assert_cmpuint(skip_bytes(net, kind, TDM_PRECISION_BF16), ==, 262144);
    TdmReplicaPlan without = tdm_replica_plan(net, kind, TDM_PRECISION_BF16, 512, 100);
    g_unsetenv("TANDEM_BF16_ACTIVATIONS");
    /* Kept float32, the skip buffer doubles, and so does the gradient region: the
     * stem bn's input gradient (32×32×64 floats, 262,144 bytes) is written while the
     * gradient it comes from is in the gradient region, so a half must hold it. */
    g_assert_cmpuint(without.workspace - with.workspace, ==,
                     67108864 + 2 * 512 * (size_t)(262144 - 131072));
    /* The whole workspace, from the layers: the column workspace, the bns' small
     * buffers, the skip buffer, the gradient region (two halves of 32×32×64 bf16
     * values: the widest gradients, the stem bn's and the first blocks' first convs'
     * input gradients, 32×32×64 floats, are each written while the gradient they come
     * from is in the skip buffer or the workspace, so they take the whole region; the
     * widest written beside something live is a projection's bn output, 16×16×128
     * floats, beside its block's frozen last bn, also 131,072 bytes), the labels and
     * indices, the metrics; no buffer for the projections' bn outputs (the forward
     * writes them into the region's second half). */
    size_t bn_work = 0;
    for (int i = 0; i < net->layer_count; i++)
      bn_work += tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_BF16).bn_work;
    g_assert_cmpuint(with.workspace, ==,
                     with.columns + bn_work * sizeof(float) + 512 * (size_t)131072 +
                         2 * 512 * (size_t)65536 * sizeof(uint16_t) + 2 * 512 * sizeof(int32_t) +
                         sizeof(TdmMetrics));
  }
  /* torchvision's ResNet-18 at 224 px, batch 128: the blocks start after the stem's
   * 3×3 max pool of stride 2 (its backward reads bf16 too). Float32: the widest block
   * input, 56×56×64 = 200,704 floats, 802,816 bytes a sample. In bf16 the identity
   * blocks' largest output gradient, 56×56×64 as bf16, 401,408 bytes; the projections'
   * bn gradients, then their compact input gradients, float32: 28×28×128, 14×14×256,
   * 7×7×512 (401,408, 200,704 and 100,352 bytes). So 401,408 bytes a sample:
   * 51,380,224 fewer at batch 128. And the gradient region: the widest gradient is the
   * stem pool's input's, 112×112×64 = 802,816 values, which the pool writes as bf16 for
   * the stem's bn (1,605,632 bytes; float32: 3,211,264, beside its output gradient in
   * the region), the bn's own goes to its conv's workspace as bf16. The pool reads its
   * output gradient from the first block's skip buffer, so its bf16 input gradient
   * takes the whole region: halves of 802,816 bytes, which also hold the layer1
   * blocks' first convs' float32 input gradients (56×56×64 floats, written while the
   * gradient they come from is in the workspace) across the whole region, and the
   * projections' bn outputs (28×28×128 floats, 401,408 bytes) beside something live:
   * 2 × 128 × (3,211,264 − 802,816) = 616,562,688 bytes fewer than float32. At 32 px
   * the stem bn's input gradient stays float32 (its conv, 27 taps for 64 outputs, has no
   * bf16 columns), 262,144 bytes, but it takes the whole region (it reads the first
   * block's sum from the skip buffer): halves of 131,072 bytes. */
  g_autoptr(TdmNetwork) tv = tdm_network_new("resnet18", 224, 224, 3, 1000, &error);
  g_assert_no_error(error);
  for (int kind = TDM_BACKEND_CPU; kind <= TDM_BACKEND_CUDA; kind++) {
    /* The stem conv's output as bf16: the pool after its bn does not tile. */
    g_assert_cmpint(tv->layers[0].kind, ==, TDM_LAYER_CONV);
    g_assert_cmpint(tv->layers[2].kind, ==, TDM_LAYER_POOL);
    TdmLayerBuffers stem = tdm_replica_layer_buffers(tv, 0, kind, TDM_PRECISION_BF16);
    g_assert_cmpint(stem.output_type, ==, TDM_DTYPE_BF16);
    g_assert_cmpuint(stem.output, ==, 112 * 112 * 64);
    /* Its bn's output too, read by the pool alone, and the pool's, the blocks' input. */
    for (int i = 1; i <= 2; i++)
      g_assert_cmpint(tdm_replica_layer_buffers(tv, i, kind, TDM_PRECISION_BF16).output_type,
                      ==, TDM_DTYPE_BF16);
    g_assert_cmpuint(tdm_replica_gradient_bytes(net, kind, TDM_PRECISION_BF16), ==, 131072);
    g_assert_cmpuint(tdm_replica_gradient_bytes(tv, kind, TDM_PRECISION_FP32), ==, 3211264);
    g_assert_cmpuint(skip_bytes(tv, kind, TDM_PRECISION_FP32), ==, 802816);
    g_assert_cmpuint(skip_bytes(tv, kind, TDM_PRECISION_BF16), ==, 401408);
    TdmReplicaPlan with = tdm_replica_plan(tv, kind, TDM_PRECISION_BF16, 128, 100);
    g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
    TdmReplicaPlan without = tdm_replica_plan(tv, kind, TDM_PRECISION_BF16, 128, 100);
    g_unsetenv("TANDEM_BF16_ACTIVATIONS");
    g_assert_cmpuint(tdm_replica_gradient_bytes(tv, kind, TDM_PRECISION_BF16), ==, 802816);
    g_assert_cmpuint(without.workspace - with.workspace, ==, 51380224 + 616562688);
  }
  /* The estimates of bench/NOTES.md (a GPU, the evaluation chunk as a run picks it). */
  const struct {
    TdmNetwork *net;
    int batch;
    const char *name;
  } rows[] = {{net, 512, "CIFAR ResNet-18, 32 px, batch 512"},
              {tv, 128, "resnet18, 224 px, batch 128"}};
  for (guint k = 0; k < G_N_ELEMENTS(rows); k++) {
    int eval = tdm_replica_eval_capacity(rows[k].net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16,
                                         rows[k].batch, 1000);
    TdmReplicaBytes rb = tdm_memory_replica(rows[k].net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16,
                                            rows[k].batch, eval, 0, 0);
    g_test_message("%s on a GPU, bf16: %zu bytes (workspace %zu, activations %zu, "
                   "inference %zu at chunks of %d)", rows[k].name, (size_t)rb.total,
                   (size_t)rb.workspace, (size_t)rb.activations, (size_t)rb.inference, eval);
    /* bench/NOTES.md's totals: 2,071,893,652 and 4,188,168,512 bytes before this (the
     * columns in chunks, h-ws2); the gradient region 2 × 512 × 131,072 and 2 × 128 ×
     * 802,816 bytes fewer; the inference pass's buffers over the training's
     * activations, which hold them: 3 × 512 × 32×32×64 floats and the views' logits
     * (402,673,664 bytes) and 3 × 128 × 112×112×64 floats, the pool's argmax and the
     * logits (1,336,397,824 bytes) fewer; at 224 px the stem conv's output, its bn's
     * (112×112×64 each) and its pool's (56×56×64) as bf16: 128 × (2 × 802,816 +
     * 200,704) × 2 bytes fewer. */
    static const size_t totals[] = {
        2071893652 - 2 * 512 * (size_t)131072 - 402673664,
        4188168512 - 2 * 128 * (size_t)802816 - 1336397824 -
            128 * (2 * 802816 + 200704) * sizeof(uint16_t)};
    g_assert_cmpuint(rb.inference, ==, 0);
    g_assert_cmpuint(rb.total, ==, totals[k]);
  }
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
  g_assert_cmpuint(tdm_replica_infer_argmax(net), ==, 0);
  g_autoptr(TdmNetwork) nested =
      tdm_network_new("conv8k3p1,res(conv8k3p1,res(conv8k3p1,relu),relu),pool2,fc10", 28, 28, 1,
                      10, &error);
  g_assert_no_error(error);
  g_assert_cmpint(tdm_replica_infer_count(nested), ==, 4);
  g_assert_cmpuint(tdm_replica_infer_argmax(nested), ==, 14 * 14 * 8);
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

/* What a run's buffers took goes back to the system when they are freed, even after
 * glibc has raised its mmap threshold (otherwise each Start/Stop in
 * the window could keep what the run before it freed). */
/* Gradients and the column workspace of one step of `spec` on a CPU replica of batch 16
 * whose column workspace starts at `columns` bytes (0: the plan's upper bound). */
static float *
step_with_columns(const char *spec, TdmPrecision precision, size_t columns,
                  const TdmDatasetPair *data, size_t *bytes_after)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, precision, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_autofree float *params = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 7, params);
  TdmReplica *r = tdm_replica_new_planned(b, net, 16, 16, columns, data->train, data->test,
                                          &error);
  g_assert_no_error(error);
  tdm_backend_upload(b, r->params, params, net->parameter_count * sizeof(float));
  int indices[16];
  for (int i = 0; i < 16; i++)
    indices[i] = i;
  tdm_replica_train_step(r, indices, 16, 1.0f / 16);
  float *grads = g_new(float, net->parameter_count);
  tdm_backend_download(b, grads, r->grads, net->parameter_count * sizeof(float));
  g_assert_true(tdm_backend_check(b, NULL));
  /* The CPU has no convolution engine: fitting leaves its columns as they are. */
  size_t before = r->columns_bytes;
  g_assert_true(tdm_replica_fit_workspace(r, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(r->columns_bytes, ==, before);
  *bytes_after = r->columns_bytes;
  tdm_replica_free(r);
  g_assert_cmpuint(b->bytes_in_use, ==, 0);
  tdm_backend_free(b);
  return grads;
}

/* The workspace a replica without a convolution engine grows to for one training step
 * of `batch` samples, spelt out from the layers: each conv's columns, as bf16 where its
 * outputs are no more than its taps in a bf16 run (then after the bf16 output gradient
 * in backward; the weights' bf16 copy is params16's), else as float32. */
static size_t
own_columns_bytes(const TdmNetwork *net, TdmPrecision precision, int batch)
{
  size_t most = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind != TDM_LAYER_CONV || (l->kernel == 1 && l->stride == 1 && l->pad == 0))
      continue;
    size_t rows = (size_t)batch * l->out_h * l->out_w;
    size_t k = (size_t)l->kernel * l->kernel * l->in_c, out = (size_t)l->out_c;
    size_t bytes = precision == TDM_PRECISION_BF16 && out <= k ? rows * (k + out) * 2
                                                              : rows * k * 4;
    most = MAX(most, bytes);
  }
  return most;
}

/* The column workspace by its basis: the estimate with GPU replicas' workspaces given
 * (a fake table of choices' needs) moves each replica's workspace and total by exactly
 * the difference from the plan's upper bound, and says "chosen"; without a remembered
 * one it is the upper bound, and a run of CPU workers says "columns". A replica made
 * with a given column workspace allocates exactly the plan with it in place of the
 * upper bound (both bases: estimate = allocation), and one made too small grows to
 * what its convolutions need and computes the same bits. */
static void
test_workspace_basis(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->network);
  cfg->network = g_strdup(resnet18);
  cfg->precision = TDM_PRECISION_BF16;
  cfg->batch = 64;
  g_assert_true(tdm_config_set_devices(cfg, "cuda:0,cuda:0", &error));
  g_assert_no_error(error);
  int capacity = tdm_memory_capacity(cfg, 2, 200);
  int eval = tdm_memory_eval_capacity(cfg, net, TDM_BACKEND_CUDA, 2, 200);
  TdmReplicaBytes rb =
      tdm_memory_replica(net, TDM_BACKEND_CUDA, cfg->precision, capacity, eval, 1000, 200);
  g_assert_cmpuint(rb.columns, >, (guint64)8 << 20);
  g_autofree TdmMemoryEvent *upper = g_new0(TdmMemoryEvent, 1);
  g_autofree TdmMemoryEvent *chosen = g_new0(TdmMemoryEvent, 1);
  g_autofree TdmMemoryEvent *recalled = g_new0(TdmMemoryEvent, 1);
  tdm_memory_estimate_with(cfg, net, 1000, 200, NULL, TDM_WORKSPACE_UPPER_BOUND, upper);
  guint64 need[2] = {(guint64)3 << 20, (guint64)5 << 20};
  tdm_memory_estimate_with(cfg, net, 1000, 200, need, TDM_WORKSPACE_CHOSEN, chosen);
  for (int r = 0; r < 2; r++) {
    g_assert_cmpuint(upper->device[r].workspace - chosen->device[r].workspace, ==,
                     rb.columns - need[r]);
    g_assert_cmpuint(upper->device[r].total - chosen->device[r].total, ==,
                     rb.columns - need[r]);
    g_assert_cmpuint(upper->device[r].activations, ==, chosen->device[r].activations);
  }
  g_assert_cmpuint(upper->gpu_total - chosen->gpu_total, ==,
                   2 * rb.columns - need[0] - need[1]);
  g_assert_cmpstr(tdm_workspace_basis_name(upper->workspace_basis), ==, "upper-bound");
  g_assert_cmpstr(tdm_workspace_basis_name(chosen->workspace_basis), ==, "chosen");
  TdmEvent event = {.kind = TDM_EVENT_MEMORY, .memory = *chosen};
  g_autofree char *json = tdm_event_to_json_line(&event);
  g_assert_nonnull(strstr(json, "\"workspace_basis\":\"chosen\""));
  /* No workspace remembered (the cache is kept in the process, and empty): the upper
   * bound, the same bytes as given none. */
  tdm_memory_estimate(cfg, net, 1000, 200, recalled);
  g_assert_cmpint(recalled->workspace_basis, ==, TDM_WORKSPACE_UPPER_BOUND);
  g_assert_cmpuint(recalled->gpu_total, ==, upper->gpu_total);
  g_assert_true(tdm_config_set_devices(cfg, "cpu:2", &error));
  tdm_memory_estimate(cfg, net, 1000, 200, recalled);
  g_assert_cmpint(recalled->workspace_basis, ==, TDM_WORKSPACE_COLUMNS);

  /* Estimate = allocation with the upper bound and with a workspace given. */
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 200, 90);
  static const char *const small[] = {
    "conv4k3p1,relu,conv6k3s2p1,relu,flatten,fc10",
    "conv8k3p1,bn,relu,conv8k3s2p1,bn,relu,res(conv8k3p1,bn),relu,flatten,fc10",
  };
  for (guint s = 0; s < G_N_ELEMENTS(small); s++) {
    g_autoptr(TdmNetwork) n = tdm_network_new(small[s], 28, 28, 1, 10, &error);
    g_assert_no_error(error);
    for (int prec = TDM_PRECISION_FP32; prec <= TDM_PRECISION_BF16; prec += 2) {
      TdmReplicaBytes planned = tdm_memory_replica(n, TDM_BACKEND_CPU, prec, 16, 16, 200, 90);
      g_assert_cmpuint(planned.columns, >, 4096);
      TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, prec, &error);
      g_assert_no_error(error);
      TdmReplica *r = tdm_replica_new_planned(b, n, 16, 16, 4096, data->train, data->test,
                                              &error);
      g_assert_no_error(error);
      g_assert_cmpuint(b->bytes_in_use, ==, planned.total - planned.columns + 4096);
      tdm_replica_free(r);
      r = tdm_replica_new_planned(b, n, 16, 16, 0, data->train, data->test, &error);
      g_assert_no_error(error);
      g_assert_cmpuint(b->bytes_in_use, ==, planned.total);
      tdm_replica_free(r);
      tdm_backend_free(b);

      /* Too small a workspace grows to the convolutions' columns, with the same bits. */
      size_t grown = 0, whole = 0;
      g_autofree float *from_small = step_with_columns(small[s], prec, 256, data, &grown);
      g_autofree float *from_whole = step_with_columns(small[s], prec, 0, data, &whole);
      g_assert_cmpmem(from_small, n->parameter_count * sizeof(float), from_whole,
                      n->parameter_count * sizeof(float));
      g_test_message("%s, %s: workspace grown from 256 to %zu bytes (plan %zu)", small[s],
                     tdm_precision_name(prec), grown, whole);
      g_assert_cmpuint(grown, >, 256);
      g_assert_cmpuint(grown, <=, whole);
      g_assert_cmpuint(grown, ==, own_columns_bytes(n, prec, 16));
      if (prec == TDM_PRECISION_BF16)
        g_assert_cmpuint(grown, <, whole);
    }
  }
}

/* Where a replica's bytes go, by category, for the two rows on a GPU in bf16
 * (bench/NOTES.md's table): parameters, their gradients, the activations backward reads
 * by the kind of layer that writes them, the workspace's parts (the column workspace at
 * its upper bound, the bns' small buffers, the skip buffer, the two gradient buffers,
 * the labels, indices and metrics), the inference buffers. The parts sum to the plan. */
static void
test_plan_breakdown(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) cifar = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) tv = tdm_network_new("resnet18", 224, 224, 3, 1000, &error);
  g_assert_no_error(error);
  const struct {
    TdmNetwork *net;
    int batch;
    const char *name;
  } rows[] = {{cifar, 512, "CIFAR ResNet-18, 32 px, batch 512"},
              {tv, 128, "resnet18, 224 px, batch 128"}};
  static const char *const kinds[] = {"linear", "conv",  "max pool", "relu",    "flatten",
                                      "bn",     "avg pool", "global avg", "global max",
                                      "dropout", "scale", "block start", "block end"};
  for (guint k = 0; k < G_N_ELEMENTS(rows); k++) {
    const TdmNetwork *net = rows[k].net;
    size_t cap = (size_t)rows[k].batch;
    int eval = tdm_replica_eval_capacity(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16,
                                         rows[k].batch, 1000);
    TdmReplicaPlan p = tdm_replica_plan(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16,
                                        rows[k].batch, eval);
    size_t by_kind[G_N_ELEMENTS(kinds)] = {0}, projections = 0, argmax = 0, bn_work = 0;
    for (int i = 0; i < net->layer_count; i++) {
      TdmLayerBuffers buf =
          tdm_replica_layer_buffers(net, i, TDM_BACKEND_CUDA, TDM_PRECISION_BF16);
      by_kind[net->layers[i].kind] += cap * buf.output * tdm_dtype_size(buf.output_type);
      projections += cap * buf.projection * tdm_dtype_size(buf.projection_type);
      argmax += cap * buf.argmax * sizeof(int32_t);
      bn_work += buf.bn_work * sizeof(float);
    }
    size_t input = cap * net->in_h * net->in_w * net->in_c * sizeof(float);
    size_t acts = input + projections + argmax;
    g_test_message("%s, GPU, bf16, evaluation chunk %d: total %zu", rows[k].name, eval,
                   (size_t)(p.parameters + p.gradients + p.activations + p.workspace +
                            p.inference));
    g_test_message("  parameters (+ state, bf16 copy) %zu, their gradients %zu", p.parameters,
                   p.gradients);
    g_test_message("  activations %zu: input %zu, projections' conv outputs %zu, pools' "
                   "argmax %zu", p.activations, input, projections, argmax);
    for (guint j = 0; j < G_N_ELEMENTS(kinds); j++) {
      acts += by_kind[j];
      if (by_kind[j] > 0)
        g_test_message("    outputs of %s layers: %zu", kinds[j], by_kind[j]);
    }
    g_assert_cmpuint(acts, ==, p.activations);
    size_t skips = skip_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16) * cap;
    size_t grads = 2 * cap * tdm_replica_gradient_bytes(net, TDM_BACKEND_CUDA,
                                                        TDM_PRECISION_BF16);
    size_t rest = 2 * MAX(cap, (size_t)eval) * sizeof(int32_t) + sizeof(TdmMetrics);
    g_test_message("  workspace %zu: columns (upper bound) %zu, bn buffers %zu, skip "
                   "buffer %zu, gradient buffers %zu (2 x %zu a sample), labels/indices/"
                   "metrics %zu", p.workspace, p.columns, bn_work, skips, grads,
                   grads / cap / 2, rest);
    g_assert_cmpuint(p.columns + bn_work + skips + grads + rest, ==, p.workspace);
    g_test_message("  inference %zu", p.inference);
  }
}

/* The activation arena: the inference pass's buffers lie over the training's
 * activations. An evaluation between two steps changes neither the next step (its
 * gradients the bits of a step after a step) nor an evaluation's logits (the bits of an
 * evaluation before any step), fp32 and bf16, with an evaluation chunk larger than the
 * training shard (the arena then the inference's size) and smaller (the training's). */
static void
test_arena_evaluation_between_steps(void)
{
  static const char *const nets[] = {
    "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
    "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
    "conv8k3s2p1,bn,relu,pool3s2p1,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,pool2,flatten,"
    "fc10",
  };
  static const int shapes[][2] = {{8, 40}, {16, 5}}; /* capacity, evaluation chunk */
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 40);
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++)
    for (int prec = TDM_PRECISION_FP32; prec <= TDM_PRECISION_BF16; prec += 2)
      for (guint s = 0; s < G_N_ELEMENTS(shapes); s++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(TdmNetwork) net = tdm_network_new(nets[k], 28, 28, 1, 10, &error);
        g_assert_no_error(error);
        TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, prec, &error);
        g_assert_no_error(error);
        int cap = shapes[s][0], chunk = shapes[s][1];
        TdmReplica *r = tdm_replica_new_sized(b, net, cap, chunk, data->train, data->test,
                                              &error);
        g_assert_no_error(error);
        TdmReplicaPlan p = tdm_replica_plan(net, TDM_BACKEND_CPU, prec, cap, chunk);
        g_assert_cmpuint(p.activations + p.inference, ==,
                         MAX(p.activations, tdm_replica_infer_arena_bytes(
                                              net, tdm_replica_stores_bf16(TDM_BACKEND_CPU, prec), chunk)));
        size_t n = net->parameter_count, out = (size_t)chunk * net->classes;
        g_autofree float *params = g_new(float, n);
        tdm_network_init_parameters(net, 3, params);
        g_autofree float *first_logits = g_new(float, out);
        g_autofree float *again_logits = g_new(float, out);
        size_t ns = MAX(1, net->state_count);
        g_autofree float *state = g_new(float, ns);
        tdm_backend_upload(b, r->params, params, n * sizeof(float));
        tdm_backend_download(b, state, r->state, ns * sizeof(float));
        tdm_replica_predict(r, 0, chunk, first_logits);
        g_autofree float *first = replica_step_gradients(r, params, cap);
        g_autofree float *second = replica_step_gradients(r, params, cap);
        /* The steps moved the running statistics, which an evaluation reads: back to
         * where the first evaluation found them. */
        tdm_backend_upload(b, r->state, state, ns * sizeof(float));
        tdm_replica_predict(r, 0, chunk, again_logits);
        g_autofree float *after = replica_step_gradients(r, params, cap);
        g_assert_cmpmem(first_logits, out * sizeof(float), again_logits, out * sizeof(float));
        g_assert_cmpmem(first, n * sizeof(float), second, n * sizeof(float));
        g_assert_cmpmem(second, n * sizeof(float), after, n * sizeof(float));
        tdm_replica_free(r);
        g_assert_cmpuint(b->bytes_in_use, ==, 0);
        tdm_backend_free(b);
      }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* The convolution engine's choices and workspaces stay in the process, empty. */
  g_setenv("TANDEM_CONV_CACHE", "0", TRUE);
  g_test_add_func("/memory/replica-exact", test_replica_exact);
  g_test_add_func("/memory/inference-buffers", test_inference_buffers);
  g_test_add_func("/memory/bf16-activations", test_bf16_activations);
  g_test_add_func("/memory/bf16-block-gradients", test_bf16_block_gradients);
  g_test_add_func("/memory/bf16-resnet-preset", test_bf16_resnet_preset);
  g_test_add_func("/memory/inference-matches-training-buffers",
                  test_inference_matches_training_buffers);
  g_test_add_func("/memory/fits", test_fits);
  g_test_add_func("/memory/largest-batch", test_largest_batch);
  g_test_add_func("/memory/check-host", test_check_host);
  g_test_add_func("/memory/workspace-basis", test_workspace_basis);
  g_test_add_func("/memory/plan-breakdown", test_plan_breakdown);
  g_test_add_func("/memory/arena-evaluation-between-steps",
                  test_arena_evaluation_between_steps);
  return g_test_run();
}
