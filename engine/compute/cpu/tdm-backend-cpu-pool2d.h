/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu-pool2d.h — the CPU backend's pooling with any window, stride and
 * padding, and the per-channel input normalization: the reference the CUDA kernels
 * (kernels/pool2d.cu) are tested against. Semantics in tdm-backend.h. Not the tiling
 * pools with their fused bias and BN (tdm-backend-cpu.c, tdm-backend-cpu-layers.c).
 */
#pragma once

#include "tdm-backend.h"

G_BEGIN_DECLS

void tdm_cpu_maxpool2d_forward (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                TdmPool2d g);
void tdm_cpu_maxpool2d_backward (TdmBackend *b, float *dx, const float *dy,
                                 const int32_t *argmax, TdmPool2d g);
void tdm_cpu_avgpool2d_forward (TdmBackend *b, float *y, const float *x, TdmPool2d g);
void tdm_cpu_avgpool2d_backward (TdmBackend *b, float *dx, const float *dy, TdmPool2d g);
void tdm_cpu_channel_affine (TdmBackend *b, float *x, size_t rows, TdmChannelAffine a);

G_END_DECLS
