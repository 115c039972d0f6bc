/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-printable.h — text from outside (file, folder, class and run names, messages that
 * quote them) made safe to print on a terminal or in a one-line record.
 *
 * A name may hold an escape sequence that recolours the screen or moves the cursor, a
 * newline that forges another output line, or bytes that are not UTF-8. Whoever prints
 * such a text on a line of its own passes it through here first. Not for JSON (its
 * writer escapes) nor for the window (labels show text, they do not obey it).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The text with every control character (C0 — newlines and ESC included — DEL and C1)
 * written as \xHH or \uHHHH, and each byte that is not UTF-8 as \xHH. Free with
 * g_free. */
char *tdm_printable (const char *text);

G_END_DECLS
