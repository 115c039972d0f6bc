/* tdm-format.h: numbers as the window shows them (not as files store them). */

#pragma once

#include <glib.h>

#include "tdm-events.h"

G_BEGIN_DECLS

/* 1796010 → "1,796,010": the locale's separator, or a comma where the locale has
 * none (the C locale); "—" for NaN and infinities. Free with g_free(). */
char *tdm_format_count (double value);

/* A message as a sentence for the window: its first letter upper case, a full stop
 * at the end ("x: no such folder" → "X: no such folder."). Free with g_free(). */
char *tdm_format_sentence (const char *message);

/* A replica as every chart's legend and the CSV export name it: "cpu 1", "cpu 2"
 * where several replicas share a device, else the device's id ("cuda:0"). */
char *tdm_format_replica (const TdmStartedEvent *started,
                          int                    replica);

G_END_DECLS
