/* test-cuda-kernels.c — every CUDA backend operation against the CPU backend, plus
 * the CUDA-only machinery: graph capture and replay, the upload ring, allocation
 * counting and out-of-memory messages, and the peer communicator.
 *
 * Inputs are fresh random numbers (g_test_rand_*, so --seed replays a run), never
 * zeros; GPU outputs are poisoned with NaN first so an element left unwritten fails.
 * Results are compared by relative error ||gpu − cpu|| / ||cpu||: 1e-5 for float32,
 * 1e-3 for TF32 GEMMs. Every test skips when no CUDA GPU is present, so CI without
 * one stays green. With TDM_CUDA_BENCH=1 a last case prints per-op timings; it is
 * not a benchmark suite (bench/ is).
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"
#include "tdm-communicator.h"
#include "tdm-error.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if TDM_HAVE_CUDA

#define TOL 1e-5
#define TF32_TOL 1e-3

static TdmBackend *cpu;
static TdmBackend *gpu;
static size_t gpu_base_bytes; /* the backend's own workspace */

/* Helpers */

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
random_floats(size_t n, double lo, double hi)
{
  float *p = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    p[i] = (float)g_test_rand_double_range(lo, hi);
  return p;
}

static float *
nan_floats(size_t n)
{
  float *p = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    p[i] = NAN;
  return p;
}

static void *
on(TdmBackend *b, const void *host, size_t bytes)
{
  g_autoptr(GError) error = NULL;
  void *d = tdm_backend_alloc(b, bytes, &error);
  g_assert_no_error(error);
  g_assert_nonnull(d);
  if (host != NULL)
    b->ops->upload(b, d, host, bytes);
  return d;
}

/* A buffer of n floats on b filled with NaN. */
static float *
poisoned_on(TdmBackend *b, size_t n)
{
  g_autofree float *nan = nan_floats(n);
  return on(b, nan, n * sizeof(float));
}

static float *
poisoned(size_t n)
{
  return poisoned_on(gpu, n);
}

static void *
back(TdmBackend *b, const void *d, size_t bytes)
{
  void *host = g_malloc(bytes);
  b->ops->download(b, host, d, bytes);
  assert_ok(b);
  return host;
}

static double
rel_error(const float *out, const float *ref, size_t n)
{
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)out[i] - ref[i];
    num += d * d;
    den += (double)ref[i] * ref[i];
  }
  return sqrt(num) / (den > 0.0 ? sqrt(den) : 1.0);
}

/* gpu (a device buffer of n floats) against ref (host): every element written and
 * finite, relative error within tol. */
static void
check_close(const char *what, const float *dev, const float *ref, size_t n, double tol)
{
  g_autofree float *out = back(gpu, dev, n * sizeof(float));
  for (size_t i = 0; i < n; i++)
    if (!isfinite(out[i]) && isfinite(ref[i]))
      g_error("%s: element %zu is %g (reference %g): not written", what, i, out[i], ref[i]);
  double err = rel_error(out, ref, n);
  g_test_message("%s: relative error %.3g", what, err);
  if (!(err <= tol))
    g_error("%s: relative error %.3g exceeds %.1g", what, err, tol);
}

static void
check_ints(const char *what, const int32_t *dev, const int32_t *ref, size_t n)
{
  g_autofree int32_t *out = back(gpu, dev, n * sizeof(int32_t));
  for (size_t i = 0; i < n; i++)
    if (out[i] != ref[i])
      g_error("%s: element %zu is %d, expected %d", what, i, out[i], ref[i]);
}

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
  cpu->ops->gemm(cpu, ta, tb, m, n, k, 1.25f, a, lda, bm, ldb, beta, ref, ldc);
  assert_ok(cpu);

  float *da = on(g, a, a_n * 4), *db = on(g, bm, b_n * 4);
  /* beta = 0 must not read C: poison it. */
  float *dc = beta != 0.0f ? on(g, c, c_n * 4) : poisoned_on(g, c_n);
  g->ops->gemm(g, ta, tb, m, n, k, 1.25f, da, lda, db, ldb, beta, dc, ldc);
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
  g->ops->gemm(g, ta, tb, m, n, k, 0.75f, da, lda, db, ldb, beta, dc, ldc);
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
  cpu->ops->bias_forward(cpu, ref, bias, outer, channels, inner, relu);
  float *dy = on(gpu, y, n * 4), *db = on(gpu, bias, channels * 4);
  gpu->ops->bias_forward(gpu, dy, db, outer, channels, inner, relu);
  g_autofree char *what = g_strdup_printf("bias_forward %d×%d×%d%s", outer, channels, inner,
                                          relu ? " relu" : "");
  check_close(what, dy, ref, n, TOL);

  /* The gradient: fresh dy, dbias poisoned. */
  g_autofree float *grad = random_floats(n, -1, 1);
  g_autofree float *dbias_ref = g_new(float, channels);
  cpu->ops->bias_backward(cpu, dbias_ref, grad, outer, channels, inner);
  float *dgrad = on(gpu, grad, n * 4), *ddbias = poisoned(channels);
  gpu->ops->bias_backward(gpu, ddbias, dgrad, outer, channels, inner);
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
  cpu->ops->relu_forward(cpu, ref, x, total);
  float *dx = on(gpu, x, total * 4), *dy = poisoned(total);
  gpu->ops->relu_forward(gpu, dy + offset, dx + offset, n);
  check_close("relu_forward", dy + offset, ref + offset, n, TOL);
  /* In place. */
  gpu->ops->relu_forward(gpu, dx + offset, dx + offset, n);
  check_close("relu_forward in place", dx + offset, ref + offset, n, TOL);

  g_autofree float *grad = random_floats(total, -1, 1);
  g_autofree float *gref = g_new(float, total);
  cpu->ops->relu_backward(cpu, gref, grad, ref, total);
  float *dgrad = on(gpu, grad, total * 4), *dout = poisoned(total);
  gpu->ops->relu_backward(gpu, dout + offset, dgrad + offset, dy + offset, n);
  check_close("relu_backward", dout + offset, gref + offset, n, TOL);
  gpu->ops->relu_backward(gpu, dgrad + offset, dgrad + offset, dy + offset, n);
  check_close("relu_backward in place", dgrad + offset, gref + offset, n, TOL);

  /* add and scale, the communicators' pair. */
  g_autofree float *a = random_floats(total, -1, 1);
  g_autofree float *aref = g_memdup2(a, total * 4);
  cpu->ops->add(cpu, aref, x, total);
  cpu->ops->scale(cpu, aref, 0.37f, total);
  float *da = on(gpu, a, total * 4);
  float *dx2 = on(gpu, x, total * 4);
  gpu->ops->add(gpu, da + offset, dx2 + offset, n);
  gpu->ops->scale(gpu, da + offset, 0.37f, n);
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
  cpu->ops->im2col(cpu, col_ref, x, n, h, w, c, k, k, pad, 1);
  float *dx = on(gpu, x, xs * 4), *dcol = poisoned(cols);
  gpu->ops->im2col(gpu, dcol, dx, n, h, w, c, k, k, pad, 1);
  g_autofree char *what = g_strdup_printf("im2col n%d %dx%dx%d k%d pad%d", n, h, w, c, k, pad);
  check_close(what, dcol, col_ref, cols, TOL);

  g_autofree float *col = random_floats(cols, -1, 1);
  g_autofree float *dx_ref = g_new(float, xs);
  cpu->ops->col2im(cpu, dx_ref, col, n, h, w, c, k, k, pad, 1);
  float *dcol2 = on(gpu, col, cols * 4), *ddx = poisoned(xs);
  gpu->ops->col2im(gpu, ddx, dcol2, n, h, w, c, k, k, pad, 1);
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
  cpu->ops->maxpool_forward(cpu, y_ref, arg_ref, x, fold ? bias : NULL, fold, n, h, w, c, k);
  float *dx = on(gpu, x, xs * 4), *dy = poisoned(ys), *dbias = on(gpu, bias, c * 4);
  int32_t *darg = on(gpu, NULL, ys * 4);
  gpu->ops->zero(gpu, darg, ys * 4);
  gpu->ops->maxpool_forward(gpu, dy, darg, dx, fold ? dbias : NULL, fold, n, h, w, c, k);
  g_autofree char *what = g_strdup_printf("maxpool_forward n%d %dx%dx%d k%d%s", n, h, w, c, k,
                                          fold ? " bias+relu" : "");
  check_close(what, dy, y_ref, ys, TOL);
  check_ints("maxpool argmax", darg, arg_ref, ys);

  g_autofree float *g = random_floats(ys, -1, 1);
  g_autofree float *gx_ref = g_new(float, xs);
  g_autofree float *gb_ref = g_new(float, c);
  cpu->ops->maxpool_backward(cpu, gx_ref, fold ? gb_ref : NULL, g, arg_ref,
                             fold ? y_ref : NULL, n, h, w, c, k);
  float *dg = on(gpu, g, ys * 4), *dgx = poisoned(xs), *dgb = poisoned(c);
  gpu->ops->maxpool_backward(gpu, dgx, fold ? dgb : NULL, dg, darg, fold ? dy : NULL, n, h, w,
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
  cpu->ops->conv_pool_forward(cpu, y_ref, arg_ref, x, wt, bias, relu, n, h, w, c, out, k, k,
                              pad, pk);
  float *dx = on(gpu, x, xs * 4), *dwt = on(gpu, wt, ws * 4), *dbias = on(gpu, bias, out * 4);
  float *dy = poisoned(ys);
  int32_t *darg = on(gpu, NULL, ys * 4);
  gpu->ops->conv_pool_forward(gpu, dy, darg, dx, dwt, dbias, relu, n, h, w, c, out, k, k, pad,
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
  cpu->ops->conv_pool_backward(cpu, gw_ref, gb_ref, g, arg_ref, y_ref, x, relu, n, h, w, c,
                               out, k, k, pad, pk);
  float *dg = on(gpu, g, ys * 4), *dyr = on(gpu, y_ref, ys * 4);
  int32_t *dargr = on(gpu, arg_ref, ys * 4);
  float *dgw = poisoned(ws), *dgb = poisoned(out);
  gpu->ops->conv_pool_backward(gpu, dgw, dgb, dg, dargr, dyr, dx, relu, n, h, w, c, out, k, k,
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
  cpu->ops->softmax_xent(cpu, logits, labels, rows, classes, 0.0f, scale, d_ref, &m_ref);
  assert_ok(cpu);

  float *dl = on(gpu, logits, n * 4);
  int32_t *dlab = on(gpu, labels, rows * 4);
  TdmMetrics m0 = {1.5, 2.0};
  TdmMetrics *dm = on(gpu, &m0, sizeof m0);
  float *dd = with_grad ? poisoned(n) : NULL;
  gpu->ops->softmax_xent(gpu, dl, dlab, rows, classes, 0.0f, scale, dd, dm);
  TdmMetrics m;
  gpu->ops->download(gpu, &m, dm, sizeof m);
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
  cpu->ops->gather(cpu, x_ref, y_ref, images, labels, indices, count, sample_size,
                   1.0f / 255.0f);

  uint8_t *dimg = on(gpu, images, bytes), *dlab = on(gpu, labels, samples);
  int32_t *didx = on(gpu, indices, count * 4);
  float *dx = poisoned(xs);
  int32_t *dy = with_labels ? on(gpu, NULL, count * 4) : NULL;
  gpu->ops->gather(gpu, dx, dy, dimg, dlab, didx, count, sample_size, 1.0f / 255.0f);
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
    cpu->ops->sgd_update(cpu, rp + offset, g + offset, n, 0.05f, 1e-4f);
    gpu->ops->sgd_update(gpu, dp + offset, dg + offset, n, 0.05f, 1e-4f);
  }
  check_close("sgd", dp + offset, rp + offset, n, TOL);

  for (int step = 0; step < 3; step++) {
    cpu->ops->momentum_update(cpu, rp + offset, g + offset, r1 + offset, n, 0.01f, 0.9f, 5e-4f);
    gpu->ops->momentum_update(gpu, dp + offset, dg + offset, ds1 + offset, n, 0.01f, 0.9f,
                              5e-4f);
  }
  check_close("momentum p", dp + offset, rp + offset, n, TOL);
  check_close("momentum v", ds1 + offset, r1 + offset, n, TOL);

  for (int step = 1; step <= 3; step++) {
    float lr_t = 1e-3f * sqrtf(1.0f - powf(0.999f, step)) / (1.0f - powf(0.9f, step));
    cpu->ops->adam_update(cpu, rp + offset, g + offset, r1 + offset, r2 + offset, n, lr_t,
                          0.9f, 0.999f, 1e-8f, 1e-4f);
    gpu->ops->adam_update(gpu, dp + offset, dg + offset, ds1 + offset, ds2 + offset, n, lr_t,
                          0.9f, 0.999f, 1e-8f, 1e-4f);
  }
  check_close("adam p", dp + offset, rp + offset, n, TOL);
  check_close("adam m", ds1 + offset, r1 + offset, n, TOL);
  check_close("adam v", ds2 + offset, r2 + offset, n, TOL);
  tdm_backend_release(gpu, dp);
  tdm_backend_release(gpu, dg);
  tdm_backend_release(gpu, ds1);
  tdm_backend_release(gpu, ds2);
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

/* Graphs: a small classifier step, captured and replayed, against the same ops run
 * eagerly, on two different index sets uploaded into the same buffer. */

typedef struct {
  int samples, ss, count, out;
  uint8_t *images, *labels;
  int32_t *indices;
  float *w, *bias, *x, *logits, *dlogits, *dw, *db;
  int32_t *y;
  TdmMetrics *metrics;
} MiniStep;

static void
mini_body(TdmBackend *b, MiniStep *s)
{
  const TdmBackendOps *o = b->ops;
  o->gather(b, s->x, s->y, s->images, s->labels, s->indices, s->count, s->ss, 1.0f / 255.0f);
  o->gemm(b, false, true, s->count, s->out, s->ss, 1.0f, s->x, s->ss, s->w, s->ss, 0.0f,
          s->logits, s->out);
  o->bias_forward(b, s->logits, s->bias, s->count, s->out, 1, false);
  o->softmax_xent(b, s->logits, s->y, s->count, s->out, 0.0f, 1.0f / s->count, s->dlogits,
                  s->metrics);
  o->bias_backward(b, s->db, s->dlogits, s->count, s->out, 1);
  o->gemm(b, true, false, s->out, s->ss, s->count, 1.0f, s->dlogits, s->out, s->x, s->ss,
          0.0f, s->dw, s->ss);
}

static void
mini_results(MiniStep *s, float **dw, float **db, TdmMetrics *m)
{
  *dw = back(gpu, s->dw, (size_t)s->out * s->ss * 4);
  *db = back(gpu, s->db, (size_t)s->out * 4);
  gpu->ops->download(gpu, m, s->metrics, sizeof *m);
  gpu->ops->zero(gpu, s->metrics, sizeof *m);
}

static void
test_graph(void)
{
  if (!have_gpu())
    return;
  MiniStep s = {.samples = 600, .ss = 784, .count = 128, .out = 10};
  size_t bytes = (size_t)s.samples * s.ss;
  g_autofree uint8_t *images = g_new(uint8_t, bytes);
  g_autofree uint8_t *labels = g_new(uint8_t, s.samples);
  for (size_t i = 0; i < bytes; i++)
    images[i] = (uint8_t)g_test_rand_int_range(0, 256);
  for (int i = 0; i < s.samples; i++)
    labels[i] = (uint8_t)g_test_rand_int_range(0, s.out);
  g_autofree float *w = random_floats((size_t)s.out * s.ss, -0.05, 0.05);
  g_autofree float *bias = random_floats(s.out, -0.1, 0.1);
  g_autofree int32_t *idx_a = g_new(int32_t, s.count);
  g_autofree int32_t *idx_b = g_new(int32_t, s.count);
  for (int i = 0; i < s.count; i++) {
    idx_a[i] = g_test_rand_int_range(0, s.samples);
    idx_b[i] = g_test_rand_int_range(0, s.samples);
  }
  s.images = on(gpu, images, bytes);
  s.labels = on(gpu, labels, s.samples);
  s.indices = on(gpu, NULL, s.count * 4);
  s.w = on(gpu, w, (size_t)s.out * s.ss * 4);
  s.bias = on(gpu, bias, s.out * 4);
  s.x = poisoned((size_t)s.count * s.ss);
  s.logits = poisoned((size_t)s.count * s.out);
  s.dlogits = poisoned((size_t)s.count * s.out);
  s.dw = poisoned((size_t)s.out * s.ss);
  s.db = poisoned(s.out);
  s.y = on(gpu, NULL, s.count * 4);
  s.metrics = on(gpu, NULL, sizeof(TdmMetrics));
  gpu->ops->zero(gpu, s.metrics, sizeof(TdmMetrics));

  const int32_t *sets[2] = {idx_a, idx_b};
  float *eager_dw[2], *eager_db[2];
  TdmMetrics eager_m[2];
  for (int k = 0; k < 2; k++) {
    gpu->ops->upload(gpu, s.indices, sets[k], s.count * 4);
    mini_body(gpu, &s);
    mini_results(&s, &eager_dw[k], &eager_db[k], &eager_m[k]);
  }

  /* The same step on the CPU, once, so the graph is not only self-consistent. */
  {
    MiniStep c = s;
    c.images = images;
    c.labels = labels;
    c.indices = idx_a;
    c.w = w;
    c.bias = bias;
    c.x = g_new(float, (size_t)s.count * s.ss);
    c.logits = g_new(float, (size_t)s.count * s.out);
    c.dlogits = g_new(float, (size_t)s.count * s.out);
    c.dw = g_new(float, (size_t)s.out * s.ss);
    c.db = g_new(float, s.out);
    c.y = g_new(int32_t, s.count);
    TdmMetrics cm = {0, 0};
    c.metrics = &cm;
    mini_body(cpu, &c);
    assert_ok(cpu);
    g_assert_cmpfloat(rel_error(eager_dw[0], c.dw, (size_t)s.out * s.ss), <=, TOL);
    g_assert_cmpfloat(rel_error(eager_db[0], c.db, s.out), <=, TOL);
    g_assert_cmpfloat(fabs(eager_m[0].loss_sum - cm.loss_sum), <=, 1e-5 * cm.loss_sum);
    g_assert_cmpfloat(eager_m[0].correct, ==, cm.correct);
    g_free(c.x);
    g_free(c.logits);
    g_free(c.dlogits);
    g_free(c.dw);
    g_free(c.db);
    g_free(c.y);
  }

  g_assert_false(gpu->ops->graph_launch(gpu, 4242));
  gpu->ops->upload(gpu, s.indices, idx_a, s.count * 4);
  gboolean captured = gpu->ops->graph_begin(gpu, 4242);
  if (!captured) {
    g_test_skip("graphs disabled (TDM_CUDA_GRAPHS=0)");
  } else {
    mini_body(gpu, &s);
    gpu->ops->graph_end(gpu, 4242);
    assert_ok(gpu);
    for (int k = 0; k < 2; k++) {
      if (k == 1)
        gpu->ops->upload(gpu, s.indices, idx_b, s.count * 4);
      g_assert_true(gpu->ops->graph_launch(gpu, 4242));
      float *dw, *db;
      TdmMetrics m;
      mini_results(&s, &dw, &db, &m);
      g_assert_cmpfloat(rel_error(dw, eager_dw[k], (size_t)s.out * s.ss), <=, 1e-6);
      g_assert_cmpfloat(rel_error(db, eager_db[k], s.out), <=, 1e-6);
      g_assert_cmpfloat(fabs(m.loss_sum - eager_m[k].loss_sum), <=, 1e-9 * eager_m[k].loss_sum);
      g_assert_cmpfloat(m.correct, ==, eager_m[k].correct);
      g_free(dw);
      g_free(db);
    }
  }
  for (int k = 0; k < 2; k++) {
    g_free(eager_dw[k]);
    g_free(eager_db[k]);
  }
  void *all[] = {s.images, s.labels, s.indices, s.w, s.bias, s.x, s.logits, s.dlogits,
                 s.dw, s.db, s.y, s.metrics};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(gpu, all[i]);
  /* Freeing buffers drops the graphs that used them. */
  g_assert_false(gpu->ops->graph_launch(gpu, 4242));
  assert_ok(gpu);
}

/* Misuse inside a capture is an error on that backend, and it cleans up. */
static void
test_graph_misuse(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  float *d = on(b, NULL, 64);
  if (b->ops->graph_begin(b, 1)) {
    float host[16] = {1};
    b->ops->upload(b, d, host, sizeof host);
    g_assert_true(tdm_backend_failed(b));
    b->ops->graph_end(b, 1);
    g_assert_false(tdm_backend_check(b, &error));
    g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND);
    g_assert_nonnull(strstr(error->message, "graph capture"));
    g_test_message("%s", error->message);
  }
  tdm_backend_release(b, d);
  tdm_backend_free(b);
}

/* Uploads are asynchronous from a pinned ring: the host buffer is reusable at once. */
static void
test_upload_ring(void)
{
  if (!have_gpu())
    return;
  enum { N = 9, LEN = 1000 };
  float *d[N];
  g_autofree float *host = g_new(float, LEN);
  for (int i = 0; i < N; i++) {
    d[i] = on(gpu, NULL, LEN * 4);
    for (int j = 0; j < LEN; j++)
      host[j] = (float)(i * LEN + j);
    gpu->ops->upload(gpu, d[i], host, LEN * 4); /* host rewritten right after */
  }
  /* Large uploads take the direct path. */
  size_t big = (size_t)3 << 20;
  g_autofree float *large = random_floats(big, -1, 1);
  float *dl = on(gpu, large, big * 4);
  for (int i = 0; i < N; i++) {
    g_autofree float *out = back(gpu, d[i], LEN * 4);
    for (int j = 0; j < LEN; j++)
      g_assert_cmpfloat(out[j], ==, (float)(i * LEN + j));
    tdm_backend_release(gpu, d[i]);
  }
  g_autofree float *out = back(gpu, dl, big * 4);
  g_assert_cmpmem(out, big * 4, large, big * 4);
  tdm_backend_release(gpu, dl);
}

/* Memory accounting */

static void
test_alloc(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  size_t before = gpu->bytes_in_use;
  void *a = tdm_backend_alloc(gpu, 1 << 20, &error);
  g_assert_no_error(error);
  void *b = tdm_backend_alloc(gpu, 3, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(gpu->bytes_in_use, ==, before + (1 << 20) + 3);
  g_assert_cmpuint(gpu->bytes_peak, >=, gpu->bytes_in_use);
  tdm_backend_release(gpu, a);
  g_assert_cmpuint(gpu->bytes_in_use, ==, before + 3);
  tdm_backend_release(gpu, b);
  g_assert_cmpuint(gpu->bytes_in_use, ==, before);

  /* A petabyte does not fit: a clear error, and the backend carries on. */
  size_t huge = (size_t)1 << 50;
  void *c = tdm_backend_alloc(gpu, huge, &error);
  g_assert_null(c);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, "cuda:0"));
  g_assert_nonnull(strstr(error->message, "1125899906842624 bytes"));
  g_assert_nonnull(strstr(error->message, "free"));
  g_assert_cmpuint(gpu->bytes_in_use, ==, before);
  float one = 2.0f;
  float *d = on(gpu, &one, 4);
  gpu->ops->scale(gpu, d, 3.0f, 1);
  g_autofree float *out = back(gpu, d, 4);
  g_assert_cmpfloat(*out, ==, 6.0f);
  tdm_backend_release(gpu, d);

  /* A backend that names a GPU that is not there. */
  g_clear_error(&error);
  g_assert_null(tdm_backend_cuda_new(4096, TDM_PRECISION_FP32, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE);
}

/* Peer communicator: replicas are threads with a backend each, all on cuda:0. */

typedef struct {
  TdmCommunicator *c;
  int r, replicas;
  size_t n, offset, count;
  const float *init;           /* this replica's values */
  float *dev;
  float *after_allreduce, *after_buckets, *after_reduce, *after_broadcast;
  double sums[2];
  GError *error;
} PeerJob;

static gpointer
peer_worker(gpointer data)
{
  PeerJob *j = data;
  TdmCommunicator *c = j->c;
  TdmBackend *b = c->backends[j->r];
  const TdmCommunicatorOps *o = c->ops;
  size_t bytes = j->n * sizeof(float);
  int root_reduce = 1 % j->replicas, root_bcast = j->replicas - 1;

  b->ops->upload(b, j->dev, j->init, bytes);
  if (!o->allreduce(c, j->r, j->dev, j->offset, j->count, &j->error) ||
      !o->wait(c, j->r, &j->error))
    return NULL;
  j->after_allreduce = back(b, j->dev, bytes);

  /* Two buckets in flight before one wait, as backward issues them. */
  b->ops->upload(b, j->dev, j->init, bytes);
  size_t half = j->n / 2;
  if (!o->allreduce(c, j->r, j->dev, half, j->n - half, &j->error) ||
      !o->allreduce(c, j->r, j->dev, 0, half, &j->error) || !o->wait(c, j->r, &j->error))
    return NULL;
  j->after_buckets = back(b, j->dev, bytes);

  b->ops->upload(b, j->dev, j->init, bytes);
  if (!o->reduce(c, j->r, j->dev, j->n, root_reduce, &j->error) ||
      !o->wait(c, j->r, &j->error))
    return NULL;
  j->after_reduce = back(b, j->dev, bytes);

  b->ops->upload(b, j->dev, j->init, bytes);
  if (!o->broadcast(c, j->r, j->dev, j->n, root_bcast, &j->error) ||
      !o->wait(c, j->r, &j->error))
    return NULL;
  j->after_broadcast = back(b, j->dev, bytes);

  j->sums[0] = j->r;
  j->sums[1] = 0.5;
  o->sum_doubles(c, j->r, j->sums, 2, &j->error);
  return NULL;
}

static void
comm_case(const char *kind, int replicas, size_t n, gboolean staging)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *backends[4];
  for (int r = 0; r < replicas; r++) {
    backends[r] = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
    g_assert_no_error(error);
  }
  if (staging)
    g_setenv("TDM_PEER_STAGING", "1", TRUE);
  TdmCommunicator *c = NULL;
  if (g_str_equal(kind, "peer"))
    c = tdm_communicator_peer_new(backends, replicas, &error);
#if TDM_HAVE_NCCL
  else
    c = tdm_communicator_nccl_new(backends, replicas, &error);
#endif
  g_unsetenv("TDM_PEER_STAGING");
  g_assert_no_error(error);
  g_assert_cmpstr(c->kind, ==, kind);

  PeerJob jobs[4];
  float *init[4];
  GThread *threads[4];
  for (int r = 0; r < replicas; r++) {
    init[r] = random_floats(n, -1, 1);
    jobs[r] = (PeerJob){.c = c, .r = r, .replicas = replicas, .n = n, .offset = 5,
                        .count = n - 17, .init = init[r]};
    jobs[r].dev = on(backends[r], NULL, n * sizeof(float));
  }
  for (int r = 0; r < replicas; r++)
    threads[r] = g_thread_new("replica", peer_worker, &jobs[r]);
  for (int r = 0; r < replicas; r++)
    g_thread_join(threads[r]);
  for (int r = 0; r < replicas; r++)
    if (jobs[r].error != NULL)
      g_error("replica %d: %s", r, jobs[r].error->message);

  g_autofree float *sum = g_new(float, n);
  for (size_t i = 0; i < n; i++) {
    double s = 0.0;
    for (int r = 0; r < replicas; r++)
      s += init[r][i];
    sum[i] = (float)s;
  }
  int root_reduce = 1 % replicas, root_bcast = replicas - 1;
  for (int r = 0; r < replicas; r++) {
    PeerJob *j = &jobs[r];
    /* allreduce: the range summed, the rest untouched. */
    for (size_t i = 0; i < n; i++) {
      gboolean inside = i >= j->offset && i < j->offset + j->count;
      float want = inside ? sum[i] : init[r][i];
      if (fabsf(j->after_allreduce[i] - want) > 1e-6f * (1 + fabsf(want)))
        g_error("allreduce, %d replicas, replica %d, element %zu: %g, expected %g",
                replicas, r, i, j->after_allreduce[i], want);
    }
    g_assert_cmpfloat(rel_error(j->after_buckets, sum, n), <=, 1e-6);
    if (r == root_reduce)
      g_assert_cmpfloat(rel_error(j->after_reduce, sum, n), <=, 1e-6);
    else
      g_assert_cmpmem(j->after_reduce, n * 4, init[r], n * 4);
    g_assert_cmpmem(j->after_broadcast, n * 4, init[root_bcast], n * 4);
    g_assert_cmpfloat(j->sums[0], ==, replicas * (replicas - 1) / 2.0);
    g_assert_cmpfloat(j->sums[1], ==, 0.5 * replicas);
    g_assert_cmpfloat(tdm_communicator_take_seconds(c, r), >=, 0.0);
    g_free(j->after_allreduce);
    g_free(j->after_buckets);
    g_free(j->after_reduce);
    g_free(j->after_broadcast);
    tdm_backend_release(backends[r], j->dev);
    g_free(init[r]);
  }
  tdm_communicator_free(c);
  /* The communicator gave back its staging: each backend holds its workspace alone. */
  for (int r = 0; r < replicas; r++) {
    assert_ok(backends[r]);
    g_assert_cmpuint(backends[r]->bytes_in_use, ==, gpu_base_bytes);
    tdm_backend_free(backends[r]);
  }
}

static void
test_peer(void)
{
  if (!have_gpu())
    return;
  comm_case("peer", 2, 100003, FALSE);
  comm_case("peer", 3, 100003, FALSE);
  comm_case("peer", 3, 3000017, TRUE);  /* more than one staging piece */
  comm_case("peer", 2, 999, TRUE);
  comm_case("peer", 1, 1000, FALSE);
}

/* One GPU can only show NCCL's plumbing: one rank, and the refusal of two replicas
 * on one GPU. Several GPUs are test-cuda-train's. */
static void
test_nccl(void)
{
  if (!have_gpu())
    return;
#if TDM_HAVE_NCCL
  comm_case("nccl", 1, 100003, FALSE);
  g_autoptr(GError) error = NULL;
  TdmBackend *backends[2];
  for (int r = 0; r < 2; r++)
    backends[r] = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  g_assert_null(tdm_communicator_nccl_new(backends, 2, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION);
  g_test_message("%s", error->message);
  for (int r = 0; r < 2; r++)
    tdm_backend_free(backends[r]);
#else
  g_test_skip("built without NCCL");
#endif
}

/* Abort: a replica that never arrives must not hang the others. */
static gpointer
abort_worker(gpointer data)
{
  PeerJob *j = data;
  j->c->ops->allreduce(j->c, j->r, j->dev, 0, j->n, &j->error);
  return NULL;
}

static void
test_peer_abort(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  TdmBackend *backends[2];
  for (int r = 0; r < 2; r++)
    backends[r] = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  TdmCommunicator *c = tdm_communicator_peer_new(backends, 2, &error);
  g_assert_no_error(error);
  PeerJob job = {.c = c, .r = 0, .n = 64};
  job.dev = on(backends[0], NULL, 64 * 4);
  GThread *t = g_thread_new("replica", abort_worker, &job);
  g_usleep(50 * 1000);
  tdm_communicator_abort(c);
  g_thread_join(t);
  g_assert_error(job.error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION);
  g_clear_error(&job.error);
  tdm_backend_release(backends[0], job.dev);
  tdm_communicator_free(c);
  for (int r = 0; r < 2; r++)
    tdm_backend_free(backends[r]);
}

/* Timings: µs per operation, issued back to back (launch cost included), median of
 * five runs of 200 after a warm-up, at the sizes of a CNN layer at batch 256. */

typedef void (*BenchFn) (gpointer data);

static double
bench_us(BenchFn fn, gpointer data)
{
  for (int i = 0; i < 20; i++)
    fn(data);
  gpu->ops->synchronize(gpu);
  double runs[5];
  for (int k = 0; k < 5; k++) {
    gint64 t0 = g_get_monotonic_time();
    for (int i = 0; i < 200; i++)
      fn(data);
    gpu->ops->synchronize(gpu);
    runs[k] = (g_get_monotonic_time() - t0) / 200.0;
  }
  for (int a = 0; a < 5; a++)
    for (int b = a + 1; b < 5; b++)
      if (runs[b] < runs[a]) {
        double t = runs[a];
        runs[a] = runs[b];
        runs[b] = t;
      }
  return runs[2];
}

typedef struct {
  float *x, *col, *w, *y, *dy, *p, *g, *m, *v, *logits, *dl;
  int32_t *arg, *labels, *indices, *yl;
  uint8_t *images, *ilabels;
  TdmMetrics *metrics;
} Bench;

static void b_im2col(gpointer d) { Bench *s = d; gpu->ops->im2col(gpu, s->col, s->x, 256, 28, 28, 32, 3, 3, 1, 1); }
static void b_col2im(gpointer d) { Bench *s = d; gpu->ops->col2im(gpu, s->x, s->col, 256, 28, 28, 32, 3, 3, 1, 1); }
static void b_gemm_conv(gpointer d) { Bench *s = d; gpu->ops->gemm(gpu, false, true, 256 * 784, 64, 288, 1, s->col, 288, s->w, 288, 0, s->y, 64); }
static void b_gemm_mlp(gpointer d) { Bench *s = d; gpu->ops->gemm(gpu, false, true, 256, 1000, 784, 1, s->x, 784, s->w, 784, 0, s->y, 1000); }
static void b_bias(gpointer d) { Bench *s = d; gpu->ops->bias_forward(gpu, s->y, s->w, 256 * 784, 64, 1, true); }
static void b_bias_bw(gpointer d) { Bench *s = d; gpu->ops->bias_backward(gpu, s->w, s->y, 256 * 784, 64, 1); }
static void b_relu_bw(gpointer d) { Bench *s = d; gpu->ops->relu_backward(gpu, s->dy, s->dy, s->y, (size_t)256 * 784 * 64); }
static void b_pool(gpointer d) { Bench *s = d; gpu->ops->maxpool_forward(gpu, s->dy, s->arg, s->y, NULL, false, 256, 28, 28, 64, 2); }
static void b_pool_bw(gpointer d) { Bench *s = d; gpu->ops->maxpool_backward(gpu, s->y, NULL, s->dy, s->arg, NULL, 256, 28, 28, 64, 2); }
static void b_softmax(gpointer d) { Bench *s = d; gpu->ops->softmax_xent(gpu, s->logits, s->labels, 256, 10, 0.0f, 1.0f / 256, s->dl, s->metrics); }
static void b_gather(gpointer d) { Bench *s = d; gpu->ops->gather(gpu, s->x, s->yl, s->images, s->ilabels, s->indices, 256, 784, 1.0f / 255); }
static void b_adam(gpointer d) { Bench *s = d; gpu->ops->adam_update(gpu, s->p, s->g, s->m, s->v, 1863690, 1e-3f, 0.9f, 0.999f, 1e-8f, 0); }
static void b_upload(gpointer d) { Bench *s = d; static int32_t idx[256]; gpu->ops->upload(gpu, s->indices, idx, sizeof idx); }

static void
test_bench(void)
{
  if (!have_gpu())
    return;
  if (g_getenv("TDM_CUDA_BENCH") == NULL) {
    g_test_skip("set TDM_CUDA_BENCH=1 to time the operations");
    return;
  }
  Bench s;
  size_t act = (size_t)256 * 784 * 64;
  s.x = on(gpu, NULL, (size_t)256 * 784 * 32 * 4);
  s.col = on(gpu, NULL, (size_t)256 * 784 * 288 * 4);
  s.w = on(gpu, NULL, (size_t)1000 * 784 * 4);
  s.y = on(gpu, NULL, act * 4);
  s.dy = on(gpu, NULL, act * 4);
  s.arg = on(gpu, NULL, act * 4);
  s.p = on(gpu, NULL, 1863690 * 4);
  s.g = on(gpu, NULL, 1863690 * 4);
  s.m = on(gpu, NULL, 1863690 * 4);
  s.v = on(gpu, NULL, 1863690 * 4);
  s.logits = on(gpu, NULL, 2560 * 4);
  s.dl = on(gpu, NULL, 2560 * 4);
  s.labels = on(gpu, NULL, 256 * 4);
  s.indices = on(gpu, NULL, 256 * 4);
  s.yl = on(gpu, NULL, 256 * 4);
  s.images = on(gpu, NULL, (size_t)60000 * 784);
  s.ilabels = on(gpu, NULL, 60000);
  s.metrics = on(gpu, NULL, sizeof(TdmMetrics));
  void *all[] = {s.x, s.col, s.w, s.y, s.dy, s.arg, s.p, s.g, s.m, s.v, s.logits, s.dl,
                 s.labels, s.indices, s.yl, s.images, s.ilabels, s.metrics};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    gpu->ops->zero(gpu, all[i], 4);
  g_autofree float *ones = g_new(float, act);
  for (size_t i = 0; i < act; i++)
    ones[i] = (float)(i % 7) * 0.1f + 0.05f;
  gpu->ops->upload(gpu, s.y, ones, act * 4);
  gpu->ops->upload(gpu, s.x, ones, (size_t)256 * 784 * 32 * 4);
  gpu->ops->upload(gpu, s.col, ones, MIN(act, (size_t)256 * 784 * 288) * 4);
  gpu->ops->upload(gpu, s.w, ones, (size_t)1000 * 784 * 4);
  gpu->ops->upload(gpu, s.logits, ones, 2560 * 4);
  gpu->ops->upload(gpu, s.p, ones, 1863690 * 4);
  gpu->ops->upload(gpu, s.g, ones, 1863690 * 4);
  gpu->ops->zero(gpu, s.labels, 256 * 4);
  gpu->ops->zero(gpu, s.indices, 256 * 4);
  gpu->ops->zero(gpu, s.m, 1863690 * 4);
  gpu->ops->zero(gpu, s.v, 1863690 * 4);

  struct {
    const char *name;
    BenchFn fn;
  } ops[] = {
    {"upload 256 indices (ring)", b_upload},
    {"gather 256×784", b_gather},
    {"im2col 256×28×28×32 k3", b_im2col},
    {"col2im 256×28×28×32 k3", b_col2im},
    {"gemm conv 200704×64×288", b_gemm_conv},
    {"gemm mlp 256×1000×784", b_gemm_mlp},
    {"bias+relu 200704×64", b_bias},
    {"bias_backward 200704×64", b_bias_bw},
    {"relu_backward 12.8M", b_relu_bw},
    {"maxpool fwd 256×28×28×64", b_pool},
    {"maxpool bwd 256×28×28×64", b_pool_bw},
    {"softmax_xent 256×10", b_softmax},
    {"adam 1.86M params", b_adam},
  };
  for (guint i = 0; i < G_N_ELEMENTS(ops); i++) {
    double us = bench_us(ops[i].fn, &s);
    g_test_message("bench %-28s %9.2f µs", ops[i].name, us);
    g_printerr("# bench %-28s %9.2f us\n", ops[i].name, us);
  }
  assert_ok(gpu);
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(gpu, all[i]);
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
  g_test_add_func("/cuda/graph", test_graph);
  g_test_add_func("/cuda/graph-misuse", test_graph_misuse);
  g_test_add_func("/cuda/upload-ring", test_upload_ring);
  g_test_add_func("/cuda/alloc", test_alloc);
  g_test_add_func("/cuda/peer", test_peer);
  g_test_add_func("/cuda/peer-abort", test_peer_abort);
  g_test_add_func("/cuda/nccl", test_nccl);
  g_test_add_func("/cuda/bench", test_bench);

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
