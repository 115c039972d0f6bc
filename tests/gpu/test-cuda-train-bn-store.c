/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-bn-store.c — part of test-cuda-train: on the GPU, a bn's output stored
 * as bf16 for the conv after it (TANDEM_BN_STORE), which the conv reads as a stored input
 * in its forward and weight gradient instead of normalizing the bn's input a chunk at a
 * time (the bn prologue). In exact mode (deterministic convolution choices) the same
 * bits with every such output stored, some (a threshold, or the automatic rule's when
 * unset) and none: the stored values are the ones the
 * prologue's copy holds (both round the normalized value of bn-value.cuh once). Without
 * exact mode the engine times each call's candidates under the key of its input (stored,
 * or with a prologue), so a conv may sum in another order: a step's relative difference
 * within what a float32 sum's order and the roundings to bf16 it flips explain.
 */
#include "relative-difference.h"
#include "tdm-config.h"
#include "tdm-network.h"
#include "test-cuda-train.h"

#include <string.h>

static const char *const networks[] = {BLOCKS16_NETWORK, BOTTLENECK_NETWORK, PLAIN_NETWORK};

/* Parameters after `steps` bf16 SGD steps of network on devices (exact mode or not), with
 * TANDEM_BN_STORE=store (NULL: unset, the automatic rule) while the replicas are made. */
static float *
train_bf16(const char *network, const char *devices, gboolean exact, int steps,
           const char *store, size_t *count)
{
  g_autoptr(TdmConfig) cfg = synthetic_run(network, devices);
  cfg->batch = 64;
  cfg->precision = TDM_PRECISION_BF16;
  cfg->optimizer = TDM_OPTIMIZER_SGD;
  cfg->lr = 0.05;
  cfg->exact = exact;
  cfg->batchnorm = TDM_BATCHNORM_SYNC;
  cfg->max_steps = steps;
  cfg->seed = 5;
  if (store != NULL)
    g_assert_true(g_setenv("TANDEM_BN_STORE", store, TRUE));
  float *params = trained_parameters(cfg, count);
  g_unsetenv("TANDEM_BN_STORE");
  return params;
}

static void
test_bn_store_exact(void)
{
  if (!have_gpu())
    return;
  const char *devices[] = {"cuda:0", "cuda:0,cuda:0"};
  /* 1 MiB: every eligible output at these sizes, through the threshold's reading; unset:
   * the automatic rule's. */
  const char *stores[] = {"all", "1", NULL};
  for (guint k = 0; k < G_N_ELEMENTS(networks); k++)
    for (guint d = 0; d < G_N_ELEMENTS(devices); d++) {
      size_t n = 0;
      g_autofree float *none = train_bf16(networks[k], devices[d], TRUE, 5, "0", &n);
      for (guint s = 0; s < G_N_ELEMENTS(stores); s++) {
        size_t m = 0;
        g_autofree float *p = train_bf16(networks[k], devices[d], TRUE, 5, stores[s], &m);
        g_assert_cmpuint(m, ==, n);
        size_t differ = 0;
        for (size_t i = 0; i < n; i++)
          differ += memcmp(&none[i], &p[i], sizeof(float)) != 0;
        g_test_message("bf16 exact, %s on %s, TANDEM_BN_STORE=%s: %zu of %zu parameters "
                       "differ from no store",
                       networks[k], devices[d], stores[s] != NULL ? stores[s] : "(unset)",
                       differ, n);
        g_assert_cmpuint(differ, ==, 0);
      }
    }
}

/* One step from the same weights, the engine choosing freely: a wrong read (a buffer
 * left unwritten, read as the wrong type) moves the step by order one; another order
 * of a float32 sum moves a value by about 2⁻²⁴ relative, and where that flips a bf16
 * rounding of a stored activation, that element by 2⁻⁸; 1/64 is far above both. */
static void
test_bn_store_step(void)
{
  if (!have_gpu())
    return;
  for (guint k = 0; k < G_N_ELEMENTS(networks); k++) {
    g_autoptr(TdmNetwork) net = tdm_network_new(networks[k], 28, 28, 1, 10, NULL);
    g_assert_nonnull(net);
    g_autofree float *initial = g_new(float, net->parameter_count);
    tdm_network_init_parameters(net, 5, initial);
    size_t n = 0, m = 0;
    g_autofree float *none = train_bf16(networks[k], "cuda:0", FALSE, 1, "0", &n);
    g_autofree float *all = train_bf16(networks[k], "cuda:0", FALSE, 1, "all", &m);
    g_assert_cmpuint(m, ==, n);
    g_assert_cmpuint(n, ==, (size_t)net->parameter_count);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
      differ += memcmp(&none[i], &all[i], sizeof(float)) != 0;
      none[i] -= initial[i];
      all[i] -= initial[i];
    }
    double rel = relative_difference(all, none, n);
    g_test_message("bf16, %s: one step with every bn output stored against none: %zu of "
                   "%zu parameters differ, the step by %.3g relative",
                   networks[k], differ, n, rel);
    g_assert_cmpfloat(rel, <=, 1.0 / 64);
  }
}

void
test_cuda_train_add_bn_store(void)
{
  g_test_add_func("/cuda-train/bn-store/exact", test_bn_store_exact);
  g_test_add_func("/cuda-train/bn-store/step", test_bn_store_step);
}
