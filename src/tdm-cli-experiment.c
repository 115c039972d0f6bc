/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-experiment.c — tandem-train compare and compare-strategies
 * (tdm-cli-experiment.h). The engine's driver trains on this thread; each training's
 * events come here, where a fresh printer (and recorder) is set up for each. */
#include "tdm-cli-experiment.h"
#include <glib/gi18n.h>

#include "tdm-cli-guard.h"
#include "tdm-cli-json.h"
#include "tdm-cli-printer.h"
#include "tdm-error.h"
#include "tdm-history.h"
#include "tdm-json.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

typedef struct {
  const TdmCliExperiment *options;
  TdmExperiment *experiment;
  GCancellable *cancellable;
  int index;                    /* the training the printer is for; −1 before any */
  TdmCliPrinter printer;
  TdmHistory *history;
  TdmRunRecorder *recorder;     /* the training's */
  TdmRunRecorder *record;       /* the experiment's: its runs, its result */
  int record_status;
  gboolean stepped;
  GError *record_error;         /* a record that could not be made: stop */
} Driver;

static void
announce(Driver *d, const TdmExperimentTraining *t)
{
  const TdmCliExperiment *o = d->options;
  const char *kind = tdm_experiment_kind_name(tdm_experiment_get_kind(d->experiment));
  if (o->json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    tdm_json_set_string(b, "type", "experiment_training");
    tdm_json_set_string(b, "experiment", kind);
    tdm_json_set_int(b, "index", t->index);
    tdm_json_set_string(b, "name", t->name);
    tdm_json_set_int(b, "devices", tdm_config_replica_count(t->config));
    tdm_json_set_string(b, "strategy", tdm_strategy_name(t->config->strategy));
    tdm_json_set_int(b, "steps", t->config->max_steps);
    json_builder_end_object(b);
    tdm_cli_print_json_object(b);
  } else if (!o->quiet) {
    /* Translators: before each run of a comparison: the command, the run's name in
     * the history and what it does, e.g. "compare: Compare: 2 devices: Training on
     * every device…" */
    tdm_cli_line(stderr, _("tandem-train: %s: %s: %s\n"), kind, t->name, t->status);
  }
}

/* The last training's record closed, and named in the experiment's; said as
 * tandem-train train says it. */
static void
end_record(Driver *d)
{
  if (d->recorder == NULL)
    return;
  if (d->record != NULL)
    tdm_run_recorder_add_run(d->record, tdm_run_recorder_get_id(d->recorder));
  d->record_status |= tdm_cli_record_close(d->recorder, d->history,
                                           !d->options->json && !d->options->quiet);
  g_clear_pointer(&d->recorder, tdm_run_recorder_free);
}

/* The experiment's own record ends with its outcome: its result, or why not. */
static void
end_experiment_record(Driver *d, const GError *outcome)
{
  if (d->record == NULL)
    return;
  tdm_run_recorder_end_experiment(d->record, d->experiment, outcome);
  d->record_status |= tdm_cli_record_close(d->record, d->history,
                                           !d->options->json && !d->options->quiet);
  g_clear_pointer(&d->record, tdm_run_recorder_free);
}

static void
begin_training(Driver *d, const TdmExperimentTraining *t)
{
  const TdmCliExperiment *o = d->options;
  tdm_cli_printer_clear_bar(&d->printer);
  end_record(d);
  d->index = t->index;
  announce(d, t);
  d->printer = (TdmCliPrinter){
    .json = o->json,
    .quiet = o->quiet,
    .bar = !o->quiet && !o->json && isatty(STDERR_FILENO),
    .config = t->config,
    .setup_phase = -1,
    .setup_said = -1,
    .cancellable = d->cancellable,
  };
  d->printer.t_start = d->printer.t_epoch = g_get_monotonic_time();
  if (o->record && d->record_error == NULL) {
    d->recorder = tdm_run_recorder_new(d->history, t->config, t->name, &d->record_error);
    d->printer.recorder = d->recorder;
    /* The training cannot be told to stop from here before it starts: it is, at once. */
    if (d->recorder == NULL)
      g_cancellable_cancel(d->cancellable);
  }
}

static void
on_event(const TdmEvent *ev, gpointer data)
{
  Driver *d = data;
  const TdmExperimentTraining *t = tdm_experiment_get_training(d->experiment);
  if (t != NULL && t->index != d->index)
    begin_training(d, t);
  if (ev->kind == TDM_EVENT_STEP)
    d->stepped = TRUE;
  tdm_cli_printer_on_event(ev, &d->printer);
}

static void
print_compare(const TdmExperiment *e, gboolean json)
{
  size_t differing = 0, count = 0;
  double difference = tdm_experiment_get_difference(e, &differing, &count);
  if (json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    tdm_json_set_string(b, "type", "compare_result");
    tdm_json_set_int(b, "devices", tdm_config_replica_count(tdm_experiment_get_config(e)));
    tdm_json_set_int(b, "steps", tdm_experiment_get_steps(e));
    tdm_json_set_int(b, "values", (gint64)count);
    tdm_json_set_int(b, "differing", (gint64)differing);
    json_builder_set_member_name(b, "difference");
    if (isfinite(difference))
      json_builder_add_double_value(b, difference);
    else
      json_builder_add_null_value(b);
    json_builder_end_object(b);
    tdm_cli_print_json_object(b);
    return;
  }
  g_autofree char *result = tdm_experiment_dup_result(e);
  printf("%s\n", result);
}

static void
print_strategies(const TdmExperiment *e, gboolean json)
{
  int count = 0;
  const TdmStrategyFigures *runs = tdm_experiment_get_strategies(e, &count);
  const TdmConfig *config = tdm_experiment_get_config(e);
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_json_set_string(b, "type", "strategies_result");
  json_builder_set_member_name(b, "runs");
  json_builder_begin_array(b);
  for (int i = 0; i < count; i++) {
    const TdmStrategyFigures *f = &runs[i];
    json_builder_begin_object(b);
    tdm_json_set_string(b, "strategy", tdm_strategy_name(f->strategy));
    tdm_json_set_double(b, "step_ms", f->step_ms);
    tdm_json_set_int(b, "samples", f->samples);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    if (!json)
      printf(ngettext("%s: %.3f ms a step (%d sampled step)\n",
                      "%s: %.3f ms a step (mean of %d sampled steps)\n", f->samples),
             tdm_strategy_name(f->strategy), f->step_ms, f->samples);
    for (int r = 0; r < f->replicas; r++) {
      char name[TDM_DEVICE_NAME_MAX];
      double percent = tdm_overlap_percent(f->exposed_ms[r], f->hidden_ms[r]);
      tdm_device_id_name(config->devices[r], name);
      json_builder_begin_object(b);
      tdm_json_set_string(b, "device", name);
      tdm_json_set_double(b, "exposed_ms", f->exposed_ms[r]);
      tdm_json_set_double(b, "hidden_ms", f->hidden_ms[r]);
      json_builder_set_member_name(b, "hidden_percent");
      if (isfinite(percent))
        json_builder_add_double_value(b, round(percent * 10) / 10);
      else
        json_builder_add_null_value(b);
      json_builder_end_object(b);
      if (json)
        continue;
      g_autofree char *hidden = isfinite(percent) ? g_strdup_printf("%.0f %%", percent)
                                                  : g_strdup("—");
      /* Translators: one device under a strategy's line: its number and name, its
       * communication after backward, what ran hidden under backward, and that as a
       * share */
      printf(_("  %d %-7s communication %.3f ms after backward, %.3f ms hidden under it "
               "(%s)\n"),
             r, name, f->exposed_ms[r], f->hidden_ms[r], hidden);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
  if (json)
    tdm_cli_print_json_object(b);
}

gboolean
tdm_cli_experiment(TdmExperiment *e, const TdmCliExperiment *o, GCancellable *cancellable,
                   gboolean *stepped, int *record_status, GError **error)
{
  Driver d = {.options = o, .experiment = e, .cancellable = cancellable, .index = -1};
  g_autoptr(TdmHistory) history = o->record ? tdm_history_new(o->history) : NULL;
  d.history = history;
  if (o->record)
    d.record = tdm_run_recorder_new_experiment(history, e, NULL, &d.record_error);
  /* On the history's step grid, as the window's runs: kept runs overlay point for
   * point, and a short fast run still samples its steps' phases. */
  tdm_experiment_set_summary_steps(e, TDM_HISTORY_SUMMARY_STEPS);
  gboolean ok = d.record_error == NULL && tdm_experiment_run(e, on_event, &d, cancellable, error);
  tdm_cli_printer_clear_bar(&d.printer);
  end_record(&d);
  end_experiment_record(&d, error != NULL ? *error : NULL);
  *stepped = d.stepped;
  *record_status = d.record_status;
  if (d.record_error != NULL) {
    tdm_cli_line(stderr, _("tandem-train: %s: %s\n"),
                 o->history != NULL ? "--history" : "--record", d.record_error->message);
    g_clear_error(&d.record_error);
    g_clear_error(error);
    *record_status = 2;
    return TRUE;
  }
  if (!ok)
    return FALSE;
  fflush(stderr);
  if (tdm_experiment_get_kind(e) == TDM_EXPERIMENT_COMPARE)
    print_compare(e, o->json);
  else
    print_strategies(e, o->json);
  fflush(stdout);
  return TRUE;
}
