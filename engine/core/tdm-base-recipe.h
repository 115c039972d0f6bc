/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-base-recipe.h — the base recipe: what a run trains with when nothing is chosen
 * (Chainer's MNIST example: Fashion-MNIST, mlp, batch 100, 20 epochs, Adam), and the
 * learning rate each optimizer starts from. One table, read by tdm_config_new(), the
 * CLI's help, the window's form and, through a test, the GSettings schema's defaults.
 * The built-in networks' own recipes are changes over it (tdm-network-catalogue.h, in
 * model/: core cannot include it, so the base sits here where both reach it). Not
 * the settings a run has no choice for in the window (momentum, Adam's betas…): those
 * stay in tdm_config_new().
 */
#pragma once

#include <glib.h>
#include "tdm-config.h"

G_BEGIN_DECLS

typedef struct {
  const char *dataset;          /* a dataset name or folder */
  const char *network;          /* a built-in network's name or a spec */
  int batch;                    /* global, split across the devices */
  int epochs;
  TdmOptimizerKind optimizer;   /* its learning rate: tdm_base_recipe_lr() */
  TdmStrategy strategy;
  TdmBatchNorm batchnorm;
} TdmBaseRecipe;

const TdmBaseRecipe *tdm_base_recipe (void);
/* The learning rate an optimizer starts from when none is given: 0.01 for SGD and
 * momentum, 0.001 for Adam, 0.1 for Nesterov. */
double tdm_base_recipe_lr (TdmOptimizerKind optimizer);

G_END_DECLS
