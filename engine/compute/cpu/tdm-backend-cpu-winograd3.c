/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-winograd3.c — Winograd's F(3×3, 3×3) for the CPU backend's whole
 * convolutions: 3×3 outputs from 5×5 windows with 25 products (2.8 an output, against
 * F(2×2, 3×3)'s 4 and im2col's 9). The matrices are Toom-Cook's at the points 0, 1,
 * −1, 2 and ∞ (derived exactly, checked against the direct convolution):
 *   Aᵀ = [1 1 1 1 0; 0 1 −1 2 0; 0 1 1 4 1],
 *   G  = [½ 0 0; −½ −½ −½; −⅙ ⅙ −⅙; ⅙ ⅓ ⅔; 0 0 1],
 *   Bᵀ = [2 −1 −2 1 0; 0 −2 −1 1 0; 0 2 −3 1 0; 0 −1 0 1 0; 0 2 −1 −2 1].
 * Larger coefficients than F(2×2, 3×3)'s, so a larger rounding error (the tests bound
 * it). The transforms themselves are tdm-backend-cpu-winograd-tile.h's; the driver,
 * the blocks and the GEMMs tdm-backend-cpu-winograd.c's. */
#include "tdm-backend-cpu-winograd-private.h"

enum { R = 5, M = 3 };

static const float BT[R][R] = {
  {2, -1, -2, 1, 0}, {0, -2, -1, 1, 0}, {0, 2, -3, 1, 0}, {0, -1, 0, 1, 0}, {0, 2, -1, -2, 1},
};
static const float AT[M][R] = {{1, 1, 1, 1, 0}, {0, 1, -1, 2, 0}, {0, 1, 1, 4, 1}};
static const float G[R][3] = {
  {0.5f, 0, 0}, {-0.5f, -0.5f, -0.5f}, {-1.0f / 6, 1.0f / 6, -1.0f / 6},
  {1.0f / 6, 1.0f / 3, 2.0f / 3}, {0, 0, 1},
};

#if defined(WINOGRAD_AVX512)
#define WINO_NAME(x) tdm_wino3_avx512_##x
#else
#define WINO_NAME(x) tdm_wino3_##x
#endif
#include "tdm-backend-cpu-winograd-tile.h"
