/* SPDX-License-Identifier: GPL-3.0-or-later */
/* gather.cu — a training batch from the uint8 dataset resident on the device.
 *
 * x[i, :] = images[indices[i], :] · scale as float32 and y[i] = labels[indices[i]]
 * (y may be NULL):
 * the only per-step input is the int32 index list, so the host never touches
 * pixels during training; with augmentation (random crop and flip, or the photo
 * augmentation of tdm-augment.h) likewise, drawn on the device; then the per-channel
 * input normalization (its own pass, or in the photo gather's). Not a data loader: shuffling and sharding are the iterator's,
 * and the dataset is already in HWC order.
 */
#include "tdm-kernels.h"
#include "tdm-augment.h"
#include "tdm-counter-rng.h"
#include "common.cuh"

/* TdmFlip of tdm-backend.h, which kernels/ do not include (it is GLib's side). */
#define TDM_FLIP_RANDOM 1
#define TDM_FLIP_ALWAYS 2

/* Four pixels per thread (uchar4 in, float4 out) when sample_size % 4 == 0 and the
 * pointers allow it; one otherwise. Rows are blockIdx.y-strided, pixels x-strided. */
template <bool VEC>
__global__ void
gather_kernel(float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
              const int32_t *indices, int count, int sample_size, float scale)
{
  int per_row = VEC ? sample_size / 4 : sample_size;
  for (int i = blockIdx.y; i < count; i += gridDim.y) {
    size_t src = (size_t)indices[i] * (size_t)sample_size;
    size_t dst = (size_t)i * (size_t)sample_size;
    if (y != NULL && blockIdx.x == 0 && threadIdx.x == 0)
      y[i] = (int32_t)labels[indices[i]];
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < per_row;
         p += gridDim.x * blockDim.x) {
      if (VEC) {
        uchar4 u = ((const uchar4 *)(images + src))[p];
        float4 f = make_float4(u.x * scale, u.y * scale, u.z * scale, u.w * scale);
        ((float4 *)(x + dst))[p] = f;
      } else {
        x[dst + p] = images[src + p] * scale;
      }
    }
  }
}

extern "C" cudaError_t
tdm_k_gather(float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
             const int32_t *indices, int count, int sample_size, float scale,
             cudaStream_t stream)
{
  if (count <= 0)
    return cudaSuccess;
  if (sample_size <= 0)
    return cudaErrorInvalidValue;
  bool vec = sample_size % 4 == 0 && ((uintptr_t)images & 3u) == 0 && tdm_k_aligned16(x);
  int per_row = vec ? sample_size / 4 : sample_size;
  unsigned bx = (unsigned)((per_row + TDM_K_THREADS - 1) / TDM_K_THREADS);
  unsigned by = (unsigned)(count < 65535 ? count : 65535);
  dim3 grid(bx, by);
  if (vec)
    gather_kernel<true><<<grid, TDM_K_THREADS, 0, stream>>>(x, y, images, labels, indices,
                                                            count, sample_size, scale);
  else
    gather_kernel<false><<<grid, TDM_K_THREADS, 0, stream>>>(x, y, images, labels, indices,
                                                             count, sample_size, scale);
  return tdm_k_launched();
}

/* The gather with a random crop (shift within ±pad, zeros outside) and a mirror, per
 * sample from the counter RNG, so the numbers are the CPU's (tdm-counter-rng.h is
 * the same code on both). Block rows are samples: thread 0 draws the sample's shift
 * and flip once into shared memory, then the block writes its h·w·c floats, one a
 * thread, reading the shifted pixel (reads are scattered by at most one row, which
 * the cache absorbs; these images are small). */
__global__ void
gather_augment_kernel(float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
                      const int32_t *indices, int count, int h, int w, int c, float scale,
                      int pad, int flip, uint64_t key, uint32_t epoch)
{
  __shared__ int draw[3];
  int sample = h * w * c;
  for (int i = blockIdx.y; i < count; i += gridDim.y) {
    uint32_t s = (uint32_t)indices[i];
    if (threadIdx.x == 0) {
      uint32_t span = 2u * (uint32_t)pad + 1u;
      draw[0] = (int)(tdm_crng_u32(key, epoch, s, 0) % span) - pad;
      draw[1] = (int)(tdm_crng_u32(key, epoch, s, 1) % span) - pad;
      draw[2] = flip == TDM_FLIP_ALWAYS ||
                (flip == TDM_FLIP_RANDOM && (tdm_crng_u32(key, epoch, s, 2) & 1));
      if (y != NULL && blockIdx.x == 0)
        y[i] = (int32_t)labels[s];
    }
    __syncthreads();
    int sy = draw[0], sx = draw[1];
    bool mirrored = draw[2] != 0;
    const uint8_t *src = images + (size_t)s * sample;
    float *dst = x + (size_t)i * sample;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < sample;
         e += gridDim.x * blockDim.x) {
      int ch = e % c;
      int pixel = e / c;
      int q = pixel % w;
      int r = pixel / w;
      int iy = r + sy;
      int ix = (mirrored ? w - 1 - q : q) + sx;
      float v = 0.0f;
      if (iy >= 0 && iy < h && ix >= 0 && ix < w)
        v = (float)src[(iy * w + ix) * c + ch] * scale;
      dst[e] = v;
    }
    /* Nobody draws the next sample's shift before all have read this one's. */
    __syncthreads();
  }
}

extern "C" cudaError_t
tdm_k_gather_augment(float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
                     const int32_t *indices, int count, int h, int w, int c, float scale,
                     int pad, int flip, uint64_t key, uint32_t epoch, cudaStream_t stream)
{
  if (count <= 0)
    return cudaSuccess;
  if (h <= 0 || w <= 0 || c <= 0 || pad < 0 || (size_t)h * w * c > INT32_MAX)
    return cudaErrorInvalidValue;
  int sample = h * w * c;
  unsigned bx = (unsigned)((sample + TDM_K_THREADS - 1) / TDM_K_THREADS);
  if (bx > 64)
    bx = 64;
  unsigned by = (unsigned)(count < 65535 ? count : 65535);
  gather_augment_kernel<<<dim3(bx, by), TDM_K_THREADS, 0, stream>>>(
      x, y, images, labels, indices, count, h, w, c, scale, pad, flip, key, epoch);
  return tdm_k_launched();
}

/* x · mul + add as one fused multiply-add: what the compiler makes of channel_affine's
 * expression, written out so that the gather that normalizes in its own pass
 * (gather_photo_kernel) has the bits of the gather then channel_affine. */
__device__ __forceinline__ float
affine_value(float v, float mul, float add)
{
  return __fmaf_rn(v, mul, add);
}

/* 32-bit indices below 2³¹ elements (a 64-bit remainder a value was most of the
 * pass's cost). */
template <typename I>
__global__ void
channel_affine_kernel(float *x, I total, int channels, TdmKAffine a)
{
  for (I e = tdm_k_grid_start<I>(); e < total; e += tdm_k_grid_stride<I>()) {
    int ch = (int)(e % (I)channels);
    x[e] = affine_value(x[e], a.mul[ch], a.add[ch]);
  }
}

extern "C" cudaError_t
tdm_k_channel_affine(float *x, size_t rows, int channels, TdmKAffine a, cudaStream_t stream)
{
  if (channels < 1 || channels > TDM_K_AFFINE_MAX)
    return cudaErrorInvalidValue;
  size_t total = rows * (size_t)channels;
  if (total == 0)
    return cudaSuccess;
  unsigned blocks = tdm_k_blocks(total, TDM_K_THREADS);
  if (total <= INT32_MAX)
    channel_affine_kernel<<<blocks, TDM_K_THREADS, 0, stream>>>(x, (uint32_t)total, channels,
                                                                 a);
  else
    channel_affine_kernel<<<blocks, TDM_K_THREADS, 0, stream>>>(x, total, channels, a);
  return tdm_k_launched();
}

/* A sample is a grid row of `parts` blocks of 1024 threads, each writing its share of
 * the pixels (a 128-sample batch of one 256-thread block a sample kept an H100's SMs at
 * an eighth of their threads, waiting on loads: 0.27 ms for 224-px photos).
 * Every block's thread 0 draws the sample's boxes and factors into shared memory (a few
 * hundred operations, repeated per part); where the contrast factor is not 1 the block
 * sums the crop box's luminance (integers, so the order of the additions, a warp's
 * shuffles then one shared atomic a warp, cannot change the sum), and the launcher
 * gives such a batch one part a sample, so the box is read once. A factor of 1 never
 * reads the mean: its blend adds mean · 0, +0 for any mean in [0, 1], 0 included. Then
 * each thread writes whole pixels, all of a pixel's channels at once (saturation mixes
 * them), normalized as channel_affine would (augment.normalize). */
#define PHOTO_THREADS 1024

/* C, the channels, a constant: a pixel's values stay in registers. */
template <int C>
__global__ void __launch_bounds__(PHOTO_THREADS)
gather_photo_kernel(float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
                    const int32_t *indices, int count, int h, int w,
                    TdmPhotoAugment augment, uint64_t key, uint32_t epoch)
{
  const int c = C;
  __shared__ TdmPhotoDraw draw;
  __shared__ unsigned long long luma;
  const size_t sample = (size_t)h * w * c;
  const int pixels = h * w;
  const int share = (pixels - 1) / (int)gridDim.x + 1;
  const int first = (int)blockIdx.x * share;
  const int end = (int)min((long long)pixels, (long long)first + share);
  for (int i = blockIdx.y; i < count; i += gridDim.y) {
    uint32_t s = (uint32_t)indices[i];
    const uint8_t *src = images + (size_t)s * sample;
    if (threadIdx.x == 0) {
      tdm_photo_draw(&augment, h, w, key, epoch, s, &draw);
      luma = 0;
      if (y != NULL && blockIdx.x == 0)
        y[i] = (int32_t)labels[s];
    }
    __syncthreads();
    const bool contrast = draw.factor[1] != 1.0f;
    const int box = draw.bh * draw.bw;
    if (contrast) {
      unsigned long long part = 0;
      for (int p = threadIdx.x; p < box; p += blockDim.x) {
        int r = draw.by + p / draw.bw, q = draw.bx + p % draw.bw;
        part += (unsigned long long)tdm_aug_luma_milli(src + ((size_t)r * w + q) * c, c);
      }
      for (int lane = 16; lane > 0; lane /= 2)
        part += __shfl_down_sync(0xffffffffu, part, lane);
      if (threadIdx.x % 32 == 0)
        atomicAdd(&luma, part);
    }
    __syncthreads();
    const float mean = contrast ? tdm_photo_mean(&draw, (int64_t)luma, (int64_t)box) : 0.0f;
    float *dst = x + (size_t)i * sample;
    for (int p = first + threadIdx.x; p < end; p += blockDim.x) {
      float out[4];
      tdm_photo_pixel(&augment, &draw, src, h, w, c, p / w, p % w, mean, out);
      if (augment.normalize) {
#pragma unroll
        for (int ch = 0; ch < C; ch++)
          out[ch] = affine_value(out[ch], augment.mul[ch], augment.add[ch]);
      }
#pragma unroll
      for (int ch = 0; ch < C; ch++)
        dst[(size_t)p * c + ch] = out[ch];
    }
    /* Nobody draws the next sample before all are done with this one's draws. */
    __syncthreads();
  }
}

extern "C" cudaError_t
tdm_k_gather_photo(float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
                   const int32_t *indices, int count, int h, int w, int c,
                   const TdmPhotoAugment *augment, uint64_t key, uint32_t epoch,
                   cudaStream_t stream)
{
  if (count <= 0)
    return cudaSuccess;
  if (h <= 0 || w <= 0 || c <= 0 || c > 4 || (size_t)h * w * c > INT32_MAX)
    return cudaErrorInvalidValue;
  /* Without contrast, parts of about 8192 pixels (8 a thread); with it, one part a
   * sample (each part would sum the whole box again). */
  int pixels = h * w;
  int parts = augment->jitter[1] > 0 ? 1 : (pixels + 8191) / 8192;
  if (parts > 64)
    parts = 64;
  unsigned rows = (unsigned)(count < 65535 ? count : 65535);
  dim3 grid((unsigned)parts, rows);
  if (c == 1)
    gather_photo_kernel<1><<<grid, PHOTO_THREADS, 0, stream>>>(x, y, images, labels, indices,
                                                               count, h, w, *augment, key, epoch);
  else if (c == 2)
    gather_photo_kernel<2><<<grid, PHOTO_THREADS, 0, stream>>>(x, y, images, labels, indices,
                                                               count, h, w, *augment, key, epoch);
  else if (c == 3)
    gather_photo_kernel<3><<<grid, PHOTO_THREADS, 0, stream>>>(x, y, images, labels, indices,
                                                               count, h, w, *augment, key, epoch);
  else
    gather_photo_kernel<4><<<grid, PHOTO_THREADS, 0, stream>>>(x, y, images, labels, indices,
                                                               count, h, w, *augment, key, epoch);
  return tdm_k_launched();
}
