/* tdm-predictions-page.c: the "Predictions" page, built in code: two drawing
 * widgets under a summary line, side by side where the page is wide and one above the
 * other where it is not (a GtkFlowBox does that without a breakpoint).
 */

#include "tdm-predictions-page.h"

#include <glib/gi18n.h>

#include "tdm-confusion-view.h"
#include "tdm-prediction-gallery.h"

struct _TdmPredictionsPage
{
  GtkWidget  parent_instance;

  TdmSession *session;
  gulong      session_event;

  GtkWidget *scroller;
  GtkWidget *summary_label;
  GtkWidget *confusion;
  GtkWidget *gallery;
};

G_DEFINE_FINAL_TYPE (TdmPredictionsPage, tdm_predictions_page, GTK_TYPE_WIDGET)

static GtkWidget *
titled (const char *title,
        GtkWidget  *child)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  GtkWidget *label = gtk_label_new (title);

  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_widget_add_css_class (label, "heading");
  gtk_box_append (GTK_BOX (box), label);
  gtk_widget_set_vexpand (child, TRUE);
  gtk_widget_set_hexpand (child, TRUE);
  gtk_box_append (GTK_BOX (box), child);
  return box;
}

static void
tdm_predictions_page_clear (TdmPredictionsPage *self)
{
  tdm_confusion_view_clear (TDM_CONFUSION_VIEW (self->confusion));
  tdm_prediction_gallery_clear (TDM_PREDICTION_GALLERY (self->gallery));
  gtk_label_set_label (GTK_LABEL (self->summary_label),
                       _("The test set's predictions appear after each epoch."));
}

void
tdm_predictions_page_handle_event (TdmPredictionsPage   *self,
                                   const TdmEvent       *event,
                                   const TdmDatasetPair *data)
{
  g_return_if_fail (TDM_IS_PREDICTIONS_PAGE (self));
  g_return_if_fail (event != NULL);

  if (event->kind == TDM_EVENT_STARTED)
    tdm_predictions_page_clear (self);
  else if (event->kind == TDM_EVENT_PREDICTIONS)
    {
      const TdmPredictionsEvent *p = &event->predictions;
      g_autofree char *text = NULL;
      g_autofree char *correct = g_strdup_printf ("%d", p->correct);
      g_autofree char *total = g_strdup_printf ("%d", p->test_count);

      tdm_confusion_view_set_predictions (TDM_CONFUSION_VIEW (self->confusion), p);
      tdm_prediction_gallery_set_predictions (TDM_PREDICTION_GALLERY (self->gallery), p,
                                              data != NULL ? data->test : NULL);
      /* Translators: after an evaluation: the epoch, then right answers of test
       * images and the accuracy they make */
      text = g_strdup_printf (_("After epoch %d: %s of %s test images right (%.1f %%)"),
                              p->epoch, correct, total,
                              p->test_count > 0 ? 100.0 * p->correct / p->test_count : 0.0);
      gtk_label_set_label (GTK_LABEL (self->summary_label), text);
    }
}

GtkWidget *
tdm_predictions_page_get_confusion (TdmPredictionsPage *self)
{
  g_return_val_if_fail (TDM_IS_PREDICTIONS_PAGE (self), NULL);
  return self->confusion;
}

GtkWidget *
tdm_predictions_page_get_gallery (TdmPredictionsPage *self)
{
  g_return_val_if_fail (TDM_IS_PREDICTIONS_PAGE (self), NULL);
  return self->gallery;
}

const char *
tdm_predictions_page_get_summary (TdmPredictionsPage *self)
{
  g_return_val_if_fail (TDM_IS_PREDICTIONS_PAGE (self), NULL);
  return gtk_label_get_label (GTK_LABEL (self->summary_label));
}

static void
tdm_predictions_page_dispose (GObject *object)
{
  TdmPredictionsPage *self = TDM_PREDICTIONS_PAGE (object);

  tdm_predictions_page_set_session (self, NULL);
  g_clear_pointer (&self->scroller, gtk_widget_unparent);

  G_OBJECT_CLASS (tdm_predictions_page_parent_class)->dispose (object);
}

static void
tdm_predictions_page_class_init (TdmPredictionsPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_predictions_page_dispose;
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "predictionspage");
}

static void
tdm_predictions_page_init (TdmPredictionsPage *self)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 12);
  GtkWidget *flow = gtk_flow_box_new ();

  gtk_widget_set_margin_start (box, 12);
  gtk_widget_set_margin_end (box, 12);
  gtk_widget_set_margin_top (box, 18);
  gtk_widget_set_margin_bottom (box, 18);

  self->summary_label = gtk_label_new (NULL);
  gtk_label_set_wrap (GTK_LABEL (self->summary_label), TRUE);
  gtk_label_set_xalign (GTK_LABEL (self->summary_label), 0);
  gtk_box_append (GTK_BOX (box), self->summary_label);

  self->confusion = tdm_confusion_view_new ();
  gtk_widget_set_size_request (self->confusion, 240, 300);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->confusion),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Confusion matrix of the test set"), -1);
  self->gallery = tdm_prediction_gallery_new ();
  gtk_widget_set_size_request (self->gallery, 240, 300);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->gallery),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Test images with their predictions, mistakes first"), -1);

  gtk_flow_box_set_selection_mode (GTK_FLOW_BOX (flow), GTK_SELECTION_NONE);
  gtk_flow_box_set_homogeneous (GTK_FLOW_BOX (flow), TRUE);
  gtk_flow_box_set_max_children_per_line (GTK_FLOW_BOX (flow), 2);
  gtk_flow_box_set_column_spacing (GTK_FLOW_BOX (flow), 18);
  gtk_flow_box_set_row_spacing (GTK_FLOW_BOX (flow), 18);
  gtk_widget_set_vexpand (flow, TRUE);
  gtk_flow_box_append (GTK_FLOW_BOX (flow),
                       titled (_("Confusion matrix (rows: true class, columns: predicted)"),
                               self->confusion));
  gtk_flow_box_append (GTK_FLOW_BOX (flow),
                       titled (_("Test images, mistakes first"), self->gallery));
  gtk_box_append (GTK_BOX (box), flow);

  self->scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (self->scroller),
                                  GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (self->scroller), box);
  gtk_widget_set_parent (self->scroller, GTK_WIDGET (self));

  tdm_predictions_page_clear (self);
}

GtkWidget *
tdm_predictions_page_new (void)
{
  return g_object_new (TDM_TYPE_PREDICTIONS_PAGE, NULL);
}

static void
tdm_predictions_page_session_event (TdmSession     *session,
                     const TdmEvent *event,
                     TdmPredictionsPage *self)
{
  tdm_predictions_page_handle_event (self, event, tdm_session_get_dataset (session));
}

void
tdm_predictions_page_set_session (TdmPredictionsPage *self,
                     TdmSession *session)
{
  g_return_if_fail (TDM_IS_PREDICTIONS_PAGE (self));
  g_return_if_fail (session == NULL || TDM_IS_SESSION (session));

  if (self->session != NULL)
    g_clear_signal_handler (&self->session_event, self->session);
  g_set_object (&self->session, session);
  if (session != NULL)
    self->session_event = g_signal_connect (session, "event",
                                            G_CALLBACK (tdm_predictions_page_session_event), self);
}
