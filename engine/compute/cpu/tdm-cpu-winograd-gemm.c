/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cpu-winograd-gemm.c — the Winograd convolutions' short products
 * (tdm-cpu-winograd-gemm.h) as register tiles: MR rows of C by NV vectors of columns
 * held in registers while the reduction runs, A's values broadcast, B's rows loaded a
 * vector at a time. Meson compiles this file once per instruction set, with
 * tdm-cpu-kernels.c; TDM_CPU_WINOGRAD_GEMM names the table each copy defines. With the
 * weights packed once a call (panels of NV vectors, zeros past the last column) and C
 * written rather than cleared and added to, nothing is copied or cleared per product:
 * OpenBLAS packed the same transformed weights again at every call and cleared C for
 * β = 0 (bench/NOTES.md). Nothing here checks arguments: the Winograd driver has. */
#include "tdm-cpu-winograd-gemm.h"

#include <glib.h>
#include <string.h>

#if !defined(TDM_CPU_WINOGRAD_GEMM) || !defined(TDM_CPU_KERNELS_NAME)
#error "TDM_CPU_WINOGRAD_GEMM and TDM_CPU_KERNELS_NAME name the table this copy defines"
#endif

/* The vector, W floats, and its operations; MR × NV the register tile (MR · NV
 * accumulators, NV loads of B and one broadcast of A in the registers there are). */
#if defined(__AVX512F__)
#include <immintrin.h>
#define W 16
#ifndef MR
#define MR 8
#endif
#ifndef NV
#define NV 2
#endif
typedef __m512 Vec;
#define vzero() _mm512_setzero_ps()
#define vload(p) _mm512_loadu_ps(p)
#define vstore(p, v) _mm512_storeu_ps((p), (v))
#define vbroadcast(p) _mm512_set1_ps(*(p))
#define vfma(a, b, c) _mm512_fmadd_ps((a), (b), (c))

static inline Vec
vload_part(const float *p, int count)
{
  return _mm512_maskz_loadu_ps((__mmask16)((1u << count) - 1), p);
}

static inline void
vstore_part(float *p, Vec v, int count)
{
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << count) - 1), v);
}

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define W 8
#ifndef MR
#define MR 6
#endif
#ifndef NV
#define NV 2
#endif
typedef __m256 Vec;
#define vzero() _mm256_setzero_ps()
#define vload(p) _mm256_loadu_ps(p)
#define vstore(p, v) _mm256_storeu_ps((p), (v))
#define vbroadcast(p) _mm256_broadcast_ss(p)
#define vfma(a, b, c) _mm256_fmadd_ps((a), (b), (c))

static inline __m256i
lanes_below(int count)
{
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lanes);
}

static inline Vec
vload_part(const float *p, int count)
{
  return _mm256_maskload_ps(p, lanes_below(count));
}

static inline void
vstore_part(float *p, Vec v, int count)
{
  _mm256_maskstore_ps(p, lanes_below(count), v);
}

#else
/* Any CPU: GCC's vector extension, four floats (SSE, NEON), a multiply and an add. */
#define W 4
#ifndef MR
#define MR 4
#endif
#ifndef NV
#define NV 2
#endif
typedef float Vec __attribute__((vector_size(W * sizeof(float))));

static inline Vec
vzero(void)
{
  return (Vec){0};
}

static inline Vec
vload(const float *p)
{
  Vec v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void
vstore(float *p, Vec v)
{
  memcpy(p, &v, sizeof v);
}

static inline Vec
vbroadcast(const float *p)
{
  return vzero() + *p;
}

static inline Vec
vfma(Vec a, Vec b, Vec c)
{
  return a * b + c;
}

static inline Vec
vload_part(const float *p, int count)
{
  Vec v = vzero();
  memcpy(&v, p, sizeof(float) * count);
  return v;
}

static inline void
vstore_part(float *p, Vec v, int count)
{
  memcpy(p, &v, sizeof(float) * count);
}
#endif

#define NR (NV * W)

static void
pack(float *packed, const float *b, size_t row_stride, size_t col_stride, int depth, int cols)
{
  for (int j0 = 0; j0 < cols; j0 += NR) {
    float *panel = packed + (size_t)j0 * depth;
    const int width = MIN(NR, cols - j0);
    for (int r = 0; r < depth; r++) {
      float *row = panel + (size_t)r * NR;
      const float *src = b + (size_t)r * row_stride + (size_t)j0 * col_stride;
      for (int j = 0; j < width; j++)
        row[j] = src[(size_t)j * col_stride];
      for (int j = width; j < NR; j++)
        row[j] = 0.0f;
    }
  }
}

/* C's rows × vectors tile (mr ≤ MR rows, nv ≤ NV vectors, the last holding `last`
 * floats) from A's mr rows and one packed panel. With constant arguments the tests on
 * them fold away and the accumulators live in registers; with others (the edges) they
 * stay in registers too, the loops being unrolled over MR and NV either way. B's
 * panel is whole (zeros past the columns), so its vectors load without a mask. */
static inline __attribute__((always_inline)) void
product_tile(float *restrict c, size_t ldc, const float *restrict a, size_t lda,
             const float *restrict panel, int depth, int mr, int nv, int last)
{
  Vec acc[MR][NV];
#pragma GCC unroll 16
  for (int m = 0; m < MR; m++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++)
      acc[m][v] = vzero();
  for (int r = 0; r < depth; r++) {
    Vec b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++)
      b[v] = vload(panel + (size_t)r * NR + v * W);
#pragma GCC unroll 16
    for (int m = 0; m < MR; m++) {
      if (m >= mr)
        break;
      const Vec x = vbroadcast(a + (size_t)m * lda + r);
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++)
        acc[m][v] = vfma(x, b[v], acc[m][v]);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; m++) {
    if (m >= mr)
      break;
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
      if (v >= nv)
        break;
      float *p = c + (size_t)m * ldc + v * W;
      if (v == nv - 1 && last < W)
        vstore_part(p, acc[m][v], last);
      else
        vstore(p, acc[m][v]);
    }
  }
}

static __attribute__((noinline)) void
product_edge(float *c, size_t ldc, const float *a, size_t lda, const float *panel, int depth,
             int mr, int nv, int last)
{
  product_tile(c, ldc, a, lda, panel, depth, mr, nv, last);
}

static void
product(float *c, size_t ldc, const float *a, size_t lda, const float *packed, int rows,
        int depth, int cols)
{
  for (int j0 = 0; j0 < cols; j0 += NR) {
    const float *panel = packed + (size_t)j0 * depth;
    const int width = MIN(NR, cols - j0);
    const int nv = (width + W - 1) / W, last = width - (nv - 1) * W;
    int i0 = 0;
    if (width == NR)
      for (; i0 + MR <= rows; i0 += MR)
        product_tile(c + (size_t)i0 * ldc + j0, ldc, a + (size_t)i0 * lda, lda, panel, depth,
                     MR, NV, W);
    for (; i0 < rows; i0 += MR)
      product_edge(c + (size_t)i0 * ldc + j0, ldc, a + (size_t)i0 * lda, lda, panel, depth,
                   MIN(MR, rows - i0), nv, last);
  }
}

/* C's rows × vectors tile += Σ_t A[t][rows]ᵀ B[t][vectors]: the same tile the other
 * way round, its reduction down A's and B's rows; B unpacked (a block's transformed
 * inputs as the input transform wrote them), so its last vector may be partial. */
static inline __attribute__((always_inline)) void
accumulate_tile(float *restrict c, size_t ldc, const float *restrict a, size_t lda,
                const float *restrict b, size_t ldb, int depth, int mr, int nv, int last)
{
  Vec acc[MR][NV], bt[NV];
#pragma GCC unroll 16
  for (int m = 0; m < MR; m++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++)
      acc[m][v] = bt[v] = vzero();
#pragma GCC unroll 16
  for (int m = 0; m < MR; m++) {
    if (m >= mr)
      break;
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
      if (v >= nv)
        break;
      const float *p = c + (size_t)m * ldc + v * W;
      acc[m][v] = v == nv - 1 && last < W ? vload_part(p, last) : vload(p);
    }
  }
  for (int t = 0; t < depth; t++) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
      if (v >= nv)
        break;
      const float *p = b + (size_t)t * ldb + v * W;
      bt[v] = v == nv - 1 && last < W ? vload_part(p, last) : vload(p);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; m++) {
      if (m >= mr)
        break;
      const Vec x = vbroadcast(a + (size_t)t * lda + m);
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++) {
        if (v >= nv)
          break;
        acc[m][v] = vfma(x, bt[v], acc[m][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; m++) {
    if (m >= mr)
      break;
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
      if (v >= nv)
        break;
      float *p = c + (size_t)m * ldc + v * W;
      if (v == nv - 1 && last < W)
        vstore_part(p, acc[m][v], last);
      else
        vstore(p, acc[m][v]);
    }
  }
}

static __attribute__((noinline)) void
accumulate_edge(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb,
                int depth, int mr, int nv, int last)
{
  accumulate_tile(c, ldc, a, lda, b, ldb, depth, mr, nv, last);
}

static void
accumulate(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb,
           int depth, int rows, int cols)
{
  for (int i0 = 0; i0 < rows; i0 += MR) {
    const int mr = MIN(MR, rows - i0);
    for (int j0 = 0; j0 < cols; j0 += NR) {
      const int width = MIN(NR, cols - j0);
      const int nv = (width + W - 1) / W, last = width - (nv - 1) * W;
      float *ct = c + (size_t)i0 * ldc + j0;
      if (mr == MR && width == NR)
        accumulate_tile(ct, ldc, a + i0, lda, b + j0, ldb, depth, MR, NV, W);
      else
        accumulate_edge(ct, ldc, a + i0, lda, b + j0, ldb, depth, mr, nv, last);
    }
  }
}

const TdmCpuWinogradGemm TDM_CPU_WINOGRAD_GEMM = {
  .name = TDM_CPU_KERNELS_NAME,
  .panel = NR,
  .pack = pack,
  .product = product,
  .accumulate = accumulate,
};
