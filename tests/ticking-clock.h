/* SPDX-License-Identifier: GPL-3.0-or-later */
/* ticking-clock.h — a clock for tdm_trainer_set_span_clock that is one microsecond
 * further on at each reading, from any thread (its count is a gint, read and bumped
 * atomically): every phase a sampled step records lasts at least a microsecond,
 * however fast the machine, so a test can tell a phase that ran from one that did
 * not without timing anything. Header-only, so every test program can share it. */
#pragma once

#include <glib.h>

static inline gint64
test_ticking_clock(gpointer ticks)
{
  return (gint64)g_atomic_int_add((gint *)ticks, 1) + 1;
}
