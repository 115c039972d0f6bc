/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-gui-watch.c — part of bench-gui: how the main thread is watched while the
 * window trains. The frame clock's phases (tick gaps, layout, paint), snapshots of a
 * few widget types timed (--start-detail), the loop probe that measures each
 * main-loop iteration (the stalls), the census of why the loop woke (--wakeups), and
 * the timeout probe (--probe-ms). Not the runs themselves nor the tables printed
 * (bench-gui.c).
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <adwaita.h>

#include "tdm-bench.h"
#include "tdm-chart.h"
#include "tdm-dashboard.h"
#include "tdm-run-form.h"
#include "bench-gui.h"

gboolean
bench_gui_on_tick(GtkWidget *widget, GdkFrameClock *clock, gpointer data)
{
  Gui *gui = data;
  gint64 now = g_get_monotonic_time();

  /* The real time the frame started: frame_time itself is smoothed to the refresh
   * rate, which would hide how late a frame came. */
  if (gui->recording && gui->last_tick_us != 0) {
    double gap = (now - gui->last_tick_us) / 1e3;

    samples_add(&gui->frame_gap, gap);
    samples_add(&gui->frame_late, MAX(0, gap - gui->refresh_ms));
  }
  gui->last_tick_us = now;
  gui->tick_cpu_ms = tdm_bench_thread_cpu_ms();
  return G_SOURCE_CONTINUE;
}

/* Connected after GTK's own handlers, so each runs when that phase of the frame is
 * done. The update phase runs in every frame (the tick callback asks for it); layout
 * and paint only when something needs them. */
static void
on_update(GdkFrameClock *clock, Gui *gui)
{
  if (!gui->ticking)
    return;
  gui->phase_start_us = g_get_monotonic_time();
}

static void
on_layout(GdkFrameClock *clock, Gui *gui)
{
  gint64 now = g_get_monotonic_time();

  if (!gui->ticking)
    return;
  if (gui->recording && gui->phase_start_us != 0)
    samples_add(&gui->frame_layout, (now - gui->phase_start_us) / 1e3);
  gui->phase_start_us = now;
}

static void
on_paint(GdkFrameClock *clock, Gui *gui)
{
  if (!gui->ticking)
    return;
  if (gui->recording && gui->phase_start_us != 0) {
    samples_add(&gui->frame_paint, (g_get_monotonic_time() - gui->phase_start_us) / 1e3);
    samples_add(&gui->frame_cpu, tdm_bench_thread_cpu_ms() - gui->tick_cpu_ms);
  }
  gui->phase_start_us = 0;
}

/* The frame's phases as parts of the current iteration, in every window run, in
 * main-thread CPU time (the wall time of a phase mostly says how long the thread
 * waited for a core): marks after GTK's own handlers of each phase (connected after
 * them), from before-paint, where the frame clock's paint begins, to resume-events,
 * where it ends. */
static void
frame_mark(Gui *gui, double *bucket)
{
  double now = tdm_bench_thread_cpu_ms();

  if (bucket != NULL && gui->frame_mark_ms >= 0)
    *bucket += now - gui->frame_mark_ms;
  gui->frame_mark_ms = now;
}

static void
on_frame_begin(GdkFrameClock *clock, Gui *gui)
{
  gui->frame_mark_ms = tdm_bench_thread_cpu_ms();
  gui->iter.n_frames++;
}

static void
on_frame_before_layout(GdkFrameClock *clock, Gui *gui)
{
  frame_mark(gui, &gui->iter.frame_other_ms);
}

static void
on_frame_layout(GdkFrameClock *clock, Gui *gui)
{
  frame_mark(gui, &gui->iter.layout_ms);
}

static void
on_frame_paint(GdkFrameClock *clock, Gui *gui)
{
  frame_mark(gui, &gui->iter.paint_ms);
}

static void
on_frame_end(GdkFrameClock *clock, Gui *gui)
{
  frame_mark(gui, &gui->iter.frame_other_ms);
  gui->frame_mark_ms = -1;
}

/* --start-detail: the snapshot of a few widget types timed, to tell which part of a
 * frame's paint is whose. Each type's own class slot is replaced, and only types no
 * other type in the window derives from, so no chain-up meets a wrapper. */
typedef struct {
  const char *name;
  GType type;
  void (*snapshot)(GtkWidget *widget, GtkSnapshot *snapshot);
} Timed;

static Timed timed[8];
static guint n_timed;
static Gui *timed_gui;

static void
timed_snapshot(GtkWidget *widget, GtkSnapshot *snapshot)
{
  for (guint i = 0; i < n_timed; i++)
    if (G_OBJECT_TYPE(widget) == timed[i].type) {
      double t0 = tdm_bench_thread_cpu_ms();

      timed[i].snapshot(widget, snapshot);
      timed_gui->iter.snap_ms[i] += tdm_bench_thread_cpu_ms() - t0;
      timed_gui->iter.snap_n[i]++;
      return;
    }
}

/* --start-detail: the region each frame renders (GdkSurface::render), early in a run. */
static gboolean
on_surface_render(GSignalInvocationHint *hint, guint n_values, const GValue *values, gpointer data)
{
  Gui *gui = data;
  const cairo_region_t *region = g_value_get_boxed(&values[1]);
  cairo_rectangle_int_t box;
  double at = (g_get_monotonic_time() - gui->run_start_us) / 1e6;

  if (!gui->recording || at > 0.5 || region == NULL)
    return TRUE;
  cairo_region_get_extents(region, &box);
  fprintf(stderr, "  start+%.3f s: render %d rectangles in %dx%d+%d+%d\n", at,
          cairo_region_num_rectangles(region), box.width, box.height, box.x, box.y);
  return TRUE;
}

static void
time_snapshots(Gui *gui, const char *name, GType type)
{
  GtkWidgetClass *klass = g_type_class_ref(type);

  timed_gui = gui;
  timed[n_timed] = (Timed){name, type, klass->snapshot};
  klass->snapshot = timed_snapshot;
  n_timed++;
}

static void
note_stall(Gui *gui, const Stall *stall)
{
  guint i;

  for (i = 0; i < gui->worst->len; i++)
    if (stall->busy_ms > g_array_index(gui->worst, Stall, i).busy_ms)
      break;
  if (i < N_WORST) {
    g_array_insert_val(gui->worst, i, *stall);
    g_array_set_size(gui->worst, MIN(gui->worst->len, N_WORST));
  }
}

/* The iteration probe: GLib calls prepare() before each poll() and check() after it,
 * for every source, so from one check() to the next prepare() the loop was busy
 * dispatching. It never asks to be dispatched, nor to wake the loop. */
typedef struct {
  GSource source;
  Gui *gui;
} LoopProbe;

/* The start of a /proc file, read again from offset 0 through a descriptor kept open
 * (`*fd` starts at -2), NUL-terminated; FALSE where it cannot be read. */
static gboolean
read_proc(const char *path, int *fd, char *buf, size_t size)
{
  ssize_t n;

  if (*fd == -2)
    *fd = open(path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0)
    return FALSE;
  n = pread(*fd, buf, size - 1, 0);
  if (n <= 0)
    return FALSE;
  buf[n] = '\0';
  return TRUE;
}

/* The main thread's run-queue wait so far, from /proc/thread-self/schedstat (CPU ns,
 * run-queue wait ns, time slices), or 0 where the kernel keeps no schedstats. */
static double
thread_queued_ms(void)
{
  static int fd = -2;
  char buf[128];
  unsigned long long on_cpu, queued;

  if (!read_proc("/proc/thread-self/schedstat", &fd, buf, sizeof buf) ||
      sscanf(buf, "%llu %llu", &on_cpu, &queued) != 2)
    return 0;
  return queued / 1e6;
}

/* The steal time of all vCPUs so far (ms), from /proc/stat's first line. */
static double
steal_ms(void)
{
  static int fd = -2;
  char buf[256];
  unsigned long long v[8];

  if (!read_proc("/proc/stat", &fd, buf, sizeof buf) ||
      sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
             &v[4], &v[5], &v[6], &v[7]) != 8)
    return 0;
  return v[7] * 1000.0 / sysconf(_SC_CLK_TCK);
}

static gboolean
loop_probe_prepare(GSource *source, int *timeout)
{
  Gui *gui = ((LoopProbe *)source)->gui;

  if (gui->recording && gui->woke_us != 0) {
    gint64 now = g_get_monotonic_time();
    Stall stall = gui->iter;

    stall.at_s = (gui->woke_us - gui->run_start_us) / 1e6;
    stall.busy_ms = (now - gui->woke_us) / 1e3;
    stall.cpu_ms = tdm_bench_thread_cpu_ms() - gui->woke_cpu_ms;
    stall.queued_ms = thread_queued_ms() - gui->woke_queued_ms;
    stall.steal_ms = gui->count_steal ? steal_ms() - gui->woke_steal_ms : NAN;
    if (gui->start_detail && stall.at_s < 0.5 && stall.cpu_ms > 0.5) {
      fprintf(stderr, "  start+%.3f s: busy %.1f ms, CPU %.1f ms (start %.1f, layout %.1f, paint %.1f, "
              "frame %.1f, events %.1f; %u frames)\n", stall.at_s, stall.busy_ms, stall.cpu_ms,
              stall.start_ms, stall.layout_ms, stall.paint_ms, stall.frame_other_ms,
              stall.events_ms, stall.n_frames);
      for (guint i = 0; i < n_timed; i++)
        if (stall.snap_n[i] > 0)
          fprintf(stderr, "      snapshot of %s: %.1f ms (%u)\n", timed[i].name, stall.snap_ms[i],
                  stall.snap_n[i]);
    }
    samples_add(&gui->loop_busy, stall.busy_ms);
    samples_add(&gui->loop_cpu, stall.cpu_ms);
    note_stall(gui, &stall);
  }
  gui->woke_us = 0;
  memset(&gui->iter, 0, sizeof gui->iter);
  *timeout = -1;
  return FALSE;
}

static gboolean
loop_probe_check(GSource *source)
{
  Gui *gui = ((LoopProbe *)source)->gui;

  gui->woke_us = g_get_monotonic_time();
  gui->woke_cpu_ms = tdm_bench_thread_cpu_ms();
  gui->woke_queued_ms = thread_queued_ms();
  if (gui->count_steal)
    gui->woke_steal_ms = steal_ms();
  return FALSE;
}

static gboolean
loop_probe_dispatch(GSource *source, GSourceFunc callback, gpointer data)
{
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs loop_probe_funcs = {
  loop_probe_prepare, loop_probe_check, loop_probe_dispatch, NULL, NULL, NULL,
};

/* --wakeups: the main context's poll() wrapped, so each wake-up of the loop while a
 * window run is recorded is put down to its cause: a timeout that fell due (by the
 * name of the source, GTK's and Tandem's are named), the X connection, or another
 * thread waking the context (a source attached from it: TdmRun's deliveries). */
static Gui *census_gui;
static GPollFunc real_poll;

/* Every source attached to the main context since the last look, kept (ref'd) while
 * it lives: GLib lists them by no other means than their ids, which only grow. */
static void
census_scan_sources(Gui *gui)
{
  GSource *probe = g_idle_source_new();
  guint top = g_source_attach(probe, NULL);

  g_source_destroy(probe);
  g_source_unref(probe);
  for (guint id = gui->last_source_id + 1; id < top; id++) {
    GSource *source = g_main_context_find_source_by_id(NULL, id);

    if (source != NULL)
      g_ptr_array_add(gui->sources, g_source_ref(source));
  }
  gui->last_source_id = top;
  for (guint i = gui->sources->len; i-- > 0;)
    if (g_source_is_destroyed(gui->sources->pdata[i]))
      g_ptr_array_remove_index_fast(gui->sources, i);
}

static void
census_count(Gui *gui, const char *cause)
{
  gpointer n = g_hash_table_lookup(gui->wakes, cause);

  g_hash_table_insert(gui->wakes, g_strdup(cause), GUINT_TO_POINTER(GPOINTER_TO_UINT(n) + 1));
}

static const char *
fd_kind(int fd, char *buf, gsize size)
{
  g_autofree char *path = g_strdup_printf("/proc/self/fd/%d", fd);
  g_autofree char *target = g_file_read_link(path, NULL);

  if (target == NULL)
    return "fd";
  if (g_str_has_prefix(target, "socket:"))
    return "the X connection (events, replies)";
  if (strstr(target, "eventfd") != NULL)
    return "another thread woke the context";
  g_snprintf(buf, size, "fd %s", target);
  return buf;
}

static gint
census_poll(GPollFD *fds, guint n_fds, gint timeout)
{
  Gui *gui = census_gui;
  gint ready = real_poll(fds, n_fds, timeout);
  char buf[128];

  if (!gui->recording)
    return ready;
  if (ready > 0) {
    for (guint i = 0; i < n_fds; i++)
      if (fds[i].revents != 0)
        census_count(gui, fd_kind(fds[i].fd, buf, sizeof buf));
    return ready;
  }
  if (ready == 0 && timeout != 0) {
    /* Which source's time came: the earliest ready time now past. */
    gint64 now = g_get_monotonic_time(), best = G_MAXINT64;
    GSource *due = NULL;

    census_scan_sources(gui);
    for (guint i = 0; i < gui->sources->len; i++) {
      GSource *source = gui->sources->pdata[i];
      gint64 t = g_source_get_ready_time(source);

      if (t >= 0 && t <= now + 1000 && t < best)
        best = t, due = source;
    }
    if (due == NULL) {
      census_count(gui, "a timeout (not found)");
    } else {
      const char *name = g_source_get_name(due);

      g_snprintf(buf, sizeof buf, "timeout: %s", name != NULL ? name : "(unnamed)");
      census_count(gui, buf);
    }
  }
  return ready;
}

void
bench_gui_census_start(Gui *gui)
{
  census_gui = gui;
  gui->wakes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  gui->sources = g_ptr_array_new_with_free_func((GDestroyNotify)g_source_unref);
  real_poll = g_main_context_get_poll_func(NULL);
  g_main_context_set_poll_func(NULL, census_poll);
}

static int
compare_counts(gconstpointer a, gconstpointer b, gpointer table)
{
  guint x = GPOINTER_TO_UINT(g_hash_table_lookup(table, *(char *const *)a));
  guint y = GPOINTER_TO_UINT(g_hash_table_lookup(table, *(char *const *)b));

  return (x < y) - (x > y);
}

void
bench_gui_census_print(Gui *gui, double seconds)
{
  guint n;
  g_autofree gpointer *keys = g_hash_table_get_keys_as_array(gui->wakes, &n);

  g_qsort_with_data(keys, n, sizeof keys[0], compare_counts, gui->wakes);
  printf("\nWhy the main loop woke (all window runs, %.1f s of them; per second)\n", seconds);
  for (guint i = 0; i < n; i++)
    printf("  %7.1f  %s\n",
           GPOINTER_TO_UINT(g_hash_table_lookup(gui->wakes, keys[i])) / seconds,
           (char *)keys[i]);
}

/* The timeout probe: how late past its period it comes. */
gboolean
bench_gui_on_probe(gpointer data)
{
  Gui *gui = data;
  gint64 now = g_get_monotonic_time();

  if (gui->recording && gui->last_probe_us != 0)
    samples_add(&gui->probe_late, MAX(0, (now - gui->last_probe_us) / 1e3 - gui->probe_ms));
  gui->last_probe_us = now;
  return G_SOURCE_CONTINUE;
}

/* The snapshots of a few widget types timed, and the region each frame renders. */
void
bench_gui_watch_start_detail(Gui *gui)
{
  time_snapshots(gui, "the window (everything)", TDM_TYPE_WINDOW);
  time_snapshots(gui, "the form", TDM_TYPE_RUN_FORM);
  time_snapshots(gui, "the dashboard", TDM_TYPE_DASHBOARD);
  time_snapshots(gui, "charts", TDM_TYPE_CHART);
  time_snapshots(gui, "header bar", ADW_TYPE_HEADER_BAR);
  g_signal_add_emission_hook(g_signal_lookup("render", GDK_TYPE_SURFACE), 0, on_surface_render,
                             gui, NULL);
}

/* Connected after GTK's own handlers of each phase (see on_update and frame_mark). */
void
bench_gui_watch_frame_clock(Gui *gui, GdkFrameClock *clock)
{
  g_signal_connect_after(clock, "update", G_CALLBACK(on_update), gui);
  g_signal_connect_after(clock, "layout", G_CALLBACK(on_layout), gui);
  g_signal_connect_after(clock, "paint", G_CALLBACK(on_paint), gui);
  gui->frame_mark_ms = -1;
  g_signal_connect(clock, "before-paint", G_CALLBACK(on_frame_begin), gui);
  g_signal_connect_after(clock, "update", G_CALLBACK(on_frame_before_layout), gui);
  g_signal_connect_after(clock, "layout", G_CALLBACK(on_frame_layout), gui);
  g_signal_connect_after(clock, "paint", G_CALLBACK(on_frame_paint), gui);
  g_signal_connect_after(clock, "resume-events", G_CALLBACK(on_frame_end), gui);
}

GSource *
bench_gui_loop_probe_new(Gui *gui)
{
  GSource *source = g_source_new(&loop_probe_funcs, sizeof(LoopProbe));

  ((LoopProbe *)source)->gui = gui;
  return source;
}
