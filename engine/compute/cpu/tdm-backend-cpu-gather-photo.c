/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-gather-photo.c — the CPU backend's gather with photo augmentation,
 * the reference for kernels/gather.cu's: both compute tdm-augment.h's rule, sample by
 * sample and pixel by pixel. Not the shift-and-flip gather (tdm-backend-cpu-gather.c).
 * The front door checked the shapes; the indices, in host memory, are checked here.
 */
#include "tdm-backend-cpu-private.h"
#include "tdm-error.h"

void
tdm_cpu_gather_photo(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                     const uint8_t *labels, const int32_t *indices, int count, int h, int w,
                     int c, const TdmPhotoAugment *a, uint64_t key, uint32_t epoch)
{
  for (int i = 0; i < count; i++) {
    if (indices[i] < 0) {
      tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, "gather_photo: negative sample index %d",
                       indices[i]);
      return;
    }
  }
  const size_t sample = (size_t)h * w * c;
  for (int i = 0; i < count; i++) {
    const uint32_t s = (uint32_t)indices[i];
    const uint8_t *src = images + (size_t)s * sample;
    TdmPhotoDraw d;
    tdm_photo_draw(a, h, w, key, epoch, s, &d);
    int64_t luma = 0;
    for (int r = d.by; r < d.by + d.bh; r++)
      for (int q = d.bx; q < d.bx + d.bw; q++)
        luma += tdm_aug_luma_milli(src + ((size_t)r * w + q) * c, c);
    float mean = tdm_photo_mean(&d, luma, (int64_t)d.bh * d.bw);
    float *dst = x + (size_t)i * sample;
    for (int r = 0; r < h; r++)
      for (int q = 0; q < w; q++)
        tdm_photo_pixel(a, &d, src, h, w, c, r, q, mean, dst + ((size_t)r * w + q) * c);
    if (y != NULL)
      y[i] = labels[s];
  }
  /* The normalization is channel_affine's own code, so the bits are those of the two
   * operations one after the other. */
  if (a->normalize) {
    TdmChannelAffine affine = {.channels = c};
    for (int ch = 0; ch < c; ch++) {
      affine.mul[ch] = a->mul[ch];
      affine.add[ch] = a->add[ch];
    }
    tdm_cpu_channel_affine(b, x, (size_t)count * h * w, affine);
  }
}
