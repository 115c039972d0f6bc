/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-small.cu — the forward and the weight gradient of a convolution with few input
 * channels (a network's first layer: 1 to 8 channels, kernel up to 7×7, stride 1 or 2,
 * padding 0 to 3; conv-small-plan.h says which shapes and how they are tiled) as
 * implicit GEMMs on bfloat16 tensor cores (float32 sums), without columns in global
 * memory.
 *
 * The reduction runs over K = kernel²·c columns in im2col's order (ky, kx, channel),
 * padded with zeros to a multiple of 16. Values are read from the NHWC input (float32 or
 * bf16; a bn before the conv applied as the value is read, as im2col_bf16_bn computes
 * it: the same bf16 bits).
 * - Forward: rows are output pixels, in tiles of tr × tw pixels of one image
 *   (conv-small-plan.h: 8 × 16 for torchvision's stem), columns output channels (64, 32
 *   or 16 a block, their weights kept in shared memory for all the block's tiles). A
 *   tile reads its input window once (the halo, converted to bf16 once: the stem's
 *   21 × 37 × 3 values for 128 pixels, where gathering the columns read 128 × 147) and
 *   its warps build the MMA fragments (mma.sync m16n8k16) from it through a table of
 *   the columns' offsets (the halo held as pair words, value i and i + 1, and the columns
 *   ordered with each kernel row padded to an even count, so that two columns are one
 *   32-bit load); written as float32 from the registers, or rounded once to
 *   bf16 and through shared memory in 16-byte stores. Each output's sum has one order
 *   whatever the grid.
 * - Weight gradient: dw (out_c × K) = dyᵀ · columns. The forward's tiles are split into
 *   conv-small-plan.h's fixed number of ranges; a block sums its range (its channels and
 *   a chunk of up to 160 columns) a tile at a time: the tile's halo and dy's 128 × OB
 *   tile in shared memory, A (dyᵀ) by ldmatrix.trans, B (the columns) from the halo held
 *   as pixel pairs (two pixels of a column one 32-bit load), into fragments held by its
 *   warps; it writes them as one partial
 *   (float32, in the caller's scratch), and a second kernel sums the partials of each
 *   weight in a fixed order: the same inputs give the same bits, on any GPU of a kind.
 * Needs sm_80 or later (bf16 mma.sync, ldmatrix).
 */
#include "tdm-kernels.h"
#include "conv-small-plan.h"
#include "common.cuh"
#include "bn-value.cuh"
#include "conv-small-tile.cuh"

#include <cuda_bf16.h>

/* Two sums of a D fragment into the output tile: float32 as they are, or rounded once to
 * bf16. */
__device__ __forceinline__ void
small_stage(float *p, float a, float b)
{
  *(float2 *)p = make_float2(a, b);
}

__device__ __forceinline__ void
small_stage(uint16_t *p, float a, float b)
{
  *(unsigned *)p = small_pair(tdm_k_bf16_bits(a), tdm_k_bf16_bits(b));
}

/* The forward: BN output channels a block (blockIdx.y), tiles of tr × tw output pixels
 * of one image (conv-small-plan.h; blockIdx.x, then every gridDim.x-th, in the order
 * image, tile row, tile column). Shared memory as tdm_k_small_fwd_layout lays it out:
 * the bf16 output tile, the block's weights for the whole of K in the forward's column
 * order (kept for all its tiles), the halo as pair words, the pair table, the bn's scale
 * and shift. Per tile: the halo is read (each input value once, converted to bf16 once);
 * the warps (4 × 2 over a 128 × 64 tile, 32 × 32 each, or 8 × 1 over 128 × 32 or
 * 128 × 16) build A's fragments straight from it (row r, columns 2q and 2q + 1: the
 * word at row(r) + off(q), masked: the row's offset computed once per kernel, the pair's
 * from the table) and B's with ldmatrix from the weights, and run m16n8k16 MMAs over K
 * in order; the sums are written as float32 straight from the registers, or rounded once
 * to bf16 and through the output tile in 16-byte stores, a pixel's BN channels
 * contiguous in y. Each output's sum has one order whatever the grid. */
template <int BN, bool BNORM, typename X, typename Y>
__global__ void
__launch_bounds__(TDM_K_SMALL_THREADS, 4)
    conv_small_forward_kernel(Y *y, const X *x, const uint16_t *wt, SmallShape s, BnGather bn)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BM = TDM_K_SMALL_BM;
  constexpr int WARPS_N = BN == 64 ? 2 : 1, WARPS_M = SC_WARPS / WARPS_N;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int FM = WM / 16, FN = WN / 8;
  constexpr int SS = BN + 8;              /* the bf16 output tile's row, in elements */
  constexpr int V = 16 / (int)sizeof(Y);  /* elements a 16-byte store */
  static_assert(FM >= 1 && FN % 2 == 0 && WM % 16 == 0, "warp tiles of 16 × 16");
  extern __shared__ __align__(128) unsigned char smem[];
  const TdmKSmallFwdLayout L =
      tdm_k_small_fwd_layout(BN, s.fwd_kpad, s.halo_h * s.halo_w * s.c);
  const int BS = s.fwd_kpad + 8;
  Y *stage = (Y *)(smem + L.stage);
  uint16_t *b_tile = (uint16_t *)(smem + L.weights);
  unsigned *words = (unsigned *)(smem + L.halo);
  int2 *pairs = (int2 *)(smem + L.cols);
  float *scale = (float *)(smem + L.bn);
  float *shift = scale + TDM_K_SMALL_MAX_C;

  const int n0 = blockIdx.y * BN;
  /* The pair table: for columns 2q and 2q + 1 (conv-small-plan.h's forward order) the
   * first one's offset in the halo and which halves of its pair word are columns (a
   * padding column reads as zero). */
  for (int q = threadIdx.x; q < s.fwd_kpad / 2; q += blockDim.x) {
    int lo = tdm_k_small_fwd_offset(2 * q, s.kernel, s.c, s.fwd_rk, s.halo_w);
    int hi = tdm_k_small_fwd_offset(2 * q + 1, s.kernel, s.c, s.fwd_rk, s.halo_w);
    pairs[q] = make_int2(lo >= 0 ? lo : 0, (lo >= 0 ? 0xffff : 0) | (hi >= 0 ? 0xffff0000 : 0));
  }
  small_bn<BNORM>(scale, shift, s.c, bn);
  /* The weights as B (K × BN, column-major: a row of b_tile per output channel), in the
   * forward's order, zero in the padding columns. */
  for (int i = threadIdx.x; i < BN * s.fwd_kpad; i += blockDim.x) {
    int o = i / s.fwd_kpad, k = i % s.fwd_kpad;
    int col = tdm_k_small_fwd_column(k, s.kernel, s.c, s.fwd_rk);
    b_tile[o * BS + k] = col >= 0 ? wt[(size_t)(n0 + o) * s.k + col] : (uint16_t)0;
  }
  /* The bn's scale and shift before the first halo reads them (the table and the
   * weights too, before the first MMAs). */
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int g = lane >> 2, t = lane & 3;
  /* This lane's A rows (g and g + 8 of each of its 16-row fragments), as window corners
   * in the halo, the same for every tile: row g's corner, and where the others' are from
   * it. A fragment's 16 rows start at a multiple of 16 and tw is a power of two of at
   * least 8, so rows g and g + 8 are in one tile row (tw ≥ 16) or the same column of two
   * (tw = 8) whatever g: these distances are the same for the warp's lanes, held once
   * rather than a corner per row (registers: the block's 64 cap). */
  const int wrow = wm * WM;
  const int arow0 = tdm_k_small_halo_row(wrow + g, s.tw, s.stride, s.c, s.halo_w);
  const int corner = tdm_k_small_halo_row(wrow, s.tw, s.stride, s.c, s.halo_w);
  const int d8 = tdm_k_small_halo_row(wrow + 8, s.tw, s.stride, s.c, s.halo_w) - corner;
  int d16[FM];
  for (int i = 0; i < FM; i++)
    d16[i] = tdm_k_small_halo_row(wrow + 16 * i, s.tw, s.stride, s.c, s.halo_w) - corner;
  /* ldmatrix's row for this lane: channels wn·WN + 16p + (lane / 16)·8 + lane % 8,
   * columns k0 + ((lane / 8) % 2)·8: matrices (n 0–7, k 0–7), (n 0–7, k 8–15), (n 8–15,
   * k 0–7), (n 8–15, k 8–15), which are B's two registers for two 8-channel fragments. */
  const uint16_t *b_lane =
      b_tile + (wn * WN + ((lane >> 4) << 3) + (lane & 7)) * BS + ((lane >> 3) & 1) * 8;
  int tw_shift = 0;
  while ((1 << tw_shift) < s.tw)
    tw_shift++;
  const int tr = BM >> tw_shift;

  for (int tile = blockIdx.x; tile < s.tiles; tile += gridDim.x) {
    int tx = tile % s.tiles_x, rest = tile / s.tiles_x;
    int ty = rest % s.tiles_y, img = rest / s.tiles_y;
    int oy0 = ty * tr, ox0 = tx * s.tw;
    /* The previous tile's MMAs are done (the barrier before its output), so the halo is
     * free; its output tile is read before the barrier below. */
    small_halo_pairs<BNORM>(words, x, s, img, oy0 * s.stride - s.pad, ox0 * s.stride - s.pad,
                            scale, shift, bn.relu);
    __syncthreads();
    float acc[FM][FN][4];
    for (int i = 0; i < FM; i++)
      for (int j = 0; j < FN; j++)
        for (int q = 0; q < 4; q++)
          acc[i][j][q] = 0.0f;
    for (int k0 = 0; k0 < s.fwd_kpad; k0 += 16) {
      /* Columns 2t, 2t + 1 and 2t + 8, 2t + 9 of this step: one pair word each. */
      const int2 p0 = pairs[k0 / 2 + t], p8 = pairs[k0 / 2 + t + 4];
      const unsigned *w0 = words + arow0 + p0.x, *w8 = words + arow0 + p8.x;
      unsigned a[FM][4];
      for (int i = 0; i < FM; i++) {
        a[i][0] = w0[d16[i]] & (unsigned)p0.y;
        a[i][1] = w0[d16[i] + d8] & (unsigned)p0.y;
        a[i][2] = w8[d16[i]] & (unsigned)p8.y;
        a[i][3] = w8[d16[i] + d8] & (unsigned)p8.y;
      }
      unsigned b[FN][2];
      for (int p = 0; p < FN / 2; p++)
        small_ldmatrix_x4(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],
                          b_lane + p * 16 * BS + k0);
      for (int i = 0; i < FM; i++)
        for (int j = 0; j < FN; j++)
          small_mma(acc[i][j], a[i], b[j][0], b[j][1]);
    }
    if constexpr (sizeof(Y) == 4) {
      /* float32 straight from the registers: a quad of lanes writes 8 channels of a
       * pixel, 32 contiguous bytes (a whole sector). */
      for (int i = 0; i < FM; i++)
        for (int h = 0; h < 2; h++) {
          int r = wm * WM + i * 16 + g + 8 * h;
          int oy = oy0 + (r >> tw_shift), ox = ox0 + (r & (s.tw - 1));
          if (oy < s.oh && ox < s.ow) {
            Y *out =
                y + (((size_t)img * s.oh + oy) * s.ow + ox) * s.out_c + n0 + wn * WN + 2 * t;
            for (int j = 0; j < FN; j++)
              small_stage(out + j * 8, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
          }
        }
      /* Every warp is done with the halo before the next tile's overwrites it. */
      __syncthreads();
    } else {
      for (int i = 0; i < FM; i++)
        for (int j = 0; j < FN; j++) {
          int r = wm * WM + i * 16 + g, col = wn * WN + j * 8 + 2 * t;
          small_stage(stage + r * SS + col, acc[i][j][0], acc[i][j][1]);
          small_stage(stage + (r + 8) * SS + col, acc[i][j][2], acc[i][j][3]);
        }
      __syncthreads();
      /* bf16 out 16 bytes at a time through the output tile: a pixel's BN channels are
       * contiguous in y, a tile row's pixels too where BN is all of out_c. */
      for (int idx = threadIdx.x; idx < BM * (BN / V); idx += blockDim.x) {
        int r = idx / (BN / V), q = idx % (BN / V);
        int oy = oy0 + (r >> tw_shift), ox = ox0 + (r & (s.tw - 1));
        if (oy < s.oh && ox < s.ow)
          *(uint4 *)(y + (((size_t)img * s.oh + oy) * s.ow + ox) * s.out_c + n0 + q * V) =
              *(const uint4 *)(stage + r * SS + q * V);
      }
    }
  }
#endif
}

/* The weight gradient's blocks a multiprocessor that its registers allow (acc is OB / 2
 * floats a thread), the most without spills: 80 registers for 64 channels, 64 for 32, 48
 * for 16; with the bn (its scale and shift, the value's channel) 128, 80 and 64. */
constexpr int
small_wgrad_blocks(int ob, bool bnorm)
{
  return ob == 64 ? (bnorm ? 2 : 3) : ob == 32 ? (bnorm ? 3 : 4) : (bnorm ? 4 : 5);
}

/* The weight gradient's partial sums: block (split, chunk, channel tile) sums the
 * forward's tiles [split · split_tiles, + split_tiles) of dyᵀ (OB channels: M) times
 * the columns (chunk: up to TDM_K_SMALL_KC of them: N) over the tile's pixels (K), and
 * writes its OB × width sums to partials[split] (out_c × kpad, row-major). Per tile:
 * the halo as pixel pairs (a value and the same tap of the pixel to its right), dy's
 * 128 × OB tile (16-byte loads; zero for pixels outside the output) and the tile's pixel
 * pairs (the first one's window corner, a mask of those inside the output) into shared
 * memory; A's fragments from dy's tile by ldmatrix.trans, B's from the halo (pixels 2u,
 * 2u + 1 of a column: the word at corner(u) + col, masked) through the pixel pairs and
 * the column table. The chunk's 8-column fragments go to the warps in turn (a
 * warp's every NW-th, FPW at most); where they are fewer than the warps, groups of
 * warps take every pixel_groups-th step of 16 pixels and their sums are added in the
 * groups' order at the end: the same bits every run. */
template <int OB, bool BNORM, typename X>
__global__ void
__launch_bounds__(TDM_K_SMALL_THREADS, small_wgrad_blocks(OB, BNORM))
    conv_small_wgrad_kernel(float *partials, const uint16_t *dy, const X *x, SmallShape s,
                            int split_tiles, int pixel_groups, BnGather bn)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BM = TDM_K_SMALL_BM, KC = TDM_K_SMALL_KC;
  constexpr int FM = OB / 16, FPW = (KC / 8 + SC_WARPS - 1) / SC_WARPS, DS = OB + 8;
  static_assert(OB % 16 == 0, "channel tiles of 16");
  extern __shared__ __align__(128) unsigned char smem[];
  const TdmKSmallWgradLayout L =
      tdm_k_small_wgrad_layout(OB, s.kc, s.halo_h * s.halo_w * s.c, pixel_groups);
  uint16_t *dy_tile = (uint16_t *)(smem + L.dy);
  unsigned *words = (unsigned *)(smem + L.halo);
  int2 *ppair = (int2 *)(smem + L.rows);
  int *cols = (int *)(smem + L.cols);
  float *scale = (float *)(smem + L.bn);
  float *shift = scale + TDM_K_SMALL_MAX_C;
  float *groups = (float *)(smem + L.groups);

  const int split = blockIdx.x, k0 = blockIdx.y * KC, o0 = blockIdx.z * OB;
  const int width = min(KC, s.kpad - k0), frags = width / 8;
  const int t_begin = split * split_tiles, t_end = min(s.tiles, t_begin + split_tiles);
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    cols[i] = tdm_k_small_halo_col(k0 + i, s.kernel, s.c, s.halo_w);
  small_bn<BNORM>(scale, shift, s.c, bn);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int nw_count = SC_WARPS / pixel_groups, nw = warp % nw_count, pg = warp / nw_count;
  int tw_shift = 0;
  while ((1 << tw_shift) < s.tw)
    tw_shift++;
  const int tr = BM >> tw_shift;
  /* ldmatrix.trans's row for this lane: pixel ((lane / 16)·8 + lane % 8), channels
   * ((lane / 8) % 2)·8 on: matrices (pixels 0–7, channels 0–7), (0–7, 8–15), (8–15,
   * 0–7), (8–15, 8–15), transposed A's four registers (dyᵀ: channels × pixels). */
  const uint16_t *a_lane =
      dy_tile + (((lane >> 4) << 3) + (lane & 7)) * DS + ((lane >> 3) & 1) * 8;
  float acc[FM][FPW][4];
  for (int m = 0; m < FM; m++)
    for (int i = 0; i < FPW; i++)
      for (int q = 0; q < 4; q++)
        acc[m][i][q] = 0.0f;
  /* The table before this lane's columns are read from it. */
  __syncthreads();
  /* This lane's column of each of its fragments (B's n = g): its offset in the halo and
   * a mask, zero for a column past K. */
  int bcol[FPW];
  unsigned bmask[FPW];
  /* The fragments this warp holds: those of j = nw + nw_count · i < frags. */
  const int mine = nw < frags ? (frags - nw + nw_count - 1) / nw_count : 0;
  for (int i = 0; i < FPW; i++) {
    int j = nw + nw_count * i;
    int col = j < frags ? cols[j * 8 + g] : -1;
    bcol[i] = col >= 0 ? col : 0;
    bmask[i] = col >= 0 ? 0xffffffffu : 0u;
  }

  for (int tile = t_begin; tile < t_end; tile++) {
    int tx = tile % s.tiles_x, rest = tile / s.tiles_x;
    int ty = rest % s.tiles_y, img = rest / s.tiles_y;
    int oy0 = ty * tr, ox0 = tx * s.tw;
    small_halo_pixel_pairs<BNORM>(words, x, s, img, oy0 * s.stride - s.pad,
                                  ox0 * s.stride - s.pad, scale, shift, bn.relu);
    for (int idx = threadIdx.x; idx < BM * (OB / 8); idx += blockDim.x) {
      int r = idx / (OB / 8), q = idx % (OB / 8);
      int oy = oy0 + (r >> tw_shift), ox = ox0 + (r & (s.tw - 1));
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (oy < s.oh && ox < s.ow)
        v = __ldg((const uint4 *)(dy + (((size_t)img * s.oh + oy) * s.ow + ox) * s.out_c + o0 +
                                  q * 8));
      *(uint4 *)(dy_tile + r * DS + q * 8) = v;
    }
    /* Pixels 2u and 2u + 1 (one tile row: tw is even): the first one's window corner
     * and which halves of a pixel pair word are pixels inside the output (the second is
     * outside if the first is). */
    for (int u = threadIdx.x; u < BM / 2; u += blockDim.x) {
      int r = 2 * u;
      int oy = oy0 + (r >> tw_shift), ox = ox0 + (r & (s.tw - 1));
      bool first = oy < s.oh && ox < s.ow, second = first && ox + 1 < s.ow;
      ppair[u] = make_int2(first ? tdm_k_small_halo_row(r, s.tw, s.stride, s.c, s.halo_w) : 0,
                           (first ? 0xffff : 0) | (second ? 0xffff0000 : 0));
    }
    __syncthreads();
    for (int step = pg; step < BM / 16; step += pixel_groups) {
      const int p0 = step * 16;
      /* B's rows (pixels) 2t, 2t + 1 and 2t + 8, 2t + 9 of this step: a pixel pair each. */
      const int2 q0 = ppair[p0 / 2 + t], q8 = ppair[p0 / 2 + t + 4];
      unsigned b[FPW][2];
#pragma unroll
      for (int i = 0; i < FPW; i++)
        if (i < mine) {
          b[i][0] = words[q0.x + bcol[i]] & (unsigned)q0.y & bmask[i];
          b[i][1] = words[q8.x + bcol[i]] & (unsigned)q8.y & bmask[i];
        }
      /* A's fragments one 16-channel block at a time (4 registers, not 4 · FM: with B's
       * held first the block fits 80, three blocks a multiprocessor). Each sum acc[m][i]
       * still takes its MMAs in the steps' order. */
#pragma unroll
      for (int m = 0; m < FM; m++) {
        unsigned a[4];
        small_ldmatrix_x4_trans(a, a_lane + p0 * DS + m * 16);
#pragma unroll
        for (int i = 0; i < FPW; i++)
          if (i < mine)
            small_mma(acc[m][i], a, b[i][0], b[i][1]);
      }
    }
    /* Every warp is done with the tiles before the next one overwrites them. */
    __syncthreads();
  }
  /* D's rows are channels (m·16 + g, + 8), its columns the chunk's (j·8 + 2t, + 1). */
  float *out = partials + ((size_t)split * s.out_c + o0) * s.kpad + k0;
  if (pixel_groups == 1) {
    for (int i = 0; i < FPW; i++) {
      int j = nw + nw_count * i;
      if (j >= frags)
        break;
      for (int m = 0; m < FM; m++) {
        float *o = out + (size_t)(m * 16 + g) * s.kpad + j * 8 + 2 * t;
        *(float2 *)o = make_float2(acc[m][i][0], acc[m][i][1]);
        *(float2 *)(o + (size_t)8 * s.kpad) = make_float2(acc[m][i][2], acc[m][i][3]);
      }
    }
    return;
  }
  for (int i = 0; i < FPW; i++) {
    int j = nw + nw_count * i;
    if (j >= frags)
      break;
    for (int m = 0; m < FM; m++) {
      float *o = groups + ((size_t)pg * OB + m * 16 + g) * width + j * 8 + 2 * t;
      *(float2 *)o = make_float2(acc[m][i][0], acc[m][i][1]);
      *(float2 *)(o + 8 * width) = make_float2(acc[m][i][2], acc[m][i][3]);
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < OB * width; idx += blockDim.x) {
    int ch = idx / width, col = idx % width;
    float sum = groups[idx];
    for (int gr = 1; gr < pixel_groups; gr++)
      sum = __fadd_rn(sum, groups[(size_t)gr * OB * width + idx]);
    out[(size_t)ch * s.kpad + col] = sum;
  }
#endif
}

/* dw[o, k] = the sum of partials[split][o, k] over the splits, in a fixed order: 32
 * weights a block, eight groups of consecutive splits each summed in order by a warp,
 * then the groups' sums in order. */
__global__ void
__launch_bounds__(TDM_K_SMALL_THREADS)
    conv_small_wgrad_sum_kernel(float *dw, const float *partials, int splits, int out_c, int k,
                                int kpad)
{
  __shared__ float part[SC_WARPS][33];
  int lane = threadIdx.x % 32, group = threadIdx.x / 32;
  long long e = (long long)blockIdx.x * 32 + lane, total = (long long)out_c * k;
  float sum = 0.0f;
  if (e < total) {
    int o = (int)(e / k), kk = (int)(e % k);
    const float *p = partials + (size_t)o * kpad + kk;
    size_t stride = (size_t)out_c * kpad;
    int per = (splits + SC_WARPS - 1) / SC_WARPS;
    int first = group * per, last = min(splits, first + per);
    for (int sp = first; sp < last; sp++)
      sum = __fadd_rn(sum, p[(size_t)sp * stride]);
  }
  part[group][lane] = sum;
  __syncthreads();
  if (group == 0 && e < total) {
    float t = part[0][lane];
    for (int gr = 1; gr < SC_WARPS; gr++)
      t = __fadd_rn(t, part[gr][lane]);
    dw[e] = t;
  }
}

/* One wave of the forward's blocks: the device's multiprocessors times the blocks
 * each holds (the grid loops over the rest of the tiles; the results do not depend
 * on it). */
template <int BN, bool BNORM, typename X, typename Y>
static cudaError_t
small_forward_launch(Y *y, const X *x, const uint16_t *w, const SmallShape &s,
                     const TdmKSmallPlan &p, BnGather bn, cudaStream_t stream)
{
  void (*kernel)(Y *, const X *, const uint16_t *, SmallShape, BnGather) =
      conv_small_forward_kernel<BN, BNORM, X, Y>;
  cudaError_t err = small_allow_shared(kernel);
  int device = 0, sms = 0, per_sm = 0;
  if (err == cudaSuccess)
    err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess)
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, TDM_K_SMALL_THREADS,
                                                        p.fwd_smem);
  if (err != cudaSuccess)
    return err;
  unsigned channel_tiles = (unsigned)(s.out_c / BN);
  long long tiles = s.tiles;
  long long wave = ((long long)(sms > 0 ? sms : 1) * (per_sm > 0 ? per_sm : 1) +
                    channel_tiles - 1) / channel_tiles;
  unsigned blocks = (unsigned)(tiles < wave ? tiles : wave);
  kernel<<<dim3(blocks, channel_tiles), TDM_K_SMALL_THREADS, p.fwd_smem, stream>>>(y, x, w, s,
                                                                                  bn);
  return tdm_k_launched();
}

template <int BN, bool BNORM>
static cudaError_t
small_forward_types(void *y, bool y16, const void *x, bool x16, const uint16_t *w,
                    const SmallShape &s, const TdmKSmallPlan &p, BnGather bn,
                    cudaStream_t stream)
{
  if (x16 && y16)
    return small_forward_launch<BN, BNORM>((uint16_t *)y, (const uint16_t *)x, w, s, p, bn,
                                           stream);
  if (x16)
    return small_forward_launch<BN, BNORM>((float *)y, (const uint16_t *)x, w, s, p, bn, stream);
  if (y16)
    return small_forward_launch<BN, BNORM>((uint16_t *)y, (const float *)x, w, s, p, bn, stream);
  return small_forward_launch<BN, BNORM>((float *)y, (const float *)x, w, s, p, bn, stream);
}

template <bool BNORM>
static cudaError_t
small_forward_tile(void *y, bool y16, const void *x, bool x16, const uint16_t *w,
                   const SmallShape &s, const TdmKSmallPlan &p, BnGather bn, cudaStream_t stream)
{
  switch (p.bn) {
  case 64:
    return small_forward_types<64, BNORM>(y, y16, x, x16, w, s, p, bn, stream);
  case 32:
    return small_forward_types<32, BNORM>(y, y16, x, x16, w, s, p, bn, stream);
  case 16:
    return small_forward_types<16, BNORM>(y, y16, x, x16, w, s, p, bn, stream);
  }
  return cudaErrorInvalidValue;
}

extern "C" cudaError_t
tdm_k_conv_small_forward(void *y, bool y16, const void *x, bool x16, const float *bn_mean,
                         const float *bn_invstd, const float *bn_gamma, const float *bn_beta,
                         bool bn_relu, const uint16_t *w, int n, int h, int wd, int c, int out_c,
                         int kernel, int pad, int stride, cudaStream_t stream)
{
  TdmKSmallPlan p;
  SmallShape s;
  if (!small_shape(n, h, wd, c, out_c, kernel, pad, stride, &p, &s) || y == NULL || x == NULL ||
      w == NULL || !tdm_k_aligned16(y))
    return cudaErrorInvalidValue;
  BnGather bn = {bn_mean, bn_invstd, bn_gamma, bn_beta, bn_relu};
  if (bn_mean != NULL)
    return small_forward_tile<true>(y, y16, x, x16, w, s, p, bn, stream);
  return small_forward_tile<false>(y, y16, x, x16, w, s, p, bn, stream);
}

template <int OB, bool BNORM>
static cudaError_t
small_wgrad_launch(float *partials, const uint16_t *dy, const void *x, bool x16,
                   const SmallShape &s, const TdmKSmallPlan &p, BnGather bn, cudaStream_t stream)
{
  dim3 grid((unsigned)p.splits, (unsigned)p.kchunks, (unsigned)(s.out_c / OB));
  cudaError_t err;
  if (x16) {
    err = small_allow_shared(conv_small_wgrad_kernel<OB, BNORM, uint16_t>);
    if (err != cudaSuccess)
      return err;
    conv_small_wgrad_kernel<OB, BNORM, uint16_t><<<grid, TDM_K_SMALL_THREADS, p.wgrad_smem,
                                                   stream>>>(
        partials, dy, (const uint16_t *)x, s, p.split_tiles, p.pixel_groups, bn);
  } else {
    err = small_allow_shared(conv_small_wgrad_kernel<OB, BNORM, float>);
    if (err != cudaSuccess)
      return err;
    conv_small_wgrad_kernel<OB, BNORM, float><<<grid, TDM_K_SMALL_THREADS, p.wgrad_smem,
                                                stream>>>(partials, dy, (const float *)x, s,
                                                          p.split_tiles, p.pixel_groups, bn);
  }
  return tdm_k_launched();
}

template <bool BNORM>
static cudaError_t
small_wgrad_tile(float *partials, const uint16_t *dy, const void *x, bool x16,
                 const SmallShape &s, const TdmKSmallPlan &p, BnGather bn, cudaStream_t stream)
{
  switch (p.ob) {
  case 64:
    return small_wgrad_launch<64, BNORM>(partials, dy, x, x16, s, p, bn, stream);
  case 32:
    return small_wgrad_launch<32, BNORM>(partials, dy, x, x16, s, p, bn, stream);
  case 16:
    return small_wgrad_launch<16, BNORM>(partials, dy, x, x16, s, p, bn, stream);
  }
  return cudaErrorInvalidValue;
}

extern "C" cudaError_t
tdm_k_conv_small_wgrad(float *dw, float *partials, const uint16_t *dy, const void *x, bool x16,
                       const float *bn_mean, const float *bn_invstd, const float *bn_gamma,
                       const float *bn_beta, bool bn_relu, int n, int h, int wd, int c,
                       int out_c, int kernel, int pad, int stride, cudaStream_t stream)
{
  TdmKSmallPlan p;
  SmallShape s;
  if (!small_shape(n, h, wd, c, out_c, kernel, pad, stride, &p, &s) || dw == NULL ||
      x == NULL || !tdm_k_aligned16(dy) || ((uintptr_t)partials & 31u) != 0 || partials == NULL)
    return cudaErrorInvalidValue;
  BnGather bn = {bn_mean, bn_invstd, bn_gamma, bn_beta, bn_relu};
  cudaError_t err = bn_mean != NULL
                        ? small_wgrad_tile<true>(partials, dy, x, x16, s, p, bn, stream)
                        : small_wgrad_tile<false>(partials, dy, x, x16, s, p, bn, stream);
  if (err != cudaSuccess)
    return err;
  return tdm_k_conv_small_wgrad_sum(dw, partials, p.splits, out_c, p.k, p.kpad, stream);
}

extern "C" cudaError_t
tdm_k_conv_small_wgrad_sum(float *dw, const float *partials, int splits, int out_c, int k,
                           int kpad, cudaStream_t stream)
{
  if (dw == NULL || partials == NULL || splits < 1 || out_c < 1 || k < 1 || kpad < k)
    return cudaErrorInvalidValue;
  long long weights = (long long)out_c * k;
  conv_small_wgrad_sum_kernel<<<(unsigned)((weights + 31) / 32), TDM_K_SMALL_THREADS, 0,
                                stream>>>(dw, partials, splits, out_c, k, kpad);
  return tdm_k_launched();
}
