/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-communicator-mpi.c — the communicator for one process per device under mpirun:
 * each process holds one replica and collectives span every rank of the job.
 *
 * CPU ranks sum host buffers with MPI itself. GPU ranks use an NCCL communicator that
 * rank 0 bootstraps by broadcasting its unique id over MPI (ChainerMN's pure_nccl),
 * so MPI never sees device memory and need not be CUDA-aware; as in the nccl
 * communicator, collectives go on a communication stream ordered after the compute
 * stream by events, and wait() orders it back. Metrics (sum_doubles) always go
 * through MPI. Roots are global ranks. Not for several replicas in one process
 * (host, peer, nccl).
 */
#include "tdm-communicator.h"
#include "tdm-i18n.h"
#include "tdm-distributed.h"
#include "tdm-error.h"
#include "tdm-build-config.h"

#include <mpi.h>
#include <string.h>

#if TDM_HAVE_CUDA && TDM_HAVE_NCCL
#define TDM_MPI_NCCL 1
#include "tdm-backend-cuda.h"
#include <cuda_runtime.h>
#include <nccl.h>
#else
#define TDM_MPI_NCCL 0
#endif

/* MPI counts are ints: larger buffers go in pieces. */
#define PIECE ((size_t)1 << 30)

typedef enum {
  OP_ALLREDUCE,
  OP_REDUCE,
  OP_BROADCAST,
} Op;

typedef struct {
  TdmCommunicator base;
  TdmBackend *backend;         /* the one replica's; base.backends points here */
  MPI_Comm comm;               /* our duplicate of MPI_COMM_WORLD, errors returned */
  int rank;
  char who[64];                /* "rank 1 (cuda:0)", for messages */
  volatile gint aborted;
  gboolean gpu;
#if TDM_MPI_NCCL
  ncclComm_t nccl;             /* NCCL rank = MPI rank; NULL once aborted */
  cudaStream_t stream;         /* communication */
  cudaEvent_t ready;           /* on the compute stream, at each call */
  cudaEvent_t done;            /* on the communication stream, after it */
#endif
} MpiCommunicator;

#define MPI_COMMUNICATOR(c) ((MpiCommunicator *)(c))

static gboolean
mpi_ok_at(MpiCommunicator *m, int code, const char *call, GError **error)
{
  if (G_LIKELY(code == MPI_SUCCESS))
    return TRUE;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    g_snprintf(text, sizeof text, "error %d", code);
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION, _("%s: %.*s failed: %s"),
              m->who, (int)strcspn(call, "("), call, text);
  return FALSE;
}
#define MPI_OK(m, error, call) mpi_ok_at((m), (call), #call, (error))

static gboolean
check_running(MpiCommunicator *m, GError **error)
{
  if (G_LIKELY(!g_atomic_int_get(&m->aborted)))
    return TRUE;
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
              _("%s: MPI communicator: the run was stopped or this rank failed"), m->who);
  return FALSE;
}

/* ---- GPU ranks: NCCL ------------------------------------------------------------ */

#if TDM_MPI_NCCL
static gboolean
nccl_ok_at(MpiCommunicator *m, ncclResult_t res, const char *call, GError **error)
{
  if (G_LIKELY(res == ncclSuccess))
    return TRUE;
  const char *detail = m->nccl != NULL ? ncclGetLastError(m->nccl) : NULL;
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
              _("%s: %.*s failed: %s%s%s"), m->who, (int)strcspn(call, "("), call,
              ncclGetErrorString(res), detail != NULL && *detail ? ": " : "",
              detail != NULL ? detail : "");
  return FALSE;
}
#define NCCL_OK(m, error, call) nccl_ok_at((m), (call), #call, (error))
#define CUDA_OK(m, error, call) \
  TDM_CUDA_TRY((error), TDM_ENGINE_ERROR_COMMUNICATION, (m)->who, (call))

static gboolean
gpu_collective(MpiCommunicator *m, Op op, float *data, size_t count, int root, GError **error)
{
  TdmBackend *b = m->backend;
  if (!CUDA_OK(m, error, cudaSetDevice(b->device_index)) ||
      !CUDA_OK(m, error, cudaEventRecord(m->ready, tdm_backend_cuda_stream(b))) ||
      !CUDA_OK(m, error, cudaStreamWaitEvent(m->stream, m->ready, 0)))
    return FALSE;
  gboolean ok = FALSE;
  switch (op) {
  case OP_ALLREDUCE:
    ok = NCCL_OK(m, error, ncclAllReduce(data, data, count, ncclFloat, ncclSum, m->nccl,
                                         m->stream));
    break;
  case OP_REDUCE:
    /* In place: root's buffer receives the sum, the others' are only read. */
    ok = NCCL_OK(m, error, ncclReduce(data, data, count, ncclFloat, ncclSum, root, m->nccl,
                                      m->stream));
    break;
  case OP_BROADCAST:
    ok = NCCL_OK(m, error, ncclBroadcast(data, data, count, ncclFloat, root, m->nccl,
                                         m->stream));
    break;
  }
  return ok && CUDA_OK(m, error, cudaEventRecord(m->done, m->stream));
}

static gboolean
gpu_wait(MpiCommunicator *m, GError **error)
{
  TdmBackend *b = m->backend;
  /* A failure inside NCCL (a peer lost, a bad argument found late) shows here. */
  ncclResult_t async = ncclSuccess;
  if (!NCCL_OK(m, error, ncclCommGetAsyncError(m->nccl, &async)) ||
      !nccl_ok_at(m, async, "an NCCL collective", error) ||
      !CUDA_OK(m, error, cudaSetDevice(b->device_index)) ||
      !CUDA_OK(m, error, cudaStreamWaitEvent(tdm_backend_cuda_stream(b), m->done, 0)))
    return FALSE;
  return TRUE;
}

static gboolean
gpu_init(MpiCommunicator *m, GError **error)
{
  TdmBackend *b = m->backend;
  m->gpu = TRUE;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  /* Rank 0 makes the id that NCCL's ranks meet by; MPI carries it to the others. */
  if (m->rank == 0 && !NCCL_OK(m, error, ncclGetUniqueId(&id)))
    return FALSE;
  if (!MPI_OK(m, error, MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, m->comm)))
    return FALSE;

  int lowest = 0, highest = 0;
  if (!CUDA_OK(m, error, cudaSetDevice(b->device_index)) ||
      !NCCL_OK(m, error, ncclCommInitRank(&m->nccl, m->base.world_size, id, m->rank)) ||
      !CUDA_OK(m, error, cudaDeviceGetStreamPriorityRange(&lowest, &highest)) ||
      !CUDA_OK(m, error, cudaStreamCreateWithPriority(&m->stream, cudaStreamNonBlocking,
                                                      highest)) ||
      !CUDA_OK(m, error, cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming)) ||
      !CUDA_OK(m, error, cudaEventCreateWithFlags(&m->done, cudaEventDisableTiming)))
    return FALSE;
  return TRUE;
}

static void
gpu_destroy(MpiCommunicator *m, gboolean aborted)
{
  if (cudaSetDevice(m->backend->device_index) == cudaSuccess) {
    /* An aborted comm's kernels are gone, so its stream drains. */
    if (m->nccl != NULL && aborted) {
      (void)ncclCommAbort(m->nccl);
      m->nccl = NULL;
    }
    if (m->stream != NULL)
      (void)cudaStreamSynchronize(m->stream);
    if (m->nccl != NULL)
      (void)ncclCommDestroy(m->nccl);
    if (m->stream != NULL)
      (void)cudaStreamDestroy(m->stream);
    if (m->ready != NULL)
      (void)cudaEventDestroy(m->ready);
    if (m->done != NULL)
      (void)cudaEventDestroy(m->done);
  }
  (void)cudaGetLastError();
}
#endif

/* ---- the operations ------------------------------------------------------------- */

static gboolean
collective(TdmCommunicator *c, int replica, Op op, float *data, size_t count, int root,
           GError **error)
{
  MpiCommunicator *m = MPI_COMMUNICATOR(c);
  g_return_val_if_fail(replica == 0, FALSE);
  g_return_val_if_fail(root >= 0 && root < c->world_size, FALSE);
  if (!check_running(m, error))
    return FALSE;
#if TDM_MPI_NCCL
  if (m->gpu)
    return gpu_collective(m, op, data, count, root, error);
#endif
  gboolean ok = TRUE;
  for (size_t done = 0; ok && done < count; done += PIECE) {
    int n = (int)MIN(count - done, PIECE);
    float *p = data + done;
    switch (op) {
    case OP_ALLREDUCE:
      ok = MPI_OK(m, error, MPI_Allreduce(MPI_IN_PLACE, p, n, MPI_FLOAT, MPI_SUM, m->comm));
      break;
    case OP_REDUCE:
      if (m->rank == root)
        ok = MPI_OK(m, error,
                    MPI_Reduce(MPI_IN_PLACE, p, n, MPI_FLOAT, MPI_SUM, root, m->comm));
      else
        ok = MPI_OK(m, error, MPI_Reduce(p, NULL, n, MPI_FLOAT, MPI_SUM, root, m->comm));
      break;
    case OP_BROADCAST:
      ok = MPI_OK(m, error, MPI_Bcast(p, n, MPI_FLOAT, root, m->comm));
      break;
    }
  }
  return ok;
}

static gboolean
mpi_allreduce(TdmCommunicator *c, int replica, float *buffer, size_t offset, size_t count,
              GError **error)
{
  return collective(c, replica, OP_ALLREDUCE, buffer + offset, count, 0, error);
}

static gboolean
mpi_reduce(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
           GError **error)
{
  return collective(c, replica, OP_REDUCE, buffer, count, root, error);
}

static gboolean
mpi_broadcast(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
              GError **error)
{
  return collective(c, replica, OP_BROADCAST, buffer, count, root, error);
}

static gboolean
mpi_wait(TdmCommunicator *c, int replica, GError **error)
{
  MpiCommunicator *m = MPI_COMMUNICATOR(c);
  if (!check_running(m, error))
    return FALSE;
#if TDM_MPI_NCCL
  if (m->gpu)
    return gpu_wait(m, error);
#endif
  return TRUE;
}

static gboolean
mpi_sum_doubles(TdmCommunicator *c, int replica, double *values, int n, GError **error)
{
  MpiCommunicator *m = MPI_COMMUNICATOR(c);
  g_return_val_if_fail(replica == 0, FALSE);
  return check_running(m, error) &&
         MPI_OK(m, error, MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, m->comm));
}

/* Exact mode's fixed-point sums: host memory on any device, MPI_INT64_T in pieces
 * that an int count can name. */
static gboolean
mpi_sum_int64(TdmCommunicator *c, int replica, gint64 *values, size_t n, GError **error)
{
  MpiCommunicator *m = MPI_COMMUNICATOR(c);
  g_return_val_if_fail(replica == 0, FALSE);
  if (!check_running(m, error))
    return FALSE;
  for (size_t done = 0; done < n;) {
    int piece = (int)MIN(n - done, (size_t)1 << 28);
    if (!MPI_OK(m, error, MPI_Allreduce(MPI_IN_PLACE, values + done, piece, MPI_INT64_T,
                                        MPI_SUM, m->comm)))
      return FALSE;
    done += (size_t)piece;
  }
  return TRUE;
}

/* With one replica, the thread that calls MPI is the one that failed or stopped, so
 * no collective of ours is in progress: later ones fail at once, the error reaches
 * the caller, which says what went wrong and then ends the job with
 * tdm_distributed_abort(). From any other thread, MPI's thread may be blocked in a
 * collective that only ending the job interrupts, so that is done at once. */
static void
mpi_abort(TdmCommunicator *c)
{
  MpiCommunicator *m = MPI_COMMUNICATOR(c);
  int main_thread = 0;
  MPI_Is_thread_main(&main_thread);
  if (!main_thread) {
    g_printerr("%s: stopped from another thread while MPI may be busy; ending the job\n",
               m->who);
    tdm_distributed_abort(1);
  }
  if (!g_atomic_int_compare_and_exchange(&m->aborted, 0, 1))
    return;
#if TDM_MPI_NCCL
  /* Kernels of ours that wait for peers would keep the stream busy forever. */
  if (m->nccl != NULL) {
    (void)ncclCommAbort(m->nccl);
    m->nccl = NULL;
  }
#endif
}

static void
mpi_destroy(TdmCommunicator *c)
{
  MpiCommunicator *m = MPI_COMMUNICATOR(c);
  gboolean aborted = g_atomic_int_get(&m->aborted);
#if TDM_MPI_NCCL
  if (m->gpu)
    gpu_destroy(m, aborted);
#endif
  /* Freeing a communicator is collective in the standard; after a failure the other
   * ranks never come, so the process's end frees it. */
  if (!aborted && m->comm != MPI_COMM_NULL)
    MPI_Comm_free(&m->comm);
  g_free(c->bytes_sent);
  g_free(c->bytes_received);
  g_free(m);
}

static const TdmCommunicatorOps mpi_ops = {
  .allreduce = mpi_allreduce,
  .reduce = mpi_reduce,
  .broadcast = mpi_broadcast,
  .wait = mpi_wait,
  .sum_doubles = mpi_sum_doubles,
  .sum_int64 = mpi_sum_int64,
  .abort = mpi_abort,
  .destroy = mpi_destroy,
};

TdmCommunicator *
tdm_communicator_mpi_new(TdmBackend *backend, GError **error)
{
  g_return_val_if_fail(backend != NULL, NULL);
  if (!tdm_distributed_active()) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
                _("MPI communicator: MPI is not initialized (run under mpirun with "
                "--distributed)"));
    return NULL;
  }

  MpiCommunicator *m = g_new0(MpiCommunicator, 1);
  TdmCommunicator *c = &m->base;
  c->ops = &mpi_ops;
  c->kind = "mpi";
  c->replicas = 1;
  m->backend = backend;
  c->backends = &m->backend;
  c->world_size = tdm_distributed_size();
  c->first_rank = m->rank = tdm_distributed_rank();
  c->bytes_sent = g_new0(guint64, 1);
  c->bytes_received = g_new0(guint64, 1);
  m->comm = MPI_COMM_NULL;
  g_snprintf(m->who, sizeof m->who, "rank %d (%s)", m->rank, backend->name);

  /* A communicator of our own, so an MPI error comes back to be reported with the
   * rank and device instead of killing the job with MPI's message alone. */
  if (!MPI_OK(m, error, MPI_Comm_dup(MPI_COMM_WORLD, &m->comm)) ||
      !MPI_OK(m, error, MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN)))
    goto fail;
  if (backend->kind == TDM_BACKEND_CUDA) {
#if TDM_MPI_NCCL
    if (!gpu_init(m, error))
      goto fail;
#else
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("%s: this build of Tandem has no NCCL, which GPU ranks under mpirun need"),
                m->who);
    goto fail;
#endif
  }
  return c;

fail:
  /* The caller ends the job; nothing here may wait for the other ranks. */
  m->aborted = 1;
  mpi_destroy(c);
  return NULL;
}
