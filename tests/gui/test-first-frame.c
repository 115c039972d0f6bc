/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-first-frame.c — the window paints before it reads the dataset or lists the
 * devices. A loader the test holds (tdm_dataset_chooser_set_loader()) stands in for
 * tdm_dataset_open(): it counts its calls and waits on a latch, so the order of the
 * first frame and the load is counted, not timed. While the load is held the window
 * shows its saved choices and says it is reading the dataset, with Start greyed; a
 * load that fails is said once; a window closed during the load goes, and the load's
 * end finds no window to call back into. */
#include <string.h>
#include <adwaita.h>
#include "tdm-dashboard.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-run-form.h"
#include "tdm-window.h"
#include "window-test-util.h"

typedef struct {
  GMutex lock;
  GCond cond;
  gboolean open;              /* the latch: the loader returns once it is */
  gboolean fail;              /* the loader fails instead of reading */
  int loads;                  /* loader calls, atomic */
  int paints;                 /* the window's frames painted, atomic */
  int paints_at_load;         /* frames painted when the loader was called */
  int loads_at_first_paint;   /* -1 until the first frame */
  gboolean start_at_first_paint;
  char *dataset_at_first_paint;
  GCancellable *cancellable;  /* the load's, while it is held */
} Latch;

static TdmDatasetPair *
held_loader(const char *source, GCancellable *cancellable, gpointer data, GError **error)
{
  Latch *latch = data;

  g_mutex_lock(&latch->lock);
  latch->paints_at_load = g_atomic_int_get(&latch->paints);
  latch->cancellable = cancellable;
  g_atomic_int_inc(&latch->loads);
  while (!latch->open)
    g_cond_wait(&latch->cond, &latch->lock);
  latch->cancellable = NULL;
  g_mutex_unlock(&latch->lock);

  if (latch->fail) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT, "%s: no such dataset here", source);
    return NULL;
  }
  return tdm_dataset_open(source, error);
}

static void
open_latch(Latch *latch)
{
  g_mutex_lock(&latch->lock);
  latch->open = TRUE;
  g_cond_broadcast(&latch->cond);
  g_mutex_unlock(&latch->lock);
}

static gboolean
loader_called(gpointer data)
{
  return g_atomic_int_get(&((Latch *)data)->loads) > 0;
}

/* On the frame clock's "paint": after GDK's own handler has drawn the surface, before
 * any "after-paint" handler runs. */
static void
painted(GdkFrameClock *clock, gpointer data)
{
  Latch *latch = data;
  TdmWindow *window = g_object_get_data(G_OBJECT(clock), "test-window");

  if (g_atomic_int_add(&latch->paints, 1) > 0)
    return;
  latch->loads_at_first_paint = g_atomic_int_get(&latch->loads);
  latch->start_at_first_paint = tdm_window_get_can_start(window);
  latch->dataset_at_first_paint =
      g_strdup(tdm_dataset_chooser_get_source(window_child(window, "dataset_chooser")));
}

static void
mapped(GtkWidget *window, gpointer data)
{
  GdkFrameClock *clock = gtk_widget_get_frame_clock(window);

  g_object_set_data(G_OBJECT(clock), "test-window", window);
  g_signal_connect(clock, "paint", G_CALLBACK(painted), data);
}

/* A window, not shown yet, whose dataset the latch reads; "synthetic" is the saved
 * choice. */
static TdmWindow *
latched_window(Latch *latch)
{
  g_autoptr(GSettings) settings = g_settings_new("io.github.tandem.Tandem");
  TdmWindow *window;

  reset_settings();
  g_settings_set_string(settings, "dataset", "synthetic");
  window = g_object_ref(tdm_window_new(NULL));
  tdm_dataset_chooser_set_loader(window_child(window, "dataset_chooser"), held_loader, latch);
  g_signal_connect(window, "map", G_CALLBACK(mapped), latch);
  return window;
}

static const char *
empty_page(TdmWindow *window, const char *what)
{
  AdwStatusPage *page = ADW_STATUS_PAGE(gtk_widget_get_template_child(
      window_child(window, "dashboard"), TDM_TYPE_DASHBOARD, "empty_page"));

  return g_str_equal(what, "title") ? adw_status_page_get_title(page)
                                    : adw_status_page_get_description(page);
}

/* The line under the dataset's drop-down. */
static const char *
chooser_says(TdmWindow *window)
{
  return gtk_label_get_label(GTK_LABEL(gtk_widget_get_template_child(
      window_child(window, "dataset_chooser"), TDM_TYPE_DATASET_CHOOSER, "info_label")));
}

static guint
device_rows(TdmWindow *window)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows(window_child(window, "device_picker"));

  return rows->len;
}

static gboolean
devices_listed(gpointer window)
{
  return device_rows(window) > 0;
}

static void
latch_clear(Latch *latch)
{
  g_free(latch->dataset_at_first_paint);
  g_mutex_clear(&latch->lock);
  g_cond_clear(&latch->cond);
}

static void
test_paints_before_reading(void)
{
  Latch latch = {.loads_at_first_paint = -1};
  TdmWindow *window = latched_window(&latch);

  /* Nothing is read while the window is being made. */
  g_assert_cmpint(g_atomic_int_get(&latch.loads), ==, 0);
  gtk_window_present(GTK_WINDOW(window));
  g_assert_true(wait_for(loader_called, &latch, 60));

  /* The first frame came first, showing the saved choice with Start greyed. */
  g_assert_cmpint(g_atomic_int_get(&latch.paints), >=, 1);
  g_assert_cmpint(latch.loads_at_first_paint, ==, 0);
  g_assert_cmpint(latch.paints_at_load, >=, 1);
  g_assert_false(latch.start_at_first_paint);
  g_assert_cmpstr(latch.dataset_at_first_paint, ==, "synthetic");

  /* The devices come in an idle after that frame; the dataset is still held. */
  g_assert_true(wait_for(devices_listed, window, 60));
  g_assert_true(tdm_run_form_get_loading(window_child(window, "sidebar")));
  g_assert_false(tdm_window_get_can_start(window));
  g_assert_cmpstr(empty_page(window, "title"), ==, "Getting Ready");
  g_assert_cmpstr(empty_page(window, "description"), ==, "Reading the dataset…");
  g_assert_cmpstr(chooser_says(window), ==, "Reading the dataset…");

  /* Released, the form becomes ready: one load, no second read of the same set. */
  open_latch(&latch);
  wait_for_form(window);
  g_assert_true(tdm_dataset_chooser_get_ready(window_child(window, "dataset_chooser")));
  g_assert_cmpint(g_atomic_int_get(&latch.loads), ==, 1);
  choose_small_run(window, 1, "synthetic", 100, 1);
  g_assert_cmpint(g_atomic_int_get(&latch.loads), ==, 1);

  destroy_window(window);
  latch_clear(&latch);
}

static void
test_error_said_once(void)
{
  Latch latch = {.loads_at_first_paint = -1, .open = TRUE, .fail = TRUE};
  TdmWindow *window = latched_window(&latch);
  const char *error;

  gtk_window_present(GTK_WINDOW(window));
  wait_for_form(window);
  settle(20);

  error = tdm_dataset_chooser_get_error(window_child(window, "dataset_chooser"));
  g_assert_nonnull(error);
  g_assert_nonnull(strstr(error, "no such dataset here"));
  g_assert_cmpint(g_atomic_int_get(&latch.loads), ==, 1);
  g_assert_false(tdm_window_get_can_start(window));
  /* Said where the dataset is chosen and where Start is, not "getting ready". */
  g_assert_cmpstr(chooser_says(window), ==, error);
  g_assert_cmpstr(empty_page(window, "title"), ==, "Settings Needed");
  g_assert_cmpstr(empty_page(window, "description"), ==, error);

  destroy_window(window);
  latch_clear(&latch);
}

/* The last reference to a task may go on its worker thread, after its callback: so a
 * weak reference, read with the loop turning (no wake-up comes from that thread). */
static gboolean
gone(gpointer data)
{
  GObject *object = g_weak_ref_get(data);

  if (object == NULL)
    return TRUE;
  g_object_unref(object);
  return FALSE;
}

static void
test_close_during_load(void)
{
  Latch latch = {.loads_at_first_paint = -1};
  TdmWindow *window = latched_window(&latch);
  GCancellable *cancellable;
  GWeakRef task_cancellable;

  gtk_window_present(GTK_WINDOW(window));
  g_assert_true(wait_for(loader_called, &latch, 60));
  g_mutex_lock(&latch.lock);
  cancellable = latch.cancellable;
  g_mutex_unlock(&latch.lock);
  g_assert_nonnull(cancellable);
  /* The task holds it while the loader waits; it goes with the task. */
  g_weak_ref_init(&task_cancellable, cancellable);

  /* Closed mid-load: nothing keeps the window, and its load is cancelled. */
  destroy_window(window);
  g_assert_false(gone(&task_cancellable));
  g_assert_true(g_cancellable_is_cancelled(cancellable));

  /* The load ends after the window: its result is dropped, the task freed. */
  open_latch(&latch);
  g_assert_true(wait_for(gone, &task_cancellable, 60));
  g_weak_ref_clear(&task_cancellable);
  latch_clear(&latch);
}

int
main(int argc, char **argv)
{
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  window_test_init(&argc, &argv);

  g_test_add_func("/first-frame/paints-before-reading", test_paints_before_reading);
  g_test_add_func("/first-frame/error-said-once", test_error_said_once);
  g_test_add_func("/first-frame/close-during-load", test_close_during_load);
  return g_test_run();
}
