/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-classroom-scaling.c — part of test-classroom: the Scaling page. A scaling run
 * over 1 and 2 CPU workers gives two points and is kept (in the History page, as a
 * CSV export), weak scaling keeps the batch per device, a cancelled run keeps nothing,
 * and one device is refused in words.
 */

#include <string.h>

#include <glib/gstdio.h>

#include <adwaita.h>

#include "tdm-device-row.h"
#include "tdm-history.h"
#include "tdm-run.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling-page.h"
#include "tdm-window.h"
#include "test-classroom.h"
#include "window-test-util.h"

/* The newest sweep the window's History page lists, or NULL. */
static TdmRunItem *
listed_sweep(TdmWindow *window)
{
  GListModel *store = G_LIST_MODEL(tdm_window_get_history(window));
  TdmRunItem *found = NULL;

  g_assert_true(wait_for(not_loading, store, 30));
  /* Listed by start, oldest first. */
  for (guint i = 0; i < g_list_model_get_n_items(store); i++) {
    g_autoptr(TdmRunItem) item = g_list_model_get_item(store, i);

    if (tdm_run_item_is_sweep(item))
      found = item;
  }
  return found;
}

/* The sweep a test kept, deleted from its row on the History page as a person does,
 * out of the history the other tests see (for good once the window goes). */
static void
forget_sweep(TdmWindow *window)
{
  TdmRunItem *item = listed_sweep(window);
  GtkWidget *row;

  g_assert_nonnull(item);
  row = history_row(tdm_window_get_history_view(window), item);
  g_assert_nonnull(row);
  g_assert_true(gtk_widget_activate_action(row, "run.delete", NULL));
  g_assert_null(listed_sweep(window));
}

/* A scaling run over 1 and 2 CPU workers: two points, kept and exported. */
static void
test_scaling_run(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 200, 1);
  TdmScalingPage *page = window_child(window, "scaling_page");
  TdmScalingChart *chart = TDM_SCALING_CHART(tdm_scaling_page_get_chart(page));
  g_autoptr(GError) tmp_error = NULL;
  g_autofree char *dir = g_dir_make_tmp("tandem-test-XXXXXX", &tmp_error);
  g_assert_no_error(tmp_error);
  g_autofree char *csv_path = g_build_filename(dir, "scaling.csv", NULL);
  g_autofree char *svg_path = g_build_filename(dir, "scaling.svg", NULL);
  g_autofree char *kept = NULL;
  g_autofree char *svg = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GError) error = NULL;
  TdmRunItem *sweep;

  g_assert_null(listed_sweep(window));
  choose_sweep(window, TDM_SCALING_STRONG, 100);
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL));
  g_assert_true(sweep_running(window));
  /* One thing at a time: no training run while the scaling run measures. */
  g_assert_false(tdm_window_get_can_start(window));
  g_assert_cmpstr(adw_view_stack_get_visible_child_name(window_child(window, "view_stack")), ==, "scaling");

  g_assert_true(wait_for(sweep_over, window, 300));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  g_assert_cmpuint(tdm_scaling_chart_get_n_points(chart), ==, 2);
  for (guint i = 0; i < 2; i++) {
    const TdmScalingPoint *p = tdm_scaling_chart_get_point(chart, i);

    g_assert_cmpint(p->devices, ==, (int)i + 1);
    g_assert_cmpint(p->batch, ==, 200);
    g_assert_cmpfloat(p->samples_per_second, >, 0);
  }
  g_assert_cmpfloat(tdm_scaling_chart_get_point(chart, 0)->speedup, ==, 1.0);
  g_assert_true(tdm_window_get_can_start(window));

  /* Kept in the run history, listed on the History page under the name the toast
   * gives (tests/engine/test-history-experiments.c checks the record), and exported. */
  sweep = listed_sweep(window);
  g_assert_nonnull(sweep);
  {
    g_autofree char *toast = toast_text(window);
    g_autofree char *kept_as = g_strdup_printf("Scaling run kept in the history as “%s”",
                                               tdm_run_item_get_name(sweep));

    g_assert_nonnull(strstr(toast, kept_as));
    g_assert_null(strstr(toast, "could not be written"));
  }
  g_assert_true(tdm_scaling_page_write_csv(page, csv_path, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(csv_path, &kept, NULL, NULL));
  /* The sweep and the settings it started from as `# key: value` lines,
   * then the table. */
  g_assert_true(g_str_has_prefix(kept, "# scaling: strong\n# dataset: "));
  g_assert_nonnull(strstr(kept, "\n# batch: 200\n"));
  g_assert_nonnull(strstr(kept, "\n# tandem: "));
  lines = g_strsplit(strstr(kept, "\ndevices,") + 1, "\n", -1);
  g_strchomp(lines[2]);
  g_assert_cmpuint(g_strv_length(lines), ==, 4);
  g_assert_cmpstr(lines[3], ==, "");
  g_assert_true(g_str_has_prefix(lines[0], "devices,batch,steps,samples_per_second"));
  g_assert_true(g_str_has_prefix(lines[1], "1,200,"));
  g_assert_true(g_str_has_prefix(lines[2], "2,200,"));
  /* The same points exported from the kept sweep, as tandem-train --export-run and the
   * History page do: past the `#` lines, the same bytes. */
  {
    g_autoptr(TdmHistory) history = tdm_history_new(NULL);
    g_autofree char *cli_path = g_build_filename(dir, "export-run.csv", NULL);
    g_autofree char *cli = NULL;
    const char *id = tdm_run_item_get_id(sweep);

    g_assert_true(tdm_history_export_csv(history, id, cli_path, &error));
    g_assert_no_error(error);
    g_assert_true(g_file_get_contents(cli_path, &cli, NULL, NULL));
    g_assert_nonnull(strstr(cli, "\ndevices,"));
    g_assert_cmpstr(strstr(cli, "\ndevices,"), ==, strstr(kept, "\ndevices,"));
    g_unlink(cli_path);
  }
  g_assert_true(tdm_scaling_page_write_svg(page, svg_path, 800, 500, &error));
  g_assert_no_error(error);
  g_assert_true(g_file_get_contents(svg_path, &svg, NULL, NULL));
  g_assert_nonnull(strstr(svg, "<svg"));
  /* Labels as text, not glyph outlines; the settings in its metadata. */
  g_assert_nonnull(strstr(svg, ">Devices</text>"));
  g_assert_nonnull(strstr(svg, ">2</text>"));
  g_assert_null(strstr(svg, "glyph"));
  g_assert_nonnull(strstr(svg, "<tandem:setting name=\"batch\">200</tandem:setting>"));
  /* Well-formed XML, the labels Pango laid out included. */
  {
    static const GMarkupParser any = {NULL, NULL, NULL, NULL, NULL};
    g_autoptr(GMarkupParseContext) xml = g_markup_parse_context_new(&any, 0, NULL, NULL);

    g_assert_true(g_markup_parse_context_parse(xml, svg, -1, &error));
    g_assert_true(g_markup_parse_context_end_parse(xml, &error));
    g_assert_no_error(error);
  }
  /* A folder that is not there is an error with a message, not a crash. */
  g_assert_false(tdm_scaling_page_write_csv(page, "/nonexistent-folder/x.csv", &error));
  g_assert_nonnull(error);

  forget_sweep(window);
  g_unlink(csv_path);
  g_unlink(svg_path);
  g_rmdir(dir);
  destroy_window(window);
}

/* Weak scaling keeps the batch per device: 100 on one worker, 200 on two. */
static void
test_scaling_weak(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 200, 1);
  TdmScalingPage *page = window_child(window, "scaling_page");
  TdmScalingChart *chart = TDM_SCALING_CHART(tdm_scaling_page_get_chart(page));

  choose_sweep(window, TDM_SCALING_WEAK, 100);
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL));
  g_assert_true(wait_for(sweep_over, window, 300));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  g_assert_cmpuint(tdm_scaling_chart_get_n_points(chart), ==, 2);
  g_assert_cmpint(tdm_scaling_chart_get_point(chart, 0)->batch, ==, 100);
  g_assert_cmpint(tdm_scaling_chart_get_point(chart, 1)->batch, ==, 200);
  forget_sweep(window);
  destroy_window(window);
}

/* Cancelled at once: the run ends, says so, and keeps nothing. */
static void
test_scaling_cancel(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 200, 1);
  GtkLabel *status = template_child(window_child(window, "scaling_page"), "status_label");

  choose_sweep(window, TDM_SCALING_STRONG, 5000);
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL));
  g_assert_true(sweep_running(window));
  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-cancel", NULL));
  g_assert_true(wait_for(sweep_over, window, 120));
  g_assert_cmpstr(gtk_label_get_label(status), ==, "Cancelled.");
  /* Nothing kept: the History page lists no sweep. */
  g_assert_null(listed_sweep(window));
  g_assert_true(tdm_window_get_can_start(window));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  destroy_window(window);
}

/* One device gives no scaling: said in words, nothing starts. */
static void
test_scaling_needs_two(void)
{
  TdmWindow *window = window_for_run("fc32,relu,fc10", 200, 1);

  tdm_device_row_set_workers(row_where(window, TRUE), 1);
  drain();
  gtk_widget_activate_action(GTK_WIDGET(window), "win.scaling-run", NULL);
  g_assert_false(sweep_running(window));
  g_assert_true(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));
  g_assert_nonnull(strstr(gtk_label_get_label(window_child(window, "error_label")), "two devices"));
  destroy_window(window);
}

void
test_classroom_add_scaling(void)
{
  g_test_add_func("/classroom/scaling", test_scaling_run);
  g_test_add_func("/classroom/scaling-weak", test_scaling_weak);
  g_test_add_func("/classroom/scaling-cancel", test_scaling_cancel);
  g_test_add_func("/classroom/scaling-needs-two", test_scaling_needs_two);
}
