/* conv.cu — the data movement around convolution and pooling: im2col, col2im, and
 * max pooling forward and backward, all on NHWC activations.
 *
 * The convolution's arithmetic is a cuBLAS GEMM in the backend; these kernels only
 * rearrange. col2im and the pooling gradient are gathers (each output element sums
 * what lands on it), never scatters with atomics, so results are deterministic.
 */
#include "tdm-kernels.h"
#include "common.cuh"

/* Index arithmetic dominates these kernels (they move few bytes per division), so
 * each comes in two widths: 32-bit indices whenever the tensor allows, which is
 * nearly always, and 64-bit ones for the rest. */
template <typename I>
__device__ __forceinline__ I
grid_start()
{
  return (I)blockIdx.x * blockDim.x + threadIdx.x;
}

template <typename I>
__device__ __forceinline__ I
grid_stride()
{
  return (I)gridDim.x * blockDim.x;
}

/* im2col, the common case: rows (img, oy, ox) on threadIdx.y and blocks, columns on
 * threadIdx.x, so writes are coalesced. The (channel, ky, kx) of each column comes
 * from a table in shared memory built once per block instead of three divisions
 * per element. Needs kcols <= TDM_IM2COL_TABLE, kh, kw < 256, c < 32768. */
#define TDM_IM2COL_TABLE 8192
__global__ void
im2col_table_kernel(float *col, const float *x, int rows, int h, int w, int c, int kh,
                    int kw, int pad, int oh, int ow)
{
  extern __shared__ int taps[];
  int kcols = c * kh * kw;
  int tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (int k = tid; k < kcols; k += blockDim.x * blockDim.y) {
    int kx = k % kw, ky = (k / kw) % kh, ch = k / (kw * kh);
    taps[k] = (ch << 16) | (ky << 8) | kx;
  }
  __syncthreads();
  for (int row = blockIdx.x * blockDim.y + threadIdx.y; row < rows;
       row += gridDim.x * blockDim.y) {
    int ox = row % ow;
    int t = row / ow;
    int oy = t % oh;
    int img = t / oh;
    const float *xi = x + (size_t)img * h * w * c;
    float *out = col + (size_t)row * kcols;
    for (int k = threadIdx.x; k < kcols; k += blockDim.x) {
      int tap = taps[k];
      int iy = oy + ((tap >> 8) & 0xff) - pad;
      int ix = ox + (tap & 0xff) - pad;
      float v = 0.0f;
      if ((unsigned)iy < (unsigned)h && (unsigned)ix < (unsigned)w)
        v = xi[(size_t)(iy * w + ix) * c + (tap >> 16)];
      out[k] = v;
    }
  }
}

/* im2col for any shape: one thread per col entry. */
template <typename I>
__global__ void
im2col_kernel(float *col, const float *x, I total, int h, int w, int c, int kh, int kw,
              int pad, int oh, int ow)
{
  I kcols = (I)c * kh * kw;
  for (I e = grid_start<I>(); e < total; e += grid_stride<I>()) {
    I row = e / kcols;
    int k = (int)(e - row * kcols);
    int kx = k % kw;
    int ky = (k / kw) % kh;
    int ch = k / (kw * kh);
    int ox = (int)(row % (I)ow);
    int oy = (int)((row / (I)ow) % (I)oh);
    I img = row / ((I)ow * oh);
    int iy = oy + ky - pad;
    int ix = ox + kx - pad;
    float v = 0.0f;
    if (iy >= 0 && iy < h && ix >= 0 && ix < w)
      v = x[(((size_t)img * h + iy) * w + ix) * c + ch];
    col[e] = v;
  }
}

extern "C" cudaError_t
tdm_k_im2col(float *col, const float *x, int n, int h, int w, int c, int kh, int kw, int pad,
             cudaStream_t stream)
{
  int oh = h + 2 * pad - kh + 1;
  int ow = w + 2 * pad - kw + 1;
  if (n <= 0 || oh <= 0 || ow <= 0 || c <= 0 || kh <= 0 || kw <= 0)
    return cudaSuccess;
  size_t rows = (size_t)n * oh * ow;
  size_t kcols = (size_t)c * kh * kw;
  size_t total = rows * kcols;
  if (kcols <= TDM_IM2COL_TABLE && kh < 256 && kw < 256 && c < 32768 && rows <= INT32_MAX &&
      (size_t)h * w * c <= INT32_MAX) {
    /* As many columns per warp as there are, up to 32; the rest of the block's
     * 256 threads take rows. */
    unsigned bx = kcols >= 32 ? 32 : kcols >= 16 ? 16 : 8;
    dim3 block(bx, TDM_K_THREADS / bx);
    size_t blocks = (rows + block.y - 1) / block.y;
    if (blocks > 4096)
      blocks = 4096;
    im2col_table_kernel<<<(unsigned)blocks, block, kcols * sizeof(int), stream>>>(
        col, x, (int)rows, h, w, c, kh, kw, pad, oh, ow);
  } else if (total <= UINT32_MAX) {
    im2col_kernel<uint32_t><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
        col, x, (uint32_t)total, h, w, c, kh, kw, pad, oh, ow);
  } else {
    im2col_kernel<size_t><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
        col, x, total, h, w, c, kh, kw, pad, oh, ow);
  }
  return tdm_k_launched();
}

/* dx[img, iy, ix, ch] = Σ over (ky, kx) of col[(img, iy − ky + pad, ix − kx + pad),
 * (ch, ky, kx)] for the output pixels that exist. One thread per dx element. */
template <typename I>
__global__ void
col2im_kernel(float *dx, const float *col, I total, int h, int w, int c, int kh, int kw,
              int pad, int oh, int ow)
{
  int kcols = c * kh * kw;
  for (I e = grid_start<I>(); e < total; e += grid_stride<I>()) {
    int ch = (int)(e % (I)c);
    I pixel = e / (I)c;
    int ix = (int)(pixel % (I)w);
    I line = pixel / (I)w;
    int iy = (int)(line % (I)h);
    size_t img = (size_t)(line / (I)h);
    float s = 0.0f;
    for (int ky = 0; ky < kh; ky++) {
      int oy = iy - ky + pad;
      if (oy < 0 || oy >= oh)
        continue;
      for (int kx = 0; kx < kw; kx++) {
        int ox = ix - kx + pad;
        if (ox < 0 || ox >= ow)
          continue;
        size_t row = (img * oh + oy) * ow + ox;
        s += col[row * kcols + (ch * kh + ky) * kw + kx];
      }
    }
    dx[e] = s;
  }
}

extern "C" cudaError_t
tdm_k_col2im(float *dx, const float *col, int n, int h, int w, int c, int kh, int kw, int pad,
             cudaStream_t stream)
{
  int oh = h + 2 * pad - kh + 1;
  int ow = w + 2 * pad - kw + 1;
  size_t total = (size_t)(n > 0 ? n : 0) * (h > 0 ? h : 0) * (w > 0 ? w : 0) * (c > 0 ? c : 0);
  if (total == 0)
    return cudaSuccess;
  if (oh <= 0 || ow <= 0 || kh <= 0 || kw <= 0)
    return cudaMemsetAsync(dx, 0, total * sizeof(float), stream);
  if (total <= UINT32_MAX)
    col2im_kernel<uint32_t><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
        dx, col, (uint32_t)total, h, w, c, kh, kw, pad, oh, ow);
  else
    col2im_kernel<size_t><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
        dx, col, total, h, w, c, kh, kw, pad, oh, ow);
  return tdm_k_launched();
}

/* One thread per output (img, oy, ox, ch), ch fastest so that reads are coalesced.
 * Scans the window row by row and keeps the first maximum (strict >), as the CPU
 * reference does. */
template <typename I>
__global__ void
maxpool_forward_kernel(float *y, int32_t *argmax, const float *x, I total, int h, int w,
                       int c, int k, int ph, int pw)
{
  for (I e = grid_start<I>(); e < total; e += grid_stride<I>()) {
    int ch = (int)(e % (I)c);
    I pixel = e / (I)c;
    int ox = (int)(pixel % (I)pw);
    I line = pixel / (I)pw;
    int oy = (int)(line % (I)ph);
    I img = line / (I)ph;
    I first = ((img * h + (I)oy * k) * w + (I)ox * k) * c + ch;
    float best = x[first];
    I best_at = first;
    for (int ky = 0; ky < k; ky++) {
      for (int kx = 0; kx < k; kx++) {
        I at = first + ((I)ky * w + kx) * c;
        float v = x[at];
        if (v > best) {
          best = v;
          best_at = at;
        }
      }
    }
    y[e] = best;
    argmax[e] = (int32_t)best_at;
  }
}

extern "C" cudaError_t
tdm_k_maxpool_forward(float *y, int32_t *argmax, const float *x, int n, int h, int w, int c,
                      int k, cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  int ph = h / k, pw = w / k;
  if (n <= 0 || ph <= 0 || pw <= 0 || c <= 0)
    return cudaSuccess;
  size_t total = (size_t)n * ph * pw * c;
  /* argmax is int32, so x has at most 2³¹ elements (the backend checks). */
  maxpool_forward_kernel<uint32_t>
      <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
          y, argmax, x, (uint32_t)total, h, w, c, k, ph, pw);
  return tdm_k_launched();
}

/* Windows do not overlap (stride = k), so each input pixel has at most one window:
 * it receives that window's gradient if it was the chosen one, else zero. Pixels
 * past the last whole window (h or w not a multiple of k) get zero. */
template <typename I>
__global__ void
maxpool_backward_kernel(float *dx, const float *dy, const int32_t *argmax, I total, int h,
                        int w, int c, int k, int ph, int pw)
{
  for (I e = grid_start<I>(); e < total; e += grid_stride<I>()) {
    int ch = (int)(e % (I)c);
    I pixel = e / (I)c;
    int ix = (int)(pixel % (I)w);
    I line = pixel / (I)w;
    int iy = (int)(line % (I)h);
    I img = line / (I)h;
    int oy = iy / k, ox = ix / k;
    float g = 0.0f;
    if (oy < ph && ox < pw) {
      I out = ((img * ph + oy) * pw + ox) * c + ch;
      if ((I)argmax[out] == e)
        g = dy[out];
    }
    dx[e] = g;
  }
}

extern "C" cudaError_t
tdm_k_maxpool_backward(float *dx, const float *dy, const int32_t *argmax, int n, int h,
                       int w, int c, int k, cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  size_t total = (size_t)(n > 0 ? n : 0) * (h > 0 ? h : 0) * (w > 0 ? w : 0) * (c > 0 ? c : 0);
  if (total == 0)
    return cudaSuccess;
  if (total <= UINT32_MAX)
    maxpool_backward_kernel<uint32_t>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx, dy, argmax, (uint32_t)total, h, w, c, k, h / k, w / k);
  else
    maxpool_backward_kernel<size_t>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx, dy, argmax, total, h, w, c, k, h / k, w / k);
  return tdm_k_launched();
}
