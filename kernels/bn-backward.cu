/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bn-backward.cu — batch normalization's input gradient on NHWC activations:
 * dx = γ·invstd·(dy − Σdβ/M − xhat·Σdγ/M) from dy, x and the per-channel sums
 * (bn-sums.cu's bn_backward_sums, all-reduced by the engine first when synchronized),
 * dy taken as 0 where the fused ReLU stopped the forward's value (its mask recomputed
 * from x with bn-value.cuh's operations), into float32 or into bf16 (the output
 * gradient of the conv before it): one memory-bound elementwise pass, downwards where
 * asked (it follows the sums' pass over the same dy and x: bn-layout.cuh's
 * bn_pass_at()), dy and x each read as float32 or as bfloat16, widened exactly as they
 * load.
 */
#include "tdm-kernels.h"
#include "common.cuh"
#include "bn-layout.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>

template <bool RELU, int V, typename T, typename X, typename D>
__global__ void __launch_bounds__(BN_THREADS)
bn_backward_dx_kernel(T *dx, const D *dy, const X *x, const float *mean, const float *invstd,
                      const float *gamma, const float *beta, const float *sum_dgamma,
                      const float *sum_dbeta, float inv_count, int rows, int channels,
                      BnSumShape s, bool aligned, bool descending)
{
  int cl = threadIdx.x % s.ct, lane = threadIdx.x / s.ct;
  int ch = blockIdx.y * s.span + cl * V;
  if (ch >= channels || lane >= s.rl)
    return;
  float k[V], a[V], c[V], scale[V], shift[V];
  for (int j = 0; j < V; j++) {
    bn_backward_coefficients(ch + j, mean, invstd, gamma, sum_dgamma, sum_dbeta, inv_count,
                             &k[j], &a[j], &c[j]);
    if (RELU)
      bn_train_affine(ch + j, mean, invstd, gamma, beta, &scale[j], &shift[j]);
  }
  size_t C = (size_t)channels, R = (size_t)rows, lanes = (size_t)gridDim.x * s.rl;
  for (size_t q = (size_t)blockIdx.x * s.rl + lane; q < R; q += BN_PASS_BATCH * lanes) {
    BnRow<V, D> gr[BN_PASS_BATCH];
    BnRow<V, X> xr[BN_PASS_BATCH];
#pragma unroll
    for (int r = 0; r < BN_PASS_BATCH; r++)
      if (q + r * lanes < R) {
        size_t at = bn_pass_at(q + r * lanes, R, C, ch, descending);
        gr[r].load(dy + at, aligned);
        xr[r].load(x + at, aligned);
      }
#pragma unroll
    for (int r = 0; r < BN_PASS_BATCH; r++)
      if (q + r * lanes < R) {
        size_t at = bn_pass_at(q + r * lanes, R, C, ch, descending);
        float g[V], v[V];
        gr[r].get(g);
        xr[r].get(v);
        for (int j = 0; j < V; j++) {
          float d = g[j];
          if (RELU && !(bn_affine_output(v[j], scale[j], shift[j], false) > 0.0f))
            d = 0.0f;
          g[j] = bn_backward_value(d, v[j], k[j], a[j], c[j]);
        }
        /* dx as float, or as bfloat16 rounded to nearest even (the bits to_bf16 gives
         * the float): a convolution's output gradient that its GEMMs read as bf16. */
        bn_store_row<V>(dx + at, g, aligned);
      }
  }
}

template <typename T, typename X, typename D>
static cudaError_t
bn_backward_dx_launch(T *dx, const D *dy, const X *x, const float *mean, const float *invstd,
                      const float *gamma, const float *beta, bool relu, const float *sum_dgamma,
                      const float *sum_dbeta, float inv_count, int rows, int channels,
                      bool descending, cudaStream_t stream)
{
  if (rows <= 0 || channels <= 0)
    return cudaSuccess;
  BnSumShape s = bn_pass_shape(rows, channels);
  bool aligned = bn_vec_aligned(dx, s.v) && bn_vec_aligned(dy, s.v) && bn_vec_aligned(x, s.v);
  dim3 grid((unsigned)s.groups, (unsigned)s.tiles);
  unsigned threads = (unsigned)(s.ct * s.rl);
#define BN_BACKWARD(R, V)                                                                      \
  bn_backward_dx_kernel<R, V, T, X, D><<<grid, threads, 0, stream>>>(                          \
      dx, dy, x, mean, invstd, gamma, beta, sum_dgamma, sum_dbeta, inv_count, rows, channels,  \
      s, aligned, descending)
  if (relu && s.v == 8)
    BN_BACKWARD(true, 8);
  else if (relu && s.v == 4)
    BN_BACKWARD(true, 4);
  else if (relu)
    BN_BACKWARD(true, 1);
  else if (s.v == 8)
    BN_BACKWARD(false, 8);
  else if (s.v == 4)
    BN_BACKWARD(false, 4);
  else
    BN_BACKWARD(false, 1);
#undef BN_BACKWARD
  return tdm_k_launched();
}

/* Either type of dy and of x into either type of dx. */
template <typename T>
static cudaError_t
bn_backward_dx_any(T *dx, const void *dy, bool dy16, const void *x, bool x16, const float *mean,
                   const float *invstd, const float *gamma, const float *beta, bool relu,
                   const float *sum_dgamma, const float *sum_dbeta, float inv_count, int rows,
                   int channels, bool descending, cudaStream_t stream)
{
#define BN_DX(D, X)                                                                            \
  bn_backward_dx_launch(dx, (const D *)dy, (const X *)x, mean, invstd, gamma, beta, relu,      \
                        sum_dgamma, sum_dbeta, inv_count, rows, channels, descending, stream)
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
                     bool descending, cudaStream_t stream)
{
  return bn_backward_dx_any(dx, dy, dy16, x, x16, mean, invstd, gamma, beta, relu, sum_dgamma,
                            sum_dbeta, inv_count, rows, channels, descending, stream);
}

extern "C" cudaError_t
tdm_k_bn_backward_dx_bf16(uint16_t *dx, const void *dy, bool dy16, const void *x, bool x16,
                          const float *mean, const float *invstd, const float *gamma,
                          const float *beta, bool relu, const float *sum_dgamma,
                          const float *sum_dbeta, float inv_count, int rows, int channels,
                          bool descending, cudaStream_t stream)
{
  return bn_backward_dx_any(dx, dy, dy16, x, x16, mean, invstd, gamma, beta, relu, sum_dgamma,
                            sum_dbeta, inv_count, rows, channels, descending, stream);
}
