/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-prediction-gallery.c: TdmPredictionGallery on a real run's PREDICTIONS event:
 * mistakes first, as many as the matrix says there are (up to the list's size), every
 * shown thumbnail inside the widget and in reading order. No pixels, no timing. */

#include <gtk/gtk.h>

#include "tdm-prediction-gallery.h"
#include "tdm-trainer.h"

typedef struct
{
  TdmPredictionGallery *gallery;
  TdmDatasetPair       *data;
  int                   mistakes;
} Seen;

static void
on_event (const TdmEvent *e,
          gpointer        data)
{
  Seen *seen = data;

  if (e->kind == TDM_EVENT_PREDICTIONS)
    {
      tdm_prediction_gallery_set_predictions (seen->gallery, &e->predictions, seen->data->test);
      seen->mistakes = e->predictions.test_count - e->predictions.correct;
    }
}

static void
test_real_run (void)
{
  TdmPredictionGallery *gallery =
    g_object_ref_sink (TDM_PREDICTION_GALLERY (tdm_prediction_gallery_new ()));
  g_autoptr(TdmConfig) cfg = tdm_config_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmDatasetPair) data = tdm_dataset_open ("synthetic", &error);
  Seen seen = { gallery, data, -1 };
  graphene_rect_t r, previous;

  g_free (cfg->dataset);
  cfg->dataset = g_strdup ("synthetic");
  g_free (cfg->network);
  cfg->network = g_strdup ("fc16,relu,fc10");
  cfg->epochs = 1;
  g_assert_true (tdm_config_set_devices (cfg, "cpu", &error));
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new (cfg, on_event, &seen);
  g_assert_true (tdm_trainer_run (trainer, NULL, &error));
  g_assert_no_error (error);

  guint n = tdm_prediction_gallery_get_n_items (gallery);
  g_assert_cmpuint (n, ==, TDM_PREDICTION_SAMPLES);
  g_assert_cmpint (seen.mistakes, >, 0);
  for (guint i = 0; i < n; i++)
    g_assert_true (tdm_prediction_gallery_is_mistake (gallery, i) == ((int) i < seen.mistakes));

  /* 4 columns of 100 px at 410 px, 2 rows at 210 px: 8 items fit, the 9th does not. */
  for (guint i = 0; i < 8; i++)
    {
      g_assert_true (tdm_prediction_gallery_item_rect (gallery, 410, 210, i, &r));
      g_assert_cmpfloat (r.origin.x + r.size.width, <=, 410);
      g_assert_cmpfloat (r.origin.y + r.size.height, <=, 210);
      if (i > 0 && i % 4 != 0)
        g_assert_cmpfloat (r.origin.x, >, previous.origin.x);
      if (i % 4 == 0 && i > 0)
        g_assert_cmpfloat (r.origin.y, >, previous.origin.y);
      previous = r;
    }
  g_assert_false (tdm_prediction_gallery_item_rect (gallery, 410, 210, 8, &r));
  g_assert_false (tdm_prediction_gallery_item_rect (gallery, 50, 210, 0, &r));

  GtkWidget *window = gtk_window_new ();
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (gallery));
  gtk_window_present (GTK_WINDOW (window));
  for (int i = 0; i < 20; i++)
    g_main_context_iteration (NULL, FALSE);
  gtk_window_destroy (GTK_WINDOW (window));
  g_assert_finalize_object (gallery);
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  g_test_add_func ("/prediction-gallery/real-run", test_real_run);
  return g_test_run ();
}
