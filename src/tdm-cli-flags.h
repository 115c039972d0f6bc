/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-flags.h — tandem-train's flags made from rows of a field table (tdm-field.h):
 * the GOption entries with their help (the default named from the engine's values),
 * the text of the flags given, and that text set onto the struct the table describes.
 *
 * Flags are kept as text until applied, so a bad number gets a message that names its
 * flag and an absent flag leaves a value from a file or a checkpoint alone. Not which
 * flags a command takes (the command table in tdm-cli.c) nor the rules between them.
 */
#pragma once

#include <glib.h>

#include "tdm-field.h"

G_BEGIN_DECLS

typedef struct _TdmCliFlags TdmCliFlags;

/* Flags for the rows of `fields` that have one; `defaults` gives the values their
 * help names (it must outlive the flags). */
TdmCliFlags *tdm_cli_flags_new (const TdmField *fields, guint n, gconstpointer defaults);
void tdm_cli_flags_free (TdmCliFlags *flags);

/* Appends the GOptionEntry of each row whose key or flag is in `keys` (NULL: every
 * row) to `entries` (an array of GOptionEntry). */
void tdm_cli_flags_add_entries (TdmCliFlags *flags, GArray *entries,
                                const char *const *keys);

/* Whether the row (by key or flag) was given, and its text (NULL: not given, or a
 * switch). */
gboolean tdm_cli_flags_given (const TdmCliFlags *flags, const char *key);
const char *tdm_cli_flags_text (const TdmCliFlags *flags, const char *key);
/* "--top" for the first row given that `keys` does not name, or NULL. */
char *tdm_cli_flags_given_outside (const TdmCliFlags *flags, const char *const *keys);

/* Sets every row given onto `target`, in the table's order; FALSE with the first
 * message, naming the flag. */
gboolean tdm_cli_flags_apply (const TdmCliFlags *flags, gpointer target, GError **error);
/* Sets one row given as text outside the flags (a command's word: "scaling weak"). */
gboolean tdm_cli_flags_set (TdmCliFlags *flags, const char *key, const char *text);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmCliFlags, tdm_cli_flags_free)

G_END_DECLS
