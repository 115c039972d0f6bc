/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-layers-start-sums.c — a residual block's start in backward with the sums of
 * the bn below it in one pass (add_relu_backward_bn_sums_bf16, kernels/bn-sums.cu's sums
 * kernel in its SUM_START mode): dx and the sums bit for bit against the GPU's unfused
 * pair (add_relu_backward_bf16, or for a projection's start relu_backward_bf16, to_bf16
 * or a copy, then bn_backward_sums over the rounded gradient), dx bit for bit against
 * the CPU's op and the sums within float rounding of it (the CPU adds its rows in
 * another order); a float32 and bf16, with and without the skip's share and the ReLU's
 * mask as bits (its values zeros of both signs and a NaN), the bn's input float32 and
 * bf16, with and without its own fused ReLU; channel counts that take each vector width
 * and shapes of one group to many sets; through misaligned pointers (scalar accesses,
 * the same bits) and in place over the skip. A projection's compact share added in the
 * same pass (SUM_PROJECTION, strides 1, 2 and 3): the bits of add_strided_bf16 in place
 * in a's type then the op with no share, and the CPU's op's, a and the share with zeros
 * of both signs and a NaN, in place over a bf16 a. Registered by test-cuda-layers.c.
 */
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "test-cuda-layers.h"

static gboolean
same_device_bits(const char *what, const void *got, const void *want, size_t bytes)
{
  g_autofree char *a = g_malloc(bytes), *b = g_malloc(bytes);
  tdm_backend_download(gpu, a, got, bytes);
  tdm_backend_download(gpu, b, want, bytes);
  assert_ok(gpu);
  if (memcmp(a, b, bytes) == 0)
    return TRUE;
  g_test_message("FAILED %s: the bits differ", what);
  g_test_fail();
  return FALSE;
}

/* The bn below the block start: its input x, and p: mean, invstd, gamma, beta (c each). */
typedef struct {
  const void *x;
  TdmDtype x_type;
  const float *p;
  bool relu;
} StartBn;

static void
fused(TdmBackend *be, uint16_t *dx, float *sums, const TdmBlockStart *in, const StartBn *bn,
      int rows, int c)
{
  const float *p = bn->p;
  tdm_backend_add_relu_backward_bn_sums_bf16(be, dx, in, bn->x, bn->x_type, p, p + c,
                                             p + 2 * (size_t)c, p + 3 * (size_t)c, bn->relu,
                                             rows, c, sums, sums + c);
}

/* The unfused pair on backend be into want and sums (dgamma, then dbeta). */
static void
unfused(TdmBackend *be, uint16_t *want, float *sums, const TdmBlockStart *in, const StartBn *bn,
        int rows, int c)
{
  size_t n = (size_t)rows * c;
  const float *p = bn->p;
  if (in->skip != NULL)
    tdm_backend_add_relu_backward_bf16(be, want, in->a, in->a_type, in->skip, TDM_DTYPE_BF16,
                                       in->mask, n);
  else if (in->mask != NULL)
    tdm_backend_relu_backward_bf16(be, want, TDM_DTYPE_BF16, in->a, in->a_type, in->mask, n);
  else if (in->a_type == TDM_DTYPE_F32)
    tdm_backend_to_bf16(be, want, in->a, n);
  else
    tdm_backend_copy(be, want, in->a, n * 2);
  tdm_backend_bn_backward_sums(be, sums, sums + c, want, TDM_DTYPE_BF16, bn->x, bn->x_type, p,
                               p + c, p + 2 * (size_t)c, p + 3 * (size_t)c, bn->relu, rows, c);
}

/* The GPU's sums against the CPU's: NaN in the same channels (a NaN among a channel's
 * inputs, the share's or a's, makes its sums NaN on both), the others within TOL of
 * their summation order. */
static void
check_close_or_nan(const char *what, const float *dev, const float *ref, size_t n)
{
  g_autofree float *out = g_new(float, n);
  g_autofree float *finite_ref = g_memdup2(ref, n * sizeof(float));
  tdm_backend_download(gpu, out, dev, n * sizeof(float));
  assert_ok(gpu);
  for (size_t i = 0; i < n; i++) {
    if (isnan(ref[i]) != isnan(out[i])) {
      g_test_message("FAILED %s: element %zu is %g, the CPU's %g", what, i, out[i], ref[i]);
      g_test_fail();
      return;
    }
    if (isnan(ref[i]))
      out[i] = finite_ref[i] = 0.0f;
  }
  double err = rel_error(out, finite_ref, n);
  g_test_message("%s: relative error %.3g", what, err);
  if (!(err <= TOL)) {
    g_test_message("FAILED %s: relative error %.3g exceeds %.1g", what, err, TOL);
    g_test_fail();
  }
}

/* One case's GPU results, dx and the sums (got, gsums), against the GPU's reference
 * (want, wsums, made another way: `reference` says which) bit for bit, and against the
 * CPU's op on the same inputs on the host (hin, hbn): dx the same bits, the sums within
 * rounding of its order. */
static void
check_case(const char *what, const char *reference, const uint16_t *got, const float *gsums,
           const uint16_t *want, const float *wsums, const TdmBlockStart *hin,
           const StartBn *hbn, int rows, int c)
{
  size_t n = (size_t)rows * c;
  g_autofree char *wdx = g_strdup_printf("%s: dx against %s", what, reference);
  same_device_bits(wdx, got, want, n * 2);
  g_autofree char *ws = g_strdup_printf("%s: sums against %s", what, reference);
  same_device_bits(ws, gsums, wsums, 2 * (size_t)c * 4);
  g_autofree uint16_t *ref = g_new(uint16_t, n);
  g_autofree float *ref_sums = g_new(float, 2 * (size_t)c);
  fused(cpu, ref, ref_sums, hin, hbn, rows, c);
  assert_ok(cpu);
  g_autofree char *wc = g_strdup_printf("%s: dx", what);
  same_bits_cpu(wc, got, ref, n);
  g_autofree char *wcs = g_strdup_printf("%s: sums against the CPU", what);
  check_close_or_nan(wcs, gsums, ref_sums, 2 * (size_t)c);
}

/* The op again with dx over one of its bf16 inputs (over's, at got: a copy of `from`):
 * the bits of want and wsums. */
static void
check_in_place(const char *what, uint16_t *got, const void *from, const TdmBlockStart *over,
               const StartBn *bn, float *gsums, const uint16_t *want, const float *wsums,
               int rows, int c)
{
  size_t n = (size_t)rows * c;
  tdm_backend_copy(gpu, got, from, n * 2);
  fused(gpu, got, gsums, over, bn, rows, c);
  same_device_bits(what, got, want, n * 2);
  same_device_bits(what, gsums, wsums, 2 * (size_t)c * 4);
}

/* The bn's input and parameters of `all` values of c channels, on the host: near the
 * data's statistics (mean, invstd, gamma, beta), so that xhat is of order 1. */
static float *
bn_input(size_t all, int c)
{
  float *x = random_floats(all, -1, 1);
  for (size_t i = 0; i < all; i++)
    x[i] = x[i] * (1.0f + (float)(i % c) * 0.01f) + 0.25f * (float)(i % 5);
  return x;
}

static float *
bn_params(int c)
{
  float *p = random_floats(4 * (size_t)c, 0.5, 1.5);
  for (int ch = 0; ch < c; ch++) {
    p[ch] = 0.5f * p[ch] - 0.25f + 0.5f;
    p[3 * (size_t)c + ch] -= 1.0f;
  }
  return p;
}

/* The ReLU's output below, `all` values with zeros of both signs and a NaN, as bf16. */
static uint16_t *
relu_output16(size_t all)
{
  g_autofree float *y = random_floats(all, -2, 2);
  for (size_t i = 0; i < all; i += 5)
    y[i] = i % 10 == 0 ? 0.0f : -0.0f;
  y[all / 3] = NAN;
  uint16_t *y16 = g_new(uint16_t, all);
  for (size_t i = 0; i < all; i++)
    y16[i] = bf16_bits(y[i]);
  return y16;
}

static void
start_sums_case(int rows, int c, size_t offset)
{
  size_t n = (size_t)rows * c, all = n + offset;
  g_autofree float *a = random_floats(all, -1, 1), *skipf = random_floats(all, -1, 1);
  g_autofree float *x = bn_input(all, c), *p = bn_params(c);
  a[all - 1] = -0.0f;
  g_autofree uint16_t *a16 = g_new(uint16_t, all), *skip16 = g_new(uint16_t, all);
  g_autofree uint16_t *x16 = g_new(uint16_t, all), *y16 = relu_output16(all);
  for (size_t i = 0; i < all; i++) {
    a16[i] = bf16_bits(a[i]);
    skip16[i] = bf16_bits(skipf[i]);
    x16[i] = bf16_bits(x[i]);
  }
  float *da = on(a, all * 4), *dx32 = on(x, all * 4), *dp = on(p, 4 * (size_t)c * 4);
  uint16_t *da16 = on(a16, all * 2), *dskip = on(skip16, all * 2), *dx16 = on(x16, all * 2);
  /* The mask of the n values from offset, as the forward writes it (its own words). */
  g_autofree uint32_t *hmask = g_new(uint32_t, TDM_RELU_BITS_WORDS(n));
  tdm_relu_bits_of(hmask, y16 + offset, n);
  uint32_t *dmask = relu_bits_on(y16 + offset, n);
  uint16_t *got = on(NULL, all * 2), *want = on(NULL, all * 2);
  float *gsums = poisoned(2 * (size_t)c), *wsums = poisoned(2 * (size_t)c);
  for (int t = 0; t < 32; t++) {
    bool a_bf16 = t & 1, with_skip = t & 2, masked = t & 4, x_bf16 = t & 8, relu = t & 16;
    TdmDtype a_type = a_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    TdmDtype x_type = x_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    const void *av = a_bf16 ? (const void *)(da16 + offset) : (const void *)(da + offset);
    TdmBlockStart in = {.a = av,
                        .a_type = a_type,
                        .skip = with_skip ? dskip + offset : NULL,
                        .mask = masked ? dmask : NULL};
    StartBn bn = {x_bf16 ? (const void *)(dx16 + offset) : (const void *)(dx32 + offset),
                  x_type, dp, relu};
    g_autofree char *what = g_strdup_printf(
        "add_relu_backward_bn_sums_bf16 %d×%d+%zu a %s%s%s x %s%s", rows, c, offset,
        a_bf16 ? "bf16" : "f32", with_skip ? " + skip" : "", masked ? ", masked" : "",
        x_bf16 ? "bf16" : "f32", relu ? ", bn relu" : "");
    unfused(gpu, want + offset, wsums, &in, &bn, rows, c);
    fused(gpu, got + offset, gsums, &in, &bn, rows, c);
    assert_ok(gpu);
    const void *hav = a_bf16 ? (const void *)(a16 + offset) : (const void *)(a + offset);
    TdmBlockStart hin = {.a = hav,
                         .a_type = a_type,
                         .skip = with_skip ? skip16 + offset : NULL,
                         .mask = masked ? hmask : NULL};
    StartBn hbn = {x_bf16 ? (const void *)(x16 + offset) : (const void *)(x + offset), x_type,
                   p, relu};
    check_case(what, "the unfused pair", got + offset, gsums, want + offset, wsums, &hin, &hbn,
               rows, c);
    /* In place over the skip, as the block's start writes its sum. */
    if (with_skip) {
      TdmBlockStart over = in;
      over.skip = got + offset;
      g_autofree char *wi = g_strdup_printf("%s, in place", what);
      check_in_place(wi, got + offset, dskip + offset, &over, &bn, gsums, want + offset, wsums,
                     rows, c);
    }
  }
  void *bufs[] = {da, dx32, dp, da16, dskip, dx16, dmask, got, want, gsums, wsums};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

/* A projection's start: images of h × w pixels and c channels, its 1×1 conv's stride,
 * every pointer `offset` elements past an aligned one. */
static void
strided_case(int images, int h, int w, int c, int stride, size_t offset)
{
  int rows = images * h * w;
  size_t n = (size_t)rows * c, all = n + offset;
  size_t compact = (size_t)images * ((h - 1) / stride + 1) * ((w - 1) / stride + 1) * c;
  g_autofree float *a = random_floats(all, -1, 1);
  g_autofree float *share = random_floats(compact + offset, -1, 1);
  g_autofree float *x = bn_input(all, c), *p = bn_params(c);
  /* −0 kept by a −0 share, made +0 where the conv reads no value of the pixel (a + 0). */
  for (size_t i = 3; i < all; i += 7)
    a[i] = -0.0f;
  for (size_t i = 1; i < compact + offset; i += 3)
    share[i] = -0.0f;
  share[offset + compact / 2] = NAN;
  g_autofree uint16_t *a16 = g_new(uint16_t, all), *x16 = g_new(uint16_t, all);
  g_autofree uint16_t *y16 = relu_output16(all);
  for (size_t i = 0; i < all; i++) {
    a16[i] = bf16_bits(a[i]);
    x16[i] = bf16_bits(x[i]);
  }
  a16[offset + n / 3] = 0x7fc1; /* a NaN of its own bits: the sum's canonical NaN */
  float *da = on(a, all * 4), *dshare = on(share, (compact + offset) * 4);
  float *dx32 = on(x, all * 4), *dp = on(p, 4 * (size_t)c * 4), *dsum = on(NULL, all * 4);
  uint16_t *da16 = on(a16, all * 2), *dx16 = on(x16, all * 2);
  g_autofree uint32_t *hmask = g_new(uint32_t, TDM_RELU_BITS_WORDS(n));
  tdm_relu_bits_of(hmask, y16 + offset, n);
  uint32_t *dmask = relu_bits_on(y16 + offset, n);
  uint16_t *got = on(NULL, all * 2), *want = on(NULL, all * 2);
  float *gsums = poisoned(2 * (size_t)c), *wsums = poisoned(2 * (size_t)c);
  for (int t = 0; t < 16; t++) {
    bool a_bf16 = t & 1, masked = t & 2, x_bf16 = t & 4, relu = t & 8;
    TdmDtype a_type = a_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    TdmDtype x_type = x_bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    size_t a_size = tdm_dtype_size(a_type);
    const void *av = a_bf16 ? (const void *)(da16 + offset) : (const void *)(da + offset);
    TdmBlockStart in = {.a = av,
                        .a_type = a_type,
                        .strided = dshare + offset,
                        .h = h,
                        .w = w,
                        .stride = stride,
                        .mask = masked ? dmask : NULL};
    StartBn bn = {x_bf16 ? (const void *)(dx16 + offset) : (const void *)(dx32 + offset),
                  x_type, dp, relu};
    g_autofree char *what = g_strdup_printf(
        "add_relu_backward_bn_sums_bf16 %d×%d×%d×%d s%d+%zu a %s%s x %s%s", images, h, w, c,
        stride, offset, a_bf16 ? "bf16" : "f32", masked ? ", masked" : "",
        x_bf16 ? "bf16" : "f32", relu ? ", bn relu" : "");
    /* The two passes: add_strided_bf16 in place in a's type, then the op with no share. */
    void *summed = (char *)dsum + offset * a_size;
    tdm_backend_copy(gpu, summed, av, n * a_size);
    tdm_backend_add_strided_bf16(gpu, summed, a_type, summed, a_type, dshare + offset, images,
                                 h, w, c, stride);
    TdmBlockStart apart = {.a = summed, .a_type = a_type, .mask = in.mask};
    fused(gpu, want + offset, wsums, &apart, &bn, rows, c);
    fused(gpu, got + offset, gsums, &in, &bn, rows, c);
    assert_ok(gpu);
    TdmBlockStart hin = in;
    hin.a = a_bf16 ? (const void *)(a16 + offset) : (const void *)(a + offset);
    hin.strided = share + offset;
    hin.mask = masked ? hmask : NULL;
    StartBn hbn = {x_bf16 ? (const void *)(x16 + offset) : (const void *)(x + offset), x_type,
                   p, relu};
    check_case(what, "the two passes", got + offset, gsums, want + offset, wsums, &hin, &hbn,
               rows, c);
    /* In place over a bf16 a (the first conv's gradient, which the sum may replace). */
    if (a_bf16) {
      TdmBlockStart over = in;
      over.a = got + offset;
      g_autofree char *wi = g_strdup_printf("%s, in place over a", what);
      check_in_place(wi, got + offset, av, &over, &bn, gsums, want + offset, wsums, rows, c);
    }
  }
  void *bufs[] = {da, dshare, dx32, dp, dsum, da16, dx16, dmask, got, want, gsums, wsums};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

static void
test_start_sums(void)
{
  if (!have_gpu())
    return;
  for (size_t offset = 0; offset < 2; offset++) {
    start_sums_case(7, 3, offset);           /* one group, one value a thread */
    start_sums_case(5003, 17, offset);       /* 17 channels: scalar accesses, three sets */
    start_sums_case(65536 + 37, 64, offset); /* a ResNet's first stage: 8 a thread, sets */
    start_sums_case(2001, 512, offset);      /* two tiles of 256 channels */
    start_sums_case(300, 1000, offset);      /* four tiles, the last one partly used */
    start_sums_case(1, 12, offset);          /* one row: 4 a thread */
  }
  start_sums_case(5, 40000, 0); /* wider than the scratch holds groups for */
}

static void
test_start_sums_strided(void)
{
  if (!have_gpu())
    return;
  for (size_t offset = 0; offset < 2; offset++)
    for (int stride = 1; stride <= 3; stride++) {
      strided_case(1, 1, 1, 12, stride, offset);    /* one row: 4 a thread */
      strided_case(3, 7, 5, 3, stride, offset);     /* one value a thread, odd sides */
      strided_case(2, 9, 11, 17, stride, offset);   /* 17 channels: scalar accesses */
      strided_case(3, 6, 10, 12, stride, offset);   /* 4 a thread */
      strided_case(40, 32, 32, 64, stride, offset); /* a ResNet's first stage: 8, sets */
      strided_case(5, 15, 13, 128, stride, offset); /* two tiles */
    }
}

void
test_cuda_layers_add_start_sums(void)
{
  g_test_add_func("/cuda-layers/start-sums", test_start_sums);
  g_test_add_func("/cuda-layers/start-sums-strided", test_start_sums_strided);
}

#endif /* TDM_HAVE_CUDA */
