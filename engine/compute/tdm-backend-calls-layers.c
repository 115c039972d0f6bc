/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-calls-layers.c — the front door (tdm-backend-calls.c says what one does)
 * of the operations of the layers networks people train: batch normalization (and the
 * stem's conv with its bn in two passes), average, any-window and global pooling,
 * dropout, the optimizers over the flat parameter buffer, and how far one tensor lies
 * from another (the convolution engine's screen). */
#include "tdm-backend-calls.h"

/* Batch normalization */

static gboolean
rows_ok(TdmBackend *b, const char *op, int rows, int channels)
{
  return TDM_ARGS_OK(b, rows >= 0 && channels >= 1, _("%s: bad shape %d×%d"), op, rows,
                     channels);
}

gboolean
tdm_backend_input_ok(TdmBackend *b, const char *op, TdmDtype x_type)
{
  return TDM_ARGS_OK(
      b, x_type == TDM_DTYPE_F32 ||
             (x_type == TDM_DTYPE_BF16 && tdm_backend_kind_has_bn_bf16_input(b->kind)),
      _("%s: an input stored as bfloat16, which this backend does not read"), op);
}

static gboolean
bn_input_ok(TdmBackend *b, const char *op, TdmDtype x_type, int rows, int channels)
{
  return rows_ok(b, op, rows, channels) && tdm_backend_input_ok(b, op, x_type);
}

/* The backward's: x and its output gradient dy each of either type. */
static gboolean
bn_backward_ok(TdmBackend *b, const char *op, TdmDtype dy_type, TdmDtype x_type, int rows,
               int channels)
{
  return bn_input_ok(b, op, x_type, rows, channels) && tdm_backend_input_ok(b, op, dy_type);
}

void
tdm_backend_bn_moments(TdmBackend *b, float *slots, const void *x, TdmDtype x_type, int rows,
                       int channels, int slot, int slot_count)
{
  if (tdm_backend_enter(b) && bn_input_ok(b, "bn_moments", x_type, rows, channels) &&
      TDM_ARGS_OK(b, slot >= 0 && slot < slot_count, _("bn_moments: slot %d of %d"), slot,
                  slot_count))
    b->ops->bn_moments(b, slots, x, x_type, rows, channels, slot, slot_count);
}

void
tdm_backend_bn_stats(TdmBackend *b, float *saved, const float *slots, int slot_count,
                     int channels, float eps, float momentum, float *running_mean,
                     float *running_var)
{
  if (tdm_backend_enter(b) &&
      TDM_ARGS_OK(b, channels >= 1 && slot_count >= 1, _("bn_stats: %d channels in %d slots"),
                  channels, slot_count))
    b->ops->bn_stats(b, saved, slots, slot_count, channels, eps, momentum, running_mean,
                     running_var);
}

void
tdm_backend_bn_moments_stats(TdmBackend *b, float *saved, float *slots, const void *x,
                             TdmDtype x_type, int rows, int channels, float eps, float momentum,
                             float *running_mean, float *running_var)
{
  if (b->ops->bn_moments_stats == NULL) {
    tdm_backend_bn_moments(b, slots, x, x_type, rows, channels, 0, 1);
    tdm_backend_bn_stats(b, saved, slots, 1, channels, eps, momentum, running_mean,
                         running_var);
    return;
  }
  if (tdm_backend_enter(b) && bn_input_ok(b, "bn_moments_stats", x_type, rows, channels))
    b->ops->bn_moments_stats(b, saved, slots, x, x_type, rows, channels, eps, momentum,
                             running_mean, running_var);
}

void
tdm_backend_bn_forward(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                       const float *mean, const float *invstd, const float *gamma,
                       const float *beta, int rows, int channels, bool relu)
{
  if (tdm_backend_enter(b) && bn_input_ok(b, "bn_forward", x_type, rows, channels))
    b->ops->bn_forward(b, y, x, x_type, mean, invstd, gamma, beta, rows, channels, relu);
}

void
tdm_backend_bn_forward_add(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                           const float *mean, const float *invstd, const float *gamma,
                           const float *beta, const float *a, int rows, int channels, bool relu)
{
  if (b->ops->bn_forward_add == NULL) {
    tdm_backend_bn_forward(b, y, x, x_type, mean, invstd, gamma, beta, rows, channels, false);
    tdm_backend_add_out(b, y, a, y, (size_t)MAX(rows, 0) * MAX(channels, 0), relu);
    return;
  }
  if (tdm_backend_enter(b) && bn_input_ok(b, "bn_forward_add", x_type, rows, channels))
    b->ops->bn_forward_add(b, y, x, x_type, mean, invstd, gamma, beta, a, rows, channels, relu);
}

void
tdm_backend_bn_forward_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                            const float *mean, const float *invstd, const float *gamma,
                            const float *beta, const void *a, TdmDtype a_type, int rows,
                            int channels, bool relu, uint32_t *bits)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, bn_forward_bf16) &&
      bn_input_ok(b, "bn_forward_bf16", x_type, rows, channels) &&
      tdm_backend_input_ok(b, "bn_forward_bf16", a_type))
    b->ops->bn_forward_bf16(b, y, x, x_type, mean, invstd, gamma, beta, a, a_type, rows,
                            channels, relu, bits);
}

void
tdm_backend_bn_forward_eval(TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                            const float *running_mean, const float *running_var,
                            const float *gamma, const float *beta, float eps, int rows,
                            int channels, bool relu)
{
  if (tdm_backend_enter(b) && bn_input_ok(b, "bn_forward_eval", x_type, rows, channels))
    b->ops->bn_forward_eval(b, y, x, x_type, running_mean, running_var, gamma, beta, eps, rows,
                            channels, relu);
}

void
tdm_backend_bn_forward_eval_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                                 const float *running_mean, const float *running_var,
                                 const float *gamma, const float *beta, float eps, int rows,
                                 int channels, bool relu)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, bn_forward_eval_bf16) &&
      bn_input_ok(b, "bn_forward_eval_bf16", x_type, rows, channels))
    b->ops->bn_forward_eval_bf16(b, y, x, x_type, running_mean, running_var, gamma, beta, eps,
                                 rows, channels, relu);
}

void
tdm_backend_bn_relu_add_bf16(TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                             const float *mean, const float *invstd, const float *gamma,
                             const float *beta, const void *a, TdmDtype a_type, int rows,
                             int channels)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, bn_relu_add_bf16) &&
      bn_input_ok(b, "bn_relu_add_bf16", x_type, rows, channels) &&
      tdm_backend_input_ok(b, "bn_relu_add_bf16", a_type))
    b->ops->bn_relu_add_bf16(b, y, x, x_type, mean, invstd, gamma, beta, a, a_type, rows,
                             channels);
}

void
tdm_backend_bn_backward_sums(TdmBackend *b, float *dgamma, float *dbeta, const void *dy,
                             TdmDtype dy_type, const void *x, TdmDtype x_type,
                             const float *mean, const float *invstd, const float *gamma,
                             const float *beta, bool relu, int rows, int channels)
{
  if (tdm_backend_enter(b) &&
      bn_backward_ok(b, "bn_backward_sums", dy_type, x_type, rows, channels))
    b->ops->bn_backward_sums(b, dgamma, dbeta, dy, dy_type, x, x_type, mean, invstd, gamma,
                             beta, relu, rows, channels);
}

/* The block start's share (TdmBlockStart): the skip's or the projection's, not both; a
 * projection's a whole number of h × w images of rows, its stride at least 1, and dx
 * over none of it. */
static gboolean
block_start_ok(TdmBackend *b, const char *op, uint16_t *dx, const TdmBlockStart *in, int rows,
               int channels)
{
  if (in->strided == NULL)
    return TRUE;
  if (!TDM_ARGS_OK(b, in->skip == NULL, _("%s: both the skip's share and a projection's"),
                   op) ||
      !TDM_ARGS_OK(b,
                   in->h >= 1 && in->w >= 1 && in->stride >= 1 &&
                       rows % ((int64_t)in->h * in->w) == 0,
                   _("%s: %d rows of %d×%d images, stride %d: not a shape"), op, rows, in->h,
                   in->w, in->stride))
    return FALSE;
  size_t images = (size_t)rows / ((size_t)in->h * in->w);
  size_t compact = images * (size_t)((in->h - 1) / in->stride + 1) *
                   (size_t)((in->w - 1) / in->stride + 1) * (size_t)channels;
  return TDM_ARGS_OK(b,
                     !tdm_bytes_overlap(dx, (size_t)rows * channels * sizeof(uint16_t),
                                        in->strided, compact * sizeof(float)),
                     _("%s: dx over the projection's share"), op);
}

void
tdm_backend_add_relu_backward_bn_sums_bf16(TdmBackend *b, uint16_t *dx, const TdmBlockStart *in,
                                           const void *x, TdmDtype x_type, const float *mean,
                                           const float *invstd, const float *gamma,
                                           const float *beta, bool relu, int rows, int channels,
                                           float *dgamma, float *dbeta)
{
  const char *op = "add_relu_backward_bn_sums_bf16";
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, add_relu_backward_bn_sums_bf16) &&
      bn_backward_ok(b, op, in->a_type, x_type, rows, channels) &&
      TDM_ARGS_OK(b, (const void *)dx != in->a || in->a_type == TDM_DTYPE_BF16,
                  _("%s: dx is a but a is not bf16"), op) &&
      TDM_ARGS_OK(b, (const void *)dx != x && (const void *)dx != (const void *)in->mask,
                  _("%s: dx is the bn's input or the ReLU's mask"), op) &&
      block_start_ok(b, op, dx, in, rows, channels))
    b->ops->add_relu_backward_bn_sums_bf16(b, dx, in, x, x_type, mean, invstd, gamma, beta,
                                           relu, rows, channels, dgamma, dbeta);
}

gboolean
tdm_backend_has_start_bn_sums(TdmBackend *b)
{
  return b->ops->add_relu_backward_bn_sums_bf16 != NULL;
}

void
tdm_backend_bn_backward_dx(TdmBackend *b, float *dx, const void *dy, TdmDtype dy_type,
                           const void *x, TdmDtype x_type, const float *mean,
                           const float *invstd, const float *gamma, const float *beta,
                           bool relu, const float *sum_dgamma, const float *sum_dbeta,
                           float inv_count, int rows, int channels)
{
  if (tdm_backend_enter(b) &&
      bn_backward_ok(b, "bn_backward_dx", dy_type, x_type, rows, channels))
    b->ops->bn_backward_dx(b, dx, dy, dy_type, x, x_type, mean, invstd, gamma, beta, relu,
                           sum_dgamma, sum_dbeta, inv_count, rows, channels);
}

void
tdm_backend_bn_backward_dx_bf16(TdmBackend *b, uint16_t *dx, const void *dy, TdmDtype dy_type,
                                const void *x, TdmDtype x_type, const float *mean,
                                const float *invstd, const float *gamma, const float *beta,
                                bool relu, const float *sum_dgamma, const float *sum_dbeta,
                                float inv_count, int rows, int channels)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, bn_backward_dx_bf16) &&
      bn_backward_ok(b, "bn_backward_dx_bf16", dy_type, x_type, rows, channels))
    b->ops->bn_backward_dx_bf16(b, dx, dy, dy_type, x, x_type, mean, invstd, gamma, beta, relu,
                                sum_dgamma, sum_dbeta, inv_count, rows, channels);
}

/* The stem's conv and its bn in backward, in two passes (TdmStemBn) */

gboolean
tdm_backend_stem_bn_takes(TdmBackend *b, const TdmConvShape *s, TdmDtype x_type,
                          size_t *work_bytes)
{
  size_t bytes = 0;
  gboolean takes = b->ops->stem_bn_takes != NULL && b->ops->stem_bn_sums != NULL &&
                   b->ops->stem_bn_dx_wgrad != NULL && s->n >= 1 && s->h >= 1 && s->w >= 1 &&
                   s->c >= 1 && s->out_c >= 1 && s->kernel >= 1 && s->pad >= 0 &&
                   s->stride >= 1 && tdm_conv_out_h(s) >= 1 && tdm_conv_out_w(s) >= 1 &&
                   b->ops->stem_bn_takes(b, s, x_type, &bytes);
  if (work_bytes != NULL)
    *work_bytes = takes ? bytes : 0;
  return takes;
}

gboolean
tdm_backend_stem_bn_aligned(const TdmStemBn *a)
{
  return ((uintptr_t)a->dy & 15u) == 0 && ((uintptr_t)a->spare & 15u) == 0 &&
         ((uintptr_t)a->work & 31u) == 0;
}

/* A call of either pass: a shape and image the backend takes, its scratch as large as
 * it said and aligned, and the room for the stem's output apart from dy. */
static gboolean
stem_bn_ok(TdmBackend *b, const char *op, const TdmStemBn *a)
{
  const TdmConvShape *s = &a->shape;
  size_t need = 0;
  if (!TDM_ARGS_OK(b, tdm_backend_stem_bn_takes(b, s, a->x_type, &need),
                   _("%s: a stem this backend does not take: n=%d h=%d w=%d c=%d, %d out, "
                     "kernel %d, pad %d, stride %d"),
                   op, s->n, s->h, s->w, s->c, s->out_c, s->kernel, s->pad, s->stride) ||
      !TDM_ARGS_OK(b, a->work_bytes >= need && (need == 0 || a->work != NULL),
                   _("%s: %zu bytes of scratch, where the passes need %zu"), op,
                   a->work_bytes, need) ||
      !TDM_ARGS_OK(b, tdm_backend_stem_bn_aligned(a),
                   _("%s: dy, spare or work not aligned (16, 16 and 32 bytes)"), op))
    return FALSE;
  size_t out = (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s) * s->out_c;
  return TDM_ARGS_OK(b,
                     a->spare != NULL && !tdm_bytes_overlap(a->spare, out * sizeof(uint16_t),
                                                            a->dy, out * sizeof(uint16_t)),
                     _("%s: no room for the stem's output apart from its gradient"), op);
}

void
tdm_backend_stem_bn_sums(TdmBackend *b, const TdmStemBn *a, float *dgamma, float *dbeta)
{
  if (tdm_backend_enter(b) && stem_bn_ok(b, "stem_bn_sums", a))
    b->ops->stem_bn_sums(b, a, dgamma, dbeta);
}

void
tdm_backend_stem_bn_dx_wgrad(TdmBackend *b, const TdmStemBn *a, const float *sum_dgamma,
                             const float *sum_dbeta, float inv_count, float *dw)
{
  if (tdm_backend_enter(b) && stem_bn_ok(b, "stem_bn_dx_wgrad", a))
    b->ops->stem_bn_dx_wgrad(b, a, sum_dgamma, sum_dbeta, inv_count, dw);
}

/* Average pooling of windows that tile the input */

static gboolean
avgpool_ok(TdmBackend *b, const char *op, int n, int h, int w, int c, int k)
{
  return TDM_ARGS_OK(b, n >= 0 && h >= 1 && w >= 1 && c >= 1 && k >= 1 && k <= h && k <= w,
                     _("%s: bad shape n=%d h=%d w=%d c=%d k=%d"), op, n, h, w, c, k);
}

void
tdm_backend_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int h, int w, int c,
                            int k)
{
  if (tdm_backend_enter(b) && avgpool_ok(b, "avgpool_forward", n, h, w, c, k))
    b->ops->avgpool_forward(b, y, x, n, h, w, c, k);
}

void
tdm_backend_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n, int h, int w,
                             int c, int k)
{
  if (tdm_backend_enter(b) && avgpool_ok(b, "avgpool_backward", n, h, w, c, k))
    b->ops->avgpool_backward(b, dx, dy, n, h, w, c, k);
}

/* Pooling with any window, stride and padding */

static gboolean
pool2d_ok(TdmBackend *b, const char *op, TdmPool2d g)
{
  return TDM_ARGS_OK(b, tdm_pool2d_valid(g),
                     _("%s: bad geometry %d×%d×%d×%d k=%d s=%d p=%d → %d×%d"), op, g.n, g.h,
                     g.w, g.c, g.k, g.s, g.p, g.oh, g.ow);
}

void
tdm_backend_maxpool2d_forward(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                              const void *x, TdmDtype x_type, TdmPool2d g)
{
  if (tdm_backend_enter(b) && pool2d_ok(b, "maxpool2d_forward", g) &&
      tdm_backend_input_ok(b, "maxpool2d_forward", x_type) &&
      tdm_backend_input_ok(b, "maxpool2d_forward", y_type))
    b->ops->maxpool2d_forward(b, y, y_type, argmax, x, x_type, g);
}

void
tdm_backend_maxpool2d_forward_bn(TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                                 const void *x, TdmDtype x_type, const float *mean,
                                 const float *invstd, const float *gamma, const float *beta,
                                 bool relu, TdmPool2d g)
{
  if (tdm_backend_enter(b) && TDM_HAS_OP(b, maxpool2d_forward_bn) &&
      pool2d_ok(b, "maxpool2d_forward_bn", g) &&
      TDM_ARGS_OK(b, (mean == NULL) == (invstd == NULL) && (mean == NULL) == (gamma == NULL) &&
                         (mean == NULL) == (beta == NULL) && (mean != NULL || !relu),
                  _("%s: give all four of the bn's mean, invstd, gamma and beta, or none (and "
                    "then no ReLU)"),
                  "maxpool2d_forward_bn") &&
      tdm_backend_input_ok(b, "maxpool2d_forward_bn", x_type) &&
      tdm_backend_input_ok(b, "maxpool2d_forward_bn", y_type))
    b->ops->maxpool2d_forward_bn(b, y, y_type, argmax, x, x_type, mean, invstd, gamma, beta,
                                 relu, g);
}

void
tdm_backend_maxpool2d_backward(TdmBackend *b, void *dx, TdmDtype dx_type, const void *dy,
                               TdmDtype dy_type, const void *argmax, TdmPool2d g)
{
  if (tdm_backend_enter(b) && pool2d_ok(b, "maxpool2d_backward", g) &&
      tdm_backend_input_ok(b, "maxpool2d_backward", dy_type) &&
      tdm_backend_input_ok(b, "maxpool2d_backward", dx_type))
    b->ops->maxpool2d_backward(b, dx, dx_type, dy, dy_type, argmax, g);
}

void
tdm_backend_avgpool2d_forward(TdmBackend *b, float *y, const float *x, TdmPool2d g)
{
  if (tdm_backend_enter(b) && pool2d_ok(b, "avgpool2d_forward", g))
    b->ops->avgpool2d_forward(b, y, x, g);
}

void
tdm_backend_avgpool2d_backward(TdmBackend *b, float *dx, const float *dy, TdmPool2d g)
{
  if (tdm_backend_enter(b) && pool2d_ok(b, "avgpool2d_backward", g))
    b->ops->avgpool2d_backward(b, dx, dy, g);
}

/* Global pooling */

static gboolean
global_ok(TdmBackend *b, const char *op, int n, int pixels, int c)
{
  return TDM_ARGS_OK(b,
                     n >= 0 && pixels >= 1 && c >= 1 && (guint64)n * pixels * c <= G_MAXINT32,
                     _("%s: bad shape %d×%d×%d"), op, n, pixels, c);
}

void
tdm_backend_global_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int pixels,
                                   int c)
{
  if (tdm_backend_enter(b) && global_ok(b, "global_avgpool_forward", n, pixels, c))
    b->ops->global_avgpool_forward(b, y, x, n, pixels, c);
}

void
tdm_backend_global_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n,
                                    int pixels, int c)
{
  if (tdm_backend_enter(b) && global_ok(b, "global_avgpool_backward", n, pixels, c))
    b->ops->global_avgpool_backward(b, dx, dy, n, pixels, c);
}

void
tdm_backend_global_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                   int n, int pixels, int c)
{
  if (tdm_backend_enter(b) && global_ok(b, "global_maxpool_forward", n, pixels, c))
    b->ops->global_maxpool_forward(b, y, argmax, x, n, pixels, c);
}

void
tdm_backend_global_maxpool_backward(TdmBackend *b, float *dx, const float *dy,
                                    const int32_t *argmax, int n, int pixels, int c)
{
  if (tdm_backend_enter(b) && global_ok(b, "global_maxpool_backward", n, pixels, c))
    b->ops->global_maxpool_backward(b, dx, dy, argmax, n, pixels, c);
}

/* Dropout */

static gboolean
dropout_ok(TdmBackend *b, const char *op, int n, int per_sample, float p)
{
  return TDM_ARGS_OK(b, n >= 0 && per_sample >= 0 && p >= 0.0f && p < 1.0f,
                     _("%s: bad shape %d×%d or rate %g"), op, n, per_sample, p);
}

void
tdm_backend_dropout_forward(TdmBackend *b, float *y, const float *x, const int32_t *indices,
                            int n, int per_sample, float p, uint64_t key, uint32_t epoch)
{
  if (tdm_backend_enter(b) && dropout_ok(b, "dropout_forward", n, per_sample, p))
    b->ops->dropout_forward(b, y, x, indices, n, per_sample, p, key, epoch);
}

void
tdm_backend_dropout_backward(TdmBackend *b, float *dx, const float *dy, const int32_t *indices,
                             int n, int per_sample, float p, uint64_t key, uint32_t epoch)
{
  if (tdm_backend_enter(b) && dropout_ok(b, "dropout_backward", n, per_sample, p))
    b->ops->dropout_backward(b, dx, dy, indices, n, per_sample, p, key, epoch);
}

/* Optimizers */

void
tdm_backend_sgd_update(TdmBackend *b, float *p, const float *g, size_t n, float lr,
                       float weight_decay, const float *rates)
{
  if (tdm_backend_enter(b))
    b->ops->sgd_update(b, p, g, n, lr, weight_decay, rates);
}

void
tdm_backend_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity, size_t n,
                            float lr, float momentum, float weight_decay, const float *rates)
{
  if (tdm_backend_enter(b))
    b->ops->momentum_update(b, p, g, velocity, n, lr, momentum, weight_decay, rates);
}

void
tdm_backend_sgd_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity,
                                const uint8_t *decay_mask, size_t n, float lr, float momentum,
                                float weight_decay, bool nesterov, const float *rates)
{
  if (tdm_backend_enter(b))
    b->ops->sgd_momentum_update(b, p, g, velocity, decay_mask, n, lr, momentum, weight_decay,
                                nesterov, rates);
}

void
tdm_backend_weight_decay(TdmBackend *b, float *g, const float *p, const uint8_t *decay_mask,
                         size_t n, float weight_decay)
{
  if (tdm_backend_enter(b))
    b->ops->weight_decay(b, g, p, decay_mask, n, weight_decay);
}

void
tdm_backend_adam_update(TdmBackend *b, float *p, const float *g, float *m, float *v, size_t n,
                        float lr_t, float beta1, float beta2, float eps, float weight_decay,
                        const float *rates)
{
  if (tdm_backend_enter(b))
    b->ops->adam_update(b, p, g, m, v, n, lr_t, beta1, beta2, eps, weight_decay, rates);
}

void
tdm_backend_clip_norm(TdmBackend *b, float *x, size_t n, float max_norm, double *work)
{
  if (tdm_backend_enter(b) &&
      TDM_ARGS_OK(b, work != NULL && (n == 0 || x != NULL) && !(max_norm < 0),
                  _("clip_norm: bad arguments (max_norm %g)"), max_norm))
    b->ops->clip_norm(b, x, n, max_norm, work);
}

/* Comparison */

void
tdm_backend_deviation(TdmBackend *b, double *work, const void *x, const void *ref,
                      TdmDtype type, size_t n)
{
  if (tdm_backend_enter(b) &&
      TDM_ARGS_OK(b, work != NULL && (n == 0 || (x != NULL && ref != NULL)) &&
                         (type == TDM_DTYPE_F32 || type == TDM_DTYPE_BF16),
                  _("deviation: bad arguments (type %d, %zu values)"), (int)type, n))
    b->ops->deviation(b, work, x, ref, type, n);
}
