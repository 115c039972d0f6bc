/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-pickle.h — the tensors of a PyTorch state_dict, read from the pickle that
 * torch.save writes (data.pkl in a .pth archive) without running anything.
 *
 * A pickle is a program for a small stack machine, and Python's unpickler calls
 * whatever the program names. This one calls nothing: it knows the opcodes a
 * state_dict's pickle uses (protocols 2 to 4: containers, numbers, strings, the memo,
 * persistent ids) and a short list of globals, each of which it understands rather
 * than calls: collections.OrderedDict, torch._utils._rebuild_tensor_v2 (and
 * _rebuild_tensor, _rebuild_parameter) and the storage classes torch.FloatStorage,
 * HalfStorage, BFloat16Storage, DoubleStorage, LongStorage (and the other storage
 * classes, named so a tensor of them can be refused by type). BUILD is accepted only
 * to give an OrderedDict its `_metadata`. Any other opcode or global, a REDUCE of
 * anything else, a persistent id that is not a storage, and every size past its
 * bound stop the reading with a message that names it. Values are never walked
 * recursively, so neither depth nor a cycle through the memo can exhaust the stack;
 * depth is bounded all the same. Not the archive (tdm-zip.h) and not the tensors'
 * bytes (tdm-checkpoint-pth.c).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Bounds: a ResNet-50's state_dict pickle is about 30 KB of 3,000 values. */
#define TDM_PICKLE_MAX_BYTES (64 << 20)
#define TDM_PICKLE_MAX_VALUES (1 << 22)
#define TDM_PICKLE_MAX_DEPTH 64
#define TDM_PICKLE_MAX_RANK 8

typedef enum {
  TDM_PICKLE_FLOAT32,
  TDM_PICKLE_FLOAT16,
  TDM_PICKLE_BFLOAT16,
  TDM_PICKLE_FLOAT64,
  TDM_PICKLE_INT64,
  TDM_PICKLE_UNSUPPORTED,       /* another storage class: named in storage_class */
} TdmPickleDtype;

/* One tensor of the state_dict: a view of a storage, which is the archive's entry
 * data/<storage_key> of storage_numel elements. */
typedef struct {
  char *name;
  TdmPickleDtype dtype;
  const char *storage_class;    /* "FloatStorage", … (static) */
  char *storage_key;
  gint64 storage_numel;
  gint64 offset;                /* in elements */
  int rank;
  gint64 shape[TDM_PICKLE_MAX_RANK];
  gint64 stride[TDM_PICKLE_MAX_RANK];
} TdmPickleTensor;

/* Bytes of one element of dtype (0 for UNSUPPORTED). */
int tdm_pickle_dtype_size (TdmPickleDtype dtype);

/* The tensors of the state_dict pickled in data[size], in the pickle's order (a name
 * given twice keeps its last tensor, as a dict would). The state_dict is the pickle's
 * top-level dict, or a dict under its "state_dict", "model" or "model_state_dict" key
 * (the usual training checkpoints); entries that are not tensors are left out.
 * Errors (TDM_ENGINE_ERROR_CHECKPOINT) name the opcode, global or bound at fault and
 * the byte where it was met. */
GPtrArray *tdm_pickle_read_state_dict (const guint8 *data, gsize size, GError **error);

G_END_DECLS
