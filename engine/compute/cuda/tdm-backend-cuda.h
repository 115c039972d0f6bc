/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda.h — private to the engine's CUDA code: what the peer and NCCL
 * communicators need from a CUDA backend (its stream and GPU), the checks that turn
 * CUDA failures into engine errors with file and line, and two small helpers the
 * GPU communicators share (stream timing by events, a host-side sum over the local
 * replicas). Not public API: the UI and the trainer never include it.
 */
#pragma once

#include <cuda_runtime_api.h>
#include <glib.h>

#include "tdm-backend.h"
#include "tdm-barrier.h"

G_BEGIN_DECLS

/* The backend's one non-blocking stream, on which all its operations run. */
cudaStream_t tdm_backend_cuda_stream (TdmBackend *b);

/* Every CUDA operation starts here: makes the backend's GPU current, since a replica's
 * thread may have used another; FALSE (and the sticky error) when that fails. The
 * front door (tdm-backend-calls*.c) has counted the operation, returned after an earlier
 * failure and checked the arguments already. */
gboolean tdm_cuda_begin (TdmBackend *b);
/* The backend's scratch for the first pass of per-channel sums (batch normalization),
 * *count doubles; the stream orders its users. */
double *tdm_backend_cuda_sum_scratch (TdmBackend *b, size_t *count);
/* Beside it, *count arrival counters for the sums' single launch (tdm_k_bn_moments):
 * zero between launches. */
unsigned *tdm_backend_cuda_sum_counters (TdmBackend *b, size_t *count);

/* The convolution engine (tdm-backend-cuda-conv-engine.h) for tests and benchmarks. The names of the
 * candidates one direction of a call has, laid out as conv_engine_forward and
 * conv_engine_backward would: "im2col", "own:dgrad", "own:fwd", "own:wgrad",
 * "cudnn:eE:rR:f" (cuDNN's engine E, the R-th of its heuristics' list, writing float32;
 * ":h" writing bf16). */
GPtrArray *tdm_cuda_conv_candidate_names (TdmBackend *b, const TdmConvArgs *a,
                                          TdmConvDirection dir);
/* Runs the named candidate for one direction (the call's conversions included); FALSE
 * when the name is not among them or a->work holds less than it needs. */
gboolean tdm_cuda_conv_run_named (TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                                  const char *name);
/* The bytes of a->work the named candidate needs for a direction of this call (its
 * layout's reservations and scratch); 0 when the name is not among them. */
size_t tdm_cuda_conv_need_named (TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                                 const char *name);
/* The bytes of cuDNN's own workspace the named cuDNN candidate asks for (the larger of
 * its two plans' where its chunks are of two sizes), part of its need; 0 when the name
 * is not among the call's candidates or is not cuDNN's. */
size_t tdm_cuda_conv_cudnn_workspace_named (TdmBackend *b, const TdmConvArgs *a,
                                            TdmConvDirection dir, const char *name);
/* The chosen candidate's name for a direction of this call, choosing now if needed;
 * NULL when none takes it. Valid while the backend lives. */
const char *tdm_cuda_conv_chosen (TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir);
/* Whether the last forward of a's key (shape, operand types, precision: the choice's
 * key) ran the candidate `name`, through the engine or by name; FALSE where it ran
 * another, or the engine left it to the caller, or none ran yet. */
gboolean tdm_cuda_conv_ran (TdmBackend *b, const TdmConvArgs *a, const char *name);
/* The candidates the screen left out when this backend timed the choice for a direction
 * of this call (tdm-backend-cuda-conv-screen.h: their results lay further from the
 * reference's than their precision allows), and in *reference (where not NULL; freed by
 * the caller) the reference's name; empty and NULL where no choice was made or it was
 * not timed here (the rule's, a cached one). */
GPtrArray *tdm_cuda_conv_left_out (TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                                   char **reference);
/* The most any timing of the engine asked of a workspace in the process since the last
 * tdm_cuda_conv_timing_needs_reset(): *most, what its candidates needed (the largest
 * of one timing's candidates' needs), and *need, what the timing asked for (that, or
 * the screen's least room past the reservations where that is more); 0 where nothing
 * was timed. What a first run's workspace grows to for its timings. */
void tdm_cuda_conv_timing_needs (size_t *most, size_t *need);
void tdm_cuda_conv_timing_needs_reset (void);
/* A line per choice made ("fwd n512 h32 … \tcudnn:e12:r0:f\t0.1234 ms"), for logs. */
char *tdm_cuda_conv_report (TdmBackend *b);

/* Records err in b's sticky error, naming the call, file and line; TRUE when err is
 * cudaSuccess. Never exits. */
gboolean tdm_cuda_ok_at (TdmBackend *b, cudaError_t err, const char *call, const char *file,
                         int line);
#define TDM_CUDA_OK(b, call) tdm_cuda_ok_at ((b), (call), #call, __FILE__, __LINE__)

/* The same for code that reports through a GError (communicators); `who` names the
 * device or replica in the message. FALSE and error set unless err is cudaSuccess. */
gboolean tdm_cuda_set_error_at (GError **error, int code, const char *who, cudaError_t err,
                                const char *call, const char *file, int line);
#define TDM_CUDA_TRY(error, code, who, call) \
  tdm_cuda_set_error_at ((error), (code), (who), (call), #call, __FILE__, __LINE__)

/* Sums n doubles over `parties` threads in party order, so every party gets the
 * same bits. Each party passes its own values and receives the sum in place. */
#define TDM_HOST_SUM_MAX 64
typedef struct {
  TdmBarrier barrier;
  int parties;
  double *slots;               /* [parties × TDM_HOST_SUM_MAX] */
} TdmHostSum;

void tdm_host_sum_init (TdmHostSum *s, int parties);
void tdm_host_sum_clear (TdmHostSum *s);
/* FALSE with error when n is too large or the barrier was broken (an abort). */
gboolean tdm_host_sum (TdmHostSum *s, int party, double *values, int n, GError **error);

G_END_DECLS
