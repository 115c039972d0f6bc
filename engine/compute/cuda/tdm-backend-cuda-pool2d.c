/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-pool2d.c — the CUDA backend's pools with any window, stride and
 * padding, and its per-channel input normalization: each enqueues kernels/pool2d.cu's
 * launcher on the backend's stream (the front door checked the geometry). The semantics are
 * tdm-backend.h's and the CPU reference's (tdm-backend-cpu-pool2d.c).
 */
#include "tdm-backend-cuda.h"
#include "tdm-error.h"
#include "tdm-kernels.h"

#include <string.h>

#define STREAM(b) tdm_backend_cuda_stream(b)

G_STATIC_ASSERT(TDM_K_AFFINE_MAX == TDM_AFFINE_MAX_CHANNELS);

void
tdm_cuda_maxpool2d_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                           TdmPool2d g)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool2d_forward(y, argmax, x, g.n, g.h, g.w, g.c, g.k, g.s, g.p,
                                         g.oh, g.ow, STREAM(b)));
}

void
tdm_cuda_maxpool2d_backward(TdmBackend *b, float *dx, const float *dy, const int32_t *argmax,
                            TdmPool2d g)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool2d_backward(dx, dy, argmax, g.n, g.h, g.w, g.c, g.k, g.s, g.p,
                                          g.oh, g.ow, STREAM(b)));
}

void
tdm_cuda_avgpool2d_forward(TdmBackend *b, float *y, const float *x, TdmPool2d g)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_avgpool2d_forward(y, x, g.n, g.h, g.w, g.c, g.k, g.s, g.p, g.oh, g.ow,
                                         STREAM(b)));
}

void
tdm_cuda_avgpool2d_backward(TdmBackend *b, float *dx, const float *dy, TdmPool2d g)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_avgpool2d_backward(dx, dy, g.n, g.h, g.w, g.c, g.k, g.s, g.p, g.oh,
                                          g.ow, STREAM(b)));
}

void
tdm_cuda_channel_affine(TdmBackend *b, float *x, size_t rows, TdmChannelAffine a)
{
  if (!tdm_cuda_begin(b))
    return;
  TdmKAffine k;
  memcpy(k.mul, a.mul, sizeof k.mul);
  memcpy(k.add, a.add, sizeof k.add);
  TDM_CUDA_OK(b, tdm_k_channel_affine(x, rows, a.channels, k, STREAM(b)));
}
