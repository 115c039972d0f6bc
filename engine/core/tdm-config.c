/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config.c — the run configuration: made, copied, checked, written and read through
 * its field table (tdm-config-fields.c), plus the rules that tie fields together and
 * the learning-rate schedules. It checks only what it can see without opening a
 * dataset or a device; those are the trainer's to check.
 */
#include "tdm-config.h"
#include "tdm-config-private.h"
#include "tdm-base-recipe.h"
#include "tdm-choice.h"
#include "tdm-i18n.h"
#include "tdm-json.h"
#include "tdm-error.h"
#include "tdm-file.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

TdmConfig *
tdm_config_new(void)
{
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  TdmConfig *c = g_new0(TdmConfig, 1);
  tdm_fields_init(fields, n, c);
  /* The one default that depends on another: each optimizer starts from its rate. */
  c->lr = tdm_base_recipe_lr(c->optimizer);
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
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  TdmConfig *c = g_new(TdmConfig, 1);
  *c = *config;
  tdm_fields_copy(fields, n, c, config);
  return c;
}

void
tdm_config_free(TdmConfig *config)
{
  if (config == NULL)
    return;
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  tdm_fields_clear(fields, n, config);
  g_free(config);
}

gboolean
tdm_config_set_devices(TdmConfig *config, const char *list, GError **error)
{
  g_return_val_if_fail(config != NULL, FALSE);
  g_return_val_if_fail(list != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  return tdm_field_parse(tdm_config_field("devices"), config, list, error);
}

gboolean
tdm_config_set_device_list(TdmConfig *config, const TdmDeviceId *devices, int count,
                           GError **error)
{
  g_return_val_if_fail(config != NULL && (devices != NULL || count == 0), FALSE);
  if (count < 1) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("--devices: no device given"));
    return FALSE;
  }
  if (count > TDM_MAX_REPLICAS) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("--devices: %d replicas, more than the %d Tandem supports"), count,
                TDM_MAX_REPLICAS);
    return FALSE;
  }
  memmove(config->devices, devices, count * sizeof devices[0]);
  config->replicas = count;
  return TRUE;
}

int
tdm_config_replica_count(const TdmConfig *config)
{
  g_return_val_if_fail(config != NULL, 0);
  return config->replicas;
}

char *
tdm_config_devices_text(const TdmConfig *config)
{
  g_return_val_if_fail(config != NULL, NULL);
  return tdm_device_list_join(config->devices, MIN(config->replicas, TDM_MAX_REPLICAS));
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

/* The rules between fields; each field's own range is its row's. */
static gboolean
validate_devices(const TdmConfig *c, GError **error)
{
  int replicas = c->replicas;
  if (replicas < 1)
    return invalid(error, _("--devices: no device given"));
  if (replicas > TDM_MAX_REPLICAS)
    return invalid(error, _("--devices: %d replicas, more than the %d Tandem supports"),
                   replicas, TDM_MAX_REPLICAS);
  for (int i = 0; i < replicas; i++) {
    TdmDeviceId d = c->devices[i];
    if ((d.kind != TDM_BACKEND_CPU && d.kind != TDM_BACKEND_CUDA) || d.ordinal < 0 ||
        d.ordinal > TDM_DEVICE_ORDINAL_MAX) {
      g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE,
                  _("--devices: unknown device %d:%d (use cpu or cuda:N)"), (int)d.kind,
                  d.ordinal);
      return FALSE;
    }
  }
  if (c->main_replica < 0 || c->main_replica >= replicas) {
    if (replicas == 1)
      return invalid(error, _("--main %d: there is one device, number 0"), c->main_replica);
    return invalid(error, _("--main %d: give a device number from 0 to %d (the place in "
                            "--devices)"), c->main_replica, replicas - 1);
  }
  return TRUE;
}

gboolean
tdm_config_validate(const TdmConfig *c, GError **error)
{
  g_return_val_if_fail(c != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  if (!validate_devices(c, error) || !tdm_fields_check(fields, n, c, error))
    return FALSE;
  if (!tdm_config_batch_splits(c->batch, c->replicas))
    return invalid(error, _("--batch %d is smaller than the %d devices: each device needs "
                            "at least one sample"), c->batch, c->replicas);
  if (c->warmup_epochs > c->epochs)
    return invalid(error, _("--warmup %g: give 0 or a number of epochs up to --epochs (%d)"),
                   c->warmup_epochs, c->epochs);
  /* By device and inode, not by spelling: "val/b.st" and "./val/../val/b.st" are one
   * file, and the best checkpoint would be overwritten every epoch. */
  if (c->save_best_path != NULL && c->save_path != NULL &&
      tdm_file_same(c->save_best_path, c->save_path))
    return invalid(error, _("--save-best %s: the same file as --save"), c->save_best_path);
  if (c->save_every > 0 && c->save_path == NULL)
    return invalid(error, _("--save-every %d: needs --save FILE to save to"), c->save_every);
  return tdm_controls_config_validate(c, error);
}

gboolean
tdm_config_validate_saved(const TdmConfig *c, const char *source, GError **error)
{
  g_return_val_if_fail(c != NULL && source != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  g_autoptr(GError) local = NULL;
  if (tdm_config_validate(c, &local))
    return TRUE;
  /* Every message of tdm_config_validate starts with the flag ("--batch -7: …"), or a
   * row without one with its key ("bucket_bytes 0: …"); here the value came from the
   * file, so the file and the key are named instead. */
  const char *m = local->message;
  gsize skip = g_str_has_prefix(m, "--") ? 2 : 0;
  gsize len = strcspn(m + skip, " :");
  g_autofree char *name = g_strndup(m + skip, len);
  const TdmField *field = tdm_config_field(name);
  if (field != NULL && skip == 0 && field->flag != NULL)
    field = NULL;
  if (field != NULL) {
    const char *rest = m + skip + len;
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: bad value in its saved run configuration: key “%s”%s%s"), source,
                field->key, *rest == ' ' ? " =" : "", rest);
  } else {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CHECKPOINT,
                _("%s: bad value in its saved run configuration: %s"), source, m);
  }
  return FALSE;
}

/* The names are the GEnums' nicks (tdm-choice.h): one table, generated. The other
 * choices' names are read through tdm_choice_name() by their field rows. */
TDM_CHOICE_NAMES(TdmStrategy, tdm_strategy, TDM_TYPE_STRATEGY)
TDM_CHOICE_NAMES(TdmPrecision, tdm_precision, TDM_TYPE_PRECISION)

char *
tdm_precision_describe_used(TdmPrecision asked, TdmPrecision used)
{
  if (asked != TDM_PRECISION_AUTO || used == TDM_PRECISION_AUTO)
    return g_strdup(tdm_precision_name(asked));
  return g_strdup_printf("%s (%s)", tdm_precision_name(used), tdm_precision_name(asked));
}

/* What "set" and "changed" are measured against: the defaults, made once. */
static const TdmConfig *
defaults(void)
{
  static gsize once;
  static TdmConfig *config;
  if (g_once_init_enter(&once)) {
    config = tdm_config_new();
    g_once_init_leave(&once, 1);
  }
  return config;
}

char **
tdm_config_describe(const TdmConfig *c)
{
  g_return_val_if_fail(c != NULL, NULL);
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  return tdm_fields_describe(fields, n, c, defaults());
}

char *
tdm_config_to_flags(const TdmConfig *c)
{
  g_return_val_if_fail(c != NULL, NULL);
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  return tdm_fields_to_flags(fields, n, c, defaults());
}

/* JSON. The rows say which fields every file has (required on reading, so a
 * checkpoint from another version fails loudly instead of training differently) and
 * which came later (optional: absent means the default). */
char *
tdm_config_to_json(const TdmConfig *c)
{
  g_return_val_if_fail(c != NULL, NULL);
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  tdm_fields_to_json(fields, n, c, defaults(), b);
  json_builder_end_object(b);
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  return tdm_json_to_string(root);
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
  if (!JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("run configuration: expected a JSON object"));
    return NULL;
  }
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  g_autoptr(TdmConfig) c = tdm_config_new();
  JsonObject *o = json_node_get_object(root);
  if (!tdm_fields_from_json(fields, n, o, c, error))
    return NULL;
  tdm_controls_config_from_json(o, c);
  return g_steal_pointer(&c);
}

/* A typo in a hand-written --config file is named, not ignored: the keys are the
 * saved rows' (what tdm_config_to_json can write). */
char *
tdm_config_json_unknown_key(const char *json)
{
  g_return_val_if_fail(json != NULL, NULL);
  g_autoptr(JsonNode) root = tdm_json_parse(json, -1, TDM_ENGINE_ERROR_INVALID_OPTION, NULL);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root))
    return NULL;
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  g_autoptr(GList) members = json_object_get_members(json_node_get_object(root));
  for (GList *m = members; m != NULL; m = m->next) {
    const TdmField *f = tdm_fields_find(fields, n, m->data);
    if (f == NULL || (f->flags & TDM_FIELD_NOT_SAVED) || !g_str_equal(f->key, m->data))
      return g_strdup(m->data);
  }
  return NULL;
}
