/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-private.h — what the CPU backend's files share: its state, the loops
 * picked for this CPU, the check of what host memory holds, and the operations its
 * table lists (tdm-backend-cpu.c), by family, one file each: gemm (and gemm-bf16), elementwise, conv
 * (with the Winograd files), pool, pool2d, bn, softmax, gather, optimizer; the CUDA
 * backend and kernels/ name theirs alike. Private to compute/cpu/. The semantics are
 * tdm-backend.h's, the arguments checked by the front door (tdm-backend-calls*.c). */
#pragma once

#include "tdm-backend-ops.h"
#include "tdm-cpu-kernels.h"
#include "tdm-error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TDM_CPU_X86 1
#else
#define TDM_CPU_X86 0
#endif

G_BEGIN_DECLS

/* The bf16 products' buffers (tdm-backend-cpu-gemm-bf16.c). */
typedef struct _TdmCpuGemmBf16 TdmCpuGemmBf16;

typedef struct {
  TdmBackend parent;
  gboolean have_avx;
  const TdmCpuKernels *kernels;
  gboolean bf16_dot;           /* bf16 products by vdpbf16ps (AVX-512 BF16) */
  TdmCpuGemmBf16 *gemm_bf16;   /* made at the first bf16 product */
} TdmBackendCpu;

/* Row `row` (a pixel of n × h × w, NHWC) of a projection's compact share (c values a
 * pixel, add_strided_bf16's x), or NULL where its 1×1 conv of this stride and no padding
 * reads no value of that pixel. */
static inline const float *
tdm_cpu_strided_row(const float *x, size_t row, int h, int w, int c, int stride)
{
  const int xx = (int)(row % (size_t)w), yy = (int)(row / (size_t)w % (size_t)h);
  if (xx % stride != 0 || yy % stride != 0)
    return NULL;
  const size_t image = row / ((size_t)w * h);
  const size_t oh = (size_t)(h - 1) / stride + 1, ow = (size_t)(w - 1) / stride + 1;
  return x + ((image * oh + (size_t)(yy / stride)) * ow + (size_t)(xx / stride)) * c;
}

/* The loops of tdm-cpu-kernels.c built for the best instruction set this CPU runs. */
static inline const TdmCpuKernels *
tdm_cpu_kernels_of(TdmBackend *b)
{
  return ((TdmBackendCpu *)b)->kernels;
}

/* The contents of host memory that the front door cannot see (labels, indices): a bad
 * one becomes the operation's failure here instead of a read out of bounds. */
#define CPU_REQUIRE(b, cond, ...)                                                       \
  do {                                                                                  \
    if (G_UNLIKELY(!(cond))) {                                                          \
      tdm_backend_fail((b), TDM_ENGINE_ERROR_BACKEND, __VA_ARGS__);                     \
      return;                                                                           \
    }                                                                                   \
  } while (0)

/* tdm-backend-cpu-gemm.c */
void tdm_cpu_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *bm, int ldb, float beta, float *c,
                  int ldc);

/* tdm-backend-cpu-gemm-bf16.c */
void tdm_cpu_gemm_bf16(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                       float alpha, const uint16_t *a, int lda, const uint16_t *bm, int ldb,
                       float beta, float *c, int ldc);
void tdm_cpu_gemm_bf16_out(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                           const uint16_t *a, int lda, const uint16_t *bm, int ldb,
                           uint16_t *c, int ldc);
/* Whether this CPU multiplies bfloat16 pairs in one instruction (AVX-512 BF16). */
gboolean tdm_cpu_gemm_bf16_has_dot(void);
void tdm_cpu_gemm_bf16_scratch_free(TdmCpuGemmBf16 *s);

/* tdm-backend-cpu-elementwise.c */
void tdm_cpu_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
                          int inner, bool relu);
void tdm_cpu_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer,
                           int channels, int inner);
void tdm_cpu_relu_forward(TdmBackend *b, float *y, const float *x, size_t n);
void tdm_cpu_relu_backward(TdmBackend *b, float *dx, const float *dy, const float *y, size_t n);
void tdm_cpu_add(TdmBackend *b, float *y, const float *x, size_t n);
void tdm_cpu_scale(TdmBackend *b, float *y, float alpha, size_t n);
void tdm_cpu_to_bf16(TdmBackend *b, uint16_t *out, const float *in, size_t n);
void tdm_cpu_from_bf16(TdmBackend *b, float *out, const uint16_t *in, size_t n);
void tdm_cpu_relu_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                                TdmDtype dy_type, const uint32_t *mask, size_t n);
void tdm_cpu_add_strided_bf16(TdmBackend *b, void *y, TdmDtype y_type, const void *a,
                              TdmDtype a_type, const float *x, int n, int h, int w, int c,
                              int stride);
void tdm_cpu_add_relu_backward_bf16(TdmBackend *b, uint16_t *dx, const void *a, TdmDtype a_type,
                                    const void *x, TdmDtype x_type, const uint32_t *mask,
                                    size_t n);
void tdm_cpu_add_relu_backward_bn_sums_bf16(TdmBackend *b, uint16_t *dx,
                                            const TdmBlockStart *in, const void *x,
                                            TdmDtype x_type, const float *mean,
                                            const float *invstd, const float *gamma,
                                            const float *beta, bool relu, int rows,
                                            int channels, float *dgamma, float *dbeta);
void tdm_cpu_add_out_bf16(TdmBackend *b, uint16_t *y, const float *a, const void *x,
                          TdmDtype x_type, size_t n, bool relu, uint32_t *bits);
void tdm_cpu_dropout_forward(TdmBackend *b, float *y, const float *x, const int32_t *indices,
                             int n, int per_sample, float p, uint64_t key, uint32_t epoch);
void tdm_cpu_dropout_backward(TdmBackend *b, float *dx, const float *dy, const int32_t *indices,
                              int n, int per_sample, float p, uint64_t key, uint32_t epoch);

/* tdm-backend-cpu-conv.c */
void tdm_cpu_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c,
                    int kh, int kw, int pad, int stride);
void tdm_cpu_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c,
                    int kh, int kw, int pad, int stride);
void tdm_cpu_im2col_bf16(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type, int n,
                         int h, int w, int c, int kh, int kw, int pad, int stride);
void tdm_cpu_im2col_bf16_bn(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type,
                            const float *mean, const float *invstd, const float *gamma,
                            const float *beta, bool relu, int n, int h, int w, int c, int kh,
                            int kw, int pad, int stride);
void tdm_cpu_col2im_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *col, int n,
                         int h, int w, int c, int kh, int kw, int pad, int stride);
void tdm_cpu_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                               const float *wt, const float *bias, bool relu, int n, int h,
                               int w, int c, int out, int kh, int kw, int pad, int pk);
void tdm_cpu_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                                const int32_t *argmax, const float *y, const float *x,
                                bool relu, int n, int h, int w, int c, int out, int kh, int kw,
                                int pad, int pk);
gboolean tdm_cpu_stem_bn_takes(TdmBackend *b, const TdmConvShape *s, TdmDtype x_type,
                               size_t *work_bytes);
void tdm_cpu_stem_bn_sums(TdmBackend *b, const TdmStemBn *a, float *dgamma, float *dbeta);
void tdm_cpu_stem_bn_dx_wgrad(TdmBackend *b, const TdmStemBn *a, const float *sum_dgamma,
                              const float *sum_dbeta, float inv_count, float *dw);

/* tdm-backend-cpu-pool.c */
void tdm_cpu_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                             const float *bias, bool relu, int n, int h, int w, int c, int k);
void tdm_cpu_maxpool_backward(TdmBackend *b, float *dx, float *dbias, const float *dy,
                              const int32_t *argmax, const float *y, int n, int h, int w, int c,
                              int k);
void tdm_cpu_maxpool_forward_bf16(TdmBackend *b, uint16_t *y, int32_t *argmax, const void *x,
                                  TdmDtype x_type, const float *mean, const float *invstd,
                                  const float *gamma, const float *beta, bool relu, int n,
                                  int h, int w, int c, int k);
void tdm_cpu_maxpool_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                                   TdmDtype dy_type, const int32_t *argmax, int n, int h, int w,
                                   int c, int k);
void tdm_cpu_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int h, int w,
                             int c, int k);
void tdm_cpu_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n, int h, int w,
                              int c, int k);
void tdm_cpu_global_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int pixels,
                                    int c);
void tdm_cpu_global_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n,
                                     int pixels, int c);
void tdm_cpu_global_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                    int n, int pixels, int c);
void tdm_cpu_global_maxpool_backward(TdmBackend *b, float *dx, const float *dy,
                                     const int32_t *argmax, int n, int pixels, int c);

/* tdm-backend-cpu-pool2d.c */
void tdm_cpu_maxpool2d_forward_bn(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                                  const void *x, TdmDtype x_type, const float *mean,
                                  const float *invstd, const float *gamma, const float *beta,
                                  bool relu, TdmPool2d g);
void tdm_cpu_maxpool2d_forward(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                               const void *x, TdmDtype x_type, TdmPool2d g);
void tdm_cpu_maxpool2d_backward(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                                TdmDtype dy_type, const void *argmax, TdmPool2d g);
void tdm_cpu_avgpool2d_forward(TdmBackend *b, float *y, const float *x, TdmPool2d g);
void tdm_cpu_avgpool2d_backward(TdmBackend *b, float *dx, const float *dy, TdmPool2d g);

/* tdm-backend-cpu-bn.c */
/* A training BN's affine form per channel, y = x · scale + shift with scale = invstd · γ
 * and shift = β − mean · scale: the one computation of them, so that whatever reads a
 * normalized value (the forward, the backward's ReLU mask, the conv's bf16 columns)
 * gets the forward's bits. */
void tdm_cpu_bn_affine(float *scale, float *shift, const float *mean, const float *invstd,
                       const float *gamma, const float *beta, int channels);
void tdm_cpu_bn_moments(TdmBackend *b, float *slots, const void *x, TdmDtype x_type, int rows,
                        int channels, int slot, int slot_count);
void tdm_cpu_bn_stats(TdmBackend *b, float *saved, const float *slots, int slot_count,
                      int channels, float eps, float momentum, float *running_mean,
                      float *running_var);
void tdm_cpu_bn_forward_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                             const float *mean, const float *invstd, const float *gamma,
                             const float *beta, const void *a, TdmDtype a_type, int rows,
                             int channels, bool relu, uint32_t *bits);
void tdm_cpu_bn_forward(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                        const float *mean, const float *invstd, const float *gamma,
                        const float *beta, int rows, int channels, bool relu);
void tdm_cpu_bn_relu_add_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                              const float *mean, const float *invstd, const float *gamma,
                              const float *beta, const void *a, TdmDtype a_type, int rows,
                              int channels);
void tdm_cpu_bn_forward_eval_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                                  const float *running_mean, const float *running_var,
                                  const float *gamma, const float *beta, float eps, int rows,
                                  int channels, bool relu);
void tdm_cpu_bn_forward_eval(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                             const float *running_mean, const float *running_var,
                             const float *gamma, const float *beta, float eps, int rows,
                             int channels, bool relu);
void tdm_cpu_bn_backward_sums(TdmBackend *b, float *dgamma, float *dbeta, const void *dy,
                              TdmDtype dy_type, const void *x, TdmDtype x_type,
                              const float *mean, const float *invstd, const float *gamma,
                              const float *beta, bool relu, int rows, int channels);
void tdm_cpu_bn_backward_dx(TdmBackend *b, float *dx, const void *dy, TdmDtype dy_type,
                            const void *x, TdmDtype x_type, const float *mean,
                            const float *invstd, const float *gamma, const float *beta,
                            bool relu, const float *sum_dgamma, const float *sum_dbeta,
                            float inv_count, int rows, int channels);
void tdm_cpu_bn_backward_dx_bf16(TdmBackend *b, uint16_t *dx, const void *dy, TdmDtype dy_type,
                                 const void *x, TdmDtype x_type, const float *mean,
                                 const float *invstd, const float *gamma, const float *beta,
                                 bool relu, const float *sum_dgamma, const float *sum_dbeta,
                                 float inv_count, int rows, int channels);

/* tdm-backend-cpu-softmax.c */
void tdm_cpu_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
                          int classes, float smoothing, float grad_scale, float *dlogits,
                          TdmMetrics *metrics);

/* tdm-backend-cpu-gather.c */
void tdm_cpu_gather(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                    const uint8_t *labels, const int32_t *indices, int count, int sample_size,
                    float scale);
void tdm_cpu_gather_augment(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                            const uint8_t *labels, const int32_t *indices, int count, int h,
                            int w, int c, float scale, int pad, TdmFlip flip, uint64_t key,
                            uint32_t epoch);
void tdm_cpu_channel_affine(TdmBackend *b, float *x, size_t rows, TdmChannelAffine a);
/* tdm-backend-cpu-gather-photo.c */
void tdm_cpu_gather_photo(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                          const uint8_t *labels, const int32_t *indices, int count, int h, int w,
                          int c, const TdmPhotoAugment *augment, uint64_t key, uint32_t epoch);

/* tdm-backend-cpu-optimizer.c */
void tdm_cpu_sgd_update(TdmBackend *b, float *p, const float *g, size_t n, float lr,
                        float weight_decay, const float *rates);
void tdm_cpu_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity, size_t n,
                             float lr, float momentum, float weight_decay, const float *rates);
void tdm_cpu_sgd_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity,
                                 const uint8_t *decay_mask, size_t n, float lr, float momentum,
                                 float weight_decay, bool nesterov, const float *rates);
void tdm_cpu_weight_decay(TdmBackend *b, float *g, const float *p, const uint8_t *decay_mask,
                          size_t n, float weight_decay);
void tdm_cpu_adam_update(TdmBackend *b, float *p, const float *g, float *m, float *v, size_t n,
                         float lr_t, float beta1, float beta2, float eps, float weight_decay,
                         const float *rates);
void tdm_cpu_clip_norm(TdmBackend *b, float *x, size_t n, float max_norm, double *work);

/* tdm-backend-cpu-compare.c */
void tdm_cpu_deviation(TdmBackend *b, double *work, const void *x, const void *ref,
                       TdmDtype type, size_t n);

G_END_DECLS
