/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-svg.c: TdmChart's own SVG writer, with text kept as text.
 *
 * The writer rides on the cairo context as user data, so the drawing code needs no
 * second path through it: each hook asks the context whether a writer is attached.
 * With one, nothing is rasterized; the hook reads what cairo holds at that moment
 * (the path in user space, the transformation, the source colour, the line style,
 * the clip in device space) and writes one element. Clips become <clipPath>s, one
 * group per run of elements sharing a clip, so the series stay inside the plot area
 * exactly as on screen. Numbers are written in the C locale, text escaped for XML.
 */

#include "tdm-chart-svg.h"

#include <math.h>
#include <string.h>

static const cairo_user_data_key_t svg_key;

struct _TdmChartSvg
{
  cairo_t *cr;              /* borrowed; NULL once detached or destroyed */
  int      width, height;
  GString *defs;
  GString *body;
  guint    n_clips;
  gboolean in_group;
  double   clip[4];         /* x, y, w, h of the open group's clip */
};

static void
detached (void *data)
{
  TdmChartSvg *svg = data;

  svg->cr = NULL;
}

TdmChartSvg *
tdm_chart_svg_new (cairo_t *cr,
                   int      width,
                   int      height)
{
  TdmChartSvg *svg;

  g_return_val_if_fail (cr != NULL, NULL);

  svg = g_new0 (TdmChartSvg, 1);
  svg->cr = cr;
  svg->width = MAX (width, 1);
  svg->height = MAX (height, 1);
  svg->defs = g_string_new (NULL);
  svg->body = g_string_new (NULL);
  cairo_set_user_data (cr, &svg_key, svg, detached);

  return svg;
}

static void
detach (TdmChartSvg *svg)
{
  cairo_t *cr = svg->cr;

  /* Clearing the user data calls detached(), which forgets the context. */
  if (cr != NULL)
    cairo_set_user_data (cr, &svg_key, NULL, NULL);
  svg->cr = NULL;
}

void
tdm_chart_svg_free (TdmChartSvg *svg)
{
  if (svg == NULL)
    return;

  detach (svg);
  g_string_free (svg->defs, TRUE);
  g_string_free (svg->body, TRUE);
  g_free (svg);
}

/* ---- writing ------------------------------------------------------------- */

static void
put_number (GString *out,
            double   value)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  char *end;

  if (!isfinite (value))
    value = 0;
  g_ascii_formatd (buf, sizeof buf, "%.2f", value);
  /* 12.50 → 12.5, 3.00 → 3: a chart has thousands of coordinates. */
  end = buf + strlen (buf);
  while (end > buf && end[-1] == '0')
    *--end = '\0';
  if (end > buf && end[-1] == '.')
    *--end = '\0';
  if (g_str_equal (buf, "-0"))
    g_strlcpy (buf, "0", sizeof buf);
  g_string_append (out, buf);
}

static void
put_attr_number (GString    *out,
                 const char *name,
                 double      value)
{
  g_string_append_printf (out, " %s=\"", name);
  put_number (out, value);
  g_string_append_c (out, '"');
}

static void
put_escaped (GString    *out,
             const char *text)
{
  g_autofree char *escaped = g_markup_escape_text (text, -1);

  g_string_append (out, escaped);
}

/* fill="#rrggbb" fill-opacity="…" from the context's source (`what`: fill or stroke). */
static void
put_paint (GString    *out,
           cairo_t    *cr,
           const char *what)
{
  double r = 0, g = 0, b = 0, a = 1;

  cairo_pattern_get_rgba (cairo_get_source (cr), &r, &g, &b, &a);
  g_string_append_printf (out, " %s=\"#%02x%02x%02x\"", what,
                          (int) lround (CLAMP (r, 0, 1) * 255),
                          (int) lround (CLAMP (g, 0, 1) * 255),
                          (int) lround (CLAMP (b, 0, 1) * 255));
  if (a < 1)
    {
      g_autofree char *name = g_strdup_printf ("%s-opacity", what);

      put_attr_number (out, name, a);
    }
}

static void
put_transform (GString *out,
               cairo_t *cr)
{
  cairo_matrix_t m;

  cairo_get_matrix (cr, &m);
  if (m.xx == 1 && m.yx == 0 && m.xy == 0 && m.yy == 1 && m.x0 == 0 && m.y0 == 0)
    return;

  g_string_append (out, " transform=\"matrix(");
  put_number (out, m.xx);
  g_string_append_c (out, ' ');
  put_number (out, m.yx);
  g_string_append_c (out, ' ');
  put_number (out, m.xy);
  g_string_append_c (out, ' ');
  put_number (out, m.yy);
  g_string_append_c (out, ' ');
  put_number (out, m.x0);
  g_string_append_c (out, ' ');
  put_number (out, m.y0);
  g_string_append (out, ")\"");
}

/* Opens the group of the context's clip (in device space), closing the last one if
 * the clip changed. A clip that covers the picture needs no group. */
static void
follow_clip (TdmChartSvg *svg,
             cairo_t     *cr)
{
  double clip[4], x1, y1, x2, y2;
  gboolean clipped;

  /* The clip's bounds: the chart clips to rectangles only, and cairo lists a
   * clip as rectangles only when they fall on whole pixels. */
  cairo_save (cr);
  cairo_identity_matrix (cr);
  cairo_clip_extents (cr, &x1, &y1, &x2, &y2);
  cairo_restore (cr);
  clipped = x1 > 0 || y1 > 0 || x2 < svg->width || y2 < svg->height;
  clip[0] = x1, clip[1] = y1, clip[2] = x2 - x1, clip[3] = y2 - y1;

  if (svg->in_group && clipped && memcmp (clip, svg->clip, sizeof clip) == 0)
    return;
  if (svg->in_group)
    g_string_append (svg->body, "</g>\n");
  svg->in_group = FALSE;
  if (!clipped)
    return;

  svg->n_clips++;
  g_string_append_printf (svg->defs, "<clipPath id=\"clip%u\"><rect", svg->n_clips);
  put_attr_number (svg->defs, "x", clip[0]);
  put_attr_number (svg->defs, "y", clip[1]);
  put_attr_number (svg->defs, "width", clip[2]);
  put_attr_number (svg->defs, "height", clip[3]);
  g_string_append (svg->defs, "/></clipPath>\n");
  g_string_append_printf (svg->body, "<g clip-path=\"url(#clip%u)\">\n", svg->n_clips);
  memcpy (svg->clip, clip, sizeof clip);
  svg->in_group = TRUE;
}

static gboolean
put_path_data (GString *out,
               cairo_t *cr)
{
  cairo_path_t *path = cairo_copy_path (cr);
  gboolean any = FALSE;

  g_string_append (out, " d=\"");
  for (int i = 0; path->status == CAIRO_STATUS_SUCCESS && i < path->num_data;
       i += path->data[i].header.length)
    {
      const cairo_path_data_t *d = &path->data[i];
      static const char letters[] = { 'M', 'L', 'C' };

      switch (d->header.type)
        {
        case CAIRO_PATH_MOVE_TO:
        case CAIRO_PATH_LINE_TO:
        case CAIRO_PATH_CURVE_TO:
          g_string_append_c (out, letters[d->header.type]);
          for (int p = 1; p < d->header.length; p++)
            {
              if (p > 1)
                g_string_append_c (out, ' ');
              put_number (out, d[p].point.x);
              g_string_append_c (out, ' ');
              put_number (out, d[p].point.y);
            }
          any |= d->header.type != CAIRO_PATH_MOVE_TO;
          break;
        case CAIRO_PATH_CLOSE_PATH:
          g_string_append_c (out, 'Z');
          break;
        default:
          break;
        }
    }
  g_string_append_c (out, '"');
  cairo_path_destroy (path);

  return any;
}

static void
write_path (TdmChartSvg *svg,
            cairo_t     *cr,
            gboolean     stroke)
{
  g_autoptr(GString) element = g_string_new ("<path");

  if (!put_path_data (element, cr))
    return;

  put_transform (element, cr);
  if (stroke)
    {
      static const char *caps[] = { "butt", "round", "square" };
      static const char *joins[] = { "miter", "round", "bevel" };
      int n_dash = cairo_get_dash_count (cr);

      g_string_append (element, " fill=\"none\"");
      put_paint (element, cr, "stroke");
      put_attr_number (element, "stroke-width", cairo_get_line_width (cr));
      if (cairo_get_line_cap (cr) != CAIRO_LINE_CAP_BUTT)
        g_string_append_printf (element, " stroke-linecap=\"%s\"",
                                caps[CLAMP (cairo_get_line_cap (cr), 0, 2)]);
      if (cairo_get_line_join (cr) != CAIRO_LINE_JOIN_MITER)
        g_string_append_printf (element, " stroke-linejoin=\"%s\"",
                                joins[CLAMP (cairo_get_line_join (cr), 0, 2)]);
      if (n_dash > 0)
        {
          g_autofree double *dash = g_new (double, n_dash);
          double offset;

          cairo_get_dash (cr, dash, &offset);
          g_string_append (element, " stroke-dasharray=\"");
          for (int i = 0; i < n_dash; i++)
            {
              if (i > 0)
                g_string_append_c (element, ' ');
              put_number (element, dash[i]);
            }
          g_string_append_c (element, '"');
          if (offset != 0)
            put_attr_number (element, "stroke-dashoffset", offset);
        }
    }
  else
    {
      put_paint (element, cr, "fill");
      if (cairo_get_fill_rule (cr) == CAIRO_FILL_RULE_EVEN_ODD)
        g_string_append (element, " fill-rule=\"evenodd\"");
    }
  g_string_append (element, "/>\n");

  follow_clip (svg, cr);
  g_string_append_len (svg->body, element->str, element->len);
}

static double
font_px (PangoLayout                *layout,
         const PangoFontDescription *font)
{
  double size = pango_font_description_get_size (font) / (double) PANGO_SCALE;
  double dpi = pango_cairo_context_get_resolution (pango_layout_get_context (layout));

  if (pango_font_description_get_size_is_absolute (font))
    return size;

  return size * (dpi > 0 ? dpi : 96) / 72.0;
}

static void
put_font (GString                    *out,
          const PangoFontDescription *font,
          double                      px)
{
  const char *family = font ? pango_font_description_get_family (font) : NULL;

  g_string_append (out, " font-family=\"");
  if (family != NULL && *family)
    {
      put_escaped (out, family);
      g_string_append (out, ", ");
    }
  g_string_append (out, "sans-serif\"");
  put_attr_number (out, "font-size", px);
  if (font && pango_font_description_get_weight (font) >= PANGO_WEIGHT_SEMIBOLD)
    g_string_append (out, " font-weight=\"bold\"");
}

static void
write_text (TdmChartSvg *svg,
            cairo_t     *cr,
            PangoLayout *layout,
            double       anchor)
{
  const PangoFontDescription *font = pango_layout_get_font_description (layout);
  const char *text = pango_layout_get_text (layout);
  PangoRectangle logical;
  double x, y, baseline, ax;
  gboolean cut = pango_layout_is_ellipsized (layout);
  GString *out = svg->body;

  if (text == NULL || *text == '\0')
    return;
  if (font == NULL)
    font = pango_context_get_font_description (pango_layout_get_context (layout));

  cairo_get_current_point (cr, &x, &y);
  pango_layout_get_pixel_extents (layout, NULL, &logical);
  baseline = pango_layout_get_baseline (layout) / (double) PANGO_SCALE;

  /* The whole text even where the window ellipsized it (a reader searches for the
   * title, not for "Memory per dev…"), cut at the same width. */
  if (cut)
    {
      svg->n_clips++;
      g_string_append_printf (svg->defs, "<clipPath id=\"clip%u\"><rect", svg->n_clips);
      put_attr_number (svg->defs, "x", x);
      put_attr_number (svg->defs, "y", y);
      put_attr_number (svg->defs, "width", pango_layout_get_width (layout) / (double) PANGO_SCALE);
      put_attr_number (svg->defs, "height", logical.y + logical.height);
      g_string_append (svg->defs, "/></clipPath>\n");
      anchor = 0;
    }

  ax = x + logical.x + anchor * logical.width;
  follow_clip (svg, cr);
  g_string_append (out, "<text");
  put_attr_number (out, "x", ax);
  put_attr_number (out, "y", y + baseline);
  if (anchor > 0.75)
    g_string_append (out, " text-anchor=\"end\"");
  else if (anchor > 0.25)
    g_string_append (out, " text-anchor=\"middle\"");
  put_transform (out, cr);
  if (cut)
    g_string_append_printf (out, " clip-path=\"url(#clip%u)\"", svg->n_clips);
  put_font (out, font, font_px (layout, font));
  put_paint (out, cr, "fill");
  g_string_append_c (out, '>');
  put_escaped (out, text);
  g_string_append (out, "</text>\n");
}

void
tdm_chart_svg_caption (TdmChartSvg *svg,
                       const char  *text,
                       double       x,
                       double       y,
                       double       px)
{
  g_return_if_fail (svg != NULL);
  g_return_if_fail (text != NULL);

  if (svg->in_group)
    g_string_append (svg->body, "</g>\n");
  svg->in_group = FALSE;

  g_string_append (svg->body, "<text class=\"caption\"");
  put_attr_number (svg->body, "x", x);
  put_attr_number (svg->body, "y", y);
  g_string_append (svg->body, " font-family=\"sans-serif\"");
  put_attr_number (svg->body, "font-size", px);
  g_string_append (svg->body, " fill=\"#5e5c64\">");
  put_escaped (svg->body, text);
  g_string_append (svg->body, "</text>\n");
}

/* The caption in lines that fit `width`, broken between its " · " parts. */
GPtrArray *
tdm_chart_svg_caption_lines (cairo_t    *cr,
                             const char *caption,
                             double      width)
{
  g_autoptr(PangoLayout) layout = pango_cairo_create_layout (cr);
  g_autoptr(PangoFontDescription) font = pango_font_description_from_string ("sans-serif");
  g_auto(GStrv) parts = g_strsplit (caption, " · ", -1);
  GPtrArray *lines = g_ptr_array_new_with_free_func (g_free);
  GString *line = g_string_new (NULL);

  pango_font_description_set_absolute_size (font, TDM_CHART_SVG_CAPTION_PX * PANGO_SCALE);
  pango_layout_set_font_description (layout, font);
  for (guint i = 0; parts[i] != NULL; i++)
    {
      g_autofree char *longer = line->len ? g_strconcat (line->str, " · ", parts[i], NULL)
                                          : g_strdup (parts[i]);
      int w, h;

      pango_layout_set_text (layout, longer, -1);
      pango_layout_get_pixel_size (layout, &w, &h);
      if (w > width && line->len > 0)
        {
          g_ptr_array_add (lines, g_strdup (line->str));
          g_string_assign (line, parts[i]);
        }
      else
        g_string_assign (line, longer);
    }
  g_ptr_array_add (lines, g_string_free (line, FALSE));

  return lines;
}

char *
tdm_chart_svg_finish (TdmChartSvg         *svg,
                      const char          *title,
                      const TdmExportInfo *info)
{
  GString *doc;

  g_return_val_if_fail (svg != NULL, NULL);

  detach (svg);
  if (svg->in_group)
    g_string_append (svg->body, "</g>\n");
  svg->in_group = FALSE;

  doc = g_string_sized_new (svg->body->len + svg->defs->len + 2048);
  g_string_append (doc, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  g_string_append_printf (doc, "<svg xmlns=\"http://www.w3.org/2000/svg\" "
                          "xmlns:tandem=\"urn:x-tandem:run-settings\" "
                          "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
                          svg->width, svg->height, svg->width, svg->height);
  if (title != NULL && *title)
    {
      g_string_append (doc, "<title>");
      put_escaped (doc, title);
      g_string_append (doc, "</title>\n");
    }
  if (info != NULL)
    {
      g_autofree char *caption = tdm_export_info_to_caption (info);

      g_string_append (doc, "<desc>");
      put_escaped (doc, caption);
      g_string_append (doc, "</desc>\n<metadata>\n<tandem:run>\n");
      for (guint i = 0; i < tdm_export_info_get_n_items (info); i++)
        {
          g_string_append (doc, "<tandem:setting name=\"");
          put_escaped (doc, tdm_export_info_get_key (info, i));
          g_string_append (doc, "\">");
          put_escaped (doc, tdm_export_info_get_value (info, i));
          g_string_append (doc, "</tandem:setting>\n");
        }
      g_string_append (doc, "</tandem:run>\n</metadata>\n");
    }
  if (svg->defs->len > 0)
    g_string_append_printf (doc, "<defs>\n%s</defs>\n", svg->defs->str);
  /* The chart's fixed light look for files (tdm_chart_render() paints it too). */
  g_string_append (doc, "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
  g_string_append_len (doc, svg->body->str, svg->body->len);
  g_string_append (doc, "</svg>\n");

  return g_string_free (doc, FALSE);
}

/* ---- the hooks ----------------------------------------------------------- */

static TdmChartSvg *
attached (cairo_t *cr)
{
  return cairo_get_user_data (cr, &svg_key);
}

void
tdm_chart_stroke (cairo_t *cr)
{
  TdmChartSvg *svg = attached (cr);

  if (svg == NULL)
    {
      cairo_stroke (cr);
      return;
    }
  write_path (svg, cr, TRUE);
  cairo_new_path (cr);
}

void
tdm_chart_fill (cairo_t *cr)
{
  TdmChartSvg *svg = attached (cr);

  if (svg == NULL)
    {
      cairo_fill (cr);
      return;
    }
  write_path (svg, cr, FALSE);
  cairo_new_path (cr);
}

void
tdm_chart_show_layout (cairo_t     *cr,
                       PangoLayout *layout,
                       double       anchor)
{
  TdmChartSvg *svg = attached (cr);

  if (svg == NULL)
    {
      pango_cairo_show_layout (cr, layout);
      return;
    }
  write_text (svg, cr, layout, anchor);
}
