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
#define TDM_K_SMALL_KC 160        /* weight gradient: the columns (taps × channels) a chunk */
/* Weight gradient: about this many blocks in all (splits × column chunks × channel
 * tiles): two to four a streaming multiprocessor on today's GPUs. */
#define TDM_K_SMALL_WGRAD_BLOCKS 512
/* ... but splits of at least this many output pixels on average (whole tiles, counting
 * only the pixels inside the output): a small batch's partial sums (a split's are out_c
 * × kpad floats) stay fewer than its columns (at n2 the stem's 512 splits of 64 pixels
 * took 19 MB, its columns 7 MB). */
#define TDM_K_SMALL_SPLIT_PIXELS 512
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
  int kc;                /* weight gradient: columns a chunk, min(kpad, TDM_K_SMALL_KC) */
  int kchunks;           /* weight gradient: column chunks over kpad */
  /* Forward: a tile is tr rows × tw columns of one image's output pixels (tr · tw =
   * TDM_K_SMALL_BM), its input window (the halo: halo_h rows × halo_w columns × c
   * channels) read once into shared memory as bf16. */
  int tw, tr;            /* tw a power of two, 8 to 128 */
  int tiles_x, tiles_y;  /* tiles across ow and down oh */
  int64_t tiles;         /* n · tiles_y · tiles_x */
  int halo_h, halo_w;    /* (tr − 1)·stride + kernel, (tw − 1)·stride + kernel */
  int fwd_rk;            /* a kernel row's kernel · c columns, rounded up to even */
  int fwd_kpad;          /* the forward's reduction, kernel · fwd_rk, rounded up to 16 */
  int bn;                /* output channels a block: 64, 32 or 16 */
  size_t fwd_smem;       /* its dynamic shared memory */
  /* Weight gradient */
  int ob;                /* output channels a block: 64, 32 or 16 */
  int split_tiles;       /* the forward's tiles a split (the last split may have fewer) */
  int splits;            /* partial sums, summed in their order by the second kernel */
  size_t partial_bytes;  /* splits · out_c · kpad floats */
  int pixel_groups;      /* warps that share a tile's steps of 16 pixels: 1, 2 or 4 */
  size_t wgrad_smem;     /* its dynamic shared memory */
} TdmKSmallPlan;

TDM_K_SMALL_BOTH static inline size_t
tdm_k_small_up(size_t v, size_t to)
{
  return (v + to - 1) / to * to;
}

/* The forward's shared memory, as byte offsets (each a multiple of 16): the bf16 output
 * tile (BM rows of bn + 8: a warp's stores of its fragments meet no bank twice; a float32
 * output goes out from the registers); the block's weights (bf16, a row of kpad + 8 per
 * output channel, kpad the forward's fwd_kpad: ldmatrix's eight rows fall in distinct
 * banks); the halo as pairs (a 32-bit word for each of its halo_h · halo_w · c values:
 * the value and the next one); the pair table (an int and a mask for each two columns);
 * the bn's scale and shift. */
typedef struct {
  size_t stage, weights, halo, cols, bn, total;
} TdmKSmallFwdLayout;

TDM_K_SMALL_BOTH static inline TdmKSmallFwdLayout
tdm_k_small_fwd_layout(int bn, int kpad, int halo_elems)
{
  TdmKSmallFwdLayout l;
  l.stage = 0;
  l.weights = l.stage + (size_t)TDM_K_SMALL_BM * (bn + 8) * 2;
  l.halo = l.weights + (size_t)bn * (kpad + 8) * 2;
  l.cols = l.halo + tdm_k_small_up((size_t)halo_elems * 4, 16);
  l.bn = l.cols + (size_t)(kpad / 2) * 8;
  l.total = l.bn + 2 * TDM_K_SMALL_MAX_C * 4;
  return l;
}

/* The weight gradient's shared memory, as byte offsets (each a multiple of 16): dy's
 * tile (128 pixels of ob + 8 bf16: ldmatrix's rows in distinct banks), the halo as pixel
 * pairs (a 32-bit word a value), the tile's pixel pairs (64 × an int and a mask), the
 * chunk's column table (kc ints), the bn's scale and shift, and where pixel groups share
 * a tile, their sums (pixel_groups · ob · kc floats) to add in order. */
typedef struct {
  size_t dy, halo, rows, cols, bn, groups, total;
} TdmKSmallWgradLayout;

TDM_K_SMALL_BOTH static inline TdmKSmallWgradLayout
tdm_k_small_wgrad_layout(int ob, int kc, int halo_elems, int pixel_groups)
{
  TdmKSmallWgradLayout l;
  l.dy = 0;
  l.halo = l.dy + (size_t)TDM_K_SMALL_BM * (ob + 8) * 2;
  l.rows = l.halo + tdm_k_small_up((size_t)halo_elems * 4, 16);
  l.cols = l.rows + (size_t)TDM_K_SMALL_BM / 2 * 8;
  l.bn = l.cols + (size_t)kc * 4;
  l.groups = l.bn + 2 * TDM_K_SMALL_MAX_C * 4;
  l.total = l.groups + (pixel_groups > 1 ? (size_t)pixel_groups * ob * kc * 4 : 0);
  return l;
}

/* Where the window of a tile's row r (its pixel r / tw down, r % tw across) has its
 * corner in the halo, in elements. */
TDM_K_SMALL_BOTH static inline int
tdm_k_small_halo_row(int r, int tw, int stride, int c, int halo_w)
{
  return ((r / tw) * stride * halo_w + (r % tw) * stride) * c;
}

/* Column k of the reduction (im2col's order: ky, kx, channel) as an offset from a
 * window's corner in the halo; −1 past K (a zero column). */
TDM_K_SMALL_BOTH static inline int
tdm_k_small_halo_col(int k, int kernel, int c, int halo_w)
{
  if (k >= kernel * kernel * c)
    return -1;
  int ch = k % c, tap = k / c;
  return ((tap / kernel) * halo_w + tap % kernel) * c + ch;
}

/* The forward's reduction column k (of fwd_kpad): each kernel row's kernel · c columns
 * (kx, channel) padded to fwd_rk, an even count, so that a pair of columns (2q, 2q + 1)
 * never straddles two kernel rows and is two neighbours in the halo. Its im2col column
 * (ky · kernel · c + kx · c + channel), or −1 for a padding column. */
TDM_K_SMALL_BOTH static inline int
tdm_k_small_fwd_column(int k, int kernel, int c, int rk)
{
  int ky = k / rk, e = k % rk;
  return ky < kernel && e < kernel * c ? ky * kernel * c + e : -1;
}

/* ... and its offset from a window's corner in the halo, or −1. */
TDM_K_SMALL_BOTH static inline int
tdm_k_small_fwd_offset(int k, int kernel, int c, int rk, int halo_w)
{
  int ky = k / rk, e = k % rk;
  return ky < kernel && e < kernel * c ? ky * halo_w * c + e : -1;
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
  /* The forward's tile: the width whose tiles cover the fewest pixels (the padded ones
   * are computed and not stored); of equals, the smaller halo, then the wider tile. */
  p->tw = 0;
  int64_t best_pixels = 0, best_halo = 0;
  for (int tw = TDM_K_SMALL_BM; tw >= 8; tw /= 2) {
    int tr = TDM_K_SMALL_BM / tw;
    int64_t tx = (p->ow + tw - 1) / tw, ty = (p->oh + tr - 1) / tr;
    int64_t pixels = tx * tw * ty * tr;
    int64_t halo = (int64_t)((tr - 1) * stride + kernel) * ((tw - 1) * stride + kernel);
    if (p->tw == 0 || pixels < best_pixels || (pixels == best_pixels && halo < best_halo)) {
      p->tw = tw;
      best_pixels = pixels;
      best_halo = halo;
    }
  }
  p->tr = TDM_K_SMALL_BM / p->tw;
  p->tiles_x = (p->ow + p->tw - 1) / p->tw;
  p->tiles_y = (p->oh + p->tr - 1) / p->tr;
  p->tiles = (int64_t)n * p->tiles_x * p->tiles_y;
  if (p->tiles > INT32_MAX)
    return false;
  p->halo_h = (p->tr - 1) * stride + kernel;
  p->halo_w = (p->tw - 1) * stride + kernel;
  p->fwd_rk = (kernel * c + 1) / 2 * 2;
  p->fwd_kpad = (int)tdm_k_small_up((size_t)kernel * p->fwd_rk, 16);
  p->bn = 0;
  p->fwd_smem = 0;
  for (int most = 64; most >= 16 && p->bn == 0; most /= 2) {
    int bn = tdm_k_small_channel_tile(out_c, most);
    size_t smem =
        bn != 0 ? tdm_k_small_fwd_layout(bn, p->fwd_kpad, p->halo_h * p->halo_w * c).total
                : 0;
    if (bn != 0 && smem <= TDM_K_SMALL_SMEM_MAX) {
      p->bn = bn;
      p->fwd_smem = smem;
    }
  }
  if (p->bn == 0)
    return false;
  /* The weight gradient: splits of whole tiles, about TDM_K_SMALL_WGRAD_BLOCKS blocks in
   * all, at least TDM_K_SMALL_SPLIT_PIXELS output pixels a split on average (tiles hold
   * rows / tiles of them: 128 but where they overhang the output). A chunk's kc columns are kc / 8
   * fragments of 8 across the 8 warps; where they are fewer than 8, the warps share a
   * tile's 8 steps of 16 pixels in groups. */
  p->ob = tdm_k_small_channel_tile(out_c, 64);
  int64_t others = (int64_t)p->kchunks * (out_c / p->ob);
  int64_t target = TDM_K_SMALL_WGRAD_BLOCKS / others > 0 ? TDM_K_SMALL_WGRAD_BLOCKS / others : 1;
  int64_t per = (p->tiles + target - 1) / target;
  int64_t least = (TDM_K_SMALL_SPLIT_PIXELS * p->tiles + p->rows - 1) / p->rows;
  if (per < least)
    per = least;
  p->split_tiles = (int)per;
  p->splits = (int)((p->tiles + per - 1) / per);
  p->partial_bytes = (size_t)p->splits * out_c * p->kpad * sizeof(float);
  int frags = p->kc / 8;
  p->pixel_groups = frags >= 8 ? 1 : 8 / frags;
  p->wgrad_smem =
      tdm_k_small_wgrad_layout(p->ob, p->kc, p->halo_h * p->halo_w * c, p->pixel_groups).total;
  return true;
}

/* The stem's backward in two passes (conv-stem-bn.cu): a first layer's convolution
 * (float32 input, no bn before it) followed by a training bn, whose output x the two
 * passes make again tile by tile as the forward makes it (its tiles, weights and MMAs:
 * the bits of the forward's bf16 output) instead of reading it. The sums pass adds the
 * bn's Σdy·x̂ and Σdy, the second pass makes the bn's input gradient dx16 and the
 * convolution's weight gradient from it. Taken where the forward's tiles hold 64 output
 * channels a block (out_c a multiple of 64) as the weight gradient's do, and the
 * weight gradient's columns are one chunk of at most 128 (a warp's 8-column fragments:
 * one where kpad ≤ 64, two up to 128). Both passes walk the weight gradient's splits
 * (split_tiles tiles each): their orders of summation are functions of the shape
 * alone, the weight gradient's the same as tdm_k_conv_small_wgrad's. */
#define TDM_K_STEM_CB 64        /* output channels a block, both passes */
#define TDM_K_STEM_KPAD_MAX 128 /* the weight gradient's columns, one chunk */
#define TDM_K_STEM_SLOTS 16     /* the sums: a thread's doubles (8 channels, 2 sums) */

/* The sums pass's shared memory, as byte offsets (each a multiple of 16): the block's
 * weights and the halo as pair words (as tdm_k_small_fwd_layout's), the pair table, dy's
 * tile twice (the next one copied in while this one is used; 128 pixels of 64 + 8
 * bf16), the bn's mean, invstd, scale and shift (64 floats each), and each thread's
 * double sums. */
typedef struct {
  size_t weights, halo, pairs, dy, bn, slots, total;
} TdmKStemSumsLayout;

TDM_K_SMALL_BOTH static inline TdmKStemSumsLayout
tdm_k_stem_sums_layout(int fwd_kpad, int halo_elems)
{
  TdmKStemSumsLayout l;
  l.weights = 0;
  l.halo = l.weights + (size_t)TDM_K_STEM_CB * (fwd_kpad + 8) * 2;
  l.pairs = l.halo + tdm_k_small_up((size_t)halo_elems * 4, 16);
  l.dy = l.pairs + tdm_k_small_up((size_t)(fwd_kpad / 2) * 8, 16);
  l.bn = l.dy + 2 * (size_t)TDM_K_SMALL_BM * (TDM_K_STEM_CB + 8) * 2;
  l.slots = l.bn + 4 * TDM_K_STEM_CB * 4;
  l.total = l.slots + (size_t)TDM_K_SMALL_THREADS * TDM_K_STEM_SLOTS * 8;
  return l;
}

/* The second pass's: the weights, the halo as pair words (the forward's A) and as
 * pixel pairs (the weight gradient's B, made from the first), the pair table, the
 * tile's pixel pairs and the chunk's column table (as tdm_k_small_wgrad_layout's),
 * dy's tile twice (dx16 made in place: the weight gradient's A), and the bn's scale,
 * shift and the input gradient's three coefficients (64 floats each). The pixel
 * groups' sums (at most 64 · 64 floats: pixel_groups · kc ≤ 64) take dy's room at the
 * end. */
typedef struct {
  size_t weights, halo, pixels, pairs, rows, cols, dy, bn, total;
} TdmKStemDxLayout;

TDM_K_SMALL_BOTH static inline TdmKStemDxLayout
tdm_k_stem_dx_layout(int fwd_kpad, int kc, int halo_elems)
{
  TdmKStemDxLayout l;
  l.weights = 0;
  l.halo = l.weights + (size_t)TDM_K_STEM_CB * (fwd_kpad + 8) * 2;
  l.pixels = l.halo + tdm_k_small_up((size_t)halo_elems * 4, 16);
  l.pairs = l.pixels + tdm_k_small_up((size_t)halo_elems * 4, 16);
  l.rows = l.pairs + tdm_k_small_up((size_t)(fwd_kpad / 2) * 8, 16);
  l.cols = l.rows + (size_t)TDM_K_SMALL_BM / 2 * 8;
  l.dy = l.cols + tdm_k_small_up((size_t)kc * 4, 16);
  l.bn = l.dy + 2 * (size_t)TDM_K_SMALL_BM * (TDM_K_STEM_CB + 8) * 2;
  l.total = l.bn + 5 * TDM_K_STEM_CB * 4;
  return l;
}

typedef struct {
  TdmKSmallPlan small;   /* the convolution's plan: tiles, splits, columns */
  int fpw;               /* the weight gradient's 8-column fragments a warp: 1 or 2 */
  int blocks;            /* blocks along the tiles in both passes: small.splits */
  size_t sums_bytes;     /* the sums' partials: blocks · 2 · out_c doubles */
  size_t wgrad_bytes;    /* the weight gradient's: small.partial_bytes */
  size_t scratch_bytes;  /* the larger of the two: one scratch serves both passes in turn */
  size_t sums_smem, dx_smem;
} TdmKStemBnPlan;

/* Fills *p for the convolution's shape; false where conv-stem-bn.cu does not take it
 * (then the caller keeps its separate steps). */
static inline bool
tdm_k_stem_bn_plan(int n, int h, int w, int c, int out_c, int kernel, int pad, int stride,
                   TdmKStemBnPlan *p)
{
  TdmKSmallPlan *s = &p->small;
  if (!tdm_k_small_plan(n, h, w, c, out_c, kernel, pad, stride, s) ||
      out_c % TDM_K_STEM_CB != 0 || s->bn != TDM_K_STEM_CB || s->ob != TDM_K_STEM_CB ||
      s->kchunks != 1 || s->kpad > TDM_K_STEM_KPAD_MAX)
    return false;
  p->fpw = s->kpad <= 64 ? 1 : 2;
  p->blocks = s->splits;
  p->sums_bytes = (size_t)p->blocks * 2 * out_c * sizeof(double);
  p->wgrad_bytes = s->partial_bytes;
  p->scratch_bytes = p->sums_bytes > p->wgrad_bytes ? p->sums_bytes : p->wgrad_bytes;
  int halo = s->halo_h * s->halo_w * c;
  p->sums_smem = tdm_k_stem_sums_layout(s->fwd_kpad, halo).total;
  p->dx_smem = tdm_k_stem_dx_layout(s->fwd_kpad, s->kc, halo).total;
  return p->sums_smem <= TDM_K_SMALL_SMEM_MAX && p->dx_smem <= TDM_K_SMALL_SMEM_MAX;
}
