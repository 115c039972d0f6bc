/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-printable.c — control characters and stray bytes written out as escapes
 * (tdm-printable.h). */
#include "tdm-printable.h"

#include <string.h>

char *
tdm_printable(const char *text)
{
  g_return_val_if_fail(text != NULL, NULL);
  GString *out = g_string_sized_new(strlen(text));
  const char *p = text;
  while (*p != '\0') {
    gunichar ch = g_utf8_get_char_validated(p, -1);
    if (ch == (gunichar)-1 || ch == (gunichar)-2) {
      g_string_append_printf(out, "\\x%02x", (guchar)*p);
      p++;
      continue;
    }
    if (ch < 0x20 || ch == 0x7f || (ch >= 0x80 && ch < 0xa0))
      g_string_append_printf(out, ch < 0x80 ? "\\x%02x" : "\\u%04x", ch);
    else
      g_string_append_unichar(out, ch);
    p = g_utf8_next_char(p);
  }
  return g_string_free(out, FALSE);
}
