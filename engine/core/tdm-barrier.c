/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-barrier.c — see tdm-barrier.h. */
#include "tdm-barrier.h"

void
tdm_barrier_init(TdmBarrier *b, int parties)
{
  g_mutex_init(&b->lock);
  g_cond_init(&b->cond);
  b->parties = parties;
  b->waiting = 0;
  b->generation = 0;
  b->broken = FALSE;
}

void
tdm_barrier_clear(TdmBarrier *b)
{
  g_mutex_clear(&b->lock);
  g_cond_clear(&b->cond);
}

gboolean
tdm_barrier_wait(TdmBarrier *b)
{
  g_mutex_lock(&b->lock);
  if (b->broken) {
    g_mutex_unlock(&b->lock);
    return FALSE;
  }
  guint generation = b->generation;
  if (++b->waiting == b->parties) {
    b->waiting = 0;
    b->generation++;
    g_cond_broadcast(&b->cond);
    g_mutex_unlock(&b->lock);
    return TRUE;
  }
  while (generation == b->generation && !b->broken)
    g_cond_wait(&b->cond, &b->lock);
  gboolean ok = generation != b->generation;
  g_mutex_unlock(&b->lock);
  return ok;
}

void
tdm_barrier_break(TdmBarrier *b)
{
  g_mutex_lock(&b->lock);
  b->broken = TRUE;
  g_cond_broadcast(&b->cond);
  g_mutex_unlock(&b->lock);
}

int
tdm_barrier_waiting(TdmBarrier *b)
{
  /* Under the lock: a thread counted here has let go of it only inside g_cond_wait,
   * so it is blocked, not on its way. */
  g_mutex_lock(&b->lock);
  int n = b->waiting;
  g_mutex_unlock(&b->lock);
  return n;
}
