/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-scaling.c — tandem-train --scaling (tdm-cli-scaling.h).
 *
 * The engine's scaling experiment runs on this thread; its points come here as it
 * measures them, so each row is printed (and flushed, and with --record kept) at once:
 * a scaling run over several devices takes minutes. Failures are one line on stderr,
 * as tandem-train's others.
 */
#include "tdm-cli-scaling.h"
#include "tdm-cli-guard.h"
#include "tdm-cli-printer.h"
#include <glib/gi18n.h>
#include "tdm-error.h"
#include "tdm-history.h"
#include "tdm-json.h"

#include <stdio.h>
#include <unistd.h>

typedef struct {
  const TdmCliScaling *options;
  TdmRunRecorder *recorder;     /* with --record */
  gboolean header_done;
  int points;
} Printer;

static void
print_point(const TdmScalingPoint *p, gpointer data)
{
  Printer *printer = data;
  const TdmCliScaling *o = printer->options;
  printer->points++;
  if (printer->recorder != NULL)
    tdm_run_recorder_add_point(p, printer->recorder);
  if (o->json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "scaling_point");
    json_builder_set_member_name(b, "mode");
    json_builder_add_string_value(b, tdm_scaling_mode_name(o->mode));
    const struct { const char *name; gint64 value; } ints[] = {
      {"devices", p->devices}, {"of", p->count}, {"batch", p->batch}, {"steps", p->steps},
      {"runs", p->runs}, {"cpu_threads", p->cpu_threads},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(ints); i++) {
      json_builder_set_member_name(b, ints[i].name);
      json_builder_add_int_value(b, ints[i].value);
    }
    const struct { const char *name; double value; } doubles[] = {
      {"samples_per_second", p->samples_per_second},
      {"samples_per_second_min", p->samples_per_second_min},
      {"samples_per_second_max", p->samples_per_second_max}, {"speedup", p->speedup},
      {"speedup_min", p->speedup_min}, {"speedup_max", p->speedup_max},
      {"efficiency", p->efficiency}, {"compute_ms", p->compute_ms},
      {"comm_ms", p->comm_ms}, {"wait_ms", p->wait_ms},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(doubles); i++) {
      json_builder_set_member_name(b, doubles[i].name);
      json_builder_add_double_value(b, doubles[i].value);
    }
    json_builder_set_member_name(b, "memory_bytes");
    json_builder_begin_array(b);
    for (int d = 0; d < p->devices && d < TDM_MAX_REPLICAS; d++)
      json_builder_add_int_value(b, p->memory_bytes[d]);
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *text = tdm_json_to_string(root);
    printf("%s\n", text);
  } else if (!o->quiet) {
    if (!printer->header_done)
      printf("%7s %6s %11s %17s %8s %15s %10s %10s %8s %8s %7s\n", "devices", "batch",
             "samples/s", "(min–max)", "speed-up", "(min–max)", "efficiency", "compute ms",
             "comm ms", "wait ms", "threads");
    printer->header_done = TRUE;
    /* The median of the point's runs, then their spread. */
    g_autofree char *rates = g_strdup_printf("%.0f–%.0f", p->samples_per_second_min,
                                             p->samples_per_second_max);
    g_autofree char *speedups = g_strdup_printf("%.2f–%.2f×", p->speedup_min, p->speedup_max);
    /* Padding counts bytes: the dash and × are three and two of them. */
    printf("%7d %6d %11.0f %17s %7.2f× %16s %9.0f%% %10.3f %8.3f %8.3f %7d\n", p->devices,
           p->batch, p->samples_per_second, rates, p->speedup, speedups, 100 * p->efficiency,
           p->compute_ms, p->comm_ms, p->wait_ms, p->cpu_threads);
  }
  fflush(stdout);
}

gboolean
tdm_cli_scaling(const TdmConfig *config, const TdmCliScaling *o, GCancellable *cancellable,
                int *points, int *record_status, GError **error)
{
  Printer printer = {.options = o};
  g_autoptr(TdmHistory) history = NULL;
  g_autoptr(TdmRunRecorder) recorder = NULL;
  *points = 0;
  *record_status = 0;
  g_autoptr(TdmExperiment) e = tdm_experiment_new_scaling(config, o->mode, o->steps, error);
  if (e == NULL)
    return FALSE;
  if (o->record) {
    g_autoptr(GError) record_error = NULL;
    history = tdm_history_new(o->history);
    recorder = tdm_run_recorder_new_experiment(history, e, o->name, &record_error);
    if (recorder == NULL) {
      tdm_cli_line(stderr, _("tandem-train: %s: %s\n"),
                   o->history != NULL ? "--history" : "--record", record_error->message);
      *record_status = 2;
      return TRUE;
    }
  }
  /* Said on a terminal only: a failure's output stays its one line. */
  if (!o->json && !o->quiet && isatty(STDERR_FILENO))
    fprintf(stderr, _("tandem-train: %s scaling over 1 … %d devices, %ld steps each\n"),
            tdm_scaling_mode_name(o->mode), tdm_config_replica_count(config), o->steps);

  printer.recorder = recorder;
  tdm_experiment_set_point_sink(e, print_point, &printer);
  GError *local = NULL;
  gboolean ok = tdm_experiment_run(e, NULL, NULL, cancellable, &local);
  *points = printer.points;
  if (recorder != NULL) {
    tdm_run_recorder_end_experiment(recorder, e, local);
    *record_status = tdm_cli_record_close(recorder, history, !o->json && !o->quiet);
  }
  if (local != NULL)
    g_propagate_error(error, local);
  return ok;
}
