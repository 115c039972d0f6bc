/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-layers-stem-bn.c — the stem's backward in two passes on the GPU
 * (kernels/conv-stem-bn.cu: tdm_k_stem_bn_sums(), tdm_k_stem_bn_dx_wgrad(); the CUDA
 * backend's slots) against the CPU backend's passes (its four steps composed: the
 * reference) and against today's GPU path (own:fwd's bf16 output, bn_backward_sums,
 * bn_backward_dx_bf16, conv_small_wgrad), on fresh random inputs: the CIFAR stem at 32
 * and 64 px, odd sizes with partial tiles, a 5×5 kernel of one channel (two pixel
 * groups), eight channels at stride 2 and 128 outputs (two fragments a warp, two channel
 * tiles); n 2 to 4; the bn with and without its ReLU.
 *
 * The image and the weights are multiples of 1/16 and 1/64 of at most 1 (bf16 values
 * whose products and every partial sum of the stem's reduction are exact in float32),
 * so the stem's output is the same bf16 value on the CPU and in every GPU kernel
 * whatever the order of its sums, and the ReLU's mask agrees bit for bit (operands
 * rounded by the GPU and not by the CPU flipped masks in an earlier test; checked first:
 * own:fwd's output against the CPU's). Checks: dγ, dβ within the float runs' rounding
 * of the CPU's and of bn_backward_sums's (each side adds at most 16 values in float
 * before adding in double: 32 · 2⁻²⁴ · Σ|terms| + their float rounding), and the same
 * bits twice; dw from today's sums bit for bit against conv_small_wgrad's over
 * bn_backward_dx_bf16's dx16 (the same dx16 bits, the same splits and order); dw from
 * the CPU's sums against the CPU's within twice the weight gradient's float32 bound,
 * 2 · 32 · 2⁻²⁴ · √rows (the same dx16 bits on both: only the sums' orders differ);
 * the backend's slots taken only after own:fwd ran for the stem's key, not after im2col,
 * and their results the launchers' bits. Registered by test-cuda-layers.c; skips
 * without a GPU.
 */
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "test-cuda-layers.h"

#include "conv-small-plan.h"
#include "tdm-backend-cuda.h"
#include "tdm-kernels.h"

typedef struct {
  int n, h, w, c, out_c, kernel, pad, stride;
} StemCase;

static const StemCase stem_cases[] = {
  {2, 32, 32, 3, 64, 3, 1, 1},   /* the CIFAR stem at 32 px */
  {3, 64, 64, 3, 64, 3, 1, 1},   /* at 64 px */
  {2, 29, 31, 3, 64, 3, 1, 1},   /* odd sizes: partial tiles */
  {4, 17, 15, 1, 64, 5, 2, 1},   /* 5×5, one channel: two pixel groups */
  {2, 19, 23, 8, 128, 3, 1, 2},  /* 72 columns: two fragments a warp; two channel tiles */
};

/* The host side of a case. */
typedef struct {
  TdmConvShape s;
  int oh, ow;
  size_t rows, in, out, weights;
  float *x, *w, *p;  /* image, weights, bn (mean, invstd, gamma, beta) */
  uint16_t *w16, *dy16;
} StemHost;

static float
grid_value(int steps)
{
  return (float)g_test_rand_int_range(-steps, steps + 1) / (float)steps;
}

static void
host_init(StemHost *h, const StemCase *c)
{
  memset(h, 0, sizeof *h);
  h->s = (TdmConvShape){c->n, c->h, c->w, c->c, c->out_c, c->kernel, c->pad, c->stride};
  h->oh = tdm_conv_out_h(&h->s);
  h->ow = tdm_conv_out_w(&h->s);
  h->rows = (size_t)c->n * h->oh * h->ow;
  h->in = (size_t)c->n * c->h * c->w * c->c;
  h->out = h->rows * c->out_c;
  h->weights = (size_t)c->out_c * c->kernel * c->kernel * c->c;
  h->x = g_new(float, h->in);
  for (size_t i = 0; i < h->in; i++)
    h->x[i] = grid_value(16);
  h->w = g_new(float, h->weights);
  h->w16 = g_new(uint16_t, h->weights);
  for (size_t i = 0; i < h->weights; i++) {
    h->w[i] = grid_value(64);
    h->w16[i] = bf16_bits(h->w[i]);
    g_assert_cmpfloat(bf16_value(h->w16[i]), ==, h->w[i]);
  }
  h->dy16 = g_new(uint16_t, h->out);
  for (size_t i = 0; i < h->out; i++)
    h->dy16[i] = bf16_bits((float)g_test_rand_double_range(-1, 1));
  /* The statistics near the output's own (its values are about ±2), the ReLU cutting
   * some of every channel. */
  int oc = c->out_c;
  h->p = g_new(float, 4 * (size_t)oc);
  for (int o = 0; o < oc; o++) {
    h->p[o] = (float)g_test_rand_double_range(-0.5, 0.5);
    h->p[oc + o] = (float)g_test_rand_double_range(0.4, 1.5);
    h->p[2 * oc + o] = (float)g_test_rand_double_range(0.5, 1.5);
    h->p[3 * oc + o] = (float)g_test_rand_double_range(-0.5, 0.5);
  }
}

static void
host_clear(StemHost *h)
{
  g_free(h->x);
  g_free(h->w);
  g_free(h->p);
  g_free(h->w16);
  g_free(h->dy16);
}

/* The operands on backend b (host memory for the CPU), spare and work sized. */
static TdmStemBn
stem_args(TdmBackend *b, const StemHost *h, bool relu, size_t work_bytes)
{
  int oc = h->s.out_c;
  float *p = on_b(b, h->p, 4 * (size_t)oc * 4);
  TdmStemBn a = {
      .shape = h->s,
      .x = on_b(b, h->x, h->in * 4),
      .x_type = TDM_DTYPE_F32,
      .w = on_b(b, h->w, h->weights * 4),
      .w16 = on_b(b, h->w16, h->weights * 2),
      .mean = p,
      .invstd = p + oc,
      .gamma = p + 2 * oc,
      .beta = p + 3 * oc,
      .relu = relu,
      .dy = on_b(b, h->dy16, h->out * 2),
      .spare = on_b(b, NULL, h->out * 2),
      .work = on_b(b, NULL, MAX(work_bytes, 16)),
      .work_bytes = work_bytes,
  };
  return a;
}

static void
stem_args_clear(TdmBackend *b, TdmStemBn *a)
{
  void *all[] = {(void *)a->mean, (void *)a->x, (void *)a->w, (void *)a->w16, (void *)a->dy,
                 a->spare, a->work};
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(b, all[i]);
}

/* |got − want| per channel within the float runs' rounding: 32 · 2⁻²⁴ of the sum of
 * the terms' magnitudes (terms[ch]), and both sides' final float rounding. */
static void
check_sums(const char *what, const float *got, const float *want, const double *terms, int c)
{
  int bad = 0;
  double worst = 0.0;
  for (int ch = 0; ch < c; ch++) {
    double d = fabs((double)got[ch] - want[ch]);
    double bound = 32.0 * 0x1p-24 * terms[ch] + 0x1p-22 * fabs(want[ch]) + 1e-30;
    worst = MAX(worst, d / bound);
    if (!(d <= bound) && bad++ == 0)
      g_test_message("FAILED %s: channel %d: %.9g against %.9g (bound %.3g)", what, ch,
                     got[ch], want[ch], bound);
  }
  g_test_message("%s: worst %.3g of the bound", what, worst);
  if (bad > 0)
    g_test_fail();
}

static double
rel_norm(const float *got, const float *want, size_t n)
{
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - want[i];
    num += d * d;
    den += (double)want[i] * want[i];
  }
  return sqrt(num) / (den > 0.0 ? sqrt(den) : 1.0);
}

static void
download_floats(float *host, const float *dev, size_t n)
{
  tdm_backend_download(gpu_bf16, host, dev, n * 4);
  assert_ok(gpu_bf16);
}

/* One case, one ReLU setting. */
static void
stem_case(const StemCase *c, bool relu)
{
  TdmBackend *g = gpu_bf16;
  cudaStream_t stream = tdm_backend_cuda_stream(g);
  g_autofree char *what = g_strdup_printf("n%d %dx%dx%d→%d k%d p%d s%d%s", c->n, c->h, c->w,
                                          c->c, c->out_c, c->kernel, c->pad, c->stride,
                                          relu ? " relu" : "");
  StemHost h;
  host_init(&h, c);
  int oc = c->out_c, k = c->kernel * c->kernel * c->c;
  TdmKStemBnPlan plan = {0};
  g_assert_true(tdm_k_stem_bn_plan(c->n, c->h, c->w, c->c, oc, c->kernel, c->pad, c->stride,
                                   &plan));

  /* The CPU's passes (a bf16 CPU backend), the reference. */
  g_autoptr(GError) error = NULL;
  TdmBackend *cpu16 = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  size_t cpu_work = 0;
  g_assert_true(tdm_backend_stem_bn_takes(cpu16, &h.s, TDM_DTYPE_F32, &cpu_work));
  TdmStemBn ac = stem_args(cpu16, &h, relu, cpu_work);
  g_autofree float *sums_cpu = g_new(float, 2 * (size_t)oc);
  g_autofree float *dw_cpu = g_new(float, h.weights);
  g_autofree uint16_t *x16 = g_new(uint16_t, h.out);
  tdm_backend_stem_bn_sums(cpu16, &ac, sums_cpu, sums_cpu + oc);
  tdm_backend_download(cpu16, x16, ac.spare, h.out * 2);
  float inv_count = 1.0f / (float)h.rows;
  tdm_backend_stem_bn_dx_wgrad(cpu16, &ac, sums_cpu, sums_cpu + oc, inv_count, dw_cpu);
  assert_ok(cpu16);

  /* The terms' magnitudes for the sums' bound (the mask left out: a larger bound). */
  g_autofree double *terms = g_new0(double, 2 * (size_t)oc);
  for (size_t r = 0; r < h.rows; r++)
    for (int o = 0; o < oc; o++) {
      double dy = fabs(bf16_value(h.dy16[r * oc + o]));
      double xhat = ((double)bf16_value(x16[r * oc + o]) - h.p[o]) * h.p[oc + o];
      terms[o] += dy * fabs(xhat);
      terms[oc + o] += dy;
    }

  /* Today's GPU path. */
  TdmStemBn ag = stem_args(g, &h, relu, plan.scratch_bytes);
  uint16_t *y16 = on_b(g, NULL, h.out * 2), *dx16 = on_b(g, NULL, h.out * 2);
  float *sums_old = on_b(g, NULL, 2 * (size_t)oc * 4), *sums_new = on_b(g, NULL, 2 * (size_t)oc * 4);
  float *sums_ref = on_b(g, sums_cpu, 2 * (size_t)oc * 4);
  float *dw_old = on_b(g, NULL, h.weights * 4), *dw_new = on_b(g, NULL, h.weights * 4);
  void *partials = on_b(g, NULL, plan.small.partial_bytes);
  g_assert_cmpint(tdm_k_conv_small_forward(y16, true, ag.x, false, NULL, NULL, NULL, NULL,
                                           false, ag.w16, c->n, c->h, c->w, c->c, oc,
                                           c->kernel, c->pad, c->stride, stream),
                  ==, cudaSuccess);
  g_autofree uint16_t *y16_host = g_new(uint16_t, h.out);
  tdm_backend_download(g, y16_host, y16, h.out * 2);
  assert_ok(g);
  size_t differ = 0;
  for (size_t i = 0; i < h.out; i++)
    differ += y16_host[i] != x16[i];
  if (differ != 0) {
    g_test_message("FAILED %s: own:fwd's output differs from the CPU's in %zu of %zu values "
                   "(the test's inputs should make them exact)", what, differ, h.out);
    g_test_fail();
  }
  tdm_backend_bn_backward_sums(g, sums_old, sums_old + oc, ag.dy, TDM_DTYPE_BF16, y16,
                               TDM_DTYPE_BF16, ag.mean, ag.invstd, ag.gamma, ag.beta, relu,
                               (int)h.rows, oc);
  tdm_backend_bn_backward_dx_bf16(g, dx16, ag.dy, TDM_DTYPE_BF16, y16, TDM_DTYPE_BF16, ag.mean,
                                  ag.invstd, ag.gamma, ag.beta, relu, sums_old, sums_old + oc,
                                  inv_count, (int)h.rows, oc);
  g_assert_cmpint(tdm_k_conv_small_wgrad(dw_old, partials, dx16, ag.x, false, NULL, NULL, NULL,
                                         NULL, false, c->n, c->h, c->w, c->c, oc, c->kernel,
                                         c->pad, c->stride, stream),
                  ==, cudaSuccess);

  /* The two passes: the sums twice (the same bits), dw from today's sums and from the
   * CPU's. */
  g_autofree float *got = g_new(float, 2 * (size_t)oc);
  g_autofree float *again = g_new(float, 2 * (size_t)oc);
  g_autofree float *old = g_new(float, 2 * (size_t)oc);
  for (int run = 0; run < 2; run++) {
    poison_b(g, sums_new, 2 * (size_t)oc);
    g_assert_cmpint(tdm_k_stem_bn_sums(sums_new, sums_new + oc, ag.dy, ag.x, ag.w16, ag.mean,
                                       ag.invstd, ag.gamma, ag.beta, relu, c->n, c->h, c->w,
                                       c->c, oc, c->kernel, c->pad, c->stride, ag.work,
                                       ag.work_bytes, stream),
                    ==, cudaSuccess);
    download_floats(run == 0 ? got : again, sums_new, 2 * (size_t)oc);
  }
  g_assert_cmpint(memcmp(got, again, 2 * (size_t)oc * 4), ==, 0);
  download_floats(old, sums_old, 2 * (size_t)oc);
  g_autofree char *l1 = g_strdup_printf("%s: dγ, dβ against the CPU's", what);
  g_autofree char *l2 = g_strdup_printf("%s: dγ, dβ against bn_backward_sums's", what);
  check_sums(l1, got, sums_cpu, terms, 2 * oc);
  check_sums(l2, got, old, terms, 2 * oc);

  g_autofree float *dw = g_new(float, h.weights);
  g_autofree float *dw_ref = g_new(float, h.weights);
  poison_b(g, dw_new, h.weights);
  g_assert_cmpint(tdm_k_stem_bn_dx_wgrad(dw_new, ag.dy, ag.x, ag.w16, ag.mean, ag.invstd,
                                         ag.gamma, ag.beta, relu, sums_old, sums_old + oc,
                                         inv_count, c->n, c->h, c->w, c->c, oc, c->kernel,
                                         c->pad, c->stride, ag.work, ag.work_bytes, stream),
                  ==, cudaSuccess);
  download_floats(dw, dw_new, h.weights);
  download_floats(dw_ref, dw_old, h.weights);
  if (memcmp(dw, dw_ref, h.weights * 4) != 0) {
    size_t first = 0;
    while (first < h.weights && memcmp(dw + first, dw_ref + first, 4) == 0)
      first++;
    g_test_message("FAILED %s: dw differs from conv_small_wgrad's over bn_backward_dx_bf16's "
                   "dx16 (first at %zu: %.9g against %.9g; relative in norm %.3g)",
                   what, first, dw[first], dw_ref[first], rel_norm(dw, dw_ref, h.weights));
    g_test_fail();
  }
  poison_b(g, dw_new, h.weights);
  g_assert_cmpint(tdm_k_stem_bn_dx_wgrad(dw_new, ag.dy, ag.x, ag.w16, ag.mean, ag.invstd,
                                         ag.gamma, ag.beta, relu, sums_ref, sums_ref + oc,
                                         inv_count, c->n, c->h, c->w, c->c, oc, c->kernel,
                                         c->pad, c->stride, ag.work, ag.work_bytes, stream),
                  ==, cudaSuccess);
  download_floats(dw, dw_new, h.weights);
  double rel = rel_norm(dw, dw_cpu, h.weights);
  double bound = 2.0 * 32.0 * 0x1p-24 * sqrt((double)h.rows);
  g_test_message("%s: dw against the CPU's: relative error %.3g (bound %.3g), k %d", what, rel,
                 bound, k);
  if (!(rel <= bound)) {
    g_test_message("FAILED %s: dw against the CPU's: %.3g exceeds %.3g", what, rel, bound);
    g_test_fail();
  }

  void *all[] = {y16, dx16, sums_old, sums_new, sums_ref, dw_old, dw_new, partials};
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(g, all[i]);
  stem_args_clear(g, &ag);
  stem_args_clear(cpu16, &ac);
  tdm_backend_free(cpu16);
  host_clear(&h);
}

static void
test_stem_bn_kernels(void)
{
  if (!have_gpu())
    return;
  for (size_t i = 0; i < G_N_ELEMENTS(stem_cases); i++)
    for (int relu = 0; relu < 2; relu++)
      stem_case(&stem_cases[i], relu == 1);
}

/* Shapes the plan refuses: the launchers answer cudaErrorInvalidValue (the caller keeps
 * its steps), never a launch. Pure C, but needs the launchers: here. */
static void
test_stem_bn_refused(void)
{
  if (!have_gpu())
    return;
  const StemCase refused[] = {
    {2, 32, 32, 3, 32, 3, 1, 1},   /* 32 outputs: not a channel tile of 64 */
    {2, 32, 32, 8, 64, 5, 2, 1},   /* 200 columns */
    {2, 32, 32, 16, 64, 3, 1, 1},  /* 16 channels */
  };
  for (size_t i = 0; i < G_N_ELEMENTS(refused); i++) {
    const StemCase *c = &refused[i];
    TdmKStemBnPlan p;
    g_assert_false(tdm_k_stem_bn_plan(c->n, c->h, c->w, c->c, c->out_c, c->kernel, c->pad,
                                      c->stride, &p));
    float dummy[4];
    g_assert_cmpint(tdm_k_stem_bn_sums(dummy, dummy, (const uint16_t *)dummy, dummy,
                                       (const uint16_t *)dummy, dummy, dummy, dummy, dummy,
                                       true, c->n, c->h, c->w, c->c, c->out_c, c->kernel,
                                       c->pad, c->stride, dummy, 16, NULL),
                    ==, cudaErrorInvalidValue);
  }
}

/* The backend's slots: taken only once own:fwd ran the stem's forward for its key (not
 * after im2col ran it, nor before any forward), and then the launchers' bits. */
static void
test_stem_bn_follows_forward(void)
{
  if (!have_gpu())
    return;
  TdmBackend *g = gpu_bf16;
  const StemCase c = {2, 32, 32, 3, 64, 3, 1, 1};
  StemHost h;
  host_init(&h, &c);
  TdmKStemBnPlan plan = {0};
  g_assert_true(tdm_k_stem_bn_plan(c.n, c.h, c.w, c.c, c.out_c, c.kernel, c.pad, c.stride,
                                   &plan));
  size_t bytes = 0, taken_bytes = 0;
  TdmConvShape other = h.s;
  other.n = 3; /* a key no forward ran */
  g_assert_false(tdm_backend_stem_bn_takes(g, &other, TDM_DTYPE_F32, &bytes));
  TdmStemBn a = stem_args(g, &h, true, plan.scratch_bytes);
  uint16_t *y16 = on_b(g, NULL, h.out * 2);
  TdmConvArgs fa = {.shape = h.s, .x = a.x, .x_type = TDM_DTYPE_F32, .w = (float *)a.w,
                    .w16 = a.w16, .y16 = y16};
  const char *names[] = {"im2col", "own:fwd", "im2col", "own:fwd"};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
    TdmConvArgs probe = fa;
    probe.work = on_b(g, NULL, 16);
    probe.work_bytes = 16;
    size_t need = tdm_cuda_conv_need_named(g, &probe, TDM_CONV_FORWARD, names[i]);
    tdm_backend_release(g, probe.work);
    g_assert_cmpuint(need, >, 0);
    fa.work = on_b(g, NULL, need);
    fa.work_bytes = need;
    g_assert_true(tdm_cuda_conv_run_named(g, &fa, TDM_CONV_FORWARD, names[i]));
    tdm_backend_release(g, fa.work);
    gboolean own = g_str_equal(names[i], "own:fwd");
    g_assert_cmpint(tdm_backend_stem_bn_takes(g, &h.s, TDM_DTYPE_F32, &bytes), ==, own);
    if (own)
      taken_bytes = bytes;
    g_assert_false(tdm_backend_stem_bn_takes(g, &h.s, TDM_DTYPE_BF16, NULL));
  }
  g_assert_cmpuint(taken_bytes, ==, plan.scratch_bytes);
  int oc = c.out_c;
  float *sums = on_b(g, NULL, 4 * (size_t)oc * 4);
  float *dw = on_b(g, NULL, 2 * h.weights * 4);
  cudaStream_t stream = tdm_backend_cuda_stream(g);
  tdm_backend_stem_bn_sums(g, &a, sums, sums + oc);
  g_assert_cmpint(tdm_k_stem_bn_sums(sums + 2 * oc, sums + 3 * oc, a.dy, a.x, a.w16, a.mean,
                                     a.invstd, a.gamma, a.beta, true, c.n, c.h, c.w, c.c, oc,
                                     c.kernel, c.pad, c.stride, a.work, a.work_bytes, stream),
                  ==, cudaSuccess);
  float inv_count = 1.0f / (float)h.rows;
  tdm_backend_stem_bn_dx_wgrad(g, &a, sums, sums + oc, inv_count, dw);
  g_assert_cmpint(tdm_k_stem_bn_dx_wgrad(dw + h.weights, a.dy, a.x, a.w16, a.mean, a.invstd,
                                         a.gamma, a.beta, true, sums, sums + oc, inv_count,
                                         c.n, c.h, c.w, c.c, oc, c.kernel, c.pad, c.stride,
                                         a.work, a.work_bytes, stream),
                  ==, cudaSuccess);
  g_autofree float *host = g_new(float, MAX(4 * (size_t)oc, 2 * h.weights));
  download_floats(host, sums, 4 * (size_t)oc);
  g_assert_cmpint(memcmp(host, host + 2 * oc, 2 * (size_t)oc * 4), ==, 0);
  download_floats(host, dw, 2 * h.weights);
  g_assert_cmpint(memcmp(host, host + h.weights, h.weights * 4), ==, 0);
  tdm_backend_release(g, y16);
  tdm_backend_release(g, sums);
  tdm_backend_release(g, dw);
  stem_args_clear(g, &a);
  host_clear(&h);
}

void
test_cuda_layers_add_stem_bn(void)
{
  /* The CUDA backend takes the passes only when asked until they have run on a GPU
   * (tdm-backend-cuda-stem-bn.c's passes_wanted()). */
  g_setenv("TANDEM_STEM_BN", "1", TRUE);
  g_test_add_func("/cuda-layers/stem-bn", test_stem_bn_kernels);
  g_test_add_func("/cuda-layers/stem-bn-refused", test_stem_bn_refused);
  g_test_add_func("/cuda-layers/stem-bn-follows-forward", test_stem_bn_follows_forward);
}

#endif
