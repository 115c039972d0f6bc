/* tdm-format.h: numbers as the window shows them (not as files store them). */

#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* 1796010 → "1,796,010": the locale's separator, or a comma where the locale has
 * none (the C locale); "—" for NaN and infinities. Free with g_free(). */
char *tdm_format_count (double value);

G_END_DECLS
