/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-memory-skip.c — part of test-memory: where a projection block keeps its start's
 * sum and its compact share in the skip buffer, on replicas of the bench's five
 * networks. Not the buffers' sizes (test-memory-bf16.c and test-memory-bottleneck.c
 * derive those from the layers): the property that the block start's one pass needs
 * of them, which no figure shows. */
#include "replica-shares.h"
#include "resnet18-cifar.h"
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"
#include "tdm-replica.h"
#include "test-memory.h"

#include <string.h>

/* bench/bench-real-networks.py's rows (its CIFAR18 is resnet18-cifar.h's spec). */
static const struct {
  const char *spec;
  int side, batch;
} rows[] = {{resnet18, 32, 512},
            {resnet18, 64, 256},
            {resnet18, 128, 128},
            {"resnet18", 224, 128},
            {"resnet50", 224, 128}};

/* Every projection block start of the five rows takes the one pass that adds its
 * compact share as it writes its sum and the bn below's sums: its share, where its
 * skip buffer holds the sum too, lies past the sum (skip_grad_of() sizes the buffer
 * for both), else the sum goes to the other window at the windows' split; either way
 * the two share no byte. Every start but one sums over a block's end above that
 * block's last bn; ResNet-50's first, after the stem's max pool, makes no bn's sums
 * and takes two passes whatever the room. With no bn output stored for its conv and
 * with every one (the split moves with the pieces: torchvision's ResNet-18 splits at
 * layer2.0, a projection's start, with none stored, and at layer2.1 with every one).
 * On a CPU bf16 replica of 2 samples a step, whose layout is the row's a sample (the
 * buffers are sized a sample; its windows split where a GPU's plan at the row's batch
 * splits, asserted), allocating what is planned. */
static void
test_projection_share_room(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 40, 20);
  const char *stores[] = {"0", "all"};
  const int n = 2;
  for (guint s = 0; s < G_N_ELEMENTS(stores); s++)
    for (guint k = 0; k < G_N_ELEMENTS(rows); k++) {
      g_assert_true(g_setenv("TANDEM_BN_STORE", stores[s], TRUE));
      g_autoptr(TdmNetwork) net =
          tdm_network_new(rows[k].spec, rows[k].side, rows[k].side, 3, 10, &error);
      g_assert_no_error(error);
      size_t bn_store =
          tdm_replica_bn_store(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, rows[k].batch);
      TdmGradientWindows gpu =
          tdm_replica_gradient_windows(net, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, TRUE, TRUE,
                                       bn_store, (size_t)rows[k].batch);
      TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
      g_assert_no_error(error);
      TdmReplica *r = tdm_replica_new_sized(b, net, n, n, data->train, data->test, &error);
      g_assert_no_error(error);
      g_assert_cmpuint(
          b->bytes_in_use, ==,
          tdm_memory_replica(net, TDM_BACKEND_CPU, TDM_PRECISION_BF16, n, n, 40, 20).total);
      g_assert_true(r->stores_bf16 && r->start_sums);
      g_assert_cmpint(r->window_split, ==, gpu.split);
      ReplicaShares found = replica_check_shares(r, n);
      gboolean resnet50 = strcmp(rows[k].spec, "resnet50") == 0;
      g_assert_cmpint(found.past + found.split, ==, 3);
      g_assert_cmpint(found.other, ==, resnet50 ? 1 : 0);
      g_test_message("%s, %d px, TANDEM_BN_STORE=%s: split at %s; projection starts in one "
                     "pass: %d with the share past the sum, %d at the split; %d in two",
                     rows[k].spec == resnet18 ? "CIFAR ResNet-18" : rows[k].spec, rows[k].side,
                     stores[s], gpu.split > 0 ? net->layers[gpu.split].name : "none",
                     found.past, found.split, found.other);
      tdm_replica_free(r);
      tdm_backend_free(b);
    }
  /* The suite's setting (test-memory.c). */
  g_assert_true(g_setenv("TANDEM_BN_STORE", "0", TRUE));
}

void
test_memory_add_skip(void)
{
  g_test_add_func("/memory/projection-share-room", test_projection_share_room);
}
