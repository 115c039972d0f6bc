/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-phases.cu — the sorted kernels of a strided convolution's input gradient by phases
 * (conv-phases-plan.h): w (KRSC, out_c × kernel × kernel × c, bf16 or float32) rewritten
 * as one stride-1 kernel per output phase, [c][taps_y][taps_x][out_c] each, its taps
 * flipped, at tdm_k_phases_sorted_index(). A copy: the same bits. Run before each input
 * gradient by phases, as the weights change every step. Not the phases' convolutions
 * (cuDNN's forward, tdm-backend-cuda-conv-phases.c).
 *
 * For one tap (ky, kx) the values form an out_c × c matrix read with c contiguous and
 * written with out_c contiguous: a transpose, 32 × 32 tiles through shared memory so
 * that both the reads and the writes are whole rows of a warp.
 */
#include "common.cuh"
#include "conv-phases-plan.h"
#include "tdm-kernels.h"

#define PH_TILE 32
#define PH_ROWS 8 /* a block is 32 × 8 threads, each moving 4 values of a tile */

template <typename T>
__global__ void
conv_phases_weights_kernel(T *__restrict__ sorted, const T *__restrict__ w, int out_c, int c,
                           int kernel, int pad, int stride)
{
  __shared__ T tile[PH_TILE][PH_TILE + 1];
  int tap = blockIdx.z, ky = tap / kernel, kx = tap % kernel;
  int c0 = blockIdx.x * PH_TILE, o0 = blockIdx.y * PH_TILE;
  /* Read: rows o of the tap's matrix, c along a warp. */
  for (int r = threadIdx.y; r < PH_TILE; r += PH_ROWS) {
    int o = o0 + r, ch = c0 + threadIdx.x;
    if (o < out_c && ch < c)
      tile[r][threadIdx.x] = w[(((size_t)o * kernel + ky) * kernel + kx) * c + ch];
  }
  __syncthreads();
  /* Write: rows ch of the phase's kernel, o along a warp (contiguous in the sorted one). */
  int64_t base = tdm_k_phases_sorted_index(0, ky, kx, 0, c, out_c, kernel, pad, stride);
  int py, my, px, mx;
  tdm_k_phase_of_tap(ky, kernel, pad, stride, &py, &my);
  tdm_k_phase_of_tap(kx, kernel, pad, stride, &px, &mx);
  int64_t row = (int64_t)tdm_k_phase_taps(kernel, pad, stride, py) *
                tdm_k_phase_taps(kernel, pad, stride, px) * out_c;
  for (int r = threadIdx.y; r < PH_TILE; r += PH_ROWS) {
    int ch = c0 + r, o = o0 + threadIdx.x;
    if (o < out_c && ch < c)
      sorted[base + (int64_t)ch * row + o] = tile[threadIdx.x][r];
  }
}

extern "C" cudaError_t
tdm_k_conv_phases_weights(void *sorted, const void *w, bool bf16, int out_c, int c, int kernel,
                          int pad, int stride, cudaStream_t stream)
{
  if (out_c <= 0 || c <= 0 || kernel <= 0 || stride < 1)
    return cudaSuccess;
  dim3 grid((c + PH_TILE - 1) / PH_TILE, (out_c + PH_TILE - 1) / PH_TILE, kernel * kernel);
  dim3 block(PH_TILE, PH_ROWS);
  if (bf16)
    conv_phases_weights_kernel<uint16_t><<<grid, block, 0, stream>>>(
        (uint16_t *)sorted, (const uint16_t *)w, out_c, c, kernel, pad, stride);
  else
    conv_phases_weights_kernel<float><<<grid, block, 0, stream>>>(
        (float *)sorted, (const float *)w, out_c, c, kernel, pad, stride);
  return tdm_k_launched();
}
