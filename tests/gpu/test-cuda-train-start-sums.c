/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-start-sums.c — part of test-cuda-train: on the GPU, a block's start
 * that makes the sums of the bn below it in its own pass (add_relu_backward_bn_sums_bf16)
 * trains to the bits of the two passes (TANDEM_START_SUMS=0): bf16, exact mode (its
 * deterministic convolution choices, so that only this change could move a bit), basic
 * blocks over a bn with its ReLU and over a block's end, projections of stride 1 and 2,
 * bottlenecks; one replica and two sharing cuda:0 with synchronized batch normalization
 * (the all-reduce of the sums unchanged), and a projection's start that adds its compact
 * share in that pass (at the windows' split, else past its sum). Likewise
 * the bn's elementwise passes walked upwards (TANDEM_DESCENDING=0) against the default's
 * downward walk, and the gradient buffers in two windows against one
 * (TANDEM_GRADIENT_WINDOWS=0). And the masks that block's start reads: after a step,
 * each block end's ReLU mask as bits (which its forward's kernel wrote beside its bf16
 * output) is that output's mask by the CPU's rule.
 */
#include "replica-shares.h"
#include "replica-step.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-relu-bits.h"
#include "tdm-replica.h"
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"
#include "test-cuda-train.h"

#include <string.h>

/* The runs compared here: bf16, exact mode, synchronized batch normalization. */
static TdmConfig *
exact_config(const char *devices, const char *network)
{
  TdmConfig *cfg = synthetic_run(network, devices);
  cfg->batch = 64;
  cfg->precision = TDM_PRECISION_BF16;
  cfg->exact = TRUE;
  cfg->batchnorm = TDM_BATCHNORM_SYNC;
  cfg->max_steps = 5;
  cfg->seed = 5;
  return cfg;
}

static float *
train_bf16_exact(const char *devices, const char *network, size_t *count)
{
  g_autoptr(TdmConfig) cfg = exact_config(devices, network);
  return trained_parameters(cfg, count);
}

/* Where a GPU replica of such a run (its shard a step: tdm_memory_capacity(), each of
 * its replicas alike) keeps each projection's start's sum and share (replica-shares.h). */
static ReplicaShares
run_shares(const char *devices, const char *network)
{
  g_autoptr(TdmConfig) cfg = exact_config(devices, network);
  return replica_shares_of(TDM_DEVICE_GPU(0), network,
                           tdm_memory_capacity(cfg, cfg->replicas, 0));
}

/* Basic blocks over a bn with its ReLU and over a block's end, projections of stride 1
 * and 2; bottlenecks. */
static const char *const block_networks[] = {
    "conv16k3p1,bn,relu,res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,"
    "res(conv32k3s2p1,bn,relu,conv32k3p1,bn),relu,res(conv32k3p1,bn,relu,conv32k3p1,bn),"
    "relu,gap,fc10",
    "conv8k3p1,bn,relu,pool3s2p1,bottleneck4,bottleneck4,bottleneck8s2,gap,fc10"};

/* The parameters after five exact bf16 steps with `variable` unset and set to 0 while the
 * replicas are made (`what` names the two ways): the same bits, for each of the `count`
 * networks on one replica and on two sharing cuda:0. */
static void
same_bits_with_zero(const char *variable, const char *what, const char *const *networks,
                    guint count)
{
  const char *devices[] = {"cuda:0", "cuda:0,cuda:0"};
  for (guint k = 0; k < count; k++)
    for (guint d = 0; d < G_N_ELEMENTS(devices); d++) {
      size_t n = 0, m = 0;
      g_autofree float *unset = train_bf16_exact(devices[d], networks[k], &n);
      g_assert_true(g_setenv(variable, "0", TRUE));
      g_autofree float *zero = train_bf16_exact(devices[d], networks[k], &m);
      g_unsetenv(variable);
      g_assert_cmpuint(m, ==, n);
      size_t differ = 0;
      for (size_t i = 0; i < n; i++)
        differ += memcmp(&unset[i], &zero[i], sizeof(float)) != 0;
      g_test_message("bf16 exact, %s on %s: %zu of %zu parameters differ between %s",
                     networks[k], devices[d], differ, n, what);
      g_assert_cmpuint(differ, ==, 0);
    }
}

/* A projection's start adds its compact share in the pass with the sums wherever it
 * sums over a block's end (skip_grad_of() gives its buffer room for the sum and the
 * share): block_networks' and a third network's, two windows of the gradient buffers
 * (each splits at one projection's start, whose sum goes to the low window; the third
 * network's other projection's share lies past its sum) and one
 * (TANDEM_GRADIENT_WINDOWS=0: every such share past its sum); the bottlenecks' first
 * start, after the stem's pool, makes no bn's sums (two passes). Each layout checked on
 * a replica as the runs make it, before they train. */
static void
test_start_sums_same_bits(void)
{
  if (!have_gpu())
    return;
  static const char *const third[] = {
      "conv16k3p1,bn,relu,res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,"
      "res(conv32k3s2p1,bn,relu,conv32k3p1,bn),relu,"
      "res(conv64k3s2p1,bn,relu,conv64k3p1,bn),relu,gap,fc10"};
  const struct {
    const char *spec;
    int projections, after_pool; /* whose start sums over a block's end; the others */
  } layouts[] = {{block_networks[0], 1, 0}, {block_networks[1], 1, 1}, {third[0], 2, 0}};
  const char *devices[] = {"cuda:0", "cuda:0,cuda:0"};
  for (int windows = 2; windows >= 1; windows--) {
    if (windows == 1)
      g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
    for (guint k = 0; k < G_N_ELEMENTS(layouts); k++)
      for (guint d = 0; d < G_N_ELEMENTS(devices); d++) {
        ReplicaShares found = run_shares(devices[d], layouts[k].spec);
        g_assert_cmpint(found.past + found.split, ==, layouts[k].projections);
        g_assert_cmpint(found.split, ==, windows == 2 ? 1 : 0);
        g_assert_cmpint(found.other, ==, layouts[k].after_pool);
      }
    const char *what = windows == 2 ? "the block start's sums and the bn's own"
                                    : "the block start's sums and the bn's own, one window";
    same_bits_with_zero("TANDEM_START_SUMS", what, block_networks,
                        G_N_ELEMENTS(block_networks));
    same_bits_with_zero("TANDEM_START_SUMS", what, third, G_N_ELEMENTS(third));
  }
  g_unsetenv("TANDEM_GRADIENT_WINDOWS");
}

static void
test_descending_same_bits(void)
{
  if (!have_gpu())
    return;
  same_bits_with_zero("TANDEM_DESCENDING",
                      "the bn's passes walked downwards and upwards (TANDEM_DESCENDING=0)",
                      block_networks, G_N_ELEMENTS(block_networks));
}

/* The skip buffer and the gradient region of the layers before a split in the
 * activation arena, over the later layers' pieces (TdmGradientWindows), against one
 * window apart from it (TANDEM_GRADIENT_WINDOWS=0): basic blocks, and bottlenecks with
 * projections of stride 1 and 2 (with no stem pool: a pool's small blocks split
 * nowhere), each split at one replica's batch and at two's. */
static void
test_gradient_windows_same_bits(void)
{
  if (!have_gpu())
    return;
  static const char *const networks[] = {
      "conv16k3p1,bn,relu,res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,"
      "res(conv32k3s2p1,bn,relu,conv32k3p1,bn),relu,res(conv32k3p1,bn,relu,conv32k3p1,bn),"
      "relu,gap,fc10",
      "conv16k3p1,bn,relu,bottleneck4,bottleneck8s2,bottleneck8,gap,fc10"};
  for (guint k = 0; k < G_N_ELEMENTS(networks); k++)
    for (int cap = 32; cap <= 64; cap *= 2) {
      g_autoptr(TdmNetwork) net = tdm_network_new(networks[k], 28, 28, 1, 10, NULL);
      g_assert_nonnull(net);
      TdmGradientWindows w = tdm_replica_gradient_windows(
          net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, TRUE, TRUE, 0, (size_t)cap);
      g_assert_cmpint(w.split, >, 0);
    }
  same_bits_with_zero("TANDEM_GRADIENT_WINDOWS",
                      "two windows of the gradient buffers and one (TANDEM_GRADIENT_WINDOWS=0)",
                      networks, G_N_ELEMENTS(networks));
}

/* One step of a bf16 replica on the GPU (the block ends' last bn folded in with 16, 32,
 * 12 and 17 channels: eight, four and one a thread; the add of a conv's output), then a
 * forward, and each block end's mask bits against its stored output's mask. */
static void
test_relu_bits(void)
{
  if (!have_gpu())
    return;
  const char *networks[] = {
      "conv16k3p1,bn,relu,res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,"
      "res(conv32k3s2p1,bn,relu,conv32k3p1,bn),relu,gap,fc10",
      "conv12k3p1,bn,relu,res(conv12k3p1,bn,relu,conv12k3p1,bn),relu,"
      "res(conv17k3s2p1,bn,relu,conv17k3p1,bn),relu,gap,fc10",
      "conv8k3p1,bn,relu,pool3s2p1,bottleneck4,bottleneck4,bottleneck8s2,gap,fc10",
      /* a body that ends with a conv: the end adds its float32 output (add_out_bf16) */
      "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1),relu,gap,fc10"};
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 16);
  for (guint k = 0; k < G_N_ELEMENTS(networks); k++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmNetwork) net = tdm_network_new(networks[k], 28, 28, 1, 10, &error);
    g_assert_no_error(error);
    TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
    g_assert_no_error(error);
    const int n = 33;
    TdmReplica *r = tdm_replica_new_sized(b, net, n, n, data->train, data->test, &error);
    g_assert_no_error(error);
    g_autofree float *params = g_new(float, net->parameter_count);
    tdm_network_init_parameters(net, 7, params);
    g_autofree float *grads = replica_step_gradients(r, params, n);
    /* The masks and outputs as a forward wrote them: a forward again, since the step's
     * backward may put the low window of its gradient buffers over the later layers'
     * pieces, dead by then (TdmGradientWindows). */
    g_autofree int32_t *indices = g_new(int32_t, n);
    for (int e = 0; e < n; e++)
      indices[e] = e;
    tdm_replica_train_loss(r, indices, n);
    int ends = 0;
    for (int i = 0; i < net->layer_count; i++) {
      if (r->relu_bits[i] == NULL)
        continue;
      const TdmLayer *l = &net->layers[i];
      size_t count = (size_t)n * l->out_h * l->out_w * l->out_c;
      size_t words = TDM_RELU_BITS_WORDS(count);
      g_autofree uint16_t *y = g_new(uint16_t, count);
      g_autofree uint32_t *got = g_new(uint32_t, words), *want = g_new(uint32_t, words);
      tdm_backend_download(b, y, r->acts[i + 1], count * sizeof(uint16_t));
      tdm_backend_download(b, got, r->relu_bits[i], words * sizeof(uint32_t));
      g_assert_true(tdm_backend_check(b, NULL));
      tdm_relu_bits_of(want, y, count);
      size_t wrong = 0;
      for (size_t e = 0; e < count; e++)
        wrong += tdm_relu_bit_at(got, e) != tdm_relu_bit_at(want, e);
      g_test_message("%s, %s: %zu of %zu mask bits differ from its output's", networks[k],
                     l->name, wrong, count);
      g_assert_cmpuint(wrong, ==, 0);
      ends++;
    }
    g_assert_cmpint(ends, >, 0);
    tdm_replica_free(r);
    tdm_backend_free(b);
  }
}

void
test_cuda_train_add_start_sums(void)
{
  g_test_add_func("/cuda-train/start-sums", test_start_sums_same_bits);
  g_test_add_func("/cuda-train/descending", test_descending_same_bits);
  g_test_add_func("/cuda-train/gradient-windows", test_gradient_windows_same_bits);
  g_test_add_func("/cuda-train/relu-bits", test_relu_bits);
}
