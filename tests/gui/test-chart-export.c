/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-chart-export.c — part of test-chart: TdmChart's exports. PNG and SVG files of
 * the requested size, the CSV of every series, the SVG's text as a reader (and a
 * screen reader) finds it, and the run's settings that each export carries. Not the
 * on-screen rendering (test-chart.c).
 */

#include <math.h>
#include <string.h>

#include <glib/gstdio.h>
#include <gtk/gtk.h>

#include "tdm-chart-axis.h"
#include "tdm-chart.h"
#include "tdm-chart-private.h"
#include "tdm-export-info.h"
#include "tdm-run-export-info.h"
#include "test-chart.h"

/* ---- exports ---------------------------------------------------------------- */

static TdmChart *
sample_chart(void)
{
  TdmChart *chart = new_chart();
  guint train, test;

  tdm_chart_set_title(chart, "Loss");
  tdm_chart_set_x_label(chart, "Elapsed");
  tdm_chart_set_x_unit(chart, "s");
  tdm_chart_set_log_scale(chart, TRUE);
  train = tdm_chart_add_series(chart, "train", NULL, TDM_CHART_STYLE_LINE);
  test = tdm_chart_add_series(chart, "test", NULL, TDM_CHART_STYLE_POINTS);
  for (int i = 0; i < 300; i++) {
    tdm_chart_append(chart, train, i, 2.3 * exp(-i / 80.0) + 0.05);
    if (i % 100 == 99)
      tdm_chart_append(chart, test, i, 2.3 * exp(-i / 80.0) + 0.1);
  }
  return chart;
}

static void
test_export_png_svg(void)
{
  TdmChart *chart = sample_chart();
  g_autofree char *dir = NULL;
  g_autofree char *png = NULL;
  g_autofree char *svg = NULL;
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  cairo_surface_t *img;

  dir = g_dir_make_tmp("tdm-chart-XXXXXX", &error);
  g_assert_no_error(error);
  png = g_build_filename(dir, "loss.png", NULL);
  svg = g_build_filename(dir, "loss.svg", NULL);

  g_assert_true(tdm_chart_export_png(chart, png, 640, 360, NULL, &error));
  g_assert_no_error(error);
  img = cairo_image_surface_create_from_png(png);
  g_assert_cmpint(cairo_surface_status(img), ==, CAIRO_STATUS_SUCCESS);
  g_assert_cmpint(cairo_image_surface_get_width(img), ==, 640);
  g_assert_cmpint(cairo_image_surface_get_height(img), ==, 360);
  g_assert_cmpint(count_dark(img, 0, 0, 640, 360), >, 500);
  cairo_surface_destroy(img);

  g_assert_true(tdm_chart_export_svg(chart, svg, 640, 360, NULL, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(svg, &text, NULL, &error));
  g_assert_true(g_str_has_prefix(text, "<?xml") || strstr(text, "<svg") != NULL);
  g_assert_nonnull(strstr(text, "640"));

  g_assert_false(tdm_chart_export_png(chart, "/nonexistent/dir/loss.png", 10, 10, NULL, &error));
  g_assert_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  g_clear_error(&error);
  g_assert_false(tdm_chart_export_svg(chart, "/nonexistent/dir/loss.svg", 10, 10, NULL, &error));
  g_assert_nonnull(error);

  g_unlink(png);
  g_unlink(svg);
  g_rmdir(dir);
  g_assert_finalize_object(chart);
}

static void
test_export_csv(void)
{
  TdmChart *chart = new_chart();
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  guint a, b, r;
  int fd;

  tdm_chart_set_x_label(chart, "Elapsed");
  tdm_chart_set_x_unit(chart, "s");
  a = tdm_chart_add_series(chart, "GPU 0", NULL, TDM_CHART_STYLE_LINE);
  b = tdm_chart_add_series(chart, "GPU 1", NULL, TDM_CHART_STYLE_LINE);
  r = tdm_chart_add_series(chart, "capacity", NULL, TDM_CHART_STYLE_REFERENCE);
  tdm_chart_append(chart, a, 0.5, 10);
  tdm_chart_append(chart, b, 0.5, 20);
  tdm_chart_append(chart, a, 1, 11);
  tdm_chart_append(chart, r, 0, 80);

  fd = g_file_open_tmp("tdm-chart-XXXXXX.csv", &path, &error);
  g_assert_no_error(error);
  close(fd);
  g_assert_true(tdm_chart_export_csv(chart, path, NULL, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(path, &text, NULL, &error));
  g_assert_cmpstr(text, ==,
                  "\"Elapsed (s)\",\"GPU 0\",\"GPU 1\"\n"
                  "0.5,10,20\n"
                  "1,11,\n");
  g_unlink(path);
  g_assert_finalize_object(chart);
}

/* ---- SVG text and the run's settings ------------------------------ */

typedef struct {
  GPtrArray *elements;  /* every element's name, in order */
  GPtrArray *texts;     /* the content of each <text> */
  GString *current;     /* inside a <text>, else NULL */
} SvgScan;

static void
svg_start(GMarkupParseContext *context, const char *name, const char **attr_names,
          const char **attr_values, gpointer data, GError **error)
{
  SvgScan *scan = data;

  g_ptr_array_add(scan->elements, g_strdup(name));
  if (g_str_equal(name, "text"))
    scan->current = g_string_new(NULL);
}

static void
svg_end(GMarkupParseContext *context, const char *name, gpointer data, GError **error)
{
  SvgScan *scan = data;

  if (g_str_equal(name, "text") && scan->current) {
    g_ptr_array_add(scan->texts, g_string_free(scan->current, FALSE));
    scan->current = NULL;
  }
}

static void
svg_text(GMarkupParseContext *context, const char *text, gsize len, gpointer data,
         GError **error)
{
  SvgScan *scan = data;

  if (scan->current)
    g_string_append_len(scan->current, text, (gssize)len);
}

static gboolean
has_string(GPtrArray *list, const char *s)
{
  for (guint i = 0; i < list->len; i++)
    if (g_str_equal(list->pdata[i], s))
      return TRUE;
  return FALSE;
}

static void
scan_svg(const char *doc, SvgScan *scan)
{
  static const GMarkupParser parser = {svg_start, svg_end, svg_text, NULL, NULL};
  g_autoptr(GError) error = NULL;
  GMarkupParseContext *context;

  scan->elements = g_ptr_array_new_with_free_func(g_free);
  scan->texts = g_ptr_array_new_with_free_func(g_free);
  scan->current = NULL;
  context = g_markup_parse_context_new(&parser, 0, scan, NULL);
  g_assert_true(g_markup_parse_context_parse(context, doc, -1, &error));
  g_assert_no_error(error);
  g_assert_true(g_markup_parse_context_end_parse(context, &error));
  g_assert_no_error(error);
  g_markup_parse_context_free(context);
}

static void
test_export_svg_text(void)
{
  TdmChart *chart = new_chart();
  g_autofree char *doc = NULL;
  cairo_rectangle_t extents = {0, 0, 640, 400};
  cairo_surface_t *surface;
  cairo_t *cr;
  SvgScan scan;
  Frame f;
  char buf[64];
  guint a, b, n_ticks = 0;

  tdm_chart_set_title(chart, "Memory & <load>");
  tdm_chart_set_x_label(chart, "Epoch");
  tdm_chart_set_y_label(chart, "Memory");
  a = tdm_chart_add_series(chart, "cpu 1", NULL, TDM_CHART_STYLE_LINE);
  b = tdm_chart_add_series(chart, "cuda:0", NULL, TDM_CHART_STYLE_DASHED);
  for (int i = 0; i <= 40; i++) {
    tdm_chart_append(chart, a, i * 0.1, 100 + 3 * i);
    tdm_chart_append(chart, b, i * 0.1, 250 - 2 * i);
  }

  doc = tdm_chart_to_svg(chart, 640, 400, NULL);
  scan_svg(doc, &scan);

  /* The layout the frame computes for this size, as the exporter measures text. */
  surface = cairo_recording_surface_create(CAIRO_CONTENT_COLOR_ALPHA, &extents);
  cr = cairo_create(surface);
  tdm_chart_frame_init(chart, &f, cr, 640, 400, FALSE);
  g_assert_true(tdm_chart_frame_layout(chart, &f));
  g_assert_cmpuint(f.xa.n_ticks, >=, 2);
  g_assert_cmpuint(f.ya.n_ticks, >=, 2);
  for (guint i = 0; i < f.xa.n_ticks; i++, n_ticks++) {
    tdm_chart_axis_format_tick(&f.xa, f.xa.ticks[i], buf, sizeof buf);
    g_assert_true(has_string(scan.texts, buf));
  }
  for (guint i = 0; i < f.ya.n_ticks; i++, n_ticks++) {
    tdm_chart_axis_format_tick(&f.ya, f.ya.ticks[i], buf, sizeof buf);
    g_assert_true(has_string(scan.texts, buf));
  }
  tdm_chart_frame_clear(&f);
  cairo_destroy(cr);
  cairo_surface_destroy(surface);

  /* Title (escaped in the file, whole when parsed), legend and axis titles. */
  g_assert_true(has_string(scan.texts, "Memory & <load>"));
  g_assert_true(has_string(scan.texts, "cpu 1"));
  g_assert_true(has_string(scan.texts, "cuda:0"));
  g_assert_true(has_string(scan.texts, "Epoch"));
  g_assert_true(has_string(scan.texts, "Memory"));
  g_assert_cmpuint(scan.texts->len, ==, n_ticks + 5);

  /* The series, grid and swatches as paths, inside the plot's clip; no glyph
   * outlines (cairo's SVG surface writes <symbol id="glyph…"> and <use>s). */
  g_assert_true(has_string(scan.elements, "path"));
  g_assert_true(has_string(scan.elements, "clipPath"));
  g_assert_false(has_string(scan.elements, "symbol"));
  g_assert_false(has_string(scan.elements, "use"));
  g_assert_false(has_string(scan.elements, "image"));
  g_assert_null(strstr(doc, "glyph"));
  /* A dashed series stays dashed. */
  g_assert_nonnull(strstr(doc, "stroke-dasharray=\"6 4\""));

  g_ptr_array_unref(scan.elements);
  g_ptr_array_unref(scan.texts);
  g_assert_finalize_object(chart);
}

/* Each export says which run it comes from: the engine's names for the settings,
 * the version and the date. */
static void
test_export_provenance(void)
{
  TdmChart *chart = sample_chart();
  g_autoptr(TdmConfig) config = tdm_config_new();
  g_autoptr(GDateTime) when = g_date_time_new_utc(2026, 12, 3, 14, 5, 0);
  g_autoptr(TdmExportInfo) info = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp("tdm-chart-XXXXXX", NULL);
  g_autofree char *png = g_build_filename(dir, "loss.png", NULL);
  g_autofree char *csv_path = g_build_filename(dir, "loss.csv", NULL);
  g_autofree char *csv = NULL;
  g_autofree char *doc = NULL;
  g_autofree char *caption = NULL;
  g_autoptr(GdkPixbuf) pixbuf = NULL;
  SvgScan scan;

  g_free(config->dataset);
  config->dataset = g_strdup("/データ/my\nfolder");
  g_assert_true(tdm_config_set_devices(config, "cpu:2", &error));
  config->batch = 256;
  config->seed = 7;
  info = tdm_run_export_info_new(config, when);
  g_assert_cmpstr(tdm_export_info_lookup(info, "date"), ==, "2026-12-03T14:05:00Z");
  /* A line break in a value would end a CSV comment early. */
  g_assert_cmpstr(tdm_export_info_lookup(info, "dataset"), ==, "/データ/my folder");

  /* CSV: comment lines first, then the table as before. */
  g_assert_true(tdm_chart_export_csv(chart, csv_path, info, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(csv_path, &csv, NULL, NULL));
  g_assert_true(g_str_has_prefix(csv, "# dataset: /データ/my folder\n# network: mlp\n"
                                      "# devices: cpu,cpu\n"));
  g_assert_nonnull(strstr(csv, "\n# batch: 256\n"));
  g_assert_nonnull(strstr(csv, "\n# seed: 7\n"));
  g_assert_nonnull(strstr(csv, "\n# date: 2026-12-03T14:05:00Z\n\"Elapsed (s)\",train,test\n"));

  /* PNG: text chunks a viewer (and gdk-pixbuf) reads back. */
  g_assert_true(tdm_chart_export_png(chart, png, 320, 200, info, &error));
  g_assert_no_error(error);
  pixbuf = gdk_pixbuf_new_from_file(png, &error);
  g_assert_no_error(error);
  g_assert_cmpint(gdk_pixbuf_get_width(pixbuf), ==, 320);
  g_assert_cmpstr(gdk_pixbuf_get_option(pixbuf, "tEXt::devices"), ==, "cpu,cpu");
  /* Beyond Latin-1 (a tEXt chunk's encoding) the value goes as UTF-8 in an iTXt. */
  g_assert_cmpstr(gdk_pixbuf_get_option(pixbuf, "tEXt::dataset"), ==, "/データ/my folder");
  g_assert_cmpstr(gdk_pixbuf_get_option(pixbuf, "tEXt::lr"), ==, "0.001");
  g_assert_cmpstr(gdk_pixbuf_get_option(pixbuf, "tEXt::Title"), ==, "Loss");
  g_assert_true(g_str_has_prefix(gdk_pixbuf_get_option(pixbuf, "tEXt::Software"), "Tandem "));

  /* SVG: the settings as metadata and a caption line that is drawn. */
  doc = tdm_chart_to_svg(chart, 640, 400, info);
  scan_svg(doc, &scan);
  caption = tdm_export_info_to_caption(info);
  g_assert_nonnull(strstr(caption, "batch 256"));
  g_assert_nonnull(strstr(caption, "seed 7"));
  /* In lines that fit the width, broken between settings, together the caption. */
  {
    g_autoptr(GString) joined = g_string_new(NULL);
    guint n_lines = 0;

    for (guint i = 0; i < scan.texts->len; i++) {
      const char *t = scan.texts->pdata[i];

      if (!g_str_has_prefix(t, "Tandem ") && !(joined->len && strstr(caption, t)))
        continue;
      if (joined->len)
        g_string_append(joined, " · ");
      g_string_append(joined, t);
      n_lines++;
    }
    g_assert_cmpstr(joined->str, ==, caption);
    g_assert_cmpuint(n_lines, >=, 2);   /* 640 px cannot hold it on one line */
  }
  g_assert_true(has_string(scan.elements, "metadata"));
  g_assert_true(has_string(scan.elements, "desc"));
  g_assert_nonnull(strstr(doc, "<tandem:setting name=\"batch\">256</tandem:setting>"));

  g_ptr_array_unref(scan.elements);
  g_ptr_array_unref(scan.texts);
  g_unlink(png);
  g_unlink(csv_path);
  g_rmdir(dir);
  g_assert_finalize_object(chart);
}

void
test_chart_add_export(void)
{
  g_test_add_func("/chart/export/png-svg", test_export_png_svg);
  g_test_add_func("/chart/export/csv", test_export_csv);
  g_test_add_func("/chart/export/svg-text", test_export_svg_text);
  g_test_add_func("/chart/export/provenance", test_export_provenance);
}
