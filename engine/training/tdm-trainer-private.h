/* tdm-trainer-private.h — the trainer's state, shared by tdm-trainer.c (the loop)
 * and tdm-trainer-checkpoint.c (saving and resuming). Not for anything else. */
#pragma once

#include "tdm-trainer.h"
#include "tdm-backend.h"
#include "tdm-barrier.h"
#include "tdm-communicator.h"
#include "tdm-dataset.h"
#include "tdm-iterator.h"
#include "tdm-network.h"
#include "tdm-optimizer.h"
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
  gboolean timed;               /* synchronize and time each phase */
  double origin;                /* JOB_TRAIN: seconds when the step was handed out */
  double stop_vote;             /* JOB_METRICS: this process wants to stop */
} Job;

typedef struct {
  double compute, comm, wait;   /* seconds over timed steps */
  double wall;                  /* seconds of timed steps, start to end */
  int timed_steps;
  TdmDevicePhases phases;       /* the last sampled step's phases */
  double forward_end;           /* seconds, set by the forward_done hook */
} Timing;

struct _TdmTrainer {
  TdmConfig *config;
  TdmEventSink sink;
  gpointer sink_data;
  char *resume_path;
  TdmClockFunc clock;
  gpointer clock_data;

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
  gulong cancel_handler;
  GCancellable *cancellable;
  volatile gint stop_requested; /* distributed runs: stop at the next summary vote */
  gboolean step_detail;         /* phases and batch split of sampled steps (default on) */
  int summary_steps;             /* > 0: summaries on this step grid, not by the clock */
  int32_t *predicted;           /* [test count]: each test sample's predicted class */

  /* Pace: under pause_lock. */
  double pace;                  /* steps per second at most; 0 for no limit */
  int single_steps;             /* steps still to run while paused */
  gint64 last_step_us;          /* on the trainer's clock, when the last step began */
};

/* The main replica's parameters into t->host_params (waits for its device). */
gboolean tdm_trainer_download_parameters (TdmTrainer *t, GError **error);
/* Writes config->save_path from the main replica, when there is one in this process. */
gboolean tdm_trainer_save_checkpoint (TdmTrainer *t, GError **error);
/* Puts the run where the checkpoint at path left it. */
gboolean tdm_trainer_restore_checkpoint (TdmTrainer *t, const char *path, GError **error);
