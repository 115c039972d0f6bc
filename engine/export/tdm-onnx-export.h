/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-onnx-export.h — a trained network written as an ONNX model (opset 13), for
 * inference in an ONNX runtime such as onnxruntime.
 *
 * The model is the network in evaluation mode: BN with its running statistics,
 * dropout left out, no test-time flips or shifts. It takes what PyTorch users feed a
 * torchvision model, float32 images in NCHW layout ([batch, channels, height,
 * width]) with values in [0, 1] (each 8-bit pixel divided by 255, as torchvision's
 * ToTensor makes them; grey or R, G, B in that order), and gives the logits
 * [batch, classes] (no softmax). Whatever per-channel normalization the run applies
 * after that scaling is part of the graph (TdmOnnxOptions). Tandem computes in NHWC;
 * the exporter writes convolutions in ONNX's NCHW and permutes the weights of an fc
 * that reads a convolution's output, so the graph is what nn.Flatten + nn.Linear
 * would be. Initializers carry the checkpoint's (PyTorch's) names.
 *
 * The file is protobuf, written with protobuf-c from tdm-onnx.proto; without
 * protobuf-c at build time the functions here fail with a message saying so. Not a
 * reader of ONNX files.
 */
#pragma once

#include <glib.h>

#include "tdm-network.h"

G_BEGIN_DECLS

typedef struct {
  /* Per input channel (net->in_c values each), or NULL: the graph computes
   * (x − mean) / std on its [0, 1] input, as the run's gather did. */
  const float *mean;
  const float *std;
  /* net->classes names, kept in the model's metadata ("class_names", a JSON array),
   * or NULL. */
  const char *const *class_names;
} TdmOnnxOptions;

/* Whether this build can write ONNX files (protobuf-c was found). */
gboolean tdm_onnx_export_available (void);

/* Writes net with params[net->parameter_count] and state[net->state_count] (the
 * engine's layouts) to path, atomically (a temporary beside it, renamed over it).
 * options may be NULL. Errors: TDM_ENGINE_ERROR_EXPORT naming path. */
gboolean tdm_onnx_export (const TdmNetwork *net, const float *params, const float *state,
                          const TdmOnnxOptions *options, const char *path, GError **error);

/* The network saved in a Tandem checkpoint, written to path. A checkpoint that does
 * not load fails as tdm_classifier_load() does (TDM_ENGINE_ERROR_CHECKPOINT and the
 * like); a path that cannot be written, or that is the checkpoint itself, with
 * TDM_ENGINE_ERROR_EXPORT, checked before the checkpoint is read. */
gboolean tdm_onnx_export_checkpoint (const char *checkpoint, const char *path,
                                     GError **error);

/* A network (a built-in name or a spec) with someone's weights, as --classify takes
 * them (tdm_classifier_load_weights(): a .pth or safetensors state_dict, or
 * "torchvision"), written to path: a torchvision model exported without training. */
gboolean tdm_onnx_export_weights (const char *network, const char *weights, int size,
                                  int channels, const char *normalize, const char *path,
                                  GError **error);

G_END_DECLS
