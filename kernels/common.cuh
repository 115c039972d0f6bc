/* common.cuh — what every kernels/ file shares: grid sizing, the alignment test for
 * the float4 paths, the rounding to bfloat16, and the check that turns a launch into the launcher's return
 * value. Private to kernels/; the launchers' contract is in tdm-kernels.h. */
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

/* Launch errors (bad configuration, a stream of another device) show at once;
 * faults inside a kernel show at the next synchronizing call. */
static inline cudaError_t
tdm_k_launched(void)
{
  return cudaGetLastError();
}
