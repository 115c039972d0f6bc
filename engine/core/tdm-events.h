/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-events.h — what the trainer reports, as plain structs.
 *
 * The trainer fills one TdmEvent at a time on its own thread and hands it to the
 * sink, which must copy what it keeps (the GUI marshals a copy to the main loop; the
 * CLI prints it). Nothing here points into the trainer's state after the call.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "tdm-device-id.h"
#include "tdm-precision.h"

G_BEGIN_DECLS

typedef enum {
  TDM_EVENT_MEMORY,
  TDM_EVENT_STARTED,
  TDM_EVENT_STEP,
  TDM_EVENT_DEVICES,
  TDM_EVENT_EPOCH,
  TDM_EVENT_PAUSED,
  TDM_EVENT_RESUMED,
  TDM_EVENT_FINISHED,
  TDM_EVENT_FAILED,
  TDM_EVENT_PHASES,
  TDM_EVENT_BATCH,
  TDM_EVENT_PREDICTIONS,
  TDM_EVENT_SAVED,
  TDM_EVENT_SETUP,
} TdmEventKind;

typedef struct {
  int replicas;
  int main_replica;
  char device[TDM_MAX_REPLICAS][32];   /* "cpu", "cuda:0" per replica, for people */
  int shard[TDM_MAX_REPLICAS];         /* samples per replica in a full batch */
  int batch;                           /* a micro-batch's, with accumulate > 1 */
  int accumulate;                      /* micro-batches an optimizer step (1: none) */
  int epochs;
  int steps_per_epoch;
  long total_steps;
  long start_step;                     /* > 0 when resumed */
  size_t parameters;                   /* parameter count */
  char network[256];                   /* the expanded spec; a longer one is cut after
                                        * an item and ends in "…" */
  char dataset[128];
  int train_count, test_count;
  char notice[1024];                   /* files the dataset skipped, or "" */
  char init_report[1024];              /* what --init loaded and skipped, or "" */
  int prewarm_steps;                   /* untimed steps before the clock (0: none) */
  double prewarm_seconds;              /* what they took, evaluation included */
  int cpu_threads;                     /* BLAS threads each CPU worker runs (0: none) */
  long end_step;                       /* where the run ends: total_steps, or --max-steps */
  /* GPU sharing, so no reader parses "cuda:N": how many replicas run on this
   * replica's GPU (itself included; 0 on the CPU, so a zeroed event reads as CPUs)
   * and, where that is > 0, its CUDA ordinal (-1 on the CPU). */
  int gpu[TDM_MAX_REPLICAS];
  int gpu_replicas[TDM_MAX_REPLICAS];
  int height, width, channels;         /* a sample's shape (an image folder's as chosen) */
  /* The batch the run was asked for, when the trainer had to choose a smaller one
   * (TdmTrainerOptions.batch_fits); 0 otherwise. */
  int batch_asked;
  /* The convolution engines' choices after the pre-warm, summed over the replicas:
   * shapes × directions that went to cuDNN, to Tandem's own kernels, to im2col with a
   * GEMM (all 0 where no backend has an engine: the CPU). */
  int conv_cudnn, conv_own, conv_im2col, conv_cudnn_fused;
  /* What the run computes in (never auto; a zeroed event reads as fp32), whether it was
   * asked for auto, and then why, in words ("every device has bfloat16 tensor cores",
   * "cpu has no bfloat16 tensor cores"), else "". */
  TdmPrecision precision;
  gboolean precision_auto;
  char precision_why[160];
} TdmStartedEvent;

/* What the GPU replicas' column workspace is sized by in a memory event: no engine
 * chooses (every replica on the CPU: its own columns, exact); the widest layer's
 * columns, before the convolutions are chosen (an upper bound); the chosen ways' need
 * (after the pre-warm, or remembered from an earlier run of the configuration). */
typedef enum {
  TDM_WORKSPACE_COLUMNS,
  TDM_WORKSPACE_UPPER_BOUND,
  TDM_WORKSPACE_CHOSEN,
} TdmWorkspaceBasis;

const char *tdm_workspace_basis_name (TdmWorkspaceBasis basis);

/* The memory estimate (tdm-memory.h), sent before anything large is allocated; and
 * again after the pre-warm where GPU replicas' workspaces were sized by their choices. */
typedef struct {
  char device[32];
  int shard;                /* samples per step in a full batch */
  gboolean host;            /* a CPU worker: these bytes are host memory */
  guint64 parameters, gradients;
  guint64 optimizer;        /* state; with `main`, on the main device only */
  guint64 activations;      /* at the replica's capacity (shard or evaluation chunk) */
  guint64 workspace;        /* convolution columns, pool indices, gradient buffers,
                             * and a GPU backend's own (cuBLAS workspace, scratch) */
  guint64 dataset;          /* the device's copy of both splits, uint8 */
  guint64 communication;    /* communicator staging buffers */
  guint64 total;
} TdmMemoryDevice;

typedef struct {
  int replicas;
  int batch;
  int capacity;             /* samples each replica holds activations for (a shard) */
  int eval_capacity;        /* samples an evaluation chunk holds (the first replica's) */
  TdmMemoryDevice device[TDM_MAX_REPLICAS];
  guint64 host_dataset;     /* the host's copy of both splits */
  guint64 host_copies;      /* parameters, checkpoint buffers, the shuffled order,
                             * exact mode's sums */
  guint64 host_devices;     /* CPU workers' replicas and optimizers */
  guint64 host_total;       /* all of the above */
  guint64 gpu_total;        /* summed over GPU replicas */
  guint64 host_available;   /* what the host had left, G_MAXUINT64 if unknown */
  int largest_batch;        /* the largest batch whose host needs fit, or −1 */
  TdmWorkspaceBasis workspace_basis;
} TdmMemoryEvent;

typedef struct {
  long step;                /* steps done since the run began */
  int epoch;                /* 0-based epoch in progress */
  double fraction;          /* of the whole run, 0..1 */
  double epoch_float;       /* epochs done as a real number */
  double train_loss;        /* mean since the last summary */
  double train_accuracy;    /* 0..1, since the last summary */
  double epoch_loss;        /* mean over the epoch so far (Keras's running figure) */
  double epoch_accuracy;    /* 0..1, over the epoch so far */
  double samples_per_second; /* over the last second of training time (since the start
                             * before that): one summary covers 1–3 steps, too few */
  double lr;
  double elapsed;           /* seconds of training (pauses excluded) */
  double eta;               /* seconds left, estimated */
  double grad_norm;         /* the last step's gradient norm before clipping, where
                             * --clip-grad-norm measures it; NaN otherwise */
} TdmStepEvent;

typedef struct {
  long step;
  double elapsed;
  int replicas;
  struct {
    double compute_ms;      /* forward, backward, update: mean per step */
    double comm_ms;         /* reductions and broadcasts */
    double wait_ms;         /* waiting for the other replicas */
    gint64 tandem_bytes;    /* held by Tandem on this device */
    gint64 peak_bytes;      /* the most it has held there at once, pre-warm included */
    gint64 used_bytes;      /* in use on the device in total, −1 if unknown */
    gint64 total_bytes;     /* capacity, −1 if unknown */
    double utilization;     /* 0..100, −1 if unknown */
    double temperature;     /* °C, −1 if unknown */
    double power;           /* W, −1 if unknown */
    int operations_per_step;/* kernels (or CPU operations) a step runs, update included:
                             * the two below summed */
    double host_operations; /* of them, issued from the host a step (mean; a graph's
                             * launch is one) */
    double graph_operations;/* of them, run from a captured graph a step (mean) */
    double issue_ms;        /* the host's time issuing a step it does not wait for
                             * (mean); NaN when none was */
  } device[TDM_MAX_REPLICAS];
} TdmDevicesEvent;

typedef struct {
  int epoch;                /* 1-based: the epoch just finished */
  long step;
  double train_loss, train_accuracy;   /* over the whole epoch */
  double test_loss, test_accuracy;
  double elapsed;
  double val_loss, val_accuracy;       /* the held-out split's (--val-split), or NaN */
} TdmEpochEvent;

typedef struct {
  long steps;
  double elapsed;           /* seconds of training, as STEP's (pauses excluded) */
  double test_loss, test_accuracy;
  gboolean stopped;         /* TRUE when stopped before the last epoch */
  /* Early stopping (config->early_stop) ended the run after best_epoch's monitored
   * metric went unbeaten; a normal end, not a stop. */
  gboolean early_stopped;
  int epochs_done;          /* the last epoch that ended (1-based; 0: none) */
  int best_epoch;           /* 1-based: the best by the monitored metric (config->monitor);
                             * 0 when it was never measured (no validation split) */
  int monitor;              /* TdmMonitor: what best_epoch was chosen by */
  double best_value;        /* that metric at best_epoch */
  double best_accuracy;     /* best_epoch's validation accuracy (NaN: no split) */
  double best_val_loss;     /* its validation loss */
  double best_test_loss, best_test_accuracy;
} TdmFinishedEvent;

/* "stopped early at epoch 9 (best 6)" for an early-stopped run's outcome, in the
 * reader's language or (`translated` FALSE, for programs) in English: the CLI's
 * summary and run listings and the window's History say it so. NULL for other runs.
 * Free with g_free(). */
char *tdm_finished_early_stop_text (const TdmFinishedEvent *finished, gboolean translated);

/* What a device does during a step, in the order a step does it. Communication has
 * one phase per collective so that the `main` strategy's reduce → update on the main
 * device → broadcast reads as such. */
typedef enum {
  TDM_PHASE_FORWARD,
  TDM_PHASE_BACKWARD,
  TDM_PHASE_REDUCE,
  TDM_PHASE_ALLREDUCE,
  TDM_PHASE_BROADCAST,
  TDM_PHASE_UPDATE,
  TDM_PHASE_WAIT,          /* at a barrier, for the other replicas */
  TDM_PHASE_ACCUMULATE,    /* a micro-batch's gradients added locally, where a step
                            * without --accumulate would communicate (DDP's no_sync) */
  TDM_PHASE_COUNT,
} TdmPhase;

/* Room for a step of several micro-batches: each takes three spans (forward,
 * backward, accumulate), the last and its collectives up to eight. */
#define TDM_MAX_PHASE_SPANS 32

/* One sampled step, per device: its phases as start/end times in milliseconds from
 * the moment the step was handed to the replicas (the same origin for all of them).
 * Sent for the steps the trainer times anyway (about one per step summary). */
typedef struct {
  int spans;
  struct {
    float start_ms, end_ms;
    int phase;              /* TdmPhase */
  } span[TDM_MAX_PHASE_SPANS];
  /* What the step's collectives moved out of and into the device (gradients,
   * parameters, synchronized BN's sums), by the communicator's algorithm: see
   * tdm_communicator_allreduce(). */
  guint64 bytes_sent, bytes_received;
  /* Communication in flight while backward still ran: the bucketed all-reduce's
   * (its spans above are only the part left to wait for after backward). CPU workers'
   * communication threads count the time they had a bucket under way; on a GPU it is
   * from the first bucket's launch to backward's end. 0 where every collective starts
   * after backward (the `main` strategy, exact mode, one bucket). */
  float hidden_ms;
} TdmDevicePhases;

typedef struct {
  long step;                /* the step's number, 1-based */
  int replicas;
  TdmDevicePhases device[TDM_MAX_REPLICAS];
} TdmPhasesEvent;

#define TDM_BATCH_SAMPLES_SHOWN 8

/* How one batch was split: each device's contiguous shard of the global batch and
 * the first few of its samples (indices into the training set, with their labels),
 * so a window can draw them. Sent with the timed steps, like TdmPhasesEvent. */
typedef struct {
  long step;
  int batch;                /* samples in this batch (the last one may be short) */
  int replicas;
  struct {
    int offset, size;       /* the shard: batch positions [offset, offset + size) */
    int shown;              /* entries used below, ≤ TDM_BATCH_SAMPLES_SHOWN */
    int32_t index[TDM_BATCH_SAMPLES_SHOWN];
    uint8_t label[TDM_BATCH_SAMPLES_SHOWN];
  } device[TDM_MAX_REPLICAS];
} TdmBatchEvent;

#define TDM_MAX_CONFUSION_CLASSES 32
#define TDM_PREDICTION_SAMPLES 32
/* Bytes of a class's name, its end included: room for a class folder's real name
 * (ImageNet's longest labels are ~40 bytes; 21 characters of Japanese), cut at a
 * character's edge where it is longer. */
#define TDM_CLASS_NAME_SIZE 64

/* The test set's predictions after an evaluation: the confusion matrix (rows the true
 * class, columns the predicted one) and a bounded list of test samples, mistakes
 * first, in test-set order within each group. Datasets with more than
 * TDM_MAX_CONFUSION_CLASSES classes get the list but no matrix (has_matrix FALSE). */
typedef struct {
  int epoch;                /* 1-based, as TdmEpochEvent */
  long step;
  int classes;
  gboolean has_matrix;
  int test_count;
  int correct;              /* the diagonal's sum */
  char class_name[TDM_MAX_CONFUSION_CLASSES][TDM_CLASS_NAME_SIZE];   /* "" when unnamed */
  int32_t matrix[TDM_MAX_CONFUSION_CLASSES][TDM_MAX_CONFUSION_CLASSES];
  int samples;              /* entries used below */
  struct {
    int32_t index;          /* into the test set */
    uint8_t truth, predicted;
  } sample[TDM_PREDICTION_SAMPLES];
} TdmPredictionsEvent;

/* A checkpoint written and renamed into place: after an epoch, every --save-every
 * steps, at the end of the run, and the best epoch's copy (--save-best). */
typedef struct {
  long step;
  int epoch;                /* epochs done when it was written */
  gboolean best;            /* the best epoch so far by the monitored metric */
  int monitor;              /* with best: TdmMonitor, what `value` is */
  double value;             /* with best: that metric's value */
  char path[4096];
} TdmSavedEvent;

/* The slow phases outside the training steps, so a log does not go quiet: decoding
 * an image folder (count of total files), building the replicas, the pre-warm, and
 * each evaluation of the test set or the validation split (count of total samples).
 * Each set-up phase sends a first event (done FALSE), possibly some with counts, and
 * a last one (done TRUE) with the seconds it took. An evaluation says nothing until
 * it has run TDM_EVALUATION_QUIET_S on the trainer's clock, then sends its progress
 * every so often and, having said anything, its end. */
typedef enum {
  TDM_SETUP_DATASET,
  TDM_SETUP_NETWORK,
  TDM_SETUP_PREWARM,
  TDM_SETUP_EVALUATION,
  TDM_SETUP_VALIDATION,
} TdmSetupPhase;

#define TDM_EVALUATION_QUIET_S 2.0

typedef struct {
  int phase;                /* TdmSetupPhase */
  gboolean done;
  long count, total;        /* items so far and in all (files decoded); 0 if no count */
  double seconds;           /* since the phase began */
} TdmSetupEvent;

typedef struct {
  TdmEventKind kind;
  union {
    TdmMemoryEvent memory;
    TdmStartedEvent started;
    TdmStepEvent step;
    TdmDevicesEvent devices;
    TdmEpochEvent epoch;
    TdmFinishedEvent finished;
    TdmPhasesEvent phases;
    TdmBatchEvent batch;
    TdmPredictionsEvent predictions;
    TdmSavedEvent saved;
    TdmSetupEvent setup;
    const GError *failed;   /* valid only during the call: copy it */
  };
} TdmEvent;

/* How much of a device's communication in a step ran hidden under its backward pass,
 * in percent: `hidden_ms` over itself plus the communication left exposed
 * (`exposed_ms`: the reduce, all-reduce and broadcast spans). NaN where the step
 * communicated nothing. The one rule for the phase table, --json and the run files. */
double tdm_overlap_percent (double exposed_ms, double hidden_ms);
/* The same for one device's sampled step. */
double tdm_device_phases_overlap (const TdmDevicePhases *device);
/* Fills replicas, device[] (the names), gpu[] and gpu_replicas[] from the run's
 * devices (the trainer, the window's views of a recorded run, tests). */
void tdm_started_event_set_devices (TdmStartedEvent *started, const TdmDeviceId *devices,
                                    int count);

/* "forward", "all-reduce", … for labels, legends and JSON. */
const char *tdm_phase_name (TdmPhase phase);

/* "dataset", "network", "prewarm" for JSON. */
const char *tdm_setup_phase_name (TdmSetupPhase phase);

/* Adds the members of a phases, batch or predictions event ("type" first) to an
 * open JSON object; FALSE, adding nothing, for the other kinds. */
typedef struct _JsonBuilder JsonBuilder;
gboolean tdm_event_detail_to_json (JsonBuilder *builder, const TdmEvent *event);

typedef void (*TdmEventSink) (const TdmEvent *event, gpointer user_data);

G_END_DECLS
