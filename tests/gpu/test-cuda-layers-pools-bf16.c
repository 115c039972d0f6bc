/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-layers-pools-bf16.c — part of test-cuda-layers: the CUDA backend's
 * operations of the resnet preset's plain layers in a bf16 run: maxpool_forward_bf16 (a
 * float32 or bf16 input, a bn normalized as it is read or none), maxpool_backward_bf16
 * (gradients of either type), bn_forward_eval_bf16 (the evaluation's bn output for a
 * conv) and bn_relu_add_bf16 (a body's last bn with its ReLU, added at the block's end).
 * Each against the GPU's float32 operations composed (bn_forward_bf16 or to_bf16,
 * from_bf16, maxpool_forward; maxpool_backward then to_bf16; bn_forward_eval then
 * to_bf16; bn_forward, add_out, to_bf16), bit for bit, and against the CPU's bf16 operation, the reference, bit for
 * bit (the pools: the bn's value is computed as the CPU does, kernels/bn-value.cuh) or,
 * for the two bn outputs, within the rounding of the result to bf16 of the CPU's float32
 * operations.
 */
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "test-cuda-layers.h"

#define HALF_U16 (1.0 / 512.0) /* the rounding of one value to bf16, at most, relative */

/* bytes at got (GPU) against want (GPU, or the host's when host), bit for bit. */
static void
same_bytes(const char *what, const void *got, const void *want, size_t bytes, gboolean host)
{
  g_autofree char *a = g_malloc(bytes), *b = g_malloc(bytes);
  tdm_backend_download(gpu, a, got, bytes);
  if (host)
    memcpy(b, want, bytes);
  else
    tdm_backend_download(gpu, b, want, bytes);
  assert_ok(gpu);
  size_t wrong = 0;
  for (size_t i = 0; i < bytes; i++)
    wrong += a[i] != b[i];
  g_test_message("%s%s: %zu of %zu bytes differ", what,
                 host ? " against the CPU" : " against the float32 operations", wrong, bytes);
  if (wrong > 0) {
    g_test_message("FAILED %s", what);
    g_test_fail();
  }
}

/* Random values with ties: every third value repeats the one before it, and every
 * fifth is one float32 step from it (the same bf16 after rounding, another float32). */
static float *
values_with_ties(size_t n, double lo, double hi)
{
  float *x = random_floats(n, lo, hi);
  for (size_t i = 1; i < n; i++) {
    if (i % 3 == 0)
      x[i] = x[i - 1];
    else if (i % 5 == 0)
      x[i] = nextafterf(x[i - 1], INFINITY);
  }
  return x;
}

/* The forward over n×h×w×c (odd sizes leave pixels past the last window; offset 1
 * element misaligns every pointer, the one-channel-a-thread kernel) with window k, x of
 * x_type, bn 0 (none), 1 (a bn) or 2 (a bn and its ReLU). */
static void
forward_case(int n, int h, int w, int c, int k, TdmDtype x_type, int bn, size_t offset)
{
  size_t count = (size_t)n * h * w * c, outs = (size_t)n * (h / k) * (w / k) * c;
  g_autofree float *x = values_with_ties(count + offset, -3, 5);
  g_autofree uint16_t *x16 = g_new(uint16_t, count + offset);
  for (size_t i = 0; i < count + offset; i++)
    x16[i] = bf16_bits(x[i]);
  if (x_type == TDM_DTYPE_BF16)
    for (size_t i = 0; i < count + offset; i++)
      x[i] = bf16_value(x16[i]);
  g_autofree float *p = random_floats(4 * (size_t)c, -1, 1); /* mean, invstd, γ, β */
  for (int ch = 0; ch < c; ch++)
    p[c + ch] = 0.5f + fabsf(p[c + ch]);
  const float *mean = bn ? p : NULL, *invstd = bn ? p + c : NULL;
  const float *gamma = bn ? p + 2 * c : NULL, *beta = bn ? p + 3 * c : NULL;
  const void *hx = x_type == TDM_DTYPE_BF16 ? (const void *)x16 : (const void *)x;
  size_t size = tdm_dtype_size(x_type);
  char *dx = on(hx, (count + offset) * size);
  float *dp = on(p, 4 * (size_t)c * 4);
  uint16_t *got = on(NULL, (outs + offset) * 2), *v16 = on(NULL, count * 2);
  uint16_t *want = on(NULL, outs * 2);
  int32_t *got_arg = on(NULL, (outs + offset) * 4), *want_arg = on(NULL, outs * 4);
  float *wide = poisoned(count), *want_y = poisoned(outs);
  tdm_backend_maxpool_forward_bf16(gpu, got + offset, got_arg + offset, dx + offset * size,
                                   x_type, bn ? dp : NULL, bn ? dp + c : NULL,
                                   bn ? dp + 2 * c : NULL, bn ? dp + 3 * c : NULL, bn == 2, n,
                                   h, w, c, k);
  /* Composed: the bn's output (or x) as bf16, widened, pooled, rounded. */
  if (bn)
    tdm_backend_bn_forward_bf16(gpu, v16, dx + offset * size, x_type, dp, dp + c, dp + 2 * c,
                                dp + 3 * c, NULL, TDM_DTYPE_F32, n * h * w, c, bn == 2, NULL);
  else if (x_type == TDM_DTYPE_F32)
    tdm_backend_to_bf16(gpu, v16, (const float *)(dx + offset * size), count);
  else
    tdm_backend_copy(gpu, v16, dx + offset * size, count * 2);
  tdm_backend_from_bf16(gpu, wide, v16, count);
  tdm_backend_maxpool_forward(gpu, want_y, want_arg, wide, NULL, false, n, h, w, c, k);
  tdm_backend_to_bf16(gpu, want, want_y, outs);
  g_autofree char *what =
      g_strdup_printf("maxpool_forward_bf16 %d×%d×%d×%d k%d x %s%s+%zu", n, h, w, c, k,
                      x_type == TDM_DTYPE_BF16 ? "bf16" : "f32",
                      bn == 0 ? "" : bn == 1 ? ", bn" : ", bn relu", offset);
  same_bytes(what, got + offset, want, outs * 2, FALSE);
  g_autofree char *arg = g_strdup_printf("%s argmax", what);
  same_bytes(arg, got_arg + offset, want_arg, outs * 4, FALSE);
  /* The CPU's, on the host's copies. */
  g_autofree uint16_t *ref = g_new(uint16_t, outs);
  g_autofree int32_t *ref_arg = g_new(int32_t, outs);
  tdm_backend_maxpool_forward_bf16(cpu, ref, ref_arg, (const char *)hx + offset * size, x_type,
                                   mean, invstd, gamma, beta, bn == 2, n, h, w, c, k);
  assert_ok(cpu);
  same_bytes(what, got + offset, ref, outs * 2, TRUE);
  same_bytes(arg, got_arg + offset, ref_arg, outs * 4, TRUE);
  void *bufs[] = {dx, dp, got, v16, want, got_arg, want_arg, wide, want_y};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

/* The backward from an argmax the float32 pool chose, dy of dy_type into dx of dx_type. */
static void
backward_case(int n, int h, int w, int c, int k, TdmDtype dy_type, TdmDtype dx_type)
{
  size_t count = (size_t)n * h * w * c, outs = (size_t)n * (h / k) * (w / k) * c;
  g_autofree float *x = random_floats(count, -2, 2), *dy = random_floats(outs, -1, 1);
  g_autofree uint16_t *dy16 = g_new(uint16_t, outs);
  for (size_t i = 0; i < outs; i++)
    dy16[i] = bf16_bits(dy[i]);
  if (dy_type == TDM_DTYPE_BF16)
    for (size_t i = 0; i < outs; i++)
      dy[i] = bf16_value(dy16[i]);
  float *dx = on(x, count * 4), *y = poisoned(outs), *ddy = on(dy, outs * 4);
  uint16_t *ddy16 = on(dy16, outs * 2);
  int32_t *arg = on(NULL, outs * 4);
  tdm_backend_maxpool_forward(gpu, y, arg, dx, NULL, false, n, h, w, c, k);
  size_t size = tdm_dtype_size(dx_type);
  /* Every byte of got set, so that a pixel left unwritten differs in either type. */
  void *got = poisoned_bytes(count * size), *want16 = on(NULL, count * 2);
  float *want = poisoned(count);
  const void *d = dy_type == TDM_DTYPE_BF16 ? (const void *)ddy16 : (const void *)ddy;
  tdm_backend_maxpool_backward_bf16(gpu, got, dx_type, d, dy_type, arg, n, h, w, c, k);
  tdm_backend_maxpool_backward(gpu, want, NULL, ddy, arg, NULL, n, h, w, c, k);
  g_autofree char *what = g_strdup_printf("maxpool_backward_bf16 %d×%d×%d×%d k%d dy %s dx %s", n,
                                          h, w, c, k, dy_type == TDM_DTYPE_BF16 ? "bf16" : "f32",
                                          dx_type == TDM_DTYPE_BF16 ? "bf16" : "f32");
  if (dx_type == TDM_DTYPE_BF16) {
    tdm_backend_to_bf16(gpu, want16, want, count);
    same_bytes(what, got, want16, count * 2, FALSE);
  } else {
    same_bytes(what, got, want, count * 4, FALSE);
  }
  g_autofree int32_t *harg = g_new(int32_t, outs);
  tdm_backend_download(gpu, harg, arg, outs * 4);
  assert_ok(gpu);
  g_autofree char *ref = g_malloc(count * size);
  const void *hdy = dy_type == TDM_DTYPE_BF16 ? (const void *)dy16 : (const void *)dy;
  tdm_backend_maxpool_backward_bf16(cpu, ref, dx_type, hdy, dy_type, harg, n, h, w, c, k);
  assert_ok(cpu);
  same_bytes(what, got, ref, count * size, TRUE);
  void *bufs[] = {dx, y, ddy, ddy16, arg, got, want16, want};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

/* The GPU's bf16 output got (count values) against the CPU's float32 ref: within
 * half a bf16 unit (the one rounding of the output) and the tolerance. */
static void
against_cpu(const char *what, const uint16_t *got, const float *ref, size_t count)
{
  g_autofree uint16_t *out = g_new(uint16_t, count);
  g_autofree float *widened = g_new(float, count);
  tdm_backend_download(gpu, out, got, count * 2);
  assert_ok(gpu);
  for (size_t i = 0; i < count; i++)
    widened[i] = bf16_value(out[i]);
  double err = rel_error(widened, ref, count);
  g_test_message("%s against the CPU's float32: relative error %.3g", what, err);
  if (!(err <= HALF_U16 + TOL)) {
    g_test_message("FAILED %s against the CPU", what);
    g_test_fail();
  }
}

/* bn_forward_eval_bf16: x of x_type, rows × c. */
static void
eval_case(int rows, int c, TdmDtype x_type, bool relu)
{
  size_t count = (size_t)rows * c;
  g_autofree float *x = random_floats(count, -3, 5);
  g_autofree uint16_t *x16 = g_new(uint16_t, count);
  for (size_t i = 0; i < count; i++) {
    x16[i] = bf16_bits(x[i]);
    if (x_type == TDM_DTYPE_BF16)
      x[i] = bf16_value(x16[i]);
  }
  g_autofree float *p = random_floats(4 * (size_t)c, -1, 1); /* mean, var, γ, β */
  for (int ch = 0; ch < c; ch++)
    p[c + ch] = 0.25f + fabsf(p[c + ch]);
  const void *hx = x_type == TDM_DTYPE_BF16 ? (const void *)x16 : (const void *)x;
  void *dx = on(hx, count * tdm_dtype_size(x_type));
  float *dxf = on(x, count * 4), *dp = on(p, 4 * (size_t)c * 4), *want = poisoned(count);
  uint16_t *got = on(NULL, count * 2), *want16 = on(NULL, count * 2);
  tdm_backend_bn_forward_eval_bf16(gpu, got, dx, x_type, dp, dp + c, dp + 2 * c, dp + 3 * c,
                                   1e-5f, rows, c, relu);
  tdm_backend_bn_forward_eval(gpu, want, dxf, TDM_DTYPE_F32, dp, dp + c, dp + 2 * c, dp + 3 * c,
                              1e-5f, rows, c, relu);
  tdm_backend_to_bf16(gpu, want16, want, count);
  g_autofree char *what = g_strdup_printf("bn_forward_eval_bf16 %d×%d x %s%s", rows, c,
                                          x_type == TDM_DTYPE_BF16 ? "bf16" : "f32",
                                          relu ? ", relu" : "");
  same_bytes(what, got, want16, count * 2, FALSE);
  g_autofree float *ref = g_new(float, count);
  tdm_backend_bn_forward_eval(cpu, ref, x, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c, 1e-5f,
                              rows, c, relu);
  assert_ok(cpu);
  against_cpu(what, got, ref, count);
  void *bufs[] = {dx, dxf, dp, want, got, want16};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

/* bn_relu_add_bf16: x of x_type, the addend a of a_type, rows × c. */
static void
relu_add_case(int rows, int c, TdmDtype x_type, TdmDtype a_type)
{
  size_t count = (size_t)rows * c;
  g_autofree float *x = random_floats(count, -3, 5), *a = random_floats(count, -2, 2);
  g_autofree uint16_t *x16 = g_new(uint16_t, count), *a16 = g_new(uint16_t, count);
  for (size_t i = 0; i < count; i++) {
    x16[i] = bf16_bits(x[i]);
    a16[i] = bf16_bits(a[i]);
    if (x_type == TDM_DTYPE_BF16)
      x[i] = bf16_value(x16[i]);
    if (a_type == TDM_DTYPE_BF16)
      a[i] = bf16_value(a16[i]);
  }
  g_autofree float *p = random_floats(4 * (size_t)c, -1, 1); /* mean, invstd, γ, β */
  for (int ch = 0; ch < c; ch++)
    p[c + ch] = 0.5f + fabsf(p[c + ch]);
  const void *hx = x_type == TDM_DTYPE_BF16 ? (const void *)x16 : (const void *)x;
  const void *ha = a_type == TDM_DTYPE_BF16 ? (const void *)a16 : (const void *)a;
  void *dx = on(hx, count * tdm_dtype_size(x_type)), *da = on(ha, count * tdm_dtype_size(a_type));
  float *dxf = on(x, count * 4), *daf = on(a, count * 4), *dp = on(p, 4 * (size_t)c * 4);
  float *want = poisoned(count);
  uint16_t *got = on(NULL, count * 2), *want16 = on(NULL, count * 2);
  tdm_backend_bn_relu_add_bf16(gpu, got, dx, x_type, dp, dp + c, dp + 2 * c, dp + 3 * c, da,
                               a_type, rows, c);
  tdm_backend_bn_forward(gpu, want, dxf, TDM_DTYPE_F32, dp, dp + c, dp + 2 * c, dp + 3 * c,
                         rows, c, true);
  tdm_backend_add_out(gpu, want, want, daf, count, false);
  tdm_backend_to_bf16(gpu, want16, want, count);
  g_autofree char *what = g_strdup_printf("bn_relu_add_bf16 %d×%d x %s a %s", rows, c,
                                          x_type == TDM_DTYPE_BF16 ? "bf16" : "f32",
                                          a_type == TDM_DTYPE_BF16 ? "bf16" : "f32");
  same_bytes(what, got, want16, count * 2, FALSE);
  g_autofree float *ref = g_new(float, count);
  tdm_backend_bn_forward(cpu, ref, x, TDM_DTYPE_F32, p, p + c, p + 2 * c, p + 3 * c, rows, c,
                         true);
  tdm_backend_add_out(cpu, ref, ref, a, count, false);
  assert_ok(cpu);
  against_cpu(what, got, ref, count);
  void *bufs[] = {dx, da, dxf, daf, dp, want, got, want16};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    release(bufs[i]);
}

static void
test_pools_bf16(void)
{
  if (!have_gpu())
    return;
  g_assert_true(tdm_backend_has_bf16_blocks(gpu));
  for (int t = 0; t < 2; t++) {
    TdmDtype x_type = t ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    for (int bn = 0; bn < 3; bn++) {
      /* The preset's first pool at batch 512 (28×28×64), its last (7×7×256: a remainder). */
      forward_case(512, 28, 28, 64, 2, x_type, bn, 0);
      forward_case(64, 7, 7, 256, 2, x_type, bn, 0);
      forward_case(3, 9, 11, 17, 2, x_type, bn, 0);
      forward_case(2, 9, 9, 12, 3, x_type, bn, 1);
    }
  }
  for (int t = 0; t < 4; t++) {
    TdmDtype dy_type = t & 1 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    TdmDtype dx_type = t & 2 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    backward_case(512, 28, 28, 64, 2, dy_type, dx_type);
    backward_case(64, 7, 7, 256, 2, dy_type, dx_type); /* eight channels a thread, a remainder */
    backward_case(4, 5, 3, 8, 2, dy_type, dx_type);    /* remainders below, right and both */
    backward_case(3, 9, 11, 17, 2, dy_type, dx_type);
    backward_case(2, 9, 9, 12, 3, dy_type, dx_type);
  }
  for (int relu = 0; relu < 2; relu++) {
    eval_case(586 * 28 * 28, 32, TDM_DTYPE_BF16, relu); /* the preset's stem bn, evaluating */
    eval_case(586 * 14 * 14, 128, TDM_DTYPE_F32, relu);
    eval_case(37, 17, TDM_DTYPE_BF16, relu);
  }
  for (int t = 0; t < 4; t++) {
    TdmDtype x_type = t & 1 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    TdmDtype a_type = t & 2 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    relu_add_case(512 * 14 * 14, 64, x_type, a_type); /* the preset's first block's end */
    relu_add_case(37, 17, x_type, a_type);
  }
}

void
test_cuda_layers_add_pools_bf16(void)
{
  g_test_add_func("/cuda-layers/pools-bf16", test_pools_bf16);
}

#endif /* TDM_HAVE_CUDA */
