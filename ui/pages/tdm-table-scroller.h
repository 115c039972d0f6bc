/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-table-scroller.h: a table that scrolls sideways under a scrollbar that stays.
 *
 * Where a table of figures is wider than its room (a phone, a narrow window, the
 * settings beside it), its columns scroll sideways and a scrollbar shows under the
 * last row for as long as there is more to see: an overlay scrollbar hides until
 * hovered, and GTK 4.8 gives a scroller that never scrolls up and down no height
 * for its own, which then covers the last row. Never scrolls up and down.
 */

#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define TDM_TYPE_TABLE_SCROLLER (tdm_table_scroller_get_type ())

G_DECLARE_FINAL_TYPE (TdmTableScroller, tdm_table_scroller, TDM, TABLE_SCROLLER, GtkWidget)

void       tdm_table_scroller_set_child  (TdmTableScroller *self,
                                          GtkWidget        *child);
GtkWidget *tdm_table_scroller_get_child  (TdmTableScroller *self);
/* The scrolled window that shows the table (for tests). */
GtkWidget *tdm_table_scroller_get_viewport  (TdmTableScroller *self);

G_END_DECLS
