/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-screen.c — the convolution engine's screen of its candidates: the
 * bound a candidate's result must keep to against the reference's, and which one is
 * the reference (tdm-backend-cuda-conv-screen.h derives them). Compiled without CUDA too. */
#include "tdm-backend-cuda-conv-screen.h"

#include <math.h>

guint64
tdm_conv_screen_length(const TdmConvShape *s, TdmConvDirection dir)
{
  guint64 taps = (guint64)s->kernel * (guint64)s->kernel;
  switch (dir) {
  case TDM_CONV_FORWARD:
    return taps * (guint64)s->c;
  case TDM_CONV_DGRAD:
    return taps * (guint64)s->out_c;
  case TDM_CONV_WGRAD:
    break;
  }
  return (guint64)s->n * (guint64)tdm_conv_out_h(s) * (guint64)tdm_conv_out_w(s);
}

double
tdm_conv_screen_share(TdmConvRounding r, guint64 length)
{
  return r.output + 2.0 * r.operands +
         TDM_CONV_SCREEN_LAMBDA * sqrt((double)length) * TDM_CONV_UNIT_F32;
}

double
tdm_conv_screen_bound(TdmConvRounding candidate, TdmConvRounding reference, guint64 length)
{
  return tdm_conv_screen_share(candidate, length) + tdm_conv_screen_share(reference, length);
}

guint
tdm_conv_screen_reference(const TdmConvRounding *r, guint count)
{
  guint best = 0;
  for (guint i = 1; i < count; i++)
    if (tdm_conv_screen_share(r[i], 1) < tdm_conv_screen_share(r[best], 1))
      best = i;
  return best;
}

double
tdm_conv_screen_deviation(double diff_squares, double ref_squares)
{
  if (isnan(diff_squares) || isnan(ref_squares))
    return NAN;
  if (ref_squares > 0.0)
    return sqrt(diff_squares / ref_squares);
  return diff_squares > 0.0 ? INFINITY : 0.0;
}

gboolean
tdm_conv_screen_keeps(double deviation, double bound)
{
  return deviation <= bound;
}
