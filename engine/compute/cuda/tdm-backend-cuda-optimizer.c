/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-optimizer.c — the CUDA backend's optimizers over the flat parameter
 * buffer (kernels/optimizer.cu): Chainer's SGD, MomentumSGD and Adam, PyTorch's SGD
 * with a weight-decay mask, and the masked decay the others use.
 */
#include "tdm-backend-cuda-private.h"

#define STREAM(b) tdm_backend_cuda_stream(b)

void
tdm_cuda_sgd_update(TdmBackend *b, float *p, const float *g, size_t n, float lr,
                    float weight_decay, const float *rates)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_sgd_update(p, g, n, lr, weight_decay, rates, STREAM(b)));
}

void
tdm_cuda_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity, size_t n,
                         float lr, float momentum, float weight_decay, const float *rates)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_momentum_update(p, g, velocity, n, lr, momentum, weight_decay, rates,
                                         STREAM(b)));
}

void
tdm_cuda_sgd_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity,
                             const uint8_t *decay_mask, size_t n, float lr, float momentum,
                             float weight_decay, bool nesterov, const float *rates)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_sgd_momentum_update(p, g, velocity, decay_mask, n, lr, momentum,
                                             weight_decay, nesterov, rates, STREAM(b)));
}

void
tdm_cuda_weight_decay(TdmBackend *b, float *g, const float *p, const uint8_t *decay_mask,
                      size_t n, float weight_decay)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_weight_decay(g, p, decay_mask, n, weight_decay, STREAM(b)));
}

void
tdm_cuda_adam_update(TdmBackend *b, float *p, const float *g, float *m, float *v, size_t n,
                     float lr_t, float beta1, float beta2, float eps, float weight_decay,
                     const float *rates)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_adam_update(p, g, m, v, n, lr_t, beta1, beta2, eps, weight_decay,
                                     rates, STREAM(b)));
}

G_STATIC_ASSERT(TDM_CLIP_WORK_DOUBLES == TDM_K_CLIP_WORK_DOUBLES);

void
tdm_cuda_clip_norm(TdmBackend *b, float *x, size_t n, float max_norm, double *work)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_clip_norm(x, n, max_norm, work, STREAM(b)));
}
