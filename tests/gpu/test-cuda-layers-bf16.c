/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-layers-bf16.c — part of test-cuda-layers: the CUDA backend's bf16 GEMMs,
 * stored bf16 operands, the column-free input gradient of a bf16 convolution and the
 * layers fused with their neighbours, against the CPU backend (its float32 operations,
 * and its own bf16 ones, the reference).
 */
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "test-cuda-layers.h"
#include "tdm-backend-ops.h"

/* bf16 GEMMs. Each operand is rounded to bfloat16 (8 significant bits: relative
 * rounding error up to 2⁻⁸ ≈ 3.9e-3, root mean square about 2⁻⁸/√3 ≈ 2.3e-3 for
 * random data), products and sums in float32. A product of two rounded values is off
 * by about √2 · 2.3e-3 ≈ 3.2e-3 (rms); over a reduction of length k with random signs
 * the errors add like the terms do (as √k), so the relative error of C stays near
 * 3e-3 whatever k is, and the float32 accumulation adds only k · 2⁻²⁴. 1e-2 is three
 * times that; float32 GEMMs (1e-5) would fail it by far only if bf16 were not used,
 * which the lower bound checks: an error under 1e-4 means the bf16 path did not run. */
static void
bf16_case(bool ta, bool tb, int m, int n, int k)
{
  int lda = ta ? m : k, ldb = tb ? k : n;
  size_t as = (size_t)m * k, bs = (size_t)k * n, cs = (size_t)m * n;
  g_autofree float *a = random_floats(as, -1, 1), *bm = random_floats(bs, -1, 1);
  g_autofree float *ref = g_new0(float, cs);
  tdm_backend_gemm(cpu, ta, tb, m, n, k, 1.0f, a, lda, bm, ldb, 0.0f, ref, n);
  assert_ok(cpu);
  float *da = on_b(gpu_bf16, a, as * 4), *db = on_b(gpu_bf16, bm, bs * 4);
  float *dc = poisoned_b(gpu_bf16, cs);
  tdm_backend_gemm(gpu_bf16, ta, tb, m, n, k, 1.0f, da, lda, db, ldb, 0.0f, dc, n);
  g_autofree char *what = g_strdup_printf("gemm bf16 %s%s %d×%d×%d", ta ? "T" : "N",
                                          tb ? "T" : "N", m, n, k);
  check_close_b(gpu_bf16, what, dc, ref, cs, 1e-2);
  g_autofree float *out = g_new(float, cs);
  tdm_backend_download(gpu_bf16, out, dc, cs * 4);
  g_assert_cmpfloat(rel_error(out, ref, cs), >, 1e-4);
  tdm_backend_release(gpu_bf16, da);
  tdm_backend_release(gpu_bf16, db);
  tdm_backend_release(gpu_bf16, dc);
}

static void
test_gemm_bf16(void)
{
  if (!have_gpu())
    return;
  bf16_case(false, true, 512 * 49, 128, 576);    /* a conv's forward: col · Wᵀ */
  bf16_case(false, false, 4096, 288, 64);        /* its input gradient */
  bf16_case(true, false, 64, 288, 100352);       /* its weight gradient: split-K */
  bf16_case(false, true, 512, 256, 2304);
}

/* Stored bf16 operands (to_bf16, im2col_bf16, gemm_bf16). The rounding is exact
 * arithmetic, so the bits must equal this reference's (float to nearest even bf16,
 * as __float2bfloat16_rn; no NaN in these data). gemm_bf16 on rounded operands is
 * the CPU's float32 GEMM of the same rounded values up to the order of float32
 * additions: TOL. */
static void
im2col_bf16_case(int n, int h, int w, int c, int k, int pad, int stride)
{
  int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  size_t xs = (size_t)n * h * w * c, cols = (size_t)n * oh * ow * k * k * c;
  g_autofree float *x = random_floats(xs, -3, 3), *ref = g_new(float, cols);
  tdm_backend_im2col(cpu, ref, x, n, h, w, c, k, k, pad, stride);
  float *dx = on(x, xs * 4);
  uint16_t *dcol = (uint16_t *)poisoned(cols / 2 + 1);
  tdm_backend_im2col_bf16(gpu, dcol, dx, TDM_DTYPE_F32, n, h, w, c, k, k, pad, stride);
  g_autofree char *what = g_strdup_printf("im2col_bf16 %d×%d×%d×%d k%d p%d s%d", n, h, w, c, k,
                                          pad, stride);
  check_bits(what, dcol, ref, cols);
  release(dx);
  release(dcol);
}

/* im2col_bf16_bn: the columns of a training bn's output gathered from its input. The
 * bits of the GPU's bn_forward then im2col_bf16 (the engine's path without it), and
 * within bf16's rounding (2⁻⁹ of each value) of the CPU's bn_forward and im2col. */
static void
im2col_bf16_bn_case(int n, int h, int w, int c, int k, int pad, int stride, bool relu)
{
  int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  size_t xs = (size_t)n * h * w * c, cols = (size_t)n * oh * ow * k * k * c;
  int rows = n * h * w;
  g_autofree float *x = random_floats(xs, -3, 3);
  g_autofree float *saved = random_floats(2 * (size_t)c, -0.5, 0.5); /* mean, invstd */
  for (int ch = 0; ch < c; ch++)
    saved[c + ch] = 0.5f + (float)ch / c;
  g_autofree float *gamma = random_floats(c, 0.5, 1.5), *beta = random_floats(c, -0.5, 0.5);
  g_autofree float *y = g_new(float, xs), *ref = g_new(float, cols);
  tdm_backend_bn_forward(cpu, y, x, TDM_DTYPE_F32, saved, saved + c, gamma, beta, rows, c,
                         relu);
  tdm_backend_im2col(cpu, ref, y, n, h, w, c, k, k, pad, stride);
  assert_ok(cpu);

  float *dx = on(x, xs * 4), *dsaved = on(saved, 2 * (size_t)c * 4);
  float *dgamma = on(gamma, c * 4), *dbeta = on(beta, c * 4), *dy = poisoned(xs);
  uint16_t *dcol = (uint16_t *)poisoned(cols / 2 + 1);
  uint16_t *dref = (uint16_t *)poisoned(cols / 2 + 1);
  tdm_backend_bn_forward(gpu, dy, dx, TDM_DTYPE_F32, dsaved, dsaved + c, dgamma, dbeta, rows, c,
                         relu);
  tdm_backend_im2col_bf16(gpu, dref, dy, TDM_DTYPE_F32, n, h, w, c, k, k, pad, stride);
  tdm_backend_im2col_bf16_bn(gpu, dcol, dx, TDM_DTYPE_F32, dsaved, dsaved + c, dgamma, dbeta,
                             relu, n, h, w, c, k, k, pad, stride);
  g_autofree uint16_t *col = g_new(uint16_t, cols), *col_ref = g_new(uint16_t, cols);
  tdm_backend_download(gpu, col, dcol, cols * 2);
  tdm_backend_download(gpu, col_ref, dref, cols * 2);
  assert_ok(gpu);
  g_autofree char *what = g_strdup_printf("im2col_bf16_bn %d×%d×%d×%d k%d p%d s%d%s", n, h, w,
                                          c, k, pad, stride, relu ? " relu" : "");
  size_t wrong = 0;
  for (size_t i = 0; i < cols; i++)
    wrong += col[i] != col_ref[i];
  g_test_message("%s: %zu of %zu values differ from bn_forward, im2col_bf16", what, wrong,
                 cols);
  if (wrong > 0) {
    g_test_message("FAILED %s", what);
    g_test_fail();
  }
  g_autofree float *values = g_new(float, cols);
  for (size_t i = 0; i < cols; i++)
    values[i] = bf16_value(col[i]);
  double err = rel_error(values, ref, cols);
  g_test_message("%s: relative error %.3g against the CPU", what, err);
  if (!(err <= 4e-3)) {
    g_test_message("FAILED %s: relative error %.3g exceeds 4e-3", what, err);
    g_test_fail();
  }
  void *all[] = {dx, dsaved, dgamma, dbeta, dy, dcol, dref};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    release(all[i]);
}

/* maxpool_forward_bn: the pool of a training bn's output read from its input. y and
 * argmax those of the GPU's bn_forward then maxpool_forward, bit for bit; y within
 * TOL of the CPU's (an FMA apart in the bn). */
static void
maxpool_bn_case(int n, int h, int w, int c, int k, bool relu)
{
  int ph = h / k, pw = w / k;
  size_t xs = (size_t)n * h * w * c, ys = (size_t)n * ph * pw * c;
  int rows = n * h * w;
  g_autofree float *x = random_floats(xs, -3, 3);
  g_autofree float *saved = random_floats(2 * (size_t)c, -0.5, 0.5);
  for (int ch = 0; ch < c; ch++)
    saved[c + ch] = 0.5f + (float)ch / c;
  g_autofree float *gamma = random_floats(c, -1.5, 1.5), *beta = random_floats(c, -0.5, 0.5);
  g_autofree float *bn_ref = g_new(float, xs), *y_ref = g_new(float, ys);
  g_autofree int32_t *at_ref = g_new(int32_t, ys);
  tdm_backend_bn_forward(cpu, bn_ref, x, TDM_DTYPE_F32, saved, saved + c, gamma, beta, rows, c,
                         relu);
  tdm_backend_maxpool_forward(cpu, y_ref, at_ref, bn_ref, NULL, false, n, h, w, c, k);
  assert_ok(cpu);

  float *dx = on(x, xs * 4), *dsaved = on(saved, 2 * (size_t)c * 4);
  float *dgamma = on(gamma, c * 4), *dbeta = on(beta, c * 4), *dbn = poisoned(xs);
  float *dy = poisoned(ys), *dy_unfused = poisoned(ys);
  int32_t *dat = (int32_t *)poisoned(ys), *dat_unfused = (int32_t *)poisoned(ys);
  tdm_backend_bn_forward(gpu, dbn, dx, TDM_DTYPE_F32, dsaved, dsaved + c, dgamma, dbeta, rows,
                         c, relu);
  tdm_backend_maxpool_forward(gpu, dy_unfused, dat_unfused, dbn, NULL, false, n, h, w, c, k);
  tdm_backend_maxpool_forward_bn(gpu, dy, dat, dx, dsaved, dsaved + c, dgamma, dbeta, relu, n,
                                 h, w, c, k);
  g_autofree float *y_unfused = g_new(float, ys);
  g_autofree int32_t *at_unfused = g_new(int32_t, ys);
  tdm_backend_download(gpu, y_unfused, dy_unfused, ys * 4);
  tdm_backend_download(gpu, at_unfused, dat_unfused, ys * 4);
  assert_ok(gpu);
  g_autofree char *what = g_strdup_printf("maxpool_forward_bn %d×%d×%d×%d k%d%s", n, h, w, c,
                                          k, relu ? " relu" : "");
  check_close(what, dy, y_unfused, ys, 0.0);
  check_ints(what, dat, at_unfused, ys);
  check_close(what, dy, y_ref, ys, TOL);
  void *all[] = {dx, dsaved, dgamma, dbeta, dbn, dy, dy_unfused, dat, dat_unfused};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    release(all[i]);
}

static void
same_bits(const char *what, int c, const void *got, const void *want, size_t bytes)
{
  g_autofree char *a = g_malloc(bytes), *b = g_malloc(bytes);
  tdm_backend_download(gpu, a, got, bytes);
  tdm_backend_download(gpu, b, want, bytes);
  assert_ok(gpu);
  if (memcmp(a, b, bytes) != 0) {
    g_test_message("FAILED %s (%d channels): a bf16 input differs from its widened values",
                   what, c);
    g_test_fail();
  }
}

/* add_out: a residual block's end, y = a + x then the ReLU, against the CPU's copy,
 * add and relu_forward, bit for bit; in place over x, and n not a multiple of 4. */
static void
add_out_case(size_t n, bool relu, bool in_place)
{
  g_autofree float *a = random_floats(n, -2, 2), *x = random_floats(n, -2, 2);
  g_autofree float *ref = g_memdup2(a, n * 4);
  tdm_backend_add(cpu, ref, x, n);
  if (relu)
    tdm_backend_relu_forward(cpu, ref, ref, n);
  assert_ok(cpu);
  float *da = on(a, n * 4), *dx = on(x, n * 4), *dy = in_place ? dx : poisoned(n);
  tdm_backend_add_out(gpu, dy, da, dx, n, relu);
  g_autofree char *what = g_strdup_printf("add_out %zu%s%s", n, relu ? " relu" : "",
                                          in_place ? " in place" : "");
  check_close(what, dy, ref, n, 0.0);
  release(da);
  release(dx);
  if (!in_place)
    release(dy);
}

/* bn_forward_add: a residual block's end computed from its last bn's input (float32 or
 * stored bf16), y = bn(x) + a then the ReLU, bit for bit as the GPU's bn_forward then
 * add_out, and within TOL of the CPU's (which composes the two); 17 channels take the
 * one-value-a-thread kernel. */
static void
bn_forward_add_case(int rows, int c, TdmDtype x_type, bool relu)
{
  const size_t count = (size_t)rows * c;
  g_autofree float *x = random_floats(count, -3, 5), *a = random_floats(count, -2, 2);
  g_autofree float *p = random_floats(4 * (size_t)c, -1, 1); /* mean, invstd, γ, β */
  g_autofree uint16_t *x16 = g_new(uint16_t, count);
  for (size_t i = 0; i < count; i++)
    x16[i] = bf16_bits(x[i]);
  for (int ch = 0; ch < c; ch++)
    p[c + ch] = 0.5f + fabsf(p[c + ch]);
  const void *hx = x_type == TDM_DTYPE_BF16 ? (const void *)x16 : (const void *)x;
  size_t x_bytes = count * tdm_dtype_size(x_type);
  void *dx = on(hx, x_bytes);
  float *da = on(a, count * 4), *dp = on(p, 4 * (size_t)c * 4);
  float *got = poisoned(count), *want = poisoned(count);
  tdm_backend_bn_forward_add(gpu, got, dx, x_type, dp, dp + c, dp + 2 * c, dp + 3 * c, da, rows,
                             c, relu);
  tdm_backend_bn_forward(gpu, want, dx, x_type, dp, dp + c, dp + 2 * c, dp + 3 * c, rows, c,
                         false);
  tdm_backend_add_out(gpu, want, da, want, count, relu);
  same_bits("bn_forward_add", c, got, want, count * 4);
  g_autofree float *ref = g_new(float, count);
  tdm_backend_bn_forward_add(cpu, ref, hx, x_type, p, p + c, p + 2 * c, p + 3 * c, a, rows, c,
                             relu);
  assert_ok(cpu);
  g_autofree char *what = g_strdup_printf("bn_forward_add %d×%d %s%s against the CPU", rows, c,
                                          x_type == TDM_DTYPE_BF16 ? "bf16" : "f32",
                                          relu ? " relu" : "");
  check_close(what, got, ref, count, TOL);
  void *all[] = {dx, da, dp, got, want};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    release(all[i]);
}

/* Layers fused with their neighbours: a training bn's output computed by the layer
 * after it (the resnet preset's shapes), a residual block's end in one pass. */
static void
test_fused(void)
{
  if (!have_gpu())
    return;
  add_out_case(512 * 14 * 14 * 64, false, false);       /* the preset's first block */
  add_out_case(1001, true, false);
  add_out_case(1003, true, true);
  bn_forward_add_case(512 * 8 * 8, 256, TDM_DTYPE_BF16, true); /* ResNet-18's blocks */
  bn_forward_add_case(333, 17, TDM_DTYPE_BF16, true);
  bn_forward_add_case(1000, 64, TDM_DTYPE_F32, true);
  bn_forward_add_case(37, 17, TDM_DTYPE_F32, false);
  im2col_bf16_bn_case(512, 28, 28, 32, 3, 1, 1, true);  /* conv64's input: bn, relu */
  im2col_bf16_bn_case(8, 3, 3, 256, 3, 1, 1, true);     /* the last block's */
  im2col_bf16_bn_case(3, 7, 6, 8, 3, 1, 1, false);      /* without the ReLU */
  im2col_bf16_bn_case(2, 9, 8, 6, 3, 1, 2, true);       /* one value a thread, strided */
  maxpool_bn_case(512, 28, 28, 64, 2, true);            /* bn, relu, pool2 after conv64 */
  maxpool_bn_case(64, 7, 7, 256, 2, true);              /* odd size: a row left over */
  maxpool_bn_case(4, 9, 9, 6, 3, false);                /* one value a thread, no ReLU */
}

static void
gemm_stored_bf16_case(bool ta, bool tb, int m, int n, int k)
{
  int lda = ta ? m : k, ldb = tb ? k : n;
  size_t as = (size_t)m * k, bs = (size_t)k * n, cs = (size_t)m * n;
  g_autofree float *a = random_floats(as, -1, 1), *bm = random_floats(bs, -1, 1);
  g_autofree uint16_t *a16 = g_new(uint16_t, as), *b16 = g_new(uint16_t, bs);
  for (size_t i = 0; i < as; i++) {
    a16[i] = bf16_bits(a[i]);
    a[i] = bf16_value(a16[i]);
  }
  for (size_t i = 0; i < bs; i++) {
    b16[i] = bf16_bits(bm[i]);
    bm[i] = bf16_value(b16[i]);
  }
  g_autofree float *ref = g_new0(float, cs);
  tdm_backend_gemm(cpu, ta, tb, m, n, k, 1.0f, a, lda, bm, ldb, 0.0f, ref, n);
  assert_ok(cpu);
  uint16_t *da = on(a16, as * 2), *db = on(b16, bs * 2);
  float *dc = poisoned(cs);
  tdm_backend_gemm_bf16(gpu, ta, tb, m, n, k, 1.0f, da, lda, db, ldb, 0.0f, dc, n);
  g_autofree char *what = g_strdup_printf("gemm_bf16 %s%s %d×%d×%d", ta ? "T" : "N",
                                          tb ? "T" : "N", m, n, k);
  check_close(what, dc, ref, cs, TOL);
  release(da);
  release(db);
  release(dc);
}

/* The input gradient through bf16 columns: C = dy · W rounded to bf16 (each value
 * within half a unit of the 8th bit of the exact float32 product, 2⁻⁹ ≈ 2e-3
 * relative, rms about 1.1e-3 on random data: 3e-3 bounds it), then col2im of those
 * bf16 values summed in float32, which must equal the CPU's col2im of the same
 * values to TOL. */
static void
dgrad_bf16_case(int n, int h, int w, int c, int out, int k, int pad, int stride)
{
  int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  int rows = n * oh * ow, kc = k * k * c;
  size_t ys = (size_t)rows * out, ws = (size_t)out * kc, cols = (size_t)rows * kc;
  size_t xs = (size_t)n * h * w * c;
  g_autofree float *dy = random_floats(ys, -1, 1), *wt = random_floats(ws, -1, 1);
  g_autofree uint16_t *dy16 = g_new(uint16_t, ys), *w16 = g_new(uint16_t, ws);
  for (size_t i = 0; i < ys; i++)
    dy[i] = bf16_value(dy16[i] = bf16_bits(dy[i]));
  for (size_t i = 0; i < ws; i++)
    wt[i] = bf16_value(w16[i] = bf16_bits(wt[i]));
  g_autofree float *dcol = g_new(float, cols), *dx_ref = g_new(float, xs);
  tdm_backend_gemm(cpu, false, false, rows, kc, out, 1.0f, dy, out, wt, kc, 0.0f, dcol, kc);
  assert_ok(cpu);
  uint16_t *ddy = on(dy16, ys * 2), *dw = on(w16, ws * 2);
  uint16_t *dcol16 = (uint16_t *)poisoned(cols / 2 + 1);
  float *ddx = poisoned(xs);
  tdm_backend_gemm_bf16_out(gpu, false, false, rows, kc, out, ddy, out, dw, kc, dcol16, kc);
  g_autofree uint16_t *got = g_new(uint16_t, cols);
  tdm_backend_download(gpu, got, dcol16, cols * 2);
  assert_ok(gpu);
  g_autofree float *got_f = g_new(float, cols);
  for (size_t i = 0; i < cols; i++)
    got_f[i] = bf16_value(got[i]);
  double err = rel_error(got_f, dcol, cols);
  g_test_message("gemm_bf16_out %d×%d×%d: relative error %.3g", rows, kc, out, err);
  if (!(err <= 3e-3 && err > 1e-4)) {
    g_test_message("FAILED gemm_bf16_out: relative error %.3g outside (1e-4, 3e-3]", err);
    g_test_fail();
  }
  /* col2im of exactly what the GPU wrote. */
  tdm_backend_col2im(cpu, dx_ref, got_f, n, h, w, c, k, k, pad, stride);
  tdm_backend_col2im_bf16(gpu, ddx, TDM_DTYPE_F32, dcol16, n, h, w, c, k, k, pad, stride);
  g_autofree char *what = g_strdup_printf("col2im_bf16 %d×%d×%d×%d k%d p%d s%d", n, h, w, c, k,
                                          pad, stride);
  check_close(what, ddx, dx_ref, xs, TOL);
  release(ddy);
  release(dw);
  release(dcol16);
  release(ddx);
}

/* A convolution's input gradient in one operation (conv_dgrad_bf16) against the CPU's
 * col2im of its float32 GEMM of the same bf16 values. Where the implicit kernel takes
 * the shape (stride 1, channels in 32s) nothing is rounded after the exact bf16
 * products, so only the order of float32 additions differs: TOL. Elsewhere the
 * operation goes through bf16 columns, rounded: 3e-3 as gemm_bf16_out above. The
 * tolerance thus also tells which path ran: columns would miss 1e-5 by 100× (the
 * implicit cases assume a GPU of sm_80 or later, as the H200 the suite runs on). */
static void
conv_dgrad_case(int n, int h, int w, int c, int out, int k, int pad, int stride,
                gboolean implicit)
{
  int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  int rows = n * oh * ow, kc = k * k * c;
  size_t ys = (size_t)rows * out, ws = (size_t)out * kc, cols = (size_t)rows * kc;
  size_t xs = (size_t)n * h * w * c;
  g_autofree float *dy = random_floats(ys, -1, 1), *wt = random_floats(ws, -1, 1);
  g_autofree uint16_t *dy16 = g_new(uint16_t, ys), *w16 = g_new(uint16_t, ws);
  for (size_t i = 0; i < ys; i++)
    dy[i] = bf16_value(dy16[i] = bf16_bits(dy[i]));
  for (size_t i = 0; i < ws; i++)
    wt[i] = bf16_value(w16[i] = bf16_bits(wt[i]));
  g_autofree float *dcol = g_new(float, cols), *dx_ref = g_new(float, xs);
  tdm_backend_gemm(cpu, false, false, rows, kc, out, 1.0f, dy, out, wt, kc, 0.0f, dcol, kc);
  tdm_backend_col2im(cpu, dx_ref, dcol, n, h, w, c, k, k, pad, stride);
  assert_ok(cpu);
  uint16_t *ddy = on(dy16, ys * 2), *dw = on(w16, ws * 2);
  uint16_t *dcol16 = (uint16_t *)poisoned(cols / 2 + 1);
  float *ddx = poisoned(xs);
  tdm_backend_conv_dgrad_bf16(gpu, ddx, TDM_DTYPE_F32, ddy, dw, dcol16, n, h, w, c, out, k, k,
                              pad, stride);
  g_autofree char *what = g_strdup_printf("conv_dgrad_bf16 %d×%d×%d×%d from %d k%d p%d s%d (%s)",
                                          n, h, w, c, out, k, pad, stride,
                                          implicit ? "implicit" : "columns");
  check_close(what, ddx, dx_ref, xs, implicit ? TOL : 3e-3);
  /* Into a bf16 dx (the gradient a bn backward reads so): the same float32 sums,
   * each rounded once as to_bf16 rounds, bit for bit. */
  uint16_t *ddx16 = on(NULL, xs * 2);
  tdm_backend_conv_dgrad_bf16(gpu, ddx16, TDM_DTYPE_BF16, ddy, dw, dcol16, n, h, w, c, out, k,
                              k, pad, stride);
  g_autofree float *dx_got = g_new(float, xs);
  tdm_backend_download(gpu, dx_got, ddx, xs * 4);
  g_autofree uint16_t *want16 = g_new(uint16_t, xs);
  for (size_t i = 0; i < xs; i++)
    want16[i] = bf16_bits(dx_got[i]);
  uint16_t *dwant16 = on(want16, xs * 2);
  same_bits(what, c, ddx16, dwant16, xs * 2);
  release(ddx16);
  release(dwant16);
  release(ddy);
  release(dw);
  release(dcol16);
  release(ddx);
}

static void
test_conv_dgrad_bf16(void)
{
  if (!have_gpu())
    return;
  g_assert_nonnull(gpu->ops->conv_dgrad_bf16);
  /* The resnet preset's convolutions with an input gradient. */
  conv_dgrad_case(512, 28, 28, 32, 64, 3, 1, 1, TRUE);   /* 32 channels a block */
  conv_dgrad_case(512, 14, 14, 64, 64, 3, 1, 1, TRUE);   /* 64 a block */
  conv_dgrad_case(512, 14, 14, 64, 128, 3, 1, 1, TRUE);
  conv_dgrad_case(512, 7, 7, 128, 256, 3, 1, 1, TRUE);
  conv_dgrad_case(512, 3, 3, 256, 256, 3, 1, 1, TRUE);   /* taps mostly off the edge */
  /* Rows not a multiple of the block's 64, no padding, a 1×1 kernel, a 5×5 one. */
  conv_dgrad_case(5, 7, 9, 64, 32, 3, 0, 1, TRUE);
  conv_dgrad_case(3, 5, 5, 32, 64, 1, 0, 1, TRUE);
  conv_dgrad_case(2, 11, 10, 96, 64, 5, 2, 1, TRUE);
  /* Shapes the kernel does not take: through columns. */
  conv_dgrad_case(2, 6, 6, 16, 32, 3, 1, 1, FALSE);     /* 16 channels */
  conv_dgrad_case(3, 9, 8, 32, 64, 3, 1, 2, FALSE);     /* strided */
  conv_dgrad_case(2, 6, 6, 32, 40, 3, 1, 1, FALSE);     /* 40 output channels */
}

static void
test_stored_bf16(void)
{
  if (!have_gpu())
    return;
  /* Rounding: random values, then ties (halfway between two bf16 numbers: to the
   * even one), the largest finite float (rounds up to infinity, as in CUDA), zeros. */
  size_t n = 100003;
  g_autofree float *v = random_floats(n, -100, 100);
  v[0] = 1.0f + 1.0f / 256.0f;            /* tie, rounds down to 1 (even) */
  v[1] = 1.0f + 3.0f / 256.0f;            /* tie, rounds up to 1 + 2⁻⁶ (even) */
  v[2] = -0.0f;
  v[3] = 3.4028235e38f;
  v[4] = 1e-40f;                          /* a subnormal */
  float *dv = on(v, n * 4);
  uint16_t *dh = (uint16_t *)poisoned(n / 2 + 1);
  tdm_backend_to_bf16(gpu, dh, dv, n);
  check_bits("to_bf16", dh, v, n);
  /* Four values a thread where both ends are aligned, n % 4 = 3 left for the tail;
   * one value a thread otherwise (the input one float off its 16-byte alignment). */
  tdm_backend_to_bf16(gpu, dh, dv + 1, n - 1);
  check_bits("to_bf16, misaligned input", dh, v + 1, n - 1);
  tdm_backend_to_bf16(gpu, dh, dv + 4, 6);
  check_bits("to_bf16, six values", dh, v + 4, 6);
  release(dv);
  release(dh);

  im2col_bf16_case(3, 7, 6, 8, 3, 1, 1);  /* four channels a thread */
  im2col_bf16_case(2, 9, 8, 3, 3, 1, 2);  /* one, strided */
  im2col_bf16_case(512, 28, 28, 32, 3, 1, 1); /* the resnet preset's second conv */

  gemm_stored_bf16_case(false, true, 512 * 49, 128, 576); /* a conv's forward */
  gemm_stored_bf16_case(true, false, 64, 288, 100352);    /* weight gradient: split-K */
  gemm_stored_bf16_case(true, false, 10, 27, 33);         /* small, odd */

  dgrad_bf16_case(512, 14, 14, 64, 64, 3, 1, 1);          /* the preset's first block */
  dgrad_bf16_case(3, 9, 8, 6, 5, 3, 1, 2);                /* strided, no float4 */
}

/* The CPU backend's bf16 operations are the reference (tdm-bf16.h's rounding, products
 * summed in float32): the same inputs on both backends. The roundings and the gathers
 * that round must give the same bits, special values included; a bn's bf16 gradient
 * is the rounding of two float32 computations that may differ in their last bits (an
 * FMA), so one bfloat16 step apart at most, 2⁻⁷ relative; the products, both within
 * γ_k · Σ|a·b| of the exact sum of the same bf16 operands (k · 2⁻²⁴ / (1 − k · 2⁻²⁴)),
 * within twice that of each other; col2im's sums within twice γ_{k²} · Σ|v|. */
static uint16_t *
bf16_on_both(TdmBackend *b, const float *host, size_t n)
{
  float *v = on_b(b, host, n * 4);
  uint16_t *h = on_b(b, NULL, n * 2);
  tdm_backend_to_bf16(b, h, v, n);
  tdm_backend_release(b, v);
  return h;
}

static void
compare_bits(const char *what, const uint16_t *on_cpu, const uint16_t *on_gpu, size_t n)
{
  g_autofree uint16_t *c = g_new(uint16_t, n), *g = g_new(uint16_t, n);
  tdm_backend_download(cpu, c, on_cpu, n * 2);
  tdm_backend_download(gpu, g, on_gpu, n * 2);
  assert_ok(cpu);
  assert_ok(gpu);
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++)
    wrong += c[i] != g[i];
  g_test_message("%s: %zu of %zu values differ from the CPU's", what, wrong, n);
  if (wrong > 0)
    g_test_fail();
}

static void
test_cpu_reference(void)
{
  if (!have_gpu())
    return;
  const size_t n = 65537;
  g_autofree float *v = random_floats(n, -50, 50);
  const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 3.4028235e38f, 1e-40f, -0.0f,
                           1.0f + 1.0f / 256.0f, 1.0f + 3.0f / 256.0f};
  memcpy(v, special, sizeof special);
  uint16_t *c16 = bf16_on_both(cpu, v, n), *g16 = bf16_on_both(gpu, v, n);
  compare_bits("to_bf16", c16, g16, n);
  tdm_backend_release(cpu, c16);
  release(g16);

  /* Columns, plain and of a bn's output, stride 2 and padding 2, 17 channels. */
  const int im = 3, h = 11, w = 9, c = 17, k = 3, pad = 2, stride = 2;
  const int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  const size_t xs = (size_t)im * h * w * c, cols = (size_t)im * oh * ow * k * k * c;
  g_autofree float *x = random_floats(xs, -3, 3), *bn = random_floats(4 * (size_t)c, -1, 1);
  for (int ch = 0; ch < c; ch++)
    bn[c + ch] = 0.5f + fabsf(bn[c + ch]);
  float *cx = on_b(cpu, x, xs * 4), *gx = on(x, xs * 4);
  float *cbn = on_b(cpu, bn, 4 * (size_t)c * 4), *gbn = on(bn, 4 * (size_t)c * 4);
  uint16_t *ccol = on_b(cpu, NULL, cols * 2), *gcol = on(NULL, cols * 2);
  tdm_backend_im2col_bf16(cpu, ccol, cx, TDM_DTYPE_F32, im, h, w, c, k, k, pad, stride);
  tdm_backend_im2col_bf16(gpu, gcol, gx, TDM_DTYPE_F32, im, h, w, c, k, k, pad, stride);
  compare_bits("im2col_bf16", ccol, gcol, cols);
  for (int relu = 0; relu < 2; relu++) {
    tdm_backend_im2col_bf16_bn(cpu, ccol, cx, TDM_DTYPE_F32, cbn, cbn + c, cbn + 2 * c,
                               cbn + 3 * c, relu, im, h, w, c, k, k, pad, stride);
    tdm_backend_im2col_bf16_bn(gpu, gcol, gx, TDM_DTYPE_F32, gbn, gbn + c, gbn + 2 * c,
                               gbn + 3 * c, relu, im, h, w, c, k, k, pad, stride);
    compare_bits(relu ? "im2col_bf16_bn, relu" : "im2col_bf16_bn", ccol, gcol, cols);
  }

  /* col2im from the same bf16 columns. */
  g_autofree uint16_t *colv = g_new(uint16_t, cols);
  tdm_backend_download(cpu, colv, ccol, cols * 2);
  float *cdx = on_b(cpu, NULL, xs * 4), *gdx = poisoned(xs);
  tdm_backend_col2im_bf16(cpu, cdx, TDM_DTYPE_F32, ccol, im, h, w, c, k, k, pad, stride);
  tdm_backend_col2im_bf16(gpu, gdx, TDM_DTYPE_F32, gcol, im, h, w, c, k, k, pad, stride);
  g_autofree float *dc = g_new(float, xs), *dg = g_new(float, xs);
  g_autofree double *mag = g_new0(double, xs);
  tdm_backend_download(cpu, dc, cdx, xs * 4);
  tdm_backend_download(gpu, dg, gdx, xs * 4);
  assert_ok(gpu);
  for (size_t i = 0; i < cols; i++) {
    /* Which pixel column i of row r reads: walk the rows as im2col lays them out. */
    size_t row = i / ((size_t)k * k * c), tap = i % ((size_t)k * k * c);
    int ox = (int)(row % ow), oy = (int)(row / ow % oh), n_ = (int)(row / ((size_t)ow * oh));
    int ky = (int)(tap / ((size_t)k * c)), kx = (int)(tap / c % k), ch = (int)(tap % c);
    int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
    if (iy >= 0 && iy < h && ix >= 0 && ix < w)
      mag[(((size_t)n_ * h + iy) * w + ix) * c + ch] += fabs(bf16_value(colv[i]));
  }
  const double u = 1.0 / 16777216.0, g9 = 9 * u / (1 - 9 * u);
  size_t wrong = 0;
  for (size_t i = 0; i < xs; i++)
    wrong += !(fabs((double)dc[i] - dg[i]) <= 2 * g9 * mag[i]);
  g_test_message("col2im_bf16: %zu of %zu sums outside the bound", wrong, xs);
  if (wrong > 0)
    g_test_fail();

  /* A bn's input gradient as bf16. */
  const int rows = 4099;
  g_autofree float *dy = random_floats((size_t)rows * c, -1, 1);
  g_autofree float *xr = random_floats((size_t)rows * c, -2, 2);
  g_autofree float *sums = random_floats(2 * (size_t)c, -1, 1);
  float *cdy = on_b(cpu, dy, (size_t)rows * c * 4), *gdy = on(dy, (size_t)rows * c * 4);
  float *cxr = on_b(cpu, xr, (size_t)rows * c * 4), *gxr = on(xr, (size_t)rows * c * 4);
  float *cs = on_b(cpu, sums, 2 * (size_t)c * 4), *gs = on(sums, 2 * (size_t)c * 4);
  uint16_t *cd16 = on_b(cpu, NULL, (size_t)rows * c * 2), *gd16 = on(NULL, (size_t)rows * c * 2);
  tdm_backend_bn_backward_dx_bf16(cpu, cd16, cdy, TDM_DTYPE_F32, cxr, TDM_DTYPE_F32, cbn,
                                  cbn + c, cbn + 2 * c, cbn + 3 * c, true, cs, cs + c,
                                  1.0f / rows, rows, c);
  tdm_backend_bn_backward_dx_bf16(gpu, gd16, gdy, TDM_DTYPE_F32, gxr, TDM_DTYPE_F32, gbn,
                                  gbn + c, gbn + 2 * c, gbn + 3 * c, true, gs, gs + c,
                                  1.0f / rows, rows, c);
  g_autofree uint16_t *b1 = g_new(uint16_t, (size_t)rows * c), *b2 = g_new(uint16_t, (size_t)rows * c);
  tdm_backend_download(cpu, b1, cd16, (size_t)rows * c * 2);
  tdm_backend_download(gpu, b2, gd16, (size_t)rows * c * 2);
  assert_ok(gpu);
  wrong = 0;
  for (size_t i = 0; i < (size_t)rows * c; i++) {
    double a = bf16_value(b1[i]), bb = bf16_value(b2[i]);
    wrong += !(fabs(a - bb) <= fabs(a) / 128 + 1e-30);
  }
  g_test_message("bn_backward_dx_bf16: %zu values more than a bf16 step from the CPU's", wrong);
  if (wrong > 0)
    g_test_fail();

  /* Products of the same bf16 operands: a conv's forward, and a weight gradient
   * long enough for split-K. */
  static const struct {
    bool ta, tb;
    int m, n, k;
  } shapes[] = {{false, true, 3000, 64, 576}, {true, false, 32, 40, 20000}};
  for (guint s = 0; s < G_N_ELEMENTS(shapes); s++) {
    const int m = shapes[s].m, nn = shapes[s].n, kk = shapes[s].k;
    const size_t as = (size_t)m * kk, bs = (size_t)kk * nn, cs2 = (size_t)m * nn;
    g_autofree float *a = random_floats(as, -1, 1), *bm = random_floats(bs, -1, 1);
    uint16_t *ca = bf16_on_both(cpu, a, as), *cb = bf16_on_both(cpu, bm, bs);
    uint16_t *ga = bf16_on_both(gpu, a, as), *gb = bf16_on_both(gpu, bm, bs);
    float *cc = on_b(cpu, NULL, cs2 * 4), *gc = poisoned(cs2);
    int lda = shapes[s].ta ? m : kk, ldb = shapes[s].tb ? kk : nn;
    tdm_backend_gemm_bf16(cpu, shapes[s].ta, shapes[s].tb, m, nn, kk, 1.0f, ca, lda, cb, ldb,
                          0.0f, cc, nn);
    tdm_backend_gemm_bf16(gpu, shapes[s].ta, shapes[s].tb, m, nn, kk, 1.0f, ga, lda, gb, ldb,
                          0.0f, gc, nn);
    g_autofree float *oc = g_new(float, cs2), *og = g_new(float, cs2);
    g_autofree uint16_t *ha = g_new(uint16_t, as), *hb = g_new(uint16_t, bs);
    tdm_backend_download(cpu, oc, cc, cs2 * 4);
    tdm_backend_download(cpu, ha, ca, as * 2);
    tdm_backend_download(cpu, hb, cb, bs * 2);
    tdm_backend_download(gpu, og, gc, cs2 * 4);
    assert_ok(gpu);
    const double gk = kk * u / (1 - kk * u);
    wrong = 0;
    for (int i = 0; i < m; i++)
      for (int j = 0; j < nn; j++) {
        double sum_abs = 0;
        for (int p = 0; p < kk; p++) {
          size_t ai = shapes[s].ta ? (size_t)p * lda + i : (size_t)i * lda + p;
          size_t bi = shapes[s].tb ? (size_t)j * ldb + p : (size_t)p * ldb + j;
          sum_abs += fabs((double)bf16_value(ha[ai]) * bf16_value(hb[bi]));
        }
        size_t at = (size_t)i * nn + j;
        wrong += !(fabs((double)oc[at] - og[at]) <= 2 * gk * sum_abs + 1e-30);
      }
    g_test_message("gemm_bf16 %d×%d×%d: %zu of %zu values outside the bound", m, nn, kk, wrong,
                   cs2);
    if (wrong > 0)
      g_test_fail();
    tdm_backend_release(cpu, ca);
    tdm_backend_release(cpu, cb);
    tdm_backend_release(cpu, cc);
    release(ga);
    release(gb);
    release(gc);
  }

  float *cpu_bufs[] = {cx, cbn, cdx, cdy, cxr, cs};
  for (guint i = 0; i < G_N_ELEMENTS(cpu_bufs); i++)
    tdm_backend_release(cpu, cpu_bufs[i]);
  tdm_backend_release(cpu, ccol);
  tdm_backend_release(cpu, cd16);
  void *gpu_bufs[] = {gx, gbn, gcol, gdx, gdy, gxr, gs, gd16};
  for (guint i = 0; i < G_N_ELEMENTS(gpu_bufs); i++)
    release(gpu_bufs[i]);
}

/* The bn operations and im2col_bf16_bn given a bf16 input (a conv's output stored as
 * bf16; for the backward also a bf16 output gradient, a conv's input gradient) against the same
 * kernels given its widened values as float32: bit for bit, since widening is exact and the
 * arithmetic after the load is the same; with 64 channels (four a thread) and 17 (one), and the
 * rows of many blocks. Then the forward against the CPU's of the same bf16 input: the
 * reference, within TOL. */
static void
bn_bf16_input_case(int n, int h, int w, int c)
{
  const int rows = n * h * w;
  const size_t count = (size_t)rows * c;
  g_autofree float *x = random_floats(count, 2, 6);
  g_autofree float *p = random_floats(6 * (size_t)c, -1, 1); /* mean … Σdγ, Σdβ */
  g_autofree uint16_t *h16 = g_new(uint16_t, count);
  for (size_t i = 0; i < count; i++) {
    h16[i] = bf16_bits(x[i]);
    x[i] = bf16_value(h16[i]);
  }
  for (int ch = 0; ch < c; ch++) {
    p[ch] += 4.0f;
    p[c + ch] = 0.5f + fabsf(p[c + ch]);
  }
  float *dx = on(x, count * 4), *dp = on(p, 6 * (size_t)c * 4);
  uint16_t *dx16 = on(h16, count * 2);
  g_autofree float *dyh = random_floats(count, -1, 1);
  g_autofree uint16_t *dyh16 = g_new(uint16_t, count);
  for (size_t i = 0; i < count; i++)
    dyh[i] = bf16_value(dyh16[i] = bf16_bits(dyh[i]));
  float *dy = on(dyh, count * 4);
  uint16_t *dy16 = on(dyh16, count * 2);
  float *got = poisoned(count), *want = poisoned(count);
  uint16_t *got16 = on(NULL, count * 2), *want16 = on(NULL, count * 2);
  const size_t slot = TDM_BN_SLOT_FLOATS(c);
  tdm_backend_bn_moments(gpu, got, dx16, TDM_DTYPE_BF16, rows, c, 0, 2);
  tdm_backend_bn_moments(gpu, want, dx, TDM_DTYPE_F32, rows, c, 0, 2);
  same_bits("bn_moments", c, got, want, 2 * slot * 4);
  for (int relu = 0; relu < 2; relu++) {
    tdm_backend_bn_forward(gpu, got, dx16, TDM_DTYPE_BF16, dp, dp + c, dp + 2 * c, dp + 3 * c,
                           rows, c, relu);
    tdm_backend_bn_forward(gpu, want, dx, TDM_DTYPE_F32, dp, dp + c, dp + 2 * c, dp + 3 * c,
                           rows, c, relu);
    same_bits("bn_forward", c, got, want, count * 4);
    /* The CPU's forward of the same input. */
    g_autofree float *ref = g_new(float, count);
    tdm_backend_bn_forward(cpu, ref, h16, TDM_DTYPE_BF16, p, p + c, p + 2 * c, p + 3 * c, rows,
                           c, relu);
    check_close("bn_forward of a bf16 input, against the CPU", got, ref, count, TOL);
    tdm_backend_bn_forward_eval(gpu, got, dx16, TDM_DTYPE_BF16, dp, dp + c, dp + 2 * c,
                                dp + 3 * c, 1e-5f, rows, c, relu);
    tdm_backend_bn_forward_eval(gpu, want, dx, TDM_DTYPE_F32, dp, dp + c, dp + 2 * c, dp + 3 * c,
                                1e-5f, rows, c, relu);
    same_bits("bn_forward_eval", c, got, want, count * 4);
    /* The backward with x, dy or both as bf16 (dy: a conv's input gradient). */
    for (int typed = 1; typed < 4; typed++) {
      const void *xa = typed & 1 ? (const void *)dx16 : dx;
      const void *dya = typed & 2 ? (const void *)dy16 : dy;
      TdmDtype xt = typed & 1 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
      TdmDtype dyt = typed & 2 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
      tdm_backend_bn_backward_sums(gpu, got, got + c, dya, dyt, xa, xt, dp, dp + c, dp + 2 * c,
                                   dp + 3 * c, relu, rows, c);
      tdm_backend_bn_backward_sums(gpu, want, want + c, dy, TDM_DTYPE_F32, dx, TDM_DTYPE_F32,
                                   dp, dp + c, dp + 2 * c, dp + 3 * c, relu, rows, c);
      same_bits("bn_backward_sums", c, got, want, 2 * (size_t)c * 4);
      tdm_backend_bn_backward_dx(gpu, got, dya, dyt, xa, xt, dp, dp + c, dp + 2 * c, dp + 3 * c,
                                 relu, dp + 4 * c, dp + 5 * c, 1.0f / rows, rows, c);
      tdm_backend_bn_backward_dx(gpu, want, dy, TDM_DTYPE_F32, dx, TDM_DTYPE_F32, dp, dp + c,
                                 dp + 2 * c, dp + 3 * c, relu, dp + 4 * c, dp + 5 * c,
                                 1.0f / rows, rows, c);
      same_bits("bn_backward_dx", c, got, want, count * 4);
      tdm_backend_bn_backward_dx_bf16(gpu, got16, dya, dyt, xa, xt, dp, dp + c, dp + 2 * c,
                                      dp + 3 * c, relu, dp + 4 * c, dp + 5 * c, 1.0f / rows,
                                      rows, c);
      tdm_backend_bn_backward_dx_bf16(gpu, want16, dy, TDM_DTYPE_F32, dx, TDM_DTYPE_F32, dp,
                                      dp + c, dp + 2 * c, dp + 3 * c, relu, dp + 4 * c,
                                      dp + 5 * c, 1.0f / rows, rows, c);
      same_bits("bn_backward_dx_bf16", c, got16, want16, count * 2);
      if (dyt == TDM_DTYPE_BF16) {
        /* In place over its bf16 dy (the stem's, tdm-replica-private.h's
         * bn_dx_in_place()): the same bits. */
        tdm_backend_copy(gpu, got16, dy16, count * 2);
        tdm_backend_bn_backward_dx_bf16(gpu, got16, got16, TDM_DTYPE_BF16, xa, xt, dp, dp + c,
                                        dp + 2 * c, dp + 3 * c, relu, dp + 4 * c, dp + 5 * c,
                                        1.0f / rows, rows, c);
        same_bits("bn_backward_dx_bf16 in place", c, got16, want16, count * 2);
      }
    }
    /* The columns of a 3×3 conv after the bn. */
    const size_t cols = (size_t)rows * 9 * c;
    uint16_t *col = on(NULL, cols * 2), *col_want = on(NULL, cols * 2);
    tdm_backend_im2col_bf16_bn(gpu, col, dx16, TDM_DTYPE_BF16, dp, dp + c, dp + 2 * c,
                               dp + 3 * c, relu, n, h, w, c, 3, 3, 1, 1);
    tdm_backend_im2col_bf16_bn(gpu, col_want, dx, TDM_DTYPE_F32, dp, dp + c, dp + 2 * c,
                               dp + 3 * c, relu, n, h, w, c, 3, 3, 1, 1);
    same_bits("im2col_bf16_bn", c, col, col_want, cols * 2);
    release(col);
    release(col_want);
  }
  void *all[] = {dx, dp, dx16, dy, dy16, got, want, got16, want16};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    release(all[i]);
}

static void
test_bn_bf16_input(void)
{
  if (!have_gpu())
    return;
  g_assert_true(tdm_backend_has_bn_bf16_input(gpu));
  bn_bf16_input_case(4, 16, 16, 64);
  bn_bf16_input_case(3, 11, 9, 17);
}

void
test_cuda_layers_add_bf16(void)
{
  g_test_add_func("/cuda-layers/gemm-bf16", test_gemm_bf16);
  g_test_add_func("/cuda-layers/stored-bf16", test_stored_bf16);
  g_test_add_func("/cuda-layers/cpu-bf16-reference", test_cpu_reference);
  g_test_add_func("/cuda-layers/conv-dgrad-bf16", test_conv_dgrad_bf16);
  g_test_add_func("/cuda-layers/fused", test_fused);
  g_test_add_func("/cuda-layers/bn-bf16-input", test_bn_bf16_input);
}

#endif /* TDM_HAVE_CUDA */
