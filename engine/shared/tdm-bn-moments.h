/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-bn-moments.h — batch normalization's statistics in one pass, and the rule that
 * combines them over replicas: plain C for the CPU backend and the CUDA kernels alike
 * (host and device), so both compute the same numbers the same way. No GLib, no
 * reading of tensors: the backends' loops feed these functions. Shifted sums and Chan's
 * pairwise merge, so no cancellation whatever the mean and the same bits on every
 * replica (docs/ARCHITECTURE.md, "Batch-norm statistics across replicas").
 *
 * A slot for C channels is TDM_BN_SLOT_FLOATS(C) floats: mean_hi[C], mean_lo[C],
 * m2[C], count_hi, count_lo (count = count_hi · 2²⁴ + count_lo, each part an integer
 * below 2²⁴, exact in float).
 */
#pragma once

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

/* Channel ch over slot_count slots merged in slot order; empty slots (a replica with
 * no samples this step) count for nothing. *n is 0 when every slot is empty. */
TDM_BNM_FN void
tdm_bnm_merge(const float *slots, int slot_count, int channels, int ch, double *n,
              double *mean, double *m2)
{
  double na = 0.0, ma = 0.0, qa = 0.0;
  for (int s = 0; s < slot_count; s++) {
    const float *slot = slots + (size_t)s * TDM_BN_SLOT_FLOATS(channels);
    double nb = tdm_bnm_count(slot, channels);
    if (nb <= 0.0)
      continue;
    double mb = (double)slot[ch] + (double)slot[channels + ch];
    double qb = (double)slot[2 * channels + ch];
    double sum = na + nb;
    double delta = mb - ma;
    ma += delta * (nb / sum);
    qa += qb + delta * delta * (na * nb / sum);
    na = sum;
  }
  *n = na;
  *mean = ma;
  *m2 = qa;
}
