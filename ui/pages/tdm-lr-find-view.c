/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-lr-find-view.c: the range test on a worker thread, its points on a chart.
 *
 * The worker owns the finder; each point is copied and handed to the main loop with
 * g_idle_add, where a weak reference finds the view (or nothing, once it is gone)
 * and a generation number drops the points of a test that was replaced. The end
 * comes back the same way with the suggestion or the error. The worker never takes a
 * reference on the view: its last one dropped there would finalize a widget off the
 * main thread. This is the pattern of the window's other workers (tdm-run.c,
 * tdm-classify-view.c).
 */

#include <glib/gi18n.h>
#include <math.h>

#include "tdm-chart.h"
#include "tdm-lr-find.h"
#include "tdm-lr-find-view.h"

struct _TdmLrFindView
{
  GtkWidget     parent_instance;

  GtkWidget    *chart;
  GtkLabel     *status_label;
  GtkButton    *use_button;
  GtkButton    *stop_button;
  guint         loss_series, smoothed_series;

  GCancellable *cancellable;       /* the test under way, or NULL */
  guint         generation;
  guint         n_points;
  double        suggestion;
  char         *status;
};

enum { USE_RATE, N_SIGNALS };
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (TdmLrFindView, tdm_lr_find_view, GTK_TYPE_WIDGET)

/* The view, weakly, shared by a test's job and its messages: only the main loop
 * turns it into a reference. */
typedef struct
{
  GWeakRef view;
} ViewRef;

/* What travels from the worker to the main loop: a point, or the end. */
typedef struct
{
  ViewRef        *view;
  guint           generation;
  gboolean        done;
  TdmLrFindPoint  point;
  double          suggestion;
  gboolean        diverged;
  int             count;
  char           *error;
} Message;

typedef struct
{
  ViewRef      *view;
  guint         generation;
  TdmConfig    *config;
  GCancellable *cancellable;
} Job;

static void
view_ref_clear (gpointer data)
{
  ViewRef *ref = data;

  g_weak_ref_clear (&ref->view);
}

static void
view_ref_release (ViewRef *ref)
{
  g_atomic_rc_box_release_full (ref, view_ref_clear);
}

static void
message_free (gpointer data)
{
  Message *m = data;

  view_ref_release (m->view);
  g_free (m->error);
  g_free (m);
}

static void
set_status (TdmLrFindView *self,
            char          *text)
{
  g_free (self->status);
  self->status = text;
  gtk_label_set_text (self->status_label, text);
}

static gboolean
deliver (gpointer data)
{
  Message *m = data;
  g_autoptr(TdmLrFindView) self = g_weak_ref_get (&m->view->view);

  if (self == NULL || m->generation != self->generation)
    return G_SOURCE_REMOVE;
  if (!m->done)
    {
      /* The rate on a log scale, as the test spaces it. */
      double x = log10 (m->point.lr);

      tdm_chart_append (TDM_CHART (self->chart), self->loss_series, x, m->point.loss);
      tdm_chart_append (TDM_CHART (self->chart), self->smoothed_series, x, m->point.smoothed);
      self->n_points++;
      set_status (self, g_strdup_printf (_("Step %u: rate %.3g, loss %.4g"), self->n_points,
                                         m->point.lr, m->point.smoothed));
      return G_SOURCE_REMOVE;
    }
  g_clear_object (&self->cancellable);
  gtk_widget_set_sensitive (GTK_WIDGET (self->stop_button), FALSE);
  self->suggestion = m->suggestion;
  if (m->error != NULL)
    set_status (self, g_strdup_printf (_("The test could not run: %s"), m->error));
  else if (isfinite (m->suggestion))
    /* Translators: %.3g is a learning rate, %d the steps the range test took */
    set_status (self, g_strdup_printf (_("Suggested learning rate: %.3g, where the smoothed loss "
                                         "falls fastest (%d steps%s)"),
                                       m->suggestion, m->count,
                                       m->diverged ? _(", ended as the loss diverged") : ""));
  else
    set_status (self, g_strdup_printf (_("No suggestion: the loss did not fall over %d steps"),
                                       m->count));
  gtk_widget_set_sensitive (GTK_WIDGET (self->use_button), isfinite (m->suggestion));
  return G_SOURCE_REMOVE;
}

static void
post (Job     *job,
      Message *m)
{
  m->view = g_atomic_rc_box_acquire (job->view);
  m->generation = job->generation;
  g_idle_add_full (G_PRIORITY_DEFAULT, deliver, m, message_free);
}

static void
on_point (const TdmLrFindPoint *point,
          gpointer              data)
{
  Message *m = g_new0 (Message, 1);

  m->point = *point;
  post (data, m);
}

static gpointer
run_test (gpointer data)
{
  Job *job = data;
  g_autoptr(TdmLrFinder) finder = tdm_lr_finder_new (job->config, NULL);
  g_autoptr(GError) error = NULL;
  Message *end = g_new0 (Message, 1);

  tdm_lr_finder_set_point_func (finder, on_point, job);
  end->done = TRUE;
  if (tdm_lr_finder_run (finder, job->cancellable, &error))
    {
      tdm_lr_finder_get_points (finder, &end->count);
      end->suggestion = tdm_lr_finder_get_suggestion (finder);
      end->diverged = tdm_lr_finder_diverged (finder);
    }
  else
    {
      end->suggestion = NAN;
      end->error = g_strdup (error->message);
    }
  post (job, end);
  view_ref_release (job->view);
  tdm_config_free (job->config);
  g_object_unref (job->cancellable);
  g_free (job);
  return NULL;
}

void
tdm_lr_find_view_start (TdmLrFindView   *self,
                        const TdmConfig *config)
{
  Job *job;

  g_return_if_fail (TDM_IS_LR_FIND_VIEW (self));
  g_return_if_fail (config != NULL);

  /* A test under way ends; its thread holds its own reference to its cancellable. */
  tdm_lr_find_view_stop (self);
  g_clear_object (&self->cancellable);
  self->generation++;
  self->n_points = 0;
  self->suggestion = NAN;
  tdm_chart_clear (TDM_CHART (self->chart));
  self->cancellable = g_cancellable_new ();
  job = g_new0 (Job, 1);
  job->view = g_atomic_rc_box_new0 (ViewRef);
  g_weak_ref_init (&job->view->view, self);
  job->generation = self->generation;
  job->config = tdm_config_copy (config);
  job->cancellable = g_object_ref (self->cancellable);
  gtk_widget_set_sensitive (GTK_WIDGET (self->use_button), FALSE);
  gtk_widget_set_sensitive (GTK_WIDGET (self->stop_button), TRUE);
  set_status (self, g_strdup_printf (_("Testing rates from %g to %g…"), TDM_LR_FIND_FIRST,
                                     TDM_LR_FIND_LAST));
  g_thread_unref (g_thread_new ("tdm-lr-find", run_test, job));
}

void
tdm_lr_find_view_stop (TdmLrFindView *self)
{
  g_return_if_fail (TDM_IS_LR_FIND_VIEW (self));
  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
}

gboolean
tdm_lr_find_view_get_running (TdmLrFindView *self)
{
  g_return_val_if_fail (TDM_IS_LR_FIND_VIEW (self), FALSE);
  return self->cancellable != NULL;
}

guint
tdm_lr_find_view_get_n_points (TdmLrFindView *self)
{
  g_return_val_if_fail (TDM_IS_LR_FIND_VIEW (self), 0);
  return self->n_points;
}

double
tdm_lr_find_view_get_suggestion (TdmLrFindView *self)
{
  g_return_val_if_fail (TDM_IS_LR_FIND_VIEW (self), NAN);
  return self->suggestion;
}

const char *
tdm_lr_find_view_get_status (TdmLrFindView *self)
{
  g_return_val_if_fail (TDM_IS_LR_FIND_VIEW (self), NULL);
  return self->status;
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

  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))) != NULL)
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (tdm_lr_find_view_parent_class)->dispose (object);
}

static void
tdm_lr_find_view_finalize (GObject *object)
{
  g_free (TDM_LR_FIND_VIEW (object)->status);
  G_OBJECT_CLASS (tdm_lr_find_view_parent_class)->finalize (object);
}

static void
tdm_lr_find_view_class_init (TdmLrFindViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_lr_find_view_dispose;
  object_class->finalize = tdm_lr_find_view_finalize;
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
  g_signal_connect_swapped (self->stop_button, "clicked", G_CALLBACK (tdm_lr_find_view_stop),
                            self);
  g_signal_connect_swapped (self->use_button, "clicked", G_CALLBACK (on_use), self);
  gtk_box_append (GTK_BOX (buttons), GTK_WIDGET (self->stop_button));
  gtk_box_append (GTK_BOX (buttons), GTK_WIDGET (self->use_button));
  gtk_widget_set_parent (buttons, GTK_WIDGET (self));
}

GtkWidget *
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
