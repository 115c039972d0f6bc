/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-budget.c — the convolution engine's workspace budget per call
 * (tdm-backend-cuda-conv-budget.h; the budget itself is tdm-conv-columns.c's, which the
 * memory plan reads too). Compiled without CUDA too. */
#include "tdm-backend-cuda-conv-budget.h"

guint
tdm_conv_budget_select(const guint64 *needs, guint count, guint64 reserved,
                       TdmPrecision precision, gboolean *eligible)
{
  if (count == 0)
    return 0;
  guint64 least = needs[0];
  for (guint i = 1; i < count; i++)
    least = MIN(least, needs[i]);
  guint64 budget = tdm_conv_budget_beyond(least, reserved, precision);
  guint chosen = 0;
  for (guint i = 0; i < count; i++) {
    eligible[i] = needs[i] <= budget;
    chosen += eligible[i] ? 1 : 0;
  }
  return chosen;
}
