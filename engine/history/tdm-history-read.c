/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-read.c — the reader of run files (tdm-history.h): lists and loads them,
 * streamed line by line through tdm_line_reader, so memory follows what a record
 * keeps, never the file's size: each line is bounded (TDM_HISTORY_MAX_LINE), each
 * line's entries by the run's devices, and the sampled series by TDM_HISTORY_MAX_POINTS
 * (past it, every other sample goes, as the recorder thins a long run's file). Not the
 * writer (tdm-history.c) nor the thinning of a file on disk (tdm-history-compact.c).
 */
#include "tdm-history-private.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-file.h"
#include "tdm-json.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#define RUN_SUFFIX ".jsonl"

/* Where a load is in each sampled series: one line in `stride` is kept, of the
 * `lines` seen so far. */
typedef struct {
  guint step_stride, device_stride, phase_stride;
  guint64 step_lines, device_lines, phase_lines;
} Reader;

/* Halves a series of samples grouped by step (a line's entries share a step): every
 * other step's entries go. */
static void
thin(GArray *a, size_t step_offset)
{
  guint size = g_array_get_element_size(a), kept = 0, group = 0;
  long last = 0;
  for (guint i = 0; i < a->len; i++) {
    const char *e = a->data + (gsize)i * size;
    long step;
    memcpy(&step, e + step_offset, sizeof step);
    if (i > 0 && step != last)
      group++;
    last = step;
    if (group % 2 == 0)
      memmove(a->data + (gsize)kept++ * size, e, size);
  }
  g_array_set_size(a, kept);
}

/* Whether the next line of a sampled series is kept: past TDM_HISTORY_MAX_POINTS
 * entries the series is thinned and then keeps one line in twice as many. */
static gboolean
take_sample(GArray **a, guint *stride, guint64 *lines, size_t step_offset)
{
  if ((*a)->len >= TDM_HISTORY_MAX_POINTS) {
    thin(*a, step_offset);
    *stride *= 2;
  }
  return (*lines)++ % *stride == 0;
}

/* The entries a devices or phases line may hold: one per device of the run. */
static guint
device_count(const TdmRunRecord *r, JsonArray *devices)
{
  return MIN(json_array_get_length(devices), (guint)MAX(r->replicas, 1));
}

double
tdm_history_get_double(JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member(o, name);
  if (n == NULL || JSON_NODE_HOLDS_NULL(n) || !JSON_NODE_HOLDS_VALUE(n))
    return NAN;
  return json_node_get_double(n);
}

const char *
tdm_history_get_string(JsonObject *o, const char *name, const char *fallback)
{
  JsonNode *n = json_object_get_member(o, name);
  if (n == NULL || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
    return fallback;
  return json_node_get_string(n);
}

gint64
tdm_history_get_int(JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member(o, name);
  if (n == NULL || !JSON_NODE_HOLDS_VALUE(n))
    return 0;
  return json_node_get_int(n);
}

static gboolean
read_settings(TdmRunRecord *r, JsonObject *o, const char *path, GError **error)
{
  const char *name = tdm_history_get_string(o, "name", NULL);
  JsonNode *config = json_object_get_member(o, "config");
  if (config == NULL || !JSON_NODE_HOLDS_OBJECT(config)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("%s: the settings line has no configuration"), path);
    return FALSE;
  }
  g_autofree char *text = tdm_json_to_string(config);
  g_autoptr(GError) local = NULL;
  r->config = tdm_config_from_json(text, &local);
  if (r->config == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY, "%s: %s", path,
                local->message);
    return FALSE;
  }
  g_free(r->name);
  r->name = g_strdup(name != NULL ? name : r->id);
  r->created = tdm_history_get_int(o, "created");
  r->replicas = tdm_config_replica_count(r->config);
  r->precision_used = r->config->precision;
  const char *kind = tdm_history_get_string(o, "kind", "training");
  gboolean old_sweep = g_str_equal(kind, "scaling");
  if (old_sweep || g_str_equal(kind, "experiment")) {
    JsonNode *own = json_object_get_member(o, old_sweep ? "scaling" : "experiment");
    r->kind = TDM_RUN_EXPERIMENT;
    if (!tdm_history_read_experiment_settings(r, own != NULL && JSON_NODE_HOLDS_OBJECT(own)
                                                     ? json_node_get_object(own) : NULL,
                                              old_sweep, path, error))
      return FALSE;
  } else if (!g_str_equal(kind, "training")) {
    /* A kind of a newer version: better named as unreadable than shown wrong. */
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("%s: a record of a kind this version does not know (“%s”)"), path, kind);
    return FALSE;
  }
  return TRUE;
}

static void
read_record(Reader *reader, TdmRunRecord *r, const char *type, JsonObject *o)
{
  if (r->kind == TDM_RUN_EXPERIMENT && tdm_history_read_experiment_line(r, type, o))
    return;
  if (g_str_equal(type, "step")) {
    if (!take_sample(&r->points, &reader->step_stride, &reader->step_lines,
                     offsetof(TdmHistoryPoint, step)))
      return;
    TdmHistoryPoint p = {
      .step = tdm_history_get_int(o, "step"),
      /* "epoch_float" as --json writes it; "epoch" in files of earlier versions. */
      .epoch = json_object_has_member(o, "epoch_float")
                   ? tdm_history_get_double(o, "epoch_float")
                   : tdm_history_get_double(o, "epoch"),
      .train_loss = tdm_history_get_double(o, "train_loss"),
      .train_accuracy = tdm_history_get_double(o, "train_accuracy"),
      .samples_per_second = tdm_history_get_double(o, "samples_per_second"),
      .elapsed = tdm_history_get_double(o, "elapsed"),
      .lr = tdm_history_get_double(o, "lr"),
    };
    g_array_append_val(r->points, p);
  } else if (g_str_equal(type, "devices")) {
    JsonNode *node = json_object_get_member(o, "devices");
    JsonArray *devices = node != NULL && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node)
                                                                      : NULL;
    if (!take_sample(&r->device_points, &reader->device_stride, &reader->device_lines,
                     offsetof(TdmHistoryDevicePoint, step)))
      return;
    for (guint i = 0; devices != NULL && i < device_count(r, devices); i++) {
      JsonNode *element = json_array_get_element(devices, i);
      JsonObject *d = JSON_NODE_HOLDS_OBJECT(element) ? json_node_get_object(element) : NULL;
      /* An entry without figures would cost memory and say nothing. */
      if (d == NULL || !json_object_has_member(d, "compute_ms"))
        continue;
      TdmHistoryDevicePoint p = {
        .step = tdm_history_get_int(o, "step"),
        .device = (int)i,
        .compute_ms = tdm_history_get_double(d, "compute_ms"),
        .comm_ms = tdm_history_get_double(d, "comm_ms"),
        .wait_ms = tdm_history_get_double(d, "wait_ms"),
        .tandem_bytes = tdm_history_get_int(d, "tandem_bytes"),
      };
      g_array_append_val(r->device_points, p);
    }
  } else if (g_str_equal(type, "phases")) {
    JsonNode *node = json_object_get_member(o, "devices");
    JsonArray *devices = node != NULL && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node)
                                                                      : NULL;
    JsonNode *bytes_node = json_object_get_member(o, "bytes");
    JsonArray *bytes = bytes_node != NULL && JSON_NODE_HOLDS_ARRAY(bytes_node)
                       ? json_node_get_array(bytes_node) : NULL;
    JsonNode *hidden_node = json_object_get_member(o, "hidden_ms");
    JsonArray *hidden = hidden_node != NULL && JSON_NODE_HOLDS_ARRAY(hidden_node)
                        ? json_node_get_array(hidden_node) : NULL;
    if (!take_sample(&r->phases, &reader->phase_stride, &reader->phase_lines,
                     offsetof(TdmHistoryPhases, step)))
      return;
    for (guint i = 0; devices != NULL && i < device_count(r, devices); i++) {
      JsonNode *d = json_array_get_element(devices, i);
      if (d == NULL || !JSON_NODE_HOLDS_ARRAY(d) ||
          json_array_get_length(json_node_get_array(d)) == 0)
        continue;
      JsonArray *values = json_node_get_array(d);
      TdmHistoryPhases p = {.step = tdm_history_get_int(o, "step"), .device = (int)i};
      for (guint k = 0; k < json_array_get_length(values) && k < TDM_PHASE_COUNT; k++) {
        JsonNode *v = json_array_get_element(values, k);
        p.ms[k] = v != NULL && JSON_NODE_HOLDS_VALUE(v) ? (float)json_node_get_double(v) : 0;
      }
      JsonNode *pair = bytes != NULL && i < json_array_get_length(bytes)
                       ? json_array_get_element(bytes, i) : NULL;
      if (pair != NULL && JSON_NODE_HOLDS_ARRAY(pair) &&
          json_array_get_length(json_node_get_array(pair)) == 2) {
        JsonArray *two = json_node_get_array(pair);
        JsonNode *out = json_array_get_element(two, 0), *in = json_array_get_element(two, 1);
        if (JSON_NODE_HOLDS_VALUE(out) && JSON_NODE_HOLDS_VALUE(in)) {
          p.bytes_sent = (guint64)MAX(0, json_node_get_int(out));
          p.bytes_received = (guint64)MAX(0, json_node_get_int(in));
        }
      }
      JsonNode *h = hidden != NULL && i < json_array_get_length(hidden)
                    ? json_array_get_element(hidden, i) : NULL;
      if (h != NULL && JSON_NODE_HOLDS_VALUE(h)) {
        double v = json_node_get_double(h);
        p.hidden_ms = isfinite(v) ? (float)MAX(0.0, v) : 0;
      }
      g_array_append_val(r->phases, p);
    }
  } else if (g_str_equal(type, "started")) {
    TdmPrecision used;
    if (tdm_precision_from_name(tdm_history_get_string(o, "precision", ""), &used) &&
        used != TDM_PRECISION_AUTO)
      r->precision_used = used;
    /* The batch the run took, where the trainer chose a smaller one than asked. */
    gint64 batch = tdm_history_get_int(o, "batch");
    if (r->config != NULL && batch > 0 && batch <= G_MAXINT && batch != r->config->batch &&
        json_object_has_member(o, "batch_asked"))
      r->config->batch = (int)batch;
  } else if (g_str_equal(type, "epoch")) {
    /* A run has at most its epochs, and no run has this many. */
    if (r->epochs->len >= TDM_HISTORY_MAX_POINTS)
      return;
    TdmEpochEvent e = {
      .epoch = (int)tdm_history_get_int(o, "epoch"),
      .step = tdm_history_get_int(o, "step"),
      .train_loss = tdm_history_get_double(o, "train_loss"),
      .train_accuracy = tdm_history_get_double(o, "train_accuracy"),
      .test_loss = tdm_history_get_double(o, "test_loss"),
      .test_accuracy = tdm_history_get_double(o, "test_accuracy"),
      .elapsed = tdm_history_get_double(o, "elapsed"),
      .val_loss = tdm_history_get_double(o, "val_loss"),
      .val_accuracy = tdm_history_get_double(o, "val_accuracy"),
    };
    g_array_append_val(r->epochs, e);
  } else if (g_str_equal(type, "finished")) {
    r->finished = TRUE;
    r->final.steps = tdm_history_get_int(o, "steps");
    r->final.elapsed = tdm_history_get_double(o, "elapsed");
    r->final.test_loss = tdm_history_get_double(o, "test_loss");
    r->final.test_accuracy = tdm_history_get_double(o, "test_accuracy");
    r->final.stopped = json_object_get_boolean_member_with_default(o, "stopped", FALSE);
    r->final.early_stopped =
        json_object_get_boolean_member_with_default(o, "early_stopped", FALSE);
    r->final.epochs_done = (int)CLAMP(tdm_history_get_int(o, "epochs_done"), 0, G_MAXINT);
    r->final.best_epoch = (int)CLAMP(tdm_history_get_int(o, "best_epoch"), 0, G_MAXINT);
    const char *monitor = tdm_history_get_string(o, "monitor", NULL);
    TdmMonitor m = TDM_MONITOR_VAL_ACCURACY;
    if (monitor != NULL)
      tdm_monitor_from_name(monitor, &m);
    r->final.monitor = m;
    r->final.best_value = tdm_history_get_double(o, "best_value");
    r->final.best_val_loss = tdm_history_get_double(o, "best_val_loss");
    r->final.best_accuracy = tdm_history_get_double(o, "best_val_accuracy");
    r->final.best_test_loss = tdm_history_get_double(o, "best_test_loss");
    r->final.best_test_accuracy = tdm_history_get_double(o, "best_test_accuracy");
    /* Files from before "epochs_done": the epochs they list. */
    if (r->final.epochs_done == 0 && r->epochs->len > 0)
      r->final.epochs_done = g_array_index(r->epochs, TdmEpochEvent, r->epochs->len - 1).epoch;
  } else if (g_str_equal(type, "failed")) {
    r->failed = TRUE;
    g_free(r->error);
    r->error = g_strdup(tdm_history_get_string(o, "message", ""));
  } else if (g_str_equal(type, "name")) {
    const char *name = tdm_history_get_string(o, "name", NULL);
    if (name != NULL) {
      g_free(r->name);
      r->name = g_strdup(name);
    }
  }
  /* Unknown types come from newer versions: skipped, not an error. */
}

static TdmRunRecord *
record_new(const char *id)
{
  TdmRunRecord *r = g_new0(TdmRunRecord, 1);
  r->id = g_strdup(id);
  r->points = g_array_new(FALSE, FALSE, sizeof(TdmHistoryPoint));
  r->device_points = g_array_new(FALSE, FALSE, sizeof(TdmHistoryDevicePoint));
  r->phases = g_array_new(FALSE, FALSE, sizeof(TdmHistoryPhases));
  r->epochs = g_array_new(FALSE, FALSE, sizeof(TdmEpochEvent));
  r->experiment.points = g_array_new(FALSE, FALSE, sizeof(TdmScalingPoint));
  r->experiment.runs = g_ptr_array_new_with_free_func(g_free);
  r->experiment.lr_points = g_array_new(FALSE, FALSE, sizeof(TdmLrFindPoint));
  r->experiment.lr_suggestion = NAN;
  return r;
}

/* A run file, `id` naming it. */
static TdmRunRecord *
tdm_history_load_file(const char *path, const char *id, GError **error)
{
  /* Line by line: the file is never held whole, and each line is bounded, so what a
   * record costs is what it keeps (bounded too: take_sample). */
  g_autoptr(TdmLineReader) lines = tdm_line_reader_open(path, _("run file "),
                                                        TDM_ENGINE_ERROR_HISTORY,
                                                        TDM_HISTORY_MAX_LINE,
                                                        TDM_HISTORY_MAX_FILE, error);
  if (lines == NULL)
    return NULL;

  g_autoptr(TdmRunRecord) r = record_new(id);

  Reader reader = {.step_stride = 1, .device_stride = 1, .phase_stride = 1};
  g_autoptr(GError) failure = NULL;
  const char *line;
  gsize length;
  while ((line = tdm_line_reader_next(lines, &length, &failure)) != NULL) {
    int number = tdm_line_reader_number(lines);
    g_autoptr(GError) local = NULL;
    JsonObject *o = NULL;
    g_autoptr(JsonNode) root = NULL;
    if (length > 0 &&
        (root = tdm_json_parse(line, (gssize)length, TDM_ENGINE_ERROR_HISTORY, &local)) != NULL)
      o = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    if (length > 0 && o == NULL) {
      /* A crash mid-write leaves a partial last line: what came before stands. */
      if (tdm_line_reader_unterminated(lines) && number > 1)
        break;
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                  _("%s, line %d: not a run history record%s%s"), path, number,
                  local != NULL ? ": " : "", local != NULL ? local->message : "");
      return NULL;
    }
    if (o == NULL)
      continue;
    const char *type = tdm_history_get_string(o, "type", "");
    if (r->config == NULL) {
      if (!g_str_equal(type, "settings")) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                    _("%s: does not start with a run's settings"), path);
        return NULL;
      }
      if (!read_settings(r, o, path, error))
        return NULL;
    } else {
      read_record(&reader, r, type, o);
    }
  }
  if (failure != NULL) {
    g_propagate_error(error, g_steal_pointer(&failure));
    return NULL;
  }
  if (r->config == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("%s: empty, not a run history file"), path);
    return NULL;
  }
  return g_steal_pointer(&r);
}

TdmRunRecord *
tdm_history_load(TdmHistory *h, const char *id, GError **error)
{
  g_return_val_if_fail(h != NULL, NULL);
  if (!tdm_history_valid_id(id, error))
    return NULL;
  g_autofree char *path = tdm_history_run_path(h, id);
  return tdm_history_load_file(path, id, error);
}

gboolean
tdm_history_file_settings(const char *path, TdmConfig **config, GError **error)
{
  g_return_val_if_fail(path != NULL && config != NULL, FALSE);
  *config = NULL;
  g_autoptr(TdmLineReader) lines = tdm_line_reader_open(path, _("run file "),
                                                        TDM_ENGINE_ERROR_HISTORY,
                                                        TDM_HISTORY_MAX_LINE, 0, error);
  if (lines == NULL)
    return FALSE;
  const char *line;
  gsize length;
  while ((line = tdm_line_reader_next(lines, &length, error)) != NULL && length == 0)
    ;
  if (line == NULL)
    return error == NULL || *error == NULL;
  /* Too deep to parse is an error whatever the file is meant to be; other text that
   * does not parse is another kind of file. */
  if (tdm_json_too_deep(line, length)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("%s, line %d: arrays and objects nest deeper than %d levels"), path,
                tdm_line_reader_number(lines), TDM_JSON_MAX_DEPTH);
    return FALSE;
  }
  g_autoptr(JsonNode) root = tdm_json_parse(line, (gssize)length, TDM_ENGINE_ERROR_HISTORY,
                                            NULL);
  JsonObject *o = root != NULL && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root)
                                                               : NULL;
  if (o == NULL || !g_str_equal(tdm_history_get_string(o, "type", ""),
                                "settings"))
    return TRUE;
  g_autofree char *base = g_path_get_basename(path);
  g_autoptr(TdmRunRecord) r = record_new(base);
  if (!read_settings(r, o, path, error))
    return FALSE;
  *config = g_steal_pointer(&r->config);
  return TRUE;
}

static int
compare_ids(gconstpointer a, gconstpointer b)
{
  const TdmRunRecord *x = *(TdmRunRecord *const *)a, *y = *(TdmRunRecord *const *)b;
  if (x->created != y->created)
    return x->created < y->created ? -1 : 1;
  return strcmp(x->id, y->id);
}

GPtrArray *
tdm_history_list(TdmHistory *h, GPtrArray *problems)
{
  return tdm_history_list_cancellable(h, problems, NULL);
}

GPtrArray *
tdm_history_list_cancellable(TdmHistory *h, GPtrArray *problems, GCancellable *cancellable)
{
  g_return_val_if_fail(h != NULL, NULL);
  GPtrArray *runs = g_ptr_array_new_with_free_func((GDestroyNotify)tdm_run_record_free);
  g_autoptr(GDir) dir = g_dir_open(h->folder, 0, NULL);
  if (dir == NULL)
    return runs;   /* no runs yet */
  const char *file;
  while ((file = g_dir_read_name(dir)) != NULL &&
         !g_cancellable_is_cancelled(cancellable)) {
    if (!g_str_has_suffix(file, RUN_SUFFIX))
      continue;
    g_autofree char *id = g_strndup(file, strlen(file) - strlen(RUN_SUFFIX));
    g_autoptr(GError) error = NULL;
    TdmRunRecord *r = tdm_history_load(h, id, &error);
    if (r != NULL)
      g_ptr_array_add(runs, r);
    else if (problems != NULL)
      g_ptr_array_add(problems, g_strdup(error->message));
  }
  g_ptr_array_sort(runs, compare_ids);
  return runs;
}

