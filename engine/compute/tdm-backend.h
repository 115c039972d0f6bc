/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend.h — the engine's one door to a device: its tensor operations.
 *
 * A TdmBackend is one device as the engine computes on it: the CPU (OpenBLAS and plain
 * C loops) or one CUDA GPU (cuBLAS and kernels/ on a stream of its own). Replicas,
 * optimizers and communicators call its operations as tdm_backend_<op> (b, …) and know
 * nothing of the device. Each of those functions is the operation's front door: it
 * counts the operation, does nothing after an earlier failure, checks the arguments
 * its contract below constrains (a bad one becomes the sticky error, naming the
 * operation), and only then calls the backend's table (tdm-backend-ops.h), which
 * trusts them. Operations some backends lack say below what happens without them.
 *
 * Conventions shared by every backend:
 * - Pointers are device pointers obtained from tdm_backend_alloc(); float32 row-major.
 * - Activations are NHWC (sample, row, column, channel); a flat feature vector is the
 *   same as H = W = 1. Weights: Linear [out, in], as PyTorch's; Conv2d [out, kh, kw,
 *   in], the order of im2col's columns (each tap a contiguous run of channels), where
 *   PyTorch has [out, in, kh, kw]: checkpoints hold PyTorch's layout, and the trainer
 *   permutes on save and load (tdm_layer_weight_to_torch() in tdm-network.h).
 * - Operations are asynchronous on the device's stream and return nothing. The first
 *   failure is kept in the backend (a sticky error, as CUDA keeps its own) and reported
 *   by tdm_backend_check(); later operations after a failure do nothing.
 * - Gradients are written, not accumulated, unless an operation says otherwise.
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "tdm-augment.h"
#include "tdm-bn-moments.h"
#include "tdm-device-id.h"
#include "tdm-precision.h"

G_BEGIN_DECLS

typedef struct _TdmBackend TdmBackend;
/* The table of a backend's operations: its backends' business (tdm-backend-ops.h). */
typedef struct _TdmBackendOps TdmBackendOps;

/* The sizes conv_pool_forward and conv_pool_backward take: kh·kw·c taps, out
 * channels. */
#define TDM_CONV_POOL_TAPS 32
#define TDM_CONV_POOL_OUT 256

/* A pooling layer's geometry: n samples of h×w×c in (NHWC), oh×ow×c out, k×k windows
 * at stride s over the input padded by p on every side (p ≤ k / 2, as PyTorch asks). */
typedef struct {
  int n, h, w, c, k, s, p, oh, ow;
} TdmPool2d;

/* Whether g is a geometry the pooling operations take: its output size is the floor
 * mode's, and every window holds at least one input. */
static inline bool
tdm_pool2d_valid(TdmPool2d g)
{
  return g.n >= 0 && g.h >= 1 && g.w >= 1 && g.c >= 1 && g.k >= 1 && g.s >= 1 && g.p >= 0 &&
         2 * g.p <= g.k && g.h + 2 * g.p >= g.k && g.w + 2 * g.p >= g.k &&
         (int64_t)g.h * g.w * g.c <= INT32_MAX &&
         g.oh == (g.h + 2 * g.p - g.k) / g.s + 1 && g.ow == (g.w + 2 * g.p - g.k) / g.s + 1;
}

/* The window positions a uint8 argmax tells apart: a max pool of k×k windows keeps, per
 * output, the index ky·k + kx of its chosen input within its window, as a byte where the
 * window has at most this many positions (k ≤ 16: every pool of the networks in use),
 * else the chosen input's position in the sample's plane, iy·w + ix, as an int32 (which
 * fits where k·k may not: tdm_pool2d_valid() bounds h·w·c). */
#define TDM_POOL2D_BYTE_WINDOW 256

/* Bytes of one element of maxpool2d_forward's argmax for windows of k×k. */
static inline size_t
tdm_pool2d_argmax_size(int k)
{
  return (int64_t)k * k <= TDM_POOL2D_BYTE_WINDOW ? sizeof(uint8_t) : sizeof(int32_t);
}

/* A convolution's shape: n samples of h×w×c (NHWC) in, out_c channels out, square
 * kernel × kernel windows at `stride` over the input zero-padded by `pad` on every
 * side; the output is oh × ow with oh = (h + 2·pad − kernel) / stride + 1 (floor). */
typedef struct {
  int n, h, w, c, out_c, kernel, pad, stride;
} TdmConvShape;

static inline int
tdm_conv_out_h(const TdmConvShape *s)
{
  return (s->h + 2 * s->pad - s->kernel) / s->stride + 1;
}

static inline int
tdm_conv_out_w(const TdmConvShape *s)
{
  return (s->w + 2 * s->pad - s->kernel) / s->stride + 1;
}

/* The three directions of a convolution, each with its own choice of way. */
typedef enum {
  TDM_CONV_FORWARD,   /* y from x and w */
  TDM_CONV_DGRAD,     /* dx from dy and w */
  TDM_CONV_WGRAD,     /* dw from x and dy */
} TdmConvDirection;

/* The element type of a stored tensor: float32, or bfloat16 as its bits (uint16_t,
 * rounded to nearest even by tdm-bf16.h's rule, the GPU's). A bf16 run stores some
 * activations as bf16 (tdm_replica_layer_buffers()); the operations that read them
 * take the type beside the pointer, and accumulate and write float32 all the same. */
typedef enum {
  TDM_DTYPE_F32 = 0,
  TDM_DTYPE_BF16 = 1,
} TdmDtype;

static inline size_t
tdm_dtype_size(TdmDtype t)
{
  return t == TDM_DTYPE_BF16 ? sizeof(uint16_t) : sizeof(float);
}

/* Whether the byte ranges [p, p + p_bytes) and [q, q + q_bytes) share a byte. */
static inline bool
tdm_bytes_overlap(const void *p, size_t p_bytes, const void *q, size_t q_bytes)
{
  const char *a = p, *b = q;
  return a < b + q_bytes && b < a + p_bytes;
}

/* One call of the convolution engine (conv_engine_forward, conv_engine_backward). */
typedef struct {
  TdmConvShape shape;
  /* The input, n×h×w×c. When bn_mean is not NULL, the convolution's input is
   * bn_forward's training output of x (bn_mean, bn_invstd, bn_gamma, bn_beta, then
   * max(·, 0) when bn_relu), computed as it is read: the normalized tensor was never
   * written (the replica's bn left it to the conv). x is of type x_type, bf16 where the
   * run stores it so (tdm_backend_has_bn_bf16_input()): a bn's input, or in a bf16 run
   * a residual block's input read as it is. */
  const float *x;
  TdmDtype x_type;
  const float *bn_mean, *bn_invstd, *bn_gamma, *bn_beta;
  bool bn_relu;
  const float *w;             /* [out_c, kernel, kernel, c] */
  const uint16_t *w16;        /* w as bf16 when the caller keeps it (bf16 runs), or NULL */
  float *y;                   /* forward: n×oh×ow×out_c, written */
  /* Forward: when not NULL, the output goes here as bf16 instead (each value rounded
   * once from the float32 sum, as to_bf16 rounds) and y is not written. */
  uint16_t *y16;
  /* Backward: the output gradient, float32; or, when dy16 is not NULL, as bf16 at dy16
   * (at work's start, which the engine then leaves alone, or outside work, 16-byte
   * aligned: no room is reserved for it then) and dy is not read. */
  const float *dy;
  const uint16_t *dy16;
  float *dx;                  /* backward: the input gradient, written; NULL: none wanted */
  /* Backward: when not NULL, the input gradient goes here as bf16 instead (each value
   * rounded once from the float32 sum, as to_bf16 rounds: a gradient the bn backward
   * before the conv reads so) and dx is not written. */
  uint16_t *dx16;
  float *dw;                  /* backward: the weight gradient, written */
  void *work;                 /* the caller's scratch, its contents undefined between calls */
  size_t work_bytes;
  /* When not NULL, receives the bytes of work the chosen candidates need for this call
   * (the engine's or, for an engine that declines, 0); more than work_bytes when the
   * choice does not fit (the engine then declines, having queued nothing). */
  size_t *work_needed;
  /* The most the caller would let work grow to for this call, or 0 for no limit: a
   * candidate that needs more is not chosen (the replica's upper bound, its float32
   * columns, which its memory estimate promised). */
  size_t work_limit;
} TdmConvArgs;

/* How many of a backend's convolution choices (shape × direction) went to each kind of
 * candidate (conv_choices): cuDNN's fused graphs (a bn applied as the conv reads its
 * input), cuDNN's plain plans, our own kernels, im2col. */
typedef struct {
  int cudnn, own, im2col, cudnn_fused;
} TdmConvChoices;

/* A residual block's start in backward, its inputs (add_relu_backward_bn_sums_bf16):
 * its first layer's input gradient a (float32 or bf16: a_type) and the skip path's
 * share, either the block's bf16 output gradient (skip, a's size) or a projection's
 * float32 input gradient kept compact (strided: n × ((h − 1) / stride + 1) ×
 * ((w − 1) / stride + 1) × channels, the pixels its 1×1 conv of this stride and no
 * padding reads, as add_strided_bf16's x; h and w the block's input's), or neither
 * (both NULL); and the mask of the ReLU of the layer before (tdm-relu-bits.h), or NULL
 * for none. */
typedef struct {
  const void *a;
  TdmDtype a_type;
  const uint16_t *skip;
  const float *strided;
  int h, w, stride;
  const uint32_t *mask;
} TdmBlockStart;

/* Per-channel x · mul + add, for at most four channels (grey, RGB). */
#define TDM_AFFINE_MAX_CHANNELS 4
typedef struct {
  int channels;
  float mul[TDM_AFFINE_MAX_CHANNELS], add[TDM_AFFINE_MAX_CHANNELS];
} TdmChannelAffine;

/* gather_augment's flip: never, with probability ½ per sample, or always (test-time
 * flip averaging evaluates each test image twice, once mirrored). */
typedef enum {
  TDM_FLIP_NEVER = 0,
  TDM_FLIP_RANDOM = 1,
  TDM_FLIP_ALWAYS = 2,
} TdmFlip;

/* The fields that every step's loss and accuracy are summed into, on the device. */
typedef struct {
  double loss_sum;      /* sum of per-sample cross-entropy */
  double correct;       /* samples whose arg-max equals the label */
} TdmMetrics;

struct _TdmBackend {
  const TdmBackendOps *ops;
  TdmBackendKind kind;
  int device_index;           /* CUDA ordinal, or 0 for the CPU */
  char *name;                 /* "cpu", "cuda:0" — used in messages */
  TdmPrecision precision;
  /* --exact: where an operation has a choice of ways (the convolution engine), only
   * those whose results do not depend on timing are eligible, and the choice is a rule
   * of the shape and the GPU model, never a measurement, so every device of a kind
   * computes the same bits. Set by the trainer before the first operation. */
  bool deterministic;
  size_t bytes_in_use;        /* what Tandem holds on this device, exactly */
  size_t bytes_peak;
  size_t bytes_limit;         /* tests: an allocation that would hold more fails as out of
                               * memory, as a smaller device's would (0: none) */
  guint64 operations;         /* operations issued (≈ kernels launched), for floors */
  volatile gint *abort_flag;  /* when set and non-zero, long CPU operations stop early */
  GError *error;              /* the first failure, sticky */
  GMutex error_lock;
};

/* Doubles of device memory clip_norm works in: the norm and partial sums. */
#define TDM_CLIP_WORK_DOUBLES 1025
/* Doubles of device memory deviation works in: its two sums and partial sums. */
#define TDM_DEVIATION_WORK_DOUBLES 1026

/* Creates the backend for one device (the CPU, or GPU N). Several backends may share
 * one GPU (each has its own stream). TDM_PRECISION_AUTO is refused
 * (TDM_ENGINE_ERROR_INVALID_OPTION): it is the run's to resolve, for all its devices. */
TdmBackend *tdm_backend_new (TdmDeviceId device, TdmPrecision precision, GError **error);
void tdm_backend_free (TdmBackend *b);

/* Whether every GPU among the `count` devices can be opened at all: FALSE on a machine
 * or build without CUDA GPUs, with a message (TDM_ENGINE_ERROR_DEVICE) that names the
 * first one and the CPU workers to use instead (cpu:N, one for each entry; "cpu" when
 * each process of an mpirun job holds one, `per_process`). Which GPUs exist is
 * tdm_backend_new()'s to check. */
gboolean tdm_backend_check_gpus (const TdmDeviceId *devices, int count,
                                 gboolean per_process, GError **error);

/* Backend constructors; the CUDA one exists only in builds with CUDA. */
TdmBackend *tdm_backend_cpu_new (GError **error);
TdmBackend *tdm_backend_cuda_new (int ordinal, TdmPrecision precision, GError **error);
size_t tdm_backend_cuda_own_bytes (int ordinal);
/* tdm_backend_conv_workspace_recall() and _remember() for a CUDA GPU. */
gboolean tdm_backend_cuda_conv_workspace_recall (int ordinal, const char *plan, guint64 *bytes);
void tdm_backend_cuda_conv_workspace_remember (TdmBackend *b, const char *plan, guint64 bytes);
gboolean tdm_backend_cuda_available (void);

/* Bytes a backend for `device` allocates for itself when created, on its byte counter:
 * cuBLAS's workspace and scratch on a GPU, nothing on the CPU. For the memory
 * estimate (tdm-memory.h); 0 for devices this build cannot open. */
size_t tdm_backend_own_bytes (TdmDeviceId device);

/* Floats of scratch a backend of this kind needs to run a convolution of this shape
 * (any batch) through conv_forward and conv_backward, or 0 when it composes it from
 * im2col, gemm and col2im. The replica's buffers follow it (tdm_replica_layer_buffers())
 * and so does the memory estimate, without a backend at hand. The CPU takes 3×3
 * stride-1 convolutions of 8 input channels or more (Winograd F(2×2, 3×3) or F(3×3,
 * 3×3), tdm-backend-cpu-winograd.h); CUDA none. */
size_t tdm_backend_conv_work_floats (TdmBackendKind kind, int h, int w, int c, int out_c,
                                     int kernel, int pad, int stride);

/* Memory on the device. alloc and release go through the device's byte counter;
 * release takes NULL. upload and download copy between the host and the device
 * (download waits for the device), copy within the device (dst == src does nothing),
 * zero clears bytes. synchronize waits for every operation issued. */
void *tdm_backend_alloc (TdmBackend *b, size_t bytes, GError **error);
void tdm_backend_release (TdmBackend *b, void *ptr);
void tdm_backend_upload (TdmBackend *b, void *dst, const void *src, size_t bytes);
void tdm_backend_download (TdmBackend *b, void *dst, const void *src, size_t bytes);
void tdm_backend_copy (TdmBackend *b, void *dst, const void *src, size_t bytes);
void tdm_backend_zero (TdmBackend *b, void *ptr, size_t bytes);
void tdm_backend_synchronize (TdmBackend *b);

/* Records a failure (first one wins) from any backend code. printf-style message. */
void tdm_backend_fail (TdmBackend *b, int code, const char *format, ...) G_GNUC_PRINTF (3, 4);
/* Waits for the device, then returns FALSE with the sticky error if one occurred. */
gboolean tdm_backend_check (TdmBackend *b, GError **error);
/* The same without waiting: errors of work still queued show up at a later check.
 * For hot loops, where waiting every step would stall the device's queue. */
gboolean tdm_backend_check_queued (TdmBackend *b, GError **error);
gboolean tdm_backend_failed (TdmBackend *b);

/* The operations. */

/* C[m×n] = alpha · op(A) · op(B) + beta · C, row-major, op = transpose when set. */
void tdm_backend_gemm (TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                       float alpha, const float *a, int lda, const float *bm, int ldb,
                       float beta, float *c, int ldc);

/* y[o, c, i] += bias[c] over outer × channels × inner, then max(y, 0) when relu. */
void tdm_backend_bias_forward (TdmBackend *b, float *y, const float *bias,
                               int outer, int channels, int inner, bool relu);
/* dbias[c] = Σ over outer and inner of dy[o, c, i]. */
void tdm_backend_bias_backward (TdmBackend *b, float *dbias, const float *dy,
                                int outer, int channels, int inner);
/* y = max(x, 0); in place allowed. */
void tdm_backend_relu_forward (TdmBackend *b, float *y, const float *x, size_t n);
/* dx = y > 0 ? dy : 0 where y is the ReLU's output; in place (dx == dy) allowed. */
void tdm_backend_relu_backward (TdmBackend *b, float *dx, const float *dy, const float *y,
                                size_t n);

/* Convolution by GEMM. x is n×h×w×c (NHWC); the output is n×oh×ow where
 * oh = (h + 2·pad − kh) / stride + 1 (floor), ow likewise. col has one row per
 * output pixel (n·oh·ow rows, image-major, then oy, then ox) and kh·kw·c columns
 * ordered (ky, kx, channel), the order of the conv weight's rows, so that
 * out = col · Wᵀ. Output pixel (oy, ox) reads input pixel (oy·stride − pad + ky,
 * ox·stride − pad + kx); outside the image reads as zero. */
void tdm_backend_im2col (TdmBackend *b, float *col, const float *x,
                         int n, int h, int w, int c, int kh, int kw, int pad, int stride);
/* dx = the sum of col's entries back onto the pixels they were read from (written,
 * not accumulated: pixels no window reads, possible with stride > kernel or with
 * the floor, get zero). The adjoint of im2col. */
void tdm_backend_col2im (TdmBackend *b, float *dx, const float *col,
                         int n, int h, int w, int c, int kh, int kw, int pad, int stride);

/* A whole convolution as one operation, for the shapes tdm_backend_conv_work_floats()
 * accepts for the backend's kind (elsewhere the caller composes it from im2col, gemm
 * and col2im; a shape the backend cannot take fails, naming it):
 * y (n×oh×ow×out_c) = the convolution of x (n×h×w×c) with wt [out_c, kernel,
 * kernel, c], no bias; work is the caller's scratch of that many floats, its
 * contents undefined between calls. */
void tdm_backend_conv_forward (TdmBackend *b, float *y, const float *x, const float *wt,
                               float *work, int n, int h, int w, int c, int out_c, int kernel,
                               int pad, int stride);
/* Its backward from dy: dw written, and dx written when not NULL (a first layer
 * needs none). */
void tdm_backend_conv_backward (TdmBackend *b, float *dx, float *dw, const float *dy,
                                const float *x, const float *wt, float *work, int n, int h,
                                int w, int c, int out_c, int kernel, int pad, int stride);

/* The convolution engine, where the backend has one (a GPU): a convolution with a
 * choice of ways to compute it per shape and direction (forward, input gradient,
 * weight gradient), measured once and remembered (on a GPU: cuDNN's engines, Tandem's
 * own kernels, im2col with a GEMM). Every way gives the same function within the run's
 * precision: float32 sums for bf16 operands (--precision bf16; an output may be
 * rounded to bf16 on the way), TF32 or float32 products otherwise. Each candidate's
 * scratch must fit in a->work_bytes, so memory stays the caller's rule; the choice,
 * made where the workspace holds every candidate, says what it needs (work_needed),
 * and the caller may size its workspace by that from then on. Returns FALSE,
 * having queued nothing, where the caller should compose the convolution itself
 * (im2col, gemm, col2im): the backend has no engine, no candidate of the engine's own
 * was chosen, or the shape is not one it takes. Forward writes a->y; backward writes
 * a->dw, and a->dx when not NULL. */
gboolean tdm_backend_conv_engine_forward (TdmBackend *b, const TdmConvArgs *a);
gboolean tdm_backend_conv_engine_backward (TdmBackend *b, const TdmConvArgs *a);
/* The engine's choices so far, counted by kind; all zero without an engine. */
void tdm_backend_conv_choices (TdmBackend *b, TdmConvChoices *counts);
/* Whether the backend has a convolution engine (a GPU: its workspace follows the
 * choices, tdm_replica_fit_workspace()). */
gboolean tdm_backend_has_conv_engine (TdmBackend *b);
/* The column workspace a replica settled on after its convolutions were chosen, kept
 * beside the engine's choices on disk for a GPU of the device's model (`plan` names
 * the replica's configuration: everything its convolutions' shapes depend on): recall
 * gives it back to the next run's memory estimate and allocation, TRUE with *bytes,
 * FALSE where none is remembered (a device without an engine, another GPU model or
 * library version, no cache, a damaged one). */
gboolean tdm_backend_conv_workspace_recall (TdmDeviceId device, const char *plan,
                                            guint64 *bytes);
void tdm_backend_conv_workspace_remember (TdmBackend *b, const char *plan, guint64 bytes);

/* Max pooling, window = stride = k, floor division: y is n×(h/k)×(w/k)×c.
 * argmax holds, per output, the index into x of the chosen input (the first
 * maximum, windows scanned row by row). When bias is not NULL, y += bias[channel]
 * after the max, then y = max(y, 0) when relu: the bias and ReLU of the conv layer
 * before the pool, which commute with the max (both are monotonic) and so cost a
 * quarter of the passes over the conv's output. */
void tdm_backend_maxpool_forward (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                  const float *bias, bool relu, int n, int h, int w, int c,
                                  int k);
/* maxpool_forward (no bias) of bn_forward's training output (mean, invstd, gamma,
 * beta as there, then max(·, 0) when relu), each value normalized from the bn's input
 * x as it is read: the same y and argmax (which indexes the bn's output, laid out as
 * x), and the normalized tensor is never written (a pool that is its only reader).
 * Only where tdm_backend_has_maxpool_forward_bn(); elsewhere it fails. */
void tdm_backend_maxpool_forward_bn (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                     const float *mean, const float *invstd, const float *gamma,
                                     const float *beta, bool relu, int n, int h, int w, int c,
                                     int k);
/* dx (n×h×w×c) = dy scattered through argmax, zero elsewhere. When y (the pool's
 * output) is not NULL, only where y > 0: the ReLU folded into maxpool_forward, whose
 * gradient is dy where the chosen input was positive, which is where y is. When
 * dbias is not NULL it receives the folded bias's gradient, dbias[ch] = the sum of
 * dx over every pixel of channel ch. */
void tdm_backend_maxpool_backward (TdmBackend *b, float *dx, float *dbias, const float *dy,
                                   const int32_t *argmax, const float *y, int n, int h, int w,
                                   int c, int k);
/* The same pools of a bf16 run's stored tensors, where tdm_backend_has_bf16_blocks()
 * (elsewhere they fail). maxpool_forward_bf16: y (bf16) and argmax are maxpool_forward's
 * (no bias) of the bf16 tensor v = x rounded once as to_bf16 rounds, x float32 or bf16
 * (widened exactly); with a bn (mean, invstd, gamma, beta, as bn_forward takes them, all
 * four or none), v = bn_forward_bf16's output (then max(·, 0) when relu), computed from
 * x as it is read: the pool of a training bn's output that is never written. The max
 * and argmax are taken over the rounded values (the first maximum among them), so the
 * bits are those of bn_forward_bf16 (or to_bf16) then the pool, and argmax indexes v,
 * laid out as x. maxpool_backward_bf16: maxpool_backward's dx (no bias, no ReLU mask)
 * with dy and dx each float32 or bf16, each value read widened and written rounded once
 * (a bf16 run's gradient for the bn before the pool). */
void tdm_backend_maxpool_forward_bf16 (TdmBackend *b, uint16_t *y, int32_t *argmax,
                                       const void *x, TdmDtype x_type, const float *mean,
                                       const float *invstd, const float *gamma,
                                       const float *beta, bool relu, int n, int h, int w, int c,
                                       int k);
void tdm_backend_maxpool_backward_bf16 (TdmBackend *b, void *dx, TdmDtype dx_type,
                                        const void *dy, TdmDtype dy_type, const int32_t *argmax,
                                        int n, int h, int w, int c, int k);

/* A network's first layer when it is a small convolution followed by a max pool:
 * the conv (stride 1, weights wt [out, kh, kw, c]), its bias, its ReLU when relu,
 * and the pool (window = stride = pk), in one pass. y and argmax are what
 * maxpool_forward with the bias and ReLU folded in would give from the conv's
 * output, n×oh×ow×out, and argmax indexes that output, which is never stored. For
 * kh·kw·c <= TDM_CONV_POOL_TAPS and out <= TDM_CONV_POOL_OUT: with so few taps,
 * im2col and a GEMM would move as many floats as they multiply. */
void tdm_backend_conv_pool_forward (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                                    const float *wt, const float *bias, bool relu, int n, int h,
                                    int w, int c, int out, int kh, int kw, int pad, int pk);
/* Its parameter gradients from dy, the gradient of y: dwt and dbias as the conv's
 * weight and bias gradients would be after maxpool_backward (with the ReLU mask
 * when relu). No input gradient: a first layer needs none. */
void tdm_backend_conv_pool_backward (TdmBackend *b, float *dwt, float *dbias, const float *dy,
                                     const int32_t *argmax, const float *y, const float *x,
                                     bool relu, int n, int h, int w, int c, int out, int kh,
                                     int kw, int pad, int pk);

/* Softmax cross-entropy over rows × classes logits with int32 labels, against the
 * label-smoothed target q = (1 − smoothing) · onehot + smoothing / classes (PyTorch's
 * CrossEntropyLoss(label_smoothing=…); smoothing 0 is the plain loss). Adds the
 * rows' loss sum −Σ q·log softmax and their correct count (arg-max, first maximum,
 * equals the label) into *metrics (device memory). When dlogits is not NULL it
 * receives (softmax − q) · grad_scale. */
void tdm_backend_softmax_xent (TdmBackend *b, const float *logits, const int32_t *labels,
                               int rows, int classes, float smoothing, float grad_scale,
                               float *dlogits, TdmMetrics *metrics);

/* x[i, :] = images[indices[i], :] · scale as float; y[i] = labels[indices[i]].
 * images is uint8, sample_size bytes a sample, already in HWC order. */
void tdm_backend_gather (TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                         const uint8_t *labels, const int32_t *indices, int count,
                         int sample_size, float scale);
/* gather with augmentation, for h×w×c samples: each sample is shifted (a random crop
 * of the image zero-padded by pad on every side) and then mirrored left-right as
 * flip says. Sample i, s = indices[i], draws from the counter RNG of
 * tdm-counter-rng.h, stream TDM_RNG_AUGMENT of key (seed), its epoch and s:
 *   sy = tdm_crng_u32 (key, epoch, s, 0) % (2·pad + 1) − pad,
 *   sx = tdm_crng_u32 (key, epoch, s, 1) % (2·pad + 1) − pad,
 *   mirrored = flip == ALWAYS || (flip == RANDOM && (tdm_crng_u32 (key, epoch, s, 2) & 1)),
 * and x[i, r, q, ch] = images[s, r + sy, q' + sx, ch] · scale with q' = w − 1 − q
 * when mirrored, else q; 0 where (r + sy, q' + sx) is outside the image. So the
 * numbers depend on (seed, epoch, sample index) alone, never on which replica or
 * shard position the sample has. key is tdm_crng_key (seed, TDM_RNG_AUGMENT). pad 0
 * and flip NEVER is gather. */
void tdm_backend_gather_augment (TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                                 const uint8_t *labels, const int32_t *indices, int count,
                                 int h, int w, int c, float scale, int pad, TdmFlip flip,
                                 uint64_t key, uint32_t epoch);
/* gather with photo augmentation for h×w×c samples (c ≤ 4), each from (key, epoch,
 * its sample index s = indices[i]) alone by tdm-augment.h's rule: tdm_photo_draw()
 * its crop box, mirror, jitter factors and erased box; tdm_photo_mean() of the sum of
 * tdm_aug_luma_milli() over the crop box's source pixels; then x[i, r, q, :] =
 * tdm_photo_pixel() for every output pixel, in [0, 1]; with augment->normalize, then
 * x · mul + add per channel (c channels), the bits of channel_affine on the result but
 * without its second pass over the batch. key is tdm_crng_key (seed, TDM_RNG_AUGMENT).
 * Only where tdm_backend_has_gather_photo(); elsewhere it fails. */
void tdm_backend_gather_photo (TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                               const uint8_t *labels, const int32_t *indices, int count,
                               int h, int w, int c, const TdmPhotoAugment *augment,
                               uint64_t key, uint32_t epoch);

/* Batch normalization over rows × channels (NHWC activations: rows = n·h·w; after
 * an fc, h = w = 1). Training mode's statistics take one pass over x and at most one
 * all-reduce (tdm-bn-moments.h says how, and why it stays exact):
 *   bn_moments (slots, x, …, slot, slot_count)  this replica's mean, M2 = Σ(x − mean)²
 *                                                and row count into slot `slot`
 *   (all-reduce the slots over replicas when synchronized; each replica its own slot)
 *   bn_stats (saved, slots, slot_count, …)       saved = [mean[C], invstd[C]]
 *   bn_forward (y, x, saved, saved + C, gamma, beta, …)
 * Sums are accumulated in double in a fixed order (results do not depend on thread
 * timing); outputs are float. The input x of every one of them (and of im2col_bf16_bn)
 * is of type x_type: float32, or bf16 where tdm_backend_has_bn_bf16_input() (a conv's
 * output a bf16 run stores as bf16 for the bn after it); a bf16 value is widened
 * exactly, so the results are those of the float32 op on the widened tensor. */
/* slots holds slot_count slots of TDM_BN_SLOT_FLOATS(channels) floats; slot `slot`
 * gets x's statistics, every other slot zeros. rows 0 writes an empty slot. */
void tdm_backend_bn_moments (TdmBackend *b, float *slots, const void *x, TdmDtype x_type,
                             int rows, int channels, int slot, int slot_count);
/* For each channel c, the slots merged in order (tdm_bnm_merge) into the count, mean
 * and M2 of every row; var = M2 / count (biased, used to normalize), saved[c] = mean,
 * saved[C + c] = 1 / sqrt(var + eps). When running_mean is not NULL the running
 * averages move as PyTorch's do:
 *   running_mean = (1 − momentum) · running_mean + momentum · mean,
 *   running_var  = (1 − momentum) · running_var + momentum · M2 / (count − 1)
 * (the unbiased variance; var itself when count is 1). Every slot empty: mean 0,
 * var 0. */
void tdm_backend_bn_stats (TdmBackend *b, float *saved, const float *slots, int slot_count,
                           int channels, float eps, float momentum, float *running_mean,
                           float *running_var);
/* bn_moments into one slot (slot 0 of 1, no all-reduce: a bn not synchronized over
 * replicas), then bn_stats of it: the same bits in saved, the slot and the running
 * averages, where a backend can in one pass (the CUDA backend's moments compute the
 * statistics as they finish). */
void tdm_backend_bn_moments_stats (TdmBackend *b, float *saved, float *slots, const void *x,
                                   TdmDtype x_type, int rows, int channels, float eps,
                                   float momentum, float *running_mean, float *running_var);
/* y[r, c] = (x[r, c] − mean[c]) · invstd[c] · gamma[c] + beta[c], then max(y, 0)
 * when relu. y != x (backward reads x). */
void tdm_backend_bn_forward (TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                             const float *mean, const float *invstd, const float *gamma,
                             const float *beta, int rows, int channels, bool relu);
/* bn_forward without its own ReLU, then y += a and max(y, 0) when relu: a residual
 * block's end whose last bn's output is never stored. The bits of bn_forward into y
 * then add_out (y, a, y, …, relu), which is what a backend without the one pass runs.
 * y != x; a may not overlap y. */
void tdm_backend_bn_forward_add (TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                                 const float *mean, const float *invstd, const float *gamma,
                                 const float *beta, const float *a, int rows, int channels,
                                 bool relu);
/* Evaluation mode: the same with mean = running_mean and invstd =
 * 1 / sqrt(running_var + eps). y != x. */
void tdm_backend_bn_forward_eval (TdmBackend *b, float *y, const void *x, TdmDtype x_type,
                                  const float *running_mean, const float *running_var,
                                  const float *gamma, const float *beta, float eps, int rows,
                                  int channels, bool relu);
/* Backward, step 1: dbeta[c] = Σ_r g[r, c], dgamma[c] = Σ_r g[r, c] · xhat[r, c]
 * with xhat = (x − mean) · invstd and g = dy, or with relu (the forward had a fused
 * ReLU) g = dy where the forward's output x · (invstd·γ) + (β − mean·invstd·γ),
 * computed as bn_forward computes it, is positive and 0 elsewhere: the ReLU's mask
 * from x, with no pass of its own. Written. These are this replica's parameter
 * gradients; when synchronized the caller all-reduces a copy of them for step 2. dy is
 * of type dy_type, as x of x_type (a conv's input gradient written as bf16: its
 * values widened exactly, the sums still float32 and double). */
void tdm_backend_bn_backward_sums (TdmBackend *b, float *dgamma, float *dbeta, const void *dy,
                                   TdmDtype dy_type, const void *x, TdmDtype x_type,
                                   const float *mean, const float *invstd, const float *gamma,
                                   const float *beta, bool relu, int rows, int channels);
/* Step 2: dx = gamma · invstd · (g − sum_dbeta · inv_count − xhat · sum_dgamma ·
 * inv_count), g as in step 1, with the sums over every row of the batch (all
 * replicas when synchronized) and inv_count = 1 / that row count. dx == dy allowed. */
void tdm_backend_bn_backward_dx (TdmBackend *b, float *dx, const void *dy, TdmDtype dy_type,
                                 const void *x, TdmDtype x_type, const float *mean,
                                 const float *invstd, const float *gamma, const float *beta,
                                 bool relu, const float *sum_dgamma, const float *sum_dbeta,
                                 float inv_count, int rows, int channels);
/* The same dx rounded to bfloat16 as to_bf16 rounds, the same bits as bn_backward_dx
 * then to_bf16, in one pass: the output gradient of a convolution whose products
 * read it as bf16 (--precision bf16), never written as float32. dx == dy allowed where
 * dy is bf16. Only where tdm_backend_has_bn_backward_dx_bf16(); elsewhere it fails. */
void tdm_backend_bn_backward_dx_bf16 (TdmBackend *b, uint16_t *dx, const void *dy,
                                      TdmDtype dy_type, const void *x, TdmDtype x_type,
                                      const float *mean, const float *invstd, const float *gamma,
                                      const float *beta, bool relu, const float *sum_dgamma,
                                      const float *sum_dbeta, float inv_count, int rows,
                                      int channels);

/* Average pooling, window = stride = k, floor division: y is n×(h/k)×(w/k)×c, each
 * output the mean of its k·k inputs. */
void tdm_backend_avgpool_forward (TdmBackend *b, float *y, const float *x, int n, int h, int w,
                                  int c, int k);
/* dx[pixel] = dy[its window] / (k·k); pixels in no window (the floor's remainder)
 * get zero. Written. */
void tdm_backend_avgpool_backward (TdmBackend *b, float *dx, const float *dy, int n, int h,
                                   int w, int c, int k);
/* Pooling with any window, stride and padding (TdmPool2d), PyTorch's MaxPool2d and
 * AvgPool2d (floor mode). Max: padding counts as −∞; argmax holds, per output, where
 * the first maximum lies, windows scanned row by row, each element
 * tdm_pool2d_argmax_size(k) bytes (uint8: the position ky·k + kx within its window; or,
 * for windows of more than TDM_POOL2D_BYTE_WINDOW positions, int32: iy·w + ix). Its
 * backward gathers: dx at each input is the sum, over the outputs whose window covers it
 * (rows then columns in order), of dy where argmax chose it; written (dy and
 * dx each float32, or bf16 where the backend takes it: each value read widened, each
 * sum rounded once; a bf16 run's block gradient in, tdm-replica-private.h's
 * block_grad_bf16(), and the stem bn's gradient out).
 * Average: padding counts as zeros and every window divides by k·k (PyTorch's
 * count_include_pad=True, its default); backward dx = Σ dy / (k·k) over the covering
 * outputs, written. maxpool2d_forward reads x and writes y each as float32 or bf16
 * (y_type, x_type; bf16 where the backend takes it): the maximum of the widened values,
 * rounded once where y is bf16 (a bf16 x's maximum is one of its values, exact). */
void tdm_backend_maxpool2d_forward (TdmBackend *b, void *y, TdmDtype y_type, void *argmax,
                                    const void *x, TdmDtype x_type, TdmPool2d g);
void tdm_backend_maxpool2d_backward (TdmBackend *b, void *dx, TdmDtype dx_type,
                                     const void *dy, TdmDtype dy_type, const void *argmax,
                                     TdmPool2d g);
/* maxpool2d_forward of v, a training bn's output computed from x (float32 or bf16) as it
 * is read, where tdm_backend_has_bf16_blocks() (elsewhere it fails): v = bn_forward_bf16's
 * output (mean, invstd, gamma, beta as bn_forward takes them, all four or none: then v is
 * x; then max(·, 0) when relu), each value rounded to bf16 before the max, which takes the first maximum of the
 * rounded values; y (float32 or bf16) holds it exactly, argmax as maxpool2d_forward's.
 * The bits of bn_forward_bf16 then maxpool2d_forward, with no bn output written (the
 * stem of torchvision's ResNets: its bn, then a 3×3 pool of stride 2). */
void tdm_backend_maxpool2d_forward_bn (TdmBackend *b, void *y, TdmDtype y_type,
                                       void *argmax, const void *x, TdmDtype x_type,
                                       const float *mean, const float *invstd,
                                       const float *gamma, const float *beta, bool relu,
                                       TdmPool2d g);
void tdm_backend_avgpool2d_forward (TdmBackend *b, float *y, const float *x, TdmPool2d g);
void tdm_backend_avgpool2d_backward (TdmBackend *b, float *dx, const float *dy, TdmPool2d g);
/* Per-channel input normalization after a gather: x[r, ch] = x[r, ch] · a.mul[ch] +
 * a.add[ch] over rows × a.channels (NHWC pixels), at most TDM_AFFINE_MAX_CHANNELS. */
void tdm_backend_channel_affine (TdmBackend *b, float *x, size_t rows, TdmChannelAffine a);

/* Global pooling over the pixels of each sample: x is n×pixels×c, y is n×c.
 * Average: y[i, c] = mean over pixels. Backward: dx[i, p, c] = dy[i, c] / pixels. */
void tdm_backend_global_avgpool_forward (TdmBackend *b, float *y, const float *x, int n,
                                         int pixels, int c);
void tdm_backend_global_avgpool_backward (TdmBackend *b, float *dx, const float *dy, int n,
                                          int pixels, int c);
/* Max: y[i, c] = max over pixels, argmax[i, c] = the flat index into x of the first
 * maximum (pixels in order). Backward: dx = dy scattered through argmax, zero
 * elsewhere. */
void tdm_backend_global_maxpool_forward (TdmBackend *b, float *y, int32_t *argmax,
                                         const float *x, int n, int pixels, int c);
void tdm_backend_global_maxpool_backward (TdmBackend *b, float *dx, const float *dy,
                                          const int32_t *argmax, int n, int pixels, int c);

/* Inverted dropout over n samples of per_sample floats. Element e of sample i (its
 * dataset index s = indices[i], device memory) is kept when
 * tdm_crng_uniform (key, epoch, s, e) >= p, and then scaled by 1 / (1 − p); dropped
 * elements are 0. key is tdm_crng_key (seed, TDM_RNG_DROPOUT + layer): masks depend
 * on (seed, layer, epoch, sample index, element) only, so any split into replicas
 * draws the same mask, and backward draws it again instead of storing it. y == x
 * allowed. 0 <= p < 1. */
void tdm_backend_dropout_forward (TdmBackend *b, float *y, const float *x,
                                  const int32_t *indices, int n, int per_sample, float p,
                                  uint64_t key, uint32_t epoch);
/* dx = dy masked and scaled by the same mask. dx == dy allowed. */
void tdm_backend_dropout_backward (TdmBackend *b, float *dx, const float *dy,
                                   const int32_t *indices, int n, int per_sample, float p,
                                   uint64_t key, uint32_t epoch);

/* Optimizers over the flat parameter buffer; g += weight_decay · p first. rates: NULL,
 * or two floats of device memory that stand for lr (Adam's lr_t) and momentum (Adam's
 * beta1) when the operation runs, not when it is issued: a step captured in a graph
 * updates with the values the host wrote there before its launch, the same bits as
 * passing them. */
void tdm_backend_sgd_update (TdmBackend *b, float *p, const float *g, size_t n,
                             float lr, float weight_decay, const float *rates);
void tdm_backend_momentum_update (TdmBackend *b, float *p, const float *g, float *velocity,
                                  size_t n, float lr, float momentum, float weight_decay,
                                  const float *rates);
/* PyTorch's SGD with momentum (torch.optim.SGD, dampening 0):
 *   d = g + weight_decay · mask · p      (mask[i] ∈ {0, 1}; NULL = decay everything)
 *   v = momentum · v + d
 *   p −= lr · (nesterov ? d + momentum · v : v)
 * The mask is one byte a parameter (tdm_network_decay_mask()): weight decay skips
 * biases and BN parameters. v starts at zero (PyTorch's first step sets v = d, the
 * same thing). */
void tdm_backend_sgd_momentum_update (TdmBackend *b, float *p, const float *g, float *velocity,
                                      const uint8_t *decay_mask, size_t n, float lr,
                                      float momentum, float weight_decay, bool nesterov,
                                      const float *rates);
/* g += weight_decay · mask · p, for the other optimizers when decay skips some
 * parameters (they then run with weight_decay 0). */
void tdm_backend_weight_decay (TdmBackend *b, float *g, const float *p,
                               const uint8_t *decay_mask, size_t n, float weight_decay);
/* Chainer's Adam: m, v moments; p −= lr_t · m / (sqrt(v) + eps), with lr_t the
 * bias-corrected step alpha · sqrt(1 − beta2ᵗ) / (1 − beta1ᵗ) computed by the caller. */
void tdm_backend_adam_update (TdmBackend *b, float *p, const float *g, float *m, float *v,
                              size_t n, float lr_t, float beta1, float beta2, float eps,
                              float weight_decay, const float *rates);
/* Gradient clipping: the global norm of x[0, n), ‖x‖₂, its sum of squares taken in
 * double in an order fixed by n alone (the same bits whatever the threads' timing),
 * into work[0]; where max_norm > 0 and the norm is above it, x *= max_norm / (norm +
 * 1e-6) (PyTorch's clip_grad_norm_). work is device memory of TDM_CLIP_WORK_DOUBLES
 * doubles (scratch for partial sums after work[0]). Nothing is read back: the norm
 * stays on the device until someone downloads work[0]. */
void tdm_backend_clip_norm (TdmBackend *b, float *x, size_t n, float max_norm, double *work);

/* How far x lies from ref, both n values of type `type` (float32, or bf16 as its bits):
 * work[0] = Σ (x[i] − ref[i])² and work[1] = Σ ref[i]², each value widened to double
 * exactly, each sum taken in double in an order fixed by n alone (the same bits every
 * time on a backend), so that ‖x − ref‖₂ / ‖ref‖₂ = sqrt(work[0] / work[1]); a NaN in x
 * makes work[0] NaN. work is device memory of TDM_DEVIATION_WORK_DOUBLES doubles
 * (scratch for partial sums after the two). Nothing is read back: the sums stay on the
 * device until someone downloads work[0] and work[1] (the convolution engine's screen
 * of its candidates against a reference result). */
void tdm_backend_deviation (TdmBackend *b, double *work, const void *x, const void *ref,
                            TdmDtype type, size_t n);

/* --precision bf16's stored operands: bfloat16 numbers as their bits (uint16_t),
 * rounded to nearest even from float (tdm-bf16.h's rule, the GPU's). to_bf16: out[i] =
 * in[i] as bfloat16. im2col_bf16: im2col's columns of x (float32, each value rounded;
 * or bf16, tdm_backend_has_bn_bf16_input(), each value copied). gemm_bf16: gemm's C = alpha · op(A) · op(B) + beta · C with A and B in
 * bfloat16, products accumulated in float32, C float32. A convolution whose
 * columns are bf16 reads half the bytes in its forward and weight-gradient GEMMs,
 * which on a GPU wait on memory, not arithmetic. */
void tdm_backend_to_bf16 (TdmBackend *b, uint16_t *out, const float *in, size_t n);
void tdm_backend_im2col_bf16 (TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type,
                              int n, int h, int w, int c, int kh, int kw, int pad, int stride);
/* im2col_bf16 of bn_forward's output (training mode: mean, invstd, gamma, beta as
 * there, then max(·, 0) when relu), computed from the bn's input x as it is gathered:
 * the same bits as bn_forward then im2col_bf16, and the normalized tensor is never
 * written (a convolution that is its only reader). Only where
 * tdm_backend_has_im2col_bf16_bn(); elsewhere it fails. */
void tdm_backend_im2col_bf16_bn (TdmBackend *b, uint16_t *col, const void *x, TdmDtype x_type,
                                 const float *mean, const float *invstd, const float *gamma,
                                 const float *beta, bool relu, int n, int h, int w, int c,
                                 int kh, int kw, int pad, int stride);
void tdm_backend_gemm_bf16 (TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                            float alpha, const uint16_t *a, int lda, const uint16_t *bm,
                            int ldb, float beta, float *c, int ldc);
/* C = op(A) · op(B) rounded to bfloat16 (accumulated in float32), and col2im from
 * such columns (summed in float32): a convolution's input gradient through bf16
 * columns, half the bytes written and read. */
void tdm_backend_gemm_bf16_out (TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                                const uint16_t *a, int lda, const uint16_t *bm, int ldb,
                                uint16_t *c, int ldc);
void tdm_backend_col2im_bf16 (TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *col,
                              int n, int h, int w, int c, int kh, int kw, int pad, int stride);
/* The same input gradient in one operation: dx = col2im(dy · W) for dy (rows × out_c)
 * and W (out_c × kh·kw·c) in bfloat16, dx of n × h × w × c of type dx_type (col2im_bf16's
 * too): float32, or bf16 (a gradient a bn backward reads so), each float32 sum rounded
 * once as to_bf16 rounds. A backend that can
 * computes it without columns; else it goes through col (rows × kh·kw·c bf16, the
 * caller's scratch) as gemm_bf16_out and col2im_bf16 do, with their bits. */
void tdm_backend_conv_dgrad_bf16 (TdmBackend *b, void *dx, TdmDtype dx_type, const uint16_t *dy,
                                  const uint16_t *w, uint16_t *col, int n, int h, int w_, int c,
                                  int out_c, int kh, int kw, int pad, int stride);

/* y += x; y *= alpha. For communicators. */
void tdm_backend_add (TdmBackend *b, float *y, const float *x, size_t n);
void tdm_backend_scale (TdmBackend *b, float *y, float alpha, size_t n);
/* Exact mode's sums on the device, where tdm_backend_has_exact_add() (elsewhere it
 * fails): acc[2i], acc[2i + 1] (int64, device memory) += the fixed-point limbs of x[i]
 * by tdm-exact-fixed.h's rule; *bad (int64, device) += the count of values it cannot
 * hold. Without it the trainer adds on the host (tdm_exact_add(), the same bits). */
void tdm_backend_exact_add (TdmBackend *b, int64_t *acc, const float *x, size_t n,
                            int64_t *bad);
/* y = a + x, then max(y, 0) when relu (NaN passes, as relu_forward): a residual
 * block's end in one pass instead of a copy, add and relu_forward, with their bits
 * (which is what it issues on a backend without the one pass). y may be a or x. */
void tdm_backend_add_out (TdmBackend *b, float *y, const float *a, const float *x, size_t n,
                          bool relu);

/* A residual block's input and output stored as bf16 (a bf16 run's blocks), where
 * tdm_backend_has_bf16_blocks(); elsewhere they fail. Each value written is the float32
 * result rounded once as to_bf16 rounds; each bf16 value read is widened exactly.
 * from_bf16: out[i] = in[i] as float. relu_backward_bf16: relu_backward with the ReLU's
 * mask as bits (tdm-relu-bits.h: bit e of `mask` set where the ReLU's bf16 output is
 * > 0, as add_out_bf16 and bn_forward_bf16 write them), the gradients dy and dx each
 * float32 or bf16 (dx may be dy where their types agree). add_out_bf16: add_out's
 * y = a + x (then max(·, 0) when relu) rounded into y, x float32 or bf16 (y may be x
 * where x is bf16); with bits (not NULL), y's mask too, TDM_RELU_BITS_WORDS(n) words
 * (the word's bits past n undefined). add_strided_bf16: y = a + x (n × h × w × c, NHWC) at the pixels a
 * 1×1 convolution of this stride and no padding reads, a + 0 elsewhere, rounded; x
 * compact, n × ((h − 1) / stride + 1) × ((w − 1) / stride + 1) × c: a residual block's
 * input gradient, its first layer's one (a, float32 or bf16: a_type) and its
 * projection's summed in float32 and rounded once; y is bf16, or float32 (y_type; y
 * may be a where their types agree: the sum in place, a float32 one to be rounded
 * later by to_bf16 with the same bits). add_relu_backward_bf16: a residual block's
 * start in backward, its two shares summed and the ReLU of the layer before it
 * applied in one pass: dx = mask bit set ? a + x : 0, the sum in float32 rounded once, a and
 * x each float32 or bf16, mask the ReLU's bits, or NULL for no ReLU (then
 * add_out_bf16's sum with a of either type); the bits of add_out_bf16 then
 * relu_backward_bf16 (masking commutes with rounding: the rounded sum where the bit is set, the
 * rounded 0 elsewhere); dx may be a or x where that one is bf16.
 * bn_forward_bf16: bn_forward's training output rounded into y, the bits of bn_forward
 * then to_bf16; when a is not NULL (float32 or bf16), bn_forward_add's y instead
 * (bn_forward without its own ReLU, + a, then max(·, 0) when relu), rounded; with bits
 * (not NULL), y's mask too, as add_out_bf16 writes it. */
void tdm_backend_from_bf16 (TdmBackend *b, float *out, const uint16_t *in, size_t n);
void tdm_backend_relu_backward_bf16 (TdmBackend *b, void *dx, TdmDtype dx_type,
                                     const void *dy, TdmDtype dy_type, const uint32_t *mask,
                                     size_t n);
void tdm_backend_add_strided_bf16 (TdmBackend *b, void *y, TdmDtype y_type, const void *a,
                                   TdmDtype a_type, const float *x, int n, int h, int w, int c,
                                   int stride);
void tdm_backend_add_relu_backward_bf16 (TdmBackend *b, uint16_t *dx, const void *a,
                                         TdmDtype a_type, const void *x, TdmDtype x_type,
                                         const uint32_t *mask, size_t n);
/* A block's start in backward followed by the sums of the bn below it, in one pass: dx
 * = mask bit set ? a + share : 0 rounded once to bf16 (TdmBlockStart: the share the
 * skip's, the projection's where its conv reads the pixel and + 0 elsewhere, or none):
 * the bits of add_relu_backward_bf16, or of add_strided_bf16 in place in a's type
 * then relu_backward_bf16, to_bf16 or a copy (a sum then masked, the same bits, since
 * masking commutes with rounding and rounding a bf16 value gives it back), or with no
 * share relu_backward_bf16, to_bf16 or a copy of a; then dgamma and dbeta as
 * bn_backward_sums(dgamma, dbeta, dx, bf16, x, x_type, mean, invstd, gamma, beta, relu,
 * rows, channels) writes them, the same bits: each backend adds the rows in the order
 * of its own sums (the CUDA kernel is the sums kernel, its dy made as it loads). n =
 * rows · channels; dx may be a or skip where that one is bf16, but no byte of the
 * strided share (a thread's dx would overwrite another's share before it is read). The
 * synchronized-BN step after it is unchanged. Only where tdm_backend_has_start_bn_sums(). */
void tdm_backend_add_relu_backward_bn_sums_bf16 (TdmBackend *b, uint16_t *dx,
                                                 const TdmBlockStart *in, const void *x,
                                                 TdmDtype x_type, const float *mean,
                                                 const float *invstd, const float *gamma,
                                                 const float *beta, bool relu, int rows,
                                                 int channels, float *dgamma, float *dbeta);
gboolean tdm_backend_has_start_bn_sums (TdmBackend *b);
void tdm_backend_add_out_bf16 (TdmBackend *b, uint16_t *y, const float *a, const void *x,
                               TdmDtype x_type, size_t n, bool relu, uint32_t *bits);
void tdm_backend_bn_forward_bf16 (TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                                  const float *mean, const float *invstd, const float *gamma,
                                  const float *beta, const void *a, TdmDtype a_type, int rows,
                                  int channels, bool relu, uint32_t *bits);
/* bn_forward_eval's output rounded into y as bf16, the bits of bn_forward_eval then
 * to_bf16, in one pass (a bf16 run's evaluation, its outputs stored as bf16 where the
 * next layer reads them so). */
/* bn_forward's training output with its own ReLU, then + a (float32 or bf16), rounded
 * into y as bf16: the bits of bn_forward (relu) then add_out (no ReLU) then to_bf16, in
 * one pass. A residual block whose body ends with bn, relu (the resnet preset's) and
 * whose end adds it into a bf16 output: the bn's output is never stored. */
void tdm_backend_bn_relu_add_bf16 (TdmBackend *b, uint16_t *y, const void *x, TdmDtype x_type,
                                   const float *mean, const float *invstd, const float *gamma,
                                   const float *beta, const void *a, TdmDtype a_type, int rows,
                                   int channels);
void tdm_backend_bn_forward_eval_bf16 (TdmBackend *b, uint16_t *y, const void *x,
                                       TdmDtype x_type, const float *running_mean,
                                       const float *running_var, const float *gamma,
                                       const float *beta, float eps, int rows, int channels,
                                       bool relu);

/* The network's first conv (the stem: an image in, no bias and no ReLU of its own) and
 * the training bn after it, in a bf16 run's backward where the stem's output is not kept
 * (the replica computes it again: tdm-replica-private.h's stem_output_recomputed()), in
 * two passes that make that output again as they go, in place of four steps: the stem's
 * forward again, bn_backward_sums over it, bn_backward_dx_bf16 over it and the conv's
 * weight gradient from that bf16 gradient. Their operands: */
typedef struct {
  TdmConvShape shape;         /* the stem's: n × h × w × c in, out_c out, no groups */
  const void *x;              /* the image, n × h × w × c (NHWC), of type x_type */
  TdmDtype x_type;
  const float *w;             /* the stem's weights [out_c, kernel, kernel, c], float32 */
  const uint16_t *w16;        /* the same rounded to bf16 (the replica's params16), as a
                               * bf16 forward of the stem reads them */
  const float *mean, *invstd; /* the bn's saved statistics (out_c each, its forward's) */
  const float *gamma, *beta;  /* its parameters */
  bool relu;                  /* the bn has a ReLU of its own */
  const uint16_t *dy;         /* the bn's output gradient, bf16, n × oh × ow × out_c */
  /* Room for n × oh × ow × out_c bf16 values, free during the call, its contents
   * undefined after it (the replica's gradient region's start, where the forward wrote
   * the stem's output): a backend may make the stem's output there and the bn's input
   * gradient over it, as the four steps do (the CPU); one that keeps them on chip leaves
   * it alone. Overlaps none of the other operands. */
  uint16_t *spare;
  void *work;                 /* the backend's scratch, tdm_backend_stem_bn_takes()'s
                               * bytes at least, its contents undefined between calls */
  size_t work_bytes;
} TdmStemBn;

/* Whether a's buffers start where any backend's passes may read them with vector loads:
 * dy and spare at a multiple of 16 bytes, work of 32 (whole allocations always are; a
 * piece of one may not be). The passes fail where they do not: the caller asks first
 * and runs the four steps instead. */
gboolean tdm_backend_stem_bn_aligned (const TdmStemBn *a);

/* Whether this backend runs the two passes below for a stem of shape s reading an image
 * of type x_type in a run of its precision (a bf16 run, the stem's output as bf16 for
 * the bn), and the bytes of scratch they need (*work_bytes where not NULL: the most of
 * the two; 0 for none). FALSE where the backend lacks them: the caller runs the four
 * steps. A backend may answer by what its own forward of the stem last ran (the passes
 * make the output as that forward made it). */
gboolean tdm_backend_stem_bn_takes (TdmBackend *b, const TdmConvShape *s, TdmDtype x_type,
                                    size_t *work_bytes);
/* Pass 1: the stem's output y made again from a->x as this backend's forward of the stem
 * writes it as bf16 in this run (the same bits: the CPU's float32 columns of x and w, the
 * float32 sum rounded once; a GPU's own kernel on x and w16), then dgamma and dbeta as
 * bn_backward_sums(dgamma, dbeta, a->dy, bf16, y, bf16, mean, invstd, gamma, beta,
 * relu, rows, out_c) writes them (rows = n · oh · ow; the ReLU's mask from y; the CPU's
 * bits; a GPU's in its own fixed order, a function of the shape alone). These are this
 * replica's parameter gradients; when synchronized, the caller all-reduces a copy for
 * pass 2, as between bn_backward_sums and bn_backward_dx. Only where
 * tdm_backend_stem_bn_takes() says so; elsewhere it fails. */
void tdm_backend_stem_bn_sums (TdmBackend *b, const TdmStemBn *a, float *dgamma,
                               float *dbeta);
/* Pass 2: y again as in pass 1, the bn's input gradient dx16 from it as
 * bn_backward_dx_bf16(dx16, a->dy, bf16, y, bf16, mean, invstd, gamma, beta, relu,
 * sum_dgamma, sum_dbeta, inv_count, rows, out_c) writes each value (the same bits), and
 * from dx16 the stem's weight gradient dw (out_c × kernel × kernel × c, float32,
 * written) as this backend's backward of the stem computes it from a bf16 output
 * gradient with no input gradient (the CPU's bits: float32 columns of x against dx16
 * widened; a GPU's within its weight gradient's own bound). Neither y nor dx16 need be
 * stored (a->spare may hold them). Only where tdm_backend_stem_bn_takes(); elsewhere it
 * fails. */
void tdm_backend_stem_bn_dx_wgrad (TdmBackend *b, const TdmStemBn *a, const float *sum_dgamma,
                                   const float *sum_dbeta, float inv_count, float *dw);

/* Where tdm_backend_has_graphs() (a GPU): record the operations issued between begin
 * and end into a graph that launch replays; key tells graphs of different shapes
 * apart. Elsewhere begin and launch return FALSE and end does nothing. */
gboolean tdm_backend_graph_begin (TdmBackend *b, int key);
void tdm_backend_graph_end (TdmBackend *b, int key);
gboolean tdm_backend_graph_launch (TdmBackend *b, int key);


/* Which of the operations above that not every backend has this one has. */
gboolean tdm_backend_has_maxpool_forward_bn (TdmBackend *b);
gboolean tdm_backend_has_im2col_bf16_bn (TdmBackend *b);
gboolean tdm_backend_has_bn_backward_dx_bf16 (TdmBackend *b);
gboolean tdm_backend_has_bn_bf16_input (TdmBackend *b);
/* The same as the last, for backends of a kind, without one at hand: the replica's
 * plan stores a conv's output as bf16 only where its kind reads it so
 * (tdm_replica_layer_buffers()); elsewhere every activation stays float32. */
gboolean tdm_backend_kind_has_bn_bf16_input (TdmBackendKind kind);
/* Whether the backend has the operations of bf16 blocks above, the bf16 max pools
 * among them (and reads bf16 inputs); by kind, for the plan, without one at hand. */
gboolean tdm_backend_has_bf16_blocks (TdmBackend *b);
gboolean tdm_backend_kind_has_bf16_blocks (TdmBackendKind kind);
gboolean tdm_backend_has_exact_add (TdmBackend *b);
gboolean tdm_backend_has_gather_photo (TdmBackend *b);
gboolean tdm_backend_has_graphs (TdmBackend *b);

G_END_DECLS
