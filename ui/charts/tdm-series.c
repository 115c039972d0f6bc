/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-series.c: bounded, decimated time series.
 *
 * Every bucket but the last holds exactly `width` raw points; the last one is
 * filling. When a new bucket is needed and all `capacity` are in use, pairs
 * are merged (width doubles, half the buckets free up), so appending stays
 * O(1) amortised and memory never grows past capacity buckets. The bucket
 * array grows by doubling up to capacity, so short series stay small and
 * appending does not allocate in steady state. Smoothing is a view computed on
 * demand from bucket means; the raw points are gone by then.
 */

#include "tdm-series.h"

#include <errno.h>
#include <string.h>

#include <gio/gio.h>

struct _TdmSeries
{
  char            *name;
  TdmSeriesBucket *buckets;
  guint            n_buckets;
  guint            n_allocated;
  guint            capacity;
  guint            width;        /* raw points per full bucket, a power of two */
  guint64          n_appended;
  double           smoothing;

  /* tdm_series_peek_smoothed()'s values, while `smooth_valid`: a series drawn again
   * unchanged (an overlaid earlier run) is not smoothed again. */
  double          *smooth;
  guint            n_smooth_allocated;
  gboolean         smooth_valid;

  /* Running extents over everything appended since the last clear. */
  double           x_min, x_max;
  double           y_min, y_max;
  double           y_min_positive, y_max_positive;
  gboolean         has_x, has_y, has_positive;
  double           last_x, last_y;
};

/**
 * tdm_series_new:
 * @name: (nullable): shown in legends and CSV headers
 * @capacity: most buckets kept, even and at least 2; 0 for
 *   %TDM_SERIES_DEFAULT_CAPACITY
 */
TdmSeries *
tdm_series_new (const char *name,
                guint       capacity)
{
  TdmSeries *self;

  if (capacity == 0)
    capacity = TDM_SERIES_DEFAULT_CAPACITY;
  g_return_val_if_fail (capacity >= 2 && capacity % 2 == 0, NULL);

  self = g_new0 (TdmSeries, 1);
  self->name = g_strdup (name ? name : "");
  self->capacity = capacity;
  self->n_allocated = MIN (capacity, 64u);
  self->buckets = g_new (TdmSeriesBucket, self->n_allocated);
  tdm_series_clear (self);

  return self;
}

void
tdm_series_free (TdmSeries *self)
{
  if (self == NULL)
    return;

  g_free (self->name);
  g_free (self->buckets);
  g_free (self->smooth);
  g_free (self);
}

const char *
tdm_series_get_name (TdmSeries *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  return self->name;
}

void
tdm_series_clear (TdmSeries *self)
{
  g_return_if_fail (self != NULL);

  self->n_buckets = 0;
  self->width = 1;
  self->n_appended = 0;
  self->smooth_valid = FALSE;
  self->has_x = self->has_y = self->has_positive = FALSE;
  self->x_min = self->x_max = NAN;
  self->y_min = self->y_max = NAN;
  self->y_min_positive = self->y_max_positive = NAN;
  self->last_x = self->last_y = NAN;
}

static void
merge_into (TdmSeriesBucket       *dst,
            const TdmSeriesBucket *src)
{
  dst->x_min = MIN (dst->x_min, src->x_min);
  dst->x_max = MAX (dst->x_max, src->x_max);
  /* fmin/fmax ignore a NaN operand, which is what a gap should do here. */
  dst->y_min = fmin (dst->y_min, src->y_min);
  dst->y_max = fmax (dst->y_max, src->y_max);
  dst->y_sum += src->y_sum;
  dst->n_points += src->n_points;
  dst->n_finite += src->n_finite;
}

static void
compact (TdmSeries *self)
{
  guint half = self->n_buckets / 2;

  for (guint i = 0; i < half; i++)
    {
      TdmSeriesBucket merged = self->buckets[2 * i];

      merge_into (&merged, &self->buckets[2 * i + 1]);
      self->buckets[i] = merged;
    }

  /* Only reached with every bucket full and capacity even: no bucket is left
   * over and every merged one is full again. */
  self->n_buckets = half;
  self->width *= 2;
}

static TdmSeriesBucket *
next_bucket (TdmSeries *self)
{
  if (self->n_buckets > 0
      && self->buckets[self->n_buckets - 1].n_points < self->width)
    return &self->buckets[self->n_buckets - 1];

  if (self->n_buckets == self->capacity)
    compact (self);

  if (self->n_buckets == self->n_allocated)
    {
      self->n_allocated = MIN (self->capacity, self->n_allocated * 2);
      self->buckets = g_renew (TdmSeriesBucket, self->buckets, self->n_allocated);
    }

  self->buckets[self->n_buckets] = (TdmSeriesBucket) {
    .x_min = INFINITY, .x_max = -INFINITY,
    .y_min = NAN, .y_max = NAN,
  };

  return &self->buckets[self->n_buckets++];
}

/**
 * tdm_series_append:
 * @y: the value; NaN (or infinity) marks a gap
 *
 * Points with a NaN x are dropped: they have nowhere to go.
 */
void
tdm_series_append (TdmSeries *self,
                   double     x,
                   double     y)
{
  TdmSeriesBucket *b;

  g_return_if_fail (self != NULL);

  if (isnan (x))
    return;

  b = next_bucket (self);
  b->x_min = MIN (b->x_min, x);
  b->x_max = MAX (b->x_max, x);
  b->n_points++;

  self->x_min = self->has_x ? MIN (self->x_min, x) : x;
  self->x_max = self->has_x ? MAX (self->x_max, x) : x;
  self->has_x = TRUE;
  self->n_appended++;
  self->smooth_valid = FALSE;
  self->last_x = x;
  self->last_y = y;

  if (!isfinite (y))
    return;

  b->y_min = fmin (b->y_min, y);
  b->y_max = fmax (b->y_max, y);
  b->y_sum += y;
  b->n_finite++;

  self->y_min = self->has_y ? MIN (self->y_min, y) : y;
  self->y_max = self->has_y ? MAX (self->y_max, y) : y;
  self->has_y = TRUE;

  if (y > 0)
    {
      self->y_min_positive = self->has_positive ? MIN (self->y_min_positive, y) : y;
      self->y_max_positive = self->has_positive ? MAX (self->y_max_positive, y) : y;
      self->has_positive = TRUE;
    }
}

guint
tdm_series_get_capacity (TdmSeries *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return self->capacity;
}

guint64
tdm_series_get_n_appended (TdmSeries *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return self->n_appended;
}

/* Raw points per full bucket: 1 until the first merge. */
guint
tdm_series_get_bucket_width (TdmSeries *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return self->width;
}

/**
 * tdm_series_get_buckets:
 *
 * Returns: (transfer none): the buckets in x order, valid until the next
 *   append or clear
 */
const TdmSeriesBucket *
tdm_series_get_buckets (TdmSeries *self,
                        guint     *n_buckets)
{
  g_return_val_if_fail (self != NULL, NULL);

  if (n_buckets)
    *n_buckets = self->n_buckets;

  return self->buckets;
}

gboolean
tdm_series_get_x_range (TdmSeries *self,
                        double    *x_min,
                        double    *x_max)
{
  g_return_val_if_fail (self != NULL, FALSE);

  if (x_min)
    *x_min = self->x_min;
  if (x_max)
    *x_max = self->x_max;

  return self->has_x;
}

/**
 * tdm_series_get_y_range:
 * @positive_only: consider only y > 0, as a log scale needs
 *
 * Returns: %FALSE when there is no such value (the outputs are then NaN)
 */
gboolean
tdm_series_get_y_range (TdmSeries *self,
                        gboolean   positive_only,
                        double    *y_min,
                        double    *y_max)
{
  g_return_val_if_fail (self != NULL, FALSE);

  if (y_min)
    *y_min = positive_only ? self->y_min_positive : self->y_min;
  if (y_max)
    *y_max = positive_only ? self->y_max_positive : self->y_max;

  return positive_only ? self->has_positive : self->has_y;
}

/* The last point appended, its y possibly NaN. */
gboolean
tdm_series_get_last (TdmSeries *self,
                     double    *x,
                     double    *y)
{
  g_return_val_if_fail (self != NULL, FALSE);

  if (x)
    *x = self->last_x;
  if (y)
    *y = self->last_y;

  return self->n_appended > 0;
}

/* Index of the first bucket whose x is >= x (n_buckets if none). */
static guint
lower_bound (TdmSeries *self,
             double     x)
{
  guint lo = 0, hi = self->n_buckets;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;

      if (tdm_series_bucket_x (&self->buckets[mid]) < x)
        lo = mid + 1;
      else
        hi = mid;
    }

  return lo;
}

/**
 * tdm_series_lookup:
 * @index: (out): the bucket nearest to @x
 *
 * Returns: %FALSE when the series is empty
 */
gboolean
tdm_series_lookup (TdmSeries *self,
                   double     x,
                   guint     *index)
{
  guint i;

  g_return_val_if_fail (self != NULL, FALSE);

  if (self->n_buckets == 0 || isnan (x))
    return FALSE;

  i = lower_bound (self, x);
  if (i == self->n_buckets)
    i--;
  else if (i > 0
           && x - tdm_series_bucket_x (&self->buckets[i - 1])
              < tdm_series_bucket_x (&self->buckets[i]) - x)
    i--;

  if (index)
    *index = i;

  return TRUE;
}

/**
 * tdm_series_mean_between:
 *
 * The mean of the values whose buckets lie in [x0, x1); with none there, the
 * value interpolated at the middle; NaN outside the series or in a gap. Used
 * to stack series on a common grid.
 */
double
tdm_series_mean_between (TdmSeries *self,
                         double     x0,
                         double     x1)
{
  double sum = 0, xm, xa, xb, ya, yb;
  guint64 n = 0;
  guint i;

  g_return_val_if_fail (self != NULL, NAN);

  if (self->n_buckets == 0)
    return NAN;

  for (i = lower_bound (self, x0);
       i < self->n_buckets && tdm_series_bucket_x (&self->buckets[i]) < x1;
       i++)
    {
      sum += self->buckets[i].y_sum;
      n += self->buckets[i].n_finite;
    }
  if (n > 0)
    return sum / n;

  xm = 0.5 * (x0 + x1);
  i = lower_bound (self, xm);
  if (i == self->n_buckets || (i == 0 && tdm_series_bucket_x (&self->buckets[0]) > xm))
    return NAN;
  if (i == 0)
    return tdm_series_bucket_mean (&self->buckets[0]);

  xa = tdm_series_bucket_x (&self->buckets[i - 1]);
  xb = tdm_series_bucket_x (&self->buckets[i]);
  ya = tdm_series_bucket_mean (&self->buckets[i - 1]);
  yb = tdm_series_bucket_mean (&self->buckets[i]);
  if (xb <= xa)
    return yb;

  return ya + (yb - ya) * (xm - xa) / (xb - xa);
}

/**
 * tdm_series_set_smoothing:
 * @weight: 0 (off) to below 1; TensorBoard's smoothing slider, 0.6 typical
 */
void
tdm_series_set_smoothing (TdmSeries *self,
                          double     weight)
{
  g_return_if_fail (self != NULL);

  self->smoothing = CLAMP (weight, 0.0, 0.999);
  self->smooth_valid = FALSE;
}

double
tdm_series_get_smoothing (TdmSeries *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return self->smoothing;
}

/**
 * tdm_series_get_smoothed:
 * @out: room for one value per bucket
 *
 * Fills @out with the debiased exponential moving average of the bucket
 * means (NaN at gaps). A bucket of k raw points counts as k equal points, so
 * the curve does not change character as the series is decimated.
 *
 * Returns: the number of values written
 */
guint
tdm_series_get_smoothed (TdmSeries *self,
                         double    *out,
                         guint      n_out)
{
  double w, ema = 0, weight_left = 1, decay = 0;
  guint n, decay_n = 0;

  g_return_val_if_fail (self != NULL, 0);
  g_return_val_if_fail (out != NULL || n_out == 0, 0);

  w = self->smoothing;
  n = MIN (n_out, self->n_buckets);

  for (guint i = 0; i < n; i++)
    {
      const TdmSeriesBucket *b = &self->buckets[i];

      if (b->n_finite == 0)
        {
          out[i] = NAN;
          continue;
        }

      /* Buckets but the last hold the same number of points: one pow() a series,
       * not one a bucket (it was most of a redraw's smoothing). */
      if (b->n_finite != decay_n)
        {
          decay_n = b->n_finite;
          decay = w > 0 ? pow (w, decay_n) : 0;
        }
      ema = ema * decay + (1 - decay) * tdm_series_bucket_mean (b);
      weight_left *= decay;
      /* The start's bias is gone once its weight underflows: no division. */
      out[i] = weight_left > 0 ? ema / (1 - weight_left) : ema;
    }

  return n;
}

/**
 * tdm_series_peek_smoothed:
 * @n_values: (out): how many values, one per bucket
 *
 * tdm_series_get_smoothed() into the series' own array, computed again only after
 * the series changed (appended to, cleared, smoothing set).
 *
 * Returns: (transfer none): the values, valid until the series changes
 */
const double *
tdm_series_peek_smoothed (TdmSeries *self,
                          guint     *n_values)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (n_values != NULL, NULL);

  if (!self->smooth_valid)
    {
      if (self->n_buckets > self->n_smooth_allocated)
        {
          self->n_smooth_allocated = MAX (self->n_buckets, 2 * self->n_smooth_allocated);
          self->smooth = g_renew (double, self->smooth, self->n_smooth_allocated);
        }
      tdm_series_get_smoothed (self, self->smooth, self->n_buckets);
      self->smooth_valid = TRUE;
    }
  *n_values = self->n_buckets;
  return self->smooth;
}

/* RFC 4180; a name with a space ("cpu 1") is quoted too, so no reader splits it. */
static void
append_csv_field (GString    *out,
                  const char *field)
{
  if (strpbrk (field, " ,\"\r\n") == NULL)
    {
      g_string_append (out, field);
      return;
    }

  g_string_append_c (out, '"');
  for (const char *p = field; *p; p++)
    {
      if (*p == '"')
        g_string_append_c (out, '"');
      g_string_append_c (out, *p);
    }
  g_string_append_c (out, '"');
}

static void
append_csv_number (GString *out,
                   double   v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];

  g_string_append (out, g_ascii_formatd (buf, sizeof buf, "%.9g", v));
}

/**
 * tdm_series_to_csv:
 * @x_name: (nullable): header of the first column, "x" if %NULL
 *
 * One header row (x, then the series names), then one row per distinct x in
 * ascending order, merging the series like a join on x. A series with no
 * point at that x, or a gap there, leaves its cell empty. Decimated series
 * give one row per bucket, holding its mean.
 *
 * Returns: (transfer full): the CSV text
 */
char *
tdm_series_to_csv (TdmSeries *const *series,
                   guint             n_series,
                   const char       *x_name)
{
  g_autofree guint *next = g_new0 (guint, MAX (n_series, 1));
  GString *out = g_string_new (NULL);

  append_csv_field (out, x_name ? x_name : "x");
  for (guint s = 0; s < n_series; s++)
    {
      g_string_append_c (out, ',');
      append_csv_field (out, series[s]->name);
    }
  g_string_append_c (out, '\n');

  for (;;)
    {
      double x = INFINITY;
      gboolean any = FALSE;

      for (guint s = 0; s < n_series; s++)
        if (next[s] < series[s]->n_buckets)
          {
            x = MIN (x, tdm_series_bucket_x (&series[s]->buckets[next[s]]));
            any = TRUE;
          }
      if (!any)
        break;

      append_csv_number (out, x);
      for (guint s = 0; s < n_series; s++)
        {
          g_string_append_c (out, ',');
          if (next[s] < series[s]->n_buckets
              && tdm_series_bucket_x (&series[s]->buckets[next[s]]) == x)
            {
              const TdmSeriesBucket *b = &series[s]->buckets[next[s]++];

              if (b->n_finite > 0)
                append_csv_number (out, tdm_series_bucket_mean (b));
            }
        }
      g_string_append_c (out, '\n');
    }

  return g_string_free (out, FALSE);
}
