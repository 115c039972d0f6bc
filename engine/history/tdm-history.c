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
#include <sys/file.h>
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

gboolean
tdm_history_check_folder(TdmHistory *h, GError **error)
{
  g_return_val_if_fail(h != NULL, FALSE);
  struct stat st;
  if (stat(h->folder, &st) != 0 ? errno == ENOENT : S_ISDIR(st.st_mode))
    return TRUE;
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
              _("%s: not a folder (a run history is a folder of run files)"), h->folder);
  return FALSE;
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
  g_clear_pointer(&r->experiment.points, g_array_unref);
  g_clear_pointer(&r->experiment.runs, g_ptr_array_unref);
  g_clear_pointer(&r->experiment.lr_points, g_array_unref);
  g_free(r->experiment.result);
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
  if (!tdm_file_write_all(fd, line, strlen(line))) {
    int saved = errno;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not write the run history file %s: %s"), path, g_strerror(saved));
    return FALSE;
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
                          TdmRunKind kind, JsonNode *experiment, GError **error)
{
  g_autoptr(JsonNode) extra = experiment;
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
  g_autoptr(JsonNode) config_node =
      tdm_json_parse(config_json, -1, TDM_ENGINE_ERROR_HISTORY, NULL);
  g_autoptr(GDateTime) now = g_date_time_new_now_local();
  /* A default name: to the second, so two runs started in one minute differ. */
  g_autofree char *date = g_date_time_format(now, "%Y-%m-%d %H:%M:%S");

  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_json_set_string(b, "type", "settings");
  /* Files before experiments existed have no kind: they are training runs. */
  if (kind != TDM_RUN_TRAINING)
    tdm_json_set_string(b, "kind", tdm_run_kind_name(kind));
  tdm_json_set_string(b, "name", name != NULL ? name : date);
  tdm_json_set_int(b, "created", g_date_time_to_unix(now));
  json_builder_set_member_name(b, "config");
  json_builder_add_value(b, g_steal_pointer(&config_node));
  if (extra != NULL) {
    json_builder_set_member_name(b, "experiment");
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
  return kind == TDM_RUN_EXPERIMENT ? "experiment" : "training";
}

gboolean
tdm_run_record_is_sweep(const TdmRunRecord *r)
{
  return r->kind == TDM_RUN_EXPERIMENT && r->experiment.kind == TDM_EXPERIMENT_SCALING;
}

char **
tdm_run_record_describe(const TdmRunRecord *r)
{
  char **pairs = tdm_config_describe(r->config);
  for (int i = 0; pairs[i] != NULL && pairs[i + 1] != NULL; i += 2)
    if (g_str_equal(pairs[i], "precision")) {
      g_free(pairs[i + 1]);
      pairs[i + 1] = tdm_precision_describe_used(r->config->precision, r->precision_used);
    }
  return pairs;
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

/* The run file at path, open for appending and locked (flock) against a compaction,
 * which holds the lock from reading the file to renaming its thinned copy over it: a
 * line appended meanwhile would be lost with the old file. Once the lock is ours the
 * file must still be the one at path; if a compaction replaced it while we waited, the
 * new one is opened. Only a regular file is opened (a FIFO would block the caller). */
static int
open_locked(const char *path, GError **error)
{
  for (int attempt = 0; attempt < 16; attempt++) {
    int fd = g_open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
    struct stat held, named;
    if (fd < 0 || fstat(fd, &held) != 0 || !S_ISREG(held.st_mode)) {
      int saved = fd < 0 ? errno : EINVAL;
      if (fd >= 0)
        close(fd);
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                  _("could not rename the run %s: %s"), path,
                  saved == EINVAL ? _("not a regular file") : g_strerror(saved));
      return -1;
    }
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
      ;
    if (stat(path, &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino)
      return fd;
    close(fd);
  }
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
              _("could not rename the run %s: the file keeps being replaced"), path);
  return -1;
}

gboolean
tdm_history_rename(TdmHistory *h, const char *id, const char *name, GError **error)
{
  g_return_val_if_fail(h != NULL && name != NULL, FALSE);
  if (!tdm_history_valid_id(id, error))
    return FALSE;
  g_autofree char *path = tdm_history_run_path(h, id);
  int fd = open_locked(path, error);
  if (fd < 0)
    return FALSE;
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_json_set_string(b, "type", "name");
  tdm_json_set_string(b, "name", name);
  json_builder_end_object(b);
  gboolean ok = tdm_history_append_line(fd, path, b, error);
  g_close(fd, NULL);   /* and the lock with it */
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
  /* Its kept weights go with it; a run may have none. */
  g_autofree char *weights = tdm_history_weights_path(h, id);
  if (g_unlink(weights) != 0 && errno != ENOENT) {
    int saved = errno;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not delete the run's weights %s: %s"), weights, g_strerror(saved));
    return FALSE;
  }
  return TRUE;
}
