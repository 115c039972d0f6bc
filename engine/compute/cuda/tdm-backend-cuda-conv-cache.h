/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-cache.h — the convolution engine's choices, one table per GPU model in the
 * process (every replica on such a GPU takes the same) and on disk, so a second run
 * skips the timing: one text file per GPU model and library versions in the XDG cache
 * folder ($XDG_CACHE_HOME/tandem/conv-<model>.txt), a line per shape and direction. A
 * file that is damaged in any way (a bad line, a wrong header, too large) is ignored as
 * a whole and written anew. TANDEM_CONV_CACHE names another file, or with 0 keeps the
 * choices in the process alone. Thread-safe; knows nothing of CUDA.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The candidate remembered for `key` on GPU model `model` (a name that includes what
 * the choice depends on: the GPU, cuDNN's version), by this process or in the file,
 * or NULL; free it. */
char *tdm_conv_cache_lookup (const char *model, const char *key);
/* Remembers it, and writes the file (atomically: a reader sees the old file or the new)
 * unless the cache is off. */
void tdm_conv_cache_store (const char *model, const char *key, const char *name, double ms);

/* A replica's column workspace after its convolutions were chosen (bytes), remembered
 * beside the choices for `plan`, a text naming everything its convolutions' shapes
 * depend on (the trainer's configuration of it), and found again; FALSE when none is
 * remembered (or the line is not a whole number of bytes). */
void tdm_conv_cache_store_workspace (const char *model, const char *plan, guint64 bytes);
gboolean tdm_conv_cache_lookup_workspace (const char *model, const char *plan,
                                          guint64 *bytes);

/* The file used for `model`, or NULL when the cache is off; free it. */
char *tdm_conv_cache_path (const char *model);
/* Forgets every table, so the next lookup reads the file again (for tests). */
void tdm_conv_cache_reset (void);

G_END_DECLS
