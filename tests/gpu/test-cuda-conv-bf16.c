/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv-bf16.c — the convolution engine's operands as the layers around a conv
 * store them (part of test-cuda-conv): a bn before the conv normalized as the conv reads
 * its input; an output gradient the bn before wrote as bf16 where the replica puts it
 * (the workspace's start, or outside it: the stem's, in place in the gradient region);
 * an output stored as bf16 (y16), plain and from an input a bn
 * stored so; an input gradient written as bf16 (dx16); an input stored as bf16 read as
 * it is (a residual block's). Every candidate against the CPU reference within
 * test-cuda-conv.c's bounds (bound(): the bf16 bound 2⁻⁷). Skips without a CUDA GPU.
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "tdm-backend-cuda.h"
#include "tdm-conv-columns.h"
#include "test-cuda-conv.h"
#include "test-cuda-layers.h"

/* A bn before the conv, normalized as the conv reads its input: the reference convolves
 * the CPU's bn output. */
static void
test_bn_prologue(void)
{
  if (!have_gpu())
    return;
  const Case c = {3, 8, 8, 64, 64, 3, 1, 1};
  size_t in = (size_t)c.n * c.h * c.w * c.c;
  g_autofree float *x = random_floats(in, -2, 3);
  g_autofree float *mean = random_floats(c.c, -0.5, 0.5);
  g_autofree float *invstd = random_floats(c.c, 0.5, 2.0);
  g_autofree float *gamma = random_floats(c.c, 0.5, 1.5);
  g_autofree float *beta = random_floats(c.c, -0.5, 0.5);
  g_autofree float *xn = g_new(float, in);
  tdm_backend_bn_forward(cpu, xn, x, TDM_DTYPE_F32, mean, invstd, gamma, beta, (int)(in / c.c),
                         c.c, true);
  Problem p;
  problem_init(&p, &c, xn);
  memcpy(p.x, x, in * 4);
  Device d;
  device_init(&d, gpu_bf16, &p, TRUE);
  float *dmean = on_b(gpu_bf16, mean, c.c * 4), *dinv = on_b(gpu_bf16, invstd, c.c * 4);
  float *dgamma = on_b(gpu_bf16, gamma, c.c * 4), *dbeta = on_b(gpu_bf16, beta, c.c * 4);
  d.a.bn_mean = dmean;
  d.a.bn_invstd = dinv;
  d.a.bn_gamma = dgamma;
  d.a.bn_beta = dbeta;
  d.a.bn_relu = true;
  check_candidates(&d, &p, "bf16 with a bn before", p.y_ref);
  void *extra[] = {dmean, dinv, dgamma, dbeta};
  for (size_t i = 0; i < G_N_ELEMENTS(extra); i++)
    tdm_backend_release(gpu_bf16, extra[i]);
  device_clear(&d);
  problem_clear(&p);
}

/* The output gradient written as bf16 by the bn before, where the replica puts it (the
 * workspace's start): every backward candidate reads it there and leaves it alone. */
static void
test_dy16_ready(void)
{
  if (!have_gpu())
    return;
  const Case c = {2, 10, 10, 64, 64, 3, 1, 1};
  Problem p;
  problem_init(&p, &c, NULL);
  Device d;
  device_init(&d, gpu_bf16, &p, TRUE);
  uint16_t *dy16 = d.work;
  tdm_backend_to_bf16(gpu_bf16, dy16, d.dy, p.out);
  g_autofree float *nan = g_new(float, p.out);
  for (size_t i = 0; i < p.out; i++)
    nan[i] = NAN;
  tdm_backend_upload(gpu_bf16, d.dy, nan, p.out * 4); /* not to be read */
  d.a.dy16 = dy16;
  check_candidates(&d, &p, "bf16, dy16 from the bn", p.y_ref);
  /* And the engine's own choice, both directions at once. */
  float *dx = poisoned_b(gpu_bf16, p.in), *dw = poisoned_b(gpu_bf16, p.weights);
  d.a.dx = dx;
  d.a.dw = dw;
  if (tdm_backend_conv_engine_backward(gpu_bf16, &d.a)) {
    check_close_b(gpu_bf16, "engine backward, dx", dx, p.dx_ref, p.in, 0x1p-7);
    check_close_b(gpu_bf16, "engine backward, dw", dw, p.dw_ref, p.weights, 0x1p-7);
  } else {
    g_test_message("the engine left this backward to im2col (its choice)");
  }
  tdm_backend_release(gpu_bf16, dx);
  tdm_backend_release(gpu_bf16, dw);
  device_clear(&d);
  problem_clear(&p);
}

/* The output gradient as bf16 outside the workspace (torchvision's stem: its bn writes it
 * in place over the pool's in the gradient region, tdm-replica-private.h's
 * bn_dx_in_place()): every backward candidate reads it there and within the bound, the
 * workspace reserves nothing for it (the "im2col" candidate's need is the plan's count
 * without it, tdm_conv_engine_im2col_bytes()), and the engine's choice gives the bits it
 * gives with the same dy16 at the workspace's start. A 3×3 layer and a stem of 3 channels
 * (our own weight-gradient kernel's shape). */
static void
test_dy16_outside(void)
{
  if (!have_gpu())
    return;
  const Case shapes[] = {{2, 10, 10, 64, 64, 3, 1, 1}, {2, 40, 40, 3, 64, 7, 3, 2}};
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++) {
    const Case *c = &shapes[i];
    Problem p;
    problem_init(&p, c, NULL);
    Device d;
    device_init(&d, gpu_bf16, &p, TRUE);
    uint16_t *outside = on_b(gpu_bf16, NULL, p.out * 2);
    tdm_backend_to_bf16(gpu_bf16, outside, d.dy, p.out);
    poison_b(gpu_bf16, d.dy, p.out); /* not to be read */
    d.a.dy16 = outside;
    for (int dir = TDM_CONV_DGRAD; dir <= TDM_CONV_WGRAD; dir++)
      g_assert_cmpuint(
          tdm_cuda_conv_need_named(gpu_bf16, &d.a, dir, "im2col"), ==,
          tdm_conv_engine_im2col_bytes(&d.a.shape, dir, TDM_PRECISION_BF16, FALSE, TRUE));
    check_candidates(&d, &p, "bf16, dy16 outside the workspace", p.y_ref);
    /* The engine's choice, both directions, against the same dy16 at the workspace's
     * start: the same bits. */
    size_t dx_bytes = p.in * 4, dw_bytes = p.weights * 4;
    float *dx = poisoned_b(gpu_bf16, p.in), *dw = poisoned_b(gpu_bf16, p.weights);
    d.a.dx = dx;
    d.a.dw = dw;
    gboolean ran = tdm_backend_conv_engine_backward(gpu_bf16, &d.a);
    g_autofree float *dx_out = g_new(float, p.in), *dw_out = g_new(float, p.weights);
    tdm_backend_download(gpu_bf16, dx_out, dx, dx_bytes);
    tdm_backend_download(gpu_bf16, dw_out, dw, dw_bytes);
    tdm_backend_copy(gpu_bf16, d.work, outside, p.out * 2);
    d.a.dy16 = d.work;
    poison_b(gpu_bf16, dx, p.in);
    poison_b(gpu_bf16, dw, p.weights);
    gboolean ran_start = tdm_backend_conv_engine_backward(gpu_bf16, &d.a);
    g_autofree float *dx_start = g_new(float, p.in), *dw_start = g_new(float, p.weights);
    tdm_backend_download(gpu_bf16, dx_start, dx, dx_bytes);
    tdm_backend_download(gpu_bf16, dw_start, dw, dw_bytes);
    assert_ok(gpu_bf16);
    g_assert_cmpint(ran, ==, ran_start);
    if (ran) {
      check_close_b(gpu_bf16, "engine backward, dy16 outside, dw", dw, p.dw_ref, p.weights,
                    0x1p-7);
      g_assert_cmpmem(dw_out, dw_bytes, dw_start, dw_bytes);
      g_assert_cmpmem(dx_out, dx_bytes, dx_start, dx_bytes);
    } else {
      g_test_message("the engine left this backward to im2col (its choice)");
    }
    tdm_backend_release(gpu_bf16, dx);
    tdm_backend_release(gpu_bf16, dw);
    tdm_backend_release(gpu_bf16, outside);
    device_clear(&d);
    problem_clear(&p);
  }
}

/* A forward whose output is stored as bf16 (y16: a conv whose only reader is the bn
 * after it), plain and from an input a bn before stored as bf16 and normalizes as the
 * conv reads it: every candidate's y16, widened, against the float32 reference of the
 * same (bf16) input, within the bf16 bound (the output's rounding is one of its three). */
static void
test_stored_bf16(void)
{
  if (!have_gpu())
    return;
  const Case cases16[] = {
    {3, 8, 8, 64, 64, 3, 1, 1},
    {2, 11, 13, 17, 24, 3, 1, 2},
    {2, 15, 15, 64, 128, 1, 0, 2},
    {2, 6, 7, 64, 64, 1, 0, 1},
    {1, 224, 224, 3, 64, 7, 3, 2}, /* the stem, whose output its bn reads as bf16 */
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases16); i++) {
    const Case *c = &cases16[i];
    for (int with_bn = 0; with_bn < 2; with_bn++) {
      size_t in = (size_t)c->n * c->h * c->w * c->c;
      g_autofree uint16_t *x16 = NULL;
      g_autofree float *x = random_bf16_input(in, &x16);
      g_autofree float *bn = random_bn(c->c);
      g_autofree float *xn = g_new(float, in);
      if (with_bn)
        tdm_backend_bn_forward(cpu, xn, x, TDM_DTYPE_F32, bn, bn + c->c, bn + 2 * c->c,
                               bn + 3 * c->c, (int)(in / c->c), c->c, true);
      Problem p;
      problem_init(&p, c, with_bn ? xn : x);
      memcpy(p.x, x, in * 4);
      Device d;
      device_init(&d, gpu_bf16, &p, TRUE);
      float *dbn = on_b(gpu_bf16, bn, 4 * (size_t)c->c * 4);
      uint16_t *dx16 = on_b(gpu_bf16, x16, in * 2);
      uint16_t *y16 = on_b(gpu_bf16, NULL, p.out * 2);
      if (with_bn) {
        d.a.x = (const float *)dx16; /* the type says what it holds */
        d.a.x_type = TDM_DTYPE_BF16;
        d.a.bn_mean = dbn;
        d.a.bn_invstd = dbn + c->c;
        d.a.bn_gamma = dbn + 2 * c->c;
        d.a.bn_beta = dbn + 3 * c->c;
        d.a.bn_relu = true;
      }
      d.a.y = NULL;
      d.a.y16 = y16;
      g_autofree char *what =
          g_strdup_printf("bf16 y16%s n%d %dx%dx%d→%d k%d p%d s%d", with_bn ? " x16 bn" : "",
                          c->n, c->h, c->w, c->c, c->out_c, c->kernel, c->pad, c->stride);
      g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(gpu_bf16, &d.a,
                                                                 TDM_CONV_FORWARD);
      g_test_message("%s: %u candidates", what, names->len);
      if (names->len == 0 && c->c % 8 == 0) {
        g_test_message("FAILED %s: no candidate", what);
        g_test_fail();
      }
      g_autofree uint16_t *host = g_new(uint16_t, p.out);
      g_autofree float *wide = g_new(float, p.out);
      for (guint k = 0; k < names->len; k++) {
        const char *name = g_ptr_array_index(names, k);
        memset(host, 0xff, p.out * 2); /* NaN */
        tdm_backend_upload(gpu_bf16, y16, host, p.out * 2);
        g_assert_true(tdm_cuda_conv_run_named(gpu_bf16, &d.a, TDM_CONV_FORWARD, name));
        tdm_backend_download(gpu_bf16, host, y16, p.out * 2);
        assert_ok(gpu_bf16);
        for (size_t e = 0; e < p.out; e++)
          wide[e] = bf16_value(host[e]);
        double rel = rel_error(wide, p.y_ref, p.out);
        g_test_message("%s %s: %.3g", what, name, rel);
        if (!(rel <= 0x1p-7)) {
          g_test_message("FAILED %s %s: %.3g", what, name, rel);
          g_test_fail();
        }
      }
      tdm_backend_release(gpu_bf16, dbn);
      tdm_backend_release(gpu_bf16, dx16);
      tdm_backend_release(gpu_bf16, y16);
      device_clear(&d);
      problem_clear(&p);
    }
  }
}

/* An input gradient written as bf16 (dx16: the gradient the bn before the conv reads
 * so): every input-gradient candidate's dx16, widened, against the float32 reference
 * within the bf16 bound (the output's rounding is one more of 2⁻⁸), and the engine's
 * own choice the same; dx itself is left alone. */
static void
test_dx16(void)
{
  if (!have_gpu())
    return;
  const Case cases16[] = {
      {3, 8, 8, 64, 64, 3, 1, 1},
      {2, 11, 13, 17, 24, 3, 1, 2},
      {2, 15, 15, 64, 128, 1, 0, 2},
      {2, 6, 7, 64, 64, 1, 0, 1},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases16); i++) {
    const Case *c = &cases16[i];
    Problem p;
    problem_init(&p, c, NULL);
    Device d;
    device_init(&d, gpu_bf16, &p, TRUE);
    uint16_t *dx16 = on_b(gpu_bf16, NULL, p.in * 2);
    poison_b(gpu_bf16, d.dx, p.in);
    d.a.dx = NULL;
    d.a.dx16 = dx16;
    g_autofree char *what = g_strdup_printf("bf16 dx16 n%d %dx%dx%d→%d k%d p%d s%d", c->n, c->h,
                                            c->w, c->c, c->out_c, c->kernel, c->pad, c->stride);
    g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(gpu_bf16, &d.a, TDM_CONV_DGRAD);
    g_test_message("%s: %u candidates", what, names->len);
    if (names->len == 0 && c->c % 8 == 0) {
      g_test_message("FAILED %s: no candidate", what);
      g_test_fail();
    }
    g_autofree uint16_t *host = g_new(uint16_t, p.in);
    g_autofree float *wide = g_new(float, p.in);
    for (guint k = 0; k <= names->len; k++) {
      const char *name = k < names->len ? g_ptr_array_index(names, k) : "the engine's choice";
      memset(host, 0xff, p.in * 2); /* NaN */
      tdm_backend_upload(gpu_bf16, dx16, host, p.in * 2);
      if (k < names->len) {
        g_assert_true(tdm_cuda_conv_run_named(gpu_bf16, &d.a, TDM_CONV_DGRAD, name));
      } else if (!tdm_backend_conv_engine_backward(gpu_bf16, &d.a)) {
        g_test_message("%s: the engine left this backward to the replica", what);
        break;
      }
      tdm_backend_download(gpu_bf16, host, dx16, p.in * 2);
      assert_ok(gpu_bf16);
      for (size_t e = 0; e < p.in; e++)
        wide[e] = bf16_value(host[e]);
      double rel = rel_error(wide, p.dx_ref, p.in);
      g_test_message("%s %s: %.3g", what, name, rel);
      if (!(rel <= 0x1p-7)) {
        g_test_message("FAILED %s %s: %.3g", what, name, rel);
        g_test_fail();
      }
    }
    g_autofree float *untouched = g_new(float, p.in);
    tdm_backend_download(gpu_bf16, untouched, d.dx, p.in * 4);
    for (size_t e = 0; e < p.in; e++)
      g_assert_true(isnan(untouched[e]));
    tdm_backend_release(gpu_bf16, dx16);
    device_clear(&d);
    problem_clear(&p);
  }
}

/* An input stored as bf16 without a bn (a residual block's input in a bf16 run): every
 * candidate of the forward and of the weight gradient reads it as it is, and every
 * direction matches the float32 reference of the same (bf16) values within the bf16
 * bound. */
static void
test_block_input16(void)
{
  if (!have_gpu())
    return;
  const Case cases16[] = {
    {3, 8, 8, 64, 64, 3, 1, 1},     /* a block's first conv */
    {2, 11, 13, 17, 24, 3, 1, 2},   /* strided, 17 channels */
    {2, 15, 15, 64, 128, 1, 0, 2},  /* a projection */
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases16); i++) {
    const Case *c = &cases16[i];
    size_t in = (size_t)c->n * c->h * c->w * c->c;
    g_autofree uint16_t *x16 = NULL;
    g_autofree float *x = random_bf16_input(in, &x16);
    Problem p;
    problem_init(&p, c, x);
    Device d;
    device_init(&d, gpu_bf16, &p, TRUE);
    uint16_t *dx16 = on_b(gpu_bf16, x16, in * 2);
    d.a.x = (const float *)dx16; /* the type says what it holds */
    d.a.x_type = TDM_DTYPE_BF16;
    g_autofree char *what = g_strdup_printf("bf16 x16 n%d %dx%dx%d→%d k%d p%d s%d", c->n, c->h,
                                            c->w, c->c, c->out_c, c->kernel, c->pad, c->stride);
    check_candidates(&d, &p, what, p.y_ref);
    tdm_backend_release(gpu_bf16, dx16);
    device_clear(&d);
    problem_clear(&p);
  }
}

void
test_cuda_conv_add_bf16(void)
{
  g_test_add_func("/cuda-conv/bn-prologue", test_bn_prologue);
  g_test_add_func("/cuda-conv/dy16-ready", test_dy16_ready);
  g_test_add_func("/cuda-conv/dy16-outside", test_dy16_outside);
  g_test_add_func("/cuda-conv/stored-bf16", test_stored_bf16);
  g_test_add_func("/cuda-conv/dx16", test_dx16);
  g_test_add_func("/cuda-conv/block-input-bf16", test_block_input16);
}

#endif
