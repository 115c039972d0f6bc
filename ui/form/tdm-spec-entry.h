/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-spec-entry.h: a one-line network spec, checked as it is typed.
 *
 * An entry and a line under it. Every change is parsed with tdm_network_new()
 * against the dataset's image shape and classes; the line then says how many
 * parameters the network has, or what is wrong with the spec and where. Not an
 * editor for built-in networks: for those it shows their spec, read-only.
 */

#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define TDM_TYPE_SPEC_ENTRY (tdm_spec_entry_get_type ())

G_DECLARE_FINAL_TYPE (TdmSpecEntry, tdm_spec_entry, TDM, SPEC_ENTRY, GtkWidget)


/* Property "text". */
const char *tdm_spec_entry_get_text    (TdmSpecEntry *self);
void        tdm_spec_entry_set_text    (TdmSpecEntry *self,
                                        const char   *text);

/* Property "editable": FALSE shows a built-in network's spec without letting it change. */
gboolean    tdm_spec_entry_get_editable (TdmSpecEntry *self);
void        tdm_spec_entry_set_editable (TdmSpecEntry *self,
                                         gboolean      editable);

/* What the network is checked against; 28×28×1 and 10 classes until set. */
void        tdm_spec_entry_set_shape   (TdmSpecEntry *self,
                                        int           height,
                                        int           width,
                                        int           channels,
                                        int           classes);

/* Property "valid", and the message under the entry when it is not. */
gboolean    tdm_spec_entry_get_valid   (TdmSpecEntry *self);
const char *tdm_spec_entry_get_message (TdmSpecEntry *self);

G_END_DECLS
