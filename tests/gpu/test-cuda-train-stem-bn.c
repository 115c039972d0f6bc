/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-stem-bn.c — part of test-cuda-train: on the GPU, a bf16 CIFAR ResNet
 * whose stem (3 → 64, 3×3, its bn, no output kept) goes back in two passes
 * (tdm_backend_stem_bn_sums(), tdm_backend_stem_bn_dx_wgrad()) trains as with the four
 * steps they replace (TANDEM_STEM_BN=0), within bf16's rounding: the passes make the
 * stem's output with the forward's own kernel (the same bits) and the bn's input
 * gradient as bn_backward_dx_bf16 does, but may add the bn's sums and the weight
 * gradient in another order than the bn's sums kernel and the conv's weight gradient,
 * and a value a float32 ulp apart may round to the neighbouring bfloat16, 2⁻⁸ away, in
 * the next step's operands (test-bf16's replicas, the same bound; the convolution
 * engine's choices, timed anew in each run, may differ by as much); one replica and two
 * sharing cuda:0 with synchronized bn (the all-reduce of the sums between the passes).
 * The passes ran in every step, and not at all with TANDEM_STEM_BN=0. Skipped without a
 * GPU, and where the CUDA backend does not take the passes for this stem (its slots
 * empty, or the stem's forward not its own kernel's), so that it says something once it
 * does. The CPU's bits are test-stem-bn's.
 */
#include "relative-difference.h"
#include "stem-bn-run.h"
#include "test-cuda-train.h"

#define U16 (1.0 / 256.0) /* bfloat16's unit roundoff, 2⁻⁸ */

/* CIFAR ResNet-18's stem and first stages in small, at 16 px. */
#define STEM_NETWORK                                                                   \
  "conv64k3p1,bn,relu,res(conv64k3p1,bn,relu,conv64k3p1,bn),relu,"                      \
  "res(conv128k3s2p1,bn,relu,conv128k3p1,bn),relu,gap,fc10"
#define STEPS 4

static float *
train_stem(const TdmDatasetPair *data, const char *devices, const char *stem_bn,
           size_t *count, guint64 *runs)
{
  g_autoptr(TdmConfig) cfg = synthetic_run(STEM_NETWORK, devices);
  g_free(cfg->dataset);
  cfg->dataset = g_strdup("stem");
  cfg->precision = TDM_PRECISION_BF16;
  cfg->optimizer = TDM_OPTIMIZER_SGD;
  cfg->batchnorm = TDM_BATCHNORM_SYNC;
  cfg->lr = 0.05;
  cfg->batch = 64;
  cfg->max_steps = STEPS;
  cfg->seed = 5;
  /* own:fwd for the stem, whatever the timings say, so that the passes are taken. */
  g_assert_true(g_setenv("TANDEM_CONV", "own", TRUE));
  float *params = stem_bn_train(cfg, data, stem_bn, count, runs);
  g_unsetenv("TANDEM_CONV");
  return params;
}

static void
test_stem_bn_steps(void)
{
  if (!have_gpu())
    return;
  g_autoptr(TdmDatasetPair) data = stem_colour_images(256, 16, 17);
  const char *devices[] = {"cuda:0", "cuda:0,cuda:0"};
  for (guint d = 0; d < G_N_ELEMENTS(devices); d++) {
    size_t n = 0, m = 0;
    guint64 passes = 0, none = 0;
    g_autofree float *two = train_stem(data, devices[d], "1", &n, &passes);
    if (passes == 0) {
      g_test_skip("the CUDA backend does not take the stem's two passes here");
      return;
    }
    g_autofree float *four = train_stem(data, devices[d], "0", &m, &none);
    g_assert_cmpuint(m, ==, n);
    double rel = relative_difference(two, four, n);
    g_test_message("bf16, %s, synchronized bn: the stem's two passes in %" G_GUINT64_FORMAT
                   " walks back; relative difference %.3g from TANDEM_STEM_BN=0",
                   devices[d], passes, rel);
    g_assert_cmpuint(none, ==, 0);
    g_assert_cmpfloat(rel, <=, U16);
  }
}

void
test_cuda_train_add_stem_bn(void)
{
  g_test_add_func("/cuda-train/stem-bn-steps", test_stem_bn_steps);
}
