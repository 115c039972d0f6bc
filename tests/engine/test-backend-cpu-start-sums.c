/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-start-sums.c — part of test-backend-cpu: a residual block's start in
 * backward with the sums of the bn below it in the same pass
 * (add_relu_backward_bn_sums_bf16) gives the bits of the unfused ops, for the basic
 * block's start (add_relu_backward_bf16: the first layer's input gradient a plus the
 * skip's bf16 share) and a projection's (no skip: relu_backward_bf16 of a, or to_bf16
 * or a copy where there is no ReLU), the ReLU's mask as bits (its values NaN and zeros
 * of both signs among them), followed by bn_backward_sums over the rounded gradient: dx,
 * dgamma and dbeta compared bit for bit, a float32 and bf16, the bn's input float32 and
 * bf16, with and without the bn's own fused ReLU, odd channel counts, and row counts
 * that cross the CPU's widening blocks. In place over the skip and over a bf16 a too; dx
 * over the bn's input refused.
 */
#include "tdm-bf16.h"
#include "test-backend-cpu.h"

#include <string.h>

typedef struct {
  int rows, channels;
} StartShape;

/* The unfused ops into want, wg (dgamma then dbeta). */
static void
unfused(TdmBackend *b, uint16_t *want, float *wg, const void *a, TdmDtype a_type,
        const uint16_t *skip, const uint32_t *mask, const void *x, TdmDtype x_type,
        const float *saved, const float *gamma, const float *beta, bool relu, int rows, int c)
{
  const size_t count = (size_t)rows * c;
  if (skip != NULL)
    tdm_backend_add_relu_backward_bf16(b, want, a, a_type, skip, TDM_DTYPE_BF16, mask, count);
  else if (mask != NULL)
    tdm_backend_relu_backward_bf16(b, want, TDM_DTYPE_BF16, a, a_type, mask, count);
  else if (a_type == TDM_DTYPE_F32)
    tdm_backend_to_bf16(b, want, a, count);
  else
    tdm_backend_copy(b, want, a, count * sizeof(uint16_t));
  tdm_backend_bn_backward_sums(b, wg, wg + c, want, TDM_DTYPE_BF16, x, x_type, saved, saved + c,
                               gamma, beta, relu, rows, c);
}

static void
check_shape(TdmBackend *b, StartShape s)
{
  const int c = s.channels, rows = s.rows;
  const size_t count = (size_t)rows * c;
  float *a = dev_floats(b, count), *xf = dev_floats(b, count), *yf = dev_floats(b, count);
  float *skipf = dev_floats(b, count);
  uint16_t *a16 = dev_alloc(b, count * 2), *x16 = dev_alloc(b, count * 2);
  uint16_t *skip16 = dev_alloc(b, count * 2), *y16 = dev_alloc(b, count * 2);
  uint16_t *got = dev_alloc(b, count * 2), *want = dev_alloc(b, count * 2);
  float *saved = dev_floats(b, 2 * (size_t)c), *gamma = dev_floats(b, c);
  float *beta = dev_floats(b, c), *gg = dev_floats(b, 2 * (size_t)c);
  float *wg = dev_floats(b, 2 * (size_t)c);
  fill_random(a, count, -1, 1);
  fill_random(xf, count, -3, 3);
  fill_random(skipf, count, -1, 1);
  fill_random(yf, count, -2, 2);
  for (size_t i = 0; i < count; i += 5)
    yf[i] = i % 10 == 0 ? 0.0f : -0.0f;
  yf[count / 3] = NAN;  /* not positive: masked */
  a[count - 1] = -0.0f; /* its sign kept where there is no skip to add */
  for (size_t i = 0; i < count; i++) {
    a16[i] = tdm_bf16_round(a[i]);
    x16[i] = tdm_bf16_round(xf[i]);
    skip16[i] = tdm_bf16_round(skipf[i]);
    y16[i] = tdm_bf16_round(yf[i]);
  }
  a16[count / 2] = 0x7fc1; /* a NaN of its own bits: copied where the unfused way copies */
  uint32_t *bits = dev_relu_bits(b, y16, count); /* the mask as the forward writes it */
  fill_random(saved, c, -0.5, 0.5);
  fill_random(saved + c, c, 0.5, 2);
  fill_random(gamma, c, -1.5, 1.5);
  fill_random(beta, c, -1, 1);
  for (int combo = 0; combo < 32; combo++) {
    const bool with_skip = combo & 1, with_mask = combo & 2, ab = combo & 4, xb = combo & 8;
    const bool relu = combo & 16;
    const TdmDtype a_type = ab ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    const TdmDtype x_type = xb ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    const void *av = ab ? (const void *)a16 : (const void *)a;
    const void *xv = xb ? (const void *)x16 : (const void *)xf;
    const uint16_t *skip = with_skip ? skip16 : NULL;
    const uint32_t *mask = with_mask ? bits : NULL;
    unfused(b, want, wg, av, a_type, skip, mask, xv, x_type, saved, gamma, beta, relu, rows, c);
    memset(got, 0xff, count * 2);
    memset(gg, 0xff, 2 * (size_t)c * sizeof(float));
    tdm_backend_add_relu_backward_bn_sums_bf16(b, got, av, a_type, skip, mask, xv, x_type,
                                               saved, saved + c, gamma, beta, relu, rows, c, gg,
                                               gg + c);
    g_assert_true(tdm_backend_check(b, NULL));
    g_assert_cmpmem(got, count * 2, want, count * 2);
    g_assert_cmpmem(gg, 2 * (size_t)c * sizeof(float), wg, 2 * (size_t)c * sizeof(float));
    /* In place: over the skip (the block start's sum goes there), or over a bf16 a. */
    if (with_skip || ab) {
      memcpy(got, with_skip ? skip16 : a16, count * 2);
      const void *a_in = with_skip ? av : (const void *)got;
      tdm_backend_add_relu_backward_bn_sums_bf16(b, got, a_in, a_type, with_skip ? got : NULL,
                                                 mask, xv, x_type, saved, saved + c, gamma,
                                                 beta, relu, rows, c, gg, gg + c);
      g_assert_cmpmem(got, count * 2, want, count * 2);
      g_assert_cmpmem(gg, 2 * (size_t)c * sizeof(float), wg, 2 * (size_t)c * sizeof(float));
    }
  }
  /* dx over the bn's input: refused (the sums read it after dx is written). */
  tdm_backend_add_relu_backward_bn_sums_bf16(b, x16, a, TDM_DTYPE_F32, NULL, NULL, x16,
                                             TDM_DTYPE_BF16, saved, saved + c, gamma, beta,
                                             false, rows, c, gg, gg + c);
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "add_relu_backward_bn_sums_bf16"));
  void *bufs[] = {a,   xf,   yf,    skipf, a16,  x16, skip16, y16,
                  got, want, saved, gamma, beta, gg,  wg,     bits};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    tdm_backend_release(b, bufs[i]);
}

static void
test_start_sums(void)
{
  /* Odd channel counts and sizes; 5,781 rows of 3 and 512 of 64 cross the widening
   * blocks (16,384 values) of the bf16 passes. */
  const StartShape shapes[] = {
      {3 * 5 * 7, 7}, {2 * 9 * 3, 13}, {3 * 47 * 41, 3}, {2 * 16 * 16, 64}, {1, 1}};
  for (guint k = 0; k < G_N_ELEMENTS(shapes); k++) {
    TdmBackend *b = new_backend();
    check_shape(b, shapes[k]);
    tdm_backend_free(b);
  }
}

void
test_backend_cpu_add_start_sums(void)
{
  g_test_add_func("/backend-cpu/bf16/block-start-sums", test_start_sums);
}
