/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv.c — the CUDA backend's convolution engine (suite gpu): every candidate
 * of every direction (cuDNN's plans, our own kernel, im2col with cuBLAS) against the
 * CPU's im2col and GEMM on fresh random inputs, for odd sizes, strides 1 and 2, 1×1,
 * 3×3 and 7×7 kernels, padding 0 to 3, 3, 17, 64 and 512 channels, in float32 and
 * bf16, each run again in a workspace of exactly the bytes it says it needs; the choice
 * timed, remembered on disk and found there by another backend; --exact's rule (the
 * same choice on two backends, the same bits twice). Also main(), and the cases,
 * problems, device sides and checks its parts share (test-cuda-conv.h). The parts:
 * test-cuda-conv-bf16.c (a bn normalized as the conv reads its input, operands the
 * layers around a conv store as bf16), test-cuda-conv-workspace.c (the choice within
 * the workspace budget, columns and bn inputs in chunks), test-cuda-conv-small.c
 * (the few-channel candidates), test-cuda-conv-fused.c (cuDNN's fused bn prologue) and
 * test-cuda-conv-screen.c (the screen of the candidates' results: a wrong one left
 * out) and test-cuda-conv-phases.c (a strided input gradient by phases).
 *
 * Bounds: ||gpu − cpu|| / ||cpu|| against the float32 reference. float32 runs (no TF32,
 * no Winograd: tdm-backend-cuda-conv-cudnn.c refuses them) differ only in the order of the sums:
 * 16 · 2⁻²⁴ · √L for a reduction of length L. bf16 runs round each operand (2⁻⁹
 * relative) and may round the output: three such errors, each at most 2⁻⁹ and
 * independent across terms, stay under 2⁻⁷; a bf16 cuDNN weight gradient run in chunks
 * of samples rounds each chunk's sum, and gets that rounding's worst-case growth on top
 * (chunk_rounding_share()). Outputs are poisoned with NaN first.
 * Skips without a CUDA GPU.
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "tdm-backend-cuda.h"
#include "tdm-backend-cuda-conv-cache.h"
#include "tdm-backend-cuda-conv-chunks.h"
#include "tdm-backend-cuda-conv-name.h"
#include "tdm-conv-columns.h"
#include "tdm-cudnn.h"
#include "test-cuda-conv.h"
#include "test-cuda-layers.h"

#include <glib/gstdio.h>

TdmBackend *cpu;
TdmBackend *gpu;
TdmBackend *gpu_bf16;

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
float *
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
float *
random_bn(int c)
{
  float *bn = random_floats(4 * (size_t)c, -0.5, 0.5);
  for (int ch = 0; ch < c; ch++)
    bn[c + ch] = 0.5f + fabsf(bn[c + ch]) * 2;
  return bn;
}

/* ‖Σᵢ|Sᵢ|‖₂ / ‖S‖₂ for p's weight gradient in p->chunks: Sᵢ the CPU's sum over chunk i's
 * rows of the columns col, S = dw_ref their sum. */
static double
chunk_sums_ratio(const Problem *p, const float *col)
{
  int out_c = p->s.out_c, k = (int)p->k;
  size_t pixels = p->rows / (size_t)p->s.n;
  g_autofree float *part = g_new(float, p->weights);
  g_autofree double *magnitude = g_new0(double, p->weights);
  for (int i = 0; i < p->chunks.count; i++) {
    int m;
    size_t first = (size_t)tdm_conv_chunk_first(&p->chunks, i, &m) * pixels;
    tdm_backend_gemm(cpu, true, false, out_c, k, (int)(m * pixels), 1.0f,
                     p->dy + first * out_c, out_c, col + first * p->k, k, 0.0f, part, k);
    for (size_t e = 0; e < p->weights; e++)
      magnitude[e] += fabsf(part[e]);
  }
  double num = 0, den = 0;
  for (size_t e = 0; e < p->weights; e++) {
    num += magnitude[e] * magnitude[e];
    den += (double)p->dw_ref[e] * p->dw_ref[e];
  }
  return sqrt(num / den);
}

void
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
  p->chunks = tdm_conv_cudnn_chunks(&p->s, TDM_CONV_WGRAD, TRUE, 0);
  p->chunk_ratio = p->chunks.count > 1 ? chunk_sums_ratio(p, col) : 1.0;
  tdm_backend_gemm(cpu, false, false, rows, k, c->out_c, 1.0f, p->dy, c->out_c, p->w, k, 0.0f,
                   col, k);
  p->dx_ref = g_new(float, p->in);
  tdm_backend_col2im(cpu, p->dx_ref, col, c->n, c->h, c->w, c->c, c->kernel, c->kernel, c->pad,
                     c->stride);
  assert_ok(cpu);
}

void
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
double
bound(TdmBackend *b, const Problem *p, TdmConvDirection dir)
{
  if (b->precision == TDM_PRECISION_BF16)
    return 0x1p-7;
  double length = dir == TDM_CONV_FORWARD ? (double)p->k
                  : dir == TDM_CONV_WGRAD ? (double)p->rows
                                          : (double)p->s.kernel * p->s.kernel * p->s.out_c;
  return 16.0 * 0x1p-24 * sqrt(length);
}

/* A bf16 cuDNN weight gradient in k chunks (tdm-backend-cuda-conv-candidates.c's
 * run_cudnn()) rounds each chunk's sum Sᵢ to bf16 and adds them in float32: its output's
 * roundings err by at most 2⁻⁸ Σᵢ|Sᵢ| a weight, where one rounding of the whole sum S
 * errs by at most 2⁻⁸ |S|. In the norm the bounds measure, that is 2⁻⁸ · ratio against
 * 2⁻⁸, ratio = ‖Σᵢ|Sᵢ|‖₂ / ‖S‖₂ ≥ 1 computed from the CPU's own chunk sums (about
 * √(1 + (2/π)(k − 1)) for these random inputs: 1.28 for two chunks). So such a
 * candidate gets 2⁻⁸ (ratio − 1) beyond what the same plan whole would be allowed: the
 * worst case of its partial roundings, not an estimate (independent roundings add in
 * quadrature and mostly cost nothing). A float32 plan's chunks add 2⁻²⁴ each: nothing
 * beside the operands' bf16 roundings. A lost or doubled chunk would be off by about
 * 1 / k of the result. */
double
chunk_rounding_share(const Problem *p, TdmConvDirection dir, const char *name)
{
  TdmCudnnName n;
  if (dir != TDM_CONV_WGRAD || !tdm_cudnn_name_parse(name, &n) || n.out != 'h' ||
      n.chunk == 0)
    return 0.0;
  if (n.chunk != p->chunks.size) {
    g_test_message("FAILED %s: chunks of %d samples, where the rule gives %d", name, n.chunk,
                   p->chunks.size);
    g_test_fail();
    return 0.0;
  }
  return 0x1p-8 * (p->chunk_ratio - 1.0);
}

void
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

void
device_clear(Device *d)
{
  void *all[] = {d->x, d->w, d->dy, d->y, d->dx, d->dw, d->w16, d->work};
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    if (all[i] != NULL)
      tdm_backend_release(d->b, all[i]);
}

void
bn_input_init(BnInput *in, TdmBackend *b, const Problem *p, const float *bn,
              const uint16_t *x16, gboolean relu, gboolean out16, size_t offset)
{
  int c = p->s.c;
  device_init(&in->d, b, p, TRUE);
  in->bn = on_b(b, bn, 4 * (size_t)c * 4);
  in->x16 = on_b(b, NULL, (p->in + offset) * 2);
  tdm_backend_upload(b, in->x16 + offset, x16, p->in * 2);
  in->y16 = out16 ? on_b(b, NULL, p->out * 2) : NULL;
  TdmConvArgs *a = &in->d.a;
  a->x = (const float *)(in->x16 + offset); /* the type says what it holds */
  a->x_type = TDM_DTYPE_BF16;
  a->bn_mean = in->bn;
  a->bn_invstd = in->bn + c;
  a->bn_gamma = in->bn + 2 * c;
  a->bn_beta = in->bn + 3 * c;
  a->bn_relu = relu;
  if (out16) {
    a->y = NULL;
    a->y16 = in->y16;
  }
}

void
bn_input_clear(BnInput *in)
{
  tdm_backend_release(in->d.b, in->bn);
  tdm_backend_release(in->d.b, in->x16);
  if (in->y16 != NULL)
    tdm_backend_release(in->d.b, in->y16);
  device_clear(&in->d);
}

void
bn_input_poison(BnInput *in, const Problem *p)
{
  if (in->y16 != NULL) {
    g_autofree uint16_t *bits = g_new(uint16_t, p->out);
    memset(bits, 0xff, p->out * 2);
    tdm_backend_upload(in->d.b, in->y16, bits, p->out * 2);
  } else {
    poison_b(in->d.b, in->d.y, p->out);
  }
}

double
bn_input_forward_error(BnInput *in, const Problem *p, uint16_t *bits)
{
  g_autofree float *wide = g_new(float, p->out);
  g_autofree uint16_t *own = NULL;
  if (in->y16 != NULL) {
    if (bits == NULL)
      bits = own = g_new(uint16_t, p->out);
    tdm_backend_download(in->d.b, bits, in->y16, p->out * 2);
    for (size_t e = 0; e < p->out; e++)
      wide[e] = bf16_value(bits[e]);
  } else {
    tdm_backend_download(in->d.b, wide, in->d.y, p->out * 4);
  }
  assert_ok(in->d.b);
  return rel_error(wide, p->y_ref, p->out);
}

const char *const direction_names[] = {"forward", "dgrad", "wgrad"};

/* One engine call as the replica makes it: from a workspace of 16 bytes, grown to what
 * the engine asks for (room to time its candidates, then its choice's need) and tried
 * again, at most three times. TRUE when the engine ran it; *need the choice's bytes. */
gboolean
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

/* Every candidate of every direction against the reference; counts cuDNN's. */
int
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
        check_close_b(b, label, target, ref, count,
                      bound(b, p, dir) + chunk_rounding_share(p, dir, name));
      } else {
        g_assert_false(tdm_cuda_conv_run_named(b, &d->a, dir, name));
        assert_ok(b);
        g_test_message("%s needs %zu bytes, more than the %zu given: refused", label, need,
                       d->a.work_bytes);
      }
      /* Again in a workspace of exactly its need (a dy16 the bn wrote at its start
       * copied over; one outside the workspace left where it is): what a replica sized
       * by its choices gives it. A plan may need none (cuDNN's fp32 engines often do):
       * it then gets 16 bytes, room for nothing a convolution could use, as the engine
       * wants a workspace to point at. */
      if (need > ((size_t)2 << 30)) {
        g_test_message("%s needs %zu bytes: not run", label, need);
        continue;
      }
      gboolean at_start = d->a.dy16 != NULL && (const void *)d->a.dy16 == d->a.work;
      if (at_start)
        g_assert_cmpuint(need, >=, p->out * 2);
      void *exact = on_b(b, NULL, MAX(need, 16));
      if (at_start)
        tdm_backend_copy(b, exact, d->a.work, p->out * 2);
      TdmConvArgs tight = d->a;
      tight.work = exact;
      tight.work_bytes = MAX(need, 16);
      tight.dy16 = at_start ? exact : d->a.dy16;
      tdm_backend_upload(b, target, nan, count * 4);
      g_assert_true(tdm_cuda_conv_run_named(b, &tight, dir, name));
      g_autofree char *tight_label = g_strdup_printf("%s in %zu bytes", label, need);
      check_close_b(b, tight_label, target, ref, count,
                    bound(b, p, dir) + chunk_rounding_share(p, dir, name));
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
  g_assert_true(g_str_has_prefix(text, "tandem-conv-choices 7\n"));
  g_autofree char *entry = g_strdup_printf("\t%s\t", chosen);
  g_assert_nonnull(strstr(text, entry));
  TdmConvChoices counts;
  tdm_backend_conv_choices(first, &counts);
  g_assert_cmpint(counts.cudnn_fused + counts.cudnn + counts.own + counts.im2col, ==, 1);
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
  test_cuda_conv_add_bf16();
  g_test_add_func("/cuda-conv/choice-cached", test_choice_cached);
  g_test_add_func("/cuda-conv/exact", test_exact);
  test_cuda_conv_add_workspace();
  test_cuda_conv_add_small();
  test_cuda_conv_add_fused();
  test_cuda_conv_add_screen();
  test_cuda_conv_add_phases();
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
