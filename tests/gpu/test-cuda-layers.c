/* test-cuda-layers.c — the CUDA backend's operations for issue 10's layers against the
 * CPU backend (suite gpu): strided im2col/col2im, batch normalization in its three
 * training steps, evaluation mode and backward, average and global pooling, dropout
 * and the augmenting gather (the same numbers as the CPU, from the shared counter
 * RNG), label-smoothed softmax cross-entropy, PyTorch's SGD with Nesterov and a decay
 * mask, GEMMs in bf16, the column-free input gradient of a bf16 convolution, a bn
 * fused into its neighbours: a pool or bf16 conv after it (maxpool_forward_bn,
 * im2col_bf16_bn) and a bf16 conv before it (bn_backward_dx_bf16), and a residual
 * block's end in one pass (add_out). The older operations are test-cuda-kernels.c's.
 *
 * Inputs are fresh random numbers (g_test_rand_*, so --seed replays a run); GPU
 * outputs are poisoned with NaN first, so an element left unwritten fails. Results
 * are compared by relative error ||gpu − cpu|| / ||cpu||: 1e-5 in float32 (sums in
 * another order), exact for data movement and masks. bf16 GEMMs: 1e-2, see
 * test_gemm_bf16. Skips without a CUDA GPU.
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"
#include "tdm-counter-rng.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if TDM_HAVE_CUDA

#define TOL 1e-5

static TdmBackend *cpu;
static TdmBackend *gpu;
static TdmBackend *gpu_bf16;

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

static void *
on_b(TdmBackend *b, const void *host, size_t bytes)
{
  g_autoptr(GError) error = NULL;
  void *d = tdm_backend_alloc(b, bytes, &error);
  g_assert_no_error(error);
  if (host != NULL)
    b->ops->upload(b, d, host, bytes);
  return d;
}

static void *
on(const void *host, size_t bytes)
{
  return on_b(gpu, host, bytes);
}

static float *
poisoned_b(TdmBackend *b, size_t n)
{
  g_autofree float *nan = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    nan[i] = NAN;
  return on_b(b, nan, n * sizeof(float));
}

static float *
poisoned(size_t n)
{
  return poisoned_b(gpu, n);
}

static void
release(void *d)
{
  tdm_backend_release(gpu, d);
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

static void
check_close_b(TdmBackend *b, const char *what, const float *dev, const float *ref, size_t n,
              double tol)
{
  g_autofree float *out = g_new(float, n);
  b->ops->download(b, out, dev, n * sizeof(float));
  assert_ok(b);
  for (size_t i = 0; i < n; i++)
    if (!isfinite(out[i]) && isfinite(ref[i]))
      g_error("%s: element %zu is %g (reference %g): not written", what, i, out[i], ref[i]);
  double err = rel_error(out, ref, n);
  g_test_message("%s: relative error %.3g", what, err);
  if (!(err <= tol)) {
    /* Fail the test but go on, so one run on a lent GPU reports every case. */
    g_test_message("FAILED %s: relative error %.3g exceeds %.1g", what, err, tol);
    g_test_fail();
  }
}

static void
check_close(const char *what, const float *dev, const float *ref, size_t n, double tol)
{
  check_close_b(gpu, what, dev, ref, n, tol);
}

static void
check_ints(const char *what, const int32_t *dev, const int32_t *ref, size_t n)
{
  g_autofree int32_t *out = g_new(int32_t, n);
  gpu->ops->download(gpu, out, dev, n * sizeof(int32_t));
  assert_ok(gpu);
  for (size_t i = 0; i < n; i++)
    if (out[i] != ref[i]) {
      g_test_message("FAILED %s: element %zu is %d, expected %d", what, i, out[i], ref[i]);
      g_test_fail();
      return;
    }
}

/* bf16 results (test_stored_bf16 and the bn's bf16 input gradient): float to nearest
 * even bfloat16, as __float2bfloat16_rn (no NaN in these data). */
static uint16_t
bf16_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float
bf16_value(uint16_t h)
{
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void
check_bits(const char *what, const uint16_t *dev, const float *ref, size_t n)
{
  g_autofree uint16_t *out = g_new(uint16_t, n);
  gpu->ops->download(gpu, out, dev, n * sizeof(uint16_t));
  assert_ok(gpu);
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (out[i] != bf16_bits(ref[i]) && wrong++ == 0)
      first = i;
  g_test_message("%s: %zu of %zu values differ", what, wrong, n);
  if (wrong > 0) {
    g_test_message("FAILED %s: value %zu is 0x%04x, expected 0x%04x (from %.9g)", what, first,
                   out[first], bf16_bits(ref[first]), ref[first]);
    g_test_fail();
  }
}

/* Strided convolution's data movement */

static void
strided_case(int n, int h, int w, int c, int k, int pad, int stride)
{
  int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  size_t xs = (size_t)n * h * w * c, cols = (size_t)n * oh * ow * c * k * k;
  g_autofree float *x = random_floats(xs, -1, 1);
  g_autofree float *col_ref = g_new(float, cols);
  cpu->ops->im2col(cpu, col_ref, x, n, h, w, c, k, k, pad, stride);
  float *dx = on(x, xs * 4), *dcol = poisoned(cols);
  gpu->ops->im2col(gpu, dcol, dx, n, h, w, c, k, k, pad, stride);
  g_autofree char *what = g_strdup_printf("im2col n%d %dx%dx%d k%d pad%d stride%d", n, h, w,
                                          c, k, pad, stride);
  check_close(what, dcol, col_ref, cols, 0.0);

  g_autofree float *col = random_floats(cols, -1, 1);
  g_autofree float *dx_ref = g_new(float, xs);
  cpu->ops->col2im(cpu, dx_ref, col, n, h, w, c, k, k, pad, stride);
  float *dcol2 = on(col, cols * 4), *ddx = poisoned(xs);
  gpu->ops->col2im(gpu, ddx, dcol2, n, h, w, c, k, k, pad, stride);
  g_autofree char *what2 = g_strdup_printf("col2im n%d %dx%dx%d k%d pad%d stride%d", n, h, w,
                                           c, k, pad, stride);
  check_close(what2, ddx, dx_ref, xs, TOL);
  release(dx);
  release(dcol);
  release(dcol2);
  release(ddx);
}

static void
test_strided_conv(void)
{
  if (!have_gpu())
    return;
  strided_case(4, 28, 28, 32, 3, 1, 2);  /* a ResNet's downsampling conv */
  strided_case(3, 14, 14, 64, 1, 0, 2);  /* its 1×1 projection */
  strided_case(2, 9, 7, 3, 3, 1, 2);     /* odd sizes, scalar path */
  strided_case(2, 11, 11, 5, 2, 0, 3);   /* stride > kernel: pixels no window reads */
  strided_case(2, 8, 8, 4, 3, 1, 1);     /* stride 1 still right */
}

/* Batch normalization: the training steps as one replica runs them. */

/* tol: 1e-5, except for a single row, whose variance is 0: invstd = 1/√eps ≈ 316
 * multiplies the rounding of x − mean, and the forward's x · scale + shift cancels to
 * β, so its few-ulp differences (an FMA on the GPU) come out ~3e-5 relative. */
/* offset: added to every value (a large mean tests the one-pass statistics); the GPU
 * writes its statistics into slot 1 of 3, as the second of three synchronized
 * replicas would, and the CPU's reference into slot 0 of 1. */
static void
bn_case_offset(int rows, int channels, bool relu, double tol, float offset)
{
  size_t n = (size_t)rows * channels;
  /* An offset and a spread per channel, as activations have. */
  g_autofree float *x = random_floats(n, -1, 1);
  for (size_t i = 0; i < n; i++)
    x[i] = x[i] * (1.0f + (float)(i % channels) * 0.1f) + 0.5f + offset;
  g_autofree float *gamma = random_floats(channels, 0.5, 1.5);
  g_autofree float *beta = random_floats(channels, -0.5, 0.5);
  g_autofree float *rm = random_floats(channels, -0.1, 0.1);
  g_autofree float *rv = random_floats(channels, 0.9, 1.1);
  g_autofree float *dy = random_floats(n, -1, 1);
  const float eps = 1e-5f, momentum = 0.1f;

  /* CPU reference */
  const size_t slot = TDM_BN_SLOT_FLOATS(channels);
  g_autofree float *slots = g_new(float, slot);
  g_autofree float *saved = g_new(float, 2 * (size_t)channels);
  g_autofree float *rm_ref = g_memdup2(rm, channels * 4), *rv_ref = g_memdup2(rv, channels * 4);
  g_autofree float *y_ref = g_new(float, n), *ye_ref = g_new(float, n);
  g_autofree float *dg_ref = g_new(float, channels), *db_ref = g_new(float, channels);
  g_autofree float *dx_ref = g_new(float, n);
  const TdmBackendOps *c = cpu->ops;
  c->bn_moments(cpu, slots, x, rows, channels, 0, 1);
  c->bn_stats(cpu, saved, slots, 1, channels, eps, momentum, rm_ref, rv_ref);
  c->bn_forward(cpu, y_ref, x, saved, saved + channels, gamma, beta, rows, channels, relu);
  c->bn_forward_eval(cpu, ye_ref, x, rm_ref, rv_ref, gamma, beta, eps, rows, channels, relu);
  assert_ok(cpu);

  float *dx_in = on(x, n * 4), *dgam = on(gamma, channels * 4), *dbet = on(beta, channels * 4);
  float *drm = on(rm, channels * 4), *drv = on(rv, channels * 4), *ddy = on(dy, n * 4);
  float *dslots = poisoned(3 * slot);
  float *dsaved = poisoned(2 * (size_t)channels);
  float *dyo = poisoned(n), *dye = poisoned(n), *ddg = poisoned(channels);
  float *ddb = poisoned(channels), *ddx = poisoned(n);
  const TdmBackendOps *g = gpu->ops;
  g->bn_moments(gpu, dslots, dx_in, rows, channels, 1, 3);
  g->bn_stats(gpu, dsaved, dslots, 3, channels, eps, momentum, drm, drv);
  g->bn_forward(gpu, dyo, dx_in, dsaved, dsaved + channels, dgam, dbet, rows, channels, relu);
  g->bn_forward_eval(gpu, dye, dx_in, drm, drv, dgam, dbet, eps, rows, channels, relu);

  /* The reference backward takes the ReLU's mask through relu_backward from the GPU's
   * own forward output, as the engine did before the backend recomputed the mask from
   * x: so the GPU's recomputed mask must be its forward's, value for value. (The
   * CPU's forward output would not do: with a large mean, x · scale + shift cancels
   * and the two forwards' last bits, an FMA apart, put values within ~1e-4 of 0 on
   * different sides of it.) */
  g_autofree float *dy_masked = g_memdup2(dy, n * 4);
  if (relu) {
    g_autofree float *y_gpu = g_new(float, n);
    gpu->ops->download(gpu, y_gpu, dyo, n * 4);
    assert_ok(gpu);
    c->relu_backward(cpu, dy_masked, dy, y_gpu, n);
  }
  c->bn_backward_sums(cpu, dg_ref, db_ref, dy_masked, x, saved, saved + channels, gamma, beta,
                      false, rows, channels);
  c->bn_backward_dx(cpu, dx_ref, dy_masked, x, saved, saved + channels, gamma, beta, false,
                    dg_ref, db_ref, 1.0f / rows, rows, channels);
  assert_ok(cpu);
  g->bn_backward_sums(gpu, ddg, ddb, ddy, dx_in, dsaved, dsaved + channels, dgam, dbet, relu,
                      rows, channels);
  /* dx == dy allowed: write over the gradient itself. */
  gpu->ops->copy(gpu, ddx, ddy, n * 4);
  g->bn_backward_dx(gpu, ddx, ddx, dx_in, dsaved, dsaved + channels, dgam, dbet, relu, ddg,
                    ddb, 1.0f / rows, rows, channels);
  /* The same dx as bf16 (a conv's output gradient under --precision bf16): to_bf16's
   * bits of the float dx, and so within bf16's rounding (2⁻⁹ of each value) of the
   * CPU's. Every value poisoned (0xffff, a bf16 NaN); the one past the end stays so. */
  g_autofree uint16_t *dx16 = g_new(uint16_t, n + 1);
  memset(dx16, 0xff, (n + 1) * 2);
  uint16_t *ddx16 = on(dx16, (n + 1) * 2);
  g->bn_backward_dx_bf16(gpu, ddx16, ddy, dx_in, dsaved, dsaved + channels, dgam, dbet, relu,
                         ddg, ddb, 1.0f / rows, rows, channels);

  g_autofree char *tag = g_strdup_printf("%d×%d%s offset %g", rows, channels,
                                         relu ? " relu" : "", offset);
  /* Slots 0 and 2 all zeros; slot 1 the CPU's (mean high and low parts, M2, count). */
  g_autofree float *zeros = g_new0(float, slot);
  g_autofree char *w1 = g_strdup_printf("bn_moments other slots %s", tag);
  check_close(w1, dslots, zeros, slot, 0.0);
  check_close(w1, dslots + 2 * slot, zeros, slot, 0.0);
  g_autofree char *w2 = g_strdup_printf("bn_moments mean %s", tag);
  check_close(w2, dslots + slot, slots, channels, TOL);
  g_autofree char *w2b = g_strdup_printf("bn_moments M2 and count %s", tag);
  check_close(w2b, dslots + slot + 2 * channels, slots + 2 * channels, channels + 2, TOL);
  g_autofree char *w3 = g_strdup_printf("bn_stats %s", tag);
  check_close(w3, dsaved, saved, 2 * (size_t)channels, TOL);
  g_autofree char *w4 = g_strdup_printf("bn running mean and var %s", tag);
  check_close(w4, drm, rm_ref, channels, TOL);
  check_close(w4, drv, rv_ref, channels, TOL);
  g_autofree char *w5 = g_strdup_printf("bn_forward %s", tag);
  check_close(w5, dyo, y_ref, n, tol);
  g_autofree char *w6 = g_strdup_printf("bn_forward_eval %s", tag);
  check_close(w6, dye, ye_ref, n, TOL);
  g_autofree char *w7 = g_strdup_printf("bn_backward_sums %s", tag);
  check_close(w7, ddg, dg_ref, channels, TOL);
  check_close(w7, ddb, db_ref, channels, TOL);
  g_autofree char *w8 = g_strdup_printf("bn_backward_dx %s", tag);
  check_close(w8, ddx, dx_ref, n, tol);
  g_autofree float *dx_gpu = g_new(float, n);
  gpu->ops->download(gpu, dx_gpu, ddx, n * 4);
  g_autofree char *w9 = g_strdup_printf("bn_backward_dx_bf16 against bn_backward_dx %s", tag);
  check_bits(w9, ddx16, dx_gpu, n);
  gpu->ops->download(gpu, dx16, ddx16, (n + 1) * 2);
  assert_ok(gpu);
  g_assert_cmpuint(dx16[n], ==, 0xffff);
  for (size_t i = 0; i < n; i++)
    dx_gpu[i] = bf16_value(dx16[i]);
  double err = rel_error(dx_gpu, dx_ref, n);
  g_test_message("bn_backward_dx_bf16 %s: relative error %.3g", tag, err);
  if (!(err <= 4e-3 + tol)) {
    g_test_message("FAILED bn_backward_dx_bf16 %s: relative error %.3g exceeds %.1g", tag,
                   err, 4e-3 + tol);
    g_test_fail();
  }

  void *all[] = {dx_in, dgam, dbet, drm, drv, ddy, dslots, dsaved, dyo, dye, ddg, ddb, ddx,
                 ddx16};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    release(all[i]);
}

static void
bn_case(int rows, int channels, bool relu, double tol)
{
  bn_case_offset(rows, channels, relu, tol, 0.0f);
}

static void
test_batchnorm(void)
{
  if (!have_gpu())
    return;
  bn_case(512 * 14 * 14, 64, true, TOL);  /* a conv layer's output at batch 512 */
  bn_case(300, 100, false, TOL);          /* an fc layer's, channels not a multiple of 32 */
  bn_case(7, 3, true, TOL);               /* fewer rows than a block's lanes */
  bn_case(1, 5, false, 1e-3);             /* one row: count − 1 is 0, variance 0 */
  /* The resnet preset's first and last stages: the most row groups (a thousand, the
   * finish's 32 lanes each adding 32 of them) and eight channel tiles. */
  bn_case(512 * 28 * 28, 32, true, TOL);
  bn_case(512 * 3 * 3, 256, false, TOL);
  bn_case(33, 6, true, TOL);              /* channels not a multiple of 4: no float4 */
  /* A mean 1000 spreads from zero: the one-pass sums' shift keeps M2 exact (float's
   * Σx² − (Σx)²/n would lose it all); the forward's x · scale + shift then cancels
   * 1000 to a few units, which leaves ~1e-4 of float rounding in y and dx. */
  bn_case_offset(512 * 14 * 14, 64, true, 1e-3, 1000.0f);
}

/* Pooling */

static void
avgpool_case(int n, int h, int w, int c, int k)
{
  int oh = h / k, ow = w / k;
  size_t xs = (size_t)n * h * w * c, ys = (size_t)n * oh * ow * c;
  g_autofree float *x = random_floats(xs, -1, 1), *gy = random_floats(ys, -1, 1);
  g_autofree float *y_ref = g_new(float, ys), *gx_ref = g_new(float, xs);
  cpu->ops->avgpool_forward(cpu, y_ref, x, n, h, w, c, k);
  cpu->ops->avgpool_backward(cpu, gx_ref, gy, n, h, w, c, k);
  assert_ok(cpu);
  float *dx = on(x, xs * 4), *dy = poisoned(ys), *dgy = on(gy, ys * 4), *dgx = poisoned(xs);
  gpu->ops->avgpool_forward(gpu, dy, dx, n, h, w, c, k);
  gpu->ops->avgpool_backward(gpu, dgx, dgy, n, h, w, c, k);
  g_autofree char *what = g_strdup_printf("avgpool n%d %dx%dx%d k%d", n, h, w, c, k);
  check_close(what, dy, y_ref, ys, TOL);
  check_close(what, dgx, gx_ref, xs, TOL);
  release(dx);
  release(dy);
  release(dgy);
  release(dgx);
}

static void
global_case(int n, int pixels, int c, bool ties)
{
  size_t xs = (size_t)n * pixels * c, ys = (size_t)n * c;
  g_autofree float *x = random_floats(xs, -1, 1), *gy = random_floats(ys, -1, 1);
  if (ties) /* a ReLU's output: many equal zeros, the first must win */
    for (size_t i = 0; i < xs; i++)
      x[i] = x[i] < 0.5f ? 0.0f : x[i];
  g_autofree float *ya = g_new(float, ys), *ym = g_new(float, ys);
  g_autofree int32_t *am = g_new(int32_t, ys);
  g_autofree float *ga = g_new(float, xs), *gm = g_new(float, xs);
  cpu->ops->global_avgpool_forward(cpu, ya, x, n, pixels, c);
  cpu->ops->global_avgpool_backward(cpu, ga, gy, n, pixels, c);
  cpu->ops->global_maxpool_forward(cpu, ym, am, x, n, pixels, c);
  cpu->ops->global_maxpool_backward(cpu, gm, gy, am, n, pixels, c);
  assert_ok(cpu);
  float *dx = on(x, xs * 4), *dgy = on(gy, ys * 4);
  float *dya = poisoned(ys), *dym = poisoned(ys), *dga = poisoned(xs), *dgm = poisoned(xs);
  int32_t *dam = on(NULL, ys * 4);
  gpu->ops->global_avgpool_forward(gpu, dya, dx, n, pixels, c);
  gpu->ops->global_avgpool_backward(gpu, dga, dgy, n, pixels, c);
  gpu->ops->global_maxpool_forward(gpu, dym, dam, dx, n, pixels, c);
  gpu->ops->global_maxpool_backward(gpu, dgm, dgy, dam, n, pixels, c);
  g_autofree char *what = g_strdup_printf("global pools n%d %d pixels c%d%s", n, pixels, c,
                                          ties ? " ties" : "");
  check_close(what, dya, ya, ys, TOL);
  check_close(what, dga, ga, xs, TOL);
  check_close(what, dym, ym, ys, 0.0);
  check_ints(what, dam, am, ys);
  check_close(what, dgm, gm, xs, 0.0);
  void *all[] = {dx, dgy, dya, dym, dga, dgm, dam};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    release(all[i]);
}

static void
test_pooling(void)
{
  if (!have_gpu())
    return;
  avgpool_case(8, 28, 28, 32, 2);
  avgpool_case(3, 7, 9, 5, 3);        /* the floor leaves pixels in no window */
  global_case(64, 49, 128, false);
  global_case(5, 9, 3, true);
  global_case(2, 1, 7, false);        /* one pixel */
}

/* Dropout: the same mask as the CPU draws, forward and backward, in place too. */

static void
dropout_case(int n, int per_sample, float p)
{
  size_t total = (size_t)n * per_sample;
  g_autofree float *x = random_floats(total, -1, 1), *g = random_floats(total, -1, 1);
  g_autofree int32_t *idx = g_new(int32_t, n);
  for (int i = 0; i < n; i++)
    idx[i] = g_test_rand_int_range(0, 60000);
  const uint64_t key = tdm_crng_key(7, TDM_RNG_DROPOUT + 3);
  g_autofree float *y_ref = g_new(float, total), *gx_ref = g_new(float, total);
  cpu->ops->dropout_forward(cpu, y_ref, x, idx, n, per_sample, p, key, 4);
  cpu->ops->dropout_backward(cpu, gx_ref, g, idx, n, per_sample, p, key, 4);
  assert_ok(cpu);
  float *dx = on(x, total * 4), *dy = poisoned(total), *dg = on(g, total * 4);
  int32_t *didx = on(idx, n * 4);
  gpu->ops->dropout_forward(gpu, dy, dx, didx, n, per_sample, p, key, 4);
  gpu->ops->dropout_backward(gpu, dg, dg, didx, n, per_sample, p, key, 4);
  g_autofree char *what = g_strdup_printf("dropout %d×%d p %g", n, per_sample, p);
  check_close(what, dy, y_ref, total, 0.0);
  check_close(what, dg, gx_ref, total, 0.0);
  /* The mask is not trivial: about p of the elements are dropped (counted where there
   * are enough of them for the fraction to mean something: at 256 000 draws its
   * standard deviation is under 1e-3). */
  if (total >= 10000) {
    size_t dropped = 0;
    for (size_t i = 0; i < total; i++)
      dropped += y_ref[i] == 0.0f;
    g_assert_cmpfloat(fabs((double)dropped / total - p), <, 0.01);
  }
  release(dx);
  release(dy);
  release(dg);
  release(didx);
}

static void
test_dropout(void)
{
  if (!have_gpu())
    return;
  dropout_case(256, 1000, 0.25f);
  dropout_case(3, 7, 0.5f);
}

/* The augmenting gather: crops and flips drawn on the device equal the CPU's. */

static void
augment_case(int samples, int h, int w, int c, int count, int pad, TdmFlip flip)
{
  size_t sample = (size_t)h * w * c, bytes = (size_t)samples * sample;
  g_autofree uint8_t *images = g_new(uint8_t, bytes);
  g_autofree uint8_t *labels = g_new(uint8_t, samples);
  for (size_t i = 0; i < bytes; i++)
    images[i] = (uint8_t)g_test_rand_int_range(0, 256);
  for (int i = 0; i < samples; i++)
    labels[i] = (uint8_t)g_test_rand_int_range(0, 10);
  g_autofree int32_t *idx = g_new(int32_t, count);
  for (int i = 0; i < count; i++)
    idx[i] = g_test_rand_int_range(0, samples);
  const uint64_t key = tdm_crng_key(11, TDM_RNG_AUGMENT);
  size_t xs = (size_t)count * sample;
  g_autofree float *x_ref = g_new(float, xs);
  g_autofree int32_t *y_ref = g_new(int32_t, count);
  cpu->ops->gather_augment(cpu, x_ref, y_ref, images, labels, idx, count, h, w, c,
                           1.0f / 255.0f, pad, flip, key, 2);
  assert_ok(cpu);
  uint8_t *dimg = on(images, bytes), *dlab = on(labels, samples);
  int32_t *didx = on(idx, count * 4), *dy = on(NULL, count * 4);
  float *dx = poisoned(xs);
  gpu->ops->gather_augment(gpu, dx, dy, dimg, dlab, didx, count, h, w, c, 1.0f / 255.0f, pad,
                           flip, key, 2);
  g_autofree char *what = g_strdup_printf("gather_augment %d of %dx%dx%d pad %d flip %d",
                                          count, h, w, c, pad, flip);
  check_close(what, dx, x_ref, xs, 0.0);
  check_ints(what, dy, y_ref, count);
  void *all[] = {dimg, dlab, didx, dy, dx};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    release(all[i]);
}

static void
test_gather_augment(void)
{
  if (!have_gpu())
    return;
  augment_case(1000, 28, 28, 1, 512, 2, TDM_FLIP_RANDOM);
  augment_case(200, 32, 32, 3, 100, 4, TDM_FLIP_ALWAYS);
  augment_case(50, 5, 7, 2, 20, 3, TDM_FLIP_NEVER);
  augment_case(50, 5, 7, 2, 20, 0, TDM_FLIP_NEVER);   /* gather itself */
}

/* Label smoothing */

static void
smoothing_case(int rows, int classes, float smoothing)
{
  size_t n = (size_t)rows * classes;
  g_autofree float *logits = random_floats(n, -4, 4);
  g_autofree int32_t *labels = g_new(int32_t, rows);
  for (int i = 0; i < rows; i++)
    labels[i] = g_test_rand_int_range(0, classes);
  TdmMetrics m_ref = {0.5, 1.0};
  g_autofree float *d_ref = g_new(float, n);
  cpu->ops->softmax_xent(cpu, logits, labels, rows, classes, smoothing, 1.0f / rows, d_ref,
                         &m_ref);
  assert_ok(cpu);
  float *dl = on(logits, n * 4), *dd = poisoned(n);
  int32_t *dlab = on(labels, rows * 4);
  TdmMetrics m0 = {0.5, 1.0}, m;
  TdmMetrics *dm = on(&m0, sizeof m0);
  gpu->ops->softmax_xent(gpu, dl, dlab, rows, classes, smoothing, 1.0f / rows, dd, dm);
  gpu->ops->download(gpu, &m, dm, sizeof m);
  assert_ok(gpu);
  g_test_message("smoothing %g, %d×%d: loss %.9g vs %.9g", smoothing, rows, classes,
                 m.loss_sum, m_ref.loss_sum);
  g_assert_cmpfloat(fabs(m.loss_sum - m_ref.loss_sum), <=, 1e-5 * fabs(m_ref.loss_sum));
  g_assert_cmpfloat(m.correct, ==, m_ref.correct);
  check_close("softmax_xent smoothed dlogits", dd, d_ref, n, TOL);
  release(dl);
  release(dd);
  release(dlab);
  release(dm);
}

static void
test_label_smoothing(void)
{
  if (!have_gpu())
    return;
  smoothing_case(512, 10, 0.1f);
  smoothing_case(33, 1000, 0.3f);
  smoothing_case(5, 3, 1.0f);
}

/* PyTorch's SGD with Nesterov and the decay mask, and the mask alone. */

static void
nesterov_case(size_t n, bool nesterov, bool masked)
{
  g_autofree float *p = random_floats(n, -1, 1), *g = random_floats(n, -1, 1);
  g_autofree float *v = random_floats(n, -0.1, 0.1);
  g_autofree uint8_t *mask = g_new(uint8_t, n);
  for (size_t i = 0; i < n; i++)
    mask[i] = (uint8_t)g_test_rand_int_range(0, 2);
  g_autofree float *rp = g_memdup2(p, n * 4), *rv = g_memdup2(v, n * 4);
  g_autofree float *rg = g_memdup2(g, n * 4);
  float *dp = on(p, n * 4), *dg = on(g, n * 4), *dv = on(v, n * 4);
  uint8_t *dmask = on(mask, n);
  for (int step = 0; step < 3; step++) {
    cpu->ops->sgd_momentum_update(cpu, rp, g, rv, masked ? mask : NULL, n, 0.2f, 0.9f, 5e-4f,
                                  nesterov);
    gpu->ops->sgd_momentum_update(gpu, dp, dg, dv, masked ? dmask : NULL, n, 0.2f, 0.9f,
                                  5e-4f, nesterov);
  }
  cpu->ops->weight_decay(cpu, rg, rp, masked ? mask : NULL, n, 0.01f);
  gpu->ops->weight_decay(gpu, dg, dp, masked ? dmask : NULL, n, 0.01f);
  g_autofree char *what = g_strdup_printf("sgd_momentum n%zu%s%s", n,
                                          nesterov ? " nesterov" : "",
                                          masked ? " masked" : "");
  check_close(what, dp, rp, n, TOL);
  check_close(what, dv, rv, n, TOL);
  check_close(what, dg, rg, n, TOL);
  release(dp);
  release(dg);
  release(dv);
  release(dmask);
}

static void
test_nesterov(void)
{
  if (!have_gpu())
    return;
  nesterov_case(1000003, true, true);
  nesterov_case(1001, false, true);
  nesterov_case(17, true, false);
}

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
  cpu->ops->gemm(cpu, ta, tb, m, n, k, 1.0f, a, lda, bm, ldb, 0.0f, ref, n);
  assert_ok(cpu);
  float *da = on_b(gpu_bf16, a, as * 4), *db = on_b(gpu_bf16, bm, bs * 4);
  float *dc = poisoned_b(gpu_bf16, cs);
  gpu_bf16->ops->gemm(gpu_bf16, ta, tb, m, n, k, 1.0f, da, lda, db, ldb, 0.0f, dc, n);
  g_autofree char *what = g_strdup_printf("gemm bf16 %s%s %d×%d×%d", ta ? "T" : "N",
                                          tb ? "T" : "N", m, n, k);
  check_close_b(gpu_bf16, what, dc, ref, cs, 1e-2);
  g_autofree float *out = g_new(float, cs);
  gpu_bf16->ops->download(gpu_bf16, out, dc, cs * 4);
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
  cpu->ops->im2col(cpu, ref, x, n, h, w, c, k, k, pad, stride);
  float *dx = on(x, xs * 4);
  uint16_t *dcol = (uint16_t *)poisoned(cols / 2 + 1);
  gpu->ops->im2col_bf16(gpu, dcol, dx, n, h, w, c, k, k, pad, stride);
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
  cpu->ops->bn_forward(cpu, y, x, saved, saved + c, gamma, beta, rows, c, relu);
  cpu->ops->im2col(cpu, ref, y, n, h, w, c, k, k, pad, stride);
  assert_ok(cpu);

  float *dx = on(x, xs * 4), *dsaved = on(saved, 2 * (size_t)c * 4);
  float *dgamma = on(gamma, c * 4), *dbeta = on(beta, c * 4), *dy = poisoned(xs);
  uint16_t *dcol = (uint16_t *)poisoned(cols / 2 + 1);
  uint16_t *dref = (uint16_t *)poisoned(cols / 2 + 1);
  gpu->ops->bn_forward(gpu, dy, dx, dsaved, dsaved + c, dgamma, dbeta, rows, c, relu);
  gpu->ops->im2col_bf16(gpu, dref, dy, n, h, w, c, k, k, pad, stride);
  gpu->ops->im2col_bf16_bn(gpu, dcol, dx, dsaved, dsaved + c, dgamma, dbeta, relu, n, h, w, c,
                           k, k, pad, stride);
  g_autofree uint16_t *col = g_new(uint16_t, cols), *col_ref = g_new(uint16_t, cols);
  gpu->ops->download(gpu, col, dcol, cols * 2);
  gpu->ops->download(gpu, col_ref, dref, cols * 2);
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
  cpu->ops->bn_forward(cpu, bn_ref, x, saved, saved + c, gamma, beta, rows, c, relu);
  cpu->ops->maxpool_forward(cpu, y_ref, at_ref, bn_ref, NULL, false, n, h, w, c, k);
  assert_ok(cpu);

  float *dx = on(x, xs * 4), *dsaved = on(saved, 2 * (size_t)c * 4);
  float *dgamma = on(gamma, c * 4), *dbeta = on(beta, c * 4), *dbn = poisoned(xs);
  float *dy = poisoned(ys), *dy_unfused = poisoned(ys);
  int32_t *dat = (int32_t *)poisoned(ys), *dat_unfused = (int32_t *)poisoned(ys);
  const TdmBackendOps *g = gpu->ops;
  g->bn_forward(gpu, dbn, dx, dsaved, dsaved + c, dgamma, dbeta, rows, c, relu);
  g->maxpool_forward(gpu, dy_unfused, dat_unfused, dbn, NULL, false, n, h, w, c, k);
  g->maxpool_forward_bn(gpu, dy, dat, dx, dsaved, dsaved + c, dgamma, dbeta, relu, n, h, w, c,
                        k);
  g_autofree float *y_unfused = g_new(float, ys);
  g_autofree int32_t *at_unfused = g_new(int32_t, ys);
  g->download(gpu, y_unfused, dy_unfused, ys * 4);
  g->download(gpu, at_unfused, dat_unfused, ys * 4);
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

/* add_out: a residual block's end, y = a + x then the ReLU, against the CPU's copy,
 * add and relu_forward, bit for bit; in place over x, and n not a multiple of 4. */
static void
add_out_case(size_t n, bool relu, bool in_place)
{
  g_autofree float *a = random_floats(n, -2, 2), *x = random_floats(n, -2, 2);
  g_autofree float *ref = g_memdup2(a, n * 4);
  cpu->ops->add(cpu, ref, x, n);
  if (relu)
    cpu->ops->relu_forward(cpu, ref, ref, n);
  assert_ok(cpu);
  float *da = on(a, n * 4), *dx = on(x, n * 4), *dy = in_place ? dx : poisoned(n);
  gpu->ops->add_out(gpu, dy, da, dx, n, relu);
  g_autofree char *what = g_strdup_printf("add_out %zu%s%s", n, relu ? " relu" : "",
                                          in_place ? " in place" : "");
  check_close(what, dy, ref, n, 0.0);
  release(da);
  release(dx);
  if (!in_place)
    release(dy);
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
  cpu->ops->gemm(cpu, ta, tb, m, n, k, 1.0f, a, lda, bm, ldb, 0.0f, ref, n);
  assert_ok(cpu);
  uint16_t *da = on(a16, as * 2), *db = on(b16, bs * 2);
  float *dc = poisoned(cs);
  gpu->ops->gemm_bf16(gpu, ta, tb, m, n, k, 1.0f, da, lda, db, ldb, 0.0f, dc, n);
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
  cpu->ops->gemm(cpu, false, false, rows, kc, out, 1.0f, dy, out, wt, kc, 0.0f, dcol, kc);
  assert_ok(cpu);
  uint16_t *ddy = on(dy16, ys * 2), *dw = on(w16, ws * 2);
  uint16_t *dcol16 = (uint16_t *)poisoned(cols / 2 + 1);
  float *ddx = poisoned(xs);
  gpu->ops->gemm_bf16_out(gpu, false, false, rows, kc, out, ddy, out, dw, kc, dcol16, kc);
  g_autofree uint16_t *got = g_new(uint16_t, cols);
  gpu->ops->download(gpu, got, dcol16, cols * 2);
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
  cpu->ops->col2im(cpu, dx_ref, got_f, n, h, w, c, k, k, pad, stride);
  gpu->ops->col2im_bf16(gpu, ddx, dcol16, n, h, w, c, k, k, pad, stride);
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
  cpu->ops->gemm(cpu, false, false, rows, kc, out, 1.0f, dy, out, wt, kc, 0.0f, dcol, kc);
  cpu->ops->col2im(cpu, dx_ref, dcol, n, h, w, c, k, k, pad, stride);
  assert_ok(cpu);
  uint16_t *ddy = on(dy16, ys * 2), *dw = on(w16, ws * 2);
  uint16_t *dcol16 = (uint16_t *)poisoned(cols / 2 + 1);
  float *ddx = poisoned(xs);
  gpu->ops->conv_dgrad_bf16(gpu, ddx, ddy, dw, dcol16, n, h, w, c, out, k, k, pad, stride);
  g_autofree char *what = g_strdup_printf("conv_dgrad_bf16 %d×%d×%d×%d from %d k%d p%d s%d (%s)",
                                          n, h, w, c, out, k, pad, stride,
                                          implicit ? "implicit" : "columns");
  check_close(what, ddx, dx_ref, xs, implicit ? TOL : 3e-3);
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
  gpu->ops->to_bf16(gpu, dh, dv, n);
  check_bits("to_bf16", dh, v, n);
  /* Four values a thread where both ends are aligned, n % 4 = 3 left for the tail;
   * one value a thread otherwise (the input one float off its 16-byte alignment). */
  gpu->ops->to_bf16(gpu, dh, dv + 1, n - 1);
  check_bits("to_bf16, misaligned input", dh, v + 1, n - 1);
  gpu->ops->to_bf16(gpu, dh, dv + 4, 6);
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

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* A failed check marks its test failed and goes on (check_close does the same), so
   * one run on a lent GPU reports every case. */
  g_test_set_nonfatal_assertions();

  g_autoptr(GError) error = NULL;
  cpu = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  size_t base = 0, base_bf16 = 0;
  /* conv_dgrad_bf16's implicit kernel is off unless asked for (tdm-backend-cuda.c). */
  g_setenv("TDM_CUDA_IMPLICIT", "1", TRUE);
  if (tdm_backend_cuda_available()) {
    gpu = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
    g_assert_no_error(error);
    gpu_bf16 = tdm_backend_cuda_new(0, TDM_PRECISION_BF16, &error);
    g_assert_no_error(error);
    base = gpu->bytes_in_use;
    base_bf16 = gpu_bf16->bytes_in_use;
  }

  g_test_add_func("/cuda-layers/strided-conv", test_strided_conv);
  g_test_add_func("/cuda-layers/batchnorm", test_batchnorm);
  g_test_add_func("/cuda-layers/pooling", test_pooling);
  g_test_add_func("/cuda-layers/dropout", test_dropout);
  g_test_add_func("/cuda-layers/gather-augment", test_gather_augment);
  g_test_add_func("/cuda-layers/label-smoothing", test_label_smoothing);
  g_test_add_func("/cuda-layers/nesterov", test_nesterov);
  g_test_add_func("/cuda-layers/gemm-bf16", test_gemm_bf16);
  g_test_add_func("/cuda-layers/stored-bf16", test_stored_bf16);
  g_test_add_func("/cuda-layers/conv-dgrad-bf16", test_conv_dgrad_bf16);
  g_test_add_func("/cuda-layers/fused", test_fused);

  int status = g_test_run();
  if (gpu != NULL) {
    g_assert_cmpuint(gpu->bytes_in_use, ==, base);
    g_assert_cmpuint(gpu_bf16->bytes_in_use, ==, base_bf16);
    tdm_backend_free(gpu);
    tdm_backend_free(gpu_bf16);
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
  g_test_add_func("/cuda-layers/none", test_no_cuda);
  return g_test_run();
}

#endif
