/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-experiment-private.h — what a kind of experiment fills (tdm-experiment.h), and
 * the part every kind shares. Only engine/experiments/ includes it. */
#pragma once

#include "tdm-experiment.h"

G_BEGIN_DECLS

typedef struct {
  const char *stopped;          /* the error when stopped, N_() */
  /* A training the person stops is still reduced, and the experiment completes there
   * with what it had (tdm_experiment_get_stopped): the finder's curve so far. */
  gboolean keeps_stopped;
  /* Fills experiment->training (its config owned by the kind) for the next training;
   * FALSE when there is none. */
  gboolean (*next) (TdmExperiment *experiment);
  /* An event of the training under way (after the shared part took it in); may call
   * tdm_experiment_stop_training(). */
  void (*observe) (TdmExperiment *experiment, const TdmEvent *event);
  /* The training finished (reached its end); FALSE with the error to stop. */
  gboolean (*reduce) (TdmExperiment *experiment, const float *parameters, size_t count,
                      GError **error);
  char *(*dup_result) (const TdmExperiment *experiment);
  void (*finalize) (TdmExperiment *experiment);
} TdmExperimentClass;

struct _TdmExperiment {
  const TdmExperimentClass *klass;
  TdmExperimentKind kind;
  TdmConfig *config;            /* as started from */
  long steps;
  TdmExperimentTraining training;
  TdmConfig *training_config;   /* the training's, owned here */
  char *training_name, *training_status;
  int summary_steps;            /* tdm_experiment_run's trainers' */
  TdmClock span_clock;          /* likewise */
  gboolean under_way;           /* between next and reduce */
  gboolean over, complete;
  gboolean stopped_by_person;   /* it completed on a stopped training it keeps */
  /* What the training under way told of its end. */
  gboolean finished, stopped;
  gboolean stop_asked;          /* the experiment stopped it (its `stop`) */
  GError *failure;              /* the training's FAILED event's */
};

/* The shared part of a constructor: `experiment` (a kind's struct, zeroed, whose
 * first member is the TdmExperiment) with a copy of `config`. */
void tdm_experiment_init (TdmExperiment *experiment, const TdmExperimentClass *klass,
                          TdmExperimentKind kind, const TdmConfig *config, long steps);
/* The next training's fields: `config` taken, `name` and `status` copied. */
void tdm_experiment_set_training (TdmExperiment *experiment, TdmConfig *config,
                                  const char *name, const char *status,
                                  gboolean keep_parameters);
/* From a kind's observe, on the training's thread: the training has told enough; it
 * is stopped, and whatever its end, reduced as an outcome. */
void tdm_experiment_stop_training (TdmExperiment *experiment);
/* Checks shared by the comparisons: a valid configuration on two devices or more. */
gboolean tdm_experiment_check_devices (const TdmConfig *config, const char *what,
                                       GError **error);

G_END_DECLS
