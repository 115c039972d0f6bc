/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-communicator-peer.c — the GPU communicator without NCCL: device copies and the
 * add kernel, for replicas that share a GPU or builds without NCCL.
 *
 * Every replica's thread calls each collective in the same order. A call records a
 * "ready" event on the replica's compute stream and meets the others at a barrier;
 * then each replica enqueues its share of the work on a communication stream of its
 * own, after waiting for every replica's ready event, records a "done" event there
 * and meets the others again. wait() makes the compute stream wait for every
 * replica's done event, since the others read and write this replica's buffer too.
 * An all-reduce is a reduce-scatter (replica r sums chunk r of every buffer into its
 * own) followed by an all-gather (r copies its summed chunk into every other buffer).
 * Kernels read a buffer on another GPU directly where peer access is on (or the GPU
 * is the same); otherwise the data goes through a staging buffer on the reader's GPU.
 * Not a fast multi-GPU path: that is tdm-communicator-nccl.c.
 */
#include "tdm-communicator.h"
#include "tdm-int-sum.h"
#include "tdm-i18n.h"
#include "tdm-backend-cuda.h"
#include "tdm-error.h"
#include "tdm-kernels.h"

#include <cuda_runtime.h>

/* Staging per replica, used only for pairs of GPUs without peer access. */
#define TDM_PEER_STAGING_FLOATS ((size_t)1 << 20)

typedef struct {
  TdmCommunicator base;
  TdmBarrier barrier;
  TdmHostSum sum;
  TdmIntSum ints;
  gint aborted;
  cudaStream_t *streams;       /* [replicas]: communication, on the replica's GPU */
  cudaEvent_t *ready;          /* [replicas]: on the compute stream, at each call */
  cudaEvent_t *done;           /* [replicas]: on the communication stream, after work */
  gboolean *direct;            /* [r · replicas + q]: r's kernels can read q's memory */
  float **staging;             /* [replicas]: NULL where every peer is direct */
  float **buffers;             /* [replicas]: registered for the current collective */
} PeerCommunicator;

#define PEER(c) ((PeerCommunicator *)(c))

static int
ordinal_of(TdmCommunicator *c, int r)
{
  return c->backends[r]->device_index;
}

static gboolean
fail_broken(PeerCommunicator *p, GError **error)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
              _("peer communicator: another replica failed or the run was stopped"));
  return FALSE;
}

/* The first half of every collective: ready event, registration, barrier, and the
 * communication stream's waits on every replica's ready event. */
static gboolean
enter(PeerCommunicator *p, int r, float *buffer, GError **error)
{
  TdmCommunicator *c = &p->base;
  TdmBackend *b = c->backends[r];
  if (g_atomic_int_get(&p->aborted)) {
    tdm_barrier_break(&p->barrier);
    return fail_broken(p, error);
  }
  if (tdm_backend_failed(b)) {
    tdm_barrier_break(&p->barrier);
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
                _("peer communicator: replica %d (%s) has failed"), r, b->name);
    return FALSE;
  }
  p->buffers[r] = buffer;
  if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                    cudaSetDevice(ordinal_of(c, r))) ||
      !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                    cudaEventRecord(p->ready[r], tdm_backend_cuda_stream(b)))) {
    tdm_barrier_break(&p->barrier);
    return FALSE;
  }
  if (!tdm_barrier_wait(&p->barrier))
    return fail_broken(p, error);
  for (int q = 0; q < c->replicas; q++)
    if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                      cudaStreamWaitEvent(p->streams[r], p->ready[q], 0))) {
      tdm_barrier_break(&p->barrier);
      return FALSE;
    }
  return TRUE;
}

/* The second half: done event, then the barrier that lets every wait() see it. */
static gboolean
leave(PeerCommunicator *p, int r, gboolean ok, GError **error)
{
  TdmCommunicator *c = &p->base;
  if (ok)
    ok = TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, c->backends[r]->name,
                      cudaEventRecord(p->done[r], p->streams[r]));
  if (!ok) {
    tdm_barrier_break(&p->barrier);
    return FALSE;
  }
  if (!tdm_barrier_wait(&p->barrier))
    return fail_broken(p, error);
  return TRUE;
}

/* dst[0, n) += src[0, n), src on replica q, on r's communication stream. */
static gboolean
add_from(PeerCommunicator *p, int r, int q, float *dst, const float *src, size_t n,
         GError **error)
{
  TdmCommunicator *c = &p->base;
  const char *who = c->backends[r]->name;
  cudaStream_t s = p->streams[r];
  if (p->direct[r * c->replicas + q])
    return TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who, tdm_k_add(dst, src, n, s));
  for (size_t done = 0; done < n; done += TDM_PEER_STAGING_FLOATS) {
    size_t piece = MIN(TDM_PEER_STAGING_FLOATS, n - done);
    /* The staging buffer is reused piece after piece: the stream orders each copy
     * after the add that read the previous piece. */
    if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaMemcpyPeerAsync(p->staging[r], ordinal_of(c, r), src + done,
                                          ordinal_of(c, q), piece * sizeof(float), s)) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      tdm_k_add(dst + done, p->staging[r], piece, s)))
      return FALSE;
  }
  return TRUE;
}

static gboolean
copy_to(PeerCommunicator *p, int r, int q, float *dst, const float *src, size_t n,
        GError **error)
{
  /* Enqueued on r's stream whichever way it goes: r reads its own summed chunk. */
  TdmCommunicator *c = &p->base;
  if (n == 0)
    return TRUE;
  return TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, c->backends[r]->name,
                      cudaMemcpyPeerAsync(dst, ordinal_of(c, q), src, ordinal_of(c, r),
                                          n * sizeof(float), p->streams[r]));
}

static void
chunk_of(size_t count, int parts, int index, size_t *begin, size_t *end)
{
  /* 64-float (256-byte) aligned chunks keep the add kernel on its float4 path. */
  size_t per = (count + parts - 1) / parts;
  per = (per + 63) & ~(size_t)63;
  *begin = MIN(count, per * (size_t)index);
  *end = MIN(count, *begin + per);
}

static gboolean
peer_allreduce(TdmCommunicator *c, int replica, float *buffer, size_t offset, size_t count,
               GError **error)
{
  PeerCommunicator *p = PEER(c);
  if (!enter(p, replica, buffer, error))
    return FALSE;
  size_t begin, end;
  chunk_of(count, c->replicas, replica, &begin, &end);
  float *mine = buffer + offset + begin;
  gboolean ok = TRUE;
  for (int q = 0; ok && q < c->replicas; q++)
    if (q != replica)
      ok = add_from(p, replica, q, mine, p->buffers[q] + offset + begin, end - begin, error);
  for (int q = 0; ok && q < c->replicas; q++)
    if (q != replica)
      ok = copy_to(p, replica, q, p->buffers[q] + offset + begin, mine, end - begin, error);
  return leave(p, replica, ok, error);
}

static gboolean
peer_reduce(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
            GError **error)
{
  PeerCommunicator *p = PEER(c);
  g_return_val_if_fail(root >= 0 && root < c->replicas, FALSE);
  if (!enter(p, replica, buffer, error))
    return FALSE;
  gboolean ok = TRUE;
  if (replica == root)
    for (int q = 0; ok && q < c->replicas; q++)
      if (q != root)
        ok = add_from(p, root, q, buffer, p->buffers[q], count, error);
  return leave(p, replica, ok, error);
}

static gboolean
peer_broadcast(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
               GError **error)
{
  PeerCommunicator *p = PEER(c);
  g_return_val_if_fail(root >= 0 && root < c->replicas, FALSE);
  if (!enter(p, replica, buffer, error))
    return FALSE;
  gboolean ok = TRUE;
  /* Each replica pulls root's buffer into its own, on its own stream. */
  if (replica != root && count > 0 && buffer != p->buffers[root])
    ok = TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, c->backends[replica]->name,
                      cudaMemcpyPeerAsync(buffer, ordinal_of(c, replica), p->buffers[root],
                                          ordinal_of(c, root), count * sizeof(float),
                                          p->streams[replica]));
  return leave(p, replica, ok, error);
}

static gboolean
peer_wait(TdmCommunicator *c, int replica, GError **error)
{
  PeerCommunicator *p = PEER(c);
  TdmBackend *b = c->backends[replica];
  if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                    cudaSetDevice(ordinal_of(c, replica))))
    return FALSE;
  /* Every done event: other replicas' streams read and write this buffer as well. A
   * later record than the one meant only waits longer, never less. */
  for (int q = 0; q < c->replicas; q++)
    if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                      cudaStreamWaitEvent(tdm_backend_cuda_stream(b), p->done[q], 0)))
      return FALSE;
  return TRUE;
}

static gboolean
peer_sum_doubles(TdmCommunicator *c, int replica, double *values, int n, GError **error)
{
  return tdm_host_sum(&PEER(c)->sum, replica, values, n, error);
}

static gboolean
peer_sum_int64(TdmCommunicator *c, int replica, gint64 *values, size_t n, GError **error)
{
  return tdm_int_sum(&PEER(c)->ints, replica, values, n, error);
}

static void
peer_abort(TdmCommunicator *c)
{
  PeerCommunicator *p = PEER(c);
  g_atomic_int_set(&p->aborted, 1);
  tdm_barrier_break(&p->barrier);
  tdm_barrier_break(&p->sum.barrier);
  tdm_int_sum_break(&p->ints);
}

static void
peer_destroy(TdmCommunicator *c)
{
  PeerCommunicator *p = PEER(c);
  for (int r = 0; r < c->replicas; r++) {
    if (cudaSetDevice(ordinal_of(c, r)) != cudaSuccess)
      continue;
    if (p->streams[r] != NULL) {
      (void)cudaStreamSynchronize(p->streams[r]);
      (void)cudaStreamDestroy(p->streams[r]);
    }
    if (p->ready[r] != NULL)
      (void)cudaEventDestroy(p->ready[r]);
    if (p->done[r] != NULL)
      (void)cudaEventDestroy(p->done[r]);
    tdm_backend_release(c->backends[r], p->staging[r]);
  }
  (void)cudaGetLastError();
  tdm_barrier_clear(&p->barrier);
  tdm_host_sum_clear(&p->sum);
  tdm_int_sum_clear(&p->ints);
  g_free(p->streams);
  g_free(p->ready);
  g_free(p->done);
  g_free(p->direct);
  g_free(p->staging);
  g_free(p->buffers);
  g_free(c->bytes_sent);
  g_free(c->bytes_received);
  g_free(p);
}

static const TdmCommunicatorOps peer_ops = {
  .allreduce = peer_allreduce,
  .reduce = peer_reduce,
  .broadcast = peer_broadcast,
  .wait = peer_wait,
  .sum_doubles = peer_sum_doubles,
  .sum_int64 = peer_sum_int64,
  .abort = peer_abort,
  .destroy = peer_destroy,
};

/* Peer access lets r's kernels read q's memory over NVLink or PCIe; where the
 * hardware cannot, the staging path is used. TDM_PEER_STAGING=1 forces staging
 * everywhere (tests use it to cover that path on one GPU). */
static gboolean
setup_access(PeerCommunicator *p, int r, GError **error)
{
  TdmCommunicator *c = &p->base;
  int n = c->replicas;
  int me = ordinal_of(c, r);
  gboolean force_staging = g_strcmp0(g_getenv("TDM_PEER_STAGING"), "1") == 0;
  gboolean need_staging = FALSE;
  for (int q = 0; q < n; q++) {
    int other = ordinal_of(c, q);
    gboolean direct = other == me;
    if (!direct) {
      int can = 0;
      if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, c->backends[r]->name,
                        cudaDeviceCanAccessPeer(&can, me, other)))
        return FALSE;
      if (can) {
        cudaError_t err = cudaDeviceEnablePeerAccess(other, 0);
        if (err == cudaErrorPeerAccessAlreadyEnabled) {
          (void)cudaGetLastError();
          err = cudaSuccess;
        }
        if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, c->backends[r]->name, err))
          return FALSE;
        direct = TRUE;
      }
    }
    if (force_staging && q != r)
      direct = FALSE;
    p->direct[r * n + q] = direct;
    need_staging |= !direct;
  }
  if (need_staging) {
    p->staging[r] = tdm_backend_alloc(c->backends[r], TDM_PEER_STAGING_FLOATS * sizeof(float),
                                      error);
    if (p->staging[r] == NULL)
      return FALSE;
  }
  return TRUE;
}

int
tdm_communicator_peer_waiting(TdmCommunicator *c)
{
  g_return_val_if_fail(c != NULL && c->ops == &peer_ops, 0);
  return tdm_barrier_waiting(&PEER(c)->barrier);
}

TdmCommunicator *
tdm_communicator_peer_new(TdmBackend **backends, int replicas, GError **error)
{
  g_return_val_if_fail(backends != NULL && replicas >= 1, NULL);
  for (int r = 0; r < replicas; r++)
    if (backends[r]->kind != TDM_BACKEND_CUDA) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  _("peer communicator: replica %d is on %s, not a CUDA GPU"), r,
                  backends[r]->name);
      return NULL;
    }

  PeerCommunicator *p = g_new0(PeerCommunicator, 1);
  TdmCommunicator *c = &p->base;
  c->ops = &peer_ops;
  c->kind = "peer";
  c->star = TRUE;
  c->replicas = replicas;
  c->backends = backends;
  c->world_size = replicas;
  c->first_rank = 0;
  c->bytes_sent = g_new0(guint64, replicas);
  c->bytes_received = g_new0(guint64, replicas);
  tdm_barrier_init(&p->barrier, replicas);
  tdm_host_sum_init(&p->sum, replicas);
  tdm_int_sum_init(&p->ints, replicas);
  p->streams = g_new0(cudaStream_t, replicas);
  p->ready = g_new0(cudaEvent_t, replicas);
  p->done = g_new0(cudaEvent_t, replicas);
  p->direct = g_new0(gboolean, (size_t)replicas * replicas);
  p->staging = g_new0(float *, replicas);
  p->buffers = g_new0(float *, replicas);

  for (int r = 0; r < replicas; r++) {
    const char *who = backends[r]->name;
    int lowest = 0, highest = 0;
    /* Communication first: a high-priority stream gets SMs ahead of backward's
     * kernels, so buckets move while the rest of backward runs. */
    if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaSetDevice(ordinal_of(c, r))) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaDeviceGetStreamPriorityRange(&lowest, &highest)) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaStreamCreateWithPriority(&p->streams[r], cudaStreamNonBlocking,
                                                   highest)) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaEventCreateWithFlags(&p->ready[r], cudaEventDisableTiming)) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaEventCreateWithFlags(&p->done[r], cudaEventDisableTiming)) ||
        !setup_access(p, r, error)) {
      peer_destroy(c);
      return NULL;
    }
    /* A done event that was never recorded counts as complete, so wait() before the
     * first collective is harmless. */
  }
  return c;
}
