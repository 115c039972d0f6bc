/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run.h: one training run on a worker thread, reported on the main loop.
 *
 * A TdmRun owns a TdmTrainer and the GThread that calls tdm_trainer_run(). The
 * engine's events are copied on that thread and delivered as the "event" signal on
 * the main context the run was started from; "done" follows once the thread has
 * ended and been joined. Dropping the last reference while the thread still runs
 * stops it and lets it wind down by itself: nothing on the main loop waits for it.
 * It is not a widget and draws nothing.
 */

#pragma once

#include <gio/gio.h>

#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-events.h"
#include "tdm-experiment.h"
#include "tdm-history.h"

G_BEGIN_DECLS

#define TDM_TYPE_RUN (tdm_run_get_type ())

G_DECLARE_FINAL_TYPE (TdmRun, tdm_run, TDM, RUN, GObject)

TdmRun   *tdm_run_new        (const TdmConfig  *config);
gboolean  tdm_run_start      (TdmRun           *self,
                              GError          **error);
void      tdm_run_stop       (TdmRun           *self);
void      tdm_run_set_paused (TdmRun           *self,
                              gboolean          paused);
gboolean  tdm_run_get_paused (TdmRun           *self);
gboolean  tdm_run_is_stopping (TdmRun          *self);

/* Before start. Keeps the run in the history: the recorder (taken) is fed every
 * event on the worker thread, so a stopped run or a busy main loop loses nothing,
 * and step summaries come every TDM_HISTORY_SUMMARY_STEPS steps instead of by the
 * clock, so two runs of one configuration overlay point for point. */
void      tdm_run_set_recorder (TdmRun         *self,
                                TdmRunRecorder *recorder);
/* The recorded run's id, or NULL; and once done, why the history could not be
 * written (NULL when it could). */
const char   *tdm_run_get_record_id    (TdmRun *self);
const GError *tdm_run_get_record_error (TdmRun *self);

/* Before start. Also writes the run's scalars as TensorBoard event files, in a folder
 * of `root` named `name` (NULL: the date and time it starts). Made when the run
 * starts, the file is fed every event on the worker thread, as the recorder is, and
 * closed when the thread ends. A file that cannot be made does not keep the run from
 * starting: then, after start, the folder is NULL and the error says why; once
 * done, the error says why the file could not be written in full (NULL when it was). */
void      tdm_run_set_tensorboard (TdmRun     *self,
                                   const char *root,
                                   const char *name);
const char   *tdm_run_get_tensorboard_folder (TdmRun *self);
const GError *tdm_run_get_tensorboard_error  (TdmRun *self);

/* Before start: go on from a checkpoint of an earlier run of the same configuration
 * (tdm_trainer_set_resume_path: its parameters, optimizer state, epoch and step). */
void      tdm_run_set_resume_path (TdmRun       *self,
                                   const char   *path);

/* Before start: keep a copy of the main replica's parameters when the run ends, for
 * an experiment's reducer ("compare with one device"). */
void      tdm_run_set_keep_parameters (TdmRun   *self,
                                       gboolean  keep);
/* Before start: the run is `training` of an experiment: the trainer takes its options
 * (tdm_experiment_training_apply, over the recorder's summaries), and the experiment's
 * stop of it stops the run as tdm_run_stop() does. */
void      tdm_run_set_training        (TdmRun                      *self,
                                       const TdmExperimentTraining *training);
/* Before start: `observer` is handed every event first, on the worker thread as the
 * trainer sends it (an experiment's meter times them there); `user_data` is kept
 * until the thread has ended, then given to `destroy` (may be NULL). */
void      tdm_run_set_observer        (TdmRun         *self,
                                       TdmEventSink    observer,
                                       gpointer        user_data,
                                       GDestroyNotify  destroy);
/* Once done: the kept parameters (NULL when not kept or never built). */
const float *tdm_run_get_parameters   (TdmRun   *self,
                                       size_t   *count);
/* The dataset the run trains on, once its thread has opened it (NULL before, and
 * when it could not be opened); read-only, valid while the run is. For thumbnails. */
const TdmDatasetPair *tdm_run_get_dataset (TdmRun *self);

/* At most this many steps a second (0: as fast as it goes), before or during the run. */
void      tdm_run_set_pace   (TdmRun           *self,
                              double            steps_per_second);
/* One step at a time: pauses a running run, and lets a paused one take one step. */
void      tdm_run_single_step (TdmRun          *self);

/* Where the window's runs save their checkpoint, so the last run can classify:
 * g_get_user_data_dir()/tandem/last-run.safetensors. */
char     *tdm_run_last_network_path (void);

/* Worker threads started and not yet joined, in this process: for tests. */
guint     tdm_run_get_n_threads (void);

G_END_DECLS
