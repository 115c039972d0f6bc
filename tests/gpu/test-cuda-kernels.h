/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-kernels.h — what test-cuda-kernels.c and test-cuda-kernels-machinery.c
 * share: the two backends, NaN-poisoned device buffers, and comparisons by relative
 * error. Header-only test helpers; only with TDM_HAVE_CUDA. */
#pragma once

#include "tdm-backend.h"
#include "tdm-build-config.h"
#include "tdm-communicator.h"
#include "tdm-error.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define TOL 1e-5
#define TF32_TOL 1e-3

/* Set up by main() in test-cuda-kernels.c; gpu is NULL without a GPU. */
extern TdmBackend *cpu;
extern TdmBackend *gpu;
extern size_t gpu_base_bytes; /* the backend's own workspace */

/* Helpers */

static inline gboolean
have_gpu(void)
{
  if (gpu == NULL) {
    g_test_skip("no CUDA GPU");
    return FALSE;
  }
  return TRUE;
}

static inline void
assert_ok(TdmBackend *b)
{
  g_autoptr(GError) error = NULL;
  if (!tdm_backend_check(b, &error))
    g_error("%s", error->message);
}

static inline float *
random_floats(size_t n, double lo, double hi)
{
  float *p = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    p[i] = (float)g_test_rand_double_range(lo, hi);
  return p;
}

static inline float *
nan_floats(size_t n)
{
  float *p = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    p[i] = NAN;
  return p;
}

static inline void *
on(TdmBackend *b, const void *host, size_t bytes)
{
  g_autoptr(GError) error = NULL;
  void *d = tdm_backend_alloc(b, bytes, &error);
  g_assert_no_error(error);
  g_assert_nonnull(d);
  if (host != NULL)
    tdm_backend_upload(b, d, host, bytes);
  return d;
}

/* A buffer of n floats on b filled with NaN. */
static inline float *
poisoned_on(TdmBackend *b, size_t n)
{
  g_autofree float *nan = nan_floats(n);
  return on(b, nan, n * sizeof(float));
}

static inline float *
poisoned(size_t n)
{
  return poisoned_on(gpu, n);
}

static inline void *
back(TdmBackend *b, const void *d, size_t bytes)
{
  void *host = g_malloc(bytes);
  tdm_backend_download(b, host, d, bytes);
  assert_ok(b);
  return host;
}

static inline double
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
static inline void
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

static inline void
check_ints(const char *what, const int32_t *dev, const int32_t *ref, size_t n)
{
  g_autofree int32_t *out = back(gpu, dev, n * sizeof(int32_t));
  for (size_t i = 0; i < n; i++)
    if (out[i] != ref[i])
      g_error("%s: element %zu is %d, expected %d", what, i, out[i], ref[i]);
}

/* Registers test-cuda-kernels-machinery.c's tests. */
void test_cuda_add_machinery(void);
