/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-softmax.c — the CPU backend's softmax cross-entropy with label
 * smoothing, its gradient and the metrics' sums. The front door checked the shape;
 * the labels, in host memory, are checked here.
 */
#include "tdm-backend-cpu-private.h"
#include <math.h>

void
tdm_cpu_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
                     int classes, float smoothing, float grad_scale, float *dlogits,
                     TdmMetrics *metrics)
{
  for (int r = 0; r < rows; r++)
    CPU_REQUIRE(b, labels[r] >= 0 && labels[r] < classes,
                "softmax_xent: label %d of row %d is not a class in [0, %d)", labels[r],
                r, classes);

  double loss_sum = 0.0;
  double correct = 0.0;
  for (int r = 0; r < rows; r++) {
    const float *restrict z = logits + (size_t)r * classes;
    const int label = labels[r];

    float top = z[0];
    int best = 0;
    for (int j = 1; j < classes; j++)
      if (z[j] > top) {
        top = z[j];
        best = j;
      }

    /* Shifting by the row maximum keeps every exponent <= 0: no overflow. */
    float sum = 0.0f;
    if (dlogits != NULL) {
      float *restrict d = dlogits + (size_t)r * classes;
      for (int j = 0; j < classes; j++) {
        d[j] = expf(z[j] - top);
        sum += d[j];
      }
      const float factor = grad_scale / sum;
      /* softmax − q, q = (1 − ε)·onehot + ε/K. */
      const float spread = grad_scale * smoothing / classes;
      for (int j = 0; j < classes; j++)
        d[j] = d[j] * factor - spread;
      d[label] -= grad_scale * (1.0f - smoothing);
    } else {
      for (int j = 0; j < classes; j++)
        sum += expf(z[j] - top);
    }

    /* −Σ q·log p = log Σe − (1 − ε)(z_label − top) − ε/K · Σ (z_j − top). */
    double shifted = (double)z[label] - top;
    if (smoothing != 0.0f) {
      double all = 0.0;
      for (int j = 0; j < classes; j++)
        all += (double)z[j] - top;
      shifted = (1.0 - smoothing) * shifted + smoothing * all / classes;
    }
    loss_sum += (double)logf(sum) - shifted;
    correct += best == label;
  }
  metrics->loss_sum += loss_sum;
  metrics->correct += correct;
}
