/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-experiment.h — a run made of several trainings: a sequence of configurations
 * and a reducer.
 *
 * Every kind of multi-run work is one of these: the scaling sweep (the configuration
 * on 1, 2, … N devices, each timed a few times), "compare with one device" (the run
 * in exact mode on every device, then on its main device alone, their parameters
 * compared) and "compare strategies" (the run with `main`, then with `allreduce`,
 * their mean steps compared). An experiment does not train: a driver asks it for the
 * next training (tdm_experiment_next), trains it however it trains (tandem-train on
 * its own thread with tdm_experiment_run, the window as a TdmRun of its own), hands
 * every event of it to tdm_experiment_observe on the training's thread, and when the
 * training is over hands its outcome to tdm_experiment_reduce; the next training may
 * depend on what was reduced (a scaling point is timed again while its runs spread).
 * So the window and tandem-train run the same experiment code.
 *
 * A training may carry options of its own for the trainer (a learning-rate range, a
 * summary at every step: tdm_experiment_training_apply), and the experiment may stop
 * it from its observer once it has seen enough (the finder, once the loss diverged):
 * the training's `stop` is cancelled then, and drivers stop the training as they
 * would for the person, but its end is reduced as an outcome.
 *
 * A new kind: its constructor here, a file tdm-experiment-<kind>.c filling
 * TdmExperimentClass (tdm-experiment-private.h), its nick in TdmExperimentKind.
 */
#pragma once

#include <gio/gio.h>
#include "tdm-config.h"
#include "tdm-events.h"
#include "tdm-lr-find.h"
#include "tdm-scaling.h"
#include "tdm-trainer.h"

G_BEGIN_DECLS

typedef enum {
  TDM_EXPERIMENT_SCALING,      /*< nick=scaling >*/
  TDM_EXPERIMENT_COMPARE,      /*< nick=compare >*/
  TDM_EXPERIMENT_STRATEGIES,   /*< nick=compare-strategies >*/
  TDM_EXPERIMENT_LR_FIND,      /*< nick=lr-find >*/
} TdmExperimentKind;

/* "scaling", "compare", "compare-strategies", "lr-find": the commands of tandem-train,
 * and the names run files use. */
const char *tdm_experiment_kind_name (TdmExperimentKind kind);
gboolean tdm_experiment_kind_from_name (const char *name, TdmExperimentKind *kind);

typedef struct _TdmExperiment TdmExperiment;

/* One training of an experiment, valid until the next call of tdm_experiment_next. */
typedef struct {
  int index;                   /* 0, 1, … in the order they run */
  const TdmConfig *config;     /* what it trains (max_steps set) */
  /* Its name as a run of its own in the run history ("Compare: 2 devices"), in the
   * reader's language; NULL for a measurement that is not a run of its own (a scaling
   * point's), which the window neither draws nor keeps. */
  const char *name;
  const char *status;          /* what it does, for a status line ("Training with main…") */
  gboolean keep_parameters;    /* the reducer reads the main replica's final parameters */
  /* The trainer's options beyond the driver's (tdm_experiment_training_apply): step
   * summaries every `summary_steps` steps (0: the driver's choice), a learning-rate
   * range test's schedule (TdmTrainerOptions.lr_range; lr_range_steps 0: none). */
  int summary_steps;
  double lr_range[2];
  int lr_range_steps;
  /* Cancelled, on the training's thread, when the experiment has seen enough of the
   * training: the driver stops it then (a cancellable of its own tied to this one). */
  GCancellable *stop;
} TdmExperimentTraining;

/* Sets what `training` asks of the trainer in `options` (before the trainer runs). */
void tdm_experiment_training_apply (const TdmExperimentTraining *training,
                                    TdmTrainerOptions *options);

/* Scaling: `config` on its first n devices for n = 1 … its device count, `steps` steps
 * each (after a short warm-up run), TDM_SCALING_RUNS times or more (see
 * TdmScalingPoint), one BLAS thread per CPU worker at every n; weak scaling takes
 * config->batch / devices (rounded up) per device. tandem-train scaling runs it with
 * tdm_experiment_run, the window with its runner. FALSE-like NULL with the error when
 * the configuration is not valid. */
TdmExperiment *tdm_experiment_new_scaling (const TdmConfig *config, TdmScalingMode mode,
                                           long steps, GError **error);
/* Steps a comparison's runs take unless told otherwise (the window's and
 * tandem-train's default). Short, for the runs that are not in exact mode (compare
 * strategies as set): float rounding stays at ~1e-7 between N devices and one over
 * the first hundred or so steps; past that Adam can magnify it (a small net on the
 * synthetic set: 1.1e-6 after 100 steps, 5.4e-2 after 200, while SGD stayed at
 * 1.2e-6), which is true of any two summation orders and says nothing of data
 * parallelism. */
#define TDM_COMPARE_STEPS 50

/* Compare with one device: `config` in exact mode for `steps` steps on its devices,
 * then its one-device twin (tdm-compare.h). At least two devices. */
TdmExperiment *tdm_experiment_new_compare (const TdmConfig *config, long steps,
                                           GError **error);
/* Compare strategies: `config` for `steps` steps with `main`, then with `allreduce`
 * (exact mode or not, as it is set), keeping no checkpoint. At least two devices. */
TdmExperiment *tdm_experiment_new_strategies (const TdmConfig *config, long steps,
                                              GError **error);
/* Learning-rate finder (tdm-lr-find.h): one training of `config` whose rate grows
 * exponentially over `options` (NULL: the defaults), a summary at every step; it stops
 * itself once the smoothed loss diverges, and a training the person stops still gives
 * its curve. FALSE-like NULL with the error when the options or the configuration are
 * not valid. */
TdmExperiment *tdm_experiment_new_lr_find (const TdmConfig *config,
                                           const TdmLrFindOptions *options, GError **error);
void tdm_experiment_free (TdmExperiment *experiment);

TdmExperimentKind tdm_experiment_get_kind (const TdmExperiment *experiment);
/* The configuration it started from. */
const TdmConfig *tdm_experiment_get_config (const TdmExperiment *experiment);
/* Steps each training takes (a scaling point's timed runs; the comparisons' runs). */
long tdm_experiment_get_steps (const TdmExperiment *experiment);

/* The next training, or NULL once the experiment is over. Not while one is under
 * way (between next and reduce). */
const TdmExperimentTraining *tdm_experiment_next (TdmExperiment *experiment);
/* The training under way (between next and reduce), or NULL. */
const TdmExperimentTraining *tdm_experiment_get_training (const TdmExperiment *experiment);
/* A TdmEventSink (`experiment` is the TdmExperiment): every event of the training
 * under way, on the thread that trains it, in order; nothing else touches the
 * experiment meanwhile. */
void tdm_experiment_observe (const TdmEvent *event, gpointer experiment);
/* The training under way is over and its thread done with the experiment;
 * `parameters` are its main replica's final ones when the training asked to keep
 * them (else NULL). FALSE with the error when the experiment cannot go on: the
 * training failed, was stopped before its end (TDM_ENGINE_ERROR_CANCELLED), or its
 * outcome is of no use (a scaling point too short to time); it is over then. */
gboolean tdm_experiment_reduce (TdmExperiment *experiment, const float *parameters,
                                size_t count, GError **error);
/* Whether every training is done and reduced (FALSE after a failure). */
gboolean tdm_experiment_is_complete (const TdmExperiment *experiment);
/* Whether it completed because the person stopped a training that its kind keeps
 * (the finder's): its result is then of what that training had done. */
gboolean tdm_experiment_get_stopped (const TdmExperiment *experiment);
/* The result in the reader's language, once complete ("2 devices against one, after
 * 300 steps: identical: 0 of 421642 values differ"; "main · 4.25 ms a step;
 * allreduce · 3.90 ms a step"; "2 points measured"); NULL before. */
char *tdm_experiment_dup_result (const TdmExperiment *experiment);

/* Scaling: strong or weak. */
TdmScalingMode tdm_experiment_get_scaling_mode (const TdmExperiment *experiment);
/* Scaling: each point once measured, on the thread that reduces (set before the first
 * training). */
void tdm_experiment_set_point_sink (TdmExperiment *experiment, TdmScalingSink sink,
                                    gpointer user_data);

/* Compare with one device, once complete: the relative difference of the two runs'
 * parameters (tdm_compare_parameters), and how many values differ in any bit; NaN
 * and 0 before. */
double tdm_experiment_get_difference (const TdmExperiment *experiment,
                                      size_t *differing, size_t *count);

/* Compare strategies: one run's mean sampled step. */
typedef struct {
  TdmStrategy strategy;
  int replicas;
  int samples;                 /* sampled steps the means are over (the first left
                                * out where more came) */
  double step_ms;              /* from the step's start to the last device's end */
  /* Each device's communication after its backward pass, and what ran hidden under
   * it (TdmDevicePhases.hidden_ms), ms a step. */
  double exposed_ms[TDM_MAX_REPLICAS];
  double hidden_ms[TDM_MAX_REPLICAS];
} TdmStrategyFigures;

/* The figures of the runs done so far (0, 1 or 2), in the order they ran. */
const TdmStrategyFigures *tdm_experiment_get_strategies (const TdmExperiment *experiment,
                                                         int *count);

/* The finder: its range, its points so far (valid on the thread that trains until the
 * training is reduced, then anywhere until the experiment is freed), the suggested
 * rate (NaN: none, or not reduced yet) and whether its loss diverged. */
const TdmLrFindOptions *tdm_experiment_get_lr_options (const TdmExperiment *experiment);
const TdmLrFindPoint *tdm_experiment_get_lr_points (const TdmExperiment *experiment,
                                                    int *count);
double tdm_experiment_get_lr_suggestion (const TdmExperiment *experiment);
gboolean tdm_experiment_get_lr_diverged (const TdmExperiment *experiment);
/* The finder: each point as measured, on the thread that trains (set before the
 * training starts). */
void tdm_experiment_set_lr_point_sink (TdmExperiment *experiment, TdmLrFindFunc sink,
                                       gpointer user_data);

/* Steps between the step summaries of tdm_experiment_run's trainings (0, the default:
 * by the clock; TdmTrainerOptions.summary_steps), for trainings kept in a history. */
void tdm_experiment_set_summary_steps (TdmExperiment *experiment, int steps);

/* The span clock of tdm_experiment_run's trainers (tdm_trainer_set_span_clock):
 * NULL, the default, for the monotonic one. */
void tdm_experiment_set_span_clock (TdmExperiment *experiment, TdmClockFunc clock,
                                    gpointer user_data);

/* Runs the whole experiment on the calling thread: each training by a TdmTrainer,
 * its events to tdm_experiment_observe and then to `sink` (may be NULL), its outcome
 * to tdm_experiment_reduce. FALSE with the error when a training or a reduction
 * failed, or TDM_ENGINE_ERROR_CANCELLED when `cancellable` was cancelled (unless the
 * kind keeps a stopped training: then TRUE, tdm_experiment_get_stopped). */
gboolean tdm_experiment_run (TdmExperiment *experiment, TdmEventSink sink,
                             gpointer user_data, GCancellable *cancellable, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmExperiment, tdm_experiment_free)

G_END_DECLS
