/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-kernels.c — every CUDA backend operation against the CPU backend, plus
 * the CUDA-only machinery (test-cuda-kernels-machinery.c): graph capture and replay,
 * the upload ring, allocation counting and out-of-memory messages, and the peer
 * communicator.
 *
 * Inputs are fresh random numbers (g_test_rand_*, so --seed replays a run), never
 * zeros; GPU outputs are poisoned with NaN first so an element left unwritten fails.
 * Results are compared by relative error ||gpu − cpu|| / ||cpu||: 1e-5 for float32,
 * 1e-3 for TF32 GEMMs. Every test skips when no CUDA GPU is present, so CI without
 * one stays green. Per-operation timings are bench/bench-cuda-ops.c's.
 */
#include "tdm-backend.h"
#include "tdm-bf16.h"
#include "tdm-build-config.h"
#include "tdm-exact.h"

#if TDM_HAVE_CUDA

#include "test-cuda-kernels.h"

TdmBackend *cpu;
TdmBackend *gpu;
size_t gpu_base_bytes;

/* GEMM */

static void
gemm_case(TdmBackend *g, bool ta, bool tb, int m, int n, int k, float beta, double tol)
{
  int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
  size_t a_n = (size_t)(ta ? k : m) * lda, b_n = (size_t)(tb ? n : k) * ldb;
  size_t c_n = (size_t)m * ldc;
  g_autofree float *a = random_floats(a_n, -1, 1);
  g_autofree float *bm = random_floats(b_n, -1, 1);
  g_autofree float *c = beta != 0.0f ? random_floats(c_n, -1, 1) : g_new0(float, c_n);
  g_autofree float *ref = g_memdup2(c, c_n * sizeof(float));
  tdm_backend_gemm(cpu, ta, tb, m, n, k, 1.25f, a, lda, bm, ldb, beta, ref, ldc);
  assert_ok(cpu);

  float *da = on(g, a, a_n * 4), *db = on(g, bm, b_n * 4);
  /* beta = 0 must not read C: poison it. */
  float *dc = beta != 0.0f ? on(g, c, c_n * 4) : poisoned_on(g, c_n);
  tdm_backend_gemm(g, ta, tb, m, n, k, 1.25f, da, lda, db, ldb, beta, dc, ldc);
  assert_ok(g);
  g_autofree char *what = g_strdup_printf("gemm %s%s %d×%d×%d beta %g (%s)", ta ? "T" : "N",
                                          tb ? "T" : "N", m, n, k, beta,
                                          g->precision == TDM_PRECISION_TF32 ? "tf32" : "fp32");
  /* Only the m × n part of each ldc row is C; the padding is not compared. */
  g_autofree float *out = back(g, dc, c_n * 4);
  g_autofree float *o = g_new(float, (size_t)m * n);
  g_autofree float *r = g_new(float, (size_t)m * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      o[(size_t)i * n + j] = out[(size_t)i * ldc + j];
      r[(size_t)i * n + j] = ref[(size_t)i * ldc + j];
      g_assert_true(isfinite(o[(size_t)i * n + j]));
    }
  double err = rel_error(o, r, (size_t)m * n);
  g_test_message("%s: relative error %.3g", what, err);
  if (!(err <= tol))
    g_error("%s: relative error %.3g exceeds %.1g", what, err, tol);
  tdm_backend_release(g, da);
  tdm_backend_release(g, db);
  tdm_backend_release(g, dc);
}

static void
test_gemm(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  TdmBackend *tf32 = tdm_backend_cuda_new(0, TDM_PRECISION_TF32, &error);
  g_assert_no_error(error);
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    gemm_case(gpu, ta, tb, 67, 45, 129, 0.0f, TOL);
    gemm_case(gpu, ta, tb, 33, 70, 300, 0.5f, TOL);
    gemm_case(tf32, ta, tb, 67, 45, 129, 0.0f, TF32_TOL);
    gemm_case(tf32, ta, tb, 128, 256, 784, 0.5f, TF32_TOL);
  }
  gemm_case(gpu, false, true, 256, 1000, 784, 0.0f, TOL);
  tdm_backend_free(tf32);
}

/* Long reductions into small outputs go split-K (chunks, then their sum), tiny
 * outputs over shorter ones to a kernel of the backend's own (test_gemm's 67×45 and
 * 33×70 cases too): checked against a double reference, since over tens of thousands
 * of terms the CPU's float GEMM is no closer to the truth than the GPU's. */
static void
split_case(TdmBackend *g, bool ta, bool tb, int m, int n, int k, float beta, double tol)
{
  int lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
  size_t a_n = (size_t)(ta ? k : m) * lda, b_n = (size_t)(tb ? n : k) * ldb;
  size_t c_n = (size_t)m * ldc;
  g_autofree float *a = random_floats(a_n, -1, 1);
  g_autofree float *bm = random_floats(b_n, -1, 1);
  g_autofree float *c = random_floats(c_n, -1, 1);
  g_autofree float *ref = g_new(float, (size_t)m * n);
  g_autofree double *acc = g_new0(double, (size_t)m * n);
  for (int p = 0; p < k; p++)
    for (int i = 0; i < m; i++) {
      double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
      for (int j = 0; j < n; j++)
        acc[(size_t)i * n + j] += av * (tb ? bm[(size_t)j * ldb + p] : bm[(size_t)p * ldb + j]);
    }
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      ref[(size_t)i * n + j] = (float)(0.75 * acc[(size_t)i * n + j] +
                                       (beta != 0.0f ? beta * (double)c[(size_t)i * ldc + j] : 0));

  float *da = on(g, a, a_n * 4), *db = on(g, bm, b_n * 4);
  float *dc = beta != 0.0f ? on(g, c, c_n * 4) : poisoned_on(g, c_n);
  tdm_backend_gemm(g, ta, tb, m, n, k, 0.75f, da, lda, db, ldb, beta, dc, ldc);
  assert_ok(g);
  g_autofree float *out = back(g, dc, c_n * 4);
  g_autofree float *o = g_new(float, (size_t)m * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      o[(size_t)i * n + j] = out[(size_t)i * ldc + j];
      g_assert_true(isfinite(o[(size_t)i * n + j]));
    }
  /* The padding between rows of C is left alone. */
  for (int i = 0; i < m; i++)
    for (int j = n; j < ldc; j++)
      if (beta != 0.0f)
        g_assert_cmpfloat(out[(size_t)i * ldc + j], ==, c[(size_t)i * ldc + j]);
  double err = rel_error(o, ref, (size_t)m * n);
  g_test_message("long-k gemm %s%s %d×%d×%d beta %g (%s): relative error %.3g",
                 ta ? "T" : "N", tb ? "T" : "N", m, n, k, beta,
                 g->precision == TDM_PRECISION_TF32 ? "tf32" : "fp32", err);
  if (!(err <= tol))
    g_error("long-k gemm %d×%d×%d: relative error %.3g exceeds %.1g", m, n, k, err, tol);
  tdm_backend_release(g, da);
  tdm_backend_release(g, db);
  tdm_backend_release(g, dc);
}

static void
test_gemm_split_k(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  TdmBackend *tf32 = tdm_backend_cuda_new(0, TDM_PRECISION_TF32, &error);
  g_assert_no_error(error);
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    split_case(gpu, ta, tb, 19, 37, 9001, 0.0f, TOL);   /* a remainder for the last chunk */
    split_case(gpu, ta, tb, 19, 37, 9001, 0.5f, TOL);
  }
  split_case(gpu, true, false, 10, 128, 1024, 0.0f, TOL);   /* fc2 dW, batch 1024: small */
  split_case(gpu, true, false, 10, 128, 100, 0.5f, TOL);    /* fc2 dW, batch 100: small */
  split_case(gpu, true, false, 32, 9, 78400, 0.0f, TOL);    /* conv1 dW, batch 100 */
  split_case(gpu, true, false, 64, 288, 19600, 0.0f, TOL);  /* conv2 dW, batch 100 */
  split_case(tf32, true, false, 64, 288, 19600, 0.0f, TF32_TOL);
  tdm_backend_free(tf32);
}

/* Bias and ReLU */

static void
bias_case(int outer, int channels, int inner, bool relu)
{
  size_t n = (size_t)outer * channels * inner;
  g_autofree float *y = random_floats(n, -1, 1);
  g_autofree float *bias = random_floats(channels, -0.5, 0.5);
  g_autofree float *ref = g_memdup2(y, n * 4);
  tdm_backend_bias_forward(cpu, ref, bias, outer, channels, inner, relu);
  float *dy = on(gpu, y, n * 4), *db = on(gpu, bias, channels * 4);
  tdm_backend_bias_forward(gpu, dy, db, outer, channels, inner, relu);
  g_autofree char *what = g_strdup_printf("bias_forward %d×%d×%d%s", outer, channels, inner,
                                          relu ? " relu" : "");
  check_close(what, dy, ref, n, TOL);

  /* The gradient: fresh dy, dbias poisoned. */
  g_autofree float *grad = random_floats(n, -1, 1);
  g_autofree float *dbias_ref = g_new(float, channels);
  tdm_backend_bias_backward(cpu, dbias_ref, grad, outer, channels, inner);
  float *dgrad = on(gpu, grad, n * 4), *ddbias = poisoned(channels);
  tdm_backend_bias_backward(gpu, ddbias, dgrad, outer, channels, inner);
  g_autofree char *what2 = g_strdup_printf("bias_backward %d×%d×%d", outer, channels, inner);
  check_close(what2, ddbias, dbias_ref, channels, TOL);
  tdm_backend_release(gpu, dy);
  tdm_backend_release(gpu, db);
  tdm_backend_release(gpu, dgrad);
  tdm_backend_release(gpu, ddbias);
}

static void
test_bias(void)
{
  if (!have_gpu())
    return;
  bias_case(37, 24, 1, true);
  bias_case(37, 24, 1, false);
  bias_case(19, 10, 1, true);
  bias_case(5, 7, 13, true);
  bias_case(5, 7, 13, false);
  bias_case(50000, 32, 1, false);  /* two passes through the partial sums */
  bias_case(64, 3, 4096, false);   /* two passes, inner > 1 */
  bias_case(256, 1000, 1, true);
}

/* n floats starting at offset floats into their buffers: offset 1 takes the scalar
 * paths, offset 0 the float4 ones. */
static void
relu_case(size_t n, size_t offset)
{
  size_t total = n + offset;
  g_autofree float *x = random_floats(total, -1, 1);
  g_autofree float *ref = g_new(float, total);
  tdm_backend_relu_forward(cpu, ref, x, total);
  float *dx = on(gpu, x, total * 4), *dy = poisoned(total);
  tdm_backend_relu_forward(gpu, dy + offset, dx + offset, n);
  check_close("relu_forward", dy + offset, ref + offset, n, TOL);
  /* In place. */
  tdm_backend_relu_forward(gpu, dx + offset, dx + offset, n);
  check_close("relu_forward in place", dx + offset, ref + offset, n, TOL);

  g_autofree float *grad = random_floats(total, -1, 1);
  g_autofree float *gref = g_new(float, total);
  tdm_backend_relu_backward(cpu, gref, grad, ref, total);
  float *dgrad = on(gpu, grad, total * 4), *dout = poisoned(total);
  tdm_backend_relu_backward(gpu, dout + offset, dgrad + offset, dy + offset, n);
  check_close("relu_backward", dout + offset, gref + offset, n, TOL);
  tdm_backend_relu_backward(gpu, dgrad + offset, dgrad + offset, dy + offset, n);
  check_close("relu_backward in place", dgrad + offset, gref + offset, n, TOL);

  /* add and scale, the communicators' pair. */
  g_autofree float *a = random_floats(total, -1, 1);
  g_autofree float *aref = g_memdup2(a, total * 4);
  tdm_backend_add(cpu, aref, x, total);
  tdm_backend_scale(cpu, aref, 0.37f, total);
  float *da = on(gpu, a, total * 4);
  float *dx2 = on(gpu, x, total * 4);
  tdm_backend_add(gpu, da + offset, dx2 + offset, n);
  tdm_backend_scale(gpu, da + offset, 0.37f, n);
  check_close("add then scale", da + offset, aref + offset, n, TOL);

  tdm_backend_release(gpu, dx);
  tdm_backend_release(gpu, dy);
  tdm_backend_release(gpu, dgrad);
  tdm_backend_release(gpu, dout);
  tdm_backend_release(gpu, da);
  tdm_backend_release(gpu, dx2);
}

static void
test_elementwise(void)
{
  if (!have_gpu())
    return;
  relu_case(100003, 0);
  relu_case(100003, 1);
  relu_case(3, 0);
}

/* Convolution and pooling */

static void
conv_case(int n, int h, int w, int c, int k, int pad)
{
  int oh = h + 2 * pad - k + 1, ow = w + 2 * pad - k + 1;
  size_t xs = (size_t)n * h * w * c, cols = (size_t)n * oh * ow * c * k * k;
  g_autofree float *x = random_floats(xs, -1, 1);
  g_autofree float *col_ref = g_new(float, cols);
  tdm_backend_im2col(cpu, col_ref, x, n, h, w, c, k, k, pad, 1);
  float *dx = on(gpu, x, xs * 4), *dcol = poisoned(cols);
  tdm_backend_im2col(gpu, dcol, dx, n, h, w, c, k, k, pad, 1);
  g_autofree char *what = g_strdup_printf("im2col n%d %dx%dx%d k%d pad%d", n, h, w, c, k, pad);
  check_close(what, dcol, col_ref, cols, TOL);

  g_autofree float *col = random_floats(cols, -1, 1);
  g_autofree float *dx_ref = g_new(float, xs);
  tdm_backend_col2im(cpu, dx_ref, col, n, h, w, c, k, k, pad, 1);
  float *dcol2 = on(gpu, col, cols * 4), *ddx = poisoned(xs);
  tdm_backend_col2im(gpu, ddx, dcol2, n, h, w, c, k, k, pad, 1);
  g_autofree char *what2 = g_strdup_printf("col2im n%d %dx%dx%d k%d pad%d", n, h, w, c, k, pad);
  check_close(what2, ddx, dx_ref, xs, TOL);
  tdm_backend_release(gpu, dx);
  tdm_backend_release(gpu, dcol);
  tdm_backend_release(gpu, dcol2);
  tdm_backend_release(gpu, ddx);
}

static void
test_conv(void)
{
  if (!have_gpu())
    return;
  conv_case(3, 9, 7, 5, 3, 1);
  conv_case(2, 6, 6, 1, 5, 0);
  conv_case(2, 5, 8, 4, 3, 2);
  conv_case(16, 28, 28, 32, 3, 1);
  conv_case(8, 28, 28, 1, 3, 1);    /* a first layer: 9 columns */
  conv_case(1, 4, 4, 1000, 3, 1);   /* 2250 float4s a row: the table, 30 lanes a row */
  conv_case(1, 4, 4, 1001, 3, 1);   /* 9009 columns: past the table, the plain kernel */
}

/* fold: the conv's bias and ReLU applied by the pool, the gradient masked by y. */
static void
pool_case_full(int n, int h, int w, int c, int k, gboolean fold)
{
  int ph = h / k, pw = w / k;
  size_t xs = (size_t)n * h * w * c, ys = (size_t)n * ph * pw * c;
  g_autofree float *x = random_floats(xs, -1, 1);
  g_autofree float *bias = random_floats(c, -0.5, 0.5);
  g_autofree float *y_ref = g_new(float, ys);
  g_autofree int32_t *arg_ref = g_new(int32_t, ys);
  tdm_backend_maxpool_forward(cpu, y_ref, arg_ref, x, fold ? bias : NULL, fold, n, h, w, c, k);
  float *dx = on(gpu, x, xs * 4), *dy = poisoned(ys), *dbias = on(gpu, bias, c * 4);
  int32_t *darg = on(gpu, NULL, ys * 4);
  tdm_backend_zero(gpu, darg, ys * 4);
  tdm_backend_maxpool_forward(gpu, dy, darg, dx, fold ? dbias : NULL, fold, n, h, w, c, k);
  g_autofree char *what = g_strdup_printf("maxpool_forward n%d %dx%dx%d k%d%s", n, h, w, c, k,
                                          fold ? " bias+relu" : "");
  check_close(what, dy, y_ref, ys, TOL);
  check_ints("maxpool argmax", darg, arg_ref, ys);

  g_autofree float *g = random_floats(ys, -1, 1);
  g_autofree float *gx_ref = g_new(float, xs);
  g_autofree float *gb_ref = g_new(float, c);
  tdm_backend_maxpool_backward(cpu, gx_ref, fold ? gb_ref : NULL, g, arg_ref,
                               fold ? y_ref : NULL, n, h, w, c, k);
  float *dg = on(gpu, g, ys * 4), *dgx = poisoned(xs), *dgb = poisoned(c);
  tdm_backend_maxpool_backward(gpu, dgx, fold ? dgb : NULL, dg, darg, fold ? dy : NULL, n, h, w,
                               c, k);
  g_autofree char *what2 = g_strdup_printf("maxpool_backward n%d %dx%dx%d k%d%s", n, h, w, c,
                                           k, fold ? " masked" : "");
  check_close(what2, dgx, gx_ref, xs, TOL);
  if (fold) {
    g_autofree char *what3 = g_strdup_printf("maxpool_backward dbias n%d %dx%dx%d k%d", n, h,
                                             w, c, k);
    check_close(what3, dgb, gb_ref, c, TOL);
  }
  tdm_backend_release(gpu, dgb);
  tdm_backend_release(gpu, dx);
  tdm_backend_release(gpu, dy);
  tdm_backend_release(gpu, dbias);
  tdm_backend_release(gpu, darg);
  tdm_backend_release(gpu, dg);
  tdm_backend_release(gpu, dgx);
}

static void
pool_case(int n, int h, int w, int c, int k)
{
  pool_case_full(n, h, w, c, k, FALSE);
  pool_case_full(n, h, w, c, k, TRUE);
}

static void
test_maxpool(void)
{
  if (!have_gpu())
    return;
  pool_case(3, 8, 10, 6, 2);
  pool_case(2, 7, 9, 5, 3);   /* edges past the last whole window */
  pool_case(32, 28, 28, 32, 2);
  pool_case(4, 9, 6, 8, 3);   /* float4 channels, whole windows of 3 */
  pool_case(2, 7, 8, 12, 2);  /* float4 channels, a row past the last window */
}

/* conv_pool: the first layer's conv, bias, ReLU and pool in one operation. The
 * backward gets the CPU's argmax on both sides, so that a window whose two values
 * differ by rounding alone sends the gradient to the same place. */
static void
conv_pool_case(int n, int h, int w, int c, int out, int k, int pad, int pk, gboolean relu)
{
  int oh = h + 2 * pad - k + 1, ow = w + 2 * pad - k + 1, ph = oh / pk, pw = ow / pk;
  int taps = k * k * c;
  size_t xs = (size_t)n * h * w * c, ys = (size_t)n * ph * pw * out, ws = (size_t)out * taps;
  g_autofree float *x = random_floats(xs, -1, 1);
  g_autofree float *wt = random_floats(ws, -1, 1);
  g_autofree float *bias = random_floats(out, -0.5, 0.5);
  g_autofree float *y_ref = g_new(float, ys);
  g_autofree int32_t *arg_ref = g_new(int32_t, ys);
  tdm_backend_conv_pool_forward(cpu, y_ref, arg_ref, x, wt, bias, relu, n, h, w, c, out, k, k,
                                pad, pk);
  float *dx = on(gpu, x, xs * 4), *dwt = on(gpu, wt, ws * 4), *dbias = on(gpu, bias, out * 4);
  float *dy = poisoned(ys);
  int32_t *darg = on(gpu, NULL, ys * 4);
  tdm_backend_conv_pool_forward(gpu, dy, darg, dx, dwt, dbias, relu, n, h, w, c, out, k, k, pad,
                                pk);
  g_autofree char *what = g_strdup_printf("conv_pool_forward n%d %dx%dx%d→%d k%d pool%d%s", n,
                                          h, w, c, out, k, pk, relu ? " relu" : "");
  check_close(what, dy, y_ref, ys, TOL);
  g_autofree int32_t *arg = back(gpu, darg, ys * 4);
  size_t differ = 0;
  for (size_t i = 0; i < ys; i++)
    differ += arg[i] != arg_ref[i];
  g_test_message("%s: %zu of %zu choices differ (ties within rounding)", what, differ, ys);
  g_assert_cmpuint(differ, <=, ys / 10000 + 1);

  g_autofree float *g = random_floats(ys, -1, 1);
  g_autofree float *gw_ref = g_new(float, ws);
  g_autofree float *gb_ref = g_new(float, out);
  tdm_backend_conv_pool_backward(cpu, gw_ref, gb_ref, g, arg_ref, y_ref, x, relu, n, h, w, c,
                                 out, k, k, pad, pk);
  float *dg = on(gpu, g, ys * 4), *dyr = on(gpu, y_ref, ys * 4);
  int32_t *dargr = on(gpu, arg_ref, ys * 4);
  float *dgw = poisoned(ws), *dgb = poisoned(out);
  tdm_backend_conv_pool_backward(gpu, dgw, dgb, dg, dargr, dyr, dx, relu, n, h, w, c, out, k, k,
                                 pad, pk);
  g_autofree char *what2 = g_strdup_printf("conv_pool_backward dw n%d %dx%dx%d→%d k%d pool%d",
                                           n, h, w, c, out, k, pk);
  check_close(what2, dgw, gw_ref, ws, TOL);
  check_close("conv_pool_backward dbias", dgb, gb_ref, out, TOL);
  void *all[] = {dx, dwt, dbias, dy, darg, dg, dyr, dargr, dgw, dgb};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(gpu, all[i]);
}

static void
test_conv_pool(void)
{
  if (!have_gpu())
    return;
  conv_pool_case(64, 28, 28, 1, 32, 3, 1, 2, TRUE);   /* the cnn's first layer */
  conv_pool_case(5, 9, 11, 1, 6, 3, 1, 2, TRUE);      /* out % 4 != 0, odd sizes */
  conv_pool_case(3, 10, 9, 1, 8, 3, 0, 2, FALSE);     /* no padding, a column dropped */
  conv_pool_case(4, 12, 12, 3, 16, 3, 1, 2, TRUE);    /* RGB: 27 taps */
  conv_pool_case(3, 10, 10, 1, 8, 5, 2, 3, FALSE);    /* 25 taps, windows of 3, no ReLU */
}

/* Softmax cross-entropy */

static void
softmax_case(int rows, int classes, bool with_grad)
{
  size_t n = (size_t)rows * classes;
  g_autofree float *logits = random_floats(n, -4, 4);
  g_autofree int32_t *labels = g_new(int32_t, rows);
  for (int i = 0; i < rows; i++)
    labels[i] = g_test_rand_int_range(0, classes);
  float scale = 1.0f / rows;
  TdmMetrics m_ref = {1.5, 2.0}; /* added into, not overwritten */
  g_autofree float *d_ref = with_grad ? g_new(float, n) : NULL;
  tdm_backend_softmax_xent(cpu, logits, labels, rows, classes, 0.0f, scale, d_ref, &m_ref);
  assert_ok(cpu);

  float *dl = on(gpu, logits, n * 4);
  int32_t *dlab = on(gpu, labels, rows * 4);
  TdmMetrics m0 = {1.5, 2.0};
  TdmMetrics *dm = on(gpu, &m0, sizeof m0);
  float *dd = with_grad ? poisoned(n) : NULL;
  tdm_backend_softmax_xent(gpu, dl, dlab, rows, classes, 0.0f, scale, dd, dm);
  TdmMetrics m;
  tdm_backend_download(gpu, &m, dm, sizeof m);
  assert_ok(gpu);
  g_test_message("softmax %d×%d: loss %.9g vs %.9g, correct %g vs %g", rows, classes,
                 m.loss_sum, m_ref.loss_sum, m.correct, m_ref.correct);
  g_assert_cmpfloat(fabs(m.loss_sum - m_ref.loss_sum), <=, 1e-5 * fabs(m_ref.loss_sum));
  g_assert_cmpfloat(m.correct, ==, m_ref.correct);
  if (with_grad)
    check_close("softmax_xent dlogits", dd, d_ref, n, TOL);
  tdm_backend_release(gpu, dl);
  tdm_backend_release(gpu, dlab);
  tdm_backend_release(gpu, dm);
  tdm_backend_release(gpu, dd);
}

static void
test_softmax(void)
{
  if (!have_gpu())
    return;
  softmax_case(300, 10, true);
  softmax_case(300, 10, false);
  softmax_case(33, 1000, true);
  softmax_case(5, 3, true);
}

/* Gather */

static void
gather_case(int samples, int sample_size, int count, bool with_labels)
{
  size_t bytes = (size_t)samples * sample_size;
  g_autofree uint8_t *images = g_new(uint8_t, bytes);
  g_autofree uint8_t *labels = g_new(uint8_t, samples);
  for (size_t i = 0; i < bytes; i++)
    images[i] = (uint8_t)g_test_rand_int_range(0, 256);
  for (int i = 0; i < samples; i++)
    labels[i] = (uint8_t)g_test_rand_int_range(0, 10);
  g_autofree int32_t *indices = g_new(int32_t, count);
  for (int i = 0; i < count; i++)
    indices[i] = g_test_rand_int_range(0, samples);
  size_t xs = (size_t)count * sample_size;
  g_autofree float *x_ref = g_new(float, xs);
  g_autofree int32_t *y_ref = g_new(int32_t, count);
  tdm_backend_gather(cpu, x_ref, y_ref, images, labels, indices, count, sample_size,
                     1.0f / 255.0f);

  uint8_t *dimg = on(gpu, images, bytes), *dlab = on(gpu, labels, samples);
  int32_t *didx = on(gpu, indices, count * 4);
  float *dx = poisoned(xs);
  int32_t *dy = with_labels ? on(gpu, NULL, count * 4) : NULL;
  tdm_backend_gather(gpu, dx, dy, dimg, dlab, didx, count, sample_size, 1.0f / 255.0f);
  check_close("gather x", dx, x_ref, xs, 0.0);
  if (with_labels)
    check_ints("gather y", dy, y_ref, count);
  tdm_backend_release(gpu, dimg);
  tdm_backend_release(gpu, dlab);
  tdm_backend_release(gpu, didx);
  tdm_backend_release(gpu, dx);
  tdm_backend_release(gpu, dy);
}

static void
test_gather(void)
{
  if (!have_gpu())
    return;
  gather_case(1000, 784, 200, true);   /* four pixels a thread */
  gather_case(500, 75, 77, true);      /* one pixel a thread */
  gather_case(300, 3072, 64, false);   /* no labels wanted */
}

/* Optimizers */

static void
optimizer_case(size_t n, size_t offset)
{
  size_t total = n + offset;
  g_autofree float *p = random_floats(total, -1, 1);
  g_autofree float *g = random_floats(total, -1, 1);
  g_autofree float *s1 = random_floats(total, -0.1, 0.1);
  g_autofree float *s2 = random_floats(total, 0.0, 0.01);
  float *dp = on(gpu, p, total * 4), *dg = on(gpu, g, total * 4);
  float *ds1 = on(gpu, s1, total * 4), *ds2 = on(gpu, s2, total * 4);
  g_autofree float *rp = g_memdup2(p, total * 4);
  g_autofree float *r1 = g_memdup2(s1, total * 4);
  g_autofree float *r2 = g_memdup2(s2, total * 4);

  for (int step = 0; step < 3; step++) {
    tdm_backend_sgd_update(cpu, rp + offset, g + offset, n, 0.05f, 1e-4f, NULL);
    tdm_backend_sgd_update(gpu, dp + offset, dg + offset, n, 0.05f, 1e-4f, NULL);
  }
  check_close("sgd", dp + offset, rp + offset, n, TOL);

  for (int step = 0; step < 3; step++) {
    tdm_backend_momentum_update(cpu, rp + offset, g + offset, r1 + offset, n, 0.01f, 0.9f,
                                5e-4f, NULL);
    tdm_backend_momentum_update(gpu, dp + offset, dg + offset, ds1 + offset, n, 0.01f, 0.9f,
                                5e-4f, NULL);
  }
  check_close("momentum p", dp + offset, rp + offset, n, TOL);
  check_close("momentum v", ds1 + offset, r1 + offset, n, TOL);

  for (int step = 1; step <= 3; step++) {
    float lr_t = 1e-3f * sqrtf(1.0f - powf(0.999f, step)) / (1.0f - powf(0.9f, step));
    tdm_backend_adam_update(cpu, rp + offset, g + offset, r1 + offset, r2 + offset, n, lr_t,
                            0.9f, 0.999f, 1e-8f, 1e-4f, NULL);
    tdm_backend_adam_update(gpu, dp + offset, dg + offset, ds1 + offset, ds2 + offset, n, lr_t,
                            0.9f, 0.999f, 1e-8f, 1e-4f, NULL);
  }
  check_close("adam p", dp + offset, rp + offset, n, TOL);
  check_close("adam m", ds1 + offset, r1 + offset, n, TOL);
  check_close("adam v", ds2 + offset, r2 + offset, n, TOL);
  tdm_backend_release(gpu, dp);
  tdm_backend_release(gpu, dg);
  tdm_backend_release(gpu, ds1);
  tdm_backend_release(gpu, ds2);
}

/* Each update with its rate and momentum read from device memory (what a step's graph
 * replays) gives the bits of the same update given them as arguments, the float4 path
 * and the scalar one (an odd offset). */
static void
test_optimizer_rates(void)
{
  if (!have_gpu())
    return;
  const size_t sizes[2][2] = {{100003, 0}, {1001, 1}};
  for (int c = 0; c < 2; c++) {
    size_t n = sizes[c][0], offset = sizes[c][1], total = n + offset;
    g_autofree float *p = random_floats(total, -1, 1);
    g_autofree float *g = random_floats(total, -1, 1);
    g_autofree float *s = random_floats(total, 0.0, 0.01);
    g_autofree uint8_t *mask = g_new(uint8_t, total);
    for (size_t i = 0; i < total; i++)
      mask[i] = i % 3 != 0;
    float *a[3], *b[3];
    for (int k = 0; k < 3; k++) {
      a[k] = on(gpu, k == 0 ? p : s, total * 4);
      b[k] = on(gpu, k == 0 ? p : s, total * 4);
    }
    float *dg = on(gpu, g, total * 4);
    uint8_t *dmask = on(gpu, mask, total);
    float *rates = on(gpu, (float[2]){0, 0}, 2 * sizeof(float));
    for (int step = 1; step <= 3; step++) {
      float lr = 0.01f / step, mu = 0.9f - 0.05f * step;
      tdm_backend_upload(gpu, rates, (float[2]){lr, mu}, 2 * sizeof(float));
      tdm_backend_sgd_update(gpu, a[0] + offset, dg + offset, n, lr, 1e-4f, NULL);
      tdm_backend_sgd_update(gpu, b[0] + offset, dg + offset, n, 0, 1e-4f, rates);
      tdm_backend_momentum_update(gpu, a[0] + offset, dg + offset, a[1] + offset, n, lr, mu,
                                  5e-4f, NULL);
      tdm_backend_momentum_update(gpu, b[0] + offset, dg + offset, b[1] + offset, n, 0, 0,
                                  5e-4f, rates);
      tdm_backend_sgd_momentum_update(gpu, a[0] + offset, dg + offset, a[1] + offset,
                                      dmask + offset, n, lr, mu, 5e-4f, true, NULL);
      tdm_backend_sgd_momentum_update(gpu, b[0] + offset, dg + offset, b[1] + offset,
                                      dmask + offset, n, 0, 0, 5e-4f, true, rates);
      tdm_backend_adam_update(gpu, a[0] + offset, dg + offset, a[1] + offset, a[2] + offset, n,
                              lr, mu, 0.999f, 1e-8f, 1e-4f, NULL);
      tdm_backend_adam_update(gpu, b[0] + offset, dg + offset, b[1] + offset, b[2] + offset, n,
                              0, 0, 0.999f, 1e-8f, 1e-4f, rates);
    }
    for (int k = 0; k < 3; k++) {
      g_autofree float *x = back(gpu, a[k], total * 4);
      g_autofree float *y = back(gpu, b[k], total * 4);
      g_assert_cmpmem(x, total * 4, y, total * 4);
      tdm_backend_release(gpu, a[k]);
      tdm_backend_release(gpu, b[k]);
    }
    tdm_backend_release(gpu, dg);
    tdm_backend_release(gpu, dmask);
    tdm_backend_release(gpu, rates);
  }
  g_assert_true(tdm_backend_check(gpu, NULL));
}

static void
test_optimizers(void)
{
  if (!have_gpu())
    return;
  optimizer_case(1000003, 0);
  optimizer_case(100001, 1);
  optimizer_case(2, 0);
}

/* Exact mode's fixed-point addition on the device against tdm_exact_add() on the host:
 * the same int64 limbs, bit for bit, added into sums that were not zero, and the same
 * count of values left out, over floats of every exponent, both signs, subnormals,
 * zeros, the limit's neighbours, infinities and NaN. */
/* deviation (the compare family): the GPU's Σ (x − ref)² and Σ ref² against the CPU's,
 * float32 and bf16, a million values and an odd count (the grid's strands end
 * unevenly). Both sum positive terms in double, each within n·2⁻⁵³ of the exact sum
 * whatever the order, so within 2n·2⁻⁵³ of each other; values whose sums are exact in
 * double (small integers ± 2⁻⁵) give the same sums bit for bit; the same bits twice; a
 * NaN in x shows; no values, zeros. */
static void
test_deviation(void)
{
  if (!have_gpu())
    return;
  const size_t n = 1000003;
  g_autofree float *x = random_floats(n, -2, 2);
  g_autofree float *ref = random_floats(n, -2, 2);
  for (size_t i = 0; i < n; i++)
    x[i] = ref[i] + x[i] * 0x1p-7f;
  g_autofree uint16_t *x16 = g_new(uint16_t, n);
  g_autofree uint16_t *ref16 = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++) {
    x16[i] = tdm_bf16_round(x[i]);
    ref16[i] = tdm_bf16_round(ref[i]);
  }
  double *work = on(gpu, NULL, TDM_DEVIATION_WORK_DOUBLES * sizeof(double));
  double host[2];
  for (int type = TDM_DTYPE_F32; type <= TDM_DTYPE_BF16; type++) {
    size_t size = type == TDM_DTYPE_BF16 ? 2 : 4;
    const void *hx = type == TDM_DTYPE_BF16 ? (const void *)x16 : (const void *)x;
    const void *hr = type == TDM_DTYPE_BF16 ? (const void *)ref16 : (const void *)ref;
    void *dx = on(gpu, hx, n * size), *dr = on(gpu, hr, n * size);
    tdm_backend_deviation(cpu, host, hx, hr, type, n);
    double got[2][2];
    for (int run = 0; run < 2; run++) {
      tdm_backend_deviation(gpu, work, dx, dr, type, n);
      tdm_backend_download(gpu, got[run], work, sizeof got[run]);
    }
    assert_ok(gpu);
    g_test_message("deviation %s: GPU %.17g %.17g, CPU %.17g %.17g", type ? "bf16" : "fp32",
                   got[0][0], got[0][1], host[0], host[1]);
    g_assert_cmpmem(got[0], sizeof got[0], got[1], sizeof got[1]);
    for (int k = 0; k < 2; k++) {
      g_assert_cmpfloat(host[k], >, 0.0);
      g_assert_cmpfloat(fabs(got[0][k] - host[k]), <=, 2.0 * n * 0x1p-53 * host[k]);
    }
    tdm_backend_release(gpu, dx);
    tdm_backend_release(gpu, dr);
  }
  /* Exact sums. */
  for (size_t i = 0; i < n; i++) {
    ref[i] = (float)((int)(i % 7) - 3);
    x[i] = ref[i] + (float)((int)(i % 3) - 1) * 0x1p-5f;
  }
  float *dx = on(gpu, x, n * 4), *dr = on(gpu, ref, n * 4);
  tdm_backend_deviation(cpu, host, x, ref, TDM_DTYPE_F32, n);
  double got[2];
  tdm_backend_deviation(gpu, work, dx, dr, TDM_DTYPE_F32, n);
  tdm_backend_download(gpu, got, work, sizeof got);
  g_assert_cmpfloat(got[0], ==, host[0]);
  g_assert_cmpfloat(got[1], ==, host[1]);
  /* A NaN, and no values. */
  float nan = NAN;
  tdm_backend_upload(gpu, dx + n / 3, &nan, sizeof nan);
  tdm_backend_deviation(gpu, work, dx, dr, TDM_DTYPE_F32, n);
  tdm_backend_download(gpu, got, work, sizeof got);
  g_assert_true(isnan(got[0]));
  g_assert_cmpfloat(got[1], ==, host[1]);
  tdm_backend_deviation(gpu, work, dx, dr, TDM_DTYPE_F32, 0);
  tdm_backend_download(gpu, got, work, sizeof got);
  assert_ok(gpu);
  g_assert_cmpfloat(got[0], ==, 0.0);
  g_assert_cmpfloat(got[1], ==, 0.0);
  tdm_backend_release(gpu, dx);
  tdm_backend_release(gpu, dr);
  tdm_backend_release(gpu, work);
}

static void
test_exact_add(void)
{
  if (!have_gpu())
    return;
  const size_t n = 1000003;
  g_autofree float *x = g_new(float, n);
  for (size_t i = 0; i < n; i++) {
    guint32 bits = g_test_rand_int();
    memcpy(&x[i], &bits, sizeof bits);
    if (i % 3 == 0)
      x[i] = (float)g_test_rand_double_range(-2, 2);
  }
  const float special[] = {0.0f, -0.0f, 1.4e-45f, -1.4e-45f, 0x1p-65f, 0x1p-64f, -0x1p-64f,
                           0x1.fffffep13f, -0x1.fffffep13f, 0x1p14f, -0x1p14f, INFINITY,
                           -INFINITY, NAN, 1.0f, -1.0f, 0x1.8p-40f, -0x1.8p-40f};
  memcpy(x, special, sizeof special);
  g_autofree gint64 *want = g_new(gint64, 2 * n + 1);
  for (size_t i = 0; i < 2 * n; i++)
    want[i] = (gint64)g_test_rand_int_range(-1000000, 1000000) << 20;
  want[2 * n] = 5;
  float *dx = on(gpu, x, n * sizeof(float));
  gint64 *dacc = on(gpu, want, (2 * n + 1) * sizeof(gint64));
  size_t bad = 0;
  for (int twice = 0; twice < 2; twice++) {
    bad += tdm_exact_add(want, x, n);
    tdm_backend_exact_add(gpu, dacc, dx, n, dacc + 2 * n);
  }
  want[2 * n] += (gint64)bad;
  assert_ok(gpu);
  g_autofree gint64 *got = back(gpu, dacc, (2 * n + 1) * sizeof(gint64));
  size_t differ = 0;
  for (size_t i = 0; i < 2 * n; i++)
    differ += got[i] != want[i];
  g_test_message("exact_add: %zu of %zu limbs differ from the host's; %" G_GINT64_FORMAT
                 " values left out (host %zu)", differ, 2 * n, got[2 * n] - 5, bad);
  g_assert_cmpuint(differ, ==, 0);
  g_assert_cmpint(got[2 * n], ==, want[2 * n]);
  g_assert_cmpuint(bad, >, 0);
  tdm_backend_release(gpu, dx);
  tdm_backend_release(gpu, dacc);
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
    gpu_base_bytes = gpu->bytes_in_use;
  }

  g_test_add_func("/cuda/gemm", test_gemm);
  g_test_add_func("/cuda/gemm-split-k", test_gemm_split_k);
  g_test_add_func("/cuda/bias", test_bias);
  g_test_add_func("/cuda/elementwise", test_elementwise);
  g_test_add_func("/cuda/conv", test_conv);
  g_test_add_func("/cuda/maxpool", test_maxpool);
  g_test_add_func("/cuda/conv-pool", test_conv_pool);
  g_test_add_func("/cuda/softmax-xent", test_softmax);
  g_test_add_func("/cuda/gather", test_gather);
  g_test_add_func("/cuda/optimizers", test_optimizers);
  g_test_add_func("/cuda/optimizer-rates", test_optimizer_rates);
  g_test_add_func("/cuda/exact-add", test_exact_add);
  g_test_add_func("/cuda/deviation", test_deviation);
  test_cuda_add_machinery();

  int status = g_test_run();
  if (gpu != NULL) {
    /* Every test gave back what it took. */
    g_assert_cmpuint(gpu->bytes_in_use, ==, gpu_base_bytes);
    tdm_backend_free(gpu);
  }
  tdm_backend_free(cpu);
  return status;
}

#else /* !TDM_HAVE_CUDA */

static void
test_no_cuda(void)
{
  g_assert_false(tdm_backend_cuda_available());
  g_test_skip("no CUDA GPU (this build has no CUDA backend)");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cuda/none", test_no_cuda);
  return g_test_run();
}

#endif
