/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-history.h — every run kept on disk, for overlays, comparisons and exports.
 *
 * A history is a folder (by default g_get_user_data_dir()/tandem/runs) holding one
 * JSON-lines file per run, <id>.jsonl: a settings line (configuration, name, date),
 * then per-step metrics, per-device figures, epoch results and the end, one line per
 * event, each written whole and flushed as it happens. A run cut short by a crash
 * keeps everything before it; a truncated last line is ignored when the file is read.
 * Renames are appended lines (the last name wins). Headless: the window and
 * tandem-train --record both use it. Not a chart: series are plain arrays.
 *
 * A record is of one of two kinds, named in its settings line ("kind"; files written
 * before there were two have none and are training runs): a training run, as above,
 * or an experiment (tdm-experiment.h: a scaling sweep, a comparison), whose settings
 * line adds the experiment's own (its kind, steps; a sweep's mode and device counts)
 * and whose other lines are what it reduced as it went (a sweep's points, one per
 * device count), the trainings it kept as runs of their own (by id), then its
 * outcome and result. Sweeps written before there were experiments (kind "scaling")
 * read as experiments of kind scaling.
 */
#pragma once

#include <gio/gio.h>
#include "tdm-config.h"
#include "tdm-events.h"
#include "tdm-experiment.h"
#include "tdm-scaling.h"

G_BEGIN_DECLS

/* The step grid recorded runs summarize on (TdmTrainerOptions.summary_steps): the same
 * for the window and tandem-train --record, so their runs overlay too. */
#define TDM_HISTORY_SUMMARY_STEPS 10

typedef struct {
  long step;
  double epoch;                 /* epochs done, as a real number */
  double train_loss, train_accuracy;
  double samples_per_second;
  double elapsed;
  double lr;                    /* the learning rate then (NaN in older files) */
} TdmHistoryPoint;

typedef struct {
  long step;
  int device;                   /* replica index */
  double compute_ms, comm_ms, wait_ms;
  gint64 tandem_bytes;
} TdmHistoryDevicePoint;

/* One sampled step of one device: milliseconds in each phase (TdmPhase), the bytes
 * its collectives moved out and in (TdmDevicePhases; 0 in older files), and the
 * communication hidden under backward (its overlap: tdm_overlap_percent() of the
 * communication phases' ms and hidden_ms). */
typedef struct {
  long step;
  int device;
  float ms[TDM_PHASE_COUNT];
  guint64 bytes_sent, bytes_received;
  float hidden_ms;              /* communication under backward (TdmDevicePhases; 0 in
                                 * older files) */
} TdmHistoryPhases;

typedef enum {
  TDM_RUN_TRAINING,             /* metrics by step, device figures, results */
  TDM_RUN_EXPERIMENT,           /* several trainings: what they reduced to */
} TdmRunKind;

/* "training", "experiment": the names the files use. */
const char *tdm_run_kind_name (TdmRunKind kind);

/* What an experiment adds to its record. Its configuration is the record's, the one
 * it started from (a sweep's: every device it went up to, the network, dataset,
 * strategy and batch). */
typedef struct {
  TdmExperimentKind kind;
  long steps;                   /* steps of each training (a sweep's timed steps at
                                 * each device count) */
  TdmScalingMode mode;          /* a sweep's */
  int count;                    /* a sweep's device counts planned: 1 … count */
  GArray *points;               /* TdmScalingPoint: a sweep's, as measured (empty
                                 * otherwise) */
  GPtrArray *runs;              /* char *: the ids of the trainings kept as runs of
                                 * their own, in the order they ran */
  char *result;                 /* in words, once it completed ("2 points measured");
                                 * NULL before */
  /* The learning-rate finder's: its range, its curve, the rate it suggested (NaN:
   * none, or not finished) and whether its loss diverged. */
  TdmLrFindOptions lr_options;
  GArray *lr_points;            /* TdmLrFindPoint */
  double lr_suggestion;
  gboolean lr_diverged;
} TdmRunExperiment;

typedef struct {
  char *id;                     /* the file's stem: unique, sortable by date */
  TdmRunKind kind;
  char *name;                   /* shown in lists; the id unless renamed */
  gint64 created;               /* Unix seconds */
  TdmConfig *config;
  /* What the run computed in, as its start reported it (auto resolved); the config's
   * where the file has no start or predates auto. */
  TdmPrecision precision_used;
  int replicas;
  GArray *points;               /* TdmHistoryPoint, by step */
  GArray *device_points;        /* TdmHistoryDevicePoint */
  GArray *phases;               /* TdmHistoryPhases, of the sampled steps */
  GArray *epochs;               /* TdmEpochEvent */
  TdmRunExperiment experiment; /* kind TDM_RUN_EXPERIMENT (its arrays empty for training) */
  gboolean finished;            /* the run ended (stopped or not) */
  gboolean failed;
  TdmFinishedEvent final;       /* valid when finished; an experiment has `stopped`
                                 * only (cancelled before its last training) */
  char *error;                  /* the failure's message, when failed */
} TdmRunRecord;

void tdm_run_record_free (TdmRunRecord *record);
/* Whether the record is a scaling sweep's (an experiment of kind scaling). */
gboolean tdm_run_record_is_sweep (const TdmRunRecord *record);
/* The run's settings as tdm_config_describe() names them, the precision as the run
 * computed in it ("fp32 (auto)": tdm_precision_describe_used()). Free with g_strfreev. */
char **tdm_run_record_describe (const TdmRunRecord *record);
/* Samples per second over the run's summaries, each weighted by the steps it covers
 * (0 when there are none). */
double tdm_run_record_samples_per_second (const TdmRunRecord *record);
/* Compute, communication and wait milliseconds per step of `device` (−1: the mean
 * over the devices), from the DEVICES figures: each event weighs the steps since the
 * event before it, and events that timed no step (all zeros on every device: one
 * right after an epoch's evaluation, say) are left out, as the scaling meter leaves
 * them out. Returns the steps covered; `ms` is NaN when none. */
long tdm_run_record_device_means (const TdmRunRecord *record, int device, double ms[3]);
/* Milliseconds per step in each phase, the mean over the sampled steps (but the first,
 * which warms caches up, where there are others) of `device`, or of every device for
 * −1. Returns how many samples went in; `ms` is all zeros when none. */
int tdm_run_record_phase_means (const TdmRunRecord *record, int device,
                                double ms[TDM_PHASE_COUNT]);
/* Bytes `device`'s collectives moved out and in per step, from its last sampled step
 * (every step moves the same). FALSE when the run has no sampled step of it. */
gboolean tdm_run_record_bytes_per_step (const TdmRunRecord *record, int device,
                                        guint64 *sent, guint64 *received);
/* Whether two runs trained the same network on the same data (spec or built-in name,
 * dataset, image size and colour), so a sample costs the same in both and their
 * speeds may be compared; batch, devices and strategy may differ. */
gboolean tdm_run_record_same_work (const TdmRunRecord *a, const TdmRunRecord *b);
/* The share of a sampled step's communication that ran hidden under backward
 * (tdm_overlap_percent() of its reduce, all-reduce and broadcast ms and hidden_ms). */
double tdm_history_phases_overlap (const TdmHistoryPhases *phases);
/* The last training loss recorded, NaN when none. */
double tdm_run_record_final_train_loss (const TdmRunRecord *record);

typedef struct _TdmHistory TdmHistory;

/* `folder` NULL: the user's data folder. The folder is made when first written. */
TdmHistory *tdm_history_new (const char *folder);
void tdm_history_free (TdmHistory *history);
const char *tdm_history_get_folder (TdmHistory *history);
/* FALSE with an error when the history's folder is something else than a folder (a
 * file given as --history): listing it would say "no runs". A folder not made yet is
 * fine: it holds no runs. */
gboolean tdm_history_check_folder (TdmHistory *history, GError **error);

/* Every readable run, oldest first. A file that cannot be read is left out and its
 * message (naming the file) added to `problems` when given (a GPtrArray of strings). */
GPtrArray *tdm_history_list (TdmHistory *history, GPtrArray *problems);
/* The same, ending early with what it has once `cancellable` is cancelled (a listing
 * superseded by a newer one, with hundreds of runs to read). */
GPtrArray *tdm_history_list_cancellable (TdmHistory *history, GPtrArray *problems,
                                         GCancellable *cancellable);
TdmRunRecord *tdm_history_load (TdmHistory *history, const char *id, GError **error);
/* The configuration of the run file at path (its settings line, read alone: a run file
 * of any size costs one line). TRUE with *config NULL when the file's first line is no
 * run's settings (another kind of file); FALSE with an error when it cannot be read or
 * its settings are wrong. */
gboolean tdm_history_file_settings (const char *path, TdmConfig **config, GError **error);

/* The longest line a run file may hold; its own are a few KB at most. */
#define TDM_HISTORY_MAX_LINE (1 << 20)
gboolean tdm_history_rename (TdmHistory *history, const char *id, const char *name,
                             GError **error);
gboolean tdm_history_delete (TdmHistory *history, const char *id, GError **error);
/* The run's trained network, kept beside its record (tdm-history-weights.c): where
 * its checkpoint goes and resumes from, whether or not it exists (yet, or still);
 * NULL for an id that is not one. Deleting the run deletes it too. */
char *tdm_history_weights_path (TdmHistory *history, const char *id);
/* The newest run's kept weights, or NULL when no run has any. */
char *tdm_history_newest_weights (TdmHistory *history);
/* Bytes the runs' kept weights take together. */
guint64 tdm_history_weights_bytes (TdmHistory *history);
/* Removes kept weights, the oldest run's first, until those left take at most `limit`
 * bytes; the run `keep` (the one just finished; NULL: the newest run) keeps its own
 * whatever its size. Returns how many were removed, −1 with the error. */
int tdm_history_limit_weights (TdmHistory *history, guint64 limit, const char *keep,
                               GError **error);
/* As CSV at `path` (written atomically), after `# key: value` lines of its name, date
 * and settings: a training run's every figure, or a sweep's points (devices, batch,
 * samples/s, speed-up, efficiency, compute / communication / wait ms per step, the most
 * memory each device held). A training run is one table whose rows have a kind: step
 * (the summaries: loss, accuracy, learning rate, samples/s, time), epoch (train,
 * validation and test loss and accuracy), device (each device's compute,
 * communication and wait ms per step and memory), phases (each device's sampled step:
 * ms in each phase, communication hidden under backward, overlap %, bytes sent and
 * received) and end; a column a kind has not is empty. Column names carry their
 * units (_s, _ms, _bytes, _percent; accuracy is a fraction, loss the mean
 * cross-entropy), which a `# units:` line also spells out. */
gboolean tdm_history_export_csv (TdmHistory *history, const char *id, const char *path,
                                 GError **error);
/* A scaling sweep's points as a CSV table, header line first, appended to `text`:
 * devices, batch, steps, samples/s, speed-up, efficiency, compute / communication /
 * wait ms per step (%.9g in C notation, empty where not finite), the slowest and
 * fastest run's samples/s and speed-up, the runs timed, the BLAS threads of each CPU
 * worker (0 for GPUs), then memory_bytes_1 …
 * for the most devices of any point (empty where a point had fewer). The one writer
 * of scaling CSV: tdm_history_export_csv() (tandem-train --export-run, the History
 * page) and the Scaling page's export both call it. */
void tdm_scaling_points_to_csv (GString *text, const TdmScalingPoint *points,
                                guint n_points);

/* Writing a run as it happens. */
typedef struct _TdmRunRecorder TdmRunRecorder;

/* Creates the run's file with its settings line; `name` NULL: named by its date. */
TdmRunRecorder *tdm_run_recorder_new (TdmHistory *history, const TdmConfig *config,
                                      const char *name, GError **error);
const char *tdm_run_recorder_get_id (TdmRunRecorder *recorder);
/* A long run's file stays bounded: past `budget` bytes it is rewritten with the
 * sampled steps older than the last `recent` seconds (of the run's own clock, the
 * steps' elapsed time) thinned to an even grid that fits half the budget; epochs,
 * the end and every other line stay. Defaults: TDM_HISTORY_BUDGET, _RECENT; a budget
 * of 0 keeps everything. */
#define TDM_HISTORY_BUDGET ((gint64)4 << 20)
#define TDM_HISTORY_RECENT 300.0
void tdm_run_recorder_set_limits (TdmRunRecorder *recorder, gint64 budget, double recent);
/* Appends what the event says that a history keeps (a TdmEventSink, to chain from
 * another sink on the trainer's thread). Write errors are kept, not raised: see
 * tdm_run_recorder_finish. */
void tdm_run_recorder_add (const TdmEvent *event, gpointer recorder);
/* Closes the file; FALSE with the first write error, if any happened. */
gboolean tdm_run_recorder_finish (TdmRunRecorder *recorder, GError **error);
void tdm_run_recorder_free (TdmRunRecorder *recorder);

/* Writing an experiment as it happens (tdm-experiment-record.c), by whoever drives it
 * (the window's experiment runner, tandem-train): its settings line now; as each
 * training is reduced, what it gave (a sweep's point) and, when it was kept as a run
 * of its own, that run's id; its outcome and result at the end. */
TdmRunRecorder *tdm_run_recorder_new_experiment (TdmHistory          *history,
                                                 const TdmExperiment *experiment,
                                                 const char          *name,
                                                 GError             **error);
/* A TdmScalingSink: appends a sweep's point. */
void tdm_run_recorder_add_point (const TdmScalingPoint *point, gpointer recorder);
/* Appends the id of a training kept in the history as a run of its own. */
void tdm_run_recorder_add_run (TdmRunRecorder *recorder, const char *run_id);
/* The experiment's end: completed (`outcome` NULL: its result is written),
 * cancelled (TDM_ENGINE_ERROR_CANCELLED) or failed. An experiment cancelled before it
 * kept anything is not worth keeping: its file goes (tdm_run_recorder_get_kept then
 * says FALSE). Call tdm_run_recorder_finish after it. */
void tdm_run_recorder_end_experiment (TdmRunRecorder      *recorder,
                                      const TdmExperiment *experiment,
                                      const GError        *outcome);
/* FALSE once the file was removed (see tdm_run_recorder_end_experiment). */
gboolean tdm_run_recorder_get_kept (TdmRunRecorder *recorder);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmRunRecord, tdm_run_record_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmHistory, tdm_history_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmRunRecorder, tdm_run_recorder_free)

G_END_DECLS
