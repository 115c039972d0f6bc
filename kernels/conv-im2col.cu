/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-im2col.cu — the data movement around a convolution's GEMM: im2col (columns ordered
 * (ky, kx, channel), so every tap is a run of c contiguous floats in x and in col) and
 * col2im, on NHWC activations.
 *
 * The convolution's arithmetic is a cuBLAS GEMM in the backend; these kernels only
 * rearrange. With c % 4 == 0 each thread moves float4s and a warp's accesses are whole
 * lines. col2im is a gather (each output element sums what lands on it), never a
 * scatter with atomics, so results are deterministic. For --precision bf16, im2col
 * also writes bfloat16 columns (rounded to nearest even) and col2im also reads them
 * (summing in float32). im2col can apply a training batch normalization (and its
 * ReLU) to each value it reads, for a layer that is the normalized tensor's only
 * reader: it is never written. Not here: pooling (pool.cu), the fused first-layer
 * conv + pool (conv-pool.cu).
 */
#include "tdm-kernels.h"
#include "common.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>
#include <limits.h>

/* im2col, the common case: rows (img, oy, ox) on threadIdx.y and blocks, a row's
 * vectors of V floats on threadIdx.x. Each vector's (ky, kx, channel) comes from a
 * table in shared memory built once per block instead of three divisions per
 * vector; with BN, so does each channel's scale and shift (bn_train_affine), after
 * the table at a 16-byte boundary. Needs kcols / V <= TDM_IM2COL_TABLE, kh < 128,
 * kw < 256, c / V < 65536, and the shared memory within TDM_IM2COL_SHARED. */
#define TDM_IM2COL_TABLE 8192
#define TDM_IM2COL_SHARED 49152

__host__ __device__ inline size_t
im2col_affine_offset(size_t kvecs)
{
  return (kvecs * sizeof(int) + 15) / 16 * 16;
}

template <int V, typename T, bool BN, typename X>
__global__ void
im2col_table_kernel(T *col, const X *x, int rows, int h, int w, int c, int kh, int kw, int pad,
                    int stride, int oh, int ow, BnGather bn, bool descending)
{
  extern __shared__ __align__(16) int taps[];
  int cv = c / V;
  int kvecs = kh * kw * cv;
  int tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (int k = tid; k < kvecs; k += blockDim.x * blockDim.y) {
    int tap = k / cv;
    taps[k] = ((tap / kw) << 24) | ((tap % kw) << 16) | (k % cv);
  }
  float *scale = (float *)((char *)taps + im2col_affine_offset(kvecs));
  float *shift = scale + c;
  if (BN)
    for (int ch = tid; ch < c; ch += blockDim.x * blockDim.y)
      bn_train_affine(ch, bn.mean, bn.invstd, bn.gamma, bn.beta, scale + ch, shift + ch);
  __syncthreads();
  for (int q = blockIdx.x * blockDim.y + threadIdx.y; q < rows; q += gridDim.x * blockDim.y) {
    int row = tdm_k_walk(q, rows, descending);
    int ox = row % ow;
    int t = row / ow;
    int oy = t % oh;
    int img = t / oh;
    const X *xi = x + (size_t)img * h * w * c;
    T *out = col + (size_t)row * kvecs * V;
    for (int k = threadIdx.x; k < kvecs; k += blockDim.x) {
      int tap = taps[k];
      int iy = oy * stride + (tap >> 24) - pad;
      int ix = ox * stride + ((tap >> 16) & 0xff) - pad;
      float v[V];
      if ((unsigned)iy < (unsigned)h && (unsigned)ix < (unsigned)w) {
        int ch = (tap & 0xffff) * V;
        tdm_k_vec<V>::load(v, xi + (iy * w + ix) * c + ch);
        if (BN) {
          float sc[V], sh[V];
          tdm_k_vec<V>::load(sc, scale + ch);
          tdm_k_vec<V>::load(sh, shift + ch);
          for (int j = 0; j < V; j++)
            v[j] = bn_affine_output(v[j], sc[j], sh[j], bn.relu);
        }
      } else
        for (int j = 0; j < V; j++)
          v[j] = 0.0f;
      tdm_k_vec<V>::store(out + k * V, v);
    }
  }
}

/* im2col for any shape: one thread per col entry. */
template <typename I, typename T, bool BN, typename X>
__global__ void
im2col_kernel(T *col, const X *x, I total, int h, int w, int c, int kh, int kw, int pad,
              int stride, int oh, int ow, BnGather bn, bool descending)
{
  I kcols = (I)c * kh * kw;
  for (I q = tdm_k_grid_start<I>(); q < total; q += tdm_k_grid_stride<I>()) {
    I e = tdm_k_walk(q, total, descending);
    I row = e / kcols;
    int k = (int)(e - row * kcols);
    int ch = k % c;
    int tap = k / c;
    int kx = tap % kw;
    int ky = tap / kw;
    int ox = (int)(row % (I)ow);
    int oy = (int)((row / (I)ow) % (I)oh);
    I img = row / ((I)ow * oh);
    int iy = oy * stride + ky - pad;
    int ix = ox * stride + kx - pad;
    float v = 0.0f;
    if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
      v = tdm_k_load1(x + (((size_t)img * h + iy) * w + ix) * c + ch);
      if (BN)
        v = bn_train_output(v, ch, bn.mean, bn.invstd, bn.gamma, bn.beta, bn.relu);
    }
    tdm_k_store1(col + e, v);
  }
}

/* Threads per row for the table kernel: the whole row when it has at most 32
 * vectors, else a divisor of its length between 16 and 32 (no idle lanes on the
 * last pass), else 32. */
static unsigned
im2col_lanes(int kvecs)
{
  if (kvecs <= 32)
    return (unsigned)kvecs;
  for (int d = 32; d >= 16; d--)
    if (kvecs % d == 0)
      return (unsigned)d;
  return 32;
}

/* Columns in float32 (T = float) or bfloat16 (T = uint16_t, --precision bf16's
 * operands for the GEMMs that read them), of x or (BN) of x normalized; x float32 or
 * (X = uint16_t) bfloat16; the rows from the last where descending (tdm_k_walk: a
 * normalized gather follows the bn's moments over the same x). */
template <typename T, bool BN, typename X = float>
static cudaError_t
im2col_launch(T *col, const X *x, int n, int h, int w, int c, int kh, int kw, int pad,
              int stride, BnGather bn, bool descending, cudaStream_t stream)
{
  if (stride <= 0)
    return cudaErrorInvalidValue;
  int oh = h + 2 * pad - kh >= 0 ? (h + 2 * pad - kh) / stride + 1 : 0;
  int ow = w + 2 * pad - kw >= 0 ? (w + 2 * pad - kw) / stride + 1 : 0;
  if (n <= 0 || oh <= 0 || ow <= 0 || c <= 0 || kh <= 0 || kw <= 0)
    return cudaSuccess;
  size_t rows = (size_t)n * oh * ow;
  size_t kcols = (size_t)c * kh * kw;
  size_t total = rows * kcols;
  /* float4 loads; the stores are 16 bytes (float) or 8 (bf16) at the same offsets. */
  bool vec = c % 4 == 0 && ((uintptr_t)col & (4 * sizeof(T) - 1)) == 0 &&
             ((uintptr_t)x & (4 * sizeof(X) - 1)) == 0;
  int v = vec ? 4 : 1;
  size_t kvecs = kcols / v;
  size_t shared = BN ? im2col_affine_offset(kvecs) + 2 * (size_t)c * sizeof(float)
                     : kvecs * sizeof(int);
  if (kvecs <= TDM_IM2COL_TABLE && kh < 128 && kw < 256 && c / v < 65536 &&
      rows <= INT32_MAX && (size_t)h * w * c <= INT32_MAX && shared <= TDM_IM2COL_SHARED) {
    unsigned bx = im2col_lanes((int)kvecs);
    dim3 block(bx, TDM_K_THREADS / bx);
    size_t blocks = (rows + block.y - 1) / block.y;
    if (blocks > 8192)
      blocks = 8192;
    if (vec)
      im2col_table_kernel<4, T, BN, X><<<(unsigned)blocks, block, shared, stream>>>(
          col, x, (int)rows, h, w, c, kh, kw, pad, stride, oh, ow, bn, descending);
    else
      im2col_table_kernel<1, T, BN, X><<<(unsigned)blocks, block, shared, stream>>>(
          col, x, (int)rows, h, w, c, kh, kw, pad, stride, oh, ow, bn, descending);
  } else if (total <= UINT32_MAX) {
    im2col_kernel<uint32_t, T, BN, X>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            col, x, (uint32_t)total, h, w, c, kh, kw, pad, stride, oh, ow, bn, descending);
  } else {
    im2col_kernel<size_t, T, BN, X>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            col, x, total, h, w, c, kh, kw, pad, stride, oh, ow, bn, descending);
  }
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_im2col(float *col, const float *x, int n, int h, int w, int c, int kh, int kw, int pad,
             int stride, cudaStream_t stream)
{
  return im2col_launch<float, false>(col, x, n, h, w, c, kh, kw, pad, stride, BnGather{}, false,
                                     stream);
}

extern "C" cudaError_t
tdm_k_im2col_bf16(uint16_t *col, const void *x, bool x16, int n, int h, int w, int c, int kh,
                  int kw, int pad, int stride, cudaStream_t stream)
{
  if (x16)
    return im2col_launch<uint16_t, false>(col, (const uint16_t *)x, n, h, w, c, kh, kw, pad,
                                          stride, BnGather{}, false, stream);
  return im2col_launch<uint16_t, false>(col, (const float *)x, n, h, w, c, kh, kw, pad, stride,
                                        BnGather{}, false, stream);
}

extern "C" cudaError_t
tdm_k_im2col_bf16_bn(uint16_t *col, const void *x, bool x16, const float *mean,
                     const float *invstd, const float *gamma, const float *beta, bool relu,
                     int n, int h, int w, int c, int kh, int kw, int pad, int stride,
                     bool descending, cudaStream_t stream)
{
  /* A 1×1 stride-1 unpadded gather is the input itself, normalized: the bn forward's
   * pass writes it with the same bits (bn_train_affine, bn_affine_output, one rounding)
   * at the memory's rate, where the table kernel's div/mod and 8-byte accesses do not. */
  if (kh == 1 && kw == 1 && pad == 0 && stride == 1 && (size_t)n * h * w <= INT_MAX)
    return tdm_k_bn_forward_bf16(col, x, x16, mean, invstd, gamma, beta, NULL, false,
                                 n * h * w, c, relu, NULL, descending, stream);
  BnGather bn = {mean, invstd, gamma, beta, relu};
  if (x16)
    return im2col_launch<uint16_t, true>(col, (const uint16_t *)x, n, h, w, c, kh, kw, pad,
                                         stride, bn, descending, stream);
  return im2col_launch<uint16_t, true>(col, (const float *)x, n, h, w, c, kh, kw, pad, stride,
                                       bn, descending, stream);
}

/* dx[img, iy, ix, ch] = Σ over (ky, kx) of col[(img, oy, ox), (ky, kx, ch)] for the
 * output pixels that read it, oy · stride = iy − ky + pad (and ox likewise), taps in
 * the CPU's order, summed in float32 and stored as D (float, or bf16 rounded once). One
 * thread per V channels of a dx pixel: the warp's reads of one tap are runs of c
 * contiguous floats. */
template <typename I, int V, typename T, typename D>
__global__ void
col2im_kernel(D *dx, const T *col, I total, int h, int w, int c, int kh, int kw, int pad,
              int stride, int oh, int ow)
{
  int cv = c / V;
  size_t kcols = (size_t)c * kh * kw;
  for (I e = tdm_k_grid_start<I>(); e < total; e += tdm_k_grid_stride<I>()) {
    TdmKNhwc<I> at = tdm_k_nhwc(e, cv, w, h);
    int q = at.ch, ix = at.x, iy = at.y;
    size_t img = (size_t)at.img;
    float s[V];
    for (int j = 0; j < V; j++)
      s[j] = 0.0f;
    for (int ky = 0; ky < kh; ky++) {
      int ty = iy - ky + pad;
      int oy = ty / stride;
      if (ty < 0 || ty - oy * stride != 0 || oy >= oh)
        continue;
      for (int kx = 0; kx < kw; kx++) {
        int tx = ix - kx + pad;
        int ox = tx / stride;
        if (tx < 0 || tx - ox * stride != 0 || ox >= ow)
          continue;
        size_t row = (img * oh + oy) * ow + ox;
        float v[V];
        tdm_k_vec<V>::load(v, col + row * kcols + (size_t)(ky * kw + kx) * c + (size_t)q * V);
        for (int j = 0; j < V; j++)
          s[j] += v[j];
      }
    }
    tdm_k_vec<V>::store(dx + (size_t)e * V, s);
  }
}

template <int V, typename T, typename D>
static void
launch_col2im(D *dx, const T *col, size_t total, int h, int w, int c, int kh, int kw, int pad,
              int stride, int oh, int ow, cudaStream_t stream)
{
  if (total <= UINT32_MAX)
    col2im_kernel<uint32_t, V, T, D>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx, col, (uint32_t)total, h, w, c, kh, kw, pad, stride, oh, ow);
  else
    col2im_kernel<size_t, V, T, D>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx, col, total, h, w, c, kh, kw, pad, stride, oh, ow);
}

/* From float32 columns (T = float) or bfloat16 ones (T = uint16_t, summed as float32
 * in the same order), into float32 dx (D = float) or bfloat16 (D = uint16_t). */
template <typename T, typename D>
static cudaError_t
col2im_launch(D *dx, const T *col, int n, int h, int w, int c, int kh, int kw, int pad,
              int stride, cudaStream_t stream)
{
  if (stride <= 0)
    return cudaErrorInvalidValue;
  int oh = h + 2 * pad - kh >= 0 ? (h + 2 * pad - kh) / stride + 1 : 0;
  int ow = w + 2 * pad - kw >= 0 ? (w + 2 * pad - kw) / stride + 1 : 0;
  size_t total = (size_t)(n > 0 ? n : 0) * (h > 0 ? h : 0) * (w > 0 ? w : 0) * (c > 0 ? c : 0);
  if (total == 0)
    return cudaSuccess;
  if (oh <= 0 || ow <= 0 || kh <= 0 || kw <= 0)
    return cudaMemsetAsync(dx, 0, total * sizeof(D), stream);
  if (c % 4 == 0 && ((uintptr_t)dx & (4 * sizeof(D) - 1)) == 0 &&
      ((uintptr_t)col & (4 * sizeof(T) - 1)) == 0)
    launch_col2im<4>(dx, col, total / 4, h, w, c, kh, kw, pad, stride, oh, ow, stream);
  else
    launch_col2im<1>(dx, col, total, h, w, c, kh, kw, pad, stride, oh, ow, stream);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_col2im(float *dx, const float *col, int n, int h, int w, int c, int kh, int kw, int pad,
             int stride, cudaStream_t stream)
{
  return col2im_launch(dx, col, n, h, w, c, kh, kw, pad, stride, stream);
}

extern "C" cudaError_t
tdm_k_col2im_bf16(void *dx, bool dx16, const uint16_t *col, int n, int h, int w, int c, int kh,
                  int kw, int pad, int stride, cudaStream_t stream)
{
  if (dx16)
    return col2im_launch((uint16_t *)dx, col, n, h, w, c, kh, kw, pad, stride, stream);
  return col2im_launch((float *)dx, col, n, h, w, c, kh, kw, pad, stride, stream);
}
