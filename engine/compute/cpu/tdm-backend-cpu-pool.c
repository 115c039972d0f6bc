/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-pool.c — the CPU backend's pools whose windows tile the input (max,
 * with a conv's bias and ReLU folded in, from tdm-cpu-kernels.c; average) and the
 * global pools, over NHWC data; the max pool of a bf16 run's stored tensors (a bn's
 * output normalized as it is read, each value rounded to bf16 before the max); any
 * window, stride and padding is -pool2d.c's. The front door checked the shapes.
 */
#include "tdm-backend-cpu-private.h"
#include "tdm-bf16.h"
#include <string.h>

void
tdm_cpu_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                        const float *bias, bool relu, int n, int h, int w, int c, int k)
{
  tdm_cpu_kernels_of(b)->maxpool_forward(y, argmax, x, bias, relu, n, h, w, c, k);
}

void
tdm_cpu_maxpool_backward(TdmBackend *b, float *dx, float *dbias, const float *dy,
                         const int32_t *argmax, const float *y, int n, int h, int w, int c,
                         int k)
{
  tdm_cpu_kernels_of(b)->maxpool_backward(dx, dbias, dy, argmax, y, n, h, w, c, k);
}

/* Element e of x (of x_type) as float32: widened exactly where bf16. */
static inline float
value_at(const void *x, TdmDtype x_type, size_t e)
{
  return x_type == TDM_DTYPE_F32 ? ((const float *)x)[e]
                                 : tdm_bf16_value(((const uint16_t *)x)[e]);
}

void
tdm_cpu_maxpool_forward_bf16(TdmBackend *b, uint16_t *y, int32_t *argmax, const void *x,
                             TdmDtype x_type, const float *mean, const float *invstd,
                             const float *gamma, const float *beta, bool relu, int n, int h,
                             int w, int c, int k)
{
  const int oh = h / k, ow = w / k;
  /* bn_forward's per-channel scale and shift (tdm_cpu_bn_affine(): its bits). */
  float *scale = NULL, *shift = NULL;
  if (mean != NULL) {
    scale = g_new(float, 2 * (size_t)c);
    shift = scale + c;
    tdm_cpu_bn_affine(scale, shift, mean, invstd, gamma, beta, c);
  }
  for (int im = 0; im < n; im++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++) {
        const size_t o = (((size_t)im * oh + oy) * ow + ox) * c;
        for (int ch = 0; ch < c; ch++) {
          uint16_t best = 0;
          int32_t at = -1;
          for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
              const size_t e = (((size_t)im * h + oy * k + ky) * w + ox * k + kx) * c + ch;
              float v = value_at(x, x_type, e);
              if (scale != NULL) {
                v = v * scale[ch] + shift[ch];
                v = relu && v < 0.0f ? 0.0f : v;
              }
              const uint16_t r = tdm_bf16_round(v);
              if (at < 0 || tdm_bf16_value(r) > tdm_bf16_value(best)) {
                best = r;
                at = (int32_t)e;
              }
            }
          y[o + ch] = best;
          argmax[o + ch] = at;
        }
      }
  g_free(scale);
}

void
tdm_cpu_maxpool_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                              TdmDtype dy_type, const int32_t *argmax, int n, int h, int w,
                              int c, int k)
{
  const size_t inputs = (size_t)n * h * w * c;
  const size_t outputs = (size_t)n * (h / k) * (w / k) * c;
  /* Each input is in one window at most (stride = k): a copy, rounded where the types
   * differ, at the chosen input, zero elsewhere. */
  memset(dx, 0, inputs * tdm_dtype_size(dx_type));
  for (size_t o = 0; o < outputs; o++) {
    const float g = value_at(dy, dy_type, o);
    if (dx_type == TDM_DTYPE_F32)
      ((float *)dx)[argmax[o]] = g;
    else
      ((uint16_t *)dx)[argmax[o]] = tdm_bf16_round(g);
  }
}

void
tdm_cpu_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int h, int w, int c,
                        int k)
{
  const int oh = h / k, ow = w / k;
  const float inv = 1.0f / (float)(k * k);
  for (int im = 0; im < n; im++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++) {
        float *restrict yo = y + (((size_t)im * oh + oy) * ow + ox) * c;
        memset(yo, 0, sizeof(float) * c);
        for (int ky = 0; ky < k; ky++)
          for (int kx = 0; kx < k; kx++) {
            const float *restrict xi =
              x + (((size_t)im * h + oy * k + ky) * w + ox * k + kx) * c;
            for (int ch = 0; ch < c; ch++)
              yo[ch] += xi[ch];
          }
        for (int ch = 0; ch < c; ch++)
          yo[ch] *= inv;
      }
}

void
tdm_cpu_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n, int h, int w, int c,
                         int k)
{
  const int oh = h / k, ow = w / k;
  const float inv = 1.0f / (float)(k * k);
  for (int im = 0; im < n; im++)
    for (int iy = 0; iy < h; iy++)
      for (int ix = 0; ix < w; ix++) {
        float *restrict d = dx + (((size_t)im * h + iy) * w + ix) * c;
        const int oy = iy / k, ox = ix / k;
        if (oy >= oh || ox >= ow) {
          memset(d, 0, sizeof(float) * c);
          continue;
        }
        const float *restrict g = dy + (((size_t)im * oh + oy) * ow + ox) * c;
        for (int ch = 0; ch < c; ch++)
          d[ch] = g[ch] * inv;
      }
}

void
tdm_cpu_global_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int pixels,
                               int c)
{
  const float inv = 1.0f / (float)pixels;
  for (int im = 0; im < n; im++) {
    float *restrict yo = y + (size_t)im * c;
    memset(yo, 0, sizeof(float) * c);
    for (int p = 0; p < pixels; p++) {
      const float *restrict xi = x + ((size_t)im * pixels + p) * c;
      for (int ch = 0; ch < c; ch++)
        yo[ch] += xi[ch];
    }
    for (int ch = 0; ch < c; ch++)
      yo[ch] *= inv;
  }
}

void
tdm_cpu_global_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n, int pixels,
                                int c)
{
  const float inv = 1.0f / (float)pixels;
  for (int im = 0; im < n; im++) {
    const float *restrict g = dy + (size_t)im * c;
    for (int p = 0; p < pixels; p++) {
      float *restrict d = dx + ((size_t)im * pixels + p) * c;
      for (int ch = 0; ch < c; ch++)
        d[ch] = g[ch] * inv;
    }
  }
}

void
tdm_cpu_global_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x, int n,
                               int pixels, int c)
{
  for (int im = 0; im < n; im++) {
    float *restrict yo = y + (size_t)im * c;
    int32_t *restrict ao = argmax + (size_t)im * c;
    const size_t base = (size_t)im * pixels * c;
    for (int ch = 0; ch < c; ch++) {
      yo[ch] = x[base + ch];
      ao[ch] = (int32_t)(base + ch);
    }
    for (int p = 1; p < pixels; p++) {
      const size_t at = base + (size_t)p * c;
      for (int ch = 0; ch < c; ch++)
        if (x[at + ch] > yo[ch]) {
          yo[ch] = x[at + ch];
          ao[ch] = (int32_t)(at + ch);
        }
    }
  }
}

void
tdm_cpu_global_maxpool_backward(TdmBackend *b, float *dx, const float *dy,
                                const int32_t *argmax, int n, int pixels, int c)
{
  memset(dx, 0, sizeof(float) * (size_t)n * pixels * c);
  for (size_t i = 0; i < (size_t)n * c; i++)
    dx[argmax[i]] = dy[i];
}
