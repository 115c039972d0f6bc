/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-optimizer.c — see tdm-optimizer.h. Chainer's update rules, each one fused
 * backend operation over the whole flat buffer. */
#include "tdm-optimizer.h"
#include "tdm-i18n.h"
#include "tdm-error.h"

#include <math.h>

TdmOptimizer *
tdm_optimizer_new(TdmBackend *b, const TdmConfig *config, size_t count,
                  const uint8_t *decay_mask, GError **error)
{
  TdmOptimizer *opt = g_new0(TdmOptimizer, 1);
  opt->backend = b;
  opt->kind = config->optimizer;
  opt->count = count;
  opt->beta1 = (float)config->beta1;
  opt->beta2 = (float)config->beta2;
  opt->eps = (float)config->eps;
  opt->momentum = (float)config->momentum;
  opt->weight_decay = (float)config->weight_decay;
  opt->rates = tdm_backend_alloc(b, TDM_OPTIMIZER_RATES_BYTES(0), error);
  if (opt->rates == NULL) {
    tdm_optimizer_free(opt);
    return NULL;
  }
  opt->state_count = config->optimizer == TDM_OPTIMIZER_ADAM ? 2
                     : config->optimizer == TDM_OPTIMIZER_SGD ? 0
                                                              : 1;
  for (int i = 0; i < opt->state_count; i++) {
    opt->state[i] = tdm_backend_alloc(b, count * sizeof(float), error);
    if (opt->state[i] == NULL) {
      tdm_optimizer_free(opt);
      return NULL;
    }
    tdm_backend_zero(b, opt->state[i], count * sizeof(float));
  }
  if (decay_mask != NULL && config->decay_scope == TDM_DECAY_WEIGHTS &&
      config->weight_decay > 0) {
    opt->decay_mask = tdm_backend_alloc(b, count, error);
    if (opt->decay_mask == NULL) {
      tdm_optimizer_free(opt);
      return NULL;
    }
    tdm_backend_upload(b, opt->decay_mask, decay_mask, count);
    tdm_backend_synchronize(b);
  }
  return opt;
}

void
tdm_optimizer_free(TdmOptimizer *opt)
{
  if (opt == NULL)
    return;
  for (int i = 0; i < opt->state_count; i++)
    tdm_backend_release(opt->backend, opt->state[i]);
  tdm_backend_release(opt->backend, opt->decay_mask);
  tdm_backend_release(opt->backend, opt->rates);
  g_free(opt->group_offset);
  g_free(opt->group_size);
  g_free(opt->group_scale);
  g_free(opt);
}

/* The rate of an update at lr, as the update uses it: Adam's bias correction in
 * double on the host, as Chainer computes alpha_t. */
static float
rate_of(const TdmOptimizer *opt, double lr)
{
  if (opt->kind != TDM_OPTIMIZER_ADAM)
    return (float)lr;
  double fix1 = 1.0 - pow(opt->beta1, (double)opt->t);
  double fix2 = 1.0 - pow(opt->beta2, (double)opt->t);
  return (float)(lr * sqrt(fix2) / fix1);
}

/* One update of the n parameters from `at`, its rate and momentum in rates[0, 2). */
static void
update_range(TdmOptimizer *opt, float *params, float *grads, size_t at, size_t n,
             const float *rates)
{
  TdmBackend *b = opt->backend;
  float *p = params + at, *g = grads + at;
  float *s0 = opt->state_count > 0 ? opt->state[0] + at : NULL;
  float *s1 = opt->state_count > 1 ? opt->state[1] + at : NULL;
  const uint8_t *mask = opt->decay_mask != NULL ? opt->decay_mask + at : NULL;
  float decay = opt->weight_decay;
  if (mask != NULL && opt->kind != TDM_OPTIMIZER_NESTEROV) {
    /* The masked decay goes into the gradient first (grads are rebuilt every step). */
    tdm_backend_weight_decay(b, g, p, mask, n, decay);
    decay = 0.0f;
  }
  /* Rate and momentum go as 0: each kernel reads this step's values from `rates` on the
   * device as it runs, so a captured graph replays with the current schedule. */
  switch (opt->kind) {
  case TDM_OPTIMIZER_SGD:
    tdm_backend_sgd_update(b, p, g, n, 0.0f, decay, rates);
    break;
  case TDM_OPTIMIZER_MOMENTUM:
    tdm_backend_momentum_update(b, p, g, s0, n, 0.0f, 0.0f, decay, rates);
    break;
  case TDM_OPTIMIZER_NESTEROV:
    tdm_backend_sgd_momentum_update(b, p, g, s0, mask, n, 0.0f, 0.0f, opt->weight_decay, true,
                                    rates);
    break;
  case TDM_OPTIMIZER_ADAM:
    tdm_backend_adam_update(b, p, g, s0, s1, n, 0.0f, 0.0f, opt->beta2, opt->eps, decay,
                            rates);
    break;
  }
}

void
tdm_optimizer_set_momentum(TdmOptimizer *opt, double momentum)
{
  g_return_if_fail(opt != NULL && momentum >= 0 && momentum < 1);
  if (opt->kind == TDM_OPTIMIZER_ADAM)
    opt->beta1 = (float)momentum;
  else
    opt->momentum = (float)momentum;
}

void
tdm_optimizer_prepare(TdmOptimizer *opt, double lr)
{
  opt->t++;
  int groups = MAX(opt->group_count, 1);
  float momentum = opt->kind == TDM_OPTIMIZER_ADAM ? opt->beta1 : opt->momentum;
  g_autofree float *rates = g_new(float, 2 * groups);
  for (int g = 0; g < groups; g++) {
    rates[2 * g] = rate_of(opt, opt->group_count > 0 ? lr * opt->group_scale[g] : lr);
    rates[2 * g + 1] = momentum;
  }
  /* An asynchronous upload copies the host buffer before it returns. */
  tdm_backend_upload(opt->backend, opt->rates, rates, 2 * groups * sizeof(float));
}

void
tdm_optimizer_update(TdmOptimizer *opt, float *params, float *grads)
{
  if (opt->group_count == 0) {
    update_range(opt, params, grads, 0, opt->count, opt->rates);
    return;
  }
  for (int g = 0; g < opt->group_count; g++)
    update_range(opt, params, grads, opt->group_offset[g], opt->group_size[g],
                 opt->rates + 2 * g);
}

void
tdm_optimizer_step(TdmOptimizer *opt, float *params, float *grads, double lr)
{
  tdm_optimizer_prepare(opt, lr);
  tdm_optimizer_update(opt, params, grads);
}

void
tdm_optimizer_set_groups(TdmOptimizer *opt, int count, const size_t *offset,
                         const size_t *size, const float *scale)
{
  g_return_if_fail(opt != NULL && count >= 0);
  g_autoptr(GError) error = NULL;
  float *rates = tdm_backend_alloc(opt->backend, TDM_OPTIMIZER_RATES_BYTES(count), &error);
  if (rates == NULL) {
    tdm_backend_fail(opt->backend, error->code, "%s", error->message);
    return;
  }
  tdm_backend_release(opt->backend, opt->rates);
  opt->rates = rates;
  g_free(opt->group_offset);
  g_free(opt->group_size);
  g_free(opt->group_scale);
  opt->group_count = count;
  opt->group_offset = g_memdup2(offset, sizeof(size_t) * count);
  opt->group_size = g_memdup2(size, sizeof(size_t) * count);
  opt->group_scale = g_memdup2(scale, sizeof(float) * count);
}

const char *
tdm_optimizer_state_name(const TdmOptimizer *opt, int index)
{
  g_return_val_if_fail(index >= 0 && index < opt->state_count, NULL);
  if (opt->kind == TDM_OPTIMIZER_MOMENTUM)
    return "optimizer.momentum.velocity";
  if (opt->kind == TDM_OPTIMIZER_NESTEROV)
    return "optimizer.nesterov.velocity";
  return index == 0 ? "optimizer.adam.m" : "optimizer.adam.v";
}
