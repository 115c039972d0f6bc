/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-communicator-host.c — the communicator for CPU workers: buffers are host
 * memory, so each worker thread sums its own slice of every replica's buffer and
 * writes the result back to all of them. Sums run in replica order, so results do
 * not depend on thread timing. */
#include "tdm-communicator.h"
#include "tdm-barrier.h"
#include "tdm-int-sum.h"

#include <string.h>

#define CHUNK 2048

typedef struct {
  TdmCommunicator base;
  TdmBarrier barrier;
  float **buffers;             /* [replicas]: registered for the current collective */
  double **doubles;
  TdmIntSum ints;
} HostCommunicator;

static void
slice_of(size_t count, int parts, int index, size_t *begin, size_t *end)
{
  /* Cache-line aligned slices, so no two threads write one line. */
  size_t per = (count + parts - 1) / parts;
  per = (per + 15) & ~(size_t)15;
  *begin = MIN(count, per * index);
  *end = MIN(count, *begin + per);
}

/* Sums [begin, end) over all buffers (offset applied) and stores it into each target. */
static void
sum_range(HostCommunicator *h, size_t offset, size_t begin, size_t end, int only_target)
{
  int n = h->base.replicas;
  float tmp[CHUNK];
  for (size_t i = begin; i < end; i += CHUNK) {
    size_t len = MIN(CHUNK, end - i);
    const float *first = h->buffers[0] + offset + i;
    memcpy(tmp, first, len * sizeof(float));
    for (int k = 1; k < n; k++) {
      const float *src = h->buffers[k] + offset + i;
      for (size_t j = 0; j < len; j++)
        tmp[j] += src[j];
    }
    for (int k = 0; k < n; k++)
      if (only_target < 0 || k == only_target)
        memcpy(h->buffers[k] + offset + i, tmp, len * sizeof(float));
  }
}

/* Every collective has one shape: register this replica's buffer, meet, do this
 * replica's part (which may read the others' buffers), meet again. */
typedef enum { SUM_TO_ALL, SUM_TO_ROOT, COPY_FROM_ROOT } Collective;

static gboolean
collective(TdmCommunicator *c, Collective kind, int replica, float *buffer, size_t offset,
           size_t count, int root)
{
  HostCommunicator *h = (HostCommunicator *)c;
  gint64 start = g_get_monotonic_time();
  h->buffers[replica] = buffer;
  if (!tdm_barrier_wait(&h->barrier))
    return FALSE;
  if (kind == COPY_FROM_ROOT) {
    if (replica != root)
      memcpy(buffer + offset, h->buffers[root] + offset, count * sizeof(float));
  } else {
    size_t begin, end;
    slice_of(count, c->replicas, replica, &begin, &end);
    sum_range(h, offset, begin, end, kind == SUM_TO_ROOT ? root : -1);
  }
  gboolean ok = tdm_barrier_wait(&h->barrier);
  c->comm_seconds[replica] += (g_get_monotonic_time() - start) / 1e6;
  return ok;
}

static gboolean
host_allreduce(TdmCommunicator *c, int replica, float *buffer, size_t offset, size_t count,
               GError **error)
{
  return collective(c, SUM_TO_ALL, replica, buffer, offset, count, -1);
}

static gboolean
host_reduce(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
            GError **error)
{
  return collective(c, SUM_TO_ROOT, replica, buffer, 0, count, root);
}

static gboolean
host_broadcast(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
               GError **error)
{
  return collective(c, COPY_FROM_ROOT, replica, buffer, 0, count, root);
}

static gboolean
host_wait(TdmCommunicator *c, int replica, GError **error)
{
  return TRUE;
}

static gboolean
host_sum_doubles(TdmCommunicator *c, int replica, double *values, int n, GError **error)
{
  HostCommunicator *h = (HostCommunicator *)c;
  h->doubles[replica] = values;
  if (!tdm_barrier_wait(&h->barrier))
    return FALSE;
  double total[16];
  g_assert(n <= 16);
  for (int j = 0; j < n; j++) {
    total[j] = 0;
    for (int k = 0; k < c->replicas; k++)
      total[j] += h->doubles[k][j];
  }
  if (!tdm_barrier_wait(&h->barrier))
    return FALSE;
  memcpy(values, total, n * sizeof(double));
  return TRUE;
}

static gboolean
host_sum_int64(TdmCommunicator *c, int replica, gint64 *values, size_t n, GError **error)
{
  return tdm_int_sum(&((HostCommunicator *)c)->ints, replica, values, n, error);
}

static void
host_abort(TdmCommunicator *c)
{
  tdm_barrier_break(&((HostCommunicator *)c)->barrier);
  tdm_int_sum_break(&((HostCommunicator *)c)->ints);
}

static void
host_destroy(TdmCommunicator *c)
{
  HostCommunicator *h = (HostCommunicator *)c;
  tdm_barrier_clear(&h->barrier);
  tdm_int_sum_clear(&h->ints);
  g_free(h->buffers);
  g_free(h->doubles);
  g_free(c->comm_seconds);
  g_free(c->bytes_sent);
  g_free(c->bytes_received);
  g_free(h);
}

static const TdmCommunicatorOps host_ops = {
  .allreduce = host_allreduce,
  .reduce = host_reduce,
  .broadcast = host_broadcast,
  .wait = host_wait,
  .sum_doubles = host_sum_doubles,
  .sum_int64 = host_sum_int64,
  .abort = host_abort,
  .destroy = host_destroy,
};

TdmCommunicator *
tdm_communicator_host_new(TdmBackend **backends, int replicas)
{
  HostCommunicator *h = g_new0(HostCommunicator, 1);
  h->base.ops = &host_ops;
  h->base.kind = "host";
  h->base.star = TRUE;
  h->base.replicas = replicas;
  h->base.backends = backends;
  h->base.world_size = replicas;
  h->base.first_rank = 0;
  h->base.comm_seconds = g_new0(double, replicas);
  h->base.bytes_sent = g_new0(guint64, replicas);
  h->base.bytes_received = g_new0(guint64, replicas);
  h->buffers = g_new0(float *, replicas);
  h->doubles = g_new0(double *, replicas);
  tdm_barrier_init(&h->barrier, replicas);
  tdm_int_sum_init(&h->ints, replicas);
  return &h->base;
}
