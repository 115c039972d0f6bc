/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-winograd-private.h — what the two Winograd convolutions of the CPU
 * backend share: F(2×2, 3×3) and the driver in tdm-backend-cpu-winograd.c, the
 * transforms of F(3×3, 3×3) in tdm-backend-cpu-winograd3.c. The block of tiles, the
 * layout of the transformed buffers, a call's geometry and the vector helpers. Not for
 * anything else. */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <string.h>

/* The generic build's eight-float values never cross a call: every helper that takes
 * or returns one is inlined. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* Tiles per block: 128 measured best on the resnet preset's shapes against 64, 256, 512
 * and 1024 (bench-winograd, bench/NOTES.md). */
#ifndef WINOGRAD_BLOCK
#define WINOGRAD_BLOCK 128
#endif

#ifndef WINOGRAD_SKEW
#define WINOGRAD_SKEW 16
#endif

/* Floats from one position's block of rows (BLOCK × channels) to the next's. BLOCK ×
 * channels is a multiple of 4 kB, so without the skew the 16 or 25 rows a transform
 * reads or writes per tile would fall into the same cache sets and evict one another
 * (it did: a 28×28 layer ran 3.5× slower). */
static inline size_t
pos_stride(int channels)
{
  return (size_t)WINOGRAD_BLOCK * channels + WINOGRAD_SKEW;
}

/* The geometry of one call: F(m×m, 3×3) tiles of m×m outputs over windows of
 * (m + 2)×(m + 2) inputs. */
typedef struct {
  int n, h, w, c, k, pad;
  int m;               /* outputs per tile side: 2, 3 or 4 */
  int oh, ow;          /* output size */
  int th, tw;          /* tiles down and across one image */
  size_t tiles;        /* n · th · tw */
} Geometry;

/* The transforms: loops over channels (contiguous in NHWC and in every buffer here),
 * built twice, for any x86-64 and for AVX2, the better picked when the program
 * starts. The same operations in the same order in both builds (no FMA: AVX2 alone does
 * not allow contracting), so both give the same bits. */
#if defined(WINOGRAD_AVX512)
/* The copy meson builds for AVX-512 (-ffp-contract=off: no FMA either), sixteen
 * channels a vector, picked where the backend runs its AVX-512 loops. */
#define WINOGRAD_CLONES
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                  \
  !defined(__SANITIZE_ADDRESS__)
#define WINOGRAD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define WINOGRAD_CLONES
#endif

/* Channels go VL at a time as one vector value (GCC's vector extension: one AVX
 * register in the AVX2 build, two SSE registers in the other); the last, partial
 * group loads zeros past the end and stores only its own channels. With the count a
 * constant VL, the memcpy calls are single vector loads and stores. */
#if defined(WINOGRAD_AVX512)
#define VL 16
#else
#define VL 8
#endif
typedef float Vec __attribute__((vector_size(VL * sizeof(float))));

static inline __attribute__((always_inline)) Vec
ld(const float *p, int count)
{
  Vec v = {0};
  memcpy(&v, p, sizeof(float) * count);
  return v;
}

static inline __attribute__((always_inline)) void
st(float *p, Vec v, int count)
{
  memcpy(p, &v, sizeof(float) * count);
}

/* Where tile t (image-major, then tile row, then tile column) starts: its image, and
 * the top-left input pixel of its window (which may lie in the padding). */
static inline void
tile_origin(const Geometry *g, size_t t, size_t *img, int *y0, int *x0)
{
  const size_t per_image = (size_t)g->th * g->tw;
  *img = t / per_image;
  const int ty = (int)(t % per_image) / g->tw, tx = (int)(t % per_image) % g->tw;
  *y0 = g->m * ty - g->pad;
  *x0 = g->m * tx - g->pad;
}

/* F(3×3, 3×3)'s and F(4×4, 3×3)'s transforms (tdm-backend-cpu-winograd3.c and 4.c),
 * the same contracts as F(2×2, 3×3)'s in tdm-backend-cpu-winograd.c with 25 and 36
 * positions. */
void tdm_wino3_weights (float *u, const float *wt, int k, int c);
void tdm_wino3_weights_adjoint (float *dw, const float *du, int k, int c);
void tdm_wino3_input (float *v, const Geometry *g, const float *x, const float *zero,
                      size_t t0, int count);
void tdm_wino3_input_adjoint (float *dx, const Geometry *g, const float *dv, size_t t0,
                              int count);
void tdm_wino3_output (float *y, const Geometry *g, const float *m, size_t t0, int count);
void tdm_wino3_output_adjoint (float *dm, const Geometry *g, const float *dy,
                               const float *zero, size_t t0, int count);
void tdm_wino4_weights (float *u, const float *wt, int k, int c);
void tdm_wino4_weights_adjoint (float *dw, const float *du, int k, int c);
void tdm_wino4_input (float *v, const Geometry *g, const float *x, const float *zero,
                      size_t t0, int count);
void tdm_wino4_input_adjoint (float *dx, const Geometry *g, const float *dv, size_t t0,
                              int count);
void tdm_wino4_output (float *y, const Geometry *g, const float *m, size_t t0, int count);
void tdm_wino4_output_adjoint (float *dm, const Geometry *g, const float *dy,
                               const float *zero, size_t t0, int count);

/* The same two sizes built for AVX-512 (tdm-backend-cpu-winograd3.c and 4.c once more):
 * the same operations in the same order on each channel, so the same bits. */
#define WINOGRAD_DECLARE(name)                                                            \
  void name##_weights (float *u, const float *wt, int k, int c);                          \
  void name##_weights_adjoint (float *dw, const float *du, int k, int c);                 \
  void name##_input (float *v, const Geometry *g, const float *x, const float *zero,      \
                     size_t t0, int count);                                               \
  void name##_input_adjoint (float *dx, const Geometry *g, const float *dv, size_t t0,    \
                             int count);                                                  \
  void name##_output (float *y, const Geometry *g, const float *m, size_t t0, int count); \
  void name##_output_adjoint (float *dm, const Geometry *g, const float *dy,              \
                              const float *zero, size_t t0, int count);
WINOGRAD_DECLARE(tdm_wino3_avx512)
WINOGRAD_DECLARE(tdm_wino4_avx512)
