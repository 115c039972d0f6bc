/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run.c: one training run on a worker thread, reported on the main loop.
 *
 * How the thread and the main loop share the run, and why progress comes in
 * batches: docs/ARCHITECTURE.md, "A run's thread".
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE  /* gettid() */
#endif

#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tdm-run.h"
#include "tdm-tensorboard-run.h"
#include "tdm-trainer.h"

/* The nice value of the training threads a window starts: the main loop, and the
 * X server or compositor that shows its frames, then get a core at once when they
 * wake, instead of queueing behind a training step on a machine whose every core
 * trains (bench/NOTES.md, "GUI"). Training loses nothing while they sleep; only
 * work that is niced further (builds at 19) takes a larger share from it.
 * TANDEM_TRAINING_NICE overrides it, to measure (bench/bench-gui.c). */
#define TDM_RUN_WORKER_NICE 10

#define BATCH_MS 250

typedef struct
{
  gatomicrefcount  ref_count;
  GMutex           lock;
  TdmTrainer      *trainer;      /* under lock; NULL once the thread let go of it */
  GCancellable    *cancellable;
  GMainContext    *context;
  GWeakRef         run;
  GThread         *thread;
  GApplication    *application;  /* held while the thread runs */

  /* Under lock: messages not yet delivered, oldest first, and the sources that will
   * deliver them (0 when none is attached). */
  GQueue           queue;
  GSource         *batch_source;
  gboolean         urgent_scheduled;
  GError          *thread_error;  /* why tdm_trainer_run() failed, once it returned */

  /* Set before the thread starts; the thread alone uses them until it has ended. */
  TdmRunRecorder  *recorder;
  GError          *record_error;
  TdmTensorboardRun *tensorboard;
  GError          *tensorboard_error;
  gboolean         keep_parameters;
  float           *parameters;
  size_t           n_parameters;
  TdmEventSink     observer;
  gpointer         observer_data;
  GDestroyNotify   observer_destroy;
  /* Set once by the thread before training, then read-only; freed with the block. */
  TdmDatasetPair  *data;
  TdmConfig       *config;        /* the thread's copy, for opening the dataset */
} TdmRunShared;

typedef struct
{
  TdmEvent     *event;
  GError       *error;
} TdmRunMessage;

struct _TdmRun
{
  GObject       parent_instance;

  TdmConfig    *config;
  TdmRunShared *shared;
  TdmRunRecorder *recorder;     /* until start hands it to the thread */
  char         *record_id;
  GError       *record_error;
  char         *tensorboard_root;
  char         *tensorboard_name;
  char         *tensorboard_folder;
  GError       *tensorboard_error;
  gboolean      keep_parameters;
  TdmEventSink  observer;
  gpointer      observer_data;
  GDestroyNotify observer_destroy;
  char         *resume_path;
  TdmExperimentTraining training; /* its options, and its stop (held) */
  gulong        training_stop_handler;
  float        *parameters;
  size_t        n_parameters;
  double        pace;
  guint         running : 1;
  guint         paused : 1;
};

enum {
  EVENT,
  DONE,
  N_SIGNALS
};

static guint signals[N_SIGNALS];
static guint n_threads;

G_DEFINE_FINAL_TYPE (TdmRun, tdm_run, G_TYPE_OBJECT)

/* On the thread that cancels the experiment's stop: the run's own. */
static void
tdm_run_training_stopped (GCancellable *stop,
                          gpointer      cancellable)
{
  g_cancellable_cancel (cancellable);
}

static void
tdm_run_unlink_training_stop (TdmRun *self)
{
  if (self->training_stop_handler != 0)
    g_cancellable_disconnect (self->training.stop, self->training_stop_handler);
  self->training_stop_handler = 0;
}

static void
tdm_run_message_free (gpointer data)
{
  TdmRunMessage *message = data;

  g_clear_pointer (&message->event, g_free);
  g_clear_error (&message->error);
  g_free (message);
}

static TdmRunShared *
tdm_run_shared_new (TdmRun *run)
{
  TdmRunShared *shared = g_new0 (TdmRunShared, 1);

  g_atomic_ref_count_init (&shared->ref_count);
  g_mutex_init (&shared->lock);
  shared->cancellable = g_cancellable_new ();
  shared->context = g_main_context_ref_thread_default ();
  g_weak_ref_init (&shared->run, run);

  return shared;
}

static TdmRunShared *
tdm_run_shared_ref (TdmRunShared *shared)
{
  g_atomic_ref_count_inc (&shared->ref_count);
  return shared;
}

static void
tdm_run_shared_unref (TdmRunShared *shared)
{
  if (!g_atomic_ref_count_dec (&shared->ref_count))
    return;

  g_assert (shared->thread == NULL);
  g_assert (shared->batch_source == NULL);
  g_queue_clear_full (&shared->queue, tdm_run_message_free);
  g_clear_error (&shared->thread_error);
  g_clear_error (&shared->record_error);
  g_clear_pointer (&shared->recorder, tdm_run_recorder_free);
  g_clear_error (&shared->tensorboard_error);
  g_clear_pointer (&shared->tensorboard, tdm_tensorboard_run_free);
  g_clear_pointer (&shared->parameters, g_free);
  g_clear_pointer (&shared->trainer, tdm_trainer_free);
  if (shared->observer_destroy != NULL && shared->observer_data != NULL)
    shared->observer_destroy (shared->observer_data);
  g_clear_pointer (&shared->data, tdm_dataset_pair_free);
  g_clear_pointer (&shared->config, tdm_config_free);
  g_clear_object (&shared->cancellable);
  g_clear_pointer (&shared->context, g_main_context_unref);
  g_weak_ref_clear (&shared->run);
  g_mutex_clear (&shared->lock);
  g_free (shared);
}

static gboolean tdm_run_deliver_queued (gpointer data);

/* Always through a source, never g_main_context_invoke(): that would call back on the
 * worker thread whenever it can acquire the context, which it can between two
 * iterations of a loop that is not running (as in tests). Under lock. */
static GSource *
tdm_run_schedule (TdmRunShared *shared,
                  guint         delay_ms,
                  GSourceFunc   callback,
                  const char   *name)
{
  GSource *source = delay_ms > 0 ? g_timeout_source_new (delay_ms) : g_idle_source_new ();

  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, callback, tdm_run_shared_ref (shared),
                         (GDestroyNotify) tdm_run_shared_unref);
  g_source_set_static_name (source, name);
  g_source_attach (source, shared->context);

  return source;
}

/* Worker thread. */
static void
tdm_run_post (TdmRunShared *shared,
              TdmEvent     *event,
              GError       *error)
{
  TdmRunMessage *message = g_new0 (TdmRunMessage, 1);
  /* Phases and batch splits come with the sampled steps, as often as summaries. */
  gboolean progress = event->kind == TDM_EVENT_STEP || event->kind == TDM_EVENT_DEVICES ||
                      event->kind == TDM_EVENT_PHASES || event->kind == TDM_EVENT_BATCH;

  message->event = event;
  message->error = error;

  g_mutex_lock (&shared->lock);
  g_queue_push_tail (&shared->queue, message);
  if (!progress && !shared->urgent_scheduled)
    {
      g_source_unref (tdm_run_schedule (shared, 0, tdm_run_deliver_queued,
                                        "[tandem] training event"));
      shared->urgent_scheduled = TRUE;
    }
  else if (progress && shared->batch_source == NULL && !shared->urgent_scheduled)
    shared->batch_source = tdm_run_schedule (shared, BATCH_MS, tdm_run_deliver_queued,
                                             "[tandem] training progress");
  g_mutex_unlock (&shared->lock);
}

/* Main thread. */
static void
tdm_run_deliver (TdmRun        *self,
                 TdmRunShared  *shared,
                 TdmRunMessage *message)
{
  TdmEvent *event = message->event;

  /* Once stopped, progress that was already on its way is stale; the outcome
   * (finished or failed) still matters. */
  if (g_cancellable_is_cancelled (shared->cancellable) &&
      event->kind != TDM_EVENT_FINISHED &&
      event->kind != TDM_EVENT_FAILED)
    return;

  if (event->kind == TDM_EVENT_PAUSED)
    self->paused = TRUE;
  else if (event->kind == TDM_EVENT_RESUMED)
    self->paused = FALSE;
  else if (event->kind == TDM_EVENT_FAILED)
    event->failed = message->error;

  g_signal_emit (self, signals[EVENT], 0, event);
}

/* Main thread: every message queued so far, in order. */
static void
tdm_run_deliver_all (TdmRunShared *shared)
{
  g_autoptr(TdmRun) self = NULL;
  GQueue queue = G_QUEUE_INIT;
  TdmRunMessage *message;

  g_mutex_lock (&shared->lock);
  queue = shared->queue;
  g_queue_init (&shared->queue);
  /* Whatever was scheduled is done by this; news from now on schedules anew. */
  if (shared->batch_source != NULL)
    {
      g_source_destroy (shared->batch_source);
      g_clear_pointer (&shared->batch_source, g_source_unref);
    }
  shared->urgent_scheduled = FALSE;
  g_mutex_unlock (&shared->lock);

  self = g_weak_ref_get (&shared->run);
  while ((message = g_queue_pop_head (&queue)) != NULL)
    {
      if (self != NULL)
        tdm_run_deliver (self, shared, message);
      tdm_run_message_free (message);
    }
}

static gboolean
tdm_run_deliver_queued (gpointer data)
{
  tdm_run_deliver_all (data);
  return G_SOURCE_REMOVE;
}

/* Main thread: the worker has sent its last message, so joining is immediate. */
static gboolean
tdm_run_finish (gpointer data)
{
  TdmRunShared *shared = data;
  g_autoptr(TdmRun) self = NULL;
  g_autoptr(GError) error = NULL;

  g_thread_join (g_steal_pointer (&shared->thread));
  n_threads--;

  /* The outcome comes last, after any event still queued. */
  g_mutex_lock (&shared->lock);
  error = g_steal_pointer (&shared->thread_error);
  g_mutex_unlock (&shared->lock);
  tdm_run_deliver_all (shared);

  if (shared->application != NULL)
    {
      g_application_release (shared->application);
      g_clear_object (&shared->application);
    }

  self = g_weak_ref_get (&shared->run);
  if (self != NULL)
    {
      g_mutex_lock (&shared->lock);
      self->record_error = g_steal_pointer (&shared->record_error);
      if (shared->tensorboard_error != NULL)
        self->tensorboard_error = g_steal_pointer (&shared->tensorboard_error);
      self->parameters = g_steal_pointer (&shared->parameters);
      self->n_parameters = shared->n_parameters;
      g_mutex_unlock (&shared->lock);
      self->running = FALSE;
      self->paused = FALSE;
      tdm_run_unlink_training_stop (self);
      g_signal_emit (self, signals[DONE], 0, error);
    }

  return G_SOURCE_REMOVE;
}

/* Worker thread. */
static void
tdm_run_sink (const TdmEvent *event,
              gpointer        user_data)
{
  TdmRunShared *shared = user_data;
  TdmEvent *copy = g_memdup2 (event, sizeof *event);
  GError *error = NULL;

  if (shared->observer != NULL)
    shared->observer (event, shared->observer_data);
  if (shared->recorder != NULL)
    tdm_run_recorder_add (event, shared->recorder);
  if (shared->tensorboard != NULL)
    tdm_tensorboard_run_add (event, shared->tensorboard);

  if (event->kind == TDM_EVENT_FAILED)
    {
      if (event->failed != NULL)
        error = g_error_copy (event->failed);
      copy->failed = NULL;
    }

  tdm_run_post (shared, copy, error);
}

/* Worker thread: on Linux a nice value belongs to one thread, and a thread started
 * later inherits its creator's, so this covers the trainer's replica threads too;
 * tandem-train keeps the normal priority. Lowering one's own priority needs no
 * privilege; where it fails nothing else changes. */
static void
tdm_run_lower_priority (void)
{
#ifdef __linux__
  const char *env = g_getenv ("TANDEM_TRAINING_NICE");
  int nice_value = env ? atoi (env) : TDM_RUN_WORKER_NICE;

  errno = 0;
  if (setpriority (PRIO_PROCESS, gettid (), nice_value) != 0)
    g_debug ("could not lower the training thread's priority: %s", g_strerror (errno));
#endif
}

/* Worker thread: the dataset, opened as the trainer would open it. */
static gboolean
tdm_run_open_dataset (TdmRunShared     *shared,
                      const TdmConfig  *config,
                      GError          **error)
{
  TdmImageOptions image = {
    .size = config->image_size,
    .channels = config->image_channels,
    .seed = config->seed,
    .cancellable = shared->cancellable,
  };
  TdmDatasetPair *data = tdm_dataset_open_with (config->dataset, &image, error);

  if (data == NULL)
    return FALSE;

  g_mutex_lock (&shared->lock);
  shared->data = data;
  g_mutex_unlock (&shared->lock);
  return TRUE;
}

/* Worker thread. */
static gpointer
tdm_run_thread (gpointer data)
{
  TdmRunShared *shared = data;
  TdmTrainer *trainer;
  GError *error = NULL;

  /* Only this thread frees the trainer, so reading it unlocked is safe here. */
  trainer = shared->trainer;
  tdm_run_lower_priority ();
  if (tdm_run_open_dataset (shared, shared->config, &error))
    {
      tdm_trainer_set_dataset (trainer, shared->data);
      tdm_trainer_run (trainer, shared->cancellable, &error);
    }
  else
    {
      /* Reported as the trainer would have: a FAILED event, then done. */
      TdmEvent failed = { .kind = TDM_EVENT_FAILED, .failed = error };

      tdm_run_sink (&failed, shared);
    }

  g_mutex_lock (&shared->lock);
  shared->trainer = NULL;
  g_mutex_unlock (&shared->lock);

  if (shared->keep_parameters)
    {
      size_t count = 0;
      const float *parameters = tdm_trainer_get_parameters (trainer, &count);
      float *copy = parameters != NULL ? g_memdup2 (parameters, count * sizeof (float)) : NULL;

      g_mutex_lock (&shared->lock);
      shared->parameters = copy;
      shared->n_parameters = copy != NULL ? count : 0;
      g_mutex_unlock (&shared->lock);
    }
  if (shared->recorder != NULL)
    {
      GError *record_error = NULL;

      tdm_run_recorder_finish (shared->recorder, &record_error);
      g_mutex_lock (&shared->lock);
      shared->record_error = record_error;
      g_mutex_unlock (&shared->lock);
    }
  if (shared->tensorboard != NULL)
    {
      GError *tensorboard_error = NULL;

      tdm_tensorboard_run_finish (shared->tensorboard, &tensorboard_error);
      g_mutex_lock (&shared->lock);
      shared->tensorboard_error = tensorboard_error;
      g_mutex_unlock (&shared->lock);
    }

  /* Releasing replicas can take a while on a GPU: do it here, not on the main loop. */
  tdm_trainer_free (trainer);

  g_mutex_lock (&shared->lock);
  shared->thread_error = error;
  g_source_unref (tdm_run_schedule (shared, 0, tdm_run_finish, "[tandem] training ended"));
  g_mutex_unlock (&shared->lock);

  tdm_run_shared_unref (shared);

  return NULL;
}

static void
tdm_run_dispose (GObject *object)
{
  TdmRun *self = (TdmRun *)object;

  /* The thread, if any, ends by itself within a fraction of a second and is joined
   * by tdm_run_finish(); nothing here waits for it. */
  if (self->shared != NULL)
    g_cancellable_cancel (self->shared->cancellable);
  g_clear_pointer (&self->shared, tdm_run_shared_unref);

  G_OBJECT_CLASS (tdm_run_parent_class)->dispose (object);
}

static void
tdm_run_finalize (GObject *object)
{
  TdmRun *self = (TdmRun *)object;

  tdm_run_unlink_training_stop (self);
  g_clear_object (&self->training.stop);
  g_clear_pointer (&self->config, tdm_config_free);
  if (self->observer_destroy != NULL && self->observer_data != NULL)
    self->observer_destroy (self->observer_data);
  g_clear_pointer (&self->recorder, tdm_run_recorder_free);
  g_clear_pointer (&self->resume_path, g_free);
  g_clear_pointer (&self->record_id, g_free);
  g_clear_error (&self->record_error);
  g_clear_pointer (&self->tensorboard_root, g_free);
  g_clear_pointer (&self->tensorboard_name, g_free);
  g_clear_pointer (&self->tensorboard_folder, g_free);
  g_clear_error (&self->tensorboard_error);
  g_clear_pointer (&self->parameters, g_free);

  G_OBJECT_CLASS (tdm_run_parent_class)->finalize (object);
}

static void
tdm_run_class_init (TdmRunClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = tdm_run_dispose;
  object_class->finalize = tdm_run_finalize;

  /**
   * TdmRun::event:
   * @event: (type gpointer): the TdmEvent, valid during the emission only
   *
   * An engine event, on the main loop. Progress (steps, device figures) stops
   * coming once the run has been told to stop.
   */
  signals[EVENT] =
    g_signal_new ("event",
                  G_TYPE_FROM_CLASS (klass),
                  G_SIGNAL_RUN_LAST,
                  0, NULL, NULL,
                  g_cclosure_marshal_VOID__POINTER,
                  G_TYPE_NONE, 1, G_TYPE_POINTER);

  /**
   * TdmRun::done:
   * @error: (type gpointer) (nullable): why the run failed, or %NULL
   *
   * The worker thread has ended and been joined.
   */
  signals[DONE] =
    g_signal_new ("done",
                  G_TYPE_FROM_CLASS (klass),
                  G_SIGNAL_RUN_LAST,
                  0, NULL, NULL,
                  g_cclosure_marshal_VOID__POINTER,
                  G_TYPE_NONE, 1, G_TYPE_POINTER);
}

static void
tdm_run_init (TdmRun *self)
{
}

TdmRun *
tdm_run_new (const TdmConfig *config)
{
  TdmRun *self;

  g_return_val_if_fail (config != NULL, NULL);

  self = g_object_new (TDM_TYPE_RUN, NULL);
  self->config = tdm_config_copy (config);

  return self;
}

gboolean
tdm_run_start (TdmRun  *self,
               GError **error)
{
  TdmRunShared *shared;
  GApplication *application;

  g_return_val_if_fail (TDM_IS_RUN (self), FALSE);
  g_return_val_if_fail (self->shared == NULL, FALSE);

  if (!tdm_config_validate (self->config, error))
    return FALSE;

  shared = tdm_run_shared_new (self);
  shared->trainer = tdm_trainer_new (self->config, tdm_run_sink, shared);
  shared->keep_parameters = self->keep_parameters;
  /* The data goes with the shared block: it outlives the thread. */
  shared->observer = self->observer;
  shared->observer_data = g_steal_pointer (&self->observer_data);
  shared->observer_destroy = self->observer_destroy;
  if (self->recorder != NULL)
    {
      shared->recorder = g_steal_pointer (&self->recorder);
      tdm_trainer_options (shared->trainer)->summary_steps = TDM_HISTORY_SUMMARY_STEPS;
    }
  tdm_experiment_training_apply (&self->training, tdm_trainer_options (shared->trainer));
  if (self->tensorboard_root != NULL)
    {
      /* Only once the run is sure to start, so that a run that does not leaves no
       * empty folder behind. */
      shared->tensorboard = tdm_tensorboard_run_new (self->tensorboard_root,
                                                     self->tensorboard_name,
                                                     &self->tensorboard_error);
      if (shared->tensorboard != NULL)
        self->tensorboard_folder = g_strdup (tdm_tensorboard_run_get_folder (shared->tensorboard));
    }
  tdm_trainer_set_pace (shared->trainer, self->pace);
  if (self->resume_path != NULL)
    tdm_trainer_set_resume_path (shared->trainer, self->resume_path);
  shared->config = tdm_config_copy (self->config);

  /* An application quits when its last window goes; the hold keeps it (and so the
   * process) alive until the thread has wound down and been joined. */
  application = g_application_get_default ();
  if (application != NULL)
    {
      shared->application = g_object_ref (application);
      g_application_hold (application);
    }

  shared->thread = g_thread_try_new ("tandem-trainer", tdm_run_thread,
                                     tdm_run_shared_ref (shared), error);
  if (shared->thread == NULL)
    {
      if (shared->application != NULL)
        {
          g_application_release (shared->application);
          g_clear_object (&shared->application);
        }
      /* Once for the thread that never started, once for ours. */
      tdm_run_shared_unref (shared);
      tdm_run_shared_unref (shared);
      return FALSE;
    }

  n_threads++;
  self->shared = shared;
  self->running = TRUE;
  if (self->training.stop != NULL)
    self->training_stop_handler =
      g_cancellable_connect (self->training.stop, G_CALLBACK (tdm_run_training_stopped),
                             g_object_ref (shared->cancellable), g_object_unref);

  return TRUE;
}

void
tdm_run_stop (TdmRun *self)
{
  g_return_if_fail (TDM_IS_RUN (self));

  if (self->shared != NULL)
    g_cancellable_cancel (self->shared->cancellable);
}

void
tdm_run_set_paused (TdmRun   *self,
                    gboolean  paused)
{
  g_return_if_fail (TDM_IS_RUN (self));

  if (self->shared == NULL)
    return;

  g_mutex_lock (&self->shared->lock);
  if (self->shared->trainer != NULL)
    tdm_trainer_set_paused (self->shared->trainer, paused);
  g_mutex_unlock (&self->shared->lock);

  self->paused = !!paused;
}

gboolean
tdm_run_get_paused (TdmRun *self)
{
  g_return_val_if_fail (TDM_IS_RUN (self), FALSE);

  return self->paused;
}

gboolean
tdm_run_is_stopping (TdmRun *self)
{
  g_return_val_if_fail (TDM_IS_RUN (self), FALSE);

  return self->running && g_cancellable_is_cancelled (self->shared->cancellable);
}

void
tdm_run_set_recorder (TdmRun         *self,
                      TdmRunRecorder *recorder)
{
  g_return_if_fail (TDM_IS_RUN (self));
  g_return_if_fail (self->shared == NULL);

  g_clear_pointer (&self->recorder, tdm_run_recorder_free);
  g_clear_pointer (&self->record_id, g_free);
  self->recorder = recorder;
  if (recorder != NULL)
    self->record_id = g_strdup (tdm_run_recorder_get_id (recorder));
}

const char *
tdm_run_get_record_id (TdmRun *self)
{
  g_return_val_if_fail (TDM_IS_RUN (self), NULL);

  return self->record_id;
}

const GError *
tdm_run_get_record_error (TdmRun *self)
{
  g_return_val_if_fail (TDM_IS_RUN (self), NULL);

  return self->record_error;
}

void
tdm_run_set_tensorboard (TdmRun     *self,
                         const char *root,
                         const char *name)
{
  g_return_if_fail (TDM_IS_RUN (self));
  g_return_if_fail (self->shared == NULL);

  g_free (self->tensorboard_root);
  g_free (self->tensorboard_name);
  self->tensorboard_root = g_strdup (root);
  self->tensorboard_name = g_strdup (name);
}

const char *
tdm_run_get_tensorboard_folder (TdmRun *self)
{
  g_return_val_if_fail (TDM_IS_RUN (self), NULL);

  return self->tensorboard_folder;
}

const GError *
tdm_run_get_tensorboard_error (TdmRun *self)
{
  g_return_val_if_fail (TDM_IS_RUN (self), NULL);

  return self->tensorboard_error;
}

void
tdm_run_set_keep_parameters (TdmRun   *self,
                             gboolean  keep)
{
  g_return_if_fail (TDM_IS_RUN (self));
  g_return_if_fail (self->shared == NULL);

  self->keep_parameters = !!keep;
}

void
tdm_run_set_training (TdmRun                      *self,
                      const TdmExperimentTraining *training)
{
  g_return_if_fail (TDM_IS_RUN (self));
  g_return_if_fail (training != NULL);
  g_return_if_fail (self->shared == NULL);

  g_clear_object (&self->training.stop);
  self->training = *training;
  /* Only the options and the stop are read: the rest is the experiment's. */
  self->training.config = NULL;
  self->training.name = self->training.status = NULL;
  if (self->training.stop != NULL)
    g_object_ref (self->training.stop);
}

void
tdm_run_set_observer (TdmRun         *self,
                      TdmEventSink    observer,
                      gpointer        user_data,
                      GDestroyNotify  destroy)
{
  g_return_if_fail (TDM_IS_RUN (self));
  g_return_if_fail (self->shared == NULL);

  if (self->observer_destroy != NULL && self->observer_data != NULL)
    self->observer_destroy (self->observer_data);
  self->observer = observer;
  self->observer_data = user_data;
  self->observer_destroy = destroy;
}

const float *
tdm_run_get_parameters (TdmRun *self,
                        size_t *count)
{
  g_return_val_if_fail (TDM_IS_RUN (self), NULL);

  if (count != NULL)
    *count = self->n_parameters;
  return self->parameters;
}

guint
tdm_run_get_n_threads (void)
{
  return n_threads;
}

const TdmDatasetPair *
tdm_run_get_dataset (TdmRun *self)
{
  const TdmDatasetPair *data;

  g_return_val_if_fail (TDM_IS_RUN (self), NULL);

  if (self->shared == NULL)
    return NULL;

  g_mutex_lock (&self->shared->lock);
  data = self->shared->data;
  g_mutex_unlock (&self->shared->lock);

  return data;
}

void
tdm_run_set_pace (TdmRun *self,
                  double  steps_per_second)
{
  g_return_if_fail (TDM_IS_RUN (self));
  g_return_if_fail (steps_per_second >= 0);

  self->pace = steps_per_second;
  if (self->shared == NULL)
    return;

  g_mutex_lock (&self->shared->lock);
  if (self->shared->trainer != NULL)
    tdm_trainer_set_pace (self->shared->trainer, steps_per_second);
  g_mutex_unlock (&self->shared->lock);
}

void
tdm_run_single_step (TdmRun *self)
{
  g_return_if_fail (TDM_IS_RUN (self));

  if (self->shared == NULL)
    return;

  g_mutex_lock (&self->shared->lock);
  if (self->shared->trainer != NULL)
    {
      /* A step from a running run first brings it to rest. */
      if (!tdm_trainer_get_paused (self->shared->trainer))
        tdm_trainer_set_paused (self->shared->trainer, TRUE);
      else
        tdm_trainer_single_step (self->shared->trainer);
    }
  g_mutex_unlock (&self->shared->lock);
  self->paused = TRUE;
}

void
tdm_run_set_resume_path (TdmRun     *self,
                         const char *path)
{
  g_return_if_fail (TDM_IS_RUN (self));
  g_return_if_fail (self->shared == NULL);

  g_free (self->resume_path);
  self->resume_path = g_strdup (path);
}

char *
tdm_run_last_network_path (void)
{
  return g_build_filename (g_get_user_data_dir (), "tandem", "last-run.safetensors", NULL);
}
