/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-small.h — the convolution engine's own candidates for a
 * convolution of few input channels (a network's first layer), conv-small.cu's
 * kernels: "own:fwd" (the forward) and "own:wgrad" (the weight gradient), in bf16 runs
 * on sm_80 or later, for the shapes conv-small-plan.h takes. What each takes, the
 * scratch it needs past the layout's reservations, and the run; the candidate list and
 * the workspace arena stay tdm-backend-cuda-conv-candidates.c's. Private to the CUDA
 * backend and its tests.
 */
#pragma once

#include "tdm-backend-cuda-conv-engine.h"

G_BEGIN_DECLS

/* The name of the direction's candidate ("own:fwd", "own:wgrad"), or NULL (none for the
 * input gradient: a first layer has none). */
const char *tdm_conv_small_name (TdmConvDirection dir);
/* Whether the candidate of the layout's direction takes the call: a bf16 run on a GPU
 * of compute capability 8 or more, a shape conv-small-plan.h takes, an output where
 * the kernel writes it (the forward's 16-byte aligned). */
gboolean tdm_conv_small_takes (TdmBackend *b, const TdmConvLayout *l);
/* The scratch it needs past the layout's reservations: the weight gradient's partial
 * sums, 0 for the forward. */
size_t tdm_conv_small_scratch (const TdmConvLayout *l);
/* Queues it on the backend's stream (after tdm_conv_prepare: the weights, and dy in
 * backward, as the layout's bf16); scratch holds tdm_conv_small_scratch() bytes,
 * 256-byte aligned. A launch that fails fails the backend. */
void tdm_conv_small_run (TdmBackend *b, const TdmConvLayout *l, void *scratch);

G_END_DECLS
