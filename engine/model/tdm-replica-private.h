/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-private.h — what tdm-replica.c (buffers, evaluation),
 * tdm-replica-plan.c (their sizes, the memory plan), tdm-replica-train.c (the training
 * step), tdm-replica-forward.c and tdm-replica-backward.c (the walks over the layers)
 * and tdm-replica-conv.c (a conv layer's forward and backward) share: the buffer layout
 * rules, the plan's sizing and the passes (those of the backward-only buffers, the skip
 * buffers and the gradient windows, in tdm-replica-windows.h). Not for anything else. */
#pragma once

#include "tdm-replica.h"
#include "tdm-counter-rng.h"
#include "tdm-relu-bits.h"

typedef enum {
  MODE_EVAL,                   /* running statistics, no dropout */
  MODE_TRAIN,                  /* batch statistics, running averages move */
  MODE_PROBE,                  /* batch statistics, running averages left alone */
} TdmPassMode;

/* The forward pass over n samples already gathered into acts[0]. */
void tdm_replica_forward (TdmReplica *r, int n, TdmPassMode mode);
/* The backward pass from the loss gradient in grad_a. */
void tdm_replica_backward (TdmReplica *r, int n);
/* The per-channel normalization of the count samples gathered into acts[0], where the
 * replica normalizes. */
void tdm_replica_normalize_input (TdmReplica *r, int count);
/* Whether a bn's input gradient may go to the conv before it as bf16 on this backend
 * (bn_dx_to_conv()'s bn16): a bf16 run where it has bn_backward_dx_bf16. */
gboolean tdm_replica_bn16 (TdmBackend *b);
/* A stop was asked for, or a synchronized BN all-reduce failed. */
gboolean tdm_replica_aborted (TdmReplica *r);
/* Synchronized BN's all-reduce through the hook; FALSE (and sticky) on failure. */
gboolean tdm_replica_bn_reduce (TdmReplica *r, float *buffer, size_t count);
/* A bn layer's forward, y = BN(x) (then ReLU), its batch statistics first in training
 * (tdm-replica-forward.c, the comment there); the backward computes a frozen bn's
 * output again with it. */
void tdm_replica_bn_forward (TdmReplica *r, TdmPassMode mode, float *y, uint16_t *y16,
                             const void *x, TdmDtype x_type, int n, int pixels, int c,
                             const float *gamma, const float *beta, float *work,
                             float *running, bool relu, gboolean statistics_only);

/* A training bn's output that the layer after it computes from the bn's input as it
 * reads it (bn_output_left_to_next()). */
typedef struct {
  const void *x;               /* the bn's input, of type x_type */
  TdmDtype x_type;
  const float *saved;          /* mean[C], then invstd[C] (bn_work + 2C) */
  const float *gamma, *beta;
  bool relu;
} BnGather;

/* tdm-replica-conv.c: a conv layer's forward and backward (their comments there), the
 * rules of its bf16 columns, and a bf16 tensor widened for a float32 reader. */
gboolean tdm_replica_conv_bf16 (TdmReplica *r, const float *col, int kernel, int pad, int rows,
                                int k, int out_c);
gboolean tdm_replica_conv_bf16_dx (TdmReplica *r, int rows, int k, int out_c);
const float *tdm_replica_as_f32 (TdmReplica *r, const void *x, TdmDtype x_type, size_t count,
                                 float *spare);
void tdm_replica_conv_forward (TdmReplica *r, float *y, uint16_t *y16, const void *x,
                               TdmDtype x_type, const BnGather *bn, float *col, float *work,
                               const float *w, int n, int in_h, int in_w, int in_c, int out_c,
                               int kernel, int pad, int stride, int out_h, int out_w);
TdmDtype tdm_replica_conv_backward (TdmReplica *r, float *dx, gboolean dx_bf16, float *dw,
                                    const float *dy, const uint16_t *dy16, const void *x,
                                    TdmDtype x_type, const BnGather *bn, float *col, float *work,
                                    const float *w, int n, int in_h, int in_w, int in_c,
                                    int out_c, int kernel, int pad, int stride, int out_h,
                                    int out_w, gboolean need_dx);

/* Notes that a convolution needs `bytes` of the workspace (its choice's need, or the
 * replica's own columns), and grows the workspace where it holds less (its first
 * `keep` bytes carried over: a bf16 output gradient the bn wrote there): the first
 * run's pre-warm, which starts it small, or a shape the pre-warm did not meet after
 * tdm_replica_fit_workspace(). FALSE (the backend's sticky error set) when the device
 * has no room for it. */
gboolean tdm_replica_workspace_holds (TdmReplica *r, size_t bytes, size_t keep);
/* The same growth without noting the need: room the convolution engine asks for to
 * time its candidates, more than the one it then chooses may need. */
gboolean tdm_replica_workspace_grow (TdmReplica *r, size_t bytes, size_t keep);

/* The storage rules below call one another (a pool's output type follows its readers',
 * a block's its own readers'): declared here, defined with their comments. */
static inline gboolean pool_bf16(const TdmNetwork *net, int i, gboolean stores16);
static inline gboolean readers_take_bf16(const TdmNetwork *net, int i, gboolean stores16);
static inline gboolean block_output_bf16(const TdmNetwork *net, int i, gboolean stores16);

/* Layer i's im2col columns, in floats per sample (0 for other layers). Each conv
 * layer keeps its own, so that backward reuses the forward's instead of rebuilding
 * them (a copy as large as the columns themselves, per layer and step). */
static inline gboolean
direct_1x1(const TdmLayer *l)
{
  return l->kind == TDM_LAYER_CONV && l->kernel == 1 && l->stride == 1 && l->pad == 0;
}

static inline size_t
col_floats_per_sample(const TdmNetwork *net, const TdmLayer *l)
{
  /* A 1×1 conv of stride 1 multiplies its input as it is: no columns. */
  if (l->kind == TDM_LAYER_CONV && !direct_1x1(l))
    return (size_t)l->out_h * l->out_w * l->in_c * l->kernel * l->kernel;
  if (l->kind == TDM_LAYER_RES_END && l->projection && l->stride > 1)
    return (size_t)l->out_h * l->out_w * net->layers[l->partner].in_c;
  return 0;
}

/* Floats per sample of layer l's output. */
static inline size_t
layer_out_floats(const TdmLayer *l)
{
  return (size_t)l->out_h * l->out_w * l->out_c;
}

/* Whether conv layer l takes bf16 operands both ways in a bf16 run
 * (tdm_replica_conv_bf16()'s rule): a conv with columns whose outputs are no more than
 * its reduction (the layout's), or any 1×1 conv of no padding, whose "columns" are its
 * input itself (every stride-th pixel of it): read as it is where it is stored as bf16,
 * else a bf16 copy a chunk at a time (normalized where a bn left its output to it), and
 * whose output gradient as bf16 goes before that chunk in the workspace whatever its
 * width (the replica keeps params16: no room for the weights). ResNet-50's bottlenecks
 * are mostly such convs. */
static inline gboolean
conv_bf16_columns(const TdmNetwork *net, const TdmLayer *l)
{
  if (l->kind != TDM_LAYER_CONV)
    return FALSE;
  if (l->kernel == 1 && l->pad == 0)
    return TRUE;
  return col_floats_per_sample(net, l) > 0 && l->out_c <= l->in_c * l->kernel * l->kernel;
}

/* The channels a layer normalizes (bn, or a projection's bn), else 0. */
static inline int
bn_channels(const TdmLayer *l)
{
  return (int)(l->state_count / 2);
}

/* Whether conv layer i hands its bias, and its ReLU if it has one, to the pool after
 * it (maxpool_forward applies them after the max, on a quarter of the elements, and
 * maxpool_backward masks by the pool's output, so the conv runs neither bias_forward
 * nor relu_backward). Its own output then holds the bare product. */
static inline gboolean
bias_in_pool(const TdmNetwork *net, int i)
{
  return net->layers[i].kind == TDM_LAYER_CONV && net->layers[i].bias_count > 0 &&
         i + 1 < net->layer_count && net->layers[i + 1].kind == TDM_LAYER_POOL &&
         tdm_layer_pool_tiles(&net->layers[i + 1]);
}

/* Whether the first layer is a small conv whose pool comes next, so that the two run
 * as conv_pool_forward and conv_pool_backward: no columns, and the conv's output is
 * never stored (nor its gradient, which a first layer does not pass on). */
static inline gboolean
conv_pool_first(const TdmNetwork *net)
{
  const TdmLayer *l = &net->layers[0];
  return bias_in_pool(net, 0) && l->stride == 1 &&
         l->in_c * l->kernel * l->kernel <= TDM_CONV_POOL_TAPS && l->out_c <= TDM_CONV_POOL_OUT;
}

/* Whether layer i's output is a buffer of its own (flatten and a block's start only
 * rename; the conv of a conv_pool_first network has none). */
static inline gboolean
owns_output(const TdmNetwork *net, int i)
{
  TdmLayerKind kind = net->layers[i].kind;
  return kind != TDM_LAYER_FLATTEN && kind != TDM_LAYER_RES_BEGIN &&
         !(i == 0 && conv_pool_first(net));
}

/* Whether bn layer i's output has no buffer in training: a bn without a ReLU of its
 * own that ends a residual block, whose one reader is the block's add (its backward
 * reads its input, the block's end its own output), so the block's end computes it as
 * it adds (bn_forward_add). The inference pass's buffers are the rotating ones. */
static inline gboolean
bn_output_to_block_end(const TdmNetwork *net, int i)
{
  const TdmLayer *l = &net->layers[i];
  return l->kind == TDM_LAYER_BN && !l->fused_relu && i + 1 < net->layer_count &&
         net->layers[i + 1].kind == TDM_LAYER_RES_END;
}

/* Whether bn layer i's output has no buffer in training because the conv after it,
 * its one reader, normalizes the bn's input as it builds its bf16 columns, in the
 * forward and again in its backward (im2col_bf16_bn, or the convolution engine's bn
 * prologue; bn_output_left_to_next() below): a bf16 run that stores
 * activations as bf16 (stores16: tdm_replica_stores_bf16()), a conv with columns whose
 * output gradient fits beside them (out_c ≤ its reduction; the replica keeps params16,
 * so nothing else needs the room, at any batch size). A frozen bn writes its output
 * into the free gradient buffer instead, and the conv's backward recomputes it. */
static inline gboolean
bn_output_to_conv(const TdmNetwork *net, int i, gboolean stores16)
{
  if (net->layers[i].kind != TDM_LAYER_BN || i + 1 >= net->layer_count)
    return FALSE;
  return stores16 && conv_bf16_columns(net, &net->layers[i + 1]);
}

/* Whether bn layer i's output, which the conv after it could normalize as it reads it
 * (bn_output_to_conv()), is stored instead, as bf16, for that conv to read as a stored
 * input in its forward and its weight gradient (no normalized copies there): where it
 * takes at most bn_store bytes a sample (tdm_replica_bn_store(); 0: none). The bn's
 * forward writes it in one pass (bn_forward_bf16, the bits the conv's prologue rounds
 * to); its backward reads its input as before. A frozen one writes it there too. */
static inline gboolean
bn_output_stored(const TdmNetwork *net, int i, gboolean stores16, size_t bn_store)
{
  return bn_output_to_conv(net, i, stores16) &&
         layer_out_floats(&net->layers[i]) * sizeof(uint16_t) <= bn_store;
}

/* Whether bn layer i writes its input gradient as the bf16 output gradient of the conv
 * before it, over its own input (bn_dx_over_input()), in place (bn_dx_in_place()) or at
 * the workspace's start (tdm-replica-backward.c's bn_dx_as_conv_dy16(), which grows the
 * workspace where it holds less), so that no gradient buffer holds it: a
 * bf16 run on a backend with bn_backward_dx_bf16 (bn16; every conv composed there, the
 * parameters' bf16 copy kept), a conv with no bias or ReLU of its own, and either bf16
 * columns both ways (columns, out_c ≤ its reduction), whose products read the gradient
 * as bf16 anyway, or the network's first layer with columns (a stem of few input
 * channels, float32 columns): it passes no gradient on, and its weight gradient reads
 * the bf16 gradient widened a chunk at a time (TdmConvComposition's dy16; the
 * convolution engine reads it as bf16, as it would round it). */
static inline gboolean
bn_dx_to_conv(const TdmNetwork *net, int i, gboolean bn16)
{
  if (!bn16 || i < 1 || net->layers[i].kind != TDM_LAYER_BN)
    return FALSE;
  const TdmLayer *conv = &net->layers[i - 1];
  if (conv->kind != TDM_LAYER_CONV || conv->bias_count != 0 || conv->fused_relu)
    return FALSE;
  return conv_bf16_columns(net, conv) || (i == 1 && col_floats_per_sample(net, conv) > 0);
}

/* Whether bn layer i writes that bf16 gradient (bn_dx_to_conv()) in place over its own
 * output gradient in the gradient region, not at the workspace's start: where the conv
 * before it is the network's first layer (it passes no gradient on: nothing else is
 * written while it reads) and the max pool after the bn, one that does not tile, wrote
 * the bn's output gradient there as bf16 of the same shape (pool_dx_bf16(); the pool's
 * input gradient is always in the region): torchvision's stem. bn_backward_dx_bf16 reads
 * each element before it writes it. The conv's backward reads it there, and the
 * workspace holds no copy of it (205.5 MB at 224 px, batch 128). */
static inline gboolean pool_dx_bf16(const TdmNetwork *net, int i, gboolean stores16);

static inline gboolean
bn_dx_in_place(const TdmNetwork *net, int i, gboolean stores16, gboolean bn16)
{
  return i == 1 && bn_dx_to_conv(net, i, bn16) && i + 1 < net->layer_count &&
         net->layers[i + 1].kind == TDM_LAYER_POOL &&
         !tdm_layer_pool_tiles(&net->layers[i + 1]) && pool_dx_bf16(net, i + 1, stores16);
}

/* Whether bn layer i writes that bf16 gradient (bn_dx_to_conv()) over its own input, the
 * conv's bf16 output (conv_output_bf16(): stored, or the stem's computed again at grad_a,
 * stem_output_recomputed()), not at the workspace's start: nothing reads that output
 * after the bn's backward (the conv has no bias and no ReLU of its own, so its backward
 * reads its input and this gradient; the conv after the bn, which may gather its input
 * from the bn's, went back before it; a block's start summed the bn's statistics before
 * it), and bn_backward_dx_bf16 reads each element before it writes it. The conv's
 * backward reads it there, and the workspace holds no copy: 268 MB of a CIFAR ResNet-18's
 * first stage at 128 px and batch 128. */
static inline gboolean conv_output_bf16(const TdmNetwork *net, int i, gboolean stores16);

static inline gboolean
bn_dx_over_input(const TdmNetwork *net, int i, gboolean stores16, gboolean bn16)
{
  return bn_dx_to_conv(net, i, bn16) && !bn_dx_in_place(net, i, stores16, bn16) &&
         conv_output_bf16(net, i - 1, stores16);
}

/* Whether bn layer i, with a ReLU of its own, has no buffer in training because the
 * block's end after it (no ReLU of its own), its one reader, computes it as it adds it
 * into the block's bf16 output (bn_relu_add_bf16, from the bn's input and the
 * statistics its forward saved; block_output_bf16()): the resnet preset's bodies, which
 * end with bn, relu inside the block (stores16). Its backward reads its input, the
 * block's end no output, so nothing is lost. A frozen bn writes its output into the
 * free gradient buffer, and the end adds it from there. */
static inline gboolean
bn_relu_output_to_block_end(const TdmNetwork *net, int i, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  if (l->kind != TDM_LAYER_BN || !l->fused_relu || i + 1 >= net->layer_count)
    return FALSE;
  const TdmLayer *end = &net->layers[i + 1];
  return end->kind == TDM_LAYER_RES_END && !end->fused_relu && end->partner < i &&
         block_output_bf16(net, i + 1, stores16);
}

/* Whether max pool layer i writes its input gradient as bf16 (stores16): a bf16 pool
 * (pool_bf16()), or one that does not tile after a bn: its reader, the bn before it,
 * reads either type (torchvision's stem). */
static inline gboolean
pool_dx_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  if (pool_bf16(net, i, stores16))
    return TRUE;
  return stores16 && l->kind == TDM_LAYER_POOL && !tdm_layer_pool_tiles(l) && i >= 1 &&
         net->layers[i - 1].kind == TDM_LAYER_BN;
}

/* Whether conv layer i's output is stored as bf16 in training: in a run that stores
 * activations as bf16 (stores16: tdm_replica_stores_bf16()), when the bn after it is its
 * one reader (its statistics, its normalization, its backward; or the conv after the
 * bn, which normalizes it as it reads it, bn_output_left_to_next()). Not where the conv
 * has a bias or a ReLU of its own (they read and write its output in float32), nor
 * where a tiling pool follows the bn that is not a bf16 one (pool_bf16(): the float32
 * pool's normalize-on-read takes float32 only); a pool that does not tile (torchvision's
 * stem, 3×3 of stride 2) reads the bn's own output. The inference pass's buffers stay
 * float32. */
static inline gboolean
conv_output_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  return stores16 && l->kind == TDM_LAYER_CONV && owns_output(net, i) && l->bias_count == 0 &&
         !l->fused_relu && i + 1 < net->layer_count &&
         net->layers[i + 1].kind == TDM_LAYER_BN &&
         !(i + 2 < net->layer_count && net->layers[i + 2].kind == TDM_LAYER_POOL &&
           tdm_layer_pool_tiles(&net->layers[i + 2]) && !pool_bf16(net, i + 2, stores16));
}

/* Whether conv layer i's output has no buffer in training because the bn after it reads
 * it from the gradient region, where the conv writes it in the forward and again, from
 * the stored input, just before the bn's backward (tdm-replica-backward.c's
 * stem_output_again()): the network's first layer, its output stored as bf16 for the bn
 * after it (conv_output_bf16()), that bn writing its input gradient as the conv's bf16
 * output gradient over that output (bn_dx_to_conv(), bn_dx_over_input()), and that
 * bn's output gradient outside the region: the first block starts right after it and
 * keeps its gradients as bf16, its start's sum in the skip buffer (block_grad_bf16()).
 * The region is then free in the bn's forward and backward alike; the plan gives the
 * output its width from the region's start (forward_region(), backward_region()). The
 * CIFAR ResNets' stem: 27 taps for 64 outputs, a recomputation of a few MFLOP a sample
 * for 67 MB at 32 px and batch 512. The conv's forward is deterministic (the same
 * columns, the same products, the engine's same choice for the same call), so the bn's
 * backward reads the same bits as the forward wrote. stores16 implies bn16 here (both
 * backends have bn_backward_dx_bf16: tdm_replica_gradient_bytes()). Where the backend
 * takes the stem's shape, the recomputation, the bn's backward and the conv's weight
 * gradient are its two passes instead (tdm-replica-backward.c's stem_bn_in_two_passes()),
 * in the same room. */
static inline gboolean block_grad_bf16(const TdmNetwork *net, int end, gboolean stores16);

static inline gboolean
stem_output_recomputed(const TdmNetwork *net, int i, gboolean stores16)
{
  if (i != 0 || net->layer_count < 4 || !conv_output_bf16(net, 0, stores16))
    return FALSE;
  const TdmLayer *begin = &net->layers[2];
  return bn_dx_to_conv(net, 1, stores16) && !bn_dx_in_place(net, 1, stores16, stores16) &&
         begin->kind == TDM_LAYER_RES_BEGIN && block_grad_bf16(net, begin->partner, stores16);
}

/* Whether layer j, reading a residual block's input or output (or a bf16 pool's), reads
 * it as bf16 in a run that stores activations so: a bn (its operations take the type;
 * not one a float32 pool follows, whose normalize-on-read takes float32), a global
 * pool (the tensor widened first: a small one; the max pool's backward goes by its
 * argmax, never by the tensor), or a conv that takes bf16 operands both ways
 * (conv_bf16_columns(): bf16 columns of out_c ≤ its reduction, or a 1×1 conv of no
 * padding), which gathers it as it is. */
static inline gboolean
reads_bf16_block(const TdmNetwork *net, int j)
{
  if (j >= net->layer_count)
    return FALSE;
  const TdmLayer *l = &net->layers[j];
  switch (l->kind) {
  case TDM_LAYER_BN:
    return !(j + 1 < net->layer_count && net->layers[j + 1].kind == TDM_LAYER_POOL &&
             !pool_bf16(net, j + 1, TRUE));
  case TDM_LAYER_GLOBAL_AVG:
  case TDM_LAYER_GLOBAL_MAX:
    return TRUE;
  case TDM_LAYER_CONV:
    return conv_bf16_columns(net, l);
  default:
    return FALSE;
  }
}

/* Whether bn layer i's output is bf16 in training (stores16) for the max pool after it,
 * its one reader, a pool that does not tile (torchvision's stem): it has no buffer (the
 * pool normalizes the bn's input as it reads it, maxpool2d_forward_bn, each value
 * rounded to bf16 as the bn would store it; its backward goes by argmax, the bn's reads
 * its input); a frozen bn writes it as bf16 into the free gradient region, which the
 * pool reads. */
static inline gboolean
bn_output_to_pool_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  return stores16 && net->layers[i].kind == TDM_LAYER_BN && i + 1 < net->layer_count &&
         net->layers[i + 1].kind == TDM_LAYER_POOL &&
         !tdm_layer_pool_tiles(&net->layers[i + 1]);
}

/* Whether layer i's output, a residual block's output (RES_END) or the input of the
 * blocks after it (a bn, or a max pool that does not tile, just before RES_BEGIN: the
 * stem's), is stored as bf16 in training (stores16): where every reader takes it so. Its readers: the layer after
 * the blocks that start there (reads_bf16_block()); each such block's end, which adds
 * it (add_out_bf16, bn_forward_bf16: only where that block's own output is bf16 too,
 * so that the add writes bf16) or projects it (its 1×1 conv reads it as bf16 operands,
 * conv_bf16_columns()). Its ReLU's mask the backward reads from the bits its forward
 * writes beside it (relu_bits_kept()). A bn's own backward reads its input, never its
 * output. */
static inline gboolean
block_output_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  int j = i + 1;
  if (!stores16 || j >= net->layer_count)
    return FALSE;
  if (l->kind == TDM_LAYER_POOL && tdm_layer_pool_tiles(l))
    return pool_bf16(net, i, stores16);
  if (l->kind == TDM_LAYER_BN) {
    if (bn_output_to_block_end(net, i) || bn_output_to_conv(net, i, stores16) ||
        net->layers[j].kind != TDM_LAYER_RES_BEGIN)
      return FALSE;
  } else if (l->kind == TDM_LAYER_POOL) {
    /* A pool that does not tile: maxpool2d_forward writes bf16. */
    if (net->layers[j].kind != TDM_LAYER_RES_BEGIN)
      return FALSE;
  } else if (l->kind != TDM_LAYER_RES_END) {
    return FALSE;
  }
  return readers_take_bf16(net, i, stores16);
}

/* Whether every reader of layer i's output takes it as bf16 (stores16): the blocks
 * that start there (each block's end adds it into a bf16 output, or projects it) and
 * the layer after them (reads_bf16_block()). */
static inline gboolean
readers_take_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  int j = i + 1;
  for (; j < net->layer_count && net->layers[j].kind == TDM_LAYER_RES_BEGIN; j++) {
    int end = net->layers[j].partner;
    if (!net->layers[end].projection && !block_output_bf16(net, end, stores16))
      return FALSE;
  }
  return reads_bf16_block(net, j);
}

/* Whether max pool layer i takes the bf16 way in training (stores16): a pool whose
 * windows tile, right after a bn (so no conv's bias is folded into it), whose readers
 * take bf16 (readers_take_bf16()). Its forward, maxpool_forward_bf16, normalizes the
 * bn's input as it reads it (the bn keeps no output: bn_output_to_pool()) and writes
 * its output as bf16, each value rounded before the max; its backward,
 * maxpool_backward_bf16, reads its output gradient of either type and writes its input
 * gradient as bf16 for the bn (pool_dx_bf16()). */
static inline gboolean
pool_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  return stores16 && l->kind == TDM_LAYER_POOL && tdm_layer_pool_tiles(l) && i >= 1 &&
         net->layers[i - 1].kind == TDM_LAYER_BN && readers_take_bf16(net, i, stores16);
}

/* Whether bn layer i's output has no buffer in training because the bf16 pool after it
 * (pool_bf16()), its one reader, normalizes the bn's input as it reads it. A frozen bn
 * writes its output into the free gradient buffer instead, which the pool reads. */
static inline gboolean
bn_output_to_pool(const TdmNetwork *net, int i, gboolean stores16)
{
  return net->layers[i].kind == TDM_LAYER_BN && i + 1 < net->layer_count &&
         pool_bf16(net, i + 1, stores16);
}

/* Whether residual block `end`'s gradients are kept as bf16 in training (stores16): the
 * gradient its end hands on after its ReLU (whose mask it reads as bits beside its bf16
 * output, relu_bits_kept()), read by the block's last layer, a bn (of either type), and by
 * the block's start as the skip path's share; and the gradient its start writes, the
 * two shares meeting there summed in float32 and rounded once (add_relu_backward_bf16, or
 * add_strided_bf16 for a projection's) into the skip buffer, for the layer before the
 * block, which reads bf16: a bn, a max pool that is not a tiling one
 * (maxpool2d_backward) or a bf16 one (pool_bf16(): maxpool_backward_bf16), or a block's
 * end whose output is bf16 too (the start applies that end's ReLU mask, its bits, as it
 * sums: add_relu_backward_bf16). The block's first layer, a conv with bf16
 * columns, writes its input gradient as bf16 (its float32 sum rounded once, as cuDNN
 * writes it anyway: tdm-replica-backward.c's conv_dx_as_bf16()), any other in float32. The
 * skip's share waits in the level's skip buffer: the block's bf16 output
 * gradient itself (no copy), or a projection's input gradient in float32, compact (the
 * pixels its 1×1 conv of no padding reads, 1/stride² of them; col2im would put zeros
 * around them), the buffer holding the projection's bn gradient (float32, its output's
 * size) first. Not a block nested at its start, nor an empty one. */
static inline gboolean
block_grad_bf16(const TdmNetwork *net, int end, gboolean stores16)
{
  const TdmLayer *l = &net->layers[end];
  if (!stores16 || l->kind != TDM_LAYER_RES_END)
    return FALSE;
  int begin = l->partner;
  if (begin < 1 || end - begin < 2 || net->layers[end - 1].kind != TDM_LAYER_BN ||
      (l->fused_relu && !block_output_bf16(net, end, stores16)))
    return FALSE;
  const TdmLayer *before = &net->layers[begin - 1];
  if (before->kind == TDM_LAYER_BN ||
      (before->kind == TDM_LAYER_POOL && !tdm_layer_pool_tiles(before)) ||
      pool_bf16(net, begin - 1, stores16))
    return TRUE;
  return before->kind == TDM_LAYER_RES_END &&
         (!before->fused_relu || block_output_bf16(net, begin - 1, stores16));
}

/* Whether the bn of residual block end i's projection writes its output, which the
 * block's add alone reads (from the second gradient buffer), as bf16 in training: where
 * the block's output is bf16 (block_output_bf16(), stores16), whose add reads its skip
 * of either type. */
static inline gboolean
projection_bn_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  return l->kind == TDM_LAYER_RES_END && l->projection && block_output_bf16(net, i, stores16);
}

/* Whether the projection of residual block end i keeps no conv output in training: its
 * 1×1 conv writes it as bf16 at the gradient region's start (grad_a) in the forward, its
 * bn reading it there and writing its own output at grad_b (projection_bn_bf16()), and
 * again from the block's stored input into the region's free half just before its bn's
 * backward (tdm-replica-backward.c's block_end_backward()), where the block keeps bf16
 * gradients (block_grad_bf16(): the ReLU's gradient in one half, the bn's input gradient
 * over the conv's output, the conv's compact input gradient in the skip buffer). The
 * same call both times: the same bits. ResNet-18's three projections at 32 px, batch
 * 512: 58.7 MB for three 1×1 convs of 2.1 GFLOP each a step. */
static inline gboolean
projection_output_recomputed(const TdmNetwork *net, int i, gboolean stores16)
{
  return projection_bn_bf16(net, i, stores16) && block_grad_bf16(net, i, stores16);
}

/* Whether residual block start i writes its sum (tdm-replica-backward.c's
 * block_begin_backward()) into the skip buffer of the block end right below it, which
 * takes it there in place as its output's gradient: an end at the block's depth, without
 * a projection, both blocks keeping bf16 gradients. Where both ends share one buffer (one
 * window of TdmGradientWindows), that is the block's own. */
static inline gboolean
sum_to_end_below(const TdmNetwork *net, int i, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  if (i < 1 || l->kind != TDM_LAYER_RES_BEGIN)
    return FALSE;
  const TdmLayer *below = &net->layers[i - 1];
  return below->kind == TDM_LAYER_RES_END && !below->projection &&
         below->depth == net->layers[l->partner].depth &&
         block_grad_bf16(net, i - 1, stores16) && block_grad_bf16(net, l->partner, stores16);
}

/* Bytes per element of the gradient layer i > 0 writes for its input in backward, as
 * written (0 where a bn writes it as its conv's bf16 output gradient): tdm-replica-plan.c's plan of
 * the gradient region, and the backward walk's check that each write has its room. */
size_t tdm_replica_input_grad_size (const TdmNetwork *net, int i, gboolean stores16,
                                    gboolean bn16);

/* Whether p is in the replica's gradient region (grad_a, grad_b), not in a skip buffer
 * or the workspace. */
static inline gboolean
in_gradient_region(const TdmReplica *r, const void *p)
{
  const char *c = p, *start = (const char *)r->grad_a;
  return c >= start && c < start + 2 * r->grad_half_bytes;
}

/* Whether layer i's output is stored as bf16 in training (stores16). */
static inline gboolean
output_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  return conv_output_bf16(net, i, stores16) || block_output_bf16(net, i, stores16) ||
         bn_output_to_pool_bf16(net, i, stores16);
}

/* Whether block end i keeps its ReLU's mask as bits in training (stores16;
 * tdm-relu-bits.h): a ReLU whose output is stored as bf16. Its backward reads that
 * output only as the mask (the end's own, or the block's start after it as it sums:
 * relu_mask_before()), so it reads the bits the forward wrote beside it instead: an
 * eighth of a byte an element where the bf16 output was two. */
static inline gboolean
relu_bits_kept(const TdmNetwork *net, int i, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  return l->kind == TDM_LAYER_RES_END && l->fused_relu && output_bf16(net, i, stores16);
}

static inline gboolean infer_output_bf16(const TdmNetwork *net, int i, gboolean stores16);

/* Whether every reader of layer i's output reads it as bf16 in the inference pass: each
 * block that starts there ends in bf16 (not one with a projection: a rule from when its
 * 1×1 conv widened a bf16 input; it reads bf16 as it is now, conv_bf16_columns()), and the
 * layer after them is a conv that takes bf16 operands (conv_bf16_columns(): the engine and
 * the columns gather bf16 as it is) or a bn (bn_forward_eval and
 * bn_forward_eval_bf16 read either type). Not a reader that would widen it first: the
 * gradient buffers, its room in training, are sized for the training batch, and an
 * evaluation chunk may be larger; so the inference pass never writes there. */
static inline gboolean
infer_readers_bf16(const TdmNetwork *net, int i)
{
  int j = i + 1;
  for (; j < net->layer_count && net->layers[j].kind == TDM_LAYER_RES_BEGIN; j++) {
    int end = net->layers[j].partner;
    if (net->layers[end].projection || !infer_output_bf16(net, end, TRUE))
      return FALSE;
  }
  if (j >= net->layer_count)
    return FALSE;
  const TdmLayer *reader = &net->layers[j];
  return reader->kind == TDM_LAYER_BN || conv_bf16_columns(net, reader);
}

/* Whether layer i's output is stored as bf16 in the inference pass (evaluation and
 * prediction) of a replica that stores activations so (stores16): in the rotating
 * buffers, half their room. A conv's (no bias or ReLU of its own, bf16 columns: its
 * product writes bf16 itself, with no float32 scratch) that a bn reads; a bn's that
 * such a conv reads, or a max pool that tiles and whose output is bf16 too
 * (maxpool_forward_bf16 rounds each value before the max, as in training); such a
 * pool's where its readers take bf16 (infer_readers_bf16()); a block end's where its
 * readers take bf16 and its body's last output, which add_out_bf16 adds in float32, is
 * not bf16 itself. Each is written rounded once (the conv's product, bn_forward_eval_bf16,
 * add_out_bf16) and read widened: the bits of the float32 pass rounded where it is
 * stored. */
static inline gboolean
infer_output_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  int j = i + 1;
  if (!stores16 || j >= net->layer_count || !owns_output(net, i))
    return FALSE;
  const TdmLayer *next = &net->layers[j];
  switch (l->kind) {
  case TDM_LAYER_CONV:
    return l->bias_count == 0 && !l->fused_relu && conv_bf16_columns(net, l) &&
           next->kind == TDM_LAYER_BN;
  case TDM_LAYER_BN:
    return conv_bf16_columns(net, next) ||
           (next->kind == TDM_LAYER_POOL && infer_output_bf16(net, j, stores16));
  case TDM_LAYER_POOL:
    return tdm_layer_pool_tiles(l) && i >= 1 && net->layers[i - 1].kind == TDM_LAYER_BN &&
           infer_readers_bf16(net, i);
  case TDM_LAYER_RES_END:
    return l->partner < i - 1 && !infer_output_bf16(net, i - 1, stores16) &&
           infer_readers_bf16(net, i);
  default:
    return FALSE;
  }
}

/* The element type of acts[i] as the pass in progress holds it (a block's start and
 * a flatten rename the tensor before them): training's storage (output_bf16()), or the
 * inference pass's (infer_output_bf16()). */
static inline TdmDtype
act_type(const TdmReplica *r, int i)
{
  while (i >= 1 && (r->net->layers[i - 1].kind == TDM_LAYER_RES_BEGIN ||
                    r->net->layers[i - 1].kind == TDM_LAYER_FLATTEN))
    i--;
  if (r->inferring)
    return i >= 1 && infer_output_bf16(r->net, i - 1, r->stores_bf16) ? TDM_DTYPE_BF16
                                                                      : TDM_DTYPE_F32;
  return i >= 1 && (output_bf16(r->net, i - 1, r->stores_bf16) ||
                    bn_output_stored(r->net, i - 1, r->stores_bf16, r->bn_store))
             ? TDM_DTYPE_BF16
             : TDM_DTYPE_F32;
}

/* The element type of a projection's conv output (proj_conv) as the pass in progress
 * holds it. */
static inline TdmDtype
projection_type(const TdmReplica *r)
{
  return !r->inferring && r->stores_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
}

/* Whether bn layer i's output is left to the block's end in the pass in progress
 * (bn_output_to_block_end(): training's buffers only). */
static inline gboolean
bn_folded_into_end(const TdmReplica *r, int i)
{
  return !r->inferring && bn_output_to_block_end(r->net, i);
}

/* The rules of the pass in progress that both walks ask (tdm-replica-forward.c,
 * tdm-replica-backward.c). */

/* Whether layer i is frozen: its BN normalizes with the running statistics and leaves
 * them alone, in training as in evaluation. */
static inline gboolean
layer_frozen(const TdmReplica *r, int i)
{
  return r->frozen != NULL && r->frozen[i];
}

/* Whether bn layer i is a frozen one whose output the conv after it, which takes bf16
 * operands, reads in training (bn_output_to_conv()): it writes it into the free gradient
 * buffer as bf16 (bn_forward_eval_bf16: the bits its float32 output would have where the
 * conv rounds it for its bf16 columns or the engine's bf16 input), half the room; and
 * again so in backward (tdm-replica-backward.c's frozen_bn_again()). */
static inline gboolean
frozen_bn_to_conv(const TdmReplica *r, int i)
{
  return !r->inferring && layer_frozen(r, i) && bn_output_to_conv(r->net, i, r->stores_bf16) &&
         !bn_output_stored(r->net, i, r->stores_bf16, r->bn_store);
}

/* Whether bn layer i leaves its output unwritten in training, for the layer after it
 * to compute as it reads it, when that layer is the output's only reader: a max pool
 * (maxpool_forward_bn; its backward goes by argmax), or a conv that takes the bf16
 * column path (im2col_bf16_bn; its backward reads its columns, never its input), unless
 * the bn stores its output for it (bn_output_stored()). The backends give the same bits
 * as the bn's own pass. */
static inline gboolean
bn_output_left_to_next(TdmReplica *r, int i, int n, TdmPassMode mode)
{
  const TdmNetwork *net = r->net;
  if (mode == MODE_EVAL || i + 1 >= net->layer_count)
    return FALSE;
  const TdmLayer *next = &net->layers[i + 1];
  if (next->kind == TDM_LAYER_POOL && !r->inferring && pool_bf16(net, i + 1, r->stores_bf16))
    return TRUE; /* maxpool_forward_bf16 */
  if (next->kind == TDM_LAYER_POOL && !tdm_layer_pool_tiles(next))
    return !r->inferring && bn_output_to_pool_bf16(net, i, r->stores_bf16); /* _forward_bn */
  if (next->kind == TDM_LAYER_POOL)
    return tdm_layer_pool_tiles(next) && tdm_backend_has_maxpool_forward_bn(r->backend);
  if (next->kind != TDM_LAYER_CONV || !tdm_backend_has_im2col_bf16_bn(r->backend) ||
      r->conv_work[i + 1] != NULL ||
      (!r->inferring && bn_output_stored(net, i, r->stores_bf16, r->bn_store)))
    return FALSE;
  int rows = n * next->out_h * next->out_w;
  return tdm_replica_conv_bf16(r, r->cols[i + 1], next->kernel, next->pad, rows,
                               next->in_c * next->kernel * next->kernel, next->out_c);
}

/* The counter-based key of dropout layer `layer`'s mask (tdm-counter-rng.h). */
static inline uint64_t
dropout_key(const TdmReplica *r, int layer)
{
  return tdm_crng_key(r->seed, TDM_RNG_DROPOUT + (uint32_t)layer);
}

static inline gboolean
has_argmax(const TdmLayer *l)
{
  return l->kind == TDM_LAYER_POOL || l->kind == TDM_LAYER_GLOBAL_MAX;
}

/* Bytes of an element of a max pool's argmax: a pool that does not tile runs as
 * maxpool2d, whose argmax is the position within the window in a byte for windows of up
 * to 256 positions, else the input's position in the plane in int32
 * (tdm_pool2d_argmax_size()); the tiling and global pools keep int32 indices into their
 * input. */
static inline size_t
argmax_size(const TdmLayer *l)
{
  return l->kind == TDM_LAYER_POOL && !tdm_layer_pool_tiles(l)
             ? tdm_pool2d_argmax_size(l->kernel)
             : sizeof(int32_t);
}

/* A pool layer's geometry for maxpool2d / avgpool2d over n samples. */
static inline TdmPool2d
pool2d_of(const TdmLayer *l, int n)
{
  TdmPool2d g = {n, l->in_h, l->in_w, l->in_c, l->kernel, l->stride, l->pad, l->out_h,
                 l->out_w};
  return g;
}

static inline size_t
block_in_floats(const TdmNetwork *net, const TdmLayer *end)
{
  const TdmLayer *begin = &net->layers[end->partner];
  return (size_t)begin->in_h * begin->in_w * begin->in_c;
}

/* The inference pass (tdm-replica-infer.c): evaluation and prediction run the same
 * forward walk as training, MODE_EVAL, with acts[], argmax[] and the projections'
 * outputs pointing into a few buffers that rotate layer to layer instead of into the
 * training's: their memory follows the widest layer times the chunk, not the sum over
 * layers. */
/* The activation arena: the training's activations (the input, each layer's output,
 * its argmax, a projection's conv output) and the inference pass's buffers share one
 * allocation, each piece at an offset of a multiple of TDM_ARENA_ALIGN bytes: an
 * evaluation runs between steps, when no activation is waiting for a backward pass, and
 * a step writes every activation before it reads it. */
#define TDM_ARENA_ALIGN ((size_t)16)

static inline size_t
arena_piece(size_t bytes)
{
  return (bytes + TDM_ARENA_ALIGN - 1) / TDM_ARENA_ALIGN * TDM_ARENA_ALIGN;
}

static inline size_t
relu_bits_bytes(size_t bits)
{
  return TDM_RELU_BITS_WORDS(bits) * sizeof(uint32_t);
}

/* Bytes of layer i's pieces of the activation arena for cap samples (buf: its buffers):
 * its output, its projection's conv output, its argmax, its ReLU's mask. */
static inline size_t
training_pieces(const TdmLayerBuffers *buf, size_t cap)
{
  size_t bytes = 0;
  if (buf->output > 0)
    bytes += arena_piece(cap * buf->output * tdm_dtype_size(buf->output_type));
  if (buf->projection > 0)
    bytes += arena_piece(cap * buf->projection * tdm_dtype_size(buf->projection_type));
  if (buf->argmax > 0)
    bytes += arena_piece(cap * buf->argmax * buf->argmax_size);
  if (buf->relu_bits > 0)
    bytes += arena_piece(relu_bits_bytes(cap * buf->relu_bits));
  return bytes;
}

/* Layer i's buffers (buf, tdm_replica_buffers_of()'s) with its output stored where a bn
 * stores it for the conv after it (bn_output_stored(); bn_store: the replica's). */
static inline TdmLayerBuffers
with_bn_store(const TdmNetwork *net, int i, gboolean stores16, size_t bn_store,
              TdmLayerBuffers buf)
{
  if (bn_output_stored(net, i, stores16, bn_store)) {
    buf.output = layer_out_floats(&net->layers[i]);
    buf.output_type = TDM_DTYPE_BF16;
  }
  return buf;
}

/* tdm_replica_plan() with the bn outputs of at most bn_store bytes a sample stored for
 * their conv (bn_output_stored()), whatever the environment says: the plan a replica
 * with that bn_store allocates by. TANDEM_BN_STORE's automatic rule computes it for a few
 * thresholds (tdm_replica_bn_store_auto()). */
TdmReplicaPlan tdm_replica_plan_stored (const TdmNetwork *net, TdmBackendKind kind,
                                        TdmPrecision precision, int capacity,
                                        int eval_capacity, size_t bn_store);
/* The distinct bytes a sample, ascending, of net's bn outputs that a replica of this
 * kind and precision could store for their conv (bn_output_stored() at G_MAXSIZE), into
 * sizes (room for layer_count); returns how many: the automatic rule's candidates. */
int tdm_replica_bn_store_sizes (const TdmNetwork *net, TdmBackendKind kind,
                                TdmPrecision precision, size_t *sizes);
/* TANDEM_BN_STORE unset (tdm_replica_bn_store()): the largest candidate
 * (tdm_replica_bn_store_sizes()) whose plan at `capacity` samples a step and no evaluation
 * chunk totals at most 1/TDM_BN_STORE_GROWTH more than the plan storing none, or 0; 0
 * without computing a plan where there is no candidate. */
size_t tdm_replica_bn_store_auto (const TdmNetwork *net, TdmBackendKind kind,
                                  TdmPrecision precision, int capacity);

/* tdm-replica-plan.c's sizing with the storage decided (stores16: a replica that stores
 * bf16, tdm_replica_stores_bf16(); bn16: tdm_replica_bn16()), which the replica
 * allocates by. Layer i's buffers (tdm_replica_layer_buffers()'s). */
TdmLayerBuffers tdm_replica_buffers_of (const TdmNetwork *net, int i, TdmBackendKind kind,
                                        TdmPrecision precision, gboolean stores16);
/* The half of the gradient region, grad_a and grad_b (tdm_replica_gradient_bytes()'s). */
size_t tdm_replica_gradient_bytes_of (const TdmNetwork *net, gboolean stores16,
                                      gboolean bn16);
/* The column workspace's upper bound for `capacity` samples a step and `eval_capacity`
 * a chunk. */
size_t tdm_replica_column_workspace (const TdmNetwork *net, TdmBackendKind kind,
                                     TdmPrecision precision, gboolean stores16,
                                     size_t capacity, size_t eval_capacity);
/* Bytes of the inference pass's pieces of the arena for eval_capacity samples (stores16:
 * a replica that stores bf16): the rotating buffers, the pools' argmax, the test-time
 * views' logits. */
size_t tdm_replica_infer_arena_bytes (const TdmNetwork *net, gboolean stores16,
                                      size_t eval_capacity);

/* Floats per sample of the widest activation, input included. */
size_t tdm_replica_infer_floats (const TdmNetwork *net);
/* Bytes per sample of each rotating buffer: the widest activation as the inference pass
 * stores it (infer_output_bf16(), stores16: a replica that stores bf16), input included. */
size_t tdm_replica_infer_bytes (const TdmNetwork *net, gboolean stores16);
/* How many rotate: two, and one more for each level of residual blocks whose input
 * waits for its end. */
int tdm_replica_infer_count (const TdmNetwork *net);
/* Bytes per sample of the argmax scratch the inference pass's max pools write (the
 * widest pool's, each element argmax_size()). */
size_t tdm_replica_infer_argmax_bytes (const TdmNetwork *net);
/* Places the buffers above for eval_capacity samples, and the views' logits, in the
 * activation arena (r->arena, which holds tdm_replica_infer_bytes()), then lays out the
 * pass over them. */
void tdm_replica_infer_alloc (TdmReplica *r);
void tdm_replica_infer_free (TdmReplica *r);
/* Puts the inference layout in place of the training's, and back. */
void tdm_replica_infer_begin (TdmReplica *r);
void tdm_replica_infer_end (TdmReplica *r);
