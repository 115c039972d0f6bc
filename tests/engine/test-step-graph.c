/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-step-graph.c — which training steps a replica captures into a graph, which it
 * replays and which it runs eagerly, and what the graph holds: on the CPU backend with
 * a stand-in for a GPU's graphs. The stand-in runs each operation when it is issued
 * (a capture computes, the launch after it does nothing, a replay nothing at all), so
 * it checks the structure and counts, not numbers; like a GPU it refuses memory
 * operations while capturing (allocation, release, upload, download, synchronize) and
 * drops every graph when a buffer is released. The numbers of a graph against none
 * are tests/gpu/test-cuda-train.c's. Also the optimizer's rates on the device: the
 * values a prepared update reads, and its bits against the operation given them; and
 * the trainer's update inside the step against after it, bit for bit. */
#include "tdm-backend.h"
#include "tdm-backend-ops.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-network.h"
#include "tdm-optimizer.h"
#include "tdm-replica.h"
#include "tdm-trainer.h"

#include <math.h>
#include <string.h>

#define COUNT 24
#define SHARD 8

typedef struct {
  TdmBackendOps ops;
  const TdmBackendOps *real;
  gboolean capturing;
  guint64 begun_at;             /* b->operations when the capture began */
  GHashTable *graphs;           /* key → operations captured */
  int captures, launches;
} Fake;

static Fake fake;

static void
refuse_in_capture(TdmBackend *b, const char *what)
{
  if (fake.capturing)
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, "%s inside a graph capture", what);
}

static void *
fake_alloc(TdmBackend *b, size_t bytes, GError **error)
{
  if (fake.capturing) {
    refuse_in_capture(b, "alloc");
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_BACKEND, "alloc in a capture");
    return NULL;
  }
  return fake.real->alloc(b, bytes, error);
}

static void
fake_free(TdmBackend *b, void *ptr)
{
  refuse_in_capture(b, "free");
  /* A graph holds raw pointers: a GPU drops them all when any buffer goes. */
  g_hash_table_remove_all(fake.graphs);
  fake.real->free(b, ptr);
}

static void
fake_upload(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  refuse_in_capture(b, "upload");
  fake.real->upload(b, dst, src, bytes);
}

static void
fake_download(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  refuse_in_capture(b, "download");
  fake.real->download(b, dst, src, bytes);
}

static void
fake_synchronize(TdmBackend *b)
{
  refuse_in_capture(b, "synchronize");
  fake.real->synchronize(b);
}

static gboolean
fake_graph_begin(TdmBackend *b, int key)
{
  if (fake.capturing)
    return FALSE;
  g_hash_table_remove(fake.graphs, GINT_TO_POINTER(key));
  fake.capturing = TRUE;
  fake.begun_at = b->operations;
  fake.captures++;
  return TRUE;
}

static void
fake_graph_end(TdmBackend *b, int key)
{
  g_assert_true(fake.capturing);
  fake.capturing = FALSE;
  g_hash_table_insert(fake.graphs, GINT_TO_POINTER(key),
                      GSIZE_TO_POINTER(b->operations - fake.begun_at));
}

static gboolean
fake_graph_launch(TdmBackend *b, int key)
{
  if (fake.capturing || !g_hash_table_contains(fake.graphs, GINT_TO_POINTER(key)))
    return FALSE;
  fake.launches++;
  return TRUE;
}

static TdmBackend *
fake_backend(void)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  memset(&fake, 0, sizeof fake);
  fake.real = b->ops;
  fake.ops = *b->ops;
  fake.ops.alloc = fake_alloc;
  fake.ops.free = fake_free;
  fake.ops.upload = fake_upload;
  fake.ops.download = fake_download;
  fake.ops.synchronize = fake_synchronize;
  fake.ops.graph_begin = fake_graph_begin;
  fake.ops.graph_end = fake_graph_end;
  fake.ops.graph_launch = fake_graph_launch;
  fake.graphs = g_hash_table_new(g_direct_hash, g_direct_equal);
  b->ops = &fake.ops;
  g_assert_true(tdm_backend_has_graphs(b));
  return b;
}

static void
free_fake(TdmBackend *b)
{
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_backend_check(b, &error));
  g_assert_no_error(error);
  b->ops = fake.real;
  tdm_backend_free(b);
  g_hash_table_destroy(fake.graphs);
}

static TdmDataset *
random_dataset(void)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(5);
  TdmDataset *d = tdm_dataset_new("graph", COUNT, 8, 8, 3, 10);
  for (int i = 0; i < COUNT * 8 * 8 * 3; i++)
    d->images[i] = (uint8_t)g_rand_int_range(rng, 0, 256);
  for (int i = 0; i < COUNT; i++)
    d->labels[i] = (uint8_t)g_rand_int_range(rng, 0, 10);
  return d;
}

/* The stride-2 conv and the first (3 input channels) build im2col columns on the CPU,
 * so a replica whose column workspace starts at 16 bytes must grow it in its first
 * step. */
static const char *const SPEC = "conv8k3p1,bn,relu,conv16k3s2p1,bn,relu,gap,fc10";

typedef struct {
  TdmBackend *b;
  TdmNetwork *net;
  TdmDataset *data;
  TdmReplica *rep;
  TdmOptimizer *opt;
} Setup;

static void
set_up(Setup *s, TdmOptimizerKind kind)
{
  g_autoptr(GError) error = NULL;
  s->b = fake_backend();
  s->data = random_dataset();
  s->net = tdm_network_new(SPEC, 8, 8, 3, 10, &error);
  g_assert_no_error(error);
  s->rep = tdm_replica_new_planned(s->b, s->net, SHARD, SHARD, 16, s->data, s->data, &error);
  g_assert_no_error(error);
  g_autofree float *params = g_new(float, s->net->parameter_count);
  tdm_network_init_parameters(s->net, 1, params);
  tdm_backend_upload(s->b, s->rep->params, params, s->net->parameter_count * sizeof(float));
  g_autoptr(TdmConfig) config = tdm_config_new();
  config->optimizer = kind;
  s->opt = tdm_optimizer_new(s->b, config, s->net->parameter_count, NULL, &error);
  g_assert_no_error(error);
}

static void
tear_down(Setup *s)
{
  tdm_optimizer_free(s->opt);
  tdm_replica_free(s->rep);
  free_fake(s->b);
  tdm_network_free(s->net);
  tdm_dataset_free(s->data);
}

static void
update_tail(TdmReplica *rep, gpointer data)
{
  tdm_optimizer_update(data, rep->params, rep->grads);
}

/* One step as the trainer issues it with the update in the step: the rates first
 * (an upload, outside any capture), then the step with its tail. */
static void
step(Setup *s, int count, gboolean tail)
{
  static const int32_t indices[SHARD] = {3, 1, 4, 15, 9, 2, 6, 5};
  if (tail)
    tdm_optimizer_prepare(s->opt, 0.01);
  s->rep->step_tail = tail ? update_tail : NULL;
  s->rep->step_tail_data = s->opt;
  tdm_replica_train_step(s->rep, indices, count, 1.0f / (float)count);
  s->rep->step_tail = NULL;
  g_assert_false(tdm_backend_failed(s->b));
}

/* A size's first step runs eagerly and grows the workspace (the allocation a capture
 * refuses); the second captures, the rest replay. The short last batch is another
 * size: eager, captured, replayed in turn. */
static void
test_capture_after_eager(void)
{
  Setup s;
  set_up(&s, TDM_OPTIMIZER_ADAM);
  g_assert_cmpuint(s.rep->columns_bytes, ==, 16);
  step(&s, SHARD, TRUE);
  g_assert_cmpuint(s.rep->steps.eager, ==, 1);
  g_assert_cmpuint(s.rep->steps.captured, ==, 0);
  g_assert_cmpuint(s.rep->columns_bytes, >, 16);
  g_assert_cmpint(s.rep->step_graph_ops, ==, 0);
  g_assert_cmpint(fake.captures, ==, 0);

  step(&s, SHARD, TRUE);
  g_assert_cmpuint(s.rep->steps.captured, ==, 1);
  g_assert_cmpint(fake.captures, ==, 1);
  g_assert_cmpint(fake.launches, ==, 1);
  /* What the graph holds is the whole body, update included, counted both ways. */
  g_assert_cmpint(s.rep->step_captured_ops, ==, s.rep->ops_per_step);
  g_assert_cmpint(s.rep->step_graph_ops, ==, s.rep->ops_per_step);
  g_assert_cmpuint(g_hash_table_size(fake.graphs), ==, 1);
  GHashTableIter iter;
  gpointer held;
  g_hash_table_iter_init(&iter, fake.graphs);
  g_assert_true(g_hash_table_iter_next(&iter, NULL, &held));
  g_assert_cmpuint(GPOINTER_TO_SIZE(held), ==, (gsize)s.rep->ops_per_step);

  for (int i = 0; i < 3; i++) {
    guint64 before = s.b->operations;
    step(&s, SHARD, TRUE);
    /* The rates' upload, the indices' upload and the launch: nothing else. */
    g_assert_cmpuint(s.b->operations - before, ==, 3);
    g_assert_cmpint(s.rep->step_captured_ops, ==, 0);
    g_assert_cmpint(s.rep->step_graph_ops, ==, s.rep->ops_per_step);
  }
  g_assert_cmpuint(s.rep->steps.replayed, ==, 3);
  g_assert_cmpint(fake.captures, ==, 1);
  g_assert_cmpint(fake.launches, ==, 4);

  step(&s, 5, TRUE);
  step(&s, 5, TRUE);
  step(&s, 5, TRUE);
  g_assert_cmpuint(s.rep->steps.eager, ==, 2);
  g_assert_cmpuint(s.rep->steps.captured, ==, 2);
  g_assert_cmpuint(s.rep->steps.replayed, ==, 4);
  g_assert_cmpint(fake.captures, ==, 2);
  tear_down(&s);
}

static void
forward_seen(TdmReplica *rep, gpointer data)
{
  (void)rep;
  (*(int *)data)++;
}

/* A step without its tail is another graph, one update's operations shorter; a
 * sampled step's forward hook keeps a step off graphs altogether. */
static void
test_tail_in_graph(void)
{
  Setup s;
  int forwards = 0;
  set_up(&s, TDM_OPTIMIZER_ADAM);
  step(&s, SHARD, FALSE);
  step(&s, SHARD, FALSE);
  g_assert_cmpuint(s.rep->steps.captured, ==, 1);
  int without = s.rep->step_graph_ops;
  /* Adam over one flat buffer, no groups, no decay mask: one operation. */
  step(&s, SHARD, TRUE);
  g_assert_cmpuint(s.rep->steps.captured, ==, 2);
  g_assert_cmpint(s.rep->step_graph_ops, ==, without + 1);
  step(&s, SHARD, FALSE);
  step(&s, SHARD, TRUE);
  g_assert_cmpuint(s.rep->steps.replayed, ==, 2);
  g_assert_cmpint(fake.captures, ==, 2);

  s.rep->forward_done = forward_seen;
  s.rep->forward_done_data = &forwards;
  guint64 eager = s.rep->steps.eager;
  step(&s, SHARD, TRUE);
  g_assert_cmpuint(s.rep->steps.eager, ==, eager + 1);
  g_assert_cmpint(s.rep->step_graph_ops, ==, 0);
  g_assert_cmpint(forwards, ==, 1);
  s.rep->forward_done = NULL;
  tear_down(&s);
}

/* A release between steps (an evaluation that widens the workspace, a group change)
 * drops the graphs; the next step captures again, without another eager one. */
static void
test_recapture_after_release(void)
{
  Setup s;
  set_up(&s, TDM_OPTIMIZER_MOMENTUM);
  step(&s, SHARD, TRUE);
  step(&s, SHARD, TRUE);
  step(&s, SHARD, TRUE);
  g_assert_cmpuint(s.rep->steps.replayed, ==, 1);
  size_t offset = 0, size = s.net->parameter_count;
  float scale = 0.5f;
  tdm_optimizer_set_groups(s.opt, 1, &offset, &size, &scale);
  g_assert_cmpuint(g_hash_table_size(fake.graphs), ==, 0);
  step(&s, SHARD, TRUE);
  g_assert_cmpuint(s.rep->steps.eager, ==, 1);
  g_assert_cmpuint(s.rep->steps.captured, ==, 2);
  step(&s, SHARD, TRUE);
  g_assert_cmpuint(s.rep->steps.replayed, ==, 2);
  tear_down(&s);
}

/* The rates a prepared update reads: the schedule's lr per group (scaled), Adam's
 * bias-corrected lr_t from its step count and the momentum set. */
static void
test_rates_on_device(void)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  g_autoptr(TdmConfig) config = tdm_config_new();
  config->optimizer = TDM_OPTIMIZER_ADAM;
  TdmOptimizer *opt = tdm_optimizer_new(b, config, 40, NULL, &error);
  g_assert_no_error(error);
  size_t offset[2] = {0, 30}, size[2] = {30, 10};
  float scale[2] = {1.0f, 0.25f};
  tdm_optimizer_set_groups(opt, 2, offset, size, scale);
  for (int t = 1; t <= 3; t++) {
    double lr = 0.002 * t;
    if (t == 3)
      tdm_optimizer_set_momentum(opt, 0.85);
    tdm_optimizer_prepare(opt, lr);
    float rates[4];
    tdm_backend_download(b, rates, opt->rates, sizeof rates);
    double beta1 = t == 3 ? (double)(float)0.85 : (double)(float)config->beta1;
    double fix1 = 1.0 - pow(beta1, t), fix2 = 1.0 - pow((float)config->beta2, t);
    for (int g = 0; g < 2; g++) {
      g_assert_cmpfloat(rates[2 * g], ==, (float)(lr * scale[g] * sqrt(fix2) / fix1));
      g_assert_cmpfloat(rates[2 * g + 1], ==, (float)beta1);
    }
  }
  g_assert_cmpint(opt->t, ==, 3);
  tdm_optimizer_free(opt);
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_backend_free(b);
}

/* Each optimizer's update through its rates gives the bits of the operation given
 * the same values as arguments, over several steps with a changing rate. */
static void
test_rates_same_bits(void)
{
  const TdmOptimizerKind kinds[] = {TDM_OPTIMIZER_SGD, TDM_OPTIMIZER_MOMENTUM,
                                    TDM_OPTIMIZER_NESTEROV, TDM_OPTIMIZER_ADAM};
  const size_t n = 103;
  for (guint k = 0; k < G_N_ELEMENTS(kinds); k++) {
    g_autoptr(GError) error = NULL;
    TdmBackend *b = tdm_backend_cpu_new(&error);
    g_assert_no_error(error);
    g_autoptr(TdmConfig) config = tdm_config_new();
    config->optimizer = kinds[k];
    config->weight_decay = 1e-3;
    TdmOptimizer *opt = tdm_optimizer_new(b, config, n, NULL, &error);
    g_assert_no_error(error);
    g_autoptr(GRand) rng = g_rand_new_with_seed(k);
    g_autofree float *p = g_new(float, n), *q = g_new(float, n), *g = g_new(float, n);
    g_autofree float *s0 = g_new0(float, n), *s1 = g_new0(float, n);
    for (size_t i = 0; i < n; i++) {
      p[i] = q[i] = (float)g_rand_double_range(rng, -1, 1);
      g[i] = (float)g_rand_double_range(rng, -1, 1);
    }
    float wd = (float)config->weight_decay, mu = (float)config->momentum;
    for (int t = 1; t <= 4; t++) {
      double lr = 0.05 / t;
      tdm_optimizer_step(opt, p, g, lr);
      switch (kinds[k]) {
      case TDM_OPTIMIZER_SGD:
        tdm_backend_sgd_update(b, q, g, n, (float)lr, wd, NULL);
        break;
      case TDM_OPTIMIZER_MOMENTUM:
        tdm_backend_momentum_update(b, q, g, s0, n, (float)lr, mu, wd, NULL);
        break;
      case TDM_OPTIMIZER_NESTEROV:
        tdm_backend_sgd_momentum_update(b, q, g, s0, NULL, n, (float)lr, mu, wd, true, NULL);
        break;
      case TDM_OPTIMIZER_ADAM: {
        float b1 = (float)config->beta1, b2 = (float)config->beta2;
        double lr_t = lr * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t));
        tdm_backend_adam_update(b, q, g, s0, s1, n, (float)lr_t, b1, b2, (float)config->eps,
                                wd, NULL);
        break;
      }
      }
    }
    g_assert_cmpmem(p, n * sizeof(float), q, n * sizeof(float));
    tdm_optimizer_free(opt);
    g_assert_true(tdm_backend_check(b, NULL));
    tdm_backend_free(b);
  }
}

/* The parameters after 6 steps of Adam under the one-cycle schedule with clipping on
 * one CPU worker, each step summarized and sampled; with phase detail the update runs
 * after the step (its phase timed apart), without it in the step's body, the trainer's
 * step tail. */
static float *
train_sampled(gboolean detail, size_t *count)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("synthetic");
  g_free(cfg->network);
  cfg->network = g_strdup("conv4k3p1,bn,relu,pool2,fc10");
  g_assert_true(tdm_config_set_devices(cfg, "cpu", &error));
  cfg->batch = 32;
  cfg->max_steps = 6;
  cfg->seed = 3;
  cfg->optimizer = TDM_OPTIMIZER_ADAM;
  cfg->lr = 3e-3;
  cfg->schedule = TDM_SCHEDULE_ONECYCLE;
  cfg->clip_grad_norm = 0.5;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  tdm_trainer_options(trainer)->step_detail = detail;
  tdm_trainer_options(trainer)->summary_steps = 1;
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  return g_memdup2(params, *count * sizeof(float));
}

static void
test_update_in_step_same_bits(void)
{
  size_t n_after, n_in;
  g_autofree float *after = train_sampled(TRUE, &n_after);
  g_autofree float *in = train_sampled(FALSE, &n_in);
  g_assert_cmpuint(n_after, ==, n_in);
  g_assert_cmpmem(after, n_after * sizeof(float), in, n_in * sizeof(float));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/step-graph/capture-after-eager", test_capture_after_eager);
  g_test_add_func("/step-graph/tail-in-graph", test_tail_in_graph);
  g_test_add_func("/step-graph/recapture-after-release", test_recapture_after_release);
  g_test_add_func("/step-graph/rates-on-device", test_rates_on_device);
  g_test_add_func("/step-graph/rates-same-bits", test_rates_same_bits);
  g_test_add_func("/step-graph/update-in-step-same-bits", test_update_in_step_same_bits);
  return g_test_run();
}
