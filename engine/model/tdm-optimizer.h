/* tdm-optimizer.h — SGD, MomentumSGD and Adam over one flat parameter buffer.
 *
 * An optimizer lives on the device whose parameters it updates and keeps its state
 * (velocity; Adam's moments and step count) there. One fused backend operation
 * updates every parameter at once. Not the learning-rate schedule (tdm-config.h).
 */
#pragma once

#include <glib.h>
#include "tdm-backend.h"
#include "tdm-config.h"

G_BEGIN_DECLS

typedef struct {
  TdmBackend *backend;          /* not owned */
  TdmOptimizerKind kind;
  size_t count;
  float beta1, beta2, eps, momentum, weight_decay;
  long t;                       /* updates done */
  float *state[2];              /* device buffers: velocity, or Adam's m and v */
  int state_count;
} TdmOptimizer;

TdmOptimizer *tdm_optimizer_new (TdmBackend *backend, const TdmConfig *config, size_t count,
                                 GError **error);
void tdm_optimizer_free (TdmOptimizer *opt);

/* One update with learning rate lr (Adam's alpha) from grads into params. */
void tdm_optimizer_step (TdmOptimizer *opt, float *params, const float *grads, double lr);

/* The state buffers' names in checkpoints: "momentum.velocity", "adam.m", "adam.v". */
const char *tdm_optimizer_state_name (const TdmOptimizer *opt, int index);

G_END_DECLS
