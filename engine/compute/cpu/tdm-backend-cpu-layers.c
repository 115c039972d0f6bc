/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-layers.c — see tdm-backend-cpu-layers.h. Plain loops over NHWC
 * data (channels innermost, so the per-channel loops vectorize), sums in double and
 * in a fixed order. Without FMA contraction choices of its own, so a run resumed on
 * another CPU of the architecture continues with the same bits: the BN loops are built
 * twice, for any x86-64 and for AVX2 (wider vectors over the channels, no FMA, the same
 * operations on each value), the better picked when the program starts. */
#include "tdm-backend-cpu-layers.h"
#include "tdm-i18n.h"
#include "tdm-counter-rng.h"
#include "tdm-error.h"

#include <math.h>
#include <string.h>

/* AVX2 alone, not AVX-512F: GCC may contract a multiply and an add into one FMA where
 * the target has it for the vector width, and AVX-512F has it for 16 floats. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                    \
  !defined(__SANITIZE_ADDRESS__)
#define BN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BN_CLONES
#endif

#define REQUIRE(b, cond, ...)                                          \
  do {                                                                 \
    if (G_UNLIKELY(!(cond))) {                                         \
      tdm_backend_fail((b), TDM_ENGINE_ERROR_BACKEND, __VA_ARGS__);    \
      return;                                                          \
    }                                                                  \
  } while (0)

/* Augmenting gather */

void
tdm_cpu_gather_augment(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                       const uint8_t *labels, const int32_t *indices, int count, int h,
                       int w, int c, float scale, int pad, TdmFlip flip, uint64_t key,
                       uint32_t epoch)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, count >= 0 && h >= 1 && w >= 1 && c >= 1 && pad >= 0,
          "gather_augment: bad shape %d×%d×%d×%d pad %d", count, h, w, c, pad);
  for (int i = 0; i < count; i++)
    REQUIRE(b, indices[i] >= 0, "gather_augment: negative sample index %d", indices[i]);

  const size_t sample = (size_t)h * w * c;
  const uint32_t span = 2u * (uint32_t)pad + 1u;
  for (int i = 0; i < count; i++) {
    const uint32_t s = (uint32_t)indices[i];
    const int sy = (int)(tdm_crng_u32(key, epoch, s, 0) % span) - pad;
    const int sx = (int)(tdm_crng_u32(key, epoch, s, 1) % span) - pad;
    const gboolean mirrored = flip == TDM_FLIP_ALWAYS ||
                              (flip == TDM_FLIP_RANDOM && (tdm_crng_u32(key, epoch, s, 2) & 1));
    const uint8_t *restrict src = images + (size_t)s * sample;
    float *restrict dst = x + (size_t)i * sample;
    for (int r = 0; r < h; r++) {
      const int iy = r + sy;
      for (int q = 0; q < w; q++) {
        const int ix = (mirrored ? w - 1 - q : q) + sx;
        float *restrict d = dst + ((size_t)r * w + q) * c;
        if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
          memset(d, 0, sizeof(float) * c);
          continue;
        }
        const uint8_t *restrict p = src + ((size_t)iy * w + ix) * c;
        for (int ch = 0; ch < c; ch++)
          d[ch] = (float)p[ch] * scale;
      }
    }
    if (y != NULL)
      y[i] = labels[s];
  }
}

/* Batch normalization */

static gboolean
bn_shape_ok(TdmBackend *b, const char *op, int rows, int channels)
{
  if (rows >= 0 && channels >= 1)
    return TRUE;
  tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("%s: bad shape %d×%d"), op, rows, channels);
  return FALSE;
}

/* The shift is the first row (tdm-bn-moments.h); differences exact in double. */
BN_CLONES static void
moments_sums(double *restrict s1, double *restrict s2, const float *restrict x, int rows,
             int channels)
{
  for (int r = 0; r < rows; r++) {
    const float *restrict xr = x + (size_t)r * channels;
    for (int ch = 0; ch < channels; ch++) {
      const double d = (double)xr[ch] - (double)x[ch];
      s1[ch] += d;
      s2[ch] += d * d;
    }
  }
}

void
tdm_cpu_bn_moments(TdmBackend *b, float *slots, const float *x, int rows, int channels,
                   int slot, int slot_count)
{
  if (!tdm_cpu_begin(b) || !bn_shape_ok(b, "bn_moments", rows, channels))
    return;
  REQUIRE(b, slot >= 0 && slot < slot_count, "bn_moments: slot %d of %d", slot, slot_count);
  const size_t size = TDM_BN_SLOT_FLOATS(channels);
  memset(slots, 0, size * slot_count * sizeof(float));
  if (rows == 0)
    return;
  double *s1 = g_new0(double, 2 * (size_t)channels), *s2 = s1 + channels;
  moments_sums(s1, s2, x, rows, channels);
  float *mine = slots + size * slot;
  for (int ch = 0; ch < channels; ch++) {
    double mean, m2;
    tdm_bnm_finish(x[ch], s1[ch], s2[ch], rows, &mean, &m2);
    tdm_bnm_store(mine, channels, ch, mean, m2);
  }
  tdm_bnm_store_count(mine, channels, rows);
  g_free(s1);
}

void
tdm_cpu_bn_stats(TdmBackend *b, float *saved, const float *slots, int slot_count,
                 int channels, float eps, float momentum, float *running_mean,
                 float *running_var)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, channels >= 1 && slot_count >= 1, "bn_stats: %d channels in %d slots",
          channels, slot_count);
  for (int ch = 0; ch < channels; ch++) {
    double count, mean_d, m2;
    tdm_bnm_merge(slots, slot_count, channels, ch, &count, &mean_d, &m2);
    const float mean = (float)mean_d;
    const float var = count > 0 ? (float)(m2 / count) : 0.0f;
    saved[ch] = mean;
    saved[channels + ch] = 1.0f / sqrtf(var + eps);
    if (running_mean != NULL) {
      const float unbiased = count > 1 ? (float)(m2 / (count - 1)) : var;
      running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mean;
      running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * unbiased;
    }
  }
}

/* y = x · scale + shift per channel, the affine form of (x − mean)·invstd·γ + β. */
BN_CLONES static void
bn_apply(float *restrict y, const float *restrict x, const float *restrict scale,
         const float *restrict shift, int rows, int channels, bool relu)
{
  for (int r = 0; r < rows; r++) {
    const float *restrict xr = x + (size_t)r * channels;
    float *restrict yr = y + (size_t)r * channels;
    for (int ch = 0; ch < channels; ch++) {
      const float v = xr[ch] * scale[ch] + shift[ch];
      yr[ch] = relu && v < 0.0f ? 0.0f : v;
    }
  }
}

void
tdm_cpu_bn_forward(TdmBackend *b, float *y, const float *x, const float *mean,
                   const float *invstd, const float *gamma, const float *beta, int rows,
                   int channels, bool relu)
{
  if (!tdm_cpu_begin(b) || !bn_shape_ok(b, "bn_forward", rows, channels))
    return;
  float *scale = g_new(float, 2 * (size_t)channels), *shift = scale + channels;
  for (int ch = 0; ch < channels; ch++) {
    scale[ch] = invstd[ch] * gamma[ch];
    shift[ch] = beta[ch] - mean[ch] * scale[ch];
  }
  bn_apply(y, x, scale, shift, rows, channels, relu);
  g_free(scale);
}

void
tdm_cpu_bn_forward_eval(TdmBackend *b, float *y, const float *x, const float *running_mean,
                        const float *running_var, const float *gamma, const float *beta,
                        float eps, int rows, int channels, bool relu)
{
  if (!tdm_cpu_begin(b) || !bn_shape_ok(b, "bn_forward_eval", rows, channels))
    return;
  float *scale = g_new(float, 2 * (size_t)channels), *shift = scale + channels;
  for (int ch = 0; ch < channels; ch++) {
    scale[ch] = gamma[ch] / sqrtf(running_var[ch] + eps);
    shift[ch] = beta[ch] - running_mean[ch] * scale[ch];
  }
  bn_apply(y, x, scale, shift, rows, channels, relu);
  g_free(scale);
}

/* Per-channel constants of a BN backward, in one allocation: the channel loops read
 * them through restrict pointers, so that GCC vectorizes those loops. */
typedef struct {
  float *mean, *invstd, *scale, *shift;
} BnChannels;

static BnChannels
bn_channels(const float *mean, const float *invstd, const float *gamma, const float *beta,
            int channels)
{
  BnChannels p;
  p.mean = g_new(float, 4 * (size_t)channels);
  p.invstd = p.mean + channels;
  p.scale = p.invstd + channels;
  p.shift = p.scale + channels;
  for (int ch = 0; ch < channels; ch++) {
    p.mean[ch] = mean[ch];
    p.invstd[ch] = invstd[ch];
    /* As bn_forward computes them, so that the mask below has the forward's bits. */
    p.scale[ch] = invstd[ch] * gamma[ch];
    p.shift[ch] = beta[ch] - mean[ch] * p.scale[ch];
  }
  return p;
}

/* One row's share of the sums. The ReLU's mask is a select, not a branch: which
 * values pass is as good as random, and a mispredicted branch per value cost more
 * than the rest of the loop (10 % of a resnet step, bench/NOTES.md). Each channel
 * adds its rows in order, in double, as before: vectorizing across channels changes
 * no bit. */
static inline void
bn_sums_row(double *restrict acc, double *restrict accb, const float *restrict xr,
            const float *restrict dr, const float *restrict mean,
            const float *restrict invstd, const float *restrict scale,
            const float *restrict shift, bool relu, int channels)
{
  if (relu) {
    for (int ch = 0; ch < channels; ch++) {
      const float x = xr[ch];
      /* dy's bits where the output passed, +0 elsewhere (what `? dy : 0.0f` gives):
       * GCC if-converts an integer mask here, not a float select whose value feeds a
       * double. */
      uint32_t bits;
      memcpy(&bits, dr + ch, sizeof bits);
      bits &= -(uint32_t)(x * scale[ch] + shift[ch] > 0.0f);
      float g;
      memcpy(&g, &bits, sizeof g);
      const float xhat = (x - mean[ch]) * invstd[ch];
      acc[ch] += (double)g * xhat;
      accb[ch] += g;
    }
    return;
  }
  for (int ch = 0; ch < channels; ch++) {
    const float g = dr[ch];
    const float xhat = (xr[ch] - mean[ch]) * invstd[ch];
    acc[ch] += (double)g * xhat;
    accb[ch] += g;
  }
}

BN_CLONES static void
bn_sums_rows(double *acc, double *accb, const float *x, const float *dy, const BnChannels *p,
             bool relu, int rows, int channels)
{
  for (int r = 0; r < rows; r++)
    bn_sums_row(acc, accb, x + (size_t)r * channels, dy + (size_t)r * channels, p->mean,
                p->invstd, p->scale, p->shift, relu, channels);
}

void
tdm_cpu_bn_backward_sums(TdmBackend *b, float *dgamma, float *dbeta, const float *dy,
                         const float *x, const float *mean, const float *invstd,
                         const float *gamma, const float *beta, bool relu, int rows,
                         int channels)
{
  if (!tdm_cpu_begin(b) || !bn_shape_ok(b, "bn_backward_sums", rows, channels))
    return;
  /* With a fused ReLU, g = dy where the forward's output x·scale + shift was positive:
   * the mask from x, computed as bn_forward computes it (the same bits). */
  BnChannels p = bn_channels(mean, invstd, gamma, beta, channels);
  double *acc = g_new0(double, 2 * (size_t)channels), *accb = acc + channels;
  bn_sums_rows(acc, accb, x, dy, &p, relu, rows, channels);
  for (int ch = 0; ch < channels; ch++) {
    dgamma[ch] = (float)acc[ch];
    dbeta[ch] = (float)accb[ch];
  }
  g_free(acc);
  g_free(p.mean);
}

/* One row of dx. out may be dr (dx == dy): each value is read before it is written at
 * the same index, so the loop vectorizes whatever the overlap (ivdep says so). */
static inline void
bn_dx_row(float *out, const float *dr, const float *restrict xr, const float *restrict k,
          const float *restrict a, const float *restrict c, const float *restrict scale,
          const float *restrict shift, bool relu, int channels)
{
  if (relu) {
#pragma GCC ivdep
    for (int ch = 0; ch < channels; ch++) {
      const float x = xr[ch], d = dr[ch];
      const float g = x * scale[ch] + shift[ch] > 0.0f ? d : 0.0f;
      out[ch] = k[ch] * g + a[ch] * x + c[ch];
    }
    return;
  }
#pragma GCC ivdep
  for (int ch = 0; ch < channels; ch++)
    out[ch] = k[ch] * dr[ch] + a[ch] * xr[ch] + c[ch];
}

BN_CLONES static void
bn_dx_rows(float *dx, const float *dy, const float *x, const float *k, const float *a,
           const float *c, const BnChannels *p, bool relu, int rows, int channels)
{
  for (int r = 0; r < rows; r++) {
    const size_t at = (size_t)r * channels;
    bn_dx_row(dx + at, dy + at, x + at, k, a, c, p->scale, p->shift, relu, channels);
  }
}

void
tdm_cpu_bn_backward_dx(TdmBackend *b, float *dx, const float *dy, const float *x,
                       const float *mean, const float *invstd, const float *gamma,
                       const float *beta, bool relu, const float *sum_dgamma,
                       const float *sum_dbeta, float inv_count, int rows, int channels)
{
  if (!tdm_cpu_begin(b) || !bn_shape_ok(b, "bn_backward_dx", rows, channels))
    return;
  /* dx = k·g + a·x + c per channel, with k = γ·invstd, a = −k·invstd·Σdγ/M and
   * c = −k·Σdβ/M − a·mean: the same expression with xhat expanded; g as in the sums. */
  BnChannels p = bn_channels(mean, invstd, gamma, beta, channels);
  float *k = g_new(float, 3 * (size_t)channels), *a = k + channels, *c = a + channels;
  for (int ch = 0; ch < channels; ch++) {
    k[ch] = gamma[ch] * invstd[ch];
    a[ch] = -k[ch] * invstd[ch] * sum_dgamma[ch] * inv_count;
    c[ch] = -k[ch] * sum_dbeta[ch] * inv_count - a[ch] * mean[ch];
  }
  bn_dx_rows(dx, dy, x, k, a, c, &p, relu, rows, channels);
  g_free(k);
  g_free(p.mean);
}

/* Pooling */

void
tdm_cpu_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int h, int w, int c,
                        int k)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, n >= 0 && h >= 1 && w >= 1 && c >= 1 && k >= 1 && k <= h && k <= w,
          "avgpool_forward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  const int oh = h / k, ow = w / k;
  const float inv = 1.0f / (float)(k * k);
  for (int im = 0; im < n; im++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++) {
        float *restrict yo = y + (((size_t)im * oh + oy) * ow + ox) * c;
        memset(yo, 0, sizeof(float) * c);
        for (int ky = 0; ky < k; ky++)
          for (int kx = 0; kx < k; kx++) {
            const float *restrict xi =
              x + (((size_t)im * h + oy * k + ky) * w + ox * k + kx) * c;
            for (int ch = 0; ch < c; ch++)
              yo[ch] += xi[ch];
          }
        for (int ch = 0; ch < c; ch++)
          yo[ch] *= inv;
      }
}

void
tdm_cpu_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n, int h, int w,
                         int c, int k)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, n >= 0 && h >= 1 && w >= 1 && c >= 1 && k >= 1 && k <= h && k <= w,
          "avgpool_backward: bad shape n=%d h=%d w=%d c=%d k=%d", n, h, w, c, k);
  const int oh = h / k, ow = w / k;
  const float inv = 1.0f / (float)(k * k);
  for (int im = 0; im < n; im++)
    for (int iy = 0; iy < h; iy++)
      for (int ix = 0; ix < w; ix++) {
        float *restrict d = dx + (((size_t)im * h + iy) * w + ix) * c;
        const int oy = iy / k, ox = ix / k;
        if (oy >= oh || ox >= ow) {
          memset(d, 0, sizeof(float) * c);
          continue;
        }
        const float *restrict g = dy + (((size_t)im * oh + oy) * ow + ox) * c;
        for (int ch = 0; ch < c; ch++)
          d[ch] = g[ch] * inv;
      }
}

void
tdm_cpu_global_avgpool_forward(TdmBackend *b, float *y, const float *x, int n, int pixels,
                               int c)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, n >= 0 && pixels >= 1 && c >= 1, "global_avgpool_forward: bad shape %d×%d×%d",
          n, pixels, c);
  const float inv = 1.0f / (float)pixels;
  for (int im = 0; im < n; im++) {
    float *restrict yo = y + (size_t)im * c;
    memset(yo, 0, sizeof(float) * c);
    for (int p = 0; p < pixels; p++) {
      const float *restrict xi = x + ((size_t)im * pixels + p) * c;
      for (int ch = 0; ch < c; ch++)
        yo[ch] += xi[ch];
    }
    for (int ch = 0; ch < c; ch++)
      yo[ch] *= inv;
  }
}

void
tdm_cpu_global_avgpool_backward(TdmBackend *b, float *dx, const float *dy, int n,
                                int pixels, int c)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, n >= 0 && pixels >= 1 && c >= 1,
          "global_avgpool_backward: bad shape %d×%d×%d", n, pixels, c);
  const float inv = 1.0f / (float)pixels;
  for (int im = 0; im < n; im++) {
    const float *restrict g = dy + (size_t)im * c;
    for (int p = 0; p < pixels; p++) {
      float *restrict d = dx + ((size_t)im * pixels + p) * c;
      for (int ch = 0; ch < c; ch++)
        d[ch] = g[ch] * inv;
    }
  }
}

void
tdm_cpu_global_maxpool_forward(TdmBackend *b, float *y, int32_t *argmax, const float *x,
                               int n, int pixels, int c)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, n >= 0 && pixels >= 1 && c >= 1 && (guint64)n * pixels * c <= G_MAXINT32,
          "global_maxpool_forward: bad shape %d×%d×%d", n, pixels, c);
  for (int im = 0; im < n; im++) {
    float *restrict yo = y + (size_t)im * c;
    int32_t *restrict ao = argmax + (size_t)im * c;
    const size_t base = (size_t)im * pixels * c;
    for (int ch = 0; ch < c; ch++) {
      yo[ch] = x[base + ch];
      ao[ch] = (int32_t)(base + ch);
    }
    for (int p = 1; p < pixels; p++) {
      const size_t at = base + (size_t)p * c;
      for (int ch = 0; ch < c; ch++)
        if (x[at + ch] > yo[ch]) {
          yo[ch] = x[at + ch];
          ao[ch] = (int32_t)(at + ch);
        }
    }
  }
}

void
tdm_cpu_global_maxpool_backward(TdmBackend *b, float *dx, const float *dy,
                                const int32_t *argmax, int n, int pixels, int c)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, n >= 0 && pixels >= 1 && c >= 1, "global_maxpool_backward: bad shape %d×%d×%d",
          n, pixels, c);
  memset(dx, 0, sizeof(float) * (size_t)n * pixels * c);
  for (size_t i = 0; i < (size_t)n * c; i++)
    dx[argmax[i]] = dy[i];
}

/* Dropout: the mask is drawn again in backward, never stored. */

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
tdm_cpu_dropout_forward(TdmBackend *b, float *y, const float *x, const int32_t *indices,
                        int n, int per_sample, float p, uint64_t key, uint32_t epoch)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, n >= 0 && per_sample >= 0 && p >= 0.0f && p < 1.0f,
          "dropout_forward: bad shape %d×%d or rate %g", n, per_sample, p);
  dropout_apply(y, x, indices, n, per_sample, p, key, epoch);
}

void
tdm_cpu_dropout_backward(TdmBackend *b, float *dx, const float *dy, const int32_t *indices,
                         int n, int per_sample, float p, uint64_t key, uint32_t epoch)
{
  if (!tdm_cpu_begin(b))
    return;
  REQUIRE(b, n >= 0 && per_sample >= 0 && p >= 0.0f && p < 1.0f,
          "dropout_backward: bad shape %d×%d or rate %g", n, per_sample, p);
  dropout_apply(dx, dy, indices, n, per_sample, p, key, epoch);
}

/* PyTorch's SGD */

void
tdm_cpu_sgd_momentum_update(TdmBackend *b, float *p, const float *g, float *velocity,
                            const uint8_t *decay_mask, size_t n, float lr, float momentum,
                            float weight_decay, bool nesterov)
{
  if (!tdm_cpu_begin(b))
    return;
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
  if (!tdm_cpu_begin(b))
    return;
  for (size_t i = 0; i < n; i++)
    if (decay_mask == NULL || decay_mask[i])
      g[i] += weight_decay * p[i];
}

/* Gradient clipping */

void
tdm_cpu_clip_norm(TdmBackend *b, float *x, size_t n, float max_norm, double *work)
{
  if (!tdm_cpu_begin(b))
    return;
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
