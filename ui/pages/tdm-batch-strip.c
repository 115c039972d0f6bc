/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-batch-strip.c: the strip's layout (rows, shard bars scaled to the batch, square
 * thumbnails after them), the grey or colour thumbnails as Cairo surfaces, drawing. */

#include "tdm-batch-strip.h"
#include "tdm-draw.h"

#include <glib/gi18n.h>
#include <string.h>

#define LABEL_WIDTH 72.0
#define MIN_THUMB   32.0   /* smaller thumbnails are shown fewer, not smaller */
#define MAX_THUMB   56.0   /* the most a long class name widens the smallest one */
#define NAME_FONT   9.0    /* class names' smallest font size, px */
#define BAR_SHARE   0.35   /* of the row's width after the label, for a full batch */
#define GAP         4.0

struct _TdmBatchStrip
{
  GtkWidget        parent_instance;
  TdmBatchEvent   *batch;
  cairo_surface_t *thumbs[TDM_MAX_REPLICAS][TDM_BATCH_SAMPLES_SHOWN];
  char           **class_names;   /* NULL when the dataset names none */
  int              main_device;   /* its row says "main"; −1 for none */
  char            *names[TDM_MAX_REPLICAS];   /* as the run names its devices */
  /* Thumbnails are at least as wide as the widest class name at NAME_FONT (within
   * MIN_THUMB–MAX_THUMB), so names show whole where they can. */
  double           min_thumb;
  char            *caption[TDM_MAX_REPLICAS][TDM_BATCH_SAMPLES_SHOWN];   /* as drawn */
  double           caption_width[TDM_MAX_REPLICAS][TDM_BATCH_SAMPLES_SHOWN][2];
};

G_DEFINE_FINAL_TYPE (TdmBatchStrip, tdm_batch_strip, GTK_TYPE_WIDGET)

void
tdm_batch_strip_set_device_name (TdmBatchStrip *self,
                                 int            device,
                                 const char    *name)
{
  g_return_if_fail (TDM_IS_BATCH_STRIP (self));
  g_return_if_fail (device >= 0 && device < TDM_MAX_REPLICAS);

  g_free (self->names[device]);
  self->names[device] = g_strdup (name);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_batch_strip_set_main_device (TdmBatchStrip *self,
                                 int            device)
{
  g_return_if_fail (TDM_IS_BATCH_STRIP (self));

  self->main_device = device;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

int
tdm_batch_strip_get_devices (TdmBatchStrip *self)
{
  g_return_val_if_fail (TDM_IS_BATCH_STRIP (self), 0);
  return self->batch != NULL ? MIN (self->batch->replicas, TDM_MAX_REPLICAS) : 0;
}

int
tdm_batch_strip_get_label (TdmBatchStrip *self,
                           int            device,
                           int            sample)
{
  g_return_val_if_fail (TDM_IS_BATCH_STRIP (self), -1);
  if (device < 0 || device >= tdm_batch_strip_get_devices (self) || sample < 0 ||
      sample >= self->batch->device[device].shown)
    return -1;
  return self->batch->device[device].label[sample];
}

GArray *
tdm_batch_strip_layout (TdmBatchStrip *self,
                        double         width,
                        double         height)
{
  GArray *rows = g_array_new (FALSE, TRUE, sizeof (TdmBatchStripRow));
  int devices = tdm_batch_strip_get_devices (self);
  double row_height, thumb, bar_full;
  int fit = TDM_BATCH_SAMPLES_SHOWN;

  if (devices == 0 || width <= LABEL_WIDTH || height <= 0)
    return rows;
  row_height = height / devices;
  /* Square thumbnails as tall as a row allows, and no wider than their share. */
  bar_full = (width - LABEL_WIDTH) * BAR_SHARE;
  thumb = MIN (row_height - GAP,
               (width - LABEL_WIDTH - bar_full - GAP) / TDM_BATCH_SAMPLES_SHOWN - GAP);
  /* On a narrow strip, fewer thumbnails that can still be told apart. */
  if (thumb < self->min_thumb)
    {
      fit = MAX (1, (int) ((width - LABEL_WIDTH - bar_full - GAP) / (self->min_thumb + GAP)));
      thumb = MIN (row_height - GAP, (width - LABEL_WIDTH - bar_full - GAP) / fit - GAP);
    }
  if (thumb < 1)
    return rows;
  for (int r = 0; r < devices; r++)
    {
      TdmBatchStripRow row = { 0 };
      double y = r * row_height + GAP / 2;
      double share = self->batch->batch > 0
                     ? (double) self->batch->device[r].size / self->batch->batch : 0;

      row.size = self->batch->device[r].size;
      row.shown = MIN (self->batch->device[r].shown, fit);
      graphene_rect_init (&row.shard, LABEL_WIDTH, y, bar_full * share, row_height - GAP);
      for (int i = 0; i < row.shown; i++)
        graphene_rect_init (&row.thumb[i], LABEL_WIDTH + bar_full + GAP + i * (thumb + GAP),
                            y, thumb, thumb);
      g_array_append_val (rows, row);
    }
  return rows;
}

static void
tdm_batch_strip_drop_thumbs (TdmBatchStrip *self)
{
  for (int r = 0; r < TDM_MAX_REPLICAS; r++)
    for (int i = 0; i < TDM_BATCH_SAMPLES_SHOWN; i++)
      {
        g_clear_pointer (&self->thumbs[r][i], cairo_surface_destroy);
        g_clear_pointer (&self->caption[r][i], g_free);
      }
}

/* The smallest thumbnail that holds the widest class name at NAME_FONT. */
static double
tdm_batch_strip_min_thumb (TdmBatchStrip  *self,
                           char          **class_names)
{
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_A8, 1, 1);
  cairo_t *cr = cairo_create (surface);
  double widest = 0;

  /* The family drawn (the widget's), at the size drawn. */
  tdm_draw_set_font (cr, GTK_WIDGET (self));
  tdm_draw_set_font_px (cr, NAME_FONT);
  for (guint c = 0; class_names != NULL && class_names[c] != NULL; c++)
    widest = MAX (widest, tdm_draw_text_width (cr, class_names[c]));
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
  return CLAMP (widest + 4, MIN_THUMB, MAX_THUMB);
}

static char *
tdm_batch_strip_class_name (TdmBatchStrip *self,
                            int            label)
{
  if (self->class_names != NULL && label >= 0 && label < (int) g_strv_length (self->class_names))
    return g_strdup (self->class_names[label]);
  return g_strdup_printf ("%d", label);
}

const char *
tdm_batch_strip_get_caption (TdmBatchStrip *self,
                             int            device,
                             int            sample,
                             double        *width,
                             double        *room)
{
  g_return_val_if_fail (TDM_IS_BATCH_STRIP (self), NULL);

  if (tdm_batch_strip_get_label (self, device, sample) < 0)
    return NULL;
  if (width != NULL)
    *width = self->caption_width[device][sample][0];
  if (room != NULL)
    *room = self->caption_width[device][sample][1];
  return self->caption[device][sample];
}

char *
tdm_batch_strip_get_tooltip_at (TdmBatchStrip *self,
                                double         x,
                                double         y)
{
  g_autoptr(GArray) rows = NULL;

  g_return_val_if_fail (TDM_IS_BATCH_STRIP (self), NULL);

  rows = tdm_batch_strip_layout (self, gtk_widget_get_width (GTK_WIDGET (self)),
                                 gtk_widget_get_height (GTK_WIDGET (self)));
  for (guint r = 0; r < rows->len; r++)
    {
      const TdmBatchStripRow *row = &g_array_index (rows, TdmBatchStripRow, r);

      for (int i = 0; i < row->shown; i++)
        if (graphene_rect_contains_point (&row->thumb[i], &GRAPHENE_POINT_INIT (x, y)))
          return tdm_batch_strip_class_name (self, tdm_batch_strip_get_label (self, r, i));
    }
  return NULL;
}

static gboolean
tdm_batch_strip_query_tooltip (GtkWidget  *widget,
                               int         x,
                               int         y,
                               gboolean    keyboard,
                               GtkTooltip *tooltip)
{
  g_autofree char *text = tdm_batch_strip_get_tooltip_at (TDM_BATCH_STRIP (widget), x, y);

  if (text == NULL)
    return FALSE;
  gtk_tooltip_set_text (tooltip, text);
  return TRUE;
}

/* An RGB24 surface of one sample (grey or 3-channel HWC uint8). */
static cairo_surface_t *
tdm_batch_strip_thumbnail (const TdmDataset *train,
                           int               index)
{
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_RGB24, train->width,
                                                   train->height);
  const uint8_t *src = train->images + (size_t) index * tdm_dataset_sample_size (train);
  guint8 *dst = cairo_image_surface_get_data (s);
  int stride = cairo_image_surface_get_stride (s);

  cairo_surface_flush (s);
  for (int y = 0; y < train->height; y++)
    for (int x = 0; x < train->width; x++)
      {
        const uint8_t *p = src + ((size_t) y * train->width + x) * train->channels;
        guint32 r = p[0], g = train->channels >= 3 ? p[1] : p[0],
                b = train->channels >= 3 ? p[2] : p[0];

        *(guint32 *) (dst + y * stride + 4 * x) = (r << 16) | (g << 8) | b;
      }
  cairo_surface_mark_dirty (s);
  return s;
}

void
tdm_batch_strip_set_batch (TdmBatchStrip       *self,
                           const TdmBatchEvent *batch,
                           const TdmDataset    *train)
{
  g_return_if_fail (TDM_IS_BATCH_STRIP (self));
  g_return_if_fail (batch != NULL);

  g_free (self->batch);
  self->batch = g_memdup2 (batch, sizeof *batch);
  tdm_batch_strip_drop_thumbs (self);
  g_clear_pointer (&self->class_names, g_strfreev);
  if (train != NULL)
    {
      self->class_names = g_strdupv (train->class_names);
      self->min_thumb = tdm_batch_strip_min_thumb (self, self->class_names);
      for (int r = 0; r < tdm_batch_strip_get_devices (self); r++)
        for (int i = 0; i < batch->device[r].shown; i++)
          if (batch->device[r].index[i] >= 0 && batch->device[r].index[i] < train->count)
            self->thumbs[r][i] = tdm_batch_strip_thumbnail (train, batch->device[r].index[i]);
    }
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_batch_strip_clear (TdmBatchStrip *self)
{
  g_return_if_fail (TDM_IS_BATCH_STRIP (self));
  g_clear_pointer (&self->batch, g_free);
  tdm_batch_strip_drop_thumbs (self);
  g_clear_pointer (&self->class_names, g_strfreev);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
tdm_batch_strip_snapshot (GtkWidget   *widget,
                          GtkSnapshot *snapshot)
{
  TdmBatchStrip *self = TDM_BATCH_STRIP (widget);
  double width = gtk_widget_get_width (widget);
  double height = gtk_widget_get_height (widget);
  g_autoptr(GArray) rows = tdm_batch_strip_layout (self, width, height);
  GdkRGBA fg;
  cairo_t *cr;

  cr = tdm_draw_begin (widget, snapshot, &fg);
  if (cr == NULL)
    return;
  if (rows->len == 0)
    {
      gdk_cairo_set_source_rgba (cr, &fg);
      tdm_draw_text (cr, 4, height / 2, _("The batch split appears once a run has started"));
    }
  for (guint r = 0; r < rows->len; r++)
    {
      const TdmBatchStripRow *row = &g_array_index (rows, TdmBatchStripRow, r);
      const char *label = r < TDM_MAX_REPLICAS && self->names[r] != NULL ? self->names[r] : "";
      g_autofree char *size = g_strdup_printf ("%d", row->size);

      gdk_cairo_set_source_rgba (cr, &fg);
      tdm_draw_text (cr, 4, row->shard.origin.y + row->shard.size.height / 2 +
                            ((int) r == self->main_device ? -3 : 5), label);
      if ((int) r == self->main_device)
        tdm_draw_text (cr, 4, row->shard.origin.y + row->shard.size.height / 2 + 14, _("main"));
      cairo_set_source_rgb (cr, 0.0, 0.447, 0.698);
      cairo_rectangle (cr, row->shard.origin.x, row->shard.origin.y, row->shard.size.width,
                       row->shard.size.height);
      cairo_fill (cr);
      cairo_set_source_rgb (cr, 1, 1, 1);
      tdm_draw_text (cr, row->shard.origin.x + 4,
                     row->shard.origin.y + row->shard.size.height / 2 + 5, size);

      for (int i = 0; i < row->shown; i++)
        {
          const graphene_rect_t *t = &row->thumb[i];
          cairo_surface_t *s = self->thumbs[r][i];
          int lab = self->batch->device[r].label[i];

          if (s != NULL)
            {
              cairo_save (cr);
              cairo_translate (cr, t->origin.x, t->origin.y);
              cairo_scale (cr, t->size.width / cairo_image_surface_get_width (s),
                           t->size.height / cairo_image_surface_get_height (s));
              cairo_set_source_surface (cr, s, 0, 0);
              cairo_paint (cr);
              cairo_restore (cr);
            }
          /* The label over the thumbnail's foot: the class name, as large as the
           * thumbnail allows down to NAME_FONT, cut with "…" only past that (the
           * tooltip has it whole). */
          g_autofree char *name = tdm_batch_strip_class_name (self, lab);
          double font = MAX (NAME_FONT, MIN (14.0, t->size.height / 4));
          double name_width;

          tdm_draw_set_font_px (cr, font);
          name_width = tdm_draw_text_width (cr, name);
          if (name_width > t->size.width - 4)
            tdm_draw_set_font_px (cr, MAX (NAME_FONT, font * (t->size.width - 4) / name_width));
          g_free (self->caption[r][i]);
          self->caption[r][i] = tdm_draw_fit_text (cr, name, t->size.width - 4,
                                                   &self->caption_width[r][i][0]);
          self->caption_width[r][i][1] = t->size.width - 4;
          cairo_set_source_rgba (cr, 0, 0, 0, 0.6);
          cairo_rectangle (cr, t->origin.x, t->origin.y + t->size.height * 0.7,
                           t->size.width, t->size.height * 0.3);
          cairo_fill (cr);
          cairo_set_source_rgb (cr, 1, 1, 1);
          tdm_draw_text (cr, t->origin.x + 2, t->origin.y + t->size.height - 3,
                         self->caption[r][i]);
          tdm_draw_set_font_px (cr, 0);
        }
    }
  cairo_destroy (cr);
}

static void
tdm_batch_strip_finalize (GObject *object)
{
  TdmBatchStrip *self = TDM_BATCH_STRIP (object);

  tdm_batch_strip_drop_thumbs (self);
  g_free (self->batch);
  g_strfreev (self->class_names);
  for (int r = 0; r < TDM_MAX_REPLICAS; r++)
    g_free (self->names[r]);
  G_OBJECT_CLASS (tdm_batch_strip_parent_class)->finalize (object);
}

static void
tdm_batch_strip_class_init (TdmBatchStripClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->finalize = tdm_batch_strip_finalize;
  widget_class->snapshot = tdm_batch_strip_snapshot;
  widget_class->query_tooltip = tdm_batch_strip_query_tooltip;
  gtk_widget_class_set_css_name (widget_class, "batch-strip");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
tdm_batch_strip_init (TdmBatchStrip *self)
{
  gtk_widget_set_size_request (GTK_WIDGET (self), 360, 80);
  gtk_widget_set_has_tooltip (GTK_WIDGET (self), TRUE);
  self->main_device = -1;
  self->min_thumb = MIN_THUMB;
}

GtkWidget *
tdm_batch_strip_new (void)
{
  return g_object_new (TDM_TYPE_BATCH_STRIP, NULL);
}
