/* bn-value.cuh — batch normalization's training-mode output of one value, shared by
 * layers.cu (the forward, and the backward's recomputed ReLU mask) and conv.cu (im2col
 * that normalizes as it gathers): one inline function, so every kernel that needs the
 * value compiles it to the same operations and gets the forward's bits. */
#pragma once

/* x · (invstd·γ) + (β − mean·invstd·γ), before any ReLU. */
__device__ inline float
bn_train_value(float x, int ch, const float *mean, const float *invstd, const float *gamma,
               const float *beta)
{
  float scale = invstd[ch] * gamma[ch];
  float shift = beta[ch] - mean[ch] * scale;
  return x * scale + shift;
}

/* Then the fused ReLU as bn_forward applies it (NaN passes through). */
__device__ inline float
bn_train_output(float x, int ch, const float *mean, const float *invstd, const float *gamma,
                const float *beta, bool relu)
{
  float v = bn_train_value(x, ch, mean, invstd, gamma, beta);
  return relu && v < 0.0f ? 0.0f : v;
}
