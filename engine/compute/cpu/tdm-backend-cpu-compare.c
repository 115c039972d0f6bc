/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-compare.c — the CPU backend's comparison of two tensors (the compare
 * family, tdm-backend.h's deviation): the sums of squares of their differences and of
 * the reference, in double, in index order. kernels/compare.cu sums the same terms in
 * its own fixed order.
 */
#include "tdm-backend-cpu-private.h"
#include "tdm-bf16.h"

static inline double
value_of(const void *p, TdmDtype type, size_t i)
{
  return type == TDM_DTYPE_BF16 ? (double)tdm_bf16_value(((const uint16_t *)p)[i])
                                : (double)((const float *)p)[i];
}

void
tdm_cpu_deviation(TdmBackend *b, double *work, const void *x, const void *ref, TdmDtype type,
                  size_t n)
{
  (void)b;
  double d2 = 0.0, r2 = 0.0;
  for (size_t i = 0; i < n; i++) {
    double r = value_of(ref, type, i);
    double d = value_of(x, type, i) - r;
    d2 += d * d;
    r2 += r * r;
  }
  work[0] = d2;
  work[1] = r2;
}
