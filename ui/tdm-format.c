/* tdm-format.c: numbers as the window shows them.
 *
 * One place for how counts read, so the status line, the dataset facts and the
 * network's size agree. Not for files: exports write plain numbers.
 */

#include <locale.h>
#include <math.h>
#include <string.h>

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

