/* tdm-exact.c — exact mode's fixed-point sums and its chunked shards (tdm-exact.h). */
#include "tdm-exact.h"
#include "tdm-iterator.h"

#include <math.h>

gboolean
tdm_exact_add_double(gint64 *acc, double v)
{
  if (!(fabs(v) < TDM_EXACT_LIMIT))
    return FALSE;
  /* Every step is exact in double but the last: s = v·2³², its integer part h, the
   * fraction (s − h) ∈ [0, 1) scaled by 2³² (a float's 24 significant bits fit;
   * a double's may not, and the rounding to an integer drops what lies below 2⁻⁶⁴). */
  double s = ldexp(v, 32);
  double h = floor(s);
  acc[0] += (gint64)h;
  acc[1] += (gint64)nearbyint(ldexp(s - h, 32));
  return TRUE;
}

size_t
tdm_exact_add(gint64 *acc, const float *x, size_t n)
{
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    if (!tdm_exact_add_double(acc + 2 * i, (double)x[i]))
      bad++;
  return bad;
}

double
tdm_exact_to_double(const gint64 *acc)
{
  /* Carry lo's whole units of 2⁻³² into hi (lo is never negative), then the two
   * parts: hi exact in double below 2⁵³, lo below 2³² exact always. */
  gint64 lo = acc[1];
  gint64 hi = acc[0] + (lo >> 32);
  lo &= G_GINT64_CONSTANT(0xffffffff);
  return ldexp((double)hi, -32) + ldexp((double)lo, -64);
}

void
tdm_exact_to_float(float *out, const gint64 *acc, size_t n, double scale)
{
  for (size_t i = 0; i < n; i++)
    out[i] = (float)(tdm_exact_to_double(acc + 2 * i) * scale);
}

int
tdm_exact_chunks(int count, int chunk)
{
  g_return_val_if_fail(chunk > 0 && count >= 0, 0);
  return (count + chunk - 1) / chunk;
}

void
tdm_exact_shard_of(int count, int chunk, int world, int rank, int *offset, int *size)
{
  int first, chunks;
  tdm_shard_of(tdm_exact_chunks(count, chunk), world, rank, &first, &chunks);
  *offset = MIN(count, first * chunk);
  *size = MIN(count, (first + chunks) * chunk) - *offset;
}
