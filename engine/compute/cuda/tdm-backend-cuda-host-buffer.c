/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-host-buffer.c — host memory kept and grown
 * (tdm-backend-cuda-host-buffer.h). */
#include "tdm-backend-cuda-host-buffer.h"

#include <cuda_runtime.h>

void *
tdm_host_buffer_take(TdmHostBuffer *buffer, size_t bytes)
{
  if (buffer->data != NULL && buffer->bytes >= bytes)
    return buffer->data;
  tdm_host_buffer_release(buffer);
  buffer->pinned = cudaHostAlloc(&buffer->data, bytes, cudaHostAllocDefault) == cudaSuccess;
  if (!buffer->pinned) {
    (void)cudaGetLastError();
    buffer->data = g_try_malloc(bytes);
  }
  buffer->bytes = buffer->data != NULL ? bytes : 0;
  return buffer->data;
}

void
tdm_host_buffer_release(TdmHostBuffer *buffer)
{
  if (buffer->pinned && buffer->data != NULL)
    (void)cudaFreeHost(buffer->data);
  else
    g_free(buffer->data);
  *buffer = (TdmHostBuffer){0};
}
