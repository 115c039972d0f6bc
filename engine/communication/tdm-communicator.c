/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-communicator.c — chooses a communicator for a set of local replicas, and what
 * every communicator shares. The kinds live in tdm-communicator-*.c. */
#include "tdm-communicator.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-build-config.h"

#include <math.h>

TdmCommunicator *
tdm_communicator_new(TdmBackend **backends, int replicas, GError **error)
{
  g_return_val_if_fail(replicas >= 1, NULL);

  gboolean all_cpu = TRUE, any_cpu = FALSE, distinct_gpus = TRUE;
  for (int i = 0; i < replicas; i++) {
    gboolean cpu = backends[i]->kind == TDM_BACKEND_CPU;
    all_cpu &= cpu;
    any_cpu |= cpu;
    for (int j = 0; j < i; j++)
      if (!cpu && backends[j]->kind == TDM_BACKEND_CUDA &&
          backends[j]->device_index == backends[i]->device_index)
        distinct_gpus = FALSE;
  }
  if (all_cpu)
    return tdm_communicator_host_new(backends, replicas);
  if (any_cpu) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("--devices mixes CPU workers and GPUs in one run; choose one kind"));
    return NULL;
  }
#if TDM_HAVE_CUDA
#if TDM_HAVE_NCCL
  if (distinct_gpus && replicas > 1)
    return tdm_communicator_nccl_new(backends, replicas, error);
#endif
  return tdm_communicator_peer_new(backends, replicas, error);
#else
  (void)distinct_gpus;
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
              _("this build of Tandem has no CUDA backend"));
  return NULL;
#endif
}

void
tdm_communicator_free(TdmCommunicator *c)
{
  if (c != NULL)
    c->ops->destroy(c);
}

/* The bytes one collective moves out of and into one device, by the algorithm of the
 * communicator's kind, with S the buffer's bytes and N the devices:
 * - every kind's all-reduce sends and receives 2(N−1)/N × S per device: host and peer
 *   sum a 1/N slice from the N−1 others and hand the sum back to them; NCCL's and
 *   MPI's rings do the same amount;
 * - host and peer reduce and broadcast are stars around the root: the root takes in
 *   (N−1) × S (reduce) or gives out (N−1) × S (broadcast), every other device S once;
 * - NCCL's and MPI's reduce and broadcast are chains through every device: each link
 *   carries S, so the root and the chain's far end move S once, the others twice.
 * This is why `main` loads its main device on host and peer, and not with NCCL. */
typedef enum { MOVE_ALLREDUCE, MOVE_REDUCE, MOVE_BROADCAST } Move;

static void
count_bytes(TdmCommunicator *c, int replica, Move move, size_t count, int root)
{
  guint64 n = (guint64)MAX(c->world_size, 1);
  guint64 s = (guint64)count * sizeof(float);
  int me = c->first_rank + replica;
  guint64 sent = 0, received = 0;
  if (n == 1)
    return;
  if (move == MOVE_ALLREDUCE) {
    sent = received = 2 * (n - 1) * s / n;
  } else if (c->star) {
    /* The root's side of the star carries every other device's S. */
    guint64 *root_side = move == MOVE_REDUCE ? &received : &sent;
    guint64 *other_side = move == MOVE_REDUCE ? &sent : &received;
    if (me == root)
      *root_side = (n - 1) * s;
    else
      *other_side = s;
  } else {
    /* Position along the chain: a reduce starts just after the root and ends at it, a
     * broadcast starts at the root. */
    guint64 first = move == MOVE_REDUCE ? (guint64)root + 1 : (guint64)root;
    guint64 position = ((guint64)me + n - first % n) % n;
    sent = position < n - 1 ? s : 0;
    received = position > 0 ? s : 0;
  }
  c->bytes_sent[replica] += sent;
  c->bytes_received[replica] += received;
}

gboolean
tdm_communicator_allreduce(TdmCommunicator *c, int replica, float *buffer, size_t offset,
                           size_t count, GError **error)
{
  count_bytes(c, replica, MOVE_ALLREDUCE, count, -1);
  return c->ops->allreduce(c, replica, buffer, offset, count, error);
}

gboolean
tdm_communicator_start_allreduce(TdmCommunicator *c, int replica, float *buffer,
                                 size_t offset, size_t count, GError **error)
{
  if (c->ops->start_allreduce == NULL)
    return tdm_communicator_allreduce(c, replica, buffer, offset, count, error);
  count_bytes(c, replica, MOVE_ALLREDUCE, count, -1);
  return c->ops->start_allreduce(c, replica, buffer, offset, count, error);
}

double
tdm_communicator_take_in_flight(TdmCommunicator *c, int replica)
{
  return c->ops->take_in_flight != NULL ? c->ops->take_in_flight(c, replica) : NAN;
}

gboolean
tdm_communicator_reduce(TdmCommunicator *c, int replica, float *buffer, size_t count,
                        int root, GError **error)
{
  count_bytes(c, replica, MOVE_REDUCE, count, root);
  return c->ops->reduce(c, replica, buffer, count, root, error);
}

gboolean
tdm_communicator_broadcast(TdmCommunicator *c, int replica, float *buffer, size_t count,
                           int root, GError **error)
{
  count_bytes(c, replica, MOVE_BROADCAST, count, root);
  return c->ops->broadcast(c, replica, buffer, count, root, error);
}

void
tdm_communicator_take_bytes(TdmCommunicator *c, int replica, guint64 *sent,
                            guint64 *received)
{
  if (sent != NULL)
    *sent = c != NULL ? c->bytes_sent[replica] : 0;
  if (received != NULL)
    *received = c != NULL ? c->bytes_received[replica] : 0;
  if (c != NULL)
    c->bytes_sent[replica] = c->bytes_received[replica] = 0;
}

void
tdm_communicator_abort(TdmCommunicator *c)
{
  if (c != NULL && c->ops->abort != NULL)
    c->ops->abort(c);
}
