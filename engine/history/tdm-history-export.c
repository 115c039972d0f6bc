/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history-export.c — a kept run as CSV: its name, date and settings as `# key:
 * value` lines (pandas reads past them with comment='#'), then its table: a training
 * run's per-step metrics and epoch results, or a sweep's points (tdm_scaling_points_to_csv,
 * which the window's Scaling page writes with too).
 * Numbers in C notation whatever the locale. Not the window's exports of live charts.
 */
#include "tdm-history-private.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-printable.h"

#include <math.h>

void
tdm_history_csv_value(GString *s, double v)
{
  char buffer[G_ASCII_DTOSTR_BUF_SIZE];
  /* C notation whatever the locale: the window sets the user's, and CSV readers
   * expect points. */
  if (isfinite(v))
    g_string_append_printf(s, ",%s", g_ascii_formatd(buffer, sizeof buffer, "%.9g", v));
  else
    g_string_append_c(s, ',');
}

static void training_csv(const TdmRunRecord *r, GString *s);

/* An experiment's own settings and what it came to, as `# key: value` lines: its kind
 * ("scaling", "compare"…), a sweep's mode and steps, the finder's range, the runs it
 * kept, its result. A sweep's table or the finder's curve follows; a comparison's
 * figures are its runs' own files. */
static void
experiment_header(const TdmRunRecord *r, GString *s)
{
  const TdmRunExperiment *x = &r->experiment;
  g_string_append_printf(s, "# kind: %s\n", tdm_experiment_kind_name(x->kind));
  if (x->kind == TDM_EXPERIMENT_SCALING) {
    g_string_append_printf(s, "# scaling: %s\n", tdm_scaling_mode_name(x->mode));
    g_string_append_printf(s, "# steps per device count: %ld\n", x->steps);
  } else {
    g_string_append_printf(s, "# steps: %ld\n", x->steps);
  }
  if (x->kind == TDM_EXPERIMENT_LR_FIND) {
    /* Numbers in the C locale, as the table's. */
    char first[G_ASCII_DTOSTR_BUF_SIZE], last[G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append_printf(s, "# learning rates: %s to %s\n",
                           g_ascii_formatd(first, sizeof first, "%g", x->lr_options.lr_first),
                           g_ascii_formatd(last, sizeof last, "%g", x->lr_options.lr_last));
    if (isfinite(x->lr_suggestion))
      g_string_append_printf(s, "# suggested learning rate: %s\n",
                             g_ascii_formatd(first, sizeof first, "%.6g", x->lr_suggestion));
  }
  for (guint i = 0; i < x->runs->len; i++) {
    g_autofree char *id = tdm_printable(x->runs->pdata[i]);
    g_string_append_printf(s, "# run %u: %s\n", i + 1, id);
  }
  if (x->result != NULL) {
    g_autofree char *result = tdm_printable(x->result);
    g_string_append_printf(s, "# result: %s\n", result);
  }
}

gboolean
tdm_history_export_csv(TdmHistory *h, const char *id, const char *path, GError **error)
{
  g_autoptr(TdmRunRecord) r = tdm_history_load(h, id, error);
  if (r == NULL)
    return FALSE;
  /* The run's name, date and settings first, as `# key: value` lines (the window's
   * chart exports do the same; pandas reads past them with comment='#'). */
  g_autoptr(GString) s = g_string_new(NULL);
  g_autoptr(GDateTime) created = g_date_time_new_from_unix_utc(r->created);
  g_autofree char *date = created != NULL ? g_date_time_format_iso8601(created) : NULL;
  /* A newline in a name or setting would end its comment line and start a row of the
   * table: each value goes on its one line, escaped. */
  g_autofree char *name = tdm_printable(r->name);
  g_string_append_printf(s, "# run: %s\n", name);
  if (date != NULL)
    g_string_append_printf(s, "# date: %s\n", date);
  if (r->kind == TDM_RUN_EXPERIMENT)
    experiment_header(r, s);
  g_auto(GStrv) settings = tdm_run_record_describe(r);
  for (int i = 0; settings[i] != NULL && settings[i + 1] != NULL; i += 2) {
    g_autofree char *value = tdm_printable(settings[i + 1]);
    g_string_append_printf(s, "# %s: %s\n", settings[i], value);
  }
  if (tdm_run_record_is_sweep(r))
    tdm_scaling_points_to_csv(s, (const TdmScalingPoint *)r->experiment.points->data,
                              r->experiment.points->len);
  else if (r->kind == TDM_RUN_EXPERIMENT && r->experiment.kind == TDM_EXPERIMENT_LR_FIND) {
    g_autofree char *curve = tdm_lr_find_to_csv(
      (const TdmLrFindPoint *)r->experiment.lr_points->data, (int)r->experiment.lr_points->len);
    g_string_append(s, curve);
  } else if (r->kind == TDM_RUN_TRAINING)
    training_csv(r, s);
  g_autoptr(GError) local = NULL;
  if (!g_file_set_contents(path, s->str, (gssize)s->len, &local)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not export the run to %s: %s"), path, local->message);
    return FALSE;
  }
  return TRUE;
}

/* The training table's columns, in order; each row fills those its kind has. */
static const char *const training_columns[] = {
  "kind", "step", "epoch", "train_loss", "train_accuracy", "val_loss", "val_accuracy",
  "test_loss", "test_accuracy", "learning_rate", "samples_per_s", "elapsed_s", "device",
  "compute_ms", "communication_ms", "wait_ms", "memory_bytes", "forward_ms", "backward_ms",
  "reduce_ms", "all_reduce_ms", "broadcast_ms", "update_ms", "hidden_communication_ms",
  "overlap_percent", "sent_bytes", "received_bytes",
};

enum {
  COLUMN_KIND, COLUMN_STEP, COLUMN_EPOCH, COLUMN_TRAIN_LOSS, COLUMN_TRAIN_ACCURACY,
  COLUMN_VAL_LOSS, COLUMN_VAL_ACCURACY, COLUMN_TEST_LOSS, COLUMN_TEST_ACCURACY, COLUMN_LR,
  COLUMN_SAMPLES, COLUMN_ELAPSED, COLUMN_DEVICE, COLUMN_COMPUTE, COLUMN_COMMUNICATION,
  COLUMN_WAIT, COLUMN_MEMORY, COLUMN_FORWARD, COLUMN_BACKWARD, COLUMN_REDUCE,
  COLUMN_ALL_REDUCE, COLUMN_BROADCAST, COLUMN_UPDATE, COLUMN_HIDDEN, COLUMN_OVERLAP,
  COLUMN_SENT, COLUMN_RECEIVED, COLUMN_COUNT
};

G_STATIC_ASSERT(G_N_ELEMENTS(training_columns) == COLUMN_COUNT);

/* One row: values[k] for column k, NaN where the kind has none. */
static void
csv_row(GString *s, const char *kind, const double *values)
{
  g_string_append(s, kind);
  for (int k = 1; k < COLUMN_COUNT; k++)
    tdm_history_csv_value(s, values[k]);
  g_string_append_c(s, '\n');
}

static void
row_clear(double *values)
{
  for (int k = 0; k < COLUMN_COUNT; k++)
    values[k] = NAN;
}

static void
training_csv(const TdmRunRecord *r, GString *s)
{
  g_string_append(s, "# units: loss is the mean cross-entropy, accuracy a fraction from 0 "
                     "to 1, epoch the epochs done; _s seconds of training, _ms milliseconds "
                     "per step, _bytes bytes, _percent percent; device is the replica's "
                     "index in devices\n");
  for (int k = 0; k < COLUMN_COUNT; k++)
    g_string_append_printf(s, "%s%s", k ? "," : "", training_columns[k]);
  g_string_append_c(s, '\n');
  double v[COLUMN_COUNT];
  for (guint i = 0; i < r->points->len; i++) {
    const TdmHistoryPoint *p = &g_array_index(r->points, TdmHistoryPoint, i);
    row_clear(v);
    v[COLUMN_STEP] = p->step;
    v[COLUMN_EPOCH] = p->epoch;
    v[COLUMN_TRAIN_LOSS] = p->train_loss;
    v[COLUMN_TRAIN_ACCURACY] = p->train_accuracy;
    v[COLUMN_LR] = p->lr;
    v[COLUMN_SAMPLES] = p->samples_per_second;
    v[COLUMN_ELAPSED] = p->elapsed;
    csv_row(s, "step", v);
  }
  for (guint i = 0; i < r->epochs->len; i++) {
    const TdmEpochEvent *e = &g_array_index(r->epochs, TdmEpochEvent, i);
    row_clear(v);
    v[COLUMN_STEP] = e->step;
    v[COLUMN_EPOCH] = e->epoch;
    v[COLUMN_TRAIN_LOSS] = e->train_loss;
    v[COLUMN_TRAIN_ACCURACY] = e->train_accuracy;
    v[COLUMN_VAL_LOSS] = e->val_loss;
    v[COLUMN_VAL_ACCURACY] = e->val_accuracy;
    v[COLUMN_TEST_LOSS] = e->test_loss;
    v[COLUMN_TEST_ACCURACY] = e->test_accuracy;
    v[COLUMN_ELAPSED] = e->elapsed;
    csv_row(s, "epoch", v);
  }
  for (guint i = 0; i < r->device_points->len; i++) {
    const TdmHistoryDevicePoint *d = &g_array_index(r->device_points, TdmHistoryDevicePoint, i);
    row_clear(v);
    v[COLUMN_STEP] = d->step;
    v[COLUMN_DEVICE] = d->device;
    v[COLUMN_COMPUTE] = d->compute_ms;
    v[COLUMN_COMMUNICATION] = d->comm_ms;
    v[COLUMN_WAIT] = d->wait_ms;
    v[COLUMN_MEMORY] = (double)d->tandem_bytes;
    csv_row(s, "device", v);
  }
  for (guint i = 0; i < r->phases->len; i++) {
    const TdmHistoryPhases *p = &g_array_index(r->phases, TdmHistoryPhases, i);
    row_clear(v);
    v[COLUMN_STEP] = p->step;
    v[COLUMN_DEVICE] = p->device;
    v[COLUMN_FORWARD] = p->ms[TDM_PHASE_FORWARD];
    v[COLUMN_BACKWARD] = p->ms[TDM_PHASE_BACKWARD];
    v[COLUMN_REDUCE] = p->ms[TDM_PHASE_REDUCE];
    v[COLUMN_ALL_REDUCE] = p->ms[TDM_PHASE_ALLREDUCE];
    v[COLUMN_BROADCAST] = p->ms[TDM_PHASE_BROADCAST];
    v[COLUMN_UPDATE] = p->ms[TDM_PHASE_UPDATE];
    v[COLUMN_WAIT] = p->ms[TDM_PHASE_WAIT];
    v[COLUMN_HIDDEN] = p->hidden_ms;
    v[COLUMN_OVERLAP] = tdm_history_phases_overlap(p);
    v[COLUMN_SENT] = (double)p->bytes_sent;
    v[COLUMN_RECEIVED] = (double)p->bytes_received;
    csv_row(s, "phases", v);
  }
  if (r->finished) {
    row_clear(v);
    v[COLUMN_STEP] = r->final.steps;
    v[COLUMN_TEST_LOSS] = r->final.test_loss;
    v[COLUMN_TEST_ACCURACY] = r->final.test_accuracy;
    v[COLUMN_ELAPSED] = r->final.elapsed;
    csv_row(s, "end", v);
  }
}
