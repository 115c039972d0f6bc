/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-pool.cu — a first layer's small convolution, its bias and ReLU, and the max
 * pool after it, in one pass forward and one backward, with no column matrix and no
 * unpooled activation in memory. Backward sums are written as per-block partials and
 * summed in a fixed order (deterministic, no atomics). Not here: general convolutions
 * (conv-im2col.cu + cuBLAS) and the plain pool (pool.cu).
 */
#include "tdm-kernels.h"
#include "common.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>

/* conv_pool: a first layer's small convolution, its bias and ReLU, and the max pool
 * after it, as one pass forward and one backward (the contract in tdm-backend.h).
 * Each tap t of the kh·kw·c comes from a table of (ky, kx, channel) in shared memory,
 * in the order of the weights' rows. */
__device__ __forceinline__ void
conv_pool_taps(int *table, int taps, int c, int kw)
{
  for (int t = threadIdx.y * blockDim.x + threadIdx.x; t < taps;
       t += blockDim.x * blockDim.y) {
    int tap = t / c;
    table[t] = ((tap / kw) << 20) | ((tap % kw) << 10) | (t % c);
  }
}

/* Position sums s into a window's max so far (first on ties: only a strictly greater
 * value takes), with where they came from. */
template <int V>
__device__ __forceinline__ void
conv_pool_take(float *best, int32_t *at, const float *s, int32_t index, bool first)
{
  for (int j = 0; j < V; j++) {
    if (first || s[j] > best[j]) {
      best[j] = s[j];
      at[j] = index + j;
    }
  }
}

/* A window's max, with the bias and ReLU of maxpool_forward, and its argmax, stored as
 * element e of V channels. */
template <int V>
__device__ __forceinline__ void
conv_pool_store(float *y, int32_t *argmax, uint32_t e, float *best, const int32_t *at,
                const float *bias, int q, bool use_relu)
{
  float b[V];
  tdm_k_vec<V>::load(b, bias + q * V);
  for (int j = 0; j < V; j++)
    best[j] = use_relu ? tdm_k_relu_value(best[j] + b[j]) : best[j] + b[j];
  tdm_k_vec<V>::store(y + (size_t)e * V, best);
  tdm_k_vec<V>::store(argmax + (size_t)e * V, at);
}

/* The backward kernels' block sums: the 8 rows of sums (KT weight columns, the bias
 * last) added up by row 0 and written to partials, [block][out][taps] for the
 * weights, then [block][out] for the bias after all blocks' weights. */
template <int KT>
__device__ __forceinline__ void
conv_pool_write_partials(float *partials, float (*sums)[32][KT + 1], int taps, int out, int o)
{
  if (threadIdx.y != 0 || o >= out)
    return;
  size_t weights = (size_t)gridDim.x * out * taps;
  for (int t = 0; t <= KT; t++) {
    if (t < taps || t == KT) {
      float s = 0.0f;
      for (int r = 0; r < 8; r++)
        s += sums[r][threadIdx.x][t];
      if (t == KT)
        partials[weights + (size_t)blockIdx.x * out + o] = s;
      else
        partials[((size_t)blockIdx.x * out + o) * taps + t] = s;
    }
  }
}

/* One thread per V output channels of a pooled pixel: the conv at each position of
 * its window, weights from shared memory transposed to [tap][out] so that the V
 * channels are one load, taps summed in order as the CPU sums them; then the max
 * (first on ties), bias and ReLU of maxpool_forward. */
template <int V>
__global__ void
conv_pool_forward_kernel(float *y, int32_t *argmax, const float *x, const float *wt,
                         const float *bias, bool use_relu, uint32_t total, int h, int w, int c,
                         int out, int kh, int kw, int pad, int oh, int ow, int pk, int ph,
                         int pw)
{
  extern __shared__ float4 shared4[];
  float *sw = (float *)shared4;
  __shared__ int table[TDM_K_CONV_POOL_TAPS];
  int taps = kh * kw * c;
  for (int i = threadIdx.x; i < taps * out; i += blockDim.x)
    sw[(i % taps) * out + i / taps] = wt[i];
  conv_pool_taps(table, taps, c, kw);
  __syncthreads();

  int ov = out / V;
  for (uint32_t e = tdm_k_grid_start<uint32_t>(); e < total; e += tdm_k_grid_stride<uint32_t>()) {
    TdmKNhwc<uint32_t> o = tdm_k_nhwc(e, ov, pw, ph);
    int q = o.ch, px = o.x, py = o.y, img = (int)o.img;
    const float *xi = x + (size_t)img * h * w * c;
    float best[V] = {};
    int32_t at[V] = {};
    for (int wy = 0; wy < pk; wy++) {
      for (int wx = 0; wx < pk; wx++) {
        int oy = py * pk + wy, ox = px * pk + wx;
        float s[V];
        for (int j = 0; j < V; j++)
          s[j] = 0.0f;
        for (int t = 0; t < taps; t++) {
          int tb = table[t];
          int iy = oy + (tb >> 20) - pad;
          int ix = ox + ((tb >> 10) & 1023) - pad;
          if ((unsigned)iy >= (unsigned)h || (unsigned)ix >= (unsigned)w)
            continue;
          float xv = xi[(iy * w + ix) * c + (tb & 1023)];
          float wv[V];
          tdm_k_vec<V>::load(wv, sw + t * out + q * V);
          for (int j = 0; j < V; j++)
            s[j] += xv * wv[j];
        }
        conv_pool_take<V>(best, at, s, ((img * oh + oy) * ow + ox) * out + q * V,
                          wy == 0 && wx == 0);
      }
    }
    conv_pool_store<V>(y, argmax, e, best, at, bias, q, use_relu);
  }
}

/* Block (32, 8): x walks output channels, y pooled pixels. Each thread sums, for its
 * channel, g · x over the taps of the chosen position into KT registers (KT >= taps,
 * a constant so that the array stays in registers) and g for the bias; the block's
 * sums go to partials: [block][out][taps] for the weights, then [block][out] for the
 * bias, after all blocks' weights. */
template <int KT>
__global__ void
conv_pool_backward_kernel(float *partials, const float *dy, const int32_t *argmax,
                          const float *y, const float *x, bool use_relu, int pixels, int h,
                          int w, int c, int out, int kh, int kw, int pad, int oh, int ow)
{
  __shared__ int table[TDM_K_CONV_POOL_TAPS];
  __shared__ float sums[8][32][KT + 1];
  int taps = kh * kw * c;
  conv_pool_taps(table, taps, c, kw);
  __syncthreads();
  int o = blockIdx.y * 32 + threadIdx.x;
  float acc[KT + 1];
  for (int t = 0; t <= KT; t++)
    acc[t] = 0.0f;
  if (o < out) {
    for (int p = blockIdx.x * 8 + threadIdx.y; p < pixels; p += gridDim.x * 8) {
      size_t e = (size_t)p * out + o;
      float g = dy[e];
      if (use_relu && !(y[e] > 0.0f))
        continue;
      int32_t index = argmax[e];
      int pixel = index / out;
      int ix = pixel % ow;
      int rest = pixel / ow;
      int iy = rest % oh;
      int img = rest / oh;
      const float *xi = x + (size_t)img * h * w * c;
#pragma unroll
      for (int t = 0; t < KT; t++) {
        if (t < taps) {
          int tb = table[t];
          int yy = iy + (tb >> 20) - pad;
          int xx = ix + ((tb >> 10) & 1023) - pad;
          if ((unsigned)yy < (unsigned)h && (unsigned)xx < (unsigned)w)
            acc[t] += g * xi[(yy * w + xx) * c + (tb & 1023)];
        }
      }
      acc[KT] += g;
    }
  }
  for (int t = 0; t <= KT; t++)
    sums[threadIdx.y][threadIdx.x][t] = acc[t];
  __syncthreads();
  conv_pool_write_partials<KT>(partials, sums, taps, out, o);
}

/* The cnn's first layer, one channel, 3×3 taps, windows of 2: the four positions of
 * a pooled pixel read one 4×4 patch of x, loaded once into registers, so every tap is
 * a register at a constant index: no table, bounds test or address arithmetic per tap
 * (the general kernels spend 90 and 115 µs on a batch of 1024; this is the same sum,
 * the taps in the same order, padding as zero products). */
__device__ __forceinline__ void
conv_pool3_patch(float *patch, const float *xi, int h, int w, int y0, int x0)
{
#pragma unroll
  for (int a = 0; a < 4; a++) {
#pragma unroll
    for (int c = 0; c < 4; c++) {
      int yy = y0 + a, xx = x0 + c;
      patch[a * 4 + c] =
          (unsigned)yy < (unsigned)h && (unsigned)xx < (unsigned)w ? xi[yy * w + xx] : 0.0f;
    }
  }
}

template <int V>
__global__ void
conv_pool3_forward_kernel(float *y, int32_t *argmax, const float *x, const float *wt,
                          const float *bias, bool use_relu, uint32_t total, int h, int w,
                          int out, int pad, int oh, int ow, int ph, int pw)
{
  extern __shared__ float4 shared4[];
  float *sw = (float *)shared4;
  for (int i = threadIdx.x; i < 9 * out; i += blockDim.x)
    sw[(i % 9) * out + i / 9] = wt[i];
  __syncthreads();

  int ov = out / V;
  for (uint32_t e = tdm_k_grid_start<uint32_t>(); e < total; e += tdm_k_grid_stride<uint32_t>()) {
    TdmKNhwc<uint32_t> o = tdm_k_nhwc(e, ov, pw, ph);
    int q = o.ch, px = o.x, py = o.y, img = (int)o.img;
    float patch[16];
    conv_pool3_patch(patch, x + (size_t)img * h * w, h, w, py * 2 - pad, px * 2 - pad);
    float wv[9][V];
#pragma unroll
    for (int t = 0; t < 9; t++)
      tdm_k_vec<V>::load(wv[t], sw + t * out + q * V);
    float best[V] = {};
    int32_t at[V] = {};
#pragma unroll
    for (int pos = 0; pos < 4; pos++) {
      const int wy = pos >> 1, wx = pos & 1;
      float s[V] = {};
#pragma unroll
      for (int t = 0; t < 9; t++) {
        float v = patch[(wy + t / 3) * 4 + wx + t % 3];
        for (int j = 0; j < V; j++)
          s[j] += v * wv[t][j];
      }
      int32_t index = ((img * oh + py * 2 + wy) * ow + px * 2 + wx) * out + q * V;
      conv_pool_take<V>(best, at, s, index, pos == 0);
    }
    conv_pool_store<V>(y, argmax, e, best, at, bias, q, use_relu);
  }
}

/* Block (32, 8) as conv_pool_backward_kernel: a warp is one pooled pixel's 32
 * channels, so its patch loads are one broadcast each; the chosen position comes
 * from argmax's offset into the window, the taps from the patch by selects. */
__global__ void
conv_pool3_backward_kernel(float *partials, const float *dy, const int32_t *argmax,
                           const float *y, const float *x, bool use_relu, int pixels, int h,
                           int w, int out, int pad, int oh, int ow, int ph, int pw)
{
  __shared__ float sums[8][32][10];
  int o = blockIdx.y * 32 + threadIdx.x;
  float acc[10];
#pragma unroll
  for (int t = 0; t < 10; t++)
    acc[t] = 0.0f;
  if (o < out) {
    for (int p = blockIdx.x * 8 + threadIdx.y; p < pixels; p += gridDim.x * 8) {
      size_t e = (size_t)p * out + o;
      float g = dy[e];
      if (use_relu && !(y[e] > 0.0f))
        continue;
      int px = p % pw;
      int rest = p / pw;
      int py = rest % ph;
      int img = rest / ph;
      int32_t first = ((img * oh + py * 2) * ow + px * 2) * out + o;
      int32_t d = argmax[e] - first;
      bool down = d >= ow * out, right = d != 0 && d != ow * out;
      float patch[16];
      conv_pool3_patch(patch, x + (size_t)img * h * w, h, w, py * 2 - pad, px * 2 - pad);
#pragma unroll
      for (int t = 0; t < 9; t++) {
        int at = (t / 3) * 4 + t % 3;
        float top = right ? patch[at + 1] : patch[at];
        float bottom = right ? patch[at + 5] : patch[at + 4];
        acc[t] += g * (down ? bottom : top);
      }
      acc[9] += g;
    }
  }
#pragma unroll
  for (int t = 0; t < 10; t++)
    sums[threadIdx.y][threadIdx.x][t] = acc[t];
  __syncthreads();
  conv_pool_write_partials<9>(partials, sums, 9, out, o);
}

static bool
conv_pool_shape(int n, int h, int w, int c, int out, int kh, int kw, int pad, int pk, int *oh,
                int *ow, int *ph, int *pw)
{
  *oh = h + 2 * pad - kh + 1;
  *ow = w + 2 * pad - kw + 1;
  if (pk <= 0 || *oh <= 0 || *ow <= 0)
    return false;
  *ph = *oh / pk;
  *pw = *ow / pk;
  return n > 0 && c > 0 && out > 0 && *ph > 0 && *pw > 0;
}

extern "C" cudaError_t
tdm_k_conv_pool_forward(float *y, int32_t *argmax, const float *x, const float *wt,
                        const float *bias, bool relu, int n, int h, int w, int c, int out,
                        int kh, int kw, int pad, int pk, cudaStream_t stream)
{
  int oh, ow, ph, pw;
  if (!conv_pool_shape(n, h, w, c, out, kh, kw, pad, pk, &oh, &ow, &ph, &pw))
    return cudaSuccess;
  if (kh * kw * c > TDM_K_CONV_POOL_TAPS || out > TDM_K_CONV_POOL_OUT)
    return cudaErrorInvalidValue;
  size_t total = (size_t)n * ph * pw * out;
  size_t shared = (size_t)kh * kw * c * out * sizeof(float);
  bool vec = out % 4 == 0 && tdm_k_aligned16(y) && tdm_k_aligned16(argmax) &&
             tdm_k_aligned16(bias);
  if (c == 1 && kh == 3 && kw == 3 && pk == 2) {
    if (vec)
      conv_pool3_forward_kernel<4><<<tdm_k_blocks(total / 4, TDM_K_THREADS), TDM_K_THREADS,
                                     shared, stream>>>(y, argmax, x, wt, bias, relu,
                                                       (uint32_t)(total / 4), h, w, out, pad,
                                                       oh, ow, ph, pw);
    else
      conv_pool3_forward_kernel<1><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS,
                                     shared, stream>>>(y, argmax, x, wt, bias, relu,
                                                       (uint32_t)total, h, w, out, pad, oh, ow,
                                                       ph, pw);
    return tdm_k_launched();
  }
  if (vec)
    conv_pool_forward_kernel<4><<<tdm_k_blocks(total / 4, TDM_K_THREADS), TDM_K_THREADS,
                                  shared, stream>>>(y, argmax, x, wt, bias, relu,
                                                    (uint32_t)(total / 4), h, w, c, out, kh,
                                                    kw, pad, oh, ow, pk, ph, pw);
  else
    conv_pool_forward_kernel<1><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, shared,
                                  stream>>>(y, argmax, x, wt, bias, relu, (uint32_t)total, h,
                                            w, c, out, kh, kw, pad, oh, ow, pk, ph, pw);
  return tdm_k_launched();
}

template <int KT>
static size_t
launch_conv_pool_backward(float *partials, size_t partials_count, const float *dy,
                          const int32_t *argmax, const float *y, const float *x, bool relu,
                          int pixels, int h, int w, int c, int out, int kh, int kw, int pad,
                          int oh, int ow, int pk, int ph, int pw, cudaStream_t stream)
{
  /* Enough blocks for every multiprocessor a few times over, few enough that their
   * sums are cheap to add, as many as the scratch holds. */
  size_t per_block = (size_t)out * (kh * kw * c + 1);
  size_t blocks = ((size_t)pixels + 7) / 8;
  if (blocks > 512)
    blocks = 512;
  if (blocks > partials_count / per_block)
    blocks = partials_count / per_block;
  if (blocks < 1)
    return 0;
  dim3 grid((unsigned)blocks, (unsigned)((out + 31) / 32));
  if (KT == 9 && c == 1 && kh == 3 && kw == 3 && pk == 2)
    conv_pool3_backward_kernel<<<grid, dim3(32, 8), 0, stream>>>(
        partials, dy, argmax, y, x, relu, pixels, h, w, out, pad, oh, ow, ph, pw);
  else
    conv_pool_backward_kernel<KT><<<grid, dim3(32, 8), 0, stream>>>(
        partials, dy, argmax, y, x, relu, pixels, h, w, c, out, kh, kw, pad, oh, ow);
  return blocks;
}

extern "C" cudaError_t
tdm_k_conv_pool_backward(float *dwt, float *dbias, const float *dy, const int32_t *argmax,
                         const float *y, const float *x, bool relu, int n, int h, int w, int c,
                         int out, int kh, int kw, int pad, int pk, float *partials,
                         size_t partials_count, cudaStream_t stream)
{
  int oh, ow, ph, pw;
  int taps = kh * kw * c;
  if (taps > TDM_K_CONV_POOL_TAPS || out > TDM_K_CONV_POOL_OUT || taps <= 0 || out <= 0)
    return cudaErrorInvalidValue;
  if (!conv_pool_shape(n, h, w, c, out, kh, kw, pad, pk, &oh, &ow, &ph, &pw)) {
    cudaError_t err = cudaMemsetAsync(dwt, 0, (size_t)taps * out * sizeof(float), stream);
    return err != cudaSuccess ? err : cudaMemsetAsync(dbias, 0, out * sizeof(float), stream);
  }
  int pixels = n * ph * pw;
  size_t blocks =
      taps <= 9 ? launch_conv_pool_backward<9>(partials, partials_count, dy, argmax, y, x, relu,
                                               pixels, h, w, c, out, kh, kw, pad, oh, ow, pk,
                                               ph, pw, stream)
                : launch_conv_pool_backward<TDM_K_CONV_POOL_TAPS>(
                      partials, partials_count, dy, argmax, y, x, relu, pixels, h, w, c, out,
                      kh, kw, pad, oh, ow, pk, ph, pw, stream);
  if (blocks == 0)
    return cudaErrorInvalidValue;
  cudaError_t err = tdm_k_launched();
  if (err == cudaSuccess)
    err = tdm_k_sum_parts(dwt, taps, partials, (int)blocks, out, taps, 1.0f, 0.0f, stream);
  if (err == cudaSuccess)
    err = tdm_k_sum_parts(dbias, out, partials + blocks * out * taps, (int)blocks, 1, out,
                          1.0f, 0.0f, stream);
  return err;
}
