/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-chart-axis.c: nice ticks and labels for TdmChart.
 *
 * Steps are 1, 2 or 5 times a power of ten, chosen so that at most max_ticks
 * ticks fit. Labels on one axis share one SI scale and one number of decimals,
 * so they line up and never read "0.30000000000000004". Nothing here draws.
 */

#include "tdm-chart-axis.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <glib/gi18n.h>

double
tdm_chart_axis_nice_step (double span,
                          guint  max_ticks)
{
  double raw, mag, norm;

  if (!(span > 0) || !isfinite (span))
    return 1;

  raw = span / MAX (max_ticks, 1u);
  mag = pow (10, floor (log10 (raw)));
  norm = raw / mag;

  /* The smallest nice step that is not smaller than raw. */
  if (norm <= 1)
    return mag;
  if (norm <= 2)
    return 2 * mag;
  if (norm <= 5)
    return 5 * mag;

  return 10 * mag;
}

static int
decimals_for (double step)
{
  int d;

  if (!(step > 0))
    return 0;

  d = (int) ceil (-log10 (step) - 1e-9);

  return CLAMP (d, 0, 9);
}

static void
fill_ticks (TdmChartAxis *axis,
            double        lo,
            double        hi,
            double        step)
{
  double first = ceil (lo / step - 1e-9) * step;

  axis->n_ticks = 0;
  for (guint i = 0; i < TDM_CHART_AXIS_MAX_TICKS; i++)
    {
      double t = first + i * step;

      if (t > hi + step * 1e-9)
        break;
      /* Snap -0 and near-zero round-off to a clean zero. */
      if (fabs (t) < step * 1e-9)
        t = 0;
      axis->ticks[axis->n_ticks++] = t;
    }
}

static void
choose_si_scale (TdmChartAxis *axis,
                 double        magnitude)
{
  if (magnitude >= 1e9)
    axis->scale = 1e9, axis->suffix = "G";
  else if (magnitude >= 1e6)
    axis->scale = 1e6, axis->suffix = "M";
  else if (magnitude >= 1e3)
    axis->scale = 1e3, axis->suffix = "k";
  else
    axis->scale = 1, axis->suffix = "";
}

/**
 * tdm_chart_axis_linear:
 * @extend: widen lo and hi to whole steps (auto ranges); %FALSE keeps a
 *   fixed range exactly
 */
void
tdm_chart_axis_linear (TdmChartAxis *axis,
                       double        lo,
                       double        hi,
                       guint         max_ticks,
                       gboolean      extend)
{
  double step;

  memset (axis, 0, sizeof *axis);
  axis->kind = TDM_CHART_AXIS_LINEAR;

  if (!isfinite (lo) || !isfinite (hi))
    lo = 0, hi = 1;
  if (hi < lo)
    {
      double t = lo;
      lo = hi, hi = t;
    }
  if (hi == lo)
    {
      double pad = lo != 0 ? fabs (lo) * 0.1 : 1;

      /* Keep non-negative data off the negative side. */
      hi += pad;
      lo = lo >= 0 && lo - pad < 0 ? 0 : lo - pad;
    }

  step = tdm_chart_axis_nice_step (hi - lo, max_ticks);
  if (extend)
    {
      lo = floor (lo / step + 1e-9) * step;
      hi = ceil (hi / step - 1e-9) * step;
    }

  axis->lo = lo;
  axis->hi = hi;
  fill_ticks (axis, lo, hi, step);
  /* A fixed range narrower than two steps can hold a single tick ("2" on an axis
   * from 0.05 to 3), which says nothing about the scale: take the next smaller
   * nice step (5 → 2 → 1 → 0.5 …) until two ticks fit. */
  while (axis->n_ticks < 2 && step > (hi - lo) * 1e-6)
    {
      double mag = pow (10, floor (log10 (step) + 1e-9));
      double norm = step / mag;

      step = norm > 4.5 ? 2 * mag : norm > 1.5 ? mag : 0.5 * mag;
      fill_ticks (axis, lo, hi, step);
    }
  axis->step = step;
  choose_si_scale (axis, MAX (fabs (lo), fabs (hi)));
  axis->decimals = decimals_for (step / axis->scale);
}

/**
 * tdm_chart_axis_log:
 * @lo: smallest positive value
 *
 * Ticks at decades; with few decades also at 2 and 5 times them.
 */
void
tdm_chart_axis_log (TdmChartAxis *axis,
                    double        lo,
                    double        hi,
                    guint         max_ticks,
                    gboolean      extend)
{
  double dlo, dhi, step;

  memset (axis, 0, sizeof *axis);
  axis->kind = TDM_CHART_AXIS_LOG;
  axis->scale = 1;
  axis->suffix = "";

  if (!(lo > 0) || !isfinite (lo))
    lo = hi > 0 && isfinite (hi) ? hi / 10 : 0.1;
  if (!(hi > lo) || !isfinite (hi))
    hi = lo * 10;

  dlo = log10 (lo);
  dhi = log10 (hi);
  if (extend)
    {
      dlo = floor (dlo + 1e-9);
      dhi = ceil (dhi - 1e-9);
      if (dhi <= dlo)
        dhi = dlo + 1;
    }

  axis->lo = pow (10, dlo);
  axis->hi = pow (10, dhi);

  step = MAX (1, ceil ((dhi - dlo) / MAX (max_ticks, 1u)));
  axis->step = step;

  for (double d = ceil (dlo - 1e-9); d <= dhi + 1e-9
       && axis->n_ticks < TDM_CHART_AXIS_MAX_TICKS; d += step)
    {
      double decade = pow (10, d);

      axis->ticks[axis->n_ticks++] = decade;
      if (step == 1 && dhi - dlo <= 2.0001)
        for (int m = 2; m <= 5; m += 3)
          {
            double t = m * decade;

            if (t >= axis->lo * (1 - 1e-9) && t <= axis->hi * (1 + 1e-9)
                && axis->n_ticks < TDM_CHART_AXIS_MAX_TICKS)
              axis->ticks[axis->n_ticks++] = t;
          }
    }
}

/**
 * tdm_chart_axis_time:
 *
 * A linear axis over seconds whose labels are in s, min or h, whichever
 * suits the end of the range (elapsed training time starts at 0).
 */
void
tdm_chart_axis_time (TdmChartAxis *axis,
                     double        lo,
                     double        hi,
                     guint         max_ticks)
{
  double unit;
  const char *name;
  double end;

  if (!isfinite (lo) || !isfinite (hi))
    lo = 0, hi = 1;
  end = MAX (fabs (lo), fabs (hi));

  if (end < 180)
    unit = 1, name = C_("time unit", "s");
  else if (end < 3 * 3600)
    unit = 60, name = C_("time unit", "min");
  else
    unit = 3600, name = C_("time unit", "h");

  tdm_chart_axis_linear (axis, lo / unit, hi / unit, max_ticks, FALSE);
  axis->kind = TDM_CHART_AXIS_TIME;
  axis->lo *= unit;
  axis->hi *= unit;
  axis->step *= unit;
  for (guint i = 0; i < axis->n_ticks; i++)
    axis->ticks[i] *= unit;
  axis->scale = unit;
  axis->suffix = "";
  axis->unit = name;
}

/* The units a quantity climbs through as it grows, each a factor of the first. A
 * person reads "74 MiB" and "1.5 s", not "77.6M B" and "1.5k ms". */
typedef struct
{
  const char *name;     /* msgid, context "unit" */
  double      factor;
} Rung;

static const Rung byte_ladder[] = {
  { NC_("unit", "B"), 1 },
  { NC_("unit", "KiB"), 1024.0 },
  { NC_("unit", "MiB"), 1024.0 * 1024 },
  { NC_("unit", "GiB"), 1024.0 * 1024 * 1024 },
  { NC_("unit", "TiB"), 1024.0 * 1024 * 1024 * 1024 },
  { NULL, 0 }
};

static const Rung ms_ladder[] = {
  { NC_("unit", "ms"), 1 },
  { NC_("unit", "s"), 1000 },
  { NULL, 0 }
};

static const Rung *
ladder_for (const char *unit)
{
  if (g_strcmp0 (unit, "B") == 0)
    return byte_ladder;
  if (g_strcmp0 (unit, "ms") == 0)
    return ms_ladder;

  return NULL;
}

/* The rung that keeps `magnitude` under a thousand, or the top one. */
static const Rung *
climb (const Rung *ladder,
       double      magnitude)
{
  const Rung *r = ladder;

  while (r[1].name != NULL && isfinite (magnitude) && magnitude / r->factor >= 1000)
    r++;

  return r;
}

/**
 * tdm_chart_axis_in_unit:
 * @unit: the data's unit; "B" and "ms" climb their ladders (see the header),
 *   others give a linear axis with SI suffixes
 *
 * A linear axis whose ticks are nice numbers in the unit they are shown in:
 * 0, 20, 40 GiB rather than 0, 21.5, 42.9 G.
 */
void
tdm_chart_axis_in_unit (TdmChartAxis *axis,
                        const char   *unit,
                        double        lo,
                        double        hi,
                        guint         max_ticks,
                        gboolean      extend)
{
  const Rung *ladder = ladder_for (unit);
  const Rung *rung;

  if (ladder == NULL)
    {
      tdm_chart_axis_linear (axis, lo, hi, max_ticks, extend);
      axis->unit = unit && *unit ? unit : NULL;
      return;
    }

  if (!isfinite (lo) || !isfinite (hi))
    lo = 0, hi = 1;
  rung = climb (ladder, MAX (fabs (lo), fabs (hi)));

  tdm_chart_axis_linear (axis, lo / rung->factor, hi / rung->factor, max_ticks, extend);
  axis->lo *= rung->factor;
  axis->hi *= rung->factor;
  axis->step *= rung->factor;
  for (guint i = 0; i < axis->n_ticks; i++)
    axis->ticks[i] *= rung->factor;
  axis->scale *= rung->factor;
  axis->unit = g_dpgettext2 (NULL, "unit", rung->name);
}

/* Drop trailing zeros after a decimal point: "1.50" -> "1.5", "2.0" -> "2". */
static void
trim_zeros (char *buf)
{
  char *dot = strchr (buf, '.');
  char *end;

  if (dot == NULL)
    return;

  end = dot + strlen (dot) - 1;
  while (end > dot && *end == '0')
    *end-- = '\0';
  if (end == dot)
    *end = '\0';
}

void
tdm_chart_axis_format_tick (const TdmChartAxis *axis,
                            double              value,
                            char               *buf,
                            gsize               size)
{
  if (axis->kind == TDM_CHART_AXIS_LOG)
    {
      tdm_chart_format_value (value, buf, size);
      return;
    }

  if (value == 0)
    {
      g_strlcpy (buf, "0", size);
      return;
    }

  g_snprintf (buf, size, "%.*f", axis->decimals, value / axis->scale);
  trim_zeros (buf);
  if (axis->suffix && axis->suffix[0])
    g_strlcat (buf, axis->suffix, size);
}

/**
 * tdm_chart_format_value:
 *
 * Four significant digits, with k, M or G for large magnitudes: "0.2531",
 * "87.5", "12.35k", "1.2M".
 */
void
tdm_chart_format_value (double value,
                        char  *buf,
                        gsize  size)
{
  static const struct { double scale; const char *suffix; } si[] = {
    { 1e9, "G" }, { 1e6, "M" }, { 1e3, "k" },
  };
  double a = fabs (value);

  if (isnan (value))
    {
      g_strlcpy (buf, "—", size);
      return;
    }

  for (guint i = 0; i < G_N_ELEMENTS (si); i++)
    if (a >= si[i].scale && isfinite (a))
      {
        g_snprintf (buf, size, "%.4g%s", value / si[i].scale, si[i].suffix);
        return;
      }

  if (a != 0 && (a < 1e-3 || !isfinite (a)))
    g_snprintf (buf, size, "%.3g", value);
  else
    g_snprintf (buf, size, "%.4g", value);
}

/**
 * tdm_chart_format_in_unit:
 * @unit: (nullable): the value's unit, as for tdm_chart_axis_in_unit()
 *
 * The value and its unit, for a readout: "74.21 MiB", "1.5 s", "87.5 %".
 */
void
tdm_chart_format_in_unit (double      value,
                          const char *unit,
                          char       *buf,
                          gsize       size)
{
  const Rung *ladder = ladder_for (unit);

  if (ladder != NULL && isfinite (value))
    {
      const Rung *rung = climb (ladder, fabs (value));

      g_snprintf (buf, size, "%.4g %s", value / rung->factor,
                  g_dpgettext2 (NULL, "unit", rung->name));
      return;
    }

  tdm_chart_format_value (value, buf, size);
  if (unit && *unit && !isnan (value))
    {
      g_strlcat (buf, " ", size);
      g_strlcat (buf, unit, size);
    }
}

/* "42.5 s", "3:07", "1:02:03". */
void
tdm_chart_format_duration (double seconds,
                           char  *buf,
                           gsize  size)
{
  double a = fabs (seconds);
  const char *sign = seconds < 0 ? "-" : "";
  guint64 whole;

  if (!isfinite (seconds))
    {
      g_strlcpy (buf, "—", size);
      return;
    }

  if (a < 60)
    {
      g_snprintf (buf, size, "%s%.3g %s", sign, a, C_("time unit", "s"));
      return;
    }

  whole = (guint64) floor (a + 0.5);
  if (whole < 3600)
    g_snprintf (buf, size, "%s%u:%02u", sign,
                (guint) (whole / 60), (guint) (whole % 60));
  else
    g_snprintf (buf, size, "%s%u:%02u:%02u", sign, (guint) (whole / 3600),
                (guint) (whole / 60 % 60), (guint) (whole % 60));
}
