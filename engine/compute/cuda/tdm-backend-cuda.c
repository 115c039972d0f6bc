/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda.c — the CUDA backend: one GPU as the engine computes on it, with
 * cuBLAS for the GEMMs and kernels/ for everything else, all on one non-blocking
 * stream of its own (so several backends, one per replica, can share a GPU).
 *
 * It also captures a replica's step into a CUDA graph and replays it, counts every
 * byte it allocates, and turns each CUDA or cuBLAS failure into the backend's sticky
 * error with file and line: it never exits. The operations themselves are in
 * tdm-backend-cuda-gemm.c, -ops.c and -layers.c. Not the communicators (they only borrow
 * the stream, through tdm-backend-cuda.h) and not device discovery (tdm-device.c).
 */
#include "tdm-backend-cuda-private.h"
#include "tdm-backend-cuda-conv-engine.h"
#include "tdm-i18n.h"

#include <string.h>

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
  tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("%s failed: %s (%s) at %s:%d"),
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
  g_set_error(error, TDM_ENGINE_ERROR, code, _("%s: %s failed: %s (%s) at %s:%d"), who,
              call_name(call, name, sizeof name), cudaGetErrorString(err),
              cudaGetErrorName(err), file, line);
  return FALSE;
}

/* "cb->blas->sgemm(…)" → "sgemm(…)": the table's field names cuBLAS's function. */
static const char *
cublas_function(const char *call)
{
  const char *arrow = g_strrstr(call, "->");
  return arrow != NULL ? arrow + 2 : call;
}

gboolean
tdm_cublas_ok_at(TdmBackend *b, cublasStatus_t status, const char *call, const char *file,
                 int line)
{
  if (G_LIKELY(status == CUBLAS_STATUS_SUCCESS))
    return TRUE;
  char name[64];
  tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("cuBLAS %s failed: %s (%s) at %s:%d"),
                   call_name(cublas_function(call), name, sizeof name),
                   CUDA_B(b)->blas->get_status_string(status),
                   CUDA_B(b)->blas->get_status_name(status), file, line);
  return FALSE;
}

/* Every operation starts here: the backend's GPU made current, since a replica's
 * thread may have used another. */
gboolean
tdm_cuda_begin(TdmBackend *b)
{
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

unsigned *
tdm_backend_cuda_sum_counters(TdmBackend *b, size_t *count)
{
  *count = TDM_BN_COUNTERS;
  return (unsigned *)(CUDA_B(b)->partials + TDM_PARTIALS_FLOATS);
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
  return cublas_workspace_bytes(major) +
         (TDM_PARTIALS_FLOATS + TDM_BN_COUNTERS + TDM_SPLIT_K_FLOATS) * sizeof(float);
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

void *
tdm_cuda_alloc(TdmBackend *b, size_t bytes, GError **error)
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
                  _("%s (%s): out of memory: one buffer of %s (%zu bytes) could not be "
                  "allocated, %s free of %s; Tandem holds %zu bytes on this device"),
                  b->name, cb->gpu_name, need, bytes, have, total, b->bytes_in_use);
      g_free(need);
      g_free(have);
      g_free(total);
    } else {
      (void)cudaGetLastError();
      g_set_error(error, TDM_ENGINE_ERROR,
                  err == cudaErrorMemoryAllocation ? TDM_ENGINE_ERROR_OUT_OF_MEMORY
                                                   : TDM_ENGINE_ERROR_BACKEND,
                  _("%s (%s): cannot allocate %zu bytes: %s (%s)"), b->name, cb->gpu_name,
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
  /* The step was run eagerly first, so its convolutions are chosen: their screens' host
   * memory goes back. */
  tdm_cuda_conv_engine_release_host(b);
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
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("graph_end(%d) without graph_begin"), key);
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
  tdm_cuda_conv_engine_free(b);
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
    (void)cb->blas->destroy(cb->cublas);
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
    .alloc = tdm_cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .synchronize = cuda_synchronize,
    .gemm = tdm_cuda_gemm,
    .bias_forward = tdm_cuda_bias_forward,
    .bias_backward = tdm_cuda_bias_backward,
    .relu_forward = tdm_cuda_relu_forward,
    .relu_backward = tdm_cuda_relu_backward,
    .im2col = tdm_cuda_im2col,
    .col2im = tdm_cuda_col2im,
    .maxpool_forward = tdm_cuda_maxpool_forward,
    .maxpool_forward_bn = tdm_cuda_maxpool_forward_bn,
    .maxpool_backward = tdm_cuda_maxpool_backward,
    .conv_pool_forward = tdm_cuda_conv_pool_forward,
    .conv_pool_backward = tdm_cuda_conv_pool_backward,
    .softmax_xent = tdm_cuda_softmax_xent,
    .gather = tdm_cuda_gather,
    .gather_augment = tdm_cuda_gather_augment,
    .gather_photo = tdm_cuda_gather_photo,
    .bn_moments = tdm_cuda_bn_moments,
    .bn_stats = tdm_cuda_bn_stats,
    .bn_moments_stats = tdm_cuda_bn_moments_stats,
    .bn_forward = tdm_cuda_bn_forward,
    .bn_forward_add = tdm_cuda_bn_forward_add,
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
    .sgd_update = tdm_cuda_sgd_update,
    .momentum_update = tdm_cuda_momentum_update,
    .adam_update = tdm_cuda_adam_update,
    .clip_norm = tdm_cuda_clip_norm,
    .deviation = tdm_cuda_deviation,
    .add = tdm_cuda_add,
    .add_out = tdm_cuda_add_out,
    .scale = tdm_cuda_scale,
    .exact_add = tdm_cuda_exact_add,
    .stem_bn_takes = tdm_cuda_stem_bn_takes,
    .stem_bn_sums = tdm_cuda_stem_bn_sums,
    .stem_bn_dx_wgrad = tdm_cuda_stem_bn_dx_wgrad,
    .to_bf16 = tdm_cuda_to_bf16,
    .from_bf16 = tdm_cuda_from_bf16,
    .relu_backward_bf16 = tdm_cuda_relu_backward_bf16,
    .add_out_bf16 = tdm_cuda_add_out_bf16,
    .add_strided_bf16 = tdm_cuda_add_strided_bf16,
    .add_relu_backward_bf16 = tdm_cuda_add_relu_backward_bf16,
    .add_relu_backward_bn_sums_bf16 = tdm_cuda_add_relu_backward_bn_sums_bf16,
    .maxpool_forward_bf16 = tdm_cuda_maxpool_forward_bf16,
    .maxpool2d_forward_bn = tdm_cuda_maxpool2d_forward_bn,
    .maxpool_backward_bf16 = tdm_cuda_maxpool_backward_bf16,
    .bn_forward_bf16 = tdm_cuda_bn_forward_bf16,
    .bn_forward_eval_bf16 = tdm_cuda_bn_forward_eval_bf16,
    .bn_relu_add_bf16 = tdm_cuda_bn_relu_add_bf16,
    .im2col_bf16 = tdm_cuda_im2col_bf16,
    .im2col_bf16_bn = tdm_cuda_im2col_bf16_bn,
    .gemm_bf16 = tdm_cuda_gemm_bf16,
    .gemm_bf16_out = tdm_cuda_gemm_bf16_out,
    .col2im_bf16 = tdm_cuda_col2im_bf16,
    .conv_dgrad_bf16 = tdm_cuda_conv_dgrad_bf16,
    .conv_engine_forward = tdm_cuda_conv_engine_forward,
    .conv_engine_backward = tdm_cuda_conv_engine_backward,
    .conv_choices = tdm_cuda_conv_choices,
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
                  _("device “cuda:%d”: no CUDA GPU is available (no GPU or no driver)"), ordinal);
    else
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  _("device “cuda:%d”: no such GPU; this machine has %d (cuda:0 to cuda:%d)"),
                  ordinal, count, count - 1);
    return NULL;
  }
  /* Loaded here, not linked: processes that never make a CUDA backend skip its cost. */
  const TdmCublas *blas = tdm_cublas_get();
  if (blas == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE, _("device “cuda:%d”: %s"),
                ordinal, tdm_cublas_why_not());
    return NULL;
  }

  TdmBackendCuda *cb = g_new0(TdmBackendCuda, 1);
  TdmBackend *b = &cb->base;
  cb->blas = blas;
  b->ops = &tdm_backend_cuda_ops;
  b->kind = TDM_BACKEND_CUDA;
  b->device_index = ordinal;
  b->name = tdm_device_id_dup_name(TDM_DEVICE_GPU(ordinal));
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
  /* TANDEM_DESCENDING=0 walks the elementwise passes that follow a pass over the same
   * tensor upwards, as before, and a conv over a bn's output its forward chunks first to
   * last: the same bits, for timing the two in one build. */
  const char *descending = g_getenv("TANDEM_DESCENDING");
  cb->descending = descending == NULL || !g_str_equal(descending, "0");

  struct cudaDeviceProp prop;
  memset(&prop, 0, sizeof prop);
  gboolean ok = TDM_CUDA_OK(b, cudaSetDevice(ordinal)) &&
                TDM_CUDA_OK(b, cudaGetDeviceProperties(&prop, ordinal));
  cb->gpu_name = g_strdup(ok ? prop.name : "unknown GPU");
  cb->sm_count = ok ? MAX(prop.multiProcessorCount, 1) : 1;
  cb->major = ok ? prop.major : 0;
  ok = ok && TDM_CUDA_OK(b, cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking));
  for (int i = 0; ok && i < TDM_UPLOAD_SLOTS; i++)
    ok = TDM_CUDA_OK(b, cudaEventCreateWithFlags(&cb->ring[i].done, cudaEventDisableTiming));
  ok = ok && CUBLAS_OK(b, cb->blas->create(&cb->cublas)) &&
       CUBLAS_OK(b, cb->blas->set_stream(cb->cublas, cb->stream));

  /* TF32 only where asked and the GPU has it (Ampere and later); otherwise cuBLAS's
   * default math, which for float32 GEMMs is full float32. */
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  if (ok && precision == TDM_PRECISION_TF32 && prop.major >= 8)
    math = CUBLAS_TF32_TENSOR_OP_MATH;
  ok = ok && CUBLAS_OK(b, cb->blas->set_math_mode(cb->cublas, math));
  /* TDM_CUDA_IMPLICIT=1 computes stride-1 convolutions' bf16 input gradients with
   * conv-implicit.cu instead of through columns. Off by default: on the H200 it is
   * correct but not yet faster (168.0 k against 168.9 k samples/s for the resnet
   * preset, bench/NOTES.md). */
  const char *implicit = g_getenv("TDM_CUDA_IMPLICIT");
  cb->implicit_major = implicit != NULL && g_str_equal(implicit, "1") ? prop.major : 0;

  size_t workspace = cublas_workspace_bytes(prop.major);
  GError *local = NULL;
  if (ok) {
    cb->cublas_workspace = tdm_cuda_alloc(b, workspace, &local);
    cb->partials =
        cb->cublas_workspace != NULL
            ? tdm_cuda_alloc(b, (TDM_PARTIALS_FLOATS + TDM_BN_COUNTERS) * sizeof(float), &local)
            : NULL;
    if (cb->partials != NULL &&
        !TDM_CUDA_OK(b, cudaMemset(cb->partials + TDM_PARTIALS_FLOATS, 0,
                                   TDM_BN_COUNTERS * sizeof(unsigned)))) {
      tdm_backend_release(b, cb->partials);
      cb->partials = NULL;
    }
    cb->split_parts = cb->partials != NULL
                          ? tdm_cuda_alloc(b, TDM_SPLIT_K_FLOATS * sizeof(float), &local)
                          : NULL;
    ok = cb->split_parts != NULL;
  }
  ok = ok && CUBLAS_OK(b, cb->blas->set_workspace(cb->cublas, cb->cublas_workspace, workspace));

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
