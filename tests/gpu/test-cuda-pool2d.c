/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-pool2d.c — the CUDA backend's pools with any window, stride and padding and
 * the stem's input, against the CPU backend (suite gpu): max pools (forward, the argmax
 * exactly: each output's window position in a byte, or for a 17×17 window its input's
 * position in the plane in an int32, from a float32 or a bf16 input into a float32 or a
 * bf16 output, backward through them, from a float32 or a bf16 output gradient into
 * either), average pools counting the padding, on ResNet's 3×3 stride-2 padding-1 stem
 * pool and odd shapes whose windows overlap and leave edges, with channel counts that
 * take 8, 4 or 1 channels a thread and buffers that start off the vectors' boundaries;
 * channel_affine over 1 and 3 channels; to_bf16_padded, the stem's input for cuDNN's
 * 8-channel plan; the max pool of a bn's output normalized as it is read (the CPU's bits).
 * Inputs are fresh random numbers (g_test_rand_*); GPU outputs are poisoned with NaN
 * first, so an element left unwritten fails. Pools give the CPU's bits (the maximum of
 * the same values, the same sums in the same order), also checked by ||gpu − cpu|| /
 * ||cpu|| ≤ 1e-6, which channel_affine is held to (a fused multiply-add against the
 * CPU's two roundings). Then a whole small torchvision-style ResNet (7×7 stride-2 stem,
 * pool3s2p1, a basic and a bottleneck block) trained a few steps on the GPU and on the
 * CPU, with the inputs normalized, started from a state_dict with the stem frozen: the
 * parameters agree (1e-4) and the frozen ones did not move on either; again with photo
 * augmentation (crop, jitter, erasing), the normalization then in the gather's pass.
 * Skips without a CUDA GPU.
 */
#include "tdm-backend.h"
#include "tdm-bf16.h"
#include "tdm-build-config.h"
#if TDM_HAVE_CUDA
#include "tdm-backend-cuda.h"
#include "tdm-kernels.h"
#endif
#include "tdm-checkpoint.h"
#include "tdm-config.h"
#include "tdm-network.h"
#include "tdm-trainer.h"

#include <glib/gstdio.h>

#include <math.h>
#include <string.h>

#if TDM_HAVE_CUDA

static TdmBackend *cpu;
static TdmBackend *gpu;

static gboolean
have_gpu(void)
{
  if (gpu == NULL) {
    g_test_skip("no CUDA GPU");
    return FALSE;
  }
  return TRUE;
}

static void
assert_ok(TdmBackend *b)
{
  g_autoptr(GError) error = NULL;
  if (!tdm_backend_check(b, &error))
    g_error("%s", error->message);
}

static float *
random_floats(size_t n)
{
  float *p = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    p[i] = (float)g_test_rand_double_range(-2.0, 2.0);
  return p;
}

static void *
on_gpu(const void *host, size_t bytes)
{
  g_autoptr(GError) error = NULL;
  void *d = tdm_backend_alloc(gpu, bytes, &error);
  g_assert_no_error(error);
  if (host != NULL)
    tdm_backend_upload(gpu, d, host, bytes);
  return d;
}

static void
check_close(const char *what, const float *dev, const float *ref, size_t n)
{
  g_autofree float *out = g_new(float, n);
  tdm_backend_download(gpu, out, dev, n * sizeof(float));
  assert_ok(gpu);
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(out[i]))
      g_error("%s: element %zu is %g (reference %g): not written", what, i, out[i], ref[i]);
    num += ((double)out[i] - ref[i]) * ((double)out[i] - ref[i]);
    den += (double)ref[i] * ref[i];
  }
  double err = sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
  g_test_message("%s: relative error %.3g", what, err);
  g_assert_cmpfloat(err, <=, 1e-6);
}

static TdmPool2d
geometry(int n, int h, int w, int c, int k, int s, int p)
{
  TdmPool2d g = {n, h, w, c, k, s, p, (h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1};
  g_assert_true(tdm_pool2d_valid(g));
  return g;
}

static const int cases[][7] = {
  /* n, h, w, c, k, s, p */
  {4, 112, 112, 64, 3, 2, 1},   /* ResNet's stem pool: 8 channels a thread */
  {3, 9, 8, 5, 3, 2, 1},
  {2, 7, 6, 3, 3, 1, 1},        /* avg3s1p1 */
  {2, 5, 5, 7, 2, 1, 1},
  {1, 11, 13, 2, 5, 3, 2},
  {2, 9, 11, 17, 3, 2, 1},      /* odd channels: one a thread */
  {3, 10, 9, 12, 3, 2, 1},      /* 4 channels a thread */
  {2, 8, 8, 24, 2, 2, 0},       /* 8 a thread, windows that tile */
  {2, 6, 7, 16, 4, 1, 2},       /* 8 a thread, up to 16 windows over an input */
  {1, 12, 10, 8, 16, 3, 8},     /* 256 window positions: the last a byte argmax holds */
  {1, 11, 13, 8, 17, 2, 8},     /* 289 window positions: an int32 argmax */
};

/* Device buffers `shift` elements past an allocation's start: shift 0 lets the kernels
 * take 8 channels a thread where c allows, 4 moves bf16 to 8-byte boundaries (4 a
 * thread there), 1 breaks every vector access (one a thread). */
typedef struct {
  void *base;
  void *at;
} Shifted;

static Shifted
shifted(const void *host, size_t count, size_t size, int shift)
{
  Shifted d;
  d.base = on_gpu(NULL, (count + shift) * size);
  d.at = (char *)d.base + (size_t)shift * size;
  if (host != NULL)
    tdm_backend_upload(gpu, d.at, host, count * size);
  return d;
}

static Shifted
poisoned_shifted(size_t count, int shift)
{
  g_autofree float *nan = g_new(float, count);
  for (size_t i = 0; i < count; i++)
    nan[i] = NAN;
  return shifted(nan, count, sizeof(float), shift);
}

static void
check_bits(const char *what, const void *dev, const void *ref, size_t bytes)
{
  g_autofree void *out = g_malloc(bytes);
  tdm_backend_download(gpu, out, dev, bytes);
  assert_ok(gpu);
  g_assert_cmpmem(out, bytes, ref, bytes);
  g_test_message("%s: the CPU's bits", what);
}

static void
maxpool2d_case(TdmPool2d g, int shift)
{
  size_t nx = (size_t)g.n * g.h * g.w * g.c, ny = (size_t)g.n * g.oh * g.ow * g.c;
  g_test_message("max pool %d×%d×%d×%d k=%d s=%d p=%d, buffers %d elements in", g.n, g.h,
                 g.w, g.c, g.k, g.s, g.p, shift);
  g_autofree float *x = random_floats(nx), *dy = random_floats(ny);
  g_autofree float *y = g_new(float, ny), *dx = g_new(float, nx);
  /* The argmax: a window position in a byte a value, or for windows of more than 256
   * positions the input's position in the plane in an int32. */
  size_t as = tdm_pool2d_argmax_size(g.k);
  g_autofree void *argmax = g_malloc(ny * as);
  tdm_backend_maxpool2d_forward(cpu, y, TDM_DTYPE_F32, argmax, x, TDM_DTYPE_F32, g);
  tdm_backend_maxpool2d_backward(cpu, dx, TDM_DTYPE_F32, dy, TDM_DTYPE_F32, argmax, g);
  assert_ok(cpu);
  Shifted d_x = shifted(x, nx, sizeof(float), shift), d_dy = shifted(dy, ny, sizeof(float), shift);
  Shifted d_y = poisoned_shifted(ny, shift), d_dx = poisoned_shifted(nx, shift);
  Shifted d_argmax = shifted(NULL, ny, as, shift);
  tdm_backend_maxpool2d_forward(gpu, d_y.at, TDM_DTYPE_F32, d_argmax.at, d_x.at, TDM_DTYPE_F32,
                                g);
  tdm_backend_maxpool2d_backward(gpu, d_dx.at, TDM_DTYPE_F32, d_dy.at, TDM_DTYPE_F32,
                                 d_argmax.at, g);
  check_close("maxpool2d forward", d_y.at, y, ny);
  check_bits("maxpool2d forward's argmax", d_argmax.at, argmax, ny * as);
  check_close("maxpool2d backward", d_dx.at, dx, nx);
  /* The maximum of the same values and the same sums in the same order: the bits. */
  check_bits("maxpool2d forward, float32", d_y.at, y, ny * sizeof(float));
  check_bits("maxpool2d backward, float32", d_dx.at, dx, nx * sizeof(float));
  /* A bf16 run's block gradient: dy as bf16 (the CPU's float32 backward of the
   * widened values, the same sums). */
  g_autofree uint16_t *dy16 = g_new(uint16_t, ny);
  g_autofree float *dy_wide = g_new(float, ny), *dx16_ref = g_new(float, nx);
  for (size_t i = 0; i < ny; i++) {
    dy16[i] = tdm_bf16_round(dy[i]);
    dy_wide[i] = tdm_bf16_value(dy16[i]);
  }
  tdm_backend_maxpool2d_backward(cpu, dx16_ref, TDM_DTYPE_F32, dy_wide, TDM_DTYPE_F32, argmax,
                                 g);
  assert_ok(cpu);
  Shifted d_dy16 = shifted(dy16, ny, sizeof(uint16_t), shift);
  tdm_backend_maxpool2d_backward(gpu, d_dx.at, TDM_DTYPE_F32, d_dy16.at, TDM_DTYPE_BF16,
                                 d_argmax.at, g);
  check_close("maxpool2d backward, bf16 dy", d_dx.at, dx16_ref, nx);
  check_bits("maxpool2d backward, bf16 dy", d_dx.at, dx16_ref, nx * sizeof(float));
  /* And written as bf16 for the stem's bn: the CPU's bits (the same sums, rounded once),
   * from a bf16 dy and from a float32 one. */
  g_autofree uint16_t *ref16 = g_new(uint16_t, nx);
  tdm_backend_maxpool2d_backward(cpu, ref16, TDM_DTYPE_BF16, dy16, TDM_DTYPE_BF16, argmax, g);
  assert_ok(cpu);
  Shifted d_out16 = shifted(NULL, nx, sizeof(uint16_t), shift);
  tdm_backend_maxpool2d_backward(gpu, d_out16.at, TDM_DTYPE_BF16, d_dy16.at, TDM_DTYPE_BF16,
                                 d_argmax.at, g);
  check_bits("maxpool2d backward, bf16 dy into bf16", d_out16.at, ref16,
             nx * sizeof(uint16_t));
  tdm_backend_maxpool2d_backward(cpu, ref16, TDM_DTYPE_BF16, dy, TDM_DTYPE_F32, argmax, g);
  assert_ok(cpu);
  tdm_backend_maxpool2d_backward(gpu, d_out16.at, TDM_DTYPE_BF16, d_dy.at, TDM_DTYPE_F32,
                                 d_argmax.at, g);
  check_bits("maxpool2d backward, float32 dy into bf16", d_out16.at, ref16,
             nx * sizeof(uint16_t));
  /* The forward from a bf16 input (a bf16 run's stem bn output), into float32 and into
   * bf16 (the blocks' input), and from float32 into bf16: the CPU's bits and argmax. */
  g_autofree uint16_t *x16 = g_new(uint16_t, nx);
  for (size_t i = 0; i < nx; i++)
    x16[i] = tdm_bf16_round(x[i]);
  g_autofree float *yw_ref = g_new(float, ny);
  g_autofree uint16_t *y16_ref = g_new(uint16_t, ny);
  g_autofree void *argmax16 = g_malloc(ny * as);
  tdm_backend_maxpool2d_forward(cpu, yw_ref, TDM_DTYPE_F32, argmax16, x16, TDM_DTYPE_BF16, g);
  tdm_backend_maxpool2d_forward(cpu, y16_ref, TDM_DTYPE_BF16, argmax16, x16, TDM_DTYPE_BF16,
                                g);
  assert_ok(cpu);
  Shifted d_x16 = shifted(x16, nx, sizeof(uint16_t), shift);
  Shifted d_y16 = shifted(NULL, ny, sizeof(uint16_t), shift);
  tdm_backend_maxpool2d_forward(gpu, d_y.at, TDM_DTYPE_F32, d_argmax.at, d_x16.at,
                                TDM_DTYPE_BF16, g);
  check_bits("maxpool2d forward, bf16 into float32", d_y.at, yw_ref, ny * sizeof(float));
  check_bits("maxpool2d forward's argmax, bf16", d_argmax.at, argmax16, ny * as);
  tdm_backend_maxpool2d_forward(gpu, d_y16.at, TDM_DTYPE_BF16, d_argmax.at, d_x16.at,
                                TDM_DTYPE_BF16, g);
  check_bits("maxpool2d forward, bf16 into bf16", d_y16.at, y16_ref, ny * sizeof(uint16_t));
  check_bits("maxpool2d forward's argmax, bf16 into bf16", d_argmax.at, argmax16, ny * as);
  tdm_backend_maxpool2d_forward(cpu, y16_ref, TDM_DTYPE_BF16, argmax16, x, TDM_DTYPE_F32, g);
  assert_ok(cpu);
  tdm_backend_maxpool2d_forward(gpu, d_y16.at, TDM_DTYPE_BF16, d_argmax.at, d_x.at,
                                TDM_DTYPE_F32, g);
  check_bits("maxpool2d forward, float32 into bf16", d_y16.at, y16_ref, ny * sizeof(uint16_t));
  check_bits("maxpool2d forward's argmax, float32 into bf16", d_argmax.at, argmax16, ny * as);
  Shifted all[] = {d_x, d_dy, d_y, d_dx, d_argmax, d_dy16, d_out16, d_x16, d_y16};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(gpu, all[i].base);
}

static void
test_maxpool2d(void)
{
  if (!have_gpu())
    return;
  for (guint t = 0; t < G_N_ELEMENTS(cases); t++) {
    const int *k = cases[t];
    maxpool2d_case(geometry(k[0], k[1], k[2], k[3], k[4], k[5], k[6]), 0);
  }
}

/* The max pool of a training bn's output that is never written (the stem's bn, in a bf16
 * run): maxpool2d_forward_bn from the bn's input (float32 or bf16), its statistics and
 * parameters (a negative gamma in some channels), with and without the bn's ReLU and
 * without a bn, into float32 and bf16: the CPU's bits and argmax (bn-value.cuh computes
 * each normalized value as the CPU does, each rounded to bf16 before the max). */
static void
test_maxpool2d_bn(void)
{
  if (!have_gpu())
    return;
  for (guint t = 0; t < G_N_ELEMENTS(cases); t++) {
    const int *k = cases[t];
    TdmPool2d g = geometry(k[0], k[1], k[2], k[3], k[4], k[5], k[6]);
    int c = g.c;
    size_t nx = (size_t)g.n * g.h * g.w * c, ny = (size_t)g.n * g.oh * g.ow * c;
    g_autofree float *x = random_floats(nx), *stats = g_new(float, 4 * (size_t)c);
    g_autofree uint16_t *x16 = g_new(uint16_t, nx);
    for (size_t i = 0; i < nx; i++)
      x16[i] = tdm_bf16_round(x[i]);
    for (int ch = 0; ch < c; ch++) {
      stats[ch] = (float)g_test_rand_double_range(-0.5, 0.5);                 /* mean */
      stats[c + ch] = (float)g_test_rand_double_range(0.5, 2.0);              /* invstd */
      stats[2 * c + ch] = (float)g_test_rand_double_range(-1.5, 1.5);         /* gamma */
      stats[3 * c + ch] = (float)g_test_rand_double_range(-0.5, 0.5);         /* beta */
    }
    float *d_x = on_gpu(x, nx * sizeof(float));
    uint16_t *d_x16 = on_gpu(x16, nx * sizeof(uint16_t));
    float *d_stats = on_gpu(stats, 4 * (size_t)c * sizeof(float));
    void *d_y = on_gpu(NULL, ny * sizeof(float));
    size_t as = tdm_pool2d_argmax_size(g.k);
    void *d_argmax = on_gpu(NULL, ny * as);
    g_autofree float *y_ref = g_new(float, ny), *y = g_new(float, ny);
    g_autofree void *at_ref = g_malloc(ny * as), *at = g_malloc(ny * as);
    for (int x_bf16 = 0; x_bf16 < 2; x_bf16++)
      for (int bn = 0; bn < 3; bn++)
        for (int y_bf16 = 0; y_bf16 < 2; y_bf16++) {
          TdmDtype xt = x_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
          TdmDtype yt = y_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
          const float *s = bn > 0 ? stats : NULL;
          const float *ds = bn > 0 ? d_stats : NULL;
          tdm_backend_maxpool2d_forward_bn(cpu, y_ref, yt, at_ref, x_bf16 ? (void *)x16 : x, xt,
                                           s, s ? s + c : NULL, s ? s + 2 * c : NULL,
                                           s ? s + 3 * c : NULL, bn == 2, g);
          assert_ok(cpu);
          tdm_backend_maxpool2d_forward_bn(gpu, d_y, yt, d_argmax,
                                           x_bf16 ? (void *)d_x16 : (void *)d_x, xt, ds,
                                           ds ? ds + c : NULL, ds ? ds + 2 * c : NULL,
                                           ds ? ds + 3 * c : NULL, bn == 2, g);
          size_t bytes = ny * tdm_dtype_size(yt);
          tdm_backend_download(gpu, y, d_y, bytes);
          tdm_backend_download(gpu, at, d_argmax, ny * as);
          assert_ok(gpu);
          g_assert_cmpmem(y, bytes, y_ref, bytes);
          g_assert_cmpmem(at, ny * as, at_ref, ny * as);
        }
    g_test_message("maxpool2d_forward_bn %d×%d×%d k%d s%d p%d: the CPU's bits and argmax", g.h,
                   g.w, c, g.k, g.s, g.p);
    void *bufs[] = {d_x, d_x16, d_stats, d_y, d_argmax};
    for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
      tdm_backend_release(gpu, bufs[i]);
  }
}

/* The vector paths' fallbacks: the same results wherever the buffers start. */
static void
test_maxpool2d_unaligned(void)
{
  if (!have_gpu())
    return;
  const int shifts[] = {1, 4};
  for (guint i = 0; i < G_N_ELEMENTS(shifts); i++) {
    maxpool2d_case(geometry(2, 20, 18, 64, 3, 2, 1), shifts[i]);
    maxpool2d_case(geometry(2, 6, 7, 16, 4, 1, 2), shifts[i]);
    maxpool2d_case(geometry(2, 9, 11, 12, 3, 2, 1), shifts[i]);
  }
}

static void
avgpool2d_case(TdmPool2d g, int shift)
{
  size_t nx = (size_t)g.n * g.h * g.w * g.c, ny = (size_t)g.n * g.oh * g.ow * g.c;
  g_test_message("average pool %d×%d×%d×%d k=%d s=%d p=%d, buffers %d elements in", g.n, g.h,
                 g.w, g.c, g.k, g.s, g.p, shift);
  g_autofree float *x = random_floats(nx), *dy = random_floats(ny);
  g_autofree float *y = g_new(float, ny), *dx = g_new(float, nx);
  tdm_backend_avgpool2d_forward(cpu, y, x, g);
  tdm_backend_avgpool2d_backward(cpu, dx, dy, g);
  assert_ok(cpu);
  Shifted d_x = shifted(x, nx, sizeof(float), shift), d_dy = shifted(dy, ny, sizeof(float), shift);
  Shifted d_y = poisoned_shifted(ny, shift), d_dx = poisoned_shifted(nx, shift);
  tdm_backend_avgpool2d_forward(gpu, d_y.at, d_x.at, g);
  tdm_backend_avgpool2d_backward(gpu, d_dx.at, d_dy.at, g);
  check_close("avgpool2d forward", d_y.at, y, ny);
  check_close("avgpool2d backward", d_dx.at, dx, nx);
  /* The same sums in the same order, divided by the same area: the bits. */
  check_bits("avgpool2d forward", d_y.at, y, ny * sizeof(float));
  check_bits("avgpool2d backward", d_dx.at, dx, nx * sizeof(float));
  Shifted all[] = {d_x, d_dy, d_y, d_dx};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(gpu, all[i].base);
}

static void
test_avgpool2d(void)
{
  if (!have_gpu())
    return;
  for (guint t = 0; t < G_N_ELEMENTS(cases); t++) {
    const int *k = cases[t];
    TdmPool2d g = geometry(k[0], k[1], k[2], k[3], k[4], k[5], k[6]);
    avgpool2d_case(g, 0);
    avgpool2d_case(g, 1);
  }
}

static void
test_channel_affine(void)
{
  if (!have_gpu())
    return;
  for (int channels = 1; channels <= 3; channels += 2) {
    size_t rows = 224 * 224 * 3 + 7;
    TdmChannelAffine a = {.channels = channels};
    for (int ch = 0; ch < channels; ch++) {
      a.mul[ch] = (float)g_test_rand_double_range(2.0, 5.0);
      a.add[ch] = (float)g_test_rand_double_range(-2.0, 0.0);
    }
    size_t n = rows * channels;
    g_autofree float *x = random_floats(n);
    float *d_x = on_gpu(x, n * sizeof(float));
    tdm_backend_channel_affine(cpu, x, rows, a);
    tdm_backend_channel_affine(gpu, d_x, rows, a);
    check_close("channel_affine", d_x, x, n);
    tdm_backend_release(gpu, d_x);
  }
}

/* The stem's input as cuDNN's 8-channel plan reads it (kernels/elementwise.cu's
 * to_bf16_padded, called by the convolution engine): each value rounded to bf16 as the
 * CPU rounds it, the channels past c zero, whatever the vector width the kernel takes
 * (8 channels a thread for c_pad 8 at a 16-byte boundary, 4 for c_pad 4 or an 8-byte
 * one, else 1). */
static void
padded_case(size_t rows, int c, int c_pad, int shift)
{
  size_t n_in = rows * c, n_out = rows * c_pad;
  g_autofree float *x = random_floats(n_in);
  g_autofree uint16_t *ref = g_new(uint16_t, n_out);
  for (size_t r = 0; r < rows; r++)
    for (int ch = 0; ch < c_pad; ch++)
      ref[r * c_pad + ch] = ch < c ? tdm_bf16_round(x[r * c + ch]) : 0;
  float *d_x = on_gpu(x, n_in * sizeof(float));
  /* Poisoned: 0xffff is a NaN's bits, which no rounding of these inputs gives. */
  g_autofree uint16_t *poison = g_new(uint16_t, n_out + shift);
  memset(poison, 0xff, (n_out + shift) * sizeof(uint16_t));
  uint16_t *d_base = on_gpu(poison, (n_out + shift) * sizeof(uint16_t));
  g_assert_cmpint(tdm_k_to_bf16_padded(d_base + shift, d_x, rows, c, c_pad,
                                       tdm_backend_cuda_stream(gpu)), ==, cudaSuccess);
  g_autofree char *what = g_strdup_printf("to_bf16_padded %zu × %d → %d, %d in", rows, c,
                                          c_pad, shift);
  check_bits(what, d_base + shift, ref, n_out * sizeof(uint16_t));
  tdm_backend_release(gpu, d_x);
  tdm_backend_release(gpu, d_base);
}

static void
test_to_bf16_padded(void)
{
  if (!have_gpu())
    return;
  padded_case(2 * 224 * 224 + 3, 3, 8, 0);
  padded_case(1001, 3, 8, 4);
  padded_case(1001, 3, 8, 1);
  padded_case(777, 3, 4, 0);
  padded_case(777, 5, 6, 0);
  padded_case(513, 8, 8, 0);
  padded_case(513, 9, 16, 0);
}

#define ZOO_NET "conv16k7s2p3,bn,relu,pool3s2p1,basic16,bottleneck8s2,gap,fc10"

static float *
train_zoo(const char *device, const char *init, gboolean photo, size_t *count)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("synthetic");
  g_free(cfg->network);
  cfg->network = g_strdup(ZOO_NET);
  g_assert_true(tdm_config_set_devices(cfg, device, &error));
  cfg->batch = 32;
  cfg->max_steps = 6;
  cfg->seed = 3;
  /* Pinned: the GPU against the CPU in float32 (auto would be bf16 on a newer GPU). */
  cfg->precision = TDM_PRECISION_FP32;
  cfg->optimizer = TDM_OPTIMIZER_MOMENTUM;
  cfg->lr = 0.05;
  cfg->normalize = g_strdup("dataset");
  cfg->init_path = g_strdup(init);
  const char *frozen[] = {"conv1", "bn1", NULL};
  cfg->freeze = g_strdupv((char **)frozen);
  if (photo) {
    /* Photo augmentation: the normalization rides in the gather's pass. */
    cfg->crop_scale[0] = 0.35;
    cfg->crop_scale[1] = 1.0;
    cfg->jitter[0] = cfg->jitter[1] = cfg->jitter[2] = 0.2;
    cfg->erase = 0.5;
  }
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  return g_memdup2(params, *count * sizeof(float));
}

static void
zoo_network(gboolean photo)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(ZOO_NET, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  /* A state_dict of the stem: seeded values other than the run's own seed's. */
  g_autofree float *start = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 99, start);
  const TdmLayer *conv1 = &net->layers[0];
  g_autofree char *dir = g_dir_make_tmp("tandem-cuda-zoo-XXXXXX", NULL);
  g_autofree char *init = g_build_filename(dir, "stem.safetensors", NULL);
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_new();
  g_autofree float *torch = g_new(float, conv1->weight_count);
  tdm_layer_weight_to_torch(conv1, start + conv1->weight_offset, torch);
  gint64 shape[4] = {16, 1, 7, 7};
  tdm_checkpoint_add(ckpt, "conv1.weight", 4, shape, torch);
  g_assert_true(tdm_checkpoint_save(ckpt, init, &error));

  size_t n_cpu, n_gpu;
  g_autofree float *on_cpu = train_zoo("cpu", init, photo, &n_cpu);
  g_autofree float *on_cuda = train_zoo("cuda:0", init, photo, &n_gpu);
  g_assert_cmpuint(n_cpu, ==, n_gpu);
  double num = 0, den = 0;
  for (size_t i = 0; i < n_cpu; i++) {
    num += ((double)on_cuda[i] - on_cpu[i]) * ((double)on_cuda[i] - on_cpu[i]);
    den += (double)on_cpu[i] * on_cpu[i];
  }
  g_test_message("6 steps of %s%s, cuda:0 vs cpu: relative difference %.3g", ZOO_NET,
                 photo ? " with photo augmentation" : "", sqrt(num / den));
  g_assert_cmpfloat(sqrt(num / den), <=, 1e-4);
  /* The frozen stem is the file's on both. */
  g_assert_cmpmem(on_cuda + conv1->weight_offset, conv1->weight_count * sizeof(float),
                  start + conv1->weight_offset, conv1->weight_count * sizeof(float));
  g_assert_cmpmem(on_cpu + conv1->weight_offset, conv1->weight_count * sizeof(float),
                  start + conv1->weight_offset, conv1->weight_count * sizeof(float));
  g_unlink(init);
  g_rmdir(dir);
}

static void
test_zoo_network(void)
{
  if (have_gpu())
    zoo_network(FALSE);
}

static void
test_zoo_network_photo(void)
{
  if (have_gpu())
    zoo_network(TRUE);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_autoptr(GError) error = NULL;
  cpu = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  if (tdm_backend_cuda_available()) {
    gpu = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
    g_assert_no_error(error);
  }
  g_test_add_func("/cuda-pool2d/maxpool2d", test_maxpool2d);
  g_test_add_func("/cuda-pool2d/maxpool2d-bn", test_maxpool2d_bn);
  g_test_add_func("/cuda-pool2d/maxpool2d-unaligned", test_maxpool2d_unaligned);
  g_test_add_func("/cuda-pool2d/avgpool2d", test_avgpool2d);
  g_test_add_func("/cuda-pool2d/channel-affine", test_channel_affine);
  g_test_add_func("/cuda-pool2d/to-bf16-padded", test_to_bf16_padded);
  g_test_add_func("/cuda-pool2d/zoo-network", test_zoo_network);
  g_test_add_func("/cuda-pool2d/zoo-network-photo", test_zoo_network_photo);
  int status = g_test_run();
  tdm_backend_free(gpu);
  tdm_backend_free(cpu);
  return status;
}

#else /* !TDM_HAVE_CUDA */

static void
test_no_cuda(void)
{
  g_test_skip("no CUDA GPU (this build has no CUDA backend)");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cuda-pool2d/none", test_no_cuda);
  return g_test_run();
}

#endif
