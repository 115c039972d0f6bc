/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-classifier.h — a trained network from a checkpoint, run forward on new images.
 *
 * Loads the network, its parameters, its input shape and its class names from a
 * checkpoint that Tandem saved, builds one replica on the CPU backend (the same
 * forward pass that training and evaluation use) and turns images into class
 * probabilities. Image files are decoded as image folders are (tdm-image.h) to the
 * network's input size and colour. Not a trainer; not thread-safe (one caller at a
 * time per classifier).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "tdm-network.h"

G_BEGIN_DECLS

typedef struct _TdmClassifier TdmClassifier;

TdmClassifier *tdm_classifier_load (const char *checkpoint, GError **error);
/* A network (a built-in name or a spec) with the weights of a safetensors state_dict
 * (PyTorch's names and shapes, e.g. a converted torchvision model), no training: every
 * tensor of the network must be in the file; the head's class count comes from the
 * file. size: the input's side (0: the preset's); channels 0: RGB; normalize as
 * --normalize takes it (NULL: ImageNet's for torchvision's presets, else none).
 * Classes are named by number. */
TdmClassifier *tdm_classifier_load_weights (const char *network, const char *path, int size,
                                            int channels, const char *normalize,
                                            GError **error);
void tdm_classifier_free (TdmClassifier *classifier);

int tdm_classifier_classes (const TdmClassifier *classifier);
/* The class's name from the checkpoint, or its number when the checkpoint has none. */
const char *tdm_classifier_class_name (const TdmClassifier *classifier, int k);
/* The input: size × size × channels (an image folder's samples are square). */
void tdm_classifier_input (const TdmClassifier *classifier, int *height, int *width,
                           int *channels);

/* probs[classes]: softmax of the network's outputs for one sample of the input
 * shape (HWC bytes, as datasets hold them). */
gboolean tdm_classifier_run (TdmClassifier *classifier, const uint8_t *sample, float *probs,
                             GError **error);
/* The network's outputs (classes logits) of the last tdm_classifier_run(). */
const float *tdm_classifier_logits (const TdmClassifier *classifier);
/* The same for an image file; errors name the file. */
gboolean tdm_classifier_run_file (TdmClassifier *classifier, const char *path, float *probs,
                                  GError **error);

/* The per-channel (x − mean) / std applied to inputs already scaled to [0, 1], from
 * the checkpoint's "normalize" metadata (net->in_c values each, owned by the
 * classifier); FALSE with both NULL when inputs are not normalized. */
gboolean tdm_classifier_normalization (const TdmClassifier *classifier, const float **mean,
                                       const float **std);
/* The network, and a copy of its parameters and BN running statistics into
 * params[net->parameter_count] and state[net->state_count] (the engine's layouts):
 * what an export writes (tdm-onnx-export.h). */
const TdmNetwork *tdm_classifier_network (const TdmClassifier *classifier);
void tdm_classifier_read_parameters (TdmClassifier *classifier, float *params, float *state);

/* The indices of the `top` largest of probs[classes], largest first. */
void tdm_classifier_rank (const float *probs, int classes, int top, int *order);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmClassifier, tdm_classifier_free)

G_END_DECLS
