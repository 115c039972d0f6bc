/* SPDX-License-Identifier: GPL-3.0-or-later */
/* pool.cu — the pools whose windows tile the input, on NHWC activations: max pooling
 * forward and backward, with a conv's bias and ReLU folded in, and optionally a
 * training batch normalization applied to each value read (for a pool that is the
 * normalized tensor's only reader); average pooling; and the global average and max
 * pools.
 *
 * The gradients are gathers (each input pixel has at most one window: stride = k), so
 * results are deterministic. Not here: pools with any window, stride and padding
 * (pool2d.cu), the fused conv + pool of a first layer (conv-pool.cu).
 */
#include "tdm-kernels.h"
#include "common.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>

/* One thread per V channels of an output pixel, channels fastest so that reads are
 * coalesced. Scans the window row by row and keeps the first maximum (strict >), as
 * the CPU reference does; then adds the bias and applies the ReLU when asked (a conv
 * layer's, folded into the pool: both are monotonic, so the same y on a quarter of
 * the elements). Indices are int32: x has at most 2³¹ elements (the backend checks). */
/* V values of x, normalized by their channels' scale and shift when BN. */
template <int V, bool BN>
__device__ __forceinline__ void
load_bn_v(float *v, const float *p, const float *scale, const float *shift, bool relu)
{
  tdm_k_vec<V>::load(v, p);
  if (BN)
    for (int j = 0; j < V; j++)
      v[j] = bn_affine_output(v[j], scale[j], shift[j], relu);
}

/* BN: the pool of a training bn's output, each value normalized as it is read (the
 * output itself never written); argmax then indexes x, which has its layout. */
template <int V, bool BN>
__global__ void
maxpool_forward_kernel(float *y, int32_t *argmax, const float *x, const float *bias,
                       bool use_relu, uint32_t total, int h, int w, int c, int k, int ph,
                       int pw, BnGather bn)
{
  int cv = c / V;
  for (uint32_t e = tdm_k_grid_start<uint32_t>(); e < total; e += tdm_k_grid_stride<uint32_t>()) {
    TdmKNhwc<uint32_t> o = tdm_k_nhwc(e, cv, pw, ph);
    int q = o.ch;
    int32_t first = (((int)o.img * h + o.y * k) * w + o.x * k) * c + q * V;
    float best[V], scale[V], shift[V];
    int32_t at[V];
    if (BN)
      for (int j = 0; j < V; j++)
        bn_train_affine(q * V + j, bn.mean, bn.invstd, bn.gamma, bn.beta, scale + j,
                        shift + j);
    load_bn_v<V, BN>(best, x + first, scale, shift, bn.relu);
    for (int j = 0; j < V; j++)
      at[j] = first + j;
    for (int ky = 0; ky < k; ky++) {
      for (int kx = 0; kx < k; kx++) {
        if (ky == 0 && kx == 0)
          continue;
        int32_t base = first + (ky * w + kx) * c;
        float v[V];
        load_bn_v<V, BN>(v, x + base, scale, shift, bn.relu);
        for (int j = 0; j < V; j++) {
          if (v[j] > best[j]) {
            best[j] = v[j];
            at[j] = base + j;
          }
        }
      }
    }
    if (bias != NULL) {
      float b[V];
      tdm_k_vec<V>::load(b, bias + q * V);
      for (int j = 0; j < V; j++)
        best[j] = use_relu ? tdm_k_relu_value(best[j] + b[j]) : best[j] + b[j];
    }
    tdm_k_vec<V>::store(y + (size_t)e * V, best);
    tdm_k_vec<V>::store(argmax + (size_t)e * V, at);
  }
}

template <bool BN>
static cudaError_t
maxpool_forward_launch(float *y, int32_t *argmax, const float *x, const float *bias, bool relu,
                       int n, int h, int w, int c, int k, BnGather bn, cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  int ph = h / k, pw = w / k;
  if (n <= 0 || ph <= 0 || pw <= 0 || c <= 0)
    return cudaSuccess;
  size_t total = (size_t)n * ph * pw * c;
  bool vec = c % 4 == 0 && tdm_k_aligned16(y) && tdm_k_aligned16(argmax) &&
             tdm_k_aligned16(x) && tdm_k_aligned16(bias);
  if (vec)
    maxpool_forward_kernel<4, BN><<<tdm_k_blocks(total / 4, TDM_K_THREADS), TDM_K_THREADS, 0,
                                    stream>>>(y, argmax, x, bias, relu, (uint32_t)(total / 4),
                                              h, w, c, k, ph, pw, bn);
  else
    maxpool_forward_kernel<1, BN><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                    stream>>>(y, argmax, x, bias, relu, (uint32_t)total, h, w,
                                              c, k, ph, pw, bn);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_maxpool_forward(float *y, int32_t *argmax, const float *x, const float *bias, bool relu,
                      int n, int h, int w, int c, int k, cudaStream_t stream)
{
  return maxpool_forward_launch<false>(y, argmax, x, bias, relu, n, h, w, c, k, BnGather{},
                                       stream);
}

extern "C" cudaError_t
tdm_k_maxpool_forward_bn(float *y, int32_t *argmax, const float *x, const float *mean,
                         const float *invstd, const float *gamma, const float *beta,
                         bool relu, int n, int h, int w, int c, int k, cudaStream_t stream)
{
  BnGather bn = {mean, invstd, gamma, beta, relu};
  return maxpool_forward_launch<true>(y, argmax, x, NULL, false, n, h, w, c, k, bn, stream);
}

/* Windows do not overlap (stride = k), so each input pixel has at most one window:
 * it receives that window's gradient if it was the chosen one and the pool's output
 * y is positive (when y is given: the ReLU folded in), else zero. Pixels past the
 * last whole window (h or w not a multiple of k) get zero. One thread per dx
 * element: any shape. */
template <typename I>
__global__ void
maxpool_backward_kernel(float *dx, const float *dy, const int32_t *argmax, const float *y,
                        I total, int h, int w, int c, int k, int ph, int pw)
{
  for (I e = tdm_k_grid_start<I>(); e < total; e += tdm_k_grid_stride<I>()) {
    TdmKNhwc<I> at = tdm_k_nhwc(e, c, w, h);
    int oy = at.y / k, ox = at.x / k;
    float g = 0.0f;
    if (oy < ph && ox < pw) {
      I out = ((at.img * ph + oy) * pw + ox) * c + at.ch;
      if ((I)argmax[out] == e && (y == NULL || y[out] > 0.0f))
        g = dy[out];
    }
    dx[e] = g;
  }
}

/* The same when the windows tile x exactly and c % 4 == 0: one thread per four
 * channels of an output pixel writes its whole window, so dy, argmax and y are read
 * once and every store is a float4. Block (bx, by): x walks the channel vectors, y the
 * output pixels, so each thread keeps its channels and can sum their gradient for
 * the folded bias: the block's sums go to partials[blockIdx.x · c + channel]. */
__global__ void
maxpool_backward_window_kernel(float *dx, float *partials, const float *dy,
                               const int32_t *argmax, const float *y, int pixels, int h,
                               int w, int c, int k, int ph, int pw)
{
  __shared__ float sums[TDM_K_THREADS * 4];
  int cv = c / 4;
  int q = blockIdx.y * blockDim.x + threadIdx.x;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (q < cv) {
    for (int p = blockIdx.x * blockDim.y + threadIdx.y; p < pixels;
         p += gridDim.x * blockDim.y) {
      int ox = p % pw;
      int line = p / pw;
      int oy = line % ph;
      int img = line / ph;
      size_t e = (size_t)p * cv + q;
      int32_t first = ((img * h + oy * k) * w + ox * k) * c + q * 4;
      float g[4];
      int32_t at[4];
      tdm_k_vec<4>::load(g, dy + e * 4);
      tdm_k_vec<4>::load(at, argmax + e * 4);
      if (y != NULL) {
        float pooled[4];
        tdm_k_vec<4>::load(pooled, y + e * 4);
        for (int j = 0; j < 4; j++)
          g[j] = pooled[j] > 0.0f ? g[j] : 0.0f;
      }
      for (int ky = 0; ky < k; ky++) {
        for (int kx = 0; kx < k; kx++) {
          int32_t base = first + (ky * w + kx) * c;
          float out[4];
          for (int j = 0; j < 4; j++) {
            out[j] = at[j] == base + j ? g[j] : 0.0f;
            acc[j] += out[j];
          }
          tdm_k_vec<4>::store(dx + base, out);
        }
      }
    }
  }
  if (partials == NULL)
    return;
  int tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (int j = 0; j < 4; j++)
    sums[tid * 4 + j] = acc[j];
  __syncthreads();
  if (threadIdx.y == 0 && q < cv) {
    for (int j = 0; j < 4; j++) {
      float t = 0.0f;
      for (int r = 0; r < (int)blockDim.y; r++)
        t += sums[(r * blockDim.x + threadIdx.x) * 4 + j];
      partials[(size_t)blockIdx.x * c + q * 4 + j] = t;
    }
  }
}

extern "C" cudaError_t
tdm_k_maxpool_backward(float *dx, float *dbias, const float *dy, const int32_t *argmax,
                       const float *y, int n, int h, int w, int c, int k, float *partials,
                       size_t partials_count, cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  size_t total = (size_t)(n > 0 ? n : 0) * (h > 0 ? h : 0) * (w > 0 ? w : 0) * (c > 0 ? c : 0);
  if (total == 0)
    return dbias != NULL && c > 0 ? cudaMemsetAsync(dbias, 0, (size_t)c * sizeof(float), stream)
                                  : cudaSuccess;
  int ph = h / k, pw = w / k;
  size_t pixels = (size_t)n * ph * pw;
  /* Enough blocks to fill the GPU, few enough that their bias sums are cheap to add. */
  size_t parts = dbias != NULL ? (partials != NULL ? partials_count / (size_t)c : 0) : 256;
  if (parts > 256)
    parts = 256;
  if (h % k == 0 && w % k == 0 && c % 4 == 0 && total <= INT32_MAX && parts >= 1 &&
      tdm_k_aligned16(dx) && tdm_k_aligned16(dy) && tdm_k_aligned16(argmax) &&
      tdm_k_aligned16(y)) {
    int cv = c / 4;
    unsigned bx = cv < 32 ? (unsigned)cv : 32;
    unsigned by = TDM_K_THREADS / bx;
    size_t blocks = (pixels + by - 1) / by;
    if (blocks > parts)
      blocks = parts;
    if (blocks < 1)
      blocks = 1;
    dim3 grid((unsigned)blocks, (unsigned)((cv + bx - 1) / bx));
    maxpool_backward_window_kernel<<<grid, dim3(bx, by), 0, stream>>>(
        dx, dbias != NULL ? partials : NULL, dy, argmax, y, (int)pixels, h, w, c, k, ph, pw);
    cudaError_t err = tdm_k_launched();
    if (err != cudaSuccess || dbias == NULL)
      return err;
    return tdm_k_sum_parts(dbias, c, partials, (int)blocks, 1, c, 1.0f, 0.0f, stream);
  }
  if (total <= UINT32_MAX)
    maxpool_backward_kernel<uint32_t>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx, dy, argmax, y, (uint32_t)total, h, w, c, k, ph, pw);
  else
    maxpool_backward_kernel<size_t>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx, dy, argmax, y, total, h, w, c, k, ph, pw);
  cudaError_t err = tdm_k_launched();
  if (err != cudaSuccess || dbias == NULL)
    return err;
  /* Other shapes: the bias gradient as any bias's, from dx. */
  return tdm_k_bias_backward(dbias, dx, (int)(total / c), c, 1, partials, partials_count,
                             stream);
}

/* Average pooling, window = stride = k: one thread per output value, channels
 * fastest; the window summed row by row as the CPU does. */
__global__ void
avgpool_forward_kernel(float *y, const float *x, size_t total, int h, int w, int c, int k,
                       int oh, int ow)
{
  float inv = 1.0f / (float)(k * k);
  for (size_t e = tdm_k_grid_start<size_t>(); e < total; e += tdm_k_grid_stride<size_t>()) {
    TdmKNhwc<size_t> o = tdm_k_nhwc(e, c, ow, oh);
    float s = 0.0f;
    for (int ky = 0; ky < k; ky++)
      for (int kx = 0; kx < k; kx++)
        s += x[((o.img * h + o.y * k + ky) * w + o.x * k + kx) * c + o.ch];
    y[e] = s * inv;
  }
}

__global__ void
avgpool_backward_kernel(float *dx, const float *dy, size_t total, int h, int w, int c, int k,
                        int oh, int ow)
{
  float inv = 1.0f / (float)(k * k);
  for (size_t e = tdm_k_grid_start<size_t>(); e < total; e += tdm_k_grid_stride<size_t>()) {
    TdmKNhwc<size_t> at = tdm_k_nhwc(e, c, w, h);
    int oy = at.y / k, ox = at.x / k;
    dx[e] = oy < oh && ox < ow ? dy[((at.img * oh + oy) * ow + ox) * c + at.ch] * inv : 0.0f;
  }
}

extern "C" cudaError_t
tdm_k_avgpool_forward(float *y, const float *x, int n, int h, int w, int c, int k,
                      cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  int oh = h / k, ow = w / k;
  if (n <= 0 || oh <= 0 || ow <= 0 || c <= 0)
    return cudaSuccess;
  size_t total = (size_t)n * oh * ow * c;
  avgpool_forward_kernel<<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      y, x, total, h, w, c, k, oh, ow);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_avgpool_backward(float *dx, const float *dy, int n, int h, int w, int c, int k,
                       cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  size_t total = (size_t)(n > 0 ? n : 0) * (h > 0 ? h : 0) * (w > 0 ? w : 0) * (c > 0 ? c : 0);
  if (total == 0)
    return cudaSuccess;
  avgpool_backward_kernel<<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      dx, dy, total, h, w, c, k, h / k, w / k);
  return tdm_k_launched();
}

/* Global pooling: one thread per (sample, channel), walking the pixels in order
 * (consecutive threads read consecutive channels of a pixel). The maximum keeps the
 * first of equal values, as the CPU's strict comparison does. */
template <bool MAX>
__global__ void
global_pool_forward_kernel(float *y, int32_t *argmax, const float *x, size_t total,
                           int pixels, int c)
{
  for (size_t e = tdm_k_grid_start<size_t>(); e < total; e += tdm_k_grid_stride<size_t>()) {
    size_t img = e / (size_t)c;
    int ch = (int)(e % (size_t)c);
    size_t base = img * pixels * c + ch;
    float acc = x[base];
    size_t at = base;
    for (int p = 1; p < pixels; p++) {
      float v = x[base + (size_t)p * c];
      if (MAX) {
        if (v > acc) {
          acc = v;
          at = base + (size_t)p * c;
        }
      } else {
        acc += v;
      }
    }
    if (MAX) {
      y[e] = acc;
      argmax[e] = (int32_t)at;
    } else {
      y[e] = acc * (1.0f / (float)pixels);
    }
  }
}

/* Backward of both: a gather over dx, each element getting dy[its sample, channel]
 * divided by the pixel count (average) or where it was the chosen input (max). */
template <bool MAX>
__global__ void
global_pool_backward_kernel(float *dx, const float *dy, const int32_t *argmax, size_t total,
                            int pixels, int c)
{
  float inv = 1.0f / (float)pixels;
  for (size_t e = tdm_k_grid_start<size_t>(); e < total; e += tdm_k_grid_stride<size_t>()) {
    size_t out = (e / ((size_t)pixels * c)) * c + e % (size_t)c;
    if (MAX)
      dx[e] = (size_t)argmax[out] == e ? dy[out] : 0.0f;
    else
      dx[e] = dy[out] * inv;
  }
}

extern "C" cudaError_t
tdm_k_global_avgpool_forward(float *y, const float *x, int n, int pixels, int c,
                             cudaStream_t stream)
{
  size_t total = (size_t)(n > 0 ? n : 0) * (c > 0 ? c : 0);
  if (total == 0 || pixels <= 0)
    return pixels <= 0 ? cudaErrorInvalidValue : cudaSuccess;
  global_pool_forward_kernel<false><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                      stream>>>(y, NULL, x, total, pixels, c);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_global_avgpool_backward(float *dx, const float *dy, int n, int pixels, int c,
                              cudaStream_t stream)
{
  size_t total = (size_t)(n > 0 ? n : 0) * (pixels > 0 ? pixels : 0) * (c > 0 ? c : 0);
  if (total == 0)
    return cudaSuccess;
  global_pool_backward_kernel<false><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                       stream>>>(dx, dy, NULL, total, pixels, c);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_global_maxpool_forward(float *y, int32_t *argmax, const float *x, int n, int pixels,
                             int c, cudaStream_t stream)
{
  size_t total = (size_t)(n > 0 ? n : 0) * (c > 0 ? c : 0);
  if (total == 0 || pixels <= 0)
    return pixels <= 0 ? cudaErrorInvalidValue : cudaSuccess;
  global_pool_forward_kernel<true><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                     stream>>>(y, argmax, x, total, pixels, c);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_global_maxpool_backward(float *dx, const float *dy, const int32_t *argmax, int n,
                              int pixels, int c, cudaStream_t stream)
{
  size_t total = (size_t)(n > 0 ? n : 0) * (pixels > 0 ? pixels : 0) * (c > 0 ? c : 0);
  if (total == 0)
    return cudaSuccess;
  global_pool_backward_kernel<true><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                      stream>>>(dx, dy, argmax, total, pixels, c);
  return tdm_k_launched();
}
