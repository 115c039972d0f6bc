/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-experiment-compare.c — the two comparisons as experiments (tdm-experiment.h).
 *
 * "Compare with one device": the run in exact mode on its devices, keeping the main
 * replica's parameters, then its one-device twin (tdm-compare.h); the reducer
 * measures how far the second's parameters are from the first's. "Compare strategies":
 * the run with `main`, then with `allreduce`; the reducer keeps each run's mean
 * sampled step (its phases' events, the first left out where more came) and each
 * device's communication exposed after backward and hidden under it. */
#include "tdm-experiment-private.h"
#include "tdm-compare.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <math.h>
#include <string.h>

/* ---- compare with one device ----------------------------------------------------- */

typedef struct {
  TdmExperiment parent;
  float *first;                 /* the N-device run's parameters */
  size_t count;
  double difference;
  size_t differing;
  char *words;                  /* tdm_compare_describe_values()'s */
} Compare;

static gboolean
compare_next(TdmExperiment *e)
{
  int replicas = tdm_config_replica_count(e->config);
  int index = e->training.index;
  if (index == 0) {
    TdmConfig *cfg = tdm_config_copy(e->config);
    tdm_compare_prepare(cfg, e->steps);
    g_clear_pointer(&cfg->save_path, g_free);
    /* Translators: the name of a comparison's first run in the history; %d devices */
    g_autofree char *name = g_strdup_printf(
      tdm_engine_ngettext("Compare: %d device", "Compare: %d devices", replicas), replicas);
    tdm_experiment_set_training(e, cfg, name, _("Training on every device…"), TRUE);
    return TRUE;
  }
  if (index == 1) {
    TdmConfig *cfg = tdm_compare_one_device_config(e->training_config, e->steps);
    tdm_experiment_set_training(e, cfg, _("Compare: one device"),
                                _("Training on the main device alone…"), TRUE);
    return TRUE;
  }
  return FALSE;
}

static gboolean
compare_reduce(TdmExperiment *e, const float *parameters, size_t count, GError **error)
{
  Compare *c = (Compare *)e;
  if (parameters == NULL || (c->first != NULL && count != c->count)) {
    g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                        _("the two runs have no parameters to compare"));
    return FALSE;
  }
  if (c->first == NULL) {
    c->first = g_memdup2(parameters, count * sizeof(float));
    c->count = count;
    return TRUE;
  }
  c->difference = tdm_compare_parameters(c->first, parameters, count);
  c->differing = tdm_compare_count_differing(c->first, parameters, count);
  c->words = tdm_compare_describe_values(c->first, parameters, count);
  return TRUE;
}

static char *
compare_dup_result(const TdmExperiment *e)
{
  const Compare *c = (const Compare *)e;
  int replicas = tdm_config_replica_count(e->config);
  /* Translators: the result of "compare with one device"; %d devices against one
   * after %ld steps, then the engine's words, e.g. "largest difference 2.1 × 10⁻⁷:
   * the same up to rounding" */
  return g_strdup_printf(tdm_engine_ngettext("%d device against one, after %ld steps: %s",
                                  "%d devices against one, after %ld steps: %s", replicas),
                         replicas, e->steps, c->words);
}

static void
compare_finalize(TdmExperiment *e)
{
  Compare *c = (Compare *)e;
  g_free(c->first);
  g_free(c->words);
}

static const TdmExperimentClass compare_class = {
  .stopped = N_("the comparison was stopped before its end"),
  .next = compare_next,
  .reduce = compare_reduce,
  .dup_result = compare_dup_result,
  .finalize = compare_finalize,
};

TdmExperiment *
tdm_experiment_new_compare(const TdmConfig *config, long steps, GError **error)
{
  g_return_val_if_fail(config != NULL && steps > 0, NULL);
  if (!tdm_experiment_check_devices(config, _("compare with one device"), error))
    return NULL;
  Compare *c = g_new0(Compare, 1);
  tdm_experiment_init(&c->parent, &compare_class, TDM_EXPERIMENT_COMPARE, config, steps);
  c->difference = NAN;
  return &c->parent;
}

double
tdm_experiment_get_difference(const TdmExperiment *e, size_t *differing, size_t *count)
{
  g_return_val_if_fail(e != NULL && e->kind == TDM_EXPERIMENT_COMPARE, NAN);
  const Compare *c = (const Compare *)e;
  gboolean done = e->complete;
  if (differing != NULL)
    *differing = done ? c->differing : 0;
  if (count != NULL)
    *count = done ? c->count : 0;
  return done ? c->difference : NAN;
}

/* ---- compare strategies ---------------------------------------------------------- */

static const TdmStrategy compared_strategies[2] = {TDM_STRATEGY_MAIN, TDM_STRATEGY_ALLREDUCE};

/* Sums of one run's sampled steps; the first sample is kept apart, and counted only
 * when no other comes (it holds the first step's costs). */
typedef struct {
  int samples;
  int replicas;
  double step_ms, exposed_ms[TDM_MAX_REPLICAS], hidden_ms[TDM_MAX_REPLICAS];
} PhaseSums;

typedef struct {
  TdmExperiment parent;
  PhaseSums first, rest;
  TdmStrategyFigures figures[2];
  int done;
} Strategies;

static gboolean
strategies_next(TdmExperiment *e)
{
  Strategies *s = (Strategies *)e;
  int index = e->training.index;
  if (index >= 2)
    return FALSE;
  TdmConfig *cfg = tdm_config_copy(e->config);
  cfg->strategy = compared_strategies[index];
  cfg->max_steps = e->steps;
  g_clear_pointer(&cfg->save_path, g_free);
  /* Translators: the name of a strategy comparison's run in the history; %s is the
   * strategy ("main", "allreduce") */
  g_autofree char *name = g_strdup_printf(_("Strategies: %s"), tdm_strategy_name(cfg->strategy));
  /* Translators: a strategy comparison's progress; %s is the strategy */
  g_autofree char *status = g_strdup_printf(_("Training with %s…"),
                                            tdm_strategy_name(cfg->strategy));
  memset(&s->first, 0, sizeof s->first);
  memset(&s->rest, 0, sizeof s->rest);
  tdm_experiment_set_training(e, cfg, name, status, FALSE);
  return TRUE;
}

static void
strategies_observe(TdmExperiment *e, const TdmEvent *event)
{
  Strategies *s = (Strategies *)e;
  if (event->kind != TDM_EVENT_PHASES)
    return;
  const TdmPhasesEvent *p = &event->phases;
  PhaseSums *sums = s->first.samples == 0 ? &s->first : &s->rest;
  double end = 0;
  sums->replicas = MIN(p->replicas, TDM_MAX_REPLICAS);
  for (int r = 0; r < sums->replicas; r++) {
    const TdmDevicePhases *d = &p->device[r];
    for (int i = 0; i < d->spans && i < TDM_MAX_PHASE_SPANS; i++) {
      end = MAX(end, d->span[i].end_ms);
      if (d->span[i].phase == TDM_PHASE_REDUCE || d->span[i].phase == TDM_PHASE_ALLREDUCE ||
          d->span[i].phase == TDM_PHASE_BROADCAST)
        sums->exposed_ms[r] += d->span[i].end_ms - d->span[i].start_ms;
    }
    sums->hidden_ms[r] += d->hidden_ms;
  }
  sums->step_ms += end;
  sums->samples++;
}

static gboolean
strategies_reduce(TdmExperiment *e, const float *parameters, size_t count, GError **error)
{
  Strategies *s = (Strategies *)e;
  const PhaseSums *sums = s->rest.samples > 0 ? &s->rest : &s->first;
  TdmStrategyFigures *f = &s->figures[s->done];
  if (sums->samples == 0) {
    g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                        _("the run sampled no step to compare: give it more steps"));
    return FALSE;
  }
  memset(f, 0, sizeof *f);
  f->strategy = e->training.config->strategy;
  f->replicas = sums->replicas;
  f->samples = sums->samples;
  f->step_ms = sums->step_ms / sums->samples;
  for (int r = 0; r < sums->replicas; r++) {
    f->exposed_ms[r] = sums->exposed_ms[r] / sums->samples;
    f->hidden_ms[r] = sums->hidden_ms[r] / sums->samples;
  }
  s->done++;
  return TRUE;
}

static char *
strategies_dup_result(const TdmExperiment *e)
{
  const Strategies *s = (const Strategies *)e;
  GString *text = g_string_new(NULL);
  for (int i = 0; i < s->done; i++) {
    if (i > 0)
      g_string_append(text, "; ");
    /* Translators: one run of a strategy comparison: the strategy and its mean time a
     * step, e.g. "main · 4.25 ms a step" */
    g_string_append_printf(text, _("%s · %.2f ms a step"),
                           tdm_strategy_name(s->figures[i].strategy), s->figures[i].step_ms);
  }
  return g_string_free(text, FALSE);
}

static const TdmExperimentClass strategies_class = {
  .stopped = N_("the comparison was stopped before its end"),
  .next = strategies_next,
  .observe = strategies_observe,
  .reduce = strategies_reduce,
  .dup_result = strategies_dup_result,
};

TdmExperiment *
tdm_experiment_new_strategies(const TdmConfig *config, long steps, GError **error)
{
  g_return_val_if_fail(config != NULL && steps > 0, NULL);
  if (!tdm_experiment_check_devices(config, _("compare strategies"), error))
    return NULL;
  Strategies *s = g_new0(Strategies, 1);
  tdm_experiment_init(&s->parent, &strategies_class, TDM_EXPERIMENT_STRATEGIES, config, steps);
  return &s->parent;
}

const TdmStrategyFigures *
tdm_experiment_get_strategies(const TdmExperiment *e, int *count)
{
  g_return_val_if_fail(e != NULL && e->kind == TDM_EXPERIMENT_STRATEGIES, NULL);
  const Strategies *s = (const Strategies *)e;
  *count = s->done;
  return s->figures;
}
