/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-renderer.h: which of GTK's renderers draws Tandem's windows. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

typedef enum
{
  TDM_RENDERER_USER,          /* GSK_RENDERER was set: left as the user chose */
  TDM_RENDERER_GL,            /* OpenGL on a GPU: GTK's default, kept */
  TDM_RENDERER_CAIRO,         /* OpenGL was a software rasterizer: cairo instead */
  TDM_RENDERER_NO_GL,         /* no OpenGL context at all: GTK falls back by itself */
} TdmRendererChoice;

gboolean          tdm_renderer_is_software_gl (const char *gl_renderer);
TdmRendererChoice tdm_renderer_choose         (GdkDisplay *display,
                                               char      **gl_renderer);

G_END_DECLS
