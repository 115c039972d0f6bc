/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-exact-fixed.h — exact mode's conversion of one float to fixed point: x·2⁶⁴
 * rounded to an integer, as two int64 limbs (whole units of 2⁻³² and the rest in
 * [0, 2³²) units of 2⁻⁶⁴), shared by the CPU's sums (tdm-exact.c) and the CUDA kernel
 * that adds on the device (kernels/elementwise.cu), so both add the same bits. Header-only,
 * plain C and CUDA; no GLib. Not the sums themselves (tdm-exact.h). */
#ifndef TDM_EXACT_FIXED_H
#define TDM_EXACT_FIXED_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TDM_EXACT_FIXED_FN static inline __host__ __device__
#else
#define TDM_EXACT_FIXED_FN static inline
#endif

/* x = ±m·2^(e − 150) for a biased exponent e ≥ 1 (m with its implicit bit), ±m·2^−149
 * for subnormals, so x·2⁶⁴ = ±m·2^(e − 86): at most 2⁷⁸ below the limit (e < 141,
 * |x| < 2¹⁴); below 2⁰ it is rounded half away from zero, and values under 2⁻⁶⁵
 * vanish. Returns 0 with the limbs of x·2⁶⁴ in *hi, *lo (the arithmetic shift and
 * the low 32 bits of a 128-bit two's complement value, written with 64-bit parts),
 * or 1 for |x| ≥ 2¹⁴, infinities and NaN, which fixed point cannot hold. */
TDM_EXACT_FIXED_FN int
tdm_exact_fixed_limbs(float x, int64_t *hi, int64_t *lo)
{
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  int e = (int)((bits >> 23) & 0xff);
  if (e >= 141)
    return 1;
  uint64_t m = bits & 0x7fffff;
  if (e > 0)
    m |= 0x800000;
  int shift = (e > 0 ? e : 1) - 86;
  uint64_t h = 0, l = 0; /* |x|·2⁶⁴ = h·2³² + l, l < 2³² */
  if (shift >= 32) {
    h = m << (shift - 32);
  } else if (shift >= 0) {
    uint64_t v = m << shift;
    h = v >> 32;
    l = v & 0xffffffffu;
  } else if (shift > -40) {
    l = (m + ((uint64_t)1 << (-shift - 1))) >> -shift;
    h = l >> 32;
    l &= 0xffffffffu;
  }
  if (bits >> 31) {
    /* −(h·2³² + l) = (−h − 1)·2³² + (2³² − l) when l > 0. */
    *hi = l > 0 ? -(int64_t)h - 1 : -(int64_t)h;
    *lo = l > 0 ? (int64_t)(((uint64_t)1 << 32) - l) : 0;
  } else {
    *hi = (int64_t)h;
    *lo = (int64_t)l;
  }
  return 0;
}

#endif
