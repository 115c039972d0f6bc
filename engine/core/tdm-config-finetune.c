/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config-finetune.c — the fine-tuning fields of the configuration (normalize, init,
 * freeze, train_head, lr_scale) in its JSON; optional when read, as older checkpoints
 * lack them. What they mean is tdm-finetune.c's.
 */
#include "tdm-config.h"
#include "tdm-config-private.h"
#include "tdm-error.h"


static void
add_strv(JsonBuilder *b, const char *name, char **v)
{
  json_builder_set_member_name(b, name);
  json_builder_begin_array(b);
  for (int i = 0; v != NULL && v[i] != NULL; i++)
    json_builder_add_string_value(b, v[i]);
  json_builder_end_array(b);
}

void
tdm_finetune_config_to_json(const TdmConfig *c, JsonBuilder *b)
{
  json_builder_set_member_name(b, "normalize");
  json_builder_add_string_value(b, c->normalize ? c->normalize : "none");
  if (c->init_path != NULL) {
    json_builder_set_member_name(b, "init");
    json_builder_add_string_value(b, c->init_path);
  }
  add_strv(b, "freeze", c->freeze);
  json_builder_set_member_name(b, "train_head");
  json_builder_add_boolean_value(b, c->train_head);
  add_strv(b, "lr_scale", c->lr_scale);
}

static gboolean
get_strv(JsonObject *o, const char *name, char ***out, GError **error)
{
  if (!json_object_has_member(o, name))
    return TRUE;
  JsonNode *node = json_object_get_member(o, name);
  if (!JSON_NODE_HOLDS_ARRAY(node))
    return tdm_config_invalid(error, "configuration field “%s” must be an array of strings", name);
  JsonArray *a = json_node_get_array(node);
  guint n = json_array_get_length(a);
  char **v = g_new0(char *, n + 1);
  for (guint i = 0; i < n; i++) {
    JsonNode *e = json_array_get_element(a, i);
    if (json_node_get_value_type(e) != G_TYPE_STRING) {
      g_strfreev(v);
      return tdm_config_invalid(error, "configuration field “%s” must be an array of strings", name);
    }
    v[i] = g_strdup(json_node_get_string(e));
  }
  g_strfreev(*out);
  *out = n > 0 ? v : (g_strfreev(v), NULL);
  return TRUE;
}

static gboolean
get_str(JsonObject *o, const char *name, char **out, GError **error)
{
  if (!json_object_has_member(o, name))
    return TRUE;
  JsonNode *node = json_object_get_member(o, name);
  if (json_node_get_value_type(node) != G_TYPE_STRING)
    return tdm_config_invalid(error, "configuration field “%s” must be a string", name);
  g_free(*out);
  *out = g_strdup(json_node_get_string(node));
  return TRUE;
}

gboolean
tdm_finetune_config_from_json(JsonObject *o, TdmConfig *c, GError **error)
{
  if (!get_str(o, "normalize", &c->normalize, error) ||
      !get_str(o, "init", &c->init_path, error) || !get_strv(o, "freeze", &c->freeze, error) ||
      !get_strv(o, "lr_scale", &c->lr_scale, error))
    return FALSE;
  if (json_object_has_member(o, "train_head")) {
    JsonNode *node = json_object_get_member(o, "train_head");
    if (json_node_get_value_type(node) != G_TYPE_BOOLEAN)
      return tdm_config_invalid(error, "configuration field “train_head” must be true or false");
    c->train_head = json_node_get_boolean(node);
  }
  return TRUE;
}
