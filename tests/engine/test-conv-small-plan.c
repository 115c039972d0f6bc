/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-small-plan.c — conv-small-plan.h, the tiling of the engine's few-channel
 * convolution kernels (conv-small.cu), on any machine: the shapes it takes and refuses;
 * torchvision's stem, the resnet preset's first conv and an 8-channel 7×7 worked out
 * by hand; and over random shapes, that the weight gradient's splits cover the output
 * pixels exactly once in whole steps, within the block count, the partials' bytes
 * theirs, and the forward's tile a divisor of the output channels within the shared
 * memory every sm_80+ GPU grants.
 */
#include "conv-small-plan.h"

#include <glib.h>

static void
test_stem(void)
{
  TdmKSmallPlan p;
  g_assert_true(tdm_k_small_plan(128, 224, 224, 3, 64, 7, 3, 2, &p));
  g_assert_cmpint(p.oh, ==, 112);
  g_assert_cmpint(p.ow, ==, 112);
  g_assert_cmpint(p.rows, ==, 128 * 112 * 112);
  g_assert_cmpint(p.k, ==, 147);
  g_assert_cmpint(p.kpad, ==, 160);
  g_assert_cmpint(p.kc, ==, 160);
  g_assert_cmpint(p.kchunks, ==, 1);
  g_assert_cmpint(p.bn, ==, 64);
  /* The gathered tile 128 × 168 bf16 (more than the 128 × 68 float32 output tile), the
   * weights 64 × 168 bf16, the table 160 × 2 ints, the bn's 2 × 8 floats. */
  g_assert_cmpuint(p.fwd_smem, ==, 43008 + 21504 + 1280 + 64);
  g_assert_cmpint(p.ob, ==, 64);
  /* 25,088 steps of 64 pixels over 512 blocks: 49 steps a split. */
  g_assert_cmpint(p.split_rows, ==, 49 * 64);
  g_assert_cmpint(p.splits, ==, 512);
  g_assert_cmpuint(p.partial_bytes, ==, (size_t)512 * 64 * 160 * 4);
}

static void
test_resnet_preset(void)
{
  TdmKSmallPlan p;
  g_assert_true(tdm_k_small_plan(512, 28, 28, 1, 32, 3, 1, 1, &p));
  g_assert_cmpint(p.rows, ==, 512 * 28 * 28);
  g_assert_cmpint(p.k, ==, 9);
  g_assert_cmpint(p.kpad, ==, 16);
  g_assert_cmpint(p.kc, ==, 16);
  g_assert_cmpint(p.bn, ==, 32);
  g_assert_cmpint(p.ob, ==, 32);
  /* 6,272 steps over 512 blocks: 13 a split, 483 splits (the last one shorter). */
  g_assert_cmpint(p.split_rows, ==, 13 * 64);
  g_assert_cmpint(p.splits, ==, 483);
  g_assert_cmpuint(p.partial_bytes, ==, (size_t)483 * 32 * 16 * 4);
}

static void
test_three_passes(void)
{
  TdmKSmallPlan p;
  g_assert_true(tdm_k_small_plan(3, 29, 31, 8, 64, 7, 3, 1, &p));
  g_assert_cmpint(p.k, ==, 392);
  g_assert_cmpint(p.kpad, ==, 400);
  g_assert_cmpint(p.kc, ==, 160);
  g_assert_cmpint(p.kchunks, ==, 3);
  /* 43,008 + 64 × 408 × 2 + 400 × 8 + 64 = 98,496 bytes: within 99 KiB. */
  g_assert_cmpint(p.bn, ==, 64);
  g_assert_cmpuint(p.fwd_smem, ==, 98496);
  g_assert_cmpuint(p.fwd_smem, <=, TDM_K_SMALL_SMEM_MAX);
  /* 2,697 pixels, 43 steps; 3 chunks: 170 splits at most, one step each, but a split
   * takes at least 8 steps: 6 splits, the last one 3 steps. */
  g_assert_cmpint(p.split_rows, ==, 8 * 64);
  g_assert_cmpint(p.splits, ==, 6);
  g_assert_true(tdm_k_small_plan(2, 9, 9, 8, 48, 3, 1, 1, &p));
  g_assert_cmpint(p.bn, ==, 16);
  g_assert_cmpint(p.ob, ==, 16);
  g_assert_true(tdm_k_small_plan(2, 9, 9, 8, 96, 3, 1, 1, &p));
  g_assert_cmpint(p.bn, ==, 32);
  g_assert_cmpint(p.ob, ==, 32);
}

static void
test_refused(void)
{
  TdmKSmallPlan p;
  g_assert_false(tdm_k_small_plan(2, 13, 11, 9, 32, 3, 1, 1, &p));     /* 9 channels */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 0, 32, 3, 1, 1, &p));     /* none */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 24, 3, 1, 1, &p));     /* 24 out */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 8, 3, 1, 1, &p));      /* 8 out */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 32, 8, 1, 1, &p));     /* 8×8 */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 32, 3, 4, 1, &p));     /* padding 4 */
  g_assert_false(tdm_k_small_plan(2, 13, 11, 3, 32, 3, 1, 3, &p));     /* stride 3 */
  g_assert_false(tdm_k_small_plan(2, 3, 11, 3, 32, 7, 1, 1, &p));      /* h + 2·pad < 7 */
  g_assert_false(tdm_k_small_plan(0, 13, 11, 3, 32, 3, 1, 1, &p));     /* no sample */
  /* More output pixels than an int holds, with a tile to spare. */
  g_assert_false(tdm_k_small_plan(65536, 256, 256, 3, 32, 3, 1, 1, &p));
  g_assert_true(tdm_k_small_plan(2, 1, 1, 1, 16, 7, 3, 1, &p));        /* all padding but one */
  g_assert_cmpint(p.rows, ==, 2);
}

static void
test_random_shapes(void)
{
  for (int i = 0; i < 20000; i++) {
    int n = g_test_rand_int_range(1, 300), h = g_test_rand_int_range(1, 300);
    int w = g_test_rand_int_range(1, 300), c = g_test_rand_int_range(1, 9);
    int out_c = 16 * g_test_rand_int_range(1, 33), kernel = g_test_rand_int_range(1, 8);
    int pad = g_test_rand_int_range(0, 4), stride = g_test_rand_int_range(1, 3);
    TdmKSmallPlan p;
    gboolean takes = tdm_k_small_plan(n, h, w, c, out_c, kernel, pad, stride, &p);
    g_assert_cmpint(takes, ==, h + 2 * pad >= kernel && w + 2 * pad >= kernel);
    if (!takes)
      continue;
    g_assert_cmpint(p.oh, ==, (h + 2 * pad - kernel) / stride + 1);
    g_assert_cmpint(p.kpad % 16, ==, 0);
    g_assert_cmpint(p.kpad - p.k, <, 16);
    g_assert_cmpint(p.kpad, >=, p.k);
    g_assert_cmpint((p.kchunks - 1) * TDM_K_SMALL_KC, <, p.kpad);
    g_assert_cmpint(p.kchunks * TDM_K_SMALL_KC, >=, p.kpad);
    g_assert_true(p.bn == 64 || p.bn == 32 || p.bn == 16);
    g_assert_cmpint(out_c % p.bn, ==, 0);
    g_assert_cmpuint(p.fwd_smem, <=, TDM_K_SMALL_SMEM_MAX);
    g_assert_true(p.ob == 64 || p.ob == 32 || p.ob == 16);
    g_assert_cmpint(out_c % p.ob, ==, 0);
    /* The splits: whole steps, every pixel in exactly one (none empty). */
    g_assert_cmpint(p.split_rows % TDM_K_SMALL_RS, ==, 0);
    g_assert_cmpint(p.split_rows, >=, TDM_K_SMALL_SPLIT_STEPS * TDM_K_SMALL_RS);
    g_assert_cmpint((int64_t)(p.splits - 1) * p.split_rows, <, p.rows);
    g_assert_cmpint((int64_t)p.splits * p.split_rows, >=, p.rows);
    int64_t blocks = (int64_t)p.splits * p.kchunks * (out_c / p.ob);
    int64_t others = (int64_t)p.kchunks * (out_c / p.ob);
    g_assert_cmpint(blocks, <=, MAX(TDM_K_SMALL_WGRAD_BLOCKS, others));
    g_assert_cmpuint(p.partial_bytes, ==, (size_t)p.splits * out_c * p.kpad * 4);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-small-plan/stem", test_stem);
  g_test_add_func("/conv-small-plan/resnet-preset", test_resnet_preset);
  g_test_add_func("/conv-small-plan/three-passes", test_three_passes);
  g_test_add_func("/conv-small-plan/refused", test_refused);
  g_test_add_func("/conv-small-plan/random-shapes", test_random_shapes);
  return g_test_run();
}
