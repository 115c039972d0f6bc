/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-memory-workspace.c — part of test-memory: the column workspace by its basis
 * (the plan's upper bound, the convolution engine's choices, a replica's own columns)
 * against what a replica allocates and grows to; where a replica's bytes go, by
 * category, summing to the plan; the activation arena, where an evaluation between two
 * steps changes neither. */
#include "replica-step.h"
#include "resnet18-cifar.h"
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-event-json.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-replica.h"
#include "tdm-replica-private.h"
#include "tdm-trainer.h"
#include "test-memory.h"

#include <stdlib.h>
#include <string.h>

/* Gradients and the column workspace of one step of `spec` on a CPU replica of batch 16
 * whose column workspace starts at `columns` bytes (0: the plan's upper bound). */
static float *
step_with_columns(const char *spec, TdmPrecision precision, size_t columns,
                  const TdmDatasetPair *data, size_t *bytes_after)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, precision, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_autofree float *params = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 7, params);
  TdmReplica *r = tdm_replica_new_planned(b, net, 16, 16, columns, data->train, data->test,
                                          &error);
  g_assert_no_error(error);
  tdm_backend_upload(b, r->params, params, net->parameter_count * sizeof(float));
  int indices[16];
  for (int i = 0; i < 16; i++)
    indices[i] = i;
  tdm_replica_train_step(r, indices, 16, 1.0f / 16);
  float *grads = g_new(float, net->parameter_count);
  tdm_backend_download(b, grads, r->grads, net->parameter_count * sizeof(float));
  g_assert_true(tdm_backend_check(b, NULL));
  /* The CPU has no convolution engine: fitting leaves its columns as they are. */
  size_t before = r->columns_bytes;
  g_assert_true(tdm_replica_fit_workspace(r, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(r->columns_bytes, ==, before);
  *bytes_after = r->columns_bytes;
  tdm_replica_free(r);
  g_assert_cmpuint(b->bytes_in_use, ==, 0);
  tdm_backend_free(b);
  return grads;
}

/* The workspace a replica without a convolution engine grows to for one training step
 * of `batch` samples, spelt out from the layers: each conv's columns, as bf16 where its
 * outputs are no more than its taps in a bf16 run (then after the bf16 output gradient
 * in backward, unless the bn after the conv wrote that over the conv's output,
 * bn_dx_over_input(); the weights' bf16 copy is params16's), else as float32. */
static size_t
own_columns_bytes(const TdmNetwork *net, TdmPrecision precision, int batch)
{
  gboolean stores16 = tdm_replica_stores_bf16(TDM_BACKEND_CPU, precision);
  size_t most = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind != TDM_LAYER_CONV || (l->kernel == 1 && l->stride == 1 && l->pad == 0))
      continue;
    size_t rows = (size_t)batch * l->out_h * l->out_w;
    size_t k = (size_t)l->kernel * l->kernel * l->in_c, out = (size_t)l->out_c;
    gboolean over = i + 1 < net->layer_count && bn_dx_over_input(net, i + 1, stores16, stores16);
    size_t bytes = precision == TDM_PRECISION_BF16 && out <= k ? rows * (k + (over ? 0 : out)) * 2
                                                              : rows * k * 4;
    most = MAX(most, bytes);
  }
  return most;
}

/* The column workspace by its basis: the estimate with GPU replicas' workspaces given
 * (a fake table of choices' needs) moves each replica's workspace and total by exactly
 * the difference from the plan's upper bound, and says "chosen"; without a remembered
 * one it is the upper bound, and a run of CPU workers says "columns". A replica made
 * with a given column workspace allocates exactly the plan with it in place of the
 * upper bound (both bases: estimate = allocation), and one made too small grows to
 * what its convolutions need and computes the same bits. */
static void
test_workspace_basis(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_free(cfg->network);
  cfg->network = g_strdup(resnet18);
  cfg->precision = TDM_PRECISION_BF16;
  cfg->batch = 64;
  g_assert_true(tdm_config_set_devices(cfg, "cuda:0,cuda:0", &error));
  g_assert_no_error(error);
  int capacity = tdm_memory_capacity(cfg, 2, 200);
  int eval = tdm_memory_eval_capacity(cfg, net, TDM_BACKEND_CUDA, 2, 200);
  TdmReplicaBytes rb =
      tdm_memory_replica(net, TDM_BACKEND_CUDA, cfg->precision, capacity, eval, 1000, 200);
  g_assert_cmpuint(rb.columns, >, (guint64)8 << 20);
  g_autofree TdmMemoryEvent *upper = g_new0(TdmMemoryEvent, 1);
  g_autofree TdmMemoryEvent *chosen = g_new0(TdmMemoryEvent, 1);
  g_autofree TdmMemoryEvent *recalled = g_new0(TdmMemoryEvent, 1);
  tdm_memory_estimate_with(cfg, net, 1000, 200, NULL, TDM_WORKSPACE_UPPER_BOUND, upper);
  guint64 need[2] = {(guint64)3 << 20, (guint64)5 << 20};
  tdm_memory_estimate_with(cfg, net, 1000, 200, need, TDM_WORKSPACE_CHOSEN, chosen);
  for (int r = 0; r < 2; r++) {
    g_assert_cmpuint(upper->device[r].workspace - chosen->device[r].workspace, ==,
                     rb.columns - need[r]);
    g_assert_cmpuint(upper->device[r].total - chosen->device[r].total, ==,
                     rb.columns - need[r]);
    g_assert_cmpuint(upper->device[r].activations, ==, chosen->device[r].activations);
  }
  g_assert_cmpuint(upper->gpu_total - chosen->gpu_total, ==,
                   2 * rb.columns - need[0] - need[1]);
  g_assert_cmpstr(tdm_workspace_basis_name(upper->workspace_basis), ==, "upper-bound");
  g_assert_cmpstr(tdm_workspace_basis_name(chosen->workspace_basis), ==, "chosen");
  TdmEvent event = {.kind = TDM_EVENT_MEMORY, .memory = *chosen};
  g_autofree char *json = tdm_event_to_json_line(&event);
  g_assert_nonnull(strstr(json, "\"workspace_basis\":\"chosen\""));
  /* No workspace remembered (the cache is kept in the process, and empty): the upper
   * bound, the same bytes as given none. */
  tdm_memory_estimate(cfg, net, 1000, 200, recalled);
  g_assert_cmpint(recalled->workspace_basis, ==, TDM_WORKSPACE_UPPER_BOUND);
  g_assert_cmpuint(recalled->gpu_total, ==, upper->gpu_total);
  g_assert_true(tdm_config_set_devices(cfg, "cpu:2", &error));
  tdm_memory_estimate(cfg, net, 1000, 200, recalled);
  g_assert_cmpint(recalled->workspace_basis, ==, TDM_WORKSPACE_COLUMNS);

  /* Estimate = allocation with the upper bound and with a workspace given. */
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 200, 90);
  static const char *const small[] = {
    "conv4k3p1,relu,conv6k3s2p1,relu,flatten,fc10",
    "conv8k3p1,bn,relu,conv8k3s2p1,bn,relu,res(conv8k3p1,bn),relu,flatten,fc10",
  };
  for (guint s = 0; s < G_N_ELEMENTS(small); s++) {
    g_autoptr(TdmNetwork) n = tdm_network_new(small[s], 28, 28, 1, 10, &error);
    g_assert_no_error(error);
    for (int prec = TDM_PRECISION_FP32; prec <= TDM_PRECISION_BF16; prec += 2) {
      TdmReplicaBytes planned = tdm_memory_replica(n, TDM_BACKEND_CPU, prec, 16, 16, 200, 90);
      g_assert_cmpuint(planned.columns, >, 4096);
      TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, prec, &error);
      g_assert_no_error(error);
      TdmReplica *r = tdm_replica_new_planned(b, n, 16, 16, 4096, data->train, data->test,
                                              &error);
      g_assert_no_error(error);
      g_assert_cmpuint(b->bytes_in_use, ==, planned.total - planned.columns + 4096);
      tdm_replica_free(r);
      r = tdm_replica_new_planned(b, n, 16, 16, 0, data->train, data->test, &error);
      g_assert_no_error(error);
      g_assert_cmpuint(b->bytes_in_use, ==, planned.total);
      tdm_replica_free(r);
      tdm_backend_free(b);

      /* Too small a workspace grows to the convolutions' columns, with the same bits. */
      size_t grown = 0, whole = 0;
      g_autofree float *from_small = step_with_columns(small[s], prec, 256, data, &grown);
      g_autofree float *from_whole = step_with_columns(small[s], prec, 0, data, &whole);
      g_assert_cmpmem(from_small, n->parameter_count * sizeof(float), from_whole,
                      n->parameter_count * sizeof(float));
      g_test_message("%s, %s: workspace grown from 256 to %zu bytes (plan %zu)", small[s],
                     tdm_precision_name(prec), grown, whole);
      g_assert_cmpuint(grown, >, 256);
      g_assert_cmpuint(grown, <=, whole);
      g_assert_cmpuint(grown, ==, own_columns_bytes(n, prec, 16));
      if (prec == TDM_PRECISION_BF16)
        g_assert_cmpuint(grown, <, whole);
    }
  }
}

/* Where a replica's bytes go, by category, for the ResNet-18 rows and
 * torchvision's ResNet-50 on a GPU in bf16, as the bench runs them (10 classes;
 * bench/NOTES.md's table): parameters, their gradients, the activations backward reads
 * by the kind of layer that writes them (the block ends' ReLU masks apart), the
 * workspace's parts (the column workspace at its upper bound, the bns' small buffers,
 * the skip buffer, the two gradient buffers, the labels, indices and metrics), the
 * inference buffers. The parts sum to the plan. */
static void
test_plan_breakdown(void)
{
  /* The one window of the gradient buffers, apart from the arena, as derived here (the
   * windows: test_gradient_windows). */
  g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) cifar = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) cifar64 = tdm_network_new(resnet18, 64, 64, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) cifar128 = tdm_network_new(resnet18, 128, 128, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) tv = tdm_network_new("resnet18", 224, 224, 3, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) tv50 = tdm_network_new("resnet50", 224, 224, 3, 10, &error);
  g_assert_no_error(error);
  const struct {
    TdmNetwork *net;
    int batch;
    const char *name;
  } rows[] = {{cifar, 512, "CIFAR ResNet-18, 32 px, batch 512"},
              {cifar64, 256, "CIFAR ResNet-18, 64 px, batch 256"},
              {cifar128, 128, "CIFAR ResNet-18, 128 px, batch 128"},
              {tv, 128, "resnet18, 224 px, batch 128"},
              {tv50, 128, "resnet50, 224 px, batch 128"}};
  static const char *const kinds[] = {"linear", "conv",  "max pool", "relu",    "flatten",
                                      "bn",     "avg pool", "global avg", "global max",
                                      "dropout", "scale", "block start", "block end"};
  for (guint k = 0; k < G_N_ELEMENTS(rows); k++) {
    const TdmNetwork *net = rows[k].net;
    size_t cap = (size_t)rows[k].batch;
    int eval = tdm_replica_eval_capacity(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16,
                                         rows[k].batch, 1000);
    TdmReplicaPlan p = tdm_replica_plan(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16,
                                        rows[k].batch, eval);
    size_t by_kind[G_N_ELEMENTS(kinds)] = {0}, projections = 0, argmax = 0, bn_work = 0;
    size_t masks = 0;
    size_t argmax_bytes_each = 0;
    for (int i = 0; i < net->layer_count; i++) {
      TdmLayerBuffers buf =
          tdm_replica_layer_buffers(net, i, TDM_BACKEND_CUDA, TDM_PRECISION_BF16);
      by_kind[net->layers[i].kind] += cap * buf.output * tdm_dtype_size(buf.output_type);
      projections += cap * buf.projection * tdm_dtype_size(buf.projection_type);
      argmax += cap * buf.argmax * buf.argmax_size;
      argmax_bytes_each = MAX(argmax_bytes_each, buf.argmax_size);
      bn_work += buf.bn_work * sizeof(float);
      masks += (cap * buf.relu_bits + 31) / 32 * sizeof(uint32_t);
    }
    g_assert_cmpuint(masks, ==, bf16_relu_bits_bytes(net, cap));
    size_t input = cap * net->in_h * net->in_w * net->in_c * sizeof(float);
    size_t acts = input + projections + argmax + masks;
    g_test_message("%s, GPU, bf16, evaluation chunk %d: total %zu", rows[k].name, eval,
                   (size_t)(p.parameters + p.gradients + p.activations + p.workspace +
                            p.inference));
    g_test_message("  parameters (+ state, bf16 copy) %zu, their gradients %zu", p.parameters,
                   p.gradients);
    g_test_message("  activations %zu: input %zu, projections' conv outputs %zu, pools' "
                   "argmax %zu (%zu bytes each), block ends' ReLU masks %zu",
                   p.activations, input, projections, argmax, argmax_bytes_each, masks);
    for (guint j = 0; j < G_N_ELEMENTS(kinds); j++) {
      acts += by_kind[j];
      if (by_kind[j] > 0)
        g_test_message("    outputs of %s layers: %zu", kinds[j], by_kind[j]);
    }
    g_assert_cmpuint(acts, ==, p.activations);
    size_t skips = skip_bytes(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16) * cap;
    size_t grads = 2 * cap * tdm_replica_gradient_bytes(net, TDM_BACKEND_CUDA,
                                                        TDM_PRECISION_BF16);
    size_t rest = 2 * MAX(cap, (size_t)eval) * sizeof(int32_t) + sizeof(TdmMetrics);
    g_test_message("  workspace %zu: columns (upper bound) %zu, bn buffers %zu, skip "
                   "buffer %zu, gradient buffers %zu (2 x %zu a sample), labels/indices/"
                   "metrics %zu", p.workspace, p.columns, bn_work, skips, grads,
                   grads / cap / 2, rest);
    g_assert_cmpuint(p.columns + bn_work + skips + grads + rest, ==, p.workspace);
    g_test_message("  inference %zu", p.inference);
  }
  g_unsetenv("TANDEM_GRADIENT_WINDOWS");
}

/* The activation arena: the inference pass's buffers lie over the training's
 * activations. An evaluation between two steps changes neither the next step (its
 * gradients the bits of a step after a step) nor an evaluation's logits (the bits of an
 * evaluation before any step), fp32 and bf16, with an evaluation chunk larger than the
 * training shard (the arena then the inference's size) and smaller (the training's). */
static void
test_arena_evaluation_between_steps(void)
{
  static const char *const nets[] = {
    "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
    "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
    "conv8k3s2p1,bn,relu,pool3s2p1,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,pool2,flatten,"
    "fc10",
  };
  static const int shapes[][2] = {{8, 40}, {16, 5}}; /* capacity, evaluation chunk */
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 40);
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++)
    for (int prec = TDM_PRECISION_FP32; prec <= TDM_PRECISION_BF16; prec += 2)
      for (guint s = 0; s < G_N_ELEMENTS(shapes); s++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(TdmNetwork) net = tdm_network_new(nets[k], 28, 28, 1, 10, &error);
        g_assert_no_error(error);
        TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, prec, &error);
        g_assert_no_error(error);
        int cap = shapes[s][0], chunk = shapes[s][1];
        TdmReplica *r = tdm_replica_new_sized(b, net, cap, chunk, data->train, data->test,
                                              &error);
        g_assert_no_error(error);
        TdmReplicaPlan p = tdm_replica_plan(net, TDM_BACKEND_CPU, prec, cap, chunk);
        g_assert_cmpuint(p.activations + p.inference, ==,
                         MAX(p.activations, tdm_replica_infer_arena_bytes(
                                              net, tdm_replica_stores_bf16(TDM_BACKEND_CPU, prec), chunk)));
        size_t n = net->parameter_count, out = (size_t)chunk * net->classes;
        g_autofree float *params = g_new(float, n);
        tdm_network_init_parameters(net, 3, params);
        g_autofree float *first_logits = g_new(float, out);
        g_autofree float *again_logits = g_new(float, out);
        size_t ns = MAX(1, net->state_count);
        g_autofree float *state = g_new(float, ns);
        tdm_backend_upload(b, r->params, params, n * sizeof(float));
        tdm_backend_download(b, state, r->state, ns * sizeof(float));
        tdm_replica_predict(r, 0, chunk, first_logits);
        g_autofree float *first = replica_step_gradients(r, params, cap);
        g_autofree float *second = replica_step_gradients(r, params, cap);
        /* The steps moved the running statistics, which an evaluation reads: back to
         * where the first evaluation found them. */
        tdm_backend_upload(b, r->state, state, ns * sizeof(float));
        tdm_replica_predict(r, 0, chunk, again_logits);
        g_autofree float *after = replica_step_gradients(r, params, cap);
        g_assert_cmpmem(first_logits, out * sizeof(float), again_logits, out * sizeof(float));
        g_assert_cmpmem(first, n * sizeof(float), second, n * sizeof(float));
        g_assert_cmpmem(second, n * sizeof(float), after, n * sizeof(float));
        tdm_replica_free(r);
        g_assert_cmpuint(b->bytes_in_use, ==, 0);
        tdm_backend_free(b);
      }
}

void
test_memory_add_workspace(void)
{
  g_test_add_func("/memory/workspace-basis", test_workspace_basis);
  g_test_add_func("/memory/plan-breakdown", test_plan_breakdown);
  g_test_add_func("/memory/arena-evaluation-between-steps",
                  test_arena_evaluation_between_steps);
}
