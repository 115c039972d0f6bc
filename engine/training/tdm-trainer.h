/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer.h — runs a data-parallel training job and reports it.
 *
 * The trainer owns the dataset, one replica per configured device, the communicator
 * and the optimizer. tdm_trainer_run() does all the work on the calling thread (the
 * GUI calls it from a worker GThread, the CLI from main) and reports through the sink
 * from that thread. Pause, resume and stop may be called from any thread and take
 * effect within a fraction of a second.
 */
#pragma once

#include <gio/gio.h>
#include "tdm-clock.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-events.h"
#include "tdm-field.h"

G_BEGIN_DECLS

typedef struct _TdmTrainer TdmTrainer;

/* Cheap: copies the configuration; nothing is loaded until run. */
TdmTrainer *tdm_trainer_new (const TdmConfig *config, TdmEventSink sink, gpointer user_data);
void tdm_trainer_free (TdmTrainer *trainer);

/* Continue from a checkpoint written by an earlier run of the same configuration:
 * parameters, optimizer state and iterator position are restored before the first
 * step, so the run goes on as if it had never stopped. */
void tdm_trainer_set_resume_path (TdmTrainer *trainer, const char *path);

/* Where a checkpoint's run stopped: epochs done, steps taken. */
typedef struct {
  int epoch;
  long step;
} TdmCheckpointPlace;

/* The configuration a checkpoint's run was made with (checked as saved values,
 * naming the file), for a run that resumes it: tandem-train --resume and the
 * window's Open both start from it. find_dataset: the dataset is looked for where the
 * checkpoint says it was (tdm_checkpoint_find_dataset()), for a resume given no other.
 * `place` (may be NULL) gets where it stopped. */
TdmConfig *tdm_trainer_checkpoint_config (const char *path, gboolean find_dataset,
                                          TdmCheckpointPlace *place, GError **error);

/* Trains on `data`, which the caller opened from the configuration's dataset and
 * keeps until the trainer is freed, instead of opening it again: a window then draws
 * the samples the run uses (thumbnails of a batch, of predictions) from the same
 * bytes, read-only, while the run trains on them. Set before run. */
void tdm_trainer_set_dataset(TdmTrainer *trainer, const TdmDatasetPair *data);

/* Loads the dataset, builds the replicas, trains for the configured epochs and
 * evaluates after each. Returns FALSE with the error (also sent as a FAILED event)
 * when something goes wrong; being stopped through `cancellable` is not an error:
 * it returns TRUE after a FINISHED event with stopped = TRUE. */
gboolean tdm_trainer_run (TdmTrainer *trainer, GCancellable *cancellable, GError **error);

/* The clock that paces step summaries and device figures and measures elapsed time
 * (monotonic microseconds); g_get_monotonic_time() unless a test sets another, so
 * the throttle can be tested by counting events instead of timing them. */
void tdm_trainer_set_clock (TdmTrainer *trainer, TdmClockFunc clock, gpointer user_data);
/* The clock that times the phases of sampled steps and the host's share of a step
 * (monotonic microseconds, read from every replica's thread, so thread-safe);
 * g_get_monotonic_time() unless a test sets one that ticks on each reading, so what a
 * step records can be checked without a span having to last a microsecond. */
void tdm_trainer_set_span_clock (TdmTrainer *trainer, TdmClockFunc clock,
                                 gpointer user_data);

/* Thread-safe. While paused, run() waits between steps (and a stop still works). */
void tdm_trainer_set_paused (TdmTrainer *trainer, gboolean paused);
gboolean tdm_trainer_get_paused (TdmTrainer *trainer);

/* A pre-warm before the training clock starts (not the learning rate's warm-up,
 * config->warmup_epochs): one step of each shard size the run has (a full batch and
 * an epoch's short last one), each once as a sampled step and once as a plain one (a GPU's captured graph), and one evaluation; then parameters,
 * optimizer state, BN running statistics and metrics are put back as if it had not
 * run (the steps use the first samples in order and draw their augmentation from
 * the counter streams, so nothing else moved). It takes a GPU's first-call costs off
 * the clock: cuBLAS loading its kernels for each GEMM shape, first touches of
 * buffers, about 0.36 s on an H200 for the resnet preset against 3 ms a later step.
 * AUTO, the default, pre-warms when any device is a GPU; CPU workers gain nothing
 * from it (bench/NOTES.md). */
typedef enum {
  TDM_PREWARM_AUTO,
  TDM_PREWARM_ON,
  TDM_PREWARM_OFF,
} TdmPrewarm;

/* How a trainer reports and prepares a run, besides the run's configuration (what it
 * computes). Each member is a row of the table in
 * tdm-trainer-options.c (its default and range): a trainer starts from the rows'
 * defaults, a caller changes what it needs through tdm_trainer_options() before run,
 * and tdm_trainer_run() checks every row first, failing with the name of the one out
 * of range. A new option is a member here, its row, and its meaning where the
 * trainer acts on it. */
typedef struct {
  /* Sampled steps also report their phases and batch split (PHASES and BATCH events;
   * on by default). Off only to measure what they cost (bench-phases). */
  gboolean step_detail;
  /* The pre-warm above. */
  TdmPrewarm prewarm;
  /* Step summaries every `summary_steps` steps (and at epoch ends) instead of every
   * ~50 ms, so two runs of one configuration record the same points and overlay
   * exactly (run history); 0, the default, goes by the clock. */
  int summary_steps;
  /* Also a step summary each time the epoch passes another 1/parts of its samples
   * (0, the default: none), so a log gets a progress line at every tenth of an
   * epoch however fast the steps go. */
  int summary_parts;
  /* A learning-rate range test's schedule (experiments/tdm-lr-find.h): step i of the
   * run (0-based) takes lr_range[0] · (lr_range[1] / lr_range[0])^(i / (steps − 1)),
   * whatever the configured schedule; and no evaluation at all (epoch events carry
   * NaN test figures). lr_range_steps 0, the default, turns it off. */
  double lr_range[2];
  int lr_range_steps;
  /* The batch was not chosen by the person (a default): where it is larger than the
   * training set, the run takes tdm_config_batch_fitting()'s instead of failing, and
   * its STARTED event names both (batch, batch_asked). Off by default. */
  gboolean batch_fits;
} TdmTrainerOptions;

/* The trainer's options, to read, or to change before run. */
TdmTrainerOptions *tdm_trainer_options (TdmTrainer *trainer);
/* Their rows (tdm-field.h), `n` set to how many. */

/* Pace, thread-safe: at most `steps_per_second` steps a second (0: as fast as it
 * goes), so a small network can be watched; measured on the trainer's clock. A pace
 * is between TDM_PACE_MIN and TDM_PACE_MAX (others are brought to the nearer end):
 * 10⁻⁹ steps a second would wait 30 years for the second step. */
#define TDM_PACE_MIN 0.01
#define TDM_PACE_MAX 100000.0
void tdm_trainer_set_pace (TdmTrainer *trainer, double steps_per_second);
double tdm_trainer_get_pace (TdmTrainer *trainer);

/* While paused: lets exactly one more step run, after which the run rests again (a
 * PAUSED event each time it comes to rest). Calls add up; ignored when not paused. */
void tdm_trainer_single_step (TdmTrainer *trainer);

/* After run: the main replica's parameters (host copy) and their count, for tests
 * and tools. NULL before a run has built the replicas. */
const float *tdm_trainer_get_parameters (TdmTrainer *trainer, size_t *count);
/* After run: local replica `replica`'s BN running statistics (host copy: each BN's
 * running means then variances, tdm-network.h's state layout) and their count; NULL
 * for a replica that is not there or before a run. */
const float *tdm_trainer_get_bn_state (TdmTrainer *trainer, int replica, size_t *count);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmTrainer, tdm_trainer_free)

G_END_DECLS
