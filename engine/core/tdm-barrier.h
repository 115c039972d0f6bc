/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-barrier.h — a reusable barrier for the replicas' worker threads that can be
 * broken: once any thread fails, every waiter returns FALSE instead of hanging. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  GMutex lock;
  GCond cond;
  int parties;
  int waiting;
  guint generation;
  gboolean broken;
} TdmBarrier;

void tdm_barrier_init (TdmBarrier *b, int parties);
void tdm_barrier_clear (TdmBarrier *b);
/* Blocks until all parties arrive; FALSE when the barrier is or becomes broken. */
gboolean tdm_barrier_wait (TdmBarrier *b);
void tdm_barrier_break (TdmBarrier *b);
/* The threads blocked in tdm_barrier_wait now, waiting for the rest of their round;
 * only meaningful while the barrier is whole. For a caller that must act once they
 * are there, not before (a test breaking it under waiters). */
int tdm_barrier_waiting (TdmBarrier *b);

G_END_DECLS
