/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-choice.h — the names of the choices a run makes, from their GEnums.
 *
 * Every enum in tdm-config.h and the precision in tdm-backend.h is registered as a
 * GEnum by glib-mkenums (tdm-enum-types.h, generated); a value's nick is the name
 * users type (--optimizer sgd, the GSettings choice, the JSON field). These helpers
 * are the one reading of them: the engine's name functions, the CLI's help and
 * messages and the window's drop-downs go through them. Not the values' titles for
 * menus (the window's, translated) nor the defaults (tdm_config_new()).
 */
#pragma once

#include <glib-object.h>
#include "tdm-enum-types.h"

G_BEGIN_DECLS

/* The name of `value` in the enum `type`, or NULL when it has none. */
const char *tdm_choice_name (GType type, int value);
/* The value called `name`; FALSE (and *value untouched) for an unknown name. */
gboolean tdm_choice_from_name (GType type, const char *name, int *value);
/* How many values `type` has; they run from 0 to count − 1 (tdm_choice_name of each). */
guint tdm_choice_count (GType type);
/* The names of every value of `type`, in the enum's order, NULL-terminated (the
 * strings are the enum's; free the array with g_free()). */
const char **tdm_choice_names (GType type);
/* "sgd, momentum, adam or nesterov", in the enum's order, for help and messages;
 * `default_value` ≥ 0 marks that one "(default)". Free with g_free(). */
char *tdm_choice_list (GType type, int default_value);

/* Defines PREFIX_name (Type) and PREFIX_from_name (name, Type *) over the GEnum `gtype`:
 * the typed name functions of one enum, with nothing of their own to keep in step. */
#define TDM_CHOICE_NAMES(Type, prefix, gtype)                                             \
  const char *prefix##_name (Type v)                                                     \
  {                                                                                      \
    return tdm_choice_name ((gtype), (int) v);                                           \
  }                                                                                      \
  gboolean prefix##_from_name (const char *name, Type *out)                              \
  {                                                                                      \
    int v;                                                                               \
    if (name == NULL || !tdm_choice_from_name ((gtype), name, &v))                       \
      return FALSE;                                                                      \
    *out = (Type) v;                                                                     \
    return TRUE;                                                                         \
  }

G_END_DECLS
