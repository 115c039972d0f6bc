/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-scaling-chart.c: the scaling chart's axes (devices across, speed-up up), the
 * ideal line, the measured points and their phase split, in Cairo. */

#include "tdm-scaling-chart.h"
#include "tdm-draw.h"
#include "tdm-chart-svg.h"

#include <glib/gi18n.h>
#include <math.h>

#define LEFT   56.0
#define RIGHT  56.0   /* room for the last point's efficiency and split bar */
#define TOP    12.0
#define BOTTOM 58.0   /* tick numbers, the split bars, then the axis title under them */

struct _TdmScalingChart
{
  GtkWidget  parent_instance;
  GArray    *points;   /* TdmScalingPoint, by devices */
};

G_DEFINE_FINAL_TYPE (TdmScalingChart, tdm_scaling_chart, GTK_TYPE_WIDGET)

static int
tdm_scaling_chart_max_devices (TdmScalingChart *self)
{
  int n = 1;

  for (guint i = 0; i < self->points->len; i++)
    {
      const TdmScalingPoint *p = &g_array_index (self->points, TdmScalingPoint, i);
      n = MAX (n, MAX (p->devices, p->count));
    }
  return n;
}

double
tdm_scaling_chart_get_y_max (TdmScalingChart *self)
{
  double y = tdm_scaling_chart_max_devices (self);

  g_return_val_if_fail (TDM_IS_SCALING_CHART (self), 1);
  for (guint i = 0; i < self->points->len; i++)
    {
      const TdmScalingPoint *pt = &g_array_index (self->points, TdmScalingPoint, i);
      /* The fastest run's speed-up too: the spread's bar stays on the plot. */
      double s = MAX (pt->speedup, isfinite (pt->speedup_max) ? pt->speedup_max : 0);
      if (isfinite (s))
        y = MAX (y, s);
    }
  return y;
}

gboolean
tdm_scaling_chart_point_position (TdmScalingChart  *self,
                                  double            width,
                                  double            height,
                                  int               devices,
                                  gboolean          ideal,
                                  graphene_point_t *position)
{
  int n = tdm_scaling_chart_max_devices (self);
  double plot_w = width - LEFT - RIGHT, plot_h = height - TOP - BOTTOM;
  double value = devices;

  g_return_val_if_fail (TDM_IS_SCALING_CHART (self), FALSE);
  if (plot_w <= 0 || plot_h <= 0 || devices < 1 || devices > n)
    return FALSE;
  if (!ideal)
    {
      gboolean found = FALSE;

      for (guint i = 0; i < self->points->len && !found; i++)
        {
          const TdmScalingPoint *p = &g_array_index (self->points, TdmScalingPoint, i);
          if (p->devices == devices)
            {
              value = p->speedup;
              found = isfinite (value);
            }
        }
      if (!found)
        return FALSE;
    }
  /* Devices 1 … n spread over the width (one device alone sits in the middle). */
  position->x = LEFT + (n == 1 ? plot_w / 2 : (devices - 1) * plot_w / (n - 1));
  position->y = TOP + plot_h * (1 - value / tdm_scaling_chart_get_y_max (self));
  return TRUE;
}

/* Speed-up in ×, efficiency in %: two figures, never one for the other. */
static void
tdm_scaling_chart_label_text (const TdmScalingPoint *pt,
                              char                   text[48])
{
  g_snprintf (text, 48, "%.2f× · %.0f %%", pt->speedup, 100 * pt->efficiency);
}

/* Whether the segment a–b passes through `r` (Liang and Barsky's clipping). */
static gboolean
segment_crosses_rect (const graphene_point_t *a,
                      const graphene_point_t *b,
                      const graphene_rect_t  *r)
{
  double dx = b->x - a->x, dy = b->y - a->y, t0 = 0, t1 = 1;
  double p[4] = { -dx, dx, -dy, dy };
  double q[4] = { a->x - r->origin.x, r->origin.x + r->size.width - a->x,
                  a->y - r->origin.y, r->origin.y + r->size.height - a->y };

  for (int i = 0; i < 4; i++)
    {
      if (p[i] == 0)
        {
          if (q[i] < 0)
            return FALSE;
          continue;
        }
      double t = q[i] / p[i];

      if (p[i] < 0)
        t0 = MAX (t0, t);
      else
        t1 = MIN (t1, t);
      if (t0 > t1)
        return FALSE;
    }
  return TRUE;
}

/* Whether the rectangle `r` takes room a label must leave: a point's dot and its
 * spread bar, the line joining the points, or one of the `n_placed` labels placed
 * before (those of points with fewer devices). */
static gboolean
tdm_scaling_chart_label_blocked (TdmScalingChart       *self,
                                 double                 width,
                                 double                 height,
                                 const graphene_rect_t *placed,
                                 guint                  n_placed,
                                 const graphene_rect_t *r)
{
  double scale = (height - TOP - BOTTOM) / tdm_scaling_chart_get_y_max (self);
  graphene_point_t before, next;
  gboolean have_before = FALSE;

  for (guint i = 0; i < n_placed; i++)
    if (graphene_rect_intersection (&placed[i], r, NULL))
      return TRUE;
  for (int d = 1; d <= tdm_scaling_chart_max_devices (self); d++)
    if (tdm_scaling_chart_point_position (self, width, height, d, FALSE, &next))
      {
        if (have_before && segment_crosses_rect (&before, &next, r))
          return TRUE;
        before = next;
        have_before = TRUE;
      }
  for (guint i = 0; i < self->points->len; i++)
    {
      const TdmScalingPoint *other = &g_array_index (self->points, TdmScalingPoint, i);
      graphene_point_t q;
      graphene_rect_t taken;
      double top, bottom;

      if (!tdm_scaling_chart_point_position (self, width, height, other->devices, FALSE, &q))
        continue;
      top = q.y - 5;
      bottom = q.y + 5;
      if (other->runs > 1 && isfinite (other->speedup_min) && isfinite (other->speedup_max))
        {
          top = MIN (top, q.y - (other->speedup_max - other->speedup) * scale);
          bottom = MAX (bottom, q.y + (other->speedup - other->speedup_min) * scale);
        }
      graphene_rect_init (&taken, q.x - 5, top, 10, bottom - top);
      if (graphene_rect_intersection (&taken, r, NULL))
        return TRUE;
    }
  return FALSE;
}

/* The label of the point `pt` (drawn at `p`): the nearest clear place. */
static void
tdm_scaling_chart_place_label (TdmScalingChart        *self,
                               cairo_t                *cr,
                               double                  width,
                               double                  height,
                               const TdmScalingPoint  *pt,
                               const graphene_point_t *p,
                               const graphene_rect_t  *placed,
                               guint                   n_placed,
                               graphene_rect_t        *rect)
{
  graphene_point_t a, b;
  gboolean have_line, found = FALSE;
  double w, above, below, h, best = G_MAXDOUBLE;
  char text[48];

  tdm_scaling_chart_label_text (pt, text);
  w = tdm_draw_text_width (cr, text);
  tdm_draw_text_height (cr, text, &above, &below);
  h = above + below;
  have_line = tdm_scaling_chart_point_position (self, width, height, 1, TRUE, &a)
              && tdm_scaling_chart_point_position (self, width, height,
                                                   tdm_scaling_chart_max_devices (self), TRUE, &b);
  /* The nearest place that is clear: below-right of the point first (clear of a
   * line rising to the right from a point on or under it), above-left next (for a
   * point over it), then slid sideways and farther off, up to a few lines away. */
  for (int side = 0; side < 2; side++)
    for (int j = 0; j < 16; j++)
      for (int i = 0; i <= 8; i++)
        {
          double right = p->x + 6, left = p->x - 6 - w;
          double x = side == 0 ? right + (left - right) * i / 8 : left + (right - left) * i / 8;
          double y = side == 0 ? p->y + 6 + 4 * j : p->y - 6 - h - 4 * j;
          graphene_rect_t air, here;
          double dx, dy, distance;

          /* Right of the speed-up axis, whose numbers are left of it. */
          x = CLAMP (x, LEFT + 2, MAX (LEFT + 2, width - w));
          if (y < 0 || y + h > height - BOTTOM + 4)
            continue;
          dx = MAX (0, MAX (x - p->x, p->x - (x + w)));
          dy = MAX (0, MAX (y - p->y, p->y - (y + h)));
          /* Beside the point rather than straight under or over it: a label across
           * the point's column hides the line it is on. */
          distance = hypot (dx, dy) + (dx == 0 ? 10 : 0);
          if (distance >= best - 1e-9)
            continue;
          /* Two pixels of air around the text. */
          graphene_rect_init (&air, x - 2, y - 2, w + 4, h + 4);
          graphene_rect_init (&here, x, y, w, h);
          if ((have_line && segment_crosses_rect (&a, &b, &air))
              || tdm_scaling_chart_label_blocked (self, width, height, placed, n_placed, &here))
            continue;
          *rect = here;
          best = distance;
          found = TRUE;
        }
  /* Nowhere clear (a chart too small): where the first choice would be, inside. */
  if (!found)
    graphene_rect_init (rect, CLAMP (p->x + 6, LEFT + 2, MAX (LEFT + 2, width - w)), p->y + 6, w, h);
}

/* Every drawn point's label, placed in device order (each clear of those before
 * it); rects[d - 1] for `d` devices, empty where there is no such point. */
static void
tdm_scaling_chart_place_labels (TdmScalingChart *self,
                                cairo_t         *cr,
                                double           width,
                                double           height,
                                graphene_rect_t *rects)
{
  int n = tdm_scaling_chart_max_devices (self);
  g_autofree graphene_rect_t *placed = g_new0 (graphene_rect_t, n);
  guint n_placed = 0;

  for (int d = 1; d <= n; d++)
    {
      const TdmScalingPoint *pt = NULL;
      graphene_point_t p;

      graphene_rect_init (&rects[d - 1], 0, 0, 0, 0);
      for (guint i = 0; i < self->points->len; i++)
        if (g_array_index (self->points, TdmScalingPoint, i).devices == d)
          pt = &g_array_index (self->points, TdmScalingPoint, i);
      if (pt == NULL || !tdm_scaling_chart_point_position (self, width, height, d, FALSE, &p))
        continue;
      tdm_scaling_chart_place_label (self, cr, width, height, pt, &p, placed, n_placed, &rects[d - 1]);
      placed[n_placed++] = rects[d - 1];
    }
}

gboolean
tdm_scaling_chart_label_rect (TdmScalingChart *self,
                              cairo_t         *cr,
                              double           width,
                              double           height,
                              int              devices,
                              graphene_rect_t *rect)
{
  g_autofree graphene_rect_t *rects = NULL;
  graphene_point_t p;

  g_return_val_if_fail (TDM_IS_SCALING_CHART (self), FALSE);
  g_return_val_if_fail (cr != NULL, FALSE);

  if (!tdm_scaling_chart_point_position (self, width, height, devices, FALSE, &p))
    return FALSE;
  rects = g_new0 (graphene_rect_t, tdm_scaling_chart_max_devices (self));
  tdm_scaling_chart_place_labels (self, cr, width, height, rects);
  *rect = rects[devices - 1];
  return TRUE;
}

void
tdm_scaling_chart_draw (TdmScalingChart *self,
                        cairo_t         *cr,
                        double           width,
                        double           height,
                        const GdkRGBA   *text_colour)
{
  int n = tdm_scaling_chart_max_devices (self);
  double y_max = tdm_scaling_chart_get_y_max (self);
  graphene_point_t p, q;
  GdkRGBA fg = *text_colour;
  g_autofree graphene_rect_t *labels = NULL;

  g_return_if_fail (TDM_IS_SCALING_CHART (self));

  if (width <= LEFT + RIGHT || height <= TOP + BOTTOM)
    return;
  cairo_save (cr);
  tdm_draw_set_font (cr, GTK_WIDGET (self));
  gdk_cairo_set_source_rgba (cr, &fg);
  cairo_set_line_width (cr, 1);

  /* Axes, device ticks and the speed-up scale's ends. */
  cairo_move_to (cr, LEFT, TOP);
  cairo_line_to (cr, LEFT, height - BOTTOM);
  cairo_line_to (cr, width - RIGHT, height - BOTTOM);
  tdm_chart_stroke (cr);
  for (int d = 1; d <= n; d++)
    if (tdm_scaling_chart_point_position (self, width, height, d, TRUE, &p))
      {
        char text[16];
        g_snprintf (text, sizeof text, "%d", d);
        tdm_draw_text (cr, p.x - 4, height - BOTTOM + 18, text);
      }
  tdm_draw_text (cr, LEFT, height - 6, _("Devices"));
  {
    char text[32];
    g_snprintf (text, sizeof text, "%.1f×", y_max);
    tdm_draw_text (cr, 4, TOP + 12, text);
    tdm_draw_text (cr, 4, height - BOTTOM, "0×");
  }

  /* The ideal line, dashed. */
  if (tdm_scaling_chart_point_position (self, width, height, 1, TRUE, &p) &&
      tdm_scaling_chart_point_position (self, width, height, n, TRUE, &q))
    {
      double dash[] = { 6, 4 };
      cairo_set_dash (cr, dash, 2, 0);
      cairo_move_to (cr, p.x, p.y);
      cairo_line_to (cr, q.x, q.y);
      tdm_chart_stroke (cr);
      cairo_set_dash (cr, NULL, 0, 0);
    }

  /* Measured points joined, each with its efficiency and its phase split. */
  cairo_set_source_rgb (cr, 0.0, 0.447, 0.698);
  cairo_set_line_width (cr, 2);
  gboolean started = FALSE;
  for (int d = 1; d <= n; d++)
    if (tdm_scaling_chart_point_position (self, width, height, d, FALSE, &p))
      {
        if (started)
          cairo_line_to (cr, p.x, p.y);
        else
          cairo_move_to (cr, p.x, p.y);
        started = TRUE;
      }
  tdm_chart_stroke (cr);
  labels = g_new0 (graphene_rect_t, n);
  tdm_scaling_chart_place_labels (self, cr, width, height, labels);
  for (guint i = 0; i < self->points->len; i++)
    {
      const TdmScalingPoint *pt = &g_array_index (self->points, TdmScalingPoint, i);
      double total = pt->compute_ms + pt->comm_ms + pt->wait_ms;
      char text[48];

      if (!tdm_scaling_chart_point_position (self, width, height, pt->devices, FALSE, &p))
        continue;
      cairo_set_source_rgb (cr, 0.0, 0.447, 0.698);
      /* The spread: a bar from the slowest run's speed-up to the fastest's. */
      if (pt->runs > 1 && isfinite (pt->speedup_min) && isfinite (pt->speedup_max)
          && pt->speedup_max > pt->speedup_min && pt->speedup > 0)
        {
          double scale = (height - TOP - BOTTOM) / tdm_scaling_chart_get_y_max (self);
          double y0 = p.y + (pt->speedup - pt->speedup_min) * scale;
          double y1 = p.y - (pt->speedup_max - pt->speedup) * scale;

          cairo_set_line_width (cr, 1.5);
          cairo_move_to (cr, p.x, y0);
          cairo_line_to (cr, p.x, y1);
          cairo_move_to (cr, p.x - 4, y0);
          cairo_line_to (cr, p.x + 4, y0);
          cairo_move_to (cr, p.x - 4, y1);
          cairo_line_to (cr, p.x + 4, y1);
          tdm_chart_stroke (cr);
        }
      cairo_arc (cr, p.x, p.y, 4, 0, 2 * G_PI);
      tdm_chart_fill (cr);
      gdk_cairo_set_source_rgba (cr, &fg);
      /* Beside the point, never across the ideal line (it read as struck out). */
      {
        graphene_rect_t r;
        double above;

        tdm_scaling_chart_label_text (pt, text);
        tdm_draw_text_height (cr, text, &above, NULL);
        r = labels[pt->devices - 1];
        tdm_draw_text (cr, r.origin.x, r.origin.y + above, text);
      }
      if (total > 0 && isfinite (total))
        {
          /* compute (blue), communication (vermillion), wait (grey), left to right */
          double x = p.x - 20, y = height - BOTTOM + 24, w = 40;
          double parts[3] = { pt->compute_ms, pt->comm_ms, pt->wait_ms };
          double colours[3][3] = { { 0.0, 0.447, 0.698 }, { 0.835, 0.369, 0.0 },
                                   { 0.63, 0.63, 0.63 } };
          for (int k = 0; k < 3; k++)
            {
              cairo_set_source_rgb (cr, colours[k][0], colours[k][1], colours[k][2]);
              cairo_rectangle (cr, x, y, w * parts[k] / total, 6);
              tdm_chart_fill (cr);
              x += w * parts[k] / total;
            }
        }
    }
  cairo_restore (cr);
}

static void
tdm_scaling_chart_snapshot (GtkWidget   *widget,
                            GtkSnapshot *snapshot)
{
  double width = gtk_widget_get_width (widget);
  double height = gtk_widget_get_height (widget);
  GdkRGBA fg;
  cairo_t *cr;

  cr = tdm_draw_begin (widget, snapshot, &fg);
  if (cr == NULL)
    return;
  tdm_scaling_chart_draw (TDM_SCALING_CHART (widget), cr, width, height, &fg);
  cairo_destroy (cr);
}

const TdmScalingPoint *
tdm_scaling_chart_get_point (TdmScalingChart *self,
                             guint            i)
{
  g_return_val_if_fail (TDM_IS_SCALING_CHART (self), NULL);
  g_return_val_if_fail (i < self->points->len, NULL);

  return &g_array_index (self->points, TdmScalingPoint, i);
}

void
tdm_scaling_chart_add_point (TdmScalingChart       *self,
                             const TdmScalingPoint *point)
{
  g_return_if_fail (TDM_IS_SCALING_CHART (self));
  g_return_if_fail (point != NULL && point->devices >= 1);

  for (guint i = 0; i < self->points->len; i++)
    if (g_array_index (self->points, TdmScalingPoint, i).devices == point->devices)
      {
        g_array_index (self->points, TdmScalingPoint, i) = *point;
        gtk_widget_queue_draw (GTK_WIDGET (self));
        return;
      }
  g_array_append_val (self->points, *point);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_scaling_chart_clear (TdmScalingChart *self)
{
  g_return_if_fail (TDM_IS_SCALING_CHART (self));
  g_array_set_size (self->points, 0);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

guint
tdm_scaling_chart_get_n_points (TdmScalingChart *self)
{
  g_return_val_if_fail (TDM_IS_SCALING_CHART (self), 0);
  return self->points->len;
}

static void
tdm_scaling_chart_finalize (GObject *object)
{
  TdmScalingChart *self = TDM_SCALING_CHART (object);

  g_array_unref (self->points);
  G_OBJECT_CLASS (tdm_scaling_chart_parent_class)->finalize (object);
}

static void
tdm_scaling_chart_class_init (TdmScalingChartClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->finalize = tdm_scaling_chart_finalize;
  widget_class->snapshot = tdm_scaling_chart_snapshot;
  gtk_widget_class_set_css_name (widget_class, "scaling-chart");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
tdm_scaling_chart_init (TdmScalingChart *self)
{
  self->points = g_array_new (FALSE, FALSE, sizeof (TdmScalingPoint));
  gtk_widget_set_size_request (GTK_WIDGET (self), 320, 200);
}

GtkWidget *
tdm_scaling_chart_new (void)
{
  return g_object_new (TDM_TYPE_SCALING_CHART, NULL);
}
