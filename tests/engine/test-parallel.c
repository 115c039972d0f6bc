/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-parallel.c — the key invariant of data parallelism: N replicas on N CPU
 * workers, with either strategy, train exactly as one replica does with the same
 * global batch, uneven shards included. */
#include "tdm-dataset.h"
#include "tdm-trainer.h"
#include "tdm-error.h"
#include "tdm-network.h"
#include "relative-difference.h"

#include <math.h>

#define NETWORK "conv6k3p1,relu,pool2,fc24,relu,fc10"
#define STEPS 20

/* The synthetic set's generator at 1,200 training images (20 steps of 50 stay in one
 * epoch) and 100 test images, made once: by name each run would make 70,000 and
 * evaluate 10,000. */
static TdmDatasetPair *data;

static float *
train(const char *devices, int batch, TdmStrategy strategy, int main_replica,
      TdmOptimizerKind optimizer, size_t *count)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("synthetic");
  g_free(cfg->network);
  cfg->network = g_strdup(NETWORK);
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  cfg->batch = batch;
  cfg->strategy = strategy;
  cfg->main_replica = main_replica;
  cfg->optimizer = optimizer;
  cfg->lr = optimizer == TDM_OPTIMIZER_ADAM ? 1e-3 : 0.05;
  cfg->max_steps = STEPS;
  cfg->seed = 11;
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  tdm_trainer_set_dataset(trainer, data);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  g_assert_nonnull(params);
  return g_memdup2(params, *count * sizeof(float));
}

typedef struct {
  int batch;
  TdmOptimizerKind optimizer;
} Case;

static void
test_invariant(gconstpointer data)
{
  const Case *c = data;
  size_t n_ref = 0;
  g_autofree float *initial = NULL;
  g_autofree float *reference = train("cpu", c->batch, TDM_STRATEGY_ALLREDUCE, 0, c->optimizer,
                                      &n_ref);

  for (int workers = 1; workers <= 4; workers++) {
    for (int s = 0; s < 2; s++) {
      TdmStrategy strategy = s == 0 ? TDM_STRATEGY_MAIN : TDM_STRATEGY_ALLREDUCE;
      /* The main replica need not be the first one. */
      int main_replica = strategy == TDM_STRATEGY_MAIN ? workers - 1 : 0;
      g_autofree char *devices = g_strdup_printf("cpu:%d", workers);
      size_t n = 0;
      g_autofree float *params = train(devices, c->batch, strategy, main_replica,
                                       c->optimizer, &n);
      g_assert_cmpuint(n, ==, n_ref);
      double rel = relative_difference(params, reference, n);
      g_test_message("batch %d, %d workers, %s: relative difference %.3g", c->batch, workers,
                     tdm_strategy_name(strategy), rel);
      g_assert_cmpfloat(rel, <=, 1e-5);
    }
  }

  /* Training moved the parameters: the comparison above is not between two copies of
   * the initial values. */
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(TdmNetwork) net = tdm_network_new(NETWORK, 28, 28, 1, 10, NULL);
  initial = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 11, initial);
  g_assert_cmpfloat(relative_difference(initial, reference, n_ref), >, 1e-3);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  static const Case even = {48, TDM_OPTIMIZER_ADAM};
  static const Case uneven = {50, TDM_OPTIMIZER_ADAM};
  static const Case odd_momentum = {37, TDM_OPTIMIZER_MOMENTUM};
  g_test_add_data_func("/parallel/invariant/batch-48-adam", &even, test_invariant);
  g_test_add_data_func("/parallel/invariant/batch-50-adam", &uneven, test_invariant);
  g_test_add_data_func("/parallel/invariant/batch-37-momentum", &odd_momentum, test_invariant);
  data = tdm_dataset_synthetic(0, 1200, 100);
  int status = g_test_run();
  tdm_dataset_pair_free(data);
  return status;
}
