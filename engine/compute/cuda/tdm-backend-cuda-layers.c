/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-layers.c — the CUDA backend's operations for the ResNet layers:
 * batch normalization (and fused into the pool, bf16 im2col or bf16 output gradient
 * next to it), average and global pooling, dropout, the augmenting gather
 * and PyTorch's SGD with a weight-decay mask. Each checks its shape, then enqueues
 * the launcher of kernels/ on the backend's stream; the semantics are those of
 * tdm-backend.h and the CPU backend's (tdm-backend-cpu-layers.c). Not the memory,
 * GEMM, convolution or graph machinery (tdm-backend-cuda.c), whose table lists these.
 */
#include "tdm-backend-cuda.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-kernels.h"

G_STATIC_ASSERT(TDM_FLIP_RANDOM == 1 && TDM_FLIP_ALWAYS == 2);

#define REQUIRE(b, cond, ...)                                          \
  do {                                                                 \
    if (G_UNLIKELY(!(cond))) {                                         \
      tdm_backend_fail((b), TDM_ENGINE_ERROR_BACKEND, __VA_ARGS__);    \
      return;                                                          \
    }                                                                  \
  } while (0)

#define STREAM(b) tdm_backend_cuda_stream(b)

void
tdm_cuda_gather_augment(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                        const uint8_t *labels, const int32_t *indices, int count, int h,
                        int w, int c, float scale, int pad, TdmFlip flip, uint64_t key,
                        uint32_t epoch)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, count >= 0 && h >= 1 && w >= 1 && c >= 1 && pad >= 0 &&
             (guint64)h * w * c <= G_MAXINT32 && flip >= TDM_FLIP_NEVER &&
             flip <= TDM_FLIP_ALWAYS,
          "gather_augment: bad shape %d×%d×%d×%d pad %d", count, h, w, c, pad);
  /* Indices live on the device and are not checked here (gather does not either):
   * the iterator makes them. */
  TDM_CUDA_OK(b, tdm_k_gather_augment(x, y, images, labels, indices, count, h, w, c, scale, pad,
                                      (int)flip, key, epoch, STREAM(b)));
}

void
tdm_cuda_gather_photo(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                      const uint8_t *labels, const int32_t *indices, int count, int h, int w,
                      int c, const TdmPhotoAugment *augment, uint64_t key, uint32_t epoch)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, count >= 0 && h >= 1 && w >= 1 && c >= 1 && c <= 4 && augment != NULL &&
             (guint64)h * w * c <= G_MAXINT32,
          "gather_photo: bad shape %d×%d×%d×%d", count, h, w, c);
  TDM_CUDA_OK(b, tdm_k_gather_photo(x, y, images, labels, indices, count, h, w, c, augment, key,
                                    epoch, STREAM(b)));
}

/* Batch normalization */

static gboolean
bn_shape_ok(TdmBackend *b, const char *op, int rows, int channels)
{
  if (rows >= 0 && channels >= 1)
    return TRUE;
  tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("%s: bad shape %d×%d"), op, rows, channels);
  return FALSE;
}

void
tdm_cuda_bn_moments(TdmBackend *b, float *slots, const float *x, int rows, int channels,
                    int slot, int slot_count)
{
  if (!tdm_cuda_begin(b) || !bn_shape_ok(b, "bn_moments", rows, channels))
    return;
  REQUIRE(b, slot >= 0 && slot < slot_count, "bn_moments: slot %d of %d", slot, slot_count);
  size_t count = 0;
  double *partials = tdm_backend_cuda_sum_scratch(b, &count);
  REQUIRE(b, 2 * (size_t)channels <= count, "bn_moments: %d channels, at most %zu", channels,
          count / 2);
  TDM_CUDA_OK(b, tdm_k_bn_moments(slots, x, rows, channels, slot, slot_count, partials, count,
                                  STREAM(b)));
}

void
tdm_cuda_bn_stats(TdmBackend *b, float *saved, const float *slots, int slot_count,
                  int channels, float eps, float momentum, float *running_mean,
                  float *running_var)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, channels >= 1 && slot_count >= 1, "bn_stats: %d channels in %d slots",
          channels, slot_count);
  TDM_CUDA_OK(b, tdm_k_bn_stats(saved, slots, slot_count, channels, eps, momentum,
                                running_mean, running_var, STREAM(b)));
}

void
tdm_cuda_bn_forward(TdmBackend *b, float *y, const float *x, const float *mean,
                    const float *invstd, const float *gamma, const float *beta, int rows,
                    int channels, bool relu)
{
  if (tdm_cuda_begin(b) && bn_shape_ok(b, "bn_forward", rows, channels))
    TDM_CUDA_OK(b, tdm_k_bn_forward(y, x, mean, invstd, gamma, beta, rows, channels, relu,
                                    STREAM(b)));
}

void
tdm_cuda_bn_forward_eval(TdmBackend *b, float *y, const float *x, const float *running_mean,
                         const float *running_var, const float *gamma, const float *beta,
                         float eps, int rows, int channels, bool relu)
{
  if (tdm_cuda_begin(b) && bn_shape_ok(b, "bn_forward_eval", rows, channels))
    TDM_CUDA_OK(b, tdm_k_bn_forward_eval(y, x, running_mean, running_var, gamma, beta, eps,
                                         rows, channels, relu, STREAM(b)));
}

void
tdm_cuda_bn_backward_sums(TdmBackend *b, float *dgamma, float *dbeta, const float *dy,
                          const float *x, const float *mean, const float *invstd,
                          const float *gamma, const float *beta, bool relu, int rows,
                          int channels)
{
  if (!tdm_cuda_begin(b) || !bn_shape_ok(b, "bn_backward_sums", rows, channels))
    return;
  size_t count = 0;
  double *partials = tdm_backend_cuda_sum_scratch(b, &count);
  REQUIRE(b, 2 * (size_t)channels <= count, "bn_backward_sums: %d channels, at most %zu",
          channels, count / 2);
  TDM_CUDA_OK(b, tdm_k_bn_backward_sums(dgamma, dbeta, dy, x, mean, invstd, gamma, beta,
                                        relu, rows, channels, partials, count, STREAM(b)));
}

void
tdm_cuda_bn_backward_dx(TdmBackend *b, float *dx, const float *dy, const float *x,
                        const float *mean, const float *invstd, const float *gamma,
                        const float *beta, bool relu, const float *sum_dgamma,
                        const float *sum_dbeta, float inv_count, int rows, int channels)
{
  if (tdm_cuda_begin(b) && bn_shape_ok(b, "bn_backward_dx", rows, channels))
    TDM_CUDA_OK(b, tdm_k_bn_backward_dx(dx, dy, x, mean, invstd, gamma, beta, relu, sum_dgamma,
                                        sum_dbeta, inv_count, rows, channels, STREAM(b)));
}

void
tdm_cuda_bn_backward_dx_bf16(TdmBackend *b, uint16_t *dx, const float *dy, const float *x,
                             const float *mean, const float *invstd, const float *gamma,
                             const float *beta, bool relu, const float *sum_dgamma,
                             const float *sum_dbeta, float inv_count, int rows, int channels)
{
  if (tdm_cuda_begin(b) && bn_shape_ok(b, "bn_backward_dx_bf16", rows, channels))
    TDM_CUDA_OK(b, tdm_k_bn_backward_dx_bf16(dx, dy, x, mean, invstd, gamma, beta, relu,
                                             sum_dgamma, sum_dbeta, inv_count, rows,
                                             channels, STREAM(b)));
}

/* A training bn's output read by the layer after it as it reads (tdm-backend.h) */

void
tdm_cuda_im2col_bf16_bn(TdmBackend *b, uint16_t *col, const float *x, const float *mean,
                        const float *invstd, const float *gamma, const float *beta, bool relu,
                        int n, int h, int w, int c, int kh, int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b) ||
      !tdm_backend_check_conv(b, "im2col_bf16_bn", n, h, w, c, kh, kw, pad, stride))
    return;
  TDM_CUDA_OK(b, tdm_k_im2col_bf16_bn(col, x, mean, invstd, gamma, beta, relu, n, h, w, c, kh,
                                      kw, pad, stride, STREAM(b)));
}

void
tdm_cuda_maxpool_forward_bn(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                            const float *mean, const float *invstd, const float *gamma,
                            const float *beta, bool relu, int n, int h, int w, int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, n >= 0 && h >= 0 && w >= 0 && c >= 0 && k >= 1,
          "maxpool_forward_bn: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  REQUIRE(b, (guint64)n * h * w * c <= G_MAXINT32,
          "maxpool_forward_bn: %d×%d×%d×%d inputs do not fit int32 indices", n, h, w, c);
  TDM_CUDA_OK(b, tdm_k_maxpool_forward_bn(y, argmax, x, mean, invstd, gamma, beta, relu, n, h,
                                          w, c, k, STREAM(b)));
}

/* Pooling */

void
tdm_cuda_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int h, int w, int c,
                         int k)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, n >= 0 && h >= 1 && w >= 1 && c >= 1 && k >= 1 && k <= h && k <= w,
          "avgpool_forward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  TDM_CUDA_OK(b, tdm_k_avgpool_forward(y, x, n, h, w, c, k, STREAM(b)));
}

void
tdm_cuda_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n, int h, int w,
                          int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, n >= 0 && h >= 1 && w >= 1 && c >= 1 && k >= 1 && k <= h && k <= w,
          "avgpool_backward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  TDM_CUDA_OK(b, tdm_k_avgpool_backward(dx, dy, n, h, w, c, k, STREAM(b)));
}

void
tdm_cuda_global_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int pixels,
                                int c)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, n >= 0 && pixels >= 1 && c >= 1, "global_avgpool_forward: bad shape %d×%d×%d",
          n, pixels, c);
  TDM_CUDA_OK(b, tdm_k_global_avgpool_forward(y, x, n, pixels, c, STREAM(b)));
}

void
tdm_cuda_global_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n,
                                 int pixels, int c)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, n >= 0 && pixels >= 1 && c >= 1, "global_avgpool_backward: bad shape %d×%d×%d",
          n, pixels, c);
  TDM_CUDA_OK(b, tdm_k_global_avgpool_backward(dx, dy, n, pixels, c, STREAM(b)));
}

void
tdm_cuda_global_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                int n, int pixels, int c)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, n >= 0 && pixels >= 1 && c >= 1 && (guint64)n * pixels * c <= G_MAXINT32,
          "global_maxpool_forward: bad shape %d×%d×%d", n, pixels, c);
  TDM_CUDA_OK(b, tdm_k_global_maxpool_forward(y, argmax, x, n, pixels, c, STREAM(b)));
}

void
tdm_cuda_global_maxpool_backward(TdmBackend *b, float *dx, const float *dy,
                                 const int32_t *argmax, int n, int pixels, int c)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, n >= 0 && pixels >= 1 && c >= 1 && (guint64)n * pixels * c <= G_MAXINT32,
          "global_maxpool_backward: bad shape %d×%d×%d", n, pixels, c);
  TDM_CUDA_OK(b, tdm_k_global_maxpool_backward(dx, dy, argmax, n, pixels, c, STREAM(b)));
}

/* Dropout */

void
tdm_cuda_dropout_forward(TdmBackend *b, float *y, const float *x, const int32_t *indices,
                         int n, int per_sample, float p, uint64_t key, uint32_t epoch)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, n >= 0 && per_sample >= 0 && p >= 0.0f && p < 1.0f,
          "dropout_forward: bad shape %d×%d or rate %g", n, per_sample, p);
  TDM_CUDA_OK(b, tdm_k_dropout(y, x, indices, n, per_sample, p, key, epoch, STREAM(b)));
}

void
tdm_cuda_dropout_backward(TdmBackend *b, float *dx, const float *dy, const int32_t *indices,
                          int n, int per_sample, float p, uint64_t key, uint32_t epoch)
{
  if (!tdm_cuda_begin(b))
    return;
  REQUIRE(b, n >= 0 && per_sample >= 0 && p >= 0.0f && p < 1.0f,
          "dropout_backward: bad shape %d×%d or rate %g", n, per_sample, p);
  TDM_CUDA_OK(b, tdm_k_dropout(dx, dy, indices, n, per_sample, p, key, epoch, STREAM(b)));
}

/* PyTorch's SGD */

void
tdm_cuda_sgd_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity,
                             const uint8_t *decay_mask, size_t n, float lr, float momentum,
                             float weight_decay, bool nesterov)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_sgd_momentum_update(p, g, velocity, decay_mask, n, lr, momentum,
                                             weight_decay, nesterov, STREAM(b)));
}

void
tdm_cuda_weight_decay(TdmBackend *b, float *g, const float *p, const uint8_t *decay_mask,
                      size_t n, float weight_decay)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_weight_decay(g, p, decay_mask, n, weight_decay, STREAM(b)));
}
