/* tdm-json.h — JSON text from json-glib trees.
 *
 * One writer for the engine and its programs (configurations in checkpoints, the
 * CLI's JSON lines, run histories), so every double comes out as valid JSON whatever
 * json-glib's version, and the members every writer sets. Not a parser: json-glib
 * parses.
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The compact text of root; free with g_free. */
char *tdm_json_to_string (JsonNode *root);

/* A member of the open object: a number (null when not finite: JSON has no NaN),
 * an integer, a string. */
void tdm_json_set_double (JsonBuilder *builder, const char *name, double value);
void tdm_json_set_int (JsonBuilder *builder, const char *name, gint64 value);
void tdm_json_set_string (JsonBuilder *builder, const char *name, const char *value);

G_END_DECLS
