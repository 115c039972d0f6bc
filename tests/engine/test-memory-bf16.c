/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-memory-bf16.c — part of test-memory: what a bf16 run stores as bf16, against
 * the plan. The convs', blocks', pools' and bns' outputs it keeps as bf16 halve their
 * activations; ResNet-18 and the resnet preset at their sizes; residual blocks'
 * gradients kept as bf16 shrink the skip-gradient buffer; a stem of few channels keeps
 * its float32 scratch in its workspace. Each counted here from the layers
 * (test-memory.h), and a CPU replica allocates what is planned. */
#include "replica-recomputed.h"
#include "replica-step.h"
#include "resnet18-cifar.h"
#include "tdm-backend.h"
#include "tdm-bf16.h"
#include "tdm-dataset.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"
#include "tdm-replica.h"
#include "test-memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A bf16 run stores the outputs of ResNet-18's seventeen 3×3 convs as bf16, each read
 * only by its bn, those of its three 1×1 projections, the stem bn's output and the
 * eight blocks' outputs (read by convs with bf16 columns, the blocks' adds, the
 * projections and the global pool): the activations drop by exactly half those
 * outputs' bytes, on both kinds of backend, but the stem conv's, which it keeps none of
 * (computed again for its bn's backward); an fp32 run stores none.
 * The first bn of each block keeps no output in bf16 (the conv after it normalizes as
 * it reads); in every precision the bn that ends a block keeps none (the block's end
 * computes it as it adds). The totals, counted here from the layers, with one window
 * of the gradient buffers (TANDEM_GRADIENT_WINDOWS=0: the arena holds these pieces
 * alone; with two, its low window runs past them at this batch, /memory/gradient-windows).
 * And a CPU replica allocates what is planned. */
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
    g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
    TdmReplicaPlan p16 = tdm_replica_plan(net, kind, TDM_PRECISION_BF16, 512, 100);
    g_unsetenv("TANDEM_GRADIENT_WINDOWS");
    g_assert_cmpuint(p32.activations, ==,
                     512 * (floats + first_bn + blocks + outputs + projections) * sizeof(float));
    /* The stem's output (65,536) is not kept: computed again for its bn's backward
     * (stem_output_recomputed(), /memory/stem-output-recomputed). */
    g_assert_cmpuint(bf16_stem_outputs_recomputed(net), ==, 65536);
    /* Nor the projections' conv outputs (57,344): computed again for their bns'
     * backward (projection_output_recomputed()). */
    g_assert_cmpuint(bf16_projection_outputs_recomputed(net), ==, projections);
    /* The eight block ends' ReLU masks as bits beside their bf16 outputs (245,760
     * elements a sample), for backward. */
    const size_t masks = 512 * (size_t)245760 / 8;
    g_assert_cmpuint(bf16_relu_bits_bytes(net, 512), ==, masks);
    g_assert_cmpuint(
        p16.activations, ==,
        512 * (floats * sizeof(float) + (outputs - 65536 + blocks) * sizeof(uint16_t)) + masks);
    /* The numbers of bench/NOTES.md: 1,274,040,320 bytes before, 955,273,216 after;
     * 888,164,352 without the stem's output, 829,444,096 without the projections';
     * 845,172,736 with the masks (15,728,640 more). */
    g_assert_cmpuint(p16.activations, ==, 845172736);
    g_test_message("resnet18 32 px, batch 512, %s: activations %.2f GiB in fp32, %.2f GiB in "
                   "bf16", kind == TDM_BACKEND_CPU ? "cpu" : "gpu",
                   p32.activations / 1073741824.0, p16.activations / 1073741824.0);
    int stored = 0, folded = 0, elided = 0;
    for (int i = 0; i < net->layer_count; i++) {
      TdmLayerBuffers b32 = tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_FP32);
      TdmLayerBuffers b16 = tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_BF16);
      g_assert_cmpint(b32.output_type, ==, TDM_DTYPE_F32);
      if (i == 0)
        g_assert_cmpuint(b16.output, ==, 0); /* stem_output_recomputed() */
      else if (net->layers[i].kind != TDM_LAYER_BN)
        g_assert_cmpuint(b32.output, ==, b16.output);
      stored += b16.output_type == TDM_DTYPE_BF16;
      folded += net->layers[i].kind == TDM_LAYER_BN && b32.output == 0 && b16.output == 0;
      elided += net->layers[i].kind == TDM_LAYER_BN && b32.output > 0 && b16.output == 0;
      if (net->layers[i].kind == TDM_LAYER_RES_END && net->layers[i].projection)
        g_assert_cmpuint(b16.projection, ==, 0); /* projection_output_recomputed() */
    }
    g_assert_cmpint(stored, ==, 16 + 9); /* the stem's computed again */
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
      argmax += buf.argmax * buf.argmax_size;
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
    size_t sample = 784 * sizeof(float) + halves * sizeof(uint16_t) + argmax +
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
  /* The one window of the gradient buffers, apart from the arena, as derived here (the
   * windows: test_gradient_windows). */
  g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  /* The skip gradients: one buffer for the one level of blocks, the largest block's.
   * Float32 (as TANDEM_BF16_ACTIVATIONS=0 keeps them): the widest block input,
   * 32×32×64 = 65,536 floats, 262,144 bytes a sample. In bf16 every block keeps its
   * gradients as bf16 (each ends in a bn; before block 1 the stem's bn, before the
   * others a block's end with a bf16 output): the five blocks without a projection keep
   * their output gradient (32×32×64 twice, 16×16×128, 8×8×256, 4×4×512) as bf16, at
   * most 131,072 bytes; the three projections their start's sum, the block's input
   * gradient as bf16 (32×32×64, 16×16×128, 8×8×256: 131,072, 65,536 and 32,768 bytes,
   * each a multiple of 16), and past it their compact input gradient, the pixels their
   * stride 2 reads, float32 (16×16×64, 8×8×128, 4×4×256: 65,536, 32,768 and 16,384
   * bytes), so that the start's one pass reads the second as it writes the first (each
   * start sums over a block's end whose ReLU it applies, above that block's last bn:
   * skip_grad_of()): 196,608, 98,304 and 49,152 bytes. So 196,608 bytes a sample:
   * 33,554,432 fewer at batch 512. */
  for (int kind = TDM_BACKEND_CPU; kind <= TDM_BACKEND_CUDA; kind++) {
    int bf16_skips = 0, compact = 0;
    for (int i = 0; i < net->layer_count; i++) {
      TdmLayerBuffers buf = tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_BF16);
      const TdmLayer *l = &net->layers[i];
      if (l->kind != TDM_LAYER_RES_END)
        continue;
      const TdmLayer *begin = &net->layers[l->partner];
      if (l->projection) {
        size_t sum = (size_t)begin->in_h * begin->in_w * begin->in_c * sizeof(uint16_t);
        size_t share = (size_t)(begin->in_h / 2) * (begin->in_w / 2) * begin->in_c * 4;
        g_assert_cmpuint(sum % 16, ==, 0);
        g_assert_cmpint(buf.skip_type, ==, TDM_DTYPE_F32);
        g_assert_cmpuint(buf.skip * sizeof(float), ==, sum + share);
        compact++;
      } else {
        g_assert_cmpint(buf.skip_type, ==, TDM_DTYPE_BF16);
        g_assert_cmpuint(buf.skip, ==, (size_t)begin->in_h * begin->in_w * begin->in_c);
        bf16_skips++;
      }
    }
    g_assert_cmpint(bf16_skips, ==, 5);
    g_assert_cmpint(compact, ==, 3);
    g_assert_cmpuint(skip_bytes(net, kind, TDM_PRECISION_BF16), ==, 131072 + 65536);
    g_assert_cmpuint(skip_bytes(net, kind, TDM_PRECISION_FP32), ==, 262144);
    TdmReplicaPlan with = tdm_replica_plan(net, kind, TDM_PRECISION_BF16, 512, 100);
    g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
    g_assert_cmpuint(skip_bytes(net, kind, TDM_PRECISION_BF16), ==, 262144);
    TdmReplicaPlan without = tdm_replica_plan(net, kind, TDM_PRECISION_BF16, 512, 100);
    g_unsetenv("TANDEM_BF16_ACTIVATIONS");
    /* Kept float32, the skip buffer doubles, and the gradient region grows fourfold: the
     * stem bn's input gradient (32×32×64 floats, 262,144 bytes; it goes to the stem
     * conv's workspace as bf16 either way, but the first blocks' first convs' input
     * gradients and the blocks' ReLU gradients are float32 then) is written while the
     * gradient it comes from is in the gradient region, so a half must hold it; stored as
     * bf16, a half holds 65,536 bytes (below). */
    /* And on a GPU the column workspace: stored as bf16, each bn writes its conv's bf16
     * output gradient over the conv's output (bn_dx_over_input(); the stem's over its
     * output computed again at grad_a), so the most is layer4's 3×3 conv's backward
     * (test-conv-columns' plan: 105,299,968), where float32 storage keeps the stem bn's
     * at the stem conv's workspace start (167,763,968). The CPU's whole float32 columns
     * are the same either way. */
    size_t columns = kind == TDM_BACKEND_CUDA ? 167763968 - 105299968 : 0;
    g_assert_cmpuint(without.columns - with.columns, ==, columns);
    g_assert_cmpuint(without.workspace - with.workspace, ==,
                     512 * (size_t)(262144 - 196608) + 2 * 512 * (size_t)(262144 - 65536) +
                         columns);
    /* The whole workspace, from the layers: the column workspace, the bns' small
     * buffers, the skip buffer, the gradient region (two halves of 16×16×128 bf16
     * values: the widest gradients, the first blocks' first convs' input gradients and
     * a frozen bn's output for the conv after it, 32×32×64 bf16 values, are each written
     * while nothing else lives in the region, so they take the whole region; the stem
     * bn's goes to its conv's workspace as bf16, and the stem conv stages its float32
     * product a chunk at a time in its workspace; the widest written beside something
     * live is the first projection's bn output and its block's ReLU gradient, 16×16×128
     * bf16 values, 65,536 bytes), the labels and indices, the metrics; no buffer for the
     * projections' bn outputs (the forward writes them into the region's second
     * half). */
    size_t bn_work = 0;
    for (int i = 0; i < net->layer_count; i++)
      bn_work += tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_BF16).bn_work;
    g_assert_cmpuint(with.workspace, ==,
                     with.columns + bn_work * sizeof(float) + 512 * (size_t)196608 +
                         2 * 512 * (size_t)32768 * sizeof(uint16_t) +
                         2 * 512 * sizeof(int32_t) + sizeof(TdmMetrics));
  }
  /* torchvision's ResNet-18 at 224 px, batch 128: the blocks start after the stem's 3×3
   * max pool of stride 2 (its backward reads bf16 too). Float32: the widest block input,
   * 56×56×64 = 200,704 floats, 802,816 bytes a sample. In bf16 the identity blocks'
   * largest output gradient, 56×56×64 as bf16, 401,408 bytes; the projections' starts'
   * sums as bf16 (56×56×64, 28×28×128, 14×14×256: 401,408, 200,704 and 100,352 bytes),
   * then their compact input gradients, float32 (28×28×64, 14×14×128, 7×7×256: 200,704,
   * 100,352 and 50,176 bytes; each start sums over a block's end, as at 32 px). So
   * 602,112 bytes a sample: 25,690,112 fewer at batch 128. And the gradient region: the
   * widest gradient is the stem pool's input's, 112×112×64 = 802,816 values, which the
   * pool writes as bf16 for the stem's bn (1,605,632 bytes; float32: 3,211,264, beside
   * its output gradient in the region), the bn's own goes to its conv's workspace as
   * bf16. The pool reads its output gradient from the first block's skip buffer, so its
   * bf16 input gradient takes the whole region: halves of 802,816 bytes, which also hold
   * the layer1 blocks' first convs' float32 input gradients (56×56×64 floats, written
   * while the gradient they come from is in the workspace) across the whole region, and
   * the projections' bn outputs (28×28×128 floats, 401,408 bytes) beside something live:
   * 2 × 128 × (3,211,264 − 802,816) = 616,562,688 bytes fewer than float32. At 32 px the
   * stem bn's input gradient stays float32 (its conv, 27 taps for 64 outputs, has no bf16
   * columns), 262,144 bytes, but it takes the whole region (it reads the first block's
   * sum from the skip buffer): halves of 131,072 bytes. */
  g_autoptr(TdmNetwork) tv = tdm_network_new("resnet18", 224, 224, 3, 1000, &error);
  g_assert_no_error(error);
  for (int kind = TDM_BACKEND_CPU; kind <= TDM_BACKEND_CUDA; kind++) {
    /* The stem conv's output as bf16: the pool after its bn does not tile. */
    g_assert_cmpint(tv->layers[0].kind, ==, TDM_LAYER_CONV);
    g_assert_cmpint(tv->layers[2].kind, ==, TDM_LAYER_POOL);
    TdmLayerBuffers stem = tdm_replica_layer_buffers(tv, 0, kind, TDM_PRECISION_BF16);
    g_assert_cmpint(stem.output_type, ==, TDM_DTYPE_BF16);
    g_assert_cmpuint(stem.output, ==, 112 * 112 * 64);
    /* Its bn's output, read by the pool alone, has no buffer (the pool normalizes the
     * bn's input as it reads it); the pool's, the blocks' input, is bf16. */
    g_assert_cmpuint(tdm_replica_layer_buffers(tv, 1, kind, TDM_PRECISION_BF16).output, ==, 0);
    g_assert_cmpint(tdm_replica_layer_buffers(tv, 2, kind, TDM_PRECISION_BF16).output_type, ==,
                    TDM_DTYPE_BF16);
    g_assert_cmpuint(tdm_replica_gradient_bytes(net, kind, TDM_PRECISION_BF16), ==, 65536);
    g_assert_cmpuint(tdm_replica_gradient_bytes(tv, kind, TDM_PRECISION_FP32), ==, 3211264);
    g_assert_cmpuint(skip_bytes(tv, kind, TDM_PRECISION_FP32), ==, 802816);
    g_assert_cmpuint(skip_bytes(tv, kind, TDM_PRECISION_BF16), ==, 401408 + 200704);
    TdmReplicaPlan with = tdm_replica_plan(tv, kind, TDM_PRECISION_BF16, 128, 100);
    g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
    TdmReplicaPlan without = tdm_replica_plan(tv, kind, TDM_PRECISION_BF16, 128, 100);
    g_unsetenv("TANDEM_BF16_ACTIVATIONS");
    g_assert_cmpuint(tdm_replica_gradient_bytes(tv, kind, TDM_PRECISION_BF16), ==, 802816);
    /* On a GPU the stem bn's bf16 gradient goes in place over the pool's in the region
     * (bn_dx_in_place(): bf16 storage only), so the stem conv's weight gradient reserves
     * none of the workspace for it, and each other bn's over its conv's output
     * (bn_dx_over_input()), so the column bound is set by a layer4 conv's backward
     * (test-conv-columns's test_plan): 305,840,128 → 105,244,672. */
    size_t in_place = kind == TDM_BACKEND_CUDA ? 305840128 - 105244672 : 0;
    g_assert_cmpuint(without.workspace - with.workspace, ==,
                     128 * (size_t)(802816 - 602112) + 616562688 + in_place);
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
     * 200,704) × 2 bytes fewer; and the stem bn's not at all (its pool normalizes as it
     * reads): 128 × 802,816 × 2 fewer again. At 32 px the region's halves half again,
     * 2 × 512 × 65,536 bytes fewer (the block's start reads its first conv's gradient as
     * bf16, the stem bn's goes to its conv's workspace, a frozen bn's output is bf16). At
     * 224 px the pool's argmax a byte an output (its position in the 3×3 window), not an
     * int32: 128 × 56×56×64 × 3 fewer. The column workspace's bound, the budget counted
     * beyond each call's reservations (test-conv-columns's test_plan): 266,485,760 →
     * 201,310,208 at 32 px (the stem's widened weight gradient, 134,201,344, and 64 MiB)
     * and 543,845,376 → 339,031,552 at 224 px; there no copy of the stem's output
     * gradient in the workspace (its bn writes it in place over the pool's in the
     * gradient region), 339,031,552 → 183,590,912; and no bn's gradient for its conv in
     * the workspace (each writes it over the conv's output, bn_dx_over_input()): the
     * bound is a layer's 3×3 conv's backward, 201,310,208 → 138,919,936 at 32 px (layer4)
     * and 183,590,912 → 135,122,944 at 224 px (layer3); and in a bf16 run's chunks of
     * 32 MiB, not 64, layer4's at both, 138,919,936 → 105,299,968 and 135,122,944 →
     * 105,244,672. At 32 px the stem conv's bf16 output, 512 × 32×32×64 × 2 bytes, is
     * not kept (stem_output_recomputed()), nor the projections' conv outputs, 512 ×
     * 57,344 × 2 (projection_output_recomputed()); at 224 px theirs too, 128 ×
     * (28×28×128 + 14×14×256 + 7×7×512) × 2 (the evaluation
     * chunk, which the training's activations bound, still within them). The eight
     * block ends' ReLU masks as bits beside their bf16 outputs, a bit an element: 512 ×
     * 245,760 / 8 and 128 × 2 × (56×56×64 + 28×28×128 + 14×14×256 + 7×7×512) / 8 bytes
     * more. The first projection's start's sum and share both in the skip buffer (above),
     * 512 × (196,608 − 131,072) and 128 × (602,112 − 401,408) bytes more. */
    static const size_t totals[] = {
        2071893652 - 2 * 512 * (size_t)131072 - 402673664 - 2 * 512 * (size_t)65536 -
            (266485760 - 105299968) - 512 * (size_t)65536 * sizeof(uint16_t) -
            512 * (size_t)57344 * sizeof(uint16_t) + 512 * (size_t)245760 / 8 +
            512 * (size_t)(196608 - 131072),
        4188168512 - 2 * 128 * (size_t)802816 - 1336397824 -
            128 * (2 * 802816 + 200704) * sizeof(uint16_t) -
            128 * (size_t)802816 * sizeof(uint16_t) -
            128 * (size_t)200704 * (sizeof(int32_t) - sizeof(uint8_t)) -
            (543845376 - 105244672) -
            128 * (size_t)(100352 + 50176 + 25088) * sizeof(uint16_t) +
            128 * 2 * (size_t)(200704 + 100352 + 50176 + 25088) / 8 +
            128 * (size_t)(602112 - 401408)};
    g_assert_cmpuint(bf16_relu_bits_bytes(rows[k].net, (size_t)rows[k].batch), ==,
                     k == 0 ? 512 * (size_t)245760 / 8
                            : 128 * 2 * (size_t)(200704 + 100352 + 50176 + 25088) / 8);
    g_assert_cmpuint(rb.inference, ==, 0);
    g_assert_cmpuint(rb.total, ==, totals[k]);
  }
  g_unsetenv("TANDEM_GRADIENT_WINDOWS");
}

/* A CPU bf16 replica of a network, n samples a step and an evaluation chunk, over
 * synthetic data (40 training samples, 20 test), and one training step of it. */
typedef struct {
  TdmDatasetPair *data;
  TdmBackend *b;
  TdmReplica *r;
  float *params; /* the step's parameters */
  float *grads;  /* its gradients, read back */
} PlannedStep;

/* Makes s for net from parameters initialized with seed: the replica allocates what the
 * estimate plans, and the step holds no more at any time. */
static void
planned_step_run(PlannedStep *s, const TdmNetwork *net, int n, guint32 seed)
{
  g_autoptr(GError) error = NULL;
  s->data = tdm_dataset_synthetic(3, 40, 20);
  s->b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  s->r = tdm_replica_new_sized(s->b, net, n, n, s->data->train, s->data->test, &error);
  g_assert_no_error(error);
  size_t planned =
      tdm_memory_replica(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, n, n, 40, 20).total;
  g_assert_cmpuint(s->b->bytes_in_use, ==, planned);
  s->params = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, seed, s->params);
  s->grads = replica_step_gradients(s->r, s->params, n);
  g_assert_cmpuint(s->b->bytes_peak, ==, planned);
}

/* Frees s: once its replica is freed, its backend holds nothing. */
static void
planned_step_clear(PlannedStep *s)
{
  tdm_replica_free(s->r);
  g_assert_cmpuint(s->b->bytes_in_use, ==, 0);
  tdm_backend_free(s->b);
  tdm_dataset_pair_free(s->data);
  g_free(s->params);
  g_free(s->grads);
}

/* A stem of few input channels on float32 columns in bf16 (9 taps for 64 outputs: no
 * bf16 product): its forward stages each chunk's float32 product beside its columns
 * before rounding it into its bf16 output, and its bn hands it its gradient as bf16 over
 * that output (bn_dx_over_input()), which its weight gradient widens a chunk at a time
 * beside its columns (TdmConvComposition's y16, dy16): neither takes the gradient
 * region, nor the gradient as bf16 the workspace (8 × 784 × 64 × 2 = 802,816 bytes
 * more at its start). On the CPU (the whole batch one chunk) at capacity 8: float32
 * columns (8 × 784 × 9 × 4 = 225,792) and the widened gradient, or the forward's
 * product (8 × 784 × 64 × 4 = 1,605,632): 1,831,424 bytes either way. A replica
 * allocates what the estimate says, and a training step holds no more at any time (the
 * workspace never grew), its gradients finite and the stem's not zero. */
static void
test_bf16_stem(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net =
      tdm_network_new("conv64k3p1,bn,relu,gap,fc10", 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  TdmReplicaPlan p = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 8, 8);
  g_assert_cmpuint(p.columns, ==, 225792 + 1605632);
  PlannedStep s;
  planned_step_run(&s, net, 8, 7);
  const float *grads = s.grads;
  double stem = 0.0;
  for (size_t i = 0; i < net->parameter_count; i++) {
    g_assert_true(isfinite(grads[i]));
    if (i >= net->layers[0].weight_offset &&
        i < net->layers[0].weight_offset + net->layers[0].param_count)
      stem += fabs(grads[i]);
  }
  g_assert_cmpfloat(stem, >, 0.0);
  planned_step_clear(&s);
}

/* The stem's weight gradient (layer 0) of replica r (n samples a step, after a step)
 * from one bf16 output gradient at the workspace's start and outside it: the same bits. */
static void
assert_stem_dw_start_outside(TdmReplica *r, int n)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = r->backend;
  const TdmLayer *stem = &r->net->layers[0];
  size_t rows = (size_t)n * stem->out_h * stem->out_w, out = rows * stem->out_c;
  g_autofree uint16_t *dy16 = g_new(uint16_t, out);
  for (size_t e = 0; e < out; e++)
    dy16[e] = tdm_bf16_round((float)g_test_rand_double_range(-1, 1));
  size_t wcount = (size_t)stem->out_c * stem->kernel * stem->kernel * stem->in_c;
  float *dw_start = tdm_backend_alloc(b, wcount * sizeof(float), &error);
  float *dw_outside = tdm_backend_alloc(b, wcount * sizeof(float), &error);
  uint16_t *outside = tdm_backend_alloc(b, out * sizeof(uint16_t), &error);
  g_assert_no_error(error);
  tdm_backend_upload(b, outside, dy16, out * sizeof(uint16_t));
  g_assert_true(tdm_replica_workspace_holds(r, out * sizeof(uint16_t), 0));
  tdm_backend_upload(b, r->columns, dy16, out * sizeof(uint16_t));
  const float *w = r->params + stem->weight_offset;
  tdm_replica_conv_backward(r, NULL, FALSE, dw_start, NULL, (const uint16_t *)r->columns,
                            r->acts[0], TDM_DTYPE_F32, NULL, r->cols[0], r->conv_work[0], w, n,
                            stem->in_h, stem->in_w, stem->in_c, stem->out_c, stem->kernel,
                            stem->pad, stem->stride, stem->out_h, stem->out_w, FALSE);
  tdm_replica_conv_backward(r, NULL, FALSE, dw_outside, NULL, outside, r->acts[0],
                            TDM_DTYPE_F32, NULL, r->cols[0], r->conv_work[0], w, n, stem->in_h,
                            stem->in_w, stem->in_c, stem->out_c, stem->kernel, stem->pad,
                            stem->stride, stem->out_h, stem->out_w, FALSE);
  g_assert_true(tdm_backend_check(b, NULL));
  g_assert_cmpmem(dw_start, wcount * sizeof(float), dw_outside, wcount * sizeof(float));
  tdm_backend_release(b, dw_start);
  tdm_backend_release(b, dw_outside);
  tdm_backend_release(b, outside);
}

/* torchvision's stem (conv, bn with its ReLU, a 3×3 pool of stride 2): the pool writes
 * the bn's output gradient as bf16 across the gradient region, and the bn writes its own
 * gradient, the conv's bf16 output gradient, in place over it (bn_dx_in_place()), not
 * at the workspace's start: only where activations are stored bf16, only the network's
 * first conv (it passes no gradient on), not the CIFAR stem (no pool after it: its bn
 * writes the gradient at the workspace's start, /memory/bf16-stem's way). The conv's
 * backward reads it there: one training
 * step on a CPU replica, then the stem's weight gradient from the same bf16 output
 * gradient at the workspace's start and outside it, the same bits. */
static void
test_stem_gradient_in_place(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) tv = tdm_network_new("resnet18", 224, 224, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) tv50 = tdm_network_new("resnet50", 224, 224, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) cifar = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  g_assert_true(bn_dx_in_place(tv, 1, TRUE, TRUE));
  g_assert_true(bn_dx_in_place(tv50, 1, TRUE, TRUE));
  g_assert_false(bn_dx_in_place(tv, 1, FALSE, TRUE));
  g_assert_false(bn_dx_in_place(cifar, 1, TRUE, TRUE));
  for (int i = 2; i < tv->layer_count; i++)
    g_assert_false(bn_dx_in_place(tv, i, TRUE, TRUE));

  const char *spec = "conv16k7s2p3,bn,relu,pool3s2p1,res(conv16k3p1,bn,relu,conv16k3p1,bn),"
                     "relu,gap,fc10";
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_true(bn_dx_in_place(net, 1, TRUE, TRUE));
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 16);
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  const int n = 8;
  TdmReplica *r = tdm_replica_new_sized(b, net, n, n, data->train, data->test, &error);
  g_assert_no_error(error);
  g_assert_true(r->stores_bf16);
  size_t count = net->parameter_count;
  g_autofree float *params = g_new(float, count);
  tdm_network_init_parameters(net, 5, params);
  g_autofree float *grads = replica_step_gradients(r, params, n);
  /* The step's stem weight gradient came through the in-place path: finite. */
  const TdmLayer *stem = &net->layers[0];
  for (size_t e = 0; e < (size_t)stem->param_count; e++)
    g_assert_true(isfinite(grads[stem->param_offset + e]));
  assert_stem_dw_start_outside(r, n);
  tdm_replica_free(r);
  g_assert_cmpuint(b->bytes_in_use, ==, 0);
  tdm_backend_free(b);
}

/* A stem of few input channels on float32 columns (9 taps for 64 outputs) before a 3×3
 * pool of stride 2: both ways at once. Its bn writes the conv's bf16 output gradient in
 * place over the pool's in the gradient region (bn_dx_in_place()), and the conv's
 * weight gradient widens it from there a chunk at a time beside its float32 columns
 * (TdmConvComposition's dy16 and dy16_outside), its columns from the workspace's start.
 * On the CPU at capacity 8 (the whole batch one chunk): float32 columns (8 × 784 × 9 × 4
 * = 225,792 bytes) and the widened gradient (8 × 784 × 64 × 4 = 1,605,632): 1,831,424,
 * as the forward's columns and staged product, and 802,816 bytes (the gradient as bf16,
 * 8 × 784 × 64 × 2) less than with that gradient at the workspace's start
 * (/memory/bf16-stem). A replica allocates what the estimate says, a training step holds
 * no more, and the weight gradient is the same bits from either place. */
static void
test_bf16_stem_pool(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net =
      tdm_network_new("conv64k3p1,bn,relu,pool3s2p1,gap,fc10", 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_true(bn_dx_in_place(net, 1, TRUE, TRUE));
  TdmReplicaPlan p = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 8, 8);
  g_assert_cmpuint(p.columns, ==, 225792 + 1605632);
  PlannedStep s;
  planned_step_run(&s, net, 8, 7);
  const float *grads = s.grads;
  double stem = 0.0;
  const TdmLayer *l0 = &net->layers[0];
  for (size_t i = 0; i < net->parameter_count; i++) {
    g_assert_true(isfinite(grads[i]));
    if (i >= l0->weight_offset && i < l0->weight_offset + l0->param_count)
      stem += fabs(grads[i]);
  }
  g_assert_cmpfloat(stem, >, 0.0);
  assert_stem_dw_start_outside(s.r, 8);
  planned_step_clear(&s);
}

/* The CIFAR stem (a 3×3 conv of few input channels, float32 columns, its bf16 output
 * read only by its bn, the first block right after: stem_output_recomputed()) keeps no
 * output in training: the conv writes it at the gradient region's start in the forward
 * and again from the stored input before its bn's backward, whose output gradient is in
 * the skip buffer and whose input gradient goes to the workspace. Only with bf16
 * storage, only that conv (not torchvision's stem: its bn's gradient is in the region).
 * ResNet-18's three CIFAR rows on the GPU: the activations h-memmerge's plan had
 * (955,273,216, 1,908,942,848, 3,817,083,904) less the stem's bf16 output, batch ·
 * side² · 64 · 2 bytes, and the gradient region the same (its two halves are the stem's
 * output: a 64-channel bf16 gradient of the first blocks already takes the whole
 * region). A CPU replica allocates what is planned, a step holds no more, and the bn
 * read the bits the conv writes: its saved statistics are those of the conv's output
 * computed here again, and its parameter gradients those of its sums over that output
 * and its output gradient left in the skip buffer. */
static void
test_stem_output_recomputed(void)
{
  g_autoptr(GError) error = NULL;
  static const struct {
    int side, batch;
    size_t activations;
  } rows[] = {{32, 512, 955273216}, {64, 256, 1908942848}, {128, 128, 3817083904}};
  for (guint k = 0; k < G_N_ELEMENTS(rows); k++) {
    g_autoptr(TdmNetwork) cifar =
        tdm_network_new(resnet18, rows[k].side, rows[k].side, 3, 10, &error);
    g_assert_no_error(error);
    g_assert_true(stem_output_recomputed(cifar, 0, TRUE));
    g_assert_false(stem_output_recomputed(cifar, 0, FALSE));
    for (int i = 1; i < cifar->layer_count; i++)
      g_assert_false(stem_output_recomputed(cifar, i, TRUE));
    TdmLayerBuffers stem =
        tdm_replica_layer_buffers(cifar, 0, TDM_BACKEND_CUDA, TDM_PRECISION_BF16);
    g_assert_cmpuint(stem.output, ==, 0);
    /* The pieces alone: one window of the gradient buffers (with two, the low one runs
     * past them: /memory/gradient-windows). */
    g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
    TdmReplicaPlan p =
        tdm_replica_plan(cifar, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, rows[k].batch, 0);
    g_unsetenv("TANDEM_GRADIENT_WINDOWS");
    size_t side = (size_t)rows[k].side, out16 = side * side * 64 * sizeof(uint16_t);
    /* The projections' conv outputs go too (/memory/projection-output-recomputed):
     * (side/2)²·128 + (side/4)²·256 + (side/8)²·512 = 56·side² elements, bf16. */
    size_t projections16 = 56 * side * side * sizeof(uint16_t);
    /* The block ends' ReLU masks come in, a bit an element: two ends a stage, 2 ·
     * (side²·64 + (side/2)²·128 + (side/4)²·256 + (side/8)²·512) = 240·side² elements. */
    size_t masks = 240 * side * side / 8;
    g_assert_cmpuint(bf16_relu_bits_bytes(cifar, (size_t)rows[k].batch), ==,
                     rows[k].batch * masks);
    g_assert_cmpuint(p.activations, ==,
                     rows[k].activations - rows[k].batch * (out16 + projections16 - masks));
    g_assert_cmpuint(
        2 * tdm_replica_gradient_bytes(cifar, TDM_BACKEND_CUDA, TDM_PRECISION_BF16), ==, out16);
  }
  g_autoptr(TdmNetwork) tv = tdm_network_new("resnet18", 224, 224, 3, 10, &error);
  g_assert_no_error(error);
  for (int i = 0; i < tv->layer_count; i++)
    g_assert_false(stem_output_recomputed(tv, i, TRUE));

  const char *spec = "conv16k3p1,bn,relu,res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,"
                     "res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,gap,fc10";
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_assert_true(stem_output_recomputed(net, 0, TRUE));
  const int n = 8;
  PlannedStep s;
  planned_step_run(&s, net, n, 11);
  TdmReplica *r = s.r;
  g_assert_true(r->stores_bf16);
  g_assert_null(r->acts[1]);
  const float *grads = s.grads;
  size_t count = net->parameter_count;

  /* The stem's output again, as the pass computes it (replica-recomputed.h). */
  replica_params_again(r, s.params);
  replica_assert_stem_recomputed(r, n, grads);
  const TdmLayer *conv = &net->layers[0];
  double stem = 0.0;
  for (size_t e = 0; e < count; e++) {
    g_assert_true(isfinite(grads[e]));
    if (e >= conv->weight_offset && e < conv->weight_offset + conv->param_count)
      stem += fabs(grads[e]);
  }
  g_assert_cmpfloat(stem, >, 0.0);
  planned_step_clear(&s);
}

/* A projection's 1×1 conv keeps no output in training where its block keeps bf16
 * gradients and its bn writes bf16 (projection_output_recomputed()): the conv writes it
 * at the gradient region's start in the forward, and again from the block's stored
 * input into the region's free half before its bn's backward. ResNet-18 (CIFAR, 32 px;
 * torchvision's, 224 px) and ResNet-50: every projection; not in a float32 run. A CPU
 * replica of a small network with two projections (strides 2 and 1) allocates what is
 * planned, a step holds no more, and each projection's bn normalized with the statistics
 * of the conv's output as it is computed again here from the stored input: the same
 * bits, so the backward, which computes it so, reads what the forward read. */
static void
test_projection_output_recomputed(void)
{
  g_autoptr(GError) error = NULL;
  static const char *const nets[][2] = {
      {resnet18, "32"}, {"resnet18", "224"}, {"resnet50", "224"}};
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++) {
    int side = atoi(nets[k][1]);
    g_autoptr(TdmNetwork) net = tdm_network_new(nets[k][0], side, side, 3, 10, &error);
    g_assert_no_error(error);
    int projections = 0;
    for (int i = 0; i < net->layer_count; i++) {
      const TdmLayer *l = &net->layers[i];
      gboolean proj = l->kind == TDM_LAYER_RES_END && l->projection;
      g_assert_cmpint(projection_output_recomputed(net, i, TRUE), ==, proj);
      g_assert_false(projection_output_recomputed(net, i, FALSE));
      projections += proj;
      TdmLayerBuffers b16 =
          tdm_replica_layer_buffers(net, i, TDM_BACKEND_CUDA, TDM_PRECISION_BF16);
      TdmLayerBuffers b32 =
          tdm_replica_layer_buffers(net, i, TDM_BACKEND_CUDA, TDM_PRECISION_FP32);
      g_assert_cmpuint(b16.projection, ==, 0);
      g_assert_cmpuint(b32.projection, ==, proj ? layer_out_floats(l) : 0);
    }
    g_assert_cmpint(projections, ==, strcmp(nets[k][0], "resnet50") == 0 ? 4 : 3);
  }

  const char *spec = "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
                     "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,"
                     "res(conv24k3p1,bn,relu,conv24k3p1,bn),relu,gap,fc10";
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  const int n = 8;
  PlannedStep s;
  planned_step_run(&s, net, n, 13);
  TdmReplica *r = s.r;
  const float *grads = s.grads;
  for (size_t e = 0; e < net->parameter_count; e++)
    g_assert_true(isfinite(grads[e]));
  replica_params_again(r, s.params);
  g_assert_cmpint(replica_check_projections_recomputed(r, n), ==, 2);
  /* The projections' parameters had a gradient. */
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind != TDM_LAYER_RES_END || !l->projection)
      continue;
    double moved = 0.0;
    for (size_t e = l->param_offset; e < l->param_offset + l->param_count; e++)
      moved += fabs(grads[e]);
    g_assert_cmpfloat(moved, >, 0.0);
  }
  planned_step_clear(&s);
}

/* The windows of one network (TdmGradientWindows) on a GPU in bf16, none stored for its
 * convs, cap samples a step: with them, and the one window (TANDEM_GRADIENT_WINDOWS=0). */
static void
windows_both(const TdmNetwork *net, int cap, TdmGradientWindows *two, TdmGradientWindows *one)
{
  *two = tdm_replica_gradient_windows(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, TRUE, TRUE,
                                      0, (size_t)cap);
  g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
  *one = tdm_replica_gradient_windows(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, TRUE, TRUE,
                                      0, (size_t)cap);
  g_unsetenv("TANDEM_GRADIENT_WINDOWS");
}

/* The gradient buffers in two windows (TdmGradientWindows). CIFAR ResNet-18 at 128 px,
 * batch 128, on a GPU in bf16, no bn output stored: one window holds a skip buffer of the
 * widest block gradient as kept, the first projection's (layer2.0: its start's sum,
 * 128×128×64 bf16, 2,097,152 bytes a sample, then its compact input gradient, 64×64×64
 * floats, 1,048,576: skip_grad_of()), 3,145,728, and halves of 1,048,576 (the first
 * blocks' first convs' bf16 input gradients, 128×128×64, written while the gradient they
 * come from is in the skip buffer, take the whole region). Split at layer3.0's start
 * (64×64×128 in, 32×32×256 out, a projection), the high window keeps that projection's
 * compact input gradient alone (32×32×128 floats, 524,288 bytes: its start hands the sum
 * to the end below) and layer4.0's sum (32×32×256 bf16, 524,288) and compact input
 * gradient (16×16×256 floats, 262,144): 786,432; halves of 524,288 (layer3.0's first
 * conv's input gradient, 64×64×128 bf16 over the whole region; the projection's bn
 * output, 32×32×256 bf16, in a half). The low window, the one window's sizes, lies past
 * the pieces of layers 0–25 (in units of s² bytes a sample at side s: the input's 12, the
 * stem bn's and the first two stages' bf16 outputs, 2 × (64 + 6·64 + 6·128/4) = 1,280,
 * their four block ends' masks, (2·64 + 2·128/4) / 8 = 24: 1,316 s²), and holds 192 s² +
 * 2 · 64 s² = 320 s², more than the third and fourth stages' pieces (2 · (6·256/16 +
 * 6·512/64) = 288 s² of bf16 outputs, 6 s² of masks) and the global pool's and the
 * logits' 2,088 bytes: so the arena ends with the low window, 1,636 s² a sample, where
 * one window's is its pieces, 1,610 s² + 2,088 (each CIFAR row). The plan's total falls
 * by 128 × (3,145,728 + 2 × 1,048,576 − 786,432 − 2 × 524,288 − (26 s² − 2,088)) =
 * 381,948,928 bytes. Splitting at layer4.0 instead would leave the high window 0.75 MiB a
 * sample but put 5 MiB a sample over 128 × ~1.2 MB of pieces. A CPU bf16 replica with two
 * windows (that layout, and bottlenecks) allocates what the plan says (the low window in
 * its arena) and its step holds no more; its step's gradients are the bits of the one
 * window's. */
static void
test_gradient_windows(void)
{
  g_autoptr(GError) error = NULL;
  static const struct {
    int side, batch;
  } rows[] = {{32, 512}, {64, 256}, {128, 128}};
  for (guint k = 0; k < G_N_ELEMENTS(rows); k++) {
    g_autoptr(TdmNetwork) net =
        tdm_network_new(resnet18, rows[k].side, rows[k].side, 3, 10, &error);
    g_assert_no_error(error);
    TdmGradientWindows two, one;
    windows_both(net, rows[k].batch, &two, &one);
    size_t s2 = (size_t)rows[k].side * rows[k].side, b = (size_t)rows[k].batch;
    g_assert_cmpstr(net->layers[two.split].name, ==, "layer3.0");
    g_assert_cmpuint(one.arena, ==, b * (1610 * s2 + 2088));
    g_assert_cmpuint(two.low_at, ==, b * 1316 * s2);
    g_assert_cmpuint(two.low_skip, ==, 192 * s2);
    g_assert_cmpuint(two.low_half, ==, 64 * s2);
    g_assert_cmpuint(two.arena, ==, b * 1636 * s2);
  }
  g_autoptr(TdmNetwork) big = tdm_network_new(resnet18, 128, 128, 3, 10, &error);
  g_assert_no_error(error);
  TdmGradientWindows two, one;
  windows_both(big, 128, &two, &one);
  g_assert_cmpint(one.split, ==, 0);
  g_assert_cmpuint(one.high_skip, ==, 128 * 128 * 64 * 2 + 64 * 64 * 64 * 4);
  g_assert_cmpuint(one.high_half, ==, 128 * 128 * 64 * 2 / 2);
  const TdmLayer *begin = &big->layers[two.split], *end = &big->layers[begin->partner];
  g_assert_cmpint(begin->kind, ==, TDM_LAYER_RES_BEGIN);
  g_assert_cmpint(begin->in_h * begin->in_c, ==, 64 * 128);
  g_assert_cmpint(end->out_h * end->out_c, ==, 32 * 256);
  g_assert_true(end->projection);
  g_assert_cmpint(big->layers[two.split - 1].kind, ==, TDM_LAYER_RES_END);
  g_assert_cmpint(big->layers[big->layer_count - 1].kind, ==, TDM_LAYER_LINEAR);
  g_assert_cmpuint(two.low_skip, ==, one.high_skip);
  g_assert_cmpuint(two.low_half, ==, one.high_half);
  g_assert_cmpuint(two.high_skip, ==, 32 * 32 * 256 * 2 + 16 * 16 * 256 * 4);
  g_assert_cmpuint(two.high_half, ==, 64 * 64 * 128 * 2 / 2);
  g_assert_cmpuint(two.low_at + TDM_WINDOW_PIECE(128 * two.low_skip) + 2 * 128 * two.low_half,
                   ==, two.arena);
  TdmReplicaPlan p2 = tdm_replica_plan(big, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 128, 128);
  g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
  TdmReplicaPlan p1 = tdm_replica_plan(big, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 128, 128);
  g_unsetenv("TANDEM_GRADIENT_WINDOWS");
  g_assert_cmpuint(tdm_replica_plan_total(&p1) - tdm_replica_plan_total(&p2), ==, 381948928);
  g_assert_cmpuint(
      128 * (size_t)(3145728 + 2 * 1048576 - 786432 - 2 * 524288 - (26 * 128 * 128 - 2088)), ==,
      381948928);
  g_test_message("CIFAR ResNet-18, 128 px, batch 128, GPU, bf16: split at layer %d, plan "
                 "%zu bytes (one window %zu)",
                 two.split, tdm_replica_plan_total(&p2), tdm_replica_plan_total(&p1));

  /* CPU replicas of that layout and of bottlenecks (projections of stride 1 and 2),
   * small, on the synthetic 28×28 images. */
  const char *specs[] = {resnet18,
                         "conv16k3p1,bn,relu,bottleneck4,bottleneck8s2,bottleneck8,gap,fc10"};
  for (guint k = 0; k < G_N_ELEMENTS(specs); k++) {
    g_autoptr(TdmNetwork) net = tdm_network_new(specs[k], 28, 28, 1, 10, &error);
    g_assert_no_error(error);
    const int n = 4;
    PlannedStep s;
    planned_step_run(&s, net, n, 17);
    g_assert_cmpint(s.r->window_split, >, 0);
    g_assert_nonnull(s.r->skip_low);
    g_assert_true((const char *)s.r->grad_low >= (const char *)s.r->arena &&
                  (const char *)s.r->grad_low + 2 * s.r->half_low <=
                      (const char *)s.r->arena + s.r->arena_bytes);
    g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
    PlannedStep o;
    planned_step_run(&o, net, n, 17);
    g_unsetenv("TANDEM_GRADIENT_WINDOWS");
    g_assert_cmpint(o.r->window_split, ==, 0);
    g_assert_null(o.r->skip_low);
    g_assert_cmpuint(s.b->bytes_peak, <, o.b->bytes_peak);
    g_assert_cmpmem(s.grads, net->parameter_count * sizeof(float), o.grads,
                    net->parameter_count * sizeof(float));
    g_test_message("%s, %d samples, CPU: split at layer %d, %zu bytes (one window %zu), the "
                   "same gradients",
                   specs[k], n, s.r->window_split, (size_t)s.b->bytes_peak,
                   (size_t)o.b->bytes_peak);
    planned_step_clear(&s);
    planned_step_clear(&o);
  }
}

void
test_memory_add_bf16(void)
{
  g_test_add_func("/memory/gradient-windows", test_gradient_windows);
  g_test_add_func("/memory/stem-gradient-in-place", test_stem_gradient_in_place);
  g_test_add_func("/memory/bf16-activations", test_bf16_activations);
  g_test_add_func("/memory/bf16-block-gradients", test_bf16_block_gradients);
  g_test_add_func("/memory/bf16-resnet-preset", test_bf16_resnet_preset);
  g_test_add_func("/memory/bf16-stem", test_bf16_stem);
  g_test_add_func("/memory/bf16-stem-pool", test_bf16_stem_pool);
  g_test_add_func("/memory/stem-output-recomputed", test_stem_output_recomputed);
  g_test_add_func("/memory/projection-output-recomputed", test_projection_output_recomputed);
}
