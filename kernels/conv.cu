/* conv.cu — the data movement around convolution and pooling: im2col, col2im, and
 * max pooling forward and backward, all on NHWC activations.
 *
 * The convolution's arithmetic is a cuBLAS GEMM in the backend; these kernels only
 * rearrange. Columns are ordered (ky, kx, channel), so every tap is a run of c
 * contiguous floats in x and in col: with c % 4 == 0 each thread moves float4s and a
 * warp's accesses are whole lines. col2im and the pooling gradient are gathers (each
 * output element sums what lands on it), never scatters with atomics, so results are
 * deterministic.
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

/* V consecutive floats (V = 4: one 16-byte access; the caller checks alignment). */
template <int V>
__device__ __forceinline__ void
load_v(float *v, const float *p)
{
  if (V == 4) {
    float4 t = *(const float4 *)p;
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
    for (int j = 0; j < V; j++)
      v[j] = p[j];
  }
}

template <int V>
__device__ __forceinline__ void
store_v(float *p, const float *v)
{
  if (V == 4)
    *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
  else
    for (int j = 0; j < V; j++)
      p[j] = v[j];
}

template <int V>
__device__ __forceinline__ void
load_iv(int32_t *v, const int32_t *p)
{
  if (V == 4) {
    int4 t = *(const int4 *)p;
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
    for (int j = 0; j < V; j++)
      v[j] = p[j];
  }
}

template <int V>
__device__ __forceinline__ void
store_iv(int32_t *p, const int32_t *v)
{
  if (V == 4)
    *(int4 *)p = make_int4(v[0], v[1], v[2], v[3]);
  else
    for (int j = 0; j < V; j++)
      p[j] = v[j];
}

/* As the CPU reference writes it: NaN passes through. */
__device__ __forceinline__ float
relu(float v)
{
  return v < 0.0f ? 0.0f : v;
}

/* im2col, the common case: rows (img, oy, ox) on threadIdx.y and blocks, a row's
 * vectors of V floats on threadIdx.x. Each vector's (ky, kx, channel) comes from a
 * table in shared memory built once per block instead of three divisions per
 * vector. Needs kcols / V <= TDM_IM2COL_TABLE, kh, kw < 256, c / V < 65536. */
#define TDM_IM2COL_TABLE 8192
template <int V>
__global__ void
im2col_table_kernel(float *col, const float *x, int rows, int h, int w, int c, int kh,
                    int kw, int pad, int oh, int ow)
{
  extern __shared__ int taps[];
  int cv = c / V;
  int kvecs = kh * kw * cv;
  int tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (int k = tid; k < kvecs; k += blockDim.x * blockDim.y) {
    int tap = k / cv;
    taps[k] = ((tap / kw) << 24) | ((tap % kw) << 16) | (k % cv);
  }
  __syncthreads();
  for (int row = blockIdx.x * blockDim.y + threadIdx.y; row < rows;
       row += gridDim.x * blockDim.y) {
    int ox = row % ow;
    int t = row / ow;
    int oy = t % oh;
    int img = t / oh;
    const float *xi = x + (size_t)img * h * w * c;
    float *out = col + (size_t)row * kvecs * V;
    for (int k = threadIdx.x; k < kvecs; k += blockDim.x) {
      int tap = taps[k];
      int iy = oy + (tap >> 24) - pad;
      int ix = ox + ((tap >> 16) & 0xff) - pad;
      float v[V];
      if ((unsigned)iy < (unsigned)h && (unsigned)ix < (unsigned)w)
        load_v<V>(v, xi + (iy * w + ix) * c + (tap & 0xffff) * V);
      else
        for (int j = 0; j < V; j++)
          v[j] = 0.0f;
      store_v<V>(out + k * V, v);
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
    int ch = k % c;
    int tap = k / c;
    int kx = tap % kw;
    int ky = tap / kw;
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

/* Threads per row for the table kernel: the whole row when it has at most 32
 * vectors, else a divisor of its length between 16 and 32 (no idle lanes on the
 * last pass), else 32. */
static unsigned
im2col_lanes(int kvecs)
{
  if (kvecs <= 32)
    return (unsigned)kvecs;
  for (int d = 32; d >= 16; d--)
    if (kvecs % d == 0)
      return (unsigned)d;
  return 32;
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
  bool vec = c % 4 == 0 && tdm_k_aligned16(col) && tdm_k_aligned16(x);
  int v = vec ? 4 : 1;
  size_t kvecs = kcols / v;
  if (kvecs <= TDM_IM2COL_TABLE && kh < 256 && kw < 256 && c / v < 65536 &&
      rows <= INT32_MAX && (size_t)h * w * c <= INT32_MAX) {
    unsigned bx = im2col_lanes((int)kvecs);
    dim3 block(bx, TDM_K_THREADS / bx);
    size_t blocks = (rows + block.y - 1) / block.y;
    if (blocks > 8192)
      blocks = 8192;
    size_t shared = kvecs * sizeof(int);
    if (vec)
      im2col_table_kernel<4><<<(unsigned)blocks, block, shared, stream>>>(
          col, x, (int)rows, h, w, c, kh, kw, pad, oh, ow);
    else
      im2col_table_kernel<1><<<(unsigned)blocks, block, shared, stream>>>(
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
 * (ky, kx, ch)] for the output pixels that exist, taps in the CPU's order. One
 * thread per V channels of a dx pixel: the warp's reads of one tap are runs of c
 * contiguous floats. */
template <typename I, int V>
__global__ void
col2im_kernel(float *dx, const float *col, I total, int h, int w, int c, int kh, int kw,
              int pad, int oh, int ow)
{
  int cv = c / V;
  size_t kcols = (size_t)c * kh * kw;
  for (I e = grid_start<I>(); e < total; e += grid_stride<I>()) {
    int q = (int)(e % (I)cv);
    I pixel = e / (I)cv;
    int ix = (int)(pixel % (I)w);
    I line = pixel / (I)w;
    int iy = (int)(line % (I)h);
    size_t img = (size_t)(line / (I)h);
    float s[V];
    for (int j = 0; j < V; j++)
      s[j] = 0.0f;
    for (int ky = 0; ky < kh; ky++) {
      int oy = iy - ky + pad;
      if (oy < 0 || oy >= oh)
        continue;
      for (int kx = 0; kx < kw; kx++) {
        int ox = ix - kx + pad;
        if (ox < 0 || ox >= ow)
          continue;
        size_t row = (img * oh + oy) * ow + ox;
        float v[V];
        load_v<V>(v, col + row * kcols + (size_t)(ky * kw + kx) * c + (size_t)q * V);
        for (int j = 0; j < V; j++)
          s[j] += v[j];
      }
    }
    store_v<V>(dx + (size_t)e * V, s);
  }
}

template <int V>
static void
launch_col2im(float *dx, const float *col, size_t total, int h, int w, int c, int kh, int kw,
              int pad, int oh, int ow, cudaStream_t stream)
{
  if (total <= UINT32_MAX)
    col2im_kernel<uint32_t, V><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                 stream>>>(dx, col, (uint32_t)total, h, w, c, kh, kw, pad,
                                           oh, ow);
  else
    col2im_kernel<size_t, V><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                               stream>>>(dx, col, total, h, w, c, kh, kw, pad, oh, ow);
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
  if (c % 4 == 0 && tdm_k_aligned16(dx) && tdm_k_aligned16(col))
    launch_col2im<4>(dx, col, total / 4, h, w, c, kh, kw, pad, oh, ow, stream);
  else
    launch_col2im<1>(dx, col, total, h, w, c, kh, kw, pad, oh, ow, stream);
  return tdm_k_launched();
}

/* One thread per V channels of an output pixel, channels fastest so that reads are
 * coalesced. Scans the window row by row and keeps the first maximum (strict >), as
 * the CPU reference does; then adds the bias and applies the ReLU when asked (a conv
 * layer's, folded into the pool: both are monotonic, so the same y on a quarter of
 * the elements). Indices are int32: x has at most 2³¹ elements (the backend checks). */
template <int V>
__global__ void
maxpool_forward_kernel(float *y, int32_t *argmax, const float *x, const float *bias,
                       bool use_relu, uint32_t total, int h, int w, int c, int k, int ph,
                       int pw)
{
  int cv = c / V;
  for (uint32_t e = grid_start<uint32_t>(); e < total; e += grid_stride<uint32_t>()) {
    int q = (int)(e % (uint32_t)cv);
    uint32_t pixel = e / (uint32_t)cv;
    int ox = (int)(pixel % (uint32_t)pw);
    uint32_t line = pixel / (uint32_t)pw;
    int oy = (int)(line % (uint32_t)ph);
    int img = (int)(line / (uint32_t)ph);
    int32_t first = ((img * h + oy * k) * w + ox * k) * c + q * V;
    float best[V];
    int32_t at[V];
    load_v<V>(best, x + first);
    for (int j = 0; j < V; j++)
      at[j] = first + j;
    for (int ky = 0; ky < k; ky++) {
      for (int kx = 0; kx < k; kx++) {
        if (ky == 0 && kx == 0)
          continue;
        int32_t base = first + (ky * w + kx) * c;
        float v[V];
        load_v<V>(v, x + base);
        for (int j = 0; j < V; j++) {
          if (v[j] > best[j]) {
            best[j] = v[j];
            at[j] = base + j;
          }
        }
      }
    }
    if (bias != NULL) {
      float b[V];
      load_v<V>(b, bias + q * V);
      for (int j = 0; j < V; j++)
        best[j] = use_relu ? relu(best[j] + b[j]) : best[j] + b[j];
    }
    store_v<V>(y + (size_t)e * V, best);
    store_iv<V>(argmax + (size_t)e * V, at);
  }
}

extern "C" cudaError_t
tdm_k_maxpool_forward(float *y, int32_t *argmax, const float *x, const float *bias, bool relu,
                      int n, int h, int w, int c, int k, cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  int ph = h / k, pw = w / k;
  if (n <= 0 || ph <= 0 || pw <= 0 || c <= 0)
    return cudaSuccess;
  size_t total = (size_t)n * ph * pw * c;
  bool vec = c % 4 == 0 && tdm_k_aligned16(y) && tdm_k_aligned16(argmax) &&
             tdm_k_aligned16(x) && tdm_k_aligned16(bias);
  if (vec)
    maxpool_forward_kernel<4><<<tdm_k_blocks(total / 4, TDM_K_THREADS), TDM_K_THREADS, 0,
                                stream>>>(y, argmax, x, bias, relu, (uint32_t)(total / 4), h,
                                          w, c, k, ph, pw);
  else
    maxpool_forward_kernel<1><<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0,
                                stream>>>(y, argmax, x, bias, relu, (uint32_t)total, h, w, c,
                                          k, ph, pw);
  return tdm_k_launched();
}

/* Windows do not overlap (stride = k), so each input pixel has at most one window:
 * it receives that window's gradient if it was the chosen one and the pool's output
 * y is positive (when y is given: the ReLU folded in), else zero. Pixels past the
 * last whole window (h or w not a multiple of k) get zero. One thread per dx
 * element: any shape. */
template <typename I>
__global__ void
maxpool_backward_kernel(float *dx, const float *dy, const int32_t *argmax, const float *y,
                        I total, int h, int w, int c, int k, int ph, int pw)
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
      if ((I)argmax[out] == e && (y == NULL || y[out] > 0.0f))
        g = dy[out];
    }
    dx[e] = g;
  }
}

/* The same when the windows tile x exactly and c % 4 == 0: one thread per four
 * channels of an output pixel writes its whole window, so dy, argmax and y are read
 * once and every store is a float4. */
__global__ void
maxpool_backward_window_kernel(float *dx, const float *dy, const int32_t *argmax,
                               const float *y, uint32_t total, int h, int w, int c, int k,
                               int ph, int pw)
{
  int cv = c / 4;
  for (uint32_t e = grid_start<uint32_t>(); e < total; e += grid_stride<uint32_t>()) {
    int q = (int)(e % (uint32_t)cv);
    uint32_t pixel = e / (uint32_t)cv;
    int ox = (int)(pixel % (uint32_t)pw);
    uint32_t line = pixel / (uint32_t)pw;
    int oy = (int)(line % (uint32_t)ph);
    int img = (int)(line / (uint32_t)ph);
    int32_t first = ((img * h + oy * k) * w + ox * k) * c + q * 4;
    float g[4];
    int32_t at[4];
    load_v<4>(g, dy + (size_t)e * 4);
    load_iv<4>(at, argmax + (size_t)e * 4);
    if (y != NULL) {
      float pooled[4];
      load_v<4>(pooled, y + (size_t)e * 4);
      for (int j = 0; j < 4; j++)
        g[j] = pooled[j] > 0.0f ? g[j] : 0.0f;
    }
    for (int ky = 0; ky < k; ky++) {
      for (int kx = 0; kx < k; kx++) {
        int32_t base = first + (ky * w + kx) * c;
        float out[4];
        for (int j = 0; j < 4; j++)
          out[j] = at[j] == base + j ? g[j] : 0.0f;
        store_v<4>(dx + base, out);
      }
    }
  }
}

extern "C" cudaError_t
tdm_k_maxpool_backward(float *dx, const float *dy, const int32_t *argmax, const float *y,
                       int n, int h, int w, int c, int k, cudaStream_t stream)
{
  if (k <= 0)
    return cudaErrorInvalidValue;
  size_t total = (size_t)(n > 0 ? n : 0) * (h > 0 ? h : 0) * (w > 0 ? w : 0) * (c > 0 ? c : 0);
  if (total == 0)
    return cudaSuccess;
  int ph = h / k, pw = w / k;
  if (h % k == 0 && w % k == 0 && c % 4 == 0 && total <= INT32_MAX && tdm_k_aligned16(dx) &&
      tdm_k_aligned16(dy) && tdm_k_aligned16(argmax) && tdm_k_aligned16(y)) {
    size_t outputs = (size_t)n * ph * pw * (c / 4);
    maxpool_backward_window_kernel<<<tdm_k_blocks(outputs, TDM_K_THREADS), TDM_K_THREADS, 0,
                                     stream>>>(dx, dy, argmax, y, (uint32_t)outputs, h, w, c,
                                               k, ph, pw);
  } else if (total <= UINT32_MAX) {
    maxpool_backward_kernel<uint32_t>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx, dy, argmax, y, (uint32_t)total, h, w, c, k, ph, pw);
  } else {
    maxpool_backward_kernel<size_t>
        <<<tdm_k_blocks(total, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
            dx, dy, argmax, y, total, h, w, c, k, ph, pw);
  }
  return tdm_k_launched();
}
