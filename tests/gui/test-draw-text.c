/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-draw-text.c: the Cairo views' text (tdm-draw.h) in Japanese. Drawn in a widget
 * whose font has no Japanese glyphs, every character still finds one (Pango's font
 * fallback; Cairo's toy text API drew the same empty box for each), and no file in
 * ui/ draws text with the toy API any more. Skipped, with a message, on a machine
 * without a Japanese font. */

#include <gtk/gtk.h>
#include <string.h>

#include "tdm-draw.h"

/* 予測 ("predicted") and 装置 ("device"): what the Japanese window draws. */
static const char *const words[] = { "予", "測", "装", "置" };

/* Whether fontconfig knows a font with Japanese glyphs. */
static gboolean
have_japanese_font (void)
{
  g_autofree char *out = NULL;

  if (!g_spawn_command_line_sync ("fc-list :lang=ja family", &out, NULL, NULL, NULL))
    return FALSE;
  return out != NULL && *out != '\0';
}

/* `text` drawn with the helper into a fresh A8 surface: its pixels. */
static GBytes *
ink_of (GtkWidget  *widget,
        const char *text)
{
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_A8, 40, 40);
  cairo_t *cr = cairo_create (surface);
  GBytes *ink;

  tdm_draw_set_font (cr, widget);
  cairo_set_source_rgb (cr, 0, 0, 0);
  tdm_draw_text (cr, 4, 30, text);
  cairo_surface_flush (surface);
  ink = g_bytes_new (cairo_image_surface_get_data (surface),
                     cairo_image_surface_get_stride (surface) * 40);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
  return ink;
}

static void
test_japanese (void)
{
  GtkWidget *label = g_object_ref_sink (gtk_label_new (NULL));
  g_autoptr(PangoFontDescription) latin = pango_font_description_from_string ("DejaVu Sans 11");
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_A8, 1, 1);
  cairo_t *cr = cairo_create (surface);
  GBytes *ink[G_N_ELEMENTS (words)];

  if (!have_japanese_font ())
    {
      g_test_skip ("no font with Japanese glyphs (fc-list :lang=ja is empty): install fonts-ipafont-gothic");
      goto out;
    }
  /* A widget font with no Japanese at all: what reached the toy API's one face. */
  pango_context_set_font_description (gtk_widget_get_pango_context (label), latin);
  tdm_draw_set_font (cr, label);
  g_assert_cmpint (tdm_draw_unknown_glyphs (cr, "予測 →"), ==, 0);
  g_assert_cmpint (tdm_draw_unknown_glyphs (cr, "デバイス"), ==, 0);
  g_assert_cmpfloat (tdm_draw_text_width (cr, "予測"), >, 0);

  /* Drawn, each character its own shape, not the same box for all. */
  for (guint i = 0; i < G_N_ELEMENTS (words); i++)
    {
      ink[i] = ink_of (label, words[i]);
      for (guint j = 0; j < i; j++)
        g_assert_false (g_bytes_equal (ink[i], ink[j]));
    }
  for (guint i = 0; i < G_N_ELEMENTS (words); i++)
    g_bytes_unref (ink[i]);

  /* Cut to fit, on a whole character, and still found. */
  {
    double drawn = 0;
    double whole = tdm_draw_text_width (cr, "予測装置の名前");
    g_autofree char *fitted = tdm_draw_fit_text (cr, "予測装置の名前", whole / 2, &drawn);

    g_assert_true (g_str_has_suffix (fitted, "…"));
    g_assert_true (g_utf8_validate (fitted, -1, NULL));
    g_assert_cmpfloat (drawn, <=, whole / 2);
    g_assert_cmpint (tdm_draw_unknown_glyphs (cr, fitted), ==, 0);
  }

out:
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
  g_object_unref (label);
}

/* The size a view asks for in pixels is the size drawn, and 0 goes back. */
static void
test_font_px (void)
{
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_A8, 1, 1);
  cairo_t *cr = cairo_create (surface);
  double base, small, again;

  tdm_draw_set_font (cr, NULL);
  base = tdm_draw_text_width (cr, "Predicted");
  tdm_draw_set_font_px (cr, 7);
  small = tdm_draw_text_width (cr, "Predicted");
  tdm_draw_set_font_px (cr, 0);
  again = tdm_draw_text_width (cr, "Predicted");
  g_assert_cmpfloat (small, <, base * 0.75);
  g_assert_cmpfloat (again, ==, base);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
}

/* A second check: no source file in ui/ calls Cairo's toy text API. */
static void
check_folder (const char *path)
{
  static const char *const toy[] = { "cairo_show_text", "cairo_select_font_face",
                                     "cairo_text_extents", "cairo_set_font_size" };
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  g_assert_nonnull (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);
      g_autofree char *text = NULL;

      if (g_file_test (child, G_FILE_TEST_IS_DIR))
        {
          check_folder (child);
          continue;
        }
      if (!g_str_has_suffix (name, ".c") && !g_str_has_suffix (name, ".h"))
        continue;
      g_assert_true (g_file_get_contents (child, &text, NULL, NULL));
      for (guint k = 0; k < G_N_ELEMENTS (toy); k++)
        if (strstr (text, toy[k]) != NULL)
          g_error ("%s calls %s: draw text with tdm_draw_text() (Pango, with font fallback)",
                   child, toy[k]);
    }
}

static void
test_no_toy_text (void)
{
  g_autofree char *ui = g_test_build_filename (G_TEST_DIST, "..", "..", "ui", NULL);

  check_folder (ui);
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  g_test_add_func ("/draw-text/japanese", test_japanese);
  g_test_add_func ("/draw-text/font-px", test_font_px);
  g_test_add_func ("/draw-text/no-toy-text", test_no_toy_text);
  return g_test_run ();
}
