/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-private.h — what tdm-replica.c (buffers, evaluation),
 * tdm-replica-train.c (the training step) and tdm-replica-pass.c (the forward and
 * backward walks over the layers) share: the buffer layout rules and the passes. Not
 * for anything else. */
#pragma once

#include "tdm-replica.h"

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
/* A stop was asked for, or a synchronized BN all-reduce failed. */
gboolean tdm_replica_aborted (TdmReplica *r);
/* Synchronized BN's all-reduce through the hook; FALSE (and sticky) on failure. */
gboolean tdm_replica_bn_reduce (TdmReplica *r, float *buffer, size_t count);

/* Notes that a convolution needs `bytes` of the workspace (its choice's need, or the
 * replica's own columns), and grows the workspace, keeping its contents, where it
 * holds less: a shape the pre-warm did not meet, after tdm_replica_fit_workspace().
 * FALSE (the backend's sticky error set) when the device has no room for it. */
gboolean tdm_replica_workspace_holds (TdmReplica *r, size_t bytes);

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

/* Whether a replica on a backend of this kind stores activations that the bn
 * operations read as bf16 (below; and a projection's conv output, which only its bn
 * reads): a bf16 run on a backend whose bn operations read bf16, unless
 * TANDEM_BF16_ACTIVATIONS=0. */
static inline gboolean
stores_bf16(TdmBackendKind kind, TdmPrecision precision)
{
  return precision == TDM_PRECISION_BF16 && tdm_backend_kind_has_bn_bf16_input(kind) &&
         tdm_replica_bf16_activations();
}

/* Whether bn layer i's output has no buffer in training because the conv after it,
 * its one reader, normalizes the bn's input as it builds its bf16 columns, in the
 * forward and again in its backward (im2col_bf16_bn, or the convolution engine's bn
 * prologue; tdm-replica-pass.c's bn_output_left_to_next()): a bf16 run that stores
 * activations as bf16 (whose backends have im2col_bf16_bn), a conv with columns whose
 * output gradient fits beside them (out_c ≤ its reduction; the replica keeps params16,
 * so nothing else needs the room, at any batch size). A frozen bn writes its output
 * into the free gradient buffer instead, and the conv's backward recomputes it. */
static inline gboolean
bn_output_to_conv(const TdmNetwork *net, int i, TdmBackendKind kind, TdmPrecision precision)
{
  if (net->layers[i].kind != TDM_LAYER_BN || i + 1 >= net->layer_count)
    return FALSE;
  const TdmLayer *next = &net->layers[i + 1];
  return stores_bf16(kind, precision) && next->kind == TDM_LAYER_CONV &&
         col_floats_per_sample(net, next) > 0 &&
         next->out_c <= next->in_c * next->kernel * next->kernel;
}

/* Whether conv layer i's output is stored as bf16 in training: in a bf16 run on a
 * backend whose bn operations read bf16, when the bn after it is its one reader (its
 * statistics, its normalization, its backward; or the conv after the bn, which
 * normalizes it as it reads it, bn_output_left_to_next()). Not where the conv has a
 * bias or a ReLU of its own (they read and write its output in float32), nor where a
 * pool follows the bn (the pool's normalize-on-read takes float32 only). The inference
 * pass's buffers stay float32; TANDEM_BF16_ACTIVATIONS=0 keeps them all float32. */
static inline gboolean
conv_output_bf16(const TdmNetwork *net, int i, TdmBackendKind kind, TdmPrecision precision)
{
  const TdmLayer *l = &net->layers[i];
  return stores_bf16(kind, precision) && l->kind == TDM_LAYER_CONV && owns_output(net, i) &&
         l->bias_count == 0 && !l->fused_relu && i + 1 < net->layer_count &&
         net->layers[i + 1].kind == TDM_LAYER_BN &&
         !(i + 2 < net->layer_count && net->layers[i + 2].kind == TDM_LAYER_POOL);
}

/* The element type of acts[i] as the pass in progress holds it. */
static inline TdmDtype
act_type(const TdmReplica *r, int i)
{
  return !r->inferring && i >= 1 &&
                 conv_output_bf16(r->net, i - 1, r->backend->kind, r->backend->precision)
             ? TDM_DTYPE_BF16
             : TDM_DTYPE_F32;
}

/* The element type of a projection's conv output (proj_conv) as the pass in progress
 * holds it. */
static inline TdmDtype
projection_type(const TdmReplica *r)
{
  return !r->inferring && stores_bf16(r->backend->kind, r->backend->precision)
             ? TDM_DTYPE_BF16
             : TDM_DTYPE_F32;
}

/* Whether bn layer i's output is left to the block's end in the pass in progress
 * (bn_output_to_block_end(): training's buffers only). */
static inline gboolean
bn_folded_into_end(const TdmReplica *r, int i)
{
  return !r->inferring && bn_output_to_block_end(r->net, i);
}

static inline gboolean
has_argmax(const TdmLayer *l)
{
  return l->kind == TDM_LAYER_POOL || l->kind == TDM_LAYER_GLOBAL_MAX;
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

static inline size_t
layer_out_floats(const TdmLayer *l)
{
  return (size_t)l->out_h * l->out_w * l->out_c;
}


/* The inference pass (tdm-replica-infer.c): evaluation and prediction run the same
 * forward walk as training, MODE_EVAL, with acts[], argmax[] and the projections'
 * outputs pointing into a few buffers that rotate layer to layer instead of into the
 * training's: their memory follows the widest layer times the chunk, not the sum over
 * layers. */
/* Floats per sample of each rotating buffer: the widest activation, input included. */
size_t tdm_replica_infer_floats (const TdmNetwork *net);
/* How many rotate: two, and one more for each level of residual blocks whose input
 * waits for its end. */
int tdm_replica_infer_count (const TdmNetwork *net);
/* Int32 per sample of the argmax scratch the inference pass's max pools write. */
size_t tdm_replica_infer_argmax (const TdmNetwork *net);
/* Allocates the buffers above for eval_capacity samples, and the views' logits, then
 * lays out the pass over them; FALSE with error (the replica frees what was made). */
gboolean tdm_replica_infer_alloc (TdmReplica *r, GError **error);
void tdm_replica_infer_free (TdmReplica *r);
/* Puts the inference layout in place of the training's, and back. */
void tdm_replica_infer_begin (TdmReplica *r);
void tdm_replica_infer_end (TdmReplica *r);
