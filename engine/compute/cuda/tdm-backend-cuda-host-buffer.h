/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-host-buffer.h — host memory kept from one use to the next and grown
 * when a larger use comes: pinned where the driver grants it (copies to and from the
 * device then run at the bus's rate, not through the driver's staging of pageable
 * memory; a failed pinning sets no error), else pageable. The convolution engine's
 * screens read their references' results back into one (tdm-backend-cuda-conv-engine.c):
 * pinning and unpinning hundreds of megabytes costs more than reading them back. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  void *data;
  size_t bytes;
  gboolean pinned;
} TdmHostBuffer;

/* At least `bytes` of host memory: the buffer's as it is where it is large enough, else
 * made anew; NULL where neither pinned nor pageable memory can be had. */
void *tdm_host_buffer_take (TdmHostBuffer *buffer, size_t bytes);
/* Gives the memory back; the buffer is empty and can be taken again. */
void tdm_host_buffer_release (TdmHostBuffer *buffer);

G_END_DECLS
