/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-winograd.h — the CPU backend's whole-convolution operations: 3×3
 * convolutions of stride 1 by Winograd's minimal filtering, F(2×2, 3×3), F(3×3, 3×3)
 * or F(4×4, 3×3) (whichever needs fewest products for the output size), forward and
 * backward, the element-wise products of the 16, 25 or 36 positions done as GEMMs by
 * the CPU's own register tiles (tdm-cpu-winograd-gemm.c). Private to the CPU backend,
 * which puts them in its table (tdm-backend-cpu.c); the semantics are tdm-backend.h's
 * conv_forward and conv_backward. Which shapes it takes, and the scratch it needs, is
 * tdm_backend_conv_work_floats() (tdm-backend.h, defined with these): the replica's
 * buffer rule and the memory estimate ask it. Not the im2col path, which stays
 * the CPU's way for every other convolution. */
#pragma once

#include "tdm-backend.h"
#include "tdm-cpu-winograd-gemm.h"

G_BEGIN_DECLS

void tdm_cpu_conv_forward (TdmBackend *b, float *y, const float *x, const float *wt,
                           float *work, int n, int h, int w, int c, int out_c, int kernel,
                           int pad, int stride);
void tdm_cpu_conv_backward (TdmBackend *b, float *dx, float *dw, const float *dy,
                            const float *x, const float *wt, float *work, int n, int h,
                            int w, int c, int out_c, int kernel, int pad, int stride);

/* The same for any 3×3 stride-1 shape, whatever the rule above says (the tests compare
 * it with the im2col path on shapes the rule declines, such as one input channel):
 * the scratch it needs, in floats, for either tile. */
size_t tdm_cpu_winograd_scratch_floats (int c, int out_c);

/* The tile the operations use for an h × w input padded by pad: 3 for F(3×3, 3×3)
 * where its tiles need fewer multiplications (the resnet preset's 28, 14, 7 and 3 wide
 * outputs), else 2 for F(2×2, 3×3) (outputs of 2, 4, 8, 16 fit its tiles exactly). */
int tdm_cpu_winograd_tile (int h, int w, int pad);

/* The products the operations run on backend b: those of the copy of the CPU's loops it
 * picked (tdm-cpu-kernels.h; TANDEM_CPU_KERNELS chooses one by name). */
const TdmCpuWinogradGemm *tdm_cpu_winograd_gemm (TdmBackend *b);

G_END_DECLS
