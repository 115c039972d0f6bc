/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-batch-strip.c: TdmBatchStrip on the BATCH events of a real run on 3 CPU
 * workers: a row per device, shard bars in proportion to the shard sizes (which sum
 * to the batch), the shown samples' labels as the dataset has them, every part inside
 * the widget; every class name drawn over a thumbnail fits it (or ends in "…" with
 * the whole name in the tooltip). No pixels, no timing. */

#include <gtk/gtk.h>
#include <math.h>

#include "tdm-batch-strip.h"
#include "tdm-trainer.h"

typedef struct
{
  TdmBatchStrip  *strip;
  TdmDatasetPair *data;
  TdmBatchEvent   last;
} Seen;

static void
on_event (const TdmEvent *e,
          gpointer        data)
{
  Seen *seen = data;

  /* The sink runs on the thread that called tdm_trainer_run: here the main thread,
   * as the window's events arrive after being marshalled to it. */
  if (e->kind == TDM_EVENT_BATCH)
    {
      tdm_batch_strip_set_batch (seen->strip, &e->batch, seen->data->train);
      seen->last = e->batch;
    }
}

static gboolean
keep_going (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

/* Every class name over a thumbnail lies inside it: whole, or cut with "…" and whole
 * in the tooltip over that thumbnail. */
static void
check_captions (TdmBatchStrip    *strip,
                const TdmDataset *train)
{
  g_autoptr(GArray) rows = tdm_batch_strip_layout (strip, gtk_widget_get_width (GTK_WIDGET (strip)),
                                                   gtk_widget_get_height (GTK_WIDGET (strip)));
  guint whole = 0, cut = 0;

  g_assert_cmpuint (rows->len, >, 0);
  for (guint r = 0; r < rows->len; r++)
    {
      const TdmBatchStripRow *row = &g_array_index (rows, TdmBatchStripRow, r);

      for (int i = 0; i < row->shown; i++)
        {
          const char *name = train->class_names[tdm_batch_strip_get_label (strip, r, i)];
          const graphene_rect_t *t = &row->thumb[i];
          double width = -1, room = -1;
          const char *caption = tdm_batch_strip_get_caption (strip, r, i, &width, &room);
          g_autofree char *tooltip = tdm_batch_strip_get_tooltip_at (strip, t->origin.x + t->size.width / 2,
                                                                     t->origin.y + t->size.height / 2);

          g_assert_nonnull (caption);
          g_assert_cmpfloat (width, >, 0);
          g_assert_cmpfloat (width, <=, room);
          g_assert_cmpfloat (room, <=, t->size.width);
          g_assert_cmpstr (tooltip, ==, name);
          if (g_str_equal (caption, name))
            whole++;
          else
            {
              g_assert_true (g_str_has_suffix (caption, "…"));
              cut++;
            }
        }
    }
  g_test_message ("%u class names whole, %u cut", whole, cut);
  /* Short names ("ring", "blob") show whole; none is cut to fewer than its room. */
  g_assert_cmpuint (whole, >, 0);
  {
    g_autofree char *off = tdm_batch_strip_get_tooltip_at (strip, 1, 1);

    g_assert_null (off);
  }
}

static void
test_real_run (void)
{
  TdmBatchStrip *strip = g_object_ref_sink (TDM_BATCH_STRIP (tdm_batch_strip_new ()));
  g_autoptr(TdmConfig) cfg = tdm_config_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmDatasetPair) data = tdm_dataset_open ("synthetic", &error);
  Seen seen = { strip, data };
  const double W = 900, H = 240;

  g_assert_no_error (error);
  g_assert_cmpint (tdm_batch_strip_get_devices (strip), ==, 0);
  g_free (cfg->dataset);
  cfg->dataset = g_strdup ("synthetic");
  g_free (cfg->network);
  cfg->network = g_strdup ("fc16,relu,fc10");
  cfg->max_steps = 3;
  cfg->batch = 100;
  g_assert_true (tdm_config_set_devices (cfg, "cpu:3", &error));
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new (cfg, on_event, &seen);
  g_assert_true (tdm_trainer_run (trainer, NULL, &error));
  g_assert_no_error (error);

  g_assert_cmpint (tdm_batch_strip_get_devices (strip), ==, 3);
  g_autoptr(GArray) rows = tdm_batch_strip_layout (strip, W, H);
  g_assert_cmpuint (rows->len, ==, 3);
  int sum = 0;
  double widest = 0;
  for (guint r = 0; r < rows->len; r++)
    {
      const TdmBatchStripRow *row = &g_array_index (rows, TdmBatchStripRow, r);

      sum += row->size;
      g_assert_cmpint (row->size, ==, seen.last.device[r].size);
      g_assert_cmpint (row->shown, ==, TDM_BATCH_SAMPLES_SHOWN);
      /* Bars in proportion: 34, 33, 33 of 100. */
      if (r > 0)
        {
          const TdmBatchStripRow *first = &g_array_index (rows, TdmBatchStripRow, 0);
          g_assert_cmpfloat (fabs (row->shard.size.width / first->shard.size.width -
                                   (double) row->size / first->size), <, 1e-4);
          g_assert_cmpfloat (row->shard.origin.y, >, first->shard.origin.y);
        }
      widest = MAX (widest, row->shard.origin.x + row->shard.size.width);
      for (int i = 0; i < row->shown; i++)
        {
          const graphene_rect_t *t = &row->thumb[i];
          int index = seen.last.device[r].index[i];

          g_assert_cmpfloat (t->origin.x, >=, widest - 1e-3);
          g_assert_cmpfloat (t->origin.x + t->size.width, <=, W + 1e-3);
          g_assert_cmpfloat (t->origin.y + t->size.height, <=, H + 1e-3);
          g_assert_cmpint (tdm_batch_strip_get_label (strip, r, i), ==, data->train->labels[index]);
        }
    }
  g_assert_cmpint (sum, ==, 100);

  /* On a phone the rows show fewer thumbnails, none smaller than 32 px, all inside. */
  {
    g_autoptr(GArray) narrow = tdm_batch_strip_layout (strip, 320, H);

    g_assert_cmpuint (narrow->len, ==, 3);
    for (guint r = 0; r < narrow->len; r++)
      {
        const TdmBatchStripRow *row = &g_array_index (narrow, TdmBatchStripRow, r);

        g_assert_cmpint (row->shown, >, 0);
        g_assert_cmpint (row->shown, <, TDM_BATCH_SAMPLES_SHOWN);
        for (int i = 0; i < row->shown; i++)
          {
            g_assert_cmpfloat (row->thumb[i].size.width, >=, 32);
            g_assert_cmpfloat (row->thumb[i].origin.x + row->thumb[i].size.width, <=, 320 + 1e-3);
          }
      }
  }
  g_assert_cmpint (tdm_batch_strip_get_label (strip, 3, 0), ==, -1);
  g_assert_cmpint (tdm_batch_strip_get_label (strip, 0, TDM_BATCH_SAMPLES_SHOWN), ==, -1);

  /* Shown in a window it draws (thumbnails included) and goes away cleanly. */
  GtkWidget *window = gtk_window_new ();
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (strip));
  gtk_window_present (GTK_WINDOW (window));
  gtk_window_set_default_size (GTK_WINDOW (window), 360, 240);
  gtk_window_present (GTK_WINDOW (window));
  /* Until it has drawn (a frame), however long that takes. */
  {
    guint source = g_timeout_add (5, keep_going, NULL);

    while (tdm_batch_strip_get_caption (strip, 0, 0, NULL, NULL) == NULL)
      g_main_context_iteration (NULL, TRUE);
    g_source_remove (source);
  }
  check_captions (strip, data->train);
  gtk_window_destroy (GTK_WINDOW (window));

  tdm_batch_strip_clear (strip);
  g_autoptr(GArray) none = tdm_batch_strip_layout (strip, W, H);
  g_assert_cmpuint (none->len, ==, 0);
  g_assert_finalize_object (strip);
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  g_test_add_func ("/batch-strip/real-run", test_real_run);
  return g_test_run ();
}
