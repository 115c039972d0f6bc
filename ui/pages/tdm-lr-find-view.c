/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-lr-find-view.c: the finder's points on a chart, live or from the history.
 *
 * A test is the engine's experiment, run by a TdmExperimentRunner that the window
 * makes, starts and keeps in its run history, as it does its other experiments; the
 * view is handed the runner and only shows it: its points as they come on the main
 * loop ("lr-point"), and at the end the chart drawn again from the experiment's own
 * points, so none that came late is missing. A kept test is drawn from its record the
 * same way.
 */

#include <glib/gi18n.h>
#include <math.h>

#include "tdm-chart.h"
#include "tdm-experiment-runner.h"
#include "tdm-lr-find-view.h"

struct _TdmLrFindView
{
  GtkWidget            parent_instance;

  GtkWidget           *chart;
  GtkLabel            *status_label;
  GtkButton           *use_button;
  GtkButton           *stop_button;
  guint                loss_series, smoothed_series;

  TdmExperimentRunner *runner;       /* the test shown (the window's), or NULL */
  guint                n_points;
  double               suggestion;
};

enum { USE_RATE, N_SIGNALS };
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (TdmLrFindView, tdm_lr_find_view, GTK_TYPE_WIDGET)

/* Shows `text` (taken) on the status line. */
static void
set_status (TdmLrFindView *self,
            char          *text)
{
  gtk_label_set_text (self->status_label, text);
  g_free (text);
}

static void
add_point (TdmLrFindView        *self,
           const TdmLrFindPoint *point)
{
  /* The rate on a log scale, as the test spaces it. */
  double x = log10 (point->lr);

  tdm_chart_append (TDM_CHART (self->chart), self->loss_series, x, point->loss);
  tdm_chart_append (TDM_CHART (self->chart), self->smoothed_series, x, point->smoothed);
  self->n_points++;
}

static void
draw_points (TdmLrFindView        *self,
             const TdmLrFindPoint *points,
             int                   count)
{
  tdm_chart_clear (TDM_CHART (self->chart));
  self->n_points = 0;
  for (int i = 0; i < count; i++)
    add_point (self, &points[i]);
}

static void
on_lr_point (TdmLrFindView        *self,
             const TdmLrFindPoint *point)
{
  add_point (self, point);
  set_status (self, g_strdup_printf (_("Step %u: rate %.3g, loss %.4g"), self->n_points,
                                     point->lr, point->smoothed));
}

/* The end of a test: its suggestion, how it ended, or why it could not run. */
static void
show_end (TdmLrFindView *self,
          double         suggestion,
          gboolean       diverged,
          gboolean       stopped,
          const char    *error)
{
  const char *end = diverged ? _(", ended as the loss diverged") : stopped ? _(", stopped") : "";

  gtk_widget_set_sensitive (GTK_WIDGET (self->stop_button), FALSE);
  self->suggestion = suggestion;
  if (error != NULL)
    set_status (self, g_strdup_printf (_("The test could not run: %s"), error));
  else if (isfinite (suggestion))
    /* Translators: %.3g is a learning rate, %u the steps the range test took, %s how
     * it ended (", ended as the loss diverged", ", stopped" or nothing) */
    set_status (self, g_strdup_printf (_("Suggested learning rate: %.3g, where the smoothed loss "
                                         "falls fastest (%u steps%s)"),
                                       suggestion, self->n_points, end));
  else
    /* Translators: %u is the steps the range test took, %s how it ended */
    set_status (self, g_strdup_printf (_("No suggestion: the loss did not fall over %u steps%s"),
                                       self->n_points, end));
  gtk_widget_set_sensitive (GTK_WIDGET (self->use_button), isfinite (suggestion));
}

static void
on_finished (TdmLrFindView *self,
             const GError  *error)
{
  TdmExperiment *experiment = tdm_experiment_runner_get_experiment (self->runner);
  const TdmLrFindPoint *points;
  int count = 0;

  points = tdm_experiment_get_lr_points (experiment, &count);
  draw_points (self, points, count);
  show_end (self, tdm_experiment_get_lr_suggestion (experiment),
            tdm_experiment_get_lr_diverged (experiment), tdm_experiment_get_stopped (experiment),
            error != NULL ? error->message : NULL);
}

/* The test shown is no longer followed (what it drew stays); it is its owner's to
 * stop. */
static void
drop_runner (TdmLrFindView *self)
{
  if (self->runner == NULL)
    return;
  g_signal_handlers_disconnect_by_data (self->runner, self);
  g_clear_object (&self->runner);
}

void
tdm_lr_find_view_show_runner (TdmLrFindView       *self,
                              TdmExperimentRunner *runner)
{
  TdmExperiment *experiment;

  g_return_if_fail (TDM_IS_LR_FIND_VIEW (self));
  g_return_if_fail (TDM_IS_EXPERIMENT_RUNNER (runner));
  experiment = tdm_experiment_runner_get_experiment (runner);
  g_return_if_fail (tdm_experiment_get_kind (experiment) == TDM_EXPERIMENT_LR_FIND);
  g_return_if_fail (tdm_experiment_runner_get_running (runner) &&
                    tdm_experiment_runner_get_n_done (runner) == 0);

  /* A test shown before says nothing more here. */
  drop_runner (self);
  self->suggestion = NAN;
  draw_points (self, NULL, 0);
  gtk_widget_set_sensitive (GTK_WIDGET (self->use_button), FALSE);
  self->runner = g_object_ref (runner);
  g_signal_connect_object (self->runner, "lr-point", G_CALLBACK (on_lr_point), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->runner, "finished", G_CALLBACK (on_finished), self,
                           G_CONNECT_SWAPPED);
  gtk_widget_set_sensitive (GTK_WIDGET (self->stop_button), TRUE);
  set_status (self, g_strdup (tdm_experiment_get_training (experiment)->status));
}

void
tdm_lr_find_view_show_error (TdmLrFindView *self,
                             const char    *message)
{
  g_return_if_fail (TDM_IS_LR_FIND_VIEW (self));
  g_return_if_fail (message != NULL);

  drop_runner (self);
  draw_points (self, NULL, 0);
  show_end (self, NAN, FALSE, FALSE, message);
}

void
tdm_lr_find_view_show_record (TdmLrFindView      *self,
                              const TdmRunRecord *record)
{
  const TdmRunExperiment *x;

  g_return_if_fail (TDM_IS_LR_FIND_VIEW (self));
  g_return_if_fail (record != NULL && record->kind == TDM_RUN_EXPERIMENT &&
                    record->experiment.kind == TDM_EXPERIMENT_LR_FIND);

  drop_runner (self);
  x = &record->experiment;
  draw_points (self, (const TdmLrFindPoint *) x->lr_points->data, (int) x->lr_points->len);
  if (record->failed)
    show_end (self, NAN, FALSE, FALSE, record->error != NULL ? record->error : _("failed"));
  else
    show_end (self, x->lr_suggestion, x->lr_diverged,
              record->finished && record->final.stopped, NULL);
}

/* Its Stop button: stops the test shown (its points stay, and their suggestion). */
static void
on_stop (TdmLrFindView *self)
{
  if (self->runner != NULL)
    tdm_experiment_runner_stop (self->runner);
}

static void
on_use (TdmLrFindView *self)
{
  if (isfinite (self->suggestion))
    g_signal_emit (self, signals[USE_RATE], 0, self->suggestion);
}

static void
tdm_lr_find_view_dispose (GObject *object)
{
  TdmLrFindView *self = TDM_LR_FIND_VIEW (object);
  GtkWidget *child;

  drop_runner (self);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))) != NULL)
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (tdm_lr_find_view_parent_class)->dispose (object);
}

static void
tdm_lr_find_view_class_init (TdmLrFindViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_lr_find_view_dispose;
  /* "use-rate" (double rate): the person took the suggestion. */
  signals[USE_RATE] = g_signal_new ("use-rate", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                    0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_DOUBLE);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_GROUP);
}

static void
tdm_lr_find_view_init (TdmLrFindView *self)
{
  GtkWidget *buttons = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GdkRGBA loss = {0.34, 0.71, 0.91, 1}, smoothed = {0.0, 0.45, 0.70, 1};

  gtk_orientable_set_orientation (GTK_ORIENTABLE (gtk_widget_get_layout_manager (GTK_WIDGET (self))),
                                  GTK_ORIENTATION_VERTICAL);
  gtk_box_layout_set_spacing (GTK_BOX_LAYOUT (gtk_widget_get_layout_manager (GTK_WIDGET (self))), 12);
  self->suggestion = NAN;
  self->chart = tdm_chart_new ();
  tdm_chart_set_title (TDM_CHART (self->chart), _("Loss by learning rate"));
  /* Translators: the x axis of the range test: log₁₀ of the learning rate */
  tdm_chart_set_x_label (TDM_CHART (self->chart), _("learning rate, 10^x"));
  tdm_chart_set_y_label (TDM_CHART (self->chart), _("training loss"));
  self->loss_series = tdm_chart_add_series (TDM_CHART (self->chart), _("Loss"), &loss,
                                            TDM_CHART_STYLE_POINTS);
  self->smoothed_series = tdm_chart_add_series (TDM_CHART (self->chart), _("Smoothed"),
                                                &smoothed, TDM_CHART_STYLE_LINE);
  gtk_widget_set_vexpand (self->chart, TRUE);
  gtk_widget_set_size_request (self->chart, 320, 240);
  gtk_widget_set_parent (self->chart, GTK_WIDGET (self));

  self->status_label = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_wrap (self->status_label, TRUE);
  gtk_label_set_xalign (self->status_label, 0);
  gtk_widget_set_parent (GTK_WIDGET (self->status_label), GTK_WIDGET (self));

  gtk_widget_set_halign (buttons, GTK_ALIGN_END);
  self->stop_button = GTK_BUTTON (gtk_button_new_with_mnemonic (_("_Stop")));
  self->use_button = GTK_BUTTON (gtk_button_new_with_mnemonic (_("_Use This Rate")));
  gtk_widget_add_css_class (GTK_WIDGET (self->use_button), "suggested-action");
  gtk_widget_set_sensitive (GTK_WIDGET (self->use_button), FALSE);
  gtk_widget_set_sensitive (GTK_WIDGET (self->stop_button), FALSE);
  g_signal_connect_swapped (self->stop_button, "clicked", G_CALLBACK (on_stop),
                            self);
  g_signal_connect_swapped (self->use_button, "clicked", G_CALLBACK (on_use), self);
  gtk_box_append (GTK_BOX (buttons), GTK_WIDGET (self->stop_button));
  gtk_box_append (GTK_BOX (buttons), GTK_WIDGET (self->use_button));
  gtk_widget_set_parent (buttons, GTK_WIDGET (self));
}

static GtkWidget *
tdm_lr_find_view_new (void)
{
  return g_object_new (TDM_TYPE_LR_FIND_VIEW, NULL);
}

GtkWindow *
tdm_lr_find_view_window_new (GtkWindow      *parent,
                             TdmLrFindView **view)
{
  GtkWidget *window = gtk_window_new ();
  GtkWidget *child = tdm_lr_find_view_new ();
  GtkEventController *keys = gtk_shortcut_controller_new ();

  gtk_window_set_title (GTK_WINDOW (window), _("Find a Learning Rate"));
  gtk_window_set_default_size (GTK_WINDOW (window), 560, 440);
  gtk_window_set_transient_for (GTK_WINDOW (window), parent);
  gtk_widget_set_margin_start (child, 12);
  gtk_widget_set_margin_end (child, 12);
  gtk_widget_set_margin_top (child, 12);
  gtk_widget_set_margin_bottom (child, 12);
  gtk_window_set_child (GTK_WINDOW (window), child);
  gtk_shortcut_controller_add_shortcut (GTK_SHORTCUT_CONTROLLER (keys),
                                        gtk_shortcut_new (gtk_keyval_trigger_new (GDK_KEY_Escape, 0),
                                                          gtk_named_action_new ("window.close")));
  gtk_widget_add_controller (window, keys);
  if (view != NULL)
    *view = TDM_LR_FIND_VIEW (child);
  return GTK_WINDOW (window);
}
