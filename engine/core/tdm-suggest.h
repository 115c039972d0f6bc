/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-suggest.h — "did you mean": the known name a mistyped one most likely meant,
 * by edit distance. Used where a name is refused (an option, a built-in network, a
 * spec item, a choice), so the message can offer the way out. Not the messages
 * themselves, which belong to whoever refuses the name.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Of the `count` names (count < 0: NULL-terminated), the nearest to `word` when near
 * enough to be a slip of the keyboard (insertions, deletions, substitutions and swaps
 * of two neighbouring characters each count one edit): within one edit for words of up to four
 * characters, two up to eight, three beyond; or the only name that `word` (three
 * characters at least) begins. The first of equals; NULL when none is near. */
const char *tdm_suggest (const char *word, const char *const *names, int count);

G_END_DECLS
