/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-cudnn.h — one convolution as a cuDNN 9 graph (its backend API: tensors, a
 * convolution descriptor, one operation, heuristics) and the execution plans its
 * engine configurations finalize into: the convolution engine's cuDNN candidates.
 * Tensors are NHWC, filters [out, kh, kw, in] (KRSC), as Tandem stores them, so no
 * layout changes. Not the choice among candidates (tdm-backend-cuda-conv-engine.c).
 * Its building blocks (tensors, the convolution descriptor, heuristics to plans, a
 * plan's run) serve the fused graph too (tdm-backend-cuda-conv-fused-graph.c).
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
  gboolean runtime_compiled;   /* compiled by cuDNN (NVRTC) as it was finalized */
  int shared;                  /* owners beyond the first (tdm_cudnn_plan_share()) */
  struct _TdmCudnnKeep *keep;  /* the descriptors it was built from */
} TdmCudnnPlan;

/* Which engines a run accepts, by cuDNN's numerical notes: tensor cores on float32
 * data (TF32), Winograd and FFT change the rounding, so --precision fp32 takes none;
 * tf32 takes tensor cores; bf16 everything but FFT and reduced-precision sums. None
 * that is NONDETERMINISTIC, in any run. No engine compiled at run time (its plan
 * compiles with NVRTC as it is finalized, seconds a shape) but for a fused graph
 * (tdm_cudnn_build_plans()'s runtime_compiled). */
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
/* Drops one owner of plan: the last frees it. */
void tdm_cudnn_plan_free (TdmCudnnPlan *plan);
/* One more owner of plan (each calls tdm_cudnn_plan_free()); plan itself. */
TdmCudnnPlan *tdm_cudnn_plan_share (TdmCudnnPlan *plan);

/* Runs plan on the handle's stream: image is x (forward, wgrad) or dx (dgrad), filter is
 * w or dw, out is y or dy, as dir has them; each 16-byte aligned; workspace of
 * plan->workspace bytes (NULL when 0). FALSE with *error set when cuDNN fails, and
 * *refused (where not NULL) TRUE where that failure is a refusal
 * (tdm_cudnn_refusal()). */
gboolean tdm_cudnn_plan_run (const TdmCudnn *dnn, cudnnHandle_t handle, const TdmCudnnPlan *plan,
                             void *image, void *filter, void *out, void *workspace,
                             gboolean *refused, char **error);
/* Whether a plan's failure as it ran, of this status, is cuDNN refusing it (NOT_SUPPORTED
 * or BAD_PARAM, any of their sub-codes, with no CUDA error pending on the thread): the
 * plan will not run, but nothing else is wrong, so another candidate may. Anything else
 * (an execution failure, a CUDA error, memory) is not. */
gboolean tdm_cudnn_refusal (cudnnStatus_t status);

/* The building blocks of a graph (for tdm-backend-cuda-conv-fused-graph.c). A graph
 * under construction keeps its descriptors (they live as long as a plan built from
 * them) and its first failure: a later call does nothing, so a graph is built call
 * after call and checked once. */
typedef struct {
  const TdmCudnn *dnn;
  struct _TdmCudnnKeep *keep;
  cudnnStatus_t status;        /* the first failure's, or CUDNN_STATUS_SUCCESS */
  const char *what;            /* the call that failed first */
} TdmCudnnBuild;

void tdm_cudnn_build_init (TdmCudnnBuild *bd, const TdmCudnn *dnn);
/* A new descriptor of `type` (cudnnBackendDescriptorType_t), kept by bd; NULL once bd
 * failed. */
cudnnBackendDescriptor_t tdm_cudnn_build_make (TdmCudnnBuild *bd, int type);
void tdm_cudnn_build_set (TdmCudnnBuild *bd, cudnnBackendDescriptor_t d, int name, int type,
                          int64_t count, const void *value, const char *what);
void tdm_cudnn_build_finalize (TdmCudnnBuild *bd, cudnnBackendDescriptor_t d,
                               const char *what);
/* A tensor's dimensions and strides in elements, in the order n, c, h, w (a KRSC
 * filter: k for n), as cuDNN's descriptors take them: a packed NHWC tensor
 * (tdm_cudnn_packed()), or a view of one (every other row and column of it, some rows
 * of it: the input gradient by phases, tdm-backend-cuda-conv-phases.h). */
typedef struct {
  int64_t dims[4];
  int64_t strides[4];
} TdmCudnnView;

TdmCudnnView tdm_cudnn_packed (int64_t n, int64_t c, int64_t h, int64_t w);
/* A finalized tensor of view v, 16-byte aligned, identified by uid in a variant pack; a
 * virtual one is a graph's intermediate, never stored. */
cudnnBackendDescriptor_t tdm_cudnn_build_view (TdmCudnnBuild *bd, int64_t uid, int type,
                                               const TdmCudnnView *v, gboolean is_virtual);
/* A finalized tensor of n × c × h × w stored NHWC (a KRSC filter: k for n; a per-channel
 * vector: 1 × c × 1 × 1), 16-byte aligned, identified by uid in a variant pack; a virtual
 * one is a graph's intermediate, never stored. */
cudnnBackendDescriptor_t tdm_cudnn_build_tensor (TdmCudnnBuild *bd, int64_t uid, int type,
                                                 int64_t n, int64_t c, int64_t h, int64_t w,
                                                 gboolean is_virtual);
/* A finalized 2-D cross-correlation of shape s (stride, padding; float32 sums). */
cudnnBackendDescriptor_t tdm_cudnn_build_convolution (TdmCudnnBuild *bd,
                                                      const TdmConvShape *s);
/* A finalized 2-D cross-correlation of this stride and padding before and after (rows,
 * columns; float32 sums). */
cudnnBackendDescriptor_t tdm_cudnn_build_convolution_padded (TdmCudnnBuild *bd, int64_t stride,
                                                             const int64_t pre[2],
                                                             const int64_t post[2]);
/* The plans of a finalized graph: the heuristics of each of `modes` (cudnnBackendHeurMode_t)
 * listed one after the other (a rank is a place in that list; a later mode's engine that
 * an earlier one gave a plan is left out), finalized as tdm_cudnn_conv_plans() says
 * (most, only_rank, only_engine, filter, *why_not); engines compiled at run time too
 * where runtime_compiled (each plan that fails to finalize then said in the debug log,
 * with cuDNN's status and the call; only the first 8 configurations tried, as each
 * failure may have cost seconds of compiling). Ends bd: the plans keep what they need. */
GPtrArray *tdm_cudnn_build_plans (TdmCudnnBuild *bd, cudnnHandle_t handle,
                                  cudnnBackendDescriptor_t graph, const int *modes,
                                  int mode_count, TdmCudnnFilter filter,
                                  gboolean runtime_compiled, int most,
                                  int only_rank, gint64 only_engine, char **why_not);
/* The finalized operation graph of one convolution, as tdm_cudnn_conv_plans() builds it
 * (its tensors as that function's operand and output say, their uids those
 * tdm_cudnn_plan_run() passes), kept by bd; NULL with bd's status set. */
cudnnBackendDescriptor_t tdm_cudnn_build_conv_graph (TdmCudnnBuild *bd, cudnnHandle_t handle,
                                                     TdmConvDirection dir,
                                                     const TdmConvShape *s, int operand,
                                                     int output);
/* The same graph over views of the tensors (image: x or dx, filter: w or dw, out: y or
 * dy), of this stride and padding before and after: the pointers tdm_cudnn_plan_run()
 * passes are where each view starts. */
cudnnBackendDescriptor_t tdm_cudnn_build_view_graph (TdmCudnnBuild *bd, cudnnHandle_t handle,
                                                     TdmConvDirection dir,
                                                     const TdmCudnnView *image,
                                                     const TdmCudnnView *filter,
                                                     const TdmCudnnView *out, int64_t stride,
                                                     const int64_t pre[2],
                                                     const int64_t post[2], int operand,
                                                     int output);
/* Ends bd without plans (a caller that makes its own from the graph, such as a
 * benchmark): its descriptors go once no plan of tdm_cudnn_build_plans() keeps them. */
void tdm_cudnn_build_end (TdmCudnnBuild *bd);
/* Whether an engine with these numerical and behaviour notes fits the filter (and,
 * unless runtime_compiled, is not compiled at run time): the rule
 * tdm_cudnn_conv_plans() and tdm_cudnn_build_plans() apply. */
gboolean tdm_cudnn_notes_accepted (const int *notes, int64_t count, const int *behavior,
                                   int64_t behavior_count, TdmCudnnFilter filter,
                                   gboolean runtime_compiled);
/* Runs plan with `count` tensors (their uids and 16-byte aligned pointers). FALSE with
 * *error set when cuDNN fails, *refused (where not NULL) as tdm_cudnn_plan_run() says. */
gboolean tdm_cudnn_plan_execute (const TdmCudnn *dnn, cudnnHandle_t handle,
                                 const TdmCudnnPlan *plan, int count, const int64_t *uids,
                                 void *const *pointers, void *workspace, gboolean *refused,
                                 char **error);

G_END_DECLS
