/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-history.c — runs kept on disk: recorded while training, read back by a new
 * history object (as after a restart), identical runs overlaying point for point,
 * rename, export, delete, a crash's truncated last line, a corrupt file named in the
 * message; the phases, bytes and device means a run file keeps. Its parts: "compare
 * with one device" on 2 CPU workers (test-history-compare.c); scaling sweeps and
 * comparisons as records of their own kind: written and read back, cancelled, failed,
 * cut by a crash, beside files written before there were kinds
 * (test-history-experiments.c). The set-up they share is here (test-history.h). */
#include "synthetic-idx.h"
#include "tdm-error.h"
#include "tdm-history.h"
#include "tdm-trainer.h"
#include "test-history.h"
#include "ticking-clock.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

/* The runs' dataset folder: the synthetic set's images, 6,000 to train on and 500 to
 * test, read from IDX files by every run (the scaling driver opens the dataset by
 * name); "synthetic" by name would generate 70,000 in each. */
static char *dataset;

TdmConfig *
config(const char *devices, long steps)
{
  TdmConfig *cfg = tdm_config_new();
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup("fc16,relu,fc10");
  cfg->epochs = 1;
  cfg->max_steps = steps;
  cfg->seed = 5;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  return cfg;
}

/* Trains `cfg` recording into `history`; returns the run's id. */
char *
record_run(TdmHistory *history, const TdmConfig *cfg, const char *name)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecorder) rec = tdm_run_recorder_new(history, cfg, name, &error);
  g_assert_no_error(error);
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, tdm_run_recorder_add, rec);
  tdm_trainer_options(trainer)->summary_steps = 5;
  gint ticks = 0;
  tdm_trainer_set_span_clock(trainer, test_ticking_clock, &ticks);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_assert_no_error(error);
  return g_strdup(tdm_run_recorder_get_id(rec));
}

char *
temp_folder(void)
{
  g_autoptr(GError) error = NULL;
  char *dir = g_dir_make_tmp("tandem-history-XXXXXX", &error);
  g_assert_no_error(error);
  return dir;
}

void
remove_folder(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_unlink(path);
  }
  g_rmdir(dir);
}

static void
test_survives_restart(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmConfig) cfg = config("cpu:2", 30);
  g_autofree char *id = NULL;
  {
    g_autoptr(TdmHistory) history = tdm_history_new(dir);
    id = record_run(history, cfg, "two workers");
  }
  /* A new history object on the same folder: what a restarted program sees. */
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) runs = tdm_history_list(history, problems);
  for (guint i = 0; i < problems->len; i++)
    g_test_message("%s", (char *)problems->pdata[i]);
  g_assert_cmpuint(problems->len, ==, 0);
  g_assert_cmpuint(runs->len, ==, 1);
  TdmRunRecord *r = runs->pdata[0];
  g_assert_cmpstr(r->id, ==, id);
  g_assert_cmpstr(r->name, ==, "two workers");
  g_assert_cmpint(r->replicas, ==, 2);
  g_assert_cmpstr(r->config->network, ==, "fc16,relu,fc10");
  g_assert_cmpint(r->config->seed, ==, 5);
  g_assert_true(r->finished);
  g_assert_false(r->failed);
  g_assert_cmpint(r->final.steps, ==, 30);
  /* Summaries on the step grid: 5, 10, … 30. */
  g_assert_cmpuint(r->points->len, ==, 6);
  for (guint i = 0; i < r->points->len; i++) {
    const TdmHistoryPoint *p = &g_array_index(r->points, TdmHistoryPoint, i);
    g_assert_cmpint(p->step, ==, 5 * (long)(i + 1));
    g_assert_true(isfinite(p->train_loss));
  }
  g_assert_cmpuint(r->device_points->len, >=, 2);
  g_assert_cmpfloat(tdm_run_record_samples_per_second(r), >, 0);
  remove_folder(dir);
}

/* Two runs of one configuration record the same series by step, point for point. */
static void
test_identical_runs_overlay(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = config("cpu:2", 40);
  cfg->strategy = TDM_STRATEGY_MAIN;
  g_autofree char *a_id = record_run(history, cfg, "first");
  g_autofree char *b_id = record_run(history, cfg, "second");
  g_assert_cmpstr(a_id, !=, b_id);
  g_autoptr(TdmRunRecord) a = tdm_history_load(history, a_id, NULL);
  g_autoptr(TdmRunRecord) b = tdm_history_load(history, b_id, NULL);
  g_assert_nonnull(a);
  g_assert_nonnull(b);
  g_assert_cmpuint(a->points->len, ==, 8);
  g_assert_cmpuint(a->points->len, ==, b->points->len);
  for (guint i = 0; i < a->points->len; i++) {
    const TdmHistoryPoint *p = &g_array_index(a->points, TdmHistoryPoint, i);
    const TdmHistoryPoint *q = &g_array_index(b->points, TdmHistoryPoint, i);
    g_assert_cmpint(p->step, ==, q->step);
    g_assert_cmpfloat(p->epoch, ==, q->epoch);
    g_assert_cmpfloat(p->train_loss, ==, q->train_loss);
    g_assert_cmpfloat(p->train_accuracy, ==, q->train_accuracy);
  }
  remove_folder(dir);
}

static void
test_rename_export_delete(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = config("cpu", 10);
  g_autofree char *id = record_run(history, cfg, NULL);
  g_autoptr(GError) error = NULL;

  g_assert_true(tdm_history_rename(history, id, "baseline", &error));
  g_assert_no_error(error);
  g_autoptr(TdmRunRecord) r = tdm_history_load(history, id, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(r->name, ==, "baseline");
  /* The run file keeps the precision asked (the default, auto) and what it computed
   * in, from its start. */
  g_assert_cmpint(r->config->precision, ==, TDM_PRECISION_AUTO);
  g_assert_cmpint(r->precision_used, ==, TDM_PRECISION_FP32);

  g_autofree char *csv = g_build_filename(dir, "run.csv", NULL);
  g_assert_true(tdm_history_export_csv(history, id, csv, &error));
  g_assert_no_error(error);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(csv, &text, NULL, NULL));
  /* The settings come first as comment lines (the run's name, its date, then
   * tdm_config_describe's pairs), then the table. */
  g_auto(GStrv) all = g_strsplit(text, "\n", -1);
  g_assert_cmpstr(all[0], ==, "# run: baseline");
  g_assert_true(g_str_has_prefix(all[1], "# date: "));
  g_assert_nonnull(strstr(text, "\n# devices: cpu\n"));
  g_assert_nonnull(strstr(text, "\n# precision: fp32 (auto)\n"));
  g_autofree char *named = g_strdup_printf("\n# dataset: %s\n", dataset);
  g_assert_nonnull(strstr(text, named));
  char **lines = all;
  while (*lines != NULL && (*lines)[0] == '#')
    lines++;
  g_assert_true(g_str_has_prefix(lines[0], "kind,step,epoch,train_loss"));
  g_assert_true(g_str_has_prefix(lines[1], "step,5,"));
  g_assert_true(g_str_has_prefix(lines[2], "step,10,"));
  g_unlink(csv);

  g_assert_true(tdm_history_delete(history, id, &error));
  g_assert_no_error(error);
  g_autoptr(GPtrArray) runs = tdm_history_list(history, NULL);
  g_assert_cmpuint(runs->len, ==, 0);
  g_assert_false(tdm_history_delete(history, id, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY);
  g_clear_error(&error);
  /* Ids never leave the folder. */
  g_assert_false(tdm_history_delete(history, "../x", &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY);
  remove_folder(dir);
}

void
append(const char *path, const char *text)
{
  FILE *f = fopen(path, "a");
  g_assert_nonnull(f);
  fputs(text, f);
  fclose(f);
}

/* A crash mid-line leaves a partial last line: ignored. Garbage elsewhere is an error
 * naming the file and line, and the list leaves that run out and says why. */
/* Two summaries of ten steps each, at 100 and at 300 samples/s: 20 steps' samples in
 * the time of 10/100 + 10/300, so 150, not the mean 200. */
static void
test_samples_per_second(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = config("cpu", 20);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecorder) rec = tdm_run_recorder_new(history, cfg, NULL, &error);
  g_assert_no_error(error);
  const double rates[] = {100, 300};
  for (int i = 0; i < 2; i++) {
    TdmEvent e = {.kind = TDM_EVENT_STEP};
    e.step.step = 10 * (i + 1);
    e.step.samples_per_second = rates[i];
    tdm_run_recorder_add(&e, rec);
  }
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_autoptr(TdmRunRecord) r = tdm_history_load(history, tdm_run_recorder_get_id(rec), &error);
  g_assert_no_error(error);
  g_assert_cmpfloat_with_epsilon(tdm_run_record_samples_per_second(r), 150, 1e-9);
  remove_folder(dir);
}

/* Each strategy's phases, per device, kept in the run file: all-reduce on both
 * devices; with `main`, reduce and broadcast, and the update on the main device only. */
static void
test_phases_recorded(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  const TdmStrategy strategies[] = {TDM_STRATEGY_ALLREDUCE, TDM_STRATEGY_MAIN};
  for (guint s = 0; s < G_N_ELEMENTS(strategies); s++) {
    g_autoptr(TdmConfig) cfg = config("cpu:3", 40);
    cfg->strategy = strategies[s];
    g_autofree char *id = record_run(history, cfg, NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmRunRecord) r = tdm_history_load(history, id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(r->phases->len, >=, 2);
    double ms[2][TDM_PHASE_COUNT];
    for (int d = 0; d < 2; d++) {
      g_assert_cmpint(tdm_run_record_phase_means(r, d, ms[d]), >, 0);
      g_assert_cmpfloat(ms[d][TDM_PHASE_FORWARD], >, 0);
      g_assert_cmpfloat(ms[d][TDM_PHASE_BACKWARD], >, 0);
    }
    if (strategies[s] == TDM_STRATEGY_ALLREDUCE) {
      for (int d = 0; d < 2; d++) {
        g_assert_cmpfloat(ms[d][TDM_PHASE_ALLREDUCE], >, 0);
        g_assert_cmpfloat(ms[d][TDM_PHASE_REDUCE], ==, 0);
        g_assert_cmpfloat(ms[d][TDM_PHASE_UPDATE], >, 0);
      }
    } else {
      g_assert_cmpfloat(ms[0][TDM_PHASE_ALLREDUCE], ==, 0);
      g_assert_cmpfloat(ms[0][TDM_PHASE_REDUCE] + ms[1][TDM_PHASE_REDUCE], >, 0);
      g_assert_cmpfloat(ms[0][TDM_PHASE_BROADCAST] + ms[1][TDM_PHASE_BROADCAST], >, 0);
      g_assert_cmpfloat(ms[0][TDM_PHASE_UPDATE], >, 0);
      g_assert_cmpfloat(ms[1][TDM_PHASE_UPDATE], ==, 0);
    }
    /* The bytes each device moved per step, kept beside the phases: all-reduce
     * spreads them evenly; `main` on CPU workers is a star, its main device moving
     * N−1 = 2 times what each other device does. */
    guint64 sent[3], received[3];
    for (int d = 0; d < 3; d++) {
      g_assert_true(tdm_run_record_bytes_per_step(r, d, &sent[d], &received[d]));
      g_assert_cmpuint(sent[d], >, 0);
    }
    g_assert_false(tdm_run_record_bytes_per_step(r, 3, &sent[0], &sent[0]));
    int hub = strategies[s] == TDM_STRATEGY_MAIN ? 2 : 1;
    g_assert_cmpuint(sent[0], ==, hub * sent[1]);
    g_assert_cmpuint(received[0], ==, hub * received[1]);
    g_assert_cmpuint(sent[1], ==, sent[2]);
    g_assert_cmpuint(received[1], ==, received[2]);
  }
  remove_folder(dir);
}

static void
test_damaged_files(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = config("cpu", 10);
  g_autofree char *id = record_run(history, cfg, "crashed");
  g_autofree char *file = g_strconcat(id, ".jsonl", NULL);
  g_autofree char *path = g_build_filename(dir, file, NULL);
  append(path, "{\"type\":\"step\",\"step\":15,\"train_lo");

  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecord) r = tdm_history_load(history, id, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r->points->len, ==, 2);

  append(path, "\n{\"type\":\"step\",\"step\":20}\n");
  g_autoptr(TdmRunRecord) broken = tdm_history_load(history, id, &error);
  g_assert_null(broken);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY);
  g_assert_nonnull(strstr(error->message, path));
  g_assert_nonnull(strstr(error->message, "line"));

  g_autofree char *other = g_build_filename(dir, "empty.jsonl", NULL);
  g_assert_true(g_file_set_contents(other, "", 0, NULL));
  g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) runs = tdm_history_list(history, problems);
  g_assert_cmpuint(runs->len, ==, 0);
  g_assert_cmpuint(problems->len, ==, 2);
  remove_folder(dir);
}

static void
add_devices(TdmRunRecorder *rec, long step, double compute, double comm, double wait)
{
  TdmEvent e = {.kind = TDM_EVENT_DEVICES};
  e.devices.step = step;
  e.devices.replicas = 2;
  for (int r = 0; r < 2; r++) {
    e.devices.device[r].compute_ms = compute * (r + 1);
    e.devices.device[r].comm_ms = comm;
    e.devices.device[r].wait_ms = wait;
    e.devices.device[r].tandem_bytes = 1 << 20;
  }
  tdm_run_recorder_add(&e, rec);
}

/* A run's compute per step is the mean over its steps. Each DEVICES event
 * weighs the steps it covers, and an event that timed no step (all zeros, as after an
 * evaluation, at the same step) is not a step of zero milliseconds. */
static void
test_device_means(void)
{
  g_autofree char *dir = temp_folder();
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = config("cpu:2", 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecorder) rec = tdm_run_recorder_new(history, cfg, "means", &error);
  g_assert_no_error(error);
  add_devices(rec, 10, 8, 1, 0.5);      /* 10 steps: the first, slow ones */
  add_devices(rec, 100, 2, 0.5, 0.25);  /* 90 steps */
  add_devices(rec, 100, 0, 0, 0);       /* after the epoch's evaluation: nothing timed */
  add_devices(rec, 200, 2, 0.5, 0.25);  /* 100 steps */
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_autoptr(TdmRunRecord) r = tdm_history_load(history, tdm_run_recorder_get_id(rec), &error);
  g_assert_no_error(error);

  double ms[3];
  g_assert_cmpint(tdm_run_record_device_means(r, 0, ms), ==, 200);
  g_assert_cmpfloat(fabs(ms[0] - (10 * 8 + 190 * 2) / 200.0), <, 1e-12);
  g_assert_cmpfloat(fabs(ms[1] - (10 * 1 + 190 * 0.5) / 200.0), <, 1e-12);
  g_assert_cmpfloat(fabs(ms[2] - (10 * 0.5 + 190 * 0.25) / 200.0), <, 1e-12);
  g_assert_cmpint(tdm_run_record_device_means(r, 1, ms), ==, 200);
  g_assert_cmpfloat(fabs(ms[0] - 2 * (10 * 8 + 190 * 2) / 200.0), <, 1e-12);
  g_assert_cmpint(tdm_run_record_device_means(r, -1, ms), ==, 200);
  g_assert_cmpfloat(fabs(ms[0] - 1.5 * (10 * 8 + 190 * 2) / 200.0), <, 1e-12);
  /* A device the run did not have, and a run without figures. */
  g_assert_cmpint(tdm_run_record_device_means(r, 5, ms), ==, 0);
  g_assert_true(isnan(ms[0]));

  /* A real run on two workers: the mean lies within its events' figures. */
  g_autoptr(TdmConfig) run = config("cpu:2", 40);
  g_autofree char *id = record_run(history, run, "real");
  g_autoptr(TdmRunRecord) real = tdm_history_load(history, id, &error);
  g_assert_no_error(error);
  g_assert_cmpint(tdm_run_record_device_means(real, -1, ms), ==,
                  g_array_index(real->device_points, TdmHistoryDevicePoint,
                                real->device_points->len - 1).step);
  g_assert_cmpfloat(ms[0], >, 0);
  remove_folder(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/history/survives-restart", test_survives_restart);
  g_test_add_func("/history/identical-runs-overlay", test_identical_runs_overlay);
  g_test_add_func("/history/rename-export-delete", test_rename_export_delete);
  g_test_add_func("/history/damaged-files", test_damaged_files);
  g_test_add_func("/history/samples-per-second", test_samples_per_second);
  g_test_add_func("/history/phases-recorded", test_phases_recorded);
  g_test_add_func("/history/device-means", test_device_means);
  test_history_add_compare();
  test_history_add_experiments();
  dataset = test_synthetic_idx_new(0, 6000, 500);
  int status = g_test_run();
  test_remove_synthetic_idx(dataset);
  return status;
}
