/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-gui.h — what bench-gui.c and bench-gui-watch.c share: the state of the window
 * runs (Gui), one stall's breakdown, samples of a quantity, and the watchers'
 * entry points. A benchmark's own header; not an API.
 */
#pragma once

#include <adwaita.h>

#include "tdm-run.h"
#include "tdm-trainer.h"
#include "tdm-window.h"

#define STALL_TARGET_MS 16.0

/* One stall: when in the run, how long, and how much of that the main thread spent
 * working (the rest it waited: for a core, or for the X server). */
typedef struct {
  double at_s, busy_ms, cpu_ms;
  /* Of the rest: how long the main thread was ready to run but had no core (the
   * kernel's run-queue wait); what is left it slept, on the X server or a lock. */
  double queued_ms;
  /* --steal: time the hypervisor took from every vCPU meanwhile (/proc/stat, in its
   * 10 ms ticks): what a virtual machine's thread loses without knowing it. */
  double steal_ms;
  /* Where the main thread's CPU time went: the Start handler, the frame clock's
   * phases (layout: styles and size allocation; paint: snapshot and render to X; the
   * rest of the frame: update, X sync), and TdmRun's events; the remainder is other
   * sources. */
  double start_ms, layout_ms, paint_ms, frame_other_ms, events_ms;
  guint n_frames;
  /* --start-detail: snapshots (CPU ms, count) of a few widget types within paint */
  double snap_ms[8];
  guint snap_n[8];
} Stall;

#define N_WORST 8

/* Samples of one quantity, in milliseconds. */
typedef struct {
  const char *name;
  GArray *ms;
} Samples;

typedef struct {
  TdmWindow *window;
  GMainLoop *loop;
  gboolean recording;
  TdmStepEvent last_step;
  gboolean have_step;
  int worker_nice;

  /* Frame clock, watched in the runs with the tick callback. */
  gboolean ticking;
  gint64 last_tick_us;
  gint64 phase_start_us;    /* when the frame's last phase ended, 0 outside a frame */
  double tick_cpu_ms;
  double refresh_ms;
  Samples frame_gap, frame_late, frame_layout, frame_paint, frame_cpu;

  int x_server;     /* pid, or 0 */

  /* The probes. */
  guint probe_ms;
  gint64 last_probe_us;
  double last_probe_cpu_ms;
  gint64 woke_us;
  double woke_cpu_ms;
  double woke_queued_ms;
  gboolean count_steal;
  double woke_steal_ms;
  gint64 run_start_us;
  Samples loop_busy, loop_cpu, probe_late;
  GArray *worst;    /* of Stall, the longest few iterations */

  /* The current iteration's breakdown (see Stall), and the frame phase under way. */
  Stall iter;
  double frame_mark_ms;     /* main-thread CPU at the last mark, or -1 */
  double event_start_ms;

  /* --wakeups: why the main loop woke, by cause, while recording. */
  gboolean count_wakes;
  gboolean start_detail;  /* --start-detail: every iteration of a run's first 500 ms */
  GHashTable *wakes;      /* cause → count (GUINT_TO_POINTER) */
  GPtrArray *sources;     /* every source seen attached to the main context, ref'd */
  guint last_source_id;
} Gui;

static inline void
samples_add(Samples *s, double ms)
{
  g_array_append_val(s->ms, ms);
}

/* The tick callback of the runs with one: the gaps between frames. */
gboolean bench_gui_on_tick(GtkWidget *widget, GdkFrameClock *clock, gpointer data);
/* The timeout probe (--probe-ms): how late past its period it comes. */
gboolean bench_gui_on_probe(gpointer data);
/* The frame clock's phases, as samples and as parts of each iteration. */
void bench_gui_watch_frame_clock(Gui *gui, GdkFrameClock *clock);
/* --start-detail: a few widget types' snapshots timed, each frame's region printed. */
void bench_gui_watch_start_detail(Gui *gui);
/* The iteration probe, to attach at high priority for a window run. */
GSource *bench_gui_loop_probe_new(Gui *gui);
/* --wakeups: the main context's poll() wrapped; the causes counted, then printed. */
void bench_gui_census_start(Gui *gui);
void bench_gui_census_print(Gui *gui, double seconds);
