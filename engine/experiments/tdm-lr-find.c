/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-lr-find.c — the range test's rules (tdm-lr-find.h): its options' checks, the
 * suggestion read from the points, the points as CSV. The training and the points'
 * smoothing are the experiment's (tdm-experiment-lr-find.c).
 */
#include "tdm-lr-find.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <math.h>

gboolean
tdm_lr_find_check(const TdmLrFindOptions *o, GError **error)
{
  if (!(o->lr_first > 0) || !(o->lr_first < o->lr_last) || !isfinite(o->lr_last)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("the learning-rate range %g to %g is not a range: give the first rate "
                  "above 0 and below the last, e.g. 1e-7 to 10"),
                o->lr_first, o->lr_last);
    return FALSE;
  }
  if (o->steps < TDM_LR_FIND_STEPS_MIN || o->steps > TDM_LR_FIND_STEPS_MAX) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("%d steps cannot trace a learning-rate range: give %d to %d"), o->steps,
                TDM_LR_FIND_STEPS_MIN, TDM_LR_FIND_STEPS_MAX);
    return FALSE;
  }
  return TRUE;
}

double
tdm_lr_find_suggest(const TdmLrFindPoint *p, int count)
{
  g_return_val_if_fail(p != NULL || count == 0, NAN);
  /* Up to the lowest smoothed loss; the first tenth is the average settling. */
  int lowest = -1;
  for (int i = 0; i < count; i++)
    if (isfinite(p[i].smoothed) && (lowest < 0 || p[i].smoothed < p[lowest].smoothed))
      lowest = i;
  int first = count / 10;
  if (lowest < 0 || lowest - first < 2)
    return NAN;
  /* The steepest fall against log(lr), by differences between neighbours. */
  int best = -1;
  double steepest = 0;
  for (int i = first + 1; i <= lowest; i++) {
    double run = log(p[i].lr) - log(p[i - 1].lr);
    if (!(run > 0))
      continue;
    double slope = (p[i].smoothed - p[i - 1].smoothed) / run;
    if (slope < steepest) {
      steepest = slope;
      best = i;
    }
  }
  return best >= 0 ? p[best].lr : NAN;
}

char *
tdm_lr_find_to_csv(const TdmLrFindPoint *p, int count)
{
  GString *csv = g_string_new("step,lr,loss,smoothed_loss\n");
  char lr[G_ASCII_DTOSTR_BUF_SIZE], loss[G_ASCII_DTOSTR_BUF_SIZE],
      smoothed[G_ASCII_DTOSTR_BUF_SIZE];
  for (int i = 0; i < count; i++)
    g_string_append_printf(csv, "%d,%s,%s,%s\n", p[i].step,
                           g_ascii_formatd(lr, sizeof lr, "%.6g", p[i].lr),
                           g_ascii_formatd(loss, sizeof loss, "%.6g", p[i].loss),
                           g_ascii_formatd(smoothed, sizeof smoothed, "%.6g", p[i].smoothed));
  return g_string_free(csv, FALSE);
}
