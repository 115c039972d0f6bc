/* SPDX-License-Identifier: GPL-3.0-or-later */
/* common.cuh — what every kernels/ file shares: grid sizing and grid-stride indices,
 * the direction of a pass's traversal (tdm_k_walk), an NHWC index's split, the
 * alignment test for the float4 paths, the rounding to bfloat16, the one vector-access
 * type (tdm_k_vec), the ReLU of one value, and the check that turns a launch into the
 * launcher's return value. Private to kernels/; the launchers' contract is in
 * tdm-kernels.h. */
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#define TDM_K_THREADS 256

/* Grid-stride loops let one capped grid cover any size; the cap keeps huge buffers
 * from launching millions of short-lived blocks. */
static inline unsigned
tdm_k_blocks(size_t work, unsigned threads)
{
  size_t blocks = (work + threads - 1) / threads;
  const size_t cap = 65536;
  if (blocks > cap)
    blocks = cap;
  if (blocks == 0)
    blocks = 1;
  return (unsigned)blocks;
}

static inline bool
tdm_k_aligned16(const void *p)
{
  return ((uintptr_t)p & 15u) == 0;
}

/* A float as bfloat16 bits, rounded to nearest even: the one rounding every bf16
 * operand gets (to_bf16, im2col's columns, BN's output gradient for a conv). */
__device__ __forceinline__ uint16_t
tdm_k_bf16_bits(float v)
{
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/* Four of them packed for one 8-byte store, the first in the low half. */
__device__ __forceinline__ uint2
tdm_k_bf16x4_bits(float a, float b, float c, float d)
{
  return make_uint2(tdm_k_bf16_bits(a) | ((unsigned)tdm_k_bf16_bits(b) << 16),
                    tdm_k_bf16_bits(c) | ((unsigned)tdm_k_bf16_bits(d) << 16));
}

/* Index arithmetic dominates the data-movement kernels (they move few bytes per
 * division), so their grid-stride loops come in two widths: 32-bit indices whenever
 * the tensor allows, which is nearly always, and 64-bit ones for the rest. */
template <typename I>
__device__ __forceinline__ I
tdm_k_grid_start()
{
  return (I)blockIdx.x * blockDim.x + threadIdx.x;
}

template <typename I>
__device__ __forceinline__ I
tdm_k_grid_stride()
{
  return (I)gridDim.x * blockDim.x;
}

/* Where work item i of n lies in a pass's traversal: i itself (ascending), or
 * n − 1 − i (descending), so that with i a grid-stride index block 0 takes the last
 * tile and the loop steps down. A pass that streams a tensor which the pass before it
 * streamed upwards walks it downwards, so that its first reads find the tail that pass
 * left in L2 (tens of MB on an H100), where an upward walk would evict that tail before
 * reaching it. Only for passes whose every output depends on its own position's
 * inputs: the order changes no bit of the result. A reduction keeps its order. */
template <typename I>
__device__ __forceinline__ I
tdm_k_walk(I i, I n, bool descending)
{
  return descending ? n - 1 - i : i;
}

/* Where a flat index of an NHWC tensor (channels fastest; c channels, or groups of
 * them, w columns, h rows) stands: the split every per-element kernel of images
 * starts with, in the index's width. */
template <typename I>
struct TdmKNhwc {
  int ch, x, y;
  I img;
};

template <typename I>
__device__ __forceinline__ TdmKNhwc<I>
tdm_k_nhwc(I e, int c, int w, int h)
{
  TdmKNhwc<I> at;
  at.ch = (int)(e % (I)c);
  I pixel = e / (I)c;
  at.x = (int)(pixel % (I)w);
  I line = pixel / (I)w;
  at.y = (int)(line % (I)h);
  at.img = line / (I)h;
  return at;
}

/* As the CPU reference writes it: NaN passes through, so that a diverging run
 * still shows in the loss instead of being hidden by the ReLU. */
__device__ __forceinline__ float
tdm_k_relu_value(float v)
{
  return v < 0.0f ? 0.0f : v;
}

/* V consecutive elements moved between memory and registers: V = 4 is one 16-byte
 * access for float and int32 and one 8-byte access for bfloat16, V = 8 two 16-byte
 * accesses for float and int32 and one for bfloat16 (the caller checks alignment: 16
 * bytes, or 8 for four bf16; bytes: 4 or 8); any other V is element by element. bfloat16 values are read as floats
 * and written rounded to nearest even (tdm_k_bf16_bits). The one vector-access type of
 * kernels/: files do not write their own float4 helpers. */
template <int V>
struct tdm_k_vec {
  static __device__ __forceinline__ void
  load(float *v, const float *p)
  {
    if (V == 4 || V == 8) {
      for (int q = 0; q < V; q += 4) {
        float4 t = *(const float4 *)(p + q);
        v[q] = t.x;
        v[q + 1] = t.y;
        v[q + 2] = t.z;
        v[q + 3] = t.w;
      }
    } else {
      for (int j = 0; j < V; j++)
        v[j] = p[j];
    }
  }

  static __device__ __forceinline__ void
  store(float *p, const float *v)
  {
    if (V == 4 || V == 8)
      for (int q = 0; q < V; q += 4)
        *(float4 *)(p + q) = make_float4(v[q], v[q + 1], v[q + 2], v[q + 3]);
    else
      for (int j = 0; j < V; j++)
        p[j] = v[j];
  }

  static __device__ __forceinline__ void
  load(float *v, const uint16_t *p)
  {
    uint16_t h[V > 4 ? V : 4];
    if (V == 4) {
      uint2 t = *(const uint2 *)p;
      h[0] = (uint16_t)t.x;
      h[1] = (uint16_t)(t.x >> 16);
      h[2] = (uint16_t)t.y;
      h[3] = (uint16_t)(t.y >> 16);
    } else if (V == 8) {
      uint4 t = *(const uint4 *)p;
      unsigned w[4] = {t.x, t.y, t.z, t.w};
      for (int q = 0; q < 4; q++) {
        h[2 * q] = (uint16_t)w[q];
        h[2 * q + 1] = (uint16_t)(w[q] >> 16);
      }
    } else {
      for (int j = 0; j < V; j++)
        h[j] = p[j];
    }
    for (int j = 0; j < V; j++)
      v[j] = __bfloat162float(__ushort_as_bfloat16(h[j]));
  }

  static __device__ __forceinline__ void
  store(uint16_t *p, const float *v)
  {
    if (V == 4) {
      *(uint2 *)p = tdm_k_bf16x4_bits(v[0], v[1], v[2], v[3]);
    } else if (V == 8) {
      uint2 lo = tdm_k_bf16x4_bits(v[0], v[1], v[2], v[3]);
      uint2 hi = tdm_k_bf16x4_bits(v[4], v[5], v[6], v[7]);
      *(uint4 *)p = make_uint4(lo.x, lo.y, hi.x, hi.y);
    } else
      for (int j = 0; j < V; j++)
        p[j] = tdm_k_bf16_bits(v[j]);
  }

  static __device__ __forceinline__ void
  load(int32_t *v, const int32_t *p)
  {
    if (V == 4 || V == 8) {
      for (int q = 0; q < V; q += 4) {
        int4 t = *(const int4 *)(p + q);
        v[q] = t.x;
        v[q + 1] = t.y;
        v[q + 2] = t.z;
        v[q + 3] = t.w;
      }
    } else {
      for (int j = 0; j < V; j++)
        v[j] = p[j];
    }
  }

  static __device__ __forceinline__ void
  store(int32_t *p, const int32_t *v)
  {
    if (V == 4 || V == 8)
      for (int q = 0; q < V; q += 4)
        *(int4 *)(p + q) = make_int4(v[q], v[q + 1], v[q + 2], v[q + 3]);
    else
      for (int j = 0; j < V; j++)
        p[j] = v[j];
  }

  /* Bytes (0–255) held in int32 registers: V = 4 one 4-byte access, V = 8 one of 8. */
  static __device__ __forceinline__ void
  load(int32_t *v, const uint8_t *p)
  {
    if (V == 4 || V == 8) {
      for (int q = 0; q < V; q += 4) {
        unsigned t = *(const unsigned *)(p + q);
        for (int j = 0; j < 4; j++)
          v[q + j] = (int32_t)((t >> (8 * j)) & 0xffu);
      }
    } else {
      for (int j = 0; j < V; j++)
        v[j] = p[j];
    }
  }

  static __device__ __forceinline__ void
  store(uint8_t *p, const int32_t *v)
  {
    if (V == 4) {
      *(unsigned *)p = (unsigned)(v[0] & 0xff) | (unsigned)(v[1] & 0xff) << 8 |
                       (unsigned)(v[2] & 0xff) << 16 | (unsigned)(v[3] & 0xff) << 24;
    } else if (V == 8) {
      unsigned w[2];
      for (int q = 0; q < 2; q++)
        w[q] = (unsigned)(v[4 * q] & 0xff) | (unsigned)(v[4 * q + 1] & 0xff) << 8 |
               (unsigned)(v[4 * q + 2] & 0xff) << 16 | (unsigned)(v[4 * q + 3] & 0xff) << 24;
      *(uint2 *)p = make_uint2(w[0], w[1]);
    } else {
      for (int j = 0; j < V; j++)
        p[j] = (uint8_t)v[j];
    }
  }
};

/* One value read as float, from float or bfloat16 (widened exactly). */
__device__ __forceinline__ float
tdm_k_load1(const float *p)
{
  return *p;
}

__device__ __forceinline__ float
tdm_k_load1(const uint16_t *p)
{
  return __bfloat162float(__ushort_as_bfloat16(*p));
}

/* One value, as float or rounded to bfloat16. */
__device__ __forceinline__ void
tdm_k_store1(float *p, float v)
{
  *p = v;
}

__device__ __forceinline__ void
tdm_k_store1(uint16_t *p, float v)
{
  *p = tdm_k_bf16_bits(v);
}

/* Launch errors (bad configuration, a stream of another device) show at once;
 * faults inside a kernel show at the next synchronizing call. */
static inline cudaError_t
tdm_k_launched(void)
{
  return cudaGetLastError();
}
