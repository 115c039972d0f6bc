/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-fused-graph.h — a convolution forward or weight gradient whose
 * input a batch norm before normalizes, as one cuDNN 9 graph: pointwise operations on the
 * stored input x (x · scale, + shift per channel, then max(·, 0) where the bn has its
 * ReLU; virtual: never written) feeding the convolution, so that no normalized copy of
 * the input is made. cuDNN runs such a graph with its fusion engines, most of them compiled
 * at run time (NVRTC, which cuDNN loads itself: where it is missing, no plan finalizes
 * and the graph has none). Tensors NHWC, filters KRSC, as tdm-backend-cuda-conv-cudnn.h's.
 * The graph and its plans only: the candidate that runs them is
 * tdm-backend-cuda-conv-fused.c's.
 */
#pragma once

#include "tdm-backend-cuda-conv-cudnn.h"

G_BEGIN_DECLS

/* The plans of the fused graph of direction dir (TDM_CONV_FORWARD or TDM_CONV_WGRAD) and
 * shape s: the tensors read (x, and w or dy) of type operand (CUDNN_DATA_BFLOAT16), the
 * one written (y or dw) of type output, scale and shift float32 vectors of s->c; relu:
 * the ReLU after the affine map. The heuristics' INSTANT list then their FALLBACK list
 * (ranks count over both), engines compiled at run time accepted, every other note as
 * filter says (never a NONDETERMINISTIC one); at most `most`, only_rank and only_engine
 * as tdm_cudnn_conv_plans() has them. Float32 intermediates, or the operand's type
 * where cuDNN has no plan for those. An empty array with *why_not set when cuDNN refuses
 * both graphs or no plan finalizes (each refused plan said in the debug log). */
GPtrArray *tdm_cudnn_fused_plans (const TdmCudnn *dnn, cudnnHandle_t handle,
                                  TdmConvDirection dir, const TdmConvShape *s, gboolean relu,
                                  int operand, int output, TdmCudnnFilter filter, int most,
                                  int only_rank, gint64 only_engine, char **why_not);

/* Runs a fused plan on the handle's stream: x, filter (w or dw), out (y or dy), scale
 * and shift 16-byte aligned, workspace of plan->workspace bytes (NULL when 0). FALSE
 * with *error set when cuDNN refuses. */
gboolean tdm_cudnn_fused_run (const TdmCudnn *dnn, cudnnHandle_t handle, const TdmCudnnPlan *plan,
                              const void *x, const void *filter, void *out, const float *scale,
                              const float *shift, void *workspace, char **error);

G_END_DECLS
