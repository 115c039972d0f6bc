/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-communicator-nccl.c — the communicator for one process driving several GPUs:
 * NCCL communicators made with ncclCommInitAll, one replica per GPU.
 *
 * Each collective goes on the replica's communication stream once that stream has
 * waited for an event recorded on the compute stream at the call, so a gradient
 * bucket is all-reduced while backward still computes the next one; wait() makes
 * the compute stream wait for the communication stream. Not for replicas that share a
 * GPU (NCCL refuses duplicate devices: the peer communicator serves them) and not
 * across processes (tdm-communicator-mpi.c).
 */
#include "tdm-communicator.h"
#include "tdm-int-sum.h"
#include "tdm-i18n.h"
#include "tdm-backend-cuda.h"
#include "tdm-error.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <string.h>

typedef struct {
  TdmCommunicator base;
  ncclComm_t *comms;           /* [replicas]: rank r is replica r */
  cudaStream_t *streams;       /* [replicas]: communication */
  cudaEvent_t *ready;          /* [replicas]: on the compute stream, at each call */
  cudaEvent_t *done;           /* [replicas]: on the communication stream */
  TdmHostSum sum;
  TdmIntSum ints;
  /* Collectives hold it for reading while they enqueue; abort takes it for writing,
   * so no comm is freed under a thread that is using it. */
  GRWLock abort_lock;
  gboolean aborted;
} NcclCommunicator;

#define NCCL(c) ((NcclCommunicator *)(c))

static gboolean
nccl_ok_at(GError **error, const char *who, ncclComm_t comm, ncclResult_t res,
           const char *call, const char *file, int line)
{
  if (G_LIKELY(res == ncclSuccess))
    return TRUE;
  const char *detail = comm != NULL ? ncclGetLastError(comm) : NULL;
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
              _("%s: %.*s failed: %s%s%s at %s:%d"), who, (int)strcspn(call, "("), call,
              ncclGetErrorString(res), detail != NULL && *detail ? ": " : "",
              detail != NULL ? detail : "", file, line);
  return FALSE;
}
#define NCCL_OK(error, who, comm, call) \
  nccl_ok_at((error), (who), (comm), (call), #call, __FILE__, __LINE__)

static gboolean
aborted_error(GError **error)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
              _("NCCL communicator: the run was stopped or another replica failed"));
  return FALSE;
}

/* Everything a collective does around its one NCCL call: the device and the ordering
 * after the compute stream. Runs with the abort lock held for reading. */
static gboolean
begin(NcclCommunicator *n, int r, GError **error)
{
  TdmCommunicator *c = &n->base;
  TdmBackend *b = c->backends[r];
  g_rw_lock_reader_lock(&n->abort_lock);
  if (n->aborted) {
    g_rw_lock_reader_unlock(&n->abort_lock);
    return aborted_error(error);
  }
  if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                    cudaSetDevice(b->device_index)) ||
      !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                    cudaEventRecord(n->ready[r], tdm_backend_cuda_stream(b))) ||
      !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                    cudaStreamWaitEvent(n->streams[r], n->ready[r], 0))) {
    g_rw_lock_reader_unlock(&n->abort_lock);
    return FALSE;
  }
  return TRUE;
}

static gboolean
end(NcclCommunicator *n, int r, gboolean ok, GError **error)
{
  TdmCommunicator *c = &n->base;
  if (ok)
    ok = TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, c->backends[r]->name,
                      cudaEventRecord(n->done[r], n->streams[r]));
  g_rw_lock_reader_unlock(&n->abort_lock);
  return ok;
}

static gboolean
nccl_allreduce(TdmCommunicator *c, int replica, float *buffer, size_t offset, size_t count,
               GError **error)
{
  NcclCommunicator *n = NCCL(c);
  if (!begin(n, replica, error))
    return FALSE;
  float *data = buffer + offset;
  gboolean ok = NCCL_OK(error, c->backends[replica]->name, n->comms[replica],
                        ncclAllReduce(data, data, count, ncclFloat, ncclSum,
                                      n->comms[replica], n->streams[replica]));
  return end(n, replica, ok, error);
}

static gboolean
nccl_reduce(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
            GError **error)
{
  NcclCommunicator *n = NCCL(c);
  g_return_val_if_fail(root >= 0 && root < c->replicas, FALSE);
  if (!begin(n, replica, error))
    return FALSE;
  /* In place: root's buffer receives the sum, the others' are only read. */
  gboolean ok = NCCL_OK(error, c->backends[replica]->name, n->comms[replica],
                        ncclReduce(buffer, buffer, count, ncclFloat, ncclSum, root,
                                   n->comms[replica], n->streams[replica]));
  return end(n, replica, ok, error);
}

static gboolean
nccl_broadcast(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
               GError **error)
{
  NcclCommunicator *n = NCCL(c);
  g_return_val_if_fail(root >= 0 && root < c->replicas, FALSE);
  if (!begin(n, replica, error))
    return FALSE;
  gboolean ok = NCCL_OK(error, c->backends[replica]->name, n->comms[replica],
                        ncclBroadcast(buffer, buffer, count, ncclFloat, root,
                                      n->comms[replica], n->streams[replica]));
  return end(n, replica, ok, error);
}

static gboolean
nccl_wait(TdmCommunicator *c, int replica, GError **error)
{
  NcclCommunicator *n = NCCL(c);
  TdmBackend *b = c->backends[replica];
  g_rw_lock_reader_lock(&n->abort_lock);
  gboolean ok = !n->aborted || aborted_error(error);
  if (ok) {
    /* A failure inside NCCL (a peer lost, a bad argument found late) shows here. */
    ncclResult_t async = ncclSuccess;
    ok = NCCL_OK(error, b->name, n->comms[replica],
                 ncclCommGetAsyncError(n->comms[replica], &async)) &&
         NCCL_OK(error, b->name, n->comms[replica], async);
  }
  ok = ok &&
       TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                    cudaSetDevice(b->device_index)) &&
       TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, b->name,
                    cudaStreamWaitEvent(tdm_backend_cuda_stream(b), n->done[replica], 0));
  g_rw_lock_reader_unlock(&n->abort_lock);
  return ok;
}

static gboolean
nccl_sum_doubles(TdmCommunicator *c, int replica, double *values, int count, GError **error)
{
  return tdm_host_sum(&NCCL(c)->sum, replica, values, count, error);
}

/* ncclCommAbort stops kernels that wait for a replica that will never come, so a
 * thread blocked on its stream returns; the comms are gone afterwards. */
static gboolean
nccl_sum_int64(TdmCommunicator *c, int replica, gint64 *values, size_t n, GError **error)
{
  return tdm_int_sum(&NCCL(c)->ints, replica, values, n, error);
}

static void
nccl_abort(TdmCommunicator *c)
{
  NcclCommunicator *n = NCCL(c);
  tdm_barrier_break(&n->sum.barrier);
  tdm_int_sum_break(&n->ints);
  g_rw_lock_writer_lock(&n->abort_lock);
  if (!n->aborted) {
    n->aborted = TRUE;
    for (int r = 0; r < c->replicas; r++)
      if (n->comms[r] != NULL) {
        (void)ncclCommAbort(n->comms[r]);
        n->comms[r] = NULL;
      }
  }
  g_rw_lock_writer_unlock(&n->abort_lock);
}

static void
nccl_destroy(TdmCommunicator *c)
{
  NcclCommunicator *n = NCCL(c);
  for (int r = 0; r < c->replicas; r++) {
    if (cudaSetDevice(c->backends[r]->device_index) != cudaSuccess)
      continue;
    if (n->streams[r] != NULL)
      (void)cudaStreamSynchronize(n->streams[r]);
    if (n->comms[r] != NULL)
      (void)ncclCommDestroy(n->comms[r]);
    if (n->streams[r] != NULL)
      (void)cudaStreamDestroy(n->streams[r]);
    if (n->ready[r] != NULL)
      (void)cudaEventDestroy(n->ready[r]);
    if (n->done[r] != NULL)
      (void)cudaEventDestroy(n->done[r]);
  }
  (void)cudaGetLastError();
  tdm_host_sum_clear(&n->sum);
  tdm_int_sum_clear(&n->ints);
  g_rw_lock_clear(&n->abort_lock);
  g_free(n->comms);
  g_free(n->streams);
  g_free(n->ready);
  g_free(n->done);
  g_free(c->bytes_sent);
  g_free(c->bytes_received);
  g_free(n);
}

static const TdmCommunicatorOps nccl_ops = {
  .allreduce = nccl_allreduce,
  .reduce = nccl_reduce,
  .broadcast = nccl_broadcast,
  .wait = nccl_wait,
  .sum_doubles = nccl_sum_doubles,
  .sum_int64 = nccl_sum_int64,
  .abort = nccl_abort,
  .destroy = nccl_destroy,
};

TdmCommunicator *
tdm_communicator_nccl_new(TdmBackend **backends, int replicas, GError **error)
{
  g_return_val_if_fail(backends != NULL && replicas >= 1, NULL);
  g_autofree int *devices = g_new0(int, replicas);
  for (int r = 0; r < replicas; r++) {
    if (backends[r]->kind != TDM_BACKEND_CUDA) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  _("NCCL communicator: replica %d is on %s, not a CUDA GPU"), r,
                  backends[r]->name);
      return NULL;
    }
    devices[r] = backends[r]->device_index;
    for (int q = 0; q < r; q++)
      if (devices[q] == devices[r]) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
                    _("NCCL communicator: replicas %d and %d share %s; NCCL needs one "
                    "replica per GPU (the peer communicator handles shared GPUs)"),
                    q, r, backends[r]->name);
        return NULL;
      }
  }

  NcclCommunicator *n = g_new0(NcclCommunicator, 1);
  TdmCommunicator *c = &n->base;
  c->ops = &nccl_ops;
  c->kind = "nccl";
  c->replicas = replicas;
  c->backends = backends;
  c->world_size = replicas;
  c->first_rank = 0;
  c->bytes_sent = g_new0(guint64, replicas);
  c->bytes_received = g_new0(guint64, replicas);
  n->comms = g_new0(ncclComm_t, replicas);
  n->streams = g_new0(cudaStream_t, replicas);
  n->ready = g_new0(cudaEvent_t, replicas);
  n->done = g_new0(cudaEvent_t, replicas);
  tdm_host_sum_init(&n->sum, replicas);
  tdm_int_sum_init(&n->ints, replicas);
  g_rw_lock_init(&n->abort_lock);

  if (!NCCL_OK(error, "NCCL communicator", NULL, ncclCommInitAll(n->comms, replicas, devices)))
    goto fail;
  for (int r = 0; r < replicas; r++) {
    const char *who = backends[r]->name;
    int lowest = 0, highest = 0;
    if (!TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who, cudaSetDevice(devices[r])) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaDeviceGetStreamPriorityRange(&lowest, &highest)) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaStreamCreateWithPriority(&n->streams[r], cudaStreamNonBlocking,
                                                   highest)) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaEventCreateWithFlags(&n->ready[r], cudaEventDisableTiming)) ||
        !TDM_CUDA_TRY(error, TDM_ENGINE_ERROR_COMMUNICATION, who,
                      cudaEventCreateWithFlags(&n->done[r], cudaEventDisableTiming)))
      goto fail;
  }
  return c;

fail:
  nccl_destroy(c);
  return NULL;
}
