/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-int-sum.c — the in-process int64 sum (tdm-int-sum.h). */
#include "tdm-int-sum.h"
#include "tdm-i18n.h"
#include "tdm-error.h"

void
tdm_int_sum_init(TdmIntSum *s, int parties)
{
  tdm_barrier_init(&s->barrier, parties);
  s->parties = parties;
  s->buffers = g_new0(gint64 *, parties);
}

void
tdm_int_sum_clear(TdmIntSum *s)
{
  tdm_barrier_clear(&s->barrier);
  g_free(s->buffers);
  s->buffers = NULL;
}

void
tdm_int_sum_break(TdmIntSum *s)
{
  tdm_barrier_break(&s->barrier);
}

gboolean
tdm_int_sum(TdmIntSum *s, int party, gint64 *values, size_t n, GError **error)
{
  s->buffers[party] = values;
  if (!tdm_barrier_wait(&s->barrier))
    goto broken;
  /* Cache-line aligned slices, one a party, so no two threads write one line. */
  size_t per = (n + s->parties - 1) / s->parties;
  per = (per + 7) & ~(size_t)7;
  size_t begin = MIN(n, per * party), end = MIN(n, begin + per);
  for (size_t i = begin; i < end; i++) {
    gint64 total = 0;
    for (int k = 0; k < s->parties; k++)
      total += s->buffers[k][i];
    for (int k = 0; k < s->parties; k++)
      s->buffers[k][i] = total;
  }
  if (!tdm_barrier_wait(&s->barrier))
    goto broken;
  return TRUE;

broken:
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_COMMUNICATION,
              _("sum_int64: another replica failed or the run was stopped"));
  return FALSE;
}
