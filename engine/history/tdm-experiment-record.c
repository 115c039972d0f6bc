/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-experiment-record.c — experiments in the run history (tdm-experiment.h): the
 * recorder's experiment lines, reading them back, a sweep's CSV table.
 *
 * An experiment's file is a settings line (kind "experiment", the configuration it
 * started from, and "experiment": {"kind", "steps"; a sweep's "mode" and
 * "device_counts"; the finder's "lr_first" and "lr_last"}), then as each training is
 * reduced what it gave (a sweep's "point" line: the numbers of TdmScalingPoint, memory
 * as an array of bytes per device) and, for a training kept as a run of its own, a
 * "run" line naming it; at the end the finder's curve ("lr_point" lines: step, lr,
 * loss, smoothed_loss); then "finished" (its "result" in words when it completed, the
 * finder's "suggested_lr" and "diverged", "stopped" when cancelled or when the person
 * stopped a finder) or "failed".
 * Written a line at a time as the experiment goes, like a training run, so a crash
 * mid-sweep leaves the points measured before it. Sweeps written before there were
 * experiments have kind "scaling" and their settings under "scaling": read the same.
 * Not the driver: the experiment measures and reduces; this keeps.
 */
#include "tdm-history-private.h"
#include "tdm-error.h"
#include "tdm-i18n.h"
#include "tdm-printable.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

/* The runs an experiment's record may name: a sweep keeps none, a comparison two. */
#define MAX_RUNS 1024

TdmRunRecorder *
tdm_run_recorder_new_experiment(TdmHistory *h, const TdmExperiment *e, const char *name,
                                GError **error)
{
  g_return_val_if_fail(h != NULL && e != NULL, NULL);
  const TdmConfig *config = tdm_experiment_get_config(e);
  TdmExperimentKind kind = tdm_experiment_get_kind(e);
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_json_set_string(b, "kind", tdm_experiment_kind_name(kind));
  tdm_json_set_int(b, "steps", tdm_experiment_get_steps(e));
  if (kind == TDM_EXPERIMENT_SCALING) {
    tdm_json_set_string(b, "mode", tdm_scaling_mode_name(tdm_experiment_get_scaling_mode(e)));
    /* The sweep goes 1 … N; written out so a reader needs no rule of the driver's. */
    json_builder_set_member_name(b, "device_counts");
    json_builder_begin_array(b);
    for (int n = 1; n <= tdm_config_replica_count(config); n++)
      json_builder_add_int_value(b, n);
    json_builder_end_array(b);
  } else if (kind == TDM_EXPERIMENT_LR_FIND) {
    const TdmLrFindOptions *lr = tdm_experiment_get_lr_options(e);
    tdm_json_set_double(b, "lr_first", lr->lr_first);
    tdm_json_set_double(b, "lr_last", lr->lr_last);
  }
  json_builder_end_object(b);
  return tdm_history_recorder_open(h, config, name, TDM_RUN_EXPERIMENT,
                                   json_builder_get_root(b), error);
}

void
tdm_run_recorder_add_point(const TdmScalingPoint *p, gpointer data)
{
  TdmRunRecorder *rec = data;
  g_return_if_fail(rec->kind == TDM_RUN_EXPERIMENT);
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
    rec->kept++;
}

void
tdm_run_recorder_add_run(TdmRunRecorder *rec, const char *run_id)
{
  g_return_if_fail(rec != NULL && rec->kind == TDM_RUN_EXPERIMENT && run_id != NULL);
  if (rec->fd < 0 || rec->error != NULL)
    return;
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_json_set_string(b, "type", "run");
  tdm_json_set_string(b, "id", run_id);
  json_builder_end_object(b);
  if (tdm_history_append_line(rec->fd, rec->path, b, &rec->error))
    rec->kept++;
}

/* The finder's curve, a line a point: written once the test is over, as it is short. */
static void
add_lr_points(TdmRunRecorder *rec, const TdmExperiment *e)
{
  int count = 0;
  const TdmLrFindPoint *p = tdm_experiment_get_lr_points(e, &count);
  for (int i = 0; i < count && rec->error == NULL; i++) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    tdm_json_set_string(b, "type", "lr_point");
    tdm_json_set_int(b, "step", p[i].step);
    tdm_json_set_double(b, "lr", p[i].lr);
    tdm_json_set_double(b, "loss", p[i].loss);
    tdm_json_set_double(b, "smoothed_loss", p[i].smoothed);
    json_builder_end_object(b);
    if (tdm_history_append_line(rec->fd, rec->path, b, &rec->error))
      rec->kept++;
  }
}

void
tdm_run_recorder_end_experiment(TdmRunRecorder *rec, const TdmExperiment *e,
                                const GError *outcome)
{
  g_return_if_fail(rec != NULL && rec->kind == TDM_RUN_EXPERIMENT && e != NULL);
  gboolean cancelled = outcome != NULL &&
                       (g_error_matches(outcome, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED) ||
                        g_error_matches(outcome, G_IO_ERROR, G_IO_ERROR_CANCELLED));
  gboolean lr_find = tdm_experiment_get_kind(e) == TDM_EXPERIMENT_LR_FIND;
  if (lr_find && rec->fd >= 0 && rec->error == NULL)
    add_lr_points(rec, e);
  if ((cancelled || tdm_experiment_get_stopped(e)) && rec->kept == 0 && rec->error == NULL) {
    /* Stopped before it kept anything: a record of nothing. */
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
    json_builder_set_member_name(b, "stopped");
    json_builder_add_boolean_value(b, cancelled || tdm_experiment_get_stopped(e));
    g_autofree char *result = tdm_experiment_dup_result(e);
    if (result != NULL)
      tdm_json_set_string(b, "result", result);
    if (lr_find) {
      double suggestion = tdm_experiment_get_lr_suggestion(e);
      if (isfinite(suggestion))
        tdm_json_set_double(b, "suggested_lr", suggestion);
      json_builder_set_member_name(b, "diverged");
      json_builder_add_boolean_value(b, tdm_experiment_get_lr_diverged(e));
    }
  }
  json_builder_end_object(b);
  tdm_history_append_line(rec->fd, rec->path, b, &rec->error);
}

gboolean
tdm_run_recorder_get_kept(TdmRunRecorder *rec)
{
  return !rec->discarded;
}

/* ---- reading ---------------------------------------------------------------------- */

gboolean
tdm_history_read_experiment_settings(TdmRunRecord *r, JsonObject *o, gboolean old_sweep,
                                     const char *path, GError **error)
{
  TdmRunExperiment *x = &r->experiment;
  x->kind = TDM_EXPERIMENT_SCALING;
  x->mode = TDM_SCALING_STRONG;
  x->count = r->replicas;
  if (!old_sweep) {
    const char *kind = o != NULL ? tdm_history_get_string(o, "kind", "")
                                 : "";
    if (!tdm_experiment_kind_from_name(kind, &x->kind)) {
      g_autofree char *shown = tdm_printable(kind);
      /* A kind of a newer version: better named as unreadable than shown wrong. */
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                  _("%s: an experiment of a kind this version does not know (“%s”)"), path,
                  shown);
      return FALSE;
    }
  }
  if (o == NULL)
    return TRUE;
  x->steps = tdm_history_get_int(o, "steps");
  if (x->kind == TDM_EXPERIMENT_LR_FIND) {
    x->lr_options.lr_first = tdm_history_get_double(o, "lr_first");
    x->lr_options.lr_last = tdm_history_get_double(o, "lr_last");
    x->lr_options.steps = (int)CLAMP(x->steps, 0, TDM_LR_FIND_STEPS_MAX);
  }
  if (x->kind != TDM_EXPERIMENT_SCALING)
    return TRUE;
  const char *mode = tdm_history_get_string(o, "mode", "strong");
  if (!tdm_scaling_mode_from_name(mode, &x->mode))
    x->mode = TDM_SCALING_STRONG;
  JsonNode *counts = json_object_get_member(o, "device_counts");
  if (counts != NULL && JSON_NODE_HOLDS_ARRAY(counts))
    x->count = (int)json_array_get_length(json_node_get_array(counts));
  return TRUE;
}

static void
read_point(TdmRunRecord *r, JsonObject *o)
{
  GArray *points = r->experiment.points;
  /* A sweep has a point per device count: at most TDM_MAX_REPLICAS. */
  if (points->len >= TDM_MAX_REPLICAS)
    return;
  TdmScalingPoint p = {
    .index = (int)points->len,
    .count = r->experiment.count,
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
    return;
  JsonNode *memory = json_object_get_member(o, "memory_bytes");
  if (memory != NULL && JSON_NODE_HOLDS_ARRAY(memory)) {
    JsonArray *a = json_node_get_array(memory);
    for (guint d = 0; d < json_array_get_length(a) && d < TDM_MAX_REPLICAS; d++) {
      JsonNode *v = json_array_get_element(a, d);
      p.memory_bytes[d] = v != NULL && JSON_NODE_HOLDS_VALUE(v) ? json_node_get_int(v) : 0;
    }
  }
  g_array_append_val(points, p);
}

static void
read_lr_point(TdmRunExperiment *x, JsonObject *o)
{
  /* No more than the test could have taken. */
  if (x->lr_points->len >= TDM_LR_FIND_STEPS_MAX)
    return;
  TdmLrFindPoint p = {
    .step = (int)tdm_history_get_int(o, "step"),
    .lr = tdm_history_get_double(o, "lr"),
    .loss = tdm_history_get_double(o, "loss"),
    .smoothed = tdm_history_get_double(o, "smoothed_loss"),
  };
  /* A rate that is no rate cannot be drawn on a log scale: skipped, as a damaged line. */
  if (p.step < 1 || !(p.lr > 0) || !isfinite(p.lr))
    return;
  g_array_append_val(x->lr_points, p);
}

gboolean
tdm_history_read_experiment_line(TdmRunRecord *r, const char *type, JsonObject *o)
{
  TdmRunExperiment *x = &r->experiment;
  if (g_str_equal(type, "lr_point")) {
    if (x->kind == TDM_EXPERIMENT_LR_FIND)
      read_lr_point(x, o);
    return TRUE;
  }
  if (g_str_equal(type, "point")) {
    if (x->kind == TDM_EXPERIMENT_SCALING)
      read_point(r, o);
    return TRUE;
  }
  if (g_str_equal(type, "run")) {
    const char *id = tdm_history_get_string(o, "id", NULL);
    /* Only a name a run file could have: it is looked up as one. */
    if (id != NULL && x->runs->len < MAX_RUNS && tdm_history_valid_id(id, NULL))
      g_ptr_array_add(x->runs, g_strdup(id));
    return TRUE;
  }
  if (g_str_equal(type, "finished")) {
    const char *result = tdm_history_get_string(o, "result", NULL);
    g_free(x->result);
    x->result = g_strdup(result);
    x->lr_suggestion = tdm_history_get_double(o, "suggested_lr");
    x->lr_diverged = json_object_get_boolean_member_with_default(o, "diverged", FALSE);
  }
  return FALSE;
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
