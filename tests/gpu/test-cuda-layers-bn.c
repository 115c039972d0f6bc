/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-layers-bn.c — batch normalization's per-channel sums on the GPU (the
 * statistics' shifted sums, bn_moments, and the backward's Σdy·xhat and Σdy,
 * bn_backward_sums), one launch that reduces its own partials (kernels/bn-sums.cu): against
 * the CPU reference, for float32 and bf16 inputs, channel counts that take each
 * vector width (3, 17, 64, 512, 1000, a very wide layer), rows that make one group or
 * many sets of them; and bit for bit against itself — repeated (the arrival counters
 * left at zero), through misaligned pointers, and from float32 copies of bf16 values —
 * since exact mode and synchronized replicas need the same bits every time. And the
 * elementwise passes through misaligned pointers (their scalar accesses), and walked
 * downwards (tdm-kernels.h's `descending`, TANDEM_DESCENDING) with the bits of the upward
 * walk. And a bn's statistics in the moments' launch (bn_moments_stats, no second
 * launch): the bits of bn_moments then bn_stats on the GPU, in saved, the slot and the
 * running averages, and the CPU's values. Registered by test-cuda-layers.c.
 */
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "test-cuda-layers.h"

#include "tdm-backend-cuda.h"
#include "tdm-bn-moments.h"
#include "tdm-kernels.h"
#include "tdm-network.h" /* TDM_BN_EPS, TDM_BN_MOMENTUM */

/* Device bytes read back. */
static void *
fetched(const void *dev, size_t bytes)
{
  void *out = g_malloc(bytes);
  tdm_backend_download(gpu, out, dev, bytes);
  assert_ok(gpu);
  return out;
}

static void
expect_same(const char *what, const void *a, const void *b, size_t bytes)
{
  g_autofree void *ha = fetched(a, bytes), *hb = fetched(b, bytes);
  if (memcmp(ha, hb, bytes) != 0) {
    g_test_message("FAILED %s: the bits differ", what);
    g_test_fail();
  }
}

/* A device copy of n elements of `size` bytes that starts `shift` elements into its
 * allocation (shift 1: off every vector alignment); *base is what to release. */
static void *
placed(const void *host, size_t n, size_t size, size_t shift, void **base)
{
  *base = on(NULL, (n + 8) * size);
  char *at = (char *)*base + shift * size;
  tdm_backend_upload(gpu, at, host, n * size);
  return at;
}

/* The statistics and the backward sums of rows × c values, x (and dy) float32 or bf16
 * values; slot 1 of 3 for the moments, as a synchronized replica writes them. */
static void
sums_case(int rows, int c, bool bf16, bool relu)
{
  size_t n = (size_t)rows * c;
  g_autofree float *x = random_floats(n, -1, 1), *dy = random_floats(n, -1, 1);
  for (size_t i = 0; i < n; i++)
    x[i] = x[i] * (1.0f + (float)(i % c) * 0.01f) + 0.25f * (float)(i % 5);
  g_autofree uint16_t *x16 = g_new(uint16_t, n), *dy16 = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++) {
    x[i] = bf16_value(x16[i] = bf16_bits(x[i]));
    dy[i] = bf16_value(dy16[i] = bf16_bits(dy[i]));
  }
  const void *hx = bf16 ? (const void *)x16 : x, *hdy = bf16 ? (const void *)dy16 : dy;
  TdmDtype type = bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
  size_t size = bf16 ? 2 : 4;
  /* mean, invstd, gamma, beta: near the data's statistics, so xhat is of order 1. */
  g_autofree float *p = random_floats(4 * (size_t)c, 0.5, 1.5);
  for (int ch = 0; ch < c; ch++) {
    p[ch] = 0.5f * p[ch] - 0.25f + 0.5f;
    p[3 * c + ch] -= 1.0f;
  }
  g_autofree char *tag =
      g_strdup_printf("%d×%d %s%s", rows, c, bf16 ? "bf16" : "float32", relu ? " relu" : "");

  /* The CPU reference. */
  const size_t slot = TDM_BN_SLOT_FLOATS(c);
  g_autofree float *slots_ref = g_new(float, slot), *sums_ref = g_new(float, 2 * (size_t)c);
  tdm_backend_bn_moments(cpu, slots_ref, hx, type, rows, c, 0, 1);
  tdm_backend_bn_backward_sums(cpu, sums_ref, sums_ref + c, hdy, type, hx, type, p, p + c,
                               p + 2 * (size_t)c, p + 3 * (size_t)c, relu, rows, c);
  assert_ok(cpu);

  void *xbase, *dybase, *xmbase, *dymbase;
  void *dx = placed(hx, n, size, 0, &xbase), *ddy = placed(hdy, n, size, 0, &dybase);
  void *dxm = placed(hx, n, size, 1, &xmbase), *ddym = placed(hdy, n, size, 1, &dymbase);
  float *dp = on(p, 4 * (size_t)c * 4);
  float *slots[3], *sums[3];
  for (int k = 0; k < 3; k++) {
    slots[k] = poisoned(3 * slot);
    sums[k] = poisoned(2 * (size_t)c);
  }
  /* Twice aligned, once misaligned (vector loads off, the same order of additions). */
  for (int k = 0; k < 3; k++) {
    const void *xa = k < 2 ? dx : dxm, *dya = k < 2 ? ddy : ddym;
    tdm_backend_bn_moments(gpu, slots[k], xa, type, rows, c, 1, 3);
    tdm_backend_bn_backward_sums(gpu, sums[k], sums[k] + c, dya, type, xa, type, dp, dp + c,
                                 dp + 2 * (size_t)c, dp + 3 * (size_t)c, relu, rows, c);
  }

  g_autofree float *zeros = g_new0(float, slot);
  g_autofree char *w1 = g_strdup_printf("bn_moments other slots %s", tag);
  check_close(w1, slots[0], zeros, slot, 0.0);
  check_close(w1, slots[0] + 2 * slot, zeros, slot, 0.0);
  g_autofree char *w2 = g_strdup_printf("bn_moments mean %s", tag);
  check_close(w2, slots[0] + slot, slots_ref, c, TOL);
  g_autofree char *w3 = g_strdup_printf("bn_moments M2 and count %s", tag);
  check_close(w3, slots[0] + slot + 2 * c, slots_ref + 2 * c, c + 2, TOL);
  g_autofree char *w4 = g_strdup_printf("bn_backward_sums %s", tag);
  check_close(w4, sums[0], sums_ref, 2 * (size_t)c, TOL);
  for (int k = 1; k < 3; k++) {
    g_autofree char *w5 = g_strdup_printf("bn_moments %s, %s", tag,
                                          k == 1 ? "repeated" : "misaligned");
    expect_same(w5, slots[0], slots[k], 3 * slot * 4);
    g_autofree char *w6 = g_strdup_printf("bn_backward_sums %s, %s", tag,
                                          k == 1 ? "repeated" : "misaligned");
    expect_same(w6, sums[0], sums[k], 2 * (size_t)c * 4);
  }
  /* A bf16 input gives the bits of its values widened to float32. */
  if (bf16) {
    float *fx = on(x, n * 4), *fdy = on(dy, n * 4);
    float *fslots = poisoned(3 * slot), *fsums = poisoned(2 * (size_t)c);
    tdm_backend_bn_moments(gpu, fslots, fx, TDM_DTYPE_F32, rows, c, 1, 3);
    tdm_backend_bn_backward_sums(gpu, fsums, fsums + c, fdy, TDM_DTYPE_F32, fx, TDM_DTYPE_F32,
                                 dp, dp + c, dp + 2 * (size_t)c, dp + 3 * (size_t)c, relu, rows,
                                 c);
    g_autofree char *w7 = g_strdup_printf("bn sums %s against its float32 values", tag);
    expect_same(w7, slots[0], fslots, 3 * slot * 4);
    expect_same(w7, sums[0], fsums, 2 * (size_t)c * 4);
    void *more[] = {fx, fdy, fslots, fsums};
    for (guint i = 0; i < G_N_ELEMENTS(more); i++)
      release(more[i]);
  }
  void *all[] = {xbase, dybase, xmbase, dymbase, dp, slots[0], slots[1], slots[2],
                 sums[0], sums[1], sums[2]};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    release(all[i]);
}

/* bn_moments_stats of rows × c values (float32 or bf16; running averages or none)
 * against the two launches it stands for, bit for bit, twice (the arrival counters
 * left at zero), and against the CPU's two calls. */
static void
moments_stats_case(int rows, int c, bool bf16, bool running)
{
  size_t n = (size_t)rows * c, slot = TDM_BN_SLOT_FLOATS(c);
  g_autofree float *x = random_floats(MAX(n, 1), -1, 1);
  g_autofree uint16_t *x16 = g_new0(uint16_t, MAX(n, 1));
  for (size_t i = 0; i < n; i++)
    x[i] = bf16_value(x16[i] = bf16_bits(x[i] * (1.0f + (float)(i % c) * 0.01f) + 3.0f));
  const void *hx = bf16 ? (const void *)x16 : x;
  TdmDtype type = bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
  g_autofree float *start = random_floats(2 * (size_t)c, 0.5, 2);
  g_autofree char *tag = g_strdup_printf("%d×%d %s%s", rows, c, bf16 ? "bf16" : "float32",
                                         running ? "" : ", no running averages");

  /* The CPU's: its two calls (no bn_moments_stats of its own). */
  g_autofree float *slot_ref = g_new(float, slot), *saved_ref = g_new(float, 2 * (size_t)c);
  g_autofree float *run_ref = g_memdup2(start, 2 * (size_t)c * 4);
  tdm_backend_bn_moments_stats(cpu, saved_ref, slot_ref, hx, type, rows, c, TDM_BN_EPS,
                               TDM_BN_MOMENTUM, running ? run_ref : NULL,
                               running ? run_ref + c : NULL);
  assert_ok(cpu);

  void *dx = on(hx, MAX(n, 1) * (bf16 ? 2 : 4));
  float *slots[3], *saved[3], *run[3];
  for (int k = 0; k < 3; k++) {
    slots[k] = poisoned(slot);
    saved[k] = poisoned(2 * (size_t)c);
    run[k] = on(start, 2 * (size_t)c * 4);
  }
  /* 0: the two launches; 1, 2: the one, twice. */
  tdm_backend_bn_moments(gpu, slots[0], dx, type, rows, c, 0, 1);
  tdm_backend_bn_stats(gpu, saved[0], slots[0], 1, c, TDM_BN_EPS, TDM_BN_MOMENTUM,
                       running ? run[0] : NULL, running ? run[0] + c : NULL);
  for (int k = 1; k < 3; k++)
    tdm_backend_bn_moments_stats(gpu, saved[k], slots[k], dx, type, rows, c, TDM_BN_EPS,
                                 TDM_BN_MOMENTUM, running ? run[k] : NULL,
                                 running ? run[k] + c : NULL);
  assert_ok(gpu);
  for (int k = 1; k < 3; k++) {
    g_autofree char *what = g_strdup_printf("bn_moments_stats %s%s against two launches",
                                            tag, k == 2 ? ", repeated" : "");
    expect_same(what, slots[0], slots[k], slot * 4);
    expect_same(what, saved[0], saved[k], 2 * (size_t)c * 4);
    expect_same(what, run[0], run[k], 2 * (size_t)c * 4);
  }
  /* The slot's mean (its high parts), M2 and count. */
  g_autofree char *w1 = g_strdup_printf("bn_moments_stats slot %s", tag);
  check_close(w1, slots[1], slot_ref, c, TOL);
  check_close(w1, slots[1] + 2 * c, slot_ref + 2 * c, c + 2, TOL);
  g_autofree char *w2 = g_strdup_printf("bn_moments_stats saved %s", tag);
  check_close(w2, saved[1], saved_ref, 2 * (size_t)c, TOL);
  g_autofree char *w3 = g_strdup_printf("bn_moments_stats running averages %s", tag);
  check_close(w3, run[1], run_ref, 2 * (size_t)c, TOL);
  release(dx);
  for (int k = 0; k < 3; k++) {
    release(slots[k]);
    release(saved[k]);
    release(run[k]);
  }
}

static void
test_bn_moments_stats(void)
{
  if (!have_gpu())
    return;
  static const int rows[] = {1, 7, 1000, 65536 + 37}, channels[] = {1, 3, 17, 64, 100, 512};
  for (int bf16 = 0; bf16 < 2; bf16++)
    for (guint i = 0; i < G_N_ELEMENTS(rows); i++)
      for (guint j = 0; j < G_N_ELEMENTS(channels); j++)
        moments_stats_case(rows[i], channels[j], bf16, true);
  moments_stats_case(300, 1000, false, true); /* four tiles, the last one partly used */
  moments_stats_case(1000, 64, true, false);
  moments_stats_case(0, 3, false, true); /* no rows: the empty slot, then bn_stats's launch */
}

/* The elementwise passes (the training forward, with an addend and as bf16, the
 * evaluation forward, the input gradient as float32 and bf16) through misaligned
 * pointers give the aligned launch's bits, and the forward the CPU's values. */
static void
passes_case(int rows, int c, bool bf16)
{
  size_t n = (size_t)rows * c;
  g_autofree float *x = random_floats(n, -2, 2), *dy = random_floats(n, -1, 1);
  g_autofree float *add = random_floats(n, -1, 1);
  g_autofree uint16_t *x16 = g_new(uint16_t, n), *dy16 = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++) {
    x[i] = bf16_value(x16[i] = bf16_bits(x[i]));
    dy[i] = bf16_value(dy16[i] = bf16_bits(dy[i]));
  }
  const void *hx = bf16 ? (const void *)x16 : x, *hdy = bf16 ? (const void *)dy16 : dy;
  TdmDtype type = bf16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
  size_t size = bf16 ? 2 : 4;
  /* mean, invstd, gamma, beta, Σdγ, Σdβ; the evaluation's variance (positive). */
  g_autofree float *p = random_floats(6 * (size_t)c, -0.5, 0.5);
  for (int ch = 0; ch < c; ch++) {
    p[c + ch] += 1.0f;
    p[2 * c + ch] += 1.0f;
  }
  g_autofree float *var = random_floats(c, 0.5, 1.5);
  float *dp = on(p, 6 * (size_t)c * 4), *dvar = on(var, (size_t)c * 4);
#define P(k) (dp + (size_t)(k) * c)
  g_autofree char *tag = g_strdup_printf("%d×%d %s", rows, c, bf16 ? "bf16" : "float32");
  void *bases[8];
  void *out[2][6];
  for (int shift = 0; shift < 2; shift++) {
    const void *dx = placed(hx, n, size, shift, &bases[4 * shift]);
    const void *ddy = placed(hdy, n, size, shift, &bases[4 * shift + 1]);
    float *da = placed(add, n, 4, shift, &bases[4 * shift + 2]);
    char *o = on(NULL, (n + 8) * 4 * 6);
    bases[4 * shift + 3] = o;
    for (int k = 0; k < 6; k++)
      out[shift][k] = o + (size_t)k * (n + 8) * 4 + (size_t)shift * (k == 3 || k == 5 ? 2 : 4);
    tdm_backend_bn_forward(gpu, out[shift][0], dx, type, P(0), P(1), P(2), P(3), rows, c, true);
    tdm_backend_bn_forward_add(gpu, out[shift][1], dx, type, P(0), P(1), P(2), P(3), da, rows,
                               c, true);
    tdm_backend_bn_forward_eval(gpu, out[shift][2], dx, type, P(0), dvar, P(2), P(3), 1e-5f,
                                rows, c, true);
    tdm_backend_bn_forward_bf16(gpu, out[shift][3], dx, type, P(0), P(1), P(2), P(3), da,
                                TDM_DTYPE_F32, rows, c, false, NULL);
    tdm_backend_bn_backward_dx(gpu, out[shift][4], ddy, type, dx, type, P(0), P(1), P(2), P(3),
                               true, P(4), P(5), 1.0f / rows, rows, c);
    tdm_backend_bn_backward_dx_bf16(gpu, out[shift][5], ddy, type, dx, type, P(0), P(1), P(2),
                                    P(3), false, P(4), P(5), 1.0f / rows, rows, c);
  }
  static const char *names[] = {"bn_forward", "bn_forward_add", "bn_forward_eval",
                                "bn_forward_bf16", "bn_backward_dx", "bn_backward_dx_bf16"};
  for (int k = 0; k < 6; k++) {
    g_autofree char *what = g_strdup_printf("%s %s, misaligned", names[k], tag);
    expect_same(what, out[0][k], out[1][k], n * (k == 3 || k == 5 ? 2 : 4));
  }
  g_autofree float *ref = g_new(float, n);
  tdm_backend_bn_forward(cpu, ref, hx, type, p, p + c, p + 2 * (size_t)c, p + 3 * (size_t)c,
                         rows, c, true);
  assert_ok(cpu);
  g_autofree char *what = g_strdup_printf("bn_forward %s against the CPU", tag);
  check_close(what, out[0][0], ref, n, TOL);
#undef P
  for (int i = 0; i < 8; i++)
    release(bases[i]);
  release(dp);
  release(dvar);
}

static void
test_bn_passes(void)
{
  if (!have_gpu())
    return;
  for (int bf16 = 0; bf16 < 2; bf16++) {
    passes_case(7, 3, bf16);
    passes_case(301, 12, bf16);
    passes_case(1000, 17, bf16);
    passes_case(4099, 64, bf16);
    passes_case(97, 512, bf16);
    passes_case(50, 1000, bf16);
  }
}

/* The elementwise passes walked downwards and upwards (common.cuh's tdm_k_walk), called
 * through their launchers with the flag either way: the same bits, every element
 * written. An n × h × w × c input (rows n·h·w) of float32 or bf16, through pointers
 * aligned or one element off (the scalar accesses). */
typedef struct {
  int n, h, w, c;
  bool x16;
  const void *x, *dy;  /* the case's type */
  const float *a;      /* an addend as float32 */
  const uint16_t *a16; /* and as bf16 (a block's skip) */
  const float *p;      /* mean, invstd, gamma, beta, Σdγ, Σdβ, running variance */
} Walked;

/* The passes: their names, their outputs' element sizes and counts (one per input
 * element, or the columns of a k×k gather at stride s), and whether they write mask bits. */
static const struct {
  const char *name;
  size_t size;
  int k, stride;
  gboolean bits;
} walked_passes[] = {
  {"bn_forward relu", 4, 0, 0, FALSE},
  {"bn_forward_add relu", 4, 0, 0, FALSE},
  {"bn_forward_eval relu", 4, 0, 0, FALSE},
  {"bn_forward_eval_bf16 relu", 2, 0, 0, FALSE},
  {"bn_forward_bf16 + a16, relu, bits (a block's end)", 2, 0, 0, TRUE},
  {"bn_forward_bf16 relu", 2, 0, 0, FALSE},
  {"bn_relu_add_bf16", 2, 0, 0, FALSE},
  {"bn_backward_dx relu", 4, 0, 0, FALSE},
  {"bn_backward_dx_bf16", 2, 0, 0, FALSE},
  {"im2col_bf16_bn 1×1 (bn_forward_bf16's pass)", 2, 1, 1, FALSE},
  {"im2col_bf16_bn 3×3", 2, 3, 1, FALSE},
  {"im2col_bf16_bn 3×3 stride 2", 2, 3, 2, FALSE},
};

static cudaError_t
walked_launch(const Walked *w, int k, void *out, uint32_t *bits, bool descending)
{
  int rows = w->n * w->h * w->w, c = w->c;
  cudaStream_t s = tdm_backend_cuda_stream(gpu);
  const void *x = w->x;
  bool x16 = w->x16;
#define P(i) (w->p + (size_t)(i) * c)
  switch (k) {
  case 0:
    return tdm_k_bn_forward(out, x, x16, P(0), P(1), P(2), P(3), rows, c, true, descending, s);
  case 1:
    return tdm_k_bn_forward_add(out, x, x16, P(0), P(1), P(2), P(3), w->a, rows, c, true,
                                descending, s);
  case 2:
    return tdm_k_bn_forward_eval(out, x, x16, P(0), P(6), P(2), P(3), 1e-5f, rows, c, true,
                                 descending, s);
  case 3:
    return tdm_k_bn_forward_eval_bf16(out, x, x16, P(0), P(6), P(2), P(3), 1e-5f, rows, c,
                                      true, descending, s);
  case 4:
    return tdm_k_bn_forward_bf16(out, x, x16, P(0), P(1), P(2), P(3), w->a16, true, rows, c,
                                 true, bits, descending, s);
  case 5:
    return tdm_k_bn_forward_bf16(out, x, x16, P(0), P(1), P(2), P(3), NULL, false, rows, c,
                                 true, NULL, descending, s);
  case 6:
    return tdm_k_bn_relu_add_bf16(out, x, x16, P(0), P(1), P(2), P(3),
                                  x16 ? (const void *)w->a16 : w->a, x16, rows, c, descending,
                                  s);
  case 7:
    return tdm_k_bn_backward_dx(out, w->dy, x16, x, x16, P(0), P(1), P(2), P(3), true, P(4),
                                P(5), 1.0f / rows, rows, c, descending, s);
  case 8:
    return tdm_k_bn_backward_dx_bf16(out, w->dy, x16, x, x16, P(0), P(1), P(2), P(3), false,
                                     P(4), P(5), 1.0f / rows, rows, c, descending, s);
  default:
    return tdm_k_im2col_bf16_bn(out, x, x16, P(0), P(1), P(2), P(3), true, w->n, w->h, w->w, c,
                                walked_passes[k].k, walked_passes[k].k,
                                walked_passes[k].k / 2, walked_passes[k].stride, descending, s);
  }
#undef P
}

static void
walked_case(int n, int h, int w, int c, bool x16)
{
  size_t rows = (size_t)n * h * w, count = rows * c, size = x16 ? 2 : 4;
  g_autofree float *x = random_floats(count, -2, 2), *dy = random_floats(count, -1, 1);
  g_autofree float *a = random_floats(count, -1, 1);
  g_autofree uint16_t *x16s = g_new(uint16_t, count), *dy16 = g_new(uint16_t, count);
  g_autofree uint16_t *a16 = g_new(uint16_t, count);
  for (size_t i = 0; i < count; i++) {
    x16s[i] = bf16_bits(x[i]);
    dy16[i] = bf16_bits(dy[i]);
    a16[i] = bf16_bits(a[i]);
  }
  g_autofree float *p = random_floats(7 * (size_t)c, -0.5, 0.5);
  for (int ch = 0; ch < c; ch++) {
    p[c + ch] += 1.0f;
    p[2 * c + ch] += 1.0f;
    p[6 * c + ch] += 1.0f; /* a variance */
  }
  float *dp = on(p, 7 * (size_t)c * 4);
  for (size_t shift = 0; shift < 2; shift++) {
    void *bases[4];
    Walked wk = {n, h, w, c, x16, NULL, NULL, NULL, NULL, dp};
    wk.x = placed(x16 ? (const void *)x16s : x, count, size, shift, &bases[0]);
    wk.dy = placed(x16 ? (const void *)dy16 : dy, count, size, shift, &bases[1]);
    wk.a = placed(a, count, 4, shift, &bases[2]);
    wk.a16 = placed(a16, count, 2, shift, &bases[3]);
    for (int k = 0; k < (int)G_N_ELEMENTS(walked_passes); k++) {
      int kk = walked_passes[k].k, st = walked_passes[k].stride;
      size_t out_count = count;
      if (kk > 1) {
        size_t oh = (size_t)(h + 2 * (kk / 2) - kk) / st + 1;
        size_t ow = (size_t)(w + 2 * (kk / 2) - kk) / st + 1;
        out_count = (size_t)n * oh * ow * kk * kk * c;
        if (out_count > ((size_t)1 << 24))
          continue; /* the large cases' passes are the point; their columns, not */
      }
      size_t bytes = out_count * walked_passes[k].size;
      size_t words = TDM_RELU_BITS_WORDS(count);
      void *out[2], *bits[2] = {NULL, NULL};
      for (int d = 0; d < 2; d++) {
        out[d] = poisoned_bytes(bytes + 8 * walked_passes[k].size);
        if (walked_passes[k].bits)
          bits[d] = poisoned_bytes(words * 4);
        g_assert_cmpint(walked_launch(&wk, k, (char *)out[d] + shift * walked_passes[k].size,
                                      bits[d], d == 1),
                        ==, cudaSuccess);
      }
      g_autofree char *what = g_strdup_printf(
          "%s n%d %dx%dx%d %s%s, downwards against upwards", walked_passes[k].name, n, h, w, c,
          x16 ? "bf16" : "float32", shift ? ", misaligned" : "");
      expect_same(what, out[0], out[1], bytes + 8 * walked_passes[k].size);
      if (walked_passes[k].bits) {
        g_autofree char *mask = g_strdup_printf("%s: mask bits", what);
        expect_same(mask, bits[0], bits[1], words * 4);
      }
      /* Every element written: one left poisoned is all ones, a NaN no pass makes of
       * these finite inputs. */
      g_autofree unsigned char *got =
          fetched((char *)out[1] + shift * walked_passes[k].size, bytes);
      size_t left = 0;
      for (size_t i = 0; i < out_count; i++) {
        size_t ones = 0;
        for (size_t b = 0; b < walked_passes[k].size; b++)
          ones += got[i * walked_passes[k].size + b] == 0xff;
        left += ones == walked_passes[k].size;
      }
      if (left > 0) {
        g_test_message("FAILED %s: %zu of %zu values left unwritten", what, left, out_count);
        g_test_fail();
      }
      for (int d = 0; d < 2; d++) {
        release(out[d]);
        if (bits[d] != NULL)
          release(bits[d]);
      }
    }
    for (int i = 0; i < 4; i++)
      release(bases[i]);
  }
  release(dp);
}

static void
test_bn_descending(void)
{
  if (!have_gpu())
    return;
  for (int x16 = 0; x16 < 2; x16++) {
    walked_case(1, 1, 7, 3, x16);       /* seven rows, one value a thread */
    walked_case(1, 7, 11, 12, x16);     /* four a thread */
    walked_case(2, 9, 13, 17, x16);     /* 17 channels: scalar accesses */
    walked_case(3, 211, 213, 17, x16);  /* rows for two grids' turns, the last short */
    walked_case(3, 13, 15, 64, x16);    /* eight a thread, a ResNet's first stage */
    walked_case(5, 229, 231, 64, x16);  /* two grids' turns of rows, the last short */
    walked_case(2, 9, 13, 512, x16);    /* two tiles of channels */
    walked_case(1, 3, 3, 4001, x16);    /* 16 tiles; im2col's one-thread-a-value kernel */
  }
}

static void
test_bn_sums(void)
{
  if (!have_gpu())
    return;
  for (int bf16 = 0; bf16 < 2; bf16++)
    for (int relu = 0; relu < 2; relu++) {
      sums_case(7, 3, bf16, relu);           /* one group, one value a thread */
      sums_case(5003, 17, bf16, relu);       /* 17 channels: scalar loads, three sets */
      sums_case(65536 + 37, 64, bf16, relu); /* a ResNet's first stage: 8 a thread, sets */
      sums_case(20000, 512, bf16, relu);     /* two tiles of 256 channels, many sets */
      sums_case(300, 1000, bf16, relu);      /* four tiles, the last one partly used */
      sums_case(1, 12, bf16, relu);          /* one row: 4 a thread */
    }
  /* Wider than the scratch holds groups for: two groups a tile. */
  sums_case(5, 40000, true, false);
}

void
test_cuda_layers_add_bn(void)
{
  g_test_add_func("/cuda-layers/bn-sums", test_bn_sums);
  g_test_add_func("/cuda-layers/bn-moments-stats", test_bn_moments_stats);
  g_test_add_func("/cuda-layers/bn-passes", test_bn_passes);
  g_test_add_func("/cuda-layers/bn-descending", test_bn_descending);
}

#endif /* TDM_HAVE_CUDA */
