/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-pool2d.c — pooling with any window, stride and padding (ResNet's
 * 3×3 stride-2 max pool of padding 1), on the CPU. Plain loops: these layers are a small share of a network's work. The backward
 * passes gather (each input sums the outputs that cover it, in a fixed order) rather
 * than scatter, as the CUDA kernels do, so both give the same sums.
 */
#include "tdm-backend-cpu-private.h"
#include "tdm-bf16.h"

#include <math.h>

/* The rows (or columns) of a window starting at input row `top` that fall in the input
 * of `size` rows: [*first, *last). Padding holds nothing to visit, so a window far
 * wider than its input costs what the input does. */
static void
inside(int top, int k, int size, int *first, int *last)
{
  *first = MAX(0, -top);
  *last = (int)MIN((gint64)k, (gint64)size - top);
}

/* A window's area, K² in float: K may be large enough that K² overflows an int. */
static float
window_area(int k)
{
  return (float)k * (float)k;
}

/* The outputs whose windows cover input row i: [*first, *last], possibly empty. */
static void
covering(int i, int k, int s, int p, int outs, int *first, int *last)
{
  int hi = (i + p) / s;                 /* o·s − p ≤ i */
  int lo_num = i + p - k + 1;           /* o·s − p + k > i */
  int lo = lo_num <= 0 ? 0 : (lo_num + s - 1) / s;
  *first = lo;
  *last = MIN(hi, outs - 1);
}

/* Element o of an argmax of windows of k×k (tdm_pool2d_argmax_size()), set or read. */
static void
argmax_set(void *argmax, int k, size_t o, int32_t at)
{
  if (tdm_pool2d_argmax_size(k) == sizeof(uint8_t))
    ((uint8_t *)argmax)[o] = (uint8_t)at;
  else
    ((int32_t *)argmax)[o] = at;
}

/* What argmax holds for input (iy, ix), at (ky, kx) in its window: the position in the
 * window, ky·k + kx, in a byte; in the int32 form the input's position in the sample's
 * plane, iy·w + ix, which fits where k·k may not (a window of a million: its part inside
 * the input is all that is visited). */
static int32_t
window_code(int k, int w, int ky, int kx, int iy, int ix)
{
  return tdm_pool2d_argmax_size(k) == sizeof(uint8_t) ? ky * k + kx : iy * w + ix;
}

static int32_t
argmax_get(const void *argmax, int k, size_t o)
{
  if (tdm_pool2d_argmax_size(k) == sizeof(uint8_t))
    return ((const uint8_t *)argmax)[o];
  return ((const int32_t *)argmax)[o];
}

/* The max pool of x (normalized by scale and shift, then ReLU'd where relu, when scale
 * is given; each value rounded to bf16 before the comparison where round) into y and
 * argmax (the position within the window), the first of equal values winning. */
static void
maxpool2d_forward(void *y, TdmDtype y_type, void *argmax, const void *x, TdmDtype x_type,
                  const float *scale, const float *shift, bool relu, bool round, TdmPool2d g)
{
  const size_t sample = (size_t)g.h * g.w * g.c;
  const float *xf = x_type == TDM_DTYPE_F32 ? x : NULL;
  const uint16_t *xh = x_type == TDM_DTYPE_BF16 ? x : NULL;
  for (int im = 0; im < g.n; im++)
    for (int oy = 0; oy < g.oh; oy++)
      for (int ox = 0; ox < g.ow; ox++)
        for (int ch = 0; ch < g.c; ch++) {
          float best = -INFINITY;
          int32_t at = -1;
          int ky0, ky1, kx0, kx1;
          inside(oy * g.s - g.p, g.k, g.h, &ky0, &ky1);
          inside(ox * g.s - g.p, g.k, g.w, &kx0, &kx1);
          for (int ky = ky0; ky < ky1; ky++) {
            int iy = oy * g.s - g.p + ky;
            for (int kx = kx0; kx < kx1; kx++) {
              int ix = ox * g.s - g.p + kx;
              int32_t idx = (int32_t)(((size_t)iy * g.w + ix) * g.c + ch);
              size_t e = im * sample + (size_t)idx;
              float v = xf != NULL ? xf[e] : tdm_bf16_value(xh[e]);
              if (scale != NULL) {
                v = v * scale[ch] + shift[ch];
                v = relu && v < 0.0f ? 0.0f : v;
              }
              if (round)
                v = tdm_bf16_value(tdm_bf16_round(v));
              if (at < 0 || v > best) {
                best = v;
                at = window_code(g.k, g.w, ky, kx, iy, ix);
              }
            }
          }
          size_t o = (((size_t)im * g.oh + oy) * g.ow + ox) * g.c + ch;
          if (y_type == TDM_DTYPE_F32)
            ((float *)y)[o] = best;
          else
            ((uint16_t *)y)[o] = tdm_bf16_round(best);
          argmax_set(argmax, g.k, o, at);
        }
}

void
tdm_cpu_maxpool2d_forward(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                          const void *x, TdmDtype x_type, TdmPool2d g)
{
  maxpool2d_forward(y, y_type, argmax, x, x_type, NULL, NULL, false, false, g);
}

void
tdm_cpu_maxpool2d_forward_bn(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                             const void *x, TdmDtype x_type, const float *mean,
                             const float *invstd, const float *gamma, const float *beta,
                             bool relu, TdmPool2d g)
{
  /* bn_forward_bf16's per-channel scale and shift (tdm_cpu_bn_affine(): its bits), each
   * value rounded to bf16 as bn_forward_bf16 stores it (a bf16 value: either output
   * type holds the maximum exactly). */
  float *scale = NULL, *shift = NULL;
  if (mean != NULL) {
    scale = g_new(float, 2 * (size_t)g.c);
    shift = scale + g.c;
    tdm_cpu_bn_affine(scale, shift, mean, invstd, gamma, beta, g.c);
  }
  maxpool2d_forward(y, y_type, argmax, x, x_type, scale, shift, relu, true, g);
  g_free(scale);
}

void
tdm_cpu_maxpool2d_backward(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                           TdmDtype dy_type, const void *argmax, TdmPool2d g)
{
  float *dxf = dx_type == TDM_DTYPE_F32 ? dx : NULL;
  uint16_t *dxh = dx_type == TDM_DTYPE_BF16 ? dx : NULL;
  const float *dyf = dy_type == TDM_DTYPE_F32 ? dy : NULL;
  const uint16_t *dyh = dy_type == TDM_DTYPE_BF16 ? dy : NULL;
  for (int im = 0; im < g.n; im++)
    for (int iy = 0; iy < g.h; iy++) {
      int y0, y1;
      covering(iy, g.k, g.s, g.p, g.oh, &y0, &y1);
      for (int ix = 0; ix < g.w; ix++) {
        int x0, x1;
        covering(ix, g.k, g.s, g.p, g.ow, &x0, &x1);
        for (int ch = 0; ch < g.c; ch++) {
          int32_t idx = (int32_t)(((size_t)iy * g.w + ix) * g.c + ch);
          float sum = 0.0f;
          for (int oy = y0; oy <= y1; oy++)
            for (int ox = x0; ox <= x1; ox++) {
              size_t o = (((size_t)im * g.oh + oy) * g.ow + ox) * g.c + ch;
              /* This input's position within output o's window. */
              int32_t within = window_code(g.k, g.w, iy - (oy * g.s - g.p),
                                           ix - (ox * g.s - g.p), iy, ix);
              if (argmax_get(argmax, g.k, o) == within)
                sum += dyf != NULL ? dyf[o] : tdm_bf16_value(dyh[o]);
            }
          size_t at = (size_t)im * g.h * g.w * g.c + idx;
          if (dxf != NULL)
            dxf[at] = sum;
          else
            dxh[at] = tdm_bf16_round(sum);
        }
      }
    }
}

void
tdm_cpu_avgpool2d_forward(TdmBackend *b, float *y, const float *x, TdmPool2d g)
{
  const float area = window_area(g.k);
  for (int im = 0; im < g.n; im++)
    for (int oy = 0; oy < g.oh; oy++)
      for (int ox = 0; ox < g.ow; ox++)
        for (int ch = 0; ch < g.c; ch++) {
          float sum = 0.0f;
          int ky0, ky1, kx0, kx1;
          inside(oy * g.s - g.p, g.k, g.h, &ky0, &ky1);
          inside(ox * g.s - g.p, g.k, g.w, &kx0, &kx1);
          for (int ky = ky0; ky < ky1; ky++) {
            int iy = oy * g.s - g.p + ky;
            for (int kx = kx0; kx < kx1; kx++) {
              int ix = ox * g.s - g.p + kx;
              sum += x[(((size_t)im * g.h + iy) * g.w + ix) * g.c + ch];
            }
          }
          y[(((size_t)im * g.oh + oy) * g.ow + ox) * g.c + ch] = sum / area;
        }
}

void
tdm_cpu_avgpool2d_backward(TdmBackend *b, float *dx, const float *dy, TdmPool2d g)
{
  const float area = window_area(g.k);
  for (int im = 0; im < g.n; im++)
    for (int iy = 0; iy < g.h; iy++) {
      int y0, y1;
      covering(iy, g.k, g.s, g.p, g.oh, &y0, &y1);
      for (int ix = 0; ix < g.w; ix++) {
        int x0, x1;
        covering(ix, g.k, g.s, g.p, g.ow, &x0, &x1);
        for (int ch = 0; ch < g.c; ch++) {
          float sum = 0.0f;
          for (int oy = y0; oy <= y1; oy++)
            for (int ox = x0; ox <= x1; ox++)
              sum += dy[(((size_t)im * g.oh + oy) * g.ow + ox) * g.c + ch];
          dx[(((size_t)im * g.h + iy) * g.w + ix) * g.c + ch] = sum / area;
        }
      }
    }
}
