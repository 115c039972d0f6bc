/* tdm-backend-cuda.c — the CUDA backend: one GPU as the engine computes on it, with
 * cuBLAS for the GEMMs and kernels/ for everything else, all on one non-blocking
 * stream of its own (so several backends, one per replica, can share a GPU).
 *
 * It also captures a replica's step into a CUDA graph and replays it, counts every
 * byte it allocates, and turns each CUDA or cuBLAS failure into the backend's sticky
 * error with file and line: it never exits. Not the communicators (they only borrow
 * the stream, through tdm-backend-cuda.h) and not device discovery (tdm-device.c).
 */
#include "tdm-backend-cuda.h"
#include "tdm-error.h"
#include "tdm-kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <string.h>

/* Uploads go through a ring of pinned staging buffers so that they are truly
 * asynchronous and the caller may reuse its host memory at once (see cuda_upload).
 * Each slot is reused only after the copy out of it has finished: with four slots the
 * host can run at most four uploads ahead of the GPU. Larger uploads (datasets, once)
 * copy straight from the caller's memory and wait. */
#define TDM_UPLOAD_SLOTS 4
#define TDM_UPLOAD_STAGED_MAX ((size_t)8 << 20)
/* Scratch for the first pass of the sums that reduce over rows (bias gradients,
 * conv_pool_backward): up to 1024 row groups of 256 values, or of 320 for a first
 * layer's 32 × (9 + 1) weight and bias gradients. */
#define TDM_PARTIALS_FLOATS ((size_t)1 << 20)

G_STATIC_ASSERT(TDM_K_CONV_POOL_TAPS == TDM_CONV_POOL_TAPS);
G_STATIC_ASSERT(TDM_K_CONV_POOL_OUT == TDM_CONV_POOL_OUT);
/* Scratch for split-K GEMMs (cuda_gemm): chunks × m × n partial products. 8 MiB holds
 * a conv weight gradient of 64×288 in 100 chunks. */
#define TDM_SPLIT_K_FLOATS ((size_t)2 << 20)

typedef struct {
  void *host;                  /* pinned */
  size_t capacity;
  cudaEvent_t done;            /* recorded after the copy out of this slot */
  gboolean pending;
} TdmUploadSlot;

typedef struct {
  TdmBackend base;
  cudaStream_t stream;
  cublasHandle_t cublas;
  void *cublas_workspace;
  float *partials;
  float *split_parts;          /* TDM_SPLIT_K_FLOATS */
  int split_k;                 /* TDM_CUDA_SPLIT_K: -1 chooses, 0 never, else chunks */
  gboolean small_gemm;         /* TDM_CUDA_SMALL_GEMM=0 turns tdm_k_gemm_small off */
  int implicit_major;          /* compute capability for conv-implicit.cu; 0: off */
  int sm_count;
  char *gpu_name;              /* "NVIDIA H200", for messages */

  GMutex lock;                 /* blocks, counters, upload ring */
  GHashTable *blocks;          /* device pointer → size in bytes */
  TdmUploadSlot ring[TDM_UPLOAD_SLOTS];
  int ring_next;

  GHashTable *graphs;          /* key → cudaGraphExec_t; the replica's thread only */
  gboolean capturing;
  gboolean graphs_disabled;
} TdmBackendCuda;

#define CUDA_B(b) ((TdmBackendCuda *)(b))

/* Errors */

static const char *
call_name(const char *call, char *buf, size_t size)
{
  /* "cudaMemcpyAsync(dst, …)" → "cudaMemcpyAsync": the arguments are noise in a
   * message meant for a person, the file and line say which call it was. */
  size_t n = strcspn(call, " (");
  if (n >= size)
    n = size - 1;
  memcpy(buf, call, n);
  buf[n] = '\0';
  return buf;
}

gboolean
tdm_cuda_ok_at(TdmBackend *b, cudaError_t err, const char *call, const char *file, int line)
{
  if (G_LIKELY(err == cudaSuccess))
    return TRUE;
  char name[64];
  tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, "%s failed: %s (%s) at %s:%d",
                   call_name(call, name, sizeof name), cudaGetErrorString(err),
                   cudaGetErrorName(err), file, line);
  return FALSE;
}

gboolean
tdm_cuda_set_error_at(GError **error, int code, const char *who, cudaError_t err,
                      const char *call, const char *file, int line)
{
  if (G_LIKELY(err == cudaSuccess))
    return TRUE;
  char name[64];
  g_set_error(error, TDM_ENGINE_ERROR, code, "%s: %s failed: %s (%s) at %s:%d", who,
              call_name(call, name, sizeof name), cudaGetErrorString(err),
              cudaGetErrorName(err), file, line);
  return FALSE;
}

static gboolean
cublas_ok_at(TdmBackend *b, cublasStatus_t status, const char *call, const char *file,
             int line)
{
  if (G_LIKELY(status == CUBLAS_STATUS_SUCCESS))
    return TRUE;
  char name[64];
  tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, "%s failed: %s (%s) at %s:%d",
                   call_name(call, name, sizeof name), cublasGetStatusString(status),
                   cublasGetStatusName(status), file, line);
  return FALSE;
}
#define CUBLAS_OK(b, call) cublas_ok_at((b), (call), #call, __FILE__, __LINE__)

#define CUDA_REQUIRE(b, cond, ...)                                  \
  do {                                                              \
    if (G_UNLIKELY(!(cond))) {                                      \
      tdm_backend_fail((b), TDM_ENGINE_ERROR_BACKEND, __VA_ARGS__); \
      return;                                                       \
    }                                                               \
  } while (0)

/* Every operation starts here: nothing more after a failure (the contract), and the
 * backend's GPU made current, since a replica's thread may have used another. */
gboolean
tdm_cuda_begin(TdmBackend *b)
{
  b->operations++;
  if (tdm_backend_failed(b))
    return FALSE;
  return TDM_CUDA_OK(b, cudaSetDevice(b->device_index));
}

cudaStream_t
tdm_backend_cuda_stream(TdmBackend *b)
{
  g_return_val_if_fail(b != NULL && b->kind == TDM_BACKEND_CUDA, NULL);
  return CUDA_B(b)->stream;
}

double *
tdm_backend_cuda_sum_scratch(TdmBackend *b, size_t *count)
{
  /* The partials buffer of the bias sums, read as doubles: one stream uses both. */
  *count = TDM_PARTIALS_FLOATS / 2;
  return (double *)CUDA_B(b)->partials;
}

int
tdm_backend_cuda_ordinal(TdmBackend *b)
{
  return b->device_index;
}

gboolean
tdm_backend_cuda_capturing(TdmBackend *b)
{
  return CUDA_B(b)->capturing;
}

/* A workspace of our own, so cuBLAS never allocates while a graph is captured;
 * 32 MiB is what cuBLAS asks for on Hopper, 4 MiB before. Counted like any buffer. */
static size_t
cublas_workspace_bytes(int major)
{
  return major >= 9 ? (size_t)32 << 20 : (size_t)4 << 20;
}

size_t
tdm_backend_cuda_own_bytes(int ordinal)
{
  /* Hopper's, the most, when the GPU cannot be asked (tdm-memory.h estimates). */
  int major = 9;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    major = 9;
  }
  return cublas_workspace_bytes(major) + (TDM_PARTIALS_FLOATS + TDM_SPLIT_K_FLOATS) * sizeof(float);
}

/* Memory */

static void
count_bytes(TdmBackendCuda *cb, void *ptr, size_t bytes)
{
  g_mutex_lock(&cb->lock);
  g_hash_table_insert(cb->blocks, ptr, GSIZE_TO_POINTER(bytes));
  cb->base.bytes_in_use += bytes;
  if (cb->base.bytes_in_use > cb->base.bytes_peak)
    cb->base.bytes_peak = cb->base.bytes_in_use;
  g_mutex_unlock(&cb->lock);
}

static void *
cuda_alloc(TdmBackend *b, size_t bytes, GError **error)
{
  TdmBackendCuda *cb = CUDA_B(b);
  void *ptr = NULL;

  cudaError_t err = cudaSetDevice(b->device_index);
  if (err == cudaSuccess)
    err = cudaMalloc(&ptr, MAX(bytes, 1));
  if (err != cudaSuccess) {
    /* Allocation failures are not sticky in CUDA; clear the last error so that the
     * next launch check does not report it again. */
    (void)cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    if (err == cudaErrorMemoryAllocation &&
        cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      char *need = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
      char *have = g_format_size_full(free_bytes, G_FORMAT_SIZE_IEC_UNITS);
      char *total = g_format_size_full(total_bytes, G_FORMAT_SIZE_IEC_UNITS);
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                  "%s (%s): out of memory: one buffer of %s (%zu bytes) could not be "
                  "allocated, %s free of %s; Tandem holds %zu bytes on this device",
                  b->name, cb->gpu_name, need, bytes, have, total, b->bytes_in_use);
      g_free(need);
      g_free(have);
      g_free(total);
    } else {
      (void)cudaGetLastError();
      g_set_error(error, TDM_ENGINE_ERROR,
                  err == cudaErrorMemoryAllocation ? TDM_ENGINE_ERROR_OUT_OF_MEMORY
                                                   : TDM_ENGINE_ERROR_BACKEND,
                  "%s (%s): cannot allocate %zu bytes: %s (%s)", b->name, cb->gpu_name,
                  bytes, cudaGetErrorString(err), cudaGetErrorName(err));
    }
    return NULL;
  }
  count_bytes(cb, ptr, bytes);
  return ptr;
}

static void
destroy_graphs(TdmBackendCuda *cb)
{
  if (cb->graphs == NULL)
    return;
  GHashTableIter iter;
  gpointer value;
  g_hash_table_iter_init(&iter, cb->graphs);
  while (g_hash_table_iter_next(&iter, NULL, &value)) {
    (void)cudaGraphExecDestroy((cudaGraphExec_t)value);
    g_hash_table_iter_remove(&iter);
  }
}

static void
cuda_free(TdmBackend *b, void *ptr)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (ptr == NULL)
    return;
  g_mutex_lock(&cb->lock);
  gpointer size;
  gboolean known = g_hash_table_lookup_extended(cb->blocks, ptr, NULL, &size);
  if (known) {
    g_hash_table_remove(cb->blocks, ptr);
    b->bytes_in_use -= GPOINTER_TO_SIZE(size);
  }
  g_mutex_unlock(&cb->lock);
  if (!known) {
    g_critical("%s: free of %p, which this backend did not allocate", b->name, ptr);
    return;
  }
  /* A captured graph holds raw pointers: once any buffer goes, no graph is trusted
   * (the replica frees only at the end, so this costs nothing in a run). */
  destroy_graphs(cb);
  TDM_CUDA_OK(b, cudaSetDevice(b->device_index));
  TDM_CUDA_OK(b, cudaFree(ptr));
}

/* Asynchronous and safe to call every step: the bytes are copied into a pinned slot
 * at once, so the caller may reuse or free src when this returns, and the copy to
 * dst is ordered on the stream after every operation issued before it (a previous
 * step still reading dst) and before every one issued after. A slot is reused only
 * once the copy out of it has completed. */
static void
cuda_upload(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (!tdm_cuda_begin(b) || bytes == 0)
    return;
  CUDA_REQUIRE(b, !cb->capturing,
               "upload inside a graph capture (a graph would replay stale host data)");

  if (bytes > TDM_UPLOAD_STAGED_MAX) {
    if (TDM_CUDA_OK(b, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cb->stream)))
      TDM_CUDA_OK(b, cudaStreamSynchronize(cb->stream));
    return;
  }

  g_mutex_lock(&cb->lock);
  TdmUploadSlot *slot = &cb->ring[cb->ring_next];
  cb->ring_next = (cb->ring_next + 1) % TDM_UPLOAD_SLOTS;
  gboolean ok = TRUE;
  if (slot->pending) {
    ok = TDM_CUDA_OK(b, cudaEventSynchronize(slot->done));
    slot->pending = FALSE;
  }
  if (ok && slot->capacity < bytes) {
    if (slot->host != NULL)
      TDM_CUDA_OK(b, cudaFreeHost(slot->host));
    slot->host = NULL;
    slot->capacity = 0;
    /* Powers of two, at least 64 KiB, so that growing batches settle quickly. */
    size_t want = MAX((size_t)64 << 10, bytes);
    want = (size_t)1 << g_bit_storage(want - 1);
    ok = TDM_CUDA_OK(b, cudaHostAlloc(&slot->host, want, cudaHostAllocDefault));
    if (ok)
      slot->capacity = want;
  }
  if (ok) {
    memcpy(slot->host, src, bytes);
    ok = TDM_CUDA_OK(b, cudaMemcpyAsync(dst, slot->host, bytes, cudaMemcpyHostToDevice,
                                        cb->stream)) &&
         TDM_CUDA_OK(b, cudaEventRecord(slot->done, cb->stream));
    slot->pending = ok;
  }
  g_mutex_unlock(&cb->lock);
}

static void
cuda_download(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (!tdm_cuda_begin(b) || bytes == 0)
    return;
  CUDA_REQUIRE(b, !cb->capturing, "download inside a graph capture");
  if (TDM_CUDA_OK(b, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cb->stream)))
    TDM_CUDA_OK(b, cudaStreamSynchronize(cb->stream));
}

static void
cuda_copy(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  if (!tdm_cuda_begin(b) || bytes == 0 || dst == src)
    return;
  TDM_CUDA_OK(b, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, CUDA_B(b)->stream));
}

static void
cuda_zero(TdmBackend *b, void *ptr, size_t bytes)
{
  if (!tdm_cuda_begin(b) || bytes == 0)
    return;
  TDM_CUDA_OK(b, cudaMemsetAsync(ptr, 0, bytes, CUDA_B(b)->stream));
}

static void
cuda_synchronize(TdmBackend *b)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, !cb->capturing, "synchronize inside a graph capture");
  TDM_CUDA_OK(b, cudaStreamSynchronize(cb->stream));
}

/* GEMM */

/* Products whose output has at most this many values, over reductions up to this
 * long, go to tdm_k_gemm_small: for a last layer's weight gradient (10 × 128) cuBLAS
 * picks one block that walks the whole reduction, 56 µs whether the batch is 100 or
 * 1024. Longer reductions go split-K. */
#define TDM_SMALL_GEMM_OUTPUT 4096
#define TDM_SMALL_GEMM_DEPTH 8192

/* How many chunks to cut a GEMM's reduction into. A long reduction into a small
 * output, such as a conv weight gradient (out × kh·kw·c values summed over n·oh·ow
 * rows), gives cuBLAS a handful of output tiles for the whole GPU (seen: 190 µs for
 * 32×9×802816, 137 µs in chunks). Chunks multiplied as one batch and summed in order
 * after (tdm_k_sum_parts) fill it and stay deterministic. Aim at two blocks per
 * multiprocessor, counting 128×128 tiles, with chunks of at least 128 rows; only for
 * reductions 32 times longer than the output's sides (a layer's forward product at a
 * small batch, 100×128×3136, came out slower in chunks). */
static int
split_k_chunks(TdmBackendCuda *cb, int m, int n, int k)
{
  size_t mn = (size_t)m * n;
  if (cb->split_k == 0 || mn == 0 || mn > TDM_SPLIT_K_FLOATS / 2 || k < 1024 ||
      k < 32 * MAX(m, n))
    return 1;
  size_t tiles = (size_t)((m + 127) / 128) * ((n + 127) / 128);
  size_t chunks = cb->split_k > 0 ? (size_t)cb->split_k
                                  : MIN((size_t)k / 128, 2 * (size_t)cb->sm_count / tiles);
  chunks = MIN(chunks, MIN((size_t)k / 2, TDM_SPLIT_K_FLOATS / mn));
  return chunks < 2 ? 1 : (int)chunks;
}

/* bf16 (--precision bf16): float32 operands go through cuBLAS's
 * CUBLAS_COMPUTE_32F_FAST_16BF, which may round them to bfloat16 as it loads its tiles
 * (on the H200 it picked its tf32 kernels for these shapes, ncu 2026-12-03). The
 * convolutions' columns, their weights and output gradients are stored as bfloat16
 * for their forward and weight-gradient products (gemm_bf16, tdm-replica-pass.c), so
 * those read half the bytes; the master weights, the activations the BN and pooling
 * kernels read, the optimizer state and the BN statistics all stay float32. TF32 goes
 * through the handle's math mode instead; tdm_k_gemm_small's tiny products stay
 * float32 in every precision. */
/* The cuBLAS part of cuda_gemm and the bf16 ones: A and B of `type` (float32 or
 * bfloat16, `size` bytes an element), C of c_type (float32, or bfloat16 without
 * split-K, whose parts are float32), one call or split-K. */
static void
cublas_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
            const void *a, int lda, const void *bm, int ldb, float beta, void *c, int ldc,
            cudaDataType_t type, size_t size, cudaDataType_t c_type,
            cublasComputeType_t compute)
{
  TdmBackendCuda *cb = CUDA_B(b);
  cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  int chunks = c_type == CUDA_R_32F ? split_k_chunks(cb, m, n, k) : 1;
  if (chunks <= 1) {
    /* cuBLAS is column-major, and a row-major matrix read column-major is its
     * transpose: so compute Cᵀ (n×m) = op(B)ᵀ · op(A)ᵀ, that is, swap the operands. */
    if (type == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F)
      CUBLAS_OK(b, cublasSgemm(cb->cublas, op_b, op_a, n, m, k, &alpha, bm, ldb, a, lda, &beta,
                               c, ldc));
    else
      CUBLAS_OK(b, cublasGemmEx(cb->cublas, op_b, op_a, n, m, k, &alpha, bm, type, ldb, a, type,
                                lda, &beta, c, c_type, ldc, compute, CUBLAS_GEMM_DEFAULT));
    return;
  }

  /* Split-K: chunk s multiplies rows [s·len, (s + 1)·len) of the reduction, the last
   * chunk also takes the remainder; all but that one go as one strided batch. Chunk
   * s of op(A) starts s·len columns in: rows of A when it is transposed. */
  const float one = 1.0f, zero = 0.0f;
  int len = k / chunks, last = k - len * (chunks - 1);
  long long step_a = (long long)len * (trans_a ? lda : 1);
  long long step_b = (long long)len * (trans_b ? 1 : ldb);
  long long mn = (long long)m * n;
  int batched = last == len ? chunks : chunks - 1;
  if (!CUBLAS_OK(b, cublasGemmStridedBatchedEx(cb->cublas, op_b, op_a, n, m, len, &one, bm,
                                               type, ldb, step_b, a, type, lda, step_a, &zero,
                                               cb->split_parts, CUDA_R_32F, n, mn, batched,
                                               compute, CUBLAS_GEMM_DEFAULT)))
    return;
  if (batched < chunks &&
      !CUBLAS_OK(b, cublasGemmEx(cb->cublas, op_b, op_a, n, m, last, &one,
                                 (const char *)bm + step_b * batched * (long long)size, type,
                                 ldb, (const char *)a + step_a * batched * (long long)size,
                                 type, lda, &zero, cb->split_parts + mn * batched, CUDA_R_32F,
                                 n, compute, CUBLAS_GEMM_DEFAULT)))
    return;
  TDM_CUDA_OK(b, tdm_k_sum_parts(c, ldc, cb->split_parts, chunks, m, n, alpha, beta,
                                 cb->stream));
}

static void
cuda_gemm(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
          const float *a, int lda, const float *bm, int ldb, float beta, float *c, int ldc)
{
  if (!tdm_cuda_begin(b))
    return;
  if (!tdm_backend_check_gemm(b, trans_a, trans_b, m, n, k, lda, ldb, ldc))
    return;
  if (m == 0 || n == 0)
    return;
  TdmBackendCuda *cb = CUDA_B(b);
  if (cb->small_gemm && (size_t)m * n <= TDM_SMALL_GEMM_OUTPUT && k <= TDM_SMALL_GEMM_DEPTH) {
    TDM_CUDA_OK(b, tdm_k_gemm_small(trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c,
                                    ldc, cb->stream));
    return;
  }
  cublas_gemm(b, trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc, CUDA_R_32F,
              sizeof(float), CUDA_R_32F,
              b->precision == TDM_PRECISION_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                 : CUBLAS_COMPUTE_32F);
}

/* bf16 operands as stored (tdm-backend.h's gemm_bf16): true bfloat16 tensor-core
 * GEMMs, where FAST_16BF on float32 operands got cuBLAS's tf32 kernels reading twice
 * the bytes (ncu, 2026-12-03). */
static void
cuda_gemm_bf16(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
               const uint16_t *a, int lda, const uint16_t *bm, int ldb, float beta, float *c,
               int ldc)
{
  if (!tdm_cuda_begin(b))
    return;
  if (!tdm_backend_check_gemm(b, trans_a, trans_b, m, n, k, lda, ldb, ldc))
    return;
  if (m == 0 || n == 0)
    return;
  cublas_gemm(b, trans_a, trans_b, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc, CUDA_R_16BF,
              sizeof(uint16_t), CUDA_R_32F, CUBLAS_COMPUTE_32F);
}

static void
cuda_gemm_bf16_out(TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                   const uint16_t *a, int lda, const uint16_t *bm, int ldb, uint16_t *c, int ldc)
{
  if (!tdm_cuda_begin(b))
    return;
  if (!tdm_backend_check_gemm(b, trans_a, trans_b, m, n, k, lda, ldb, ldc))
    return;
  if (m == 0 || n == 0)
    return;
  cublas_gemm(b, trans_a, trans_b, m, n, k, 1.0f, a, lda, bm, ldb, 0.0f, c, ldc, CUDA_R_16BF,
              sizeof(uint16_t), CUDA_R_16BF, CUBLAS_COMPUTE_32F);
}

static void
cuda_col2im_bf16(TdmBackend *b, float *dx, const uint16_t *col, int n, int h, int w, int c,
                 int kh, int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b) ||
      !tdm_backend_check_conv(b, "col2im_bf16", n, h, w, c, kh, kw, pad, stride))
    return;
  TDM_CUDA_OK(b, tdm_k_col2im_bf16(dx, col, n, h, w, c, kh, kw, pad, stride, CUDA_B(b)->stream));
}

/* Without columns where conv-implicit.cu is on (TDM_CUDA_IMPLICIT=1) and takes the
 * shape (stride 1, channels in 32s, sm_80+, aligned), else through them. */
static void
cuda_conv_dgrad_bf16(TdmBackend *b, float *dx, const uint16_t *dy, const uint16_t *w,
                     uint16_t *col, int n, int h, int w_, int c, int out_c, int kh, int kw,
                     int pad, int stride)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (!tdm_cuda_begin(b) ||
      !tdm_backend_check_conv(b, "conv_dgrad_bf16", n, h, w_, c, kh, kw, pad, stride))
    return;
  if (out_c < 1) {
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, "conv_dgrad_bf16: %d output channels", out_c);
    return;
  }
  if (tdm_k_conv_dgrad_bf16_fits(cb->implicit_major, c, out_c, kh, kw, pad, stride) &&
      ((uintptr_t)dx & 15u) == 0 && ((uintptr_t)dy & 15u) == 0 && ((uintptr_t)w & 15u) == 0) {
    TDM_CUDA_OK(b, tdm_k_conv_dgrad_bf16(dx, dy, w, n, h, w_, c, out_c, kh, kw, pad,
                                         cb->stream));
    return;
  }
  int oh = (h + 2 * pad - kh) / stride + 1, ow = (w_ + 2 * pad - kw) / stride + 1;
  int rows = n * oh * ow, k = kh * kw * c;
  cuda_gemm_bf16_out(b, false, false, rows, k, out_c, dy, out_c, w, k, col, k);
  cuda_col2im_bf16(b, dx, col, n, h, w_, c, kh, kw, pad, stride);
}

static void
cuda_to_bf16(TdmBackend *b, uint16_t *out, const float *in, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_to_bf16(out, in, n, CUDA_B(b)->stream));
}

static void
cuda_im2col_bf16(TdmBackend *b, uint16_t *col, const float *x, int n, int h, int w, int c,
                 int kh, int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b) ||
      !tdm_backend_check_conv(b, "im2col_bf16", n, h, w, c, kh, kw, pad, stride))
    return;
  TDM_CUDA_OK(b, tdm_k_im2col_bf16(col, x, n, h, w, c, kh, kw, pad, stride, CUDA_B(b)->stream));
}

/* Bias and ReLU */

static void
cuda_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
                  int inner, bool relu)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, outer >= 0 && channels >= 0 && inner >= 0,
               "bias_forward: negative size %d×%d×%d", outer, channels, inner);
  TDM_CUDA_OK(b, tdm_k_bias_forward(y, bias, outer, channels, inner, relu, CUDA_B(b)->stream));
}

static void
cuda_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer, int channels,
                   int inner)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, outer >= 0 && channels >= 0 && inner >= 0,
               "bias_backward: negative size %d×%d×%d", outer, channels, inner);
  TDM_CUDA_OK(b, tdm_k_bias_backward(dbias, dy, outer, channels, inner, CUDA_B(b)->partials,
                                     TDM_PARTIALS_FLOATS, CUDA_B(b)->stream));
}

static void
cuda_relu_forward(TdmBackend *b, float *y, const float *x, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_relu_forward(y, x, n, CUDA_B(b)->stream));
}

static void
cuda_relu_backward(TdmBackend *b, float *dx, const float *dy, const float *y, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_relu_backward(dx, dy, y, n, CUDA_B(b)->stream));
}

/* Convolution and pooling */

static void
cuda_im2col(TdmBackend *b, float *col, const float *x, int n, int h, int w, int c, int kh,
            int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b) || !tdm_backend_check_conv(b, "im2col", n, h, w, c, kh, kw, pad, stride))
    return;
  TDM_CUDA_OK(b, tdm_k_im2col(col, x, n, h, w, c, kh, kw, pad, stride, CUDA_B(b)->stream));
}

static void
cuda_col2im(TdmBackend *b, float *dx, const float *col, int n, int h, int w, int c, int kh,
            int kw, int pad, int stride)
{
  if (!tdm_cuda_begin(b) || !tdm_backend_check_conv(b, "col2im", n, h, w, c, kh, kw, pad, stride))
    return;
  TDM_CUDA_OK(b, tdm_k_col2im(dx, col, n, h, w, c, kh, kw, pad, stride, CUDA_B(b)->stream));
}

static void
cuda_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                     const float *bias, bool relu, int n, int h, int w, int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, n >= 0 && h >= 0 && w >= 0 && c >= 0 && k >= 1,
               "maxpool_forward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  CUDA_REQUIRE(b, (guint64)n * h * w * c <= G_MAXINT32,
               "maxpool_forward: %d×%d×%d×%d inputs do not fit int32 indices", n, h, w, c);
  TDM_CUDA_OK(b, tdm_k_maxpool_forward(y, argmax, x, bias, relu, n, h, w, c, k,
                                       CUDA_B(b)->stream));
}

static void
cuda_maxpool_backward(TdmBackend *b, float *dx, float *dbias, const float *dy,
                      const int32_t *argmax, const float *y, int n, int h, int w, int c, int k)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, n >= 0 && h >= 0 && w >= 0 && c >= 0 && k >= 1,
               "maxpool_backward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  CUDA_REQUIRE(b, (guint64)n * h * w * c <= G_MAXINT32,
               "maxpool_backward: %d×%d×%d×%d inputs do not fit int32 indices", n, h, w, c);
  TDM_CUDA_OK(b, tdm_k_maxpool_backward(dx, dbias, dy, argmax, y, n, h, w, c, k,
                                        CUDA_B(b)->partials, TDM_PARTIALS_FLOATS,
                                        CUDA_B(b)->stream));
}

static void
cuda_conv_pool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                       const float *wt, const float *bias, bool relu, int n, int h, int w,
                       int c, int out, int kh, int kw, int pad, int pk)
{
  if (tdm_cuda_begin(b) && tdm_backend_check_conv_pool(b, "conv_pool_forward", n, h, w, c, out, kh, kw, pad, pk))
    TDM_CUDA_OK(b, tdm_k_conv_pool_forward(y, argmax, x, wt, bias, relu, n, h, w, c, out, kh,
                                           kw, pad, pk, CUDA_B(b)->stream));
}

static void
cuda_conv_pool_backward(TdmBackend *b, float *dwt, float *dbias, const float *dy,
                        const int32_t *argmax, const float *y, const float *x, bool relu,
                        int n, int h, int w, int c, int out, int kh, int kw, int pad, int pk)
{
  if (tdm_cuda_begin(b) &&
      tdm_backend_check_conv_pool(b, "conv_pool_backward", n, h, w, c, out, kh, kw, pad, pk))
    TDM_CUDA_OK(b, tdm_k_conv_pool_backward(dwt, dbias, dy, argmax, y, x, relu, n, h, w, c, out,
                                            kh, kw, pad, pk, CUDA_B(b)->partials,
                                            TDM_PARTIALS_FLOATS, CUDA_B(b)->stream));
}

/* Loss, input, optimizers */

static void
cuda_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
                  int classes, float smoothing, float grad_scale, float *dlogits,
                  TdmMetrics *metrics)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, rows >= 0 && classes >= 1, "softmax_xent: bad shape %d×%d", rows, classes);
  CUDA_REQUIRE(b, smoothing >= 0.0f && smoothing <= 1.0f,
               "softmax_xent: label smoothing %g is not in [0, 1]", smoothing);
  /* Labels live on the device and are not checked here: one out of range gives a NaN
   * loss, which the trainer reports as divergence. */
  TDM_CUDA_OK(b, tdm_k_softmax_xent(logits, labels, rows, classes, smoothing, grad_scale,
                                    dlogits, &metrics->loss_sum, CUDA_B(b)->stream));
}

static void
cuda_gather(TdmBackend *b, float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
            const int32_t *indices, int count, int sample_size, float scale)
{
  if (!tdm_cuda_begin(b))
    return;
  CUDA_REQUIRE(b, count >= 0 && sample_size >= 0, "gather: bad shape %d×%d", count,
               sample_size);
  if (count == 0 || sample_size == 0)
    return;
  TDM_CUDA_OK(b, tdm_k_gather(x, y, images, labels, indices, count, sample_size, scale,
                              CUDA_B(b)->stream));
}

static void
cuda_sgd_update(TdmBackend *b, float *p, const float *g, size_t n, float lr,
                float weight_decay)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_sgd_update(p, g, n, lr, weight_decay, CUDA_B(b)->stream));
}

static void
cuda_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity, size_t n,
                     float lr, float momentum, float weight_decay)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_momentum_update(p, g, velocity, n, lr, momentum, weight_decay,
                                         CUDA_B(b)->stream));
}

static void
cuda_adam_update(TdmBackend *b, float *p, const float *g, float *m, float *v, size_t n,
                 float lr_t, float beta1, float beta2, float eps, float weight_decay)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_adam_update(p, g, m, v, n, lr_t, beta1, beta2, eps, weight_decay,
                                     CUDA_B(b)->stream));
}

static void
cuda_add(TdmBackend *b, float *y, const float *x, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_add(y, x, n, CUDA_B(b)->stream));
}

static void
cuda_add_out(TdmBackend *b, float *y, const float *a, const float *x, size_t n, bool relu)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_add_out(y, a, x, n, relu, CUDA_B(b)->stream));
}

static void
cuda_scale(TdmBackend *b, float *y, float alpha, size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_scale(y, alpha, n, CUDA_B(b)->stream));
}

/* Graphs. The replica calls graph_launch(key); when there is no graph yet it calls
 * graph_begin(key), issues the step, graph_end(key), and then graph_launch(key) to
 * run what was captured (capture itself runs nothing). Capture is thread-local, so
 * other replicas' threads may keep allocating and synchronizing meanwhile. */

static gboolean
cuda_graph_begin(TdmBackend *b, int key)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (cb->graphs_disabled || cb->capturing || !tdm_cuda_begin(b))
    return FALSE;
  gpointer old;
  if (g_hash_table_lookup_extended(cb->graphs, GINT_TO_POINTER(key), NULL, &old)) {
    (void)cudaGraphExecDestroy((cudaGraphExec_t)old);
    g_hash_table_remove(cb->graphs, GINT_TO_POINTER(key));
  }
  if (!TDM_CUDA_OK(b, cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeThreadLocal)))
    return FALSE;
  cb->capturing = TRUE;
  return TRUE;
}

static void
cuda_graph_end(TdmBackend *b, int key)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (!cb->capturing) {
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, "graph_end(%d) without graph_begin", key);
    return;
  }
  /* End the capture even after a failure, so the stream is usable (and freeable). */
  cudaGraph_t graph = NULL;
  (void)cudaSetDevice(b->device_index);
  cudaError_t err = cudaStreamEndCapture(cb->stream, &graph);
  cb->capturing = FALSE;
  if (TDM_CUDA_OK(b, err) && !tdm_backend_failed(b)) {
    cudaGraphExec_t exec = NULL;
    if (TDM_CUDA_OK(b, cudaGraphInstantiate(&exec, graph, 0)))
      g_hash_table_insert(cb->graphs, GINT_TO_POINTER(key), exec);
  }
  if (graph != NULL)
    (void)cudaGraphDestroy(graph);
}

static gboolean
cuda_graph_launch(TdmBackend *b, int key)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (cb->capturing || !tdm_cuda_begin(b))
    return FALSE;
  cudaGraphExec_t exec = g_hash_table_lookup(cb->graphs, GINT_TO_POINTER(key));
  if (exec == NULL)
    return FALSE;
  return TDM_CUDA_OK(b, cudaGraphLaunch(exec, cb->stream));
}

/* Life cycle */

static void
cuda_destroy(TdmBackend *b)
{
  TdmBackendCuda *cb = CUDA_B(b);
  (void)cudaSetDevice(b->device_index);
  if (cb->capturing) {
    cudaGraph_t graph = NULL;
    if (cudaStreamEndCapture(cb->stream, &graph) == cudaSuccess && graph != NULL)
      (void)cudaGraphDestroy(graph);
    cb->capturing = FALSE;
  }
  if (cb->stream != NULL)
    (void)cudaStreamSynchronize(cb->stream);
  if (cb->graphs != NULL) {
    destroy_graphs(cb);
    g_hash_table_destroy(cb->graphs);
    cb->graphs = NULL;
  }
  for (int i = 0; i < TDM_UPLOAD_SLOTS; i++) {
    if (cb->ring[i].done != NULL)
      (void)cudaEventDestroy(cb->ring[i].done);
    if (cb->ring[i].host != NULL)
      (void)cudaFreeHost(cb->ring[i].host);
  }
  if (cb->cublas != NULL)
    (void)cublasDestroy(cb->cublas);
  if (cb->blocks != NULL) {
    tdm_backend_release(b, cb->cublas_workspace);
    tdm_backend_release(b, cb->partials);
    tdm_backend_release(b, cb->split_parts);
    if (b->bytes_in_use != 0)
      g_warning("%s: backend destroyed with %zu bytes still allocated", b->name,
                b->bytes_in_use);
    /* Free what the caller leaked anyway: the GPU outlives this backend. */
    GHashTableIter iter;
    gpointer ptr;
    g_hash_table_iter_init(&iter, cb->blocks);
    while (g_hash_table_iter_next(&iter, &ptr, NULL))
      (void)cudaFree(ptr);
    g_hash_table_destroy(cb->blocks);
  }
  if (cb->stream != NULL)
    (void)cudaStreamDestroy(cb->stream);
  (void)cudaGetLastError();
  g_free(cb->gpu_name);
  g_free(b->name);
  g_clear_error(&b->error);
  g_mutex_clear(&b->error_lock);
  g_mutex_clear(&cb->lock);
  g_free(cb);
}

static const TdmBackendOps tdm_backend_cuda_ops = {
  .alloc = cuda_alloc,
  .free = cuda_free,
  .upload = cuda_upload,
  .download = cuda_download,
  .copy = cuda_copy,
  .zero = cuda_zero,
  .synchronize = cuda_synchronize,
  .gemm = cuda_gemm,
  .bias_forward = cuda_bias_forward,
  .bias_backward = cuda_bias_backward,
  .relu_forward = cuda_relu_forward,
  .relu_backward = cuda_relu_backward,
  .im2col = cuda_im2col,
  .col2im = cuda_col2im,
  .maxpool_forward = cuda_maxpool_forward,
  .maxpool_forward_bn = tdm_cuda_maxpool_forward_bn,
  .maxpool_backward = cuda_maxpool_backward,
  .conv_pool_forward = cuda_conv_pool_forward,
  .conv_pool_backward = cuda_conv_pool_backward,
  .softmax_xent = cuda_softmax_xent,
  .gather = cuda_gather,
  .gather_augment = tdm_cuda_gather_augment,
  .bn_moments = tdm_cuda_bn_moments,
  .bn_stats = tdm_cuda_bn_stats,
  .bn_forward = tdm_cuda_bn_forward,
  .bn_forward_eval = tdm_cuda_bn_forward_eval,
  .bn_backward_sums = tdm_cuda_bn_backward_sums,
  .bn_backward_dx = tdm_cuda_bn_backward_dx,
  .bn_backward_dx_bf16 = tdm_cuda_bn_backward_dx_bf16,
  .maxpool2d_forward = tdm_cuda_maxpool2d_forward,
  .maxpool2d_backward = tdm_cuda_maxpool2d_backward,
  .avgpool2d_forward = tdm_cuda_avgpool2d_forward,
  .avgpool2d_backward = tdm_cuda_avgpool2d_backward,
  .channel_affine = tdm_cuda_channel_affine,
  .avgpool_forward = tdm_cuda_avgpool_forward,
  .avgpool_backward = tdm_cuda_avgpool_backward,
  .global_avgpool_forward = tdm_cuda_global_avgpool_forward,
  .global_avgpool_backward = tdm_cuda_global_avgpool_backward,
  .global_maxpool_forward = tdm_cuda_global_maxpool_forward,
  .global_maxpool_backward = tdm_cuda_global_maxpool_backward,
  .dropout_forward = tdm_cuda_dropout_forward,
  .dropout_backward = tdm_cuda_dropout_backward,
  .sgd_momentum_update = tdm_cuda_sgd_momentum_update,
  .weight_decay = tdm_cuda_weight_decay,
  .sgd_update = cuda_sgd_update,
  .momentum_update = cuda_momentum_update,
  .adam_update = cuda_adam_update,
  .add = cuda_add,
  .add_out = cuda_add_out,
  .scale = cuda_scale,
  .to_bf16 = cuda_to_bf16,
  .im2col_bf16 = cuda_im2col_bf16,
  .im2col_bf16_bn = tdm_cuda_im2col_bf16_bn,
  .gemm_bf16 = cuda_gemm_bf16,
  .gemm_bf16_out = cuda_gemm_bf16_out,
  .col2im_bf16 = cuda_col2im_bf16,
  .conv_dgrad_bf16 = cuda_conv_dgrad_bf16,
  .graph_begin = cuda_graph_begin,
  .graph_end = cuda_graph_end,
  .graph_launch = cuda_graph_launch,
  .destroy = cuda_destroy,
};

static gpointer
probe_gpus(gpointer data)
{
  int count = 0;
  /* No driver or no GPU is an ordinary answer here, not an error to print. */
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  return GINT_TO_POINTER(count + 1);
}

static int
gpu_count(void)
{
  static GOnce once = G_ONCE_INIT;
  return GPOINTER_TO_INT(g_once(&once, probe_gpus, NULL)) - 1;
}

gboolean
tdm_backend_cuda_available(void)
{
  return gpu_count() > 0;
}

TdmBackend *
tdm_backend_cuda_new(int ordinal, TdmPrecision precision, GError **error)
{
  int count = gpu_count();
  if (ordinal < 0 || ordinal >= count) {
    if (count == 0)
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  "device “cuda:%d”: no CUDA GPU is available (no GPU or no driver)", ordinal);
    else
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  "device “cuda:%d”: no such GPU; this machine has %d (cuda:0 to cuda:%d)",
                  ordinal, count, count - 1);
    return NULL;
  }

  TdmBackendCuda *cb = g_new0(TdmBackendCuda, 1);
  TdmBackend *b = &cb->base;
  b->ops = &tdm_backend_cuda_ops;
  b->kind = TDM_BACKEND_CUDA;
  b->device_index = ordinal;
  b->name = g_strdup_printf("cuda:%d", ordinal);
  b->precision = precision;
  g_mutex_init(&b->error_lock);
  g_mutex_init(&cb->lock);
  cb->blocks = g_hash_table_new(g_direct_hash, g_direct_equal);
  cb->graphs = g_hash_table_new(g_direct_hash, g_direct_equal);
  const char *graphs = g_getenv("TDM_CUDA_GRAPHS");
  cb->graphs_disabled = graphs != NULL && g_str_equal(graphs, "0");
  /* For benchmarks (bench/bench-cnn-ops): TDM_CUDA_SPLIT_K=0 turns split-K GEMMs off,
   * N forces N chunks wherever they apply; TDM_CUDA_SMALL_GEMM=0 leaves tiny products
   * to cuBLAS. */
  const char *split = g_getenv("TDM_CUDA_SPLIT_K");
  cb->split_k = split != NULL ? (int)CLAMP(g_ascii_strtoll(split, NULL, 10), 0, 4096) : -1;
  const char *small = g_getenv("TDM_CUDA_SMALL_GEMM");
  cb->small_gemm = small == NULL || !g_str_equal(small, "0");

  struct cudaDeviceProp prop;
  memset(&prop, 0, sizeof prop);
  gboolean ok = TDM_CUDA_OK(b, cudaSetDevice(ordinal)) &&
                TDM_CUDA_OK(b, cudaGetDeviceProperties(&prop, ordinal));
  cb->gpu_name = g_strdup(ok ? prop.name : "unknown GPU");
  cb->sm_count = ok ? MAX(prop.multiProcessorCount, 1) : 1;
  ok = ok && TDM_CUDA_OK(b, cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking));
  for (int i = 0; ok && i < TDM_UPLOAD_SLOTS; i++)
    ok = TDM_CUDA_OK(b, cudaEventCreateWithFlags(&cb->ring[i].done, cudaEventDisableTiming));
  ok = ok && CUBLAS_OK(b, cublasCreate(&cb->cublas)) &&
       CUBLAS_OK(b, cublasSetStream(cb->cublas, cb->stream));

  /* TF32 only where asked and the GPU has it (Ampere and later); otherwise cuBLAS's
   * default math, which for float32 GEMMs is full float32. */
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  if (ok && precision == TDM_PRECISION_TF32 && prop.major >= 8)
    math = CUBLAS_TF32_TENSOR_OP_MATH;
  ok = ok && CUBLAS_OK(b, cublasSetMathMode(cb->cublas, math));
  /* TDM_CUDA_IMPLICIT=1 computes stride-1 convolutions' bf16 input gradients with
   * conv-implicit.cu instead of through columns. Off by default: on the H200 it is
   * correct but not yet faster (168.0 k against 168.9 k samples/s for the resnet
   * preset, bench/NOTES.md, h10g). */
  const char *implicit = g_getenv("TDM_CUDA_IMPLICIT");
  cb->implicit_major = implicit != NULL && g_str_equal(implicit, "1") ? prop.major : 0;

  size_t workspace = cublas_workspace_bytes(prop.major);
  GError *local = NULL;
  if (ok) {
    cb->cublas_workspace = cuda_alloc(b, workspace, &local);
    cb->partials = cb->cublas_workspace != NULL
                       ? cuda_alloc(b, TDM_PARTIALS_FLOATS * sizeof(float), &local)
                       : NULL;
    cb->split_parts = cb->partials != NULL
                          ? cuda_alloc(b, TDM_SPLIT_K_FLOATS * sizeof(float), &local)
                          : NULL;
    ok = cb->split_parts != NULL;
  }
  ok = ok && CUBLAS_OK(b, cublasSetWorkspace(cb->cublas, cb->cublas_workspace, workspace));

  if (!ok) {
    if (local != NULL)
      g_propagate_error(error, local);
    else if (b->error != NULL)
      g_propagate_error(error, g_error_copy(b->error));
    cuda_destroy(b);
    return NULL;
  }
  return b;
}

/* Helpers for the GPU communicators */

gboolean
tdm_cuda_timer_init(TdmCudaTimer *t, GError **error)
{
  memset(t, 0, sizeof *t);
  for (int i = 0; i < TDM_CUDA_TIMER_PAIRS; i++) {
    if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, "timer",
                      cudaEventCreate(&t->start[i])) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, "timer",
                      cudaEventCreate(&t->end[i])))
      return FALSE;
  }
  return TRUE;
}

void
tdm_cuda_timer_clear(TdmCudaTimer *t)
{
  for (int i = 0; i < TDM_CUDA_TIMER_PAIRS; i++) {
    if (t->start[i] != NULL)
      (void)cudaEventDestroy(t->start[i]);
    if (t->end[i] != NULL)
      (void)cudaEventDestroy(t->end[i]);
  }
  memset(t, 0, sizeof *t);
}

double
tdm_cuda_timer_harvest(TdmCudaTimer *t)
{
  double seconds = 0.0;
  while (t->start[0] != NULL && t->tail < t->head) {
    int i = (int)(t->tail % TDM_CUDA_TIMER_PAIRS);
    cudaError_t err = cudaEventQuery(t->end[i]);
    /* Not ready is an answer, not a failure; clear it (and anything a failed
     * elapsed-time read left) so no later launch check reports it. */
    (void)cudaGetLastError();
    if (err == cudaErrorNotReady)
      break;
    float ms = 0.0f;
    if (err == cudaSuccess && cudaEventElapsedTime(&ms, t->start[i], t->end[i]) == cudaSuccess)
      seconds += ms / 1e3;
    (void)cudaGetLastError();
    t->tail++;
  }
  return seconds;
}

void
tdm_cuda_timer_begin(TdmCudaTimer *t, cudaStream_t stream)
{
  if (t->start[0] == NULL || t->open)
    return;
  if (t->head - t->tail == TDM_CUDA_TIMER_PAIRS)
    return; /* all pairs in flight: skip this one rather than block a collective */
  int i = (int)(t->head % TDM_CUDA_TIMER_PAIRS);
  if (cudaEventRecord(t->start[i], stream) == cudaSuccess)
    t->open = TRUE;
}

void
tdm_cuda_timer_end(TdmCudaTimer *t, cudaStream_t stream)
{
  if (!t->open)
    return;
  int i = (int)(t->head % TDM_CUDA_TIMER_PAIRS);
  t->open = FALSE;
  if (cudaEventRecord(t->end[i], stream) == cudaSuccess)
    t->head++;
}

void
tdm_host_sum_init(TdmHostSum *s, int parties)
{
  tdm_barrier_init(&s->barrier, parties);
  s->parties = parties;
  s->slots = g_new0(double, (size_t)parties * TDM_HOST_SUM_MAX);
}

void
tdm_host_sum_clear(TdmHostSum *s)
{
  tdm_barrier_clear(&s->barrier);
  g_free(s->slots);
  s->slots = NULL;
}

gboolean
tdm_host_sum(TdmHostSum *s, int party, double *values, int n, GError **error)
{
  if (n < 0 || n > TDM_HOST_SUM_MAX) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
                "sum_doubles: %d values, at most %d", n, TDM_HOST_SUM_MAX);
    tdm_barrier_break(&s->barrier);
    return FALSE;
  }
  memcpy(s->slots + (size_t)party * TDM_HOST_SUM_MAX, values, (size_t)n * sizeof(double));
  if (!tdm_barrier_wait(&s->barrier))
    goto broken;
  for (int j = 0; j < n; j++) {
    double total = 0.0;
    for (int k = 0; k < s->parties; k++)
      total += s->slots[(size_t)k * TDM_HOST_SUM_MAX + j];
    values[j] = total;
  }
  /* Nobody overwrites a slot with the next sum's values until all have read. */
  if (!tdm_barrier_wait(&s->barrier))
    goto broken;
  return TRUE;

broken:
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
              "sum_doubles: another replica failed or the run was stopped");
  return FALSE;
}
