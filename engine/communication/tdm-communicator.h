/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-communicator.h — how replicas combine gradients and share parameters.
 *
 * One communicator serves every replica of this process. Like NCCL, each operation is
 * a collective: every local replica's worker thread calls it, in the same order, with
 * its own buffer (a device pointer on that replica's backend). Operations may return
 * before the data has moved (GPU communicators enqueue on a communication stream);
 * wait() makes the replica's compute stream wait for what it enqueued.
 *
 * Kinds: "host" (CPU workers: threads sum slices in place), "peer" (GPUs: device
 * copies and an add kernel, for replicas that share a GPU or builds without NCCL),
 * "nccl" (one process, several GPUs), "mpi" (one process per device, many machines).
 * Not the choice of strategy: the trainer picks allreduce or reduce + broadcast.
 */
#pragma once

#include <glib.h>
#include "tdm-backend.h"
#include "tdm-clock.h"

G_BEGIN_DECLS

typedef struct _TdmCommunicator TdmCommunicator;

typedef struct {
  /* buffer[offset, offset+count) ← the sum of that range over all replicas. */
  gboolean (*allreduce) (TdmCommunicator *c, int replica, float *buffer,
                         size_t offset, size_t count, GError **error);
  /* root's buffer[0, count) ← the sum over all replicas; others' are unchanged. */
  gboolean (*reduce) (TdmCommunicator *c, int replica, float *buffer, size_t count,
                      int root, GError **error);
  /* every buffer[0, count) ← root's. */
  gboolean (*broadcast) (TdmCommunicator *c, int replica, float *buffer, size_t count,
                         int root, GError **error);
  /* Optional: starts buffer[offset, offset+count)'s all-reduce beside the caller,
   * who goes on computing (a gradient bucket during backward) and must not touch
   * that range until wait(). Where NULL, allreduce serves (on a GPU it returns before
   * the data has moved anyway). */
  gboolean (*start_allreduce) (TdmCommunicator *c, int replica, float *buffer,
                               size_t offset, size_t count, GError **error);
  /* The replica's compute stream waits for everything this replica enqueued (or
   * started). */
  gboolean (*wait) (TdmCommunicator *c, int replica, GError **error);
  /* Optional: seconds the replica's started all-reduces were under way since the
   * last call, whether or not they have ended (the time they ran beside the caller). */
  double (*take_in_flight) (TdmCommunicator *c, int replica);
  /* Sums a few doubles over every replica of every process (metrics, evaluation);
   * host memory, blocking. Called by each local replica's thread. */
  gboolean (*sum_doubles) (TdmCommunicator *c, int replica, double *values, int n,
                           GError **error);
  /* Sums n int64 over every replica of every process, in place: exact mode's
   * fixed-point gradients (tdm-exact.h). Host memory, blocking, any n; integer sums
   * give the same bits in any order. */
  gboolean (*sum_int64) (TdmCommunicator *c, int replica, gint64 *values, size_t n,
                         GError **error);
  /* Optional: makes every pending and later collective return FALSE promptly, from
   * any thread (a replica failed or the run was stopped mid-step). */
  void (*abort) (TdmCommunicator *c);
  void (*destroy) (TdmCommunicator *c);
} TdmCommunicatorOps;

struct _TdmCommunicator {
  const TdmCommunicatorOps *ops;
  const char *kind;            /* "host", "peer", "nccl", "mpi" */
  gboolean star;               /* reduce and broadcast go straight to and from the root
                                * (host, peer), not along a chain (nccl, mpi) */
  int replicas;                /* local replicas, one worker thread each */
  TdmBackend **backends;       /* [replicas], not owned */
  int world_size;              /* replicas over all processes */
  int first_rank;              /* global index of local replica 0 */
  guint64 *bytes_sent;         /* [replicas]: by the kind's algorithm (see */
  guint64 *bytes_received;     /*   tdm_communicator_allreduce), accumulated */
  TdmClock clock;              /* what times started all-reduces under way
                                * (take_in_flight): the trainer's span clock */
};

/* Picks the best communicator for the backends: host for CPUs, nccl for distinct GPUs
 * when NCCL is built in, peer otherwise. Several local replicas only; for processes
 * under mpirun see tdm_communicator_mpi_new(). */
TdmCommunicator *tdm_communicator_new (TdmBackend **backends, int replicas, GError **error);
void tdm_communicator_free (TdmCommunicator *c);

TdmCommunicator *tdm_communicator_host_new (TdmBackend **backends, int replicas);
TdmCommunicator *tdm_communicator_peer_new (TdmBackend **backends, int replicas, GError **error);
TdmCommunicator *tdm_communicator_nccl_new (TdmBackend **backends, int replicas, GError **error);
/* One replica in this process; MPI must be initialized. */
TdmCommunicator *tdm_communicator_mpi_new (TdmBackend *backend, GError **error);

/* The replicas of a peer communicator blocked at its barrier now, waiting for the
 * others to arrive; for a caller that must act once they wait (a test of abort). */
int tdm_communicator_peer_waiting (TdmCommunicator *c);

/* ops->take_in_flight's seconds, or NaN where the kind cannot tell. */
double tdm_communicator_take_in_flight (TdmCommunicator *c, int replica);

/* Calls ops->abort where the communicator has one. */
void tdm_communicator_abort (TdmCommunicator *c);

/* The collectives as the trainer calls them: ops->… plus the count of the bytes each
 * moves into and out of the replica's device, for the window and --json. The count
 * follows the algorithm of the communicator's kind, not a measurement of a wire. */
gboolean tdm_communicator_allreduce (TdmCommunicator *c, int replica, float *buffer,
                                     size_t offset, size_t count, GError **error);
/* An all-reduce that runs beside the caller where the kind can (ops->start_allreduce),
 * else the plain one; wait() ends it. */
gboolean tdm_communicator_start_allreduce (TdmCommunicator *c, int replica, float *buffer,
                                           size_t offset, size_t count, GError **error);
gboolean tdm_communicator_reduce (TdmCommunicator *c, int replica, float *buffer,
                                  size_t count, int root, GError **error);
gboolean tdm_communicator_broadcast (TdmCommunicator *c, int replica, float *buffer,
                                     size_t count, int root, GError **error);

/* Returns (either may be NULL) and clears the bytes replica's device sent and received
 * since the last call. A NULL communicator (one replica) moved nothing. */
void tdm_communicator_take_bytes (TdmCommunicator *c, int replica, guint64 *sent,
                                  guint64 *received);

G_END_DECLS
