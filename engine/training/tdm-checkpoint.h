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

typedef struct {
  char *name;
  int rank;               /* dimensions used in shape */
  gint64 shape[4];
  float *data;            /* element count = product of shape */
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
/* Reads and checks every header field against the file size. */
TdmCheckpoint *tdm_checkpoint_load (const char *path, GError **error);

/* NULL when absent. */
const TdmTensor *tdm_checkpoint_get (TdmCheckpoint *ckpt, const char *name);
const char *tdm_checkpoint_get_metadata (TdmCheckpoint *ckpt, const char *key);
int tdm_checkpoint_count (TdmCheckpoint *ckpt);
const TdmTensor *tdm_checkpoint_nth (TdmCheckpoint *ckpt, int index);

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
