/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-lr-find.c — the learning-rate range test (tdm-lr-find.h): one trainer with the
 * range as its schedule and a summary at every step, whose step events become the
 * points; a stop of its own once the loss diverges.
 */
#include "tdm-lr-find.h"
#include "tdm-error.h"
#include "tdm-trainer.h"

#include <math.h>

/* fastai's smoothing and divergence rule. */
#define SMOOTHING 0.98
#define DIVERGED 4.0

struct _TdmLrFinder {
  TdmConfig *config;
  TdmLrFindOptions options;
  TdmEventSink sink;
  gpointer sink_data;
  TdmLrFindFunc point_func;
  gpointer point_data;
  GArray *points;               /* TdmLrFindPoint */
  double average, lowest;
  gboolean diverged;
  GCancellable *stop;           /* the test's own stop, tied to the caller's */
};

TdmLrFinder *
tdm_lr_finder_new(const TdmConfig *config, const TdmLrFindOptions *options)
{
  g_return_val_if_fail(config != NULL, NULL);
  TdmLrFinder *f = g_new0(TdmLrFinder, 1);
  f->config = tdm_config_copy(config);
  f->options = (TdmLrFindOptions){TDM_LR_FIND_FIRST, TDM_LR_FIND_LAST, TDM_LR_FIND_STEPS};
  if (options != NULL)
    f->options = *options;
  f->points = g_array_new(FALSE, FALSE, sizeof(TdmLrFindPoint));
  TdmConfig *c = f->config;
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
  return f;
}

void
tdm_lr_finder_free(TdmLrFinder *f)
{
  if (f == NULL)
    return;
  tdm_config_free(f->config);
  g_array_unref(f->points);
  g_free(f);
}

void
tdm_lr_finder_set_sink(TdmLrFinder *f, TdmEventSink sink, gpointer user_data)
{
  g_return_if_fail(f != NULL);
  f->sink = sink;
  f->sink_data = user_data;
}

void
tdm_lr_finder_set_point_func(TdmLrFinder *f, TdmLrFindFunc func, gpointer user_data)
{
  g_return_if_fail(f != NULL);
  f->point_func = func;
  f->point_data = user_data;
}

static void
on_event(const TdmEvent *e, gpointer data)
{
  TdmLrFinder *f = data;
  if (f->sink != NULL)
    f->sink(e, f->sink_data);
  if (e->kind != TDM_EVENT_STEP || f->diverged)
    return;
  const TdmStepEvent *s = &e->step;
  int n = (int)f->points->len;
  TdmLrFindPoint p = {.step = (int)s->step, .lr = s->lr, .loss = s->train_loss};
  f->average = SMOOTHING * f->average + (1 - SMOOTHING) * p.loss;
  p.smoothed = f->average / (1 - pow(SMOOTHING, n + 1));
  g_array_append_val(f->points, p);
  if (f->point_func != NULL)
    f->point_func(&p, f->point_data);
  if (n == 0 || p.smoothed < f->lowest)
    f->lowest = p.smoothed;
  if (!isfinite(p.smoothed) || (n > 0 && p.smoothed > DIVERGED * f->lowest)) {
    f->diverged = TRUE;
    g_cancellable_cancel(f->stop);
  }
}

static void
on_cancelled(GCancellable *cancellable, gpointer data)
{
  g_cancellable_cancel(data);
}

gboolean
tdm_lr_finder_run(TdmLrFinder *f, GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail(f != NULL, FALSE);
  g_return_val_if_fail(f->options.lr_first > 0 && f->options.lr_first < f->options.lr_last &&
                       f->options.steps >= 2, FALSE);
  g_array_set_size(f->points, 0);
  f->average = 0;
  f->lowest = INFINITY;
  f->diverged = FALSE;
  g_autoptr(GCancellable) stop = g_cancellable_new();
  f->stop = stop;
  gulong handler = cancellable != NULL
                       ? g_cancellable_connect(cancellable, G_CALLBACK(on_cancelled), stop, NULL)
                       : 0;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(f->config, on_event, f);
  tdm_trainer_options(trainer)->summary_steps = 1;
  TdmTrainerOptions *options = tdm_trainer_options(trainer);
  options->lr_range[0] = f->options.lr_first;
  options->lr_range[1] = f->options.lr_last;
  options->lr_range_steps = f->options.steps;
  g_autoptr(GError) local = NULL;
  gboolean ok = tdm_trainer_run(trainer, stop, &local);
  if (handler != 0)
    g_cancellable_disconnect(cancellable, handler);
  f->stop = NULL;
  /* A loss that became NaN is where a range test ends, not a failure of it. */
  if (!ok && f->points->len > 0 &&
      (g_error_matches(local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DIVERGED) ||
       g_error_matches(local, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED))) {
    f->diverged = f->diverged || g_error_matches(local, TDM_ENGINE_ERROR,
                                                 TDM_ENGINE_ERROR_DIVERGED);
    return TRUE;
  }
  if (!ok) {
    g_propagate_error(error, g_steal_pointer(&local));
    return FALSE;
  }
  return TRUE;
}

const TdmLrFindPoint *
tdm_lr_finder_get_points(TdmLrFinder *f, int *count)
{
  g_return_val_if_fail(f != NULL, NULL);
  if (count != NULL)
    *count = (int)f->points->len;
  return (const TdmLrFindPoint *)f->points->data;
}

double
tdm_lr_finder_get_suggestion(TdmLrFinder *f)
{
  g_return_val_if_fail(f != NULL, NAN);
  return tdm_lr_find_suggest((const TdmLrFindPoint *)f->points->data, (int)f->points->len);
}

gboolean
tdm_lr_finder_diverged(TdmLrFinder *f)
{
  g_return_val_if_fail(f != NULL, FALSE);
  return f->diverged;
}

double
tdm_lr_find_suggest(const TdmLrFindPoint *p, int count)
{
  g_return_val_if_fail(p != NULL || count == 0, NAN);
  /* Up to the lowest smoothed loss; the first tenth is the average settling. */
  int lowest = -1;
  for (int i = 0; i < count; i++)
    if (isfinite(p[i].smoothed) && (lowest < 0 || p[i].smoothed < p[lowest].smoothed))
      lowest = i;
  int first = count / 10;
  if (lowest < 0 || lowest - first < 2)
    return NAN;
  /* The steepest fall against log(lr), by differences between neighbours. */
  int best = -1;
  double steepest = 0;
  for (int i = first + 1; i <= lowest; i++) {
    double run = log(p[i].lr) - log(p[i - 1].lr);
    if (!(run > 0))
      continue;
    double slope = (p[i].smoothed - p[i - 1].smoothed) / run;
    if (slope < steepest) {
      steepest = slope;
      best = i;
    }
  }
  return best >= 0 ? p[best].lr : NAN;
}

char *
tdm_lr_find_to_csv(const TdmLrFindPoint *p, int count)
{
  GString *csv = g_string_new("step,lr,loss,smoothed_loss\n");
  char lr[G_ASCII_DTOSTR_BUF_SIZE], loss[G_ASCII_DTOSTR_BUF_SIZE],
      smoothed[G_ASCII_DTOSTR_BUF_SIZE];
  for (int i = 0; i < count; i++)
    g_string_append_printf(csv, "%d,%s,%s,%s\n", p[i].step,
                           g_ascii_formatd(lr, sizeof lr, "%.6g", p[i].lr),
                           g_ascii_formatd(loss, sizeof loss, "%.6g", p[i].loss),
                           g_ascii_formatd(smoothed, sizeof smoothed, "%.6g", p[i].smoothed));
  return g_string_free(csv, FALSE);
}
