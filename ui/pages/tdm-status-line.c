/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-status-line.c: the line under the charts that says where a run is.
 *
 * Its text changes every second (samples/s, time elapsed and left). A GtkLabel asks
 * for a new size at each new text, and in GTK 4 a size request goes up to the window,
 * whose relayout on X11 also asks the X server about the monitor: 5–8 ms of the main
 * thread a second on a 2-core machine that trains on both cores, the most common long
 * main-loop iteration left (bench/NOTES.md, "Stall at Start …"). This widget lays out
 * its own text and asks for a new size only when the text needs another number of
 * lines at its present width; any other change is a redraw. It wraps (word, then
 * character) rather than cutting, so at 360 px the time left is still there.
 * Screen readers get it as a status whose description is the text.
 *
 * The layout is made anew from the widget's Pango context wherever it is needed, so
 * a change of font or text size (which GTK answers with a new size request of its
 * own) is always seen.
 */

#include "tdm-status-line.h"

struct _TdmStatusLine
{
  GtkWidget  parent_instance;

  char      *text;
  int        width;   /* allocated width, 0 before the first allocation */
  int        lines;   /* lines the text took at that width */
};

G_DEFINE_FINAL_TYPE (TdmStatusLine, tdm_status_line, GTK_TYPE_WIDGET)

static PangoLayout *
tdm_status_line_layout (TdmStatusLine *self,
                        int            width)
{
  PangoLayout *layout = gtk_widget_create_pango_layout (GTK_WIDGET (self), self->text);

  pango_layout_set_wrap (layout, PANGO_WRAP_WORD_CHAR);
  pango_layout_set_width (layout, width > 0 ? width * PANGO_SCALE : -1);
  return layout;
}

int
tdm_status_line_get_lines (TdmStatusLine *self,
                           int            width)
{
  g_autoptr (PangoLayout) layout = NULL;

  g_return_val_if_fail (TDM_IS_STATUS_LINE (self), 0);

  layout = tdm_status_line_layout (self, width);
  return pango_layout_get_line_count (layout);
}

static GtkSizeRequestMode
tdm_status_line_get_request_mode (GtkWidget *widget)
{
  return GTK_SIZE_REQUEST_HEIGHT_FOR_WIDTH;
}

static void
tdm_status_line_measure (GtkWidget      *widget,
                         GtkOrientation  orientation,
                         int             for_size,
                         int            *minimum,
                         int            *natural,
                         int            *minimum_baseline,
                         int            *natural_baseline)
{
  TdmStatusLine *self = TDM_STATUS_LINE (widget);
  g_autoptr (PangoLayout) layout = NULL;
  PangoRectangle logical;

  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    {
      /* At least one character a line (word-char wrapping breaks anywhere); as wide
       * as the whole text on one line when there is room. */
      PangoRectangle one;
      g_autoptr (PangoLayout) em = gtk_widget_create_pango_layout (widget, "M");

      layout = tdm_status_line_layout (self, -1);
      pango_layout_get_pixel_extents (layout, NULL, &logical);
      pango_layout_get_pixel_extents (em, NULL, &one);
      *minimum = one.width;
      *natural = MAX (logical.width, one.width);
    }
  else
    {
      layout = tdm_status_line_layout (self, for_size);
      pango_layout_get_pixel_extents (layout, NULL, &logical);
      *minimum = *natural = logical.height;
    }
}

static void
tdm_status_line_size_allocate (GtkWidget *widget,
                               int        width,
                               int        height,
                               int        baseline)
{
  TdmStatusLine *self = TDM_STATUS_LINE (widget);

  self->width = width;
  self->lines = tdm_status_line_get_lines (self, width);
}

static void
tdm_status_line_snapshot (GtkWidget   *widget,
                          GtkSnapshot *snapshot)
{
  TdmStatusLine *self = TDM_STATUS_LINE (widget);
  g_autoptr (PangoLayout) layout = NULL;

  if (self->text == NULL || self->text[0] == '\0')
    return;

  layout = tdm_status_line_layout (self, gtk_widget_get_width (widget));
  /* The style's colour and text shadow, as a label draws; deprecated only after
   * GTK 4.8, which has no replacement yet. */
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_snapshot_render_layout (snapshot, gtk_widget_get_style_context (widget), 0, 0, layout);
  G_GNUC_END_IGNORE_DEPRECATIONS
}

void
tdm_status_line_set_text (TdmStatusLine *self,
                          const char    *text)
{
  int lines;

  g_return_if_fail (TDM_IS_STATUS_LINE (self));

  if (text == NULL)
    text = "";
  if (g_strcmp0 (self->text, text) == 0)
    return;

  g_free (self->text);
  self->text = g_strdup (text);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self),
                                  GTK_ACCESSIBLE_PROPERTY_DESCRIPTION, self->text,
                                  -1);

  if (self->width <= 0)
    {
      gtk_widget_queue_resize (GTK_WIDGET (self));
      return;
    }

  lines = tdm_status_line_get_lines (self, self->width);
  if (lines != self->lines)
    gtk_widget_queue_resize (GTK_WIDGET (self));
  else
    gtk_widget_queue_draw (GTK_WIDGET (self));
}

const char *
tdm_status_line_get_text (TdmStatusLine *self)
{
  g_return_val_if_fail (TDM_IS_STATUS_LINE (self), NULL);

  return self->text;
}

static void
tdm_status_line_finalize (GObject *object)
{
  g_free (TDM_STATUS_LINE (object)->text);

  G_OBJECT_CLASS (tdm_status_line_parent_class)->finalize (object);
}

static void
tdm_status_line_class_init (TdmStatusLineClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->finalize = tdm_status_line_finalize;
  widget_class->get_request_mode = tdm_status_line_get_request_mode;
  widget_class->measure = tdm_status_line_measure;
  widget_class->size_allocate = tdm_status_line_size_allocate;
  widget_class->snapshot = tdm_status_line_snapshot;

  gtk_widget_class_set_css_name (widget_class, "label");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_STATUS);
}

static void
tdm_status_line_init (TdmStatusLine *self)
{
  self->text = g_strdup ("");
}
