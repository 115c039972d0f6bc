/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-prediction-gallery.c: the gallery's grid (fixed-size cells, as many per row as
 * fit), the thumbnails as Cairo surfaces, and drawing. */

#include "tdm-prediction-gallery.h"
#include "tdm-draw.h"

#include <glib/gi18n.h>

#define CELL    100.0  /* a thumbnail and its caption: the truth, and for a mistake
                        * "→ prediction" on a second line */
#define THUMB   56.0
#define CAPTION 18.0

struct _TdmPredictionGallery
{
  GtkWidget            parent_instance;
  TdmPredictionsEvent *predictions;
  cairo_surface_t     *thumbs[TDM_PREDICTION_SAMPLES];
  char               **class_names;
  /* The captions as last drawn, and their widths. */
  char                *caption[TDM_PREDICTION_SAMPLES][2];
  double               caption_width[TDM_PREDICTION_SAMPLES][2];
};

G_DEFINE_FINAL_TYPE (TdmPredictionGallery, tdm_prediction_gallery, GTK_TYPE_WIDGET)

guint
tdm_prediction_gallery_get_n_items (TdmPredictionGallery *self)
{
  g_return_val_if_fail (TDM_IS_PREDICTION_GALLERY (self), 0);
  return self->predictions != NULL ? (guint) MIN (self->predictions->samples,
                                                  TDM_PREDICTION_SAMPLES) : 0;
}

gboolean
tdm_prediction_gallery_is_mistake (TdmPredictionGallery *self,
                                   guint                 i)
{
  g_return_val_if_fail (i < tdm_prediction_gallery_get_n_items (self), FALSE);
  return self->predictions->sample[i].truth != self->predictions->sample[i].predicted;
}

gboolean
tdm_prediction_gallery_item_rect (TdmPredictionGallery *self,
                                  double                width,
                                  double                height,
                                  guint                 i,
                                  graphene_rect_t      *rect)
{
  int columns = (int) (width / CELL);

  if (i >= tdm_prediction_gallery_get_n_items (self) || columns < 1)
    return FALSE;
  int row = (int) i / columns, column = (int) i % columns;
  if ((row + 1) * CELL > height)
    return FALSE;
  graphene_rect_init (rect, column * CELL + (CELL - THUMB) / 2, row * CELL + 4, THUMB, THUMB);
  return TRUE;
}

static void
tdm_prediction_gallery_drop (TdmPredictionGallery *self)
{
  for (int i = 0; i < TDM_PREDICTION_SAMPLES; i++)
    {
      g_clear_pointer (&self->thumbs[i], cairo_surface_destroy);
      g_clear_pointer (&self->caption[i][0], g_free);
      g_clear_pointer (&self->caption[i][1], g_free);
    }
  g_clear_pointer (&self->class_names, g_strfreev);
}

static cairo_surface_t *
tdm_prediction_gallery_thumbnail (const TdmDataset *d,
                                  int               index)
{
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_RGB24, d->width, d->height);
  const uint8_t *src = d->images + (size_t) index * tdm_dataset_sample_size (d);
  guint8 *dst = cairo_image_surface_get_data (s);
  int stride = cairo_image_surface_get_stride (s);

  cairo_surface_flush (s);
  for (int y = 0; y < d->height; y++)
    for (int x = 0; x < d->width; x++)
      {
        const uint8_t *p = src + ((size_t) y * d->width + x) * d->channels;
        guint32 r = p[0], g = d->channels >= 3 ? p[1] : p[0], b = d->channels >= 3 ? p[2] : p[0];

        *(guint32 *) (dst + y * stride + 4 * x) = (r << 16) | (g << 8) | b;
      }
  cairo_surface_mark_dirty (s);
  return s;
}

void
tdm_prediction_gallery_set_predictions (TdmPredictionGallery      *self,
                                        const TdmPredictionsEvent *predictions,
                                        const TdmDataset          *test)
{
  g_return_if_fail (TDM_IS_PREDICTION_GALLERY (self));
  g_return_if_fail (predictions != NULL);

  tdm_prediction_gallery_drop (self);
  g_free (self->predictions);
  self->predictions = g_memdup2 (predictions, sizeof *predictions);
  if (test != NULL)
    {
      self->class_names = g_strdupv (test->class_names);
      for (guint i = 0; i < tdm_prediction_gallery_get_n_items (self); i++)
        {
          int index = predictions->sample[i].index;
          if (index >= 0 && index < test->count)
            self->thumbs[i] = tdm_prediction_gallery_thumbnail (test, index);
        }
    }
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_prediction_gallery_clear (TdmPredictionGallery *self)
{
  g_return_if_fail (TDM_IS_PREDICTION_GALLERY (self));

  tdm_prediction_gallery_drop (self);
  g_clear_pointer (&self->predictions, g_free);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static char *
tdm_prediction_gallery_name (TdmPredictionGallery *self,
                             int                   c)
{
  if (self->class_names != NULL && c >= 0 && c < (int) g_strv_length (self->class_names))
    return g_strdup (self->class_names[c]);
  return g_strdup_printf ("%d", c);
}

const char *
tdm_prediction_gallery_get_caption (TdmPredictionGallery *self,
                                    guint                 i,
                                    int                   line,
                                    double               *width,
                                    double               *room)
{
  g_return_val_if_fail (TDM_IS_PREDICTION_GALLERY (self), NULL);
  g_return_val_if_fail (line == 0 || line == 1, NULL);

  if (i >= tdm_prediction_gallery_get_n_items (self))
    return NULL;
  if (width != NULL)
    *width = self->caption_width[i][line];
  if (room != NULL)
    *room = CELL - 6;
  return self->caption[i][line];
}

char *
tdm_prediction_gallery_get_tooltip_at (TdmPredictionGallery *self,
                                       double                x,
                                       double                y)
{
  double width = gtk_widget_get_width (GTK_WIDGET (self));
  double height = gtk_widget_get_height (GTK_WIDGET (self));
  graphene_rect_t r;

  g_return_val_if_fail (TDM_IS_PREDICTION_GALLERY (self), NULL);

  /* The whole cell: its thumbnail and the captions under it. */
  for (guint i = 0; tdm_prediction_gallery_item_rect (self, width, height, i, &r); i++)
    if (x >= r.origin.x - (CELL - THUMB) / 2 && x < r.origin.x - (CELL - THUMB) / 2 + CELL
        && y >= r.origin.y - 4 && y < r.origin.y - 4 + CELL)
      {
        g_autofree char *truth = tdm_prediction_gallery_name (self, self->predictions->sample[i].truth);
        g_autofree char *guess = tdm_prediction_gallery_name (self, self->predictions->sample[i].predicted);

        if (!tdm_prediction_gallery_is_mistake (self, i))
          return g_steal_pointer (&truth);
        /* Translators: a test image's tooltip in the gallery: its true class, then
         * the class the network predicted */
        return g_strdup_printf (_("%s → %s"), truth, guess);
      }
  return NULL;
}

static gboolean
tdm_prediction_gallery_query_tooltip (GtkWidget  *widget,
                                      int         x,
                                      int         y,
                                      gboolean    keyboard,
                                      GtkTooltip *tooltip)
{
  g_autofree char *text = tdm_prediction_gallery_get_tooltip_at (TDM_PREDICTION_GALLERY (widget), x, y);

  if (text == NULL)
    return FALSE;
  gtk_tooltip_set_text (tooltip, text);
  return TRUE;
}

static void
tdm_prediction_gallery_snapshot (GtkWidget   *widget,
                                 GtkSnapshot *snapshot)
{
  TdmPredictionGallery *self = TDM_PREDICTION_GALLERY (widget);
  double width = gtk_widget_get_width (widget);
  double height = gtk_widget_get_height (widget);
  graphene_rect_t r;
  GdkRGBA fg;
  cairo_t *cr;

  cr = tdm_draw_begin (widget, snapshot, &fg);
  if (cr == NULL)
    return;
  if (tdm_prediction_gallery_get_n_items (self) == 0)
    {
      gdk_cairo_set_source_rgba (cr, &fg);
      tdm_draw_text (cr, 4, height / 2, _("Predictions appear after the first evaluation"));
    }
  for (guint i = 0; tdm_prediction_gallery_item_rect (self, width, height, i, &r); i++)
    {
      cairo_surface_t *s = self->thumbs[i];
      gboolean wrong = tdm_prediction_gallery_is_mistake (self, i);
      g_autofree char *truth = tdm_prediction_gallery_name (self, self->predictions->sample[i].truth);
      g_autofree char *guess = tdm_prediction_gallery_name (self, self->predictions->sample[i].predicted);
      g_autofree char *second = wrong ? g_strdup_printf ("→ %s", guess) : NULL;
      const char *lines[2] = { truth, second };

      if (s != NULL)
        {
          cairo_save (cr);
          cairo_translate (cr, r.origin.x, r.origin.y);
          cairo_scale (cr, r.size.width / cairo_image_surface_get_width (s),
                       r.size.height / cairo_image_surface_get_height (s));
          cairo_set_source_surface (cr, s, 0, 0);
          cairo_paint (cr);
          cairo_restore (cr);
        }
      if (wrong)
        cairo_set_source_rgb (cr, 0.835, 0.369, 0.0);
      else
        cairo_set_source_rgb (cr, 0.0, 0.447, 0.698);
      cairo_set_line_width (cr, 3);
      cairo_rectangle (cr, r.origin.x - 1.5, r.origin.y - 1.5, r.size.width + 3, r.size.height + 3);
      cairo_stroke (cr);
      /* Captions stay inside their cell: a long class name ends in "…", never drawn
       * over its neighbour's; the tooltip has it whole. */
      gdk_cairo_set_source_rgba (cr, &fg);
      for (int line = 0; line < 2; line++)
        {
          g_clear_pointer (&self->caption[i][line], g_free);
          self->caption_width[i][line] = 0;
          if (lines[line] == NULL)
            continue;
          self->caption[i][line] = tdm_draw_fit_text (cr, lines[line], CELL - 6,
                                                      &self->caption_width[i][line]);
          tdm_draw_text (cr, r.origin.x - (CELL - THUMB) / 2 + 2, r.origin.y + THUMB + (line + 1) * CAPTION,
                         self->caption[i][line]);
        }
    }
  cairo_destroy (cr);
}

static void
tdm_prediction_gallery_finalize (GObject *object)
{
  TdmPredictionGallery *self = TDM_PREDICTION_GALLERY (object);

  tdm_prediction_gallery_drop (self);
  g_free (self->predictions);
  G_OBJECT_CLASS (tdm_prediction_gallery_parent_class)->finalize (object);
}

static void
tdm_prediction_gallery_class_init (TdmPredictionGalleryClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->finalize = tdm_prediction_gallery_finalize;
  widget_class->snapshot = tdm_prediction_gallery_snapshot;
  widget_class->query_tooltip = tdm_prediction_gallery_query_tooltip;
  gtk_widget_class_set_css_name (widget_class, "prediction-gallery");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
tdm_prediction_gallery_init (TdmPredictionGallery *self)
{
  gtk_widget_set_size_request (GTK_WIDGET (self), (int) CELL * 4, (int) CELL * 2);
  gtk_widget_set_has_tooltip (GTK_WIDGET (self), TRUE);
}

GtkWidget *
tdm_prediction_gallery_new (void)
{
  return g_object_new (TDM_TYPE_PREDICTION_GALLERY, NULL);
}
