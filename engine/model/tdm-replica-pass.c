/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-pass.c — the forward and backward walks of a replica over the flat
 * tree of layers (tdm-network.h): each layer as backend operations, blocks as
 * RES_BEGIN … RES_END with the skip path's gradient kept aside until the walk back
 * reaches the block's start, batch normalization's sums handed to the synchronized
 * BN hook between its steps; a bn's output that only a pool or a bf16 conv after it
 * reads is computed by that layer as it reads it, and the gradient a bn hands to a bf16
 * conv before it is written as that conv's bf16 operand; a conv's output that only the
 * bn after it reads is stored as bf16 in a bf16 run (conv_output_bf16()), and the bn
 * reads it so; a block's last bn is computed by the block's end as it adds
 * (bn_forward_add). Convolutions go to the
 * backend's convolution engine where it has one, else are composed here. Not the
 * buffers, the gather or the step's shape (tdm-replica.c). */
#include "tdm-replica-private.h"
#include "tdm-counter-rng.h"

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

/* The rows the batch statistics run over: this shard's, or every replica's when
 * synchronized (the backward's; the forward's counts travel in the slots). */
static double
bn_count(TdmReplica *r, int n, int pixels)
{
  int samples = r->bn_reduce != NULL && r->global_count > 0 ? r->global_count : n;
  return (double)samples * pixels;
}

/* y = BN(x) (then ReLU) over rows × C, in the given mode, x of type x_type; work is
 * the layer's bn_work. The statistics: one pass into this replica's slot, one all-reduce of
 * every replica's slots when synchronized, merged in slot order (tdm-bn-moments.h).
 * statistics_only: y is left unwritten (bn_output_left_to_next()). */
static void
bn_forward(TdmReplica *r, TdmPassMode mode, float *y, const void *x, TdmDtype x_type, int n,
           int pixels, int c, const float *gamma, const float *beta, float *work,
           float *running, bool relu, gboolean statistics_only)
{
  TdmBackend *b = r->backend;
  int rows = n * pixels;
  if (mode == MODE_EVAL) {
    tdm_backend_bn_forward_eval(b, y, x, x_type, running, running + c, gamma, beta, TDM_BN_EPS,
                                rows, c, relu);
    return;
  }
  float *saved = work + 2 * c;
  gboolean sync = r->bn_reduce != NULL;
  float *slots = sync ? r->bn_slots : work + 4 * c;
  int slot_count = sync ? r->bn_slot_count : 1;
  tdm_backend_bn_moments(b, slots, x, x_type, rows, c, sync ? r->bn_slot : 0, slot_count);
  if (!tdm_replica_bn_reduce(r, slots, TDM_BN_SLOT_FLOATS(c) * slot_count))
    return;
  tdm_backend_bn_stats(b, saved, slots, slot_count, c, TDM_BN_EPS, TDM_BN_MOMENTUM,
                       mode == MODE_TRAIN ? running : NULL,
                       mode == MODE_TRAIN ? running + c : NULL);
  if (!statistics_only)
    tdm_backend_bn_forward(b, y, x, x_type, saved, saved + c, gamma, beta, rows, c, relu);
}

/* dx from dy through BN (and its fused ReLU when relu: the backend recomputes the
 * mask from x), and the parameter gradients into dgamma and dbeta (contiguous: dbeta =
 * dgamma + C). With dx16, dx goes there as bfloat16 instead (bn_dx_as_conv_dy16()). */
static void
bn_backward(TdmReplica *r, float *dx, uint16_t *dx16, const float *dy, const void *x,
            TdmDtype x_type, int n, int pixels, int c, const float *gamma, const float *beta,
            bool relu, float *dgamma, float *work)
{
  TdmBackend *b = r->backend;
  int rows = n * pixels;
  const float *saved = work + 2 * c;
  tdm_backend_bn_backward_sums(b, dgamma, dgamma + c, dy, x, x_type, saved, saved + c, gamma,
                               beta, relu, rows, c);
  const float *sums = dgamma;
  if (r->bn_reduce != NULL) {
    /* The gradients stay this replica's (the gradient all-reduce sums them); the
     * normalization's backward needs the sums over every replica. */
    tdm_backend_copy(b, work, dgamma, 2 * (size_t)c * sizeof(float));
    if (!tdm_replica_bn_reduce(r, work, 2 * (size_t)c))
      return;
    sums = work;
  }
  float inv_count = (float)(1.0 / bn_count(r, n, pixels));
  if (dx16 != NULL)
    tdm_backend_bn_backward_dx_bf16(b, dx16, dy, x, x_type, saved, saved + c, gamma, beta, relu,
                                    sums, sums + c, inv_count, rows, c);
  else
    tdm_backend_bn_backward_dx(b, dx, dy, x, x_type, saved, saved + c, gamma, beta, relu, sums,
                               sums + c, inv_count, rows, c);
}

static uint64_t
dropout_key(const TdmReplica *r, int layer)
{
  return tdm_crng_key(r->seed, TDM_RNG_DROPOUT + (uint32_t)layer);
}

/* Whether a conv with columns runs its forward and weight-gradient products on
 * bfloat16 operands (--precision bf16 on a backend that has them). In the forward the
 * columns, as bf16, take the first half of the layer's float32 column buffer (the
 * weights as bf16 come from params16, which every bf16 replica keeps). In the backward
 * the output gradient as bf16 (rows · out_c) starts the workspace, where the
 * convolution engine's layout has it too (the bn after the conv writes it there,
 * bn_dx_as_conv_dy16()), and the bf16 columns follow: both fit when out_c <= k.
 * Else (a first layer of few input channels) the float32 path. The data gradient goes
 * through bf16 columns too when the weights (without params16) fit after them
 * (conv_bf16_dx): its product writes them where the columns were, after the weight
 * gradient has read them, and col2im sums them in float32. */
static gboolean
conv_bf16(TdmReplica *r, const float *col, int rows, int k, int out_c)
{
  return r->backend->precision == TDM_PRECISION_BF16 && col != NULL && out_c <= k &&
         (r->params16 != NULL || out_c <= rows);
}

static gboolean
conv_bf16_dx(TdmReplica *r, int rows, int k, int out_c)
{
  size_t weights = r->params16 != NULL ? 0 : (size_t)out_c * k;
  return (size_t)rows * out_c + weights <= (size_t)rows * k;
}

/* A conv's weights w (out_c·k values) as bf16: in params16, which the forward pass
 * rounded all at once, when the replica keeps one; else rounded into spare. */
static const uint16_t *
conv_weights16(TdmReplica *r, const float *w, size_t count, uint16_t *spare)
{
  if (r->params16 != NULL)
    return r->params16 + (w - r->params);
  tdm_backend_to_bf16(r->backend, spare, w, count);
  return spare;
}

/* The workspace a conv composed here uses (its columns: conv_forward(), conv_backward()):
 * bf16 columns, after the bf16 output gradient in backward, and the bf16 weights after
 * them where the replica keeps no params16; float32 columns otherwise. */
static size_t
own_columns_bytes(TdmReplica *r, int rows, int k, int out_c, gboolean backward,
                  gboolean need_dx)
{
  size_t cols = (size_t)rows * k;
  if (!conv_bf16(r, r->columns, rows, k, out_c))
    return cols * sizeof(float);
  size_t halves = cols;
  if (backward)
    halves += (size_t)rows * out_c;
  gboolean dx16 = need_dx && conv_bf16_dx(r, rows, k, out_c);
  if (r->params16 == NULL && (!backward || dx16))
    halves += (size_t)out_c * k;
  /* An input gradient that does not fit the bf16 way goes through float32 columns. */
  if (backward && need_dx && !dx16)
    return MAX(halves * sizeof(uint16_t), cols * sizeof(float));
  return halves * sizeof(uint16_t);
}

/* How many times a conv gives the engine a grown workspace: once to time the
 * candidates of each direction, once more for the choice. */
#define ENGINE_TRIES 3

/* Where the input gradient of bn layer i goes straight into the bf16 output gradient
 * of the conv before it (the second half of the conv's columns, conv_bf16()): when
 * that conv reads its output gradient only as bf16 (its products on bf16 operands, its
 * input gradient too if it passes one on, no bias and no ReLU of its own), so the
 * float32 gradient would only be written to be rounded. The rounding is to_bf16's:
 * the same bits. NULL where the float32 path stays. */
static uint16_t *
bn_dx_as_conv_dy16(TdmReplica *r, int i, int n)
{
  /* At the workspace's start, where the conv's backward reads it whatever way it was
   * chosen; a shape the workspace was not sized for goes the float32 way. */
  if (i < 1 || !tdm_backend_has_bn_backward_dx_bf16(r->backend))
    return NULL;
  const TdmLayer *conv = &r->net->layers[i - 1];
  if (conv->kind != TDM_LAYER_CONV || r->conv_work[i - 1] != NULL || conv->bias_count > 0 ||
      conv->fused_relu)
    return NULL;
  int rows = n * conv->out_h * conv->out_w;
  int k = conv->in_c * conv->kernel * conv->kernel;
  if (!conv_bf16(r, r->cols[i - 1], rows, k, conv->out_c) ||
      (i - 1 > 0 && !conv_bf16_dx(r, rows, k, conv->out_c)) ||
      (size_t)rows * conv->out_c * sizeof(uint16_t) > r->columns_bytes)
    return NULL;
  return (uint16_t *)r->cols[i - 1];
}

/* Whether layer i is frozen: its BN normalizes with the running statistics and leaves
 * them alone, in training as in evaluation. */
static gboolean
layer_frozen(const TdmReplica *r, int i)
{
  return r->frozen != NULL && r->frozen[i];
}

/* A training bn's output that the layer after it computes from the bn's input as it
 * reads it (bn_output_left_to_next()). */
typedef struct {
  const void *x;               /* the bn's input, of type x_type */
  TdmDtype x_type;
  const float *saved;          /* mean[C], then invstd[C] (bn_work + 2C) */
  const float *gamma, *beta;
  bool relu;
} BnGather;

/* Whether bn layer i leaves its output unwritten in training, for the layer after it
 * to compute as it reads it, when that layer is the output's only reader: a max pool
 * (maxpool_forward_bn; its backward goes by argmax), or a conv that takes the bf16
 * column path (im2col_bf16_bn; its backward reads its columns, never its input). The
 * backends give the same bits as the bn's own pass. */
static gboolean
bn_output_left_to_next(TdmReplica *r, int i, int n, TdmPassMode mode)
{
  const TdmNetwork *net = r->net;
  if (mode == MODE_EVAL || i + 1 >= net->layer_count)
    return FALSE;
  const TdmLayer *next = &net->layers[i + 1];
  if (next->kind == TDM_LAYER_POOL)
    return tdm_layer_pool_tiles(next) && tdm_backend_has_maxpool_forward_bn(r->backend);
  if (next->kind != TDM_LAYER_CONV || !tdm_backend_has_im2col_bf16_bn(r->backend) ||
      r->conv_work[i + 1] != NULL)
    return FALSE;
  int rows = n * next->out_h * next->out_w;
  return conv_bf16(r, r->cols[i + 1], rows, next->in_c * next->kernel * next->kernel,
                   next->out_c);
}

/* For conv layer i in training, the bn before it whose output the forward left to it
 * (bn_output_left_to_next()), filled into *gather: its backward builds its columns
 * again from the same input. NULL where the conv read acts[i]. */
static const BnGather *
bn_input_of(TdmReplica *r, int i, int n, BnGather *gather)
{
  if (i < 1 || r->net->layers[i - 1].kind != TDM_LAYER_BN || layer_frozen(r, i - 1) ||
      !bn_output_left_to_next(r, i - 1, n, MODE_TRAIN))
    return NULL;
  const TdmLayer *l = &r->net->layers[i - 1];
  *gather = (BnGather){r->acts[i - 1],
                       act_type(r, i - 1),
                       r->bn_work[i - 1] + 2 * l->out_c,
                       r->params + l->weight_offset,
                       r->params + l->bias_offset,
                       l->fused_relu};
  return gather;
}

/* The convolution engine's view of a conv layer's call (tdm-backend.h): its shape, the
 * input (or the bn's input it normalizes as it reads), the weights (and their bf16
 * copy), the one workspace. */
static TdmConvArgs
conv_args(TdmReplica *r, const float *x, const BnGather *bn, const float *w, int n, int in_h,
          int in_w, int in_c, int out_c, int kernel, int pad, int stride, size_t *needed)
{
  TdmConvArgs a = {
      .shape = {n, in_h, in_w, in_c, out_c, kernel, pad, stride},
      .x = bn != NULL ? bn->x : x,
      .x_type = bn != NULL ? bn->x_type : TDM_DTYPE_F32,
      .w = w,
      .w16 = r->params16 != NULL ? r->params16 + (w - r->params) : NULL,
      .work = r->columns,
      .work_bytes = r->columns_bytes,
      .work_needed = needed,
      .work_limit = r->columns_limit,
  };
  if (bn != NULL) {
    a.bn_mean = bn->saved;
    a.bn_invstd = bn->saved + in_c;
    a.bn_gamma = bn->gamma;
    a.bn_beta = bn->beta;
    a.bn_relu = bn->relu;
  }
  return a;
}

/* A conv's product: the backend's whole convolution where the layer has its scratch
 * (work: tdm_replica_layer_buffers() gave it one because the backend takes the shape),
 * else out = cols(x) · Wᵀ, the columns kept in col (or x itself for a 1×1 conv of
 * stride 1). With bn, x was never written: the columns normalize bn->x. With y16, the
 * output is stored as bf16 there instead of y (conv_output_bf16()): each value the
 * float32 sum rounded once, by the bf16 product itself where the conv has bf16 columns,
 * else after a float32 product into the gradient buffer, which the forward leaves
 * unused. */
static void
conv_forward(TdmReplica *r, float *y, uint16_t *y16, const float *x, const BnGather *bn,
             float *col, float *work, const float *w, int n, int in_h, int in_w, int in_c,
             int out_c, int kernel, int pad, int stride, int out_h, int out_w)
{
  TdmBackend *b = r->backend;
  int rows = n * out_h * out_w;
  int k = in_c * kernel * kernel;
  if (work != NULL) {
    g_assert(y16 == NULL); /* a bf16 run composes every conv from columns */
    tdm_backend_conv_forward(b, y, x, w, work, n, in_h, in_w, in_c, out_c, kernel, pad, stride);
    return;
  }
  size_t need = 0;
  TdmConvArgs args =
      conv_args(r, x, bn, w, n, in_h, in_w, in_c, out_c, kernel, pad, stride, &need);
  args.y = y16 != NULL ? NULL : y;
  args.y16 = y16;
  /* The engine says what it needs where the workspace holds less: room to time its
   * candidates, then its choice's (noted once it ran). */
  for (int tries = 0;; tries++) {
    if (tdm_backend_conv_engine_forward(b, &args)) {
      tdm_replica_workspace_holds(r, need, 0);
      return;
    }
    if (tries == ENGINE_TRIES || need <= args.work_bytes ||
        !tdm_replica_workspace_grow(r, need, 0))
      break;
    args.work = r->columns;
    args.work_bytes = r->columns_bytes;
  }
  if (col != NULL) {
    tdm_replica_workspace_holds(r, own_columns_bytes(r, rows, k, out_c, FALSE, FALSE), 0);
    col = r->columns;
  }
  if (conv_bf16(r, col, rows, k, out_c)) {
    uint16_t *col16 = (uint16_t *)col;
    const uint16_t *w16 = conv_weights16(r, w, (size_t)out_c * k, col16 + (size_t)rows * k);
    if (bn != NULL)
      tdm_backend_im2col_bf16_bn(b, col16, bn->x, bn->x_type, bn->saved, bn->saved + in_c,
                                 bn->gamma, bn->beta, bn->relu, n, in_h, in_w, in_c, kernel,
                                 kernel, pad, stride);
    else
      tdm_backend_im2col_bf16(b, col16, x, n, in_h, in_w, in_c, kernel, kernel, pad, stride);
    if (y16 != NULL)
      tdm_backend_gemm_bf16_out(b, false, true, rows, out_c, k, col16, k, w16, k, y16, out_c);
    else
      tdm_backend_gemm_bf16(b, false, true, rows, out_c, k, 1.0f, col16, k, w16, k, 0.0f, y,
                            out_c);
    return;
  }
  g_assert(bn == NULL); /* a bn's output is left only to a conv with bf16 columns */
  float *out = y16 != NULL ? r->grad_b : y;
  const float *a = x;
  if (col != NULL) {
    tdm_backend_im2col(b, col, x, n, in_h, in_w, in_c, kernel, kernel, pad, stride);
    a = col;
  }
  tdm_backend_gemm(b, false, true, rows, out_c, k, 1.0f, a, k, w, k, 0.0f, out, out_c);
  if (y16 != NULL)
    tdm_backend_to_bf16(b, y16, out, (size_t)rows * out_c);
}

/* Its backward from dy: dw, and dx when wanted (col is spent: its gradient takes its
 * place before col2im). The columns live in the one workspace that every layer's
 * forward overwrote since, so they are built again from x (or, with bn, from the bn's
 * input, as the forward built them): the same bits. dy16_ready: the bn after it wrote
 * dy as bf16 already (bn_dx_as_conv_dy16(), into the workspace's second half, which
 * the bf16 columns leave alone), and dy is not read. */
static void
conv_backward(TdmReplica *r, float *dx, float *dw, const float *dy, gboolean dy16_ready,
              const float *x, const BnGather *bn, float *col, float *work, const float *w,
              int n, int in_h, int in_w, int in_c, int out_c, int kernel, int pad, int stride,
              int out_h, int out_w, gboolean need_dx)
{
  TdmBackend *b = r->backend;
  int rows = n * out_h * out_w;
  int k = in_c * kernel * kernel;
  if (work != NULL) {
    tdm_backend_conv_backward(b, need_dx ? dx : NULL, dw, dy, x, w, work, n, in_h, in_w, in_c,
                              out_c, kernel, pad, stride);
    return;
  }
  size_t need = 0;
  TdmConvArgs args =
      conv_args(r, x, bn, w, n, in_h, in_w, in_c, out_c, kernel, pad, stride, &need);
  args.dy = dy;
  args.dy16 = dy16_ready ? (const uint16_t *)r->columns : NULL;
  args.dx = need_dx ? dx : NULL;
  args.dw = dw;
  size_t keep = dy16_ready ? (size_t)rows * out_c * sizeof(uint16_t) : 0;
  for (int tries = 0;; tries++) {
    if (tdm_backend_conv_engine_backward(b, &args)) {
      tdm_replica_workspace_holds(r, need, 0);
      return;
    }
    if (tries == ENGINE_TRIES || need <= args.work_bytes ||
        !tdm_replica_workspace_grow(r, need, keep))
      break;
    args.work = r->columns;
    args.work_bytes = r->columns_bytes;
    args.dy16 = dy16_ready ? (const uint16_t *)r->columns : NULL;
  }
  if (col != NULL) {
    tdm_replica_workspace_holds(r, own_columns_bytes(r, rows, k, out_c, TRUE, need_dx), keep);
    col = r->columns;
  }
  if (conv_bf16(r, col, rows, k, out_c)) {
    uint16_t *dy16 = (uint16_t *)col, *col16 = dy16 + (size_t)rows * out_c;
    if (!dy16_ready)
      tdm_backend_to_bf16(b, dy16, dy, (size_t)rows * out_c);
    if (bn != NULL)
      tdm_backend_im2col_bf16_bn(b, col16, bn->x, bn->x_type, bn->saved, bn->saved + in_c,
                                 bn->gamma, bn->beta, bn->relu, n, in_h, in_w, in_c, kernel,
                                 kernel, pad, stride);
    else
      tdm_backend_im2col_bf16(b, col16, x, n, in_h, in_w, in_c, kernel, kernel, pad, stride);
    tdm_backend_gemm_bf16(b, true, false, out_c, k, rows, 1.0f, dy16, out_c, col16, k, 0.0f, dw,
                          k);
    if (need_dx && conv_bf16_dx(r, rows, k, out_c)) {
      const uint16_t *w16 = conv_weights16(r, w, (size_t)out_c * k, col16 + (size_t)rows * k);
      tdm_backend_conv_dgrad_bf16(b, dx, dy16, w16, col16, n, in_h, in_w, in_c, out_c, kernel,
                                  kernel, pad, stride);
      return;
    }
  } else {
    if (col != NULL)
      tdm_backend_im2col(b, col, x, n, in_h, in_w, in_c, kernel, kernel, pad, stride);
    tdm_backend_gemm(b, true, false, out_c, k, rows, 1.0f, dy, out_c, col ? col : x, k, 0.0f,
                     dw, k);
  }
  if (!need_dx)
    return;
  if (col == NULL) {
    tdm_backend_gemm(b, false, false, rows, k, out_c, 1.0f, dy, out_c, w, k, 0.0f, dx, k);
    return;
  }
  tdm_backend_gemm(b, false, false, rows, k, out_c, 1.0f, dy, out_c, w, k, 0.0f, col, k);
  tdm_backend_col2im(b, dx, col, n, in_h, in_w, in_c, kernel, kernel, pad, stride);
}

/* The end of a block, layer i, whose last bn (layer i − 1) left its output to it
 * (bn_folded_into_end()): y = bn(x) + skip, then the block's ReLU, from the bn's input
 * and the statistics its forward saved (from_bn), with bn_forward's then add_out's
 * bits; a frozen bn's with the running statistics, written into y and added there. */
static void
block_end_bn_add(TdmReplica *r, int i, TdmPassMode mode, const BnGather *from_bn, float *y,
                 const float *skip, int n)
{
  TdmBackend *b = r->backend;
  const TdmLayer *end = &r->net->layers[i], *bn = end - 1;
  int rows = n * end->out_h * end->out_w;
  if (from_bn != NULL) {
    tdm_backend_bn_forward_add(b, y, from_bn->x, from_bn->x_type, from_bn->saved,
                               from_bn->saved + bn->out_c, from_bn->gamma, from_bn->beta, skip,
                               rows, bn->out_c, end->fused_relu);
    return;
  }
  g_assert(mode == MODE_EVAL || layer_frozen(r, i - 1));
  bn_forward(r, MODE_EVAL, y, r->acts[i - 1], act_type(r, i - 1), n, end->out_h * end->out_w,
             bn->out_c, r->params + bn->weight_offset, r->params + bn->bias_offset,
             r->bn_work[i - 1], r->state + bn->state_offset, false, FALSE);
  tdm_backend_add_out(b, y, skip, y, (size_t)rows * bn->out_c, end->fused_relu);
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
    /* A bn's output that has no buffer (bn_output_to_conv()) but that a frozen bn
     * writes all the same goes to the gradient buffer, free until the loss. */
    const float *x = r->acts[i] != NULL ? r->acts[i] : r->grad_a;
    float *y = r->acts[i + 1] != NULL ? r->acts[i + 1] : r->grad_a;
    const float *w = r->params + l->weight_offset;
    const float *bias = r->params + l->bias_offset;
    size_t out = (size_t)n * layer_out_floats(l);
    int pixels = l->out_h * l->out_w;
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
      conv_forward(r, y, act_type(r, i + 1) == TDM_DTYPE_BF16 ? (uint16_t *)y : NULL, x,
                   from_bn, r->cols[i], r->conv_work[i], w, n, l->in_h, l->in_w, l->in_c,
                   l->out_c, l->kernel, l->pad, l->stride, l->out_h, l->out_w);
      if (bias_in_pool(net, i))
        break;
      if (l->bias_count > 0)
        tdm_backend_bias_forward(b, y, bias, n * pixels, l->out_c, 1, l->fused_relu);
      else if (l->fused_relu)
        tdm_backend_relu_forward(b, y, y, out);
      break;
    case TDM_LAYER_POOL: {
      if (!tdm_layer_pool_tiles(l)) {
        tdm_backend_maxpool2d_forward(b, y, r->argmax[i], x, pool2d_of(l, n));
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
      gboolean gathered =
          bn_folded_into_end(r, i) || bn_output_left_to_next(r, i, n, bn_mode);
      bn_forward(r, bn_mode, y, x, act_type(r, i), n, pixels, l->out_c, w, bias, r->bn_work[i],
                 r->state + l->state_offset, l->fused_relu, gathered);
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
    case TDM_LAYER_GLOBAL_AVG:
      tdm_backend_global_avgpool_forward(b, y, x, n, l->in_h * l->in_w, l->in_c);
      break;
    case TDM_LAYER_GLOBAL_MAX:
      tdm_backend_global_maxpool_forward(b, y, r->argmax[i], x, n, l->in_h * l->in_w, l->in_c);
      break;
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
      const float *skip = r->acts[l->partner];
      if (l->projection) {
        TdmDtype pt = projection_type(r);
        conv_forward(r, r->proj_conv[i], pt == TDM_DTYPE_BF16 ? (uint16_t *)r->proj_conv[i] : NULL,
                     skip, NULL, r->cols[i], NULL, w, n, begin->in_h, begin->in_w, begin->in_c,
                     l->out_c, 1, 0, l->stride, l->out_h, l->out_w);
        bn_forward(r, layer_frozen(r, i) ? MODE_EVAL : mode, r->proj_bn[i], r->proj_conv[i], pt,
                   n, pixels, l->out_c, bias, bias + l->out_c, r->bn_work[i],
                   r->state + l->state_offset, false, FALSE);
        skip = r->proj_bn[i];
      }
      if (bn_folded_into_end(r, i - 1))
        block_end_bn_add(r, i, mode, from_bn, y, skip, n);
      else
        tdm_backend_add_out(b, y, x, skip, out, l->fused_relu);
      break;
    }
    }
    if (tdm_replica_aborted(r))
      return;
  }
}

static void
announce(TdmReplica *r, const TdmLayer *l)
{
  if (l->param_count > 0 && r->grads_ready != NULL)
    r->grads_ready(r, l->param_offset, l->param_count, r->grads_ready_data);
}

/* The output of frozen bn layer i, which has no buffer (bn_output_to_conv()), computed
 * again into spare for the conv after it: the first trained layer, which passes no
 * gradient on, so its input gradient's buffer is free. */
static const float *
frozen_bn_again(TdmReplica *r, int i, int n, float *spare, gboolean need_dx)
{
  const TdmLayer *l = &r->net->layers[i];
  g_assert(l->kind == TDM_LAYER_BN && layer_frozen(r, i) && !need_dx);
  bn_forward(r, MODE_EVAL, spare, r->acts[i], act_type(r, i), n, l->out_h * l->out_w, l->out_c,
             r->params + l->weight_offset, r->params + l->bias_offset, r->bn_work[i],
             r->state + l->state_offset, l->fused_relu, FALSE);
  return spare;
}

void
tdm_replica_backward(TdmReplica *r, int n)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  float *dy = r->grad_a, *dx = r->grad_b;
  gboolean dy16_ready = FALSE; /* dy is in the conv's columns as bf16, not in dy */
  BnGather gather;             /* a conv's input left to it by the bn before it */

  const int stop = r->backward_stop;
  for (int i = net->layer_count - 1; i >= stop; i--) {
    const TdmLayer *l = &net->layers[i];
    const float *x = r->acts[i];
    const float *y = r->acts[i + 1];
    const float *w = r->params + l->weight_offset;
    float *dw = r->grads + l->weight_offset;
    float *dbias = r->grads + l->bias_offset;
    gboolean need_dx = i > stop;
    size_t out = (size_t)n * layer_out_floats(l);
    int pixels = l->out_h * l->out_w;
    uint16_t *dx16 = NULL; /* a bn's input gradient, written as bf16 for the conv below */

    switch (l->kind) {
    case TDM_LAYER_LINEAR: {
      int in = l->in_h * l->in_w * l->in_c;
      if (l->fused_relu)
        tdm_backend_relu_backward(b, dy, dy, y, out);
      tdm_backend_gemm(b, true, false, l->out_c, in, n, 1.0f, dy, l->out_c, x, in, 0.0f, dw,
                       in);
      if (l->bias_count > 0)
        tdm_backend_bias_backward(b, dbias, dy, n, l->out_c, 1);
      if (need_dx)
        tdm_backend_gemm(b, false, false, n, in, l->out_c, 1.0f, dy, l->out_c, w, in, 0.0f, dx,
                         in);
      break;
    }
    case TDM_LAYER_CONV: {
      /* With its bias and ReLU in the pool, the pool's backward did both. */
      if (!bias_in_pool(net, i)) {
        if (l->fused_relu)
          tdm_backend_relu_backward(b, dy, dy, y, out);
        if (l->bias_count > 0)
          tdm_backend_bias_backward(b, dbias, dy, n * pixels, l->out_c, 1);
      }
      const BnGather *from_bn = bn_input_of(r, i, n, &gather);
      if (from_bn == NULL && x == NULL)
        x = frozen_bn_again(r, i - 1, n, dx, need_dx);
      conv_backward(r, dx, dw, dy, dy16_ready, x, from_bn, r->cols[i], r->conv_work[i], w, n,
                    l->in_h, l->in_w, l->in_c, l->out_c, l->kernel, l->pad, l->stride, l->out_h,
                    l->out_w, need_dx);
      break;
    }
    case TDM_LAYER_POOL:
      if (i == 1 && conv_pool_first(net)) {
        const TdmLayer *c = l - 1;
        tdm_backend_conv_pool_backward(b, r->grads + c->weight_offset,
                                       r->grads + c->bias_offset, dy, r->argmax[1], y,
                                       r->acts[0], c->fused_relu, n, c->in_h, c->in_w, c->in_c,
                                       c->out_c, c->kernel, c->kernel, c->pad, l->kernel);
        announce(r, c);
        return;
      }
      if (need_dx && !tdm_layer_pool_tiles(l)) {
        tdm_backend_maxpool2d_backward(b, dx, dy, r->argmax[i], pool2d_of(l, n));
      } else if (need_dx) {
        /* The conv below handed this pool its bias (and ReLU): their gradients too. */
        const TdmLayer *c = bias_in_pool(net, i - 1) ? l - 1 : NULL;
        tdm_backend_maxpool_backward(b, dx, c ? r->grads + c->bias_offset : NULL, dy,
                                     r->argmax[i], c && c->fused_relu ? y : NULL, n, l->in_h,
                                     l->in_w, l->in_c, l->kernel);
      }
      break;
    case TDM_LAYER_RELU:
      if (need_dx)
        tdm_backend_relu_backward(b, dx, dy, y, out);
      break;
    case TDM_LAYER_FLATTEN:
      continue; /* dy already is the input's gradient */
    case TDM_LAYER_BN:
      dx16 = bn_dx_as_conv_dy16(r, i, n);
      bn_backward(r, dx, dx16, dy, x, act_type(r, i), n, pixels, l->out_c, w,
                  r->params + l->bias_offset, l->fused_relu, dw, r->bn_work[i]);
      break;
    case TDM_LAYER_AVGPOOL:
      if (need_dx && !tdm_layer_pool_tiles(l))
        tdm_backend_avgpool2d_backward(b, dx, dy, pool2d_of(l, n));
      else if (need_dx)
        tdm_backend_avgpool_backward(b, dx, dy, n, l->in_h, l->in_w, l->in_c, l->kernel);
      break;
    case TDM_LAYER_GLOBAL_AVG:
      if (need_dx)
        tdm_backend_global_avgpool_backward(b, dx, dy, n, l->in_h * l->in_w, l->in_c);
      break;
    case TDM_LAYER_GLOBAL_MAX:
      if (need_dx)
        tdm_backend_global_maxpool_backward(b, dx, dy, r->argmax[i], n, l->in_h * l->in_w,
                                            l->in_c);
      break;
    case TDM_LAYER_DROPOUT:
      if (need_dx) {
        if (l->rate == 0.0f)
          tdm_backend_copy(b, dx, dy, out * sizeof(float));
        else
          tdm_backend_dropout_backward(b, dx, dy, r->indices, n, (int)layer_out_floats(l),
                                       l->rate, dropout_key(r, i), r->epoch);
      }
      break;
    case TDM_LAYER_SCALE:
      if (need_dx) {
        tdm_backend_copy(b, dx, dy, out * sizeof(float));
        tdm_backend_scale(b, dx, l->factor, out);
      }
      break;
    case TDM_LAYER_RES_END: {
      /* dy goes on to the block's layers unchanged; the skip path's share waits in
       * skip_grad for the block's start. */
      if (l->fused_relu)
        tdm_backend_relu_backward(b, dy, dy, y, out);
      float *skip = r->skip_grad[i];
      if (l->projection) {
        const TdmLayer *begin = &net->layers[l->partner];
        float *dconv = r->proj_bn[i]; /* the bn's output is spent */
        bn_backward(r, dconv, NULL, dy, r->proj_conv[i], projection_type(r), n, pixels, l->out_c,
                    r->params + l->bias_offset, r->params + l->bias_offset + l->out_c, false,
                    r->grads + l->bias_offset, r->bn_work[i]);
        conv_backward(r, skip, dw, dconv, FALSE, r->acts[l->partner], NULL, r->cols[i], NULL,
                      w, n, begin->in_h, begin->in_w, begin->in_c, l->out_c, 1, 0, l->stride,
                      l->out_h, l->out_w, TRUE);
      } else {
        tdm_backend_copy(b, skip, dy, out * sizeof(float));
      }
      announce(r, l);
      if (tdm_replica_aborted(r))
        return;
      continue;
    }
    case TDM_LAYER_RES_BEGIN: {
      const TdmLayer *end = &net->layers[l->partner];
      tdm_backend_add(b, dy, r->skip_grad[l->partner], (size_t)n * block_in_floats(net, end));
      continue;
    }
    }

    announce(r, l);
    dy16_ready = dx16 != NULL;
    float *swap = dy;
    dy = dx;
    dx = swap;
    if (tdm_replica_aborted(r))
      return;
  }
  /* The frozen layers below: no gradient, but zeros for the all-reduce's buckets. */
  for (int i = stop - 1; i >= 0; i--) {
    const TdmLayer *l = &net->layers[i];
    if (l->param_count == 0)
      continue;
    tdm_backend_zero(b, r->grads + l->param_offset, l->param_count * sizeof(float));
    announce(r, l);
  }
}
