/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cpu-kernels.c — the CPU backend's loops: bias, ReLU, im2col and col2im, max
 * pooling, the fused first-layer convolution with its pool, and the communicators'
 * sums. Plain C written for GCC's auto-vectorizer, with GCC vector types where it
 * needs help. Meson compiles this file once per instruction set (see
 * tdm-cpu-kernels.h); TDM_CPU_KERNELS names the table each copy defines. Nothing here
 * checks arguments: the backend has. */
#include "tdm-cpu-kernels.h"

#include <glib.h>
#include <string.h>

#if !defined(TDM_CPU_KERNELS) || !defined(TDM_CPU_KERNELS_NAME)
#error "TDM_CPU_KERNELS and TDM_CPU_KERNELS_NAME name the table this copy defines"
#endif

/* The products this copy's tdm-cpu-winograd-gemm.c defines. */
extern const TdmCpuWinogradGemm TDM_CPU_WINOGRAD_GEMM;

/* A vector of floats as one value: sixteen (one AVX-512 register), eight (AVX) or
 * four (SSE, NEON), as the copy is built. Loads and stores go through memcpy, which
 * compiles to one unaligned access. */
#if defined(__AVX512F__)
#define LANES 16
#elif defined(__AVX__)
#define LANES 8
#else
#define LANES 4
#endif
typedef float TdmVec __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t TdmVeci __attribute__((vector_size(LANES * sizeof(int32_t))));

static inline TdmVec
vec_load(const float *p)
{
  TdmVec v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void
vec_store(float *p, TdmVec v)
{
  memcpy(p, &v, sizeof v);
}

/* The first count floats at p (all LANES when count is more), zeros after them. */
static inline TdmVec
vec_load_part(const float *p, int count)
{
  if (count >= LANES)
    return vec_load(p);
  float part[LANES] = {0};
  memcpy(part, p, sizeof(float) * count);
  return vec_load(part);
}

static inline TdmVeci
veci_load_part(const int32_t *p, int count)
{
  int32_t part[LANES] = {0};
  memcpy(part, p, sizeof(int32_t) * MIN(count, LANES));
  TdmVeci v;
  memcpy(&v, part, sizeof v);
  return v;
}

static inline void
vec_store_part(float *p, TdmVec v, int count)
{
  memcpy(p, &v, sizeof(float) * MIN(count, LANES));
}

/* 0, 1, 2, … */
static inline TdmVeci
veci_lanes(void)
{
  TdmVeci v;
  for (int i = 0; i < LANES; i++)
    v[i] = i;
  return v;
}

/* Where the mask is set, a; elsewhere b. */
static inline TdmVec
vec_select(TdmVeci mask, TdmVec a, TdmVec b)
{
  return (TdmVec)(((TdmVeci)a & mask) | ((TdmVeci)b & ~mask));
}

/* Bias and ReLU */

/* `v < 0 ? 0 : v` rather than fmaxf: it maps onto maxps and lets NaN through, so a
 * diverging run still shows up in the loss instead of being hidden by the ReLU. */
static inline float
relu1(float v)
{
  return v < 0.0f ? 0.0f : v;
}

static void
k_bias_forward(float *y, const float *bias, int outer, int channels,
                 int inner, bool relu)
{

  if (inner == 1) {
    for (int o = 0; o < outer; o++) {
      float *restrict row = y + (size_t)o * channels;
      const float *restrict bb = bias;
      if (relu)
        for (int ch = 0; ch < channels; ch++)
          row[ch] = relu1(row[ch] + bb[ch]);
      else
        for (int ch = 0; ch < channels; ch++)
          row[ch] += bb[ch];
    }
    return;
  }

  for (int o = 0; o < outer; o++)
    for (int ch = 0; ch < channels; ch++) {
      float *restrict seg = y + ((size_t)o * channels + ch) * inner;
      const float value = bias[ch];
      if (relu)
        for (int i = 0; i < inner; i++)
          seg[i] = relu1(seg[i] + value);
      else
        for (int i = 0; i < inner; i++)
          seg[i] += value;
    }
}

static void
k_bias_backward(float *dbias, const float *dy, int outer, int channels,
                  int inner)
{

  /* A convolution's bias sums n·oh·ow rows (tens of thousands): float partial sums
   * over short blocks keep the loop vectorized, double totals keep it accurate. */
  enum { CHUNK = 256, BLOCK = 64 };
  double total[CHUNK];
  float part[CHUNK];

  if (inner == 1) {
    for (int c0 = 0; c0 < channels; c0 += CHUNK) {
      const int cn = MIN(CHUNK, channels - c0);
      for (int j = 0; j < cn; j++)
        total[j] = 0.0;
      for (int o0 = 0; o0 < outer; o0 += BLOCK) {
        const int o1 = MIN(outer, o0 + BLOCK);
        for (int j = 0; j < cn; j++)
          part[j] = 0.0f;
        for (int o = o0; o < o1; o++) {
          const float *restrict row = dy + (size_t)o * channels + c0;
          float *restrict acc = part;
          for (int j = 0; j < cn; j++)
            acc[j] += row[j];
        }
        for (int j = 0; j < cn; j++)
          total[j] += part[j];
      }
      for (int j = 0; j < cn; j++)
        dbias[c0 + j] = (float)total[j];
    }
    return;
  }

  for (int ch = 0; ch < channels; ch++) {
    double sum = 0.0;
    for (int o = 0; o < outer; o++) {
      const float *restrict seg = dy + ((size_t)o * channels + ch) * inner;
      float s = 0.0f;
      for (int i = 0; i < inner; i++)
        s += seg[i];
      sum += s;
    }
    dbias[ch] = (float)sum;
  }
}

static void
k_relu_forward(float *y, const float *x, size_t n)
{
  /* In place is allowed, so no restrict here; the loop still vectorizes because
   * element i is only read before it is written. */
  for (size_t i = 0; i < n; i++)
    y[i] = relu1(x[i]);
}

static void
k_relu_backward(float *dx, const float *dy, const float *y, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    const float d = dy[i];
    dx[i] = y[i] > 0.0f ? d : 0.0f;
  }
}

/* Convolution by im2col */

/* One output pixel's row of col, (ky, kx, channel) order: each row of taps is a run
 * of kw·c floats in x as in col, so a copy. off is the index into x of the window's
 * top-left corner, which lies outside x when the pixel touches the padding; only
 * in-bounds taps [ky0, ky1) × [kx0, kx1) are read. */
static G_ALWAYS_INLINE inline void
im2col_pixel(float *restrict row, const float *restrict x, ptrdiff_t off, int w, int c,
             int kh, int kw, int ky0, int ky1, int kx0, int kx1)
{
  const size_t run = (size_t)kw * c;
  if (ky0 == 0 && ky1 == kh && kx0 == 0 && kx1 == kw) {
    for (int ky = 0; ky < kh; ky++)
      memcpy(row + ky * run, x + (off + (ptrdiff_t)ky * w * c), sizeof(float) * run);
    return;
  }
  memset(row, 0, sizeof(float) * kh * run);
  for (int ky = ky0; ky < ky1; ky++)
    memcpy(row + ky * run + (size_t)kx0 * c, x + (off + ((ptrdiff_t)ky * w + kx0) * c),
           sizeof(float) * (size_t)(kx1 - kx0) * c);
}

/* Inlined into k_im2col twice, once with kh = kw = 3 as constants so that the tap
 * loops of the common case unroll. */
static G_ALWAYS_INLINE inline void
im2col_walk(float *restrict col, const float *restrict x, int n, int h, int w, int c,
            int kh, int kw, int pad, int stride)
{
  const int oh = (h + 2 * pad - kh) / stride + 1;
  const int ow = (w + 2 * pad - kw) / stride + 1;
  const size_t cols = (size_t)c * kh * kw;

  for (int im = 0; im < n; im++)
    for (int oy = 0; oy < oh; oy++) {
      const int iy = oy * stride - pad;
      const int ky0 = MAX(0, -iy), ky1 = MIN(kh, h - iy);
      for (int ox = 0; ox < ow; ox++) {
        const int ix = ox * stride - pad;
        const int kx0 = MAX(0, -ix), kx1 = MIN(kw, w - ix);
        const ptrdiff_t off = (((ptrdiff_t)im * h + iy) * w + ix) * c;
        float *row = col + (((size_t)im * oh + oy) * ow + ox) * cols;
        im2col_pixel(row, x, off, w, c, kh, kw, ky0, ky1, kx0, kx1);
      }
    }
}

/* d[ch] = the sum over the taps [ky0, ky1) × [kx0, kx1) that cover this pixel. Tap
 * (ky, kx) sits in col at o0 + ky·sy + kx·sx, its c channels contiguous: moving down
 * a tap moves up an output row. Taps outside and channels inside, so the channel
 * loop vectorizes; the taps are summed in order, as the GPU sums them. */
static G_ALWAYS_INLINE inline void
col2im_pixel(float *restrict d, const float *restrict col, ptrdiff_t o0, ptrdiff_t sy,
             ptrdiff_t sx, int c, int ky0, int ky1, int kx0, int kx1)
{
  /* A vector of channels at a time summed in registers: adding each tap into d instead
   * would load and store d once per tap. */
  int ch = 0;
  for (; ch + LANES <= c; ch += LANES) {
    TdmVec s = {0};
    for (int ky = ky0; ky < ky1; ky++)
      for (int kx = kx0; kx < kx1; kx++)
        s += vec_load(col + (o0 + ky * sy + kx * sx + ch));
    vec_store(d + ch, s);
  }
  for (; ch < c; ch++) {
    float s = 0.0f;
    for (int ky = ky0; ky < ky1; ky++)
      for (int kx = kx0; kx < kx1; kx++)
        s += col[o0 + ky * sy + kx * sx + ch];
    d[ch] = s;
  }
}

/* col2im as a gather: each pixel of dx sums the col entries of the output pixels whose
 * windows cover it, so dx is written once, in order, with no clearing pass and no
 * scattered read-modify-write. */
static G_ALWAYS_INLINE inline void
col2im_walk(float *restrict dx, const float *restrict col, int n, int h, int w, int c,
            int kh, int kw, int pad)
{
  const int oh = h + 2 * pad - kh + 1;
  const int ow = w + 2 * pad - kw + 1;
  const ptrdiff_t cols = (ptrdiff_t)c * kh * kw;
  const ptrdiff_t sy = (ptrdiff_t)kw * c - ow * cols, sx = c - cols;

  for (int im = 0; im < n; im++)
    for (int iy = 0; iy < h; iy++) {
      /* The output rows oy = iy + pad − ky that exist. */
      const int ky0 = MAX(0, iy + pad - oh + 1), ky1 = MIN(kh, iy + pad + 1);
      for (int ix = 0; ix < w; ix++) {
        const int kx0 = MAX(0, ix + pad - ow + 1), kx1 = MIN(kw, ix + pad + 1);
        /* Where tap (0, 0) would be, had its output pixel existed. */
        const ptrdiff_t o0 = (((ptrdiff_t)im * oh + iy + pad) * ow + ix + pad) * cols;
        float *d = dx + (((size_t)im * h + iy) * w + ix) * c;
        if (ky0 == 0 && ky1 == kh && kx0 == 0 && kx1 == kw)
          col2im_pixel(d, col, o0, sy, sx, c, 0, kh, 0, kw);
        else
          col2im_pixel(d, col, o0, sy, sx, c, ky0, ky1, kx0, kx1);
      }
    }
}

/* col2im for stride > 1 as a scatter: a strided conv's windows overlap little or
 * not at all, so clearing dx and adding each row of col where it was read costs
 * about one pass, and the pixel-gather of col2im_walk would need a division per tap.
 * Rows are added in order, so the sums are the same on every run. */
static void
col2im_strided(float *restrict dx, const float *restrict col, int n, int h, int w, int c,
               int kh, int kw, int pad, int stride)
{
  const int oh = (h + 2 * pad - kh) / stride + 1;
  const int ow = (w + 2 * pad - kw) / stride + 1;
  const size_t cols = (size_t)c * kh * kw;

  memset(dx, 0, sizeof(float) * (size_t)n * h * w * c);
  for (int im = 0; im < n; im++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++) {
        const float *row = col + (((size_t)im * oh + oy) * ow + ox) * cols;
        for (int ky = 0; ky < kh; ky++) {
          const int iy = oy * stride - pad + ky;
          if (iy < 0 || iy >= h)
            continue;
          for (int kx = 0; kx < kw; kx++) {
            const int ix = ox * stride - pad + kx;
            if (ix < 0 || ix >= w)
              continue;
            float *restrict d = dx + (((size_t)im * h + iy) * w + ix) * c;
            const float *restrict src = row + ((size_t)ky * kw + kx) * c;
            for (int ch = 0; ch < c; ch++)
              d[ch] += src[ch];
          }
        }
      }
}

static void
k_im2col(float *col, const float *x, int n, int h, int w, int c, int kh,
           int kw, int pad, int stride)
{
  if (kh == 3 && kw == 3 && stride == 1)
    im2col_walk(col, x, n, h, w, c, 3, 3, pad, 1);
  else
    im2col_walk(col, x, n, h, w, c, kh, kw, pad, stride);
}

static void
k_col2im(float *dx, const float *col, int n, int h, int w, int c, int kh,
           int kw, int pad, int stride)
{
  if (stride != 1)
    col2im_strided(dx, col, n, h, w, c, kh, kw, pad, stride);
  /* One channel (a first layer) gets its own copy: a loop over one channel costs more
   * than the add in it. */
  else if (kh == 3 && kw == 3 && c == 1)
    col2im_walk(dx, col, n, h, w, 1, 3, 3, pad);
  else if (kh == 3 && kw == 3)
    col2im_walk(dx, col, n, h, w, c, 3, 3, pad);
  else
    col2im_walk(dx, col, n, h, w, c, kh, kw, pad);
}

/* Max pooling */

static inline void
pool_first(float *restrict yo, int32_t *restrict ao, const float *restrict xi, int c,
           int32_t base)
{
  for (int ch = 0; ch < c; ch++) {
    yo[ch] = xi[ch];
    ao[ch] = base + ch;
  }
}

/* Unconditional stores and an integer mask, rather than a second ternary, are what
 * GCC's if-conversion turns into vector code; strict > keeps the first maximum on
 * ties. */
static inline void
pool_next(float *restrict yo, int32_t *restrict ao, const float *restrict xi, int c,
          int32_t base)
{
  for (int ch = 0; ch < c; ch++) {
    const float v = xi[ch], cur = yo[ch];
    const int32_t was = ao[ch];
    const int32_t take = -(int32_t)(v > cur);
    yo[ch] = v > cur ? v : cur;
    ao[ch] = (was & ~take) | ((base + ch) & take);
  }
}

/* A whole window per channel in registers, one store of y and argmax each. Used with
 * k a constant (2, the common case), when the tap loops unroll and the channel loop
 * vectorizes. */
static G_ALWAYS_INLINE inline void
pool_window(float *restrict yo, int32_t *restrict ao, const float *restrict x,
            int32_t first, int w, int c, int k)
{
  for (int ch = 0; ch < c; ch++) {
    float best = x[first + ch];
    int32_t arg = first + ch;
    for (int t = 1; t < k * k; t++) {
      const int32_t at = first + ((t / k) * w + t % k) * c + ch;
      const float v = x[at];
      const int32_t take = -(int32_t)(v > best);
      best = v > best ? v : best;
      arg = (arg & ~take) | (at & take);
    }
    yo[ch] = best;
    ao[ch] = arg;
  }
}

/* The conv layer's bias and ReLU, folded into the pool (the contract says why). */
static inline void
pool_bias(float *restrict yo, const float *restrict bias, int c, gboolean relu)
{
  if (relu)
    for (int ch = 0; ch < c; ch++)
      yo[ch] = relu1(yo[ch] + bias[ch]);
  else
    for (int ch = 0; ch < c; ch++)
      yo[ch] += bias[ch];
}

static void
k_maxpool_forward(float *y, int32_t *argmax, const float *x,
                    const float *bias, bool relu, int n, int h, int w, int c, int k)
{
  const int oh = h / k, ow = w / k;

  for (int im = 0; im < n; im++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++) {
        const size_t out = (((size_t)im * oh + oy) * ow + ox) * c;
        const int32_t first = (((im * h) + oy * k) * w + ox * k) * c;
        if (k == 2) {
          pool_window(y + out, argmax + out, x, first, w, c, 2);
        } else {
          pool_first(y + out, argmax + out, x + first, c, first);
          for (int ky = 0; ky < k; ky++)
            for (int kx = (ky == 0); kx < k; kx++) {
              const int32_t base = first + (ky * w + kx) * c;
              pool_next(y + out, argmax + out, x + base, c, base);
            }
        }
        if (bias != NULL)
          pool_bias(y + out, bias, c, relu);
      }
}

static inline void
unpool(float *restrict d, const float *restrict dyo, const int32_t *restrict ao, int c,
       int32_t base)
{
  for (int ch = 0; ch < c; ch++) {
    const float g = dyo[ch];
    d[ch] = ao[ch] == base + ch ? g : 0.0f;
  }
}

/* The same through the ReLU folded into the pool: only where its output yo > 0. */
static inline void
unpool_masked(float *restrict d, const float *restrict dyo, const int32_t *restrict ao,
              const float *restrict yo, int c, int32_t base)
{
  /* & rather than &&: no branch, so the loop vectorizes. */
  for (int ch = 0; ch < c; ch++) {
    const float g = dyo[ch];
    d[ch] = ((ao[ch] == base + ch) & (yo[ch] > 0.0f)) ? g : 0.0f;
  }
}

/* The gradient of a bias folded into the pool: per channel, the sum of what the pool
 * passes back (dy, masked by y when given): float sums over blocks of outputs, double
 * totals, as k_bias_backward sums. */
static inline void
pool_bias_block(float *restrict part, const float *restrict g, const float *restrict yo,
                int c)
{
  if (yo != NULL)
    for (int ch = 0; ch < c; ch++)
      part[ch] += yo[ch] > 0.0f ? g[ch] : 0.0f;
  else
    for (int ch = 0; ch < c; ch++)
      part[ch] += g[ch];
}

static void
pool_bias_gradient(float *dbias, const float *dy, const float *y, size_t outputs, int c)
{
  enum { BLOCK = 64 };
  double *total = g_new0(double, c);
  float *part = g_new(float, c);
  for (size_t o0 = 0; o0 < outputs; o0 += BLOCK) {
    memset(part, 0, sizeof(float) * c);
    for (size_t o = o0; o < MIN(outputs, o0 + BLOCK); o++)
      pool_bias_block(part, dy + o * c, y != NULL ? y + o * c : NULL, c);
    for (int ch = 0; ch < c; ch++)
      total[ch] += part[ch];
  }
  for (int ch = 0; ch < c; ch++)
    dbias[ch] = (float)total[ch];
  g_free(part);
  g_free(total);
}

static void
k_maxpool_backward(float *dx, float *dbias, const float *dy,
                     const int32_t *argmax, const float *y, int n, int h, int w, int c, int k)
{
  const int oh = h / k, ow = w / k;
  const size_t row = (size_t)w * c, tail = (size_t)(w - ow * k) * c;

  /* One pass that writes every element of dx once, each input asking whether it was
   * its window's choice, instead of clearing dx and scattering into it: half the
   * memory traffic. Relies on argmax coming from maxpool_forward, as it does. */
  for (int im = 0; im < n; im++)
    for (int iy = 0; iy < h; iy++) {
      float *drow = dx + ((size_t)im * h + iy) * row;
      const int oy = iy / k;
      if (oy >= oh) {
        memset(drow, 0, sizeof(float) * row);
        continue;
      }
      for (int ox = 0; ox < ow; ox++) {
        const size_t out = (((size_t)im * oh + oy) * ow + ox) * c;
        for (int kx = 0; kx < k; kx++) {
          const int32_t base = ((im * h + iy) * w + ox * k + kx) * c;
          if (y != NULL)
            unpool_masked(drow + (size_t)(ox * k + kx) * c, dy + out, argmax + out, y + out,
                          c, base);
          else
            unpool(drow + (size_t)(ox * k + kx) * c, dy + out, argmax + out, c, base);
        }
      }
      if (tail > 0)
        memset(drow + row - tail, 0, sizeof(float) * tail);
    }
  if (dbias != NULL)
    pool_bias_gradient(dbias, dy, y, (size_t)n * oh * ow, c);
}

/* conv_pool: a first layer's small convolution, bias, ReLU and max pool in one pass,
 * and its parameter gradients (the contract is in tdm-backend.h). A vector of output
 * channels (a group) at a time; taps are summed in the weights' (ky, kx, channel)
 * order, as the GPU sums them. The cnn's first layer (one channel, 3×3 taps, 2×2
 * pool) has its own loops, which give the same sums in the same order. */

/* One image, zero-padded by pad on every side, so that every tap of every conv
 * position is an in-bounds read at a fixed offset (padding taps then add products of
 * zero, the same sums as leaving them out). tap[t] is tap t's offset from a
 * position's corner, in the weights' (ky, kx, channel) order. */
static void
conv_pool_pad(float *restrict xp, int32_t *restrict tap, const float *restrict x, int h, int w,
              int c, int kh, int kw, int pad)
{
  const int wp = w + 2 * pad;
  memset(xp, 0, sizeof(float) * (size_t)(h + 2 * pad) * wp * c);
  for (int iy = 0; iy < h; iy++)
    memcpy(xp + ((size_t)(iy + pad) * wp + pad) * c, x + (size_t)iy * w * c,
           sizeof(float) * (size_t)w * c);
  for (int ky = 0; ky < kh; ky++)
    for (int kx = 0; kx < kw; kx++)
      for (int ch = 0; ch < c; ch++)
        tap[(ky * kw + kx) * c + ch] = (ky * wp + kx) * c + ch;
}

/* The weights, [out][tap], as [group][tap][LANES], zeros past out. Weight gradients
 * are summed in the same shape. */
static float *
conv_pool_pack(const float *wt, int taps, int out)
{
  const int groups = (out + LANES - 1) / LANES;
  float *packed = g_new0(float, (size_t)groups * taps * LANES);
  for (int o = 0; o < out; o++)
    for (int t = 0; t < taps; t++)
      packed[((size_t)(o / LANES) * taps + t) * LANES + o % LANES] = wt[(size_t)o * taps + t];
  return packed;
}

/* The cnn's first layer, which has loops of its own: one channel, 3×3 taps padded by
 * one, 2×2 pool. */
static inline gboolean
conv_pool_is_3x3(int c, int kh, int kw, int pad, int pk)
{
  return c == 1 && kh == 3 && kw == 3 && pad == 1 && pk == 2;
}

/* In a 2×2 pool's 4×4 patch of input, the tap of window position q that reads the
 * value at (r, col), or −1 when none does. Constant once the loops over r, col and q
 * unroll. */
static inline int
conv_pool_patch_tap(int r, int col, int q)
{
  const int ky = r - q / 2, kx = col - q % 2;
  return ky >= 0 && ky < 3 && kx >= 0 && kx < 3 ? ky * 3 + kx : -1;
}

/* Where a pooled pixel's window position q sits: its corner in the padded image and
 * its first index in the conv's output. */
typedef struct {
  int32_t corner;
  int32_t index;
} TdmPoolPosition;

static inline void
conv_pool_window(TdmPoolPosition *restrict at, int im, int py, int px, int w, int c, int pad,
                 int oh, int ow, int out, int pk)
{
  for (int q = 0; q < pk * pk; q++) {
    const int oy = py * pk + q / pk, ox = px * pk + q % pk;
    at[q].corner = (oy * (w + 2 * pad) + ox) * c;
    at[q].index = ((im * oh + oy) * ow + ox) * out;
  }
}

/* A window's max so far, and where it came from. */
typedef struct {
  TdmVec best;
  TdmVeci arg;
} TdmPoolMax;

/* Position q's sums s into the max (first on ties: only a strictly greater value
 * takes). */
static inline void
conv_pool_fold(TdmPoolMax *restrict m, TdmVec s, const TdmPoolPosition *restrict at, int q,
               int o0)
{
  const TdmVeci arg = (at[q].index + o0) + veci_lanes();
  if (q == 0) {
    m->best = s;
    m->arg = arg;
    return;
  }
  const TdmVeci take = s > m->best;
  m->best = vec_select(take, s, m->best);
  m->arg = (arg & take) | (m->arg & ~take);
}

/* The bias and the ReLU (relu1's rule: negative to zero, NaN passes), stored. */
static inline void
conv_pool_store(float *restrict y, int32_t *restrict argmax, TdmPoolMax m, TdmVec bias,
                bool relu, int count)
{
  TdmVec v = m.best + bias;
  if (relu)
    v = vec_select(v < (TdmVec){0}, (TdmVec){0}, v);
  vec_store_part(y, v, count);
  memcpy(argmax, &m.arg, sizeof(int32_t) * MIN(count, LANES));
}

/* One channel, 3×3 taps, 2×2 pool, for one group over one image: the group's nine
 * weight vectors stay in registers, and each pooled pixel's 4×4 patch of input is
 * read once, every value feeding the window positions whose taps cover it. */
static void
conv_pool_3x3_forward(float *restrict y, int32_t *restrict argmax, const float *restrict xp,
                      const float *restrict wg, TdmVec bias, bool relu, int im, int w,
                      int oh, int ow, int out, int o0)
{
  const int wp = w + 2, count = MIN(LANES, out - o0);
  TdmVec wv[9];
  for (int t = 0; t < 9; t++)
    wv[t] = vec_load(wg + t * LANES);
  TdmPoolPosition at[4];
  for (int py = 0; py < oh / 2; py++)
    for (int px = 0; px < ow / 2; px++) {
      const float *restrict patch = xp + 2 * py * wp + 2 * px;
      TdmVec s[4] = {{0}, {0}, {0}, {0}};
      for (int r = 0; r < 4; r++)
        for (int col = 0; col < 4; col++) {
          const float v = patch[r * wp + col];
          for (int q = 0; q < 4; q++) {
            const int t = conv_pool_patch_tap(r, col, q);
            if (t >= 0)
              s[q] += v * wv[t];
          }
        }
      conv_pool_window(at, im, py, px, w, 1, 1, oh, ow, out, 2);
      TdmPoolMax m;
      for (int q = 0; q < 4; q++)
        conv_pool_fold(&m, s[q], at, q, o0);
      const size_t e = (((size_t)im * (oh / 2) + py) * (ow / 2) + px) * out + o0;
      conv_pool_store(y + e, argmax + e, m, bias, relu, count);
    }
}

/* Any other shape: one pooled pixel's group, its window positions four at a time so
 * that each weight vector loaded serves four products. */
static void
conv_pool_any_forward(float *restrict y, int32_t *restrict argmax, const float *restrict xp,
                      const int32_t *restrict tap, const float *restrict wg, TdmVec bias,
                      bool relu, int taps, const TdmPoolPosition *restrict at, int positions,
                      int o0, int count)
{
  TdmPoolMax m;
  for (int q0 = 0; q0 < positions; q0 += 4) {
    const int nq = MIN(4, positions - q0);
    TdmVec s[4] = {{0}, {0}, {0}, {0}};
    for (int t = 0; t < taps; t++) {
      const TdmVec wv = vec_load(wg + (size_t)t * LANES);
      for (int q = 0; q < nq; q++)
        s[q] += xp[at[q0 + q].corner + tap[t]] * wv;
    }
    for (int q = 0; q < nq; q++)
      conv_pool_fold(&m, s[q], at, q0 + q, o0);
  }
  conv_pool_store(y, argmax, m, bias, relu, count);
}

static void
k_conv_pool_forward(float *y, int32_t *argmax, const float *x, const float *wt,
                    const float *bias, bool relu, int n, int h, int w, int c, int out, int kh,
                    int kw, int pad, int pk)
{
  const int oh = h + 2 * pad - kh + 1, ow = w + 2 * pad - kw + 1;
  const int ph = oh / pk, pw = ow / pk, taps = kh * kw * c, positions = pk * pk;
  float *wg = conv_pool_pack(wt, taps, out);
  float *xp = g_new(float, (size_t)(h + 2 * pad) * (w + 2 * pad) * c);
  int32_t *tap = g_new(int32_t, taps);
  TdmPoolPosition *at = g_new(TdmPoolPosition, positions);

  for (int im = 0; im < n; im++) {
    conv_pool_pad(xp, tap, x + (size_t)im * h * w * c, h, w, c, kh, kw, pad);
    if (conv_pool_is_3x3(c, kh, kw, pad, pk)) {
      for (int o0 = 0; o0 < out; o0 += LANES)
        conv_pool_3x3_forward(y, argmax, xp, wg + (size_t)o0 * taps,
                              vec_load_part(bias + o0, out - o0), relu, im, w, oh, ow, out,
                              o0);
    } else {
      for (int py = 0; py < ph; py++)
        for (int px = 0; px < pw; px++) {
          const size_t e = (((size_t)im * ph + py) * pw + px) * out;
          conv_pool_window(at, im, py, px, w, c, pad, oh, ow, out, pk);
          for (int o0 = 0; o0 < out; o0 += LANES)
            conv_pool_any_forward(y + e + o0, argmax + e + o0, xp, tap, wg + (size_t)o0 * taps,
                                  vec_load_part(bias + o0, out - o0), relu, taps, at,
                                  positions, o0, out - o0);
        }
    }
  }
  g_free(at);
  g_free(tap);
  g_free(xp);
  g_free(wg);
}

/* The backward pass: g goes to the window position each output chose (the others
 * get zero), times that position's taps, summed per group in [tap][LANES]. */

/* The gradient reaching a pooled pixel's group through the ReLU, and its share for
 * each window position. */
static inline TdmVec
conv_pool_gradient(TdmVec *restrict share, const float *restrict dy,
                   const int32_t *restrict argmax, const float *restrict y, bool relu,
                   const TdmPoolPosition *restrict at, int q0, int nq, int o0, int count)
{
  TdmVec g = vec_load_part(dy, count);
  if (relu)
    g = vec_select(vec_load_part(y, count) > (TdmVec){0}, g, (TdmVec){0});
  const TdmVeci chose = veci_load_part(argmax, count), lanes = veci_lanes();
  for (int q = 0; q < nq; q++)
    share[q] = vec_select(chose == (at[q0 + q].index + o0) + lanes, g, (TdmVec){0});
  return g;
}

static void
conv_pool_3x3_backward(float *restrict acc, float *restrict bacc, const float *restrict dy,
                       const int32_t *restrict argmax, const float *restrict y, bool relu,
                       const float *restrict xp, int im, int w, int oh, int ow, int out,
                       int o0)
{
  const int wp = w + 2, count = MIN(LANES, out - o0);
  TdmVec a[9], b = vec_load(bacc);
  for (int t = 0; t < 9; t++)
    a[t] = vec_load(acc + t * LANES);
  TdmPoolPosition at[4];
  for (int py = 0; py < oh / 2; py++)
    for (int px = 0; px < ow / 2; px++) {
      const size_t e = (((size_t)im * (oh / 2) + py) * (ow / 2) + px) * out + o0;
      conv_pool_window(at, im, py, px, w, 1, 1, oh, ow, out, 2);
      TdmVec share[4];
      b += conv_pool_gradient(share, dy + e, argmax + e, y + e, relu, at, 0, 4, o0, count);
      const float *restrict patch = xp + 2 * py * wp + 2 * px;
      for (int r = 0; r < 4; r++)
        for (int col = 0; col < 4; col++) {
          const float v = patch[r * wp + col];
          for (int q = 0; q < 4; q++) {
            const int t = conv_pool_patch_tap(r, col, q);
            if (t >= 0)
              a[t] += share[q] * v;
          }
        }
    }
  for (int t = 0; t < 9; t++)
    vec_store(acc + t * LANES, a[t]);
  vec_store(bacc, b);
}

static void
conv_pool_any_backward(float *restrict acc, float *restrict bacc, const float *restrict dy,
                       const int32_t *restrict argmax, const float *restrict y, bool relu,
                       const float *restrict xp, const int32_t *restrict tap, int taps,
                       const TdmPoolPosition *restrict at, int positions, int o0, int count)
{
  for (int q0 = 0; q0 < positions; q0 += 4) {
    const int nq = MIN(4, positions - q0);
    TdmVec share[4];
    const TdmVec g = conv_pool_gradient(share, dy, argmax, y, relu, at, q0, nq, o0, count);
    if (q0 == 0)
      vec_store(bacc, vec_load(bacc) + g);
    for (int t = 0; t < taps; t++) {
      TdmVec s = vec_load(acc + (size_t)t * LANES);
      for (int q = 0; q < nq; q++)
        s += share[q] * xp[at[q0 + q].corner + tap[t]];
      vec_store(acc + (size_t)t * LANES, s);
    }
  }
}

/* Float sums over one image, double across images. */
static void
k_conv_pool_backward(float *dwt, float *dbias, const float *dy, const int32_t *argmax,
                     const float *y, const float *x, bool relu, int n, int h, int w, int c,
                     int out, int kh, int kw, int pad, int pk)
{
  const int oh = h + 2 * pad - kh + 1, ow = w + 2 * pad - kw + 1;
  const int ph = oh / pk, pw = ow / pk, taps = kh * kw * c, positions = pk * pk;
  const int groups = (out + LANES - 1) / LANES;
  const size_t sums = (size_t)groups * taps * LANES;
  double *dw = g_new0(double, sums), *db = g_new0(double, (size_t)groups * LANES);
  float *acc = g_new(float, sums), *bacc = g_new(float, (size_t)groups * LANES);
  float *xp = g_new(float, (size_t)(h + 2 * pad) * (w + 2 * pad) * c);
  int32_t *tap = g_new(int32_t, taps);
  TdmPoolPosition *at = g_new(TdmPoolPosition, positions);

  for (int im = 0; im < n; im++) {
    conv_pool_pad(xp, tap, x + (size_t)im * h * w * c, h, w, c, kh, kw, pad);
    memset(acc, 0, sizeof(float) * sums);
    memset(bacc, 0, sizeof(float) * groups * LANES);
    if (conv_pool_is_3x3(c, kh, kw, pad, pk)) {
      for (int o0 = 0; o0 < out; o0 += LANES)
        conv_pool_3x3_backward(acc + (size_t)o0 * taps, bacc + o0, dy, argmax, y, relu, xp,
                               im, w, oh, ow, out, o0);
    } else {
      for (int py = 0; py < ph; py++)
        for (int px = 0; px < pw; px++) {
          const size_t e = (((size_t)im * ph + py) * pw + px) * out;
          conv_pool_window(at, im, py, px, w, c, pad, oh, ow, out, pk);
          for (int o0 = 0; o0 < out; o0 += LANES)
            conv_pool_any_backward(acc + (size_t)o0 * taps, bacc + o0, dy + e + o0,
                                   argmax + e + o0, y + e + o0, relu, xp, tap, taps, at,
                                   positions, o0, out - o0);
        }
    }
    for (size_t i = 0; i < sums; i++)
      dw[i] += acc[i];
    for (int o = 0; o < out; o++)
      db[o] += bacc[o];
  }
  for (int o = 0; o < out; o++) {
    for (int t = 0; t < taps; t++)
      dwt[(size_t)o * taps + t] = (float)dw[((size_t)(o / LANES) * taps + t) * LANES + o % LANES];
    dbias[o] = (float)db[o];
  }
  g_free(at);
  g_free(tap);
  g_free(xp);
  g_free(bacc);
  g_free(acc);
  g_free(db);
  g_free(dw);
}

/* Communicators' sums */

static void
k_add(float *y, const float *x, size_t n)
{
  float *restrict yy = y;
  const float *restrict xx = x;
  for (size_t i = 0; i < n; i++)
    yy[i] += xx[i];
}

static void
k_scale(float *y, float alpha, size_t n)
{
  for (size_t i = 0; i < n; i++)
    y[i] *= alpha;
}

const TdmCpuKernels TDM_CPU_KERNELS = {
  .name = TDM_CPU_KERNELS_NAME,
  .bias_forward = k_bias_forward,
  .bias_backward = k_bias_backward,
  .relu_forward = k_relu_forward,
  .relu_backward = k_relu_backward,
  .im2col = k_im2col,
  .col2im = k_col2im,
  .maxpool_forward = k_maxpool_forward,
  .maxpool_backward = k_maxpool_backward,
  .conv_pool_forward = k_conv_pool_forward,
  .conv_pool_backward = k_conv_pool_backward,
  .add = k_add,
  .scale = k_scale,
  .winograd = &TDM_CPU_WINOGRAD_GEMM,
};
