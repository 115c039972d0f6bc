/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-record.c — which recorded runs measure the same work, so that one's speed
 * may be set against the other's: a comparison table, a timeline's reference. Not
 * the reading of records (tdm-history.c). */
#include "tdm-history-private.h"

gboolean
tdm_run_record_same_work(const TdmRunRecord *a, const TdmRunRecord *b)
{
  g_return_val_if_fail(a != NULL && b != NULL, FALSE);
  const TdmConfig *x = a->config, *y = b->config;
  /* A sample costs what its network and its size make it cost: the batch, the
   * devices and the strategy are what a comparison sets against each other. */
  return x != NULL && y != NULL && g_strcmp0(x->network, y->network) == 0 &&
         g_strcmp0(x->dataset, y->dataset) == 0 && x->image_size == y->image_size &&
         x->image_channels == y->image_channels;
}
