/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-stem-bn.c — a bf16 run's CIFAR stem (its conv and its bn, whose output no buffer
 * keeps: stem_output_recomputed()) going back in two passes (tdm_backend_stem_bn_sums(),
 * tdm_backend_stem_bn_dx_wgrad()) trains to the bits of the four steps they replace
 * (TANDEM_STEM_BN=0): a small CIFAR ResNet on 8×8 colour images, 3 SGD steps on one CPU
 * worker and two, each replica's own bn and synchronized bn (the all-reduce of the sums
 * between the passes); the passes ran in every step of every replica, and not at all
 * with TANDEM_STEM_BN=0; the memory plan is the same either way. The passes' own bits
 * are test-backend-cpu-stem-bn.c's. */
#include "stem-bn-run.h"
#include "tdm-network.h"
#include "tdm-replica-private.h"
#include "tdm-replica.h"

#include <string.h>

/* A CIFAR ResNet's layout, narrow: the stem 3 → 32 (27 taps: float32 columns, as the
 * CIFAR stem's 3 → 64), a basic block, a projection of stride 2. */
static const char stem_net[] = "conv32k3p1,bn,relu,res(conv32k3p1,bn,relu,conv32k3p1,bn),relu,"
                               "res(conv48k3s2p1,bn,relu,conv48k3p1,bn),relu,gap,fc10";
#define SIDE 8
#define BATCH 16
#define STEPS 3

/* The parameters after STEPS bf16 SGD steps of stem_net on `devices` (stem_bn_train()). */
static float *
train(const TdmDatasetPair *data, const char *devices, TdmBatchNorm bn, const char *stem_bn,
      size_t *count, guint64 *runs)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("stem");
  g_free(cfg->network);
  cfg->network = g_strdup(stem_net);
  g_assert_true(tdm_config_set_devices(cfg, devices, &error));
  cfg->precision = TDM_PRECISION_BF16;
  cfg->optimizer = TDM_OPTIMIZER_SGD;
  cfg->batchnorm = bn;
  cfg->lr = 0.05;
  cfg->batch = BATCH;
  cfg->max_steps = STEPS;
  cfg->seed = 7;
  return stem_bn_train(cfg, data, stem_bn, count, runs);
}

/* The network is one whose stem keeps no output in a bf16 run on a CPU, the shape the
 * CPU backend takes; the plan does not depend on the passes. */
static void
test_stem_taken(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(stem_net, SIDE, SIDE, 3, 10, &error);
  g_assert_no_error(error);
  g_assert_true(stem_output_recomputed(net, 0, TRUE));
  const TdmLayer *conv = &net->layers[0];
  g_assert_cmpint(conv->bias_count, ==, 0);
  g_assert_false(conv->fused_relu);
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  TdmConvShape shape = {BATCH,       conv->in_h,   conv->in_w, conv->in_c,
                        conv->out_c, conv->kernel, conv->pad,  conv->stride};
  g_assert_true(tdm_backend_stem_bn_takes(b, &shape, TDM_DTYPE_F32, NULL));
  tdm_backend_free(b);
  TdmReplicaPlan with = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, BATCH, 0);
  g_assert_true(g_setenv("TANDEM_STEM_BN", "0", TRUE));
  TdmReplicaPlan without = tdm_replica_plan(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, BATCH, 0);
  g_unsetenv("TANDEM_STEM_BN");
  g_assert_cmpmem(&with, sizeof with, &without, sizeof without);
}

static void
test_same_bits(void)
{
  g_autoptr(TdmDatasetPair) data = stem_colour_images(96, SIDE, 31);
  const struct {
    const char *devices;
    int workers;
    TdmBatchNorm bn;
  } runs[] = {{"cpu", 1, TDM_BATCHNORM_PER_REPLICA},
              {"cpu:2", 2, TDM_BATCHNORM_PER_REPLICA},
              {"cpu:2", 2, TDM_BATCHNORM_SYNC}};
  for (guint k = 0; k < G_N_ELEMENTS(runs); k++) {
    size_t n = 0, m = 0;
    guint64 passes = 0, none = 0;
    g_autofree float *two =
        train(data, runs[k].devices, runs[k].bn, NULL, &n, &passes);
    g_autofree float *four =
        train(data, runs[k].devices, runs[k].bn, "0", &m, &none);
    g_assert_cmpuint(m, ==, n);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
      differ += memcmp(&two[i], &four[i], sizeof(float)) != 0;
    g_test_message("bf16, %s, %s bn: the stem's two passes in %" G_GUINT64_FORMAT
                   " walks back; %zu of %zu parameters differ from TANDEM_STEM_BN=0",
                   runs[k].devices, runs[k].bn == TDM_BATCHNORM_SYNC ? "synchronized" : "own",
                   passes, differ, n);
    g_assert_cmpuint(passes, ==, (guint64)STEPS * runs[k].workers);
    g_assert_cmpuint(none, ==, 0);
    g_assert_cmpuint(differ, ==, 0);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/stem-bn/taken", test_stem_taken);
  g_test_add_func("/stem-bn/same-bits", test_same_bits);
  return g_test_run();
}
