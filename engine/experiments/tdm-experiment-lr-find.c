/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-experiment-lr-find.c — the learning-rate range test as an experiment
 * (tdm-lr-find.h, tdm-experiment.h): one training of the configuration with the range
 * as its schedule and a summary at every step, whose step events become the points as
 * they come, smoothed as fastai smooths them; the experiment stops the training once
 * the smoothed loss passes four times its lowest or stops being a number, the rates
 * beyond telling nothing more. A training the person stops keeps its points: the
 * curve so far is the result.
 */
#include "tdm-experiment-private.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <math.h>

/* fastai's smoothing and divergence rule. */
#define SMOOTHING 0.98
#define DIVERGED 4.0

typedef struct {
  TdmExperiment parent;
  TdmLrFindOptions options;
  GArray *points;               /* TdmLrFindPoint */
  double average, lowest;
  gboolean diverged;
  double suggestion;            /* once reduced */
  TdmLrFindFunc sink;
  gpointer sink_data;
} LrFind;

static gboolean
lr_find_next(TdmExperiment *e)
{
  LrFind *f = (LrFind *)e;
  if (e->training.index > 0)
    return FALSE;
  TdmConfig *c = tdm_config_copy(e->config);
  /* Only what a step computes matters: no files, no held-out split, no watchers, and
   * enough epochs that the steps fit whatever the epoch's length. */
  g_clear_pointer(&c->save_path, g_free);
  g_clear_pointer(&c->save_best_path, g_free);
  c->save_every = 0;
  c->early_stop = 0;
  c->val_split = 0;
  c->schedule = TDM_SCHEDULE_CONSTANT;
  c->warmup_epochs = 0;
  c->max_steps = f->options.steps;
  c->epochs = MAX(c->epochs, f->options.steps);
  /* Translators: the learning-rate finder's progress; the first and last rate */
  g_autofree char *status = g_strdup_printf(_("Testing rates from %g to %g…"),
                                            f->options.lr_first, f->options.lr_last);
  tdm_experiment_set_training(e, c, NULL, status, FALSE);
  e->training.summary_steps = 1;
  e->training.lr_range[0] = f->options.lr_first;
  e->training.lr_range[1] = f->options.lr_last;
  e->training.lr_range_steps = f->options.steps;
  g_array_set_size(f->points, 0);
  f->average = 0;
  f->lowest = INFINITY;
  f->diverged = FALSE;
  return TRUE;
}

static void
lr_find_observe(TdmExperiment *e, const TdmEvent *event)
{
  LrFind *f = (LrFind *)e;
  /* A loss that became NaN or infinite, which the trainer calls divergence, is where
   * the test ends, not a failure of it, once there are points to read. */
  if (event->kind == TDM_EVENT_FAILED && f->points->len > 0 &&
      g_error_matches(event->failed, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DIVERGED)) {
    f->diverged = TRUE;
    tdm_experiment_stop_training(e);
    return;
  }
  if (event->kind != TDM_EVENT_STEP || f->diverged)
    return;
  const TdmStepEvent *s = &event->step;
  int n = (int)f->points->len;
  TdmLrFindPoint p = {.step = (int)s->step, .lr = s->lr, .loss = s->train_loss};
  f->average = SMOOTHING * f->average + (1 - SMOOTHING) * p.loss;
  p.smoothed = f->average / (1 - pow(SMOOTHING, n + 1));
  g_array_append_val(f->points, p);
  if (f->sink != NULL)
    f->sink(&p, f->sink_data);
  if (n == 0 || p.smoothed < f->lowest)
    f->lowest = p.smoothed;
  if (!isfinite(p.smoothed) || (n > 0 && p.smoothed > DIVERGED * f->lowest)) {
    f->diverged = TRUE;
    tdm_experiment_stop_training(e);
  }
}

static gboolean
lr_find_reduce(TdmExperiment *e, const float *parameters, size_t count, GError **error)
{
  LrFind *f = (LrFind *)e;
  f->suggestion = tdm_lr_find_suggest((const TdmLrFindPoint *)f->points->data,
                                      (int)f->points->len);
  return TRUE;
}

static char *
lr_find_dup_result(const TdmExperiment *e)
{
  const LrFind *f = (const LrFind *)e;
  int n = (int)f->points->len;
  const char *end = f->diverged ? _(", ended where the loss diverged")
                    : e->stopped_by_person ? _(", stopped")
                                           : "";
  if (isfinite(f->suggestion))
    /* Translators: the learning-rate finder's result: the rate, the steps it took and
     * how it ended (", ended where the loss diverged", ", stopped" or nothing) */
    return g_strdup_printf(tdm_engine_ngettext("suggested learning rate %.3g (%d step%s)",
                                               "suggested learning rate %.3g (%d steps%s)", n),
                           f->suggestion, n, end);
  /* Translators: the learning-rate finder found no rate; the steps and how it ended */
  return g_strdup_printf(tdm_engine_ngettext("no suggestion: the loss did not fall (%d step%s)",
                                             "no suggestion: the loss did not fall (%d steps%s)",
                                             n),
                         n, end);
}

static void
lr_find_finalize(TdmExperiment *e)
{
  g_array_unref(((LrFind *)e)->points);
}

static const TdmExperimentClass lr_find_class = {
  .stopped = N_("the learning-rate test was stopped"),
  .keeps_stopped = TRUE,
  .next = lr_find_next,
  .observe = lr_find_observe,
  .reduce = lr_find_reduce,
  .dup_result = lr_find_dup_result,
  .finalize = lr_find_finalize,
};

TdmExperiment *
tdm_experiment_new_lr_find(const TdmConfig *config, const TdmLrFindOptions *options,
                           GError **error)
{
  g_return_val_if_fail(config != NULL, NULL);
  TdmLrFindOptions o = {TDM_LR_FIND_FIRST, TDM_LR_FIND_LAST, TDM_LR_FIND_STEPS};
  if (options != NULL)
    o = *options;
  if (!tdm_lr_find_check(&o, error) || !tdm_config_validate(config, error))
    return NULL;
  LrFind *f = g_new0(LrFind, 1);
  tdm_experiment_init(&f->parent, &lr_find_class, TDM_EXPERIMENT_LR_FIND, config, o.steps);
  f->options = o;
  f->points = g_array_new(FALSE, FALSE, sizeof(TdmLrFindPoint));
  f->suggestion = NAN;
  return &f->parent;
}

static const LrFind *
lr_find_of(const TdmExperiment *e)
{
  g_return_val_if_fail(e != NULL && e->kind == TDM_EXPERIMENT_LR_FIND, NULL);
  return (const LrFind *)e;
}

const TdmLrFindOptions *
tdm_experiment_get_lr_options(const TdmExperiment *e)
{
  const LrFind *f = lr_find_of(e);
  return f != NULL ? &f->options : NULL;
}

const TdmLrFindPoint *
tdm_experiment_get_lr_points(const TdmExperiment *e, int *count)
{
  const LrFind *f = lr_find_of(e);
  if (count != NULL)
    *count = f != NULL ? (int)f->points->len : 0;
  return f != NULL ? (const TdmLrFindPoint *)f->points->data : NULL;
}

double
tdm_experiment_get_lr_suggestion(const TdmExperiment *e)
{
  const LrFind *f = lr_find_of(e);
  return f != NULL && e->complete ? f->suggestion : NAN;
}

gboolean
tdm_experiment_get_lr_diverged(const TdmExperiment *e)
{
  const LrFind *f = lr_find_of(e);
  return f != NULL && f->diverged;
}

void
tdm_experiment_set_lr_point_sink(TdmExperiment *e, TdmLrFindFunc sink, gpointer user_data)
{
  g_return_if_fail(e != NULL && e->kind == TDM_EXPERIMENT_LR_FIND);
  LrFind *f = (LrFind *)e;
  f->sink = sink;
  f->sink_data = user_data;
}
