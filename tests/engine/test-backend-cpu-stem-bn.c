/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-backend-cpu-stem-bn.c — part of test-backend-cpu: the stem's conv and its bn in
 * backward in two passes (tdm_backend_stem_bn_sums(), tdm_backend_stem_bn_dx_wgrad())
 * give the bits of the steps they replace, run here as the replica runs them through
 * the front door: the stem's forward on float32 columns staged and rounded once to
 * bf16, bn_backward_sums over it, bn_backward_dx_bf16 over it (with the pass's own sums
 * and with sums of other values, as a synchronized bn's all-reduce hands them), and the
 * weight gradient from that bf16 gradient widened against the same columns: the CIFAR
 * stem, a strided one, one of a single input channel, with and without the bn's ReLU.
 * Taken only in a bf16 run, for a float32 image and a stem of more outputs than taps (the
 * replica's float32-column way); too little scratch, and room for the output over its
 * gradient, refused.
 */
#include "test-backend-cpu.h"

#include <string.h>

typedef struct {
  int n, h, w, c, out_c, kernel, pad, stride;
} StemShape;

/* The stem's buffers on the backend: inputs filled, bn statistics those of the stem's
 * output (so that the ReLU's mask cuts some values), outputs to compare. */
typedef struct {
  TdmConvShape s;
  int rows, k;
  float *x, *w, *saved, *gamma, *beta, *slots;
  uint16_t *w16, *dy, *spare, *y16, *dx16;
  float *cols, *stage, *sums, *got_sums, *dw, *got_dw, *other;
  void *work;
  size_t work_bytes;
} Stem;

static TdmBackend *
bf16_backend(void)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  return b;
}

static void
stem_alloc(TdmBackend *b, Stem *t, const StemShape *sh)
{
  t->s = (TdmConvShape){sh->n, sh->h, sh->w, sh->c, sh->out_c, sh->kernel, sh->pad, sh->stride};
  t->rows = sh->n * tdm_conv_out_h(&t->s) * tdm_conv_out_w(&t->s);
  t->k = sh->c * sh->kernel * sh->kernel;
  size_t xn = (size_t)sh->n * sh->h * sh->w * sh->c, wn = (size_t)sh->out_c * t->k;
  size_t out = (size_t)t->rows * sh->out_c;
  int oc = sh->out_c;
  t->x = dev_floats(b, xn);
  t->w = dev_floats(b, wn);
  t->w16 = dev_alloc(b, wn * sizeof(uint16_t));
  t->saved = dev_floats(b, 2 * (size_t)oc);
  t->gamma = dev_floats(b, oc);
  t->beta = dev_floats(b, oc);
  t->slots = dev_floats(b, TDM_BN_SLOT_FLOATS(oc));
  t->dy = dev_alloc(b, out * sizeof(uint16_t));
  t->spare = dev_alloc(b, out * sizeof(uint16_t));
  t->y16 = dev_alloc(b, out * sizeof(uint16_t));
  t->dx16 = dev_alloc(b, out * sizeof(uint16_t));
  t->cols = dev_floats(b, (size_t)t->rows * t->k);
  t->stage = dev_floats(b, out);
  t->sums = dev_floats(b, 2 * (size_t)oc);
  t->got_sums = dev_floats(b, 2 * (size_t)oc);
  t->other = dev_floats(b, 2 * (size_t)oc);
  t->dw = dev_floats(b, wn);
  t->got_dw = dev_floats(b, wn);
  fill_random(t->x, xn, -1.0, 1.0);
  fill_random(t->w, wn, -0.5, 0.5);
  tdm_backend_to_bf16(b, t->w16, t->w, wn);
  fill_random(t->gamma, oc, 0.5, 1.5);
  fill_random(t->beta, oc, -0.5, 0.5);
  g_autofree float *dy = g_new(float, out);
  fill_random(dy, out, -1.0, 1.0);
  tdm_backend_to_bf16(b, t->dy, dy, out);
  g_assert_true(tdm_backend_stem_bn_takes(b, &t->s, TDM_DTYPE_F32, &t->work_bytes));
  g_assert_cmpuint(t->work_bytes, >, 0);
  t->work = dev_alloc(b, t->work_bytes);
}

static void
stem_free(TdmBackend *b, Stem *t)
{
  void *bufs[] = {t->x,     t->w,     t->w16,   t->saved, t->gamma,    t->beta,
                  t->slots, t->dy,    t->spare, t->y16,   t->dx16,     t->cols,
                  t->stage, t->sums,  t->other, t->dw,    t->got_sums, t->got_dw,
                  t->work};
  for (guint i = 0; i < G_N_ELEMENTS(bufs); i++)
    tdm_backend_release(b, bufs[i]);
}

/* The stem's output as the replica's forward writes it (tdm-replica-conv.c's staged
 * way: float32 columns, the product staged, rounded once), and the bn's statistics from
 * it. */
static void
separate_forward(TdmBackend *b, Stem *t)
{
  const TdmConvShape *s = &t->s;
  tdm_backend_im2col(b, t->cols, t->x, s->n, s->h, s->w, s->c, s->kernel, s->kernel, s->pad,
                     s->stride);
  tdm_backend_gemm(b, false, true, t->rows, s->out_c, t->k, 1.0f, t->cols, t->k, t->w, t->k,
                   0.0f, t->stage, s->out_c);
  tdm_backend_to_bf16(b, t->y16, t->stage, (size_t)t->rows * s->out_c);
}

/* The steps the passes replace: the bn's sums, its bf16 input gradient from `sums`, and
 * the conv's weight gradient from that gradient widened (the replica's staged backward). */
static void
separate_backward(TdmBackend *b, Stem *t, bool relu, const float *sums, float inv_count)
{
  const TdmConvShape *s = &t->s;
  int oc = s->out_c;
  separate_forward(b, t);
  tdm_backend_bn_backward_sums(b, t->sums, t->sums + oc, t->dy, TDM_DTYPE_BF16, t->y16,
                               TDM_DTYPE_BF16, t->saved, t->saved + oc, t->gamma, t->beta,
                               relu, t->rows, oc);
  if (sums == NULL)
    sums = t->sums;
  tdm_backend_bn_backward_dx_bf16(b, t->dx16, t->dy, TDM_DTYPE_BF16, t->y16, TDM_DTYPE_BF16,
                                  t->saved, t->saved + oc, t->gamma, t->beta, relu, sums,
                                  sums + oc, inv_count, t->rows, oc);
  tdm_backend_from_bf16(b, t->stage, t->dx16, (size_t)t->rows * oc);
  tdm_backend_gemm(b, true, false, oc, t->k, t->rows, 1.0f, t->stage, oc, t->cols, t->k, 0.0f,
                   t->dw, t->k);
}

static TdmStemBn
passes_args(Stem *t, bool relu)
{
  int oc = t->s.out_c;
  return (TdmStemBn){.shape = t->s,
                     .x = t->x,
                     .x_type = TDM_DTYPE_F32,
                     .w = t->w,
                     .w16 = t->w16,
                     .mean = t->saved,
                     .invstd = t->saved + oc,
                     .gamma = t->gamma,
                     .beta = t->beta,
                     .relu = relu,
                     .dy = t->dy,
                     .spare = t->spare,
                     .work = t->work,
                     .work_bytes = t->work_bytes};
}

static void
check_stem(const StemShape *sh)
{
  TdmBackend *b = bf16_backend();
  Stem t;
  stem_alloc(b, &t, sh);
  int oc = sh->out_c;
  size_t wn = (size_t)oc * t.k;
  float inv_count = 1.0f / (float)t.rows;
  separate_forward(b, &t);
  tdm_backend_bn_moments(b, t.slots, t.y16, TDM_DTYPE_BF16, t.rows, oc, 0, 1);
  tdm_backend_bn_stats(b, t.saved, t.slots, 1, oc, 1e-5f, 0.1f, NULL, NULL);
  for (int relu = 0; relu <= 1; relu++)
    for (int synced = 0; synced <= 1; synced++) {
      /* Synchronized: sums over more rows than this replica's (another replica's share
       * added), as the all-reduce hands them, and the count of both. */
      const float *sums = NULL;
      float count = inv_count;
      if (synced) {
        for (int i = 0; i < 2 * oc; i++)
          t.other[i] = (float)g_test_rand_double_range(-2.0, 2.0);
        sums = t.other;
        count = inv_count / 2;
      }
      separate_backward(b, &t, relu, sums, count);
      TdmStemBn a = passes_args(&t, relu);
      poison(t.got_sums, 2 * (size_t)oc);
      poison(t.got_dw, wn);
      tdm_backend_stem_bn_sums(b, &a, t.got_sums, t.got_sums + oc);
      tdm_backend_stem_bn_dx_wgrad(b, &a, synced ? t.other : t.got_sums,
                                   synced ? t.other + oc : t.got_sums + oc, count, t.got_dw);
      g_assert_true(tdm_backend_check(b, NULL));
      g_assert_cmpmem(t.got_sums, 2 * (size_t)oc * sizeof(float), t.sums,
                      2 * (size_t)oc * sizeof(float));
      g_assert_cmpmem(t.got_dw, wn * sizeof(float), t.dw, wn * sizeof(float));
      /* The room for the output held the bn's input gradient last, as over the stem's
       * output in the replica's steps. */
      g_assert_cmpmem(t.spare, (size_t)t.rows * oc * 2, t.dx16, (size_t)t.rows * oc * 2);
    }
  stem_free(b, &t);
  free_backend(b);
}

static void
test_same_bits(void)
{
  /* The CIFAR stem (27 taps, 64 out), a strided one with a pad, a single channel's (the
   * IDX sets' stem, 9 taps, 16 out, no pad). */
  const StemShape shapes[] = {
      {3, 8, 8, 3, 64, 3, 1, 1}, {2, 9, 7, 3, 32, 3, 1, 2}, {2, 6, 5, 1, 16, 3, 0, 1}};
  for (guint i = 0; i < G_N_ELEMENTS(shapes); i++)
    check_stem(&shapes[i]);
}

static void
assert_refused(TdmBackend *b, const char *op)
{
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_backend_check(b, &error));
  g_assert_nonnull(strstr(error->message, op));
}

static void
test_refused(void)
{
  TdmConvShape cifar = {2, 8, 8, 3, 64, 3, 1, 1};
  size_t bytes = 1;
  /* Not in a float32 run: its stem stores nothing as bf16. */
  TdmBackend *f32 = new_backend();
  g_assert_false(tdm_backend_stem_bn_takes(f32, &cifar, TDM_DTYPE_F32, &bytes));
  g_assert_cmpuint(bytes, ==, 0);
  free_backend(f32);
  TdmBackend *b = bf16_backend();
  g_assert_true(tdm_backend_stem_bn_takes(b, &cifar, TDM_DTYPE_F32, NULL));
  /* A bf16 image; as many outputs as taps or fewer (bf16 columns); a 1×1 conv of stride
   * 1 and no padding (no columns); no samples. */
  g_assert_false(tdm_backend_stem_bn_takes(b, &cifar, TDM_DTYPE_BF16, NULL));
  g_assert_false(tdm_backend_stem_bn_takes(b, &(TdmConvShape){2, 8, 8, 3, 27, 3, 1, 1},
                                           TDM_DTYPE_F32, NULL));
  g_assert_false(tdm_backend_stem_bn_takes(b, &(TdmConvShape){2, 8, 8, 3, 64, 1, 0, 1},
                                           TDM_DTYPE_F32, NULL));
  g_assert_false(tdm_backend_stem_bn_takes(b, &(TdmConvShape){0, 8, 8, 3, 64, 3, 1, 1},
                                           TDM_DTYPE_F32, NULL));
  free_backend(b);
  /* Too little scratch; a shape not taken; the output's room over its gradient; the
   * scratch 16 bytes past a 32-byte boundary; dy a bf16 value past a 16-byte one: each
   * the failure of the pass, on a backend of its own (the error is sticky). */
  for (int k = 0; k < 5; k++) {
    b = bf16_backend();
    Stem t;
    stem_alloc(b, &t, &(StemShape){2, 8, 8, 3, 64, 3, 1, 1});
    TdmStemBn a = passes_args(&t, true);
    if (k == 0)
      a.work_bytes--;
    else if (k == 1)
      a.shape.out_c = 16;
    else if (k == 2)
      a.spare = (uint16_t *)t.dy + 8; /* 16 bytes on: aligned, over dy */
    else if (k == 3)
      a.work = (char *)a.work + 16; /* work_bytes unchanged: refused before it is read */
    else
      a.dy = (const uint16_t *)a.dy + 1;
    /* The replica asks first and runs the four steps where this says no. */
    g_assert_true(tdm_backend_stem_bn_aligned(&a) == (k < 3));
    poison(t.got_dw, (size_t)64 * t.k);
    if (k == 1) {
      tdm_backend_stem_bn_dx_wgrad(b, &a, t.sums, t.sums + 64, 0.01f, t.got_dw);
      assert_refused(b, "stem_bn_dx_wgrad");
      /* Refused before the backend saw it: dw left alone. */
      g_assert_true(isnan(t.got_dw[0]));
    } else {
      tdm_backend_stem_bn_sums(b, &a, t.got_sums, t.got_sums + 64);
      assert_refused(b, k < 3 ? "stem_bn_sums" : "not aligned");
    }
    stem_free(b, &t);
    tdm_backend_free(b);
  }
}

void
test_backend_cpu_add_stem_bn(void)
{
  g_test_add_func("/backend-cpu/bf16/stem-bn", test_same_bits);
  g_test_add_func("/backend-cpu/bf16/stem-bn-refused", test_refused);
}
