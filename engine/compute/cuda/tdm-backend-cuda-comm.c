/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-comm.c — a helper for the GPU communicators: the host-side ordered
 * sum of doubles over threads. Not the backend's operations (tdm-backend-cuda*.c).
 */
#include "tdm-backend-cuda.h"
#include "tdm-i18n.h"
#include "tdm-error.h"

#include <string.h>

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
