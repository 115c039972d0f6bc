/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-layers.c — part of test-backend-cpu: the operations the layers are
 * built from against naive loops in double: GEMM in each transpose, bias and ReLU
 * forward and backward, im2col and col2im, the max pool (with a conv's bias and ReLU
 * folded in), and a first layer's conv, bias, ReLU and pool as one operation against
 * the same layer as separate operations. Fresh random inputs (g_test_rand_*, so --seed
 * replays a run), outputs poisoned with NaN first.
 */
#include "test-backend-cpu.h"

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
  /* The same choice in every window, unless two of its values differ by rounding: each
   * way sums taps products (|x|, |w| ≤ 1) and the bias (≤ 0.5) in its own order, within
   * (taps + 1)·u·(taps + 1) of the exact value (u = 2⁻²⁴, any order, any CPU), so two
   * values each way ranks differently lie within four such errors of each other. */
  const double near = 4.0 * (taps + 1) * (taps + 1) * ldexp(1.0, -24);
  for (size_t i = 0; i < yn; i++)
    if (arg[i] != arg_ref[i])
      g_assert_cmpfloat(fabs(conv[arg[i]] - conv[arg_ref[i]]), <=, near);

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

void
test_backend_cpu_add_layers(void)
{
  g_test_add_func("/backend-cpu/gemm", test_gemm);
  g_test_add_func("/backend-cpu/bias", test_bias);
  g_test_add_func("/backend-cpu/relu", test_relu);
  g_test_add_func("/backend-cpu/im2col", test_im2col);
  g_test_add_func("/backend-cpu/maxpool", test_maxpool);
  g_test_add_func("/backend-cpu/conv-pool", test_conv_pool);
}
