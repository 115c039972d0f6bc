/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-screen.c — the convolution engine's screen of its candidates: the
 * bound a candidate's result must keep to against the reference's, which one is the
 * reference (tdm-backend-cuda-conv-screen.h derives them), the order the others are
 * tried in, and the pieces the two results are compared in. Compiled without CUDA too. */
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

/* Whether candidate a comes before b: faster, or as fast and first in the list. */
static gboolean
before(const double *ms, guint a, guint b)
{
  return ms[a] < ms[b] || (ms[a] == ms[b] && a < b);
}

guint
tdm_conv_screen_order(const double *ms, guint count, guint reference, guint *order)
{
  guint n = 0;
  for (guint i = 0; i < count; i++) {
    if (isnan(ms[i]))
      continue;
    guint at = n++;
    for (; at > 0 && before(ms, i, order[at - 1]); at--)
      order[at] = order[at - 1];
    order[at] = i;
  }
  for (guint k = 0; k < n; k++)
    if (order[k] == reference)
      return k + 1;
  return n;
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

void
tdm_conv_screen_pieces(guint64 result_bytes, guint64 room, guint64 value_bytes,
                       guint64 *piece, guint64 *count)
{
  guint64 p = room >= TDM_CONV_SCREEN_PIECE_ALIGN
                  ? room / TDM_CONV_SCREEN_PIECE_ALIGN * TDM_CONV_SCREEN_PIECE_ALIGN
              : value_bytes > 0 ? room / value_bytes * value_bytes
                                : 0;
  *piece = MIN(p, result_bytes);
  *count = *piece > 0 ? (result_bytes + *piece - 1) / *piece : 0;
}

static GMutex room_lock;
static gboolean room_read;
static guint64 room_cap;

guint64
tdm_conv_screen_room_cap(void)
{
  g_mutex_lock(&room_lock);
  if (!room_read) {
    const char *v = g_getenv("TANDEM_CONV_SCREEN_PIECE_BYTES");
    char *end = NULL;
    guint64 bytes = v != NULL && g_ascii_isdigit(*v) ? g_ascii_strtoull(v, &end, 10) : 0;
    room_cap = bytes > 0 && end != NULL && *end == '\0' ? bytes : G_MAXUINT64;
    room_read = TRUE;
  }
  guint64 cap = room_cap;
  g_mutex_unlock(&room_lock);
  return cap;
}

void
tdm_conv_screen_reset(void)
{
  g_mutex_lock(&room_lock);
  room_read = FALSE;
  g_mutex_unlock(&room_lock);
}
