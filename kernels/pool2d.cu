/* SPDX-License-Identifier: GPL-3.0-or-later */
/* pool2d.cu — pooling with any window, stride and padding (ResNet's 3×3 stride-2 max
 * pool of padding 1; average pools counting the padding, PyTorch's default). One
 * thread per output (forward)
 * or per input (backward: it gathers the outputs whose windows cover it, in the CPU
 * reference's order, so the sums are the same and nothing is scattered with atomics).
 * With a training bn's output normalized as it is read, the stem's pool (its bn keeps no
 * output). Not the tiling pools with their fused bias and BN (pool.cu).
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

template <typename Y, typename X>
__global__ void
maxpool2d_forward_kernel(Y *y, int32_t *argmax, const X *x, Pool2d g, size_t total)
{
  for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < total;
       o += (size_t)gridDim.x * blockDim.x) {
    TdmKNhwc<size_t> out = tdm_k_nhwc(o, g.c, g.ow, g.oh);
    int ch = out.ch, ox = out.x, oy = out.y;
    size_t im = out.img;
    const X *xs = x + im * (size_t)g.h * g.w * g.c;
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
        if (at < 0 || v > best) {
          best = v;
          at = idx;
        }
      }
    }
    tdm_k_store1(y + o, best);
    argmax[o] = at;
  }
}

/* The max of a training bn's output computed as x is read (BN; else x itself), each
 * value rounded to bf16 before the comparison, the first maximum of the rounded values
 * kept: the bits of bn_forward_bf16 then maxpool2d_forward. */
template <bool BN, typename Y, typename X>
__global__ void
maxpool2d_forward_bn_kernel(Y *y, int32_t *argmax, const X *x, Pool2d g, size_t total,
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
          at = idx;
        }
      }
    }
    /* best is a bf16 value: either type's store keeps it. */
    tdm_k_store1(y + o, best);
    argmax[o] = at;
  }
}

template <bool MAX, typename DX, typename DY>
__global__ void
pool2d_backward_kernel(DX *dx, const DY *dy, const int32_t *argmax, Pool2d g,
                       size_t total)
{
  const float area = window_area(g.k);
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
       e += (size_t)gridDim.x * blockDim.x) {
    TdmKNhwc<size_t> in = tdm_k_nhwc(e, g.c, g.w, g.h);
    int ch = in.ch, ix = in.x, iy = in.y;
    size_t im = in.img;
    int y0, y1, x0, x1;
    covering(iy, g.k, g.s, g.p, g.oh, &y0, &y1);
    covering(ix, g.k, g.s, g.p, g.ow, &x0, &x1);
    int32_t idx = (int32_t)(((size_t)iy * g.w + ix) * g.c + ch);
    float sum = 0.0f;
    for (int oy = y0; oy <= y1; oy++)
      for (int ox = x0; ox <= x1; ox++) {
        size_t o = ((im * g.oh + oy) * g.ow + ox) * g.c + ch;
        if (!MAX || argmax[o] == idx) {
          float v;
          tdm_k_vec<1>::load(&v, dy + o);
          sum += v;
        }
      }
    float v = MAX ? sum : sum / area;
    tdm_k_vec<1>::store(dx + e, &v);
  }
}

__global__ void
avgpool2d_forward_kernel(float *y, const float *x, Pool2d g, size_t total)
{
  const float area = window_area(g.k);
  for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < total;
       o += (size_t)gridDim.x * blockDim.x) {
    TdmKNhwc<size_t> out = tdm_k_nhwc(o, g.c, g.ow, g.oh);
    int ch = out.ch, ox = out.x, oy = out.y;
    size_t im = out.img;
    float sum = 0.0f;
    int ky0, ky1, kx0, kx1;
    inside(oy * g.s - g.p, g.k, g.h, &ky0, &ky1);
    inside(ox * g.s - g.p, g.k, g.w, &kx0, &kx1);
    for (int ky = ky0; ky < ky1; ky++) {
      int iy = oy * g.s - g.p + ky;
      for (int kx = kx0; kx < kx1; kx++) {
        int ix = ox * g.s - g.p + kx;
        sum += x[((im * g.h + iy) * g.w + ix) * g.c + ch];
      }
    }
    y[o] = sum / area;
  }
}

static bool
geometry(Pool2d *g, int n, int h, int w, int c, int k, int s, int p, int oh, int ow)
{
  *g = Pool2d{n, h, w, c, k, s, p, oh, ow};
  return n >= 0 && h >= 1 && w >= 1 && c >= 1 && k >= 1 && s >= 1 && p >= 0 && 2 * p <= k &&
         oh == (h + 2 * p - k) / s + 1 && ow == (w + 2 * p - k) / s + 1 && oh >= 1 && ow >= 1;
}

extern "C" cudaError_t
tdm_k_maxpool2d_forward(void *y, bool y16, int32_t *argmax, const void *x, bool x16, int n,
                        int h, int w, int c, int k, int s, int p, int oh, int ow,
                        cudaStream_t stream)
{
  Pool2d g;
  if (!geometry(&g, n, h, w, c, k, s, p, oh, ow))
    return cudaErrorInvalidValue;
  size_t total = (size_t)n * oh * ow * c;
  if (total == 0)
    return cudaSuccess;
  unsigned blocks = tdm_k_blocks(total, TDM_K_THREADS);
  if (y16 && x16)
    maxpool2d_forward_kernel<<<blocks, TDM_K_THREADS, 0, stream>>>(
        (uint16_t *)y, argmax, (const uint16_t *)x, g, total);
  else if (y16)
    maxpool2d_forward_kernel<<<blocks, TDM_K_THREADS, 0, stream>>>(
        (uint16_t *)y, argmax, (const float *)x, g, total);
  else if (x16)
    maxpool2d_forward_kernel<<<blocks, TDM_K_THREADS, 0, stream>>>(
        (float *)y, argmax, (const uint16_t *)x, g, total);
  else
    maxpool2d_forward_kernel<<<blocks, TDM_K_THREADS, 0, stream>>>(
        (float *)y, argmax, (const float *)x, g, total);
  return tdm_k_launched();
}

template <bool BN, typename X>
static void
maxpool2d_forward_bn_launch(void *y, bool y16, int32_t *argmax, const X *x, Pool2d g,
                            size_t total, BnGather bn, cudaStream_t stream)
{
  unsigned blocks = tdm_k_blocks(total, TDM_K_THREADS);
  if (y16)
    maxpool2d_forward_bn_kernel<BN><<<blocks, TDM_K_THREADS, 0, stream>>>(
        (uint16_t *)y, argmax, x, g, total, bn);
  else
    maxpool2d_forward_bn_kernel<BN><<<blocks, TDM_K_THREADS, 0, stream>>>(
        (float *)y, argmax, x, g, total, bn);
}

extern "C" cudaError_t
tdm_k_maxpool2d_forward_bn(void *y, bool y16, int32_t *argmax, const void *x, bool x16,
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
  if (x16 && mean != NULL)
    maxpool2d_forward_bn_launch<true>(y, y16, argmax, (const uint16_t *)x, g, total, bn, stream);
  else if (x16)
    maxpool2d_forward_bn_launch<false>(y, y16, argmax, (const uint16_t *)x, g, total, bn,
                                       stream);
  else if (mean != NULL)
    maxpool2d_forward_bn_launch<true>(y, y16, argmax, (const float *)x, g, total, bn, stream);
  else
    maxpool2d_forward_bn_launch<false>(y, y16, argmax, (const float *)x, g, total, bn, stream);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_maxpool2d_backward(void *dx, bool dx16, const void *dy, bool dy16,
                         const int32_t *argmax, int n, int h, int w, int c, int k, int s, int p,
                         int oh, int ow, cudaStream_t stream)
{
  Pool2d g;
  if (!geometry(&g, n, h, w, c, k, s, p, oh, ow))
    return cudaErrorInvalidValue;
  size_t total = (size_t)n * h * w * c;
  if (total == 0)
    return cudaSuccess;
  unsigned blocks = tdm_k_blocks(total, TDM_K_THREADS);
  if (dx16 && dy16)
    pool2d_backward_kernel<true, uint16_t, uint16_t><<<blocks, TDM_K_THREADS, 0, stream>>>(
        (uint16_t *)dx, (const uint16_t *)dy, argmax, g, total);
  else if (dx16)
    pool2d_backward_kernel<true, uint16_t, float><<<blocks, TDM_K_THREADS, 0, stream>>>(
        (uint16_t *)dx, (const float *)dy, argmax, g, total);
  else if (dy16)
    pool2d_backward_kernel<true, float, uint16_t><<<blocks, TDM_K_THREADS, 0, stream>>>(
        (float *)dx, (const uint16_t *)dy, argmax, g, total);
  else
    pool2d_backward_kernel<true, float, float><<<blocks, TDM_K_THREADS, 0, stream>>>(
        (float *)dx, (const float *)dy, argmax, g, total);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_avgpool2d_forward(float *y, const float *x, int n, int h, int w, int c, int k, int s,
                        int p, int oh, int ow, cudaStream_t stream)
{
  Pool2d g;
  if (!geometry(&g, n, h, w, c, k, s, p, oh, ow))
    return cudaErrorInvalidValue;
  size_t total = (size_t)n * oh * ow * c;
  if (total == 0)
    return cudaSuccess;
  avgpool2d_forward_kernel<<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      y, x, g, total);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_avgpool2d_backward(float *dx, const float *dy, int n, int h, int w, int c, int k,
                         int s, int p, int oh, int ow, cudaStream_t stream)
{
  Pool2d g;
  if (!geometry(&g, n, h, w, c, k, s, p, oh, ow))
    return cudaErrorInvalidValue;
  size_t total = (size_t)n * h * w * c;
  if (total == 0)
    return cudaSuccess;
  pool2d_backward_kernel<false, float, float><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                  stream>>>(dx, dy, NULL, g, total);
  return tdm_k_launched();
}
