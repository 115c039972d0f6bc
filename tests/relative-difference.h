/* SPDX-License-Identifier: GPL-3.0-or-later */
/* relative-difference.h — how far a vector of floats is from a reference: the L2 norm
 * of the difference over the reference's, in double. The tests that compare one
 * training path's weights with another's (precisions, workers, devices) bound it.
 * Header-only, so every test program can share it. */
#pragma once

#include <math.h>
#include <stddef.h>

static inline double
relative_difference(const float *a, const float *b, size_t n)
{
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; i++) {
    diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    norm += (double)b[i] * b[i];
  }
  return sqrt(diff / norm);
}
