/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-runs.c — tandem-train runs, --show-run, --export-run, --config
 * (tdm-cli-runs.h). */
#include "tdm-cli-runs.h"
#include "tdm-cli-guard.h"
#include "tdm-cli-json.h"
#include <glib/gi18n.h>
#include "tdm-checkpoint.h"
#include "tdm-error.h"
#include "tdm-file.h"
#include "tdm-history.h"
#include "tdm-json.h"
#include "tdm-printable.h"
#include "tdm-tensorboard-run.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_BAD_INPUT 2

static int
fail(const char *flag, const char *message)
{
  tdm_cli_line(stderr, _("tandem-train: %s: %s\n"), flag, message);
  return EXIT_BAD_INPUT;
}

/* A missing run file is a wrong id: say so, and where the runs are. */
static int
fail_load(const char *flag, TdmHistory *history, const char *id, const GError *error)
{
  if (!g_error_matches(error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
    return fail(flag, error->message);
  g_autofree char *message =
      g_strdup_printf(_("no run “%s” in %s (tandem-train runs lists them)"), id,
                      tdm_history_get_folder(history));
  return fail(flag, message);
}

/* The history kept in folder, or NULL after saying why it cannot be read. */
static TdmHistory *
open_history(const char *folder)
{
  g_autoptr(TdmHistory) history = tdm_history_new(folder);
  g_autoptr(GError) error = NULL;
  if (!tdm_history_check_folder(history, &error)) {
    fail("--history", error->message);
    return NULL;
  }
  return g_steal_pointer(&history);
}

/* As the window's History says it: the accuracy, stopped, failed or unfinished; in
 * the reader's language, or in English for --json (read by programs). */
static char *
outcome(const TdmRunRecord *r, gboolean translated)
{
#define WORDS(text) (translated ? _(text) : (text))
  if (tdm_run_record_is_sweep(r))
    return g_strdup_printf(WORDS(N_("scaling %s, %u points")),
                           tdm_scaling_mode_name(r->experiment.mode), r->experiment.points->len);
  if (r->kind == TDM_RUN_EXPERIMENT && !r->failed && r->experiment.result != NULL)
    return g_strdup_printf("%s: %s", tdm_experiment_kind_name(r->experiment.kind),
                           r->experiment.result);
  if (r->failed)
    return g_strdup(WORDS(N_("failed")));
  g_autofree char *early = r->finished ? tdm_finished_early_stop_text(&r->final, translated)
                                        : NULL;
  if (r->finished && isfinite(r->final.test_accuracy) && early != NULL)
    return g_strdup_printf("%.1f %%, %s", 100.0 * r->final.test_accuracy, early);
  if (r->finished && isfinite(r->final.test_accuracy))
    return g_strdup_printf("%.1f %%", 100.0 * r->final.test_accuracy);
  if (r->finished)
    return g_strdup(WORDS(N_("stopped")));
  return g_strdup(WORDS(N_("unfinished")));
#undef WORDS
}

static char *
created_text(const TdmRunRecord *r)
{
  g_autoptr(GDateTime) t = g_date_time_new_from_unix_local(r->created);
  return t != NULL ? g_date_time_format(t, "%Y-%m-%d %H:%M") : g_strdup("?");
}

static void
json_summary(JsonBuilder *b, const TdmRunRecord *r)
{
  tdm_json_set_string(b, "id", r->id);
  tdm_json_set_string(b, "name", r->name);
  tdm_json_set_int(b, "created", r->created);
  tdm_json_set_string(b, "kind", tdm_run_kind_name(r->kind));
  if (r->kind == TDM_RUN_EXPERIMENT)
    tdm_json_set_string(b, "experiment", tdm_experiment_kind_name(r->experiment.kind));
  tdm_json_set_string(b, "network", r->config->network);
  tdm_json_set_string(b, "dataset", r->config->dataset);
  g_autofree char *devices = tdm_config_devices_text(r->config);
  tdm_json_set_string(b, "devices", devices);
  tdm_json_set_int(b, "batch", r->config->batch);
  tdm_json_set_int(b, "epochs", r->config->epochs);
  g_autofree char *text = outcome(r, FALSE);
  tdm_json_set_string(b, "outcome", text);
  json_builder_set_member_name(b, "finished");
  json_builder_add_boolean_value(b, r->finished);
  json_builder_set_member_name(b, "failed");
  json_builder_add_boolean_value(b, r->failed);
  if (r->finished) {
    json_builder_set_member_name(b, "stopped");
    json_builder_add_boolean_value(b, r->final.stopped);
    tdm_json_set_double(b, "test_accuracy", r->final.test_accuracy);
    json_builder_set_member_name(b, "early_stopped");
    json_builder_add_boolean_value(b, r->final.early_stopped);
    if (r->final.best_epoch > 0) {
      tdm_json_set_int(b, "best_epoch", r->final.best_epoch);
      tdm_json_set_string(b, "monitor", tdm_monitor_name((TdmMonitor)r->final.monitor));
      tdm_json_set_double(b, "best_value", r->final.best_value);
    }
    tdm_json_set_int(b, "epochs_done", r->final.epochs_done);
  }
}


int
tdm_cli_runs_list(const char *folder, gboolean json)
{
  g_autoptr(TdmHistory) history = open_history(folder);
  if (history == NULL)
    return EXIT_BAD_INPUT;
  g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) runs = tdm_history_list(history, problems);
  for (guint i = 0; i < problems->len; i++)
    tdm_cli_line(stderr, _("tandem-train: warning: %s\n"), (const char *)problems->pdata[i]);
  if (!json && runs->len == 0) {
    tdm_cli_line(stdout,
                 _("no runs in %s (tandem-train --record keeps one, as the window does)\n"),
                 tdm_history_get_folder(history));
    return 0;
  }
  if (!json)
    printf("%-28s %-16s %-12s %-14s %-10s %6s %6s  %s\n", "ID", "DATE", "NETWORK", "DATASET",
           "DEVICES", "BATCH", "EPOCHS", "OUTCOME  NAME");
  for (guint i = 0; i < runs->len; i++) {
    const TdmRunRecord *r = runs->pdata[i];
    if (json) {
      g_autoptr(JsonBuilder) b = json_builder_new();
      json_builder_begin_object(b);
      json_summary(b, r);
      json_builder_end_object(b);
      tdm_cli_print_json_object(b);
      continue;
    }
    g_autofree char *date = created_text(r);
    g_autofree char *devices = tdm_config_devices_text(r->config);
    g_autofree char *result = outcome(r, TRUE);
    g_autofree char *dataset = g_path_get_basename(r->config->dataset);
    tdm_cli_line(stdout, "%-28s %-16s %-12.12s %-14.14s %-10.10s %6d %6d  %s  %s\n", r->id,
                 date, r->config->network, dataset, devices, r->config->batch,
                 r->config->epochs, result, g_strcmp0(r->name, date) == 0 ? "" : r->name);
  }
  fflush(stdout);
  return 0;
}

int
tdm_cli_runs_show(const char *folder, const char *id, gboolean json)
{
  g_autoptr(TdmHistory) history = open_history(folder);
  if (history == NULL)
    return EXIT_BAD_INPUT;
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmRunRecord) r = tdm_history_load(history, id, &error);
  if (r == NULL)
    return fail_load("--show-run", history, id, error);
  if (json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_summary(b, r);
    g_autofree char *config = tdm_config_to_json(r->config);
    g_autoptr(JsonNode) node = tdm_json_parse(config, -1, TDM_ENGINE_ERROR_HISTORY, NULL);
    json_builder_set_member_name(b, "config");
    json_builder_add_value(b, g_steal_pointer(&node));
    /* What the run computed in, auto resolved (the config says what it asked). */
    tdm_json_set_string(b, "precision_used", tdm_precision_name(r->precision_used));
    json_builder_set_member_name(b, "epochs");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->epochs->len; i++) {
      const TdmEpochEvent *e = &g_array_index(r->epochs, TdmEpochEvent, i);
      json_builder_begin_object(b);
      tdm_json_set_int(b, "epoch", e->epoch);
      tdm_json_set_int(b, "step", e->step);
      tdm_json_set_double(b, "train_loss", e->train_loss);
      tdm_json_set_double(b, "train_accuracy", e->train_accuracy);
      tdm_json_set_double(b, "test_loss", e->test_loss);
      tdm_json_set_double(b, "test_accuracy", e->test_accuracy);
      if (isfinite(e->val_accuracy))
        tdm_json_set_double(b, "val_accuracy", e->val_accuracy);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    tdm_cli_print_json_object(b);
    return 0;
  }
  g_autofree char *date = created_text(r);
  g_autofree char *result = outcome(r, TRUE);
  tdm_cli_line(stdout, _("run %s: %s\n"), r->id, r->name);
  printf(_("  created: %s\n"), date);
  printf(_("  outcome: %s\n"), result);
  if (r->failed && r->error != NULL)
    tdm_cli_line(stdout, _("  error: %s\n"), r->error);
  /* The precision as the run computed in it ("fp32 (auto)"), as its exports say it. */
  g_auto(GStrv) pairs = tdm_run_record_describe(r);
  for (int i = 0; pairs[i] != NULL && pairs[i + 1] != NULL; i += 2)
    tdm_cli_line(stdout, "  %s: %s\n", pairs[i], pairs[i + 1]);
  for (guint i = 0; i < r->epochs->len; i++) {
    const TdmEpochEvent *e = &g_array_index(r->epochs, TdmEpochEvent, i);
    printf(_("epoch %d  train loss %.3f acc %.1f%%  "), e->epoch, e->train_loss,
           100 * e->train_accuracy);
    if (isfinite(e->val_accuracy))
      printf(_("val loss %.3f acc %.1f%%  "), e->val_loss, 100 * e->val_accuracy);
    printf(_("test loss %.3f acc %.1f%%  %.1f s\n"), e->test_loss, 100 * e->test_accuracy,
           e->elapsed);
  }
  if (r->finished)
    printf(_("%ld steps in %.1f s of training\n"), r->final.steps, r->final.elapsed);
  fflush(stdout);
  return 0;
}

int
tdm_cli_runs_export(const char *folder, const char *id)
{
  g_autoptr(TdmHistory) history = open_history(folder);
  if (history == NULL)
    return EXIT_BAD_INPUT;
  g_autoptr(GError) error = NULL;
  /* The engine writes the file (the one CSV writer); it goes to stdout from there. */
  g_autofree char *path = NULL;
  int fd = g_file_open_tmp("tandem-export-XXXXXX.csv", &path, &error);
  if (fd < 0)
    return fail("--export-run", error->message);
  close(fd);
  gboolean ok = tdm_history_export_csv(history, id, path, &error);
  g_autofree char *text = NULL;
  gsize length = 0;
  if (ok)
    ok = g_file_get_contents(path, &text, &length, &error);
  g_unlink(path);
  if (!ok)
    return fail_load("--export-run", history, id, error);
  fwrite(text, 1, length, stdout);
  fflush(stdout);
  return 0;
}

int
tdm_cli_runs_export_tensorboard(const char *folder, const char *root, gboolean quiet)
{
  g_autoptr(TdmHistory) history = open_history(folder);
  if (history == NULL)
    return EXIT_BAD_INPUT;
  g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) runs = tdm_history_list(history, problems);
  g_autoptr(GHashTable) used = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  int written = 0;
  for (guint i = 0; i < runs->len; i++) {
    const TdmRunRecord *r = runs->pdata[i];
    if (r->kind != TDM_RUN_TRAINING)
      continue;
    g_autofree char *path = tdm_tensorboard_run_folder(root, r->name);
    if (g_hash_table_contains(used, path)) {
      g_autofree char *named = g_strdup_printf("%s (%s)", r->name, r->id);
      g_free(path);
      path = tdm_tensorboard_run_folder(root, named);
    }
    g_hash_table_add(used, g_strdup(path));
    g_autoptr(GError) error = NULL;
    if (!tdm_tensorboard_export_record(r, path, &error))
      return fail("--export-tensorboard", error->message);
    written++;
  }
  for (guint i = 0; i < problems->len; i++)
    tdm_cli_line(stderr, _("tandem-train: skipped: %s\n"), (const char *)problems->pdata[i]);
  if (!quiet)
    tdm_cli_line(stderr,
                 ngettext("tandem-train: %d run written to %s (tensorboard --logdir %s)\n",
                          "tandem-train: %d runs written to %s (tensorboard --logdir %s)\n",
                          written),
                 written, root, root);
  return 0;
}

static TdmConfig *
config_from_text(const char *path, const char *json, GError **error)
{
  g_autoptr(GError) local = NULL;
  /* A hand-written file's typo would otherwise be a setting silently not made. */
  g_autofree char *unknown = tdm_config_json_unknown_key(json);
  if (unknown != NULL) {
    /* The key is the file's text: a newline in it would make the message two lines. */
    g_autofree char *shown = tdm_printable(unknown);
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("%s: unknown key “%s” (the keys are those --print-config writes)"), path,
                shown);
    return NULL;
  }
  TdmConfig *c = tdm_config_from_json(json, &local);
  if (c == NULL)
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION, "%s: %s", path,
                local->message);
  return c;
}

static void
forget_outputs(TdmConfig *c)
{
  g_clear_pointer(&c->save_path, g_free);
  g_clear_pointer(&c->save_best_path, g_free);
}

/* Whether the file's first byte that is not a space opens a JSON object: a
 * configuration or a run file, not a checkpoint (whose first 8 bytes are a length). */
static gboolean
starts_as_json(const char *path, gboolean *json, goffset *size, GError **error)
{
  struct stat st;
  int fd = tdm_file_open_regular(path, "", TDM_ENGINE_ERROR_INVALID_OPTION, &st, error);
  if (fd < 0)
    return FALSE;
  *size = st.st_size;
  char head[64];
  ssize_t n;
  while ((n = read(fd, head, sizeof head)) < 0 && errno == EINTR)
    ;
  close(fd);
  ssize_t i = 0;
  while (i < n && g_ascii_isspace(head[i]))
    i++;
  *json = i < n && head[i] == '{';
  return TRUE;
}

static TdmConfig *
load_config(const char *path, GError **error)
{
  g_autoptr(GError) local = NULL;
  gboolean is_json = FALSE;
  goffset size = 0;
  if (!starts_as_json(path, &is_json, &size, error))
    return NULL;
  if (is_json) {
    /* A run file: JSON lines whose first is the settings, read alone (a run file
     * may be far larger than a configuration). A file past a configuration's cap
     * that is no run file is said to be too large, not to have a long line. */
    TdmConfig *settings = NULL;
    if (!tdm_history_file_settings(path, &settings, &local) && size <= TDM_CONFIG_MAX_BYTES) {
      g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                          local->message);
      return NULL;
    }
    g_clear_error(&local);
    if (settings != NULL) {
      g_autofree char *text = tdm_config_to_json(settings);
      tdm_config_free(settings);
      /* Recorded by this version: the keys are known; read back as any file is. */
      TdmConfig *c = config_from_text(path, text, error);
      if (c != NULL)
        forget_outputs(c);
      return c;
    }
    /* A configuration as --print-config writes it. */
    g_autoptr(GBytes) bytes = tdm_file_read_all(path, _("configuration "),
                                                TDM_ENGINE_ERROR_INVALID_OPTION,
                                                TDM_CONFIG_MAX_BYTES, error);
    if (bytes == NULL)
      return NULL;
    return config_from_text(path, g_bytes_get_data(bytes, NULL), error);
  }
  /* Anything else must be a checkpoint. */
  g_autoptr(TdmCheckpoint) ckpt = tdm_checkpoint_load(path, &local);
  if (ckpt == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("%s: neither a configuration (JSON), a run file nor a checkpoint: %s"), path,
                local->message);
    return NULL;
  }
  const char *json = tdm_checkpoint_get_metadata(ckpt, "config");
  if (json == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("%s: a checkpoint with no run configuration in its metadata"), path);
    return NULL;
  }
  TdmConfig *c = config_from_text(path, json, error);
  if (c != NULL)
    forget_outputs(c);
  return c;
}

TdmConfig *
tdm_cli_config_load(const char *path, GError **error)
{
  g_autoptr(TdmConfig) c = load_config(path, error);
  /* Checked before the flags apply, as a resumed checkpoint's are: a bad value is
   * blamed on the file and its key, never on a flag nobody typed. */
  if (c == NULL || !tdm_config_validate_saved(c, path, error))
    return NULL;
  return g_steal_pointer(&c);
}
