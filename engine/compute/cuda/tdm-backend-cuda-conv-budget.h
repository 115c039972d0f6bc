/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-budget.h — which of a convolution's candidates may be chosen by
 * what each needs of the workspace. The workspace is one buffer for every layer, sized
 * by the largest need among the choices: a candidate that is a little faster on one layer
 * but needs its whole columns (k² times the input) would make every step hold them.
 * So a candidate is eligible when its need is within the budget that the call's
 * least-needing candidate sets (a column-free one, where one takes the shape), counted
 * beyond the reservations every candidate of the call holds alike (tdm_conv_budget_beyond());
 * the fastest eligible one is chosen. While choosing, the workspace grows to the most
 * any eligible candidate needs, to time it: the budget bounds that peak too. Knows
 * nothing of CUDA: tested on any machine.
 */
#pragma once

#include <glib.h>
#include "tdm-conv-columns.h" /* tdm_conv_budget() */

G_BEGIN_DECLS

/* Marks eligible[i] for the count needs, each of which includes the call's `reserved`
 * bytes: those within tdm_conv_budget_beyond() of the least in a run of this precision
 * (at least one when count > 0). Returns how many are. */
guint tdm_conv_budget_select (const guint64 *needs, guint count, guint64 reserved,
                              TdmPrecision precision, gboolean *eligible);

G_END_DECLS
