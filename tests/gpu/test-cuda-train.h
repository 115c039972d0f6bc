/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train.h — what test-cuda-train.c and its parts share: the networks they
 * train, the skip where no CUDA GPU is present, test-cuda-train.c's training run, and
 * each part's registration of its tests. */
#pragma once

#include "tdm-backend.h"
#include "tdm-config.h"
#include "tdm-precision.h"

#include <glib.h>

#define NETWORK "conv8k3p1,relu,pool2,conv8k3p1,relu,pool2,fc32,relu,fc10"
/* Every ResNet layer: bn after conv and fc, a residual block with a strided
 * projection and one without, average, global max and global average pooling,
 * dropout. */
#define BN_NETWORK                                                              \
  "conv8k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,"             \
  "res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,avg2,conv16k3p1,bn,relu,gmp,"    \
  "fc32,bn,relu,drop0.25,fc10"
#define BN_NETWORK_GAP "conv8k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10"
/* Blocks whose gradients are kept as bf16 in a bf16 run: an identity block (its skip
 * gradient its bf16 output gradient) and a projection of stride 2 (its compact float32
 * input gradient), each start summing its two shares in float32, rounded once. */
#define BLOCKS16_NETWORK                                                        \
  "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"                 \
  "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10"
/* torchvision's ResNet-50 in small: its stem, then bottleneck blocks (1×1, 3×3, 1×1 of
 * four times the width) whose 1×1 convs take bf16 operands in a bf16 run (the bn before
 * the last one normalized as it reads, their input gradients bf16), a projection of
 * stride 1 and one of stride 2 (its bn's output bf16, its bn's gradient the conv's bf16
 * output gradient in the workspace), the blocks' outputs and gradients bf16. */
#define BOTTLENECK_NETWORK                                                      \
  "conv8k3p1,bn,relu,pool3s2p1,bottleneck4,bottleneck4,bottleneck8s2,gap,fc10"
/* CIFAR ResNet-18's layout in small: a stem of more outputs than taps (its bn's input
 * gradient handed to it as bf16 in its workspace), identity blocks whose first conv
 * writes its input gradient as bf16 and whose start sums the two shares and applies the
 * ReLU of the block's end below in one pass, a projection of stride 2. Those gradients,
 * the widest, are written while the gradient they come from is in the skip buffer or the
 * workspace: each takes the whole gradient region (test-bf16's gradient-region). */
#define REGION_NETWORK                                                          \
  "conv16k3p1,bn,relu,2*(res(conv16k3p1,bn,relu,conv16k3p1,bn),relu),"         \
  "res(conv32k3s2p1,bn,relu,conv32k3p1,bn),relu,gap,fc10"
/* torchvision's stem in small: a strided conv, its bn, a 3×3 max pool of stride 2 whose
 * input gradient goes to the bn as bf16 (and the bn's in place over it for the conv,
 * bn_dx_in_place()), then the blocks above: gradient buffers half as wide in bf16. */
#define TV_STEM_NETWORK                                                         \
  "conv8k3s2p1,bn,relu,pool3s2p1,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"     \
  "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10"
/* The resnet preset's shape in small: pool after bn, a block without projection, a
 * biasless fc scaled by 1/8. */
#define MYRTLE_SMALL                                                            \
  "conv8k3p1,bn,relu,pool2,res(conv8k3p1,bn,relu,conv8k3p1,bn,relu),gap,fc10nb,scale0.125"
/* The resnet preset's layers (TDM_NETWORK_RESNET) at a quarter of its widths: in a bf16
 * run every conv's output, the three pools' (each normalizing its bn's input as it
 * reads it: maxpool_forward_bf16) and the blocks' are stored bf16, the gradients
 * through the pools and blocks too; the inference pass stores its convs', bns' and
 * first pools' outputs as bf16. */
#define PLAIN_NETWORK                                                           \
  "conv8k3p1,bn,relu,conv16k3p1,bn,relu,pool2,res(conv16k3p1,bn,relu,conv16k3p1,bn,relu),"  \
  "conv32k3p1,bn,relu,pool2,conv64k3p1,bn,relu,pool2,"                          \
  "res(conv64k3p1,bn,relu,conv64k3p1,bn,relu),gmp,fc10nb,scale0.125"

/* TRUE where a CUDA GPU is present; else marks the test skipped. */
static inline gboolean
have_gpu(void)
{
  if (tdm_backend_cuda_available())
    return TRUE;
  g_test_skip("no CUDA GPU");
  return FALSE;
}

/* A run's settings on the synthetic dataset: network on devices, precision fp32, the
 * rest defaults (test-cuda-train.c). */
TdmConfig *synthetic_run (const char *network, const char *devices);
/* The resnet recipe on cfg: Nesterov, decay on weights only, label smoothing, crops and
 * flips; bn says how replicas normalize. */
void use_recipe (TdmConfig *cfg, TdmBatchNorm bn);

/* A copy of the parameters after a run of cfg to its end (asserted to succeed); *count
 * gets their number. */
float *trained_parameters (TdmConfig *cfg, size_t *count);

/* Parameters after `steps` steps of `network` on `devices` (test-cuda-train.c: the
 * recipe, batch-norm mode and exact mode its tests set); *count gets their number. */
float *train (const char *devices, const char *network, TdmStrategy strategy, long steps,
              TdmPrecision precision, size_t *count);

/* The most the convolution engine's timings asked of a workspace in the process since
 * conv_timing_needs_reset(): *most what a timing's candidates needed, *need what the
 * timing asked for (tdm_cuda_conv_timing_needs()); 0 without CUDA. */
void conv_timing_needs (size_t *most, size_t *need);
void conv_timing_needs_reset (void);

/* Registers test-cuda-train-steps.c's tests, test-cuda-train-inference.c's,
 * test-cuda-train-memory.c's, test-cuda-train-workspace.c's and
 * test-cuda-train-accuracy.c's. */
void test_cuda_train_add_steps (void);
void test_cuda_train_add_inference (void);
void test_cuda_train_add_memory (void);
void test_cuda_train_add_workspace (void);
void test_cuda_train_add_accuracy (void);
/* test-cuda-train-start-sums.c's: the block start's bn sums train to the same bits. */
void test_cuda_train_add_start_sums (void);
/* test-cuda-train-bn-store.c's: a bn's output stored for its conv trains as the prologue. */
void test_cuda_train_add_bn_store (void);
/* test-cuda-train-stem-bn.c's: the stem's two passes train as the four steps. */
void test_cuda_train_add_stem_bn (void);
