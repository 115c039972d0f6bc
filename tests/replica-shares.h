/* SPDX-License-Identifier: GPL-3.0-or-later */
/* replica-shares.h — where a replica's projection blocks keep their starts' sums and
 * their compact float32 shares (tdm-replica-private.h's start_sum_of(),
 * projection_share()), checked as the block start's one pass needs them: the sum it
 * writes overwrites none of the share it reads. The memory, bf16 and GPU tests share
 * it. Header-only, so every test program can; it reads a made replica's pointers and
 * runs nothing. */
#pragma once

#include <glib.h>

#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-network.h"
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"

/* How replica_check_shares() found a replica's projections. */
typedef struct {
  int past;  /* the share past its start's sum in one buffer */
  int split; /* at the windows' split: the sum in the other window's buffer */
  int other; /* a start whose pass makes no bn's sums (after a pool): two passes */
} ReplicaShares;

/* For each projection block of r whose start's pass can make the bn below's sums
 * (start_sums_below()), asserts that its share for n samples lies within its skip
 * buffer, shares no byte with its start's sum (projection_share_clear(): the one pass),
 * and lies either right past the sum (projection_sum_bytes() on) where both are in one
 * buffer, or at its buffer's start where the sum goes to the other window; counts
 * them so, and the other projections. */
static inline ReplicaShares
replica_check_shares(const TdmReplica *r, int n)
{
  const TdmNetwork *net = r->net;
  ReplicaShares found = {0};
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    if (l->kind != TDM_LAYER_RES_END || !l->projection)
      continue;
    g_assert_true(block_grad_bf16(net, i, r->stores_bf16));
    int begin = l->partner;
    if (start_sums_below(net, begin, r->stores_bf16) < 0) {
      found.other++;
      continue;
    }
    const char *skip = (const char *)r->skip_grad[i];
    const char *sum = (const char *)start_sum_of(r, begin);
    const char *share = (const char *)projection_share(r, i, n);
    g_assert_true(projection_share_clear(r, i, n));
    g_assert_true(share >= skip && share + projection_share_bytes(net, i, (size_t)n) <=
                                       skip + r->skip_grad_bytes[i]);
    if (sum == skip) {
      g_assert_true(share == sum + projection_sum_bytes(net, i, (size_t)n));
      found.past++;
    } else {
      g_assert_cmpint(begin, ==, r->window_split);
      g_assert_true(share == skip);
      found.split++;
    }
  }
  return found;
}

/* replica_check_shares() on a bf16 replica of spec over the synthetic set's 28×28×1
 * images on device, capacity samples a step (a run's shard: a run's replica is laid out
 * so), made without training and freed; it makes each projection's start's sums where it
 * can (the backend's op, asserted). */
static inline ReplicaShares
replica_shares_of(TdmDeviceId device, const char *spec, int capacity)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 16);
  TdmBackend *b = tdm_backend_new(device, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  TdmReplica *r =
      tdm_replica_new_sized(b, net, capacity, capacity, data->train, data->test, &error);
  g_assert_no_error(error);
  g_assert_true(r->start_sums);
  ReplicaShares found = replica_check_shares(r, capacity);
  tdm_replica_free(r);
  tdm_backend_free(b);
  return found;
}
