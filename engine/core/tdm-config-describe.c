/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config-describe.c — a run's settings as (key, value) text pairs, for people.
 *
 * Exports (CSV comment lines, SVG metadata and caption, PNG text chunks) say which
 * run they come from; they all print these pairs, so every file names the settings
 * the same way, as the engine spells them (the names of flags and JSON). Numbers are
 * written in the C locale. Not a serialization: tdm_config_to_json() is the form to
 * read back; this one leaves out what does not change the training (save path,
 * evaluation chunk, bucket size).
 */
#include "tdm-config.h"

static void
add(GPtrArray *pairs, const char *key, char *value)
{
  g_ptr_array_add(pairs, g_strdup(key));
  g_ptr_array_add(pairs, value);
}

static char *
number(double value)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_strdup(g_ascii_formatd(buf, sizeof buf, "%g", value));
}

static char *
name_or_unknown(const char *name)
{
  return g_strdup(name ? name : "unknown");
}

char **
tdm_config_describe(const TdmConfig *c)
{
  g_return_val_if_fail(c != NULL, NULL);

  GPtrArray *pairs = g_ptr_array_new();
  g_autofree char *devices = c->devices ? g_strjoinv(",", c->devices) : g_strdup("");
  int n = tdm_config_replica_count(c);

  add(pairs, "dataset", g_strdup(c->dataset ? c->dataset : ""));
  add(pairs, "network", g_strdup(c->network ? c->network : ""));
  add(pairs, "devices", g_steal_pointer(&devices));
  add(pairs, "main", c->main_replica >= 0 && c->main_replica < n
                         ? g_strdup_printf("%s (replica %d)", c->devices[c->main_replica],
                                           c->main_replica)
                         : g_strdup_printf("replica %d", c->main_replica));
  add(pairs, "strategy", name_or_unknown(tdm_strategy_name(c->strategy)));
  add(pairs, "batch", g_strdup_printf("%d", c->batch));
  add(pairs, "epochs", g_strdup_printf("%d", c->epochs));
  if (c->max_steps > 0)
    add(pairs, "max_steps", g_strdup_printf("%ld", c->max_steps));
  if (c->val_split > 0)
    add(pairs, "val_split", number(c->val_split));
  if (c->early_stop > 0)
    add(pairs, "early_stop", g_strdup_printf("%d", c->early_stop));
  /* What the watchers watch, where something watches. */
  if (c->early_stop > 0 || c->save_best_path != NULL || c->schedule == TDM_SCHEDULE_PLATEAU) {
    add(pairs, "monitor", name_or_unknown(tdm_monitor_name(c->monitor)));
    if (c->monitor_mode != TDM_MONITOR_MODE_AUTO)
      add(pairs, "monitor_mode", name_or_unknown(tdm_monitor_mode_name(c->monitor_mode)));
    if (c->min_delta > 0)
      add(pairs, "min_delta", number(c->min_delta));
  }
  if (c->accumulate > 1)
    add(pairs, "accumulate", g_strdup_printf("%d", c->accumulate));
  if (c->clip_grad_norm > 0)
    add(pairs, "clip_grad_norm", number(c->clip_grad_norm));
  add(pairs, "optimizer", name_or_unknown(tdm_optimizer_name(c->optimizer)));
  add(pairs, "lr", number(c->lr));
  if (c->optimizer == TDM_OPTIMIZER_MOMENTUM || c->optimizer == TDM_OPTIMIZER_NESTEROV)
    add(pairs, "momentum", number(c->momentum));
  if (c->optimizer == TDM_OPTIMIZER_ADAM) {
    add(pairs, "beta1", number(c->beta1));
    add(pairs, "beta2", number(c->beta2));
    add(pairs, "eps", number(c->eps));
  }
  add(pairs, "weight_decay", number(c->weight_decay));
  if (c->weight_decay > 0)
    add(pairs, "weight_decay_on", name_or_unknown(tdm_decay_scope_name(c->decay_scope)));
  add(pairs, "schedule", name_or_unknown(tdm_schedule_name(c->schedule)));
  if (c->schedule == TDM_SCHEDULE_PLATEAU) {
    add(pairs, "plateau_patience", g_strdup_printf("%d", c->plateau_patience));
    add(pairs, "gamma", number(c->gamma));
  }
  if (c->schedule == TDM_SCHEDULE_STEP) {
    add(pairs, "step_epochs", g_strdup_printf("%d", c->step_epochs));
    add(pairs, "gamma", number(c->gamma));
  }
  add(pairs, "warmup_epochs", number(c->warmup_epochs));
  add(pairs, "label_smoothing", number(c->label_smoothing));
  add(pairs, "crop", g_strdup_printf("%d", c->crop_pad));
  add(pairs, "flip", name_or_unknown(tdm_flip_setting_name(c->flip)));
  if (c->crop_scale[1] > 0) {
    char *scale = number(c->crop_scale[0]), *to = number(c->crop_scale[1]);
    char *ratio = number(c->crop_ratio[0]), *ratio_to = number(c->crop_ratio[1]);
    add(pairs, "resized_crop", g_strdup_printf("%s,%s ratio %s,%s", scale, to, ratio, ratio_to));
    g_free(scale);
    g_free(to);
    g_free(ratio);
    g_free(ratio_to);
  }
  if (c->jitter[0] > 0 || c->jitter[1] > 0 || c->jitter[2] > 0) {
    char *b = number(c->jitter[0]), *k = number(c->jitter[1]), *sat = number(c->jitter[2]);
    add(pairs, "jitter", g_strdup_printf("%s,%s,%s", b, k, sat));
    g_free(b);
    g_free(k);
    g_free(sat);
  }
  if (c->erase > 0)
    add(pairs, "erase", number(c->erase));
  add(pairs, "batchnorm", name_or_unknown(tdm_batchnorm_name(c->batchnorm)));
  if (c->exact)
    add(pairs, "exact", g_strdup_printf("chunks of %d", c->exact_chunk));
  add(pairs, "precision", name_or_unknown(tdm_precision_name(c->precision)));
  add(pairs, "seed", g_strdup_printf("%" G_GUINT64_FORMAT, c->seed));
  g_ptr_array_add(pairs, NULL);

  return (char **)g_ptr_array_free(pairs, FALSE);
}
