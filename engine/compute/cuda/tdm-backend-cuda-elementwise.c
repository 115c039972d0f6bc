/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-elementwise.c — the CUDA backend's operations of one value at a
 * time (kernels/elementwise.cu): bias and ReLU, the communicators' add and scale, a
 * residual block's add, the rounding to bfloat16, dropout and exact mode's fixed-point
 * sums. Each enqueues its launcher on the backend's stream; the front door
 * (tdm-backend-calls*.c) checked the arguments, the semantics are tdm-backend.h's.
 */
#include "tdm-backend-cuda-private.h"

#define STREAM(b) tdm_backend_cuda_stream(b)

void
tdm_cuda_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
                      int inner, bool relu)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_bias_forward(y, bias, outer, channels, inner, relu, CUDA_B(b)->stream));
}

void
tdm_cuda_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer, int channels,
                       int inner)
{
  if (!tdm_cuda_begin(b))
    return;
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

void
tdm_cuda_to_bf16(TdmBackend *b, uint16_t *out, const float *in, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_to_bf16(out, in, n, CUDA_B(b)->stream));
}

void
tdm_cuda_from_bf16(TdmBackend *b, float *out, const uint16_t *in, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_from_bf16(out, in, n, CUDA_B(b)->stream));
}

void
tdm_cuda_relu_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                            TdmDtype dy_type, const uint32_t *mask, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_relu_backward_bf16(dx, dx_type == TDM_DTYPE_BF16, dy,
                                            dy_type == TDM_DTYPE_BF16, mask, n,
                                            CUDA_B(b)->stream));
}

void
tdm_cuda_add_strided_bf16(TdmBackend *b, void *y, TdmDtype y_type, const void *a,
                          TdmDtype a_type, const float *x, int n, int h, int w, int c,
                          int stride)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b,
                tdm_k_add_strided_bf16(y, y_type == TDM_DTYPE_BF16, a, a_type == TDM_DTYPE_BF16,
                                       x, n, h, w, c, stride, CUDA_B(b)->stream));
}

void
tdm_cuda_add_relu_backward_bf16(TdmBackend *b, uint16_t *dx, const void *a, TdmDtype a_type,
                                const void *x, TdmDtype x_type, const uint32_t *mask, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_add_relu_backward_bf16(dx, a, a_type == TDM_DTYPE_BF16, x,
                                                x_type == TDM_DTYPE_BF16, mask, n,
                                                CUDA_B(b)->stream));
}

void
tdm_cuda_add_out_bf16(TdmBackend *b, uint16_t *y, const float *a, const void *x,
                      TdmDtype x_type, size_t n, bool relu, uint32_t *bits)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_add_out_bf16(y, a, x, x_type == TDM_DTYPE_BF16, n, relu, bits,
                                      CUDA_B(b)->stream));
}

void
tdm_cuda_dropout_forward(TdmBackend *b, float *y, const float *x, const int32_t *indices, int n,
                         int per_sample, float p, uint64_t key, uint32_t epoch)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_dropout(y, x, indices, n, per_sample, p, key, epoch, STREAM(b)));
}

void
tdm_cuda_dropout_backward(TdmBackend *b, float *dx, const float *dy, const int32_t *indices,
                          int n, int per_sample, float p, uint64_t key, uint32_t epoch)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_dropout(dx, dy, indices, n, per_sample, p, key, epoch, STREAM(b)));
}

void
tdm_cuda_exact_add(TdmBackend *b, int64_t *acc, const float *x, size_t n, int64_t *bad)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_exact_add(acc, x, n, bad, CUDA_B(b)->stream));
}
