/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-optimizer.c — the CPU backend's optimizers over the flat parameter
 * buffer: Chainer's SGD, MomentumSGD and Adam (spelled out in SSE and AVX, the same
 * bits on every CPU), PyTorch's SGD with a weight-decay mask, and the masked decay the
 * others use. Where `rates` is given, lr (lr_t) and momentum (beta1) come from it.
 */
#include "tdm-backend-cpu-private.h"
#include <math.h>

void
tdm_cpu_sgd_update(TdmBackend *b, float *p, const float *g, size_t n, float lr,
                   float weight_decay, const float *rates)
{
  if (rates != NULL)
    lr = rates[0];
  float *restrict pp = p;
  const float *restrict gg = g;
  for (size_t i = 0; i < n; i++)
    pp[i] -= lr * (gg[i] + weight_decay * pp[i]);
}

void
tdm_cpu_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity, size_t n,
                        float lr, float momentum, float weight_decay, const float *rates)
{
  if (rates != NULL) {
    lr = rates[0];
    momentum = rates[1];
  }
  float *restrict pp = p;
  float *restrict vv = velocity;
  const float *restrict gg = g;
  for (size_t i = 0; i < n; i++) {
    const float v = momentum * vv[i] - lr * (gg[i] + weight_decay * pp[i]);
    vv[i] = v;
    pp[i] += v;
  }
}

void
tdm_cpu_sgd_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity,
                            const uint8_t *decay_mask, size_t n, float lr, float momentum,
                            float weight_decay, bool nesterov, const float *rates)
{
  if (rates != NULL) {
    lr = rates[0];
    momentum = rates[1];
  }
  float *restrict pp = p;
  float *restrict vv = velocity;
  const float *restrict gg = g;
  for (size_t i = 0; i < n; i++) {
    const float wd = decay_mask == NULL || decay_mask[i] ? weight_decay : 0.0f;
    const float d = gg[i] + wd * pp[i];
    const float v = momentum * vv[i] + d;
    vv[i] = v;
    pp[i] -= lr * (nesterov ? d + momentum * v : v);
  }
}

void
tdm_cpu_weight_decay(TdmBackend *b, float *g, const float *p, const uint8_t *decay_mask,
                     size_t n, float weight_decay)
{
  for (size_t i = 0; i < n; i++)
    if (decay_mask == NULL || decay_mask[i])
      g[i] += weight_decay * p[i];
}

/* Adam runs over every parameter each step (1.8M floats for the MLP), so it has to
 * vectorize. GCC will not vectorize sqrtf while -fmath-errno is on (the default), and
 * neither the optimize attribute nor the pragma switches that off, so the x86 paths
 * spell out SSE and AVX. They use separate multiplies and adds, in the order of the
 * scalar loop, and no FMA: every path gives the same bits, so a run resumed on
 * another CPU continues exactly. The scalar loop finishes the tail and serves other
 * architectures. */
typedef struct {
  float lr_t, a1, a2, eps, wd;
} TdmAdamArgs;

static void
adam_scalar(float *restrict p, const float *restrict g, float *restrict m,
            float *restrict v, size_t from, size_t n, const TdmAdamArgs *k)
{
  for (size_t i = from; i < n; i++) {
    const float gi = g[i] + k->wd * p[i];
    const float mi = m[i] + k->a1 * (gi - m[i]);
    const float vi = v[i] + k->a2 * (gi * gi - v[i]);
    m[i] = mi;
    v[i] = vi;
    p[i] -= k->lr_t * mi / (sqrtf(vi) + k->eps);
  }
}

#if TDM_CPU_X86
static size_t
adam_sse(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
         size_t n, const TdmAdamArgs *k)
{
  const __m128 lr_t = _mm_set1_ps(k->lr_t), a1 = _mm_set1_ps(k->a1);
  const __m128 a2 = _mm_set1_ps(k->a2), eps = _mm_set1_ps(k->eps);
  const __m128 wd = _mm_set1_ps(k->wd);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 pi = _mm_loadu_ps(p + i), mo = _mm_loadu_ps(m + i);
    const __m128 vo = _mm_loadu_ps(v + i);
    const __m128 gi = _mm_add_ps(_mm_loadu_ps(g + i), _mm_mul_ps(wd, pi));
    const __m128 mi = _mm_add_ps(mo, _mm_mul_ps(a1, _mm_sub_ps(gi, mo)));
    const __m128 vi = _mm_add_ps(vo, _mm_mul_ps(a2, _mm_sub_ps(_mm_mul_ps(gi, gi), vo)));
    const __m128 step = _mm_div_ps(_mm_mul_ps(lr_t, mi), _mm_add_ps(_mm_sqrt_ps(vi), eps));
    _mm_storeu_ps(m + i, mi);
    _mm_storeu_ps(v + i, vi);
    _mm_storeu_ps(p + i, _mm_sub_ps(pi, step));
  }
  return i;
}

__attribute__((target("avx"))) static size_t
adam_avx(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
         size_t n, const TdmAdamArgs *k)
{
  const __m256 lr_t = _mm256_set1_ps(k->lr_t), a1 = _mm256_set1_ps(k->a1);
  const __m256 a2 = _mm256_set1_ps(k->a2), eps = _mm256_set1_ps(k->eps);
  const __m256 wd = _mm256_set1_ps(k->wd);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 pi = _mm256_loadu_ps(p + i), mo = _mm256_loadu_ps(m + i);
    const __m256 vo = _mm256_loadu_ps(v + i);
    const __m256 gi = _mm256_add_ps(_mm256_loadu_ps(g + i), _mm256_mul_ps(wd, pi));
    const __m256 mi = _mm256_add_ps(mo, _mm256_mul_ps(a1, _mm256_sub_ps(gi, mo)));
    const __m256 vi =
      _mm256_add_ps(vo, _mm256_mul_ps(a2, _mm256_sub_ps(_mm256_mul_ps(gi, gi), vo)));
    const __m256 step =
      _mm256_div_ps(_mm256_mul_ps(lr_t, mi), _mm256_add_ps(_mm256_sqrt_ps(vi), eps));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, step));
  }
  return i;
}

#endif

void
tdm_cpu_adam_update(TdmBackend *b, float *p, const float *g, float *m, float *v, size_t n,
                    float lr_t, float beta1, float beta2, float eps, float weight_decay,
                    const float *rates)
{
  if (rates != NULL) {
    lr_t = rates[0];
    beta1 = rates[1];
  }
  const TdmAdamArgs k = {
    .lr_t = lr_t, .a1 = 1.0f - beta1, .a2 = 1.0f - beta2, .eps = eps, .wd = weight_decay,
  };
  size_t done = 0;
#if TDM_CPU_X86
  if (((TdmBackendCpu *)b)->have_avx)
    done = adam_avx(p, g, m, v, n, &k);
  else
    done = adam_sse(p, g, m, v, n, &k);
#endif
  adam_scalar(p, g, m, v, done, n, &k);
}

/* Gradient clipping */

void
tdm_cpu_clip_norm(TdmBackend *b, float *x, size_t n, float max_norm, double *work)
{
  (void)b;
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += (double)x[i] * x[i];
  double norm = sqrt(sum);
  work[0] = norm;
  if (max_norm > 0 && norm > max_norm) {
    float factor = (float)(max_norm / (norm + 1e-6));
    for (size_t i = 0; i < n; i++)
      x[i] *= factor;
  }
}
