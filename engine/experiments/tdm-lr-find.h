/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-lr-find.h — the learning-rate range test (Smith, "Cyclical Learning Rates for
 * Training Neural Networks", 2017; fastai's and Lightning's lr_find): a short run of
 * the configured training whose rate grows exponentially from a tiny one to a large
 * one, one step at each, its loss smoothed; where the smoothed loss falls fastest is
 * the suggested rate. Nothing is saved and nothing is evaluated: the run's settings
 * stay the person's, the test set untouched. tandem-train --lr-find prints it as CSV,
 * the window plots it.
 */
#pragma once

#include <gio/gio.h>
#include "tdm-config.h"
#include "tdm-events.h"

G_BEGIN_DECLS

typedef struct {
  double lr_first, lr_last;     /* the range, lr_first < lr_last (default 1e-7, 10) */
  int steps;                    /* steps over it, at least 5 (default 100) */
} TdmLrFindOptions;

#define TDM_LR_FIND_FIRST 1e-7
#define TDM_LR_FIND_LAST 10.0
#define TDM_LR_FIND_STEPS 100

typedef struct {
  int step;                     /* 1-based */
  double lr;
  double loss;                  /* the step's training loss */
  double smoothed;              /* its exponential average (0.98), bias-corrected */
} TdmLrFindPoint;

/* Called on the training thread with each point as it is measured. */
typedef void (*TdmLrFindFunc) (const TdmLrFindPoint *point, gpointer user_data);

typedef struct _TdmLrFinder TdmLrFinder;

/* A range test of `config` (its network, data, devices, batch, optimizer; its
 * schedule, checkpoints, validation and step limit are set aside). */
TdmLrFinder *tdm_lr_finder_new (const TdmConfig *config, const TdmLrFindOptions *options);
void tdm_lr_finder_free (TdmLrFinder *finder);

/* The training's own events (set-up, memory, steps), passed on as they come. */
void tdm_lr_finder_set_sink (TdmLrFinder *finder, TdmEventSink sink, gpointer user_data);
void tdm_lr_finder_set_point_func (TdmLrFinder *finder, TdmLrFindFunc func,
                                   gpointer user_data);

/* Runs the test on the calling thread. It ends after options->steps steps, or
 * earlier when the smoothed loss passes four times its lowest (or stops being a
 * number): the rates beyond tell nothing more. FALSE with the training's error when
 * it could not run; a cancelled test keeps its points and returns TRUE. */
gboolean tdm_lr_finder_run (TdmLrFinder *finder, GCancellable *cancellable, GError **error);

const TdmLrFindPoint *tdm_lr_finder_get_points (TdmLrFinder *finder, int *count);
/* The rate where the smoothed loss falls fastest against log(lr), before its lowest
 * point: the suggestion; NaN when the loss never fell. */
double tdm_lr_finder_get_suggestion (TdmLrFinder *finder);
/* Whether the test ended early because the loss diverged. */
gboolean tdm_lr_finder_diverged (TdmLrFinder *finder);

/* The suggestion from points[0, count) alone (the rule above), for tests and files. */
double tdm_lr_find_suggest (const TdmLrFindPoint *points, int count);

/* The points as CSV: a header "step,lr,loss,smoothed_loss" and one line each, numbers
 * in the C locale. Free with g_free(). */
char *tdm_lr_find_to_csv (const TdmLrFindPoint *points, int count);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmLrFinder, tdm_lr_finder_free)

G_END_DECLS
