/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-counter-rng.h — the counter-based random numbers of augmentation and dropout.
 *
 * A number is a pure function of (key, epoch, sample index, element): no state, no
 * sequence, so the CPU and a GPU kernel, one replica or four, draw exactly the same
 * numbers for the same sample whatever shard it lands in. A key is made from the
 * run's seed and a stream (TDM_RNG_AUGMENT, TDM_RNG_DROPOUT + layer) so the streams
 * are independent. The mix is splitmix64's finalizer applied twice over the packed
 * counter (statistically fine for crops, flips and dropout masks; not cryptographic).
 * Plain C, usable from C and CUDA (host and device); no GLib. Not the shuffling of
 * the epoch's order (tdm-iterator.c), which is a host-side permutation.
 */
#pragma once

#include <stdint.h>

#ifdef __CUDACC__
#define TDM_CRNG_FN static __host__ __device__ __forceinline__
#else
#define TDM_CRNG_FN static inline
#endif

/* Streams, mixed into keys. Dropout layers use TDM_RNG_DROPOUT + their layer index. */
#define TDM_RNG_AUGMENT 0x61756775u /* "augu" */
#define TDM_RNG_DROPOUT 0x64000000u

TDM_CRNG_FN uint64_t
tdm_crng_mix(uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The key of one stream of one run. */
TDM_CRNG_FN uint64_t
tdm_crng_key(uint64_t seed, uint32_t stream)
{
  return tdm_crng_mix(seed + 0x9e3779b97f4a7c15ull * ((uint64_t)stream + 1));
}

/* 32 random bits for (key, epoch, sample, element). */
TDM_CRNG_FN uint32_t
tdm_crng_u32(uint64_t key, uint32_t epoch, uint32_t sample, uint32_t element)
{
  uint64_t h = tdm_crng_mix(key ^ ((uint64_t)epoch * 0xd6e8feb86659fd93ull));
  h = tdm_crng_mix(h ^ (((uint64_t)sample << 32) | element));
  return (uint32_t)(h >> 32);
}

/* A float uniform in [0, 1), 24 bits of it (exact in float on every device). */
TDM_CRNG_FN float
tdm_crng_uniform(uint64_t key, uint32_t epoch, uint32_t sample, uint32_t element)
{
  return (float)(tdm_crng_u32(key, epoch, sample, element) >> 8) * (1.0f / 16777216.0f);
}
