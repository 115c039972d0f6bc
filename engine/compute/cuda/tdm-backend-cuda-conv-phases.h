/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-phases.h — the convolution engine's input gradient by phases
 * ("cudnn-phases:eE:rR:f|h", TDM_CONV_CUDNN_PHASES): a strided convolution's dx as s²
 * stride-1 cuDNN forward convolutions over dy, one per output phase, each writing every
 * s-th row and column of dx from its phase's offset (a tensor descriptor with dx's
 * strides multiplied, at a pointer into dx), their kernels sorted from w on each run by
 * conv-phases.cu into the workspace (conv-phases-plan.h has the arithmetic and its
 * reasons). cuDNN's own input gradient of a 3×3 stride-2 convolution runs at about half
 * its forward's rate; its forwards of these small kernels need not.
 *
 * Offered for an input gradient of stride 2 to 4 whose channels in and out are multiples
 * of 8 (every view's start 16-byte aligned), dx's destination and dy aligned, where
 * cuDNN finalizes a plan of one engine for every phase that convolves (the engines the
 * most demanding such phase's heuristics list, MODE_A's then FALLBACK's, tried in that
 * order until TDM_CONV_PHASES_MOST candidates are built; a view cuDNN refuses means no
 * candidate, never a failure later). Phases with no tap in reach write zeros:
 * dx is cleared first where any has none. Each plan writes dx's type (dx16 as bf16, dx
 * as float32) from float32 sums; every engine deterministic, so eligible under --exact,
 * where the rule still prefers cuDNN's plain plan. The workspace, from the layout's
 * scratch on: the sorted kernels (as many values as w, in the operands' type), then
 * cuDNN's (the most any phase's plan needs). TANDEM_CUDNN_PHASES=0 offers none (read at
 * every call).
 */
#pragma once

#include "tdm-backend-cuda-conv-engine.h"

G_BEGIN_DECLS

#define TDM_CONV_PHASES_MOST 6

/* Adds the phases candidates that take the layout's call to list, or only the one
 * `only` names (a cached choice) where it still does. */
void tdm_conv_phases_add (TdmBackend *b, const TdmConvLayout *l, GPtrArray *list,
                          const char *only);
/* Runs phases candidate c (run), or only measures it: *need gets the bytes of the
 * workspace it uses from its start. FALSE where it does not take the call (or, running,
 * where the workspace is too small: nothing queued) or cuDNN failed a phase's plan as it
 * ran (*error set, *refused where that was a refusal, tdm_cudnn_refusal(); the phases
 * before it queued: dx is incomplete). */
gboolean tdm_conv_phases_call (TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c,
                               gboolean run, size_t *need, gboolean *refused, char **error);
void tdm_conv_phases_free (TdmConvPhases *p);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmConvPhases, tdm_conv_phases_free)

G_END_DECLS
