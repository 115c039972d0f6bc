/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-draw.c: what every Cairo view of the window does before it draws. */

#include "tdm-draw.h"

void
tdm_draw_get_foreground (GtkWidget *widget,
                         GdkRGBA   *fg)
{
  g_return_if_fail (GTK_IS_WIDGET (widget));
  g_return_if_fail (fg != NULL);

  /* gtk_widget_get_color() is GTK 4.10's; Debian 12 has 4.8. */
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_style_context_get_color (gtk_widget_get_style_context (widget), fg);
  G_GNUC_END_IGNORE_DEPRECATIONS
}

void
tdm_draw_set_font (cairo_t *cr)
{
  cairo_select_font_face (cr, "Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size (cr, 14);
}

cairo_t *
tdm_draw_begin (GtkWidget   *widget,
                GtkSnapshot *snapshot,
                GdkRGBA     *fg)
{
  int width, height;
  cairo_t *cr;

  g_return_val_if_fail (GTK_IS_WIDGET (widget), NULL);
  g_return_val_if_fail (snapshot != NULL, NULL);

  width = gtk_widget_get_width (widget);
  height = gtk_widget_get_height (widget);
  if (width <= 0 || height <= 0)
    return NULL;

  tdm_draw_get_foreground (widget, fg);
  cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, width, height));
  tdm_draw_set_font (cr);

  return cr;
}
