/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-step.c — part of test-backend-cpu: the rest of a training step's
 * operations against references in double: softmax cross-entropy (the loss, its
 * metrics and gradient), the gather of a batch's images and labels, the optimizers
 * over several steps (against their formulas), add and scale, and deviation (the
 * convolution engine's screen), whose sums are known exactly. Fresh random inputs
 * (g_test_rand_*, so --seed replays a run), outputs poisoned with NaN first.
 */
#include "test-backend-cpu.h"
#include "tdm-bf16.h"

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
  /* p is a float: each of the 4 steps rounds it, by at most 2⁻²⁴ of its size, which
   * the update p − p0 carries whole. Where the update is small beside p (a few elements
   * whose random gradients nearly cancel), that rounding, not the operation, sets the
   * error: the bound adds it, relative to the update's size. */
  double pnorm = 0.0, dnorm = 0.0;
  for (size_t i = 0; i < n; i++) {
    pnorm += (double)p[i] * p[i];
    dnorm += rdelta[i] * rdelta[i];
  }
  pnorm = sqrt(pnorm);
  dnorm = sqrt(dnorm);
  double rounding = dnorm > 0.0 ? 4 * 0x1p-24 * (pnorm + dnorm) / dnorm : 0.0;
  assert_rel(delta, rdelta, n, TOL + rounding);
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

void
test_backend_cpu_add_step(void)
{
  g_test_add_func("/backend-cpu/softmax-xent", test_softmax_xent);
  g_test_add_func("/backend-cpu/gather", test_gather);
  g_test_add_func("/backend-cpu/optimizers", test_optimizers);
  g_test_add_func("/backend-cpu/add-scale", test_add_scale);
  g_test_add_func("/backend-cpu/deviation", test_deviation);
}
