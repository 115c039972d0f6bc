/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-layers.h — the CPU backend's operations for the layers of networks
 * people train (batch normalization, average and global pooling, dropout), the
 * augmenting gather, PyTorch's SGD and gradient clipping: private to the CPU backend, which puts them in
 * its table (tdm-backend-cpu.c). The semantics are those of tdm-backend.h. Not the
 * GEMM-bound work, nor the loops built per instruction set (tdm-cpu-kernels.c). */
#pragma once

#include "tdm-backend.h"

G_BEGIN_DECLS

/* Every operation starts here: counts it, and does nothing after a failure. */
static inline gboolean
tdm_cpu_begin(TdmBackend *b)
{
  b->operations++;
  return !tdm_backend_failed(b);
}

void tdm_cpu_gather_augment (TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                             const uint8_t *labels, const int32_t *indices, int count,
                             int h, int w, int c, float scale, int pad, TdmFlip flip,
                             uint64_t key, uint32_t epoch);
void tdm_cpu_gather_photo (TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                           const uint8_t *labels, const int32_t *indices, int count, int h,
                           int w, int c, const TdmPhotoAugment *augment, uint64_t key,
                           uint32_t epoch);
void tdm_cpu_bn_moments (TdmBackend *b, float *slots, const float *x, int rows,
                         int channels, int slot, int slot_count);
void tdm_cpu_bn_stats (TdmBackend *b, float *saved, const float *slots, int slot_count,
                       int channels, float eps, float momentum, float *running_mean,
                       float *running_var);
void tdm_cpu_bn_forward (TdmBackend *b, float *y, const float *x, const float *mean,
                         const float *invstd, const float *gamma, const float *beta,
                         int rows, int channels, bool relu);
void tdm_cpu_bn_forward_eval (TdmBackend *b, float *y, const float *x,
                              const float *running_mean, const float *running_var,
                              const float *gamma, const float *beta, float eps, int rows,
                              int channels, bool relu);
void tdm_cpu_bn_backward_sums (TdmBackend *b, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *mean, const float *invstd,
                               const float *gamma, const float *beta, bool relu, int rows,
                               int channels);
void tdm_cpu_bn_backward_dx (TdmBackend *b, float *dx, const float *dy, const float *x,
                             const float *mean, const float *invstd, const float *gamma,
                             const float *beta, bool relu, const float *sum_dgamma,
                             const float *sum_dbeta, float inv_count, int rows, int channels);
void tdm_cpu_avgpool_forward (TdmBackend *b, float *y, const float *x, int n, int h, int w,
                              int c, int k);
void tdm_cpu_avgpool_backward (TdmBackend *b, float *dx, const float *dy, int n, int h,
                               int w, int c, int k);
void tdm_cpu_global_avgpool_forward (TdmBackend *b, float *y, const float *x, int n,
                                     int pixels, int c);
void tdm_cpu_global_avgpool_backward (TdmBackend *b, float *dx, const float *dy, int n,
                                      int pixels, int c);
void tdm_cpu_global_maxpool_forward (TdmBackend *b, float *y, int32_t *argmax,
                                     const float *x, int n, int pixels, int c);
void tdm_cpu_global_maxpool_backward (TdmBackend *b, float *dx, const float *dy,
                                      const int32_t *argmax, int n, int pixels, int c);
void tdm_cpu_clip_norm (TdmBackend *b, float *x, size_t n, float max_norm, double *work);
void tdm_cpu_dropout_forward (TdmBackend *b, float *y, const float *x,
                              const int32_t *indices, int n, int per_sample, float p,
                              uint64_t key, uint32_t epoch);
void tdm_cpu_dropout_backward (TdmBackend *b, float *dx, const float *dy,
                               const int32_t *indices, int n, int per_sample, float p,
                               uint64_t key, uint32_t epoch);
void tdm_cpu_sgd_momentum_update (TdmBackend *b, float *p, const float *g, float *velocity,
                                  const uint8_t *decay_mask, size_t n, float lr,
                                  float momentum, float weight_decay, bool nesterov);
void tdm_cpu_weight_decay (TdmBackend *b, float *g, const float *p,
                           const uint8_t *decay_mask, size_t n, float weight_decay);

G_END_DECLS
