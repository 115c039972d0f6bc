/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-network-catalogue.h — the built-in networks, in one table: their names, specs,
 * input sizes and the recipe each trains with. The spec parser expands the names, the
 * CLI lists them in --help, the window in its drop-down, tdm_config_apply_preset()
 * applies the recipes: a new preset is one entry here. Not the parser (tdm-network-spec.c),
 * nor the base recipe every run starts from (core's tdm-base-recipe.h: tdm_config_new()
 * reads it, and core cannot include model/); the recipes here are changes over it.
 */
#pragma once

#include <glib.h>
#include "tdm-config.h"

G_BEGIN_DECLS

typedef enum {
  TDM_RECIPE_NONE,         /* the run's own choices, from the base recipe (core's
                            * tdm-base-recipe.h, which tdm_config_new() reads) */
  TDM_RECIPE_RESNET9,      /* the fast BN ResNet recipe (tdm_config_apply_preset) */
  TDM_RECIPE_TORCHVISION,  /* fine-tuning torchvision's ResNets: 224 px, ImageNet's
                            * normalization, momentum SGD */
} TdmRecipe;

typedef struct {
  const char *name;        /* "cnn", "resnet18" */
  const char *title;       /* for menus, English (callers translate) */
  const char *summary;     /* one line, English (callers translate) */
  const char *spec;        /* for 10 classes; the head follows the dataset's count */
  int input_size;          /* the image side it is made for, 0: any */
  TdmRecipe recipe;
} TdmNetworkPreset;

/* Every preset, in the order menus show them; *count gets how many. */
const TdmNetworkPreset *tdm_network_presets (int *count);
/* The preset called name, or NULL. */
const TdmNetworkPreset *tdm_network_preset_find (const char *name);
/* The preset's spec with its head (its last fcN) giving `classes` outputs. */
char *tdm_network_preset_spec (const TdmNetworkPreset *preset, int classes);

/* Sets the recipe a built-in network is meant to train with (for "resnet": epochs,
 * batch, Nesterov SGD, weight decay on weights, warm-up and linear decay, label
 * smoothing, crop and flip); other networks leave config alone. Callers apply it when
 * the network is chosen, before any value the user gave. TRUE when it changed
 * anything. */
gboolean tdm_config_apply_preset (TdmConfig *config, const char *network);

G_END_DECLS
