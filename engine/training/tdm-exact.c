/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-exact.c — exact mode's fixed-point sums and its chunked shards (tdm-exact.h). */
#include "tdm-exact.h"
#include "tdm-exact-fixed.h"
#include "tdm-i18n.h"
#include "tdm-iterator.h"

#include <math.h>
#include <string.h>

/* The conversion, inline: plain double arithmetic the compiler can vectorize, the
 * same bits on every machine (no library rounding calls, no rounding mode). Every
 * step is exact but the last: s = v·2³² (a float's 24 significant bits, or a double's
 * 53, times a power of two), its floor h (a truncation, one less when s is negative
 * and not whole), the fraction s − h ∈ [0, 1) (Sterbenz: exact), scaled by 2³²; it
 * is rounded half up to an integer, dropping what lies below 2⁻⁶⁴. */
static inline gboolean
add_one(gint64 *acc, double v)
{
  if (!(v < TDM_EXACT_LIMIT && v > -TDM_EXACT_LIMIT))
    return FALSE;
  double s = v * 4294967296.0;
  gint64 h = (gint64)s;
  h -= (double)h > s;
  acc[0] += h;
  acc[1] += (gint64)((s - (double)h) * 4294967296.0 + 0.5);
  return TRUE;
}

gboolean
tdm_exact_add_double(gint64 *acc, double v)
{
  return add_one(acc, v);
}

/* Floats go by their bits, in integers (half again as fast as the double route on
 * the CPU this was written on), by the rule the CUDA kernel shares
 * (tdm-exact-fixed.h). */
size_t
tdm_exact_add(gint64 *restrict acc, const float *restrict x, size_t n)
{
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t hi, lo;
    if (tdm_exact_fixed_limbs(x[i], &hi, &lo)) {
      bad++;
      continue;
    }
    acc[2 * i] += hi;
    acc[2 * i + 1] += lo;
  }
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
  return (double)hi * 0x1p-32 + (double)lo * 0x1p-64;
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

TdmExactBuffers
tdm_exact_buffers(size_t parameters, size_t state)
{
  TdmExactBuffers b;
  b.acc = 2 * parameters + 2 * state + 1;
  b.grads = MAX(parameters, 1);
  b.state = MAX(state, 1);
  b.bytes = (guint64)b.acc * sizeof(gint64) + (guint64)b.grads * sizeof(float) +
            3 * (guint64)b.state * sizeof(float);
  return b;
}

guint64
tdm_exact_device_bytes(size_t parameters, size_t state)
{
  return (guint64)tdm_exact_buffers(parameters, state).acc * sizeof(gint64);
}

char *
tdm_exact_describe(int chunk)
{
  g_return_val_if_fail(chunk > 0, NULL);
  /* The example is the rule's own split, so it cannot disagree with a run. */
  int shard[3];
  for (int r = 0; r < 3; r++) {
    int offset;
    tdm_exact_shard_of(200, chunk, 3, r, &offset, &shard[r]);
  }
  return g_strdup_printf(
      _("In exact mode each batch is cut into %1$d-sample chunks whose boundaries do not "
        "depend on the devices, and each device trains whole chunks: a batch of 200 on "
        "three devices splits %2$d + %3$d + %4$d (1-sample chunks split it as evenly as "
        "the ordinary mode, at a higher cost). Each chunk's gradient is added in fixed "
        "point, where the order of the additions cannot change a bit, so the parameters "
        "are bit-identical for any number of devices, with every optimizer. Batch norm "
        "normalizes each %1$d-sample chunk over its own statistics, so synchronized and "
        "per-replica batch norm are the same there, and neither uses the statistics of "
        "the whole batch."),
      chunk, shard[0], shard[1], shard[2]);
}
