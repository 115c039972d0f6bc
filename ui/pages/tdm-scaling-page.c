/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling-page.c: the "Scaling" page, a view of a scaling sweep.
 *
 * The sweep is the engine's scaling experiment; the page makes it of its mode and
 * steps, and the window drives it with its one TdmExperimentRunner, which keeps the
 * sweep in the window's run history as a sweep record, as tandem-train scaling
 * --record keeps it (the window lists the record on the History page, or says why
 * there is none). The page only shows the runner it is given: each point as it
 * comes, the status and the cores note at the end. A history that cannot be written
 * costs the record, never the run.
 *
 * The page is a template (tdm-scaling-page.ui): a row of controls, a status line,
 * the chart and a table of the points (tdm-scaling-table.h, which the History page
 * shows kept sweeps with).
 */

#include "tdm-scaling-page.h"

#include <glib/gi18n.h>
#include <glib/gstdio.h>

#include "tdm-chart-svg.h"
#include "tdm-error.h"
#include "tdm-experiment-runner.h"
#include "tdm-export-info.h"
#include "tdm-precision-auto.h"
#include "tdm-run-export-info.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling-table.h"
#include "tdm-table-scroller.h"

#define DEFAULT_STEPS 200

struct _TdmScalingPage
{
  GtkWidget      parent_instance;

  GtkWidget     *scroller;
  GtkWidget     *mode_dropdown;
  GtkWidget     *steps_spin;
  GtkWidget     *run_button;
  GtkWidget     *cancel_button;
  GtkWidget     *status_label;
  GtkWidget     *cores_label;
  GtkWidget     *chart;
  GtkWidget     *table;
  GtkWidget     *table_scroller;

  TdmExperimentRunner *runner;    /* the sweep shown (the window's), or NULL */
  TdmExportInfo *info;            /* its settings and start, for the exports */
};

G_DEFINE_FINAL_TYPE (TdmScalingPage, tdm_scaling_page, GTK_TYPE_WIDGET)

/* Table ------------------------------------------------------------------- */

static void
tdm_scaling_page_fill_table (TdmScalingPage *self)
{
  TdmScalingChart *chart = TDM_SCALING_CHART (self->chart);
  guint n = tdm_scaling_chart_get_n_points (chart);
  g_autofree TdmScalingPoint *points = g_new0 (TdmScalingPoint, MAX (n, 1));

  for (guint i = 0; i < n; i++)
    points[i] = *tdm_scaling_chart_get_point (chart, i);
  tdm_scaling_table_set_points (self->table, points, n);
}

/* Running ----------------------------------------------------------------- */

static void
tdm_scaling_page_set_status (TdmScalingPage *self,
                             const char     *text)
{
  gtk_label_set_label (GTK_LABEL (self->status_label), text);
}

static void
tdm_scaling_page_point (TdmScalingPage        *self,
                        const TdmScalingPoint *point)
{
  g_autofree char *text = NULL;

  tdm_scaling_chart_add_point (TDM_SCALING_CHART (self->chart), point);
  tdm_scaling_page_fill_table (self);
  /* Translators: progress of a scaling run: points measured of how many, the
   * devices of the last one and its speed-up */
  text = g_strdup_printf (ngettext ("Measured %d of %d: %d device, %.2f× the speed of one",
                                    "Measured %d of %d: %d devices, %.2f× the speed of one",
                                    point->devices),
                          point->index + 1, point->count, point->devices, point->speedup);
  tdm_scaling_page_set_status (self, text);
}

/* After a sweep of CPU workers: the machine's cores beside the result, and how many
 * a speed-up needs (the engine's rule), so a flat curve on a small machine reads as
 * what it is. */
static void
tdm_scaling_page_say_cores (TdmScalingPage *self)
{
  TdmScalingChart *chart = TDM_SCALING_CHART (self->chart);
  guint n = tdm_scaling_chart_get_n_points (chart);
  const TdmScalingPoint *last;
  int cores, needed;
  g_autofree char *have = NULL;
  g_autofree char *text = NULL;

  if (n == 0)
    return;
  last = tdm_scaling_chart_get_point (chart, n - 1);
  if (last->cpu_threads <= 0)
    return;
  cores = tdm_scaling_cores_available ();
  needed = tdm_scaling_cores_needed (last->devices);
  /* Translators: after a scaling run of CPU workers: "This machine has 2 cores." */
  have = g_strdup_printf (ngettext ("This machine has %d core.", "This machine has %d cores.",
                                    cores),
                          cores);
  if (cores >= needed)
    /* Translators: after "This machine has N cores."; %d workers */
    text = g_strdup_printf (ngettext ("%s Enough for %d CPU worker to speed up: one core each, and one for the window and communication.",
                                      "%s Enough for %d CPU workers to speed up: one core each, and one for the window and communication.",
                                      last->devices),
                            have, last->devices);
  else
    /* Translators: after "This machine has N cores."; %d workers, %d cores */
    text = g_strdup_printf (ngettext ("%s %d CPU worker needs %d cores to run faster than one: one each, and one for the window and communication; with fewer they take turns.",
                                      "%s %d CPU workers need %d cores to run faster than one: one each, and one for the window and communication; with fewer they take turns.",
                                      last->devices),
                            have, last->devices, needed);
  gtk_label_set_label (GTK_LABEL (self->cores_label), text);
  gtk_widget_set_visible (self->cores_label, TRUE);
}

static void
tdm_scaling_page_done (TdmScalingPage *self,
                       const GError   *error)
{
  if (error == NULL)
    {
      g_autofree char *text = NULL;

      /* Translators: a scaling run is over; %d is the number of points */
      text = g_strdup_printf (ngettext ("Done: %d point measured.",
                                        "Done: %d points measured.",
                                        tdm_scaling_chart_get_n_points (TDM_SCALING_CHART (self->chart))),
                              tdm_scaling_chart_get_n_points (TDM_SCALING_CHART (self->chart)));
      tdm_scaling_page_set_status (self, text);
      tdm_scaling_page_say_cores (self);
    }
  else if (g_error_matches (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_CANCELLED))
    tdm_scaling_page_set_status (self, _("Cancelled."));
  else
    {
      g_autofree char *text = g_strdup_printf (_("The scaling run failed: %s"), error->message);

      tdm_scaling_page_set_status (self, text);
    }

  gtk_widget_set_sensitive (self->mode_dropdown, TRUE);
  gtk_widget_set_sensitive (self->steps_spin, TRUE);
}

/* The sweep shown is no longer followed (what it drew stays). */
static void
tdm_scaling_page_drop_runner (TdmScalingPage *self)
{
  if (self->runner == NULL)
    return;
  g_signal_handlers_disconnect_by_data (self->runner, self);
  g_clear_object (&self->runner);
}

/* The mode and steps chosen in the page's controls. */
static TdmScalingMode
tdm_scaling_page_get_mode (TdmScalingPage *self)
{
  return gtk_drop_down_get_selected (GTK_DROP_DOWN (self->mode_dropdown)) == 1
           ? TDM_SCALING_WEAK : TDM_SCALING_STRONG;
}

static long
tdm_scaling_page_get_steps (TdmScalingPage *self)
{
  return gtk_spin_button_get_value_as_int (GTK_SPIN_BUTTON (self->steps_spin));
}

TdmExperiment *
tdm_scaling_page_new_experiment (TdmScalingPage   *self,
                                 const TdmConfig  *config,
                                 GError          **error)
{
  g_return_val_if_fail (TDM_IS_SCALING_PAGE (self), NULL);
  g_return_val_if_fail (config != NULL, NULL);

  if (!tdm_config_validate (config, error))
    return NULL;
  if (tdm_config_replica_count (config) < 2)
    {
      g_set_error_literal (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION,
                           _("A scaling run needs two devices or more: tick more GPUs, or give the CPU more workers."));
      return NULL;
    }
  return tdm_experiment_new_scaling (config, tdm_scaling_page_get_mode (self),
                                     tdm_scaling_page_get_steps (self), error);
}

void
tdm_scaling_page_show_runner (TdmScalingPage      *self,
                              TdmExperimentRunner *runner)
{
  const TdmConfig *config;

  g_return_if_fail (TDM_IS_SCALING_PAGE (self));
  g_return_if_fail (TDM_IS_EXPERIMENT_RUNNER (runner));
  g_return_if_fail (tdm_experiment_get_kind (tdm_experiment_runner_get_experiment (runner)) ==
                    TDM_EXPERIMENT_SCALING);
  g_return_if_fail (tdm_experiment_runner_get_running (runner) &&
                    tdm_experiment_runner_get_n_done (runner) == 0);

  tdm_scaling_page_drop_runner (self);
  config = tdm_experiment_get_config (tdm_experiment_runner_get_experiment (runner));
  g_clear_pointer (&self->info, tdm_export_info_free);
  self->info = tdm_run_export_info_new (config, NULL);
  /* Every point computes in what auto is for all the sweep's devices (point_config()). */
  tdm_run_export_info_set_precision (self->info, config->precision,
                                     tdm_precision_resolve_here (config->precision,
                                                                 config->devices,
                                                                 tdm_config_replica_count (config)));
  self->runner = g_object_ref (runner);
  g_signal_connect_object (self->runner, "point", G_CALLBACK (tdm_scaling_page_point), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->runner, "finished", G_CALLBACK (tdm_scaling_page_done), self,
                           G_CONNECT_SWAPPED);

  tdm_scaling_chart_clear (TDM_SCALING_CHART (self->chart));
  tdm_scaling_page_fill_table (self);
  tdm_scaling_page_set_status (self, _("Measuring one device…"));
  gtk_widget_set_visible (self->cores_label, FALSE);
  gtk_widget_set_sensitive (self->mode_dropdown, FALSE);
  gtk_widget_set_sensitive (self->steps_spin, FALSE);
}

void
tdm_scaling_page_cancel (TdmScalingPage *self)
{
  g_return_if_fail (TDM_IS_SCALING_PAGE (self));

  if (self->runner != NULL && tdm_experiment_runner_get_running (self->runner))
    {
      tdm_experiment_runner_stop (self->runner);
      tdm_scaling_page_set_status (self, _("Cancelling…"));
    }
}

GtkWidget *
tdm_scaling_page_get_chart (TdmScalingPage *self)
{
  g_return_val_if_fail (TDM_IS_SCALING_PAGE (self), NULL);

  return self->chart;
}

/* Export ------------------------------------------------------------------ */

gboolean
tdm_scaling_page_write_csv (TdmScalingPage  *self,
                            const char      *path,
                            GError         **error)
{
  TdmScalingChart *chart;
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(GArray) points = NULL;

  g_return_val_if_fail (TDM_IS_SCALING_PAGE (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  chart = TDM_SCALING_CHART (self->chart);
  /* Which sweep, then the settings it started from (tdm-export-info.h), as
   * `# key: value` lines: pandas reads the table with comment='#'. */
  if (self->info != NULL)
    {
      g_autofree char *comment = tdm_export_info_to_comment (self->info);

      g_string_append_printf (text, "# scaling: %s\n",
                              tdm_scaling_mode_name (tdm_scaling_page_get_mode (self)));
      g_string_append (text, comment);
    }
  /* The table as the engine writes a kept sweep's (tandem-train --export-run, the
   * History page): one writer, the same columns and digits. */
  points = g_array_sized_new (FALSE, FALSE, sizeof (TdmScalingPoint),
                              tdm_scaling_chart_get_n_points (chart));
  for (guint i = 0; i < tdm_scaling_chart_get_n_points (chart); i++)
    g_array_append_vals (points, tdm_scaling_chart_get_point (chart, i), 1);
  tdm_scaling_points_to_csv (text, (const TdmScalingPoint *) points->data, points->len);

  return g_file_set_contents (path, text->str, text->len, error);
}

gboolean
tdm_scaling_write_svg (TdmScalingChart      *chart,
                       const TdmExportInfo  *info,
                       const char           *path,
                       double                width,
                       double                height,
                       GError              **error)
{
  cairo_rectangle_t extents = { 0, 0, width, height };
  g_autoptr(TdmChartSvg) svg = NULL;
  g_autoptr(GPtrArray) lines = NULL;
  g_autoptr(GError) local = NULL;
  g_autofree char *doc = NULL;
  cairo_surface_t *surface;
  cairo_status_t status;
  GdkRGBA black = { 0, 0, 0, 1 };
  double chart_height = height;
  cairo_t *cr;

  g_return_val_if_fail (TDM_IS_SCALING_CHART (chart), FALSE);
  g_return_val_if_fail (path != NULL && width > 0 && height > 0, FALSE);

  /* Our own SVG writer (tdm-chart-svg.h): labels stay text, and the settings go in
   * the metadata and a caption line, as the dashboard's charts do. */
  surface = cairo_recording_surface_create (CAIRO_CONTENT_COLOR_ALPHA, &extents);
  cr = cairo_create (surface);
  svg = tdm_chart_svg_new (cr, (int) width, (int) height);
  if (info != NULL)
    {
      g_autofree char *caption = tdm_export_info_to_caption (info);

      lines = tdm_chart_svg_caption_lines (cr, caption, width - 16);
      chart_height = MAX (height / 2, height - lines->len * TDM_CHART_SVG_CAPTION_LINE - 6);
    }
  tdm_scaling_chart_draw (chart, cr, width, chart_height, &black);
  for (guint i = 0; lines != NULL && i < lines->len; i++)
    tdm_chart_svg_caption (svg, lines->pdata[i], 8,
                           chart_height + TDM_CHART_SVG_CAPTION_PX + 2 + i * TDM_CHART_SVG_CAPTION_LINE,
                           TDM_CHART_SVG_CAPTION_PX);
  status = cairo_status (cr);
  doc = tdm_chart_svg_finish (svg, _("Scaling"), info);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
  if (status == CAIRO_STATUS_SUCCESS && !g_file_set_contents (path, doc, -1, &local))
    {
      g_autofree char *name = g_filename_display_name (path);

      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, _("%s could not be written: %s"),
                   name, local->message);
      return FALSE;
    }

  if (status != CAIRO_STATUS_SUCCESS)
    {
      g_autofree char *name = g_filename_display_name (path);

      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, _("%s could not be written: %s"),
                   name, cairo_status_to_string (status));
      return FALSE;
    }
  return TRUE;
}

gboolean
tdm_scaling_page_write_svg (TdmScalingPage  *self,
                            const char      *path,
                            double           width,
                            double           height,
                            GError         **error)
{
  g_return_val_if_fail (TDM_IS_SCALING_PAGE (self), FALSE);

  return tdm_scaling_write_svg (TDM_SCALING_CHART (self->chart), self->info, path, width,
                                height, error);
}

/* GObject ----------------------------------------------------------------- */

static void
tdm_scaling_page_dispose (GObject *object)
{
  TdmScalingPage *self = TDM_SCALING_PAGE (object);

  tdm_scaling_page_drop_runner (self);
  gtk_widget_dispose_template (GTK_WIDGET (self), TDM_TYPE_SCALING_PAGE);
  g_clear_pointer (&self->info, tdm_export_info_free);

  G_OBJECT_CLASS (tdm_scaling_page_parent_class)->dispose (object);
}

static void
tdm_scaling_page_class_init (TdmScalingPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tdm_scaling_page_dispose;

  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "scalingpage");

  g_type_ensure (TDM_TYPE_SCALING_CHART);
  g_type_ensure (TDM_TYPE_TABLE_SCROLLER);
  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tandem/Tandem/ui/tdm-scaling-page.ui");
  gtk_widget_class_bind_template_child (widget_class, TdmScalingPage, scroller);
  gtk_widget_class_bind_template_child (widget_class, TdmScalingPage, mode_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TdmScalingPage, steps_spin);
  gtk_widget_class_bind_template_child (widget_class, TdmScalingPage, run_button);
  gtk_widget_class_bind_template_child (widget_class, TdmScalingPage, cancel_button);
  gtk_widget_class_bind_template_child (widget_class, TdmScalingPage, status_label);
  gtk_widget_class_bind_template_child (widget_class, TdmScalingPage, cores_label);
  gtk_widget_class_bind_template_child (widget_class, TdmScalingPage, chart);
  gtk_widget_class_bind_template_child (widget_class, TdmScalingPage, table_scroller);
}

static void
tdm_scaling_page_init (TdmScalingPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (self->steps_spin), DEFAULT_STEPS);
  self->table = tdm_scaling_table_new ();
  tdm_table_scroller_set_child (TDM_TABLE_SCROLLER (self->table_scroller), self->table);
  tdm_scaling_page_fill_table (self);
}

