/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-layers-blocks.c — part of test-cuda-layers: the CUDA backend's operations of
 * a residual block stored as bf16 (a bf16 run's block inputs and outputs, and their
 * gradients): from_bf16, im2col_bf16 of a bf16 input, relu_backward_bf16 (float32 or
 * bf16 gradients; the ReLU's mask as bits), add_out_bf16 (and the mask it writes beside
 * its output), add_strided_bf16 (a float32 or bf16 a), add_relu_backward_bf16 (a
 * block's start in backward) and bn_forward_bf16 (with the mask too).
 * Each against the GPU's float32 operation on the widened input (then to_bf16 where
 * it writes bf16), bit for bit, and against the CPU's bf16 operation, the reference:
 * the elementwise ones bit for bit; the bn ones, whose float32 values the GPU computes
 * as the CPU does (kernels/bn-value.cuh), within the rounding of the result to bf16
 * (each value moves by at most 2⁻⁹ relative, so the norm-wise error by at most that)
 * of the CPU's float32 result.
 */
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "test-cuda-layers.h"

#define HALF_U16 (1.0 / 512.0) /* the rounding of one value to bf16, at most, relative */

static void
same_bits_gpu(const char *what, const void *got, const void *want, size_t bytes)
{
  g_autofree char *a = g_malloc(bytes), *b = g_malloc(bytes);
  tdm_backend_download(gpu, a, got, bytes);
  tdm_backend_download(gpu, b, want, bytes);
  assert_ok(gpu);
  g_test_message("%s: %s", what, memcmp(a, b, bytes) == 0 ? "same bits" : "differs");
  if (memcmp(a, b, bytes) != 0) {
    g_test_message("FAILED %s: not the bits of the float32 operation", what);
    g_test_fail();
  }
}

/* A bf16 result on the GPU, widened, against a float32 reference on the host. */
static void
close_widened(const char *what, const uint16_t *dev, const float *ref, size_t n, double tol)
{
  g_autofree uint16_t *out = g_new(uint16_t, n);
  g_autofree float *wide = g_new(float, n);
  tdm_backend_download(gpu, out, dev, n * 2);
  assert_ok(gpu);
  for (size_t i = 0; i < n; i++)
    wide[i] = bf16_value(out[i]);
  double err = rel_error(wide, ref, n);
  g_test_message("%s against the CPU's float32: relative error %.3g", what, err);
  if (!(err <= tol)) {
    g_test_message("FAILED %s: relative error %.3g exceeds %.3g", what, err, tol);
    g_test_fail();
  }
}

/* Host values rounded to bf16 (h16) and x replaced by their widened values. */
static uint16_t *
round_in_place(float *x, size_t n)
{
  uint16_t *h16 = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++) {
    h16[i] = bf16_bits(x[i]);
    x[i] = bf16_value(h16[i]);
  }
  return h16;
}

/* Elementwise: n values (odd counts take the scalar tail; offset 1 element misaligns
 * every pointer, the one-value-a-thread kernels). */
static void
elementwise_case(size_t n, size_t offset, bool relu)
{
  size_t all = n + offset;
  g_autofree float *x = random_floats(all, -2, 2), *a = random_floats(all, -2, 2);
  g_autofree float *dyh = random_floats(all, -1, 1);
  for (size_t i = 0; i < all; i += 5)
    x[i] = 0.0f;
  /* Sums of −0 and a NaN: their masks' bits 0. */
  x[all / 4] = a[all / 4] = -0.0f;
  a[all / 3] = NAN;
  g_autofree uint16_t *x16 = round_in_place(x, all);
  float *dx = on(x, all * 4), *da = on(a, all * 4), *ddy = on(dyh, all * 4);
  uint16_t *dx16 = on(x16, all * 2), *got16 = on(NULL, all * 2), *want16 = on(NULL, all * 2);
  float *got = poisoned(all), *want = poisoned(all);
  g_autofree char *what = NULL;

  tdm_backend_from_bf16(gpu, got + offset, dx16 + offset, n);
  what = g_strdup_printf("from_bf16 %zu+%zu", n, offset);
  check_close(what, got + offset, x + offset, n, 0.0);
  g_clear_pointer(&what, g_free);

  /* The block's gradient in either type, into either (dy16 holds dy rounded; in place
   * where the types agree): the bits of relu_backward on the widened gradient, rounded
   * where bf16 is written, and the CPU's. */
  g_autofree uint16_t *dyh16 = g_new(uint16_t, all);
  for (size_t i = 0; i < all; i++)
    dyh16[i] = bf16_bits(dyh[i]);
  uint16_t *ddy16 = on(dyh16, all * 2);
  float *ddy_wide = poisoned(all);
  /* The mask of the n values from offset, as the forward writes it (its own words). */
  g_autofree uint32_t *hbits = g_new(uint32_t, TDM_RELU_BITS_WORDS(n));
  tdm_relu_bits_of(hbits, x16 + offset, n);
  uint32_t *dbits = relu_bits_on(x16 + offset, n);
  tdm_backend_from_bf16(gpu, ddy_wide, ddy16, all);
  for (int t = 0; t < 4; t++) {
    gboolean in16 = t & 1, out16 = t >> 1;
    TdmDtype dy_type = in16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    TdmDtype dx_type = out16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    const void *d = in16 ? (const void *)(ddy16 + offset) : (const void *)(ddy + offset);
    void *out = out16 ? (void *)(got16 + offset) : (void *)(got + offset);
    tdm_backend_relu_backward_bf16(gpu, out, dx_type, d, dy_type, dbits, n);
    tdm_backend_relu_backward(gpu, want + offset, (in16 ? ddy_wide : ddy) + offset,
                              dx + offset, n);
    what = g_strdup_printf("relu_backward_bf16 %zu+%zu dy %s dx %s", n, offset,
                           in16 ? "bf16" : "f32", out16 ? "bf16" : "f32");
    if (out16) {
      tdm_backend_to_bf16(gpu, want16 + offset, want + offset, n);
      same_bits_gpu(what, got16 + offset, want16 + offset, n * 2);
    } else {
      same_bits_gpu(what, got + offset, want + offset, n * 4);
    }
    g_autofree char *ref = g_malloc(all * 4);
    const void *host_dy = in16 ? (const void *)(dyh16 + offset) : (const void *)(dyh + offset);
    size_t size = out16 ? 2 : 4;
    tdm_backend_relu_backward_bf16(cpu, ref + offset * size, dx_type, host_dy, dy_type, hbits,
                                   n);
    assert_ok(cpu);
    g_autofree char *back = g_malloc(all * 4);
    tdm_backend_download(gpu, back, out16 ? (void *)got16 : (void *)got, all * size);
    assert_ok(gpu);
    gboolean same = memcmp(back + offset * size, ref + offset * size, n * size) == 0;
    g_test_message("%s against the CPU: %s", what, same ? "same bits" : "differs");
    if (!same) {
      g_test_message("FAILED %s against the CPU", what);
      g_test_fail();
    }
    g_clear_pointer(&what, g_free);
  }
  /* In place, bf16. */
  tdm_backend_relu_backward_bf16(gpu, ddy16 + offset, TDM_DTYPE_BF16, ddy16 + offset,
                                 TDM_DTYPE_BF16, dbits, n);
  tdm_backend_relu_backward(gpu, want + offset, ddy_wide + offset, dx + offset, n);
  tdm_backend_to_bf16(gpu, want16 + offset, want + offset, n);
  what = g_strdup_printf("relu_backward_bf16 %zu+%zu in place", n, offset);
  same_bits_gpu(what, ddy16 + offset, want16 + offset, n * 2);
  g_clear_pointer(&what, g_free);
  release(ddy16);
  release(ddy_wide);
  release(dbits);

  /* With its mask: the bits of the values it stored, and the CPU's. */
  uint32_t *got_bits = on(NULL, TDM_RELU_BITS_WORDS(n) * sizeof(uint32_t));
  for (int t = 0; t < 2; t++) {
    TdmDtype type = t == 0 ? TDM_DTYPE_F32 : TDM_DTYPE_BF16;
    const void *skip = t == 0 ? (const void *)(dx + offset) : (const void *)(dx16 + offset);
    tdm_backend_add_out_bf16(gpu, got16 + offset, da + offset, skip, type, n, relu, got_bits);
    tdm_backend_add_out(gpu, want + offset, da + offset, dx + offset, n, relu);
    tdm_backend_to_bf16(gpu, want16 + offset, want + offset, n);
    what = g_strdup_printf("add_out_bf16 %zu+%zu %s%s", n, offset, t == 0 ? "f32" : "bf16",
                           relu ? " relu" : "");
    same_bits_gpu(what, got16 + offset, want16 + offset, n * 2);
    g_autofree uint16_t *ref = g_new(uint16_t, all);
    const void *host_skip = t == 0 ? (const void *)(x + offset) : (const void *)(x16 + offset);
    tdm_backend_add_out_bf16(cpu, ref + offset, a + offset, host_skip, type, n, relu, hbits);
    assert_ok(cpu);
    same_bits_cpu(what, got16 + offset, ref + offset, n);
    check_relu_bits(what, got_bits, got16 + offset, n);
    /* Without a mask: the values alone, the vector paths of before. */
    tdm_backend_add_out_bf16(gpu, want16 + offset, da + offset, skip, type, n, relu, NULL);
    same_bits_cpu(what, want16 + offset, ref + offset, n);
    g_clear_pointer(&what, g_free);
  }
  void *bufs[] = {dx, da, ddy, dx16, got16, want16, got, want, got_bits};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

/* add_strided_bf16: a block's first layer's float32 input gradient plus its
 * projection's compact one (stride 1, 2 or 3 over odd sizes), against the GPU's col2im
 * of the compact one (a 1×1 conv's columns), add_out and to_bf16, and against the CPU's,
 * bit for bit; then written float32 in place over the first one (the block's start when
 * that gradient fills the gradient region): add_out's float32 sum, bit for bit, and
 * to_bf16 of it the bits above. shift: a and the outputs start that many elements into
 * their buffers (1: off the vector paths' alignment). */
static void
strided_case_at(int n, int h, int w, int c, int stride, int shift)
{
  size_t count = (size_t)n * h * w * c;
  int oh = (h - 1) / stride + 1, ow = (w - 1) / stride + 1;
  size_t compact = (size_t)n * oh * ow * c;
  g_autofree float *a = random_floats(count, -1, 1), *x = random_floats(compact, -1, 1);
  float *abuf = on(NULL, (count + 8) * 4), *dxc = on(x, compact * 4), *dense = poisoned(count);
  float *da = abuf + shift;
  tdm_backend_upload(gpu, da, a, count * 4);
  float *sum = poisoned(count);
  uint16_t *gotbuf = on(NULL, (count + 8) * 2), *want = on(NULL, count * 2);
  uint16_t *got = gotbuf + shift;
  tdm_backend_add_strided_bf16(gpu, got, TDM_DTYPE_BF16, da, TDM_DTYPE_F32, dxc, n, h, w, c,
                               stride);
  tdm_backend_col2im(gpu, dense, dxc, n, h, w, c, 1, 1, 0, stride);
  tdm_backend_add_out(gpu, sum, da, dense, count, false);
  tdm_backend_to_bf16(gpu, want, sum, count);
  g_autofree char *what =
      g_strdup_printf("add_strided_bf16 %d×%d×%d×%d s%d at %d", n, h, w, c, stride, shift);
  same_bits_gpu(what, got, want, count * 2);
  g_autofree uint16_t *ref = g_new(uint16_t, count);
  tdm_backend_add_strided_bf16(cpu, ref, TDM_DTYPE_BF16, a, TDM_DTYPE_F32, x, n, h, w, c,
                               stride);
  assert_ok(cpu);
  same_bits_cpu(what, got, ref, count);
  float *inbuf = on(NULL, (count + 8) * 4), *inplace = inbuf + shift;
  tdm_backend_upload(gpu, inplace, a, count * 4);
  tdm_backend_add_strided_bf16(gpu, inplace, TDM_DTYPE_F32, inplace, TDM_DTYPE_F32, dxc, n, h,
                               w, c, stride);
  g_autofree char *what32 = g_strdup_printf(
      "add_strided_bf16 %d×%d×%d×%d s%d at %d, float32 in place", n, h, w, c, stride, shift);
  same_bits_gpu(what32, inplace, sum, count * 4);
  tdm_backend_to_bf16(gpu, got, inplace, count);
  same_bits_cpu(what32, got, ref, count);
  void *bufs[] = {abuf, dxc, dense, sum, gotbuf, want, inbuf};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

static void
strided_case(int n, int h, int w, int c, int stride)
{
  strided_case_at(n, h, w, c, stride, 0);
}

/* add_relu_backward_bf16, a block's start in backward (its first layer's input gradient
 * a plus the skip's share x, each float32 or bf16, rounded once, and the ReLU of the
 * block's end below applied by the mask bits of its bf16 output, or none): the bits of
 * the GPU's unfused ops (a widened, add_out_bf16, relu_backward_bf16 in place) and of
 * the CPU's add_relu_backward_bf16; in place over a bf16 x too. The mask's values have
 * zeros of both signs, negatives and a NaN. offset misaligns every pointer by that many
 * elements (0: eight a thread where n allows, 4: four, 1: one). */
static void
block_start_case(size_t n, size_t offset)
{
  size_t all = n + offset;
  g_autofree float *a = random_floats(all, -1, 1), *x = random_floats(all, -1, 1);
  g_autofree float *y = random_floats(all, -2, 2);
  for (size_t i = 0; i < all; i += 5)
    y[i] = i % 10 == 0 ? 0.0f : -0.0f;
  y[all / 2] = NAN;
  g_autofree uint16_t *a16 = g_new(uint16_t, all), *x16 = g_new(uint16_t, all);
  for (size_t i = 0; i < all; i++) {
    a16[i] = bf16_bits(a[i]);
    x16[i] = bf16_bits(x[i]);
  }
  g_autofree uint16_t *y16 = round_in_place(y, all);
  float *da = on(a, all * 4), *dxf = on(x, all * 4), *da_wide = poisoned(all);
  uint16_t *da16 = on(a16, all * 2), *dx16 = on(x16, all * 2);
  g_autofree uint32_t *hbits = g_new(uint32_t, TDM_RELU_BITS_WORDS(n));
  tdm_relu_bits_of(hbits, y16 + offset, n);
  uint32_t *dbits = relu_bits_on(y16 + offset, n);
  uint16_t *got = on(NULL, all * 2), *want = on(NULL, all * 2), *inplace = on(NULL, all * 2);
  tdm_backend_from_bf16(gpu, da_wide, da16, all);
  g_autofree uint16_t *ref = g_new(uint16_t, all);
  for (int t = 0; t < 8; t++) {
    gboolean a_bf16 = t & 1, x_bf16 = (t >> 1) & 1, masked = t >> 2;
    TdmDtype a_type = a_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    TdmDtype x_type = x_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    const void *av = a_bf16 ? (const void *)(da16 + offset) : (const void *)(da + offset);
    const void *xv = x_bf16 ? (const void *)(dx16 + offset) : (const void *)(dxf + offset);
    const uint32_t *mask = masked ? dbits : NULL;
    g_autofree char *what = g_strdup_printf("add_relu_backward_bf16 %zu+%zu a %s x %s%s", n,
                                            offset, a_bf16 ? "bf16" : "f32",
                                            x_bf16 ? "bf16" : "f32", masked ? ", masked" : "");
    tdm_backend_add_relu_backward_bf16(gpu, got + offset, av, a_type, xv, x_type, mask, n);
    tdm_backend_add_out_bf16(gpu, want + offset, (a_bf16 ? da_wide : da) + offset, xv, x_type,
                             n, false, NULL);
    if (masked)
      tdm_backend_relu_backward_bf16(gpu, want + offset, TDM_DTYPE_BF16, want + offset,
                                     TDM_DTYPE_BF16, mask, n);
    same_bits_gpu(what, got + offset, want + offset, n * 2);
    const void *ha = a_bf16 ? (const void *)(a16 + offset) : (const void *)(a + offset);
    const void *hx = x_bf16 ? (const void *)(x16 + offset) : (const void *)(x + offset);
    tdm_backend_add_relu_backward_bf16(cpu, ref, ha, a_type, hx, x_type, masked ? hbits : NULL,
                                       n);
    assert_ok(cpu);
    same_bits_cpu(what, got + offset, ref, n);
    if (x_bf16) {
      tdm_backend_upload(gpu, inplace, x16, all * 2);
      tdm_backend_add_relu_backward_bf16(gpu, inplace + offset, av, a_type, inplace + offset,
                                         x_type, mask, n);
      g_autofree char *in_place = g_strdup_printf("%s, in place over x", what);
      same_bits_gpu(in_place, inplace + offset, want + offset, n * 2);
    }
  }
  void *bufs[] = {da, dxf, da_wide, da16, dx16, dbits, got, want, inplace};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

/* add_strided_bf16 from a bf16 gradient a (the block's first conv wrote it so), in place
 * (a projection's start): the bits of the float32 way on a widened (summed in place,
 * then to_bf16), and of the CPU's. */
static void
strided_bf16_case(int n, int h, int w, int c, int stride)
{
  size_t count = (size_t)n * h * w * c;
  int oh = (h - 1) / stride + 1, ow = (w - 1) / stride + 1;
  size_t compact = (size_t)n * oh * ow * c;
  g_autofree float *a = random_floats(count, -1, 1), *x = random_floats(compact, -1, 1);
  g_autofree uint16_t *a16 = round_in_place(a, count);
  float *dxc = on(x, compact * 4), *sum = on(a, count * 4);
  uint16_t *got = on(a16, count * 2), *want = on(NULL, count * 2);
  tdm_backend_add_strided_bf16(gpu, got, TDM_DTYPE_BF16, got, TDM_DTYPE_BF16, dxc, n, h, w, c,
                               stride);
  tdm_backend_add_strided_bf16(gpu, sum, TDM_DTYPE_F32, sum, TDM_DTYPE_F32, dxc, n, h, w, c,
                               stride);
  tdm_backend_to_bf16(gpu, want, sum, count);
  g_autofree char *what =
      g_strdup_printf("add_strided_bf16 %d×%d×%d×%d s%d, bf16 a in place", n, h, w, c, stride);
  same_bits_gpu(what, got, want, count * 2);
  tdm_backend_add_strided_bf16(cpu, a16, TDM_DTYPE_BF16, a16, TDM_DTYPE_BF16, x, n, h, w, c,
                               stride);
  assert_ok(cpu);
  same_bits_cpu(what, got, a16, count);
  void *bufs[] = {dxc, sum, got, want};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

/* im2col_bf16 of a stored bf16 input: the columns of its widened values, bit for bit
 * (the block's first conv, a strided one, 17 channels for the scalar gather). */
static void
im2col_case(int n, int h, int w, int c, int k, int pad, int stride)
{
  size_t count = (size_t)n * h * w * c;
  g_autofree float *x = random_floats(count, -2, 2);
  g_autofree uint16_t *x16 = round_in_place(x, count);
  int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  size_t cols = (size_t)n * oh * ow * k * k * c;
  float *dx = on(x, count * 4);
  uint16_t *dx16 = on(x16, count * 2), *got = on(NULL, cols * 2), *want = on(NULL, cols * 2);
  tdm_backend_im2col_bf16(gpu, got, dx16, TDM_DTYPE_BF16, n, h, w, c, k, k, pad, stride);
  tdm_backend_im2col_bf16(gpu, want, dx, TDM_DTYPE_F32, n, h, w, c, k, k, pad, stride);
  g_autofree char *what = g_strdup_printf("im2col_bf16 of bf16 %d×%d×%d×%d k%d p%d s%d", n, h,
                                          w, c, k, pad, stride);
  same_bits_gpu(what, got, want, cols * 2);
  g_autofree uint16_t *ref = g_new(uint16_t, cols);
  tdm_backend_im2col_bf16(cpu, ref, x16, TDM_DTYPE_BF16, n, h, w, c, k, k, pad, stride);
  assert_ok(cpu);
  same_bits_cpu(what, got, ref, cols);
  void *bufs[] = {dx, dx16, got, want};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

/* bn_forward_bf16: the stem's bn (no addend) and a block's end (its last bn's input x,
 * stored bf16 or not, plus the skip a, float32 or bf16). */
static void
bn_case(int rows, int c, TdmDtype x_type, int addend, bool relu)
{
  const size_t count = (size_t)rows * c;
  g_autofree float *x = random_floats(count, -3, 5), *a = random_floats(count, -2, 2);
  g_autofree float *p = random_floats(4 * (size_t)c, -1, 1); /* mean, invstd, γ, β */
  for (int ch = 0; ch < c; ch++)
    p[c + ch] = 0.5f + fabsf(p[c + ch]);
  g_autofree uint16_t *x16 = round_in_place(x, count), *a16 = round_in_place(a, count);
  const void *hx = x_type == TDM_DTYPE_BF16 ? (const void *)x16 : (const void *)x;
  TdmDtype a_type = addend == 2 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
  const void *ha = addend == 0 ? NULL : addend == 2 ? (const void *)a16 : (const void *)a;
  void *dx = on(hx, count * tdm_dtype_size(x_type));
  float *dxf = on(x, count * 4), *daf = on(a, count * 4), *dp = on(p, 4 * (size_t)c * 4);
  void *da = ha == NULL ? NULL : on(ha, count * tdm_dtype_size(a_type));
  uint16_t *got = on(NULL, count * 2), *want16 = on(NULL, count * 2);
  uint32_t *bits = on(NULL, TDM_RELU_BITS_WORDS(count) * sizeof(uint32_t));
  float *want = poisoned(count);
  tdm_backend_bn_forward_bf16(gpu, got, dx, x_type, dp, dp + c, dp + 2 * c, dp + 3 * c, da,
                              a_type, rows, c, relu, bits);
  if (da == NULL)
    tdm_backend_bn_forward(gpu, want, dxf, TDM_DTYPE_F32, dp, dp + c, dp + 2 * c, dp + 3 * c,
                           rows, c, relu);
  else
    tdm_backend_bn_forward_add(gpu, want, dxf, TDM_DTYPE_F32, dp, dp + c, dp + 2 * c,
                               dp + 3 * c, daf, rows, c, relu);
  tdm_backend_to_bf16(gpu, want16, want, count);
  g_autofree char *what = g_strdup_printf("bn_forward_bf16 %d×%d x %s, %s%s", rows, c,
                                          x_type == TDM_DTYPE_BF16 ? "bf16" : "f32",
                                          addend == 0   ? "no addend"
                                          : addend == 1 ? "f32 addend"
                                                        : "bf16 addend",
                                          relu ? ", relu" : "");
  same_bits_gpu(what, got, want16, count * 2);
  /* Its mask: the bits of what it stored (8 channels a thread a byte each, 4 or 1 or-ed
   * into the cleared words). */
  check_relu_bits(what, bits, got, count);
  g_autofree float *ref = g_new(float, count);
  if (ha == NULL)
    tdm_backend_bn_forward(cpu, ref, x, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c, rows, c,
                           relu);
  else
    tdm_backend_bn_forward_add(cpu, ref, x, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c, a,
                               rows, c, relu);
  assert_ok(cpu);
  close_widened(what, got, ref, count, HALF_U16 + TOL);
  void *bufs[] = {dx, dxf, daf, dp, da, got, want16, want, bits};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    if (bufs[i] != NULL)
      release(bufs[i]);
}

static void
test_blocks_bf16(void)
{
  if (!have_gpu())
    return;
  g_assert_true(tdm_backend_has_bf16_blocks(gpu));
  elementwise_case(512 * 32 * 32 * 64, 0, true); /* ResNet-18's first blocks at 32 px */
  elementwise_case(1001, 0, false);
  elementwise_case(1003, 1, true);
  elementwise_case(1005, 2, true);  /* from_bf16's pairs on 4 and 8 bytes */
  elementwise_case(1027, 8, false); /* on 16 bytes, an odd count */
  strided_case(512, 32, 32, 64, 2); /* ResNet-18's first projection at 32 px */
  strided_case(3, 13, 11, 7, 1);
  strided_case(3, 13, 11, 7, 2);
  strided_case(2, 9, 10, 17, 3);
  /* Each width of the kernel: 8 channels a thread (512, 64), 4 (12), 1 (3; or
   * misaligned a and y). */
  strided_case(64, 8, 8, 512, 2);
  strided_case(3, 13, 11, 12, 2);
  strided_case(5, 7, 9, 3, 2);
  strided_case_at(3, 13, 11, 64, 2, 1);
  strided_case_at(3, 13, 11, 64, 1, 4); /* y on 8 bytes: 4 a thread */
  /* A block's start: the first layer's bf16 gradient (ResNet-18's first blocks at 32 px,
   * batch 512, and odd sizes), fused with the ReLU of the end below. */
  block_start_case((size_t)512 * 32 * 32 * 64, 0);
  block_start_case(1003, 0);
  block_start_case(1027, 4);
  block_start_case(1001, 1);
  strided_bf16_case(512, 32, 32, 64, 2); /* ResNet-18's first projection at 32 px */
  strided_bf16_case(3, 13, 11, 7, 2);
  strided_bf16_case(3, 13, 11, 12, 2);
  strided_bf16_case(2, 9, 10, 16, 3);
  im2col_case(64, 32, 32, 64, 3, 1, 1);
  im2col_case(64, 16, 16, 128, 3, 1, 2);
  im2col_case(3, 9, 7, 17, 3, 1, 2);
  im2col_case(8, 8, 8, 64, 1, 0, 2); /* a projection's columns */
  for (int relu = 0; relu < 2; relu++) {
    bn_case(512 * 32 * 32, 64, TDM_DTYPE_BF16, 0, relu); /* the stem */
    bn_case(512 * 8 * 8, 256, TDM_DTYPE_BF16, 2, relu);  /* a block's end */
    bn_case(512 * 8 * 8, 256, TDM_DTYPE_BF16, 1, relu);  /* after a projection */
    bn_case(333, 17, TDM_DTYPE_F32, 2, relu);            /* a channel a thread */
    bn_case(331, 12, TDM_DTYPE_BF16, 2, relu);           /* four: or-ed into the mask's words */
    bn_case(37, 17, TDM_DTYPE_BF16, 0, relu);
  }
}

void
test_cuda_layers_add_blocks(void)
{
  g_test_add_func("/cuda-layers/blocks-bf16", test_blocks_bf16);
}

#endif /* TDM_HAVE_CUDA */
