/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-popover-tooltips.h: no tooltip over a list just opened.
 *
 * A popover (a drop-down's list, a combo row's, a menu button's menu) is a child of
 * the widget that opened it, so GTK shows that widget's tooltip over the open list:
 * the choices a person is reading get covered. While a popover shows, the tooltips
 * of the widgets above it are switched off, and back on when it closes. Not the
 * tooltips' texts: they stay as they were.
 */

#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

/* Follows every popover under `root` as it is now (call it again for popovers made
 * later; one already followed is not followed twice). */
void     tdm_popover_tooltips_quiet       (GtkWidget *root);
/* Whether `widget`'s tooltip is switched off because a popover under it shows. */
gboolean tdm_popover_tooltips_quieted     (GtkWidget *widget);

G_END_DECLS
