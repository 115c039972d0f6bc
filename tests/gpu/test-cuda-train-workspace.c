/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-workspace.c — part of test-cuda-train: a GPU replica's column
 * workspace in its first run, started small and grown as the convolution engine asks,
 * then fitted to its choices; its own composition with the columns in chunks. */
#include "tdm-backend.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-network.h"
#include "tdm-replica.h"
#include "test-cuda-train.h"

#include <math.h>

/* A first run's workspace on a GPU: started small, grown only as the convolution
 * engine asks (room to time its candidates, then its choices), never two at once (the
 * device's peak is what the replica holds after its steps), kept within the plan's
 * upper bound, and shrunk by tdm_replica_fit_workspace() to exactly the chosen need.
 * It grows to exactly the most that the choices, or a timing, needed: the screen keeps
 * nothing of its own in it, and asks for more than the candidates need only where they
 * need less than its least room, 1 MiB past their common reservations. */
static void
test_workspace_grows(void)
{
  if (!tdm_backend_cuda_available()) {
    g_test_skip("no CUDA GPU");
    return;
  }
  /* A residual block with a strided projection, the resnet preset's shape in small
   * (pool after bn, a block without projection), and bottleneck blocks (1×1 convs on
   * bf16 operands, a bn normalized as a 1×1 conv reads it, a projection's bn gradient as
   * its conv's bf16 output gradient at the workspace's start). */
  static const char *const nets[] = {
    "conv8k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
    "conv8k3p1,bn,relu,pool2,res(conv8k3p1,bn,relu,conv8k3p1,bn,relu),gap,fc10nb,scale0.125",
    BOTTLENECK_NETWORK,
  };
  const int count = 96, batch = 64, eval = 80;
  g_autoptr(GRand) rng = g_rand_new_with_seed(4);
  g_autoptr(TdmDataset) data = tdm_dataset_new("grows", count, 16, 16, 3, 10);
  for (int i = 0; i < count * 16 * 16 * 3; i++)
    data->images[i] = (uint8_t)g_rand_int_range(rng, 0, 256);
  for (int i = 0; i < count; i++)
    data->labels[i] = (uint8_t)g_rand_int_range(rng, 0, 10);
  g_autofree int32_t *indices = g_new(int32_t, batch);
  for (int i = 0; i < batch; i++)
    indices[i] = i;
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++) {
    for (int prec = TDM_PRECISION_FP32; prec <= TDM_PRECISION_BF16; prec += 2) {
      g_autoptr(GError) error = NULL;
      TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), prec, &error);
      g_assert_no_error(error);
      g_autoptr(TdmNetwork) net = tdm_network_new(nets[k], 16, 16, 3, 10, &error);
      g_assert_no_error(error);
      TdmReplica *rep = tdm_replica_new_planned(b, net, batch, eval, TDM_REPLICA_WORKSPACE_START,
                                                data, data, &error);
      conv_timing_needs_reset();
      g_assert_no_error(error);
      g_autofree float *params = g_new(float, net->parameter_count);
      tdm_network_init_parameters(net, 3, params);
      tdm_backend_upload(b, rep->params, params, net->parameter_count * sizeof(float));
      tdm_replica_train_step(rep, indices, batch, 1.0f);
      tdm_replica_train_step(rep, indices, batch - 7, 1.0f);
      tdm_replica_evaluate(rep, 0, eval);
      tdm_backend_synchronize(b);
      g_assert_true(tdm_backend_check(b, NULL));
      size_t grown = rep->columns_bytes, needed = rep->columns_needed;
      size_t timed_most = 0, timed_need = 0;
      conv_timing_needs(&timed_most, &timed_need);
      g_test_message("%s %s: workspace grew to %zu bytes (upper bound %zu), choices need "
                     "%zu, timings %zu (their candidates %zu); device peak %zu, held %zu",
                     nets[k], tdm_precision_name(prec), grown, rep->columns_limit, needed,
                     timed_need, timed_most, b->bytes_peak, b->bytes_in_use);
      g_assert_cmpuint(needed, <=, grown);
      g_assert_cmpuint(grown, ==,
                       MAX(MAX(needed, timed_need), TDM_REPLICA_WORKSPACE_START));
      g_assert_cmpuint(timed_most, <=, timed_need);
      g_assert_cmpuint(timed_need, <=, timed_most + ((size_t)1 << 20));
      g_assert_cmpuint(grown, <=, MAX(rep->columns_limit, TDM_REPLICA_WORKSPACE_START));
      g_assert_cmpuint(b->bytes_peak, ==, b->bytes_in_use);
      size_t held = b->bytes_in_use;
      g_assert_true(tdm_replica_fit_workspace(rep, &error));
      g_assert_no_error(error);
      if (needed > 0 && needed < grown) {
        g_assert_cmpuint(rep->columns_bytes, ==, needed);
        g_assert_cmpuint(b->bytes_in_use, ==, held - (grown - needed));
      }
      /* The steps run again in the fitted workspace without growing it. */
      size_t fitted = rep->columns_bytes;
      tdm_replica_train_step(rep, indices, batch, 1.0f);
      tdm_replica_train_step(rep, indices, batch - 7, 1.0f);
      tdm_replica_evaluate(rep, 0, eval);
      tdm_backend_synchronize(b);
      g_assert_true(tdm_backend_check(b, NULL));
      g_assert_cmpuint(rep->columns_bytes, ==, fitted);
      tdm_replica_free(rep);
      tdm_backend_free(b);
    }
  }
}

/* One training step of `spec` on a GPU replica that composes its convolutions itself
 * (TANDEM_CONV=im2col) with its columns in chunks of at most `bound` bytes (0: whole):
 * its gradients. */
static float *
chunked_step(const char *spec, TdmPrecision precision, size_t bound, TdmDataset *data,
             int *count)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_GPU(0), precision, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 16, 16, 3, 10, &error);
  g_assert_no_error(error);
  TdmReplica *rep = tdm_replica_new(b, net, 32, data, data, &error);
  g_assert_no_error(error);
  /* A GPU's chunks are the run's: 32 MiB in bf16, 256 MiB in float32. */
  g_assert_cmpuint(rep->columns_bound, ==,
                   (size_t)(precision == TDM_PRECISION_BF16 ? 32 : 256) << 20);
  rep->columns_bound = bound;
  g_autofree float *params = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 9, params);
  tdm_backend_upload(b, rep->params, params, net->parameter_count * sizeof(float));
  int32_t indices[32];
  for (int i = 0; i < 32; i++)
    indices[i] = (5 * i + 2) % data->count;
  tdm_replica_train_step(rep, indices, 29, 1.0f / 29);
  float *grads = g_new(float, net->parameter_count);
  tdm_backend_download(b, grads, rep->grads, net->parameter_count * sizeof(float));
  g_assert_true(tdm_backend_check(b, NULL));
  *count = net->parameter_count;
  tdm_replica_free(rep);
  tdm_backend_free(b);
  return grads;
}

/* The replica's own composition with its columns in chunks on the GPU (the CUDA
 * operations at each chunk's offsets: im2col, bf16 columns normalized as they are
 * gathered, the input gradient through bf16 columns or the implicit kernel, col2im,
 * the weight gradient summed over chunks with beta = 1): a step's gradients within the
 * rounding of the whole batch's (cuBLAS may sum a chunk's rows in another order than
 * the whole's: a float32 GEMM's sums of at most 1,152 terms, through the few layers
 * here, stay within 2⁻¹⁰; bf16 stores each activation rounded, 2⁻⁹ at most, under 2⁻⁷
 * in norm), and the same bits twice. */
static void
test_columns_in_chunks(void)
{
  if (!tdm_backend_cuda_available()) {
    g_test_skip("no CUDA GPU");
    return;
  }
  static const char spec[] =
      "conv8k7s2p3,bn,relu,conv16k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,"
      "conv24k1,relu,gap,fc10";
  g_autoptr(GRand) rng = g_rand_new_with_seed(11);
  g_autoptr(TdmDataset) data = tdm_dataset_new("chunks", 64, 16, 16, 3, 10);
  for (int i = 0; i < 64 * 16 * 16 * 3; i++)
    data->images[i] = (uint8_t)g_rand_int_range(rng, 0, 256);
  for (int i = 0; i < 64; i++)
    data->labels[i] = (uint8_t)g_rand_int_range(rng, 0, 10);
  g_setenv("TANDEM_CONV", "im2col", TRUE);
  for (int prec = TDM_PRECISION_FP32; prec <= TDM_PRECISION_BF16; prec += 2) {
    int count = 0;
    /* 20,000 bytes: the stem's columns (8 × 8 pixels of 147 taps, 37,632 bytes a sample
     * in float32, 18,816 in bf16) one sample at a time; the 3×3 conv after it two bf16
     * samples at a time, the block's 3×3s four (two in float32): the last chunk of the
     * 29 samples short. */
    g_autofree float *whole = chunked_step(spec, prec, 0, data, &count);
    g_autofree float *chunks = chunked_step(spec, prec, 20000, data, &count);
    g_autofree float *again = chunked_step(spec, prec, 20000, data, &count);
    double diff = 0, norm = 0;
    for (int i = 0; i < count; i++) {
      diff += ((double)chunks[i] - whole[i]) * ((double)chunks[i] - whole[i]);
      norm += (double)whole[i] * whole[i];
    }
    double distance = sqrt(diff / MAX(norm, 1e-30));
    g_test_message("%s: gradients with columns in chunks %.3g from the whole batch's",
                   tdm_precision_name(prec), distance);
    g_assert_cmpfloat(distance, <=, prec == TDM_PRECISION_BF16 ? 0x1p-7 : 0x1p-10);
    g_assert_cmpmem(chunks, count * sizeof(float), again, count * sizeof(float));
  }
  g_unsetenv("TANDEM_CONV");
}

void
test_cuda_train_add_workspace(void)
{
  g_test_add_func("/cuda-train/workspace-grows", test_workspace_grows);
  g_test_add_func("/cuda-train/columns-in-chunks", test_columns_in_chunks);
}
