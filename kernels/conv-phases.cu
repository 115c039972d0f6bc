/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-phases.cu — the sorted kernels of a strided convolution's input gradient by phases
 * (conv-phases-plan.h): w (KRSC, out_c × kernel × kernel × c, bf16 or float32) rewritten
 * as one stride-1 kernel per output phase, [c][taps_y][taps_x][out_c] each, its taps
 * flipped, at tdm_k_phases_sorted_index(). A copy: the same bits. Run before each input
 * gradient by phases, as the weights change every step. And, for the pre-padded form,
 * dy copied with zero margins (tdm_k_phases_pad_source()), 16 bytes a thread. Not the
 * phases' convolutions (cuDNN's forward, tdm-backend-cuda-conv-phases.c).
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

/* One 16-byte piece of the copy a thread: `units` a pixel (out_c values), pixels of the
 * copy in order; a margin's are zeros. */
__global__ void
conv_phases_pad_kernel(uint4 *__restrict__ padded, const uint4 *__restrict__ dy, int64_t total,
                       int units, TdmKPhasesPad pd)
{
  int64_t dy_pixels = (int64_t)pd.dy_size[0] * pd.dy_size[1];
  int64_t pixels = (int64_t)pd.size[0] * pd.size[1];
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t pixel = i / units, u = i % units;
    int64_t sample = pixel / pixels, at = pixel % pixels;
    int64_t from = tdm_k_phases_pad_source((int)(at / pd.size[1]), (int)(at % pd.size[1]), &pd);
    padded[i] = from < 0 ? make_uint4(0, 0, 0, 0) : dy[(sample * dy_pixels + from) * units + u];
  }
}

extern "C" cudaError_t
tdm_k_conv_phases_pad(void *padded, const void *dy, bool bf16, int n, int dy_h, int dy_w,
                      int out_c, int before_h, int after_h, int before_w, int after_w,
                      cudaStream_t stream)
{
  if (n <= 0 || dy_h <= 0 || dy_w <= 0 || out_c <= 0)
    return cudaSuccess;
  if (out_c % 8 != 0)
    return cudaErrorInvalidValue;
  TdmKPhasesPad pd;
  pd.before[0] = before_h;
  pd.after[0] = after_h;
  pd.before[1] = before_w;
  pd.after[1] = after_w;
  pd.dy_size[0] = dy_h;
  pd.dy_size[1] = dy_w;
  pd.size[0] = before_h + dy_h + after_h;
  pd.size[1] = before_w + dy_w + after_w;
  int units = out_c * (bf16 ? 2 : 4) / 16;
  int64_t total = (int64_t)n * pd.size[0] * pd.size[1] * units;
  int threads = 256;
  int64_t blocks = (total + threads - 1) / threads;
  conv_phases_pad_kernel<<<(unsigned)(blocks < 65535 * 16 ? blocks : 65535 * 16), threads, 0,
                           stream>>>((uint4 *)padded, (const uint4 *)dy, total, units, pd);
  return tdm_k_launched();
}
