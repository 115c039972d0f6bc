/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-history.c: the run history in the window.
 *
 * The store and the page on a history folder filled by hand (rename, an undoable
 * delete, export, a file that cannot be read, the comparison table's figures), and
 * scaling sweeps: listed beside training runs, marked, kept out of the overlays, the
 * baseline and the comparison table, opened in their own window with the Scaling
 * page's chart. The window's own runs are in test-history-window.c; both run under
 * the Xvfb that xvfb-run-test.sh starts, with XDG_DATA_HOME a temporary folder set
 * before GLib first reads it and settings in memory.
 */

#include <locale.h>
#include <math.h>
#include <string.h>

#include <glib/gstdio.h>
#include <adwaita.h>

#include "tdm-build-config.h"

#include "tdm-chart.h"
#include "tdm-dashboard.h"
#include "tdm-history-store.h"
#include "tdm-history-sweep.h"
#include "tdm-history-view.h"
#include "tdm-run-table.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling-table.h"
#include "tdm-series.h"
#include "window-test-util.h"
#include "test-history.h"

static char *data_home;

/* ---- helpers ---------------------------------------------------------------- */

static TdmConfig *
small_config(const char *devices)
{
  TdmConfig *cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;

  g_free(cfg->dataset);
  cfg->dataset = g_strdup("synthetic");
  g_free(cfg->network);
  cfg->network = g_strdup("fc16,relu,fc10");
  cfg->batch = 100;
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  g_assert_no_error(error);
  return cfg;
}

/* A run of `network` written by hand: `n` summaries at `sps` samples/s, device
 * figures, an end. */
static char *
write_run_of(TdmHistory *history, const char *network, const char *devices, const char *name,
             double sps, double accuracy)
{
  g_autoptr(TdmConfig) cfg = small_config(devices);
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecorder) rec = tdm_run_recorder_new(history, cfg, name, &error);
  TdmEvent e = {0};

  g_assert_no_error(error);
  e.kind = TDM_EVENT_STARTED;
  e.started.replicas = tdm_config_replica_count(cfg);
  tdm_run_recorder_add(&e, rec);
  for (int i = 1; i <= 4; i++) {
    memset(&e, 0, sizeof e);
    e.kind = TDM_EVENT_STEP;
    e.step.step = 10 * i;
    e.step.epoch_float = 0.25 * i;
    e.step.train_loss = 2.0 / i;
    e.step.train_accuracy = 0.2 * i;
    e.step.samples_per_second = sps;
    e.step.elapsed = 0.5 * i;
    tdm_run_recorder_add(&e, rec);

    memset(&e, 0, sizeof e);
    e.kind = TDM_EVENT_DEVICES;
    e.devices.step = 10 * i;
    e.devices.replicas = 2;
    for (int r = 0; r < 2; r++) {
      e.devices.device[r].compute_ms = 4;
      e.devices.device[r].comm_ms = 1;
      e.devices.device[r].wait_ms = 0.5;
      e.devices.device[r].tandem_bytes = (gint64)(r + 1) << 20;
    }
    tdm_run_recorder_add(&e, rec);

    memset(&e, 0, sizeof e);
    e.kind = TDM_EVENT_PHASES;
    e.phases.step = 10 * i;
    e.phases.replicas = 2;
    for (int r = 0; r < 2; r++) {
      static const struct { float start, end; int phase; } spans[] = {
        {0, 1, TDM_PHASE_FORWARD}, {1, 3, TDM_PHASE_BACKWARD},
        {3, 3.5f, TDM_PHASE_ALLREDUCE}, {3.5f, 3.75f, TDM_PHASE_UPDATE},
      };
      e.phases.device[r].spans = G_N_ELEMENTS(spans);
      for (guint k = 0; k < G_N_ELEMENTS(spans); k++) {
        e.phases.device[r].span[k].start_ms = spans[k].start;
        e.phases.device[r].span[k].end_ms = spans[k].end;
        e.phases.device[r].span[k].phase = spans[k].phase;
      }
      e.phases.device[r].bytes_sent = 1000000 * (guint64)(r + 1);
      e.phases.device[r].bytes_received = 2000000;
      e.phases.device[r].hidden_ms = r == 1 ? 0.5f : 0;
    }
    tdm_run_recorder_add(&e, rec);
  }
  memset(&e, 0, sizeof e);
  e.kind = TDM_EVENT_FINISHED;
  e.finished.steps = 40;
  e.finished.elapsed = 2.0;
  e.finished.test_loss = 0.5;
  e.finished.test_accuracy = accuracy;
  tdm_run_recorder_add(&e, rec);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_assert_no_error(error);
  return g_strdup(tdm_run_recorder_get_id(rec));
}

static char *
write_run(TdmHistory *history, const char *devices, const char *name, double sps,
          double accuracy)
{
  return write_run_of(history, "fc16,relu,fc10", devices, name, sps, accuracy);
}

/* The History names an early stop as every listing does: the epoch it stopped at
 * and the best one (the engine's sentence, from the run file's finished line). */
static void
test_history_early_stop(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-early-XXXXXX", NULL);
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = small_config("cpu");
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecorder) rec = NULL;
  g_autoptr(TdmHistoryStore) store = NULL;
  g_autofree char *id = NULL;
  TdmEvent e = {0};

  cfg->val_split = 0.1;
  cfg->early_stop = 2;
  rec = tdm_run_recorder_new(history, cfg, "early", &error);
  g_assert_no_error(error);
  e.kind = TDM_EVENT_STARTED;
  e.started.replicas = 1;
  tdm_run_recorder_add(&e, rec);
  memset(&e, 0, sizeof e);
  e.kind = TDM_EVENT_FINISHED;
  e.finished.steps = 30;
  e.finished.test_loss = 0.5;
  e.finished.test_accuracy = 0.8;
  e.finished.early_stopped = TRUE;
  e.finished.epochs_done = 3;
  e.finished.best_epoch = 1;
  e.finished.monitor = TDM_MONITOR_VAL_LOSS;
  e.finished.best_value = 0.4;
  e.finished.best_accuracy = 0.85;
  tdm_run_recorder_add(&e, rec);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  id = g_strdup(tdm_run_recorder_get_id(rec));

  store = tdm_history_store_new(dir);
  tdm_history_store_reload(store);
  {
    g_autofree char *what = tdm_run_item_describe(tdm_history_store_find(store, id));

    g_assert_cmpstr(what, ==, "cpu · allreduce · batch 100 · 80.0 %, stopped early at epoch 3 "
                              "(best 1)");
  }
  g_clear_object(&store);
  remove_folder(dir);
}

static void
count_signal(gpointer instance, gpointer data)
{
  (*(int *)data)++;
}

/* ---- the store and the page, on runs written by hand ------------------------- */

static void
test_history_store(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-store-XXXXXX", NULL);
  g_autofree char *csv = g_build_filename(dir, "run.csv", NULL);
  g_autofree char *bad = g_build_filename(dir, "broken.jsonl", NULL);
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autofree char *first = write_run(history, "cpu:2", "two workers", 100, 0.8);
  g_autofree char *second = write_run(history, "cpu", "one worker", 250, 0.75);
  g_autoptr(TdmHistoryStore) store = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) problems = NULL;
  g_autofree char *contents = NULL;
  int overlays_changed = 0;

  g_assert_true(g_file_set_contents(bad, "this is not a run\n", -1, NULL));
  store = tdm_history_store_new(dir);
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 0);
  tdm_history_store_reload(store);
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 2);
  problems = tdm_history_store_get_problems(store);
  g_assert_cmpuint(g_strv_length(problems), ==, 1);
  g_assert_nonnull(strstr(problems[0], "broken.jsonl"));
  g_unlink(bad);

  /* Oldest first (the same second: by id), with what a row says. */
  TdmRunItem *a = tdm_history_store_find(store, first);
  TdmRunItem *b = tdm_history_store_find(store, second);
  g_assert_nonnull(a);
  g_assert_nonnull(b);
  g_assert_cmpstr(tdm_run_item_get_name(a), ==, "two workers");
  {
    g_autofree char *what = tdm_run_item_describe(a);

    g_assert_cmpstr(what, ==, "cpu ×2 · allreduce · batch 100 · 80.0 %");
  }

  /* Overlays: ticking tells, and the records come oldest first. */
  g_signal_connect(store, "overlays-changed", G_CALLBACK(count_signal), &overlays_changed);
  tdm_run_item_set_overlay(b, TRUE);
  tdm_run_item_set_overlay(a, TRUE);
  g_assert_cmpint(overlays_changed, ==, 2);
  {
    g_autoptr(GPtrArray) records = tdm_history_store_get_overlays(store);

    g_assert_cmpuint(records->len, ==, 2);
  }

  /* The comparison table, against the oldest run until another is chosen. */
  g_assert_true(tdm_history_store_get_baseline(store) == item_at(store, 0));
  {
    TdmRunItem *base = tdm_history_store_get_baseline(store);
    TdmRunItem *other = base == a ? b : a;
    g_autofree char *speedup = tdm_run_table_cell_text(other, base, TDM_RUN_TABLE_SPEEDUP);
    g_autofree char *self_speedup = tdm_run_table_cell_text(base, base, TDM_RUN_TABLE_SPEEDUP);
    g_autofree char *compute = tdm_run_table_cell_text(a, base, TDM_RUN_TABLE_COMPUTE);
    g_autofree char *comm = tdm_run_table_cell_text(a, base, TDM_RUN_TABLE_COMMUNICATION);
    g_autofree char *memory = tdm_run_table_cell_text(a, base, TDM_RUN_TABLE_MEMORY);
    g_autofree char *phases = tdm_run_table_cell_text(a, base, TDM_RUN_TABLE_PHASES);
    g_autofree char *accuracy = tdm_run_table_cell_text(b, base, TDM_RUN_TABLE_ACCURACY);
    g_autofree char *time = tdm_run_table_cell_text(b, base, TDM_RUN_TABLE_TIME);
    g_autofree char *loss = tdm_run_table_cell_text(b, base, TDM_RUN_TABLE_LOSS);
    g_autofree char *traffic = tdm_run_table_cell_text(a, base, TDM_RUN_TABLE_TRAFFIC);
    g_autofree char *no_traffic = tdm_run_table_cell_text(b, base, TDM_RUN_TABLE_TRAFFIC);

    g_assert_cmpstr(speedup, ==, base == a ? "2.50×" : "0.40×");
    g_assert_cmpstr(self_speedup, ==, "1.00×");
    g_assert_cmpstr(compute, ==, "4.00");
    g_assert_cmpstr(comm, ==, "1.00");
    g_assert_cmpstr(memory, ==, "1.0\u00a0MiB · 2.0\u00a0MiB");
    g_assert_cmpstr(accuracy, ==, "75.0 %");
    g_assert_cmpstr(phases, ==, "forward 1.00 · backward 2.00 · all-reduce 0.50 · update 0.25");
    g_assert_cmpstr(time, ==, "2.0 s");
    g_assert_cmpstr(loss, ==, "0.5000");
    g_assert_cmpstr(traffic, ==, "↑ 1.0\u00a0MB ↓ 2.0\u00a0MB · ↑ 2.0\u00a0MB ↓ 2.0\u00a0MB");
    g_assert_cmpstr(no_traffic, ==, "—");   /* one worker moves nothing */
  }
  /* Another network: named in its row, and no speed-up against this one's. */
  {
    g_autofree char *third = write_run_of(history, "fc64,relu,fc10", "cpu", "wider", 500, 0.8);
    g_autofree char *network = NULL, *speedup = NULL;
    TdmRunItem *base = tdm_history_store_get_baseline(store);
    TdmRunItem *c;

    tdm_history_store_reload(store);
    base = tdm_history_store_get_baseline(store);
    c = tdm_history_store_find(store, third);
    g_assert_nonnull(c);
    network = tdm_run_table_cell_text(c, base, TDM_RUN_TABLE_NETWORK);
    speedup = tdm_run_table_cell_text(c, base, TDM_RUN_TABLE_SPEEDUP);
    g_assert_cmpstr(network, ==, "fc64,relu,fc10");
    g_assert_cmpstr(speedup, ==, "—");
    tdm_history_store_delete(store, c);
    g_assert_true(tdm_history_store_commit_deletes(store, &error));
    g_assert_no_error(error);
    a = tdm_history_store_find(store, first);
    b = tdm_history_store_find(store, second);
  }
  tdm_history_store_set_baseline(store, b);
  g_assert_true(tdm_history_store_get_baseline(store) == b);
  g_assert_true(tdm_run_item_get_baseline(b));
  g_assert_false(tdm_run_item_get_baseline(a));

  /* Rename: kept on disk, so a new store (a restart) reads it. */
  g_assert_true(tdm_history_store_rename(store, a, "  renamed  ", &error));
  g_assert_no_error(error);
  g_assert_cmpstr(tdm_run_item_get_name(a), ==, "renamed");
  g_assert_false(tdm_history_store_rename(store, a, "   ", &error));
  g_assert_nonnull(error);
  g_clear_error(&error);
  g_assert_cmpstr(tdm_run_item_get_name(a), ==, "renamed");

  /* Export. */
  g_assert_true(tdm_history_store_export_csv(store, a, csv, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(csv, &contents, NULL, NULL));
  g_assert_true(g_str_has_prefix(contents, "# run: renamed\n"));
  g_assert_nonnull(strstr(contents, "\nkind,step,epoch,train_loss"));
  g_unlink(csv);

  /* Delete: off the list at once, the file still there until committed, and the
   * overlay goes with it; undo brings it back where it was, ticks and all. */
  overlays_changed = 0;
  g_object_ref(a);
  guint where = item_at(store, 0) == a ? 0 : 1;
  tdm_history_store_delete(store, a);
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  g_assert_cmpuint(files_in(dir), ==, 2);
  g_assert_cmpint(overlays_changed, ==, 1);
  tdm_history_store_reload(store);    /* a reload does not bring it back */
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  g_assert_true(tdm_history_store_undo_delete(store, first));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 2);
  g_assert_true(item_at(store, where) == a);
  g_assert_true(tdm_run_item_get_overlay(a));
  g_object_unref(a);
  tdm_history_store_delete(store, a);
  g_assert_true(tdm_history_store_commit_deletes(store, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(files_in(dir), ==, 1);
  g_assert_false(tdm_history_store_undo_delete(store, first));

  /* A run that ends is read alone, last in the list; read again, it keeps its tick. */
  {
    g_autofree char *third = write_run(history, "cpu:2", "third", 200, 0.7);
    guint n = g_list_model_get_n_items(G_LIST_MODEL(store));

    g_assert_true(tdm_history_store_add_run(store, third, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, n + 1);
    g_assert_cmpstr(tdm_run_item_get_id(item_at(store, n)), ==, third);
    tdm_run_item_set_overlay(item_at(store, n), TRUE);
    g_assert_true(tdm_history_store_add_run(store, third, &error));
    g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, n + 1);
    g_assert_true(tdm_run_item_get_overlay(item_at(store, n)));
    g_assert_false(tdm_history_store_add_run(store, "no-such-run", &error));
    g_assert_nonnull(error);
    g_clear_error(&error);
    tdm_history_store_delete(store, item_at(store, n));
    g_assert_true(tdm_history_store_commit_deletes(store, &error));
  }

  /* A restart: what is left, with its name. */
  g_clear_object(&store);
  store = tdm_history_store_new(dir);
  tdm_history_store_reload_async(store);
  g_assert_true(tdm_history_store_get_loading(store));
  g_assert_true(wait_for(not_loading, store, 30));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  g_assert_cmpstr(tdm_run_item_get_name(item_at(store, 0)), ==, "one worker");
  g_clear_object(&store);

  remove_folder(dir);
}

/* The page: rows for the runs, and a delete undone from its toast's action. */
static void
test_history_view(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-view-XXXXXX", NULL);
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autofree char *first = write_run(history, "cpu:2", "two workers", 100, 0.8);
  g_autofree char *second = write_run(history, "cpu", "one worker", 250, 0.75);
  g_autoptr(TdmHistoryStore) store = tdm_history_store_new(dir);
  GtkWidget *window = gtk_window_new();
  tdm_history_store_reload(store);
  GtkWidget *view = tdm_history_view_new(store);
  g_autoptr(GVariant) target = NULL;

  gtk_window_set_child(GTK_WINDOW(window), view);
  gtk_window_present(GTK_WINDOW(window));
  drain();

  g_assert_cmpint(tdm_history_view_get_compare_steps(TDM_HISTORY_VIEW(view)), >, 0);
  g_assert_null(tdm_history_view_get_compare_result(TDM_HISTORY_VIEW(view)));

  g_assert_true(gtk_widget_activate_action(history_row(view, tdm_history_store_find(store, first)),
                                          "run.delete", NULL));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  target = g_variant_ref_sink(g_variant_new_string(first));
  g_assert_true(gtk_widget_activate_action_variant(view, "history.undo-delete", target));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 2);

  /* A run recorded elsewhere (tandem-train --record) appears on reload. */
  {
    g_autofree char *third = write_run(history, "cpu", "from the terminal", 80, 0.7);

    g_assert_true(gtk_widget_activate_action(view, "history.reload", NULL));
    g_assert_true(wait_for(not_loading, store, 30));
    g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 3);
    g_assert_nonnull(tdm_history_store_find(store, third));
  }

  gtk_window_destroy(GTK_WINDOW(window));
  drain();
  g_clear_object(&store);
  /* Nothing was deleted for good. */
  g_assert_cmpuint(files_in(dir), ==, 3);
  remove_folder(dir);
}

/* A sweep written by hand through the engine's recorder: 1 and 2 devices. */
static char *
write_sweep(TdmHistory *history, const char *name)
{
  g_autoptr(TdmConfig) cfg = small_config("cpu:2");
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) experiment = tdm_experiment_new_scaling(cfg, TDM_SCALING_STRONG, 200,
                                                                  &error);
  g_assert_no_error(error);
  g_autoptr(TdmRunRecorder) rec = tdm_run_recorder_new_experiment(history, experiment, name,
                                                                  &error);

  g_assert_no_error(error);
  for (int n = 1; n <= 2; n++) {
    TdmScalingPoint p = {
      .index = n - 1, .count = 2, .devices = n, .batch = 100, .steps = 200,
      .samples_per_second = 1000.0 * (n == 1 ? 4 : 7), .speedup = n == 1 ? 1 : 1.75,
      .efficiency = n == 1 ? 1 : 0.875, .compute_ms = 20.0 / n, .comm_ms = n - 1,
      .wait_ms = 0.5 * (n - 1), .samples_per_second_min = 1000.0 * (n == 1 ? 3.5 : 6.5),
      .samples_per_second_max = 1000.0 * (n == 1 ? 4.5 : 7.5),
      .speedup_min = n == 1 ? 1 : 1.5, .speedup_max = n == 1 ? 1 : 2, .runs = 3,
      .cpu_threads = 1,
    };

    for (int d = 0; d < n; d++)
      p.memory_bytes[d] = (gint64)3 << 20;
    tdm_run_recorder_add_point(&p, rec);
  }
  tdm_run_recorder_end_experiment(rec, experiment, NULL);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_assert_no_error(error);
  return g_strdup(tdm_run_recorder_get_id(rec));
}

/* The rows a column view shows (the comparison table inside the page). */
static guint
column_view_rows(GtkWidget *widget)
{
  for (GtkWidget *c = gtk_widget_get_first_child(widget); c != NULL; c = gtk_widget_get_next_sibling(c)) {
    guint n;

    if (GTK_IS_COLUMN_VIEW(c))
      return g_list_model_get_n_items(G_LIST_MODEL(gtk_column_view_get_model(GTK_COLUMN_VIEW(c))));
    if ((n = column_view_rows(c)) != G_MAXUINT)
      return n;
  }
  return G_MAXUINT;
}

/* The open sweep window (TdmHistorySweep) listed last among the toplevels, or NULL. */
static GtkWidget *
newest_sweep_window(void)
{
  g_autoptr(GListModel) toplevels = g_object_ref(gtk_window_get_toplevels());
  GtkWidget *newest = NULL;

  for (guint i = 0; i < g_list_model_get_n_items(toplevels); i++) {
    g_autoptr(GObject) window = g_list_model_get_item(toplevels, i);

    if (TDM_IS_HISTORY_SWEEP(window))
      newest = GTK_WIDGET(window);
  }
  return newest;
}

/* The open sweep windows (TdmHistorySweep), as toplevels. */
static guint
sweep_windows(void)
{
  g_autoptr(GListModel) toplevels = g_object_ref(gtk_window_get_toplevels());
  guint n = 0;

  for (guint i = 0; i < g_list_model_get_n_items(toplevels); i++) {
    g_autoptr(GObject) window = g_list_model_get_item(toplevels, i);

    n += TDM_IS_HISTORY_SWEEP(window);
  }
  return n;
}

/* A run that only started, then failed (`failed`) or ended at once (0 steps). */
static char *
write_empty_run(TdmHistory *history, const char *name, gboolean failed)
{
  g_autoptr(TdmConfig) cfg = small_config("cpu:2");
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) why = g_error_new_literal(G_IO_ERROR, G_IO_ERROR_FAILED, "out of memory");
  g_autoptr(TdmRunRecorder) rec = tdm_run_recorder_new(history, cfg, name, &error);
  TdmEvent e = {0};

  g_assert_no_error(error);
  e.kind = TDM_EVENT_STARTED;
  e.started.replicas = 2;
  tdm_run_recorder_add(&e, rec);
  memset(&e, 0, sizeof e);
  if (failed) {
    e.kind = TDM_EVENT_FAILED;
    e.failed = why;
  } else {
    e.kind = TDM_EVENT_FINISHED;
    e.finished.stopped = TRUE;
    e.finished.test_accuracy = NAN;
  }
  tdm_run_recorder_add(&e, rec);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_assert_no_error(error);
  return g_strdup(tdm_run_recorder_get_id(rec));
}

static gboolean
has_label(GtkWidget *widget, const char *text)
{
  if (GTK_IS_LABEL(widget) && g_strcmp0(gtk_label_get_label(GTK_LABEL(widget)), text) == 0)
    return TRUE;
  for (GtkWidget *c = gtk_widget_get_first_child(widget); c != NULL; c = gtk_widget_get_next_sibling(c))
    if (has_label(c, text))
      return TRUE;
  return FALSE;
}

/* The comparison table: runs with figures only, the ticked ones once any is ticked,
 * and a new name at once. */
static void
test_history_table_rows(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-table-XXXXXX", NULL);
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autofree char *a_id = write_run(history, "cpu:2", "two workers", 100, 0.8);
  g_autofree char *b_id = write_run(history, "cpu", "one worker", 250, 0.75);
  g_autofree char *failed_id = write_empty_run(history, "failed", TRUE);
  g_autofree char *empty_id = write_empty_run(history, "empty", FALSE);
  g_autoptr(TdmHistoryStore) store = tdm_history_store_new(dir);
  g_autoptr(GError) error = NULL;
  GtkWidget *window = gtk_window_new();
  GtkWidget *view;
  TdmRunItem *a, *b;

  tdm_history_store_reload(store);
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 4);
  a = tdm_history_store_find(store, a_id);
  b = tdm_history_store_find(store, b_id);
  g_assert_false(tdm_run_table_compares(tdm_history_store_find(store, failed_id), FALSE));
  g_assert_false(tdm_run_table_compares(tdm_history_store_find(store, empty_id), FALSE));
  g_assert_true(tdm_run_table_compares(a, FALSE));

  view = tdm_history_view_new(store);
  gtk_window_set_child(GTK_WINDOW(window), view);
  gtk_window_present(GTK_WINDOW(window));
  drain();
  g_assert_cmpuint(column_view_rows(view), ==, 2);
  tdm_run_item_set_overlay(b, TRUE);
  drain();
  g_assert_cmpuint(column_view_rows(view), ==, 1);
  g_assert_false(tdm_run_table_compares(a, TRUE));
  g_assert_true(tdm_run_table_compares(b, TRUE));

  g_assert_true(tdm_history_store_rename(store, b, "the baseline, one CPU worker", &error));
  g_assert_no_error(error);
  drain();
  g_assert_true(has_label(view, "the baseline, one CPU worker"));
  tdm_run_item_set_overlay(b, FALSE);
  drain();
  g_assert_cmpuint(column_view_rows(view), ==, 2);

  /* The run file keeps each device's communication hidden under backward. */
  {
    const TdmRunRecord *r = tdm_run_item_get_record(a);
    guint seen = 0;

    for (guint i = 0; i < r->phases->len; i++) {
      const TdmHistoryPhases *p = &g_array_index(r->phases, TdmHistoryPhases, i);

      g_assert_cmpfloat(p->hidden_ms, ==, p->device == 1 ? 0.5f : 0);
      seen++;
    }
    g_assert_cmpuint(seen, >, 0);
  }
  /* Its mean step, laid out as the strategy runs one (all-reduce after the last
   * backward, on every device at once); a failed run has none. */
  {
    TdmPhasesEvent step;

    g_assert_true(tdm_run_item_mean_step(a, &step));
    g_assert_cmpint(step.replicas, ==, 2);
    for (int d = 0; d < 2; d++) {
      g_assert_cmpint(step.device[d].spans, ==, 4);
      g_assert_cmpint(step.device[d].span[0].phase, ==, TDM_PHASE_FORWARD);
      g_assert_cmpint(step.device[d].span[2].phase, ==, TDM_PHASE_ALLREDUCE);
      g_assert_cmpfloat(step.device[d].span[2].start_ms, ==, 3);
      g_assert_cmpfloat(step.device[d].span[3].end_ms, ==, 3.75f);
    }
    g_assert_false(tdm_run_item_mean_step(tdm_history_store_find(store, failed_id), &step));
  }

  gtk_window_destroy(GTK_WINDOW(window));
  drain();
  remove_folder(dir);
}

/* Sweeps beside training runs: marked, never drawn nor the baseline, not in the
 * comparison table; opened, they show the Scaling page's chart and table. */
static void
test_history_sweeps(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-sweeps-XXXXXX", NULL);
  g_autofree char *csv = g_build_filename(dir, "sweep.csv", NULL);
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autofree char *sweep_id = write_sweep(history, "sweep");
  g_autofree char *run_id = write_run(history, "cpu:2", "a run", 100, 0.8);
  g_autoptr(TdmHistoryStore) store = tdm_history_store_new(dir);
  g_autoptr(GError) error = NULL;
  g_autofree char *contents = NULL;
  GtkWidget *window = gtk_window_new();
  GtkWidget *view, *opened;
  TdmRunItem *sweep, *run;

  tdm_history_store_reload(store);
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 2);
  sweep = tdm_history_store_find(store, sweep_id);
  run = tdm_history_store_find(store, run_id);
  g_assert_true(tdm_run_item_is_sweep(sweep));
  g_assert_false(tdm_run_item_is_sweep(run));
  {
    g_autofree char *what = tdm_run_item_describe(sweep);

    g_assert_cmpstr(what, ==, "scaling, strong · cpu ×2 · allreduce · batch 100 · 1.75× on 2");
  }

  /* Oldest, yet not the baseline; it cannot be ticked nor chosen. */
  g_assert_true(tdm_history_store_get_baseline(store) == run);
  tdm_run_item_set_overlay(sweep, TRUE);
  tdm_run_item_set_baseline(sweep, TRUE);
  g_assert_false(tdm_run_item_get_overlay(sweep));
  g_assert_false(tdm_run_item_get_baseline(sweep));
  {
    g_autoptr(GPtrArray) overlays = tdm_history_store_get_overlays(store);

    g_assert_cmpuint(overlays->len, ==, 0);
  }

  /* Exported as a sweep. */
  g_assert_true(tdm_history_store_export_csv(store, sweep, csv, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(csv, &contents, NULL, NULL));
  g_assert_true(g_str_has_prefix(contents, "# run: sweep\n"));
  g_assert_nonnull(strstr(contents, "\n# kind: scaling\n"));
  g_assert_nonnull(strstr(contents, "\ndevices,batch,steps,samples_per_second,speedup,"));
  g_assert_nonnull(strstr(contents, "\n2,100,200,7000,1.75,0.875,10,1,0.5,6500,7500,1.5,2,3,1,3145728,3145728\n"));
  g_unlink(csv);

  /* On the page: the table has the training run alone; the sweep opens. */
  view = tdm_history_view_new(store);
  gtk_window_set_child(GTK_WINDOW(window), view);
  gtk_window_present(GTK_WINDOW(window));
  drain();
  g_assert_cmpuint(column_view_rows(view), ==, 1);
  /* A training run's row opens no window of its own; the sweep's opens one. */
  g_assert_true(gtk_widget_activate_action(history_row(view, run), "run.open", NULL));
  drain();
  g_assert_cmpuint(sweep_windows(), ==, 0);
  g_assert_true(gtk_widget_activate_action(history_row(view, sweep), "run.open", NULL));
  drain();
  opened = newest_sweep_window();
  g_assert_true(TDM_IS_HISTORY_SWEEP(opened));
  {
    TdmScalingChart *chart = TDM_SCALING_CHART(tdm_history_sweep_get_chart(TDM_HISTORY_SWEEP(opened)));
    g_auto(GStrv) row = NULL;

    g_assert_cmpuint(tdm_scaling_chart_get_n_points(chart), ==, 2);
    g_assert_cmpfloat(tdm_scaling_chart_get_point(chart, 1)->speedup, ==, 1.75);
    row = tdm_scaling_table_row_text(tdm_scaling_chart_get_point(chart, 1));
    g_assert_cmpstr(row[0], ==, "2");
    g_assert_cmpstr(row[3], ==, "1.75×");
    g_assert_cmpstr(row[4], ==, "88 %");
    g_assert_cmpstr(row[8], ==, "3.0\u00a0MiB · 3.0\u00a0MiB");
    /* Its window exports the points as CSV and the chart as SVG, with its settings. */
    {
      g_autofree char *svg_path = g_build_filename(dir, "sweep.svg", NULL);
      g_autofree char *svg = NULL;
      g_autofree char *points = NULL;

      g_assert_true(tdm_history_sweep_export(TDM_HISTORY_SWEEP(opened), csv, FALSE, &error));
      g_assert_no_error(error);
      g_assert_true(g_file_get_contents(csv, &points, NULL, NULL));
      g_assert_nonnull(strstr(points, "\n# kind: scaling\n"));
      g_unlink(csv);
      g_assert_true(tdm_history_sweep_export(TDM_HISTORY_SWEEP(opened), svg_path, TRUE, &error));
      g_assert_no_error(error);
      g_assert_true(g_file_get_contents(svg_path, &svg, NULL, NULL));
      g_assert_nonnull(strstr(svg, "<svg"));
      g_assert_nonnull(strstr(svg, ">Devices</text>"));
      g_assert_nonnull(strstr(svg, "<tandem:setting name=\"batch\">100</tandem:setting>"));
      g_unlink(svg_path);
      g_assert_false(tdm_history_sweep_export(TDM_HISTORY_SWEEP(opened), "/nonexistent-folder/x.svg",
                                              TRUE, &error));
      g_assert_nonnull(error);
      g_clear_error(&error);
    }
    /* A rename shows in the open window's title. */
    g_assert_true(tdm_history_store_rename(store, sweep, "renamed sweep", &error));
    g_assert_no_error(error);
    g_assert_cmpstr(gtk_window_get_title(GTK_WINDOW(opened)), ==, "renamed sweep");
  }
  gtk_window_destroy(GTK_WINDOW(opened));
  drain();
  g_assert_cmpuint(sweep_windows(), ==, 0);

  /* Activating the sweep's row opens it too; it is not made the baseline. */
  {
    GtkWidget *row = history_row(view, sweep);

    g_assert_nonnull(row);
    g_assert_true(gtk_widget_has_css_class(row, "sweep"));
    g_assert_false(gtk_widget_has_css_class(history_row(view, run), "sweep"));
    g_assert_true(gtk_widget_activate_action(row, "run.open", NULL));
    drain();
    g_assert_cmpuint(sweep_windows(), ==, 1);
    g_signal_emit_by_name(row, "activate");
    drain();
    g_assert_cmpuint(sweep_windows(), ==, 2);
    gtk_widget_activate_action(row, "run.baseline", NULL);
    g_assert_false(tdm_run_item_get_baseline(sweep));
    g_assert_true(tdm_history_store_get_baseline(store) == run);
  }

  /* Deleted like a run, and undone. */
  g_assert_true(gtk_widget_activate_action(history_row(view, sweep), "run.delete", NULL));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);
  g_assert_cmpuint(column_view_rows(view), ==, 1);
  g_assert_true(tdm_history_store_undo_delete(store, sweep_id));
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 2);

  gtk_window_destroy(GTK_WINDOW(window));
  drain();
  g_clear_object(&store);
  g_assert_cmpuint(files_in(dir), ==, 2);
  remove_folder(dir);
  /* The sweep windows stay open until closed. */
  {
    g_autoptr(GListModel) toplevels = g_object_ref(gtk_window_get_toplevels());

    for (guint i = g_list_model_get_n_items(toplevels); i-- > 0;) {
      g_autoptr(GObject) w = g_list_model_get_item(toplevels, i);

      if (TDM_IS_HISTORY_SWEEP(w))
        gtk_window_destroy(GTK_WINDOW(w));
    }
    drain();
    g_assert_cmpuint(sweep_windows(), ==, 0);
  }
}

/* Many overlays: each drawn, the first three named in the legend, the rest counted. */
static void
test_history_many_overlays(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-many-XXXXXX", NULL);
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmHistoryStore) store = tdm_history_store_new(dir);
  TdmDashboard *dashboard = g_object_ref_sink(g_object_new(TDM_TYPE_DASHBOARD, NULL));
  TdmChart *loss = tdm_dashboard_get_chart(dashboard, "loss");
  g_autoptr(GPtrArray) records = NULL;

  for (int i = 0; i < 5; i++) {
    g_autofree char *name = g_strdup_printf("run %d", i);
    g_autofree char *id = write_run(history, "cpu:2", name, 100, 0.8);
  }
  tdm_history_store_reload(store);
  for (guint i = 0; i < 5; i++)
    tdm_run_item_set_overlay(item_at(store, i), TRUE);
  records = tdm_history_store_get_overlays(store);
  tdm_dashboard_set_overlays(dashboard, records);

  /* Training and test, five runs, and "2 more runs". */
  g_assert_cmpuint(tdm_chart_get_n_series(loss), ==, 2 + 5 + 1);
  for (guint i = 0; i < 5; i++) {
    int series = tdm_dashboard_get_overlay_series(dashboard, "loss", i);

    g_assert_cmpuint(tdm_series_get_n_appended(tdm_chart_get_series(loss, series)), ==, 4);
    g_assert_cmpint(tdm_chart_get_series_in_legend(loss, series), ==, i < 3);
    /* Each in a colour of its own, none a blue or a red near the live run's (its
     * training curve blue, drawn lighter raw, its test red). */
    {
      GdkRGBA colour, other;

      tdm_chart_get_series_colour(loss, series, &colour);
      g_assert_false(colour.blue > colour.red + 0.2 && colour.blue > colour.green);
      g_assert_false(colour.red > 0.6 && colour.green < 0.45 && colour.blue < 0.3);
      for (guint j = 0; j < i; j++) {
        tdm_chart_get_series_colour(loss, tdm_dashboard_get_overlay_series(dashboard, "loss", j),
                                    &other);
        g_assert_false(gdk_rgba_equal(&colour, &other));
      }
    }
  }
  g_assert_cmpstr(tdm_series_get_name(tdm_chart_get_series(loss, 7)), ==, "2 more runs");
  g_assert_true(tdm_chart_get_series_in_legend(loss, 7));

  /* None: only the live series are left. */
  tdm_dashboard_set_overlays(dashboard, NULL);
  g_assert_cmpuint(tdm_chart_get_n_series(loss), ==, 2);

  g_object_unref(dashboard);
  g_clear_object(&store);
  remove_folder(dir);
}

int
main(int argc, char **argv)
{
  int status;

  /* Before GLib reads it: the window's history goes to a folder of this test. */
  data_home = g_dir_make_tmp("tandem-xdg-XXXXXX", NULL);
  g_setenv("XDG_DATA_HOME", data_home, TRUE);
  g_setenv("LANGUAGE", "C", TRUE);
  setlocale(LC_ALL, "");
  gtk_test_init(&argc, &argv, NULL);
  adw_init();

  g_test_add_func("/history/store", test_history_store);
  g_test_add_func("/history/early-stop", test_history_early_stop);
  g_test_add_func("/history/view", test_history_view);
  g_test_add_func("/history/many-overlays", test_history_many_overlays);
  g_test_add_func("/history/sweeps", test_history_sweeps);
  g_test_add_func("/history/table-rows", test_history_table_rows);
  test_history_add_window();

  status = g_test_run();
  remove_folder(data_home);
  g_free(data_home);
  return status;
}
