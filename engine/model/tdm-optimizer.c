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
  opt->state_count = config->optimizer == TDM_OPTIMIZER_ADAM ? 2
                     : config->optimizer == TDM_OPTIMIZER_SGD ? 0
                                                              : 1;
  for (int i = 0; i < opt->state_count; i++) {
    opt->state[i] = tdm_backend_alloc(b, count * sizeof(float), error);
    if (opt->state[i] == NULL) {
      tdm_optimizer_free(opt);
      return NULL;
    }
    b->ops->zero(b, opt->state[i], count * sizeof(float));
  }
  if (decay_mask != NULL && config->decay_scope == TDM_DECAY_WEIGHTS &&
      config->weight_decay > 0) {
    if (b->ops->weight_decay == NULL ||
        (opt->kind == TDM_OPTIMIZER_NESTEROV && b->ops->sgd_momentum_update == NULL)) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  _("%s: this build's backend cannot yet skip biases and BN parameters in "
                  "weight decay; use --weight-decay-on all or train on cpu"), b->name);
      tdm_optimizer_free(opt);
      return NULL;
    }
    opt->decay_mask = tdm_backend_alloc(b, count, error);
    if (opt->decay_mask == NULL) {
      tdm_optimizer_free(opt);
      return NULL;
    }
    b->ops->upload(b, opt->decay_mask, decay_mask, count);
    b->ops->synchronize(b);
  }
  if (opt->kind == TDM_OPTIMIZER_NESTEROV && b->ops->sgd_momentum_update == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("%s: this build's backend has no Nesterov SGD yet; train on cpu"), b->name);
    tdm_optimizer_free(opt);
    return NULL;
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
  g_free(opt);
}

void
tdm_optimizer_step(TdmOptimizer *opt, float *params, float *grads, double lr)
{
  TdmBackend *b = opt->backend;
  opt->t++;
  float decay = opt->weight_decay;
  if (opt->decay_mask != NULL && opt->kind != TDM_OPTIMIZER_NESTEROV) {
    /* The masked decay goes into the gradient first (grads are rebuilt every step). */
    b->ops->weight_decay(b, grads, params, opt->decay_mask, opt->count, decay);
    decay = 0.0f;
  }
  switch (opt->kind) {
  case TDM_OPTIMIZER_SGD:
    b->ops->sgd_update(b, params, grads, opt->count, (float)lr, decay);
    break;
  case TDM_OPTIMIZER_MOMENTUM:
    b->ops->momentum_update(b, params, grads, opt->state[0], opt->count, (float)lr,
                            opt->momentum, decay);
    break;
  case TDM_OPTIMIZER_NESTEROV:
    b->ops->sgd_momentum_update(b, params, grads, opt->state[0], opt->decay_mask, opt->count,
                                (float)lr, opt->momentum, opt->weight_decay, true);
    break;
  case TDM_OPTIMIZER_ADAM: {
    /* Bias correction in double on the host, as Chainer computes alpha_t. */
    double fix1 = 1.0 - pow(opt->beta1, (double)opt->t);
    double fix2 = 1.0 - pow(opt->beta2, (double)opt->t);
    double lr_t = lr * sqrt(fix2) / fix1;
    b->ops->adam_update(b, params, grads, opt->state[0], opt->state[1], opt->count,
                        (float)lr_t, opt->beta1, opt->beta2, opt->eps, decay);
    break;
  }
  }
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
