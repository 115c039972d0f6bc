/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-checkpoint.h — safetensors files: named float32 tensors plus string metadata.
 *
 * The layout is safetensors': an 8-byte little-endian header length, a JSON header
 * ({"name": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}, …,
 * "__metadata__": {"key": "value", …}}), then the raw little-endian data. PyTorch's
 * safetensors loads the tensors. Files are written to a temporary file in the same
 * folder and renamed over the target, so a crash never leaves a partial checkpoint.
 * Not the trainer's policy of what goes in (tdm-trainer.c decides that).
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include "tdm-config.h"
#include "tdm-network.h"

G_BEGIN_DECLS

/* How a tensor's values are stored in its file; in memory they are floats either way. */
typedef enum {
  TDM_TENSOR_F32,
  TDM_TENSOR_I64,         /* PyTorch's counters (BN's num_batches_tracked) */
} TdmTensorType;

typedef struct {
  char *name;
  int rank;               /* dimensions used in shape */
  gint64 shape[4];
  TdmTensorType type;
  float *data;            /* element count = product of shape; of a loaded checkpoint,
                           * read-only and NULL until its values are asked for */
} TdmTensor;

typedef struct _TdmCheckpoint TdmCheckpoint;

TdmCheckpoint *tdm_checkpoint_new (void);
void tdm_checkpoint_free (TdmCheckpoint *ckpt);

/* Adds a tensor; data is copied. */
void tdm_checkpoint_add (TdmCheckpoint *ckpt, const char *name, int rank,
                         const gint64 *shape, const float *data);
void tdm_checkpoint_set_metadata (TdmCheckpoint *ckpt, const char *key, const char *value);

/* Writes atomically: to a hidden temporary ".NAME.XXXXXX" beside path, renamed over
 * it. A writer killed mid-save leaves its temporary behind; each save removes such
 * leftovers of the same checkpoint name, but never one a live writer still holds
 * (writers hold an flock on their temporary until it is renamed). */
gboolean tdm_checkpoint_save (TdmCheckpoint *ckpt, const char *path, GError **error);
/* Whether a checkpoint can be saved at path, found by doing what a save does first:
 * creating (and removing) the temporary file in its folder. For a run to refuse a
 * place it cannot write before any work, rather than at its first save. */
gboolean tdm_checkpoint_check_writable (const char *path, GError **error);
/* Reads and checks every header field against the file size. The file is mapped, not
 * copied: a tensor's values are read when asked for, so tensors nobody uses (a
 * state_dict's other heads, a hostile 3 GB entry) cost nothing. */
TdmCheckpoint *tdm_checkpoint_load (const char *path, GError **error);

/* The tensor's name, type and shape, its values not read (data may be NULL); NULL when
 * absent. For deciding whether a tensor is wanted before its values cost anything. */
const TdmTensor *tdm_checkpoint_find (TdmCheckpoint *ckpt, const char *name);
/* The tensor's values: straight from the mapping where the file's bytes are floats
 * as this machine stores them, else converted once (int64 counters, unaligned or
 * big-endian data). NULL with an error when memory for a conversion is lacking. */
const float *tdm_checkpoint_values (TdmCheckpoint *ckpt, const TdmTensor *tensor,
                                    GError **error);
/* find, then values: NULL when absent (or its values cannot be had). */
const TdmTensor *tdm_checkpoint_get (TdmCheckpoint *ckpt, const char *name);
const char *tdm_checkpoint_get_metadata (TdmCheckpoint *ckpt, const char *key);
int tdm_checkpoint_count (TdmCheckpoint *ckpt);
/* The index-th tensor in file order, with its values (as tdm_checkpoint_get). */
const TdmTensor *tdm_checkpoint_nth (TdmCheckpoint *ckpt, int index);
/* Its name alone: nothing is read. */
const char *tdm_checkpoint_nth_name (TdmCheckpoint *ckpt, int index);

/* A network's parameters and BN running statistics out of a checkpoint (PyTorch's
 * names and layouts) into params[net->parameter_count] and state[net->state_count]
 * (ours); in tdm-trainer-checkpoint.c, shared by the trainer's resume and the
 * classifier. */
gboolean tdm_checkpoint_read_parameters (TdmCheckpoint *ckpt, const TdmNetwork *net,
                                         const char *path, float *params, float *state,
                                         GError **error);

/* The same for starting from someone's weights (--init, or classifying with a
 * network and a state_dict): every tensor whose name and shape match is loaded; a
 * missing one keeps what params and state hold (skipped), and so does the head (the
 * last fc) when only its class count differs. Any other shape that differs is an
 * error, and so is a file that matches nothing. require_all: every tensor must load
 * (nothing to fall back on). *report (when not NULL) says how many loaded, which were
 * skipped and why, and how many of the file's tensors were not used. */
gboolean tdm_checkpoint_read_matching (TdmCheckpoint *ckpt, const TdmNetwork *net,
                                       const char *path, gboolean require_all,
                                       float *params, float *state, char **report,
                                       GError **error);

/* The largest magnitude a weight, statistic or optimizer state read from a file may
 * have: far beyond what any training of these networks makes (weights of a few units,
 * running variances of pixel values up to ~10⁵), and far enough below float's range
 * that a product of two such values with an activation still fits. Larger values are
 * refused by name, as NaN and infinities are, and negative running variances. */
#define TDM_CHECKPOINT_MAX_VALUE 1e12f

/* Each BN layer's num_batches_tracked in the file, by layer index (tracked[layer_count]),
 * −1 where there is none or it is not a whole number ≥ 0. */
void tdm_checkpoint_read_tracked (TdmCheckpoint *ckpt, const TdmNetwork *net,
                                  gint64 *tracked);

/* Where the dataset setting `dataset` is (tdm-checkpoint-dataset.c): its folder's
 * absolute path ("dataset_path") and its path from the folder of the checkpoint to be
 * written at checkpoint_path ("dataset_relative"); nothing for a built-in set. */
void tdm_checkpoint_set_dataset_place (TdmCheckpoint *ckpt, const char *checkpoint_path,
                                       const char *dataset);
/* The dataset of a checkpoint read from checkpoint_path, found again for a resume:
 * config->dataset (the checkpoint's configuration) becomes the first of the recorded
 * absolute folder, the recorded relative one from where the checkpoint is now, and the
 * setting as saved, that exists. None existing is an error (TDM_ENGINE_ERROR_DATASET)
 * naming the places tried and --dataset. A built-in set is left alone. */
gboolean tdm_checkpoint_find_dataset (TdmCheckpoint *ckpt, const char *checkpoint_path,
                                      TdmConfig *config, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmCheckpoint, tdm_checkpoint_free)

G_END_DECLS
