/* SPDX-License-Identifier: GPL-3.0-or-later */
/* fuzz-common.h — what the libFuzzer harnesses share: a private temporary folder and
 * the splitting of one fuzz input into the files of a dataset.
 *
 * An input is a presence mask byte, then for each file a 4-byte little-endian length
 * and that many bytes (the last file present takes what remains when the length runs
 * past the end). Files the mask leaves out are removed, so the reader also meets
 * folders with files missing. Not a harness itself, and not used by the tests.
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

/* A folder under $TMPDIR made once per process and removed at exit. */
const char *fuzz_temp_folder (void);

/* Writes the files named in names[0..count) into folder from data as described
 * above (a name may hold a sub-folder, made as needed); returns the number written. */
int fuzz_write_files (const char *folder, const char *const *names, int count,
                      const uint8_t *data, size_t size);

/* Removes everything in folder (not the folder). */
void fuzz_clear_folder (const char *folder);
