/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-chart.h — what test-chart.c and its parts (test-chart-render.c,
 * test-chart-export.c, test-chart-widget.c) share: reading pixels of a rendered chart
 * and a chart of one's own, header-only test helpers; and each part's registration of
 * its tests.
 */
#pragma once

#include <gtk/gtk.h>

#include "tdm-chart.h"

typedef struct {
  int r, g, b;
} Pixel;

static inline Pixel
pixel_at(cairo_surface_t *surface, int x, int y)
{
  const guint8 *data = cairo_image_surface_get_data(surface);
  int stride = cairo_image_surface_get_stride(surface);
  guint32 v = *(const guint32 *)(data + y * stride + 4 * x);
  int a = (v >> 24) & 0xff;
  Pixel p = {(v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff};

  /* Un-premultiply against the white background the export paints. */
  if (a < 255) {
    p.r += 255 - a;
    p.g += 255 - a;
    p.b += 255 - a;
  }
  return p;
}

static inline TdmChart *
new_chart(void)
{
  return TDM_CHART(g_object_ref_sink(tdm_chart_new()));
}

/* Pixels in [x0, x1) × [y0, y1) darker than light grey (text, axes, lines). */
static inline int
count_dark(cairo_surface_t *s, int x0, int y0, int x1, int y1)
{
  int n = 0;

  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++) {
      Pixel p = pixel_at(s, x, y);
      if (p.r + p.g + p.b < 3 * 200)
        n++;
    }
  return n;
}

/* Registers the rendering tests (test-chart-render.c): a value's row and colour, the
 * legend, the title's and the readout's room, empty, odd and a million points. */
void test_chart_add_render(void);
/* Registers the export tests (test-chart-export.c): PNG, SVG and CSV files, the SVG's
 * text, and the run's settings each export carries. */
void test_chart_add_export(void);
/* Registers the widget's tests (test-chart-widget.c): its properties, the devices'
 * colours, a reference line's y range, and the chart realized, hovered and finalized. */
void test_chart_add_widget(void);
