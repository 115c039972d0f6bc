/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-json.c — JSON text from json-glib trees that every parser accepts, and text
 * parsed once its nesting is known to be shallow. */
#include "tdm-json.h"
#include "tdm-i18n.h"
#include "tdm-error.h"
#include "tdm-printable.h"

#include <math.h>
#include <string.h>

/* json-glib before 1.8 writes 1e-08 as "1e-08.0", which no JSON parser accepts (its
 * own included). This drops such a ".0" outside strings; where json-glib is fixed it
 * finds nothing to do. */
static void
fix_exponents(char *text)
{
  gboolean in_string = FALSE;
  char prev = '\0';
  char *w = text;
  const char *r = text;
  while (*r) {
    char ch = *r++;
    *w++ = ch;
    if (in_string) {
      if (ch == '\\' && *r)
        *w++ = *r++;
      else if (ch == '"')
        in_string = FALSE;
    } else if (ch == '"') {
      in_string = TRUE;
    } else if ((ch == 'e' || ch == 'E') && g_ascii_isdigit(prev)) {
      if (*r == '+' || *r == '-')
        *w++ = *r++;
      while (g_ascii_isdigit(*r))
        *w++ = *r++;
      if (r[0] == '.' && r[1] == '0' && !g_ascii_isdigit(r[2]))
        r += 2;
    }
    prev = ch;
  }
  *w = '\0';
}

char *
tdm_json_to_string(JsonNode *root)
{
  g_autoptr(JsonGenerator) gen = json_generator_new();
  json_generator_set_root(gen, root);
  char *text = json_generator_to_data(gen, NULL);
  fix_exponents(text);
  return text;
}

void
tdm_json_set_double(JsonBuilder *b, const char *name, double v)
{
  json_builder_set_member_name(b, name);
  if (isfinite(v))
    json_builder_add_double_value(b, v);
  else
    json_builder_add_null_value(b);
}

void
tdm_json_set_int(JsonBuilder *b, const char *name, gint64 v)
{
  json_builder_set_member_name(b, name);
  json_builder_add_int_value(b, v);
}

void
tdm_json_set_string(JsonBuilder *b, const char *name, const char *v)
{
  json_builder_set_member_name(b, name);
  json_builder_add_string_value(b, v);
}

/* The deepest nesting of [ and { outside strings, counting only up to limit + 1. */
static int
nesting_depth(const char *text, gsize length, int limit)
{
  int depth = 0, deepest = 0;
  gboolean in_string = FALSE;
  for (gsize i = 0; i < length; i++) {
    char ch = text[i];
    if (in_string) {
      if (ch == '\\')
        i++;
      else if (ch == '"')
        in_string = FALSE;
    } else if (ch == '"') {
      in_string = TRUE;
    } else if (ch == '[' || ch == '{') {
      if (++depth > deepest && (deepest = depth) > limit)
        return deepest;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      depth--;
    }
  }
  return deepest;
}

gboolean
tdm_json_too_deep(const char *text, gsize length)
{
  return nesting_depth(text, length, TDM_JSON_MAX_DEPTH) > TDM_JSON_MAX_DEPTH;
}

JsonNode *
tdm_json_parse(const char *text, gssize length, int code, GError **error)
{
  g_return_val_if_fail(text != NULL, NULL);
  gsize len = length < 0 ? strlen(text) : (gsize)length;
  if (tdm_json_too_deep(text, len)) {
    g_set_error(error, TDM_ENGINE_ERROR, code,
                _("arrays and objects nest deeper than %d levels"), TDM_JSON_MAX_DEPTH);
    return NULL;
  }
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) local = NULL;
  if (!json_parser_load_from_data(parser, text, (gssize)len, &local)) {
    /* json-glib quotes the offending token raw: a newline or an escape sequence in
     * the file would reach the one-line message as it is. */
    g_autofree char *message = tdm_printable(local->message);
    g_set_error(error, TDM_ENGINE_ERROR, code, "%s", message);
    return NULL;
  }
  JsonNode *root = json_parser_steal_root(parser);
  /* Empty text: a null, for the caller to find it is not what it expected. */
  return root != NULL ? root : json_node_new(JSON_NODE_NULL);
}
