/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-tsan-locks.c — GLib's mutexes and condition variables on pthreads, for
 * ThreadSanitizer builds only (meson -Db_sanitize=thread; tools/tsan).
 *
 * GLib implements GMutex and GCond with futex system calls, which ThreadSanitizer
 * cannot see, so every access ordered by one of them reads as a race (the engine suite
 * reported 61, all false). These definitions take the place of GLib's for the
 * programs linked with this library: each GMutex or GCond holds a pointer to a
 * pthread object made on first use, and ThreadSanitizer sees the pthread calls. GLib's
 * own internal locks keep GLib's versions; they never share an object with ours.
 * Not built, and not correct to build, outside ThreadSanitizer builds.
 */
#include <glib.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t *
mutex_of(GMutex *mutex)
{
  pthread_mutex_t *m = g_atomic_pointer_get(&mutex->p);
  if (G_LIKELY(m != NULL))
    return m;
  pthread_mutex_t *made = malloc(sizeof *made);
  if (made == NULL)
    abort();
  pthread_mutex_init(made, NULL);
  if (!g_atomic_pointer_compare_and_exchange(&mutex->p, NULL, made)) {
    pthread_mutex_destroy(made);
    free(made);
  }
  return g_atomic_pointer_get(&mutex->p);
}

static pthread_cond_t *
cond_of(GCond *cond)
{
  pthread_cond_t *c = g_atomic_pointer_get(&cond->p);
  if (G_LIKELY(c != NULL))
    return c;
  pthread_cond_t *made = malloc(sizeof *made);
  if (made == NULL)
    abort();
  /* g_cond_wait_until's deadline is on the monotonic clock. */
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(made, &attr);
  pthread_condattr_destroy(&attr);
  if (!g_atomic_pointer_compare_and_exchange(&cond->p, NULL, made)) {
    pthread_cond_destroy(made);
    free(made);
  }
  return g_atomic_pointer_get(&cond->p);
}

void
g_mutex_init(GMutex *mutex)
{
  mutex->p = NULL;
}

void
g_mutex_clear(GMutex *mutex)
{
  pthread_mutex_t *m = mutex->p;
  if (m != NULL) {
    pthread_mutex_destroy(m);
    free(m);
  }
  mutex->p = NULL;
}

void
g_mutex_lock(GMutex *mutex)
{
  pthread_mutex_lock(mutex_of(mutex));
}

void
g_mutex_unlock(GMutex *mutex)
{
  pthread_mutex_unlock(mutex_of(mutex));
}

gboolean
g_mutex_trylock(GMutex *mutex)
{
  return pthread_mutex_trylock(mutex_of(mutex)) == 0;
}

void
g_cond_init(GCond *cond)
{
  cond->p = NULL;
}

void
g_cond_clear(GCond *cond)
{
  pthread_cond_t *c = cond->p;
  if (c != NULL) {
    pthread_cond_destroy(c);
    free(c);
  }
  cond->p = NULL;
}

void
g_cond_wait(GCond *cond, GMutex *mutex)
{
  pthread_cond_wait(cond_of(cond), mutex_of(mutex));
}

gboolean
g_cond_wait_until(GCond *cond, GMutex *mutex, gint64 end_time)
{
  struct timespec ts = {
    .tv_sec = end_time / G_USEC_PER_SEC,
    .tv_nsec = (end_time % G_USEC_PER_SEC) * 1000,
  };
  return pthread_cond_timedwait(cond_of(cond), mutex_of(mutex), &ts) == 0;
}

void
g_cond_signal(GCond *cond)
{
  pthread_cond_signal(cond_of(cond));
}

void
g_cond_broadcast(GCond *cond)
{
  pthread_cond_broadcast(cond_of(cond));
}
