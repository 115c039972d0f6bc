/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cpu-kernels.h — the CPU backend's loops (everything but the GEMMs and the
 * optimizers), as a table of plain functions. tdm-cpu-kernels.c is compiled once per
 * instruction set: "generic" for any CPU of the architecture, and on x86-64 also
 * "avx2" (AVX2 and FMA) and "avx512" (AVX-512 F, VL, DQ, BW);
 * tdm_cpu_kernels_pick() chooses the best one the CPU runs. The backend checks every
 * argument before it calls in here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdm-cpu-winograd-gemm.h"

typedef struct {
  const char *name;
  void (*bias_forward) (float *y, const float *bias, int outer, int channels, int inner,
                        bool relu);
  void (*bias_backward) (float *dbias, const float *dy, int outer, int channels, int inner);
  void (*relu_forward) (float *y, const float *x, size_t n);
  void (*relu_backward) (float *dx, const float *dy, const float *y, size_t n);
  void (*im2col) (float *col, const float *x, int n, int h, int w, int c, int kh, int kw,
                  int pad, int stride);
  void (*col2im) (float *dx, const float *col, int n, int h, int w, int c, int kh, int kw,
                  int pad, int stride);
  void (*maxpool_forward) (float *y, int32_t *argmax, const float *x, const float *bias,
                           bool relu, int n, int h, int w, int c, int k);
  void (*maxpool_backward) (float *dx, float *dbias, const float *dy, const int32_t *argmax,
                            const float *y, int n, int h, int w, int c, int k);
  void (*conv_pool_forward) (float *y, int32_t *argmax, const float *x, const float *wt,
                             const float *bias, bool relu, int n, int h, int w, int c,
                             int out, int kh, int kw, int pad, int pk);
  void (*conv_pool_backward) (float *dwt, float *dbias, const float *dy,
                              const int32_t *argmax, const float *y, const float *x,
                              bool relu, int n, int h, int w, int c, int out, int kh, int kw,
                              int pad, int pk);
  void (*add) (float *y, const float *x, size_t n);
  void (*scale) (float *y, float alpha, size_t n);
  /* The same copy's products for the Winograd convolutions (tdm-cpu-winograd-gemm.c). */
  const TdmCpuWinogradGemm *winograd;
} TdmCpuKernels;

extern const TdmCpuKernels tdm_cpu_kernels_generic;
#if defined(__x86_64__)
extern const TdmCpuKernels tdm_cpu_kernels_avx2;
extern const TdmCpuKernels tdm_cpu_kernels_avx512;
#endif

/* The best table this CPU runs; TANDEM_CPU_KERNELS=generic, avx2 or avx512 in the
 * environment chooses one by name (if the CPU runs it), for tests and measurements. */
const TdmCpuKernels *tdm_cpu_kernels_pick (void);
