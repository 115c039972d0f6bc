/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bn-value.cuh — batch normalization's training-mode output of one value, shared by
 * bn-forward.cu (the forward), bn-sums.cu and bn-backward.cu (the backward's recomputed
 * ReLU mask), conv-im2col.cu and pool.cu (which normalize as they read), and the
 * backward's input gradient of one value (bn-backward.cu, conv-stem-bn.cu): one set of
 * inline functions, so every kernel that needs the value compiles it to the same
 * operations and gets the forward's bits. Each multiply and add is rounded alone
 * (__fmul_rn, __fadd_rn: never contracted into a fused multiply-add), as the CPU
 * reference computes them, so a normalized value has the CPU's bits too and its bf16
 * rounding the CPU's (a fused shift moved a column's bf16 value by a step a few times
 * in 20,000). */
#pragma once

/* The training forward as a per-channel affine map: scale = invstd·γ, shift = β −
 * mean·scale. Kernels that reuse a channel's pair many times compute it once. */
__device__ inline void
bn_train_affine(int ch, const float *mean, const float *invstd, const float *gamma,
                const float *beta, float *scale, float *shift)
{
  float s = __fmul_rn(invstd[ch], gamma[ch]);
  *scale = s;
  *shift = __fsub_rn(beta[ch], __fmul_rn(mean[ch], s));
}

/* x · scale + shift, then the fused ReLU as bn_forward applies it (NaN passes through). */
__device__ inline float
bn_affine_output(float x, float scale, float shift, bool relu)
{
  float v = __fadd_rn(__fmul_rn(x, scale), shift);
  return relu && v < 0.0f ? 0.0f : v;
}

/* A batch normalization that im2col or the pool applies to each value it reads: the
 * training forward's statistics and parameters, and its fused ReLU. Padding stays 0,
 * as it would around the normalized tensor. */
struct BnGather {
  const float *mean, *invstd, *gamma, *beta;
  bool relu;
};

/* x · (invstd·γ) + (β − mean·invstd·γ), before any ReLU. */
__device__ inline float
bn_train_value(float x, int ch, const float *mean, const float *invstd, const float *gamma,
               const float *beta)
{
  float scale, shift;
  bn_train_affine(ch, mean, invstd, gamma, beta, &scale, &shift);
  return __fadd_rn(__fmul_rn(x, scale), shift);
}

/* Then the fused ReLU. */
__device__ inline float
bn_train_output(float x, int ch, const float *mean, const float *invstd, const float *gamma,
                const float *beta, bool relu)
{
  float scale, shift;
  bn_train_affine(ch, mean, invstd, gamma, beta, &scale, &shift);
  return bn_affine_output(x, scale, shift, relu);
}

/* dx = k·dy + a·x + c per channel, the CPU reference's expansion of
 * γ·invstd·(dy − Σdβ/M − xhat·Σdγ/M), dy taken as 0 where a fused ReLU (RELU)
 * stopped the forward's value; the coefficients once a thread and channel, rounded
 * step by step as the CPU's plain C computes them. */
__device__ inline void
bn_backward_coefficients(int ch, const float *mean, const float *invstd, const float *gamma,
                         const float *sum_dgamma, const float *sum_dbeta, float inv_count,
                         float *k_out, float *a_out, float *c_out)
{
  float k = __fmul_rn(gamma[ch], invstd[ch]);
  float a = __fmul_rn(__fmul_rn(__fmul_rn(-k, invstd[ch]), sum_dgamma[ch]), inv_count);
  *k_out = k;
  *a_out = a;
  *c_out = __fsub_rn(__fmul_rn(__fmul_rn(-k, sum_dbeta[ch]), inv_count), __fmul_rn(a, mean[ch]));
}

/* Each product and sum rounded alone, never contracted, so that every instantiation
 * (dy, x and dx each float32 or bf16) gives the same bits for the same values. */
__device__ __forceinline__ float
bn_backward_value(float dy, float x, float k, float a, float c)
{
  return __fadd_rn(__fadd_rn(__fmul_rn(k, dy), __fmul_rn(a, x)), c);
}
