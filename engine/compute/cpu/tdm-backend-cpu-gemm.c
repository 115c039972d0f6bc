/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-gemm.c — the CPU backend's matrix products: OpenBLAS's sgemm, cut
 * into pieces where that keeps C in the cache or lets a long product stop early. The
 * front door (tdm-backend-calls.c) checked the arguments and left out empty products.
 */
#include "tdm-backend-cpu-private.h"
#include <cblas.h>

/* Work between two looks at the stop flag in a long GEMM: ~10 ms on one core. */
#define GEMM_PIECE_FLOPS 5e8

/* A short reduction, and the rows of C per OpenBLAS call for it (see sgemm). */
#define GEMM_SHORT_K 64
#define GEMM_SHORT_ROWS 480

/* One cblas_sgemm, except that a short reduction into a tall, wide C (a convolution's
 * input gradient, dy · W into the column matrix: 200,704 × 288 summed over 64) goes
 * GEMM_SHORT_ROWS rows at a time. OpenBLAS clears C first when beta is 0, then reads
 * and writes it in its kernel: for all of C (231 MB) those are two more trips to
 * memory, for 480 rows (0.5 MB) they stay in the cache. One core's CPU time: 200,704 ×
 * 288 × 64 from 36-45 to 42-51 GFLOP/s, 50,176 × 576 × 64 from 45 to 54 (bench/NOTES.md);
 * at 128 no clear gain. 480 is a multiple of every row tile of OpenBLAS's kernels
 * (4 to 32), so each row of C is computed as one call computes it: the same bits
 * (checked with OpenBLAS 0.3.21 on Zen 2; 512-row pieces differed in the last bit).
 * A long reduction into a short C (the weight gradient) is one call as asked:
 * computing Cᵀ instead, as this backend once did, measured slower in CPU time on
 * every such shape of the cnn and resnet presets (49 vs 55 GFLOP/s for 64 × 288 over
 * 10,000 pixels, 51 vs 59 over 200,704). */
static void
sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda,
      const float *bm, int ldb, float beta, float *c, int ldc)
{
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if (k <= GEMM_SHORT_K && n >= GEMM_SHORT_K && m >= 4 * GEMM_SHORT_ROWS) {
    for (int i = 0; i < m; i += GEMM_SHORT_ROWS) {
      const int rows = MIN(GEMM_SHORT_ROWS, m - i);
      const float *ai = trans_a ? a + i : a + (size_t)i * lda;
      cblas_sgemm(CblasRowMajor, ta, tb, rows, n, k, alpha, ai, lda, bm, ldb, beta,
                  c + (size_t)i * ldc, ldc);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc);
}

void
tdm_cpu_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
             const float *a, int lda, const float *bm, int ldb, float beta, float *c, int ldc)
{
  if (k == 0) {
    /* No product: C = beta·C, with beta = 0 clearing even NaNs, as BLAS does. */
    for (int i = 0; i < m; i++) {
      float *restrict row = c + (size_t)i * ldc;
      for (int j = 0; j < n; j++)
        row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
  /* A convolution's GEMM at a large batch runs for a good part of a second. Cut into
   * pieces of about GEMM_PIECE_FLOPS, it can stop between them when the run is
   * stopped (the step is then discarded, so a half-written C does no harm). */
  const double flops = 2.0 * m * n * k;
  if (b->abort_flag == NULL || flops < 2 * GEMM_PIECE_FLOPS) {
    sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc);
    return;
  }
  if (m >= k) {
    /* Rows of C are independent: pieces of rows. */
    int rows = MAX(1, (int)(GEMM_PIECE_FLOPS / (2.0 * n * k)));
    /* Whole row tiles, so the pieces give the bits one call gives (see sgemm). */
    if (rows > GEMM_SHORT_ROWS)
      rows -= rows % GEMM_SHORT_ROWS;
    for (int i = 0; i < m && !g_atomic_int_get(b->abort_flag); i += rows) {
      int piece = MIN(rows, m - i);
      const float *ai = trans_a ? a + i : a + (size_t)i * lda;
      sgemm(trans_a, trans_b, piece, n, k, alpha, ai, lda, bm, ldb, beta, c + (size_t)i * ldc,
            ldc);
    }
  } else {
    /* A long reduction (weight gradients sum over every pixel): pieces of it, each
     * adding onto the last. */
    int depth = MAX(1, (int)(GEMM_PIECE_FLOPS / (2.0 * m * n)));
    for (int p = 0; p < k && !g_atomic_int_get(b->abort_flag); p += depth) {
      int piece = MIN(depth, k - p);
      const float *ap = trans_a ? a + (size_t)p * lda : a + p;
      const float *bp = trans_b ? bm + p : bm + (size_t)p * ldb;
      sgemm(trans_a, trans_b, m, n, piece, alpha, ap, lda, bp, ldb, p == 0 ? beta : 1.0f, c,
            ldc);
    }
  }
}
