/* tdm-backend-cpu.c — the CPU backend: OpenBLAS sgemm for the matrix products and
 * plain C loops, written for GCC's auto-vectorizer, for everything else. It is a real
 * backend (classroom laptops and CI train on it) and the reference the CUDA backend is
 * tested against. It is not multi-threaded itself: one instance belongs to one CPU
 * worker thread, and the trainer decides how many threads OpenBLAS may use. */
#include "tdm-backend.h"
#include "tdm-error.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TDM_CPU_X86 1
#else
#define TDM_CPU_X86 0
#endif

/* Four floats as one value (GCC and Clang vector extensions: SSE on x86, NEON on
 * Arm), for the loops the auto-vectorizer leaves scalar. Loads and stores go through
 * memcpy, which compiles to one unaligned access. */
typedef float TdmV4 __attribute__((vector_size(16)));
typedef int32_t TdmV4i __attribute__((vector_size(16)));

static inline TdmV4
v4_load(const float *p)
{
  TdmV4 v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void
v4_store(float *p, TdmV4 v)
{
  memcpy(p, &v, sizeof v);
}

#define TDM_CPU_ALIGN 64
#define TDM_CPU_MAGIC G_GUINT64_CONSTANT(0x74646d2d63707521)

typedef struct {
  TdmBackend parent;
  gboolean have_avx;
} TdmBackendCpu;

/* Kept in the TDM_CPU_ALIGN bytes in front of every allocation, so that free knows
 * the size to take off the counter without a shared table, and can refuse pointers
 * that some other backend handed out. */
typedef struct {
  guint64 magic;
  size_t bytes;
  const TdmBackend *owner;
} TdmCpuBlock;

G_STATIC_ASSERT(sizeof(TdmCpuBlock) <= TDM_CPU_ALIGN);

/* Work between two looks at the stop flag in a long GEMM: ~10 ms on one core. */
#define GEMM_PIECE_FLOPS 5e8

/* Every operation starts here: after a failure the backend does nothing more, as the
 * contract asks, and malformed sizes become that failure instead of a crash. */
static gboolean
cpu_begin(TdmBackend *b)
{
  b->operations++;
  return !tdm_backend_failed(b);
}

#define CPU_REQUIRE(b, cond, ...)                                      \
  do {                                                                 \
    if (G_UNLIKELY(!(cond))) {                                         \
      tdm_backend_fail((b), TDM_ENGINE_ERROR_BACKEND, __VA_ARGS__);    \
      return;                                                          \
    }                                                                  \
  } while (0)

/* Memory */

static void *
cpu_alloc(TdmBackend *b, size_t bytes, GError **error)
{
  void *base = NULL;

  /* Objects past PTRDIFF_MAX are not valid C objects; refusing them here also keeps
   * sanitizer allocators from aborting on absurd requests. */
  if (bytes > (size_t)PTRDIFF_MAX - TDM_CPU_ALIGN
      || posix_memalign(&base, TDM_CPU_ALIGN, TDM_CPU_ALIGN + bytes) != 0) {
    char *human = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                "%s: out of memory: cannot allocate %zu bytes (%s); %zu bytes in use",
                b->name, bytes, human, __atomic_load_n(&b->bytes_in_use, __ATOMIC_RELAXED));
    g_free(human);
    return NULL;
  }

  TdmCpuBlock *block = base;
  block->magic = TDM_CPU_MAGIC;
  block->bytes = bytes;
  block->owner = b;

  size_t in_use = __atomic_add_fetch(&b->bytes_in_use, bytes, __ATOMIC_RELAXED);
  size_t peak = __atomic_load_n(&b->bytes_peak, __ATOMIC_RELAXED);
  while (in_use > peak
         && !__atomic_compare_exchange_n(&b->bytes_peak, &peak, in_use, TRUE,
                                         __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
  return (char *)base + TDM_CPU_ALIGN;
}

static void
cpu_free(TdmBackend *b, void *ptr)
{
  if (ptr == NULL)
    return;
  TdmCpuBlock *block = (TdmCpuBlock *)((char *)ptr - TDM_CPU_ALIGN);
  if (block->magic != TDM_CPU_MAGIC || block->owner != b) {
    g_critical("%s: free of %p, which this backend did not allocate", b->name, ptr);
    return;
  }
  block->magic = 0;
  __atomic_sub_fetch(&b->bytes_in_use, block->bytes, __ATOMIC_RELAXED);
  free(block);
}

static void
cpu_upload(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  if (cpu_begin(b) && bytes > 0)
    memcpy(dst, src, bytes);
}

static void
cpu_download(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  if (cpu_begin(b) && bytes > 0)
    memcpy(dst, src, bytes);
}

static void
cpu_copy(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  /* memmove: a communicator may well copy a buffer onto itself. */
  if (cpu_begin(b) && bytes > 0 && dst != src)
    memmove(dst, src, bytes);
}

static void
cpu_zero(TdmBackend *b, void *ptr, size_t bytes)
{
  if (cpu_begin(b) && bytes > 0)
    memset(ptr, 0, bytes);
}

static void
cpu_synchronize(TdmBackend *b)
{
}

/* GEMM */

static void
cpu_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
         const float *a, int lda, const float *bm, int ldb, float beta, float *c, int ldc)
{
  if (!cpu_begin(b))
    return;
  /* OpenBLAS reports bad arguments by printing from xerbla; check them first so the
   * failure reaches the user as an error instead. */
  if (!tdm_backend_check_gemm(b, trans_a, trans_b, m, n, k, lda, ldb, ldc))
    return;
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    /* No product: C = beta·C, with beta = 0 clearing even NaNs, as BLAS does. */
    for (int i = 0; i < m; i++) {
      float *restrict row = c + (size_t)i * ldc;
      for (int j = 0; j < n; j++)
        row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
  /* A convolution's GEMM at a large batch runs for a good part of a second. Cut into
   * pieces of about GEMM_PIECE_FLOPS, it can stop between them when the run is
   * stopped (the step is then discarded, so a half-written C does no harm). */
  const double flops = 2.0 * m * n * k;
  if (b->abort_flag == NULL || flops < 2 * GEMM_PIECE_FLOPS) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, bm, ldb, beta,
                c, ldc);
    return;
  }
  if (m >= k) {
    /* Rows of C are independent: pieces of rows. */
    int rows = MAX(1, (int)(GEMM_PIECE_FLOPS / (2.0 * n * k)));
    for (int i = 0; i < m && !g_atomic_int_get(b->abort_flag); i += rows) {
      int piece = MIN(rows, m - i);
      const float *ai = trans_a ? a + i : a + (size_t)i * lda;
      cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                  trans_b ? CblasTrans : CblasNoTrans, piece, n, k, alpha, ai, lda, bm, ldb,
                  beta, c + (size_t)i * ldc, ldc);
    }
  } else {
    /* A long reduction (weight gradients sum over every pixel): pieces of it, each
     * adding onto the last. */
    int depth = MAX(1, (int)(GEMM_PIECE_FLOPS / (2.0 * m * n)));
    for (int p = 0; p < k && !g_atomic_int_get(b->abort_flag); p += depth) {
      int piece = MIN(depth, k - p);
      const float *ap = trans_a ? a + (size_t)p * lda : a + p;
      const float *bp = trans_b ? bm + p : bm + (size_t)p * ldb;
      cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                  trans_b ? CblasTrans : CblasNoTrans, m, n, piece, alpha, ap, lda, bp, ldb,
                  p == 0 ? beta : 1.0f, c, ldc);
    }
  }
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
cpu_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
                 int inner, bool relu)
{
  if (!cpu_begin(b))
    return;
  CPU_REQUIRE(b, outer >= 0 && channels >= 0 && inner >= 0,
              "bias_forward: negative size %d×%d×%d", outer, channels, inner);

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
cpu_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer, int channels,
                  int inner)
{
  if (!cpu_begin(b))
    return;
  CPU_REQUIRE(b, outer >= 0 && channels >= 0 && inner >= 0,
              "bias_backward: negative size %d×%d×%d", outer, channels, inner);

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
cpu_relu_forward(TdmBackend *b, float *y, const float *x, size_t n)
{
  if (!cpu_begin(b))
    return;
  /* In place is allowed, so no restrict here; the loop still vectorizes because
   * element i is only read before it is written. */
  for (size_t i = 0; i < n; i++)
    y[i] = relu1(x[i]);
}

static void
cpu_relu_backward(TdmBackend *b, float *dx, const float *dy, const float *y, size_t n)
{
  if (!cpu_begin(b))
    return;
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

/* Inlined into cpu_im2col twice, once with kh = kw = 3 as constants so that the tap
 * loops of the common case unroll. */
static G_ALWAYS_INLINE inline void
im2col_walk(float *restrict col, const float *restrict x, int n, int h, int w, int c,
            int kh, int kw, int pad)
{
  const int oh = h + 2 * pad - kh + 1;
  const int ow = w + 2 * pad - kw + 1;
  const size_t cols = (size_t)c * kh * kw;

  for (int im = 0; im < n; im++)
    for (int oy = 0; oy < oh; oy++) {
      const int iy = oy - pad;
      const int ky0 = MAX(0, -iy), ky1 = MIN(kh, h - iy);
      for (int ox = 0; ox < ow; ox++) {
        const int ix = ox - pad;
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
  /* Eight channels at a time summed in registers: adding each tap into d instead
   * would load and store d once per tap. */
  int ch = 0;
  for (; ch + 8 <= c; ch += 8) {
    TdmV4 s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
    for (int ky = ky0; ky < ky1; ky++)
      for (int kx = kx0; kx < kx1; kx++) {
        const float *tap = col + (o0 + ky * sy + kx * sx + ch);
        s0 += v4_load(tap);
        s1 += v4_load(tap + 4);
      }
    v4_store(d + ch, s0);
    v4_store(d + ch + 4, s1);
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

static void
cpu_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c, int kh,
           int kw, int pad)
{
  if (!cpu_begin(b) || !tdm_backend_check_conv(b, "im2col", n, h, w, c, kh, kw, pad))
    return;
  if (kh == 3 && kw == 3)
    im2col_walk(col, x, n, h, w, c, 3, 3, pad);
  else
    im2col_walk(col, x, n, h, w, c, kh, kw, pad);
}

static void
cpu_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c, int kh,
           int kw, int pad)
{
  if (!cpu_begin(b) || !tdm_backend_check_conv(b, "col2im", n, h, w, c, kh, kw, pad))
    return;
  /* One channel (a first layer) gets its own copy: a loop over one channel costs more
   * than the add in it. */
  if (kh == 3 && kw == 3 && c == 1)
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
cpu_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                    const float *bias, bool relu, int n, int h, int w, int c, int k)
{
  if (!cpu_begin(b))
    return;
  CPU_REQUIRE(b, n >= 0 && h >= 0 && w >= 0 && c >= 0 && k >= 1,
              "maxpool_forward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  CPU_REQUIRE(b, (guint64)n * h * w * c <= G_MAXINT32,
              "maxpool_forward: %d×%d×%d×%d inputs do not fit int32 indices", n, h, w, c);
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
    d[ch] = (ao[ch] == base + ch) & (yo[ch] > 0.0f) ? g : 0.0f;
  }
}

/* The gradient of a bias folded into the pool: per channel, the sum of what the pool
 * passes back (dy, masked by y when given): float sums over blocks of outputs, double
 * totals, as cpu_bias_backward sums. */
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
cpu_maxpool_backward(TdmBackend *b, float *dx, float *dbias, const float *dy,
                     const int32_t *argmax, const float *y, int n, int h, int w, int c, int k)
{
  if (!cpu_begin(b))
    return;
  CPU_REQUIRE(b, n >= 0 && h >= 0 && w >= 0 && c >= 0 && k >= 1,
              "maxpool_backward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  CPU_REQUIRE(b, (guint64)n * h * w * c <= G_MAXINT32,
              "maxpool_backward: %d×%d×%d×%d inputs do not fit int32 indices", n, h, w, c);
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
 * and its parameter gradients (the contract is in tdm-backend.h). Taps are summed in
 * the weights' (ky, kx, channel) order, as the GPU sums them. */

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

/* Eight output channels of one pooled pixel: each window position's conv in two
 * vector registers, then the max (first on ties: only a strictly greater value
 * takes), the bias and the ReLU. corner[p] is position p's corner in the padded
 * image, index[p] its first element in the conv's output; wtt is [tap][out]. */
static inline void
conv_pool_eight(float *restrict yo, int32_t *restrict ao, const float *restrict xp,
                const int32_t *restrict tap, const float *restrict wtt,
                const float *restrict bias, gboolean relu, int taps, int out, int positions,
                const int32_t *restrict corner, const int32_t *restrict index)
{
  TdmV4 best0 = {0, 0, 0, 0}, best1 = best0;
  TdmV4i arg0 = {0, 1, 2, 3}, arg1 = {4, 5, 6, 7};
  const TdmV4i lane0 = arg0, lane1 = arg1;
  for (int p = 0; p < positions; p++) {
    TdmV4 s0 = {0, 0, 0, 0}, s1 = s0;
    const float *restrict xc = xp + corner[p];
    for (int t = 0; t < taps; t++) {
      const float v = xc[tap[t]];
      s0 += v * v4_load(wtt + (size_t)t * out);
      s1 += v * v4_load(wtt + (size_t)t * out + 4);
    }
    if (p == 0) {
      best0 = s0;
      best1 = s1;
      arg0 = index[0] + lane0;
      arg1 = index[0] + lane1;
      continue;
    }
    const TdmV4i take0 = s0 > best0, take1 = s1 > best1;
    best0 = (TdmV4)(((TdmV4i)s0 & take0) | ((TdmV4i)best0 & ~take0));
    best1 = (TdmV4)(((TdmV4i)s1 & take1) | ((TdmV4i)best1 & ~take1));
    arg0 = ((index[p] + lane0) & take0) | (arg0 & ~take0);
    arg1 = ((index[p] + lane1) & take1) | (arg1 & ~take1);
  }
  TdmV4 v0 = best0 + v4_load(bias), v1 = best1 + v4_load(bias + 4);
  if (relu) {
    /* relu1's rule: negative to zero, NaN passes. */
    v0 = (TdmV4)((TdmV4i)v0 & ~(v0 < 0));
    v1 = (TdmV4)((TdmV4i)v1 & ~(v1 < 0));
  }
  v4_store(yo, v0);
  v4_store(yo + 4, v1);
  memcpy(ao, &arg0, sizeof arg0);
  memcpy(ao + 4, &arg1, sizeof arg1);
}

/* The corners and output indices of a pooled pixel's window positions. */
static inline void
conv_pool_window(int32_t *restrict corner, int32_t *restrict index, int im, int py, int px,
                 int w, int c, int pad, int oh, int ow, int out, int pk)
{
  for (int p = 0; p < pk * pk; p++) {
    const int oy = py * pk + p / pk, ox = px * pk + p % pk;
    corner[p] = (oy * (w + 2 * pad) + ox) * c;
    index[p] = ((im * oh + oy) * ow + ox) * out;
  }
}

static void
cpu_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                      const float *wt, const float *bias, bool relu, int n, int h, int w,
                      int c, int out, int kh, int kw, int pad, int pk)
{
  if (!cpu_begin(b) || !tdm_backend_check_conv_pool(b, "conv_pool_forward", n, h, w, c, out, kh, kw, pad, pk))
    return;
  const int oh = h + 2 * pad - kh + 1, ow = w + 2 * pad - kw + 1;
  const int ph = oh / pk, pw = ow / pk, taps = kh * kw * c, positions = pk * pk;
  /* Weights as [tap][out], padded to a multiple of eight outputs (zero weights, zero
   * bias, results dropped) so that every group of channels takes the vector path. */
  const int out8 = (out + 7) / 8 * 8;
  float *wtt = g_new0(float, (size_t)taps * out8), *bias8 = g_new0(float, out8);
  for (int o = 0; o < out; o++) {
    for (int t = 0; t < taps; t++)
      wtt[(size_t)t * out8 + o] = wt[(size_t)o * taps + t];
    bias8[o] = bias[o];
  }
  float *xp = g_new(float, (size_t)(h + 2 * pad) * (w + 2 * pad) * c), yo[8];
  int32_t *tap = g_new(int32_t, taps), *corner = g_new(int32_t, positions);
  int32_t *index = g_new(int32_t, positions), ao[8];

  for (int im = 0; im < n; im++) {
    conv_pool_pad(xp, tap, x + (size_t)im * h * w * c, h, w, c, kh, kw, pad);
    for (int py = 0; py < ph; py++)
      for (int px = 0; px < pw; px++) {
        const size_t e = (((size_t)im * ph + py) * pw + px) * out;
        conv_pool_window(corner, index, im, py, px, w, c, pad, oh, ow, out, pk);
        for (int o0 = 0; o0 < out; o0 += 8) {
          conv_pool_eight(yo, ao, xp, tap, wtt + o0, bias8 + o0, relu, taps, out8, positions,
                          corner, index);
          for (int j = 0; j < MIN(8, out - o0); j++) {
            y[e + o0 + j] = yo[j];
            argmax[e + o0 + j] = ao[j] + o0;
          }
        }
      }
  }
  g_free(index);
  g_free(corner);
  g_free(tap);
  g_free(xp);
  g_free(bias8);
  g_free(wtt);
}

/* Each output channel's gradient goes to the window position it chose: its taps
 * times g into that channel's row of the weight gradient. Float sums over one image,
 * double across images. */
static void
cpu_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                       const int32_t *argmax, const float *y, const float *x, bool relu,
                       int n, int h, int w, int c, int out, int kh, int kw, int pad, int pk)
{
  if (!cpu_begin(b) ||
      !tdm_backend_check_conv_pool(b, "conv_pool_backward", n, h, w, c, out, kh, kw, pad, pk))
    return;
  const int oh = h + 2 * pad - kh + 1, ow = w + 2 * pad - kw + 1;
  const int ph = oh / pk, pw = ow / pk, taps = kh * kw * c, positions = pk * pk;
  double *dw = g_new0(double, (size_t)out * taps), *db = g_new0(double, out);
  float *acc = g_new(float, (size_t)out * taps), *bacc = g_new(float, out);
  float *xp = g_new(float, (size_t)(h + 2 * pad) * (w + 2 * pad) * c);
  int32_t *tap = g_new(int32_t, taps), *corner = g_new(int32_t, positions);
  int32_t *index = g_new(int32_t, positions);

  for (int im = 0; im < n; im++) {
    conv_pool_pad(xp, tap, x + (size_t)im * h * w * c, h, w, c, kh, kw, pad);
    memset(acc, 0, sizeof(float) * out * taps);
    memset(bacc, 0, sizeof(float) * out);
    for (int py = 0; py < ph; py++)
      for (int px = 0; px < pw; px++) {
        const size_t e = (((size_t)im * ph + py) * pw + px) * out;
        conv_pool_window(corner, index, im, py, px, w, c, pad, oh, ow, out, pk);
        for (int o = 0; o < out; o++) {
          const float g = dy[e + o];
          if ((relu && !(y[e + o] > 0.0f)) || g == 0.0f)
            continue;
          int p = 0;
          while (p < positions - 1 && argmax[e + o] != index[p] + o)
            p++;
          float *restrict row = acc + (size_t)o * taps;
          const float *restrict xc = xp + corner[p];
          for (int t = 0; t < taps; t++)
            row[t] += g * xc[tap[t]];
          bacc[o] += g;
        }
      }
    for (size_t i = 0; i < (size_t)out * taps; i++)
      dw[i] += acc[i];
    for (int o = 0; o < out; o++)
      db[o] += bacc[o];
  }
  for (size_t i = 0; i < (size_t)out * taps; i++)
    dwt[i] = (float)dw[i];
  for (int o = 0; o < out; o++)
    dbias[o] = (float)db[o];
  g_free(index);
  g_free(corner);
  g_free(tap);
  g_free(xp);
  g_free(acc);
  g_free(bacc);
  g_free(dw);
  g_free(db);
}

/* Softmax cross-entropy */

static void
cpu_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
                 int classes, float grad_scale, float *dlogits, TdmMetrics *metrics)
{
  if (!cpu_begin(b))
    return;
  CPU_REQUIRE(b, rows >= 0 && classes >= 1, "softmax_xent: bad shape %d×%d", rows, classes);
  for (int r = 0; r < rows; r++)
    CPU_REQUIRE(b, labels[r] >= 0 && labels[r] < classes,
                "softmax_xent: label %d of row %d is not a class in [0, %d)", labels[r],
                r, classes);

  double loss_sum = 0.0;
  double correct = 0.0;
  for (int r = 0; r < rows; r++) {
    const float *restrict z = logits + (size_t)r * classes;
    const int label = labels[r];

    float top = z[0];
    int best = 0;
    for (int j = 1; j < classes; j++)
      if (z[j] > top) {
        top = z[j];
        best = j;
      }

    /* Shifting by the row maximum keeps every exponent <= 0: no overflow. */
    float sum = 0.0f;
    if (dlogits != NULL) {
      float *restrict d = dlogits + (size_t)r * classes;
      for (int j = 0; j < classes; j++) {
        d[j] = expf(z[j] - top);
        sum += d[j];
      }
      const float factor = grad_scale / sum;
      for (int j = 0; j < classes; j++)
        d[j] *= factor;
      d[label] -= grad_scale;
    } else {
      for (int j = 0; j < classes; j++)
        sum += expf(z[j] - top);
    }

    loss_sum += (double)logf(sum) - ((double)z[label] - top);
    correct += best == label;
  }
  metrics->loss_sum += loss_sum;
  metrics->correct += correct;
}

/* Batch gather */

static void
cpu_gather(TdmBackend *b, float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
           const int32_t *indices, int count, int sample_size, float scale)
{
  if (!cpu_begin(b))
    return;
  CPU_REQUIRE(b, count >= 0 && sample_size >= 0, "gather: bad shape %d×%d", count,
              sample_size);
  for (int i = 0; i < count; i++)
    CPU_REQUIRE(b, indices[i] >= 0, "gather: negative sample index %d", indices[i]);

  for (int i = 0; i < count; i++) {
    const size_t index = (size_t)indices[i];
    const uint8_t *restrict src = images + index * sample_size;
    float *restrict dst = x + (size_t)i * sample_size;
    for (int j = 0; j < sample_size; j++)
      dst[j] = (float)src[j] * scale;
    if (y != NULL)
      y[i] = labels[index];
  }
}

/* Optimizers */

static void
cpu_sgd_update(TdmBackend *b, float *p, const float *g, size_t n, float lr,
               float weight_decay)
{
  if (!cpu_begin(b))
    return;
  float *restrict pp = p;
  const float *restrict gg = g;
  for (size_t i = 0; i < n; i++)
    pp[i] -= lr * (gg[i] + weight_decay * pp[i]);
}

static void
cpu_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity, size_t n,
                    float lr, float momentum, float weight_decay)
{
  if (!cpu_begin(b))
    return;
  float *restrict pp = p;
  float *restrict vv = velocity;
  const float *restrict gg = g;
  for (size_t i = 0; i < n; i++) {
    const float v = momentum * vv[i] - lr * (gg[i] + weight_decay * pp[i]);
    vv[i] = v;
    pp[i] += v;
  }
}

/* Adam runs over every parameter each step (1.8M floats for the MLP), so it has to
 * vectorize. GCC will not vectorize sqrtf while -fmath-errno is on (the default), and
 * neither the optimize attribute nor the pragma switches that off, so the x86 paths
 * spell out SSE and AVX. They use separate multiplies and adds, in the order of the
 * scalar loop, and no FMA: every path gives the same bits, so a run resumed on
 * another CPU continues exactly. The scalar loop finishes the tail and serves other
 * architectures. */
typedef struct {
  float lr_t, a1, a2, eps, wd;
} TdmAdamArgs;

static void
adam_scalar(float *restrict p, const float *restrict g, float *restrict m,
            float *restrict v, size_t from, size_t n, const TdmAdamArgs *k)
{
  for (size_t i = from; i < n; i++) {
    const float gi = g[i] + k->wd * p[i];
    const float mi = m[i] + k->a1 * (gi - m[i]);
    const float vi = v[i] + k->a2 * (gi * gi - v[i]);
    m[i] = mi;
    v[i] = vi;
    p[i] -= k->lr_t * mi / (sqrtf(vi) + k->eps);
  }
}

#if TDM_CPU_X86
static size_t
adam_sse(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
         size_t n, const TdmAdamArgs *k)
{
  const __m128 lr_t = _mm_set1_ps(k->lr_t), a1 = _mm_set1_ps(k->a1);
  const __m128 a2 = _mm_set1_ps(k->a2), eps = _mm_set1_ps(k->eps);
  const __m128 wd = _mm_set1_ps(k->wd);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 pi = _mm_loadu_ps(p + i), mo = _mm_loadu_ps(m + i);
    const __m128 vo = _mm_loadu_ps(v + i);
    const __m128 gi = _mm_add_ps(_mm_loadu_ps(g + i), _mm_mul_ps(wd, pi));
    const __m128 mi = _mm_add_ps(mo, _mm_mul_ps(a1, _mm_sub_ps(gi, mo)));
    const __m128 vi = _mm_add_ps(vo, _mm_mul_ps(a2, _mm_sub_ps(_mm_mul_ps(gi, gi), vo)));
    const __m128 step = _mm_div_ps(_mm_mul_ps(lr_t, mi), _mm_add_ps(_mm_sqrt_ps(vi), eps));
    _mm_storeu_ps(m + i, mi);
    _mm_storeu_ps(v + i, vi);
    _mm_storeu_ps(p + i, _mm_sub_ps(pi, step));
  }
  return i;
}

__attribute__((target("avx"))) static size_t
adam_avx(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
         size_t n, const TdmAdamArgs *k)
{
  const __m256 lr_t = _mm256_set1_ps(k->lr_t), a1 = _mm256_set1_ps(k->a1);
  const __m256 a2 = _mm256_set1_ps(k->a2), eps = _mm256_set1_ps(k->eps);
  const __m256 wd = _mm256_set1_ps(k->wd);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 pi = _mm256_loadu_ps(p + i), mo = _mm256_loadu_ps(m + i);
    const __m256 vo = _mm256_loadu_ps(v + i);
    const __m256 gi = _mm256_add_ps(_mm256_loadu_ps(g + i), _mm256_mul_ps(wd, pi));
    const __m256 mi = _mm256_add_ps(mo, _mm256_mul_ps(a1, _mm256_sub_ps(gi, mo)));
    const __m256 vi =
      _mm256_add_ps(vo, _mm256_mul_ps(a2, _mm256_sub_ps(_mm256_mul_ps(gi, gi), vo)));
    const __m256 step =
      _mm256_div_ps(_mm256_mul_ps(lr_t, mi), _mm256_add_ps(_mm256_sqrt_ps(vi), eps));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, step));
  }
  return i;
}
#endif

static void
cpu_adam_update(TdmBackend *b, float *p, const float *g, float *m, float *v, size_t n,
                float lr_t, float beta1, float beta2, float eps, float weight_decay)
{
  if (!cpu_begin(b))
    return;
  const TdmAdamArgs k = {
    .lr_t = lr_t, .a1 = 1.0f - beta1, .a2 = 1.0f - beta2, .eps = eps, .wd = weight_decay,
  };
  size_t done = 0;
#if TDM_CPU_X86
  if (((TdmBackendCpu *)b)->have_avx)
    done = adam_avx(p, g, m, v, n, &k);
  else
    done = adam_sse(p, g, m, v, n, &k);
#endif
  adam_scalar(p, g, m, v, done, n, &k);
}

/* Communicator helpers */

static void
cpu_add(TdmBackend *b, float *y, const float *x, size_t n)
{
  if (!cpu_begin(b))
    return;
  float *restrict yy = y;
  const float *restrict xx = x;
  for (size_t i = 0; i < n; i++)
    yy[i] += xx[i];
}

static void
cpu_scale(TdmBackend *b, float *y, float alpha, size_t n)
{
  if (!cpu_begin(b))
    return;
  for (size_t i = 0; i < n; i++)
    y[i] *= alpha;
}

static void
cpu_destroy(TdmBackend *b)
{
  if (b->bytes_in_use != 0)
    g_warning("%s: backend destroyed with %zu bytes still allocated", b->name,
              b->bytes_in_use);
  g_free(b->name);
  g_clear_error(&b->error);
  g_mutex_clear(&b->error_lock);
  g_free((TdmBackendCpu *)b);
}

static const TdmBackendOps tdm_backend_cpu_ops = {
  .alloc = cpu_alloc,
  .free = cpu_free,
  .upload = cpu_upload,
  .download = cpu_download,
  .copy = cpu_copy,
  .zero = cpu_zero,
  .synchronize = cpu_synchronize,
  .gemm = cpu_gemm,
  .bias_forward = cpu_bias_forward,
  .bias_backward = cpu_bias_backward,
  .relu_forward = cpu_relu_forward,
  .relu_backward = cpu_relu_backward,
  .im2col = cpu_im2col,
  .col2im = cpu_col2im,
  .maxpool_forward = cpu_maxpool_forward,
  .maxpool_backward = cpu_maxpool_backward,
  .conv_pool_forward = cpu_conv_pool_forward,
  .conv_pool_backward = cpu_conv_pool_backward,
  .softmax_xent = cpu_softmax_xent,
  .gather = cpu_gather,
  .sgd_update = cpu_sgd_update,
  .momentum_update = cpu_momentum_update,
  .adam_update = cpu_adam_update,
  .add = cpu_add,
  .scale = cpu_scale,
  .graph_begin = NULL,
  .graph_end = NULL,
  .graph_launch = NULL,
  .destroy = cpu_destroy,
};

TdmBackend *
tdm_backend_cpu_new(GError **error)
{
  TdmBackendCpu *cpu = g_new0(TdmBackendCpu, 1);
  TdmBackend *b = &cpu->parent;

  b->ops = &tdm_backend_cpu_ops;
  b->kind = TDM_BACKEND_CPU;
  b->device_index = 0;
  b->name = g_strdup("cpu");
  b->precision = TDM_PRECISION_FP32;
  g_mutex_init(&b->error_lock);
#if TDM_CPU_X86
  cpu->have_avx = __builtin_cpu_supports("avx");
#endif
  return b;
}
