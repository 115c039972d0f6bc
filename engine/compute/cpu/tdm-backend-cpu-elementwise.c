/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-elementwise.c — the CPU backend's operations of one value at a time:
 * bias and ReLU (the loops of tdm-cpu-kernels.c for this CPU), the communicators' add
 * and scale, the rounding to bfloat16 (tdm-bf16.h, the GPU's rule) and back, a
 * residual block's add over bf16 tensors and its ReLU's mask as bits (tdm-relu-bits.h),
 * and inverted dropout on the counter RNG, its mask drawn again in backward and never
 * stored. The front door checked the arguments.
 */
#include "tdm-backend-cpu-private.h"
#include "tdm-bf16.h"
#include "tdm-counter-rng.h"
#include "tdm-relu-bits.h"

void
tdm_cpu_bias_forward(TdmBackend *b, float *y, const float *bias, int outer, int channels,
                     int inner, bool relu)
{
  tdm_cpu_kernels_of(b)->bias_forward(y, bias, outer, channels, inner, relu);
}

void
tdm_cpu_bias_backward(TdmBackend *b, float *dbias, const float *dy, int outer, int channels,
                      int inner)
{
  tdm_cpu_kernels_of(b)->bias_backward(dbias, dy, outer, channels, inner);
}

void
tdm_cpu_relu_forward(TdmBackend *b, float *y, const float *x, size_t n)
{
  tdm_cpu_kernels_of(b)->relu_forward(y, x, n);
}

void
tdm_cpu_relu_backward(TdmBackend *b, float *dx, const float *dy, const float *y, size_t n)
{
  tdm_cpu_kernels_of(b)->relu_backward(dx, dy, y, n);
}

void
tdm_cpu_add(TdmBackend *b, float *y, const float *x, size_t n)
{
  tdm_cpu_kernels_of(b)->add(y, x, n);
}

void
tdm_cpu_scale(TdmBackend *b, float *y, float alpha, size_t n)
{
  tdm_cpu_kernels_of(b)->scale(y, alpha, n);
}

static void
dropout_apply(float *y, const float *x, const int32_t *indices, int n,
              int per_sample, float p, uint64_t key, uint32_t epoch)
{
  const float keep_scale = 1.0f / (1.0f - p);
  for (int i = 0; i < n; i++) {
    const uint32_t s = (uint32_t)indices[i];
    const float *xi = x + (size_t)i * per_sample;
    float *yi = y + (size_t)i * per_sample;
    for (int e = 0; e < per_sample; e++)
      yi[e] = tdm_crng_uniform(key, epoch, s, (uint32_t)e) >= p ? xi[e] * keep_scale : 0.0f;
  }
}

void
tdm_cpu_dropout_forward(TdmBackend *b, float *y, const float *x, const int32_t *indices, int n,
                        int per_sample, float p, uint64_t key, uint32_t epoch)
{
  dropout_apply(y, x, indices, n, per_sample, p, key, epoch);
}

void
tdm_cpu_dropout_backward(TdmBackend *b, float *dx, const float *dy, const int32_t *indices,
                         int n, int per_sample, float p, uint64_t key, uint32_t epoch)
{
  dropout_apply(dx, dy, indices, n, per_sample, p, key, epoch);
}

void
tdm_cpu_to_bf16(TdmBackend *b, uint16_t *out, const float *in, size_t n)
{
  uint16_t *restrict o = out;
  const float *restrict v = in;
  for (size_t i = 0; i < n; i++)
    o[i] = tdm_bf16_round(v[i]);
}

void
tdm_cpu_from_bf16(TdmBackend *b, float *out, const uint16_t *in, size_t n)
{
  float *restrict o = out;
  const uint16_t *restrict h = in;
  for (size_t i = 0; i < n; i++)
    o[i] = tdm_bf16_value(h[i]);
}

/* The gradient, float32 or bf16, each value read widened and written rounded, kept
 * where the mask's bit is set; dx may be dy where the types agree (each value is read
 * before it is written). */
void
tdm_cpu_relu_backward_bf16(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                           TdmDtype dy_type, const uint32_t *mask, size_t n)
{
  const float *dyf = dy_type == TDM_DTYPE_F32 ? dy : NULL;
  const uint16_t *dyh = dy_type == TDM_DTYPE_BF16 ? dy : NULL;
  float *dxf = dx_type == TDM_DTYPE_F32 ? dx : NULL;
  uint16_t *dxh = dx_type == TDM_DTYPE_BF16 ? dx : NULL;
  for (size_t i = 0; i < n; i++) {
    const float d = dyf != NULL ? dyf[i] : tdm_bf16_value(dyh[i]);
    const float v = tdm_relu_bit_at(mask, i) ? d : 0.0f;
    if (dxf != NULL)
      dxf[i] = v;
    else
      dxh[i] = tdm_bf16_round(v);
  }
}

/* One value of a tensor of either type, read as float32 (a bf16 one widened). */
static inline float
value_of(const float *f, const uint16_t *h, size_t i)
{
  return f != NULL ? f[i] : tdm_bf16_value(h[i]);
}

/* y = a + x where a 1×1 convolution of this stride reads the pixel (x compact), a + 0
 * elsewhere: the float32 sum that col2im's zeros then add would give, a float32 or
 * bf16 (widened), rounded once into bf16 y, or stored into float32 y (y may be a where
 * their types agree: each element is read before it is written). */
void
tdm_cpu_add_strided_bf16(TdmBackend *b, void *y, TdmDtype y_type, const void *a,
                         TdmDtype a_type, const float *x, int n, int h, int w, int c,
                         int stride)
{
  float *yf = y_type == TDM_DTYPE_F32 ? y : NULL;
  uint16_t *yh = y_type == TDM_DTYPE_BF16 ? y : NULL;
  const float *af = a_type == TDM_DTYPE_F32 ? a : NULL;
  const uint16_t *ah = a_type == TDM_DTYPE_BF16 ? a : NULL;
  const size_t rows = (size_t)n * h * w;
  for (size_t row = 0; row < rows; row++) {
    const float *xs = tdm_cpu_strided_row(x, row, h, w, c, stride);
    for (size_t e = row * c; e < (row + 1) * c; e++) {
      const float v = value_of(af, ah, e) + (xs != NULL ? xs[e - row * c] : 0.0f);
      if (yf != NULL)
        yf[e] = v;
      else
        yh[e] = tdm_bf16_round(v);
    }
  }
}

/* add_out's sum and ReLU (relu_forward's: NaN passes), then rounded; the mask read back
 * from y (the reference's plain way: the kernel writes it as it stores y). */
void
tdm_cpu_add_out_bf16(TdmBackend *b, uint16_t *y, const float *a, const void *x, TdmDtype x_type,
                     size_t n, bool relu, uint32_t *bits)
{
  const float *xf = x_type == TDM_DTYPE_F32 ? x : NULL;
  const uint16_t *xh = x_type == TDM_DTYPE_BF16 ? x : NULL;
  for (size_t i = 0; i < n; i++) {
    const float v = a[i] + (xf != NULL ? xf[i] : tdm_bf16_value(xh[i]));
    y[i] = tdm_bf16_round(relu && v < 0.0f ? 0.0f : v);
  }
  if (bits != NULL)
    tdm_relu_bits_of(bits, y, n);
}

/* A block's start in backward: the two shares summed in float32, rounded once, and the
 * ReLU of the layer before applied as relu_backward_bf16 applies it (the rounded 0 where
 * its mask's bit is clear); no ReLU where mask is NULL. dx may be a or x where that one
 * is bf16: each element is read before it is written. */
void
tdm_cpu_add_relu_backward_bf16(TdmBackend *b, uint16_t *dx, const void *a, TdmDtype a_type,
                               const void *x, TdmDtype x_type, const uint32_t *mask, size_t n)
{
  const float *af = a_type == TDM_DTYPE_F32 ? a : NULL;
  const uint16_t *ah = a_type == TDM_DTYPE_BF16 ? a : NULL;
  const float *xf = x_type == TDM_DTYPE_F32 ? x : NULL;
  const uint16_t *xh = x_type == TDM_DTYPE_BF16 ? x : NULL;
  for (size_t i = 0; i < n; i++) {
    const float v = value_of(af, ah, i) + value_of(xf, xh, i);
    dx[i] = tdm_bf16_round(mask == NULL || tdm_relu_bit_at(mask, i) ? v : 0.0f);
  }
}
