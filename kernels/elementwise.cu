/* SPDX-License-Identifier: GPL-3.0-or-later */
/* elementwise.cu — bias add (with the ReLU fused in) and its gradient, ReLU forward
 * and backward, the add and scale that communicators use, the float-to-bfloat16
 * rounding of --precision bf16's stored operands, a residual block's add and ReLU over
 * bf16 tensors (its mask as bits, tdm-relu-bits.h), inverted dropout on the counter RNG,
 * and exact mode's fixed-point addition: each float converted by the rule the CPU uses
 * (tdm-exact-fixed.h) and added into its two int64 limbs, so that a step's chunks are
 * summed on the GPU (integer additions, whose bits depend on no order).
 *
 * All are memory-bound: one pass, 16-byte accesses where every pointer is aligned
 * and the scalar loop otherwise. The bias gradient is a column sum done in two
 * deterministic passes (partials, then their sum) rather than with atomics, so that
 * the same inputs always give the same bits. Not here: anything with a GEMM in it.
 */
#include "tdm-kernels.h"
#include "tdm-counter-rng.h"
#include "tdm-exact-fixed.h"
#include "tdm-relu-bits.h"
#include "common.cuh"

#include <cuda_bf16.h>

__global__ void
bias_forward_kernel(float *y, const float *bias, size_t total, int channels, int inner,
                    bool use_relu)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += stride) {
    int c = (int)((i / (size_t)inner) % (size_t)channels);
    float v = y[i] + bias[c];
    y[i] = use_relu ? tdm_k_relu_value(v) : v;
  }
}

/* inner == 1 and channels % 4 == 0: the common case of NHWC and fully connected
 * layers, four channels at a time. */
__global__ void
bias_forward_vec_kernel(float4 *y, const float4 *bias, size_t total4, int channels4,
                        bool use_relu)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total4; i += stride) {
    float4 b = bias[i % (size_t)channels4];
    float4 v = y[i];
    v.x += b.x;
    v.y += b.y;
    v.z += b.z;
    v.w += b.w;
    if (use_relu) {
      v.x = tdm_k_relu_value(v.x);
      v.y = tdm_k_relu_value(v.y);
      v.z = tdm_k_relu_value(v.z);
      v.w = tdm_k_relu_value(v.w);
    }
    y[i] = v;
  }
}

extern "C" cudaError_t
tdm_k_bias_forward(float *y, const float *bias, int outer, int channels, int inner,
                   bool use_relu, cudaStream_t stream)
{
  size_t total = (size_t)outer * channels * inner;
  if (total == 0)
    return cudaSuccess;
  if (inner == 1 && channels % 4 == 0 && tdm_k_aligned16(y) && tdm_k_aligned16(bias)) {
    size_t total4 = total / 4;
    bias_forward_vec_kernel<<<tdm_k_blocks(total4, TDM_K_THREADS), TDM_K_THREADS, 0,
                              stream>>>((float4 *)y, (const float4 *)bias, total4,
                                        channels / 4, use_relu);
  } else {
    bias_forward_kernel<<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
        y, bias, total, channels, inner, use_relu);
  }
  return tdm_k_launched();
}

/* Bias gradient, inner == 1: dy is [outer × channels]. Block (32, 8): x walks 32
 * adjacent channels (coalesced), y walks rows; blockIdx.y picks every gridDim.y-th
 * group of 8 rows. out[blockIdx.y · channels + c] receives the block's sum. */
#define TDM_BB_ROWS 8
__global__ void
bias_backward_rows_kernel(float *out, const float *dy, int outer, int channels)
{
  __shared__ float sums[TDM_BB_ROWS][33];
  int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < channels) {
    /* Unrolled so that several rows' loads are in flight at once. */
#pragma unroll 4
    for (int r = blockIdx.y * TDM_BB_ROWS + threadIdx.y; r < outer;
         r += gridDim.y * TDM_BB_ROWS)
      s += dy[(size_t)r * channels + c];
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    float t = 0.0f;
    for (int k = 0; k < TDM_BB_ROWS; k++)
      t += sums[k][threadIdx.x];
    out[(size_t)blockIdx.y * channels + c] = t;
  }
}

/* Bias gradient, inner > 1: one block row per channel, the outer × inner elements of
 * that channel shared among gridDim.y blocks. */
__global__ void
bias_backward_inner_kernel(float *out, const float *dy, int outer, int channels, int inner)
{
  __shared__ float sums[TDM_K_THREADS];
  int c = blockIdx.x;
  size_t count = (size_t)outer * inner;
  float s = 0.0f;
  for (size_t e = (size_t)blockIdx.y * blockDim.x + threadIdx.x; e < count;
       e += (size_t)gridDim.y * blockDim.x) {
    size_t o = e / (size_t)inner;
    size_t i = e % (size_t)inner;
    s += dy[(o * channels + c) * inner + i];
  }
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[(size_t)blockIdx.y * channels + c] = sums[0];
}

extern "C" cudaError_t
tdm_k_bias_backward(float *dbias, const float *dy, int outer, int channels, int inner,
                    float *partials, size_t partials_count, cudaStream_t stream)
{
  if (channels <= 0)
    return cudaSuccess;
  if (outer <= 0 || inner <= 0)
    return cudaMemsetAsync(dbias, 0, (size_t)channels * sizeof(float), stream);

  /* Enough parts to fill the GPU with blocks that still each sum a good run of
   * elements (a batch of 1024 rows: 16 parts of 8 lanes, 8 rows a thread, where 4
   * parts left 32 dependent loads a thread); as many as the scratch holds, and at
   * most 1024. */
  size_t elements = (size_t)outer * inner;
  size_t parts = inner == 1 ? elements / 64 : elements / 8192;
  if (parts > 1024)
    parts = 1024;
  if (partials == NULL || parts * (size_t)channels > partials_count)
    parts = partials == NULL ? 1 : partials_count / (size_t)channels;
  if (parts < 1)
    parts = 1;

  float *out = parts == 1 ? dbias : partials;
  if (inner == 1) {
    dim3 block(32, TDM_BB_ROWS);
    dim3 grid((unsigned)((channels + 31) / 32), (unsigned)parts);
    bias_backward_rows_kernel<<<grid, block, 0, stream>>>(out, dy, outer, channels);
  } else {
    dim3 grid((unsigned)channels, (unsigned)parts);
    bias_backward_inner_kernel<<<grid, TDM_K_THREADS, 0, stream>>>(out, dy, outer, channels,
                                                                   inner);
  }
  cudaError_t err = tdm_k_launched();
  if (err != cudaSuccess || parts == 1)
    return err;
  return tdm_k_sum_parts(dbias, channels, partials, (int)parts, 1, channels, 1.0f, 0.0f,
                         stream);
}

/* The simple maps share one shape: a float4 body over n / 4 elements when every
 * pointer is 16-byte aligned, then the scalar tail, both in one launch. */
enum { TDM_OP_RELU, TDM_OP_RELU_BACKWARD, TDM_OP_ADD, TDM_OP_SCALE, TDM_OP_ADD_RELU };

template <int OP>
__device__ __forceinline__ float
map1(float a, float b, float alpha)
{
  switch (OP) {
  case TDM_OP_RELU:
    return tdm_k_relu_value(b);
  case TDM_OP_RELU_BACKWARD: /* a = dy, b = y */
    return b > 0.0f ? a : 0.0f;
  case TDM_OP_ADD:
    return a + b;
  case TDM_OP_ADD_RELU:
    return tdm_k_relu_value(a + b);
  default:
    return a * alpha;
  }
}

/* out[i] = map(a[i], b[i]); a may be out itself; b may be NULL when unused. */
template <int OP>
__global__ void
map_kernel(float *out, const float *a, const float *b, float alpha, size_t n, bool vec)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t start = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t done = 0;
  if (vec) {
    size_t n4 = n / 4;
    for (size_t i = start; i < n4; i += stride) {
      float4 va = a ? ((const float4 *)a)[i] : make_float4(0, 0, 0, 0);
      float4 vb = b ? ((const float4 *)b)[i] : make_float4(0, 0, 0, 0);
      float4 r;
      r.x = map1<OP>(va.x, vb.x, alpha);
      r.y = map1<OP>(va.y, vb.y, alpha);
      r.z = map1<OP>(va.z, vb.z, alpha);
      r.w = map1<OP>(va.w, vb.w, alpha);
      ((float4 *)out)[i] = r;
    }
    done = n4 * 4;
  }
  for (size_t i = done + start; i < n; i += stride)
    out[i] = map1<OP>(a ? a[i] : 0.0f, b ? b[i] : 0.0f, alpha);
}

template <int OP>
static cudaError_t
launch_map(float *out, const float *a, const float *b, float alpha, size_t n,
           cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  bool vec = tdm_k_aligned16(out) && tdm_k_aligned16(a) && tdm_k_aligned16(b);
  size_t work = vec ? (n + 3) / 4 : n;
  map_kernel<OP><<<tdm_k_blocks(work, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      out, a, b, alpha, n, vec);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_relu_forward(float *y, const float *x, size_t n, cudaStream_t stream)
{
  return launch_map<TDM_OP_RELU>(y, NULL, x, 0.0f, n, stream);
}

extern "C" cudaError_t
tdm_k_relu_backward(float *dx, const float *dy, const float *y, size_t n,
                    cudaStream_t stream)
{
  return launch_map<TDM_OP_RELU_BACKWARD>(dx, dy, y, 0.0f, n, stream);
}

extern "C" cudaError_t
tdm_k_add(float *y, const float *x, size_t n, cudaStream_t stream)
{
  return launch_map<TDM_OP_ADD>(y, y, x, 0.0f, n, stream);
}

extern "C" cudaError_t
tdm_k_add_out(float *y, const float *a, const float *x, size_t n, bool relu,
              cudaStream_t stream)
{
  if (relu)
    return launch_map<TDM_OP_ADD_RELU>(y, a, x, 0.0f, n, stream);
  return launch_map<TDM_OP_ADD>(y, a, x, 0.0f, n, stream);
}

/* A residual block's tensors stored as bf16: V elements a thread through tdm_k_vec
 * (V = 4 where every pointer allows it), the tail one by one. */
template <int V, typename X>
__global__ void
add_out_bf16_kernel(uint16_t *y, const float *a, const X *x, size_t n, bool relu)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n / V; i += stride) {
    float va[V], vx[V];
    tdm_k_vec<V>::load(va, a + i * V);
    tdm_k_vec<V>::load(vx, x + i * V);
    for (int j = 0; j < V; j++)
      va[j] = relu ? tdm_k_relu_value(va[j] + vx[j]) : va[j] + vx[j];
    tdm_k_vec<V>::store(y + i * V, va);
  }
}

/* add_out_bf16_kernel's y and its ReLU's mask, eight elements a thread: the mask's
 * byte q is elements 8q to 8q + 7 (tdm-relu-bits.h), stored whole, so no two threads
 * share a byte (no atomics, nothing to clear first) and a warp's 32 bytes are one
 * store; each bit from the bf16 value as stored. 16-byte accesses where `vec` (every
 * pointer 16-byte aligned) and the eight are all there, else one value at a time. */
template <typename X>
__global__ void
add_out_bf16_bits_kernel(uint16_t *y, const float *a, const X *x, size_t n, bool relu,
                         uint8_t *bits, bool vec)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t q = blockIdx.x * (size_t)blockDim.x + threadIdx.x; q < (n + 7) / 8; q += stride) {
    size_t e = q * 8;
    int m = n - e < 8 ? (int)(n - e) : 8;
    bool whole = vec && m == 8;
    float va[8], vx[8];
    if (whole) {
      tdm_k_vec<8>::load(va, a + e);
      tdm_k_vec<8>::load(vx, x + e);
    } else {
#pragma unroll
      for (int j = 0; j < 8; j++) {
        va[j] = j < m ? a[e + j] : 0.0f;
        vx[j] = j < m ? tdm_k_load1(x + e + j) : 0.0f;
      }
    }
    unsigned h[8], byte = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      float v = relu ? tdm_k_relu_value(va[j] + vx[j]) : va[j] + vx[j];
      h[j] = tdm_k_bf16_bits(v);
      byte |= (j < m ? tdm_relu_bit((uint16_t)h[j]) : 0u) << j;
    }
    if (whole)
      *(uint4 *)(y + e) = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16,
                                     h[6] | h[7] << 16);
    else
      for (int j = 0; j < m; j++)
        y[e + j] = (uint16_t)h[j];
    bits[q] = (uint8_t)byte;
  }
}

/* dx = the mask's bit ? dy : 0 (the block end's ReLU, its mask as bits; `first` is dx[0]'s
 * element), dy and dx each float32 or bf16 (DX, DY): a residual block's end in
 * backward, its gradient read and written in the type it is kept in (dx may be dy
 * where the types agree: each thread reads its values first). */
template <int V, typename DX, typename DY>
__global__ void
relu_backward_bf16_kernel(DX *dx, const DY *dy, const uint32_t *mask, size_t first, size_t n)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n / V; i += stride) {
    float vd[V];
    tdm_k_vec<V>::load(vd, dy + i * V);
    unsigned m = tdm_relu_bits_from(mask, first + i * V);
    for (int j = 0; j < V; j++)
      vd[j] = m >> j & 1u ? vd[j] : 0.0f;
    tdm_k_vec<V>::store(dx + i * V, vd);
  }
}

/* dx = the mask's bit ? a + x : 0 (mask NULL: no ReLU; `first` is dx[0]'s element) with
 * a and x float32 or bf16 (A, X), the sum in float32 rounded to bf16 once: a residual
 * block's start in backward, its first layer's input gradient and the skip's share
 * summed and the ReLU of the layer before applied in one pass (dx may be a or x where
 * that one is bf16: each thread reads its values first). */
template <int V, typename A, typename X>
__global__ void
add_relu_backward_bf16_kernel(uint16_t *dx, const A *a, const X *x, const uint32_t *mask,
                              size_t first, size_t n)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n / V; i += stride) {
    float va[V], vx[V];
    tdm_k_vec<V>::load(va, a + i * V);
    tdm_k_vec<V>::load(vx, x + i * V);
    /* No mask: every value kept. */
    unsigned m = mask != NULL ? tdm_relu_bits_from(mask, first + i * V) : ~0u;
    for (int j = 0; j < V; j++)
      va[j] = m >> j & 1u ? va[j] + vx[j] : 0.0f;
    tdm_k_vec<V>::store(dx + i * V, va);
  }
}

/* y = a + x at the pixels a 1×1 convolution of this stride reads (x compact: one value
 * per such pixel and channel), a + 0 elsewhere, a float32 or bf16 (A), rounded to bf16
 * (Y uint16_t) or stored float32 (Y float; y may be a where their types agree: a thread
 * reads its V values of a before it writes them): a residual block's start summing its
 * first layer's input gradient and a projection's. V channels a thread (c % V == 0): V = 8
 * reads a and x in two 16-byte accesses and writes bf16 y in one, and splits its index once for
 * eight values (one value a thread, three divisions each and a 2-byte store, ran at 0.96 TB/s
 * on an H100, ncu 2026-12-06). */
template <int V, typename Y, typename A, typename I>
__global__ void
add_strided_bf16_kernel(Y *y, const A *a, const float *x, I vectors, int h, int w, int c,
                        int stride)
{
  int oh = (h - 1) / stride + 1, ow = (w - 1) / stride + 1;
  for (I q = tdm_k_grid_start<I>(); q < vectors; q += tdm_k_grid_stride<I>()) {
    TdmKNhwc<I> at = tdm_k_nhwc<I>(q, c / V, w, h);
    float v[V], add[V];
    tdm_k_vec<V>::load(v, a + (size_t)q * V);
    if (at.y % stride == 0 && at.x % stride == 0)
      tdm_k_vec<V>::load(add, x + ((at.img * oh + at.y / stride) * ow + at.x / stride) * c +
                                  (size_t)at.ch * V);
    else
      for (int j = 0; j < V; j++)
        add[j] = 0.0f;
    for (int j = 0; j < V; j++)
      v[j] = v[j] + add[j];
    tdm_k_vec<V>::store(y + (size_t)q * V, v);
  }
}

/* Whether p allows the V = 4 body for elements of `size` bytes: 16-byte float and
 * 8-byte bf16 accesses. */
static bool
quad_ok(const void *p, size_t size)
{
  return ((uintptr_t)p & (4 * size - 1)) == 0;
}

template <typename X>
static cudaError_t
add_out_bf16_launch(uint16_t *y, const float *a, const X *x, size_t n, bool relu,
                    uint32_t *bits, cudaStream_t stream)
{
  if (bits != NULL) {
    bool vec = tdm_k_aligned16(y) && tdm_k_aligned16(a) && tdm_k_aligned16(x);
    add_out_bf16_bits_kernel<X>
        <<<tdm_k_blocks((n + 7) / 8, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            y, a, x, n, relu, (uint8_t *)bits, vec);
    return tdm_k_launched();
  }
  bool vec = quad_ok(a, sizeof(*a)) && quad_ok(x, sizeof(X)) && quad_ok(y, sizeof(*y));
  size_t body = vec ? n / 4 * 4 : 0;
  if (body > 0)
    add_out_bf16_kernel<4, X><<<tdm_k_blocks(body / 4, TDM_K_THREADS), TDM_K_THREADS, 0,
                                stream>>>(y, a, x, body, relu);
  if (n > body)
    add_out_bf16_kernel<1, X><<<tdm_k_blocks(n - body, TDM_K_THREADS), TDM_K_THREADS, 0,
                                stream>>>(y + body, a + body, x + body, n - body, relu);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_add_out_bf16(uint16_t *y, const float *a, const void *x, bool x16, size_t n, bool relu,
                   uint32_t *bits, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  if (x16)
    return add_out_bf16_launch(y, a, (const uint16_t *)x, n, relu, bits, stream);
  return add_out_bf16_launch(y, a, (const float *)x, n, relu, bits, stream);
}

template <typename DX, typename DY>
static cudaError_t
relu_backward_bf16_launch(DX *dx, const DY *dy, const uint32_t *mask, size_t n,
                          cudaStream_t stream)
{
  bool vec = quad_ok(dx, sizeof(DX)) && quad_ok(dy, sizeof(DY));
  size_t body = vec ? n / 4 * 4 : 0;
  if (body > 0)
    relu_backward_bf16_kernel<4, DX, DY>
        <<<tdm_k_blocks(body / 4, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(dx, dy, mask, 0,
                                                                              body);
  if (n > body)
    relu_backward_bf16_kernel<1, DX, DY>
        <<<tdm_k_blocks(n - body, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx + body, dy + body, mask, body, n - body);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_relu_backward_bf16(void *dx, bool dx16, const void *dy, bool dy16, const uint32_t *mask,
                         size_t n, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  if (dx16 && dy16)
    return relu_backward_bf16_launch((uint16_t *)dx, (const uint16_t *)dy, mask, n, stream);
  if (dx16)
    return relu_backward_bf16_launch((uint16_t *)dx, (const float *)dy, mask, n, stream);
  if (dy16)
    return relu_backward_bf16_launch((float *)dx, (const uint16_t *)dy, mask, n, stream);
  return relu_backward_bf16_launch((float *)dx, (const float *)dy, mask, n, stream);
}

template <typename Y, typename A>
static cudaError_t
add_strided_launch(Y *y, const A *a, const float *x, size_t total, int h, int w, int c,
                   int stride, cudaStream_t stream)
{
  bool wide = tdm_k_aligned16(a) && tdm_k_aligned16(x);
  int v = wide && c % 8 == 0 && tdm_k_aligned16(y)        ? 8
          : wide && c % 4 == 0 && quad_ok(y, sizeof(Y)) ? 4
                                                        : 1;
  size_t vectors = total / v;
  unsigned blocks = tdm_k_blocks(vectors, TDM_K_THREADS);
#define ADD_STRIDED(V, I)                                                                      \
  add_strided_bf16_kernel<V, Y, A, I>                                                          \
      <<<blocks, TDM_K_THREADS, 0, stream>>>(y, a, x, (I)vectors, h, w, c, stride)
  if (v == 8 && total <= INT32_MAX)
    ADD_STRIDED(8, int32_t);
  else if (v == 8)
    ADD_STRIDED(8, int64_t);
  else if (v == 4 && total <= INT32_MAX)
    ADD_STRIDED(4, int32_t);
  else if (v == 4)
    ADD_STRIDED(4, int64_t);
  else if (total <= INT32_MAX)
    ADD_STRIDED(1, int32_t);
  else
    ADD_STRIDED(1, int64_t);
#undef ADD_STRIDED
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_add_strided_bf16(void *y, bool y16, const void *a, bool a16, const float *x, int n, int h,
                       int w, int c, int stride, cudaStream_t stream)
{
  size_t total = (size_t)n * h * w * c;
  if (total == 0)
    return cudaSuccess;
  if (y16 && a16)
    return add_strided_launch((uint16_t *)y, (const uint16_t *)a, x, total, h, w, c, stride,
                              stream);
  if (y16)
    return add_strided_launch((uint16_t *)y, (const float *)a, x, total, h, w, c, stride,
                              stream);
  if (a16)
    return add_strided_launch((float *)y, (const uint16_t *)a, x, total, h, w, c, stride,
                              stream);
  return add_strided_launch((float *)y, (const float *)a, x, total, h, w, c, stride, stream);
}

/* V = 8 where every pointer is 16-byte aligned (one 16-byte access for each bf16
 * operand, two for a float32 one), 4 where each allows quad_ok's, the tail one by one;
 * a thread's V bits of the mask are one 4-byte load that its warp shares. */
template <typename A, typename X>
static cudaError_t
add_relu_backward_bf16_launch(uint16_t *dx, const A *a, const X *x, const uint32_t *mask,
                              size_t n, cudaStream_t stream)
{
  bool octo = tdm_k_aligned16(dx) && tdm_k_aligned16(a) && tdm_k_aligned16(x);
  bool quad = quad_ok(dx, sizeof(*dx)) && quad_ok(a, sizeof(A)) && quad_ok(x, sizeof(X));
  size_t body = octo ? n / 8 * 8 : quad ? n / 4 * 4 : 0;
  if (body > 0 && octo)
    add_relu_backward_bf16_kernel<8, A, X>
        <<<tdm_k_blocks(body / 8, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(dx, a, x, mask,
                                                                              0, body);
  else if (body > 0)
    add_relu_backward_bf16_kernel<4, A, X>
        <<<tdm_k_blocks(body / 4, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(dx, a, x, mask,
                                                                              0, body);
  if (n > body)
    add_relu_backward_bf16_kernel<1, A, X>
        <<<tdm_k_blocks(n - body, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx + body, a + body, x + body, mask, body, n - body);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_add_relu_backward_bf16(uint16_t *dx, const void *a, bool a16, const void *x, bool x16,
                             const uint32_t *mask, size_t n, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  if (a16 && x16)
    return add_relu_backward_bf16_launch(dx, (const uint16_t *)a, (const uint16_t *)x, mask, n,
                                         stream);
  if (a16)
    return add_relu_backward_bf16_launch(dx, (const uint16_t *)a, (const float *)x, mask, n,
                                         stream);
  if (x16)
    return add_relu_backward_bf16_launch(dx, (const float *)a, (const uint16_t *)x, mask, n,
                                         stream);
  return add_relu_backward_bf16_launch(dx, (const float *)a, (const float *)x, mask, n, stream);
}

/* out[i] = in[i] rounded to bfloat16, nearest even. */
__global__ void
to_bf16_kernel(uint16_t *out, const float *in, size_t n)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = tdm_k_bf16_bits(in[i]);
}

/* The same, four values a thread: a 16-byte load and an 8-byte store (the scalar
 * kernel's 2-byte stores ran at ~2.2 TB/s on a convolution's output gradient, in a
 * profile). `quads` = n / 4 < 2³¹; the last n % 4 values go to the first threads. */
__global__ void
to_bf16_quad_kernel(uint2 *out, const float4 *in, unsigned quads, uint16_t *tail_out,
                    const float *tail_in, unsigned tail)
{
  unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned stride = gridDim.x * blockDim.x;
  for (unsigned q = first; q < quads; q += stride) {
    float4 v = in[q];
    out[q] = tdm_k_bf16x4_bits(v.x, v.y, v.z, v.w);
  }
  if (first < tail)
    tail_out[first] = tdm_k_bf16_bits(tail_in[first]);
}

extern "C" cudaError_t
tdm_k_to_bf16(uint16_t *out, const float *in, size_t n, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  size_t quads = n / 4;
  if (tdm_k_aligned16(in) && ((uintptr_t)out & 7u) == 0 && quads > 0 &&
      quads <= (size_t)INT32_MAX) {
    unsigned tail = (unsigned)(n % 4);
    to_bf16_quad_kernel<<<tdm_k_blocks(quads, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
        (uint2 *)out, (const float4 *)in, (unsigned)quads, out + quads * 4, in + quads * 4,
        tail);
  } else {
    to_bf16_kernel<<<tdm_k_blocks(n, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(out, in, n);
  }
  return tdm_k_launched();
}

/* rows × c floats to rows × c_pad bfloat16 (nearest even), the channels past c zero.
 * A thread writes V consecutive padded channels of a row (V = 8: one 16-byte store, a
 * whole pixel of cuDNN's 8-channel stem input) and reads those below c; indices 32-bit
 * below 2³¹ elements. Each value is to_bf16's rounding of its own float. */
template <int V, typename I>
__global__ void
to_bf16_padded_kernel(uint16_t *out, const float *in, I groups, int c, int c_pad)
{
  const I per_row = (I)(c_pad / V);
  for (I q = tdm_k_grid_start<I>(); q < groups; q += tdm_k_grid_stride<I>()) {
    I row = q / per_row;
    int ch = (int)(q - row * per_row) * V;
    const float *src = in + row * (I)c;
    float v[V];
#pragma unroll
    for (int j = 0; j < V; j++)
      v[j] = ch + j < c ? src[ch + j] : 0.0f;
    tdm_k_vec<V>::store(out + q * V, v);
  }
}

template <int V, typename I>
static void
to_bf16_padded_run(uint16_t *out, const float *in, size_t n, int c, int c_pad,
                   cudaStream_t stream)
{
  size_t groups = n / V;
  to_bf16_padded_kernel<V, I><<<tdm_k_blocks(groups, TDM_K_THREADS), TDM_K_THREADS, 0,
                                 stream>>>(out, in, (I)groups, c, c_pad);
}

extern "C" cudaError_t
tdm_k_to_bf16_padded(uint16_t *out, const float *in, size_t rows, int c, int c_pad,
                     cudaStream_t stream)
{
  if (rows == 0 || c <= 0 || c_pad < c)
    return cudaSuccess;
  size_t n = rows * (size_t)c_pad;
  if (n > INT32_MAX)
    to_bf16_padded_run<1, size_t>(out, in, n, c, c_pad, stream);
  else if (c_pad % 8 == 0 && tdm_k_aligned16(out))
    to_bf16_padded_run<8, uint32_t>(out, in, n, c, c_pad, stream);
  else if (c_pad % 4 == 0 && ((uintptr_t)out & 7u) == 0)
    to_bf16_padded_run<4, uint32_t>(out, in, n, c, c_pad, stream);
  else
    to_bf16_padded_run<1, uint32_t>(out, in, n, c, c_pad, stream);
  return tdm_k_launched();
}

/* The way back: a bfloat16's bits are the top half of the float's, so the value is
 * exact. Two values a thread (a 4-byte load, an 8-byte store) where aligned. */
__global__ void
from_bf16_kernel(float *out, const uint16_t *in, size_t n)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __uint_as_float((unsigned)in[i] << 16);
}

__global__ void
from_bf16_pair_kernel(float2 *out, const unsigned *in, size_t pairs)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < pairs; i += stride) {
    unsigned v = in[i];
    out[i] = make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
  }
}

extern "C" cudaError_t
tdm_k_from_bf16(float *out, const uint16_t *in, size_t n, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  size_t pairs = n / 2;
  if (((uintptr_t)in & 3u) == 0 && ((uintptr_t)out & 7u) == 0 && pairs > 0) {
    from_bf16_pair_kernel<<<tdm_k_blocks(pairs, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
        (float2 *)out, (const unsigned *)in, pairs);
    if (n % 2 != 0)
      from_bf16_kernel<<<1, 1, 0, stream>>>(out + n - 1, in + n - 1, 1);
  } else {
    from_bf16_kernel<<<tdm_k_blocks(n, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(out, in, n);
  }
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_scale(float *y, float alpha, size_t n, cudaStream_t stream)
{
  return launch_map<TDM_OP_SCALE>(y, y, NULL, alpha, n, stream);
}

/* Inverted dropout: element e of row i kept when its uniform draw for (key, epoch,
 * indices[i], e) is >= p. Forward and backward are the same pass. */
__global__ void
dropout_kernel(float *y, const float *x, const int32_t *indices, size_t total, int per_sample,
               float p, uint64_t key, uint32_t epoch)
{
  float keep_scale = 1.0f / (1.0f - p);
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += stride) {
    size_t i = e / (size_t)per_sample;
    uint32_t el = (uint32_t)(e - i * (size_t)per_sample);
    uint32_t s = (uint32_t)indices[i];
    y[e] = tdm_crng_uniform(key, epoch, s, el) >= p ? x[e] * keep_scale : 0.0f;
  }
}

extern "C" cudaError_t
tdm_k_dropout(float *y, const float *x, const int32_t *indices, int n, int per_sample, float p,
              uint64_t key, uint32_t epoch, cudaStream_t stream)
{
  size_t total = (size_t)(n > 0 ? n : 0) * (per_sample > 0 ? per_sample : 0);
  if (total == 0)
    return cudaSuccess;
  if (!(p >= 0.0f && p < 1.0f))
    return cudaErrorInvalidValue;
  dropout_kernel<<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      y, x, indices, total, per_sample, p, key, epoch);
  return tdm_k_launched();
}

__global__ void
exact_add_kernel(long long *acc, const float *x, size_t n, unsigned long long *bad)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  unsigned long long rejected = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t hi, lo;
    if (tdm_exact_fixed_limbs(x[i], &hi, &lo)) {
      rejected++;
      continue;
    }
    acc[2 * i] += hi;
    acc[2 * i + 1] += lo;
  }
  if (rejected > 0)
    atomicAdd(bad, rejected);
}

extern "C" cudaError_t
tdm_k_exact_add(int64_t *acc, const float *x, size_t n, int64_t *bad, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  exact_add_kernel<<<tdm_k_blocks(n, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      (long long *)acc, x, n, (unsigned long long *)bad);
  return tdm_k_launched();
}
