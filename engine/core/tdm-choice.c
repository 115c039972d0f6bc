/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-choice.c — names of the choices, read from their GEnums (tdm-choice.h). Not
 * the tables themselves: glib-mkenums writes them from the headers' enums.
 */
#include "tdm-choice.h"
#include "tdm-i18n.h"

/* The class of a static enum type lives as long as the program once referenced, so
 * the nicks it points to can be returned. */
static GEnumClass *
enum_class(GType type)
{
  g_return_val_if_fail(G_TYPE_IS_ENUM(type), NULL);
  GEnumClass *klass = g_type_class_peek(type);
  return klass != NULL ? klass : g_type_class_ref(type);
}

const char *
tdm_choice_name(GType type, int value)
{
  GEnumClass *klass = enum_class(type);
  GEnumValue *v = klass != NULL ? g_enum_get_value(klass, value) : NULL;
  return v != NULL ? v->value_nick : NULL;
}

gboolean
tdm_choice_from_name(GType type, const char *name, int *value)
{
  g_return_val_if_fail(value != NULL, FALSE);
  GEnumClass *klass = enum_class(type);
  if (klass == NULL || name == NULL)
    return FALSE;
  GEnumValue *v = g_enum_get_value_by_nick(klass, name);
  if (v == NULL)
    return FALSE;
  *value = v->value;
  return TRUE;
}

guint
tdm_choice_count(GType type)
{
  GEnumClass *klass = enum_class(type);
  return klass != NULL ? klass->n_values : 0;
}

const char **
tdm_choice_names(GType type)
{
  GEnumClass *klass = enum_class(type);
  guint n = klass != NULL ? klass->n_values : 0;
  const char **names = g_new0(const char *, n + 1);
  for (guint i = 0; i < n; i++)
    names[i] = klass->values[i].value_nick;
  return names;
}

char *
tdm_choice_list(GType type, int default_value)
{
  GEnumClass *klass = enum_class(type);
  g_return_val_if_fail(klass != NULL && klass->n_values > 0, g_strdup(""));
  GString *list = g_string_new(NULL);
  for (guint i = 0; i < klass->n_values; i++) {
    const GEnumValue *v = &klass->values[i];
    if (i > 0)
      /* TRANSLATORS: between the names of choices: "sgd, momentum, adam or nesterov"
       * (", " between the others, " or " before the last). */
      g_string_append(list, i + 1 < klass->n_values ? _(", ") : _(" or "));
    g_string_append(list, v->value_nick);
    if (v->value == default_value)
      g_string_append_printf(list, " %s", _("(default)"));
  }
  return g_string_free(list, FALSE);
}
