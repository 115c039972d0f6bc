/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-int-sum.h — the int64 sum over the replicas of one process, in host memory:
 * exact mode's fixed-point gradients (tdm-exact.h). Each replica's thread registers
 * its buffer, sums its own slice of every buffer and writes it back into all of them;
 * integer sums give the same bits in any order, so no order is kept. Shared by the
 * host, peer and nccl communicators; not a communicator itself. */
#pragma once

#include <glib.h>
#include "tdm-barrier.h"

G_BEGIN_DECLS

typedef struct {
  TdmBarrier barrier;
  int parties;
  gint64 **buffers;            /* [parties]: registered for the current sum */
} TdmIntSum;

void tdm_int_sum_init (TdmIntSum *s, int parties);
void tdm_int_sum_clear (TdmIntSum *s);
/* Makes the current and later sums fail at once (a replica failed or stopped). */
void tdm_int_sum_break (TdmIntSum *s);
/* values[0, n) ← their sum over every party; every party calls it with the same n. */
gboolean tdm_int_sum (TdmIntSum *s, int party, gint64 *values, size_t n, GError **error);

G_END_DECLS
