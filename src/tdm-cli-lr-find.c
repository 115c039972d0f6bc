/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-lr-find.c — tandem-train --lr-find (tdm-cli-lr-find.h). */
#include "tdm-cli-lr-find.h"
#include <glib/gi18n.h>

#include "tdm-cli-json.h"
#include "tdm-cli-printer.h"
#include "tdm-lr-find.h"
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

gboolean
tdm_cli_lr_find(const TdmConfig *config, double lr_first, double lr_last, int steps,
                gboolean json, gboolean quiet, GCancellable *cancellable, GError **error)
{
  LrFind f = {
    .printer = {.quiet = quiet, .bar = !quiet && !json && isatty(STDERR_FILENO),
                .config = config, .setup_phase = -1, .setup_said = -1,
                .cancellable = cancellable},
    .json = json,
    .steps = steps,
  };
  f.printer.t_start = f.printer.t_epoch = g_get_monotonic_time();
  TdmLrFindOptions options = {lr_first, lr_last, steps};
  g_autoptr(TdmLrFinder) finder = tdm_lr_finder_new(config, &options);
  tdm_lr_finder_set_sink(finder, on_event, &f);
  tdm_lr_finder_set_point_func(finder, on_point, &f);
  if (!json)
    fputs("step,lr,loss,smoothed_loss\n", stdout);
  gboolean ok = tdm_lr_finder_run(finder, cancellable, error);
  tdm_cli_printer_clear_bar(&f.printer);
  if (!ok)
    return FALSE;
  int count = 0;
  const TdmLrFindPoint *points = tdm_lr_finder_get_points(finder, &count);
  double suggestion = tdm_lr_finder_get_suggestion(finder);
  gboolean diverged = tdm_lr_finder_diverged(finder);
  if (json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    tdm_json_set_string(b, "type", "lr_find_result");
    tdm_json_set_int(b, "steps", count);
    tdm_json_set_double(b, "suggested_lr", suggestion);
    json_builder_set_member_name(b, "diverged");
    json_builder_add_boolean_value(b, diverged);
    json_builder_end_object(b);
    tdm_cli_print_json_object(b);
    return TRUE;
  }
  if (quiet)
    return TRUE;
  double reached = count > 0 ? points[count - 1].lr : lr_first;
  if (isfinite(suggestion))
    fprintf(stderr, _("tandem-train: suggested learning rate %.3g (where the smoothed loss "
                      "falls fastest); %d steps from %.3g to %.3g%s\n"),
            suggestion, count, lr_first, reached,
            diverged ? _(", ended where the loss diverged") : "");
  else
    fprintf(stderr, _("tandem-train: no suggestion: the loss did not fall over %d steps from "
                      "%.3g to %.3g (try a wider --lr-find-range or more --lr-find-steps)\n"),
            count, lr_first, reached);
  return TRUE;
}
