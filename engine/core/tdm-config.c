/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config.c — the run configuration: defaults, the --devices list, validation,
 * the name tables shared by flags, settings and JSON, the JSON form that checkpoints
 * carry, and the learning-rate schedules. It checks only what it can see without
 * opening a dataset or a device; those are the trainer's to check.
 */
#include "tdm-config.h"
#include "tdm-config-private.h"
#include "tdm-base-recipe.h"
#include "tdm-choice.h"
#include "tdm-i18n.h"
#include "tdm-json.h"
#include "tdm-error.h"
#include "tdm-events.h"
#include "tdm-file.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

TdmConfig *
tdm_config_new(void)
{
  const TdmBaseRecipe *base = tdm_base_recipe();
  TdmConfig *c = g_new0(TdmConfig, 1);
  c->dataset = g_strdup(base->dataset);
  c->network = g_strdup(base->network);
  c->devices = g_new0(char *, 2);
  c->devices[0] = g_strdup("cpu");
  c->main_replica = 0;
  c->batch = base->batch;
  c->epochs = base->epochs;
  c->optimizer = base->optimizer;
  c->lr = tdm_base_recipe_lr(c->optimizer);
  c->momentum = 0.9;
  c->beta1 = 0.9;
  c->beta2 = 0.999;
  c->eps = 1e-8;
  c->weight_decay = 0.0;
  c->schedule = TDM_SCHEDULE_CONSTANT;
  c->step_epochs = 10;
  c->gamma = 0.1;
  c->strategy = base->strategy;
  c->precision = TDM_PRECISION_FP32;
  c->seed = 0;
  c->save_path = NULL;
  c->eval_batch = 1000;
  c->bucket_bytes = 4u << 20;
  c->max_steps = 0;
  c->batchnorm = base->batchnorm;
  c->decay_scope = TDM_DECAY_ALL;
  c->warmup_epochs = 0.0;
  c->label_smoothing = 0.0;
  c->crop_pad = 0;
  c->flip = TDM_FLIP_OFF;
  c->test_flip = FALSE;
  c->test_shift = 0;
  c->exact = FALSE;
  c->exact_chunk = 16;
  c->cpu_threads = 0;
  c->monitor = TDM_MONITOR_VAL_LOSS;
  c->monitor_mode = TDM_MONITOR_MODE_AUTO;
  c->min_delta = 0;
  c->plateau_patience = 10;
  c->accumulate = 1;
  c->clip_grad_norm = 0;
  /* torchvision's RandomResizedCrop ratio, kept for when a scale turns it on. */
  c->crop_ratio[0] = 3.0 / 4.0;
  c->crop_ratio[1] = 4.0 / 3.0;
  return c;
}

gboolean
tdm_config_flips(const TdmConfig *c, const char *dataset_name)
{
  if (c->flip != TDM_FLIP_AUTO)
    return c->flip == TDM_FLIP_ON;
  /* Digits mirrored are not digits; clothes, objects and photos mirrored are the
   * same class. The synthetic set's classes are oriented strokes. */
  return dataset_name == NULL ||
         !(g_str_equal(dataset_name, "mnist") || g_str_equal(dataset_name, "synthetic"));
}

TdmConfig *
tdm_config_copy(const TdmConfig *config)
{
  g_return_val_if_fail(config != NULL, NULL);

  TdmConfig *c = g_new(TdmConfig, 1);
  *c = *config;
  c->dataset = g_strdup(config->dataset);
  c->network = g_strdup(config->network);
  c->devices = g_strdupv(config->devices);
  c->save_path = g_strdup(config->save_path);
  c->save_best_path = g_strdup(config->save_best_path);
  c->normalize = g_strdup(config->normalize);
  c->init_path = g_strdup(config->init_path);
  c->freeze = g_strdupv(config->freeze);
  c->lr_scale = g_strdupv(config->lr_scale);
  return c;
}

void
tdm_config_free(TdmConfig *config)
{
  if (config == NULL)
    return;
  g_free(config->dataset);
  g_free(config->network);
  g_strfreev(config->devices);
  g_free(config->save_path);
  g_free(config->save_best_path);
  g_free(config->normalize);
  g_free(config->init_path);
  g_strfreev(config->freeze);
  g_strfreev(config->lr_scale);
  g_free(config);
}

/* Strict decimal: digits only, no sign, no spaces, no overflow past `max`. */
static gboolean
parse_count(const char *text, gint64 max, gint64 *out)
{
  if (*text == '\0')
    return FALSE;
  gint64 value = 0;
  for (const char *p = text; *p; p++) {
    if (!g_ascii_isdigit(*p))
      return FALSE;
    value = value * 10 + (*p - '0');
    if (value > max)
      return FALSE;
  }
  *out = value;
  return TRUE;
}

/* One --devices item, appended to `out` as one entry per replica. */
static gboolean
parse_device_item(const char *item, GPtrArray *out, GError **error)
{
  gint64 n;

  if (*item == '\0') {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("--devices: empty device name in the list (use e.g. “cpu:4” or "
                "“cuda:0,cuda:1”)"));
    return FALSE;
  }
  if (g_str_equal(item, "cpu")) {
    g_ptr_array_add(out, g_strdup("cpu"));
    return TRUE;
  }
  if (g_str_has_prefix(item, "cpu:")) {
    if (!parse_count(item + 4, TDM_MAX_REPLICAS + 1, &n) || n < 1) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                  _("--devices: “%s”: the number of CPU workers must be a whole number "
                  "from 1 to %d"), item, TDM_MAX_REPLICAS);
      return FALSE;
    }
    for (gint64 i = 0; i < n; i++)
      g_ptr_array_add(out, g_strdup("cpu"));
    return TRUE;
  }
  if (g_str_has_prefix(item, "cuda:")) {
    if (!parse_count(item + 5, 4095, &n)) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  _("--devices: “%s”: a GPU is named cuda:N with N its ordinal "
                  "(see --list-devices)"), item);
      return FALSE;
    }
    /* Normalised so "cuda:01" and "cuda:1" are the same device in messages. */
    g_ptr_array_add(out, g_strdup_printf("cuda:%d", (int)n));
    return TRUE;
  }
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
              _("--devices: unknown device “%s” (use cpu, cpu:N for N CPU workers, or "
              "cuda:N; see --list-devices)"), item);
  return FALSE;
}

gboolean
tdm_config_set_devices(TdmConfig *config, const char *list, GError **error)
{
  g_return_val_if_fail(config != NULL, FALSE);
  g_return_val_if_fail(list != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  g_auto(GStrv) items = g_strsplit(list, ",", -1);
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func(g_free);

  if (items[0] == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                _("--devices: no device given (use e.g. “cpu:4” or “cuda:0,cuda:1”)"));
    return FALSE;
  }
  for (int i = 0; items[i]; i++) {
    char *item = g_strstrip(items[i]);
    if (!parse_device_item(item, out, error))
      return FALSE;
    if (out->len > TDM_MAX_REPLICAS) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                  _("--devices: “%s” makes more than %d replicas"), list, TDM_MAX_REPLICAS);
      return FALSE;
    }
  }

  g_ptr_array_add(out, NULL);
  g_strfreev(config->devices);
  config->devices = (char **)g_ptr_array_free(g_steal_pointer(&out), FALSE);
  return TRUE;
}

int
tdm_config_replica_count(const TdmConfig *config)
{
  g_return_val_if_fail(config != NULL, 0);
  return config->devices ? (int)g_strv_length(config->devices) : 0;
}

/* A device entry as the trainer takes it: exactly "cpu" or "cuda:N". */
static gboolean
device_entry_ok(const char *entry)
{
  gint64 n;
  if (g_str_equal(entry, "cpu"))
    return TRUE;
  return g_str_has_prefix(entry, "cuda:") && parse_count(entry + 5, 4095, &n);
}

gboolean
tdm_config_batch_splits(int batch, int replicas)
{
  return batch >= MAX(replicas, 1);
}

int
tdm_config_batch_fitting(int samples, int replicas)
{
  int batch = 1;
  while (batch <= G_MAXINT / 8 && (gint64)batch * 8 <= samples)
    batch *= 2;
  return MIN(MAX(batch, replicas), MAX(samples, 1));
}

int
tdm_config_device_gpu(const char *entry)
{
  gint64 n;
  if (entry != NULL && g_str_has_prefix(entry, "cuda:") && parse_count(entry + 5, 4095, &n))
    return (int)n;
  return -1;
}

gboolean
tdm_config_invalid(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION, message);
  g_free(message);
  return FALSE;
}

gboolean
tdm_config_validate(const TdmConfig *c, GError **error)
{
  g_return_val_if_fail(c != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  if (c->dataset == NULL || *c->dataset == '\0')
    return invalid(error, _("--dataset: no dataset given (a name such as fashion-mnist, "
                          "mnist, synthetic, or a folder)"));
  if (c->network == NULL || *c->network == '\0')
    return invalid(error, _("--network: no network given (mlp, cnn or a spec such as "
                          "“fc100,relu,fc10”)"));

  int replicas = tdm_config_replica_count(c);
  if (replicas < 1)
    return invalid(error, _("--devices: no device given"));
  if (replicas > TDM_MAX_REPLICAS)
    return invalid(error, _("--devices: %d replicas, more than the %d Tandem supports"),
                   replicas, TDM_MAX_REPLICAS);
  for (int i = 0; i < replicas; i++) {
    if (!device_entry_ok(c->devices[i])) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  _("--devices: unknown device “%s” (use cpu or cuda:N)"), c->devices[i]);
      return FALSE;
    }
  }
  if (c->main_replica < 0 || c->main_replica >= replicas) {
    if (replicas == 1)
      return invalid(error, _("--main %d: there is one device, number 0"), c->main_replica);
    return invalid(error, _("--main %d: give a device number from 0 to %d (the place in "
                          "--devices)"), c->main_replica, replicas - 1);
  }

  if (c->batch < 1)
    return invalid(error, _("--batch %d: the batch size must be at least 1"), c->batch);
  if (!tdm_config_batch_splits(c->batch, replicas))
    return invalid(error, _("--batch %d is smaller than the %d devices: each device needs "
                          "at least one sample"), c->batch, replicas);
  if (c->epochs < 1)
    return invalid(error, _("--epochs %d: train for at least 1 epoch"), c->epochs);

  if ((unsigned)c->optimizer > TDM_OPTIMIZER_NESTEROV)
    return invalid(error, _("--optimizer: unknown optimizer %d"), (int)c->optimizer);
  if (!isfinite(c->lr) || c->lr <= 0)
    return invalid(error, _("--lr %g: the learning rate must be a positive number"), c->lr);
  if (!isfinite(c->momentum) || c->momentum < 0 || c->momentum >= 1)
    return invalid(error, _("--momentum %g: must be at least 0 and less than 1"), c->momentum);
  if (!isfinite(c->beta1) || c->beta1 < 0 || c->beta1 >= 1)
    return invalid(error, _("--beta1 %g: Adam's beta1 must be at least 0 and less than 1"),
                   c->beta1);
  if (!isfinite(c->beta2) || c->beta2 < 0 || c->beta2 >= 1)
    return invalid(error, _("--beta2 %g: Adam's beta2 must be at least 0 and less than 1"),
                   c->beta2);
  if (!isfinite(c->eps) || c->eps <= 0)
    return invalid(error, _("--eps %g: Adam's epsilon must be a positive number"), c->eps);
  if (!isfinite(c->weight_decay) || c->weight_decay < 0)
    return invalid(error, _("--weight-decay %g: must be 0 or a positive number"),
                   c->weight_decay);

  if ((unsigned)c->schedule > TDM_SCHEDULE_PLATEAU)
    return invalid(error, _("--schedule: unknown schedule %d"), (int)c->schedule);
  if (c->step_epochs < 1)
    return invalid(error, _("--step-epochs %d: the step schedule needs at least 1 epoch "
                          "between steps"), c->step_epochs);
  if (!isfinite(c->gamma) || c->gamma <= 0)
    return invalid(error, _("--gamma %g: the step schedule's factor must be a positive number"),
                   c->gamma);

  if ((unsigned)c->strategy > TDM_STRATEGY_ALLREDUCE)
    return invalid(error, _("--strategy: unknown strategy %d"), (int)c->strategy);
  if ((unsigned)c->precision > TDM_PRECISION_BF16)
    return invalid(error, _("--precision: unknown precision %d"), (int)c->precision);
  if (c->save_path != NULL && *c->save_path == '\0')
    return invalid(error, _("--save: the file name is empty"));
  if (c->eval_batch < 1)
    return invalid(error, _("--eval-batch %d: the evaluation batch must be at least 1"),
                   c->eval_batch);
  if (c->max_steps < 0)
    return invalid(error, _("--max-steps %ld: give 0 (no limit) or a positive number of "
                          "steps"), c->max_steps);
  if ((unsigned)c->batchnorm > TDM_BATCHNORM_SYNC)
    return invalid(error, _("--batchnorm: unknown mode %d"), (int)c->batchnorm);
  if ((unsigned)c->decay_scope > TDM_DECAY_WEIGHTS)
    return invalid(error, _("--weight-decay-on: unknown scope %d"), (int)c->decay_scope);
  if (!isfinite(c->warmup_epochs) || c->warmup_epochs < 0 || c->warmup_epochs > c->epochs)
    return invalid(error, _("--warmup %g: give 0 or a number of epochs up to --epochs (%d)"),
                   c->warmup_epochs, c->epochs);
  if (!isfinite(c->label_smoothing) || c->label_smoothing < 0 || c->label_smoothing >= 1)
    return invalid(error, _("--label-smoothing %g: must be at least 0 and less than 1"),
                   c->label_smoothing);
  if (c->crop_pad < 0 || c->crop_pad > 64)
    return invalid(error, _("--crop %d: give the padding in pixels, 0 (off) to 64"),
                   c->crop_pad);
  if ((unsigned)c->flip > TDM_FLIP_OFF)
    return invalid(error, _("--flip: unknown setting %d"), (int)c->flip);
  if (c->cpu_threads < 0 || c->cpu_threads > 1024)
    return invalid(error, _("BLAS threads per CPU worker %d: give 0 (automatic) or 1 to 1024"),
                   c->cpu_threads);
  if (c->exact_chunk < 1 || c->exact_chunk > 4096)
    return invalid(error, _("--exact-chunk %d: give the samples a chunk, 1 to 4096"),
                   c->exact_chunk);
  if (c->test_shift < 0 || c->test_shift > TDM_TEST_SHIFT_MAX)
    return invalid(error, _("--test-shift %d: give the shift in pixels, 0 (off) to %d"),
                   c->test_shift, TDM_TEST_SHIFT_MAX);
  if (c->image_size != 0 && (c->image_size < 4 || c->image_size > 512))
    return invalid(error, _("--image-size %d: give 0 (chosen from the images) or a side from "
                          "4 to 512 pixels"), c->image_size);
  if (c->image_channels != 0 && c->image_channels != 1 && c->image_channels != 3)
    return invalid(error, _("--color: %d channels; expected auto, grey or rgb"),
                   c->image_channels);
  if (!isfinite(c->val_split) || c->val_split < 0 || c->val_split > 0.9)
    return invalid(error, _("--val-split %g: give the fraction of the training set to hold "
                          "out, from 0 (none) to 0.9"), c->val_split);
  if (c->save_best_path != NULL && *c->save_best_path == '\0')
    return invalid(error, _("--save-best: the file name is empty"));
  /* By device and inode, not by spelling: "val/b.st" and "./val/../val/b.st" are one
   * file, and the best checkpoint would be overwritten every epoch. */
  if (c->save_best_path != NULL && c->save_path != NULL &&
      tdm_file_same(c->save_best_path, c->save_path))
    return invalid(error, _("--save-best %s: the same file as --save"), c->save_best_path);
  if (c->save_every < 0)
    return invalid(error, _("--save-every %d: give 0 (every epoch only) or a number of steps"),
                   c->save_every);
  if (c->save_every > 0 && c->save_path == NULL)
    return invalid(error, _("--save-every %d: needs --save FILE to save to"), c->save_every);
  if (c->early_stop < 0)
    return invalid(error, _("--early-stop %d: give 0 (never) or a number of epochs"),
                   c->early_stop);

  if (c->bucket_bytes < sizeof(float))
    return invalid(error, _("--bucket-bytes %zu: a gradient bucket must hold at least one "
                          "value"), c->bucket_bytes);
  return tdm_controls_config_validate(c, error);
}

/* The JSON key of the field a validation message's leading flag names. */
static char *
key_of_flag(const char *flag)
{
  if (g_str_equal(flag, "main"))
    return g_strdup("main_replica");
  if (g_str_equal(flag, "save"))
    return g_strdup("save_path");
  if (g_str_equal(flag, "save-best"))
    return g_strdup("save_best_path");
  if (g_str_equal(flag, "resized-crop"))
    return g_strdup("crop_scale");
  if (g_str_equal(flag, "resized-crop-ratio"))
    return g_strdup("crop_ratio");
  char *key = g_strdup(flag);
  g_strdelimit(key, "-", '_');
  return key;
}

gboolean
tdm_config_validate_saved(const TdmConfig *c, const char *source, GError **error)
{
  g_return_val_if_fail(c != NULL && source != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  g_autoptr(GError) local = NULL;
  if (tdm_config_validate(c, &local))
    return TRUE;
  /* Every message of tdm_config_validate starts with the flag ("--batch -7: …");
   * here the value came from the file, so the file and the key are named instead. */
  const char *m = local->message;
  if (g_str_has_prefix(m, "--")) {
    gsize len = strcspn(m + 2, " :");
    g_autofree char *flag = g_strndup(m + 2, len);
    g_autofree char *key = key_of_flag(flag);
    const char *rest = m + 2 + len;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: bad value in its saved run configuration: key “%s”%s%s"), source, key,
                *rest == ' ' ? " =" : "", rest);
  } else {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: bad value in its saved run configuration: %s"), source, m);
  }
  return FALSE;
}

/* --color: an int (the channels), with aliases, so no GEnum. */
const char *
tdm_color_name(int channels)
{
  return channels == 1 ? "grey" : channels == 3 ? "rgb" : "auto";
}

gboolean
tdm_color_from_name(const char *name, int *channels)
{
  g_return_val_if_fail(name != NULL && channels != NULL, FALSE);
  if (g_str_equal(name, "auto"))
    *channels = 0;
  else if (g_str_equal(name, "grey") || g_str_equal(name, "gray"))
    *channels = 1;
  else if (g_str_equal(name, "rgb") || g_str_equal(name, "color") || g_str_equal(name, "colour"))
    *channels = 3;
  else
    return FALSE;
  return TRUE;
}

/* For writing a configuration that has not been validated: never a NULL string. */
static const char *
or_unknown(const char *name)
{
  return name ? name : "unknown";
}

/* The names are the GEnums' nicks (tdm-choice.h): one table, generated. */
#define NAME_TABLE(Type, prefix, gtype)                                                  \
  const char *prefix##_name(Type v)                                                      \
  {                                                                                      \
    return tdm_choice_name(gtype, (int)v);                                               \
  }                                                                                      \
  gboolean prefix##_from_name(const char *name, Type *out)                               \
  {                                                                                      \
    int v;                                                                               \
    if (!tdm_choice_from_name(gtype, name, &v))                                          \
      return FALSE;                                                                      \
    *out = (Type)v;                                                                      \
    return TRUE;                                                                         \
  }

NAME_TABLE(TdmOptimizerKind, tdm_optimizer, TDM_TYPE_OPTIMIZER_KIND)
NAME_TABLE(TdmStrategy, tdm_strategy, TDM_TYPE_STRATEGY)
NAME_TABLE(TdmSchedule, tdm_schedule, TDM_TYPE_SCHEDULE)
NAME_TABLE(TdmPrecision, tdm_precision, TDM_TYPE_PRECISION)
NAME_TABLE(TdmBatchNorm, tdm_batchnorm, TDM_TYPE_BATCH_NORM)
NAME_TABLE(TdmDecayScope, tdm_decay_scope, TDM_TYPE_DECAY_SCOPE)
NAME_TABLE(TdmFlipSetting, tdm_flip_setting, TDM_TYPE_FLIP_SETTING)

/* JSON. Every field is written and every field is required on reading, so a
 * checkpoint from another version fails loudly instead of training differently. */


char *
tdm_config_to_json(const TdmConfig *c)
{
  g_return_val_if_fail(c != NULL, NULL);

  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "dataset");
  json_builder_add_string_value(b, c->dataset ? c->dataset : "");
  json_builder_set_member_name(b, "network");
  json_builder_add_string_value(b, c->network ? c->network : "");
  json_builder_set_member_name(b, "devices");
  json_builder_begin_array(b);
  for (int i = 0; c->devices && c->devices[i]; i++)
    json_builder_add_string_value(b, c->devices[i]);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "main_replica");
  json_builder_add_int_value(b, c->main_replica);
  json_builder_set_member_name(b, "batch");
  json_builder_add_int_value(b, c->batch);
  json_builder_set_member_name(b, "epochs");
  json_builder_add_int_value(b, c->epochs);
  json_builder_set_member_name(b, "optimizer");
  json_builder_add_string_value(b, or_unknown(tdm_optimizer_name(c->optimizer)));
  json_builder_set_member_name(b, "lr");
  json_builder_add_double_value(b, c->lr);
  json_builder_set_member_name(b, "momentum");
  json_builder_add_double_value(b, c->momentum);
  json_builder_set_member_name(b, "beta1");
  json_builder_add_double_value(b, c->beta1);
  json_builder_set_member_name(b, "beta2");
  json_builder_add_double_value(b, c->beta2);
  json_builder_set_member_name(b, "eps");
  json_builder_add_double_value(b, c->eps);
  json_builder_set_member_name(b, "weight_decay");
  json_builder_add_double_value(b, c->weight_decay);
  json_builder_set_member_name(b, "schedule");
  json_builder_add_string_value(b, or_unknown(tdm_schedule_name(c->schedule)));
  json_builder_set_member_name(b, "step_epochs");
  json_builder_add_int_value(b, c->step_epochs);
  json_builder_set_member_name(b, "gamma");
  json_builder_add_double_value(b, c->gamma);
  json_builder_set_member_name(b, "strategy");
  json_builder_add_string_value(b, or_unknown(tdm_strategy_name(c->strategy)));
  json_builder_set_member_name(b, "precision");
  json_builder_add_string_value(b, or_unknown(tdm_precision_name(c->precision)));
  /* JSON integers are signed 64-bit here; a seed past that range goes as a string
   * so no reader silently wraps it. */
  json_builder_set_member_name(b, "seed");
  if (c->seed <= (guint64)G_MAXINT64) {
    json_builder_add_int_value(b, (gint64)c->seed);
  } else {
    char text[32];
    g_snprintf(text, sizeof text, "%" G_GUINT64_FORMAT, c->seed);
    json_builder_add_string_value(b, text);
  }
  json_builder_set_member_name(b, "save_path");
  if (c->save_path)
    json_builder_add_string_value(b, c->save_path);
  else
    json_builder_add_null_value(b);
  json_builder_set_member_name(b, "eval_batch");
  json_builder_add_int_value(b, c->eval_batch);
  json_builder_set_member_name(b, "bucket_bytes");
  json_builder_add_int_value(b, (gint64)c->bucket_bytes);
  json_builder_set_member_name(b, "max_steps");
  json_builder_add_int_value(b, c->max_steps);
  json_builder_set_member_name(b, "batchnorm");
  json_builder_add_string_value(b, or_unknown(tdm_batchnorm_name(c->batchnorm)));
  json_builder_set_member_name(b, "weight_decay_on");
  json_builder_add_string_value(b, or_unknown(tdm_decay_scope_name(c->decay_scope)));
  json_builder_set_member_name(b, "warmup_epochs");
  json_builder_add_double_value(b, c->warmup_epochs);
  json_builder_set_member_name(b, "label_smoothing");
  json_builder_add_double_value(b, c->label_smoothing);
  json_builder_set_member_name(b, "crop_pad");
  json_builder_add_int_value(b, c->crop_pad);
  json_builder_set_member_name(b, "flip");
  json_builder_add_string_value(b, or_unknown(tdm_flip_setting_name(c->flip)));
  json_builder_set_member_name(b, "test_flip");
  json_builder_add_boolean_value(b, c->test_flip);
  json_builder_set_member_name(b, "test_shift");
  json_builder_add_int_value(b, c->test_shift);
  json_builder_set_member_name(b, "image_size");
  json_builder_add_int_value(b, c->image_size);
  json_builder_set_member_name(b, "image_channels");
  json_builder_add_int_value(b, c->image_channels);
  json_builder_set_member_name(b, "exact");
  json_builder_add_boolean_value(b, c->exact);
  json_builder_set_member_name(b, "exact_chunk");
  json_builder_add_int_value(b, c->exact_chunk);
  /* Only when set, so the JSON of runs without them stays as it was. */
  if (c->val_split > 0) {
    json_builder_set_member_name(b, "val_split");
    json_builder_add_double_value(b, c->val_split);
  }
  if (c->save_best_path != NULL) {
    json_builder_set_member_name(b, "save_best_path");
    json_builder_add_string_value(b, c->save_best_path);
  }
  if (c->save_every > 0) {
    json_builder_set_member_name(b, "save_every");
    json_builder_add_int_value(b, c->save_every);
  }
  if (c->early_stop > 0) {
    json_builder_set_member_name(b, "early_stop");
    json_builder_add_int_value(b, c->early_stop);
  }
  tdm_finetune_config_to_json(c, b);
  tdm_controls_config_to_json(c, b);
  json_builder_end_object(b);

  g_autoptr(JsonNode) root = json_builder_get_root(b);
  return tdm_json_to_string(root);
}

static gboolean
json_bad(GError **error, const char *field, const char *why)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
              _("run configuration: field “%s” %s"), field, why);
  return FALSE;
}

static JsonNode *
member(JsonObject *o, const char *field, GError **error)
{
  JsonNode *node = json_object_get_member(o, field);
  if (node == NULL)
    json_bad(error, field, _("is missing"));
  return node;
}

static gboolean
get_string(JsonObject *o, const char *field, char **out, GError **error)
{
  JsonNode *node = member(o, field, error);
  if (node == NULL)
    return FALSE;
  if (json_node_get_value_type(node) != G_TYPE_STRING)
    return json_bad(error, field, _("must be a string"));
  g_free(*out);
  *out = g_strdup(json_node_get_string(node));
  return TRUE;
}

static gboolean
get_int64(JsonObject *o, const char *field, gint64 min, gint64 max, gint64 *out,
          GError **error)
{
  JsonNode *node = member(o, field, error);
  if (node == NULL)
    return FALSE;
  if (json_node_get_value_type(node) != G_TYPE_INT64)
    return json_bad(error, field, _("must be a whole number"));
  gint64 v = json_node_get_int(node);
  if (v < min || v > max)
    return json_bad(error, field, _("is out of range"));
  *out = v;
  return TRUE;
}

static gboolean
get_int(JsonObject *o, const char *field, int *out, GError **error)
{
  gint64 v;
  if (!get_int64(o, field, G_MININT, G_MAXINT, &v, error))
    return FALSE;
  *out = (int)v;
  return TRUE;
}

static gboolean
get_double(JsonObject *o, const char *field, double *out, GError **error)
{
  JsonNode *node = member(o, field, error);
  if (node == NULL)
    return FALSE;
  GType type = json_node_get_value_type(node);
  /* "1" is as good a learning rate as "1.0"; writers differ. */
  if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
    return json_bad(error, field, _("must be a number"));
  *out = json_node_get_double(node);
  return TRUE;
}

static gboolean
get_enum(JsonObject *o, const char *field, gboolean (*from_name)(const char *, int *),
         int *out, GError **error)
{
  g_autofree char *name = NULL;
  if (!get_string(o, field, &name, error))
    return FALSE;
  if (!from_name(name, out)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("run configuration: field “%s” has the unknown value “%s”"), field, name);
    return FALSE;
  }
  return TRUE;
}

static gboolean
optimizer_int(const char *n, int *v)
{
  return tdm_choice_from_name(TDM_TYPE_OPTIMIZER_KIND, n, v);
}

static gboolean
strategy_int(const char *n, int *v)
{
  return tdm_choice_from_name(TDM_TYPE_STRATEGY, n, v);
}

static gboolean
schedule_int(const char *n, int *v)
{
  return tdm_choice_from_name(TDM_TYPE_SCHEDULE, n, v);
}

static gboolean
precision_int(const char *n, int *v)
{
  return tdm_choice_from_name(TDM_TYPE_PRECISION, n, v);
}

static gboolean
batchnorm_int(const char *n, int *v)
{
  return tdm_choice_from_name(TDM_TYPE_BATCH_NORM, n, v);
}

static gboolean
decay_scope_int(const char *n, int *v)
{
  return tdm_choice_from_name(TDM_TYPE_DECAY_SCOPE, n, v);
}

static gboolean
flip_int(const char *n, int *v)
{
  return tdm_choice_from_name(TDM_TYPE_FLIP_SETTING, n, v);
}

/* The recipe's fields, which checkpoints from before them lack: absent means the
 * default; present must be right. */
static gboolean
get_recipe(JsonObject *o, TdmConfig *c, GError **error)
{
  int v;
  if (json_object_has_member(o, "batchnorm")) {
    if (!get_enum(o, "batchnorm", batchnorm_int, &v, error))
      return FALSE;
    c->batchnorm = (TdmBatchNorm)v;
  }
  if (json_object_has_member(o, "weight_decay_on")) {
    if (!get_enum(o, "weight_decay_on", decay_scope_int, &v, error))
      return FALSE;
    c->decay_scope = (TdmDecayScope)v;
  }
  if (json_object_has_member(o, "flip")) {
    if (!get_enum(o, "flip", flip_int, &v, error))
      return FALSE;
    c->flip = (TdmFlipSetting)v;
  }
  if ((json_object_has_member(o, "warmup_epochs") &&
       !get_double(o, "warmup_epochs", &c->warmup_epochs, error)) ||
      (json_object_has_member(o, "label_smoothing") &&
       !get_double(o, "label_smoothing", &c->label_smoothing, error)) ||
      (json_object_has_member(o, "crop_pad") && !get_int(o, "crop_pad", &c->crop_pad, error)) ||
      (json_object_has_member(o, "test_shift") &&
       !get_int(o, "test_shift", &c->test_shift, error)))
    return FALSE;
  if (json_object_has_member(o, "exact_chunk") &&
      !get_int(o, "exact_chunk", &c->exact_chunk, error))
    return FALSE;
  if (json_object_has_member(o, "exact")) {
    JsonNode *node = json_object_get_member(o, "exact");
    if (json_node_get_value_type(node) != G_TYPE_BOOLEAN)
      return json_bad(error, "exact", _("must be true or false"));
    c->exact = json_node_get_boolean(node);
  }
  if (json_object_has_member(o, "test_flip")) {
    JsonNode *node = json_object_get_member(o, "test_flip");
    if (json_node_get_value_type(node) != G_TYPE_BOOLEAN)
      return json_bad(error, "test_flip", _("must be true or false"));
    c->test_flip = json_node_get_boolean(node);
  }
  return TRUE;
}

static gboolean
get_devices(JsonObject *o, TdmConfig *c, GError **error)
{
  JsonNode *node = member(o, "devices", error);
  if (node == NULL)
    return FALSE;
  if (!JSON_NODE_HOLDS_ARRAY(node))
    return json_bad(error, "devices", _("must be an array of strings"));
  JsonArray *array = json_node_get_array(node);
  guint n = json_array_get_length(array);
  if (n < 1 || n > TDM_MAX_REPLICAS) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("run configuration: field “devices” must list from 1 to %d devices"),
                TDM_MAX_REPLICAS);
    return FALSE;
  }
  char **devices = g_new0(char *, n + 1);
  for (guint i = 0; i < n; i++) {
    JsonNode *e = json_array_get_element(array, i);
    if (json_node_get_value_type(e) != G_TYPE_STRING) {
      g_strfreev(devices);
      return json_bad(error, "devices", _("must be an array of strings"));
    }
    devices[i] = g_strdup(json_node_get_string(e));
  }
  g_strfreev(c->devices);
  c->devices = devices;
  return TRUE;
}

static gboolean
get_seed(JsonObject *o, guint64 *out, GError **error)
{
  JsonNode *node = member(o, "seed", error);
  if (node == NULL)
    return FALSE;
  GType type = json_node_get_value_type(node);
  if (type == G_TYPE_INT64 && json_node_get_int(node) >= 0) {
    *out = (guint64)json_node_get_int(node);
    return TRUE;
  }
  if (type == G_TYPE_STRING &&
      g_ascii_string_to_unsigned(json_node_get_string(node), 10, 0, G_MAXUINT64, out, NULL))
    return TRUE;
  return json_bad(error, "seed", _("must be a non-negative whole number"));
}

TdmConfig *
tdm_config_from_json(const char *json, GError **error)
{
  g_return_val_if_fail(json != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  g_autoptr(GError) local = NULL;
  g_autoptr(JsonNode) root =
      tdm_json_parse(json, -1, TDM_ENGINE_ERROR_INVALID_OPTION, &local);
  if (root == NULL) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("run configuration: not valid JSON: %s"), local->message);
    return NULL;
  }
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("run configuration: expected a JSON object"));
    return NULL;
  }
  JsonObject *o = json_node_get_object(root);
  g_autoptr(TdmConfig) c = tdm_config_new();
  int optimizer, schedule, strategy, precision;
  gint64 bucket_bytes, max_steps;

  if (!get_string(o, "dataset", &c->dataset, error) ||
      !get_string(o, "network", &c->network, error) ||
      !get_devices(o, c, error) ||
      !get_int(o, "main_replica", &c->main_replica, error) ||
      !get_int(o, "batch", &c->batch, error) ||
      !get_int(o, "epochs", &c->epochs, error) ||
      !get_enum(o, "optimizer", optimizer_int, &optimizer, error) ||
      !get_double(o, "lr", &c->lr, error) ||
      !get_double(o, "momentum", &c->momentum, error) ||
      !get_double(o, "beta1", &c->beta1, error) ||
      !get_double(o, "beta2", &c->beta2, error) ||
      !get_double(o, "eps", &c->eps, error) ||
      !get_double(o, "weight_decay", &c->weight_decay, error) ||
      !get_enum(o, "schedule", schedule_int, &schedule, error) ||
      !get_int(o, "step_epochs", &c->step_epochs, error) ||
      !get_double(o, "gamma", &c->gamma, error) ||
      !get_enum(o, "strategy", strategy_int, &strategy, error) ||
      !get_enum(o, "precision", precision_int, &precision, error) ||
      !get_seed(o, &c->seed, error) ||
      !get_int(o, "eval_batch", &c->eval_batch, error) ||
      !get_int64(o, "bucket_bytes", 0, G_MAXINT64, &bucket_bytes, error) ||
      !get_int64(o, "max_steps", 0, G_MAXLONG, &max_steps, error) ||
      !get_recipe(o, c, error))
    return NULL;

  /* Optional: checkpoints written before image folders existed lack them. */
  if ((json_object_has_member(o, "image_size") &&
       !get_int(o, "image_size", &c->image_size, error)) ||
      (json_object_has_member(o, "image_channels") &&
       !get_int(o, "image_channels", &c->image_channels, error)))
    return NULL;
  if (!tdm_finetune_config_from_json(o, c, error))
    return NULL;

  if ((json_object_has_member(o, "val_split") &&
       !get_double(o, "val_split", &c->val_split, error)) ||
      (json_object_has_member(o, "save_every") &&
       !get_int(o, "save_every", &c->save_every, error)) ||
      (json_object_has_member(o, "early_stop") &&
       !get_int(o, "early_stop", &c->early_stop, error)))
    return NULL;
  if (json_object_has_member(o, "save_best_path")) {
    JsonNode *best = json_object_get_member(o, "save_best_path");
    if (JSON_NODE_HOLDS_NULL(best)) {
      g_clear_pointer(&c->save_best_path, g_free);
    } else if (json_node_get_value_type(best) == G_TYPE_STRING) {
      c->save_best_path = g_strdup(json_node_get_string(best));
    } else {
      json_bad(error, "save_best_path", _("must be a string or null"));
      return NULL;
    }
  }

  /* After early_stop and save_best_path, which say what an absent monitor meant. */
  if (!tdm_controls_config_from_json(o, c, error))
    return NULL;

  JsonNode *save = member(o, "save_path", error);
  if (save == NULL)
    return NULL;
  if (JSON_NODE_HOLDS_NULL(save)) {
    g_clear_pointer(&c->save_path, g_free);
  } else if (json_node_get_value_type(save) == G_TYPE_STRING) {
    g_free(c->save_path);
    c->save_path = g_strdup(json_node_get_string(save));
  } else {
    json_bad(error, "save_path", _("must be a string or null"));
    return NULL;
  }

  c->optimizer = (TdmOptimizerKind)optimizer;
  c->schedule = (TdmSchedule)schedule;
  c->strategy = (TdmStrategy)strategy;
  c->precision = (TdmPrecision)precision;
  c->bucket_bytes = (size_t)bucket_bytes;
  c->max_steps = (long)max_steps;
  return g_steal_pointer(&c);
}
