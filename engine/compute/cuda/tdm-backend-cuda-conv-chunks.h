/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-chunks.h — which of the convolution engine's cuDNN calls run in
 * chunks of samples, and what a cuDNN weight gradient in a bf16 run needs of the
 * workspace. A bf16 plan reads its input as bf16; where the engine writes that copy
 * itself (the bn before normalized as the conv reads, a float32 input converted, a
 * stem's channels padded), it writes one even chunk of samples at a time
 * (tdm-conv-columns.h's tdm_conv_even_chunks(): each chunk's copy at most a bf16 run's
 * tdm_conv_chunk_bytes()), so the copy is never the whole batch's (268 MB at 128 px, batch
 * 128, 64 channels). tdm-backend-cuda-conv-candidates.c runs the chunks; this file says
 * which and how many, and counts a weight gradient's need as its candidate lays it out
 * (tests/gpu/test-cuda-conv-workspace.c compares the two). Knows nothing of CUDA: tested
 * on any machine.
 *
 * The forward's samples are independent: its chunks are put in place one by one. The
 * weight gradient is a sum over samples: each chunk's sum is added to the first's in
 * float32, in the chunks' order (the same bits every run), whether the plan writes
 * float32 or bf16 — a bf16 chunk sum widened first, so each chunk adds one bf16
 * rounding of its own partial sum where a whole bf16 result has one rounding of the
 * total (tdm-backend-cuda-conv-candidates.c's run_cudnn() derives what that costs).
 * The input gradient reads no input and runs whole.
 */
#pragma once

#include <glib.h>
#include "tdm-conv-columns.h"

G_BEGIN_DECLS

/* The chunks of a bf16 cuDNN call of shape s and direction dir: even chunks of the
 * input's bf16 copy (pad_c channels a pixel where pad_c > 0) where the engine writes
 * that copy itself (`written`) and the call is a forward, or a weight gradient whose
 * every chunk's output gradient starts 16-byte aligned (a sample's output gradient a
 * multiple of 8 bf16 values, as cuDNN wants its operands); one chunk, the whole batch,
 * otherwise. The chunks follow from the shape and what the choice's key says (" bn",
 * " x16"), never from where a call's buffers lie, so a choice runs alike in every call
 * of its key. */
TdmConvChunks tdm_conv_cudnn_chunks (const TdmConvShape *s, TdmConvDirection dir,
                                     gboolean written, int pad_c);

/* The bytes of the workspace, from its start (aligned to 256 bytes, as the device's
 * allocations are), that a bf16 cuDNN weight gradient of shape s takes in `chunks`
 * whose input the engine writes itself (normalized or converted, not padded) and whose
 * float32 dw is 16-byte aligned: the layout's reservations (dy as bf16, the weights'
 * bf16 room), one chunk's bf16 copy of the input, the plan's result where it is staged
 * (a bf16 one: the weights as bf16; a float32 one is written into dw itself), the
 * float32 weights a later chunk's sum is written or widened into before it is added
 * (chunks.count > 1), the tail of a large bf16 result widened in place in dw (a whole
 * bf16 result of 8 Mi weights or more), and `workspace` bytes of cuDNN's own (the
 * larger of the chunks' two plans'). */
size_t tdm_conv_cudnn_wgrad_bytes (const TdmConvShape *s, const TdmConvChunks *chunks,
                                   gboolean float_out, size_t workspace);

G_END_DECLS
