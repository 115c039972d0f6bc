/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-compare.c — the CUDA backend's comparison of two tensors (the compare
 * family, tdm-backend.h's deviation; kernels/compare.cu).
 */
#include "tdm-backend-cuda-private.h"

G_STATIC_ASSERT(TDM_DEVIATION_WORK_DOUBLES == TDM_K_DEVIATION_WORK_DOUBLES);

void
tdm_cuda_deviation(TdmBackend *b, double *work, const void *x, const void *ref, TdmDtype type,
                   size_t n)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_deviation(work, x, ref, type == TDM_DTYPE_BF16, n,
                                   tdm_backend_cuda_stream(b)));
}
