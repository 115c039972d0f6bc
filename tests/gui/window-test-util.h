/* SPDX-License-Identifier: GPL-3.0-or-later */
/* window-test-util.h — what the window's GUI tests share: starting GTK and the
 * application's translations, turning the main loop until something holds, a window
 * made and destroyed, finding a part of the window by its template id or a row of
 * its History page, the toast it shows, the run form set for a small run, the History page's order
 * checked against a reload, and starting every test from the default settings. Not
 * for widget tests that build no window. */
#pragma once

#include "tdm-window.h"
#include "tdm-run-item.h"
#include "tdm-device-row.h"
#include "tdm-scaling.h"
#include "frame-test-util.h"

G_BEGIN_DECLS

/* GTK and libadwaita started for a test, then the application's translations and its
 * uninstalled resources. The caller sets its environment (LC_ALL, XDG_DATA_HOME…)
 * before. */
void     window_test_init (int *argc, char ***argv);

/* Turns the main loop until cond(data) holds; `seconds` only bounds a hung run (no
 * assertion depends on how long it takes). Returns whether cond held. */
gboolean wait_for       (gboolean (*cond) (gpointer), gpointer data, double seconds);
/* Runs whatever the main loop has ready, without blocking. */
void     drain          (void);
/* Turns the main loop `iterations` times with a timer running (below GTK's redraw in
 * priority), so what is queued runs. It promises no frame: a test that then reads
 * sizes, folds or pixels waits with wait_for_rest() (frame-test-util.h). */
void     settle         (guint iterations);
/* A new window, shown, its form loaded (wait_for_form); the caller holds a reference
 * (see destroy_window). */
TdmWindow *present_window (void);
/* Turns the main loop until the window's run form has listed the devices and read
 * its dataset, or failed to (both wait for the window's first frame, so the window
 * must be shown). Bounded by a count of main-loop events, not by time. */
void     wait_for_form  (TdmWindow *window);
/* Destroys a window the test holds a reference to, drains the loop, and asserts that
 * dropping the reference finalizes it (nothing else keeps it alive). */
void     destroy_window (TdmWindow *window);
/* The same, dropping the reference without asserting that it was the last. */
void     drop_window    (TdmWindow *window);
/* A part of the window by its id, in the window's template or in its run form's. */
gpointer window_child   (TdmWindow *window, const char *name);
/* A part of a page of the window by its id in the page's own template (the devices
 * page's "timeline", the predictions page's "gallery"). */
gpointer template_child (gpointer widget, const char *name);
/* The text of the toast the window shows now, its labels one a line ("" when none
 * shows; a toast added while another shows waits its turn, as on screen). */
char    *toast_text     (TdmWindow *window);
/* The History page's row (below `widget`) that shows `item`, with its actions as the
 * row's menu gives them ("run.open", "run.delete"…); NULL where none does. */
GtkWidget *history_row  (gpointer widget, TdmRunItem *item);
/* The network drop-down's "Custom" entry: after the engine's built-in networks. */
guint    window_custom_network (void);
/* The run's configuration as the form would start it (asserted to build). */
TdmConfig *window_config (TdmWindow *window);
/* Every GSettings key back to its default. */
void     reset_settings (void);
/* Removes a folder and everything under it. */
void     remove_folder  (const char *dir);
/* This machine's devices less its GPUs: the CPU alone, for a window's device list. */
GArray  *cpu_devices    (void);
/* The window's CPU row in its device picker, once the form has listed the devices
 * (wait_for_form). */
TdmDeviceRow *cpu_row   (TdmWindow *window);
/* The run form set for a small run: the CPU with `workers` workers, `dataset`, the
 * custom network fc16,relu,fc10, `batch` and `epochs`; asserts that Start becomes
 * enabled. */
void     choose_small_run (TdmWindow *window, int workers, const char *dataset, int batch,
                           int epochs);
/* Conditions for wait_for(): Start is enabled; no run is going; a history store is
 * not loading. */
gboolean can_start      (gpointer window);
gboolean not_running    (gpointer window);
gboolean not_loading    (gpointer store);
/* The Scaling page's controls set as a person sets them: its mode and steps. */
void     choose_sweep   (TdmWindow *window, TdmScalingMode mode, int steps);
/* Whether the window's sweep runs, as the Scaling page shows it: its Cancel button
 * (win.scaling-cancel) is enabled; and the opposite, for wait_for(). */
gboolean sweep_running  (gpointer window);
gboolean sweep_over     (gpointer window);
/* The History page's reload, as its button does it: asserts that the folder read
 * again lists the same records in the same order as the window listed them live. */
void     assert_reload_keeps_order (TdmWindow *window);

G_END_DECLS
