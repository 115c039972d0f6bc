/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer-private.h — the trainer's state, shared by tdm-trainer.c (the loop and
 * its summaries), tdm-trainer-events.c (the other events), tdm-trainer-settings.c
 * (what callers set), tdm-trainer-setup.c (set-up, tear-down), tdm-trainer-step.c (the
 * jobs every replica's thread runs, and the collectives) and tdm-trainer-checkpoint.c
 * (saving and resuming). Not for anything else. */
#pragma once

#include "tdm-trainer.h"
#include "tdm-backend.h"
#include "tdm-barrier.h"
#include "tdm-communicator.h"
#include "tdm-dataset.h"
#include "tdm-iterator.h"
#include "tdm-network.h"
#include "tdm-optimizer.h"
#include "tdm-precision-auto.h"
#include "tdm-replica.h"
#include "tdm-telemetry.h"

typedef enum {
  JOB_TRAIN,
  JOB_METRICS,
  JOB_EVALUATE,
  JOB_BROADCAST,
} JobKind;

typedef struct {
  JobKind kind;
  const int32_t *indices;       /* the whole global batch */
  int count;                    /* samples in the global batch */
  int epoch;                    /* the epoch of the batch (augmentation, dropout) */
  double lr;
  double momentum;              /* > 0: the optimizer's momentum (Adam's beta1) this step,
                                 * as the one-cycle schedule sets it */
  gboolean timed;               /* synchronize and time each phase */
  double origin;                /* JOB_TRAIN: seconds when the step was handed out */
  double stop_vote;             /* JOB_METRICS: this process wants to stop */
  gboolean validation;          /* JOB_EVALUATE: the held-out training samples */
} Job;

typedef struct {
  double compute, comm, wait;   /* seconds over timed steps */
  double wall;                  /* seconds of timed steps, start to end */
  int timed_steps;
  TdmDevicePhases phases;       /* the last sampled step's phases */
  double forward_end;           /* seconds, set by the forward_done hook */
  TdmTrainer *trainer;          /* the hook's: whose span clock it reads */
  /* Every training step's: the operations issued from the host and those run from a
   * graph, and the host's seconds issuing steps that it did not wait for. */
  guint64 steps, host_ops, graph_ops;
  guint64 issued_steps;
  double issue;
  gboolean tail_ran;            /* the step's body issued the update (update_in_step) */
} Timing;

/* Gradient buckets: during backward each layer hands over its finished gradients (the
 * last layer's first); once a bucket's worth has gathered, its all-reduce starts on
 * the communication stream while backward goes on. Every replica forms the same
 * buckets in the same order, as collectives require. */
typedef struct Buckets {
  TdmTrainer *trainer;
  int replica;
  size_t lo, hi;                /* the pending range [lo, hi); empty when lo == hi */
  gboolean failed;
  double first_launch;          /* seconds: a sampled step's first bucket set off; 0: none */
  gboolean add_accumulated;     /* the step's earlier micro-batches' gradients (grad_acc)
                                 * join each range as it leaves */
} Buckets;

typedef struct {
  TdmTrainer *trainer;
  int replica;
} WorkerArgs;

typedef struct ExactReplica ExactReplica;   /* tdm-trainer-exact.c */

struct _TdmTrainer {
  TdmConfig *config;
  TdmEventSink sink;
  gpointer sink_data;
  char *resume_path;
  TdmClock clock;               /* tdm_trainer_set_clock() */
  TdmClock span_clock;          /* tdm_trainer_set_span_clock() */

  GMutex pause_lock;
  GCond pause_cond;
  gboolean paused;

  /* The run. */
  TdmDatasetPair *data;         /* == borrowed_data when the caller lent it */
  const TdmDatasetPair *borrowed_data;
  TdmNetwork *net;
  int replicas;                 /* local */
  int world;                    /* over all processes */
  int rank0;                    /* global index of local replica 0 */
  int main_local;               /* local index of the main replica, or −1 elsewhere */
  TdmBackend **backends;
  TdmReplica **reps;
  guint64 stem_bn_runs;         /* the replicas' stem_bn_runs, added up as they are freed:
                                 * for tests, after a run */
  TdmOptimizer **opts;          /* per replica; NULL where no update runs */
  TdmCommunicator *comm;
  TdmIterator *it;
  TdmTelemetry *telemetry;
  float *host_params;
  size_t host_params_count;
  GPtrArray *host_states;       /* after a run: each local replica's BN statistics */
  size_t host_state_count;
  long step;
  long saved_step;              /* the step of the last checkpoint, −1 for none */
  double trained_seconds;       /* the run's training time, as STEP's elapsed */

  /* Lock-step machinery. */
  GThread **threads;
  TdmBarrier start, end, pre_comm;
  Job job;
  volatile gint abort_flag;
  volatile gint quit_workers;   /* atomic: a worker may still be in its last job when
                                 * the run is stopped, so this is not a job kind */
  GMutex error_lock;
  GMutex abort_lock;            /* a stop from another thread against teardown */
  gboolean live;                /* barriers and communicator exist (abort_lock) */
  GError *worker_error;
  gboolean main_updated;        /* the main replica applied this step's update */
  double metrics_out[4];        /* JOB_METRICS/EVALUATE result: loss, correct, stop */
  Timing *timing;               /* [replicas] */
  struct Buckets *buckets;      /* [replicas] when gradients are all-reduced in buckets */
  ExactReplica *exact;          /* [replicas] in exact mode (tdm-trainer-exact.c) */
  float **grad_acc;             /* [replicas] with --accumulate (not exact mode): the
                                 * step's earlier micro-batches' gradients, on the device */
  double **clip_work;           /* [replicas] with --clip-grad-norm where the update runs:
                                 * clip_norm's device work (the norm first), or NULL */
  guint64 exact_bytes;          /* host bytes exact mode's buffers took, all replicas
                                 * (kept after the run, for tests) */
  int cpu_threads;              /* BLAS threads each CPU worker runs (0: none) */
  TdmPrecisionChoice precision; /* what the run computes in, config->precision resolved
                                 * for its devices at set-up (never auto), and why */
  gulong cancel_handler;
  GCancellable *cancellable;
  volatile gint stop_requested; /* distributed runs: stop at the next summary vote */
  int32_t *predicted;           /* [test count]: each test sample's predicted class */
  /* A validation split (config->val_split): the iterator runs over train_used samples,
   * train_map[i] being the i-th; the held-out ones are val_indices[val_count]. */
  int32_t *train_map, *val_indices;
  int train_used, val_count;
  int32_t *mapped;              /* [batch]: a step's samples through train_map */
  /* The best epoch by the monitored metric (config->monitor), or 0, its value and its
   * metrics: validation loss and accuracy, test loss and accuracy. */
  int best_epoch;
  double best_value;
  double best_metrics[4];
  gboolean early_stopped;
  int epochs_done;              /* the last epoch that ended, 1-based */
  /* The plateau schedule: the rate's factor so far, its best metric and the epochs
   * since (kept in checkpoints). */
  double plateau_scale;
  double plateau_best;
  int plateau_bad;
  gint64 eval_start_us;         /* the evaluation under way began (trainer's clock) */
  gint64 eval_said_us;          /* its last progress event, 0 before the first */
  int batch_asked;              /* the batch asked for, when a smaller one is used */
  TdmTrainerOptions options;    /* tdm_trainer_options() */
  guint64 *planned_columns;     /* [world]: each replica's column workspace as the memory
                                 * estimate counted it (0: the plan's upper bound) */
  int prewarm_steps;            /* this run's, for the STARTED event */
  double prewarm_seconds;

  /* Pace: under pause_lock. */
  double pace;                  /* steps per second at most; 0 for no limit */
  int single_steps;             /* steps still to run while paused */
  gint64 last_step_us;          /* on the trainer's clock, when the last step began */

  /* Starting from weights (tdm-trainer-finetune.c). */
  gboolean normalize;           /* inputs normalized per channel */
  TdmChannelAffine affine;
  char *normalize_text;         /* "M,M,M/S,S,S" for checkpoints, or NULL */
  float *init_params, *init_state;   /* --init's values over the seeded ones, or NULL */
  char *init_report;            /* what --init loaded and skipped, or NULL */
  float *layer_scales;          /* [layer_count] learning-rate factors, 0 frozen; or NULL */
  uint8_t *frozen;              /* [layer_count], or NULL */
  gint64 *bn_tracked;           /* [layer_count]: a frozen BN layer's num_batches_tracked
                                 * as given (it does not count the run's steps), −1 for
                                 * the others; or NULL */
  int first_trained;            /* backward stops at this layer */
};

/* The main replica's parameters into t->host_params (waits for its device). */
gboolean tdm_trainer_download_parameters (TdmTrainer *t, GError **error);
/* Writes config->save_path from the main replica, when there is one in this process,
 * and sends a SAVED event. */
gboolean tdm_trainer_save_checkpoint (TdmTrainer *t, GError **error);
/* The same to another path (--save-best's copy, `best`). */
gboolean tdm_trainer_save_checkpoint_to (TdmTrainer *t, const char *path, gboolean best,
                                         GError **error);
/* Puts the run where the checkpoint at path left it. */
gboolean tdm_trainer_restore_checkpoint (TdmTrainer *t, const char *path, GError **error);
/* FALSE, naming both, when the checkpoint at path was saved on another dataset than
 * the run's (loaded already). */
gboolean tdm_trainer_check_resume_dataset (TdmTrainer *t, const char *path, GError **error);

/* The monotonic clock in seconds: set-up's progress and the pre-warm. */
static inline double
tdm_trainer_now_seconds (void)
{
  return g_get_monotonic_time () / 1e6;
}

/* The span clock (tdm_trainer_set_span_clock) in seconds: sampled steps' phases,
 * their origin, and the host's share of a step. */
static inline double
tdm_trainer_span_seconds (TdmTrainer *t)
{
  return tdm_clock_now_us (&t->span_clock) / 1e6;
}

/* The trainer's clock (tdm_trainer_set_clock), in µs: what its decisions by time
 * (summaries, pace, evaluation progress) read, so tests can inject one. */
gint64 tdm_trainer_clock_us (TdmTrainer *t);

/* Events go to the sink from the process that holds the main replica. */
void tdm_trainer_emit (TdmTrainer *t, const TdmEvent *event);
/* tdm-trainer-events.c: STARTED; a sampled step's PHASES and BATCH; PREDICTIONS after
 * the evaluation that ended `epoch` (1-based). */
void tdm_trainer_emit_started (TdmTrainer *t);
void tdm_trainer_emit_step_detail (TdmTrainer *t);
void tdm_trainer_emit_predictions (TdmTrainer *t, int epoch);
/* A SETUP event for `phase` that has taken `seconds` so far. */
void tdm_trainer_emit_phase (TdmTrainer *t, TdmSetupPhase phase, gboolean done, long count,
                             long total, double seconds);
/* A SETUP event (tdm-events.h) for `phase`, begun at `since` (tdm_trainer_now_seconds). */
void tdm_trainer_emit_setup (TdmTrainer *t, TdmSetupPhase phase, gboolean done, long count,
                             long total, double since);

/* Failures from any thread: the first error is kept, the run's barriers and
 * communicator are broken so every thread gets out. _locked with abort_lock held. */
void tdm_trainer_abort_locked (TdmTrainer *t);
void tdm_trainer_fail_worker (TdmTrainer *t, GError *error);
gboolean tdm_trainer_aborted (TdmTrainer *t);

/* tdm-trainer-step.c: runs t->job on every local replica (FALSE with the first error
 * when one failed); a worker thread's body (takes a g_new'd WorkerArgs). */
gboolean tdm_trainer_run_all (TdmTrainer *t, GError **error);
gpointer tdm_trainer_worker_main (gpointer data);
/* Whether BN statistics are combined over replicas, and gradients all-reduced in
 * buckets during backward; the replica hooks for both. */
gboolean tdm_trainer_sync_bn (const TdmTrainer *t);
gboolean tdm_trainer_buckets_wanted (const TdmTrainer *t);
gboolean tdm_trainer_on_bn_reduce (TdmReplica *rep, float *buffer, size_t count, gpointer data);
void tdm_trainer_on_grads_ready (TdmReplica *rep, size_t offset, size_t count, gpointer data);

/* tdm-trainer-exact.c: exact mode's step (config->exact). The shard of rank's replica
 * in a batch of count (whole chunks in exact mode, tdm_shard_of() otherwise); the
 * fixed-point buffers; a replica's chunks computed and summed locally; the sum over
 * every replica turned into the step's gradients and running statistics; the training
 * metrics summed exactly. */
void tdm_trainer_shard (const TdmTrainer *t, int count, int rank, int *offset, int *size);
gboolean tdm_trainer_exact_setup (TdmTrainer *t, GError **error);
void tdm_trainer_exact_free (TdmTrainer *t);
void tdm_trainer_exact_compute (TdmTrainer *t, int r);
gboolean tdm_trainer_exact_combine (TdmTrainer *t, int r, GError **error);
gboolean tdm_trainer_exact_metrics (TdmTrainer *t, int r, double *loss, double *correct,
                                    GError **error);
/* One chunk's loss and correct count (training or evaluation), added exactly. */
void tdm_trainer_exact_add_metrics (TdmTrainer *t, int r, TdmMetrics m);

/* tdm-trainer-setup.c: everything a run needs before its first step (FALSE with the
 * reason), the seeded parameters broadcast to every replica, the worker threads'
 * end, and freeing it all (safe after a failed set-up). */
gboolean tdm_trainer_setup (TdmTrainer *t, GCancellable *cancellable, GError **error);
gboolean tdm_trainer_initialize_parameters (TdmTrainer *t, GError **error);
/* tdm-trainer-finetune.c: the normalization, --init's file (read and checked before
 * any work), frozen layers and learning-rate factors, once the network exists; then
 * each replica's and optimizer's share; --init's values over the seeded parameters
 * (and its BN statistics on every replica); freed at teardown. */
gboolean tdm_trainer_finetune_setup (TdmTrainer *t, GError **error);
void tdm_trainer_finetune_replica (TdmTrainer *t, int r);
void tdm_trainer_finetune_parameters (TdmTrainer *t, float *params);
void tdm_trainer_finetune_teardown (TdmTrainer *t);
/* tdm-trainer-options.c: the options' defaults, and their check before a run. */
void tdm_trainer_init_options (TdmTrainer *t);
gboolean tdm_trainer_check_options (TdmTrainer *t, GError **error);

/* The pre-warm (options.prewarm), after the parameters are initialized: it
 * ends with parameters, optimizer state, BN statistics, metrics and timing as it
 * found them. */
gboolean tdm_trainer_prewarm (TdmTrainer *t, GError **error);
void tdm_trainer_stop_workers (TdmTrainer *t);
void tdm_trainer_teardown (TdmTrainer *t);
/* A stop from the caller's GCancellable, on any thread. */
void tdm_trainer_on_cancelled (GCancellable *cancellable, gpointer data);
/* Whether other processes take part: then every decision that changes the sequence of
 * collectives (summaries, stopping) must be taken the same way on every rank. */
gboolean tdm_trainer_distributed (const TdmTrainer *t);
