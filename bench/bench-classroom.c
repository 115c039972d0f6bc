/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-classroom.c: what the classroom views cost the main loop.
 *
 * For each of the Devices and Predictions pages' drawing widgets (TdmTimeline,
 * TdmBatchStrip, TdmConfusionView, TdmPredictionGallery, TdmScalingChart), filled
 * with the largest content a run gives them (8 devices, 4 steps of 8 phases each, 8
 * thumbnails per device, 32 classes, 32 test images, 8 scaling points), at 800x400:
 * the time to take its snapshot and draw it onto an image surface (a redraw; target
 * under 5 ms), and the time the window spends on one event of its kind (the update
 * that precedes a redraw: copying the event, making thumbnails, the Devices page's
 * phase table). Median of 100, thread CPU time beside the wall clock. Not a test; it
 * needs a display: tests/gui/xvfb-run-test.sh build/bench/bench-classroom
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gtk/gtk.h>

#include "tdm-batch-strip.h"
#include "tdm-confusion-view.h"
#include "tdm-devices-page.h"
#include "tdm-prediction-gallery.h"
#include "tdm-scaling-chart.h"
#include "tdm-timeline.h"
#include "tdm-bench.h"

#define N_FRAMES 100
#define WIDTH 800
#define HEIGHT 400
#define DEVICES 8

static TdmPhasesEvent
make_phases(long step)
{
  static const TdmPhase order[] = {TDM_PHASE_FORWARD, TDM_PHASE_BACKWARD, TDM_PHASE_WAIT,
                                   TDM_PHASE_REDUCE, TDM_PHASE_WAIT, TDM_PHASE_UPDATE,
                                   TDM_PHASE_BROADCAST, TDM_PHASE_WAIT};
  TdmPhasesEvent e = {.step = step, .replicas = DEVICES};

  for (int r = 0; r < DEVICES; r++) {
    float t = 0;

    e.device[r].spans = G_N_ELEMENTS(order);
    for (int i = 0; i < (int)G_N_ELEMENTS(order); i++) {
      e.device[r].span[i].phase = order[i];
      e.device[r].span[i].start_ms = t;
      t += 0.5f + 0.1f * ((r + i) % 5);
      e.device[r].span[i].end_ms = t;
    }
  }
  return e;
}

static TdmBatchEvent
make_batch(const TdmDataset *train, long step)
{
  TdmBatchEvent e = {.step = step, .batch = 1024, .replicas = DEVICES};

  for (int r = 0; r < DEVICES; r++) {
    e.device[r].offset = r * 128;
    e.device[r].size = 128;
    e.device[r].shown = TDM_BATCH_SAMPLES_SHOWN;
    for (int k = 0; k < TDM_BATCH_SAMPLES_SHOWN; k++) {
      int index = (int)((step * 1024 + r * 128 + k) % train->count);

      e.device[r].index[k] = index;
      e.device[r].label[k] = train->labels[index];
    }
  }
  return e;
}

static TdmPredictionsEvent *
make_predictions(int classes, int test_count)
{
  TdmPredictionsEvent *e = g_new0(TdmPredictionsEvent, 1);

  e->epoch = 1;
  e->classes = classes;
  e->has_matrix = TRUE;
  e->test_count = test_count;
  for (int i = 0; i < test_count; i++) {
    int truth = i % classes, predicted = (i % 7 == 0) ? (truth + 1) % classes : truth;

    e->matrix[truth][predicted]++;
    e->correct += truth == predicted;
  }
  for (int c = 0; c < classes; c++)
    g_snprintf(e->class_name[c], TDM_CLASS_NAME_SIZE, "class %d", c);
  e->samples = TDM_PREDICTION_SAMPLES;
  for (int i = 0; i < TDM_PREDICTION_SAMPLES; i++) {
    e->sample[i].index = i * 7;
    e->sample[i].truth = (uint8_t)((i * 7) % classes);
    e->sample[i].predicted = (uint8_t)((i * 7 + (i < 8)) % classes);
  }
  return e;
}

/* Median milliseconds (wall, thread CPU) of one redraw: the widget's snapshot, and
 * its render node drawn onto an image surface as the Cairo renderer would. */
static void
time_redraw(const char *name, GtkWidget *widget)
{
  cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, WIDTH, HEIGHT);
  cairo_t *cr = cairo_create(surface);
  double wall[N_FRAMES], cpu[N_FRAMES];

  for (int i = -5; i < N_FRAMES; i++) {
    gint64 t0 = g_get_monotonic_time();
    double c0 = tdm_bench_thread_cpu_ms();
    GtkSnapshot *snapshot = gtk_snapshot_new();
    GskRenderNode *node;

    GTK_WIDGET_GET_CLASS(widget)->snapshot(widget, snapshot);
    node = gtk_snapshot_free_to_node(snapshot);
    if (node != NULL) {
      gsk_render_node_draw(node, cr);
      gsk_render_node_unref(node);
    }
    cairo_surface_flush(surface);
    if (i >= 0) { /* the first five warm fonts and glyph caches */
      cpu[i] = tdm_bench_thread_cpu_ms() - c0;
      wall[i] = (g_get_monotonic_time() - t0) / 1e3;
    }
  }
  qsort(wall, N_FRAMES, sizeof wall[0], tdm_bench_compare_doubles);
  qsort(cpu, N_FRAMES, sizeof cpu[0], tdm_bench_compare_doubles);
  printf("%-36s %8.3f %8.3f %8.3f\n", name, wall[N_FRAMES / 2], wall[N_FRAMES * 9 / 10],
         cpu[N_FRAMES / 2]);
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
}

typedef void (*UpdateFunc)(gpointer data, int i);

static void
time_update(const char *name, UpdateFunc update, gpointer data)
{
  double wall[N_FRAMES], cpu[N_FRAMES];

  for (int i = -5; i < N_FRAMES; i++) {
    gint64 t0 = g_get_monotonic_time();
    double c0 = tdm_bench_thread_cpu_ms();

    update(data, i + 5);
    if (i >= 0) {
      cpu[i] = tdm_bench_thread_cpu_ms() - c0;
      wall[i] = (g_get_monotonic_time() - t0) / 1e3;
    }
  }
  qsort(wall, N_FRAMES, sizeof wall[0], tdm_bench_compare_doubles);
  qsort(cpu, N_FRAMES, sizeof cpu[0], tdm_bench_compare_doubles);
  printf("%-36s %8.3f %8.3f %8.3f\n", name, wall[N_FRAMES / 2], wall[N_FRAMES * 9 / 10],
         cpu[N_FRAMES / 2]);
}

typedef struct {
  GtkWidget *timeline, *strip, *confusion, *gallery, *page;
  TdmDatasetPair *data;
  TdmPredictionsEvent *predictions;
} Views;

static void
update_timeline(gpointer data, int i)
{
  Views *v = data;
  TdmPhasesEvent e = make_phases(i);

  tdm_timeline_add_phases(TDM_TIMELINE(v->timeline), &e);
}

static void
update_strip(gpointer data, int i)
{
  Views *v = data;
  TdmBatchEvent e = make_batch(v->data->train, i);

  tdm_batch_strip_set_batch(TDM_BATCH_STRIP(v->strip), &e, v->data->train);
}

static void
update_confusion(gpointer data, int i)
{
  Views *v = data;

  tdm_confusion_view_set_predictions(TDM_CONFUSION_VIEW(v->confusion), v->predictions);
}

static void
update_gallery(gpointer data, int i)
{
  Views *v = data;

  tdm_prediction_gallery_set_predictions(TDM_PREDICTION_GALLERY(v->gallery), v->predictions,
                                         v->data->test);
}

static void
update_page_phases(gpointer data, int i)
{
  Views *v = data;
  TdmEvent e = {.kind = TDM_EVENT_PHASES};

  e.phases = make_phases(i);
  tdm_devices_page_handle_event(TDM_DEVICES_PAGE(v->page), &e, v->data);
}

static GtkWidget *
shown(GtkWidget *widget)
{
  GtkWidget *window = gtk_window_new();

  gtk_window_set_default_size(GTK_WINDOW(window), WIDTH, HEIGHT);
  gtk_window_set_child(GTK_WINDOW(window), widget);
  gtk_window_present(GTK_WINDOW(window));
  return window;
}

int
main(int argc, char **argv)
{
  Views v = {0};
  GtkWidget *windows[6];
  GError *error = NULL;

  if (!gtk_init_check()) {
    fprintf(stderr, "bench-classroom: no display; run it under tests/gui/xvfb-run-test.sh\n");
    return 77;
  }
  v.data = tdm_dataset_open("synthetic", &error);
  if (v.data == NULL) {
    fprintf(stderr, "bench-classroom: %s\n", error->message);
    return 1;
  }

  v.timeline = tdm_timeline_new();
  v.strip = tdm_batch_strip_new();
  v.confusion = tdm_confusion_view_new();
  v.gallery = tdm_prediction_gallery_new();
  v.page = tdm_devices_page_new();
  GtkWidget *scaling = tdm_scaling_chart_new();
  windows[0] = shown(v.timeline);
  windows[1] = shown(v.strip);
  windows[2] = shown(v.confusion);
  windows[3] = shown(v.gallery);
  windows[4] = shown(scaling);
  windows[5] = shown(v.page);

  {
    TdmEvent started = {.kind = TDM_EVENT_STARTED};

    started.started.replicas = DEVICES;
    for (int r = 0; r < DEVICES; r++)
      g_snprintf(started.started.device[r], sizeof started.started.device[r], "cuda:%d", r);
    tdm_devices_page_handle_event(TDM_DEVICES_PAGE(v.page), &started, v.data);
  }
  for (int d = 1; d <= DEVICES; d++) {
    TdmScalingPoint p = {.index = d - 1, .count = DEVICES, .devices = d, .batch = 1024,
                         .steps = 200, .samples_per_second = 10000.0 * d * (1 - 0.05 * d),
                         .speedup = d * (1 - 0.05 * d), .efficiency = 1 - 0.05 * d,
                         .compute_ms = 10.0 / d, .comm_ms = 0.5 * d, .wait_ms = 0.2 * d};

    tdm_scaling_chart_add_point(TDM_SCALING_CHART(scaling), &p);
  }

  printf("Classroom views at %dx%d, %d devices (ms; median and p90 of %d, thread CPU median)\n",
         WIDTH, HEIGHT, DEVICES, N_FRAMES);
  printf("%-36s %8s %8s %8s\n", "", "median", "p90", "cpu med");

  /* Updates first: they also leave each view full for its redraw. */
  v.predictions = make_predictions(10, 10000);
  time_update("event: timeline add_phases", update_timeline, &v);
  time_update("event: batch strip set_batch", update_strip, &v);
  time_update("event: confusion set (10 classes)", update_confusion, &v);
  time_update("event: gallery set (32 images)", update_gallery, &v);
  time_update("event: Devices page PHASES", update_page_phases, &v);

  for (int i = 0; i < 50; i++)
    g_main_context_iteration(NULL, FALSE);

  time_redraw("redraw: timeline, 4 steps", v.timeline);
  time_redraw("redraw: batch strip, 64 thumbnails", v.strip);
  time_redraw("redraw: confusion, 10 classes", v.confusion);
  g_free(v.predictions);
  v.predictions = make_predictions(TDM_MAX_CONFUSION_CLASSES, 10000);
  update_confusion(&v, 0);
  time_redraw("redraw: confusion, 32 classes", v.confusion);
  time_redraw("redraw: gallery, 32 images", v.gallery);
  time_redraw("redraw: scaling chart, 8 points", scaling);

  for (guint i = 0; i < G_N_ELEMENTS(windows); i++)
    gtk_window_destroy(GTK_WINDOW(windows[i]));
  g_free(v.predictions);
  tdm_dataset_pair_free(v.data);
  return 0;
}
