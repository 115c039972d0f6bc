/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-engine.c — the convolution engine's choice: per shape, direction, precision
 * and layout, the fastest of the candidates (tdm-backend-cuda-conv-candidates.c) as timed with CUDA
 * events on the backend's stream the first time the shape comes (the pre-warm's eager
 * step), remembered per backend and on disk per GPU model (tdm-backend-cuda-conv-cache.c).
 *
 * Every candidate is deterministic (the same inputs give the same bits). No timing
 * where timing cannot or must not decide: while the stream is captured into a graph (a
 * provisional choice among what needs no cuDNN set-up, timed at the next eager call),
 * and under --exact (b->deterministic), where the rule is cuDNN's first plan in its
 * heuristics' order, else our own, else im2col: a function of the shape and the GPU
 * model, so every device of a kind agrees. A timed choice is found again on disk by
 * the next run, so two runs on one kind of GPU compute alike.
 * TANDEM_CONV=im2col turns the engine off (the replica's own composition, exactly as
 * before); =cudnn, =cudnn-fused or =own prefers that kind wherever it takes the shape.
 * The rule never prefers a fused cuDNN plan (compiled at run time, seconds a shape)
 * over another candidate: it is the rule's choice only where it is the only one.
 */
#include "tdm-backend-cuda-conv-engine.h"
#include "tdm-backend-cuda-conv-budget.h"
#include "tdm-backend-cuda-conv-cache.h"
#include "tdm-backend-cuda-conv-fused.h"
#include "tdm-i18n.h"

#define TIMED_RUNS 3

typedef struct {
  TdmConvCandidate *chosen;
  gboolean provisional;        /* chosen during a capture, untimed */
} Choice;

struct _TdmConvEngine {
  GHashTable *choices;         /* key → Choice */
  cudaEvent_t start, stop;
  char *model;                 /* the disk cache's file: GPU and library versions */
};

static const char *const direction_names[] = {"fwd", "dgrad", "wgrad"};
static const char *const precision_names[] = {"fp32", "tf32", "bf16"};

static void
choice_free(gpointer data)
{
  Choice *choice = data;
  tdm_conv_candidate_free(choice->chosen);
  g_free(choice);
}

/* The name the choices are kept under for GPU `ordinal`: its model, compute capability
 * and cuDNN's version; b's when b is its backend, else asked of the GPU; NULL when it
 * cannot be asked. */
static char *
model_of(int ordinal, TdmBackend *b)
{
  const TdmCudnn *dnn = tdm_cudnn_get();
  size_t version = dnn != NULL ? dnn->version : 0;
  if (b != NULL)
    return g_strdup_printf("%s-sm%d-cudnn%zu", CUDA_B(b)->gpu_name, CUDA_B(b)->major, version);
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return g_strdup_printf("%s-sm%d-cudnn%zu", prop.name, prop.major, version);
}

static TdmConvEngine *
engine(TdmBackend *b)
{
  TdmBackendCuda *cb = CUDA_B(b);
  if (cb->conv != NULL)
    return cb->conv;
  TdmConvEngine *e = g_new0(TdmConvEngine, 1);
  e->choices = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, choice_free);
  e->model = model_of(b->device_index, b);
  cb->conv = e;
  return e;
}

gboolean
tdm_backend_cuda_conv_workspace_recall(int ordinal, const char *plan, guint64 *bytes)
{
  g_autofree char *model = model_of(ordinal, NULL);
  return model != NULL && tdm_conv_cache_lookup_workspace(model, plan, bytes);
}

void
tdm_backend_cuda_conv_workspace_remember(TdmBackend *b, const char *plan, guint64 bytes)
{
  g_autofree char *model = model_of(b->device_index, b);
  tdm_conv_cache_store_workspace(model, plan, bytes);
}

void
tdm_cuda_conv_engine_free(TdmBackend *b)
{
  TdmBackendCuda *cb = CUDA_B(b);
  TdmConvEngine *e = cb->conv;
  if (e != NULL) {
    g_hash_table_destroy(e->choices);
    if (e->start != NULL)
      (void)cudaEventDestroy(e->start);
    if (e->stop != NULL)
      (void)cudaEventDestroy(e->stop);
    g_free(e->model);
    g_free(e);
    cb->conv = NULL;
  }
  tdm_conv_fused_forget(b);
  if (cb->cudnn != NULL) {
    cb->cudnn_api->destroy(cb->cudnn);
    cb->cudnn = NULL;
  }
}

/* TANDEM_CONV: -1 none, else the kind preferred; *off for im2col. */
static int
forced_kind(gboolean *off)
{
  const char *v = g_getenv("TANDEM_CONV");
  *off = v != NULL && g_str_equal(v, "im2col");
  if (v == NULL)
    return -1;
  if (g_str_equal(v, "cudnn"))
    return TDM_CONV_CUDNN;
  if (g_str_equal(v, "cudnn-fused"))
    return TDM_CONV_CUDNN_FUSED;
  if (g_str_equal(v, "own"))
    return TDM_CONV_OWN;
  return -1;
}

static char *
key_of(TdmBackend *b, const TdmConvLayout *l)
{
  const TdmConvShape *s = &l->a->shape;
  /* The operands' types change what each candidate costs (a bf16 output needs no
   * widening after a bf16-output plan), so they are part of the key; a bn without its
   * ReLU too (" linear"), as a fused plan's graph has the ReLU or not. */
  return g_strdup_printf("%s n%d h%d w%d c%d o%d k%d p%d s%d %s%s%s%s%s%s%s",
                         direction_names[l->dir], s->n, s->h, s->w, s->c, s->out_c, s->kernel,
                         s->pad, s->stride, precision_names[CLAMP(b->precision, 0, 2)],
                         l->a->bn_mean != NULL ? " bn" : "",
                         l->a->bn_mean != NULL && !l->a->bn_relu ? " linear" : "",
                         l->a->x_type == TDM_DTYPE_BF16 ? " x16" : "",
                         l->dir == TDM_CONV_FORWARD && l->a->y16 != NULL ? " y16" : "",
                         l->dir == TDM_CONV_DGRAD && l->a->dx16 != NULL ? " dx16" : "",
                         b->deterministic ? " exact" : "");
}

/* The untimed rule: cuDNN's first plan, else ours, else im2col (the list's order). */
static guint
by_rule(GPtrArray *list)
{
  for (int kind = TDM_CONV_CUDNN; kind >= TDM_CONV_IM2COL; kind--)
    for (guint i = 0; i < list->len; i++)
      if (((TdmConvCandidate *)g_ptr_array_index(list, i))->kind == (TdmConvKind)kind)
        return i;
  return 0;
}

static gboolean
events(TdmBackend *b, TdmConvEngine *e)
{
  if (e->start == NULL &&
      !TDM_CUDA_OK(b, cudaEventCreate(&e->start)))
    return FALSE;
  if (e->stop == NULL && !TDM_CUDA_OK(b, cudaEventCreate(&e->stop)))
    return FALSE;
  return TRUE;
}

/* Times each candidate (one run to warm up, then TIMED_RUNS), the fastest's index or
 * -1; those that fail at run time are skipped. */
static int
fastest(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list)
{
  TdmConvEngine *e = engine(b);
  TdmBackendCuda *cb = CUDA_B(b);
  if (!events(b, e))
    return -1;
  int best = -1;
  for (guint i = 0; i < list->len; i++) {
    TdmConvCandidate *c = g_ptr_array_index(list, i);
    char *error = NULL;
    gboolean ok = tdm_conv_candidate_run(b, l, c, &error);
    if (ok && TDM_CUDA_OK(b, cudaEventRecord(e->start, cb->stream))) {
      for (int r = 0; ok && r < TIMED_RUNS; r++) {
        g_clear_pointer(&error, g_free);
        ok = tdm_conv_candidate_run(b, l, c, &error);
      }
    }
    float ms = 0.0f;
    ok = ok && TDM_CUDA_OK(b, cudaEventRecord(e->stop, cb->stream)) &&
         TDM_CUDA_OK(b, cudaEventSynchronize(e->stop)) &&
         TDM_CUDA_OK(b, cudaEventElapsedTime(&ms, e->start, e->stop));
    if (tdm_backend_failed(b))
      return -1;
    if (!ok) {
      g_debug("%s: convolution candidate %s skipped: %s", b->name, c->name,
              error != NULL ? error : "it failed");
      g_free(error);
      continue;
    }
    g_free(error);
    c->ms = ms / TIMED_RUNS;
    g_debug("%s: convolution candidate %s: %.3f ms", b->name, c->name, c->ms);
    if (best < 0 || c->ms < ((TdmConvCandidate *)g_ptr_array_index(list, best))->ms)
      best = (int)i;
  }
  return best;
}

static int
named(GPtrArray *list, const char *name)
{
  for (guint i = 0; i < list->len; i++)
    if (g_str_equal(((TdmConvCandidate *)g_ptr_array_index(list, i))->name, name))
      return (int)i;
  return -1;
}

/* Leaves in list the candidates within the workspace budget (tdm-backend-cuda-conv-budget.h)
 * and the caller's limit; *most gets the most any of them needs. */
static void
within_budget(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, size_t *most)
{
  g_autofree guint64 *needs = g_new(guint64, MAX(list->len, 1));
  g_autofree gboolean *eligible = g_new(gboolean, MAX(list->len, 1));
  for (guint i = 0; i < list->len; i++)
    needs[i] = tdm_conv_candidate_need(b, l, g_ptr_array_index(list, i));
  /* What the layout reserves before any candidate's scratch: every need includes it. */
  tdm_conv_budget_select(needs, list->len, (guint64)(l->scratch - (char *)l->a->work), eligible);
  *most = 0;
  size_t limit = l->a->work_limit;
  for (guint i = list->len; i-- > 0;) {
    if (eligible[i] && (limit == 0 || needs[i] <= limit)) {
      *most = MAX(*most, (size_t)needs[i]);
      continue;
    }
    g_debug("%s: convolution candidate %s left out: it needs %" G_GUINT64_FORMAT
            " bytes of the workspace", b->name,
            ((TdmConvCandidate *)g_ptr_array_index(list, i))->name, needs[i]);
    g_ptr_array_remove_index(list, i);
  }
}

/* Makes the choice for key (no lock of its own): the process's (or the disk's) choice
 * for the key where there is one and it still takes the call, else the fastest
 * candidate within the budget, timed now (after the call's preparation, once, when
 * *prepared is FALSE), or the rule's while untimed. *timed says which. NULL when no
 * candidate takes it, or when timing them needs more workspace than the call has:
 * then *want says how much (nothing was queued). */
static TdmConvCandidate *
decide(TdmBackend *b, const TdmConvLayout *l, const char *key, int forced, gboolean untimed,
       gboolean *prepared, gboolean *timed, size_t *want)
{
  TdmConvEngine *e = engine(b);
  *timed = FALSE;
  g_autofree char *cached = forced < 0 && !untimed ? tdm_conv_cache_lookup(e->model, key) : NULL;
  if (cached != NULL) {
    g_autoptr(GPtrArray) one = tdm_conv_candidates_for(b, l, cached);
    if (one->len == 1 && (l->a->work_limit == 0 ||
                          tdm_conv_candidate_need(b, l, g_ptr_array_index(one, 0)) <=
                              l->a->work_limit))
      return g_ptr_array_steal_index(one, 0);
  }
  g_autoptr(GPtrArray) list = tdm_conv_candidates_for(b, l, NULL);
  if (forced >= 0) {
    gboolean any = FALSE;
    for (guint i = 0; i < list->len; i++)
      any = any || ((TdmConvCandidate *)g_ptr_array_index(list, i))->kind == (TdmConvKind)forced;
    for (guint i = list->len; any && i-- > 0;)
      if (((TdmConvCandidate *)g_ptr_array_index(list, i))->kind != (TdmConvKind)forced)
        g_ptr_array_remove_index(list, i);
  }
  size_t most = 0;
  within_budget(b, l, list, &most);
  if (list->len == 0)
    return NULL;
  int pick = -1;
  if (!untimed && list->len > 1) {
    if (most > l->a->work_bytes) {
      *want = most;
      return NULL;
    }
    if (!*prepared) {
      tdm_conv_prepare(b, l);
      *prepared = TRUE;
    }
    pick = fastest(b, l, list);
    *timed = pick >= 0;
  }
  if (pick < 0)
    pick = (int)by_rule(list);
  TdmConvCandidate *chosen = g_ptr_array_steal_index(list, (guint)pick);
  if (forced < 0 && !untimed)
    tdm_conv_cache_store(e->model, key, chosen->name, chosen->ms);
  return chosen;
}

/* Timed choices are made one at a time in the process and shared through the cache's
 * table (tdm-backend-cuda-conv-cache.h), so every replica on a kind of GPU takes the same one: two
 * replicas of a step compute alike, and a run and its rerun too. */
static GMutex choice_lock;

/* The choice for the layout's key: this backend's, or made now (decide(), which may
 * ask for more workspace first: *want, raised to it). */
static TdmConvCandidate *
choose(TdmBackend *b, const TdmConvLayout *l, gboolean *prepared, size_t *want)
{
  TdmConvEngine *e = engine(b);
  TdmBackendCuda *cb = CUDA_B(b);
  g_autofree char *key = key_of(b, l);
  Choice *known = g_hash_table_lookup(e->choices, key);
  if (known != NULL && !(known->provisional && !cb->capturing))
    return known->chosen;
  gboolean off;
  int forced = forced_kind(&off);
  gboolean untimed = b->deterministic || cb->capturing;
  gboolean shared = forced < 0 && !untimed;
  gboolean timed = FALSE;
  if (shared)
    g_mutex_lock(&choice_lock);
  size_t short_of = 0;
  TdmConvCandidate *chosen = decide(b, l, key, forced, untimed, prepared, &timed, &short_of);
  *want = MAX(*want, short_of);
  if (shared)
    g_mutex_unlock(&choice_lock);
  if (chosen == NULL)
    return NULL;
  g_debug("%s: %s → %s (%.3f ms%s)", b->name, key, chosen->name, chosen->ms,
          timed ? "" : ", untimed");
  Choice *choice = g_new0(Choice, 1);
  choice->chosen = chosen;
  choice->provisional = cb->capturing && !b->deterministic;
  g_hash_table_replace(e->choices, g_steal_pointer(&key), choice);
  return chosen;
}

static void
run(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c)
{
  char *error = NULL;
  if (!tdm_conv_candidate_run(b, l, c, &error))
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("%s: convolution (%s): %s"), b->name,
                     c->name, error);
  g_free(error);
}

/* Tells the caller what the choice needs; TRUE when it fits the workspace. */
static gboolean
needs(const TdmConvArgs *a, size_t bytes)
{
  if (a->work_needed != NULL)
    *a->work_needed = bytes;
  return bytes <= a->work_bytes;
}

gboolean
tdm_cuda_conv_engine_forward(TdmBackend *b, const TdmConvArgs *a)
{
  gboolean off;
  forced_kind(&off);
  TdmConvLayout l;
  needs(a, 0);
  if (off || tdm_backend_failed(b) || !tdm_conv_layout(b, a, TDM_CONV_FORWARD, &l) ||
      !tdm_cuda_begin(b))
    return FALSE;
  gboolean prepared = FALSE;
  size_t want = 0;
  TdmConvCandidate *c = choose(b, &l, &prepared, &want);
  if (c == NULL) {
    needs(a, want);
    return FALSE;
  }
  if ((c->kind == TDM_CONV_IM2COL && l.replica_im2col) ||
      !needs(a, tdm_conv_candidate_need(b, &l, c)))
    return FALSE;
  if (!prepared)
    tdm_conv_prepare(b, &l);
  run(b, &l, c);
  return TRUE;
}

gboolean
tdm_cuda_conv_engine_backward(TdmBackend *b, const TdmConvArgs *a)
{
  gboolean off;
  forced_kind(&off);
  TdmConvLayout lw, ld;
  gboolean want_dx = a->dx != NULL || a->dx16 != NULL;
  needs(a, 0);
  if (off || tdm_backend_failed(b) || !tdm_conv_layout(b, a, TDM_CONV_WGRAD, &lw) ||
      (want_dx && !tdm_conv_layout(b, a, TDM_CONV_DGRAD, &ld)) || !tdm_cuda_begin(b))
    return FALSE;
  gboolean prepared = FALSE;
  size_t want = 0;
  TdmConvCandidate *cw = choose(b, &lw, &prepared, &want);
  TdmConvCandidate *cd = want_dx ? choose(b, &ld, &prepared, &want) : NULL;
  if (cw == NULL || (want_dx && cd == NULL)) {
    needs(a, want);
    return FALSE;
  }
  if (cw->kind == TDM_CONV_IM2COL && lw.replica_im2col &&
      (!want_dx || (cd->kind == TDM_CONV_IM2COL && ld.replica_im2col)))
    return FALSE;
  size_t need = tdm_conv_candidate_need(b, &lw, cw);
  if (want_dx)
    need = MAX(need, tdm_conv_candidate_need(b, &ld, cd));
  if (!needs(a, need))
    return FALSE;
  if (!prepared)
    tdm_conv_prepare(b, &lw);
  run(b, &lw, cw);
  if (want_dx)
    run(b, &ld, cd);
  return TRUE;
}

void
tdm_cuda_conv_choices(TdmBackend *b, TdmConvChoices *counts)
{
  memset(counts, 0, sizeof *counts);
  TdmConvEngine *e = CUDA_B(b)->conv;
  if (e == NULL)
    return;
  GHashTableIter iter;
  gpointer value;
  g_hash_table_iter_init(&iter, e->choices);
  while (g_hash_table_iter_next(&iter, NULL, &value)) {
    const Choice *choice = value;
    switch (choice->chosen->kind) {
    case TDM_CONV_CUDNN:
      counts->cudnn++;
      break;
    case TDM_CONV_CUDNN_FUSED:
      counts->cudnn_fused++;
      break;
    case TDM_CONV_OWN:
      counts->own++;
      break;
    case TDM_CONV_IM2COL:
      counts->im2col++;
      break;
    }
  }
}

char *
tdm_cuda_conv_report(TdmBackend *b)
{
  GString *out = g_string_new(NULL);
  TdmConvEngine *e = CUDA_B(b)->conv;
  if (e == NULL)
    return g_string_free(out, FALSE);
  g_autofree gpointer *keys = g_hash_table_get_keys_as_array(e->choices, NULL);
  guint count = g_hash_table_size(e->choices);
  for (guint i = 0; i < count; i++) {
    const Choice *choice = g_hash_table_lookup(e->choices, keys[i]);
    g_string_append_printf(out, "%s\t%s\t%.4f ms\n", (char *)keys[i], choice->chosen->name,
                           choice->chosen->ms);
  }
  return g_string_free(out, FALSE);
}

GPtrArray *
tdm_cuda_conv_candidate_names(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir)
{
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  TdmConvLayout l;
  if (!tdm_cuda_begin(b) || !tdm_conv_layout(b, a, dir, &l))
    return names;
  g_autoptr(GPtrArray) list = tdm_conv_candidates_for(b, &l, NULL);
  for (guint i = 0; i < list->len; i++)
    g_ptr_array_add(names, g_strdup(((TdmConvCandidate *)g_ptr_array_index(list, i))->name));
  return names;
}

gboolean
tdm_cuda_conv_run_named(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                        const char *name)
{
  TdmConvLayout l;
  if (!tdm_cuda_begin(b) || !tdm_conv_layout(b, a, dir, &l))
    return FALSE;
  g_autoptr(GPtrArray) list = tdm_conv_candidates_for(b, &l, name);
  int i = named(list, name);
  if (i < 0 || tdm_conv_candidate_need(b, &l, g_ptr_array_index(list, i)) > a->work_bytes)
    return FALSE;
  tdm_conv_prepare(b, &l);
  run(b, &l, g_ptr_array_index(list, i));
  return TRUE;
}

size_t
tdm_cuda_conv_need_named(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                         const char *name)
{
  TdmConvLayout l;
  if (!tdm_cuda_begin(b) || !tdm_conv_layout(b, a, dir, &l))
    return 0;
  g_autoptr(GPtrArray) list = tdm_conv_candidates_for(b, &l, name);
  int i = named(list, name);
  return i < 0 ? 0 : tdm_conv_candidate_need(b, &l, g_ptr_array_index(list, i));
}

size_t
tdm_cuda_conv_cudnn_workspace_named(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                                    const char *name)
{
  TdmConvLayout l;
  if (!tdm_cuda_begin(b) || !tdm_conv_layout(b, a, dir, &l))
    return 0;
  g_autoptr(GPtrArray) list = tdm_conv_candidates_for(b, &l, name);
  int i = named(list, name);
  const TdmConvCandidate *c = i < 0 ? NULL : g_ptr_array_index(list, i);
  if (c == NULL || c->plan == NULL)
    return 0;
  return (size_t)MAX(c->plan->workspace, c->rest_plan != NULL ? c->rest_plan->workspace : 0);
}

const char *
tdm_cuda_conv_chosen(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir)
{
  TdmConvLayout l;
  if (!tdm_cuda_begin(b) || !tdm_conv_layout(b, a, dir, &l))
    return NULL;
  gboolean prepared = FALSE;
  size_t want = 0;
  TdmConvCandidate *c = choose(b, &l, &prepared, &want);
  return c != NULL ? c->name : NULL;
}
