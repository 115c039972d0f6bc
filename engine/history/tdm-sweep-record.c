/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-sweep-record.c — scaling sweeps in the run history: the recorder's sweep lines,
 * reading them back, their CSV, and the recorded sweep itself.
 *
 * A sweep's file is a settings line (kind "scaling", the configuration it started
 * from, and "scaling": {"mode", "steps", "device_counts"}), one "point" line per
 * device count as the driver measures it (the numbers of TdmScalingPoint, memory as
 * an array of bytes per device), then "finished" ("stopped" when cancelled) or
 * "failed". Written a line at a time as the points come, like a training run, so a
 * crash mid-sweep leaves the points measured before it. Not the driver: tdm-scaling.c
 * measures; this keeps.
 */
#include "tdm-history-private.h"
#include "tdm-error.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

TdmRunRecorder *
tdm_run_recorder_new_sweep(TdmHistory *h, const TdmConfig *config, TdmScalingMode mode,
                           long steps, const char *name, GError **error)
{
  g_return_val_if_fail(h != NULL && config != NULL && steps > 0, NULL);
  int count = tdm_config_replica_count(config);
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_json_set_string(b, "mode", tdm_scaling_mode_name(mode));
  tdm_json_set_int(b, "steps", steps);
  /* The driver goes 1 … N; written out so a reader needs no rule of the driver's. */
  json_builder_set_member_name(b, "device_counts");
  json_builder_begin_array(b);
  for (int n = 1; n <= count; n++)
    json_builder_add_int_value(b, n);
  json_builder_end_array(b);
  json_builder_end_object(b);
  TdmRunRecorder *rec = tdm_history_recorder_open(h, config, name, TDM_RUN_SCALING,
                                                  json_builder_get_root(b), error);
  if (rec != NULL) {
    rec->mode = mode;
    rec->steps = steps;
  }
  return rec;
}

void
tdm_run_recorder_add_point(const TdmScalingPoint *p, gpointer data)
{
  TdmRunRecorder *rec = data;
  g_return_if_fail(rec->kind == TDM_RUN_SCALING);
  if (rec->fd < 0 || rec->error != NULL)
    return;
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_json_set_string(b, "type", "point");
  tdm_json_set_int(b, "devices", p->devices);
  tdm_json_set_int(b, "batch", p->batch);
  tdm_json_set_int(b, "steps", p->steps);
  tdm_json_set_double(b, "samples_per_second", p->samples_per_second);
  tdm_json_set_double(b, "speedup", p->speedup);
  tdm_json_set_double(b, "efficiency", p->efficiency);
  tdm_json_set_double(b, "compute_ms", p->compute_ms);
  tdm_json_set_double(b, "comm_ms", p->comm_ms);
  tdm_json_set_double(b, "wait_ms", p->wait_ms);
  tdm_json_set_double(b, "samples_per_second_min", p->samples_per_second_min);
  tdm_json_set_double(b, "samples_per_second_max", p->samples_per_second_max);
  tdm_json_set_double(b, "speedup_min", p->speedup_min);
  tdm_json_set_double(b, "speedup_max", p->speedup_max);
  tdm_json_set_int(b, "runs", p->runs);
  tdm_json_set_int(b, "cpu_threads", p->cpu_threads);
  json_builder_set_member_name(b, "memory_bytes");
  json_builder_begin_array(b);
  for (int d = 0; d < p->devices && d < TDM_MAX_REPLICAS; d++)
    json_builder_add_int_value(b, p->memory_bytes[d]);
  json_builder_end_array(b);
  json_builder_end_object(b);
  if (tdm_history_append_line(rec->fd, rec->path, b, &rec->error))
    rec->points++;
}

void
tdm_run_recorder_end_sweep(TdmRunRecorder *rec, const GError *outcome)
{
  g_return_if_fail(rec->kind == TDM_RUN_SCALING);
  gboolean cancelled = outcome != NULL &&
                       (g_error_matches(outcome, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED) ||
                        g_error_matches(outcome, G_IO_ERROR, G_IO_ERROR_CANCELLED));
  if (cancelled && rec->points == 0 && rec->error == NULL) {
    /* Stopped before it measured anything: a record of nothing. */
    if (rec->fd >= 0)
      g_close(rec->fd, NULL);
    rec->fd = -1;
    if (g_unlink(rec->path) == 0)
      rec->discarded = TRUE;
    return;
  }
  if (rec->fd < 0 || rec->error != NULL)
    return;
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  if (outcome != NULL && !cancelled) {
    tdm_json_set_string(b, "type", "failed");
    tdm_json_set_string(b, "message", outcome->message);
  } else {
    tdm_json_set_string(b, "type", "finished");
    tdm_json_set_int(b, "points", rec->points);
    json_builder_set_member_name(b, "stopped");
    json_builder_add_boolean_value(b, cancelled);
  }
  json_builder_end_object(b);
  tdm_history_append_line(rec->fd, rec->path, b, &rec->error);
}

gboolean
tdm_run_recorder_get_kept(TdmRunRecorder *rec)
{
  return !rec->discarded;
}

typedef struct {
  TdmRunRecorder *rec;
  TdmScalingSink sink;
  gpointer user_data;
} SweepSinks;

static void
sweep_point(const TdmScalingPoint *point, gpointer data)
{
  SweepSinks *s = data;
  tdm_run_recorder_add_point(point, s->rec);
  if (s->sink != NULL)
    s->sink(point, s->user_data);
}

gboolean
tdm_history_run_sweep(TdmRunRecorder *rec, TdmScalingSink sink, gpointer user_data,
                      GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail(rec != NULL && rec->kind == TDM_RUN_SCALING, FALSE);
  SweepSinks sinks = {rec, sink, user_data};
  GError *local = NULL;
  gboolean ok = tdm_scaling_run(rec->config, rec->mode, rec->steps, sweep_point, &sinks,
                                cancellable, &local);
  tdm_run_recorder_end_sweep(rec, local);
  if (local != NULL)
    g_propagate_error(error, local);
  return ok;
}

/* ---- reading ---------------------------------------------------------------------- */

void
tdm_history_read_sweep_settings(TdmRunRecord *r, JsonObject *o)
{
  r->sweep.mode = TDM_SCALING_STRONG;
  r->sweep.count = r->replicas;
  if (o == NULL)
    return;
  const char *mode = json_object_get_string_member_with_default(o, "mode", "strong");
  if (!tdm_scaling_mode_from_name(mode, &r->sweep.mode))
    r->sweep.mode = TDM_SCALING_STRONG;
  r->sweep.steps = tdm_history_get_int(o, "steps");
  JsonNode *counts = json_object_get_member(o, "device_counts");
  if (counts != NULL && JSON_NODE_HOLDS_ARRAY(counts))
    r->sweep.count = (int)json_array_get_length(json_node_get_array(counts));
}

gboolean
tdm_history_read_sweep_line(TdmRunRecord *r, const char *type, JsonObject *o)
{
  if (!g_str_equal(type, "point"))
    return FALSE;
  TdmScalingPoint p = {
    .index = (int)r->sweep.points->len,
    .count = r->sweep.count,
    .devices = (int)tdm_history_get_int(o, "devices"),
    .batch = (int)tdm_history_get_int(o, "batch"),
    .steps = tdm_history_get_int(o, "steps"),
    .samples_per_second = tdm_history_get_double(o, "samples_per_second"),
    .speedup = tdm_history_get_double(o, "speedup"),
    .efficiency = tdm_history_get_double(o, "efficiency"),
    .compute_ms = tdm_history_get_double(o, "compute_ms"),
    .comm_ms = tdm_history_get_double(o, "comm_ms"),
    .wait_ms = tdm_history_get_double(o, "wait_ms"),
    /* Absent from runs kept before points were repeated. */
    .samples_per_second_min = tdm_history_get_double(o, "samples_per_second_min"),
    .samples_per_second_max = tdm_history_get_double(o, "samples_per_second_max"),
    .speedup_min = tdm_history_get_double(o, "speedup_min"),
    .speedup_max = tdm_history_get_double(o, "speedup_max"),
    .runs = (int)tdm_history_get_int(o, "runs"),
    .cpu_threads = (int)tdm_history_get_int(o, "cpu_threads"),
  };
  /* A point without devices says nothing: skipped, as a damaged line would be. */
  if (p.devices < 1 || p.devices > TDM_MAX_REPLICAS)
    return TRUE;
  JsonNode *memory = json_object_get_member(o, "memory_bytes");
  if (memory != NULL && JSON_NODE_HOLDS_ARRAY(memory)) {
    JsonArray *a = json_node_get_array(memory);
    for (guint d = 0; d < json_array_get_length(a) && d < TDM_MAX_REPLICAS; d++) {
      JsonNode *v = json_array_get_element(a, d);
      p.memory_bytes[d] = v != NULL && JSON_NODE_HOLDS_VALUE(v) ? json_node_get_int(v) : 0;
    }
  }
  g_array_append_val(r->sweep.points, p);
  return TRUE;
}

/* ---- CSV -------------------------------------------------------------------------- */

void
tdm_scaling_points_to_csv(GString *s, const TdmScalingPoint *points, guint n_points)
{
  g_return_if_fail(s != NULL);
  g_return_if_fail(points != NULL || n_points == 0);
  int devices = 0;
  for (guint i = 0; i < n_points; i++)
    devices = MAX(devices, MIN(points[i].devices, TDM_MAX_REPLICAS));
  /* The memory of each device by its place in the configuration's device list (the
   * `devices` setting): empty where a point had fewer devices. */
  /* Then the spread of the repeated runs as the window and the CLI show it (their
   * slowest and fastest, how many), and the BLAS threads each CPU worker ran. */
  g_string_append(s, "devices,batch,steps,samples_per_second,speedup,efficiency,"
                     "compute_ms,comm_ms,wait_ms,samples_per_second_min,"
                     "samples_per_second_max,speedup_min,speedup_max,runs,cpu_threads");
  for (int d = 0; d < devices; d++)
    g_string_append_printf(s, ",memory_bytes_%d", d + 1);
  g_string_append_c(s, '\n');
  for (guint i = 0; i < n_points; i++) {
    const TdmScalingPoint *p = &points[i];
    g_string_append_printf(s, "%d,%d,%ld", p->devices, p->batch, p->steps);
    tdm_history_csv_value(s, p->samples_per_second);
    tdm_history_csv_value(s, p->speedup);
    tdm_history_csv_value(s, p->efficiency);
    tdm_history_csv_value(s, p->compute_ms);
    tdm_history_csv_value(s, p->comm_ms);
    tdm_history_csv_value(s, p->wait_ms);
    tdm_history_csv_value(s, p->samples_per_second_min);
    tdm_history_csv_value(s, p->samples_per_second_max);
    tdm_history_csv_value(s, p->speedup_min);
    tdm_history_csv_value(s, p->speedup_max);
    g_string_append_printf(s, ",%d,%d", p->runs, p->cpu_threads);
    for (int d = 0; d < devices; d++) {
      if (d < p->devices)
        g_string_append_printf(s, ",%" G_GINT64_FORMAT, p->memory_bytes[d]);
      else
        g_string_append_c(s, ',');
    }
    g_string_append_c(s, '\n');
  }
}
