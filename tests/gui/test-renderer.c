/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-renderer.c: Tandem keeps GTK's OpenGL renderer off software rasterizers.
 *
 * The name test reads GL_RENDERER strings as Mesa and GPU drivers report them. The
 * choice test runs on this test's Xvfb, whose OpenGL is Mesa's llvmpipe where Mesa
 * is installed and absent where it is not: whatever it finds, the choice must agree
 * with the GL_RENDERER it saw, and a window realized afterwards must be drawn by the
 * renderer chosen (GTK reads GSK_RENDERER once, at its first renderer, so no window
 * may be realized in this process before that test).
 */

#include <gtk/gtk.h>

#include "tdm-renderer.h"

static void
test_software_names (void)
{
  static const struct {
    const char *name;
    gboolean software;
  } cases[] = {
    { "llvmpipe (LLVM 15.0.6, 256 bits)", TRUE },
    { "llvmpipe", TRUE },
    { "softpipe", TRUE },
    { "Software Rasterizer", TRUE },
    { "SWR (LLVM 12.0.0, 256 bits)", TRUE },
    { "GDI Generic", TRUE },
    { "NVIDIA H200/PCIe/SSE2", FALSE },
    { "Mesa Intel(R) UHD Graphics 620 (KBL GT2)", FALSE },
    { "AMD Radeon RX 6800 XT (navi21, LLVM 15.0.6, DRM 3.49, 6.1.0-13-amd64)", FALSE },
    { "SWRaster 9000", FALSE },        /* a word that starts like SWR is not it */
    { "virgl (llvmpipe)", FALSE },     /* a virtual GPU whose host rasterizes: a GPU to us */
    { "", FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    if (tdm_renderer_is_software_gl (cases[i].name) != cases[i].software)
      g_error ("\"%s\" taken for %s OpenGL", cases[i].name,
               cases[i].software ? "hardware" : "software");
  g_assert_false (tdm_renderer_is_software_gl (NULL));
}

static void
test_choose (void)
{
  GdkDisplay *display = gdk_display_get_default ();
  g_autofree char *name = NULL;
  TdmRendererChoice choice;
  GtkWidget *window;
  const char *type;

  /* The user's choice (the test environment sets cairo) is left alone. */
  g_setenv ("GSK_RENDERER", "gl", TRUE);
  g_assert_cmpint (tdm_renderer_choose (display, &name), ==, TDM_RENDERER_USER);
  g_assert_null (name);
  g_assert_cmpstr (g_getenv ("GSK_RENDERER"), ==, "gl");

  g_unsetenv ("GSK_RENDERER");
  choice = tdm_renderer_choose (display, &name);
  g_test_message ("GL_RENDERER: %s", name != NULL ? name : "(no OpenGL)");
  switch (choice)
    {
    case TDM_RENDERER_CAIRO:
      g_assert_true (tdm_renderer_is_software_gl (name));
      g_assert_cmpstr (g_getenv ("GSK_RENDERER"), ==, "cairo");
      break;
    case TDM_RENDERER_GL:
      g_assert_nonnull (name);
      g_assert_false (tdm_renderer_is_software_gl (name));
      g_assert_null (g_getenv ("GSK_RENDERER"));
      break;
    case TDM_RENDERER_NO_GL:
      g_assert_null (name);
      g_assert_null (g_getenv ("GSK_RENDERER"));
      break;
    case TDM_RENDERER_USER:
    default:
      g_assert_not_reached ();
    }

  window = gtk_window_new ();
  gtk_widget_realize (window);
  type = G_OBJECT_TYPE_NAME (gtk_native_get_renderer (GTK_NATIVE (window)));
  g_test_message ("renderer: %s", type);
  if (choice == TDM_RENDERER_GL)
    g_assert_cmpstr (type, !=, "GskCairoRenderer");
  else  /* chosen, or GTK's own fallback without OpenGL */
    g_assert_cmpstr (type, ==, "GskCairoRenderer");
  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int argc, char **argv)
{
  gtk_test_init (&argc, &argv, NULL);

  g_test_add_func ("/renderer/software-names", test_software_names);
  g_test_add_func ("/renderer/choose", test_choose);

  return g_test_run ();
}
