/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-flags.c — GOption entries from field rows, and the flags given applied row
 * by row (tdm-cli-flags.h). */
#include "tdm-build-config.h"
#include <glib/gi18n.h>
#include "tdm-cli-flags.h"

#include "tdm-error.h"

typedef struct {
  char *text;              /* a value's text */
  char **list;             /* a LIST's values, each maybe "a,b" */
  gboolean on, off;        /* a switch, and its --no- flag */
  char *help;              /* kept for GOption, which keeps the pointer */
} Given;

struct _TdmCliFlags {
  const TdmField *fields;
  guint n;
  gconstpointer defaults;
  Given *given;
};

TdmCliFlags *
tdm_cli_flags_new(const TdmField *fields, guint n, gconstpointer defaults)
{
  TdmCliFlags *flags = g_new0(TdmCliFlags, 1);
  flags->fields = fields;
  flags->n = n;
  flags->defaults = defaults;
  flags->given = g_new0(Given, n);
  return flags;
}

void
tdm_cli_flags_free(TdmCliFlags *flags)
{
  if (flags == NULL)
    return;
  for (guint i = 0; i < flags->n; i++) {
    g_free(flags->given[i].text);
    g_strfreev(flags->given[i].list);
    g_free(flags->given[i].help);
  }
  g_free(flags->given);
  g_free(flags);
}

static gboolean
is_switch(const TdmField *f)
{
  return f->type == TDM_FIELD_BOOL && f->choices == NULL;
}

static gboolean
named(const TdmField *f, const char *const *keys)
{
  if (keys == NULL)
    return TRUE;
  for (int i = 0; keys[i] != NULL; i++)
    if (g_str_equal(keys[i], f->key) || (f->flag != NULL && g_str_equal(keys[i], f->flag)))
      return TRUE;
  return FALSE;
}

void
tdm_cli_flags_add_entries(TdmCliFlags *flags, GArray *entries, const char *const *keys)
{
  for (guint i = 0; i < flags->n; i++) {
    const TdmField *f = &flags->fields[i];
    Given *g = &flags->given[i];
    if (f->flag == NULL || f->help == NULL || !named(f, keys))
      continue;
    if (g->help == NULL)
      g->help = tdm_field_help(f, flags->defaults);
    GOptionEntry entry = {f->flag, f->short_flag, 0, G_OPTION_ARG_STRING, &g->text, g->help,
                          f->arg};
    if (is_switch(f)) {
      entry.arg = G_OPTION_ARG_NONE;
      entry.arg_data = &g->on;
      entry.arg_description = NULL;
    } else if (f->type == TDM_FIELD_LIST) {
      entry.arg = G_OPTION_ARG_STRING_ARRAY;
      entry.arg_data = &g->list;
    } else if (f->flags & TDM_FIELD_FILE) {
      entry.arg = G_OPTION_ARG_FILENAME;
    }
    g_array_append_val(entries, entry);
    if (is_switch(f) && f->no_flag != NULL) {
      GOptionEntry off = {f->no_flag, 0, 0, G_OPTION_ARG_NONE, &g->off,
                          g_intern_string(tdm_field_no_help(f)), NULL};
      g_array_append_val(entries, off);
    }
  }
}

static const Given *
find(const TdmCliFlags *flags, const char *key)
{
  const TdmField *f = tdm_fields_find(flags->fields, flags->n, key);
  g_return_val_if_fail(f != NULL, NULL);
  return &flags->given[f - flags->fields];
}

static gboolean
given(const Given *g)
{
  return g->text != NULL || g->list != NULL || g->on || g->off;
}

gboolean
tdm_cli_flags_given(const TdmCliFlags *flags, const char *key)
{
  const Given *g = find(flags, key);
  return g != NULL && given(g);
}

const char *
tdm_cli_flags_text(const TdmCliFlags *flags, const char *key)
{
  const Given *g = find(flags, key);
  return g != NULL ? g->text : NULL;
}

char *
tdm_cli_flags_given_outside(const TdmCliFlags *flags, const char *const *keys)
{
  for (guint i = 0; i < flags->n; i++) {
    const TdmField *f = &flags->fields[i];
    const Given *g = &flags->given[i];
    if (given(g) && !named(f, keys))
      return g_strconcat("--", g->off && !g->on ? f->no_flag : f->flag, NULL);
  }
  return NULL;
}

gboolean
tdm_cli_flags_apply(const TdmCliFlags *flags, gpointer target, GError **error)
{
  for (guint i = 0; i < flags->n; i++) {
    const TdmField *f = &flags->fields[i];
    const Given *g = &flags->given[i];
    if (is_switch(f)) {
      if (g->on && g->off) {
        g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                    _("--%s and --%s: give one of them"), f->flag, f->no_flag);
        return FALSE;
      }
      if (g->on || g->off)
        *(gboolean *)((char *)target + f->offset) = g->on;
    } else if (g->list != NULL) {
      tdm_field_set_list(f, target, (const char *const *)g->list);
    } else if (g->text != NULL && !tdm_field_parse(f, target, g->text, error)) {
      return FALSE;
    }
  }
  return TRUE;
}

gboolean
tdm_cli_flags_set(TdmCliFlags *flags, const char *key, const char *text)
{
  const TdmField *f = tdm_fields_find(flags->fields, flags->n, key);
  g_return_val_if_fail(f != NULL && !is_switch(f), FALSE);
  Given *g = &flags->given[f - flags->fields];
  g_free(g->text);
  g->text = g_strdup(text);
  return TRUE;
}
