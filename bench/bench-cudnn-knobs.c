/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-cudnn-knobs.c — cuDNN's engines for a convolution timed with other knob
 * settings than its heuristics give them (tile sizes, stages, split-K, swizzle, CGA
 * tiles…), to learn whether the convolution engine should try more than the
 * heuristics' configurations. For each shape and direction: the heuristics' list (mode
 * A, then mode B's other engines), the first --engines distinct engines of it that the
 * engine's own rule accepts (tdm_cudnn_notes_accepted(), bf16), each engine's
 * heuristics' configuration timed, then its knobs varied one at a time from that
 * configuration (at most 16 values a knob, spread over [minimum, maximum] by stride),
 * then the product of the values of the two or three knobs that helped most; at most
 * --max-plans configurations an engine. Graphs are the engine's own
 * (tdm_cudnn_build_conv_graph()): bf16 NHWC operands, a bf16 (--out h) or float32
 * (--out f) output. Each plan: its workspace allocated (none past 1 GiB), 3 warm-up
 * runs, 20 runs each between CUDA events on the backend's stream, the median; its
 * output checked against the heuristics' first plan's (‖x − ref‖₂ / ‖ref‖₂ on the GPU,
 * the engine's screen's measure; flagged "!" past 2^-6; the output is filled with NaN
 * before, so a plan that leaves part unwritten shows). A table per shape on stdout
 * (the fastest --lines plans and the heuristics' own), the summaries again at the end,
 * everything in --json FILE (rewritten after each shape; both
 * bench-cudnn-knobs-report.c's). --budget seconds are shared out over the shapes and,
 * in each, over its engines; what is timed when one runs out is printed. Run by hand on
 * a GPU machine (record numbers in NOTES.md); exits 77 without a GPU or cuDNN. Not a
 * test, and nothing here changes what the engine chooses.
 *   usage: bench-cudnn-knobs [--shape "fwd n128 h128 w128 c64 o64 k3 p1 s1"]…
 *          [--engines 6] [--max-plans 150] [--budget 150] [--out h|f] [--runtime]
 *          [--lines 20] [--json FILE]
 *   A shape is written as the engine's conv keys are (words after the sizes, such as
 *   "bf16 y16", are ignored); without --shape: forward, dgrad and wgrad of
 *   n128 h128 w128 c64 o64, of n256 h64 w64 c64 o64, and of n128 h64 w64 c128 o128.
 */
#include "tdm-backend.h"
#include "tdm-backend-cuda.h"
#include "tdm-backend-cuda-conv-cudnn.h"
#include "bench-cudnn-knobs.h"
#include "tdm-bench.h"
#include "tdm-bf16.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KNOB_VALUES_MAX 16
#define PRODUCT_KNOBS 3
#define PRODUCT_VALUES 4        /* a knob's best values in the product, and its own */
#define WORKSPACE_MAX ((int64_t)1 << 30)
#define WARMUPS 3
#define RUNS 20
#define NOTES_MAX 16
#define HEUR_RESULTS_MAX 256
#define SEED 20261207

static const char *const direction_names[] = {"fwd", "dgrad", "wgrad"};

/* The run: cuDNN, its handle on the backend's stream, the options. */
typedef struct {
  const TdmCudnn *dnn;
  cudnnHandle_t handle;
  TdmBackend *b;
  cudaStream_t stream;
  cudaEvent_t start[RUNS], stop[RUNS];
  int out_type;                /* CUDNN_DATA_BFLOAT16 or CUDNN_DATA_FLOAT */
  gboolean runtime;
  int engines, max_plans;
  /* The shape's tensors: image (x or dx), filter (w or dw), outs (y or dy); the one the
   * direction writes, its reference copy, and the deviation's scratch. */
  void *image, *filter, *outs, *ref;
  void **result;
  size_t result_count;
  double *work;
} Bench;

static void
check(TdmBackend *b)
{
  g_autoptr(GError) error = NULL;
  if (!tdm_backend_check(b, &error))
    g_error("%s", error->message);
}

static void
timed_free(gpointer data)
{
  Timed *t = data;
  g_array_unref(t->knobs);
  g_free(t->origin);
  g_free(t->spelt);
  g_free(t);
}

static void
engine_free(gpointer data)
{
  Engine *e = data;
  g_array_unref(e->ranges);
  if (e->base != NULL)
    g_array_unref(e->base);
  g_free(e);
}

static int
by_type(gconstpointer a, gconstpointer b)
{
  return ((const Knob *)a)->type - ((const Knob *)b)->type;
}

static int64_t
knob_value(GArray *knobs, int type, int64_t otherwise)
{
  for (guint i = 0; i < knobs->len; i++)
    if (g_array_index(knobs, Knob, i).type == type)
      return g_array_index(knobs, Knob, i).value;
  return otherwise;
}

/* knobs with `type` set to value (added where it was not set), a new array. */
static GArray *
knobs_with(GArray *knobs, int type, int64_t value)
{
  GArray *out = g_array_copy(knobs);
  for (guint i = 0; i < out->len; i++)
    if (g_array_index(out, Knob, i).type == type) {
      g_array_index(out, Knob, i).value = value;
      return out;
    }
  Knob k = {type, value};
  g_array_append_val(out, k);
  g_array_sort(out, by_type);
  return out;
}

/* "TILE_SIZE=3 STAGES=4*": "*" where base has another value (or none). */
static char *
knobs_spelt(GArray *knobs, GArray *base)
{
  GString *text = g_string_new(NULL);
  for (guint i = 0; i < knobs->len; i++) {
    const Knob *k = &g_array_index(knobs, Knob, i);
    gboolean same = base == NULL || knob_value(base, k->type, k->value + 1) == k->value;
    g_string_append_printf(text, "%s%s=%" G_GINT64_FORMAT "%s", i > 0 ? " " : "",
                           knob_name(k->type), k->value, same ? "" : "*");
  }
  return g_string_free(text, FALSE);
}

/* A key for the configuration, to time each once. */
static char *
config_key(int64_t engine, GArray *knobs)
{
  GString *key = g_string_new(NULL);
  g_string_append_printf(key, "%" G_GINT64_FORMAT, engine);
  for (guint i = 0; i < knobs->len; i++)
    g_string_append_printf(key, " %d=%" G_GINT64_FORMAT, g_array_index(knobs, Knob, i).type,
                           g_array_index(knobs, Knob, i).value);
  return g_string_free(key, FALSE);
}

/* ---- cuDNN's descriptors ------------------------------------------------------------ */

/* The knob descriptors (choices or infos: `type`) that attribute `name` of d lists, in
 * a[0 .. the count returned); a has room for CUDNN_KNOB_TYPE_COUNTS, all made here, each
 * to be destroyed with unlist(). */
static int
list_knobs(Bench *bk, cudnnBackendDescriptor_t d, int name, int type,
           cudnnBackendDescriptor_t *a)
{
  int made = 0;
  while (made < CUDNN_KNOB_TYPE_COUNTS &&
         bk->dnn->create_descriptor(type, &a[made]) == CUDNN_STATUS_SUCCESS)
    made++;
  int64_t count = 0;
  if (made < CUDNN_KNOB_TYPE_COUNTS ||
      bk->dnn->get_attribute(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, made, &count, a) !=
          CUDNN_STATUS_SUCCESS)
    count = 0;
  for (int i = made; i < CUDNN_KNOB_TYPE_COUNTS; i++)
    a[i] = NULL;
  return (int)CLAMP(count, 0, made);
}

static void
unlist(Bench *bk, cudnnBackendDescriptor_t *a)
{
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; i++)
    if (a[i] != NULL)
      bk->dnn->destroy_descriptor(a[i]);
}

/* Attribute `name` of d, one value of `type`, in *value; FALSE when cuDNN does not say. */
static gboolean
one(Bench *bk, cudnnBackendDescriptor_t d, int name, int type, void *value)
{
  int64_t got = 0;
  return bk->dnn->get_attribute(d, name, type, 1, &got, value) == CUDNN_STATUS_SUCCESS;
}

/* The knob choices of an engine configuration, by type. */
static GArray *
choices_of(Bench *bk, cudnnBackendDescriptor_t cfg)
{
  GArray *knobs = g_array_new(FALSE, FALSE, sizeof(Knob));
  cudnnBackendDescriptor_t d[CUDNN_KNOB_TYPE_COUNTS] = {NULL};
  int count = list_knobs(bk, cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                         CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, d);
  for (int i = 0; i < count; i++) {
    Knob k = {-1, 0};
    if (one(bk, d[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, &k.type) &&
        one(bk, d[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, &k.value))
      g_array_append_val(knobs, k);
  }
  unlist(bk, d);
  g_array_sort(knobs, by_type);
  return knobs;
}

/* An engine's knobs and their ranges. */
static GArray *
ranges_of(Bench *bk, cudnnBackendDescriptor_t engine)
{
  GArray *ranges = g_array_new(FALSE, FALSE, sizeof(Range));
  cudnnBackendDescriptor_t d[CUDNN_KNOB_TYPE_COUNTS] = {NULL};
  int count = list_knobs(bk, engine, CUDNN_ATTR_ENGINE_KNOB_INFO,
                         CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, d);
  for (int i = 0; i < count; i++) {
    Range r = {-1, 0, 0, 1};
    if (one(bk, d[i], CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, &r.type) &&
        one(bk, d[i], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, &r.min) &&
        one(bk, d[i], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, &r.max) &&
        one(bk, d[i], CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, &r.stride))
      g_array_append_val(ranges, r);
  }
  unlist(bk, d);
  return ranges;
}

/* A configuration's engine: its global index and whether the engine's rule accepts its
 * notes (runtime-compiled ones only with --runtime); its knobs' ranges too where
 * `ranges` is not NULL. FALSE when cuDNN does not say. */
static gboolean
engine_of(Bench *bk, cudnnBackendDescriptor_t cfg, int64_t *index, gboolean *accepted,
          GArray **ranges)
{
  const TdmCudnn *dnn = bk->dnn;
  cudnnBackendDescriptor_t engine = NULL;
  if (dnn->create_descriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS)
    return FALSE;
  int64_t count = 0, note_count = 0, behavior_count = 0;
  int notes[NOTES_MAX] = {0}, behavior[NOTES_MAX] = {0};
  gboolean read =
      dnn->get_attribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                         &count, &engine) == CUDNN_STATUS_SUCCESS &&
      dnn->get_attribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count,
                         index) == CUDNN_STATUS_SUCCESS &&
      dnn->get_attribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                         NOTES_MAX, &note_count, notes) == CUDNN_STATUS_SUCCESS &&
      dnn->get_attribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                         NOTES_MAX, &behavior_count, behavior) == CUDNN_STATUS_SUCCESS;
  if (read) {
    TdmCudnnFilter filter = {TDM_PRECISION_BF16};
    *accepted = tdm_cudnn_notes_accepted(notes, CLAMP(note_count, 0, NOTES_MAX), behavior,
                                         CLAMP(behavior_count, 0, NOTES_MAX), filter,
                                         bk->runtime);
    if (ranges != NULL)
      *ranges = ranges_of(bk, engine);
  }
  dnn->destroy_descriptor(engine);
  return read;
}

/* Engine `index` of graph, made and finalized by bd (NULL once bd failed). */
static cudnnBackendDescriptor_t
engine_made(TdmCudnnBuild *bd, cudnnBackendDescriptor_t graph, int64_t index)
{
  cudnnBackendDescriptor_t engine = tdm_cudnn_build_make(bd, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  tdm_cudnn_build_set(bd, engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "engine's graph");
  tdm_cudnn_build_set(bd, engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index,
                      "engine's index");
  tdm_cudnn_build_finalize(bd, engine, "engine");
  return engine;
}

/* Engine `index`'s knobs' ranges, asked of the engine made anew for graph (as
 * cudnn-frontend asks), else of the one configuration cfg names. */
static GArray *
engine_ranges(Bench *bk, cudnnBackendDescriptor_t graph, int64_t index,
              cudnnBackendDescriptor_t cfg)
{
  TdmCudnnBuild bd;
  tdm_cudnn_build_init(&bd, bk->dnn);
  cudnnBackendDescriptor_t engine = engine_made(&bd, graph, index);
  GArray *ranges = NULL;
  if (bd.status == CUDNN_STATUS_SUCCESS)
    ranges = ranges_of(bk, engine);
  tdm_cudnn_build_end(&bd);
  if (ranges == NULL || ranges->len == 0) {
    int64_t again = -1;
    gboolean accepted = FALSE;
    GArray *other = NULL;
    if (engine_of(bk, cfg, &again, &accepted, &other)) {
      if (ranges != NULL)
        g_array_unref(ranges);
      ranges = other;
    }
  }
  return ranges != NULL ? ranges : g_array_new(FALSE, FALSE, sizeof(Range));
}

/* A finalized plan and, for one built here, the descriptors it was built from (kept
 * while it lives, as the engine's plans keep theirs). */
typedef struct {
  cudnnBackendDescriptor_t plan;
  TdmCudnnBuild bd;
  gboolean built;
} Plan;

static void
plan_clear(Bench *bk, Plan *p)
{
  if (p->plan != NULL)
    bk->dnn->destroy_descriptor(p->plan);
  if (p->built)
    tdm_cudnn_build_end(&p->bd);
  *p = (Plan){0};
}

/* The plan of configuration cfg; FALSE when cuDNN refuses it. */
static gboolean
plan_of_cfg(Bench *bk, cudnnBackendDescriptor_t cfg, Plan *p)
{
  const TdmCudnn *dnn = bk->dnn;
  if (dnn->create_descriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p->plan) !=
      CUDNN_STATUS_SUCCESS) {
    p->plan = NULL;
    return FALSE;
  }
  if (dnn->set_attribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                         &bk->handle) == CUDNN_STATUS_SUCCESS &&
      dnn->set_attribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg) == CUDNN_STATUS_SUCCESS &&
      dnn->finalize(p->plan) == CUDNN_STATUS_SUCCESS)
    return TRUE;
  dnn->destroy_descriptor(p->plan);
  p->plan = NULL;
  return FALSE;
}

/* The plan of engine `index` of graph with these knob choices; FALSE when cuDNN
 * refuses them (at any step: a knob's value, the configuration, the plan). */
static gboolean
plan_with_knobs(Bench *bk, cudnnBackendDescriptor_t graph, int64_t index, GArray *knobs,
                Plan *p)
{
  TdmCudnnBuild *bd = &p->bd;
  tdm_cudnn_build_init(bd, bk->dnn);
  p->built = TRUE;
  cudnnBackendDescriptor_t engine = engine_made(bd, graph, index);
  g_autofree cudnnBackendDescriptor_t *choices =
      g_new0(cudnnBackendDescriptor_t, MAX(knobs->len, 1));
  for (guint i = 0; i < knobs->len; i++) {
    Knob *k = &g_array_index(knobs, Knob, i);
    choices[i] = tdm_cudnn_build_make(bd, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    tdm_cudnn_build_set(bd, choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE,
                        1, &k->type, "knob's type");
    tdm_cudnn_build_set(bd, choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                        &k->value, "knob's value");
    tdm_cudnn_build_finalize(bd, choices[i], "knob choice");
  }
  cudnnBackendDescriptor_t cfg = tdm_cudnn_build_make(bd, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  tdm_cudnn_build_set(bd, cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                      &engine, "configuration's engine");
  if (knobs->len > 0)
    tdm_cudnn_build_set(bd, cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                        CUDNN_TYPE_BACKEND_DESCRIPTOR, knobs->len, choices,
                        "configuration's knobs");
  tdm_cudnn_build_finalize(bd, cfg, "engine configuration");
  if (bd->status == CUDNN_STATUS_SUCCESS && plan_of_cfg(bk, cfg, p))
    return TRUE;
  g_debug("engine %" G_GINT64_FORMAT ": %s refused", index,
          bd->what != NULL ? bd->what : "the plan");
  plan_clear(bk, p);
  return FALSE;
}

/* ---- running and timing ------------------------------------------------------------ */

/* One run of plan, its output written to `out` (the direction's output otherwise). */
static gboolean
run_once(Bench *bk, const Sweep *sw, const Plan *p, int64_t engine, void *out, void *ws,
         char **error)
{
  TdmCudnnPlan plan = {.plan = p->plan, .engine = engine};
  void *image = bk->image, *filter = bk->filter, *outs = bk->outs;
  if (sw->dir == TDM_CONV_FORWARD)
    outs = out;
  else if (sw->dir == TDM_CONV_DGRAD)
    image = out;
  else
    filter = out;
  return tdm_cudnn_plan_run(bk->dnn, bk->handle, &plan, image, filter, outs, ws, NULL, error);
}

static size_t
result_bytes(const Bench *bk)
{
  return bk->result_count * (bk->out_type == CUDNN_DATA_BFLOAT16 ? 2 : 4);
}

/* Times plan p of `engine`: the result, or NULL (counted in sw) when it needs too much
 * workspace or does not run. With `reference`, its output becomes the reference. */
static Timed *
time_plan(Bench *bk, Sweep *sw, const Plan *p, int64_t engine, gboolean reference)
{
  TdmBackend *b = bk->b;
  int64_t workspace = 0, count = 0;
  if (bk->dnn->get_attribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                             CUDNN_TYPE_INT64, 1, &count, &workspace) != CUDNN_STATUS_SUCCESS ||
      workspace < 0) {
    sw->failed++;
    return NULL;
  }
  if (workspace > WORKSPACE_MAX) {
    sw->by_workspace++;
    return NULL;
  }
  void *ws = NULL;
  if (workspace > 0) {
    g_autoptr(GError) error = NULL;
    ws = tdm_backend_alloc(b, (size_t)workspace, &error);
    if (ws == NULL) {
      sw->by_workspace++;
      return NULL;
    }
  }
  g_autofree char *why = NULL;
  gboolean ran = TRUE;
  if (reference)
    ran = run_once(bk, sw, p, engine, bk->ref, ws, &why);
  /* NaN everywhere first (all bits set, in bf16 as in float32): what a plan leaves
   * unwritten then shows in its error. */
  TDM_CUDA_OK(b, cudaMemsetAsync(*bk->result, 0xff, result_bytes(bk), bk->stream));
  for (int i = 0; ran && i < WARMUPS; i++)
    ran = run_once(bk, sw, p, engine, *bk->result, ws, &why);
  for (int i = 0; ran && i < RUNS; i++) {
    TDM_CUDA_OK(b, cudaEventRecord(bk->start[i], bk->stream));
    ran = run_once(bk, sw, p, engine, *bk->result, ws, &why);
    TDM_CUDA_OK(b, cudaEventRecord(bk->stop[i], bk->stream));
  }
  Timed *t = NULL;
  if (ran) {
    double ms[RUNS];
    TDM_CUDA_OK(b, cudaEventSynchronize(bk->stop[RUNS - 1]));
    for (int i = 0; i < RUNS; i++) {
      float one = 0;
      TDM_CUDA_OK(b, cudaEventElapsedTime(&one, bk->start[i], bk->stop[i]));
      ms[i] = one;
    }
    qsort(ms, RUNS, sizeof ms[0], tdm_bench_compare_doubles);
    tdm_backend_deviation(b, bk->work, *bk->result, bk->ref,
                          bk->out_type == CUDNN_DATA_BFLOAT16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32,
                          bk->result_count);
    double sums[2] = {0, 0};
    tdm_backend_download(b, sums, bk->work, sizeof sums);
    t = g_new0(Timed, 1);
    t->engine = engine;
    t->ms = (ms[RUNS / 2 - 1] + ms[RUNS / 2]) / 2;
    t->error = sums[1] > 0 ? sqrt(sums[0] / sums[1]) : sqrt(sums[0]);
    t->workspace = workspace;
  } else {
    sw->failed++;
    g_debug("%s: engine %" G_GINT64_FORMAT ": %s", sw->key, engine, why);
  }
  tdm_backend_synchronize(b);
  check(b);
  if (ws != NULL)
    tdm_backend_release(b, ws);
  return t;
}

/* ---- the sweep --------------------------------------------------------------------- */

/* A knob's values to try: every value of its range by stride, or 16 spread over it. */
static GArray *
values_of(const Range *r)
{
  GArray *values = g_array_new(FALSE, FALSE, sizeof(int64_t));
  int64_t stride = MAX(r->stride, 1);
  if (r->max < r->min)
    return values;
  /* In double: a knob's range may be as wide as int64_t's. */
  double count = floor(((double)r->max - (double)r->min) / (double)stride) + 1;
  int take = (int)MIN(count, KNOB_VALUES_MAX);
  for (int i = 0; i < take; i++) {
    double step = take > 1 ? round(i * (count - 1) / (take - 1)) : 0;
    double at = (double)r->min + step * (double)stride;
    int64_t v = at >= (double)r->max ? r->max : (int64_t)at;
    if (values->len == 0 || g_array_index(values, int64_t, values->len - 1) != v)
      g_array_append_val(values, v);
  }
  return values;
}

typedef struct {
  Bench *bk;
  Sweep *sw;
  cudnnBackendDescriptor_t graph;
  GHashTable *seen;            /* config_key()s tried */
  gint64 deadline;             /* g_get_monotonic_time() */
} Run;

static gboolean
out_of_time(Run *run)
{
  if (g_get_monotonic_time() < run->deadline)
    return FALSE;
  run->sw->cut = TRUE;
  return TRUE;
}

/* Builds and times engine e with these knobs (once: a configuration tried before, or
 * past --max-plans, gives NULL); the timed plan is kept in the sweep. */
static Timed *
try_knobs(Run *run, Engine *e, GArray *knobs, const char *origin)
{
  if (e->tried >= run->bk->max_plans ||
      !g_hash_table_add(run->seen, config_key(e->engine, knobs)))
    return NULL;
  e->tried++;
  Plan p = {0};
  if (!plan_with_knobs(run->bk, run->graph, e->engine, knobs, &p)) {
    run->sw->refused++;
    return NULL;
  }
  Timed *t = time_plan(run->bk, run->sw, &p, e->engine, FALSE);
  plan_clear(run->bk, &p);
  if (t == NULL)
    return NULL;
  t->origin = g_strdup(origin);
  t->knobs = g_array_copy(knobs);
  t->spelt = knobs_spelt(knobs, e->base);
  g_ptr_array_add(run->sw->timed, t);
  return t;
}

typedef struct {
  int type;
  double best_ms;
  GArray *values;              /* int64_t: the values that ran, fastest first */
} Helped;

static int
by_best(gconstpointer a, gconstpointer b)
{
  double x = ((const Helped *)a)->best_ms, y = ((const Helped *)b)->best_ms;
  return (x > y) - (x < y);
}

/* Engine e's knobs one at a time from its heuristics' configuration, then the product
 * of the best values of the knobs that helped most. */
static void
sweep_engine(Run *run, Engine *e)
{
  GArray *helped = g_array_new(FALSE, FALSE, sizeof(Helped));
  for (guint r = 0; r < e->ranges->len && !out_of_time(run); r++) {
    const Range *range = &g_array_index(e->ranges, Range, r);
    g_autoptr(GArray) values = values_of(range);
    Helped h = {range->type, INFINITY, g_array_new(FALSE, FALSE, sizeof(int64_t))};
    g_autoptr(GArray) ms = g_array_new(FALSE, FALSE, sizeof(double));
    for (guint v = 0; v < values->len && !out_of_time(run); v++) {
      int64_t value = g_array_index(values, int64_t, v);
      g_autoptr(GArray) knobs = knobs_with(e->base, range->type, value);
      Timed *t = try_knobs(run, e, knobs, "knob");
      if (t == NULL || !(t->error <= ERROR_FLAG))
        continue;
      /* Kept fastest first (an insertion: at most 16). */
      guint at = 0;
      while (at < ms->len && g_array_index(ms, double, at) <= t->ms)
        at++;
      g_array_insert_val(ms, at, t->ms);
      g_array_insert_val(h.values, at, value);
      h.best_ms = MIN(h.best_ms, t->ms);
    }
    if (h.best_ms < e->base_ms)
      g_array_append_val(helped, h);
    else
      g_array_unref(h.values);
  }
  g_array_sort(helped, by_best);
  guint knobs_in = MIN(helped->len, PRODUCT_KNOBS);
  if (knobs_in >= 2) {
    /* Each chosen knob's best values and the heuristics' own, every combination. */
    guint sizes[PRODUCT_KNOBS] = {0}, digits[PRODUCT_KNOBS] = {0}, total = 1;
    for (guint i = 0; i < knobs_in; i++) {
      Helped *h = &g_array_index(helped, Helped, i);
      g_array_set_size(h->values, MIN(h->values->len, PRODUCT_VALUES));
      int64_t own = knob_value(e->base, h->type, G_MININT64);
      if (own != G_MININT64)
        g_array_append_val(h->values, own);
      sizes[i] = h->values->len;
      total *= sizes[i];
    }
    for (guint n = 0; n < total && !out_of_time(run) && e->tried < run->bk->max_plans; n++) {
      guint rest = n;
      g_autoptr(GArray) knobs = g_array_copy(e->base);
      for (guint i = 0; i < knobs_in; i++) {
        digits[i] = rest % sizes[i];
        rest /= sizes[i];
        Helped *h = &g_array_index(helped, Helped, i);
        GArray *next = knobs_with(knobs, h->type, g_array_index(h->values, int64_t, digits[i]));
        g_array_unref(knobs);
        knobs = next;
      }
      try_knobs(run, e, knobs, "product");
    }
  }
  for (guint i = 0; i < helped->len; i++)
    g_array_unref(g_array_index(helped, Helped, i).values);
  g_array_unref(helped);
}

/* The heuristics' configurations of graph in mode `mode`, appended to cfgs; the
 * descriptors are added to `made` as well. FALSE when the mode refuses the graph. */
static gboolean
heuristics(Bench *bk, cudnnBackendDescriptor_t graph, int mode, GPtrArray *cfgs,
           GPtrArray *made)
{
  const TdmCudnn *dnn = bk->dnn;
  cudnnBackendDescriptor_t heur = NULL;
  if (dnn->create_descriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) !=
      CUDNN_STATUS_SUCCESS)
    return FALSE;
  g_ptr_array_add(made, heur);
  int64_t count = 0;
  if (dnn->set_attribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph) != CUDNN_STATUS_SUCCESS ||
      dnn->set_attribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) !=
          CUDNN_STATUS_SUCCESS ||
      dnn->finalize(heur) != CUDNN_STATUS_SUCCESS ||
      dnn->get_attribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                         &count, NULL) != CUDNN_STATUS_SUCCESS)
    return FALSE;
  count = CLAMP(count, 0, HEUR_RESULTS_MAX);
  g_autofree cudnnBackendDescriptor_t *mine = g_new0(cudnnBackendDescriptor_t, MAX(count, 1));
  for (int64_t i = 0; i < count; i++) {
    if (dnn->create_descriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &mine[i]) !=
        CUDNN_STATUS_SUCCESS)
      return FALSE;
    g_ptr_array_add(made, mine[i]);
  }
  int64_t got = 0;
  if (count > 0 &&
      dnn->get_attribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                         count, &got, mine) != CUDNN_STATUS_SUCCESS)
    return FALSE;
  for (int64_t i = 0; i < MIN(got, count); i++)
    g_ptr_array_add(cfgs, mine[i]);
  return TRUE;
}

static Engine *
engine_in(Sweep *sw, int64_t index)
{
  for (guint i = 0; i < sw->engines->len; i++)
    if (((Engine *)g_ptr_array_index(sw->engines, i))->engine == index)
      return g_ptr_array_index(sw->engines, i);
  return NULL;
}

/* Random bf16 values in [-1, 1) at a new device buffer of `count` values, from *state
 * (xorshift64*: GRand takes seconds for the 134 M values of a 128-px batch). */
static void *
random_bf16(TdmBackend *b, size_t count, guint64 *state)
{
  g_autofree uint16_t *host = g_new(uint16_t, count);
  for (size_t i = 0; i < count; i++) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    guint64 bits = (*state * 0x2545f4914f6cdd1dull) >> 40; /* 24 bits */
    host[i] = tdm_bf16_round((float)bits / (float)(1u << 23) - 1.0f);
  }
  void *d = tdm_bench_alloc(b, count * sizeof(uint16_t));
  tdm_backend_upload(b, d, host, count * sizeof(uint16_t));
  return d;
}

/* The sweep of one shape and direction, until `deadline`. */
static void
sweep(Bench *bk, Sweep *sw, gint64 deadline)
{
  TdmBackend *b = bk->b;
  const TdmConvShape *s = &sw->s;
  size_t images = (size_t)s->n * s->h * s->w * s->c;
  size_t filters = (size_t)s->out_c * s->kernel * s->kernel * s->c;
  size_t outs = (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s) * s->out_c;
  size_t out_size = bk->out_type == CUDNN_DATA_BFLOAT16 ? 2 : 4;
  guint64 rand = SEED;
  /* The operands as bf16; the output in its own type, its reference beside it. */
  bk->image = sw->dir == TDM_CONV_DGRAD ? tdm_bench_alloc(b, images * out_size)
                                        : random_bf16(b, images, &rand);
  bk->filter = sw->dir == TDM_CONV_WGRAD ? tdm_bench_alloc(b, filters * out_size)
                                         : random_bf16(b, filters, &rand);
  bk->outs = sw->dir == TDM_CONV_FORWARD ? tdm_bench_alloc(b, outs * out_size)
                                         : random_bf16(b, outs, &rand);
  bk->result = sw->dir == TDM_CONV_FORWARD ? &bk->outs
               : sw->dir == TDM_CONV_DGRAD ? &bk->image
                                           : &bk->filter;
  bk->result_count = sw->dir == TDM_CONV_FORWARD ? outs
                     : sw->dir == TDM_CONV_DGRAD ? images
                                                 : filters;
  bk->ref = tdm_bench_alloc(b, result_bytes(bk));

  TdmCudnnBuild bd;
  tdm_cudnn_build_init(&bd, bk->dnn);
  cudnnBackendDescriptor_t graph = tdm_cudnn_build_conv_graph(
      &bd, bk->handle, sw->dir, s, CUDNN_DATA_BFLOAT16, bk->out_type);
  g_autoptr(GPtrArray) cfgs = g_ptr_array_new();
  g_autoptr(GPtrArray) made = g_ptr_array_new();
  g_autoptr(GArray) modes = g_array_new(FALSE, FALSE, sizeof(int));
  if (graph == NULL) {
    g_autofree char *text = tdm_cudnn_describe(bk->dnn, bd.status);
    sw->why_not = g_strdup_printf("%s: %s", bd.what, text);
  } else {
    static const int wanted[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B};
    for (guint m = 0; m < G_N_ELEMENTS(wanted); m++) {
      guint before = cfgs->len;
      if (heuristics(bk, graph, wanted[m], cfgs, made))
        for (guint i = before; i < cfgs->len; i++)
          g_array_append_val(modes, wanted[m]);
      else
        g_ptr_array_set_size(cfgs, before);
    }
    if (cfgs->len == 0)
      sw->why_not = g_strdup("cuDNN's heuristics give no configuration");
  }

  /* The heuristics' own configurations of the first --engines engines (every one of
   * theirs), the first that runs giving the reference output. */
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  Run run = {bk, sw, graph, seen, deadline};
  gboolean have_reference = FALSE;
  int rank[2] = {0, 0};
  for (guint i = 0; i < cfgs->len && !out_of_time(&run); i++) {
    cudnnBackendDescriptor_t cfg = g_ptr_array_index(cfgs, i);
    int mode = g_array_index(modes, int, i);
    int r = rank[mode == CUDNN_HEUR_MODE_B]++;
    int64_t index = -1;
    gboolean accepted = FALSE;
    if (!engine_of(bk, cfg, &index, &accepted, NULL))
      continue;
    Engine *e = engine_in(sw, index);
    if (!accepted || (e == NULL && (int)sw->engines->len >= bk->engines)) {
      sw->by_notes += !accepted;
      continue;
    }
    g_autoptr(GArray) knobs = choices_of(bk, cfg);
    if (!g_hash_table_add(seen, config_key(index, knobs)))
      continue;
    Plan p = {0};
    Timed *t = NULL;
    if (plan_of_cfg(bk, cfg, &p))
      t = time_plan(bk, sw, &p, index, !have_reference);
    else
      sw->refused++;
    plan_clear(bk, &p);
    if (t == NULL)
      continue;
    have_reference = TRUE;
    t->origin = g_strdup_printf("%c:r%d", mode == CUDNN_HEUR_MODE_A ? 'A' : 'B', r);
    t->knobs = g_array_ref(knobs);
    if (e == NULL) {
      e = g_new0(Engine, 1);
      e->engine = index;
      e->ranges = engine_ranges(bk, graph, index, cfg);
      e->base = g_array_ref(knobs);
      e->base_ms = t->ms;
      e->tried = 1;
      g_ptr_array_add(sw->engines, e);
    }
    t->spelt = knobs_spelt(knobs, e->base);
    g_ptr_array_add(sw->timed, t);
  }

  /* Each engine's knobs, the time left shared out evenly among the engines left. */
  for (guint i = 0; i < sw->engines->len && !out_of_time(&run); i++) {
    gint64 now = g_get_monotonic_time();
    run.deadline = now + (deadline - now) / (gint64)(sw->engines->len - i);
    sweep_engine(&run, g_ptr_array_index(sw->engines, i));
    run.deadline = deadline;
  }
  g_hash_table_destroy(seen);

  for (guint i = 0; i < made->len; i++)
    bk->dnn->destroy_descriptor(g_ptr_array_index(made, i));
  tdm_cudnn_build_end(&bd);
  void *all[] = {bk->image, bk->filter, bk->outs, bk->ref};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++)
    tdm_backend_release(b, all[i]);
  bk->image = bk->filter = bk->outs = bk->ref = NULL;
  bk->result = NULL;
}

/* ---- main -------------------------------------------------------------------------- */

/* "fwd n128 h128 w128 c64 o64 k3 p1 s1" (an engine's conv key; later words ignored). */
static gboolean
parse_shape(const char *text, TdmConvDirection *dir, TdmConvShape *s)
{
  g_auto(GStrv) words = g_strsplit_set(text, " \t", -1);
  *s = (TdmConvShape){0, 0, 0, 0, 0, 3, 1, 1};
  int found = -1;
  guint w = 0;
  while (words[w] != NULL && words[w][0] == '\0')
    w++;
  for (int d = 0; words[w] != NULL && d < 3; d++)
    if (g_str_equal(words[w], direction_names[d]))
      found = d;
  if (found < 0)
    return FALSE;
  *dir = found;
  for (w++; words[w] != NULL; w++) {
    const char *word = words[w];
    char *end = NULL;
    if (word[0] == '\0' || strchr("nhwcokps", word[0]) == NULL || !g_ascii_isdigit(word[1]))
      continue;
    long value = strtol(word + 1, &end, 10);
    if (*end != '\0' || value < 0 || value > G_MAXINT)
      continue;
    int *at[] = {&s->n, &s->h, &s->w, &s->c, &s->out_c, &s->kernel, &s->pad, &s->stride};
    *at[strchr("nhwcokps", word[0]) - "nhwcokps"] = (int)value;
  }
  return s->n > 0 && s->h > 0 && s->w > 0 && s->c > 0 && s->out_c > 0 && s->kernel > 0 &&
         s->stride > 0 && tdm_conv_out_h(s) > 0 && tdm_conv_out_w(s) > 0;
}

static const char *const default_shapes[] = {
  "fwd n128 h128 w128 c64 o64 k3 p1 s1",   "dgrad n128 h128 w128 c64 o64 k3 p1 s1",
  "wgrad n128 h128 w128 c64 o64 k3 p1 s1", "fwd n256 h64 w64 c64 o64 k3 p1 s1",
  "dgrad n256 h64 w64 c64 o64 k3 p1 s1",   "wgrad n256 h64 w64 c64 o64 k3 p1 s1",
  "fwd n128 h64 w64 c128 o128 k3 p1 s1",   "dgrad n128 h64 w64 c128 o128 k3 p1 s1",
  "wgrad n128 h64 w64 c128 o128 k3 p1 s1",
};

int
main(int argc, char **argv)
{
  g_auto(GStrv) shapes = NULL;
  g_autofree char *json = NULL, *out = NULL;
  int engines = 6, max_plans = 150, lines = 20;
  double budget = 150;
  gboolean runtime = FALSE;
  GOptionEntry entries[] = {
    {"shape", 0, 0, G_OPTION_ARG_STRING_ARRAY, &shapes,
     "A convolution as the engine keys it (repeatable)",
     "\"fwd n128 h128 w128 c64 o64 k3 p1 s1\""},
    {"engines", 0, 0, G_OPTION_ARG_INT, &engines, "Distinct engines a shape (6)", "N"},
    {"max-plans", 0, 0, G_OPTION_ARG_INT, &max_plans, "Configurations an engine (150)", "N"},
    {"budget", 0, 0, G_OPTION_ARG_DOUBLE, &budget, "Seconds of sweeping in all (150)", "S"},
    {"out", 0, 0, G_OPTION_ARG_STRING, &out, "The output's type: h bf16 (default), f float32",
     "h|f"},
    {"runtime", 0, 0, G_OPTION_ARG_NONE, &runtime, "Runtime-compiled engines too", NULL},
    {"lines", 0, 0, G_OPTION_ARG_INT, &lines,
     "Plans a shape's table shows beside the heuristics' own (20; 0: all)", "N"},
    {"json", 0, 0, G_OPTION_ARG_FILENAME, &json, "Everything, as JSON", "FILE"},
    {NULL},
  };
  g_autoptr(GOptionContext) context =
      g_option_context_new("- cuDNN's engines timed with other knob settings");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    fprintf(stderr, "%s\n", error->message);
    return 2;
  }
  if (out != NULL && !g_str_equal(out, "h") && !g_str_equal(out, "f")) {
    fprintf(stderr, "--out is h or f\n");
    return 2;
  }
  const char *const *list = shapes != NULL ? (const char *const *)shapes : default_shapes;
  int count = shapes != NULL ? (int)g_strv_length(shapes) : (int)G_N_ELEMENTS(default_shapes);
  g_autofree Sweep *sweeps = g_new0(Sweep, count);
  for (int i = 0; i < count; i++) {
    if (!parse_shape(list[i], &sweeps[i].dir, &sweeps[i].s)) {
      fprintf(stderr, "not a shape: \"%s\" (e.g. \"fwd n128 h128 w128 c64 o64 k3 p1 s1\")\n",
              list[i]);
      return 2;
    }
    const TdmConvShape *s = &sweeps[i].s;
    sweeps[i].key = g_strdup_printf("%s n%d h%d w%d c%d o%d k%d p%d s%d",
                                    direction_names[sweeps[i].dir], s->n, s->h, s->w, s->c,
                                    s->out_c, s->kernel, s->pad, s->stride);
    sweeps[i].timed = g_ptr_array_new_with_free_func(timed_free);
    sweeps[i].engines = g_ptr_array_new_with_free_func(engine_free);
  }

  if (!tdm_backend_cuda_available()) {
    fprintf(stderr, "no CUDA GPU\n");
    return 77;
  }
  Bench bk = {0};
  bk.dnn = tdm_cudnn_get();
  if (bk.dnn == NULL) {
    fprintf(stderr, "%s\n", tdm_cudnn_why_not() != NULL ? tdm_cudnn_why_not() : "no cuDNN");
    return 77;
  }
  bk.b = tdm_backend_new(TDM_DEVICE_GPU(0), TDM_PRECISION_BF16, &error);
  if (bk.b == NULL)
    g_error("%s", error->message);
  bk.stream = tdm_backend_cuda_stream(bk.b);
  bk.out_type = out != NULL && g_str_equal(out, "f") ? CUDNN_DATA_FLOAT : CUDNN_DATA_BFLOAT16;
  bk.runtime = runtime;
  bk.engines = MAX(engines, 1);
  bk.max_plans = MAX(max_plans, 1);
  if (!tdm_cuda_begin(bk.b))
    check(bk.b);
  cudnnStatus_t status = bk.dnn->create(&bk.handle);
  if (status == CUDNN_STATUS_SUCCESS)
    status = bk.dnn->set_stream(bk.handle, bk.stream);
  if (status != CUDNN_STATUS_SUCCESS)
    g_error("cudnnCreate: %s", tdm_cudnn_describe(bk.dnn, status));
  for (int i = 0; i < RUNS; i++) {
    TDM_CUDA_OK(bk.b, cudaEventCreate(&bk.start[i]));
    TDM_CUDA_OK(bk.b, cudaEventCreate(&bk.stop[i]));
  }
  bk.work = tdm_bench_alloc(bk.b, TDM_DEVIATION_WORK_DOUBLES * sizeof(double));
  check(bk.b);
  struct cudaDeviceProp prop = {0};
  (void)cudaGetDeviceProperties(&prop, 0);
  Setup setup = {prop.name, bk.dnn->version,
                 bk.out_type == CUDNN_DATA_BFLOAT16 ? "bf16" : "float32", budget, bk.engines,
                 bk.max_plans, bk.runtime};
  printf("%s, cuDNN %zu.%zu.%zu; %s output; %d engines a shape, at most %d configurations an "
         "engine, %.0f s in all\n",
         prop.name, bk.dnn->version / 10000, bk.dnn->version / 100 % 100, bk.dnn->version % 100,
         setup.output, bk.engines, bk.max_plans, budget);

  int rc = 0;
  gint64 deadline = g_get_monotonic_time() + (gint64)(budget * G_USEC_PER_SEC);
  for (int i = 0; i < count; i++) {
    gint64 now = g_get_monotonic_time();
    sweep(&bk, &sweeps[i], now + MAX(deadline - now, 0) / (count - i));
    sweep_print(&sweeps[i], setup.output, lines);
    /* After each shape, so a run cut short (a plan that faults kills the process) leaves
     * what it had. */
    if (json != NULL && !sweeps_write_json(json, sweeps, i + 1, &setup))
      rc = 1;
  }
  printf("== summaries\n");
  for (int i = 0; i < count; i++)
    sweep_summary(&sweeps[i]);

  for (int i = 0; i < count; i++) {
    g_ptr_array_unref(sweeps[i].timed);
    g_ptr_array_unref(sweeps[i].engines);
    g_free(sweeps[i].key);
    g_free(sweeps[i].why_not);
  }
  for (int i = 0; i < RUNS; i++) {
    (void)cudaEventDestroy(bk.start[i]);
    (void)cudaEventDestroy(bk.stop[i]);
  }
  tdm_backend_release(bk.b, bk.work);
  bk.dnn->destroy(bk.handle);
  tdm_backend_free(bk.b);
  return rc;
}
