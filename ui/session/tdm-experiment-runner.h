/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-experiment-runner.h: an experiment (tdm-experiment.h) driven for the window.
 *
 * The one runner of every kind of multi-run work in the window: the scaling sweep,
 * "compare with one device", "compare strategies", the learning-rate finder. Each training the experiment asks
 * for is a TdmRun of its own (its own thread, its events on the main loop), made by the
 * launch function the owner gives (the window's run path: its history record, its
 * session, its Stop button) or, without one, a bare run that nobody draws. The
 * experiment observes every event on the training's thread and reduces each outcome
 * here, on the main loop; then the next training starts, until the experiment is
 * over. Given a history, the experiment is kept there as it goes (its record: a
 * sweep's points, the trainings kept as runs of their own, its result).
 * The runner is not a widget and draws nothing: views connect to its signals.
 */

#pragma once

#include <gio/gio.h>

#include "tdm-experiment.h"
#include "tdm-history.h"
#include "tdm-run.h"

G_BEGIN_DECLS

#define TDM_TYPE_EXPERIMENT_RUNNER (tdm_experiment_runner_get_type ())

G_DECLARE_FINAL_TYPE (TdmExperimentRunner, tdm_experiment_runner, TDM, EXPERIMENT_RUNNER,
                      GObject)

/* Makes the TdmRun of `training` and starts it, having first called
 * tdm_experiment_runner_prepare_run() on it; a new reference, or NULL once it has said
 * why it could not start. */
typedef TdmRun *(*TdmExperimentLaunch) (const TdmExperimentTraining *training,
                                        TdmExperimentRunner         *runner,
                                        gpointer                     user_data);

/* For a launch function, before it starts `run`: the run keeps what the experiment
 * reduces and hands the experiment its events. */
void                 tdm_experiment_runner_prepare_run    (TdmExperimentRunner  *self,
                                                           TdmRun               *run);
/* Takes `experiment`. */
TdmExperimentRunner *tdm_experiment_runner_new            (TdmExperiment        *experiment);
void                 tdm_experiment_runner_set_launch     (TdmExperimentRunner  *self,
                                                           TdmExperimentLaunch   launch,
                                                           gpointer              user_data);
/* Before start: the history the experiment's record goes to (named by its date), or
 * NULL for none. */
void                 tdm_experiment_runner_set_history    (TdmExperimentRunner  *self,
                                                           TdmHistory           *history);

/* Starts the first training; FALSE with the error when it could not start. "finished"
 * follows, once, with the error (NULL when the experiment completed;
 * TDM_ENGINE_ERROR_CANCELLED when stopped). */
gboolean             tdm_experiment_runner_start          (TdmExperimentRunner  *self,
                                                           GError              **error);
/* Stops the training under way; the experiment ends there. */
void                 tdm_experiment_runner_stop           (TdmExperimentRunner  *self);
gboolean             tdm_experiment_runner_get_running    (TdmExperimentRunner  *self);

TdmExperiment       *tdm_experiment_runner_get_experiment (TdmExperimentRunner  *self);
/* Trainings done so far. */
int                  tdm_experiment_runner_get_n_done     (TdmExperimentRunner  *self);
/* The history id of training `index` once it is done, when its run was recorded; else
 * NULL. */
const char          *tdm_experiment_runner_get_record_id  (TdmExperimentRunner  *self,
                                                           int                   index);
/* Once finished: the experiment's record id when it was kept (one stopped before it
 * kept anything is not), and why it could not be made or written in full (NULL when
 * it could). */
const char          *tdm_experiment_runner_get_history_id (TdmExperimentRunner  *self);
const GError        *tdm_experiment_runner_get_history_error (TdmExperimentRunner *self);

G_END_DECLS
