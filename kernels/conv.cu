/* conv.cu — the data movement around convolution and pooling: im2col, col2im, and
 * max pooling forward and backward, all on NHWC activations.
 *
 * The convolution's arithmetic is a cuBLAS GEMM in the backend; these kernels only
 * rearrange. col2im and the pooling gradient are gathers (each output element sums
 * what lands on it), never scatters with atomics, so results are deterministic.
 */
#include "tdm-kernels.h"
#include "common.cuh"

/* col[row, (ch, ky, kx)] with row = (img, oy, ox): one thread per col entry, so the
 * writes are coalesced; padding reads as zero. */
__global__ void
im2col_kernel(float *col, const float *x, size_t total, int h, int w, int c, int kh,
              int kw, int pad, int oh, int ow)
{
  int kcols = c * kh * kw;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += stride) {
    size_t row = e / (size_t)kcols;
    int k = (int)(e - row * (size_t)kcols);
    int kx = k % kw;
    int ky = (k / kw) % kh;
    int ch = k / (kw * kh);
    int ox = (int)(row % (size_t)ow);
    int oy = (int)((row / (size_t)ow) % (size_t)oh);
    size_t img = row / ((size_t)ow * oh);
    int iy = oy + ky - pad;
    int ix = ox + kx - pad;
    float v = 0.0f;
    if (iy >= 0 && iy < h && ix >= 0 && ix < w)
      v = x[((img * h + iy) * w + ix) * c + ch];
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
  size_t total = (size_t)n * oh * ow * c * kh * kw;
  im2col_kernel<<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      col, x, total, h, w, c, kh, kw, pad, oh, ow);
  return tdm_k_launched();
}

/* dx[img, iy, ix, ch] = Σ over (ky, kx) of col[(img, iy − ky + pad, ix − kx + pad),
 * (ch, ky, kx)] for the output pixels that exist. One thread per dx element. */
__global__ void
col2im_kernel(float *dx, const float *col, size_t total, int h, int w, int c, int kh,
              int kw, int pad, int oh, int ow)
{
  int kcols = c * kh * kw;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += stride) {
    int ch = (int)(e % (size_t)c);
    int ix = (int)((e / (size_t)c) % (size_t)w);
    int iy = (int)((e / ((size_t)c * w)) % (size_t)h);
    size_t img = e / ((size_t)c * w * h);
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
  col2im_kernel<<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      dx, col, total, h, w, c, kh, kw, pad, oh, ow);
  return tdm_k_launched();
}

/* One thread per output (img, oy, ox, ch), ch fastest so that reads are coalesced.
 * Scans the window row by row and keeps the first maximum (strict >), as the CPU
 * reference does. */
__global__ void
maxpool_forward_kernel(float *y, int32_t *argmax, const float *x, size_t total, int h,
                       int w, int c, int k, int ph, int pw)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += stride) {
    int ch = (int)(e % (size_t)c);
    int ox = (int)((e / (size_t)c) % (size_t)pw);
    int oy = (int)((e / ((size_t)c * pw)) % (size_t)ph);
    size_t img = e / ((size_t)c * pw * ph);
    size_t first = ((img * h + (size_t)oy * k) * w + (size_t)ox * k) * c + ch;
    float best = x[first];
    size_t best_at = first;
    for (int ky = 0; ky < k; ky++) {
      for (int kx = 0; kx < k; kx++) {
        size_t at = ((img * h + (size_t)oy * k + ky) * w + (size_t)ox * k + kx) * c + ch;
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
  maxpool_forward_kernel<<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      y, argmax, x, total, h, w, c, k, ph, pw);
  return tdm_k_launched();
}

/* Windows do not overlap (stride = k), so each input pixel has at most one window:
 * it receives that window's gradient if it was the chosen one, else zero. Pixels
 * past the last whole window (h or w not a multiple of k) get zero. */
__global__ void
maxpool_backward_kernel(float *dx, const float *dy, const int32_t *argmax, size_t total,
                        int h, int w, int c, int k, int ph, int pw)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += stride) {
    int ch = (int)(e % (size_t)c);
    int ix = (int)((e / (size_t)c) % (size_t)w);
    int iy = (int)((e / ((size_t)c * w)) % (size_t)h);
    size_t img = e / ((size_t)c * w * h);
    int oy = iy / k, ox = ix / k;
    float g = 0.0f;
    if (oy < ph && ox < pw) {
      size_t out = ((img * ph + oy) * pw + ox) * c + ch;
      if ((size_t)argmax[out] == e)
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
  maxpool_backward_kernel<<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      dx, dy, argmax, total, h, w, c, k, h / k, w / k);
  return tdm_k_launched();
}
