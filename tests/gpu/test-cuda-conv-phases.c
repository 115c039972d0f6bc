/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv-phases.c — a strided convolution's input gradient by phases
 * ("cudnn-phases:…", tdm-backend-cuda-conv-phases.h; part of test-cuda-conv): s² stride-1
 * cuDNN forwards over dy, each writing a strided view of dx. On 64 → 128 channels, 3×3
 * at stride 2 with padding 1 and 1×1 at stride 2 without, over 8 × 8 (the first answer:
 * whether cuDNN takes a strided output view at all), 9 × 11 (odd sizes: a view whose
 * sample stride is less than its rows times its row stride) and 32 × 32: every phases
 * candidate offered, over dy (each phase padded as it needs: unevenly, none before and
 * one after, for the odd phases of 3×3) and over dy's pre-padded copy (":<f|h>p", every
 * phase unpadded), runs by name, in the test's workspace and in one of exactly its
 * need, into dx as float32 and dx16 as bf16 (a bf16 run) and into dx (a float32 run),
 * matches the CPU's input gradient within the bound its neighbours' input gradients
 * have (test-cuda-conv.c's bound(): 2⁻⁷ in bf16), every pixel written (the phases with
 * no tap write zeros), the same bits twice. Each case runs on a backend of its own, so a
 * plan cuDNN refuses as it runs fails that case alone, said as such. Forced
 * (TANDEM_CONV=cudnn-phases), the engine chooses a phases candidate for the input
 * gradient as the replica calls it, and its result matches too. None is offered at
 * stride 1, for 17 channels, or with TANDEM_CUDNN_PHASES=0. The 8 × 8 3×3 case says how
 * many of each form were offered, and is incomplete (not passed) where neither was.
 * Skips, saying why, without a GPU or without cuDNN (G_MESSAGES_DEBUG=all gives cuDNN's
 * words for each phase it refuses).
 */
#include "tdm-backend.h"
#include "tdm-build-config.h"

#if TDM_HAVE_CUDA

#include "tdm-backend-cuda-conv-name.h"
#include "tdm-backend-cuda.h"
#include "tdm-cudnn.h"
#include "test-cuda-conv.h"
#include "test-cuda-layers.h"

static const Case phase_cases[] = {
  {2, 8, 8, 64, 128, 3, 1, 2},    /* the first answer: whether cuDNN takes the views */
  {2, 8, 8, 64, 128, 1, 0, 2},    /* a projection: three phases of zeros */
  {2, 9, 11, 64, 128, 3, 1, 2},   /* odd sizes */
  {2, 9, 11, 64, 128, 1, 0, 2},
  {2, 32, 32, 64, 128, 3, 1, 2},  /* a CIFAR ResNet's second stage at 64 px */
  {2, 32, 32, 64, 128, 1, 0, 2},
};

/* The phases candidates among names (a new array of them). */
static GPtrArray *
phases_of(GPtrArray *names)
{
  GPtrArray *phases = g_ptr_array_new_with_free_func(g_free);
  for (guint k = 0; k < names->len; k++)
    if (g_str_has_prefix(g_ptr_array_index(names, k), "cudnn-phases:"))
      g_ptr_array_add(phases, g_strdup(g_ptr_array_index(names, k)));
  return phases;
}

static gboolean
skip_without_cudnn(void)
{
  if (!have_gpu())
    return TRUE;
  if (tdm_cudnn_get() == NULL) {
    g_autofree char *why = g_strdup_printf("cuDNN is not loaded: %s",
                                           tdm_cudnn_why_not() ? tdm_cudnn_why_not() : "?");
    g_test_skip(why);
    return TRUE;
  }
  return FALSE;
}

/* dx (dx16 as bf16 where out16) after a run, widened, into host (p->in values). */
static void
dx_read(Device *d, const Problem *p, uint16_t *dx16, float *host)
{
  if (dx16 == NULL) {
    tdm_backend_download(d->b, host, d->dx, p->in * 4);
  } else {
    g_autofree uint16_t *bits = g_new(uint16_t, p->in);
    tdm_backend_download(d->b, bits, dx16, p->in * 2);
    for (size_t e = 0; e < p->in; e++)
      host[e] = bf16_value(bits[e]);
  }
}

static void
dx_poison(Device *d, const Problem *p, uint16_t *dx16)
{
  if (dx16 == NULL) {
    poison_b(d->b, d->dx, p->in);
  } else {
    g_autofree uint16_t *bits = g_new(uint16_t, p->in);
    memset(bits, 0xff, p->in * 2); /* NaN */
    tdm_backend_upload(d->b, dx16, bits, p->in * 2);
  }
}

/* Runs phases candidate `name` on d's call (in its workspace where `tight` is NULL, else
 * in that one), dx poisoned first, and reads dx back; FALSE where the backend failed
 * (said, with cuDNN's words: a plan refused as it ran). */
static gboolean
run_one(Device *d, const Problem *p, uint16_t *dx16, const char *what, const char *name,
        const TdmConvArgs *args, float *host)
{
  dx_poison(d, p, dx16);
  gboolean ran = tdm_cuda_conv_run_named(d->b, args, TDM_CONV_DGRAD, name);
  tdm_backend_synchronize(d->b);
  g_autoptr(GError) error = NULL;
  if (!tdm_backend_check(d->b, &error)) {
    g_test_message("FAILED %s %s: it failed as it ran: %s", what, name, error->message);
    g_test_fail();
    return FALSE;
  }
  if (!ran) {
    g_test_message("FAILED %s %s: offered, but it did not run", what, name);
    g_test_fail();
    return FALSE;
  }
  dx_read(d, p, dx16, host);
  return TRUE;
}

/* What check_case() found offered: candidates over dy (their phases padded as they
 * need, unevenly for 3×3 at stride 2) and over its pre-padded copy (":<f|h>p"). */
typedef struct {
  int padded, prepadded;
} Offered;

/* Every phases candidate of case c on a backend of this precision, into dx or dx16;
 * what was offered, added to *offered. */
static void
check_case(const Case *c, TdmPrecision precision, gboolean out16, Offered *offered)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), precision, &error);
  g_assert_no_error(error);
  gboolean bf16 = precision == TDM_PRECISION_BF16;
  Problem p;
  problem_init(&p, c, NULL);
  Device d;
  device_init(&d, b, &p, bf16);
  uint16_t *dx16 = out16 ? on_b(b, NULL, p.in * 2) : NULL;
  if (out16) {
    d.a.dx = NULL;
    d.a.dx16 = dx16;
  }
  g_autofree char *what = g_strdup_printf(
      "%s %s n%d %dx%dx%d→%d k%d p%d s%d", bf16 ? "bf16" : "fp32", out16 ? "dx16" : "dx", c->n,
      c->h, c->w, c->c, c->out_c, c->kernel, c->pad, c->stride);
  g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(b, &d.a, TDM_CONV_DGRAD);
  g_autoptr(GPtrArray) phases = phases_of(names);
  g_test_message("%s: %u candidates, %u by phases%s", what, names->len, phases->len,
                 phases->len == 0 ? " (NONE: cuDNN built no plan for every phase)" : "");
  g_autofree float *first = g_new(float, p.in);
  g_autofree float *again = g_new(float, p.in);
  for (guint k = 0; k < phases->len; k++) {
    const char *name = g_ptr_array_index(phases, k);
    g_autofree char *label = g_strdup_printf("%s %s", what, name);
    /* Its output type is the destination's. */
    TdmCudnnName spelt;
    g_assert_true(tdm_cudnn_name_parse(name, &spelt));
    g_assert_true(spelt.phases);
    g_assert_cmpint(spelt.out, ==, out16 ? 'h' : 'f');
    if (spelt.prepadded)
      offered->prepadded++;
    else
      offered->padded++;
    /* In a workspace of exactly its need (a bf16 run's dy16 is converted at its start),
     * then in the test's where that holds it: the same bits. */
    size_t need = tdm_cuda_conv_need_named(b, &d.a, TDM_CONV_DGRAD, name);
    void *exact = on_b(b, NULL, MAX(need, 16));
    TdmConvArgs tight = d.a;
    tight.work = exact;
    tight.work_bytes = MAX(need, 16);
    gboolean ran = run_one(&d, &p, dx16, what, name, &tight, first);
    if (ran && need > d.a.work_bytes)
      g_test_message("%s needs %zu bytes, more than the test's %zu", label, need,
                     d.a.work_bytes);
    ran = ran && run_one(&d, &p, dx16, what, name, need <= d.a.work_bytes ? &d.a : &tight,
                         again);
    tdm_backend_release(b, exact);
    if (!ran)
      break; /* the backend failed: its other candidates are not run */
    for (size_t e = 0; e < p.in; e++)
      if (!isfinite(first[e])) {
        g_test_message("FAILED %s: dx[%zu] not written", label, e);
        g_test_fail();
        break;
      }
    double rel = rel_error(first, p.dx_ref, p.in);
    g_test_message("%s: relative error %.3g", label, rel);
    if (!(rel <= bound(b, &p, TDM_CONV_DGRAD))) {
      g_test_message("FAILED %s: relative error %.3g exceeds %.3g", label, rel,
                     bound(b, &p, TDM_CONV_DGRAD));
      g_test_fail();
    }
    if (memcmp(first, again, p.in * sizeof(float)) != 0) {
      g_test_message("FAILED %s: not the same bits twice", label);
      g_test_fail();
    }
  }
  if (dx16 != NULL)
    tdm_backend_release(b, dx16);
  device_clear(&d);
  problem_clear(&p);
  tdm_backend_free(b);
}

static void
test_phases(void)
{
  if (skip_without_cudnn())
    return;
  Offered all = {0}, first = {0};
  for (guint i = 0; i < G_N_ELEMENTS(phase_cases); i++) {
    /* bf16 into dx and into dx16, then float32. */
    for (int variant = 0; variant < 3; variant++)
      check_case(&phase_cases[i], variant < 2 ? TDM_PRECISION_BF16 : TDM_PRECISION_FP32,
                 variant == 1, i == 0 && variant < 2 ? &first : &all);
  }
  all.padded += first.padded;
  all.prepadded += first.prepadded;
  /* The first answer, each form apart: whether cuDNN takes the phases padded unevenly
   * (none before, one after: the odd phases of 3×3 at stride 2), and whether it takes
   * them unpadded over dy's pre-padded copy. */
  g_test_message("8x8 64->128 3x3 s2 p1, bf16: padded (pre != post): %d offered%s; "
                 "pre-padded: %d offered%s",
                 first.padded, first.padded > 0 ? "" : " (NONE)", first.prepadded,
                 first.prepadded > 0 ? "" : " (NONE)");
  g_test_message("%d phases candidates offered and checked (%d padded, %d pre-padded)",
                 all.padded + all.prepadded, all.padded, all.prepadded);
  if (first.padded + first.prepadded == 0) {
    g_test_incomplete("3x3 s2 p1, 8x8, 64->128, bf16: no phases candidate at all. "
                      "G_MESSAGES_DEBUG=all gives cuDNN's words for each phase it refused.");
    return;
  }
}

/* TANDEM_CONV=cudnn-phases: the engine chooses a phases candidate for the input gradient
 * (the weight gradient as it would), through the call the replica makes, counted as
 * cuDNN's; dx and dw match the CPU. */
static void
test_phases_forced(void)
{
  if (skip_without_cudnn())
    return;
  const Case *c = &phase_cases[0];
  Problem p;
  problem_init(&p, c, NULL);
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  Device d;
  device_init(&d, b, &p, TRUE);
  g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(b, &d.a, TDM_CONV_DGRAD);
  g_autoptr(GPtrArray) phases = phases_of(names);
  if (phases->len == 0) {
    device_clear(&d);
    tdm_backend_free(b);
    problem_clear(&p);
    g_test_skip("cuDNN offers no phases candidate for 8x8 64->128 3x3 s2 p1: nothing to force");
    return;
  }
  g_setenv("TANDEM_CONV", "cudnn-phases", TRUE); /* a forced choice is never cached */
  poison_b(b, d.dx, p.in);
  poison_b(b, d.dw, p.weights);
  size_t need = 0;
  g_assert_true(engine_call_grown(&d, TRUE, &need));
  const char *chosen = tdm_cuda_conv_chosen(b, &d.a, TDM_CONV_DGRAD);
  g_test_message("forced: %s, %zu bytes of the workspace", chosen, need);
  g_assert_true(g_str_has_prefix(chosen, "cudnn-phases:"));
  g_autofree char *label = g_strdup_printf("forced %s", chosen);
  check_close_b(b, label, d.dx, p.dx_ref, p.in, bound(b, &p, TDM_CONV_DGRAD));
  check_close_b(b, "forced: its weight gradient", d.dw, p.dw_ref, p.weights,
                bound(b, &p, TDM_CONV_WGRAD));
  TdmConvChoices counts;
  tdm_backend_conv_choices(b, &counts);
  g_assert_cmpint(counts.cudnn, >=, 1);
  g_unsetenv("TANDEM_CONV");
  device_clear(&d);
  tdm_backend_free(b);
  problem_clear(&p);
}

/* None at stride 1, for 17 channels, or with TANDEM_CUDNN_PHASES=0 (the strided call's
 * other candidates still offered). */
static void
test_phases_not_offered(void)
{
  if (skip_without_cudnn())
    return;
  const Case others[] = {
    {2, 8, 8, 64, 128, 3, 1, 1},
    {2, 11, 13, 17, 24, 3, 1, 2},
  };
  for (guint i = 0; i < G_N_ELEMENTS(others) + 1; i++) {
    const Case *c = i < G_N_ELEMENTS(others) ? &others[i] : &phase_cases[0];
    if (i == G_N_ELEMENTS(others))
      g_setenv("TANDEM_CUDNN_PHASES", "0", TRUE); /* as when unset: off until run on a GPU */
    Problem p;
    problem_init(&p, c, NULL);
    Device d;
    device_init(&d, gpu_bf16, &p, TRUE);
    g_autoptr(GPtrArray) names = tdm_cuda_conv_candidate_names(gpu_bf16, &d.a, TDM_CONV_DGRAD);
    g_autoptr(GPtrArray) phases = phases_of(names);
    g_test_message("n%d %dx%dx%d→%d k%d s%d%s: %u candidates, %u by phases", c->n, c->h, c->w,
                   c->c, c->out_c, c->kernel, c->stride,
                   i == G_N_ELEMENTS(others) ? " TANDEM_CUDNN_PHASES=0" : "", names->len,
                   phases->len);
    g_assert_cmpuint(phases->len, ==, 0);
    g_assert_cmpuint(names->len, >, 0);
    device_clear(&d);
    problem_clear(&p);
  }
  g_setenv("TANDEM_CUDNN_PHASES", "1", TRUE);
}

void
test_cuda_conv_add_phases(void)
{
  /* The candidates are offered only when asked for until they have run on a GPU
   * (tdm-backend-cuda-conv-phases.c's phases_wanted()). */
  g_setenv("TANDEM_CUDNN_PHASES", "1", TRUE);
  g_test_add_func("/cuda-conv/phases", test_phases);
  g_test_add_func("/cuda-conv/phases-forced", test_phases_forced);
  g_test_add_func("/cuda-conv/phases-not-offered", test_phases_not_offered);
}

#endif
