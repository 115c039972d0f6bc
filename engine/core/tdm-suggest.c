/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-suggest.c — the nearest known name to a mistyped one (tdm-suggest.h): the
 * optimal-string-alignment distance over two rows and the one before them.
 */
#include "tdm-suggest.h"

#include <string.h>

/* Edits that turn a into b: insertions, deletions, substitutions and swaps of two
 * neighbouring characters, each counting one (byte-wise; names are ASCII). */
static int
edit_distance(const char *a, const char *b)
{
  size_t n = strlen(a), m = strlen(b);
  /* Names are short; a megabyte-long word is not worth a table of its square. */
  if (n > 256 || m > 256)
    return (int)MAX(n, m);
  g_autofree int *rows = g_new(int, 3 * (m + 1));
  int *before = rows, *previous = rows + (m + 1), *current = rows + 2 * (m + 1);
  for (size_t j = 0; j <= m; j++)
    previous[j] = (int)j;
  for (size_t i = 1; i <= n; i++) {
    current[0] = (int)i;
    for (size_t j = 1; j <= m; j++) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      int best = MIN(previous[j] + 1, current[j - 1] + 1);
      best = MIN(best, previous[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        best = MIN(best, before[j - 2] + 1);
      current[j] = best;
    }
    int *spent = before;
    before = previous;
    previous = current;
    current = spent;
  }
  return previous[m];
}

const char *
tdm_suggest(const char *word, const char *const *names, int count)
{
  g_return_val_if_fail(word != NULL && names != NULL, NULL);
  size_t length = strlen(word);
  if (length == 0)
    return NULL;
  int allowed = length <= 4 ? 1 : length <= 8 ? 2 : 3;
  const char *nearest = NULL, *begun = NULL;
  int best = allowed + 1, begins = 0;
  for (int i = 0; count < 0 ? names[i] != NULL : i < count; i++) {
    if (names[i] == NULL || g_str_equal(names[i], word))
      continue;
    int d = edit_distance(word, names[i]);
    if (d < best) {
      best = d;
      nearest = names[i];
    }
    if (length >= 3 && g_str_has_prefix(names[i], word)) {
      begun = names[i];
      begins++;
    }
  }
  if (nearest != NULL)
    return nearest;
  return begins == 1 ? begun : NULL;
}
