/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-gemm.c — the CUDA backend's GEMMs: cuBLAS (float32, TF32, or bf16
 * operands rounded on the way), split-K for long reductions into small outputs, the
 * small-product kernel, and the bf16 column paths of --precision bf16 (im2col and
 * col2im on bfloat16 columns, the implicit input gradient). Not the memory, graphs or
 * table (tdm-backend-cuda.c) nor the elementwise and pooling operations (-ops.c).
 */
#include "tdm-backend-cuda-private.h"

/* GEMM */

/* Products whose output has at most this many values, over reductions up to this
 * long, go to tdm_k_gemm_small: for a last layer's weight gradient (10 × 128) cuBLAS
 * picks one block that walks the whole reduction, 56 µs whether the batch is 100 or
 * 1024. Longer reductions go split-K. */
#define TDM_SMALL_GEMM_OUTPUT 4096
#define TDM_SMALL_GEMM_DEPTH 8192

/* How many chunks to cut a GEMM's reduction into. A long reduction into a small
 * output, such as a conv weight gradient (out × kh·kw·c values summed over n·oh·ow
 * rows), gives cuBLAS a handful of output tiles for the whole GPU (seen: 190 µs for
 * 32×9×802816, 137 µs in chunks). Chunks multiplied as one batch and summed in order
 * after (tdm_k_sum_parts) fill it and stay deterministic. Aim at two blocks per
 * multiprocessor, counting 128×128 tiles, with chunks of at least 128 rows; only for
 * reductions 32 times longer than the output's sides (a layer's forward product at a
 * small batch, 100×128×3136, came out slower in chunks). */
static int
split_k_chunks(TdmBackendCuda *cb, int m, int n, int k)
{
  size_t mn = (size_t)m * n;
  if (cb->split_k == 0 || mn == 0 || mn > TDM_SPLIT_K_FLOATS / 2 || k < 1024 ||
      k < 32 * MAX(m, n))
    return 1;
  size_t tiles = (size_t)((m + 127) / 128) * ((n + 127) / 128);
  size_t chunks = cb->split_k > 0 ? (size_t)cb->split_k
                                  : MIN((size_t)k / 128, 2 * (size_t)cb->sm_count / tiles);
  chunks = MIN(chunks, MIN((size_t)k / 2, TDM_SPLIT_K_FLOATS / mn));
  return chunks < 2 ? 1 : (int)chunks;
}

/* bf16 (--precision bf16): float32 operands go through cuBLAS's
 * CUBLAS_COMPUTE_32F_FAST_16BF, which may round them to bfloat16 as it loads its tiles
 * (on the H200 it picked its tf32 kernels for these shapes, ncu 2026-12-03). The
 * convolutions' columns, their weights and output gradients are stored as bfloat16
 * for their forward and weight-gradient products (gemm_bf16, tdm-replica-conv.c), so
 * those read half the bytes; the master weights, the activations the BN and pooling
 * kernels read, the optimizer state and the BN statistics all stay float32. TF32 goes
 * through the handle's math mode instead; tdm_k_gemm_small's tiny products stay
 * float32 in every precision. */
/* The cuBLAS part of tdm_cuda_gemm and the bf16 ones: A and B of `type` (float32 or
 * bfloat16, `size` bytes an element), C of c_type (float32, or bfloat16 without
 * split-K, whose parts are float32), one call or split-K. */
static void
cublas_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
            const void *a, int lda, const void *bm, int ldb, float beta, void *c, int ldc,
            cudaDataType_t type, size_t size, cudaDataType_t c_type,
            cublasComputeType_t compute)
{
  TdmBackendCuda *cb = CUDA_B(b);
  cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  int chunks = c_type == CUDA_R_32F ? split_k_chunks(cb, m, n, k) : 1;
  if (chunks <= 1) {
    /* cuBLAS is column-major, and a row-major matrix read column-major is its
     * transpose: so compute Cᵀ (n×m) = op(B)ᵀ · op(A)ᵀ, that is, swap the operands. */
    if (type == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F)
      CUBLAS_OK(b, cb->blas->sgemm(cb->cublas, op_b, op_a, n, m, k, &alpha, bm, ldb, a, lda, &beta,
                               c, ldc));
    else
      CUBLAS_OK(b, cb->blas->gemm_ex(cb->cublas, op_b, op_a, n, m, k, &alpha, bm, type, ldb, a, type,
                                lda, &beta, c, c_type, ldc, compute, CUBLAS_GEMM_DEFAULT));
    return;
  }

  /* Split-K: chunk s multiplies rows [s·len, (s + 1)·len) of the reduction, the last
   * chunk also takes the remainder; all but that one go as one strided batch. Chunk
   * s of op(A) starts s·len columns in: rows of A when it is transposed. */
  const float one = 1.0f, zero = 0.0f;
  int len = k / chunks, last = k - len * (chunks - 1);
  long long step_a = (long long)len * (trans_a ? lda : 1);
  long long step_b = (long long)len * (trans_b ? 1 : ldb);
  long long mn = (long long)m * n;
  int batched = last == len ? chunks : chunks - 1;
  if (!CUBLAS_OK(b, cb->blas->gemm_strided_batched_ex(cb->cublas, op_b, op_a, n, m, len, &one, bm,
                                               type, ldb, step_b, a, type, lda, step_a, &zero,
                                               cb->split_parts, CUDA_R_32F, n, mn, batched,
                                               compute, CUBLAS_GEMM_DEFAULT)))
    return;
  if (batched < chunks &&
      !CUBLAS_OK(b, cb->blas->gemm_ex(cb->cublas, op_b, op_a, n, m, last, &one,
                                 (const char *)bm + step_b * batched * (long long)size, type,
                                 ldb, (const char *)a + step_a * batched * (long long)size,
                                 type, lda, &zero, cb->split_parts + mn * batched, CUDA_R_32F,
                                 n, compute, CUBLAS_GEMM_DEFAULT)))
    return;
  TDM_CUDA_OK(b, tdm_k_sum_parts(c, ldc, cb->split_parts, chunks, m, n, alpha, beta,
                                 cb->stream));
}

void
tdm_cuda_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *bm, int ldb, float beta, float *c, int ldc)
{
  if (!tdm_cuda_begin(b))
    return;
  TdmBackendCuda *cb = CUDA_B(b);
  if (cb->small_gemm && (size_t)m * n <= TDM_SMALL_GEMM_OUTPUT && k <= TDM_SMALL_GEMM_DEPTH) {
    TDM_CUDA_OK(b, tdm_k_gemm_small(trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c,
                                    ldc, cb->stream));
    return;
  }
  cublas_gemm(b, trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc, CUDA_R_32F,
              sizeof(float), CUDA_R_32F,
              b->precision == TDM_PRECISION_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                 : CUBLAS_COMPUTE_32F);
}

/* bf16 operands as stored (tdm-backend.h's gemm_bf16): true bfloat16 tensor-core
 * GEMMs, where FAST_16BF on float32 operands got cuBLAS's tf32 kernels reading twice
 * the bytes (ncu, 2026-12-03). */
void
tdm_cuda_gemm_bf16(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const uint16_t *a, int lda, const uint16_t *bm, int ldb, float beta,
                   float *c, int ldc)
{
  if (!tdm_cuda_begin(b))
    return;
  cublas_gemm(b, trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc, CUDA_R_16BF,
              sizeof(uint16_t), CUDA_R_32F, CUBLAS_COMPUTE_32F);
}

void
tdm_cuda_gemm_bf16_out(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                       const uint16_t *a, int lda, const uint16_t *bm, int ldb, uint16_t *c,
                       int ldc)
{
  if (!tdm_cuda_begin(b))
    return;
  cublas_gemm(b, trans_a, trans_b, m, n, k, 1.0f, a, lda, bm, ldb, 0.0f, c, ldc, CUDA_R_16BF,
              sizeof(uint16_t), CUDA_R_16BF, CUBLAS_COMPUTE_32F);
}
