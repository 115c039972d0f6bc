/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-fused.c — the fused cuDNN candidates of the convolution engine
 * (tdm-backend-cuda-conv-fused.h): which calls they take, their plans, their workspace
 * and their run.
 *
 * The workspace, from the layout's scratch on (after its reservations, as every
 * candidate's: in the weight gradient, dy as bf16 at its start): the scale and the shift
 * (float32, c each), a weight gradient's bf16 result where the plan writes bf16 (then
 * widened into dw), then cuDNN's workspace, each at a 256-byte boundary. The scale and
 * shift are written on every run from the bn's statistics and affine (tdm_k_bn_affine:
 * the pair bn_forward and im2col_bf16_bn apply), so a run depends on nothing an earlier
 * one left. The plans a backend listed stay with it (TdmBackendCuda.fused_plans).
 */
#include "tdm-backend-cuda-conv-fused.h"
#include "tdm-backend-cuda-conv-fused-graph.h"
#include "tdm-backend-cuda-conv-name.h"

/* Where the call writes: the forward's y16 as bf16 or y as float32 (*type, cuDNN's);
 * the weight gradient's dw (float32). NULL when nowhere. */
static void *
destination(const TdmConvLayout *l, int *type)
{
  const TdmConvArgs *a = l->a;
  if (l->dir == TDM_CONV_WGRAD) {
    *type = CUDNN_DATA_FLOAT;
    return a->dw;
  }
  *type = a->y16 != NULL ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  return a->y16 != NULL ? (void *)a->y16 : (void *)a->y;
}

/* Whether the call has the prologue the graph takes: a bf16 run's forward or weight
 * gradient of an input stored as bf16 that the bn before normalizes, every tensor the
 * plan reads or writes 16-byte aligned (the layout's w16 and dy16 are), and so is every
 * pixel's row of channels in and out (c and out_c multiples of 8: what a network has
 * past its stem, which no bn precedes; cuDNN's runtime fusion wants aligned vectors, and
 * a plan compiled for an odd count would cost seconds of the pre-warm for a shape no
 * network has). */
static gboolean
takes(const TdmConvLayout *l)
{
  const TdmConvArgs *a = l->a;
  int type;
  void *out = destination(l, &type);
  gboolean operands =
      l->dir == TDM_CONV_FORWARD ? tdm_conv_aligned16(l->w16)
      : l->dir == TDM_CONV_WGRAD ? l->dy16 != NULL && tdm_conv_aligned16(l->dy16)
                                 : FALSE;
  return l->bf16 && operands && a->shape.c % 8 == 0 && a->shape.out_c % 8 == 0 &&
         a->bn_mean != NULL && a->bn_invstd != NULL && a->bn_gamma != NULL &&
         a->bn_beta != NULL && a->x_type == TDM_DTYPE_BF16 && a->x != NULL &&
         tdm_conv_aligned16(a->x) && out != NULL && tdm_conv_aligned16(out);
}

/* The candidate's room in the workspace for a plan of `workspace` bytes. */
typedef struct {
  float *scale, *shift;
  uint16_t *stage;             /* a weight gradient's bf16 result, or NULL */
  void *workspace;             /* NULL when the plan needs none */
  size_t need;                 /* bytes from the workspace's start */
} Room;

static Room
room_of(const TdmConvLayout *l, const TdmConvCandidate *c)
{
  const TdmConvShape *s = &l->a->shape;
  char *work = l->a->work;
  size_t vector = (size_t)s->c * sizeof(float);
  size_t at = (size_t)(l->scratch - work);
  Room r = {0};
  r.scale = tdm_conv_piece(work, &at, vector);
  r.shift = tdm_conv_piece(work, &at, vector);
  if (l->dir == TDM_CONV_WGRAD && !c->float_out)
    r.stage = tdm_conv_piece(work, &at,
                             (size_t)s->out_c * s->kernel * s->kernel * s->c * sizeof(uint16_t));
  if (c->plan->workspace > 0)
    r.workspace = tdm_conv_piece(work, &at, (size_t)c->plan->workspace);
  r.need = at;
  return r;
}

gboolean
tdm_conv_fused_call(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c,
                    gboolean run, size_t *need, char **error)
{
  *need = 0;
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  int type;
  void *out = destination(l, &type);
  /* The plan's graph has the call's ReLU; a forward's writes its destination's type. */
  if (c->plan == NULL || !takes(l) || c->fused_relu != a->bn_relu ||
      (l->dir == TDM_CONV_FORWARD && c->float_out != (type == CUDNN_DATA_FLOAT)))
    return FALSE;
  Room r = room_of(l, c);
  *need = r.need;
  if (!run)
    return TRUE;
  if (r.need > a->work_bytes)
    return FALSE;
  if (!tdm_cuda_begin(b))
    return TRUE;
  cudaStream_t stream = CUDA_B(b)->stream;
  if (!TDM_CUDA_OK(b, tdm_k_bn_affine(r.scale, r.shift, a->bn_mean, a->bn_invstd, a->bn_gamma,
                                      a->bn_beta, s->c, stream)))
    return TRUE;
  const TdmCudnn *dnn = CUDA_B(b)->cudnn_api;
  cudnnHandle_t handle = CUDA_B(b)->cudnn;
  if (l->dir == TDM_CONV_FORWARD)
    return tdm_cudnn_fused_run(dnn, handle, c->plan, a->x, l->w16, out, r.scale, r.shift,
                               r.workspace, error);
  void *dw = r.stage != NULL ? (void *)r.stage : out;
  if (!tdm_cudnn_fused_run(dnn, handle, c->plan, a->x, dw, l->dy16, r.scale, r.shift,
                           r.workspace, error))
    return FALSE;
  if (r.stage != NULL)
    TDM_CUDA_OK(b, tdm_k_from_bf16(out, r.stage,
                                   (size_t)s->out_c * s->kernel * s->kernel * s->c, stream));
  return TRUE;
}

/* A graph's listing, kept per backend (TdmBackendCuda.fused_plans): its plans (each
 * shared with the candidates made of it) and, where it has none, why. */
typedef struct {
  GPtrArray *plans;
  char *why;
} Listing;

static void
listing_free(gpointer data)
{
  Listing *listing = data;
  for (guint i = 0; i < listing->plans->len; i++)
    tdm_cudnn_plan_free(g_ptr_array_index(listing->plans, i));
  g_ptr_array_free(listing->plans, TRUE);
  g_free(listing->why);
  g_free(listing);
}

void
tdm_conv_fused_forget(TdmBackend *b)
{
  g_clear_pointer(&CUDA_B(b)->fused_plans, g_hash_table_destroy);
}

/* Adds the plans of one output type (`out`: 'f' float32, 'h' bf16) as candidates: the
 * graph's listing, built once per backend, or where only a cached name's plan is wanted
 * and the graph was never listed, that one plan alone. */
static void
add_plans(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, const TdmCudnnName *only,
          char out)
{
  TdmBackendCuda *cb = CUDA_B(b);
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  const char *direction = l->dir == TDM_CONV_FORWARD ? "forward" : "weight gradient";
  g_autofree char *key = g_strdup_printf("%s n%d h%d w%d c%d o%d k%d p%d s%d%s %c", direction,
                                         s->n, s->h, s->w, s->c, s->out_c, s->kernel, s->pad,
                                         s->stride, a->bn_relu ? " relu" : "", out);
  if (cb->fused_plans == NULL)
    cb->fused_plans = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, listing_free);
  Listing *listing = g_hash_table_lookup(cb->fused_plans, key);
  GPtrArray *one = NULL;
  g_autofree char *why = NULL;
  if (listing == NULL) {
    TdmCudnnFilter filter = {b->precision};
    GPtrArray *plans = tdm_cudnn_fused_plans(
        tdm_cudnn_get(), cb->cudnn, l->dir, s, a->bn_relu, CUDNN_DATA_BFLOAT16,
        out == 'f' ? CUDNN_DATA_FLOAT : CUDNN_DATA_BFLOAT16, filter, TDM_CONV_FUSED_MOST,
        only != NULL ? only->rank : -1, -1, &why);
    if (only != NULL) {
      one = plans;
    } else {
      listing = g_new0(Listing, 1);
      listing->plans = plans;
      listing->why = g_steal_pointer(&why);
      g_hash_table_replace(cb->fused_plans, g_strdup(key), listing);
      for (guint i = 0; i < plans->len; i++) {
        TdmCudnnPlan *p = g_ptr_array_index(plans, i);
        g_debug("%s: cuDNN fused %s: %s plan of engine %" G_GINT64_FORMAT " (rank %d)%s, %"
                G_GINT64_FORMAT " bytes of workspace",
                b->name, key, out == 'f' ? "float32" : "bf16", p->engine, p->rank,
                p->runtime_compiled ? ", compiled at run time" : "", p->workspace);
      }
      if (listing->why != NULL)
        g_debug("%s: cuDNN fused %s (%s output): %s", b->name, key,
                out == 'f' ? "float32" : "bf16", listing->why);
    }
  }
  GPtrArray *plans = one != NULL ? one : listing->plans;
  for (guint i = 0; i < plans->len; i++) {
    TdmCudnnPlan *p = g_ptr_array_index(plans, i);
    /* A name's rank, and its engine: another library's list means another engine. */
    gboolean wanted = only == NULL || (p->rank == only->rank && p->engine == only->engine);
    if (!wanted) {
      if (one != NULL)
        tdm_cudnn_plan_free(p);
      continue;
    }
    TdmCudnnName spelt = {p->engine, p->rank, out, FALSE, 0, TRUE};
    g_autofree char *name = tdm_cudnn_name_format(&spelt);
    TdmConvCandidate *c = g_new0(TdmConvCandidate, 1);
    c->kind = TDM_CONV_CUDNN_FUSED;
    c->plan = one != NULL ? p : tdm_cudnn_plan_share(p);
    c->chunks = tdm_conv_even_chunks(1, 0, 0);
    c->float_out = out == 'f';
    c->fused_relu = a->bn_relu;
    g_strlcpy(c->name, name, sizeof c->name);
    g_ptr_array_add(list, c);
  }
  if (one != NULL) {
    g_ptr_array_free(one, TRUE);
    if (why != NULL)
      g_debug("%s: cuDNN fused %s (%s output): %s", b->name, key,
              out == 'f' ? "float32" : "bf16", why);
  }
}

void
tdm_conv_fused_add(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, const char *only)
{
  TdmCudnnName wanted;
  if ((only != NULL && (!tdm_cudnn_name_parse(only, &wanted) || !wanted.fused)) || !takes(l) ||
      g_strcmp0(g_getenv("TANDEM_CUDNN_FUSED"), "0") == 0)
    return;
  cudnnHandle_t handle = tdm_conv_cudnn_handle(b);
  if (handle == NULL || CUDA_B(b)->capturing)
    return;
  /* A forward writes its destination's type; a weight gradient float32 (straight into
   * dw), or bf16 widened after where cuDNN has no float32 plan. */
  int type;
  destination(l, &type);
  char first = type == CUDNN_DATA_FLOAT ? 'f' : 'h';
  if (only != NULL) {
    /* A forward's cached name for another output: the choice is made again. */
    if (wanted.out == first || l->dir == TDM_CONV_WGRAD)
      add_plans(b, l, list, &wanted, wanted.out);
    return;
  }
  guint before = list->len;
  add_plans(b, l, list, NULL, first);
  if (l->dir == TDM_CONV_WGRAD && list->len == before)
    add_plans(b, l, list, NULL, 'h');
}
