/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-conv.c — the CPU backend's convolution operations that the replica
 * composes with GEMMs: im2col and col2im, and a network's first conv fused with its
 * pool (the loops of tdm-cpu-kernels.c for this CPU). The whole 3×3 convolutions are
 * the Winograd files' (tdm-backend-cpu-winograd.c). The front door checked the shapes.
 */
#include "tdm-backend-cpu-private.h"

void
tdm_cpu_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c, int kh,
               int kw, int pad, int stride)
{
  tdm_cpu_kernels_of(b)->im2col(col, x, n, h, w, c, kh, kw, pad, stride);
}

void
tdm_cpu_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c, int kh,
               int kw, int pad, int stride)
{
  tdm_cpu_kernels_of(b)->col2im(dx, col, n, h, w, c, kh, kw, pad, stride);
}

void
tdm_cpu_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                          const float *wt, const float *bias, bool relu, int n, int h, int w,
                          int c, int out, int kh, int kw, int pad, int pk)
{
  tdm_cpu_kernels_of(b)->conv_pool_forward(y, argmax, x, wt, bias, relu, n, h, w, c, out, kh, kw, pad,
                                    pk);
}

void
tdm_cpu_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                           const int32_t *argmax, const float *y, const float *x, bool relu,
                           int n, int h, int w, int c, int out, int kh, int kw, int pad, int pk)
{
  tdm_cpu_kernels_of(b)->conv_pool_backward(dwt, dbias, dy, argmax, y, x, relu, n, h, w, c, out, kh,
                                     kw, pad, pk);
}
