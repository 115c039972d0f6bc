/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-window.c: the main window, driven the way a person would drive it.
 *
 * The window is built from its template with a device list the test chooses (two
 * made-up GPUs and the real CPU), its batch split is read back from the run form's
 * label, and whole runs on two CPU workers and the synthetic dataset are started,
 * stopped and abandoned through the window's actions while the main loop turns.
 * Every window must be finalized at the end (g_assert_finalize_object), so a
 * reference kept by a run, a task or a signal shows up here. Runs under the Xvfb
 * that xvfb-run-test.sh starts; settings live in memory (GSETTINGS_BACKEND=memory).
 */

#include <locale.h>
#include <sys/resource.h>
#include <string.h>

#include <glib/gstdio.h>
#include <adwaita.h>

#include "tdm-build-config.h"
#include "tdm-choice.h"

#include "tdm-application.h"
#include "tdm-base-recipe.h"
#include "tdm-chart.h"
#include "tdm-dashboard.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-device.h"
#include "tdm-format.h"
#include "tdm-network.h"
#include "tdm-run.h"
#include "tdm-run-form.h"
#include "tdm-series.h"
#include "tdm-spec-entry.h"
#include "tdm-window.h"
#include "window-test-util.h"

/* ---- helpers ---------------------------------------------------------------- */

static GArray *
fake_devices(gboolean with_gpus)
{
  g_autoptr(GArray) real = tdm_device_list();
  GArray *devices = g_array_new(FALSE, TRUE, sizeof(TdmDeviceInfo));

  if (with_gpus) {
    for (int i = 0; i < 2; i++) {
      TdmDeviceInfo gpu = {0};

      gpu.kind = TDM_BACKEND_CUDA;
      gpu.index = i;
      g_snprintf(gpu.id, sizeof gpu.id, "cuda:%d", i);
      g_snprintf(gpu.name, sizeof gpu.name, "Made-up GPU %d", i);
      gpu.memory_bytes = (gint64)80 << 30;
      gpu.compute_major = 9;
      gpu.compute_minor = 0;
      g_snprintf(gpu.pci_bus_id, sizeof gpu.pci_bus_id, "0000:%02x:00.0", 0x10 + i);
      gpu.cores = 132;
      g_array_append_val(devices, gpu);
    }
  }

  /* The real CPU, however many GPUs this machine has. */
  for (guint i = 0; i < real->len; i++) {
    const TdmDeviceInfo *info = &g_array_index(real, TdmDeviceInfo, i);

    if (info->kind == TDM_BACKEND_CPU)
      g_array_append_val(devices, *info);
  }
  g_assert_cmpuint(devices->len, ==, with_gpus ? 3 : 1);
  return devices;
}

static GPtrArray *
device_rows(TdmWindow *window)
{
  return tdm_device_picker_get_rows(window_child(window, "device_picker"));
}

static void
set_dataset(TdmWindow *window, const char *source)
{
  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), source);
}

static GtkWidget *
main_check(TdmDeviceRow *row)
{
  return GTK_WIDGET(gtk_widget_get_template_child(GTK_WIDGET(row), TDM_TYPE_DEVICE_ROW, "main_check"));
}

static const char *
split_text(TdmWindow *window)
{
  return adw_action_row_get_subtitle(window_child(window, "batch_row"));
}

static void
set_batch(TdmWindow *window, int batch)
{
  gtk_spin_button_set_value(window_child(window, "batch_spin"), batch);
}

static gboolean
form_greyed(gpointer data)
{
  return !gtk_widget_get_sensitive(window_child(data, "sidebar"));
}

static TdmChart *
chart(TdmWindow *window, const char *id)
{
  TdmChart *c = tdm_dashboard_get_chart(window_child(window, "dashboard"), id);

  g_assert_nonnull(c);
  return c;
}

static guint64
points(TdmWindow *window, const char *id, guint series)
{
  TdmChart *c = chart(window, id);

  if (series >= tdm_chart_get_n_series(c))
    return 0;
  return tdm_series_get_n_appended(tdm_chart_get_series(c, series));
}

static gboolean
has_training_points(gpointer data)
{
  return points(data, "loss", 0) >= 2 && points(data, "load", 0) >= 1;
}

/* Charts catch up with a run a moment after it ends (the dashboard paces redraws);
 * the last test point is among the last points to come. */
static gboolean
has_test_points(gpointer data)
{
  return points(data, "loss", 1) >= 2 && points(data, "accuracy", 1) >= 2;
}

/* A window set for a run on two CPU workers and the synthetic set. */
static TdmWindow *
window_for_run(const char *spec, int batch, int epochs)
{
  g_autoptr(GArray) devices = fake_devices(FALSE);
  TdmWindow *window;

  reset_settings();
  window = present_window();
  tdm_window_set_devices(window, devices);
  tdm_device_row_set_active(cpu_row(window), TRUE);
  tdm_device_row_set_workers(cpu_row(window), 2);
  set_dataset(window, "synthetic");
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), window_custom_network());
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), spec);
  set_batch(window, batch);
  gtk_spin_button_set_value(window_child(window, "epochs_spin"), epochs);

  g_assert_true(wait_for(can_start, window, 60));
  return window;
}

/* ---- tests ------------------------------------------------------------------ */

static void
test_window_builds(void)
{
  TdmWindow *window;
  TdmDashboard *dashboard;
  static const char *charts[] = {"loss", "accuracy", "throughput", "memory", "load", "step-time"};

  reset_settings();
  window = present_window();
  dashboard = window_child(window, "dashboard");
  for (guint i = 0; i < G_N_ELEMENTS(charts); i++)
    g_assert_nonnull(tdm_dashboard_get_chart(dashboard, charts[i]));
  g_assert_null(tdm_dashboard_get_chart(dashboard, "no-such-chart"));
  g_assert_true(tdm_chart_get_log_scale(chart(window, "loss")));

  /* Every page's icon is found: in the theme Debian 12 has (Adwaita 43) or in ours. */
  GtkIconTheme *theme = gtk_icon_theme_get_for_display(gtk_widget_get_display(GTK_WIDGET(window)));
  g_autoptr(GListModel) pages = G_LIST_MODEL(adw_view_stack_get_pages(window_child(window, "view_stack")));
  g_assert_cmpuint(g_list_model_get_n_items(pages), >=, 5);
  for (guint i = 0; i < g_list_model_get_n_items(pages); i++) {
    g_autoptr(AdwViewStackPage) page = g_list_model_get_item(pages, i);
    const char *icon = adw_view_stack_page_get_icon_name(page);
    g_assert_nonnull(icon);
    if (!gtk_icon_theme_has_icon(theme, icon))
      g_error("page %s: no icon named %s", adw_view_stack_page_get_name(page), icon);
  }
  g_assert_false(tdm_window_get_running(window));

  /* Nothing can run before the dataset has loaded; Stop and Pause never idle. */
  g_assert_false(gtk_widget_get_sensitive(window_child(window, "stop_button")));
  g_assert_false(gtk_widget_get_sensitive(window_child(window, "pause_button")));

  /* The wheel over the settings scrolls them: no spin button of the form takes it. */
  {
    g_autoptr(GListModel) controllers = gtk_widget_observe_controllers(window_child(window, "batch_spin"));
    guint scrolls = 0;

    for (guint i = 0; i < g_list_model_get_n_items(controllers); i++) {
      g_autoptr(GtkEventController) c = g_list_model_get_item(controllers, i);

      if (GTK_IS_EVENT_CONTROLLER_SCROLL(c)) {
        scrolls++;
        g_assert_cmpint(gtk_event_controller_get_propagation_phase(c), ==, GTK_PHASE_NONE);
      }
    }
    g_assert_cmpuint(scrolls, >, 0);
  }

  /* One set of defaults: the engine's (its strategy, its rate for the optimizer). */
  {
    g_autoptr(GSettings) settings = g_settings_new(TDM_APP_ID);
    g_autoptr(TdmConfig) engine = tdm_config_new();
    g_autofree char *strategy = g_settings_get_string(settings, "strategy");
    g_autofree char *optimizer = g_settings_get_string(settings, "optimizer");
    int kind;

    g_assert_cmpstr(strategy, ==, tdm_strategy_name(engine->strategy));
    g_assert_true(tdm_choice_from_name(TDM_TYPE_OPTIMIZER_KIND, optimizer, &kind));
    g_assert_cmpfloat(g_settings_get_double(settings, "learning-rate"), ==,
                      tdm_base_recipe_lr(kind));
    g_assert_cmpint(g_settings_get_int(settings, "batch"), ==, engine->batch);
    g_assert_cmpint(g_settings_get_int(settings, "epochs"), ==, engine->epochs);
  }
  /* The form shows the engine's defaults, and another optimizer brings its own rate. */
  {
    g_autoptr(TdmConfig) base = tdm_config_new();
    GtkSpinButton *lr_spin = window_child(window, "lr_spin");
    AdwComboRow *optimizer = window_child(window, "optimizer_dropdown");
    AdwComboRow *strategy = window_child(window, "strategy_dropdown");
    int batch = gtk_spin_button_get_value_as_int(window_child(window, "batch_spin"));
    int epochs = gtk_spin_button_get_value_as_int(window_child(window, "epochs_spin"));

    g_assert_cmpint(batch, ==, base->batch);
    g_assert_cmpint(epochs, ==, base->epochs);
    g_assert_cmpint(adw_combo_row_get_selected(optimizer), ==, base->optimizer);
    g_assert_cmpint(adw_combo_row_get_selected(strategy), ==, base->strategy);
    g_assert_cmpfloat_with_epsilon(gtk_spin_button_get_value(lr_spin),
                                   tdm_base_recipe_lr(base->optimizer), 1e-12);
    adw_combo_row_set_selected(optimizer, TDM_OPTIMIZER_NESTEROV);
    g_assert_cmpfloat_with_epsilon(gtk_spin_button_get_value(lr_spin),
                                   tdm_base_recipe_lr(TDM_OPTIMIZER_NESTEROV), 1e-12);
    adw_combo_row_set_selected(optimizer, base->optimizer);
    g_assert_cmpfloat_with_epsilon(gtk_spin_button_get_value(lr_spin),
                                   tdm_base_recipe_lr(base->optimizer), 1e-12);
  }

  destroy_window(window);
}

static void
test_window_devices(void)
{
  g_autoptr(GArray) devices = fake_devices(TRUE);
  g_autoptr(GArray) cpu_only = fake_devices(FALSE);
  g_autoptr(GPtrArray) rows = NULL;
  TdmWindow *window;

  reset_settings();
  window = present_window();
  tdm_window_set_devices(window, devices);
  rows = device_rows(window);

  g_assert_cmpuint(rows->len, ==, 3);
  g_assert_cmpstr(tdm_device_row_get_id(rows->pdata[0]), ==, "cuda:0");
  g_assert_cmpstr(tdm_device_row_get_id(rows->pdata[1]), ==, "cuda:1");
  g_assert_cmpstr(tdm_device_row_get_id(rows->pdata[2]), ==, "cpu");
  g_assert_true(tdm_device_row_is_cpu(rows->pdata[2]));

  /* With GPUs and nothing remembered: every GPU, not the CPU; the first is main. */
  g_assert_true(tdm_device_row_get_active(rows->pdata[0]));
  g_assert_true(tdm_device_row_get_active(rows->pdata[1]));
  g_assert_false(tdm_device_row_get_active(rows->pdata[2]));
  g_assert_true(tdm_device_row_get_main(rows->pdata[0]));
  g_assert_false(tdm_device_row_get_main(rows->pdata[1]));

  set_batch(window, 256);
  g_assert_cmpstr(split_text(window), ==, "256 = 128 × 2");
  set_batch(window, 250);
  g_assert_cmpstr(split_text(window), ==, "250 = 125 × 2");

  /* The CPU with one worker makes three replicas. */
  tdm_device_row_set_workers(rows->pdata[2], 1);
  tdm_device_row_set_active(rows->pdata[2], TRUE);
  set_batch(window, 100);
  g_assert_cmpstr(split_text(window), ==, "100 = 34 + 33 + 33");

  /* Four CPU workers and the two GPUs: six replicas, grouped. */
  tdm_device_row_set_workers(rows->pdata[2], 4);
  g_assert_cmpstr(split_text(window), ==, "100 = 17 × 4 + 16 × 2");

  /* Unchecking the main device moves "main" to another checked one, and an unused
   * device shows no Main at all (it once stayed ticked there). */
  tdm_device_row_set_active(rows->pdata[0], FALSE);
  g_assert_true(tdm_device_row_get_main(rows->pdata[1]));
  g_assert_cmpstr(split_text(window), ==, "100 = 20 × 5");
  g_assert_false(gtk_widget_get_child_visible(main_check(rows->pdata[0])));
  g_assert_true(gtk_widget_get_child_visible(main_check(rows->pdata[1])));

  /* No device: said under the devices, not under the batch size; Start disabled;
   * and no unticked device stays main (the last case of that). */
  for (guint i = 0; i < rows->len; i++)
    tdm_device_row_set_active(rows->pdata[i], FALSE);
  g_assert_cmpstr(split_text(window), ==, "");
  g_assert_true(gtk_widget_get_visible(window_child(window, "devices_hint_label")));
  g_assert_false(tdm_window_get_can_start(window));
  for (guint i = 0; i < rows->len; i++)
    g_assert_false(tdm_device_row_get_main(rows->pdata[i]));

  /* Ticking one device again makes that one main, not the one main before. */
  tdm_device_row_set_active(rows->pdata[2], TRUE);
  g_assert_true(tdm_device_row_get_main(rows->pdata[2]));
  g_assert_false(tdm_device_row_get_main(rows->pdata[1]));
  g_assert_false(gtk_widget_get_visible(window_child(window, "devices_hint_label")));
  g_assert_cmpstr(split_text(window), !=, "");

  destroy_window(window);

  /* One device: it is the main one, and there is nothing to choose. */
  reset_settings();
  window = present_window();
  tdm_window_set_devices(window, cpu_only);
  g_clear_pointer(&rows, g_ptr_array_unref);
  rows = device_rows(window);
  g_assert_cmpuint(rows->len, ==, 1);
  g_assert_true(tdm_device_row_get_main(rows->pdata[0]));
  g_assert_false(gtk_widget_get_child_visible(main_check(rows->pdata[0])));
  g_assert_false(gtk_widget_get_visible(window_child(window, "devices_hint_label")));

  /* The only device unticked is main no longer, internally either, and the run's
   * configuration cannot be built; ticked again it is main again. */
  tdm_device_row_set_active(rows->pdata[0], FALSE);
  g_assert_false(tdm_device_row_get_main(rows->pdata[0]));
  g_assert_false(tdm_window_get_can_start(window));
  g_assert_true(gtk_widget_get_visible(window_child(window, "devices_hint_label")));
  tdm_device_row_set_active(rows->pdata[0], TRUE);
  g_assert_true(tdm_device_row_get_main(rows->pdata[0]));
  g_assert_false(gtk_widget_get_visible(window_child(window, "devices_hint_label")));
  destroy_window(window);
}

/* Replicas sharing one GPU (a classroom with one GPU): the GPU row's spin button
 * asks for them, the batch splits over them, and the choice is kept the way the
 * CLI says it (`cuda:0` once per replica) and comes back in a new window. */
static void
test_window_gpu_replicas(void)
{
  g_autoptr(GArray) devices = fake_devices(TRUE);
  g_autoptr(GPtrArray) rows = NULL;
  g_autoptr(GSettings) settings = g_settings_new("io.github.tandem.Tandem");
  g_auto(GStrv) saved = NULL;
  TdmDeviceId replicas[TDM_MAX_REPLICAS];
  int count, main_replica = -1;
  TdmWindow *window;

  reset_settings();
  window = present_window();
  tdm_window_set_devices(window, devices);
  rows = device_rows(window);

  /* A GPU row starts at one replica, like ticking the GPU always did. */
  g_assert_cmpint(tdm_device_row_get_workers(rows->pdata[0]), ==, 1);
  g_assert_cmpint(tdm_device_row_get_replicas(rows->pdata[0]), ==, 1);

  tdm_device_row_set_active(rows->pdata[1], FALSE);
  tdm_device_row_set_workers(rows->pdata[0], 3);
  set_batch(window, 300);
  g_assert_cmpstr(split_text(window), ==, "300 = 100 × 3");
  count = tdm_device_picker_get_replicas(window_child(window, "device_picker"), replicas,
                                         TDM_MAX_REPLICAS, &main_replica);
  g_assert_cmpint(count, ==, 3);
  for (int i = 0; i < 3; i++)
    g_assert_true(tdm_device_id_equal(replicas[i], TDM_DEVICE_GPU(0)));
  g_assert_cmpint(main_replica, ==, 0);

  saved = g_settings_get_strv(settings, "devices");
  g_assert_cmpuint(g_strv_length(saved), ==, 3);
  g_assert_true(g_strv_equal((const char *const *)saved,
                             (const char *const[]){"cuda:0", "cuda:0", "cuda:0", NULL}));

  /* An unticked GPU gives no replica, whatever its spin button says. */
  tdm_device_row_set_workers(rows->pdata[1], 2);
  g_assert_cmpstr(split_text(window), ==, "300 = 100 × 3");
  /* Ticked, its two replicas follow cuda:0's three. */
  tdm_device_row_set_active(rows->pdata[1], TRUE);
  g_assert_cmpstr(split_text(window), ==, "300 = 60 × 5");
  tdm_device_row_set_active(rows->pdata[1], FALSE);
  destroy_window(window);

  /* A new window restores three replicas on cuda:0 and cuda:1 unticked at one. */
  window = present_window();
  tdm_window_set_devices(window, devices);
  g_clear_pointer(&rows, g_ptr_array_unref);
  rows = device_rows(window);
  g_assert_true(tdm_device_row_get_active(rows->pdata[0]));
  g_assert_cmpint(tdm_device_row_get_workers(rows->pdata[0]), ==, 3);
  g_assert_false(tdm_device_row_get_active(rows->pdata[1]));
  g_assert_cmpint(tdm_device_row_get_workers(rows->pdata[1]), ==, 1);
  g_assert_true(tdm_device_row_get_main(rows->pdata[0]));
  g_assert_cmpstr(split_text(window), ==, "300 = 100 × 3");
  destroy_window(window);
}

/* The runs whose events were seen, and the latest of them until it is finalized. */
static int runs_seen;
static gpointer live_run;

static gboolean
note_run(GSignalInvocationHint *hint, guint n_values, const GValue *values, gpointer data)
{
  gpointer run = g_value_get_object(&values[0]);

  if (run != live_run)
    {
      runs_seen++;
      live_run = run;
      g_object_add_weak_pointer(run, &live_run);
    }
  return TRUE;
}

static gboolean
run_finalized(gpointer data)
{
  return live_run == NULL;
}

static void
test_window_run(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 500, 2);
  g_autofree char *dir = g_dir_make_tmp("tandem-test-XXXXXX", NULL);
  g_autofree char *csv_path = g_build_filename(dir, "metrics.csv", NULL);
  g_autofree char *png_path = g_build_filename(dir, "loss.png", NULL);
  g_autofree char *svg_path = g_build_filename(dir, "memory.svg", NULL);
  g_autofree char *csv = NULL;
  TdmDashboard *dashboard = window_child(window, "dashboard");
  g_autoptr(GError) error = NULL;

  /* The signal exists once the class does. */
  g_type_class_unref(g_type_class_ref(TDM_TYPE_RUN));
  guint signal_id = g_signal_lookup("event", TDM_TYPE_RUN);
  gulong hook = g_signal_add_emission_hook(signal_id, 0, note_run, NULL, NULL);

  g_assert_cmpstr(split_text(window), ==, "500 = 250 × 2");
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(tdm_window_get_running(window));
  /* The form takes no input from Start on, and greys out by the next frame (not
   * in the frame that shows the run starting: bench/NOTES.md). */
  g_assert_false(gtk_widget_get_can_target(window_child(window, "sidebar")));
  g_assert_true(gtk_widget_get_sensitive(window_child(window, "stop_button")));
  g_assert_true(wait_for(form_greyed, window, 5));

  g_assert_true(wait_for(not_running, window, 120));
  g_assert_true(gtk_widget_get_can_target(window_child(window, "sidebar")));
  g_assert_true(gtk_widget_get_sensitive(window_child(window, "sidebar")));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  g_assert_true(wait_for(has_test_points, window, 2));

  /* Once over, nothing holds the run (nothing kept per run). */
  g_assert_true(wait_for(run_finalized, NULL, 10));
  g_assert_cmpint(runs_seen, ==, 1);
  g_signal_remove_emission_hook(signal_id, hook);

  /* Training curves, a test point per epoch, and a line per replica. */
  g_assert_cmpuint(points(window, "loss", 0), >, 2);
  g_assert_cmpuint(points(window, "loss", 1), ==, 2);
  g_assert_cmpuint(points(window, "accuracy", 0), >, 2);
  g_assert_cmpuint(points(window, "accuracy", 1), ==, 2);
  g_assert_cmpuint(points(window, "throughput", 0), >, 0);
  g_assert_cmpuint(tdm_chart_get_n_series(chart(window, "memory")), ==, 2);
  g_assert_cmpuint(points(window, "memory", 1), >, 0);
  g_assert_cmpuint(tdm_chart_get_n_series(chart(window, "load")), ==, 2);
  g_assert_cmpuint(points(window, "load", 1), >, 0);
  g_assert_cmpuint(points(window, "step-time", 0), >, 0);
  g_assert_true(g_str_has_prefix(adw_view_switcher_title_get_subtitle(window_child(window, "window_title")), "Finished"));

  /* Exports: each carries the run's settings, from the run's TdmConfig
   * through the engine's describer, and names replicas as the legends do. */
  g_assert_nonnull(tdm_dashboard_get_export_info(dashboard));
  g_assert_true(tdm_dashboard_export_metrics(dashboard, csv_path, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(csv_path, &csv, NULL, NULL));
  g_assert_true(g_str_has_prefix(csv, "# dataset: "));
  g_assert_nonnull(strstr(csv, "\n# network: fc32,relu,fc10\n"));
  g_assert_nonnull(strstr(csv, "\n# devices: cpu,cpu\n"));
  g_assert_nonnull(strstr(csv, "\n# batch: 500\n"));
  g_assert_nonnull(strstr(csv, "\n# tandem: "));
  g_assert_nonnull(strstr(csv, "\n# date: "));
  g_assert_nonnull(strstr(csv, "\ntime_s,event,step,epoch,train_loss"));
  /* Columns named as the window names the replicas (they were r0_, r1_). */
  g_assert_nonnull(strstr(csv, ",\"cpu 1 compute_ms\","));
  g_assert_nonnull(strstr(csv, ",\"cpu 2 utilization_percent\"\n"));
  g_assert_null(strstr(csv, "r1_"));
  g_assert_true(tdm_dashboard_export_chart(dashboard, "loss", "png", png_path, &error));
  g_assert_no_error(error);
  {
    g_autoptr(GdkPixbuf) pixbuf = gdk_pixbuf_new_from_file(png_path, &error);

    g_assert_no_error(error);
    g_assert_cmpstr(gdk_pixbuf_get_option(pixbuf, "tEXt::network"), ==, "fc32,relu,fc10");
    g_assert_cmpstr(gdk_pixbuf_get_option(pixbuf, "tEXt::batch"), ==, "500");
    g_assert_cmpstr(gdk_pixbuf_get_option(pixbuf, "tEXt::Title"), ==, "Loss");
  }
  g_assert_true(tdm_dashboard_export_chart(dashboard, "memory", "svg", svg_path, &error));
  g_assert_no_error(error);
  {
    g_autofree char *svg = NULL;

    g_assert_true(g_file_get_contents(svg_path, &svg, NULL, NULL));
    g_assert_nonnull(strstr(svg, "<tandem:setting name=\"devices\">cpu,cpu</tandem:setting>"));
    /* The legend's names, as text. */
    g_assert_nonnull(strstr(svg, ">cpu 1</text>"));
    g_assert_nonnull(strstr(svg, ">cpu 2</text>"));
  }
  g_assert_true(g_file_test(png_path, G_FILE_TEST_IS_REGULAR));
  g_assert_true(g_file_test(svg_path, G_FILE_TEST_IS_REGULAR));
  g_assert_false(tdm_dashboard_export_chart(dashboard, "loss", "gif", png_path, &error));
  g_assert_nonnull(error);

  g_unlink(csv_path);
  g_unlink(png_path);
  g_unlink(svg_path);
  g_rmdir(dir);

  destroy_window(window);
  g_assert_cmpuint(tdm_run_get_n_threads(), ==, 0);
}

static void
test_window_stop(void)
{
  /* Chainer's MLP: an epoch takes far longer than this test waits. */
  TdmWindow *window = window_for_run("fc1000,relu,fc1000,relu,fc10", 100, 1);
  gint64 asked;
  double took;

  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(wait_for(has_training_points, window, 60));
  g_assert_true(tdm_window_get_running(window));

  /* Pause and resume on the way. */
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.pause", NULL));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.pause", NULL));

  /* How soon it stops is the benchmark's to measure (bench-train --stop-latency);
   * the bound here only keeps a stop that never comes from hanging the test. */
  asked = g_get_monotonic_time();
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.stop", NULL));
  g_assert_true(wait_for(not_running, window, 60));
  took = (g_get_monotonic_time() - asked) / 1e6;
  g_test_message("stopped %.3f s after win.stop", took);

  g_assert_cmpstr(adw_view_switcher_title_get_subtitle(window_child(window, "window_title")), ==, "Stopped");
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  g_assert_true(tdm_window_get_can_start(window));

  destroy_window(window);
  g_assert_cmpuint(tdm_run_get_n_threads(), ==, 0);
}

static gboolean
no_threads(gpointer data)
{
  return tdm_run_get_n_threads() == 0;
}

static void
test_window_close_while_running(void)
{
  TdmWindow *window = window_for_run("fc1000,relu,fc1000,relu,fc10", 100, 1);

  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(wait_for(has_training_points, window, 60));

  /* The window goes at once; the thread is stopped and joined soon after, and
   * the main loop keeps turning meanwhile. */
  gtk_window_destroy(GTK_WINDOW(window));
  g_assert_finalize_object(window);
  g_assert_true(wait_for(no_threads, NULL, 60));
}

static void
test_window_bad_spec(void)
{
  g_autoptr(GArray) devices = fake_devices(FALSE);
  TdmWindow *window;
  TdmSpecEntry *entry;

  reset_settings();
  window = present_window();
  tdm_window_set_devices(window, devices);
  set_dataset(window, "synthetic");
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), window_custom_network());
  entry = window_child(window, "spec_entry");

  tdm_spec_entry_set_text(entry, "fc64,relu,fc10");
  g_assert_true(wait_for(can_start, window, 60));
  g_assert_true(tdm_spec_entry_get_valid(entry));

  /* Ten classes need ten outputs: Start goes grey and the entry says why. */
  tdm_spec_entry_set_text(entry, "fc64,relu,fc7");
  g_assert_false(tdm_spec_entry_get_valid(entry));
  g_assert_false(tdm_window_get_can_start(window));
  g_assert_nonnull(tdm_spec_entry_get_message(entry));
  tdm_spec_entry_set_text(entry, "fc64,banana");
  g_assert_false(tdm_spec_entry_get_valid(entry));
  /* The ResNet layers' errors are shown under the entry in the engine's words. */
  tdm_spec_entry_set_text(entry, "bn,conv8k3p1,gap,fc10");
  g_assert_false(tdm_spec_entry_get_valid(entry));
  g_assert_nonnull(strstr(tdm_spec_entry_get_message(entry), "bn before any layer"));
  tdm_spec_entry_set_text(entry, "conv8k3p1,bn,relu,res(conv16k3s2p1,bn),relu,gap,fc10");
  g_assert_true(tdm_spec_entry_get_valid(entry));

  /* The resnet preset brings its recipe into the form, every value still editable. */
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), 2);
  g_assert_true(tdm_spec_entry_get_valid(entry));
  g_assert_false(tdm_spec_entry_get_editable(entry));
  g_assert_cmpstr(tdm_spec_entry_get_text(entry), ==, TDM_NETWORK_RESNET);
  g_assert_cmpint(gtk_spin_button_get_value_as_int(window_child(window, "batch_spin")), ==, 512);
  g_assert_cmpint(adw_combo_row_get_selected(window_child(window, "optimizer_dropdown")), ==,
                  TDM_OPTIMIZER_NESTEROV);
  g_assert_cmpint(adw_combo_row_get_selected(window_child(window, "batchnorm_dropdown")), ==,
                  TDM_BATCHNORM_SYNC);
  gtk_spin_button_set_value(window_child(window, "batch_spin"), 256);
  {
    g_autoptr(GError) error = NULL;
    GObject *form = gtk_widget_get_template_child(GTK_WIDGET(window), TDM_TYPE_WINDOW, "sidebar");
    g_autoptr(TdmConfig) config = tdm_run_form_build_config(TDM_RUN_FORM(form), &error);
    g_assert_no_error(error);
    g_assert_cmpstr(config->network, ==, "resnet");
    g_assert_cmpint(config->batch, ==, 256);
    g_assert_cmpint(config->batchnorm, ==, TDM_BATCHNORM_SYNC);
    g_assert_cmpint(config->crop_pad, ==, 0);
    g_assert_cmpint(config->epochs, ==, 5);
    g_assert_cmpint(config->decay_scope, ==, TDM_DECAY_WEIGHTS);
    g_assert_true(config->test_flip);
  }

  /* Built-in networks are shown, expanded and read-only. */
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), 0);
  g_assert_true(tdm_spec_entry_get_valid(entry));
  g_assert_false(tdm_spec_entry_get_editable(entry));
  g_assert_cmpstr(tdm_spec_entry_get_text(entry), ==, "fc1000,relu,fc1000,relu,fc10");
  g_assert_true(tdm_window_get_can_start(window));

  destroy_window(window);
}

static gboolean
error_shown(gpointer data)
{
  return !tdm_window_get_running(data) &&
         gtk_revealer_get_reveal_child(window_child(data, "error_revealer"));
}

static void
test_window_start_error(void)
{
  g_autoptr(GArray) devices = g_array_new(FALSE, TRUE, sizeof(TdmDeviceInfo));
  TdmDeviceInfo gpu = {0};
  TdmWindow *window;
  const char *message;

  /* A GPU no machine has: the start fails, in words, and the window stays usable. */
  gpu.kind = TDM_BACKEND_CUDA;
  gpu.index = 63;
  g_strlcpy(gpu.id, "cuda:63", sizeof gpu.id);
  g_strlcpy(gpu.name, "Missing GPU", sizeof gpu.name);
  gpu.memory_bytes = (gint64)16 << 30;
  g_array_append_val(devices, gpu);

  reset_settings();
  window = present_window();
  tdm_window_set_devices(window, devices);
  set_dataset(window, "synthetic");
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), window_custom_network());
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), "fc32,relu,fc10");
  g_assert_true(wait_for(can_start, window, 60));

  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(wait_for(error_shown, window, 60));
  message = gtk_label_get_text(window_child(window, "error_label"));
  g_test_message("%s", message);
  g_assert_nonnull(strstr(message, "cuda:63"));
  g_assert_true(tdm_window_get_can_start(window));
  g_assert_true(gtk_widget_get_sensitive(window_child(window, "sidebar")));

  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.dismiss-error", NULL));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));

  destroy_window(window);
  g_assert_cmpuint(tdm_run_get_n_threads(), ==, 0);
}

/* A network too big for the host is refused before anything big is allocated: a
 * FAILED event shows its figures, and the window stays usable. The address space is
 * limited meanwhile, so that a regression fails to allocate instead of taking the
 * machine's memory. */
static void
test_window_too_big(void)
{
  g_autoptr(GArray) devices = fake_devices(FALSE);
  struct rlimit saved, limited;
  g_autofree char *status = NULL;
  const char *vm;
  const char *message;
  TdmWindow *window;

  g_assert_true(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
  vm = strstr(status, "VmSize:");
  g_assert_nonnull(vm);
  g_assert_cmpint(getrlimit(RLIMIT_AS, &saved), ==, 0);
  limited = saved;
  limited.rlim_cur = (rlim_t)g_ascii_strtoull(vm + 7, NULL, 10) * 1024 + ((rlim_t)4 << 30);
  if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < limited.rlim_cur)
    limited.rlim_cur = saved.rlim_cur;
  g_assert_cmpint(setrlimit(RLIMIT_AS, &limited), ==, 0);

  reset_settings();
  window = present_window();
  tdm_window_set_devices(window, devices);
  set_dataset(window, "synthetic");
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), window_custom_network());
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), "fc1048576,fc1000,fc10");
  g_assert_true(wait_for(can_start, window, 60));

  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(wait_for(error_shown, window, 60));
  message = gtk_label_get_text(window_child(window, "error_label"));
  g_test_message("%s", message);
  g_assert_nonnull(strstr(message, "ot enough host memory: the run needs")); /* capitalized as a sentence */
  g_assert_nonnull(strstr(message, " available ("));
  g_assert_true(tdm_window_get_can_start(window));
  g_assert_true(gtk_widget_get_sensitive(window_child(window, "sidebar")));

  destroy_window(window);
  g_assert_cmpuint(tdm_run_get_n_threads(), ==, 0);
  g_assert_cmpint(setrlimit(RLIMIT_AS, &saved), ==, 0);
}

static gboolean
dataset_failed(gpointer data)
{
  return tdm_dataset_chooser_get_error(window_child(data, "dataset_chooser")) != NULL;
}

static void
test_window_bad_folder(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-test-XXXXXX", NULL);
  g_autoptr(GSettings) settings = g_settings_new(TDM_APP_ID);
  g_autoptr(GArray) devices = fake_devices(FALSE);
  TdmWindow *window;
  const char *message;

  /* The last choice was a folder that holds no dataset (any more). */
  reset_settings();
  g_settings_set_string(settings, "dataset", dir);
  window = present_window();
  tdm_window_set_devices(window, devices);

  g_assert_true(wait_for(dataset_failed, window, 30));
  message = tdm_dataset_chooser_get_error(window_child(window, "dataset_chooser"));
  g_test_message("%s", message);
  g_assert_cmpuint(strlen(message), >, 10);
  g_assert_false(tdm_window_get_can_start(window));
  g_assert_cmpstr(tdm_dataset_chooser_get_source(window_child(window, "dataset_chooser")), ==, dir);

  /* Still usable: a built-in set loads and the window can start; the folder is no
   * longer offered in the list. */
  set_dataset(window, "synthetic");
  g_assert_true(wait_for(can_start, window, 60));
  {
    GtkDropDown *dropdown = GTK_DROP_DOWN(gtk_widget_get_template_child(
      window_child(window, "dataset_chooser"), TDM_TYPE_DATASET_CHOOSER, "dropdown"));
    GListModel *model = gtk_drop_down_get_model(dropdown);
    g_autofree char *name = g_path_get_basename(dir);

    for (guint i = 0; i < g_list_model_get_n_items(model); i++)
      g_assert_cmpstr(gtk_string_list_get_string(GTK_STRING_LIST(model), i), !=, name);
  }

  destroy_window(window);
  g_rmdir(dir);
}

/* A built-in set that is not installed is not offered, and a remembered
 * choice of it falls back to one that is. */
static void
test_window_datasets_offered(void)
{
  g_autofree char *empty = g_dir_make_tmp("tandem-no-mnist-XXXXXX", NULL);
  TdmWindow *window;
  GtkDropDown *dropdown;
  GListModel *model;

  g_setenv("TANDEM_MNIST_DIR", empty, TRUE);
  reset_settings();
  window = present_window();
  dropdown = GTK_DROP_DOWN(gtk_widget_get_template_child(window_child(window, "dataset_chooser"),
                                                         TDM_TYPE_DATASET_CHOOSER, "dropdown"));
  model = gtk_drop_down_get_model(dropdown);
  for (guint i = 0; i < g_list_model_get_n_items(model); i++)
    g_assert_cmpstr(gtk_string_list_get_string(GTK_STRING_LIST(model), i), !=, "MNIST");
  g_assert_cmpstr(gtk_string_list_get_string(GTK_STRING_LIST(model),
                                             g_list_model_get_n_items(model) - 1), ==, "Synthetic");

  set_dataset(window, "mnist");
  g_assert_cmpstr(tdm_dataset_chooser_get_source(window_child(window, "dataset_chooser")), !=, "mnist");
  destroy_window(window);
  g_unsetenv("TANDEM_MNIST_DIR");
  g_rmdir(empty);
}

static void
test_window_japanese_subprocess(void)
{
  TdmWindow *window;

  /* gettext ignores LANGUAGE in the "C" locale; C.UTF-8 is always there on Debian. */
  if (g_strcmp0(setlocale(LC_MESSAGES, NULL), "C") == 0)
    setlocale(LC_ALL, "C.UTF-8");
  g_setenv("LANGUAGE", "ja", TRUE);
  tdm_application_init_i18n();

  reset_settings();
  window = present_window();
  g_assert_cmpstr(adw_preferences_group_get_title(window_child(window, "dataset_group")), ==, "データセット");
  g_assert_cmpstr(gtk_label_get_label(window_child(window, "start_label")), ==, "開始");
  g_assert_cmpstr(tdm_chart_get_title(chart(window, "loss")), ==, "損失");
  /* The phases and an empty transfer, in Japanese too. */
  g_assert_cmpstr(tdm_format_phase(TDM_PHASE_FORWARD), ==, "順伝播");
  g_assert_cmpstr(tdm_format_phase(TDM_PHASE_ALLREDUCE), ==, "全体集約");
  destroy_window(window);
}

static void
test_window_japanese(void)
{
  g_test_trap_subprocess("/window/japanese/subprocess", 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

int
main(int argc, char **argv)
{
  /* The checks read English text, whatever language the caller speaks; the Japanese
   * test sets its own. */
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  window_test_init(&argc, &argv);

  g_test_add_func("/window/builds", test_window_builds);
  g_test_add_func("/window/devices", test_window_devices);
  g_test_add_func("/window/gpu-replicas", test_window_gpu_replicas);
  g_test_add_func("/window/bad-spec", test_window_bad_spec);
  g_test_add_func("/window/bad-folder", test_window_bad_folder);
  g_test_add_func("/window/start-error", test_window_start_error);
  g_test_add_func("/window/too-big", test_window_too_big);
  g_test_add_func("/window/run", test_window_run);
  g_test_add_func("/window/stop", test_window_stop);
  g_test_add_func("/window/close-while-running", test_window_close_while_running);
  g_test_add_func("/window/datasets-offered", test_window_datasets_offered);
  g_test_add_func("/window/japanese", test_window_japanese);
  g_test_add_func("/window/japanese/subprocess", test_window_japanese_subprocess);

  return g_test_run();
}
