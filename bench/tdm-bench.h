/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-bench.h — the few helpers every benchmark program needs: a qsort order for
 * doubles (medians), CPU time, of the calling thread or of the whole process, so that
 * figures on a shared machine can be read beside the wall clock, and a device buffer
 * through the engine's allocator that stops the program where it fails. Header only;
 * nothing here is part of Tandem. */
#pragma once

#include "tdm-backend.h"

#include <glib.h>
#include <sys/resource.h>
#include <time.h>

/* For qsort over doubles, ascending. */
static inline int
tdm_bench_compare_doubles(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* CPU time of the calling thread, in milliseconds: what it did, as opposed to how
 * long it waited for a core. */
static inline double
tdm_bench_thread_cpu_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU seconds of the whole process (user + system, every thread, ended ones too). */
static inline double
tdm_bench_process_cpu_seconds(void)
{
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* bytes on backend b's device, through its allocator (so its memory use is known); a
 * benchmark that cannot have them stops there, saying why. */
static inline void *
tdm_bench_alloc(TdmBackend *b, size_t bytes)
{
  g_autoptr(GError) error = NULL;
  void *d = tdm_backend_alloc(b, bytes, &error);
  if (d == NULL)
    g_error("%s", error->message);
  return d;
}
