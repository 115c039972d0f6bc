/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-bf16.c — part of test-backend-cpu: the CPU backend's bfloat16
 * operations (--precision bf16), the reference the GPU's are checked against; the
 * operations on a bf16 run's stored residual blocks and plain layers are
 * test-backend-cpu-bf16-resnet.c's.
 *
 * The rounding against an independent nearest-even rule and the special values; the
 * bf16 columns and the bn's bf16 gradient bit for bit against the float32 operation
 * then to_bf16 (their contracts); the products against double sums. A product of two
 * bfloat16 values is exact in float32, so a bf16 GEMM differs from the exact sum of its
 * products by float32 summation alone: |C − exact| <= γ_k · Σ|a·b| with γ_k = k·u /
 * (1 − k·u), u = 2⁻²⁴ (Higham, 3.5), whatever the order; and from the products of the
 * unrounded float inputs by at most (2·2⁻⁸ + 2⁻¹⁶) · Σ|a·b| more (each operand rounds
 * by at most 2⁻⁸ relative). Both the AVX-512 BF16 products and the widening ones are
 * checked: this program runs once per instruction set (TANDEM_CPU_KERNELS). The bn
 * operations and im2col_bf16_bn reading a bf16 input (a conv's output stored as bf16)
 * give the bits their float32 forms give on the input widened: widening is exact.
 */
#include "test-backend-cpu.h"
#include "tdm-bf16.h"

#include <float.h>

#define U32 (1.0 / 16777216.0) /* float32's unit roundoff, 2⁻²⁴ */
#define U16 (1.0 / 256.0)      /* bfloat16's, 2⁻⁸ */

static double
gamma_k(int k)
{
  return k * U32 / (1.0 - k * U32);
}

static uint32_t
bits_of(float v)
{
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

static float
float_of(uint32_t u)
{
  float v;
  memcpy(&v, &u, sizeof v);
  return v;
}

/* The nearest bfloat16 by comparing distances in double: the two candidates are v's
 * top half and the next one up in magnitude; ties go to the even one. */
static uint16_t
nearest(float v)
{
  uint32_t u = bits_of(v);
  uint16_t down = (uint16_t)(u >> 16), up = (uint16_t)(down + 1);
  double dd = fabs((double)v - tdm_bf16_value(down));
  double du = fabs((double)tdm_bf16_value(up) - v);
  if (dd < du)
    return down;
  if (du < dd)
    return up;
  return (down & 1) ? up : down;
}

static void
test_rounding(void)
{
  static const struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
    {0x3f800000, 0x3f80}, /* 1 */
    {0x3f808000, 0x3f80}, /* 1 + 2⁻⁸: a tie, to the even 1 */
    {0x3f818000, 0x3f82}, /* a tie above an odd value: up */
    {0x3f808001, 0x3f81}, /* just past the tie: up */
    {0xbf808001, 0xbf81}, /* the same, negative */
    {0x7f7fffff, 0x7f80}, /* the largest float rounds to infinity */
    {0x7f800000, 0x7f80}, /* +∞ */
    {0xff800000, 0xff80}, /* −∞ */
    {0x7fc00000, 0x7fff}, /* NaN: the canonical one, as cvt.rn.bf16.f32 gives */
    {0xffc00001, 0x7fff}, /* a negative NaN with a payload, too */
    {0x7f800001, 0x7fff}, /* a signalling NaN that truncation would make ∞ */
    {0x00000001, 0x0000}, /* the smallest subnormal: to zero */
    {0x00008000, 0x0000}, /* a subnormal tie, to even */
    {0x00018000, 0x0002}, /* and to even upward */
    {0x80000000, 0x8000}, /* −0 */
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    uint16_t got = tdm_bf16_round(float_of(cases[i].in));
    if (got != cases[i].out)
      g_error("0x%08x rounds to 0x%04x, not 0x%04x", cases[i].in, got, cases[i].out);
  }
  /* Random bit patterns of every exponent against the distances. */
  for (int i = 0; i < 200000; i++) {
    float v = float_of(g_test_rand_int());
    if (isnan(v) || isinf(v) || fabsf(v) > 3.38e38f)
      continue;
    g_assert_cmphex(tdm_bf16_round(v), ==, nearest(v));
    /* Within half a step: 2⁻⁸ relative, or half bf16's subnormal step, 2⁻¹³⁴. */
    g_assert_cmpfloat(fabs(tdm_bf16_value(tdm_bf16_round(v)) - (double)v), <=,
                      U16 * fabs((double)v) + ldexp(1.0, -134));
  }

  /* to_bf16 is that rule, value by value. */
  TdmBackend *b = new_backend();
  const size_t n = 1031;
  float *in = dev_floats(b, n);
  uint16_t *out = dev_alloc(b, n * sizeof(uint16_t));
  for (size_t i = 0; i < n; i++)
    in[i] = float_of(g_test_rand_int());
  in[0] = NAN;
  in[1] = -INFINITY;
  tdm_backend_to_bf16(b, out, in, n);
  for (size_t i = 0; i < n; i++)
    g_assert_cmphex(out[i], ==, tdm_bf16_round(in[i]));
  tdm_backend_release(b, in);
  tdm_backend_release(b, out);
  free_backend(b);
}

/* Columns of x and of a bn's output of x, as bf16: the float32 columns rounded. */
static void
columns_case(int n, int h, int w, int c, int k, int pad, int stride)
{
  TdmBackend *b = new_backend();
  const int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  const size_t xs = (size_t)n * h * w * c, cols = (size_t)n * oh * ow * k * k * c;
  float *x = dev_floats(b, xs), *y = dev_floats(b, xs), *col = dev_floats(b, cols);
  float *bn = dev_floats(b, 4 * (size_t)c); /* mean, invstd, gamma, beta */
  uint16_t *col16 = dev_alloc(b, cols * sizeof(uint16_t));
  fill_random(x, xs, -3, 3);
  fill_random(bn, 4 * (size_t)c, -1, 1);
  for (int ch = 0; ch < c; ch++)
    bn[c + ch] = 0.5f + fabsf(bn[c + ch]);
  tdm_backend_im2col(b, col, x, n, h, w, c, k, k, pad, stride);
  tdm_backend_im2col_bf16(b, col16, x, TDM_DTYPE_F32, n, h, w, c, k, k, pad, stride);
  g_autofree uint16_t *want = to_bf16_host(col, cols);
  g_assert_cmpmem(col16, cols * 2, want, cols * 2);
  for (int relu = 0; relu < 2; relu++) {
    tdm_backend_bn_forward(b, y, x, TDM_DTYPE_F32, bn, bn + c, bn + 2 * c, bn + 3 * c,
                           n * h * w, c, relu);
    tdm_backend_im2col(b, col, y, n, h, w, c, k, k, pad, stride);
    tdm_backend_im2col_bf16_bn(b, col16, x, TDM_DTYPE_F32, bn, bn + c, bn + 2 * c, bn + 3 * c,
                               relu, n, h, w, c, k, k, pad, stride);
    g_autofree uint16_t *want_bn = to_bf16_host(col, cols);
    g_assert_cmpmem(col16, cols * 2, want_bn, cols * 2);
  }

  /* col2im from bf16 columns: each pixel sums at most k² values in float32. */
  float *dx = dev_floats(b, xs);
  poison(dx, xs);
  tdm_backend_col2im_bf16(b, dx, TDM_DTYPE_F32, col16, n, h, w, c, k, k, pad, stride);
  double *ref = g_new0(double, xs), *mag = g_new0(double, xs);
  const uint16_t *r = col16;
  for (int im = 0; im < n; im++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++)
        for (int ky = 0; ky < k; ky++)
          for (int kx = 0; kx < k; kx++, r += c) {
            int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w)
              continue;
            for (int ch = 0; ch < c; ch++) {
              size_t at = (((size_t)im * h + iy) * w + ix) * c + ch;
              ref[at] += tdm_bf16_value(r[ch]);
              mag[at] += fabs(tdm_bf16_value(r[ch]));
            }
          }
  for (size_t i = 0; i < xs; i++)
    g_assert_cmpfloat(fabs(dx[i] - ref[i]), <=, gamma_k(k * k) * mag[i]);
  g_free(ref);
  g_free(mag);
  /* Into a bf16 dx (a gradient the bn backward reads so): the float32 sums rounded
   * once, to_bf16's bits; and the same through conv_dgrad_bf16, which builds the
   * columns from dy and W first. */
  uint16_t *dx16 = dev_alloc(b, xs * sizeof(uint16_t));
  tdm_backend_col2im_bf16(b, dx16, TDM_DTYPE_BF16, col16, n, h, w, c, k, k, pad, stride);
  g_autofree uint16_t *want_dx = to_bf16_host(dx, xs);
  g_assert_cmpmem(dx16, xs * 2, want_dx, xs * 2);
  const int out_c = 5, kk = k * k * c, rows = n * oh * ow;
  float *dyf = dev_floats(b, (size_t)rows * out_c), *wf = dev_floats(b, (size_t)out_c * kk);
  fill_random(dyf, (size_t)rows * out_c, -1, 1);
  fill_random(wf, (size_t)out_c * kk, -1, 1);
  g_autofree uint16_t *dy16 = to_bf16_host(dyf, (size_t)rows * out_c);
  g_autofree uint16_t *w16 = to_bf16_host(wf, (size_t)out_c * kk);
  tdm_backend_conv_dgrad_bf16(b, dx, TDM_DTYPE_F32, dy16, w16, col16, n, h, w, c, out_c, k, k,
                              pad, stride);
  tdm_backend_conv_dgrad_bf16(b, dx16, TDM_DTYPE_BF16, dy16, w16, col16, n, h, w, c, out_c, k,
                              k, pad, stride);
  g_autofree uint16_t *want_dgrad = to_bf16_host(dx, xs);
  g_assert_cmpmem(dx16, xs * 2, want_dgrad, xs * 2);
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_backend_release(b, dx16);
  float *all[] = {x, y, col, bn, dx, dyf, wf};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(b, all[i]);
  tdm_backend_release(b, col16);
  free_backend(b);
}

static void
test_columns(void)
{
  columns_case(2, 7, 6, 3, 3, 1, 1);
  columns_case(3, 9, 9, 17, 3, 1, 2);
  columns_case(1, 8, 11, 5, 1, 0, 2);
  columns_case(2, 12, 10, 4, 5, 2, 1);
  columns_case(1, 5, 5, 2, 3, 0, 3);   /* stride past the kernel: pixels no window reads */
}

/* C = alpha · op(A) · op(B) + beta · C on bf16 operands (and the bf16 result), against
 * double sums of the operands' values, with leading dimensions wider than the matrices
 * and sentinels in the gaps of C. */
static void
gemm_case(bool ta, bool tb, int m, int n, int k, float alpha, float beta)
{
  TdmBackend *b = new_backend();
  const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
  const int arows = ta ? k : m, brows = tb ? n : k;
  const size_t as = (size_t)arows * lda, bs = (size_t)brows * ldb, cs = (size_t)m * ldc;
  float *af = dev_floats(b, as), *bf = dev_floats(b, bs), *c = dev_floats(b, cs);
  uint16_t *a16 = dev_alloc(b, as * 2), *b16 = dev_alloc(b, bs * 2), *c16 = dev_alloc(b, cs * 2);
  fill_random(af, as, -1, 1);
  fill_random(bf, bs, -1, 1);
  fill_random(c, cs, -1, 1);
  if (beta == 0.0f)
    poison(c, cs); /* beta 0 clears whatever C held */
  for (int i = 0; i < m; i++)
    for (int j = n; j < ldc; j++)
      c[(size_t)i * ldc + j] = 12345.0f;
  g_autofree float *c0 = g_memdup2(c, cs * sizeof(float));
  tdm_backend_to_bf16(b, a16, af, as);
  tdm_backend_to_bf16(b, b16, bf, bs);
  tdm_backend_gemm_bf16(b, ta, tb, m, n, k, alpha, a16, lda, b16, ldb, beta, c, ldc);
  memset(c16, 0, cs * 2);
  tdm_backend_gemm_bf16_out(b, ta, tb, m, n, k, a16, lda, b16, ldb, c16, ldc);
  g_assert_true(tdm_backend_check(b, NULL));

  double worst = 0, worst_input = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double sum = 0, mag = 0, sum_f = 0;
      for (int p = 0; p < k; p++) {
        size_t ai = ta ? (size_t)p * lda + i : (size_t)i * lda + p;
        size_t bi = tb ? (size_t)j * ldb + p : (size_t)p * ldb + j;
        double prod = (double)tdm_bf16_value(a16[ai]) * tdm_bf16_value(b16[bi]);
        sum += prod;
        mag += fabs(prod);
        sum_f += (double)af[ai] * bf[bi];
      }
      size_t at = (size_t)i * ldc + j;
      double old = beta == 0.0f ? 0.0 : c0[at];
      double want = alpha * sum + beta * old;
      /* The float32 sum, its scaling by alpha and the addition of beta · C, each a
       * rounding of float32. */
      double bound = fabs(alpha) * gamma_k(k) * mag +
                     3 * U32 * (fabs(alpha) * mag + fabs(beta * old)) + 1e-30;
      double err = fabs(c[at] - want);
      g_assert_cmpfloat(err, <=, bound);
      worst = MAX(worst, err / bound);
      /* Against the unrounded inputs: bf16's own rounding on top. */
      double input_bound =
          fabs(alpha) * (2 * U16 + U16 * U16) * mag / ((1 - U16) * (1 - U16)) + bound;
      double err_f = fabs(c[at] - (alpha * sum_f + beta * old));
      g_assert_cmpfloat(err_f, <=, input_bound);
      worst_input = MAX(worst_input, err_f / input_bound);
      /* The bf16 result: the float32 sum rounded once more. */
      double v16 = tdm_bf16_value(c16[at]);
      g_assert_cmpfloat(fabs(v16 - sum), <=, U16 * fabs(sum) + gamma_k(k) * mag * (1 + U16));
    }
  /* The gaps of C are left alone. */
  for (int i = 0; i < m; i++)
    for (int j = n; j < ldc; j++) {
      g_assert_cmpfloat(c[(size_t)i * ldc + j], ==, 12345.0f);
      g_assert_cmpuint(c16[(size_t)i * ldc + j], ==, 0);
    }
  if (g_test_verbose())
    g_test_message("bf16 gemm %c%c %d×%d×%d: worst %.3g of the bound, %.3g against the "
                   "float inputs' bound", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, worst,
                   worst_input);
  float *fl[] = {af, bf, c};
  for (guint i = 0; i < G_N_ELEMENTS(fl); i++)
    tdm_backend_release(b, fl[i]);
  tdm_backend_release(b, a16);
  tdm_backend_release(b, b16);
  tdm_backend_release(b, c16);
  free_backend(b);
}

static void
test_gemm(void)
{
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    gemm_case(ta, tb, 37, 45, 77, 1.0f, 0.0f);
    gemm_case(ta, tb, 9, 33, 1, 0.5f, 1.0f);        /* one product each, odd k */
    gemm_case(ta, tb, 1, 1, 300, -1.25f, 0.75f);
  }
  /* Past the blocks of C and of the reduction (256 × 256, 512 deep). */
  gemm_case(false, true, 300, 270, 1100, 1.0f, 0.0f);
  gemm_case(true, false, 64, 288, 2049, 1.0f, 0.0f);  /* a weight gradient's shape */
  gemm_case(false, false, 513, 40, 64, 1.0f, 0.0f);   /* an input gradient's */
  /* An empty reduction: C = beta · C. */
  gemm_case(false, false, 5, 7, 0, 1.0f, 0.5f);
}

/* bn_backward_dx_bf16 is bn_backward_dx then to_bf16, bit for bit. */
static void
test_bn_dx(void)
{
  TdmBackend *b = new_backend();
  const int rows = 3000, c = 13; /* rows past the operation's blocks */
  const size_t n = (size_t)rows * c;
  float *x = dev_floats(b, n), *dy = dev_floats(b, n), *dx = dev_floats(b, n);
  float *p = dev_floats(b, 6 * (size_t)c); /* mean, invstd, gamma, beta, Σdγ, Σdβ */
  uint16_t *dx16 = dev_alloc(b, n * 2);
  fill_random(x, n, -2, 2);
  fill_random(dy, n, -1, 1);
  fill_random(p, 6 * (size_t)c, -1, 1);
  for (int ch = 0; ch < c; ch++)
    p[c + ch] = 0.5f + fabsf(p[c + ch]);
  for (int relu = 0; relu < 2; relu++) {
    tdm_backend_bn_backward_dx(b, dx, dy, TDM_DTYPE_F32, x, TDM_DTYPE_F32, p, p + c, p + 2 * c,
                               p + 3 * c, relu, p + 4 * c, p + 5 * c, 1.0f / rows, rows, c);
    tdm_backend_bn_backward_dx_bf16(b, dx16, dy, TDM_DTYPE_F32, x, TDM_DTYPE_F32, p, p + c,
                                    p + 2 * c, p + 3 * c, relu, p + 4 * c, p + 5 * c,
                                    1.0f / rows, rows, c);
    g_autofree uint16_t *want = to_bf16_host(dx, n);
    g_assert_cmpmem(dx16, n * 2, want, n * 2);
    /* From a bf16 dy, into a buffer of its own and in place over it (the stem's bn,
     * tdm-replica-private.h's bn_dx_in_place()): the same bits. */
    g_autofree uint16_t *dyb = to_bf16_host(dy, n);
    tdm_backend_bn_backward_dx_bf16(b, dx16, dyb, TDM_DTYPE_BF16, x, TDM_DTYPE_F32, p, p + c,
                                    p + 2 * c, p + 3 * c, relu, p + 4 * c, p + 5 * c,
                                    1.0f / rows, rows, c);
    tdm_backend_bn_backward_dx_bf16(b, dyb, dyb, TDM_DTYPE_BF16, x, TDM_DTYPE_F32, p, p + c,
                                    p + 2 * c, p + 3 * c, relu, p + 4 * c, p + 5 * c,
                                    1.0f / rows, rows, c);
    g_assert_cmpmem(dyb, n * 2, dx16, n * 2);
  }
  float *fl[] = {x, dy, dx, p};
  for (guint i = 0; i < G_N_ELEMENTS(fl); i++)
    tdm_backend_release(b, fl[i]);
  tdm_backend_release(b, dx16);
  free_backend(b);
}

/* Every operation that reads a bn's input (and the backward its output gradient), given it as
 * bf16, against the same operation given the widened values as float32: bit for bit. The rows
 * pass the blocks the CPU widens at a time; the values' mean sits far from 0 so that the
 * statistics' shift (the first row) matters. */
static void
test_bn_bf16_input(void)
{
  TdmBackend *b = new_backend();
  g_assert_true(tdm_backend_has_bn_bf16_input(b));
  const int n = 5, h = 23, w = 29, c = 13, rows = n * h * w; /* 3335 rows */
  const size_t count = (size_t)rows * c;
  float *x = dev_floats(b, count), *dy = dev_floats(b, count);
  float *p = dev_floats(b, 6 * (size_t)c); /* mean, invstd, gamma, beta, Σdγ, Σdβ */
  uint16_t *x16 = dev_alloc(b, count * 2), *dy16 = dev_alloc(b, count * 2);
  fill_random(x, count, 3, 7);
  fill_random(dy, count, -1, 1);
  fill_random(p, 6 * (size_t)c, -1, 1);
  for (int ch = 0; ch < c; ch++) {
    p[ch] = 5.0f + p[ch];                   /* mean, near the data's */
    p[c + ch] = 0.5f + fabsf(p[c + ch]);    /* invstd */
  }
  for (size_t i = 0; i < count; i++) {
    x16[i] = tdm_bf16_round(x[i]);
    x[i] = tdm_bf16_value(x16[i]);
    dy16[i] = tdm_bf16_round(dy[i]);
    dy[i] = tdm_bf16_value(dy16[i]);
  }
  const size_t slot = TDM_BN_SLOT_FLOATS(c);
  float *got = dev_floats(b, count), *want = dev_floats(b, count);
  uint16_t *got16 = dev_alloc(b, count * 2), *want16 = dev_alloc(b, count * 2);

  tdm_backend_bn_moments(b, got, x16, TDM_DTYPE_BF16, rows, c, 1, 2);
  tdm_backend_bn_moments(b, want, x, TDM_DTYPE_F32, rows, c, 1, 2);
  g_assert_cmpmem(got, 2 * slot * 4, want, 2 * slot * 4);
  for (int relu = 0; relu < 2; relu++) {
    tdm_backend_bn_forward(b, got, x16, TDM_DTYPE_BF16, p, p + c, p + 2 * c, p + 3 * c, rows,
                           c, relu);
    tdm_backend_bn_forward(b, want, x, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c, rows, c,
                           relu);
    g_assert_cmpmem(got, count * 4, want, count * 4);
    tdm_backend_bn_forward_eval(b, got, x16, TDM_DTYPE_BF16, p, p + c, p + 2 * c, p + 3 * c,
                                1e-5f, rows, c, relu);
    tdm_backend_bn_forward_eval(b, want, x, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c,
                                1e-5f, rows, c, relu);
    g_assert_cmpmem(got, count * 4, want, count * 4);
    /* The backward with x, dy or both as bf16 (dy: a conv's input gradient). */
    for (int typed = 1; typed < 4; typed++) {
      const void *xa = typed & 1 ? (const void *)x16 : x,
                 *dya = typed & 2 ? (const void *)dy16 : dy;
      TdmDtype xt = typed & 1 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
      TdmDtype dyt = typed & 2 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
      tdm_backend_bn_backward_sums(b, got, got + c, dya, dyt, xa, xt, p, p + c, p + 2 * c,
                                   p + 3 * c, relu, rows, c);
      tdm_backend_bn_backward_sums(b, want, want + c, dy, TDM_DTYPE_F32, x, TDM_DTYPE_F32, p,
                                   p + c, p + 2 * c, p + 3 * c, relu, rows, c);
      g_assert_cmpmem(got, 2 * (size_t)c * 4, want, 2 * (size_t)c * 4);
      tdm_backend_bn_backward_dx(b, got, dya, dyt, xa, xt, p, p + c, p + 2 * c, p + 3 * c, relu,
                                 p + 4 * c, p + 5 * c, 1.0f / rows, rows, c);
      tdm_backend_bn_backward_dx(b, want, dy, TDM_DTYPE_F32, x, TDM_DTYPE_F32, p, p + c,
                                 p + 2 * c, p + 3 * c, relu, p + 4 * c, p + 5 * c, 1.0f / rows,
                                 rows, c);
      g_assert_cmpmem(got, count * 4, want, count * 4);
      tdm_backend_bn_backward_dx_bf16(b, got16, dya, dyt, xa, xt, p, p + c, p + 2 * c,
                                      p + 3 * c, relu, p + 4 * c, p + 5 * c, 1.0f / rows, rows,
                                      c);
      tdm_backend_bn_backward_dx_bf16(b, want16, dy, TDM_DTYPE_F32, x, TDM_DTYPE_F32, p, p + c,
                                      p + 2 * c, p + 3 * c, relu, p + 4 * c, p + 5 * c,
                                      1.0f / rows, rows, c);
      g_assert_cmpmem(got16, count * 2, want16, count * 2);
    }
    /* The columns of a 3×3 conv after the bn: its output normalized as gathered. */
    const size_t cols = (size_t)n * h * w * 9 * c;
    uint16_t *col = dev_alloc(b, cols * 2), *col_want = dev_alloc(b, cols * 2);
    tdm_backend_im2col_bf16_bn(b, col, x16, TDM_DTYPE_BF16, p, p + c, p + 2 * c, p + 3 * c,
                               relu, n, h, w, c, 3, 3, 1, 1);
    tdm_backend_im2col_bf16_bn(b, col_want, x, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c,
                               relu, n, h, w, c, 3, 3, 1, 1);
    g_assert_cmpmem(col, cols * 2, col_want, cols * 2);
    tdm_backend_release(b, col);
    tdm_backend_release(b, col_want);
  }
  g_assert_true(tdm_backend_check(b, NULL));
  void *all[] = {x, dy, p, x16, dy16, got, want, got16, want16};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(b, all[i]);
  free_backend(b);
}

void
test_backend_cpu_add_bf16(void)
{
  g_test_add_func("/backend-cpu/bf16/rounding", test_rounding);
  g_test_add_func("/backend-cpu/bf16/columns", test_columns);
  g_test_add_func("/backend-cpu/bf16/gemm", test_gemm);
  g_test_add_func("/backend-cpu/bf16/bn-dx", test_bn_dx);
  g_test_add_func("/backend-cpu/bf16/bn-input", test_bn_bf16_input);
}
