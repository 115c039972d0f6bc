/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-memory.h — what test-memory.c and its parts share: the activations and
 * gradients a bf16 run stores as bf16 and the skip-gradient buffers, counted here from
 * the layers, and each part's registration of its tests. Header-only (test helpers). */
#pragma once

#include "tdm-backend.h"
#include "tdm-network.h"
#include "tdm-precision.h"
#include "tdm-replica-private.h"

#include <glib.h>

static inline gboolean pool_tensor_bf16 (const TdmNetwork *net, int i);

/* Elements per sample of the conv outputs a bf16 run stores as bf16: each conv without
 * a bias or ReLU of its own whose next layer is a bn and whose bn is not followed by a
 * pool that tiles (its kernel its stride, no padding) other than a bf16 one: it would
 * normalize the conv's output as it reads it, in float32 (tdm-replica-private.h's rule,
 * spelt out here from the layers). */
static inline size_t
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

/* Elements per sample of the stem's output a bf16 run keeps no buffer for: the network's
 * first layer, a conv without a bias or ReLU of its own with columns (not a 1×1 conv of
 * stride 1), a bn next, whose input gradient the conv reads as bf16 (a stem with float32
 * columns, or bf16 ones: out_c ≤ its reduction), and a residual block right after the
 * bn whose gradients are kept as bf16 (block_grad_bf16(): its start's sum in the skip
 * buffer), not one whose pool comes next. Counted in bf16_conv_outputs() too (the half
 * a bf16 output saves); the other half goes with it. */
static inline size_t
bf16_stem_outputs_recomputed(const TdmNetwork *net)
{
  if (net->layer_count < 4)
    return 0;
  const TdmLayer *l = &net->layers[0];
  gboolean columns =
      l->kind == TDM_LAYER_CONV && !(l->kernel == 1 && l->stride == 1 && l->pad == 0);
  if (!columns || l->bias_count != 0 || l->fused_relu || net->layers[1].kind != TDM_LAYER_BN ||
      net->layers[2].kind != TDM_LAYER_RES_BEGIN ||
      !block_grad_bf16(net, net->layers[2].partner, TRUE))
    return 0;
  return (size_t)l->out_h * l->out_w * l->out_c;
}

/* Elements per sample of the projections' conv outputs a bf16 run keeps no buffer for:
 * where the block's output is bf16 (its projection's bn writes bf16) and its gradients
 * are kept as bf16 (block_grad_bf16()). Counted in bf16_projection_outputs() too. */
static inline size_t
bf16_projection_outputs_recomputed(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind == TDM_LAYER_RES_END && l->projection && block_output_bf16(net, i, TRUE) &&
        block_grad_bf16(net, i, TRUE))
      sum += (size_t)l->out_h * l->out_w * l->out_c;
  }
  return sum;
}

/* Elements per sample of the projections' conv outputs, which a bf16 run stores as bf16
 * too (their one reader is the projection's bn). */
static inline size_t
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

/* Whether conv layer c takes bf16 operands both ways in a bf16 run: a 1×1 conv of no
 * padding (of any stride and width: its input is its columns), or one with columns (not
 * 1×1 of stride 1 and no padding) whose outputs are no more than its reduction. */
static inline gboolean
conv_reads_bf16(const TdmLayer *c)
{
  if (c->kind != TDM_LAYER_CONV)
    return FALSE;
  if (c->kernel == 1 && c->pad == 0)
    return TRUE;
  return c->out_c <= c->in_c * c->kernel * c->kernel;
}

/* Elements per sample of the bn outputs a bf16 run keeps no buffer for: each bn whose
 * next layer is a conv that takes bf16 operands (conv_reads_bf16()); that conv
 * normalizes the bn's input as it builds its columns (or its bf16 copy of a 1×1 conv's
 * input). */
static inline size_t
bf16_bn_outputs_to_conv(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i + 1 < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i], *c = &net->layers[i + 1];
    if (l->kind == TDM_LAYER_BN && conv_reads_bf16(c))
      sum += (size_t)l->out_h * l->out_w * l->out_c;
  }
  return sum;
}

/* Whether a pool layer tiles its input (its window its stride, no padding). */
static inline gboolean
pool_tiles(const TdmLayer *l)
{
  return l->kernel == l->stride && l->pad == 0;
}

/* Elements per sample of the bn outputs a bf16 run keeps no buffer for because the max
 * pool after them, one that does not tile (their one reader; torchvision's stem),
 * normalizes the bn's input as it reads it. */
static inline size_t
bf16_bn_outputs_to_pool2d(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i + 1 < net->layer_count; i++)
    if (net->layers[i].kind == TDM_LAYER_BN && net->layers[i + 1].kind == TDM_LAYER_POOL &&
        !pool_tiles(&net->layers[i + 1]))
      sum += (size_t)net->layers[i].out_h * net->layers[i].out_w * net->layers[i].out_c;
  return sum;
}

static inline gboolean block_tensor_bf16 (const TdmNetwork *net, int i);

/* Whether every reader of layer i's output reads it as bf16 in a bf16 run: the layer
 * after the blocks that start there reads bf16 (a bn not followed by a pool other than
 * a bf16 one, a global pool, or a conv that takes bf16 operands), and each of those
 * blocks projects its input or ends in bf16 itself
 * (tdm-replica-private.h's rule, spelt out here). */
static inline gboolean
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
  return conv_reads_bf16(reader);
}

/* Whether layer i's output, a residual block's end or a bn or a max pool that does not
 * tile just before a block's start, is stored as bf16 in a bf16 run: where its readers
 * take bf16. */
static inline gboolean
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
static inline gboolean
pool_tensor_bf16(const TdmNetwork *net, int i)
{
  const TdmLayer *l = &net->layers[i];
  return l->kind == TDM_LAYER_POOL && l->stride == l->kernel && l->pad == 0 && i >= 1 &&
         net->layers[i - 1].kind == TDM_LAYER_BN && readers_bf16(net, i);
}

/* Elements per sample of the bf16 pools' outputs (stored as bf16), and of their bns'
 * outputs (no buffer). */
static inline size_t
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
static inline size_t
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

static inline size_t
bf16_bn_outputs_to_pool(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 1; i < net->layer_count; i++)
    if (pool_tensor_bf16(net, i))
      sum += (size_t)net->layers[i].in_h * net->layers[i].in_w * net->layers[i].in_c;
  return sum;
}

/* Elements per sample of those block tensors. */
static inline size_t
bf16_block_outputs(const TdmNetwork *net)
{
  size_t sum = 0;
  for (int i = 0; i < net->layer_count; i++)
    if (block_tensor_bf16(net, i))
      sum += (size_t)net->layers[i].out_h * net->layers[i].out_w * net->layers[i].out_c;
  return sum;
}

/* Bytes of the ReLU masks a bf16 run keeps for cap samples beside its blocks' bf16
 * outputs, for backward: a bit an element of each block end with a ReLU whose output is
 * stored as bf16, in whole 32-bit words, each mask a piece of the activation arena (a
 * multiple of 16 bytes). */
static inline size_t
bf16_relu_bits_bytes(const TdmNetwork *net, size_t cap)
{
  size_t sum = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind != TDM_LAYER_RES_END || !l->fused_relu || !block_tensor_bf16(net, i))
      continue;
    size_t words = (cap * l->out_h * l->out_w * l->out_c + 31) / 32;
    sum += (words * 4 + 15) / 16 * 16;
  }
  return sum;
}

/* Bytes per sample of the skip-gradient buffers a replica keeps: one per level of
 * nesting, the level's largest skip gradient as kept (tdm_replica_layer_buffers()). */
static inline size_t
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

/* Registers test-memory-bf16.c's tests, test-memory-workspace.c's,
 * test-memory-bottleneck.c's and test-memory-skip.c's. */
void test_memory_add_bf16 (void);
void test_memory_add_workspace (void);
void test_memory_add_bottleneck (void);
void test_memory_add_skip (void);
