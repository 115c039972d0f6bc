/* SPDX-License-Identifier: GPL-3.0-or-later */
/* mpi-helper.c — two small tools for test-mpi.sh, which has no Python to rely on:
 *
 *   mpi-helper idx FOLDER TRAIN TEST    writes a synthetic set of TRAIN and TEST
 *                                       images as raw IDX files, so a test can pick
 *                                       sizes that end an epoch at a chosen step
 *   mpi-helper compare A B TOLERANCE    compares the parameters of two checkpoints:
 *                                       the relative L2 difference over all layers
 *                                       must be at most TOLERANCE (exit 1 if not)
 *   mpi-helper first-without RANKS      under mpirun: every rank asks
 *                                       tdm_distributed_first_without(), the ranks in
 *                                       the comma list RANKS ("none" for none) saying
 *                                       they have not, and prints "rank R: first F"
 *
 * Not part of Tandem; built only for the 'mpi' suite.
 */
#include "synthetic-idx.h"
#include "tdm-checkpoint.h"
#include "tdm-distributed.h"
#include "tdm-dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
make_idx(const char *folder, int train, int test)
{
  g_autoptr(GError) error = NULL;
  if (!test_write_synthetic_idx(folder, 5, train, test, &error)) {
    fprintf(stderr, "mpi-helper: %s\n", error->message);
    return 2;
  }
  return 0;
}

static int
compare(const char *a_path, const char *b_path, double tolerance)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmCheckpoint) a = tdm_checkpoint_load(a_path, &error);
  g_autoptr(TdmCheckpoint) b = a ? tdm_checkpoint_load(b_path, &error) : NULL;
  if (b == NULL) {
    fprintf(stderr, "mpi-helper: %s\n", error->message);
    return 2;
  }
  double diff = 0, norm = 0;
  int tensors = 0;
  for (int i = 0; i < tdm_checkpoint_count(a); i++) {
    const TdmTensor *ta = tdm_checkpoint_nth(a, i);
    if (g_str_has_prefix(ta->name, "optimizer."))
      continue;
    const TdmTensor *tb = tdm_checkpoint_get(b, ta->name);
    gint64 n = 1;
    for (int d = 0; d < ta->rank; d++)
      n *= ta->shape[d];
    if (tb == NULL || tb->rank != ta->rank ||
        memcmp(tb->shape, ta->shape, ta->rank * sizeof(gint64)) != 0) {
      fprintf(stderr, "mpi-helper: %s: no tensor “%s” of that shape\n", b_path, ta->name);
      return 1;
    }
    for (gint64 k = 0; k < n; k++) {
      double d = (double)ta->data[k] - tb->data[k];
      diff += d * d;
      norm += (double)tb->data[k] * tb->data[k];
    }
    tensors++;
  }
  const char *step_a = tdm_checkpoint_get_metadata(a, "step");
  const char *step_b = tdm_checkpoint_get_metadata(b, "step");
  double relative = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
  printf("%d tensors, steps %s and %s, relative difference %.3g\n", tensors,
         step_a ? step_a : "?", step_b ? step_b : "?", relative);
  if (tensors == 0 || g_strcmp0(step_a, step_b) != 0 || !(relative <= tolerance))
    return 1;
  return 0;
}

/* Exact mode: every value of every tensor, the optimizer's included, the same bits. */
static int
identical(const char *a_path, const char *b_path)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmCheckpoint) a = tdm_checkpoint_load(a_path, &error);
  g_autoptr(TdmCheckpoint) b = a ? tdm_checkpoint_load(b_path, &error) : NULL;
  if (b == NULL) {
    fprintf(stderr, "mpi-helper: %s\n", error->message);
    return 2;
  }
  gint64 values = 0, differ = 0;
  for (int i = 0; i < tdm_checkpoint_count(a); i++) {
    const TdmTensor *ta = tdm_checkpoint_nth(a, i);
    const TdmTensor *tb = tdm_checkpoint_get(b, ta->name);
    gint64 n = 1;
    for (int d = 0; d < ta->rank; d++)
      n *= ta->shape[d];
    if (tb == NULL || tb->rank != ta->rank ||
        memcmp(tb->shape, ta->shape, ta->rank * sizeof(gint64)) != 0) {
      fprintf(stderr, "mpi-helper: %s: no tensor “%s” of that shape\n", b_path, ta->name);
      return 1;
    }
    for (gint64 k = 0; k < n; k++)
      differ += memcmp(&ta->data[k], &tb->data[k], sizeof(float)) != 0;
    values += n;
  }
  printf("%d tensors, %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " values differ\n",
         tdm_checkpoint_count(a), differ, values);
  return values > 0 && differ == 0 ? 0 : 1;
}

static int
first_without(int *argc, char ***argv, const char *ranks)
{
  g_autoptr(GError) error = NULL;
  if (!tdm_distributed_init(argc, argv, &error)) {
    fprintf(stderr, "mpi-helper: %s\n", error->message);
    return 2;
  }
  int rank = tdm_distributed_rank(), first = -2;
  g_auto(GStrv) without = g_strsplit(ranks, ",", -1);
  gboolean has = TRUE;
  for (char **r = without; *r != NULL; r++)
    has &= g_strcmp0(*r, "none") == 0 || atoi(*r) != rank;
  if (!tdm_distributed_first_without(has, &first, &error)) {
    fprintf(stderr, "mpi-helper: %s\n", error->message);
    tdm_distributed_abort(2);
  }
  printf("rank %d: first %d\n", rank, first);
  fflush(stdout);
  tdm_distributed_finalize();
  return 0;
}

int
main(int argc, char **argv)
{
  if (argc == 3 && g_str_equal(argv[1], "first-without"))
    return first_without(&argc, &argv, argv[2]);
  if (argc == 5 && g_str_equal(argv[1], "idx"))
    return make_idx(argv[2], atoi(argv[3]), atoi(argv[4]));
  if (argc == 4 && g_str_equal(argv[1], "identical"))
    return identical(argv[2], argv[3]);
  if (argc == 5 && g_str_equal(argv[1], "compare"))
    return compare(argv[2], argv[3], g_ascii_strtod(argv[4], NULL));
  fprintf(stderr, "usage: mpi-helper idx FOLDER TRAIN TEST\n"
                  "       mpi-helper compare A.safetensors B.safetensors TOLERANCE\n"
                  "       mpi-helper identical A.safetensors B.safetensors\n"
                  "       mpi-helper first-without RANKS (under mpirun)\n");
  return 2;
}
