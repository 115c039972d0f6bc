/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-engine.h — the CUDA backend's convolution engine (tdm-backend.h's
 * conv_engine_forward and conv_engine_backward): its candidates and how each runs
 * within the caller's workspace (tdm-backend-cuda-conv-candidates.c), the choice among them,
 * timed once a shape and remembered per backend and on disk (tdm-backend-cuda-conv-engine.c,
 * tdm-backend-cuda-conv-cache.c). Private to the CUDA backend and its tests.
 *
 * Candidates, per shape and direction:
 * - "im2col": the columns and a cuBLAS GEMM, the replica's own way (bf16 columns in a
 *   bf16 run, float32 otherwise);
 * - "own:dgrad": conv-implicit.cu's column-free input gradient (stride 1, bf16);
 * - "own:fwd", "own:wgrad": conv-small.cu's column-free forward and weight gradient of a
 *   convolution of few input channels (a first layer: c ≤ 8, kernel ≤ 7, stride 1 or 2,
 *   bf16; tdm-backend-cuda-conv-small.h);
 * - "cudnn:eE:rR:f" / ":h": cuDNN's engine E, the R-th of its heuristics' list, writing
 *   float32 (f) or bf16 then widened (h); with ":c8", run on the input's channels padded
 *   to 8 (a bf16 image of 3: forward and weight gradient); with ":nM", a bf16 forward
 *   or weight gradient (its chunks' sums added in float32 in their order, a bf16 plan's
 *   widened first) whose input the engine writes itself (normalized by the bn before,
 *   converted to bf16, padded) run in even chunks of at most M samples
 *   (tdm-backend-cuda-conv-chunks.h), each
 *   chunk's copy of the input at most tdm_conv_chunk_bytes(), by a plan built for M
 *   samples and, where the chunks are of two sizes, one of the same engine for M − 1
 *   (tdm-backend-cuda-conv-name.h spells the names);
 * - "cudnn-fused:eE:rR:f" / ":h": a bf16 forward whose input the bn before normalizes
 *   (stored as bf16), as one cuDNN graph that applies the bn and its ReLU as it reads x
 *   (tdm-backend-cuda-conv-fused.h): no copy of the input;
 * - "cudnn-phases:eE:rR:f" / ":h": a strided input gradient as one stride-1 cuDNN
 *   forward of engine E per output phase, each writing a strided view of dx
 *   (tdm-backend-cuda-conv-phases.h).
 */
#pragma once

#include "tdm-backend-cuda-private.h"
#include "tdm-backend-cuda-conv-cudnn.h"
#include "tdm-backend-cuda-conv-screen.h"
#include "tdm-conv-columns.h"

G_BEGIN_DECLS

typedef struct _TdmConvEngine TdmConvEngine;

typedef enum {
  TDM_CONV_IM2COL,
  TDM_CONV_OWN,
  TDM_CONV_CUDNN,
  TDM_CONV_CUDNN_FUSED,
  TDM_CONV_CUDNN_PHASES,
} TdmConvKind;

typedef struct _TdmConvPhases TdmConvPhases;

typedef struct {
  TdmConvKind kind;
  TdmCudnnPlan *plan;          /* cuDNN's (for the chunks of chunks.size samples), or NULL */
  TdmCudnnPlan *rest_plan;     /* cuDNN's for chunks of chunks.size − 1 samples, or NULL */
  TdmConvChunks chunks;        /* cuDNN: the batch's chunks (one: the whole batch) */
  gboolean float_out;          /* cuDNN: writes float32 itself */
  int pad_c;                   /* cuDNN: the input's channels padded to this, or 0 */
  gboolean fused_relu;         /* cuDNN fused: its graph applies the bn's ReLU */
  TdmConvPhases *phases;       /* cuDNN phases: the phases and their plans */
  double ms;                   /* measured, or 0 */
  char name[80];
} TdmConvCandidate;

/* A call's view of its workspace (tdm-backend-cuda-conv-candidates.c lays it out): the same
 * whatever its size, so a choice runs alike in any workspace that holds its need. */
typedef struct {
  const TdmConvArgs *a;
  TdmConvDirection dir;
  gboolean bf16;               /* bf16 operands (--precision bf16) */
  gboolean replica_im2col;     /* "im2col" here is what the replica composes itself */
  size_t rows, k;              /* output pixels, kernel² · c */
  uint16_t *dy16;              /* backward in bf16: dy as bf16, at the workspace's start */
  const uint16_t *w16;         /* bf16: the caller's weights where aligned, else room */
  char *scratch;               /* where a candidate's own scratch starts */
} TdmConvLayout;

/* Where each piece of a candidate's scratch starts: a multiple of this from address 0. */
#define TDM_CONV_ALIGN 256

/* Whether p is 16-byte aligned, as every pointer a cuDNN plan takes. */
static inline gboolean
tdm_conv_aligned16(const void *p)
{
  return ((uintptr_t)p & 15u) == 0;
}

/* A piece of `bytes` of a candidate's own scratch (the fused and phases candidates lay
 * out theirs) from the first TDM_CONV_ALIGN boundary at or after work + *at; *at past
 * it. */
static inline void *
tdm_conv_piece(char *work, size_t *at, size_t bytes)
{
  uintptr_t p = (uintptr_t)(work + *at);
  *at = (size_t)((p + TDM_CONV_ALIGN - 1) / TDM_CONV_ALIGN * TDM_CONV_ALIGN - (uintptr_t)work);
  void *piece = work + *at;
  *at += bytes;
  return piece;
}

/* tdm-backend-cuda-conv-candidates.c */

/* Lays out a call of direction dir (for backward, dy16 where the caller put it or where
 * it will be converted), whatever the workspace holds: candidates say what they need
 * of it. FALSE when the engine takes no such call (empty, no or a misaligned
 * workspace, a dy16 elsewhere). */
gboolean tdm_conv_layout (TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                          TdmConvLayout *l);
/* A call's preparation, once for its directions (they share the reservations): the
 * weights as aligned bf16 where the caller has none, and in backward dy as bf16 where
 * the caller did not write it. Nothing where the workspace does not hold the
 * reservations. */
void tdm_conv_prepare (TdmBackend *b, const TdmConvLayout *l);
/* Every candidate that takes the call, in a workspace of its need (the engine's budget,
 * tdm-backend-cuda-conv-budget.h, then decides which may be chosen), in a fixed order
 * (im2col, own, then cuDNN's in its heuristics' order, then cuDNN's fused, then its
 * phases), every one
 * deterministic (cuDNN's NONDETERMINISTIC engines are never offered).
 * With `only`, that one candidate (a cached choice: no other plan is built), if it
 * still takes the call. */
GPtrArray *tdm_conv_candidates_for (TdmBackend *b, const TdmConvLayout *l, const char *only);
/* Runs candidate c; FALSE with *error set when the workspace holds less than it needs
 * (nothing queued) or cuDNN failed it at run time (nothing sticky: the backend goes
 * on); *refused (where not NULL) TRUE where that failure was cuDNN refusing a plan of
 * phases (tdm_cudnn_refusal(): another candidate may run). */
gboolean tdm_conv_candidate_run (TdmBackend *b, const TdmConvLayout *l,
                                 const TdmConvCandidate *c, gboolean *refused, char **error);
/* The bytes of the workspace candidate c uses for the call, from its start: the
 * layout's reservations and its scratch (copies of the caller's misaligned operands
 * included). */
size_t tdm_conv_candidate_need (TdmBackend *b, const TdmConvLayout *l,
                                const TdmConvCandidate *c);
/* The roundings candidate c's result carries beyond the exact sums of the call's
 * operands (tdm-backend-cuda-conv-screen.h): the bf16 roundings on its way (a bf16
 * destination, a plan writing bf16, bf16 columns), TF32's operands. */
TdmConvRounding tdm_conv_candidate_rounding (TdmBackend *b, const TdmConvLayout *l,
                                             const TdmConvCandidate *c);
void tdm_conv_candidate_free (TdmConvCandidate *c);
/* The backend's cuDNN handle on its stream, created on first use; NULL without cuDNN
 * (or while the stream is captured, when none exists yet). */
cudnnHandle_t tdm_conv_cudnn_handle (TdmBackend *b);

/* tdm-backend-cuda-conv-engine.c (and tdm-backend-cuda.h's tdm_cuda_conv_*: reports; the calls
 * by name are tdm-backend-cuda-conv-named.c's) */

void tdm_cuda_conv_engine_free (TdmBackend *b);
/* Gives back the host memory the screens of the timings kept (a capture begins: the
 * timings of the steps it holds are done). */
void tdm_cuda_conv_engine_release_host (TdmBackend *b);

gboolean tdm_cuda_conv_engine_forward (TdmBackend *b, const TdmConvArgs *a);
gboolean tdm_cuda_conv_engine_backward (TdmBackend *b, const TdmConvArgs *a);
/* Runs candidate c of a's call (layout l), which the caller picked (a test's by name,
 * tdm-backend-cuda-conv-named.c): its conversions first, never mended (a failure fails
 * the backend), a forward's run recorded for tdm_cuda_conv_ran(). */
void tdm_conv_engine_run_given (TdmBackend *b, const TdmConvArgs *a, const TdmConvLayout *l,
                                const TdmConvCandidate *c);
void tdm_cuda_conv_choices (TdmBackend *b, TdmConvChoices *counts);

G_END_DECLS
