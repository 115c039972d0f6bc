/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-candidates.c — the convolution engine's candidates and how each runs inside
 * the caller's workspace (tdm-backend-cuda-conv-engine.h lists them), and what each needs of it.
 * Not the choice among them (tdm-backend-cuda-conv-engine.c).
 *
 * The workspace is laid out the same way whatever its size, so a choice made in the
 * pre-warm's large workspace runs alike in the one sized after it (the largest need of
 * the chosen candidates). In a bf16 run it starts with the backward's dy as bf16 (where
 * the bn before the conv may have written it already: the replica's layout too), then
 * room for bf16 weights (used when the caller's are not aligned), then a candidate's
 * own scratch: bf16 columns, bf16 copies of x, staged outputs, cuDNN's workspace. The
 * directions run one after the other on one stream, so they reuse the same bytes. A
 * candidate's need is measured per call (its staging depends on where the caller's
 * buffers lie), and the caller keeps the most it has seen.
 */
#include "tdm-backend-cuda-conv-chunks.h"
#include "tdm-backend-cuda-conv-engine.h"
#include "tdm-backend-cuda-conv-fused.h"
#include "tdm-backend-cuda-conv-name.h"
#include "tdm-backend-cuda-conv-phases.h"
#include "tdm-backend-cuda-conv-small.h"
#include "tdm-conv-columns.h"
#include "tdm-i18n.h"

#include <math.h>

static size_t
up(size_t v, size_t to)
{
  return (v + to - 1) / to * to;
}

static gboolean
one_by_one(const TdmConvShape *s)
{
  return s->kernel == 1 && s->stride == 1 && s->pad == 0;
}

gboolean
tdm_conv_layout(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir, TdmConvLayout *l)
{
  const TdmConvShape *s = &a->shape;
  memset(l, 0, sizeof *l);
  l->a = a;
  l->dir = dir;
  if (s->n <= 0 || s->h <= 0 || s->w <= 0 || s->c <= 0 || s->out_c <= 0 || s->kernel <= 0 ||
      s->stride <= 0 || s->pad < 0 || a->work == NULL || !tdm_conv_aligned16(a->work))
    return FALSE;
  int oh = tdm_conv_out_h(s), ow = tdm_conv_out_w(s);
  if (oh <= 0 || ow <= 0)
    return FALSE;
  l->rows = (size_t)s->n * oh * ow;
  l->k = (size_t)s->kernel * s->kernel * s->c;
  l->bf16 = b->precision == TDM_PRECISION_BF16;
  char *work = a->work;
  size_t rows = l->rows, k = l->k, out_c = (size_t)s->out_c;
  gboolean backward = dir != TDM_CONV_FORWARD;
  if (!l->bf16) {
    l->replica_im2col = TRUE;
    l->scratch = work;
    return TRUE;
  }
  /* The replica composes a bf16 conv through bf16 columns on these conditions
   * (tdm-replica-conv.c's tdm_replica_conv_bf16, _bf16_dx), and through float32 ones
   * elsewhere; the engine's "im2col" always has bf16 columns. */
  l->replica_im2col = !one_by_one(s) && out_c <= k && out_c <= rows &&
                      (dir != TDM_CONV_DGRAD || rows * out_c + out_c * k <= rows * k);
  /* The caller's dy16 is where the layout puts it (the workspace's start), or outside
   * the workspace (the bn before wrote it in place in the gradient region: nothing is
   * reserved for it then), or nowhere. */
  if (a->dy16 != NULL && (!backward || !tdm_conv_aligned16(a->dy16)))
    return FALSE;
  gboolean dy16_outside = a->dy16 != NULL && a->dy16 != (const uint16_t *)work;
  size_t w16_at = up(backward && !dy16_outside ? rows * out_c * 2 : 0, 16);
  l->dy16 = !backward ? NULL : dy16_outside ? (uint16_t *)a->dy16 : (uint16_t *)work;
  l->w16 = a->w16 != NULL && tdm_conv_aligned16(a->w16) ? a->w16
                                                         : (const uint16_t *)(work + w16_at);
  l->scratch = work + up(w16_at + out_c * k * 2, TDM_CONV_ALIGN);
  return TRUE;
}

/* Whether the workspace holds the layout's reservations (dy16, the weights' room). */
static gboolean
reservations_fit(const TdmConvLayout *l)
{
  return (size_t)(l->scratch - (char *)l->a->work) <= l->a->work_bytes;
}

void
tdm_conv_prepare(TdmBackend *b, const TdmConvLayout *l)
{
  const TdmConvArgs *a = l->a;
  if (!l->bf16 || !reservations_fit(l))
    return;
  if (l->w16 != a->w16)
    tdm_cuda_to_bf16(b, (uint16_t *)l->w16, a->w, (size_t)a->shape.out_c * l->k);
  if (l->dir != TDM_CONV_FORWARD && a->dy16 == NULL)
    tdm_cuda_to_bf16(b, l->dy16, a->dy, l->rows * a->shape.out_c);
}

/* How a candidate is called: run (in a workspace that holds its need); or measured,
 * its need in bytes whatever the workspace holds (whether it takes the call at all). */
typedef enum {
  RUN,
  MEASURE,
} Mode;

/* Scratch for one call, from the layout's scratch on: `at` the next free byte. */
typedef struct {
  char *at, *end;
  Mode mode;
  gboolean refused; /* run: cuDNN refused a plan as it ran (tdm_cudnn_refusal()) */
} Arena;

static Arena
arena_of(const TdmConvLayout *l, Mode mode)
{
  Arena arena = {l->scratch, (char *)l->a->work + l->a->work_bytes, mode, FALSE};
  return arena;
}

static void *
take(Arena *arena, size_t bytes)
{
  char *start = (char *)up((uintptr_t)arena->at, TDM_CONV_ALIGN);
  if (arena->mode != MEASURE && (start > arena->end || bytes > (size_t)(arena->end - start)))
    return NULL;
  arena->at = start + bytes;
  return start;
}

/* The caller's p itself when 16-byte aligned, else a copy of its `bytes` in the arena
 * (when `copy_in`, the contents too); NULL when the arena is too small. */
static void *
aligned_or_stage(TdmBackend *b, Arena *arena, const void *p, size_t bytes, gboolean copy_in)
{
  if (tdm_conv_aligned16(p))
    return (void *)p;
  void *stage = take(arena, bytes);
  if (stage != NULL && copy_in && arena->mode == RUN)
    tdm_backend_copy(b, stage, p, bytes);
  return stage;
}

/* Whether the input is already what a bf16 convolution reads: stored as bf16, not
 * normalized on the way. */
static gboolean
input_is_bf16(const TdmConvArgs *a)
{
  return a->bn_mean == NULL && a->x_type == TDM_DTYPE_BF16;
}

/* Where the input gradient goes (dx16 as bf16, else dx), and its type. */
static void *
dx_target(const TdmConvArgs *a)
{
  return a->dx16 != NULL ? (void *)a->dx16 : (void *)a->dx;
}

static TdmDtype
dx_type(const TdmConvArgs *a)
{
  return a->dx16 != NULL ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
}

/* Which chunk of `count` a call runs i-th: a forward's last first where the backend walks
 * downwards (TANDEM_DESCENDING), so that its first reads find in L2 the end of the input
 * that the pass before (the bn's moments, the conv that wrote it) left there, an upward
 * walk's evicting it before getting there. A forward's samples are independent and each
 * chunk keeps its samples, its size and so its plan: the same bits in either order. A
 * weight gradient's chunk sums are added in the chunks' order and keep it; an input
 * gradient reads the output gradient the bn's input-gradient pass just wrote
 * downwards, whose start is what L2 holds. */
static int
chunk_in_order(TdmBackend *b, const TdmConvLayout *l, int count, int i)
{
  return l->dir == TDM_CONV_FORWARD && CUDA_B(b)->descending ? count - 1 - i : i;
}

/* The bf16 columns of samples [first, first + m) of the call's input (normalized as they
 * are gathered where a bn left its output to the conv). */
static void
columns16(TdmBackend *b, const TdmConvArgs *a, uint16_t *col16, int first, int m)
{
  const TdmConvShape *s = &a->shape;
  const void *x = tdm_conv_advanced(a->x, a->x_type, (size_t)first * s->h * s->w * s->c);
  if (a->bn_mean != NULL)
    tdm_cuda_im2col_bf16_bn(b, col16, x, a->x_type, a->bn_mean, a->bn_invstd, a->bn_gamma,
                            a->bn_beta, a->bn_relu, m, s->h, s->w, s->c, s->kernel, s->kernel,
                            s->pad, s->stride);
  else
    tdm_cuda_im2col_bf16(b, col16, x, a->x_type, m, s->h, s->w, s->c, s->kernel, s->kernel,
                         s->pad, s->stride);
}

/* im2col and a GEMM, as the replica composes them (tdm-replica-conv.c): the same
 * operations in the same chunks of samples (tdm-conv-columns.h), so the same bits. bf16
 * columns in a bf16 run, float32 ones otherwise; a chunk's columns at most
 * tdm_conv_chunk_bytes() of the run's precision (one sample's where they are more): the
 * forward (bf16 columns: in chunk_in_order()) and the input gradient chunk by chunk, the
 * weight gradient the first chunk's product and each next one's added in float32
 * (beta = 1), in the chunks' order. */
static gboolean
run_im2col(TdmBackend *b, const TdmConvLayout *l, Arena *arena)
{
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  int k = (int)l->k, out_c = s->out_c, n = s->n;
  size_t pixels = l->rows / (size_t)n, x_sample = (size_t)s->h * s->w * s->c;
  Mode mode = arena->mode;
  size_t bound = tdm_conv_chunk_bytes(b->precision);
  if (l->rows > INT32_MAX || l->k > INT32_MAX)
    return FALSE;
  if (l->bf16) {
    int chunk = tdm_conv_chunk_samples(n, pixels * l->k * 2, bound);
    uint16_t *col16 = take(arena, (size_t)chunk * pixels * l->k * 2);
    if (col16 == NULL)
      return FALSE;
    if (mode != RUN)
      return TRUE;
    int count = (n + chunk - 1) / chunk;
    for (int i = 0; i < count; i++) {
      int first = chunk_in_order(b, l, count, i) * chunk;
      int m = MIN(chunk, n - first), rows = m * (int)pixels;
      size_t out_at = (size_t)first * pixels * out_c;
      switch (l->dir) {
      case TDM_CONV_DGRAD:
        tdm_cuda_gemm_bf16_out(b, false, false, rows, k, out_c, l->dy16 + out_at, out_c, l->w16,
                               k, col16, k);
        tdm_cuda_col2im_bf16(
            b, (void *)tdm_conv_advanced(dx_target(a), dx_type(a), first * x_sample),
            dx_type(a), col16, m, s->h, s->w, s->c, s->kernel, s->kernel, s->pad, s->stride);
        break;
      case TDM_CONV_FORWARD:
        columns16(b, a, col16, first, m);
        if (a->y16 != NULL)
          tdm_cuda_gemm_bf16_out(b, false, true, rows, out_c, k, col16, k, l->w16, k,
                                 a->y16 + out_at, out_c);
        else
          tdm_cuda_gemm_bf16(b, false, true, rows, out_c, k, 1.0f, col16, k, l->w16, k, 0.0f,
                             a->y + out_at, out_c);
        break;
      case TDM_CONV_WGRAD:
        columns16(b, a, col16, first, m);
        tdm_cuda_gemm_bf16(b, true, false, out_c, k, rows, 1.0f, l->dy16 + out_at, out_c, col16,
                           k, first == 0 ? 0.0f : 1.0f, a->dw, k);
        break;
      }
    }
    return TRUE;
  }
  /* Float32 columns read x and dy as float32, which a normalized-on-read input or a
   * bf16-only dy does not give; they write dx as float32 only. */
  if (a->bn_mean != NULL || a->x_type != TDM_DTYPE_F32 ||
      (l->dir != TDM_CONV_FORWARD && a->dy16 != NULL) || a->dx16 != NULL)
    return FALSE;
  /* A bf16 output: the float32 product of the chunk, then rounded once. */
  gboolean staged = l->dir == TDM_CONV_FORWARD && a->y16 != NULL;
  size_t col_sample = one_by_one(s) ? 0 : pixels * l->k * sizeof(float);
  size_t stage_sample = staged ? pixels * out_c * sizeof(float) : 0;
  int chunk = tdm_conv_chunk_samples(n, col_sample + stage_sample, bound);
  float *col = NULL, *stage = NULL;
  if (col_sample > 0) {
    col = take(arena, (size_t)chunk * col_sample);
    if (col == NULL)
      return FALSE;
  }
  if (staged) {
    stage = take(arena, (size_t)chunk * stage_sample);
    if (stage == NULL)
      return FALSE;
  }
  if (mode != RUN)
    return TRUE;
  for (int first = 0; first < n; first += chunk) {
    int m = MIN(chunk, n - first), rows = m * (int)pixels;
    size_t out_at = (size_t)first * pixels * out_c, x_at = (size_t)first * x_sample;
    if (l->dir == TDM_CONV_DGRAD) {
      float *dx = a->dx + x_at;
      if (col == NULL) {
        tdm_cuda_gemm(b, false, false, rows, k, out_c, 1.0f, a->dy + out_at, out_c, a->w, k,
                      0.0f, dx, k);
        continue;
      }
      tdm_cuda_gemm(b, false, false, rows, k, out_c, 1.0f, a->dy + out_at, out_c, a->w, k, 0.0f,
                    col, k);
      tdm_cuda_col2im(b, dx, col, m, s->h, s->w, s->c, s->kernel, s->kernel, s->pad, s->stride);
      continue;
    }
    const float *cols = a->x + x_at;
    if (col != NULL) {
      tdm_cuda_im2col(b, col, cols, m, s->h, s->w, s->c, s->kernel, s->kernel, s->pad,
                      s->stride);
      cols = col;
    }
    if (l->dir == TDM_CONV_FORWARD) {
      float *y = staged ? stage : a->y + out_at;
      tdm_cuda_gemm(b, false, true, rows, out_c, k, 1.0f, cols, k, a->w, k, 0.0f, y, out_c);
      if (staged)
        tdm_cuda_to_bf16(b, a->y16 + out_at, y, (size_t)rows * out_c);
    } else
      tdm_cuda_gemm(b, true, false, out_c, k, rows, 1.0f, a->dy + out_at, out_c, cols, k,
                    first == 0 ? 0.0f : 1.0f, a->dw, k);
  }
  return TRUE;
}

/* conv-implicit.cu's input gradient: stride 1, bf16, dx (float32, or bf16 where asked)
 * without columns. */
static gboolean
run_own(TdmBackend *b, const TdmConvLayout *l, Arena *arena)
{
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  if (l->dir != TDM_CONV_DGRAD || !l->bf16 || dx_target(a) == NULL ||
      !tdm_conv_aligned16(dx_target(a)) ||
      !tdm_k_conv_dgrad_bf16_fits(CUDA_B(b)->major, s->c, s->out_c, s->kernel, s->kernel,
                                  s->pad, s->stride))
    return FALSE;
  /* dy16 and w16 are the layout's, aligned: nothing to stage. */
  if (arena->mode == RUN)
    TDM_CUDA_OK(b, tdm_k_conv_dgrad_bf16(dx_target(a), a->dx16 != NULL, l->dy16, l->w16, s->n,
                                         s->h, s->w, s->c, s->out_c, s->kernel, s->kernel,
                                         s->pad, CUDA_B(b)->stream));
  return TRUE;
}

/* conv-small.cu's few-channel forward or weight gradient (tdm-backend-cuda-conv-small.h):
 * its partial sums, if any, in the arena. */
static gboolean
run_small(TdmBackend *b, const TdmConvLayout *l, Arena *arena)
{
  if (!tdm_conv_small_takes(b, l))
    return FALSE;
  size_t bytes = tdm_conv_small_scratch(l);
  void *scratch = bytes > 0 ? take(arena, bytes) : NULL;
  if (bytes > 0 && scratch == NULL)
    return FALSE;
  if (arena->mode == RUN)
    tdm_conv_small_run(b, l, scratch);
  return TRUE;
}

/* The most bf16 values widen_in_place() stages at its end; a result of at least four
 * times as many is widened in place instead of staged whole. */
#define IN_PLACE_TAIL ((size_t)1 << 21)

/* Widens the n bf16 values that fill the upper half of y's n floats (n a multiple of 8,
 * y 16-byte aligned) into y, without a staging buffer of their size: in rounds, each
 * widening values [a, b) with b ≤ (n + a) / 2, so that its floats (bytes [4a, 4b)) end
 * before its bf16 values begin (byte 2n + 2a) and overwrite only values an earlier round
 * read; each round halves what is left (multiples of 8 values, for aligned vectors);
 * the last IN_PLACE_TAIL values or fewer go through `tail`. */
static void
widen_in_place(TdmBackend *b, float *y, size_t n, uint16_t *tail)
{
  cudaStream_t stream = CUDA_B(b)->stream;
  const uint16_t *halves = (const uint16_t *)y + n;
  size_t a = 0;
  while (n - a > IN_PLACE_TAIL) {
    size_t next = a + (n - a) / 16 * 8;
    if (!TDM_CUDA_OK(b, tdm_k_from_bf16(y + a, halves + a, next - a, stream)))
      return;
    a = next;
  }
  if (TDM_CUDA_OK(b, cudaMemcpyAsync(tail, halves + a, (n - a) * sizeof(uint16_t),
                                     cudaMemcpyDeviceToDevice, stream)))
    TDM_CUDA_OK(b, tdm_k_from_bf16(y + a, tail, n - a, stream));
}

/* Whether a cuDNN candidate's plan reads a copy of the input that the engine writes
 * (padded, normalized by the bn before, converted to bf16, or aligned) rather than the
 * caller's x itself: a bf16 run's forward and weight gradient. */
static gboolean
image_staged(const TdmConvLayout *l, int pad_c)
{
  const TdmConvArgs *a = l->a;
  return l->bf16 && l->dir != TDM_CONV_DGRAD &&
         (pad_c > 0 || !input_is_bf16(a) || !tdm_conv_aligned16(a->x));
}

/* The chunks a cuDNN candidate runs the call in (tdm-backend-cuda-conv-chunks.h): even
 * chunks of samples where the engine writes the plan's input itself (a bf16 run's input
 * normalized by the bn before, converted, padded) and the call is a forward or a weight
 * gradient (its chunks' sums added in float32 in the chunks' order, whether the plan
 * writes float32 or bf16); any other call whole, a bf16 input copied only because it is
 * not aligned among them. */
static TdmConvChunks
cudnn_chunks(const TdmConvLayout *l, int pad_c)
{
  gboolean written = l->bf16 && (pad_c > 0 || !input_is_bf16(l->a));
  return tdm_conv_cudnn_chunks(&l->a->shape, l->dir, written, pad_c);
}

/* Writes samples [first, first + m) of the input as a bf16 plan reads them to image:
 * padded to pad_c channels, normalized as im2col_bf16_bn computes it (the same bits as
 * the columns' candidates read), converted, or copied (a misaligned bf16 input). */
static void
stage_image(TdmBackend *b, const TdmConvArgs *a, int pad_c, void *image, int first, int m)
{
  const TdmConvShape *s = &a->shape;
  size_t pixels = (size_t)m * s->h * s->w;
  const void *x = tdm_conv_advanced(a->x, a->x_type, (size_t)first * s->h * s->w * s->c);
  if (pad_c > 0)
    TDM_CUDA_OK(b, tdm_k_to_bf16_padded(image, x, pixels, s->c, pad_c, CUDA_B(b)->stream));
  else if (input_is_bf16(a))
    tdm_backend_copy(b, image, x, pixels * s->c * sizeof(uint16_t));
  else if (a->bn_mean != NULL)
    tdm_cuda_im2col_bf16_bn(b, image, x, a->x_type, a->bn_mean, a->bn_invstd, a->bn_gamma,
                            a->bn_beta, a->bn_relu, m, s->h, s->w, s->c, 1, 1, 0, 1);
  else
    tdm_cuda_im2col_bf16(b, image, x, a->x_type, m, s->h, s->w, s->c, 1, 1, 0, 1);
}

/* How a chunk's result reaches its destination: written there by the plan; written as
 * bf16 into a float32 destination's upper half and widened where it lies; staged and
 * then copied, rounded or widened; staged with padded channels and copied out. */
typedef enum {
  ROUTE_DIRECT,
  ROUTE_IN_PLACE,
  ROUTE_STAGED,
  ROUTE_UNPAD,
} Route;

/* The route of a result of `count` values for destination `target`. */
static Route
route_of(const TdmConvLayout *l, const TdmConvCandidate *c, const void *target, size_t count)
{
  const TdmConvArgs *a = l->a;
  gboolean target16 = (l->dir == TDM_CONV_FORWARD && a->y16 != NULL) ||
                      (l->dir == TDM_CONV_DGRAD && a->dx16 != NULL);
  gboolean wide = !l->bf16 || c->float_out;
  if (c->pad_c > 0 && l->dir == TDM_CONV_WGRAD)
    return ROUTE_UNPAD;
  /* A bf16 weight gradient in chunks: each chunk's sum staged, then widened into the
   * float32 sum (run_cudnn()). */
  if (l->dir == TDM_CONV_WGRAD && !wide && c->chunks.count > 1)
    return ROUTE_STAGED;
  if (wide != target16 && tdm_conv_aligned16(target))
    return ROUTE_DIRECT;
  /* A large bf16 result for a float32 destination: widened in place (widen_in_place()),
   * with a small tail staged. */
  if (!wide && !target16 && tdm_conv_aligned16(target) && count % 8 == 0 &&
      count >= 4 * IN_PLACE_TAIL)
    return ROUTE_IN_PLACE;
  return ROUTE_STAGED;
}

/* A cuDNN plan, its operands staged where they are not aligned or not of its type; a
 * call whose input the engine writes itself in the candidate's chunks of samples
 * (cudnn_chunks()), each chunk's input written and convolved by the plan of its size
 * through the same scratch: a forward's output put in place chunk by chunk (in
 * chunk_in_order()), a weight gradient's chunks summed in float32 in their order (the
 * same bits every run). */
static gboolean
run_cudnn(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c, Arena *arena,
          char **error)
{
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  size_t pixels = (size_t)s->n * s->h * s->w, taps = (size_t)s->out_c * s->kernel * s->kernel;
  size_t in_count = pixels * s->c, out_count = l->rows * s->out_c;
  size_t w_count = taps * s->c;
  Mode mode = arena->mode;
  /* Padded channels: the plan reads bf16 copies of x and w with pad_c channels, and a
   * weight gradient of pad_c channels is written aside, its first c copied out. */
  int pad_c = c->pad_c;
  if (pad_c > 0 && (!l->bf16 || l->dir == TDM_CONV_DGRAD || a->bn_mean != NULL ||
                    a->x_type != TDM_DTYPE_F32 || s->c > pad_c ||
                    (l->dir == TDM_CONV_WGRAD && !c->float_out)))
    return FALSE;
  /* The chunks are the shape's: a plan built for them, and for their two sizes. */
  TdmConvChunks chunks = cudnn_chunks(l, pad_c);
  if (chunks.count != c->chunks.count || chunks.size != c->chunks.size ||
      chunks.large != c->chunks.large || (chunks.large < chunks.count && c->rest_plan == NULL))
    return FALSE;
  int m_most = chunks.size;
  gboolean staged_image = image_staged(l, pad_c);
  void *image = NULL, *filter = NULL, *out = NULL;

  if (l->dir != TDM_CONV_DGRAD) {
    size_t sample_in = (size_t)s->h * s->w * (pad_c > 0 ? pad_c : s->c);
    if (staged_image)
      image = take(arena, (size_t)m_most * sample_in * sizeof(uint16_t));
    else if (l->bf16)
      image = (void *)a->x;
    else
      image = a->bn_mean != NULL || a->x_type != TDM_DTYPE_F32
                  ? NULL
                  : aligned_or_stage(b, arena, a->x, in_count * 4, TRUE);
  }
  if (l->dir != TDM_CONV_WGRAD && pad_c > 0) {
    filter = take(arena, taps * pad_c * 2);
    if (filter != NULL && mode == RUN)
      TDM_CUDA_OK(b, tdm_k_to_bf16_padded(filter, a->w, taps, s->c, pad_c, CUDA_B(b)->stream));
  } else if (l->dir != TDM_CONV_WGRAD) {
    filter = l->bf16 ? (void *)l->w16 : aligned_or_stage(b, arena, a->w, w_count * 4, TRUE);
  }
  if (l->dir != TDM_CONV_FORWARD)
    out = l->bf16 ? (void *)l->dy16 : aligned_or_stage(b, arena, a->dy, out_count * 4, TRUE);

  /* The written tensor: straight where the plan writes the destination's type (bf16
   * for a forward's y16 or an input gradient's dx16, else float32) and the destination
   * is aligned, else a staging buffer copied, widened or rounded after; per chunk. */
  gboolean target16 = (l->dir == TDM_CONV_FORWARD && a->y16 != NULL) ||
                      (l->dir == TDM_CONV_DGRAD && a->dx16 != NULL);
  void *target = l->dir == TDM_CONV_FORWARD && target16 ? (void *)a->y16
                 : l->dir == TDM_CONV_FORWARD           ? (void *)a->y
                 : l->dir == TDM_CONV_DGRAD             ? dx_target(a)
                                                        : (void *)a->dw;
  if (target == NULL)
    return FALSE;
  size_t sample_result = l->dir == TDM_CONV_FORWARD ? out_count / s->n
                         : l->dir == TDM_CONV_DGRAD ? in_count / s->n
                                                    : 0;
  gboolean wide = !l->bf16 || c->float_out;
  size_t target_size = target16 ? 2 : 4, result_size = wide ? 4 : 2;
  /* The scratch the chunks' routes take: the largest staged result, a tail. */
  size_t staged_count = 0;
  gboolean any_in_place = FALSE;
  for (int i = 0; i < chunks.count; i++) {
    int m;
    int first = tdm_conv_chunk_first(&chunks, i, &m);
    size_t count = l->dir == TDM_CONV_WGRAD ? w_count : (size_t)m * sample_result;
    Route route = route_of(l, c, (char *)target + (size_t)first * sample_result * target_size,
                           count);
    if (route == ROUTE_STAGED)
      staged_count = MAX(staged_count, count);
    else if (route == ROUTE_UNPAD)
      staged_count = MAX(staged_count, taps * pad_c);
    any_in_place = any_in_place || route == ROUTE_IN_PLACE;
  }
  void *stage = staged_count > 0 ? take(arena, staged_count * result_size) : NULL;
  /* A weight gradient in chunks: each chunk's after the first written aside (a float32
   * plan's) or widened there (a bf16 plan's, whose every chunk is staged), then added to
   * the sum. */
  size_t sum_count = c->pad_c > 0 && l->dir == TDM_CONV_WGRAD ? taps * pad_c : w_count;
  gboolean summed = l->dir == TDM_CONV_WGRAD && chunks.count > 1;
  float *partial = summed ? take(arena, sum_count * sizeof(float)) : NULL;
  uint16_t *tail = any_in_place ? take(arena, IN_PLACE_TAIL * sizeof(uint16_t)) : NULL;
  int64_t workspace_bytes = MAX(c->plan->workspace,
                                c->rest_plan != NULL ? c->rest_plan->workspace : 0);
  void *workspace = workspace_bytes > 0 ? take(arena, (size_t)workspace_bytes) : NULL;
  if ((l->dir != TDM_CONV_DGRAD && image == NULL) ||
      (l->dir != TDM_CONV_WGRAD && filter == NULL) ||
      (l->dir != TDM_CONV_FORWARD && out == NULL) || (staged_count > 0 && stage == NULL) ||
      (summed && partial == NULL) || (any_in_place && tail == NULL) ||
      (workspace_bytes > 0 && workspace == NULL))
    return FALSE;
  if (mode != RUN)
    return TRUE;
  if (!tdm_cuda_begin(b))
    return TRUE;
  cudaStream_t stream = CUDA_B(b)->stream;
  for (int i = 0; i < chunks.count; i++) {
    int m;
    int first = tdm_conv_chunk_first(&chunks, chunk_in_order(b, l, chunks.count, i), &m);
    const TdmCudnnPlan *plan = m == chunks.size ? c->plan : c->rest_plan;
    size_t count = l->dir == TDM_CONV_WGRAD ? w_count : (size_t)m * sample_result;
    void *dest = (char *)target + (size_t)first * sample_result * target_size;
    Route route = route_of(l, c, dest, count);
    void *result = route == ROUTE_DIRECT     ? dest
                   : route == ROUTE_IN_PLACE ? (char *)dest + count * sizeof(uint16_t)
                                             : stage;
    if (staged_image)
      stage_image(b, a, pad_c, image, first, m);
    /* The plan's tensors: the chunk's input (staged, or the caller's), the weights or
     * their gradient (a later chunk's aside), the chunk's output or output gradient. */
    void *x_t = image, *w_t = filter, *y_t = out;
    switch (l->dir) {
    case TDM_CONV_FORWARD:
      y_t = result;
      break;
    case TDM_CONV_DGRAD:
      x_t = result;
      break;
    case TDM_CONV_WGRAD:
      w_t = i > 0 && wide ? (void *)partial : result;
      y_t = (char *)out + (size_t)first * (out_count / s->n) * (l->bf16 ? 2 : 4);
      break;
    }
    if (!tdm_cudnn_plan_run(CUDA_B(b)->cudnn_api, CUDA_B(b)->cudnn, plan, x_t, w_t, y_t,
                            workspace, NULL, error))
      return FALSE;
    if (summed && !wide) {
      /* A bf16 plan's chunk: its bf16 sum widened (exactly) into dw, the first, or aside
       * and added to dw in float32, in the chunks' order: the same bits every run.
       * What the chunks cost in accuracy: bf16 keeps 8 significant bits, so a rounding
       * errs by at most 2⁻⁸ of what it rounds. One bf16 result of the batch's sum S
       * errs by ≤ 2⁻⁸ |S| a weight; k chunk sums S_i, each rounded once, by
       * ≤ 2⁻⁸ Σ|S_i| (the k − 1 float32 additions, 2⁻²⁴ each, are nothing beside it).
       * So the partial roundings' bound is relative to Σ|S_i| instead of |S|: the same
       * where the chunks' sums agree in sign, more where they cancel. In the norm the
       * tests measure, 2⁻⁸ ‖Σ|S_i|‖₂ against 2⁻⁸ ‖S‖₂, a ratio of about
       * √(1 + (2/π)(k − 1)) for sums of random sign (1.28 for two chunks, 1.71 for
       * four); that is the worst case, all roundings one way, while independent ones add
       * in quadrature to about what one rounding of S gives. tests/gpu/test-cuda-conv.c
       * allows a chunked bf16 plan that growth, 2⁻⁸ (ratio − 1) with the ratio of the
       * CPU's own chunk sums (chunk_rounding_share()), beyond what the plan whole would
       * be allowed. A float32 plan's chunks keep the whole batch's bound (2⁻²⁴ a
       * chunk); both are offered and timed. Whatever a plan rounds inside its own
       * reduction, it rounds over k times fewer rows here. */
      TDM_CUDA_OK(b, tdm_k_from_bf16(i == 0 ? (float *)dest : partial, result, count, stream));
      if (i > 0)
        tdm_cuda_add(b, dest, partial, count);
      continue;
    }
    if (l->dir == TDM_CONV_WGRAD && i > 0)
      tdm_cuda_add(b, result, partial, sum_count);
    if (l->dir == TDM_CONV_WGRAD && i + 1 < chunks.count)
      continue; /* the sum is put in place after its last chunk */
    switch (route) {
    case ROUTE_DIRECT:
      break;
    case ROUTE_IN_PLACE:
      widen_in_place(b, dest, count, tail);
      break;
    case ROUTE_UNPAD:
      TDM_CUDA_OK(b, cudaMemcpy2DAsync(dest, (size_t)s->c * sizeof(float), result,
                                       (size_t)pad_c * sizeof(float),
                                       (size_t)s->c * sizeof(float), taps,
                                       cudaMemcpyDeviceToDevice, stream));
      break;
    case ROUTE_STAGED:
      if (wide != target16) /* the same type: a misaligned destination */
        tdm_backend_copy(b, dest, result, count * result_size);
      else if (wide)
        tdm_cuda_to_bf16(b, dest, result, count);
      else
        TDM_CUDA_OK(b, tdm_k_from_bf16(dest, result, count, stream));
      break;
    }
  }
  return TRUE;
}

/* Calls candidate c in the arena's mode. */
static gboolean
call(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c, Arena *arena,
     char **error)
{
  switch (c->kind) {
  case TDM_CONV_IM2COL:
    return run_im2col(b, l, arena);
  case TDM_CONV_OWN:
    return g_str_equal(c->name, "own:dgrad") ? run_own(b, l, arena) : run_small(b, l, arena);
  case TDM_CONV_CUDNN:
    return run_cudnn(b, l, c, arena, error);
  case TDM_CONV_CUDNN_FUSED: {
    /* Its own layout of the scratch (tdm-backend-cuda-conv-fused.c). */
    size_t need = 0;
    gboolean took = tdm_conv_fused_call(b, l, c, arena->mode == RUN, &need, error);
    arena->at = MAX(arena->at, (char *)l->a->work + need);
    return took;
  }
  case TDM_CONV_CUDNN_PHASES: {
    /* Its own layout of the scratch too (tdm-backend-cuda-conv-phases.c). */
    size_t need = 0;
    gboolean took =
        tdm_conv_phases_call(b, l, c, arena->mode == RUN, &need, &arena->refused, error);
    arena->at = MAX(arena->at, (char *)l->a->work + need);
    return took;
  }
  }
  return FALSE;
}

gboolean
tdm_conv_candidate_run(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c,
                       gboolean *refused, char **error)
{
  *error = NULL;
  if (refused != NULL)
    *refused = FALSE;
  if (tdm_conv_candidate_need(b, l, c) > l->a->work_bytes) {
    *error = g_strdup_printf("%s needs more of the workspace than it holds", c->name);
    return FALSE;
  }
  Arena arena = arena_of(l, RUN);
  gboolean ran = call(b, l, c, &arena, error);
  if (refused != NULL)
    *refused = !ran && arena.refused;
  if (!ran && *error == NULL)
    *error = g_strdup_printf("%s does not take the shape", c->name);
  return ran;
}

TdmConvRounding
tdm_conv_candidate_rounding(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c)
{
  const TdmConvArgs *a = l->a;
  gboolean target16 = (l->dir == TDM_CONV_FORWARD && a->y16 != NULL) ||
                      (l->dir == TDM_CONV_DGRAD && a->dx16 != NULL);
  /* The bf16 roundings on the result's way, in units of one rounding of the result: into
   * a bf16 destination (once, whoever rounds it: a plan writing bf16 there writes it
   * directly, any other's float32 sums are rounded after); a cuDNN plan (fused or not)
   * writing bf16 for a float32 destination (widened after, exactly), a weight gradient
   * in k chunks once each chunk's sum Sᵢ, 2⁻⁸ Σᵢ|Sᵢ| a weight at most, which in the
   * 2-norm is 2⁻⁸ Σᵢ‖Sᵢ‖₂ = √k · 2⁻⁸ ‖S‖₂ where the chunks' sums are alike and
   * independent, as the samples they sum are (the random signs' expectation
   * √(1 + (2/π)(k − 1)) is less); im2col's input gradient through bf16 columns, which
   * col2im sums (its one rounding before the destination's). */
  double roundings = target16 ? 1.0 : 0.0;
  gboolean plan = c->kind == TDM_CONV_CUDNN || c->kind == TDM_CONV_CUDNN_FUSED;
  if (l->bf16 && plan && !c->float_out && !target16)
    roundings += l->dir == TDM_CONV_WGRAD ? sqrt((double)MAX(c->chunks.count, 1)) : 1.0;
  if (l->bf16 && c->kind == TDM_CONV_IM2COL && l->dir == TDM_CONV_DGRAD)
    roundings += 1.0;
  TdmConvRounding r = {
      .output = roundings > 0 ? roundings * TDM_CONV_UNIT_BF16 : TDM_CONV_UNIT_F32,
      /* TF32's products round the operands, cuBLAS's and cuDNN's each their own way. */
      .operands = b->precision == TDM_PRECISION_TF32 ? TDM_CONV_UNIT_TF32 : 0.0,
  };
  return r;
}

size_t
tdm_conv_candidate_need(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c)
{
  Arena arena = arena_of(l, MEASURE);
  char *error = NULL;
  call(b, l, c, &arena, &error);
  g_free(error);
  return (size_t)(arena.at - (char *)l->a->work);
}

void
tdm_conv_candidate_free(TdmConvCandidate *c)
{
  if (c == NULL)
    return;
  if (c->plan != NULL)
    tdm_cudnn_plan_free(c->plan);
  if (c->rest_plan != NULL)
    tdm_cudnn_plan_free(c->rest_plan);
  tdm_conv_phases_free(c->phases);
  g_free(c);
}

static TdmConvCandidate *
candidate(TdmConvKind kind, const char *name)
{
  TdmConvCandidate *c = g_new0(TdmConvCandidate, 1);
  c->kind = kind;
  c->chunks = tdm_conv_even_chunks(1, 0, 0);
  g_strlcpy(c->name, name, sizeof c->name);
  return c;
}

cudnnHandle_t
tdm_conv_cudnn_handle(TdmBackend *b)
{
  TdmBackendCuda *cb = CUDA_B(b);
  const TdmCudnn *dnn = tdm_cudnn_get();
  if (dnn == NULL)
    return NULL; /* missing, or hidden since (TANDEM_CUDNN=0) */
  if (cb->cudnn != NULL || cb->cudnn_failed)
    return cb->cudnn;
  if (dnn == NULL || cb->capturing) {
    cb->cudnn_failed = dnn == NULL;
    return NULL;
  }
  cudnnHandle_t handle = NULL;
  cudnnStatus_t status = dnn->create(&handle);
  if (status == CUDNN_STATUS_SUCCESS)
    status = dnn->set_stream(handle, cb->stream);
  if (status != CUDNN_STATUS_SUCCESS) {
    g_autofree char *text = tdm_cudnn_describe(dnn, status);
    g_message("%s (%s): cuDNN cannot be used: %s", b->name, cb->gpu_name, text);
    if (handle != NULL)
      dnn->destroy(handle);
    cb->cudnn_failed = TRUE;
    return NULL;
  }
  cb->cudnn = handle;
  cb->cudnn_api = dnn;
  return handle;
}

/* The channels a few-channel input is padded to for cuDNN's tensor-core engines (a
 * stem's three): the bf16 copy of the input and of the weights get zero channels. */
#define PAD_CHANNELS 8

/* The first plan of engine `engine` cuDNN finalizes for the layout's shape with n
 * samples (pad_c channels where > 0), or NULL. */
static TdmCudnnPlan *
plan_for_samples(TdmBackend *b, const TdmConvLayout *l, int n, int pad_c, int output,
                 gint64 engine)
{
  TdmConvShape shape = l->a->shape;
  shape.n = n;
  if (pad_c > 0)
    shape.c = pad_c;
  int operand = l->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  TdmCudnnFilter filter = {b->precision};
  g_autofree char *why = NULL;
  GPtrArray *plans = tdm_cudnn_conv_plans(tdm_cudnn_get(), CUDA_B(b)->cudnn, l->dir, &shape,
                                          operand, output, filter, 1, -1, engine, &why);
  TdmCudnnPlan *p = plans->len > 0 ? g_ptr_array_index(plans, 0) : NULL;
  g_ptr_array_free(plans, TRUE);
  if (p == NULL)
    g_debug("%s: cuDNN engine %" G_GINT64_FORMAT " for chunks of %d samples: %s", b->name,
            engine, n, why != NULL ? why : "none");
  return p;
}

/* cuDNN's plans for the layout's shape, or for it with the input's channels padded to
 * pad_c (pad_c > 0), as candidates (at most 6 of each output type): float32 and bf16
 * outputs where `both`, else float32 only; or only the one `only` names. A call run in
 * chunks (cudnn_chunks()) gets the plans of its largest chunk's shape, each with the
 * same engine's plan for a chunk one sample shorter where the chunks have two sizes
 * (where that engine has none: no candidate). */
static void
add_cudnn_plans(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list,
                const TdmCudnnName *only, int pad_c, gboolean both)
{
  int operand = l->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  int outputs[2] = {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16};
  TdmCudnnFilter filter = {b->precision};
  for (int o = 0; o < (both ? 2 : 1); o++) {
    if (only != NULL && only->out != (o == 0 ? 'f' : 'h'))
      continue;
    TdmConvChunks chunks = cudnn_chunks(l, pad_c);
    int chunk = chunks.count > 1 ? chunks.size : 0;
    if (only != NULL && only->chunk != chunk)
      continue; /* a cached name of other chunks: the choice is made again */
    TdmConvShape shape = l->a->shape;
    shape.n = chunks.size;
    if (pad_c > 0)
      shape.c = pad_c;
    g_autofree char *why = NULL;
    GPtrArray *plans = tdm_cudnn_conv_plans(tdm_cudnn_get(), CUDA_B(b)->cudnn, l->dir, &shape,
                                            operand, outputs[o], filter, 6,
                                            only != NULL ? only->rank : -1, -1, &why);
    for (guint i = 0; i < plans->len; i++) {
      TdmCudnnPlan *p = g_ptr_array_index(plans, i);
      if (only != NULL && p->engine != only->engine) {
        tdm_cudnn_plan_free(p); /* another library's list: the name means another engine now */
        continue;
      }
      TdmCudnnName spelt = {p->engine, p->rank, o == 0 ? 'f' : 'h', pad_c > 0, chunk,
                            FALSE};
      g_autofree char *name = tdm_cudnn_name_format(&spelt);
      TdmConvCandidate *c = candidate(TDM_CONV_CUDNN, name);
      c->plan = p;
      c->chunks = chunks;
      c->float_out = o == 0;
      c->pad_c = pad_c;
      if (chunks.large < chunks.count)
        c->rest_plan = plan_for_samples(b, l, chunks.size - 1, pad_c, outputs[o], p->engine);
      char *error = NULL;
      Arena arena = arena_of(l, MEASURE);
      if (run_cudnn(b, l, c, &arena, &error))
        g_ptr_array_add(list, c);
      else
        tdm_conv_candidate_free(c);
      g_free(error);
    }
    g_ptr_array_free(plans, TRUE);
    if (why != NULL)
      g_debug("%s: cuDNN %s %s%s: %s", b->name, l->dir == TDM_CONV_FORWARD ? "forward"
                                                : l->dir == TDM_CONV_DGRAD ? "dgrad" : "wgrad",
              o == 0 ? "float32 output" : "bf16 output", pad_c > 0 ? ", padded" : "", why);
  }
}

/* cuDNN's plans for the layout, as candidates, or only the one named (engine, rank,
 * output, padding, chunks) when `only` names one. A bf16 input of fewer than
 * PAD_CHANNELS channels (an image) read as it is stored also gets the plans of its
 * padded shape, forward and weight gradient (a first layer has no input gradient), the
 * latter with a float32 output, which the real channels are copied out of. */
static void
add_cudnn(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, const char *only)
{
  TdmCudnnName wanted;
  if (only != NULL && !tdm_cudnn_name_parse(only, &wanted))
    return;
  cudnnHandle_t handle = tdm_conv_cudnn_handle(b);
  if (handle == NULL || CUDA_B(b)->capturing)
    return;
  const TdmConvArgs *a = l->a;
  if (!l->bf16 && (a->bn_mean != NULL || a->x_type != TDM_DTYPE_F32))
    return;
  if (only == NULL || !wanted.padded)
    add_cudnn_plans(b, l, list, only != NULL ? &wanted : NULL, 0, l->bf16);
  gboolean paddable = l->bf16 && a->shape.c < PAD_CHANNELS && a->bn_mean == NULL &&
                      a->x_type == TDM_DTYPE_F32 && l->dir != TDM_CONV_DGRAD;
  if (paddable && (only == NULL || wanted.padded))
    add_cudnn_plans(b, l, list, only != NULL ? &wanted : NULL, PAD_CHANNELS,
                    l->dir == TDM_CONV_FORWARD);
}

GPtrArray *
tdm_conv_candidates_for(TdmBackend *b, const TdmConvLayout *l, const char *only)
{
  GPtrArray *list = g_ptr_array_new_with_free_func((GDestroyNotify)tdm_conv_candidate_free);
  Arena arena = arena_of(l, MEASURE);
  if ((only == NULL || g_str_equal(only, "im2col")) && run_im2col(b, l, &arena))
    g_ptr_array_add(list, candidate(TDM_CONV_IM2COL, "im2col"));
  arena = arena_of(l, MEASURE);
  if ((only == NULL || g_str_equal(only, "own:dgrad")) && run_own(b, l, &arena))
    g_ptr_array_add(list, candidate(TDM_CONV_OWN, "own:dgrad"));
  arena = arena_of(l, MEASURE);
  const char *small = tdm_conv_small_name(l->dir);
  if (small != NULL && (only == NULL || g_str_equal(only, small)) && run_small(b, l, &arena))
    g_ptr_array_add(list, candidate(TDM_CONV_OWN, small));
  if (only == NULL || g_str_has_prefix(only, "cudnn:"))
    add_cudnn(b, l, list, only);
  if (only == NULL || g_str_has_prefix(only, "cudnn-fused:"))
    tdm_conv_fused_add(b, l, list, only);
  if (only == NULL || g_str_has_prefix(only, "cudnn-phases:"))
    tdm_conv_phases_add(b, l, list, only);
  return list;
}
