/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-phases.c — the input gradient by phases
 * (tdm-backend-cuda-conv-phases.h): which calls it takes, each phase's graph over views of dy
 * and dx and its plans, the candidate's workspace and its run.
 *
 * Each phase that convolves is its own graph (its kernel's size, its padding before and
 * after and its views' sizes differ from phase to phase); a candidate is one engine with
 * a plan for every one of them, found by asking the most demanding phase's heuristics
 * (lead_of()) for their engines and every other phase for a plan of each
 * (tdm_cudnn_conv_plans()'s only_engine).
 * A plan refused as it is built leaves the engine out; one refused as it runs makes the
 * run fail with cuDNN's word, and the engine chooses again without it
 * (tdm-backend-cuda-conv-engine.c).
 */
#include "tdm-backend-cuda-conv-phases.h"
#include "tdm-backend-cuda-conv-name.h"

#include "conv-phases-plan.h"

#define MAX_PHASES (TDM_K_PHASES_MAX_STRIDE * TDM_K_PHASES_MAX_STRIDE)

struct _TdmConvPhases {
  int count;                      /* stride² */
  gboolean prepadded;             /* over dy's copy with margins (tdm_k_phases_pad()) */
  TdmKPhasesPad pad;              /* that copy's margins and size */
  TdmKPhase phase[MAX_PHASES];    /* in order (py, px); views of the copy where prepadded */
  TdmCudnnPlan *plan[MAX_PHASES]; /* a phase that convolves: its plan; else NULL */
  gboolean zeros;                 /* some phase writes zeros: dx cleared first */
  int64_t workspace;              /* the most any plan needs */
};

void
tdm_conv_phases_free(TdmConvPhases *p)
{
  if (p == NULL)
    return;
  for (int i = 0; i < p->count; i++)
    tdm_cudnn_plan_free(p->plan[i]);
  g_free(p);
}

/* dx's destination (dx16 as bf16, else dx) and dy as the plans read it (the layout's
 * bf16 dy in a bf16 run, the caller's float32 dy otherwise). */
static void *
destination(const TdmConvLayout *l)
{
  return l->a->dx16 != NULL ? (void *)l->a->dx16 : (void *)l->a->dx;
}

static const void *
operand_dy(const TdmConvLayout *l)
{
  return l->bf16 ? (const void *)l->dy16 : (const void *)l->a->dy;
}

/* Whether the call is one the phases take: an input gradient of stride 2 to
 * TDM_K_PHASES_MAX_STRIDE, channels in and out multiples of 8 (each view starts 16 bytes
 * from a boundary, as cuDNN's descriptors say), dx's destination and dy aligned. */
static gboolean
takes(const TdmConvLayout *l)
{
  const TdmConvShape *s = &l->a->shape;
  void *dx = destination(l);
  const void *dy = operand_dy(l);
  return l->dir == TDM_CONV_DGRAD && s->stride >= 2 && s->stride <= TDM_K_PHASES_MAX_STRIDE &&
         s->c % 8 == 0 && s->out_c % 8 == 0 && dx != NULL && tdm_conv_aligned16(dx) &&
         dy != NULL && tdm_conv_aligned16(dy) && (l->bf16 || l->a->dx16 == NULL);
}

static size_t
operand_size(const TdmConvLayout *l)
{
  return l->bf16 ? sizeof(uint16_t) : sizeof(float);
}

static size_t
output_size(const TdmConvLayout *l)
{
  return l->a->dx16 != NULL ? sizeof(uint16_t) : sizeof(float);
}

/* The candidate's room in the workspace. */
typedef struct {
  void *sorted;    /* the phases' kernels */
  void *padded;    /* dy's copy with margins (prepadded), or NULL */
  void *workspace; /* cuDNN's, or NULL */
  size_t need;     /* bytes from the workspace's start */
} Room;

static Room
room_of(const TdmConvLayout *l, const TdmConvPhases *p)
{
  const TdmConvShape *s = &l->a->shape;
  char *work = l->a->work;
  size_t at = (size_t)(l->scratch - work);
  Room r = {0};
  r.sorted = tdm_conv_piece(work, &at,
                            (size_t)s->out_c * s->kernel * s->kernel * s->c * operand_size(l));
  if (p->prepadded)
    r.padded = tdm_conv_piece(work, &at,
                              (size_t)s->n * p->pad.size[0] * p->pad.size[1] * s->out_c *
                                  operand_size(l));
  if (p->workspace > 0)
    r.workspace = tdm_conv_piece(work, &at, (size_t)p->workspace);
  r.need = at;
  return r;
}

gboolean
tdm_conv_phases_call(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c,
                     gboolean run, size_t *need, gboolean *refused, char **error)
{
  *need = 0;
  *refused = FALSE;
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  const TdmConvPhases *p = c->phases;
  if (p == NULL || !takes(l) || p->count != s->stride * s->stride ||
      c->float_out != (a->dx16 == NULL))
    return FALSE;
  Room r = room_of(l, p);
  *need = r.need;
  if (!run)
    return TRUE;
  if (r.need > a->work_bytes)
    return FALSE;
  if (!tdm_cuda_begin(b))
    return TRUE;
  cudaStream_t stream = CUDA_B(b)->stream;
  char *dx = destination(l);
  const char *dy = operand_dy(l), *sorted = r.sorted;
  size_t in = operand_size(l), out = output_size(l);
  if (p->zeros &&
      !TDM_CUDA_OK(b, cudaMemsetAsync(dx, 0, (size_t)s->n * s->h * s->w * s->c * out, stream)))
    return TRUE;
  const void *w = l->bf16 ? (const void *)l->w16 : (const void *)a->w;
  if (!TDM_CUDA_OK(b, tdm_k_conv_phases_weights(r.sorted, w, l->bf16, s->out_c, s->c, s->kernel,
                                                s->pad, s->stride, stream)))
    return TRUE;
  if (p->prepadded) {
    /* The views read the copy: dy with every phase's padding around it. */
    const TdmKPhasesPad *pd = &p->pad;
    if (!TDM_CUDA_OK(b, tdm_k_conv_phases_pad(r.padded, dy, l->bf16, s->n, pd->dy_size[0],
                                              pd->dy_size[1], s->out_c, pd->before[0],
                                              pd->after[0], pd->before[1], pd->after[1],
                                              stream)))
      return TRUE;
    dy = r.padded;
  }
  for (int i = 0; i < p->count; i++) {
    const TdmKPhase *ph = &p->phase[i];
    if (p->plan[i] == NULL)
      continue;
    if (!tdm_cudnn_plan_run(CUDA_B(b)->cudnn_api, CUDA_B(b)->cudnn, p->plan[i],
                            (void *)(dy + ph->x_offset * in),
                            (void *)(sorted + ph->w_offset * in), dx + ph->y_offset * out,
                            r.workspace, refused, error))
      return FALSE;
  }
  return TRUE;
}

/* The phases of shape s, without plans: over dy, or over its copy with margins
 * (prepadded: every phase unpadded). */
static TdmConvPhases *
phases_new(const TdmConvShape *s, gboolean prepadded)
{
  TdmConvPhases *p = g_new0(TdmConvPhases, 1);
  p->count = s->stride * s->stride;
  p->prepadded = prepadded;
  p->pad = tdm_k_phases_pad(s->h, s->w, s->kernel, s->pad, s->stride);
  for (int i = 0; i < p->count; i++) {
    p->phase[i] = tdm_k_phase(s->n, s->h, s->w, s->c, s->out_c, s->kernel, s->pad, s->stride,
                              i / s->stride, i % s->stride);
    if (prepadded)
      p->phase[i] = tdm_k_phase_prepadded(p->phase[i], &p->pad, s->out_c);
    p->zeros = p->zeros || p->phase[i].kind == TDM_K_PHASE_ZERO;
  }
  return p;
}

/* Phase ph's plans as a graph over its views (see tdm_cudnn_conv_plans() for most,
 * only_rank, only_engine, *why_not). */
static GPtrArray *
phase_plans(TdmBackend *b, const TdmConvLayout *l, const TdmKPhase *ph, int most, int only_rank,
            gint64 only_engine, char **why_not)
{
  int operand = l->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  int output = l->a->dx16 != NULL ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  TdmCudnnView x, w, y;
  memcpy(x.dims, ph->x_dims, sizeof x.dims);
  memcpy(x.strides, ph->x_strides, sizeof x.strides);
  w = tdm_cudnn_packed(ph->w_dims[0], ph->w_dims[1], ph->w_dims[2], ph->w_dims[3]);
  memcpy(y.dims, ph->y_dims, sizeof y.dims);
  memcpy(y.strides, ph->y_strides, sizeof y.strides);
  TdmCudnnBuild bd;
  cudnnHandle_t handle = CUDA_B(b)->cudnn;
  tdm_cudnn_build_init(&bd, tdm_cudnn_get());
  cudnnBackendDescriptor_t graph = tdm_cudnn_build_view_graph(
      &bd, handle, TDM_CONV_FORWARD, &x, &w, &y, 1, ph->pre, ph->post, operand, output);
  /* MODE_A's list, then FALLBACK's engines that A did not list (tdm_cudnn_build_plans()
   * keeps one plan an engine): a rank is a place in that list, fixed for a shape. */
  static const int modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  TdmCudnnFilter filter = {b->precision};
  return tdm_cudnn_build_plans(&bd, handle, graph, modes, G_N_ELEMENTS(modes), filter, FALSE,
                               most, only_rank, only_engine, why_not);
}

static void
plans_free(GPtrArray *plans)
{
  for (guint i = 0; i < plans->len; i++)
    tdm_cudnn_plan_free(g_ptr_array_index(plans, i));
  g_ptr_array_free(plans, TRUE);
}

/* Says in the debug log why phase i of the call has no plan (of engine `engine`, or of any
 * where < 0): the answer to whether cuDNN takes a view. */
static void
say_refused(TdmBackend *b, const TdmConvLayout *l, const TdmConvPhases *p, int i, gint64 engine,
            const char *why)
{
  const TdmConvShape *s = &l->a->shape;
  const TdmKPhase *ph = &p->phase[i];
  g_autofree char *which =
      engine >= 0 ? g_strdup_printf("engine %" G_GINT64_FORMAT, engine) : g_strdup("no engine");
  g_debug("%s: cuDNN phases%s of dgrad n%d h%d w%d c%d o%d k%d p%d s%d: phase (%d, %d), "
          "%" G_GINT64_FORMAT "×%" G_GINT64_FORMAT " taps over %" G_GINT64_FORMAT
          "×%" G_GINT64_FORMAT " of dy%s, padded %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT
          " × %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT ", into %" G_GINT64_FORMAT
          "×%" G_GINT64_FORMAT " of dx: %s: %s",
          b->name, p->prepadded ? " (pre-padded)" : "", s->n, s->h, s->w, s->c, s->out_c,
          s->kernel, s->pad, s->stride, i / s->stride, i % s->stride, ph->w_dims[2],
          ph->w_dims[3], ph->x_dims[2], ph->x_dims[3], p->prepadded ? "'s copy" : "",
          ph->pre[0], ph->post[0], ph->pre[1], ph->post[1], ph->y_dims[2], ph->y_dims[3],
          which, why != NULL ? why : "none");
}

/* A candidate of lead plan `lead` (phase `first`'s): the same engine's plan for every
 * other phase that convolves, or NULL where one has none (said). Takes lead. */
static TdmConvCandidate *
candidate_of(TdmBackend *b, const TdmConvLayout *l, gboolean prepadded, int first,
             TdmCudnnPlan *lead, char out)
{
  TdmConvPhases *p = phases_new(&l->a->shape, prepadded);
  p->plan[first] = lead;
  p->workspace = lead->workspace;
  for (int i = 0; i < p->count; i++) {
    if (i == first || p->phase[i].kind != TDM_K_PHASE_CONV)
      continue;
    g_autofree char *why = NULL;
    GPtrArray *plans = phase_plans(b, l, &p->phase[i], 1, -1, lead->engine, &why);
    if (plans->len == 0) {
      say_refused(b, l, p, i, lead->engine, why);
      plans_free(plans);
      tdm_conv_phases_free(p);
      return NULL;
    }
    p->plan[i] = g_ptr_array_steal_index(plans, 0);
    p->workspace = MAX(p->workspace, p->plan[i]->workspace);
    plans_free(plans);
  }
  TdmCudnnName spelt = {lead->engine, lead->rank, out, FALSE, 0, FALSE, TRUE, prepadded};
  g_autofree char *name = tdm_cudnn_name_format(&spelt);
  TdmConvCandidate *c = g_new0(TdmConvCandidate, 1);
  c->kind = TDM_CONV_CUDNN_PHASES;
  c->phases = p;
  c->chunks = tdm_conv_even_chunks(1, 0, 0);
  c->float_out = out == 'f';
  g_strlcpy(c->name, name, sizeof c->name);
  return c;
}

/* The phase whose heuristics' engines are tried: the most demanding one that convolves
 * (the most taps, then the most axes padded unevenly, then the first), as an engine
 * that takes a 1×1 kernel without padding may refuse a 2×2 one padded after only;
 * count where none convolves. A function of the shape alone, so a cached name's rank
 * means the same plan from one run to the next. */
static int
lead_of(const TdmConvPhases *p)
{
  int lead = p->count;
  int64_t best_taps = -1;
  int best_uneven = -1;
  for (int i = 0; i < p->count; i++) {
    const TdmKPhase *ph = &p->phase[i];
    if (ph->kind != TDM_K_PHASE_CONV)
      continue;
    int64_t taps = ph->w_dims[2] * ph->w_dims[3];
    int uneven = (ph->pre[0] != ph->post[0]) + (ph->pre[1] != ph->post[1]);
    if (taps > best_taps || (taps == best_taps && uneven > best_uneven)) {
      lead = i;
      best_taps = taps;
      best_uneven = uneven;
    }
  }
  return lead;
}

/* Offered only with TANDEM_CUDNN_PHASES=1 until the candidates have run on a GPU (built
 * and tested on the CPU side only, 2026-12-08); a name asked for (a test's, or a cached
 * choice made with it on) is always offered. */
static gboolean
phases_wanted(const char *only)
{
  return only != NULL || g_strcmp0(g_getenv("TANDEM_CUDNN_PHASES"), "1") == 0;
}

/* Adds the candidates of one form (over dy, or over its pre-padded copy) to list: the
 * lead phase's plans (only the rank and engine `wanted` names, where not NULL), each
 * with the same engine's plan for every other phase. */
static void
add_form(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, gboolean prepadded,
         const TdmCudnnName *wanted, char out)
{
  g_autoptr(TdmConvPhases) shape = phases_new(&l->a->shape, prepadded);
  int first = lead_of(shape);
  if (first == shape->count)
    return;
  /* Every plan of the lead's engines, tried in the heuristics' order until
   * TDM_CONV_PHASES_MOST candidates are built (one engine that fails another phase
   * leaves room for the next); the rest freed. */
  g_autofree char *why = NULL;
  GPtrArray *leads = phase_plans(b, l, &shape->phase[first], wanted != NULL ? 1 : G_MAXINT,
                                 wanted != NULL ? wanted->rank : -1,
                                 wanted != NULL ? wanted->engine : -1, &why);
  if (leads->len == 0)
    say_refused(b, l, shape, first, wanted != NULL ? wanted->engine : -1, why);
  int built = 0;
  for (guint i = 0; i < leads->len; i++) {
    TdmCudnnPlan *lead = g_ptr_array_index(leads, i);
    if (built >= TDM_CONV_PHASES_MOST) {
      tdm_cudnn_plan_free(lead);
      continue;
    }
    TdmConvCandidate *c = candidate_of(b, l, prepadded, first, lead, out);
    if (c != NULL) {
      g_ptr_array_add(list, c);
      built++;
    }
  }
  g_ptr_array_free(leads, TRUE);
}

void
tdm_conv_phases_add(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, const char *only)
{
  TdmCudnnName wanted;
  if ((only != NULL && (!tdm_cudnn_name_parse(only, &wanted) || !wanted.phases)) || !takes(l) ||
      !phases_wanted(only))
    return;
  cudnnHandle_t handle = tdm_conv_cudnn_handle(b);
  if (handle == NULL || CUDA_B(b)->capturing)
    return;
  char out = l->a->dx16 != NULL ? 'h' : 'f';
  if (only != NULL && wanted.out != out)
    return; /* a cached name for another destination: the choice is made again */
  /* Over dy, then over its copy with margins where any phase pads (else the same
   * graphs, and a copy for nothing). */
  const TdmConvShape *s = &l->a->shape;
  TdmKPhasesPad pd = tdm_k_phases_pad(s->h, s->w, s->kernel, s->pad, s->stride);
  for (int form = 0; form < 2; form++) {
    gboolean prepadded = form == 1;
    if ((prepadded && !tdm_k_phases_pad_any(&pd)) ||
        (only != NULL && wanted.prepadded != prepadded))
      continue;
    add_form(b, l, list, prepadded, only != NULL ? &wanted : NULL, out);
  }
}
