/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train-workspace.c — part of test-cuda-train: a GPU replica's column
 * workspace in its first run, started small and grown as the convolution engine asks,
 * then fitted to its choices. */
#include "tdm-backend.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-network.h"
#include "tdm-replica.h"
#include "test-cuda-train.h"

/* A first run's workspace on a GPU: started small, grown only as the convolution
 * engine asks (room to time its candidates, then its choices), never two at once (the
 * device's peak is what the replica holds after its steps), kept within the plan's
 * upper bound, and shrunk by tdm_replica_fit_workspace() to exactly the chosen need. */
static void
test_workspace_grows(void)
{
  if (!tdm_backend_cuda_available()) {
    g_test_skip("no CUDA GPU");
    return;
  }
  /* A residual block with a strided projection, and the resnet preset's shape in small
   * (pool after bn, a block without projection). */
  static const char *const nets[] = {
    "conv8k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
    "conv8k3p1,bn,relu,pool2,res(conv8k3p1,bn,relu,conv8k3p1,bn,relu),gap,fc10nb,scale0.125",
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
      g_test_message("%s %s: workspace grew to %zu bytes (upper bound %zu), choices need "
                     "%zu; device peak %zu, held %zu", nets[k], tdm_precision_name(prec),
                     grown, rep->columns_limit, needed, b->bytes_peak, b->bytes_in_use);
      g_assert_cmpuint(needed, <=, grown);
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

void
test_cuda_train_workspace_add(void)
{
  g_test_add_func("/cuda-train/workspace-grows", test_workspace_grows);
}
