/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-first-frame.c — how soon the window's first frame comes, and what it cost.
 *
 * Makes the real TdmWindow with the saved settings (Fashion-MNIST by default) and
 * shows it; at the first "after-paint" of its frame clock it notes the wall time and
 * the process's CPU seconds since main(), then again when the form has read its
 * dataset and listed its devices. --eager does what the window did before the wait
 * for the first frame: the dataset's thread started and the devices listed while the
 * window is made, before it is shown; so both orders are measured by one binary. A
 * benchmark, not a test: it asserts nothing. Load the machine from outside to see a
 * busy desktop (bench/NOTES.md, "First frame"). Needs a display:
 *   tests/gui/xvfb-run-test.sh build/bench/bench-first-frame [--eager]
 */
#define _GNU_SOURCE  /* RUSAGE_THREAD */

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <adwaita.h>

#include "tdm-application.h"
#include "tdm-dataset-chooser.h"
#include "tdm-device.h"
#include "tdm-run-form.h"
#include "tdm-window.h"

static gint64 started;

static double
cpu_seconds(int who)
{
  struct rusage usage;

  getrusage(who, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

static void
note(const char *what)
{
  printf("%-26s %8.1f ms wall %7.3f s CPU, %7.3f s of it the main thread's\n", what,
         (g_get_monotonic_time() - started) / 1000.0, cpu_seconds(RUSAGE_SELF),
         cpu_seconds(RUSAGE_THREAD));
}

static void
first_paint(GdkFrameClock *clock, gpointer data)
{
  gboolean *painted = data;

  if (*painted)
    return;
  *painted = TRUE;
  note("first frame");
}

static void
mapped(GtkWidget *window, gpointer data)
{
  g_signal_connect(gtk_widget_get_frame_clock(window), "after-paint", G_CALLBACK(first_paint),
                   data);
}

static gpointer
form_child(TdmWindow *window, const char *name)
{
  GObject *form = gtk_widget_get_template_child(GTK_WIDGET(window), TDM_TYPE_WINDOW, "sidebar");

  return name == NULL ? (gpointer)form
                      : gtk_widget_get_template_child(GTK_WIDGET(form), TDM_TYPE_RUN_FORM, name);
}

int
main(int argc, char **argv)
{
  gboolean eager = FALSE;
  gboolean painted = FALSE;
  GOptionEntry entries[] = {
    {"eager", 0, 0, G_OPTION_ARG_NONE, &eager,
     "Read the dataset and list the devices before the window is shown", NULL},
    {NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new(NULL);
  g_autoptr(GError) error = NULL;
  TdmWindow *window;

  started = g_get_monotonic_time();
  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    g_printerr("bench-first-frame: %s\n", error->message);
    return 2;
  }
  gtk_init();
  adw_init();
  tdm_application_init_i18n();
  tdm_application_init_uninstalled();
  note("GTK and libadwaita up");

  window = g_object_ref_sink(tdm_window_new(NULL));
  if (eager) {
    g_autoptr(GArray) devices = tdm_device_list();

    tdm_dataset_chooser_hold(form_child(window, "dataset_chooser"), FALSE);
    tdm_window_set_devices(window, devices);
  }
  note("window made");
  g_signal_connect(window, "map", G_CALLBACK(mapped), &painted);
  gtk_window_present(GTK_WINDOW(window));
  while (!painted || tdm_run_form_get_loading(form_child(window, NULL)))
    g_main_context_iteration(NULL, TRUE);
  note("dataset read, devices in");

  gtk_window_destroy(GTK_WINDOW(window));
  g_object_unref(window);
  return 0;
}
