/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-screen.c — the convolution engine's screen of its candidates
 * (tdm-backend-cuda-conv-screen.h) on any machine: the reduction length of each
 * direction, the bound from the roundings a result carries and its sum's length, which
 * candidate is the reference, the order the others are tried in, and the verdict on a
 * measured deviation — for the case that made it (a 1×1 weight gradient over a million
 * rows, bf16 output: cuDNN's engine 62 left out at the deviation it showed on the H100,
 * a plan rounding its output once kept), and for a float32 run's; the pieces a result
 * is compared in through a candidate's scratch. The measurement itself
 * (kernels/compare.cu) is the GPU suite's. */
#include "tdm-backend-cuda-conv-screen.h"

#include <math.h>

static const TdmConvRounding f32 = {TDM_CONV_UNIT_F32, 0.0};
static const TdmConvRounding bf16 = {TDM_CONV_UNIT_BF16, 0.0};

static void
test_length(void)
{
  /* bn-input-chunks' 1×1 case: n64 at 128 px, 64 → 16. */
  TdmConvShape s = {64, 128, 128, 64, 16, 1, 0, 1};
  g_assert_cmpuint(tdm_conv_screen_length(&s, TDM_CONV_WGRAD), ==, 64u * 128 * 128);
  g_assert_cmpuint(tdm_conv_screen_length(&s, TDM_CONV_FORWARD), ==, 64);
  g_assert_cmpuint(tdm_conv_screen_length(&s, TDM_CONV_DGRAD), ==, 16);
  /* A 3×3 at stride 2, padded: the output's pixels for the weight gradient. */
  TdmConvShape t = {3, 17, 16, 24, 40, 3, 1, 2};
  g_assert_cmpuint(tdm_conv_screen_length(&t, TDM_CONV_WGRAD), ==, 3u * 9 * 8);
  g_assert_cmpuint(tdm_conv_screen_length(&t, TDM_CONV_FORWARD), ==, 9u * 24);
  g_assert_cmpuint(tdm_conv_screen_length(&t, TDM_CONV_DGRAD), ==, 9u * 40);
}

/* The bound is the two results' shares, each its output's unit roundoff, twice its
 * operands', and λ·√L·2⁻²⁴ for its float32 sums. */
static void
test_bound(void)
{
  guint64 million = (guint64)1 << 20;
  double sums = TDM_CONV_SCREEN_LAMBDA * 1024 * 0x1p-24; /* 2⁻¹¹ at L = 2²⁰ */
  g_assert_cmpfloat(sums, ==, 0x1p-11);
  g_assert_cmpfloat(tdm_conv_screen_share(f32, million), ==, 0x1p-24 + sums);
  g_assert_cmpfloat(tdm_conv_screen_share(bf16, million), ==, 0x1p-8 + sums);
  /* A bf16-writing plan against a float32 reference: 2⁻⁸ + 2⁻¹⁰ + 2⁻²⁴ ≈ 0.00488. */
  double bound = tdm_conv_screen_bound(bf16, f32, million);
  g_assert_cmpfloat(bound, ==, 0x1p-8 + 2 * sums + 0x1p-24);
  g_assert_cmpfloat(fabs(bound - 0.00488), <, 1e-5);
  /* Symmetric, and growing with the sums' length as its square root. */
  g_assert_cmpfloat(tdm_conv_screen_bound(f32, bf16, million), ==, bound);
  double short_sum = tdm_conv_screen_bound(f32, f32, 64);
  g_assert_cmpfloat(short_sum, ==, 2 * (0x1p-24 + TDM_CONV_SCREEN_LAMBDA * 8 * 0x1p-24));
  g_assert_cmpfloat(tdm_conv_screen_bound(f32, f32, 4 * 64) - 2 * 0x1p-24, ==,
                    2 * (short_sum - 2 * 0x1p-24));
  /* TF32's operands: 2·2⁻¹⁰ a result. */
  TdmConvRounding tf32 = {TDM_CONV_UNIT_F32, TDM_CONV_UNIT_TF32};
  g_assert_cmpfloat(tdm_conv_screen_bound(tf32, tf32, 64) - short_sum, ==, 4 * 0x1p-10);
}

/* The least rounding, the first of equals; a taken one set to infinity falls behind
 * (the engine's timing order). */
static void
test_reference(void)
{
  TdmConvRounding list[] = {bf16, f32, bf16, f32};
  g_assert_cmpuint(tdm_conv_screen_reference(list, 4), ==, 1);
  list[1].output = INFINITY;
  g_assert_cmpuint(tdm_conv_screen_reference(list, 4), ==, 3);
  list[3].output = INFINITY;
  g_assert_cmpuint(tdm_conv_screen_reference(list, 4), ==, 0);
  TdmConvRounding twice = {2 * TDM_CONV_UNIT_BF16, 0.0};
  TdmConvRounding dx16[] = {twice, bf16, bf16};
  g_assert_cmpuint(tdm_conv_screen_reference(dx16, 3), ==, 1);
  g_assert_cmpuint(tdm_conv_screen_reference(dx16, 1), ==, 0);
  g_assert_cmpuint(tdm_conv_screen_reference(dx16, 0), ==, 0);
}

/* The order the choice tries the candidates in: fastest first, the list's order among
 * equal times, none that did not run, and none behind the reference, which ends it. */
static void
test_order(void)
{
  guint order[6] = {0};
  /* The reference (0) is the slowest: every other is tried, fastest first, the two of
   * 1.0 ms in the list's order; 3 did not run. */
  const double ms[] = {4.0, 1.0, 0.5, NAN, 1.0, 2.0};
  g_assert_cmpuint(tdm_conv_screen_order(ms, 6, 0, order), ==, 5);
  const guint slowest[] = {2, 1, 4, 5, 0};
  g_assert_cmpmem(order, sizeof slowest, slowest, sizeof slowest);
  /* The reference in the middle (4, 1.0 ms): the ones faster, then those as fast before
   * it in the list (1), then it; 5 and 0 are never tried. */
  g_assert_cmpuint(tdm_conv_screen_order(ms, 6, 4, order), ==, 3);
  const guint middle[] = {2, 1, 4};
  g_assert_cmpmem(order, sizeof middle, middle, sizeof middle);
  /* One as fast after it in the list (4 behind 1) is not. */
  g_assert_cmpuint(tdm_conv_screen_order(ms, 6, 1, order), ==, 2);
  g_assert_cmpuint(order[0], ==, 2);
  g_assert_cmpuint(order[1], ==, 1);
  /* The reference the fastest: chosen with no comparison. */
  g_assert_cmpuint(tdm_conv_screen_order(ms, 6, 2, order), ==, 1);
  g_assert_cmpuint(order[0], ==, 2);
  /* No reference (the screen off): every one that ran, the fastest first. */
  g_assert_cmpuint(tdm_conv_screen_order(ms, 6, G_MAXUINT, order), ==, 5);
  const guint all[] = {2, 1, 4, 5, 0};
  g_assert_cmpmem(order, sizeof all, all, sizeof all);
  /* A candidate counted the fastest (the engine's TANDEM_CONV_FAULT: -∞) is tried first. */
  const double faulted[] = {1.0, 3.0, -INFINITY, 2.0};
  g_assert_cmpuint(tdm_conv_screen_order(faulted, 4, 0, order), ==, 2);
  g_assert_cmpuint(order[0], ==, 2);
  g_assert_cmpuint(order[1], ==, 0);
  /* None ran, or none at all. */
  const double none[] = {NAN, NAN};
  g_assert_cmpuint(tdm_conv_screen_order(none, 2, G_MAXUINT, order), ==, 0);
  g_assert_cmpuint(tdm_conv_screen_order(NULL, 0, G_MAXUINT, order), ==, 0);
}

/* The deviation from the two sums of squares, and the verdict. */
static void
test_verdict(void)
{
  g_assert_cmpfloat(tdm_conv_screen_deviation(0.0, 0.0), ==, 0.0);
  g_assert_cmpfloat(tdm_conv_screen_deviation(1.0, 0.0), ==, INFINITY);
  g_assert_cmpfloat(tdm_conv_screen_deviation(1.0, 4.0), ==, 0.5);
  g_assert_true(isnan(tdm_conv_screen_deviation(NAN, 4.0)));
  g_assert_false(tdm_conv_screen_keeps(NAN, 1.0));
  g_assert_false(tdm_conv_screen_keeps(INFINITY, 1.0));
  g_assert_true(tdm_conv_screen_keeps(0.0, 0.0));
  g_assert_true(tdm_conv_screen_keeps(0.5, 0.5));

  /* The case that made the screen: engine 62's weight gradient lay 0.0065 and 0.0100
   * from the CPU's where the others lay 0.0028, the operands' bf16 roundings, which it
   * shares with the reference; the rest, its own, √(0.0065² − 0.0028²) ≈ 0.0059 and
   * √(0.0100² − 0.0028²) ≈ 0.0096, both past the bound of 0.00488. A plan rounding its
   * float32 sums once to bf16 lies at most 2⁻⁸ from them (0.0039): kept. */
  guint64 rows = (guint64)64 * 128 * 128;
  double bound = tdm_conv_screen_bound(bf16, f32, rows);
  g_assert_false(tdm_conv_screen_keeps(sqrt(0.0065 * 0.0065 - 0.0028 * 0.0028), bound));
  g_assert_false(tdm_conv_screen_keeps(sqrt(0.0100 * 0.0100 - 0.0028 * 0.0028), bound));
  g_assert_true(tdm_conv_screen_keeps(0x1p-8, bound));
  /* And a candidate the screen keeps lies within 2⁻⁷ of the CPU's result wherever the
   * reference lies within the operands' 0.0028 of it (the triangle inequality): what
   * bn-input-chunks asks of every candidate. */
  g_assert_cmpfloat(bound + 0.0028, <, 0x1p-7);
  /* A float32 run's sums of 576 products (a 3×3 over 64 channels): the bound is
   * 2·(2⁻²⁴ + 8·24·2⁻²⁴) ≈ 2.3e-5; a result 2⁻²⁰ from the reference is kept, one 2⁻¹²
   * from it (an error a float32 run does not make) is not. */
  double f32_bound = tdm_conv_screen_bound(f32, f32, 9 * 64);
  g_assert_true(tdm_conv_screen_keeps(0x1p-20, f32_bound));
  g_assert_false(tdm_conv_screen_keeps(0x1p-12, f32_bound));
}

/* The pieces a result is compared in through a room: one where the room holds it all,
 * many of a multiple of 256 bytes, the last shorter, values alone where the room holds
 * less than 256 bytes, none where it holds not one value. */
static void
test_pieces(void)
{
  guint64 piece = 1, count = 1;
  /* One: the whole result, however much room is left over. */
  tdm_conv_screen_pieces(1000, 4096, 4, &piece, &count);
  g_assert_cmpuint(piece, ==, 1000);
  g_assert_cmpuint(count, ==, 1);
  tdm_conv_screen_pieces(4096, 4096, 2, &piece, &count);
  g_assert_cmpuint(piece, ==, 4096);
  g_assert_cmpuint(count, ==, 1);
  /* Many, even: a 64-MiB bf16 result through a 1-MiB room. */
  tdm_conv_screen_pieces((guint64)64 << 20, (guint64)1 << 20, 2, &piece, &count);
  g_assert_cmpuint(piece, ==, (guint64)1 << 20);
  g_assert_cmpuint(count, ==, 64);
  /* A remainder: a room of 3,000 bytes takes pieces of 2,816 (11 · 256), the fourth
   * 10,000 − 3 · 2,816 = 1,552 bytes. */
  tdm_conv_screen_pieces(10000, 3000, 4, &piece, &count);
  g_assert_cmpuint(piece, ==, 2816);
  g_assert_cmpuint(piece % TDM_CONV_SCREEN_PIECE_ALIGN, ==, 0);
  g_assert_cmpuint(count, ==, 4);
  g_assert_cmpuint(10000 - (count - 1) * piece, ==, 1552);
  /* A room under 256 bytes: whole values. */
  tdm_conv_screen_pieces(10000, 100, 4, &piece, &count);
  g_assert_cmpuint(piece, ==, 100);
  g_assert_cmpuint(count, ==, 100);
  tdm_conv_screen_pieces(1000, 99, 2, &piece, &count);
  g_assert_cmpuint(piece, ==, 98);
  g_assert_cmpuint(count, ==, 11);
  g_assert_cmpuint(piece % 2, ==, 0);
  /* Not one value, or nothing to compare: no pieces. */
  tdm_conv_screen_pieces(1000, 3, 4, &piece, &count);
  g_assert_cmpuint(piece, ==, 0);
  g_assert_cmpuint(count, ==, 0);
  tdm_conv_screen_pieces(0, 4096, 4, &piece, &count);
  g_assert_cmpuint(count, ==, 0);
}

/* TANDEM_CONV_SCREEN_PIECE_BYTES: read once (a change after is not seen until a reset),
 * nothing where unset or not a positive whole number. */
static void
test_piece_room(void)
{
  g_unsetenv("TANDEM_CONV_SCREEN_PIECE_BYTES");
  tdm_conv_screen_reset();
  g_assert_cmpuint(tdm_conv_screen_room_cap(), ==, G_MAXUINT64);
  g_setenv("TANDEM_CONV_SCREEN_PIECE_BYTES", "4096", TRUE);
  g_assert_cmpuint(tdm_conv_screen_room_cap(), ==, G_MAXUINT64);
  tdm_conv_screen_reset();
  g_assert_cmpuint(tdm_conv_screen_room_cap(), ==, 4096);
  static const char *const unusable[] = {"0", "-1", "4k", ""};
  for (guint i = 0; i < G_N_ELEMENTS(unusable); i++) {
    g_setenv("TANDEM_CONV_SCREEN_PIECE_BYTES", unusable[i], TRUE);
    tdm_conv_screen_reset();
    g_assert_cmpuint(tdm_conv_screen_room_cap(), ==, G_MAXUINT64);
  }
  g_unsetenv("TANDEM_CONV_SCREEN_PIECE_BYTES");
  tdm_conv_screen_reset();
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-screen/length", test_length);
  g_test_add_func("/conv-screen/bound", test_bound);
  g_test_add_func("/conv-screen/reference", test_reference);
  g_test_add_func("/conv-screen/order", test_order);
  g_test_add_func("/conv-screen/verdict", test_verdict);
  g_test_add_func("/conv-screen/pieces", test_pieces);
  g_test_add_func("/conv-screen/piece-room", test_piece_room);
  return g_test_run();
}
