/* SPDX-License-Identifier: GPL-3.0-or-later */
/* gemm.cu — the matrix products cuBLAS does poorly, beside the cuBLAS calls of the
 * backend: products with a tiny output (a last layer's weight gradient, 10 × 128,
 * where cuBLAS's choice walks the whole reduction in one block), and the sum of
 * partial products that ends a split-K GEMM or a reduction over rows.
 *
 * Both sum in a fixed order, so that the same inputs give the same bits. Row-major
 * throughout, as in tdm-backend.h.
 */
#include "tdm-kernels.h"
#include "common.cuh"

/* c = alpha · Σ parts + beta · c. Block (32, 32): x walks 32 adjacent elements of c,
 * y the parts, each lane summing every 32nd part in order, the lanes then summed in
 * order. A reduction over hundreds of parts is then a dozen loads a thread instead
 * of a chain of hundreds (seen: 28 µs for 288 values of 1024 parts with 8 lanes).
 * beta == 0 never reads c (BLAS's rule: c may hold anything, NaN included). */
#define TDM_SUM_LANES 32
__global__ void
sum_parts_kernel(float *c, int ldc, const float *parts, int count, int m, int n, float alpha,
                 float beta)
{
  __shared__ float sums[TDM_SUM_LANES][33];
  size_t mn = (size_t)m * n;
  for (size_t base = (size_t)blockIdx.x * 32; base < mn; base += (size_t)gridDim.x * 32) {
    size_t e = base + threadIdx.x;
    float s = 0.0f;
    if (e < mn) {
#pragma unroll 4
      for (int p = threadIdx.y; p < count; p += TDM_SUM_LANES)
        s += parts[(size_t)p * mn + e];
    }
    sums[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && e < mn) {
      float t = 0.0f;
      for (int k = 0; k < TDM_SUM_LANES; k++)
        t += sums[k][threadIdx.x];
      float *out = c + (e / (size_t)n) * (size_t)ldc + e % (size_t)n;
      *out = beta == 0.0f ? alpha * t : alpha * t + beta * *out;
    }
    __syncthreads();
  }
}

extern "C" cudaError_t
tdm_k_sum_parts(float *c, int ldc, const float *parts, int count, int m, int n, float alpha,
                float beta, cudaStream_t stream)
{
  size_t mn = (size_t)(m > 0 ? m : 0) * (n > 0 ? n : 0);
  if (mn == 0)
    return cudaSuccess;
  size_t blocks = (mn + 31) / 32;
  if (blocks > 65535)
    blocks = 65535;
  sum_parts_kernel<<<(unsigned)blocks, dim3(32, TDM_SUM_LANES), 0, stream>>>(
      c, ldc, parts, count, m, n, alpha, beta);
  return tdm_k_launched();
}

/* C = alpha · op(A) · op(B) + beta · C for a tiny C. Block (32, 32) per row i of C
 * and 32 columns j: x walks the columns, y the reduction in steps of 32, then the
 * 32 lanes are summed in order through shared memory. For a weight gradient
 * (op(A) = Aᵀ, the batch's gradients; op(B) = B, its inputs) the loads of B are
 * coalesced and those of A broadcast; other layouts are right, only slower. */
__global__ void
gemm_small_kernel(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c,
                  int ldc)
{
  __shared__ float sums[32][33];
  int i = blockIdx.y;
  int j = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (j < n) {
#pragma unroll 4
    for (int p = threadIdx.y; p < k; p += 32) {
      float av = trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
      float bv = trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
      s += av * bv;
    }
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    float t = 0.0f;
    for (int r = 0; r < 32; r++)
      t += sums[r][threadIdx.x];
    float *out = c + (size_t)i * ldc + j;
    *out = beta == 0.0f ? alpha * t : alpha * t + beta * *out;
  }
}

extern "C" cudaError_t
tdm_k_gemm_small(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc,
                 cudaStream_t stream)
{
  if (m <= 0 || n <= 0)
    return cudaSuccess;
  if (m > 65535)
    return cudaErrorInvalidValue;
  dim3 grid((unsigned)((n + 31) / 32), (unsigned)m);
  gemm_small_kernel<<<grid, dim3(32, 32), 0, stream>>>(trans_a, trans_b, m, n, k, alpha, a,
                                                       lda, b, ldb, beta, c, ldc);
  return tdm_k_launched();
}
