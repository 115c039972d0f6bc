/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-pool2d.c — the CUDA backend's pools with any window, stride and
 * padding: each enqueues kernels/pool2d.cu's launcher on the backend's stream (the front
 * door checked the geometry). The semantics are tdm-backend.h's and the CPU
 * reference's (tdm-backend-cpu-pool2d.c).
 */
#include "tdm-backend-cuda.h"
#include "tdm-error.h"
#include "tdm-kernels.h"

#define STREAM(b) tdm_backend_cuda_stream(b)

void
tdm_cuda_maxpool2d_forward(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                           const void *x, TdmDtype x_type, TdmPool2d g)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool2d_forward(y, y_type == TDM_DTYPE_BF16, argmax, x,
                                         x_type == TDM_DTYPE_BF16, g.n, g.h, g.w, g.c, g.k, g.s,
                                         g.p, g.oh, g.ow, STREAM(b)));
}

void
tdm_cuda_maxpool2d_forward_bn(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                              const void *x, TdmDtype x_type, const float *mean,
                              const float *invstd, const float *gamma, const float *beta,
                              bool relu, TdmPool2d g)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool2d_forward_bn(y, y_type == TDM_DTYPE_BF16, argmax, x,
                                            x_type == TDM_DTYPE_BF16, mean, invstd, gamma,
                                            beta, relu, g.n, g.h, g.w, g.c, g.k, g.s, g.p,
                                            g.oh, g.ow, STREAM(b)));
}

void
tdm_cuda_maxpool2d_backward(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                            TdmDtype dy_type, const void *argmax, TdmPool2d g)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool2d_backward(dx, dx_type == TDM_DTYPE_BF16, dy,
                                          dy_type == TDM_DTYPE_BF16, argmax, g.n, g.h, g.w, g.c,
                                          g.k, g.s, g.p, g.oh, g.ow, STREAM(b)));
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
