/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-inference.c — part of test-cuda-train: evaluation on a GPU against
 * the CPU's. Test-time flips and shifts score what they do on the CPU; the inference
 * pass gives the CPU's logits in fp32 and bf16, and its replica allocates the memory
 * plan's figure to the byte. */
#include "tdm-dataset.h"
#include "tdm-device.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-replica.h"
#include "relative-difference.h"
#include "test-cuda-train.h"

#include <math.h>
#include <string.h>

/* Logits of test samples [0, count) with flips and 1-pixel shifts (ten views), in
 * chunks of 40, on backend b, from the given parameters and running statistics. */
static float *
tta_logits(TdmBackend *b, const TdmNetwork *net, const TdmDataset *data, int count,
           const float *params, const float *state)
{
  g_autoptr(GError) error = NULL;
  TdmReplica *rep = tdm_replica_new(b, net, 40, data, data, &error);
  g_assert_no_error(error);
  tdm_backend_upload(b, rep->params, params, net->parameter_count * sizeof(float));
  tdm_backend_upload(b, rep->state, state, net->state_count * sizeof(float));
  rep->test_flip = TRUE;
  rep->test_shift = 1;
  g_assert_cmpint(tdm_replica_test_views(rep), ==, 10);
  float *logits = g_new(float, (size_t)count * net->classes);
  for (int first = 0; first < count; first += 40)
    tdm_replica_predict(rep, first, MIN(40, count - first),
                        logits + (size_t)first * net->classes);
  tdm_replica_free(rep);
  return logits;
}

/* count random h × w × 3 images of 10 classes, drawn from rng (pixels, then labels). */
static TdmDataset *
random_images(const char *name, int count, int h, int w, GRand *rng)
{
  TdmDataset *data = tdm_dataset_new(name, count, h, w, 3, 10);
  for (int i = 0; i < count * h * w * 3; i++)
    data->images[i] = (uint8_t)g_rand_int_range(rng, 0, 256);
  for (int i = 0; i < count; i++)
    data->labels[i] = (uint8_t)g_rand_int_range(rng, 0, 10);
  return data;
}

/* Test-time flips and shifts on the GPU (its flip gather, the host-built shifted
 * copies uploaded) against the CPU's, whose mean of views test-tta.c checks. */
static void
test_tta_matches_cpu(void)
{
  if (!have_gpu())
    return;
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) rng = g_rand_new_with_seed(8);
  const int count = 100;
  g_autoptr(TdmDataset) data = random_images("tta", count, 12, 10, rng);
  g_autoptr(TdmNetwork) net = tdm_network_new(MYRTLE_SMALL, 12, 10, 3, 10, &error);
  g_assert_no_error(error);
  g_autofree float *params = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 3, params);
  g_autofree float *state = g_new(float, net->state_count);
  for (size_t i = 0; i < net->state_count; i++)
    state[i] = (float)g_rand_double_range(rng, 0.2, 1.5);
  TdmBackend *cpu = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  /* tdm_backend_new, not the CUDA constructor: this file links in builds without
   * CUDA too. */
  TdmBackend *gpu = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_FP32, &error);
  g_assert_no_error(error);
  g_autofree float *want = tta_logits(cpu, net, data, count, params, state);
  g_autofree float *got = tta_logits(gpu, net, data, count, params, state);
  double rel = relative_difference(got, want, (size_t)count * net->classes);
  g_test_message("ten test-time views of %d samples, cuda:0 fp32 vs cpu: relative "
                 "difference %.3g", count, rel);
  g_assert_cmpfloat(rel, <=, 1e-5);
  tdm_backend_free(gpu);
  tdm_backend_free(cpu);
}

/* Logits of samples [0, count) through the inference pass in chunks of 7 beside a
 * training shard of 5; *bytes gets what the replica allocated on b's counter. */
static float *
inference_logits(TdmBackend *b, const TdmNetwork *net, const TdmDataset *data, int count,
                 const float *params, const float *state, guint64 *bytes)
{
  g_autoptr(GError) error = NULL;
  guint64 before = b->bytes_in_use;
  TdmReplica *rep = tdm_replica_new_sized(b, net, 5, 7, data, data, &error);
  g_assert_no_error(error);
  *bytes = b->bytes_in_use - before;
  tdm_backend_upload(b, rep->params, params, net->parameter_count * sizeof(float));
  tdm_backend_upload(b, rep->state, state, net->state_count * sizeof(float));
  float *logits = g_new(float, (size_t)count * net->classes);
  for (int first = 0; first < count; first += 7)
    tdm_replica_predict(rep, first, MIN(7, count - first),
                        logits + (size_t)first * net->classes);
  g_assert_true(tdm_backend_check(b, NULL));
  tdm_replica_free(rep);
  return logits;
}

/* The inference pass (rotating buffers, the one column workspace at the chunk's size)
 * on the GPU against the CPU's, in fp32 and bf16, for the layers it lays out: blocks
 * with and without projections, blocks in blocks, pools with argmax, dropout, BN,
 * flatten; and the replica's allocation on the GPU is the memory plan's figure for a
 * CUDA backend to the byte. */
static void
test_inference_matches_cpu(void)
{
  if (!have_gpu())
    return;
  static const char *const nets[] = {
    BN_NETWORK,
    MYRTLE_SMALL,
    "conv8k3p1,relu,res(conv8k3p1,bn,res(conv8k3p1,relu,conv8k3p1),relu,"
    "res(conv16k1s2,bn)),pool2,flatten,fc10",
    PLAIN_NETWORK,
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) rng = g_rand_new_with_seed(12);
  const int count = 30;
  g_autoptr(TdmDataset) data = random_images("inference", count, 12, 12, rng);
  TdmBackend *cpu = tdm_backend_cpu_new(&error);
  g_assert_no_error(error);
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++) {
    g_autoptr(TdmNetwork) net = tdm_network_new(nets[k], 12, 12, 3, 10, &error);
    g_assert_no_error(error);
    g_autofree float *params = g_new(float, net->parameter_count);
    tdm_network_init_parameters(net, 3, params);
    /* Running statistics near what training leaves: means (0 at the start) moved a
     * little, variances (1) scaled. Means drawn as large as the variances made every
     * input of the first network's last ReLU negative: all-zero logits, and a
     * relative difference of 0/0. */
    g_autofree float *state = g_new(float, MAX(1, net->state_count));
    tdm_network_init_state(net, state);
    for (size_t i = 0; i < net->state_count; i++)
      state[i] = state[i] == 0.0f ? (float)g_rand_double_range(rng, -0.1, 0.1)
                                  : state[i] * (float)g_rand_double_range(rng, 0.5, 1.5);
    guint64 cpu_bytes = 0;
    g_autofree float *want = inference_logits(cpu, net, data, count, params, state, &cpu_bytes);
    double norm = 0;
    for (int i = 0; i < count * net->classes; i++)
      norm += (double)want[i] * want[i];
    g_assert_cmpfloat(norm, >, 0); /* a relative difference needs logits that are not 0 */
    for (int prec = TDM_PRECISION_FP32; prec <= TDM_PRECISION_BF16; prec++) {
      if (prec == TDM_PRECISION_TF32)
        continue;
      TdmBackend *gpu = tdm_backend_new(TDM_DEVICE_GPU(0), prec, &error);
      g_assert_no_error(error);
      guint64 gpu_bytes = 0;
      g_autofree float *got = inference_logits(gpu, net, data, count, params, state, &gpu_bytes);
      double rel = relative_difference(got, want, (size_t)count * net->classes);
      g_test_message("%.30s... inference, chunks of 7, cuda:0 %s vs cpu: relative "
                     "difference %.3g", nets[k], tdm_precision_name(prec), rel);
      g_assert_cmpfloat(rel, <=, prec == TDM_PRECISION_FP32 ? 1e-5 : 2e-2);
      if (prec == TDM_PRECISION_BF16) {
        /* Against the CPU's bf16 inference, which stores the same outputs as bf16
         * (infer_output_bf16()): the same roundings, sums in other orders. */
        TdmBackend *cpu16 = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
        g_assert_no_error(error);
        guint64 cpu16_bytes = 0;
        g_autofree float *want16 =
            inference_logits(cpu16, net, data, count, params, state, &cpu16_bytes);
        double rel16 = relative_difference(got, want16, (size_t)count * net->classes);
        g_test_message("%.30s... inference, chunks of 7, cuda:0 bf16 vs cpu bf16: relative "
                       "difference %.3g", nets[k], rel16);
        g_assert_cmpfloat(rel16, <=, 2e-2);
        tdm_backend_free(cpu16);
      }
      g_assert_cmpuint(gpu_bytes, ==,
                       tdm_memory_replica(net, TDM_BACKEND_CUDA, prec, 5, 7, count, count)
                           .total);
      tdm_backend_free(gpu);
    }
  }
  tdm_backend_free(cpu);
}

void
test_cuda_train_add_inference(void)
{
  g_test_add_func("/cuda-train/tta-matches-cpu", test_tta_matches_cpu);
  g_test_add_func("/cuda-train/inference-matches-cpu", test_inference_matches_cpu);
}
