/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-fused.h — the convolution engine's fused cuDNN candidates
 * ("cudnn-fused:eE:rR:f|h", TDM_CONV_CUDNN_FUSED): a bf16 run's forward or weight
 * gradient whose input the bn before normalizes as the conv reads it (the layout's "bn
 * prologue": x stored as bf16, x · scale + shift per channel, then the bn's ReLU), run as
 * one cuDNN graph (tdm-backend-cuda-conv-fused-graph.h) that reads the stored x itself,
 * where the plain cuDNN candidates first write a normalized bf16 copy of it (the forward
 * in chunks of samples, the bf16-output weight gradient whole). The workspace holds the
 * per-channel scale and shift (float32, computed from the bn's statistics and affine on
 * each run: the bits bn_forward applies) and cuDNN's own workspace. A forward writes
 * where the caller wants it, in its type (y16 as bf16, else y as float32); a weight
 * gradient writes dw as float32, or where cuDNN has no such plan as bf16 staged in the
 * workspace and widened (each value rounded once: the one sum of the whole batch). A
 * call whose x or output is not 16-byte aligned, or whose channels in or out are not a
 * multiple of 8, gets none. Like every candidate, deterministic (no NONDETERMINISTIC
 * engine) and so eligible under --exact, where the rule still prefers a plain cuDNN
 * plan (tdm-backend-cuda-conv-engine.c).
 * Its plans are compiled by cuDNN at run time (seconds a shape): at most
 * TDM_CONV_FUSED_MOST of them a shape, and one for a cached choice; a backend keeps the
 * plans it listed (per graph: direction, shape, ReLU, output type), so listing a shape
 * again, or running one of its candidates by name, compiles nothing more.
 * TANDEM_CUDNN_FUSED=0 offers none (read at every call: to measure without them).
 */
#pragma once

#include "tdm-backend-cuda-conv-engine.h"

G_BEGIN_DECLS

#define TDM_CONV_FUSED_MOST 2

/* Adds the fused candidates that take the layout's call to list (in the heuristics'
 * order), or only the one `only` names (a cached choice) when it still does; nothing
 * without cuDNN, while the stream is captured, or where cuDNN builds no plan (the debug
 * log says why). */
void tdm_conv_fused_add (TdmBackend *b, const TdmConvLayout *l, GPtrArray *list,
                         const char *only);
/* Runs fused candidate c (run), or only measures it: *need gets the bytes of the
 * workspace it uses from its start (the layout's reservations included). FALSE where it
 * does not take the call (or, running, where the workspace is too small: nothing queued)
 * or cuDNN refused it (*error set). */
gboolean tdm_conv_fused_call (TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c,
                              gboolean run, size_t *need, char **error);

/* Frees the backend's listed fused plans (before its cuDNN handle goes); plans a
 * candidate still holds stay until it is freed. */
void tdm_conv_fused_forget (TdmBackend *b);

G_END_DECLS
