/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-comm.c — helpers for the GPU communicators: the event timer that
 * measures a stream's busy time without blocking, and the host-side ordered sum of
 * doubles over threads. Not the backend's operations (tdm-backend-cuda*.c).
 */
#include "tdm-backend-cuda.h"
#include "tdm-i18n.h"
#include "tdm-error.h"

#include <string.h>

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
                _("sum_doubles: %d values, at most %d"), n, TDM_HOST_SUM_MAX);
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
              _("sum_doubles: another replica failed or the run was stopped"));
  return FALSE;
}
