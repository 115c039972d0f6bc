/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-bf16.c — part of test-backend-cpu: the CPU backend's bfloat16
 * operations (--precision bf16), the reference the GPU's are checked against.
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
 * give the bits their float32 forms give on the input widened: widening is exact. The
 * operations of a residual block stored as bf16 (from_bf16, im2col_bf16 of a bf16
 * input, add_out_bf16, bn_forward_bf16, relu_backward_bf16) give the bits of their
 * float32 forms on the widened inputs, then to_bf16 where they write bf16; so do the
 * block's gradients kept as bf16 (relu_backward_bf16 of either type into either, in
 * place too; add_strided_bf16 against col2im's dense tensor added then rounded; the
 * block's start fused, add_relu_backward_bf16, against add_out_bf16 then
 * relu_backward_bf16, and a projection's start from a bf16 gradient against the float32
 * way). The
 * resnet preset's plain layers in bf16: maxpool_forward_bf16 gives the bits and argmax
 * of bn_forward_bf16 (or to_bf16) then maxpool_forward on the widened values,
 * maxpool_backward_bf16 those of maxpool_backward then to_bf16, bn_forward_eval_bf16
 * those of bn_forward_eval then to_bf16, bn_relu_add_bf16 those of bn_forward (its ReLU)
 * then add_out then to_bf16.
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

static uint16_t *
to_bf16_host(const float *v, size_t n)
{
  uint16_t *h = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++)
    h[i] = tdm_bf16_round(v[i]);
  return h;
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

/* The block operations against their float32 forms on widened inputs, bit for bit:
 * values of both signs and zeros (the ReLUs' edges), rows past the bn's blocks. */
static void
test_block_ops(void)
{
  TdmBackend *b = new_backend();
  g_assert_true(tdm_backend_has_bf16_blocks(b));
  const int n = 3, h = 37, w = 31, c = 12, rows = n * h * w; /* 3441 rows */
  const size_t count = (size_t)rows * c;
  float *x = dev_floats(b, count), *a = dev_floats(b, count), *dy = dev_floats(b, count);
  float *p = dev_floats(b, 4 * (size_t)c); /* mean, invstd, gamma, beta */
  uint16_t *x16 = dev_alloc(b, count * 2);
  fill_random(x, count, -2, 2);
  fill_random(a, count, -2, 2);
  fill_random(dy, count, -1, 1);
  fill_random(p, 4 * (size_t)c, -1, 1);
  for (int ch = 0; ch < c; ch++)
    p[c + ch] = 0.5f + fabsf(p[c + ch]);
  for (size_t i = 0; i < count; i += 7)
    x[i] = 0.0f;
  for (size_t i = 0; i < count; i++) {
    x16[i] = tdm_bf16_round(x[i]);
    x[i] = tdm_bf16_value(x16[i]);
  }
  float *got = dev_floats(b, count), *want = dev_floats(b, count);
  uint16_t *got16 = dev_alloc(b, count * 2);

  tdm_backend_from_bf16(b, got, x16, count);
  g_assert_cmpmem(got, count * 4, x, count * 4);
  /* A strided 3×3 conv's columns of the stored input. */
  const size_t cols = (size_t)n * 19 * 16 * 9 * c;
  uint16_t *col = dev_alloc(b, cols * 2), *col_want = dev_alloc(b, cols * 2);
  tdm_backend_im2col_bf16(b, col, x16, TDM_DTYPE_BF16, n, h, w, c, 3, 3, 1, 2);
  tdm_backend_im2col_bf16(b, col_want, x, TDM_DTYPE_F32, n, h, w, c, 3, 3, 1, 2);
  g_assert_cmpmem(col, cols * 2, col_want, cols * 2);
  for (int relu = 0; relu < 2; relu++) {
    tdm_backend_relu_backward_bf16(b, got, TDM_DTYPE_F32, dy, TDM_DTYPE_F32, x16, count);
    tdm_backend_relu_backward(b, want, dy, x, count);
    g_assert_cmpmem(got, count * 4, want, count * 4);
    for (int t = 0; t < 2; t++) {
      TdmDtype type = t == 0 ? TDM_DTYPE_F32 : TDM_DTYPE_BF16;
      const void *skip = t == 0 ? (const void *)x : (const void *)x16;
      tdm_backend_add_out_bf16(b, got16, a, skip, type, count, relu);
      tdm_backend_add_out(b, want, a, x, count, relu);
      g_autofree uint16_t *sum16 = to_bf16_host(want, count);
      g_assert_cmpmem(got16, count * 2, sum16, count * 2);
      /* The bn of a (as its input) plus the skip, and the bn alone. */
      tdm_backend_bn_forward_bf16(b, got16, a, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c,
                                  skip, type, rows, c, relu);
      tdm_backend_bn_forward_add(b, want, a, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c, x,
                                 rows, c, relu);
      g_autofree uint16_t *bn_add16 = to_bf16_host(want, count);
      g_assert_cmpmem(got16, count * 2, bn_add16, count * 2);
      tdm_backend_bn_forward_bf16(b, got16, skip, type, p, p + c, p + 2 * c, p + 3 * c, NULL,
                                  TDM_DTYPE_F32, rows, c, relu);
      tdm_backend_bn_forward(b, want, x, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c, rows, c,
                             relu);
      g_autofree uint16_t *bn16 = to_bf16_host(want, count);
      g_assert_cmpmem(got16, count * 2, bn16, count * 2);
    }
  }
  g_assert_true(tdm_backend_check(b, NULL));
  void *all[] = {x, a, dy, p, x16, got, want, got16, col, col_want};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(b, all[i]);
  free_backend(b);
}

/* A residual block's gradients kept as bf16: relu_backward_bf16 reading and writing
 * either type (in place where they agree) gives relu_backward's bits on the widened
 * gradient, rounded where it writes bf16; add_strided_bf16 (a block's first layer's
 * float32 input gradient plus a projection's compact one) gives the bits of col2im's
 * dense tensor of the compact one (a 1×1 conv's columns: one value a pixel it reads,
 * zeros elsewhere) added by add_out, then rounded: summed in float32, rounded once;
 * written float32 in place, the float32 sum itself, which to_bf16 rounds to the same
 * bits. Odd sizes, strides 1, 2 and 3. */
static void
test_block_gradients(void)
{
  TdmBackend *b = new_backend();
  const int n = 3, h = 13, w = 11, c = 7;
  const size_t count = (size_t)n * h * w * c;
  float *y = dev_floats(b, count), *dy = dev_floats(b, count), *a = dev_floats(b, count);
  uint16_t *y16 = dev_alloc(b, count * 2), *dy16 = dev_alloc(b, count * 2);
  fill_random(y, count, -2, 2);
  fill_random(dy, count, -1, 1);
  fill_random(a, count, -1, 1);
  for (size_t i = 0; i < count; i += 5)
    y[i] = 0.0f;
  for (size_t i = 0; i < count; i++) {
    y16[i] = tdm_bf16_round(y[i]);
    y[i] = tdm_bf16_value(y16[i]);
    dy16[i] = tdm_bf16_round(dy[i]);
  }
  float *dy_wide = dev_floats(b, count), *want = dev_floats(b, count);
  float *got = dev_floats(b, count);
  uint16_t *got16 = dev_alloc(b, count * 2);
  tdm_backend_from_bf16(b, dy_wide, dy16, count);
  for (int in16 = 0; in16 < 2; in16++) {
    TdmDtype dy_type = in16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    const void *d = in16 ? (const void *)dy16 : (const void *)dy;
    tdm_backend_relu_backward(b, want, in16 ? dy_wide : dy, y, count);
    tdm_backend_relu_backward_bf16(b, got, TDM_DTYPE_F32, d, dy_type, y16, count);
    g_assert_cmpmem(got, count * 4, want, count * 4);
    tdm_backend_relu_backward_bf16(b, got16, TDM_DTYPE_BF16, d, dy_type, y16, count);
    g_autofree uint16_t *want16 = to_bf16_host(want, count);
    g_assert_cmpmem(got16, count * 2, want16, count * 2);
    /* In place, of one type. */
    float *inplace = dev_floats(b, count);
    uint16_t *inplace16 = dev_alloc(b, count * 2);
    memcpy(inplace, dy, count * 4);
    memcpy(inplace16, dy16, count * 2);
    if (in16) {
      tdm_backend_relu_backward_bf16(b, inplace16, TDM_DTYPE_BF16, inplace16, TDM_DTYPE_BF16,
                                     y16, count);
      g_assert_cmpmem(inplace16, count * 2, want16, count * 2);
    } else {
      tdm_backend_relu_backward_bf16(b, inplace, TDM_DTYPE_F32, inplace, TDM_DTYPE_F32, y16,
                                     count);
      g_assert_cmpmem(inplace, count * 4, want, count * 4);
    }
    tdm_backend_release(b, inplace);
    tdm_backend_release(b, inplace16);
  }
  for (int stride = 1; stride <= 3; stride++) {
    const int oh = (h - 1) / stride + 1, ow = (w - 1) / stride + 1;
    const size_t compact = (size_t)n * oh * ow * c;
    float *x = dev_floats(b, compact), *dense = dev_floats(b, count);
    float *sum = dev_floats(b, count);
    uint16_t *out16 = dev_alloc(b, count * 2);
    fill_random(x, compact, -1, 1);
    tdm_backend_col2im(b, dense, x, n, h, w, c, 1, 1, 0, stride);
    tdm_backend_add_out(b, sum, a, dense, count, false);
    g_autofree uint16_t *want16 = to_bf16_host(sum, count);
    tdm_backend_add_strided_bf16(b, out16, TDM_DTYPE_BF16, a, TDM_DTYPE_F32, x, n, h, w, c,
                                 stride);
    g_assert_cmpmem(out16, count * 2, want16, count * 2);
    /* Float32 in place (a block's start whose first layer's gradient fills the
     * gradient region): the float32 sum itself, and to_bf16 after it the bits above. */
    float *inplace = dev_floats(b, count);
    memcpy(inplace, a, count * 4);
    tdm_backend_add_strided_bf16(b, inplace, TDM_DTYPE_F32, inplace, TDM_DTYPE_F32, x, n, h, w,
                                 c, stride);
    g_assert_cmpmem(inplace, count * 4, sum, count * 4);
    tdm_backend_to_bf16(b, out16, inplace, count);
    g_assert_cmpmem(out16, count * 2, want16, count * 2);
    tdm_backend_release(b, inplace);
    void *bufs[] = {x, dense, sum, out16};
    for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
      tdm_backend_release(b, bufs[i]);
  }
  /* The stem's 3×3 stride-2 max pool of padding 1 under a block whose gradient is kept
   * as bf16: maxpool2d_backward reading it gives the bits of reading it widened, and
   * writing its gradient as bf16 for the stem's bn the bits of to_bf16 after. */
  {
    TdmPool2d g = {n, h, w, c, 3, 2, 1, (h + 2 - 3) / 2 + 1, (w + 2 - 3) / 2 + 1};
    const size_t ny = (size_t)n * g.oh * g.ow * c;
    float *py = dev_floats(b, ny), *pdx = dev_floats(b, count), *pdx16 = dev_floats(b, count);
    uint16_t *pout16 = dev_alloc(b, count * 2);
    int32_t *argmax = dev_alloc(b, ny * sizeof(int32_t));
    tdm_backend_maxpool2d_forward(b, py, TDM_DTYPE_F32, argmax, a, TDM_DTYPE_F32, g);
    /* From a bf16 input, into a bf16 output (the stem bn's output stored bf16, the
     * pool's for the blocks): the maximum of the widened values and its index, rounded
     * once into bf16, the bits of to_bf16 of the float32 pool's output. */
    {
      g_autofree uint16_t *a16h = to_bf16_host(a, count);
      uint16_t *a16 = dev_alloc(b, count * 2), *py16 = dev_alloc(b, ny * 2);
      float *a_wide = dev_floats(b, count), *py_wide = dev_floats(b, ny), *pyf = dev_floats(b, ny);
      int32_t *argmax16 = dev_alloc(b, ny * sizeof(int32_t));
      int32_t *argmax_wide = dev_alloc(b, ny * sizeof(int32_t));
      memcpy(a16, a16h, count * 2);
      tdm_backend_from_bf16(b, a_wide, a16, count);
      tdm_backend_maxpool2d_forward(b, py_wide, TDM_DTYPE_F32, argmax_wide, a_wide,
                                    TDM_DTYPE_F32, g);
      tdm_backend_maxpool2d_forward(b, pyf, TDM_DTYPE_F32, argmax16, a16, TDM_DTYPE_BF16, g);
      g_assert_cmpmem(pyf, ny * 4, py_wide, ny * 4);
      g_assert_cmpmem(argmax16, ny * 4, argmax_wide, ny * 4);
      tdm_backend_maxpool2d_forward(b, py16, TDM_DTYPE_BF16, argmax16, a16, TDM_DTYPE_BF16, g);
      g_autofree uint16_t *want16 = to_bf16_host(py_wide, ny);
      g_assert_cmpmem(py16, ny * 2, want16, ny * 2);
      tdm_backend_maxpool2d_forward(b, py16, TDM_DTYPE_BF16, argmax16, a, TDM_DTYPE_F32, g);
      g_autofree uint16_t *rounded_max = to_bf16_host(py, ny);
      g_assert_cmpmem(py16, ny * 2, rounded_max, ny * 2);
      void *more[] = {a16, py16, a_wide, py_wide, pyf, argmax16, argmax_wide};
      for (guint i = 0; i < G_N_ELEMENTS(more); i++)
        tdm_backend_release(b, more[i]);
    }
    /* The same pool of a training bn's output that is never written (the stem's bn keeps
     * none): maxpool2d_forward_bn from the bn's input, float32 or bf16, with and without
     * the bn's ReLU (a negative gamma in the channels, so the max is not the input's),
     * into either type, gives the bits and argmax of bn_forward_bf16's stored output then
     * maxpool2d_forward; without a bn, those of x rounded to bf16 then the pool. */
    {
      g_autofree uint16_t *a16h = to_bf16_host(a, count);
      uint16_t *a16 = dev_alloc(b, count * 2), *v16 = dev_alloc(b, count * 2);
      float *stats = dev_floats(b, 4 * (size_t)c);
      float *mean = stats, *invstd = stats + c, *gamma = stats + 2 * c, *beta = stats + 3 * c;
      for (int ch = 0; ch < c; ch++) {
        mean[ch] = 0.1f * (float)(ch - 3);
        invstd[ch] = 0.5f + 0.25f * (float)ch;
        gamma[ch] = ch % 3 == 1 ? -0.75f : 1.0f + 0.125f * (float)ch;
        beta[ch] = 0.05f * (float)(ch % 4) - 0.1f;
      }
      memcpy(a16, a16h, count * 2);
      float *want_y = dev_floats(b, ny), *got_y = dev_floats(b, ny);
      int32_t *want_at = dev_alloc(b, ny * sizeof(int32_t));
      int32_t *got_at = dev_alloc(b, ny * sizeof(int32_t));
      const void *xs[] = {a, a16};
      const TdmDtype types[] = {TDM_DTYPE_F32, TDM_DTYPE_BF16};
      for (int xi = 0; xi < 2; xi++)
        for (int bn = 0; bn < 3; bn++)
          for (int yi = 0; yi < 2; yi++) {
            gboolean relu = bn == 2;
            if (bn > 0)
              tdm_backend_bn_forward_bf16(b, v16, xs[xi], types[xi], mean, invstd, gamma, beta,
                                          NULL, TDM_DTYPE_F32, n * h * w, c, relu);
            else if (xi == 0)
              tdm_backend_to_bf16(b, v16, a, count);
            else
              memcpy(v16, a16, count * 2);
            tdm_backend_maxpool2d_forward(b, want_y, types[yi], want_at, v16, TDM_DTYPE_BF16, g);
            tdm_backend_maxpool2d_forward_bn(b, got_y, types[yi], got_at, xs[xi], types[xi],
                                             bn > 0 ? mean : NULL, bn > 0 ? invstd : NULL,
                                             bn > 0 ? gamma : NULL, bn > 0 ? beta : NULL, relu,
                                             g);
            g_assert_true(tdm_backend_check(b, NULL));
            size_t bytes = ny * tdm_dtype_size(types[yi]);
            g_assert_cmpmem(got_y, bytes, want_y, bytes);
            g_assert_cmpmem(got_at, ny * 4, want_at, ny * 4);
          }
      void *more[] = {a16, v16, stats, want_y, got_y, want_at, got_at};
      for (guint i = 0; i < G_N_ELEMENTS(more); i++)
        tdm_backend_release(b, more[i]);
    }
    tdm_backend_maxpool2d_backward(b, pdx, TDM_DTYPE_F32, dy_wide, TDM_DTYPE_F32, argmax, g);
    tdm_backend_maxpool2d_backward(b, pdx16, TDM_DTYPE_F32, dy16, TDM_DTYPE_BF16, argmax, g);
    g_assert_cmpmem(pdx16, count * 4, pdx, count * 4);
    g_autofree uint16_t *rounded = to_bf16_host(pdx, count);
    for (int in16 = 0; in16 < 2; in16++) {
      tdm_backend_maxpool2d_backward(b, pout16, TDM_DTYPE_BF16, in16 ? (void *)dy16 : dy_wide,
                                     in16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32, argmax, g);
      g_assert_cmpmem(pout16, count * 2, rounded, count * 2);
    }
    void *pool[] = {py, pdx, pdx16, pout16, argmax};
    for (guint i = 0; i < G_N_ELEMENTS(pool); i++)
      tdm_backend_release(b, pool[i]);
  }
  g_assert_true(tdm_backend_check(b, NULL));
  void *all[] = {y, dy, a, y16, dy16, dy_wide, want, got, got16};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(b, all[i]);
  free_backend(b);
  /* dx is dy but of another type: one failure that names the operation. */
  b = new_backend();
  float *one = dev_floats(b, 4);
  uint16_t *mask = dev_alloc(b, 8);
  tdm_backend_relu_backward_bf16(b, one, TDM_DTYPE_BF16, one, TDM_DTYPE_F32, mask, 4);
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "relu_backward_bf16"));
  tdm_backend_release(b, one);
  tdm_backend_release(b, mask);
  tdm_backend_free(b);
  /* add_strided_bf16 in place but rounding a float32 a into bf16: refused the same way. */
  b = new_backend();
  float *sum = dev_floats(b, 4), *share = dev_floats(b, 4);
  tdm_backend_add_strided_bf16(b, sum, TDM_DTYPE_BF16, sum, TDM_DTYPE_F32, share, 1, 2, 2, 1,
                               1);
  g_clear_error(&error);
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "add_strided_bf16"));
  tdm_backend_release(b, sum);
  tdm_backend_release(b, share);
  tdm_backend_free(b);
}

/* The plain layers' operations (n × h × w × c, window k, with a remainder), inputs with
 * ties: every third value repeats the one before, every fifth is one float32 step from
 * it (the same bf16). */
/* A residual block's start in backward, fused: add_relu_backward_bf16 (the first
 * layer's input gradient a, float32 or bf16, plus the skip's share x, float32 or bf16,
 * summed in float32, rounded once, and the ReLU of the block's end below applied by
 * its bf16 output y, or none where y is NULL) gives the bits of the unfused ops: a
 * widened, add_out_bf16, then relu_backward_bf16 in place; in place over x too. A
 * projection's start (add_strided_bf16 in place in a's type, then relu_backward_bf16 or
 * to_bf16 into the skip buffer) gives the bits of the float32 way (a widened, summed in
 * place in float32, to_bf16, relu_backward_bf16 in place): where a is bf16 (the conv
 * wrote it so, as cuDNN always does) the same sum rounded once. The mask has zeros of
 * both signs, negatives and a NaN (none passes); odd sizes, strides 1 to 3. */
static void
test_block_start(void)
{
  TdmBackend *b = new_backend();
  const int n = 3, h = 13, w = 11, c = 7;
  const size_t count = (size_t)n * h * w * c;
  float *a = dev_floats(b, count), *a_wide = dev_floats(b, count), *xf = dev_floats(b, count);
  float *yf = dev_floats(b, count);
  uint16_t *a16 = dev_alloc(b, count * 2), *x16 = dev_alloc(b, count * 2);
  uint16_t *y16 = dev_alloc(b, count * 2), *got = dev_alloc(b, count * 2);
  uint16_t *want = dev_alloc(b, count * 2), *inplace = dev_alloc(b, count * 2);
  fill_random(a, count, -1, 1);
  fill_random(xf, count, -1, 1);
  fill_random(yf, count, -2, 2);
  for (size_t i = 0; i < count; i += 5)
    yf[i] = i % 10 == 0 ? 0.0f : -0.0f;
  yf[7] = NAN;
  for (size_t i = 0; i < count; i++) {
    a16[i] = tdm_bf16_round(a[i]);
    x16[i] = tdm_bf16_round(xf[i]);
    y16[i] = tdm_bf16_round(yf[i]);
  }
  tdm_backend_from_bf16(b, a_wide, a16, count);
  for (int with_mask = 0; with_mask < 2; with_mask++) {
    const uint16_t *mask = with_mask ? y16 : NULL;
    for (int ab = 0; ab < 2; ab++) {
      TdmDtype a_type = ab ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
      const void *av = ab ? (const void *)a16 : (const void *)a;
      for (int xb = 0; xb < 2; xb++) {
        TdmDtype x_type = xb ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
        const void *xv = xb ? (const void *)x16 : (const void *)xf;
        tdm_backend_add_out_bf16(b, want, ab ? a_wide : a, xv, x_type, count, false);
        if (mask != NULL)
          tdm_backend_relu_backward_bf16(b, want, TDM_DTYPE_BF16, want, TDM_DTYPE_BF16, mask,
                                         count);
        tdm_backend_add_relu_backward_bf16(b, got, av, a_type, xv, x_type, mask, count);
        g_assert_cmpmem(got, count * 2, want, count * 2);
        if (xb) {
          memcpy(inplace, x16, count * 2);
          tdm_backend_add_relu_backward_bf16(b, inplace, av, a_type, inplace, x_type, mask,
                                             count);
          g_assert_cmpmem(inplace, count * 2, want, count * 2);
        }
      }
    }
  }
  for (int stride = 1; stride <= 3; stride++) {
    const int oh = (h - 1) / stride + 1, ow = (w - 1) / stride + 1;
    const size_t compact = (size_t)n * oh * ow * c;
    float *x = dev_floats(b, compact), *sum = dev_floats(b, count);
    fill_random(x, compact, -1, 1);
    for (int with_mask = 0; with_mask < 2; with_mask++) {
      const uint16_t *mask = with_mask ? y16 : NULL;
      for (int ab = 0; ab < 2; ab++) {
        /* The float32 way, from a as float32 (a bf16 a widened). */
        memcpy(sum, ab ? a_wide : a, count * 4);
        tdm_backend_add_strided_bf16(b, sum, TDM_DTYPE_F32, sum, TDM_DTYPE_F32, x, n, h, w, c,
                                     stride);
        tdm_backend_to_bf16(b, want, sum, count);
        if (mask != NULL)
          tdm_backend_relu_backward_bf16(b, want, TDM_DTYPE_BF16, want, TDM_DTYPE_BF16, mask,
                                         count);
        /* The fused way: in place in a's type, then into the skip buffer. */
        TdmDtype a_type = ab ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
        void *dy = ab ? (void *)inplace : (void *)a_wide;
        if (ab)
          memcpy(inplace, a16, count * 2);
        else
          memcpy(a_wide, a, count * 4);
        tdm_backend_add_strided_bf16(b, dy, a_type, dy, a_type, x, n, h, w, c, stride);
        if (mask != NULL)
          tdm_backend_relu_backward_bf16(b, got, TDM_DTYPE_BF16, dy, a_type, mask, count);
        else if (!ab)
          tdm_backend_to_bf16(b, got, dy, count);
        else
          memcpy(got, dy, count * 2);
        g_assert_cmpmem(got, count * 2, want, count * 2);
        tdm_backend_from_bf16(b, a_wide, a16, count);
      }
    }
    tdm_backend_release(b, x);
    tdm_backend_release(b, sum);
  }
  /* dx over an operand of another type: refused, as relu_backward_bf16 refuses. */
  tdm_backend_add_relu_backward_bf16(b, (uint16_t *)a, a, TDM_DTYPE_F32, x16, TDM_DTYPE_BF16,
                                     NULL, 4);
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "add_relu_backward_bf16"));
  void *bufs[] = {a, a_wide, xf, yf, a16, x16, y16, got, want, inplace};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    tdm_backend_release(b, bufs[i]);
  tdm_backend_free(b);
}

static void
test_plain_layers(void)
{
  TdmBackend *b = new_backend();
  const int n = 3, h = 9, w = 11, c = 12, k = 2, oh = h / k, ow = w / k;
  const size_t count = (size_t)n * h * w * c, outs = (size_t)n * oh * ow * c;
  float *x = dev_floats(b, count), *a = dev_floats(b, count), *p = dev_floats(b, 4 * c);
  fill_random(x, count, -3, 5);
  fill_random(a, count, -2, 2);
  fill_random(p, 4 * c, -1, 1);
  for (int ch = 0; ch < c; ch++)
    p[c + ch] = 0.5f + fabsf(p[c + ch]); /* invstd, or the running variance */
  for (size_t i = 1; i < count; i++)
    if (i % 3 == 0)
      x[i] = x[i - 1];
    else if (i % 5 == 0)
      x[i] = nextafterf(x[i - 1], INFINITY);
  uint16_t *x16 = dev_alloc(b, count * 2), *a16 = dev_alloc(b, count * 2);
  for (size_t i = 0; i < count; i++) {
    x16[i] = tdm_bf16_round(x[i]);
    a16[i] = tdm_bf16_round(a[i]);
  }
  float *x_wide = dev_floats(b, count), *a_wide = dev_floats(b, count);
  tdm_backend_from_bf16(b, x_wide, x16, count);
  tdm_backend_from_bf16(b, a_wide, a16, count);
  float *v = dev_floats(b, count), *y = dev_floats(b, outs);
  uint16_t *v16 = dev_alloc(b, count * 2), *got = dev_alloc(b, outs * 2);
  int32_t *arg = dev_alloc(b, outs * 4), *want_arg = dev_alloc(b, outs * 4);
  for (int t = 0; t < 2; t++) {
    TdmDtype x_type = t ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    const void *xin = t ? (const void *)x16 : (const void *)x;
    const float *xf = t ? x_wide : x;
    for (int bn = 0; bn < 3; bn++) {
      if (bn > 0)
        tdm_backend_bn_forward_bf16(b, v16, xin, x_type, p, p + c, p + 2 * c, p + 3 * c, NULL,
                                    TDM_DTYPE_F32, n * h * w, c, bn == 2);
      else
        tdm_backend_to_bf16(b, v16, xf, count);
      tdm_backend_from_bf16(b, v, v16, count);
      tdm_backend_maxpool_forward(b, y, want_arg, v, NULL, false, n, h, w, c, k);
      g_autofree uint16_t *want = to_bf16_host(y, outs);
      tdm_backend_maxpool_forward_bf16(b, got, arg, xin, x_type, bn ? p : NULL,
                                       bn ? p + c : NULL, bn ? p + 2 * c : NULL,
                                       bn ? p + 3 * c : NULL, bn == 2, n, h, w, c, k);
      g_assert_cmpmem(got, outs * 2, want, outs * 2);
      g_assert_cmpmem(arg, outs * 4, want_arg, outs * 4);
    }
    /* The evaluating bn, rounded; and a body's last bn with its ReLU plus the skip. */
    for (int relu = 0; relu < 2; relu++) {
      tdm_backend_bn_forward_eval(b, v, xin, x_type, p, p + c, p + 2 * c, p + 3 * c, 1e-5f,
                                  n * h * w, c, relu);
      g_autofree uint16_t *want = to_bf16_host(v, count);
      tdm_backend_bn_forward_eval_bf16(b, v16, xin, x_type, p, p + c, p + 2 * c, p + 3 * c,
                                       1e-5f, n * h * w, c, relu);
      g_assert_cmpmem(v16, count * 2, want, count * 2);
    }
    for (int at = 0; at < 2; at++) {
      TdmDtype a_type = at ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
      tdm_backend_bn_forward(b, v, xin, x_type, p, p + c, p + 2 * c, p + 3 * c, n * h * w, c,
                             true);
      tdm_backend_add_out(b, v, v, at ? a_wide : a, count, false);
      g_autofree uint16_t *want = to_bf16_host(v, count);
      tdm_backend_bn_relu_add_bf16(b, v16, xin, x_type, p, p + c, p + 2 * c, p + 3 * c,
                                   at ? (const void *)a16 : (const void *)a, a_type, n * h * w,
                                   c);
      g_assert_cmpmem(v16, count * 2, want, count * 2);
    }
  }
  /* The backward through the last argmax, every pair of types. */
  float *dy = dev_floats(b, outs), *dy_wide = dev_floats(b, outs), *dx = dev_floats(b, count);
  uint16_t *dy16 = dev_alloc(b, outs * 2);
  char *out = dev_alloc(b, count * 4);
  fill_random(dy, outs, -1, 1);
  for (size_t i = 0; i < outs; i++)
    dy16[i] = tdm_bf16_round(dy[i]);
  tdm_backend_from_bf16(b, dy_wide, dy16, outs);
  for (int t = 0; t < 4; t++) {
    TdmDtype dy_type = t & 1 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    TdmDtype dx_type = t & 2 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    memset(out, 0x7f, count * 4);
    tdm_backend_maxpool_backward(b, dx, NULL, t & 1 ? dy_wide : dy, arg, NULL, n, h, w, c, k);
    tdm_backend_maxpool_backward_bf16(b, out, dx_type, t & 1 ? (const void *)dy16 : dy, dy_type,
                                      arg, n, h, w, c, k);
    if (t & 2) {
      g_autofree uint16_t *want = to_bf16_host(dx, count);
      g_assert_cmpmem(out, count * 2, want, count * 2);
    } else {
      g_assert_cmpmem(out, count * 4, dx, count * 4);
    }
  }
  g_assert_true(tdm_backend_check(b, NULL));
  /* A bn given in part is refused, with the operation's name. */
  tdm_backend_maxpool_forward_bf16(b, got, arg, x, TDM_DTYPE_F32, p, NULL, NULL, NULL, false, n,
                                   h, w, c, k);
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "maxpool_forward_bf16"));
  void *bufs[] = {x, a, p, x16, a16, x_wide, a_wide, v, y, v16, got, arg, want_arg,
                  dy, dy_wide, dx, dy16, out};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    tdm_backend_release(b, bufs[i]);
  tdm_backend_free(b);
}

void
test_backend_cpu_add_bf16(void)
{
  g_test_add_func("/backend-cpu/bf16/rounding", test_rounding);
  g_test_add_func("/backend-cpu/bf16/columns", test_columns);
  g_test_add_func("/backend-cpu/bf16/gemm", test_gemm);
  g_test_add_func("/backend-cpu/bf16/bn-dx", test_bn_dx);
  g_test_add_func("/backend-cpu/bf16/bn-input", test_bn_bf16_input);
  g_test_add_func("/backend-cpu/bf16/block-ops", test_block_ops);
  g_test_add_func("/backend-cpu/bf16/block-gradients", test_block_gradients);
  g_test_add_func("/backend-cpu/bf16/block-start", test_block_start);
  g_test_add_func("/backend-cpu/bf16/plain-layers", test_plain_layers);
}
