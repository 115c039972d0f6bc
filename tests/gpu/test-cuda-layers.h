/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-layers.h — what test-cuda-layers.c and test-cuda-layers-bf16.c share:
 * the backends (float32 and bf16), NaN-poisoned device buffers, comparisons by
 * relative error and bf16 rounding, ReLU masks as bits. Header-only test helpers; only with TDM_HAVE_CUDA.
 */
#pragma once

#include "tdm-backend.h"
#include "tdm-build-config.h"
#include "tdm-counter-rng.h"
#include "tdm-relu-bits.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define TOL 1e-5

/* Set up by main() in test-cuda-layers.c; the GPU ones are NULL without a GPU. */
extern TdmBackend *cpu;
extern TdmBackend *gpu;
extern TdmBackend *gpu_bf16;

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

static inline void *
on_b(TdmBackend *b, const void *host, size_t bytes)
{
  g_autoptr(GError) error = NULL;
  void *d = tdm_backend_alloc(b, bytes, &error);
  g_assert_no_error(error);
  if (host != NULL)
    tdm_backend_upload(b, d, host, bytes);
  return d;
}

static inline void *
on(const void *host, size_t bytes)
{
  return on_b(gpu, host, bytes);
}

/* NaN in the n floats at d, a buffer on backend b, so that one left unwritten fails. */
static inline void
poison_b(TdmBackend *b, float *d, size_t n)
{
  g_autofree float *nan = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    nan[i] = NAN;
  tdm_backend_upload(b, d, nan, n * sizeof(float));
}

static inline float *
poisoned_b(TdmBackend *b, size_t n)
{
  float *d = on_b(b, NULL, n * sizeof(float));
  poison_b(b, d, n);
  return d;
}

static inline float *
poisoned(size_t n)
{
  return poisoned_b(gpu, n);
}

/* A device buffer of `bytes` with every byte set (NaN as float32 and as bf16, where
 * poisoned()'s float NaN holds bf16 zeros in its low halves). */
static inline void *
poisoned_bytes(size_t bytes)
{
  g_autofree unsigned char *ones = g_malloc(bytes);
  memset(ones, 0xff, bytes);
  return on(ones, bytes);
}

static inline void
release(void *d)
{
  tdm_backend_release(gpu, d);
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

static inline void
check_close_b(TdmBackend *b, const char *what, const float *dev, const float *ref, size_t n,
              double tol)
{
  g_autofree float *out = g_new(float, n);
  tdm_backend_download(b, out, dev, n * sizeof(float));
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

static inline void
check_close(const char *what, const float *dev, const float *ref, size_t n, double tol)
{
  check_close_b(gpu, what, dev, ref, n, tol);
}

static inline void
check_ints(const char *what, const int32_t *dev, const int32_t *ref, size_t n)
{
  g_autofree int32_t *out = g_new(int32_t, n);
  tdm_backend_download(gpu, out, dev, n * sizeof(int32_t));
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
static inline uint16_t
bf16_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float
bf16_value(uint16_t h)
{
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline void
check_bits(const char *what, const uint16_t *dev, const float *ref, size_t n)
{
  g_autofree uint16_t *out = g_new(uint16_t, n);
  tdm_backend_download(gpu, out, dev, n * sizeof(uint16_t));
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

/* The GPU's bf16 result against the CPU's (host), bit for bit. */
static inline void
same_bits_cpu(const char *what, const uint16_t *dev, const uint16_t *ref, size_t n)
{
  g_autofree uint16_t *out = g_new(uint16_t, n);
  tdm_backend_download(gpu, out, dev, n * 2);
  assert_ok(gpu);
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++)
    wrong += out[i] != ref[i];
  g_test_message("%s against the CPU: %zu of %zu values differ", what, wrong, n);
  if (wrong > 0) {
    g_test_message("FAILED %s against the CPU", what);
    g_test_fail();
  }
}

/* The ReLU mask of n host bf16 values y16 as bits (tdm-relu-bits.h), on the GPU: what a
 * block's end writes beside its bf16 output, for the backward ops that read it. */
static inline uint32_t *
relu_bits_on(const uint16_t *y16, size_t n)
{
  g_autofree uint32_t *bits = g_new(uint32_t, TDM_RELU_BITS_WORDS(n));
  tdm_relu_bits_of(bits, y16, n);
  return on(bits, TDM_RELU_BITS_WORDS(n) * sizeof(uint32_t));
}

/* Whether the GPU's mask bits (dev) of its n bf16 values y (on the GPU too) are those
 * values' mask, the rule the CPU applies; bits past n aside. */
static inline void
check_relu_bits(const char *what, const uint32_t *dev, const uint16_t *y, size_t n)
{
  size_t words = TDM_RELU_BITS_WORDS(n);
  g_autofree uint32_t *got = g_new(uint32_t, words), *want = g_new(uint32_t, words);
  g_autofree uint16_t *values = g_new(uint16_t, n);
  tdm_backend_download(gpu, got, dev, words * sizeof(uint32_t));
  tdm_backend_download(gpu, values, y, n * sizeof(uint16_t));
  assert_ok(gpu);
  tdm_relu_bits_of(want, values, n);
  size_t wrong = 0;
  for (size_t e = 0; e < n; e++)
    wrong += tdm_relu_bit_at(got, e) != tdm_relu_bit_at(want, e);
  g_test_message("%s: %zu of %zu mask bits differ from its output's", what, wrong, n);
  if (wrong > 0) {
    g_test_message("FAILED %s: its mask bits", what);
    g_test_fail();
  }
}

/* Registers test-cuda-layers-bf16.c's, test-cuda-layers-blocks.c's and
 * test-cuda-layers-bn.c's tests. */
void test_cuda_layers_add_bf16(void);
void test_cuda_layers_add_blocks(void);
/* test-cuda-layers-pools-bf16.c's: the preset's plain layers in bf16. */
void test_cuda_layers_add_pools_bf16(void);
void test_cuda_layers_add_bn(void);
/* test-cuda-layers-start-sums.c's: a block's start with the bn's sums in one pass. */
void test_cuda_layers_add_start_sums(void);
/* test-cuda-layers-stem-bn.c's: the stem's backward in two passes. */
void test_cuda_layers_add_stem_bn(void);
