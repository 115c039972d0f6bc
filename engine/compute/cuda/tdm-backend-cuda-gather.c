/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-gather.c — the CUDA backend's input: a batch gathered from the
 * uint8 dataset on the device, with or without augmentation, and its per-channel
 * normalization (kernels/gather.cu). The front door checked the shapes.
 */
#include "tdm-backend-cuda-private.h"

#define STREAM(b) tdm_backend_cuda_stream(b)

G_STATIC_ASSERT(TDM_FLIP_RANDOM == 1 && TDM_FLIP_ALWAYS == 2);
G_STATIC_ASSERT(TDM_K_AFFINE_MAX == TDM_AFFINE_MAX_CHANNELS);

void
tdm_cuda_gather(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                const uint8_t *labels, const int32_t *indices, int count, int sample_size,
                float scale)
{
  if (!tdm_cuda_begin(b))
    return;
  TDM_CUDA_OK(b, tdm_k_gather(x, y, images, labels, indices, count, sample_size, scale,
                              CUDA_B(b)->stream));
}

void
tdm_cuda_gather_augment(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                        const uint8_t *labels, const int32_t *indices, int count, int h, int w,
                        int c, float scale, int pad, TdmFlip flip, uint64_t key, uint32_t epoch)
{
  if (!tdm_cuda_begin(b))
    return;
  /* Indices live on the device and are not checked here (gather does not either):
   * the iterator makes them. */
  TDM_CUDA_OK(b, tdm_k_gather_augment(x, y, images, labels, indices, count, h, w, c, scale, pad,
                                      (int)flip, key, epoch, STREAM(b)));
}

void
tdm_cuda_channel_affine(TdmBackend *b, float *x, size_t rows, TdmChannelAffine a)
{
  if (!tdm_cuda_begin(b))
    return;
  TdmKAffine k;
  memcpy(k.mul, a.mul, sizeof k.mul);
  memcpy(k.add, a.add, sizeof k.add);
  TDM_CUDA_OK(b, tdm_k_channel_affine(x, rows, a.channels, k, STREAM(b)));
}

void
tdm_cuda_gather_photo(TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                      const uint8_t *labels, const int32_t *indices, int count, int h, int w,
                      int c, const TdmPhotoAugment *augment, uint64_t key, uint32_t epoch)
{
  if (tdm_cuda_begin(b))
    TDM_CUDA_OK(b, tdm_k_gather_photo(x, y, images, labels, indices, count, h, w, c, augment,
                                      key, epoch, STREAM(b)));
}
