/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-renderer.c: which of GTK's renderers draws Tandem's windows.
 *
 * GTK 4.8 (Debian 12's) draws with OpenGL whenever it gets a context, even when that
 * OpenGL is Mesa's software rasterizer: llvmpipe under Xvfb, in a virtual machine,
 * over a remote desktop. llvmpipe rasterizes every frame on threads of its own, one
 * a core, and so takes the cores from the training threads exactly when the charts
 * redraw (bench/NOTES.md: the window kept 92–96 % of headless throughput with it on
 * two cores, 97–105 % with cairo). GTK's cairo renderer draws the same window on the
 * main thread alone. GTK 4.14 and later make this choice themselves (they keep their
 * GPU renderers off llvmpipe); this makes it for the GTK we build against.
 *
 * It asks a throw-away GL context for GL_RENDERER, so it runs after GTK is
 * initialized and before the first window is realized: GTK reads GSK_RENDERER once,
 * when it makes its first renderer. A renderer the user chose with GSK_RENDERER is
 * never overridden.
 */

#include <epoxy/gl.h>

#include "tdm-renderer.h"

/* The names Mesa's software rasterizers give in GL_RENDERER ("llvmpipe (LLVM 15.0.6,
 * 256 bits)", "softpipe", "Software Rasterizer" of the old swrast, "SWR" of
 * OpenSWR), and Windows' and VirtualBox's software fallbacks should one ever be
 * seen through a remote X server. */
gboolean
tdm_renderer_is_software_gl (const char *gl_renderer)
{
  static const char *software[] = {
    "llvmpipe", "softpipe", "software rasterizer", "swr", "gdi generic",
  };
  g_autofree char *lower = NULL;

  if (gl_renderer == NULL)
    return FALSE;

  lower = g_ascii_strdown (gl_renderer, -1);
  for (guint i = 0; i < G_N_ELEMENTS (software); i++)
    {
      gsize n = strlen (software[i]);

      /* A whole word at the start: "swr" must not match "SWRaster" of a GPU's name. */
      if (g_str_has_prefix (lower, software[i])
          && (lower[n] == '\0' || !g_ascii_isalnum (lower[n])))
        return TRUE;
    }
  return FALSE;
}

static char *
query_gl_renderer (GdkDisplay *display)
{
  g_autoptr (GdkGLContext) context = NULL;
  g_autoptr (GError) error = NULL;
  const char *name;
  char *result;

  context = gdk_display_create_gl_context (display, &error);
  if (context == NULL || !gdk_gl_context_realize (context, &error))
    {
      g_debug ("No OpenGL context: %s", error != NULL ? error->message : "unknown");
      return NULL;
    }

  gdk_gl_context_make_current (context);
  name = (const char *) glGetString (GL_RENDERER);
  result = g_strdup (name);
  gdk_gl_context_clear_current ();
  return result;
}

/* Sets GSK_RENDERER=cairo when OpenGL is a software rasterizer. Returns what it
 * decided; *gl_renderer (when not NULL) gets the GL_RENDERER string or NULL. */
TdmRendererChoice
tdm_renderer_choose (GdkDisplay *display,
                     char      **gl_renderer)
{
  g_autofree char *name = NULL;
  const char *chosen = g_getenv ("GSK_RENDERER");
  TdmRendererChoice choice;

  if (gl_renderer != NULL)
    *gl_renderer = NULL;
  if (chosen != NULL && chosen[0] != '\0')
    return TDM_RENDERER_USER;
  if (display == NULL)
    return TDM_RENDERER_NO_GL;

  name = query_gl_renderer (display);
  if (name == NULL)
    choice = TDM_RENDERER_NO_GL;
  else if (tdm_renderer_is_software_gl (name))
    choice = TDM_RENDERER_CAIRO;
  else
    choice = TDM_RENDERER_GL;

  if (choice == TDM_RENDERER_CAIRO)
    {
      g_debug ("OpenGL is %s, a software rasterizer: drawing with cairo", name);
      g_setenv ("GSK_RENDERER", "cairo", TRUE);
    }

  if (gl_renderer != NULL)
    *gl_renderer = g_steal_pointer (&name);
  return choice;
}
