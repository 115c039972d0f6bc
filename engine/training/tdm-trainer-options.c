/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-trainer-options.c — the rows of TdmTrainerOptions (tdm-trainer.h): each option's
 * default and range, so a trainer starts from the defaults and a run checks them all by
 * the field table's one rule (tdm-field.h). What each option does is where the trainer
 * acts on it: the loop (tdm-trainer.c), the step, the set-up, the pre-warm.
 */
#include "tdm-trainer-private.h"
#include "tdm-error.h"
#include "tdm-i18n.h"
#include "tdm-training-enum-types.h"

#define AT(member) offsetof(TdmTrainerOptions, member)

static const TdmField fields[] = {
  {.key = "step_detail", .type = TDM_FIELD_BOOL, .offset = AT(step_detail), .fallback = "true"},
  {.key = "prewarm", .type = TDM_FIELD_CHOICE, .offset = AT(prewarm),
   .choices = tdm_prewarm_get_type, .fallback = "auto"},
  {.key = "summary_steps", .type = TDM_FIELD_INT, .offset = AT(summary_steps), .min = 0,
   .max = G_MAXINT},
  {.key = "summary_parts", .type = TDM_FIELD_INT, .offset = AT(summary_parts), .min = 0,
   .max = G_MAXINT},
  /* Rates, or 0 while the range test is off. */
  {.key = "lr_range", .type = TDM_FIELD_NUMBERS, .offset = AT(lr_range), .count = 2,
   .min = 0, .max = G_MAXDOUBLE, .flags = TDM_FIELD_MIN_OPEN | TDM_FIELD_ZERO_OFF},
  {.key = "lr_range_steps", .type = TDM_FIELD_INT, .offset = AT(lr_range_steps), .min = 0,
   .max = G_MAXINT},
  {.key = "batch_fits", .type = TDM_FIELD_BOOL, .offset = AT(batch_fits)},
};

TdmTrainerOptions *
tdm_trainer_options(TdmTrainer *t)
{
  g_return_val_if_fail(t != NULL, NULL);
  return &t->options;
}

void
tdm_trainer_init_options(TdmTrainer *t)
{
  tdm_fields_init(fields, G_N_ELEMENTS(fields), &t->options);
}

gboolean
tdm_trainer_check_options(TdmTrainer *t, GError **error)
{
  if (!tdm_fields_check(fields, G_N_ELEMENTS(fields), &t->options, error))
    return FALSE;
  /* A range test needs both rates (the rows allow 0 for "off"). */
  const TdmTrainerOptions *o = &t->options;
  if (o->lr_range_steps > 0 && !(o->lr_range[0] > 0 && o->lr_range[1] > 0))
    return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION,
                         /* Translators: lr_range is the option's name, as is */
                         _("lr_range: a range test of %d steps needs two rates above 0"),
                         o->lr_range_steps);
  return TRUE;
}
