/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-predictions-page.c: the "Predictions" page: two drawing widgets under a
 * summary line (the layout is tdm-predictions-page.ui), a view of the session's
 * PREDICTIONS events.
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

  GtkWidget  *scroller;
  GtkWidget *summary_label;
  GtkWidget *confusion;
  GtkWidget *gallery;
};

G_DEFINE_FINAL_TYPE (TdmPredictionsPage, tdm_predictions_page, GTK_TYPE_WIDGET)

static void
tdm_predictions_page_clear (TdmPredictionsPage *self)
{
  tdm_confusion_view_clear (TDM_CONFUSION_VIEW (self->confusion));
  tdm_prediction_gallery_clear (TDM_PREDICTION_GALLERY (self->gallery));
  gtk_label_set_label (GTK_LABEL (self->summary_label),
                       _("The test set's predictions appear after each epoch."));
}

static void
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

static void
tdm_predictions_page_dispose (GObject *object)
{
  TdmPredictionsPage *self = TDM_PREDICTIONS_PAGE (object);

  tdm_predictions_page_set_session (self, NULL);
  gtk_widget_dispose_template (GTK_WIDGET (self), TDM_TYPE_PREDICTIONS_PAGE);

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

  g_type_ensure (TDM_TYPE_CONFUSION_VIEW);
  g_type_ensure (TDM_TYPE_PREDICTION_GALLERY);
  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-predictions-page.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmPredictionsPage, scroller);
  gtk_widget_class_bind_template_child (widget_class, TdmPredictionsPage, summary_label);
  gtk_widget_class_bind_template_child (widget_class, TdmPredictionsPage, confusion);
  gtk_widget_class_bind_template_child (widget_class, TdmPredictionsPage, gallery);
}

static void
tdm_predictions_page_init (TdmPredictionsPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  tdm_predictions_page_clear (self);
}

static void
tdm_predictions_page_session_event (TdmSession         *session,
                                    const TdmEvent     *event,
                                    TdmPredictionsPage *self)
{
  tdm_predictions_page_handle_event (self, event, tdm_session_get_dataset (session));
}

void
tdm_predictions_page_set_session (TdmPredictionsPage *self,
                                  TdmSession         *session)
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
