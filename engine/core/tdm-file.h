/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-file.h — the one way Tandem reads a file a person names (datasets, checkpoints,
 * --init weights, --config, run files) without trusting what it is, the one test of
 * whether two output paths are the same file, and the one way a file is replaced
 * whole.
 *
 * A FIFO opened for reading blocks until a writer comes, a device may never end, and
 * a dangling link reads as "missing" unless someone looks at the link itself. These
 * helpers look first (lstat, then stat), refuse anything that is not a regular file,
 * open without blocking and check again on the open descriptor, so a file swapped in
 * between the look and the open is refused too. On top of that open: the whole file
 * under a size cap, a read-only mapping (nothing copied until it is used), and lines
 * streamed under a line-length cap. Every message names the file and, where a limit
 * was met, the limit. Not a parser: callers parse what they read.
 *
 * For writing: the locked temporaries files are replaced through, the loop that
 * writes a buffer whole, and on top of them the writer that replaces a file.
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

/* The whole file, when it is a regular file of at most `limit` bytes; otherwise NULL
 * and one error as above ("<label><path>: larger than 16.0 MB (3.0 GB)"). A file that
 * grows while it is read is read up to its size at the open. */
GBytes *tdm_file_read_all (const char *path, const char *label, TdmEngineError code,
                           gsize limit, GError **error);

/* A read-only mapping of the regular file at path: pages are read as they are touched,
 * so what a reader never looks at costs no memory. Free with g_mapped_file_unref. */
GMappedFile *tdm_file_map (const char *path, const char *label, TdmEngineError code,
                           GError **error);

/* A regular file read line by line through a fixed buffer, so a reader keeps in memory
 * one line at a time: its cost does not grow with the file. A line longer than
 * `max_line` bytes is an error naming the line and the limit ("<label><path>: line 3
 * is longer than 1.0 MB"), and so is a file larger than `max_file` (0: any size). */
typedef struct _TdmLineReader TdmLineReader;

TdmLineReader *tdm_line_reader_open (const char *path, const char *label,
                                     TdmEngineError code, gsize max_line, guint64 max_file,
                                     GError **error);
/* The next line, without its newline and NUL-terminated, valid until the next call;
 * *length gets its length (it may hold NULs). NULL at the end (error unset) or on an
 * error (set). A last line without a newline is returned too, and then
 * tdm_line_reader_unterminated says so (a write cut short). */
const char *tdm_line_reader_next (TdmLineReader *reader, gsize *length, GError **error);
gboolean tdm_line_reader_unterminated (const TdmLineReader *reader);
/* The number of the line last returned, from 1. */
int tdm_line_reader_number (const TdmLineReader *reader);
void tdm_line_reader_free (TdmLineReader *reader);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmLineReader, tdm_line_reader_free)

/* Whether two paths name the same file, by device and inode, not by spelling
 * ("val/b.st" and "./val/../val/b.st", a link and its target, two hard links). A
 * path that does not exist yet is the same as another when both would be created
 * as one name in one folder (that folder found by its device and inode too). For
 * refusing an output that would overwrite an input or another output. */
gboolean tdm_file_same (const char *a, const char *b);

/* For an output written to a temporary and renamed over path: FALSE with one error
 * ("<label><path>: a dangling symbolic link (to …) …") when path is a link to nothing,
 * which the rename would replace instead of writing where it points. */
gboolean tdm_file_check_not_dangling (const char *path, const char *label,
                                      TdmEngineError code, GError **error);

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

/* Both for path: its dead writers' temporaries removed, a new one made beside it. */
int tdm_file_create_temp_beside (const char *path, char **tmp_path);

/* Closes fd, a temporary from tdm_file_create_temp that the caller wrote (`written`:
 * whether every write went through, errno saying why not), and renames it over path;
 * on any failure removes it. 0, or the errno of the first failure (*rename_failed,
 * when not NULL, set TRUE when it was the rename's). */
int tdm_file_commit_temp (int fd, gboolean written, const char *tmp_path, const char *path,
                          gboolean *rename_failed);

/* Writes all `bytes` of data to fd, going on after an interrupted or short write;
 * FALSE with errno set when a write fails (EIO for one that writes nothing). */
gboolean tdm_file_write_all (int fd, const void *data, gsize bytes);

/* Whether path may be replaced by tdm_file_replace_contents: absent or a regular file.
 * A symbolic link, dangling or not, is refused rather than written through or
 * replaced, and so is a folder, a FIFO or a device: FALSE with one error
 * ("<label><path>: a dangling symbolic link (to …), neither written through nor
 * replaced"). */
gboolean tdm_file_check_replaceable (const char *path, const char *label,
                                     TdmEngineError code, GError **error);

/* Replaces the file at path, when tdm_file_check_replaceable allows, with size bytes
 * of data written to a temporary beside it (tdm_file_create_temp) and renamed over it:
 * a reader sees the old file or the new one. Not flushed to disk: for files whose loss
 * costs a rebuild, not work. */
gboolean tdm_file_replace_contents (const char *path, const void *data, gsize size,
                                    const char *label, TdmEngineError code, GError **error);

G_END_DECLS
