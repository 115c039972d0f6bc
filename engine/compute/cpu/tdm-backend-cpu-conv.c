/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-conv.c — the CPU backend's convolution operations that the replica
 * composes with GEMMs: im2col and col2im (on float32 columns, the loops of
 * tdm-cpu-kernels.c for this CPU; on bfloat16 columns, and the columns of a bn's
 * output normalized as they are gathered), and a network's first conv fused with its
 * pool. The whole 3×3 convolutions are
 * the Winograd files' (tdm-backend-cpu-winograd.c). The front door checked the shapes.
 */
#include "tdm-backend-cpu-private.h"
#include "tdm-bf16.h"

#include <string.h>

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

/* bf16 columns (--precision bf16): plain loops, each value rounded as to_bf16 rounds. */

/* A bn's output value as bn_forward computes it (tdm-backend-cpu-bn.c): the same
 * multiply and add, so the same bits. */
static inline float
normalized(float v, float scale, float shift, bool relu)
{
  const float y = v * scale + shift;
  return relu && y < 0.0f ? 0.0f : y;
}

/* x[i] as float32, x being float32 or bf16 (widened exactly). */
static inline float
value_at(const void *x, TdmDtype x_type, size_t i)
{
  return x_type == TDM_DTYPE_F32 ? ((const float *)x)[i]
                                 : tdm_bf16_value(((const uint16_t *)x)[i]);
}

/* im2col's columns as bfloat16, of x itself (scale NULL) or of x normalized channel by
 * channel (x · scale + shift, then the ReLU when relu); x of either type. */
static void
im2col_bf16(uint16_t *col, const void *x, TdmDtype x_type, const float *scale,
            const float *shift, bool relu, int n, int h, int w, int c, int kh, int kw, int pad,
            int stride)
{
  const int oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
  uint16_t *restrict r = col;
  for (int im = 0; im < n; im++) {
    const size_t xs = (size_t)im * h * w * c;
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++)
        for (int ky = 0; ky < kh; ky++) {
          const int iy = oy * stride - pad + ky;
          for (int kx = 0; kx < kw; kx++, r += c) {
            const int ix = ox * stride - pad + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
              memset(r, 0, sizeof(uint16_t) * c);
              continue;
            }
            const size_t p = xs + ((size_t)iy * w + ix) * c;
            if (scale == NULL && x_type == TDM_DTYPE_F32)
              for (int ch = 0; ch < c; ch++)
                r[ch] = tdm_bf16_round(((const float *)x)[p + ch]);
            else if (scale == NULL)
              memcpy(r, (const uint16_t *)x + p, sizeof(uint16_t) * c);
            else
              for (int ch = 0; ch < c; ch++)
                r[ch] = tdm_bf16_round(
                    normalized(value_at(x, x_type, p + ch), scale[ch], shift[ch], relu));
          }
        }
  }
}

void
tdm_cpu_im2col_bf16(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type, int n, int h,
                    int w, int c, int kh, int kw, int pad, int stride)
{
  im2col_bf16(col, x, x_type, NULL, NULL, false, n, h, w, c, kh, kw, pad, stride);
}

void
tdm_cpu_im2col_bf16_bn(TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type,
                       const float *mean, const float *invstd, const float *gamma,
                       const float *beta, bool relu, int n, int h, int w, int c, int kh, int kw,
                       int pad, int stride)
{
  /* bn_forward's scale and shift, so that the columns hold its output's bits. */
  float *scale = g_new(float, 2 * (size_t)c), *shift = scale + c;
  tdm_cpu_bn_affine(scale, shift, mean, invstd, gamma, beta, c);
  im2col_bf16(col, x, x_type, scale, shift, relu, n, h, w, c, kh, kw, pad, stride);
  g_free(scale);
}

void
tdm_cpu_col2im_bf16(TdmBackend *b, float *dx, const uint16_t *col, int n, int h, int w, int c,
                    int kh, int kw, int pad, int stride)
{
  /* Written: pixels no window reads stay zero. Each pixel sums its taps in the order
   * of the rows, then of the taps, in float32. */
  memset(dx, 0, sizeof(float) * (size_t)n * h * w * c);
  const int oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
  const uint16_t *r = col;
  for (int im = 0; im < n; im++) {
    float *xs = dx + (size_t)im * h * w * c;
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++)
        for (int ky = 0; ky < kh; ky++) {
          const int iy = oy * stride - pad + ky;
          for (int kx = 0; kx < kw; kx++, r += c) {
            const int ix = ox * stride - pad + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w)
              continue;
            float *restrict d = xs + ((size_t)iy * w + ix) * c;
            for (int ch = 0; ch < c; ch++)
              d[ch] += tdm_bf16_value(r[ch]);
          }
        }
  }
}
