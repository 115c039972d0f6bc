/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-communicator-host.c — the communicator for CPU workers: buffers are host
 * memory, so each worker thread sums its own slice of every replica's buffer and
 * writes the result back to all of them. Sums run in replica order, so results do
 * not depend on thread timing, nor on how a buffer is cut into buckets.
 *
 * Gradient buckets are all-reduced beside backward, as gloo does for PyTorch's DDP on
 * CPUs: each replica has a communication thread (its lane) that takes the buckets its
 * replica starts, in order, and runs the same sliced sum with the other lanes while
 * the replica's thread goes on with backward; wait() returns once the lane is idle.
 * Every other collective runs on the replicas' own threads, after their lanes are. */
#include "tdm-communicator.h"
#include "tdm-barrier.h"
#include "tdm-int-sum.h"

#include <string.h>

#define CHUNK 2048

/* Where the replicas' threads (or their lanes) meet for one collective. */
typedef struct {
  TdmBarrier barrier;
  float **buffers;             /* [replicas]: registered for the current collective */
} Meeting;

typedef struct {
  float *buffer;
  size_t offset, count;
} Bucket;

typedef struct HostCommunicator HostCommunicator;

typedef struct {
  HostCommunicator *owner;
  int replica;
  GThread *thread;             /* started with the replica's first bucket */
  GMutex lock;
  GCond cond;
  GArray *queue;               /* Bucket: started, not yet taken (from head on) */
  guint head;
  gboolean running;            /* a bucket taken, its sum not yet done */
  gboolean failed, quit;
  gint64 busy_since;           /* µs: when the lane last went from idle to busy */
  gint64 busy_us;              /* in flight since the last take_in_flight, µs */
} Lane;

struct HostCommunicator {
  TdmCommunicator base;
  Meeting sync, lanes_meeting;
  double **doubles;
  TdmIntSum ints;
  Lane *lanes;                 /* [replicas] */
};

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
sum_range(float **buffers, int n, size_t offset, size_t begin, size_t end, int only_target)
{
  float tmp[CHUNK];
  for (size_t i = begin; i < end; i += CHUNK) {
    size_t len = MIN(CHUNK, end - i);
    const float *first = buffers[0] + offset + i;
    memcpy(tmp, first, len * sizeof(float));
    for (int k = 1; k < n; k++) {
      const float *src = buffers[k] + offset + i;
      for (size_t j = 0; j < len; j++)
        tmp[j] += src[j];
    }
    for (int k = 0; k < n; k++)
      if (only_target < 0 || k == only_target)
        memcpy(buffers[k] + offset + i, tmp, len * sizeof(float));
  }
}

/* Every collective has one shape: register this replica's buffer, meet, do this
 * replica's part (which may read the others' buffers), meet again. */
typedef enum { SUM_TO_ALL, SUM_TO_ROOT, COPY_FROM_ROOT } Collective;

static gboolean
collective(TdmCommunicator *c, Meeting *m, Collective kind, int replica, float *buffer,
           size_t offset, size_t count, int root)
{
  m->buffers[replica] = buffer;
  if (!tdm_barrier_wait(&m->barrier))
    return FALSE;
  if (kind == COPY_FROM_ROOT) {
    if (replica != root)
      memcpy(buffer + offset, m->buffers[root] + offset, count * sizeof(float));
  } else {
    size_t begin, end;
    slice_of(count, c->replicas, replica, &begin, &end);
    sum_range(m->buffers, c->replicas, offset, begin, end, kind == SUM_TO_ROOT ? root : -1);
  }
  return tdm_barrier_wait(&m->barrier);
}

/* ---- the lanes: buckets all-reduced beside backward ------------------------------ */

/* Called with the lane's lock held: the lane has nothing left to do. */
static void
lane_went_idle(Lane *lane)
{
  lane->busy_us += tdm_clock_now_us(&lane->owner->base.clock) - lane->busy_since;
  g_cond_broadcast(&lane->cond);
}

static gpointer
lane_main(gpointer data)
{
  Lane *lane = data;
  HostCommunicator *h = lane->owner;
  g_mutex_lock(&lane->lock);
  for (;;) {
    while (lane->head == lane->queue->len && !lane->quit)
      g_cond_wait(&lane->cond, &lane->lock);
    if (lane->quit)
      break;
    Bucket b = g_array_index(lane->queue, Bucket, lane->head++);
    lane->running = TRUE;
    g_mutex_unlock(&lane->lock);
    gboolean ok = collective(&h->base, &h->lanes_meeting, SUM_TO_ALL, lane->replica, b.buffer,
                             b.offset, b.count, -1);
    g_mutex_lock(&lane->lock);
    lane->running = FALSE;
    if (!ok) {
      /* A broken meeting: the run was stopped or a replica failed. */
      lane->failed = TRUE;
      lane->head = lane->queue->len;
    }
    if (lane->head == lane->queue->len) {
      g_array_set_size(lane->queue, 0);
      lane->head = 0;
      lane_went_idle(lane);
    }
  }
  g_mutex_unlock(&lane->lock);
  return NULL;
}

static gboolean
host_start_allreduce(TdmCommunicator *c, int replica, float *buffer, size_t offset,
                     size_t count, GError **error)
{
  Lane *lane = &((HostCommunicator *)c)->lanes[replica];
  g_mutex_lock(&lane->lock);
  gboolean ok = !lane->failed;
  if (ok) {
    if (lane->thread == NULL)
      lane->thread = g_thread_new("tandem-comm", lane_main, lane);
    if (lane->head == lane->queue->len && !lane->running)
      lane->busy_since = tdm_clock_now_us(&c->clock);
    Bucket b = {buffer, offset, count};
    g_array_append_val(lane->queue, b);
    g_cond_broadcast(&lane->cond);
  }
  g_mutex_unlock(&lane->lock);
  return ok;
}

/* Waits until the replica's lane has summed every bucket it was given; FALSE when one
 * failed (the meeting was broken: the error, if any, is the trainer's to report). */
static gboolean
host_wait(TdmCommunicator *c, int replica, GError **error)
{
  Lane *lane = &((HostCommunicator *)c)->lanes[replica];
  g_mutex_lock(&lane->lock);
  while ((lane->head < lane->queue->len || lane->running) && !lane->failed)
    g_cond_wait(&lane->cond, &lane->lock);
  gboolean ok = !lane->failed;
  g_mutex_unlock(&lane->lock);
  return ok;
}

static double
host_take_in_flight(TdmCommunicator *c, int replica)
{
  Lane *lane = &((HostCommunicator *)c)->lanes[replica];
  g_mutex_lock(&lane->lock);
  gint64 busy = lane->busy_us;
  if (lane->head < lane->queue->len || lane->running) {
    gint64 now = tdm_clock_now_us(&c->clock);
    busy += now - lane->busy_since;
    lane->busy_since = now;
  }
  lane->busy_us = 0;
  g_mutex_unlock(&lane->lock);
  return busy / 1e6;
}

/* ---- the collectives on the replicas' threads ------------------------------------ */

/* A collective on the replicas' threads comes after every bucket their lanes were
 * given: the caller's own lane is idle once host_wait() returns, and every lane
 * finishes a bucket together with the others (their meeting's second barrier). */
static gboolean
sync_collective(TdmCommunicator *c, Collective kind, int replica, float *buffer,
                size_t offset, size_t count, int root)
{
  HostCommunicator *h = (HostCommunicator *)c;
  return host_wait(c, replica, NULL) &&
         collective(c, &h->sync, kind, replica, buffer, offset, count, root);
}

static gboolean
host_allreduce(TdmCommunicator *c, int replica, float *buffer, size_t offset, size_t count,
               GError **error)
{
  return sync_collective(c, SUM_TO_ALL, replica, buffer, offset, count, -1);
}

static gboolean
host_reduce(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
            GError **error)
{
  return sync_collective(c, SUM_TO_ROOT, replica, buffer, 0, count, root);
}

static gboolean
host_broadcast(TdmCommunicator *c, int replica, float *buffer, size_t count, int root,
               GError **error)
{
  return sync_collective(c, COPY_FROM_ROOT, replica, buffer, 0, count, root);
}

static gboolean
host_sum_doubles(TdmCommunicator *c, int replica, double *values, int n, GError **error)
{
  HostCommunicator *h = (HostCommunicator *)c;
  h->doubles[replica] = values;
  if (!host_wait(c, replica, error) || !tdm_barrier_wait(&h->sync.barrier))
    return FALSE;
  double total[16];
  g_assert(n <= 16);
  for (int j = 0; j < n; j++) {
    total[j] = 0;
    for (int k = 0; k < c->replicas; k++)
      total[j] += h->doubles[k][j];
  }
  if (!tdm_barrier_wait(&h->sync.barrier))
    return FALSE;
  memcpy(values, total, n * sizeof(double));
  return TRUE;
}

static gboolean
host_sum_int64(TdmCommunicator *c, int replica, gint64 *values, size_t n, GError **error)
{
  return host_wait(c, replica, error) &&
         tdm_int_sum(&((HostCommunicator *)c)->ints, replica, values, n, error);
}

static void
host_abort(TdmCommunicator *c)
{
  HostCommunicator *h = (HostCommunicator *)c;
  tdm_barrier_break(&h->sync.barrier);
  tdm_barrier_break(&h->lanes_meeting.barrier);
  tdm_int_sum_break(&h->ints);
  /* A lane between two buckets would start the next at a broken meeting anyway;
   * marking it failed at once also frees a replica waiting for it. */
  for (int r = 0; r < c->replicas; r++) {
    Lane *lane = &h->lanes[r];
    g_mutex_lock(&lane->lock);
    lane->failed = TRUE;
    g_cond_broadcast(&lane->cond);
    g_mutex_unlock(&lane->lock);
  }
}

static void
host_destroy(TdmCommunicator *c)
{
  HostCommunicator *h = (HostCommunicator *)c;
  for (int r = 0; r < c->replicas; r++) {
    Lane *lane = &h->lanes[r];
    g_mutex_lock(&lane->lock);
    lane->quit = TRUE;
    g_cond_broadcast(&lane->cond);
    g_mutex_unlock(&lane->lock);
  }
  /* A lane still in a bucket's meeting must get out before it is joined. */
  tdm_barrier_break(&h->lanes_meeting.barrier);
  for (int r = 0; r < c->replicas; r++) {
    Lane *lane = &h->lanes[r];
    if (lane->thread != NULL)
      g_thread_join(lane->thread);
    g_array_unref(lane->queue);
    g_mutex_clear(&lane->lock);
    g_cond_clear(&lane->cond);
  }
  tdm_barrier_clear(&h->sync.barrier);
  tdm_barrier_clear(&h->lanes_meeting.barrier);
  tdm_int_sum_clear(&h->ints);
  g_free(h->sync.buffers);
  g_free(h->lanes_meeting.buffers);
  g_free(h->lanes);
  g_free(h->doubles);
  g_free(c->bytes_sent);
  g_free(c->bytes_received);
  g_free(h);
}

static const TdmCommunicatorOps host_ops = {
  .allreduce = host_allreduce,
  .reduce = host_reduce,
  .broadcast = host_broadcast,
  .start_allreduce = host_start_allreduce,
  .wait = host_wait,
  .take_in_flight = host_take_in_flight,
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
  h->base.bytes_sent = g_new0(guint64, replicas);
  h->base.bytes_received = g_new0(guint64, replicas);
  h->sync.buffers = g_new0(float *, replicas);
  h->lanes_meeting.buffers = g_new0(float *, replicas);
  h->doubles = g_new0(double *, replicas);
  tdm_barrier_init(&h->sync.barrier, replicas);
  tdm_barrier_init(&h->lanes_meeting.barrier, replicas);
  h->lanes = g_new0(Lane, replicas);
  for (int r = 0; r < replicas; r++) {
    Lane *lane = &h->lanes[r];
    lane->owner = h;
    lane->replica = r;
    lane->queue = g_array_new(FALSE, FALSE, sizeof(Bucket));
    g_mutex_init(&lane->lock);
    g_cond_init(&lane->cond);
  }
  tdm_int_sum_init(&h->ints, replicas);
  return &h->base;
}
