/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-conv.c — a conv layer's forward and backward as a replica runs them
 * (tdm-replica-forward.c's and -backward.c's walks call them): the backend's whole
 * convolution where the layer has its scratch, else the convolution engine where the
 * backend has one, else composed here from im2col and GEMMs, on bf16 columns in a bf16
 * run (the weights from params16, the output gradient as bf16 at the workspace's start)
 * or float32 ones, a chunk of samples at a time on a GPU (tdm-conv-columns.h: the
 * engine's "im2col" does the same in the same chunks); an input a bn left unwritten
 * normalized as the columns are built; an input stored as bf16 gathered as it is, or
 * widened for float32 columns. */
#include "tdm-conv-columns.h"
#include "tdm-replica-private.h"

/* x (count values of type x_type) as float32, for a reader that takes float32 only: x
 * itself, or its bf16 values widened into spare, a buffer free until the reader is done
 * with it (block_output_bf16(): a projection's float32 columns, the global pool). */
const float *
tdm_replica_as_f32(TdmReplica *r, const void *x, TdmDtype x_type, size_t count, float *spare)
{
  if (x_type == TDM_DTYPE_F32)
    return x;
  tdm_backend_from_bf16(r->backend, spare, x, count);
  return spare;
}

/* A bf16 input x read by float32 columns, where the columns are fewer values than x (a
 * strided 1×1 conv: a projection reads a quarter of its input): the whole batch's
 * float32 columns in spare, a gradient buffer free until the products are done, each
 * chunk of samples (tdm-conv-columns.h) gathered as bf16 into col, then widened: the
 * values of x widened, then its columns, exactly, in fewer bytes than x widened. NULL
 * elsewhere (the caller widens x, where it is bf16, and builds its columns). */
static const float *
widened_columns(TdmReplica *r, float *col, const void *x, TdmDtype x_type, float *spare, int n,
                int in_h, int in_w, int in_c, int kernel, int pad, int stride, size_t pixels,
                int k)
{
  TdmBackend *b = r->backend;
  size_t x_sample = (size_t)in_h * in_w * in_c, sample_cols = pixels * (size_t)k;
  if (x_type != TDM_DTYPE_BF16 || col == NULL || sample_cols >= x_sample)
    return NULL;
  int chunk = tdm_conv_chunk_samples(n, sample_cols * sizeof(float), r->columns_bound);
  for (int first = 0; first < n; first += chunk) {
    int m = MIN(chunk, n - first);
    tdm_backend_im2col_bf16(b, (uint16_t *)col,
                            tdm_conv_advanced(x, x_type, (size_t)first * x_sample), x_type, m,
                            in_h, in_w, in_c, kernel, kernel, pad, stride);
    tdm_backend_from_bf16(b, spare + (size_t)first * sample_cols, (const uint16_t *)col,
                          (size_t)m * sample_cols);
  }
  return spare;
}

/* Whether a conv runs its forward and weight-gradient products on bfloat16 operands
 * (--precision bf16 on a backend that has them): one with columns (col) whose outputs
 * are no more than its reduction, or a 1×1 conv of no padding (conv_bf16_columns()'s
 * rule, which the memory plan sizes the workspace by), whose columns are its input
 * itself, or every stride-th pixel of it. In the forward the columns, as bf16, take
 * the workspace's start (a 1×1 conv of stride 1 reads a bf16 input as it is: no copy;
 * the weights as bf16 come from params16, which every bf16 replica keeps). In the
 * backward the output gradient as bf16 (rows · out_c) starts the workspace, where the
 * convolution engine's layout has it too (the bn after the conv writes it there,
 * bn_dx_as_conv_dy16()), and a chunk of bf16 columns follows. Else (a first layer of few
 * input channels) the float32 path. The data gradient goes through bf16 columns too
 * (conv_bf16_dx) where the replica keeps params16, or where the weights fit after the
 * columns: its product writes them where the columns were, after the weight gradient
 * has read them, and col2im sums them in float32. */
gboolean
tdm_replica_conv_bf16(TdmReplica *r, const float *col, int kernel, int pad, int rows, int k,
                      int out_c)
{
  if (r->backend->precision != TDM_PRECISION_BF16)
    return FALSE;
  if (kernel == 1 && pad == 0)
    return r->params16 != NULL && r->columns != NULL;
  return col != NULL && out_c <= k && (r->params16 != NULL || out_c <= rows);
}

gboolean
tdm_replica_conv_bf16_dx(TdmReplica *r, int rows, int k, int out_c)
{
  return r->params16 != NULL || (size_t)rows * out_c + (size_t)out_c * k <= (size_t)rows * k;
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

/* The convolution engine's view of a conv layer's call (tdm-backend.h): its shape, the
 * input (or the bn's input it normalizes as it reads), the weights (and their bf16
 * copy), the one workspace. */
static TdmConvArgs
conv_args(TdmReplica *r, const void *x, TdmDtype x_type, const BnGather *bn, const float *w,
          int n, int in_h, int in_w, int in_c, int out_c, int kernel, int pad, int stride,
          size_t *needed)
{
  TdmConvArgs a = {
      .shape = {n, in_h, in_w, in_c, out_c, kernel, pad, stride},
      .x = bn != NULL ? bn->x : x,
      .x_type = bn != NULL ? bn->x_type : x_type,
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

/* How many times a conv gives the engine a grown workspace: once to time the
 * candidates of each direction, once more for the choice. */
#define ENGINE_TRIES 3

/* The convolution engine's call, forward or backward: TRUE when it ran it, the
 * workspace noted as holding what its choice needs (*need, which the call writes).
 * Where the workspace holds less than the engine asks for (room to time its
 * candidates, then its choice), it grows (a dy16 the bn wrote at its start,
 * dy16_at_start, moves with it) and the call is tried again. FALSE: the caller composes
 * the convolution. */
static gboolean
engine_runs(TdmReplica *r, TdmConvArgs *args, size_t *need, gboolean forward,
            gboolean dy16_at_start)
{
  gboolean (*run)(TdmBackend *, const TdmConvArgs *) =
      forward ? tdm_backend_conv_engine_forward : tdm_backend_conv_engine_backward;
  const TdmConvShape *s = &args->shape;
  size_t keep = dy16_at_start ? (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s) *
                                    s->out_c * sizeof(uint16_t)
                              : 0;
  for (int tries = 0;; tries++) {
    if (run(r->backend, args)) {
      tdm_replica_workspace_holds(r, *need, 0);
      return TRUE;
    }
    if (tries == ENGINE_TRIES || *need <= args->work_bytes ||
        !tdm_replica_workspace_grow(r, *need, keep))
      return FALSE;
    args->work = r->columns;
    args->work_bytes = r->columns_bytes;
    if (dy16_at_start)
      args->dy16 = (const uint16_t *)r->columns;
  }
}

/* The workspace a conv composed here uses (tdm_conv_replica_bytes()): a chunk of bf16
 * columns, after the bf16 output gradient in backward (unless it lies outside the
 * workspace: dy16_outside), and the bf16 weights after them where the replica keeps no
 * params16; a chunk of float32 columns otherwise, with a float32 stage after them where
 * the forward writes a bf16 output (staged) or the backward reads a bf16 output
 * gradient (dy16). */
static size_t
own_columns_bytes(TdmReplica *r, const TdmConvShape *s, gboolean backward, gboolean need_dx,
                  gboolean staged, gboolean dy16, gboolean dy16_outside)
{
  int rows = s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s);
  int k = s->c * s->kernel * s->kernel;
  TdmConvComposition how = {
      .columns = r->columns != NULL,
      .bf16 = tdm_replica_conv_bf16(r, r->columns, s->kernel, s->pad, rows, k, s->out_c),
      .bf16_dx = tdm_replica_conv_bf16_dx(r, rows, k, s->out_c),
      .params16 = r->params16 != NULL,
      .y16 = staged,
      .dy16 = dy16,
      .dy16_outside = dy16_outside,
  };
  return tdm_conv_replica_bytes(s, &how, backward, need_dx, r->columns_bound);
}

/* The workspace as a whole convolution's scratch, grown to hold what this one needs
 * where it holds less (a replica made with a small workspace). */
/* The bf16 columns of samples first … first + m − 1, from x or, with bn, from the bn's
 * input normalized while loaded (as the forward built them). */
static void
chunk_columns16(TdmBackend *b, uint16_t *col16, const void *x, TdmDtype x_type,
                const BnGather *bn, int first, int m, int in_h, int in_w, int in_c, int kernel,
                int pad, int stride)
{
  size_t at = (size_t)first * in_h * in_w * in_c;
  if (bn != NULL)
    tdm_backend_im2col_bf16_bn(b, col16, tdm_conv_advanced(bn->x, bn->x_type, at), bn->x_type,
                               bn->saved, bn->saved + in_c, bn->gamma, bn->beta, bn->relu, m,
                               in_h, in_w, in_c, kernel, kernel, pad, stride);
  else
    tdm_backend_im2col_bf16(b, col16, tdm_conv_advanced(x, x_type, at), x_type, m, in_h, in_w,
                            in_c, kernel, kernel, pad, stride);
}

/* The bf16 columns of samples first … first + m − 1: for a 1×1 conv of stride 1 and no
 * padding whose input is stored as bf16 and not normalized on the way, the input itself
 * from the chunk's first sample (the same values im2col_bf16 would copy); for any other
 * conv, built into col16 (chunk_columns16()). */
static const uint16_t *
columns16(TdmBackend *b, uint16_t *col16, const void *x, TdmDtype x_type, const BnGather *bn,
          int first, int m, int in_h, int in_w, int in_c, int kernel, int pad, int stride)
{
  if (kernel == 1 && pad == 0 && stride == 1 && bn == NULL && x_type == TDM_DTYPE_BF16)
    return (const uint16_t *)x + (size_t)first * in_h * in_w * in_c;
  chunk_columns16(b, col16, x, x_type, bn, first, m, in_h, in_w, in_c, kernel, pad, stride);
  return col16;
}

static float *
whole_scratch(TdmReplica *r, int in_h, int in_w, int in_c, int out_c, int kernel, int pad,
              int stride)
{
  size_t floats = tdm_backend_conv_work_floats(r->backend->kind, in_h, in_w, in_c, out_c,
                                               kernel, pad, stride);
  tdm_replica_workspace_holds(r, floats * sizeof(float), 0);
  return r->conv_scratch;
}

/* A conv's product: the backend's whole convolution where the layer has its scratch
 * (work: tdm_replica_layer_buffers() gave it one because the backend takes the shape),
 * else out = cols(x) · Wᵀ, the columns kept in col (or x itself for a 1×1 conv of
 * stride 1). With bn, x was never written: the columns normalize bn->x. With y16, the
 * output is stored as bf16 there instead of y (conv_output_bf16()): each value the
 * float32 sum rounded once, by the bf16 product itself where the conv has bf16 columns,
 * else after a float32 product into the gradient region, which the forward leaves
 * unused: at grad_a (the whole region) where x is float32, at grad_b where x is bf16
 * (a block's input, block_output_bf16()), which float32 columns read widened at grad_a
 * (widened_columns()); bf16 columns gather it as it is. */
void
tdm_replica_conv_forward(TdmReplica *r, float *y, uint16_t *y16, const void *x, TdmDtype x_type,
                         const BnGather *bn, float *col, float *work, const float *w, int n,
                         int in_h, int in_w, int in_c, int out_c, int kernel, int pad,
                         int stride, int out_h, int out_w)
{
  TdmBackend *b = r->backend;
  int rows = n * out_h * out_w;
  int k = in_c * kernel * kernel;
  if (work != NULL) {
    g_assert(y16 == NULL && x_type == TDM_DTYPE_F32); /* a bf16 run composes every conv */
    work = whole_scratch(r, in_h, in_w, in_c, out_c, kernel, pad, stride);
    tdm_backend_conv_forward(b, y, x, w, work, n, in_h, in_w, in_c, out_c, kernel, pad, stride);
    return;
  }
  size_t need = 0;
  TdmConvArgs args =
      conv_args(r, x, x_type, bn, w, n, in_h, in_w, in_c, out_c, kernel, pad, stride, &need);
  args.y = y16 != NULL ? NULL : y;
  args.y16 = y16;
  if (engine_runs(r, &args, &need, TRUE, FALSE))
    return;
  gboolean bf16 = tdm_replica_conv_bf16(r, col, kernel, pad, rows, k, out_c);
  /* A bf16 output of float32 columns built from a float32 input: each chunk's product
   * staged after its columns, then rounded into its rows of y16 (to_bf16's bits, in
   * chunks: no float32 copy of the whole output in the gradient region). */
  gboolean staged = !bf16 && col != NULL && y16 != NULL && x_type == TDM_DTYPE_F32;
  if (col != NULL || bf16) {
    tdm_replica_workspace_holds(
        r, own_columns_bytes(r, &args.shape, FALSE, FALSE, staged, FALSE, FALSE), 0);
    col = r->columns;
  }
  /* The columns a chunk of samples at a time (tdm-conv-columns.h): each chunk's rows of
   * the output from its own columns. */
  size_t bound = r->columns_bound;
  size_t pixels = (size_t)out_h * out_w, x_sample = (size_t)in_h * in_w * in_c;
  if (bf16) {
    uint16_t *col16 = (uint16_t *)col;
    int chunk = tdm_conv_chunk_samples(n, pixels * k * sizeof(uint16_t), bound);
    const uint16_t *w16 =
        conv_weights16(r, w, (size_t)out_c * k, col16 + (size_t)chunk * pixels * k);
    for (int first = 0; first < n; first += chunk) {
      int m = MIN(chunk, n - first), m_rows = m * (int)pixels;
      size_t out_at = (size_t)first * pixels * out_c;
      const uint16_t *a =
          columns16(b, col16, x, x_type, bn, first, m, in_h, in_w, in_c, kernel, pad, stride);
      if (y16 != NULL)
        tdm_backend_gemm_bf16_out(b, false, true, m_rows, out_c, k, a, k, w16, k, y16 + out_at,
                                  out_c);
      else
        tdm_backend_gemm_bf16(b, false, true, m_rows, out_c, k, 1.0f, a, k, w16, k, 0.0f,
                              y + out_at, out_c);
    }
    return;
  }
  g_assert(bn == NULL); /* a bn's output is left only to a conv with bf16 columns */
  g_assert(x_type == TDM_DTYPE_BF16 || !in_gradient_region(r, x));
  if (staged) {
    int chunk = tdm_conv_staged_chunk(&args.shape, bound);
    float *stage = (float *)((char *)col + tdm_conv_staged_stage_at(&args.shape, FALSE, bound));
    for (int first = 0; first < n; first += chunk) {
      int m = MIN(chunk, n - first);
      tdm_backend_im2col(b, col, (const float *)x + (size_t)first * x_sample, m, in_h, in_w,
                         in_c, kernel, kernel, pad, stride);
      tdm_backend_gemm(b, false, true, m * (int)pixels, out_c, k, 1.0f, col, k, w, k, 0.0f,
                       stage, out_c);
      tdm_backend_to_bf16(b, y16 + (size_t)first * pixels * out_c, stage,
                          (size_t)m * pixels * out_c);
    }
    return;
  }
  float *out = y16 == NULL ? y : x_type == TDM_DTYPE_F32 ? r->grad_a : r->grad_b;
  const float *cols32 = widened_columns(r, col, x, x_type, r->grad_a, n, in_h, in_w, in_c,
                                        kernel, pad, stride, pixels, k);
  if (cols32 != NULL) {
    tdm_backend_gemm(b, false, true, rows, out_c, k, 1.0f, cols32, k, w, k, 0.0f, out, out_c);
  } else {
    const float *a = tdm_replica_as_f32(r, x, x_type, (size_t)n * x_sample, r->grad_a);
    if (col == NULL)
      tdm_backend_gemm(b, false, true, rows, out_c, k, 1.0f, a, k, w, k, 0.0f, out, out_c);
    int chunk = tdm_conv_chunk_samples(n, pixels * k * sizeof(float), bound);
    for (int first = 0; col != NULL && first < n; first += chunk) {
      int m = MIN(chunk, n - first);
      tdm_backend_im2col(b, col, a + (size_t)first * x_sample, m, in_h, in_w, in_c, kernel,
                         kernel, pad, stride);
      tdm_backend_gemm(b, false, true, m * (int)pixels, out_c, k, 1.0f, col, k, w, k, 0.0f,
                       out + (size_t)first * pixels * out_c, out_c);
    }
  }
  if (y16 != NULL)
    tdm_backend_to_bf16(b, y16, out, (size_t)rows * out_c);
}

/* Its backward from dy: dw, and dx when wanted (col is spent: its gradient takes its
 * place before col2im); dx_bf16: dx is wanted as bf16 (the bn before the conv reads it
 * so), which the convolution engine and bf16 columns write (each float32 sum rounded
 * once), the float32 ways not. Returns the type dx was written in. The columns live in the one
 * workspace that every layer's forward overwrote since, so they are built again from x (or,
 * with bn, from the bn's input, as the forward built them): the same bits. dy16, where not
 * NULL: the bn after it wrote dy as bf16 already (bn_dx_as_conv_dy16()), at the
 * workspace's start, which the bf16 columns leave alone, or in place in the gradient
 * region (bn_dx_in_place(): the workspace then holds no copy), and dy is not read. */
TdmDtype
tdm_replica_conv_backward(TdmReplica *r, float *dx, gboolean dx_bf16, float *dw,
                          const float *dy, const uint16_t *dy16, const void *x, TdmDtype x_type,
                          const BnGather *bn, float *col, float *work, const float *w, int n,
                          int in_h, int in_w, int in_c, int out_c, int kernel, int pad,
                          int stride, int out_h, int out_w, gboolean need_dx)
{
  TdmBackend *b = r->backend;
  int rows = n * out_h * out_w;
  int k = in_c * kernel * kernel;
  if (work != NULL) {
    g_assert(x_type == TDM_DTYPE_F32);
    work = whole_scratch(r, in_h, in_w, in_c, out_c, kernel, pad, stride);
    tdm_backend_conv_backward(b, need_dx ? dx : NULL, dw, dy, x, w, work, n, in_h, in_w, in_c,
                              out_c, kernel, pad, stride);
    return TDM_DTYPE_F32;
  }
  TdmDtype dx_type = need_dx && dx_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
  size_t need = 0;
  TdmConvArgs args =
      conv_args(r, x, x_type, bn, w, n, in_h, in_w, in_c, out_c, kernel, pad, stride, &need);
  args.dy = dy;
  args.dy16 = dy16;
  gboolean at_start = dy16 != NULL && dy16 == (const uint16_t *)r->columns;
  gboolean outside = dy16 != NULL && !at_start;
  args.dx = need_dx && dx_type == TDM_DTYPE_F32 ? dx : NULL;
  args.dx16 = need_dx && dx_type == TDM_DTYPE_BF16 ? (uint16_t *)dx : NULL;
  args.dw = dw;
  if (engine_runs(r, &args, &need, FALSE, at_start))
    return dx_type;
  gboolean bf16 = tdm_replica_conv_bf16(r, col, kernel, pad, rows, k, out_c);
  /* A bf16 output gradient for float32 columns (bn_dx_to_conv(): the network's first
   * layer, no input gradient), at the workspace's start or outside it. */
  gboolean widened = !bf16 && dy16 != NULL;
  if (col != NULL || bf16) {
    size_t keep = at_start ? (size_t)rows * out_c * sizeof(uint16_t) : 0;
    tdm_replica_workspace_holds(
        r, own_columns_bytes(r, &args.shape, TRUE, need_dx, FALSE, widened, outside), keep);
    col = r->columns;
  }
  /* The columns a chunk of samples at a time (tdm-conv-columns.h): the weight gradient
   * the first chunk's product, each next one's added to it in float32 (beta = 1), in
   * the chunks' order; the input gradient chunk by chunk. */
  size_t bound = r->columns_bound;
  size_t pixels = (size_t)out_h * out_w, x_sample = (size_t)in_h * in_w * in_c;
  if (bf16) {
    /* dy as bf16 at the workspace's start, then a chunk of columns; or, where the bn
     * wrote it outside, the columns from the start. */
    const uint16_t *g16 = outside ? dy16 : (const uint16_t *)col;
    uint16_t *col16 = outside ? (uint16_t *)col : (uint16_t *)col + (size_t)rows * out_c;
    if (dy16 == NULL)
      tdm_backend_to_bf16(b, (uint16_t *)col, dy, (size_t)rows * out_c);
    int chunk = tdm_conv_chunk_samples(n, pixels * k * sizeof(uint16_t), bound);
    for (int first = 0; first < n; first += chunk) {
      int m = MIN(chunk, n - first);
      const uint16_t *a =
          columns16(b, col16, x, x_type, bn, first, m, in_h, in_w, in_c, kernel, pad, stride);
      tdm_backend_gemm_bf16(b, true, false, out_c, k, m * (int)pixels, 1.0f,
                            g16 + (size_t)first * pixels * out_c, out_c, a, k,
                            first == 0 ? 0.0f : 1.0f, dw, k);
    }
    if (need_dx && tdm_replica_conv_bf16_dx(r, rows, k, out_c)) {
      const uint16_t *w16 =
          conv_weights16(r, w, (size_t)out_c * k, col16 + (size_t)chunk * pixels * k);
      for (int first = 0; first < n; first += chunk)
        tdm_backend_conv_dgrad_bf16(
            b, (void *)tdm_conv_advanced(dx, dx_type, (size_t)first * x_sample), dx_type,
            g16 + (size_t)first * pixels * out_c, w16, col16, MIN(chunk, n - first), in_h, in_w,
            in_c, out_c, kernel, kernel, pad, stride);
      return dx_type;
    }
  } else if (widened) {
    /* Each chunk's float32 columns after the bf16 output gradient (from the workspace's
     * start where that gradient lies outside it), and that gradient's rows of the chunk
     * widened after them: the same product as from float32 dy, on the bf16 values the bn
     * wrote (its gradient rounded once, as the engine reads it). */
    g_assert(col != NULL && !need_dx && x_type == TDM_DTYPE_F32);
    /* At the start, it moved with the workspace where that grew. */
    const uint16_t *g16 = at_start ? (const uint16_t *)r->columns : dy16;
    float *cols32 =
        (float *)((char *)r->columns + tdm_conv_staged_columns_at(&args.shape, at_start));
    float *stage =
        (float *)((char *)r->columns + tdm_conv_staged_stage_at(&args.shape, at_start, bound));
    int chunk = tdm_conv_staged_chunk(&args.shape, bound);
    for (int first = 0; first < n; first += chunk) {
      int m = MIN(chunk, n - first);
      size_t out_at = (size_t)first * pixels * out_c;
      tdm_backend_im2col(b, cols32, (const float *)x + (size_t)first * x_sample, m, in_h, in_w,
                         in_c, kernel, kernel, pad, stride);
      tdm_backend_from_bf16(b, stage, g16 + out_at, (size_t)m * pixels * out_c);
      tdm_backend_gemm(b, true, false, out_c, k, m * (int)pixels, 1.0f, stage, out_c, cols32, k,
                       first == 0 ? 0.0f : 1.0f, dw, k);
    }
    return TDM_DTYPE_F32;
  } else {
    /* A bf16 x widened into dx (its columns, or itself), which is written only after it
     * is read. */
    const float *cols32 = widened_columns(r, col, x, x_type, dx, n, in_h, in_w, in_c, kernel,
                                          pad, stride, pixels, k);
    if (cols32 != NULL) {
      tdm_backend_gemm(b, true, false, out_c, k, rows, 1.0f, dy, out_c, cols32, k, 0.0f, dw, k);
    } else {
      const float *xf = tdm_replica_as_f32(r, x, x_type, (size_t)n * x_sample, dx);
      if (col == NULL)
        tdm_backend_gemm(b, true, false, out_c, k, rows, 1.0f, dy, out_c, xf, k, 0.0f, dw, k);
      int chunk = tdm_conv_chunk_samples(n, pixels * k * sizeof(float), bound);
      for (int first = 0; col != NULL && first < n; first += chunk) {
        int m = MIN(chunk, n - first);
        tdm_backend_im2col(b, col, xf + (size_t)first * x_sample, m, in_h, in_w, in_c, kernel,
                           kernel, pad, stride);
        tdm_backend_gemm(b, true, false, out_c, k, m * (int)pixels, 1.0f,
                         dy + (size_t)first * pixels * out_c, out_c, col, k,
                         first == 0 ? 0.0f : 1.0f, dw, k);
      }
    }
  }
  if (!need_dx)
    return TDM_DTYPE_F32;
  if (col == NULL) {
    tdm_backend_gemm(b, false, false, rows, k, out_c, 1.0f, dy, out_c, w, k, 0.0f, dx, k);
    return TDM_DTYPE_F32;
  }
  int chunk = tdm_conv_chunk_samples(n, pixels * k * sizeof(float), bound);
  for (int first = 0; first < n; first += chunk) {
    int m = MIN(chunk, n - first);
    tdm_backend_gemm(b, false, false, m * (int)pixels, k, out_c, 1.0f,
                     dy + (size_t)first * pixels * out_c, out_c, w, k, 0.0f, col, k);
    tdm_backend_col2im(b, dx + (size_t)first * x_sample, col, m, in_h, in_w, in_c, kernel,
                       kernel, pad, stride);
  }
  return TDM_DTYPE_F32;
}
