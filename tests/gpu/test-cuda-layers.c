/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-layers.c — the CUDA backend's operations for the ResNet layers against the
 * CPU backend (suite gpu): strided im2col/col2im, batch normalization in its three
 * training steps, evaluation mode and backward, average and global pooling, dropout
 * and the augmenting gather (the same numbers as the CPU, from the shared counter
 * RNG; the photo gather also with the input normalization in its pass), label-smoothed softmax cross-entropy, PyTorch's SGD with Nesterov and a decay
 * mask, GEMMs in bf16, the column-free input gradient of a bf16 convolution, a bn
 * fused into its neighbours: a pool or bf16 conv after it (maxpool_forward_bn,
 * im2col_bf16_bn) and a bf16 conv before it (bn_backward_dx_bf16), and a residual
 * block's end in one pass (add_out). The bf16 operations and the fused layers are in
 * test-cuda-layers-bf16.c; the older operations are test-cuda-kernels.c's.
 *
 * Inputs are fresh random numbers (g_test_rand_*, so --seed replays a run); GPU
 * outputs are poisoned with NaN first, so an element left unwritten fails. Results
 * are compared by relative error ||gpu − cpu|| / ||cpu||: 1e-5 in float32 (sums in
 * another order), exact for data movement and masks. bf16 GEMMs: 1e-2, see
 * test_gemm_bf16. Skips without a CUDA GPU.
 */
#include "tdm-backend-ops.h"
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "test-cuda-layers.h"

TdmBackend *cpu;
TdmBackend *gpu;
TdmBackend *gpu_bf16;

/* Strided convolution's data movement */

static void
strided_case(int n, int h, int w, int c, int k, int pad, int stride)
{
  int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  size_t xs = (size_t)n * h * w * c, cols = (size_t)n * oh * ow * c * k * k;
  g_autofree float *x = random_floats(xs, -1, 1);
  g_autofree float *col_ref = g_new(float, cols);
  tdm_backend_im2col(cpu, col_ref, x, n, h, w, c, k, k, pad, stride);
  float *dx = on(x, xs * 4), *dcol = poisoned(cols);
  tdm_backend_im2col(gpu, dcol, dx, n, h, w, c, k, k, pad, stride);
  g_autofree char *what = g_strdup_printf("im2col n%d %dx%dx%d k%d pad%d stride%d", n, h, w,
                                          c, k, pad, stride);
  check_close(what, dcol, col_ref, cols, 0.0);

  g_autofree float *col = random_floats(cols, -1, 1);
  g_autofree float *dx_ref = g_new(float, xs);
  tdm_backend_col2im(cpu, dx_ref, col, n, h, w, c, k, k, pad, stride);
  float *dcol2 = on(col, cols * 4), *ddx = poisoned(xs);
  tdm_backend_col2im(gpu, ddx, dcol2, n, h, w, c, k, k, pad, stride);
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
  tdm_backend_bn_moments(cpu, slots, x, TDM_DTYPE_F32, rows, channels, 0, 1);
  tdm_backend_bn_stats(cpu, saved, slots, 1, channels, eps, momentum, rm_ref, rv_ref);
  tdm_backend_bn_forward(cpu, y_ref, x, TDM_DTYPE_F32, saved, saved + channels, gamma, beta,
                         rows, channels, relu);
  tdm_backend_bn_forward_eval(cpu, ye_ref, x, TDM_DTYPE_F32, rm_ref, rv_ref, gamma, beta, eps,
                              rows, channels, relu);
  assert_ok(cpu);

  float *dx_in = on(x, n * 4), *dgam = on(gamma, channels * 4), *dbet = on(beta, channels * 4);
  float *drm = on(rm, channels * 4), *drv = on(rv, channels * 4), *ddy = on(dy, n * 4);
  float *dslots = poisoned(3 * slot);
  float *dsaved = poisoned(2 * (size_t)channels);
  float *dyo = poisoned(n), *dye = poisoned(n), *ddg = poisoned(channels);
  float *ddb = poisoned(channels), *ddx = poisoned(n);
  tdm_backend_bn_moments(gpu, dslots, dx_in, TDM_DTYPE_F32, rows, channels, 1, 3);
  tdm_backend_bn_stats(gpu, dsaved, dslots, 3, channels, eps, momentum, drm, drv);
  tdm_backend_bn_forward(gpu, dyo, dx_in, TDM_DTYPE_F32, dsaved, dsaved + channels, dgam, dbet,
                         rows, channels, relu);
  tdm_backend_bn_forward_eval(gpu, dye, dx_in, TDM_DTYPE_F32, drm, drv, dgam, dbet, eps, rows,
                              channels, relu);

  /* The reference backward takes the ReLU's mask through relu_backward from the GPU's
   * own forward output, as the engine did before the backend recomputed the mask from
   * x: so the GPU's recomputed mask must be its forward's, value for value. (The
   * CPU's forward output would not do: with a large mean, x · scale + shift cancels
   * and the two forwards' last bits, an FMA apart, put values within ~1e-4 of 0 on
   * different sides of it.) */
  g_autofree float *dy_masked = g_memdup2(dy, n * 4);
  if (relu) {
    g_autofree float *y_gpu = g_new(float, n);
    tdm_backend_download(gpu, y_gpu, dyo, n * 4);
    assert_ok(gpu);
    tdm_backend_relu_backward(cpu, dy_masked, dy, y_gpu, n);
  }
  tdm_backend_bn_backward_sums(cpu, dg_ref, db_ref, dy_masked, TDM_DTYPE_F32, x, TDM_DTYPE_F32,
                               saved, saved + channels, gamma, beta, false, rows, channels);
  tdm_backend_bn_backward_dx(cpu, dx_ref, dy_masked, TDM_DTYPE_F32, x, TDM_DTYPE_F32, saved,
                             saved + channels, gamma, beta, false, dg_ref, db_ref, 1.0f / rows,
                             rows, channels);
  assert_ok(cpu);
  tdm_backend_bn_backward_sums(gpu, ddg, ddb, ddy, TDM_DTYPE_F32, dx_in, TDM_DTYPE_F32, dsaved,
                               dsaved + channels, dgam, dbet, relu, rows, channels);
  /* dx == dy allowed: write over the gradient itself. */
  tdm_backend_copy(gpu, ddx, ddy, n * 4);
  tdm_backend_bn_backward_dx(gpu, ddx, ddx, TDM_DTYPE_F32, dx_in, TDM_DTYPE_F32, dsaved,
                             dsaved + channels, dgam, dbet, relu, ddg, ddb, 1.0f / rows, rows,
                             channels);
  /* The same dx as bf16 (a conv's output gradient under --precision bf16): to_bf16's
   * bits of the float dx, and so within bf16's rounding (2⁻⁹ of each value) of the
   * CPU's. Every value poisoned (0xffff, a bf16 NaN); the one past the end stays so. */
  g_autofree uint16_t *dx16 = g_new(uint16_t, n + 1);
  memset(dx16, 0xff, (n + 1) * 2);
  uint16_t *ddx16 = on(dx16, (n + 1) * 2);
  tdm_backend_bn_backward_dx_bf16(gpu, ddx16, ddy, TDM_DTYPE_F32, dx_in, TDM_DTYPE_F32, dsaved,
                                  dsaved + channels, dgam, dbet, relu, ddg, ddb, 1.0f / rows,
                                  rows, channels);

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
  tdm_backend_download(gpu, dx_gpu, ddx, n * 4);
  g_autofree char *w9 = g_strdup_printf("bn_backward_dx_bf16 against bn_backward_dx %s", tag);
  check_bits(w9, ddx16, dx_gpu, n);
  tdm_backend_download(gpu, dx16, ddx16, (n + 1) * 2);
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
  /* The resnet preset's first and last stages: the most row groups (hundreds, in
   * sets of 32) and four channel tiles. */
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
  tdm_backend_avgpool_forward(cpu, y_ref, x, n, h, w, c, k);
  tdm_backend_avgpool_backward(cpu, gx_ref, gy, n, h, w, c, k);
  assert_ok(cpu);
  float *dx = on(x, xs * 4), *dy = poisoned(ys), *dgy = on(gy, ys * 4), *dgx = poisoned(xs);
  tdm_backend_avgpool_forward(gpu, dy, dx, n, h, w, c, k);
  tdm_backend_avgpool_backward(gpu, dgx, dgy, n, h, w, c, k);
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
  tdm_backend_global_avgpool_forward(cpu, ya, x, n, pixels, c);
  tdm_backend_global_avgpool_backward(cpu, ga, gy, n, pixels, c);
  tdm_backend_global_maxpool_forward(cpu, ym, am, x, n, pixels, c);
  tdm_backend_global_maxpool_backward(cpu, gm, gy, am, n, pixels, c);
  assert_ok(cpu);
  float *dx = on(x, xs * 4), *dgy = on(gy, ys * 4);
  float *dya = poisoned(ys), *dym = poisoned(ys), *dga = poisoned(xs), *dgm = poisoned(xs);
  int32_t *dam = on(NULL, ys * 4);
  tdm_backend_global_avgpool_forward(gpu, dya, dx, n, pixels, c);
  tdm_backend_global_avgpool_backward(gpu, dga, dgy, n, pixels, c);
  tdm_backend_global_maxpool_forward(gpu, dym, dam, dx, n, pixels, c);
  tdm_backend_global_maxpool_backward(gpu, dgm, dgy, dam, n, pixels, c);
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
  tdm_backend_dropout_forward(cpu, y_ref, x, idx, n, per_sample, p, key, 4);
  tdm_backend_dropout_backward(cpu, gx_ref, g, idx, n, per_sample, p, key, 4);
  assert_ok(cpu);
  float *dx = on(x, total * 4), *dy = poisoned(total), *dg = on(g, total * 4);
  int32_t *didx = on(idx, n * 4);
  tdm_backend_dropout_forward(gpu, dy, dx, didx, n, per_sample, p, key, 4);
  tdm_backend_dropout_backward(gpu, dg, dg, didx, n, per_sample, p, key, 4);
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

/* A random uint8 set of `samples` images of `sample` bytes, their labels, and `count`
 * indices into it. */
static void
random_set(int samples, size_t sample, int count, uint8_t **images, uint8_t **labels,
           int32_t **idx)
{
  size_t bytes = (size_t)samples * sample;
  *images = g_new(uint8_t, bytes);
  *labels = g_new(uint8_t, samples);
  for (size_t i = 0; i < bytes; i++)
    (*images)[i] = (uint8_t)g_test_rand_int_range(0, 256);
  for (int i = 0; i < samples; i++)
    (*labels)[i] = (uint8_t)g_test_rand_int_range(0, 10);
  *idx = g_new(int32_t, count);
  for (int i = 0; i < count; i++)
    (*idx)[i] = g_test_rand_int_range(0, samples);
}

static void
augment_case(int samples, int h, int w, int c, int count, int pad, TdmFlip flip)
{
  size_t sample = (size_t)h * w * c, bytes = (size_t)samples * sample;
  g_autofree uint8_t *images = NULL, *labels = NULL;
  g_autofree int32_t *idx = NULL;
  random_set(samples, sample, count, &images, &labels, &idx);
  const uint64_t key = tdm_crng_key(11, TDM_RNG_AUGMENT);
  size_t xs = (size_t)count * sample;
  g_autofree float *x_ref = g_new(float, xs);
  g_autofree int32_t *y_ref = g_new(int32_t, count);
  tdm_backend_gather_augment(cpu, x_ref, y_ref, images, labels, idx, count, h, w, c,
                             1.0f / 255.0f, pad, flip, key, 2);
  assert_ok(cpu);
  uint8_t *dimg = on(images, bytes), *dlab = on(labels, samples);
  int32_t *didx = on(idx, count * 4), *dy = on(NULL, count * 4);
  float *dx = poisoned(xs);
  tdm_backend_gather_augment(gpu, dx, dy, dimg, dlab, didx, count, h, w, c, 1.0f / 255.0f, pad,
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

/* Photo augmentation: the kernel computes tdm-augment.h's rule with every float
 * operation rounded alone, as the CPU does: the same bits. */

static void
photo_case(int samples, int h, int w, int c, int count, const TdmPhotoAugment *a)
{
  size_t sample = (size_t)h * w * c, bytes = (size_t)samples * sample;
  g_autofree uint8_t *images = NULL, *labels = NULL;
  g_autofree int32_t *idx = NULL;
  random_set(samples, sample, count, &images, &labels, &idx);
  const uint64_t key = tdm_crng_key(5, TDM_RNG_AUGMENT);
  size_t xs = (size_t)count * sample;
  g_autofree float *x_ref = g_new(float, xs);
  g_autofree int32_t *y_ref = g_new(int32_t, count);
  tdm_backend_gather_photo(cpu, x_ref, y_ref, images, labels, idx, count, h, w, c, a, key, 3);
  assert_ok(cpu);
  uint8_t *dimg = on(images, bytes), *dlab = on(labels, samples);
  int32_t *didx = on(idx, count * 4), *dy = on(NULL, count * 4);
  float *dx = poisoned(xs);
  tdm_backend_gather_photo(gpu, dx, dy, dimg, dlab, didx, count, h, w, c, a, key, 3);
  g_autofree char *what = g_strdup_printf("gather_photo %d of %dx%dx%d", count, h, w, c);
  check_close(what, dx, x_ref, xs, 0.0);
  check_ints(what, dy, y_ref, count);
  /* The input normalization (ImageNet's) in the gather's pass: on the GPU the bits of
   * channel_affine after the gather; against the CPU's, which rounds the product and
   * the sum apart where the GPU fuses them, within 1e-6 as channel_affine's test. */
  static const float mean[4] = {0.485f, 0.456f, 0.406f, 0.5f};
  static const float std[4] = {0.229f, 0.224f, 0.225f, 0.25f};
  TdmPhotoAugment an = *a;
  TdmChannelAffine affine = {.channels = c};
  an.normalize = 1;
  for (int ch = 0; ch < c; ch++) {
    an.mul[ch] = affine.mul[ch] = 1.0f / std[ch];
    an.add[ch] = affine.add[ch] = -mean[ch] / std[ch];
  }
  tdm_backend_channel_affine(gpu, dx, (size_t)count * h * w, affine);
  float *dn = poisoned(xs);
  tdm_backend_gather_photo(gpu, dn, dy, dimg, dlab, didx, count, h, w, c, &an, key, 3);
  g_autofree float *separate = g_new(float, xs), *fused = g_new(float, xs);
  tdm_backend_download(gpu, separate, dx, xs * sizeof(float));
  tdm_backend_download(gpu, fused, dn, xs * sizeof(float));
  assert_ok(gpu);
  g_assert_cmpmem(fused, xs * sizeof(float), separate, xs * sizeof(float));
  tdm_backend_gather_photo(cpu, x_ref, y_ref, images, labels, idx, count, h, w, c, &an, key, 3);
  assert_ok(cpu);
  g_autofree char *normalized = g_strdup_printf("%s, normalized", what);
  check_close(normalized, dn, x_ref, xs, 1e-6);
  check_ints(normalized, dy, y_ref, count);
  void *all[] = {dimg, dlab, didx, dy, dx, dn};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    release(all[i]);
}

static void
test_gather_photo(void)
{
  if (!have_gpu())
    return;
  TdmPhotoAugment a = {.scale_min = 0.08f, .scale_max = 1.0f, .ratio_min = 0.75f,
                       .ratio_max = 4.0f / 3.0f, .jitter = {0.4f, 0.4f, 0.4f}, .erase = 0.5f,
                       .fill = {0.485f, 0.456f, 0.406f}, .flip = TDM_FLIP_RANDOM};
  photo_case(300, 64, 64, 3, 128, &a);
  photo_case(100, 28, 28, 1, 64, &a);
  TdmPhotoAugment crop = {.scale_min = 0.35f, .scale_max = 1.0f, .ratio_min = 0.5f,
                          .ratio_max = 2.0f};
  photo_case(50, 9, 13, 3, 40, &crop);
  /* No contrast: the mean is never read, and images of more than 8192 pixels are
   * written by several blocks a sample. */
  photo_case(20, 100, 100, 3, 16, &crop);
  TdmPhotoAugment no_contrast = a;
  no_contrast.jitter[1] = 0.0f;
  photo_case(20, 100, 100, 3, 16, &no_contrast);
  photo_case(100, 28, 28, 1, 64, &no_contrast);
  photo_case(20, 100, 100, 4, 16, &a);
}

/* Clipping: the same norm (a double sum in another order: within 1e-12 of it) and
 * the same clipped gradient within float rounding. */
static void
test_clip_norm(void)
{
  if (!have_gpu())
    return;
  const size_t sizes[] = {1, 1000, 123457, 2000003};
  for (guint k = 0; k < G_N_ELEMENTS(sizes); k++) {
    size_t n = sizes[k];
    g_autofree float *g = random_floats(n, -1, 1);
    g_autofree float *ref = g_memdup2(g, n * sizeof(float));
    double cpu_work[TDM_CLIP_WORK_DOUBLES];
    tdm_backend_clip_norm(cpu, ref, n, 0.5f, cpu_work);
    assert_ok(cpu);
    float *dg = on(g, n * sizeof(float));
    double *dwork = on(NULL, TDM_CLIP_WORK_DOUBLES * sizeof(double));
    tdm_backend_clip_norm(gpu, dg, n, 0.5f, dwork);
    double norm;
    tdm_backend_download(gpu, &norm, dwork, sizeof norm);
    assert_ok(gpu);
    g_assert_cmpfloat_with_epsilon(norm, cpu_work[0], 1e-12 * cpu_work[0]);
    g_autofree char *what = g_strdup_printf("clip_norm of %zu", n);
    check_close(what, dg, ref, n, 1e-6);
    release(dg);
    release(dwork);
  }
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
  tdm_backend_softmax_xent(cpu, logits, labels, rows, classes, smoothing, 1.0f / rows, d_ref,
                           &m_ref);
  assert_ok(cpu);
  float *dl = on(logits, n * 4), *dd = poisoned(n);
  int32_t *dlab = on(labels, rows * 4);
  TdmMetrics m0 = {0.5, 1.0}, m;
  TdmMetrics *dm = on(&m0, sizeof m0);
  tdm_backend_softmax_xent(gpu, dl, dlab, rows, classes, smoothing, 1.0f / rows, dd, dm);
  tdm_backend_download(gpu, &m, dm, sizeof m);
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
    tdm_backend_sgd_momentum_update(cpu, rp, g, rv, masked ? mask : NULL, n, 0.2f, 0.9f, 5e-4f,
                                    nesterov, NULL);
    tdm_backend_sgd_momentum_update(gpu, dp, dg, dv, masked ? dmask : NULL, n, 0.2f, 0.9f,
                                    5e-4f, nesterov, NULL);
  }
  tdm_backend_weight_decay(cpu, rg, rp, masked ? mask : NULL, n, 0.01f);
  tdm_backend_weight_decay(gpu, dg, dp, masked ? dmask : NULL, n, 0.01f);
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
    /* Every slot a backend must fill (the front door calls them unguarded). */
    g_assert_null(tdm_backend_ops_missing(gpu->ops));
    base = gpu->bytes_in_use;
    base_bf16 = gpu_bf16->bytes_in_use;
  }

  g_test_add_func("/cuda-layers/strided-conv", test_strided_conv);
  g_test_add_func("/cuda-layers/batchnorm", test_batchnorm);
  g_test_add_func("/cuda-layers/pooling", test_pooling);
  g_test_add_func("/cuda-layers/dropout", test_dropout);
  g_test_add_func("/cuda-layers/gather-augment", test_gather_augment);
  g_test_add_func("/cuda-layers/gather-photo", test_gather_photo);
  g_test_add_func("/cuda-layers/clip-norm", test_clip_norm);
  g_test_add_func("/cuda-layers/label-smoothing", test_label_smoothing);
  g_test_add_func("/cuda-layers/nesterov", test_nesterov);
  test_cuda_layers_add_bf16();
  test_cuda_layers_add_blocks();
  test_cuda_layers_add_pools_bf16();
  test_cuda_layers_add_bn();
  test_cuda_layers_add_start_sums();
  test_cuda_layers_add_stem_bn();

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
