/* SPDX-License-Identifier: GPL-3.0-or-later */
/* pool-bf16.cu — the max pools whose windows tile the input, on a bf16 run's stored
 * tensors: the forward of a float32 or bf16 input (optionally a training bn's output,
 * normalized as each value is read, as bn-value.cuh computes it), each value rounded to
 * bf16 before the max, writing a bf16 output; and the backward's gather with its
 * gradients float32 or bf16. The CPU reference is tdm-backend-cpu-pool.c's; the bits
 * are those of bn_forward_bf16 (or to_bf16) then maxpool_forward, and of
 * maxpool_backward with each value rounded once. Not here: pool.cu's float32 pools with
 * a conv's bias folded in. */
#include "tdm-kernels.h"
#include "common.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>

static inline bool
aligned_to(const void *p, uintptr_t bytes)
{
  return ((uintptr_t)p & (bytes - 1)) == 0;
}

/* A float rounded to bf16 and back: the value a bf16 tensor would hold. */
__device__ __forceinline__ float
bf16_rounded(float v)
{
  return __bfloat162float(__float2bfloat16_rn(v));
}

/* One thread per V channels of an output pixel, channels fastest. The window is
 * scanned row by row; the first maximum of the rounded values wins (strict >), as the
 * CPU's loop keeps it. */
template <int V, bool BN, typename X>
__global__ void
maxpool_forward_bf16_kernel(uint16_t *y, int32_t *argmax, const X *x, uint32_t total, int h,
                            int w, int c, int k, int ph, int pw, BnGather bn)
{
  int cv = c / V;
  for (uint32_t e = tdm_k_grid_start<uint32_t>(); e < total;
       e += tdm_k_grid_stride<uint32_t>()) {
    TdmKNhwc<uint32_t> o = tdm_k_nhwc(e, cv, pw, ph);
    int q = o.ch;
    int32_t first = (((int)o.img * h + o.y * k) * w + o.x * k) * c + q * V;
    float best[V], scale[V], shift[V];
    int32_t at[V];
    if (BN)
      for (int j = 0; j < V; j++)
        bn_train_affine(q * V + j, bn.mean, bn.invstd, bn.gamma, bn.beta, scale + j,
                        shift + j);
    for (int ky = 0; ky < k; ky++) {
      for (int kx = 0; kx < k; kx++) {
        int32_t base = first + (ky * w + kx) * c;
        float v[V];
        tdm_k_vec<V>::load(v, x + base);
        for (int j = 0; j < V; j++) {
          float r = bf16_rounded(BN ? bn_affine_output(v[j], scale[j], shift[j], bn.relu) : v[j]);
          if ((ky == 0 && kx == 0) || r > best[j]) {
            best[j] = r;
            at[j] = base + j;
          }
        }
      }
    }
    /* Each best is a bf16 value already: the store's rounding keeps it. */
    tdm_k_vec<V>::store(y + (size_t)e * V, best);
    tdm_k_vec<V>::store(argmax + (size_t)e * V, at);
  }
}

template <bool BN, typename X>
static void
maxpool_forward_bf16_launch(uint16_t *y, int32_t *argmax, const X *x, int n, int h, int w,
                            int c, int k, BnGather bn, cudaStream_t stream)
{
  int ph = h / k, pw = w / k;
  size_t total = (size_t)n * ph * pw * c;
  bool vec = c % 4 == 0 && aligned_to(y, 8) && tdm_k_aligned16(argmax) &&
             aligned_to(x, 4 * sizeof(X));
  if (vec)
    maxpool_forward_bf16_kernel<4, BN, X>
        <<<tdm_k_blocks(total / 4, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            y, argmax, x, (uint32_t)(total / 4), h, w, c, k, ph, pw, bn);
  else
    maxpool_forward_bf16_kernel<1, BN, X>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            y, argmax, x, (uint32_t)total, h, w, c, k, ph, pw, bn);
}

extern "C" cudaError_t
tdm_k_maxpool_forward_bf16(uint16_t *y, int32_t *argmax, const void *x, bool x16,
                           const float *mean, const float *invstd, const float *gamma,
                           const float *beta, bool relu, int n, int h, int w, int c, int k,
                           cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  if (n <= 0 || h / k <= 0 || w / k <= 0 || c <= 0)
    return cudaSuccess;
  /* The backend checked that x's elements fit int32 indices. */
  BnGather bn = {mean, invstd, gamma, beta, relu};
  if (x16 && mean != NULL)
    maxpool_forward_bf16_launch<true>(y, argmax, (const uint16_t *)x, n, h, w, c, k, bn, stream);
  else if (x16)
    maxpool_forward_bf16_launch<false>(y, argmax, (const uint16_t *)x, n, h, w, c, k, bn, stream);
  else if (mean != NULL)
    maxpool_forward_bf16_launch<true>(y, argmax, (const float *)x, n, h, w, c, k, bn, stream);
  else
    maxpool_forward_bf16_launch<false>(y, argmax, (const float *)x, n, h, w, c, k, bn, stream);
  return tdm_k_launched();
}

/* V channels of a pixel's gradient, all zero (a pixel past the last whole window). */
template <int V, typename DX>
__device__ __forceinline__ void
zero_pixel(DX *dx)
{
  float z[V];
  for (int j = 0; j < V; j++)
    z[j] = 0.0f;
  tdm_k_vec<V>::store(dx, z);
}

/* One thread per window and V channels, channels fastest: it reads the window's dy and
 * argmax once and writes its k × k pixels' gradients — dy where the window chose the
 * pixel (argmax holds the input's flat index), else zero — as V-channel vectors; a
 * window in the last whole row or column of windows also zeroes the pixels past it
 * (h or w not a multiple of k), so every dx pixel is written once. The values are
 * those of one thread per dx element, each rounded once where dx is bf16. */
template <int V, typename DX, typename DY>
__global__ void
maxpool_backward_bf16_kernel(DX *dx, const DY *dy, const int32_t *argmax, uint32_t windows,
                             int h, int w, int c, int k, int ph, int pw)
{
  int cv = c / V;
  for (uint32_t t = tdm_k_grid_start<uint32_t>(); t < windows;
       t += tdm_k_grid_stride<uint32_t>()) {
    int ch = (int)(t % (uint32_t)cv) * V;
    uint32_t rest = t / (uint32_t)cv;
    int ox = (int)(rest % (uint32_t)pw);
    rest /= (uint32_t)pw;
    int oy = (int)(rest % (uint32_t)ph);
    uint32_t img = rest / (uint32_t)ph;
    uint32_t out = ((img * ph + oy) * pw + ox) * c + ch;
    float g[V];
    int32_t at[V];
    tdm_k_vec<V>::load(g, dy + out);
    tdm_k_vec<V>::load(at, argmax + out);
    uint32_t row0 = img * h;
    for (int ky = 0; ky < k; ky++)
      for (int kx = 0; kx < k; kx++) {
        uint32_t e = ((row0 + oy * k + ky) * w + ox * k + kx) * c + ch;
        float v[V];
        for (int j = 0; j < V; j++)
          v[j] = (uint32_t)at[j] == e + j ? g[j] : 0.0f;
        tdm_k_vec<V>::store(dx + e, v);
      }
    /* The pixels right of the last column of windows (beside this window's rows), and
     * below the last row (under this window's columns, and the corner past both). */
    if (ox == pw - 1)
      for (int y = oy * k; y < oy * k + k; y++)
        for (int x = pw * k; x < w; x++)
          zero_pixel<V>(dx + ((row0 + y) * w + x) * c + ch);
    if (oy == ph - 1)
      for (int y = ph * k; y < h; y++)
        for (int x = ox * k; x < (ox == pw - 1 ? w : ox * k + k); x++)
          zero_pixel<V>(dx + ((row0 + y) * w + x) * c + ch);
  }
}

template <int V, typename DX, typename DY>
static void
maxpool_backward_bf16_launch(DX *dx, const DY *dy, const int32_t *argmax, int n, int h, int w,
                             int c, int k, cudaStream_t stream)
{
  int ph = h / k, pw = w / k;
  size_t windows = (size_t)n * ph * pw * (c / V);
  maxpool_backward_bf16_kernel<V, DX, DY>
      <<<tdm_k_blocks(windows, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
          dx, dy, argmax, (uint32_t)windows, h, w, c, k, ph, pw);
}

/* The widest V that the channels and every pointer allow (16-byte vectors at most a
 * tensor's V values, argmax's included). */
template <typename DX, typename DY>
static cudaError_t
maxpool_backward_bf16_vec(DX *dx, const DY *dy, const int32_t *argmax, int n, int h, int w,
                          int c, int k, cudaStream_t stream)
{
  if (h / k <= 0 || w / k <= 0) {
    /* No whole window: every pixel's gradient is zero (+0: all bits clear). */
    return cudaMemsetAsync(dx, 0, (size_t)n * h * w * c * sizeof(DX), stream);
  }
  auto fits = [&](int v) {
    return c % v == 0 && aligned_to(dx, v * sizeof(DX)) && aligned_to(dy, v * sizeof(DY)) &&
           aligned_to(argmax, v * sizeof(int32_t));
  };
  if (fits(8))
    maxpool_backward_bf16_launch<8>(dx, dy, argmax, n, h, w, c, k, stream);
  else if (fits(4))
    maxpool_backward_bf16_launch<4>(dx, dy, argmax, n, h, w, c, k, stream);
  else
    maxpool_backward_bf16_launch<1>(dx, dy, argmax, n, h, w, c, k, stream);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_maxpool_backward_bf16(void *dx, bool dx16, const void *dy, bool dy16,
                            const int32_t *argmax, int n, int h, int w, int c, int k,
                            cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  if (n <= 0 || h <= 0 || w <= 0 || c <= 0)
    return cudaSuccess;
  if (dx16 && dy16)
    return maxpool_backward_bf16_vec((uint16_t *)dx, (const uint16_t *)dy, argmax, n, h, w, c,
                                     k, stream);
  if (dx16)
    return maxpool_backward_bf16_vec((uint16_t *)dx, (const float *)dy, argmax, n, h, w, c, k,
                                     stream);
  if (dy16)
    return maxpool_backward_bf16_vec((float *)dx, (const uint16_t *)dy, argmax, n, h, w, c, k,
                                     stream);
  return maxpool_backward_bf16_vec((float *)dx, (const float *)dy, argmax, n, h, w, c, k,
                                   stream);
}
