/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-draw.h: what every Cairo view of the window does before and while it draws.
 *
 * The timeline, the batch strip, the confusion matrix, the prediction gallery and
 * the scaling chart draw with Cairo in their snapshot: each needs the widget's
 * foreground colour from its style (GTK 4.8 has only the deprecated call), a Cairo
 * context over the whole widget, and text in the widget's font. Text goes through
 * Pango (never Cairo's toy text API, which picks one font and has no fallback, so
 * Japanese showed as boxes), with the system font and its scaling. Those steps are
 * here, once. Nothing about what a view draws.
 */

#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

/* The style's text colour of `widget` (dark or light with the system style). */
void     tdm_draw_get_foreground (GtkWidget   *widget,
                                  GdkRGBA     *fg);
/* The views' font on `cr`: `widget`'s (family, size and the screen's resolution, so
 * the text scaling setting applies), or Sans 14 px with no widget. Texts drawn on
 * `cr` from then on use it. */
void     tdm_draw_set_font       (cairo_t     *cr,
                                  GtkWidget   *widget);
/* The font's size in pixels, for text that must fit a box of a given size (a cell's
 * count); 0 goes back to the size tdm_draw_set_font() chose. */
void     tdm_draw_set_font_px    (cairo_t     *cr,
                                  double       px);
/* A context over all of `widget` in `snapshot`, its font set, `fg` filled in; NULL
 * while the widget has no size. Free with cairo_destroy(). */
cairo_t *tdm_draw_begin          (GtkWidget   *widget,
                                  GtkSnapshot *snapshot,
                                  GdkRGBA     *fg);

/* How wide `text` is in `cr`'s font, in user units. */
double   tdm_draw_text_width     (cairo_t     *cr,
                                  const char  *text);
/* How far `text` in `cr`'s font reaches above its baseline and below it, in user
 * units: with its width, the box a label takes (to keep it off a line). */
void     tdm_draw_text_height    (cairo_t     *cr,
                                  const char  *text,
                                  double      *above,
                                  double      *below);
/* `text` with its baseline's left end at (x, y), in the current source; into a
 * chart's SVG as a <text> where one is being written. */
void     tdm_draw_text           (cairo_t     *cr,
                                  double       x,
                                  double       y,
                                  const char  *text);
/* As tdm_draw_text(), turned by `angle` (radians, clockwise as Cairo's) about (x, y):
 * slanted column names, vertical axis titles. */
void     tdm_draw_text_rotated   (cairo_t     *cr,
                                  double       x,
                                  double       y,
                                  double       angle,
                                  const char  *text);
/* `text` as it fits in `width` at `cr`'s font: whole, or its first characters and
 * "…" (a view then shows the whole text in a tooltip). `drawn_width`, if not NULL,
 * gets the width of what is returned. */
char    *tdm_draw_fit_text       (cairo_t     *cr,
                                  const char  *text,
                                  double       width,
                                  double      *drawn_width);
/* How many characters of `text` `cr`'s font has no glyph for (0 where fallback found
 * a font for every one): what the tests check for Japanese. */
int      tdm_draw_unknown_glyphs (cairo_t     *cr,
                                  const char  *text);

G_END_DECLS
