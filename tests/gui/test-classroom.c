/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-classroom.c: the window's classroom pages, fed by real runs.
 *
 * Whole runs on two CPU workers and the synthetic set go through the window's
 * actions, and the Devices, Predictions and Scaling pages are checked on what they
 * hold (the events they kept, their widgets' state), never on pixels or time: the
 * timeline shows every phase of both strategies, the batch strip's shards add up to
 * the batch, the confusion matrix sums to the test set and its diagonal gives the
 * accuracy the run reported, the memory estimate made before Start is within 10 %
 * of the peak the run measured, a scaling run over 1 and 2 workers gives two points
 * and is kept, and presentation mode's chart text is at least 14 px at 1024×768.
 * Runs under the Xvfb that xvfb-run-test.sh starts.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <glib/gstdio.h>
#include <adwaita.h>

#include "tdm-build-config.h"

#include "tdm-application.h"
#include "tdm-batch-strip.h"
#include "tdm-chart.h"
#include "tdm-confusion-view.h"
#include "tdm-dashboard.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-device.h"
#include "tdm-devices-page.h"
#include "tdm-history.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-prediction-gallery.h"
#include "tdm-predictions-page.h"
#include "tdm-run.h"
#include "tdm-run-form.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling-page.h"
#include "tdm-spec-entry.h"
#include "tdm-timeline.h"
#include "tdm-window.h"
#include "window-test-util.h"

/* ---- helpers ---------------------------------------------------------------- */

/* The real CPU, and a made-up GPU of `gpu_bytes` when that is > 0. */
static GArray *
devices_with(gint64 gpu_bytes)
{
  g_autoptr(GArray) real = tdm_device_list();
  GArray *devices = g_array_new(FALSE, TRUE, sizeof(TdmDeviceInfo));

  if (gpu_bytes > 0) {
    TdmDeviceInfo gpu = {0};

    gpu.kind = TDM_BACKEND_CUDA;
    g_snprintf(gpu.id, sizeof gpu.id, "cuda:0");
    g_snprintf(gpu.name, sizeof gpu.name, "Made-up small GPU");
    gpu.memory_bytes = gpu_bytes;
    gpu.compute_major = 9;
    g_snprintf(gpu.pci_bus_id, sizeof gpu.pci_bus_id, "0000:10:00.0");
    gpu.cores = 132;
    g_array_append_val(devices, gpu);
  }
  for (guint i = 0; i < real->len; i++) {
    const TdmDeviceInfo *info = &g_array_index(real, TdmDeviceInfo, i);

    if (info->kind == TDM_BACKEND_CPU)
      g_array_append_val(devices, *info);
  }
  return devices;
}

static TdmDeviceRow *
row_where(TdmWindow *window, gboolean cpu)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows(window_child(window, "device_picker"));

  for (guint i = 0; i < rows->len; i++)
    if (tdm_device_row_is_cpu(rows->pdata[i]) == cpu)
      return rows->pdata[i];
  g_assert_not_reached();
}

/* A window set for a run on two CPU workers and the synthetic set. */
static TdmWindow *
window_for_run(const char *spec, int batch, guint strategy)
{
  g_autoptr(GArray) devices = devices_with(0);
  TdmWindow *window;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_present(GTK_WINDOW(window));
  tdm_window_set_devices(window, devices);
  tdm_device_row_set_active(row_where(window, TRUE), TRUE);
  tdm_device_row_set_workers(row_where(window, TRUE), 2);
  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), "synthetic");
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), window_custom_network());
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), spec);
  gtk_spin_button_set_value(window_child(window, "batch_spin"), batch);
  gtk_spin_button_set_value(window_child(window, "epochs_spin"), 1);
  adw_combo_row_set_selected(window_child(window, "strategy_dropdown"), strategy);

  g_assert_true(wait_for(can_start, window, 60));
  return window;
}

/* What the run's own events said, seen through an emission hook on TdmRun::event. */
typedef struct {
  int phases_events;
  int batch_events;
  int predictions_events;
  double test_accuracy;   /* of the last EPOCH */
  int test_count;         /* from STARTED */
  int batch;              /* from STARTED */
  size_t parameters;      /* from STARTED */
} Seen;

static Seen seen;

static gboolean
note_event(GSignalInvocationHint *hint, guint n_values, const GValue *values, gpointer data)
{
  const TdmEvent *e = g_value_get_pointer(&values[1]);

  switch (e->kind) {
  case TDM_EVENT_STARTED:
    seen.test_count = e->started.test_count;
    seen.batch = e->started.batch;
    seen.parameters = e->started.parameters;
    break;
  case TDM_EVENT_PHASES:
    seen.phases_events++;
    break;
  case TDM_EVENT_BATCH:
    seen.batch_events++;
    break;
  case TDM_EVENT_PREDICTIONS:
    seen.predictions_events++;
    break;
  case TDM_EVENT_EPOCH:
    seen.test_accuracy = e->epoch.test_accuracy;
    break;
  default:
    break;
  }
  return TRUE;
}

static gulong
hook_events(void)
{
  memset(&seen, 0, sizeof seen);
  g_type_class_unref(g_type_class_ref(TDM_TYPE_RUN));
  return g_signal_add_emission_hook(g_signal_lookup("event", TDM_TYPE_RUN), 0, note_event,
                                    NULL, NULL);
}

static void
unhook_events(gulong hook)
{
  g_signal_remove_emission_hook(g_signal_lookup("event", TDM_TYPE_RUN), hook);
}

static void
run_to_end(TdmWindow *window)
{
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(tdm_window_get_running(window));
  g_assert_true(wait_for(not_running, window, 240));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
}

/* ---- tests ------------------------------------------------------------------ */

static gboolean
page_mapped(gpointer data)
{
  return gtk_widget_get_mapped(data);
}

/* The Devices page through one run of each strategy. */
static void
check_strategy(guint strategy)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 500, strategy);
  TdmDevicesPage *page = window_child(window, "devices_page");
  TdmTimeline *timeline = TDM_TIMELINE(template_child(page, "timeline"));
  TdmBatchStrip *strip = TDM_BATCH_STRIP(template_child(page, "batch_strip"));
  gint64 estimate_before[2];
  gulong hook;

  /* Before Start: the engine's estimate for the choices, one row per worker. */
  g_assert_cmpint(tdm_devices_page_get_n_memory_rows(page), ==, 2);
  g_assert_null(tdm_devices_page_get_warning(page));
  for (int d = 0; d < 2; d++) {
    estimate_before[d] = tdm_devices_page_get_estimate_bytes(page, d);
    g_assert_cmpint(estimate_before[d], >, 0);
    g_assert_cmpint(tdm_devices_page_get_peak_bytes(page, d), ==, -1);
  }

  hook = hook_events();
  run_to_end(window);
  unhook_events(hook);

  /* The timeline: every phase of the strategy, and only those of its collectives. */
  g_assert_cmpint(seen.phases_events, >, 0);
  g_assert_cmpuint(tdm_timeline_get_n_steps(timeline), >, 0);
  g_assert_cmpuint(tdm_timeline_get_n_steps(timeline), <=, MIN(seen.phases_events, TDM_TIMELINE_STEPS));
  g_assert_true(tdm_timeline_has_phase(timeline, TDM_PHASE_FORWARD));
  g_assert_true(tdm_timeline_has_phase(timeline, TDM_PHASE_BACKWARD));
  g_assert_true(tdm_timeline_has_phase(timeline, TDM_PHASE_UPDATE));
  if (strategy == 0) {
    /* main: reduce onto the main device, update there, broadcast back. */
    g_assert_true(tdm_timeline_has_phase(timeline, TDM_PHASE_REDUCE));
    g_assert_true(tdm_timeline_has_phase(timeline, TDM_PHASE_BROADCAST));
    g_assert_false(tdm_timeline_has_phase(timeline, TDM_PHASE_ALLREDUCE));
  } else {
    g_assert_true(tdm_timeline_has_phase(timeline, TDM_PHASE_ALLREDUCE));
    g_assert_false(tdm_timeline_has_phase(timeline, TDM_PHASE_REDUCE));
    g_assert_false(tdm_timeline_has_phase(timeline, TDM_PHASE_BROADCAST));
  }
  /* The phase table: the phases each device went through, counted (never timed);
   * with `main` only the main device (0) updates. */
  for (int d = 0; d < 2; d++) {
    g_assert_cmpint(tdm_devices_page_get_phase_spans(page, d, TDM_PHASE_FORWARD), >, 0);
    g_assert_cmpint(tdm_devices_page_get_phase_spans(page, d, TDM_PHASE_BACKWARD), >, 0);
  }
  if (strategy == 0) {
    g_assert_cmpint(tdm_devices_page_get_phase_spans(page, 0, TDM_PHASE_UPDATE), >, 0);
    g_assert_cmpint(tdm_devices_page_get_phase_spans(page, 1, TDM_PHASE_UPDATE), ==, 0);
    g_assert_cmpint(tdm_devices_page_get_phase_spans(page, 0, TDM_PHASE_ALLREDUCE), ==, 0);
  } else {
    g_assert_cmpint(tdm_devices_page_get_phase_spans(page, 0, TDM_PHASE_REDUCE), ==, 0);
    g_assert_cmpint(tdm_devices_page_get_phase_spans(page, 1, TDM_PHASE_BROADCAST), ==, 0);
  }
  /* Bytes per step: with two devices either strategy moves one gradient's worth out
   * of and into each (`main`: one reduce and one broadcast; all-reduce: 2(N−1)/N). */
  {
    g_autofree char *gradient = g_format_size(seen.parameters * sizeof(float));

    g_assert_cmpuint(seen.parameters, >, 0);
    /* The page was not shown during the run: its table was left as it was (a new
     * figure in a label relays out the whole window), and catches up once shown. */
    g_assert_false(gtk_widget_get_mapped(GTK_WIDGET(page)));
    g_assert_false(tdm_devices_page_get_bytes_shown(page, 0, NULL, NULL));
    tdm_window_set_page(window, "devices");
    g_assert_true(wait_for(page_mapped, page, 10));
    for (int d = 0; d < 2; d++) {
      const char *sent = NULL, *received = NULL;

      g_assert_true(tdm_devices_page_get_bytes_shown(page, d, &sent, &received));
      g_assert_cmpstr(sent, ==, gradient);
      g_assert_cmpstr(received, ==, gradient);
    }
  }

  /* Two lanes, boxes inside the widget. */
  {
    g_autoptr(GArray) boxes = tdm_timeline_layout(timeline, 600, 200);
    gboolean lane[2] = {FALSE, FALSE};

    g_assert_cmpuint(boxes->len, >, 0);
    for (guint i = 0; i < boxes->len; i++) {
      const TdmTimelineBox *b = &g_array_index(boxes, TdmTimelineBox, i);

      g_assert_cmpint(b->device, >=, 0);
      g_assert_cmpint(b->device, <, 2);
      lane[b->device] = TRUE;
      g_assert_cmpfloat(b->x, >=, 0);
      g_assert_cmpfloat(b->x + b->width, <=, 600.5);
    }
    g_assert_true(lane[0] && lane[1]);
  }

  /* The batch strip: two shards that make the batch, with dataset labels. */
  g_assert_cmpint(seen.batch_events, >, 0);
  g_assert_cmpint(tdm_batch_strip_get_devices(strip), ==, 2);
  {
    g_autoptr(GArray) rows = tdm_batch_strip_layout(strip, 600, 200);
    int sum = 0;

    g_assert_cmpuint(rows->len, ==, 2);
    for (guint r = 0; r < rows->len; r++) {
      const TdmBatchStripRow *row = &g_array_index(rows, TdmBatchStripRow, r);

      g_assert_cmpint(row->size, ==, 250);
      g_assert_cmpint(row->shown, >, 0);
      sum += row->size;
      for (int k = 0; k < row->shown; k++) {
        g_assert_cmpint(tdm_batch_strip_get_label(strip, r, k), >=, 0);
        g_assert_cmpint(tdm_batch_strip_get_label(strip, r, k), <, 10);
      }
    }
    g_assert_cmpint(sum, ==, seen.batch);
  }

  /* Memory: the estimate made before Start within 10 % of the measured peak, and the
   * run's own estimate beside it. */
  for (int d = 0; d < 2; d++) {
    gint64 peak = tdm_devices_page_get_peak_bytes(page, d);
    gint64 during = tdm_devices_page_get_estimate_bytes(page, d);

    g_assert_cmpint(peak, >, 0);
    g_assert_cmpfloat(fabs((double)estimate_before[d] - (double)peak), <=, 0.10 * (double)peak);
    g_assert_cmpfloat(fabs((double)during - (double)peak), <=, 0.10 * (double)peak);
  }

  /* Predictions: the matrix sums to the test set, its diagonal is the accuracy. */
  {
    TdmPredictionsPage *predictions = window_child(window, "predictions_page");
    TdmConfusionView *confusion = TDM_CONFUSION_VIEW(template_child(predictions, "confusion"));
    TdmPredictionGallery *gallery =
      TDM_PREDICTION_GALLERY(template_child(predictions, "gallery"));
    long total = tdm_confusion_view_get_total(confusion);
    long correct = tdm_confusion_view_get_correct(confusion);

    g_assert_cmpint(seen.predictions_events, ==, 1);
    g_assert_cmpint(tdm_confusion_view_get_classes(confusion), ==, 10);
    g_assert_cmpint(total, ==, seen.test_count);
    g_assert_cmpfloat(fabs((double)correct / total - seen.test_accuracy), <, 1e-6);
    g_assert_cmpuint(tdm_prediction_gallery_get_n_items(gallery), >, 0);
    /* Mistakes first: once a right answer shows, no mistake follows. */
    for (guint i = 1; i < tdm_prediction_gallery_get_n_items(gallery); i++)
      g_assert_true(tdm_prediction_gallery_is_mistake(gallery, i - 1) ||
                    !tdm_prediction_gallery_is_mistake(gallery, i));
    g_assert_nonnull(strstr(gtk_label_get_label(template_child(predictions, "summary_label")),
                            "right"));
  }

  /* Named as every page names them: the run's devices, 1-based where they repeat. */
  g_assert_cmpstr(tdm_timeline_get_lane_name(timeline, 0), ==, "cpu 1");
  g_assert_cmpstr(tdm_timeline_get_lane_name(timeline, 1), ==, "cpu 2");

  /* Another choice: the last run's timeline, split and peaks are not its own. */
  gtk_spin_button_set_value(window_child(window, "batch_spin"), 400);
  g_assert_cmpuint(tdm_timeline_get_n_steps(timeline), ==, 0);
  g_assert_cmpint(tdm_batch_strip_get_devices(strip), ==, 0);
  for (int d = 0; d < 2; d++) {
    g_assert_cmpint(tdm_devices_page_get_peak_bytes(page, d), ==, -1);
    g_assert_cmpint(tdm_devices_page_get_phase_spans(page, d, TDM_PHASE_FORWARD), ==, 0);
  }

  destroy_window(window);
  g_assert_cmpuint(tdm_run_get_n_threads(), ==, 0);
}

static void
test_devices_main(void)
{
  check_strategy(0);
}

static void
test_devices_allreduce(void)
{
  check_strategy(1);
}

static gboolean
no_warning(gpointer data)
{
  return tdm_devices_page_get_warning(data) == NULL;
}

static gboolean
has_warning(gpointer data)
{
  return tdm_devices_page_get_warning(data) != NULL;
}

/* A run that cannot fit says so before Start, with the largest batch that fits. */
static void
test_memory_warning(void)
{
  g_autoptr(GArray) devices = devices_with((gint64)256 << 20);
  TdmWindow *window;
  TdmDevicesPage *page;
  const char *warning;

  reset_settings();
  window = g_object_ref(tdm_window_new(NULL));
  gtk_window_present(GTK_WINDOW(window));
  tdm_window_set_devices(window, devices);
  tdm_device_row_set_active(row_where(window, TRUE), FALSE);
  tdm_device_row_set_active(row_where(window, FALSE), TRUE);
  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), "synthetic");
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), window_custom_network());
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), "fc2048,relu,fc10");
  gtk_spin_button_set_value(window_child(window, "batch_spin"), 16384);
  g_assert_true(wait_for(can_start, window, 60));

  page = window_child(window, "devices_page");
  g_assert_cmpint(tdm_devices_page_get_n_memory_rows(page), ==, 1);
  /* 16,384 samples' activations of 2048 units (128 MiB a buffer) pass 256 MiB. */
  g_assert_cmpint(tdm_devices_page_get_estimate_bytes(page, 0), >, (gint64)256 << 20);
  warning = tdm_devices_page_get_warning(page);
  g_assert_nonnull(warning);
  g_assert_nonnull(strstr(warning, "will not fit"));
  /* With the largest batch that fits, which is a smaller one. */
  {
    const char *at = strstr(warning, "largest batch that fits is ");
    long largest;

    g_assert_nonnull(at);
    largest = strtol(at + strlen("largest batch that fits is "), NULL, 10);
    g_assert_cmpint(largest, >, 0);
    g_assert_cmpint(largest, <, 16384);
  }

  /* The window's verdict is the engine's: its largest batch is tdm_memory_largest_batch()'s
   * for the same budgets (the host's free memory, the GPU's 256 MiB), the warning goes at
   * that batch and comes back one sample above it. */
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmConfig) config =
      tdm_run_form_build_config(window_child(window, "sidebar"), &error);
    g_autoptr(TdmNetwork) net = NULL;
    TdmDatasetChooser *chooser = window_child(window, "dataset_chooser");
    int height, width, channels, classes, train_count, test_count, engine_largest;
    guint64 host_budget = tdm_memory_host_available(NULL);
    const char *shown;

    g_assert_no_error(error);
    g_assert_true(tdm_dataset_chooser_get_shape(chooser, &height, &width, &channels, &classes));
    g_assert_true(tdm_dataset_chooser_get_counts(chooser, &train_count, &test_count));
    net = tdm_network_new(config->network, height, width, channels, classes, &error);
    g_assert_no_error(error);
    if (host_budget == G_MAXUINT64)
      host_budget = 0;
    engine_largest = tdm_memory_largest_batch(config, net, train_count, test_count, host_budget,
                                              (guint64)256 << 20);
    g_assert_cmpint(engine_largest, >, 0);
    g_assert_cmpint(engine_largest, <, 16384);
    shown = strstr(tdm_devices_page_get_warning(page), "largest batch that fits is ");
    g_assert_nonnull(shown);
    g_assert_cmpint(strtol(shown + strlen("largest batch that fits is "), NULL, 10), ==,
                    engine_largest);
    gtk_spin_button_set_value(window_child(window, "batch_spin"), engine_largest);
    g_assert_true(wait_for(no_warning, page, 30));
    gtk_spin_button_set_value(window_child(window, "batch_spin"), engine_largest + 1);
    g_assert_true(wait_for(has_warning, page, 30));
  }

  /* A small network fits the same GPU: the warning goes. */
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), "fc16,relu,fc10");
  gtk_spin_button_set_value(window_child(window, "batch_spin"), 64);
  g_assert_true(wait_for(no_warning, page, 30));
  /* The images (53 MiB of both splits) and a small network fit 256 MiB. */
  g_assert_cmpint(tdm_devices_page_get_estimate_bytes(page, 0), <, (gint64)256 << 20);

  destroy_window(window);
}

/* The newest sweep the window's History page lists, or NULL. */
static TdmRunItem *
listed_sweep(TdmWindow *window)
{
  GListModel *store = G_LIST_MODEL(tdm_window_get_history(window));
  TdmRunItem *found = NULL;

  g_assert_true(wait_for(not_loading, store, 30));
  /* Listed by start, oldest first. */
  for (guint i = 0; i < g_list_model_get_n_items(store); i++) {
    g_autoptr(TdmRunItem) item = g_list_model_get_item(store, i);

    if (tdm_run_item_is_sweep(item))
      found = item;
  }
  return found;
}

/* The sweep a test kept, deleted from its row on the History page as a person does,
 * out of the history the other tests see (for good once the window goes). */
static void
forget_sweep(TdmWindow *window)
{
  TdmRunItem *item = listed_sweep(window);
  GtkWidget *row;

  g_assert_nonnull(item);
  row = history_row(tdm_window_get_history_view(window), item);
  g_assert_nonnull(row);
  g_assert_true(gtk_widget_activate_action(row, "run.delete", NULL));
  g_assert_null(listed_sweep(window));
}

/* A scaling run over 1 and 2 CPU workers: two points, kept and exported. */
static void
test_scaling_run(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 200, 1);
  TdmScalingPage *page = window_child(window, "scaling_page");
  TdmScalingChart *chart = TDM_SCALING_CHART(tdm_scaling_page_get_chart(page));
  g_autofree char *dir = g_dir_make_tmp("tandem-test-XXXXXX", NULL);
  g_autofree char *csv_path = g_build_filename(dir, "scaling.csv", NULL);
  g_autofree char *svg_path = g_build_filename(dir, "scaling.svg", NULL);
  g_autofree char *kept = NULL;
  g_autofree char *svg = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GError) error = NULL;
  TdmRunItem *sweep;

  g_assert_null(listed_sweep(window));
  choose_sweep(window, TDM_SCALING_STRONG, 100);
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL));
  g_assert_true(sweep_running(window));
  /* One thing at a time: no training run while the scaling run measures. */
  g_assert_false(tdm_window_get_can_start(window));
  g_assert_cmpstr(adw_view_stack_get_visible_child_name(window_child(window, "view_stack")), ==, "scaling");

  g_assert_true(wait_for(sweep_over, window, 300));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  g_assert_cmpuint(tdm_scaling_chart_get_n_points(chart), ==, 2);
  for (guint i = 0; i < 2; i++) {
    const TdmScalingPoint *p = tdm_scaling_chart_get_point(chart, i);

    g_assert_cmpint(p->devices, ==, (int)i + 1);
    g_assert_cmpint(p->batch, ==, 200);
    g_assert_cmpfloat(p->samples_per_second, >, 0);
  }
  g_assert_cmpfloat(tdm_scaling_chart_get_point(chart, 0)->speedup, ==, 1.0);
  g_assert_true(tdm_window_get_can_start(window));

  /* Kept in the run history, listed on the History page under the name the toast
   * gives (tests/engine/test-history-experiments.c checks the record), and exported. */
  sweep = listed_sweep(window);
  g_assert_nonnull(sweep);
  {
    g_autofree char *toast = toast_text(window);
    g_autofree char *kept_as = g_strdup_printf("Scaling run kept in the history as “%s”",
                                               tdm_run_item_get_name(sweep));

    g_assert_nonnull(strstr(toast, kept_as));
    g_assert_null(strstr(toast, "could not be written"));
  }
  g_assert_true(tdm_scaling_page_write_csv(page, csv_path, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(csv_path, &kept, NULL, NULL));
  /* The sweep and the settings it started from as `# key: value` lines,
   * then the table. */
  g_assert_true(g_str_has_prefix(kept, "# scaling: strong\n# dataset: "));
  g_assert_nonnull(strstr(kept, "\n# batch: 200\n"));
  g_assert_nonnull(strstr(kept, "\n# tandem: "));
  lines = g_strsplit(strstr(kept, "\ndevices,") + 1, "\n", -1);
  g_strchomp(lines[2]);
  g_assert_cmpuint(g_strv_length(lines), ==, 4);
  g_assert_cmpstr(lines[3], ==, "");
  g_assert_true(g_str_has_prefix(lines[0], "devices,batch,steps,samples_per_second"));
  g_assert_true(g_str_has_prefix(lines[1], "1,200,"));
  g_assert_true(g_str_has_prefix(lines[2], "2,200,"));
  /* The same points exported from the kept sweep, as tandem-train --export-run and the
   * History page do: past the `#` lines, the same bytes. */
  {
    g_autoptr(TdmHistory) history = tdm_history_new(NULL);
    g_autofree char *cli_path = g_build_filename(dir, "export-run.csv", NULL);
    g_autofree char *cli = NULL;
    const char *id = tdm_run_item_get_id(sweep);

    g_assert_true(tdm_history_export_csv(history, id, cli_path, &error));
    g_assert_no_error(error);
    g_assert_true(g_file_get_contents(cli_path, &cli, NULL, NULL));
    g_assert_nonnull(strstr(cli, "\ndevices,"));
    g_assert_cmpstr(strstr(cli, "\ndevices,"), ==, strstr(kept, "\ndevices,"));
    g_unlink(cli_path);
  }
  g_assert_true(tdm_scaling_page_write_svg(page, svg_path, 800, 500, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(svg_path, &svg, NULL, NULL));
  g_assert_nonnull(strstr(svg, "<svg"));
  /* Labels as text, not glyph outlines; the settings in its metadata. */
  g_assert_nonnull(strstr(svg, ">Devices</text>"));
  g_assert_nonnull(strstr(svg, ">2</text>"));
  g_assert_null(strstr(svg, "glyph"));
  g_assert_nonnull(strstr(svg, "<tandem:setting name=\"batch\">200</tandem:setting>"));
  /* Well-formed XML, the labels Pango laid out included. */
  {
    static const GMarkupParser any = {NULL, NULL, NULL, NULL, NULL};
    g_autoptr(GMarkupParseContext) xml = g_markup_parse_context_new(&any, 0, NULL, NULL);

    g_assert_true(g_markup_parse_context_parse(xml, svg, -1, &error));
    g_assert_true(g_markup_parse_context_end_parse(xml, &error));
    g_assert_no_error(error);
  }
  /* A folder that is not there is an error with a message, not a crash. */
  g_assert_false(tdm_scaling_page_write_csv(page, "/nonexistent-folder/x.csv", &error));
  g_assert_nonnull(error);

  forget_sweep(window);
  g_unlink(csv_path);
  g_unlink(svg_path);
  g_rmdir(dir);
  destroy_window(window);
}

/* Weak scaling keeps the batch per device: 100 on one worker, 200 on two. */
static void
test_scaling_weak(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 200, 1);
  TdmScalingPage *page = window_child(window, "scaling_page");
  TdmScalingChart *chart = TDM_SCALING_CHART(tdm_scaling_page_get_chart(page));

  choose_sweep(window, TDM_SCALING_WEAK, 100);
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL));
  g_assert_true(wait_for(sweep_over, window, 300));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  g_assert_cmpuint(tdm_scaling_chart_get_n_points(chart), ==, 2);
  g_assert_cmpint(tdm_scaling_chart_get_point(chart, 0)->batch, ==, 100);
  g_assert_cmpint(tdm_scaling_chart_get_point(chart, 1)->batch, ==, 200);
  forget_sweep(window);
  destroy_window(window);
}

/* Cancelled at once: the run ends, says so, and keeps nothing. */
static void
test_scaling_cancel(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 200, 1);
  GtkLabel *status = template_child(window_child(window, "scaling_page"), "status_label");

  choose_sweep(window, TDM_SCALING_STRONG, 5000);
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL));
  g_assert_true(sweep_running(window));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-cancel", NULL));
  g_assert_true(wait_for(sweep_over, window, 120));
  g_assert_cmpstr(gtk_label_get_label(status), ==, "Cancelled.");
  /* Nothing kept: the History page lists no sweep. */
  g_assert_null(listed_sweep(window));
  g_assert_true(tdm_window_get_can_start(window));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  destroy_window(window);
}

/* One device gives no scaling: said in words, nothing starts. */
static void
test_scaling_needs_two(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 200, 1);

  tdm_device_row_set_workers(row_where(window, TRUE), 1);
  drain();
  gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL);
  g_assert_false(sweep_running(window));
  g_assert_true(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  g_assert_nonnull(strstr(gtk_label_get_label(window_child(window, "error_label")), "two devices"));
  destroy_window(window);
}

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

/* The phase table's means: the run's first timed step (start-up) is left out once a
 * second one has come, and only the last 16 timed steps count. Fed events through the
 * session, whose phase statistics the page shows. */
static void
test_devices_phase_means(void)
{
  GtkWidget *page = g_object_ref_sink(tdm_devices_page_new());
  g_autoptr(TdmSession) session = tdm_session_new();
  g_autofree TdmEvent *event = g_new0(TdmEvent, 1);

  tdm_devices_page_set_session(TDM_DEVICES_PAGE(page), session);
  event->kind = TDM_EVENT_STARTED;
  event->started.replicas = 2;
  event->started.batch = 100;
  g_strlcpy(event->started.device[0], "cuda:0", sizeof event->started.device[0]);
  g_strlcpy(event->started.device[1], "cuda:0", sizeof event->started.device[1]);
  tdm_session_handle_event(session, event);
  g_assert_cmpfloat(tdm_devices_page_get_phase_ms(TDM_DEVICES_PAGE(page), 0, TDM_PHASE_FORWARD), ==, -1);

  /* Forward: 100 ms in step 1, then 2 ms in odd steps and 1 ms in even ones; device 1
   * always twice device 0's. */
  for (long step = 1; step <= 20; step++) {
    memset(event, 0, sizeof *event);
    event->kind = TDM_EVENT_PHASES;
    event->phases.step = step;
    event->phases.replicas = 2;
    float ms = step == 1 ? 100 : step % 2 != 0 ? 2 : 1;
    for (int d = 0; d < 2; d++) {
      event->phases.device[d].spans = 1;
      event->phases.device[d].span[0].phase = TDM_PHASE_FORWARD;
      event->phases.device[d].span[0].start_ms = 0.5f;
      event->phases.device[d].span[0].end_ms = 0.5f + ms * (d + 1);
    }
    tdm_session_handle_event(session, event);
    double shown = tdm_devices_page_get_phase_ms(TDM_DEVICES_PAGE(page), 0, TDM_PHASE_FORWARD);
    if (step == 1)
      g_assert_cmpfloat_with_epsilon(shown, 100, 1e-9);
    else if (step == 2)
      g_assert_cmpfloat_with_epsilon(shown, 1, 1e-9);   /* step 1 gone */
    else if (step == 3)
      g_assert_cmpfloat_with_epsilon(shown, 1.5, 1e-9);
  }
  /* Steps 5..20: eight of 2 ms and eight of 1 ms. */
  g_assert_cmpfloat_with_epsilon(tdm_devices_page_get_phase_ms(TDM_DEVICES_PAGE(page), 0, TDM_PHASE_FORWARD),
                                 1.5, 1e-6);
  g_assert_cmpfloat_with_epsilon(tdm_devices_page_get_phase_ms(TDM_DEVICES_PAGE(page), 1, TDM_PHASE_FORWARD),
                                 3.0, 1e-6);
  g_assert_cmpfloat(tdm_devices_page_get_phase_ms(TDM_DEVICES_PAGE(page), 0, TDM_PHASE_BACKWARD), ==, -1);
  g_assert_cmpint(tdm_devices_page_get_phase_spans(TDM_DEVICES_PAGE(page), 0, TDM_PHASE_FORWARD), ==, 20);
  g_object_unref(page);
}

int
main(int argc, char *argv[])
{
  /* The checks read English text, whatever language the caller speaks. */
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  window_test_init(&argc, &argv);

  g_test_add_func("/classroom/devices/main", test_devices_main);
  g_test_add_func("/classroom/devices/allreduce", test_devices_allreduce);
  g_test_add_func("/classroom/devices/phase-means", test_devices_phase_means);
  g_test_add_func("/classroom/memory-warning", test_memory_warning);
  g_test_add_func("/classroom/scaling", test_scaling_run);
  g_test_add_func("/classroom/scaling-weak", test_scaling_weak);
  g_test_add_func("/classroom/scaling-cancel", test_scaling_cancel);
  g_test_add_func("/classroom/scaling-needs-two", test_scaling_needs_two);
  g_test_add_func("/classroom/presentation", test_presentation);
  g_test_add_func("/classroom/single-step", test_single_step);
  g_test_add_func("/classroom/step-key", test_step_key);
  g_test_add_func("/classroom/batch-too-large", test_batch_too_large);

  return g_test_run();
}
