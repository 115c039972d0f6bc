/* SPDX-License-Identifier: GPL-3.0-or-later */
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

/* How deep arrays and objects may nest in anything Tandem reads: its own files nest
 * a few levels; json-glib recurses once per level (in parsing and in freeing), so a
 * hostile file 100,000 levels deep would overflow the stack. */
#define TDM_JSON_MAX_DEPTH 64

/* Parses `length` bytes of text (−1: up to its NUL) with json-glib once a scan has
 * found no nesting deeper than TDM_JSON_MAX_DEPTH. NULL with an error (in
 * TDM_ENGINE_ERROR, `code`) whose message says what is wrong, without naming the
 * source: callers prefix it with the file. Empty text gives a null node. Free the
 * node with json_node_unref. */
JsonNode *tdm_json_parse (const char *text, gssize length, int code, GError **error);
/* Whether `length` bytes of text nest arrays and objects deeper than
 * TDM_JSON_MAX_DEPTH (outside strings): what tdm_json_parse refuses first. */
gboolean tdm_json_too_deep (const char *text, gsize length);

G_END_DECLS
