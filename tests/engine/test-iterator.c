/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-iterator.c — the seeded shuffling iterator: each epoch visits every index
 * once whatever the batch size, the order depends on (seed, epoch) alone, and
 * seeking reproduces the exact sequence from any position. Not a test of how the
 * trainer uses it (test-trainer.c). */
#include "tdm-iterator.h"

#include <string.h>

/* Runs one epoch from the start, checking sizes, epoch_end and coverage, and
 * returns the concatenated indices. */
static int32_t *
run_epoch(TdmIterator *it, int expect_epoch)
{
  int count = it->count;
  int32_t *seen = g_new(int32_t, count);
  guint8 *hit = g_new0(guint8, count);
  int batches = tdm_iterator_batches_per_epoch(it);
  int filled = 0;

  g_assert_cmpint(it->epoch, ==, expect_epoch);
  g_assert_cmpint(it->position, ==, 0);
  for (int b = 0; b < batches; b++) {
    int size = -1;
    gboolean end = TRUE;
    const int32_t *idx = tdm_iterator_next(it, &size, &end);
    g_assert_nonnull(idx);
    int want = MIN(it->batch, count - b * it->batch);
    g_assert_cmpint(size, ==, want);
    g_assert_cmpint(end, ==, b == batches - 1);
    for (int k = 0; k < size; k++) {
      g_assert_cmpint(idx[k], >=, 0);
      g_assert_cmpint(idx[k], <, count);
      g_assert_cmpuint(hit[idx[k]], ==, 0);
      hit[idx[k]] = 1;
      seen[filled++] = idx[k];
    }
    /* The returned batch stays valid after the epoch rolls over. */
    if (end)
      g_assert_cmpmem(idx, size * sizeof *idx, seen + filled - size, size * sizeof *idx);
  }
  g_assert_cmpint(filled, ==, count);
  g_assert_cmpint(it->epoch, ==, expect_epoch + 1);
  g_assert_cmpint(it->position, ==, 0);
  g_free(hit);
  return seen;
}

static void
test_coverage(void)
{
  const int cases[][2] = {
      {100, 10}, {100, 7}, {100, 100}, {100, 250}, {1, 1}, {1, 5}, {37, 1}, {60000, 256},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    int count = cases[c][0], batch = cases[c][1];
    g_autoptr(TdmIterator) it = tdm_iterator_new(7, count, batch);
    g_assert_cmpint(tdm_iterator_batches_per_epoch(it), ==, (count + batch - 1) / batch);
    for (int e = 0; e < 3; e++)
      g_free(run_epoch(it, e));
  }
}

static void
test_batches_per_epoch(void)
{
  const int cases[][3] = {
      {60000, 100, 600}, {60000, 256, 235}, {10, 3, 4}, {10, 10, 1}, {10, 11, 1}, {1, 1, 1},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autoptr(TdmIterator) it = tdm_iterator_new(0, cases[c][0], cases[c][1]);
    g_assert_cmpint(tdm_iterator_batches_per_epoch(it), ==, cases[c][2]);
  }
}

static void
test_determinism(void)
{
  const int count = 1000;
  g_autoptr(TdmIterator) a = tdm_iterator_new(123, count, 64);
  g_autoptr(TdmIterator) b = tdm_iterator_new(123, count, 33);
  g_autoptr(TdmIterator) c = tdm_iterator_new(124, count, 64);

  int32_t *prev = NULL;
  for (int e = 0; e < 4; e++) {
    int32_t *sa = run_epoch(a, e);
    /* The batch size slices the order; it does not change it. */
    int32_t *sb = run_epoch(b, e);
    int32_t *sc = run_epoch(c, e);
    g_assert_cmpmem(sa, count * sizeof *sa, sb, count * sizeof *sb);
    g_assert_true(memcmp(sa, sc, count * sizeof *sa) != 0);

    int32_t *perm = g_new(int32_t, count);
    tdm_iterator_permutation(123, e, count, perm);
    g_assert_cmpmem(sa, count * sizeof *sa, perm, count * sizeof *perm);
    g_free(perm);

    /* Epochs differ from each other, and from the identity. */
    if (prev != NULL)
      g_assert_true(memcmp(sa, prev, count * sizeof *sa) != 0);
    int fixed = 0;
    for (int i = 0; i < count; i++)
      fixed += sa[i] == i;
    g_assert_cmpint(fixed, <, 20);
    g_free(prev);
    prev = sa;
    g_free(sb);
    g_free(sc);
  }
  g_free(prev);
}

/* Known values pin the permutation down: a change in the generator would make
 * old checkpoints resume with a different order. */
static void
test_permutation_stable(void)
{
  int32_t a[16], b[16];
  tdm_iterator_permutation(0, 0, 16, a);
  tdm_iterator_permutation(0, 0, 16, b);
  g_assert_cmpmem(a, sizeof a, b, sizeof b);
  GString *s = g_string_new(NULL);
  for (int i = 0; i < 16; i++)
    g_string_append_printf(s, "%s%d", i ? "," : "", a[i]);
  g_test_message("permutation(0, 0, 16) = %s", s->str);
  g_string_free(s, TRUE);

  /* Adjacent seeds and epochs give unrelated orders. */
  tdm_iterator_permutation(1, 0, 16, b);
  g_assert_true(memcmp(a, b, sizeof a) != 0);
  tdm_iterator_permutation(0, 1, 16, b);
  g_assert_true(memcmp(a, b, sizeof a) != 0);
}

/* A rough uniformity check: over many epochs each index lands in each slot about
 * equally often. */
static void
test_uniformity(void)
{
  const int count = 8, epochs = 16000;
  int slots[8][8] = {{0}};
  int32_t perm[8];
  for (int e = 0; e < epochs; e++) {
    tdm_iterator_permutation(99, e, count, perm);
    for (int i = 0; i < count; i++)
      slots[perm[i]][i]++;
  }
  for (int v = 0; v < count; v++)
    for (int i = 0; i < count; i++) {
      g_assert_cmpint(slots[v][i], >, epochs / count * 8 / 10);
      g_assert_cmpint(slots[v][i], <, epochs / count * 12 / 10);
    }
}

typedef struct {
  int epoch, position, size;
  gboolean end;
  int32_t first;
  guint32 hash;
} Step;

static Step
take(TdmIterator *it)
{
  Step s = {it->epoch, it->position, 0, FALSE, 0, 2166136261u};
  const int32_t *idx = tdm_iterator_next(it, &s.size, &s.end);
  s.first = idx[0];
  for (int k = 0; k < s.size; k++)
    s.hash = (s.hash ^ (guint32)idx[k]) * 16777619u;
  return s;
}

static void
test_seek(void)
{
  const int count = 103, batch = 10, steps = 60;
  g_autoptr(TdmIterator) ref = tdm_iterator_new(5, count, batch);
  Step trace[60];
  for (int i = 0; i < steps; i++)
    trace[i] = take(ref);

  /* From every recorded position, a fresh iterator seeked there replays the
   * rest of the trace exactly. */
  for (int i = 0; i < steps; i++) {
    g_autoptr(TdmIterator) it = tdm_iterator_new(5, count, batch);
    tdm_iterator_seek(it, trace[i].epoch, trace[i].position);
    for (int j = i; j < steps; j++) {
      Step s = take(it);
      g_assert_cmpint(s.epoch, ==, trace[j].epoch);
      g_assert_cmpint(s.position, ==, trace[j].position);
      g_assert_cmpint(s.size, ==, trace[j].size);
      g_assert_cmpint(s.end, ==, trace[j].end);
      g_assert_cmpint(s.first, ==, trace[j].first);
      g_assert_cmpuint(s.hash, ==, trace[j].hash);
    }
  }

  /* Seeking backwards on a used iterator works too, and so does a position that
   * is not a multiple of the batch: the batches continue from there. */
  tdm_iterator_seek(ref, 2, 37);
  int size = 0;
  gboolean end = FALSE;
  const int32_t *idx = tdm_iterator_next(ref, &size, &end);
  int32_t perm[103];
  tdm_iterator_permutation(5, 2, count, perm);
  g_assert_cmpint(size, ==, batch);
  g_assert_cmpmem(idx, size * sizeof *idx, perm + 37, size * sizeof *perm);
  g_assert_cmpint(ref->position, ==, 47);

  /* The end of an epoch is the start of the next. */
  tdm_iterator_seek(ref, 1, count);
  g_assert_cmpint(ref->epoch, ==, 2);
  g_assert_cmpint(ref->position, ==, 0);
  idx = tdm_iterator_next(ref, &size, &end);
  g_assert_cmpmem(idx, size * sizeof *idx, perm, size * sizeof *perm);
}
/* ⌈count / world⌉, the one rule the memory estimate and the scaling sweep use, is
 * the largest shard that tdm_shard_of deals. */
static void
test_shard_largest(void)
{
  for (int count = 0; count <= 40; count++)
    for (int world = 1; world <= 9; world++) {
      int largest = 0, total = 0;
      for (int rank = 0; rank < world; rank++) {
        int offset, size;
        tdm_shard_of(count, world, rank, &offset, &size);
        largest = MAX(largest, size);
        total += size;
      }
      g_assert_cmpint(total, ==, count);
      g_assert_cmpint(tdm_shard_largest(count, world), ==, largest);
      g_assert_cmpint(largest, ==, (count + world - 1) / world);
    }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/iterator/coverage", test_coverage);
  g_test_add_func("/iterator/batches-per-epoch", test_batches_per_epoch);
  g_test_add_func("/iterator/determinism", test_determinism);
  g_test_add_func("/iterator/permutation-stable", test_permutation_stable);
  g_test_add_func("/iterator/uniformity", test_uniformity);
  g_test_add_func("/iterator/seek", test_seek);
  g_test_add_func("/iterator/shard-largest", test_shard_largest);
  return g_test_run();
}
