/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-file.h — opening the files a person names (dataset files, checkpoints to resume)
 * without trusting what they are.
 *
 * A FIFO opened for reading blocks until a writer comes, a device may never end, and
 * a dangling link reads as "missing" unless someone looks at the link itself. These
 * helpers look first (lstat, then stat), refuse anything that is not a regular file,
 * open without blocking and check again on the open descriptor, so a file swapped in
 * between the look and the open is refused too. Not a reader: callers read the fd.
 */
#pragma once

#include <glib.h>
#include <sys/stat.h>

#include "tdm-error.h"

G_BEGIN_DECLS

/* Opens path read-only when it is a regular file (a link to one is fine). On failure
 * returns -1 and sets one error in TDM_ENGINE_ERROR with `code`, whose message is
 * "<label><path>: <why>" — why says "missing file", "a symbolic link loop", "a
 * dangling symbolic link to …", "a FIFO (named pipe), not a regular file" and the
 * like. st, when not NULL, receives the open file's status. */
int tdm_file_open_regular (const char *path, const char *label, TdmEngineError code,
                           struct stat *st, GError **error);

/* TRUE when path names something, a dangling link included: a search for a file
 * must find the broken link and let the open say what is wrong with it. */
gboolean tdm_file_present (const char *path);

/* Files replaced atomically (checkpoints, the image cache, run files) are written to
 * ".BASE.XXXXXX" beside them, then renamed over them. tdm_file_create_temp makes one
 * in dir and holds an exclusive flock on it until it is closed; -1 with errno set on
 * failure. tdm_file_remove_stale_temps removes those of `base` whose writer died
 * (killed mid-write): their lock can be taken. Other names are never touched. */
int tdm_file_create_temp (const char *dir, const char *base, char **tmp_path);
void tdm_file_remove_stale_temps (const char *dir, const char *base);

G_END_DECLS
