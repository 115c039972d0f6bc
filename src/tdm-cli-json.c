/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-json.c — tandem-train --json: each engine event as one JSON line on
 * stdout (see tdm-cli-json.h), written by the engine's serializer (tdm-event-json.h)
 * that the run files use too. Not the human-readable output (tandem-train.c). */
#include "tdm-cli-json.h"
#include "tdm-event-json.h"
#include "tdm-json.h"

#include <json-glib/json-glib.h>
#include <stdio.h>

void
tdm_cli_print_json_event(const TdmEvent *ev)
{
  g_autofree char *line = tdm_event_to_json_line(ev);
  if (line == NULL)
    return;
  /* One write per line, flushed, so a reader piped to us sees whole lines live. */
  printf("%s\n", line);
  fflush(stdout);
}

void
tdm_cli_print_json_object(JsonBuilder *builder)
{
  g_autoptr(JsonNode) root = json_builder_get_root(builder);
  g_autofree char *line = tdm_json_to_string(root);
  printf("%s\n", line);
  fflush(stdout);
}
