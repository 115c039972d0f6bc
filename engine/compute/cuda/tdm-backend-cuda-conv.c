/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv.c — the CUDA backend's convolution operations that the replica
 * composes with GEMMs (kernels/conv-*.cu): im2col and col2im on float32 or bfloat16
 * columns (and the columns of a bn's output, normalized as they are gathered), the
 * column-free input gradient, and a network's first conv fused with its pool. Each
 * enqueues on the backend's stream; the front door checked the shapes.
 */
#include "tdm-backend-cuda-private.h"

#define STREAM(b) tdm_backend_cuda_stream(b)

void
tdm_cuda_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c, int kh,
                int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_im2col(col, x, n, h, w, c, kh, kw, pad, stride, CUDA_B(b)->stream));
}

void
tdm_cuda_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c, int kh,
                int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_col2im(dx, col, n, h, w, c, kh, kw, pad, stride, CUDA_B(b)->stream));
}

void
tdm_cuda_im2col_bf16(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type, int n,
                     int h, int w, int c, int kh, int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_im2col_bf16(col, x, x_type == TDM_DTYPE_BF16, n, h, w, c, kh, kw, pad,
                                   stride, STREAM(b)));
}

void
tdm_cuda_im2col_bf16_bn(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type,
                        const float *mean, const float *invstd, const float *gamma,
                        const float *beta, bool relu, int n, int h, int w, int c, int kh,
                        int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_im2col_bf16_bn(col, x, x_type == TDM_DTYPE_BF16, mean, invstd, gamma,
                                      beta, relu, n, h, w, c, kh, kw, pad, stride,
                                      CUDA_B(b)->descending, STREAM(b)));
}

void
tdm_cuda_col2im_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *col, int n,
                     int h, int w, int c, int kh, int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_col2im_bf16(dx, dx_type == TDM_DTYPE_BF16, col, n, h, w, c, kh, kw, pad,
                                   stride, CUDA_B(b)->stream));
}

/* Without columns where conv-implicit.cu is on (TDM_CUDA_IMPLICIT=1) and takes the
 * shape (stride 1, channels in 32s, sm_80+, aligned), else through them. */
void
tdm_cuda_conv_dgrad_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *dy,
                         const uint16_t *w, uint16_t *col, int n, int h, int w_, int c,
                         int out_c, int kh, int kw, int pad, int stride)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (!tdm_cuda_begin(b))
    return;
  if (tdm_k_conv_dgrad_bf16_fits(cb->implicit_major, c, out_c, kh, kw, pad, stride) &&
      ((uintptr_t)dx & 15u) == 0 && ((uintptr_t)dy & 15u) == 0 && ((uintptr_t)w & 15u) == 0) {
    TDM_CUDA_OK(b, tdm_k_conv_dgrad_bf16(dx, dx_type == TDM_DTYPE_BF16, dy, w, n, h, w_, c,
                                         out_c, kh, kw, pad, cb->stream));
    return;
  }
  int oh = (h + 2 * pad - kh) / stride + 1, ow = (w_ + 2 * pad - kw) / stride + 1;
  int rows = n * oh * ow, k = kh * kw * c;
  b->operations += 2; /* the front door counted one launch of three */
  tdm_cuda_gemm_bf16_out(b, false, false, rows, k, out_c, dy, out_c, w, k, col, k);
  tdm_cuda_col2im_bf16(b, dx, dx_type, col, n, h, w_, c, kh, kw, pad, stride);
}

void
tdm_cuda_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                           const float *wt, const float *bias, bool relu, int n, int h, int w,
                           int c, int out, int kh, int kw, int pad, int pk)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_conv_pool_forward(y, argmax, x, wt, bias, relu, n, h, w, c, out, kh,
                                           kw, pad, pk, CUDA_B(b)->stream));
}

void
tdm_cuda_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                            const int32_t *argmax, const float *y, const float *x, bool relu,
                            int n, int h, int w, int c, int out, int kh, int kw, int pad,
                            int pk)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_conv_pool_backward(dwt, dbias, dy, argmax, y, x, relu, n, h, w, c, out,
                                            kh, kw, pad, pk, CUDA_B(b)->partials,
                                            TDM_PARTIALS_FLOATS, CUDA_B(b)->stream));
}
