/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-window-private.h: TdmWindow's fields and the helpers its source files share.
 *
 * tdm-window.c holds the run's life cycle, errors, files and the GObject; the
 * classroom side (memory estimate, pace, presentation mode, the Scaling page's
 * exports, the pages) is tdm-window-classroom.c; the run history,
 * tdm-window-history.c; the experiments ("compare with one device", "compare
 * strategies", the scaling sweep, the learning-rate tests),
 * tdm-window-experiments.c; the runs kept
 * (save, open and resume, each run's network), tdm-window-runs.c. Nothing outside ui/tdm-window*.c includes this.
 */

#pragma once

#include <adwaita.h>

#include "tdm-classify-view.h"
#include "tdm-dashboard.h"
#include "tdm-devices-page.h"
#include "tdm-experiment-runner.h"
#include "tdm-history-store.h"
#include "tdm-lr-find-view.h"
#include "tdm-predictions-page.h"
#include "tdm-run.h"
#include "tdm-run-form.h"
#include "tdm-scaling-page.h"
#include "tdm-window.h"

G_BEGIN_DECLS

struct _TdmWindow
{
  AdwApplicationWindow  parent_instance;

  /* Template children. */
  GtkButton            *sidebar_button;
  GtkButton            *start_button;
  GtkButton            *start_icon_button;
  GtkMenuButton        *primary_menu_button;
  GtkLabel             *start_label;
  GtkButton            *pause_button;
  GtkButton            *stop_button;
  AdwViewSwitcherTitle *window_title;
  AdwToastOverlay      *toast_overlay;
  AdwFlap              *flap;
  GtkRevealer          *error_revealer;
  GtkLabel             *error_label;
  TdmRunForm           *sidebar;
  AdwViewStack         *view_stack;
  AdwViewSwitcherBar   *switcher_bar;
  TdmDashboard         *dashboard;
  TdmDevicesPage       *devices_page;
  TdmPredictionsPage   *predictions_page;
  TdmScalingPage       *scaling_page;
  GtkBox               *history_slot;
  GtkRevealer          *pace_revealer;
  GtkSpinButton        *pace_spin;
  GtkLabel             *pace_unit_label;
  GtkButton            *step_button;

  gboolean              presentation;
  int                   grid_columns;       /* the chart grid's, outside presentation */

  GSettings            *settings;

  TdmSession           *session;         /* the run shown; the pages view it */
  TdmRun               *run;
  gboolean              run_failed;         /* an error was shown for this run */
  gboolean              run_stopped;
  long                  run_start_step;     /* the step it started (or resumed) at */
  long                  run_steps;          /* steps it took; −1 until it finished */
  gboolean              start_queued;       /* Start pressed while the run stopped */

  GtkNativeDialog      *chooser;

  gboolean              can_start;
  long                  max_steps;          /* for benchmarks: 0 runs every epoch */

  /* The form greys out the frame after a run starts (tdm_window_lock_form): the
   * frame clock and handler waiting for that frame to be painted, and a timeout in
   * case no frame comes (a window not shown). */
  GdkFrameClock        *lock_clock;
  gulong                lock_handler;
  guint                 lock_timeout;
  gint64                unlock_frame;       /* frame counter when last ungreyed, or −1 */

  GtkWindow            *classify_window;    /* made on first use */
  TdmClassifyView      *classify_view;
  char                 *last_weights;       /* the last run's kept network, or NULL */

  /* The run history (every run is recorded) and its page (tdm-window-history.c). */
  TdmHistoryStore      *history;
  GtkWidget            *history_view;

  /* The window's one experiment going or last gone (tdm-window-experiments.c):
   * "compare with one device", "compare strategies" or the scaling sweep the Scaling
   * page shows; the learning-rate tests under way, each shown in a window of its own;
   * the last "compare with one device"'s difference and words, and the network it
   * measured. */
  TdmExperimentRunner  *experiment;
  GPtrArray            *lr_finds;           /* TdmExperimentRunner * */
  double                compare_difference;
  char                 *compare_result;
  char                 *compare_network;
};

/* tdm-window.c */
void            tdm_window_update_state     (TdmWindow            *self);
void            tdm_window_show_error       (TdmWindow            *self,
                                             const char           *headline,
                                             const char           *detail);

/* Starts `config` as the window's run, recorded in the history under `record_name`
 * (NULL: its date), as a training of `runner`'s experiment when not NULL, going on
 * from the checkpoint `resume_path` when not NULL; its network is kept with its
 * History entry. FALSE after showing why not. */
gboolean        tdm_window_launch           (TdmWindow            *self,
                                             const TdmConfig      *config,
                                             const char           *record_name,
                                             TdmExperimentRunner  *runner,
                                             const char           *resume_path);
/* The classify window's view, made on first use. */
TdmClassifyView *tdm_window_get_classify_view (TdmWindow          *self);

/* tdm-window-files.c */
GtkFileChooser *tdm_window_new_chooser      (TdmWindow            *self,
                                             const char           *title,
                                             GtkFileChooserAction  action,
                                             const char           *accept_label);
void            tdm_window_add_filter       (GtkFileChooser       *chooser,
                                             const char           *name,
                                             const char           *mime_type,
                                             const char           *pattern);
void            tdm_window_export_chosen    (TdmWindow            *self,
                                             int                   response,
                                             GtkNativeDialog      *dialog);
/* The file chooser shown, if any, is gone. */
void            tdm_window_chooser_done     (TdmWindow            *self);
/* The file the chooser's `response` chose (NULL: none), the chooser gone. */
GFile          *tdm_window_chosen_file      (TdmWindow            *self,
                                             int                   response,
                                             GtkNativeDialog      *dialog);
/* The toast after writing `file`. */
void            tdm_window_toast_saved      (TdmWindow            *self,
                                             GFile                *file);
/* Asks where to write `checkpoint` as an ONNX model, and writes it there. */
void            tdm_window_ask_export_onnx  (TdmWindow            *self,
                                             const char           *checkpoint);
/* Actions: win.open-folder, win.export, win.export-chart, win.export-onnx. */
void            tdm_window_open_folder      (GtkWidget            *widget,
                                             const char           *action_name,
                                             GVariant             *parameter);
void            tdm_window_export           (GtkWidget            *widget,
                                             const char           *action_name,
                                             GVariant             *parameter);
void            tdm_window_export_chart     (GtkWidget            *widget,
                                             const char           *action_name,
                                             GVariant             *parameter);
void            tdm_window_export_onnx_chooser (GtkWidget         *widget,
                                                const char        *action_name,
                                                GVariant          *parameter);

/* tdm-window-history.c */
void            tdm_window_history_class_init (GtkWidgetClass     *widget_class);
void            tdm_window_history_init     (TdmWindow            *self);
void            tdm_window_history_dispose  (TdmWindow            *self);
/* `runner`'s scaling sweep is over (`error`: why it did not complete): the History
 * page lists its record, and a toast says so. */
void            tdm_window_history_sweep_done (TdmWindow          *self,
                                               TdmExperimentRunner *runner,
                                               const GError       *error);
/* `runner`'s learning-rate test is over: the History page lists its record. */
void            tdm_window_history_lr_find_done (TdmWindow        *self,
                                                 TdmExperimentRunner *runner);
/* `trained`: it took a step (a run that took none is not kept: its record is gone). */
void            tdm_window_history_run_done (TdmWindow            *self,
                                             TdmRun               *run,
                                             gboolean              trained);

/* tdm-window-runs.c: the actions it installs (win.save, win.open, win.resume-run,
 * win.classify-run, win.export-run-onnx), what init connects; a run is over (its
 * network kept, the oldest others past the limit let go); the kept networks held
 * to the limit again, `keep` (NULL: the newest) whatever its size; a checkpoint's
 * resume asked about in a dialog. */
void            tdm_window_runs_class_init  (GtkWidgetClass       *widget_class);
void            tdm_window_runs_init        (TdmWindow            *self);
void            tdm_window_runs_done        (TdmWindow            *self,
                                             TdmRun               *run);

/* tdm-window-experiments.c: the actions win.compare-one-device,
 * win.compare-strategies, win.scaling-run, win.scaling-cancel and win.lr-find;
 * whether a sweep is under way; the settings changed (a result of another network
 * says so). */
void            tdm_window_compare_one_device (GtkWidget          *widget,
                                               const char         *action_name,
                                               GVariant           *parameter);
void            tdm_window_compare_strategies (GtkWidget          *widget,
                                               const char         *action_name,
                                               GVariant           *parameter);
void            tdm_window_scaling_run      (GtkWidget            *widget,
                                             const char           *action_name,
                                             GVariant             *parameter);
void            tdm_window_scaling_cancel   (GtkWidget            *widget,
                                             const char           *action_name,
                                             GVariant             *parameter);
void            tdm_window_lr_find          (GtkWidget            *widget,
                                             const char           *action_name,
                                             GVariant             *parameter);
gboolean        tdm_window_get_scaling      (TdmWindow            *self);
void            tdm_window_experiments_settings_changed (TdmWindow *self);
void            tdm_window_experiments_init (TdmWindow            *self);
void            tdm_window_experiments_dispose (TdmWindow         *self);
void            tdm_window_experiments_finalize (TdmWindow        *self);

/* tdm-window-classroom.c: handlers the class installs, and what init connects. */
void            tdm_window_update_estimate  (TdmWindow            *self);
/* The settings changed: the last run's Devices page goes, the estimate follows. */
void            tdm_window_settings_changed (TdmWindow            *self);
void            tdm_window_pace_changed     (TdmWindow            *self);
void            tdm_window_single_step      (GtkWidget            *widget,
                                             const char           *action_name,
                                             GVariant             *parameter);
void            tdm_window_show_pace        (GtkWidget            *widget,
                                             const char           *action_name,
                                             GVariant             *parameter);
void            tdm_window_toggle_presentation (GtkWidget         *widget,
                                                const char        *action_name,
                                                GVariant          *parameter);
void            tdm_window_leave_presentation (GtkWidget          *widget,
                                               const char         *action_name,
                                               GVariant           *parameter);
void            tdm_window_scaling_export   (GtkWidget            *widget,
                                             const char           *action_name,
                                             GVariant             *parameter);

G_END_DECLS
