/* gather.cu — a training batch from the uint8 dataset resident on the device.
 *
 * x[i, :] = images[indices[i], :] · scale as float32 and y[i] = labels[indices[i]]
 * (y may be NULL):
 * the only per-step input is the int32 index list, so the host never touches
 * pixels during training. Not a data loader: shuffling and sharding are the
 * iterator's, and the dataset is already in HWC order.
 */
#include "tdm-kernels.h"
#include "common.cuh"

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
