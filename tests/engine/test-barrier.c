/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-barrier.c — the replicas' barrier: reuse across generations, and breaking it
 * releases every waiter instead of hanging. */
#include "tdm-barrier.h"

#define THREADS 4
#define ROUNDS 200

typedef struct {
  TdmBarrier *barrier;
  gint *counter;
  gboolean ok;
} Worker;

static gpointer
count_rounds(gpointer data)
{
  Worker *w = data;
  w->ok = TRUE;
  for (int round = 0; round < ROUNDS; round++) {
    g_atomic_int_inc(w->counter);
    if (!tdm_barrier_wait(w->barrier))
      w->ok = FALSE;
    /* Nobody passes until everyone of this round has counted. */
    if (g_atomic_int_get(w->counter) < (round + 1) * THREADS)
      w->ok = FALSE;
    if (!tdm_barrier_wait(w->barrier))
      w->ok = FALSE;
  }
  return NULL;
}

static void
test_rounds(void)
{
  TdmBarrier barrier;
  tdm_barrier_init(&barrier, THREADS);
  gint counter = 0;
  Worker workers[THREADS];
  GThread *threads[THREADS];
  for (int i = 0; i < THREADS; i++) {
    workers[i] = (Worker){&barrier, &counter, FALSE};
    threads[i] = g_thread_new("worker", count_rounds, &workers[i]);
  }
  for (int i = 0; i < THREADS; i++) {
    g_thread_join(threads[i]);
    g_assert_true(workers[i].ok);
  }
  g_assert_cmpint(counter, ==, THREADS * ROUNDS);
  tdm_barrier_clear(&barrier);
}

static gpointer
wait_once(gpointer data)
{
  return GINT_TO_POINTER(tdm_barrier_wait(data));
}

static void
test_break_releases(void)
{
  TdmBarrier barrier;
  tdm_barrier_init(&barrier, 3);
  GThread *a = g_thread_new("a", wait_once, &barrier);
  GThread *b = g_thread_new("b", wait_once, &barrier);
  /* Broken while both are blocked in it, not before they arrive. */
  while (tdm_barrier_waiting(&barrier) < 2)
    g_thread_yield();
  tdm_barrier_break(&barrier);
  g_assert_false(GPOINTER_TO_INT(g_thread_join(a)));
  g_assert_false(GPOINTER_TO_INT(g_thread_join(b)));
  /* Later waits fail at once: a broken barrier stays broken. */
  g_assert_false(tdm_barrier_wait(&barrier));
  tdm_barrier_clear(&barrier);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/barrier/rounds", test_rounds);
  g_test_add_func("/barrier/break-releases", test_break_releases);
  return g_test_run();
}
