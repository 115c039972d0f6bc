/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart.c: the TdmChart widget, its properties and its public API.
 *
 * The widget keeps the series and the labels; tdm-chart-draw.c and
 * tdm-chart-plot.c draw them (see tdm-chart-private.h). Appending only queues
 * a draw, which GTK coalesces to one per frame. Exports render the same frame
 * onto a cairo image or SVG surface held in memory, then write the file in one
 * go, so a failed export leaves nothing half written.
 */

#include "tdm-chart-private.h"

#include <string.h>

#include <glib/gi18n.h>

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

static void
entry_free (gpointer data)
{
  Entry *e = data;

  tdm_series_free (e->series);
  g_free (e);
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
  tdm_chart_frame_init (self, &f, cr, width, height, TRUE);
  tdm_chart_frame_draw (self, &f);
  tdm_chart_frame_clear (&f);
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
  /* A modest natural width: a flow box of charts fits as many columns as natural
   * widths allow, and the charts then expand to share the row. */
  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    *minimum = 160, *natural = 240;
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
  g_clear_pointer (&self->overlay_cache, cairo_surface_destroy);
  g_clear_pointer (&self->curve_x, g_free);
  g_clear_pointer (&self->curve_y, g_free);
  tdm_chart_raster_clear (&self->raster);

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
  g_return_val_if_fail (style <= TDM_CHART_STYLE_OVERLAY, 0);

  e = g_new0 (Entry, 1);
  e->series = tdm_series_new (name, TDM_SERIES_DEFAULT_CAPACITY);
  e->style = style;
  e->visible = TRUE;
  if (colour)
    e->colour = *colour;
  else
    tdm_chart_device_colour (self->entries->len, &e->colour);
  g_ptr_array_add (self->entries, e);
  tdm_chart_overlays_changed (self);
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
  tdm_chart_overlays_changed (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

gboolean
tdm_chart_get_series_visible (TdmChart *self,
                              guint     series)
{
  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (series < self->entries->len, FALSE);

  return get_entry (self, series)->visible;
}

void
tdm_chart_set_series_visible (TdmChart *self,
                              guint     series,
                              gboolean  visible)
{
  g_return_if_fail (TDM_IS_CHART (self));
  g_return_if_fail (series < self->entries->len);

  get_entry (self, series)->visible = !!visible;
  tdm_chart_overlays_changed (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_chart_set_series_in_legend (TdmChart *self,
                                guint     series,
                                gboolean  in_legend)
{
  g_return_if_fail (TDM_IS_CHART (self));
  g_return_if_fail (series < self->entries->len);

  get_entry (self, series)->no_legend = !in_legend;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

gboolean
tdm_chart_get_series_in_legend (TdmChart *self,
                                guint     series)
{
  g_return_val_if_fail (TDM_IS_CHART (self), FALSE);
  g_return_val_if_fail (series < self->entries->len, FALSE);

  return !get_entry (self, series)->no_legend;
}

void
tdm_chart_get_series_colour (TdmChart *self,
                             guint     series,
                             GdkRGBA  *colour)
{
  g_return_if_fail (TDM_IS_CHART (self));
  g_return_if_fail (series < self->entries->len);
  g_return_if_fail (colour != NULL);

  *colour = get_entry (self, series)->colour;
}

void
tdm_chart_truncate_series (TdmChart *self,
                           guint     n_series)
{
  g_return_if_fail (TDM_IS_CHART (self));

  if (n_series < self->entries->len)
    {
      g_ptr_array_set_size (self->entries, n_series);
      tdm_chart_overlays_changed (self);
      gtk_widget_queue_draw (GTK_WIDGET (self));
    }
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
  else if (e->style == TDM_CHART_STYLE_OVERLAY)
    tdm_chart_overlays_changed (self);
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
  tdm_chart_overlays_changed (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_chart_remove_all_series (TdmChart *self)
{
  g_return_if_fail (TDM_IS_CHART (self));

  g_ptr_array_set_size (self->entries, 0);
  tdm_chart_overlays_changed (self);
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

  tdm_chart_frame_init (self, &f, cr, width, height, FALSE);
  tdm_chart_frame_draw (self, &f);
  tdm_chart_frame_clear (&f);
  cairo_restore (cr);
}

/**
 * tdm_chart_render_live:
 *
 * Draws the chart as the widget does on screen (the theme's colours, the overlaid
 * runs painted from their cached image), without the hover readout: what a frame of
 * the window costs, for benchmarks.
 */
void
tdm_chart_render_live (TdmChart *self,
                       cairo_t  *cr,
                       int       width,
                       int       height)
{
  gboolean hovering;
  Frame f;

  g_return_if_fail (TDM_IS_CHART (self));
  g_return_if_fail (cr != NULL);

  if (width <= 0 || height <= 0)
    return;

  hovering = self->hovering;
  self->hovering = FALSE;
  tdm_chart_frame_init (self, &f, cr, width, height, TRUE);
  tdm_chart_frame_draw (self, &f);
  tdm_chart_frame_clear (&f);
  self->hovering = hovering;
}

void
tdm_chart_set_corner_reserve (TdmChart *self,
                              int       width,
                              int       height)
{
  g_return_if_fail (TDM_IS_CHART (self));

  self->reserve_w = MAX (width, 0);
  self->reserve_h = MAX (height, 0);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tdm_chart_set_nested_lines (TdmChart *self,
                            gboolean  nested)
{
  g_return_if_fail (TDM_IS_CHART (self));

  self->nested_lines = !!nested;
  gtk_widget_queue_draw (GTK_WIDGET (self));
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
