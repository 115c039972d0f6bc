/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-finetune.h — starting a run from someone else's weights: the per-channel input
 * normalization, which layers are frozen, the learning-rate factors of parts of the
 * network, and the configuration's fields for them in JSON. Loading the weights
 * themselves is tdm_checkpoint_read_matching() (tdm-checkpoint.h). Not the trainer.
 *
 * Names are module paths (tdm-network.h's layer names: "conv1", "layer2.0.bn1",
 * "layer2.0.downsample", "fc"); a prefix selects a module and everything inside it:
 * "layer2" is layer2.0.conv1 … but not layer20.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include "tdm-backend.h"
#include "tdm-config.h"
#include "tdm-dataset.h"
#include "tdm-network.h"

G_BEGIN_DECLS

/* ImageNet's statistics, as torchvision's models were trained with them (grey
 * inputs take their means). */
#define TDM_IMAGENET_MEAN {0.485f, 0.456f, 0.406f}
#define TDM_IMAGENET_STD {0.229f, 0.224f, 0.225f}

/* What config->normalize asks for, for inputs of `channels` channels: *enabled FALSE
 * for none; else mean and std (of pixel values in [0, 1]) per channel, "dataset"
 * computed from train's images. Errors name --normalize and what is wrong. */
gboolean tdm_normalize_resolve (const char *setting, const TdmDataset *train, int channels,
                                gboolean *enabled, float *mean, float *std,
                                GError **error);
/* (x − mean) / std as the backend's channel_affine, for x already scaled to [0, 1]. */
TdmChannelAffine tdm_normalize_affine (int channels, const float *mean, const float *std);
/* "M,M,M/S,S,S", the form --normalize takes: for checkpoints' metadata. */
char *tdm_normalize_format (int channels, const float *mean, const float *std);

/* The file --init names: init itself, or for "torchvision" the file torchvision keeps
 * its download of `network`'s ImageNet weights in (resnet18, resnet34, resnet50:
 * resnet18-f37072fd.pth and the like in torch.hub's checkpoints folder, $TORCH_HOME
 * or ~/.cache/torch). An error (TDM_ENGINE_ERROR_INVALID_OPTION) names the file and
 * where to put it when it is not there, or says which networks have such weights. */
char *tdm_finetune_init_file (const char *init, const char *network, GError **error);
/* Where torch.hub keeps downloaded weights: $TORCH_HOME/hub/checkpoints, else
 * ${XDG_CACHE_HOME:-~/.cache}/torch/hub/checkpoints (whether it exists or not). */
char *tdm_finetune_torch_checkpoints_folder (void);

/* What --init FILE would load into net, without training or touching anything:
 * tdm_checkpoint_read_matching()'s report (how many tensors load, which are skipped
 * and why, how many of the file's go unused), or its error (TDM_ENGINE_ERROR_CHECKPOINT
 * and the like, naming path): for the window, to show before a run what a run would
 * say when it starts. Reads the whole file: call it off the main thread. */
char *tdm_finetune_init_report (const TdmNetwork *net, const char *path, GError **error);

/* Per layer of net, the factor its parameters' learning rate is multiplied by: 0 for
 * frozen layers (config->freeze, config->train_head), else the last matching
 * config->lr_scale's X, else 1. *first_trained gets the lowest index of a layer with
 * parameters that trains (the backward pass stops there). A prefix that names no
 * layer, a malformed PREFIX=X, or a frozen layer above a trained one (its gradient
 * would pass through a frozen BN) is an error naming the option. */
gboolean tdm_finetune_layer_scales (const TdmNetwork *net, const TdmConfig *config,
                                    float *scales, int *first_trained, GError **error);
/* Whether any layer is frozen or scaled. */
gboolean tdm_finetune_active (const TdmConfig *config);


G_END_DECLS
