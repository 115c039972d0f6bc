/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer-exact.c — the training step of exact mode (config->exact), in which the
 * parameters come out bit-identical for any number of devices and any way of placing
 * them: device-independent chunks whose gradients are summed as fixed-point integers
 * (docs/ARCHITECTURE.md, "Exact mode", says how and why). Not the lock-step machinery
 * or the collectives of the ordinary step (tdm-trainer-step.c), which calls in here.
 */
#include "tdm-trainer-private.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-exact.h"

#include <math.h>
#include <string.h>

/* A stretch of the running statistics, in floats. */
typedef struct {
  size_t offset, count;
} Range;

struct ExactReplica {
  gint64 *acc;                  /* gradients (2P), then running-statistics moves (2S),
                                 * then the count of unrepresentable values */
  gint64 *device_acc;           /* the same on the device, where its backend adds there
                                 * (exact_add): one download a step instead of a
                                 * chunk's gradients each chunk */
  size_t acc_count;
  float *grads;                 /* host: one chunk's gradients, then the sum's */
  float *state;                 /* host: one chunk's statistics moves, then the new */
  float *saved_state;           /* host: the running statistics before the step */
  float *start;                 /* host: what each chunk's pass starts from, uploaded
                                 * before it: zeros where the statistics move, the
                                 * saved values of frozen BN layers */
  GArray *moving;               /* Range: the state that moves (not frozen BN's) */
  gint64 metrics[4];            /* loss · 2⁻¹⁶ (two limbs), correct, unrepresentable
                                 * losses */
};

/* The running statistics a step moves: every BN layer's but the frozen ones', which
 * normalize with their running statistics (inference mode) and keep them. Those must
 * not be zeroed for a chunk's pass, as the moving ones are to collect their moves: a
 * frozen BN would then divide by √ε and blow its outputs up. Adjacent layers' ranges
 * are merged. */
static GArray *
moving_state(const TdmTrainer *t)
{
  const TdmNetwork *net = t->net;
  GArray *ranges = g_array_new(FALSE, FALSE, sizeof(Range));
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->state_count == 0 || (t->frozen != NULL && t->frozen[i]))
      continue;
    Range *last = ranges->len > 0 ? &g_array_index(ranges, Range, ranges->len - 1) : NULL;
    if (last != NULL && last->offset + last->count == l->state_offset)
      last->count += l->state_count;
    else
      g_array_append_val(ranges, ((Range){l->state_offset, l->state_count}));
  }
  return ranges;
}

/* Each chunk starts from zeros where statistics move and the saved values elsewhere. */
static void
fill_start(ExactReplica *e, size_t s)
{
  memcpy(e->start, e->saved_state, s * sizeof(float));
  for (guint k = 0; k < e->moving->len; k++) {
    const Range *m = &g_array_index(e->moving, Range, k);
    memset(e->start + m->offset, 0, m->count * sizeof(float));
  }
}

gboolean
tdm_trainer_exact_setup(TdmTrainer *t, GError **error)
{
  t->exact_bytes = 0;
  if (!t->config->exact)
    return TRUE;
  TdmExactBuffers plan = tdm_exact_buffers(t->net->parameter_count, t->net->state_count);
  t->exact = g_new0(ExactReplica, t->replicas);
  for (int r = 0; r < t->replicas; r++) {
    ExactReplica *e = &t->exact[r];
    e->acc_count = plan.acc;
    e->acc = g_try_new0(gint64, plan.acc);
    e->grads = g_try_new(float, plan.grads);
    e->state = g_try_new0(float, plan.state);
    e->saved_state = g_try_new0(float, plan.state);
    e->start = g_try_new0(float, plan.state);
    e->moving = moving_state(t);
    if (e->acc == NULL || e->grads == NULL || e->state == NULL || e->saved_state == NULL ||
        e->start == NULL) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                  _("exact mode: no room for the fixed-point gradient sums (%zu bytes)"),
                  (size_t)plan.bytes);
      return FALSE;
    }
    /* On a GPU the chunks' sums stay on the device (its own counter and the memory
     * estimate's device figure count them: tdm_exact_device_bytes()).
     * TANDEM_EXACT_ON_HOST=1 adds them on the host instead, as a CPU worker does: the
     * same bits (tests/gpu/test-cuda-train.c compares the two). */
    TdmBackend *b = t->backends[r];
    if (b->kind != TDM_BACKEND_CPU && b->ops->exact_add != NULL &&
        g_getenv("TANDEM_EXACT_ON_HOST") == NULL) {
      e->device_acc = tdm_backend_alloc(b, tdm_exact_device_bytes(t->net->parameter_count,
                                                                  t->net->state_count),
                                        error);
      if (e->device_acc == NULL)
        return FALSE;
    }
    /* What was asked of the allocator, buffer by buffer: the figure the memory
     * estimate must equal (tests/engine/test-memory.c). */
    t->exact_bytes += plan.acc * sizeof *e->acc + plan.grads * sizeof *e->grads +
                      plan.state * (sizeof *e->state + sizeof *e->saved_state +
                                    sizeof *e->start);
  }
  return TRUE;
}

void
tdm_trainer_exact_free(TdmTrainer *t)
{
  if (t->exact == NULL)
    return;
  for (int r = 0; r < t->replicas; r++) {
    if (t->exact[r].device_acc != NULL)
      tdm_backend_release(t->backends[r], t->exact[r].device_acc);
    g_free(t->exact[r].acc);
    g_free(t->exact[r].grads);
    g_free(t->exact[r].state);
    g_free(t->exact[r].saved_state);
    g_free(t->exact[r].start);
    if (t->exact[r].moving != NULL)
      g_array_unref(t->exact[r].moving);
  }
  g_clear_pointer(&t->exact, g_free);
}

void
tdm_trainer_shard(const TdmTrainer *t, int count, int rank, int *offset, int *size)
{
  if (t->config->exact)
    tdm_exact_shard_of(count, t->config->exact_chunk, t->world, rank, offset, size);
  else
    tdm_shard_of(count, t->world, rank, offset, size);
}

/* Replica r's chunks of the job's batch, each a pass of its own, summed into the
 * fixed-point accumulator: gradients, the running statistics' moves (each chunk's
 * pass moves running averages that were set to zero, so they hold momentum · the
 * chunk's statistics), the loss and the correct count. */
void
tdm_trainer_exact_compute(TdmTrainer *t, int r)
{
  TdmReplica *rep = t->reps[r];
  TdmBackend *b = t->backends[r];
  ExactReplica *e = &t->exact[r];
  const Job *job = &t->job;
  size_t p = t->net->parameter_count, s = t->net->state_count;
  int chunk = t->config->exact_chunk;
  int offset, size;
  tdm_trainer_shard(t, job->count, t->rank0 + r, &offset, &size);
  memset(e->acc, 0, e->acc_count * sizeof(gint64));
  gint64 *dacc = e->device_acc;
  if (dacc != NULL)
    b->ops->zero(b, dacc, e->acc_count * sizeof(gint64));
  gint64 *dbad = dacc != NULL ? dacc + e->acc_count - 1 : NULL;
  if (s > 0) {
    b->ops->download(b, e->saved_state, rep->state, s * sizeof(float));
    b->ops->synchronize(b);
    fill_start(e, s);
  }
  gint64 bad = 0;
  for (int done = 0; done < size && !tdm_trainer_aborted(t); done += chunk) {
    int n = MIN(chunk, size - done);
    if (s > 0)
      b->ops->upload(b, rep->state, e->start, s * sizeof(float));
    tdm_replica_train_step(rep, job->indices + offset + done, n, 1.0f / (float)job->count);
    if (dacc != NULL) {
      b->ops->exact_add(b, dacc, rep->grads, p, dbad);
      for (guint k = 0; k < e->moving->len; k++) {
        const Range *m = &g_array_index(e->moving, Range, k);
        b->ops->exact_add(b, dacc + 2 * (p + m->offset), rep->state + m->offset, m->count,
                          dbad);
      }
      tdm_trainer_exact_add_metrics(t, r, tdm_replica_take_metrics(rep));
      continue;
    }
    /* A CPU worker's buffers are host memory: read in place. */
    const float *grads = rep->grads;
    if (b->kind != TDM_BACKEND_CPU) {
      b->ops->download(b, e->grads, rep->grads, p * sizeof(float));
      grads = e->grads;
    }
    bad += (gint64)tdm_exact_add(e->acc, grads, p);
    if (s > 0) {
      b->ops->download(b, e->state, rep->state, s * sizeof(float));
      for (guint k = 0; k < e->moving->len; k++) {
        const Range *m = &g_array_index(e->moving, Range, k);
        bad += (gint64)tdm_exact_add(e->acc + 2 * (p + m->offset), e->state + m->offset,
                                     m->count);
      }
    }
    tdm_trainer_exact_add_metrics(t, r, tdm_replica_take_metrics(rep));
  }
  if (dacc != NULL) {
    /* The step's sums, once: the download waits for the chunks' kernels. */
    b->ops->download(b, e->acc, dacc, e->acc_count * sizeof(gint64));
    b->ops->synchronize(b);
    return;
  }
  e->acc[e->acc_count - 1] = bad;
}

void
tdm_trainer_exact_add_metrics(TdmTrainer *t, int r, TdmMetrics m)
{
  ExactReplica *e = &t->exact[r];
  /* Scaled by 2⁻¹⁶ (exactly): a chunk's loss sum may reach 2³⁰ before it overflows. */
  if (!tdm_exact_add_double(e->metrics, m.loss_sum * 0x1p-16))
    e->metrics[3]++;
  e->metrics[2] += (gint64)m.correct;
}

/* The sum over every replica of every process, then the step's gradient (and the new
 * running statistics) from it, identical on every replica. */
gboolean
tdm_trainer_exact_combine(TdmTrainer *t, int r, GError **error)
{
  TdmReplica *rep = t->reps[r];
  TdmBackend *b = t->backends[r];
  ExactReplica *e = &t->exact[r];
  size_t p = t->net->parameter_count, s = t->net->state_count;
  if (t->world > 1 && !t->comm->ops->sum_int64(t->comm, r, e->acc, e->acc_count, error))
    return FALSE;
  gint64 bad = e->acc[e->acc_count - 1];
  if (bad > 0) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DIVERGED,
                "exact mode: %" G_GINT64_FORMAT " gradient values were not finite or beyond "
                "±%g, which exact mode's fixed-point sums cannot hold: the training "
                "diverged (try a lower learning rate)", bad, TDM_EXACT_LIMIT);
    return FALSE;
  }
  if (b->kind == TDM_BACKEND_CPU) {
    tdm_exact_to_float(rep->grads, e->acc, p, 1.0);
  } else {
    tdm_exact_to_float(e->grads, e->acc, p, 1.0);
    b->ops->upload(b, rep->grads, e->grads, p * sizeof(float));
  }
  if (s > 0) {
    int chunks = tdm_exact_chunks(t->job.count, t->config->exact_chunk);
    memcpy(e->state, e->saved_state, s * sizeof(float));
    for (guint k = 0; k < e->moving->len; k++) {
      const Range *m = &g_array_index(e->moving, Range, k);
      float *v = e->state + m->offset;
      tdm_exact_to_float(v, e->acc + 2 * (p + m->offset), m->count, 1.0 / chunks);
      for (size_t i = 0; i < m->count; i++)
        v[i] += (1.0f - TDM_BN_MOMENTUM) * e->saved_state[m->offset + i];
    }
    b->ops->upload(b, rep->state, e->state, s * sizeof(float));
  }
  /* Uploads may be asynchronous: the host buffers are written again next step. */
  b->ops->synchronize(b);
  return TRUE;
}

/* The training loss and correct count since the last call, summed over every replica
 * exactly; clears them. */
gboolean
tdm_trainer_exact_metrics(TdmTrainer *t, int r, double *loss, double *correct,
                          GError **error)
{
  ExactReplica *e = &t->exact[r];
  gint64 sums[4];
  memcpy(sums, e->metrics, sizeof sums);
  memset(e->metrics, 0, sizeof e->metrics);
  if (!t->comm->ops->sum_int64(t->comm, r, sums, 4, error))
    return FALSE;
  *loss = sums[3] > 0 ? NAN : tdm_exact_to_double(sums) * 0x1p16;
  *correct = (double)sums[2];
  return TRUE;
}
