/* tdm-chart.c: the chart widget and its one drawing routine.
 *
 * draw_frame() draws everything from the chart's state onto a cairo_t: the
 * widget's snapshot, PNG and SVG exports and the benchmark all go through it,
 * so what is exported is what is seen. Series are aggregated per pixel column
 * (min, max, mean) before any path is built, so the cost of a frame depends on
 * the width of the chart, not on how many points it holds. Scratch buffers
 * live in the chart and only grow, so steady drawing does not allocate beyond
 * Pango's text layout. Tick maths and number formats are in tdm-chart-axis.c.
 */

#include "tdm-chart.h"

#include <math.h>
#include <string.h>

#include <cairo-svg.h>
#include <glib/gi18n.h>

#include "tdm-chart-axis.h"

#define PAD           8.0
#define LINE_WIDTH    2.0
#define POINT_RADIUS  3.5
#define SWATCH_W      18
#define SWATCH_H      10
#define MAX_READOUT   24

typedef struct
{
  TdmSeries     *series;
  GdkRGBA        colour;
  TdmChartStyle  style;
  gboolean       visible;
} Entry;

/* One pixel column of a series, in device coordinates. */
typedef struct
{
  double   x, y;          /* mean position */
  double   top, bottom;   /* envelope */
  gboolean start;         /* a gap (or nothing) comes before it */
} Column;

struct _TdmChart
{
  GtkWidget  parent_instance;

  char      *title;
  char      *x_label;
  char      *x_unit;
  char      *y_label;
  char      *y_unit;
  gboolean   log_scale;
  gboolean   fixed_range;
  double     fixed_min, fixed_max;

  GPtrArray *entries;     /* of Entry, in drawing (and stacking) order */

  gboolean   hovering;
  double     hover_x, hover_y;

  Column    *cols;
  guint      n_cols_allocated;
  double    *scratch;
  guint      n_scratch_allocated;
};

enum {
  PROP_0,
  PROP_TITLE,
  PROP_X_LABEL,
  PROP_X_UNIT,
  PROP_Y_LABEL,
  PROP_Y_UNIT,
  PROP_LOG_SCALE,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (TdmChart, tdm_chart, GTK_TYPE_WIDGET)

/* Device coordinates of the plot area and the data ranges mapped onto it. */
typedef struct
{
  double   px, py, pw, ph;
  double   x_lo, x_hi;
  double   ty_lo, ty_hi;    /* y range after the log transform, if any */
  gboolean log;
} Mapping;

typedef struct
{
  cairo_t              *cr;
  PangoLayout          *layout;
  PangoFontDescription *font;
  PangoFontDescription *small;
  PangoFontDescription *bold;
  GdkRGBA               fg;
  GdkRGBA               box_bg;
  int                   width, height;
  gboolean              interactive;

  /* Filled in by compute_layout(). */
  int                   normal_h, small_h;
  double                body_top;
  double                legend_y;
  gboolean              empty;
  gboolean              has_plot;
  TdmChartAxis          xa, ya;
  Mapping               map;
} Frame;

static inline double
map_x (const Mapping *m,
       double         x)
{
  return m->px + (x - m->x_lo) / (m->x_hi - m->x_lo) * m->pw;
}

static inline double
unmap_x (const Mapping *m,
         double         px)
{
  return m->x_lo + (px - m->px) / m->pw * (m->x_hi - m->x_lo);
}

/* NaN where the value cannot be shown (a gap, or <= 0 on a log scale). */
static inline double
map_y (const Mapping *m,
       double         y)
{
  if (m->log)
    {
      if (!(y > 0))
        return NAN;
      y = log10 (y);
    }

  return m->py + m->ph - (y - m->ty_lo) / (m->ty_hi - m->ty_lo) * m->ph;
}

/* Like map_y(), but values a log scale cannot show sit on the bottom edge. */
static inline double
map_y_floor (const Mapping *m,
             double         y)
{
  double v = map_y (m, y);

  return isnan (v) && !isnan (y) ? m->py + m->ph : v;
}

static Entry *
get_entry (TdmChart *self,
           guint     id)
{
  return g_ptr_array_index (self->entries, id);
}

static void
entry_free (gpointer data)
{
  Entry *e = data;

  tdm_series_free (e->series);
  g_free (e);
}

static Column *
ensure_cols (TdmChart *self,
             guint     n)
{
  if (n > self->n_cols_allocated)
    {
      self->n_cols_allocated = MAX (n, 2 * self->n_cols_allocated);
      self->cols = g_renew (Column, self->cols, self->n_cols_allocated);
    }

  return self->cols;
}

static double *
ensure_scratch (TdmChart *self,
                guint     n)
{
  if (n > self->n_scratch_allocated)
    {
      self->n_scratch_allocated = MAX (n, 2 * self->n_scratch_allocated);
      self->scratch = g_renew (double, self->scratch, self->n_scratch_allocated);
    }

  return self->scratch;
}

static void
set_source (cairo_t       *cr,
            const GdkRGBA *c,
            double         alpha)
{
  cairo_set_source_rgba (cr, c->red, c->green, c->blue, c->alpha * alpha);
}

/* ---- text ---------------------------------------------------------------- */

static void
text_size (Frame                      *f,
           const PangoFontDescription *font,
           const char                 *text,
           int                        *w,
           int                        *h)
{
  pango_layout_set_font_description (f->layout, font);
  pango_layout_set_text (f->layout, text, -1);
  pango_layout_get_pixel_size (f->layout, w, h);
}

/* ax, ay: which point of the text box lands on (x, y), 0..1 each way. */
static void
draw_text (Frame                      *f,
           const PangoFontDescription *font,
           const char                 *text,
           double                      x,
           double                      y,
           double                      ax,
           double                      ay,
           double                      alpha)
{
  int w, h;

  text_size (f, font, text, &w, &h);
  set_source (f->cr, &f->fg, alpha);
  cairo_move_to (f->cr, round (x - ax * w), round (y - ay * h));
  pango_cairo_show_layout (f->cr, f->layout);
}

static char *
axis_title (const char *label,
            const char *unit)
{
  gboolean has_label = label && *label;
  gboolean has_unit = unit && *unit;

  if (has_label && has_unit)
    /* TRANSLATORS: an axis title, "Memory (GiB)" */
    return g_strdup_printf (_("%s (%s)"), label, unit);
  if (has_label)
    return g_strdup (label);
  if (has_unit)
    return g_strdup (unit);

  return NULL;
}

static gboolean
x_is_time (TdmChart *self)
{
  return g_strcmp0 (self->x_unit, "s") == 0;
}

/* ---- ranges -------------------------------------------------------------- */

static gboolean
data_x_range (TdmChart *self,
              double   *lo,
              double   *hi)
{
  gboolean found = FALSE;

  *lo = INFINITY;
  *hi = -INFINITY;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      double a, b;

      if (!e->visible || e->style == TDM_CHART_STYLE_REFERENCE)
        continue;
      if (!tdm_series_get_y_range (e->series, FALSE, NULL, NULL))
        continue;
      tdm_series_get_x_range (e->series, &a, &b);
      *lo = MIN (*lo, a);
      *hi = MAX (*hi, b);
      found = TRUE;
    }

  return found;
}

/* The tallest stack, evaluated at the buckets of the first stacked series. */
static double
stack_max (TdmChart *self)
{
  Entry *first = NULL;
  const TdmSeriesBucket *buckets;
  double best = -INFINITY;
  guint n;

  for (guint i = 0; i < self->entries->len && first == NULL; i++)
    {
      Entry *e = get_entry (self, i);

      if (e->visible && e->style == TDM_CHART_STYLE_STACKED)
        first = e;
    }
  if (first == NULL)
    return NAN;

  buckets = tdm_series_get_buckets (first->series, &n);
  for (guint b = 0; b < n; b++)
    {
      double x = tdm_series_bucket_x (&buckets[b]);
      double sum = 0;

      for (guint i = 0; i < self->entries->len; i++)
        {
          Entry *e = get_entry (self, i);
          guint idx;
          double v;

          if (!e->visible || e->style != TDM_CHART_STYLE_STACKED
              || !tdm_series_lookup (e->series, x, &idx))
            continue;
          v = tdm_series_bucket_mean (&tdm_series_get_buckets (e->series, NULL)[idx]);
          if (isfinite (v))
            sum += v;
        }
      best = MAX (best, sum);
    }

  return best;
}

static gboolean
data_y_range (TdmChart *self,
              gboolean  positive_only,
              double   *lo,
              double   *hi)
{
  gboolean found = FALSE, stacked = FALSE;

  *lo = INFINITY;
  *hi = -INFINITY;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      double a, b;

      if (!e->visible)
        continue;
      if (e->style == TDM_CHART_STYLE_STACKED)
        {
          stacked = TRUE;
          continue;
        }
      if (!tdm_series_get_y_range (e->series, positive_only, &a, &b))
        continue;
      *lo = MIN (*lo, a);
      *hi = MAX (*hi, b);
      found = TRUE;
    }

  if (stacked)
    {
      double top = stack_max (self);

      if (isfinite (top) && (!positive_only || top > 0))
        {
          /* Stacks grow from zero. */
          if (!positive_only)
            *lo = MIN (*lo, 0);
          else
            for (guint i = 0; i < self->entries->len; i++)
              {
                Entry *e = get_entry (self, i);
                double a;

                if (e->visible && e->style == TDM_CHART_STYLE_STACKED
                    && tdm_series_get_y_range (e->series, TRUE, &a, NULL))
                  *lo = MIN (*lo, a);
              }
          *hi = MAX (*hi, top);
          found = TRUE;
        }
    }

  return found;
}

static gboolean
has_data (TdmChart *self)
{
  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);

      if (e->visible && e->style != TDM_CHART_STYLE_REFERENCE
          && tdm_series_get_y_range (e->series, FALSE, NULL, NULL))
        return TRUE;
    }

  return FALSE;
}

/* ---- layout -------------------------------------------------------------- */

/* Lays the legend out in rows from the left; draws it if asked. */
static double
legend_pass (TdmChart *self,
             Frame    *f,
             gboolean  draw)
{
  double x = PAD, y = f->legend_y;
  double row_h = MAX (f->normal_h, SWATCH_H) + 4;
  gboolean any = FALSE;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      const char *name = tdm_series_get_name (e->series);
      int w, h;
      double item_w;

      if (!e->visible)
        continue;

      text_size (f, f->font, name, &w, &h);
      item_w = SWATCH_W + 5 + w + 14;
      if (x > PAD && x + item_w > f->width - PAD)
        {
          x = PAD;
          y += row_h;
        }
      any = TRUE;

      if (draw)
        {
          double sx = round (x), sy = round (y + (row_h - 4 - SWATCH_H) / 2);
          double mid = sy + SWATCH_H / 2;

          set_source (f->cr, &e->colour, 1);
          switch (e->style)
            {
            case TDM_CHART_STYLE_LINE:
              cairo_rectangle (f->cr, sx, mid - 2, SWATCH_W, 4);
              break;
            case TDM_CHART_STYLE_DASHED:
            case TDM_CHART_STYLE_REFERENCE:
              cairo_rectangle (f->cr, sx, mid - 2, 7, 4);
              cairo_rectangle (f->cr, sx + 11, mid - 2, 7, 4);
              break;
            case TDM_CHART_STYLE_POINTS:
              cairo_arc (f->cr, sx + SWATCH_W / 2.0, mid, POINT_RADIUS + 1, 0, 2 * G_PI);
              break;
            case TDM_CHART_STYLE_STACKED:
            default:
              cairo_rectangle (f->cr, sx + 2, sy, SWATCH_W - 4, SWATCH_H);
              break;
            }
          cairo_fill (f->cr);

          draw_text (f, f->font, name, x + SWATCH_W + 5, y + (row_h - 4) / 2, 0, 0.5, 0.85);
        }

      x += item_w;
    }

  return any ? y + row_h - f->legend_y : 0;
}

static void
compute_y_axis (TdmChart *self,
                Frame    *f,
                guint     max_ticks)
{
  double lo, hi;
  gboolean found;

  if (self->log_scale)
    {
      found = data_y_range (self, TRUE, &lo, &hi);
      if (self->fixed_range)
        {
          if (self->fixed_min > 0)
            lo = self->fixed_min;
          else if (!found)
            lo = self->fixed_max / 1000;
          tdm_chart_axis_log (&f->ya, lo, self->fixed_max, max_ticks, FALSE);
        }
      else
        tdm_chart_axis_log (&f->ya, found ? lo : NAN, found ? hi : NAN, max_ticks, TRUE);
      return;
    }

  if (self->fixed_range)
    {
      tdm_chart_axis_linear (&f->ya, self->fixed_min, self->fixed_max, max_ticks, FALSE);
      return;
    }

  found = data_y_range (self, FALSE, &lo, &hi);
  if (found && hi > lo)
    {
      double pad = (hi - lo) * 0.05;

      lo = lo >= 0 && lo - pad < 0 ? 0 : lo - pad;
      hi += pad;
    }
  tdm_chart_axis_linear (&f->ya, found ? lo : 0, found ? hi : 1, max_ticks, TRUE);
}

static gboolean
compute_layout (TdmChart *self,
                Frame    *f)
{
  g_autofree char *x_title = NULL;
  char buf[64];
  double top = PAD, bottom, left, right, ph_guess, x_lo, x_hi;
  int w, h, widest = 0;

  text_size (f, f->font, "Ag", &w, &f->normal_h);
  text_size (f, f->small, "Ag", &w, &f->small_h);

  if (self->title && *self->title)
    {
      text_size (f, f->bold, self->title, &w, &h);
      top += h + 4;
    }
  f->body_top = top;
  f->empty = !has_data (self);
  f->has_plot = FALSE;
  if (f->empty)
    return FALSE;

  f->legend_y = top;
  top += legend_pass (self, f, FALSE);
  top = ceil (top + f->small_h / 2.0);

  x_title = axis_title (self->x_label, x_is_time (self) ? NULL : self->x_unit);
  bottom = f->height - PAD - f->small_h - 4;
  if (x_title || x_is_time (self))
    bottom -= f->normal_h + 2;
  bottom = floor (bottom);

  ph_guess = bottom - top;
  compute_y_axis (self, f, (guint) CLAMP (ph_guess / 32, 2, 12));
  for (guint i = 0; i < f->ya.n_ticks; i++)
    {
      tdm_chart_axis_format_tick (&f->ya, f->ya.ticks[i], buf, sizeof buf);
      text_size (f, f->small, buf, &w, &h);
      widest = MAX (widest, w);
    }

  left = PAD + widest + 6;
  if ((self->y_label && *self->y_label) || (self->y_unit && *self->y_unit))
    left += f->normal_h + 6;
  left = ceil (left);
  right = f->width - PAD - 12;

  data_x_range (self, &x_lo, &x_hi);
  if (x_is_time (self))
    tdm_chart_axis_time (&f->xa, x_lo, x_hi, (guint) CLAMP ((right - left) / 80, 2, 12));
  else
    tdm_chart_axis_linear (&f->xa, x_lo, x_hi, (guint) CLAMP ((right - left) / 80, 2, 12), FALSE);

  f->map.px = left;
  f->map.py = top;
  f->map.pw = MAX (1, floor (right) - left);
  f->map.ph = MAX (1, bottom - top);
  f->map.x_lo = f->xa.lo;
  f->map.x_hi = f->xa.hi;
  f->map.log = self->log_scale;
  f->map.ty_lo = self->log_scale ? log10 (f->ya.lo) : f->ya.lo;
  f->map.ty_hi = self->log_scale ? log10 (f->ya.hi) : f->ya.hi;
  if (!(f->map.ty_hi > f->map.ty_lo))
    f->map.ty_hi = f->map.ty_lo + 1;
  if (!(f->map.x_hi > f->map.x_lo))
    f->map.x_hi = f->map.x_lo + 1;

  f->has_plot = right - left >= 16 && bottom - top >= 16;

  return f->has_plot;
}

/* ---- series -------------------------------------------------------------- */

/* Aggregates a series per pixel column; values NULL means bucket means. */
static guint
build_columns (TdmChart      *self,
               TdmSeries     *series,
               const double  *values,
               const Mapping *m)
{
  const TdmSeriesBucket *buckets;
  Column *cols;
  guint n, nc = 0, count = 0;
  double sx = 0, sy = 0, top = INFINITY, bottom = -INFINITY;
  gboolean start = TRUE;
  long cur = G_MINLONG;

  buckets = tdm_series_get_buckets (series, &n);
  cols = ensure_cols (self, n + 1);

#define FLUSH()                                                   \
  G_STMT_START {                                                  \
    if (count > 0)                                                \
      {                                                           \
        cols[nc++] = (Column) { sx / count, sy / count,           \
                                top, bottom, start };             \
        start = FALSE;                                            \
      }                                                           \
    count = 0; sx = sy = 0; top = INFINITY; bottom = -INFINITY;   \
  } G_STMT_END

  for (guint i = 0; i < n; i++)
    {
      const TdmSeriesBucket *b = &buckets[i];
      double v = values ? values[i] : tdm_series_bucket_mean (b);
      double yv = map_y (m, v);
      double xv;
      long c;

      if (isnan (yv) || b->n_finite == 0)
        {
          FLUSH ();
          start = TRUE;
          continue;
        }

      xv = map_x (m, tdm_series_bucket_x (b));
      c = (long) floor (xv);
      if (c != cur)
        {
          FLUSH ();
          cur = c;
        }

      sx += xv;
      sy += yv;
      count++;
      top = MIN (top, MIN (yv, map_y_floor (m, b->y_max)));
      bottom = MAX (bottom, MAX (yv, map_y_floor (m, b->y_min)));
    }
  FLUSH ();

#undef FLUSH

  return nc;
}

static void
stroke_columns (cairo_t      *cr,
                const Column *cols,
                guint         n,
                gboolean      dashed)
{
  static const double dash[] = { 6, 4 };

  gboolean lone = FALSE;

  for (guint i = 0; i < n; i++)
    {
      if (cols[i].start)
        cairo_move_to (cr, cols[i].x, cols[i].y);
      else
        cairo_line_to (cr, cols[i].x, cols[i].y);
      lone |= cols[i].start && (i + 1 == n || cols[i + 1].start);
    }

  cairo_set_line_width (cr, LINE_WIDTH);
  cairo_set_line_cap (cr, CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join (cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_dash (cr, dash, dashed ? 2 : 0, 0);
  cairo_stroke (cr);
  cairo_set_dash (cr, NULL, 0, 0);

  if (!lone)
    return;

  /* A point with gaps (or nothing) on both sides strokes to nothing: dot it. */
  for (guint i = 0; i < n; i++)
    if (cols[i].start && (i + 1 == n || cols[i + 1].start))
      {
        cairo_new_sub_path (cr);
        cairo_arc (cr, cols[i].x, cols[i].y, LINE_WIDTH * 1.25, 0, 2 * G_PI);
      }
  cairo_fill (cr);
}

/* The min/max envelope, one filled band per unbroken run of columns. */
static void
fill_band (cairo_t      *cr,
           const Column *cols,
           guint         n)
{
  guint s = 0;

  while (s < n)
    {
      guint e = s + 1;
      gboolean wide = cols[s].bottom - cols[s].top > 0.75;

      while (e < n && !cols[e].start)
        {
          wide |= cols[e].bottom - cols[e].top > 0.75;
          e++;
        }

      if (wide)
        {
          /* Half a pixel either side, so a one-column spike still shows. */
          cairo_move_to (cr, cols[s].x - 0.5, cols[s].top);
          for (guint i = s; i < e; i++)
            cairo_line_to (cr, cols[i].x + (i + 1 == e ? 0.5 : 0), cols[i].top);
          for (guint i = e; i-- > s;)
            cairo_line_to (cr, cols[i].x + (i + 1 == e ? 0.5 : 0), cols[i].bottom);
          cairo_line_to (cr, cols[s].x - 0.5, cols[s].bottom);
          cairo_close_path (cr);
        }
      s = e;
    }

  /* The outline too: a lone spike is a sliver of fill but a clear stroke. */
  cairo_fill_preserve (cr);
  cairo_set_line_width (cr, 1);
  cairo_stroke (cr);
}

static void
draw_line_series (TdmChart *self,
                  Frame    *f,
                  Entry    *e)
{
  double w = tdm_series_get_smoothing (e->series);
  guint n;

  n = build_columns (self, e->series, NULL, &f->map);
  set_source (f->cr, &e->colour, 0.25);
  fill_band (f->cr, self->cols, n);

  if (w > 0)
    {
      guint nb;
      double *smooth;

      /* Raw values faint, the smoothed curve on top. */
      set_source (f->cr, &e->colour, 0.35);
      stroke_columns (f->cr, self->cols, n, e->style == TDM_CHART_STYLE_DASHED);

      tdm_series_get_buckets (e->series, &nb);
      smooth = ensure_scratch (self, nb + 1);
      tdm_series_get_smoothed (e->series, smooth, nb);
      n = build_columns (self, e->series, smooth, &f->map);
    }

  set_source (f->cr, &e->colour, 1);
  stroke_columns (f->cr, self->cols, n, e->style == TDM_CHART_STYLE_DASHED);
}

static void
draw_points_series (TdmChart *self,
                    Frame    *f,
                    Entry    *e)
{
  guint n = build_columns (self, e->series, NULL, &f->map);

  set_source (f->cr, &e->colour, 1);
  cairo_set_line_width (f->cr, 1.5);
  for (guint i = 0; i < n; i++)
    if (self->cols[i].bottom - self->cols[i].top > 1)
      {
        cairo_move_to (f->cr, self->cols[i].x, self->cols[i].top);
        cairo_line_to (f->cr, self->cols[i].x, self->cols[i].bottom);
      }
  cairo_stroke (f->cr);

  for (guint i = 0; i < n; i++)
    {
      cairo_new_sub_path (f->cr);
      cairo_arc (f->cr, self->cols[i].x, self->cols[i].y, POINT_RADIUS, 0, 2 * G_PI);
    }
  cairo_fill (f->cr);
}

static void
draw_reference_series (Frame *f,
                       Entry *e)
{
  static const double dash[] = { 8, 4 };
  double y;

  if (!tdm_series_get_last (e->series, NULL, &y) || isnan (map_y (&f->map, y)))
    return;

  y = map_y (&f->map, y);
  set_source (f->cr, &e->colour, 1);
  cairo_set_line_width (f->cr, 1.5);
  cairo_set_dash (f->cr, dash, 2, 0);
  cairo_move_to (f->cr, f->map.px, y);
  cairo_line_to (f->cr, f->map.px + f->map.pw, y);
  cairo_stroke (f->cr);
  cairo_set_dash (f->cr, NULL, 0, 0);
}

/* Stacked series share a grid of 2-pixel columns, each the mean of the
 * buckets that fall in it, so series need not have identical x values. */
static void
draw_stacked (TdmChart *self,
              Frame    *f)
{
  const Mapping *m = &f->map;
  guint nc = (guint) ceil (m->pw / 2.0);
  double *base, *top, *val;
  gboolean any = FALSE;

  for (guint i = 0; i < self->entries->len && !any; i++)
    any = get_entry (self, i)->visible
          && get_entry (self, i)->style == TDM_CHART_STYLE_STACKED;
  if (!any || nc == 0)
    return;

  base = ensure_scratch (self, 3 * nc);
  top = base + nc;
  val = top + nc;
  for (guint c = 0; c < nc; c++)
    base[c] = 0;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      guint s = 0;

      if (!e->visible || e->style != TDM_CHART_STYLE_STACKED)
        continue;

      for (guint c = 0; c < nc; c++)
        {
          double x0 = unmap_x (m, m->px + 2.0 * c);
          double x1 = unmap_x (m, MIN (m->px + 2.0 * c + 2, m->px + m->pw + 1e-6));

          /* The last column is closed on the right, to catch the last point. */
          if (c + 1 == nc)
            x1 = nextafter (x1, INFINITY);
          val[c] = tdm_series_mean_between (e->series, x0, x1);
          top[c] = base[c] + (isfinite (val[c]) ? val[c] : 0);
        }

      while (s < nc)
        {
          guint end;

          if (!isfinite (val[s]))
            {
              s++;
              continue;
            }
          for (end = s; end < nc && isfinite (val[end]); end++)
            ;

          cairo_new_sub_path (f->cr);
          for (guint c = s; c < end; c++)
            cairo_line_to (f->cr, m->px + 2.0 * c + 1, map_y_floor (m, top[c]));
          for (guint c = end; c-- > s;)
            cairo_line_to (f->cr, m->px + 2.0 * c + 1, map_y_floor (m, base[c]));
          cairo_close_path (f->cr);
          s = end;
        }
      set_source (f->cr, &e->colour, 0.6);
      cairo_fill (f->cr);

      s = 0;
      while (s < nc)
        {
          if (isfinite (val[s]))
            {
              gboolean first = s == 0 || !isfinite (val[s - 1]);
              double y = map_y_floor (m, top[s]);

              if (first)
                cairo_move_to (f->cr, m->px + 2.0 * s + 1, y);
              else
                cairo_line_to (f->cr, m->px + 2.0 * s + 1, y);
            }
          s++;
        }
      set_source (f->cr, &e->colour, 1);
      cairo_set_line_width (f->cr, 1.5);
      cairo_stroke (f->cr);

      memcpy (base, top, nc * sizeof *base);
    }
}

/* ---- axes, hover, frame ---------------------------------------------------- */

static void
draw_axes (TdmChart *self,
           Frame    *f)
{
  const Mapping *m = &f->map;
  cairo_t *cr = f->cr;
  g_autofree char *y_title = axis_title (self->y_label, self->y_unit);
  g_autofree char *x_title = NULL;
  char buf[64];

  cairo_set_line_width (cr, 1);
  set_source (cr, &f->fg, 0.1);
  for (guint i = 0; i < f->ya.n_ticks; i++)
    {
      double y = floor (map_y (m, f->ya.ticks[i])) + 0.5;

      cairo_move_to (cr, m->px, y);
      cairo_line_to (cr, m->px + m->pw, y);
    }
  for (guint i = 0; i < f->xa.n_ticks; i++)
    {
      double x = floor (map_x (m, f->xa.ticks[i])) + 0.5;

      cairo_move_to (cr, x, m->py);
      cairo_line_to (cr, x, m->py + m->ph);
    }
  cairo_stroke (cr);

  set_source (cr, &f->fg, 0.45);
  cairo_move_to (cr, m->px - 0.5, m->py);
  cairo_line_to (cr, m->px - 0.5, m->py + m->ph + 0.5);
  cairo_line_to (cr, m->px + m->pw, m->py + m->ph + 0.5);
  cairo_stroke (cr);

  for (guint i = 0; i < f->ya.n_ticks; i++)
    {
      tdm_chart_axis_format_tick (&f->ya, f->ya.ticks[i], buf, sizeof buf);
      draw_text (f, f->small, buf, m->px - 6, map_y (m, f->ya.ticks[i]), 1, 0.5, 0.7);
    }
  for (guint i = 0; i < f->xa.n_ticks; i++)
    {
      tdm_chart_axis_format_tick (&f->xa, f->xa.ticks[i], buf, sizeof buf);
      draw_text (f, f->small, buf, map_x (m, f->xa.ticks[i]), m->py + m->ph + 4, 0.5, 0, 0.7);
    }

  x_title = axis_title (self->x_label, x_is_time (self) ? f->xa.time_unit : self->x_unit);
  if (x_title)
    draw_text (f, f->font, x_title, m->px + m->pw / 2, f->height - PAD, 0.5, 1, 0.85);

  if (y_title)
    {
      cairo_save (cr);
      cairo_translate (cr, PAD, m->py + m->ph / 2);
      cairo_rotate (cr, -G_PI / 2);
      draw_text (f, f->font, y_title, 0, 0, 0.5, 0, 0.85);
      cairo_restore (cr);
    }
}

typedef struct
{
  const GdkRGBA *colour;
  char           text[160];
  double         y;
} ReadoutRow;

static void
format_x (TdmChart *self,
          double    x,
          char     *buf,
          gsize     size)
{
  if (x_is_time (self))
    tdm_chart_format_duration (x, buf, size);
  else
    {
      tdm_chart_format_value (x, buf, size);
      if (self->x_unit && *self->x_unit)
        {
          g_strlcat (buf, " ", size);
          g_strlcat (buf, self->x_unit, size);
        }
    }
}

static void
draw_hover (TdmChart *self,
            Frame    *f)
{
  const Mapping *m = &f->map;
  ReadoutRow rows[MAX_READOUT];
  char header[64], value[48], smooth_value[48];
  double best_x = NAN, best_d = INFINITY, X, bw, bh, bx, by, y;
  guint n_rows = 0;
  int w, h, header_w;
  const char *unit = self->y_unit && *self->y_unit ? self->y_unit : NULL;

  if (self->hover_x < m->px || self->hover_x > m->px + m->pw)
    return;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);
      guint idx;
      double bxv;

      if (!e->visible || e->style == TDM_CHART_STYLE_REFERENCE
          || !tdm_series_lookup (e->series, unmap_x (m, self->hover_x), &idx))
        continue;
      bxv = tdm_series_bucket_x (&tdm_series_get_buckets (e->series, NULL)[idx]);
      if (fabs (map_x (m, bxv) - self->hover_x) < best_d)
        {
          best_d = fabs (map_x (m, bxv) - self->hover_x);
          best_x = bxv;
        }
    }
  if (isnan (best_x))
    return;

  X = floor (map_x (m, best_x)) + 0.5;
  set_source (f->cr, &f->fg, 0.45);
  cairo_set_line_width (f->cr, 1);
  cairo_move_to (f->cr, X, m->py);
  cairo_line_to (f->cr, X, m->py + m->ph);
  cairo_stroke (f->cr);

  for (guint i = 0; i < self->entries->len && n_rows < MAX_READOUT; i++)
    {
      Entry *e = get_entry (self, i);
      const TdmSeriesBucket *buckets;
      double v = NAN, lo, hi, w_smooth;
      guint idx, nb;

      if (!e->visible)
        continue;

      buckets = tdm_series_get_buckets (e->series, &nb);
      w_smooth = tdm_series_get_smoothing (e->series);
      smooth_value[0] = '\0';

      if (e->style == TDM_CHART_STYLE_REFERENCE)
        tdm_series_get_last (e->series, NULL, &v);
      else if (!tdm_series_lookup (e->series, best_x, &idx))
        continue;
      else if (e->style == TDM_CHART_STYLE_POINTS)
        {
          if (fabs (map_x (m, tdm_series_bucket_x (&buckets[idx])) - X) > 6)
            continue;
          v = tdm_series_bucket_mean (&buckets[idx]);
        }
      else
        {
          tdm_series_get_x_range (e->series, &lo, &hi);
          if (best_x < lo || best_x > hi)
            continue;
          v = tdm_series_mean_between (e->series, best_x, best_x);
          if (w_smooth > 0)
            {
              double *smooth = ensure_scratch (self, nb + 1);

              tdm_series_get_smoothed (e->series, smooth, nb);
              tdm_chart_format_value (smooth[idx], smooth_value, sizeof smooth_value);
            }
        }

      tdm_chart_format_value (v, value, sizeof value);
      rows[n_rows].colour = &e->colour;
      rows[n_rows].y = v;
      if (smooth_value[0])
        /* TRANSLATORS: hover readout, "Train: 0.25 (raw 0.31) %" */
        g_snprintf (rows[n_rows].text, sizeof rows[n_rows].text, _("%s: %s (raw %s)%s%s"),
                    tdm_series_get_name (e->series), smooth_value, value,
                    unit ? " " : "", unit ? unit : "");
      else
        g_snprintf (rows[n_rows].text, sizeof rows[n_rows].text, "%s: %s%s%s",
                    tdm_series_get_name (e->series), value,
                    unit ? " " : "", unit ? unit : "");
      n_rows++;

      if (e->style != TDM_CHART_STYLE_REFERENCE && !isnan (map_y (m, v))
          && e->style != TDM_CHART_STYLE_STACKED)
        {
          cairo_new_sub_path (f->cr);
          cairo_arc (f->cr, X, map_y (m, v), 3, 0, 2 * G_PI);
          set_source (f->cr, &e->colour, 1);
          cairo_fill (f->cr);
        }
    }

  format_x (self, best_x, header, sizeof header);
  text_size (f, f->small, header, &header_w, &h);
  bw = header_w;
  for (guint i = 0; i < n_rows; i++)
    {
      text_size (f, f->small, rows[i].text, &w, &h);
      bw = MAX (bw, w + 14);
    }
  bw += 12;
  bh = (n_rows + 1) * (f->small_h + 2) + 10;
  bx = X + 10 + bw > f->width - 2 ? X - 10 - bw : X + 10;
  bx = MAX (2, bx);
  by = m->py + 6;

  cairo_rectangle (f->cr, round (bx) + 0.5, round (by) + 0.5, round (bw), round (bh));
  set_source (f->cr, &f->box_bg, 0.92);
  cairo_fill_preserve (f->cr);
  set_source (f->cr, &f->fg, 0.25);
  cairo_stroke (f->cr);

  y = by + 5;
  draw_text (f, f->small, header, bx + 6, y, 0, 0, 0.7);
  for (guint i = 0; i < n_rows; i++)
    {
      y += f->small_h + 2;
      set_source (f->cr, rows[i].colour, 1);
      cairo_rectangle (f->cr, round (bx + 6), round (y + f->small_h / 2.0 - 4), 8, 8);
      cairo_fill (f->cr);
      draw_text (f, f->small, rows[i].text, bx + 20, y, 0, 0, 0.9);
    }
}

static void
draw_frame (TdmChart *self,
            Frame    *f)
{
  cairo_t *cr = f->cr;
  const Mapping *m = &f->map;

  compute_layout (self, f);

  if (self->title && *self->title)
    draw_text (f, f->bold, self->title, PAD, PAD, 0, 0, 1);

  if (f->empty)
    {
      draw_text (f, f->font, _("No data yet"), f->width / 2.0,
                 (f->body_top + f->height) / 2.0, 0.5, 0.5, 0.55);
      return;
    }

  legend_pass (self, f, TRUE);
  if (!f->has_plot)
    return;

  draw_axes (self, f);

  cairo_save (cr);
  cairo_rectangle (cr, m->px - POINT_RADIUS, m->py - 2,
                   m->pw + 2 * POINT_RADIUS, m->ph + 4);
  cairo_clip (cr);

  draw_stacked (self, f);
  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = get_entry (self, i);

      if (!e->visible)
        continue;

      switch (e->style)
        {
        case TDM_CHART_STYLE_LINE:
        case TDM_CHART_STYLE_DASHED:
          draw_line_series (self, f, e);
          break;
        case TDM_CHART_STYLE_POINTS:
          draw_points_series (self, f, e);
          break;
        case TDM_CHART_STYLE_REFERENCE:
          draw_reference_series (f, e);
          break;
        case TDM_CHART_STYLE_STACKED:
        default:
          break;
        }
    }
  cairo_restore (cr);

  if (f->interactive && self->hovering)
    draw_hover (self, f);
}

static void
frame_init (TdmChart *self,
            Frame    *f,
            cairo_t  *cr,
            int       width,
            int       height,
            gboolean  interactive)
{
  PangoContext *context = gtk_widget_get_pango_context (GTK_WIDGET (self));
  const PangoFontDescription *base = pango_context_get_font_description (context);
  int size;

  memset (f, 0, sizeof *f);
  f->cr = cr;
  f->width = width;
  f->height = height;
  f->interactive = interactive;

  if (interactive)
    {
      GtkStyleContext *style = gtk_widget_get_style_context (GTK_WIDGET (self));
      double lum;

      G_GNUC_BEGIN_IGNORE_DEPRECATIONS
      gtk_style_context_get_color (style, &f->fg);
      G_GNUC_END_IGNORE_DEPRECATIONS
      lum = 0.2126 * f->fg.red + 0.7152 * f->fg.green + 0.0722 * f->fg.blue;
      f->box_bg = lum > 0.5 ? (GdkRGBA) { 0.14, 0.14, 0.15, 1 } : (GdkRGBA) { 1, 1, 1, 1 };
      f->layout = gtk_widget_create_pango_layout (GTK_WIDGET (self), NULL);
    }
  else
    {
      /* Files get a fixed light look, whatever the desktop theme. */
      f->fg = (GdkRGBA) { 0.12, 0.12, 0.13, 1 };
      f->box_bg = (GdkRGBA) { 1, 1, 1, 1 };
      f->layout = pango_cairo_create_layout (cr);
    }

  f->font = base ? pango_font_description_copy (base) : pango_font_description_new ();
  if (pango_font_description_get_size (f->font) <= 0)
    pango_font_description_set_size (f->font, 10 * PANGO_SCALE);
  size = pango_font_description_get_size (f->font);

  f->small = pango_font_description_copy (f->font);
  if (pango_font_description_get_size_is_absolute (f->font))
    pango_font_description_set_absolute_size (f->small, size * 0.85);
  else
    pango_font_description_set_size (f->small, (int) (size * 0.85));

  f->bold = pango_font_description_copy (f->font);
  pango_font_description_set_weight (f->bold, PANGO_WEIGHT_BOLD);
}

static void
frame_clear (Frame *f)
{
  g_clear_object (&f->layout);
  g_clear_pointer (&f->font, pango_font_description_free);
  g_clear_pointer (&f->small, pango_font_description_free);
  g_clear_pointer (&f->bold, pango_font_description_free);
}

/* ---- GtkWidget ------------------------------------------------------------- */

static void
tdm_chart_snapshot (GtkWidget   *widget,
                    GtkSnapshot *snapshot)
{
  TdmChart *self = TDM_CHART (widget);
  int width = gtk_widget_get_width (widget);
  int height = gtk_widget_get_height (widget);
  cairo_t *cr;
  Frame f;

  if (width <= 0 || height <= 0)
    return;

  cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, width, height));
  frame_init (self, &f, cr, width, height, TRUE);
  draw_frame (self, &f);
  frame_clear (&f);
  cairo_destroy (cr);
}

static void
tdm_chart_measure (GtkWidget      *widget,
                   GtkOrientation  orientation,
                   int             for_size,
                   int            *minimum,
                   int            *natural,
                   int            *minimum_baseline,
                   int            *natural_baseline)
{
  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    *minimum = 160, *natural = 420;
  else
    *minimum = 120, *natural = 240;
}

static void
on_motion (GtkEventControllerMotion *controller,
           double                    x,
           double                    y,
           TdmChart                 *self)
{
  self->hovering = TRUE;
  self->hover_x = x;
  self->hover_y = y;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
on_leave (GtkEventControllerMotion *controller,
          TdmChart                 *self)
{
  self->hovering = FALSE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
tdm_chart_finalize (GObject *object)
{
  TdmChart *self = TDM_CHART (object);

  g_clear_pointer (&self->entries, g_ptr_array_unref);
  g_clear_pointer (&self->title, g_free);
  g_clear_pointer (&self->x_label, g_free);
  g_clear_pointer (&self->x_unit, g_free);
  g_clear_pointer (&self->y_label, g_free);
  g_clear_pointer (&self->y_unit, g_free);
  g_clear_pointer (&self->cols, g_free);
  g_clear_pointer (&self->scratch, g_free);

  G_OBJECT_CLASS (tdm_chart_parent_class)->finalize (object);
}

static void
tdm_chart_get_property (GObject    *object,
                        guint       prop_id,
                        GValue     *value,
                        GParamSpec *pspec)
{
  TdmChart *self = TDM_CHART (object);

  switch (prop_id)
    {
    case PROP_TITLE:
      g_value_set_string (value, self->title);
      break;
    case PROP_X_LABEL:
      g_value_set_string (value, self->x_label);
      break;
    case PROP_X_UNIT:
      g_value_set_string (value, self->x_unit);
      break;
    case PROP_Y_LABEL:
      g_value_set_string (value, self->y_label);
      break;
    case PROP_Y_UNIT:
      g_value_set_string (value, self->y_unit);
      break;
    case PROP_LOG_SCALE:
      g_value_set_boolean (value, self->log_scale);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_chart_set_property (GObject      *object,
                        guint         prop_id,
                        const GValue *value,
                        GParamSpec   *pspec)
{
  TdmChart *self = TDM_CHART (object);

  switch (prop_id)
    {
    case PROP_TITLE:
      tdm_chart_set_title (self, g_value_get_string (value));
      break;
    case PROP_X_LABEL:
      tdm_chart_set_x_label (self, g_value_get_string (value));
      break;
    case PROP_X_UNIT:
      tdm_chart_set_x_unit (self, g_value_get_string (value));
      break;
    case PROP_Y_LABEL:
      tdm_chart_set_y_label (self, g_value_get_string (value));
      break;
    case PROP_Y_UNIT:
      tdm_chart_set_y_unit (self, g_value_get_string (value));
      break;
    case PROP_LOG_SCALE:
      tdm_chart_set_log_scale (self, g_value_get_boolean (value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tdm_chart_class_init (TdmChartClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->finalize = tdm_chart_finalize;
  object_class->get_property = tdm_chart_get_property;
  object_class->set_property = tdm_chart_set_property;

  widget_class->snapshot = tdm_chart_snapshot;
  widget_class->measure = tdm_chart_measure;

#define STRING_PROP(id, name, nick) \
  properties[id] = g_param_spec_string (name, nick, NULL, NULL, \
                                        G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | \
                                        G_PARAM_STATIC_STRINGS)
  STRING_PROP (PROP_TITLE, "title", "Title");
  STRING_PROP (PROP_X_LABEL, "x-label", "X label");
  STRING_PROP (PROP_X_UNIT, "x-unit", "X unit");
  STRING_PROP (PROP_Y_LABEL, "y-label", "Y label");
  STRING_PROP (PROP_Y_UNIT, "y-unit", "Y unit");
#undef STRING_PROP
  properties[PROP_LOG_SCALE] =
    g_param_spec_boolean ("log-scale", "Log scale", NULL, FALSE,
                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY |
                          G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_set_css_name (widget_class, "tdmchart");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
tdm_chart_init (TdmChart *self)
{
  GtkEventController *motion = gtk_event_controller_motion_new ();

  self->entries = g_ptr_array_new_with_free_func (entry_free);

  g_signal_connect (motion, "enter", G_CALLBACK (on_motion), self);
  g_signal_connect (motion, "motion", G_CALLBACK (on_motion), self);
  g_signal_connect (motion, "leave", G_CALLBACK (on_leave), self);
  gtk_widget_add_controller (GTK_WIDGET (self), motion);
}

/* ---- public API ------------------------------------------------------------- */

GtkWidget *
tdm_chart_new (void)
{
  return g_object_new (TDM_TYPE_CHART, NULL);
}

static void
set_string (TdmChart  *self,
            char     **field,
            const char *value,
            int         prop)
{
  if (g_strcmp0 (*field, value) == 0)
    return;

  g_free (*field);
  *field = g_strdup (value);
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[prop]);
}

void
tdm_chart_set_title (TdmChart   *self,
                     const char *title)
{
  g_return_if_fail (TDM_IS_CHART (self));

  set_string (self, &self->title, title, PROP_TITLE);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, title ? title : "",
                                  -1);
}

const char *
tdm_chart_get_title (TdmChart *self)
{
  g_return_val_if_fail (TDM_IS_CHART (self), NULL);

  return self->title;
}

void
tdm_chart_set_x_label (TdmChart   *self,
                       const char *label)
{
  g_return_if_fail (TDM_IS_CHART (self));

  set_string (self, &self->x_label, label, PROP_X_LABEL);
}

const char *
tdm_chart_get_x_label (TdmChart *self)
{
  g_return_val_if_fail (TDM_IS_CHART (self), NULL);

  return self->x_label;
}

/**
 * tdm_chart_set_x_unit:
 * @unit: (nullable): "s" makes the x axis a time axis (ticks in s, min or h,
 *   readout as m:ss); anything else is shown as given
 */
void
tdm_chart_set_x_unit (TdmChart   *self,
                      const char *unit)
{
  g_return_if_fail (TDM_IS_CHART (self));

  set_string (self, &self->x_unit, unit, PROP_X_UNIT);
}

const char *
tdm_chart_get_x_unit (TdmChart *self)
{
  g_return_val_if_fail (TDM_IS_CHART (self), NULL);

  return self->x_unit;
}

void
tdm_chart_set_y_label (TdmChart   *self,
                       const char *label)
{
  g_return_if_fail (TDM_IS_CHART (self));

  set_string (self, &self->y_label, label, PROP_Y_LABEL);
}

const char *
tdm_chart_get_y_label (TdmChart *self)
{
  g_return_val_if_fail (TDM_IS_CHART (self), NULL);

  return self->y_label;
}

/**
 * tdm_chart_set_y_unit:
 * @unit: (nullable): shown in the axis title and the readout: "%",
 *   "samples/s", "GiB", "ms"
 */
void
tdm_chart_set_y_unit (TdmChart   *self,
                      const char *unit)
{
  g_return_if_fail (TDM_IS_CHART (self));

  set_string (self, &self->y_unit, unit, PROP_Y_UNIT);
}

const char *
tdm_chart_get_y_unit (TdmChart *self)
{
  g_return_val_if_fail (TDM_IS_CHART (self), NULL);

  return self->y_unit;
}

/**
 * tdm_chart_set_log_scale:
 *
 * A log10 y axis, for loss. Values <= 0 are left out (drawn as gaps).
 */
void
tdm_chart_set_log_scale (TdmChart *self,
                         gboolean  log_scale)
{
  g_return_if_fail (TDM_IS_CHART (self));

  log_scale = !!log_scale;
  if (self->log_scale == log_scale)
    return;

  self->log_scale = log_scale;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_LOG_SCALE]);
}

gboolean
tdm_chart_get_log_scale (TdmChart *self)
{
  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);

  return self->log_scale;
}

/**
 * tdm_chart_set_y_range:
 *
 * Fixes the y axis, e.g. 0..100 for percentages; values outside are clipped.
 * On a log scale a y_min <= 0 means "from the data".
 */
void
tdm_chart_set_y_range (TdmChart *self,
                       double    y_min,
                       double    y_max)
{
  g_return_if_fail (TDM_IS_CHART (self));
  g_return_if_fail (isfinite (y_min) && isfinite (y_max) && y_max > y_min);

  self->fixed_range = TRUE;
  self->fixed_min = y_min;
  self->fixed_max = y_max;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/* Back to a y range that follows the data. */
void
tdm_chart_unset_y_range (TdmChart *self)
{
  g_return_if_fail (TDM_IS_CHART (self));

  self->fixed_range = FALSE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * tdm_chart_add_series:
 * @name: shown in the legend, the readout and CSV headers
 * @colour: (nullable): %NULL for tdm_chart_device_colour() of its index
 *
 * Series are drawn in the order they are added; stacked series stack in that
 * order too. A %TDM_CHART_STYLE_REFERENCE series keeps only its latest value.
 *
 * Returns: the id to append to, counting from 0
 */
guint
tdm_chart_add_series (TdmChart      *self,
                      const char    *name,
                      const GdkRGBA *colour,
                      TdmChartStyle  style)
{
  Entry *e;

  g_return_val_if_fail (TDM_IS_CHART (self), 0);
  g_return_val_if_fail (style <= TDM_CHART_STYLE_REFERENCE, 0);

  e = g_new0 (Entry, 1);
  e->series = tdm_series_new (name, TDM_SERIES_DEFAULT_CAPACITY);
  e->style = style;
  e->visible = TRUE;
  if (colour)
    e->colour = *colour;
  else
    tdm_chart_device_colour (self->entries->len, &e->colour);
  g_ptr_array_add (self->entries, e);
  gtk_widget_queue_draw (GTK_WIDGET (self));

  return self->entries->len - 1;
}

guint
tdm_chart_get_n_series (TdmChart *self)
{
  g_return_val_if_fail (TDM_IS_CHART (self), 0);

  return self->entries->len;
}

/**
 * tdm_chart_get_series:
 *
 * Returns: (transfer none): the data of a series, for reading; append
 *   through tdm_chart_append() so the chart redraws
 */
TdmSeries *
tdm_chart_get_series (TdmChart *self,
                      guint     series)
{
  g_return_val_if_fail (TDM_IS_CHART (self), NULL);
  g_return_val_if_fail (series < self->entries->len, NULL);

  return get_entry (self, series)->series;
}

/**
 * tdm_chart_set_series_smoothing:
 * @weight: 0 for none, up to 0.999; 0.6 is TensorBoard's default
 *
 * Draws an exponential moving average over the (faint) raw line.
 */
void
tdm_chart_set_series_smoothing (TdmChart *self,
                                guint     series,
                                double    weight)
{
  g_return_if_fail (TDM_IS_CHART (self));
  g_return_if_fail (series < self->entries->len);

  tdm_series_set_smoothing (get_entry (self, series)->series, weight);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_chart_set_series_visible (TdmChart *self,
                              guint     series,
                              gboolean  visible)
{
  g_return_if_fail (TDM_IS_CHART (self));
  g_return_if_fail (series < self->entries->len);

  get_entry (self, series)->visible = !!visible;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * tdm_chart_append:
 * @y: NaN for a gap
 *
 * Cheap: no allocation once the series has grown, and only a queued draw,
 * which GTK coalesces to one per frame however often this is called.
 */
void
tdm_chart_append (TdmChart *self,
                  guint     series,
                  double    x,
                  double    y)
{
  Entry *e;

  g_return_if_fail (TDM_IS_CHART (self));
  g_return_if_fail (series < self->entries->len);

  e = get_entry (self, series);
  if (e->style == TDM_CHART_STYLE_REFERENCE)
    tdm_series_clear (e->series);
  tdm_series_append (e->series, x, y);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/* Forgets every point, keeps the series (for a new run). */
void
tdm_chart_clear (TdmChart *self)
{
  g_return_if_fail (TDM_IS_CHART (self));

  for (guint i = 0; i < self->entries->len; i++)
    tdm_series_clear (get_entry (self, i)->series);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_chart_remove_all_series (TdmChart *self)
{
  g_return_if_fail (TDM_IS_CHART (self));

  g_ptr_array_set_size (self->entries, 0);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * tdm_chart_render:
 *
 * Draws the chart as exported (light background, no hover) onto any cairo
 * context, at the current origin, in a width × height box.
 */
void
tdm_chart_render (TdmChart *self,
                  cairo_t  *cr,
                  int       width,
                  int       height)
{
  Frame f;

  g_return_if_fail (TDM_IS_CHART (self));
  g_return_if_fail (cr != NULL);

  if (width <= 0 || height <= 0)
    return;

  cairo_save (cr);
  cairo_rectangle (cr, 0, 0, width, height);
  cairo_clip (cr);
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_paint (cr);

  frame_init (self, &f, cr, width, height, FALSE);
  draw_frame (self, &f);
  frame_clear (&f);
  cairo_restore (cr);
}

/**
 * tdm_chart_get_plot_area:
 * @area: (out): where data is drawn in a render of this size
 *
 * Returns: %FALSE when no plot would be drawn (no data, or too small)
 */
gboolean
tdm_chart_get_plot_area (TdmChart     *self,
                         int           width,
                         int           height,
                         GdkRectangle *area)
{
  cairo_surface_t *surface;
  cairo_t *cr;
  gboolean ok;
  Frame f;

  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (area != NULL, FALSE);

  surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1, 1);
  cr = cairo_create (surface);
  frame_init (self, &f, cr, width, height, FALSE);
  ok = compute_layout (self, &f);
  *area = (GdkRectangle) { (int) f.map.px, (int) f.map.py, (int) f.map.pw, (int) f.map.ph };
  frame_clear (&f);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);

  return ok;
}

static cairo_status_t
append_bytes (void                *closure,
              const unsigned char *data,
              unsigned int         length)
{
  g_byte_array_append (closure, data, length);

  return CAIRO_STATUS_SUCCESS;
}

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

/* Written whole through g_file_set_contents(), so a failed export leaves no
 * half-written file and the error names the real cause. */
static gboolean
save_bytes (GByteArray  *bytes,
            const char  *path,
            GError     **error)
{
  return g_file_set_contents (path, (const char *) bytes->data, bytes->len, error);
}

gboolean
tdm_chart_export_png (TdmChart    *self,
                      const char  *path,
                      int          width,
                      int          height,
                      GError     **error)
{
  g_autoptr (GByteArray) bytes = g_byte_array_new ();
  cairo_surface_t *surface;
  cairo_status_t status;
  cairo_t *cr;

  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (width > 0 && height > 0, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, width, height);
  cr = cairo_create (surface);
  tdm_chart_render (self, cr, width, height);
  status = cairo_status (cr);
  cairo_destroy (cr);
  if (status == CAIRO_STATUS_SUCCESS)
    status = cairo_surface_write_to_png_stream (surface, append_bytes, bytes);
  cairo_surface_destroy (surface);

  return check_cairo (status, path, error) && save_bytes (bytes, path, error);
}

gboolean
tdm_chart_export_svg (TdmChart    *self,
                      const char  *path,
                      int          width,
                      int          height,
                      GError     **error)
{
  g_autoptr (GByteArray) bytes = g_byte_array_new ();
  cairo_surface_t *surface;
  cairo_status_t status;
  cairo_t *cr;

  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (width > 0 && height > 0, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  surface = cairo_svg_surface_create_for_stream (append_bytes, bytes, width, height);
  cr = cairo_create (surface);
  tdm_chart_render (self, cr, width, height);
  status = cairo_status (cr);
  cairo_destroy (cr);
  cairo_surface_finish (surface);
  if (status == CAIRO_STATUS_SUCCESS)
    status = cairo_surface_status (surface);
  cairo_surface_destroy (surface);

  return check_cairo (status, path, error) && save_bytes (bytes, path, error);
}

/**
 * tdm_chart_export_csv:
 *
 * Writes every series but reference lines, joined on x; see
 * tdm_series_to_csv(). The first column is named after the x axis.
 */
gboolean
tdm_chart_export_csv (TdmChart    *self,
                      const char  *path,
                      GError     **error)
{
  g_autoptr (GPtrArray) list = g_ptr_array_new ();
  g_autofree char *x_name = NULL;

  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  for (guint i = 0; i < self->entries->len; i++)
    if (get_entry (self, i)->style != TDM_CHART_STYLE_REFERENCE)
      g_ptr_array_add (list, get_entry (self, i)->series);

  x_name = axis_title (self->x_label, self->x_unit);

  return tdm_series_write_csv ((TdmSeries *const *) list->pdata, list->len,
                               x_name, path, error);
}

/**
 * tdm_chart_device_colour:
 * @index: device index, from 0
 *
 * The colour of a device in every chart: the Okabe–Ito palette (readable
 * with the common colour-vision deficiencies), ordered so that neighbours
 * differ most, with grey in place of black so it shows on dark themes. From
 * the ninth device on the colours repeat, darkened.
 */
void
tdm_chart_device_colour (int      index,
                         GdkRGBA *out)
{
  static const guint32 palette[TDM_CHART_N_DEVICE_COLOURS] = {
    0x0072B2, /* blue */
    0xE69F00, /* orange */
    0x009E73, /* bluish green */
    0xD55E00, /* vermillion */
    0x56B4E9, /* sky blue */
    0xCC79A7, /* reddish purple */
    0xF0E442, /* yellow */
    0x999999, /* grey */
  };
  guint i, round_;
  double shade;
  guint32 c;

  g_return_if_fail (out != NULL);

  i = (guint) ABS (index);
  c = palette[i % TDM_CHART_N_DEVICE_COLOURS];
  round_ = i / TDM_CHART_N_DEVICE_COLOURS;
  shade = round_ % 2 ? 0.7 : 1.0;

  out->red = ((c >> 16) & 0xff) / 255.0 * shade;
  out->green = ((c >> 8) & 0xff) / 255.0 * shade;
  out->blue = (c & 0xff) / 255.0 * shade;
  out->alpha = 1;
}
