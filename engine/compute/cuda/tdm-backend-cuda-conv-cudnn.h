/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-cudnn.h — one convolution as a cuDNN 9 graph (its backend API: tensors, a
 * convolution descriptor, one operation, heuristics) and the execution plans its
 * engine configurations finalize into: the convolution engine's cuDNN candidates.
 * Tensors are NHWC, filters [out, kh, kw, in] (KRSC), as Tandem stores them, so no
 * layout changes. Not the choice among candidates (tdm-backend-cuda-conv-engine.c).
 */
#pragma once

#include "tdm-backend.h"
#include "tdm-cudnn.h"

G_BEGIN_DECLS

/* One finalized plan: a candidate. */
typedef struct {
  cudnnBackendDescriptor_t plan;
  int64_t workspace;           /* bytes it needs */
  int64_t engine;              /* cuDNN's global engine index */
  int rank;                    /* its place in the heuristics' list */
  struct _TdmCudnnKeep *keep;  /* the descriptors it was built from */
} TdmCudnnPlan;

/* Which engines a run accepts, by cuDNN's numerical notes: tensor cores on float32
 * data (TF32), Winograd and FFT change the rounding, so --precision fp32 takes none;
 * tf32 takes tensor cores; bf16 everything but FFT and reduced-precision sums. None
 * that is NONDETERMINISTIC, in any run. */
typedef struct {
  TdmPrecision precision;
} TdmCudnnFilter;

/* The plans of a convolution's graph for shape s and direction dir, the heuristics'
 * order kept, at most `most` of them, those that fail to finalize or that the filter
 * refuses left out. operand: CUDNN_DATA_BFLOAT16 or _FLOAT, the type of the two tensors
 * read; output: the type written (float32 output from bf16 operands is what some
 * engines take and others refuse). only_rank >= 0 finalizes that one rank (a cached
 * choice); only_engine >= 0 only the configurations of that engine (cuDNN's global
 * index: the same engine for another batch size). An empty array with *why_not set
 * when the graph itself is refused. Free each with tdm_cudnn_plan_free(). */
GPtrArray *tdm_cudnn_conv_plans (const TdmCudnn *dnn, cudnnHandle_t handle,
                                 TdmConvDirection dir, const TdmConvShape *s, int operand,
                                 int output, TdmCudnnFilter filter, int most, int only_rank,
                                 gint64 only_engine, char **why_not);
void tdm_cudnn_plan_free (TdmCudnnPlan *plan);

/* Runs plan on the handle's stream: image is x (forward, wgrad) or dx (dgrad), filter is
 * w or dw, out is y or dy, as dir has them; each 16-byte aligned; workspace of
 * plan->workspace bytes (NULL when 0). FALSE with *error set when cuDNN refuses. */
gboolean tdm_cudnn_plan_run (const TdmCudnn *dnn, cudnnHandle_t handle, const TdmCudnnPlan *plan,
                             void *image, void *filter, void *out, void *workspace,
                             char **error);

G_END_DECLS
