/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-runs.h — the run history from the command line (tandem-train runs,
 * --show-run, --export-run) and run settings as a file (--print-config, --config).
 *
 * The history is the engine's (tdm-history.h): the same folder, records and CSV as the
 * window's History; nothing here reads or writes a run file itself.
 */
#pragma once

#include "tdm-config.h"

#include <glib.h>

G_BEGIN_DECLS

/* Each returns the exit status: 0, or 2 with one message on stderr. `folder` NULL is
 * the default history folder. */
int tdm_cli_runs_list (const char *folder, gboolean json);
int tdm_cli_runs_show (const char *folder, const char *id, gboolean json);
/* The run as CSV on stdout, as the window exports it. */
int tdm_cli_runs_export (const char *folder, const char *id);
/* Every training run of the history as TensorBoard event files, a folder of `root`
 * each, named after the run (its id added where two share a name). */
int tdm_cli_runs_export_tensorboard (const char *folder, const char *root, gboolean quiet);

/* The settings in `path`: a file of --print-config (the configuration's JSON), a run
 * file of the history (its settings line) or a checkpoint (its metadata). From a run
 * file or a checkpoint the files that run wrote (--save, --save-best) are left out, so
 * a new run does not write over them unless told to. Keys no configuration has are
 * refused, and the values are checked as they stand in the file: a bad one is named
 * by the file and its key ("c.json: bad value in its saved run configuration: key
 * “batch” = 0: …"), never by a flag. NULL with a message naming the file otherwise. */
TdmConfig *tdm_cli_config_load (const char *path, GError **error);

G_END_DECLS
