/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-conv.c — the CPU backend's convolution operations that the replica
 * composes with GEMMs: im2col and col2im (on float32 columns, the loops of
 * tdm-cpu-kernels.c for this CPU; on bfloat16 columns, and the columns of a bn's
 * output normalized as they are gathered), a network's first conv fused with its
 * pool, and a bf16 run's stem with its bn in backward in two passes, composed of this
 * backend's own operations in the order the replica runs them apart. The whole 3×3
 * convolutions are the Winograd files' (tdm-backend-cpu-winograd.c). The front door
 * checked the shapes.
 */
#include "tdm-backend-cpu-private.h"
#include "tdm-bf16.h"
#include "tdm-conv-columns.h"

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
tdm_cpu_col2im_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *col, int n,
                    int h, int w, int c, int kh, int kw, int pad, int stride)
{
  /* Written: pixels no window reads stay zero. Each pixel sums its taps in the order
   * of the rows, then of the taps, in float32; a bf16 dx gets each image's sums
   * rounded once, as to_bf16 rounds. */
  const size_t image = (size_t)h * w * c;
  float *sums = dx_type == TDM_DTYPE_BF16 ? g_new(float, image) : NULL;
  const int oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
  const uint16_t *r = col;
  for (int im = 0; im < n; im++) {
    float *xs = sums != NULL ? sums : (float *)dx + (size_t)im * image;
    memset(xs, 0, sizeof(float) * image);
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
    uint16_t *out16 = sums != NULL ? (uint16_t *)dx + (size_t)im * image : NULL;
    for (size_t i = 0; out16 != NULL && i < image; i++)
      out16[i] = tdm_bf16_round(sums[i]);
  }
  g_free(sums);
}

/* The stem's two passes (tdm_backend_stem_bn_sums(), _dx_wgrad()): the steps the replica
 * runs without them (tdm-replica-backward.c's stem_output_again(), bn_backward(), the
 * stem's tdm_replica_conv_backward()), each the same call, so the same bits. Taken where
 * the replica's own composition of the stem is the staged float32 way
 * (tdm-replica-conv.c): a bf16 run, a float32 image, columns (not a 1×1 conv of stride 1
 * and no padding) and more outputs than the reduction, where bf16 columns are not taken
 * (tdm_replica_conv_bf16()): the CIFAR stem, 27 taps for 64 outputs. The columns hold
 * the whole batch (a CPU's bound is 0, tdm_conv_columns_bound()), the float32 stage of
 * the output after them: the workspace's need of those steps, no more. */

gboolean
tdm_cpu_stem_bn_takes(TdmBackend *b, const TdmConvShape *s, TdmDtype x_type, size_t *work_bytes)
{
  int k = s->c * s->kernel * s->kernel;
  if (b->precision != TDM_PRECISION_BF16 || x_type != TDM_DTYPE_F32 || s->out_c <= k ||
      (s->kernel == 1 && s->stride == 1 && s->pad == 0))
    return FALSE;
  size_t rows = (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s);
  *work_bytes = tdm_conv_staged_stage_at(s, FALSE, 0) + rows * s->out_c * sizeof(float);
  return TRUE;
}

/* The stem's output as the replica's forward writes it (float32 columns into work, the
 * product staged after them, rounded once into spare); the columns and the stage's
 * place in *cols and *stage. */
static void
stem_output16(TdmBackend *b, const TdmStemBn *a, float **cols, float **stage)
{
  const TdmConvShape *s = &a->shape;
  int rows = s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s), k = s->c * s->kernel * s->kernel;
  *cols = a->work;
  *stage = (float *)((char *)a->work + tdm_conv_staged_stage_at(s, FALSE, 0));
  tdm_cpu_im2col(b, *cols, a->x, s->n, s->h, s->w, s->c, s->kernel, s->kernel, s->pad,
                 s->stride);
  tdm_cpu_gemm(b, false, true, rows, s->out_c, k, 1.0f, *cols, k, a->w, k, 0.0f, *stage,
               s->out_c);
  tdm_cpu_to_bf16(b, a->spare, *stage, (size_t)rows * s->out_c);
}

void
tdm_cpu_stem_bn_sums(TdmBackend *b, const TdmStemBn *a, float *dgamma, float *dbeta)
{
  const TdmConvShape *s = &a->shape;
  float *cols, *stage;
  stem_output16(b, a, &cols, &stage);
  tdm_cpu_bn_backward_sums(b, dgamma, dbeta, a->dy, TDM_DTYPE_BF16, a->spare, TDM_DTYPE_BF16,
                           a->mean, a->invstd, a->gamma, a->beta, a->relu,
                           s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s), s->out_c);
}

void
tdm_cpu_stem_bn_dx_wgrad(TdmBackend *b, const TdmStemBn *a, const float *sum_dgamma,
                         const float *sum_dbeta, float inv_count, float *dw)
{
  const TdmConvShape *s = &a->shape;
  int rows = s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s), k = s->c * s->kernel * s->kernel;
  float *cols, *stage;
  stem_output16(b, a, &cols, &stage);
  /* The bn's input gradient over its input, then widened into the stage for the weight
   * gradient's product against the same columns. */
  tdm_cpu_bn_backward_dx_bf16(b, a->spare, a->dy, TDM_DTYPE_BF16, a->spare, TDM_DTYPE_BF16,
                              a->mean, a->invstd, a->gamma, a->beta, a->relu, sum_dgamma,
                              sum_dbeta, inv_count, rows, s->out_c);
  tdm_cpu_from_bf16(b, stage, a->spare, (size_t)rows * s->out_c);
  tdm_cpu_gemm(b, true, false, s->out_c, k, rows, 1.0f, stage, s->out_c, cols, k, 0.0f, dw, k);
}
