/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config-controls.c — the training controls of the configuration: the monitored
 * metric (early stopping, the best checkpoint, the plateau schedule), gradient
 * accumulation and clipping, photo augmentation; the rules between them and other
 * fields (each one's own range is its row's, tdm-config-fields.c), their names, how a
 * file from before them reads, and the schedules' learning rate and momentum at a
 * point of the run. What the trainer does with them is the trainer's.
 */
#include "tdm-config.h"
#include "tdm-config-private.h"
#include "tdm-choice.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <math.h>

/* The names are the GEnums' nicks (tdm-choice.h). */
TDM_CHOICE_NAMES(TdmMonitor, tdm_monitor, TDM_TYPE_MONITOR)

int
tdm_config_step_batch(const TdmConfig *c)
{
  return c->batch * MAX(c->accumulate, 1);
}

gboolean
tdm_config_monitors_validation(const TdmConfig *c)
{
  return c->monitor == TDM_MONITOR_VAL_LOSS || c->monitor == TDM_MONITOR_VAL_ACCURACY;
}

gboolean
tdm_config_monitor_improves(const TdmConfig *c, double value, double best)
{
  if (!isfinite(value))
    return FALSE;
  if (isnan(best))
    return TRUE;
  gboolean loss = c->monitor == TDM_MONITOR_VAL_LOSS || c->monitor == TDM_MONITOR_TEST_LOSS;
  gboolean down = c->monitor_mode == TDM_MONITOR_MODE_MIN ||
                  (c->monitor_mode == TDM_MONITOR_MODE_AUTO && loss);
  return down ? value < best - c->min_delta : value > best + c->min_delta;
}

const char *
tdm_config_watcher(const TdmConfig *c)
{
  if (c->early_stop > 0)
    return "--early-stop";
  if (c->save_best_path != NULL)
    return "--save-best";
  if (c->schedule == TDM_SCHEDULE_PLATEAU)
    return "--schedule plateau";
  return NULL;
}

gboolean
tdm_controls_config_validate(const TdmConfig *c, GError **error)
{
  const char *who = tdm_config_watcher(c);
  if (who != NULL && tdm_config_monitors_validation(c) && c->val_split <= 0)
    return invalid(error, _("%s: watches %s (--monitor), which needs --val-split; or "
                            "--monitor test_loss or test_accuracy to watch the test set"),
                   who, tdm_monitor_name(c->monitor));
  if (c->schedule == TDM_SCHEDULE_ONECYCLE && c->warmup_epochs > 0)
    return invalid(error, _("--warmup %g: the onecycle schedule warms up by itself (its "
                            "first 30 %%); leave --warmup out"), c->warmup_epochs);
  if ((gint64)c->batch * c->accumulate > G_MAXINT / 2)
    return invalid(error, _("--accumulate %d: with --batch %d the step's batch is too large"),
                   c->accumulate, c->batch);
  gboolean cropping = c->crop_scale[0] != 0 || c->crop_scale[1] != 0;
  if (cropping && !(c->crop_scale[0] > 0 && c->crop_scale[0] <= c->crop_scale[1]))
    return invalid(error, _("--resized-crop %g,%g: give the smallest and largest share of "
                            "the image's area, 0 < A ≤ B ≤ 1, e.g. 0.08,1"),
                   c->crop_scale[0], c->crop_scale[1]);
  if (cropping && c->crop_pad > 0)
    return invalid(error, _("--resized-crop %g,%g: not with --crop %d; choose one kind of "
                            "crop"), c->crop_scale[0], c->crop_scale[1], c->crop_pad);
  if (c->crop_ratio[0] > c->crop_ratio[1])
    return invalid(error, _("--resized-crop-ratio %g,%g: give the narrowest and widest aspect "
                            "ratio, 0 < A ≤ B ≤ 100, e.g. 0.75,1.333"),
                   c->crop_ratio[0], c->crop_ratio[1]);
  return TRUE;
}

void
tdm_controls_config_from_json(JsonObject *o, TdmConfig *c)
{
  /* Runs from before the monitor watched validation accuracy, at any gain. */
  if ((c->early_stop > 0 || c->save_best_path != NULL) && !json_object_has_member(o, "monitor")) {
    c->monitor = TDM_MONITOR_VAL_ACCURACY;
    c->monitor_mode = TDM_MONITOR_MODE_MAX;
    c->min_delta = 0;
  }
}

/* From `start` to `end` along half a cosine, at x in [0, 1] (PyTorch's annealing). */
static double
anneal(double start, double end, double x)
{
  return end + (start - end) / 2 * (1 + cos(G_PI * CLAMP(x, 0.0, 1.0)));
}

/* The one-cycle schedule's share of the run that rises, and its divisors. */
#define ONECYCLE_RISE 0.3
#define ONECYCLE_DIV 25.0
#define ONECYCLE_FINAL_DIV 1e4

double
tdm_config_lr_at(const TdmConfig *c, double epoch)
{
  g_return_val_if_fail(c != NULL, 0.0);

  if (epoch < 0)
    epoch = 0;
  if (c->schedule == TDM_SCHEDULE_ONECYCLE) {
    double x = c->epochs > 0 ? MIN(1.0, epoch / c->epochs) : 1.0;
    double low = c->lr / ONECYCLE_DIV;
    if (x < ONECYCLE_RISE)
      return anneal(low, c->lr, x / ONECYCLE_RISE);
    return anneal(c->lr, low / ONECYCLE_FINAL_DIV, (x - ONECYCLE_RISE) / (1 - ONECYCLE_RISE));
  }
  /* Warm-up: linear from lr/10 (a first step at lr 0 would be wasted) to lr. */
  double warm = c->warmup_epochs > 0 ? c->warmup_epochs : 0;
  if (warm > 0 && epoch < warm)
    return c->lr * (0.1 + 0.9 * epoch / warm);
  /* The decays run over what is left after the warm-up, held at 0 past the end
   * rather than rising again. */
  double span = c->epochs - warm;
  double progress = span > 0 ? MIN(1.0, (epoch - warm) / span) : 1.0;
  switch (c->schedule) {
  case TDM_SCHEDULE_STEP:
    if (c->step_epochs < 1)
      return c->lr;
    return c->lr * pow(c->gamma, floor(epoch / c->step_epochs));
  case TDM_SCHEDULE_COSINE:
    if (c->epochs < 1)
      return c->lr;
    return c->lr * 0.5 * (1.0 + cos(G_PI * progress));
  case TDM_SCHEDULE_LINEAR:
    if (c->epochs < 1)
      return c->lr;
    return c->lr * (1.0 - progress);
  case TDM_SCHEDULE_CONSTANT:
  case TDM_SCHEDULE_PLATEAU:
  case TDM_SCHEDULE_ONECYCLE:
  default:
    return c->lr;
  }
}

double
tdm_config_momentum_at(const TdmConfig *c, double epoch)
{
  g_return_val_if_fail(c != NULL, NAN);
  if (c->schedule != TDM_SCHEDULE_ONECYCLE || c->optimizer == TDM_OPTIMIZER_SGD)
    return NAN;
  double x = c->epochs > 0 ? CLAMP(epoch / c->epochs, 0.0, 1.0) : 1.0;
  if (x < ONECYCLE_RISE)
    return anneal(0.95, 0.85, x / ONECYCLE_RISE);
  return anneal(0.85, 0.95, (x - ONECYCLE_RISE) / (1 - ONECYCLE_RISE));
}
