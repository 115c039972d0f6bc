/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv-small.c — the convolution engine's few-channel candidates, "own:fwd"
 * and "own:wgrad" (conv-small.cu), each forced by name against a double-precision CPU
 * reference on fresh random inputs: 1, 3, 4 and 8 input channels; 1×1, 3×3, 5×5 and 7×7
 * kernels; strides 1 and 2; padding 0 to 3; odd sizes; 16 to 128 output channels
 * (channel tiles of 64, 32 and 16, the weight gradient's reduction in one chunk or in
 * three; the forward's tiles of 8 × 16, 16 × 8, 4 × 32 and 1 × 128 pixels, whole and
 * partial, their input halos inside the image and past its edges); inputs stored
 * as float32 or bf16, with and without a bn normalized as they are read; outputs as
 * float32 or bf16; the weights as the caller's bf16 or converted by the engine; each
 * run in a workspace of exactly the bytes it says it needs. Then the weight gradient's
 * bits twice the same (its partials summed in a fixed order); which calls are offered
 * the candidates; TANDEM_CONV=own's engine choosing them; and --exact's rule taking them
 * where cuDNN is hidden.
 *
 * Bounds: the reference convolves the operands as the GPU reads them (each rounded to
 * bf16: the bn's output, the weights, dy), in double, so the only errors left are the
 * float32 sums (products of bf16 values are exact in float32): 32 · 2⁻²⁴ · √L for a
 * reduction of length L (the float32 engine test's 16 · 2⁻²⁴ · √L, doubled for tensor
 * cores that may truncate rather than round as they add), relative in norm; and where
 * the output is bf16, its one rounding, at most 2⁻⁹ of each value (2⁻⁸ allowed). A
 * wrong column, tap, channel or split would be off by the size of the result itself.
 * Skips without a CUDA GPU.
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "tdm-backend-cuda.h"
#include "test-cuda-conv.h"
#include "test-cuda-layers.h"

typedef struct {
  int n, h, w, c, out_c, kernel, pad, stride;
} SmallCase;

static const SmallCase small_cases[] = {
  {3, 29, 31, 3, 64, 7, 3, 2},   /* a 7×7 stem at odd sizes */
  {3, 29, 31, 1, 32, 3, 1, 1},   /* the resnet preset's first conv */
  {3, 29, 31, 3, 64, 3, 1, 1},   /* CIFAR's ResNet-18 stem */
  {2, 17, 15, 4, 16, 1, 0, 1},   /* 1×1, 4 channels, 16 out */
  {2, 17, 15, 4, 48, 1, 3, 2},   /* 1×1 with padding 3 at stride 2: border pixels of zeros */
  {3, 29, 31, 8, 64, 7, 3, 1},   /* 8 channels, 7×7: K 392, three weight-gradient chunks */
  {2, 13, 11, 8, 128, 3, 2, 2},  /* 128 out: two channel tiles */
  {2, 19, 23, 3, 48, 5, 0, 2},   /* 48 out: tiles of 16; padding 0 */
  {1, 9, 7, 1, 16, 7, 3, 1},     /* smaller than the kernel but for the padding */
  {8, 56, 56, 3, 64, 7, 3, 2},   /* many tiles; 56 of 4 × 32, 12 splits */
  {16, 64, 64, 3, 32, 3, 1, 1},  /* 128 splits, two pixel groups */
  /* The forward's tiles of tr × tw pixels and their halos (conv-small-plan.h): */
  {2, 224, 224, 3, 64, 7, 3, 2}, /* the stem itself: tiles of 8 × 16 covering 112 × 112 */
  {2, 37, 129, 3, 64, 7, 3, 2},  /* 19 × 65 out: tiles of 8 × 16, the last partial both ways */
  {2, 1, 256, 3, 16, 1, 0, 2},   /* 1 × 128 out: a tile of 1 × 128, its halo 255 wide */
  {3, 3, 5, 8, 32, 7, 3, 1},     /* 3 × 5 out: the halo past the image on every side */
  {2, 40, 7, 1, 16, 5, 2, 1},    /* 40 × 7 out: tiles of 16 × 8, partial both ways */
  {1, 7, 300, 4, 32, 3, 0, 2},   /* 3 × 149 out: tiles of 4 × 32, the last 3 × 21 */
};

/* The host side of a case: operands as the GPU reads them, and the references. */
typedef struct {
  TdmConvShape s;
  int oh, ow;
  size_t in, out, weights, rows, k;
  float *x;           /* as stored (float32, or bf16 values) */
  uint16_t *x16;      /* its bits when stored as bf16 */
  float *bn;          /* mean, invstd, gamma, beta: 4·c */
  float *w, *dy;
  double *y_ref, *dw_ref;
} Small;

static float
rounded(float v)
{
  return bf16_value(bf16_bits(v));
}

static void
small_init(Small *p, const SmallCase *c, gboolean x16, gboolean with_bn)
{
  memset(p, 0, sizeof *p);
  p->s = (TdmConvShape){c->n, c->h, c->w, c->c, c->out_c, c->kernel, c->pad, c->stride};
  p->oh = tdm_conv_out_h(&p->s);
  p->ow = tdm_conv_out_w(&p->s);
  p->rows = (size_t)c->n * p->oh * p->ow;
  p->k = (size_t)c->kernel * c->kernel * c->c;
  p->in = (size_t)c->n * c->h * c->w * c->c;
  p->out = p->rows * c->out_c;
  p->weights = (size_t)c->out_c * p->k;
  p->x = random_floats(p->in, -2, 3);
  if (x16) {
    p->x16 = g_new(uint16_t, p->in);
    for (size_t e = 0; e < p->in; e++) {
      p->x16[e] = bf16_bits(p->x[e]);
      p->x[e] = bf16_value(p->x16[e]);
    }
  }
  p->w = random_floats(p->weights, -1, 1);
  p->dy = random_floats(p->out, -1, 1);
  /* The operands as the kernels read them. */
  g_autofree float *xo = g_new(float, p->in);
  if (with_bn) {
    p->bn = random_floats(4 * (size_t)c->c, -0.5, 0.5);
    for (int ch = 0; ch < c->c; ch++)
      p->bn[c->c + ch] = 0.5f + fabsf(p->bn[c->c + ch]) * 2;
    tdm_backend_bn_forward(cpu, xo, p->x, TDM_DTYPE_F32, p->bn, p->bn + c->c, p->bn + 2 * c->c,
                           p->bn + 3 * c->c, (int)(p->in / c->c), c->c, true);
    assert_ok(cpu);
  } else {
    memcpy(xo, p->x, p->in * 4);
  }
  for (size_t e = 0; e < p->in; e++)
    xo[e] = rounded(xo[e]);
  g_autofree float *wo = g_new(float, p->weights);
  for (size_t e = 0; e < p->weights; e++)
    wo[e] = rounded(p->w[e]);
  g_autofree float *dyo = g_new(float, p->out);
  for (size_t e = 0; e < p->out; e++)
    dyo[e] = rounded(p->dy[e]);

  p->y_ref = g_new0(double, p->out);
  p->dw_ref = g_new0(double, p->weights);
  const TdmConvShape *s = &p->s;
  size_t row = 0;
  for (int img = 0; img < s->n; img++)
    for (int oy = 0; oy < p->oh; oy++)
      for (int ox = 0; ox < p->ow; ox++, row++)
        for (int ky = 0; ky < s->kernel; ky++) {
          int iy = oy * s->stride + ky - s->pad;
          if (iy < 0 || iy >= s->h)
            continue;
          for (int kx = 0; kx < s->kernel; kx++) {
            int ix = ox * s->stride + kx - s->pad;
            if (ix < 0 || ix >= s->w)
              continue;
            const float *xv = xo + (((size_t)img * s->h + iy) * s->w + ix) * s->c;
            size_t col = ((size_t)ky * s->kernel + kx) * s->c;
            for (int o = 0; o < s->out_c; o++) {
              const float *wv = wo + (size_t)o * p->k + col;
              double sum = 0.0, g = dyo[row * s->out_c + o];
              for (int ch = 0; ch < s->c; ch++) {
                sum += (double)xv[ch] * wv[ch];
                p->dw_ref[(size_t)o * p->k + col + ch] += g * xv[ch];
              }
              p->y_ref[row * s->out_c + o] += sum;
            }
          }
        }
}

static void
small_clear(Small *p)
{
  g_free(p->x);
  g_free(p->x16);
  g_free(p->bn);
  g_free(p->w);
  g_free(p->dy);
  g_free(p->y_ref);
  g_free(p->dw_ref);
}

static double
rel_error_d(const float *out, const double *ref, size_t n)
{
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = out[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return sqrt(num) / (den > 0.0 ? sqrt(den) : 1.0);
}

/* The float32 sums' bound for a reduction of length L, and a bf16 output's rounding. */
static double
small_bound(size_t length, gboolean out16)
{
  return 32.0 * 0x1p-24 * sqrt((double)length) + (out16 ? 0x1p-8 : 0.0);
}

/* The device side: the operands and the engine's call (bf16 backend). */
typedef struct {
  TdmConvArgs a;
  void *x;
  float *bn, *w, *dy, *dw;
  uint16_t *w16;
  void *y;            /* float32 or bf16 */
} SmallDevice;

static void
small_device_init(SmallDevice *d, const Small *p, gboolean with_w16, gboolean y16)
{
  TdmBackend *b = gpu_bf16;
  memset(d, 0, sizeof *d);
  d->x = p->x16 != NULL ? on_b(b, p->x16, p->in * 2) : on_b(b, p->x, p->in * 4);
  d->w = on_b(b, p->w, p->weights * 4);
  d->dy = on_b(b, p->dy, p->out * 4);
  d->dw = on_b(b, NULL, p->weights * 4);
  d->y = on_b(b, NULL, p->out * (y16 ? 2 : 4));
  if (with_w16) {
    d->w16 = on_b(b, NULL, p->weights * 2);
    tdm_backend_to_bf16(b, d->w16, d->w, p->weights);
  }
  d->a = (TdmConvArgs){.shape = p->s, .x = d->x, .w = d->w, .w16 = d->w16, .dy = d->dy,
                       .dw = d->dw};
  d->a.x_type = p->x16 != NULL ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
  if (y16)
    d->a.y16 = d->y;
  else
    d->a.y = d->y;
  if (p->bn != NULL) {
    int c = p->s.c;
    d->bn = on_b(b, p->bn, 4 * (size_t)c * 4);
    d->a.bn_mean = d->bn;
    d->a.bn_invstd = d->bn + c;
    d->a.bn_gamma = d->bn + 2 * c;
    d->a.bn_beta = d->bn + 3 * c;
    d->a.bn_relu = true;
  }
}

static void
small_device_clear(SmallDevice *d)
{
  void *all[] = {d->x, d->bn, d->w, d->dy, d->dw, d->w16, d->y};
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    if (all[i] != NULL)
      tdm_backend_release(gpu_bf16, all[i]);
}

/* Runs the named candidate in a workspace of exactly its need, the output poisoned
 * first; its output as floats in out (count values, float32 or bf16 on the device). */
static void
run_exactly(SmallDevice *d, TdmConvDirection dir, const char *name, const char *what,
            float *out, size_t count, gboolean out16)
{
  TdmBackend *b = gpu_bf16;
  void *target = dir == TDM_CONV_FORWARD ? d->y : (void *)d->dw;
  /* A workspace to measure in, then one of the need. */
  TdmConvArgs probe = d->a;
  probe.work = on_b(b, NULL, 16);
  probe.work_bytes = 16;
  size_t need = tdm_cuda_conv_need_named(b, &probe, dir, name);
  tdm_backend_release(b, probe.work);
  if (need == 0) {
    g_test_message("FAILED %s: %s not offered", what, name);
    g_test_fail();
    return;
  }
  TdmConvArgs a = d->a;
  a.work = on_b(b, NULL, need);
  a.work_bytes = need;
  g_autofree uint8_t *nan = g_malloc(count * 4);
  memset(nan, 0xff, count * 4); /* NaN as float32 and as bf16 */
  tdm_backend_upload(b, target, nan, count * (out16 ? 2 : 4));
  g_assert_true(tdm_cuda_conv_run_named(b, &a, dir, name));
  if (out16) {
    g_autofree uint16_t *bits = g_new(uint16_t, count);
    tdm_backend_download(b, bits, target, count * 2);
    for (size_t e = 0; e < count; e++)
      out[e] = bf16_value(bits[e]);
  } else {
    tdm_backend_download(b, out, target, count * 4);
  }
  assert_ok(b);
  tdm_backend_release(b, a.work);
  for (size_t e = 0; e < count; e++)
    if (!isfinite(out[e]))
      g_error("%s: element %zu is %g: not written", what, e, out[e]);
}

static void
check(const char *what, const float *out, const double *ref, size_t count, double bound)
{
  double rel = rel_error_d(out, ref, count);
  g_test_message("%s: relative error %.3g (bound %.3g)", what, rel, bound);
  if (!(rel <= bound)) {
    g_test_message("FAILED %s: relative error %.3g exceeds %.3g", what, rel, bound);
    g_test_fail();
  }
}

/* Every case, input stored as float32 or bf16, with or without a bn: own:fwd with a
 * float32 and a bf16 output, own:wgrad; each direction's result against the reference. */
static void
test_small_candidates(void)
{
  if (!have_gpu())
    return;
  for (size_t i = 0; i < G_N_ELEMENTS(small_cases); i++) {
    const SmallCase *c = &small_cases[i];
    for (int variant = 0; variant < 4; variant++) {
      gboolean x16 = variant & 1, with_bn = (variant & 2) != 0;
      Small p;
      small_init(&p, c, x16, with_bn);
      g_autofree char *what = g_strdup_printf("n%d %dx%dx%d→%d k%d p%d s%d%s%s", c->n, c->h, c->w,
                                              c->c, c->out_c, c->kernel, c->pad, c->stride,
                                              x16 ? " x16" : "", with_bn ? " bn" : "");
      g_autofree float *out = g_new(float, MAX(p.out, p.weights));
      for (int y16 = 0; y16 < 2; y16++) {
        SmallDevice d;
        small_device_init(&d, &p, (i + variant + y16) % 2 == 0, y16);
        g_autofree char *label = g_strdup_printf("%s own:fwd → %s", what, y16 ? "bf16" : "float32");
        run_exactly(&d, TDM_CONV_FORWARD, "own:fwd", label, out, p.out, y16);
        check(label, out, p.y_ref, p.out, small_bound(p.k, y16));
        if (y16 == 0) {
          g_autofree char *wlabel = g_strdup_printf("%s own:wgrad", what);
          run_exactly(&d, TDM_CONV_WGRAD, "own:wgrad", wlabel, out, p.weights, FALSE);
          check(wlabel, out, p.dw_ref, p.weights, small_bound(p.rows, FALSE));
        }
        small_device_clear(&d);
      }
      small_clear(&p);
    }
  }
}

/* The weight gradient from a dy the bn after wrote as bf16 at the workspace's start;
 * the same bits from two runs, and from a workspace larger than the need. */
static void
test_small_wgrad_bits(void)
{
  if (!have_gpu())
    return;
  const SmallCase c = {8, 56, 56, 3, 64, 7, 3, 2};
  TdmBackend *b = gpu_bf16;
  Small p;
  small_init(&p, &c, FALSE, FALSE);
  SmallDevice d;
  small_device_init(&d, &p, TRUE, FALSE);
  TdmConvArgs probe = d.a;
  probe.work = on_b(b, NULL, 16);
  probe.work_bytes = 16;
  size_t need = tdm_cuda_conv_need_named(b, &probe, TDM_CONV_WGRAD, "own:wgrad");
  tdm_backend_release(b, probe.work);
  /* The layout's reservations (dy as bf16, the weights' room) and the partials. */
  g_assert_cmpuint(need, >, p.out * 2 + p.weights * 2);
  void *work = on_b(b, NULL, need + 4096);
  tdm_backend_to_bf16(b, work, d.dy, p.out);
  g_autofree float *nan = g_new(float, p.out);
  for (size_t e = 0; e < p.out; e++)
    nan[e] = NAN;
  tdm_backend_upload(b, d.dy, nan, p.out * 4); /* not to be read */
  TdmConvArgs a = d.a;
  a.dy16 = work;
  a.work = work;
  a.work_bytes = need + 4096;
  g_autofree float *first = g_new(float, p.weights);
  g_autofree float *again = g_new(float, p.weights);
  for (int run = 0; run < 2; run++) {
    g_assert_true(tdm_cuda_conv_run_named(b, &a, TDM_CONV_WGRAD, "own:wgrad"));
    tdm_backend_download(b, run == 0 ? first : again, d.dw, p.weights * 4);
    assert_ok(b);
  }
  check("own:wgrad from dy16", first, p.dw_ref, p.weights, small_bound(p.rows, FALSE));
  g_assert_cmpint(memcmp(first, again, p.weights * 4), ==, 0);
  tdm_backend_release(b, work);
  small_device_clear(&d);
  small_clear(&p);
}

static gboolean
offered(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir, const char *name)
{
  g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(b, a, dir);
  for (guint i = 0; i < names->len; i++)
    if (g_str_equal(g_ptr_array_index(names, i), name))
      return TRUE;
  return FALSE;
}

/* Offered for bf16 runs of the shapes conv-small-plan.h takes, with an aligned output;
 * not for float32 runs (their bound is float32's), 16 input channels, 24 output
 * channels, stride 3, or a bf16 output at an odd address; never for the input
 * gradient. */
static void
test_small_offered(void)
{
  if (!have_gpu())
    return;
  const SmallCase base = {2, 13, 11, 3, 32, 7, 3, 2};
  Small p;
  small_init(&p, &base, FALSE, FALSE);
  SmallDevice d;
  small_device_init(&d, &p, FALSE, TRUE);
  TdmConvArgs a = d.a;
  a.work = on_b(gpu_bf16, NULL, 16);
  a.work_bytes = 16;
  a.dx = on_b(gpu_bf16, NULL, p.in * 4);
  g_assert_true(offered(gpu_bf16, &a, TDM_CONV_FORWARD, "own:fwd"));
  g_assert_true(offered(gpu_bf16, &a, TDM_CONV_WGRAD, "own:wgrad"));
  g_assert_false(offered(gpu_bf16, &a, TDM_CONV_DGRAD, "own:fwd"));
  g_assert_false(offered(gpu_bf16, &a, TDM_CONV_DGRAD, "own:wgrad"));
  g_assert_false(offered(gpu, &a, TDM_CONV_FORWARD, "own:fwd"));
  g_assert_false(offered(gpu, &a, TDM_CONV_WGRAD, "own:wgrad"));
  /* The forward needs nothing past the layout's reservations (the weights' room):
   * less than the columns of im2col. */
  size_t own = tdm_cuda_conv_need_named(gpu_bf16, &a, TDM_CONV_FORWARD, "own:fwd");
  size_t columns = tdm_cuda_conv_need_named(gpu_bf16, &a, TDM_CONV_FORWARD, "im2col");
  g_test_message("own:fwd needs %zu bytes, im2col %zu", own, columns);
  g_assert_cmpuint(own, >, 0);
  g_assert_cmpuint(own, <=, p.weights * 2 + 256);
  g_assert_cmpuint(own, <, columns);
  TdmConvArgs odd = a;
  odd.y16 = (uint16_t *)((char *)d.y + 2);
  odd.shape.h = base.h - 1; /* the output fits after the shift */
  g_assert_false(offered(gpu_bf16, &odd, TDM_CONV_FORWARD, "own:fwd"));
  const TdmConvShape refused[] = {
    {2, 13, 11, 16, 32, 7, 3, 2},
    {2, 13, 11, 3, 24, 7, 3, 2},
    {2, 13, 11, 3, 32, 7, 3, 3},
    {2, 13, 11, 3, 32, 9, 3, 2},
    {2, 13, 11, 3, 32, 7, 4, 2},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(refused); i++) {
    TdmConvArgs r = a;
    r.shape = refused[i];
    g_assert_false(offered(gpu_bf16, &r, TDM_CONV_FORWARD, "own:fwd"));
    g_assert_false(offered(gpu_bf16, &r, TDM_CONV_WGRAD, "own:wgrad"));
  }
  tdm_backend_release(gpu_bf16, a.work);
  tdm_backend_release(gpu_bf16, a.dx);
  small_device_clear(&d);
  small_clear(&p);
}

/* TANDEM_CONV=own: the engine prefers our kernels wherever they take the call, and its
 * forward and backward (weight gradient) give the reference's results. */
static void
test_small_forced(void)
{
  if (!have_gpu())
    return;
  const SmallCase c = {4, 30, 26, 3, 64, 7, 3, 2};
  Small p;
  small_init(&p, &c, FALSE, FALSE);
  g_setenv("TANDEM_CONV", "own", TRUE);
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  float *x = on_b(b, p.x, p.in * 4), *w = on_b(b, p.w, p.weights * 4);
  float *dy = on_b(b, p.dy, p.out * 4), *dw = poisoned_b(b, p.weights);
  uint16_t *y16 = on_b(b, NULL, p.out * 2);
  TdmConvArgs a = {.shape = p.s, .x = x, .w = w, .y16 = y16, .dy = dy, .dw = dw};
  size_t need = 0;
  a.work_needed = &need;
  /* The replica's way: from a small workspace, grown as the engine asks. */
  void *work = NULL;
  gboolean ran = FALSE;
  for (int attempt = 0; attempt < 3 && !ran; attempt++) {
    a.work = work = on_b(b, NULL, MAX(need, 256));
    a.work_bytes = MAX(need, 256);
    ran = tdm_backend_conv_engine_forward(b, &a);
    if (!ran)
      tdm_backend_release(b, work);
  }
  g_assert_true(ran);
  g_assert_cmpstr(tdm_cuda_conv_chosen(b, &a, TDM_CONV_FORWARD), ==, "own:fwd");
  g_autofree uint16_t *bits = g_new(uint16_t, p.out);
  g_autofree float *y = g_new(float, p.out);
  tdm_backend_download(b, bits, y16, p.out * 2);
  assert_ok(b);
  for (size_t e = 0; e < p.out; e++)
    y[e] = bf16_value(bits[e]);
  check("TANDEM_CONV=own forward", y, p.y_ref, p.out, small_bound(p.k, TRUE));
  tdm_backend_release(b, work);
  ran = FALSE;
  for (int attempt = 0; attempt < 3 && !ran; attempt++) {
    a.work = work = on_b(b, NULL, MAX(need, 256));
    a.work_bytes = MAX(need, 256);
    ran = tdm_backend_conv_engine_backward(b, &a);
    if (!ran)
      tdm_backend_release(b, work);
  }
  g_assert_true(ran);
  g_assert_cmpstr(tdm_cuda_conv_chosen(b, &a, TDM_CONV_WGRAD), ==, "own:wgrad");
  g_autofree float *dwh = g_new(float, p.weights);
  tdm_backend_download(b, dwh, dw, p.weights * 4);
  assert_ok(b);
  check("TANDEM_CONV=own weight gradient", dwh, p.dw_ref, p.weights, small_bound(p.rows, FALSE));
  TdmConvChoices counts;
  tdm_backend_conv_choices(b, &counts);
  g_assert_cmpint(counts.own, ==, 2);
  void *all[] = {x, w, dy, dw, y16, work};
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(b, all[i]);
  tdm_backend_free(b);
  g_unsetenv("TANDEM_CONV");
  small_clear(&p);
}

/* --exact without cuDNN (TANDEM_CUDNN=0): the rule takes our own kernels over im2col
 * (tdm-backend-cuda-conv-engine.c: cuDNN's first plan, else ours, else im2col), and the
 * engine's backward gives the same bits twice. */
static void
test_small_exact(void)
{
  if (!have_gpu())
    return;
  const SmallCase c = {6, 40, 36, 3, 64, 7, 3, 2};
  Small p;
  small_init(&p, &c, FALSE, FALSE);
  g_setenv("TANDEM_CUDNN", "0", TRUE);
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  b->deterministic = true;
  float *x = on_b(b, p.x, p.in * 4), *w = on_b(b, p.w, p.weights * 4);
  float *dy = on_b(b, p.dy, p.out * 4), *dw = poisoned_b(b, p.weights);
  float *y = poisoned_b(b, p.out);
  TdmConvArgs a = {.shape = p.s, .x = x, .w = w, .y = y, .dy = dy, .dw = dw};
  TdmConvArgs probe = a;
  probe.work = on_b(b, NULL, 16);
  probe.work_bytes = 16;
  g_assert_cmpstr(tdm_cuda_conv_chosen(b, &probe, TDM_CONV_FORWARD), ==, "own:fwd");
  g_assert_cmpstr(tdm_cuda_conv_chosen(b, &probe, TDM_CONV_WGRAD), ==, "own:wgrad");
  tdm_backend_release(b, probe.work);
  size_t need = MAX(tdm_cuda_conv_need_named(b, &a, TDM_CONV_FORWARD, "own:fwd"),
                    tdm_cuda_conv_need_named(b, &a, TDM_CONV_WGRAD, "own:wgrad"));
  a.work = on_b(b, NULL, need);
  a.work_bytes = need;
  g_assert_true(tdm_backend_conv_engine_forward(b, &a));
  g_autofree float *out = g_new(float, MAX(p.out, p.weights));
  tdm_backend_download(b, out, y, p.out * 4);
  assert_ok(b);
  check("--exact forward", out, p.y_ref, p.out, small_bound(p.k, FALSE));
  g_autofree float *first = g_new(float, p.weights);
  for (int run = 0; run < 2; run++) {
    g_assert_true(tdm_backend_conv_engine_backward(b, &a));
    tdm_backend_download(b, run == 0 ? first : out, dw, p.weights * 4);
    assert_ok(b);
  }
  g_assert_cmpint(memcmp(first, out, p.weights * 4), ==, 0);
  check("--exact weight gradient", first, p.dw_ref, p.weights, small_bound(p.rows, FALSE));
  void *all[] = {x, w, dy, dw, y, a.work};
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(b, all[i]);
  tdm_backend_free(b);
  g_unsetenv("TANDEM_CUDNN");
  small_clear(&p);
}

void
test_cuda_conv_add_small(void)
{
  g_test_add_func("/cuda-conv/small/candidates", test_small_candidates);
  g_test_add_func("/cuda-conv/small/wgrad-bits", test_small_wgrad_bits);
  g_test_add_func("/cuda-conv/small/offered", test_small_offered);
  g_test_add_func("/cuda-conv/small/forced", test_small_forced);
  g_test_add_func("/cuda-conv/small/exact", test_small_exact);
}

#endif
