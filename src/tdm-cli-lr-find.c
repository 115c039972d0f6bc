/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-lr-find.c — tandem-train lr-find (tdm-cli-lr-find.h): the points as the
 * experiment measures them, on the thread that trains; the end once it is over. */
#include "tdm-cli-lr-find.h"
#include <glib/gi18n.h>

#include "tdm-cli-guard.h"
#include "tdm-cli-json.h"
#include "tdm-cli-printer.h"
#include "tdm-history.h"
#include "tdm-json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  TdmCliPrinter printer;
  gboolean json;
  int steps;
} LrFind;

static void
on_point(const TdmLrFindPoint *p, gpointer data)
{
  LrFind *f = data;
  if (f->json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    tdm_json_set_string(b, "type", "lr_find");
    tdm_json_set_int(b, "step", p->step);
    tdm_json_set_double(b, "lr", p->lr);
    tdm_json_set_double(b, "loss", p->loss);
    tdm_json_set_double(b, "smoothed_loss", p->smoothed);
    json_builder_end_object(b);
    tdm_cli_print_json_object(b);
  } else {
    g_autofree char *line = tdm_lr_find_to_csv(p, 1);
    fputs(strchr(line, '\n') + 1, stdout);
  }
  fflush(stdout);
  if (f->printer.bar) {
    fputc('\r', stderr);
    fprintf(stderr, _("lr-find: step %d/%d  lr %.3g  loss %.4g"), p->step, f->steps, p->lr,
            p->smoothed);
    fputs("\033[K", stderr);
    fflush(stderr);
    f->printer.bar_shown = TRUE;
  }
}

/* The set-up's events as a training prints them (on stderr: stdout is the data). */
static void
on_event(const TdmEvent *e, gpointer data)
{
  LrFind *f = data;
  if (e->kind == TDM_EVENT_SETUP && !f->json && f->printer.bar)
    tdm_cli_printer_on_event(e, &f->printer);
}

/* The suggestion, once the test is over: a JSON line, or a sentence on stderr. */
static void
print_result(const TdmExperiment *e, const TdmCliExperiment *o)
{
  int count = 0;
  const TdmLrFindPoint *points = tdm_experiment_get_lr_points(e, &count);
  const TdmLrFindOptions *range = tdm_experiment_get_lr_options(e);
  double suggestion = tdm_experiment_get_lr_suggestion(e);
  gboolean diverged = tdm_experiment_get_lr_diverged(e);
  if (o->json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    tdm_json_set_string(b, "type", "lr_find_result");
    tdm_json_set_int(b, "steps", count);
    tdm_json_set_double(b, "suggested_lr", suggestion);
    json_builder_set_member_name(b, "diverged");
    json_builder_add_boolean_value(b, diverged);
    json_builder_set_member_name(b, "stopped");
    json_builder_add_boolean_value(b, tdm_experiment_get_stopped(e));
    json_builder_end_object(b);
    tdm_cli_print_json_object(b);
    return;
  }
  if (o->quiet)
    return;
  double reached = count > 0 ? points[count - 1].lr : range->lr_first;
  if (isfinite(suggestion))
    fprintf(stderr, _("tandem-train: suggested learning rate %.3g (where the smoothed loss "
                      "falls fastest); %d steps from %.3g to %.3g%s\n"),
            suggestion, count, range->lr_first, reached,
            diverged ? _(", ended where the loss diverged") : "");
  else
    fprintf(stderr, _("tandem-train: no suggestion: the loss did not fall over %d steps from "
                      "%.3g to %.3g (try a wider --lr-find-range or more --lr-find-steps)\n"),
            count, range->lr_first, reached);
}

gboolean
tdm_cli_lr_find(TdmExperiment *e, const TdmCliExperiment *o, GCancellable *cancellable,
                int *record_status, GError **error)
{
  g_return_val_if_fail(tdm_experiment_get_kind(e) == TDM_EXPERIMENT_LR_FIND, FALSE);
  const TdmConfig *config = tdm_experiment_get_config(e);
  LrFind f = {
    .printer = {.quiet = o->quiet, .bar = !o->quiet && !o->json && isatty(STDERR_FILENO),
                .config = config, .setup_phase = -1, .setup_said = -1,
                .cancellable = cancellable},
    .json = o->json,
    .steps = tdm_experiment_get_lr_options(e)->steps,
  };
  f.printer.t_start = f.printer.t_epoch = g_get_monotonic_time();
  g_autoptr(TdmHistory) history = o->record ? tdm_history_new(o->history) : NULL;
  g_autoptr(GError) record_error = NULL;
  g_autoptr(TdmRunRecorder) record =
    o->record ? tdm_run_recorder_new_experiment(history, e, NULL, &record_error) : NULL;
  *record_status = 0;
  if (o->record && record == NULL) {
    tdm_cli_line(stderr, _("tandem-train: %s: %s\n"),
                 o->history != NULL ? "--history" : "--record", record_error->message);
    *record_status = 2;
    return TRUE;
  }
  tdm_experiment_set_lr_point_sink(e, on_point, &f);
  if (!o->json)
    fputs("step,lr,loss,smoothed_loss\n", stdout);
  gboolean ok = tdm_experiment_run(e, on_event, &f, cancellable, error);
  tdm_cli_printer_clear_bar(&f.printer);
  if (record != NULL) {
    tdm_run_recorder_end_experiment(record, e, ok || error == NULL ? NULL : *error);
    *record_status = tdm_cli_record_close(record, history, !o->json && !o->quiet);
  }
  if (!ok)
    return FALSE;
  fflush(stdout);
  print_result(e, o);
  return TRUE;
}
