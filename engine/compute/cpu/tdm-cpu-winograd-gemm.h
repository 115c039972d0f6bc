/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cpu-winograd-gemm.h — the short matrix products of the CPU backend's Winograd
 * convolutions (tdm-backend-cpu-winograd.c), one position of one block of tiles at a
 * time: the forward's tiles × C_in · C_in × C_out and the input gradient's tiles × C_out ·
 * C_out × C_in against weights packed once a call, and the weight gradient's C_out × C_in
 * += Σ over the block's tiles, accumulated in place. Built once per instruction set with
 * tdm-cpu-kernels.c (each copy's table is its TdmCpuKernels' `winograd`). Every output
 * element is one chain over the reduction in order, a fused multiply-add a step in the
 * AVX2 and AVX-512 copies (a multiply and an add in the generic one): its bits do not
 * depend on the vector width, the register tile, the rows around it or where a block
 * ends, so the two FMA copies agree to the bit and a tile's result is the same whatever
 * batch it is in. Not a general GEMM: no transposes, no α or β, one thread. */
#pragma once

#include <stddef.h>

/* The widest panel of any copy; every copy's divides it. */
#define TDM_CPU_WINOGRAD_PANEL_MAX 64

typedef struct {
  const char *name;
  /* Columns of a packed panel (a multiple of the copy's vector width). */
  int panel;
  /* B (depth × cols, element (r, j) at b[r · row_stride + j · col_stride]) into
   * panels of `panel` columns, each depth rows of `panel` floats, zeros past cols:
   * tdm_cpu_winograd_packed_floats() floats. */
  void (*pack) (float *packed, const float *b, size_t row_stride, size_t col_stride,
                int depth, int cols);
  /* C (rows × cols, row stride ldc) = A (rows × depth, row stride lda) · B packed. */
  void (*product) (float *c, size_t ldc, const float *a, size_t lda, const float *packed,
                   int rows, int depth, int cols);
  /* C (rows × cols, row stride ldc) += Aᵀ B, A depth × rows (row stride lda), B depth ×
   * cols (row stride ldb): each element's chain goes on from the value C holds. */
  void (*accumulate) (float *c, size_t ldc, const float *a, size_t lda, const float *b,
                      size_t ldb, int depth, int rows, int cols);
} TdmCpuWinogradGemm;

static inline size_t
tdm_cpu_winograd_packed_floats(const TdmCpuWinogradGemm *g, int depth, int cols)
{
  return (size_t)depth * (size_t)((cols + g->panel - 1) / g->panel * g->panel);
}
