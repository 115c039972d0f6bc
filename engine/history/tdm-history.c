/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history.c — runs on disk as JSON lines: the recorder that appends them while a
 * run goes, and the reader that lists, loads, renames, deletes and exports them.
 *
 * One line per record, written with a single write() and no buffering, so a crash
 * leaves whole lines and at most one partial last line (ignored on reading). Not the
 * trainer's event stream: only what a history keeps (each sampled step's time in each
 * phase, per device, but no spans, batches or predictions, which are for watching,
 * not for comparing).
 */
#include "tdm-history-private.h"
#include "tdm-event-json.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-file.h"
#include "tdm-json.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUN_SUFFIX ".jsonl"

TdmHistory *
tdm_history_new(const char *folder)
{
  TdmHistory *h = g_new0(TdmHistory, 1);
  h->folder = folder != NULL ? g_strdup(folder)
                             : g_build_filename(g_get_user_data_dir(), "tandem", "runs", NULL);
  return h;
}

void
tdm_history_free(TdmHistory *h)
{
  if (h == NULL)
    return;
  g_free(h->folder);
  g_free(h);
}

const char *
tdm_history_get_folder(TdmHistory *h)
{
  return h->folder;
}

void
tdm_run_record_free(TdmRunRecord *r)
{
  if (r == NULL)
    return;
  g_free(r->id);
  g_free(r->name);
  tdm_config_free(r->config);
  g_array_unref(r->points);
  g_array_unref(r->device_points);
  g_array_unref(r->phases);
  g_array_unref(r->epochs);
  g_clear_pointer(&r->sweep.points, g_array_unref);
  g_free(r->error);
  g_free(r);
}

/* Each summary's rate covers the steps since the one before: the run's rate is the
 * steps they cover over the time they took (a mean of the rates would let a few fast
 * summaries on a busy machine outweigh the slow ones). */
double
tdm_run_record_samples_per_second(const TdmRunRecord *r)
{
  double steps = 0, time = 0;
  long previous = 0;
  for (guint i = 0; i < r->points->len; i++) {
    const TdmHistoryPoint *p = &g_array_index(r->points, TdmHistoryPoint, i);
    long covered = p->step - previous;
    if (covered > 0 && p->samples_per_second > 0 && isfinite(p->samples_per_second)) {
      steps += covered;
      time += covered / p->samples_per_second;
    }
    if (covered > 0)
      previous = p->step;
  }
  return time > 0 ? steps / time : 0;
}

/* The figures of one DEVICES event are consecutive entries. Each event's
 * figures are means over the steps it timed: weighting every event alike (or dropping
 * the first, which on a CPU run holds a third of the run) let a short last window,
 * or an event that timed nothing, stand for the whole run. */
long
tdm_run_record_device_means(const TdmRunRecord *r, int device, double ms[3])
{
  double sum[3] = {0, 0, 0};
  long covered = 0, previous = 0;
  guint i = 0;
  while (i < r->device_points->len) {
    const TdmHistoryDevicePoint *first = &g_array_index(r->device_points, TdmHistoryDevicePoint, i);
    guint end = i;
    double busy = 0, event[3] = {0, 0, 0};
    int devices = 0;
    /* An event's entries: devices 0, 1, … of one step (an event that timed nothing
     * can follow at the same step, after an evaluation). */
    while (end < r->device_points->len &&
           g_array_index(r->device_points, TdmHistoryDevicePoint, end).step == first->step &&
           (end == i || g_array_index(r->device_points, TdmHistoryDevicePoint, end).device >
                          g_array_index(r->device_points, TdmHistoryDevicePoint, end - 1).device)) {
      const TdmHistoryDevicePoint *p = &g_array_index(r->device_points, TdmHistoryDevicePoint, end);
      double v[3] = {p->compute_ms, p->comm_ms, p->wait_ms};
      for (int k = 0; k < 3; k++)
        if (isfinite(v[k]))
          busy += v[k];
      if (device < 0 || p->device == device) {
        for (int k = 0; k < 3; k++)
          event[k] += isfinite(v[k]) ? v[k] : 0;
        devices++;
      }
      end++;
    }
    long steps = first->step - previous;
    previous = first->step;
    i = end;
    if (busy <= 0 || devices == 0 || steps <= 0)
      continue;
    for (int k = 0; k < 3; k++)
      sum[k] += steps * event[k] / devices;
    covered += steps;
  }
  for (int k = 0; k < 3; k++)
    ms[k] = covered > 0 ? sum[k] / covered : NAN;
  return covered;
}

int
tdm_run_record_phase_means(const TdmRunRecord *r, int device, double ms[TDM_PHASE_COUNT])
{
  long first = G_MAXLONG, last = G_MINLONG;
  int n = 0;
  for (int k = 0; k < TDM_PHASE_COUNT; k++)
    ms[k] = 0;
  for (guint i = 0; i < r->phases->len; i++) {
    long step = g_array_index(r->phases, TdmHistoryPhases, i).step;
    first = MIN(first, step);
    last = MAX(last, step);
  }
  for (guint i = 0; i < r->phases->len; i++) {
    const TdmHistoryPhases *p = &g_array_index(r->phases, TdmHistoryPhases, i);
    if ((device >= 0 && p->device != device) || (p->step == first && last > first))
      continue;
    for (int k = 0; k < TDM_PHASE_COUNT; k++)
      ms[k] += p->ms[k];
    n++;
  }
  for (int k = 0; n > 0 && k < TDM_PHASE_COUNT; k++)
    ms[k] /= n;
  return n;
}

gboolean
tdm_run_record_bytes_per_step(const TdmRunRecord *r, int device, guint64 *sent,
                              guint64 *received)
{
  for (guint i = r->phases->len; i-- > 0;) {
    const TdmHistoryPhases *p = &g_array_index(r->phases, TdmHistoryPhases, i);
    if (p->device == device) {
      *sent = p->bytes_sent;
      *received = p->bytes_received;
      return TRUE;
    }
  }
  return FALSE;
}

double
tdm_run_record_final_train_loss(const TdmRunRecord *r)
{
  if (r->points->len == 0)
    return NAN;
  return g_array_index(r->points, TdmHistoryPoint, r->points->len - 1).train_loss;
}

/* Ids come from file names: refuse anything that would leave the folder. */
gboolean
tdm_history_valid_id(const char *id, GError **error)
{
  if (id != NULL && *id != '\0' && strchr(id, '/') == NULL && id[0] != '.')
    return TRUE;
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
              _("“%s” is not the id of a run in the history"), id != NULL ? id : "");
  return FALSE;
}

char *
tdm_history_run_path(TdmHistory *h, const char *id)
{
  g_autofree char *file = g_strconcat(id, RUN_SUFFIX, NULL);
  return g_build_filename(h->folder, file, NULL);
}

/* ---- writing ---------------------------------------------------------------------- */

/* One whole line in one write: a reader (or a crash) never sees half of it, short of
 * the disk filling up, which the reader tolerates on the last line. */
gboolean
tdm_history_append_line(int fd, const char *path, JsonBuilder *b, GError **error)
{
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  g_autofree char *text = tdm_json_to_string(root);
  g_autofree char *line = g_strconcat(text, "\n", NULL);
  size_t len = strlen(line), done = 0;
  while (done < len) {
    ssize_t n = write(fd, line + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int saved = errno;
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                  _("could not write the run history file %s: %s"), path, g_strerror(saved));
      return FALSE;
    }
    done += (size_t)n;
  }
  return TRUE;
}

/* Sortable to the microsecond, so runs of one second (a short comparison's two runs)
 * list in the order they ran; the random tail keeps two processes apart. */
static char *
new_id(void)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_local();
  g_autofree char *stamp = g_date_time_format(now, "%Y%m%d-%H%M%S");
  return g_strdup_printf("%s-%06d-%04x", stamp, g_date_time_get_microsecond(now),
                         g_random_int() & 0xffff);
}

TdmRunRecorder *
tdm_history_recorder_open(TdmHistory *h, const TdmConfig *config, const char *name,
                          TdmRunKind kind, JsonNode *scaling, GError **error)
{
  g_autoptr(JsonNode) extra = scaling;
  g_return_val_if_fail(h != NULL && config != NULL, NULL);
  if (g_mkdir_with_parents(h->folder, 0700) != 0) {
    int saved = errno;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not make the run history folder %s: %s"), h->folder, g_strerror(saved));
    return NULL;
  }
  g_autoptr(TdmRunRecorder) rec = g_new0(TdmRunRecorder, 1);
  rec->fd = -1;
  rec->kind = kind;
  rec->config = tdm_config_copy(config);
  rec->id = new_id();
  rec->path = tdm_history_run_path(h, rec->id);
  rec->folder = g_strdup(h->folder);
  rec->budget = TDM_HISTORY_BUDGET;
  rec->recent = TDM_HISTORY_RECENT;
  rec->fd = g_open(rec->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  if (rec->fd < 0) {
    int saved = errno;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not create the run history file %s: %s"), rec->path, g_strerror(saved));
    return NULL;
  }
  g_autofree char *config_json = tdm_config_to_json(config);
  g_autoptr(JsonNode) config_node = json_from_string(config_json, NULL);
  g_autoptr(GDateTime) now = g_date_time_new_now_local();
  /* A default name: to the second, so two runs started in one minute differ. */
  g_autofree char *date = g_date_time_format(now, "%Y-%m-%d %H:%M:%S");

  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_json_set_string(b, "type", "settings");
  /* Files before sweeps existed have no kind: they are training runs. */
  if (kind != TDM_RUN_TRAINING)
    tdm_json_set_string(b, "kind", tdm_run_kind_name(kind));
  tdm_json_set_string(b, "name", name != NULL ? name : date);
  tdm_json_set_int(b, "created", g_date_time_to_unix(now));
  json_builder_set_member_name(b, "config");
  json_builder_add_value(b, g_steal_pointer(&config_node));
  if (extra != NULL) {
    json_builder_set_member_name(b, "scaling");
    json_builder_add_value(b, g_steal_pointer(&extra));
  }
  json_builder_end_object(b);
  if (!tdm_history_append_line(rec->fd, rec->path, b, error))
    return NULL;
  return g_steal_pointer(&rec);
}

TdmRunRecorder *
tdm_run_recorder_new(TdmHistory *h, const TdmConfig *config, const char *name, GError **error)
{
  return tdm_history_recorder_open(h, config, name, TDM_RUN_TRAINING, NULL, error);
}

double
tdm_history_phases_overlap(const TdmHistoryPhases *p)
{
  g_return_val_if_fail(p != NULL, NAN);
  return tdm_overlap_percent(p->ms[TDM_PHASE_REDUCE] + p->ms[TDM_PHASE_ALLREDUCE] +
                             p->ms[TDM_PHASE_BROADCAST], p->hidden_ms);
}

const char *
tdm_run_kind_name(TdmRunKind kind)
{
  return kind == TDM_RUN_SCALING ? "scaling" : "training";
}

void
tdm_run_recorder_set_limits(TdmRunRecorder *rec, gint64 budget, double recent)
{
  g_return_if_fail(rec != NULL && recent >= 0);
  rec->budget = budget;
  rec->recent = recent;
}

const char *
tdm_run_recorder_get_id(TdmRunRecorder *rec)
{
  return rec->id;
}

void
tdm_run_recorder_add(const TdmEvent *e, gpointer data)
{
  TdmRunRecorder *rec = data;
  if (rec->fd < 0 || rec->error != NULL)
    return;
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  switch (e->kind) {
  case TDM_EVENT_STARTED:
  case TDM_EVENT_STEP:
  case TDM_EVENT_EPOCH:
  case TDM_EVENT_FINISHED:
  case TDM_EVENT_FAILED: {
    /* The line tandem-train --json prints for the event, from the one serializer. */
    g_autoptr(JsonNode) node = tdm_event_to_json(e);
    JsonObject *o = json_node_get_object(node);
    g_autoptr(GList) members = json_object_get_members(o);
    for (GList *m = members; m != NULL; m = m->next) {
      json_builder_set_member_name(b, m->data);
      json_builder_add_value(b, json_node_copy(json_object_get_member(o, m->data)));
    }
    break;
  }
  case TDM_EVENT_DEVICES:
    /* Like the phases below, a line of the file's own: the times a history draws,
     * without --json's telemetry, so that a long run's budget holds steps. */
    tdm_json_set_string(b, "type", "devices");
    tdm_json_set_int(b, "step", e->devices.step);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (int r = 0; r < e->devices.replicas && r < TDM_MAX_REPLICAS; r++) {
      json_builder_begin_object(b);
      tdm_json_set_double(b, "compute_ms", e->devices.device[r].compute_ms);
      tdm_json_set_double(b, "comm_ms", e->devices.device[r].comm_ms);
      tdm_json_set_double(b, "wait_ms", e->devices.device[r].wait_ms);
      tdm_json_set_int(b, "tandem_bytes", e->devices.device[r].tandem_bytes);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    break;
  case TDM_EVENT_PHASES:
    /* Per device, the time in each phase (in TdmPhase's order): enough to compare
     * strategies, a fraction of the spans' size. */
    tdm_json_set_string(b, "type", "phases");
    tdm_json_set_int(b, "step", e->phases.step);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (int r = 0; r < e->phases.replicas && r < TDM_MAX_REPLICAS; r++) {
      const TdmDevicePhases *d = &e->phases.device[r];
      double ms[TDM_PHASE_COUNT] = {0};
      for (int i = 0; i < d->spans && i < TDM_MAX_PHASE_SPANS; i++)
        if (d->span[i].phase >= 0 && d->span[i].phase < TDM_PHASE_COUNT)
          ms[d->span[i].phase] += d->span[i].end_ms - d->span[i].start_ms;
      json_builder_begin_array(b);
      for (int k = 0; k < TDM_PHASE_COUNT; k++)
        json_builder_add_double_value(b, round(ms[k] * 1e3) / 1e3);
      json_builder_end_array(b);
    }
    json_builder_end_array(b);
    /* [sent, received] per device, beside "devices" as in --json. */
    json_builder_set_member_name(b, "bytes");
    json_builder_begin_array(b);
    for (int r = 0; r < e->phases.replicas && r < TDM_MAX_REPLICAS; r++) {
      json_builder_begin_array(b);
      json_builder_add_int_value(b, (gint64)e->phases.device[r].bytes_sent);
      json_builder_add_int_value(b, (gint64)e->phases.device[r].bytes_received);
      json_builder_end_array(b);
    }
    json_builder_end_array(b);
    /* Per device, the communication hidden under backward, ms (overlap's numerator). */
    json_builder_set_member_name(b, "hidden_ms");
    json_builder_begin_array(b);
    for (int r = 0; r < e->phases.replicas && r < TDM_MAX_REPLICAS; r++)
      json_builder_add_double_value(b, round(e->phases.device[r].hidden_ms * 1e3) / 1e3);
    json_builder_end_array(b);
    break;
  default:
    return;
  }
  json_builder_end_object(b);
  tdm_history_recorder_write(rec, b);
}

gboolean
tdm_run_recorder_finish(TdmRunRecorder *rec, GError **error)
{
  if (rec->fd >= 0) {
    if (g_close(rec->fd, rec->error == NULL ? &rec->error : NULL) == FALSE && rec->error != NULL)
      g_prefix_error(&rec->error, "%s: ", rec->path);
    rec->fd = -1;
  }
  if (rec->error != NULL) {
    g_propagate_error(error, g_steal_pointer(&rec->error));
    return FALSE;
  }
  return TRUE;
}

void
tdm_run_recorder_free(TdmRunRecorder *rec)
{
  if (rec == NULL)
    return;
  if (rec->fd >= 0)
    g_close(rec->fd, NULL);
  g_clear_error(&rec->error);
  tdm_config_free(rec->config);
  g_free(rec->id);
  g_free(rec->path);
  g_free(rec->folder);
  g_free(rec);
}

/* ---- reading ---------------------------------------------------------------------- */

double
tdm_history_get_double(JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member(o, name);
  if (n == NULL || JSON_NODE_HOLDS_NULL(n) || !JSON_NODE_HOLDS_VALUE(n))
    return NAN;
  return json_node_get_double(n);
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
  const char *name = json_object_get_string_member_with_default(o, "name", NULL);
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
  const char *kind = json_object_get_string_member_with_default(o, "kind", "training");
  if (g_str_equal(kind, "scaling")) {
    JsonNode *scaling = json_object_get_member(o, "scaling");
    r->kind = TDM_RUN_SCALING;
    tdm_history_read_sweep_settings(r, scaling != NULL && JSON_NODE_HOLDS_OBJECT(scaling)
                                         ? json_node_get_object(scaling) : NULL);
  } else if (!g_str_equal(kind, "training")) {
    /* A kind of a newer version: better named as unreadable than shown wrong. */
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("%s: a record of a kind this version does not know (“%s”)"), path, kind);
    return FALSE;
  }
  return TRUE;
}

static void
read_record(TdmRunRecord *r, const char *type, JsonObject *o)
{
  if (r->kind == TDM_RUN_SCALING && tdm_history_read_sweep_line(r, type, o))
    return;
  if (g_str_equal(type, "step")) {
    TdmHistoryPoint p = {
      .step = tdm_history_get_int(o, "step"),
      /* "epoch_float" as --json writes it; "epoch" in files of earlier versions. */
      .epoch = json_object_has_member(o, "epoch_float") ? tdm_history_get_double(o, "epoch_float")
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
    for (guint i = 0; devices != NULL && i < json_array_get_length(devices); i++) {
      JsonObject *d = json_array_get_object_element(devices, i);
      if (d == NULL)
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
    for (guint i = 0; devices != NULL && i < json_array_get_length(devices); i++) {
      JsonNode *d = json_array_get_element(devices, i);
      if (d == NULL || !JSON_NODE_HOLDS_ARRAY(d))
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
    /* The batch the run took, where the trainer chose a smaller one than asked. */
    gint64 batch = tdm_history_get_int(o, "batch");
    if (r->config != NULL && batch > 0 && batch != r->config->batch &&
        json_object_has_member(o, "batch_asked"))
      r->config->batch = (int)batch;
  } else if (g_str_equal(type, "epoch")) {
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
    r->final.epochs_done = (int)tdm_history_get_int(o, "epochs_done");
    r->final.best_epoch = (int)tdm_history_get_int(o, "best_epoch");
    const char *monitor = json_object_get_string_member_with_default(o, "monitor", NULL);
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
    r->error = g_strdup(json_object_get_string_member_with_default(o, "message", ""));
  } else if (g_str_equal(type, "name")) {
    const char *name = json_object_get_string_member_with_default(o, "name", NULL);
    if (name != NULL) {
      g_free(r->name);
      r->name = g_strdup(name);
    }
  }
  /* Unknown types come from newer versions: skipped, not an error. */
}

/* Only a regular file is opened (a FIFO named x.jsonl would block the listing for
 * ever), without blocking, and read no further than its size said. */
char *
tdm_history_read_file(const char *path, gsize *length, GError **error)
{
  struct stat st;
  int fd = tdm_file_open_regular(path, _("run history "), TDM_ENGINE_ERROR_HISTORY, &st, error);
  if (fd < 0)
    return NULL;
  if (st.st_size > TDM_HISTORY_MAX_FILE) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                "%s: %" G_GINT64_FORMAT " bytes, more than a run history file holds "
                "(%d MB at most)", path, (gint64)st.st_size, TDM_HISTORY_MAX_FILE >> 20);
    close(fd);
    return NULL;
  }
  gsize size = (gsize)st.st_size, done = 0;
  char *contents = g_malloc(size + 1);
  while (done < size) {
    ssize_t n = read(fd, contents + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int saved = errno;
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY, _("%s: cannot read: %s"),
                  path, g_strerror(saved));
      close(fd);
      g_free(contents);
      return NULL;
    }
    if (n == 0)
      break;   /* shorter than it was a moment ago: read what is there */
    done += (gsize)n;
  }
  close(fd);
  contents[done] = '\0';
  *length = done;
  return contents;
}

TdmRunRecord *
tdm_history_load(TdmHistory *h, const char *id, GError **error)
{
  g_return_val_if_fail(h != NULL, NULL);
  if (!tdm_history_valid_id(id, error))
    return NULL;
  g_autofree char *path = tdm_history_run_path(h, id);
  gsize length = 0;
  g_autofree char *contents = tdm_history_read_file(path, &length, error);
  if (contents == NULL)
    return NULL;

  g_autoptr(TdmRunRecord) r = g_new0(TdmRunRecord, 1);
  r->id = g_strdup(id);
  r->points = g_array_new(FALSE, FALSE, sizeof(TdmHistoryPoint));
  r->device_points = g_array_new(FALSE, FALSE, sizeof(TdmHistoryDevicePoint));
  r->phases = g_array_new(FALSE, FALSE, sizeof(TdmHistoryPhases));
  r->epochs = g_array_new(FALSE, FALSE, sizeof(TdmEpochEvent));
  r->sweep.points = g_array_new(FALSE, FALSE, sizeof(TdmScalingPoint));

  char *line = contents;
  int number = 0;
  while (line < contents + length) {
    char *end = memchr(line, '\n', contents + length - line);
    gboolean last = end == NULL;
    if (end != NULL)
      *end = '\0';
    number++;
    g_autoptr(GError) local = NULL;
    JsonObject *o = NULL;
    g_autoptr(JsonNode) root = NULL;
    if (*line != '\0' &&
        (root = tdm_json_parse(line, -1, TDM_ENGINE_ERROR_HISTORY, &local)) != NULL)
      o = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    if (*line != '\0' && o == NULL) {
      /* A crash mid-write leaves a partial last line: what came before stands. */
      if (last && number > 1)
        break;
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                  _("%s, line %d: not a run history record%s%s"), path, number,
                  local != NULL ? ": " : "", local != NULL ? local->message : "");
      return NULL;
    }
    if (o != NULL) {
      const char *type = json_object_get_string_member_with_default(o, "type", "");
      if (number == 1) {
        if (!g_str_equal(type, "settings")) {
          g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                      _("%s: does not start with a run's settings"), path);
          return NULL;
        }
        if (!read_settings(r, o, path, error))
          return NULL;
      } else {
        read_record(r, type, o);
      }
    }
    if (last)
      break;
    line = end + 1;
  }
  if (r->config == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("%s: empty, not a run history file"), path);
    return NULL;
  }
  return g_steal_pointer(&r);
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

gboolean
tdm_history_rename(TdmHistory *h, const char *id, const char *name, GError **error)
{
  g_return_val_if_fail(h != NULL && name != NULL, FALSE);
  if (!tdm_history_valid_id(id, error))
    return FALSE;
  g_autofree char *path = tdm_history_run_path(h, id);
  int fd = g_open(path, O_WRONLY | O_APPEND | O_CLOEXEC, 0);
  if (fd < 0) {
    int saved = errno;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not rename the run %s: %s"), path, g_strerror(saved));
    return FALSE;
  }
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_json_set_string(b, "type", "name");
  tdm_json_set_string(b, "name", name);
  json_builder_end_object(b);
  gboolean ok = tdm_history_append_line(fd, path, b, error);
  g_close(fd, NULL);
  return ok;
}

gboolean
tdm_history_delete(TdmHistory *h, const char *id, GError **error)
{
  g_return_val_if_fail(h != NULL, FALSE);
  if (!tdm_history_valid_id(id, error))
    return FALSE;
  g_autofree char *path = tdm_history_run_path(h, id);
  if (g_unlink(path) != 0) {
    int saved = errno;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not delete the run %s: %s"), path, g_strerror(saved));
    return FALSE;
  }
  return TRUE;
}
