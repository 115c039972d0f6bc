/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config-controls.c — the training controls of the configuration: the monitored
 * metric (early stopping, the best checkpoint, the plateau schedule), gradient
 * accumulation and clipping, photo augmentation; their checks, names and JSON (only
 * when set, optional when read), and the schedules' learning rate and momentum at a
 * point of the run. What the trainer does with them is the trainer's.
 */
#include "tdm-config.h"
#include "tdm-config-private.h"
#include "tdm-choice.h"
#include "tdm-error.h"
#include "tdm-i18n.h"
#include "tdm-json.h"

#include <math.h>

const char *
tdm_monitor_name(TdmMonitor monitor)
{
  return tdm_choice_name(TDM_TYPE_MONITOR, (int)monitor);
}

gboolean
tdm_monitor_from_name(const char *name, TdmMonitor *monitor)
{
  int v;
  if (!tdm_choice_from_name(TDM_TYPE_MONITOR, name, &v))
    return FALSE;
  *monitor = (TdmMonitor)v;
  return TRUE;
}

const char *
tdm_monitor_mode_name(TdmMonitorMode mode)
{
  return tdm_choice_name(TDM_TYPE_MONITOR_MODE, (int)mode);
}

gboolean
tdm_monitor_mode_from_name(const char *name, TdmMonitorMode *mode)
{
  int v;
  if (!tdm_choice_from_name(TDM_TYPE_MONITOR_MODE, name, &v))
    return FALSE;
  *mode = (TdmMonitorMode)v;
  return TRUE;
}

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

/* What needs a monitored metric, for messages: the first of them that is set. */
static const char *
watcher(const TdmConfig *c)
{
  if (c->early_stop > 0)
    return "--early-stop";
  if (c->save_best_path != NULL)
    return "--save-best";
  if (c->schedule == TDM_SCHEDULE_PLATEAU)
    return "--schedule plateau";
  return NULL;
}

static gboolean
range_ok(const double *range, double low, double high)
{
  return isfinite(range[0]) && isfinite(range[1]) && range[0] > low && range[0] <= range[1] &&
         range[1] <= high;
}

gboolean
tdm_controls_config_validate(const TdmConfig *c, GError **error)
{
  if ((unsigned)c->monitor > TDM_MONITOR_TEST_ACCURACY)
    return invalid(error, _("--monitor: unknown metric %d"), (int)c->monitor);
  if ((unsigned)c->monitor_mode > TDM_MONITOR_MODE_MAX)
    return invalid(error, _("--monitor-mode: unknown mode %d"), (int)c->monitor_mode);
  if (!isfinite(c->min_delta) || c->min_delta < 0)
    return invalid(error, _("--min-delta %g: give 0 or a positive change"), c->min_delta);
  const char *who = watcher(c);
  if (who != NULL && tdm_config_monitors_validation(c) && c->val_split <= 0)
    return invalid(error, _("%s: watches %s (--monitor), which needs --val-split; or "
                            "--monitor test_loss or test_accuracy to watch the test set"),
                   who, tdm_monitor_name(c->monitor));
  if (c->plateau_patience < 0 || c->plateau_patience > 10000)
    return invalid(error, _("--plateau-patience %d: give 0 to 10000 epochs"),
                   c->plateau_patience);
  if (c->schedule == TDM_SCHEDULE_ONECYCLE && c->warmup_epochs > 0)
    return invalid(error, _("--warmup %g: the onecycle schedule warms up by itself (its "
                            "first 30 %%); leave --warmup out"), c->warmup_epochs);
  if (c->accumulate < 1 || c->accumulate > 4096)
    return invalid(error, _("--accumulate %d: give the micro-batches an optimizer step, 1 "
                            "to 4096"), c->accumulate);
  if ((gint64)c->batch * c->accumulate > G_MAXINT / 2)
    return invalid(error, _("--accumulate %d: with --batch %d the step's batch is too large"),
                   c->accumulate, c->batch);
  if (!isfinite(c->clip_grad_norm) || c->clip_grad_norm < 0)
    return invalid(error, _("--clip-grad-norm %g: give 0 (off) or the largest norm, a "
                            "positive number"), c->clip_grad_norm);
  gboolean cropping = c->crop_scale[0] != 0 || c->crop_scale[1] != 0;
  if (cropping && !range_ok(c->crop_scale, 0, 1))
    return invalid(error, _("--resized-crop %g,%g: give the smallest and largest share of "
                            "the image's area, 0 < A ≤ B ≤ 1, e.g. 0.08,1"),
                   c->crop_scale[0], c->crop_scale[1]);
  if (cropping && c->crop_pad > 0)
    return invalid(error, _("--resized-crop %g,%g: not with --crop %d; choose one kind of "
                            "crop"), c->crop_scale[0], c->crop_scale[1], c->crop_pad);
  if (!range_ok(c->crop_ratio, 0, 100))
    return invalid(error, _("--resized-crop-ratio %g,%g: give the narrowest and widest aspect "
                            "ratio, 0 < A ≤ B ≤ 100, e.g. 0.75,1.333"),
                   c->crop_ratio[0], c->crop_ratio[1]);
  for (int i = 0; i < 3; i++)
    if (!isfinite(c->jitter[i]) || c->jitter[i] < 0 || c->jitter[i] >= 1)
      return invalid(error, _("--jitter %g,%g,%g: give brightness, contrast and saturation, "
                              "each at least 0 and less than 1"),
                     c->jitter[0], c->jitter[1], c->jitter[2]);
  if (!isfinite(c->erase) || c->erase < 0 || c->erase > 1)
    return invalid(error, _("--erase %g: give the probability of erasing a rectangle, 0 to 1"),
                   c->erase);
  return TRUE;
}

static void
add_pair(JsonBuilder *b, const char *name, const double *v, int n)
{
  json_builder_set_member_name(b, name);
  json_builder_begin_array(b);
  for (int i = 0; i < n; i++)
    json_builder_add_double_value(b, v[i]);
  json_builder_end_array(b);
}

void
tdm_controls_config_to_json(const TdmConfig *c, JsonBuilder *b)
{
  if (watcher(c) != NULL) {
    tdm_json_set_string(b, "monitor", tdm_monitor_name(c->monitor));
    tdm_json_set_string(b, "monitor_mode", tdm_monitor_mode_name(c->monitor_mode));
    tdm_json_set_double(b, "min_delta", c->min_delta);
  }
  if (c->schedule == TDM_SCHEDULE_PLATEAU)
    tdm_json_set_int(b, "plateau_patience", c->plateau_patience);
  if (c->accumulate != 1)
    tdm_json_set_int(b, "accumulate", c->accumulate);
  if (c->clip_grad_norm > 0)
    tdm_json_set_double(b, "clip_grad_norm", c->clip_grad_norm);
  if (c->crop_scale[0] > 0) {
    add_pair(b, "crop_scale", c->crop_scale, 2);
    add_pair(b, "crop_ratio", c->crop_ratio, 2);
  }
  if (c->jitter[0] > 0 || c->jitter[1] > 0 || c->jitter[2] > 0)
    add_pair(b, "jitter", c->jitter, 3);
  if (c->erase > 0)
    tdm_json_set_double(b, "erase", c->erase);
}

static gboolean
bad(GError **error, const char *field, const char *why)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
              _("run configuration: field “%s” %s"), field, why);
  return FALSE;
}

static gboolean
read_numbers(JsonObject *o, const char *field, double *out, guint n, GError **error)
{
  JsonNode *node = json_object_get_member(o, field);
  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY(node) || json_array_get_length(json_node_get_array(node)) != n)
    return bad(error, field, n == 2 ? _("must be an array of two numbers")
                                    : _("must be an array of three numbers"));
  JsonArray *a = json_node_get_array(node);
  for (guint i = 0; i < n; i++) {
    JsonNode *e = json_array_get_element(a, i);
    GType type = JSON_NODE_HOLDS_VALUE(e) ? json_node_get_value_type(e) : G_TYPE_INVALID;
    if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
      return bad(error, field, _("must hold numbers only"));
    out[i] = json_node_get_double(e);
  }
  return TRUE;
}

static gboolean
read_number(JsonObject *o, const char *field, double *out, GError **error)
{
  JsonNode *node = json_object_get_member(o, field);
  if (node == NULL)
    return TRUE;
  GType type = JSON_NODE_HOLDS_VALUE(node) ? json_node_get_value_type(node) : G_TYPE_INVALID;
  if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
    return bad(error, field, _("must be a number"));
  *out = json_node_get_double(node);
  return TRUE;
}

gboolean
tdm_controls_config_from_json(JsonObject *o, TdmConfig *c, GError **error)
{
  /* Runs from before the monitor watched validation accuracy, at any gain. */
  if (c->early_stop > 0 || c->save_best_path != NULL) {
    c->monitor = TDM_MONITOR_VAL_ACCURACY;
    c->monitor_mode = TDM_MONITOR_MODE_MAX;
    c->min_delta = 0;
  }
  const char *monitor = json_object_get_string_member_with_default(o, "monitor", NULL);
  if (monitor != NULL && !tdm_monitor_from_name(monitor, &c->monitor))
    return bad(error, "monitor", _("names no metric (val_loss, val_accuracy, test_loss or "
                                   "test_accuracy)"));
  if (json_object_has_member(o, "monitor") && monitor == NULL)
    return bad(error, "monitor", _("must be a string"));
  const char *mode = json_object_get_string_member_with_default(o, "monitor_mode", NULL);
  if (mode != NULL && !tdm_monitor_mode_from_name(mode, &c->monitor_mode))
    return bad(error, "monitor_mode", _("must be auto, min or max"));
  double patience = c->plateau_patience, accumulate = c->accumulate;
  if (!read_number(o, "min_delta", &c->min_delta, error) ||
      !read_number(o, "plateau_patience", &patience, error) ||
      !read_number(o, "accumulate", &accumulate, error) ||
      !read_number(o, "clip_grad_norm", &c->clip_grad_norm, error) ||
      !read_numbers(o, "crop_scale", c->crop_scale, 2, error) ||
      !read_numbers(o, "crop_ratio", c->crop_ratio, 2, error) ||
      !read_numbers(o, "jitter", c->jitter, 3, error) ||
      !read_number(o, "erase", &c->erase, error))
    return FALSE;
  if (patience != floor(patience) || fabs(patience) > G_MAXINT)
    return bad(error, "plateau_patience", _("must be a whole number"));
  if (accumulate != floor(accumulate) || fabs(accumulate) > G_MAXINT)
    return bad(error, "accumulate", _("must be a whole number"));
  c->plateau_patience = (int)patience;
  c->accumulate = (int)accumulate;
  return TRUE;
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
