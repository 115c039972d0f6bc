/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-conv-cache.h — the convolution engine's choices on disk, so a second run on the
 * same kind of GPU skips the timing: one text file per GPU model and library versions
 * in the XDG cache folder ($XDG_CACHE_HOME/tandem/conv-<model>.txt), a line per shape
 * and direction. A file that is damaged in any way (a bad line, a wrong header, too
 * large) is ignored as a whole and written anew. TANDEM_CONV_CACHE names another file,
 * or with 0 turns the cache off. Process-wide and thread-safe; knows nothing of CUDA.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The candidate remembered for `key` on GPU model `model` (a name that includes what
 * the choice depends on: the GPU, cuDNN's version), or NULL; free it. */
char *tdm_conv_cache_lookup (const char *model, const char *key);
/* Remembers it, and writes the file (atomically: a reader sees the old file or the new). */
void tdm_conv_cache_store (const char *model, const char *key, const char *name, double ms);

/* The file used for `model`, or NULL when the cache is off; free it. */
char *tdm_conv_cache_path (const char *model);
/* Forgets what was read, so the next lookup reads the file again (for tests). */
void tdm_conv_cache_reset (void);

G_END_DECLS
