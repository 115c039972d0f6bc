/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-ops.c — the CUDA backend's operations that are one launch of
 * kernels/ each: bias and ReLU, im2col and col2im, max pooling and the fused first
 * conv + pool, softmax cross-entropy, the batch gather, the optimizers and the
 * communicators' add and scale. Each checks its shape, then enqueues on the backend's
 * stream; the semantics are tdm-backend.h's. Not the GEMMs (-gemm.c), BN and the later
 * layers (-layers.c), nor memory and graphs (tdm-backend-cuda.c).
 */
#include "tdm-backend-cuda-private.h"

/* Bias and ReLU */

void
tdm_cuda_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
                  int inner, bool relu)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, outer >= 0 && channels >= 0 && inner >= 0,
               "bias_forward: negative size %d×%d×%d", outer, channels, inner);
  TDM_CUDA_OK(b, tdm_k_bias_forward(y, bias, outer, channels, inner, relu, CUDA_B(b)->stream));
}

void
tdm_cuda_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer, int channels,
                   int inner)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, outer >= 0 && channels >= 0 && inner >= 0,
               "bias_backward: negative size %d×%d×%d", outer, channels, inner);
  TDM_CUDA_OK(b, tdm_k_bias_backward(dbias, dy, outer, channels, inner, CUDA_B(b)->partials,
                                     TDM_PARTIALS_FLOATS, CUDA_B(b)->stream));
}

void
tdm_cuda_relu_forward(TdmBackend *b, float *y, const float *x, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_relu_forward(y, x, n, CUDA_B(b)->stream));
}

void
tdm_cuda_relu_backward(TdmBackend *b, float *dx, const float *dy, const float *y, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_relu_backward(dx, dy, y, n, CUDA_B(b)->stream));
}

/* Convolution and pooling */

void
tdm_cuda_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c, int kh,
            int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b) || !tdm_backend_check_conv(b, "im2col", n, h, w, c, kh, kw, pad, stride))
    return;
  TDM_CUDA_OK(b, tdm_k_im2col(col, x, n, h, w, c, kh, kw, pad, stride, CUDA_B(b)->stream));
}

void
tdm_cuda_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c, int kh,
            int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b) || !tdm_backend_check_conv(b, "col2im", n, h, w, c, kh, kw, pad, stride))
    return;
  TDM_CUDA_OK(b, tdm_k_col2im(dx, col, n, h, w, c, kh, kw, pad, stride, CUDA_B(b)->stream));
}

void
tdm_cuda_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                     const float *bias, bool relu, int n, int h, int w, int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, n >= 0 && h >= 0 && w >= 0 && c >= 0 && k >= 1,
               "maxpool_forward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  CUDA_REQUIRE(b, (guint64)n * h * w * c <= G_MAXINT32,
               "maxpool_forward: %d×%d×%d×%d inputs do not fit int32 indices", n, h, w, c);
  TDM_CUDA_OK(b, tdm_k_maxpool_forward(y, argmax, x, bias, relu, n, h, w, c, k,
                                       CUDA_B(b)->stream));
}

void
tdm_cuda_maxpool_backward(TdmBackend *b, float *dx, float *dbias, const float *dy,
                      const int32_t *argmax, const float *y, int n, int h, int w, int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, n >= 0 && h >= 0 && w >= 0 && c >= 0 && k >= 1,
               "maxpool_backward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  CUDA_REQUIRE(b, (guint64)n * h * w * c <= G_MAXINT32,
               "maxpool_backward: %d×%d×%d×%d inputs do not fit int32 indices", n, h, w, c);
  TDM_CUDA_OK(b, tdm_k_maxpool_backward(dx, dbias, dy, argmax, y, n, h, w, c, k,
                                        CUDA_B(b)->partials, TDM_PARTIALS_FLOATS,
                                        CUDA_B(b)->stream));
}

void
tdm_cuda_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                       const float *wt, const float *bias, bool relu, int n, int h, int w,
                       int c, int out, int kh, int kw, int pad, int pk)
{
  if (tdm_cuda_begin(b) && tdm_backend_check_conv_pool(b, "conv_pool_forward", n, h, w, c, out, kh, kw, pad, pk))
    TDM_CUDA_OK(b, tdm_k_conv_pool_forward(y, argmax, x, wt, bias, relu, n, h, w, c, out, kh,
                                           kw, pad, pk, CUDA_B(b)->stream));
}

void
tdm_cuda_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                        const int32_t *argmax, const float *y, const float *x, bool relu,
                        int n, int h, int w, int c, int out, int kh, int kw, int pad, int pk)
{
  if (tdm_cuda_begin(b) &&
      tdm_backend_check_conv_pool(b, "conv_pool_backward", n, h, w, c, out, kh, kw, pad, pk))
    TDM_CUDA_OK(b, tdm_k_conv_pool_backward(dwt, dbias, dy, argmax, y, x, relu, n, h, w, c, out,
                                            kh, kw, pad, pk, CUDA_B(b)->partials,
                                            TDM_PARTIALS_FLOATS, CUDA_B(b)->stream));
}

/* Loss, input, optimizers */

void
tdm_cuda_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
                  int classes, float smoothing, float grad_scale, float *dlogits,
                  TdmMetrics *metrics)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, rows >= 0 && classes >= 1, "softmax_xent: bad shape %d×%d", rows, classes);
  CUDA_REQUIRE(b, smoothing >= 0.0f && smoothing <= 1.0f,
               "softmax_xent: label smoothing %g is not in [0, 1]", smoothing);
  /* Labels live on the device and are not checked here: one out of range gives a NaN
   * loss, which the trainer reports as divergence. */
  TDM_CUDA_OK(b, tdm_k_softmax_xent(logits, labels, rows, classes, smoothing, grad_scale,
                                    dlogits, &metrics->loss_sum, CUDA_B(b)->stream));
}

void
tdm_cuda_gather(TdmBackend *b, float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
            const int32_t *indices, int count, int sample_size, float scale)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, count >= 0 && sample_size >= 0, "gather: bad shape %d×%d", count,
               sample_size);
  if (count == 0 || sample_size == 0)
    return;
  TDM_CUDA_OK(b, tdm_k_gather(x, y, images, labels, indices, count, sample_size, scale,
                              CUDA_B(b)->stream));
}

void
tdm_cuda_sgd_update(TdmBackend *b, float *p, const float *g, size_t n, float lr,
                float weight_decay)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_sgd_update(p, g, n, lr, weight_decay, CUDA_B(b)->stream));
}

void
tdm_cuda_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity, size_t n,
                     float lr, float momentum, float weight_decay)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_momentum_update(p, g, velocity, n, lr, momentum, weight_decay,
                                         CUDA_B(b)->stream));
}

void
tdm_cuda_adam_update(TdmBackend *b, float *p, const float *g, float *m, float *v, size_t n,
                 float lr_t, float beta1, float beta2, float eps, float weight_decay)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_adam_update(p, g, m, v, n, lr_t, beta1, beta2, eps, weight_decay,
                                     CUDA_B(b)->stream));
}

void
tdm_cuda_add(TdmBackend *b, float *y, const float *x, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_add(y, x, n, CUDA_B(b)->stream));
}

void
tdm_cuda_add_out(TdmBackend *b, float *y, const float *a, const float *x, size_t n, bool relu)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_add_out(y, a, x, n, relu, CUDA_B(b)->stream));
}

void
tdm_cuda_scale(TdmBackend *b, float *y, float alpha, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_scale(y, alpha, n, CUDA_B(b)->stream));
}

G_STATIC_ASSERT(TDM_CLIP_WORK_DOUBLES == TDM_K_CLIP_WORK_DOUBLES);

void
tdm_cuda_clip_norm(TdmBackend *b, float *x, size_t n, float max_norm, double *work)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_clip_norm(x, n, max_norm, work, CUDA_B(b)->stream));
}

void
tdm_cuda_exact_add(TdmBackend *b, int64_t *acc, const float *x, size_t n, int64_t *bad)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_exact_add(acc, x, n, bad, CUDA_B(b)->stream));
}
