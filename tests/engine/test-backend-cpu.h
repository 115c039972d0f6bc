/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu.h — what the CPU backend's test files share: a backend that
 * checks it got everything back, NaN-poisoned outputs, relative errors against double
 * references, and the convolution shapes. Header-only (test helpers). */
#pragma once

#include "tdm-backend.h"
#include "tdm-bf16.h"
#include "tdm-error.h"
#include "tdm-relu-bits.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define TOL 1e-5      /* float operation against a double reference */
#define GRAD_TOL 1e-2 /* analytic gradient against central differences in float */
#define GRAD_H 1e-2

/* Helpers */

static inline TdmBackend *
new_backend(void)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  g_assert_nonnull(b);
  return b;
}

static inline void
free_backend(TdmBackend *b)
{
  g_assert_cmpuint(b->bytes_in_use, ==, 0);
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_backend_free(b);
}

static inline void *
dev_alloc(TdmBackend *b, size_t bytes)
{
  g_autoptr(GError) error = NULL;
  void *p = tdm_backend_alloc(b, bytes, &error);
  g_assert_no_error(error);
  g_assert_nonnull(p);
  return p;
}

static inline float *
dev_floats(TdmBackend *b, size_t n)
{
  return dev_alloc(b, n * sizeof(float));
}

static inline void
fill_random(float *p, size_t n, double lo, double hi)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (float)g_test_rand_double_range(lo, hi);
}

static inline void
poison(float *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    p[i] = NAN;
}

static inline double
rel_error(const float *out, const double *ref, size_t n)
{
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double d = (double)out[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return sqrt(num) / (den > 0.0 ? sqrt(den) : 1.0);
}

#define assert_rel(out, ref, n, tol)                                                    \
  assert_rel_impl(__FILE__, __LINE__, G_STRFUNC, #out, (out), (ref), (n), (tol))

static inline void
assert_rel_impl(const char *file, int line, const char *func, const char *what,
                const float *out, const double *ref, size_t n, double tol)
{
  const double e = rel_error(out, ref, n);
  if (g_test_verbose())
    g_test_message("%s:%d %s: relative error %.3g", func, line, what, e);
  if (!(e <= tol)) {
    g_autofree char *msg =
      g_strdup_printf("%s: relative error %.3g exceeds %.3g (n = %zu)", what, e, tol, n);
    g_assertion_message(G_LOG_DOMAIN, file, line, func, msg);
  }
}

/* Outputs are poisoned with NaN before each operation; inputs are finite, so any NaN
 * left afterwards is an element the operation never wrote. */
#define assert_written(out, n) assert_written_impl(__FILE__, __LINE__, G_STRFUNC, #out, (out), (n))

static inline void
assert_written_impl(const char *file, int line, const char *func, const char *what,
                    const float *out, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (!isfinite(out[i])) {
      g_autofree char *msg = g_strdup_printf("%s[%zu] = %g: not written", what, i, out[i]);
      g_assertion_message(G_LOG_DOMAIN, file, line, func, msg);
    }
}

static inline double *
to_double(const float *p, size_t n)
{
  double *d = g_new(double, n);
  for (size_t i = 0; i < n; i++)
    d[i] = p[i];
  return d;
}

/* v rounded to bf16 in a new host array (g_free). */
static inline uint16_t *
to_bf16_host(const float *v, size_t n)
{
  uint16_t *h = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++)
    h[i] = tdm_bf16_round(v[i]);
  return h;
}

/* The ReLU mask of n bf16 values y as bits (tdm-relu-bits.h) in memory of b: what a
 * block's end writes beside its bf16 output for the backward ops that read it. */
static inline uint32_t *
dev_relu_bits(TdmBackend *b, const uint16_t *y, size_t n)
{
  uint32_t *bits = dev_alloc(b, TDM_RELU_BITS_WORDS(n) * sizeof(uint32_t));
  tdm_relu_bits_of(bits, y, n);
  return bits;
}

typedef struct {
  int n, h, w, c, kh, kw, pad;
} ConvShape;

static inline void
conv_dims(const ConvShape *s, int *oh, int *ow, size_t *rows, size_t *cols, size_t *xn)
{
  *oh = s->h + 2 * s->pad - s->kh + 1;
  *ow = s->w + 2 * s->pad - s->kw + 1;
  *rows = (size_t)s->n * *oh * *ow;
  *cols = (size_t)s->c * s->kh * s->kw;
  *xn = (size_t)s->n * s->h * s->w * s->c;
}

/* Registers test-backend-cpu-layers.c's tests, test-backend-cpu-step.c's,
 * test-backend-cpu-gradcheck.c's, test-backend-cpu-bf16.c's,
 * test-backend-cpu-bf16-resnet.c's, test-backend-cpu-pool2d.c's,
 * test-backend-cpu-start-sums.c's, test-backend-cpu-bn.c's and
 * test-backend-cpu-stem-bn.c's. */
void test_backend_cpu_add_layers(void);
void test_backend_cpu_add_step(void);
void test_backend_cpu_add_gradchecks(void);
void test_backend_cpu_add_bf16(void);
void test_backend_cpu_add_bf16_resnet(void);
void test_backend_cpu_add_pool2d(void);
void test_backend_cpu_add_start_sums(void);
void test_backend_cpu_add_bn(void);
void test_backend_cpu_add_stem_bn(void);
