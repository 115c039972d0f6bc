/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-draw.h: what every Cairo view of the window does before it draws.
 *
 * The timeline, the batch strip, the confusion matrix, the prediction gallery and
 * the scaling chart draw with Cairo in their snapshot: each needs the widget's
 * foreground colour from its style (GTK 4.8 has only the deprecated call), a Cairo
 * context over the whole widget, and the views' one font. Those steps are here, once.
 * Nothing about what a view draws.
 */

#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

/* The style's text colour of `widget` (dark or light with the system style). */
void     tdm_draw_get_foreground (GtkWidget   *widget,
                                  GdkRGBA     *fg);
/* The views' font: Sans, 14 px. */
void     tdm_draw_set_font       (cairo_t     *cr);
/* A context over all of `widget` in `snapshot`, the font set, `fg` filled in; NULL
 * while the widget has no size. Free with cairo_destroy(). */
cairo_t *tdm_draw_begin          (GtkWidget   *widget,
                                  GtkSnapshot *snapshot,
                                  GdkRGBA     *fg);

/* `text` as it fits in `width` at `cr`'s font: whole, or its first characters and
 * "…" (a view then shows the whole text in a tooltip). `drawn_width`, if not NULL,
 * gets the width of what is returned. */
char    *tdm_draw_fit_text       (cairo_t     *cr,
                                  const char  *text,
                                  double       width,
                                  double      *drawn_width);

G_END_DECLS
