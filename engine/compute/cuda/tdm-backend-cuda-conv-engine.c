/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-engine.c — the convolution engine's choice: per shape, direction,
 * precision and layout, the fastest of the candidates (tdm-backend-cuda-conv-candidates.c)
 * as timed with CUDA events on the backend's stream the first time the shape comes (the
 * pre-warm's eager step), remembered per backend and on disk per GPU model
 * (tdm-backend-cuda-conv-cache.c).
 *
 * Every candidate is deterministic (the same inputs give the same bits). No timing
 * where timing cannot or must not decide: while the stream is captured into a graph (a
 * provisional choice among what needs no cuDNN set-up, timed at the next eager call),
 * and under --exact (b->deterministic), where the rule is cuDNN's first plan in its
 * heuristics' order, else our own, else im2col: a function of the shape and the GPU
 * model, so every device of a kind agrees. A timed choice is found again on disk by
 * the next run, so two runs on one kind of GPU compute alike.
 * TANDEM_CONV=im2col turns the engine off (the replica's own composition, exactly as
 * before); =cudnn, =cudnn-fused, =cudnn-phases or =own prefers that kind wherever it
 * takes the shape.
 * The rule never prefers a fused cuDNN plan (compiled at run time, seconds a shape)
 * or an input gradient by phases over another candidate: it is the rule's choice only
 * where it is the only one. A phases candidate that cuDNN refuses as it runs (its views
 * taken when its plans were built; NOT_SUPPORTED or BAD_PARAM, no CUDA error pending) is
 * refused for its key from then on, and the choice made again without it (mend()): a run
 * of the engine's own choice never fails for a refusal; any other failure fails it.
 *
 * A timing is also a screen (tdm-backend-cuda-conv-screen.h), as far as the choice
 * needs: the reference candidate (the least rounding: a float32 result first, im2col
 * before ours before cuDNN's) is timed first and its whole result read back to the host
 * (pinned memory where it can be had, kept from one timing to the next until a graph
 * capture begins); once every candidate is timed, the fastest that
 * is not the reference runs once more and its result is measured against the
 * reference's (tdm_backend_deviation(), ‖c − r‖₂ / ‖r‖₂) piece by piece, the reference's
 * pieces uploaded into the candidate's own scratch, which nothing reads after its run.
 * Kept (within both results' roundings and float32 sums), it is the choice; left out,
 * the next fastest is tried, and the reference is the choice where no faster one is
 * kept, with no comparison. So a timed key costs one read-back and, as a rule, one
 * upload of its result; the screen asks the workspace for no more than the candidates
 * need (a piece's room where they need less), and a first run's workspace is no larger
 * than its timings' needs. The disk cache (version 7) holds only screened choices.
 */
#include "tdm-backend-cuda-conv-engine.h"
#include "tdm-backend-cuda-conv-budget.h"
#include "tdm-backend-cuda-conv-cache.h"
#include "tdm-backend-cuda-conv-fused.h"
#include "tdm-backend-cuda-host-buffer.h"
#include "tdm-i18n.h"

#include <math.h>
#include <string.h>

#define TIMED_RUNS 3

typedef struct {
  TdmConvCandidate *chosen;
  gboolean provisional;        /* chosen during a capture, untimed */
  char *reference;             /* timed: the screen's reference candidate, or NULL */
  GPtrArray *left_out;         /* timed: the names the screen left out, or NULL */
} Choice;

struct _TdmConvEngine {
  GHashTable *choices;         /* key → Choice */
  GHashTable *ran;             /* forward key → the name of what its last call ran ("":
                                * nothing, the replica composes it; tdm_cuda_conv_ran()) */
  cudaEvent_t start, stop;
  char *model;                 /* the disk cache's file: GPU and library versions */
  TdmHostBuffer host;          /* the screens' references' results, kept from one timing
                                * to the next until a capture begins */
  GHashTable *refused;         /* "<key>\t<name>": candidates cuDNN refused as they ran */
};

/* The most any timing asked of a workspace in the process (tests:
 * tdm_cuda_conv_timing_needs()). */
static GMutex timing_needs_lock;
static size_t timing_most_seen, timing_need_seen;

static const char *const direction_names[] = {"fwd", "dgrad", "wgrad"};
static const char *const precision_names[] = {"fp32", "tf32", "bf16"};

static void
choice_free(gpointer data)
{
  Choice *choice = data;
  tdm_conv_candidate_free(choice->chosen);
  g_free(choice->reference);
  if (choice->left_out != NULL)
    g_ptr_array_unref(choice->left_out);
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
  e->refused = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  e->ran = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
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
    tdm_cuda_conv_engine_release_host(b);
    g_hash_table_destroy(e->choices);
    g_hash_table_destroy(e->refused);
    g_hash_table_destroy(e->ran);
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
  if (g_str_equal(v, "cudnn-phases"))
    return TDM_CONV_CUDNN_PHASES;
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

/* What a call of the layout's direction writes: where, as which type, how many values. */
typedef struct {
  void *at;
  TdmDtype type;
  size_t count;
} Result;

static Result
result_of(const TdmConvLayout *l)
{
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  Result r = {a->dw, TDM_DTYPE_F32, (size_t)s->out_c * l->k};
  if (l->dir == TDM_CONV_FORWARD) {
    r.at = a->y16 != NULL ? (void *)a->y16 : (void *)a->y;
    r.type = a->y16 != NULL ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    r.count = l->rows * (size_t)s->out_c;
  } else if (l->dir == TDM_CONV_DGRAD) {
    r.at = a->dx16 != NULL ? (void *)a->dx16 : (void *)a->dx;
    r.type = a->dx16 != NULL ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    r.count = (size_t)s->n * s->h * s->w * s->c;
  }
  return r;
}

static size_t
value_bytes(TdmDtype type)
{
  return type == TDM_DTYPE_BF16 ? sizeof(uint16_t) : sizeof(float);
}

/* The bytes from the workspace's start that every candidate takes before its own
 * scratch (the layout's reservations: dy16 where it lies in the workspace, the weights'
 * room), written once a call by tdm_conv_prepare() and read by every candidate's runs. */
static size_t
reserved_of(const TdmConvLayout *l)
{
  return (size_t)(l->scratch - (char *)l->a->work);
}

/* The room past the reservations the screen asks for where the candidates need less:
 * a result of more is compared in pieces of at least this. */
#define SCREEN_ROOM ((size_t)1 << 20)

/* The bytes of the workspace a timing needs, and in *room how many of them past the
 * reservations the screen's pieces may take (0: the timing is not screened). The
 * screen uploads the reference's result, piece by piece, into the scratch of the
 * candidate it measures, after that candidate's last run: so a timing needs what its
 * candidates need (`most`), or where that leaves less room past the reservations than
 * SCREEN_ROOM (or than the whole result, if smaller), that much. Never past the
 * caller's limit (the plan's upper bound, which the memory estimate promised); 0 room
 * where not one value fits under it. The workspace the caller grows for a timing (the
 * replica's, fitted to the choices' need after the pre-warm) holds nothing of the
 * screen's beyond that room. */
static size_t
timing_need(const TdmConvLayout *l, size_t most, size_t *room)
{
  Result r = result_of(l);
  size_t reserved = reserved_of(l), size = value_bytes(r.type), limit = l->a->work_limit;
  size_t need = MAX(most, reserved + MIN(r.count * size, SCREEN_ROOM));
  if (limit != 0 && need > limit)
    need = MAX(most, limit);
  *room = need >= reserved + size ? need - reserved : 0;
  return *room > 0 ? need : most;
}

/* The screen of one timing (tdm-backend-cuda-conv-screen.h): the reference's result
 * read back to the host, the candidates the choice tries measured against it in pieces
 * uploaded into the tried one's scratch. */
typedef struct {
  Result result;               /* what every candidate writes */
  char *slot;                  /* the pieces' place, the candidates' scratch; NULL: none */
  guint64 piece, pieces;       /* the pieces' bytes (the last's may be fewer), how many */
  void *host;                  /* the reference's result (the engine's host memory), once
                                * it has run */
  guint64 length;              /* L, the products each value sums */
  int reference;               /* its index in the list, once one has run */
  char *reference_name;        /* and its name */
  guint compared;              /* how many were measured against it */
  GPtrArray *left_out;         /* the names left out */
} Screen;

void
tdm_cuda_conv_engine_release_host(TdmBackend *b)
{
  TdmConvEngine *e = CUDA_B(b)->conv;
  if (e == NULL)
    return;
  tdm_host_buffer_release(&e->host);
}

static size_t
result_bytes(const Result *r)
{
  return r->count * value_bytes(r->type);
}

/* ‖result − reference‖₂ / ‖reference‖₂ over the whole result: for each piece, the
 * reference's uploaded into the slot (stream-ordered after the candidate's run, so
 * over scratch it is done with; straight from pinned memory, else through the
 * backend's upload), one reduction (tdm_backend_deviation(), in the
 * backend's partials buffer, which its own bytes count) and its two sums read back,
 * added in double (Σ (c − r)² and Σ r² are sums over the values: pieces add up); NaN
 * when the backend failed. */
G_STATIC_ASSERT(TDM_PARTIALS_FLOATS / 2 >= TDM_DEVIATION_WORK_DOUBLES);

static double
deviation_of(TdmBackend *b, const Screen *screen)
{
  size_t doubles = 0;
  double *work = tdm_backend_cuda_sum_scratch(b, &doubles);
  size_t total = result_bytes(&screen->result), size = value_bytes(screen->result.type);
  double diff = 0.0, ref = 0.0;
  for (guint64 k = 0; k < screen->pieces; k++) {
    size_t at = (size_t)(k * screen->piece), bytes = MIN((size_t)screen->piece, total - at);
    double sums[2] = {NAN, NAN};
    const char *from = (const char *)screen->host + at;
    if (!engine(b)->host.pinned)
      tdm_backend_upload(b, screen->slot, from, bytes);
    else if (!TDM_CUDA_OK(b, cudaMemcpyAsync(screen->slot, from, bytes, cudaMemcpyHostToDevice,
                                             CUDA_B(b)->stream)))
      return NAN;
    tdm_backend_deviation(b, work, (const char *)screen->result.at + at, screen->slot,
                          screen->result.type, bytes / size);
    tdm_backend_download(b, sums, work, sizeof sums);
    if (tdm_backend_failed(b))
      return NAN;
    diff += sums[0];
    ref += sums[1];
  }
  return tdm_conv_screen_deviation(diff, ref);
}

/* Tests only: TANDEM_CONV_FAULT="<direction> <candidate>" (fwd, dgrad or wgrad, and a
 * name: "dgrad im2col") names a candidate whose float32 result of that direction is
 * scaled by 1 + 2⁻⁵ before the screen reads or measures it, as a wrong candidate's
 * result would lie from the reference (tests/gpu/test-cuda-conv-screen.c); where it is
 * not the reference it also counts as the fastest (fastest()), so that it is the
 * candidate the choice tries first, the one a wrong result must not win as. The call's
 * own run after the choice is never touched. */
static gboolean
test_fault(const TdmConvLayout *l, const TdmConvCandidate *c, const Screen *screen)
{
  const char *v = g_getenv("TANDEM_CONV_FAULT");
  const char *space = v != NULL ? strchr(v, ' ') : NULL;
  return space != NULL && screen->result.type == TDM_DTYPE_F32 &&
         strncmp(v, direction_names[l->dir], (size_t)(space - v)) == 0 &&
         strlen(direction_names[l->dir]) == (size_t)(space - v) &&
         g_str_equal(space + 1, c->name);
}

static void
inject_test_fault(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c,
                  const Screen *screen)
{
  if (test_fault(l, c, screen))
    tdm_backend_scale(b, screen->result.at, 1.0f + 0x1p-5f, screen->result.count);
}

/* Makes candidate i of list, the first to run and whose result the call's output now
 * holds, the screen's reference: its result read back to the host. Without host memory
 * for it, said, and the timing goes unscreened (screen->slot NULL). */
static void
keep_reference(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, guint i, Screen *screen)
{
  TdmConvCandidate *c = g_ptr_array_index(list, i);
  inject_test_fault(b, l, c, screen);
  size_t bytes = result_bytes(&screen->result);
  screen->host = tdm_host_buffer_take(&engine(b)->host, bytes);
  if (screen->host == NULL) {
    g_message("%s: convolution candidates not screened: no host memory for the "
              "reference's result (%zu bytes)", b->name, bytes);
    screen->slot = NULL;
    return;
  }
  tdm_backend_download(b, screen->host, screen->result.at, bytes);
  screen->reference = (int)i;
  screen->reference_name = g_strdup(c->name);
}

/* Screens candidate i of list (not the reference), whose result the call's output now
 * holds: it stays when its result lies within the bound of the reference's. FALSE when
 * it is left out (said, and named in screen->left_out). */
static gboolean
screened(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, guint i, Screen *screen)
{
  TdmConvCandidate *c = g_ptr_array_index(list, i);
  inject_test_fault(b, l, c, screen);
  TdmConvCandidate *r = g_ptr_array_index(list, (guint)screen->reference);
  screen->compared++;
  double deviation = deviation_of(b, screen);
  double bound = tdm_conv_screen_bound(tdm_conv_candidate_rounding(b, l, c),
                                       tdm_conv_candidate_rounding(b, l, r), screen->length);
  if (tdm_backend_failed(b) || tdm_conv_screen_keeps(deviation, bound)) {
    g_debug("%s: convolution candidate %s lies %.3g from %s (at most %.3g)", b->name, c->name,
            deviation, r->name, bound);
    return TRUE;
  }
  g_debug("%s: convolution candidate %s left out: its result lies %.3g from %s's, more "
          "than its precision allows (%.3g)", b->name, c->name, deviation, r->name, bound);
  g_ptr_array_add(screen->left_out, g_strdup(c->name));
  return FALSE;
}

/* The order candidates are timed in: the screen's reference first (the least rounding,
 * tdm_conv_screen_reference(), the first in the list's order of equals), the others
 * after it by the same rule, so that if one fails to run the next becomes the
 * reference. */
static guint *
timing_order(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list)
{
  guint n = list->len;
  guint *order = g_new(guint, MAX(n, 1));
  g_autofree TdmConvRounding *rounding = g_new(TdmConvRounding, MAX(n, 1));
  for (guint i = 0; i < n; i++)
    rounding[i] = tdm_conv_candidate_rounding(b, l, g_ptr_array_index(list, i));
  for (guint k = 0; k < n; k++) {
    order[k] = tdm_conv_screen_reference(rounding, n);
    rounding[order[k]].output = INFINITY; /* taken: behind every other */
  }
  return order;
}

/* Times each candidate (one run to warm up, then TIMED_RUNS; the first to run is the
 * screen's reference, keep_reference()), then chooses, as far as the choice needs
 * (tdm_conv_screen_order()): the fastest (the first in the list's order of equal
 * times) that is the reference, or that runs once more and the screen keeps
 * (screened()), trying the next fastest where it is left out. The index, or -1; those
 * that fail at run time are skipped. The screen's extra work: the reference's result
 * read back once, and for each one tried (as a rule one, none where the reference is
 * the fastest) a run, the reference uploaded piece by piece, a reduction a piece and
 * two doubles read back. */
static int
fastest(TdmBackend *b, const TdmConvLayout *l, GPtrArray *list, Screen *screen)
{
  TdmConvEngine *e = engine(b);
  TdmBackendCuda *cb = CUDA_B(b);
  if (!events(b, e))
    return -1;
  guint n = list->len;
  g_autofree guint *order = timing_order(b, l, list);
  g_autofree double *ms = g_new(double, MAX(n, 1));
  for (guint k = 0; k < n; k++) {
    guint i = order[k];
    TdmConvCandidate *c = g_ptr_array_index(list, i);
    ms[i] = NAN;
    char *error = NULL;
    gboolean ok = tdm_conv_candidate_run(b, l, c, NULL, &error);
    if (ok && TDM_CUDA_OK(b, cudaEventRecord(e->start, cb->stream))) {
      for (int r = 0; ok && r < TIMED_RUNS; r++) {
        g_clear_pointer(&error, g_free);
        ok = tdm_conv_candidate_run(b, l, c, NULL, &error);
      }
    }
    float elapsed = 0.0f;
    ok = ok && TDM_CUDA_OK(b, cudaEventRecord(e->stop, cb->stream)) &&
         TDM_CUDA_OK(b, cudaEventSynchronize(e->stop)) &&
         TDM_CUDA_OK(b, cudaEventElapsedTime(&elapsed, e->start, e->stop));
    if (tdm_backend_failed(b))
      return -1;
    if (!ok) {
      g_debug("%s: convolution candidate %s skipped: %s", b->name, c->name,
              error != NULL ? error : "it failed");
      g_free(error);
      continue;
    }
    g_free(error);
    c->ms = elapsed / TIMED_RUNS;
    ms[i] = c->ms;
    g_debug("%s: convolution candidate %s: %.3f ms", b->name, c->name, c->ms);
    if (screen->reference < 0 && screen->slot != NULL)
      keep_reference(b, l, list, i, screen);
    if (tdm_backend_failed(b))
      return -1;
  }
  for (guint i = 0; screen->reference >= 0 && i < n; i++)
    if ((int)i != screen->reference && !isnan(ms[i]) &&
        test_fault(l, g_ptr_array_index(list, i), screen))
      ms[i] = -INFINITY;
  g_autofree guint *tries = g_new(guint, MAX(n, 1));
  guint count = tdm_conv_screen_order(
      ms, n, screen->reference >= 0 ? (guint)screen->reference : G_MAXUINT, tries);
  for (guint k = 0; k < count; k++) {
    guint i = tries[k];
    if (screen->reference < 0 || (int)i == screen->reference)
      return (int)i;
    TdmConvCandidate *c = g_ptr_array_index(list, i);
    char *error = NULL;
    gboolean ran = tdm_conv_candidate_run(b, l, c, NULL, &error);
    if (!ran && !tdm_backend_failed(b))
      g_debug("%s: convolution candidate %s skipped: %s", b->name, c->name,
              error != NULL ? error : "it failed");
    g_free(error);
    gboolean kept = ran && screened(b, l, list, i, screen);
    if (tdm_backend_failed(b))
      return -1;
    if (kept)
      return (int)i;
  }
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
  tdm_conv_budget_select(needs, list->len, (guint64)(l->scratch - (char *)l->a->work),
                         b->precision, eligible);
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

/* Whether cuDNN refused candidate `name` for key as it ran (mend()). */
static gboolean
refused(TdmConvEngine *e, const char *key, const char *name)
{
  g_autofree char *entry = g_strdup_printf("%s\t%s", key, name);
  return g_hash_table_contains(e->refused, entry);
}

/* The candidates the choice for key is made among: those that take the call, but those
 * refused for key (mend()), of the forced kind where any is, within the budget (*most:
 * the most any of them needs). */
static GPtrArray *
eligible(TdmBackend *b, const TdmConvLayout *l, const char *key, int forced, size_t *most)
{
  TdmConvEngine *e = engine(b);
  GPtrArray *list = tdm_conv_candidates_for(b, l, NULL);
  for (guint i = list->len; i-- > 0;)
    if (refused(e, key, ((TdmConvCandidate *)g_ptr_array_index(list, i))->name))
      g_ptr_array_remove_index(list, i);
  if (forced >= 0) {
    gboolean any = FALSE;
    for (guint i = 0; i < list->len; i++)
      any = any || ((TdmConvCandidate *)g_ptr_array_index(list, i))->kind == (TdmConvKind)forced;
    for (guint i = list->len; any && i-- > 0;)
      if (((TdmConvCandidate *)g_ptr_array_index(list, i))->kind != (TdmConvKind)forced)
        g_ptr_array_remove_index(list, i);
  }
  within_budget(b, l, list, most);
  return list;
}

/* Makes the choice for key (no lock of its own): the process's (or the disk's) choice
 * for the key where there is one and it still takes the call, else the fastest
 * candidate within the budget whose result the screen keeps, timed now (after the
 * call's preparation, once, when *prepared is FALSE), or the rule's while untimed.
 * *timed says which, and screen says what the timing compared (its reference, those
 * left out). NULL when no candidate takes it, or when timing them needs more workspace
 * than the call has (the candidates' need, or the screen's least room,
 * timing_need()): then *want says how much (nothing was queued).
 *
 * Untimed choices are not screened. Under --exact the rule's candidate is a function of
 * the shape and the GPU model alone (every device of a kind must agree without
 * comparing anything), and every candidate is deterministic, so a screen would not
 * change which one runs, only whether the run may go on; the rule's first pick is
 * cuDNN's first plan in its heuristics' order, which the GPU suite checks against the
 * CPU like every other (tests/gpu/test-cuda-conv*.c). During a capture the choice is
 * provisional (im2col or ours) and timed, so screened, at the next eager call. */
static TdmConvCandidate *
decide(TdmBackend *b, const TdmConvLayout *l, const char *key, int forced, gboolean untimed,
       gboolean *prepared, gboolean *timed, Screen *screen, size_t *want)
{
  TdmConvEngine *e = engine(b);
  *timed = FALSE;
  g_autofree char *cached = forced < 0 && !untimed ? tdm_conv_cache_lookup(e->model, key) : NULL;
  if (cached != NULL && !refused(e, key, cached)) {
    g_autoptr(GPtrArray) one = tdm_conv_candidates_for(b, l, cached);
    if (one->len == 1 && (l->a->work_limit == 0 ||
                          tdm_conv_candidate_need(b, l, g_ptr_array_index(one, 0)) <=
                              l->a->work_limit))
      return g_ptr_array_steal_index(one, 0);
  }
  size_t most = 0;
  g_autoptr(GPtrArray) list = eligible(b, l, key, forced, &most);
  if (list->len == 0)
    return NULL;
  int pick = -1;
  if (!untimed && list->len > 1) {
    size_t room = 0, need = timing_need(l, most, &room);
    if (need > l->a->work_bytes) {
      *want = need;
      return NULL;
    }
    g_mutex_lock(&timing_needs_lock);
    timing_most_seen = MAX(timing_most_seen, most);
    timing_need_seen = MAX(timing_need_seen, need);
    g_mutex_unlock(&timing_needs_lock);
    if (!*prepared) {
      tdm_conv_prepare(b, l);
      *prepared = TRUE;
    }
    screen->result = result_of(l);
    tdm_conv_screen_pieces(result_bytes(&screen->result), MIN(room, tdm_conv_screen_room_cap()),
                           value_bytes(screen->result.type), &screen->piece, &screen->pieces);
    screen->slot = screen->pieces > 0 ? l->scratch : NULL;
    screen->length = tdm_conv_screen_length(&l->a->shape, l->dir);
    if (screen->pieces == 0)
      g_debug("%s: %s not screened: no room for a value of its result under the "
              "workspace's limit", b->name, key);
    pick = fastest(b, l, list, screen);
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
  Screen screen = {.reference = -1, .left_out = g_ptr_array_new_with_free_func(g_free)};
  TdmConvCandidate *chosen =
      decide(b, l, key, forced, untimed, prepared, &timed, &screen, &short_of);
  *want = MAX(*want, short_of);
  if (shared)
    g_mutex_unlock(&choice_lock);
  if (chosen == NULL) {
    g_ptr_array_unref(screen.left_out);
    g_free(screen.reference_name);
    return NULL;
  }
  g_debug("%s: %s → %s (%.3f ms%s)", b->name, key, chosen->name, chosen->ms,
          timed ? "" : ", untimed");
  /* Apart from the line above, whose form bench/tandem_run.py reads. */
  g_debug("%s: %s: %" G_GUINT64_FORMAT " bytes of the workspace", b->name, key,
          (guint64)tdm_conv_candidate_need(b, l, chosen));
  if (screen.reference_name != NULL)
    g_debug("%s: %s screened against %s: %u compared, %u left out", b->name, key,
            screen.reference_name, screen.compared, screen.left_out->len);
  Choice *choice = g_new0(Choice, 1);
  choice->chosen = chosen;
  choice->provisional = cb->capturing && !b->deterministic;
  choice->reference = screen.reference_name;
  choice->left_out = screen.left_out;
  g_hash_table_replace(e->choices, g_steal_pointer(&key), choice);
  return chosen;
}

static void run (TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c,
                 gboolean mend_refusal);

/* The rule's choice for key among the eligible candidates that the call's workspace
 * holds now, kept as the key's choice until the next eager call times one (provisional),
 * or NULL where none fits: what mend() runs where choose() asks for more room first. */
static TdmConvCandidate *
by_rule_within(TdmBackend *b, const TdmConvLayout *l, const char *key)
{
  TdmConvEngine *e = engine(b);
  gboolean off;
  size_t most = 0;
  g_autoptr(GPtrArray) list = eligible(b, l, key, forced_kind(&off), &most);
  for (guint i = list->len; i-- > 0;)
    if (tdm_conv_candidate_need(b, l, g_ptr_array_index(list, i)) > l->a->work_bytes)
      g_ptr_array_remove_index(list, i);
  if (list->len == 0)
    return NULL;
  Choice *choice = g_new0(Choice, 1);
  choice->chosen = g_ptr_array_steal_index(list, by_rule(list));
  choice->provisional = !b->deterministic;
  g_debug("%s: %s → %s (untimed: the rule's within the workspace)", b->name, key,
          choice->chosen->name);
  g_hash_table_replace(e->choices, g_strdup(key), choice);
  return choice->chosen;
}

/* Mends a failed run of the layout's chosen candidate c where cuDNN refused one of its
 * phases' plans as it ran (tdm_cudnn_refusal(): NOT_SUPPORTED or BAD_PARAM with no CUDA
 * error pending — a view it took as the plan was built; not for want of workspace, nor
 * on a failed backend): c is refused for its key from now on (not on disk: the next
 * choice's timing overwrites the key's line there), the choice is made again without it
 * (the rule's among what the workspace holds where the choice would ask for more room
 * first), and run (the call's outputs are written whole again). FALSE where it cannot
 * be mended. c is freed. */
static gboolean
mend(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c, const char *error)
{
  if (c->kind != TDM_CONV_CUDNN_PHASES || tdm_backend_failed(b) ||
      tdm_conv_candidate_need(b, l, c) > l->a->work_bytes)
    return FALSE;
  TdmConvEngine *e = engine(b);
  g_autofree char *key = key_of(b, l);
  g_message("%s: convolution candidate %s refused by cuDNN as it ran (%s): %s chosen again "
            "without it", b->name, c->name, error, key);
  g_hash_table_add(e->refused, g_strdup_printf("%s\t%s", key, c->name));
  g_hash_table_remove(e->choices, key);
  gboolean prepared = TRUE;
  size_t want = 0;
  TdmConvCandidate *again = choose(b, l, &prepared, &want);
  if (again == NULL || tdm_conv_candidate_need(b, l, again) > l->a->work_bytes)
    again = by_rule_within(b, l, key);
  if (again == NULL || tdm_backend_failed(b))
    return FALSE;
  run(b, l, again, TRUE);
  return TRUE;
}

/* Runs candidate c; a failure fails the backend, but for cuDNN's refusal mend() mends
 * where mend_refusal (the engine's own choice, not a test's candidate by name). */
static void
run(TdmBackend *b, const TdmConvLayout *l, const TdmConvCandidate *c, gboolean mend_refusal)
{
  char *error = NULL;
  gboolean refused = FALSE;
  g_autofree char *name = g_strdup(c->name);
  if (!tdm_conv_candidate_run(b, l, c, &refused, &error) &&
      !(mend_refusal && refused && mend(b, l, c, error)))
    tdm_backend_fail(b, TDM_ENGINE_ERROR_BACKEND, _("%s: convolution (%s): %s"), b->name, name,
                     error);
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

/* What a forward of a's key ran: candidate c, or (NULL) nothing, the caller composing
 * it (the engine off, no choice, not the room, or im2col left to the replica). Read by
 * tdm_cuda_conv_ran(): a later step that makes the forward's output again (the stem's
 * two passes) asks whether it was conv-small's bits. */
static void
ran_record(TdmBackend *b, const TdmConvArgs *a, const TdmConvCandidate *c)
{
  TdmConvLayout kl = {.a = a, .dir = TDM_CONV_FORWARD};
  g_hash_table_replace(engine(b)->ran, key_of(b, &kl), g_strdup(c != NULL ? c->name : ""));
}

gboolean
tdm_cuda_conv_ran(TdmBackend *b, const TdmConvArgs *a, const char *name)
{
  TdmConvEngine *e = CUDA_B(b)->conv;
  if (e == NULL)
    return FALSE;
  TdmConvLayout kl = {.a = a, .dir = TDM_CONV_FORWARD};
  g_autofree char *key = key_of(b, &kl);
  const char *ran = g_hash_table_lookup(e->ran, key);
  return ran != NULL && g_str_equal(ran, name);
}

gboolean
tdm_cuda_conv_engine_forward(TdmBackend *b, const TdmConvArgs *a)
{
  gboolean off;
  forced_kind(&off);
  TdmConvLayout l;
  needs(a, 0);
  if (!tdm_backend_failed(b))
    ran_record(b, a, NULL);
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
  run(b, &l, c, TRUE);
  ran_record(b, a, c);
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
  run(b, &lw, cw, TRUE);
  if (want_dx)
    run(b, &ld, cd, TRUE);
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
    case TDM_CONV_CUDNN_PHASES:
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

void
tdm_conv_engine_run_given(TdmBackend *b, const TdmConvArgs *a, const TdmConvLayout *l,
                          const TdmConvCandidate *c)
{
  tdm_conv_prepare(b, l);
  run(b, l, c, FALSE);
  if (l->dir == TDM_CONV_FORWARD)
    ran_record(b, a, c);
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

void
tdm_cuda_conv_timing_needs(size_t *most, size_t *need)
{
  g_mutex_lock(&timing_needs_lock);
  *most = timing_most_seen;
  *need = timing_need_seen;
  g_mutex_unlock(&timing_needs_lock);
}

void
tdm_cuda_conv_timing_needs_reset(void)
{
  g_mutex_lock(&timing_needs_lock);
  timing_most_seen = 0;
  timing_need_seen = 0;
  g_mutex_unlock(&timing_needs_lock);
}

GPtrArray *
tdm_cuda_conv_left_out(TdmBackend *b, const TdmConvArgs *a, TdmConvDirection dir,
                       char **reference)
{
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  if (reference != NULL)
    *reference = NULL;
  TdmConvLayout l;
  TdmConvEngine *e = CUDA_B(b)->conv;
  if (e == NULL || !tdm_conv_layout(b, a, dir, &l))
    return names;
  g_autofree char *key = key_of(b, &l);
  const Choice *choice = g_hash_table_lookup(e->choices, key);
  if (choice == NULL)
    return names;
  if (reference != NULL)
    *reference = g_strdup(choice->reference);
  for (guint i = 0; choice->left_out != NULL && i < choice->left_out->len; i++)
    g_ptr_array_add(names, g_strdup(g_ptr_array_index(choice->left_out, i)));
  return names;
}
