/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-base-recipe.c — each optimizer's starting rate (tdm-base-recipe.h). A change
 * here is a change of the default: the schema's (data/, checked by test-choice) must
 * follow. */
#include "tdm-base-recipe.h"

/* By optimizer: the rates their usual recipes start from. */
static const double lr[] = {
  [TDM_OPTIMIZER_SGD] = 0.01,
  [TDM_OPTIMIZER_MOMENTUM] = 0.01,
  [TDM_OPTIMIZER_ADAM] = 1e-3,
  [TDM_OPTIMIZER_NESTEROV] = 0.1,
};

double
tdm_base_recipe_lr(TdmOptimizerKind optimizer)
{
  /* An optimizer without a rate here is a table to complete (test-choice checks). */
  g_return_val_if_fail((guint)optimizer < G_N_ELEMENTS(lr), 0.0);
  return lr[optimizer];
}
