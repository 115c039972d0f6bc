/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-precision.h — the arithmetic a run's GEMMs and convolutions use: a choice of the
 * configuration that the backends carry out. Here, not in tdm-backend.h, so that the
 * configuration names it without including the compute layer. Not how a backend does it.
 */
#pragma once

typedef enum {
  TDM_PRECISION_FP32,   /* full float32 GEMMs */
  TDM_PRECISION_TF32,   /* TensorFloat-32 GEMMs where the device has them */
  TDM_PRECISION_BF16,   /* bfloat16 GEMMs and convolutions with float32 accumulation,
                         * float32 master weights, optimizer state and BN statistics;
                         * on CPU workers the reference the GPU's are checked against
                         * (docs/ARCHITECTURE.md, "bf16 on the CPU") */
  TDM_PRECISION_AUTO,   /* the default: bf16 where every device of the run is a GPU with
                         * bfloat16 tensor cores, else fp32 (tdm-precision-auto.h). A
                         * run's choice, never a backend's: the trainer resolves it at
                         * set-up. Last, so that a zeroed struct reads as fp32. */
} TdmPrecision;
