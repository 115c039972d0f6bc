/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-finetune-group.h: the form's choices for starting from someone else's weights:
 * the weights file ("Start from weights…", with what of it would load), which part
 * stays frozen, and how inputs are normalized. They go into a TdmConfig as
 * --init, --freeze / --train head and --normalize do. Not the network drop-down
 * (TdmRunForm's).
 */
#pragma once

#include <adwaita.h>

#include "tdm-config.h"
#include "tdm-form-enum-types.h"

G_BEGIN_DECLS

#define TDM_TYPE_FINETUNE_GROUP (tdm_finetune_group_get_type ())

G_DECLARE_FINAL_TYPE (TdmFinetuneGroup, tdm_finetune_group, TDM, FINETUNE_GROUP,
                      AdwPreferencesGroup)

/* What the choices are: the freeze modes and the normalizations, in the order the
 * rows list them. GEnums (tdm-form-enum-types.h, glib-mkenums): their nicks are the
 * settings' names, "freeze" and "normalize" (tdm-choice.h reads them). */
typedef enum
{
  TDM_FREEZE_CHOICE_NONE,
  TDM_FREEZE_CHOICE_BACKBONE,  /*< nick=head >*/ /* train the head only */
  TDM_FREEZE_CHOICE_CUSTOM,    /* the prefixes typed */
} TdmFreezeChoice;

typedef enum
{
  TDM_NORMALIZE_CHOICE_AUTO,   /* the network's recipe: ImageNet's for torchvision's */
  TDM_NORMALIZE_CHOICE_NONE,
  TDM_NORMALIZE_CHOICE_DATASET,
  TDM_NORMALIZE_CHOICE_IMAGENET,
} TdmNormalizeChoice;

/* The weights file (NULL: random initialization, as without --init). */
void        tdm_finetune_group_set_weights  (TdmFinetuneGroup *self,
                                             const char       *path);
const char *tdm_finetune_group_get_weights  (TdmFinetuneGroup *self);

/* The network the weights would be loaded into (a preset's name or a spec) and its
 * input and class count; the load report is worked out again, off the main thread. */
void        tdm_finetune_group_set_network  (TdmFinetuneGroup *self,
                                             const char       *network,
                                             int               height,
                                             int               width,
                                             int               channels,
                                             int               classes);

/* Property "report": what the weights would give the network (the engine's report:
 * loaded, skipped and why), or NULL while there is none or it is being worked out;
 * "error": why they cannot be loaded into it, or NULL. */
const char *tdm_finetune_group_get_report   (TdmFinetuneGroup *self);
/* The load report row's title (what loads, reading, waiting for a network, or why
 * not); NULL while no weights are chosen. */
const char *tdm_finetune_group_get_status   (TdmFinetuneGroup *self);
const char *tdm_finetune_group_get_error    (TdmFinetuneGroup *self);

void        tdm_finetune_group_set_freeze   (TdmFinetuneGroup *self,
                                             TdmFreezeChoice   choice,
                                             const char       *prefixes);
void        tdm_finetune_group_set_normalize (TdmFinetuneGroup  *self,
                                              TdmNormalizeChoice choice);

/* Puts the choices in config (after tdm_config_apply_preset(), whose normalization
 * an explicit choice replaces). */
void        tdm_finetune_group_apply        (TdmFinetuneGroup *self,
                                             TdmConfig        *config);

G_END_DECLS
