/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-series.h: a bounded, decimated time series for the charts.
 *
 * A TdmSeries keeps at most `capacity` buckets, however many points are
 * appended. Each bucket summarises a run of consecutive raw points as a
 * min/max/mean envelope, so a spike survives decimation. When the buckets run
 * out, neighbours are merged in pairs and every bucket then covers twice as
 * many raw points. It is a plain struct for the main thread, not a GObject and
 * not thread-safe; it knows nothing of drawing. x is expected to be
 * non-decreasing (time, step); NaN y marks a gap.
 */

#pragma once

#include <glib.h>
#include <math.h>

G_BEGIN_DECLS

#define TDM_SERIES_DEFAULT_CAPACITY 4096

typedef struct _TdmSeries TdmSeries;

typedef struct
{
  double x_min;   /* x span of the raw points merged into this bucket */
  double x_max;
  double y_min;   /* envelope over the finite y values; NaN if there are none */
  double y_max;
  double y_sum;   /* sum of the finite y values */
  guint  n_points; /* raw points, NaN included */
  guint  n_finite; /* raw points with a finite y */
} TdmSeriesBucket;

/* Where a bucket is drawn and what its value is: NaN when it is a gap. */
static inline double
tdm_series_bucket_x (const TdmSeriesBucket *b)
{
  return 0.5 * (b->x_min + b->x_max);
}

static inline double
tdm_series_bucket_mean (const TdmSeriesBucket *b)
{
  return b->n_finite > 0 ? b->y_sum / b->n_finite : (double) NAN;
}

TdmSeries             *tdm_series_new              (const char  *name,
                                                    guint        capacity);
void                   tdm_series_free             (TdmSeries   *series);

const char            *tdm_series_get_name         (TdmSeries   *series);

void                   tdm_series_append           (TdmSeries   *series,
                                                    double       x,
                                                    double       y);
void                   tdm_series_clear            (TdmSeries   *series);

guint                  tdm_series_get_capacity     (TdmSeries   *series);
guint64                tdm_series_get_n_appended   (TdmSeries   *series);
guint                  tdm_series_get_bucket_width (TdmSeries   *series);
const TdmSeriesBucket *tdm_series_get_buckets      (TdmSeries   *series,
                                                    guint       *n_buckets);

gboolean               tdm_series_get_x_range      (TdmSeries   *series,
                                                    double      *x_min,
                                                    double      *x_max);
gboolean               tdm_series_get_y_range      (TdmSeries   *series,
                                                    gboolean     positive_only,
                                                    double      *y_min,
                                                    double      *y_max);
gboolean               tdm_series_get_last         (TdmSeries   *series,
                                                    double      *x,
                                                    double      *y);
gboolean               tdm_series_lookup           (TdmSeries   *series,
                                                    double       x,
                                                    guint       *index);
double                 tdm_series_mean_between     (TdmSeries   *series,
                                                    double       x0,
                                                    double       x1);

void                   tdm_series_set_smoothing    (TdmSeries   *series,
                                                    double       weight);
double                 tdm_series_get_smoothing    (TdmSeries   *series);
guint                  tdm_series_get_smoothed     (TdmSeries   *series,
                                                    double      *out,
                                                    guint        n_out);
const double          *tdm_series_peek_smoothed    (TdmSeries   *series,
                                                    guint       *n_values);

char                  *tdm_series_to_csv           (TdmSeries  *const *series,
                                                    guint        n_series,
                                                    const char  *x_name);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TdmSeries, tdm_series_free)

G_END_DECLS
