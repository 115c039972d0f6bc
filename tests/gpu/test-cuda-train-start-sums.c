/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-start-sums.c — part of test-cuda-train: on the GPU, a block's start
 * that makes the sums of the bn below it in its own pass (add_relu_backward_bn_sums_bf16)
 * trains to the bits of the two passes (TANDEM_START_SUMS=0): bf16, exact mode (its
 * deterministic convolution choices, so that only this change could move a bit), basic
 * blocks over a bn with its ReLU and over a block's end, projections of stride 1 and 2,
 * bottlenecks; one replica and two sharing cuda:0 with synchronized batch normalization
 * (the all-reduce of the sums unchanged).
 */
#include "tdm-config.h"
#include "test-cuda-train.h"

#include <string.h>

static float *
train_bf16_exact(const char *devices, const char *network, size_t *count)
{
  g_autoptr(TdmConfig) cfg = synthetic_run(network, devices);
  cfg->batch = 64;
  cfg->precision = TDM_PRECISION_BF16;
  cfg->exact = TRUE;
  cfg->batchnorm = TDM_BATCHNORM_SYNC;
  cfg->max_steps = 5;
  cfg->seed = 5;
  return trained_parameters(cfg, count);
}

static void
test_start_sums_same_bits(void)
{
  if (!have_gpu())
    return;
  const char *networks[] = {
      "conv16k3p1,bn,relu,res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,"
      "res(conv32k3s2p1,bn,relu,conv32k3p1,bn),relu,res(conv32k3p1,bn,relu,conv32k3p1,bn),"
      "relu,gap,fc10",
      "conv8k3p1,bn,relu,pool3s2p1,bottleneck4,bottleneck4,bottleneck8s2,gap,fc10"};
  const char *devices[] = {"cuda:0", "cuda:0,cuda:0"};
  for (guint k = 0; k < G_N_ELEMENTS(networks); k++)
    for (guint d = 0; d < G_N_ELEMENTS(devices); d++) {
      size_t n = 0, m = 0;
      g_autofree float *fused = train_bf16_exact(devices[d], networks[k], &n);
      g_assert_true(g_setenv("TANDEM_START_SUMS", "0", TRUE));
      g_autofree float *apart = train_bf16_exact(devices[d], networks[k], &m);
      g_unsetenv("TANDEM_START_SUMS");
      g_assert_cmpuint(m, ==, n);
      size_t differ = 0;
      for (size_t i = 0; i < n; i++)
        differ += memcmp(&fused[i], &apart[i], sizeof(float)) != 0;
      g_test_message("bf16 exact, %s on %s: %zu of %zu parameters differ between the block "
                     "start's sums and the bn's own",
                     networks[k], devices[d], differ, n);
      g_assert_cmpuint(differ, ==, 0);
    }
}

void
test_cuda_train_add_start_sums(void)
{
  g_test_add_func("/cuda-train/start-sums", test_start_sums_same_bits);
}
