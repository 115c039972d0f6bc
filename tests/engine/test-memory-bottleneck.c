/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-memory-bottleneck.c — part of test-memory: ResNet-50's bottleneck blocks in a
 * bf16 run, against the plan. Their 1×1 convs take bf16 operands both ways (their input
 * is their columns), so the bns before them keep no output, the blocks' outputs and
 * gradients are bf16, and a projection's bn output and gradient take half the room or
 * none: torchvision's ResNet-50 at 224 px, batch 128, counted here from its layers; and
 * a CPU replica of bottlenecks in small trains and evaluates within what it allocated
 * as planned. */
#include "replica-step.h"
#include "relative-difference.h"
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-replica.h"
#include "tdm-replica-private.h"
#include "test-memory.h"

#include <stdlib.h>

/* torchvision's ResNet-50 at 224 px, batch 128, bf16, on a GPU (and the CPU: the same
 * storage). Per sample, every activation the plan keeps:
 *   the input, float32: 224·224·3·4 = 602,112; the stem conv's output, bf16:
 *   112·112·64·2 = 1,605,632, and nothing of its bn's (the 3×3 pool of stride 2, its one
 *   reader, normalizes the bn's input as it reads it); the pool's output, bf16,
 *   56·56·64·2 = 401,408, and its argmax, a byte an output (the maximum's position in
 *   its 3×3 window), 200,704 (802,816 as int32 indices before);
 *   each bottleneck of width W from Hin to H pixels a side (its 3×3 conv's stride): its
 *   1×1 conv's output Hin²·W, its 3×3 conv's H²·W, its last 1×1 conv's H²·4W, its
 *   output H²·4W, and a first block's projection H²·4W, all bf16, and nothing of its
 *   three bns (the first two normalized by the conv after them as it reads, the last
 *   by the block's end as it adds): stage 1 (W 64, 56 px, three blocks) 3 × 4,014,080
 *   + 1,605,632 = 13,647,872; stage 2 (W 128, four) 3,411,968 + 3 × 2,007,040 =
 *   9,433,088; stage 3 (W 256, six) 1,705,984 + 5 × 1,003,520 = 6,723,584; stage 4 (W
 *   512, three) 852,992 + 2 × 501,760 = 1,856,512;
 *   the global pool's output and the logits, float32: 8,192 + 4,000;
 *   each block end's ReLU mask as bits, a bit an element of its output: (3 · 56²·256 +
 *   4 · 28²·512 + 6 · 14²·1024 + 3 · 7²·2048) / 8 = 5,519,360 / 8 = 689,920 (not in
 *   the figures that follow, which are from before it).
 * 34,483,104 bytes a sample, 4,413,837,312 at batch 128, with the projections'
 * outputs; without them (computed again for their bns' backward), 31,472,544 and
 * 4,028,485,632 (35,085,216 and 4,490,907,648
 * with the int32 argmax; main's plan before the
 * bottlenecks took bf16 operands: 6,841,552,896; its 1×1 convs' inputs, the bns before
 * them, and the blocks' outputs were float32, and the stem bn's output bf16).
 * The gradient region: its widest write is each stage-1 block's first conv's input
 * gradient, float32 (56·56·256·4 = 3,211,264: summed with the skip's share, then
 * rounded once), written across the whole region while the gradient it comes from is
 * in the workspace as bf16; beside something live, the stage-1 projection block's
 * ReLU gradient, bf16 (1,605,632), and the projection's bn output in the forward, bf16
 * (1,605,632): halves of 1,605,632 bytes (3,211,264 before: the projection's bn output
 * was float32). The skip buffer: the stage-1 identity blocks' bf16 output gradient,
 * 1,605,632, or a projection's: its start's sum, the block's input gradient as bf16,
 * then its compact float32 input gradient, the pixels its 1×1 conv reads, past it (the
 * start's one pass reads the second as it writes the first: skip_grad_of()), where the
 * start sums over a block's end: stage 2's 56·56·256·2 + 28·28·256·4 = 1,605,632 +
 * 802,816 = 2,408,448, the widest (stage 3's 802,816 + 401,408, stage 4's 401,408 +
 * 200,704); stage 1's start, after the stem's pool, takes two passes whatever the room,
 * so its buffer holds the larger of the two, its share, 56·56·64·4 = 802,816 (before,
 * its bn's float32 gradient, 3,211,264, lay there first). */
static void
test_resnet50_plan(void)
{
  /* The one window of the gradient buffers, apart from the arena, as derived here (the
   * windows: test_gradient_windows). */
  g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new("resnet50", 224, 224, 3, 1000, &error);
  g_assert_no_error(error);
  const size_t stem = 602112 + 1605632 + 401408 + 200704;
  const size_t stages = 13647872 + 9433088 + 6723584 + 1856512, head = 8192 + 4000;
  /* No projection's conv output is kept (projection_output_recomputed(): its conv
   * writes it into the gradient region, in the forward and again before its bn's
   * backward; a half holds it: stage 1's, 56·56·256·2 = 1,605,632, is the half): stage
   * by stage 1,605,632 + 802,816 + 401,408 + 200,704. */
  const size_t projections = 1605632 + 802816 + 401408 + 200704;
  g_assert_cmpuint(bf16_projection_outputs_recomputed(net), ==, projections / 2);
  const size_t masks = (3 * 802816 + 4 * 401408 + 6 * 200704 + 3 * 100352) / 8;
  g_assert_cmpuint(bf16_relu_bits_bytes(net, 128), ==, 128 * masks);
  const size_t sample = stem + stages + head - projections + masks;
  g_assert_cmpuint(sample, ==, 34483104 - 3010560 + 689920);
  for (int kind = TDM_BACKEND_CPU; kind <= TDM_BACKEND_CUDA; kind++) {
    TdmReplicaPlan p = tdm_replica_plan(net, kind, TDM_PRECISION_BF16, 128, 0);
    g_assert_cmpuint(p.activations, ==, 128 * sample);
    g_assert_cmpuint(tdm_replica_gradient_bytes(net, kind, TDM_PRECISION_BF16), ==, 1605632);
    g_assert_cmpuint(skip_bytes(net, kind, TDM_PRECISION_BF16), ==, 1605632 + 802816);
    int stage1 = -1; /* the first projection's end: stage 1's, after the stem's pool */
    for (int i = 0; i < net->layer_count && stage1 < 0; i++)
      if (net->layers[i].kind == TDM_LAYER_RES_END && net->layers[i].projection)
        stage1 = i;
    g_assert_cmpuint(tdm_replica_layer_buffers(net, stage1, kind, TDM_PRECISION_BF16).skip, ==,
                     56 * 56 * 64);
    /* No bn keeps an output: the stem's is read by its pool; each block's first two by
     * convs that take bf16 operands; its last by the block's end. */
    for (int i = 0; i < net->layer_count; i++) {
      TdmLayerBuffers buf = tdm_replica_layer_buffers(net, i, kind, TDM_PRECISION_BF16);
      if (net->layers[i].kind == TDM_LAYER_BN)
        g_assert_cmpuint(buf.output, ==, 0);
      if (net->layers[i].kind == TDM_LAYER_RES_END)
        g_assert_cmpint(buf.output_type, ==, TDM_DTYPE_BF16);
    }
    g_assert_cmpuint(bf16_bn_outputs_to_conv(net), ==,
                     /* a stage's blocks' first two bns: W·(Hin² + H²) */
                     (size_t)64 * 3136 * 2 * 3 + 128 * (3136 + 784) + 128 * 784 * 2 * 3 +
                         256 * (784 + 196) + 256 * 196 * 2 * 5 + 512 * (196 + 49) +
                         512 * 49 * 2 * 2);
  }
  /* A GPU's figures as a run estimates them (its evaluation chunk the batch: the
   * inference pass's buffers lie within the training's activations). The plan's total
   * without the column workspace, which the convolution engine's choices size after the
   * pre-warm: the activations above; the parameters (25,557,032) as float32 and bf16, the
   * bns' running statistics (26,560 channels, a mean and a variance each), the gradients;
   * the bns' statistics and sums, the skip buffer and the gradient region at batch 128,
   * the labels, indices and metrics. 5,363,998,280 bytes, 5.00 GiB, when this was first
   * counted (later changes moved it, the message prints it as it is; the skip buffer's
   * room for a projection's sum and share added 128 × 802,816; PyTorch's peak above the
   * data on an H100: 5.49 GiB; main's plan 7.76 GiB). */
  int eval = tdm_replica_eval_capacity(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 128, 1000);
  TdmReplicaBytes rb = tdm_memory_replica(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 128, eval,
                                          0, 0);
  g_assert_cmpuint(net->parameter_count, ==, 25557032);
  g_assert_cmpuint(net->state_count, ==, 2 * 26560);
  size_t bn_work = 0;
  for (int i = 0; i < net->layer_count; i++)
    bn_work += tdm_replica_layer_buffers(net, i, TDM_BACKEND_CUDA, TDM_PRECISION_BF16).bn_work;
  size_t expected = 128 * sample + 25557032 * (2 * sizeof(float) + sizeof(uint16_t)) +
                    2 * 26560 * sizeof(float) + bn_work * sizeof(float) + 128 * 2408448 +
                    2 * 128 * (size_t)1605632 + 2 * (size_t)MAX(128, eval) * sizeof(int32_t) +
                    sizeof(TdmMetrics);
  g_assert_cmpuint(rb.inference, ==, 0);
  g_assert_cmpuint(rb.total - rb.columns - rb.dataset, ==, expected);
  g_test_message("resnet50, 224 px, batch 128 on a GPU, bf16: %zu bytes (%.2f GiB) without "
                 "the column workspace (%zu bytes at its bound), activations %zu",
                 expected, expected / 1073741824.0, (size_t)rb.columns,
                 (size_t)rb.activations);
  /* With every activation kept float32 (TANDEM_BF16_ACTIVATIONS=0), more than 1.5 times
   * the bytes. */
  g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
  TdmReplicaPlan wide = tdm_replica_plan(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 128, 0);
  g_unsetenv("TANDEM_BF16_ACTIVATIONS");
  g_assert_cmpuint(wide.activations, >, 3 * (128 * sample) / 2);
  g_unsetenv("TANDEM_GRADIENT_WINDOWS");
}

/* Bottlenecks in small on a CPU under bf16: a training step and an evaluation chunk three
 * times the batch run within what the replica allocated by the plan (the column
 * workspace never grows: the 1×1 convs' bf16 composition, their bf16 output gradient
 * before a copy of their input, is in the plan's bound), and the logits with bf16
 * storage are those with float32 storage (TANDEM_BF16_ACTIVATIONS=0) within what
 * rounding each stored tensor once explains (test-bf16.c's test_inference(): 1/16). */
static void
test_bottleneck_cpu(void)
{
  static const char net_spec[] =
      "conv8k3p1,bn,relu,pool3s2p1,bottleneck4,bottleneck4,bottleneck8s2,gap,fc10";
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(net_spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 48);
  size_t n = net->parameter_count;
  g_autofree float *initial = g_new(float, n);
  tdm_network_init_parameters(net, 7, initial);
  TdmReplica *r16, *r32;
  replicas_by_storage(net, data, 16, 48, &r16, &r32);
  TdmBackend *b16 = r16->backend, *b32 = r32->backend;
  g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
  TdmReplicaBytes plan32 =
      tdm_memory_replica(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 16, 48, 64, 48);
  g_unsetenv("TANDEM_BF16_ACTIVATIONS");
  TdmReplicaBytes plan16 =
      tdm_memory_replica(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 16, 48, 64, 48);
  g_assert_true(r16->stores_bf16);
  g_assert_cmpuint(b16->bytes_in_use, ==, plan16.total);
  g_assert_cmpuint(b32->bytes_in_use, ==, plan32.total);
  g_assert_cmpuint(plan16.activations, <, plan32.activations);
  g_autofree float *g16 = replica_step_gradients(r16, initial, 16);
  g_autofree float *g32 = replica_step_gradients(r32, initial, 16);
  double step = relative_difference(g16, g32, n);
  g_test_message("%s: one step's gradients, bf16 storage against float32 storage: %.3g",
                 net_spec, step);
  g_assert_cmpfloat(step, >, 0);
  /* Running statistics from the same step, then logits from the same parameters. */
  size_t logits = (size_t)48 * net->classes;
  g_autofree float *y16 = g_new(float, logits), *y32 = g_new(float, logits);
  replicas_predict_alike(r32, r16, initial, 48, y32, y16);
  double rel = relative_difference(y16, y32, logits);
  g_test_message("%s: logits with bf16 storage against float32 storage: %.3g", net_spec, rel);
  g_assert_cmpfloat(rel, >, 0);
  g_assert_cmpfloat(rel, <=, 1.0 / 16);
  /* Nothing grew. */
  g_assert_cmpuint(b16->bytes_in_use, ==, plan16.total);
  g_assert_cmpuint(b32->bytes_in_use, ==, plan32.total);
  g_assert_cmpuint(r16->columns_bytes, ==, plan16.columns);
  tdm_replica_free(r32);
  tdm_replica_free(r16);
  tdm_backend_free(b32);
  tdm_backend_free(b16);
}

void
test_memory_add_bottleneck(void)
{
  g_test_add_func("/memory/bottleneck-resnet50", test_resnet50_plan);
  g_test_add_func("/memory/bottleneck-cpu", test_bottleneck_cpu);
}
