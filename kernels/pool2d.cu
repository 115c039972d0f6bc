/* SPDX-License-Identifier: GPL-3.0-or-later */
/* pool2d.cu — pooling with any window, stride and padding (ResNet's 3×3 stride-2 max
 * pool of padding 1; average pools counting the padding, PyTorch's default). One
 * thread per V channels of an output (forward) or of an input (backward: it gathers the
 * outputs whose windows cover it, in the CPU reference's order, so the sums are the
 * same and nothing is scattered with atomics). V = 8 where the channels and the
 * pointers allow 16-byte accesses of bf16 (two of float32, one of 8 bytes of the argmax), 4
 * where 8 do not fit, else 1; each lane computes what one thread did before, in the
 * same order, so the bits do not depend on V. Indices are 32-bit where both tensors
 * have fewer than 2³¹ elements (nearly always: divisions are these kernels' main
 * cost), 64-bit otherwise. The max pool of a training bn's output normalized as it is
 * read (the stem's: its bn keeps no output), one thread an output. Not the tiling pools
 * with their fused bias and BN (pool.cu).
 */
#include "tdm-kernels.h"
#include "common.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>

#include <math.h>

struct Pool2d {
  int n, h, w, c, k, s, p, oh, ow;
};

/* The rows (or columns) of a window starting at input row `top` that fall in the input
 * of `size` rows: [first, last). Padding holds nothing to visit, so a window far wider
 * than its input costs what the input does; the order is the CPU reference's. */
__device__ __forceinline__ void
inside(int top, int k, int size, int *first, int *last)
{
  *first = max(0, -top);
  *last = (int)min((long long)k, (long long)size - top);
}

/* A window's area, K² in float: K may be large enough that K² overflows an int. */
__device__ __forceinline__ float
window_area(int k)
{
  return (float)k * (float)k;
}

/* The outputs whose windows cover input row i: [first, last], possibly empty. */
__device__ __forceinline__ void
covering(int i, int k, int s, int p, int outs, int *first, int *last)
{
  int hi = (i + p) / s;
  int lo_num = i + p - k + 1;
  *first = lo_num <= 0 ? 0 : (lo_num + s - 1) / s;
  *last = min(hi, outs - 1);
}

/* What argmax (of A) holds for input (iy, ix) at (ky, kx) in its window: ky·k + kx in a
 * byte, iy·w + ix in int32 (which fits where k·k may not). The CPU's rule. */
template <typename A>
__device__ __forceinline__ int32_t
window_code(int k, int w, int ky, int kx, int iy, int ix)
{
  return sizeof(A) == 1 ? ky * k + kx : iy * w + ix;
}

/* Thread o: output pixel o / (c / V), channels [ch, ch + V). An index within a sample
 * fits int32 (the geometry's check), so only the sample's offset takes I. The first
 * maximum wins (strict >), NaN kept once first, as the CPU's loop has it; argmax (of A:
 * a byte for windows of up to 256 positions, else int32) gets its position within the
 * window, ky·k + kx, in a byte, the input's position in the plane, iy·w + ix, in int32
 * (window_code()). */
template <int V, typename I, typename Y, typename X, typename A>
__global__ void
maxpool2d_forward_kernel(Y *y, A *argmax, const X *x, Pool2d g, I groups)
{
  const int cv = g.c / V;
  const I sample = (I)g.h * (I)g.w * (I)g.c;
  for (I o = tdm_k_grid_start<I>(); o < groups; o += tdm_k_grid_stride<I>()) {
    TdmKNhwc<I> out = tdm_k_nhwc(o, cv, g.ow, g.oh);
    const int ch = out.ch * V;
    const X *xs = x + out.img * sample;
    const int top = out.y * g.s - g.p, left = out.x * g.s - g.p;
    int ky0, ky1, kx0, kx1;
    inside(top, g.k, g.h, &ky0, &ky1);
    inside(left, g.k, g.w, &kx0, &kx1);
    float best[V];
    int32_t at[V];
#pragma unroll
    for (int j = 0; j < V; j++) {
      best[j] = -INFINITY;
      at[j] = -1;
    }
    for (int ky = ky0; ky < ky1; ky++) {
      const int row = (top + ky) * g.w;
      for (int kx = kx0; kx < kx1; kx++) {
        const int32_t idx = (row + left + kx) * g.c + ch;
        float v[V];
        tdm_k_vec<V>::load(v, xs + idx);
#pragma unroll
        for (int j = 0; j < V; j++)
          if (at[j] < 0 || v[j] > best[j]) {
            best[j] = v[j];
            at[j] = window_code<A>(g.k, g.w, ky, kx, top + ky, left + kx);
          }
      }
    }
    tdm_k_vec<V>::store(y + o * V, best);
    tdm_k_vec<V>::store(argmax + o * V, at);
  }
}

/* The max of a training bn's output computed as x is read (BN; else x itself), each
 * value rounded to bf16 before the comparison, the first maximum of the rounded values
 * kept: the bits of bn_forward_bf16 then maxpool2d_forward. */
template <bool BN, typename Y, typename X, typename A>
__global__ void
maxpool2d_forward_bn_kernel(Y *y, A *argmax, const X *x, Pool2d g, size_t total,
                            BnGather bn)
{
  for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < total;
       o += (size_t)gridDim.x * blockDim.x) {
    TdmKNhwc<size_t> out = tdm_k_nhwc(o, g.c, g.ow, g.oh);
    int ch = out.ch, ox = out.x, oy = out.y;
    size_t im = out.img;
    const X *xs = x + im * (size_t)g.h * g.w * g.c;
    float scale = 1.0f, shift = 0.0f;
    if (BN)
      bn_train_affine(ch, bn.mean, bn.invstd, bn.gamma, bn.beta, &scale, &shift);
    float best = -INFINITY;
    int32_t at = -1;
    int ky0, ky1, kx0, kx1;
    inside(oy * g.s - g.p, g.k, g.h, &ky0, &ky1);
    inside(ox * g.s - g.p, g.k, g.w, &kx0, &kx1);
    for (int ky = ky0; ky < ky1; ky++) {
      int iy = oy * g.s - g.p + ky;
      for (int kx = kx0; kx < kx1; kx++) {
        int ix = ox * g.s - g.p + kx;
        int32_t idx = (int32_t)(((size_t)iy * g.w + ix) * g.c + ch);
        float v = tdm_k_load1(xs + idx);
        if (BN)
          v = bn_affine_output(v, scale, shift, bn.relu);
        v = __bfloat162float(__float2bfloat16_rn(v));
        if (at < 0 || v > best) {
          best = v;
          at = window_code<A>(g.k, g.w, ky, kx, iy, ix);
        }
      }
    }
    /* best is a bf16 value: either type's store keeps it. */
    tdm_k_store1(y + o, best);
    argmax[o] = (A)at;
  }
}

/* Thread e: input pixel e / (c / V), channels [ch, ch + V): the sum over the outputs
 * covering it, rows then columns (the CPU's order); a max pool's adds only where the
 * output's argmax is this element's position in its window, its gradient read only
 * where a lane takes it. */
template <bool MAX, int V, typename I, typename DX, typename DY, typename A>
__global__ void
pool2d_backward_kernel(DX *dx, const DY *dy, const A *argmax, Pool2d g, I groups)
{
  const float area = window_area(g.k);
  const int cv = g.c / V;
  for (I e = tdm_k_grid_start<I>(); e < groups; e += tdm_k_grid_stride<I>()) {
    TdmKNhwc<I> in = tdm_k_nhwc(e, cv, g.w, g.h);
    const int ch = in.ch * V;
    int y0, y1, x0, x1;
    covering(in.y, g.k, g.s, g.p, g.oh, &y0, &y1);
    covering(in.x, g.k, g.s, g.p, g.ow, &x0, &x1);
    const I plane = in.img * (I)g.oh;
    float sum[V];
#pragma unroll
    for (int j = 0; j < V; j++)
      sum[j] = 0.0f;
    for (int oy = y0; oy <= y1; oy++)
      for (int ox = x0; ox <= x1; ox++) {
        const I o = ((plane + (I)oy) * (I)g.ow + (I)ox) * (I)g.c + (I)ch;
        float v[V];
        if (MAX) {
          int32_t at[V];
          tdm_k_vec<V>::load(at, argmax + o);
          const int32_t within = window_code<A>(g.k, g.w, in.y - (oy * g.s - g.p),
                                                in.x - (ox * g.s - g.p), in.y, in.x);
          bool hit[V], any = false;
#pragma unroll
          for (int j = 0; j < V; j++) {
            hit[j] = at[j] == within;
            any = any || hit[j];
          }
          if (!any)
            continue;
          tdm_k_vec<V>::load(v, dy + o);
#pragma unroll
          for (int j = 0; j < V; j++)
            if (hit[j])
              sum[j] += v[j];
        } else {
          tdm_k_vec<V>::load(v, dy + o);
#pragma unroll
          for (int j = 0; j < V; j++)
            sum[j] += v[j];
        }
      }
    if (!MAX) {
#pragma unroll
      for (int j = 0; j < V; j++)
        sum[j] = sum[j] / area;
    }
    tdm_k_vec<V>::store(dx + e * V, sum);
  }
}

template <int V, typename I>
__global__ void
avgpool2d_forward_kernel(float *y, const float *x, Pool2d g, I groups)
{
  const float area = window_area(g.k);
  const int cv = g.c / V;
  const I sample = (I)g.h * (I)g.w * (I)g.c;
  for (I o = tdm_k_grid_start<I>(); o < groups; o += tdm_k_grid_stride<I>()) {
    TdmKNhwc<I> out = tdm_k_nhwc(o, cv, g.ow, g.oh);
    const int ch = out.ch * V;
    const float *xs = x + out.img * sample;
    const int top = out.y * g.s - g.p, left = out.x * g.s - g.p;
    int ky0, ky1, kx0, kx1;
    inside(top, g.k, g.h, &ky0, &ky1);
    inside(left, g.k, g.w, &kx0, &kx1);
    float sum[V];
#pragma unroll
    for (int j = 0; j < V; j++)
      sum[j] = 0.0f;
    for (int ky = ky0; ky < ky1; ky++) {
      const int row = (top + ky) * g.w;
      for (int kx = kx0; kx < kx1; kx++) {
        float v[V];
        tdm_k_vec<V>::load(v, xs + (row + left + kx) * g.c + ch);
#pragma unroll
        for (int j = 0; j < V; j++)
          sum[j] += v[j];
      }
    }
#pragma unroll
    for (int j = 0; j < V; j++)
      sum[j] = sum[j] / area;
    tdm_k_vec<V>::store(y + o * V, sum);
  }
}

static bool
geometry(Pool2d *g, int n, int h, int w, int c, int k, int s, int p, int oh, int ow)
{
  *g = Pool2d{n, h, w, c, k, s, p, oh, ow};
  return n >= 0 && h >= 1 && w >= 1 && c >= 1 && k >= 1 && s >= 1 && p >= 0 && 2 * p <= k &&
         (size_t)h * w * c <= INT32_MAX && oh == (h + 2 * p - k) / s + 1 &&
         ow == (w + 2 * p - k) / s + 1 && oh >= 1 && ow >= 1;
}

/* Whether V lanes of an element of `size` bytes can be read or written at p in
 * tdm_k_vec<V>'s accesses (min(16, V · size) bytes each) from every channel group:
 * c a multiple of V and p aligned to the access. */
static bool
lanes_fit(int v, int c, const void *p, size_t size)
{
  size_t access = (size_t)v * size < 16 ? (size_t)v * size : 16;
  return c % v == 0 && ((uintptr_t)p & (access - 1)) == 0;
}

/* The widest lane count every tensor of a launch allows: 8, 4 or 1 (an argmax of A's). */
template <typename A>
static int
pool_lanes(int c, const void *a, size_t a_size, const void *b, size_t b_size, const A *argmax)
{
  for (int v = 8; v > 1; v /= 2)
    if (lanes_fit(v, c, a, a_size) && lanes_fit(v, c, b, b_size) &&
        (argmax == NULL || lanes_fit(v, c, argmax, sizeof(A))))
      return v;
  return 1;
}

/* Whether a max pool of windows of k×k keeps its argmax as bytes (tdm-backend.h's
 * tdm_pool2d_argmax_size(): up to 256 positions). */
static bool
byte_argmax(int k)
{
  return (long long)k * k <= 256;
}

/* 32-bit indices where both the input's and the output's elements number < 2³¹: the
 * grid-stride loop's index then stays below 2³² however far it steps. */
static bool
narrow(const Pool2d &g)
{
  return (size_t)g.n * g.h * g.w * g.c <= INT32_MAX &&
         (size_t)g.n * g.oh * g.ow * g.c <= INT32_MAX;
}

template <int V, typename I, typename Y, typename X, typename A>
static void
maxpool2d_forward_run(Y *y, A *argmax, const X *x, const Pool2d &g, size_t total,
                      cudaStream_t stream)
{
  size_t groups = total / V;
  maxpool2d_forward_kernel<V, I><<<tdm_k_blocks(groups, TDM_K_THREADS), TDM_K_THREADS, 0,
                                   stream>>>(y, argmax, x, g, (I)groups);
}

template <typename Y, typename X, typename A>
static void
maxpool2d_forward_launch(Y *y, A *argmax, const X *x, const Pool2d &g, cudaStream_t stream)
{
  size_t total = (size_t)g.n * g.oh * g.ow * g.c;
  int v = pool_lanes(g.c, y, sizeof(Y), x, sizeof(X), argmax);
  if (!narrow(g))
    maxpool2d_forward_run<1, size_t>(y, argmax, x, g, total, stream);
  else if (v == 8)
    maxpool2d_forward_run<8, uint32_t>(y, argmax, x, g, total, stream);
  else if (v == 4)
    maxpool2d_forward_run<4, uint32_t>(y, argmax, x, g, total, stream);
  else
    maxpool2d_forward_run<1, uint32_t>(y, argmax, x, g, total, stream);
}

template <bool MAX, int V, typename I, typename DX, typename DY, typename A>
static void
pool2d_backward_run(DX *dx, const DY *dy, const A *argmax, const Pool2d &g, size_t total,
                    cudaStream_t stream)
{
  size_t groups = total / V;
  pool2d_backward_kernel<MAX, V, I><<<tdm_k_blocks(groups, TDM_K_THREADS), TDM_K_THREADS, 0,
                                      stream>>>(dx, dy, argmax, g, (I)groups);
}

template <bool MAX, typename DX, typename DY, typename A>
static void
pool2d_backward_launch(DX *dx, const DY *dy, const A *argmax, const Pool2d &g,
                       cudaStream_t stream)
{
  size_t total = (size_t)g.n * g.h * g.w * g.c;
  int v = pool_lanes(g.c, dx, sizeof(DX), dy, sizeof(DY), argmax);
  if (!narrow(g))
    pool2d_backward_run<MAX, 1, size_t>(dx, dy, argmax, g, total, stream);
  else if (v == 8)
    pool2d_backward_run<MAX, 8, uint32_t>(dx, dy, argmax, g, total, stream);
  else if (v == 4)
    pool2d_backward_run<MAX, 4, uint32_t>(dx, dy, argmax, g, total, stream);
  else
    pool2d_backward_run<MAX, 1, uint32_t>(dx, dy, argmax, g, total, stream);
}

/* maxpool2d_forward_launch with argmax as its type (byte_argmax()) and x and y as theirs. */
template <typename A>
static void
maxpool2d_forward_typed(void *y, bool y16, A *argmax, const void *x, bool x16, const Pool2d &g,
                        cudaStream_t stream)
{
  if (y16 && x16)
    maxpool2d_forward_launch((uint16_t *)y, argmax, (const uint16_t *)x, g, stream);
  else if (y16)
    maxpool2d_forward_launch((uint16_t *)y, argmax, (const float *)x, g, stream);
  else if (x16)
    maxpool2d_forward_launch((float *)y, argmax, (const uint16_t *)x, g, stream);
  else
    maxpool2d_forward_launch((float *)y, argmax, (const float *)x, g, stream);
}

extern "C" cudaError_t
tdm_k_maxpool2d_forward(void *y, bool y16, void *argmax, const void *x, bool x16, int n,
                        int h, int w, int c, int k, int s, int p, int oh, int ow,
                        cudaStream_t stream)
{
  Pool2d g;
  if (!geometry(&g, n, h, w, c, k, s, p, oh, ow))
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  if (byte_argmax(k))
    maxpool2d_forward_typed(y, y16, (uint8_t *)argmax, x, x16, g, stream);
  else
    maxpool2d_forward_typed(y, y16, (int32_t *)argmax, x, x16, g, stream);
  return tdm_k_launched();
}

template <bool BN, typename X, typename A>
static void
maxpool2d_forward_bn_launch(void *y, bool y16, A *argmax, const X *x, Pool2d g, size_t total,
                            BnGather bn, cudaStream_t stream)
{
  unsigned blocks = tdm_k_blocks(total, TDM_K_THREADS);
  if (y16)
    maxpool2d_forward_bn_kernel<BN><<<blocks, TDM_K_THREADS, 0, stream>>>(
        (uint16_t *)y, argmax, x, g, total, bn);
  else
    maxpool2d_forward_bn_kernel<BN><<<blocks, TDM_K_THREADS, 0, stream>>>(
        (float *)y, argmax, x, g, total, bn);
}

template <typename A>
static void
maxpool2d_forward_bn_typed(void *y, bool y16, A *argmax, const void *x, bool x16, Pool2d g,
                           size_t total, BnGather bn, cudaStream_t stream)
{
  if (x16 && bn.mean != NULL)
    maxpool2d_forward_bn_launch<true>(y, y16, argmax, (const uint16_t *)x, g, total, bn, stream);
  else if (x16)
    maxpool2d_forward_bn_launch<false>(y, y16, argmax, (const uint16_t *)x, g, total, bn,
                                       stream);
  else if (bn.mean != NULL)
    maxpool2d_forward_bn_launch<true>(y, y16, argmax, (const float *)x, g, total, bn, stream);
  else
    maxpool2d_forward_bn_launch<false>(y, y16, argmax, (const float *)x, g, total, bn, stream);
}

extern "C" cudaError_t
tdm_k_maxpool2d_forward_bn(void *y, bool y16, void *argmax, const void *x, bool x16,
                           const float *mean, const float *invstd, const float *gamma,
                           const float *beta, bool relu, int n, int h, int w, int c, int k,
                           int s, int p, int oh, int ow, cudaStream_t stream)
{
  Pool2d g;
  if (!geometry(&g, n, h, w, c, k, s, p, oh, ow))
    return cudaErrorInvalidValue;
  size_t total = (size_t)n * oh * ow * c;
  if (total == 0)
    return cudaSuccess;
  BnGather bn = {mean, invstd, gamma, beta, relu};
  if (byte_argmax(k))
    maxpool2d_forward_bn_typed(y, y16, (uint8_t *)argmax, x, x16, g, total, bn, stream);
  else
    maxpool2d_forward_bn_typed(y, y16, (int32_t *)argmax, x, x16, g, total, bn, stream);
  return tdm_k_launched();
}

template <typename A>
static void
maxpool2d_backward_typed(void *dx, bool dx16, const void *dy, bool dy16, const A *argmax,
                         const Pool2d &g, cudaStream_t stream)
{
  if (dx16 && dy16)
    pool2d_backward_launch<true>((uint16_t *)dx, (const uint16_t *)dy, argmax, g, stream);
  else if (dx16)
    pool2d_backward_launch<true>((uint16_t *)dx, (const float *)dy, argmax, g, stream);
  else if (dy16)
    pool2d_backward_launch<true>((float *)dx, (const uint16_t *)dy, argmax, g, stream);
  else
    pool2d_backward_launch<true>((float *)dx, (const float *)dy, argmax, g, stream);
}

extern "C" cudaError_t
tdm_k_maxpool2d_backward(void *dx, bool dx16, const void *dy, bool dy16, const void *argmax,
                         int n, int h, int w, int c, int k, int s, int p, int oh, int ow,
                         cudaStream_t stream)
{
  Pool2d g;
  if (!geometry(&g, n, h, w, c, k, s, p, oh, ow))
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  if (byte_argmax(k))
    maxpool2d_backward_typed(dx, dx16, dy, dy16, (const uint8_t *)argmax, g, stream);
  else
    maxpool2d_backward_typed(dx, dx16, dy, dy16, (const int32_t *)argmax, g, stream);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_avgpool2d_forward(float *y, const float *x, int n, int h, int w, int c, int k, int s,
                        int p, int oh, int ow, cudaStream_t stream)
{
  Pool2d g;
  if (!geometry(&g, n, h, w, c, k, s, p, oh, ow))
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  size_t total = (size_t)n * oh * ow * c;
  /* float32 both ways: 4 lanes are one 16-byte access, 8 would be two. */
  bool vec = narrow(g) && lanes_fit(4, c, y, sizeof(float)) && lanes_fit(4, c, x, sizeof(float));
  if (!narrow(g))
    avgpool2d_forward_kernel<1, size_t>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(y, x, g, total);
  else if (vec)
    avgpool2d_forward_kernel<4, uint32_t>
        <<<tdm_k_blocks(total / 4, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            y, x, g, (uint32_t)(total / 4));
  else
    avgpool2d_forward_kernel<1, uint32_t>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(y, x, g,
                                                                             (uint32_t)total);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_avgpool2d_backward(float *dx, const float *dy, int n, int h, int w, int c, int k,
                         int s, int p, int oh, int ow, cudaStream_t stream)
{
  Pool2d g;
  if (!geometry(&g, n, h, w, c, k, s, p, oh, ow))
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  pool2d_backward_launch<false>(dx, dy, (const uint8_t *)NULL, g, stream);
  return tdm_k_launched();
}
