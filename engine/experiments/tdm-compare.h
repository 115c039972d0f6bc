/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-compare.h — "compare with one device": the run that N devices must equal.
 *
 * Data parallelism here takes the gradient as the mean over the global batch, so N
 * replicas train as one device with the same global batch and seed would. These two
 * helpers let the window (and tests) prove it on a live run: make that one-device
 * configuration, train both, and measure how far their parameters are apart. Not a
 * driver: the caller runs the two trainers.
 */
#pragma once

#include <glib.h>
#include "tdm-config.h"

G_BEGIN_DECLS

/* Makes `config` the N-device run of a comparison: exact mode (tdm-exact.h), so that
 * its parameters and the one-device twin's are bit-identical, not merely close, and
 * `steps` > 0 steps (max_steps). Its one-device twin inherits both. */
void tdm_compare_prepare (TdmConfig *config, long steps);

/* A copy of `config` on its main device alone, with the same global batch, seed,
 * optimizer and schedule; no checkpoint path (the comparison must not overwrite the
 * real run's). `steps` > 0 limits it to that many steps (max_steps). */
TdmConfig *tdm_compare_one_device_config (const TdmConfig *config, long steps);

/* The largest difference between two parameter vectors, relative to the largest
 * magnitude in `reference`: max |a − ref| / max |ref|. Rounding differences of fp32
 * training come out near 1e-7; 0 for identical vectors (and for n = 0). */
double tdm_compare_parameters (const float *a, const float *reference, size_t n);

/* How many of the n values of a and reference differ in any bit. */
size_t tdm_compare_count_differing (const float *a, const float *reference, size_t n);

/* The result for a label: "identical: 0 of 421642 values differ" when every bit
 * agrees, else "37 of 421642 values differ; " and the largest difference
 * (tdm_compare_parameters()) in words: "largest difference 2.1 × 10⁻⁷: the same up
 * to rounding", or more than rounding. */
char *tdm_compare_describe_values (const float *a, const float *reference, size_t n);

G_END_DECLS
