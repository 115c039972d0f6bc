/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-field.c — what is done with a row of a settings table, once for every row
 * (tdm-field.h): defaults, reading typed text, checks, text, help and equality. JSON
 * and the description are in tdm-field-json.c.
 */
#include "tdm-field.h"
#include "tdm-choice.h"
#include "tdm-device-id.h"
#include "tdm-error.h"
#include "tdm-i18n.h"
#include "tdm-suggest.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* A row's text in its own translation domain. */
static const char *
tr(const TdmField *f, const char *text)
{
  return f->domain != NULL ? g_dgettext(f->domain, text) : _(text);
}

#define AT(target, field, type) ((type *)((char *)(target) + (field)->offset))
#define AT_CONST(target, field, type) ((type const *)((const char *)(target) + (field)->offset))

const TdmField *
tdm_fields_find(const TdmField *fields, guint n, const char *key)
{
  g_return_val_if_fail(key != NULL, NULL);
  for (guint i = 0; i < n; i++)
    if (g_str_equal(fields[i].key, key))
      return &fields[i];
  for (guint i = 0; i < n; i++)
    if (fields[i].flag != NULL && g_str_equal(fields[i].flag, key))
      return &fields[i];
  return NULL;
}

/* What messages call the field: its flag, or its key when it has none. */
static char *
label(const TdmField *f)
{
  return f->flag != NULL ? g_strconcat("--", f->flag, NULL) : g_strdup(f->key);
}

static int *
devices_count(const TdmField *f, gpointer target)
{
  return (int *)((char *)target + f->count_offset);
}

static const int *
devices_count_const(const TdmField *f, gconstpointer target)
{
  return (const int *)((const char *)target + f->count_offset);
}

/* A GEnum's value by name: FALSE with "--flip: unknown value “maybe” (choose auto, on
 * or off)", and the nearest name when one is near ("did you mean adam?"). */
static gboolean
parse_choice(const TdmField *f, const char *text, int *value, GError **error)
{
  GType type = f->choices();
  if (tdm_choice_from_name(type, text, value))
    return TRUE;
  g_autofree char *name = label(f);
  g_autofree char *choices = tdm_choice_list(type, -1);
  g_autofree const char **names = tdm_choice_names(type);
  const char *near = tdm_suggest(text, names, -1);
  if (near != NULL)
    return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION,
                         _("%s: unknown value “%s”; did you mean %s? (choose %s)"), name, text,
                         near, choices);
  return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION, _("%s: unknown value “%s” (choose %s)"),
             name, text, choices);
}

static gboolean
parse_signed(const TdmField *f, const char *text, gint64 min, gint64 max, gint64 *out,
             GError **error)
{
  if (g_ascii_string_to_signed(text, 10, min, max, out, NULL))
    return TRUE;
  g_autofree char *name = label(f);
  return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION, _("%s: “%s” is not a whole number"),
             name, text);
}

static gboolean
parse_unsigned(const TdmField *f, const char *text, guint64 max, guint64 *out,
               GError **error)
{
  if (g_ascii_string_to_unsigned(text, 10, 0, max, out, NULL))
    return TRUE;
  g_autofree char *name = label(f);
  return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION,
             _("%s: “%s” is not a non-negative whole number"), name, text);
}

static gboolean
parse_double(const TdmField *f, const char *text, double *out, GError **error)
{
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod(text, &end);
  if (*text != '\0' && !g_ascii_isspace(*text) && *end == '\0' && errno != ERANGE &&
      isfinite(v)) {
    *out = v;
    return TRUE;
  }
  g_autofree char *name = label(f);
  return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION, _("%s: “%s” is not a number"), name,
             text);
}

/* "a,b" given once or repeated: one list, NULL when empty. */
static char **
split_list(const char *const *given)
{
  g_autoptr(GStrvBuilder) all = g_strv_builder_new();
  guint n = 0;
  for (int i = 0; given != NULL && given[i] != NULL; i++) {
    g_auto(GStrv) parts = g_strsplit(given[i], ",", -1);
    for (int k = 0; parts[k] != NULL; k++)
      if (*g_strstrip(parts[k]) != '\0') {
        g_strv_builder_add(all, parts[k]);
        n++;
      }
  }
  return n > 0 ? g_strv_builder_end(all) : NULL;
}

gboolean
tdm_field_set_list(const TdmField *f, gpointer target, const char *const *given)
{
  g_return_val_if_fail(f->type == TDM_FIELD_LIST, FALSE);
  char ***list = AT(target, f, char **);
  g_strfreev(*list);
  *list = split_list(given);
  return TRUE;
}

static gboolean
parse_devices(const TdmField *f, gpointer target, const char *text, GError **error)
{
  TdmDeviceId ids[TDM_MAX_REPLICAS];
  int count = 0;
  if (!tdm_device_list_parse(text, ids, TDM_MAX_REPLICAS, &count, error))
    return FALSE;
  memcpy(AT(target, f, TdmDeviceId), ids, count * sizeof ids[0]);
  *devices_count(f, target) = count;
  return TRUE;
}

/* "a,b" (count numbers, or one for all with TDM_FIELD_ONE_FOR_ALL); the field is
 * written only when every number reads. */
static gboolean
parse_numbers(const TdmField *f, gpointer target, const char *text, GError **error)
{
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  int given = (int)g_strv_length(parts);
  double values[8];
  g_return_val_if_fail(f->count >= 1 && f->count <= (int)G_N_ELEMENTS(values), FALSE);
  if (given != f->count && !(given == 1 && (f->flags & TDM_FIELD_ONE_FOR_ALL))) {
    g_autofree char *name = label(f);
    if (f->flags & TDM_FIELD_ONE_FOR_ALL)
      return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION,
                           _("%s: “%s”: expected one number or %d, %s"), name, text, f->count,
                           f->arg);
    return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION,
                         _("%s: “%s”: expected %d numbers, %s"), name, text, f->count, f->arg);
  }
  for (int i = 0; i < f->count; i++)
    if (!parse_double(f, g_strstrip(parts[given == 1 ? 0 : i]), &values[i], error))
      return FALSE;
  memcpy(AT(target, f, double), values, f->count * sizeof values[0]);
  return TRUE;
}

gboolean
tdm_field_parse(const TdmField *f, gpointer target, const char *text, GError **error)
{
  g_return_val_if_fail(f != NULL && target != NULL && text != NULL, FALSE);
  gint64 s;
  guint64 u;
  double d = 0;
  int v;

  switch (f->type) {
  case TDM_FIELD_STRING:
    g_free(*AT(target, f, char *));
    *AT(target, f, char *) = g_strdup(text);
    return TRUE;
  case TDM_FIELD_LIST: {
    const char *given[] = {text, NULL};
    return tdm_field_set_list(f, target, given);
  }
  case TDM_FIELD_DEVICES:
    return parse_devices(f, target, text, error);
  case TDM_FIELD_INT:
    if (f->choices != NULL) {
      if (!parse_choice(f, text, &v, error))
        return FALSE;
      *AT(target, f, int) = v;
      return TRUE;
    }
    if (!parse_signed(f, text, G_MININT, G_MAXINT, &s, error))
      return FALSE;
    *AT(target, f, int) = (int)s;
    return TRUE;
  case TDM_FIELD_LONG:
    if (!parse_signed(f, text, G_MINLONG, G_MAXLONG, &s, error))
      return FALSE;
    *AT(target, f, long) = (long)s;
    return TRUE;
  case TDM_FIELD_SEED:
    if (!parse_unsigned(f, text, G_MAXUINT64, &u, error))
      return FALSE;
    *AT(target, f, guint64) = u;
    return TRUE;
  case TDM_FIELD_SIZE:
    if (!parse_unsigned(f, text, G_MAXSIZE, &u, error))
      return FALSE;
    *AT(target, f, size_t) = (size_t)u;
    return TRUE;
  case TDM_FIELD_DOUBLE:
    if (!parse_double(f, text, &d, error))
      return FALSE;
    *AT(target, f, double) = d;
    return TRUE;
  case TDM_FIELD_NUMBERS:
    return parse_numbers(f, target, text, error);
  case TDM_FIELD_BOOL:
    if (f->choices != NULL) {
      if (!parse_choice(f, text, &v, error))
        return FALSE;
      *AT(target, f, gboolean) = v != 0;
      return TRUE;
    }
    if (!g_str_equal(text, "true") && !g_str_equal(text, "false")) {
      g_autofree char *name = label(f);
      return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION, _("%s: “%s” is not true or false"),
                 name, text);
    }
    *AT(target, f, gboolean) = g_str_equal(text, "true");
    return TRUE;
  case TDM_FIELD_CHOICE:
    if (!parse_choice(f, text, &v, error))
      return FALSE;
    *AT(target, f, int) = v;
    return TRUE;
  }
  g_return_val_if_reached(FALSE);
}

void
tdm_fields_init(const TdmField *fields, guint n, gpointer target)
{
  for (guint i = 0; i < n; i++) {
    if (fields[i].fallback == NULL)
      continue;
    g_autoptr(GError) error = NULL;
    /* A table's own default that does not parse is a mistake in the table. */
    if (!tdm_field_parse(&fields[i], target, fields[i].fallback, &error))
      g_error("default of “%s”: %s", fields[i].key, error->message);
  }
}

void
tdm_fields_clear(const TdmField *fields, guint n, gpointer target)
{
  for (guint i = 0; i < n; i++) {
    if (fields[i].type == TDM_FIELD_STRING)
      g_clear_pointer(AT(target, &fields[i], char *), g_free);
    else if (fields[i].type == TDM_FIELD_LIST)
      g_clear_pointer(AT(target, &fields[i], char **), g_strfreev);
  }
}

void
tdm_fields_copy(const TdmField *fields, guint n, gpointer to, gconstpointer from)
{
  for (guint i = 0; i < n; i++) {
    const TdmField *f = &fields[i];
    if (f->type == TDM_FIELD_STRING)
      *AT(to, f, char *) = g_strdup(*AT_CONST(from, f, char *));
    else if (f->type == TDM_FIELD_LIST)
      *AT(to, f, char **) = g_strdupv(*AT_CONST(from, f, char **));
  }
}

/* A number field's value as a double, for its range. */
static gboolean
number(const TdmField *f, gconstpointer target, double *out)
{
  switch (f->type) {
  case TDM_FIELD_INT:
    *out = *AT_CONST(target, f, int);
    return f->choices == NULL;
  case TDM_FIELD_LONG:
    *out = (double)*AT_CONST(target, f, long);
    return TRUE;
  case TDM_FIELD_SIZE:
    *out = (double)*AT_CONST(target, f, size_t);
    return TRUE;
  case TDM_FIELD_DOUBLE:
    *out = *AT_CONST(target, f, double);
    return TRUE;
  default:
    return FALSE;
  }
}

static char *
format_number(double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_strdup(g_ascii_formatd(buf, sizeof buf, "%g", v));
}

static gboolean
in_range(const TdmField *f, double v)
{
  if (!isfinite(v))
    return FALSE;
  if (f->min == 0 && f->max == 0)
    return TRUE;
  if ((f->flags & TDM_FIELD_ZERO_OFF) && v == 0)
    return TRUE;
  gboolean above = (f->flags & TDM_FIELD_MIN_OPEN) ? v > f->min : v >= f->min;
  gboolean below = (f->flags & TDM_FIELD_MAX_OPEN) ? v < f->max : v <= f->max;
  return above && below;
}

/* The range, the choice and the string checks of one row. */
static gboolean
field_check(const TdmField *f, gconstpointer target, GError **error)
{
  g_autofree char *name = label(f);
  double v;

  if (f->type == TDM_FIELD_STRING) {
    const char *s = *AT_CONST(target, f, char *);
    if ((s == NULL && (f->flags & TDM_FIELD_REQUIRED)) || (s != NULL && *s == '\0' && f->check))
      return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION, "%s: %s", name, tr(f, f->check));
    return TRUE;
  }
  if (f->choices != NULL && f->type != TDM_FIELD_BOOL) {
    int value = *AT_CONST(target, f, int);
    if (tdm_choice_name(f->choices(), value) != NULL)
      return TRUE;
    g_autofree char *choices = tdm_choice_list(f->choices(), -1);
    return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION, _("%s: unknown value %d (choose %s)"),
               name, value, choices);
  }
  if (f->type == TDM_FIELD_NUMBERS) {
    gboolean ok = TRUE;
    for (int i = 0; i < f->count; i++)
      ok = ok && in_range(f, AT_CONST(target, f, double)[i]);
    if (ok)
      return TRUE;
  } else if (!number(f, target, &v) || in_range(f, v)) {
    return TRUE;
  }
  g_autofree char *value = tdm_field_text(f, target);
  g_autofree char *min = format_number(f->min);
  g_autofree char *max = format_number(f->max);
  /* The check names the bounds it needs, in order; printf ignores the ones after. */
  if (f->flags & TDM_FIELD_CHECK_SAYS_VALUE) {
    g_autofree char *why = g_strdup_printf(tr(f, f->check), value, min, max);
    return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION, "%s: %s", name, why);
  }
  g_autofree char *why = f->check != NULL ? g_strdup_printf(tr(f, f->check), min, max)
                                          : g_strdup_printf(_("give %s to %s"), min, max);
  return tdm_error_set(error, TDM_ENGINE_ERROR_INVALID_OPTION, "%s %s: %s", name, value, why);
}

gboolean
tdm_fields_check(const TdmField *fields, guint n, gconstpointer target, GError **error)
{
  for (guint i = 0; i < n; i++)
    if (!field_check(&fields[i], target, error))
      return FALSE;
  return TRUE;
}

char *
tdm_field_text(const TdmField *f, gconstpointer target)
{
  switch (f->type) {
  case TDM_FIELD_STRING:
    return g_strdup(*AT_CONST(target, f, char *));
  case TDM_FIELD_LIST: {
    char *const *list = *AT_CONST(target, f, char **);
    return list != NULL ? g_strjoinv(",", (char **)list) : NULL;
  }
  case TDM_FIELD_DEVICES:
    return tdm_device_list_join(AT_CONST(target, f, TdmDeviceId), *devices_count_const(f, target));
  case TDM_FIELD_INT:
    if (f->choices != NULL)
      return g_strdup(tdm_choice_name(f->choices(), *AT_CONST(target, f, int)));
    return g_strdup_printf("%d", *AT_CONST(target, f, int));
  case TDM_FIELD_LONG:
    return g_strdup_printf("%ld", *AT_CONST(target, f, long));
  case TDM_FIELD_SEED:
    return g_strdup_printf("%" G_GUINT64_FORMAT, *AT_CONST(target, f, guint64));
  case TDM_FIELD_SIZE:
    return g_strdup_printf("%" G_GSIZE_FORMAT, *AT_CONST(target, f, size_t));
  case TDM_FIELD_DOUBLE:
    return format_number(*AT_CONST(target, f, double));
  case TDM_FIELD_NUMBERS: {
    GString *text = g_string_new(NULL);
    for (int i = 0; i < f->count; i++) {
      g_autofree char *one = format_number(AT_CONST(target, f, double)[i]);
      g_string_append_printf(text, "%s%s", i ? "," : "", one);
    }
    return g_string_free(text, FALSE);
  }
  case TDM_FIELD_BOOL: {
    gboolean b = *AT_CONST(target, f, gboolean);
    if (f->choices != NULL)
      return g_strdup(tdm_choice_name(f->choices(), b ? 1 : 0));
    return g_strdup(b ? "true" : "false");
  }
  case TDM_FIELD_CHOICE:
    return g_strdup(tdm_choice_name(f->choices(), *AT_CONST(target, f, int)));
  }
  g_return_val_if_reached(NULL);
}

gboolean
tdm_field_equal(const TdmField *f, gconstpointer a, gconstpointer b)
{
  switch (f->type) {
  case TDM_FIELD_STRING:
    return g_strcmp0(*AT_CONST(a, f, char *), *AT_CONST(b, f, char *)) == 0;
  case TDM_FIELD_LIST: {
    char *const *x = *AT_CONST(a, f, char **);
    char *const *y = *AT_CONST(b, f, char **);
    if (x == NULL || y == NULL)
      return x == y;
    return g_strv_equal((const char *const *)x, (const char *const *)y);
  }
  case TDM_FIELD_DEVICES: {
    int n = *devices_count_const(f, a);
    if (n != *devices_count_const(f, b))
      return FALSE;
    for (int i = 0; i < n; i++)
      if (!tdm_device_id_equal(AT_CONST(a, f, TdmDeviceId)[i], AT_CONST(b, f, TdmDeviceId)[i]))
        return FALSE;
    return TRUE;
  }
  case TDM_FIELD_INT:
  case TDM_FIELD_CHOICE:
    return *AT_CONST(a, f, int) == *AT_CONST(b, f, int);
  case TDM_FIELD_BOOL:
    return !*AT_CONST(a, f, gboolean) == !*AT_CONST(b, f, gboolean);
  case TDM_FIELD_LONG:
    return *AT_CONST(a, f, long) == *AT_CONST(b, f, long);
  case TDM_FIELD_SEED:
    return *AT_CONST(a, f, guint64) == *AT_CONST(b, f, guint64);
  case TDM_FIELD_SIZE:
    return *AT_CONST(a, f, size_t) == *AT_CONST(b, f, size_t);
  case TDM_FIELD_DOUBLE:
    return *AT_CONST(a, f, double) == *AT_CONST(b, f, double);
  case TDM_FIELD_NUMBERS:
    return memcmp(AT_CONST(a, f, double), AT_CONST(b, f, double),
                  f->count * sizeof(double)) == 0;
  }
  g_return_val_if_reached(FALSE);
}

char *
tdm_field_help(const TdmField *f, gconstpointer defaults)
{
  g_return_val_if_fail(f->help != NULL, g_strdup(""));
  g_autofree char *value = NULL;
  if (f->default_text != NULL)
    value = f->default_text();
  else if (f->choices != NULL)
    value = tdm_choice_list(f->choices(), f->type == TDM_FIELD_BOOL
                                              ? (*AT_CONST(defaults, f, gboolean) ? 1 : 0)
                                              : *AT_CONST(defaults, f, int));
  else
    value = tdm_field_text(f, defaults);
  /* A help line without a %s takes no default; printf ignores the argument. */
  return g_strdup_printf(tr(f, f->help), value != NULL ? value : (f->flags & TDM_FIELD_NULL_NONE)
                                                              ? "none" : "");
}

const char *
tdm_field_no_help(const TdmField *f)
{
  return f->no_help != NULL ? tr(f, f->no_help) : "";
}
