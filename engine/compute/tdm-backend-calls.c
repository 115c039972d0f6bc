/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-calls.c — the front door of the backends (tdm-backend.h): one function
 * per operation that counts it, does nothing after an earlier failure, checks its
 * arguments once for every backend (a bad one is the sticky error, naming the
 * operation), and calls the backend's table, which trusts them. Here memory, the
 * GEMMs, convolutions and their bf16 operands, the fixed-window pools, the loss, the
 * input, the communicators' helpers and graphs; batch normalization, the other pools,
 * dropout and the optimizers are in tdm-backend-calls-layers.c. What a backend does
 * with the arguments is its own (compute/cpu/, compute/cuda/). */
#include "tdm-backend-calls.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <stddef.h>
#include <string.h>

/* Memory */

void *
tdm_backend_alloc(TdmBackend *b, size_t bytes, GError **error)
{
  size_t held = __atomic_load_n(&b->bytes_in_use, __ATOMIC_RELAXED);
  if (b->bytes_limit > 0 && (bytes > b->bytes_limit || held > b->bytes_limit - bytes)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                _("%s: out of memory: %zu bytes more would pass its limit of %zu bytes "
                  "(%zu held)"),
                b->name, bytes, b->bytes_limit, held);
    return NULL;
  }
  return b->ops->alloc(b, bytes, error);
}

void
tdm_backend_release(TdmBackend *b, void *ptr)
{
  if (ptr != NULL)
    b->ops->free(b, ptr);
}

void
tdm_backend_upload(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  if (tdm_backend_enter(b) && bytes > 0)
    b->ops->upload(b, dst, src, bytes);
}

void
tdm_backend_download(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  if (tdm_backend_enter(b) && bytes > 0)
    b->ops->download(b, dst, src, bytes);
}

void
tdm_backend_copy(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  /* A communicator may well copy a buffer onto itself. */
  if (tdm_backend_enter(b) && bytes > 0 && dst != src)
    b->ops->copy(b, dst, src, bytes);
}

void
tdm_backend_zero(TdmBackend *b, void *ptr, size_t bytes)
{
  if (tdm_backend_enter(b) && bytes > 0)
    b->ops->zero(b, ptr, bytes);
}

/* Not an operation issued, so not counted. */
void
tdm_backend_synchronize(TdmBackend *b)
{
  if (!tdm_backend_failed(b))
    b->ops->synchronize(b);
}

/* GEMM */

/* BLAS libraries report bad arguments by printing (OpenBLAS's xerbla) or by a status
 * code: checked here, they reach the user as the operation's error instead. */
static gboolean
gemm_args_ok(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, int lda, int ldb,
             int ldc)
{
  const char *why = NULL;
  if (m < 0 || n < 0 || k < 0)
    why = "negative size";
  else if (lda < MAX(1, trans_a ? m : k))
    why = "lda too small";
  else if (ldb < MAX(1, trans_b ? k : n))
    why = "ldb too small";
  else if (ldc < MAX(1, n))
    why = "ldc too small";
  if (why == NULL)
    return TRUE;
  tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("gemm %d×%d×%d (lda %d, ldb %d, ldc %d): %s"),
                   m, n, k, lda, ldb, ldc, why);
  return FALSE;
}

void
tdm_backend_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *bm, int ldb, float beta, float *c,
                 int ldc)
{
  if (tdm_backend_enter(b) && gemm_args_ok(b, trans_a, trans_b, m, n, k, lda, ldb, ldc) &&
      m > 0 && n > 0)
    b->ops->gemm(b, trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc);
}

/* Bias and ReLU */

void
tdm_backend_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
                         int inner, bool relu)
{
  if (tdm_backend_enter(b) &&
      TDM_ARGS_OK(b, outer >= 0 && channels >= 0 && inner >= 0, _("%s: bad shape %d×%d×%d"),
                  "bias_forward", outer, channels, inner))
    b->ops->bias_forward(b, y, bias, outer, channels, inner, relu);
}

void
tdm_backend_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer, int channels,
                          int inner)
{
  if (tdm_backend_enter(b) &&
      TDM_ARGS_OK(b, outer >= 0 && channels >= 0 && inner >= 0, _("%s: bad shape %d×%d×%d"),
                  "bias_backward", outer, channels, inner))
    b->ops->bias_backward(b, dbias, dy, outer, channels, inner);
}

void
tdm_backend_relu_forward(TdmBackend *b, float *y, const float *x, size_t n)
{
  if (tdm_backend_enter(b))
    b->ops->relu_forward(b, y, x, n);
}

void
tdm_backend_relu_backward(TdmBackend *b, float *dx, const float *dy, const float *y, size_t n)
{
  if (tdm_backend_enter(b))
    b->ops->relu_backward(b, dx, dy, y, n);
}

/* Convolution */

/* The shape checks the convolution families share. */
static gboolean
conv_args_ok(TdmBackend *b, const char *op, int n, int h, int w, int c, int kh, int kw, int pad,
             int stride)
{
  return TDM_ARGS_OK(b,
                     n >= 0 && h >= 1 && w >= 1 && c >= 1 && kh >= 1 && kw >= 1 && pad >= 0 &&
                         stride >= 1 && h + 2 * pad - kh + 1 >= 1 && w + 2 * pad - kw + 1 >= 1,
                     _("%s: bad shape n=%d h=%d w=%d c=%d kernel %d×%d pad %d stride %d"), op,
                     n, h, w, c, kh, kw, pad, stride);
}

void
tdm_backend_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c,
                   int kh, int kw, int pad, int stride)
{
  if (tdm_backend_enter(b) &&
      conv_args_ok(b, "im2col", n, h, w, c, kh, kw, pad, stride))
    b->ops->im2col(b, col, x, n, h, w, c, kh, kw, pad, stride);
}

void
tdm_backend_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c,
                   int kh, int kw, int pad, int stride)
{
  if (tdm_backend_enter(b) &&
      conv_args_ok(b, "col2im", n, h, w, c, kh, kw, pad, stride))
    b->ops->col2im(b, dx, col, n, h, w, c, kh, kw, pad, stride);
}

/* A whole convolution. Which shapes a backend takes whole is its own rule
 * (tdm_backend_conv_work_floats() sizes the caller's scratch by it), which it checks. */
static gboolean
whole_conv_ok(TdmBackend *b, const char *op, int n, int h, int w, int c, int out_c, int kernel,
              int pad, int stride)
{
  return TDM_HAS_OP(b, conv_forward) &&
         conv_args_ok(b, op, n, h, w, c, kernel, kernel, pad, stride) &&
         TDM_ARGS_OK(b, out_c >= 1, _("%s: %d output channels"), op, out_c);
}

void
tdm_backend_conv_forward(TdmBackend *b, float *y, const float *x, const float *wt, float *work,
                         int n, int h, int w, int c, int out_c, int kernel, int pad, int stride)
{
  if (tdm_backend_enter(b) &&
      whole_conv_ok(b, "conv_forward", n, h, w, c, out_c, kernel, pad, stride))
    b->ops->conv_forward(b, y, x, wt, work, n, h, w, c, out_c, kernel, pad, stride);
}

void
tdm_backend_conv_backward(TdmBackend *b, float *dx, float *dw, const float *dy, const float *x,
                          const float *wt, float *work, int n, int h, int w, int c, int out_c,
                          int kernel, int pad, int stride)
{
  if (tdm_backend_enter(b) &&
      whole_conv_ok(b, "conv_backward", n, h, w, c, out_c, kernel, pad, stride))
    b->ops->conv_backward(b, dx, dw, dy, x, wt, work, n, h, w, c, out_c, kernel, pad, stride);
}

/* The engine takes its own arguments' measure (the shape is the layer's, checked when
 * the network was built); counted as one operation when it takes the call. */
gboolean
tdm_backend_conv_engine_forward(TdmBackend *b, const TdmConvArgs *a)
{
  return b->ops->conv_engine_forward != NULL && !tdm_backend_failed(b) &&
         b->ops->conv_engine_forward(b, a) && (b->operations++, TRUE);
}

gboolean
tdm_backend_conv_engine_backward(TdmBackend *b, const TdmConvArgs *a)
{
  return b->ops->conv_engine_backward != NULL && !tdm_backend_failed(b) &&
         b->ops->conv_engine_backward(b, a) && (b->operations++, TRUE);
}

void
tdm_backend_conv_choices(TdmBackend *b, TdmConvChoices *counts)
{
  memset(counts, 0, sizeof *counts);
  if (b->ops->conv_choices != NULL)
    b->ops->conv_choices(b, counts);
}

static gboolean
conv_pool_ok(TdmBackend *b, const char *op, int n, int h, int w, int c, int out, int kh, int kw,
             int pad, int pk)
{
  return conv_args_ok(b, op, n, h, w, c, kh, kw, pad, 1) &&
         TDM_ARGS_OK(b,
                     out >= 1 && out <= TDM_CONV_POOL_OUT &&
                         kh * kw * c <= TDM_CONV_POOL_TAPS && pk >= 1 &&
                         (guint64)n * (h + 2 * pad - kh + 1) * (w + 2 * pad - kw + 1) * out <=
                             G_MAXINT32,
                     _("%s: %d outputs of %d×%d×%d taps, pool %d, batch %d: outside what it "
                       "takes (at most %d outputs, %d taps, int32 indices)"),
                     op, out, kh, kw, c, pk, n, TDM_CONV_POOL_OUT, TDM_CONV_POOL_TAPS);
}

void
tdm_backend_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                              const float *wt, const float *bias, bool relu, int n, int h,
                              int w, int c, int out, int kh, int kw, int pad, int pk)
{
  if (tdm_backend_enter(b) &&
      conv_pool_ok(b, "conv_pool_forward", n, h, w, c, out, kh, kw, pad, pk))
    b->ops->conv_pool_forward(b, y, argmax, x, wt, bias, relu, n, h, w, c, out, kh, kw, pad,
                              pk);
}

void
tdm_backend_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                               const int32_t *argmax, const float *y, const float *x, bool relu,
                               int n, int h, int w, int c, int out, int kh, int kw, int pad,
                               int pk)
{
  if (tdm_backend_enter(b) &&
      conv_pool_ok(b, "conv_pool_backward", n, h, w, c, out, kh, kw, pad, pk))
    b->ops->conv_pool_backward(b, dwt, dbias, dy, argmax, y, x, relu, n, h, w, c, out, kh, kw,
                               pad, pk);
}

/* Max pooling of windows that tile the input */

static gboolean
maxpool_ok(TdmBackend *b, const char *op, int n, int h, int w, int c, int k)
{
  return TDM_ARGS_OK(b, n >= 0 && h >= 0 && w >= 0 && c >= 0 && k >= 1,
                     _("%s: bad shape n=%d h=%d w=%d c=%d k=%d"), op, n, h, w, c, k) &&
         TDM_ARGS_OK(b, (guint64)n * h * w * c <= G_MAXINT32,
                     _("%s: %d×%d×%d×%d inputs do not fit int32 indices"), op, n, h, w, c);
}

void
tdm_backend_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                            const float *bias, bool relu, int n, int h, int w, int c, int k)
{
  if (tdm_backend_enter(b) && maxpool_ok(b, "maxpool_forward", n, h, w, c, k))
    b->ops->maxpool_forward(b, y, argmax, x, bias, relu, n, h, w, c, k);
}

void
tdm_backend_maxpool_forward_bn(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                               const float *mean, const float *invstd, const float *gamma,
                               const float *beta, bool relu, int n, int h, int w, int c, int k)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, maxpool_forward_bn) &&
      maxpool_ok(b, "maxpool_forward_bn", n, h, w, c, k))
    b->ops->maxpool_forward_bn(b, y, argmax, x, mean, invstd, gamma, beta, relu, n, h, w, c, k);
}

void
tdm_backend_maxpool_backward(TdmBackend *b, float *dx, float *dbias, const float *dy,
                             const int32_t *argmax, const float *y, int n, int h, int w, int c,
                             int k)
{
  if (tdm_backend_enter(b) && maxpool_ok(b, "maxpool_backward", n, h, w, c, k))
    b->ops->maxpool_backward(b, dx, dbias, dy, argmax, y, n, h, w, c, k);
}

void
tdm_backend_maxpool_forward_bf16(TdmBackend *b, uint16_t *y, int32_t *argmax, const void *x,
                                 TdmDtype x_type, const float *mean, const float *invstd,
                                 const float *gamma, const float *beta, bool relu, int n, int h,
                                 int w, int c, int k)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, maxpool_forward_bf16) &&
      maxpool_ok(b, "maxpool_forward_bf16", n, h, w, c, k) &&
      tdm_backend_input_ok(b, "maxpool_forward_bf16", x_type) &&
      TDM_ARGS_OK(b, (mean == NULL) == (invstd == NULL) && (mean == NULL) == (gamma == NULL) &&
                         (mean == NULL) == (beta == NULL) && (mean != NULL || !relu),
                  _("%s: give all four of the bn's mean, invstd, gamma and beta, or none (and "
                    "then no ReLU)"),
                  "maxpool_forward_bf16"))
    b->ops->maxpool_forward_bf16(b, y, argmax, x, x_type, mean, invstd, gamma, beta, relu, n, h,
                                 w, c, k);
}

void
tdm_backend_maxpool_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                                  TdmDtype dy_type, const int32_t *argmax, int n, int h, int w,
                                  int c, int k)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, maxpool_backward_bf16) &&
      maxpool_ok(b, "maxpool_backward_bf16", n, h, w, c, k) &&
      tdm_backend_input_ok(b, "maxpool_backward_bf16", dx_type) &&
      tdm_backend_input_ok(b, "maxpool_backward_bf16", dy_type))
    b->ops->maxpool_backward_bf16(b, dx, dx_type, dy, dy_type, argmax, n, h, w, c, k);
}

/* Loss and input */

void
tdm_backend_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
                         int classes, float smoothing, float grad_scale, float *dlogits,
                         TdmMetrics *metrics)
{
  if (tdm_backend_enter(b) &&
      TDM_ARGS_OK(b, rows >= 0 && classes >= 1, _("%s: bad shape %d×%d"), "softmax_xent", rows,
                  classes) &&
      TDM_ARGS_OK(b, smoothing >= 0.0f && smoothing <= 1.0f,
                  _("softmax_xent: label smoothing %g is not in [0, 1]"), smoothing))
    b->ops->softmax_xent(b, logits, labels, rows, classes, smoothing, grad_scale, dlogits,
                         metrics);
}

void
tdm_backend_gather(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                   const uint8_t *labels, const int32_t *indices, int count, int sample_size,
                   float scale)
{
  if (tdm_backend_enter(b) &&
      TDM_ARGS_OK(b, count >= 0 && sample_size >= 0, _("%s: bad shape %d×%d"), "gather", count,
                  sample_size) &&
      count > 0 && sample_size > 0)
    b->ops->gather(b, x, y, images, labels, indices, count, sample_size, scale);
}

void
tdm_backend_gather_augment(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                           const uint8_t *labels, const int32_t *indices, int count, int h,
                           int w, int c, float scale, int pad, TdmFlip flip, uint64_t key,
                           uint32_t epoch)
{
  if (tdm_backend_enter(b) &&
      TDM_ARGS_OK(b,
                  count >= 0 && h >= 1 && w >= 1 && c >= 1 && pad >= 0 &&
                      (guint64)h * w * c <= G_MAXINT32 && flip >= TDM_FLIP_NEVER &&
                      flip <= TDM_FLIP_ALWAYS,
                  _("%s: bad shape %d×%d×%d×%d pad %d"), "gather_augment", count, h, w, c, pad))
    b->ops->gather_augment(b, x, y, images, labels, indices, count, h, w, c, scale, pad, flip,
                           key, epoch);
}

void
tdm_backend_gather_photo(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                         const uint8_t *labels, const int32_t *indices, int count, int h, int w,
                         int c, const TdmPhotoAugment *augment, uint64_t key, uint32_t epoch)
{
  if (tdm_backend_enter(b) &&
      TDM_HAS_OP(b, gather_photo) &&
      TDM_ARGS_OK(b,
                  count >= 0 && h >= 1 && w >= 1 && c >= 1 && c <= 4 && augment != NULL &&
                      (guint64)h * w * c <= G_MAXINT32,
                  _("%s: bad shape %d×%d×%d×%d"), "gather_photo", count, h, w, c) &&
      count > 0)
    b->ops->gather_photo(b, x, y, images, labels, indices, count, h, w, c, augment, key, epoch);
}

void
tdm_backend_channel_affine(TdmBackend *b, float *x, size_t rows, TdmChannelAffine a)
{
  if (tdm_backend_enter(b) &&
      TDM_ARGS_OK(b, a.channels >= 1 && a.channels <= TDM_AFFINE_MAX_CHANNELS,
                  _("channel_affine: %d channels"), a.channels))
    b->ops->channel_affine(b, x, rows, a);
}

/* bf16 operands */

void
tdm_backend_to_bf16(TdmBackend *b, uint16_t *out, const float *in, size_t n)
{
  if (tdm_backend_enter(b))
    b->ops->to_bf16(b, out, in, n);
}

void
tdm_backend_im2col_bf16(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type, int n,
                        int h, int w, int c, int kh, int kw, int pad, int stride)
{
  if (tdm_backend_enter(b) &&
      conv_args_ok(b, "im2col_bf16", n, h, w, c, kh, kw, pad, stride) &&
      tdm_backend_input_ok(b, "im2col_bf16", x_type))
    b->ops->im2col_bf16(b, col, x, x_type, n, h, w, c, kh, kw, pad, stride);
}

void
tdm_backend_im2col_bf16_bn(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type,
                           const float *mean, const float *invstd, const float *gamma,
                           const float *beta, bool relu, int n, int h, int w, int c, int kh,
                           int kw, int pad, int stride)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, im2col_bf16_bn) &&
      conv_args_ok(b, "im2col_bf16_bn", n, h, w, c, kh, kw, pad, stride) &&
      tdm_backend_input_ok(b, "im2col_bf16_bn", x_type))
    b->ops->im2col_bf16_bn(b, col, x, x_type, mean, invstd, gamma, beta, relu, n, h, w, c, kh,
                           kw, pad, stride);
}

void
tdm_backend_gemm_bf16(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                      float alpha, const uint16_t *a, int lda, const uint16_t *bm, int ldb,
                      float beta, float *c, int ldc)
{
  if (tdm_backend_enter(b) &&
      gemm_args_ok(b, trans_a, trans_b, m, n, k, lda, ldb, ldc) && m > 0 && n > 0)
    b->ops->gemm_bf16(b, trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc);
}

void
tdm_backend_gemm_bf16_out(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                          const uint16_t *a, int lda, const uint16_t *bm, int ldb, uint16_t *c,
                          int ldc)
{
  if (tdm_backend_enter(b) &&
      gemm_args_ok(b, trans_a, trans_b, m, n, k, lda, ldb, ldc) && m > 0 && n > 0)
    b->ops->gemm_bf16_out(b, trans_a, trans_b, m, n, k, a, lda, bm, ldb, c, ldc);
}

void
tdm_backend_col2im_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *col, int n,
                        int h, int w, int c, int kh, int kw, int pad, int stride)
{
  /* A bf16 dx is the input of the bn backward after it: the type it reads. */
  if (tdm_backend_enter(b) &&
      conv_args_ok(b, "col2im_bf16", n, h, w, c, kh, kw, pad, stride) &&
      tdm_backend_input_ok(b, "col2im_bf16", dx_type))
    b->ops->col2im_bf16(b, dx, dx_type, col, n, h, w, c, kh, kw, pad, stride);
}

void
tdm_backend_conv_dgrad_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *dy,
                            const uint16_t *w, uint16_t *col, int n, int h, int w_, int c,
                            int out_c, int kh, int kw, int pad, int stride)
{
  /* Without the one operation, the two it stands for (counted as they issue). */
  gboolean whole = b->ops->conv_dgrad_bf16 != NULL;
  if ((whole && !tdm_backend_enter(b)) || tdm_backend_failed(b) ||
      !conv_args_ok(b, "conv_dgrad_bf16", n, h, w_, c, kh, kw, pad, stride) ||
      !TDM_ARGS_OK(b, out_c >= 1, _("%s: %d output channels"), "conv_dgrad_bf16", out_c) ||
      !tdm_backend_input_ok(b, "conv_dgrad_bf16", dx_type))
    return;
  if (whole) {
    b->ops->conv_dgrad_bf16(b, dx, dx_type, dy, w, col, n, h, w_, c, out_c, kh, kw, pad,
                            stride);
    return;
  }
  int oh = (h + 2 * pad - kh) / stride + 1, ow = (w_ + 2 * pad - kw) / stride + 1;
  int rows = n * oh * ow, k = kh * kw * c;
  tdm_backend_gemm_bf16_out(b, false, false, rows, k, out_c, dy, out_c, w, k, col, k);
  tdm_backend_col2im_bf16(b, dx, dx_type, col, n, h, w_, c, kh, kw, pad, stride);
}

/* Communicators' helpers and exact mode */

void
tdm_backend_add(TdmBackend *b, float *y, const float *x, size_t n)
{
  if (tdm_backend_enter(b))
    b->ops->add(b, y, x, n);
}

void
tdm_backend_scale(TdmBackend *b, float *y, float alpha, size_t n)
{
  if (tdm_backend_enter(b))
    b->ops->scale(b, y, alpha, n);
}

void
tdm_backend_add_out(TdmBackend *b, float *y, const float *a, const float *x, size_t n,
                    bool relu)
{
  if (b->ops->add_out == NULL) {
    /* Addition commutes bit for bit, so y == x needs no copy. */
    if (y == x) {
      tdm_backend_add(b, y, a, n);
    } else {
      tdm_backend_copy(b, y, a, n * sizeof(float));
      tdm_backend_add(b, y, x, n);
    }
    if (relu)
      tdm_backend_relu_forward(b, y, y, n);
    return;
  }
  if (tdm_backend_enter(b))
    b->ops->add_out(b, y, a, x, n, relu);
}

/* bf16 blocks */

void
tdm_backend_from_bf16(TdmBackend *b, float *out, const uint16_t *in, size_t n)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, from_bf16))
    b->ops->from_bf16(b, out, in, n);
}

void
tdm_backend_relu_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                               TdmDtype dy_type, const uint32_t *mask, size_t n)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, relu_backward_bf16) &&
      tdm_backend_input_ok(b, "relu_backward_bf16", dx_type) &&
      tdm_backend_input_ok(b, "relu_backward_bf16", dy_type) &&
      TDM_ARGS_OK(b, dx != dy || dx_type == dy_type,
                  _("relu_backward_bf16: dx is dy but of another type")))
    b->ops->relu_backward_bf16(b, dx, dx_type, dy, dy_type, mask, n);
}

void
tdm_backend_add_strided_bf16(TdmBackend *b, void *y, TdmDtype y_type, const void *a,
                             TdmDtype a_type, const float *x, int n, int h, int w, int c,
                             int stride)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, add_strided_bf16) &&
      tdm_backend_input_ok(b, "add_strided_bf16", y_type) &&
      tdm_backend_input_ok(b, "add_strided_bf16", a_type) &&
      TDM_ARGS_OK(b, n >= 0 && h > 0 && w > 0 && c > 0 && stride > 0,
                  _("add_strided_bf16: %d×%d×%d×%d, stride %d: not a shape"), n, h, w, c,
                  stride) &&
      TDM_ARGS_OK(b, (const void *)y != a || y_type == a_type,
                  _("add_strided_bf16: y is a but of another type (the sum is made in place)")))
    b->ops->add_strided_bf16(b, y, y_type, a, a_type, x, n, h, w, c, stride);
}

void
tdm_backend_add_relu_backward_bf16(TdmBackend *b, uint16_t *dx, const void *a, TdmDtype a_type,
                                   const void *x, TdmDtype x_type, const uint32_t *mask,
                                   size_t n)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, add_relu_backward_bf16) &&
      tdm_backend_input_ok(b, "add_relu_backward_bf16", a_type) &&
      tdm_backend_input_ok(b, "add_relu_backward_bf16", x_type) &&
      TDM_ARGS_OK(b,
                  ((const void *)dx != a || a_type == TDM_DTYPE_BF16) &&
                      ((const void *)dx != x || x_type == TDM_DTYPE_BF16),
                  _("add_relu_backward_bf16: dx is an operand of another type")))
    b->ops->add_relu_backward_bf16(b, dx, a, a_type, x, x_type, mask, n);
}

void
tdm_backend_add_out_bf16(TdmBackend *b, uint16_t *y, const float *a, const void *x,
                         TdmDtype x_type, size_t n, bool relu, uint32_t *bits)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, add_out_bf16) &&
      tdm_backend_input_ok(b, "add_out_bf16", x_type))
    b->ops->add_out_bf16(b, y, a, x, x_type, n, relu, bits);
}

void
tdm_backend_exact_add(TdmBackend *b, int64_t *acc, const float *x, size_t n, int64_t *bad)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, exact_add))
    b->ops->exact_add(b, acc, x, n, bad);
}

/* Graphs: counted as the operations they are on the device (a capture's start, a
 * replay). */

gboolean
tdm_backend_graph_begin(TdmBackend *b, int key)
{
  return b->ops->graph_begin != NULL && tdm_backend_enter(b) && b->ops->graph_begin(b, key);
}

void
tdm_backend_graph_end(TdmBackend *b, int key)
{
  if (b->ops->graph_end != NULL)
    b->ops->graph_end(b, key);
}

gboolean
tdm_backend_graph_launch(TdmBackend *b, int key)
{
  return b->ops->graph_launch != NULL && tdm_backend_enter(b) && b->ops->graph_launch(b, key);
}

/* What a backend has */

gboolean
tdm_backend_has_maxpool_forward_bn(TdmBackend *b)
{
  return b->ops->maxpool_forward_bn != NULL;
}

gboolean
tdm_backend_has_im2col_bf16_bn(TdmBackend *b)
{
  return b->ops->im2col_bf16_bn != NULL;
}

gboolean
tdm_backend_has_bn_bf16_input(TdmBackend *b)
{
  return tdm_backend_kind_has_bn_bf16_input(b->kind);
}

gboolean
tdm_backend_has_bn_backward_dx_bf16(TdmBackend *b)
{
  return b->ops->bn_backward_dx_bf16 != NULL;
}

gboolean
tdm_backend_has_bf16_blocks(TdmBackend *b)
{
  return tdm_backend_kind_has_bn_bf16_input(b->kind) && b->ops->from_bf16 != NULL &&
         b->ops->relu_backward_bf16 != NULL && b->ops->add_out_bf16 != NULL &&
         b->ops->add_strided_bf16 != NULL && b->ops->add_relu_backward_bf16 != NULL &&
         b->ops->bn_forward_bf16 != NULL && b->ops->maxpool_forward_bf16 != NULL &&
         b->ops->maxpool_backward_bf16 != NULL && b->ops->bn_forward_eval_bf16 != NULL &&
         b->ops->bn_relu_add_bf16 != NULL && b->ops->maxpool2d_forward_bn != NULL;
}

gboolean
tdm_backend_has_exact_add(TdmBackend *b)
{
  return b->ops->exact_add != NULL;
}

gboolean
tdm_backend_has_gather_photo(TdmBackend *b)
{
  return b->ops->gather_photo != NULL;
}

gboolean
tdm_backend_has_conv_engine(TdmBackend *b)
{
  return b->ops->conv_engine_forward != NULL && b->ops->conv_engine_backward != NULL;
}

gboolean
tdm_backend_has_graphs(TdmBackend *b)
{
  return b->ops->graph_begin != NULL && b->ops->graph_end != NULL &&
         b->ops->graph_launch != NULL;
}

/* The slots every backend fills: all but the optional ones of tdm-backend-ops.h. */
#define SLOT(name)                                                                             \
  {                                                                                            \
#name, offsetof(TdmBackendOps, name)                                                       \
  }
static const struct {
  const char *name;
  size_t offset;
} required[] = {
    SLOT(alloc),
    SLOT(free),
    SLOT(upload),
    SLOT(download),
    SLOT(copy),
    SLOT(zero),
    SLOT(synchronize),
    SLOT(gemm),
    SLOT(bias_forward),
    SLOT(bias_backward),
    SLOT(relu_forward),
    SLOT(relu_backward),
    SLOT(im2col),
    SLOT(col2im),
    SLOT(maxpool_forward),
    SLOT(maxpool_backward),
    SLOT(conv_pool_forward),
    SLOT(conv_pool_backward),
    SLOT(softmax_xent),
    SLOT(gather),
    SLOT(gather_augment),
    SLOT(channel_affine),
    SLOT(bn_moments),
    SLOT(bn_stats),
    SLOT(bn_forward),
    SLOT(bn_forward_eval),
    SLOT(bn_backward_sums),
    SLOT(bn_backward_dx),
    SLOT(avgpool_forward),
    SLOT(avgpool_backward),
    SLOT(maxpool2d_forward),
    SLOT(maxpool2d_backward),
    SLOT(avgpool2d_forward),
    SLOT(avgpool2d_backward),
    SLOT(global_avgpool_forward),
    SLOT(global_avgpool_backward),
    SLOT(global_maxpool_forward),
    SLOT(global_maxpool_backward),
    SLOT(dropout_forward),
    SLOT(dropout_backward),
    SLOT(sgd_update),
    SLOT(momentum_update),
    SLOT(sgd_momentum_update),
    SLOT(weight_decay),
    SLOT(adam_update),
    SLOT(clip_norm),
    SLOT(deviation),
    SLOT(add),
    SLOT(scale),
    SLOT(destroy),
};
#undef SLOT

const char *
tdm_backend_ops_missing(const TdmBackendOps *ops)
{
  for (size_t i = 0; i < G_N_ELEMENTS(required); i++) {
    void (*slot)(void);
    memcpy(&slot, (const char *)ops + required[i].offset, sizeof slot);
    if (slot == NULL)
      return required[i].name;
  }
  return NULL;
}
