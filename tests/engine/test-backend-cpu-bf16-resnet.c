/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-bf16-resnet.c — part of test-backend-cpu: the CPU backend's bfloat16
 * operations on the tensors a bf16 run of the resnet preset stores as bf16, bit for bit
 * against their float32 forms on the widened inputs (widening is exact), then to_bf16
 * where they write bf16.
 *
 * The operations of a residual block stored as bf16 (from_bf16, im2col_bf16 of a bf16
 * input, add_out_bf16 and bn_forward_bf16 with the ReLU's mask as bits beside, and
 * relu_backward_bf16 reading it); the block's gradients kept as bf16
 * (relu_backward_bf16 of either type into either, in place too;
 * add_strided_bf16 against col2im's dense tensor added then rounded; the block's start
 * fused, add_relu_backward_bf16, against add_out then the float32 ReLU mask, and a
 * projection's start from a bf16 gradient against the float32 way). The plain layers:
 * maxpool_forward_bf16 gives the bits and argmax of bn_forward_bf16 (or to_bf16) then
 * maxpool_forward on the widened values, maxpool_backward_bf16 those of
 * maxpool_backward then to_bf16, bn_forward_eval_bf16 those of bn_forward_eval then
 * to_bf16, bn_relu_add_bf16 those of bn_forward (its ReLU) then add_out then to_bf16.
 * The block's start with the bn's sums is test-backend-cpu-start-sums.c's.
 */
#include "test-backend-cpu.h"
#include "tdm-bf16.h"

/* Whether bits holds the mask of the float32 values v rounded (the forward writes the
 * mask of what it stores): bit e set where the rounded value is > 0, a NaN's not. */
static void
assert_bits_of(const uint32_t *bits, const float *v, size_t n)
{
  for (size_t e = 0; e < n; e++)
    g_assert_cmpuint(tdm_relu_bit_at(bits, e), ==,
                     tdm_bf16_value(tdm_bf16_round(v[e])) > 0.0f ? 1u : 0u);
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
  /* The mask as the forward's bits: where the widened values are > 0. */
  uint32_t *bits = dev_relu_bits(b, x16, count),
           *got_bits = dev_alloc(b, TDM_RELU_BITS_WORDS(count) * 4);
  for (int relu = 0; relu < 2; relu++) {
    tdm_backend_relu_backward_bf16(b, got, TDM_DTYPE_F32, dy, TDM_DTYPE_F32, bits, count);
    tdm_backend_relu_backward(b, want, dy, x, count);
    g_assert_cmpmem(got, count * 4, want, count * 4);
    for (int t = 0; t < 2; t++) {
      TdmDtype type = t == 0 ? TDM_DTYPE_F32 : TDM_DTYPE_BF16;
      const void *skip = t == 0 ? (const void *)x : (const void *)x16;
      tdm_backend_add_out_bf16(b, got16, a, skip, type, count, relu, got_bits);
      tdm_backend_add_out(b, want, a, x, count, relu);
      g_autofree uint16_t *sum16 = to_bf16_host(want, count);
      g_assert_cmpmem(got16, count * 2, sum16, count * 2);
      assert_bits_of(got_bits, want, count);
      /* The bn of a (as its input) plus the skip, and the bn alone. */
      tdm_backend_bn_forward_bf16(b, got16, a, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c,
                                  skip, type, rows, c, relu, got_bits);
      tdm_backend_bn_forward_add(b, want, a, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c, x,
                                 rows, c, relu);
      g_autofree uint16_t *bn_add16 = to_bf16_host(want, count);
      g_assert_cmpmem(got16, count * 2, bn_add16, count * 2);
      assert_bits_of(got_bits, want, count);
      tdm_backend_bn_forward_bf16(b, got16, skip, type, p, p + c, p + 2 * c, p + 3 * c, NULL,
                                  TDM_DTYPE_F32, rows, c, relu, NULL);
      tdm_backend_bn_forward(b, want, x, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c, rows, c,
                             relu);
      g_autofree uint16_t *bn16 = to_bf16_host(want, count);
      g_assert_cmpmem(got16, count * 2, bn16, count * 2);
    }
  }
  g_assert_true(tdm_backend_check(b, NULL));
  void *all[] = {x, a, dy, p, x16, got, want, got16, col, col_want, bits, got_bits};
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
    y[i] = i % 10 == 0 ? 0.0f : -0.0f;
  y[3] = NAN;
  y[8] = -NAN;
  y[12] = 1e-41f; /* a subnormal: positive */
  for (size_t i = 0; i < count; i++) {
    y16[i] = tdm_bf16_round(y[i]);
    y[i] = tdm_bf16_value(y16[i]);
    dy16[i] = tdm_bf16_round(dy[i]);
  }
  uint32_t *bits = dev_relu_bits(b, y16, count);
  float *dy_wide = dev_floats(b, count), *want = dev_floats(b, count);
  float *got = dev_floats(b, count);
  uint16_t *got16 = dev_alloc(b, count * 2);
  tdm_backend_from_bf16(b, dy_wide, dy16, count);
  for (int in16 = 0; in16 < 2; in16++) {
    TdmDtype dy_type = in16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    const void *d = in16 ? (const void *)dy16 : (const void *)dy;
    tdm_backend_relu_backward(b, want, in16 ? dy_wide : dy, y, count);
    tdm_backend_relu_backward_bf16(b, got, TDM_DTYPE_F32, d, dy_type, bits, count);
    g_assert_cmpmem(got, count * 4, want, count * 4);
    tdm_backend_relu_backward_bf16(b, got16, TDM_DTYPE_BF16, d, dy_type, bits, count);
    g_autofree uint16_t *want16 = to_bf16_host(want, count);
    g_assert_cmpmem(got16, count * 2, want16, count * 2);
    /* In place, of one type. */
    float *inplace = dev_floats(b, count);
    uint16_t *inplace16 = dev_alloc(b, count * 2);
    memcpy(inplace, dy, count * 4);
    memcpy(inplace16, dy16, count * 2);
    if (in16) {
      tdm_backend_relu_backward_bf16(b, inplace16, TDM_DTYPE_BF16, inplace16, TDM_DTYPE_BF16,
                                     bits, count);
      g_assert_cmpmem(inplace16, count * 2, want16, count * 2);
    } else {
      tdm_backend_relu_backward_bf16(b, inplace, TDM_DTYPE_F32, inplace, TDM_DTYPE_F32, bits,
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
    /* The argmax's bytes (a byte an output for this 3×3 window): beyond them the buffers
     * hold whatever the allocation held. */
    size_t at_bytes = ny * tdm_pool2d_argmax_size(g.k);
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
      g_assert_cmpmem(argmax16, at_bytes, argmax_wide, at_bytes);
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
                                          NULL, TDM_DTYPE_F32, n * h * w, c, relu, NULL);
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
            g_assert_cmpmem(got_at, at_bytes, want_at, at_bytes);
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
  void *all[] = {y, dy, a, y16, dy16, dy_wide, want, got, got16, bits};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(b, all[i]);
  free_backend(b);
  /* dx is dy but of another type: one failure that names the operation. */
  b = new_backend();
  float *one = dev_floats(b, 4);
  uint32_t *mask = dev_alloc(b, 4);
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

/* A residual block's start in backward, fused: add_relu_backward_bf16 (the first
 * layer's input gradient a, float32 or bf16, plus the skip's share x, float32 or bf16,
 * summed in float32, rounded once, and the ReLU of the block's end below applied by
 * the bits of its bf16 output y, or none where they are NULL) gives the bits of the
 * float32 ops: a widened, add_out, to_bf16, then relu_backward on the widened y (its
 * y > 0 the mask's rule); in place over x too. A
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
  uint32_t *bits = dev_relu_bits(b, y16, count);
  float *y_wide = dev_floats(b, count), *sum_f = dev_floats(b, count);
  tdm_backend_from_bf16(b, y_wide, y16, count);
  for (int with_mask = 0; with_mask < 2; with_mask++) {
    const uint32_t *mask = with_mask ? bits : NULL;
    for (int ab = 0; ab < 2; ab++) {
      TdmDtype a_type = ab ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
      const void *av = ab ? (const void *)a16 : (const void *)a;
      for (int xb = 0; xb < 2; xb++) {
        TdmDtype x_type = xb ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
        const void *xv = xb ? (const void *)x16 : (const void *)xf;
        tdm_backend_add_out_bf16(b, want, ab ? a_wide : a, xv, x_type, count, false, NULL);
        if (mask != NULL) {
          tdm_backend_from_bf16(b, sum_f, want, count);
          tdm_backend_relu_backward(b, sum_f, sum_f, y_wide, count);
          tdm_backend_to_bf16(b, want, sum_f, count);
        }
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
      const uint32_t *mask = with_mask ? bits : NULL;
      for (int ab = 0; ab < 2; ab++) {
        /* The float32 way, from a as float32 (a bf16 a widened). */
        memcpy(sum, ab ? a_wide : a, count * 4);
        tdm_backend_add_strided_bf16(b, sum, TDM_DTYPE_F32, sum, TDM_DTYPE_F32, x, n, h, w, c,
                                     stride);
        tdm_backend_to_bf16(b, want, sum, count);
        if (mask != NULL) {
          tdm_backend_from_bf16(b, sum_f, want, count);
          tdm_backend_relu_backward(b, sum_f, sum_f, y_wide, count);
          tdm_backend_to_bf16(b, want, sum_f, count);
        }
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
  void *bufs[] = {a, a_wide, xf, yf, a16, x16, y16, got, want, inplace, bits, y_wide, sum_f};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    tdm_backend_release(b, bufs[i]);
  tdm_backend_free(b);
}

/* The plain layers' operations (n × h × w × c, window k, with a remainder), inputs with
 * ties: every third value repeats the one before, every fifth is one float32 step from
 * it (the same bf16). */
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
                                    TDM_DTYPE_F32, n * h * w, c, bn == 2, NULL);
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

/* The ReLU's mask as bits gives what the bf16 output read as a mask gave (its widened
 * value > 0): the rule over all 65,536 bf16 values (zeros of both signs, subnormals, ±∞,
 * every NaN); and for counts that are no multiple of 32 or of 8, the bits add_out_bf16
 * writes beside its output, relu_backward_bf16 and add_relu_backward_bf16 reading them
 * against the float32 ops on the widened output (relu_backward's y > 0). */
static void
test_relu_bits(void)
{
  g_autofree uint16_t *all = g_new(uint16_t, 65536);
  g_autofree uint32_t *all_bits = g_new(uint32_t, 65536 / 32);
  for (size_t h = 0; h < 65536; h++)
    all[h] = (uint16_t)h;
  tdm_relu_bits_of(all_bits, all, 65536);
  for (size_t h = 0; h < 65536; h++)
    g_assert_cmpuint(tdm_relu_bit_at(all_bits, h), ==, tdm_bf16_value(all[h]) > 0.0f);
  TdmBackend *b = new_backend();
  const size_t counts[] = {1, 7, 9, 31, 33, 100, 1003};
  for (guint k = 0; k < G_N_ELEMENTS(counts); k++) {
    const size_t n = counts[k];
    float *a = dev_floats(b, n), *x = dev_floats(b, n), *dy = dev_floats(b, n);
    float *y_wide = dev_floats(b, n), *want = dev_floats(b, n), *got = dev_floats(b, n);
    uint16_t *y16 = dev_alloc(b, n * 2), *got16 = dev_alloc(b, n * 2);
    uint16_t *want16 = dev_alloc(b, n * 2);
    uint32_t *bits = dev_alloc(b, TDM_RELU_BITS_WORDS(n) * 4);
    fill_random(a, n, -1, 1);
    fill_random(x, n, -1, 1);
    fill_random(dy, n, -1, 1);
    for (size_t i = 0; i < n; i += 3)
      x[i] = -a[i]; /* a zero sum */
    a[n - 1] = NAN;
    if (n > 4) {
      a[1] = x[1] = -0.0f; /* −0 */
      a[2] = INFINITY;
    }
    for (int relu = 0; relu < 2; relu++) {
      tdm_backend_add_out_bf16(b, y16, a, x, TDM_DTYPE_F32, n, relu, bits);
      tdm_backend_from_bf16(b, y_wide, y16, n);
      assert_bits_of(bits, y_wide, n);
      tdm_backend_relu_backward(b, want, dy, y_wide, n);
      tdm_backend_relu_backward_bf16(b, got, TDM_DTYPE_F32, dy, TDM_DTYPE_F32, bits, n);
      g_assert_cmpmem(got, n * 4, want, n * 4);
      /* The block start's sum masked: the float32 sum masked, then rounded. */
      tdm_backend_add_out(b, want, dy, x, n, false);
      tdm_backend_relu_backward(b, want, want, y_wide, n);
      tdm_backend_to_bf16(b, want16, want, n);
      tdm_backend_add_relu_backward_bf16(b, got16, dy, TDM_DTYPE_F32, x, TDM_DTYPE_F32, bits,
                                         n);
      g_assert_cmpmem(got16, n * 2, want16, n * 2);
    }
    void *bufs[] = {a, x, dy, y_wide, want, got, y16, got16, want16, bits};
    for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
      tdm_backend_release(b, bufs[i]);
  }
  free_backend(b);
}

void
test_backend_cpu_add_bf16_resnet(void)
{
  g_test_add_func("/backend-cpu/bf16/relu-bits", test_relu_bits);
  g_test_add_func("/backend-cpu/bf16/block-ops", test_block_ops);
  g_test_add_func("/backend-cpu/bf16/block-gradients", test_block_gradients);
  g_test_add_func("/backend-cpu/bf16/block-start", test_block_start);
  g_test_add_func("/backend-cpu/bf16/plain-layers", test_plain_layers);
}
