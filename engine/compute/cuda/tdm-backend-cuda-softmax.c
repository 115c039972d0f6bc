/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-softmax.c — the CUDA backend's softmax cross-entropy with its
 * gradient, one launch of kernels/softmax.cu; the front door checked the shape.
 */
#include "tdm-backend-cuda-private.h"

void
tdm_cuda_softmax_xent(TdmBackend *b, const float *logits, const int32_t *labels, int rows,
                      int classes, float smoothing, float grad_scale, float *dlogits,
                      TdmMetrics *metrics)
{
  if (!tdm_cuda_begin(b))
    return;
  /* Labels live on the device and are not checked here: one out of range gives a NaN
   * loss, which the trainer reports as divergence. */
  TDM_CUDA_OK(b, tdm_k_softmax_xent(logits, labels, rows, classes, smoothing, grad_scale,
                                    dlogits, &metrics->loss_sum, CUDA_B(b)->stream));
}
