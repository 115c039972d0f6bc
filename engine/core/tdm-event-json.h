/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-event-json.h — an engine event as one JSON object: the one serializer that
 * tandem-train --json prints and the run history's files keep, so a line of either
 * reads the same. Not the run files' compact devices and phases lines (tdm-history.c keeps
 * those, a fraction of the spans' size) nor the reading back (tdm-history.c).
 *
 * "type" first; numbers the engine does not know (telemetry's negatives, a diverged
 * loss) are null; the README lists the members of each type.
 */
#pragma once

#include <json-glib/json-glib.h>
#include "tdm-events.h"

G_BEGIN_DECLS

/* The event as a JSON object; every kind has one. */
JsonNode *tdm_event_to_json (const TdmEvent *event);
/* The same, as one line of compact JSON without its newline. Free with g_free(). */
char *tdm_event_to_json_line (const TdmEvent *event);

G_END_DECLS
