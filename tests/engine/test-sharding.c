/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-sharding.c — how a data-parallel job divides an epoch: the iterator's global
 * batches, each cut into one shard per global replica with tdm_shard_of() (as every
 * process under mpirun does on its own), cover every sample exactly once per epoch,
 * for 1 to 5 replicas, batches that do or do not divide the set, short last
 * batches, and batches smaller than the number of replicas. */
#include "tdm-iterator.h"

#include <string.h>

static void
check_epochs(int count, int batch, int world)
{
  g_autoptr(TdmIterator) it = tdm_iterator_new(42, count, batch);
  g_autofree int *seen = g_new(int, count);
  int steps = tdm_iterator_batches_per_epoch(it);

  for (int epoch = 0; epoch < 3; epoch++) {
    memset(seen, 0, count * sizeof *seen);
    for (int step = 0; step < steps; step++) {
      int size;
      gboolean epoch_end;
      const int32_t *indices = tdm_iterator_next(it, &size, &epoch_end);
      g_assert_cmpint(epoch_end, ==, step == steps - 1);

      /* The shards of one batch are contiguous, in rank order, near-equal. */
      int next = 0, smallest = G_MAXINT, largest = 0;
      for (int rank = 0; rank < world; rank++) {
        int offset, shard;
        tdm_shard_of(size, world, rank, &offset, &shard);
        g_assert_cmpint(offset, ==, next);
        g_assert_cmpint(shard, >=, 0);
        smallest = MIN(smallest, shard);
        largest = MAX(largest, shard);
        for (int i = 0; i < shard; i++) {
          int32_t sample = indices[offset + i];
          g_assert_cmpint(sample, >=, 0);
          g_assert_cmpint(sample, <, count);
          seen[sample]++;
        }
        next = offset + shard;
      }
      g_assert_cmpint(next, ==, size);
      g_assert_cmpint(largest - smallest, <=, 1);
    }
    for (int i = 0; i < count; i++)
      if (seen[i] != 1)
        g_error("count %d, batch %d, %d replicas, epoch %d: sample %d seen %d times", count,
                batch, world, epoch, i, seen[i]);
    g_assert_cmpint(it->epoch, ==, epoch + 1);
  }
}

static void
test_every_sample_once(void)
{
  static const int counts[] = {1, 7, 100, 101, 997};
  static const int batches[] = {1, 2, 3, 4, 5, 7, 10, 16, 33, 50, 64, 100, 128};
  for (gsize c = 0; c < G_N_ELEMENTS(counts); c++)
    for (gsize b = 0; b < G_N_ELEMENTS(batches); b++) {
      if (batches[b] > counts[c])
        continue;
      for (int world = 1; world <= 5; world++)
        check_epochs(counts[c], batches[b], world);
    }
}

/* The figures the trainer and the CLI show (`batch 50 = 17 + 17 + 16`). */
static void
test_shares(void)
{
  int expected[][2] = {{0, 17}, {17, 17}, {34, 16}};
  for (int rank = 0; rank < 3; rank++) {
    int offset, size;
    tdm_shard_of(50, 3, rank, &offset, &size);
    g_assert_cmpint(offset, ==, expected[rank][0]);
    g_assert_cmpint(size, ==, expected[rank][1]);
  }
  /* Fewer samples than replicas (a short last batch): the last ones get none. */
  int offset, size;
  tdm_shard_of(2, 5, 4, &offset, &size);
  g_assert_cmpint(size, ==, 0);
  g_assert_cmpint(offset, ==, 2);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sharding/every-sample-once", test_every_sample_once);
  g_test_add_func("/sharding/shares", test_shares);
  return g_test_run();
}
