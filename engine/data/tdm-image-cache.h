/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-image-cache.h — the file that keeps a decoded image folder between starts.
 *
 * One file per folder and options; inside, a key made from the folder's file list
 * (names, sizes, modification and status-change times) says which state of the
 * folder it holds, so a changed folder misses and the file is replaced. Reads check every
 * count against the file's size and the contents against a CRC-32, and treat anything
 * odd as a miss, never as a failure; writes go to a locked temporary file renamed over
 * the old one, and temporaries of writers that died are removed. Not the folder scanner.
 */
#pragma once

#include <glib.h>
#include "tdm-dataset.h"

G_BEGIN_DECLS

#define TDM_IMAGE_CACHE_KEY_BYTES 32

/* NULL on a miss: no file, another version's or another key's file, or a damaged
 * one (then also an error saying so, for the caller to report as it rebuilds). */
TdmDatasetPair *tdm_image_cache_read (const char *path,
                                      const guint8 key[TDM_IMAGE_CACHE_KEY_BYTES],
                                      GError **error);
gboolean tdm_image_cache_write (const char *path,
                                const guint8 key[TDM_IMAGE_CACHE_KEY_BYTES],
                                const TdmDatasetPair *pair, GError **error);

G_END_DECLS
