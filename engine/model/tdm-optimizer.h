/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-optimizer.h — SGD, MomentumSGD, Adam and Nesterov SGD over one flat parameter
 * buffer.
 *
 * An optimizer lives on the device whose parameters it updates and keeps its state
 * (velocity; Adam's moments and step count) there. One fused backend operation
 * updates every parameter at once. What changes from step to step (the schedule's
 * rate, Adam's bias correction, the one-cycle momentum) is written to a small device
 * buffer before the update runs and read there by it, so an update captured once in a
 * graph serves every step. Not the learning-rate schedule (tdm-config.h).
 */
#pragma once

#include <glib.h>
#include "tdm-backend.h"
#include "tdm-config.h"

G_BEGIN_DECLS

/* Bytes of device memory an optimizer's rates take with `groups` parameter groups. */
#define TDM_OPTIMIZER_RATES_BYTES(groups) (2 * (size_t)MAX ((groups), 1) * sizeof (float))

typedef struct {
  TdmBackend *backend;          /* not owned */
  TdmOptimizerKind kind;
  size_t count;
  float beta1, beta2, eps, momentum, weight_decay;
  long t;                       /* updates done */
  float *state[2];              /* device buffers: velocity, or Adam's m and v */
  int state_count;
  uint8_t *decay_mask;          /* device: which parameters decay; NULL: all */
  /* Parameter groups (tdm_optimizer_set_groups); group_count 0: one, everything at lr. */
  int group_count;
  size_t *group_offset, *group_size;
  float *group_scale;
  /* Device: two floats a group (one without groups), the rate (Adam's bias-corrected
   * lr_t) and the momentum (Adam's beta1) of the update prepared last. */
  float *rates;
} TdmOptimizer;

/* decay_mask (host, count bytes, see tdm_network_decay_mask()) is used when the
 * config's weight decay skips biases and BN parameters; NULL otherwise. */
TdmOptimizer *tdm_optimizer_new (TdmBackend *backend, const TdmConfig *config, size_t count,
                                 const uint8_t *decay_mask, GError **error);
void tdm_optimizer_free (TdmOptimizer *opt);

/* The momentum of the updates from now on: MomentumSGD's and Nesterov's μ, Adam's
 * beta1 (the one-cycle schedule moves it); plain SGD has none to set. */
void tdm_optimizer_set_momentum (TdmOptimizer *opt, double momentum);

/* One update with learning rate lr (Adam's alpha) from grads into params:
 * tdm_optimizer_prepare() then tdm_optimizer_update(). */
void tdm_optimizer_step (TdmOptimizer *opt, float *params, float *grads, double lr);

/* Counts the next update (Adam's t) and writes its rates, from lr and the momentum
 * set now, to the device; the update issued next, or one captured in a graph earlier
 * and launched after this, runs with them. */
void tdm_optimizer_prepare (TdmOptimizer *opt, double lr);
/* Issues the update from grads into params at the rates prepared last (the same bits
 * as tdm_optimizer_step() with the lr prepared). Issues nothing on the host that a
 * graph could not hold. */
void tdm_optimizer_update (TdmOptimizer *opt, float *params, float *grads);

/* From now on, updates touch only [offset[g], offset[g] + size[g]) for each group g,
 * at lr · scale[g]; parameters in no group never change (frozen), nor does their
 * state. Groups are copied. */
void tdm_optimizer_set_groups (TdmOptimizer *opt, int count, const size_t *offset,
                               const size_t *size, const float *scale);

/* The state buffers' names in checkpoints: "optimizer.momentum.velocity",
 * "optimizer.adam.m", "optimizer.adam.v", "optimizer.nesterov.velocity". */
const char *tdm_optimizer_state_name (const TdmOptimizer *opt, int index);

G_END_DECLS
