/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-gather.c — the CPU backend's input: a batch gathered from the uint8
 * dataset, with or without augmentation (crops and flips drawn from the counter RNG by
 * sample, never by replica), and its per-channel normalization. The front door checked
 * the shapes; the indices, in host memory, are checked here.
 */
#include "tdm-backend-cpu-private.h"
#include "tdm-counter-rng.h"

#include <string.h>

void
tdm_cpu_gather(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
               const uint8_t *labels, const int32_t *indices, int count, int sample_size,
               float scale)
{
  for (int i = 0; i < count; i++)
    CPU_REQUIRE(b, indices[i] >= 0, "gather: negative sample index %d", indices[i]);

  for (int i = 0; i < count; i++) {
    const size_t index = (size_t)indices[i];
    const uint8_t *restrict src = images + index * sample_size;
    float *restrict dst = x + (size_t)i * sample_size;
    for (int j = 0; j < sample_size; j++)
      dst[j] = (float)src[j] * scale;
    if (y != NULL)
      y[i] = labels[index];
  }
}

void
tdm_cpu_gather_augment(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                       const uint8_t *labels, const int32_t *indices, int count, int h, int w,
                       int c, float scale, int pad, TdmFlip flip, uint64_t key, uint32_t epoch)
{
  for (int i = 0; i < count; i++)
    CPU_REQUIRE(b, indices[i] >= 0, "gather_augment: negative sample index %d", indices[i]);

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

void
tdm_cpu_channel_affine(TdmBackend *b, float *x, size_t rows, TdmChannelAffine a)
{
  for (size_t r = 0; r < rows; r++)
    for (int ch = 0; ch < a.channels; ch++) {
      float *v = &x[r * a.channels + ch];
      *v = *v * a.mul[ch] + a.add[ch];
    }
}
