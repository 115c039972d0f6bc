/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-status-line.h: the line under the charts that says where a run is (epoch,
 * step, samples/s, time elapsed and left). A wrapping text that asks for a new size
 * only when it needs another number of lines; see tdm-status-line.c. Main-thread only.
 */

#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define TDM_TYPE_STATUS_LINE (tdm_status_line_get_type ())

G_DECLARE_FINAL_TYPE (TdmStatusLine, tdm_status_line, TDM, STATUS_LINE, GtkWidget)

void        tdm_status_line_set_text  (TdmStatusLine *self,
                                       const char    *text);
const char *tdm_status_line_get_text  (TdmStatusLine *self);
/* Lines the text takes at `width` pixels (all of it: the line never cuts text). */
int         tdm_status_line_get_lines (TdmStatusLine *self,
                                       int            width);

G_END_DECLS
