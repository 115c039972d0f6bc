/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-pool.c — the CUDA backend's pools whose windows tile the input
 * (max, with a conv's bias and ReLU or a bn's output folded in, and average) and the
 * global pools (kernels/pool.cu); the max pool of a bf16 run's stored tensors
 * (kernels/pool-bf16.cu); any window, stride and padding is -pool2d.c's. Each
 * enqueues on the backend's stream; the front door checked the shapes.
 */
#include "tdm-backend-cuda-private.h"

#define STREAM(b) tdm_backend_cuda_stream(b)

void
tdm_cuda_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                         const float *bias, bool relu, int n, int h, int w, int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool_forward(y, argmax, x, bias, relu, n, h, w, c, k,
                                       CUDA_B(b)->stream));
}

void
tdm_cuda_maxpool_forward_bn(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                            const float *mean, const float *invstd, const float *gamma,
                            const float *beta, bool relu, int n, int h, int w, int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool_forward_bn(y, argmax, x, mean, invstd, gamma, beta, relu, n, h,
                                          w, c, k, STREAM(b)));
}

void
tdm_cuda_maxpool_backward(TdmBackend *b, float *dx, float *dbias, const float *dy,
                          const int32_t *argmax, const float *y, int n, int h, int w, int c,
                          int k)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool_backward(dx, dbias, dy, argmax, y, n, h, w, c, k,
                                        CUDA_B(b)->partials, TDM_PARTIALS_FLOATS,
                                        CUDA_B(b)->stream));
}

void
tdm_cuda_maxpool_forward_bf16(TdmBackend *b, uint16_t *y, int32_t *argmax, const void *x,
                              TdmDtype x_type, const float *mean, const float *invstd,
                              const float *gamma, const float *beta, bool relu, int n, int h,
                              int w, int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool_forward_bf16(y, argmax, x, x_type == TDM_DTYPE_BF16, mean,
                                            invstd, gamma, beta, relu, n, h, w, c, k,
                                            STREAM(b)));
}

void
tdm_cuda_maxpool_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                               TdmDtype dy_type, const int32_t *argmax, int n, int h, int w,
                               int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_maxpool_backward_bf16(dx, dx_type == TDM_DTYPE_BF16, dy,
                                             dy_type == TDM_DTYPE_BF16, argmax, n, h, w, c, k,
                                             STREAM(b)));
}

void
tdm_cuda_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int h, int w, int c,
                         int k)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_avgpool_forward(y, x, n, h, w, c, k, STREAM(b)));
}

void
tdm_cuda_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n, int h, int w, int c,
                          int k)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_avgpool_backward(dx, dy, n, h, w, c, k, STREAM(b)));
}

void
tdm_cuda_global_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int pixels,
                                int c)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_global_avgpool_forward(y, x, n, pixels, c, STREAM(b)));
}

void
tdm_cuda_global_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n, int pixels,
                                 int c)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_global_avgpool_backward(dx, dy, n, pixels, c, STREAM(b)));
}

void
tdm_cuda_global_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x, int n,
                                int pixels, int c)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_global_maxpool_forward(y, argmax, x, n, pixels, c, STREAM(b)));
}

void
tdm_cuda_global_maxpool_backward(TdmBackend *b, float *dx, const float *dy,
                                 const int32_t *argmax, int n, int pixels, int c)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_global_maxpool_backward(dx, dy, argmax, n, pixels, c, STREAM(b)));
}
