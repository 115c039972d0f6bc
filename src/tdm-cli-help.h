/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-help.h — the text around tandem-train's options in --help: what the program
 * or a command does, and the notes after the options. What the engine knows (the
 * built-in networks and their recipes, the spec grammar, exact mode's guarantee) is
 * asked of it, never written here again. Not the options' own lines (their rows).
 */
#pragma once

#include <glib.h>

#include "tdm-config.h"

G_BEGIN_DECLS

/* The line under "Usage": the program's, or a command's `summary` (N_()). */
char *tdm_cli_help_summary (const char *summary);

/* The notes after the options: for the program (`command` NULL, with `commands`, a
 * line a command) and its train and scaling commands, everything a run can be told;
 * for the other commands, nothing. `defaults` names the engine's defaults. */
char *tdm_cli_help_description (const char *command, const char *commands,
                                const TdmConfig *defaults);

G_END_DECLS
