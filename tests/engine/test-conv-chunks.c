/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-chunks.c — which of the convolution engine's cuDNN calls run in chunks of
 * samples, and what a bf16 cuDNN weight gradient needs of the workspace
 * (tdm-backend-cuda-conv-chunks.h), on any machine: the rule (a forward or a weight
 * gradient whose input the engine writes, each chunk's copy within 32 MiB; an input
 * gradient, an input read as stored, or an output gradient whose chunks would not start
 * aligned: whole), and the weight gradient's need counted here from the layout
 * independently (the reservations, one chunk's copy, the staged bf16 chunk sum, the
 * float32 sum of a later chunk, cuDNN's own workspace) for the bn-prologue layers of
 * the 128-px CIFAR ResNet-18 row (batch 128): before (the whole normalized input copied for
 * a bf16-output plan) and now (in chunks), and the budget that admits the chunked one
 * where the whole copy was left out. The GPU suite compares the same count with what
 * the engine's candidates ask for (test-cuda-conv-workspace.c). */
#include "tdm-backend-cuda-conv-budget.h"
#include "tdm-backend-cuda-conv-chunks.h"

#define MIB ((size_t)1 << 20)

static size_t
up(size_t v, size_t to)
{
  return (v + to - 1) / to * to;
}

/* A chunking's counts: count chunks, the first `large` of `size` samples. */
static void
assert_chunks(TdmConvChunks c, int count, int size, int large)
{
  g_assert_cmpint(c.count, ==, count);
  g_assert_cmpint(c.size, ==, size);
  g_assert_cmpint(c.large, ==, large);
}

/* Forward and weight gradient alike where the engine writes the input; whole where it
 * does not, for the input gradient, and for output gradients whose chunks would start
 * off a 16-byte boundary; a padded stem by its padded channels. */
static void
test_rule(void)
{
  /* 128 px, 64 channels, batch 128: 2 MiB of bf16 input a sample, in a bf16 run's chunks
   * of 32 MiB 8 chunks of 16. */
  TdmConvShape row = {128, 128, 128, 64, 64, 3, 1, 1};
  assert_chunks(tdm_conv_cudnn_chunks(&row, TDM_CONV_FORWARD, TRUE, 0), 8, 16, 8);
  assert_chunks(tdm_conv_cudnn_chunks(&row, TDM_CONV_WGRAD, TRUE, 0), 8, 16, 8);
  assert_chunks(tdm_conv_cudnn_chunks(&row, TDM_CONV_DGRAD, TRUE, 0), 1, 128, 1);
  assert_chunks(tdm_conv_cudnn_chunks(&row, TDM_CONV_WGRAD, FALSE, 0), 1, 128, 1);
  /* An odd batch: 37 of 2 MiB, 13, 12, 12 (test-cuda-conv-workspace.c's bn case). */
  TdmConvShape odd = {37, 128, 128, 64, 16, 3, 1, 1};
  assert_chunks(tdm_conv_cudnn_chunks(&odd, TDM_CONV_WGRAD, TRUE, 0), 3, 13, 1);
  /* Exactly 32 MiB of input (128 samples of 16 × 16 × 512 as bf16): one chunk; a sample
   * more, two. */
  TdmConvShape exact = {128, 16, 16, 512, 512, 3, 1, 1};
  assert_chunks(tdm_conv_cudnn_chunks(&exact, TDM_CONV_WGRAD, TRUE, 0), 1, 128, 1);
  exact.n = 129;
  assert_chunks(tdm_conv_cudnn_chunks(&exact, TDM_CONV_WGRAD, TRUE, 0), 2, 65, 1);
  /* 127 × 127 output pixels of 3 channels a sample (48,387 values): a chunk's output
   * gradient would start 2 bytes past a 16-byte boundary; the forward is chunked. */
  TdmConvShape ragged = {64, 127, 127, 64, 3, 3, 1, 1};
  assert_chunks(tdm_conv_cudnn_chunks(&ragged, TDM_CONV_WGRAD, TRUE, 0), 1, 64, 1);
  assert_chunks(tdm_conv_cudnn_chunks(&ragged, TDM_CONV_FORWARD, TRUE, 0), 4, 16, 4);
  /* The 224-px stem padded to 8 channels: 784 KiB a sample, 41 fit; 85 are 29 + 28 + 28
   * (its own 3 channels, 294 KiB a sample, would be one chunk). */
  TdmConvShape stem = {85, 224, 224, 3, 16, 7, 3, 2};
  assert_chunks(tdm_conv_cudnn_chunks(&stem, TDM_CONV_WGRAD, TRUE, 8), 3, 29, 1);
  assert_chunks(tdm_conv_cudnn_chunks(&stem, TDM_CONV_FORWARD, TRUE, 8), 3, 29, 1);
  assert_chunks(tdm_conv_cudnn_chunks(&stem, TDM_CONV_FORWARD, TRUE, 0), 1, 85, 1);
}

/* The bytes counted from the layout, piece by piece, each from a 256-byte boundary:
 * dy as bf16 and the weights' bf16 room, then the input copy of `samples`, then, for a
 * bf16 plan, its result staged, then in chunks the float32 sum of a later chunk, then
 * cuDNN's workspace. */
static size_t
counted(const TdmConvShape *s, int samples, gboolean float_out, gboolean summed,
        size_t workspace)
{
  size_t rows = (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s);
  size_t weights = (size_t)s->out_c * s->kernel * s->kernel * s->c;
  size_t need = up(rows * s->out_c * 2 + weights * 2, 256);
  need = up(need + (size_t)samples * s->h * s->w * s->c * 2, 256);
  if (!float_out)
    need = up(need + weights * 2, 256);
  if (summed)
    need = up(need + weights * 4, 256);
  return need + workspace;
}

/* The bn-prologue convolutions' weight gradients of the 128-px row (3×3, stride 1, the
 * second conv of each basic block; batch 128): a bf16-output plan copied the whole
 * normalized input before (268 MB at 128 px, 134 MB at 64, 67 MB at 32); in a bf16
 * run's chunks it copies 32 MiB, beside chunk sums (216 KiB at 128 px). The 16-px
 * layer's input (32 MiB) is one chunk, as before. */
static void
test_row_needs(void)
{
  const TdmConvShape layers[] = {
    {128, 128, 128, 64, 64, 3, 1, 1},
    {128, 64, 64, 128, 128, 3, 1, 1},
    {128, 32, 32, 256, 256, 3, 1, 1},
    {128, 16, 16, 512, 512, 3, 1, 1},
  };
  const int counts[] = {8, 4, 2, 1};
  const size_t before[] = {537018368, 269025280, 136577024, 76546048};
  const size_t after[] = {302284800, 168951808, 105381888, 76546048};
  for (size_t i = 0; i < G_N_ELEMENTS(layers); i++) {
    const TdmConvShape *s = &layers[i];
    TdmConvChunks whole = tdm_conv_even_chunks(s->n, 0, 0);
    TdmConvChunks chunks = tdm_conv_cudnn_chunks(s, TDM_CONV_WGRAD, TRUE, 0);
    g_assert_cmpint(chunks.count, ==, counts[i]);
    size_t was = tdm_conv_cudnn_wgrad_bytes(s, &whole, FALSE, 0);
    size_t now = tdm_conv_cudnn_wgrad_bytes(s, &chunks, FALSE, 0);
    size_t wide = tdm_conv_cudnn_wgrad_bytes(s, &chunks, TRUE, 0);
    g_test_message("wgrad n%d h%d c%d: bf16 output %zu → %zu bytes, float32 output %zu "
                   "(+ cuDNN's workspace)", s->n, s->h, s->c, was, now, wide);
    g_assert_cmpuint(was, ==, counted(s, s->n, FALSE, FALSE, 0));
    g_assert_cmpuint(now, ==, counted(s, chunks.size, FALSE, chunks.count > 1, 0));
    g_assert_cmpuint(wide, ==, counted(s, chunks.size, TRUE, chunks.count > 1, 0));
    g_assert_cmpuint(was, ==, before[i]);
    g_assert_cmpuint(now, ==, after[i]);
    /* cuDNN's own workspace comes on top, from a 256-byte boundary. */
    g_assert_cmpuint(tdm_conv_cudnn_wgrad_bytes(s, &chunks, FALSE, 1000), ==, now + 1000);
    /* The chunk's copy at most 32 MiB; the bf16 plan's chunks cost its staged sum and
     * the float32 sum's room beside a float32 plan's. */
    g_assert_cmpuint((size_t)chunks.size * s->h * s->w * s->c * 2, <=, 32 * MIB);
    if (chunks.count > 1)
      g_assert_cmpuint(now - wide, ==,
                       up((size_t)s->out_c * 9 * s->c * 2, 256));
  }
  /* The 128-px layer: the whole copy's 268,435,456 bytes become one chunk's 33,554,432
   * and 221,184 of sums, 234,733,568 bytes less. */
  g_assert_cmpuint(before[0] - after[0], ==, 234733568);
}

/* A bf16 result of 8 Mi weights or more, whole, is widened in place in dw with a 4 MiB
 * tail staged; in chunks every chunk's is staged. */
static void
test_in_place(void)
{
  /* 1×1, 4096 → 2048: 8,388,608 weights. */
  TdmConvShape wide = {4, 8, 8, 4096, 2048, 1, 0, 1};
  TdmConvChunks whole = tdm_conv_even_chunks(wide.n, 0, 0);
  size_t base = up(4 * 64 * 2048 * 2 + (size_t)8388608 * 2, 256) + 4 * 64 * 4096 * 2;
  g_assert_cmpuint(tdm_conv_cudnn_wgrad_bytes(&wide, &whole, FALSE, 0), ==,
                   up(base, 256) + 4 * MIB);
  g_assert_cmpuint(tdm_conv_cudnn_wgrad_bytes(&wide, &whole, TRUE, 0), ==, base);
  TdmConvChunks two = {2, 2, 2};
  g_assert_cmpuint(tdm_conv_cudnn_wgrad_bytes(&wide, &two, FALSE, 0), ==,
                   up(up(base - 2 * 64 * 4096 * 2, 256) + (size_t)8388608 * 2, 256) +
                       (size_t)8388608 * 4);
}

/* Where the output gradient is small beside the input (16 of 64 channels, as the GPU
 * test's bn case has them, at batch 128 and 128 px: 67 MB of dy as bf16, 268 MB of
 * input), the whole copy put a bf16-output plan past the budget the chunked columns set
 * (their 86 MB and beyond the reservations twice their own 19 MB, or that and 64 MiB); in
 * chunks it is within it beside a workspace of up to 48 MiB of
 * cuDNN's own, as a float32-output plan in chunks is. */
static void
test_budget(void)
{
  TdmConvShape s = {128, 128, 128, 64, 16, 3, 1, 1};
  TdmConvChunks whole = tdm_conv_even_chunks(s.n, 0, 0);
  TdmConvChunks chunks = tdm_conv_cudnn_chunks(&s, TDM_CONV_WGRAD, TRUE, 0);
  guint64 needs[] = {tdm_conv_engine_im2col_bytes(&s, TDM_CONV_WGRAD, TDM_PRECISION_BF16,
                                                  FALSE, FALSE),
                     tdm_conv_cudnn_wgrad_bytes(&s, &whole, FALSE, 0),
                     tdm_conv_cudnn_wgrad_bytes(&s, &chunks, FALSE, 0),
                     tdm_conv_cudnn_wgrad_bytes(&s, &chunks, FALSE, 48 * MIB),
                     tdm_conv_cudnn_wgrad_bytes(&s, &chunks, TRUE, 48 * MIB)};
  gboolean eligible[G_N_ELEMENTS(needs)];
  /* Every candidate holds the layout's reservations (dy as bf16, the weights' room): the
   * budget counts beyond them (tdm_conv_budget_beyond()). */
  guint64 held = tdm_conv_engine_reserved_bytes(&s, TDM_CONV_WGRAD, TRUE, FALSE);
  g_assert_cmpuint(
      tdm_conv_budget_select(needs, G_N_ELEMENTS(needs), held, TDM_PRECISION_BF16, eligible),
      ==, 4);
  for (size_t i = 0; i < G_N_ELEMENTS(needs); i++)
    g_test_message("need %" G_GUINT64_FORMAT ": %s", needs[i],
                   eligible[i] ? "eligible" : "left out");
  g_assert_false(eligible[1]);
  g_assert_true(eligible[0] && eligible[2] && eligible[3] && eligible[4]);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-chunks/rule", test_rule);
  g_test_add_func("/conv-chunks/row-needs", test_row_needs);
  g_test_add_func("/conv-chunks/in-place", test_in_place);
  g_test_add_func("/conv-chunks/budget", test_budget);
  return g_test_run();
}
