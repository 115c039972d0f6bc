/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-iterator.h — the seeded shuffling iterator over a training split.
 *
 * Each epoch is one permutation of [0, count), drawn from the seed and the epoch
 * number alone, so a run can resume at any position bit-exactly. Batches are
 * contiguous slices of the permutation; the last batch of an epoch is short when
 * the batch size does not divide the count, so every sample is seen exactly once
 * per epoch.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct {
  guint64 seed;
  int count;             /* samples in the split */
  int batch;             /* global batch size */
  int epoch;             /* 0-based epoch of the next batch */
  int position;          /* index into the permutation of the next batch */
  int32_t *order;        /* the current epoch's permutation */
} TdmIterator;

TdmIterator *tdm_iterator_new (guint64 seed, int count, int batch);
void tdm_iterator_free (TdmIterator *it);

/* Returns the next batch's indices (pointing into the permutation) and its size;
 * *epoch_end is set when this batch is the last of its epoch. */
const int32_t *tdm_iterator_next (TdmIterator *it, int *size, gboolean *epoch_end);

/* Moves to (epoch, position), e.g. when resuming from a checkpoint. */
void tdm_iterator_seek (TdmIterator *it, int epoch, int position);

/* Batches per epoch, the short one included. */
int tdm_iterator_batches_per_epoch (const TdmIterator *it);

/* The permutation of epoch `epoch` for `seed`, written to order[count]. */
void tdm_iterator_permutation (guint64 seed, int epoch, int count, int32_t *order);

/* The share of global replica `rank` (of `world`) in a batch of `count` samples:
 * near-equal contiguous slices in rank order, the first count % world one larger,
 * some empty when count < world. Every process computes every replica's share from
 * the same batch, so together they cover it exactly once. */
void tdm_shard_of (int count, int world, int rank, int *offset, int *size);
/* The largest of those shards, ⌈count / world⌉ (rank 0's): what one replica must
 * hold. */
int tdm_shard_largest (int count, int world);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmIterator, tdm_iterator_free)

G_END_DECLS
