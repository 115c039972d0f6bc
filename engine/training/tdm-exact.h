/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-exact.h — exact mode's arithmetic: the fixed-point numbers that sums over
 * samples are kept in, so that the order of the additions (which replica added which
 * chunk, in which order the replicas were combined) cannot change a bit of the result,
 * and the rule that cuts a batch into chunks whose boundaries do not depend on the
 * number of devices; and the one text that says what the mode guarantees. Plain C on
 * host memory, no backend, no communication (the trainer's exact step in
 * tdm-trainer-exact.c uses both).
 *
 * A value is two int64 limbs, hi and lo, meaning hi·2⁻³² + lo·2⁻⁶⁴, with lo in
 * [0, 2³²] as converted. Limbs are summed independently (an int64 all-reduce sums
 * them as they are), so a sum of k values keeps lo below k·2³² and needs no carry
 * until the end: exact for any k below 2³¹. A float is converted by rounding it to a
 * multiple of 2⁻⁶⁴ (values below 2⁻⁶⁵ vanish, those above 2⁻⁴¹ are exact);
 * |x| ≥ TDM_EXACT_LIMIT, NaN and infinities are counted as overflows instead.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Largest magnitude one converted value may have: 2¹⁴, so that 2¹⁶ chunks of it sum
 * to below 2³⁰ and every limb stays far from int64's range. */
#define TDM_EXACT_LIMIT 16384.0

/* Default samples a chunk: the unit that one pass of the network computes. */
#define TDM_EXACT_CHUNK_DEFAULT 16

/* acc[2i], acc[2i + 1] += x[i] as fixed point, for i < n. Returns how many x[i] could
 * not be represented (out of range or not finite); those add nothing. */
size_t tdm_exact_add (gint64 *restrict acc, const float *restrict x, size_t n);

/* acc[0], acc[1] += v; FALSE (nothing added) when v cannot be represented. */
gboolean tdm_exact_add_double (gint64 *acc, double v);

/* The value of one fixed-point number (acc[0], acc[1]) as a double. */
double tdm_exact_to_double (const gint64 *acc);

/* out[i] = acc[2i], acc[2i + 1] rounded to float, times scale (1 or a power of two
 * keeps the rounding single; otherwise one more rounding, the same everywhere). */
void tdm_exact_to_float (float *out, const gint64 *acc, size_t n, double scale);

/* The samples of a global batch of count that the rank of world computes in exact
 * mode: whole chunks of `chunk` samples (the batch's last one may be short), the
 * chunks dealt out as evenly as tdm_shard_of() deals samples. */
void tdm_exact_shard_of (int count, int chunk, int world, int rank, int *offset, int *size);

/* Chunks in a batch of count. */
int tdm_exact_chunks (int count, int chunk);

/* What exact mode guarantees with chunks of `chunk` samples, in one translated
 * paragraph without line breaks and without naming options: how a batch is split,
 * that the parameters are bit-identical, and what batch norm normalizes over.
 * tandem-train's --help and the window's Compare both show it. Free with g_free(). */
char *tdm_exact_describe (int chunk);

/* Exact mode's host buffers for one replica of a network of `parameters` parameters
 * and `state` running-statistics values: the fixed-point accumulator (2P + 2S + 1
 * int64: gradients, statistics moves, the count of unrepresentable values), one
 * buffer of P floats (a chunk's gradients on their way from a device, the sum's on
 * their way back) and three of S floats (the statistics' moves, their values before
 * the step, what each chunk starts from), each of at least one value.
 * tdm_trainer_exact_setup() allocates by it, the memory estimate counts it. */
typedef struct {
  size_t acc;                   /* int64 values */
  size_t grads;                 /* floats */
  size_t state;                 /* floats, in each of three buffers */
  guint64 bytes;                /* the five buffers together */
} TdmExactBuffers;

TdmExactBuffers tdm_exact_buffers (size_t parameters, size_t state);
/* What a GPU replica holds on the device in exact mode, where its backend adds the
 * chunks' sums there (exact_add): the accumulator of tdm_exact_buffers(), its length
 * in int64. */
guint64 tdm_exact_device_bytes (size_t parameters, size_t state);

G_END_DECLS
