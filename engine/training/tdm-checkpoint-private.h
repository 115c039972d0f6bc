/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-checkpoint-private.h — what the checkpoint readers share: the safetensors
 * reader (tdm-checkpoint.c) hands a file in PyTorch's zip format to the .pth reader
 * (tdm-checkpoint-pth.c), which fills a TdmCheckpoint the same way. Not for use
 * outside the two.
 */
#pragma once

#include "tdm-checkpoint.h"

#include <gio/gio.h>

G_BEGIN_DECLS

/* Reads a tensor's values when they are first asked for: a new buffer of its element
 * count, or NULL with an error naming the file and the tensor. */
typedef float *(*TdmTensorReader) (gpointer source, GError **error);

/* Adds a tensor whose values read(source) gives when first asked for; source_free
 * frees source with the checkpoint. A second tensor of the same name replaces the
 * first in its place. */
void tdm_checkpoint_take_reader (TdmCheckpoint *ckpt, const char *name, int rank,
                                 const gint64 *shape, TdmTensorType type,
                                 TdmTensorReader read, gpointer source,
                                 GDestroyNotify source_free);

/* Whether bytes[size] begin as a zip archive does (torch.save's format since 1.6). */
gboolean tdm_checkpoint_is_pth (const guint8 *bytes, gsize size);

/* The state_dict torch.save wrote to path, mapped as file (a reference is kept while
 * a tensor may still be read): every tensor under its state_dict name, its values
 * read as float32 when asked for, no metadata. Errors (TDM_ENGINE_ERROR_CHECKPOINT)
 * name path and what is wrong. */
TdmCheckpoint *tdm_checkpoint_parse_pth (const char *path, GMappedFile *file,
                                         GError **error);

G_END_DECLS
