/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-winograd4.c — Winograd's F(4×4, 3×3) for the CPU backend's whole
 * convolutions: 4×4 outputs from 6×6 windows with 36 products (2.25 an output, against
 * F(3×3, 3×3)'s 2.8, F(2×2, 3×3)'s 4 and im2col's 9). The matrices are Toom-Cook's at
 * the points 0, ±1, ±2 and ∞ (Lavin and Gray's; derived exactly here and checked
 * against the direct convolution):
 *   Aᵀ = [1 1 1 1 1 0; 0 1 −1 2 −2 0; 0 1 1 4 4 0; 0 1 −1 8 −8 1],
 *   G  = [¼ 0 0; −⅙ −⅙ −⅙; −⅙ ⅙ −⅙; 1⁄24 1⁄12 ⅙; 1⁄24 −1⁄12 ⅙; 0 0 1],
 *   Bᵀ = [4 0 −5 0 1 0; 0 −4 −4 1 1 0; 0 4 −4 −1 1 0; 0 −2 −1 2 1 0; 0 2 −1 −2 1 0;
 *         0 4 0 −5 0 1].
 * Coefficients up to 8: the largest rounding error of the three tile sizes (the tests
 * bound it). The transforms themselves are tdm-backend-cpu-winograd-tile.h's; the
 * driver, the blocks and the GEMMs tdm-backend-cpu-winograd.c's. */
#include "tdm-backend-cpu-winograd-private.h"

enum { R = 6, M = 4 };

static const float BT[R][R] = {
  {4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
  {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1},
};
static const float AT[M][R] = {
  {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1},
};
static const float G[R][3] = {
  {0.25f, 0, 0},
  {-1.0f / 6, -1.0f / 6, -1.0f / 6},
  {-1.0f / 6, 1.0f / 6, -1.0f / 6},
  {1.0f / 24, 1.0f / 12, 1.0f / 6},
  {1.0f / 24, -1.0f / 12, 1.0f / 6},
  {0, 0, 1},
};

#if defined(WINOGRAD_AVX512)
#define WINO_NAME(x) tdm_wino4_avx512_##x
#else
#define WINO_NAME(x) tdm_wino4_##x
#endif
#include "tdm-backend-cpu-winograd-tile.h"
