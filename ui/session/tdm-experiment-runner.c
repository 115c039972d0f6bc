/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-experiment-runner.c: an experiment driven for the window (tdm-experiment-runner.h).
 *
 * The experiment is shared with the training threads through a reference-counted box:
 * a run dropped while its thread winds down still observes into it, so the box lives
 * until the last thread has let go of it, whatever becomes of the runner. Between
 * next and reduce only the training's thread touches the experiment; reduce runs here
 * once the run is done and its thread joined.
 *
 * Signals: "training-started" (TdmRun *) after each training starts; "training-done"
 * (TdmRun *) after its outcome was reduced, before the next starts; "point" (a
 * TdmScalingPoint *) for each point of a sweep; "lr-point" (a TdmLrFindPoint *) for
 * each point of the learning-rate finder, measured on the training's thread and
 * handed to the main loop, as long as the experiment runs; "finished" (a GError *,
 * NULL on success).
 */

#include "tdm-experiment-runner.h"

#include <glib/gi18n.h>

#include "tdm-error.h"

typedef struct
{
  TdmExperiment *experiment;
  GWeakRef       runner;         /* for the finder's points, on the main loop */
  GMainContext  *context;
} ExperimentBox;

/* A finder's point on its way to the main loop. */
typedef struct
{
  ExperimentBox  *box;
  TdmLrFindPoint  point;
} LrPointMessage;

struct _TdmExperimentRunner
{
  GObject              parent_instance;

  ExperimentBox       *box;
  TdmExperimentLaunch  launch;
  gpointer             launch_data;
  TdmRun              *run;            /* the training under way */
  GPtrArray           *record_ids;     /* char *, one a training done (NULL: not kept) */
  TdmHistory          *history;        /* where the record goes, or NULL */
  TdmRunRecorder      *record;         /* the experiment's, while it runs */
  char                *history_id;
  GError              *history_error;
  gboolean             running;
  gboolean             stopped;
};

enum {
  TRAINING_STARTED,
  TRAINING_DONE,
  POINT,
  LR_POINT,
  FINISHED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (TdmExperimentRunner, tdm_experiment_runner, G_TYPE_OBJECT)

static void
experiment_box_clear (gpointer data)
{
  ExperimentBox *box = data;

  tdm_experiment_free (box->experiment);
  g_weak_ref_clear (&box->runner);
  g_main_context_unref (box->context);
}

static void
experiment_box_release (gpointer data)
{
  g_atomic_rc_box_release_full (data, experiment_box_clear);
}

/* Worker thread. */
static void
experiment_box_observe (const TdmEvent *event,
                        gpointer        data)
{
  ExperimentBox *box = data;

  tdm_experiment_observe (event, box->experiment);
}

static void
lr_point_message_free (gpointer data)
{
  LrPointMessage *message = data;

  experiment_box_release (message->box);
  g_free (message);
}

static gboolean
lr_point_deliver (gpointer data)
{
  LrPointMessage *message = data;
  g_autoptr(TdmExperimentRunner) self = g_weak_ref_get (&message->box->runner);

  if (self != NULL && self->running)
    g_signal_emit (self, signals[LR_POINT], 0, &message->point);
  return G_SOURCE_REMOVE;
}

/* Worker thread: the finder's point, to the main loop. */
static void
experiment_box_lr_point (const TdmLrFindPoint *point,
                         gpointer              data)
{
  ExperimentBox *box = data;
  LrPointMessage *message = g_new0 (LrPointMessage, 1);
  g_autoptr(GSource) source = g_idle_source_new ();

  message->box = g_atomic_rc_box_acquire (box);
  message->point = *point;
  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, lr_point_deliver, message, lr_point_message_free);
  g_source_attach (source, box->context);
}

static void tdm_experiment_runner_next (TdmExperimentRunner *self);

/* The record ends with `outcome`; its id is kept when the record was. */
static void
tdm_experiment_runner_end_record (TdmExperimentRunner *self,
                                  const GError        *outcome)
{
  if (self->record == NULL)
    return;
  tdm_run_recorder_end_experiment (self->record, self->box->experiment, outcome);
  tdm_run_recorder_finish (self->record, self->history_error == NULL ? &self->history_error
                                                                     : NULL);
  if (tdm_run_recorder_get_kept (self->record))
    self->history_id = g_strdup (tdm_run_recorder_get_id (self->record));
  g_clear_pointer (&self->record, tdm_run_recorder_free);
}

/* The experiment is over: its record closed, "finished" said. */
static void
tdm_experiment_runner_finish (TdmExperimentRunner *self,
                              GError              *error)
{
  g_autoptr(GError) owned = error;

  self->running = FALSE;
  tdm_experiment_runner_end_record (self, error);
  g_signal_emit (self, signals[FINISHED], 0, error);
}

static void
tdm_experiment_runner_run_done (TdmExperimentRunner *self,
                                const GError        *error,
                                TdmRun              *run)
{
  g_autoptr(TdmRun) done = NULL;
  g_autoptr(GError) reduce_error = NULL;
  const float *parameters;
  size_t count = 0;

  if (run != self->run)
    return;
  done = g_steal_pointer (&self->run);
  g_signal_handlers_disconnect_by_data (done, self);

  parameters = tdm_run_get_parameters (done, &count);
  g_ptr_array_add (self->record_ids, g_strdup (tdm_run_get_record_id (done)));
  if (self->record != NULL && tdm_run_get_record_id (done) != NULL)
    tdm_run_recorder_add_run (self->record, tdm_run_get_record_id (done));
  if (!tdm_experiment_reduce (self->box->experiment, parameters, count, &reduce_error))
    {
      /* A run that failed before training says why in its own error; one stopped
       * here was stopped, whatever it was doing. */
      if (self->stopped && !g_error_matches (reduce_error, TDM_ENGINE_ERROR,
                                             TDM_ENGINE_ERROR_CANCELLED))
        {
          g_clear_error (&reduce_error);
          reduce_error = g_error_new_literal (TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED,
                                              _("The experiment was stopped."));
        }
      else if (!self->stopped && error != NULL &&
               !g_error_matches (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED))
        {
          g_clear_error (&reduce_error);
          reduce_error = g_error_copy (error);
        }
      tdm_experiment_runner_finish (self, g_steal_pointer (&reduce_error));
      return;
    }
  g_signal_emit (self, signals[TRAINING_DONE], 0, done);
  /* A kind that keeps a stopped training completed on it (the finder). */
  if (self->stopped && !tdm_experiment_is_complete (self->box->experiment))
    {
      tdm_experiment_runner_finish (self, g_error_new_literal (TDM_ENGINE_ERROR,
                                                               TDM_ENGINE_ERROR_CANCELLED,
                                                               _("The experiment was stopped.")));
      return;
    }
  tdm_experiment_runner_next (self);
}

void
tdm_experiment_runner_prepare_run (TdmExperimentRunner *self,
                                   TdmRun              *run)
{
  const TdmExperimentTraining *training;

  g_return_if_fail (TDM_IS_EXPERIMENT_RUNNER (self));
  g_return_if_fail (TDM_IS_RUN (run));

  training = tdm_experiment_get_training (self->box->experiment);
  g_return_if_fail (training != NULL);
  tdm_run_set_keep_parameters (run, training->keep_parameters);
  tdm_run_set_training (run, training);
  tdm_run_set_observer (run, experiment_box_observe, g_atomic_rc_box_acquire (self->box),
                        experiment_box_release);
}

/* Starts `training` as the run under way; FALSE with the error (the experiment told
 * that nothing ran, so it is over) when it could not start. */
static gboolean
tdm_experiment_runner_launch (TdmExperimentRunner          *self,
                              const TdmExperimentTraining  *training,
                              GError                      **error)
{
  g_autoptr(TdmRun) run = NULL;

  if (self->launch != NULL)
    {
      run = self->launch (training, self, self->launch_data);
      if (run == NULL)
        g_set_error_literal (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED,
                             _("The training could not start."));
    }
  else
    {
      run = tdm_run_new (training->config);
      tdm_experiment_runner_prepare_run (self, run);
      if (!tdm_run_start (run, error))
        g_clear_object (&run);
    }
  if (run == NULL)
    {
      tdm_experiment_reduce (self->box->experiment, NULL, 0, NULL);
      return FALSE;
    }
  self->run = g_steal_pointer (&run);
  g_signal_connect_object (self->run, "done", G_CALLBACK (tdm_experiment_runner_run_done), self,
                           G_CONNECT_SWAPPED);
  g_signal_emit (self, signals[TRAINING_STARTED], 0, self->run);
  return TRUE;
}

/* The next training started, or the experiment finished. */
static void
tdm_experiment_runner_next (TdmExperimentRunner *self)
{
  const TdmExperimentTraining *training = tdm_experiment_next (self->box->experiment);
  GError *error = NULL;

  if (training == NULL)
    tdm_experiment_runner_finish (self, NULL);
  else if (!tdm_experiment_runner_launch (self, training, &error))
    tdm_experiment_runner_finish (self, error);
}

/* Main thread: the experiment reduces here. */
static void
tdm_experiment_runner_point (const TdmScalingPoint *point,
                             gpointer               data)
{
  TdmExperimentRunner *self = data;

  if (self->record != NULL)
    tdm_run_recorder_add_point (point, self->record);
  g_signal_emit (self, signals[POINT], 0, point);
}

TdmExperimentRunner *
tdm_experiment_runner_new (TdmExperiment *experiment)
{
  TdmExperimentRunner *self;

  g_return_val_if_fail (experiment != NULL, NULL);

  self = g_object_new (TDM_TYPE_EXPERIMENT_RUNNER, NULL);
  self->box = g_atomic_rc_box_new0 (ExperimentBox);
  self->box->experiment = experiment;
  g_weak_ref_init (&self->box->runner, self);
  self->box->context = g_main_context_ref_thread_default ();
  if (tdm_experiment_get_kind (experiment) == TDM_EXPERIMENT_SCALING)
    tdm_experiment_set_point_sink (experiment, tdm_experiment_runner_point, self);
  else if (tdm_experiment_get_kind (experiment) == TDM_EXPERIMENT_LR_FIND)
    tdm_experiment_set_lr_point_sink (experiment, experiment_box_lr_point, self->box);
  return self;
}

void
tdm_experiment_runner_set_launch (TdmExperimentRunner *self,
                                  TdmExperimentLaunch  launch,
                                  gpointer             user_data)
{
  g_return_if_fail (TDM_IS_EXPERIMENT_RUNNER (self));

  self->launch = launch;
  self->launch_data = user_data;
}

void
tdm_experiment_runner_set_history (TdmExperimentRunner *self,
                                   TdmHistory          *history)
{
  g_return_if_fail (TDM_IS_EXPERIMENT_RUNNER (self));
  g_return_if_fail (!self->running);

  g_clear_pointer (&self->history, tdm_history_free);
  if (history != NULL)
    self->history = tdm_history_new (tdm_history_get_folder (history));
}

gboolean
tdm_experiment_runner_start (TdmExperimentRunner  *self,
                             GError              **error)
{
  const TdmExperimentTraining *training;

  g_return_val_if_fail (TDM_IS_EXPERIMENT_RUNNER (self), FALSE);
  g_return_val_if_fail (!self->running && self->record_ids->len == 0, FALSE);

  training = tdm_experiment_next (self->box->experiment);
  if (training == NULL)
    {
      g_set_error_literal (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                           _("The experiment has nothing to train."));
      return FALSE;
    }
  /* An experiment the history cannot keep still runs; the error says it is not kept. */
  if (self->history != NULL)
    self->record = tdm_run_recorder_new_experiment (self->history, self->box->experiment,
                                                    NULL, &self->history_error);
  /* A first training that cannot start is the caller's error: no "finished", and a
   * record that kept nothing goes. */
  self->running = TRUE;
  if (!tdm_experiment_runner_launch (self, training, error))
    {
      g_autoptr(GError) nothing = g_error_new_literal (TDM_ENGINE_ERROR,
                                                       TDM_ENGINE_ERROR_CANCELLED, "");

      self->running = FALSE;
      tdm_experiment_runner_end_record (self, nothing);
      g_clear_pointer (&self->history_id, g_free);
      return FALSE;
    }
  return TRUE;
}

void
tdm_experiment_runner_stop (TdmExperimentRunner *self)
{
  g_return_if_fail (TDM_IS_EXPERIMENT_RUNNER (self));

  if (!self->running)
    return;
  self->stopped = TRUE;
  if (self->run != NULL)
    tdm_run_stop (self->run);
}

gboolean
tdm_experiment_runner_get_running (TdmExperimentRunner *self)
{
  g_return_val_if_fail (TDM_IS_EXPERIMENT_RUNNER (self), FALSE);

  return self->running;
}

TdmExperiment *
tdm_experiment_runner_get_experiment (TdmExperimentRunner *self)
{
  g_return_val_if_fail (TDM_IS_EXPERIMENT_RUNNER (self), NULL);

  return self->box->experiment;
}

int
tdm_experiment_runner_get_n_done (TdmExperimentRunner *self)
{
  g_return_val_if_fail (TDM_IS_EXPERIMENT_RUNNER (self), 0);

  return (int) self->record_ids->len;
}

const char *
tdm_experiment_runner_get_record_id (TdmExperimentRunner *self,
                                     int                  index)
{
  g_return_val_if_fail (TDM_IS_EXPERIMENT_RUNNER (self), NULL);

  if (index < 0 || (guint) index >= self->record_ids->len)
    return NULL;
  return g_ptr_array_index (self->record_ids, index);
}

const char *
tdm_experiment_runner_get_history_id (TdmExperimentRunner *self)
{
  g_return_val_if_fail (TDM_IS_EXPERIMENT_RUNNER (self), NULL);

  return self->history_id;
}

const GError *
tdm_experiment_runner_get_history_error (TdmExperimentRunner *self)
{
  g_return_val_if_fail (TDM_IS_EXPERIMENT_RUNNER (self), NULL);

  return self->history_error;
}

static void
tdm_experiment_runner_dispose (GObject *object)
{
  TdmExperimentRunner *self = (TdmExperimentRunner *) object;

  /* Dropping the run stops it; its thread winds down by itself, holding the box. */
  if (self->run != NULL)
    g_signal_handlers_disconnect_by_data (self->run, self);
  g_clear_object (&self->run);
  self->running = FALSE;

  G_OBJECT_CLASS (tdm_experiment_runner_parent_class)->dispose (object);
}

static void
tdm_experiment_runner_finalize (GObject *object)
{
  TdmExperimentRunner *self = (TdmExperimentRunner *) object;

  /* No point can come any more: the sink is this object. */
  if (tdm_experiment_get_kind (self->box->experiment) == TDM_EXPERIMENT_SCALING)
    tdm_experiment_set_point_sink (self->box->experiment, NULL, NULL);
  experiment_box_release (self->box);
  g_ptr_array_unref (self->record_ids);
  g_clear_pointer (&self->record, tdm_run_recorder_free);
  g_clear_pointer (&self->history, tdm_history_free);
  g_clear_pointer (&self->history_id, g_free);
  g_clear_error (&self->history_error);

  G_OBJECT_CLASS (tdm_experiment_runner_parent_class)->finalize (object);
}

static void
tdm_experiment_runner_class_init (TdmExperimentRunnerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = tdm_experiment_runner_dispose;
  object_class->finalize = tdm_experiment_runner_finalize;

  signals[TRAINING_STARTED] =
    g_signal_new ("training-started", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 1, TDM_TYPE_RUN);
  signals[TRAINING_DONE] =
    g_signal_new ("training-done", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 1, TDM_TYPE_RUN);
  signals[POINT] =
    g_signal_new ("point", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, g_cclosure_marshal_VOID__POINTER, G_TYPE_NONE, 1, G_TYPE_POINTER);
  signals[LR_POINT] =
    g_signal_new ("lr-point", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, g_cclosure_marshal_VOID__POINTER, G_TYPE_NONE, 1, G_TYPE_POINTER);
  signals[FINISHED] =
    g_signal_new ("finished", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, g_cclosure_marshal_VOID__POINTER, G_TYPE_NONE, 1, G_TYPE_POINTER);
}

static void
tdm_experiment_runner_init (TdmExperimentRunner *self)
{
  self->record_ids = g_ptr_array_new_with_free_func (g_free);
}
