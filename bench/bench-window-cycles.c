/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-window-cycles.c — the window's memory over many Start/Stop cycles (nothing
 * may be kept per run): the real TdmWindow, cnn on the synthetic set on two CPU
 * workers, Start, Stop after the first steps arrive, wait until the run is gone, again. Prints VmRSS
 * after the first cycle and every tenth, and the last against the first. The engine
 * alone is bench-cycles. A benchmark, not a test: it asserts nothing. Needs a display:
 *   tests/gui/xvfb-run-test.sh build/bench/bench-window-cycles [--runs 200]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gtk/gtk.h>

#include "tdm-application.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device-picker.h"
#include "tdm-device-row.h"
#include "tdm-device.h"
#include "tdm-events.h"
#include "tdm-run.h"
#include "tdm-run-form.h"
#include "tdm-window.h"

static gint64
rss_kib(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/self/status", &text, NULL, NULL))
    return -1;
  const char *line = strstr(text, "VmRSS:");
  return line != NULL ? g_ascii_strtoll(line + 6, NULL, 10) : -1;
}

static gpointer
form_child(TdmWindow *window, const char *name)
{
  GObject *form = gtk_widget_get_template_child(GTK_WIDGET(window), TDM_TYPE_WINDOW, "sidebar");
  return gtk_widget_get_template_child(GTK_WIDGET(form), TDM_TYPE_RUN_FORM, name);
}

static gboolean
keep_going(gpointer data)
{
  return G_SOURCE_CONTINUE;
}

static gboolean
iterate_until(gboolean (*cond)(gpointer), gpointer data, double seconds)
{
  gint64 end = g_get_monotonic_time() + (gint64)(seconds * G_USEC_PER_SEC);
  guint wake = g_timeout_add(10, keep_going, NULL);
  while (!cond(data) && g_get_monotonic_time() < end)
    g_main_context_iteration(NULL, TRUE);
  g_source_remove(wake);
  return cond(data);
}

static gboolean
can_start(gpointer data)
{
  return tdm_window_get_can_start(data);
}

static gboolean
not_running(gpointer data)
{
  return !tdm_window_get_running(data);
}

static int steps_seen;

static gboolean
on_run_event(GSignalInvocationHint *hint, guint n_values, const GValue *values, gpointer data)
{
  const TdmEvent *event = g_value_get_pointer(&values[1]);
  if (event->kind == TDM_EVENT_STEP)
    steps_seen++;
  return TRUE;
}

static gboolean
stepped(gpointer data)
{
  return steps_seen > 0 || !tdm_window_get_running(data);
}

int
main(int argc, char **argv)
{
  int runs = 200;
  for (int i = 1; i + 1 < argc; i += 2)
    if (strcmp(argv[i], "--runs") == 0)
      runs = atoi(argv[i + 1]);

  g_setenv("GSETTINGS_BACKEND", "memory", TRUE);
  tdm_application_init_uninstalled();
  if (!gtk_init_check()) {
    fprintf(stderr, "bench-window-cycles: no display; run it under tests/gui/xvfb-run-test.sh\n");
    return 77;
  }
  g_type_class_unref(g_type_class_ref(TDM_TYPE_RUN));
  g_signal_add_emission_hook(g_signal_lookup("event", TDM_TYPE_RUN), 0, on_run_event, NULL,
                             NULL);

  TdmWindow *window = g_object_ref_sink(tdm_window_new(NULL));
  g_autoptr(GArray) devices = tdm_device_list();
  tdm_window_set_devices(window, devices);
  gtk_window_present(GTK_WINDOW(window));
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows(form_child(window, "device_picker"));
  for (guint r = 0; r < rows->len; r++) {
    TdmDeviceRow *row = rows->pdata[r];
    tdm_device_row_set_active(row, tdm_device_row_is_cpu(row));
    if (tdm_device_row_is_cpu(row))
      tdm_device_row_set_workers(row, 2);
  }
  tdm_dataset_chooser_set_source(form_child(window, "dataset_chooser"), "synthetic");
  gtk_drop_down_set_selected(form_child(window, "network_dropdown"), 1);
  if (!iterate_until(can_start, window, 60)) {
    fprintf(stderr, "bench-window-cycles: the window cannot start\n");
    return 1;
  }

  printf("window: cnn on synthetic, cpu:2, %d Start/Stop cycles\n%6s %10s\n", runs, "run",
         "VmRSS MiB");
  gint64 first = 0, last = 0, most = 0;
  for (int i = 1; i <= runs; i++) {
    steps_seen = 0;
    if (!gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL))
      return 1;
    iterate_until(stepped, window, 120);
    gtk_widget_activate_action(GTK_WIDGET(window), "win.stop", NULL);
    iterate_until(not_running, window, 120);
    iterate_until(can_start, window, 60);
    last = rss_kib();
    most = MAX(most, last);
    if (i == 1)
      first = last;
    if (i == 1 || i % 10 == 0) {
      printf("%6d %10.1f\n", i, last / 1024.0);
      fflush(stdout);
    }
  }
  printf("first %.1f MiB, last %.1f MiB (%.2f×), highest %.1f MiB\n", first / 1024.0,
         last / 1024.0, (double)last / first, most / 1024.0);
  gtk_window_destroy(GTK_WINDOW(window));
  g_object_unref(window);
  return 0;
}
