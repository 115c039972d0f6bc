/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-stem-bn.cu — the backward of a network's stem (a first layer's convolution of few
 * channels, float32 input, conv-small's shapes) and of the training bn after it, in two
 * passes that never store the stem's output: each makes it again a tile at a time with
 * the forward's tiles, weights and MMAs (conv_small_forward_kernel's loop, written out
 * here: the same float32 sums, rounded once to bf16, the bits of the forward's bf16
 * output), instead of the stem's forward, bn_backward_sums, bn_backward_dx_bf16 and the
 * weight gradient each streaming it through memory.
 * - Sums: dy's tile (bf16, copied in by cp.async a tile ahead) against the remade x:
 *   Σdy·x̂ and Σdy per channel with the ReLU's mask, x̂ and their products as
 *   bn_backward_sums computes them; in float a thread over four tiles, then in double
 *   in its own shared slots, the block's threads in order into its partial, the blocks'
 *   partials in order by a second launch: no atomics, an order of the shape alone.
 * - Input gradient and weight gradient: x and dy's tile again, dx16 as
 *   bn_backward_dx_bf16 computes each value (the same bits), made in place of dy's tile,
 *   where it is the weight gradient's A (conv_small_wgrad_kernel's dyᵀ tile) against the
 *   halo's columns: conv_small_wgrad_kernel's splits, fragments and order, so dw has the
 *   bits of tdm_k_conv_small_wgrad over bn_backward_dx_bf16's dx16.
 * Not here: the all-reduce of synchronized bn's sums between the passes (the engine's),
 * any shape conv-small-plan.h's tdm_k_stem_bn_plan() refuses. Needs sm_80 or later.
 */
#include "tdm-kernels.h"
#include "conv-small-plan.h"
#include "common.cuh"
#include "bn-value.cuh"
#include "conv-small-tile.cuh"

#include <cuda_bf16.h>

#define STEM_CB TDM_K_STEM_CB
#define STEM_DS (STEM_CB + 8) /* dy's tile row, in elements: ldmatrix's rows in distinct banks */
/* Tiles whose values a thread adds in float (16 a channel: bn_backward_sums's float runs)
 * before it adds the run into its double slots. */
#define STEM_RUN_TILES 4
/* The forward's warps over a 128 × 64 tile: 4 × 2 of 32 × 32 (conv_small_forward_kernel's
 * BN = 64 geometry). */
#define STEM_WARPS_N 2
#define STEM_WM (TDM_K_SMALL_BM / (SC_WARPS / STEM_WARPS_N))
#define STEM_WN (STEM_CB / STEM_WARPS_N)
#define STEM_FM (STEM_WM / 16)
#define STEM_FN (STEM_WN / 8)
static_assert(STEM_FM == 2 && STEM_FN == 4, "the forward's 32 × 32 warp tiles");
static_assert(TDM_K_STEM_SLOTS == 2 * STEM_FN * 2, "a thread's channels, two sums each");
/* The second pass's blocks a multiprocessor (its launch bounds): two fit 127–128
 * registers without spills (ptxas, sm_90; one a multiprocessor took 126–155). */
#ifndef STEM_DX_BLOCKS
#define STEM_DX_BLOCKS 2
#endif

/* 16 bytes from global to shared memory without registers, or 16 zero bytes (a pixel
 * outside the output). */
__device__ __forceinline__ void
stem_copy16(void *smem, const void *gmem, bool valid)
{
  unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void
stem_copy_commit(void)
{
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void
stem_copy_wait(void)
{
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Where tile `tile` is: its image and its first output pixel. */
struct StemTile {
  int img, oy0, ox0;
  __device__ __forceinline__ StemTile(const SmallShape &s, int tile, int tr)
  {
    int tx = tile % s.tiles_x, rest = tile / s.tiles_x;
    int ty = rest % s.tiles_y;
    img = rest / s.tiles_y;
    oy0 = ty * tr;
    ox0 = tx * s.tw;
  }
};

/* dy's 128 × 64 tile (channels o0 on) into dst as the weight gradient lays it out, by
 * cp.async (one group, committed by the caller): zero for pixels outside the output. */
__device__ __forceinline__ void
stem_copy_dy(uint16_t *dst, const uint16_t *dy, const SmallShape &s, int tile, int tr,
             int tw_shift, int o0)
{
  StemTile at(s, tile, tr);
  for (int idx = threadIdx.x; idx < TDM_K_SMALL_BM * (STEM_CB / 8); idx += blockDim.x) {
    int r = idx / (STEM_CB / 8), q = idx % (STEM_CB / 8);
    int oy = at.oy0 + (r >> tw_shift), ox = at.ox0 + (r & (s.tw - 1));
    bool valid = oy < s.oh && ox < s.ow;
    const uint16_t *src =
        valid ? dy + (((size_t)at.img * s.oh + oy) * s.ow + ox) * s.out_c + o0 + q * 8 : dy;
    stem_copy16(dst + r * STEM_DS + q * 8, src, valid);
  }
}

/* The block's forward set-up, as conv_small_forward_kernel's: the pair table (columns 2q,
 * 2q + 1 of the forward's order: the first one's offset in the halo, which halves are
 * columns) and the weights of its 64 channels as B (a row of fwd_kpad + 8 a channel,
 * zero in the padding columns). */
__device__ __forceinline__ void
stem_forward_setup(int2 *pairs, uint16_t *b_tile, const uint16_t *wt, const SmallShape &s,
                   int n0)
{
  for (int q = threadIdx.x; q < s.fwd_kpad / 2; q += blockDim.x) {
    int lo = tdm_k_small_fwd_offset(2 * q, s.kernel, s.c, s.fwd_rk, s.halo_w);
    int hi = tdm_k_small_fwd_offset(2 * q + 1, s.kernel, s.c, s.fwd_rk, s.halo_w);
    pairs[q] = make_int2(lo >= 0 ? lo : 0, (lo >= 0 ? 0xffff : 0) | (hi >= 0 ? 0xffff0000 : 0));
  }
  const int BS = s.fwd_kpad + 8;
  for (int i = threadIdx.x; i < STEM_CB * s.fwd_kpad; i += blockDim.x) {
    int o = i / s.fwd_kpad, k = i % s.fwd_kpad;
    int col = tdm_k_small_fwd_column(k, s.kernel, s.c, s.fwd_rk);
    b_tile[o * BS + k] = col >= 0 ? wt[(size_t)(n0 + o) * s.k + col] : (uint16_t)0;
  }
}

/* A lane's place in the forward's warp tiles, the same for every tile: its A rows' window
 * corners in the halo (row g's, and the distances to g + 8 and to each 16-row fragment)
 * and its ldmatrix row of the weights. conv_small_forward_kernel's, for 64 channels. */
struct StemFwdLane {
  int arow0, d8, d16[STEM_FM];
  const uint16_t *b_lane;

  __device__ __forceinline__ StemFwdLane(const SmallShape &s, const uint16_t *b_tile)
  {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / STEM_WARPS_N, wn = warp % STEM_WARPS_N, g = lane >> 2;
    const int wrow = wm * STEM_WM;
    arow0 = tdm_k_small_halo_row(wrow + g, s.tw, s.stride, s.c, s.halo_w);
    const int corner = tdm_k_small_halo_row(wrow, s.tw, s.stride, s.c, s.halo_w);
    d8 = tdm_k_small_halo_row(wrow + 8, s.tw, s.stride, s.c, s.halo_w) - corner;
    for (int i = 0; i < STEM_FM; i++)
      d16[i] = tdm_k_small_halo_row(wrow + 16 * i, s.tw, s.stride, s.c, s.halo_w) - corner;
    const int BS = s.fwd_kpad + 8;
    b_lane = b_tile + (wn * STEM_WN + ((lane >> 4) << 3) + (lane & 7)) * BS +
             ((lane >> 3) & 1) * 8;
  }
};

/* The tile's sums for this lane (rows wm·32 + 16i + g (+ 8), channels wn·32 + 8j + 2t
 * (+ 1)): conv_small_forward_kernel's MMA loop over fwd_kpad, in its order. */
__device__ __forceinline__ void
stem_forward_tile(float (&acc)[STEM_FM][STEM_FN][4], const unsigned *words, const int2 *pairs,
                  const StemFwdLane &fl, int fwd_kpad)
{
  const int t = threadIdx.x & 3, BS = fwd_kpad + 8;
  for (int i = 0; i < STEM_FM; i++)
    for (int j = 0; j < STEM_FN; j++)
      for (int q = 0; q < 4; q++)
        acc[i][j][q] = 0.0f;
  for (int k0 = 0; k0 < fwd_kpad; k0 += 16) {
    const int2 p0 = pairs[k0 / 2 + t], p8 = pairs[k0 / 2 + t + 4];
    const unsigned *w0 = words + fl.arow0 + p0.x, *w8 = words + fl.arow0 + p8.x;
    unsigned a[STEM_FM][4];
    for (int i = 0; i < STEM_FM; i++) {
      a[i][0] = w0[fl.d16[i]] & (unsigned)p0.y;
      a[i][1] = w0[fl.d16[i] + fl.d8] & (unsigned)p0.y;
      a[i][2] = w8[fl.d16[i]] & (unsigned)p8.y;
      a[i][3] = w8[fl.d16[i] + fl.d8] & (unsigned)p8.y;
    }
    unsigned b[STEM_FN][2];
    for (int p = 0; p < STEM_FN / 2; p++)
      small_ldmatrix_x4(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],
                        fl.b_lane + p * 16 * BS + k0);
    for (int i = 0; i < STEM_FM; i++)
      for (int j = 0; j < STEM_FN; j++)
        small_mma(acc[i][j], a[i], b[j][0], b[j][1]);
  }
}

/* The forward's float32 sum as the bf16 value it stores (rounded once, widened exactly). */
__device__ __forceinline__ float
stem_x(float sum)
{
  return __uint_as_float((unsigned)tdm_k_bf16_bits(sum) << 16);
}

/* The sums pass: block (split, channel tile) adds the tiles [split · split_tiles, + split_tiles)
 * for its 64 channels. Shared memory as tdm_k_stem_sums_layout lays it out. A thread
 * adds its 8 channels' values of 4 pixels a tile (its forward fragments' rows and
 * columns) in float runs of STEM_RUN_TILES tiles, each run into its double slots (its
 * own: slot (which · 8 + jj) · 256 + thread); at the end the 32 threads that hold a
 * channel are added in order into the block's partial. */
template <bool RELU>
__global__ void
__launch_bounds__(TDM_K_SMALL_THREADS, 2)
    stem_bn_sums_kernel(double *partials, const uint16_t *dy, const float *x,
                        const uint16_t *wt, SmallShape s, BnGather bn, int split_tiles)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem[];
  const TdmKStemSumsLayout L = tdm_k_stem_sums_layout(s.fwd_kpad, s.halo_h * s.halo_w * s.c);
  uint16_t *b_tile = (uint16_t *)(smem + L.weights);
  unsigned *words = (unsigned *)(smem + L.halo);
  int2 *pairs = (int2 *)(smem + L.pairs);
  uint16_t *dy_tiles = (uint16_t *)(smem + L.dy);
  float *mean = (float *)(smem + L.bn), *invstd = mean + STEM_CB, *scale = invstd + STEM_CB,
        *shift = scale + STEM_CB;
  double *slots = (double *)(smem + L.slots);

  const int split = blockIdx.x, n0 = blockIdx.y * STEM_CB;
  const int t_begin = split * split_tiles, t_end = min(s.tiles, t_begin + split_tiles);
  int tw_shift = 0;
  while ((1 << tw_shift) < s.tw)
    tw_shift++;
  const int tr = TDM_K_SMALL_BM >> tw_shift;
  if (t_begin < t_end)
    stem_copy_dy(dy_tiles, dy, s, t_begin, tr, tw_shift, n0);
  stem_copy_commit();
  stem_forward_setup(pairs, b_tile, wt, s, n0);
  for (int ch = threadIdx.x; ch < STEM_CB; ch += blockDim.x) {
    mean[ch] = bn.mean[n0 + ch];
    invstd[ch] = bn.invstd[n0 + ch];
    bn_train_affine(n0 + ch, bn.mean, bn.invstd, bn.gamma, bn.beta, scale + ch, shift + ch);
  }
  for (int i = 0; i < TDM_K_STEM_SLOTS; i++)
    slots[i * TDM_K_SMALL_THREADS + threadIdx.x] = 0.0;
  __syncthreads();

  const StemFwdLane fl(s, b_tile);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / STEM_WARPS_N, wn = warp % STEM_WARPS_N, g = lane >> 2, t = lane & 3;
  float f0[2 * STEM_FN], f1[2 * STEM_FN];
  for (int jj = 0; jj < 2 * STEM_FN; jj++)
    f0[jj] = f1[jj] = 0.0f;
  int run = 0;
  for (int tile = t_begin; tile < t_end; tile++) {
    const StemTile at(s, tile, tr);
    const uint16_t *dyt = dy_tiles + ((tile - t_begin) & 1) * TDM_K_SMALL_BM * STEM_DS;
    /* The halo is free: its last reads (the previous tile's MMAs) came before the
     * barrier that made that tile's dy visible. */
    small_halo_pairs<false>(words, x, s, at.img, at.oy0 * s.stride - s.pad,
                            at.ox0 * s.stride - s.pad, (const float *)NULL,
                            (const float *)NULL, false);
    __syncthreads();
    /* The next tile's dy into the other buffer: its last reads (two tiles ago) came
     * before the barrier above. A group every tile, empty past the last. */
    if (tile + 1 < t_end)
      stem_copy_dy(dy_tiles + ((tile + 1 - t_begin) & 1) * TDM_K_SMALL_BM * STEM_DS, dy, s,
                   tile + 1, tr, tw_shift, n0);
    stem_copy_commit();
    float acc[STEM_FM][STEM_FN][4];
    stem_forward_tile(acc, words, pairs, fl, s.fwd_kpad);
    stem_copy_wait<1>();
    __syncthreads();
    for (int i = 0; i < STEM_FM; i++)
      for (int h = 0; h < 2; h++) {
        int r = wm * STEM_WM + i * 16 + g + 8 * h;
        int oy = at.oy0 + (r >> tw_shift), ox = at.ox0 + (r & (s.tw - 1));
        if (oy >= s.oh || ox >= s.ow)
          continue;
        for (int j = 0; j < STEM_FN; j++) {
          int col = wn * STEM_WN + j * 8 + 2 * t;
          unsigned dyw = *(const unsigned *)(dyt + r * STEM_DS + col);
          for (int e = 0; e < 2; e++) {
            float v = stem_x(acc[i][j][2 * h + e]);
            float d = __uint_as_float(e == 0 ? dyw << 16 : dyw & 0xffff0000u);
            if (RELU && !(bn_affine_output(v, scale[col + e], shift[col + e], false) > 0.0f))
              d = 0.0f;
            float xhat = __fmul_rn(__fsub_rn(v, mean[col + e]), invstd[col + e]);
            f0[2 * j + e] = fmaf(d, xhat, f0[2 * j + e]);
            f1[2 * j + e] = __fadd_rn(f1[2 * j + e], d);
          }
        }
      }
    if (++run == STEM_RUN_TILES || tile + 1 == t_end) {
      for (int jj = 0; jj < 2 * STEM_FN; jj++) {
        slots[jj * TDM_K_SMALL_THREADS + threadIdx.x] += (double)f0[jj];
        slots[(2 * STEM_FN + jj) * TDM_K_SMALL_THREADS + threadIdx.x] += (double)f1[jj];
        f0[jj] = f1[jj] = 0.0f;
      }
      run = 0;
    }
  }
  stem_copy_wait<0>();
  __syncthreads();
  /* The block's partial: value (which, ch) from the 32 threads that hold channel ch, in
   * the order of their warp rows and their g. */
  for (int v = threadIdx.x; v < 2 * STEM_CB; v += blockDim.x) {
    int which = v / STEM_CB, ch = v % STEM_CB;
    int cwn = ch / STEM_WN, j = ch % STEM_WN / 8, ct = ch % 8 / 2, e = ch % 2;
    const double *p = slots + (which * 2 * STEM_FN + 2 * j + e) * TDM_K_SMALL_THREADS;
    double sum = 0.0;
    for (int cwm = 0; cwm < SC_WARPS / STEM_WARPS_N; cwm++)
      for (int cg = 0; cg < 8; cg++)
        sum += p[(cwm * STEM_WARPS_N + cwn) * 32 + cg * 4 + ct];
    partials[((size_t)split * 2 + which) * s.out_c + n0 + ch] = sum;
  }
#endif
}

/* out0[c] = Σdy·x̂, out1[c] = Σdy: the blocks' partials (blocks × 2 × out_c doubles)
 * added in a fixed order (32 values a block, eight warps each over consecutive blocks,
 * then the warps in order), as float32. */
__global__ void
__launch_bounds__(TDM_K_SMALL_THREADS)
    stem_bn_sums_finish_kernel(float *out0, float *out1, const double *partials, int blocks,
                               int out_c)
{
  __shared__ double part[SC_WARPS][33];
  int lane = threadIdx.x % 32, group = threadIdx.x / 32;
  int v = blockIdx.x * 32 + lane, total = 2 * out_c;
  double sum = 0.0;
  if (v < total) {
    int per = (blocks + SC_WARPS - 1) / SC_WARPS;
    int first = group * per, last = min(blocks, first + per);
    for (int b = first; b < last; b++)
      sum += partials[(size_t)b * total + v];
  }
  part[group][lane] = sum;
  __syncthreads();
  if (group == 0 && v < total) {
    double t = part[0][lane];
    for (int gr = 1; gr < SC_WARPS; gr++)
      t += part[gr][lane];
    if (v < out_c)
      out0[v] = (float)t;
    else
      out1[v - out_c] = (float)t;
  }
}

/* The second pass: block (split, channel tile) makes the tiles [split · split_tiles,
 * + split_tiles) of x again, their dx16 in place of dy's tile, and sums dx16ᵀ times the
 * columns over them into partials[split] as conv_small_wgrad_kernel<64, false, float>
 * does (one chunk of kpad columns; FPW fragments a warp at most). Shared memory as
 * tdm_k_stem_dx_layout lays it out. */
template <bool RELU, int FPW>
__global__ void
__launch_bounds__(TDM_K_SMALL_THREADS, STEM_DX_BLOCKS)
    stem_bn_dx_wgrad_kernel(float *partials, const uint16_t *dy, const float *x,
                            const uint16_t *wt, SmallShape s, BnGather bn,
                            const float *sum_dgamma, const float *sum_dbeta, float inv_count,
                            int split_tiles, int pixel_groups)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BM = TDM_K_SMALL_BM, FM = STEM_CB / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  const int halo_elems = s.halo_h * s.halo_w * s.c;
  const TdmKStemDxLayout L = tdm_k_stem_dx_layout(s.fwd_kpad, s.kc, halo_elems);
  uint16_t *b_tile = (uint16_t *)(smem + L.weights);
  unsigned *words = (unsigned *)(smem + L.halo);
  unsigned *pixels = (unsigned *)(smem + L.pixels);
  int2 *pairs = (int2 *)(smem + L.pairs);
  int2 *ppair = (int2 *)(smem + L.rows);
  int *cols = (int *)(smem + L.cols);
  uint16_t *dy_tiles = (uint16_t *)(smem + L.dy);
  /* The mask's scale and shift, dx's coefficients dx = dk·dy + da·x + dc. */
  float *scale = (float *)(smem + L.bn), *shift = scale + STEM_CB, *dk = shift + STEM_CB,
        *da = dk + STEM_CB, *dc = da + STEM_CB;
  float *groups = (float *)(smem + L.dy); /* after the last tile */

  const int split = blockIdx.x, o0 = blockIdx.y * STEM_CB;
  const int width = s.kpad, frags = width / 8;
  const int t_begin = split * split_tiles, t_end = min(s.tiles, t_begin + split_tiles);
  int tw_shift = 0;
  while ((1 << tw_shift) < s.tw)
    tw_shift++;
  const int tr = BM >> tw_shift;
  if (t_begin < t_end)
    stem_copy_dy(dy_tiles, dy, s, t_begin, tr, tw_shift, o0);
  stem_copy_commit();
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    cols[i] = tdm_k_small_halo_col(i, s.kernel, s.c, s.halo_w);
  stem_forward_setup(pairs, b_tile, wt, s, o0);
  for (int ch = threadIdx.x; ch < STEM_CB; ch += blockDim.x) {
    bn_train_affine(o0 + ch, bn.mean, bn.invstd, bn.gamma, bn.beta, scale + ch, shift + ch);
    bn_backward_coefficients(o0 + ch, bn.mean, bn.invstd, bn.gamma, sum_dgamma, sum_dbeta,
                             inv_count, dk + ch, da + ch, dc + ch);
  }
  __syncthreads();

  const StemFwdLane fl(s, b_tile);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / STEM_WARPS_N, wn = warp % STEM_WARPS_N, g = lane >> 2, t = lane & 3;
  /* The weight gradient's warps, as conv_small_wgrad_kernel's: fragment j = nw + nw_count
   * · i of the chunk's, pixel group pg of pixel_groups. */
  const int nw_count = SC_WARPS / pixel_groups, nw = warp % nw_count, pg = warp / nw_count;
  const int a_off = (((lane >> 4) << 3) + (lane & 7)) * STEM_DS + ((lane >> 3) & 1) * 8;
  const int mine = nw < frags ? (frags - nw + nw_count - 1) / nw_count : 0;
  int bcol[FPW];
  unsigned bmask[FPW];
  for (int i = 0; i < FPW; i++) {
    int j = nw + nw_count * i;
    int col = j < frags ? cols[j * 8 + g] : -1;
    bcol[i] = col >= 0 ? col : 0;
    bmask[i] = col >= 0 ? 0xffffffffu : 0u;
  }
  float accw[FM][FPW][4];
  for (int m = 0; m < FM; m++)
    for (int i = 0; i < FPW; i++)
      for (int q = 0; q < 4; q++)
        accw[m][i][q] = 0.0f;
  const int step_px = s.stride * s.c; /* a pixel pair's second value, as the wgrad's halo */

  for (int tile = t_begin; tile < t_end; tile++) {
    const StemTile at(s, tile, tr);
    uint16_t *dyt = dy_tiles + ((tile - t_begin) & 1) * BM * STEM_DS;
    /* The halo is free: its last reads (the previous tile's pixel words and MMAs) came
     * before that tile's second barrier. The pixel words, the pixel table and the other
     * dy buffer, read until the previous tile's last steps, are written after the
     * barrier below. */
    small_halo_pairs<false>(words, x, s, at.img, at.oy0 * s.stride - s.pad,
                            at.ox0 * s.stride - s.pad, (const float *)NULL,
                            (const float *)NULL, false);
    __syncthreads();
    if (tile + 1 < t_end)
      stem_copy_dy(dy_tiles + ((tile + 1 - t_begin) & 1) * BM * STEM_DS, dy, s, tile + 1, tr,
                   tw_shift, o0);
    stem_copy_commit();
    /* The halo as the weight gradient's pixel pairs: value i and value i + stride · c
     * (zero past the halo's end), the words small_halo_pixel_pairs makes. */
    for (int i = threadIdx.x; i < halo_elems; i += blockDim.x)
      pixels[i] = (words[i] & 0xffffu) |
                  (i + step_px < halo_elems ? words[i + step_px] << 16 : 0u);
    for (int u = threadIdx.x; u < BM / 2; u += blockDim.x) {
      int r = 2 * u;
      int oy = at.oy0 + (r >> tw_shift), ox = at.ox0 + (r & (s.tw - 1));
      bool first = oy < s.oh && ox < s.ow, second = first && ox + 1 < s.ow;
      ppair[u] = make_int2(first ? tdm_k_small_halo_row(r, s.tw, s.stride, s.c, s.halo_w) : 0,
                           (first ? 0xffff : 0) | (second ? 0xffff0000 : 0));
    }
    {
      float acc[STEM_FM][STEM_FN][4];
      stem_forward_tile(acc, words, pairs, fl, s.fwd_kpad);
      stem_copy_wait<1>();
      __syncthreads();
      /* dx16 in place of dy (each word read and written by this thread only); zero for
       * pixels outside the output, as the weight gradient's dy tile holds there. */
      for (int i = 0; i < STEM_FM; i++)
        for (int h = 0; h < 2; h++) {
          int r = wm * STEM_WM + i * 16 + g + 8 * h;
          int oy = at.oy0 + (r >> tw_shift), ox = at.ox0 + (r & (s.tw - 1));
          bool valid = oy < s.oh && ox < s.ow;
          for (int j = 0; j < STEM_FN; j++) {
            int col = wn * STEM_WN + j * 8 + 2 * t;
            unsigned *p = (unsigned *)(dyt + r * STEM_DS + col);
            unsigned dyw = *p, out = 0u;
            for (int e = 0; e < 2; e++) {
              float v = stem_x(acc[i][j][2 * h + e]);
              float d = __uint_as_float(e == 0 ? dyw << 16 : dyw & 0xffff0000u);
              if (RELU && !(bn_affine_output(v, scale[col + e], shift[col + e], false) > 0.0f))
                d = 0.0f;
              unsigned bits = tdm_k_bf16_bits(
                  bn_backward_value(d, v, dk[col + e], da[col + e], dc[col + e]));
              out |= bits << (16 * e);
            }
            *p = valid ? out : 0u;
          }
        }
    }
    __syncthreads();
    /* conv_small_wgrad_kernel's steps: B's pixel pairs, A (dx16ᵀ) by ldmatrix.trans. */
    const uint16_t *a_lane = dyt + a_off;
    for (int step = pg; step < BM / 16; step += pixel_groups) {
      const int p0 = step * 16;
      const int2 q0 = ppair[p0 / 2 + t], q8 = ppair[p0 / 2 + t + 4];
      unsigned b[FPW][2];
#pragma unroll
      for (int i = 0; i < FPW; i++)
        if (i < mine) {
          b[i][0] = pixels[q0.x + bcol[i]] & (unsigned)q0.y & bmask[i];
          b[i][1] = pixels[q8.x + bcol[i]] & (unsigned)q8.y & bmask[i];
        }
#pragma unroll
      for (int m = 0; m < FM; m++) {
        unsigned a[4];
        small_ldmatrix_x4_trans(a, a_lane + p0 * STEM_DS + m * 16);
#pragma unroll
        for (int i = 0; i < FPW; i++)
          if (i < mine)
            small_mma(accw[m][i], a, b[i][0], b[i][1]);
      }
    }
    /* No barrier here: the next tile writes the halo (read before the barrier above),
     * then the pixel words, the table and the other dy buffer only after its first
     * barrier, which every warp reaches after these steps. */
  }
  stem_copy_wait<0>();
  /* D's rows are channels (m·16 + g, + 8), its columns the chunk's (j·8 + 2t, + 1). */
  float *out = partials + ((size_t)split * s.out_c + o0) * s.kpad;
  if (pixel_groups == 1) {
    for (int i = 0; i < FPW; i++) {
      int j = nw + nw_count * i;
      if (j >= frags)
        break;
      for (int m = 0; m < FM; m++) {
        float *o = out + (size_t)(m * 16 + g) * s.kpad + j * 8 + 2 * t;
        *(float2 *)o = make_float2(accw[m][i][0], accw[m][i][1]);
        *(float2 *)(o + (size_t)8 * s.kpad) = make_float2(accw[m][i][2], accw[m][i][3]);
      }
    }
    return;
  }
  /* The groups' sums take dy's room: every warp is done with its last tile first. */
  __syncthreads();
  for (int i = 0; i < FPW; i++) {
    int j = nw + nw_count * i;
    if (j >= frags)
      break;
    for (int m = 0; m < FM; m++) {
      float *o = groups + ((size_t)pg * STEM_CB + m * 16 + g) * width + j * 8 + 2 * t;
      *(float2 *)o = make_float2(accw[m][i][0], accw[m][i][1]);
      *(float2 *)(o + 8 * width) = make_float2(accw[m][i][2], accw[m][i][3]);
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < STEM_CB * width; idx += blockDim.x) {
    int ch = idx / width, col = idx % width;
    float sum = groups[idx];
    for (int gr = 1; gr < pixel_groups; gr++)
      sum = __fadd_rn(sum, groups[(size_t)gr * STEM_CB * width + idx]);
    out[(size_t)ch * s.kpad + col] = sum;
  }
#endif
}

/* The shape, the plan and the checks both launchers share. */
static cudaError_t
stem_prepare(const uint16_t *dy, const float *x, const uint16_t *w, const float *mean,
             const float *invstd, const float *gamma, const float *beta, int n, int h, int wd,
             int c, int out_c, int kernel, int pad, int stride, const void *scratch,
             TdmKStemBnPlan *p, SmallShape *s)
{
  if (!tdm_k_stem_bn_plan(n, h, wd, c, out_c, kernel, pad, stride, p) ||
      !small_shape(n, h, wd, c, out_c, kernel, pad, stride, &p->small, s))
    return cudaErrorInvalidValue;
  if (dy == NULL || x == NULL || w == NULL || mean == NULL || invstd == NULL ||
      gamma == NULL || beta == NULL || scratch == NULL || !tdm_k_aligned16(dy) ||
      ((uintptr_t)scratch & 31u) != 0)
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

extern "C" cudaError_t
tdm_k_stem_bn_sums(float *dgamma, float *dbeta, const uint16_t *dy, const float *x,
                   const uint16_t *w, const float *mean, const float *invstd,
                   const float *gamma, const float *beta, bool relu, int n, int h, int wd,
                   int c, int out_c, int kernel, int pad, int stride, void *scratch,
                   size_t scratch_bytes, cudaStream_t stream)
{
  TdmKStemBnPlan p;
  SmallShape s;
  if (dgamma == NULL || dbeta == NULL)
    return cudaErrorInvalidValue;
  cudaError_t err = stem_prepare(dy, x, w, mean, invstd, gamma, beta, n, h, wd, c, out_c,
                                 kernel, pad, stride, scratch, &p, &s);
  if (err == cudaSuccess && scratch_bytes < p.sums_bytes)
    err = cudaErrorInvalidValue;
  if (err != cudaSuccess)
    return err;
  BnGather bn = {mean, invstd, gamma, beta, relu};
  double *partials = (double *)scratch;
  dim3 grid((unsigned)p.blocks, (unsigned)(out_c / STEM_CB));
  void (*kernel_fn)(double *, const uint16_t *, const float *, const uint16_t *, SmallShape,
                    BnGather, int) =
      relu ? stem_bn_sums_kernel<true> : stem_bn_sums_kernel<false>;
  err = small_allow_shared(kernel_fn);
  if (err != cudaSuccess)
    return err;
  kernel_fn<<<grid, TDM_K_SMALL_THREADS, p.sums_smem, stream>>>(partials, dy, x, w, s, bn,
                                                                 p.small.split_tiles);
  err = tdm_k_launched();
  if (err != cudaSuccess)
    return err;
  stem_bn_sums_finish_kernel<<<(unsigned)((2 * out_c + 31) / 32), TDM_K_SMALL_THREADS, 0,
                               stream>>>(dgamma, dbeta, partials, p.blocks, out_c);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_stem_bn_dx_wgrad(float *dw, const uint16_t *dy, const float *x, const uint16_t *w,
                       const float *mean, const float *invstd, const float *gamma,
                       const float *beta, bool relu, const float *sum_dgamma,
                       const float *sum_dbeta, float inv_count, int n, int h, int wd, int c,
                       int out_c, int kernel, int pad, int stride, void *scratch,
                       size_t scratch_bytes, cudaStream_t stream)
{
  TdmKStemBnPlan p;
  SmallShape s;
  if (dw == NULL || sum_dgamma == NULL || sum_dbeta == NULL)
    return cudaErrorInvalidValue;
  cudaError_t err = stem_prepare(dy, x, w, mean, invstd, gamma, beta, n, h, wd, c, out_c,
                                 kernel, pad, stride, scratch, &p, &s);
  if (err == cudaSuccess && scratch_bytes < p.wgrad_bytes)
    err = cudaErrorInvalidValue;
  if (err != cudaSuccess)
    return err;
  BnGather bn = {mean, invstd, gamma, beta, relu};
  float *partials = (float *)scratch;
  dim3 grid((unsigned)p.blocks, (unsigned)(out_c / STEM_CB));
  void (*kernel_fn)(float *, const uint16_t *, const float *, const uint16_t *, SmallShape,
                    BnGather, const float *, const float *, float, int, int) =
      p.fpw == 1 ? (relu ? stem_bn_dx_wgrad_kernel<true, 1> : stem_bn_dx_wgrad_kernel<false, 1>)
                 : (relu ? stem_bn_dx_wgrad_kernel<true, 2> : stem_bn_dx_wgrad_kernel<false, 2>);
  err = small_allow_shared(kernel_fn);
  if (err != cudaSuccess)
    return err;
  kernel_fn<<<grid, TDM_K_SMALL_THREADS, p.dx_smem, stream>>>(
      partials, dy, x, w, s, bn, sum_dgamma, sum_dbeta, inv_count, p.small.split_tiles,
      p.small.pixel_groups);
  err = tdm_k_launched();
  if (err != cudaSuccess)
    return err;
  return tdm_k_conv_small_wgrad_sum(dw, partials, p.small.splits, out_c, p.small.k,
                                    p.small.kpad, stream);
}
