/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-augment.h — photo augmentation, the rule that the CPU backend and the CUDA
 * kernel both compile: per training sample, from (key, epoch, sample index) alone
 * through tdm-counter-rng.h, a random resized crop (torchvision's RandomResizedCrop:
 * an integer box of a random share of the area at a random aspect ratio, resized
 * back to the sample's size, bilinear without antialiasing), a horizontal mirror,
 * colour jitter (brightness, contrast, then saturation, each clamped to [0, 1] as
 * torchvision's blends do; a fixed order where torchvision shuffles it) and random
 * erasing (torchvision's RandomErasing: 2–33 % of the area at a ratio of 0.3–3.3,
 * filled with the value that the input normalization turns into 0). So one replica
 * and N replicas, a CPU worker and a GPU, draw the same boxes and factors for a
 * sample whatever shard it lands in. Each float operation is rounded by itself
 * (__fmul_rn and __fadd_rn on the device, no contraction into fused multiply-adds),
 * and the contrast's mean is an integer sum, so both compute the same bits.
 * Plain C for C and CUDA; no GLib. Not the shift-and-flip crop (gather_augment).
 */
#pragma once

#include <math.h>
#include <stdint.h>

#include "tdm-counter-rng.h"

#ifdef __CUDACC__
#define TDM_AUG_FN static __host__ __device__ __forceinline__
#else
#define TDM_AUG_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define TDM_AUG_MUL(a, b) __fmul_rn((a), (b))
#define TDM_AUG_ADD(a, b) __fadd_rn((a), (b))
#else
#define TDM_AUG_MUL(a, b) ((float)(a) * (float)(b))
#define TDM_AUG_ADD(a, b) ((float)(a) + (float)(b))
#endif

/* What a training batch gets. A field at 0 turns its part off. */
typedef struct {
  float scale_min, scale_max;   /* resized crop: the box's share of the area; max 0: off */
  float ratio_min, ratio_max;   /* its aspect ratio, width over height */
  float jitter[3];              /* brightness, contrast, saturation: factors in [1 − j, 1 + j] */
  float erase;                  /* probability of erasing a rectangle */
  float fill[4];                /* the erased value per channel, in [0, 1] */
  int flip;                     /* 0 never, 1 with probability ½, 2 always (TdmFlip) */
  int normalize;                /* 1: then x · mul + add per channel, the input
                                 * normalization in the same pass, with the bits of the
                                 * backend's channel_affine after the gather */
  float mul[4], add[4];
} TdmPhotoAugment;

/* One sample's draws. */
typedef struct {
  int by, bx, bh, bw;           /* the crop box in source pixels (the whole image: off) */
  int mirrored;
  float factor[3];              /* brightness, contrast, saturation (1: unchanged) */
  int ey, ex, eh, ew;           /* the erased box in output pixels; eh 0: none */
} TdmPhotoDraw;

/* The counter RNG's elements: 2 is the flip (gather_augment's, so a flip means the
 * same with either gather); the crop's ten attempts, the factors and the erasing's
 * coin and ten attempts are each their own. */
#define TDM_AUG_FLIP 2u
#define TDM_AUG_CROP 16u
#define TDM_AUG_JITTER 64u
#define TDM_AUG_ERASE 80u
#define TDM_AUG_ATTEMPTS 10

TDM_AUG_FN double
tdm_aug_uniform(uint64_t key, uint32_t epoch, uint32_t s, uint32_t element, double low,
                double high)
{
  return low + (high - low) * (double)tdm_crng_uniform(key, epoch, s, element);
}

/* A random integer in [0, n), n ≥ 1. */
TDM_AUG_FN int
tdm_aug_below(uint64_t key, uint32_t epoch, uint32_t s, uint32_t element, int n)
{
  return (int)(tdm_crng_u32(key, epoch, s, element) % (uint32_t)n);
}

/* torchvision's box: up to ten tries of a share of `area` in [scale_min, scale_max]
 * at a log-uniform ratio in [ratio_min, ratio_max], placed uniformly where it fits;
 * else (only for resized crops, `fallback`) the centred box of the ratio clamped to
 * the image's. Returns whether a box was found (erasing draws none otherwise). */
TDM_AUG_FN int
tdm_aug_box(uint64_t key, uint32_t epoch, uint32_t s, uint32_t first, int h, int w,
            double scale_min, double scale_max, double ratio_min, double ratio_max,
            int fallback, int *by, int *bx, int *bh, int *bw)
{
  double area = (double)h * w;
  double log_min = log(ratio_min), log_max = log(ratio_max);
  for (int k = 0; k < TDM_AUG_ATTEMPTS; k++) {
    uint32_t e = first + 4u * (uint32_t)k;
    double target = area * tdm_aug_uniform(key, epoch, s, e, scale_min, scale_max);
    double ratio = exp(tdm_aug_uniform(key, epoch, s, e + 1, log_min, log_max));
    int cw = (int)floor(sqrt(target * ratio) + 0.5);
    int ch = (int)floor(sqrt(target / ratio) + 0.5);
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      *bh = ch;
      *bw = cw;
      *by = tdm_aug_below(key, epoch, s, e + 2, h - ch + 1);
      *bx = tdm_aug_below(key, epoch, s, e + 3, w - cw + 1);
      return 1;
    }
  }
  if (!fallback)
    return 0;
  double image = (double)w / h;
  int cw = w, ch = h;
  if (image < ratio_min)
    ch = (int)floor(w / ratio_min + 0.5);
  else if (image > ratio_max)
    cw = (int)floor(h * ratio_max + 0.5);
  *bh = ch < 1 ? 1 : ch;
  *bw = cw < 1 ? 1 : cw;
  *by = (h - *bh) / 2;
  *bx = (w - *bw) / 2;
  return 1;
}

/* Sample s's draws for h×w images. */
TDM_AUG_FN void
tdm_photo_draw(const TdmPhotoAugment *a, int h, int w, uint64_t key, uint32_t epoch,
               uint32_t s, TdmPhotoDraw *d)
{
  d->by = d->bx = 0;
  d->bh = h;
  d->bw = w;
  if (a->scale_max > 0)
    tdm_aug_box(key, epoch, s, TDM_AUG_CROP, h, w, a->scale_min, a->scale_max, a->ratio_min,
                a->ratio_max, 1, &d->by, &d->bx, &d->bh, &d->bw);
  d->mirrored = a->flip == 2 || (a->flip == 1 && (tdm_crng_u32(key, epoch, s, TDM_AUG_FLIP) & 1));
  for (int i = 0; i < 3; i++) {
    double j = a->jitter[i];
    d->factor[i] = j > 0 ? (float)tdm_aug_uniform(key, epoch, s, TDM_AUG_JITTER + (uint32_t)i,
                                                  1 - j, 1 + j)
                         : 1.0f;
  }
  d->ey = d->ex = d->eh = d->ew = 0;
  if (a->erase > 0 && tdm_crng_uniform(key, epoch, s, TDM_AUG_ERASE) < a->erase)
    tdm_aug_box(key, epoch, s, TDM_AUG_ERASE + 1, h, w, 0.02, 0.33, 0.3, 3.3, 0, &d->ey, &d->ex,
                &d->eh, &d->ew);
}

/* A pixel's luminance by torchvision's weights, as an integer: Σ weight · value with
 * weights in thousandths (grey: 1000 · value). */
TDM_AUG_FN int64_t
tdm_aug_luma_milli(const uint8_t *p, int c)
{
  if (c < 3)
    return 1000 * (int64_t)p[0];
  return 299 * (int64_t)p[0] + 587 * (int64_t)p[1] + 114 * (int64_t)p[2];
}

/* The contrast's reference grey from the sum of tdm_aug_luma_milli over the crop box's
 * `pixels` source pixels (an integer, the same however it was added up), after the
 * brightness factor: torchvision's mean of the grey image, taken here over the source
 * pixels of the box. */
TDM_AUG_FN float
tdm_photo_mean(const TdmPhotoDraw *d, int64_t luma_sum, int64_t pixels)
{
  float mean = (float)((double)luma_sum / ((double)pixels * 255000.0));
  float v = TDM_AUG_MUL(mean, d->factor[0]);
  return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

TDM_AUG_FN float
tdm_aug_clamp01(float v)
{
  return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

/* torchvision's blend: a · factor + b · (1 − factor), clamped. */
TDM_AUG_FN float
tdm_aug_blend(float a, float b, float factor)
{
  return tdm_aug_clamp01(TDM_AUG_ADD(TDM_AUG_MUL(a, factor),
                                     TDM_AUG_MUL(b, TDM_AUG_ADD(1.0f, -factor))));
}

/* One coordinate of the bilinear resize (align_corners false): the source pixel i0,
 * its neighbour i1 and the weight of i1, for output position o of n over a box from
 * `start` of `size` pixels. */
TDM_AUG_FN void
tdm_aug_source(int o, int n, int start, int size, int *i0, int *i1, float *weight)
{
  float step = (float)size / (float)n;
  float at = TDM_AUG_ADD(TDM_AUG_MUL(TDM_AUG_ADD((float)o, 0.5f), step), -0.5f);
  if (at < 0.0f)
    at = 0.0f;
  int base = (int)at;
  if (base > size - 1)
    base = size - 1;
  *i0 = start + base;
  *i1 = start + (base + 1 < size ? base + 1 : base);
  *weight = TDM_AUG_ADD(at, -(float)base);
}

/* Output pixel (r, q) of sample s: out[0, c) in [0, 1]. src is the source image (h×w×c
 * uint8, HWC), mean tdm_photo_mean's. */
TDM_AUG_FN void
tdm_photo_pixel(const TdmPhotoAugment *a, const TdmPhotoDraw *d, const uint8_t *src, int h,
                int w, int c, int r, int q, float mean, float *out)
{
  if (d->eh > 0 && r >= d->ey && r < d->ey + d->eh && q >= d->ex && q < d->ex + d->ew) {
    for (int ch = 0; ch < c; ch++)
      out[ch] = a->fill[ch < 4 ? ch : 3];
    return;
  }
  int y0, y1, x0, x1;
  float wy, wx;
  tdm_aug_source(r, h, d->by, d->bh, &y0, &y1, &wy);
  tdm_aug_source(d->mirrored ? w - 1 - q : q, w, d->bx, d->bw, &x0, &x1, &wx);
  const float scale = 1.0f / 255.0f;
  for (int ch = 0; ch < c; ch++) {
    float p00 = src[((size_t)y0 * w + x0) * c + ch], p01 = src[((size_t)y0 * w + x1) * c + ch];
    float p10 = src[((size_t)y1 * w + x0) * c + ch], p11 = src[((size_t)y1 * w + x1) * c + ch];
    float top = TDM_AUG_ADD(p00, TDM_AUG_MUL(wx, TDM_AUG_ADD(p01, -p00)));
    float bottom = TDM_AUG_ADD(p10, TDM_AUG_MUL(wx, TDM_AUG_ADD(p11, -p10)));
    float v = TDM_AUG_MUL(TDM_AUG_ADD(top, TDM_AUG_MUL(wy, TDM_AUG_ADD(bottom, -top))), scale);
    v = tdm_aug_clamp01(TDM_AUG_MUL(v, d->factor[0]));
    out[ch] = tdm_aug_blend(v, mean, d->factor[1]);
  }
  if (c >= 3 && d->factor[2] != 1.0f) {
    float grey = TDM_AUG_ADD(TDM_AUG_ADD(TDM_AUG_MUL(out[0], 0.299f), TDM_AUG_MUL(out[1], 0.587f)),
                             TDM_AUG_MUL(out[2], 0.114f));
    for (int ch = 0; ch < 3; ch++)
      out[ch] = tdm_aug_blend(out[ch], grey, d->factor[2]);
  }
}
