/* SPDX-License-Identifier: GPL-3.0-or-later */
/* replica-step.h — the gradients of one training step of a replica from given
 * parameters over samples 0…count−1, read back to the host, and the logits of two
 * replicas evaluated alike. The tests that compare a step under one storage, device or
 * order with another's (test-memory, test-bf16, test-cuda-train) share it. Header-only,
 * so every test program can. */
#pragma once

#include <glib.h>

#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-replica.h"

static inline float *
replica_step_gradients(TdmReplica *r, const float *params, int count)
{
  size_t n = r->net->parameter_count;
  g_autofree int32_t *indices = g_new(int32_t, count);
  for (int i = 0; i < count; i++)
    indices[i] = i;
  tdm_backend_upload(r->backend, r->params, params, n * sizeof(float));
  tdm_replica_train_step(r, indices, count, 1.0f / count);
  float *grads = g_new(float, n);
  tdm_backend_download(r->backend, grads, r->grads, n * sizeof(float));
  g_assert_true(tdm_backend_check(r->backend, NULL));
  return grads;
}

/* The logits of samples 0…count−1 from a and from b, both with params and with a's
 * running statistics (copied to b), into ya and yb (count × classes each). */
static inline void
replicas_predict_alike(TdmReplica *a, TdmReplica *b, const float *params, int count, float *ya,
                       float *yb)
{
  const TdmNetwork *net = a->net;
  g_autofree float *state = g_new(float, MAX(net->state_count, 1));
  tdm_backend_download(a->backend, state, a->state, net->state_count * sizeof(float));
  tdm_backend_upload(b->backend, b->state, state, net->state_count * sizeof(float));
  tdm_backend_upload(a->backend, a->params, params, net->parameter_count * sizeof(float));
  tdm_backend_upload(b->backend, b->params, params, net->parameter_count * sizeof(float));
  tdm_replica_predict(a, 0, count, ya);
  tdm_replica_predict(b, 0, count, yb);
  g_assert_true(tdm_backend_check(a->backend, NULL));
  g_assert_true(tdm_backend_check(b->backend, NULL));
}

/* Two CPU bf16 replicas of net (capacity samples a step, eval_capacity an evaluation
 * chunk) over data: *stored keeps its activations as bf16, *wide as float32
 * (TANDEM_BF16_ACTIVATIONS=0 while it is made), each on a backend of its own. */
static inline void
replicas_by_storage(const TdmNetwork *net, const TdmDatasetPair *data, int capacity,
                    int eval_capacity, TdmReplica **stored, TdmReplica **wide)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b16 = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  TdmBackend *b32 = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  *stored = tdm_replica_new_sized(b16, net, capacity, eval_capacity, data->train, data->test,
                                  &error);
  g_assert_no_error(error);
  g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
  *wide = tdm_replica_new_sized(b32, net, capacity, eval_capacity, data->train, data->test,
                                &error);
  g_unsetenv("TANDEM_BF16_ACTIVATIONS");
  g_assert_no_error(error);
}
