/* tdm-format.c: numbers and names as the window shows them.
 *
 * One place for how counts read, so the status line, the dataset facts and the
 * network's size agree, and for how a replica is called, so the legends and the CSV
 * columns agree. Not for numbers in files: exports write plain numbers.
 */

#include <locale.h>
#include <math.h>
#include <string.h>

#include <glib/gi18n.h>

#include "tdm-format.h"

/* Whole numbers in groups of three: the locale's separator, or a comma where the
 * locale has none (the C locale prints "1796010", which nobody reads at a glance). */
char *
tdm_format_count (double value)
{
  const struct lconv *lc = localeconv ();
  const char *sep = lc->thousands_sep && lc->thousands_sep[0] ? lc->thousands_sep : ",";
  char digits[64];
  GString *out;
  int n, lead;

  if (!isfinite (value))
    return g_strdup ("—");

  g_snprintf (digits, sizeof digits, "%.0f", fabs (value));
  n = (int) strlen (digits);
  out = g_string_new (value <= -0.5 ? "−" : "");
  lead = n % 3 ? n % 3 : 3;
  g_string_append_len (out, digits, lead);
  for (int i = lead; i < n; i += 3)
    {
      g_string_append (out, sep);
      g_string_append_len (out, digits + i, 3);
    }

  return g_string_free (out, FALSE);
}


char *
tdm_format_sentence (const char *message)
{
  GString *out;
  gunichar first;
  gsize len;

  if (message == NULL || message[0] == '\0')
    return g_strdup ("");

  if (!g_utf8_validate (message, -1, NULL))
    return g_utf8_make_valid (message, -1);

  out = g_string_new (NULL);
  first = g_utf8_get_char (message);
  g_string_append_unichar (out, g_unichar_totitle (first));
  g_string_append (out, g_utf8_next_char (message));

  len = out->len;
  while (len > 0 && g_ascii_isspace (out->str[len - 1]))
    len--;
  g_string_truncate (out, len);
  if (len > 0 && !strchr (".!?", out->str[len - 1]) && !g_str_has_suffix (out->str, "。"))
    g_string_append_c (out, '.');

  return g_string_free (out, FALSE);
}

char *
tdm_format_replica (const TdmStartedEvent *started,
                    int                    replica)
{
  const char *id;
  int same = 0, nth = 0;

  g_return_val_if_fail (started != NULL, NULL);
  g_return_val_if_fail (replica >= 0 && replica < started->replicas, NULL);

  id = started->device[replica];
  for (int r = 0; r < started->replicas; r++)
    if (strncmp (started->device[r], id, sizeof started->device[r]) == 0)
      {
        same++;
        if (r <= replica)
          nth++;
      }

  if (same <= 1)
    return g_strndup (id, sizeof started->device[replica]);

  /* Translators: one of several replicas on the same device, e.g. "cpu 2" */
  return g_strdup_printf (C_("replica", "%.32s %d"), id, nth);
}
