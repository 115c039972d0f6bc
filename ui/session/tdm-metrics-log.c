/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-metrics-log.c: every figure of one run, kept in full for the CSV export.
 *
 * Rows are stored as a small header (kind, time, step, epoch) and a slice of one
 * flat array of doubles, so a long run costs a few dozen bytes per event rather
 * than an allocation each. The CSV has one row per event with the columns that
 * event knows filled in and the rest left empty; numbers are written in the C
 * locale so that every spreadsheet reads them the same way. The run's settings,
 * when known, come first as `# key: value` lines.
 */

#include <math.h>
#include <string.h>

#include "tdm-format.h"
#include "tdm-metrics-log.h"

typedef enum
{
  ROW_STEP,
  ROW_EPOCH,
  ROW_DEVICES,
  ROW_TELEMETRY,
  ROW_FINISHED,
} RowKind;

enum {
  DEV_COMPUTE,
  DEV_COMM,
  DEV_WAIT,
  DEV_TANDEM,
  DEV_USED,
  DEV_TOTAL,
  DEV_UTIL,
  DEV_N
};

typedef struct
{
  guint8  kind;
  gint16  replica;     /* ROW_TELEMETRY */
  double  elapsed;
  gint64  step;
  double  epoch;
  guint   offset;      /* into values */
} Row;

struct _TdmMetricsLog
{
  GArray  *rows;
  GArray  *values;
  int      replicas;
  char   **names;      /* column prefixes, one per replica */
  gint64   last_step;
  double   last_epoch;
};

static const char *device_columns[DEV_N] = {
  "compute_ms", "communication_ms", "wait_ms", "tandem_bytes", "used_bytes",
  "total_bytes", "utilization_percent",
};

TdmMetricsLog *
tdm_metrics_log_new (void)
{
  TdmMetricsLog *log = g_new0 (TdmMetricsLog, 1);

  log->rows = g_array_new (FALSE, FALSE, sizeof (Row));
  log->values = g_array_new (FALSE, FALSE, sizeof (double));

  return log;
}

void
tdm_metrics_log_free (TdmMetricsLog *log)
{
  if (log == NULL)
    return;

  g_array_unref (log->rows);
  g_array_unref (log->values);
  g_strfreev (log->names);
  g_free (log);
}

void
tdm_metrics_log_begin (TdmMetricsLog         *log,
                       const TdmStartedEvent *started)
{
  g_return_if_fail (log != NULL);
  g_return_if_fail (started != NULL);

  g_array_set_size (log->rows, 0);
  g_array_set_size (log->values, 0);
  g_strfreev (log->names);

  log->replicas = CLAMP (started->replicas, 0, TDM_MAX_REPLICAS);
  log->names = g_new0 (char *, log->replicas + 1);
  /* As the window names them ("cpu 1", "cpu 2", "cuda:0"), so a column reads as
   * the legend does. */
  for (int r = 0; r < log->replicas; r++)
    log->names[r] = tdm_format_replica (started, r);
  log->last_step = 0;
  log->last_epoch = 0;
}

static double *
add_row (TdmMetricsLog *log,
         RowKind        kind,
         double         elapsed,
         gint64         step,
         double         epoch,
         guint          n_values)
{
  Row row = { kind, -1, elapsed, step, epoch, log->values->len };

  g_array_append_val (log->rows, row);
  g_array_set_size (log->values, log->values->len + n_values);

  return &g_array_index (log->values, double, row.offset);
}

static double
known (double value)
{
  return value < 0 ? NAN : value;
}

void
tdm_metrics_log_add (TdmMetricsLog  *log,
                     const TdmEvent *event)
{
  double *v;

  g_return_if_fail (log != NULL);
  g_return_if_fail (event != NULL);

  switch (event->kind)
    {
    case TDM_EVENT_STEP:
      log->last_step = event->step.step;
      log->last_epoch = event->step.epoch_float;
      v = add_row (log, ROW_STEP, event->step.elapsed, event->step.step,
                   event->step.epoch_float, 4);
      v[0] = event->step.train_loss;
      v[1] = event->step.train_accuracy;
      v[2] = event->step.samples_per_second;
      v[3] = event->step.lr;
      break;

    case TDM_EVENT_EPOCH:
      v = add_row (log, ROW_EPOCH, event->epoch.elapsed, event->epoch.step,
                   event->epoch.epoch, 4);
      v[0] = event->epoch.train_loss;
      v[1] = event->epoch.train_accuracy;
      v[2] = event->epoch.test_loss;
      v[3] = event->epoch.test_accuracy;
      break;

    case TDM_EVENT_DEVICES:
      {
        int n = MIN (event->devices.replicas, log->replicas);

        v = add_row (log, ROW_DEVICES, event->devices.elapsed, event->devices.step,
                     log->last_epoch, DEV_N * log->replicas);
        for (int r = 0; r < log->replicas; r++)
          {
            double *d = v + DEV_N * r;

            if (r >= n)
              {
                for (int i = 0; i < DEV_N; i++)
                  d[i] = NAN;
                continue;
              }
            d[DEV_COMPUTE] = event->devices.device[r].compute_ms;
            d[DEV_COMM] = event->devices.device[r].comm_ms;
            d[DEV_WAIT] = event->devices.device[r].wait_ms;
            d[DEV_TANDEM] = known ((double) event->devices.device[r].tandem_bytes);
            d[DEV_USED] = known ((double) event->devices.device[r].used_bytes);
            d[DEV_TOTAL] = known ((double) event->devices.device[r].total_bytes);
            d[DEV_UTIL] = known (event->devices.device[r].utilization);
          }
      }
      break;

    case TDM_EVENT_FINISHED:
      v = add_row (log, ROW_FINISHED, event->finished.elapsed, event->finished.steps,
                   log->last_epoch, 2);
      v[0] = event->finished.test_loss;
      v[1] = event->finished.test_accuracy;
      break;

    case TDM_EVENT_STARTED:
    case TDM_EVENT_PAUSED:
    case TDM_EVENT_RESUMED:
    case TDM_EVENT_FAILED:
    default:
      break;
    }
}

void
tdm_metrics_log_add_telemetry (TdmMetricsLog *log,
                               double         elapsed,
                               int            replica,
                               double         used_bytes,
                               double         total_bytes,
                               double         utilization)
{
  double *v;

  g_return_if_fail (log != NULL);
  g_return_if_fail (replica >= 0 && replica < log->replicas);

  v = add_row (log, ROW_TELEMETRY, elapsed, log->last_step, log->last_epoch, 3);
  g_array_index (log->rows, Row, log->rows->len - 1).replica = replica;
  v[0] = used_bytes;
  v[1] = total_bytes;
  v[2] = utilization;
}

guint
tdm_metrics_log_get_n_rows (TdmMetricsLog *log)
{
  g_return_val_if_fail (log != NULL, 0);

  return log->rows->len;
}

void
tdm_metrics_log_foreach_step_time (TdmMetricsLog   *log,
                                   int              replica,
                                   TdmStepTimeFunc  func,
                                   gpointer         user_data)
{
  g_return_if_fail (log != NULL);
  g_return_if_fail (func != NULL);

  if (replica < 0 || replica >= log->replicas)
    return;

  for (guint i = 0; i < log->rows->len; i++)
    {
      const Row *row = &g_array_index (log->rows, Row, i);
      const double *d;

      if (row->kind != ROW_DEVICES)
        continue;
      d = &g_array_index (log->values, double, row->offset + DEV_N * replica);
      func (row->elapsed, d[DEV_COMPUTE], d[DEV_COMM], d[DEV_WAIT], user_data);
    }
}

static void
put_number (GString *csv,
            double   value)
{
  char buffer[G_ASCII_DTOSTR_BUF_SIZE];

  g_string_append_c (csv, ',');
  if (isfinite (value))
    g_string_append (csv, g_ascii_formatd (buffer, sizeof buffer, "%.9g", value));
}

static void
put_empty (GString *csv,
           guint    n)
{
  for (guint i = 0; i < n; i++)
    g_string_append_c (csv, ',');
}

/* RFC 4180, and a name with a space is quoted too, so no reader splits it. */
static void
put_field (GString    *csv,
           const char *text)
{
  if (strpbrk (text, " ,\"\r\n") == NULL)
    {
      g_string_append (csv, text);
      return;
    }

  g_string_append_c (csv, '"');
  for (const char *p = text; *p; p++)
    {
      if (*p == '"')
        g_string_append_c (csv, '"');
      g_string_append_c (csv, *p);
    }
  g_string_append_c (csv, '"');
}

/* One row per event; replica columns named as the legends name the replicas
 * ("cpu 1 compute_ms", quoted); `info` (nullable): the run's settings as `# key:
 * value` lines first (pandas: read_csv (path, comment='#')). */
static char *
tdm_metrics_log_to_csv (TdmMetricsLog       *log,
                        const TdmExportInfo *info)
{
  static const char *kinds[] = { "step", "epoch", "devices", "telemetry", "finished" };
  GString *csv;

  g_return_val_if_fail (log != NULL, NULL);

  csv = g_string_sized_new (1024 + 96 * log->rows->len);
  if (info != NULL)
    {
      g_autofree char *comment = tdm_export_info_to_comment (info);

      g_string_append (csv, comment);
    }
  g_string_append (csv, "time_s,event,step,epoch,train_loss,train_accuracy,"
                        "test_loss,test_accuracy,samples_per_s,learning_rate");
  for (int r = 0; r < log->replicas; r++)
    for (int i = 0; i < DEV_N; i++)
      {
        g_autofree char *name = g_strdup_printf ("%s %s", log->names[r], device_columns[i]);

        g_string_append_c (csv, ',');
        put_field (csv, name);
      }
  g_string_append_c (csv, '\n');

  for (guint i = 0; i < log->rows->len; i++)
    {
      const Row *row = &g_array_index (log->rows, Row, i);
      const double *v = &g_array_index (log->values, double, row->offset);
      char buffer[G_ASCII_DTOSTR_BUF_SIZE];

      g_string_append (csv, g_ascii_formatd (buffer, sizeof buffer, "%.6f", row->elapsed));
      g_string_append_printf (csv, ",%s,%" G_GINT64_FORMAT, kinds[row->kind], row->step);
      put_number (csv, row->epoch);

      switch ((RowKind) row->kind)
        {
        case ROW_STEP:
          put_number (csv, v[0]);
          put_number (csv, v[1]);
          put_empty (csv, 2);
          put_number (csv, v[2]);
          put_number (csv, v[3]);
          put_empty (csv, DEV_N * log->replicas);
          break;

        case ROW_EPOCH:
          for (int k = 0; k < 4; k++)
            put_number (csv, v[k]);
          put_empty (csv, 2 + DEV_N * log->replicas);
          break;

        case ROW_FINISHED:
          put_empty (csv, 2);
          put_number (csv, v[0]);
          put_number (csv, v[1]);
          put_empty (csv, 2 + DEV_N * log->replicas);
          break;

        case ROW_DEVICES:
          put_empty (csv, 6);
          for (int k = 0; k < DEV_N * log->replicas; k++)
            put_number (csv, v[k]);
          break;

        case ROW_TELEMETRY:
          put_empty (csv, 6);
          for (int r = 0; r < log->replicas; r++)
            {
              if (r != row->replica)
                {
                  put_empty (csv, DEV_N);
                  continue;
                }
              put_empty (csv, DEV_USED);
              put_number (csv, v[0]);
              put_number (csv, v[1]);
              put_number (csv, v[2]);
            }
          break;

        default:
          g_assert_not_reached ();
        }
      g_string_append_c (csv, '\n');
    }

  return g_string_free (csv, FALSE);
}

gboolean
tdm_metrics_log_write_csv (TdmMetricsLog        *log,
                           const char           *path,
                           const TdmExportInfo  *info,
                           GError              **error)
{
  g_autofree char *csv = NULL;

  g_return_val_if_fail (log != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  csv = tdm_metrics_log_to_csv (log, info);

  return g_file_set_contents (path, csv, -1, error);
}
