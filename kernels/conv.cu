/* conv.cu — the data movement around convolution and pooling: im2col, col2im, and
 * max pooling forward and backward, all on NHWC activations.
 *
 * The convolution's arithmetic is a cuBLAS GEMM in the backend; these kernels only
 * rearrange. Columns are ordered (ky, kx, channel), so every tap is a run of c
 * contiguous floats in x and in col: with c % 4 == 0 each thread moves float4s and a
 * warp's accesses are whole lines. col2im and the pooling gradient are gathers (each
 * output element sums what lands on it), never scatters with atomics, so results are
 * deterministic. For --precision bf16, im2col also writes bfloat16 columns (rounded to
 * nearest even) and col2im also reads them (summing in float32). im2col and the max
 * pool can apply a training batch normalization (and its ReLU) to each value they
 * read, for a layer that is the normalized tensor's only reader: it is never written.
 */
#include "tdm-kernels.h"
#include "common.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>

/* Index arithmetic dominates these kernels (they move few bytes per division), so
 * each comes in two widths: 32-bit indices whenever the tensor allows, which is
 * nearly always, and 64-bit ones for the rest. */
template <typename I>
__device__ __forceinline__ I
grid_start()
{
  return (I)blockIdx.x * blockDim.x + threadIdx.x;
}

template <typename I>
__device__ __forceinline__ I
grid_stride()
{
  return (I)gridDim.x * blockDim.x;
}

/* V consecutive floats (V = 4: one 16-byte access; the caller checks alignment). */
template <int V>
__device__ __forceinline__ void
load_v(float *v, const float *p)
{
  if (V == 4) {
    float4 t = *(const float4 *)p;
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
    for (int j = 0; j < V; j++)
      v[j] = p[j];
  }
}

template <int V>
__device__ __forceinline__ void
store_v(float *p, const float *v)
{
  if (V == 4)
    *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
  else
    for (int j = 0; j < V; j++)
      p[j] = v[j];
}

/* V consecutive bfloat16 values as floats (V = 4: one 8-byte access). */
template <int V>
__device__ __forceinline__ void
load_v(float *v, const uint16_t *p)
{
  uint16_t h[4];
  if (V == 4) {
    uint2 t = *(const uint2 *)p;
    h[0] = (uint16_t)t.x;
    h[1] = (uint16_t)(t.x >> 16);
    h[2] = (uint16_t)t.y;
    h[3] = (uint16_t)(t.y >> 16);
  } else {
    for (int j = 0; j < V; j++)
      h[j] = p[j];
  }
  for (int j = 0; j < V; j++)
    v[j] = __bfloat162float(__ushort_as_bfloat16(h[j]));
}

/* The same into bfloat16, rounded to nearest even (V = 4: one 8-byte access). */
template <int V>
__device__ __forceinline__ void
store_v(uint16_t *p, const float *v)
{
  if (V == 4)
    *(uint2 *)p = tdm_k_bf16x4_bits(v[0], v[1], v[2], v[3]);
  else
    for (int j = 0; j < V; j++)
      p[j] = tdm_k_bf16_bits(v[j]);
}

__device__ __forceinline__ void
store_one(float *p, float v)
{
  *p = v;
}

__device__ __forceinline__ void
store_one(uint16_t *p, float v)
{
  *p = tdm_k_bf16_bits(v);
}

template <int V>
__device__ __forceinline__ void
load_iv(int32_t *v, const int32_t *p)
{
  if (V == 4) {
    int4 t = *(const int4 *)p;
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
    for (int j = 0; j < V; j++)
      v[j] = p[j];
  }
}

template <int V>
__device__ __forceinline__ void
store_iv(int32_t *p, const int32_t *v)
{
  if (V == 4)
    *(int4 *)p = make_int4(v[0], v[1], v[2], v[3]);
  else
    for (int j = 0; j < V; j++)
      p[j] = v[j];
}

/* As the CPU reference writes it: NaN passes through. */
__device__ __forceinline__ float
relu(float v)
{
  return v < 0.0f ? 0.0f : v;
}

/* A batch normalization that im2col or the pool applies to each value it reads (BN):
 * the training forward's statistics and parameters, and its fused ReLU. Padding
 * stays 0, as it would around the normalized tensor. */
struct BnGather {
  const float *mean, *invstd, *gamma, *beta;
  bool relu;
};

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

template <int V, typename T, bool BN>
__global__ void
im2col_table_kernel(T *col, const float *x, int rows, int h, int w, int c, int kh,
                    int kw, int pad, int stride, int oh, int ow, BnGather bn)
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
  for (int row = blockIdx.x * blockDim.y + threadIdx.y; row < rows;
       row += gridDim.x * blockDim.y) {
    int ox = row % ow;
    int t = row / ow;
    int oy = t % oh;
    int img = t / oh;
    const float *xi = x + (size_t)img * h * w * c;
    T *out = col + (size_t)row * kvecs * V;
    for (int k = threadIdx.x; k < kvecs; k += blockDim.x) {
      int tap = taps[k];
      int iy = oy * stride + (tap >> 24) - pad;
      int ix = ox * stride + ((tap >> 16) & 0xff) - pad;
      float v[V];
      if ((unsigned)iy < (unsigned)h && (unsigned)ix < (unsigned)w) {
        int ch = (tap & 0xffff) * V;
        load_v<V>(v, xi + (iy * w + ix) * c + ch);
        if (BN) {
          float sc[V], sh[V];
          load_v<V>(sc, scale + ch);
          load_v<V>(sh, shift + ch);
          for (int j = 0; j < V; j++)
            v[j] = bn_affine_output(v[j], sc[j], sh[j], bn.relu);
        }
      } else
        for (int j = 0; j < V; j++)
          v[j] = 0.0f;
      store_v<V>(out + k * V, v);
    }
  }
}

/* im2col for any shape: one thread per col entry. */
template <typename I, typename T, bool BN>
__global__ void
im2col_kernel(T *col, const float *x, I total, int h, int w, int c, int kh, int kw,
              int pad, int stride, int oh, int ow, BnGather bn)
{
  I kcols = (I)c * kh * kw;
  for (I e = grid_start<I>(); e < total; e += grid_stride<I>()) {
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
      v = x[(((size_t)img * h + iy) * w + ix) * c + ch];
      if (BN)
        v = bn_train_output(v, ch, bn.mean, bn.invstd, bn.gamma, bn.beta, bn.relu);
    }
    store_one(col + e, v);
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
 * operands for the GEMMs that read them), of x or (BN) of x normalized. */
template <typename T, bool BN>
static cudaError_t
im2col_launch(T *col, const float *x, int n, int h, int w, int c, int kh, int kw, int pad,
              int stride, BnGather bn, cudaStream_t stream)
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
  bool vec = c % 4 == 0 && ((uintptr_t)col & (4 * sizeof(T) - 1)) == 0 && tdm_k_aligned16(x);
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
      im2col_table_kernel<4, T, BN><<<(unsigned)blocks, block, shared, stream>>>(
          col, x, (int)rows, h, w, c, kh, kw, pad, stride, oh, ow, bn);
    else
      im2col_table_kernel<1, T, BN><<<(unsigned)blocks, block, shared, stream>>>(
          col, x, (int)rows, h, w, c, kh, kw, pad, stride, oh, ow, bn);
  } else if (total <= UINT32_MAX) {
    im2col_kernel<uint32_t, T, BN><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                     stream>>>(col, x, (uint32_t)total, h, w, c, kh, kw, pad,
                                               stride, oh, ow, bn);
  } else {
    im2col_kernel<size_t, T, BN><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                   stream>>>(col, x, total, h, w, c, kh, kw, pad, stride, oh,
                                             ow, bn);
  }
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_im2col(float *col, const float *x, int n, int h, int w, int c, int kh, int kw, int pad,
             int stride, cudaStream_t stream)
{
  return im2col_launch<float, false>(col, x, n, h, w, c, kh, kw, pad, stride, BnGather{},
                                     stream);
}

extern "C" cudaError_t
tdm_k_im2col_bf16(uint16_t *col, const float *x, int n, int h, int w, int c, int kh, int kw,
                  int pad, int stride, cudaStream_t stream)
{
  return im2col_launch<uint16_t, false>(col, x, n, h, w, c, kh, kw, pad, stride, BnGather{},
                                        stream);
}

extern "C" cudaError_t
tdm_k_im2col_bf16_bn(uint16_t *col, const float *x, const float *mean, const float *invstd,
                     const float *gamma, const float *beta, bool relu, int n, int h, int w,
                     int c, int kh, int kw, int pad, int stride, cudaStream_t stream)
{
  BnGather bn = {mean, invstd, gamma, beta, relu};
  return im2col_launch<uint16_t, true>(col, x, n, h, w, c, kh, kw, pad, stride, bn, stream);
}

/* dx[img, iy, ix, ch] = Σ over (ky, kx) of col[(img, oy, ox), (ky, kx, ch)] for the
 * output pixels that read it, oy · stride = iy − ky + pad (and ox likewise), taps in
 * the CPU's order. One
 * thread per V channels of a dx pixel: the warp's reads of one tap are runs of c
 * contiguous floats. */
template <typename I, int V, typename T>
__global__ void
col2im_kernel(float *dx, const T *col, I total, int h, int w, int c, int kh, int kw,
              int pad, int stride, int oh, int ow)
{
  int cv = c / V;
  size_t kcols = (size_t)c * kh * kw;
  for (I e = grid_start<I>(); e < total; e += grid_stride<I>()) {
    int q = (int)(e % (I)cv);
    I pixel = e / (I)cv;
    int ix = (int)(pixel % (I)w);
    I line = pixel / (I)w;
    int iy = (int)(line % (I)h);
    size_t img = (size_t)(line / (I)h);
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
        load_v<V>(v, col + row * kcols + (size_t)(ky * kw + kx) * c + (size_t)q * V);
        for (int j = 0; j < V; j++)
          s[j] += v[j];
      }
    }
    store_v<V>(dx + (size_t)e * V, s);
  }
}

template <int V, typename T>
static void
launch_col2im(float *dx, const T *col, size_t total, int h, int w, int c, int kh, int kw,
              int pad, int stride, int oh, int ow, cudaStream_t stream)
{
  if (total <= UINT32_MAX)
    col2im_kernel<uint32_t, V, T><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                    stream>>>(dx, col, (uint32_t)total, h, w, c, kh, kw, pad,
                                              stride, oh, ow);
  else
    col2im_kernel<size_t, V, T><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                  stream>>>(dx, col, total, h, w, c, kh, kw, pad, stride, oh,
                                            ow);
}

/* From float32 columns (T = float) or bfloat16 ones (T = uint16_t, summed as float32
 * in the same order). */
template <typename T>
static cudaError_t
col2im_launch(float *dx, const T *col, int n, int h, int w, int c, int kh, int kw, int pad,
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
    return cudaMemsetAsync(dx, 0, total * sizeof(float), stream);
  if (c % 4 == 0 && tdm_k_aligned16(dx) && ((uintptr_t)col & (4 * sizeof(T) - 1)) == 0)
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
tdm_k_col2im_bf16(float *dx, const uint16_t *col, int n, int h, int w, int c, int kh, int kw,
                  int pad, int stride, cudaStream_t stream)
{
  return col2im_launch(dx, col, n, h, w, c, kh, kw, pad, stride, stream);
}

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
  load_v<V>(v, p);
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
  for (uint32_t e = grid_start<uint32_t>(); e < total; e += grid_stride<uint32_t>()) {
    int q = (int)(e % (uint32_t)cv);
    uint32_t pixel = e / (uint32_t)cv;
    int ox = (int)(pixel % (uint32_t)pw);
    uint32_t line = pixel / (uint32_t)pw;
    int oy = (int)(line % (uint32_t)ph);
    int img = (int)(line / (uint32_t)ph);
    int32_t first = ((img * h + oy * k) * w + ox * k) * c + q * V;
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
      load_v<V>(b, bias + q * V);
      for (int j = 0; j < V; j++)
        best[j] = use_relu ? relu(best[j] + b[j]) : best[j] + b[j];
    }
    store_v<V>(y + (size_t)e * V, best);
    store_iv<V>(argmax + (size_t)e * V, at);
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
  for (I e = grid_start<I>(); e < total; e += grid_stride<I>()) {
    int ch = (int)(e % (I)c);
    I pixel = e / (I)c;
    int ix = (int)(pixel % (I)w);
    I line = pixel / (I)w;
    int iy = (int)(line % (I)h);
    I img = line / (I)h;
    int oy = iy / k, ox = ix / k;
    float g = 0.0f;
    if (oy < ph && ox < pw) {
      I out = ((img * ph + oy) * pw + ox) * c + ch;
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
      load_v<4>(g, dy + e * 4);
      load_iv<4>(at, argmax + e * 4);
      if (y != NULL) {
        float pooled[4];
        load_v<4>(pooled, y + e * 4);
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
          store_v<4>(dx + base, out);
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
  load_v<V>(b, bias + q * V);
  for (int j = 0; j < V; j++)
    best[j] = use_relu ? relu(best[j] + b[j]) : best[j] + b[j];
  store_v<V>(y + (size_t)e * V, best);
  store_iv<V>(argmax + (size_t)e * V, at);
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
  for (uint32_t e = grid_start<uint32_t>(); e < total; e += grid_stride<uint32_t>()) {
    int q = (int)(e % (uint32_t)ov);
    uint32_t pixel = e / (uint32_t)ov;
    int px = (int)(pixel % (uint32_t)pw);
    uint32_t line = pixel / (uint32_t)pw;
    int py = (int)(line % (uint32_t)ph);
    int img = (int)(line / (uint32_t)ph);
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
          load_v<V>(wv, sw + t * out + q * V);
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
  for (uint32_t e = grid_start<uint32_t>(); e < total; e += grid_stride<uint32_t>()) {
    int q = (int)(e % (uint32_t)ov);
    uint32_t pixel = e / (uint32_t)ov;
    int px = (int)(pixel % (uint32_t)pw);
    uint32_t line = pixel / (uint32_t)pw;
    int py = (int)(line % (uint32_t)ph);
    int img = (int)(line / (uint32_t)ph);
    float patch[16];
    conv_pool3_patch(patch, x + (size_t)img * h * w, h, w, py * 2 - pad, px * 2 - pad);
    float wv[9][V];
#pragma unroll
    for (int t = 0; t < 9; t++)
      load_v<V>(wv[t], sw + t * out + q * V);
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
