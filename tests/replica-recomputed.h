/* SPDX-License-Identifier: GPL-3.0-or-later */
/* replica-recomputed.h — the conv outputs a bf16 replica computes again instead of
 * keeping (the stem's, stem_output_recomputed(); the projections',
 * projection_output_recomputed()), computed here once more after a training step with
 * the replica's own call, against what the step's bns saved and summed: the same bits.
 * test-memory (CPU) and test-cuda-train (GPU) share it. Header-only, so every test
 * program can; not a test of its own. */
#pragma once

#include <glib.h>

#include "tdm-backend.h"
#include "tdm-replica-private.h"
#include "tdm-replica.h"

/* The step's parameters on replica r again (float32 and, where it keeps them, bf16), for
 * the calls below. */
static inline void
replica_params_again(TdmReplica *r, const float *params)
{
  size_t count = r->net->parameter_count;
  tdm_backend_upload(r->backend, r->params, params, count * sizeof(float));
  if (r->params16 != NULL)
    tdm_backend_to_bf16(r->backend, r->params16, r->params, count);
}

/* The statistics a step's bn saved (mean, invstd: `step`, 2·c floats on b) against those
 * of y16 (rows × c, bf16) computed here: the same bits. */
static inline void
replica_assert_same_statistics(TdmBackend *b, const uint16_t *y16, int rows, int c,
                               const float *step)
{
  g_autoptr(GError) error = NULL;
  float *slots = tdm_backend_alloc(b, TDM_BN_SLOT_FLOATS(c) * sizeof(float), &error);
  float *saved = tdm_backend_alloc(b, 2 * (size_t)c * sizeof(float), &error);
  g_assert_no_error(error);
  tdm_backend_bn_moments(b, slots, y16, TDM_DTYPE_BF16, rows, c, 0, 1);
  tdm_backend_bn_stats(b, saved, slots, 1, c, TDM_BN_EPS, TDM_BN_MOMENTUM, NULL, NULL);
  g_autofree float *here = g_new(float, 2 * c), *there = g_new(float, 2 * c);
  tdm_backend_download(b, here, saved, 2 * (size_t)c * sizeof(float));
  tdm_backend_download(b, there, step, 2 * (size_t)c * sizeof(float));
  g_assert_true(tdm_backend_check(b, NULL));
  g_assert_cmpmem(here, 2 * c * sizeof(float), there, 2 * c * sizeof(float));
  tdm_backend_release(b, slots);
  tdm_backend_release(b, saved);
}

/* Replica r's stem (layer 0, its bn layer 1, a residual block's start layer 2) after a
 * step of n samples whose gradients are grads (the step's parameters on r:
 * replica_params_again()): its output computed again from the stored input gives its
 * bn's saved statistics, and the bn's parameter gradients are its sums over that output
 * and the output gradient the first block's start left in the skip buffer. */
static inline void
replica_assert_stem_recomputed(TdmReplica *r, int n, const float *grads)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  const TdmLayer *conv = &net->layers[0], *bn = &net->layers[1];
  int c = bn->out_c, rows = n * bn->out_h * bn->out_w;
  uint16_t *y16 = tdm_backend_alloc(b, (size_t)rows * c * sizeof(uint16_t), &error);
  float *sums = tdm_backend_alloc(b, 2 * (size_t)c * sizeof(float), &error);
  g_assert_no_error(error);
  tdm_replica_conv_forward(r, (float *)y16, y16, r->acts[0], TDM_DTYPE_F32, NULL, r->cols[0],
                           r->conv_work[0], r->params + conv->weight_offset, n, conv->in_h,
                           conv->in_w, conv->in_c, conv->out_c, conv->kernel, conv->pad,
                           conv->stride, conv->out_h, conv->out_w);
  const float *saved = r->bn_work[1] + 2 * c;
  replica_assert_same_statistics(b, y16, rows, c, saved);
  tdm_backend_bn_backward_sums(b, sums, sums + c, r->skip_grad[net->layers[2].partner],
                               TDM_DTYPE_BF16, y16, TDM_DTYPE_BF16, saved, saved + c,
                               r->params + bn->weight_offset, r->params + bn->bias_offset,
                               bn->fused_relu, rows, c);
  g_autofree float *host_sums = g_new(float, 2 * c);
  tdm_backend_download(b, host_sums, sums, 2 * (size_t)c * sizeof(float));
  g_assert_true(tdm_backend_check(b, NULL));
  g_assert_cmpmem(host_sums, 2 * c * sizeof(float), grads + bn->weight_offset,
                  2 * c * sizeof(float));
  tdm_backend_release(b, y16);
  tdm_backend_release(b, sums);
}

/* Each projection of replica r after a step of n samples (the step's parameters on r):
 * its conv keeps no output, and that output computed again from the block's stored input
 * gives its bn's saved statistics. Returns how many projections it checked. */
static inline int
replica_check_projections_recomputed(TdmReplica *r, int n)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  int checked = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i], *begin = &net->layers[l->partner];
    if (l->kind != TDM_LAYER_RES_END || !l->projection)
      continue;
    g_assert_true(projection_output_recomputed(net, i, TRUE));
    g_assert_null(r->proj_conv[i]);
    int c = l->out_c, rows = n * l->out_h * l->out_w;
    uint16_t *y16 = tdm_backend_alloc(b, (size_t)rows * c * sizeof(uint16_t), &error);
    g_assert_no_error(error);
    tdm_replica_conv_forward(r, (float *)y16, y16, r->acts[l->partner], act_type(r, l->partner),
                             NULL, r->cols[i], NULL, r->params + l->weight_offset, n,
                             begin->in_h, begin->in_w, begin->in_c, c, 1, 0, l->stride,
                             l->out_h, l->out_w);
    replica_assert_same_statistics(b, y16, rows, c, r->bn_work[i] + 2 * c);
    tdm_backend_release(b, y16);
    checked++;
  }
  return checked;
}
