/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-private.h — the CUDA backend's own state and the operations its
 * files share (tdm-backend-cuda.c: errors, memory, graphs, life cycle and the table;
 * -gemm.c: GEMMs and the bf16 column paths; -ops.c: the elementwise, convolution,
 * pooling, loss, input and optimizer operations; -layers.c: BN and the later layers).
 * Private to those files; what communicators use is in tdm-backend-cuda.h.
 */
#pragma once

#include "tdm-backend-cuda.h"
#include "tdm-backend-ops.h"
#include "tdm-error.h"
#include "tdm-cublas.h"
#include "tdm-kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

/* Uploads go through a ring of pinned staging buffers so that they are truly
 * asynchronous and the caller may reuse its host memory at once (see cuda_upload).
 * Each slot is reused only after the copy out of it has finished: with four slots the
 * host can run at most four uploads ahead of the GPU. Larger uploads (datasets, once)
 * copy straight from the caller's memory and wait. */
#define TDM_UPLOAD_SLOTS 4
#define TDM_UPLOAD_STAGED_MAX ((size_t)8 << 20)
/* Scratch for the first pass of the sums that reduce over rows (bias gradients,
 * conv_pool_backward): up to 1024 row groups of 256 values, or of 320 for a first
 * layer's 32 × (9 + 1) weight and bias gradients. */
#define TDM_PARTIALS_FLOATS ((size_t)1 << 20)
/* Past them, in the same allocation, the batch-norm sums' arrival counters
 * (tdm_k_bn_moments): zeroed once when the backend is made, left zero by every
 * launch. 16,384 of them let any channel count that the partials hold use its sets. */
#define TDM_BN_COUNTERS ((size_t)1 << 14)

G_STATIC_ASSERT(TDM_K_CONV_POOL_TAPS == TDM_CONV_POOL_TAPS);
G_STATIC_ASSERT(TDM_K_CONV_POOL_OUT == TDM_CONV_POOL_OUT);
/* Scratch for split-K GEMMs (cuda_gemm): chunks × m × n partial products. 8 MiB holds
 * a conv weight gradient of 64×288 in 100 chunks. */
#define TDM_SPLIT_K_FLOATS ((size_t)2 << 20)

typedef struct {
  void *host;                  /* pinned */
  size_t capacity;
  cudaEvent_t done;            /* recorded after the copy out of this slot */
  gboolean pending;
} TdmUploadSlot;

typedef struct {
  TdmBackend base;
  cudaStream_t stream;
  const TdmCublas *blas;        /* the process's cuBLAS, loaded by the first backend */
  cublasHandle_t cublas;
  void *cublas_workspace;
  float *partials;
  float *split_parts;          /* TDM_SPLIT_K_FLOATS */
  int split_k;                 /* TDM_CUDA_SPLIT_K: -1 chooses, 0 never, else chunks */
  gboolean small_gemm;         /* TDM_CUDA_SMALL_GEMM=0 turns tdm_k_gemm_small off */
  int implicit_major;          /* compute capability for conv-implicit.cu; 0: off */
  gboolean descending;         /* the bn's elementwise passes walk downwards (tdm-kernels.h);
                                * TANDEM_DESCENDING=0: upwards, for A/B timings */
  int sm_count;
  int major;                   /* compute capability */
  char *gpu_name;              /* "NVIDIA H200", for messages */

  /* The convolution engine (tdm-backend-cuda-conv-engine.h): cuDNN's handle on the stream, made on
   * first use, and the choices made so far. */
  struct cudnnContext *cudnn;
  const struct _TdmCudnnApi *cudnn_api; /* the library that made it */
  gboolean cudnn_failed;
  struct _TdmConvEngine *conv;
  /* cuDNN's fused plans listed so far, by graph (tdm-backend-cuda-conv-fused.c): each
   * compiled at run time once per backend, not at each listing. */
  GHashTable *fused_plans;

  GMutex lock;                 /* blocks, counters, upload ring */
  GHashTable *blocks;          /* device pointer → size in bytes */
  TdmUploadSlot ring[TDM_UPLOAD_SLOTS];
  int ring_next;

  GHashTable *graphs;          /* key → cudaGraphExec_t; the replica's thread only */
  gboolean capturing;
  gboolean graphs_disabled;
} TdmBackendCuda;

#define CUDA_B(b) ((TdmBackendCuda *)(b))

/* Records a cuBLAS failure in b's sticky error like TDM_CUDA_OK; TRUE on success. */
gboolean tdm_cublas_ok_at(TdmBackend *b, cublasStatus_t status, const char *call,
                          const char *file, int line);
#define CUBLAS_OK(b, call) tdm_cublas_ok_at((b), (call), #call, __FILE__, __LINE__)

#define CUDA_REQUIRE(b, cond, ...)                                  \
  do {                                                              \
    if (G_UNLIKELY(!(cond))) {                                      \
      tdm_backend_fail((b), TDM_ENGINE_ERROR_BACKEND, __VA_ARGS__); \
      return;                                                       \
    }                                                               \
  } while (0)

void *tdm_cuda_alloc(TdmBackend *b, size_t bytes, GError **error);

/* The operations in the backend's table, by family (their files). */

/* tdm-backend-cuda-stem-bn.c */
gboolean tdm_cuda_stem_bn_takes(TdmBackend *b, const TdmConvShape *s, TdmDtype x_type,
                                size_t *work_bytes);
void tdm_cuda_stem_bn_sums(TdmBackend *b, const TdmStemBn *a, float *dgamma, float *dbeta);
void tdm_cuda_stem_bn_dx_wgrad(TdmBackend *b, const TdmStemBn *a, const float *sum_dgamma,
                               const float *sum_dbeta, float inv_count, float *dw);

/* tdm-backend-cuda-gemm.c */
void tdm_cuda_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                   float alpha, const float *a, int lda, const float *bm, int ldb,
                   float beta, float *c, int ldc);
void tdm_cuda_gemm_bf16(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                        float alpha, const uint16_t *a, int lda, const uint16_t *bm,
                        int ldb, float beta, float *c, int ldc);
void tdm_cuda_gemm_bf16_out(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                            const uint16_t *a, int lda, const uint16_t *bm, int ldb,
                            uint16_t *c, int ldc);

/* tdm-backend-cuda-elementwise.c */
void tdm_cuda_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
                           int inner, bool relu);
void tdm_cuda_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer,
                            int channels, int inner);
void tdm_cuda_relu_forward(TdmBackend *b, float *y, const float *x, size_t n);
void tdm_cuda_relu_backward(TdmBackend *b, float *dx, const float *dy, const float *y,
                            size_t n);
void tdm_cuda_add(TdmBackend *b, float *y, const float *x, size_t n);
void tdm_cuda_add_out(TdmBackend *b, float *y, const float *a, const float *x, size_t n,
                      bool relu);
void tdm_cuda_scale(TdmBackend *b, float *y, float alpha, size_t n);
void tdm_cuda_to_bf16(TdmBackend *b, uint16_t *out, const float *in, size_t n);
void tdm_cuda_from_bf16(TdmBackend *b, float *out, const uint16_t *in, size_t n);
void tdm_cuda_relu_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                                 TdmDtype dy_type, const uint32_t *mask, size_t n);
void tdm_cuda_add_strided_bf16(TdmBackend *b, void *y, TdmDtype y_type, const void *a,
                               TdmDtype a_type, const float *x, int n, int h, int w, int c,
                               int stride);
void tdm_cuda_add_relu_backward_bf16(TdmBackend *b, uint16_t *dx, const void *a,
                                     TdmDtype a_type, const void *x, TdmDtype x_type,
                                     const uint32_t *mask, size_t n);
void tdm_cuda_add_out_bf16(TdmBackend *b, uint16_t *y, const float *a, const void *x,
                           TdmDtype x_type, size_t n, bool relu, uint32_t *bits);
void tdm_cuda_dropout_forward(TdmBackend *b, float *y, const float *x, const int32_t *indices,
                              int n, int per_sample, float p, uint64_t key, uint32_t epoch);
void tdm_cuda_dropout_backward(TdmBackend *b, float *dx, const float *dy,
                               const int32_t *indices, int n, int per_sample, float p,
                               uint64_t key, uint32_t epoch);
void tdm_cuda_exact_add(TdmBackend *b, int64_t *acc, const float *x, size_t n, int64_t *bad);

/* tdm-backend-cuda-conv.c */
void tdm_cuda_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c,
                     int kh, int kw, int pad, int stride);
void tdm_cuda_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c,
                     int kh, int kw, int pad, int stride);
void tdm_cuda_im2col_bf16(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type, int n,
                          int h, int w, int c, int kh, int kw, int pad, int stride);
void tdm_cuda_im2col_bf16_bn(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type,
                             const float *mean, const float *invstd, const float *gamma,
                             const float *beta, bool relu, int n, int h, int w, int c, int kh,
                             int kw, int pad, int stride);
void tdm_cuda_col2im_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *col, int n,
                          int h, int w, int c, int kh, int kw, int pad, int stride);
void tdm_cuda_conv_dgrad_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *dy,
                              const uint16_t *w, uint16_t *col, int n, int h, int w_, int c,
                              int out_c, int kh, int kw, int pad, int stride);
void tdm_cuda_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                const float *wt, const float *bias, bool relu, int n, int h,
                                int w, int c, int out, int kh, int kw, int pad, int pk);
void tdm_cuda_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                                 const int32_t *argmax, const float *y, const float *x,
                                 bool relu, int n, int h, int w, int c, int out, int kh, int kw,
                                 int pad, int pk);

/* tdm-backend-cuda-pool.c */
void tdm_cuda_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                              const float *bias, bool relu, int n, int h, int w, int c, int k);
void tdm_cuda_maxpool_forward_bn(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                 const float *mean, const float *invstd, const float *gamma,
                                 const float *beta, bool relu, int n, int h, int w, int c,
                                 int k);
void tdm_cuda_maxpool_backward(TdmBackend *b, float *dx, float *dbias, const float *dy,
                               const int32_t *argmax, const float *y, int n, int h, int w,
                               int c, int k);
void tdm_cuda_maxpool_forward_bf16(TdmBackend *b, uint16_t *y, int32_t *argmax, const void *x,
                                   TdmDtype x_type, const float *mean, const float *invstd,
                                   const float *gamma, const float *beta, bool relu, int n,
                                   int h, int w, int c, int k);
void tdm_cuda_maxpool_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                                    TdmDtype dy_type, const int32_t *argmax, int n, int h,
                                    int w, int c, int k);
void tdm_cuda_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int h, int w,
                              int c, int k);
void tdm_cuda_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n, int h, int w,
                               int c, int k);
void tdm_cuda_global_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int pixels,
                                     int c);
void tdm_cuda_global_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n,
                                      int pixels, int c);
void tdm_cuda_global_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                     int n, int pixels, int c);
void tdm_cuda_global_maxpool_backward(TdmBackend *b, float *dx, const float *dy,
                                      const int32_t *argmax, int n, int pixels, int c);

/* tdm-backend-cuda-pool2d.c */
void tdm_cuda_maxpool2d_forward_bn(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                                   const void *x, TdmDtype x_type, const float *mean,
                                   const float *invstd, const float *gamma, const float *beta,
                                   bool relu, TdmPool2d g);
void tdm_cuda_maxpool2d_forward(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                                const void *x, TdmDtype x_type, TdmPool2d g);
void tdm_cuda_maxpool2d_backward(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                                 TdmDtype dy_type, const void *argmax, TdmPool2d g);
void tdm_cuda_avgpool2d_forward(TdmBackend *b, float *y, const float *x, TdmPool2d g);
void tdm_cuda_avgpool2d_backward(TdmBackend *b, float *dx, const float *dy, TdmPool2d g);

/* tdm-backend-cuda-bn.c */
void tdm_cuda_bn_moments(TdmBackend *b, float *slots, const void *x, TdmDtype x_type, int rows,
                         int channels, int slot, int slot_count);
void tdm_cuda_bn_stats(TdmBackend *b, float *saved, const float *slots, int slot_count,
                       int channels, float eps, float momentum, float *running_mean,
                       float *running_var);
void tdm_cuda_bn_moments_stats(TdmBackend *b, float *saved, float *slots, const void *x,
                               TdmDtype x_type, int rows, int channels, float eps,
                               float momentum, float *running_mean, float *running_var);
void tdm_cuda_bn_forward_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                              const float *mean, const float *invstd, const float *gamma,
                              const float *beta, const void *a, TdmDtype a_type, int rows,
                              int channels, bool relu, uint32_t *bits);
void tdm_cuda_bn_forward(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                         const float *mean, const float *invstd, const float *gamma,
                         const float *beta, int rows, int channels, bool relu);
void tdm_cuda_bn_forward_add(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                             const float *mean, const float *invstd, const float *gamma,
                             const float *beta, const float *a, int rows, int channels,
                             bool relu);
void tdm_cuda_bn_relu_add_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                               const float *mean, const float *invstd, const float *gamma,
                               const float *beta, const void *a, TdmDtype a_type, int rows,
                               int channels);
void tdm_cuda_bn_forward_eval_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                                   const float *running_mean, const float *running_var,
                                   const float *gamma, const float *beta, float eps, int rows,
                                   int channels, bool relu);
void tdm_cuda_bn_forward_eval(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                              const float *running_mean, const float *running_var,
                              const float *gamma, const float *beta, float eps, int rows,
                              int channels, bool relu);
void tdm_cuda_add_relu_backward_bn_sums_bf16(TdmBackend *b, uint16_t *dx,
                                             const TdmBlockStart *in, const void *x,
                                             TdmDtype x_type, const float *mean,
                                             const float *invstd, const float *gamma,
                                             const float *beta, bool relu, int rows,
                                             int channels, float *dgamma, float *dbeta);
void tdm_cuda_bn_backward_sums(TdmBackend *b, float *dgamma, float *dbeta, const void *dy,
                               TdmDtype dy_type, const void *x, TdmDtype x_type,
                               const float *mean, const float *invstd, const float *gamma,
                               const float *beta, bool relu, int rows, int channels);
void tdm_cuda_bn_backward_dx(TdmBackend *b, float *dx, const void *dy, TdmDtype dy_type,
                             const void *x, TdmDtype x_type, const float *mean,
                             const float *invstd, const float *gamma, const float *beta,
                             bool relu, const float *sum_dgamma, const float *sum_dbeta,
                             float inv_count, int rows, int channels);
void tdm_cuda_bn_backward_dx_bf16(TdmBackend *b, uint16_t *dx, const void *dy, TdmDtype dy_type,
                                  const void *x, TdmDtype x_type, const float *mean,
                                  const float *invstd, const float *gamma, const float *beta,
                                  bool relu, const float *sum_dgamma, const float *sum_dbeta,
                                  float inv_count, int rows, int channels);

/* tdm-backend-cuda-softmax.c */
void tdm_cuda_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
                           int classes, float smoothing, float grad_scale, float *dlogits,
                           TdmMetrics *metrics);

/* tdm-backend-cuda-gather.c */
void tdm_cuda_gather(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                     const uint8_t *labels, const int32_t *indices, int count, int sample_size,
                     float scale);
void tdm_cuda_gather_augment(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                             const uint8_t *labels, const int32_t *indices, int count, int h,
                             int w, int c, float scale, int pad, TdmFlip flip, uint64_t key,
                             uint32_t epoch);
void tdm_cuda_gather_photo(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                           const uint8_t *labels, const int32_t *indices, int count, int h, int w,
                           int c, const TdmPhotoAugment *augment, uint64_t key, uint32_t epoch);
void tdm_cuda_channel_affine(TdmBackend *b, float *x, size_t rows, TdmChannelAffine a);

/* tdm-backend-cuda-optimizer.c */
void tdm_cuda_sgd_update(TdmBackend *b, float *p, const float *g, size_t n, float lr,
                         float weight_decay, const float *rates);
void tdm_cuda_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity,
                              size_t n, float lr, float momentum, float weight_decay,
                              const float *rates);
void tdm_cuda_sgd_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity,
                                  const uint8_t *decay_mask, size_t n, float lr, float momentum,
                                  float weight_decay, bool nesterov, const float *rates);
void tdm_cuda_weight_decay(TdmBackend *b, float *g, const float *p, const uint8_t *decay_mask,
                           size_t n, float weight_decay);
void tdm_cuda_adam_update(TdmBackend *b, float *p, const float *g, float *m, float *v, size_t n,
                          float lr_t, float beta1, float beta2, float eps, float weight_decay,
                          const float *rates);
void tdm_cuda_clip_norm(TdmBackend *b, float *x, size_t n, float max_norm, double *work);

/* tdm-backend-cuda-compare.c */
void tdm_cuda_deviation(TdmBackend *b, double *work, const void *x, const void *ref,
                        TdmDtype type, size_t n);
