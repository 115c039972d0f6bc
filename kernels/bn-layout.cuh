/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bn-layout.cuh — how the batch-normalization kernels (bn-sums.cu, bn-forward.cu,
 * bn-backward.cu) lay a rows × channels NHWC tensor over a block's threads: V
 * consecutive channels a thread (8, 4 or 1, by the channel count alone), tiles of
 * channels across, the rest of the block's threads row lanes; a row's V values
 * loaded in one or two 16-byte accesses where aligned (bf16 kept packed until it is
 * added), and stored so; and the shape of the elementwise passes (forward, input
 * gradient) and the direction they walk the rows in. Device code and host launch
 * helpers; no GLib.
 */
#pragma once

#include "common.cuh"

#include <stdint.h>

/* Threads a block, in every bn kernel. */
#define BN_THREADS 256

/* The launch's shape, computed once on the host (an elementwise pass's has no sets). */
struct BnSumShape {
  int v;      /* channels a thread */
  int ct;     /* threads across a tile's channels */
  int rl;     /* row lanes: BN_THREADS / ct */
  int span;   /* channels a tile: ct · v */
  int tiles, groups, sets;
};

/* V values of one row from p, as floats: one or two 16-byte loads where aligned. */
template <int V, typename T>
__device__ __forceinline__ void
bn_load_row(float *v, const T *p, bool aligned)
{
  if ((V == 4 || V == 8) && aligned) {
    tdm_k_vec<V>::load(v, p);
  } else {
    for (int j = 0; j < V; j++)
      v[j] = tdm_k_load1(p + j);
  }
}

/* A row's V values as loaded, widened to float only when added: bf16 stays packed
 * two to a register, so that a batch of rows in flight costs half the registers. */
template <int V, typename T>
struct BnRow {
  float f[V];
  __device__ __forceinline__ void load(const T *p, bool aligned) { bn_load_row<V>(f, p, aligned); }
  __device__ __forceinline__ void get(float *v) const
  {
    for (int j = 0; j < V; j++)
      v[j] = f[j];
  }
};

template <int V>
struct BnRow<V, uint16_t> {
  static constexpr int words = (V + 1) / 2;
  unsigned w[words];
  __device__ __forceinline__ void
  load(const uint16_t *p, bool aligned)
  {
    if (V == 8 && aligned) {
      uint4 t = *(const uint4 *)p;
      w[0] = t.x;
      w[1 % words] = t.y;
      w[2 % words] = t.z;
      w[3 % words] = t.w;
    } else if (V == 4 && aligned) {
      uint2 t = *(const uint2 *)p;
      w[0] = t.x;
      w[1 % words] = t.y;
    } else {
      for (int j = 0; j < words; j++)
        w[j] = p[2 * j] | (2 * j + 1 < V ? (unsigned)p[2 * j + 1] << 16 : 0u);
    }
  }
  __device__ __forceinline__ void
  get(float *v) const
  {
    for (int j = 0; j < V; j++)
      v[j] = __uint_as_float(j % 2 == 0 ? w[j / 2] << 16 : w[j / 2] & 0xffff0000u);
  }
};

/* Whether p allows tdm_k_vec<v>'s accesses of its type: 16 bytes, 8 for four bf16. */
template <typename T>
static bool
bn_vec_aligned(const T *p, int v)
{
  size_t bytes = (size_t)v * sizeof(T) < 16 ? (size_t)v * sizeof(T) : 16;
  return v == 1 || ((uintptr_t)p & (bytes - 1)) == 0;
}

/* The channel split shared by the sums and the elementwise passes: V channels a
 * thread (8, 4 or 1, by the channel count alone), tiles of at most tile_channels
 * (and 32 threads) across, the rest of a block's threads row lanes. */
static inline void
bn_channel_split(BnSumShape *s, int channels, int tile_channels)
{
  s->v = channels % 8 == 0 ? 8 : channels % 4 == 0 ? 4 : 1;
  int vectors = channels / s->v;
  int most_ct = tile_channels / s->v < 32 ? tile_channels / s->v : 32;
  s->tiles = (vectors + most_ct - 1) / most_ct;
  s->ct = (vectors + s->tiles - 1) / s->tiles;
  s->rl = BN_THREADS / s->ct;
  s->span = s->ct * s->v;
}

/* The elementwise passes (forward, input gradient) own channels as the sums do: a
 * thread keeps V channels' coefficients in registers and walks rows, so that no
 * element divides its index by the channel count or reloads its channel's
 * parameters, and a row is read and written contiguously in 16-byte accesses. A
 * thread loads BN_PASS_BATCH rows before it writes any (y may be x: a thread reads
 * and writes only its own elements). Grids of up to BN_PASS_BLOCKS blocks, rows
 * grid-strided, upwards or downwards (bn_pass_at()). (One element's channel from a
 * 32-bit modulo and 8-byte accesses ran these passes at 1.4–1.7 TB/s past 64 channels
 * on an H100, 2026-12-06.) */
#define BN_PASS_BATCH 4
#define BN_PASS_BLOCKS 2048

/* The pass's shape: the channel split in tiles of up to 256 channels, groups of rows. */
static inline BnSumShape
bn_pass_shape(int rows, int channels)
{
  BnSumShape s;
  bn_channel_split(&s, channels, 8 * 32);
  size_t per_block = (size_t)s.rl * BN_PASS_BATCH;
  size_t groups = ((size_t)rows + per_block - 1) / per_block;
  size_t most = BN_PASS_BLOCKS / (size_t)s.tiles;
  if (most < 1)
    most = 1;
  s.groups = (int)(groups < most ? (groups < 1 ? 1 : groups) : most);
  s.sets = 0;
  return s;
}

/* Where an elementwise pass's work row `row` of `rows` (a thread's rows are its block's
 * row lane, then a grid's row lanes further each) puts the thread's V channels from ch:
 * the element offset in the traversal's direction (tdm_k_walk), so that a descending
 * pass's block 0 takes the last rows and its rows step down. A row's channels keep
 * their order, so each access keeps its width and alignment. */
__device__ __forceinline__ size_t
bn_pass_at(size_t row, size_t rows, size_t channels, int ch, bool descending)
{
  return tdm_k_walk(row, rows, descending) * channels + (size_t)ch;
}

/* V values into memory of type T, in one or two 16-byte stores where aligned. */
template <int V, typename T>
__device__ __forceinline__ void
bn_store_row(T *p, const float *v, bool aligned)
{
  if ((V == 4 || V == 8) && aligned) {
    tdm_k_vec<V>::store(p, v);
  } else {
    for (int j = 0; j < V; j++)
      tdm_k_store1(p + j, v[j]);
  }
}
