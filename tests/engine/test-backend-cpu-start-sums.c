/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-start-sums.c — part of test-backend-cpu: a residual block's start in
 * backward with the sums of the bn below it in the same pass
 * (add_relu_backward_bn_sums_bf16) gives the bits of the unfused ops, for the basic
 * block's start (add_relu_backward_bf16: the first layer's input gradient a plus the
 * skip's bf16 share), a projection's start that adds its compact share (strides 1, 2
 * and 3: the bits of add_strided_bf16 in place in a's type, then the op with no share)
 * and one with no share (relu_backward_bf16 of a, or to_bf16 or a copy where there is no
 * ReLU), the ReLU's mask as bits (its values NaN and zeros of both signs among them), a
 * and the share with zeros of both signs and a NaN, followed by bn_backward_sums over
 * the rounded gradient: dx, dgamma and dbeta compared bit for bit, a float32 and bf16,
 * the bn's input float32 and bf16, with and without the bn's own fused ReLU, odd
 * channel counts, and row counts that cross the CPU's widening blocks. In place over the
 * skip and over a bf16 a too; dx over the bn's input or the projection's share, both
 * shares, and a share of no whole images refused.
 */
#include "tdm-bf16.h"
#include "test-backend-cpu.h"

#include <string.h>

typedef struct {
  int images, h, w, channels;
} StartShape;

/* The share a combo adds: none, the skip's, or the projection's. */
enum { SHARE_NONE, SHARE_SKIP, SHARE_STRIDED, SHARES };

/* The block start's bn and where its sums go: its input x, mean and invstd (saved),
 * gamma, beta, its own ReLU. */
typedef struct {
  const void *x;
  TdmDtype x_type;
  const float *saved, *gamma, *beta;
  bool relu;
} StartBn;

/* The unfused ops with no share or the skip's into want, wg (dgamma then dbeta). */
static void
unfused(TdmBackend *b, uint16_t *want, float *wg, const TdmBlockStart *in, const StartBn *bn,
        int rows, int c)
{
  const size_t count = (size_t)rows * c;
  if (in->skip != NULL)
    tdm_backend_add_relu_backward_bf16(b, want, in->a, in->a_type, in->skip, TDM_DTYPE_BF16,
                                       in->mask, count);
  else if (in->mask != NULL)
    tdm_backend_relu_backward_bf16(b, want, TDM_DTYPE_BF16, in->a, in->a_type, in->mask, count);
  else if (in->a_type == TDM_DTYPE_F32)
    tdm_backend_to_bf16(b, want, in->a, count);
  else
    tdm_backend_copy(b, want, in->a, count * sizeof(uint16_t));
  tdm_backend_bn_backward_sums(b, wg, wg + c, want, TDM_DTYPE_BF16, bn->x, bn->x_type,
                               bn->saved, bn->saved + c, bn->gamma, bn->beta, bn->relu, rows,
                               c);
}

static void
fused(TdmBackend *b, uint16_t *dx, float *sums, const TdmBlockStart *in, const StartBn *bn,
      int rows, int c)
{
  tdm_backend_add_relu_backward_bn_sums_bf16(b, dx, in, bn->x, bn->x_type, bn->saved,
                                             bn->saved + c, bn->gamma, bn->beta, bn->relu, rows,
                                             c, sums, sums + c);
}

static void
assert_refused(TdmBackend *b)
{
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, "add_relu_backward_bn_sums_bf16"));
}

static void
check_shape(TdmBackend *b, StartShape s)
{
  const int c = s.channels, rows = s.images * s.h * s.w;
  const size_t count = (size_t)rows * c;
  /* The largest compact share, stride 1's: as many values as a. */
  float *a = dev_floats(b, count), *xf = dev_floats(b, count), *yf = dev_floats(b, count);
  float *skipf = dev_floats(b, count), *strided = dev_floats(b, count);
  float *summed = dev_floats(b, count);
  uint16_t *a16 = dev_alloc(b, count * 2), *x16 = dev_alloc(b, count * 2);
  uint16_t *skip16 = dev_alloc(b, count * 2), *y16 = dev_alloc(b, count * 2);
  uint16_t *got = dev_alloc(b, count * 2), *want = dev_alloc(b, count * 2);
  float *saved = dev_floats(b, 2 * (size_t)c), *gamma = dev_floats(b, c);
  float *beta = dev_floats(b, c), *gg = dev_floats(b, 2 * (size_t)c);
  float *wg = dev_floats(b, 2 * (size_t)c);
  fill_random(a, count, -1, 1);
  fill_random(xf, count, -3, 3);
  fill_random(skipf, count, -1, 1);
  fill_random(strided, count, -1, 1);
  fill_random(yf, count, -2, 2);
  for (size_t i = 0; i < count; i += 5)
    yf[i] = i % 10 == 0 ? 0.0f : -0.0f;
  yf[count / 3] = NAN; /* not positive: masked */
  /* −0 kept where there is no share to add, +0 where a projection's conv reads no value
   * of the pixel (a + 0), −0 where its share is −0 too. */
  for (size_t i = 3; i < count; i += 7)
    a[i] = -0.0f;
  for (size_t i = 1; i < count; i += 3)
    strided[i] = -0.0f;
  a[count - 1] = -0.0f;
  strided[count / 4] = NAN;
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
  for (int combo = 0; combo < 16 * SHARES; combo++) {
    const int share = combo / 16;
    const bool with_mask = combo & 1, ab = combo & 2, xb = combo & 4, relu = combo & 8;
    const TdmDtype a_type = ab ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    const void *av = ab ? (const void *)a16 : (const void *)a;
    const StartBn bn = {xb ? (const void *)x16 : (const void *)xf,
                        xb ? TDM_DTYPE_BF16 : TDM_DTYPE_F32,
                        saved,
                        gamma,
                        beta,
                        relu};
    TdmBlockStart in = {.a = av, .a_type = a_type, .mask = with_mask ? bits : NULL};
    for (int stride = 1; stride <= (share == SHARE_STRIDED ? 3 : 1); stride++) {
      if (share == SHARE_STRIDED) {
        /* add_strided_bf16 in place in a's type, then the op with no share. */
        TdmBlockStart apart = {.a = summed, .a_type = a_type, .mask = in.mask};
        memcpy(summed, av, count * tdm_dtype_size(a_type));
        tdm_backend_add_strided_bf16(b, summed, a_type, summed, a_type, strided, s.images, s.h,
                                     s.w, c, stride);
        fused(b, want, wg, &apart, &bn, rows, c);
        in.strided = strided;
        in.h = s.h;
        in.w = s.w;
        in.stride = stride;
      } else {
        in.skip = share == SHARE_SKIP ? skip16 : NULL;
        unfused(b, want, wg, &in, &bn, rows, c);
      }
      memset(got, 0xff, count * 2);
      memset(gg, 0xff, 2 * (size_t)c * sizeof(float));
      fused(b, got, gg, &in, &bn, rows, c);
      g_assert_true(tdm_backend_check(b, NULL));
      g_assert_cmpmem(got, count * 2, want, count * 2);
      g_assert_cmpmem(gg, 2 * (size_t)c * sizeof(float), wg, 2 * (size_t)c * sizeof(float));
      /* In place: over the skip (the block start's sum goes there), or over a bf16 a. */
      if (share == SHARE_SKIP || ab) {
        TdmBlockStart over = in;
        memcpy(got, share == SHARE_SKIP ? skip16 : a16, count * 2);
        if (share == SHARE_SKIP)
          over.skip = got;
        else
          over.a = got;
        fused(b, got, gg, &over, &bn, rows, c);
        g_assert_true(tdm_backend_check(b, NULL));
        g_assert_cmpmem(got, count * 2, want, count * 2);
        g_assert_cmpmem(gg, 2 * (size_t)c * sizeof(float), wg, 2 * (size_t)c * sizeof(float));
      }
    }
  }
  const StartBn bn = {x16, TDM_DTYPE_BF16, saved, gamma, beta, false};
  /* dx over the bn's input: refused (the sums read it after dx is written). */
  fused(b, x16, gg, &(TdmBlockStart){.a = a, .a_type = TDM_DTYPE_F32}, &bn, rows, c);
  assert_refused(b);
  /* dx over the projection's share (another row's share may be read after a row's dx is
   * written), both shares, and a share of no whole images: refused. */
  TdmBlockStart projection = {
      .a = a, .a_type = TDM_DTYPE_F32, .strided = strided, .h = s.h, .w = s.w, .stride = 2};
  fused(b, (uint16_t *)strided + 1, gg, &projection, &bn, rows, c);
  assert_refused(b);
  TdmBlockStart both = projection;
  both.skip = skip16;
  fused(b, got, gg, &both, &bn, rows, c);
  assert_refused(b);
  if (rows > 1) {
    fused(b, got, gg, &projection, &bn, rows - 1, c);
    assert_refused(b);
  }
  void *bufs[] = {a,   xf,  yf,   skipf, strided, summed, a16, x16, skip16,
                  y16, got, want, saved, gamma,   beta,   gg,  wg,  bits};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    tdm_backend_release(b, bufs[i]);
}

static void
test_start_sums(void)
{
  /* Images × h × w rows, odd channel counts and sizes; 5,781 rows of 3 and 512 of 64
   * cross the widening blocks (16,384 values) of the bf16 passes. */
  const StartShape shapes[] = {{3, 5, 7, 7},  {2, 9, 3, 13}, {3, 47, 41, 3}, {2, 16, 16, 64},
                               {2, 9, 7, 17}, {3, 6, 5, 12}, {1, 1, 1, 1}};
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
