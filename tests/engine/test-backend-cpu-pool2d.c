/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-pool2d.c — part of test-backend-cpu: the max pool of any window, stride
 * and padding (maxpool2d) against a reference written here from its definition. Its
 * argmax holds, per output, where the first maximum lies: in a byte, where the window has
 * at most 256 positions, its position in the window, ky·k + kx; in an int32 beyond (a
 * 17×17 window has 289), the input's position in the sample's plane, iy·w + ix, which
 * fits where k·k may not. The reference finds the same place by scanning the window in
 * row order, and the backward's gradient at an input is the sum of dy over the outputs
 * whose argmax names it, in the outputs' row order. Ties are made on purpose (inputs
 * drawn from a few values), so "the first maximum" is what is checked, and the padding's
 * positions are never named. Float32 both ways: the sums of a few float32 values in the
 * same order are the same bits.
 */
#include "test-backend-cpu.h"

/* The window position ky·k + kx of output (oy, ox, ch) of sample im that the definition
 * picks, and its value: the first strictly greater value in row order, padding skipped. */
static int
first_maximum(const float *x, TdmPool2d g, int im, int oy, int ox, int ch, float *best)
{
  int at = -1;
  for (int ky = 0; ky < g.k; ky++)
    for (int kx = 0; kx < g.k; kx++) {
      int iy = oy * g.s - g.p + ky, ix = ox * g.s - g.p + kx;
      if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w)
        continue;
      float v = x[(((size_t)im * g.h + iy) * g.w + ix) * g.c + ch];
      if (at < 0 || v > *best) {
        *best = v;
        at = ky * g.k + kx;
      }
    }
  return at;
}

static int
argmax_at(const void *argmax, int k, size_t o)
{
  if (tdm_pool2d_argmax_size(k) == sizeof(uint8_t))
    return ((const uint8_t *)argmax)[o];
  return ((const int32_t *)argmax)[o];
}

static void
check_geometry(TdmBackend *b, TdmPool2d g)
{
  g.oh = (g.h + 2 * g.p - g.k) / g.s + 1;
  g.ow = (g.w + 2 * g.p - g.k) / g.s + 1;
  g_assert_true(tdm_pool2d_valid(g));
  size_t nx = (size_t)g.n * g.h * g.w * g.c, ny = (size_t)g.n * g.oh * g.ow * g.c;
  size_t asize = tdm_pool2d_argmax_size(g.k);
  g_assert_cmpuint(asize, ==, g.k * g.k <= 256 ? 1 : 4);
  float *x = dev_floats(b, nx), *y = dev_floats(b, ny), *dy = dev_floats(b, ny);
  float *dx = dev_floats(b, nx);
  void *argmax = dev_alloc(b, ny * asize);
  /* Few distinct values: many ties within a window. */
  for (size_t i = 0; i < nx; i++)
    x[i] = (float)g_test_rand_int_range(-3, 4);
  fill_random(dy, ny, -1.0, 1.0);
  poison(y, ny);
  poison(dx, nx);
  tdm_backend_maxpool2d_forward(b, y, TDM_DTYPE_F32, argmax, x, TDM_DTYPE_F32, g);
  tdm_backend_maxpool2d_backward(b, dx, TDM_DTYPE_F32, dy, TDM_DTYPE_F32, argmax, g);
  g_assert_true(tdm_backend_check(b, NULL));
  g_autofree float *want_dx = g_new0(float, nx);
  for (int im = 0; im < g.n; im++)
    for (int oy = 0; oy < g.oh; oy++)
      for (int ox = 0; ox < g.ow; ox++)
        for (int ch = 0; ch < g.c; ch++) {
          size_t o = (((size_t)im * g.oh + oy) * g.ow + ox) * g.c + ch;
          float best = 0.0f;
          int at = first_maximum(x, g, im, oy, ox, ch, &best);
          g_assert_cmpint(at, >=, 0);
          int iy = oy * g.s - g.p + at / g.k, ix = ox * g.s - g.p + at % g.k;
          g_assert_cmpint(argmax_at(argmax, g.k, o), ==, asize == 1 ? at : iy * g.w + ix);
          g_assert_cmpfloat(y[o], ==, best);
          want_dx[(((size_t)im * g.h + iy) * g.w + ix) * g.c + ch] += dy[o];
        }
  /* The outputs covering an input, in row order, are the order of the loop above. */
  g_assert_cmpmem(dx, nx * sizeof(float), want_dx, nx * sizeof(float));
  tdm_backend_release(b, x);
  tdm_backend_release(b, y);
  tdm_backend_release(b, dy);
  tdm_backend_release(b, dx);
  tdm_backend_release(b, argmax);
}

/* ResNet's stem pool (3×3, stride 2, padding 1), an overlapping window of stride 1, one
 * of even size, a window of 16 × 16 = 256 positions (the last that fits a byte) and one
 * of 17 × 17 (int32), both wider than their input. */
static void
test_maxpool2d_window_argmax(void)
{
  TdmBackend *b = new_backend();
  static const TdmPool2d shapes[] = {
    {.n = 2, .h = 9, .w = 8, .c = 5, .k = 3, .s = 2, .p = 1},
    {.n = 1, .h = 7, .w = 7, .c = 3, .k = 3, .s = 1, .p = 1},
    {.n = 2, .h = 6, .w = 5, .c = 8, .k = 2, .s = 1, .p = 1},
    {.n = 1, .h = 12, .w = 10, .c = 2, .k = 16, .s = 3, .p = 8},
    {.n = 1, .h = 11, .w = 13, .c = 3, .k = 17, .s = 2, .p = 8},
  };
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++)
    check_geometry(b, shapes[i]);
  free_backend(b);
}

void
test_backend_cpu_add_pool2d(void)
{
  g_test_add_func("/backend-cpu/maxpool2d-window-argmax", test_maxpool2d_window_argmax);
}
