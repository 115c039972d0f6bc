/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-experiment.c — what every kind of experiment shares (tdm-experiment.h): the
 * order of next, observe and reduce, how a training's end is read from its events,
 * the experiment's own stop of a training, and the driver that runs a whole
 * experiment on one thread. The kinds are tdm-experiment-scaling.c,
 * tdm-experiment-compare.c and tdm-experiment-lr-find.c. */
#include "tdm-experiment-private.h"
#include "tdm-choice.h"
#include "tdm-error.h"
#include "tdm-experiments-enum-types.h"
#include "tdm-i18n.h"
#include "tdm-trainer.h"

TDM_CHOICE_NAMES(TdmExperimentKind, tdm_experiment_kind, TDM_TYPE_EXPERIMENT_KIND)

void
tdm_experiment_init(TdmExperiment *e, const TdmExperimentClass *klass, TdmExperimentKind kind,
                    const TdmConfig *config, long steps)
{
  e->klass = klass;
  e->kind = kind;
  e->config = tdm_config_copy(config);
  e->steps = steps;
}

void
tdm_experiment_free(TdmExperiment *e)
{
  if (e == NULL)
    return;
  if (e->klass->finalize != NULL)
    e->klass->finalize(e);
  tdm_config_free(e->config);
  g_clear_pointer(&e->training_config, tdm_config_free);
  g_clear_object(&e->training.stop);
  g_free(e->training_name);
  g_free(e->training_status);
  g_clear_error(&e->failure);
  g_free(e);
}

gboolean
tdm_experiment_check_devices(const TdmConfig *config, const char *what, GError **error)
{
  if (!tdm_config_validate(config, error))
    return FALSE;
  if (tdm_config_replica_count(config) < 2) {
    /* Translators: %s is the experiment, "compare with one device" or "compare
     * strategies" */
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("%s needs at least two devices (or CPU workers)"), what);
    return FALSE;
  }
  return TRUE;
}

TdmExperimentKind
tdm_experiment_get_kind(const TdmExperiment *e)
{
  return e->kind;
}

const TdmConfig *
tdm_experiment_get_config(const TdmExperiment *e)
{
  return e->config;
}

long
tdm_experiment_get_steps(const TdmExperiment *e)
{
  return e->steps;
}

void
tdm_experiment_set_training(TdmExperiment *e, TdmConfig *config, const char *name,
                            const char *status, gboolean keep_parameters)
{
  g_clear_pointer(&e->training_config, tdm_config_free);
  g_clear_object(&e->training.stop);
  g_free(e->training_name);
  g_free(e->training_status);
  e->training_config = config;
  e->training_name = g_strdup(name);
  e->training_status = g_strdup(status);
  e->training.config = config;
  e->training.name = e->training_name;
  e->training.status = e->training_status;
  e->training.keep_parameters = keep_parameters;
  e->training.summary_steps = 0;
  e->training.lr_range[0] = e->training.lr_range[1] = 0;
  e->training.lr_range_steps = 0;
}

void
tdm_experiment_training_apply(const TdmExperimentTraining *t, TdmTrainerOptions *options)
{
  g_return_if_fail(t != NULL && options != NULL);
  if (t->summary_steps > 0)
    options->summary_steps = t->summary_steps;
  if (t->lr_range_steps > 0) {
    options->lr_range[0] = t->lr_range[0];
    options->lr_range[1] = t->lr_range[1];
    options->lr_range_steps = t->lr_range_steps;
  }
}

void
tdm_experiment_stop_training(TdmExperiment *e)
{
  e->stop_asked = TRUE;
  g_cancellable_cancel(e->training.stop);
}

const TdmExperimentTraining *
tdm_experiment_next(TdmExperiment *e)
{
  g_return_val_if_fail(e != NULL && !e->under_way, NULL);
  if (e->over)
    return NULL;
  /* The kinds read the index of the training they are asked for. */
  e->training.index = e->training_config != NULL ? e->training.index + 1 : 0;
  if (!e->klass->next(e)) {
    e->over = TRUE;
    e->complete = TRUE;
    return NULL;
  }
  e->under_way = TRUE;
  e->finished = e->stopped = e->stop_asked = FALSE;
  g_clear_error(&e->failure);
  g_clear_object(&e->training.stop);
  e->training.stop = g_cancellable_new();
  return &e->training;
}

const TdmExperimentTraining *
tdm_experiment_get_training(const TdmExperiment *e)
{
  return e->under_way ? &e->training : NULL;
}

void
tdm_experiment_set_summary_steps(TdmExperiment *e, int steps)
{
  e->summary_steps = MAX(0, steps);
}

void
tdm_experiment_set_span_clock(TdmExperiment *e, TdmClockFunc clock, gpointer user_data)
{
  e->span_clock = (TdmClock){clock, user_data};
}

void
tdm_experiment_observe(const TdmEvent *event, gpointer data)
{
  TdmExperiment *e = data;
  switch (event->kind) {
  case TDM_EVENT_FINISHED:
    e->finished = TRUE;
    e->stopped = event->finished.stopped;
    break;
  case TDM_EVENT_FAILED:
    if (e->failure == NULL && event->failed != NULL)
      e->failure = g_error_copy(event->failed);
    break;
  default:
    break;
  }
  if (e->klass->observe != NULL)
    e->klass->observe(e, event);
}

static void
set_stopped(const TdmExperiment *e, GError **error)
{
  g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED,
                      _(e->klass->stopped));
}

static gboolean
is_cancelled(const GError *error)
{
  return g_error_matches(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED) ||
         g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
}

gboolean
tdm_experiment_reduce(TdmExperiment *e, const float *parameters, size_t count, GError **error)
{
  g_return_val_if_fail(e != NULL && e->under_way, FALSE);
  e->under_way = FALSE;
  /* Stopped by the experiment itself, the training ended where it was meant to,
   * whatever it said of its end; stopped by the person, only a kind that keeps it
   * reduces it. */
  gboolean stopped = !e->stop_asked &&
                     (is_cancelled(e->failure) || (e->failure == NULL &&
                                                   (!e->finished || e->stopped)));
  gboolean ok;
  if (e->failure != NULL && !e->stop_asked && !stopped) {
    g_propagate_error(error, g_steal_pointer(&e->failure));
    ok = FALSE;
  } else if (stopped && !e->klass->keeps_stopped) {
    set_stopped(e, error);
    ok = FALSE;
  } else {
    g_clear_error(&e->failure);
    ok = e->klass->reduce(e, parameters, count, error);
    if (ok && stopped) {
      e->complete = TRUE;
      e->stopped_by_person = TRUE;
    }
  }
  if (!ok || e->complete)
    e->over = TRUE;
  return ok;
}

gboolean
tdm_experiment_is_complete(const TdmExperiment *e)
{
  return e->complete;
}

gboolean
tdm_experiment_get_stopped(const TdmExperiment *e)
{
  return e->stopped_by_person;
}

char *
tdm_experiment_dup_result(const TdmExperiment *e)
{
  return e->complete ? e->klass->dup_result(e) : NULL;
}

/* ---- the driver on one thread ---------------------------------------------------- */

typedef struct {
  TdmExperiment *experiment;
  TdmEventSink sink;
  gpointer user_data;
} Relay;

static void
relay_event(const TdmEvent *event, gpointer data)
{
  Relay *relay = data;
  tdm_experiment_observe(event, relay->experiment);
  if (relay->sink != NULL)
    relay->sink(event, relay->user_data);
}

static void
stop_training(GCancellable *cancellable, gpointer stop)
{
  g_cancellable_cancel(stop);
}

gboolean
tdm_experiment_run(TdmExperiment *e, TdmEventSink sink, gpointer user_data,
                   GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail(e != NULL, FALSE);
  Relay relay = {e, sink, user_data};
  const TdmExperimentTraining *training;
  while ((training = tdm_experiment_next(e)) != NULL) {
    g_autoptr(TdmTrainer) trainer = tdm_trainer_new(training->config, relay_event, &relay);
    g_autoptr(GError) train_error = NULL;
    tdm_trainer_options(trainer)->summary_steps = e->summary_steps;
    tdm_trainer_set_span_clock(trainer, e->span_clock.func, e->span_clock.data);
    tdm_experiment_training_apply(training, tdm_trainer_options(trainer));
    /* The training stops for the caller or for the experiment: its own stop. */
    gulong handler = cancellable != NULL
                       ? g_cancellable_connect(cancellable, G_CALLBACK(stop_training),
                                               training->stop, NULL)
                       : 0;
    gboolean trained = tdm_trainer_run(trainer, training->stop, &train_error);
    if (handler != 0)
      g_cancellable_disconnect(cancellable, handler);
    gboolean cancelled = g_cancellable_is_cancelled(cancellable);
    if (cancelled && !e->klass->keeps_stopped) {
      e->under_way = FALSE;
      e->over = TRUE;
      set_stopped(e, error);
      return FALSE;
    }
    /* A failure the trainer did not tell as an event is the training's all the same. */
    if (!trained && e->failure == NULL && !cancelled)
      e->failure = g_steal_pointer(&train_error);
    size_t count = 0;
    const float *parameters =
      training->keep_parameters ? tdm_trainer_get_parameters(trainer, &count) : NULL;
    if (!tdm_experiment_reduce(e, parameters, count, error))
      return FALSE;
  }
  return tdm_experiment_is_complete(e);
}
