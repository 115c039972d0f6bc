/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-chunks.c — the convolution engine's cuDNN calls in chunks of
 * samples and a bf16 weight gradient's need (tdm-backend-cuda-conv-chunks.h). The layout
 * mirrored here is tdm-backend-cuda-conv-candidates.c's (tdm_conv_layout(), take(),
 * run_cudnn(), route_of()). Compiled without CUDA too. */
#include "tdm-backend-cuda-conv-chunks.h"

/* What the engine's take() aligns each piece of scratch to. */
#define ENGINE_ALIGN 256
/* candidates.c's IN_PLACE_TAIL: the bf16 values widen_in_place() stages at its end; a
 * result of at least four times as many is widened in place. */
#define IN_PLACE_TAIL ((size_t)1 << 21)

static size_t
up(size_t v, size_t to)
{
  return (v + to - 1) / to * to;
}

TdmConvChunks
tdm_conv_cudnn_chunks(const TdmConvShape *s, TdmConvDirection dir, gboolean written, int pad_c)
{
  size_t dy_sample = (size_t)tdm_conv_out_h(s) * tdm_conv_out_w(s) * s->out_c;
  gboolean chunked = written && (dir == TDM_CONV_FORWARD ||
                                 (dir == TDM_CONV_WGRAD && dy_sample % 8 == 0));
  if (!chunked)
    return tdm_conv_even_chunks(s->n, 0, 0);
  size_t sample = (size_t)s->h * s->w * (pad_c > 0 ? pad_c : s->c) * sizeof(uint16_t);
  /* Only a bf16 run writes a bf16 copy of the input: its chunks are that run's. */
  return tdm_conv_even_chunks(s->n, sample, tdm_conv_chunk_bytes(TDM_PRECISION_BF16));
}

/* Scratch taken as take() takes it: each piece from the next aligned byte. */
static size_t
taken(size_t at, size_t bytes)
{
  return bytes > 0 ? up(at, ENGINE_ALIGN) + bytes : at;
}

size_t
tdm_conv_cudnn_wgrad_bytes(const TdmConvShape *s, const TdmConvChunks *chunks,
                           gboolean float_out, size_t workspace)
{
  size_t rows = (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s);
  size_t weights = (size_t)s->out_c * s->kernel * s->kernel * s->c;
  /* The reservations: dy as bf16, then (16-byte aligned) the weights' bf16 room. */
  size_t at = up(up(rows * s->out_c * sizeof(uint16_t), 16) + weights * sizeof(uint16_t),
                 ENGINE_ALIGN);
  at = taken(at, (size_t)chunks->size * s->h * s->w * s->c * sizeof(uint16_t));
  gboolean summed = chunks->count > 1;
  /* A float32 result goes into the aligned dw directly; a bf16 one whole is widened in
   * place when large, else staged; in chunks, each chunk's is staged. */
  gboolean in_place = !float_out && !summed && weights % 8 == 0 &&
                      weights >= 4 * IN_PLACE_TAIL;
  if (!float_out && !in_place)
    at = taken(at, weights * sizeof(uint16_t));
  if (summed)
    at = taken(at, weights * sizeof(float));
  if (in_place)
    at = taken(at, IN_PLACE_TAIL * sizeof(uint16_t));
  return taken(at, workspace);
}
