/* SPDX-License-Identifier: GPL-3.0-or-later */
/* checkpoint-compare.h — two checkpoints' tensors compared: the same names in the
 * same order, the same shapes and the same bits. test-checkpoint.c compares a
 * checkpoint with what saving and loading it gave back, test-pth.c a .pth file with
 * torch's own conversion. Header-only, included once by each test program. */
#pragma once

#include "tdm-checkpoint.h"

#include <glib.h>
#include <string.h>

/* How many values the tensor holds (1 for a scalar, 0 for an empty one). */
static inline gint64
tensor_elements(const TdmTensor *t)
{
  gint64 n = 1;
  for (int d = 0; d < t->rank; d++)
    n *= t->shape[d];
  return n;
}

/* Every tensor of want is in got, in the same order, with the same shape and bits. */
static inline void
assert_same_tensors(TdmCheckpoint *got, TdmCheckpoint *want)
{
  g_assert_cmpint(tdm_checkpoint_count(got), ==, tdm_checkpoint_count(want));
  for (int i = 0; i < tdm_checkpoint_count(want); i++) {
    const TdmTensor *w = tdm_checkpoint_nth(want, i), *g = tdm_checkpoint_nth(got, i);
    g_assert_cmpstr(g->name, ==, w->name);
    g_assert_cmpint(g->rank, ==, w->rank);
    for (int d = 0; d < w->rank; d++)
      g_assert_cmpint(g->shape[d], ==, w->shape[d]);
    gint64 n = tensor_elements(w);
    if (n > 0 && memcmp(g->data, w->data, (size_t)n * sizeof(float)) != 0)
      g_error("tensor %s differs: not the same bits", w->name);
  }
}
