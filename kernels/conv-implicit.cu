/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-implicit.cu — a stride-1 convolution's input gradient as one implicit GEMM on
 * bfloat16 tensor cores, without a column matrix.
 *
 * dx[img, y, x, ch] = Σ over taps (ky, kx) and output channels o of
 * dy[img, y + pad − ky, x + pad − kx, o] · W[o, ky, kx, ch] (zero outside dy). As a
 * GEMM: rows are dx's pixels, columns its channels, the reduction runs over (tap, o).
 * Each block gathers its tile of dy rows for one tap straight from dy (bf16, NHWC)
 * into shared memory, so the rows × (k·k·C) columns that gemm_bf16_out would write and
 * col2im_bf16 read again never exist. Products of bf16 values are exact in float32
 * and summed in float32 (WMMA 16×16×16), in a fixed order: the same inputs give the
 * same bits. Needs sm_80 or later (bf16 WMMA); the launcher says whether a shape fits.
 * Not the forward or the weight gradient (they keep their columns: the weight
 * gradient reads the forward's), nor strided convolutions. The backend uses it only
 * under TDM_CUDA_IMPLICIT=1: with four cp.async stages it is as fast as the cuBLAS
 * GEMM and col2im it replaces, not faster (WMMA tiles of 64 × 32/64 a block leave the
 * tensor cores mostly idle; ldmatrix and mma.sync with larger tiles would be next).
 */
#include "tdm-kernels.h"
#include "common.cuh"

#include <cuda_bf16.h>
#include <mma.h>

#define DG_BM 64        /* dx pixels a block */
#define DG_BK 32        /* output channels a step of the reduction */
#define DG_STAGES 4     /* steps in flight: cp.async copies hide the gathers' latency */
#define DG_THREADS 128  /* four warps, 2 × 2 over the tile */

/* 16 bytes from global to shared memory without registers, or 16 zero bytes when
 * `valid` is false (the tap falls outside dy). */
__device__ __forceinline__ void
copy16(void *smem, const void *gmem, bool valid)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
  int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(bytes));
#endif
}

__device__ __forceinline__ void
copy_commit(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N>
__device__ __forceinline__ void
copy_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* BN: dx channels a block (32 or 64). Shared tiles are padded by 8 bf16 (16 bytes) a
 * row so that WMMA's row loads fall on different banks; the leading dimensions stay
 * multiples of 8 as WMMA requires. The float32 tile of the epilogue reuses the
 * stages' memory once the reduction is done. */
template <int BN, typename D>
__global__ void
__launch_bounds__(DG_THREADS)
    conv_dgrad_bf16_kernel(D *dx, const uint16_t *dy, const uint16_t *wt, int rows, int h,
                           int w, int c, int out_c, int kh, int kw, int pad)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  constexpr int AS = DG_BK + 8, BS = BN + 8, CS = BN + 4;
  constexpr int FN = BN / 32;          /* 16-wide fragments a warp across channels */
  constexpr int A_STAGE = DG_BM * AS, B_STAGE = DG_BK * BS;
  constexpr int PIPE_BYTES = DG_STAGES * (A_STAGE + B_STAGE) * 2;
  constexpr int C_BYTES = DG_BM * CS * 4;
  __shared__ __align__(128) unsigned char smem[PIPE_BYTES > C_BYTES ? PIPE_BYTES : C_BYTES];
  uint16_t *a_tiles = (uint16_t *)smem;
  uint16_t *b_tiles = a_tiles + DG_STAGES * A_STAGE;
  float *c_tile = (float *)smem;

  int oh = h + 2 * pad - kh + 1, ow = w + 2 * pad - kw + 1;
  int m0 = blockIdx.x * DG_BM, c0 = blockIdx.y * BN;
  int tid = threadIdx.x, warp = tid / 32;
  int wm = warp / 2, wn = warp % 2;

  /* A: 64 rows × 32 channels = 256 copies of 16 bytes, two a thread; each thread keeps
   * its rows' pixels for the whole reduction. */
  int a_row[2], a_seg[2], a_img[2], a_y[2], a_x[2];
  for (int v = 0; v < 2; v++) {
    int idx = tid + v * DG_THREADS;
    a_row[v] = idx / 4;
    a_seg[v] = idx % 4;
    int m = m0 + a_row[v];
    if (m < rows) {
      a_x[v] = m % w;
      a_y[v] = (m / w) % h;
      a_img[v] = m / (w * h);
    } else {
      a_img[v] = -1;
      a_y[v] = a_x[v] = 0;
    }
  }
  /* B: 32 rows (o) × BN channels = 4·BN copies, 4·BN / 128 a thread. */
  constexpr int BV = (DG_BK * BN / 8) / DG_THREADS;
  constexpr int BSEG = BN / 8;
  size_t kc = (size_t)kh * kw * c;
  int chunks = out_c / DG_BK, steps = kh * kw * chunks;

  /* Issues the copies of one step into its stage, then commits them as a group
   * (an empty group past the end keeps the wait counts uniform). */
  auto issue = [&](int step) {
    if (step < steps) {
      int stage = step % DG_STAGES;
      int tap = step / chunks, o0 = (step % chunks) * DG_BK;
      int ky = tap / kw, kx = tap % kw;
      uint16_t *a = a_tiles + stage * A_STAGE, *bt = b_tiles + stage * B_STAGE;
      for (int v = 0; v < 2; v++) {
        int sy = a_y[v] + pad - ky, sx = a_x[v] + pad - kx;
        bool valid = a_img[v] >= 0 && sy >= 0 && sy < oh && sx >= 0 && sx < ow;
        size_t src = valid ? (((size_t)a_img[v] * oh + sy) * ow + sx) * out_c + o0 + a_seg[v] * 8
                           : 0;
        copy16(a + a_row[v] * AS + a_seg[v] * 8, dy + src, valid);
      }
      for (int v = 0; v < BV; v++) {
        int idx = tid + v * DG_THREADS;
        int r = idx / BSEG, sg = idx % BSEG;
        size_t src = (size_t)(o0 + r) * kc + (size_t)tap * c + c0 + sg * 8;
        copy16(bt + r * BS + sg * 8, wt + src, true);
      }
    }
    copy_commit();
  };

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][FN];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < FN; j++)
      wmma::fill_fragment(acc[i][j], 0.0f);

  for (int s = 0; s < DG_STAGES - 1; s++)
    issue(s);
  for (int step = 0; step < steps; step++) {
    /* This step's group has landed (at most STAGES − 2 newer ones pending), and every
     * warp is done with the stage the next issue overwrites (read at step − 1). */
    copy_wait<DG_STAGES - 2>();
    __syncthreads();
    issue(step + DG_STAGES - 1);
    int stage = step % DG_STAGES;
    const __nv_bfloat16 *a = (const __nv_bfloat16 *)(a_tiles + stage * A_STAGE);
    const __nv_bfloat16 *bt = (const __nv_bfloat16 *)(b_tiles + stage * B_STAGE);
    for (int kk = 0; kk < DG_BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[FN];
      for (int i = 0; i < 2; i++)
        wmma::load_matrix_sync(fa[i], a + (wm * 32 + i * 16) * AS + kk, AS);
      for (int j = 0; j < FN; j++)
        wmma::load_matrix_sync(fb[j], bt + kk * BS + wn * (BN / 2) + j * 16, BS);
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < FN; j++)
          wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
  }
  copy_wait<0>();
  __syncthreads();

  for (int i = 0; i < 2; i++)
    for (int j = 0; j < FN; j++)
      wmma::store_matrix_sync(c_tile + (wm * 32 + i * 16) * CS + wn * (BN / 2) + j * 16,
                              acc[i][j], CS, wmma::mem_row_major);
  __syncthreads();
  /* Out four channels at a time (float, or bf16 rounded once), a row's BN channels
   * contiguous in dx. */
  for (int idx = tid; idx < DG_BM * BN / 4; idx += DG_THREADS) {
    int r = idx / (BN / 4), q = idx % (BN / 4);
    int m = m0 + r;
    if (m < rows)
      tdm_k_vec<4>::store(dx + (size_t)m * c + c0 + q * 4, c_tile + r * CS + q * 4);
  }
#endif
}

extern "C" bool
tdm_k_conv_dgrad_bf16_fits(int major, int c, int out_c, int kh, int kw, int pad, int stride)
{
  return major >= 8 && stride == 1 && c >= 32 && c % 32 == 0 && out_c >= DG_BK &&
         out_c % DG_BK == 0 && kh >= 1 && kw >= 1 && pad >= 0;
}

extern "C" cudaError_t
tdm_k_conv_dgrad_bf16(void *dx, bool dx16, const uint16_t *dy, const uint16_t *w, int n, int h,
                      int wd, int c, int out_c, int kh, int kw, int pad, cudaStream_t stream)
{
  size_t rows = (size_t)n * h * wd;
  if (rows == 0)
    return cudaSuccess;
  if (rows > (size_t)INT32_MAX - DG_BM || !tdm_k_aligned16(dx) || !tdm_k_aligned16(dy) ||
      !tdm_k_aligned16(w))
    return cudaErrorInvalidValue;
  unsigned blocks = (unsigned)((rows + DG_BM - 1) / DG_BM);
#define DGRAD(BN, D)                                                                           \
  conv_dgrad_bf16_kernel<BN, D><<<dim3(blocks, c / BN), DG_THREADS, 0, stream>>>(              \
      (D *)dx, dy, w, (int)rows, h, wd, c, out_c, kh, kw, pad)
  if (c % 64 == 0 && dx16)
    DGRAD(64, uint16_t);
  else if (c % 64 == 0)
    DGRAD(64, float);
  else if (dx16)
    DGRAD(32, uint16_t);
  else
    DGRAD(32, float);
#undef DGRAD
  return tdm_k_launched();
}
