/* SPDX-License-Identifier: GPL-3.0-or-later */
/* softmax.cu — softmax cross-entropy, forward and backward fused in one kernel.
 *
 * One warp per row: the row's maximum and arg-max, the sum of exponentials, the
 * loss against the label-smoothed target q = (1 − ε)·onehot + ε/K,
 * log Σ exp(l − max) − (1 − ε)(l[label] − max) − ε/K · Σ (l − max), and, when asked,
 * the gradient (softmax − q) · grad_scale (ε = 0: the plain loss). Each block adds its rows' loss and correct count
 * into the device metrics with one double atomic per block. Not a general softmax:
 * nothing but training's loss lives here.
 */
#include "tdm-kernels.h"
#include "common.cuh"

#include <math.h>

#define TDM_SM_WARPS 8

__global__ void
softmax_xent_kernel(const float *logits, const int32_t *labels, int rows, int classes,
                    float smoothing, float grad_scale, float *dlogits, double *metrics)
{
  __shared__ double block_loss[TDM_SM_WARPS];
  __shared__ double block_correct[TDM_SM_WARPS];
  int lane = threadIdx.x & 31;
  int warp = threadIdx.x >> 5;
  int row = blockIdx.x * TDM_SM_WARPS + warp;
  double loss = 0.0, correct = 0.0;

  if (row < rows) {
    const float *l = logits + (size_t)row * classes;
    /* Arg-max with the first index winning ties, like a forward scan; −1 marks a
     * lane that has seen no element yet (classes < 32). */
    float best = -INFINITY;
    int best_at = -1;
    for (int j = lane; j < classes; j += 32) {
      float v = l[j];
      if (best_at < 0 || v > best) {
        best = v;
        best_at = j;
      }
    }
    for (int off = 16; off > 0; off /= 2) {
      float ov = __shfl_xor_sync(0xffffffffu, best, off);
      int oat = __shfl_xor_sync(0xffffffffu, best_at, off);
      if (oat >= 0 && (best_at < 0 || ov > best || (ov == best && oat < best_at))) {
        best = ov;
        best_at = oat;
      }
    }
    float sum = 0.0f;
    double all = 0.0;
    for (int j = lane; j < classes; j += 32) {
      sum += expf(l[j] - best);
      all += (double)l[j] - best;
    }
    for (int off = 16; off > 0; off /= 2) {
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
      all += __shfl_xor_sync(0xffffffffu, all, off);
    }

    int label = labels[row];
    bool label_ok = label >= 0 && label < classes;
    if (lane == 0) {
      /* A label out of range cannot have a loss: NaN, so that the trainer stops. */
      double shifted = label_ok ? (double)l[label] - best : 0.0;
      if (smoothing != 0.0f)
        shifted = (1.0 - smoothing) * shifted + smoothing * all / classes;
      loss = label_ok ? (double)logf(sum) - shifted : (double)NAN;
      correct = label_ok && best_at == label ? 1.0 : 0.0;
    }
    if (dlogits != NULL) {
      /* The CPU reference's order of operations, so both round alike. */
      float factor = grad_scale / sum;
      float spread = grad_scale * smoothing / classes;
      float hit = grad_scale * (1.0f - smoothing);
      float *d = dlogits + (size_t)row * classes;
      for (int j = lane; j < classes; j += 32) {
        float p = expf(l[j] - best) * factor - spread;
        d[j] = j == label ? p - hit : p;
      }
    }
  }
  if (lane == 0) {
    block_loss[warp] = loss;
    block_correct[warp] = correct;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double bl = 0.0, bc = 0.0;
    for (int k = 0; k < TDM_SM_WARPS; k++) {
      bl += block_loss[k];
      bc += block_correct[k];
    }
    atomicAdd(&metrics[0], bl);
    atomicAdd(&metrics[1], bc);
  }
}

extern "C" cudaError_t
tdm_k_softmax_xent(const float *logits, const int32_t *labels, int rows, int classes,
                   float smoothing, float grad_scale, float *dlogits, double *metrics,
                   cudaStream_t stream)
{
  if (rows <= 0 || classes <= 0)
    return cudaSuccess;
  unsigned blocks = (unsigned)((rows + TDM_SM_WARPS - 1) / TDM_SM_WARPS);
  softmax_xent_kernel<<<blocks, TDM_SM_WARPS * 32, 0, stream>>>(
      logits, labels, rows, classes, smoothing, grad_scale, dlogits, metrics);
  return tdm_k_launched();
}
