/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-clock.h — a clock a caller may hand the engine in place of the monotonic one, in
 * microseconds: the trainer's (what its decisions by time read) and its span clock
 * (what times sampled steps' phases, and the host communicator's buckets under way).
 * Tests set one that counts readings, so nothing they assert hangs on how fast the
 * machine is. Here, below training and communication, so both name it.
 */
#pragma once

#include <glib.h>

typedef gint64 (*TdmClockFunc) (gpointer user_data);

typedef struct {
  TdmClockFunc func;            /* NULL: g_get_monotonic_time() */
  gpointer data;
} TdmClock;

static inline gint64
tdm_clock_now_us (const TdmClock *clock)
{
  return clock->func != NULL ? clock->func (clock->data) : g_get_monotonic_time ();
}
