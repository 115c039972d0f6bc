/* SPDX-License-Identifier: GPL-3.0-or-later */
/* optimizer.cu — SGD, MomentumSGD, Chainer's Adam and PyTorch's (Nesterov) SGD with a
 * weight-decay mask, over the whole flat parameter buffer, and the gradient's norm
 * clipped before them; each update one fused pass (weight decay folded into the gradient as it is read,
 * never written back: g is const).
 *
 * Memory-bound: float4 loads and stores when every buffer is 16-byte aligned, which
 * the flat buffers are unless a caller passes an odd slice; then the scalar loop.
 * The formulas match the CPU reference operation by operation. Not the schedule or
 * Adam's bias correction: lr_t comes from the caller, as an argument or, where `rates`
 * is given, from device memory when the kernel runs (rates[0] the rate, rates[1] the
 * momentum or Adam's beta1), so a step captured in a graph takes each launch's values.
 */
#include "tdm-kernels.h"
#include "common.cuh"

#include <math.h>

struct Sgd {
  float lr, wd;
  __device__ void take(const float *rates) { lr = rates[0]; }
  __device__ void operator()(float &p, float g, float &, float &) const
  {
    g += wd * p;
    p -= lr * g;
  }
};

/* Chainer's MomentumSGD: v = momentum · v − lr · g; p += v. */
struct Momentum {
  float lr, momentum, wd;
  __device__ void take(const float *rates)
  {
    lr = rates[0];
    momentum = rates[1];
  }
  __device__ void operator()(float &p, float g, float &v, float &) const
  {
    g += wd * p;
    v = momentum * v - lr * g;
    p += v;
  }
};

/* Chainer's Adam: m += (1 − β1)(g − m); v += (1 − β2)(g² − v);
 * p −= lr_t · m / (√v + eps). */
struct Adam {
  float lr_t, beta1, beta2, eps, wd;
  __device__ void take(const float *rates)
  {
    lr_t = rates[0];
    beta1 = rates[1];
  }
  __device__ void operator()(float &p, float g, float &m, float &v) const
  {
    g += wd * p;
    m += (1.0f - beta1) * (g - m);
    v += (1.0f - beta2) * (g * g - v);
    p -= lr_t * m / (sqrtf(v) + eps);
  }
};

/* s1 and s2 are the optional state buffers (velocity, or m and v); NULL when the
 * optimizer has none, then a dummy stands in. */
template <typename Op>
__global__ void
update_kernel(Op op, const float *rates, float *p, const float *g, float *s1, float *s2,
              size_t n, bool vec)
{
  if (rates != NULL)
    op.take(rates);
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t start = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t done = 0;
  if (vec) {
    size_t n4 = n / 4;
    for (size_t i = start; i < n4; i += stride) {
      float4 vp = ((float4 *)p)[i];
      float4 vg = ((const float4 *)g)[i];
      float4 a = s1 ? ((float4 *)s1)[i] : make_float4(0, 0, 0, 0);
      float4 b = s2 ? ((float4 *)s2)[i] : make_float4(0, 0, 0, 0);
      op(vp.x, vg.x, a.x, b.x);
      op(vp.y, vg.y, a.y, b.y);
      op(vp.z, vg.z, a.z, b.z);
      op(vp.w, vg.w, a.w, b.w);
      ((float4 *)p)[i] = vp;
      if (s1)
        ((float4 *)s1)[i] = a;
      if (s2)
        ((float4 *)s2)[i] = b;
    }
    done = n4 * 4;
  }
  for (size_t i = done + start; i < n; i += stride) {
    float a = s1 ? s1[i] : 0.0f;
    float b = s2 ? s2[i] : 0.0f;
    op(p[i], g[i], a, b);
    if (s1)
      s1[i] = a;
    if (s2)
      s2[i] = b;
  }
}

template <typename Op>
static cudaError_t
launch_update(Op op, const float *rates, float *p, const float *g, float *s1, float *s2,
              size_t n, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  bool vec = tdm_k_aligned16(p) && tdm_k_aligned16(g) && tdm_k_aligned16(s1) &&
             tdm_k_aligned16(s2);
  size_t work = vec ? (n + 3) / 4 : n;
  update_kernel<Op><<<tdm_k_blocks(work, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      op, rates, p, g, s1, s2, n, vec);
  return tdm_k_launched();
}

extern "C" cudaError_t
tdm_k_sgd_update(float *p, const float *g, size_t n, float lr, float weight_decay,
                 const float *rates, cudaStream_t stream)
{
  return launch_update(Sgd{lr, weight_decay}, rates, p, g, NULL, NULL, n, stream);
}

extern "C" cudaError_t
tdm_k_momentum_update(float *p, const float *g, float *velocity, size_t n, float lr,
                      float momentum, float weight_decay, const float *rates,
                      cudaStream_t stream)
{
  return launch_update(Momentum{lr, momentum, weight_decay}, rates, p, g, velocity, NULL, n,
                       stream);
}

extern "C" cudaError_t
tdm_k_adam_update(float *p, const float *g, float *m, float *v, size_t n, float lr_t,
                  float beta1, float beta2, float eps, float weight_decay,
                  const float *rates, cudaStream_t stream)
{
  return launch_update(Adam{lr_t, beta1, beta2, eps, weight_decay}, rates, p, g, m, v, n,
                       stream);
}

/* PyTorch's SGD with momentum (dampening 0), Nesterov when asked, and weight decay
 * only where mask[i] is set (NULL: everywhere): the CPU reference's operations in its
 * order. One element a thread: the mask is a byte a parameter, so the float4 path of
 * update_kernel would need a uchar4 that the mask's slices do not promise. */
__global__ void
sgd_momentum_kernel(float *p, const float *g, float *v, const uint8_t *mask, size_t n,
                    float lr, float momentum, float wd, bool nesterov, const float *rates)
{
  if (rates != NULL) {
    lr = rates[0];
    momentum = rates[1];
  }
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
    float pi = p[i];
    float w = mask == NULL || mask[i] ? wd : 0.0f;
    float d = g[i] + w * pi;
    float vi = momentum * v[i] + d;
    v[i] = vi;
    p[i] = pi - lr * (nesterov ? d + momentum * vi : vi);
  }
}

extern "C" cudaError_t
tdm_k_sgd_momentum_update(float *p, const float *g, float *velocity,
                          const uint8_t *decay_mask, size_t n, float lr, float momentum,
                          float weight_decay, bool nesterov, const float *rates,
                          cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  sgd_momentum_kernel<<<tdm_k_blocks(n, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      p, g, velocity, decay_mask, n, lr, momentum, weight_decay, nesterov, rates);
  return tdm_k_launched();
}

__global__ void
weight_decay_kernel(float *g, const float *p, const uint8_t *mask, size_t n, float wd)
{
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    if (mask == NULL || mask[i])
      g[i] += wd * p[i];
}

extern "C" cudaError_t
tdm_k_weight_decay(float *g, const float *p, const uint8_t *decay_mask, size_t n,
                   float weight_decay, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  weight_decay_kernel<<<tdm_k_blocks(n, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
      g, p, decay_mask, n, weight_decay);
  return tdm_k_launched();
}

/* Gradient clipping: a fixed grid of CLIP_BLOCKS blocks sums the squares (each thread
 * a grid-stride strand in double, then each block a tree), one block sums the blocks'
 * partials, and a last pass scales by what that norm asks: the order of every
 * addition depends on n alone, so a norm has the same bits every time. */
#define CLIP_BLOCKS 1024
#define CLIP_THREADS 256

__global__ void
clip_partial_kernel(const float *x, size_t n, double *partials)
{
  __shared__ double sums[CLIP_THREADS];
  size_t stride = (size_t)CLIP_BLOCKS * CLIP_THREADS;
  double sum = 0;
  for (size_t i = blockIdx.x * (size_t)CLIP_THREADS + threadIdx.x; i < n; i += stride)
    sum += (double)x[i] * x[i];
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = CLIP_THREADS / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half)
      sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partials[blockIdx.x] = sums[0];
}

__global__ void
clip_total_kernel(double *work)
{
  __shared__ double sums[CLIP_BLOCKS];
  sums[threadIdx.x] = work[1 + threadIdx.x];
  __syncthreads();
  for (int half = CLIP_BLOCKS / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half)
      sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    work[0] = sqrt(sums[0]);
}

__global__ void
clip_scale_kernel(float *x, size_t n, float max_norm, const double *work)
{
  double norm = work[0];
  if (!(norm > max_norm))
    return;
  float factor = (float)(max_norm / (norm + 1e-6));
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] *= factor;
}

extern "C" cudaError_t
tdm_k_clip_norm(float *x, size_t n, float max_norm, double *work, cudaStream_t stream)
{
  static_assert(CLIP_BLOCKS + 1 == TDM_K_CLIP_WORK_DOUBLES, "work holds the partials");
  clip_partial_kernel<<<CLIP_BLOCKS, CLIP_THREADS, 0, stream>>>(x, n, work + 1);
  clip_total_kernel<<<1, CLIP_BLOCKS, 0, stream>>>(work);
  if (max_norm > 0 && n > 0)
    clip_scale_kernel<<<tdm_k_blocks(n, TDM_K_THREADS), TDM_K_THREADS, 0, stream>>>(
        x, n, max_norm, work);
  return tdm_k_launched();
}
