/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv-fused.c — cuDNN's fused bn-prologue forward and weight gradient
 * ("cudnn-fused:…", tdm-backend-cuda-conv-fused.h; part of test-cuda-conv): a conv whose
 * input a bn before stored as bf16 and the conv normalizes as it reads it, on ResNet's
 * shapes (3×3 stride 1 and 2, a 1×1 projection, an odd size), with and without the bn's
 * ReLU, the forward's output as bf16 (y16) and as float32 (those two on the first shape:
 * each plan compiles at run time, seconds a plan). Where cuDNN builds a fused plan, every
 * one is offered, runs by name, and matches the CPU's convolution of the CPU's bn output
 * (the forward's y, the weight gradient's dw from the same dy) within the bf16 bound
 * (test-cuda-conv.c's bound(): 2⁻⁷; the fused prologue rounds the normalized value once,
 * as the engine's operand load, where the copy path rounds it when it writes the copy:
 * the same count of roundings; a weight gradient over at most 1,024 rows here, where a
 * bf16 running sum has no room to drift); forced (TANDEM_CONV=cudnn-fused) the engine
 * chooses one for each direction, counts it as cudnn-fused, and its result matches too.
 * An input that is not 16-byte aligned gets none, and none is offered for a float32
 * input, for 17 channels, with TANDEM_CUDNN_FUSED=0 or with TANDEM_CUDNN=0. Skips, saying
 * why, without a GPU, without cuDNN, or where cuDNN builds no fused plan at all (no
 * runtime fusion: NVRTC missing, or the graph's bf16 refused; G_MESSAGES_DEBUG=all shows
 * cuDNN's words for each plan). And tdm_k_bn_affine, the scale and shift the graph
 * applies, bit for bit the CPU bn's.
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "tdm-backend-cuda.h"
#include "tdm-cudnn.h"
#include "tdm-kernels.h"
#include "test-cuda-conv.h"
#include "test-cuda-layers.h"

static int
count_fused(GPtrArray *names)
{
  int fused = 0;
  for (guint k = 0; k < names->len; k++)
    fused += g_str_has_prefix(g_ptr_array_index(names, k), "cudnn-fused:");
  return fused;
}

/* The fused candidates offered for in's call: forward and weight gradient together. */
static int
count_fused_both_ways(BnInput *in)
{
  g_autoptr(GPtrArray) forward =
      tdm_cuda_conv_candidate_names(in->d.b, &in->d.a, TDM_CONV_FORWARD);
  g_autoptr(GPtrArray) wgrad = tdm_cuda_conv_candidate_names(in->d.b, &in->d.a, TDM_CONV_WGRAD);
  return count_fused(forward) + count_fused(wgrad);
}

static void
test_fused_bn(void)
{
  if (!have_gpu())
    return;
  if (tdm_cudnn_get() == NULL) {
    g_autofree char *why = g_strdup_printf("cuDNN is not loaded: %s",
                                           tdm_cudnn_why_not() ? tdm_cudnn_why_not() : "?");
    g_test_skip(why);
    return;
  }
  const Case fused_cases[] = {
    {4, 16, 16, 64, 64, 3, 1, 1},    /* a block's 3×3 */
    {4, 16, 16, 64, 128, 3, 1, 2},   /* a stage's first, strided */
    {4, 16, 16, 128, 256, 1, 0, 2},  /* a projection */
    {3, 9, 11, 64, 64, 3, 1, 1},     /* odd sizes */
  };
  int offered = 0;
  for (guint i = 0; i < G_N_ELEMENTS(fused_cases); i++) {
    const Case *c = &fused_cases[i];
    size_t in = (size_t)c->n * c->h * c->w * c->c;
    g_autofree uint16_t *x16 = NULL;
    g_autofree float *x = random_bf16_input(in, &x16);
    g_autofree float *bn = random_bn(c->c);
    /* Each fused plan compiles at run time (seconds): the other variants on one shape. */
    for (int variant = 0; variant < (i == 0 ? 3 : 1); variant++) {
      /* 0: ReLU, bf16 output; 1: no ReLU, bf16 output; 2: ReLU, float32 output. */
      gboolean relu = variant != 1, out16 = variant != 2;
      g_autofree float *xn = g_new(float, in);
      tdm_backend_bn_forward(cpu, xn, x, TDM_DTYPE_F32, bn, bn + c->c, bn + 2 * c->c,
                             bn + 3 * c->c, (int)(in / c->c), c->c, relu);
      Problem p;
      problem_init(&p, c, xn);
      BnInput f;
      bn_input_init(&f, gpu_bf16, &p, bn, x16, relu, out16, 0);
      g_autofree char *what =
          g_strdup_printf("x16 bn%s %s n%d %dx%dx%d→%d k%d p%d s%d", relu ? " relu" : "",
                          out16 ? "y16" : "y", c->n, c->h, c->w, c->c, c->out_c, c->kernel,
                          c->pad, c->stride);
      g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(gpu_bf16, &f.d.a,
                                                                 TDM_CONV_FORWARD);
      int fused = count_fused(names);
      offered += fused;
      g_test_message("%s: %u candidates, %d fused", what, names->len, fused);
      for (guint k = 0; k < names->len; k++) {
        const char *name = g_ptr_array_index(names, k);
        if (!g_str_has_prefix(name, "cudnn-fused:"))
          continue;
        if (k + 1 < names->len)
          g_assert_true(g_str_has_prefix(g_ptr_array_index(names, k + 1), "cudnn-fused:"));
        /* Its output type is the destination's. */
        g_assert_true(g_str_has_suffix(name, out16 ? ":h" : ":f"));
        /* It needs little of the workspace (the scale, the shift, cuDNN's): it runs in
         * the test's. */
        bn_input_poison(&f, &p);
        g_assert_true(tdm_cuda_conv_run_named(gpu_bf16, &f.d.a, TDM_CONV_FORWARD, name));
        double rel = bn_input_forward_error(&f, &p, NULL);
        g_test_message("%s %s: %.3g", what, name, rel);
        if (!(rel <= 0x1p-7)) {
          g_test_message("FAILED %s %s: %.3g", what, name, rel);
          g_test_fail();
        }
      }

      /* The weight gradient from the same input and the problem's dy (converted to bf16
       * by the engine, as a replica's dy is), against the CPU's dw. */
      g_autoptr(GPtrArray) wnames = tdm_cuda_conv_candidate_names(gpu_bf16, &f.d.a,
                                                                  TDM_CONV_WGRAD);
      int wfused = count_fused(wnames);
      offered += wfused;
      g_test_message("%s wgrad: %u candidates, %d fused", what, wnames->len, wfused);
      for (guint k = 0; k < wnames->len; k++) {
        const char *name = g_ptr_array_index(wnames, k);
        if (!g_str_has_prefix(name, "cudnn-fused:"))
          continue;
        poison_b(gpu_bf16, f.d.dw, p.weights);
        g_assert_true(tdm_cuda_conv_run_named(gpu_bf16, &f.d.a, TDM_CONV_WGRAD, name));
        g_autofree char *label = g_strdup_printf("%s wgrad %s", what, name);
        check_close_b(gpu_bf16, label, f.d.dw, p.dw_ref, p.weights, 0x1p-7);
      }

      /* Forced to the fused kind, through the engine as the replica calls it: each
       * direction that has a fused plan chooses one (the other directions as they
       * would), counted as cudnn-fused. */
      if (fused > 0 || wfused > 0) {
        g_autoptr(GError) error = NULL;
        TdmBackend *forced = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
        g_assert_no_error(error);
        g_setenv("TANDEM_CONV", "cudnn-fused", TRUE); /* a forced choice is never cached */
        BnInput e;
        bn_input_init(&e, forced, &p, bn, x16, relu, out16, 0);
        TdmConvChoices counts;
        if (fused > 0) {
          bn_input_poison(&e, &p);
          g_assert_true(tdm_backend_conv_engine_forward(forced, &e.d.a));
          const char *chosen = tdm_cuda_conv_chosen(forced, &e.d.a, TDM_CONV_FORWARD);
          double rel = bn_input_forward_error(&e, &p, NULL);
          g_test_message("%s forced: %s, %.3g", what, chosen, rel);
          g_assert_true(g_str_has_prefix(chosen, "cudnn-fused:"));
          g_assert_cmpfloat(rel, <=, 0x1p-7);
          tdm_backend_conv_choices(forced, &counts);
          g_assert_cmpint(counts.cudnn_fused, ==, 1);
          g_assert_cmpint(counts.cudnn + counts.own + counts.im2col, ==, 0);
        }
        if (wfused > 0) {
          /* The weight gradient alone (no input gradient wanted). */
          e.d.a.dx = NULL;
          poison_b(forced, e.d.dw, p.weights);
          g_assert_true(tdm_backend_conv_engine_backward(forced, &e.d.a));
          const char *wchosen = tdm_cuda_conv_chosen(forced, &e.d.a, TDM_CONV_WGRAD);
          g_test_message("%s wgrad forced: %s", what, wchosen);
          g_assert_true(g_str_has_prefix(wchosen, "cudnn-fused:"));
          g_autofree char *label = g_strdup_printf("%s wgrad forced %s", what, wchosen);
          check_close_b(forced, label, e.d.dw, p.dw_ref, p.weights, 0x1p-7);
          tdm_backend_conv_choices(forced, &counts);
          g_assert_cmpint(counts.cudnn_fused, ==, fused > 0 ? 2 : 1);
        }
        g_unsetenv("TANDEM_CONV");
        bn_input_clear(&e);
        tdm_backend_free(forced);
      }
      bn_input_clear(&f);

      /* An input 2 bytes off a 16-byte boundary: no fused candidate (the copy path
       * still takes it). */
      if (variant == 0) {
        BnInput m;
        bn_input_init(&m, gpu_bf16, &p, bn, x16, relu, out16, 1);
        g_assert_cmpint(count_fused_both_ways(&m), ==, 0);
        bn_input_clear(&m);
      }
      problem_clear(&p);
    }
  }
  if (offered == 0) {
    g_test_skip("cuDNN builds no fused bn-prologue plan here (runtime fusion needs NVRTC, "
                "and the graph is bf16): G_MESSAGES_DEBUG=all says cuDNN's words");
    return;
  }
  g_test_message("%d fused plans offered and checked", offered);
}

/* None for an input stored as float32 (the graph reads bf16), none with cuDNN hidden
 * (TANDEM_CUDNN=0) or the fused ones turned off (TANDEM_CUDNN_FUSED=0), while the plain
 * candidates still take the call; none for 17 channels. */
static void
test_fused_not_offered(void)
{
  if (!have_gpu())
    return;
  const Case c = {2, 8, 8, 64, 64, 3, 1, 1};
  size_t in = (size_t)c.n * c.h * c.w * c.c;
  g_autofree uint16_t *x16 = NULL;
  g_autofree float *x = random_bf16_input(in, &x16);
  g_autofree float *bn = random_bn(c.c);
  Problem p;
  problem_init(&p, &c, NULL);
  BnInput f;
  bn_input_init(&f, gpu_bf16, &p, bn, x16, TRUE, TRUE, 0);
  g_setenv("TANDEM_CUDNN", "0", TRUE);
  g_autoptr(GPtrArray) hidden = tdm_cuda_conv_candidate_names(gpu_bf16, &f.d.a,
                                                              TDM_CONV_FORWARD);
  g_unsetenv("TANDEM_CUDNN");
  g_assert_cmpuint(hidden->len, >, 0);
  g_assert_cmpint(count_fused(hidden), ==, 0);
  TdmConvArgs wide = f.d.a;
  wide.x = f.d.x; /* problem_init's float32 input */
  wide.x_type = TDM_DTYPE_F32;
  g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(gpu_bf16, &wide, TDM_CONV_FORWARD);
  g_assert_cmpuint(names->len, >, 0);
  g_assert_cmpint(count_fused(names), ==, 0);
  g_setenv("TANDEM_CUDNN_FUSED", "0", TRUE);
  g_autoptr(GPtrArray) off = tdm_cuda_conv_candidate_names(gpu_bf16, &f.d.a, TDM_CONV_FORWARD);
  g_unsetenv("TANDEM_CUDNN_FUSED");
  g_assert_cmpuint(off->len, >, 0);
  g_assert_cmpint(count_fused(off), ==, 0);
  bn_input_clear(&f);
  problem_clear(&p);

  /* 17 channels in (a multiple of 8 is what the fused graph takes). */
  const Case odd = {2, 8, 8, 17, 24, 3, 1, 1};
  size_t odd_in = (size_t)odd.n * odd.h * odd.w * odd.c;
  g_autofree uint16_t *odd16 = NULL;
  g_autofree float *odd_x = random_bf16_input(odd_in, &odd16);
  g_autofree float *odd_bn = random_bn(odd.c);
  problem_init(&p, &odd, NULL);
  bn_input_init(&f, gpu_bf16, &p, odd_bn, odd16, TRUE, TRUE, 0);
  g_assert_cmpint(count_fused_both_ways(&f), ==, 0);
  bn_input_clear(&f);
  problem_clear(&p);
}

/* The scale and shift the fused graph applies (tdm_k_bn_affine) are the CPU bn's bits:
 * scale = invstd·γ, shift = β − mean·scale, each operation rounded alone, over a channel
 * count that is no multiple of a block. */
static void
test_bn_affine(void)
{
  if (!have_gpu())
    return;
  const int c = 1000;
  g_autofree float *bn = random_bn(c);
  float *dbn = on_b(gpu_bf16, bn, 4 * (size_t)c * 4);
  float *dout = on_b(gpu_bf16, NULL, 2 * (size_t)c * 4);
  g_assert_cmpint(tdm_k_bn_affine(dout, dout + c, dbn, dbn + c, dbn + 2 * c, dbn + 3 * c, c,
                                  tdm_backend_cuda_stream(gpu_bf16)),
                  ==, cudaSuccess);
  g_autofree float *got = g_new(float, 2 * (size_t)c);
  tdm_backend_download(gpu_bf16, got, dout, 2 * (size_t)c * 4);
  assert_ok(gpu_bf16);
  for (int ch = 0; ch < c; ch++) {
    /* volatile: each product stored as a float, never contracted into an FMA. */
    volatile float product = bn[c + ch] * bn[2 * c + ch];
    float scale = product;
    volatile float moved = bn[ch] * scale;
    float shift = bn[3 * c + ch] - moved;
    g_assert_cmpint(memcmp(&got[ch], &scale, 4), ==, 0);
    g_assert_cmpint(memcmp(&got[c + ch], &shift, 4), ==, 0);
  }
  tdm_backend_release(gpu_bf16, dbn);
  tdm_backend_release(gpu_bf16, dout);
}

void
test_cuda_conv_add_fused(void)
{
  g_test_add_func("/cuda-conv/bn-affine", test_bn_affine);
  g_test_add_func("/cuda-conv/fused-bn", test_fused_bn);
  g_test_add_func("/cuda-conv/fused-not-offered", test_fused_not_offered);
}

#endif
