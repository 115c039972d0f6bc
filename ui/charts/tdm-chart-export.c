/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-export.c: TdmChart to PNG, SVG and CSV files, each saying which run.
 *
 * Every export draws through tdm_chart_render(), so the file shows what the window
 * shows. With a TdmExportInfo, the run's settings travel inside the file: PNG text
 * chunks (written by gdk-pixbuf's PNG saver, since cairo writes none), an SVG's
 * metadata plus a visible caption line, and comment lines atop a CSV. Not the
 * window's file choosers, nor the whole-run CSV (tdm-metrics-log.c).
 */

#include "tdm-chart-private.h"

#include <gdk-pixbuf/gdk-pixbuf.h>
#include <glib/gi18n.h>


static gboolean
check_cairo (cairo_status_t   status,
             const char      *path,
             GError         **error)
{
  if (status == CAIRO_STATUS_SUCCESS)
    return TRUE;

  g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
               _("Could not draw the chart for “%s”: %s"),
               path, cairo_status_to_string (status));

  return FALSE;
}

/* cairo keeps premultiplied native-endian ARGB; a pixbuf wants straight RGBA. */
static GdkPixbuf *
pixbuf_from_surface (cairo_surface_t *surface)
{
  int width = cairo_image_surface_get_width (surface);
  int height = cairo_image_surface_get_height (surface);
  int stride = cairo_image_surface_get_stride (surface);
  const guint8 *src = cairo_image_surface_get_data (surface);
  GdkPixbuf *pixbuf = gdk_pixbuf_new (GDK_COLORSPACE_RGB, TRUE, 8, width, height);
  guint8 *dst = gdk_pixbuf_get_pixels (pixbuf);
  int dst_stride = gdk_pixbuf_get_rowstride (pixbuf);

  for (int y = 0; y < height; y++)
    for (int x = 0; x < width; x++)
      {
        guint32 v = *(const guint32 *) (src + y * stride + 4 * x);
        guint a = v >> 24;
        guint8 *p = dst + y * dst_stride + 4 * x;

        for (int c = 0; c < 3; c++)
          {
            guint premultiplied = (v >> (16 - 8 * c)) & 0xff;

            p[c] = a == 0 ? 0 : (guint8) MIN (255, (premultiplied * 255 + a / 2) / a);
          }
        p[3] = (guint8) a;
      }

  return pixbuf;
}

gboolean
tdm_chart_export_png (TdmChart            *self,
                      const char          *path,
                      int                  width,
                      int                  height,
                      const TdmExportInfo *info,
                      GError             **error)
{
  g_autoptr(GdkPixbuf) pixbuf = NULL;
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) values = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *data = NULL;
  cairo_surface_t *surface;
  cairo_status_t status;
  cairo_t *cr;
  gsize size = 0;

  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (width > 0 && height > 0, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, width, height);
  cr = cairo_create (surface);
  tdm_chart_render (self, cr, width, height);
  status = cairo_status (cr);
  cairo_destroy (cr);
  cairo_surface_flush (surface);
  if (status == CAIRO_STATUS_SUCCESS)
    pixbuf = pixbuf_from_surface (surface);
  cairo_surface_destroy (surface);
  if (!check_cairo (status, path, error))
    return FALSE;

  /* PNG's own keywords first, so any viewer shows them; then each setting. */
  if (self->title && *self->title)
    {
      g_ptr_array_add (keys, g_strdup ("tEXt::Title"));
      g_ptr_array_add (values, g_strdup (self->title));
    }
  if (info != NULL)
    {
      g_ptr_array_add (keys, g_strdup ("tEXt::Software"));
      g_ptr_array_add (values, g_strdup_printf ("Tandem %s",
                                                tdm_export_info_lookup (info, "tandem")));
      g_ptr_array_add (keys, g_strdup ("tEXt::Description"));
      g_ptr_array_add (values, tdm_export_info_to_caption (info));
      for (guint i = 0; i < tdm_export_info_get_n_items (info); i++)
        {
          g_ptr_array_add (keys, g_strdup_printf ("tEXt::%s", tdm_export_info_get_key (info, i)));
          g_ptr_array_add (values, g_strdup (tdm_export_info_get_value (info, i)));
        }
    }
  g_ptr_array_add (keys, NULL);
  g_ptr_array_add (values, NULL);

  if (!gdk_pixbuf_save_to_bufferv (pixbuf, &data, &size, "png", (char **) keys->pdata,
                                   (char **) values->pdata, error))
    return FALSE;

  /* Written whole, so a failed export leaves no half-written file. */
  return g_file_set_contents (path, data, (gssize) size, error);
}

char *
tdm_chart_to_svg (TdmChart            *self,
                  int                  width,
                  int                  height,
                  const TdmExportInfo *info)
{
  g_autoptr(TdmChartSvg) svg = NULL;
  g_autoptr(GPtrArray) lines = NULL;
  cairo_rectangle_t extents = { 0, 0, MAX (width, 1), MAX (height, 1) };
  cairo_surface_t *surface;
  int chart_height = height;
  cairo_t *cr;
  char *doc;

  g_return_val_if_fail (TDM_IS_CHART (self), NULL);
  g_return_val_if_fail (width > 0 && height > 0, NULL);

  /* Nothing is rasterized: the hooks write elements instead of drawing, and the
   * recording surface only gives text its metrics and clips their extents. */
  surface = cairo_recording_surface_create (CAIRO_CONTENT_COLOR_ALPHA, &extents);
  cr = cairo_create (surface);
  svg = tdm_chart_svg_new (cr, width, height);
  if (info != NULL)
    {
      g_autofree char *caption = tdm_export_info_to_caption (info);

      lines = tdm_chart_svg_caption_lines (cr, caption, width - 2 * PAD);
      chart_height = MAX (height / 2, height - (int) ceil (lines->len * TDM_CHART_SVG_CAPTION_LINE + 6));
    }
  tdm_chart_render (self, cr, width, chart_height);
  for (guint i = 0; lines != NULL && i < lines->len; i++)
    tdm_chart_svg_caption (svg, lines->pdata[i], PAD,
                           chart_height + TDM_CHART_SVG_CAPTION_PX + 2 + i * TDM_CHART_SVG_CAPTION_LINE,
                           TDM_CHART_SVG_CAPTION_PX);
  doc = tdm_chart_svg_finish (svg, self->title, info);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);

  return doc;
}

gboolean
tdm_chart_export_svg (TdmChart            *self,
                      const char          *path,
                      int                  width,
                      int                  height,
                      const TdmExportInfo *info,
                      GError             **error)
{
  g_autofree char *doc = NULL;

  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (width > 0 && height > 0, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  doc = tdm_chart_to_svg (self, width, height, info);

  return g_file_set_contents (path, doc, -1, error);
}

/**
 * tdm_chart_export_csv:
 *
 * Writes every series but reference lines, joined on x; see
 * tdm_series_to_csv(). The first column is named after the x axis, the others as
 * the legend names the series. The run's settings come first as `# key: value`
 * lines (pandas: read_csv (path, comment='#')).
 */
gboolean
tdm_chart_export_csv (TdmChart            *self,
                      const char          *path,
                      const TdmExportInfo *info,
                      GError             **error)
{
  g_autoptr (GPtrArray) list = g_ptr_array_new ();
  g_autofree char *x_name = NULL;
  g_autofree char *table = NULL;
  g_autofree char *comment = NULL;
  g_autofree char *text = NULL;

  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  for (guint i = 0; i < self->entries->len; i++)
    if (get_entry (self, i)->style != TDM_CHART_STYLE_REFERENCE)
      g_ptr_array_add (list, get_entry (self, i)->series);

  x_name = tdm_chart_axis_title (self->x_label, self->x_unit);
  table = tdm_series_to_csv ((TdmSeries *const *) list->pdata, list->len, x_name);
  comment = info ? tdm_export_info_to_comment (info) : g_strdup ("");
  text = g_strconcat (comment, table, NULL);

  return g_file_set_contents (path, text, -1, error);
}
