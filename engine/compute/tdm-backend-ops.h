/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-ops.h — the table a backend fills: one slot per operation of
 * tdm-backend.h, for the backends (compute/cpu/, compute/cuda/) and the front door that
 * calls them (tdm-backend-calls*.c), no one else; the engine's other folders call the
 * operations as tdm_backend_<slot> (b, …), and tests/engine/test-engine-layers.py fails
 * on any other include of this header.
 *
 * Each slot means what its wrapper says in tdm-backend.h. A slot is called only after
 * the wrapper has counted the operation, returned early after an earlier failure, and
 * checked every argument the contract constrains (sizes, geometry, rates; not the
 * contents of device memory): a backend trusts its arguments and checks only what is
 * its own (its scratch's capacity, what a CPU can read cheaply, what a device call
 * returns). Slots marked optional may be NULL; every other slot is filled, which
 * tdm_backend_new () asserts (tdm_backend_ops_missing ()).
 */
#pragma once

#include "tdm-backend.h"

G_BEGIN_DECLS

struct _TdmBackendOps {
  /* Memory. alloc/free go through the device's byte counter. */
  void *(*alloc) (TdmBackend *b, size_t bytes, GError **error);
  void (*free) (TdmBackend *b, void *ptr);
  void (*upload) (TdmBackend *b, void *dst, const void *src, size_t bytes);
  void (*download) (TdmBackend *b, void *dst, const void *src, size_t bytes);
  void (*copy) (TdmBackend *b, void *dst, const void *src, size_t bytes);
  void (*zero) (TdmBackend *b, void *ptr, size_t bytes);
  void (*synchronize) (TdmBackend *b);

  void (*gemm) (TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                float alpha, const float *a, int lda, const float *bm, int ldb,
                float beta, float *c, int ldc);
  void (*bias_forward) (TdmBackend *b, float *y, const float *bias,
                        int outer, int channels, int inner, bool relu);
  void (*bias_backward) (TdmBackend *b, float *dbias, const float *dy,
                         int outer, int channels, int inner);
  void (*relu_forward) (TdmBackend *b, float *y, const float *x, size_t n);
  void (*relu_backward) (TdmBackend *b, float *dx, const float *dy, const float *y, size_t n);

  void (*im2col) (TdmBackend *b, float *col, const float *x,
                  int n, int h, int w, int c, int kh, int kw, int pad, int stride);
  void (*col2im) (TdmBackend *b, float *dx, const float *col,
                  int n, int h, int w, int c, int kh, int kw, int pad, int stride);
  /* Optional, and called only for shapes tdm_backend_conv_work_floats () accepts for
   * the backend's kind. */
  void (*conv_forward) (TdmBackend *b, float *y, const float *x, const float *wt,
                        float *work, int n, int h, int w, int c, int out_c, int kernel,
                        int pad, int stride);
  void (*conv_backward) (TdmBackend *b, float *dx, float *dw, const float *dy,
                         const float *x, const float *wt, float *work, int n, int h,
                         int w, int c, int out_c, int kernel, int pad, int stride);

  /* Optional, all three or none. */
  gboolean (*conv_engine_forward) (TdmBackend *b, const TdmConvArgs *a);
  gboolean (*conv_engine_backward) (TdmBackend *b, const TdmConvArgs *a);
  void (*conv_choices) (TdmBackend *b, TdmConvChoices *counts);

  void (*maxpool_forward) (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                           const float *bias, bool relu, int n, int h, int w, int c, int k);
  /* Optional. */
  void (*maxpool_forward_bn) (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                              const float *mean, const float *invstd, const float *gamma,
                              const float *beta, bool relu, int n, int h, int w, int c,
                              int k);
  void (*maxpool_backward) (TdmBackend *b, float *dx, float *dbias, const float *dy,
                            const int32_t *argmax, const float *y, int n, int h, int w,
                            int c, int k);
  void (*conv_pool_forward) (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                             const float *wt, const float *bias, bool relu, int n, int h,
                             int w, int c, int out, int kh, int kw, int pad, int pk);
  void (*conv_pool_backward) (TdmBackend *b, float *dwt, float *dbias, const float *dy,
                              const int32_t *argmax, const float *y, const float *x,
                              bool relu, int n, int h, int w, int c, int out, int kh,
                              int kw, int pad, int pk);

  void (*softmax_xent) (TdmBackend *b, const float *logits, const int32_t *labels,
                        int rows, int classes, float smoothing, float grad_scale,
                        float *dlogits, TdmMetrics *metrics);
  void (*gather) (TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                  const uint8_t *labels, const int32_t *indices, int count,
                  int sample_size, float scale);
  void (*gather_augment) (TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                          const uint8_t *labels, const int32_t *indices, int count,
                          int h, int w, int c, float scale, int pad, TdmFlip flip,
                          uint64_t key, uint32_t epoch);
  /* Optional. */
  void (*gather_photo) (TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                        const uint8_t *labels, const int32_t *indices, int count, int h,
                        int w, int c, const TdmPhotoAugment *augment, uint64_t key,
                        uint32_t epoch);
  void (*channel_affine) (TdmBackend *b, float *x, size_t rows, TdmChannelAffine a);

  /* The bn slots below and im2col_bf16_bn read an x of type TDM_DTYPE_BF16 where
   * tdm_backend_kind_has_bn_bf16_input() says the backend's kind does (else only
   * float32, which the front door enforces). */
  void (*bn_moments) (TdmBackend *b, float *slots, const void *x, TdmDtype x_type, int rows,
                      int channels, int slot, int slot_count);
  void (*bn_stats) (TdmBackend *b, float *saved, const float *slots, int slot_count,
                    int channels, float eps, float momentum, float *running_mean,
                    float *running_var);
  /* Optional: without it the front door runs bn_moments (slot 0 of 1), then bn_stats. */
  void (*bn_moments_stats) (TdmBackend *b, float *saved, float *slots, const void *x,
                            TdmDtype x_type, int rows, int channels, float eps, float momentum,
                            float *running_mean, float *running_var);
  void (*bn_forward) (TdmBackend *b, float *y, const void *x, TdmDtype x_type, const float *mean,
                      const float *invstd, const float *gamma, const float *beta, int rows,
                      int channels, bool relu);
  /* Optional: without it the front door runs bn_forward, then add_out. */
  void (*bn_forward_add) (TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                          const float *mean, const float *invstd, const float *gamma,
                          const float *beta, const float *a, int rows, int channels,
                          bool relu);
  void (*bn_forward_eval) (TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                           const float *running_mean, const float *running_var,
                           const float *gamma, const float *beta, float eps, int rows,
                           int channels, bool relu);
  void (*bn_backward_sums) (TdmBackend *b, float *dgamma, float *dbeta, const void *dy,
                            TdmDtype dy_type, const void *x, TdmDtype x_type, const float *mean,
                            const float *invstd, const float *gamma, const float *beta,
                            bool relu, int rows, int channels);
  void (*bn_backward_dx) (TdmBackend *b, float *dx, const void *dy, TdmDtype dy_type,
                          const void *x, TdmDtype x_type, const float *mean, const float *invstd,
                          const float *gamma, const float *beta, bool relu,
                          const float *sum_dgamma, const float *sum_dbeta, float inv_count,
                          int rows, int channels);
  /* Optional. dx may be dy (bf16) or x (bf16): each element is read before it is
   * written (the replica's bn_dx_in_place() and bn_dx_over_input()). */
  void (*bn_backward_dx_bf16) (TdmBackend *b, uint16_t *dx, const void *dy, TdmDtype dy_type,
                               const void *x, TdmDtype x_type, const float *mean,
                               const float *invstd, const float *gamma, const float *beta,
                               bool relu, const float *sum_dgamma, const float *sum_dbeta,
                               float inv_count, int rows, int channels);

  void (*avgpool_forward) (TdmBackend *b, float *y, const float *x, int n, int h, int w,
                           int c, int k);
  void (*avgpool_backward) (TdmBackend *b, float *dx, const float *dy, int n, int h,
                            int w, int c, int k);
  void (*maxpool2d_forward) (TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                             const void *x, TdmDtype x_type, TdmPool2d g);
  void (*maxpool2d_backward) (TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                              TdmDtype dy_type, const void *argmax, TdmPool2d g);
  void (*avgpool2d_forward) (TdmBackend *b, float *y, const float *x, TdmPool2d g);
  void (*avgpool2d_backward) (TdmBackend *b, float *dx, const float *dy, TdmPool2d g);
  void (*global_avgpool_forward) (TdmBackend *b, float *y, const float *x, int n,
                                  int pixels, int c);
  void (*global_avgpool_backward) (TdmBackend *b, float *dx, const float *dy, int n,
                                   int pixels, int c);
  void (*global_maxpool_forward) (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                  int n, int pixels, int c);
  void (*global_maxpool_backward) (TdmBackend *b, float *dx, const float *dy,
                                   const int32_t *argmax, int n, int pixels, int c);

  void (*dropout_forward) (TdmBackend *b, float *y, const float *x, const int32_t *indices,
                           int n, int per_sample, float p, uint64_t key, uint32_t epoch);
  void (*dropout_backward) (TdmBackend *b, float *dx, const float *dy,
                            const int32_t *indices, int n, int per_sample, float p,
                            uint64_t key, uint32_t epoch);

  void (*sgd_update) (TdmBackend *b, float *p, const float *g, size_t n,
                      float lr, float weight_decay, const float *rates);
  void (*momentum_update) (TdmBackend *b, float *p, const float *g, float *velocity,
                           size_t n, float lr, float momentum, float weight_decay,
                           const float *rates);
  void (*sgd_momentum_update) (TdmBackend *b, float *p, const float *g, float *velocity,
                               const uint8_t *decay_mask, size_t n, float lr,
                               float momentum, float weight_decay, bool nesterov,
                               const float *rates);
  void (*weight_decay) (TdmBackend *b, float *g, const float *p, const uint8_t *decay_mask,
                        size_t n, float weight_decay);
  void (*adam_update) (TdmBackend *b, float *p, const float *g, float *m, float *v,
                       size_t n, float lr_t, float beta1, float beta2, float eps,
                       float weight_decay, const float *rates);
  void (*clip_norm) (TdmBackend *b, float *x, size_t n, float max_norm, double *work);
  void (*deviation) (TdmBackend *b, double *work, const void *x, const void *ref,
                     TdmDtype type, size_t n);

  /* bf16 operands. */
  void (*to_bf16) (TdmBackend *b, uint16_t *out, const float *in, size_t n);
  void (*im2col_bf16) (TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type,
                       int n, int h, int w, int c, int kh, int kw, int pad, int stride);
  /* Optional. */
  void (*im2col_bf16_bn) (TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type,
                          const float *mean, const float *invstd, const float *gamma,
                          const float *beta, bool relu, int n, int h, int w, int c, int kh,
                          int kw, int pad, int stride);
  void (*gemm_bf16) (TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                     float alpha, const uint16_t *a, int lda, const uint16_t *bm, int ldb,
                     float beta, float *c, int ldc);
  void (*gemm_bf16_out) (TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                         const uint16_t *a, int lda, const uint16_t *bm, int ldb, uint16_t *c,
                         int ldc);
  void (*col2im_bf16) (TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *col, int n,
                       int h, int w, int c, int kh, int kw, int pad, int stride);
  /* Optional. */
  void (*conv_dgrad_bf16) (TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *dy,
                           const uint16_t *w, uint16_t *col, int n, int h, int w_, int c,
                           int out_c, int kh, int kw, int pad, int stride);

  void (*add) (TdmBackend *b, float *y, const float *x, size_t n);
  void (*scale) (TdmBackend *b, float *y, float alpha, size_t n);
  /* Optional. */
  void (*add_out) (TdmBackend *b, float *y, const float *a, const float *x, size_t n,
                   bool relu);
  /* Optional, all eleven or none (tdm_backend_has_bf16_blocks()): a residual block's
   * input and output, a max pool's, an evaluating bn's, and their gradients, stored as
   * bf16; a max pool of any window reading a training bn's output it normalizes. */
  void (*from_bf16) (TdmBackend *b, float *out, const uint16_t *in, size_t n);
  void (*relu_backward_bf16) (TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                              TdmDtype dy_type, const uint32_t *mask, size_t n);
  void (*add_out_bf16) (TdmBackend *b, uint16_t *y, const float *a, const void *x,
                        TdmDtype x_type, size_t n, bool relu, uint32_t *bits);
  void (*add_strided_bf16) (TdmBackend *b, void *y, TdmDtype y_type, const void *a,
                            TdmDtype a_type, const float *x, int n, int h, int w, int c,
                            int stride);
  void (*add_relu_backward_bf16) (TdmBackend *b, uint16_t *dx, const void *a, TdmDtype a_type,
                                  const void *x, TdmDtype x_type, const uint32_t *mask,
                                  size_t n);
  void (*add_relu_backward_bn_sums_bf16) (TdmBackend *b, uint16_t *dx,
                                          const TdmBlockStart *in, const void *x,
                                          TdmDtype x_type, const float *mean,
                                          const float *invstd, const float *gamma,
                                          const float *beta, bool relu, int rows,
                                          int channels, float *dgamma, float *dbeta);
  void (*bn_forward_bf16) (TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                           const float *mean, const float *invstd, const float *gamma,
                           const float *beta, const void *a, TdmDtype a_type, int rows,
                           int channels, bool relu, uint32_t *bits);
  void (*maxpool_forward_bf16) (TdmBackend *b, uint16_t *y, int32_t *argmax, const void *x,
                                TdmDtype x_type, const float *mean, const float *invstd,
                                const float *gamma, const float *beta, bool relu, int n,
                                int h, int w, int c, int k);
  void (*maxpool_backward_bf16) (TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                                 TdmDtype dy_type, const int32_t *argmax, int n, int h, int w,
                                 int c, int k);
  void (*bn_forward_eval_bf16) (TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                                const float *running_mean, const float *running_var,
                                const float *gamma, const float *beta, float eps, int rows,
                                int channels, bool relu);
  void (*bn_relu_add_bf16) (TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                            const float *mean, const float *invstd, const float *gamma,
                            const float *beta, const void *a, TdmDtype a_type, int rows,
                            int channels);
  void (*maxpool2d_forward_bn) (TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                                const void *x, TdmDtype x_type, const float *mean,
                                const float *invstd, const float *gamma, const float *beta,
                                bool relu, TdmPool2d g);
  /* Optional. */
  void (*exact_add) (TdmBackend *b, int64_t *acc, const float *x, size_t n, int64_t *bad);

  /* Optional, all three or none (tdm_backend_stem_bn_takes()). The two passes are
   * called only for a shape and image type stem_bn_takes accepts, with work of the
   * bytes it said. */
  gboolean (*stem_bn_takes) (TdmBackend *b, const TdmConvShape *s, TdmDtype x_type,
                             size_t *work_bytes);
  void (*stem_bn_sums) (TdmBackend *b, const TdmStemBn *a, float *dgamma, float *dbeta);
  void (*stem_bn_dx_wgrad) (TdmBackend *b, const TdmStemBn *a, const float *sum_dgamma,
                            const float *sum_dbeta, float inv_count, float *dw);

  /* Optional, all three or none. */
  gboolean (*graph_begin) (TdmBackend *b, int key);
  void (*graph_end) (TdmBackend *b, int key);
  gboolean (*graph_launch) (TdmBackend *b, int key);

  void (*destroy) (TdmBackend *b);
};

/* The first slot a backend must fill and ops leaves NULL, by name; NULL when the table
 * is complete. */
const char *tdm_backend_ops_missing (const TdmBackendOps *ops);

G_END_DECLS
