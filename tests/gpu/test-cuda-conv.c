/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv.c — the CUDA backend's convolution engine (suite gpu): every candidate
 * of every direction (cuDNN's plans, our own kernel, im2col with cuBLAS) against the
 * CPU's im2col and GEMM on fresh random inputs, for odd sizes, strides 1 and 2, 1×1,
 * 3×3 and 7×7 kernels, padding 0 to 3, 3, 17, 64 and 512 channels, in float32 and
 * bf16, each run again in a workspace of exactly the bytes it says it needs; a bn
 * normalized as the conv reads its input; an output gradient the bn before wrote as
 * bf16 where the replica puts it (the workspace's start); an output stored as bf16 (y16) from an input
 * stored so (the bn's); an input stored as bf16 read as it is (a block's); the choice timed, remembered on disk and
 * found there by another backend; --exact's rule (the same choice on two backends,
 * the same bits twice); the choice within the workspace budget, reached through a
 * workspace grown as the engine asks (the replica's first run), column-free for the
 * 224-px stem and a ResNet's 3×3 and 1×1 layers; batches whose columns come in chunks;
 * cuDNN's forward and weight gradient of a bn's bf16 output in chunks of samples where
 * the whole normalized input is more than a chunk (an odd batch among them).
 *
 * Bounds: ||gpu − cpu|| / ||cpu|| against the float32 reference. float32 runs (no TF32,
 * no Winograd: tdm-backend-cuda-conv-cudnn.c refuses them) differ only in the order of the sums:
 * 16 · 2⁻²⁴ · √L for a reduction of length L. bf16 runs round each operand (2⁻⁹
 * relative) and may round the output: three such errors, each at most 2⁻⁹ and
 * independent across terms, stay under 2⁻⁷. Outputs are poisoned with NaN first.
 * Skips without a CUDA GPU.
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "tdm-backend-cuda.h"
#include "tdm-backend-cuda-conv-cache.h"
#include "tdm-conv-columns.h"
#include "tdm-cudnn.h"
#include "test-cuda-conv.h"
#include "test-cuda-layers.h"

#include <glib/gstdio.h>

TdmBackend *cpu;
TdmBackend *gpu;
TdmBackend *gpu_bf16;

typedef struct {
  int n, h, w, c, out_c, kernel, pad, stride;
} Case;

static const Case cases[] = {
  {2, 9, 7, 3, 16, 3, 1, 1},      /* a first layer: 3 channels, odd sizes */
  {2, 11, 13, 17, 24, 3, 1, 2},   /* 17 channels, stride 2 */
  {3, 8, 8, 64, 64, 3, 1, 1},     /* a ResNet's 3×3 */
  {2, 15, 15, 64, 128, 1, 0, 2},  /* its projection: 1×1 at stride 2 */
  {3, 9, 11, 17, 24, 1, 0, 2},    /* 1×1 at stride 2: 17 channels, odd sizes */
  {2, 7, 5, 512, 512, 1, 0, 2},   /* 1×1 at stride 2: 512 channels, odd sizes */
  {2, 6, 7, 64, 64, 1, 0, 1},     /* 1×1 at stride 1: the input is its own columns */
  {3, 9, 7, 17, 24, 1, 0, 1},     /* 1×1 at stride 1: 17 channels, odd sizes */
  {2, 7, 5, 512, 256, 1, 0, 1},   /* 1×1 at stride 1: 512 channels (a bottleneck's) */
  {2, 9, 11, 64, 256, 1, 0, 1},   /* 1×1 at stride 1: a bottleneck's expansion */
  {2, 15, 13, 256, 512, 1, 0, 2}, /* 1×1 at stride 2: ResNet-50's downsampling */
  {2, 13, 11, 3, 32, 7, 3, 2},    /* a 7×7 stem, padding 3 */
  {2, 224, 224, 3, 64, 7, 3, 2},  /* torchvision's stem at 224 px */
  {2, 5, 5, 512, 512, 3, 1, 1},   /* 512 channels */
  {1, 7, 9, 17, 8, 3, 2, 1},      /* padding 2 */
  {2, 9, 9, 64, 32, 3, 0, 2},     /* padding 0 at stride 2 */
};

/* count random values rounded to bf16: their bits in *bits, the values returned. */
static float *
random_bf16_input(size_t count, uint16_t **bits)
{
  float *x = random_floats(count, -2, 3);
  *bits = g_new(uint16_t, count);
  for (size_t e = 0; e < count; e++) {
    (*bits)[e] = bf16_bits(x[e]);
    x[e] = bf16_value((*bits)[e]);
  }
  return x;
}

/* A bn's mean, invstd, gamma and beta for c channels, one after the other: the invstd
 * between 0.5 and 1.5. */
static float *
random_bn(int c)
{
  float *bn = random_floats(4 * (size_t)c, -0.5, 0.5);
  for (int ch = 0; ch < c; ch++)
    bn[c + ch] = 0.5f + fabsf(bn[c + ch]) * 2;
  return bn;
}

/* A case's host data and CPU reference. */
typedef struct {
  TdmConvShape s;
  size_t in, out, weights, rows, k;
  float *x, *w, *dy;
  float *y_ref, *dx_ref, *dw_ref;
} Problem;

static void
problem_init(Problem *p, const Case *c, const float *x_override)
{
  memset(p, 0, sizeof *p);
  p->s = (TdmConvShape){c->n, c->h, c->w, c->c, c->out_c, c->kernel, c->pad, c->stride};
  int oh = tdm_conv_out_h(&p->s), ow = tdm_conv_out_w(&p->s);
  p->rows = (size_t)c->n * oh * ow;
  p->k = (size_t)c->kernel * c->kernel * c->c;
  p->in = (size_t)c->n * c->h * c->w * c->c;
  p->out = p->rows * c->out_c;
  p->weights = (size_t)c->out_c * p->k;
  p->x = random_floats(p->in, -1, 1);
  p->w = random_floats(p->weights, -1, 1);
  p->dy = random_floats(p->out, -1, 1);
  const float *x = x_override != NULL ? x_override : p->x;
  g_autofree float *col = g_new(float, p->rows * p->k);
  tdm_backend_im2col(cpu, col, x, c->n, c->h, c->w, c->c, c->kernel, c->kernel, c->pad,
                     c->stride);
  int rows = (int)p->rows, k = (int)p->k;
  p->y_ref = g_new(float, p->out);
  tdm_backend_gemm(cpu, false, true, rows, c->out_c, k, 1.0f, col, k, p->w, k, 0.0f, p->y_ref,
                   c->out_c);
  p->dw_ref = g_new(float, p->weights);
  tdm_backend_gemm(cpu, true, false, c->out_c, k, rows, 1.0f, p->dy, c->out_c, col, k, 0.0f,
                   p->dw_ref, k);
  tdm_backend_gemm(cpu, false, false, rows, k, c->out_c, 1.0f, p->dy, c->out_c, p->w, k, 0.0f,
                   col, k);
  p->dx_ref = g_new(float, p->in);
  tdm_backend_col2im(cpu, p->dx_ref, col, c->n, c->h, c->w, c->c, c->kernel, c->kernel, c->pad,
                     c->stride);
  assert_ok(cpu);
}

static void
problem_clear(Problem *p)
{
  g_free(p->x);
  g_free(p->w);
  g_free(p->dy);
  g_free(p->y_ref);
  g_free(p->dx_ref);
  g_free(p->dw_ref);
}

/* The bound for a direction: its reduction length L and the backend's precision. */
static double
bound(TdmBackend *b, const Problem *p, TdmConvDirection dir)
{
  if (b->precision == TDM_PRECISION_BF16)
    return 0x1p-7;
  double length = dir == TDM_CONV_FORWARD ? (double)p->k
                  : dir == TDM_CONV_WGRAD ? (double)p->rows
                                          : (double)p->s.kernel * p->s.kernel * p->s.out_c;
  return 16.0 * 0x1p-24 * sqrt(length);
}

/* The device side of a problem on backend b: its buffers and the engine's call. */
typedef struct {
  TdmBackend *b;
  TdmConvArgs a;
  float *x, *w, *dy, *y, *dx, *dw;
  uint16_t *w16;
  void *work;
} Device;

static void
device_init(Device *d, TdmBackend *b, const Problem *p, gboolean with_w16)
{
  memset(d, 0, sizeof *d);
  d->b = b;
  d->x = on_b(b, p->x, p->in * 4);
  d->w = on_b(b, p->w, p->weights * 4);
  d->dy = on_b(b, p->dy, p->out * 4);
  d->y = poisoned_b(b, p->out);
  d->dx = poisoned_b(b, p->in);
  d->dw = poisoned_b(b, p->weights);
  if (with_w16) {
    d->w16 = on_b(b, NULL, p->weights * 2);
    tdm_backend_to_bf16(b, d->w16, d->w, p->weights);
  }
  /* The replica's buffer is its network's widest layer's float32 columns, so a layer has
   * at least its own and mostly more: here its own, or room for a bf16 copy of each
   * operand and cuDNN's workspace where that is larger (a network's first layers'
   * columns hold those of a later 1×1 or 512-channel layer several times over). */
  size_t work_bytes = MAX(p->rows * p->k * 4,
                          (p->in + p->out + p->weights) * 2 * 2 + ((size_t)8 << 20));
  d->work = on_b(b, NULL, work_bytes);
  d->a = (TdmConvArgs){.shape = p->s, .x = d->x, .w = d->w, .w16 = d->w16, .y = d->y,
                       .dy = d->dy, .dx = d->dx, .dw = d->dw, .work = d->work,
                       .work_bytes = work_bytes};
}

static void
device_clear(Device *d)
{
  void *all[] = {d->x, d->w, d->dy, d->y, d->dx, d->dw, d->w16, d->work};
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    if (all[i] != NULL)
      tdm_backend_release(d->b, all[i]);
}

static const char *const direction_names[] = {"forward", "dgrad", "wgrad"};

/* Every candidate of every direction against the reference; counts cuDNN's. */
static int
check_candidates(Device *d, const Problem *p, const char *what, const float *y_ref)
{
  TdmBackend *b = d->b;
  int cudnn = 0;
  for (int dir = TDM_CONV_FORWARD; dir <= TDM_CONV_WGRAD; dir++) {
    /* A bn's normalized input is the forward's; a dy16 the bn wrote, the backward's. */
    if ((dir != TDM_CONV_FORWARD && d->a.bn_mean != NULL) ||
        (dir == TDM_CONV_FORWARD && d->a.dy16 != NULL))
      continue;
    g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(b, &d->a, dir);
    /* None is an answer (the replica then composes the conv itself), but not for the
     * shapes every ResNet has. */
    g_test_message("%s %s: %u candidates", what, direction_names[dir], names->len);
    if (names->len == 0 && p->s.c % 8 == 0) {
      g_test_message("FAILED %s %s: no candidate", what, direction_names[dir]);
      g_test_fail();
    }
    float *target = dir == TDM_CONV_FORWARD ? d->y : dir == TDM_CONV_DGRAD ? d->dx : d->dw;
    const float *ref = dir == TDM_CONV_FORWARD ? y_ref : dir == TDM_CONV_DGRAD ? p->dx_ref
                                                                               : p->dw_ref;
    size_t count = dir == TDM_CONV_FORWARD ? p->out : dir == TDM_CONV_DGRAD ? p->in : p->weights;
    for (guint i = 0; i < names->len; i++) {
      const char *name = g_ptr_array_index(names, i);
      cudnn += g_str_has_prefix(name, "cudnn:");
      g_autofree float *nan = g_new(float, count);
      for (size_t e = 0; e < count; e++)
        nan[e] = NAN;
      g_autofree char *label = g_strdup_printf("%s %s %s", what, direction_names[dir], name);
      /* Candidates are offered whatever the workspace holds (the engine asks for the
       * room to run them): one that needs more than the test's buffer is refused
       * there, and runs in a workspace of its need below. */
      size_t need = tdm_cuda_conv_need_named(b, &d->a, dir, name);
      tdm_backend_upload(b, target, nan, count * 4);
      if (need <= d->a.work_bytes) {
        g_assert_true(tdm_cuda_conv_run_named(b, &d->a, dir, name));
        check_close_b(b, label, target, ref, count, bound(b, p, dir));
      } else {
        g_assert_false(tdm_cuda_conv_run_named(b, &d->a, dir, name));
        assert_ok(b);
        g_test_message("%s needs %zu bytes, more than the %zu given: refused", label, need,
                       d->a.work_bytes);
      }
      /* Again in a workspace of exactly its need (a dy16 the bn wrote at its start
       * copied over): what a replica sized by its choices gives it. A plan may need
       * none (cuDNN's fp32 engines often do): it then gets 16 bytes, room for nothing
       * a convolution could use, as the engine wants a workspace to point at. */
      if (need > ((size_t)2 << 30)) {
        g_test_message("%s needs %zu bytes: not run", label, need);
        continue;
      }
      if (d->a.dy16 != NULL)
        g_assert_cmpuint(need, >=, p->out * 2);
      void *exact = on_b(b, NULL, MAX(need, 16));
      if (d->a.dy16 != NULL)
        tdm_backend_copy(b, exact, d->a.work, p->out * 2);
      TdmConvArgs tight = d->a;
      tight.work = exact;
      tight.work_bytes = MAX(need, 16);
      tight.dy16 = d->a.dy16 != NULL ? exact : NULL;
      tdm_backend_upload(b, target, nan, count * 4);
      g_assert_true(tdm_cuda_conv_run_named(b, &tight, dir, name));
      g_autofree char *tight_label = g_strdup_printf("%s in %zu bytes", label, need);
      check_close_b(b, tight_label, target, ref, count, bound(b, p, dir));
      tdm_backend_release(b, exact);
    }
  }
  return cudnn;
}

static void
test_candidates(void)
{
  if (!have_gpu())
    return;
  TdmBackend *backends[2] = {gpu, gpu_bf16};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    const Case *c = &cases[i];
    for (int prec = 0; prec < 2; prec++) {
      TdmBackend *b = backends[prec];
      Problem p;
      problem_init(&p, c, NULL);
      Device d;
      device_init(&d, b, &p, prec == 1 && i % 2 == 0);
      g_autofree char *what = g_strdup_printf("%s n%d %dx%dx%d→%d k%d p%d s%d",
                                              prec ? "bf16" : "fp32", c->n, c->h, c->w, c->c,
                                              c->out_c, c->kernel, c->pad, c->stride);
      int cudnn = check_candidates(&d, &p, what, p.y_ref);
      /* Where cuDNN is there, the common shapes must have its plans: a graph that no
       * engine takes would otherwise pass unnoticed. */
      if (tdm_cudnn_get() != NULL && c->c == 64 && cudnn == 0) {
        g_test_message("FAILED %s: cuDNN is loaded but offered no plan", what);
        g_test_fail();
      }
      device_clear(&d);
      problem_clear(&p);
    }
  }
}

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
    g_autofree float *nan = g_new(float, p.in);
    for (size_t e = 0; e < p.in; e++)
      nan[e] = NAN;
    tdm_backend_upload(gpu_bf16, d.dx, nan, p.in * 4);
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

/* Chosen by timing, written to the cache file; a second backend finds the choice there
 * and does not time it (its report says 0 ms). */
static void
test_choice_cached(void)
{
  if (!have_gpu())
    return;
  g_autofree char *dir = g_dir_make_tmp("tandem-conv-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "choices.txt", NULL);
  g_setenv("TANDEM_CONV_CACHE", path, TRUE);
  tdm_conv_cache_reset();
  const Case c = {4, 12, 12, 64, 64, 3, 1, 1};
  Problem p;
  problem_init(&p, &c, NULL);
  g_autoptr(GError) error = NULL;
  TdmBackend *first = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  Device d;
  device_init(&d, first, &p, TRUE);
  g_autofree char *chosen = g_strdup(tdm_cuda_conv_chosen(first, &d.a, TDM_CONV_FORWARD));
  g_assert_nonnull(chosen);
  g_test_message("chosen: %s", chosen);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_assert_true(g_str_has_prefix(text, "tandem-conv-choices 3\n"));
  g_autofree char *entry = g_strdup_printf("\t%s\t", chosen);
  g_assert_nonnull(strstr(text, entry));
  TdmConvChoices counts;
  tdm_backend_conv_choices(first, &counts);
  g_assert_cmpint(counts.cudnn + counts.own + counts.im2col, ==, 1);
  device_clear(&d);
  tdm_backend_free(first);

  tdm_conv_cache_reset();
  TdmBackend *second = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  device_init(&d, second, &p, TRUE);
  g_assert_cmpstr(tdm_cuda_conv_chosen(second, &d.a, TDM_CONV_FORWARD), ==, chosen);
  g_autofree char *report = tdm_cuda_conv_report(second);
  g_test_message("%s", report);
  g_assert_nonnull(strstr(report, "0.0000 ms"));
  device_clear(&d);
  tdm_backend_free(second);
  problem_clear(&p);
  g_unlink(path);
  g_rmdir(dir);
  g_unsetenv("TANDEM_CONV_CACHE");
  tdm_conv_cache_reset();
}

/* One engine call as the replica makes it: from a workspace of 16 bytes, grown to what
 * the engine asks for (room to time its candidates, then its choice's need) and tried
 * again, at most three times. TRUE when the engine ran it; *need the choice's bytes. */
static gboolean
engine_call_grown(Device *d, gboolean backward, size_t *need)
{
  TdmBackend *b = d->b;
  TdmConvArgs a = d->a;
  size_t bytes = 16;
  void *work = on_b(b, NULL, bytes);
  gboolean took = FALSE;
  for (int tries = 0; tries <= 3; tries++) {
    a.work = work;
    a.work_bytes = bytes;
    a.work_needed = need;
    took = backward ? tdm_backend_conv_engine_backward(b, &a)
                    : tdm_backend_conv_engine_forward(b, &a);
    assert_ok(b);
    if (took || *need <= bytes)
      break;
    g_test_message("the engine asks for %zu bytes", *need);
    tdm_backend_release(b, work);
    bytes = *need;
    work = on_b(b, NULL, bytes);
  }
  if (took)
    g_assert_cmpuint(*need, <=, bytes);
  tdm_backend_synchronize(b);
  tdm_backend_release(b, work);
  return took;
}

/* The engine's choice within its workspace budget, reached as the replica reaches it
 * (a workspace grown on demand): the result against the CPU; where a candidate without
 * columns takes the shape (cuDNN's, for the stem and a ResNet's 3×3), a column-free choice
 * needs less than the bf16 columns, which are many times the operands there. */
static void
test_grown_workspace(void)
{
  if (!have_gpu())
    return;
  const Case grown[] = {
    {2, 224, 224, 3, 64, 7, 3, 2}, /* the stem at 224 px */
    {4, 28, 28, 64, 64, 3, 1, 1},
    {4, 28, 28, 64, 128, 1, 0, 2},
  };
  TdmBackend *backends[2] = {gpu, gpu_bf16};
  for (guint i = 0; i < G_N_ELEMENTS(grown); i++) {
    for (int prec = 0; prec < 2; prec++) {
      TdmBackend *b = backends[prec];
      const Case *c = &grown[i];
      Problem p;
      problem_init(&p, c, NULL);
      Device d;
      device_init(&d, b, &p, prec == 1);
      /* The stem's input gradient is never asked for (a first layer). */
      if (c->c == 3)
        d.a.dx = NULL;
      g_autofree char *what = g_strdup_printf("%s n%d %dx%dx%d→%d k%d s%d grown",
                                              prec ? "bf16" : "fp32", c->n, c->h, c->w, c->c,
                                              c->out_c, c->kernel, c->stride);
      size_t columns = p.rows * p.k * (prec ? 2 : 4);
      for (int backward = 0; backward < 2; backward++) {
        size_t need = 0;
        gboolean took = engine_call_grown(&d, backward, &need);
        TdmConvDirection dir = backward ? TDM_CONV_WGRAD : TDM_CONV_FORWARD;
        const char *chosen = tdm_cuda_conv_chosen(b, &d.a, dir);
        g_test_message("%s %s: %s, chosen %s, needs %zu bytes (columns %zu)", what,
                       backward ? "backward" : "forward", took ? "ran" : "declined",
                       chosen != NULL ? chosen : "none", need, columns);
        g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(b, &d.a, dir);
        gboolean column_free = FALSE;
        for (guint k = 0; k < names->len; k++)
          column_free = column_free || !g_str_equal(g_ptr_array_index(names, k), "im2col");
        /* With cuDNN, every one of these shapes has a way without columns in bf16 (the
         * stem's by its channels padded to 8, ":c8"). */
        if (tdm_cudnn_get() != NULL && !column_free) {
          g_test_message("%s%s: only im2col takes it", prec ? "FAILED " : "", what);
          if (prec)
            g_test_fail();
        }
        if (!took) {
          /* Declined: the replica composes it (im2col chosen, the replica's own way). */
          g_assert_cmpstr(chosen, ==, "im2col");
          continue;
        }
        /* A column-free choice needs less than the columns. Which one wins is timed: at
         * small n im2col may (0.012 against cuDNN's 0.016 ms on an H100), and then its
         * columns are what it needs. */
        if (column_free && c->kernel > 1 && chosen != NULL && !g_str_equal(chosen, "im2col"))
          g_assert_cmpuint(need, <, columns);
        if (backward) {
          check_close_b(b, what, d.dw, p.dw_ref, p.weights, bound(b, &p, TDM_CONV_WGRAD));
          if (d.a.dx != NULL)
            check_close_b(b, what, d.dx, p.dx_ref, p.in, bound(b, &p, TDM_CONV_DGRAD));
        } else {
          check_close_b(b, what, d.y, p.y_ref, p.out, bound(b, &p, TDM_CONV_FORWARD));
        }
      }
      device_clear(&d);
      problem_clear(&p);
    }
  }
}

/* Batches whose columns are more than a chunk holds (tdm-conv-columns.h: 64 MiB), odd
 * sizes, so that the last chunk is short: every candidate against the CPU as
 * test_candidates checks them (im2col's chunks among them), and im2col's own: its need
 * is tdm_conv_engine_im2col_bytes()'s (what the memory plan counts), less than the
 * whole batch's columns, and its weight gradient, summed over the chunks in their
 * order, and its input gradient are the same bits twice. The float32 inputs of the
 * projection and of the 1×1 at stride 1 are more than 64 MiB as bf16, so cuDNN's
 * forwards and float32 weight gradients of them run in chunks of samples (two sizes:
 * 4 and 3, 9 and 8), as do the padded stem's of the last case (43 and 42). Their large input gradients (the last four's) are where cuDNN's
 * bf16 results for a float32 destination are widened in place (tdm-backend-cuda-conv-candidates.c's
 * widen_in_place()), checked against the CPU with the rest. */
static const Case chunked_cases[] = {
  {21, 225, 223, 3, 16, 7, 3, 2}, /* a 7×7 stem: 18 bf16 samples a chunk, then 3 */
  {17, 61, 59, 64, 24, 3, 1, 1},  /* 3×3, 64 channels: 16 then 1 (float32: 8, 8, 1) */
  {15, 255, 253, 17, 8, 3, 1, 2}, /* 3×3 at stride 2, 17 channels: 13 then 2 */
  {17, 361, 359, 64, 16, 1, 0, 2}, /* a projection, 1×1 at stride 2: 16 then 1 */
  {17, 181, 179, 64, 16, 1, 0, 1}, /* 1×1 at stride 1: bf16 copies of x, 16 then 1 */
  {3, 255, 257, 64, 8, 3, 1, 1},  /* one sample's columns more than a chunk: 1 each */
  /* The stem at 224 px, its input padded to 8 channels (102 MB as bf16): cuDNN's ":c8"
   * forward and float32 weight gradient in chunks of 43 and 42 samples. */
  {85, 224, 224, 3, 16, 7, 3, 2},
};

static void
test_chunked(void)
{
  if (!have_gpu())
    return;
  TdmBackend *backends[2] = {gpu, gpu_bf16};
  for (size_t i = 0; i < G_N_ELEMENTS(chunked_cases); i++) {
    const Case *c = &chunked_cases[i];
    for (int prec = 0; prec < 2; prec++) {
      TdmBackend *b = backends[prec];
      Problem p;
      problem_init(&p, c, NULL);
      Device d;
      device_init(&d, b, &p, prec == 1);
      g_autofree char *what = g_strdup_printf("chunked %s n%d %dx%dx%d→%d k%d p%d s%d",
                                              prec ? "bf16" : "fp32", c->n, c->h, c->w, c->c,
                                              c->out_c, c->kernel, c->pad, c->stride);
      size_t whole = p.rows * p.k * (prec ? 2 : 4);
      gboolean direct = c->kernel == 1 && c->stride == 1 && c->pad == 0;
      if (prec == 1 || !direct)
        g_assert_cmpuint(whole, >, TDM_CONV_CHUNK_BYTES);
      check_candidates(&d, &p, what, p.y_ref);
      for (int dir = TDM_CONV_FORWARD; dir <= TDM_CONV_WGRAD; dir++) {
        size_t need = tdm_cuda_conv_need_named(b, &d.a, dir, "im2col");
        g_assert_cmpuint(need, ==, tdm_conv_engine_im2col_bytes(&p.s, dir, prec == 1, FALSE));
        /* Whole columns would need all n samples' beside the same scratch (in bf16,
         * the weights and, backward, dy as bf16, rounded up as the engine lays them
         * out); the chunks need less, and at least one sample's columns. */
        size_t scratch = 0;
        if (prec == 1) {
          size_t dy16 = dir != TDM_CONV_FORWARD ? (p.rows * c->out_c * 2 + 15) / 16 * 16 : 0;
          scratch = (dy16 + (size_t)c->out_c * p.k * 2 + 255) / 256 * 256;
        }
        g_assert_cmpuint(need, <, scratch + whole);
        g_assert_cmpuint(need, >=, scratch + (direct && prec == 0 ? 0 : whole / c->n));
        if (dir == TDM_CONV_FORWARD)
          continue;
        float *target = dir == TDM_CONV_DGRAD ? d.dx : d.dw;
        size_t count = dir == TDM_CONV_DGRAD ? p.in : p.weights;
        g_autofree float *first = g_new(float, count), *second = g_new(float, count);
        for (int run = 0; run < 2; run++) {
          g_assert_true(tdm_cuda_conv_run_named(b, &d.a, dir, "im2col"));
          tdm_backend_download(b, run == 0 ? first : second, target, count * 4);
          assert_ok(b);
        }
        g_assert_cmpmem(first, count * 4, second, count * 4);
      }
      device_clear(&d);
      problem_clear(&p);
    }
  }
  /* --exact on the stem's chunked shape: the rule's choice, the same bits twice, and
   * within the bound of the CPU's. */
  g_autoptr(GError) error = NULL;
  TdmBackend *exact = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  exact->deterministic = true;
  Problem p;
  problem_init(&p, &chunked_cases[0], NULL);
  Device d;
  device_init(&d, exact, &p, TRUE);
  d.a.dx = NULL; /* a first layer */
  g_test_message("exact, chunked stem: wgrad %s",
                 tdm_cuda_conv_chosen(exact, &d.a, TDM_CONV_WGRAD));
  g_autofree float *first = g_new(float, p.weights), *second = g_new(float, p.weights);
  for (int run = 0; run < 2; run++) {
    /* Declined for im2col (the replica's own composition, in the same chunks): the
     * engine's im2col, the same operations. */
    if (!tdm_backend_conv_engine_backward(exact, &d.a))
      g_assert_true(tdm_cuda_conv_run_named(exact, &d.a, TDM_CONV_WGRAD, "im2col"));
    tdm_backend_download(exact, run == 0 ? first : second, d.dw, p.weights * 4);
    assert_ok(exact);
    if (run == 1)
      g_assert_cmpmem(first, p.weights * 4, second, p.weights * 4);
  }
  check_close_b(exact, "exact chunked stem wgrad", d.dw, p.dw_ref, p.weights,
                bound(exact, &p, TDM_CONV_WGRAD));
  device_clear(&d);
  problem_clear(&p);
  tdm_backend_free(exact);
}

/* A device side for test_bn_input_chunks on backend b: x stored as bf16 (x16), the bn's
 * statistics and affine (bn: mean, invstd, gamma, beta), the output as bf16. */
typedef struct {
  Device d;
  float *bn;
  uint16_t *x16, *y16;
} BnInput;

static void
bn_input_init(BnInput *in, TdmBackend *b, const Problem *p, const float *bn,
              const uint16_t *x16)
{
  int c = p->s.c;
  device_init(&in->d, b, p, TRUE);
  in->bn = on_b(b, bn, 4 * (size_t)c * 4);
  in->x16 = on_b(b, x16, p->in * 2);
  in->y16 = on_b(b, NULL, p->out * 2);
  TdmConvArgs *a = &in->d.a;
  a->x = (const float *)in->x16; /* the type says what it holds */
  a->x_type = TDM_DTYPE_BF16;
  a->bn_mean = in->bn;
  a->bn_invstd = in->bn + c;
  a->bn_gamma = in->bn + 2 * c;
  a->bn_beta = in->bn + 3 * c;
  a->bn_relu = true;
  a->y = NULL;
  a->y16 = in->y16;
  a->dx = NULL; /* the input gradient reads no input: nothing to chunk */
}

static void
bn_input_clear(BnInput *in)
{
  tdm_backend_release(in->d.b, in->bn);
  tdm_backend_release(in->d.b, in->x16);
  tdm_backend_release(in->d.b, in->y16);
  device_clear(&in->d);
}

/* The forward's y16 on in's backend, widened, against the reference: its relative error. */
static double
bn_input_forward_error(BnInput *in, const Problem *p, uint16_t *host, float *wide)
{
  tdm_backend_download(in->d.b, host, in->y16, p->out * 2);
  assert_ok(in->d.b);
  for (size_t e = 0; e < p->out; e++)
    wide[e] = bf16_value(host[e]);
  return rel_error(wide, p->y_ref, p->out);
}

/* NaN in in's y16. */
static void
bn_input_poison(BnInput *in, const Problem *p, uint16_t *host)
{
  memset(host, 0xff, p->out * 2);
  tdm_backend_upload(in->d.b, in->y16, host, p->out * 2);
}

/* A forward whose input a bn before stored as bf16 and the conv normalizes as it reads
 * it ("bn x16 y16"), where the whole normalized input is more than a chunk holds
 * (tdm-conv-columns.h: 64 MiB): cuDNN runs it in even chunks of samples ("cudnn:…:nM":
 * tdm-backend-cuda-conv-candidates.c's cudnn_chunks()), each with a plan for its size —
 * an odd batch (37 at 128 px: 19 then 18, two plans) and an even one (64: two of 32, one
 * plan). Every forward candidate and every weight-gradient one (summed over the chunks
 * in float32) against the CPU's convolution of the CPU's bn output, within the bf16
 * bound; the chunked ones within the budget the chunked columns set, so the engine may
 * choose them; forced to cuDNN (TANDEM_CONV=cudnn) through a workspace grown as the
 * replica grows it, the engine chooses a chunked plan and its result matches; a chunked
 * weight gradient is the same bits twice; under --exact the rule's choice is the same
 * bits twice. */
static void
test_bn_input_chunks(void)
{
  if (!have_gpu())
    return;
  const Case chunk_cases[] = {
    {37, 128, 128, 64, 16, 3, 1, 1}, /* 74 MiB of bf16 input: 19 + 18 */
    {64, 128, 128, 64, 16, 1, 0, 1}, /* 128 MiB: 32 + 32 */
  };
  gboolean cudnn = tdm_cudnn_get() != NULL;
  for (guint i = 0; i < G_N_ELEMENTS(chunk_cases); i++) {
    const Case *c = &chunk_cases[i];
    size_t in = (size_t)c->n * c->h * c->w * c->c;
    g_assert_cmpuint(in * 2, >, TDM_CONV_CHUNK_BYTES);
    TdmConvChunks chunks =
        tdm_conv_even_chunks(c->n, (size_t)c->h * c->w * c->c * 2, TDM_CONV_CHUNK_BYTES);
    g_autofree char *suffix = g_strdup_printf(":n%d", chunks.size);
    g_autofree uint16_t *x16 = NULL;
    g_autofree float *x = random_bf16_input(in, &x16);
    g_autofree float *bn = random_bn(c->c);
    g_autofree float *xn = g_new(float, in);
    tdm_backend_bn_forward(cpu, xn, x, TDM_DTYPE_F32, bn, bn + c->c, bn + 2 * c->c,
                           bn + 3 * c->c, (int)(in / c->c), c->c, true);
    Problem p;
    problem_init(&p, c, xn);
    BnInput main_in;
    bn_input_init(&main_in, gpu_bf16, &p, bn, x16);
    Device d = main_in.d;
    g_autofree char *what = g_strdup_printf("bn x16 y16 n%d %dx%dx%d→%d k%d (%d chunks of ≤ %d)",
                                            c->n, c->h, c->w, c->c, c->out_c, c->kernel,
                                            chunks.count, chunks.size);
    g_assert_cmpint(chunks.count, >, 1);
    g_autofree uint16_t *host = g_new(uint16_t, p.out);
    g_autofree float *wide = g_new(float, p.out);
    g_autofree float *dw_first = g_new(float, p.weights);
    g_autofree float *dw_again = g_new(float, p.weights);
    int forward_admitted = 0;
    for (int dir = TDM_CONV_FORWARD; dir <= TDM_CONV_WGRAD; dir += 2) {
      g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(gpu_bf16, &d.a, dir);
      /* The most the engine lets a candidate need: the chunked columns' budget. */
      guint64 budget = tdm_conv_budget(tdm_cuda_conv_need_named(gpu_bf16, &d.a, dir, "im2col"));
      int chunked = 0, admitted = 0;
      for (guint k = 0; k < names->len; k++) {
        const char *name = g_ptr_array_index(names, k);
        g_autofree char *label = g_strdup_printf("%s %s %s", what, direction_names[dir], name);
        size_t need = tdm_cuda_conv_need_named(gpu_bf16, &d.a, dir, name);
        gboolean in_chunks = g_str_has_suffix(name, suffix);
        chunked += in_chunks;
        admitted += in_chunks && need <= budget;
        /* Every cuDNN forward runs in chunks; of the weight gradients, those writing
         * float32 (their chunks' sums added in float32), while one writing bf16 (each
         * chunk's sum rounded) copies the whole input as before. */
        if (dir == TDM_CONV_FORWARD && g_str_has_prefix(name, "cudnn:"))
          g_assert_true(in_chunks);
        if (dir == TDM_CONV_WGRAD && g_str_has_prefix(name, "cudnn:"))
          g_assert_true(in_chunks == (strstr(name, ":f") != NULL));
        g_test_message("%s: needs %zu bytes (budget %" G_GUINT64_FORMAT ")", label, need,
                       budget);
        if (need > d.a.work_bytes) {
          g_test_message("%s: more than the test's workspace, not run", label);
          continue;
        }
        if (dir == TDM_CONV_FORWARD) {
          bn_input_poison(&main_in, &p, host);
          g_assert_true(tdm_cuda_conv_run_named(gpu_bf16, &d.a, dir, name));
          double rel = bn_input_forward_error(&main_in, &p, host, wide);
          g_test_message("%s: %.3g", label, rel);
          if (!(rel <= 0x1p-7)) {
            g_test_message("FAILED %s: %.3g", label, rel);
            g_test_fail();
          }
          continue;
        }
        for (int run = 0; run < 2; run++) {
          g_autofree float *nan = g_new(float, p.weights);
          for (size_t e = 0; e < p.weights; e++)
            nan[e] = NAN;
          tdm_backend_upload(gpu_bf16, d.dw, nan, p.weights * 4);
          g_assert_true(tdm_cuda_conv_run_named(gpu_bf16, &d.a, dir, name));
          tdm_backend_download(gpu_bf16, run == 0 ? dw_first : dw_again, d.dw, p.weights * 4);
          assert_ok(gpu_bf16);
        }
        g_assert_cmpmem(dw_first, p.weights * 4, dw_again, p.weights * 4);
        /* A plan writing bf16 over a reduction this long (a million rows) may round its
         * running sum more than once: cuDNN's engine 62 on the 1×1 case measured 0.0065
         * and 0.0100 on two H100 runs where every other candidate stayed near 0.0028
         * (the operands' and the output's roundings, 2⁻⁹ each). Two more bf16 roundings'
         * room for those (2⁻⁶); a float32 result keeps the operands' bound. Wrong
         * indices or a lost chunk would be off by the result itself. */
        gboolean rounds_sum = g_str_has_prefix(name, "cudnn:") && strstr(name, ":h") != NULL;
        check_close_b(gpu_bf16, label, d.dw, p.dw_ref, p.weights,
                      rounds_sum ? 0x1p-6 : 0x1p-7);
      }
      g_test_message("%s %s: %u candidates, %d in chunks, %d within the budget", what,
                     direction_names[dir], names->len, chunked, admitted);
      if (dir == TDM_CONV_FORWARD)
        forward_admitted = admitted;
      if (cudnn && dir == TDM_CONV_FORWARD && admitted == 0) {
        g_test_message("FAILED %s: cuDNN is loaded but no chunked forward is within the "
                       "budget", what);
        g_test_fail();
      }
    }

    /* Forced to cuDNN, as the replica calls the engine (a workspace grown on demand),
     * on a backend of its own (the choice is fresh): a chunked plan (the others are
     * not cuDNN's), within the bf16 bound. */
    if (cudnn && forward_admitted > 0) {
      g_autoptr(GError) error = NULL;
      TdmBackend *forced = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
      g_assert_no_error(error);
      g_setenv("TANDEM_CONV", "cudnn", TRUE);
      BnInput f;
      bn_input_init(&f, forced, &p, bn, x16);
      size_t need = 0;
      bn_input_poison(&f, &p, host);
      gboolean took = engine_call_grown(&f.d, FALSE, &need);
      const char *chosen = tdm_cuda_conv_chosen(forced, &f.d.a, TDM_CONV_FORWARD);
      g_test_message("%s forced to cuDNN: %s, %zu bytes", what, chosen, need);
      g_assert_true(took);
      g_assert_true(g_str_has_prefix(chosen, "cudnn:") && g_str_has_suffix(chosen, suffix));
      double rel = bn_input_forward_error(&f, &p, host, wide);
      if (!(rel <= 0x1p-7)) {
        g_test_message("FAILED %s forced: %.3g", what, rel);
        g_test_fail();
      }
      g_unsetenv("TANDEM_CONV");
      bn_input_clear(&f);
      tdm_backend_free(forced);

      /* --exact: the rule's choice (cuDNN's first plan within the budget, in chunks),
       * the same bits twice, within the bound. */
      TdmBackend *exact = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
      g_assert_no_error(error);
      exact->deterministic = true;
      BnInput e;
      bn_input_init(&e, exact, &p, bn, x16);
      g_autofree uint16_t *first = g_new(uint16_t, p.out);
      for (int run = 0; run < 2; run++) {
        bn_input_poison(&e, &p, host);
        g_assert_true(engine_call_grown(&e.d, FALSE, &need));
        rel = bn_input_forward_error(&e, &p, host, wide);
        if (run == 0)
          memcpy(first, host, p.out * 2);
      }
      chosen = tdm_cuda_conv_chosen(exact, &e.d.a, TDM_CONV_FORWARD);
      g_test_message("%s exact: %s, %.3g", what, chosen, rel);
      g_assert_true(g_str_has_prefix(chosen, "cudnn:") && g_str_has_suffix(chosen, suffix));
      g_assert_cmpmem(first, p.out * 2, host, p.out * 2);
      g_assert_cmpfloat(rel, <=, 0x1p-7);
      bn_input_clear(&e);
      tdm_backend_free(exact);
    }
    bn_input_clear(&main_in);
    problem_clear(&p);
  }
}

/* --exact: the rule, not a timing, so two backends agree; the result is the same bits
 * every time; and the candidate is deterministic by cuDNN's notes (or ours). */
static void
test_exact(void)
{
  if (!have_gpu())
    return;
  const Case c = {2, 12, 12, 64, 64, 3, 1, 1};
  Problem p;
  problem_init(&p, &c, NULL);
  g_autoptr(GError) error = NULL;
  TdmBackend *b[2];
  const char *names[2][3];
  for (int k = 0; k < 2; k++) {
    b[k] = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
    g_assert_no_error(error);
    b[k]->deterministic = true;
  }
  for (int k = 0; k < 2; k++) {
    Device d;
    device_init(&d, b[k], &p, TRUE);
    for (int dir = 0; dir < 3; dir++)
      names[k][dir] = tdm_cuda_conv_chosen(b[k], &d.a, dir);
    g_autofree float *first = NULL;
    for (int run = 0; run < 2; run++) {
      gboolean took = tdm_backend_conv_engine_backward(b[k], &d.a);
      if (!took)
        break; /* im2col both ways: the replica's own, deterministic path */
      g_autofree float *dw = g_new(float, p.weights);
      tdm_backend_download(b[k], dw, d.dw, p.weights * 4);
      if (run == 0)
        first = g_steal_pointer(&dw);
      else
        g_assert_cmpint(memcmp(first, dw, p.weights * 4), ==, 0);
    }
    device_clear(&d);
  }
  for (int dir = 0; dir < 3; dir++) {
    g_test_message("exact %s: %s", direction_names[dir], names[0][dir]);
    g_assert_cmpstr(names[0][dir], ==, names[1][dir]);
  }
  tdm_backend_free(b[0]);
  tdm_backend_free(b[1]);
  problem_clear(&p);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* The choices of this test stay out of the person's cache. */
  g_setenv("TANDEM_CONV_CACHE", "0", TRUE);
  g_autoptr(GError) error = NULL;
  cpu = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  if (tdm_backend_cuda_available()) {
    gpu = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_FP32, &error);
    g_assert_no_error(error);
    gpu_bf16 = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
    g_assert_no_error(error);
    g_test_message("cuDNN: %s", tdm_cudnn_get() != NULL ? "loaded" : tdm_cudnn_why_not());
  }
  g_test_add_func("/cuda-conv/candidates", test_candidates);
  g_test_add_func("/cuda-conv/bn-prologue", test_bn_prologue);
  g_test_add_func("/cuda-conv/dy16-ready", test_dy16_ready);
  g_test_add_func("/cuda-conv/stored-bf16", test_stored_bf16);
  g_test_add_func("/cuda-conv/dx16", test_dx16);
  g_test_add_func("/cuda-conv/block-input-bf16", test_block_input16);
  g_test_add_func("/cuda-conv/choice-cached", test_choice_cached);
  g_test_add_func("/cuda-conv/exact", test_exact);
  g_test_add_func("/cuda-conv/grown-workspace", test_grown_workspace);
  g_test_add_func("/cuda-conv/chunked", test_chunked);
  g_test_add_func("/cuda-conv/bn-input-chunks", test_bn_input_chunks);
  test_cuda_conv_add_small();
  int status = g_test_run();
  if (gpu != NULL)
    tdm_backend_free(gpu);
  if (gpu_bf16 != NULL)
    tdm_backend_free(gpu_bf16);
  tdm_backend_free(cpu);
  return status;
}

#else /* !TDM_HAVE_CUDA */

static void
test_no_cuda(void)
{
  g_test_skip("no CUDA GPU (this build has no CUDA backend)");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cuda-conv/none", test_no_cuda);
  return g_test_run();
}

#endif
