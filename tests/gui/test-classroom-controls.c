/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-classroom-controls.c — part of test-classroom: presentation mode (the chart's
 * text at least 14 px at 1024×768, back to its size after), stepping one step at a
 * time and its Ctrl+→ key, caught before the focused widget takes it, and a batch
 * the training set cannot fill, refused before Start.
 */

#include <string.h>

#include <adwaita.h>

#include "tdm-chart.h"
#include "tdm-dashboard.h"
#include "tdm-dataset-chooser.h"
#include "tdm-timeline.h"
#include "tdm-window.h"
#include "test-classroom.h"
#include "window-test-util.h"

/* The chart's axis and legend text in pixels: 0.85 of its font (tdm-chart-draw.c). */
static double
chart_text_px(TdmChart *chart)
{
  PangoContext *context = gtk_widget_get_pango_context(GTK_WIDGET(chart));
  const PangoFontDescription *font = pango_context_get_font_description(context);
  double size = pango_font_description_get_size(font) / (double)PANGO_SCALE;
  int xft_dpi = 0;
  double dpi;

  g_object_get(gtk_settings_get_default(), "gtk-xft-dpi", &xft_dpi, NULL);
  dpi = xft_dpi > 0 ? xft_dpi / 1024.0 : 96.0;
  if (!pango_font_description_get_size_is_absolute(font))
    size = size * dpi / 72.0;
  return 0.85 * size;
}

static gboolean
large_text(gpointer chart)
{
  return chart_text_px(chart) >= 14.0;
}

static gboolean
small_text(gpointer chart)
{
  return chart_text_px(chart) < 14.0;
}

static void
test_presentation(void)
{
  TdmWindow *window;
  TdmDashboard *dashboard;
  TdmChart *loss, *memory;
  TdmTimeline *timeline;

  /* What AdwApplication loads at start-up; this window has no application. */
  {
    g_autoptr(GtkCssProvider) css = gtk_css_provider_new();

    gtk_css_provider_load_from_resource(css, "/io/github/tandem/Tandem/style.css");
    gtk_style_context_add_provider_for_display(gdk_display_get_default(), GTK_STYLE_PROVIDER(css),
                                               GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
  }
  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_set_default_size(GTK_WINDOW(window), 1024, 768);
  gtk_window_present(GTK_WINDOW(window));
  drain();
  dashboard = window_child(window, "dashboard");
  /* The charts, as during a run (before one, the dashboard shows what to do). */
  gtk_stack_set_visible_child_name((GtkStack *)gtk_widget_get_template_child(GTK_WIDGET(dashboard), TDM_TYPE_DASHBOARD, "view_stack"), "charts");
  loss = tdm_dashboard_get_chart(dashboard, "loss");
  memory = tdm_dashboard_get_chart(dashboard, "memory");
  timeline = TDM_TIMELINE(template_child(window_child(window, "devices_page"), "timeline"));

  g_assert_false(tdm_window_get_presentation(window));
  g_assert_true(wait_for(small_text, loss, 30));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.presentation", NULL));
  drain();
  g_assert_true(tdm_window_get_presentation(window));
  g_assert_true(gtk_widget_has_css_class(GTK_WIDGET(window), "presentation"));
  /* Styles apply at the next frame. */
  g_assert_true(wait_for(large_text, loss, 30));
  g_assert_cmpfloat(chart_text_px(loss), >=, 14.0);
  /* One chart enlarged: the others step aside. */
  g_assert_true(gtk_widget_get_visible(gtk_widget_get_ancestor(GTK_WIDGET(loss), GTK_TYPE_FLOW_BOX_CHILD)));
  g_assert_false(gtk_widget_get_visible(gtk_widget_get_ancestor(GTK_WIDGET(memory), GTK_TYPE_FLOW_BOX_CHILD)));
  g_assert_true(tdm_timeline_get_high_contrast(timeline));
  g_assert_true(gtk_revealer_get_reveal_child(window_child(window, "pace_revealer")));
  g_assert_false(adw_flap_get_reveal_flap(window_child(window, "flap")));
  /* 0 reads as full speed, in words; a pace set in front of the class… */
  g_assert_cmpstr(gtk_label_get_label(window_child(window, "pace_unit_label")), ==, "steps/s: full speed");
  gtk_spin_button_set_value(window_child(window, "pace_spin"), 2);
  g_assert_cmpstr(gtk_label_get_label(window_child(window, "pace_unit_label")), ==, "steps/s");

  /* Escape (win.leave-presentation) brings everything back. */
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.leave-presentation", NULL));
  drain();
  g_assert_false(tdm_window_get_presentation(window));
  g_assert_false(gtk_widget_has_css_class(GTK_WIDGET(window), "presentation"));
  g_assert_true(gtk_widget_get_visible(gtk_widget_get_ancestor(GTK_WIDGET(memory), GTK_TYPE_FLOW_BOX_CHILD)));
  g_assert_false(tdm_timeline_get_high_contrast(timeline));
  g_assert_true(wait_for(small_text, loss, 30));
  /* …ends with presentation mode: no hidden bar keeps slowing the next run. */
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "pace_revealer")));
  g_assert_cmpfloat(gtk_spin_button_get_value(window_child(window, "pace_spin")), ==, 0);
  g_assert_cmpstr(gtk_label_get_label(window_child(window, "pace_unit_label")), ==, "steps/s: full speed");

  destroy_window(window);
}

static gboolean
run_paused(gpointer data)
{
  TdmWindow *window = data;

  return g_str_equal(adw_view_switcher_title_get_subtitle(window_child(window, "window_title")), "Paused");
}

/* One step at a time: the step button brings a run to rest; Stop still ends it. */
static void
test_single_step(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 100, 1);

  gtk_spin_button_set_value(window_child(window, "pace_spin"), 20);
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.single-step", NULL));
  g_assert_true(wait_for(run_paused, window, 120));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.single-step", NULL));
  g_assert_true(wait_for(run_paused, window, 120));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.stop", NULL));
  g_assert_true(wait_for(not_running, window, 120));
  g_assert_cmpstr(adw_view_switcher_title_get_subtitle(window_child(window, "window_title")), ==, "Stopped");
  destroy_window(window);
}

static gboolean
cannot_start(gpointer window)
{
  return !tdm_window_get_can_start(window);
}

/* A batch the training set cannot fill is refused before Start, under the batch
 * size, in the form's words (no flag), and the whole sentence shows. */
static void
test_batch_too_large(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 100, 1);
  AdwActionRow *row = window_child(window, "batch_row");
  int train = 0;

  g_assert_true(tdm_dataset_chooser_get_counts(window_child(window, "dataset_chooser"), &train, NULL));
  g_assert_cmpint(train, <, 65536);
  gtk_spin_button_set_value(window_child(window, "batch_spin"), train + 1);
  g_assert_true(wait_for(cannot_start, window, 60));
  g_assert_nonnull(strstr(adw_action_row_get_subtitle(row), "is larger than the"));
  g_assert_nonnull(strstr(adw_action_row_get_subtitle(row), "lower the batch size"));
  g_assert_null(strstr(adw_action_row_get_subtitle(row), "--"));
  g_assert_cmpint(adw_action_row_get_subtitle_lines(row), ==, 0);
  g_assert_true(gtk_widget_has_css_class(GTK_WIDGET(row), "error"));
  /* The empty charts page says the same, not a general hint nor "pick a dataset". */
  {
    AdwStatusPage *empty = ADW_STATUS_PAGE(gtk_widget_get_template_child(
        GTK_WIDGET(window_child(window, "dashboard")), TDM_TYPE_DASHBOARD, "empty_page"));

    g_assert_cmpstr(adw_status_page_get_title(empty), ==, "Settings Needed");
    g_assert_nonnull(strstr(adw_status_page_get_description(empty), "lower the batch size."));
    gtk_spin_button_set_value(window_child(window, "batch_spin"), train);
    g_assert_true(wait_for(can_start, window, 60));
    g_assert_cmpstr(adw_status_page_get_title(empty), ==, "Ready to Train");
  }
  g_assert_false(gtk_widget_has_css_class(GTK_WIDGET(row), "error"));
  destroy_window(window);
}

/* Ctrl+→ is caught before the focused widget (a spin button, a scrolled page) takes
 * it for itself: a shortcut of the capture phase, on the window. */
static void
test_step_key(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 100, 1);
  g_autoptr(GListModel) controllers = gtk_widget_observe_controllers(GTK_WIDGET(window));
  gboolean found = FALSE;

  for (guint i = 0; i < g_list_model_get_n_items(controllers); i++)
    {
      g_autoptr(GtkEventController) c = g_list_model_get_item(controllers, i);

      if (!GTK_IS_SHORTCUT_CONTROLLER(c) || gtk_event_controller_get_propagation_phase(c) != GTK_PHASE_CAPTURE)
        continue;
      for (guint j = 0; j < g_list_model_get_n_items(G_LIST_MODEL(c)); j++)
        {
          g_autoptr(GtkShortcut) shortcut = g_list_model_get_item(G_LIST_MODEL(c), j);
          GtkShortcutTrigger *trigger = gtk_shortcut_get_trigger(shortcut);
          GtkShortcutAction *action = gtk_shortcut_get_action(shortcut);

          if (GTK_IS_KEYVAL_TRIGGER(trigger) && gtk_keyval_trigger_get_keyval(GTK_KEYVAL_TRIGGER(trigger)) == GDK_KEY_Right
              && gtk_keyval_trigger_get_modifiers(GTK_KEYVAL_TRIGGER(trigger)) == GDK_CONTROL_MASK
              && GTK_IS_NAMED_ACTION(action)
              && g_str_equal(gtk_named_action_get_action_name(GTK_NAMED_ACTION(action)), "win.single-step"))
            found = TRUE;
        }
    }
  g_assert_true(found);
  destroy_window(window);
}

void
test_classroom_add_controls(void)
{
  g_test_add_func("/classroom/presentation", test_presentation);
  g_test_add_func("/classroom/single-step", test_single_step);
  g_test_add_func("/classroom/step-key", test_step_key);
  g_test_add_func("/classroom/batch-too-large", test_batch_too_large);
}
