/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-session.h: the live run's model, no widget.
 *
 * A TdmSession is fed the engine's events on the main thread and turns them into
 * what the pages show: points of named series (loss, accuracy, throughput, memory,
 * load and step time per device), per-device state (which replica draws a GPU's
 * line, which one its capacity), the status line's text and the progress, the
 * earlier runs overlaid, the metrics log and the settings the exports carry. It
 * samples GPU telemetry while a run uses GPUs. It knows no GTK and draws nothing:
 * TdmDashboard and the other pages are views of it, and tests drive it without a
 * display.
 */

#pragma once

#include <glib-object.h>

#include "tdm-dataset.h"
#include "tdm-events.h"
#include "tdm-export-info.h"
#include "tdm-history.h"
#include "tdm-metrics-log.h"
#include "tdm-phase-stats.h"

G_BEGIN_DECLS

#define TDM_TYPE_SESSION (tdm_session_get_type ())

G_DECLARE_FINAL_TYPE (TdmSession, tdm_session, TDM, SESSION, GObject)

/* What the loss and accuracy series are drawn against: never the clock, so that two
 * runs of one configuration overlay point for point. */
typedef enum
{
  TDM_SESSION_X_EPOCH,
  TDM_SESSION_X_STEP,
} TdmSessionXAxis;

/* The series a run's events feed. Memory, capacity and load are per replica (only
 * where tdm_session_replica_has_line() / _has_capacity() say so); the step-time
 * series are the step replica's; the others are the run's. Loss and accuracy points
 * have x on the session's x axis, the others training time in seconds. */
typedef enum
{
  TDM_SESSION_LOSS_TRAIN,
  TDM_SESSION_LOSS_TEST,
  TDM_SESSION_ACCURACY_TRAIN,   /* in % */
  TDM_SESSION_ACCURACY_TEST,    /* in % */
  TDM_SESSION_THROUGHPUT,       /* samples/s */
  TDM_SESSION_MEMORY,           /* bytes */
  TDM_SESSION_CAPACITY,         /* bytes */
  TDM_SESSION_LOAD,             /* in % */
  TDM_SESSION_STEP_COMPUTE,     /* ms */
  TDM_SESSION_STEP_COMM,        /* ms */
  TDM_SESSION_STEP_WAIT,        /* ms */
  TDM_SESSION_N_SERIES
} TdmSessionSeries;

typedef struct
{
  TdmSessionSeries series;
  int              replica;     /* −1 for the run's own series */
  double           x, y;
} TdmSessionPoint;

typedef void (*TdmSessionSeriesFunc) (const TdmSessionPoint *point,
                                      gpointer               user_data);

/* One point of a live or overlaid run's loss and accuracy, x on the session's axis;
 * accuracy in %. */
typedef void (*TdmSessionPointFunc) (double   x,
                                     double   loss,
                                     double   accuracy,
                                     gboolean test,
                                     gpointer user_data);

TdmSession          *tdm_session_new                  (void);

/* Signals: "started" (a STARTED event: views rebuild their series), "point" (const
 * TdmSessionPoint *), "status-changed" (gboolean at_once: TRUE for news a view shows
 * now, FALSE for a step's, which it may pace), "event" (const TdmEvent *, after the
 * session has taken it in: for pages that show what the session does not model,
 * such as each sampled step on the timeline, batches and predictions). */
void                 tdm_session_handle_event         (TdmSession      *self,
                                                       const TdmEvent  *event);
/* The run's thread has ended: telemetry sampling stops. */
void                 tdm_session_end                  (TdmSession      *self);

/* What the run's sampled steps say of its phases, per device (reset when a run
 * starts): the Devices page's table. */
const TdmPhaseStats *tdm_session_get_phase_stats      (TdmSession      *self);
/* The dataset the run's events index (batches, predictions), for the pages; not
 * owned: the run keeps it while its events come. */
void                 tdm_session_set_dataset          (TdmSession      *self,
                                                       const TdmDatasetPair *dataset);
const TdmDatasetPair *tdm_session_get_dataset          (TdmSession      *self);

/* NULL before the first STARTED event. */
const TdmStartedEvent *tdm_session_get_started        (TdmSession      *self);
int                  tdm_session_get_n_replicas       (TdmSession      *self);
/* CUDA ordinal of a replica, or −1 for a CPU worker. */
int                  tdm_session_get_gpu              (TdmSession      *self,
                                                       int              replica);
/* A GPU that several replicas share has one memory and one load line, the first
 * replica's: the driver's figures are the whole GPU's. */
gboolean             tdm_session_replica_has_line     (TdmSession      *self,
                                                       int              replica);
/* One capacity line per GPU, the first replica's; CPU workers have none. */
gboolean             tdm_session_replica_has_capacity (TdmSession      *self,
                                                       int              replica);
/* "cpu 1", "cuda:0", or "cuda:0 · 3 replicas" for a shared GPU's line. */
char                *tdm_session_dup_line_label       (TdmSession      *self,
                                                       int              replica);
char                *tdm_session_dup_capacity_label   (TdmSession      *self,
                                                       int              replica);

/* The replica whose step time the STEP_* series carry (the main one at start). */
int                  tdm_session_get_step_replica     (TdmSession      *self);
gboolean             tdm_session_set_step_replica     (TdmSession      *self,
                                                       int              replica);
/* Replays the step replica's step times from the log, as STEP_* points. */
void                 tdm_session_replay_step_time     (TdmSession      *self,
                                                       TdmSessionSeriesFunc func,
                                                       gpointer         user_data);

void                 tdm_session_set_x_axis           (TdmSession      *self,
                                                       TdmSessionXAxis  axis);
TdmSessionXAxis      tdm_session_get_x_axis           (TdmSession      *self);
void                 tdm_session_foreach_live_point   (TdmSession      *self,
                                                       TdmSessionPointFunc func,
                                                       gpointer         user_data);

/* Earlier runs drawn under the live one: `records` holds TdmRunRecord pointers,
 * copied here (NULL or empty: none). */
void                 tdm_session_set_overlays         (TdmSession      *self,
                                                       GPtrArray       *records);
guint                tdm_session_get_n_overlays       (TdmSession      *self);
const char          *tdm_session_get_overlay_name     (TdmSession      *self,
                                                       guint            index);
/* Training loss and accuracy of an overlay (accuracy in %), never `test`. */
void                 tdm_session_foreach_overlay_point (TdmSession     *self,
                                                        guint           index,
                                                        TdmSessionPointFunc func,
                                                        gpointer        user_data);

/* The status line now (free with g_free()) and the run's progress, 0..1; NULL when
 * there is nothing to say yet. */
char                *tdm_session_dup_status           (TdmSession      *self,
                                                       double          *fraction);
/* Says `text` until the next event that has news of its own. */
void                 tdm_session_set_status           (TdmSession      *self,
                                                       const char      *text);

TdmMetricsLog       *tdm_session_get_log              (TdmSession      *self);
/* The settings of the run about to start (transfer full): exports carry them once
 * its STARTED event arrives, and until the next run's does. */
void                 tdm_session_set_export_info      (TdmSession      *self,
                                                       TdmExportInfo   *info);
const TdmExportInfo *tdm_session_get_export_info      (TdmSession      *self);
gboolean             tdm_session_export_metrics       (TdmSession      *self,
                                                       const char      *path,
                                                       GError         **error);

G_END_DECLS
