/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-confusion-view.c: TdmConfusionView's data handling and geometry: the matrix of
 * a real one-epoch run sums to the test set and its diagonal is the accuracy the
 * epoch reported; every cell lies inside the widget, cells do not overlap, and a
 * point maps back to its cell; the slanted column names stay inside at a phone's
 * width. No pixels, no timing. */

#include <gtk/gtk.h>
#include <math.h>

#include "tdm-confusion-view.h"
#include "tdm-draw.h"
#include "tdm-trainer.h"

typedef struct
{
  TdmConfusionView *view;
  double            accuracy;
  int               test_count;
} Seen;

static void
on_event (const TdmEvent *e,
          gpointer        data)
{
  Seen *seen = data;

  if (e->kind == TDM_EVENT_PREDICTIONS)
    {
      tdm_confusion_view_set_predictions (seen->view, &e->predictions);
      seen->test_count = e->predictions.test_count;
    }
  else if (e->kind == TDM_EVENT_EPOCH)
    seen->accuracy = e->epoch.test_accuracy;
}

static void
test_real_run (void)
{
  TdmConfusionView *view = g_object_ref_sink (TDM_CONFUSION_VIEW (tdm_confusion_view_new ()));
  g_autoptr(TdmConfig) cfg = tdm_config_new ();
  g_autoptr(GError) error = NULL;
  Seen seen = { view, NAN, 0 };

  g_assert_cmpint (tdm_confusion_view_get_classes (view), ==, 0);
  g_free (cfg->dataset);
  cfg->dataset = g_strdup ("synthetic");
  g_free (cfg->network);
  cfg->network = g_strdup ("fc16,relu,fc10");
  cfg->epochs = 1;
  g_assert_true (tdm_config_set_devices (cfg, "cpu:2", &error));
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new (cfg, on_event, &seen);
  g_assert_true (tdm_trainer_run (trainer, NULL, &error));
  g_assert_no_error (error);

  g_assert_cmpint (tdm_confusion_view_get_classes (view), ==, 10);
  g_assert_cmpint (tdm_confusion_view_get_total (view), ==, seen.test_count);
  g_assert_cmpint (seen.test_count, ==, 10000);
  g_assert_cmpint (tdm_confusion_view_get_correct (view), ==,
                   lround (seen.accuracy * seen.test_count));
  tdm_confusion_view_clear (view);
  g_assert_cmpint (tdm_confusion_view_get_classes (view), ==, 0);
  g_assert_finalize_object (view);
}

static void
test_geometry (void)
{
  TdmConfusionView *view = g_object_ref_sink (TDM_CONFUSION_VIEW (tdm_confusion_view_new ()));
  TdmPredictionsEvent *p = g_new0 (TdmPredictionsEvent, 1);
  const double W = 500, H = 360;
  graphene_rect_t r, s;
  int truth, predicted;

  p->classes = 3;
  p->has_matrix = TRUE;
  p->test_count = 12;
  int counts[3][3] = { { 3, 1, 0 }, { 0, 4, 0 }, { 2, 0, 2 } };
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      p->matrix[i][j] = counts[i][j];
  tdm_confusion_view_set_predictions (view, p);
  g_assert_cmpint (tdm_confusion_view_get_total (view), ==, 12);
  g_assert_cmpint (tdm_confusion_view_get_correct (view), ==, 9);

  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      {
        g_assert_true (tdm_confusion_view_cell_rect (view, W, H, i, j, &r));
        g_assert_cmpfloat (r.origin.x, >=, 0);
        g_assert_cmpfloat (r.origin.y, >=, 0);
        g_assert_cmpfloat (r.origin.x + r.size.width, <=, W);
        g_assert_cmpfloat (r.origin.y + r.size.height, <=, H);
        g_assert_true (tdm_confusion_view_cell_at (view, W, H, r.origin.x + r.size.width / 2,
                                                   r.origin.y + r.size.height / 2,
                                                   &truth, &predicted));
        g_assert_cmpint (truth, ==, i);
        g_assert_cmpint (predicted, ==, j);
        /* Rows go down, columns go right, and neighbours do not overlap. */
        if (j > 0)
          {
            g_assert_true (tdm_confusion_view_cell_rect (view, W, H, i, j - 1, &s));
            g_assert_cmpfloat (s.origin.x + s.size.width, <=, r.origin.x + 1e-3);  /* graphene keeps floats */
          }
        if (i > 0)
          {
            g_assert_true (tdm_confusion_view_cell_rect (view, W, H, i - 1, j, &s));
            g_assert_cmpfloat (s.origin.y + s.size.height, <=, r.origin.y + 1e-3);
          }
      }
  g_assert_false (tdm_confusion_view_cell_rect (view, W, H, 3, 0, &r));
  g_assert_false (tdm_confusion_view_cell_at (view, W, H, 1, 1, &truth, &predicted));
  /* Each cell shows its count at this size; cells under 18 px would not. */
  g_assert_true (tdm_confusion_view_shows_counts (view, W, H));
  /* Long class names: the last column's slanted name stays inside the widget at a
   * phone's width and wider (the grid leaves it room), its width measured here. */
  {
    static const char *const names[] = { "T-shirt/top", "Ankle boot", "a class name far too long to fit" };
    cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_A8, 1, 1);
    cairo_t *cr = cairo_create (surface);
    double name_width;
    static const double widths[] = { 320, 360, 500, 900 };

    for (int c = 0; c < 3; c++)
      g_strlcpy (p->class_name[c], names[c], sizeof p->class_name[c]);
    tdm_confusion_view_set_predictions (view, p);
    tdm_draw_set_font (cr, GTK_WIDGET (view));
    name_width = tdm_draw_text_width (cr, names[1]);
    for (guint k = 0; k < G_N_ELEMENTS (widths); k++)
      {
        double right = tdm_confusion_view_get_names_right (view, widths[k], H);

        g_assert_true (tdm_confusion_view_cell_rect (view, widths[k], H, 2, 2, &r));
        /* At least "Ankle boot" rises right of the last column's middle, inside. */
        g_assert_cmpfloat (right, >=, r.origin.x + r.size.width / 2 - 3 + name_width / 2 - 1e-3);
        g_assert_cmpfloat (right, <=, widths[k]);
      }
    cairo_destroy (cr);
    cairo_surface_destroy (surface);
  }
  /* Too small to draw: no cells at all rather than cells outside. */
  g_assert_false (tdm_confusion_view_cell_rect (view, 100, 20, 0, 0, &r));

  /* Shown in a window it draws (the snapshot runs) and goes away cleanly. */
  GtkWidget *window = gtk_window_new ();
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (view));
  gtk_window_present (GTK_WINDOW (window));
  for (int i = 0; i < 20; i++)
    g_main_context_iteration (NULL, FALSE);
  gtk_window_destroy (GTK_WINDOW (window));

  /* Too many classes: no matrix, no cells. */
  p->has_matrix = FALSE;
  p->classes = 100;
  tdm_confusion_view_set_predictions (view, p);
  g_assert_cmpint (tdm_confusion_view_get_classes (view), ==, 0);
  g_free (p);
  g_assert_finalize_object (view);
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  g_test_add_func ("/confusion-view/real-run", test_real_run);
  g_test_add_func ("/confusion-view/geometry", test_geometry);
  return g_test_run ();
}
