/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-draw.c: what every Cairo view of the window does before and while it draws. */

#include "tdm-draw.h"

#include "tdm-chart-svg.h"

/* Kept on the context: one layout for all its texts, and the size to go back to. */
typedef struct
{
  PangoLayout          *layout;
  PangoFontDescription *font;
  int                   base_size;
  gboolean              base_absolute;
} TextState;

static const cairo_user_data_key_t text_key;

static void
text_state_free (void *data)
{
  TextState *state = data;

  g_clear_object (&state->layout);
  g_clear_pointer (&state->font, pango_font_description_free);
  g_free (state);
}

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
tdm_draw_set_font (cairo_t   *cr,
                   GtkWidget *widget)
{
  TextState *state;
  PangoContext *context;

  g_return_if_fail (cr != NULL);
  g_return_if_fail (widget == NULL || GTK_IS_WIDGET (widget));

  state = g_new0 (TextState, 1);
  /* A layout of the context itself (a snapshot's or an SVG export's), so what is
   * measured is what is drawn there. */
  state->layout = pango_cairo_create_layout (cr);
  context = pango_layout_get_context (state->layout);
  if (widget != NULL)
    {
      PangoContext *own = gtk_widget_get_pango_context (widget);
      const PangoFontDescription *font = pango_context_get_font_description (own);
      const cairo_font_options_t *options = pango_cairo_context_get_font_options (own);
      double dpi = pango_cairo_context_get_resolution (own);

      state->font = font != NULL ? pango_font_description_copy (font) : NULL;
      /* The screen's resolution carries the desktop's text scaling. */
      if (dpi > 0)
        pango_cairo_context_set_resolution (context, dpi);
      if (options != NULL)
        pango_cairo_context_set_font_options (context, options);
    }
  if (state->font == NULL)
    state->font = pango_font_description_from_string ("Sans");
  if (pango_font_description_get_size (state->font) <= 0)
    pango_font_description_set_absolute_size (state->font, 14 * PANGO_SCALE);
  state->base_size = pango_font_description_get_size (state->font);
  state->base_absolute = pango_font_description_get_size_is_absolute (state->font);
  pango_layout_set_font_description (state->layout, state->font);
  cairo_set_user_data (cr, &text_key, state, text_state_free);
}

static TextState *
text_state (cairo_t *cr)
{
  TextState *state = cairo_get_user_data (cr, &text_key);

  if (state == NULL)
    {
      tdm_draw_set_font (cr, NULL);
      state = cairo_get_user_data (cr, &text_key);
    }
  /* Follow the context's transform (a rotated label, a scaled export). */
  pango_cairo_update_layout (cr, state->layout);

  return state;
}

void
tdm_draw_set_font_px (cairo_t *cr,
                      double   px)
{
  TextState *state;

  g_return_if_fail (cr != NULL);

  state = text_state (cr);
  if (px > 0)
    pango_font_description_set_absolute_size (state->font, px * PANGO_SCALE);
  else if (state->base_absolute)
    pango_font_description_set_absolute_size (state->font, state->base_size);
  else
    pango_font_description_set_size (state->font, state->base_size);
  pango_layout_set_font_description (state->layout, state->font);
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
  tdm_draw_set_font (cr, widget);

  return cr;
}

static PangoLayout *
layout_for (cairo_t    *cr,
            const char *text)
{
  TextState *state = text_state (cr);

  pango_layout_set_text (state->layout, text, -1);

  return state->layout;
}

double
tdm_draw_text_width (cairo_t    *cr,
                     const char *text)
{
  PangoRectangle logical;

  g_return_val_if_fail (cr != NULL, 0);
  g_return_val_if_fail (text != NULL, 0);

  pango_layout_get_extents (layout_for (cr, text), NULL, &logical);

  return logical.width / (double) PANGO_SCALE;
}

void
tdm_draw_text_height (cairo_t    *cr,
                      const char *text,
                      double     *above,
                      double     *below)
{
  PangoLayout *layout;
  PangoRectangle logical;
  double baseline;

  g_return_if_fail (cr != NULL);
  g_return_if_fail (text != NULL);

  layout = layout_for (cr, text);
  pango_layout_get_extents (layout, NULL, &logical);
  baseline = pango_layout_get_baseline (layout) / (double) PANGO_SCALE;
  if (above != NULL)
    *above = baseline - logical.y / (double) PANGO_SCALE;
  if (below != NULL)
    *below = (logical.y + logical.height) / (double) PANGO_SCALE - baseline;
}

void
tdm_draw_text (cairo_t    *cr,
               double      x,
               double      y,
               const char *text)
{
  PangoLayout *layout;

  g_return_if_fail (cr != NULL);

  if (text == NULL || *text == '\0')
    return;
  layout = layout_for (cr, text);
  cairo_move_to (cr, x, y - pango_layout_get_baseline (layout) / (double) PANGO_SCALE);
  tdm_chart_show_layout (cr, layout, 0);
  cairo_new_path (cr);
}

void
tdm_draw_text_rotated (cairo_t    *cr,
                       double      x,
                       double      y,
                       double      angle,
                       const char *text)
{
  g_return_if_fail (cr != NULL);

  cairo_save (cr);
  cairo_translate (cr, x, y);
  cairo_rotate (cr, angle);
  tdm_draw_text (cr, 0, 0, text);
  cairo_restore (cr);
}

char *
tdm_draw_fit_text (cairo_t    *cr,
                   const char *text,
                   double      width,
                   double     *drawn_width)
{
  double w;
  glong length;

  g_return_val_if_fail (cr != NULL, NULL);
  g_return_val_if_fail (text != NULL, NULL);

  w = tdm_draw_text_width (cr, text);
  if (w <= width)
    {
      if (drawn_width != NULL)
        *drawn_width = w;
      return g_strdup (text);
    }
  /* Whole characters (never half a UTF-8 sequence), one fewer at a time: captions
   * are a few words. */
  length = g_utf8_strlen (text, -1);
  for (glong n = length - 1; n >= 0; n--)
    {
      g_autofree char *head = g_utf8_substring (text, 0, n);
      char *cut = g_strconcat (g_strchomp (head), "…", NULL);

      w = tdm_draw_text_width (cr, cut);
      if (w <= width || n == 0)
        {
          if (drawn_width != NULL)
            *drawn_width = w;
          return cut;
        }
      g_free (cut);
    }
  g_assert_not_reached ();
}

int
tdm_draw_unknown_glyphs (cairo_t    *cr,
                         const char *text)
{
  g_return_val_if_fail (cr != NULL, 0);
  g_return_val_if_fail (text != NULL, 0);

  return pango_layout_get_unknown_glyphs_count (layout_for (cr, text));
}
