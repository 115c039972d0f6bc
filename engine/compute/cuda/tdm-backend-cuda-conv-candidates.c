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
#include "tdm-backend-cuda-conv-engine.h"
#include "tdm-i18n.h"

#include <stdio.h>

#define ALIGN 256

static size_t
up(size_t v, size_t to)
{
  return (v + to - 1) / to * to;
}

static gboolean
aligned16(const void *p)
{
  return ((uintptr_t)p & 15u) == 0;
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
      s->stride <= 0 || s->pad < 0 || a->work == NULL || !aligned16(a->work))
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
  if (a->dy16 != NULL && (!backward || a->dy16 != (const uint16_t *)work))
    return FALSE; /* the caller's dy16 is where the layout puts it, or nowhere */
  size_t w16_at = up(backward ? rows * out_c * 2 : 0, 16);
  l->dy16 = backward ? (uint16_t *)work : NULL;
  l->w16 = a->w16 != NULL && aligned16(a->w16) ? a->w16 : (const uint16_t *)(work + w16_at);
  l->scratch = work + up(w16_at + out_c * k * 2, ALIGN);
  return (size_t)(l->scratch - work) <= a->work_bytes;
}

void
tdm_conv_prepare(TdmBackend *b, const TdmConvLayout *l)
{
  const TdmConvArgs *a = l->a;
  if (!l->bf16)
    return;
  if (l->w16 != a->w16)
    tdm_cuda_to_bf16(b, (uint16_t *)l->w16, a->w, (size_t)a->shape.out_c * l->k);
  if (l->dir != TDM_CONV_FORWARD && a->dy16 == NULL)
    tdm_cuda_to_bf16(b, l->dy16, a->dy, l->rows * a->shape.out_c);
}

/* How a candidate is called: run; only checked against the workspace it was given (a
 * dry run); or measured, its need in bytes whatever the workspace holds. */
typedef enum {
  RUN,
  FIT,
  MEASURE,
} Mode;

/* Scratch for one call, from the layout's scratch on: `at` the next free byte. */
typedef struct {
  char *at, *end;
  Mode mode;
} Arena;

static Arena
arena_of(const TdmConvLayout *l, Mode mode)
{
  Arena arena = {l->scratch, (char *)l->a->work + l->a->work_bytes, mode};
  return arena;
}

static void *
take(Arena *arena, size_t bytes)
{
  char *start = (char *)up((uintptr_t)arena->at, ALIGN);
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
  if (aligned16(p))
    return (void *)p;
  void *stage = take(arena, bytes);
  if (stage != NULL && copy_in && arena->mode == RUN)
    tdm_backend_copy(b, stage, p, bytes);
  return stage;
}

/* The input as the convolution reads it, as bf16 (a 1×1 "im2col" is the conversion;
 * with the bn, its normalization as im2col_bf16_bn computes it: the same bits). */
static void
input16(TdmBackend *b, const TdmConvArgs *a, uint16_t *x16)
{
  const TdmConvShape *s = &a->shape;
  if (a->bn_mean != NULL)
    tdm_cuda_im2col_bf16_bn(b, x16, a->x, a->x_type, a->bn_mean, a->bn_invstd, a->bn_gamma,
                            a->bn_beta, a->bn_relu, s->n, s->h, s->w, s->c, 1, 1, 0, 1);
  else
    tdm_cuda_im2col_bf16(b, x16, a->x, a->x_type, s->n, s->h, s->w, s->c, 1, 1, 0, 1);
}

/* Whether the input is already what a bf16 convolution reads: stored as bf16, not
 * normalized on the way. */
static gboolean
input_is_bf16(const TdmConvArgs *a)
{
  return a->bn_mean == NULL && a->x_type == TDM_DTYPE_BF16;
}

/* im2col and a GEMM, as the replica composes them (tdm-replica-pass.c): the same
 * operations, so the same bits. bf16 columns in a bf16 run, float32 ones otherwise. */
static gboolean
run_im2col(TdmBackend *b, const TdmConvLayout *l, Arena *arena)
{
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  int rows = (int)l->rows, k = (int)l->k, out_c = s->out_c;
  Mode mode = arena->mode;
  if (l->rows > INT32_MAX || l->k > INT32_MAX)
    return FALSE;
  if (l->bf16) {
    uint16_t *col16 = take(arena, l->rows * l->k * 2);
    if (col16 == NULL)
      return FALSE;
    if (mode != RUN)
      return TRUE;
    if (l->dir == TDM_CONV_DGRAD) {
      tdm_cuda_gemm_bf16_out(b, false, false, rows, k, out_c, l->dy16, out_c, l->w16, k, col16,
                             k);
      tdm_cuda_col2im_bf16(b, a->dx, col16, s->n, s->h, s->w, s->c, s->kernel, s->kernel,
                           s->pad, s->stride);
      return TRUE;
    }
    if (a->bn_mean != NULL)
      tdm_cuda_im2col_bf16_bn(b, col16, a->x, a->x_type, a->bn_mean, a->bn_invstd, a->bn_gamma,
                              a->bn_beta, a->bn_relu, s->n, s->h, s->w, s->c, s->kernel,
                              s->kernel, s->pad, s->stride);
    else
      tdm_cuda_im2col_bf16(b, col16, a->x, a->x_type, s->n, s->h, s->w, s->c, s->kernel,
                           s->kernel, s->pad, s->stride);
    if (l->dir == TDM_CONV_FORWARD && a->y16 != NULL)
      tdm_cuda_gemm_bf16_out(b, false, true, rows, out_c, k, col16, k, l->w16, k, a->y16,
                             out_c);
    else if (l->dir == TDM_CONV_FORWARD)
      tdm_cuda_gemm_bf16(b, false, true, rows, out_c, k, 1.0f, col16, k, l->w16, k, 0.0f, a->y,
                         out_c);
    else
      tdm_cuda_gemm_bf16(b, true, false, out_c, k, rows, 1.0f, l->dy16, out_c, col16, k, 0.0f,
                         a->dw, k);
    return TRUE;
  }
  /* Float32 columns read x and dy as float32, which a normalized-on-read input or a
   * bf16-only dy does not give. */
  if (a->bn_mean != NULL || a->x_type != TDM_DTYPE_F32 ||
      (l->dir != TDM_CONV_FORWARD && a->dy16 != NULL))
    return FALSE;
  float *col = NULL, *y = a->y;
  if (!one_by_one(s)) {
    col = take(arena, l->rows * l->k * sizeof(float));
    if (col == NULL)
      return FALSE;
  }
  /* A bf16 output: the float32 product, then rounded once. */
  if (l->dir == TDM_CONV_FORWARD && a->y16 != NULL) {
    y = take(arena, l->rows * out_c * sizeof(float));
    if (y == NULL)
      return FALSE;
  }
  if (mode != RUN)
    return TRUE;
  if (l->dir == TDM_CONV_DGRAD) {
    if (col == NULL) {
      tdm_cuda_gemm(b, false, false, rows, k, out_c, 1.0f, a->dy, out_c, a->w, k, 0.0f, a->dx, k);
      return TRUE;
    }
    tdm_cuda_gemm(b, false, false, rows, k, out_c, 1.0f, a->dy, out_c, a->w, k, 0.0f, col, k);
    tdm_cuda_col2im(b, a->dx, col, s->n, s->h, s->w, s->c, s->kernel, s->kernel, s->pad,
                    s->stride);
    return TRUE;
  }
  const float *cols = a->x;
  if (col != NULL) {
    tdm_cuda_im2col(b, col, a->x, s->n, s->h, s->w, s->c, s->kernel, s->kernel, s->pad,
                    s->stride);
    cols = col;
  }
  if (l->dir == TDM_CONV_FORWARD) {
    tdm_cuda_gemm(b, false, true, rows, out_c, k, 1.0f, cols, k, a->w, k, 0.0f, y, out_c);
    if (a->y16 != NULL)
      tdm_cuda_to_bf16(b, a->y16, y, l->rows * out_c);
  } else
    tdm_cuda_gemm(b, true, false, out_c, k, rows, 1.0f, a->dy, out_c, cols, k, 0.0f, a->dw, k);
  return TRUE;
}

/* conv-implicit.cu's input gradient: stride 1, bf16, float32 dx without columns. */
static gboolean
run_own(TdmBackend *b, const TdmConvLayout *l, Arena *arena)
{
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  if (l->dir != TDM_CONV_DGRAD || !l->bf16 || a->dx == NULL || !aligned16(a->dx) ||
      !tdm_k_conv_dgrad_bf16_fits(CUDA_B(b)->major, s->c, s->out_c, s->kernel, s->kernel,
                                  s->pad, s->stride))
    return FALSE;
  /* dy16 and w16 are the layout's, aligned: nothing to stage. */
  if (arena->mode == RUN)
    TDM_CUDA_OK(b, tdm_k_conv_dgrad_bf16(a->dx, l->dy16, l->w16, s->n, s->h, s->w, s->c,
                                         s->out_c, s->kernel, s->kernel, s->pad,
                                         CUDA_B(b)->stream));
  return TRUE;
}

/* A cuDNN plan, its operands staged where they are not aligned or not of its type. */
static gboolean
run_cudnn(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c, Arena *arena,
          char **error)
{
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  size_t in_count = (size_t)s->n * s->h * s->w * s->c, out_count = l->rows * s->out_c;
  size_t w_count = (size_t)s->out_c * l->k;
  Mode mode = arena->mode;
  void *image = NULL, *filter = NULL, *out = NULL;
  /* The tensor written, as cuDNN writes it, and where it goes after. */
  void *result = NULL, *dest = NULL;
  size_t result_count = 0;

  switch (l->dir) {
  case TDM_CONV_FORWARD:
  case TDM_CONV_WGRAD:
    if (l->bf16 && input_is_bf16(a)) {
      image = aligned_or_stage(b, arena, a->x, in_count * 2, TRUE);
    } else if (l->bf16) {
      image = take(arena, in_count * 2);
      if (image != NULL && mode == RUN)
        input16(b, a, image);
    } else {
      image = a->bn_mean != NULL || a->x_type != TDM_DTYPE_F32
                  ? NULL
                  : aligned_or_stage(b, arena, a->x, in_count * 4, TRUE);
    }
    break;
  case TDM_CONV_DGRAD:
    break;
  }
  if (l->dir != TDM_CONV_WGRAD)
    filter = l->bf16 ? (void *)l->w16 : aligned_or_stage(b, arena, a->w, w_count * 4, TRUE);
  if (l->dir != TDM_CONV_FORWARD)
    out = l->bf16 ? (void *)l->dy16 : aligned_or_stage(b, arena, a->dy, out_count * 4, TRUE);

  /* The written tensor: straight where the plan writes the destination's type (bf16
   * for a forward's y16, else float32) and the destination is aligned, else a staging
   * buffer copied, widened or rounded after. */
  gboolean target16 = l->dir == TDM_CONV_FORWARD && a->y16 != NULL;
  void *target = target16                     ? (void *)a->y16
                 : l->dir == TDM_CONV_FORWARD ? (void *)a->y
                 : l->dir == TDM_CONV_DGRAD   ? (void *)a->dx
                                              : (void *)a->dw;
  if (target == NULL)
    return FALSE;
  result_count = l->dir == TDM_CONV_FORWARD ? out_count
                 : l->dir == TDM_CONV_DGRAD ? in_count
                                            : w_count;
  gboolean wide = !l->bf16 || c->float_out;
  gboolean same_type = wide != target16;
  if (same_type && aligned16(target))
    result = target;
  else {
    result = take(arena, result_count * (wide ? 4 : 2));
    dest = target;
  }
  void *workspace = NULL;
  if (c->plan->workspace > 0)
    workspace = take(arena, (size_t)c->plan->workspace);
  if ((l->dir != TDM_CONV_DGRAD && image == NULL) || (l->dir != TDM_CONV_WGRAD && filter == NULL) ||
      (l->dir != TDM_CONV_FORWARD && out == NULL) || result == NULL ||
      (c->plan->workspace > 0 && workspace == NULL))
    return FALSE;
  if (mode != RUN)
    return TRUE;
  switch (l->dir) {
  case TDM_CONV_FORWARD:
    out = result;
    break;
  case TDM_CONV_DGRAD:
    image = result;
    break;
  case TDM_CONV_WGRAD:
    filter = result;
    break;
  }
  if (!tdm_cuda_begin(b))
    return TRUE;
  if (!tdm_cudnn_plan_run(CUDA_B(b)->cudnn_api, CUDA_B(b)->cudnn, c->plan, image, filter, out,
                          workspace, error))
    return FALSE;
  if (dest != NULL) {
    if (same_type)
      tdm_backend_copy(b, dest, result, result_count * (wide ? 4 : 2));
    else if (wide)
      tdm_cuda_to_bf16(b, dest, result, result_count);
    else
      TDM_CUDA_OK(b, tdm_k_from_bf16(dest, result, result_count, CUDA_B(b)->stream));
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
    return run_own(b, l, arena);
  case TDM_CONV_CUDNN:
    return run_cudnn(b, l, c, arena, error);
  }
  return FALSE;
}

gboolean
tdm_conv_candidate_run(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c,
                       char **error)
{
  *error = NULL;
  Arena arena = arena_of(l, RUN);
  gboolean ran = call(b, l, c, &arena, error);
  if (!ran && *error == NULL)
    *error = g_strdup_printf("%s does not take the shape", c->name);
  return ran;
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
  g_free(c);
}

static TdmConvCandidate *
candidate(TdmConvKind kind, const char *name)
{
  TdmConvCandidate *c = g_new0(TdmConvCandidate, 1);
  c->kind = kind;
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

/* cuDNN's plans for the layout, as candidates (at most 6 of each output type), or only
 * the one named (engine, rank, output) when `only` names one. */
static void
add_cudnn(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, const char *only)
{
  gint64 only_engine = -1;
  int only_rank = -1;
  char only_out = 0;
  if (only != NULL &&
      (sscanf(only, "cudnn:e%" G_GINT64_FORMAT ":r%d:%c", &only_engine, &only_rank,
              &only_out) != 3 ||
       only_rank < 0 || (only_out != 'f' && only_out != 'h')))
    return;
  cudnnHandle_t handle = tdm_conv_cudnn_handle(b);
  if (handle == NULL || CUDA_B(b)->capturing)
    return;
  const TdmConvArgs *a = l->a;
  if (!l->bf16 && (a->bn_mean != NULL || a->x_type != TDM_DTYPE_F32))
    return;
  int operand = l->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  int outputs[2] = {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16};
  TdmCudnnFilter filter = {b->precision};
  for (int o = 0; o < (l->bf16 ? 2 : 1); o++) {
    if (only != NULL && only_out != (o == 0 ? 'f' : 'h'))
      continue;
    g_autofree char *why = NULL;
    GPtrArray *plans = tdm_cudnn_conv_plans(tdm_cudnn_get(), handle, l->dir, &a->shape, operand,
                                            outputs[o], filter, 6, only_rank, &why);
    for (guint i = 0; i < plans->len; i++) {
      TdmCudnnPlan *p = g_ptr_array_index(plans, i);
      if (only != NULL && p->engine != only_engine)
        continue; /* another library's list: the name means another engine now */
      g_autofree char *name = g_strdup_printf("cudnn:e%" G_GINT64_FORMAT ":r%d:%c", p->engine,
                                              p->rank, o == 0 ? 'f' : 'h');
      TdmConvCandidate *c = candidate(TDM_CONV_CUDNN, name);
      c->plan = p;
      c->float_out = o == 0;
      char *error = NULL;
      Arena arena = arena_of(l, FIT);
      if (run_cudnn(b, l, c, &arena, &error))
        g_ptr_array_add(list, c);
      else
        tdm_conv_candidate_free(c);
      g_free(error);
    }
    g_ptr_array_free(plans, TRUE);
    if (why != NULL)
      g_debug("%s: cuDNN %s %s: %s", b->name, l->dir == TDM_CONV_FORWARD ? "forward"
                                              : l->dir == TDM_CONV_DGRAD ? "dgrad" : "wgrad",
              o == 0 ? "float32 output" : "bf16 output", why);
  }
}

GPtrArray *
tdm_conv_candidates_for(TdmBackend *b, const TdmConvLayout *l, const char *only)
{
  GPtrArray *list = g_ptr_array_new_with_free_func((GDestroyNotify)tdm_conv_candidate_free);
  Arena arena = arena_of(l, FIT);
  if ((only == NULL || g_str_equal(only, "im2col")) && run_im2col(b, l, &arena))
    g_ptr_array_add(list, candidate(TDM_CONV_IM2COL, "im2col"));
  arena = arena_of(l, FIT);
  if ((only == NULL || g_str_equal(only, "own:dgrad")) && run_own(b, l, &arena))
    g_ptr_array_add(list, candidate(TDM_CONV_OWN, "own:dgrad"));
  if (only == NULL || g_str_has_prefix(only, "cudnn:"))
    add_cudnn(b, l, list, only);
  return list;
}
