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
 *   the columns' offsets; written through shared memory in 16-byte stores as float32 or
 *   rounded once to bf16. Each output's sum has one order whatever the grid.
 * - Weight gradient: dw (out_c × K) = dyᵀ · columns. The output pixels are split into
 *   conv-small-plan.h's fixed number of ranges; a block sums its range (its channels and
 *   a chunk of up to 160 columns) in steps of 64 pixels into fragments held by its
 *   warps, writes them as one partial (float32, in the caller's scratch), and a second
 *   kernel sums the partials of each weight in a fixed order: the same inputs give the
 *   same bits, on any GPU of a kind.
 * Needs sm_80 or later (bf16 WMMA).
 */
#include "tdm-kernels.h"
#include "conv-small-plan.h"
#include "common.cuh"
#include "bn-value.cuh"

#include <cuda_bf16.h>
#include <mma.h>

#define SC_WARPS (TDM_K_SMALL_THREADS / 32)

/* The shape as the kernels read it. */
struct SmallShape {
  int h, w, c, out_c, kernel, pad, stride, oh, ow;
  int rows;      /* output pixels */
  int k, kpad;   /* reduction columns, and rounded up to 16 */
  /* The forward's tiles (conv-small-plan.h) */
  int tw, tiles_x, tiles_y, tiles, halo_h, halo_w;
};

/* Fills the column table for columns [k0, k0 + count) at tab[0..count): for each, its
 * (ky, kx, channel) packed as ky << 16 | kx << 8 | channel and its offset in the image
 * from the window's corner ((ky·w + kx)·c + channel); −1 past K (zero columns). */
__device__ __forceinline__ void
small_table(int *taps, int *offs, const SmallShape &s, int k0, int count)
{
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    int k = k0 + i;
    if (k < s.k) {
      int ch = k % s.c, tap = k / s.c;
      int kx = tap % s.kernel, ky = tap / s.kernel;
      taps[i] = ky << 16 | kx << 8 | ch;
      offs[i] = (ky * s.w + kx) * s.c + ch;
    } else {
      taps[i] = -1;
      offs[i] = 0;
    }
  }
}

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

/* Gathers rows [row0, row0 + count) of the columns, columns [k0, k0 + kc) (the table
 * holds those), into tile (row-major, leading dimension ld): a warp a row, its lanes
 * along the columns (two rows at once, 16 lanes each, where kc is 16: a 3×3 kernel of
 * one channel); zero outside the image, past K and past `rows`. count is a multiple of
 * 16. */
template <bool BN, typename X>
__device__ __forceinline__ void
small_gather(uint16_t *tile, int ld, const X *x, const SmallShape &s, int row0, int count,
             int rows, int kc, const int *taps, const int *offs, const float *scale,
             const float *shift, bool relu)
{
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int lanes = kc < 32 ? kc : 32, together = 32 / lanes;
  int first = lane % lanes;
  for (int r = warp * together + lane / lanes; r < count; r += SC_WARPS * together) {
    int m = row0 + r;
    uint16_t *out = tile + (size_t)r * ld;
    if (m >= rows) {
      for (int i = first; i < kc; i += lanes)
        out[i] = 0;
      continue;
    }
    int ox = m % s.ow, t = m / s.ow;
    int oy = t % s.oh, img = t / s.oh;
    int iy0 = oy * s.stride - s.pad, ix0 = ox * s.stride - s.pad;
    /* The window's corner in the image, which may lie in the padding (negative). */
    long long corner = (((long long)img * s.h + iy0) * s.w + ix0) * s.c;
    /* Unrolled so that a lane's loads are in flight together. */
#pragma unroll 4
    for (int i = first; i < kc; i += lanes) {
      int tap = taps[i];
      uint16_t v = 0;
      if (tap >= 0) {
        int iy = iy0 + (tap >> 16), ix = ix0 + ((tap >> 8) & 0xff);
        if ((unsigned)iy < (unsigned)s.h && (unsigned)ix < (unsigned)s.w)
          v = small_value<BN>(x, (size_t)(corner + offs[i]), tap & 0xff, scale, shift, relu);
      }
      out[i] = v;
    }
  }
}

/* Reads the input window of a forward tile (the halo: rows iy0 .. iy0 + halo_h,
 * columns ix0 .. ix0 + halo_w of image img, all channels) into halo as bf16 (row-major:
 * halo_w · c a row, the input's own order), zero outside the image: consecutive threads
 * read consecutive elements of an input row (halo_w · c of them are contiguous in x). */
template <bool BN, typename X>
__device__ __forceinline__ void
small_halo(uint16_t *halo, const X *x, const SmallShape &s, int img, int iy0, int ix0,
           const float *scale, const float *shift, bool relu)
{
  const int hwc = s.halo_w * s.c, count = s.halo_h * hwc, wc = s.w * s.c;
  const int xe0 = ix0 * s.c;
  const size_t plane = (size_t)img * s.h;
#pragma unroll 4
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    int hy = i / hwc, e = i - hy * hwc;
    int iy = iy0 + hy, xe = xe0 + e;
    uint16_t v = 0;
    if ((unsigned)iy < (unsigned)s.h && (unsigned)xe < (unsigned)wc)
      v = small_value<BN>(x, (plane + iy) * wc + xe, BN ? xe % s.c : 0, scale, shift, relu);
    halo[i] = v;
  }
}

/* Two bf16 in a register for an mma operand, the first in the low half. */
__device__ __forceinline__ unsigned
small_pair(uint16_t lo, uint16_t hi)
{
  return (unsigned)lo | (unsigned)hi << 16;
}

/* One element of A (a tile row's window corner in the halo, a column's offset; −1 past
 * K reads nothing: a zero). */
__device__ __forceinline__ uint16_t
small_a(const uint16_t *halo, int row, int col)
{
  return col >= 0 ? halo[row + col] : (uint16_t)0;
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
 * the output tile, the block's weights for the whole of K (kept for all its tiles), the
 * halo, the column table, the bn's scale and shift. Per tile: the halo is read (each
 * input value once, converted to bf16 once); the warps (4 × 2 over a 128 × 64 tile,
 * 32 × 32 each, or 8 × 1 over 128 × 32 or 128 × 16) build A's fragments straight from
 * the halo (row r, column k: halo[row(r) + col(k)], the row's offset computed once per
 * kernel, the column's from the table) and B's with ldmatrix from the weights, and run
 * m16n8k16 MMAs over K in order; the sums go through the output tile (float32, or bf16
 * rounded once) to 16-byte stores, a pixel's BN channels contiguous in y. Each output's
 * sum has one order whatever the grid. */
template <int BN, bool BNORM, typename X, typename Y>
__global__ void
__launch_bounds__(TDM_K_SMALL_THREADS)
    conv_small_forward_kernel(Y *y, const X *x, const uint16_t *wt, SmallShape s, BnGather bn)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BM = TDM_K_SMALL_BM;
  constexpr int WARPS_N = BN == 64 ? 2 : 1, WARPS_M = SC_WARPS / WARPS_N;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int FM = WM / 16, FN = WN / 8;
  constexpr int SS = BN + 8;              /* the output tile's row, in elements */
  constexpr int V = 16 / (int)sizeof(Y);  /* elements a 16-byte store */
  static_assert(FM >= 1 && FN % 2 == 0 && WM % 16 == 0, "warp tiles of 16 × 16");
  extern __shared__ __align__(128) unsigned char smem[];
  const TdmKSmallFwdLayout L =
      tdm_k_small_fwd_layout(BN, s.kpad, s.halo_h * s.halo_w * s.c);
  const int BS = s.kpad + 8;
  Y *stage = (Y *)(smem + L.stage);
  uint16_t *b_tile = (uint16_t *)(smem + L.weights);
  uint16_t *halo = (uint16_t *)(smem + L.halo);
  int *cols = (int *)(smem + L.cols);
  float *scale = (float *)(smem + L.bn);
  float *shift = scale + TDM_K_SMALL_MAX_C;

  const int n0 = blockIdx.y * BN;
  for (int i = threadIdx.x; i < s.kpad; i += blockDim.x)
    cols[i] = tdm_k_small_halo_col(i, s.kernel, s.c, s.halo_w);
  small_bn<BNORM>(scale, shift, s.c, bn);
  /* The weights as B (K × BN, column-major: a row of b_tile per output channel), zero
   * past K. */
  for (int i = threadIdx.x; i < BN * s.kpad; i += blockDim.x) {
    int o = i / s.kpad, k = i % s.kpad;
    b_tile[o * BS + k] = k < s.k ? wt[(size_t)(n0 + o) * s.k + k] : (uint16_t)0;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int g = lane >> 2, t = lane & 3;
  /* This lane's A rows (g and g + 8 of each of its 16-row fragments), as window corners
   * in the halo: the same for every tile. */
  int arow[FM][2];
  for (int i = 0; i < FM; i++)
    for (int h = 0; h < 2; h++)
      arow[i][h] =
          tdm_k_small_halo_row(wm * WM + i * 16 + g + 8 * h, s.tw, s.stride, s.c, s.halo_w);
  /* ldmatrix's row for this lane: channels wn·WN + 16p + (lane / 16)·8 + lane % 8, columns
   * k0 + ((lane / 8) % 2)·8: matrices (n 0–7, k 0–7), (n 0–7, k 8–15), (n 8–15, k 0–7),
   * (n 8–15, k 8–15), which are B's two registers for two 8-channel fragments. */
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
    small_halo<BNORM>(halo, x, s, img, oy0 * s.stride - s.pad, ox0 * s.stride - s.pad, scale,
                      shift, bn.relu);
    __syncthreads();
    float acc[FM][FN][4];
    for (int i = 0; i < FM; i++)
      for (int j = 0; j < FN; j++)
        for (int q = 0; q < 4; q++)
          acc[i][j][q] = 0.0f;
    for (int k0 = 0; k0 < s.kpad; k0 += 16) {
      const int c0 = cols[k0 + 2 * t], c1 = cols[k0 + 2 * t + 1];
      const int c8 = cols[k0 + 2 * t + 8], c9 = cols[k0 + 2 * t + 9];
      unsigned a[FM][4];
      for (int i = 0; i < FM; i++) {
        a[i][0] = small_pair(small_a(halo, arow[i][0], c0), small_a(halo, arow[i][0], c1));
        a[i][1] = small_pair(small_a(halo, arow[i][1], c0), small_a(halo, arow[i][1], c1));
        a[i][2] = small_pair(small_a(halo, arow[i][0], c8), small_a(halo, arow[i][0], c9));
        a[i][3] = small_pair(small_a(halo, arow[i][1], c8), small_a(halo, arow[i][1], c9));
      }
      unsigned b[FN][2];
      for (int p = 0; p < FN / 2; p++)
        small_ldmatrix_x4(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],
                          b_lane + p * 16 * BS + k0);
      for (int i = 0; i < FM; i++)
        for (int j = 0; j < FN; j++)
          small_mma(acc[i][j], a[i], b[j][0], b[j][1]);
    }
    for (int i = 0; i < FM; i++)
      for (int j = 0; j < FN; j++) {
        int r = wm * WM + i * 16 + g, col = wn * WN + j * 8 + 2 * t;
        small_stage(stage + r * SS + col, acc[i][j][0], acc[i][j][1]);
        small_stage(stage + (r + 8) * SS + col, acc[i][j][2], acc[i][j][3]);
      }
    __syncthreads();
    /* Out 16 bytes at a time: a pixel's BN channels are contiguous in y, a tile row's
     * pixels too where BN is all of out_c. */
    for (int idx = threadIdx.x; idx < BM * (BN / V); idx += blockDim.x) {
      int r = idx / (BN / V), q = idx % (BN / V);
      int oy = oy0 + (r >> tw_shift), ox = ox0 + (r & (s.tw - 1));
      if (oy < s.oh && ox < s.ow)
        *(uint4 *)(y + (((size_t)img * s.oh + oy) * s.ow + ox) * s.out_c + n0 + q * V) =
            *(const uint4 *)(stage + r * SS + q * V);
    }
  }
#endif
}

/* The weight gradient's partial sums: block (split, chunk, channel tile) sums output
 * pixels [split · split_rows, + split_rows) of dyᵀ (OB channels) times the columns
 * (chunk: up to TDM_K_SMALL_KC of them) in steps of TDM_K_SMALL_RS pixels, and writes
 * its OB × width sums to partials[split] (out_c × kpad, row-major). Warps: WO = OB / 16
 * over the channels, the rest over the columns' 16-wide fragments (a warp's are every
 * G-th, FPW at most). */
template <int OB, bool BNORM, typename X>
__global__ void
__launch_bounds__(TDM_K_SMALL_THREADS)
    conv_small_wgrad_kernel(float *partials, const uint16_t *dy, const X *x, SmallShape s,
                            int split_rows, BnGather bn)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  constexpr int RS = TDM_K_SMALL_RS, KC = TDM_K_SMALL_KC;
  constexpr int WO = OB / 16, G = SC_WARPS / WO, FPW = (KC / 16 + G - 1) / G;
  constexpr int DS = OB + 8, AS = KC + 8;
  static_assert(OB % 16 == 0 && SC_WARPS % WO == 0, "channel tiles of 16");
  __shared__ __align__(128) uint16_t dy_tile[RS * DS];
  __shared__ __align__(128) uint16_t a_tile[RS * AS];
  __shared__ int taps[KC], offs[KC];
  __shared__ float scale[TDM_K_SMALL_MAX_C], shift[TDM_K_SMALL_MAX_C];

  int split = blockIdx.x, k0 = blockIdx.y * KC, o0 = blockIdx.z * OB;
  int width = min(KC, s.kpad - k0), frags = width / 16;
  int r_begin = split * split_rows;
  int r_end = (int)min((long long)s.rows, (long long)r_begin + split_rows);
  small_table(taps, offs, s, k0, width);
  small_bn<BNORM>(scale, shift, s.c, bn);

  int warp = threadIdx.x / 32, of = warp % WO, g = warp / WO;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FPW];
  for (int i = 0; i < FPW; i++)
    wmma::fill_fragment(acc[i], 0.0f);
  const __nv_bfloat16 *d16 = (const __nv_bfloat16 *)dy_tile;
  const __nv_bfloat16 *a16 = (const __nv_bfloat16 *)a_tile;
  /* The table and the bn's scale before the first gather. */
  __syncthreads();
  for (int r0 = r_begin; r0 < r_end; r0 += RS) {
    int count = min(RS, r_end - r0);
    /* dy's rows (bf16, out_c a row), OB channels from o0: 16 bytes a copy, zero past
     * the split's end. */
    for (int idx = threadIdx.x; idx < RS * OB / 8; idx += blockDim.x) {
      int rr = idx / (OB / 8), sg = idx % (OB / 8);
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (rr < count)
        v = __ldg((const uint4 *)(dy + (size_t)(r0 + rr) * s.out_c + o0 + sg * 8));
      *(uint4 *)(dy_tile + rr * DS + sg * 8) = v;
    }
    small_gather<BNORM>(a_tile, AS, x, s, r0, RS, r_end, width, taps, offs, scale, shift,
                        bn.relu);
    __syncthreads();
    for (int kk = 0; kk < RS; kk += 16) {
      /* dyᵀ: channels × pixels, column-major in dy_tile (a pixel's channels contiguous). */
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> fa;
      wmma::load_matrix_sync(fa, d16 + kk * DS + of * 16, DS);
      for (int i = 0; i < FPW; i++) {
        int j = g + G * i;
        if (j < frags) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
          wmma::load_matrix_sync(fb, a16 + kk * AS + j * 16, AS);
          wmma::mma_sync(acc[i], fa, fb, acc[i]);
        }
      }
    }
    /* Every warp is done with both tiles before the next step overwrites them. */
    __syncthreads();
  }
  float *out = partials + ((size_t)split * s.out_c + o0 + of * 16) * s.kpad + k0;
  for (int i = 0; i < FPW; i++) {
    int j = g + G * i;
    if (j < frags)
      wmma::store_matrix_sync(out + j * 16, acc[i], s.kpad, wmma::mem_row_major);
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

static bool
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
  return true;
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
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)p.fwd_smem);
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
  if (x16)
    conv_small_wgrad_kernel<OB, BNORM, uint16_t><<<grid, TDM_K_SMALL_THREADS, 0, stream>>>(
        partials, dy, (const uint16_t *)x, s, p.split_rows, bn);
  else
    conv_small_wgrad_kernel<OB, BNORM, float><<<grid, TDM_K_SMALL_THREADS, 0, stream>>>(
        partials, dy, (const float *)x, s, p.split_rows, bn);
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
  long long weights = (long long)out_c * p.k;
  conv_small_wgrad_sum_kernel<<<(unsigned)((weights + 31) / 32), TDM_K_SMALL_THREADS, 0,
                                stream>>>(dw, partials, p.splits, out_c, p.k, p.kpad);
  return tdm_k_launched();
}
