/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-layout-labels.c: no word cut off at the narrowest width, in English and in
 * Japanese, and no tooltip over a list just opened.
 *
 * A label passes when its allocated width holds its natural width, or it wraps and
 * its allocated height holds its lines, or it ends in "…" with the whole text in
 * its own tooltip or its row's: checked on the settings' device rows and training
 * rows (the learning rate's digits in their field), and on a kept sweep's window
 * (its turned table, whose scrollbar stays when it is wider than the window). The
 * Cairo views' captions have their own checks (test-prediction-gallery.c,
 * test-batch-strip.c). The drop-downs' popovers switch their opener's tooltip off
 * while they show. Allocations, not pixels; runs under xvfb-run-test.sh.
 */

#include <locale.h>
#include <string.h>
#include <glib/gstdio.h>

#include <adwaita.h>

#include "tdm-application.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-dashboard.h"
#include "tdm-device.h"
#include "tdm-devices-page.h"
#include "tdm-history.h"
#include "tdm-history-store.h"
#include "tdm-history-sweep.h"
#include "tdm-popover-tooltips.h"
#include "tdm-scaling-page.h"
#include "tdm-scaling-table.h"
#include "tdm-table-scroller.h"
#include "tdm-window.h"
#include "window-test-util.h"

/* The tooltip that shows over the label: its own, or the nearest ancestor's. */
static char *
tooltip_over(GtkWidget *widget)
{
  for (GtkWidget *w = widget; w != NULL; w = gtk_widget_get_parent(w)) {
    const char *text = gtk_widget_get_tooltip_text(w);

    if (text != NULL)
      return g_strdup(text);
  }
  return NULL;
}

/* One label: whole, wrapped into its height, or cut with "…" and whole in a tooltip. */
static void
assert_label_whole(GtkLabel *label, const char *where)
{
  GtkWidget *widget = GTK_WIDGET(label);
  const char *text = gtk_label_get_text(label);
  int natural, height_needed;
  int width = gtk_widget_get_width(widget), height = gtk_widget_get_height(widget);

  if (text == NULL || text[0] == '\0' || !gtk_widget_get_mapped(widget))
    return;
  gtk_widget_measure(widget, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &natural, NULL, NULL);
  if (width >= natural)
    return;
  if (gtk_label_get_wrap(label)) {
    gtk_widget_measure(widget, GTK_ORIENTATION_VERTICAL, width, &height_needed, NULL, NULL, NULL);
    if (height >= height_needed)
      return;
    g_error("%s: “%s” wraps into %d px but has %d", where, text, height_needed, height);
  }
  if (gtk_label_get_ellipsize(label) != PANGO_ELLIPSIZE_NONE) {
    g_autofree char *tooltip = tooltip_over(widget);

    if (tooltip != NULL && strstr(tooltip, text) != NULL)
      return;
    g_error("%s: “%s” is cut with … (%d of %d px) and no tooltip has it whole (%s)", where,
            text, width, natural, tooltip != NULL ? tooltip : "none");
  }
  g_error("%s: “%s” is clipped: %d of %d px", where, text, width, natural);
}

static void
assert_labels_whole(GtkWidget *root, const char *where)
{
  if (GTK_IS_LABEL(root))
    assert_label_whole(GTK_LABEL(root), where);
  for (GtkWidget *c = gtk_widget_get_first_child(root); c != NULL; c = gtk_widget_get_next_sibling(c))
    assert_labels_whole(c, where);
}

/* The settings' row titles each on one line, and no label cut with "…" (the choices
 * of drop-down rows stand whole under their titles). */
static void
assert_titles_one_line(GtkWidget *root)
{
  if (GTK_IS_LABEL(root) && gtk_widget_get_mapped(root) && gtk_label_get_text(GTK_LABEL(root))[0] != '\0') {
    int natural, width = gtk_widget_get_width(root);

    gtk_widget_measure(root, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &natural, NULL, NULL);
    if (gtk_widget_has_css_class(root, "title") && natural > width)
      g_error("the row title “%s” needs %d px on one line, has %d", gtk_label_get_text(GTK_LABEL(root)),
              natural, width);
    if (pango_layout_is_ellipsized(gtk_label_get_layout(GTK_LABEL(root))))
      g_error("“%s” is cut with …: %d of %d px", gtk_label_get_text(GTK_LABEL(root)), width, natural);
  }
  for (GtkWidget *c = gtk_widget_get_first_child(root); c != NULL; c = gtk_widget_get_next_sibling(c))
    assert_titles_one_line(c);
}

/* The text a spin button shows fits the room its text field was given. */
static void
assert_spin_text_fits(GtkSpinButton *spin, const char *where)
{
  for (GtkWidget *c = gtk_widget_get_first_child(GTK_WIDGET(spin)); c != NULL; c = gtk_widget_get_next_sibling(c))
    if (GTK_IS_TEXT(c)) {
      const char *text = gtk_editable_get_text(GTK_EDITABLE(spin));
      PangoLayout *layout = gtk_widget_create_pango_layout(c, text);
      int text_width;

      pango_layout_get_pixel_size(layout, &text_width, NULL);
      g_object_unref(layout);
      if (text_width > gtk_widget_get_width(c))
        g_error("%s: “%s” needs %d px, its field has %d", where, text, text_width, gtk_widget_get_width(c));
      return;
    }
  g_assert_not_reached();
}

/* The window at a width with the settings shown, on a CPU with a long name and
 * description (many cores, much memory). */
static TdmWindow *
window_at(int width)
{
  g_autoptr(GArray) devices = g_array_new(FALSE, TRUE, sizeof(TdmDeviceInfo));
  TdmDeviceInfo cpu = { .kind = TDM_BACKEND_CPU, .cores = 128, .memory_bytes = (gint64)1 << 40 };
  TdmWindow *window;

  g_strlcpy(cpu.id, "cpu", sizeof cpu.id);
  g_strlcpy(cpu.name, "AMD EPYC 9754 128-Core Processor", sizeof cpu.name);
  g_array_append_val(devices, cpu);
  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_set_default_size(GTK_WINDOW(window), width, 1100);
  gtk_window_present(GTK_WINDOW(window));
  tdm_window_set_devices(window, devices);
  adw_flap_set_reveal_flap(window_child(window, "flap"), TRUE);
  wait_for_rest(GTK_WIDGET(window), 2);
  return window;
}

static void
check_settings_at(int window_width)
{
  TdmWindow *window = window_at(window_width);
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows(window_child(window, "device_picker"));
  int width = gtk_widget_get_width(GTK_WIDGET(window));

  g_test_message("window %d px wide", width);
  /* The window goes as narrow as asked, in either language (the Scaling page's
   * controls wrap rather than widen it). */
  g_assert_cmpint(width, <=, window_width);
  g_assert_cmpuint(rows->len, ==, 1);
  assert_labels_whole(rows->pdata[0], "the CPU's row");
  /* However narrow the column, the CPU's name and description are whole on the
   * row ("23.5 GiB", not "23…"), and in their tooltips too. */
  {
    GObject *detail = gtk_widget_get_template_child(rows->pdata[0], TDM_TYPE_DEVICE_ROW, "detail_label");
    GObject *name = gtk_widget_get_template_child(rows->pdata[0], TDM_TYPE_DEVICE_ROW, "name_label");

    g_assert_cmpint(gtk_label_get_ellipsize(GTK_LABEL(detail)), ==, PANGO_ELLIPSIZE_NONE);
    g_assert_cmpint(gtk_label_get_ellipsize(GTK_LABEL(name)), ==, PANGO_ELLIPSIZE_NONE);
    g_assert_cmpstr(gtk_widget_get_tooltip_text(GTK_WIDGET(detail)), ==, gtk_label_get_text(GTK_LABEL(detail)));
    g_assert_cmpstr(gtk_widget_get_tooltip_text(GTK_WIDGET(name)), ==, gtk_label_get_text(GTK_LABEL(name)));
  }
  /* Every row's title on one line ("正規化", not "正規 / 化") and every choice
   * whole, not "Residual network (Res…". */
  assert_titles_one_line(window_child(window, "sidebar"));
  assert_labels_whole(gtk_widget_get_ancestor(window_child(window, "lr_spin"), ADW_TYPE_ACTION_ROW),
                      "the learning rate's row");
  assert_spin_text_fits(window_child(window, "lr_spin"), "the learning rate");
  /* The largest rate it takes, too. */
  gtk_spin_button_set_value(window_child(window, "lr_spin"), 10);
  wait_for_rest(GTK_WIDGET(window), 2);
  assert_spin_text_fits(window_child(window, "lr_spin"), "the learning rate at 10");
  destroy_window(window);
}

/* At a phone's width the settings take the whole window; from 700 px on they are a
 * narrow column beside the views. */
static void
check_settings(void)
{
  check_settings_at(360);
  check_settings_at(1024);
}

static void
test_settings(void)
{
  check_settings();
}

static void
test_settings_japanese_subprocess(void)
{
  g_setenv("LANGUAGE", "ja", TRUE);
  tdm_application_init_i18n();
  check_settings();
}

static void
test_settings_japanese(void)
{
  g_test_trap_subprocess("/labels/settings/japanese/subprocess", 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

/* The first AdwWindowTitle under `root`. */
static GtkWidget *
find_window_title(GtkWidget *root)
{
  if (ADW_IS_WINDOW_TITLE(root))
    return root;
  for (GtkWidget *c = gtk_widget_get_first_child(root); c != NULL; c = gtk_widget_get_next_sibling(c)) {
    GtkWidget *found = find_window_title(c);

    if (found != NULL)
      return found;
  }
  return NULL;
}

/* A kept sweep over 1, 2 and 3 CPU workers, in its own window at 360 px. */
static void
check_sweep(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-sweep-XXXXXX", NULL);
  g_autoptr(TdmHistory) history = tdm_history_new(dir);
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) experiment = NULL;
  g_autoptr(TdmRunRecorder) rec = NULL;
  g_autoptr(TdmHistoryStore) store = NULL;
  GtkWidget *sweep, *table, *scroller;
  int table_width;

  g_assert_true(tdm_config_set_devices(cfg, "cpu:3", &error));
  experiment = tdm_experiment_new_scaling(cfg, TDM_SCALING_STRONG, 200, &error);
  g_assert_no_error(error);
  rec = tdm_run_recorder_new_experiment(history, experiment, "sweep", &error);
  g_assert_no_error(error);
  for (int n = 1; n <= 3; n++) {
    TdmScalingPoint p = {
      .index = n - 1, .count = 3, .devices = n, .batch = 100, .steps = 200, .runs = 3,
      .samples_per_second = 12345.0 * n, .samples_per_second_min = 12000.0 * n,
      .samples_per_second_max = 12999.0 * n, .speedup = n * 0.9, .speedup_min = n * 0.85,
      .speedup_max = n * 0.95, .efficiency = 0.9, .compute_ms = 20.0 / n, .comm_ms = n - 1,
      .wait_ms = 0.5 * (n - 1),
    };

    for (int d = 0; d < n; d++)
      p.memory_bytes[d] = (gint64)345 << 20;
    tdm_run_recorder_add_point(&p, rec);
  }
  tdm_run_recorder_end_experiment(rec, experiment, NULL);
  g_assert_true(tdm_run_recorder_finish(rec, &error));
  g_assert_no_error(error);
  store = tdm_history_store_new(dir);
  tdm_history_store_reload(store);
  g_assert_cmpuint(g_list_model_get_n_items(G_LIST_MODEL(store)), ==, 1);

  sweep = tdm_history_sweep_new(NULL, store, tdm_history_store_find(store, tdm_run_recorder_get_id(rec)));
  gtk_window_set_default_size(GTK_WINDOW(sweep), 360, 900);
  gtk_window_present(GTK_WINDOW(sweep));
  wait_for_rest(sweep, 2);
  g_test_message("sweep window %d px wide", gtk_widget_get_width(sweep));
  table = tdm_history_sweep_get_table(TDM_HISTORY_SWEEP(sweep));
  assert_labels_whole(table, "the sweep's table");
  /* The header's title and its subtitle (the run's settings, longer than a phone's
   * width): cut with "…", whole in a tooltip. */
  assert_labels_whole(sweep, "the sweep window");
  {
    GtkWidget *title = find_window_title(sweep);

    g_assert_nonnull(title);
    g_assert_nonnull(gtk_widget_get_tooltip_text(title));
    g_assert_nonnull(strstr(gtk_widget_get_tooltip_text(title),
                            adw_window_title_get_subtitle(ADW_WINDOW_TITLE(title))));
  }
  /* Turned, a column a point, its cells wrapping: three points fit a phone's width. */
  scroller = gtk_widget_get_ancestor(table, GTK_TYPE_SCROLLED_WINDOW);
  gtk_widget_measure(table, GTK_ORIENTATION_HORIZONTAL, -1, &table_width, NULL, NULL, NULL);
  g_test_message("table %d px in %d", table_width, gtk_widget_get_width(scroller));
  g_assert_cmpint(table_width, <=, gtk_widget_get_width(scroller));
  /* Wider (more points), it would scroll with a scrollbar that stays. */
  g_assert_false(gtk_scrolled_window_get_overlay_scrolling(GTK_SCROLLED_WINDOW(scroller)));
  gtk_window_destroy(GTK_WINDOW(sweep));
  drain();
  remove_folder(dir);
}

static void
test_sweep(void)
{
  check_sweep();
}

static void
test_sweep_japanese_subprocess(void)
{
  g_setenv("LANGUAGE", "ja", TRUE);
  tdm_application_init_i18n();
  check_sweep();
}

static void
test_sweep_japanese(void)
{
  g_test_trap_subprocess("/labels/sweep/japanese/subprocess", 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

/* The scrollbar that moves `scroller` sideways and stays: its own where it is not an
 * overlay, else one beside it on the same adjustment; NULL for none. */
static GtkWidget *
table_scrollbar(GtkWidget *scroller)
{
  GtkAdjustment *h = gtk_scrolled_window_get_hadjustment(GTK_SCROLLED_WINDOW(scroller));

  if (!gtk_scrolled_window_get_overlay_scrolling(GTK_SCROLLED_WINDOW(scroller))
      && gtk_widget_get_mapped(gtk_scrolled_window_get_hscrollbar(GTK_SCROLLED_WINDOW(scroller))))
    return gtk_scrolled_window_get_hscrollbar(GTK_SCROLLED_WINDOW(scroller));
  for (GtkWidget *c = gtk_widget_get_first_child(gtk_widget_get_parent(scroller)); c != NULL;
       c = gtk_widget_get_next_sibling(c))
    if (GTK_IS_SCROLLBAR(c) && gtk_scrollbar_get_adjustment(GTK_SCROLLBAR(c)) == h)
      return c;
  return NULL;
}

/* Every label of a table: whole, and inside the scroller's width or within the
 * reach of a scrollbar that shows. */
static void
check_table_labels(GtkWidget *root, GtkWidget *table, GtkWidget *scroller, const char *what)
{
  for (GtkWidget *c = gtk_widget_get_first_child(root); c != NULL; c = gtk_widget_get_next_sibling(c))
    check_table_labels(c, table, scroller, what);
  if (GTK_IS_LABEL(root)) {
    GtkAdjustment *h = gtk_scrolled_window_get_hadjustment(GTK_SCROLLED_WINDOW(scroller));
    GtkWidget *bar = table_scrollbar(scroller);
    graphene_point_t left, in_table;
    double right;

    assert_label_whole(GTK_LABEL(root), what);
    g_assert_true(gtk_widget_compute_point(root, scroller, &GRAPHENE_POINT_INIT(0, 0), &left));
    g_assert_true(gtk_widget_compute_point(root, table, &GRAPHENE_POINT_INIT(0, 0), &in_table));
    right = left.x + gtk_widget_get_width(root);
    /* Every row in view, none under the scrollbar: the table never scrolls up and
     * down. The viewport is the part of the scroller that shows the table. */
    {
      GtkWidget *viewport = gtk_widget_get_parent(table);
      graphene_point_t in_view;

      g_assert_true(gtk_widget_compute_point(root, viewport, &GRAPHENE_POINT_INIT(0, 0), &in_view));
      if (in_view.y < 0 || in_view.y + gtk_widget_get_height(root) > gtk_widget_get_height(viewport))
        g_error("%s: “%s” at %.0f–%.0f px of %d in height", what,
                gtk_label_get_text(GTK_LABEL(root)), in_view.y, in_view.y + gtk_widget_get_height(root),
                gtk_widget_get_height(viewport));
    }
    if (left.x >= 0 && right <= gtk_widget_get_width(scroller))
      return;
    /* Out of view: the scrollbar shows, stays, and its range reaches the label. */
    if (bar == NULL || !gtk_widget_get_mapped(bar) || gtk_widget_get_height(bar) <= 0)
      g_error("%s: “%s” at %.0f–%.0f px of %d, with no scrollbar showing", what,
              gtk_label_get_text(GTK_LABEL(root)), left.x, right, gtk_widget_get_width(scroller));
    g_assert_cmpfloat(in_table.x + gtk_widget_get_width(root), <=, gtk_adjustment_get_upper(h) + 0.5);
    g_assert_cmpfloat(gtk_adjustment_get_page_size(h), <, gtk_adjustment_get_upper(h));
  }
}

static gboolean
is_mapped(gpointer widget)
{
  return gtk_widget_get_mapped(widget);
}

static void
find_tables(GtkWidget *root, GPtrArray *found)
{
  if (TDM_IS_TABLE_SCROLLER(root))
    g_ptr_array_add(found, root);
  for (GtkWidget *c = gtk_widget_get_first_child(root); c != NULL; c = gtk_widget_get_next_sibling(c))
    find_tables(c, found);
}

/* A size in Japanese says バイト, not "bytes" (GLib's word where its own
 * translations are missing or not in use). */
static void
assert_no_english_size(GtkWidget *root)
{
  if (GTK_IS_LABEL(root) && g_strcmp0(g_getenv("LANGUAGE"), "ja") == 0 &&
      strstr(gtk_label_get_text(GTK_LABEL(root)), "byte") != NULL)
    g_error("“%s” in Japanese", gtk_label_get_text(GTK_LABEL(root)));
  for (GtkWidget *c = gtk_widget_get_first_child(root); c != NULL; c = gtk_widget_get_next_sibling(c))
    assert_no_english_size(c);
}

/* The Scaling page at 360 px with a sweep's three points in its table. */
static void
check_scaling_table(void)
{
  TdmWindow *window = window_at(360);
  TdmScalingPage *page = window_child(window, "scaling_page");
  GtkWidget *table = tdm_table_scroller_get_child(template_child(page, "table_scroller"));
  GtkWidget *scroller;
  TdmScalingPoint points[3];

  adw_flap_set_reveal_flap(window_child(window, "flap"), FALSE);
  tdm_window_set_page(window, "scaling");
  for (int n = 1; n <= 3; n++)
    points[n - 1] = (TdmScalingPoint){
      .index = n - 1, .count = 3, .devices = n, .batch = 100, .steps = 200, .runs = 3,
      .samples_per_second = 12345.0 * n, .samples_per_second_min = 12000.0 * n,
      .samples_per_second_max = 12999.0 * n, .speedup = n * 0.9, .speedup_min = n * 0.85,
      .speedup_max = n * 0.95, .efficiency = 0.9, .compute_ms = 20.0 / n, .comm_ms = n - 1,
      .wait_ms = 0.5 * (n - 1), .memory_bytes = { (gint64)345 << 20, (gint64)345 << 20, (gint64)345 << 20 },
    };
  /* As a run fills it, a point at a time. */
  for (guint n = 1; n <= 3; n++) {
    tdm_scaling_table_set_points(table, points, n);
    wait_for_rest(GTK_WIDGET(window), 2);
  }
  scroller = gtk_widget_get_ancestor(table, GTK_TYPE_SCROLLED_WINDOW);
  g_test_message("window %d px, table's scroller %d px", gtk_widget_get_width(GTK_WIDGET(window)),
                 gtk_widget_get_width(scroller));
  g_assert_cmpint(gtk_widget_get_width(GTK_WIDGET(window)), <=, 360);
  g_assert_true(gtk_widget_get_mapped(table));
  check_table_labels(table, table, scroller, "the Scaling page's table");
  destroy_window(window);
}

static void
test_scaling_table(void)
{
  check_scaling_table();
}

static void
test_scaling_table_japanese_subprocess(void)
{
  g_setenv("LANGUAGE", "ja", TRUE);
  tdm_application_init_i18n();
  check_scaling_table();
}

static void
test_scaling_table_japanese(void)
{
  g_test_trap_subprocess("/labels/scaling-table/japanese/subprocess", 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

/* The Devices page's tables, the phase table after two timed steps of two CPU
 * workers and the memory table from the settings' estimate, at a width with the
 * settings beside the page or folded away: each label whole and in view or within
 * reach of a scrollbar that shows; sizes in the language's words. */
static void
check_devices_tables_at(int width)
{
  TdmWindow *window;
  TdmDevicesPage *page;
  GPtrArray *tables = g_ptr_array_new();
  TdmEvent e = {.kind = TDM_EVENT_STARTED};

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_set_default_size(GTK_WINDOW(window), width, 900);
  gtk_window_present(GTK_WINDOW(window));
  {
    g_autoptr(GArray) devices = cpu_devices();

    tdm_window_set_devices(window, devices);
  }
  tdm_window_set_page(window, "devices");
  page = window_child(window, "devices_page");
  for (int i = 0; i < 2000 && gtk_widget_get_width(GTK_WIDGET(window)) < width - 12; i++)
    settle(1);
  /* Shown, and the window done with what it reads on its own (the history, the
   * dataset for the estimate), before the run's events come. */
  g_assert_true(wait_for(is_mapped, page, 30));
  g_assert_true(wait_for(not_loading, tdm_window_get_history(window), 30));
  g_assert_true(wait_for(can_start, window, 60));
  tdm_started_event_set_devices(&e.started, (TdmDeviceId[]){TDM_DEVICE_CPU, TDM_DEVICE_CPU}, 2);
  e.started.batch = 100;
  e.started.epochs = 1;
  e.started.steps_per_epoch = 10;
  e.started.total_steps = 10;
  tdm_dashboard_handle_event(window_child(window, "dashboard"), &e);
  /* The run's estimate, as the memory table reads it: a CPU worker holds no copy
   * of the dataset (0 bytes). */
  memset(&e, 0, sizeof e);
  e.kind = TDM_EVENT_MEMORY;
  e.memory.replicas = 2;
  for (int r = 0; r < 2; r++) {
    TdmMemoryDevice *d = &e.memory.device[r];

    g_strlcpy(d->device, "cpu", sizeof d->device);
    d->shard = 50;
    d->host = TRUE;
    d->parameters = d->gradients = 7184040;
    d->optimizer = 2 * d->parameters;
    d->activations = 558592;
    d->workspace = 8500000;
    d->total = d->parameters + d->gradients + d->optimizer + d->activations + d->workspace;
  }
  tdm_dashboard_handle_event(window_child(window, "dashboard"), &e);
  for (int step = 1; step <= 2; step++) {
    memset(&e, 0, sizeof e);
    e.kind = TDM_EVENT_PHASES;
    e.phases.step = step;
    e.phases.replicas = 2;
    for (int r = 0; r < 2; r++) {
      static const struct { float start, end; int phase; } spans[] = {
        {0, 1, TDM_PHASE_FORWARD}, {1, 3, TDM_PHASE_BACKWARD}, {2.5f, 3.5f, TDM_PHASE_ALLREDUCE},
        {3.5f, 3.75f, TDM_PHASE_UPDATE}, {3.75f, 4, TDM_PHASE_WAIT},
      };
      e.phases.device[r].spans = G_N_ELEMENTS(spans);
      for (guint k = 0; k < G_N_ELEMENTS(spans); k++) {
        e.phases.device[r].span[k].start_ms = spans[k].start;
        e.phases.device[r].span[k].end_ms = spans[k].end;
        e.phases.device[r].span[k].phase = spans[k].phase;
      }
      e.phases.device[r].bytes_sent = 7200000;
      e.phases.device[r].bytes_received = 0;
      e.phases.device[r].hidden_ms = 0.5f;
    }
    tdm_dashboard_handle_event(window_child(window, "dashboard"), &e);
  }
  wait_for_rest(GTK_WIDGET(window), 2);
  g_test_message("%d px: window %d px, page %d px", width, gtk_widget_get_width(GTK_WIDGET(window)),
                 gtk_widget_get_width(GTK_WIDGET(page)));
  g_assert_cmpint(gtk_widget_get_width(GTK_WIDGET(window)), <=, width);
  g_assert_cmpint(tdm_devices_page_get_n_memory_rows(page), ==, 2);
  find_tables(GTK_WIDGET(page), tables);
  g_assert_cmpuint(tables->len, ==, 2);
  for (guint i = 0; i < tables->len; i++)
    if (!wait_for(is_mapped, tdm_table_scroller_get_child(tables->pdata[i]), 30))
      g_error("%d px: the %s table is not shown (%d timed steps)", width, i == 0 ? "phase" : "memory",
              tdm_devices_page_get_phase_spans(page, 0, TDM_PHASE_FORWARD));
  wait_for_rest(GTK_WIDGET(window), 2);
  for (guint i = 0; i < tables->len; i++) {
    GtkWidget *table = tdm_table_scroller_get_child(tables->pdata[i]);
    GtkWidget *scroller = tdm_table_scroller_get_viewport(tables->pdata[i]);

    g_assert_true(gtk_widget_get_mapped(table));
    check_table_labels(table, table, scroller, i == 0 ? "the phase table" : "the memory table");
    assert_no_english_size(table);
  }
  g_ptr_array_unref(tables);
  destroy_window(window);
}

static void
check_devices_tables(void)
{
  check_devices_tables_at(360);
  check_devices_tables_at(700);
  check_devices_tables_at(1024);
}

static void
test_devices_tables(void)
{
  check_devices_tables();
}

static void
test_devices_tables_japanese_subprocess(void)
{
  g_setenv("LANGUAGE", "ja", TRUE);
  tdm_application_init_i18n();
  check_devices_tables();
}

static void
test_devices_tables_japanese(void)
{
  g_test_trap_subprocess("/labels/devices-tables/japanese/subprocess", 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

/* Each item of the main menu has a mnemonic of its own, in either language: two on
 * one key made Alt+A choose neither at once. */
static void
check_menu_mnemonics(void)
{
  TdmWindow *window = present_window();
  GMenuModel *menu = gtk_menu_button_get_menu_model(window_child(window, "primary_menu_button"));
  g_autoptr(GHashTable) keys = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  guint n = 0;

  for (int s = 0; s < g_menu_model_get_n_items(menu); s++) {
    g_autoptr(GMenuModel) section = g_menu_model_get_item_link(menu, s, G_MENU_LINK_SECTION);

    for (int i = 0; section != NULL && i < g_menu_model_get_n_items(section); i++) {
      g_autofree char *label = NULL;
      const char *underscore;
      gunichar key;

      if (!g_menu_model_get_item_attribute(section, i, G_MENU_ATTRIBUTE_LABEL, "s", &label))
        continue;
      underscore = strchr(label, '_');
      if (underscore == NULL)
        continue;
      key = g_unichar_tolower(g_utf8_get_char(underscore + 1));
      if (g_hash_table_contains(keys, GUINT_TO_POINTER(key)))
        g_error("“%s” and “%s” share a mnemonic", label,
                (char *)g_hash_table_lookup(keys, GUINT_TO_POINTER(key)));
      g_hash_table_insert(keys, GUINT_TO_POINTER(key), g_strdup(label));
      n++;
    }
  }
  g_assert_cmpuint(n, >=, 10);
  destroy_window(window);
}

static void
test_menu_mnemonics(void)
{
  check_menu_mnemonics();
}

static void
test_menu_mnemonics_japanese_subprocess(void)
{
  g_setenv("LANGUAGE", "ja", TRUE);
  tdm_application_init_i18n();
  check_menu_mnemonics();
}

static void
test_menu_mnemonics_japanese(void)
{
  g_test_trap_subprocess("/labels/menu-mnemonics/japanese/subprocess", 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

static GtkWidget *
popover_under(GtkWidget *widget)
{
  for (GtkWidget *c = gtk_widget_get_first_child(widget); c != NULL; c = gtk_widget_get_next_sibling(c)) {
    GtkWidget *found;

    if (GTK_IS_POPOVER(c))
      return c;
    if ((found = popover_under(c)) != NULL)
      return found;
  }
  return NULL;
}

/* Opened, the list is not covered by its opener's tooltip; closed, the tooltip is
 * back, its text as it was. */
static void
check_dropdown(GtkWidget *opener, const char *what)
{
  GtkWidget *popover = popover_under(opener);
  g_autofree char *tooltip = g_strdup(gtk_widget_get_tooltip_text(opener));

  g_assert_nonnull(popover);
  g_assert_nonnull(tooltip);
  g_assert_true(gtk_widget_get_mapped(opener));
  g_assert_true(gtk_widget_get_has_tooltip(opener));
  gtk_popover_popup(GTK_POPOVER(popover));
  settle(5);
  g_assert_true(gtk_widget_get_visible(popover));
  if (gtk_widget_get_has_tooltip(opener))
    g_error("%s: its tooltip shows over its open list", what);
  g_assert_true(tdm_popover_tooltips_quieted(opener));
  gtk_popover_popdown(GTK_POPOVER(popover));
  settle(5);
  g_assert_false(gtk_widget_get_visible(popover));
  g_assert_true(gtk_widget_get_has_tooltip(opener));
  g_assert_false(tdm_popover_tooltips_quieted(opener));
  g_assert_cmpstr(gtk_widget_get_tooltip_text(opener), ==, tooltip);
}

static GtkWidget *
dropdown_under(GtkWidget *widget)
{
  for (GtkWidget *c = gtk_widget_get_first_child(widget); c != NULL; c = gtk_widget_get_next_sibling(c)) {
    GtkWidget *found;

    if (GTK_IS_DROP_DOWN(c))
      return c;
    if ((found = dropdown_under(c)) != NULL)
      return found;
  }
  return NULL;
}

static void
test_dropdown_tooltips(void)
{
  TdmWindow *window;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_set_default_size(GTK_WINDOW(window), 1200, 900);
  gtk_window_present(GTK_WINDOW(window));
  wait_for_rest(GTK_WIDGET(window), 2);
  /* A combo row of the settings, and the dataset's drop-down. */
  check_dropdown(window_child(window, "strategy_dropdown"), "the strategy");
  check_dropdown(dropdown_under(window_child(window, "dataset_chooser")), "the dataset");
  /* The Scaling page's mode. */
  tdm_window_set_page(window, "scaling");
  wait_for_rest(GTK_WIDGET(window), 2);
  check_dropdown(dropdown_under(window_child(window, "scaling_page")), "the scaling mode");
  destroy_window(window);
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
  gtk_test_init(&argc, &argv, NULL);
  adw_init();
  g_object_set(gtk_settings_get_default(), "gtk-decoration-layout", "appmenu:close", NULL);
  tdm_application_init_i18n();

  g_test_add_func("/labels/settings", test_settings);
  g_test_add_func("/labels/settings/japanese", test_settings_japanese);
  g_test_add_func("/labels/settings/japanese/subprocess", test_settings_japanese_subprocess);
  g_test_add_func("/labels/sweep", test_sweep);
  g_test_add_func("/labels/sweep/japanese", test_sweep_japanese);
  g_test_add_func("/labels/sweep/japanese/subprocess", test_sweep_japanese_subprocess);
  g_test_add_func("/labels/scaling-table", test_scaling_table);
  g_test_add_func("/labels/scaling-table/japanese", test_scaling_table_japanese);
  g_test_add_func("/labels/scaling-table/japanese/subprocess", test_scaling_table_japanese_subprocess);
  g_test_add_func("/labels/devices-tables", test_devices_tables);
  g_test_add_func("/labels/devices-tables/japanese", test_devices_tables_japanese);
  g_test_add_func("/labels/devices-tables/japanese/subprocess", test_devices_tables_japanese_subprocess);
  g_test_add_func("/labels/dropdown-tooltips", test_dropdown_tooltips);
  g_test_add_func("/labels/menu-mnemonics", test_menu_mnemonics);
  g_test_add_func("/labels/menu-mnemonics/japanese", test_menu_mnemonics_japanese);
  g_test_add_func("/labels/menu-mnemonics/japanese/subprocess", test_menu_mnemonics_japanese_subprocess);

  status = g_test_run();
  g_rmdir(data_home);
  return status;
}
