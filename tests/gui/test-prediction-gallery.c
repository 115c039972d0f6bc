/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-prediction-gallery.c: TdmPredictionGallery on a real run's PREDICTIONS event:
 * mistakes first, as many as the matrix says there are (up to the list's size), every
 * shown thumbnail inside the widget and in reading order; every caption fits its cell
 * (whole, or cut with "…" and whole in the tooltip). No pixels, no timing. */

#include <gtk/gtk.h>
#include <string.h>

#include "tdm-prediction-gallery.h"
#include "tdm-trainer.h"

typedef struct
{
  TdmPredictionGallery *gallery;
  TdmDatasetPair       *data;
  int                   mistakes;
  TdmPredictionsEvent   last;
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
      seen->last = e->predictions;
    }
}

static gboolean
keep_going (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

/* Every caption fits its cell: whole, or cut with "…"; the tooltip over the cell
 * has the whole "truth → prediction". */
static void
check_captions (TdmPredictionGallery      *gallery,
                const TdmDataset          *test,
                const TdmPredictionsEvent *shown)
{
  double width = gtk_widget_get_width (GTK_WIDGET (gallery));
  double height = gtk_widget_get_height (GTK_WIDGET (gallery));
  graphene_rect_t r;
  guint cut = 0, drawn = 0;

  for (guint i = 0; tdm_prediction_gallery_item_rect (gallery, width, height, i, &r); i++)
    {
      g_autofree char *tooltip = tdm_prediction_gallery_get_tooltip_at (gallery, r.origin.x + r.size.width / 2,
                                                                        r.origin.y + r.size.height + 10);
      gboolean wrong = tdm_prediction_gallery_is_mistake (gallery, i);

      g_assert_nonnull (tooltip);
      for (int line = 0; line < 2; line++)
        {
          double drawn_width = -1, room = -1;
          const char *caption = tdm_prediction_gallery_get_caption (gallery, i, line, &drawn_width, &room);
          g_autofree char *whole = NULL;

          if (line == 1 && !wrong)
            {
              g_assert_null (caption);
              continue;
            }
          g_assert_nonnull (caption);
          g_assert_cmpfloat (drawn_width, >, 0);
          g_assert_cmpfloat (drawn_width, <=, room);
          g_assert_cmpfloat (room, <=, width);
          drawn++;
          if (!g_str_has_suffix (caption, "…"))
            {
              /* Whole: it is in the tooltip as it is (less the arrow). */
              g_assert_nonnull (strstr (tooltip, line == 0 ? caption : caption + strlen ("→ ")));
              continue;
            }
          cut++;
        }
      /* The tooltip names the truth and, for a mistake, the prediction, whole. */
      {
        const char *truth = test->class_names[shown->sample[i].truth];
        g_autofree char *expected = wrong ? g_strdup_printf ("%s → %s", truth,
                                                             test->class_names[shown->sample[i].predicted])
                                          : g_strdup (truth);

        g_assert_cmpstr (tooltip, ==, expected);
      }
    }
  g_test_message ("%u captions drawn, %u cut", drawn, cut);
  g_assert_cmpuint (drawn, >, 0);
  {
    g_autofree char *off = tdm_prediction_gallery_get_tooltip_at (gallery, -5, -5);

    g_assert_null (off);
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
  Seen seen = { gallery, data, -1, { 0 } };
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
  /* Until it has drawn (a frame), however long that takes. */
  {
    guint source = g_timeout_add (5, keep_going, NULL);

    while (tdm_prediction_gallery_get_caption (gallery, 0, 0, NULL, NULL) == NULL)
      g_main_context_iteration (NULL, TRUE);
    g_source_remove (source);
  }
  check_captions (gallery, data->test, &seen.last);
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
