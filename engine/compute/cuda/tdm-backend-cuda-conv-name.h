/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-name.h — the names of the convolution engine's candidates, as the
 * log, --json's report and the disk cache show them (tdm-backend-cuda-conv-engine.h lists
 * the kinds): "im2col", "own:dgrad", "own:fwd", "own:wgrad", or a cuDNN plan's
 *   cudnn:e<engine>:r<rank>:<f|h>[:c8][:n<samples>]
 * its engine's global index, its rank in the heuristics' list, its output type (float32 or
 * bf16), the input's channels padded to 8, and the samples of its largest chunk where the
 * plan runs the batch in chunks (tdm-conv-columns.h's even chunks); or a fused plan's
 *   cudnn-fused:e<engine>:r<rank>:<f|h>
 * (tdm-backend-cuda-conv-fused.h: the bn before the conv applied by cuDNN's graph, on the
 * whole batch, never padded); or a strided input gradient's by phases
 *   cudnn-phases:e<engine>:r<rank>:<f|h>[p]
 * (tdm-backend-cuda-conv-phases.h: one forward plan of that engine a phase, its rank in
 * the most demanding phase's heuristics' list, writing dx in its type; "p": over dy's
 * pre-padded copy, every phase unpadded). One spelling per
 * candidate: a name that does not read back to itself (a sign, a leading zero, a space,
 * anything after) is damaged, and a cache holding one is rebuilt. Knows nothing of
 * CUDA: tested on any machine.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* What a cuDNN candidate's name says. */
typedef struct {
  gint64 engine;               /* cuDNN's global engine index, ≥ 0 */
  int rank;                    /* its place in the heuristics' list, ≥ 0 */
  char out;                    /* 'f': writes float32; 'h': bf16 */
  gboolean padded;             /* ":c8": the input's channels padded to 8 */
  int chunk;                   /* ":n<chunk>": the largest chunk's samples; 0: whole */
  gboolean fused;              /* "cudnn-fused:": the bn before applied in cuDNN's graph */
  gboolean phases;             /* "cudnn-phases:": a strided input gradient by phases */
  gboolean prepadded;          /* phases' "<f|h>p": over dy's pre-padded copy */
} TdmCudnnName;

/* The name of a cuDNN candidate; free it. */
char *tdm_cudnn_name_format (const TdmCudnnName *n);
/* Reads a cuDNN candidate's name; FALSE (and *n undefined) for any other text, a damaged
 * one included. */
gboolean tdm_cudnn_name_parse (const char *name, TdmCudnnName *n);
/* Whether `name` is a candidate's name of any kind. */
gboolean tdm_conv_candidate_name_valid (const char *name);

G_END_DECLS
