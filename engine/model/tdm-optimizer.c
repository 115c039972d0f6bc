/* tdm-optimizer.c — see tdm-optimizer.h. Chainer's update rules, each one fused
 * backend operation over the whole flat buffer. */
#include "tdm-optimizer.h"

#include <math.h>

TdmOptimizer *
tdm_optimizer_new(TdmBackend *b, const TdmConfig *config, size_t count, GError **error)
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
  opt->state_count = config->optimizer == TDM_OPTIMIZER_ADAM       ? 2
                     : config->optimizer == TDM_OPTIMIZER_MOMENTUM ? 1
                                                                   : 0;
  for (int i = 0; i < opt->state_count; i++) {
    opt->state[i] = tdm_backend_alloc(b, count * sizeof(float), error);
    if (opt->state[i] == NULL) {
      tdm_optimizer_free(opt);
      return NULL;
    }
    b->ops->zero(b, opt->state[i], count * sizeof(float));
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
  g_free(opt);
}

void
tdm_optimizer_step(TdmOptimizer *opt, float *params, const float *grads, double lr)
{
  TdmBackend *b = opt->backend;
  opt->t++;
  switch (opt->kind) {
  case TDM_OPTIMIZER_SGD:
    b->ops->sgd_update(b, params, grads, opt->count, (float)lr, opt->weight_decay);
    break;
  case TDM_OPTIMIZER_MOMENTUM:
    b->ops->momentum_update(b, params, grads, opt->state[0], opt->count, (float)lr,
                            opt->momentum, opt->weight_decay);
    break;
  case TDM_OPTIMIZER_ADAM: {
    /* Bias correction in double on the host, as Chainer computes alpha_t. */
    double fix1 = 1.0 - pow(opt->beta1, (double)opt->t);
    double fix2 = 1.0 - pow(opt->beta2, (double)opt->t);
    double lr_t = lr * sqrt(fix2) / fix1;
    b->ops->adam_update(b, params, grads, opt->state[0], opt->state[1], opt->count,
                        (float)lr_t, opt->beta1, opt->beta2, opt->eps, opt->weight_decay);
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
  return index == 0 ? "optimizer.adam.m" : "optimizer.adam.v";
}
