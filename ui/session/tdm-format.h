/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-format.h: numbers as the window shows them (not as files store them). */

#pragma once

#include <glib.h>

#include "tdm-events.h"

G_BEGIN_DECLS

/* 1796010 → "1,796,010": the locale's separator, or a comma where the locale has
 * none (the C locale); "—" for NaN and infinities. Free with g_free(). */
char *tdm_format_count (double value);

/* A size as the window shows it: "0 bytes", "512 bytes", "6.9 MiB" (GLib's units
 * with `flags`, G_FORMAT_SIZE_IEC_UNITS or G_FORMAT_SIZE_DEFAULT), the words in the
 * application's own translations rather than GLib's, which a system may lack; "—"
 * for a negative (not known). Free with g_free(). */
char *tdm_format_size (gint64           bytes,
                       GFormatSizeFlags flags);

/* A message as a sentence for the window: its first letter upper case, a full stop
 * at the end ("x: no such folder" → "X: no such folder."). Free with g_free(). */
char *tdm_format_sentence (const char *message);

/* A replica as every chart's legend and the CSV export name it: "cpu 1", "cpu 2"
 * where several replicas share a device, else the device's id ("cuda:0"). */
char *tdm_format_replica (const TdmStartedEvent *started,
                          int                    replica);

/* A precision as the window names it: "Float32", "TF32", "Bfloat16", "Automatic". */
const char *tdm_format_precision_title (TdmPrecision precision);

/* What a run computes in, as its start reports it: "Bfloat16 (automatic: every device
 * has bfloat16 tensor cores)", "Float32 (automatic: cpu has no bfloat16 tensor cores)",
 * or the title alone where the run named it. Free with g_free(). */
char *tdm_format_precision (const TdmStartedEvent *started);

/* A phase as the window names it, translated ("forward", "all-reduce"…); files and
 * --json keep the engine's tdm_phase_name(). */
const char *tdm_format_phase (TdmPhase phase);

/* The status line of a run in progress: "Epoch 2 of 3 · Step 60 of 120 · 1,060
 * samples/s · 0:30 elapsed · 0:30 left", "Paused · " first while paused. */
char *tdm_format_progress (const TdmStartedEvent *started,
                           const TdmStepEvent    *step,
                           gboolean               paused);

/* The status line of a run that ended: "Finished in …", or "Stopped after …". */
char *tdm_format_finished (const TdmFinishedEvent *finished);

G_END_DECLS
