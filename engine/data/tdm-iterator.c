/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-iterator.c — the seeded shuffling iterator. The permutation of an epoch is a
 * Fisher-Yates shuffle driven by our own splitmix64 stream seeded from (seed,
 * epoch), so it is the same on every machine and C library and needs no state but
 * those two numbers to be rebuilt. Not thread-safe: one iterator per trainer. */
#include "tdm-iterator.h"

static inline guint64
tdm_iterator_splitmix64(guint64 *state)
{
  guint64 z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A uniform integer in [0, bound) without modulo bias (Lemire's multiply and
 * reject), so every permutation is equally likely. */
static inline guint32
tdm_iterator_below(guint64 *state, guint32 bound)
{
  guint64 product = (tdm_iterator_splitmix64(state) >> 32) * (guint64)bound;
  guint32 low = (guint32)product;
  if (low < bound) {
    guint32 threshold = (guint32)(-bound) % bound;
    while (low < threshold) {
      product = (tdm_iterator_splitmix64(state) >> 32) * (guint64)bound;
      low = (guint32)product;
    }
  }
  return (guint32)(product >> 32);
}

void
tdm_iterator_permutation(guint64 seed, int epoch, int count, int32_t *order)
{
  g_return_if_fail(count >= 0 && epoch >= 0);
  g_return_if_fail(order != NULL || count == 0);

  /* Mixing the epoch through its own splitmix step keeps neighbouring seeds and
   * epochs from giving overlapping streams. */
  guint64 epoch_state = (guint64)epoch;
  guint64 state = seed ^ tdm_iterator_splitmix64(&epoch_state);
  tdm_iterator_splitmix64(&state);

  for (int i = 0; i < count; i++)
    order[i] = i;
  for (int i = count - 1; i > 0; i--) {
    int j = (int)tdm_iterator_below(&state, (guint32)i + 1);
    int32_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

TdmIterator *
tdm_iterator_new(guint64 seed, int count, int batch)
{
  g_return_val_if_fail(count > 0, NULL);
  g_return_val_if_fail(batch > 0, NULL);

  TdmIterator *it = g_new0(TdmIterator, 1);
  it->seed = seed;
  it->count = count;
  it->batch = batch;
  it->epoch = 0;
  it->position = 0;
  it->order = g_new(int32_t, count);
  tdm_iterator_permutation(seed, 0, count, it->order);
  return it;
}

void
tdm_iterator_free(TdmIterator *it)
{
  if (it == NULL)
    return;
  g_free(it->order);
  g_free(it);
}

const int32_t *
tdm_iterator_next(TdmIterator *it, int *size, gboolean *epoch_end)
{
  g_return_val_if_fail(it != NULL, NULL);
  g_return_val_if_fail(it->position >= 0 && it->position < it->count, NULL);

  /* At position 0 the permutation is rebuilt for it->epoch. It cannot be rebuilt
   * when the previous epoch ends, because the batch just returned still points
   * into it; the struct has no field saying which epoch order holds, so position
   * 0 is the cue (rebuilding an already current order costs a shuffle, no more). */
  if (it->position == 0)
    tdm_iterator_permutation(it->seed, it->epoch, it->count, it->order);

  int start = it->position;
  int n = MIN(it->batch, it->count - start);
  gboolean last = start + n >= it->count;

  if (last) {
    it->epoch++;
    it->position = 0;
  } else {
    it->position = start + n;
  }
  if (size != NULL)
    *size = n;
  if (epoch_end != NULL)
    *epoch_end = last;
  return it->order + start;
}

void
tdm_iterator_seek(TdmIterator *it, int epoch, int position)
{
  g_return_if_fail(it != NULL);
  g_return_if_fail(epoch >= 0 && position >= 0 && position <= it->count);

  /* The end of an epoch is the start of the next one, as next() leaves it. */
  if (position == it->count) {
    epoch++;
    position = 0;
  }
  it->epoch = epoch;
  it->position = position;
  tdm_iterator_permutation(it->seed, epoch, it->count, it->order);
}

int
tdm_iterator_batches_per_epoch(const TdmIterator *it)
{
  g_return_val_if_fail(it != NULL, 0);
  return (int)(((gint64)it->count + it->batch - 1) / it->batch);
}

void
tdm_shard_of(int count, int world, int rank, int *offset, int *size)
{
  g_return_if_fail(count >= 0 && world > 0 && rank >= 0 && rank < world);
  int base = count / world, extra = count % world;
  *size = base + (rank < extra ? 1 : 0);
  *offset = rank * base + MIN(rank, extra);
}

int
tdm_shard_largest(int count, int world)
{
  int offset, size;
  tdm_shard_of(MAX(count, 0), MAX(world, 1), 0, &offset, &size);
  return size;
}
