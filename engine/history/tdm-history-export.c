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
  if (r->kind == TDM_RUN_SCALING) {
    g_string_append_printf(s, "# kind: %s\n", tdm_run_kind_name(r->kind));
    g_string_append_printf(s, "# scaling: %s\n", tdm_scaling_mode_name(r->sweep.mode));
    g_string_append_printf(s, "# steps per device count: %ld\n", r->sweep.steps);
  }
  g_auto(GStrv) settings = tdm_config_describe(r->config);
  for (int i = 0; settings[i] != NULL && settings[i + 1] != NULL; i += 2) {
    g_autofree char *value = tdm_printable(settings[i + 1]);
    g_string_append_printf(s, "# %s: %s\n", settings[i], value);
  }
  if (r->kind == TDM_RUN_SCALING)
    tdm_scaling_points_to_csv(s, (const TdmScalingPoint *)r->sweep.points->data,
                              r->sweep.points->len);
  else
    training_csv(r, s);
  g_autoptr(GError) local = NULL;
  if (!g_file_set_contents(path, s->str, (gssize)s->len, &local)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_HISTORY,
                _("could not export the run to %s: %s"), path, local->message);
    return FALSE;
  }
  return TRUE;
}

static void
training_csv(const TdmRunRecord *r, GString *s)
{
  g_string_append(s, "kind,step,epoch,train_loss,train_accuracy,"
                     "samples_per_second,elapsed,test_loss,test_accuracy\n");
  for (guint i = 0; i < r->points->len; i++) {
    const TdmHistoryPoint *p = &g_array_index(r->points, TdmHistoryPoint, i);
    g_string_append_printf(s, "step,%ld", p->step);
    tdm_history_csv_value(s, p->epoch);
    tdm_history_csv_value(s, p->train_loss);
    tdm_history_csv_value(s, p->train_accuracy);
    tdm_history_csv_value(s, p->samples_per_second);
    tdm_history_csv_value(s, p->elapsed);
    g_string_append(s, ",,\n");
  }
  for (guint i = 0; i < r->epochs->len; i++) {
    const TdmEpochEvent *e = &g_array_index(r->epochs, TdmEpochEvent, i);
    g_string_append_printf(s, "epoch,%ld,%d", e->step, e->epoch);
    tdm_history_csv_value(s, e->train_loss);
    tdm_history_csv_value(s, e->train_accuracy);
    g_string_append_c(s, ',');
    tdm_history_csv_value(s, e->elapsed);
    tdm_history_csv_value(s, e->test_loss);
    tdm_history_csv_value(s, e->test_accuracy);
    g_string_append_c(s, '\n');
  }
}
