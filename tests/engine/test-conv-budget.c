/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-budget.c — which convolution candidates the engine may choose by what they
 * need of the workspace (tdm-backend-cuda-conv-budget.h), on any machine: the needs are
 * the engine's layout of each candidate for real ResNet shapes (bf16 operands, 2 bytes
 * an element), the columns of a 7×7 stem and of 3×3 layers (in chunks of the batch, and
 * the stem's whole batch's as they were) against cuDNN's input copy,
 * a 1×1 stride-2 projection's strided gather against cuDNN's whole-input copy, a
 * plan that asks cuDNN for a gigabyte of its own, and cuDNN's forward of a bn's output
 * normalized in chunks of the batch at 64 and 128 px. */
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
 * each chunk's columns at most 64 MiB (one sample's where they are more:
 * tdm-conv-columns.h). */
static guint64
im2col_need(const Shape *s, gboolean backward)
{
  guint64 sample = rows_of(s) / s->n * s->kernel * s->kernel * s->c * 2;
  guint64 chunk = MIN(s->n, MAX(64 * MIB / sample, 1));
  return reserved(s, backward) + chunk * sample;
}

/* A cuDNN plan reading the whole input as bf16, with `workspace` bytes of its own. */
static guint64
cudnn_need(const Shape *s, gboolean backward, guint64 workspace)
{
  return reserved(s, backward) + s->n * s->h * s->w * s->c * 2 + workspace;
}

static guint
select_needs(const guint64 *needs, guint count, gboolean *eligible)
{
  guint chosen = tdm_conv_budget_select(needs, count, eligible);
  for (guint i = 0; i < count; i++)
    g_test_message("need %" G_GUINT64_FORMAT " bytes: %s", needs[i],
                   eligible[i] ? "eligible" : "left out");
  return chosen;
}

/* torchvision's stem at 224 px, batch 128: its columns (147 taps a pixel) are 49/4 the
 * three-channel input, 472 MB the batch, built 18 samples at a time (66 MB); cuDNN reads
 * the input itself (38.5 MB as bf16). In chunks the columns stay within the budget
 * beside it: both kinds are timed. Whole, they were left out. */
static void
test_stem(void)
{
  Shape stem = {128, 224, 224, 3, 64, 7, 3, 2};
  guint64 needs[] = {im2col_need(&stem, FALSE), cudnn_need(&stem, FALSE, 0),
                     cudnn_need(&stem, FALSE, 4 * MIB)};
  g_assert_cmpuint(needs[0], <, 68 * MIB);
  gboolean eligible[3];
  g_assert_cmpuint(select_needs(needs, 3, eligible), ==, 3);
  guint64 whole[] = {reserved(&stem, FALSE) + rows_of(&stem) * 147 * 2, needs[1]};
  g_assert_cmpuint(select_needs(whole, 2, eligible), ==, 1);
  g_assert_false(eligible[0]);
  /* The weight gradient too (x and dy both read, dy as bf16 first in either). */
  guint64 wgrad[] = {im2col_need(&stem, TRUE), cudnn_need(&stem, TRUE, 0)};
  g_assert_cmpuint(select_needs(wgrad, 2, eligible), ==, 2);
}

/* A 3×3 layer's backward at 56 px, 64 channels: the columns are nine times the input,
 * built 18 samples at a time; cuDNN's plans differ by their own workspace, which the
 * budget lets differ, up to twice the least. */
static void
test_three_by_three(void)
{
  Shape layer = {128, 56, 56, 64, 64, 3, 1, 1};
  guint64 needs[] = {im2col_need(&layer, TRUE), cudnn_need(&layer, TRUE, 0),
                     cudnn_need(&layer, TRUE, 48 * MIB), cudnn_need(&layer, TRUE, 1024 * MIB)};
  gboolean eligible[4];
  g_assert_cmpuint(select_needs(needs, 4, eligible), ==, 3);
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
  g_assert_cmpuint(select_needs(needs, 2, eligible), ==, 2);
}

/* A cuDNN forward of a 3×3 layer whose input the engine writes itself (normalized by
 * the bn before: the "bn" key), in even chunks whose bf16 input is at most 64 MiB
 * (tdm_conv_even_chunks(); tdm-backend-cuda-conv-candidates.c's cudnn_chunks()), with
 * `workspace` bytes of its own. */
static guint64
cudnn_chunked_need(const Shape *s, guint64 workspace, TdmConvChunks *chunks)
{
  guint64 sample = s->h * s->w * s->c * 2;
  *chunks = tdm_conv_even_chunks((int)s->n, sample, 64 * MIB);
  return reserved(s, FALSE) + (guint64)chunks->size * sample + workspace;
}

/* The forwards of issue 31's 64- and 128-px ResNet-18 rows whose input is the bn's
 * un-normalized output, as the H100's cache had them (all "im2col", untimed): cuDNN's
 * whole normalized copy of the input (268 MB at 128 px) was beyond the budget the
 * chunked columns set; in chunks of at most 64 MiB of input it is within it, beside a
 * workspace of up to 48 MiB of cuDNN's own, and both kinds are timed. So is an odd
 * batch (97: chunks of 25, 24, 24, 24). */
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
    g_assert_cmpuint((guint64)chunks.size * s->h * s->w * s->c * 2, <=, 64 * MIB);
    g_assert_cmpint(chunks.count, >, 1);
    gboolean eligible[4];
    g_assert_cmpuint(select_needs(needs, 4, eligible), ==, 3);
    g_assert_true(eligible[0] && eligible[2] && eligible[3]);
    g_assert_false(eligible[1]);
  }
  TdmConvChunks odd;
  cudnn_chunked_need(&layers[3], 0, &odd);
  g_assert_cmpint(odd.count, ==, 4);
  g_assert_cmpint(odd.size, ==, 25);
  g_assert_cmpint(odd.large, ==, 1);
}

/* Whatever the needs, the least-needing candidate stays; none, none; no overflow. */
static void
test_edges(void)
{
  gboolean eligible[3];
  g_assert_cmpuint(tdm_conv_budget_select(NULL, 0, eligible), ==, 0);
  guint64 one[] = {G_MAXUINT64};
  g_assert_cmpuint(tdm_conv_budget_select(one, 1, eligible), ==, 1);
  guint64 huge[] = {G_MAXUINT64 - 1, G_MAXUINT64 / 2 + 1, G_MAXUINT64};
  g_assert_cmpuint(tdm_conv_budget_select(huge, 3, eligible), ==, 3);
  guint64 zero[] = {0, 64 * MIB, 64 * MIB + 1};
  g_assert_cmpuint(tdm_conv_budget_select(zero, 3, eligible), ==, 2);
  g_assert_true(eligible[0] && eligible[1]);
  g_assert_false(eligible[2]);
  g_assert_cmpuint(tdm_conv_budget(G_MAXUINT64 / 2 + 1), ==, G_MAXUINT64);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-budget/stem", test_stem);
  g_test_add_func("/conv-budget/three-by-three", test_three_by_three);
  g_test_add_func("/conv-budget/projection", test_projection);
  g_test_add_func("/conv-budget/bn-prologue-chunks", test_bn_prologue_chunks);
  g_test_add_func("/conv-budget/edges", test_edges);
  return g_test_run();
}
