/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-conv-columns.h — a convolution's column way (im2col and a GEMM) in chunks of the
 * batch, and the bytes of workspace it takes: the one rule that the convolution
 * engine's "im2col" candidate (tdm-backend-cuda-conv-candidates.c), the replica's own
 * composition (tdm-replica-conv.c) and the memory plan (tdm-replica-plan.c) share, so the
 * plan counts what the candidates allocate.
 *
 * A GPU builds a convolution's columns a few samples at a time, each chunk's columns no
 * more than tdm_conv_chunk_bytes() of the run's precision (or one sample's, where one
 * sample's are more): the
 * forward and the input gradient chunk by chunk (each sample's output depends on its
 * own columns only), the weight gradient summed over the chunks in float32, in the
 * chunks' order (the first product written, the next ones added with beta = 1), so two
 * runs give the same bits. The CPU keeps the whole batch's columns in one piece (its
 * bound is 0). Knows nothing of CUDA: tested on any machine.
 */
#pragma once

#include <glib.h>
#include "tdm-backend.h"

G_BEGIN_DECLS

/* The most bytes of columns (bf16 or float32, as the call builds them) a GPU's chunk
 * holds in a run of this precision: 32 MiB in a bf16 run, whatever the columns' type
 * (its stem's float32 columns too; the memory plan of the ResNets it is for is tight:
 * on one H100, with every bn output stored (TANDEM_BN_STORE=all), 32-MiB chunks ran
 * CIFAR ResNet-18 at 32 px (batch 512) and 64 px (batch 256) at the same speed as
 * 64-MiB ones (78,182 against 77,485 and 21,743 against 21,817 samples/s) with 33 and
 * 32 MB less workspace, the projections' im2col forwards as fast or faster), 256 MiB in
 * a float32 or tf32 run (a chunk is one im2col and one GEMM each way: the small cnn's
 * 3×3 conv at batch 1024, 231 MB of float32 columns, ran 9 % slower a step in four
 * chunks than whole). Where TANDEM_CONV_CHUNK_MIB is set, its mebibytes (1 to 4096;
 * read once) are every precision's bound, for benchmarks that weigh a chunk's size. */
size_t tdm_conv_chunk_bytes (TdmPrecision precision);

/* The bound on a chunk's columns on a backend of this kind in a run of this precision:
 * tdm_conv_chunk_bytes() on a GPU, 0 (the whole batch at once) on the CPU. */
size_t tdm_conv_columns_bound (TdmBackendKind kind, TdmPrecision precision);

/* The samples of a chunk of a call of n samples whose columns take `sample_bytes` a
 * sample: n where bound is 0 or the whole batch fits it, else as many as fit it, at
 * least one. */
int tdm_conv_chunk_samples (int n, size_t sample_bytes, size_t bound);

/* A batch of n samples in chunks of nearly equal size, for a call whose per-sample
 * bytes (of an operand staged a chunk at a time) are more than a bound holds in all:
 * as few chunks as tdm_conv_chunk_samples() allows, their sizes differing by one at
 * most (97 samples of at most 32: 25, 24, 24, 24), so that no chunk is a small
 * remainder and at most two sizes need their own set-up (a cuDNN plan is built for
 * one batch size). The first `large` chunks have `size` samples, the others size − 1. */
typedef struct {
  int count;             /* chunks, at least 1 */
  int size;              /* samples of the largest chunk */
  int large;             /* chunks of `size` samples, 1 to count */
} TdmConvChunks;

/* The even chunks of n samples (n ≥ 1) of `sample_bytes` each, each chunk's bytes at
 * most `bound` (or one sample, where one sample is more): one chunk of n where the
 * whole batch fits or bound is 0. */
TdmConvChunks tdm_conv_even_chunks (int n, size_t sample_bytes, size_t bound);
/* Chunk i's first sample and its samples (*m). */
int tdm_conv_chunk_first (const TdmConvChunks *c, int i, int *m);

/* p advanced by `count` elements of type t: a chunk's first sample. */
static inline const void *
tdm_conv_advanced (const void *p, TdmDtype t, size_t count)
{
  return (const char *)p + count * tdm_dtype_size (t);
}

/* The bytes of the workspace the convolution engine's "im2col" candidate takes for a
 * call of shape s and direction dir (its need, from the workspace's start, the
 * workspace aligned to 256 bytes as the device's allocations are) in a run of this
 * precision, a chunk's columns within its tdm_conv_chunk_bytes(): in a bf16 run bf16
 * columns after the layout's reservations (the output gradient as bf16 in backward, the
 * weights' room), in a float32 or tf32 one float32 columns (none for a 1×1 conv of
 * stride 1) and the float32 product staged where a forward writes y16. dy16_outside: a
 * bf16 backward whose caller holds the output gradient as bf16 outside the workspace
 * (tdm_conv_engine_reserved_bytes()). */
size_t tdm_conv_engine_im2col_bytes (const TdmConvShape *s, TdmConvDirection dir,
                                     TdmPrecision precision, gboolean y16,
                                     gboolean dy16_outside);

/* The most a convolution engine's candidate may need of the workspace, in a run of this
 * precision, when the least any candidate of the call needs is `least`
 * (tdm-backend-cuda-conv-budget.h): twice that, or that and a slack, whichever is more
 * (cuDNN's plans differ by their own workspace; columns are many times the operands).
 * The slack is the run's tdm_conv_chunk_bytes(), at least 64 MiB: a candidate needing
 * one chunk of columns more than the least stays eligible (the column way beside a
 * column-free one: without it, a float32 run's 256-MiB chunks were left out and cuDNN's
 * float32 engines, 12 times slower on the small cnn, chosen), and a smaller chunk (a
 * bf16 run's 32 MiB, or one set for a benchmark) leaves cuDNN's plans their 64 MiB. */
guint64 tdm_conv_budget (guint64 least, TdmPrecision precision);

/* The budget of a call whose every candidate first takes `reserved` bytes of the
 * workspace (the layout's reservations: the output gradient as bf16 in a bf16 backward,
 * the weights' room): the reservations and tdm_conv_budget() of what the least-needing
 * candidate takes beyond them, so that what all candidates hold alike is not doubled
 * (the 224-px stem's weight gradient: 205.5 MB of output gradient before 20.6 MB of its
 * own kernel's sums). reserved is taken as no more than least. The memory plan's column
 * workspace is the most of this over the calls, with each call's column way as least
 * (which is at least the call's least: the budget only grows with it). */
guint64 tdm_conv_budget_beyond (guint64 least, guint64 reserved, TdmPrecision precision);

/* The bytes every candidate of a call of shape s and direction dir takes from the
 * workspace's start before its own scratch (tdm_conv_layout()'s reservations): in a
 * bf16 run the output gradient as bf16 in backward (not where the caller gives it
 * outside the workspace: dy16_outside) and the weights' room, aligned to 256 bytes;
 * nothing in a float32 run. */
size_t tdm_conv_engine_reserved_bytes (const TdmConvShape *s, TdmConvDirection dir,
                                       gboolean bf16, gboolean dy16_outside);

/* How the replica composes a conv itself (tdm-replica-conv.c), for
 * tdm_conv_replica_bytes(). */
typedef struct {
  gboolean columns;      /* the layer has columns (not a 1×1 conv of stride 1) */
  gboolean bf16;         /* bf16 columns (tdm_replica_conv_bf16()), else float32 */
  gboolean bf16_dx;      /* the input gradient through bf16 columns
                          * (tdm_replica_conv_bf16_dx()) */
  gboolean params16;     /* the replica keeps its weights as bf16 (no room for them) */
  gboolean y16;          /* float32 columns, forward: the output is stored as bf16, each
                          * chunk's float32 product staged after its columns, then rounded */
  gboolean dy16;         /* float32 columns, backward: the output gradient comes as bf16
                          * (the bn after the network's first layer wrote it:
                          * bn_dx_to_conv()), each chunk's widened into a stage after its
                          * columns; no input gradient */
  gboolean dy16_outside; /* backward: the output gradient as bf16 lies outside the
                          * workspace (the bn after the conv wrote it in place,
                          * tdm-replica-private.h's bn_dx_in_place()), not at its start */
} TdmConvComposition;

/* The bytes of the workspace the replica's own composition takes for a call of shape s
 * (forward, or backward with or without the input gradient) in chunks of `bound`
 * bytes of columns: its chunk of columns (bf16 after the whole output gradient as bf16
 * in backward where it lies in the workspace, and the bf16 weights after them where the
 * replica keeps none; float32 otherwise, and for an input gradient that does not go the
 * bf16 way; float32 ones with a float32 stage of the chunk's output or output gradient
 * after them, 64-byte aligned, where y16 or dy16 says, after the whole output gradient
 * as bf16 in backward where it lies in the workspace; tdm_conv_staged_chunk() samples a
 * chunk then). */
size_t tdm_conv_replica_bytes (const TdmConvShape *s, const TdmConvComposition *how,
                               gboolean backward, gboolean need_dx, size_t bound);
/* The samples of a chunk of the staged float32 way (TdmConvComposition's y16, dy16) of
 * a call of shape s: its float32 columns and its stage together within `bound`. */
int tdm_conv_staged_chunk (const TdmConvShape *s, size_t bound);
/* Where that way's float32 columns start in the workspace (bytes: after the whole output
 * gradient as bf16 where the workspace holds it at its start, dy16_at_start: a backward
 * whose output gradient is not outside) and where the stage starts after a chunk's
 * columns. */
size_t tdm_conv_staged_columns_at (const TdmConvShape *s, gboolean dy16_at_start);
size_t tdm_conv_staged_stage_at (const TdmConvShape *s, gboolean dy16_at_start, size_t bound);

G_END_DECLS
