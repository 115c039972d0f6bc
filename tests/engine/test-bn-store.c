/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-bn-store.c — a bn's output stored as bf16 for the conv after it
 * (TANDEM_BN_STORE, tdm_replica_bn_store()) instead of normalized by that conv as it
 * reads it: bf16 runs on CPU workers train to the same bits with every such output
 * stored, some of them (a threshold, or the automatic rule's when unset) or none,
 * frozen bns included; the plan's activations grow by exactly the stored buffers and
 * nothing else moves; unset, the largest candidate whose plan grows by at most
 * 1/TDM_BN_STORE_GROWTH (the benchmark's networks), nothing where nothing can be stored; a
 * malformed value is warned about and read as unset; a device without room for the
 * automatic rule's store gets a replica without it. The prologue's own operations are
 * test-backend-cpu-bf16.c's. */
#include "replica-step.h"
#include "resnet18-cifar.h"
#include "synthetic-idx.h"
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-network.h"
#include "tdm-replica-private.h"
#include "tdm-replica.h"
#include "tdm-trainer.h"

#include <string.h>

/* The runs' dataset: the synthetic set's images as IDX files, 1,000 to train on. */
static char *dataset;

/* Basic blocks whose inner bns feed a 3×3 conv (two eligible: 28×28×32 and 14×14×64,
 * 3.06 and 1.53 MiB as bf16 at batch 64, so a threshold of 2 MiB stores the second
 * only), and bottlenecks (each block's two inner bns feed a conv). */
static const char basic_net[] = "conv32k3p1,bn,relu,res(conv32k3p1,bn,relu,conv32k3p1,bn),relu,"
                                "res(conv64k3s2p1,bn,relu,conv64k3p1,bn),relu,gap,fc10";
static const char bottleneck_net[] =
    "conv8k3p1,bn,relu,pool3s2p1,bottleneck4,bottleneck4,bottleneck8s2,gap,fc10";
/* A conv after the stem's bn: the first trained conv reads a frozen bn's output. */
static const char frozen_net[] = "conv8k3p1,bn,relu,conv8k3p1,bn,relu,"
                                 "res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,conv16k3s2p1,bn,"
                                 "relu,gap,fc10";

/* Sets TANDEM_BN_STORE (NULL: unset, the automatic rule). */
static void
set_store(const char *value)
{
  if (value == NULL)
    g_unsetenv("TANDEM_BN_STORE");
  else
    g_assert_true(g_setenv("TANDEM_BN_STORE", value, TRUE));
}

/* The parameters after `steps` bf16 SGD steps of `network` on `devices` at batch 64,
 * TANDEM_BN_STORE set to `store` (NULL: unset) while the trainer makes its replicas. */
static float *
train(const char *network, const char *devices, const char *const *freeze, const char *store,
      size_t *count)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup(network);
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  cfg->precision = TDM_PRECISION_BF16;
  cfg->optimizer = TDM_OPTIMIZER_SGD;
  cfg->lr = 0.05;
  cfg->batch = 64;
  cfg->max_steps = 3;
  cfg->seed = 7;
  if (freeze != NULL)
    cfg->freeze = g_strdupv((char **)freeze);
  set_store(store);
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  set_store(NULL);
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  g_assert_nonnull(params);
  return g_memdup2(params, *count * sizeof(float));
}

/* How many of net's bns a bf16 replica of this kind and `capacity` samples stores for
 * their conv with TANDEM_BN_STORE=store (NULL: unset), and their bytes in the activation
 * arena. */
static int
stored_bns(const TdmNetwork *net, TdmBackendKind kind, const char *store, int capacity,
           size_t *bytes)
{
  set_store(store);
  size_t bn_store = tdm_replica_bn_store(net, kind, TDM_PRECISION_BF16, capacity);
  set_store(NULL);
  int count = 0;
  *bytes = 0;
  for (int i = 0; i < net->layer_count; i++)
    if (bn_output_stored(net, i, TRUE, bn_store)) {
      count++;
      *bytes +=
          arena_piece((size_t)capacity * layer_out_floats(&net->layers[i]) * sizeof(uint16_t));
    }
  return count;
}

/* The same bits with every eligible bn output stored, some (2 MiB: basic_net's second
 * stage only), those the automatic rule picks (unset) and none, on one worker and two;
 * and with the stem's bn frozen, whose output the first trained conv reads (a buffer of
 * its own where stored, else the free gradient region, computed again for the weight
 * gradient). */
static void
test_same_bits(void)
{
  g_autoptr(TdmNetwork) basic = tdm_network_new(basic_net, 28, 28, 1, 10, NULL);
  g_autoptr(TdmNetwork) bottleneck = tdm_network_new(bottleneck_net, 28, 28, 1, 10, NULL);
  size_t bytes;
  g_assert_cmpint(stored_bns(basic, TDM_BACKEND_CPU, "all", 64, &bytes), ==, 2);
  g_assert_cmpint(stored_bns(basic, TDM_BACKEND_CPU, "2", 64, &bytes), ==, 1);
  g_assert_cmpint(stored_bns(bottleneck, TDM_BACKEND_CPU, "all", 64, &bytes), ==, 6);
  g_test_message("unset, batch 64 on a CPU: basic_net stores %d bn outputs, bottleneck_net %d",
                 stored_bns(basic, TDM_BACKEND_CPU, NULL, 64, &bytes),
                 stored_bns(bottleneck, TDM_BACKEND_CPU, NULL, 64, &bytes));
  struct {
    const char *net, *devices;
    const char *const *freeze;
  } runs[] = {
      {basic_net, "cpu", NULL},
      {basic_net, "cpu:2", NULL},
      {bottleneck_net, "cpu", NULL},
      {frozen_net, "cpu", (const char *const[]){"conv1", "bn1", NULL}},
  };
  const char *stores[] = {"all", "2", NULL};
  for (guint k = 0; k < G_N_ELEMENTS(runs); k++) {
    size_t n = 0;
    g_autofree float *base = train(runs[k].net, runs[k].devices, runs[k].freeze, "0", &n);
    for (guint s = 0; s < G_N_ELEMENTS(stores); s++) {
      size_t m = 0;
      g_autofree float *p = train(runs[k].net, runs[k].devices, runs[k].freeze, stores[s], &m);
      g_assert_cmpuint(m, ==, n);
      size_t differ = 0;
      for (size_t i = 0; i < n; i++)
        differ += memcmp(&base[i], &p[i], sizeof(float)) != 0;
      g_test_message("%s on %s%s, TANDEM_BN_STORE=%s: %zu of %zu parameters differ from "
                     "no store",
                     runs[k].net, runs[k].devices,
                     runs[k].freeze != NULL ? ", stem frozen" : "",
                     stores[s] != NULL ? stores[s] : "(unset)", differ, n);
      g_assert_cmpuint(differ, ==, 0);
    }
  }
}

/* The plan: 0 gives the plan that stores none; `all` and a threshold grow the
 * activations by exactly the stored outputs' arena pieces (capacity × out × 2 bytes each,
 * from the layers' shapes), and leave everything else as it was but the inference pass's
 * excess over the activations, on both kinds of backend; a float32 run stores nothing. */
static void
test_plan(void)
{
  /* The one window of the gradient buffers, apart from the arena, as derived here (the
   * windows: test_gradient_windows). */
  g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
  const struct {
    const char *spec;
    int capacity;
    const char *threshold; /* stores some, not all */
  } nets[] = {{basic_net, 64, "2"}, {bottleneck_net, 1024, "2"}};
  TdmBackendKind kinds[] = {TDM_BACKEND_CPU, TDM_BACKEND_CUDA};
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++) {
    g_autoptr(TdmNetwork) net = tdm_network_new(nets[k].spec, 28, 28, 1, 10, NULL);
    g_assert_nonnull(net);
    int cap = nets[k].capacity;
    for (guint d = 0; d < G_N_ELEMENTS(kinds); d++) {
      set_store("0");
      TdmReplicaPlan zero = tdm_replica_plan(net, kinds[d], TDM_PRECISION_BF16, cap, 100);
      set_store(NULL);
      TdmReplicaPlan none =
          tdm_replica_plan_stored(net, kinds[d], TDM_PRECISION_BF16, cap, 100, 0);
      g_assert_true(memcmp(&zero, &none, sizeof zero) == 0);
      const char *stores[] = {"all", nets[k].threshold};
      size_t all_bytes = 0;
      for (guint s = 0; s < G_N_ELEMENTS(stores); s++) {
        size_t bytes;
        int count = stored_bns(net, kinds[d], stores[s], cap, &bytes);
        g_assert_cmpint(count, >, 0);
        set_store(stores[s]);
        TdmReplicaPlan p = tdm_replica_plan(net, kinds[d], TDM_PRECISION_BF16, cap, 100);
        TdmReplicaPlan p32 = tdm_replica_plan(net, kinds[d], TDM_PRECISION_FP32, cap, 100);
        set_store(NULL);
        g_test_message("%s, %s, batch %d, TANDEM_BN_STORE=%s: %d bn outputs stored, "
                       "%zu bytes more activations",
                       nets[k].spec, kinds[d] == TDM_BACKEND_CPU ? "cpu" : "cuda", cap,
                       stores[s], count, bytes);
        g_assert_cmpuint(p.activations, ==, zero.activations + bytes);
        g_assert_cmpuint(p.parameters, ==, zero.parameters);
        g_assert_cmpuint(p.gradients, ==, zero.gradients);
        g_assert_cmpuint(p.columns, ==, zero.columns);
        g_assert_cmpuint(p.workspace, ==, zero.workspace);
        g_assert_cmpuint(p.activations + p.inference, >=, zero.activations + zero.inference);
        set_store("0");
        TdmReplicaPlan f32 = tdm_replica_plan(net, kinds[d], TDM_PRECISION_FP32, cap, 100);
        set_store(NULL);
        g_assert_true(memcmp(&p32, &f32, sizeof f32) == 0);
        if (s == 0)
          all_bytes = bytes;
        else
          g_assert_cmpuint(bytes, <, all_bytes);
      }
    }
  }
  g_unsetenv("TANDEM_GRADIENT_WINDOWS");
}

/* The replica tests' network (28 × 28 × 1, ten classes) and its parameters, seed 7. */
static TdmNetwork *
replica_network(const char *spec, float **params)
{
  g_autoptr(GError) error = NULL;
  TdmNetwork *net = tdm_network_new(spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  *params = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 7, *params);
  return net;
}

/* A replica made with TANDEM_BN_STORE=all keeps, after a step, each eligible bn's output
 * in a bf16 buffer of its own, which the conv after it reads as its stored input (the bn
 * leaves nothing to it: no prologue), written by the bn's forward (a ReLU's values: none
 * negative, some positive; /bn-store/same-bits says they are the prologue's bits). One
 * made with 0 leaves every such output to its conv; one made with it unset keeps those
 * the automatic rule says, as its plan counts. */
static void
test_replica(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree float *params = NULL;
  g_autoptr(TdmNetwork) net = replica_network(bottleneck_net, &params);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 40, 20);
  const int n = 12;
  const char *stores[] = {"0", "all", NULL};
  for (guint s = 0; s < G_N_ELEMENTS(stores); s++) {
    TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
    g_assert_no_error(error);
    set_store(stores[s]);
    TdmReplica *r = tdm_replica_new_sized(b, net, n, n, data->train, data->test, &error);
    set_store(NULL);
    g_assert_no_error(error);
    g_assert_true(r->stores_bf16);
    /* The arena is what the plan counts. */
    set_store(stores[s]);
    TdmReplicaPlan p = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, n, n);
    size_t bn_store = tdm_replica_bn_store(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, n);
    set_store(NULL);
    g_assert_cmpuint(r->bn_store, ==, bn_store);
    g_assert_cmpuint(r->arena_bytes, ==, p.activations + p.inference);
    g_autofree float *grads = replica_step_gradients(r, params, n);
    /* The outputs as a forward wrote them: a forward again, since the step's backward
     * may put the low window of its gradient buffers over the later layers' pieces,
     * dead by then (TdmGradientWindows; these bottlenecks split at the third block, its
     * first bn's output under the low skip buffer, since the third block's projection
     * keeps room for its start's sum and its share, skip_grad_of()). */
    g_autofree int32_t *indices = g_new(int32_t, n);
    for (int k = 0; k < n; k++)
      indices[k] = k;
    tdm_replica_train_loss(r, indices, n);
    int eligible = 0, kept = 0;
    for (int i = 0; i < net->layer_count; i++) {
      if (!bn_output_to_conv(net, i, TRUE))
        continue;
      eligible++;
      gboolean stored = bn_output_stored(net, i, TRUE, bn_store);
      kept += stored;
      g_assert_cmpint(bn_output_left_to_next(r, i, n, MODE_TRAIN), ==, !stored);
      g_assert_cmpint(act_type(r, i + 1), ==, stored ? TDM_DTYPE_BF16 : TDM_DTYPE_F32);
      if (!stored) {
        g_assert_null(r->acts[i + 1]);
        continue;
      }
      g_assert_nonnull(r->acts[i + 1]);
      size_t count = (size_t)n * layer_out_floats(&net->layers[i]);
      const uint16_t *y16 = (const uint16_t *)r->acts[i + 1];
      size_t positive = 0;
      for (size_t e = 0; e < count; e++) {
        g_assert_cmpuint(y16[e] & 0x8000u, ==, 0);
        positive += y16[e] != 0;
      }
      g_assert_cmpuint(positive, >, 0);
    }
    g_assert_cmpint(eligible, ==, 6);
    if (stores[s] != NULL)
      g_assert_cmpint(kept, ==, strcmp(stores[s], "all") == 0 ? eligible : 0);
    g_test_message("TANDEM_BN_STORE=%s, batch %d: %d of %d bn outputs stored",
                   stores[s] != NULL ? stores[s] : "(unset)", n, kept, eligible);
    tdm_replica_free(r);
    tdm_backend_free(b);
  }
}

/* A CPU bf16 replica of net at batch n on b, made with TANDEM_BN_STORE = store (NULL:
 * unset) under a limit of `limit` bytes on b (0: none); NULL with *error where it cannot
 * be made. */
static TdmReplica *
replica_under(TdmBackend *b, const TdmNetwork *net, const TdmDatasetPair *data, int n,
              const char *store, size_t limit, GError **error)
{
  b->bytes_limit = limit;
  set_store(store);
  TdmReplica *r = tdm_replica_new_sized(b, net, n, n, data->train, data->test, error);
  set_store(NULL);
  return r;
}

/* Where the device has no room for the outputs the automatic rule stores (the basic
 * blocks' two, which grow this replica by what they take), the replica is made without
 * them (one message says so) and holds what one made with 0 holds; it computes the same
 * gradients as one that stores them. A store the environment asked for fails there as
 * out of memory, and what the failed tries took is given back. */
static void
test_no_room(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree float *params = NULL;
  g_autoptr(TdmNetwork) net = replica_network(basic_net, &params);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 40, 20);
  const int n = 12;
  g_assert_cmpuint(tdm_replica_bn_store(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, n), >, 0);

  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  size_t base = b->bytes_in_use;
  TdmReplica *stored = replica_under(b, net, data, n, NULL, 0, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(stored->bn_store, >, 0);
  size_t with = b->bytes_in_use - base;
  g_autofree float *expected = replica_step_gradients(stored, params, n);
  tdm_replica_free(stored);
  TdmReplica *none = replica_under(b, net, data, n, "0", 0, &error);
  g_assert_no_error(error);
  size_t without = b->bytes_in_use - base;
  tdm_replica_free(none);
  g_assert_cmpuint(without, <, with);
  g_test_message("held with the automatic store %zu, with none %zu bytes", with, without);

  /* Room for the replica without the store, not with it. */
  size_t limit = base + without + (with - without) / 2;
  g_test_expect_message("Tandem-Model", G_LOG_LEVEL_MESSAGE,
                        "*no room for the bn outputs stored for their convs*out of memory*");
  TdmReplica *r = replica_under(b, net, data, n, NULL, limit, &error);
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  g_assert_cmpuint(r->bn_store, ==, 0);
  g_assert_cmpuint(b->bytes_in_use - base, ==, without);
  g_autofree float *grads = replica_step_gradients(r, params, n);
  g_assert_cmpmem(grads, net->parameter_count * sizeof(float), expected,
                  net->parameter_count * sizeof(float));
  tdm_replica_free(r);

  /* Asked for: no second try. */
  r = replica_under(b, net, data, n, "all", limit, &error);
  g_assert_null(r);
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY);
  g_assert_cmpuint(b->bytes_in_use, ==, base);
  b->bytes_limit = 0;
  tdm_backend_free(b);
}

/* The five rows of bench/bench-real-networks.py (ROWS: its CIFAR18 spec is resnet18-cifar.h's),
 * ten classes each. */
static const struct {
  const char *name, *spec;
  int side, batch;
} bench_rows[] = {{"r18-32", resnet18, 32, 512},
                  {"r18-64", resnet18, 64, 256},
                  {"r18-128", resnet18, 128, 128},
                  {"tv18-224", "resnet18", 224, 128},
                  {"tv50-224", "resnet50", 224, 128}};

/* Whether the training's plan storing up to bn_store bytes a sample grows by at most
 * 1/TDM_BN_STORE_GROWTH of the plan storing none (`none`, its total). */
static gboolean
grows_within(const TdmNetwork *net, TdmBackendKind kind, int capacity, size_t none,
             size_t bn_store, size_t *total)
{
  TdmReplicaPlan p =
      tdm_replica_plan_stored(net, kind, TDM_PRECISION_BF16, capacity, 0, bn_store);
  *total = tdm_replica_plan_total(&p);
  g_assert_cmpuint(*total, >=, none);
  return (*total - none) * TDM_BN_STORE_GROWTH <= none;
}

/* Unset, a bf16 replica on either kind of backend stores the bn outputs of at most T
 * bytes a sample: 0 or one of the sizes of the outputs that could be stored (the
 * candidates, each found among the layers), whose plan grows by at most
 * 1/TDM_BN_STORE_GROWTH of the plan storing none, where the next larger candidate's would
 * grow by more; the plan it computes is the one storing T (and a replica's field says T:
 * /bn-store/replica), and 0 is the plan storing none. A float32 run, or one that keeps
 * float32 activations, has no candidate: 0. The table's figures are bench/NOTES.md's. */
static void
test_auto(void)
{
  TdmBackendKind kinds[] = {TDM_BACKEND_CUDA, TDM_BACKEND_CPU};
  int chose = 0;
  g_test_message("cuda, bf16, training plan: row | T, bytes a sample | MiB a bn output at the "
                 "batch | total with 0 | total with T | growth | the next candidate's");
  for (guint k = 0; k < G_N_ELEMENTS(bench_rows); k++) {
    g_autoptr(GError) error = NULL;
    int side = bench_rows[k].side, cap = bench_rows[k].batch;
    g_autoptr(TdmNetwork) net = tdm_network_new(bench_rows[k].spec, side, side, 3, 10, &error);
    g_assert_no_error(error);
    g_autofree size_t *sizes = g_new(size_t, net->layer_count);
    for (guint d = 0; d < G_N_ELEMENTS(kinds); d++) {
      g_assert_true(tdm_replica_stores_bf16(kinds[d], TDM_PRECISION_BF16));
      int n = tdm_replica_bn_store_sizes(net, kinds[d], TDM_PRECISION_BF16, sizes);
      g_assert_cmpint(n, >, 0);
      /* The candidates: ascending, distinct, each an eligible output's size, and every
       * eligible output's size among them. */
      for (int c = 0; c < n; c++) {
        g_assert_true(c == 0 || sizes[c - 1] < sizes[c]);
        gboolean found = FALSE;
        for (int i = 0; i < net->layer_count && !found; i++)
          found = bn_output_stored(net, i, TRUE, G_MAXSIZE) &&
                  layer_out_floats(&net->layers[i]) * sizeof(uint16_t) == sizes[c];
        g_assert_true(found);
      }
      for (int i = 0; i < net->layer_count; i++) {
        size_t out = layer_out_floats(&net->layers[i]) * sizeof(uint16_t);
        gboolean found = !bn_output_stored(net, i, TRUE, G_MAXSIZE);
        for (int c = 0; c < n && !found; c++)
          found = sizes[c] == out;
        g_assert_true(found);
      }
      size_t t = tdm_replica_bn_store(net, kinds[d], TDM_PRECISION_BF16, cap);
      TdmReplicaPlan p = tdm_replica_plan(net, kinds[d], TDM_PRECISION_BF16, cap, 0);
      TdmReplicaPlan with =
          tdm_replica_plan_stored(net, kinds[d], TDM_PRECISION_BF16, cap, 0, t);
      g_assert_true(memcmp(&p, &with, sizeof p) == 0);
      set_store("0");
      g_assert_cmpuint(tdm_replica_bn_store(net, kinds[d], TDM_PRECISION_BF16, cap), ==, 0);
      TdmReplicaPlan zero = tdm_replica_plan(net, kinds[d], TDM_PRECISION_BF16, cap, 0);
      set_store(NULL);
      TdmReplicaPlan none =
          tdm_replica_plan_stored(net, kinds[d], TDM_PRECISION_BF16, cap, 0, 0);
      g_assert_true(memcmp(&zero, &none, sizeof p) == 0);
      size_t base = tdm_replica_plan_total(&none), total;
      int at = -1; /* T's index among the candidates */
      for (int c = 0; c < n; c++)
        if (sizes[c] == t)
          at = c;
      g_assert_true(t == 0 || at >= 0);
      g_assert_true(grows_within(net, kinds[d], cap, base, t, &total));
      g_assert_cmpuint(tdm_replica_plan_total(&p), ==, total);
      size_t next_total = 0;
      if (at + 1 < n)
        g_assert_false(grows_within(net, kinds[d], cap, base, sizes[at + 1], &next_total));
      chose += t > 0;
      if (kinds[d] == TDM_BACKEND_CUDA)
        g_test_message("%-8s | %9zu | %7.1f | %13zu | %13zu | %5.2f %% | next %s%zu B, "
                       "%.2f %%",
                       bench_rows[k].name, t, (double)t * cap / 1048576.0, base, total,
                       100.0 * (double)(total - base) / (double)base,
                       at + 1 < n ? "" : "(none) ", at + 1 < n ? sizes[at + 1] : 0,
                       at + 1 < n ? 100.0 * (double)(next_total - base) / (double)base : 0.0);
      /* Nothing to store in float32: no candidate, 0. */
      g_assert_cmpint(tdm_replica_bn_store_sizes(net, kinds[d], TDM_PRECISION_FP32, sizes), ==,
                      0);
      g_assert_cmpuint(tdm_replica_bn_store(net, kinds[d], TDM_PRECISION_FP32, cap), ==, 0);
    }
    /* Activations kept float32 (TANDEM_BF16_ACTIVATIONS=0): none either. */
    g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
    g_assert_cmpint(
        tdm_replica_bn_store_sizes(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, sizes), ==, 0);
    g_assert_cmpuint(tdm_replica_bn_store(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, cap), ==,
                     0);
    g_unsetenv("TANDEM_BF16_ACTIVATIONS");
  }
  /* The rule stores something somewhere: the default is no longer none. */
  g_assert_cmpint(chose, >, 0);
}

/* A value that is neither 0, all nor a whole number of MiB: one warning that names the
 * variable and the value and says what it is read as (once however often a plan reads
 * it), then the plan of unset: the automatic rule's. */
static void
test_malformed(void)
{
  g_autoptr(TdmNetwork) net = tdm_network_new(basic_net, 28, 28, 1, 10, NULL);
  TdmReplicaPlan unset = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 64, 100);
  const char *bad[] = {"lots", "32MiB", "-1", "1.5"};
  for (guint k = 0; k < G_N_ELEMENTS(bad); k++) {
    g_autofree char *pattern =
        g_strdup_printf("*TANDEM_BN_STORE=\"%s\"*chosen as when it is unset*", bad[k]);
    g_test_expect_message("Tandem-Model", G_LOG_LEVEL_WARNING, pattern);
    set_store(bad[k]);
    TdmReplicaPlan p = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 64, 100);
    TdmReplicaPlan again = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 64, 100);
    size_t bn_store = tdm_replica_bn_store(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 64);
    set_store(NULL);
    g_assert_cmpuint(bn_store, ==,
                     tdm_replica_bn_store(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 64));
    g_test_assert_expected_messages();
    g_assert_true(memcmp(&unset, &p, sizeof p) == 0);
    g_assert_true(memcmp(&unset, &again, sizeof p) == 0);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_unsetenv("TANDEM_BN_STORE");
  g_test_add_func("/bn-store/same-bits", test_same_bits);
  g_test_add_func("/bn-store/replica", test_replica);
  g_test_add_func("/bn-store/plan", test_plan);
  g_test_add_func("/bn-store/auto", test_auto);
  g_test_add_func("/bn-store/malformed", test_malformed);
  g_test_add_func("/bn-store/no-room", test_no_room);
  dataset = test_synthetic_idx_new(0, 1000, 200);
  int status = g_test_run();
  test_remove_synthetic_idx(dataset);
  return status;
}
