/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-json.h — tandem-train --json: the engine's events as JSON lines.
 *
 * One object a line, "type" first, written and flushed at once so a reader on a
 * pipe sees whole lines as they come; the README lists the members of each type.
 * Numbers the engine does not know (telemetry's negatives, a diverged loss) are null.
 */
#pragma once

#include "tdm-events.h"

G_BEGIN_DECLS

void tdm_cli_print_json_event (const TdmEvent *event);

/* The object a builder holds (begun and ended by the caller) as one line, flushed. */
typedef struct _JsonBuilder JsonBuilder;
void tdm_cli_print_json_object (JsonBuilder *builder);

G_END_DECLS
