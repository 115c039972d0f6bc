/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-confusion-view.c: the matrix's geometry (a square grid right of a column of
 * class names, under a header row), its Cairo drawing and its tooltip. */

#include "tdm-confusion-view.h"
#include "tdm-draw.h"

#include <glib/gi18n.h>

#define NAME_WIDTH    110.0
/* "Predicted →" and, under it, each column's class name slanted up to the right. */
#define HEADER_HEIGHT 96.0
#define MARGIN        4.0
#define COUNT_CELL    18.0   /* the smallest cell that shows its count */
/* Column names slant at 60°: the longest that fits the header (cut with "…" past
 * it; the cells' tooltips name both classes whole). */
#define SLANT_COS     0.5
#define SLANT_MAX     ((HEADER_HEIGHT - 8) / 0.8660254)

struct _TdmConfusionView
{
  GtkWidget            parent_instance;
  TdmPredictionsEvent *predictions;   /* NULL until the first evaluation */
  double               slant_width;   /* the widest column name as drawn */
};

G_DEFINE_FINAL_TYPE (TdmConfusionView, tdm_confusion_view, GTK_TYPE_WIDGET)

int
tdm_confusion_view_get_classes (TdmConfusionView *self)
{
  g_return_val_if_fail (TDM_IS_CONFUSION_VIEW (self), 0);
  if (self->predictions == NULL || !self->predictions->has_matrix)
    return 0;
  return MIN (self->predictions->classes, TDM_MAX_CONFUSION_CLASSES);
}

/* The grid's origin and cell side at width × height; FALSE when nothing fits. */
static gboolean
tdm_confusion_view_grid (TdmConfusionView *self,
                         double            width,
                         double            height,
                         double           *x0,
                         double           *y0,
                         double           *cell)
{
  int n = tdm_confusion_view_get_classes (self);
  double side;

  if (n == 0)
    return FALSE;
  /* Room right of the grid for the last column's slanted name. */
  side = MIN (width - NAME_WIDTH - MARGIN - self->slant_width * SLANT_COS,
              height - HEADER_HEIGHT - MARGIN);
  if (side <= n)
    return FALSE;
  *cell = side / n;
  *x0 = NAME_WIDTH;
  *y0 = HEADER_HEIGHT;
  return TRUE;
}

gboolean
tdm_confusion_view_cell_rect (TdmConfusionView *self,
                              double            width,
                              double            height,
                              int               truth,
                              int               predicted,
                              graphene_rect_t  *rect)
{
  double x0, y0, cell;
  int n = tdm_confusion_view_get_classes (self);

  if (truth < 0 || truth >= n || predicted < 0 || predicted >= n ||
      !tdm_confusion_view_grid (self, width, height, &x0, &y0, &cell))
    return FALSE;
  graphene_rect_init (rect, x0 + predicted * cell, y0 + truth * cell, cell, cell);
  return TRUE;
}

gboolean
tdm_confusion_view_cell_at (TdmConfusionView *self,
                            double            width,
                            double            height,
                            double            x,
                            double            y,
                            int              *truth,
                            int              *predicted)
{
  double x0, y0, cell;
  int n = tdm_confusion_view_get_classes (self);

  if (!tdm_confusion_view_grid (self, width, height, &x0, &y0, &cell))
    return FALSE;
  if (x < x0 || y < y0 || x >= x0 + n * cell || y >= y0 + n * cell)
    return FALSE;
  *predicted = MIN (n - 1, (int) ((x - x0) / cell));
  *truth = MIN (n - 1, (int) ((y - y0) / cell));
  return TRUE;
}

long
tdm_confusion_view_get_total (TdmConfusionView *self)
{
  int n = tdm_confusion_view_get_classes (self);
  long total = 0;

  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      total += self->predictions->matrix[i][j];
  return total;
}

long
tdm_confusion_view_get_correct (TdmConfusionView *self)
{
  int n = tdm_confusion_view_get_classes (self);
  long correct = 0;

  for (int i = 0; i < n; i++)
    correct += self->predictions->matrix[i][i];
  return correct;
}

/* A class's name, or its number where the dataset names none. */
static char *
tdm_confusion_view_class_name (TdmConfusionView *self,
                               int               c)
{
  const char *name = self->predictions->class_name[c];

  return name[0] != '\0' ? g_strdup (name) : g_strdup_printf ("%d", c);
}

double
tdm_confusion_view_get_names_right (TdmConfusionView *self,
                                    double            width,
                                    double            height)
{
  double x0, y0, cell;
  int n = tdm_confusion_view_get_classes (self);

  g_return_val_if_fail (TDM_IS_CONFUSION_VIEW (self), 0);
  if (!tdm_confusion_view_grid (self, width, height, &x0, &y0, &cell))
    return 0;
  /* Each name starts under its column's middle and rises to the right. */
  return x0 + (n - 1) * cell + cell / 2 - 3 + self->slant_width * SLANT_COS;
}

gboolean
tdm_confusion_view_shows_counts (TdmConfusionView *self,
                                 double            width,
                                 double            height)
{
  double x0, y0, cell;

  g_return_val_if_fail (TDM_IS_CONFUSION_VIEW (self), FALSE);
  return tdm_confusion_view_grid (self, width, height, &x0, &y0, &cell) && cell >= COUNT_CELL;
}

static void
tdm_confusion_view_snapshot (GtkWidget   *widget,
                             GtkSnapshot *snapshot)
{
  TdmConfusionView *self = TDM_CONFUSION_VIEW (widget);
  double width = gtk_widget_get_width (widget);
  double height = gtk_widget_get_height (widget);
  int n = tdm_confusion_view_get_classes (self);
  double x0, y0, cell;
  GdkRGBA fg;
  cairo_t *cr;

  cr = tdm_draw_begin (widget, snapshot, &fg);
  if (cr == NULL)
    return;
  gdk_cairo_set_source_rgba (cr, &fg);

  if (!tdm_confusion_view_grid (self, width, height, &x0, &y0, &cell))
    {
      const char *note = self->predictions == NULL
                         ? _("The confusion matrix appears after the first evaluation")
                         : _("Too many classes for a confusion matrix");
      tdm_draw_text (cr, MARGIN, height / 2, note);
      cairo_destroy (cr);
      return;
    }

  tdm_draw_text (cr, x0, 14, _("Predicted →"));
  /* Each column's class, slanted so that long names fit above narrow columns. */
  for (int j = 0; j < n; j++)
    {
      g_autofree char *name = tdm_confusion_view_class_name (self, j);
      g_autofree char *fitted = tdm_draw_fit_text (cr, name, SLANT_MAX, NULL);

      tdm_draw_text_rotated (cr, x0 + j * cell + cell / 2 - 3, y0 - 4, -G_PI / 3, fitted);
    }
  for (int i = 0; i < n; i++)
    {
      long row = 0;
      g_autofree char *name = tdm_confusion_view_class_name (self, i);

      for (int j = 0; j < n; j++)
        row += self->predictions->matrix[i][j];
      gdk_cairo_set_source_rgba (cr, &fg);
      {
        /* Inside its column: a long name ends in "…" (the tooltip has it whole). */
        g_autofree char *fitted = tdm_draw_fit_text (cr, name, NAME_WIDTH - MARGIN - 6, NULL);

        tdm_draw_text (cr, MARGIN, y0 + i * cell + cell / 2 + 5, fitted);
      }

      for (int j = 0; j < n; j++)
        {
          int count = self->predictions->matrix[i][j];
          double share = row > 0 ? (double) count / row : 0;
          /* Right answers in blue, mistakes in vermillion: what a class is taken for
           * stands out from what it is. */
          if (i == j)
            cairo_set_source_rgba (cr, 0.0, 0.447, 0.698, 0.1 + 0.9 * share);
          else
            cairo_set_source_rgba (cr, 0.835, 0.369, 0.0, share > 0 ? 0.1 + 0.9 * share : 0.04);
          cairo_rectangle (cr, x0 + j * cell + 0.5, y0 + i * cell + 0.5, cell - 1, cell - 1);
          cairo_fill (cr);
          /* Counts down to small cells (the settings shown beside): smaller type. */
          if (cell >= COUNT_CELL)
            {
              char text[16];
              double px = CLAMP (cell / 2.6, 7.0, 14.0);
              double w;

              g_snprintf (text, sizeof text, "%d", count);
              tdm_draw_set_font_px (cr, px);
              w = tdm_draw_text_width (cr, text);
              if (share > 0.5)
                cairo_set_source_rgb (cr, 1, 1, 1);
              else
                gdk_cairo_set_source_rgba (cr, &fg);
              /* Digits stand about 0.7 em above the baseline: centred in the cell. */
              tdm_draw_text (cr, x0 + j * cell + (cell - w) / 2,
                             y0 + i * cell + cell / 2 + 0.36 * px, text);
              tdm_draw_set_font_px (cr, 0);
            }
        }
    }
  cairo_destroy (cr);
}

static gboolean
tdm_confusion_view_query_tooltip (GtkWidget  *widget,
                                  int         x,
                                  int         y,
                                  gboolean    keyboard,
                                  GtkTooltip *tooltip)
{
  TdmConfusionView *self = TDM_CONFUSION_VIEW (widget);
  int truth, predicted;

  if (keyboard || !tdm_confusion_view_cell_at (self, gtk_widget_get_width (widget),
                                               gtk_widget_get_height (widget), x, y,
                                               &truth, &predicted))
    return FALSE;

  g_autofree char *a = tdm_confusion_view_class_name (self, truth);
  g_autofree char *b = tdm_confusion_view_class_name (self, predicted);
  int count = self->predictions->matrix[truth][predicted];
  g_autofree char *text = truth == predicted
                          ? g_strdup_printf (_("%d %s recognized"), count, a)
                          : count == 0
                          /* Translators: an empty cell of the confusion matrix */
                          ? g_strdup_printf (_("No %s taken for %s"), a, b)
                          : g_strdup_printf (_("%d %s taken for %s"), count, a, b);
  gtk_tooltip_set_text (tooltip, text);
  return TRUE;
}

void
tdm_confusion_view_set_predictions (TdmConfusionView          *self,
                                    const TdmPredictionsEvent *predictions)
{
  g_return_if_fail (TDM_IS_CONFUSION_VIEW (self));
  g_return_if_fail (predictions != NULL);

  g_free (self->predictions);
  self->predictions = g_memdup2 (predictions, sizeof *predictions);
  /* The widest column name at the views' font, as it will be drawn. */
  {
    cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_A8, 1, 1);
    cairo_t *cr = cairo_create (surface);

    tdm_draw_set_font (cr, GTK_WIDGET (self));
    self->slant_width = 0;
    for (int c = 0; c < tdm_confusion_view_get_classes (self); c++)
      {
        g_autofree char *name = tdm_confusion_view_class_name (self, c);
        double drawn = 0;
        g_autofree char *fitted = tdm_draw_fit_text (cr, name, SLANT_MAX, &drawn);

        self->slant_width = MAX (self->slant_width, drawn);
      }
    cairo_destroy (cr);
    cairo_surface_destroy (surface);
  }
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_confusion_view_clear (TdmConfusionView *self)
{
  g_return_if_fail (TDM_IS_CONFUSION_VIEW (self));
  g_clear_pointer (&self->predictions, g_free);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
tdm_confusion_view_finalize (GObject *object)
{
  TdmConfusionView *self = TDM_CONFUSION_VIEW (object);

  g_free (self->predictions);
  G_OBJECT_CLASS (tdm_confusion_view_parent_class)->finalize (object);
}

static void
tdm_confusion_view_class_init (TdmConfusionViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->finalize = tdm_confusion_view_finalize;
  widget_class->snapshot = tdm_confusion_view_snapshot;
  widget_class->query_tooltip = tdm_confusion_view_query_tooltip;
  gtk_widget_class_set_css_name (widget_class, "confusion-view");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
tdm_confusion_view_init (TdmConfusionView *self)
{
  gtk_widget_set_size_request (GTK_WIDGET (self), 320, 240);
  gtk_widget_set_has_tooltip (GTK_WIDGET (self), TRUE);
}

GtkWidget *
tdm_confusion_view_new (void)
{
  return g_object_new (TDM_TYPE_CONFUSION_VIEW, NULL);
}
