/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bn-sums.cu — batch normalization's per-channel sums on NHWC activations, its only
 * reductions: the statistics' shifted sums (bn_moments: one read of x, finished into
 * this replica's slot by tdm-bn-moments.h's rule, the CPU's; with one slot, the
 * statistics from it in the same finish, bn_moments_stats), the backward's Σdy·xhat
 * and Σdy (bn_backward_sums, with the fused ReLU's mask recomputed from x), and a
 * block's start in backward that writes the bn's gradient and makes its sums in the
 * same pass (add_relu_backward_bn_sums_bf16), a projection's compact share added as it
 * loads.
 *
 * The sums run in one deterministic launch in double (each block sums a fixed slice of
 * rows into partials, and the last blocks to finish add the partials in a fixed
 * order): no float atomics, so the same inputs give the same bits, and the precision
 * matches the CPU reference, which also sums in double. x (and dy) are read as float32
 * or as bfloat16 (X = uint16_t: a conv's output a bf16 run stores so), widened exactly
 * as they load. Not here: the merge of several slots and the forward (bn-forward.cu),
 * the input gradient (bn-backward.cu), and the all-reduce of synchronized BN, which the
 * engine does between these launches.
 */
#include "tdm-kernels.h"
#include "tdm-bn-moments.h"
#include "tdm-relu-bits.h"
#include "common.cuh"
#include "bn-layout.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>
#include <math.h>

/* Sums over rows, in one launch. The rows × channels tensor is cut into channel
 * tiles of up to BN_TILE_CHANNELS (blockIdx.y) and row groups (blockIdx.x). In a
 * block, each thread owns V consecutive channels (V = 8, 4 or 1: what the channel
 * count allows, whatever the element type, so that bf16 and float32 inputs of the
 * same values give the same bits) of every rl-th row: the ct threads of a tile's row
 * read it contiguously, one 16-byte load for eight bf16 channels (two for float32),
 * and a thread issues a batch of rows' loads before it adds them. Each thread adds
 * its rows in order, in float runs of BN_FLOAT_RUN rows that it adds in double; the
 * block then adds its row lanes in order into the group's partial. The finish is folded in: a group that has written its partial
 * counts itself in its set of BN_SET groups (an atomic counter per tile and set,
 * reset by the last); the last of a set adds the set's partials in group order, and
 * the last set of a tile adds the sets' sums in order and finishes the tile's
 * channels (one level where a tile has one set). Every addition's order is fixed by
 * rows and channels alone: no float atomics, the same bits every run. Narrow tiles
 * keep each finish short (a set of 32 partials of 64 channels is about a trip to L2
 * and back) and give small tensors enough blocks. (The two-launch version before
 * this, 32 channels × 8 row lanes of 2-byte loads and a separate finish over a
 * thousand groups, read at 1.1 TB/s on an H100; bench/NOTES.md has both.) */
#define BN_SET 32
#define BN_TILE_CHANNELS 64
static_assert(BN_TILE_CHANNELS <= 64, "bn_add_partials: a tile's values fit half a block");
/* Rows a thread adds: BN_ROWS_PER_THREAD, or down to BN_MIN_ROWS_PER_THREAD where that
 * leaves fewer than BN_FILL_BLOCKS blocks (two an SM of a 132-SM Hopper); at most
 * BN_MAX_BLOCKS blocks. Long runs of rows a block keep its finish (the lanes' and the
 * groups' sums) small beside its reads. Fixed numbers, not the GPU's SM count, so
 * that the sums' bits are the same on every GPU. (16-channel sets, 128- or 256-channel
 * tiles, 16 rows a thread or a fill of 132 or 528 blocks were each slower on an H100; at
 * most 528 blocks rather than 264 made the backward sums 8 % slower there.) */
#define BN_ROWS_PER_THREAD 32
#define BN_MIN_ROWS_PER_THREAD 8
#define BN_FILL_BLOCKS 264
#define BN_MAX_BLOCKS 264

/* SUM_START, or-ed into a backward mode: the block start's pass, its dy made as it
 * loads (bn_start_row); SUM_PROJECTION, or-ed in too: its share a projection's compact
 * one (bn_strided_row), an instantiation of its own, so that the other starts' code is
 * what it was. SUM_BASE: the mode without them. */
enum {
  SUM_SHIFTED = 0,
  SUM_BACKWARD = 2,
  SUM_BACKWARD_RELU = 3,
  SUM_START = 4,
  SUM_PROJECTION = 8
};
#define SUM_BASE(mode) ((mode) & 3)

/* The block start's inputs and output (SUM_START): the skip's share (bf16, NULL: none)
 * or (SUM_PROJECTION) a projection's compact float32 one, of the pixels of h × w images
 * its 1×1 conv of this stride reads, the ReLU's mask below as bits (tdm-relu-bits.h;
 * NULL: no ReLU), dx the rounded sum. */
struct BnStart {
  const uint16_t *skip;
  const float *strided;
  int h, w, stride;
  const uint32_t *mask;
  uint16_t *dx;
};

/* The moments' statistics from their slot in the same finish (saved NULL: none),
 * bn_stats's arguments: with one slot, the thread that stores channel c's mean and M2
 * merges them back as bn_stats would read them, no second launch. */
struct BnStats {
  float *saved;
  float eps, momentum;
  float *running_mean, *running_var;
};

/* What the kernel reads and where it writes. partials: groups · 2 · channels doubles
 * (the groups' sums), then sets · 2 · channels (the sets'); counters: tiles · sets for
 * the sets, then tiles for the tiles, all zero between launches. */
template <typename X, typename D>
struct BnSumArgs {
  const X *x;
  const D *dy;
  const float *mean, *invstd, *gamma, *beta;
  int rows, channels;
  double *partials;
  unsigned *counters;
  /* The finish: out0, out1 (backward), or this replica's slot of `slots` (moments). */
  float *out0, *out1, *slots;
  int slot, slot_count;
  bool aligned;  /* x and dy (and the start's skip, strided, dx) allow the vector accesses */
  BnStart start; /* SUM_START: dy is the first layer's input gradient a */
  BnStats stats; /* SUM_SHIFTED, one slot */
};

/* A row as bn_load_row widens it (bf16 through __bfloat162float, as tdm_k_vec and
 * tdm_k_load1 do: the same bits, a NaN's included), from a BnRow loaded before. */
template <int V>
__device__ __forceinline__ void
bn_widen_row(float *v, const BnRow<V, float> &r)
{
  r.get(v);
}

template <int V>
__device__ __forceinline__ void
bn_widen_row(float *v, const BnRow<V, uint16_t> &r)
{
  for (int j = 0; j < V; j++)
    v[j] = __bfloat162float(__ushort_as_bfloat16(
        (unsigned short)(j % 2 == 0 ? r.w[j / 2] & 0xffffu : r.w[j / 2] >> 16)));
}

/* A row's V channels of a projection's share (SUM_PROJECTION; the row's first element at
 * `at`): the compact share's where its 1×1 conv reads the row's pixel, else 0, which is
 * added all the same (a + 0 turns −0 into +0, as tdm_k_add_strided_bf16 adds). The
 * pixel from the row's index: 32-bit divisions, a few a row of V values, in a pass that
 * waits on memory. */
template <int V, typename X, typename D>
__device__ __forceinline__ void
bn_strided_row(float *v, const BnSumArgs<X, D> &a, size_t at, size_t row)
{
  const BnStart &st = a.start;
  unsigned w = (unsigned)st.w, h = (unsigned)st.h, s = (unsigned)st.stride;
  unsigned line = (unsigned)row / w, x = (unsigned)row - line * w;
  unsigned image = line / h, y = line - image * h;
  if (x % s != 0 || y % s != 0) {
    for (int j = 0; j < V; j++)
      v[j] = 0.0f;
    return;
  }
  size_t oh = (h - 1) / s + 1, ow = (w - 1) / s + 1;
  size_t pixel = ((size_t)image * oh + y / s) * ow + x / s;
  bn_load_row<V>(v, st.strided + pixel * a.channels + (at - row * a.channels), a.aligned);
}

/* The block start's inputs for one row (SUM_START): a (in dy), the share, the skip's or
 * (P, SUM_PROJECTION) the projection's, and the mask's bits (a row's V channels start
 * at a multiple of V, V dividing the channels and 32: V bits of one word,
 * tdm_relu_bits_from(), which the warp's threads share; an eighth of a byte an element
 * where the bf16 output it stands for was two), packed as loaded. A batch's rows are all
 * loaded before its first dx store: a load issued after a store waits behind it, the
 * compiler being unable to move it past one (dx may be a or the skip; never the
 * projection's share, which another thread's row may read after this one's store). A
 * bf16 a with no share and no mask is a copy: nothing more to load. */
template <int V, typename D, bool P>
struct BnStartRow {
  BnRow<V, D> d;
  BnRow<V, uint16_t> s;
  BnRow<V, float> p;
  unsigned m;
  template <typename X>
  __device__ __forceinline__ void load(const BnSumArgs<X, D> &a, size_t at, size_t row)
  {
    d.load(a.dy + at, a.aligned);
    if (P)
      bn_strided_row<V>(p.f, a, at, row);
    if (P || !(sizeof(D) == 2 && a.start.skip == NULL && a.start.mask == NULL)) {
      if (!P && a.start.skip != NULL)
        s.load(a.start.skip + at, a.aligned);
      if (a.start.mask != NULL)
        m = tdm_relu_bits_from(a.start.mask, at);
    }
  }
};

/* The block start's gradient for V channels of one row (SUM_START): a's values plus
 * the share where the mask's bit is set, else 0, rounded once to bf16 into dx and
 * widened back into g: tdm_k_add_relu_backward_bf16's bits, or (P) those of
 * tdm_k_add_strided_bf16 then the mask (a bf16 sum's rounding gives it back; masking
 * commutes with rounding), or with no share tdm_k_relu_backward_bf16's,
 * tdm_k_to_bf16's, or (a bf16, no mask) a copy's (a NaN's bits kept: the widened
 * value's high half). The inputs come from r, loaded before, or (r NULL: the last rows,
 * one at a time) from memory here; either way a row's elements are read and written by
 * one thread only, each read before its write. */
template <int V, bool P, typename X, typename D>
__device__ __forceinline__ void
bn_start_row(float *g, const BnSumArgs<X, D> &a, size_t at, size_t row,
             const BnStartRow<V, D, P> *r)
{
  float v[V];
  unsigned h[V];
  if (r != NULL)
    bn_widen_row<V>(v, r->d);
  else
    bn_load_row<V>(v, a.dy + at, a.aligned);
  if (!P && sizeof(D) == 2 && a.start.skip == NULL && a.start.mask == NULL) {
    for (int j = 0; j < V; j++)
      h[j] = __float_as_uint(v[j]) >> 16;
  } else {
    float t[V];
    if (P || a.start.skip != NULL) {
      if (P && r != NULL)
        r->p.get(t);
      else if (P)
        bn_strided_row<V>(t, a, at, row);
      else if (r != NULL)
        bn_widen_row<V>(t, r->s);
      else
        bn_load_row<V>(t, a.start.skip + at, a.aligned);
      for (int j = 0; j < V; j++)
        v[j] = v[j] + t[j];
    }
    if (a.start.mask != NULL) {
      unsigned m = r != NULL ? r->m : tdm_relu_bits_from(a.start.mask, at);
      for (int j = 0; j < V; j++)
        v[j] = m >> j & 1u ? v[j] : 0.0f;
    }
    for (int j = 0; j < V; j++)
      h[j] = tdm_k_bf16_bits(v[j]);
  }
  uint16_t *p = a.start.dx + at;
  if (V == 8 && a.aligned)
    *(uint4 *)p = make_uint4(h[0] | h[1 % V] << 16, h[2 % V] | h[3 % V] << 16,
                             h[4 % V] | h[5 % V] << 16, h[6 % V] | h[7 % V] << 16);
  else if (V == 4 && a.aligned)
    *(uint2 *)p = make_uint2(h[0] | h[1 % V] << 16, h[2 % V] | h[3 % V] << 16);
  else
    for (int j = 0; j < V; j++)
      p[j] = (uint16_t)h[j];
  for (int j = 0; j < V; j++)
    g[j] = __uint_as_float(h[j] << 16);
}

/* Adds `count` rows of 2 · channels doubles, src[k · 2 · channels + i], for this
 * tile's values into dst (the same layout, one row) and into sh[i] (i = which · span +
 * j · ct + cl, as the block's own sums). A tile has 2 · span ≤ 128 values and a block
 * at least twice as many threads: the rows are cut into `parts` consecutive runs, one
 * thread a value and run, each adding its run in order with eight rows' loads in
 * flight, then the runs' sums are added in order: a fixed order, and half or less of
 * the trips to L2 of one thread a value. */
__device__ inline void
bn_add_partials(double *dst, double *sh, const double *src, int count, int channels,
                int ch0, const BnSumShape &s)
{
  const int chunk = 8;
  int values = 2 * s.span, parts = (int)blockDim.x / values;
  int i = threadIdx.x % values, part = threadIdx.x / values;
  int r = i % s.span;
  int c = ch0 + (r % s.ct) * s.v + r / s.ct;
  bool mine = part < parts && c < channels;
  int per = (count + parts - 1) / parts;
  int k0 = part * per, k1 = min(count, k0 + per);
  size_t row = 2 * (size_t)channels;
  const double *p = src + (size_t)(i / s.span) * channels + (c < channels ? c : 0);
  double acc = 0.0;
  if (mine) {
    int k = k0;
    for (; k + chunk <= k1; k += chunk) {
      double t[chunk];
#pragma unroll
      for (int u = 0; u < chunk; u++)
        t[u] = __ldcg(p + (size_t)(k + u) * row);
#pragma unroll
      for (int u = 0; u < chunk; u++)
        acc += t[u];
    }
    for (; k < k1; k++)
      acc += __ldcg(p + (size_t)k * row);
  }
  double *runs = sh + BN_THREADS; /* past the values, sh holds 2 · BN_THREADS doubles */
  if (part < parts)
    runs[part * values + i] = acc;
  __syncthreads();
  if (part == 0 && c < channels) {
    double t = 0.0;
    for (int q = 0; q < parts; q++)
      t += runs[q * values + i];
    if (dst != NULL)
      dst[(size_t)(i / s.span) * channels + c] = t;
    sh[i] = t;
  }
}

/* Whether this block is the last of `expected` to arrive at *counter (which it then
 * resets): the writes before it by every block are visible to the last one. */
__device__ inline bool
bn_arrive_last(unsigned *counter, unsigned expected)
{
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned before = atomicAdd(counter, 1u);
    last = before == expected - 1;
    if (last)
      *counter = 0;
  }
  __syncthreads();
  if (last)
    __threadfence();
  return last;
}

/* Rows a thread adds in float before it adds their sum into its double sums. Double
 * additions and float-to-double conversions go at a quarter of float's rate or less on
 * an H100: one of each a value kept these passes short of their reads' speed. A run of
 * 16 rows in float costs about 16 · 2⁻²⁴ of the run's magnitude, far below bf16's
 * rounding. Counted in rows, not in load batches: the same bits whatever a batch holds
 * (bf16 or float32 x, the block start's pass or the plain one). */
#define BN_FLOAT_RUN 16

/* One row's V values into the thread's float run (its order: rows ascending). */
template <int MODE, int V>
__device__ __forceinline__ void
bn_sums_row(float *f0, float *f1, const float *v, float *g, const float *k, const float *m,
            const float *is, const float *scale, const float *shift)
{
  for (int j = 0; j < V; j++) {
    if (MODE == SUM_SHIFTED) {
      float d = v[j] - k[j];
      f0[j] += d;
      f1[j] = fmaf(d, d, f1[j]);
    } else {
      if (MODE == SUM_BACKWARD_RELU &&
          !(bn_affine_output(v[j], scale[j], shift[j], false) > 0.0f))
        g[j] = 0.0f;
      float xhat = (v[j] - m[j]) * is[j];
      f0[j] = fmaf(g[j], xhat, f0[j]);
      f1[j] += g[j];
    }
  }
}

/* The backward passes' double sums (SHARED): the thread's own slots of sh, p[which ·
 * span + j · ct] = sh[lane · 2 · span + which · span + j · ct + cl] for its channel j,
 * where the block's lane sum reads them, zeroed here. Unused (SHARED false) in the
 * moments, whose sums are registers. */
template <int V, bool SHARED>
struct BnSharedSums {
  double *p;
  int ct, span;
  __device__ __forceinline__ BnSharedSums(double *sh, const BnSumShape &s, int lane, int cl,
                                          bool mine)
      : p(sh + (size_t)lane * 2 * s.span + cl), ct(s.ct), span(s.span)
  {
    if (SHARED && mine)
      for (int j = 0; j < V; j++)
        p[j * ct] = p[span + j * ct] = 0.0;
  }
};

/* The float run into the double sums, once `rows` reach BN_FLOAT_RUN (or always, at
 * the end): into the registers a0, a1, or (SHARED) into sa's slots of sh. */
template <int V, bool SHARED>
__device__ __forceinline__ void
bn_sums_flush(double *a0, double *a1, const BnSharedSums<V, SHARED> &sa, float *f0, float *f1,
              int *rows, bool always)
{
  if (!always && *rows < BN_FLOAT_RUN)
    return;
  for (int j = 0; j < V; j++) {
    if (SHARED) {
      sa.p[j * sa.ct] += (double)f0[j];
      sa.p[sa.span + j * sa.ct] += (double)f1[j];
    } else {
      a0[j] += (double)f0[j];
      a1[j] += (double)f1[j];
    }
    f0[j] = f1[j] = 0.0f;
  }
  *rows = 0;
}

/* Rows whose loads a thread issues before it adds any of them: about 128 bytes of x
 * for the moments (eight rows of eight bf16 channels: at 524288 × 64 on an H100 39.5 µs
 * against 50.0 with four, the read-only pass being short of loads in flight), 64 of each
 * of x and dy in the backward sums (65.2 → 58.9 µs at 524288 × 64, 36.5 → 34.1 at
 * 131072 × 128) and 32 in the block start's, which reads a third tensor and gained
 * nothing from 64 — within the registers that let two blocks share an SM. The order of
 * the additions does not depend on it: the same bits either way. */
template <int MODE, int V, typename X>
struct BnBatch {
  static constexpr int raw =
      (MODE == SUM_SHIFTED ? 128 : (MODE & SUM_START) ? 32 : 64) / (V * (int)sizeof(X));
  static constexpr int rows = raw < 1 ? 1 : raw > 8 ? 8 : raw;
};

/* Where each pass keeps what, all three at two blocks an SM. The backward passes keep
 * a thread's double sums (2 · V doubles, a quarter of its registers at V = 8) in its own
 * slots of sh, where the block's lane sum reads them: that frees the registers whose
 * lack made the block start's ReLU instantiation spill. The moments keep theirs in
 * registers, about 11 % faster (34.4 against 38.4 µs at 524288 × 64 on an H100). The
 * block start's pass loads a whole batch's a, skip and mask before its first dx store
 * (BnStartRow): with the shared sums, 152 → 122 µs at 524288 × 64 on an H100 (82 → 67
 * at 131072 × 128), the backward sums 60.1 → 58.8. None of it changes a bit: each
 * thread adds its rows in ascending order (batch after batch, a batch's rows in order)
 * in float runs of BN_FLOAT_RUN rows, each run into the same double sum, and the
 * block's lanes, the groups and the sets are added in the same order either way. */
template <int MODE, int V, typename X, typename D>
__global__ void __launch_bounds__(BN_THREADS, 2)
bn_sums_kernel(BnSumArgs<X, D> a, BnSumShape s)
{
  constexpr bool shared_sums = MODE != SUM_SHIFTED;
  constexpr bool projection = (MODE & SUM_PROJECTION) != 0;
  __shared__ double sh[BN_THREADS * 2 * V];
  int cl = threadIdx.x % s.ct, lane = threadIdx.x / s.ct;
  int tile = blockIdx.y, group = blockIdx.x;
  int ch0 = tile * s.span;
  int ch = ch0 + cl * V; /* the thread's first channel; channels % V == 0 */
  int C = a.channels;
  double a0[V], a1[V];
  float f0[V], f1[V];
  int run = 0;
  for (int j = 0; j < V; j++) {
    a0[j] = a1[j] = 0.0;
    f0[j] = f1[j] = 0.0f;
  }
  BnSharedSums<V, shared_sums> acc(sh, s, lane, cl, lane < s.rl);
  if (ch < C && lane < s.rl) {
    float k[V], m[V], is[V], scale[V], shift[V];
    if (MODE == SUM_SHIFTED)
      bn_load_row<V>(k, a.x + ch, false);
    if (MODE >= SUM_BACKWARD)
      for (int j = 0; j < V; j++) {
        m[j] = a.mean[ch + j];
        is[j] = a.invstd[ch + j];
        if (SUM_BASE(MODE) == SUM_BACKWARD_RELU)
          bn_train_affine(ch + j, a.mean, a.invstd, a.gamma, a.beta, &scale[j], &shift[j]);
      }
    const int B = BnBatch<MODE, V, X>::rows;
    static_assert(BN_FLOAT_RUN % B == 0, "a float run ends where a load batch ends");
    size_t step = (size_t)gridDim.x * s.rl * C;
    size_t at = ((size_t)group * s.rl + lane) * C + ch, end = (size_t)a.rows * C;
    /* at's row, for a projection's share (unused, and so compiled out, elsewhere). */
    size_t row = (size_t)group * s.rl + lane, row_step = (size_t)gridDim.x * s.rl;
    /* Whole batches: every load first, then the additions in row order. */
    for (; at + (B - 1) * step < end; at += B * step, row += B * row_step) {
      BnRow<V, X> xr[B];
      BnRow<V, D> dr[B];
      BnStartRow<V, D, projection> st[B];
#pragma unroll
      for (int r = 0; r < B; r++) {
        xr[r].load(a.x + at + r * step, a.aligned);
        if (MODE != SUM_SHIFTED && !(MODE & SUM_START))
          dr[r].load(a.dy + at + r * step, a.aligned);
      }
      if (MODE & SUM_START)
#pragma unroll
        for (int r = 0; r < B; r++)
          st[r].load(a, at + r * step, row + r * row_step);
#pragma unroll
      for (int r = 0; r < B; r++) {
        float v[V], g[V];
        xr[r].get(v);
        if (MODE & SUM_START)
          bn_start_row<V>(g, a, at + r * step, row + r * row_step, &st[r]);
        else if (MODE != SUM_SHIFTED)
          dr[r].get(g);
        bn_sums_row<SUM_BASE(MODE), V>(f0, f1, v, g, k, m, is, scale, shift);
      }
      run += B;
      bn_sums_flush<V, shared_sums>(a0, a1, acc, f0, f1, &run, false);
    }
    for (; at < end; at += step, row += row_step) {
      float v[V], g[V];
      bn_load_row<V>(v, a.x + at, a.aligned);
      if (MODE & SUM_START) {
        bn_start_row<V, projection, X, D>(g, a, at, row, NULL);
      } else if (MODE != SUM_SHIFTED) {
        bn_load_row<V>(g, a.dy + at, a.aligned);
      }
      bn_sums_row<SUM_BASE(MODE), V>(f0, f1, v, g, k, m, is, scale, shift);
      run++;
      bn_sums_flush<V, shared_sums>(a0, a1, acc, f0, f1, &run, false);
    }
    bn_sums_flush<V, shared_sums>(a0, a1, acc, f0, f1, &run, true);
  }
  /* The row lanes in order. sh[lane][i], i = which · span + j · ct + cl for the
   * thread's channel j (so that a warp's stores fall in distinct banks). */
  if (!shared_sums && lane < s.rl)
    for (int j = 0; j < V; j++) {
      sh[(size_t)lane * 2 * s.span + j * s.ct + cl] = a0[j];
      sh[(size_t)lane * 2 * s.span + s.span + j * s.ct + cl] = a1[j];
    }
  __syncthreads();
  double *groups = a.partials;
  double *sets = a.partials + (size_t)s.groups * 2 * C;
  for (int i = threadIdx.x; i < 2 * s.span; i += blockDim.x) {
    int which = i / s.span, r = i % s.span;
    int c = ch0 + (r % s.ct) * V + r / s.ct;
    if (c >= C)
      continue;
    double t = 0.0;
    for (int l = 0; l < s.rl; l++)
      t += sh[(size_t)l * 2 * s.span + i];
    groups[((size_t)group * 2 + which) * C + c] = t;
  }
  /* The group's set, then the tile. */
  int set = group / BN_SET, first = set * BN_SET;
  int in_set = min(BN_SET, s.groups - first);
  if (!bn_arrive_last(a.counters + (size_t)tile * s.sets + set, (unsigned)in_set))
    return;
  if (s.sets > 1) {
    bn_add_partials(sets + (size_t)set * 2 * C, sh, groups + (size_t)first * 2 * C, in_set, C,
                    ch0, s);
    if (!bn_arrive_last(a.counters + (size_t)s.tiles * s.sets + tile, (unsigned)s.sets))
      return;
    bn_add_partials(NULL, sh, sets, s.sets, C, ch0, s);
  } else {
    bn_add_partials(NULL, sh, groups, in_set, C, ch0, s);
  }
  __syncthreads();
  /* sh[i]: the tile's sum i (which · span + j · ct + cl). */
  for (int i = threadIdx.x; i < s.span; i += blockDim.x) {
    int c = ch0 + (i % s.ct) * V + i / s.ct;
    if (c >= C)
      continue;
    double s0 = sh[i], s1 = sh[s.span + i];
    if (MODE != SUM_SHIFTED) {
      a.out0[c] = (float)s0;
      if (a.out1 != NULL)
        a.out1[c] = (float)s1;
      continue;
    }
    size_t size = TDM_BN_SLOT_FLOATS(C);
    for (int slot = 0; slot < a.slot_count; slot++) {
      float *dst = a.slots + size * slot;
      if (slot == a.slot) {
        double mean, m2;
        tdm_bnm_finish(tdm_k_load1(a.x + c), s0, s1, a.rows, &mean, &m2);
        tdm_bnm_store(dst, C, c, mean, m2);
        if (a.stats.saved != NULL) {
          /* The slot's count is channel 0's thread's to store, maybe in another block:
           * rows is what it stores, and reads back. */
          double n = 0.0, merged = 0.0, q = 0.0;
          tdm_bnm_merge_slot(dst, a.rows, C, c, &n, &merged, &q);
          tdm_bnm_stats(a.stats.saved, C, c, n, merged, q, a.stats.eps, a.stats.momentum,
                        a.stats.running_mean, a.stats.running_var);
        }
      } else {
        tdm_bnm_store(dst, C, c, 0.0, 0.0);
      }
      if (c == 0)
        tdm_bnm_store_count(dst, C, slot == a.slot ? a.rows : 0);
    }
  }
}

/* The launch's shape for rows × channels, within the scratch: partials_count doubles
 * and counter_count counters. False when even one group a tile does not fit. */
static bool
bn_sum_shape(BnSumShape *s, int rows, int channels, size_t partials_count,
             size_t counter_count)
{
  bn_channel_split(s, channels, BN_TILE_CHANNELS);
  size_t per_block = (size_t)s->rl * BN_ROWS_PER_THREAD;
  size_t groups = ((size_t)rows + per_block - 1) / per_block;
  size_t fill = (BN_FILL_BLOCKS + (size_t)s->tiles - 1) / (size_t)s->tiles;
  if (groups < fill) {
    size_t short_block = (size_t)s->rl * BN_MIN_ROWS_PER_THREAD;
    size_t short_groups = ((size_t)rows + short_block - 1) / short_block;
    groups = short_groups < fill ? short_groups : fill;
  }
  /* The scratch: the groups' partials and, past one set, the sets' (2 · channels
   * doubles each); tiles · sets counters and one a tile. */
  size_t rows_fit = partials_count / (2 * (size_t)channels);
  size_t sets_fit = counter_count / (size_t)s->tiles;
  if (rows_fit < 1 || sets_fit < 2)
    return false;
  size_t most = BN_MAX_BLOCKS / (size_t)s->tiles;
  size_t scratch_most = rows_fit <= BN_SET ? rows_fit : rows_fit * BN_SET / (BN_SET + 1);
  if (most > scratch_most)
    most = scratch_most;
  if (most > (sets_fit - 1) * BN_SET)
    most = (sets_fit - 1) * BN_SET;
  if (groups > most)
    groups = most;
  if (groups < 1)
    groups = 1;
  while (groups > BN_SET && groups + (groups + BN_SET - 1) / BN_SET > rows_fit)
    groups--;
  s->groups = (int)groups;
  s->sets = (int)((groups + BN_SET - 1) / BN_SET);
  return true;
}

template <int MODE, typename X, typename D>
static cudaError_t
bn_reduce(float *out0, float *out1, const X *x, const D *dy, const float *mean,
          const float *invstd, const float *gamma, const float *beta, int rows, int channels,
          double *partials, size_t partials_count, unsigned *counters, size_t counter_count,
          float *slots, int slot, int slot_count, cudaStream_t stream, BnStart st = {},
          BnStats stats = {})
{
  if (channels <= 0)
    return cudaSuccess;
  BnSumShape s;
  if (partials == NULL || counters == NULL ||
      !bn_sum_shape(&s, rows, channels, partials_count, counter_count))
    return cudaErrorInvalidValue;
  BnSumArgs<X, D> a = {x, dy, mean, invstd, gamma, beta, rows, channels, partials, counters,
                       out0, out1, slots, slot, slot_count, true, st, stats};
  a.aligned = bn_vec_aligned(x, s.v) && (MODE == SUM_SHIFTED || bn_vec_aligned(dy, s.v)) &&
              (st.skip == NULL || bn_vec_aligned(st.skip, s.v)) &&
              (st.strided == NULL || bn_vec_aligned(st.strided, s.v)) &&
              (st.dx == NULL || bn_vec_aligned(st.dx, s.v));
  dim3 grid((unsigned)s.groups, (unsigned)s.tiles);
  unsigned threads = (unsigned)(s.ct * s.rl);
  if (s.v == 8)
    bn_sums_kernel<MODE, 8><<<grid, threads, 0, stream>>>(a, s);
  else if (s.v == 4)
    bn_sums_kernel<MODE, 4><<<grid, threads, 0, stream>>>(a, s);
  else
    bn_sums_kernel<MODE, 1><<<grid, threads, 0, stream>>>(a, s);
  return tdm_k_launched();
}

/* tdm_k_bn_moments, and (stats.saved not NULL, one slot) the statistics in its finish. */
static cudaError_t
bn_moments(float *slots, const void *x, bool x16, int rows, int channels, int slot,
           int slot_count, double *partials, size_t partials_count, unsigned *counters,
           size_t counter_count, const BnStats &stats, cudaStream_t stream)
{
  if (channels <= 0 || slot < 0 || slot >= slot_count)
    return cudaErrorInvalidValue;
  if (rows <= 0) /* no first row to shift by: an empty slot */
    return cudaMemsetAsync(slots, 0, TDM_BN_SLOT_FLOATS(channels) * slot_count * sizeof(float),
                           stream);
  if (x16)
    return bn_reduce<SUM_SHIFTED>(NULL, NULL, (const uint16_t *)x, (const float *)NULL, NULL,
                                  NULL, NULL, NULL, rows, channels, partials, partials_count,
                                  counters, counter_count, slots, slot, slot_count, stream,
                                  BnStart{}, stats);
  return bn_reduce<SUM_SHIFTED>(NULL, NULL, (const float *)x, (const float *)NULL, NULL, NULL,
                                NULL, NULL, rows, channels, partials, partials_count, counters,
                                counter_count, slots, slot, slot_count, stream, BnStart{},
                                stats);
}

extern "C" cudaError_t
tdm_k_bn_moments(float *slots, const void *x, bool x16, int rows, int channels, int slot,
                 int slot_count, double *partials, size_t partials_count, unsigned *counters,
                 size_t counter_count, cudaStream_t stream)
{
  return bn_moments(slots, x, x16, rows, channels, slot, slot_count, partials, partials_count,
                    counters, counter_count, BnStats{}, stream);
}

/* An empty x has no finish to fold the statistics into: its empty slot, then
 * tdm_k_bn_stats's launch (a batch of no rows, which no training step has). */
extern "C" cudaError_t
tdm_k_bn_moments_stats(float *saved, float *slots, const void *x, bool x16, int rows,
                       int channels, float eps, float momentum, float *running_mean,
                       float *running_var, double *partials, size_t partials_count,
                       unsigned *counters, size_t counter_count, cudaStream_t stream)
{
  BnStats stats = {saved, eps, momentum, running_mean, running_var};
  cudaError_t e = bn_moments(slots, x, x16, rows, channels, 0, 1, partials, partials_count,
                             counters, counter_count, stats, stream);
  if (e != cudaSuccess || rows > 0)
    return e;
  return tdm_k_bn_stats(saved, slots, 1, channels, eps, momentum, running_mean, running_var,
                        stream);
}

template <typename X, typename D>
static cudaError_t
bn_backward_sums(float *dgamma, float *dbeta, const D *dy, const X *x, const float *mean,
                 const float *invstd, const float *gamma, const float *beta, bool relu,
                 int rows, int channels, double *partials, size_t partials_count,
                 unsigned *counters, size_t counter_count, cudaStream_t stream)
{
  if (relu)
    return bn_reduce<SUM_BACKWARD_RELU>(dgamma, dbeta, x, dy, mean, invstd, gamma, beta, rows,
                                        channels, partials, partials_count, counters,
                                        counter_count, NULL, 0, 0, stream);
  return bn_reduce<SUM_BACKWARD>(dgamma, dbeta, x, dy, mean, invstd, gamma, beta, rows,
                                 channels, partials, partials_count, counters, counter_count,
                                 NULL, 0, 0, stream);
}

extern "C" cudaError_t
tdm_k_bn_backward_sums(float *dgamma, float *dbeta, const void *dy, bool dy16, const void *x,
                       bool x16, const float *mean, const float *invstd, const float *gamma,
                       const float *beta, bool relu, int rows, int channels, double *partials,
                       size_t partials_count, unsigned *counters, size_t counter_count,
                       cudaStream_t stream)
{
#define BN_SUMS(D, X)                                                                          \
  bn_backward_sums(dgamma, dbeta, (const D *)dy, (const X *)x, mean, invstd, gamma, beta,      \
                   relu, rows, channels, partials, partials_count, counters, counter_count,    \
                   stream)
  if (dy16)
    return x16 ? BN_SUMS(uint16_t, uint16_t) : BN_SUMS(uint16_t, float);
  return x16 ? BN_SUMS(float, uint16_t) : BN_SUMS(float, float);
#undef BN_SUMS
}

/* The block start's pass with the sums: bn_reduce's launch in SUM_START mode (with
 * SUM_PROJECTION for a projection's share), so that every addition falls as
 * tdm_k_bn_backward_sums's on the dx it writes. */
template <typename X, typename D>
static cudaError_t
start_sums(const BnStart &st, const D *a, const X *x, const float *mean, const float *invstd,
           const float *gamma, const float *beta, bool relu, int rows, int channels,
           float *dgamma, float *dbeta, double *partials, size_t partials_count,
           unsigned *counters, size_t counter_count, cudaStream_t stream)
{
#define START(MODE)                                                                            \
  bn_reduce<MODE>(dgamma, dbeta, x, a, mean, invstd, gamma, beta, rows, channels, partials,    \
                  partials_count, counters, counter_count, NULL, 0, 0, stream, st)
  if (st.strided != NULL)
    return relu ? START(SUM_BACKWARD_RELU | SUM_START | SUM_PROJECTION)
                : START(SUM_BACKWARD | SUM_START | SUM_PROJECTION);
  return relu ? START(SUM_BACKWARD_RELU | SUM_START) : START(SUM_BACKWARD | SUM_START);
#undef START
}

extern "C" cudaError_t
tdm_k_add_relu_backward_bn_sums_bf16(uint16_t *dx, const void *a, bool a16,
                                     const uint16_t *skip, const float *strided, int h, int w,
                                     int stride, const uint32_t *mask, const void *x, bool x16,
                                     const float *mean, const float *invstd, const float *gamma,
                                     const float *beta, bool relu, int rows, int channels,
                                     float *dgamma, float *dbeta, double *partials,
                                     size_t partials_count, unsigned *counters,
                                     size_t counter_count, cudaStream_t stream)
{
  if (strided != NULL &&
      (skip != NULL || h < 1 || w < 1 || stride < 1 || rows % ((long long)h * w) != 0))
    return cudaErrorInvalidValue;
  BnStart st = {skip, strided, h, w, stride, mask, dx};
#define START_SUMS(A, X)                                                                       \
  start_sums(st, (const A *)a, (const X *)x, mean, invstd, gamma, beta, relu, rows, channels,  \
             dgamma, dbeta, partials, partials_count, counters, counter_count, stream)
  if (a16)
    return x16 ? START_SUMS(uint16_t, uint16_t) : START_SUMS(uint16_t, float);
  return x16 ? START_SUMS(float, uint16_t) : START_SUMS(float, float);
#undef START_SUMS
}
