/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-base-recipe.h — the learning rate each optimizer starts from when none is given:
 * the one default that depends on another choice. The other defaults are the field
 * table's (tdm-config-fields.c); tdm_config_new(), the CLI's "another optimizer
 * without --lr" rule and the window's form (a new optimizer's rate) read this one.
 */
#pragma once

#include <glib.h>
#include "tdm-config.h"

G_BEGIN_DECLS

/* 0.01 for SGD and momentum, 0.001 for Adam, 0.1 for Nesterov. */
double tdm_base_recipe_lr (TdmOptimizerKind optimizer);

G_END_DECLS
