/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-small-tile.cuh — what conv-small.cu (the few-channel convolution's forward and
 * weight gradient) and conv-stem-bn.cu (the stem's backward in two passes, which make
 * the stem's output again tile by tile) share: the shape as the kernels read it, the
 * halo's reads (as pairs of columns for the forward's A, as pairs of pixels for the
 * weight gradient's B), the MMA and ldmatrix wrappers, and the launchers' shape and
 * shared-memory set-up. Functions the kernels already called, moved here unchanged:
 * the forward's own body (its warps' geometry, its MMA loop, its stores) stays written
 * out in conv-small.cu, since making it shared functions made it spill (ptxas: 48
 * bytes at its 64-register cap), and conv-stem-bn.cu writes its own copy of those few
 * lines. Private to kernels/.
 */
#pragma once

#include "conv-small-plan.h"
#include "common.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>

#define SC_WARPS (TDM_K_SMALL_THREADS / 32)
/* Elements a thread loads from global memory before it stores them to shared memory. */
#define SMALL_BATCH 4

/* The shape as the kernels read it. */
struct SmallShape {
  int h, w, c, out_c, kernel, pad, stride, oh, ow;
  int rows;      /* output pixels */
  int k, kpad;   /* reduction columns, and rounded up to 16 */
  /* The forward's tiles (conv-small-plan.h) */
  int tw, tiles_x, tiles_y, tiles, halo_h, halo_w;
  int kc;        /* the weight gradient's columns a chunk */
  int fwd_rk, fwd_kpad;  /* the forward's columns a kernel row, and in all */
};

/* The bn's per-channel scale and shift (bn_train_affine: the forward's bits). */
template <bool BN>
__device__ __forceinline__ void
small_bn(float *scale, float *shift, int c, BnGather bn)
{
  if (BN)
    for (int ch = threadIdx.x; ch < c; ch += blockDim.x)
      bn_train_affine(ch, bn.mean, bn.invstd, bn.gamma, bn.beta, scale + ch, shift + ch);
}

/* One input value as the bf16 bits of the convolution's operand. */
template <bool BN>
__device__ __forceinline__ uint16_t
small_value(const float *x, size_t at, int ch, const float *scale, const float *shift,
            bool relu)
{
  float v = __ldg(x + at);
  if (BN)
    v = bn_affine_output(v, scale[ch], shift[ch], relu);
  return tdm_k_bf16_bits(v);
}

template <bool BN>
__device__ __forceinline__ uint16_t
small_value(const uint16_t *x, size_t at, int ch, const float *scale, const float *shift,
            bool relu)
{
  uint16_t bits = __ldg((const unsigned short *)x + at);
  if (!BN)
    return bits;
  float v = __bfloat162float(__ushort_as_bfloat16(bits));
  return tdm_k_bf16_bits(bn_affine_output(v, scale[ch], shift[ch], relu));
}

/* A thread's walk over a tile's input window (the halo: rows iy0 .. iy0 + halo_h,
 * columns ix0 .. ix0 + halo_w of image img, all channels; row-major, hwc = halo_w · c
 * values a row, the input's own order): its values i = first, first + step, ... held as
 * the row hy and the element e in it (i = hy · hwc + e), and e's channel, advanced
 * without a division (the division per value was most of the kernels' integer work).
 * The halo's geometry is the same for every tile; only its corner moves. */
struct SmallHaloWalk {
  int hy, e, ch;  /* the current value */
  int dq, dr;     /* the step, dq · hwc + dr */
  int dch;        /* dr % c */

  __device__ __forceinline__ void
  start(int first, int step, int hwc, int c)
  {
    hy = first / hwc;
    e = first - hy * hwc;
    ch = e % c;
    dq = step / hwc;
    dr = step - dq * hwc;
    dch = dr % c;
  }

  /* On by the step: dr < hwc, so e wraps at most once (hwc is a multiple of c, so the
   * wrap leaves the channel as it is). */
  __device__ __forceinline__ void
  next(int hwc, int c)
  {
    hy += dq;
    e += dr;
    ch += dch;
    if (e >= hwc) {
      e -= hwc;
      hy++;
    }
    if (ch >= c)
      ch -= c;
  }
};

/* The halo's value (hy, e) as bf16 bits, its channel ch: zero outside the image and past
 * the halo's end (hy ≥ halo_h). base is the halo corner's element in x, (img · h + iy0)
 * · w · c + ix0 · c (negative where the corner is outside the image: then so is the
 * value, and it is not read); xe0 = ix0 · c. Consecutive values of a row are contiguous
 * in x, so consecutive threads read consecutive addresses. */
template <bool BN, typename X>
__device__ __forceinline__ uint16_t
small_halo_at(const X *x, const SmallShape &s, long long base, int wc, int iy0, int xe0,
              int hy, int e, int ch, const float *scale, const float *shift, bool relu)
{
  int iy = iy0 + hy, xe = xe0 + e;
  if (hy >= s.halo_h || (unsigned)iy >= (unsigned)s.h || (unsigned)xe >= (unsigned)wc)
    return 0;
  return small_value<BN>(x, (size_t)(base + (long long)hy * wc + e), ch, scale, shift, relu);
}

/* The weight gradient's halo as pixel pairs: words[i] holds value i in its low half and
 * value i + stride · c (the same tap of the pixel to the right; zero past the end) in its
 * high half, so that two neighbouring pixels of B are one 32-bit load. A thread's loads
 * for WB values are issued before it stores any. */
template <bool BN, typename X>
__device__ __forceinline__ void
small_halo_pixel_pairs(unsigned *words, const X *x, const SmallShape &s, int img, int iy0,
                       int ix0, const float *scale, const float *shift, bool relu)
{
  const int hwc = s.halo_w * s.c, count = s.halo_h * hwc, xe0 = ix0 * s.c;
  const int step = s.stride * s.c;  /* ≤ 16, less than hwc (halo_w ≥ 8) */
  const int wc = s.w * s.c;
  const long long base = ((long long)img * s.h + iy0) * wc + xe0;
  /* Two values (four loads) in flight a thread, not SMALL_BATCH: acc's 48 registers are
   * live here, and the block's 80 (three a multiprocessor) do not hold eight. */
  constexpr int WB = 2;
  SmallHaloWalk at;
  at.start(threadIdx.x, TDM_K_SMALL_THREADS, hwc, s.c);
  for (int i0 = threadIdx.x; i0 < count; i0 += WB * TDM_K_SMALL_THREADS) {
    unsigned lo[WB], hi[WB];
#pragma unroll
    for (int j = 0; j < WB; j++) {
      /* Value i + step: the same channel, in this row or at the next one's start. */
      int e2 = at.e + step, hy2 = at.hy;
      if (e2 >= hwc) {
        e2 -= hwc;
        hy2++;
      }
      lo[j] = small_halo_at<BN>(x, s, base, wc, iy0, xe0, at.hy, at.e, at.ch, scale, shift,
                                relu);
      hi[j] = small_halo_at<BN>(x, s, base, wc, iy0, xe0, hy2, e2, at.ch, scale, shift, relu);
      at.next(hwc, s.c);
    }
#pragma unroll
    for (int j = 0; j < WB; j++)
      if (i0 + j * TDM_K_SMALL_THREADS < count)
        words[i0 + j * TDM_K_SMALL_THREADS] = lo[j] | hi[j] << 16;
  }
}

/* The forward's halo as pairs: words[i] holds value i in its low half and value i + 1
 * (zero past the end) in its high half, so that two neighbouring columns of A are one
 * 32-bit load at any offset. A warp reads SMALL_BATCH runs of 32 consecutive values in
 * turn (each thread's loads issued before it stores any): a lane's value i + 1 is its
 * right neighbour's value i, the last lane's the first lane's of the next run (shuffles),
 * and only after the last run does the last lane read it (where it read it after every
 * run of 32: the lanes wait while one reads). The loop is the same for every thread of
 * the block (the shuffles need the whole warp). */
template <bool BN, typename X>
__device__ __forceinline__ void
small_halo_pairs(unsigned *words, const X *x, const SmallShape &s, int img, int iy0, int ix0,
                 const float *scale, const float *shift, bool relu)
{
  constexpr int WARP_VALUES = SMALL_BATCH * 32;  /* a warp's values a turn */
  const int hwc = s.halo_w * s.c, count = s.halo_h * hwc, xe0 = ix0 * s.c;
  const int wc = s.w * s.c;
  const long long base = ((long long)img * s.h + iy0) * wc + xe0;
  const int lane = threadIdx.x % 32, first = threadIdx.x / 32 * WARP_VALUES + lane;
  /* turn: this lane's first value of each turn; run: its value in each run of 32 (on
   * by 32 with a loop, not a division's two registers: hwc ≥ 8, at most four times). */
  SmallHaloWalk turn;
  turn.start(first, SMALL_BATCH * TDM_K_SMALL_THREADS, hwc, s.c);
  const int dch32 = 32 % s.c;
  for (int i0 = 0; i0 < count; i0 += SMALL_BATCH * TDM_K_SMALL_THREADS) {
    struct {
      int hy, e, ch;
    } run = {turn.hy, turn.e, turn.ch};
    unsigned v[SMALL_BATCH];
    /* The last lane's value i + 1 after the last run: the next element of its row, or
     * the next row's first. */
    unsigned edge = 0u;
#pragma unroll
    for (int j = 0; j < SMALL_BATCH; j++) {
      v[j] = small_halo_at<BN>(x, s, base, wc, iy0, xe0, run.hy, run.e, run.ch, scale, shift,
                               relu);
      if (j == SMALL_BATCH - 1 && lane == 31) {
        bool wrap = run.e + 1 >= hwc;
        int ch1 = run.ch + 1 < s.c ? run.ch + 1 : 0;
        edge = small_halo_at<BN>(x, s, base, wc, iy0, xe0, run.hy + wrap, wrap ? 0 : run.e + 1,
                                 ch1, scale, shift, relu);
      }
      if (j + 1 < SMALL_BATCH) {
        run.e += 32;
        while (run.e >= hwc) {
          run.e -= hwc;
          run.hy++;
        }
        run.ch += dch32;
        if (run.ch >= s.c)
          run.ch -= s.c;
      }
    }
    turn.next(hwc, s.c);
#pragma unroll
    for (int j = 0; j < SMALL_BATCH; j++) {
      int i = i0 + first + 32 * j;
      unsigned next = __shfl_down_sync(0xffffffffu, v[j], 1);
      unsigned wrapped =
          j + 1 < SMALL_BATCH ? __shfl_sync(0xffffffffu, v[j + 1 < SMALL_BATCH ? j + 1 : j], 0)
                              : edge;
      if (lane == 31)
        next = wrapped;
      if (i < count)
        words[i] = v[j] | next << 16;
    }
  }
}

/* Two bf16 in a register for an mma operand, the first in the low half. */
__device__ __forceinline__ unsigned
small_pair(uint16_t lo, uint16_t hi)
{
  return (unsigned)lo | (unsigned)hi << 16;
}

/* Four 8×8 bf16 matrices from shared memory (each lane gives one row's address: lanes
 * 8j .. 8j + 7 matrix j's rows), lane l receiving row l / 4, elements 2·(l % 4) and
 * + 1 of each. */
__device__ __forceinline__ void
small_ldmatrix_x4(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3, const uint16_t *p)
{
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a));
}

/* d += a · b on bf16 tensor cores, m16n8k16, float32 sums (PTX's fragment layouts:
 * lane l = 4g + t holds A's rows g and g + 8, columns 2t, 2t + 1, 2t + 8, 2t + 9; B's
 * columns (n) g, rows (k) 2t, 2t + 1, 2t + 8, 2t + 9; D's rows g and g + 8, columns 2t
 * and 2t + 1). */
__device__ __forceinline__ void
small_mma(float *d, const unsigned *a, unsigned b0, unsigned b1)
{
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four 8×8 bf16 matrices from shared memory, transposed: lane l receives elements
 * (2·(l % 4), l / 4) and (2·(l % 4) + 1, l / 4) of each (rows as stored). */
__device__ __forceinline__ void
small_ldmatrix_x4_trans(unsigned *r, const uint16_t *p)
{
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

static inline bool
small_shape(int n, int h, int w, int c, int out_c, int kernel, int pad, int stride,
            TdmKSmallPlan *p, SmallShape *s)
{
  if (!tdm_k_small_plan(n, h, w, c, out_c, kernel, pad, stride, p))
    return false;
  s->h = h;
  s->w = w;
  s->c = c;
  s->out_c = out_c;
  s->kernel = kernel;
  s->pad = pad;
  s->stride = stride;
  s->oh = p->oh;
  s->ow = p->ow;
  s->rows = (int)p->rows;
  s->k = p->k;
  s->kpad = p->kpad;
  s->tw = p->tw;
  s->tiles_x = p->tiles_x;
  s->tiles_y = p->tiles_y;
  s->tiles = (int)p->tiles;
  s->halo_h = p->halo_h;
  s->halo_w = p->halo_w;
  s->kc = p->kc;
  s->fwd_rk = p->fwd_rk;
  s->fwd_kpad = p->fwd_kpad;
  return true;
}

/* Lets kernel take as much dynamic shared memory as a block of the device may opt in to
 * (beyond its static shared memory): the same value from every thread. Setting each
 * plan's own size raced where replicas on one GPU launch the kernel with different plans
 * at once: a launch between another thread's lower setting and its own failed with
 * cudaErrorInvalidValue. The launch itself asks for its plan's size. */
template <typename K>
static cudaError_t
small_allow_shared(K kernel)
{
  int device = 0, most = 0;
  cudaFuncAttributes fa;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (err == cudaSuccess)
    err = cudaFuncGetAttributes(&fa, kernel);
  if (err == cudaSuccess)
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               most - (int)fa.sharedSizeBytes);
  return err;
}
