/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-lr-find.h — the learning-rate range test (Smith, "Cyclical Learning Rates for
 * Training Neural Networks", 2017; fastai's and Lightning's lr_find): a short run of
 * the configured training whose rate grows exponentially from a tiny one to a large
 * one, one step at each, its loss smoothed; where the smoothed loss falls fastest is
 * the suggested rate. Nothing is saved and nothing is evaluated: the run's settings
 * stay the person's, the test set untouched.
 *
 * The test is an experiment of one training (tdm_experiment_new_lr_find,
 * tdm-experiment-lr-find.c), run by tandem-train lr-find and the window's finder as
 * any other; here are its options, its points, and the rules that read them.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  double lr_first, lr_last;     /* the range, 0 < lr_first < lr_last (default 1e-7, 10) */
  int steps;                    /* steps over it, at least TDM_LR_FIND_STEPS_MIN
                                 * (default 100) */
} TdmLrFindOptions;

#define TDM_LR_FIND_FIRST 1e-7
#define TDM_LR_FIND_LAST 10.0
#define TDM_LR_FIND_STEPS 100
#define TDM_LR_FIND_STEPS_MIN 5
#define TDM_LR_FIND_STEPS_MAX 100000

typedef struct {
  int step;                     /* 1-based */
  double lr;
  double loss;                  /* the step's training loss */
  double smoothed;              /* its exponential average (0.98), bias-corrected */
} TdmLrFindPoint;

/* Called with each point as it is measured. */
typedef void (*TdmLrFindFunc) (const TdmLrFindPoint *point, gpointer user_data);

/* FALSE with the error (naming the range or the steps) when `options` cannot run. */
gboolean tdm_lr_find_check (const TdmLrFindOptions *options, GError **error);

/* The suggestion from points[0, count): the rate where the smoothed loss falls fastest
 * against log(lr), before its lowest point; NaN when the loss never fell. */
double tdm_lr_find_suggest (const TdmLrFindPoint *points, int count);

/* The points as CSV: a header "step,lr,loss,smoothed_loss" and one line each, numbers
 * in the C locale. Free with g_free(). */
char *tdm_lr_find_to_csv (const TdmLrFindPoint *points, int count);

G_END_DECLS
