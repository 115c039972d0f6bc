/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bn.cu — batch normalization on NHWC activations: the per-channel sums, the
 * statistics and running averages, the forward in training and evaluation mode with
 * an optional ReLU, the backward (its input gradient also as bf16).
 *
 * Per-channel sums are the only reductions. They run in two deterministic launches in
 * double (each block sums a fixed slice of rows into partials, then one launch adds
 * the partials in order): no atomics, so the same inputs give the same bits, and the
 * precision matches the CPU reference, which also sums in double. The statistics take
 * one read of x: shifted sums, finished and merged over replicas by
 * tdm-bn-moments.h's rule, the CPU's. Everything else is
 * one memory-bound elementwise pass. Every kernel reads x as float32 or as bfloat16
 * (X = uint16_t: a conv's output a bf16 run stores so), widened exactly as it loads. Not here:
 * the convolutions and pools that read a bn's output as they normalize it (conv-im2col.cu,
 * pool.cu), and the all-reduce of synchronized BN, which the engine does between these
 * launches.
 */
#include "tdm-kernels.h"
#include "tdm-bn-moments.h"
#include "common.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>
#include <math.h>

/* Sums over rows: a block is 32 channels (threadIdx.x, so a warp reads 128
 * contiguous bytes of a row) × 8 row lanes (threadIdx.y); blockIdx.y picks the
 * channel tile, blockIdx.x the row group. Groups are many (up to BN_MAX_GROUPS, about
 * a thousand blocks in all): with a few hundred, an H200 had a quarter of its warps
 * busy and read at 0.9 TB/s (ncu, 2026-12-03). */
#define BN_LANES 8
#define BN_MAX_GROUPS 1024
#define BN_TARGET_BLOCKS 1024
/* The finish: 32 channels × 32 group lanes a block. */
#define BN_FINISH_LANES 32

enum { SUM_SHIFTED = 0, SUM_BACKWARD = 2, SUM_BACKWARD_RELU = 3 };

/* partials[(group · 2 + which) · channels + ch]: which 0 holds Σ(x − K) (K = the
 * channel's first row, tdm-bn-moments.h) or Σdy·xhat, which 1 holds Σ(x − K)² or
 * Σdy. */
template <int MODE, typename X, typename D>
__global__ void
bn_partial_kernel(double *partials, const X *x, const D *dy, const float *mean,
                  const float *invstd, const float *gamma, const float *beta, int rows,
                  int channels)
{
  __shared__ double s0[BN_LANES][32];
  __shared__ double s1[BN_LANES][32];
  int ch = blockIdx.y * 32 + threadIdx.x;
  double a0 = 0.0, a1 = 0.0;
  if (ch < channels) {
    float m = 0.0f, is = 0.0f;
    double shift = 0.0;
    if (MODE == SUM_SHIFTED)
      shift = tdm_k_load1(x + ch);
    if (MODE >= SUM_BACKWARD) {
      m = mean[ch];
      is = invstd[ch];
    }
    /* Unrolled so that four rows' loads are in flight before their adds. */
#pragma unroll 4
    for (int r = blockIdx.x * BN_LANES + threadIdx.y; r < rows; r += gridDim.x * BN_LANES) {
      float v = tdm_k_load1(x + (size_t)r * channels + ch);
      if (MODE == SUM_SHIFTED) {
        double d = (double)v - shift;
        a0 += d;
        a1 += d * d;
      } else {
        float g = tdm_k_load1(dy + (size_t)r * channels + ch);
        if (MODE == SUM_BACKWARD_RELU &&
            !(bn_train_value(v, ch, mean, invstd, gamma, beta) > 0.0f))
          g = 0.0f;
        float xhat = (v - m) * is;
        a0 += (double)g * xhat;
        a1 += g;
      }
    }
  }
  s0[threadIdx.y][threadIdx.x] = a0;
  s1[threadIdx.y][threadIdx.x] = a1;
  __syncthreads();
  if (threadIdx.y == 0 && ch < channels) {
    for (int k = 1; k < BN_LANES; k++) {
      a0 += s0[k][threadIdx.x];
      a1 += s1[k][threadIdx.x];
    }
    partials[((size_t)blockIdx.x * 2) * channels + ch] = a0;
    partials[((size_t)blockIdx.x * 2 + 1) * channels + ch] = a1;
  }
}

/* The two sums of each channel over the groups' partials. A block is 32 channels ×
 * 32 lanes; lane y adds groups y, y + 32, … in order, then lane 0 adds the lanes in
 * order: a fixed order, so the same bits every run, and a chain of groups / 32 loads
 * instead of one of groups (one thread a channel took 22 µs a call, a tenth of the
 * step, ncu 2026-12-03). Then, for the statistics (MOMENTS), lane 0 finishes them
 * into this replica's slot of `slots` (mean, M2, count; zeros in the other slots,
 * tdm-bn-moments.h); for the backward, out0 and out1 get the sums. */
template <bool MOMENTS, typename X>
__global__ void
bn_finish_kernel(float *out0, float *out1, const double *partials, int groups, int channels,
                 float *slots, const X *x, int rows, int slot, int slot_count)
{
  __shared__ double s0[BN_FINISH_LANES][33];
  __shared__ double s1[BN_FINISH_LANES][33];
  int ch = blockIdx.x * 32 + threadIdx.x;
  double a0 = 0.0, a1 = 0.0;
  if (ch < channels) {
#pragma unroll 4
    for (int g = threadIdx.y; g < groups; g += BN_FINISH_LANES) {
      a0 += partials[((size_t)g * 2) * channels + ch];
      a1 += partials[((size_t)g * 2 + 1) * channels + ch];
    }
  }
  s0[threadIdx.y][threadIdx.x] = a0;
  s1[threadIdx.y][threadIdx.x] = a1;
  __syncthreads();
  if (threadIdx.y != 0 || ch >= channels)
    return;
  for (int k = 1; k < BN_FINISH_LANES; k++) {
    a0 += s0[k][threadIdx.x];
    a1 += s1[k][threadIdx.x];
  }
  if (!MOMENTS) {
    out0[ch] = (float)a0;
    if (out1 != NULL)
      out1[ch] = (float)a1;
    return;
  }
  size_t size = TDM_BN_SLOT_FLOATS(channels);
  for (int s = 0; s < slot_count; s++) {
    float *dst = slots + size * s;
    if (s == slot) {
      double mean, m2;
      tdm_bnm_finish(tdm_k_load1(x + ch), a0, a1, rows, &mean, &m2);
      tdm_bnm_store(dst, channels, ch, mean, m2);
    } else {
      tdm_bnm_store(dst, channels, ch, 0.0, 0.0);
    }
    if (ch == 0)
      tdm_bnm_store_count(dst, channels, s == slot ? rows : 0);
  }
}

template <int MODE, typename X, typename D>
static cudaError_t
bn_reduce(float *out0, float *out1, const X *x, const D *dy, const float *mean,
          const float *invstd, const float *gamma, const float *beta, int rows, int channels,
          double *partials, size_t partials_count, float *slots, int slot, int slot_count,
          cudaStream_t stream)
{
  if (channels <= 0)
    return cudaSuccess;
  if (partials == NULL || partials_count < 2 * (size_t)channels)
    return cudaErrorInvalidValue;
  /* At least 16 rows a thread lane, about BN_TARGET_BLOCKS blocks over all channel
   * tiles, as many groups as the scratch holds. */
  size_t tiles = ((size_t)channels + 31) / 32;
  size_t groups = ((size_t)(rows > 0 ? rows : 0) + 16 * BN_LANES - 1) / (16 * BN_LANES);
  size_t wanted = BN_TARGET_BLOCKS / tiles;
  if (groups > wanted)
    groups = wanted;
  if (groups > BN_MAX_GROUPS)
    groups = BN_MAX_GROUPS;
  if (groups > partials_count / (2 * (size_t)channels))
    groups = partials_count / (2 * (size_t)channels);
  if (groups < 1)
    groups = 1;
  dim3 grid((unsigned)groups, (unsigned)tiles);
  bn_partial_kernel<MODE, X, D><<<grid, dim3(32, BN_LANES), 0, stream>>>(
      partials, x, dy, mean, invstd, gamma, beta, rows, channels);
  bn_finish_kernel<MODE == SUM_SHIFTED, X>
      <<<(unsigned)tiles, dim3(32, BN_FINISH_LANES), 0, stream>>>(
          out0, out1, partials, (int)groups, channels, slots, x, rows, slot, slot_count);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_bn_moments(float *slots, const void *x, bool x16, int rows, int channels, int slot,
                 int slot_count, double *partials, size_t partials_count, cudaStream_t stream)
{
  if (channels <= 0 || slot < 0 || slot >= slot_count)
    return cudaErrorInvalidValue;
  if (rows <= 0) /* no first row to shift by: an empty slot */
    return cudaMemsetAsync(slots, 0, TDM_BN_SLOT_FLOATS(channels) * slot_count * sizeof(float),
                           stream);
  if (x16)
    return bn_reduce<SUM_SHIFTED>(NULL, NULL, (const uint16_t *)x, (const float *)NULL, NULL,
                                  NULL, NULL, NULL, rows, channels, partials, partials_count,
                                  slots, slot, slot_count, stream);
  return bn_reduce<SUM_SHIFTED>(NULL, NULL, (const float *)x, (const float *)NULL, NULL, NULL,
                                NULL, NULL, rows, channels, partials, partials_count, slots,
                                slot, slot_count, stream);
}

template <typename X, typename D>
static cudaError_t
bn_backward_sums(float *dgamma, float *dbeta, const D *dy, const X *x, const float *mean,
                 const float *invstd, const float *gamma, const float *beta, bool relu,
                 int rows, int channels, double *partials, size_t partials_count,
                 cudaStream_t stream)
{
  if (relu)
    return bn_reduce<SUM_BACKWARD_RELU>(dgamma, dbeta, x, dy, mean, invstd, gamma, beta, rows,
                                        channels, partials, partials_count, NULL, 0, 0,
                                        stream);
  return bn_reduce<SUM_BACKWARD>(dgamma, dbeta, x, dy, mean, invstd, gamma, beta, rows,
                                 channels, partials, partials_count, NULL, 0, 0, stream);
}

extern "C" cudaError_t
tdm_k_bn_backward_sums(float *dgamma, float *dbeta, const void *dy, bool dy16, const void *x,
                       bool x16, const float *mean, const float *invstd, const float *gamma,
                       const float *beta, bool relu, int rows, int channels, double *partials,
                       size_t partials_count, cudaStream_t stream)
{
#define BN_SUMS(D, X)                                                                          \
  bn_backward_sums(dgamma, dbeta, (const D *)dy, (const X *)x, mean, invstd, gamma, beta,      \
                   relu, rows, channels, partials, partials_count, stream)
  if (dy16)
    return x16 ? BN_SUMS(uint16_t, uint16_t) : BN_SUMS(uint16_t, float);
  return x16 ? BN_SUMS(float, uint16_t) : BN_SUMS(float, float);
#undef BN_SUMS
}

__global__ void
bn_stats_kernel(float *saved, const float *slots, int slot_count, int channels, float eps,
                float momentum, float *running_mean, float *running_var)
{
  int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= channels)
    return;
  double count, mean_d, m2;
  tdm_bnm_merge(slots, slot_count, channels, ch, &count, &mean_d, &m2);
  float mean = (float)mean_d;
  float var = count > 0 ? (float)(m2 / count) : 0.0f;
  saved[ch] = mean;
  saved[channels + ch] = 1.0f / sqrtf(var + eps);
  if (running_mean != NULL) {
    float unbiased = count > 1 ? (float)(m2 / (count - 1)) : var;
    running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mean;
    running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * unbiased;
  }
}

extern "C" cudaError_t
tdm_k_bn_stats(float *saved, const float *slots, int slot_count, int channels, float eps,
               float momentum, float *running_mean, float *running_var, cudaStream_t stream)
{
  if (channels <= 0)
    return cudaSuccess;
  bn_stats_kernel<<<tdm_k_blocks((size_t)channels, TDM_K_THREADS), TDM_K_THREADS, 0,
                    stream>>>(saved, slots, slot_count, channels, eps, momentum, running_mean,
                              running_var);
  return tdm_k_launched();
}

/* The forward in both modes is y = x · scale + shift per channel (then the ReLU):
 * training mode's scale = invstd · γ, evaluation's γ / √(running_var + eps), each
 * thread computing its channel's pair as the CPU reference does. V = 4: four
 * channels of one row a thread through float4 (channels % 4 == 0, aligned); I, the
 * index type: 32-bit division where the tensor allows (a 64-bit modulo per element
 * held these passes to half the memory's rate). */
template <bool EVAL>
__device__ inline float
bn_forward_one(float x, int ch, const float *mean, const float *spread, const float *gamma,
               const float *beta, float eps, bool use_relu)
{
  if (!EVAL)
    return bn_train_output(x, ch, mean, spread, gamma, beta, use_relu);
  float scale = gamma[ch] / sqrtf(spread[ch] + eps);
  return bn_affine_output(x, scale, __fsub_rn(beta[ch], __fmul_rn(mean[ch], scale)), use_relu);
}

/* With a (not NULL): y = the bn's output (use_relu false) + a, then max(·, 0) when
 * add_relu, as add_out adds (a plain sum of two rounded values: nothing to contract). */
template <bool EVAL, int V, typename I, typename X, typename Y, typename A>
__global__ void
bn_forward_kernel(Y *y, const X *x, const float *mean, const float *spread,
                  const float *gamma, const float *beta, float eps, I total, I channels,
                  bool use_relu, const A *a, bool add_relu)
{
  I stride = (I)gridDim.x * blockDim.x;
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total / V; i += stride) {
    int ch = (int)((i * V) % channels);
    float v[V], s[V];
    tdm_k_vec<V>::load(v, x + (size_t)i * V);
    for (int j = 0; j < V; j++)
      v[j] = bn_forward_one<EVAL>(v[j], ch + j, mean, spread, gamma, beta, eps, use_relu);
    if (a != NULL) {
      tdm_k_vec<V>::load(s, a + (size_t)i * V);
      for (int j = 0; j < V; j++)
        v[j] = add_relu ? tdm_k_relu_value(v[j] + s[j]) : v[j] + s[j];
    }
    tdm_k_vec<V>::store(y + (size_t)i * V, v);
  }
}

/* y of type Y (float, or uint16_t: bf16, rounded as it is stored), a of type A. */
template <bool EVAL, typename X, typename Y = float, typename A = float>
static cudaError_t
bn_forward_launch(Y *y, const X *x, const float *mean, const float *spread,
                  const float *gamma, const float *beta, float eps, int rows, int channels,
                  bool relu, cudaStream_t stream, const A *a = NULL, bool add_relu = false)
{
  size_t total = (size_t)(rows > 0 ? rows : 0) * (channels > 0 ? channels : 0);
  if (total == 0)
    return cudaSuccess;
  bool vec = channels % 4 == 0 && ((uintptr_t)x & (4 * sizeof(X) - 1)) == 0 &&
             ((uintptr_t)y & (4 * sizeof(Y) - 1)) == 0 &&
             (a == NULL || ((uintptr_t)a & (4 * sizeof(A) - 1)) == 0);
  bool narrow = total < ((size_t)1 << 31);
  unsigned blocks = tdm_k_blocks(vec ? total / 4 : total, TDM_K_THREADS);
#define BN_FORWARD(V, I)                                                                       \
  bn_forward_kernel<EVAL, V, I, X, Y, A><<<blocks, TDM_K_THREADS, 0, stream>>>(                \
      y, x, mean, spread, gamma, beta, eps, (I)total, (I)channels, relu, a, add_relu)
  if (vec && narrow)
    BN_FORWARD(4, uint32_t);
  else if (vec)
    BN_FORWARD(4, size_t);
  else if (narrow)
    BN_FORWARD(1, uint32_t);
  else
    BN_FORWARD(1, size_t);
#undef BN_FORWARD
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_bn_forward(float *y, const void *x, bool x16, const float *mean, const float *invstd,
                 const float *gamma, const float *beta, int rows, int channels, bool relu,
                 cudaStream_t stream)
{
  if (x16)
    return bn_forward_launch<false>(y, (const uint16_t *)x, mean, invstd, gamma, beta, 0.0f,
                                    rows, channels, relu, stream);
  return bn_forward_launch<false>(y, (const float *)x, mean, invstd, gamma, beta, 0.0f, rows,
                                  channels, relu, stream);
}

extern "C" cudaError_t
tdm_k_bn_forward_add(float *y, const void *x, bool x16, const float *mean, const float *invstd,
                     const float *gamma, const float *beta, const float *a, int rows,
                     int channels, bool relu, cudaStream_t stream)
{
  if (x16)
    return bn_forward_launch<false>(y, (const uint16_t *)x, mean, invstd, gamma, beta, 0.0f,
                                    rows, channels, false, stream, a, relu);
  return bn_forward_launch<false>(y, (const float *)x, mean, invstd, gamma, beta, 0.0f, rows,
                                  channels, false, stream, a, relu);
}

/* The output stored as bf16, with an addend of type A (or none). */
template <typename A>
static cudaError_t
bn_forward_bf16_launch(uint16_t *y, const void *x, bool x16, const float *mean,
                       const float *invstd, const float *gamma, const float *beta, const A *a,
                       int rows, int channels, bool relu, cudaStream_t stream)
{
  /* With an addend, bn_forward_add's order: the bn without its ReLU, the add, then it. */
  bool bn_relu = relu && a == NULL, add_relu = relu && a != NULL;
  if (x16)
    return bn_forward_launch<false>(y, (const uint16_t *)x, mean, invstd, gamma, beta, 0.0f,
                                    rows, channels, bn_relu, stream, a, add_relu);
  return bn_forward_launch<false>(y, (const float *)x, mean, invstd, gamma, beta, 0.0f, rows,
                                  channels, bn_relu, stream, a, add_relu);
}

extern "C" cudaError_t
tdm_k_bn_forward_bf16(uint16_t *y, const void *x, bool x16, const float *mean,
                      const float *invstd, const float *gamma, const float *beta, const void *a,
                      bool a16, int rows, int channels, bool relu, cudaStream_t stream)
{
  if (a != NULL && a16)
    return bn_forward_bf16_launch(y, x, x16, mean, invstd, gamma, beta, (const uint16_t *)a,
                                  rows, channels, relu, stream);
  return bn_forward_bf16_launch(y, x, x16, mean, invstd, gamma, beta, (const float *)a, rows,
                                channels, relu, stream);
}

extern "C" cudaError_t
tdm_k_bn_forward_eval(float *y, const void *x, bool x16, const float *running_mean,
                      const float *running_var, const float *gamma, const float *beta,
                      float eps, int rows, int channels, bool relu, cudaStream_t stream)
{
  if (x16)
    return bn_forward_launch<true>(y, (const uint16_t *)x, running_mean, running_var, gamma,
                                   beta, eps, rows, channels, relu, stream);
  return bn_forward_launch<true>(y, (const float *)x, running_mean, running_var, gamma, beta,
                                 eps, rows, channels, relu, stream);
}

/* The forward kernel with the bn's own ReLU and then the addend, no ReLU after it (a
 * residual body that ends with bn, relu), a bf16 output. */
template <typename X, typename A>
static cudaError_t
bn_relu_add_launch(uint16_t *y, const X *x, const float *mean, const float *invstd,
                   const float *gamma, const float *beta, const A *a, int rows, int channels,
                   cudaStream_t stream)
{
  return bn_forward_launch<false>(y, x, mean, invstd, gamma, beta, 0.0f, rows, channels, true,
                                  stream, a, false);
}

extern "C" cudaError_t
tdm_k_bn_relu_add_bf16(uint16_t *y, const void *x, bool x16, const float *mean,
                       const float *invstd, const float *gamma, const float *beta, const void *a,
                       bool a16, int rows, int channels, cudaStream_t stream)
{
  if (x16 && a16)
    return bn_relu_add_launch(y, (const uint16_t *)x, mean, invstd, gamma, beta,
                              (const uint16_t *)a, rows, channels, stream);
  if (x16)
    return bn_relu_add_launch(y, (const uint16_t *)x, mean, invstd, gamma, beta,
                              (const float *)a, rows, channels, stream);
  if (a16)
    return bn_relu_add_launch(y, (const float *)x, mean, invstd, gamma, beta,
                              (const uint16_t *)a, rows, channels, stream);
  return bn_relu_add_launch(y, (const float *)x, mean, invstd, gamma, beta, (const float *)a,
                            rows, channels, stream);
}

/* bn_forward_eval's kernel with a bf16 output (Y = uint16_t), rounded as it is stored. */
extern "C" cudaError_t
tdm_k_bn_forward_eval_bf16(uint16_t *y, const void *x, bool x16, const float *running_mean,
                           const float *running_var, const float *gamma, const float *beta,
                           float eps, int rows, int channels, bool relu, cudaStream_t stream)
{
  if (x16)
    return bn_forward_launch<true>(y, (const uint16_t *)x, running_mean, running_var, gamma,
                                   beta, eps, rows, channels, relu, stream);
  return bn_forward_launch<true>(y, (const float *)x, running_mean, running_var, gamma, beta,
                                 eps, rows, channels, relu, stream);
}

/* dx = k·dy + a·x + c per channel, the CPU reference's expansion of
 * γ·invstd·(dy − Σdβ/M − xhat·Σdγ/M), dy taken as 0 where a fused ReLU (RELU)
 * stopped the forward's value; V and I as in the forward. */
template <bool RELU>
__device__ inline float
bn_backward_one(float dy, float x, int ch, const float *mean, const float *invstd,
                const float *gamma, const float *beta, const float *sum_dgamma,
                const float *sum_dbeta, float inv_count)
{
  if (RELU && !(bn_train_value(x, ch, mean, invstd, gamma, beta) > 0.0f))
    dy = 0.0f;
  float k = gamma[ch] * invstd[ch];
  float a = -k * invstd[ch] * sum_dgamma[ch] * inv_count;
  float c = -k * sum_dbeta[ch] * inv_count - a * mean[ch];
  return k * dy + a * x + c;
}

template <bool RELU, int V, typename I, typename T, typename X, typename D>
__global__ void
bn_backward_dx_kernel(T *dx, const D *dy, const X *x, const float *mean, const float *invstd,
                      const float *gamma, const float *beta, const float *sum_dgamma,
                      const float *sum_dbeta, float inv_count, I total, I channels)
{
  I stride = (I)gridDim.x * blockDim.x;
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total / V; i += stride) {
    int ch = (int)((i * V) % channels);
    float g[V], v[V];
    tdm_k_vec<V>::load(g, dy + (size_t)i * V);
    tdm_k_vec<V>::load(v, x + (size_t)i * V);
    for (int j = 0; j < V; j++)
      g[j] = bn_backward_one<RELU>(g[j], v[j], ch + j, mean, invstd, gamma, beta, sum_dgamma,
                                   sum_dbeta, inv_count);
    /* dx as float, or as bfloat16 rounded to nearest even (the bits to_bf16 gives the
     * float): a convolution's output gradient that its GEMMs read as bf16. */
    tdm_k_vec<V>::store(dx + (size_t)i * V, g);
  }
}

/* V = 4 needs dx, dy and x each on 16 bytes (float) or 8 (bf16). */
template <typename T, typename X, typename D>
static cudaError_t
bn_backward_dx_launch(T *dx, const D *dy, const X *x, const float *mean, const float *invstd,
                      const float *gamma, const float *beta, bool relu, const float *sum_dgamma,
                      const float *sum_dbeta, float inv_count, int rows, int channels,
                      cudaStream_t stream)
{
  size_t total = (size_t)(rows > 0 ? rows : 0) * (channels > 0 ? channels : 0);
  if (total == 0)
    return cudaSuccess;
  bool vec = channels % 4 == 0 && ((uintptr_t)dx & (4 * sizeof(T) - 1)) == 0 &&
             ((uintptr_t)dy & (4 * sizeof(D) - 1)) == 0 &&
             ((uintptr_t)x & (4 * sizeof(X) - 1)) == 0;
  bool narrow = total < ((size_t)1 << 31);
  unsigned blocks = tdm_k_blocks(vec ? total / 4 : total, TDM_K_THREADS);
#define BN_BACKWARD(R, V, I)                                                                   \
  bn_backward_dx_kernel<R, V, I, T, X, D>                                                      \
      <<<blocks, TDM_K_THREADS, 0, stream>>>(dx, dy, x, mean, invstd, gamma, beta, sum_dgamma, \
                                             sum_dbeta, inv_count, (I)total, (I)channels)
  if (relu && vec && narrow)
    BN_BACKWARD(true, 4, uint32_t);
  else if (relu && vec)
    BN_BACKWARD(true, 4, size_t);
  else if (relu && narrow)
    BN_BACKWARD(true, 1, uint32_t);
  else if (relu)
    BN_BACKWARD(true, 1, size_t);
  else if (vec && narrow)
    BN_BACKWARD(false, 4, uint32_t);
  else if (vec)
    BN_BACKWARD(false, 4, size_t);
  else if (narrow)
    BN_BACKWARD(false, 1, uint32_t);
  else
    BN_BACKWARD(false, 1, size_t);
#undef BN_BACKWARD
  return tdm_k_launched();
}

/* Either type of dy and of x into either type of dx. */
template <typename T>
static cudaError_t
bn_backward_dx_any(T *dx, const void *dy, bool dy16, const void *x, bool x16, const float *mean,
                   const float *invstd, const float *gamma, const float *beta, bool relu,
                   const float *sum_dgamma, const float *sum_dbeta, float inv_count, int rows,
                   int channels, cudaStream_t stream)
{
#define BN_DX(D, X)                                                                            \
  bn_backward_dx_launch(dx, (const D *)dy, (const X *)x, mean, invstd, gamma, beta, relu,      \
                        sum_dgamma, sum_dbeta, inv_count, rows, channels, stream)
  if (dy16)
    return x16 ? BN_DX(uint16_t, uint16_t) : BN_DX(uint16_t, float);
  return x16 ? BN_DX(float, uint16_t) : BN_DX(float, float);
#undef BN_DX
}

extern "C" cudaError_t
tdm_k_bn_backward_dx(float *dx, const void *dy, bool dy16, const void *x, bool x16,
                     const float *mean, const float *invstd, const float *gamma,
                     const float *beta, bool relu, const float *sum_dgamma,
                     const float *sum_dbeta, float inv_count, int rows, int channels,
                     cudaStream_t stream)
{
  return bn_backward_dx_any(dx, dy, dy16, x, x16, mean, invstd, gamma, beta, relu, sum_dgamma,
                            sum_dbeta, inv_count, rows, channels, stream);
}

extern "C" cudaError_t
tdm_k_bn_backward_dx_bf16(uint16_t *dx, const void *dy, bool dy16, const void *x, bool x16,
                          const float *mean, const float *invstd, const float *gamma,
                          const float *beta, bool relu, const float *sum_dgamma,
                          const float *sum_dbeta, float inv_count, int rows, int channels,
                          cudaStream_t stream)
{
  return bn_backward_dx_any(dx, dy, dy16, x, x16, mean, invstd, gamma, beta, relu, sum_dgamma,
                            sum_dbeta, inv_count, rows, channels, stream);
}
