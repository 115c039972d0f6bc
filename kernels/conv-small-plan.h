/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-small-plan.h — how conv-small.cu tiles a convolution of few input channels (a
 * network's first layer: 1 to 8 channels, kernels up to 7×7, stride 1 or 2, padding 0
 * to 3, output channels a multiple of 16) on bf16 tensor cores: which shapes it takes,
 * the forward's tile and shared memory, the weight gradient's split of the output
 * pixels into partial sums and the bytes they take. One function of the shape alone
 * (never of the GPU's SM count), so the weight gradient's order of summation, and with it
 * its bits, is the same on every GPU of a kind. Plain C without GLib or CUDA, shared by
 * the launchers (conv-small.cu), the engine's host side
 * (tdm-backend-cuda-conv-small.c), and a CPU test (tests/engine/test-conv-small-plan.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TDM_K_SMALL_MAX_C 8
#define TDM_K_SMALL_MAX_KERNEL 7
#define TDM_K_SMALL_MAX_PAD 3
#define TDM_K_SMALL_MAX_STRIDE 2
#define TDM_K_SMALL_THREADS 256   /* eight warps a block, both kernels */
#define TDM_K_SMALL_BM 128        /* forward: output pixels a tile */
#define TDM_K_SMALL_KC 160        /* the reduction columns (taps × channels) a pass gathers */
#define TDM_K_SMALL_RS 64         /* weight gradient: output pixels a step */
/* Weight gradient: about this many blocks in all (splits × column chunks × channel
 * tiles): two to four a streaming multiprocessor on today's GPUs. */
#define TDM_K_SMALL_WGRAD_BLOCKS 512
/* ... but at least this many steps a split: a small batch's partial sums (a split's are
 * out_c × kpad floats) stay fewer than its columns (at n2 the stem's 512 splits took
 * 19 MB, its columns 7 MB). */
#define TDM_K_SMALL_SPLIT_STEPS 8
/* The forward's dynamic shared memory stays within the least that any sm_80+ GPU
 * lets a block opt into (sm_86 and sm_89: 99 KiB). */
#define TDM_K_SMALL_SMEM_MAX 101376

/* The rounding is the kernels' too. */
#ifdef __CUDACC__
#define TDM_K_SMALL_BOTH __host__ __device__
#else
#define TDM_K_SMALL_BOTH
#endif

typedef struct {
  int oh, ow;
  int64_t rows;          /* n · oh · ow: the GEMM's M */
  int k;                 /* kernel² · c: the reduction */
  int kpad;              /* k rounded up to 16 (zero columns) */
  int kc;                /* the columns a pass or a chunk holds: min(kpad, TDM_K_SMALL_KC) */
  int kchunks;           /* passes (forward) or column chunks (weight gradient) over kpad */
  /* Forward */
  int bn;                /* output channels a block: 64, 32 or 16 */
  size_t fwd_smem;       /* its dynamic shared memory */
  /* Weight gradient */
  int ob;                /* output channels a block: 64, 32 or 16 */
  int split_rows;        /* output pixels a split: a multiple of TDM_K_SMALL_RS */
  int splits;            /* partial sums, summed in their order by the second kernel */
  size_t partial_bytes;  /* splits · out_c · kpad floats */
} TdmKSmallPlan;

TDM_K_SMALL_BOTH static inline size_t
tdm_k_small_up(size_t v, size_t to)
{
  return (v + to - 1) / to * to;
}

/* The forward's shared memory for `bn` output channels a block: the gathered tile
 * (bf16, padded by 8 a row), which the float32 output tile reuses; the block's weights
 * (bf16, a row per output channel); the column table (two ints a column); the bn's
 * scale and shift. */
static inline size_t
tdm_k_small_fwd_smem(int bn, int kc, int kpad)
{
  size_t a = (size_t)TDM_K_SMALL_BM * (kc + 8) * 2;
  size_t c = (size_t)TDM_K_SMALL_BM * (bn + 4) * 4;
  size_t region = tdm_k_small_up(a > c ? a : c, 128);
  size_t weights = tdm_k_small_up((size_t)bn * (kpad + 8) * 2, 128);
  return region + weights + (size_t)kpad * 8 + 2 * TDM_K_SMALL_MAX_C * 4;
}

/* The largest of 64, 32, 16 that divides out_c and is no more than `most`; 0 if none. */
static inline int
tdm_k_small_channel_tile(int out_c, int most)
{
  for (int t = 64; t >= 16; t /= 2)
    if (t <= most && out_c % t == 0)
      return t;
  return 0;
}

/* Fills *p for the shape; false when conv-small.cu does not take it. */
static inline bool
tdm_k_small_plan(int n, int h, int w, int c, int out_c, int kernel, int pad, int stride,
                 TdmKSmallPlan *p)
{
  if (n <= 0 || h <= 0 || w <= 0 || c < 1 || c > TDM_K_SMALL_MAX_C || kernel < 1 ||
      kernel > TDM_K_SMALL_MAX_KERNEL || pad < 0 || pad > TDM_K_SMALL_MAX_PAD || stride < 1 ||
      stride > TDM_K_SMALL_MAX_STRIDE || out_c < 16 || out_c % 16 != 0 || h + 2 * pad < kernel ||
      w + 2 * pad < kernel)
    return false;
  p->oh = (h + 2 * pad - kernel) / stride + 1;
  p->ow = (w + 2 * pad - kernel) / stride + 1;
  p->rows = (int64_t)n * p->oh * p->ow;
  /* Indices in the kernels: output pixels as int (a tile past the last one too), input
   * elements as 64-bit. */
  if (p->rows > (int64_t)INT32_MAX - 2 * TDM_K_SMALL_BM)
    return false;
  p->k = kernel * kernel * c;
  p->kpad = (int)tdm_k_small_up((size_t)p->k, 16);
  p->kc = p->kpad < TDM_K_SMALL_KC ? p->kpad : TDM_K_SMALL_KC;
  p->kchunks = (p->kpad + TDM_K_SMALL_KC - 1) / TDM_K_SMALL_KC;
  p->bn = 0;
  p->fwd_smem = 0;
  for (int most = 64; most >= 16 && p->bn == 0; most /= 2) {
    int bn = tdm_k_small_channel_tile(out_c, most);
    if (bn != 0 && tdm_k_small_fwd_smem(bn, p->kc, p->kpad) <= TDM_K_SMALL_SMEM_MAX) {
      p->bn = bn;
      p->fwd_smem = tdm_k_small_fwd_smem(bn, p->kc, p->kpad);
    }
  }
  if (p->bn == 0)
    return false;
  p->ob = tdm_k_small_channel_tile(out_c, 64);
  int64_t steps = (p->rows + TDM_K_SMALL_RS - 1) / TDM_K_SMALL_RS;
  int64_t others = (int64_t)p->kchunks * (out_c / p->ob);
  int64_t target = TDM_K_SMALL_WGRAD_BLOCKS / others > 0 ? TDM_K_SMALL_WGRAD_BLOCKS / others : 1;
  int64_t per = (steps + target - 1) / target;
  if (per < TDM_K_SMALL_SPLIT_STEPS)
    per = TDM_K_SMALL_SPLIT_STEPS;
  p->split_rows = (int)(per * TDM_K_SMALL_RS);
  p->splits = (int)((p->rows + p->split_rows - 1) / p->split_rows);
  p->partial_bytes = (size_t)p->splits * out_c * p->kpad * sizeof(float);
  return true;
}
