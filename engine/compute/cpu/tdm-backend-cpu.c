/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu.c — the CPU backend: memory, OpenBLAS sgemm for the matrix products,
 * the optimizers, and argument checks in front of the loops of tdm-cpu-kernels.c (the
 * copy built for the best instruction set this CPU runs). It is a real backend
 * (classroom laptops and CI train on it) and the reference the CUDA backend is tested
 * against. It is not multi-threaded itself: one instance belongs to one CPU worker
 * thread, and the trainer decides how many threads OpenBLAS may use. */
#include "tdm-backend.h"
#include "tdm-i18n.h"
#include "tdm-backend-cpu-layers.h"
#include "tdm-backend-cpu-pool2d.h"
#include "tdm-backend-cpu-winograd.h"
#include "tdm-cpu-kernels.h"
#include "tdm-error.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TDM_CPU_X86 1
#else
#define TDM_CPU_X86 0
#endif

#define TDM_CPU_ALIGN 64
#define TDM_CPU_MAGIC G_GUINT64_CONSTANT(0x74646d2d63707521)

typedef struct {
  TdmBackend parent;
  gboolean have_avx;
  const TdmCpuKernels *kernels;
} TdmBackendCpu;

/* Kept in the TDM_CPU_ALIGN bytes in front of every allocation, so that free knows
 * the size to take off the counter without a shared table, and can refuse pointers
 * that some other backend handed out. */
typedef struct {
  guint64 magic;
  size_t bytes;
  const TdmBackend *owner;
  gboolean mapped;             /* from mmap, returned with munmap */
} TdmCpuBlock;

/* Blocks from this size on are mapped directly and unmapped when freed. Through
 * malloc they would not be given back: glibc raises its mmap threshold to the size of
 * the largest mapped block freed (up to 32 MiB), so the next run's buffers come from
 * the heaps of the arenas of its new threads, which keep what is freed: the window's
 * memory grew from 163 to 269 MiB over 40 runs (bench-cycles, bench/NOTES.md).
 * AddressSanitizer builds keep malloc, whose redzones catch overflows. */
#if defined(__SANITIZE_ADDRESS__)
#define TDM_CPU_MAP_BYTES ((size_t)-1)
#else
#define TDM_CPU_MAP_BYTES ((size_t)256 << 10)
#endif

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

/* Makes a fresh mapping resident and written now: a replica allocates its buffers
 * once, before training, and would otherwise take a fault on each first touch inside
 * the first steps (PyTorch's caching allocator likewise has its blocks resident from
 * its warm-up). In 2 MiB pages where the kernel has them (transparent huge pages, on
 * request): 512 times fewer faults and TLB entries. On a virtual machine that shadows
 * the guest's page tables, a 4 KiB page first written by the program costs a fault in
 * the hypervisor even after MAP_POPULATE (the kernel cleared it through its own
 * mapping): there the first resnet step on cpu:2 took 2.7 CPU-seconds instead of 0.8,
 * and a pass writing 512 MiB ran 3× slower in 4 KiB pages than in 2 MiB ones in every
 * later step too (bench/NOTES.md). Writing the pages (MADV_POPULATE_WRITE, or one store
 * a page where the kernel predates it) fills both tables. */
static void
map_in(void *base, size_t bytes)
{
#ifdef MADV_HUGEPAGE
  madvise(base, bytes, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
  if (madvise(base, bytes, MADV_POPULATE_WRITE) == 0)
    return;
#endif
  const size_t page = 4096;
  volatile char *p = base;
  for (size_t at = 0; at < bytes; at += page)
    p[at] = 0;
}

static void *
cpu_alloc(TdmBackend *b, size_t bytes, GError **error)
{
  void *base = NULL;
  gboolean mapped = bytes >= TDM_CPU_MAP_BYTES;

  /* Objects past PTRDIFF_MAX are not valid C objects; refusing them here also keeps
   * sanitizer allocators from aborting on absurd requests. Mappings are page-aligned,
   * more than TDM_CPU_ALIGN asks. */
  gboolean ok = bytes <= (size_t)PTRDIFF_MAX - TDM_CPU_ALIGN;
  if (ok && mapped) {
    base = mmap(NULL, TDM_CPU_ALIGN + bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ok = base != MAP_FAILED;
    if (ok)
      map_in(base, TDM_CPU_ALIGN + bytes);
  } else if (ok) {
    ok = posix_memalign(&base, TDM_CPU_ALIGN, TDM_CPU_ALIGN + bytes) == 0;
  }
  if (!ok) {
    char *human = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                _("%s: out of memory: cannot allocate %zu bytes (%s); %zu bytes in use"),
                b->name, bytes, human, __atomic_load_n(&b->bytes_in_use, __ATOMIC_RELAXED));
    g_free(human);
    return NULL;
  }

  /* TANDEM_CPU_POISON=1 fills every new buffer with NaN bit patterns, so that a pass
   * reading memory nothing wrote shows as NaN on the CPU as it would on a GPU (whose
   * fresh memory holds whatever was there). */
  if (g_getenv("TANDEM_CPU_POISON") != NULL)
    memset((char *)base + TDM_CPU_ALIGN, 0xff, bytes);

  TdmCpuBlock *block = base;
  block->magic = TDM_CPU_MAGIC;
  block->bytes = bytes;
  block->owner = b;
  block->mapped = mapped;

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
  if (block->mapped)
    munmap(block, TDM_CPU_ALIGN + block->bytes);
  else
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

/* A short reduction, and the rows of C per OpenBLAS call for it (see sgemm). */
#define GEMM_SHORT_K 64
#define GEMM_SHORT_ROWS 480

/* One cblas_sgemm, except that a short reduction into a tall, wide C (a convolution's
 * input gradient, dy · W into the column matrix: 200,704 × 288 summed over 64) goes
 * GEMM_SHORT_ROWS rows at a time. OpenBLAS clears C first when beta is 0, then reads
 * and writes it in its kernel: for all of C (231 MB) those are two more trips to
 * memory, for 480 rows (0.5 MB) they stay in the cache. One core's CPU time: 200,704 ×
 * 288 × 64 from 36-45 to 42-51 GFLOP/s, 50,176 × 576 × 64 from 45 to 54 (bench/NOTES.md);
 * at 128 no clear gain. 480 is a multiple of every row tile of OpenBLAS's kernels
 * (4 to 32), so each row of C is computed as one call computes it: the same bits
 * (checked with OpenBLAS 0.3.21 on Zen 2; 512-row pieces differed in the last bit).
 * A long reduction into a short C (the weight gradient) is one call as asked:
 * computing Cᵀ instead, as this backend once did, measured slower in CPU time on
 * every such shape of the cnn and resnet presets (49 vs 55 GFLOP/s for 64 × 288 over
 * 10,000 pixels, 51 vs 59 over 200,704). */
static void
sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda,
      const float *bm, int ldb, float beta, float *c, int ldc)
{
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if (k <= GEMM_SHORT_K && n >= GEMM_SHORT_K && m >= 4 * GEMM_SHORT_ROWS) {
    for (int i = 0; i < m; i += GEMM_SHORT_ROWS) {
      const int rows = MIN(GEMM_SHORT_ROWS, m - i);
      const float *ai = trans_a ? a + i : a + (size_t)i * lda;
      cblas_sgemm(CblasRowMajor, ta, tb, rows, n, k, alpha, ai, lda, bm, ldb, beta,
                  c + (size_t)i * ldc, ldc);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc);
}

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
    sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc);
    return;
  }
  if (m >= k) {
    /* Rows of C are independent: pieces of rows. */
    int rows = MAX(1, (int)(GEMM_PIECE_FLOPS / (2.0 * n * k)));
    /* Whole row tiles, so the pieces give the bits one call gives (see sgemm). */
    if (rows > GEMM_SHORT_ROWS)
      rows -= rows % GEMM_SHORT_ROWS;
    for (int i = 0; i < m && !g_atomic_int_get(b->abort_flag); i += rows) {
      int piece = MIN(rows, m - i);
      const float *ai = trans_a ? a + i : a + (size_t)i * lda;
      sgemm(trans_a, trans_b, piece, n, k, alpha, ai, lda, bm, ldb, beta, c + (size_t)i * ldc,
            ldc);
    }
  } else {
    /* A long reduction (weight gradients sum over every pixel): pieces of it, each
     * adding onto the last. */
    int depth = MAX(1, (int)(GEMM_PIECE_FLOPS / (2.0 * m * n)));
    for (int p = 0; p < k && !g_atomic_int_get(b->abort_flag); p += depth) {
      int piece = MIN(depth, k - p);
      const float *ap = trans_a ? a + (size_t)p * lda : a + p;
      const float *bp = trans_b ? bm + p : bm + (size_t)p * ldb;
      sgemm(trans_a, trans_b, m, n, piece, alpha, ap, lda, bp, ldb, p == 0 ? beta : 1.0f, c,
            ldc);
    }
  }
}

/* Bias, ReLU, convolution and pooling: argument checks here, loops in
 * tdm-cpu-kernels.c. */

static const TdmCpuKernels *
cpu_kernels(TdmBackend *b)
{
  return ((TdmBackendCpu *)b)->kernels;
}

static void
cpu_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
                 int inner, bool relu)
{
  if (!cpu_begin(b))
    return;
  CPU_REQUIRE(b, outer >= 0 && channels >= 0 && inner >= 0,
              "bias_forward: negative size %d×%d×%d", outer, channels, inner);
  cpu_kernels(b)->bias_forward(y, bias, outer, channels, inner, relu);
}

static void
cpu_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer, int channels,
                  int inner)
{
  if (!cpu_begin(b))
    return;
  CPU_REQUIRE(b, outer >= 0 && channels >= 0 && inner >= 0,
              "bias_backward: negative size %d×%d×%d", outer, channels, inner);
  cpu_kernels(b)->bias_backward(dbias, dy, outer, channels, inner);
}

static void
cpu_relu_forward(TdmBackend *b, float *y, const float *x, size_t n)
{
  if (cpu_begin(b))
    cpu_kernels(b)->relu_forward(y, x, n);
}

static void
cpu_relu_backward(TdmBackend *b, float *dx, const float *dy, const float *y, size_t n)
{
  if (cpu_begin(b))
    cpu_kernels(b)->relu_backward(dx, dy, y, n);
}

static void
cpu_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c, int kh,
           int kw, int pad, int stride)
{
  if (cpu_begin(b) && tdm_backend_check_conv(b, "im2col", n, h, w, c, kh, kw, pad, stride))
    cpu_kernels(b)->im2col(col, x, n, h, w, c, kh, kw, pad, stride);
}

static void
cpu_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c, int kh,
           int kw, int pad, int stride)
{
  if (cpu_begin(b) && tdm_backend_check_conv(b, "col2im", n, h, w, c, kh, kw, pad, stride))
    cpu_kernels(b)->col2im(dx, col, n, h, w, c, kh, kw, pad, stride);
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
  cpu_kernels(b)->maxpool_forward(y, argmax, x, bias, relu, n, h, w, c, k);
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
  cpu_kernels(b)->maxpool_backward(dx, dbias, dy, argmax, y, n, h, w, c, k);
}

static void
cpu_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                      const float *wt, const float *bias, bool relu, int n, int h, int w,
                      int c, int out, int kh, int kw, int pad, int pk)
{
  if (cpu_begin(b) &&
      tdm_backend_check_conv_pool(b, "conv_pool_forward", n, h, w, c, out, kh, kw, pad, pk))
    cpu_kernels(b)->conv_pool_forward(y, argmax, x, wt, bias, relu, n, h, w, c, out, kh, kw,
                                      pad, pk);
}

static void
cpu_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                       const int32_t *argmax, const float *y, const float *x, bool relu,
                       int n, int h, int w, int c, int out, int kh, int kw, int pad, int pk)
{
  if (cpu_begin(b) &&
      tdm_backend_check_conv_pool(b, "conv_pool_backward", n, h, w, c, out, kh, kw, pad, pk))
    cpu_kernels(b)->conv_pool_backward(dwt, dbias, dy, argmax, y, x, relu, n, h, w, c, out,
                                       kh, kw, pad, pk);
}

/* Softmax cross-entropy */

static void
cpu_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
                 int classes, float smoothing, float grad_scale, float *dlogits,
                 TdmMetrics *metrics)
{
  if (!cpu_begin(b))
    return;
  CPU_REQUIRE(b, rows >= 0 && classes >= 1, "softmax_xent: bad shape %d×%d", rows, classes);
  CPU_REQUIRE(b, smoothing >= 0.0f && smoothing <= 1.0f,
              "softmax_xent: label smoothing %g is not in [0, 1]", smoothing);
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
      /* softmax − q, q = (1 − ε)·onehot + ε/K. */
      const float spread = grad_scale * smoothing / classes;
      for (int j = 0; j < classes; j++)
        d[j] = d[j] * factor - spread;
      d[label] -= grad_scale * (1.0f - smoothing);
    } else {
      for (int j = 0; j < classes; j++)
        sum += expf(z[j] - top);
    }

    /* −Σ q·log p = log Σe − (1 − ε)(z_label − top) − ε/K · Σ (z_j − top). */
    double shifted = (double)z[label] - top;
    if (smoothing != 0.0f) {
      double all = 0.0;
      for (int j = 0; j < classes; j++)
        all += (double)z[j] - top;
      shifted = (1.0 - smoothing) * shifted + smoothing * all / classes;
    }
    loss_sum += (double)logf(sum) - shifted;
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
  if (cpu_begin(b))
    cpu_kernels(b)->add(y, x, n);
}

static void
cpu_scale(TdmBackend *b, float *y, float alpha, size_t n)
{
  if (cpu_begin(b))
    cpu_kernels(b)->scale(y, alpha, n);
}

const TdmCpuWinogradGemm *
tdm_cpu_winograd_gemm(TdmBackend *b)
{
  return cpu_kernels(b)->winograd;
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

const TdmCpuKernels *
tdm_cpu_kernels_pick(void)
{
  /* The copies this CPU runs, from the plainest to the best. */
  const TdmCpuKernels *runs[3];
  int count = 0;
  runs[count++] = &tdm_cpu_kernels_generic;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    runs[count++] = &tdm_cpu_kernels_avx2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
      runs[count++] = &tdm_cpu_kernels_avx512;
  }
#endif
  const char *wanted = g_getenv("TANDEM_CPU_KERNELS");
  for (int i = 0; wanted != NULL && i < count; i++)
    if (g_str_equal(wanted, runs[i]->name))
      return runs[i];
  return runs[count - 1];
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
  .conv_forward = tdm_cpu_conv_forward,
  .conv_backward = tdm_cpu_conv_backward,
  .maxpool_forward = cpu_maxpool_forward,
  .maxpool_backward = cpu_maxpool_backward,
  .conv_pool_forward = cpu_conv_pool_forward,
  .conv_pool_backward = cpu_conv_pool_backward,
  .softmax_xent = cpu_softmax_xent,
  .gather = cpu_gather,
  .gather_augment = tdm_cpu_gather_augment,
  .gather_photo = tdm_cpu_gather_photo,
  .bn_moments = tdm_cpu_bn_moments,
  .bn_stats = tdm_cpu_bn_stats,
  .bn_forward = tdm_cpu_bn_forward,
  .bn_forward_eval = tdm_cpu_bn_forward_eval,
  .bn_backward_sums = tdm_cpu_bn_backward_sums,
  .bn_backward_dx = tdm_cpu_bn_backward_dx,
  .maxpool2d_forward = tdm_cpu_maxpool2d_forward,
  .maxpool2d_backward = tdm_cpu_maxpool2d_backward,
  .avgpool2d_forward = tdm_cpu_avgpool2d_forward,
  .avgpool2d_backward = tdm_cpu_avgpool2d_backward,
  .channel_affine = tdm_cpu_channel_affine,
  .avgpool_forward = tdm_cpu_avgpool_forward,
  .avgpool_backward = tdm_cpu_avgpool_backward,
  .global_avgpool_forward = tdm_cpu_global_avgpool_forward,
  .global_avgpool_backward = tdm_cpu_global_avgpool_backward,
  .global_maxpool_forward = tdm_cpu_global_maxpool_forward,
  .global_maxpool_backward = tdm_cpu_global_maxpool_backward,
  .dropout_forward = tdm_cpu_dropout_forward,
  .dropout_backward = tdm_cpu_dropout_backward,
  .sgd_update = cpu_sgd_update,
  .sgd_momentum_update = tdm_cpu_sgd_momentum_update,
  .weight_decay = tdm_cpu_weight_decay,
  .momentum_update = cpu_momentum_update,
  .adam_update = cpu_adam_update,
  .clip_norm = tdm_cpu_clip_norm,
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
  b->name = tdm_device_id_dup_name(TDM_DEVICE_CPU);
  b->precision = TDM_PRECISION_FP32;
  g_mutex_init(&b->error_lock);
#if TDM_CPU_X86
  cpu->have_avx = __builtin_cpu_supports("avx");
#endif
  cpu->kernels = tdm_cpu_kernels_pick();
  return b;
}
