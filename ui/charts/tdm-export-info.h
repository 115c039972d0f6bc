/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-export-info.h: which run an exported file comes from.
 *
 * Key/value pairs: the settings of the run, the Tandem version and the date the run
 * started, in the forms each export writes them: `# key: value` lines atop a CSV,
 * one caption line for an SVG, key/value pairs for an SVG's metadata and a PNG's
 * text chunks. A plain struct, made when a run starts and kept for its exports; it
 * does not write files itself, and it knows nothing of the engine: the pairs of a
 * run's configuration are added by tdm_run_export_info_new() (ui/session/).
 */

#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _TdmExportInfo TdmExportInfo;

TdmExportInfo *tdm_export_info_new        (void);
/* A pair; line breaks in either become spaces. */
void           tdm_export_info_add        (TdmExportInfo       *info,
                                           const char          *key,
                                           const char          *value);
/* Replaces the value of `key`, or adds the pair where it has none. */
void           tdm_export_info_set        (TdmExportInfo       *info,
                                           const char          *key,
                                           const char          *value);
/* "tandem" (this version) and "date" (@started, or now if NULL, in UTC). */
void           tdm_export_info_add_origin (TdmExportInfo       *info,
                                           GDateTime           *started);
void           tdm_export_info_free       (TdmExportInfo       *info);

guint          tdm_export_info_get_n_items (const TdmExportInfo *info);
/* Keys in the order added: for a run, as the engine names settings ("dataset",
 * "lr"…), then "tandem" and "date". Values hold no line breaks. */
const char    *tdm_export_info_get_key    (const TdmExportInfo *info,
                                           guint                i);
const char    *tdm_export_info_get_value  (const TdmExportInfo *info,
                                           guint                i);
/* NULL where there is no such key. */
const char    *tdm_export_info_lookup     (const TdmExportInfo *info,
                                           const char          *key);

/* "# dataset: fashion-mnist\n# network: mlp\n…" (pandas: comment='#'). */
char          *tdm_export_info_to_comment (const TdmExportInfo *info);
/* One line for a figure's caption: "Tandem 0.1.0, 2026-12-03 14:05 UTC · dataset
 * fashion-mnist · network mlp · …". */
char          *tdm_export_info_to_caption (const TdmExportInfo *info);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmExportInfo, tdm_export_info_free)

G_END_DECLS
