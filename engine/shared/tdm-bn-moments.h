/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-bn-moments.h — batch normalization's statistics in one pass, the rule that
 * combines them over replicas, and what bn_stats makes of the merged ones: plain C for
 * the CPU backend and the CUDA kernels alike (host and device), so both compute the
 * same numbers the same way. No GLib, no reading of tensors: the backends' loops feed
 * these functions. Shifted sums and Chan's pairwise merge, so no cancellation whatever
 * the mean and the same bits on every replica (docs/ARCHITECTURE.md, "Batch-norm
 * statistics across replicas").
 *
 * A slot for C channels is TDM_BN_SLOT_FLOATS(C) floats: mean_hi[C], mean_lo[C],
 * m2[C], count_hi, count_lo (count = count_hi · 2²⁴ + count_lo, each part an integer
 * below 2²⁴, exact in float).
 */
#pragma once

#include <math.h>

#ifdef __CUDACC__
#define TDM_BNM_FN static __host__ __device__ __forceinline__
#else
#define TDM_BNM_FN static inline
#endif

#define TDM_BN_SLOT_FLOATS(channels) (3 * (size_t)(channels) + 2)
#define TDM_BN_COUNT_SPLIT 16777216.0 /* 2^24 */

/* mean and M2 of n values from their shifted sums (n > 0). */
TDM_BNM_FN void
tdm_bnm_finish(double shift, double s1, double s2, double n, double *mean, double *m2)
{
  double d = s1 / n;
  double m = s2 - s1 * d;
  *mean = shift + d;
  *m2 = m > 0.0 ? m : 0.0;
}

/* Writes channel ch's statistics into a slot (count written by the caller once). */
TDM_BNM_FN void
tdm_bnm_store(float *slot, int channels, int ch, double mean, double m2)
{
  float hi = (float)mean;
  slot[ch] = hi;
  slot[channels + ch] = (float)(mean - (double)hi);
  slot[2 * channels + ch] = (float)m2;
}

TDM_BNM_FN void
tdm_bnm_store_count(float *slot, int channels, double count)
{
  double hi = (double)(long long)(count / TDM_BN_COUNT_SPLIT);
  slot[3 * channels] = (float)hi;
  slot[3 * channels + 1] = (float)(count - hi * TDM_BN_COUNT_SPLIT);
}

TDM_BNM_FN double
tdm_bnm_count(const float *slot, int channels)
{
  return (double)slot[3 * channels] * TDM_BN_COUNT_SPLIT + (double)slot[3 * channels + 1];
}

/* One slot's channel ch, of count rows, merged into the running (*n, *mean, *m2): a
 * step of tdm_bnm_merge. An empty slot (a replica with no samples this step) counts
 * for nothing. */
TDM_BNM_FN void
tdm_bnm_merge_slot(const float *slot, double count, int channels, int ch, double *n,
                   double *mean, double *m2)
{
  if (count <= 0.0)
    return;
  double mb = (double)slot[ch] + (double)slot[channels + ch];
  double qb = (double)slot[2 * channels + ch];
  double sum = *n + count;
  double delta = mb - *mean;
  *mean += delta * (count / sum);
  *m2 += qb + delta * delta * (*n * count / sum);
  *n = sum;
}

/* Channel ch over slot_count slots merged in slot order. *n is 0 when every slot is
 * empty. */
TDM_BNM_FN void
tdm_bnm_merge(const float *slots, int slot_count, int channels, int ch, double *n,
              double *mean, double *m2)
{
  double na = 0.0, ma = 0.0, qa = 0.0;
  for (int s = 0; s < slot_count; s++) {
    const float *slot = slots + (size_t)s * TDM_BN_SLOT_FLOATS(channels);
    tdm_bnm_merge_slot(slot, tdm_bnm_count(slot, channels), channels, ch, &na, &ma, &qa);
  }
  *n = na;
  *mean = ma;
  *m2 = qa;
}

/* bn_stats for channel ch from its merged count, mean and M2 (tdm-backend.h says the
 * rule): saved = [mean[C], invstd[C]] and, where running_mean is not NULL, the running
 * averages. */
TDM_BNM_FN void
tdm_bnm_stats(float *saved, int channels, int ch, double count, double mean_d, double m2,
              float eps, float momentum, float *running_mean, float *running_var)
{
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
