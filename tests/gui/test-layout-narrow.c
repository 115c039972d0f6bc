/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-layout-narrow.c — the window at 360, 700 and 1024 px, in English and in
 * Japanese, with the application's style sheet loaded as the application loads it:
 * the settings folded over the views are painted on a ground of their own (every
 * pixel of their pane opaque), so the page under them never shows through their
 * text. Pixels are read from the settings' pane rendered alone on a transparent
 * ground: what their pane leaves unpainted is what would show the page. */
#include <locale.h>
#include <adwaita.h>
#include "tdm-application.h"
#include "tdm-window.h"
#include "window-test-util.h"

static TdmWindow *
window_at(int width)
{
  TdmWindow *window;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_set_default_size(GTK_WINDOW(window), width, 700);
  gtk_window_present(GTK_WINDOW(window));
  for (int i = 0; i < 200 && gtk_widget_get_width(GTK_WIDGET(window)) < width - 12; i++)
    settle(1);
  settle(20);
  return window;
}

/* The share of the widget's pixels, rendered alone, that are not fully opaque. */
static double
see_through(TdmWindow *window, GtkWidget *widget)
{
  int width = gtk_widget_get_width(widget), height = gtk_widget_get_height(widget);
  g_autoptr(GdkPaintable) paintable = gtk_widget_paintable_new(widget);
  g_autoptr(GtkSnapshot) snapshot = gtk_snapshot_new();
  g_autoptr(GskRenderNode) node = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  g_autofree guchar *pixels = NULL;
  GskRenderer *renderer = gtk_native_get_renderer(GTK_NATIVE(window));
  gsize clear = 0;

  g_assert_cmpint(width, >, 0);
  g_assert_cmpint(height, >, 0);
  gdk_paintable_snapshot(paintable, GDK_SNAPSHOT(snapshot), width, height);
  node = gtk_snapshot_free_to_node(g_steal_pointer(&snapshot));
  g_assert_nonnull(node);
  texture = gsk_renderer_render_texture(renderer, node,
                                        &GRAPHENE_RECT_INIT(0, 0, width, height));
  pixels = g_malloc((gsize)width * height * 4);
  gdk_texture_download(texture, pixels, (gsize)width * 4);
  for (gsize i = 0; i < (gsize)width * height; i++)
    clear += pixels[4 * i + 3] != 255;   /* Cairo's ARGB32: alpha last on x86 */
  return (double)clear / ((double)width * height);
}

/* folded: whether the settings must fold at this width (-1: either). */
static void
check_settings_ground(int width, int folded)
{
  TdmWindow *window = window_at(width);
  AdwFlap *flap = window_child(window, "flap");
  GtkWidget *pane = gtk_widget_get_ancestor(window_child(window, "sidebar"),
                                            GTK_TYPE_SCROLLED_WINDOW);
  double share;

  if (folded >= 0)
    g_assert_cmpint(adw_flap_get_folded(flap), ==, folded);
  if (adw_flap_get_folded(flap)) {
    adw_flap_set_reveal_flap(flap, TRUE);
    for (int i = 0; i < 2000 && adw_flap_get_reveal_progress(flap) < 1; i++)
      settle(1);
    settle(5);
  }
  share = see_through(window, pane);
  g_test_message("%d px: %.1f %% of the settings' pane lets the page through", width,
                 100 * share);
  g_assert_cmpfloat(share, ==, 0);
  destroy_window(window);
}

static void
check_widths(void)
{
  check_settings_ground(360, TRUE);
  check_settings_ground(700, -1);
  check_settings_ground(1024, FALSE);
}

static void
test_settings_ground(void)
{
  check_widths();
}

static void
test_settings_ground_japanese_subprocess(void)
{
  g_setenv("LANGUAGE", "ja", TRUE);
  tdm_application_init_i18n();
  check_widths();
}

static void
test_settings_ground_japanese(void)
{
  g_test_trap_subprocess("/narrow/settings-ground/japanese/subprocess", 0,
                         G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

int
main(int argc, char **argv)
{
  g_autofree char *data_home = g_dir_make_tmp("tandem-xdg-XXXXXX", NULL);
  int status;

  /* gettext ignores LANGUAGE in the "C" locale; the Japanese tests set it. */
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  g_setenv("XDG_DATA_HOME", data_home, TRUE);
  setlocale(LC_ALL, "");
  window_test_init(&argc, &argv);
  /* As AdwApplication loads it for the application. */
  {
    g_autoptr(GtkCssProvider) css = gtk_css_provider_new();

    gtk_css_provider_load_from_resource(css, "/io/github/tandem/Tandem/style.css");
    gtk_style_context_add_provider_for_display(gdk_display_get_default(),
                                               GTK_STYLE_PROVIDER(css),
                                               GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
  }

  g_test_add_func("/narrow/settings-ground", test_settings_ground);
  g_test_add_func("/narrow/settings-ground/japanese", test_settings_ground_japanese);
  g_test_add_func("/narrow/settings-ground/japanese/subprocess",
                  test_settings_ground_japanese_subprocess);

  status = g_test_run();
  remove_folder(data_home);
  return status;
}
