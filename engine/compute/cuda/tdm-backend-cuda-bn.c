/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-bn.c — the CUDA backend's batch normalization (kernels/bn-*.cu): the
 * statistics into slots and their merge, the forward in training and evaluation, the
 * backward's sums and input gradient (also as the bf16 operand of the conv before it).
 * Each enqueues on the backend's stream; the front door checked the shapes, and the
 * sums' scratch is checked here. The semantics are those of tdm-backend.h and the CPU
 * backend's (tdm-backend-cpu-bn.c).
 */
#include "tdm-backend-cuda-private.h"

#define STREAM(b) tdm_backend_cuda_stream(b)
/* The elementwise passes' direction (tdm-kernels.h): each follows a pass over the same
 * tensor, the moments or the backward sums. */
#define DESCENDING(b) (CUDA_B(b)->descending)

/* The backend's scratch for the per-channel sums: the partials (two doubles a channel,
 * count in all) and the arrival counters beside them. */
typedef struct {
  double *partials;
  size_t count;
  unsigned *counters;
  size_t counter_count;
} SumScratch;

/* Begins a sums operation op on the backend's stream and takes its scratch: FALSE (the
 * backend failed, or failing now when channels are more than the scratch holds) when
 * nothing is to be enqueued. */
static gboolean
sums_begin(TdmBackend *b, const char *op, int channels, SumScratch *s)
{
  if (!tdm_cuda_begin(b))
    return FALSE;
  s->partials = tdm_backend_cuda_sum_scratch(b, &s->count);
  if (G_UNLIKELY(2 * (size_t)channels > s->count)) {
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, "%s: %d channels, at most %zu", op, channels,
                     s->count / 2);
    return FALSE;
  }
  s->counters = tdm_backend_cuda_sum_counters(b, &s->counter_count);
  return TRUE;
}

void
tdm_cuda_bn_moments(TdmBackend *b, float *slots, const void *x, TdmDtype x_type, int rows,
                    int channels, int slot, int slot_count)
{
  SumScratch t;
  if (!sums_begin(b, "bn_moments", channels, &t))
    return;
  TDM_CUDA_OK(b, tdm_k_bn_moments(slots, x, x_type == TDM_DTYPE_BF16, rows, channels, slot,
                                  slot_count, t.partials, t.count, t.counters, t.counter_count,
                                  STREAM(b)));
}

void
tdm_cuda_bn_stats(TdmBackend *b, float *saved, const float *slots, int slot_count, int channels,
                  float eps, float momentum, float *running_mean, float *running_var)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_bn_stats(saved, slots, slot_count, channels, eps, momentum,
                                running_mean, running_var, STREAM(b)));
}

void
tdm_cuda_bn_moments_stats(TdmBackend *b, float *saved, float *slots, const void *x,
                          TdmDtype x_type, int rows, int channels, float eps, float momentum,
                          float *running_mean, float *running_var)
{
  SumScratch t;
  if (!sums_begin(b, "bn_moments_stats", channels, &t))
    return;
  TDM_CUDA_OK(b, tdm_k_bn_moments_stats(saved, slots, x, x_type == TDM_DTYPE_BF16, rows,
                                        channels, eps, momentum, running_mean, running_var,
                                        t.partials, t.count, t.counters, t.counter_count,
                                        STREAM(b)));
}

void
tdm_cuda_bn_forward(TdmBackend *b, float *y, const void *x, TdmDtype x_type, const float *mean,
                    const float *invstd, const float *gamma, const float *beta, int rows,
                    int channels, bool relu)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_bn_forward(y, x, x_type == TDM_DTYPE_BF16, mean, invstd, gamma, beta,
                                    rows, channels, relu, DESCENDING(b), STREAM(b)));
}

void
tdm_cuda_bn_forward_add(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                        const float *mean, const float *invstd, const float *gamma,
                        const float *beta, const float *a, int rows, int channels, bool relu)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b,
                tdm_k_bn_forward_add(y, x, x_type == TDM_DTYPE_BF16, mean, invstd, gamma, beta,
                                     a, rows, channels, relu, DESCENDING(b), STREAM(b)));
}

void
tdm_cuda_bn_forward_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                         const float *mean, const float *invstd, const float *gamma,
                         const float *beta, const void *a, TdmDtype a_type, int rows,
                         int channels, bool relu, uint32_t *bits)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_bn_forward_bf16(y, x, x_type == TDM_DTYPE_BF16, mean, invstd, gamma,
                                         beta, a, a_type == TDM_DTYPE_BF16, rows, channels,
                                         relu, bits, DESCENDING(b), STREAM(b)));
}

void
tdm_cuda_bn_forward_eval(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                         const float *running_mean, const float *running_var,
                         const float *gamma, const float *beta, float eps, int rows,
                         int channels, bool relu)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_bn_forward_eval(y, x, x_type == TDM_DTYPE_BF16, running_mean,
                                         running_var, gamma, beta, eps, rows, channels, relu,
                                         DESCENDING(b), STREAM(b)));
}

void
tdm_cuda_bn_relu_add_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                          const float *mean, const float *invstd, const float *gamma,
                          const float *beta, const void *a, TdmDtype a_type, int rows,
                          int channels)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_bn_relu_add_bf16(y, x, x_type == TDM_DTYPE_BF16, mean, invstd, gamma,
                                          beta, a, a_type == TDM_DTYPE_BF16, rows, channels,
                                          DESCENDING(b), STREAM(b)));
}

void
tdm_cuda_bn_forward_eval_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                              const float *running_mean, const float *running_var,
                              const float *gamma, const float *beta, float eps, int rows,
                              int channels, bool relu)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_bn_forward_eval_bf16(y, x, x_type == TDM_DTYPE_BF16, running_mean,
                                              running_var, gamma, beta, eps, rows, channels,
                                              relu, DESCENDING(b), STREAM(b)));
}

void
tdm_cuda_bn_backward_sums(TdmBackend *b, float *dgamma, float *dbeta, const void *dy,
                          TdmDtype dy_type, const void *x, TdmDtype x_type, const float *mean,
                          const float *invstd, const float *gamma, const float *beta, bool relu,
                          int rows, int channels)
{
  SumScratch t;
  if (!sums_begin(b, "bn_backward_sums", channels, &t))
    return;
  TDM_CUDA_OK(b, tdm_k_bn_backward_sums(dgamma, dbeta, dy, dy_type == TDM_DTYPE_BF16, x,
                                        x_type == TDM_DTYPE_BF16, mean, invstd, gamma, beta,
                                        relu, rows, channels, t.partials, t.count,
                                        t.counters, t.counter_count, STREAM(b)));
}

void
tdm_cuda_add_relu_backward_bn_sums_bf16(TdmBackend *b, uint16_t *dx, const TdmBlockStart *in,
                                        const void *x, TdmDtype x_type, const float *mean,
                                        const float *invstd, const float *gamma,
                                        const float *beta, bool relu, int rows, int channels,
                                        float *dgamma, float *dbeta)
{
  SumScratch t;
  if (!sums_begin(b, "add_relu_backward_bn_sums_bf16", channels, &t))
    return;
  TDM_CUDA_OK(b, tdm_k_add_relu_backward_bn_sums_bf16(
                     dx, in->a, in->a_type == TDM_DTYPE_BF16, in->skip, in->strided, in->h,
                     in->w, in->stride, in->mask, x, x_type == TDM_DTYPE_BF16, mean, invstd,
                     gamma, beta, relu, rows, channels, dgamma, dbeta, t.partials, t.count,
                     t.counters, t.counter_count, STREAM(b)));
}

void
tdm_cuda_bn_backward_dx(TdmBackend *b, float *dx, const void *dy, TdmDtype dy_type,
                        const void *x, TdmDtype x_type, const float *mean, const float *invstd,
                        const float *gamma, const float *beta, bool relu,
                        const float *sum_dgamma, const float *sum_dbeta, float inv_count,
                        int rows, int channels)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_bn_backward_dx(dx, dy, dy_type == TDM_DTYPE_BF16, x,
                                        x_type == TDM_DTYPE_BF16, mean, invstd, gamma, beta,
                                        relu, sum_dgamma, sum_dbeta, inv_count, rows, channels,
                                        DESCENDING(b), STREAM(b)));
}

void
tdm_cuda_bn_backward_dx_bf16(TdmBackend *b, uint16_t *dx, const void *dy, TdmDtype dy_type,
                             const void *x, TdmDtype x_type, const float *mean,
                             const float *invstd, const float *gamma, const float *beta,
                             bool relu, const float *sum_dgamma, const float *sum_dbeta,
                             float inv_count, int rows, int channels)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_bn_backward_dx_bf16(dx, dy, dy_type == TDM_DTYPE_BF16, x,
                                             x_type == TDM_DTYPE_BF16, mean, invstd, gamma,
                                             beta, relu, sum_dgamma, sum_dbeta, inv_count, rows,
                                             channels, DESCENDING(b), STREAM(b)));
}
