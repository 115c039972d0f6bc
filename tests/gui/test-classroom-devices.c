/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-classroom-devices.c — part of test-classroom: the Devices page through whole
 * runs on two CPU workers and the synthetic set, one of each strategy. It is checked
 * on what it holds (the events the run sent, its widgets' state), never on pixels or
 * time: the timeline shows every phase of both strategies, the batch strip's shards
 * add up to the batch, the confusion matrix sums to the test set and its diagonal
 * gives the accuracy the run reported, the memory estimate made before Start is
 * within 10 % of the peak the run measured; the phase table's means; and a run that
 * cannot fit said so before Start, with the largest batch that fits.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <adwaita.h>

#include "tdm-batch-strip.h"
#include "tdm-confusion-view.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-device.h"
#include "tdm-devices-page.h"
#include "tdm-memory.h"
#include "tdm-network.h"
#include "tdm-prediction-gallery.h"
#include "tdm-predictions-page.h"
#include "tdm-run-form.h"
#include "tdm-run.h"
#include "tdm-spec-entry.h"
#include "tdm-timeline.h"
#include "tdm-window.h"
#include "test-classroom.h"
#include "window-test-util.h"

/* ---- helpers ---------------------------------------------------------------- */

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
    /* The same integer counts divided (the epoch's accuracy is a double): only the
     * division's rounding, ~1e-16, on any CPU. */
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

void
test_classroom_add_devices(void)
{
  g_test_add_func("/classroom/devices/main", test_devices_main);
  g_test_add_func("/classroom/devices/allreduce", test_devices_allreduce);
  g_test_add_func("/classroom/devices/phase-means", test_devices_phase_means);
  g_test_add_func("/classroom/memory-warning", test_memory_warning);
}
