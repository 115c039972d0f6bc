/* common.cuh — what every kernels/ file shares: grid sizing, the alignment test for
 * the float4 paths, and the check that turns a launch into the launcher's return
 * value. Private to kernels/; the launchers' contract is in tdm-kernels.h. */
#pragma once

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

/* Launch errors (bad configuration, a stream of another device) show at once;
 * faults inside a kernel show at the next synchronizing call. */
static inline cudaError_t
tdm_k_launched(void)
{
  return cudaGetLastError();
}
