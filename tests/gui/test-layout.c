/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-layout.c: the window at phone, laptop and desktop widths, in the system's
 * styles, and as a screen reader and a keyboard reach it.
 *
 * Layout is checked on allocations (gtk_widget_compute_bounds against the window),
 * not pixels: at 360, 900, 1024 and 1920 px every header control and every chart
 * card lies inside the window and no two header controls overlap, the settings
 * fold into a flap only where they must, and the charts reflow 3 → 2 → 1 columns.
 * Styles go through AdwStyleManager (dark) and libadwaita's own high-contrast switch
 * in a subprocess; nothing sets GTK_THEME. Runs under xvfb-run-test.sh.
 */

#include <math.h>
#include <string.h>

#include <adwaita.h>

#include "tdm-build-config.h"

#include "tdm-application.h"
#include "tdm-chart.h"
#include "tdm-dashboard.h"
#include "tdm-device.h"
#include "tdm-run-form.h"
#include "tdm-status-line.h"
#include "tdm-window.h"
#include "window-test-util.h"

static gpointer
dashboard_child(TdmWindow *window, const char *name)
{
  GObject *object = gtk_widget_get_template_child(window_child(window, "dashboard"),
                                                  TDM_TYPE_DASHBOARD, name);

  g_assert_nonnull(object);
  return object;
}

static TdmWindow *
window_at(int width, int height)
{
  TdmWindow *window;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_set_default_size(GTK_WINDOW(window), width, height);
  gtk_window_present(GTK_WINDOW(window));
  /* The charts, as during a run. */
  gtk_stack_set_visible_child_name(dashboard_child(window, "view_stack"), "charts");
  tdm_dashboard_set_status(window_child(window, "dashboard"),
                           "Epoch 10 of 20 · Step 6,000 of 12,000 · 12,345 samples/s · "
                           "1:02:03 elapsed · 1:02:03 left");
  for (int i = 0; i < 2000 && gtk_widget_get_width(GTK_WIDGET(window)) < width - 12; i++)
    settle(1);
  /* Laid out at that width (the flap folded or not, the cards in their columns). */
  wait_for_rest(GTK_WIDGET(window), 2);
  if (g_getenv("TDM_DEBUG_MIN")) {
    const char *names[] = {"flap", "sidebar", "dashboard", "start_button", NULL};
    GtkWidget *hb = gtk_widget_get_ancestor(window_child(window, "pause_button"), ADW_TYPE_HEADER_BAR);
    int m;
    gtk_widget_measure(hb, GTK_ORIENTATION_HORIZONTAL, -1, &m, NULL, NULL, NULL);
    g_printerr("header min %d\n", m);
    for (int i = 0; names[i]; i++) {
      int m;
      gtk_widget_measure(window_child(window, names[i]), GTK_ORIENTATION_HORIZONTAL, -1, &m, NULL, NULL, NULL);
      g_printerr("%s min %d\n", names[i], m);
    }
  }
  /* The default size counts the frame a window without a compositor draws. */
  g_assert_cmpint(gtk_widget_get_width(GTK_WIDGET(window)), >=, width - 12);
  g_assert_cmpint(gtk_widget_get_width(GTK_WIDGET(window)), <=, width);
  return window;
}

/* The widget's box in window coordinates; it must be shown, non-empty and inside. */
static graphene_rect_t
bounds_inside(TdmWindow *window, GtkWidget *widget, const char *what)
{
  graphene_rect_t r;
  double w = gtk_widget_get_width(GTK_WIDGET(window));
  double h = gtk_widget_get_height(GTK_WIDGET(window));

  if (!gtk_widget_get_mapped(widget))
    g_error("%s is not shown at %g px", what, w);
  g_assert_true(gtk_widget_compute_bounds(widget, GTK_WIDGET(window), &r));
  if (r.size.width < 1 || r.size.height < 1 || r.origin.x < -0.5 || r.origin.y < -0.5 ||
      r.origin.x + r.size.width > w + 0.5 || r.origin.y + r.size.height > h + 0.5)
    g_error("%s is clipped at %g px: %g,%g %g×%g", what, w, r.origin.x, r.origin.y,
            r.size.width, r.size.height);
  return r;
}

static gboolean
overlap(const graphene_rect_t *a, const graphene_rect_t *b)
{
  return a->origin.x + 0.5 < b->origin.x + b->size.width &&
         b->origin.x + 0.5 < a->origin.x + a->size.width &&
         a->origin.y + 0.5 < b->origin.y + b->size.height &&
         b->origin.y + 0.5 < a->origin.y + a->size.height;
}

static void
check_width(int width, gboolean folded, guint columns)
{
  TdmWindow *window = window_at(width, 700);
  /* The title too: squeezed, it must never run under a button. */
  const char *header[] = {"sidebar_button", "start", "pause_button", "stop_button",
                          "primary_menu_button", "window_title"};
  graphene_rect_t boxes[G_N_ELEMENTS(header)];
  AdwFlap *flap = window_child(window, "flap");
  GtkWidget *grid = dashboard_child(window, "chart_grid");
  double xs[8];
  guint n_xs = 0, n_cards = 0;
  int min_width;

  /* GNOME's smallest width fits the whole window. */
  gtk_widget_measure(GTK_WIDGET(window), GTK_ORIENTATION_HORIZONTAL, -1, &min_width,
                     NULL, NULL, NULL);
  g_assert_cmpint(min_width, <=, 360);

  for (guint i = 0; i < G_N_ELEMENTS(header); i++) {
    GtkWidget *w = window_child(window, g_str_equal(header[i], "start") ? "start_button" : header[i]);

    /* On a narrow window Start shows its icon alone. */
    if (!gtk_widget_get_mapped(w) && g_str_equal(header[i], "start"))
      w = window_child(window, "start_icon_button");
    boxes[i] = bounds_inside(window, w, header[i]);
    for (guint j = 0; j < i; j++)
      if (overlap(&boxes[i], &boxes[j]))
        g_error("%s overlaps %s at %d px", header[i], header[j], width);
  }

  g_assert_cmpint(adw_flap_get_folded(flap), ==, folded);
  /* Folded, the settings are one click (or F9) away and then fit the window. */
  if (folded) {
    gtk_widget_activate_action(GTK_WIDGET(window), "win.toggle-sidebar", NULL);
    g_assert_true(adw_flap_get_reveal_flap(flap));
    /* Until the slide has finished; counted in frames, not time. */
    for (int tries = 0; adw_flap_get_reveal_progress(flap) < 1; tries++) {
      g_assert_cmpint(tries, <, 100);
      wait_for_rest(GTK_WIDGET(window), 2);
    }
  }
  /* The settings scroll up and down inside their pane, never sideways. */
  {
    GtkWidget *form = window_child(window, "sidebar");
    graphene_rect_t r;

    bounds_inside(window, gtk_widget_get_ancestor(form, GTK_TYPE_SCROLLED_WINDOW), "the settings");
    g_assert_true(gtk_widget_compute_bounds(form, GTK_WIDGET(window), &r));
    g_assert_cmpfloat(r.origin.x, >=, 0);
    g_assert_cmpfloat(r.origin.x + r.size.width, <=, gtk_widget_get_width(GTK_WIDGET(window)) + 0.5);
  }

  /* Every card inside the window's width (the column may scroll, never the row),
   * laid out in the expected number of columns. */
  for (GtkWidget *c = gtk_widget_get_first_child(grid); c; c = gtk_widget_get_next_sibling(c)) {
    graphene_rect_t r;
    gboolean seen = FALSE;

    if (!GTK_IS_FLOW_BOX_CHILD(c))
      continue;
    g_assert_true(gtk_widget_compute_bounds(c, GTK_WIDGET(window), &r));
    g_assert_cmpfloat(r.origin.x, >=, 0);
    g_assert_cmpfloat(r.origin.x + r.size.width, <=, width + 0.5);
    g_assert_cmpfloat(r.size.width, >=, 200);
    n_cards++;
    for (guint k = 0; k < n_xs; k++)
      seen |= fabs(xs[k] - r.origin.x) < 1;
    if (!seen && n_xs < G_N_ELEMENTS(xs))
      xs[n_xs++] = r.origin.x;
  }
  g_assert_cmpuint(n_cards, ==, 6);
  g_assert_cmpuint(n_xs, ==, columns);

  /* The status line wraps rather than losing the time left: every line it needs at
   * its width is inside its allocation, and it is inside the window. */
  {
    GtkWidget *line = dashboard_child(window, "status_line");
    int lines = tdm_status_line_get_lines(TDM_STATUS_LINE(line), gtk_widget_get_width(line));
    int one_line, needed;

    gtk_widget_measure(line, GTK_ORIENTATION_VERTICAL, 100000, &one_line, NULL, NULL, NULL);
    gtk_widget_measure(line, GTK_ORIENTATION_VERTICAL, gtk_widget_get_width(line), &needed, NULL,
                       NULL, NULL);
    g_assert_nonnull(strstr(tdm_status_line_get_text(TDM_STATUS_LINE(line)), "left"));
    g_assert_cmpint(lines, >=, 1);
    g_assert_cmpint(needed, >=, lines * one_line - 1);
    g_assert_cmpint(gtk_widget_get_height(line), >=, needed);
    if (width <= 360)
      g_assert_cmpint(lines, >, 1);
    if (!folded || !adw_flap_get_reveal_flap(flap))
      bounds_inside(window, line, "the status line");
  }

  destroy_window(window);
}

static void
test_layout_360(void)
{
  check_width(360, TRUE, 1);
}

/* A laptop's half screen: the status line must not be cut. */
static void
test_layout_700(void)
{
  check_width(700, FALSE, 1);
}

static void
test_layout_900(void)
{
  check_width(900, FALSE, 2);
}

static void
test_layout_1024(void)
{
  check_width(1024, FALSE, 2);
}

static void
test_layout_1920(void)
{
  check_width(1920, FALSE, 3);
}

/* The charts follow the style: light text on dark cards, dark on light. */
static double
chart_text_luminance(TdmWindow *window)
{
  TdmChart *chart = tdm_dashboard_get_chart(window_child(window, "dashboard"), "loss");
  GdkRGBA fg;

  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_style_context_get_color(gtk_widget_get_style_context(GTK_WIDGET(chart)), &fg);
  G_GNUC_END_IGNORE_DEPRECATIONS
  return 0.2126 * fg.red + 0.7152 * fg.green + 0.0722 * fg.blue;
}

static void
test_style_dark(void)
{
  AdwStyleManager *style = adw_style_manager_get_default();
  TdmWindow *window = window_at(1024, 700);

  g_assert_null(g_getenv("GTK_THEME"));
  adw_style_manager_set_color_scheme(style, ADW_COLOR_SCHEME_FORCE_LIGHT);
  wait_for_rest(GTK_WIDGET(window), 2);
  g_assert_false(adw_style_manager_get_dark(style));
  g_assert_cmpfloat(chart_text_luminance(window), <, 0.5);

  adw_style_manager_set_color_scheme(style, ADW_COLOR_SCHEME_FORCE_DARK);
  wait_for_rest(GTK_WIDGET(window), 2);
  g_assert_true(adw_style_manager_get_dark(style));
  g_assert_cmpfloat(chart_text_luminance(window), >, 0.5);

  adw_style_manager_set_color_scheme(style, ADW_COLOR_SCHEME_DEFAULT);
  destroy_window(window);
}

static void
test_style_high_contrast_subprocess(void)
{
  TdmWindow *window = window_at(1024, 700);

  g_assert_true(adw_style_manager_get_high_contrast(adw_style_manager_get_default()));
  bounds_inside(window, window_child(window, "stop_button"), "Stop");
  destroy_window(window);
}

static void
test_style_high_contrast(void)
{
  /* Read by libadwaita once, at start-up: the subprocess starts with it set. This
   * process has started already and is not affected. */
  g_setenv("ADW_DEBUG_HIGH_CONTRAST", "1", TRUE);
  g_test_trap_subprocess("/style/high-contrast/subprocess", 0, G_TEST_SUBPROCESS_DEFAULT);
  g_unsetenv("ADW_DEBUG_HIGH_CONTRAST");
  g_test_trap_assert_passed();
}

/* ---- the dashboard's own rules ------------------------------------------------ */

static gboolean
widget_mapped(gpointer data)
{
  return gtk_widget_get_mapped(data);
}

static gboolean
loss_has_two(gpointer data)
{
  return tdm_series_get_n_appended(tdm_chart_get_series(data, 0)) >= 2;
}

/* The first label (or status line) under `root` whose text holds `needle`, or NULL. */
static GtkWidget *
find_label_containing(GtkWidget *root, const char *needle)
{
  if (GTK_IS_LABEL(root) && strstr(gtk_label_get_label(GTK_LABEL(root)), needle) != NULL)
    return root;
  if (TDM_IS_STATUS_LINE(root) &&
      strstr(tdm_status_line_get_text(TDM_STATUS_LINE(root)), needle) != NULL)
    return root;
  for (GtkWidget *w = gtk_widget_get_first_child(root); w != NULL; w = gtk_widget_get_next_sibling(w)) {
    GtkWidget *found = find_label_containing(w, needle);

    if (found != NULL)
      return found;
  }
  return NULL;
}

static void
start_dashboard(TdmDashboard *dashboard, int replicas)
{
  TdmEvent e = {.kind = TDM_EVENT_STARTED};

  e.started.replicas = replicas;
  for (int r = 0; r < replicas; r++)
    g_strlcpy(e.started.device[r], "cpu", sizeof e.started.device[r]);
  e.started.batch = 100;
  e.started.epochs = 1;
  e.started.steps_per_epoch = 10;
  e.started.total_steps = 10;
  tdm_dashboard_handle_event(dashboard, &e);
}

/* One device neither communicates nor waits, so its step-time legend lists
 * Compute only; two list all three. */
static void
test_dashboard_step_time_legend(void)
{
  TdmDashboard *dashboard = g_object_ref_sink(g_object_new(TDM_TYPE_DASHBOARD, NULL));
  TdmChart *chart = tdm_dashboard_get_chart(dashboard, "step-time");

  start_dashboard(dashboard, 1);
  g_assert_cmpuint(tdm_chart_get_n_series(chart), ==, 3);
  g_assert_true(tdm_chart_get_series_visible(chart, 0));
  g_assert_false(tdm_chart_get_series_visible(chart, 1));
  g_assert_false(tdm_chart_get_series_visible(chart, 2));

  start_dashboard(dashboard, 2);
  for (guint i = 0; i < 3; i++)
    g_assert_true(tdm_chart_get_series_visible(chart, i));

  g_object_unref(dashboard);
}

/* Replicas sharing a GPU: the driver's memory and load are the whole GPU's, so the
 * memory and load charts draw one line per GPU (and one capacity line), not one
 * identical line per replica; CPU workers keep a line each. */
static void
test_dashboard_shared_gpu(void)
{
  TdmDashboard *dashboard = g_object_ref_sink(g_object_new(TDM_TYPE_DASHBOARD, NULL));
  const TdmDeviceId devices[] = {TDM_DEVICE_GPU(0), TDM_DEVICE_GPU(0), TDM_DEVICE_GPU(0),
                                 TDM_DEVICE_GPU(1), TDM_DEVICE_CPU, TDM_DEVICE_CPU};
  TdmEvent e = {.kind = TDM_EVENT_STARTED};

  tdm_started_event_set_devices(&e.started, devices, G_N_ELEMENTS(devices));
  e.started.batch = 600;
  e.started.epochs = 1;
  e.started.steps_per_epoch = 10;
  e.started.total_steps = 10;
  tdm_dashboard_handle_event(dashboard, &e);
  /* cuda:0, cuda:1, two CPU workers; capacity lines for cuda:0 and cuda:1. */
  g_assert_cmpuint(tdm_chart_get_n_series(tdm_dashboard_get_chart(dashboard, "memory")), ==, 6);
  g_assert_cmpuint(tdm_chart_get_n_series(tdm_dashboard_get_chart(dashboard, "load")), ==, 4);

  start_dashboard(dashboard, 2);
  g_assert_cmpuint(tdm_chart_get_n_series(tdm_dashboard_get_chart(dashboard, "memory")), ==, 2);
  g_assert_cmpuint(tdm_chart_get_n_series(tdm_dashboard_get_chart(dashboard, "load")), ==, 2);
  g_object_unref(dashboard);
}

/* Points for charts not shown go straight in (nothing to pace: no draw comes of
 * them) and the status line is brought up to date when the charts are shown. Shown,
 * the charts get their points at the pacer's pace, not at once. */
static void
test_dashboard_hidden_unpaced(void)
{
  GtkWindow *window = GTK_WINDOW(gtk_window_new());
  TdmDashboard *dashboard = g_object_new(TDM_TYPE_DASHBOARD, NULL);
  TdmChart *loss = tdm_dashboard_get_chart(dashboard, "loss");
  TdmEvent e = {.kind = TDM_EVENT_STEP};

  gtk_window_set_child(window, GTK_WIDGET(dashboard));
  start_dashboard(dashboard, 2);
  e.step.step = 3;
  e.step.epoch_float = 0.3;
  e.step.train_loss = 1.5;
  e.step.train_accuracy = 0.4;
  e.step.samples_per_second = 1234;
  e.step.elapsed = 1;
  e.step.fraction = 0.3;
  tdm_dashboard_handle_event(dashboard, &e);
  g_assert_false(gtk_widget_get_mapped(GTK_WIDGET(dashboard)));
  g_assert_cmpuint(tdm_series_get_n_appended(tdm_chart_get_series(loss, 0)), ==, 1);

  /* Shown: the status line says step 3 at once, without waiting for the pacer. */
  gtk_window_present(window);
  g_assert_true(wait_for(widget_mapped, dashboard, 10));
  g_assert_nonnull(find_label_containing(GTK_WIDGET(dashboard), "Step 3 of 10"));

  /* Shown: the next point waits for the pacer's tick. */
  e.step.step = 4;
  tdm_dashboard_handle_event(dashboard, &e);
  g_assert_cmpuint(tdm_series_get_n_appended(tdm_chart_get_series(loss, 0)), ==, 1);
  g_assert_true(wait_for(loss_has_two, loss, 10));

  gtk_window_destroy(window);
}

/* A one-child container that counts how often GTK measures it: a child that asks
 * for a new size gets its parent measured again at the next layout; one that only
 * redraws does not. (A plain widget: a GtkBox measures through its layout manager.) */
typedef struct {
  GtkWidget parent_instance;
  guint measured;
} CountingBin;
typedef GtkWidgetClass CountingBinClass;
G_DEFINE_TYPE(CountingBin, counting_bin, GTK_TYPE_WIDGET)

static void
counting_bin_measure(GtkWidget *widget, GtkOrientation orientation, int for_size, int *minimum,
                     int *natural, int *minimum_baseline, int *natural_baseline)
{
  ((CountingBin *)widget)->measured++;
  gtk_widget_measure(gtk_widget_get_first_child(widget), orientation, for_size, minimum, natural,
                     minimum_baseline, natural_baseline);
}

static void
counting_bin_size_allocate(GtkWidget *widget, int width, int height, int baseline)
{
  gtk_widget_allocate(gtk_widget_get_first_child(widget), width, height, baseline, NULL);
}

static GtkSizeRequestMode
counting_bin_request_mode(GtkWidget *widget)
{
  return GTK_SIZE_REQUEST_HEIGHT_FOR_WIDTH;
}

static void
counting_bin_dispose(GObject *object)
{
  GtkWidget *child;

  while ((child = gtk_widget_get_first_child(GTK_WIDGET(object))) != NULL)
    gtk_widget_unparent(child);
  G_OBJECT_CLASS(counting_bin_parent_class)->dispose(object);
}

static void
counting_bin_class_init(CountingBinClass *klass)
{
  G_OBJECT_CLASS(klass)->dispose = counting_bin_dispose;
  klass->measure = counting_bin_measure;
  klass->size_allocate = counting_bin_size_allocate;
  klass->get_request_mode = counting_bin_request_mode;
}

static void
counting_bin_init(CountingBin *self)
{
}

/* The status line's text changes every second: it must not ask the window for a
 * relayout each time, only when it needs another number of lines (a relayout on X11
 * costs round trips to the server; tdm-status-line.c). */
static void
test_status_line_relayout(void)
{
  GtkWindow *window = GTK_WINDOW(gtk_window_new());
  CountingBin *box = g_object_new(counting_bin_get_type(), NULL);
  TdmStatusLine *line = g_object_new(TDM_TYPE_STATUS_LINE, NULL);
  const char *one = "Epoch 1 of 7 · Step 10 of 100 · 9,876 samples/s · 0:01 elapsed · 0:09 left";
  const char *same = "Epoch 1 of 7 · Step 11 of 100 · 9,870 samples/s · 0:02 elapsed · 0:08 left";
  guint before;
  int height;

  gtk_widget_set_valign(GTK_WIDGET(line), GTK_ALIGN_START);
  gtk_widget_set_parent(GTK_WIDGET(line), GTK_WIDGET(box));
  gtk_window_set_child(window, GTK_WIDGET(box));
  gtk_window_set_default_size(window, 900, 100);
  tdm_status_line_set_text(line, one);
  gtk_window_present(window);
  wait_for_rest(GTK_WIDGET(window), 2);
  g_assert_cmpint(tdm_status_line_get_lines(line, gtk_widget_get_width(GTK_WIDGET(line))), ==, 1);
  height = gtk_widget_get_height(GTK_WIDGET(line));

  /* The same number of lines: redrawn, not measured again. */
  before = box->measured;
  tdm_status_line_set_text(line, same);
  wait_for_rest(GTK_WIDGET(window), 2);
  g_assert_cmpuint(box->measured, ==, before);
  g_assert_cmpstr(tdm_status_line_get_text(line), ==, same);

  /* Three times the text wraps at 900 px: measured again, and taller. */
  {
    g_autofree char *long_text = g_strjoin(" · ", one, one, one, NULL);

    g_assert_cmpint(tdm_status_line_get_lines(line, gtk_widget_get_width(GTK_WIDGET(line))), ==, 1);
    tdm_status_line_set_text(line, long_text);
    wait_for_rest(GTK_WIDGET(window), 2);
    g_assert_cmpuint(box->measured, >, before);
    g_assert_cmpint(tdm_status_line_get_lines(line, gtk_widget_get_width(GTK_WIDGET(line))), >, 1);
    g_assert_cmpint(gtk_widget_get_height(GTK_WIDGET(line)), >, height);
  }

  gtk_window_destroy(window);
}

/* The empty state never says "press Start" while Start cannot be pressed;
 * the window tells it whether it can. */
static void
test_empty_state(void)
{
  TdmWindow *window = window_at(1024, 700);
  g_autoptr(GArray) no_devices = g_array_new(FALSE, TRUE, sizeof(TdmDeviceInfo));
  AdwStatusPage *page;

  /* No device to train on: Start cannot be pressed, however soon the dataset loads
   * (waiting for it to be slow made this test depend on the machine's load). */
  tdm_window_set_devices(window, no_devices);
  gtk_stack_set_visible_child_name(dashboard_child(window, "view_stack"), "empty");
  page = dashboard_child(window, "empty_page");
  g_assert_false(tdm_window_get_can_start(window));
  g_assert_null(strstr(adw_status_page_get_description(page), "Press Start"));
  tdm_dashboard_set_can_start(window_child(window, "dashboard"), TRUE);
  g_assert_nonnull(strstr(adw_status_page_get_description(page), "Press Start"));
  destroy_window(window);
}

/* Quitting (Ctrl+Q) saves the window's size as the close button does. */
static void
test_quit_saves_size(void)
{
  g_autoptr(TdmApplication) app = tdm_application_new();
  g_autoptr(GSettings) settings = g_settings_new(TDM_APP_ID);
  TdmWindow *window;

  reset_settings();
  g_application_set_flags(G_APPLICATION(app), G_APPLICATION_NON_UNIQUE);
  g_assert_true(g_application_register(G_APPLICATION(app), NULL, NULL));
  g_signal_emit_by_name(app, "startup");
  window = g_object_ref(tdm_window_new(app));
  gtk_window_set_default_size(GTK_WINDOW(window), 1111, 666);
  gtk_window_present(GTK_WINDOW(window));
  wait_for_rest(GTK_WIDGET(window), 2);
  g_action_group_activate_action(G_ACTION_GROUP(app), "quit", NULL);
  settle(5);
  g_assert_cmpint(g_settings_get_int(settings, "window-width"), ==, 1111);
  g_assert_cmpint(g_settings_get_int(settings, "window-height"), ==, 666);
  g_assert_finalize_object(window);
}

/* ---- accessibility ----------------------------------------------------------- */

static gboolean
is_control(GtkWidget *w)
{
  return GTK_IS_BUTTON(w) || GTK_IS_MENU_BUTTON(w) || GTK_IS_SPIN_BUTTON(w) ||
         GTK_IS_DROP_DOWN(w) || GTK_IS_CHECK_BUTTON(w) || GTK_IS_ENTRY(w) ||
         GTK_IS_SWITCH(w) || ADW_IS_COMBO_ROW(w) || GTK_IS_PROGRESS_BAR(w);
}

/* Labels that name a widget through their mnemonic. */
static void
collect_mnemonic_targets(GtkWidget *w, GHashTable *named)
{
  if (GTK_IS_LABEL(w) && gtk_label_get_mnemonic_widget(GTK_LABEL(w)) != NULL)
    g_hash_table_add(named, gtk_label_get_mnemonic_widget(GTK_LABEL(w)));
  for (GtkWidget *c = gtk_widget_get_first_child(w); c; c = gtk_widget_get_next_sibling(c))
    collect_mnemonic_targets(c, named);
}

static gboolean
has_text_label(GtkWidget *w)
{
  const char *label = NULL;

  if (GTK_IS_CHECK_BUTTON(w))
    label = gtk_check_button_get_label(GTK_CHECK_BUTTON(w));
  else if (GTK_IS_BUTTON(w))
    label = gtk_button_get_label(GTK_BUTTON(w));
  return label != NULL && label[0] != '\0';
}

static void
check_names(GtkWidget *w, GHashTable *named, guint *n_controls)
{
  if (!gtk_widget_get_visible(w))
    return;

  if (is_control(w)) {
    gboolean ok = has_text_label(w) || g_hash_table_contains(named, w) ||
                  gtk_test_accessible_has_property(GTK_ACCESSIBLE(w), GTK_ACCESSIBLE_PROPERTY_LABEL) ||
                  gtk_test_accessible_has_relation(GTK_ACCESSIBLE(w), GTK_ACCESSIBLE_RELATION_LABELLED_BY);

    if (!ok)
      g_error("a %s (tooltip “%s”) in a %s has no name a screen reader can read",
              G_OBJECT_TYPE_NAME(w), gtk_widget_get_tooltip_text(w),
              G_OBJECT_TYPE_NAME(gtk_widget_get_parent(w)));
    (*n_controls)++;
    /* A spin button's text field and a drop-down's button are its parts. */
    if (GTK_IS_SPIN_BUTTON(w) || GTK_IS_DROP_DOWN(w) || GTK_IS_ENTRY(w) || GTK_IS_MENU_BUTTON(w))
      return;
  }
  for (GtkWidget *c = gtk_widget_get_first_child(w); c; c = gtk_widget_get_next_sibling(c))
    check_names(c, named, n_controls);
}

/* Every control has a name: its own text, a label whose mnemonic points at it, or
 * an accessible label or labelled-by relation. */
static void
test_a11y_names(void)
{
  TdmWindow *window = window_at(1920, 1000);
  g_autoptr(GHashTable) named = g_hash_table_new(NULL, NULL);
  guint n_controls = 0;

  gtk_revealer_set_reveal_child(window_child(window, "error_revealer"), TRUE);
  collect_mnemonic_targets(GTK_WIDGET(window), named);
  check_names(GTK_WIDGET(window), named, &n_controls);
  /* Header, form and six chart menus at least. */
  g_assert_cmpuint(n_controls, >=, 15);
  destroy_window(window);
}

/* Keyboard only: every form label's mnemonic reaches its control, and Start,
 * Pause, Stop and export are actions the keyboard triggers (accelerators in
 * TdmApplication, listed in the shortcuts window). */
static void
check_mnemonics(GtkWidget *w, TdmWindow *window, guint *n)
{
  if (GTK_IS_LABEL(w) && gtk_label_get_use_underline(GTK_LABEL(w)) &&
      gtk_widget_get_mapped(w) && gtk_widget_is_sensitive(w)) {
    GtkWidget *target = gtk_label_get_mnemonic_widget(GTK_LABEL(w));
    GtkWidget *focus;

    g_assert_nonnull(target);
    g_assert_true(gtk_widget_mnemonic_activate(target, FALSE));
    focus = gtk_root_get_focus(GTK_ROOT(window));
    g_assert_nonnull(focus);
    if (focus != target && !gtk_widget_is_ancestor(focus, target))
      g_error("the mnemonic of “%s” does not focus its control", gtk_label_get_label(GTK_LABEL(w)));
    (*n)++;
  }
  for (GtkWidget *c = gtk_widget_get_first_child(w); c; c = gtk_widget_get_next_sibling(c))
    check_mnemonics(c, window, n);
}

static void
test_a11y_keyboard(void)
{
  TdmWindow *window = window_at(1920, 1000);
  const char *actions[] = {"win.start", "win.pause", "win.stop", "win.export",
                           "win.toggle-sidebar"};
  g_autoptr(TdmApplication) app = tdm_application_new();
  guint n = 0;

  check_mnemonics(GTK_WIDGET(window_child(window, "sidebar")), window, &n);
  g_assert_cmpuint(n, >=, 4);

  /* The header's controls take focus, so Tab reaches them. */
  g_assert_true(gtk_widget_get_focusable(window_child(window, "pause_button")) ||
                gtk_widget_get_can_focus(window_child(window, "pause_button")));
  g_assert_true(gtk_widget_get_can_focus(window_child(window, "start_button")));
  g_assert_true(gtk_widget_get_can_focus(window_child(window, "primary_menu_button")));

  /* Each run control has a key of its own once the application has started up. */
  g_application_set_flags(G_APPLICATION(app), G_APPLICATION_NON_UNIQUE);
  g_application_register(G_APPLICATION(app), NULL, NULL);
  g_signal_emit_by_name(app, "startup");
  for (guint i = 0; i < G_N_ELEMENTS(actions); i++) {
    g_auto(GStrv) accels = gtk_application_get_accels_for_action(GTK_APPLICATION(app), actions[i]);

    if (g_str_equal(actions[i], "win.toggle-sidebar"))
      continue; /* F9 is the window's own binding */
    if (accels == NULL || accels[0] == NULL)
      g_error("%s has no keyboard shortcut", actions[i]);
  }
  destroy_window(window);
}

int
main(int argc, char **argv)
{
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  /* Accessible properties are kept only where there is an accessibility backend;
   * "test" is GTK's in-process one (the other GUI tests turn it off). */
  g_setenv("GTK_A11Y", "test", TRUE);
  gtk_test_init(&argc, &argv, NULL);
  adw_init();
  /* GNOME's own title-bar buttons (GTK's X11 default adds minimize and maximize,
   * which GNOME does not show). */
  g_object_set(gtk_settings_get_default(), "gtk-decoration-layout", "appmenu:close", NULL);
  tdm_application_init_i18n();
  tdm_application_init_uninstalled();

  g_test_add_func("/layout/360", test_layout_360);
  g_test_add_func("/layout/700", test_layout_700);
  g_test_add_func("/layout/900", test_layout_900);
  g_test_add_func("/layout/1024", test_layout_1024);
  g_test_add_func("/layout/1920", test_layout_1920);
  g_test_add_func("/style/dark", test_style_dark);
  g_test_add_func("/style/high-contrast", test_style_high_contrast);
  g_test_add_func("/style/high-contrast/subprocess", test_style_high_contrast_subprocess);
  g_test_add_func("/dashboard/step-time-legend", test_dashboard_step_time_legend);
  g_test_add_func("/dashboard/shared-gpu", test_dashboard_shared_gpu);
  g_test_add_func("/dashboard/hidden-unpaced", test_dashboard_hidden_unpaced);
  g_test_add_func("/dashboard/status-line-relayout", test_status_line_relayout);
  g_test_add_func("/dashboard/empty-state", test_empty_state);
  g_test_add_func("/window/quit-saves-size", test_quit_saves_size);
  g_test_add_func("/a11y/names", test_a11y_names);
  g_test_add_func("/a11y/keyboard", test_a11y_keyboard);

  return g_test_run();
}
