/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-checkpoint-private.h — what the checkpoint readers share: the safetensors
 * reader (tdm-checkpoint.c) hands a file in PyTorch's zip format to the .pth reader
 * (tdm-checkpoint-pth.c), which fills a TdmCheckpoint the same way. Not for use
 * outside the two.
 */
#pragma once

#include "tdm-checkpoint.h"

G_BEGIN_DECLS

/* Adds a tensor, taking ownership of data (element count = product of shape); a
 * second tensor of the same name replaces the first in its place. */
void tdm_checkpoint_take (TdmCheckpoint *ckpt, const char *name, int rank,
                          const gint64 *shape, float *data);

/* Whether bytes[size] begin as a zip archive does (torch.save's format since 1.6). */
gboolean tdm_checkpoint_is_pth (const guint8 *bytes, gsize size);

/* The state_dict torch.save wrote to path, whose contents are bytes[size]: every
 * tensor as float32 under its state_dict name, no metadata. Errors
 * (TDM_ENGINE_ERROR_CHECKPOINT) name path and what is wrong. */
TdmCheckpoint *tdm_checkpoint_parse_pth (const char *path, const guint8 *bytes, gsize size,
                                         GError **error);

G_END_DECLS
