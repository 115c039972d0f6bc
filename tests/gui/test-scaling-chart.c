/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-scaling-chart.c: TdmScalingChart fed by the engine's scaling experiment over 1
 * and 2 CPU workers: two points, the first on the ideal line (speed-up 1), points
 * inside the plot and in device order, y scaled so that the ideal line reaches the
 * top at N devices; a point for a device count replaces the earlier one. No pixels,
 * and no measured speed is compared with a number. */

#include <gtk/gtk.h>
#include <math.h>

#include "tdm-draw.h"
#include "tdm-experiment.h"
#include "tdm-scaling-chart.h"
#include "tdm-scaling-table.h"

static void
on_point (const TdmScalingPoint *point,
          gpointer               data)
{
  tdm_scaling_chart_add_point (TDM_SCALING_CHART (data), point);
}

static void
test_driver_points (void)
{
  TdmScalingChart *chart = g_object_ref_sink (TDM_SCALING_CHART (tdm_scaling_chart_new ()));
  g_autoptr(TdmConfig) cfg = tdm_config_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmExperiment) experiment = NULL;
  const double W = 600, H = 400;
  graphene_point_t one, two, ideal_one, ideal_two;

  g_free (cfg->dataset);
  cfg->dataset = g_strdup ("synthetic");
  g_free (cfg->network);
  cfg->network = g_strdup ("fc16,relu,fc10");
  g_assert_true (tdm_config_set_devices (cfg, "cpu:2", &error));
  /* As tandem-train scaling runs it: the experiment on this thread, each point to the
   * chart as it is measured. */
  experiment = tdm_experiment_new_scaling (cfg, TDM_SCALING_STRONG, 30, &error);
  g_assert_no_error (error);
  tdm_experiment_set_point_sink (experiment, on_point, chart);
  g_assert_true (tdm_experiment_run (experiment, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (tdm_scaling_chart_get_n_points (chart), ==, 2);

  g_assert_true (tdm_scaling_chart_point_position (chart, W, H, 1, FALSE, &one));
  g_assert_true (tdm_scaling_chart_point_position (chart, W, H, 2, FALSE, &two));
  g_assert_true (tdm_scaling_chart_point_position (chart, W, H, 1, TRUE, &ideal_one));
  g_assert_true (tdm_scaling_chart_point_position (chart, W, H, 2, TRUE, &ideal_two));
  g_assert_false (tdm_scaling_chart_point_position (chart, W, H, 3, FALSE, &one));
  g_assert_true (tdm_scaling_chart_point_position (chart, W, H, 1, FALSE, &one));
  /* One device is the baseline: on the ideal line. */
  g_assert_cmpfloat (fabs (one.y - ideal_one.y), <, 1e-3);
  g_assert_cmpfloat (one.x, <, two.x);
  g_assert_cmpfloat (fabs (two.x - ideal_two.x), <, 1e-3);
  for (int k = 0; k < 2; k++)
    {
      graphene_point_t *p = k == 0 ? &one : &two;
      g_assert_cmpfloat (p->x, >=, 0);
      g_assert_cmpfloat (p->x, <=, W);
      g_assert_cmpfloat (p->y, >=, 0);
      g_assert_cmpfloat (p->y, <=, H);
    }
  g_assert_cmpfloat (tdm_scaling_chart_get_y_max (chart), >=, 2);

  /* Shown in a window it draws and goes away cleanly. */
  GtkWidget *window = gtk_window_new ();
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (chart));
  gtk_window_present (GTK_WINDOW (window));
  for (int i = 0; i < 20; i++)
    g_main_context_iteration (NULL, FALSE);
  gtk_window_destroy (GTK_WINDOW (window));
  g_assert_finalize_object (chart);
}

static void
test_scale (void)
{
  TdmScalingChart *chart = g_object_ref_sink (TDM_SCALING_CHART (tdm_scaling_chart_new ()));
  TdmScalingPoint a = { .index = 0, .count = 4, .devices = 1, .speedup = 1, .efficiency = 1 };
  TdmScalingPoint b = { .index = 3, .count = 4, .devices = 4, .speedup = 3, .efficiency = 0.75 };
  graphene_point_t p, top;

  tdm_scaling_chart_add_point (chart, &a);
  tdm_scaling_chart_add_point (chart, &b);
  /* The ideal 4× is the top of the scale; 3× lies a quarter of the plot below it. */
  g_assert_cmpfloat (tdm_scaling_chart_get_y_max (chart), ==, 4);
  g_assert_true (tdm_scaling_chart_point_position (chart, 400, 300, 4, TRUE, &top));
  g_assert_true (tdm_scaling_chart_point_position (chart, 400, 300, 4, FALSE, &p));
  graphene_point_t zero;
  g_assert_true (tdm_scaling_chart_point_position (chart, 400, 300, 1, TRUE, &zero));
  double per_unit = (zero.y - top.y) / 3;   /* from 1× to 4× */
  g_assert_cmpfloat (fabs ((p.y - top.y) - per_unit), <, 1e-3);

  /* A faster measurement (5×) raises the scale past the ideal; the point replaces. */
  b.speedup = 5;
  tdm_scaling_chart_add_point (chart, &b);
  g_assert_cmpuint (tdm_scaling_chart_get_n_points (chart), ==, 2);
  g_assert_cmpfloat (tdm_scaling_chart_get_y_max (chart), ==, 5);
  tdm_scaling_chart_clear (chart);
  g_assert_cmpuint (tdm_scaling_chart_get_n_points (chart), ==, 0);
  g_assert_finalize_object (chart);
}

/* A point's spread: the scale makes room for the fastest run; the table gives the
 * slowest and fastest apart from the median, speed-up (×) and efficiency (%) in
 * columns of their own. */
static void
test_spread (void)
{
  TdmScalingChart *chart = g_object_ref_sink (TDM_SCALING_CHART (tdm_scaling_chart_new ()));
  TdmScalingPoint a = { .index = 0, .count = 2, .devices = 1, .speedup = 1, .efficiency = 1,
                        .samples_per_second = 1000, .runs = 1 };
  TdmScalingPoint b = { .index = 1, .count = 2, .devices = 2, .speedup = 1.8, .efficiency = 0.9,
                        .samples_per_second = 1800, .samples_per_second_min = 1700,
                        .samples_per_second_max = 2100, .speedup_min = 1.7,
                        .speedup_max = 2.1, .runs = 3 };
  g_auto(GStrv) one = NULL;
  g_auto(GStrv) two = NULL;

  tdm_scaling_chart_add_point (chart, &a);
  tdm_scaling_chart_add_point (chart, &b);
  g_assert_cmpfloat (tdm_scaling_chart_get_y_max (chart), ==, 2.1);

  one = tdm_scaling_table_row_text (&a);
  two = tdm_scaling_table_row_text (&b);
  g_assert_cmpstr (two[3], ==, "1.80×");
  g_assert_cmpstr (two[4], ==, "90 %");
  g_assert_cmpstr (two[9], ==, "1,700–2,100");
  g_assert_cmpstr (two[10], ==, "1.70–2.10×");
  g_assert_cmpstr (two[11], ==, "3");
  g_assert_cmpstr (one[9], ==, "—");
  g_assert_finalize_object (chart);
}

/* Whether the segment a–b passes through `r`: walked in steps of a tenth of a
 * pixel (the test's own way, not the chart's). */
static gboolean
crosses (const graphene_point_t *a,
         const graphene_point_t *b,
         const graphene_rect_t  *r)
{
  double length = hypot (b->x - a->x, b->y - a->y);
  int steps = MAX (1, (int) ceil (length * 10));

  for (int i = 0; i <= steps; i++)
    {
      graphene_point_t q = GRAPHENE_POINT_INIT (a->x + (b->x - a->x) * i / steps,
                                                a->y + (b->y - a->y) * i / steps);

      if (graphene_rect_contains_point (r, &q))
        return TRUE;
    }
  return FALSE;
}

/* A typical sweep over 1, 2 and 4 devices (on the ideal line, under it, and over
 * it, and slower): at 336, 360 and 1024 px each point's label lies inside the chart,
 * clear of the ideal line, the measured line and the other labels. */
static void
test_labels_off_line (void)
{
  static const double speedups[][3] = {
    { 1, 1.8, 3.2 },   /* under the line, as most runs */
    { 1, 2, 4 },       /* on it */
    { 1, 2.2, 4.3 },   /* over it: faster than ideal (caches) */
    { 1, 0.9, 0.8 },   /* slower with more devices */
  };
  static const int devices[3] = { 1, 2, 4 };
  static const double sizes[][2] = { { 360, 280 }, { 1024, 400 }, { 336, 280 } };
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 4, 4);
  cairo_t *cr = cairo_create (surface);

  for (guint k = 0; k < G_N_ELEMENTS (speedups); k++)
    for (guint z = 0; z < G_N_ELEMENTS (sizes); z++)
      {
        TdmScalingChart *chart = g_object_ref_sink (TDM_SCALING_CHART (tdm_scaling_chart_new ()));
        double W = sizes[z][0], H = sizes[z][1];
        graphene_rect_t rects[3];
        graphene_point_t a, b;

        for (int i = 0; i < 3; i++)
          {
            TdmScalingPoint p = { .index = i, .count = 4, .devices = devices[i],
                                  .speedup = speedups[k][i],
                                  .efficiency = speedups[k][i] / devices[i], .runs = 1 };

            tdm_scaling_chart_add_point (chart, &p);
          }
        tdm_draw_set_font (cr, GTK_WIDGET (chart));
        g_assert_true (tdm_scaling_chart_point_position (chart, W, H, 1, TRUE, &a));
        g_assert_true (tdm_scaling_chart_point_position (chart, W, H, 4, TRUE, &b));
        g_assert_false (tdm_scaling_chart_label_rect (chart, cr, W, H, 3, &rects[0]));
        for (int i = 0; i < 3; i++)
          {
            graphene_rect_t *r = &rects[i];
            graphene_point_t p;

            g_assert_true (tdm_scaling_chart_label_rect (chart, cr, W, H, devices[i], r));
            g_assert_true (tdm_scaling_chart_point_position (chart, W, H, devices[i], FALSE, &p));
            g_test_message ("sweep %u, %.0f px, %d devices: point (%.0f, %.0f), label %.0f,%.0f %.0f×%.0f",
                            k, W, devices[i], p.x, p.y, r->origin.x, r->origin.y,
                            r->size.width, r->size.height);
            g_assert_cmpfloat (r->size.width, >, 20);
            g_assert_cmpfloat (r->size.height, >, 8);
            g_assert_cmpfloat (r->origin.x, >=, a.x);   /* right of the speed-up axis */
            g_assert_cmpfloat (r->origin.y, >=, 0);
            g_assert_cmpfloat (r->origin.x + r->size.width, <=, W);
            g_assert_cmpfloat (r->origin.y + r->size.height, <=, H);
            if (crosses (&a, &b, r))
              g_error ("sweep %u at %.0f px: the label of %d devices crosses the ideal line",
                       k, W, devices[i]);
            /* Nor the measured line. */
            for (int j = 0; j + 1 < 3; j++)
              {
                graphene_point_t from, to;

                g_assert_true (tdm_scaling_chart_point_position (chart, W, H, devices[j], FALSE, &from));
                g_assert_true (tdm_scaling_chart_point_position (chart, W, H, devices[j + 1], FALSE, &to));
                if (crosses (&from, &to, r))
                  g_error ("sweep %u at %.0f px: the label of %d devices crosses the measured line",
                           k, W, devices[i]);
              }
            /* Beside its point: near enough to read as its label. */
            g_assert_cmpfloat (fabs (r->origin.y + r->size.height / 2 - p.y), <, 4 * r->size.height);
          }
        for (int i = 0; i < 3; i++)
          for (int j = i + 1; j < 3; j++)
            g_assert_false (graphene_rect_intersection (&rects[i], &rects[j], NULL));
        g_assert_finalize_object (chart);
      }
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  g_test_add_func ("/scaling-chart/driver-points", test_driver_points);
  g_test_add_func ("/scaling-chart/scale", test_scale);
  g_test_add_func ("/scaling-chart/spread", test_spread);
  g_test_add_func ("/scaling-chart/labels-off-line", test_labels_off_line);
  return g_test_run ();
}
