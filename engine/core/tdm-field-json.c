/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-field-json.c — a table's rows as JSON members, both ways, and as text for
 * people: the description exports carry and the flags that would give the values
 * (tdm-field.h). Every row is read and written by its type here, so a new row needs
 * nothing of its own.
 */
#include "tdm-field.h"
#include "tdm-choice.h"
#include "tdm-device-id.h"
#include "tdm-error.h"
#include "tdm-i18n.h"

#include <string.h>

#define AT(target, field, type) ((type *)((char *)(target) + (field)->offset))
#define AT_CONST(target, field, type) ((type const *)((const char *)(target) + (field)->offset))

static void
add_strv(JsonBuilder *b, char *const *v)
{
  json_builder_begin_array(b);
  for (int i = 0; v != NULL && v[i] != NULL; i++)
    json_builder_add_string_value(b, v[i]);
  json_builder_end_array(b);
}

static void
add_name(JsonBuilder *b, GType type, int value)
{
  /* A configuration written before it was checked: never a NULL string. */
  const char *name = tdm_choice_name(type, value);
  json_builder_add_string_value(b, name != NULL ? name : "unknown");
}

static void
add_value(const TdmField *f, gconstpointer target, JsonBuilder *b)
{
  switch (f->type) {
  case TDM_FIELD_STRING: {
    const char *s = *AT_CONST(target, f, char *);
    if (s != NULL)
      json_builder_add_string_value(b, s);
    else if (f->flags & TDM_FIELD_JSON_NULLABLE)
      json_builder_add_null_value(b);
    else
      json_builder_add_string_value(b, (f->flags & TDM_FIELD_NULL_NONE) ? "none" : "");
    return;
  }
  case TDM_FIELD_LIST:
    add_strv(b, *AT_CONST(target, f, char **));
    return;
  case TDM_FIELD_DEVICES: {
    const TdmDeviceId *ids = AT_CONST(target, f, TdmDeviceId);
    int n = *(const int *)((const char *)target + f->count_offset);
    char buf[TDM_DEVICE_NAME_MAX];
    json_builder_begin_array(b);
    for (int i = 0; i < n; i++)
      json_builder_add_string_value(b, tdm_device_id_name(ids[i], buf));
    json_builder_end_array(b);
    return;
  }
  case TDM_FIELD_INT:
    if (f->choices != NULL && !(f->flags & TDM_FIELD_JSON_NUMBER))
      add_name(b, f->choices(), *AT_CONST(target, f, int));
    else
      json_builder_add_int_value(b, *AT_CONST(target, f, int));
    return;
  case TDM_FIELD_LONG:
    json_builder_add_int_value(b, *AT_CONST(target, f, long));
    return;
  case TDM_FIELD_SIZE:
    json_builder_add_int_value(b, (gint64)*AT_CONST(target, f, size_t));
    return;
  case TDM_FIELD_SEED: {
    /* JSON integers are signed 64-bit here; past that range a string, so no reader
     * silently wraps it. */
    guint64 v = *AT_CONST(target, f, guint64);
    if (v <= (guint64)G_MAXINT64) {
      json_builder_add_int_value(b, (gint64)v);
    } else {
      char text[32];
      g_snprintf(text, sizeof text, "%" G_GUINT64_FORMAT, v);
      json_builder_add_string_value(b, text);
    }
    return;
  }
  case TDM_FIELD_DOUBLE:
    json_builder_add_double_value(b, *AT_CONST(target, f, double));
    return;
  case TDM_FIELD_NUMBERS:
    json_builder_begin_array(b);
    for (int i = 0; i < f->count; i++)
      json_builder_add_double_value(b, AT_CONST(target, f, double)[i]);
    json_builder_end_array(b);
    return;
  case TDM_FIELD_BOOL:
    json_builder_add_boolean_value(b, *AT_CONST(target, f, gboolean));
    return;
  case TDM_FIELD_CHOICE:
    add_name(b, f->choices(), *AT_CONST(target, f, int));
    return;
  }
}

void
tdm_fields_to_json(const TdmField *fields, guint n, gconstpointer target,
                   gconstpointer defaults, JsonBuilder *b)
{
  for (guint i = 0; i < n; i++) {
    const TdmField *f = &fields[i];
    if ((f->flags & TDM_FIELD_NOT_SAVED) ||
        ((f->flags & TDM_FIELD_JSON_WHEN_SET) && tdm_field_equal(f, target, defaults)))
      continue;
    json_builder_set_member_name(b, f->key);
    add_value(f, target, b);
  }
}

static gboolean
json_bad(GError **error, const char *key, const char *why)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
              _("run configuration: field “%s” %s"), key, why);
  return FALSE;
}

static gboolean
json_unknown(GError **error, const char *key, const char *value)
{
  g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
              _("run configuration: field “%s” has the unknown value “%s”"), key, value);
  return FALSE;
}

static gboolean
get_int64(const TdmField *f, JsonNode *node, gint64 min, gint64 max, gint64 *out,
          GError **error)
{
  if (json_node_get_value_type(node) != G_TYPE_INT64)
    return json_bad(error, f->key, _("must be a whole number"));
  gint64 v = json_node_get_int(node);
  if (v < min || v > max)
    return json_bad(error, f->key, _("is out of range"));
  *out = v;
  return TRUE;
}

static gboolean
get_strv(const TdmField *f, JsonNode *node, char ***out, GError **error)
{
  if (!JSON_NODE_HOLDS_ARRAY(node))
    return json_bad(error, f->key, _("must be an array of strings"));
  JsonArray *a = json_node_get_array(node);
  guint n = json_array_get_length(a);
  g_auto(GStrv) v = g_new0(char *, n + 1);
  for (guint i = 0; i < n; i++) {
    JsonNode *e = json_array_get_element(a, i);
    if (json_node_get_value_type(e) != G_TYPE_STRING)
      return json_bad(error, f->key, _("must be an array of strings"));
    v[i] = g_strdup(json_node_get_string(e));
  }
  *out = g_steal_pointer(&v);
  return TRUE;
}

static gboolean
get_devices(const TdmField *f, JsonNode *node, gpointer target, GError **error)
{
  g_auto(GStrv) names = NULL;
  if (!get_strv(f, node, &names, error))
    return FALSE;
  guint n = g_strv_length(names);
  if (n < 1 || n > TDM_MAX_REPLICAS) {
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                _("run configuration: field “%s” must list from 1 to %d devices"), f->key,
                TDM_MAX_REPLICAS);
    return FALSE;
  }
  TdmDeviceId ids[TDM_MAX_REPLICAS];
  for (guint i = 0; i < n; i++)
    if (!tdm_device_id_parse(names[i], &ids[i]))
      return json_unknown(error, f->key, names[i]);
  memcpy(AT(target, f, TdmDeviceId), ids, n * sizeof ids[0]);
  *(int *)((char *)target + f->count_offset) = (int)n;
  return TRUE;
}

static gboolean
get_name(const TdmField *f, JsonNode *node, int *out, GError **error)
{
  if (json_node_get_value_type(node) != G_TYPE_STRING)
    return json_bad(error, f->key, _("must be a string"));
  const char *name = json_node_get_string(node);
  if (!tdm_choice_from_name(f->choices(), name, out))
    return json_unknown(error, f->key, name);
  return TRUE;
}

static gboolean
get_seed(const TdmField *f, JsonNode *node, guint64 *out, GError **error)
{
  GType type = json_node_get_value_type(node);
  if (type == G_TYPE_INT64 && json_node_get_int(node) >= 0) {
    *out = (guint64)json_node_get_int(node);
    return TRUE;
  }
  if (type == G_TYPE_STRING &&
      g_ascii_string_to_unsigned(json_node_get_string(node), 10, 0, G_MAXUINT64, out, NULL))
    return TRUE;
  return json_bad(error, f->key, _("must be a non-negative whole number"));
}

/* A number of JSON's: "1" is as good a learning rate as "1.0"; writers differ. */
static gboolean
get_double(JsonNode *node, double *out)
{
  GType type = JSON_NODE_HOLDS_VALUE(node) ? json_node_get_value_type(node) : G_TYPE_INVALID;
  if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
    return FALSE;
  *out = json_node_get_double(node);
  return TRUE;
}

static gboolean
get_numbers(const TdmField *f, JsonNode *node, gpointer target, GError **error)
{
  double values[8];
  g_return_val_if_fail(f->count >= 1 && f->count <= (int)G_N_ELEMENTS(values), FALSE);
  JsonArray *a = JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
  if (a == NULL || json_array_get_length(a) != (guint)f->count)
    return json_bad(error, f->key, f->count == 2 ? _("must be an array of two numbers")
                                                 : _("must be an array of three numbers"));
  for (int i = 0; i < f->count; i++)
    if (!get_double(json_array_get_element(a, (guint)i), &values[i]))
      return json_bad(error, f->key, _("must hold numbers only"));
  memcpy(AT(target, f, double), values, f->count * sizeof values[0]);
  return TRUE;
}

static gboolean
get_value(const TdmField *f, JsonNode *node, gpointer target, GError **error)
{
  gint64 v;
  int choice;
  switch (f->type) {
  case TDM_FIELD_STRING:
    if (JSON_NODE_HOLDS_NULL(node) && (f->flags & TDM_FIELD_JSON_NULLABLE)) {
      g_clear_pointer(AT(target, f, char *), g_free);
      return TRUE;
    }
    if (json_node_get_value_type(node) != G_TYPE_STRING)
      return json_bad(error, f->key, (f->flags & TDM_FIELD_JSON_NULLABLE)
                                         ? _("must be a string or null")
                                         : _("must be a string"));
    g_free(*AT(target, f, char *));
    *AT(target, f, char *) = g_strdup(json_node_get_string(node));
    return TRUE;
  case TDM_FIELD_LIST: {
    char **list = NULL;
    if (!get_strv(f, node, &list, error))
      return FALSE;
    g_strfreev(*AT(target, f, char **));
    *AT(target, f, char **) = list[0] != NULL ? list : (g_strfreev(list), NULL);
    return TRUE;
  }
  case TDM_FIELD_DEVICES:
    return get_devices(f, node, target, error);
  case TDM_FIELD_INT:
    if (f->choices != NULL && !(f->flags & TDM_FIELD_JSON_NUMBER)) {
      if (!get_name(f, node, &choice, error))
        return FALSE;
      *AT(target, f, int) = choice;
      return TRUE;
    }
    if (!get_int64(f, node, G_MININT, G_MAXINT, &v, error))
      return FALSE;
    *AT(target, f, int) = (int)v;
    return TRUE;
  case TDM_FIELD_LONG:
    if (!get_int64(f, node, G_MINLONG, G_MAXLONG, &v, error))
      return FALSE;
    *AT(target, f, long) = (long)v;
    return TRUE;
  case TDM_FIELD_SIZE:
    if (!get_int64(f, node, 0, G_MAXINT64, &v, error))
      return FALSE;
    *AT(target, f, size_t) = (size_t)v;
    return TRUE;
  case TDM_FIELD_SEED:
    return get_seed(f, node, AT(target, f, guint64), error);
  case TDM_FIELD_DOUBLE:
    if (!get_double(node, AT(target, f, double)))
      return json_bad(error, f->key, _("must be a number"));
    return TRUE;
  case TDM_FIELD_NUMBERS:
    return get_numbers(f, node, target, error);
  case TDM_FIELD_BOOL:
    if (json_node_get_value_type(node) != G_TYPE_BOOLEAN)
      return json_bad(error, f->key, _("must be true or false"));
    *AT(target, f, gboolean) = json_node_get_boolean(node);
    return TRUE;
  case TDM_FIELD_CHOICE:
    if (!get_name(f, node, &choice, error))
      return FALSE;
    *AT(target, f, int) = choice;
    return TRUE;
  }
  g_return_val_if_reached(FALSE);
}

gboolean
tdm_fields_from_json(const TdmField *fields, guint n, JsonObject *o, gpointer target,
                     GError **error)
{
  for (guint i = 0; i < n; i++) {
    const TdmField *f = &fields[i];
    if (f->flags & TDM_FIELD_NOT_SAVED)
      continue;
    JsonNode *node = json_object_get_member(o, f->key);
    if (node == NULL) {
      /* Absent: the default, unless every writer has always written it (then a file
       * without it is not ours, and fails loudly instead of training differently). */
      if (f->flags & TDM_FIELD_JSON_REQUIRED)
        return json_bad(error, f->key, _("is missing"));
      continue;
    }
    if (!get_value(f, node, target, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
described(const TdmField *f, gconstpointer target, gconstpointer defaults)
{
  if (!(f->flags & (TDM_FIELD_DESCRIBE | TDM_FIELD_DESCRIBE_WHEN_SET)))
    return FALSE;
  if (f->shown != NULL && !f->shown(target))
    return FALSE;
  return !(f->flags & TDM_FIELD_DESCRIBE_WHEN_SET) || !tdm_field_equal(f, target, defaults);
}

char **
tdm_fields_describe(const TdmField *fields, guint n, gconstpointer target,
                    gconstpointer defaults)
{
  GPtrArray *pairs = g_ptr_array_new();
  for (guint i = 0; i < n; i++) {
    const TdmField *f = &fields[i];
    if (!described(f, target, defaults))
      continue;
    char *value = f->describe != NULL ? f->describe(target) : tdm_field_text(f, target);
    g_ptr_array_add(pairs, g_strdup(f->label != NULL ? f->label : f->key));
    g_ptr_array_add(pairs, value != NULL ? value : g_strdup("unknown"));
  }
  g_ptr_array_add(pairs, NULL);
  return (char **)g_ptr_array_free(pairs, FALSE);
}

char *
tdm_fields_to_flags(const TdmField *fields, guint n, gconstpointer target,
                    gconstpointer defaults)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < n; i++) {
    const TdmField *f = &fields[i];
    if (f->flag == NULL || tdm_field_equal(f, target, defaults))
      continue;
    if (f->type == TDM_FIELD_BOOL && f->choices == NULL) {
      const char *flag = *AT_CONST(target, f, gboolean) ? f->flag : f->no_flag;
      if (flag != NULL)
        g_string_append_printf(s, "%s--%s", s->len ? " " : "", flag);
      continue;
    }
    g_autofree char *value = tdm_field_text(f, target);
    if (value == NULL)
      continue;
    g_autofree char *quoted = strpbrk(value, " '\"\\$;&|") ? g_shell_quote(value)
                                                           : g_strdup(value);
    g_string_append_printf(s, "%s--%s %s", s->len ? " " : "", f->flag, quoted);
  }
  return g_string_free(s, FALSE);
}
