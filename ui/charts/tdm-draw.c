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

char *
tdm_draw_fit_text (cairo_t    *cr,
                   const char *text,
                   double      width,
                   double     *drawn_width)
{
  cairo_text_extents_t ext;
  glong length;

  g_return_val_if_fail (cr != NULL, NULL);
  g_return_val_if_fail (text != NULL, NULL);

  cairo_text_extents (cr, text, &ext);
  if (ext.x_advance <= width)
    {
      if (drawn_width != NULL)
        *drawn_width = ext.x_advance;
      return g_strdup (text);
    }
  /* Whole characters (never half a UTF-8 sequence), one fewer at a time: captions
   * are a few words. */
  length = g_utf8_strlen (text, -1);
  for (glong n = length - 1; n >= 0; n--)
    {
      g_autofree char *head = g_utf8_substring (text, 0, n);
      char *cut = g_strconcat (g_strchomp (head), "…", NULL);

      cairo_text_extents (cr, cut, &ext);
      if (ext.x_advance <= width || n == 0)
        {
          if (drawn_width != NULL)
            *drawn_width = ext.x_advance;
          return cut;
        }
      g_free (cut);
    }
  g_assert_not_reached ();
}
