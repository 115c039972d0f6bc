/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu.c — the CPU backend against plain double-precision references.
 *
 * Every operation runs on fresh random inputs (g_test_rand_*, so --seed replays a run)
 * with its outputs poisoned with NaN first, and is compared with a naive loop written
 * here, by relative error ||out − ref|| / ||ref||. Layers built from the operations
 * (Linear, Conv2d, MaxPool, ReLU, softmax cross-entropy) are checked against central
 * differences (test-backend-cpu-gradcheck.c). This is not a speed test; bench/ times
 * the backend.
 */
#include "test-backend-cpu.h"
#include "tdm-bf16.h"
#include "tdm-cpu-kernels.h"

/* Memory */

static void
test_alloc(void)
{
  TdmBackend *b = new_backend();
  g_assert_cmpint(b->kind, ==, TDM_BACKEND_CPU);
  g_assert_cmpstr(b->name, ==, "cpu");
  g_assert_cmpuint(b->bytes_in_use, ==, 0);

  void *p1 = dev_alloc(b, 1000);
  void *p2 = dev_alloc(b, 3);
  void *p3 = dev_alloc(b, 0);
  g_assert_true(p1 != p2 && p2 != p3 && p1 != p3);
  g_assert_cmpuint((uintptr_t)p1 % 64, ==, 0);
  g_assert_cmpuint((uintptr_t)p2 % 64, ==, 0);
  g_assert_cmpuint((uintptr_t)p3 % 64, ==, 0);
  g_assert_cmpuint(b->bytes_in_use, ==, 1003);
  g_assert_cmpuint(b->bytes_peak, ==, 1003);
  memset(p1, 0xab, 1000);
  memset(p2, 0xcd, 3);

  tdm_backend_release(b, p1);
  g_assert_cmpuint(b->bytes_in_use, ==, 3);
  g_assert_cmpuint(b->bytes_peak, ==, 1003);
  void *p4 = dev_alloc(b, 500);
  g_assert_cmpuint(b->bytes_in_use, ==, 503);
  g_assert_cmpuint(b->bytes_peak, ==, 1003);
  void *p5 = dev_alloc(b, 1 << 20);
  g_assert_cmpuint(b->bytes_in_use, ==, 503 + (1 << 20));
  g_assert_cmpuint(b->bytes_peak, ==, 503 + (1 << 20));
  tdm_backend_release(b, p5);
  tdm_backend_release(b, p4);
  tdm_backend_release(b, p3);
  tdm_backend_release(b, p2);
  tdm_backend_release(b, NULL);
  g_assert_cmpuint(b->bytes_in_use, ==, 0);
  g_assert_cmpuint(b->bytes_peak, ==, 503 + (1 << 20));

  /* Out of memory: an error naming the device and the size, counters untouched. */
  void *keep = dev_alloc(b, 64);
  g_autoptr(GError) error = NULL;
  const size_t absurd = SIZE_MAX / 2;
  void *p = tdm_backend_alloc(b, absurd, &error);
  g_assert_null(p);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull(strstr(error->message, "cpu"));
  g_autofree char *digits = g_strdup_printf("%zu", absurd);
  g_assert_nonnull(strstr(error->message, digits));
  g_assert_cmpuint(b->bytes_in_use, ==, 64);
  /* A failed allocation is not a sticky device failure. */
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_backend_release(b, keep);

  free_backend(b);
}

static void
test_memory_ops(void)
{
  TdmBackend *b = new_backend();
  const size_t n = 1037;
  float *host = g_new(float, n), *back = g_new(float, n);
  float *d1 = dev_floats(b, n), *d2 = dev_floats(b, n);
  fill_random(host, n, -1, 1);
  poison(d1, n);
  poison(d2, n);

  tdm_backend_upload(b, d1, host, n * sizeof(float));
  tdm_backend_copy(b, d2, d1, n * sizeof(float));
  poison(back, n);
  tdm_backend_download(b, back, d2, n * sizeof(float));
  g_assert_cmpmem(back, n * sizeof(float), host, n * sizeof(float));

  tdm_backend_zero(b, d2 + 1, (n - 2) * sizeof(float));
  g_assert_cmpfloat(d2[0], ==, host[0]);
  g_assert_cmpfloat(d2[n - 1], ==, host[n - 1]);
  for (size_t i = 1; i < n - 1; i++)
    g_assert_cmpfloat(d2[i], ==, 0.0f);
  tdm_backend_synchronize(b);

  tdm_backend_release(b, d1);
  tdm_backend_release(b, d2);
  g_free(host);
  g_free(back);
  free_backend(b);
}

/* GEMM */

static void
gemm_case(TdmBackend *b, bool ta, bool tb, int m, int n, int k, float alpha, float beta)
{
  /* Leading dimensions larger than the minimum, with sentinels in the gaps of C
   * that must survive. */
  const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
  const int arows = ta ? k : m, brows = tb ? n : k;
  float *a = dev_floats(b, (size_t)arows * lda);
  float *bm = dev_floats(b, (size_t)brows * ldb);
  float *c = dev_floats(b, (size_t)m * ldc);
  fill_random(a, (size_t)arows * lda, -1, 1);
  fill_random(bm, (size_t)brows * ldb, -1, 1);
  fill_random(c, (size_t)m * ldc, -1, 1);
  for (int i = 0; i < m; i++)
    for (int j = n; j < ldc; j++)
      c[(size_t)i * ldc + j] = 12345.0f;
  if (beta == 0.0f)
    for (int i = 0; i < m; i++)
      poison(c + (size_t)i * ldc, n);

  double *ref = g_new(double, (size_t)m * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0.0;
      for (int p = 0; p < k; p++) {
        const double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
        const double bv = tb ? bm[(size_t)j * ldb + p] : bm[(size_t)p * ldb + j];
        s += av * bv;
      }
      const double old = beta == 0.0f ? 0.0 : c[(size_t)i * ldc + j];
      ref[(size_t)i * n + j] = alpha * s + beta * old;
    }

  tdm_backend_gemm(b, ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc);
  g_assert_true(tdm_backend_check(b, NULL));

  float *packed = g_new(float, (size_t)m * n);
  for (int i = 0; i < m; i++) {
    memcpy(packed + (size_t)i * n, c + (size_t)i * ldc, n * sizeof(float));
    for (int j = n; j < ldc; j++)
      g_assert_cmpfloat(c[(size_t)i * ldc + j], ==, 12345.0f);
  }
  assert_written(packed, (size_t)m * n);
  assert_rel(packed, ref, (size_t)m * n, TOL);

  g_free(packed);
  g_free(ref);
  tdm_backend_release(b, a);
  tdm_backend_release(b, bm);
  tdm_backend_release(b, c);
}

static void
test_gemm(void)
{
  TdmBackend *b = new_backend();
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      gemm_case(b, ta, tb, 37, 29, 23, 0.75f, 0.5f);
      gemm_case(b, ta, tb, 37, 29, 23, 1.0f, 0.0f);
      gemm_case(b, ta, tb, 5, 70, 130, -1.25f, 1.0f);
    }
  /* The shapes of the MLP's first layer, where OpenBLAS takes its blocked path. */
  gemm_case(b, false, true, 100, 1000, 784, 1.0f, 0.0f);
  gemm_case(b, true, false, 1000, 784, 100, 1.0f, 0.0f);
  /* A convolution's weight gradient (a long reduction into a short, wide C), which the
   * backend computes transposed, with and without what C held. */
  gemm_case(b, true, false, 64, 288, 2500, 1.0f, 0.0f);
  gemm_case(b, true, false, 6, 20, 200, 0.75f, 0.5f);
  /* A short reduction into a tall C (a convolution's input gradient), which the
   * backend computes in pieces of rows: a last piece shorter than the others, each
   * transposition, beta 0 (C poisoned) and not. */
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      gemm_case(b, ta, tb, 2000, 72, 40, 1.0f, ta ? 0.5f : 0.0f);
  free_backend(b);
}

/* Bias and ReLU */

static void
bias_case(TdmBackend *b, int outer, int channels, int inner, bool relu)
{
  const size_t n = (size_t)outer * channels * inner;
  float *y = dev_floats(b, n), *bias = dev_floats(b, channels);
  fill_random(y, n, -1, 1);
  fill_random(bias, channels, -1, 1);
  double *ref = g_new(double, n);
  for (int o = 0; o < outer; o++)
    for (int c = 0; c < channels; c++)
      for (int i = 0; i < inner; i++) {
        const size_t at = ((size_t)o * channels + c) * inner + i;
        const double v = (double)y[at] + bias[c];
        ref[at] = relu && v < 0 ? 0.0 : v;
      }
  tdm_backend_bias_forward(b, y, bias, outer, channels, inner, relu);
  assert_written(y, n);
  assert_rel(y, ref, n, TOL);

  /* bias_backward overwrites dbias. */
  float *dy = dev_floats(b, n), *dbias = dev_floats(b, channels);
  fill_random(dy, n, -1, 1);
  poison(dbias, channels);
  double *dref = g_new0(double, channels);
  for (int o = 0; o < outer; o++)
    for (int c = 0; c < channels; c++)
      for (int i = 0; i < inner; i++)
        dref[c] += dy[((size_t)o * channels + c) * inner + i];
  tdm_backend_bias_backward(b, dbias, dy, outer, channels, inner);
  assert_written(dbias, channels);
  assert_rel(dbias, dref, channels, TOL);
  g_assert_true(tdm_backend_check(b, NULL));

  g_free(ref);
  g_free(dref);
  tdm_backend_release(b, y);
  tdm_backend_release(b, bias);
  tdm_backend_release(b, dy);
  tdm_backend_release(b, dbias);
}

static void
test_bias(void)
{
  TdmBackend *b = new_backend();
  for (int relu = 0; relu < 2; relu++) {
    bias_case(b, 7, 13, 1, relu);
    bias_case(b, 3, 5, 11, relu);
    /* Past the backward pass's channel chunk (256) and row block (64). */
    bias_case(b, 1000, 300, 1, relu);
    bias_case(b, 130, 17, 9, relu);
  }
  free_backend(b);
}

static void
test_relu(void)
{
  TdmBackend *b = new_backend();
  const size_t n = 1001;
  float *x = dev_floats(b, n), *y = dev_floats(b, n);
  float *dy = dev_floats(b, n), *dx = dev_floats(b, n);
  fill_random(x, n, -1, 1);
  fill_random(dy, n, -1, 1);
  double *ref = g_new(double, n), *dref = g_new(double, n);
  for (size_t i = 0; i < n; i++)
    ref[i] = x[i] > 0 ? x[i] : 0.0;

  poison(y, n);
  tdm_backend_relu_forward(b, y, x, n);
  assert_written(y, n);
  assert_rel(y, ref, n, TOL);

  for (size_t i = 0; i < n; i++)
    dref[i] = y[i] > 0 ? dy[i] : 0.0;
  poison(dx, n);
  tdm_backend_relu_backward(b, dx, dy, y, n);
  assert_written(dx, n);
  assert_rel(dx, dref, n, TOL);

  /* In place, both ways. */
  tdm_backend_relu_backward(b, dy, dy, y, n);
  assert_rel(dy, dref, n, TOL);
  tdm_backend_relu_forward(b, x, x, n);
  assert_rel(x, ref, n, TOL);
  g_assert_true(tdm_backend_check(b, NULL));

  g_free(ref);
  g_free(dref);
  tdm_backend_release(b, x);
  tdm_backend_release(b, y);
  tdm_backend_release(b, dy);
  tdm_backend_release(b, dx);
  free_backend(b);
}

/* im2col / col2im */

static const ConvShape conv_shapes[] = {
  { 2, 5, 6, 3, 3, 3, 1 },
  { 3, 7, 5, 1, 3, 3, 1 },  /* odd sizes, one channel like MNIST */
  { 1, 6, 6, 32, 3, 3, 1 }, /* the CNN's second layer, smaller */
  { 2, 6, 7, 2, 2, 2, 0 },
  { 1, 9, 8, 3, 5, 5, 2 },
  { 2, 5, 4, 3, 3, 2, 1 },  /* kh != kw */
  { 1, 4, 5, 2, 3, 3, 0 },
};

/* The value col[row, col] reads from x, as an index into x, or -1 for padding. */
static ptrdiff_t
im2col_source(const ConvShape *s, int oh, int ow, size_t row, size_t col)
{
  const int ox = row % ow, oy = (row / ow) % oh, im = row / ((size_t)ow * oh);
  /* Columns are ordered (ky, kx, channel). */
  const int ch = col % s->c, kx = (col / s->c) % s->kw, ky = col / ((size_t)s->c * s->kw);
  const int iy = oy + ky - s->pad, ix = ox + kx - s->pad;
  if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
    return -1;
  return (((ptrdiff_t)im * s->h + iy) * s->w + ix) * s->c + ch;
}

static void
test_im2col(void)
{
  TdmBackend *b = new_backend();
  for (size_t t = 0; t < G_N_ELEMENTS(conv_shapes); t++) {
    const ConvShape *s = &conv_shapes[t];
    int oh, ow;
    size_t rows, cols, xn;
    conv_dims(s, &oh, &ow, &rows, &cols, &xn);
    float *x = dev_floats(b, xn), *col = dev_floats(b, rows * cols);
    float *dcol = dev_floats(b, rows * cols), *dx = dev_floats(b, xn);
    fill_random(x, xn, -1, 1);
    fill_random(dcol, rows * cols, -1, 1);

    double *ref = g_new(double, rows * cols), *dref = g_new0(double, xn);
    for (size_t r = 0; r < rows; r++)
      for (size_t c = 0; c < cols; c++) {
        const ptrdiff_t src = im2col_source(s, oh, ow, r, c);
        ref[r * cols + c] = src < 0 ? 0.0 : x[src];
        if (src >= 0)
          dref[src] += dcol[r * cols + c];
      }

    poison(col, rows * cols);
    tdm_backend_im2col(b, col, x, s->n, s->h, s->w, s->c, s->kh, s->kw, s->pad, 1);
    assert_written(col, rows * cols);
    assert_rel(col, ref, rows * cols, TOL);

    poison(dx, xn);
    tdm_backend_col2im(b, dx, dcol, s->n, s->h, s->w, s->c, s->kh, s->kw, s->pad, 1);
    assert_written(dx, xn);
    assert_rel(dx, dref, xn, TOL);
    g_assert_true(tdm_backend_check(b, NULL));

    /* col2im is im2col's adjoint: <col2im(d), x> == <d, im2col(x)>. */
    double lhs = 0.0, rhs = 0.0, scale = 0.0;
    for (size_t i = 0; i < xn; i++) {
      lhs += (double)dx[i] * x[i];
      scale += fabs((double)dx[i] * x[i]);
    }
    for (size_t i = 0; i < rows * cols; i++)
      rhs += (double)dcol[i] * col[i];
    g_assert_cmpfloat(fabs(lhs - rhs), <=, TOL * scale);

    g_free(ref);
    g_free(dref);
    tdm_backend_release(b, x);
    tdm_backend_release(b, col);
    tdm_backend_release(b, dcol);
    tdm_backend_release(b, dx);
  }
  free_backend(b);
}

/* Max pooling */

/* fold: a bias added after the max (and a ReLU when relu), the gradient then masked
 * by the pool's output, as a conv layer hands them to its pool. */
static void
maxpool_case_full(TdmBackend *b, int n, int h, int w, int c, int k, gboolean fold,
                  gboolean relu)
{
  const int oh = h / k, ow = w / k;
  const size_t xn = (size_t)n * h * w * c, yn = (size_t)n * oh * ow * c;
  float *x = dev_floats(b, xn), *y = dev_floats(b, yn);
  float *dy = dev_floats(b, yn), *dx = dev_floats(b, xn);
  float *bias = dev_floats(b, c);
  int32_t *arg = dev_alloc(b, yn * sizeof(int32_t));
  fill_random(x, xn, -1, 1);
  fill_random(dy, yn, -1, 1);
  fill_random(bias, c, -0.5, 0.5);

  double *ref = g_new(double, yn), *dref = g_new0(double, xn), *bref = g_new0(double, c);
  double *babs = g_new0(double, c);
  int32_t *aref = g_new(int32_t, yn);
  float *db = dev_floats(b, c);
  for (int im = 0; im < n; im++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++)
        for (int ch = 0; ch < c; ch++) {
          const size_t out = (((size_t)im * oh + oy) * ow + ox) * c + ch;
          int32_t best = -1;
          for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
              const int32_t at = (((im * h) + oy * k + ky) * w + ox * k + kx) * c + ch;
              if (best < 0 || x[at] > x[best])
                best = at;
            }
          ref[out] = x[best];
          if (fold) {
            ref[out] += bias[ch];
            if (relu && ref[out] < 0)
              ref[out] = 0;
          }
          aref[out] = best;
          /* The folded ReLU's gradient: dy where its output is positive. */
          if (!(fold && relu) || ref[out] > 0) {
            dref[best] += dy[out];
            bref[ch] += dy[out];
            babs[ch] += fabs(dy[out]);
          }
        }

  poison(y, yn);
  for (size_t i = 0; i < yn; i++)
    arg[i] = -1;
  tdm_backend_maxpool_forward(b, y, arg, x, fold ? bias : NULL, relu, n, h, w, c, k);
  assert_written(y, yn);
  assert_rel(y, ref, yn, TOL);
  for (size_t i = 0; i < yn; i++)
    g_assert_cmpint(arg[i], ==, aref[i]);

  poison(dx, xn);
  poison(db, c);
  tdm_backend_maxpool_backward(b, dx, fold ? db : NULL, dy, arg, fold && relu ? y : NULL, n, h,
                               w, c, k);
  assert_written(dx, xn);
  assert_rel(dx, dref, xn, TOL);
  if (fold) {
    /* db is a sum of dy over the batch and the pixels, ±1 values that can cancel to near
     * zero, so no relative bound holds for it. A float sum of m terms in any order is
     * within m·2⁻²⁴·Σ|dy| of the exact sum (the recursive summation bound). */
    assert_written(db, c);
    for (int ch = 0; ch < c; ch++) {
      const double m = (double)n * oh * ow;
      g_assert_cmpfloat(fabs(db[ch] - bref[ch]), <=, (m + 1) * 0x1p-24 * babs[ch] + 1e-30);
    }
  }
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_backend_release(b, bias);
  tdm_backend_release(b, db);
  g_free(bref);
  g_free(babs);

  g_free(ref);
  g_free(dref);
  g_free(aref);
  tdm_backend_release(b, x);
  tdm_backend_release(b, y);
  tdm_backend_release(b, dy);
  tdm_backend_release(b, dx);
  tdm_backend_release(b, arg);
}

static void
maxpool_case(TdmBackend *b, int n, int h, int w, int c, int k)
{
  maxpool_case_full(b, n, h, w, c, k, FALSE, FALSE);
  maxpool_case_full(b, n, h, w, c, k, TRUE, FALSE);
  maxpool_case_full(b, n, h, w, c, k, TRUE, TRUE);
}

static void
test_maxpool(void)
{
  TdmBackend *b = new_backend();
  maxpool_case(b, 2, 8, 6, 3, 2);
  maxpool_case(b, 3, 7, 5, 5, 2);   /* odd: the last row and column are dropped */
  maxpool_case(b, 2, 7, 8, 1, 3);
  maxpool_case(b, 2, 28, 28, 32, 2);
  maxpool_case(b, 1, 5, 5, 37, 5);  /* global pooling, channels not a vector multiple */

  /* Ties go to the first element of the window in row-major order. */
  float x[2 * 2 * 2] = { 1, 5, 1, 5, 1, 5, 1, 5 };
  float y[2];
  int32_t arg[2];
  tdm_backend_maxpool_forward(b, y, arg, x, NULL, false, 1, 2, 2, 2, 2);
  g_assert_cmpint(arg[0], ==, 0);
  g_assert_cmpint(arg[1], ==, 1);
  float x3[3 * 3] = { 0, 4, 4, 1, 4, 2, 4, 3, 4 };  /* k = 3 takes another path */
  tdm_backend_maxpool_forward(b, y, arg, x3, NULL, false, 1, 3, 3, 1, 3);
  g_assert_cmpint(arg[0], ==, 1);
  g_assert_cmpfloat(y[0], ==, 4.0f);
  free_backend(b);
}

/* conv_pool: a first layer's conv, bias, ReLU and pool as one operation, against the
 * same layer as separate operations (im2col, GEMM, maxpool with the bias folded in). */

typedef struct {
  int n, h, w, c, out, k, pad, pk;
  gboolean relu;
} ConvPoolShape;

static void
conv_pool_case(const ConvPoolShape *s)
{
  TdmBackend *b = new_backend();
  const int oh = s->h + 2 * s->pad - s->k + 1, ow = s->w + 2 * s->pad - s->k + 1;
  const int ph = oh / s->pk, pw = ow / s->pk, taps = s->k * s->k * s->c;
  const size_t xn = (size_t)s->n * s->h * s->w * s->c, rows = (size_t)s->n * oh * ow;
  const size_t yn = (size_t)s->n * ph * pw * s->out, wn = (size_t)s->out * taps;
  float *x = dev_floats(b, xn), *wt = dev_floats(b, wn), *bias = dev_floats(b, s->out);
  float *col = dev_floats(b, rows * taps), *conv = dev_floats(b, rows * s->out);
  float *y_ref = dev_floats(b, yn), *y = dev_floats(b, yn), *dy = dev_floats(b, yn);
  float *dconv = dev_floats(b, rows * s->out), *dw_ref = dev_floats(b, wn);
  float *db_ref = dev_floats(b, s->out), *dw = dev_floats(b, wn), *db = dev_floats(b, s->out);
  int32_t *arg_ref = dev_alloc(b, yn * sizeof(int32_t)), *arg = dev_alloc(b, yn * sizeof(int32_t));
  fill_random(x, xn, -1, 1);
  fill_random(wt, wn, -1, 1);
  fill_random(bias, s->out, -0.5, 0.5);
  fill_random(dy, yn, -1, 1);

  tdm_backend_im2col(b, col, x, s->n, s->h, s->w, s->c, s->k, s->k, s->pad, 1);
  tdm_backend_gemm(b, false, true, rows, s->out, taps, 1.0f, col, taps, wt, taps, 0.0f, conv,
                   s->out);
  tdm_backend_maxpool_forward(b, y_ref, arg_ref, conv, bias, s->relu, s->n, oh, ow, s->out,
                              s->pk);
  poison(y, yn);
  tdm_backend_conv_pool_forward(b, y, arg, x, wt, bias, s->relu, s->n, s->h, s->w, s->c, s->out,
                                s->k, s->k, s->pad, s->pk);
  assert_written(y, yn);
  double *ref = to_double(y_ref, yn);
  assert_rel(y, ref, yn, TOL);
  /* The same choice in every window, unless two of its values differ by rounding. */
  for (size_t i = 0; i < yn; i++)
    if (arg[i] != arg_ref[i])
      g_assert_cmpfloat(fabs(conv[arg[i]] - conv[arg_ref[i]]), <=, 1e-5);

  /* The gradients through the same choices. */
  tdm_backend_maxpool_backward(b, dconv, db_ref, dy, arg, s->relu ? y : NULL, s->n, oh, ow,
                               s->out, s->pk);
  tdm_backend_gemm(b, true, false, s->out, taps, rows, 1.0f, dconv, s->out, col, taps, 0.0f,
                   dw_ref, taps);
  poison(dw, wn);
  poison(db, s->out);
  tdm_backend_conv_pool_backward(b, dw, db, dy, arg, y, x, s->relu, s->n, s->h, s->w, s->c,
                                 s->out, s->k, s->k, s->pad, s->pk);
  assert_written(dw, wn);
  assert_written(db, s->out);
  double *dw_d = to_double(dw_ref, wn), *db_d = to_double(db_ref, s->out);
  assert_rel(dw, dw_d, wn, TOL);
  assert_rel(db, db_d, s->out, TOL);
  g_assert_true(tdm_backend_check(b, NULL));

  g_free(ref);
  g_free(dw_d);
  g_free(db_d);
  for (float **p = (float *[]){ x, wt, bias, col, conv, y_ref, y, dy, dconv, dw_ref, db_ref, dw,
                                db, NULL };
       *p; p++)
    tdm_backend_release(b, *p);
  tdm_backend_release(b, arg_ref);
  tdm_backend_release(b, arg);
  free_backend(b);
}

static void
test_conv_pool(void)
{
  static const ConvPoolShape shapes[] = {
    { 3, 8, 8, 1, 8, 3, 1, 2, TRUE },    /* the CNN's first layer, smaller */
    { 2, 28, 28, 1, 32, 3, 1, 2, TRUE }, /* the CNN's first layer */
    { 2, 7, 9, 1, 11, 3, 1, 2, FALSE },  /* its loops with odd sides, a partial group */
    { 2, 7, 7, 2, 5, 3, 1, 2, TRUE },    /* odd: the last row and column are dropped */
    { 2, 9, 9, 1, 4, 5, 2, 3, TRUE },    /* 25 taps, windows of 3 */
    { 2, 6, 6, 3, 4, 3, 0, 2, FALSE },   /* 27 taps (RGB), no padding, no ReLU */
  };
  for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++)
    conv_pool_case(&shapes[i]);
}

/* Which copy of the CPU loops runs: the best this CPU has, unless
 * TANDEM_CPU_KERNELS names another it runs (the tests of the other copies set it). */
static void
test_kernel_choice(void)
{
  const char *best = "generic";
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    best = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw")
             ? "avx512" : "avx2";
#endif
  const char *wanted = g_getenv("TANDEM_CPU_KERNELS");
  const char *name = tdm_cpu_kernels_pick()->name;
  if (wanted == NULL || g_str_equal(name, wanted)) {
    g_assert_cmpstr(name, ==, wanted != NULL ? wanted : best);
    return;
  }
  /* A copy this CPU cannot run: the best one runs instead. */
  g_assert_cmpstr(name, ==, best);
  g_test_skip_printf("this CPU does not run the %s copy; %s ran", wanted, name);
}

/* Softmax cross-entropy */

static void
xent_case(TdmBackend *b, int rows, int classes, double spread, gboolean with_grad)
{
  const size_t n = (size_t)rows * classes;
  float *z = dev_floats(b, n), *d = dev_floats(b, n);
  int32_t *labels = dev_alloc(b, rows * sizeof(int32_t));
  TdmMetrics *metrics = dev_alloc(b, sizeof(TdmMetrics));
  fill_random(z, n, -spread, spread);
  const float grad_scale = 1.0f / rows;

  double loss_ref = 0.0, correct_ref = 0.0;
  double *dref = g_new(double, n);
  for (int r = 0; r < rows; r++) {
    const float *zr = z + (size_t)r * classes;
    int best = 0;
    for (int j = 1; j < classes; j++)
      if (zr[j] > zr[best])
        best = j;
    /* Half the rows are labelled with their arg-max, so the count is not trivial. */
    labels[r] = r % 2 == 0 ? best : g_test_rand_int_range(0, classes);
    double top = zr[best], sum = 0.0;
    for (int j = 0; j < classes; j++)
      sum += exp(zr[j] - top);
    loss_ref += log(sum) - (zr[labels[r]] - top);
    correct_ref += best == labels[r];
    for (int j = 0; j < classes; j++)
      dref[(size_t)r * classes + j] =
        (exp(zr[j] - top) / sum - (j == labels[r])) * grad_scale;
  }

  /* softmax_xent adds into the metrics. */
  metrics->loss_sum = 10.0;
  metrics->correct = 3.0;
  poison(d, n);
  tdm_backend_softmax_xent(b, z, labels, rows, classes, 0.0f, grad_scale, with_grad ? d : NULL,
                           metrics);
  g_assert_true(tdm_backend_check(b, NULL));
  g_assert_true(isfinite(metrics->loss_sum));
  g_assert_cmpfloat(fabs(metrics->loss_sum - 10.0 - loss_ref), <=, TOL * fabs(loss_ref));
  g_assert_cmpfloat(metrics->correct - 3.0, ==, correct_ref);
  g_assert_cmpfloat(correct_ref, >=, rows / 2);
  if (with_grad) {
    assert_written(d, n);
    assert_rel(d, dref, n, TOL);
  } else {
    for (size_t i = 0; i < n; i++)
      g_assert_true(isnan(d[i]));
  }

  g_free(dref);
  tdm_backend_release(b, z);
  tdm_backend_release(b, d);
  tdm_backend_release(b, labels);
  tdm_backend_release(b, metrics);
}

static void
test_softmax_xent(void)
{
  TdmBackend *b = new_backend();
  xent_case(b, 37, 10, 3.0, TRUE);
  xent_case(b, 37, 10, 3.0, FALSE);
  xent_case(b, 5, 1000, 5.0, TRUE);
  xent_case(b, 64, 10, 1e4, TRUE);   /* exp(1e4) overflows unless shifted */
  xent_case(b, 16, 7, 80.0, TRUE);
  xent_case(b, 3, 1, 1.0, TRUE);     /* one class: loss 0, gradient 0 */

  /* Ties: the first maximum counts. */
  float z[4] = { 2, 2, 1, 2 };
  int32_t labels[2] = { 1, 1 };
  TdmMetrics m = { 0, 0 };
  tdm_backend_softmax_xent(b, z, labels, 2, 2, 0.0f, 1.0f, NULL, &m);
  g_assert_cmpfloat(m.correct, ==, 1.0);
  free_backend(b);
}

/* Gather */

static void
test_gather(void)
{
  TdmBackend *b = new_backend();
  const int dataset = 50, count = 17, sample = 28 * 28 + 3;
  uint8_t *images = dev_alloc(b, (size_t)dataset * sample);
  uint8_t *labels = dev_alloc(b, dataset);
  int32_t *indices = dev_alloc(b, count * sizeof(int32_t));
  float *x = dev_floats(b, (size_t)count * sample);
  int32_t *y = dev_alloc(b, count * sizeof(int32_t));
  for (size_t i = 0; i < (size_t)dataset * sample; i++)
    images[i] = g_test_rand_int_range(0, 256);
  for (int i = 0; i < dataset; i++)
    labels[i] = g_test_rand_int_range(0, 10);
  for (int i = 0; i < count; i++)
    indices[i] = g_test_rand_int_range(0, dataset);
  indices[count - 1] = indices[0];  /* repeats are allowed */
  const float scale = 1.0f / 255.0f;

  double *ref = g_new(double, (size_t)count * sample);
  for (int i = 0; i < count; i++)
    for (int j = 0; j < sample; j++)
      ref[(size_t)i * sample + j] = images[(size_t)indices[i] * sample + j] * (double)scale;

  poison(x, (size_t)count * sample);
  for (int i = 0; i < count; i++)
    y[i] = -1;
  tdm_backend_gather(b, x, y, images, labels, indices, count, sample, scale);
  g_assert_true(tdm_backend_check(b, NULL));
  assert_written(x, (size_t)count * sample);
  assert_rel(x, ref, (size_t)count * sample, TOL);
  for (int i = 0; i < count; i++)
    g_assert_cmpint(y[i], ==, labels[indices[i]]);

  g_free(ref);
  tdm_backend_release(b, images);
  tdm_backend_release(b, labels);
  tdm_backend_release(b, indices);
  tdm_backend_release(b, x);
  tdm_backend_release(b, y);
  free_backend(b);
}

/* Optimizers, several steps against the formulas in double. The comparison is on
 * p − p0, the update itself, which a test on p alone would dilute. */

typedef enum { OPT_SGD, OPT_MOMENTUM, OPT_ADAM } OptKind;

static void
optimizer_case(OptKind kind, size_t n, float weight_decay)
{
  TdmBackend *b = new_backend();
  float *p = dev_floats(b, n), *g = dev_floats(b, n);
  float *s1 = dev_floats(b, n), *s2 = dev_floats(b, n);
  fill_random(p, n, -1, 1);
  tdm_backend_zero(b, s1, n * sizeof(float));
  tdm_backend_zero(b, s2, n * sizeof(float));
  double *p0 = to_double(p, n), *rp = to_double(p, n);
  double *r1 = g_new0(double, n), *r2 = g_new0(double, n);
  /* The reference uses the float values the operation receives: 1 − 0.999f is not
   * 0.001 to float precision. */
  const double lr = 0.05f, momentum = 0.9f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;

  for (int t = 1; t <= 4; t++) {
    fill_random(g, n, -1, 1);
    const double lr_t = (float)(lr * sqrt(1.0 - pow(beta2, t)) / (1.0 - pow(beta1, t)));
    for (size_t i = 0; i < n; i++) {
      const double gi = g[i] + (double)weight_decay * rp[i];
      switch (kind) {
      case OPT_SGD:
        rp[i] -= lr * gi;
        break;
      case OPT_MOMENTUM:
        r1[i] = momentum * r1[i] - lr * gi;
        rp[i] += r1[i];
        break;
      case OPT_ADAM:
        r1[i] += (1.0 - beta1) * (gi - r1[i]);
        r2[i] += (1.0 - beta2) * (gi * gi - r2[i]);
        rp[i] -= lr_t * r1[i] / (sqrt(r2[i]) + eps);
        break;
      }
    }
    switch (kind) {
    case OPT_SGD:
      tdm_backend_sgd_update(b, p, g, n, lr, weight_decay, NULL);
      break;
    case OPT_MOMENTUM:
      tdm_backend_momentum_update(b, p, g, s1, n, lr, momentum, weight_decay, NULL);
      break;
    case OPT_ADAM:
      tdm_backend_adam_update(b, p, g, s1, s2, n, lr_t, beta1, beta2, eps, weight_decay,
                              NULL);
      break;
    }
  }
  g_assert_true(tdm_backend_check(b, NULL));

  float *delta = g_new(float, n);
  double *rdelta = g_new(double, n);
  for (size_t i = 0; i < n; i++) {
    delta[i] = (float)((double)p[i] - p0[i]);
    rdelta[i] = rp[i] - p0[i];
  }
  assert_rel(delta, rdelta, n, TOL);
  if (kind != OPT_SGD)
    assert_rel(s1, r1, n, TOL);
  if (kind == OPT_ADAM)
    assert_rel(s2, r2, n, TOL);

  g_free(delta);
  g_free(rdelta);
  g_free(p0);
  g_free(rp);
  g_free(r1);
  g_free(r2);
  tdm_backend_release(b, p);
  tdm_backend_release(b, g);
  tdm_backend_release(b, s1);
  tdm_backend_release(b, s2);
  free_backend(b);
}

static void
test_optimizers(void)
{
  /* 1003: not a multiple of the vector width, so the tail runs too. */
  for (OptKind kind = OPT_SGD; kind <= OPT_ADAM; kind++) {
    optimizer_case(kind, 1003, 0.0f);
    optimizer_case(kind, 1003, 0.01f);
    optimizer_case(kind, 3, 0.01f);
  }
}

static void
test_add_scale(void)
{
  TdmBackend *b = new_backend();
  const size_t n = 777;
  float *y = dev_floats(b, n), *x = dev_floats(b, n);
  fill_random(y, n, -1, 1);
  fill_random(x, n, -1, 1);
  double *ref = g_new(double, n);
  for (size_t i = 0; i < n; i++)
    ref[i] = ((double)y[i] + x[i]) * -0.375;
  tdm_backend_add(b, y, x, n);
  tdm_backend_scale(b, y, -0.375f, n);
  assert_rel(y, ref, n, TOL);
  g_free(ref);
  tdm_backend_release(b, y);
  tdm_backend_release(b, x);
  free_backend(b);
}

/* deviation: Σ (x − ref)² and Σ ref², float32 and bf16 (the same values, each exact in
 * bf16: integers from −3 to 3 and those ± 2⁻⁵), whose sums are exact in double, so the
 * sums are known exactly; a NaN in x shows in the first; no values, two zeros. */
static void
test_deviation(void)
{
  TdmBackend *b = new_backend();
  const size_t n = 1001;
  float *x = dev_floats(b, n), *ref = dev_floats(b, n);
  uint16_t *x16 = dev_alloc(b, n * 2), *ref16 = dev_alloc(b, n * 2);
  double *work = dev_alloc(b, TDM_DEVIATION_WORK_DOUBLES * sizeof(double));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; i++) {
    ref[i] = (float)((int)(i % 7) - 3);
    x[i] = ref[i] + (float)((int)(i % 3) - 1) * 0x1p-5f;
    x16[i] = tdm_bf16_round(x[i]);
    ref16[i] = tdm_bf16_round(ref[i]);
    g_assert_cmpfloat(tdm_bf16_value(x16[i]), ==, x[i]);
    diff += (i % 3 != 1) ? 0x1p-10 : 0.0;
    norm += (double)ref[i] * ref[i];
  }
  tdm_backend_deviation(b, work, x, ref, TDM_DTYPE_F32, n);
  g_assert_cmpfloat(work[0], ==, diff);
  g_assert_cmpfloat(work[1], ==, norm);
  work[0] = work[1] = -1;
  tdm_backend_deviation(b, work, x16, ref16, TDM_DTYPE_BF16, n);
  g_assert_cmpfloat(work[0], ==, diff);
  g_assert_cmpfloat(work[1], ==, norm);
  x[n / 2] = NAN;
  tdm_backend_deviation(b, work, x, ref, TDM_DTYPE_F32, n);
  g_assert_true(isnan(work[0]));
  g_assert_cmpfloat(work[1], ==, norm);
  tdm_backend_deviation(b, work, x, ref, TDM_DTYPE_F32, 0);
  g_assert_cmpfloat(work[0], ==, 0.0);
  g_assert_cmpfloat(work[1], ==, 0.0);
  tdm_backend_release(b, x);
  tdm_backend_release(b, ref);
  tdm_backend_release(b, x16);
  tdm_backend_release(b, ref16);
  tdm_backend_release(b, work);
  free_backend(b);
}

/* The sticky error: the first failure is kept and later operations do nothing. */
static void
test_sticky_error(void)
{
  TdmBackend *b = new_backend();
  float a[4] = { 1, 2, 3, 4 }, c[4] = { 7, 7, 7, 7 };
  tdm_backend_gemm(b, false, false, 2, 2, 2, 1.0f, a, 1, a, 2, 0.0f, c, 2); /* lda < k */
  g_assert_true(tdm_backend_failed(b));
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND);
  g_assert_nonnull(strstr(error->message, "cpu"));
  g_assert_nonnull(strstr(error->message, "lda"));
  g_assert_cmpfloat(c[0], ==, 7.0f);

  tdm_backend_zero(b, c, sizeof c);
  g_assert_cmpfloat(c[0], ==, 7.0f);
  int32_t bad_label = 5;
  TdmMetrics m = { 0, 0 };
  tdm_backend_softmax_xent(b, a, &bad_label, 1, 4, 0.0f, 1.0f, NULL, &m);
  g_clear_error(&error);
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "lda"));  /* the first failure wins */
  tdm_backend_free(b);

  b = new_backend();
  tdm_backend_softmax_xent(b, a, &bad_label, 1, 4, 0.0f, 1.0f, NULL, &m);
  g_clear_error(&error);
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "label 5"));
  g_assert_cmpfloat(m.loss_sum, ==, 0.0);
  tdm_backend_free(b);
}

/* Several backends at once, one per thread, as CPU workers use them: each must get
 * exactly what the same work gives on one thread. */
typedef struct {
  guint32 seed;
  float result[64];
} ThreadWork;

static gpointer
thread_work(gpointer data)
{
  ThreadWork *work = data;
  TdmBackend *b = tdm_backend_cpu_new(NULL);
  const int m = 64, k = 300, n = 64;
  GRand *rand = g_rand_new_with_seed(work->seed);
  float *a = tdm_backend_alloc(b, sizeof(float) * m * k, NULL);
  float *w = tdm_backend_alloc(b, sizeof(float) * n * k, NULL);
  float *out = tdm_backend_alloc(b, sizeof(float) * m * n, NULL);
  float *mom = tdm_backend_alloc(b, sizeof(float) * n * k, NULL);
  float *vel = tdm_backend_alloc(b, sizeof(float) * n * k, NULL);
  for (int i = 0; i < m * k; i++)
    a[i] = (float)g_rand_double_range(rand, -1, 1);
  for (int i = 0; i < n * k; i++)
    w[i] = (float)g_rand_double_range(rand, -1, 1);
  tdm_backend_zero(b, mom, sizeof(float) * n * k);
  tdm_backend_zero(b, vel, sizeof(float) * n * k);
  for (int step = 0; step < 50; step++) {
    tdm_backend_gemm(b, false, true, m, n, k, 1.0f, a, k, w, k, 0.0f, out, n);
    tdm_backend_bias_forward(b, out, w, m, n, 1, true);
    /* out^T a as a gradient for w, then an Adam step. */
    float *grad = tdm_backend_alloc(b, sizeof(float) * n * k, NULL);
    tdm_backend_gemm(b, true, false, n, k, m, 1e-3f, out, n, a, k, 0.0f, grad, k);
    tdm_backend_adam_update(b, w, grad, mom, vel, (size_t)n * k, 1e-3f, 0.9f, 0.999f, 1e-8f,
                            0.0f, NULL);
    tdm_backend_release(b, grad);
  }
  memcpy(work->result, out, sizeof work->result);
  gboolean ok = tdm_backend_check(b, NULL) && b->bytes_in_use == sizeof(float) * (m * k + 3 * n * k + m * n);
  tdm_backend_release(b, a);
  tdm_backend_release(b, w);
  tdm_backend_release(b, out);
  tdm_backend_release(b, mom);
  tdm_backend_release(b, vel);
  tdm_backend_free(b);
  g_rand_free(rand);
  return GINT_TO_POINTER(ok);
}

static void
test_threads(void)
{
  enum { THREADS = 4 };
  ThreadWork serial[THREADS], parallel[THREADS];
  GThread *threads[THREADS];
  for (int i = 0; i < THREADS; i++) {
    serial[i].seed = parallel[i].seed = g_test_rand_int();
    g_assert_true(GPOINTER_TO_INT(thread_work(&serial[i])));
  }
  for (int i = 0; i < THREADS; i++)
    threads[i] = g_thread_new("cpu-worker", thread_work, &parallel[i]);
  for (int i = 0; i < THREADS; i++) {
    g_assert_true(GPOINTER_TO_INT(g_thread_join(threads[i])));
    g_assert_cmpmem(parallel[i].result, sizeof parallel[i].result, serial[i].result,
                    sizeof serial[i].result);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);

  g_test_add_func("/backend-cpu/alloc", test_alloc);
  g_test_add_func("/backend-cpu/memory", test_memory_ops);
  g_test_add_func("/backend-cpu/gemm", test_gemm);
  g_test_add_func("/backend-cpu/bias", test_bias);
  g_test_add_func("/backend-cpu/relu", test_relu);
  g_test_add_func("/backend-cpu/im2col", test_im2col);
  g_test_add_func("/backend-cpu/maxpool", test_maxpool);
  g_test_add_func("/backend-cpu/conv-pool", test_conv_pool);
  g_test_add_func("/backend-cpu/kernel-choice", test_kernel_choice);
  g_test_add_func("/backend-cpu/softmax-xent", test_softmax_xent);
  g_test_add_func("/backend-cpu/gather", test_gather);
  g_test_add_func("/backend-cpu/optimizers", test_optimizers);
  g_test_add_func("/backend-cpu/add-scale", test_add_scale);
  g_test_add_func("/backend-cpu/deviation", test_deviation);
  g_test_add_func("/backend-cpu/sticky-error", test_sticky_error);
  g_test_add_func("/backend-cpu/threads", test_threads);
  test_backend_cpu_add_gradchecks();
  test_backend_cpu_add_bf16();
  test_backend_cpu_add_pool2d();
  test_backend_cpu_add_start_sums();

  return g_test_run();
}
