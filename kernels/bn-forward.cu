/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bn-forward.cu — batch normalization's forward on NHWC activations: the statistics
 * and running averages from the replicas' slots of shifted sums (bn_stats, merged by
 * tdm-bn-moments.h's rule in slot order), the training forward's per-channel affine
 * map for a consumer that applies it itself (bn_affine), and the forward in training
 * and evaluation mode with an optional ReLU and an addend (a block's end), into
 * float32 or bf16, with a bf16 output's ReLU mask as bits where asked (tdm-relu-bits.h):
 * one memory-bound elementwise pass, downwards where asked (it follows the moments'
 * pass over the same x: bn-layout.cuh's bn_pass_at()). x is read as float32 or as
 * bfloat16 (X = uint16_t), widened exactly as it loads. Not here: the sums
 * (bn-sums.cu), and the convolutions and pools that read a bn's output as they
 * normalize it (conv-im2col.cu, pool.cu, with bn-value.cuh's same operations).
 */
#include "tdm-kernels.h"
#include "tdm-bn-moments.h"
#include "tdm-relu-bits.h"
#include "common.cuh"
#include "bn-layout.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>
#include <math.h>

__global__ void
bn_stats_kernel(float *saved, const float *slots, int slot_count, int channels, float eps,
                float momentum, float *running_mean, float *running_var)
{
  int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= channels)
    return;
  double count, mean, m2;
  tdm_bnm_merge(slots, slot_count, channels, ch, &count, &mean, &m2);
  tdm_bnm_stats(saved, channels, ch, count, mean, m2, eps, momentum, running_mean,
                running_var);
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

/* The training forward's per-channel affine map (bn-value.cuh's bn_train_affine), for a
 * consumer that applies it itself: cuDNN's fused prologue. */
__global__ void
bn_affine_kernel(float *scale, float *shift, const float *mean, const float *invstd,
                 const float *gamma, const float *beta, int channels)
{
  int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch < channels)
    bn_train_affine(ch, mean, invstd, gamma, beta, &scale[ch], &shift[ch]);
}

extern "C" cudaError_t
tdm_k_bn_affine(float *scale, float *shift, const float *mean, const float *invstd,
                const float *gamma, const float *beta, int channels, cudaStream_t stream)
{
  if (channels <= 0)
    return cudaSuccess;
  bn_affine_kernel<<<tdm_k_blocks((size_t)channels, TDM_K_THREADS), TDM_K_THREADS, 0,
                     stream>>>(scale, shift, mean, invstd, gamma, beta, channels);
  return tdm_k_launched();
}

/* The forward in both modes is y = x · scale + shift per channel (then the ReLU):
 * training mode's scale = invstd · γ, evaluation's γ / √(running_var + eps), each
 * thread computing its channels' pairs once as the CPU reference computes them. With
 * a (not NULL): y = the bn's output (use_relu false) + a, then max(·, 0) when
 * add_relu, as add_out adds (a plain sum of two rounded values: nothing to contract).
 * With bits (a bf16 y), the mask of y as stored: a thread's V elements are V bits of one
 * word (V divides the channels, so they start at a multiple of V), eight a whole byte,
 * which it stores alone; four or one it ors into the word the launch cleared. */
template <bool EVAL, int V, typename X, typename Y, typename A>
__global__ void __launch_bounds__(BN_THREADS)
bn_forward_kernel(Y *y, const X *x, const float *mean, const float *spread,
                  const float *gamma, const float *beta, float eps, int rows, int channels,
                  BnSumShape s, bool use_relu, const A *a, bool add_relu, bool aligned,
                  uint32_t *bits, bool descending)
{
  int cl = threadIdx.x % s.ct, lane = threadIdx.x / s.ct;
  int ch = blockIdx.y * s.span + cl * V;
  if (ch >= channels || lane >= s.rl)
    return;
  float scale[V], shift[V];
  for (int j = 0; j < V; j++) {
    if (EVAL) {
      scale[j] = gamma[ch + j] / sqrtf(spread[ch + j] + eps);
      shift[j] = __fsub_rn(beta[ch + j], __fmul_rn(mean[ch + j], scale[j]));
    } else {
      bn_train_affine(ch + j, mean, spread, gamma, beta, &scale[j], &shift[j]);
    }
  }
  size_t C = (size_t)channels, R = (size_t)rows, lanes = (size_t)gridDim.x * s.rl;
  for (size_t q = (size_t)blockIdx.x * s.rl + lane; q < R; q += BN_PASS_BATCH * lanes) {
    BnRow<V, X> xr[BN_PASS_BATCH];
    BnRow<V, A> ar[BN_PASS_BATCH];
#pragma unroll
    for (int r = 0; r < BN_PASS_BATCH; r++)
      if (q + r * lanes < R) {
        size_t at = bn_pass_at(q + r * lanes, R, C, ch, descending);
        xr[r].load(x + at, aligned);
        if (a != NULL)
          ar[r].load(a + at, aligned);
      }
#pragma unroll
    for (int r = 0; r < BN_PASS_BATCH; r++)
      if (q + r * lanes < R) {
        size_t at = bn_pass_at(q + r * lanes, R, C, ch, descending);
        float v[V], w[V];
        xr[r].get(v);
        if (a != NULL)
          ar[r].get(w);
        for (int j = 0; j < V; j++) {
          v[j] = bn_affine_output(v[j], scale[j], shift[j], use_relu);
          if (a != NULL)
            v[j] = add_relu ? tdm_k_relu_value(v[j] + w[j]) : v[j] + w[j];
        }
        bn_store_row<V>(y + at, v, aligned);
        if (sizeof(Y) == 2 && bits != NULL) {
          unsigned m = 0;
          for (int j = 0; j < V; j++)
            m |= tdm_relu_bit(tdm_k_bf16_bits(v[j])) << j;
          if (V == 8)
            ((uint8_t *)bits)[at / 8] = (uint8_t)m;
          else
            atomicOr(&bits[at / 32], m << (at % 32));
        }
      }
  }
}

/* y of type Y (float, or uint16_t: bf16, rounded as it is stored), a of type A. */
template <bool EVAL, typename X, typename Y = float, typename A = float>
static cudaError_t
bn_forward_launch(Y *y, const X *x, const float *mean, const float *spread, const float *gamma,
                  const float *beta, float eps, int rows, int channels, bool relu,
                  bool descending, cudaStream_t stream, const A *a = NULL,
                  bool add_relu = false, uint32_t *bits = NULL)
{
  if (rows <= 0 || channels <= 0)
    return cudaSuccess;
  BnSumShape s = bn_pass_shape(rows, channels);
  if (bits != NULL && s.v != 8) {
    cudaError_t e =
        cudaMemsetAsync(bits, 0, TDM_RELU_BITS_WORDS((size_t)rows * channels) * 4, stream);
    if (e != cudaSuccess)
      return e;
  }
  bool aligned = bn_vec_aligned(y, s.v) && bn_vec_aligned(x, s.v) && (a == NULL || bn_vec_aligned(a, s.v));
  dim3 grid((unsigned)s.groups, (unsigned)s.tiles);
  unsigned threads = (unsigned)(s.ct * s.rl);
#define BN_FORWARD(V)                                                                          \
  bn_forward_kernel<EVAL, V, X, Y, A>                                                          \
      <<<grid, threads, 0, stream>>>(y, x, mean, spread, gamma, beta, eps, rows, channels, s,  \
                                     relu, a, add_relu, aligned, bits, descending)
  if (s.v == 8)
    BN_FORWARD(8);
  else if (s.v == 4)
    BN_FORWARD(4);
  else
    BN_FORWARD(1);
#undef BN_FORWARD
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_bn_forward(float *y, const void *x, bool x16, const float *mean, const float *invstd,
                 const float *gamma, const float *beta, int rows, int channels, bool relu,
                 bool descending, cudaStream_t stream)
{
  if (x16)
    return bn_forward_launch<false>(y, (const uint16_t *)x, mean, invstd, gamma, beta, 0.0f,
                                    rows, channels, relu, descending, stream);
  return bn_forward_launch<false>(y, (const float *)x, mean, invstd, gamma, beta, 0.0f, rows,
                                  channels, relu, descending, stream);
}

extern "C" cudaError_t
tdm_k_bn_forward_add(float *y, const void *x, bool x16, const float *mean, const float *invstd,
                     const float *gamma, const float *beta, const float *a, int rows,
                     int channels, bool relu, bool descending, cudaStream_t stream)
{
  if (x16)
    return bn_forward_launch<false>(y, (const uint16_t *)x, mean, invstd, gamma, beta, 0.0f,
                                    rows, channels, false, descending, stream, a, relu);
  return bn_forward_launch<false>(y, (const float *)x, mean, invstd, gamma, beta, 0.0f, rows,
                                  channels, false, descending, stream, a, relu);
}

/* The output stored as bf16, with an addend of type A (or none). */
template <typename A>
static cudaError_t
bn_forward_bf16_launch(uint16_t *y, const void *x, bool x16, const float *mean,
                       const float *invstd, const float *gamma, const float *beta, const A *a,
                       int rows, int channels, bool relu, uint32_t *bits, bool descending,
                       cudaStream_t stream)
{
  /* With an addend, bn_forward_add's order: the bn without its ReLU, the add, then it. */
  bool bn_relu = relu && a == NULL, add_relu = relu && a != NULL;
  if (x16)
    return bn_forward_launch<false>(y, (const uint16_t *)x, mean, invstd, gamma, beta, 0.0f,
                                    rows, channels, bn_relu, descending, stream, a, add_relu,
                                    bits);
  return bn_forward_launch<false>(y, (const float *)x, mean, invstd, gamma, beta, 0.0f, rows,
                                  channels, bn_relu, descending, stream, a, add_relu, bits);
}

extern "C" cudaError_t
tdm_k_bn_forward_bf16(uint16_t *y, const void *x, bool x16, const float *mean,
                      const float *invstd, const float *gamma, const float *beta, const void *a,
                      bool a16, int rows, int channels, bool relu, uint32_t *bits,
                      bool descending, cudaStream_t stream)
{
  if (a != NULL && a16)
    return bn_forward_bf16_launch(y, x, x16, mean, invstd, gamma, beta, (const uint16_t *)a,
                                  rows, channels, relu, bits, descending, stream);
  return bn_forward_bf16_launch(y, x, x16, mean, invstd, gamma, beta, (const float *)a, rows,
                                channels, relu, bits, descending, stream);
}

/* The evaluation's forward (running statistics) from either input type into Y. */
template <typename Y>
static cudaError_t
bn_forward_eval_launch(Y *y, const void *x, bool x16, const float *running_mean,
                       const float *running_var, const float *gamma, const float *beta,
                       float eps, int rows, int channels, bool relu, bool descending,
                       cudaStream_t stream)
{
  if (x16)
    return bn_forward_launch<true>(y, (const uint16_t *)x, running_mean, running_var, gamma,
                                   beta, eps, rows, channels, relu, descending, stream);
  return bn_forward_launch<true>(y, (const float *)x, running_mean, running_var, gamma, beta,
                                 eps, rows, channels, relu, descending, stream);
}

extern "C" cudaError_t
tdm_k_bn_forward_eval(float *y, const void *x, bool x16, const float *running_mean,
                      const float *running_var, const float *gamma, const float *beta,
                      float eps, int rows, int channels, bool relu, bool descending,
                      cudaStream_t stream)
{
  return bn_forward_eval_launch(y, x, x16, running_mean, running_var, gamma, beta, eps, rows,
                                channels, relu, descending, stream);
}

/* The forward kernel with the bn's own ReLU and then the addend, no ReLU after it (a
 * residual body that ends with bn, relu), a bf16 output. */
template <typename X, typename A>
static cudaError_t
bn_relu_add_launch(uint16_t *y, const X *x, const float *mean, const float *invstd,
                   const float *gamma, const float *beta, const A *a, int rows, int channels,
                   bool descending, cudaStream_t stream)
{
  return bn_forward_launch<false>(y, x, mean, invstd, gamma, beta, 0.0f, rows, channels, true,
                                  descending, stream, a, false);
}

extern "C" cudaError_t
tdm_k_bn_relu_add_bf16(uint16_t *y, const void *x, bool x16, const float *mean,
                       const float *invstd, const float *gamma, const float *beta,
                       const void *a, bool a16, int rows, int channels, bool descending,
                       cudaStream_t stream)
{
  if (x16 && a16)
    return bn_relu_add_launch(y, (const uint16_t *)x, mean, invstd, gamma, beta,
                              (const uint16_t *)a, rows, channels, descending, stream);
  if (x16)
    return bn_relu_add_launch(y, (const uint16_t *)x, mean, invstd, gamma, beta,
                              (const float *)a, rows, channels, descending, stream);
  if (a16)
    return bn_relu_add_launch(y, (const float *)x, mean, invstd, gamma, beta,
                              (const uint16_t *)a, rows, channels, descending, stream);
  return bn_relu_add_launch(y, (const float *)x, mean, invstd, gamma, beta, (const float *)a,
                            rows, channels, descending, stream);
}

/* bn_forward_eval's kernel with a bf16 output (Y = uint16_t), rounded as it is stored. */
extern "C" cudaError_t
tdm_k_bn_forward_eval_bf16(uint16_t *y, const void *x, bool x16, const float *running_mean,
                           const float *running_var, const float *gamma, const float *beta,
                           float eps, int rows, int channels, bool relu, bool descending,
                           cudaStream_t stream)
{
  return bn_forward_eval_launch(y, x, x16, running_mean, running_var, gamma, beta, eps, rows,
                                channels, relu, descending, stream);
}
