/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-forward.c — the forward walk of a replica over the flat tree of layers
 * (tdm-network.h): each layer as backend operations, blocks as RES_BEGIN … RES_END,
 * batch normalization's statistics handed to the synchronized BN hook between its
 * steps; a bn's output that only a pool or a bf16 conv after it reads is computed by
 * that layer as it reads it (bn_output_left_to_next()); a conv's output that only the
 * bn after it reads is stored as bf16 in a bf16 run (conv_output_bf16()), and the bn
 * reads it so; a block's last bn is computed by the block's end as it adds
 * (bn_forward_add); a block's input and output are stored as bf16 where their readers
 * take it (block_output_bf16()), and a block's end writes its ReLU's mask as bits
 * beside its bf16 output in training, in the same pass (relu_bits_kept()). Also what
 * both walks use: a bn layer's forward (tdm_replica_bn_forward(), with which the
 * backward computes a frozen bn's output again), the stop check and synchronized BN's
 * all-reduce. A conv layer's own forward is tdm-replica-conv.c's, the backward walk
 * tdm-replica-backward.c's. Not the buffers, the gather or the step's shape
 * (tdm-replica.c). */
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"
#include "tdm-conv-columns.h"

gboolean
tdm_replica_bn16(TdmBackend *b)
{
  return b->precision == TDM_PRECISION_BF16 && tdm_backend_has_bn_backward_dx_bf16(b);
}

gboolean
tdm_replica_aborted(TdmReplica *r)
{
  return r->reduce_failed || (r->abort_flag != NULL && g_atomic_int_get(r->abort_flag));
}

gboolean
tdm_replica_bn_reduce(TdmReplica *r, float *buffer, size_t count)
{
  if (r->bn_reduce == NULL || r->reduce_failed)
    return !r->reduce_failed;
  if (!r->bn_reduce(r, buffer, count, r->bn_reduce_data))
    r->reduce_failed = TRUE;
  return !r->reduce_failed;
}

/* y = BN(x) (then ReLU) over rows × C, in the given mode, x of type x_type; work is
 * the layer's bn_work. With y16, y is stored there as bf16 instead (block_output_bf16():
 * the stem's output; in evaluation mode, a frozen bn's, or the inference pass's where
 * the next layer reads bf16, infer_output_bf16()). The statistics: one pass into this replica's slot, one all-reduce of
 * every replica's slots when synchronized, merged in slot order (tdm-bn-moments.h);
 * not synchronized, the one slot's pass computes them too (bn_moments_stats).
 * statistics_only: y is left unwritten (bn_output_left_to_next()). */
void
tdm_replica_bn_forward(TdmReplica *r, TdmPassMode mode, float *y, uint16_t *y16,
                       const void *x, TdmDtype x_type, int n, int pixels, int c,
                       const float *gamma, const float *beta, float *work, float *running,
                       bool relu, gboolean statistics_only)
{
  TdmBackend *b = r->backend;
  int rows = n * pixels;
  if (mode == MODE_EVAL && y16 != NULL) {
    tdm_backend_bn_forward_eval_bf16(b, y16, x, x_type, running, running + c, gamma, beta,
                                     TDM_BN_EPS, rows, c, relu);
    return;
  }
  if (mode == MODE_EVAL) {
    tdm_backend_bn_forward_eval(b, y, x, x_type, running, running + c, gamma, beta, TDM_BN_EPS,
                                rows, c, relu);
    return;
  }
  float *saved = work + 2 * c;
  float *running_mean = mode == MODE_TRAIN ? running : NULL;
  float *running_var = mode == MODE_TRAIN ? running + c : NULL;
  if (r->bn_reduce == NULL) {
    tdm_backend_bn_moments_stats(b, saved, work + 4 * c, x, x_type, rows, c, TDM_BN_EPS,
                                 TDM_BN_MOMENTUM, running_mean, running_var);
  } else {
    float *slots = r->bn_slots;
    tdm_backend_bn_moments(b, slots, x, x_type, rows, c, r->bn_slot, r->bn_slot_count);
    if (!tdm_replica_bn_reduce(r, slots, TDM_BN_SLOT_FLOATS(c) * r->bn_slot_count))
      return;
    tdm_backend_bn_stats(b, saved, slots, r->bn_slot_count, c, TDM_BN_EPS, TDM_BN_MOMENTUM,
                         running_mean, running_var);
  }
  if (statistics_only)
    return;
  if (y16 != NULL)
    tdm_backend_bn_forward_bf16(b, y16, x, x_type, saved, saved + c, gamma, beta, NULL,
                                TDM_DTYPE_F32, rows, c, relu, NULL);
  else
    tdm_backend_bn_forward(b, y, x, x_type, saved, saved + c, gamma, beta, rows, c, relu);
}

/* Block end i's ReLU mask for the pass in progress to write: training's, where the end
 * keeps one (relu_bits_kept()); NULL in evaluation, which no backward follows. */
static uint32_t *
relu_bits_out(const TdmReplica *r, int i, TdmPassMode mode)
{
  return mode != MODE_EVAL && !r->inferring ? r->relu_bits[i] : NULL;
}

/* The end of a block, layer i: y = x + skip, then the block's ReLU (add_out), skip of
 * type skip_type; with y16, y is stored there as bf16 instead (block_output_bf16()),
 * and its mask into bits where not NULL. */
static void
block_end_add(TdmReplica *r, float *y, uint16_t *y16, const float *x, const void *skip,
              TdmDtype skip_type, size_t count, bool relu, uint32_t *bits)
{
  if (y16 != NULL) {
    tdm_backend_add_out_bf16(r->backend, y16, x, skip, skip_type, count, relu, bits);
    return;
  }
  g_assert(bits == NULL);               /* relu_bits_kept() */
  g_assert(skip_type == TDM_DTYPE_F32); /* block_output_bf16() */
  tdm_backend_add_out(r->backend, y, x, skip, count, relu);
}

/* The end of a block, layer i, whose last bn (layer i − 1) left its output to it
 * (bn_folded_into_end()): y = bn(x) + skip, then the block's ReLU, from the bn's input
 * and the statistics its forward saved (from_bn), with bn_forward's then add_out's
 * bits (rounded once into y16 where the block's output is bf16, its ReLU's mask
 * beside it in training); a frozen bn's with the running statistics, written into y
 * (or the free gradient buffer) and added there. */
static void
block_end_bn_add(TdmReplica *r, int i, TdmPassMode mode, const BnGather *from_bn, float *y,
                 uint16_t *y16, const void *skip, TdmDtype skip_type, int n)
{
  TdmBackend *b = r->backend;
  const TdmLayer *end = &r->net->layers[i], *bn = end - 1;
  int rows = n * end->out_h * end->out_w;
  uint32_t *bits = relu_bits_out(r, i, mode);
  if (from_bn != NULL && y16 != NULL) {
    tdm_backend_bn_forward_bf16(b, y16, from_bn->x, from_bn->x_type, from_bn->saved,
                                from_bn->saved + bn->out_c, from_bn->gamma, from_bn->beta, skip,
                                skip_type, rows, bn->out_c, end->fused_relu, bits);
    return;
  }
  if (from_bn != NULL) {
    g_assert(skip_type == TDM_DTYPE_F32); /* block_output_bf16() */
    tdm_backend_bn_forward_add(b, y, from_bn->x, from_bn->x_type, from_bn->saved,
                               from_bn->saved + bn->out_c, from_bn->gamma, from_bn->beta, skip,
                               rows, bn->out_c, end->fused_relu);
    return;
  }
  g_assert(mode == MODE_EVAL || layer_frozen(r, i - 1));
  const float *gamma = r->params + bn->weight_offset, *beta = r->params + bn->bias_offset;
  const float *running = r->state + bn->state_offset;
  int c = bn->out_c;
  if (y16 == NULL) {
    tdm_backend_bn_forward_eval(b, y, r->acts[i - 1], act_type(r, i - 1), running, running + c,
                                gamma, beta, TDM_BN_EPS, rows, c, false);
    block_end_add(r, y, NULL, y, skip, skip_type, (size_t)rows * c, end->fused_relu, NULL);
    return;
  }
  /* A bf16 output: the bn's output in float32 at grad_a, as many rows at a time as a half
   * of the gradient region holds (grad_b may hold a projection's bn output), each chunk
   * added into its rows of y16; with a mask, chunks of a multiple of `align` rows, so
   * that each starts at a word of it (32 elements; one row where c is a multiple of 32,
   * as a network's widths are). */
  int align = 1;
  while (bits != NULL && (size_t)align * c % 32 != 0)
    align *= 2;
  int chunk = (int)MIN((size_t)rows, MAX(r->grad_half_bytes / ((size_t)c * sizeof(float)), 1));
  chunk = MAX(chunk / align * align, MIN(align, rows));
  for (int first = 0; first < rows; first += chunk) {
    int m = MIN(chunk, rows - first);
    size_t at = (size_t)first * c;
    tdm_backend_bn_forward_eval(b, r->grad_a,
                                tdm_conv_advanced(r->acts[i - 1], act_type(r, i - 1), at),
                                act_type(r, i - 1), running, running + c, gamma, beta,
                                TDM_BN_EPS, m, c, false);
    block_end_add(r, NULL, y16 + at, r->grad_a, tdm_conv_advanced(skip, skip_type, at),
                  skip_type, (size_t)m * c, end->fused_relu,
                  bits != NULL ? bits + at / 32 : NULL);
  }
}

/* Whether the bn of block end i's projection writes its output as bf16 in the pass in
 * progress: training's, where the block's output is bf16 (projection_bn_bf16()). */
static gboolean
projection_bn16(const TdmReplica *r, int i)
{
  return !r->inferring && projection_bn_bf16(r->net, i, r->stores_bf16);
}

/* Whether bn layer i is a frozen one whose output a bf16 pool reads in training
 * (bn_output_to_pool()): it writes it into the free gradient buffer as bf16 (with
 * bn_forward_eval_bf16), half the room. */
static gboolean
frozen_bn_to_pool(const TdmReplica *r, int i)
{
  return !r->inferring && layer_frozen(r, i) && bn_output_to_pool(r->net, i, r->stores_bf16);
}

/* Max pool layer i of the bf16 way (pool_bf16()) into y16: from the bn's input as it
 * normalizes it where the bn left its output to the pool (from_bn), else from x, the
 * output a frozen bn wrote as bf16 into the free gradient buffer (frozen_bn_to_pool()). */
static void
pool_forward_bf16(TdmReplica *r, int i, uint16_t *y16, const float *x, const BnGather *from_bn,
                  int n)
{
  const TdmLayer *l = &r->net->layers[i];
  TdmDtype x_type = frozen_bn_to_pool(r, i - 1) ? TDM_DTYPE_BF16 : act_type(r, i);
  if (from_bn != NULL)
    tdm_backend_maxpool_forward_bf16(r->backend, y16, r->argmax[i], from_bn->x, from_bn->x_type,
                                     from_bn->saved, from_bn->saved + l->in_c, from_bn->gamma,
                                     from_bn->beta, from_bn->relu, n, l->in_h, l->in_w, l->in_c,
                                     l->kernel);
  else
    tdm_backend_maxpool_forward_bf16(r->backend, y16, r->argmax[i], x, x_type, NULL, NULL, NULL,
                                     NULL, false, n, l->in_h, l->in_w, l->in_c, l->kernel);
}

/* Whether bn layer i, with its ReLU, leaves its output to the block's end after it in
 * the pass in progress (bn_relu_output_to_block_end(): training's buffers, batch
 * statistics; a frozen bn writes it into the free gradient buffer). */
static gboolean
bn_relu_folded_into_end(const TdmReplica *r, int i, TdmPassMode mode)
{
  return mode != MODE_EVAL && !r->inferring && !layer_frozen(r, i) &&
         bn_relu_output_to_block_end(r->net, i, r->stores_bf16);
}

/* The end of a block, layer i, whose last bn (with its ReLU, layer i − 1) left its output
 * to it: y16 = relu(bn(x)) + skip rounded once, from the bn's input and the statistics
 * its forward saved (from_bn). */
static void
block_end_bn_relu_add(TdmReplica *r, int i, const BnGather *from_bn, uint16_t *y16,
                      const void *skip, TdmDtype skip_type, int n)
{
  const TdmLayer *end = &r->net->layers[i], *bn = end - 1;
  g_assert(y16 != NULL && from_bn->relu); /* bn_relu_output_to_block_end() */
  tdm_backend_bn_relu_add_bf16(r->backend, y16, from_bn->x, from_bn->x_type, from_bn->saved,
                               from_bn->saved + bn->out_c, from_bn->gamma, from_bn->beta, skip,
                               skip_type, n * end->out_h * end->out_w, bn->out_c);
}

void
tdm_replica_forward(TdmReplica *r, int n, TdmPassMode mode)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  int first = 0;
  if (r->params16 != NULL)
    tdm_backend_to_bf16(b, r->params16, r->params, net->parameter_count);
  BnGather gather;
  const BnGather *pending = NULL; /* a bn's output left to the next layer (im2col, pool) */
  if (conv_pool_first(net)) {
    const TdmLayer *l = &net->layers[0];
    tdm_backend_conv_pool_forward(b, r->acts[2], r->argmax[1], r->acts[0],
                                  r->params + l->weight_offset, r->params + l->bias_offset,
                                  l->fused_relu, n, l->in_h, l->in_w, l->in_c, l->out_c,
                                  l->kernel, l->kernel, l->pad, net->layers[1].kernel);
    first = 2;
  }
  for (int i = first; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (!r->inferring)
      tdm_replica_use_window(r, i);
    /* A bn's output that has no buffer (bn_output_to_conv()) but that a frozen bn
     * writes all the same goes to the gradient buffer, free until the loss. */
    const float *x = r->acts[i] != NULL ? r->acts[i] : r->grad_a;
    float *y = r->acts[i + 1] != NULL ? r->acts[i + 1] : r->grad_a;
    const float *w = r->params + l->weight_offset;
    const float *bias = r->params + l->bias_offset;
    size_t out = (size_t)n * layer_out_floats(l);
    int pixels = l->out_h * l->out_w;
    /* y as bf16, where this layer's output is stored so (output_bf16()), or where a
     * frozen bn writes it into the gradient buffer for its bf16 pool. */
    uint16_t *y16 = act_type(r, i + 1) == TDM_DTYPE_BF16 || frozen_bn_to_pool(r, i) ||
                            frozen_bn_to_conv(r, i)
                        ? (uint16_t *)y
                        : NULL;
    const BnGather *from_bn = pending;
    pending = NULL;
    switch (l->kind) {
    case TDM_LAYER_LINEAR: {
      int in = l->in_h * l->in_w * l->in_c;
      tdm_backend_gemm(b, false, true, n, l->out_c, in, 1.0f, x, in, w, in, 0.0f, y, l->out_c);
      if (l->bias_count > 0)
        tdm_backend_bias_forward(b, y, bias, n, l->out_c, 1, l->fused_relu);
      else if (l->fused_relu)
        tdm_backend_relu_forward(b, y, y, out);
      break;
    }
    case TDM_LAYER_CONV:
      tdm_replica_conv_forward(
          r, y, y16, x, i >= 1 && frozen_bn_to_conv(r, i - 1) ? TDM_DTYPE_BF16 : act_type(r, i),
          from_bn, r->cols[i], r->conv_work[i], w, n, l->in_h, l->in_w, l->in_c, l->out_c,
          l->kernel, l->pad, l->stride, l->out_h, l->out_w);
      if (bias_in_pool(net, i))
        break;
      if (l->bias_count > 0)
        tdm_backend_bias_forward(b, y, bias, n * pixels, l->out_c, 1, l->fused_relu);
      else if (l->fused_relu)
        tdm_backend_relu_forward(b, y, y, out);
      break;
    case TDM_LAYER_POOL: {
      if (!tdm_layer_pool_tiles(l) && from_bn != NULL) {
        /* The bn before it left its output unwritten (bn_output_to_pool_bf16()). */
        tdm_backend_maxpool2d_forward_bn(b, y, act_type(r, i + 1), r->argmax[i], from_bn->x,
                                         from_bn->x_type, from_bn->saved,
                                         from_bn->saved + l->in_c, from_bn->gamma,
                                         from_bn->beta, from_bn->relu, pool2d_of(l, n));
        break;
      }
      if (!tdm_layer_pool_tiles(l)) {
        tdm_backend_maxpool2d_forward(b, y, act_type(r, i + 1), r->argmax[i], x, act_type(r, i),
                                      pool2d_of(l, n));
        break;
      }
      if (y16 != NULL) {
        pool_forward_bf16(r, i, y16, x, from_bn, n);
        break;
      }
      if (from_bn != NULL) {
        g_assert(from_bn->x_type == TDM_DTYPE_F32); /* conv_output_bf16() */
        tdm_backend_maxpool_forward_bn(b, y, r->argmax[i], from_bn->x, from_bn->saved,
                                       from_bn->saved + l->in_c, from_bn->gamma, from_bn->beta,
                                       from_bn->relu, n, l->in_h, l->in_w, l->in_c, l->kernel);
        break;
      }
      const TdmLayer *conv = i > 0 && bias_in_pool(net, i - 1) ? l - 1 : NULL;
      tdm_backend_maxpool_forward(
          b, y, r->argmax[i], x, conv ? r->params + conv->bias_offset : NULL,
          conv != NULL && conv->fused_relu, n, l->in_h, l->in_w, l->in_c, l->kernel);
      break;
    }
    case TDM_LAYER_RELU:
      tdm_backend_relu_forward(b, y, x, out);
      break;
    case TDM_LAYER_FLATTEN:
    case TDM_LAYER_RES_BEGIN:
      break;
    case TDM_LAYER_BN: {
      TdmPassMode bn_mode = layer_frozen(r, i) ? MODE_EVAL : mode;
      if (bn_mode == MODE_EVAL && bn_folded_into_end(r, i))
        break; /* the block's end normalizes with the running statistics */
      gboolean gathered = bn_folded_into_end(r, i) || bn_relu_folded_into_end(r, i, bn_mode) ||
                          bn_output_left_to_next(r, i, n, bn_mode);
      tdm_replica_bn_forward(r, bn_mode, y, y16, x, act_type(r, i), n, pixels, l->out_c, w,
                             bias, r->bn_work[i], r->state + l->state_offset, l->fused_relu,
                             gathered);
      if (gathered) {
        gather =
            (BnGather){x, act_type(r, i), r->bn_work[i] + 2 * l->out_c, w, bias, l->fused_relu};
        pending = &gather;
      }
      break;
    }
    case TDM_LAYER_AVGPOOL:
      if (!tdm_layer_pool_tiles(l))
        tdm_backend_avgpool2d_forward(b, y, x, pool2d_of(l, n));
      else
        tdm_backend_avgpool_forward(b, y, x, n, l->in_h, l->in_w, l->in_c, l->kernel);
      break;
    case TDM_LAYER_GLOBAL_AVG: {
      size_t in = (size_t)n * l->in_h * l->in_w * l->in_c;
      tdm_backend_global_avgpool_forward(
          b, y, tdm_replica_as_f32(r, x, act_type(r, i), in, r->grad_a), n, l->in_h * l->in_w,
          l->in_c);
      break;
    }
    case TDM_LAYER_GLOBAL_MAX: {
      size_t in = (size_t)n * l->in_h * l->in_w * l->in_c;
      tdm_backend_global_maxpool_forward(
          b, y, r->argmax[i], tdm_replica_as_f32(r, x, act_type(r, i), in, r->grad_a), n,
          l->in_h * l->in_w, l->in_c);
      break;
    }
    case TDM_LAYER_DROPOUT:
      if (mode == MODE_EVAL || l->rate == 0.0f)
        tdm_backend_copy(b, y, x, out * sizeof(float));
      else
        tdm_backend_dropout_forward(b, y, x, r->indices, n, (int)layer_out_floats(l), l->rate,
                                    dropout_key(r, i), r->epoch);
      break;
    case TDM_LAYER_SCALE:
      tdm_backend_copy(b, y, x, out * sizeof(float));
      tdm_backend_scale(b, y, l->factor, out);
      break;
    case TDM_LAYER_RES_END: {
      const TdmLayer *begin = &net->layers[l->partner];
      const void *skip = r->acts[l->partner];
      TdmDtype skip_type = act_type(r, l->partner);
      if (l->projection) {
        TdmDtype pt = projection_type(r);
        /* Its conv's output at grad_a where no buffer keeps it
         * (projection_output_recomputed(): block_end_backward() computes it again). */
        float *proj = r->proj_conv[i] != NULL ? r->proj_conv[i] : r->grad_a;
        g_assert(r->proj_conv[i] != NULL || pt == TDM_DTYPE_BF16);
        tdm_replica_conv_forward(r, proj, pt == TDM_DTYPE_BF16 ? (uint16_t *)proj : NULL, skip,
                                 skip_type, NULL, r->cols[i], NULL, w, n, begin->in_h,
                                 begin->in_w, begin->in_c, l->out_c, 1, 0, l->stride, l->out_h,
                                 l->out_w);
        /* Its bn's output, which the add alone reads, as bf16 where the add writes the
         * block's output so (the add reads its skip of either type): half the room in
         * the gradient buffer, rounded once as autocast's bn output is. */
        uint16_t *skip16 = projection_bn16(r, i) ? (uint16_t *)r->proj_bn[i] : NULL;
        tdm_replica_bn_forward(r, layer_frozen(r, i) ? MODE_EVAL : mode, r->proj_bn[i], skip16,
                               proj, pt, n, pixels, l->out_c, bias, bias + l->out_c,
                               r->bn_work[i], r->state + l->state_offset, false, FALSE);
        skip = r->proj_bn[i];
        skip_type = skip16 != NULL ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
      }
      if (bn_folded_into_end(r, i - 1))
        block_end_bn_add(r, i, mode, from_bn, y, y16, skip, skip_type, n);
      else if (from_bn != NULL && bn_relu_folded_into_end(r, i - 1, mode))
        block_end_bn_relu_add(r, i, from_bn, y16, skip, skip_type, n);
      else
        block_end_add(r, y, y16, x, skip, skip_type, out, l->fused_relu,
                      relu_bits_out(r, i, mode));
      break;
    }
    }
    if (tdm_replica_aborted(r))
      return;
  }
}
