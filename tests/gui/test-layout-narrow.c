/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-layout-narrow.c — the window at 360, 700 and 1024 px, in English and in
 * Japanese, with the application's style sheet loaded as the application loads it:
 * the settings folded over the views are painted on a ground of their own (every
 * pixel of their pane opaque), so the page under them never shows through their
 * text. Pixels are read from the settings' pane rendered alone on a transparent
 * ground: what their pane leaves unpainted is what would show the page. And a
 * tooltip's text, squeezed against the screen's edge, keeps a phrase a line rather
 * than a column of two or three Japanese characters. */
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
  for (int i = 0; i < 2000 && gtk_widget_get_width(GTK_WIDGET(window)) < width - 12; i++)
    settle(1);
  wait_for_rest(GTK_WIDGET(window), 2);
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
  g_assert_true(gtk_widget_get_mapped(widget));
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

/* Reveals the settings where the flap folds, until their pane is shown and at rest,
 * then has the pane drawn at rest. Counted in frames, not main-loop turns: on a
 * loaded machine the flap folded a frame after the window reached its width, and
 * turns went by with no frame at all (the pane was then unmapped, or mapped but
 * never drawn: a paintable made of it painted nothing). */
static void
show_settings(TdmWindow *window, AdwFlap *flap, GtkWidget *pane)
{
  for (int tries = 0;; tries++) {
    gboolean folded = adw_flap_get_folded(flap);

    g_assert_cmpint(tries, <, 100);
    if (folded && !adw_flap_get_reveal_flap(flap))
      adw_flap_set_reveal_flap(flap, TRUE);
    wait_for_rest(GTK_WIDGET(window), 2);
    if (adw_flap_get_folded(flap) == folded && gtk_widget_get_mapped(pane) &&
        (!folded || adw_flap_get_reveal_progress(flap) >= 1))
      break;
  }
  wait_for_rest(pane, 2);
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
  show_settings(window, flap, pane);
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

/* A stand-in for GTK's tooltip window (its CSS name and a wrapping label), whose
 * own is not reachable from outside: the style sheet's rules for tooltips apply. */
typedef GtkWidget FakeTooltip;
typedef GtkWidgetClass FakeTooltipClass;
G_DEFINE_TYPE(FakeTooltip, fake_tooltip, GTK_TYPE_WIDGET)

static void
fake_tooltip_dispose(GObject *object)
{
  GtkWidget *child;

  while ((child = gtk_widget_get_first_child(GTK_WIDGET(object))) != NULL)
    gtk_widget_unparent(child);
  G_OBJECT_CLASS(fake_tooltip_parent_class)->dispose(object);
}

static void
fake_tooltip_class_init(FakeTooltipClass *klass)
{
  G_OBJECT_CLASS(klass)->dispose = fake_tooltip_dispose;
  gtk_widget_class_set_css_name(klass, "tooltip");
  gtk_widget_class_set_layout_manager_type(klass, GTK_TYPE_BIN_LAYOUT);
}

static void
fake_tooltip_init(FakeTooltip *self)
{
}

/* The narrowest a tooltip's label goes still holds "学習に使う画像" (the dataset
 * button's tooltip, which the edge of a 360 px screen broke after 使). */
static void
test_tooltip_width(void)
{
  const char *phrase = "学習に使う画像";
  GtkWidget *window = gtk_window_new();
  GtkWidget *tooltip = g_object_new(fake_tooltip_get_type(), NULL);
  GtkWidget *label = gtk_label_new("データセットのフォルダーを開き、学習に使う画像を選びます");
  PangoLayout *layout;
  int minimum, needed;

  gtk_label_set_wrap(GTK_LABEL(label), TRUE);
  gtk_widget_set_parent(label, tooltip);
  gtk_window_set_child(GTK_WINDOW(window), tooltip);
  gtk_widget_measure(label, GTK_ORIENTATION_HORIZONTAL, -1, &minimum, NULL, NULL, NULL);
  layout = gtk_widget_create_pango_layout(label, phrase);
  pango_layout_get_pixel_size(layout, &needed, NULL);
  g_object_unref(layout);
  g_test_message("a tooltip's text at its narrowest: %d px; “%s”: %d px", minimum, phrase, needed);
  g_assert_cmpint(minimum, >=, needed);
  gtk_window_destroy(GTK_WINDOW(window));
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

  g_test_add_func("/narrow/tooltip-width", test_tooltip_width);
  g_test_add_func("/narrow/settings-ground", test_settings_ground);
  g_test_add_func("/narrow/settings-ground/japanese", test_settings_ground_japanese);
  g_test_add_func("/narrow/settings-ground/japanese/subprocess",
                  test_settings_ground_japanese_subprocess);

  status = g_test_run();
  remove_folder(data_home);
  return status;
}
