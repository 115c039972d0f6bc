/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-steps.c — part of test-cuda-train: what a step's machinery must not
 * change on a GPU. The pre-warm leaves parameters and running statistics the bits of a
 * run without it; the steps' graphs give the bits of the same steps issued one
 * operation at a time, and issue fewer operations from the host; `--precision auto` on a
 * GPU with bfloat16 tensor cores trains the bits of bf16 and says so. */
#include "tdm-choice.h"
#include "tdm-config.h"
#include "tdm-device.h"
#include "tdm-events.h"
#include "tdm-precision-auto.h"
#include "tdm-trainer.h"
#include "relative-difference.h"
#include "test-cuda-train.h"

#include <math.h>
#include <string.h>

static void
remember_prewarm(const TdmEvent *e, gpointer data)
{
  if (e->kind == TDM_EVENT_STARTED)
    *(int *)data = e->started.prewarm_steps;
}

/* Parameters and every replica's BN statistics of a 20-step recipe run with the
 * pre-warm set to `mode`; *steps gets the pre-warm's step count. */
static float *
train_prewarm(const char *devices, TdmPrecision precision, TdmBatchNorm bn, TdmPrewarm mode,
              size_t *count, int *steps)
{
  g_autoptr(TdmConfig) cfg = synthetic_run(BN_NETWORK, devices);
  g_autoptr(GError) error = NULL;
  /* 60 000 % 56 = 24: a short last batch for the pre-warm. */
  cfg->batch = 56;
  cfg->precision = precision;
  cfg->max_steps = 20;
  cfg->seed = 5;
  use_recipe(cfg, bn);
  cfg->test_flip = TRUE;
  *steps = -1;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, remember_prewarm, steps);
  tdm_trainer_options(trainer)->prewarm = mode;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  size_t n = 0;
  const float *params = tdm_trainer_get_parameters(trainer, &n);
  GArray *all = g_array_new(FALSE, FALSE, sizeof(float));
  g_array_append_vals(all, params, n);
  for (int r = 0; r < tdm_config_replica_count(cfg); r++) {
    size_t ns = 0;
    const float *state = tdm_trainer_get_bn_state(trainer, r, &ns);
    g_assert_nonnull(state);
    g_array_append_vals(all, state, ns);
  }
  *count = all->len;
  return (float *)g_array_free(all, FALSE);
}

/* The pre-warm (TdmTrainerOptions.prewarm) on GPUs: with it, parameters and running
 * statistics after 20 steps are the bits of the run without it, on one replica
 * (where later steps replay a captured graph, the first of which the pre-warm
 * captured) in fp32 and bf16, and on two replicas of one GPU with either BN. AUTO
 * pre-warms on a GPU. */
static void
test_prewarm_leaves_no_trace(void)
{
  if (!have_gpu())
    return;
  struct {
    const char *devices;
    TdmPrecision precision;
    TdmBatchNorm bn;
  } cases[] = {
    {"cuda:0", TDM_PRECISION_FP32, TDM_BATCHNORM_SYNC},
    {"cuda:0", TDM_PRECISION_BF16, TDM_BATCHNORM_SYNC},
    {"cuda:0,cuda:0", TDM_PRECISION_FP32, TDM_BATCHNORM_SYNC},
    {"cuda:0,cuda:0", TDM_PRECISION_BF16, TDM_BATCHNORM_PER_REPLICA},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    size_t n_off, n_on;
    int steps_off, steps_on;
    g_autofree float *off = train_prewarm(cases[i].devices, cases[i].precision, cases[i].bn,
                                          TDM_PREWARM_OFF, &n_off, &steps_off);
    g_autofree float *on = train_prewarm(cases[i].devices, cases[i].precision, cases[i].bn,
                                         TDM_PREWARM_AUTO, &n_on, &steps_on);
    g_assert_cmpuint(n_on, ==, n_off);
    size_t differ = 0;
    for (size_t k = 0; k < MIN(n_on, n_off); k++)
      differ += memcmp(&on[k], &off[k], sizeof(float)) != 0;
    g_test_message("pre-warm on %s %s, %s BN: %d steps; %zu of %zu values differ from the "
                   "run without it (relative difference %.3g)",
                   cases[i].devices, tdm_precision_name(cases[i].precision),
                   tdm_choice_name(TDM_TYPE_BATCH_NORM, cases[i].bn), steps_on, differ, n_off,
                   relative_difference(on, off, MIN(n_on, n_off)));
    g_assert_cmpint(steps_off, ==, 0);
    g_assert_cmpint(steps_on, ==, 4);
    g_assert_cmpuint(differ, ==, 0);
  }
}

typedef struct {
  double host_operations, graph_operations, issue_ms;
  int operations;
} StepOps;

static void
remember_ops(const TdmEvent *e, gpointer data)
{
  if (e->kind != TDM_EVENT_DEVICES)
    return;
  StepOps *o = data;
  o->host_operations = e->devices.device[0].host_operations;
  o->graph_operations = e->devices.device[0].graph_operations;
  o->issue_ms = e->devices.device[0].issue_ms;
  o->operations = e->devices.device[0].operations_per_step;
}

/* Parameters and BN statistics of 24 steps of Adam under the one-cycle schedule (the
 * rate and beta1 move every step) with the gradient's norm clipped, on one GPU, with
 * its steps' graphs (TDM_CUDA_GRAPHS unset) or without them ("0"). The convolution
 * engine's choices are this process's (its table of them outlives a run, the disk
 * cache off), so the two runs convolve with the same candidates. */
static float *
train_graphs(gboolean graphs, TdmPrecision precision, size_t *count, StepOps *ops)
{
  if (graphs)
    g_unsetenv("TDM_CUDA_GRAPHS");
  else
    g_setenv("TDM_CUDA_GRAPHS", "0", TRUE);
  g_autoptr(TdmConfig) cfg = synthetic_run(BN_NETWORK, "cuda:0");
  g_autoptr(GError) error = NULL;
  cfg->batch = 56;
  cfg->precision = precision;
  cfg->max_steps = 24;
  cfg->seed = 7;
  cfg->optimizer = TDM_OPTIMIZER_ADAM;
  cfg->lr = 2e-3;
  cfg->schedule = TDM_SCHEDULE_ONECYCLE;
  cfg->clip_grad_norm = 1.0;
  cfg->crop_pad = 2;
  cfg->flip = TDM_FLIP_ON;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, remember_ops, ops);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  g_unsetenv("TDM_CUDA_GRAPHS");
  size_t n = 0, ns = 0;
  const float *params = tdm_trainer_get_parameters(trainer, &n);
  const float *state = tdm_trainer_get_bn_state(trainer, 0, &ns);
  float *all = g_new(float, n + ns);
  memcpy(all, params, n * sizeof(float));
  memcpy(all + n, state, ns * sizeof(float));
  *count = n + ns;
  return all;
}

/* One graph a step: forward, backward, clipping and the update replayed with the
 * schedule's rates written before each launch give the bits of the same steps issued
 * one operation at a time, in fp32 and bf16; with graphs, a step issues a handful of
 * operations from the host and runs the rest from its graph. */
static void
test_graphs_same_bits(void)
{
  if (!have_gpu())
    return;
  const TdmPrecision precisions[] = {TDM_PRECISION_FP32, TDM_PRECISION_BF16};
  for (guint i = 0; i < G_N_ELEMENTS(precisions); i++) {
    size_t n_off, n_on;
    StepOps ops_off = {0}, ops_on = {0};
    g_autofree float *off = train_graphs(FALSE, precisions[i], &n_off, &ops_off);
    g_autofree float *on = train_graphs(TRUE, precisions[i], &n_on, &ops_on);
    g_assert_cmpuint(n_on, ==, n_off);
    size_t differ = 0;
    for (size_t k = 0; k < n_off; k++)
      differ += memcmp(&on[k], &off[k], sizeof(float)) != 0;
    g_test_message("%s, 24 steps of Adam, one-cycle, clipped: graphs on vs off %zu of %zu "
                   "values differ; a step's operations without graphs %d (host %.1f), with "
                   "graphs host %.1f + graph %.1f; host time issuing a step %.3f ms off, "
                   "%.3f ms on",
                   tdm_precision_name(precisions[i]), differ, n_off, ops_off.operations,
                   ops_off.host_operations, ops_on.host_operations, ops_on.graph_operations,
                   ops_off.issue_ms, ops_on.issue_ms);
    g_assert_cmpuint(differ, ==, 0);
    g_assert_cmpfloat(ops_off.graph_operations, ==, 0);
    g_assert_cmpfloat(ops_on.graph_operations, >, 0);
    g_assert_cmpfloat(ops_on.host_operations, <, ops_off.host_operations);
  }
}

static void
remember_started(const TdmEvent *e, gpointer data)
{
  if (e->kind == TDM_EVENT_STARTED)
    *(TdmStartedEvent *)data = e->started;
}

/* Parameters and BN statistics after 6 recipe steps on cuda:0 asking for `precision`;
 * *started gets the run's start. */
static float *
train_precision(TdmPrecision precision, size_t *count, TdmStartedEvent *started)
{
  g_autoptr(TdmConfig) cfg = synthetic_run(BN_NETWORK, "cuda:0");
  g_autoptr(GError) error = NULL;
  cfg->batch = 64;
  cfg->precision = precision;
  cfg->max_steps = 6;
  cfg->seed = 5;
  use_recipe(cfg, TDM_BATCHNORM_SYNC);
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, remember_started, started);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  size_t n = 0, ns = 0;
  const float *params = tdm_trainer_get_parameters(trainer, &n);
  const float *state = tdm_trainer_get_bn_state(trainer, 0, &ns);
  g_assert_nonnull(state);
  float *all = g_new(float, n + ns);
  memcpy(all, params, n * sizeof(float));
  memcpy(all + n, state, ns * sizeof(float));
  *count = n + ns;
  return all;
}

/* Auto, the default, on cuda:0 of compute capability 8.0 or later: resolved to bf16,
 * the parameters and running statistics the bits of an explicit bf16 run, and its start
 * says bf16 and why. An older GPU resolves to fp32: skipped there. */
static void
test_precision_auto(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GArray) devices = tdm_device_list();
  const TdmDeviceInfo *first = &g_array_index(devices, TdmDeviceInfo, 0);
  g_assert_cmpint(first->kind, ==, TDM_BACKEND_CUDA);
  if (first->compute_major < 8) {
    g_test_skip_printf("cuda:0 (%s) has compute capability %d.%d: no bfloat16 tensor cores, "
                       "auto is fp32 there", first->name, first->compute_major,
                       first->compute_minor);
    return;
  }
  TdmDeviceId gpu0 = TDM_DEVICE_GPU(0);
  g_assert_cmpint(tdm_precision_resolve_here(TDM_PRECISION_AUTO, &gpu0, 1), ==,
                  TDM_PRECISION_BF16);
  TdmStartedEvent bf16 = {0}, automatic = {0};
  size_t n16, n;
  g_autofree float *p16 = train_precision(TDM_PRECISION_BF16, &n16, &bf16);
  g_autofree float *p = train_precision(TDM_PRECISION_AUTO, &n, &automatic);
  g_assert_cmpuint(n, ==, n16);
  size_t differ = 0;
  for (size_t k = 0; k < n; k++)
    differ += memcmp(&p[k], &p16[k], sizeof(float)) != 0;
  g_test_message("%s: auto against bf16 over 6 steps, %zu of %zu values differ", first->name,
                 differ, n);
  g_assert_cmpuint(differ, ==, 0);
  g_assert_cmpint(bf16.precision, ==, TDM_PRECISION_BF16);
  g_assert_false(bf16.precision_auto);
  g_assert_cmpint(automatic.precision, ==, TDM_PRECISION_BF16);
  g_assert_true(automatic.precision_auto);
  g_assert_cmpstr(automatic.precision_why, ==, "every device has bfloat16 tensor cores");
}

void
test_cuda_train_add_steps(void)
{
  g_test_add_func("/cuda-train/prewarm-leaves-no-trace", test_prewarm_leaves_no_trace);
  g_test_add_func("/cuda-train/graphs-same-bits", test_graphs_same_bits);
  g_test_add_func("/cuda-train/precision-auto", test_precision_auto);
}
