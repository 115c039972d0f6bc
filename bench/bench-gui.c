/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-gui.c: what the window costs a training run, and how smooth it stays.
 *
 * Trains the same run (synthetic set, a fixed number of steps through
 * TdmConfig.max_steps) three ways, in turn, --repeat times each: headless, through
 * tdm_trainer_run() with a sink that only copies each event (as tandem-train's
 * does before printing); through the real TdmWindow, driven by its actions as
 * tests/gui/test-window.c drives it; and through the window again with a tick
 * callback on it. It prints samples/s of each, from the engine's own training time
 * and from the wall clock around the whole run, and the window's ratio to headless
 * (target: at least 97 %).
 *
 * The tick callback is how the frame clock is watched (the gaps between frames, and
 * how long each frame's layout and paint took), but it keeps the clock running at
 * 60 Hz, waking the main thread 60 times a second, and on a machine whose every core
 * trains each wake-up holds up a step: so the ratio comes from the runs without it,
 * and the runs with it show what it costs. In all window runs a high-priority probe
 * source notes when each main-loop iteration wakes from poll() and when the next
 * begins, so the time between is how long anything ready to run (input, a frame)
 * would have waited; a source that never asks to wake the loop, it costs nothing.
 * --probe-ms adds a high-priority timeout of that period, which also sees a loop
 * that woke late, at the price of its wake-ups. Target: no stall over 16 ms.
 *
 * Beside them: how often the scheduler forced a thread of the process off its core,
 * how often the main thread woke, and the training threads' nice value (TdmRun lowers
 * it; TANDEM_TRAINING_NICE=0 keeps it); the window's ratio to headless also paired
 * round by round, which a drift of the machine over minutes disturbs less than the
 * two medians. --headless-thread trains the headless runs on a thread of their own,
 * as the window does, to tell what the thread costs from what the window costs.
 *
 * Every window run is recorded in the run history, as the window always does; the
 * history lives in a temporary XDG_DATA_HOME, removed at the end. --overlays N first
 * writes N earlier runs of the same length there (a summary every ten steps, as
 * recorded runs have) and ticks them all, so the loss and accuracy charts draw N
 * faint curves under the live one for the whole measurement (20 of them is the target).
 *
 * The runs and the tables are here; how the main thread is watched during them
 * (frame clock, loop probe, wake-up census) is bench-gui-watch.c.
 *
 * A benchmark, not a test: it asserts nothing. It needs a display:
 *   tests/gui/xvfb-run-test.sh build/bench/bench-gui [--devices cpu:2 --max-steps 600]
 */

#define _GNU_SOURCE  /* RUSAGE_THREAD */

#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <adwaita.h>

#include "tdm-application.h"
#include "tdm-chart.h"
#include "tdm-dashboard.h"
#include "tdm-choice.h"
#include "tdm-config.h"
#include "tdm-form-choices.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-run.h"
#include "tdm-run-form.h"
#include "tdm-spec-entry.h"
#include "tdm-dataset-chooser.h"
#include "tdm-history-store.h"
#include "tdm-renderer.h"
#include "tdm-trainer.h"
#include "tdm-window.h"
#include "tdm-network-catalogue.h"
#include "tdm-bench.h"

#include <glib/gstdio.h>

#include "bench-gui.h"

/* One run of any kind, as measured. */
typedef struct {
  long steps;
  double train_s;   /* the last summary's elapsed: the engine's training time */
  double wall_s;    /* from asking for the run to its end, set-up included */
  double main_cpu_s; /* CPU time of the main thread meanwhile (the window's share) */
  double x_cpu_s;    /* CPU time of the X server meanwhile, or NAN */
  long preempted;    /* involuntary context switches of the whole process meanwhile */
  long main_wakes;   /* voluntary context switches of the main thread meanwhile */
  int worker_nice;   /* nice value of the training threads, seen at the first step */
} Result;

/* Switches of the process (every thread, ended ones too) that the scheduler forced,
 * a training thread being put off a core for another task being the common case. */
static long
process_preempted(void)
{
  struct rusage usage;

  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_nivcsw;
}

/* How often the calling thread went to sleep: for the main thread, its wake-ups. */
static long
thread_sleeps(void)
{
  struct rusage usage;

  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

/* The nice value of this process's thread called `name`, or INT_MIN. */
static int
thread_nice(const char *name)
{
  g_autoptr(GDir) tasks = g_dir_open("/proc/self/task", 0, NULL);
  const char *tid;

  while (tasks != NULL && (tid = g_dir_read_name(tasks)) != NULL) {
    g_autofree char *path = g_build_filename("/proc/self/task", tid, "stat", NULL);
    g_autofree char *stat = NULL;
    const char *after_comm;
    int nice_value;

    if (!g_file_get_contents(path, &stat, NULL, NULL) ||
        (after_comm = strrchr(stat, ')')) == NULL)
      continue;
    /* The name sits between "(" and ")"; nice is the 19th field. */
    if (strncmp(strchr(stat, '(') + 1, name, strlen(name)) == 0 &&
        sscanf(after_comm, ") %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %d",
               &nice_value) == 1)
      return nice_value;
  }
  return INT_MIN;
}

/* The X server, when it is our sibling (xvfb-run-test.sh starts Xvfb, then us), so
 * that what it spends drawing the window can be counted: its pid, or 0. */
static int
find_x_server(void)
{
  g_autoptr(GDir) proc = g_dir_open("/proc", 0, NULL);
  const char *name;

  while (proc != NULL && (name = g_dir_read_name(proc)) != NULL) {
    g_autofree char *path = g_build_filename("/proc", name, "stat", NULL);
    g_autofree char *stat = NULL;
    char comm[64];
    int pid, ppid;

    if (!g_ascii_isdigit(name[0]) || !g_file_get_contents(path, &stat, NULL, NULL))
      continue;
    if (sscanf(stat, "%d (%63[^)]) %*c %d", &pid, comm, &ppid) == 3 &&
        g_str_equal(comm, "Xvfb") && ppid == getppid())
      return pid;
  }
  return 0;
}

/* User and system time of another process, from /proc; NAN if it is gone. */
static double
other_process_cpu_s(int pid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
  g_autofree char *stat = NULL;
  const char *after_comm;
  unsigned long utime, stime;

  if (pid <= 0 || !g_file_get_contents(path, &stat, NULL, NULL) ||
      (after_comm = strrchr(stat, ')')) == NULL ||
      sscanf(after_comm, ") %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
             &stime) != 2)
    return NAN;
  return (double)(utime + stime) / sysconf(_SC_CLK_TCK);
}

static void
samples_init(Samples *s, const char *name)
{
  s->name = name;
  s->ms = g_array_new(FALSE, FALSE, sizeof(double));
}

static double
median(double *values, int n)
{
  qsort(values, n, sizeof values[0], tdm_bench_compare_doubles);
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/* Nearest-rank percentile of sorted values. */
static double
percentile(const GArray *sorted, double p)
{
  guint rank;

  if (sorted->len == 0)
    return NAN;
  rank = (guint)ceil(p / 100 * sorted->len);
  return g_array_index(sorted, double, CLAMP(rank, 1, sorted->len) - 1);
}

static void
print_samples(Samples *s)
{
  const double over = STALL_TARGET_MS;
  guint n_over = 0;

  g_array_sort(s->ms, tdm_bench_compare_doubles);
  for (guint i = 0; i < s->ms->len; i++)
    n_over += g_array_index(s->ms, double, i) > over;
  printf("| %-40s | %6u | %6.2f | %6.2f | %6.2f | %6u |\n", s->name, s->ms->len,
         percentile(s->ms, 50), percentile(s->ms, 99),
         s->ms->len ? g_array_index(s->ms, double, s->ms->len - 1) : NAN, n_over);
}

/* ---- headless ---------------------------------------------------------------- */

/* What any sink must do at least: keep its own copy (TdmRun's posts it on). */
static void
copy_event(const TdmEvent *event, gpointer data)
{
  Result *result = data;
  TdmEvent *copy = g_memdup2(event, sizeof *event);

  if (copy->kind == TDM_EVENT_STEP) {
    result->steps = copy->step.step;
    result->train_s = copy->step.elapsed;
  }
  g_free(copy);
}

typedef struct {
  TdmTrainer *trainer;
  GError *error;
} HeadlessThread;

static gpointer
headless_thread(gpointer data)
{
  HeadlessThread *h = data;

  tdm_trainer_run(h->trainer, NULL, &h->error);
  return NULL;
}

/* --headless-thread: the trainer on a thread of its own, as the window runs it, with
 * the main thread waiting: what the thread alone costs, without any window. */
static gboolean headless_on_thread;

static Result
run_headless(const TdmConfig *config, int x_server)
{
  Result result = {0};
  g_autoptr(GError) error = NULL;
  gint64 start = g_get_monotonic_time();
  double cpu = tdm_bench_thread_cpu_ms();
  long preempted = process_preempted();
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(config, copy_event, &result);

  result.x_cpu_s = other_process_cpu_s(x_server);
  if (headless_on_thread) {
    HeadlessThread h = {trainer, NULL};

    g_thread_join(g_thread_new("tandem-trainer", headless_thread, &h));
    if (h.error != NULL)
      g_propagate_error(&error, h.error);
  } else {
    tdm_trainer_run(trainer, NULL, &error);
  }
  if (error != NULL)
    g_printerr("bench-gui: headless run failed: %s\n", error->message);
  g_clear_pointer(&trainer, tdm_trainer_free);
  result.wall_s = (g_get_monotonic_time() - start) / 1e6;
  result.main_cpu_s = (tdm_bench_thread_cpu_ms() - cpu) / 1e3;
  result.x_cpu_s = other_process_cpu_s(x_server) - result.x_cpu_s;
  result.preempted = process_preempted() - preempted;
  result.worker_nice = 0;
  return result;
}

/* ---- the window ----------------------------------------------------------------- */

/* A control of the window's run form, by its id in tdm-run-form.ui. */
static gpointer
window_child(TdmWindow *window, const char *name)
{
  GObject *form = gtk_widget_get_template_child(GTK_WIDGET(window), TDM_TYPE_WINDOW, "sidebar");

  return gtk_widget_get_template_child(GTK_WIDGET(form), TDM_TYPE_RUN_FORM, name);
}

static gboolean
keep_going(gpointer data)
{
  return G_SOURCE_CONTINUE;
}

/* Turns the main loop until cond() holds or `seconds` pass. */
static gboolean
iterate_until(gboolean (*cond)(gpointer), gpointer data, double seconds)
{
  gint64 end = g_get_monotonic_time() + (gint64)(seconds * G_USEC_PER_SEC);
  guint wake = g_timeout_add(10, keep_going, NULL);

  while (!cond(data) && g_get_monotonic_time() < end)
    g_main_context_iteration(NULL, TRUE);
  g_source_remove(wake);
  return cond(data);
}

static gboolean
never(gpointer data)
{
  return FALSE;
}

static gboolean
nothing_pending(gpointer data)
{
  return !g_main_context_pending(NULL);
}

static gboolean
can_start(gpointer data)
{
  return tdm_window_get_can_start(data);
}

/* The window's controls set to what `config` says, as a person would set them. */
static gboolean
set_up_window(TdmWindow *window, const TdmConfig *config)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows(window_child(window, "device_picker"));
  int presets = 0;
  const TdmNetworkPreset *built_in = tdm_network_presets(&presets);
  int cpus = 0, network = presets; /* the drop-down's last entry: custom */

  for (int i = 0; i < config->replicas; i++)
    cpus += !tdm_device_id_is_gpu(config->devices[i]);
  for (guint r = 0; r < rows->len; r++) {
    TdmDeviceRow *row = rows->pdata[r];
    gboolean chosen = FALSE;

    if (tdm_device_row_is_cpu(row)) {
      chosen = cpus > 0;
      if (chosen)
        tdm_device_row_set_workers(row, cpus);
    } else {
      for (int i = 0; i < config->replicas; i++)
        chosen |= tdm_device_id_equal(config->devices[i],
                                      tdm_device_info_id(tdm_device_row_get_info(row)));
    }
    tdm_device_row_set_active(row, chosen);
  }

  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), config->dataset);
  for (int i = 0; i < presets; i++)
    if (g_str_equal(config->network, built_in[i].name))
      network = i;
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), network);
  if (network == presets)
    tdm_spec_entry_set_text(window_child(window, "spec_entry"), config->network);
  gtk_spin_button_set_value(window_child(window, "batch_spin"), config->batch);
  gtk_spin_button_set_value(window_child(window, "epochs_spin"), config->epochs);
  /* The drop-downs list these in the order of their enums; the optimizer first,
   * since choosing one resets the learning rate. */
  adw_combo_row_set_selected(window_child(window, "optimizer_dropdown"), config->optimizer);
  gtk_spin_button_set_value(window_child(window, "lr_spin"), config->lr);
  adw_combo_row_set_selected(window_child(window, "strategy_dropdown"), config->strategy);
  adw_combo_row_set_selected(window_child(window, "precision_dropdown"),
                             tdm_form_choice_position(TDM_TYPE_PRECISION, config->precision));
  tdm_window_set_max_steps(window, config->max_steps);

  return iterate_until(can_start, window, 60);
}

static void
on_run_event_done(TdmRun *run, const TdmEvent *event, Gui *gui)
{
  if (gui->event_start_ms >= 0)
    gui->iter.events_ms += tdm_bench_thread_cpu_ms() - gui->event_start_ms;
  gui->event_start_ms = -1;
}

/* Every TdmRun event on its way to the window: the engine's own figures. */
static gboolean
on_run_event(GSignalInvocationHint *hint, guint n_values, const GValue *values, gpointer data)
{
  Gui *gui = data;
  const TdmEvent *event = g_value_get_pointer(&values[1]);

  /* Its handlers' time, up to this handler connected after the window's. */
  gui->event_start_ms = tdm_bench_thread_cpu_ms();
  if (event->kind == TDM_EVENT_STARTED)
    g_signal_connect_after(g_value_get_object(&values[0]), "event", G_CALLBACK(on_run_event_done),
                           gui);
  if (event->kind == TDM_EVENT_STEP) {
    if (!gui->have_step)
      gui->worker_nice = thread_nice("tandem-trainer");
    gui->last_step = event->step;
    gui->have_step = TRUE;
  }
  return TRUE;
}

static void
on_running(TdmWindow *window, GParamSpec *pspec, Gui *gui)
{
  if (!tdm_window_get_running(window))
    g_main_loop_quit(gui->loop);
}

/* As a click would come: from the main loop, while it turns. */
static gboolean
press_start(gpointer data)
{
  Gui *gui = data;
  double t0 = tdm_bench_thread_cpu_ms();
  gboolean started = gtk_widget_activate_action(GTK_WIDGET(gui->window), "win.start", NULL);

  gui->iter.start_ms += tdm_bench_thread_cpu_ms() - t0;
  if (gui->start_detail)
    fprintf(stderr, "  Start pressed at %.6f s (CLOCK_MONOTONIC, as perf record -k CLOCK_MONOTONIC)\n",
            g_get_monotonic_time() / 1e6);
  if (!started || !tdm_window_get_running(gui->window)) {
    g_printerr("bench-gui: the window did not start the run\n");
    g_main_loop_quit(gui->loop);
  }
  return G_SOURCE_REMOVE;
}

static Result
run_window(Gui *gui, gboolean tick)
{
  Result result = {0};
  GSource *loop_probe = bench_gui_loop_probe_new(gui);
  gulong handler;
  gint64 start;
  double cpu;
  long preempted, wakes;
  guint probe = 0, ticker = 0;

  gui->have_step = FALSE;
  gui->last_tick_us = gui->last_probe_us = gui->woke_us = 0;
  g_source_set_priority(loop_probe, G_PRIORITY_HIGH);
  g_source_attach(loop_probe, NULL);
  if (gui->probe_ms > 0)
    probe = g_timeout_add_full(G_PRIORITY_HIGH, gui->probe_ms, bench_gui_on_probe, gui, NULL);
  handler = g_signal_connect(gui->window, "notify::running", G_CALLBACK(on_running), gui);
  if (tick)
    ticker = gtk_widget_add_tick_callback(GTK_WIDGET(gui->window), bench_gui_on_tick, gui, NULL);
  gui->ticking = tick;

  /* A headless run just held the main thread: let the window catch up first, as one
   * a person has been looking at would have (the first run's window has yet to lay
   * out the overlays). */
  iterate_until(nothing_pending, NULL, 5);
  iterate_until(never, NULL, 0.3);

  gui->recording = TRUE;
  start = gui->run_start_us = g_get_monotonic_time();
  cpu = tdm_bench_thread_cpu_ms();
  result.x_cpu_s = other_process_cpu_s(gui->x_server);
  preempted = process_preempted();
  wakes = thread_sleeps();
  g_idle_add(press_start, gui);
  g_main_loop_run(gui->loop);
  result.wall_s = (g_get_monotonic_time() - start) / 1e6;
  result.preempted = process_preempted() - preempted;
  result.main_wakes = thread_sleeps() - wakes;
  result.main_cpu_s = (tdm_bench_thread_cpu_ms() - cpu) / 1e3;
  result.x_cpu_s = other_process_cpu_s(gui->x_server) - result.x_cpu_s;
  gui->recording = FALSE;

  g_signal_handler_disconnect(gui->window, handler);
  if (ticker != 0)
    gtk_widget_remove_tick_callback(GTK_WIDGET(gui->window), ticker);
  gui->ticking = FALSE;
  g_source_destroy(loop_probe);
  g_source_unref(loop_probe);
  if (probe != 0)
    g_source_remove(probe);
  if (gui->have_step) {
    result.steps = gui->last_step.step;
    result.train_s = gui->last_step.elapsed;
  }
  result.worker_nice = gui->worker_nice;
  return result;
}

/* ---- history ------------------------------------------------------------------- */

/* An earlier run of `config` as the history keeps it: a summary every ten steps with a
 * falling, noisy loss, and its end. Written through the engine's recorder. */
static void
write_overlay_run(TdmHistory *history, const TdmConfig *config, int index)
{
  g_autofree char *name = g_strdup_printf("earlier run %d", index + 1);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecorder) rec = tdm_run_recorder_new(history, config, name, &error);
  GRand *rand = g_rand_new_with_seed(index + 1);
  TdmEvent e = {0};

  if (rec == NULL) {
    g_printerr("bench-gui: %s\n", error->message);
    exit(1);
  }
  e.kind = TDM_EVENT_STARTED;
  e.started.replicas = tdm_config_replica_count(config);
  tdm_run_recorder_add(&e, rec);
  for (long step = 10; step <= config->max_steps; step += 10) {
    memset(&e, 0, sizeof e);
    e.kind = TDM_EVENT_STEP;
    e.step.step = step;
    e.step.epoch_float = step / 600.0;
    e.step.train_loss = (2.3 * exp(-step / (200.0 + 10 * index)) + 0.1) *
                        (0.9 + 0.2 * g_rand_double(rand));
    e.step.train_accuracy = 1 - e.step.train_loss / 2.5;
    e.step.samples_per_second = 1000;
    e.step.elapsed = step / 100.0;
    tdm_run_recorder_add(&e, rec);
  }
  memset(&e, 0, sizeof e);
  e.kind = TDM_EVENT_FINISHED;
  e.finished.steps = config->max_steps;
  e.finished.elapsed = config->max_steps / 100.0;
  e.finished.test_loss = NAN;
  e.finished.test_accuracy = NAN;
  tdm_run_recorder_add(&e, rec);
  if (!tdm_run_recorder_finish(rec, &error)) {
    g_printerr("bench-gui: %s\n", error->message);
    exit(1);
  }
  g_rand_free(rand);
}

static void
remove_tree(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree char *path = g_build_filename(dir, name, NULL);

    if (g_file_test(path, G_FILE_TEST_IS_DIR))
      remove_tree(path);
    else
      g_unlink(path);
  }
  g_rmdir(dir);
}

/* ---- main ---------------------------------------------------------------------- */

static double
samples_per_second(const Result *r, int batch, gboolean wall)
{
  return r->steps * (double)batch / (wall ? r->wall_s : r->train_s);
}

typedef enum { HEADLESS, WINDOW, TICKED, N_KINDS } RunKind;

static const char *kind_names[N_KINDS] = {"headless", "window", "ticked"};
static const char *kind_labels[N_KINDS] = {"headless", "window",
                                           "window + tick callback"};

typedef struct {
  double train, train_best, wall, wall_best;
  double main_share, x_share;   /* % of one core */
  double preempted, main_wakes; /* per second */
} Summary;

static Summary
summarize(const Result *runs, int n, int batch)
{
  double train[16], wall[16], main_share[16], x_share[16], preempted[16], wakes[16];
  Summary sum;

  for (int i = 0; i < n; i++) {
    train[i] = samples_per_second(&runs[i], batch, FALSE);
    wall[i] = samples_per_second(&runs[i], batch, TRUE);
    main_share[i] = 100 * runs[i].main_cpu_s / runs[i].wall_s;
    x_share[i] = 100 * runs[i].x_cpu_s / runs[i].wall_s;
    preempted[i] = runs[i].preempted / runs[i].wall_s;
    wakes[i] = runs[i].main_wakes / runs[i].wall_s;
  }
  sum.train = median(train, n);
  sum.wall = median(wall, n);
  /* median() sorted them, so the last is the best. */
  sum.train_best = train[n - 1];
  sum.wall_best = wall[n - 1];
  sum.main_share = median(main_share, n);
  sum.x_share = median(x_share, n);
  sum.preempted = median(preempted, n);
  sum.main_wakes = median(wakes, n);
  return sum;
}

int
main(int argc, char **argv)
{
  g_autofree char *devices = NULL, *network = NULL, *dataset = NULL, *strategy = NULL;
  g_autofree char *only = NULL, *page = NULL, *renderer = NULL;
  int batch = 100, max_steps = 600, repeat = 3, probe_ms = 0, overlays = 0;
  Gui gui = {0};
  GOptionEntry entries[] = {
    {"devices", 0, 0, G_OPTION_ARG_STRING, &devices, "Devices (default cpu:2)", "LIST"},
    {"network", 0, 0, G_OPTION_ARG_STRING, &network, "Network or spec (default mlp)", "NET"},
    {"dataset", 0, 0, G_OPTION_ARG_STRING, &dataset, "Dataset (default synthetic)", "NAME"},
    {"batch", 0, 0, G_OPTION_ARG_INT, &batch, "Global batch size (default 100)", "N"},
    {"strategy", 0, 0, G_OPTION_ARG_STRING, &strategy, "main or allreduce", "S"},
    {"max-steps", 0, 0, G_OPTION_ARG_INT, &max_steps, "Steps per run (default 600)", "N"},
    {"repeat", 0, 0, G_OPTION_ARG_INT, &repeat, "Runs of each kind, alternating (default 3)",
     "N"},
    {"probe-ms", 0, 0, G_OPTION_ARG_INT, &probe_ms,
     "Also a high-priority timeout of this period (default: none)", "MS"},
    {"headless-thread", 0, 0, G_OPTION_ARG_NONE, &headless_on_thread,
     "Headless runs train on a thread of their own, as the window's do", NULL},
    {"page", 0, 0, G_OPTION_ARG_STRING, &page,
     "The window's page shown meanwhile (default charts; devices shows the timeline)", "PAGE"},
    {"overlays", 0, 0, G_OPTION_ARG_INT, &overlays,
     "Earlier runs drawn under the live one (default 0)", "N"},
    {"start-detail", 0, 0, G_OPTION_ARG_NONE, &gui.start_detail,
     "Print every main-loop iteration of each window run's first 500 ms", NULL},
    {"wakeups", 0, 0, G_OPTION_ARG_NONE, &gui.count_wakes,
     "Count why the main loop woke during the window runs", NULL},
    {"renderer", 0, 0, G_OPTION_ARG_STRING, &renderer,
     "GTK's renderer: auto, as the application chooses (default), or a GSK_RENDERER name",
     "NAME"},
    {"steal", 0, 0, G_OPTION_ARG_NONE, &gui.count_steal,
     "Read the vCPUs' steal time at each iteration (costs a /proc/stat read each)", NULL},
    {"only", 0, 0, G_OPTION_ARG_STRING, &only,
     "Only these kinds of run: headless, window, ticked (comma-separated)",
     "KIND"},
    {NULL},
  };
  g_autoptr(GOptionContext) context = g_option_context_new("— the window's cost to training");
  g_autoptr(TdmConfig) config = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) device_list = NULL;
  Result runs[N_KINDS][16];
  GdkFrameClock *clock;

  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    g_printerr("bench-gui: %s\n", error->message);
    return 2;
  }
  repeat = CLAMP(repeat, 1, 16);
  probe_ms = MAX(probe_ms, 0);

  g_free(config->dataset);
  config->dataset = g_strdup(dataset ? dataset : "synthetic");
  g_free(config->network);
  config->network = g_strdup(network ? network : "mlp");
  config->batch = batch;
  config->max_steps = max_steps;
  /* Pinned to float32, the default before auto, in the window as in the headless run, so
   * that the figures stay comparable with earlier ones on GPUs. */
  config->precision = TDM_PRECISION_FP32;
  /* Enough epochs that max_steps ends the run, never an epoch's evaluation. */
  config->epochs = 1000;
  if (!tdm_config_set_devices(config, devices ? devices : "cpu:2", &error) ||
      (strategy != NULL && !tdm_strategy_from_name(strategy, &config->strategy)) ||
      !tdm_config_validate(config, &error)) {
    g_printerr("bench-gui: %s\n", error ? error->message : "unknown strategy");
    return 2;
  }

  /* Settings in memory, from this build's schemas; English whatever the locale. The
   * runs the window records go to a folder of this benchmark, set before GLib reads
   * it. */
  g_setenv("GSETTINGS_BACKEND", "memory", TRUE);
  g_autofree char *data_home = g_dir_make_tmp("bench-gui-XXXXXX", NULL);
  g_setenv("XDG_DATA_HOME", data_home, TRUE);
  tdm_application_init_uninstalled();
  /* xvfb-run-test.sh sets cairo for the tests; the benchmark draws as asked. */
  if (renderer == NULL || strcmp(renderer, "auto") == 0)
    g_unsetenv("GSK_RENDERER");
  else
    g_setenv("GSK_RENDERER", renderer, TRUE);
  if (!gtk_init_check()) {
    fprintf(stderr, "bench-gui: no display; run it under tests/gui/xvfb-run-test.sh\n");
    return 77;
  }
  adw_init();
  {
    /* As the application does at start-up, before its first window. */
    static const char *choices[] = {"as GSK_RENDERER says", "OpenGL", "cairo (OpenGL is software)",
                                     "cairo (no OpenGL)"};
    g_autofree char *gl = NULL;
    TdmRendererChoice choice = tdm_renderer_choose(gdk_display_get_default(), &gl);

    printf("renderer: %s%s%s%s; GSK_RENDERER=%s\n", choices[choice], gl ? " [" : "", gl ? gl : "",
           gl ? "]" : "", g_getenv("GSK_RENDERER") ? g_getenv("GSK_RENDERER") : "(unset)");
  }

  gui.loop = g_main_loop_new(NULL, FALSE);
  gui.probe_ms = probe_ms;
  samples_init(&gui.frame_gap, "frame gap (tick to tick)");
  samples_init(&gui.frame_late, "frame: late past one refresh (= stall)");
  samples_init(&gui.frame_layout, "frame: layout, when needed");
  samples_init(&gui.frame_paint, "frame: paint (render to X), when needed");
  samples_init(&gui.frame_cpu, "frame: main-thread CPU, painted frames");
  samples_init(&gui.loop_busy, "loop: busy between polls (= stall)");
  samples_init(&gui.loop_cpu, "loop: main-thread CPU of that");
  samples_init(&gui.probe_late, "timeout probe: late past its period");
  gui.worst = g_array_new(FALSE, FALSE, sizeof(Stall));
  /* The signal exists once the class does. */
  g_type_class_unref(g_type_class_ref(TDM_TYPE_RUN));
  g_signal_add_emission_hook(g_signal_lookup("event", TDM_TYPE_RUN), 0, on_run_event, &gui,
                             NULL);

  gui.window = g_object_ref_sink(tdm_window_new(NULL));
  device_list = tdm_device_list();
  tdm_window_set_devices(gui.window, device_list);
  gtk_window_present(GTK_WINDOW(gui.window));
  if (!set_up_window(gui.window, config)) {
    g_printerr("bench-gui: the window cannot start this run\n");
    return 1;
  }
  if (overlays > 0) {
    TdmHistoryStore *store = tdm_window_get_history(gui.window);

    for (int i = 0; i < overlays; i++)
      write_overlay_run(tdm_history_store_get_history(store), config, i);
    tdm_history_store_reload(store);
    for (guint i = 0; i < g_list_model_get_n_items(G_LIST_MODEL(store)); i++) {
      g_autoptr(TdmRunItem) item = g_list_model_get_item(G_LIST_MODEL(store), i);

      tdm_run_item_set_overlay(item, TRUE);
    }
  }
  if (page != NULL)
    tdm_window_set_page(gui.window, page);
  gui.x_server = find_x_server();
  if (gui.count_wakes)
    bench_gui_census_start(&gui);
  if (gui.start_detail)
    bench_gui_watch_start_detail(&gui);
  clock = gtk_widget_get_frame_clock(GTK_WIDGET(gui.window));
  bench_gui_watch_frame_clock(&gui, clock);
  {
    gint64 refresh_us = 0;

    gdk_frame_clock_get_refresh_info(clock, 0, &refresh_us, NULL);
    gui.refresh_ms = refresh_us > 0 ? refresh_us / 1e3 : 1000.0 / 60;
  }

  printf("bench-gui: %s on %s, batch %d, %d steps, %s set; %d runs of each kind, in turn; "
         "%d earlier runs overlaid; page %s\n",
         config->network, devices ? devices : "cpu:2", batch, max_steps, config->dataset, repeat,
         overlays, page != NULL ? page : "charts");
  fflush(stdout);

  /* Not counted: OpenBLAS's threads, page faults, the dataset's first build. */
  {
    g_autoptr(TdmConfig) warm_up = tdm_config_copy(config);

    warm_up->max_steps = MAX(1, config->max_steps / 10);
    run_headless(warm_up, gui.x_server);
  }

  memset(runs, 0, sizeof runs);
  for (int i = 0; i < repeat; i++) {
    /* Each kind goes first in turn, so a slow drift of the machine favours none. */
    for (int k = 0; k < N_KINDS; k++) {
      RunKind kind = (k + i) % N_KINDS;

      if (only != NULL && strstr(only, kind_names[kind]) == NULL)
        continue;
      runs[kind][i] = kind == HEADLESS ? run_headless(config, gui.x_server)
                                       : run_window(&gui, kind == TICKED);
    }
    fprintf(stderr, "  run %d: headless %.0f, window %.0f, ticked %.0f samples/s\n", i + 1,
            samples_per_second(&runs[HEADLESS][i], batch, FALSE),
            samples_per_second(&runs[WINDOW][i], batch, FALSE),
            samples_per_second(&runs[TICKED][i], batch, FALSE));
  }

  /* The median, and the best: another job on the machine only ever slows a run down,
   * so the best of each kind is the least disturbed. */
  printf("\nThroughput (samples/s; %d runs of each; training time from the engine, wall from "
         "start to end)\n", repeat);
  printf("| %-27s | %5s | %12s | %10s | %11s | %9s | %11s | %8s |\n", "run", "steps",
         "train median", "train best", "wall median", "wall best", "main thread", "X server");
  printf("|-----------------------------|-------|--------------|------------|-------------|"
         "-----------|-------------|----------|\n");
  Summary sum[N_KINDS];
  {
    for (int kind = 0; kind < N_KINDS; kind++) {
      sum[kind] = summarize(runs[kind], repeat, batch);
      printf("| %-27s | %5ld | %12.0f | %10.0f | %11.0f | %9.0f | %9.1f %% | %6.1f %% |\n",
             kind_labels[kind], runs[kind][0].steps, sum[kind].train, sum[kind].train_best,
             sum[kind].wall, sum[kind].wall_best, sum[kind].main_share, sum[kind].x_share);
    }
    for (int kind = WINDOW; kind < N_KINDS; kind++)
      printf("| %-27s | %5s | %11.1f%% | %9.1f%% | %10.1f%% | %8.1f%% | %11s | %8s |\n",
             kind == WINDOW ? "ratio: window / headless" : "ratio: ticked / headless", "",
             100 * sum[kind].train / sum[HEADLESS].train,
             100 * sum[kind].train_best / sum[HEADLESS].train_best,
             100 * sum[kind].wall / sum[HEADLESS].wall,
             100 * sum[kind].wall_best / sum[HEADLESS].wall_best, "", "");
    /* Each window run against the headless run next to it: a drift of the machine
     * over minutes cancels out, which it does not between the two medians. */
    for (int kind = WINDOW; kind < N_KINDS; kind++) {
      double train[16], wall[16];

      for (int i = 0; i < repeat; i++) {
        train[i] = runs[kind][i].train_s > 0 ? runs[HEADLESS][i].train_s / runs[kind][i].train_s
                                             : NAN;
        wall[i] = runs[kind][i].wall_s > 0 ? runs[HEADLESS][i].wall_s / runs[kind][i].wall_s
                                           : NAN;
      }
      printf("| %-27s | %5s | %11.1f%% | %10s | %10.1f%% | %9s | %11s | %8s |\n",
             kind == WINDOW ? "paired: window / headless" : "paired: ticked / headless", "",
             100 * median(train, repeat), "", 100 * median(wall, repeat), "", "", "");
    }
  }
  printf("(paired: the median of each round's ratio, window run against headless run.\n");
  printf(" target: window / headless >= 97 %%. Main thread and X server: CPU time as a share "
         "of one core, median;\n the headless run's main thread trains. \"ticked\" is the "
         "window with the 60 Hz tick callback that\n watches the frame clock below.)\n");

  printf("\nScheduling (per second, median: switches forced on any thread of the process, "
         "mostly training\nthreads put off a core; the main thread's wake-ups; the "
         "training threads' nice value)\n");
  printf("| %-27s | %10s | %10s | %4s |\n", "run", "preempted", "main wakes", "nice");
  printf("|-----------------------------|------------|------------|------|\n");
  for (int kind = 0; kind < N_KINDS; kind++)
    printf("| %-27s | %10.1f | %10.1f | %4d |\n", kind_labels[kind], sum[kind].preempted,
           kind == HEADLESS ? NAN : sum[kind].main_wakes, runs[kind][0].worker_nice);

  printf("\nMain loop while the window trained (ms; frames: the ticked runs, loop: every window "
         "run;\ntarget: no stall over %.0f ms)\n", STALL_TARGET_MS);
  printf("| %-40s | %6s | %6s | %6s | %6s | %6s |\n", "measure", "n", "p50", "p99", "max",
         "> 16ms");
  printf("|------------------------------------------|--------|--------|--------|--------|--------|\n");
  print_samples(&gui.frame_gap);
  print_samples(&gui.frame_late);
  print_samples(&gui.frame_layout);
  print_samples(&gui.frame_paint);
  print_samples(&gui.frame_cpu);
  print_samples(&gui.loop_busy);
  print_samples(&gui.loop_cpu);
  if (probe_ms > 0) {
    print_samples(&gui.probe_late);
    printf("(a refresh is %.1f ms; the timeout probe's period is %d ms)\n", gui.refresh_ms,
           probe_ms);
  } else {
    printf("(a refresh is %.1f ms)\n", gui.refresh_ms);
  }
  printf("\nLongest stalls: seconds into a run, ms busy, ms of it the main thread worked, ms it\n"
         "was ready but had no core (queued), and where that CPU time went (ms): the Start\n"
         "handler, frames' layout and paint, the rest of the frames, TdmRun's events; frames in\n"
         "the iteration. Busy less CPU less queued is time the thread slept (X, locks) or,\n"
         "on a virtual machine, lost to the hypervisor (steal, all vCPUs, with --steal).\n");
  printf("  %7s    %9s  %12s  %9s  %8s  %6s %6s %6s %6s %6s %3s\n", "at", "busy", "main CPU",
         "queued", "steal", "start", "layout", "paint", "frame", "events", "fr");
  for (guint i = 0; i < gui.worst->len; i++) {
    const Stall *w = &g_array_index(gui.worst, Stall, i);

    printf("  %7.2f s  %6.1f ms  %6.1f ms CPU  %6.1f ms  %5.0f ms  %6.1f %6.1f %6.1f %6.1f %6.1f %3u\n",
           w->at_s, w->busy_ms, w->cpu_ms, w->queued_ms, w->steal_ms, w->start_ms, w->layout_ms, w->paint_ms, w->frame_other_ms,
           w->events_ms, w->n_frames);
  }

  if (gui.count_wakes) {
    double seconds = 0;

    for (int i = 0; i < repeat; i++)
      seconds += runs[WINDOW][i].wall_s + runs[TICKED][i].wall_s;
    bench_gui_census_print(&gui, seconds);
  }

  gtk_window_destroy(GTK_WINDOW(gui.window));
  while (g_main_context_iteration(NULL, FALSE))
    ;
  g_object_unref(gui.window);
  g_main_loop_unref(gui.loop);
  remove_tree(data_home);
  return 0;
}
