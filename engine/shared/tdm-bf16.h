/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-bf16.h — bfloat16 as the engine stores it: the top 16 bits of a float, rounded
 * to nearest even. The CPU backend rounds with tdm_bf16_round(); the CUDA kernels with
 * __float2bfloat16_rn (cvt.rn.bf16.f32), which gives the same bits for every float,
 * NaN included (the canonical 0x7fff). Plain C, header-only, no GLib.
 */
#pragma once

#include <stdint.h>
#include <string.h>

/* v as bfloat16 bits, rounded to nearest, ties to even; a NaN becomes 0x7fff, a
 * finite value past the largest bfloat16 infinity. */
static inline uint16_t
tdm_bf16_round(float v)
{
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return 0x7fff;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* A bfloat16's value as a float: exact. */
static inline float
tdm_bf16_value(uint16_t h)
{
  uint32_t u = (uint32_t)h << 16;
  float v;
  memcpy(&v, &u, sizeof v);
  return v;
}
