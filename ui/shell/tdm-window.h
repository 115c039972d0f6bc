/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window.h: Tandem's main window.
 *
 * The choices for a run on the left (dataset, network, devices, batch size, epochs,
 * optimizer, learning rate, strategy), the live charts on the right, and Start,
 * Pause and Stop in the header bar as the window actions win.start, win.pause and
 * win.stop. The window turns its controls into a TdmConfig, runs it as a TdmRun on a
 * worker thread and feeds the events to its TdmDashboard. It remembers the last
 * choices in GSettings.
 */

#pragma once

#include <adwaita.h>

#include "tdm-application.h"
#include "tdm-history-store.h"

G_BEGIN_DECLS

#define TDM_TYPE_WINDOW (tdm_window_get_type ())

G_DECLARE_FINAL_TYPE (TdmWindow, tdm_window, TDM, WINDOW, AdwApplicationWindow)

/* `app` may be NULL (tests). */
TdmWindow *tdm_window_new          (TdmApplication *app);

/* Replaces the device list (an array of TdmDeviceInfo) with another, such as a
 * made-up set of GPUs in a test; the window lists tdm_device_list() otherwise. */
void       tdm_window_set_devices  (TdmWindow      *self,
                                    GArray         *devices);

/* Properties "running" (a run's thread is alive) and "can-start" (the choices make a
 * run that can start now). */
gboolean   tdm_window_get_running  (TdmWindow      *self);
gboolean   tdm_window_get_can_start (TdmWindow     *self);

/* Runs started from now on stop after this many steps (0: they run every epoch), as
 * TdmConfig.max_steps does; for benchmarks, so the window trains exactly what
 * tandem-train --max-steps does. Not a setting and not shown. */
void       tdm_window_set_max_steps (TdmWindow     *self,
                                     long           max_steps);

/* Presentation mode (F11, the menu; Escape leaves it): fullscreen, larger text, the
 * loss chart enlarged, high-contrast phase colours, the pace control shown. */
gboolean   tdm_window_get_presentation (TdmWindow  *self);

/* The views' pages: "charts", "devices", "predictions", "scaling", "history". */
gboolean   tdm_window_has_page      (const char    *name);
void       tdm_window_set_page      (TdmWindow     *self,
                                     const char    *name);

/* Shows a short notice at the bottom of the window that goes away by itself. */
void       tdm_window_toast         (TdmWindow     *self,
                                     const char    *text);

/* The checkpoint "Export ONNX…" and Save write (the one open for classifying, else
 * the last run's, else the newest run kept in the history), or NULL while there is
 * none. */
char      *tdm_window_get_run_checkpoint (TdmWindow *self);
/* Writes that checkpoint as an ONNX model at path (tdm_onnx_export_checkpoint); a
 * toast names the file written, or says why nothing was. */
gboolean   tdm_window_export_onnx   (TdmWindow     *self,
                                     const char    *path);

/* Save (Ctrl+S): a copy of that checkpoint at path. */
gboolean   tdm_window_save_network  (TdmWindow     *self,
                                     const char    *path,
                                     GError       **error);
/* Where the run `run_id` of the history keeps its trained network (whether or not it
 * is there); NULL for an id that is not one. */
char      *tdm_window_weights_path  (TdmWindow     *self,
                                     const char    *run_id);
/* Resumes the run of `checkpoint` where it stopped (parameters, optimizer state,
 * epoch and step), with the settings it was saved with, on the devices ticked in the
 * form, until `epochs` (0: the saved run's); the Open dialog and History's Resume
 * end here. FALSE with the reason when it cannot start. */
gboolean   tdm_window_resume        (TdmWindow     *self,
                                     const char    *checkpoint,
                                     int            epochs,
                                     GError       **error);

/* The run history the window records into and lists on its History page. */
TdmHistoryStore *tdm_window_get_history (TdmWindow   *self);
/* The History page (for the window's view stack and for tests). */
GtkWidget *tdm_window_get_history_view  (TdmWindow     *self);
/* Whether "compare with one device" is under way, and what its last comparison
 * measured (tdm_compare_parameters; NaN before any). */
gboolean   tdm_window_get_comparing     (TdmWindow     *self);
double     tdm_window_get_compare_difference (TdmWindow *self);
/* Whether "compare strategies" (win.compare-strategies: `main`, then `allreduce`,
 * then both side by side on the Devices timeline) is under way. */
gboolean   tdm_window_get_comparing_strategies (TdmWindow *self);

G_END_DECLS
