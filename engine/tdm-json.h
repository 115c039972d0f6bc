/* tdm-json.h — JSON text from json-glib trees.
 *
 * One writer for the engine and its programs (configurations in checkpoints, the
 * CLI's JSON lines), so every double comes out as valid JSON whatever json-glib's
 * version. Not a parser: json-glib parses.
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The compact text of root; free with g_free. */
char *tdm_json_to_string (JsonNode *root);

G_END_DECLS
