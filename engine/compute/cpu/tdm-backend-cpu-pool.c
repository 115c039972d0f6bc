/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-pool.c — the CPU backend's pools whose windows tile the input (max,
 * with a conv's bias and ReLU folded in, from tdm-cpu-kernels.c; average) and the
 * global pools, over NHWC data; any window, stride and padding is -pool2d.c's. The
 * front door checked the shapes.
 */
#include "tdm-backend-cpu-private.h"
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
