/* SPDX-License-Identifier: GPL-3.0-or-later */
/* exact.cu — exact mode's fixed-point addition on the device: each float of a chunk's
 * gradients (or statistics moves) converted by the rule the CPU uses
 * (tdm-exact-fixed.h) and added into its two int64 limbs, so that the sums stay on
 * the GPU through a step's chunks and leave it once. Integer additions: the bits do
 * not depend on the order, nor on the thread that adds. Not the combination over
 * devices (the communicators' integer sums). */
#include "common.cuh"
#include "tdm-kernels.h"
#include "tdm-exact-fixed.h"

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
