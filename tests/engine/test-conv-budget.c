/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-budget.c — which convolution candidates the engine may choose by what they
 * need of the workspace (tdm-backend-cuda-conv-budget.h), on any machine: the needs are
 * the engine's layout of each candidate for real ResNet shapes (bf16 operands, 2 bytes
 * an element), the columns of a 7×7 stem and of 3×3 layers (in chunks of the batch, and
 * the stem's whole batch's as they were) against cuDNN's input copy,
 * a 1×1 stride-2 projection's strided gather against cuDNN's whole-input copy, a
 * plan that asks cuDNN for a gigabyte of its own, and cuDNN's forward of a bn's output
 * normalized in chunks of the batch at 64 and 128 px; the budget counted beyond the
 * reservations every candidate of a call holds (the 224-px stem's weight gradient); and
 * a float32 run's, whose slack is its larger chunk (the small cnn's whole columns). */
#include "tdm-backend-cuda-conv-budget.h"

#define MIB ((guint64)1 << 20)

typedef struct {
  guint64 n, h, w, c, out_c, kernel, pad, stride;
} Shape;

static guint64
out_side(guint64 side, const Shape *s)
{
  return (side + 2 * s->pad - s->kernel) / s->stride + 1;
}

static guint64
rows_of(const Shape *s)
{
  return s->n * out_side(s->h, s) * out_side(s->w, s);
}

/* The engine's reservations: dy as bf16 in backward, room for the bf16 weights. */
static guint64
reserved(const Shape *s, gboolean backward)
{
  guint64 weights = s->out_c * s->kernel * s->kernel * s->c * 2;
  return (backward ? rows_of(s) * s->out_c * 2 : 0) + weights;
}

/* "im2col": bf16 columns after the reservations, built a chunk of samples at a time,
 * each chunk's columns at most a bf16 run's 32 MiB (one sample's where they are more:
 * tdm-conv-columns.h). */
static guint64
im2col_need(const Shape *s, gboolean backward)
{
  guint64 sample = rows_of(s) / s->n * s->kernel * s->kernel * s->c * 2;
  guint64 chunk = MIN(s->n, MAX(32 * MIB / sample, 1));
  return reserved(s, backward) + chunk * sample;
}

/* A cuDNN plan reading the whole input as bf16, with `workspace` bytes of its own. */
static guint64
cudnn_need(const Shape *s, gboolean backward, guint64 workspace)
{
  return reserved(s, backward) + s->n * s->h * s->w * s->c * 2 + workspace;
}

/* The selection for a call whose candidates all hold `held` (the layout's reservations,
 * aligned: tdm_conv_engine_reserved_bytes()). */
static guint
select_held(const guint64 *needs, guint count, guint64 held, gboolean *eligible)
{
  guint chosen = tdm_conv_budget_select(needs, count, held, TDM_PRECISION_BF16, eligible);
  for (guint i = 0; i < count; i++)
    g_test_message("need %" G_GUINT64_FORMAT " bytes: %s", needs[i],
                   eligible[i] ? "eligible" : "left out");
  return chosen;
}

/* A call of shape s: its reservations as the engine aligns them. */
static guint
select_needs(const Shape *s, gboolean backward, const guint64 *needs, guint count,
             gboolean *eligible)
{
  TdmConvShape shape = {(int)s->n, (int)s->h, (int)s->w, (int)s->c, (int)s->out_c,
                        (int)s->kernel, (int)s->pad, (int)s->stride};
  guint64 held = tdm_conv_engine_reserved_bytes(
      &shape, backward ? TDM_CONV_WGRAD : TDM_CONV_FORWARD, TRUE, FALSE);
  /* The alignment adds less than 512 bytes to this test's count of them. */
  g_assert_cmpuint(held, >=, reserved(s, backward));
  g_assert_cmpuint(held, <, reserved(s, backward) + 512);
  return select_held(needs, count, held, eligible);
}

/* torchvision's stem at 224 px, batch 128: its columns (147 taps a pixel) are 49/4 the
 * three-channel input, 472 MB the batch, built 9 samples at a time (33 MB); cuDNN reads
 * the input itself (38.5 MB as bf16). In chunks the columns stay within the budget
 * beside it: both kinds are timed. Whole, they were left out. */
static void
test_stem(void)
{
  Shape stem = {128, 224, 224, 3, 64, 7, 3, 2};
  guint64 needs[] = {im2col_need(&stem, FALSE), cudnn_need(&stem, FALSE, 0),
                     cudnn_need(&stem, FALSE, 4 * MIB)};
  g_assert_cmpuint(needs[0], <, 34 * MIB);
  gboolean eligible[3];
  g_assert_cmpuint(select_needs(&stem, FALSE, needs, 3, eligible), ==, 3);
  guint64 whole[] = {reserved(&stem, FALSE) + rows_of(&stem) * 147 * 2, needs[1]};
  g_assert_cmpuint(select_needs(&stem, FALSE, whole, 2, eligible), ==, 1);
  g_assert_false(eligible[0]);
  /* The weight gradient too (x and dy both read, dy as bf16 first in either). */
  guint64 wgrad[] = {im2col_need(&stem, TRUE), cudnn_need(&stem, TRUE, 0)};
  g_assert_cmpuint(select_needs(&stem, TRUE, wgrad, 2, eligible), ==, 2);
}

/* The budget beyond the reservations (the stem's weight gradient at 224 px, batch 128,
 * as the H100 chose it: our own kernel, whose need the run's memory event gave as
 * 226,101,760 bytes, of which 205,539,840 are the reservations: dy as bf16, 112·112·64
 * a sample, and the weights' room). What every candidate holds alike is not doubled:
 * beyond it the least takes 20,561,920 bytes, so the budget is the reservations and
 * that plus 64 MiB (twice it is less): the chunked columns (33.2 MB) stay, cuDNN's plan
 * over the input padded to 8 channels (102.8 MB) is left out, and the workspace grows
 * to 239 MB at most while the candidates are timed (272 MB in chunks of 64 MiB; it grew
 * to ~356 MB when twice the whole need, 452 MB, was the budget). */
static void
test_beyond_reservations(void)
{
  Shape stem = {128, 224, 224, 3, 64, 7, 3, 2};
  TdmConvShape shape = {128, 224, 224, 3, 64, 7, 3, 2};
  guint64 held = tdm_conv_engine_reserved_bytes(&shape, TDM_CONV_WGRAD, TRUE, FALSE);
  g_assert_cmpuint(held, ==, 205539840);
  g_assert_cmpuint(held, ==, (128 * 112 * 112 * 64 * 2 + 64 * 147 * 2 + 255) / 256 * 256);
  guint64 own = 226101760, padded = held + stem.n * stem.h * stem.w * 8 * 2;
  guint64 needs[] = {own, im2col_need(&stem, TRUE), padded};
  g_assert_cmpuint(tdm_conv_budget_beyond(own, held, TDM_PRECISION_BF16), ==, own + 64 * MIB);
  g_assert_cmpuint(tdm_conv_budget(own, TDM_PRECISION_BF16), ==, 2 * own);
  gboolean eligible[3];
  g_assert_cmpuint(select_held(needs, 3, held, eligible), ==, 2);
  g_assert_true(eligible[0] && eligible[1]);
  g_assert_false(eligible[2]);
  /* Without the reservations counted apart, all three were timed. */
  g_assert_cmpuint(select_held(needs, 3, 0, eligible), ==, 3);
  /* A budget is never below the plain one's floor of the least and 64 MiB, nor above
   * the plain one; reservations beyond the least count as the least. */
  for (guint64 r = 0; r <= own; r += own / 7) {
    g_assert_cmpuint(tdm_conv_budget_beyond(own, r, TDM_PRECISION_BF16), >=, own + 64 * MIB);
    g_assert_cmpuint(tdm_conv_budget_beyond(own, r, TDM_PRECISION_BF16), <=,
                     tdm_conv_budget(own, TDM_PRECISION_BF16));
  }
  g_assert_cmpuint(tdm_conv_budget_beyond(own, 2 * own, TDM_PRECISION_BF16), ==,
                   own + 64 * MIB);
}

/* A 3×3 layer's backward at 56 px, 64 channels: the columns are nine times the input,
 * built 9 samples at a time (32.5 MB); cuDNN's plans differ by their own workspace,
 * which the budget lets differ by up to 64 MiB beyond the columns' need: beside cuDNN's
 * copy of the whole input (51.4 MB), up to 46 MiB of its own (48 MiB was within it
 * beside chunks of 64 MiB), and not a gigabyte. */
static void
test_three_by_three(void)
{
  Shape layer = {128, 56, 56, 64, 64, 3, 1, 1};
  guint64 needs[] = {im2col_need(&layer, TRUE), cudnn_need(&layer, TRUE, 0),
                     cudnn_need(&layer, TRUE, 40 * MIB), cudnn_need(&layer, TRUE, 1024 * MIB)};
  gboolean eligible[4];
  g_assert_cmpuint(select_needs(&layer, TRUE, needs, 4, eligible), ==, 3);
  g_assert_true(eligible[0] && eligible[1] && eligible[2]);
  g_assert_false(eligible[3]);
}

/* A 1×1 stride-2 projection: its "columns" are the strided gather, a quarter of the
 * input, and cuDNN's copy of the whole input is within the budget's slack: both stay,
 * and time decides. */
static void
test_projection(void)
{
  Shape projection = {128, 56, 56, 64, 128, 1, 0, 2};
  guint64 needs[] = {im2col_need(&projection, FALSE), cudnn_need(&projection, FALSE, 0)};
  g_assert_cmpuint(needs[0], <, needs[1]);
  gboolean eligible[2];
  g_assert_cmpuint(select_needs(&projection, FALSE, needs, 2, eligible), ==, 2);
}

/* A cuDNN forward of a 3×3 layer whose input the engine writes itself (normalized by
 * the bn before: the "bn" key), in even chunks whose bf16 input is at most a bf16 run's
 * 32 MiB (tdm_conv_even_chunks(); tdm-backend-cuda-conv-candidates.c's cudnn_chunks()),
 * with `workspace` bytes of its own. */
static guint64
cudnn_chunked_need(const Shape *s, guint64 workspace, TdmConvChunks *chunks)
{
  guint64 sample = s->h * s->w * s->c * 2;
  *chunks = tdm_conv_even_chunks((int)s->n, sample, 32 * MIB);
  return reserved(s, FALSE) + (guint64)chunks->size * sample + workspace;
}

/* The forwards of issue 31's 64- and 128-px ResNet-18 rows whose input is the bn's
 * un-normalized output, as the H100's cache had them (all "im2col", untimed): cuDNN's
 * whole normalized copy of the input (268 MB at 128 px) was beyond the budget the
 * chunked columns set; in chunks of at most 32 MiB of input it is within it, beside a
 * workspace of up to 48 MiB of cuDNN's own, and both kinds are timed. So is an odd
 * batch (97 of 2 MiB, 16 a chunk at most: chunks of 14, 14, 14, 14, 14, 14, 13). */
static void
test_bn_prologue_chunks(void)
{
  const Shape layers[] = {
    {128, 128, 128, 64, 64, 3, 1, 1},
    {128, 64, 64, 128, 128, 3, 1, 1},
    {256, 64, 64, 64, 64, 3, 1, 1},
    {97, 128, 128, 64, 64, 3, 1, 1},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(layers); i++) {
    const Shape *s = &layers[i];
    TdmConvChunks chunks;
    guint64 needs[] = {im2col_need(s, FALSE), cudnn_need(s, FALSE, 0),
                       cudnn_chunked_need(s, 0, &chunks),
                       cudnn_chunked_need(s, 48 * MIB, &chunks)};
    g_test_message("n%" G_GUINT64_FORMAT " h%" G_GUINT64_FORMAT " c%" G_GUINT64_FORMAT
                   ": %d chunks of at most %d samples",
                   s->n, s->h, s->c, chunks.count, chunks.size);
    g_assert_cmpuint((guint64)chunks.size * s->h * s->w * s->c * 2, <=, 32 * MIB);
    g_assert_cmpint(chunks.count, >, 1);
    gboolean eligible[4];
    g_assert_cmpuint(select_needs(s, FALSE, needs, 4, eligible), ==, 3);
    g_assert_true(eligible[0] && eligible[2] && eligible[3]);
    g_assert_false(eligible[1]);
  }
  TdmConvChunks odd;
  cudnn_chunked_need(&layers[3], 0, &odd);
  g_assert_cmpint(odd.count, ==, 7);
  g_assert_cmpint(odd.size, ==, 14);
  g_assert_cmpint(odd.large, ==, 6);
}

/* A float32 (or tf32) run builds its columns in chunks of 256 MiB, and its budget's slack
 * is that chunk: the small cnn's second conv (3×3, 32 → 64 channels at 14 × 14) at batch
 * 1024 has 1024 × 196 × 288 × 4 = 231,211,008 bytes of float32 columns, so one chunk,
 * the whole batch's, with no reservations; beside a column-free candidate needing
 * nothing or a few MiB of cuDNN's own, they are within the budget and timed (at a bf16
 * run's 64 MiB slack they were left out, and cuDNN's float32 engines, 12 times slower
 * there, chosen). A bf16 run's call is as it was: its bf16 columns of the same conv
 * (115,605,504 bytes) in four chunks of 32 MiB at most, the slack 64 MiB (more than the
 * chunk's own 33,530,112 bytes). */
static void
test_float_columns(void)
{
  TdmConvShape conv2 = {1024, 14, 14, 32, 64, 3, 1, 1};
  size_t sample = 196 * 288 * 4;
  g_assert_cmpuint(tdm_conv_chunk_bytes(TDM_PRECISION_FP32), ==, 256 * MIB);
  g_assert_cmpuint(tdm_conv_chunk_bytes(TDM_PRECISION_TF32), ==, 256 * MIB);
  g_assert_cmpuint(tdm_conv_chunk_bytes(TDM_PRECISION_BF16), ==, 32 * MIB);
  g_assert_cmpint(tdm_conv_chunk_samples(1024, sample, 256 * MIB), ==, 1024);
  for (int dir = TDM_CONV_FORWARD; dir <= TDM_CONV_WGRAD; dir++)
    for (TdmPrecision p = TDM_PRECISION_FP32; p <= TDM_PRECISION_TF32; p++) {
      g_assert_cmpuint(tdm_conv_engine_reserved_bytes(&conv2, dir, FALSE, FALSE), ==, 0);
      g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&conv2, dir, p, FALSE, FALSE), ==,
                       1024 * sample);
    }
  g_assert_cmpuint(1024 * sample, ==, 231211008);
  guint64 needs[] = {1024 * sample, 0, 4 * MIB};
  gboolean eligible[3];
  for (TdmPrecision p = TDM_PRECISION_FP32; p <= TDM_PRECISION_TF32; p++) {
    g_assert_cmpuint(tdm_conv_budget(0, p), ==, 256 * MIB);
    g_assert_cmpuint(tdm_conv_budget_select(needs, 3, 0, p, eligible), ==, 3);
  }
  /* A bf16 run's slack would leave them out. */
  g_assert_cmpuint(tdm_conv_budget_select(needs, 3, 0, TDM_PRECISION_BF16, eligible), ==, 2);
  g_assert_false(eligible[0]);

  /* The bf16 run's call: 297 samples a chunk (112,896 bytes of bf16 columns each), after
   * the weights' room (64 × 288 × 2 = 36,864 bytes). */
  guint64 held = tdm_conv_engine_reserved_bytes(&conv2, TDM_CONV_FORWARD, TRUE, FALSE);
  g_assert_cmpuint(held, ==, 36864);
  guint64 im2col16 =
      tdm_conv_engine_im2col_bytes(&conv2, TDM_CONV_FORWARD, TDM_PRECISION_BF16, FALSE, FALSE);
  g_assert_cmpuint(im2col16, ==, held + 297 * (guint64)112896);
  g_assert_cmpuint(297 * (guint64)112896, ==, 33530112);
  g_assert_cmpuint(298 * (guint64)112896, >, 32 * MIB);
  g_assert_cmpuint(tdm_conv_budget_beyond(held, held, TDM_PRECISION_BF16), ==, held + 64 * MIB);
  g_assert_cmpuint(tdm_conv_budget_beyond(im2col16, held, TDM_PRECISION_BF16), ==,
                   im2col16 + 64 * MIB);
}

/* The slack is the run's chunk, never below 64 MiB (a chunk smaller than that leaves
 * cuDNN's plans their 64 MiB): whatever the least, a candidate needing one slack more
 * stays eligible, and one needing more than that and twice the least does not. */
static void
test_slack(void)
{
  const guint64 leasts[] = {0, 1, 20 * MIB, 64 * MIB, 200 * MIB, 256 * MIB, 3000 * MIB};
  for (TdmPrecision p = TDM_PRECISION_FP32; p <= TDM_PRECISION_BF16; p++)
    for (size_t i = 0; i < G_N_ELEMENTS(leasts); i++) {
      guint64 least = leasts[i], slack = MAX(64 * MIB, (guint64)tdm_conv_chunk_bytes(p));
      guint64 needs[] = {least, least + slack, MAX(2 * least, least + slack) + 1};
      gboolean eligible[3];
      g_assert_cmpuint(tdm_conv_budget_select(needs, 3, 0, p, eligible), ==, 2);
      g_assert_true(eligible[0] && eligible[1]);
      g_assert_false(eligible[2]);
    }
}

/* Whatever the needs, the least-needing candidate stays; none, none; no overflow. */
static void
test_edges(void)
{
  gboolean eligible[3];
  g_assert_cmpuint(tdm_conv_budget_select(NULL, 0, 0, TDM_PRECISION_BF16, eligible), ==, 0);
  guint64 one[] = {G_MAXUINT64};
  g_assert_cmpuint(tdm_conv_budget_select(one, 1, 0, TDM_PRECISION_BF16, eligible), ==, 1);
  g_assert_cmpuint(
      tdm_conv_budget_select(one, 1, G_MAXUINT64 - 1, TDM_PRECISION_BF16, eligible), ==, 1);
  guint64 huge[] = {G_MAXUINT64 - 1, G_MAXUINT64 / 2 + 1, G_MAXUINT64};
  g_assert_cmpuint(tdm_conv_budget_select(huge, 3, 0, TDM_PRECISION_BF16, eligible), ==, 3);
  guint64 zero[] = {0, 64 * MIB, 64 * MIB + 1};
  g_assert_cmpuint(tdm_conv_budget_select(zero, 3, 0, TDM_PRECISION_BF16, eligible), ==, 2);
  g_assert_true(eligible[0] && eligible[1]);
  g_assert_false(eligible[2]);
  g_assert_cmpuint(tdm_conv_budget(G_MAXUINT64 / 2 + 1, TDM_PRECISION_BF16), ==, G_MAXUINT64);
  g_assert_cmpuint(tdm_conv_budget_beyond(G_MAXUINT64, G_MAXUINT64 / 2, TDM_PRECISION_BF16), ==,
                   G_MAXUINT64);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-budget/stem", test_stem);
  g_test_add_func("/conv-budget/beyond-reservations", test_beyond_reservations);
  g_test_add_func("/conv-budget/three-by-three", test_three_by_three);
  g_test_add_func("/conv-budget/projection", test_projection);
  g_test_add_func("/conv-budget/bn-prologue-chunks", test_bn_prologue_chunks);
  g_test_add_func("/conv-budget/float-columns", test_float_columns);
  g_test_add_func("/conv-budget/slack", test_slack);
  g_test_add_func("/conv-budget/edges", test_edges);
  return g_test_run();
}
