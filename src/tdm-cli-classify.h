/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-classify.h — tandem-train --classify: images through a saved network.
 *
 * Prints the top classes of each image with their probabilities (or one JSON line per
 * image), going through the engine's classifier (tdm-classifier.h). Not the option
 * parsing (tdm-cli-options.c).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* `images`: files, and folders whose every PNG and JPEG (recursively) is classified.
 * A result whose image was not of the network's input size and colour says how it was
 * adapted (cropped, scaled, made grey), and one warning on stderr tells when an input
 * is far from the training samples. Returns the exit status: 0, or 2 when the
 * checkpoint or any image could not be used (each has its message on stderr; the
 * others are still classified). */
int tdm_cli_classify (const char *checkpoint, const char *const *images, int top,
                      gboolean json);

/* The same with a network (a built-in name or a spec) and a safetensors state_dict
 * of its weights (tdm_classifier_load_weights()): no training. channels 0: RGB. */
int tdm_cli_classify_weights (const char *network, const char *weights, int size,
                              int channels, const char *normalize,
                              const char *const *images, int top, gboolean json);

G_END_DECLS
