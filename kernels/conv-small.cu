/* SPDX-License-Identifier: GPL-3.0-or-later */
/* conv-small.cu — the forward and the weight gradient of a convolution with few input
 * channels (a network's first layer: 1 to 8 channels, kernel up to 7×7, stride 1 or 2,
 * padding 0 to 3; conv-small-plan.h says which shapes and how they are tiled) as
 * implicit GEMMs on bfloat16 tensor cores (WMMA 16×16×16, float32 sums), without
 * columns in global memory.
 *
 * The reduction runs over K = kernel²·c columns in im2col's order (ky, kx, channel),
 * padded with zeros to a multiple of 16. Each block gathers its tile of columns straight
 * from the NHWC input (float32 or bf16; a bn before the conv applied as the value is
 * read, as im2col_bf16_bn computes it: the same bf16 bits) into shared memory, a warp
 * a row, its lanes along the row's columns: for one output pixel and one kernel row
 * the kernel's kx·c values are contiguous in x. A table of the columns' (ky, kx,
 * channel) and their offset in the image replaces divisions.
 * - Forward: rows are output pixels (tiles of 128), columns output channels (64, 32 or
 *   16 a block, their weights kept in shared memory for all the block's tiles);
 *   written as float32 or rounded once to bf16. Each output's sum has one order
 *   whatever the grid.
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

/* The forward: BN output channels a block (blockIdx.y), tiles of TDM_K_SMALL_BM output
 * pixels (blockIdx.x, then every gridDim.x-th). Shared memory (conv-small-plan.h's
 * tdm_k_small_fwd_smem): the gathered tile (kc columns a pass), reused by the float32
 * output tile; the block's weights for the whole of K; the table of K's columns; the
 * bn's scale and shift. Warps: 4 × 2 over a 128 × 64 tile (32 × 32 each), or 8 × 1
 * over 128 × 32 or 128 × 16. */
template <int BN, bool BNORM, typename X, typename Y>
__global__ void
__launch_bounds__(TDM_K_SMALL_THREADS)
    conv_small_forward_kernel(Y *y, const X *x, const uint16_t *wt, SmallShape s, int kc,
                              BnGather bn)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  constexpr int BM = TDM_K_SMALL_BM;
  constexpr int WARPS_N = BN == 64 ? 2 : 1, WARPS_M = SC_WARPS / WARPS_N;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int FM = WM / 16, FN = WN / 16;
  constexpr int CS = BN + 4;
  static_assert(FM >= 1 && FN >= 1 && WM % 16 == 0 && WN % 16 == 0, "warp tiles of 16");
  extern __shared__ __align__(128) unsigned char smem[];
  const int AS = kc + 8, BS = s.kpad + 8;
  size_t a_bytes = (size_t)BM * AS * 2, c_bytes = (size_t)BM * CS * 4;
  size_t region = tdm_k_small_up(a_bytes > c_bytes ? a_bytes : c_bytes, 128);
  uint16_t *a_tile = (uint16_t *)smem;
  float *c_tile = (float *)smem;
  uint16_t *b_tile = (uint16_t *)(smem + region);
  int *taps = (int *)(smem + region + tdm_k_small_up((size_t)BN * BS * 2, 128));
  int *offs = taps + s.kpad;
  float *scale = (float *)(offs + s.kpad);
  float *shift = scale + TDM_K_SMALL_MAX_C;

  int n0 = blockIdx.y * BN;
  small_table(taps, offs, s, 0, s.kpad);
  small_bn<BNORM>(scale, shift, s.c, bn);
  /* The weights as B (K × BN, column-major: a row of b_tile per output channel), zero
   * past K. */
  for (int i = threadIdx.x; i < BN * s.kpad; i += blockDim.x) {
    int o = i / s.kpad, k = i % s.kpad;
    b_tile[o * BS + k] = k < s.k ? wt[(size_t)(n0 + o) * s.k + k] : (uint16_t)0;
  }
  __syncthreads();

  int warp = threadIdx.x / 32, wm = warp / WARPS_N, wn = warp % WARPS_N;
  int tiles = (s.rows + BM - 1) / BM;
  const __nv_bfloat16 *a16 = (const __nv_bfloat16 *)a_tile;
  const __nv_bfloat16 *b16 = (const __nv_bfloat16 *)b_tile;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int m0 = tile * BM;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
    for (int i = 0; i < FM; i++)
      for (int j = 0; j < FN; j++)
        wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = 0; k0 < s.kpad; k0 += kc) {
      int width = min(kc, s.kpad - k0);
      small_gather<BNORM>(a_tile, AS, x, s, m0, BM, s.rows, width, taps + k0, offs + k0, scale,
                          shift, bn.relu);
      __syncthreads();
      for (int kk = 0; kk < width; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[FM];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[FN];
        for (int i = 0; i < FM; i++)
          wmma::load_matrix_sync(fa[i], a16 + (wm * WM + i * 16) * AS + kk, AS);
        for (int j = 0; j < FN; j++)
          wmma::load_matrix_sync(fb[j], b16 + (wn * WN + j * 16) * BS + k0 + kk, BS);
        for (int i = 0; i < FM; i++)
          for (int j = 0; j < FN; j++)
            wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
      /* Every warp is done with the tile before the next pass (or the output tile)
       * overwrites it. */
      __syncthreads();
    }
    for (int i = 0; i < FM; i++)
      for (int j = 0; j < FN; j++)
        wmma::store_matrix_sync(c_tile + (wm * WM + i * 16) * CS + wn * WN + j * 16, acc[i][j],
                                CS, wmma::mem_row_major);
    __syncthreads();
    /* Out four channels at a time (float32, or bf16 rounded once), a row's BN channels
     * contiguous in y. */
    for (int idx = threadIdx.x; idx < BM * BN / 4; idx += blockDim.x) {
      int r = idx / (BN / 4), q = idx % (BN / 4);
      int m = m0 + r;
      if (m < s.rows)
        tdm_k_vec<4>::store(y + (size_t)m * s.out_c + n0 + q * 4, c_tile + r * CS + q * 4);
    }
    __syncthreads();
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
  void (*kernel)(Y *, const X *, const uint16_t *, SmallShape, int, BnGather) =
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
  long long tiles = (s.rows + TDM_K_SMALL_BM - 1) / TDM_K_SMALL_BM;
  long long wave = ((long long)(sms > 0 ? sms : 1) * (per_sm > 0 ? per_sm : 1) +
                    channel_tiles - 1) / channel_tiles;
  unsigned blocks = (unsigned)(tiles < wave ? tiles : wave);
  kernel<<<dim3(blocks, channel_tiles), TDM_K_SMALL_THREADS, p.fwd_smem, stream>>>(y, x, w, s,
                                                                                  p.kc, bn);
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
