/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-kernels.h — the C launchers of Tandem's CUDA kernels.
 *
 * Each launcher enqueues one operation of engine/compute/tdm-backend.h on the given stream and
 * returns cudaGetLastError() after its launches (cudaSuccess for empty work, which
 * launches nothing). Pointers are device pointers; the semantics, layouts (NHWC, the
 * (ky, kx, channel) im2col column order, flat argmax indices into x) and argument
 * meanings are exactly those of the matching TdmBackendOps entry. This header is plain
 * C and knows nothing of GLib or of the engine's types: the metrics are a device pair
 * of doubles {loss_sum, correct}, the layout of TdmMetrics.
 *
 * `descending` (the bn's elementwise passes, the normalized gather): walk the tensor
 * from its last element down (common.cuh's tdm_k_walk), to find in L2 what a pass just
 * before streamed upwards over the same tensor; the same bits either way. The backend
 * says which (TANDEM_DESCENDING).
 */
#pragma once

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdm-augment.h"

#ifdef __cplusplus
extern "C" {
#endif

/* elementwise.cu */
cudaError_t tdm_k_bias_forward(float *y, const float *bias, int outer, int channels,
                               int inner, bool relu, cudaStream_t stream);
/* dbias[c] = Σ dy[o, c, i]. Large sums go through two deterministic passes over
 * `partials` (device scratch of partials_count floats; may be NULL, then one pass). */
cudaError_t tdm_k_bias_backward(float *dbias, const float *dy, int outer, int channels,
                                int inner, float *partials, size_t partials_count,
                                cudaStream_t stream);
cudaError_t tdm_k_relu_forward(float *y, const float *x, size_t n, cudaStream_t stream);
cudaError_t tdm_k_relu_backward(float *dx, const float *dy, const float *y, size_t n,
                                cudaStream_t stream);
cudaError_t tdm_k_add(float *y, const float *x, size_t n, cudaStream_t stream);
/* y = a + x, then max(y, 0) when relu (y may be a or x). */
cudaError_t tdm_k_add_out(float *y, const float *a, const float *x, size_t n, bool relu,
                          cudaStream_t stream);
cudaError_t tdm_k_scale(float *y, float alpha, size_t n, cudaStream_t stream);
/* out[i] = in[i] as bfloat16 bits, rounded to nearest even. */
cudaError_t tdm_k_to_bf16(uint16_t *out, const float *in, size_t n, cudaStream_t stream);
/* rows × c floats (NHWC pixels, or KRSC filter taps) to rows × c_pad bfloat16 (to_bf16's
 * bits), the channels past c zero: a few-channel input as a convolution with c_pad
 * channels, which tensor-core engines take. */
cudaError_t tdm_k_to_bf16_padded(uint16_t *out, const float *in, size_t rows, int c, int c_pad,
                                 cudaStream_t stream);
/* out[i] = the bfloat16 in[i] as float (exact). */
cudaError_t tdm_k_from_bf16(float *out, const uint16_t *in, size_t n, cudaStream_t stream);
/* A residual block's tensors stored as bfloat16, its ReLU's mask as bits (tdm-relu-bits.h:
 * bit e of word e / 32 set where the bf16 output is > 0): dx = mask bit ? dy : 0, dy
 * and dx float32 or (dy16, dx16) bf16, dx == dy allowed where their types agree;
 * y = a + x (x float32 or, x16, bf16; then max(·, 0) when relu) rounded: the bits of
 * tdm_k_add_out then tdm_k_to_bf16 (y may be x where x is bf16), and with bits (not
 * NULL) y's mask, a byte a thread of eight elements; add_strided_bf16:
 * y = a + x (n·h·w·c, NHWC) at the pixels a 1×1 convolution of this stride and no
 * padding reads, a + 0 elsewhere, a float32 or (a16) bf16, rounded into bf16 y (y16) or
 * stored into float32 y (y may be a where their types agree), x compact
 * (n · ((h−1)/stride+1) · ((w−1)/stride+1) · c); add_relu_backward_bf16: dx = mask bit ?
 * a + x : 0 (mask NULL: a + x) rounded once, a and x float32 or (a16, x16) bf16, the bits
 * of tdm_k_add_out_bf16 then tdm_k_relu_backward_bf16 (dx may be a or x where that
 * one is bf16). */
cudaError_t tdm_k_relu_backward_bf16(void *dx, bool dx16, const void *dy, bool dy16,
                                     const uint32_t *mask, size_t n, cudaStream_t stream);
cudaError_t tdm_k_add_out_bf16(uint16_t *y, const float *a, const void *x, bool x16, size_t n,
                               bool relu, uint32_t *bits, cudaStream_t stream);
cudaError_t tdm_k_add_strided_bf16(void *y, bool y16, const void *a, bool a16, const float *x,
                                   int n, int h, int w, int c, int stride, cudaStream_t stream);
cudaError_t tdm_k_add_relu_backward_bf16(uint16_t *dx, const void *a, bool a16, const void *x,
                                         bool x16, const uint32_t *mask, size_t n,
                                         cudaStream_t stream);
/* Forward and backward alike (y == x allowed): x masked and scaled by 1 / (1 − p). */
cudaError_t tdm_k_dropout(float *y, const float *x, const int32_t *indices, int n,
                          int per_sample, float p, uint64_t key, uint32_t epoch,
                          cudaStream_t stream);
/* Exact mode: acc[2i], acc[2i + 1] += the fixed-point limbs of x[i] (tdm-exact-fixed.h);
 * *bad += the count of values fixed point cannot hold (left out). */
cudaError_t tdm_k_exact_add(int64_t *acc, const float *x, size_t n, int64_t *bad,
                            cudaStream_t stream);

/* gemm.cu. The end of a split-K GEMM or of a sum over rows: c[i, j] (row-major, ldc)
 * = alpha · Σ over s of parts[s · m · n + i · n + j] (+ beta · c[i, j] when beta is
 * not 0), in a fixed order. */
cudaError_t tdm_k_sum_parts(float *c, int ldc, const float *parts, int count, int m, int n,
                            float alpha, float beta, cudaStream_t stream);
/* The backend's gemm (row-major, op = transpose when set) for a tiny C: m blocks of
 * rows, m <= 65535. */
cudaError_t tdm_k_gemm_small(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                             const float *a, int lda, const float *b, int ldb, float beta,
                             float *c, int ldc, cudaStream_t stream);

/* conv-im2col.cu */
cudaError_t tdm_k_im2col(float *col, const float *x, int n, int h, int w, int c, int kh,
                         int kw, int pad, int stride, cudaStream_t stream);
/* im2col into bfloat16 columns (bits, rounded to nearest even) of x, float32 or (x16)
 * bfloat16 (copied). */
cudaError_t tdm_k_im2col_bf16(uint16_t *col, const void *x, bool x16, int n, int h, int w,
                              int c, int kh, int kw, int pad, int stride, cudaStream_t stream);
/* The same columns of bn_forward's training output (relu optional) computed from its
 * input x as they are gathered: the bits of tdm_k_bn_forward then tdm_k_im2col_bf16. */
cudaError_t tdm_k_im2col_bf16_bn(uint16_t *col, const void *x, bool x16, const float *mean,
                                 const float *invstd, const float *gamma, const float *beta,
                                 bool relu, int n, int h, int w, int c, int kh, int kw, int pad,
                                 int stride, bool descending, cudaStream_t stream);
cudaError_t tdm_k_col2im(float *dx, const float *col, int n, int h, int w, int c, int kh,
                         int kw, int pad, int stride, cudaStream_t stream);
/* col2im from bfloat16 columns, summed in float32; dx float32, or with dx16 bf16 (each
 * sum rounded once to nearest even). */
cudaError_t tdm_k_col2im_bf16(void *dx, bool dx16, const uint16_t *col, int n, int h, int w,
                              int c, int kh, int kw, int pad, int stride, cudaStream_t stream);

/* conv-implicit.cu */
/* A stride-1 convolution's input gradient from bf16 dy (rows × out_c) and W (out_c ×
 * kh·kw·c) without columns (conv-implicit.cu): dx written, summed in float32 (with dx16
 * rounded once to bf16). fits()
 * says whether the kernel takes the shape on a GPU of compute capability `major`;
 * the pointers must be 16-byte aligned. */
bool tdm_k_conv_dgrad_bf16_fits(int major, int c, int out_c, int kh, int kw, int pad,
                                int stride);
cudaError_t tdm_k_conv_dgrad_bf16(void *dx, bool dx16, const uint16_t *dy, const uint16_t *w,
                                  int n, int h, int wd, int c, int out_c, int kh, int kw,
                                  int pad, cudaStream_t stream);

/* conv-phases.cu: w (KRSC, out_c × kernel × kernel × c; bf16 where bf16, else float32)
 * as the sorted kernels of its input gradient by phases (conv-phases-plan.h), into
 * `sorted` (as many values, the same type). */
cudaError_t tdm_k_conv_phases_weights(void *sorted, const void *w, bool bf16, int out_c, int c,
                                      int kernel, int pad, int stride, cudaStream_t stream);
/* conv-phases.cu: dy (n × dy_h × dy_w × out_c, bf16 where bf16, else float32) copied into
 * `padded` (n × (before_h + dy_h + after_h) × (before_w + dy_w + after_w) × out_c, the
 * same type) with zeros in its margins: the phases' pre-padded form
 * (conv-phases-plan.h's tdm_k_phases_pad()). out_c a multiple of 8, both 16-byte
 * aligned. */
cudaError_t tdm_k_conv_phases_pad(void *padded, const void *dy, bool bf16, int n, int dy_h,
                                  int dy_w, int out_c, int before_h, int after_h, int before_w,
                                  int after_w, cudaStream_t stream);

/* conv-small.cu: a convolution of few input channels (conv-small-plan.h's
 * tdm_k_small_plan() says which shapes) on bf16 tensor cores, without columns; sm_80 or
 * later. x (NHWC, float32 or with x16 bf16) is read as im2col_bf16 reads it (with
 * bn_mean not NULL, normalized as im2col_bf16_bn does); w and dy are bf16 (w as
 * [out_c, kernel, kernel, c], dy n·oh·ow × out_c, 16-byte aligned). The forward writes y
 * (float32, or with y16 bf16 rounded once; 16-byte aligned). The weight gradient writes
 * dw (float32, out_c × kernel²·c) through plan.partial_bytes of partials (32-byte
 * aligned), summed in a fixed order. */
cudaError_t tdm_k_conv_small_forward(void *y, bool y16, const void *x, bool x16,
                                     const float *bn_mean, const float *bn_invstd,
                                     const float *bn_gamma, const float *bn_beta, bool bn_relu,
                                     const uint16_t *w, int n, int h, int wd, int c, int out_c,
                                     int kernel, int pad, int stride, cudaStream_t stream);
cudaError_t tdm_k_conv_small_wgrad(float *dw, float *partials, const uint16_t *dy, const void *x,
                                   bool x16, const float *bn_mean, const float *bn_invstd,
                                   const float *bn_gamma, const float *bn_beta, bool bn_relu,
                                   int n, int h, int wd, int c, int out_c, int kernel, int pad,
                                   int stride, cudaStream_t stream);
/* The weight gradient's partials (splits · out_c · kpad floats, conv-small-plan.h's)
 * summed in their fixed order into dw (out_c × k): tdm_k_conv_small_wgrad's end, and
 * tdm_k_stem_bn_dx_wgrad's. */
cudaError_t tdm_k_conv_small_wgrad_sum(float *dw, const float *partials, int splits, int out_c,
                                       int k, int kpad, cudaStream_t stream);

/* conv-stem-bn.cu: the backward of a stem (x float32 NHWC, w bf16 [out_c, kernel, kernel,
 * c], a shape conv-small-plan.h's tdm_k_stem_bn_plan() takes) and of the training bn
 * after it (mean, invstd, gamma, beta; relu: its fused ReLU), whose output the two
 * passes make again as tdm_k_conv_small_forward makes it into bf16 (the same bits) rather
 * than read it. dy (the bn's output gradient, bf16, n·oh·ow × out_c, 16-byte aligned).
 * scratch: device memory of the plan's scratch_bytes (32-byte aligned), free between
 * the calls. The sums write dgamma = Σdy·x̂ and dbeta = Σdy (float32, out_c each) as
 * tdm_k_bn_backward_sums computes them but for the order of the additions (a fixed
 * one: the same bits every run); the second pass dw (float32, out_c × kernel²·c) from
 * the (all-reduced) sums and inv_count as tdm_k_bn_backward_dx_bf16 then
 * tdm_k_conv_small_wgrad compute it: the same bits. Neither stores x or dx. Shapes the
 * plan refuses: cudaErrorInvalidValue. */
cudaError_t tdm_k_stem_bn_sums(float *dgamma, float *dbeta, const uint16_t *dy, const float *x,
                               const uint16_t *w, const float *mean, const float *invstd,
                               const float *gamma, const float *beta, bool relu, int n, int h,
                               int wd, int c, int out_c, int kernel, int pad, int stride,
                               void *scratch, size_t scratch_bytes, cudaStream_t stream);
cudaError_t tdm_k_stem_bn_dx_wgrad(float *dw, const uint16_t *dy, const float *x,
                                   const uint16_t *w, const float *mean, const float *invstd,
                                   const float *gamma, const float *beta, bool relu,
                                   const float *sum_dgamma, const float *sum_dbeta,
                                   float inv_count, int n, int h, int wd, int c, int out_c,
                                   int kernel, int pad, int stride, void *scratch,
                                   size_t scratch_bytes, cudaStream_t stream);

/* conv-pool.cu. The limits of conv_pool_forward and conv_pool_backward
 * (TDM_CONV_POOL_TAPS and TDM_CONV_POOL_OUT of tdm-backend.h); larger shapes return
 * cudaErrorInvalidValue. The backward's sums go through `partials` as well. */
#define TDM_K_CONV_POOL_TAPS 32
#define TDM_K_CONV_POOL_OUT 256
cudaError_t tdm_k_conv_pool_forward(float *y, int32_t *argmax, const float *x, const float *wt,
                                    const float *bias, bool relu, int n, int h, int w, int c,
                                    int out, int kh, int kw, int pad, int pk,
                                    cudaStream_t stream);
cudaError_t tdm_k_conv_pool_backward(float *dwt, float *dbias, const float *dy,
                                     const int32_t *argmax, const float *y, const float *x,
                                     bool relu, int n, int h, int w, int c, int out, int kh,
                                     int kw, int pad, int pk, float *partials,
                                     size_t partials_count, cudaStream_t stream);

/* pool.cu */
cudaError_t tdm_k_maxpool_forward(float *y, int32_t *argmax, const float *x,
                                  const float *bias, bool relu, int n, int h, int w, int c,
                                  int k, cudaStream_t stream);
/* The pool of bn_forward's training output (relu optional), each value normalized from
 * x as it is read: tdm_k_bn_forward then tdm_k_maxpool_forward's y and argmax. */
cudaError_t tdm_k_maxpool_forward_bn(float *y, int32_t *argmax, const float *x,
                                     const float *mean, const float *invstd,
                                     const float *gamma, const float *beta, bool relu, int n,
                                     int h, int w, int c, int k, cudaStream_t stream);
/* dbias (may be NULL) goes through `partials`, device scratch of partials_count
 * floats, as tdm_k_bias_backward's sums do. */
cudaError_t tdm_k_maxpool_backward(float *dx, float *dbias, const float *dy,
                                   const int32_t *argmax, const float *y, int n, int h,
                                   int w, int c, int k, float *partials,
                                   size_t partials_count, cudaStream_t stream);
/* pool-bf16.cu: the tiling max pool of a bf16 run's stored tensors. Forward: x float32
 * or (x16) bf16, optionally normalized as it is read (mean NULL: no bn), each value
 * rounded to bf16 before the max; y bf16, argmax into x. Backward: dx and dy each
 * float32 or bf16, each value rounded once. x has at most 2³¹ elements. */
cudaError_t tdm_k_maxpool_forward_bf16(uint16_t *y, int32_t *argmax, const void *x, bool x16,
                                       const float *mean, const float *invstd,
                                       const float *gamma, const float *beta, bool relu, int n,
                                       int h, int w, int c, int k, cudaStream_t stream);
cudaError_t tdm_k_maxpool_backward_bf16(void *dx, bool dx16, const void *dy, bool dy16,
                                        const int32_t *argmax, int n, int h, int w, int c,
                                        int k, cudaStream_t stream);
cudaError_t tdm_k_avgpool_forward(float *y, const float *x, int n, int h, int w, int c, int k,
                                  cudaStream_t stream);
cudaError_t tdm_k_avgpool_backward(float *dx, const float *dy, int n, int h, int w, int c,
                                   int k, cudaStream_t stream);
cudaError_t tdm_k_global_avgpool_forward(float *y, const float *x, int n, int pixels, int c,
                                         cudaStream_t stream);
cudaError_t tdm_k_global_avgpool_backward(float *dx, const float *dy, int n, int pixels,
                                          int c, cudaStream_t stream);
cudaError_t tdm_k_global_maxpool_forward(float *y, int32_t *argmax, const float *x, int n,
                                         int pixels, int c, cudaStream_t stream);
cudaError_t tdm_k_global_maxpool_backward(float *dx, const float *dy, const int32_t *argmax,
                                          int n, int pixels, int c, cudaStream_t stream);

/* pool2d.cu: pools with any window k, stride s and padding p (oh, ow: the floor
 * mode's output size). maxpool2d_forward reads x as float32 or (x16) bf16, widened, and
 * writes the maximum as float32 or (y16) rounded to bf16; argmax, the maximum's position
 * within its window, ky·k + kx, as uint8 where k·k ≤ 256, else its position in the
 * sample's plane, iy·w + ix, as int32. */
cudaError_t tdm_k_maxpool2d_forward(void *y, bool y16, void *argmax, const void *x,
                                    bool x16, int n, int h, int w, int c, int k, int s, int p,
                                    int oh, int ow, cudaStream_t stream);
/* maxpool2d_forward of a training bn's output computed as x is read (mean NULL: no bn, x
 * itself), each value rounded to bf16 before the max (the first maximum of the rounded
 * values), as bn-value.cuh and the CPU reference compute it. */
cudaError_t tdm_k_maxpool2d_forward_bn(void *y, bool y16, void *argmax, const void *x,
                                       bool x16, const float *mean, const float *invstd,
                                       const float *gamma, const float *beta, bool relu, int n,
                                       int h, int w, int c, int k, int s, int p, int oh, int ow,
                                       cudaStream_t stream);
cudaError_t tdm_k_maxpool2d_backward(void *dx, bool dx16, const void *dy, bool dy16,
                                     const void *argmax, int n, int h, int w, int c, int k,
                                     int s, int p, int oh, int ow, cudaStream_t stream);
cudaError_t tdm_k_avgpool2d_forward(float *y, const float *x, int n, int h, int w, int c,
                                    int k, int s, int p, int oh, int ow, cudaStream_t stream);
cudaError_t tdm_k_avgpool2d_backward(float *dx, const float *dy, int n, int h, int w, int c,
                                     int k, int s, int p, int oh, int ow, cudaStream_t stream);

/* bn-sums.cu, bn-forward.cu, bn-backward.cu. The per-channel sums go through `partials`, device scratch of
 * partials_count doubles (at least 2 · channels), and `counters`, counter_count
 * unsigned ints that are zero before the launch and that the launch leaves zero (one
 * set a stream: two launches must not run at once on the same counters); 2 · ⌈channels
 * / 32⌉ always do, more let the sums use more blocks. x is float32, or bfloat16 bits when
 * x16 (widened exactly as it is read), here and in tdm_k_im2col_bf16_bn. */
/* bn_moments and bn_stats as the backend's (tdm-backend.h, tdm-bn-moments.h). */
cudaError_t tdm_k_bn_moments(float *slots, const void *x, bool x16, int rows, int channels,
                             int slot, int slot_count, double *partials, size_t partials_count,
                             unsigned *counters, size_t counter_count, cudaStream_t stream);
cudaError_t tdm_k_bn_stats(float *saved, const float *slots, int slot_count, int channels,
                           float eps, float momentum, float *running_mean,
                           float *running_var, cudaStream_t stream);
/* bn_moments_stats: tdm_k_bn_moments into one slot (slot 0 of 1), then tdm_k_bn_stats of
 * it, the same bits, in the one launch (the moments' finish computes the statistics). */
cudaError_t tdm_k_bn_moments_stats(float *saved, float *slots, const void *x, bool x16,
                                   int rows, int channels, float eps, float momentum,
                                   float *running_mean, float *running_var, double *partials,
                                   size_t partials_count, unsigned *counters,
                                   size_t counter_count, cudaStream_t stream);
/* The training forward as a per-channel map, scale = invstd·γ and shift = β − mean·scale
 * (the bits bn_forward applies): for cuDNN's fused prologue, which computes
 * x·scale + shift itself. */
cudaError_t tdm_k_bn_affine(float *scale, float *shift, const float *mean, const float *invstd,
                            const float *gamma, const float *beta, int channels,
                            cudaStream_t stream);
cudaError_t tdm_k_bn_forward(float *y, const void *x, bool x16, const float *mean,
                             const float *invstd, const float *gamma, const float *beta,
                             int rows, int channels, bool relu, bool descending,
                             cudaStream_t stream);
/* tdm_k_bn_forward (no ReLU of its own) then y += a and, with relu, max(y, 0): the bits
 * of tdm_k_bn_forward then tdm_k_add_out, in one pass. */
/* tdm_k_bn_forward (a NULL) or tdm_k_bn_forward_add (a float32 or, a16, bf16) rounded
 * into y as bf16: the bits of either then tdm_k_to_bf16, in one pass; with bits (not
 * NULL), y's mask as tdm_k_add_out_bf16 writes it, in the same pass. */
cudaError_t tdm_k_bn_forward_bf16(uint16_t *y, const void *x, bool x16, const float *mean,
                                  const float *invstd, const float *gamma, const float *beta,
                                  const void *a, bool a16, int rows, int channels, bool relu,
                                  uint32_t *bits, bool descending, cudaStream_t stream);
cudaError_t tdm_k_bn_forward_add(float *y, const void *x, bool x16, const float *mean,
                                 const float *invstd, const float *gamma, const float *beta,
                                 const float *a, int rows, int channels, bool relu,
                                 bool descending, cudaStream_t stream);
cudaError_t tdm_k_bn_forward_eval(float *y, const void *x, bool x16, const float *running_mean,
                                  const float *running_var, const float *gamma,
                                  const float *beta, float eps, int rows, int channels,
                                  bool relu, bool descending, cudaStream_t stream);
/* tdm_k_bn_forward with its ReLU, then + a (float32 or, a16, bf16), rounded into y as
 * bf16: the bits of tdm_k_bn_forward, tdm_k_add_out (no ReLU) then tdm_k_to_bf16. */
cudaError_t tdm_k_bn_relu_add_bf16(uint16_t *y, const void *x, bool x16, const float *mean,
                                   const float *invstd, const float *gamma, const float *beta,
                                   const void *a, bool a16, int rows, int channels,
                                   bool descending, cudaStream_t stream);
/* The same rounded into y as bf16: the bits of tdm_k_bn_forward_eval then tdm_k_to_bf16. */
cudaError_t tdm_k_bn_forward_eval_bf16(uint16_t *y, const void *x, bool x16,
                                       const float *running_mean, const float *running_var,
                                       const float *gamma, const float *beta, float eps,
                                       int rows, int channels, bool relu, bool descending,
                                       cudaStream_t stream);
/* The backward's two steps; with relu, dy counts as 0 where the forward's fused ReLU
 * stopped the value (recomputed from x, gamma and beta as the forward computed it). */
cudaError_t tdm_k_bn_backward_sums(float *dgamma, float *dbeta, const void *dy, bool dy16,
                                   const void *x, bool x16, const float *mean,
                                   const float *invstd, const float *gamma, const float *beta,
                                   bool relu, int rows, int channels, double *partials,
                                   size_t partials_count, unsigned *counters,
                                   size_t counter_count, cudaStream_t stream);
/* A residual block's start in backward and the sums of the bn below it in one pass:
 * dx = mask bit ? a + share : 0 (a float32 or, a16, bf16; the share skip's, bf16, or
 * strided's, a projection's compact float32 input gradient at the pixels of h × w images
 * its 1×1 conv of this stride reads and + 0 elsewhere, as tdm_k_add_strided_bf16's x, or
 * neither; mask bits, NULL for none) rounded once to bf16 (tdm_k_add_relu_backward_bf16's
 * bits, or tdm_k_add_strided_bf16's then masked; with no share tdm_k_relu_backward_bf16's,
 * tdm_k_to_bf16's or a copy's), and dgamma, dbeta as tdm_k_bn_backward_sums writes them
 * from that dx (bf16), the same bits: it is that kernel, its dy made as it loads. dx may
 * be a or skip where that one is bf16, never over strided. */
cudaError_t tdm_k_add_relu_backward_bn_sums_bf16(
    uint16_t *dx, const void *a, bool a16, const uint16_t *skip, const float *strided, int h,
    int w, int stride, const uint32_t *mask, const void *x, bool x16, const float *mean,
    const float *invstd, const float *gamma, const float *beta, bool relu, int rows,
    int channels, float *dgamma, float *dbeta, double *partials, size_t partials_count,
    unsigned *counters, size_t counter_count, cudaStream_t stream);
cudaError_t tdm_k_bn_backward_dx(float *dx, const void *dy, bool dy16, const void *x, bool x16,
                                 const float *mean, const float *invstd, const float *gamma,
                                 const float *beta, bool relu, const float *sum_dgamma,
                                 const float *sum_dbeta, float inv_count, int rows,
                                 int channels, bool descending, cudaStream_t stream);
/* The same dx rounded to bfloat16 (nearest even: to_bf16's bits of the float dx). */
cudaError_t tdm_k_bn_backward_dx_bf16(uint16_t *dx, const void *dy, bool dy16, const void *x,
                                      bool x16, const float *mean, const float *invstd,
                                      const float *gamma, const float *beta, bool relu,
                                      const float *sum_dgamma, const float *sum_dbeta,
                                      float inv_count, int rows, int channels, bool descending,
                                      cudaStream_t stream);

/* softmax.cu: metrics points to two doubles, {loss_sum, correct}, added into. */
cudaError_t tdm_k_softmax_xent(const float *logits, const int32_t *labels, int rows,
                               int classes, float smoothing, float grad_scale,
                               float *dlogits, double *metrics, cudaStream_t stream);

/* gather.cu; then x · mul + add per channel (the input normalization). */
cudaError_t tdm_k_gather(float *x, int32_t *y, const uint8_t *images, const uint8_t *labels,
                         const int32_t *indices, int count, int sample_size, float scale,
                         cudaStream_t stream);
/* flip is TdmFlip's value (0 never, 1 random, 2 always); key and epoch as the
 * backend's gather_augment. */
cudaError_t tdm_k_gather_augment(float *x, int32_t *y, const uint8_t *images,
                                 const uint8_t *labels, const int32_t *indices, int count,
                                 int h, int w, int c, float scale, int pad, int flip,
                                 uint64_t key, uint32_t epoch, cudaStream_t stream);
/* tdm-augment.h's photo augmentation: the backend's gather_photo. */
cudaError_t tdm_k_gather_photo(float *x, int32_t *y, const uint8_t *images,
                               const uint8_t *labels, const int32_t *indices, int count, int h,
                               int w, int c, const TdmPhotoAugment *augment, uint64_t key,
                               uint32_t epoch, cudaStream_t stream);
#define TDM_K_AFFINE_MAX 4
typedef struct {
  float mul[TDM_K_AFFINE_MAX], add[TDM_K_AFFINE_MAX];
} TdmKAffine;
cudaError_t tdm_k_channel_affine(float *x, size_t rows, int channels, TdmKAffine a,
                                 cudaStream_t stream);

/* optimizer.cu. rates: NULL, or two floats of device memory read when the kernel runs
 * instead of lr (lr_t) and momentum (beta1). */
cudaError_t tdm_k_sgd_update(float *p, const float *g, size_t n, float lr,
                             float weight_decay, const float *rates, cudaStream_t stream);
cudaError_t tdm_k_momentum_update(float *p, const float *g, float *velocity, size_t n,
                                  float lr, float momentum, float weight_decay,
                                  const float *rates, cudaStream_t stream);
cudaError_t tdm_k_adam_update(float *p, const float *g, float *m, float *v, size_t n,
                              float lr_t, float beta1, float beta2, float eps,
                              float weight_decay, const float *rates, cudaStream_t stream);
/* decay_mask: one byte a parameter, NULL = decay everything. */
cudaError_t tdm_k_sgd_momentum_update(float *p, const float *g, float *velocity,
                                      const uint8_t *decay_mask, size_t n, float lr,
                                      float momentum, float weight_decay, bool nesterov,
                                      const float *rates, cudaStream_t stream);
cudaError_t tdm_k_weight_decay(float *g, const float *p, const uint8_t *decay_mask, size_t n,
                               float weight_decay, cudaStream_t stream);
/* work[0] = ‖x‖₂ (work: TDM_K_CLIP_WORK_DOUBLES doubles, the rest partial sums); x *=
 * max_norm / (norm + 1e-6) where max_norm > 0 and the norm is above it. */
#define TDM_K_CLIP_WORK_DOUBLES 1025
cudaError_t tdm_k_clip_norm(float *x, size_t n, float max_norm, double *work,
                            cudaStream_t stream);

/* compare.cu: work[0] = Σ (x[i] − ref[i])², work[1] = Σ ref[i]², each in double in an
 * order fixed by n alone (x and ref float32, or bf16 bits where bf16); work holds
 * TDM_K_DEVIATION_WORK_DOUBLES doubles (the rest partial sums). Launches for n = 0 too
 * (zeros). */
#define TDM_K_DEVIATION_WORK_DOUBLES 1026
cudaError_t tdm_k_deviation(double *work, const void *x, const void *ref, bool bf16, size_t n,
                            cudaStream_t stream);

#ifdef __cplusplus
}
#endif
