/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-metrics-log.h: every figure of one run, kept in full for the CSV export.
 *
 * The charts keep bounded, decimated history; this log keeps each engine event's
 * numbers (and each telemetry sample) as they came, so the exported CSV holds the
 * whole run, training and system metrics on one time axis. It is a plain struct for
 * the main thread, not a GObject, and draws nothing.
 */

#pragma once

#include <gio/gio.h>

#include "tdm-events.h"
#include "tdm-export-info.h"

G_BEGIN_DECLS

typedef struct _TdmMetricsLog TdmMetricsLog;

typedef void (*TdmStepTimeFunc) (double   elapsed,
                                 double   compute_ms,
                                 double   comm_ms,
                                 double   wait_ms,
                                 gpointer user_data);

TdmMetricsLog *tdm_metrics_log_new               (void);
void           tdm_metrics_log_free              (TdmMetricsLog          *log);

/* Starts over for the run a STARTED event describes. */
void           tdm_metrics_log_begin             (TdmMetricsLog          *log,
                                                  const TdmStartedEvent  *started);
void           tdm_metrics_log_add               (TdmMetricsLog          *log,
                                                  const TdmEvent         *event);
/* A GPU sample for one replica; NaN for what is not known. */
void           tdm_metrics_log_add_telemetry     (TdmMetricsLog          *log,
                                                  double                  elapsed,
                                                  int                     replica,
                                                  double                  used_bytes,
                                                  double                  total_bytes,
                                                  double                  utilization);
guint          tdm_metrics_log_get_n_rows        (TdmMetricsLog          *log);

void           tdm_metrics_log_foreach_step_time (TdmMetricsLog          *log,
                                                  int                     replica,
                                                  TdmStepTimeFunc         func,
                                                  gpointer                user_data);

gboolean       tdm_metrics_log_write_csv         (TdmMetricsLog          *log,
                                                  const char             *path,
                                                  const TdmExportInfo    *info,
                                                  GError                **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmMetricsLog, tdm_metrics_log_free)

G_END_DECLS
