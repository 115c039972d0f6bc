/* SPDX-License-Identifier: GPL-3.0-or-later */
/* compare.cu — how far one tensor lies from another: the sums of squares of their
 * differences and of the reference, in double, for the ratio ‖x − ref‖₂ / ‖ref‖₂ (the
 * convolution engine's screen of its candidates against a reference result). A fixed
 * grid of DEVIATION_BLOCKS blocks sums (each thread a grid-stride strand, each block a
 * tree), then one block sums the blocks' partials: the order of every addition depends
 * on n alone, so the same inputs give the same bits. Float32 or bf16 values (their
 * bits), each widened exactly to double before it is subtracted.
 */
#include "tdm-kernels.h"
#include "common.cuh"

#define DEVIATION_BLOCKS 512
#define DEVIATION_THREADS 256

static_assert(2 + 2 * DEVIATION_BLOCKS == TDM_K_DEVIATION_WORK_DOUBLES,
              "work holds the two sums and each block's two partials");

__device__ __forceinline__ double
value_of(const float *p, size_t i)
{
  return (double)p[i];
}

__device__ __forceinline__ double
value_of(const uint16_t *p, size_t i)
{
  return (double)__uint_as_float((unsigned)p[i] << 16);
}

/* Sums a[] and b[] (COUNT values each, one a thread) into a[0] and b[0] by halves. */
template <int COUNT>
__device__ __forceinline__ void
tree(double *a, double *b)
{
  __syncthreads();
  for (int half = COUNT / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) {
      a[threadIdx.x] += a[threadIdx.x + half];
      b[threadIdx.x] += b[threadIdx.x + half];
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void
deviation_partial_kernel(const T *x, const T *ref, size_t n, double *partials)
{
  __shared__ double diff[DEVIATION_THREADS], norm[DEVIATION_THREADS];
  size_t stride = (size_t)DEVIATION_BLOCKS * DEVIATION_THREADS;
  double d2 = 0.0, r2 = 0.0;
  for (size_t i = blockIdx.x * (size_t)DEVIATION_THREADS + threadIdx.x; i < n; i += stride) {
    double r = value_of(ref, i);
    double d = value_of(x, i) - r;
    d2 += d * d;
    r2 += r * r;
  }
  diff[threadIdx.x] = d2;
  norm[threadIdx.x] = r2;
  tree<DEVIATION_THREADS>(diff, norm);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = diff[0];
    partials[DEVIATION_BLOCKS + blockIdx.x] = norm[0];
  }
}

__global__ void
deviation_total_kernel(double *work)
{
  __shared__ double diff[DEVIATION_BLOCKS], norm[DEVIATION_BLOCKS];
  diff[threadIdx.x] = work[2 + threadIdx.x];
  norm[threadIdx.x] = work[2 + DEVIATION_BLOCKS + threadIdx.x];
  tree<DEVIATION_BLOCKS>(diff, norm);
  if (threadIdx.x == 0) {
    work[0] = diff[0];
    work[1] = norm[0];
  }
}

extern "C" cudaError_t
tdm_k_deviation(double *work, const void *x, const void *ref, bool bf16, size_t n,
                cudaStream_t stream)
{
  if (bf16)
    deviation_partial_kernel<<<DEVIATION_BLOCKS, DEVIATION_THREADS, 0, stream>>>(
        (const uint16_t *)x, (const uint16_t *)ref, n, work + 2);
  else
    deviation_partial_kernel<<<DEVIATION_BLOCKS, DEVIATION_THREADS, 0, stream>>>(
        (const float *)x, (const float *)ref, n, work + 2);
  deviation_total_kernel<<<1, DEVIATION_BLOCKS, 0, stream>>>(work);
  return tdm_k_launched();
}
