/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-svg.h: TdmChart's own SVG writer, with text kept as text.
 *
 * cairo's SVG surface stores every glyph as an outline, so an exported chart could
 * not be searched, selected or translated. The chart's drawing code instead strokes,
 * fills and shows text through the three hooks below: on an ordinary cairo context
 * they are cairo_stroke(), cairo_fill() and pango_cairo_show_layout(); on a context a
 * TdmChartSvg is attached to they write an SVG element instead (<path> for lines,
 * areas, grid and swatches, <text> for titles, tick labels and the legend), from the
 * very path, colour, clip and position the frame would have drawn. It is not a
 * general cairo-to-SVG converter: paint, masks, gradients and images are not
 * written (the charts use none of them). TdmScalingChart draws through the same
 * hooks, so its export is written the same way.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-export-info.h"

G_BEGIN_DECLS

typedef struct _TdmChartSvg TdmChartSvg;

/* Attaches a writer to `cr` for a width × height picture: what the hooks draw on
 * `cr` from now on goes to the SVG instead. */
TdmChartSvg *tdm_chart_svg_new     (cairo_t             *cr,
                                    int                  width,
                                    int                  height);
#define TDM_CHART_SVG_CAPTION_PX   11.0
#define TDM_CHART_SVG_CAPTION_LINE 15.0

/* A caption (parts joined by " · ") in lines that fit `width` at the caption's size,
 * broken between parts; measured on `cr`. Free with g_ptr_array_unref(). */
GPtrArray   *tdm_chart_svg_caption_lines (cairo_t     *cr,
                                          const char  *caption,
                                          double       width);
/* A line of text below everything drawn, baseline at y (the figure's caption). */
void         tdm_chart_svg_caption (TdmChartSvg         *svg,
                                    const char          *text,
                                    double               x,
                                    double               y,
                                    double               font_px);
/* The whole document: <title>, <desc> and <metadata> from `info` when given (each
 * setting a <tandem:setting name="…">value</tandem:setting>), then the drawing.
 * Detaches the writer from its context. Free with g_free(). */
char        *tdm_chart_svg_finish  (TdmChartSvg         *svg,
                                    const char          *title,
                                    const TdmExportInfo *info);
void         tdm_chart_svg_free    (TdmChartSvg         *svg);

/* The hooks. `anchor`: which point of the text's width the position refers to for
 * a reader with other fonts (0 start, 0.5 middle, 1 end), as the caller aligned it. */
void         tdm_chart_stroke      (cairo_t             *cr);
void         tdm_chart_fill        (cairo_t             *cr);
void         tdm_chart_show_layout (cairo_t             *cr,
                                    PangoLayout         *layout,
                                    double               anchor);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmChartSvg, tdm_chart_svg_free)

G_END_DECLS
