/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-relu-bits.h — a ReLU's mask kept as bits: which elements of a bf16 tensor are
 * positive, for the backward passes that read it only so (a residual block's end whose
 * output is stored as bf16). Bit e of an n-element tensor is bit e % 32 of 32-bit word
 * e / 32, the flat NHWC order: 32 consecutive elements a word, so that a kernel's V
 * consecutive elements (V dividing 32, at a multiple of V) are V bits of one word, and on
 * these little-endian machines bit e % 8 of byte e / 8, which a thread of eight elements
 * stores whole. Bits past n in the last word mean nothing. The predicate is the one the
 * bf16 mask was read with, the widened value > 0.0f: +0, −0 and every NaN are 0, a
 * positive subnormal and +∞ are 1 (the kernels build without flushing subnormals).
 * Plain C for the CPU backend and the CUDA kernels alike (host and device); no GLib.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TDM_RELU_BITS_FN static __host__ __device__ __forceinline__
#else
#define TDM_RELU_BITS_FN static inline
#endif

/* 32-bit words of the mask of n elements. */
#define TDM_RELU_BITS_WORDS(n) (((size_t)(n) + 31) / 32)

/* Whether the bf16 value h is > 0: 0x0001 (the least subnormal) to 0x7f80 (+∞); the
 * sign bit set (negatives, −0) or past +∞ (NaN) is not, nor +0. */
TDM_RELU_BITS_FN unsigned
tdm_relu_bit(uint16_t h)
{
  return (unsigned)(uint16_t)(h - 1u) < 0x7f80u;
}

/* The bits from element e on, within e's word: bit j is element e + j's, for j below
 * 32 − e % 32 (V consecutive elements at a multiple of V, V dividing 32, are bits 0 to
 * V − 1: one load for a kernel's V elements). */
TDM_RELU_BITS_FN unsigned
tdm_relu_bits_from(const uint32_t *bits, size_t e)
{
  return bits[e / 32] >> (e % 32);
}

/* Element e's bit. */
TDM_RELU_BITS_FN unsigned
tdm_relu_bit_at(const uint32_t *bits, size_t e)
{
  return tdm_relu_bits_from(bits, e) & 1u;
}

/* The mask of n bf16 values y into bits (the last word's bits past n zero). */
TDM_RELU_BITS_FN void
tdm_relu_bits_of(uint32_t *bits, const uint16_t *y, size_t n)
{
  for (size_t w = 0; w < TDM_RELU_BITS_WORDS(n); w++) {
    uint32_t word = 0;
    for (size_t j = 0; j < 32 && w * 32 + j < n; j++)
      word |= (uint32_t)tdm_relu_bit(y[w * 32 + j]) << j;
    bits[w] = word;
  }
}
