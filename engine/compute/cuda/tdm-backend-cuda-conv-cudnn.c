/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-cudnn.c — a convolution's cuDNN graph and its plans (tdm-backend-cuda-conv-cudnn.h).
 *
 * cuDNN's backend API is a set of opaque descriptors filled attribute by attribute
 * and finalized: three tensors, a convolution descriptor, one operation, an operation
 * graph, the heuristics' engine configurations, and one execution plan per
 * configuration. The plans keep the descriptors they were built from alive (a shared
 * keep-list), so a plan stays valid on its own. Tensors are identified in a variant
 * pack by unique ids: 1 the image (x or dx), 2 the filter, 3 the output side (y or dy).
 */
#include "tdm-backend-cuda-conv-cudnn.h"

#define UID_IMAGE 1
#define UID_FILTER 2
#define UID_OUT 3
/* Every pointer handed to a plan is 16-byte aligned (the engine stages the others). */
#define TDM_CUDNN_ALIGNMENT 16
#define TDM_CUDNN_NOTES_MAX 16
/* The most configurations a graph of runtime-compiled engines tries (its first ranks). */
#define RUNTIME_TRIES 8

/* The descriptors of one graph, destroyed when the last plan built from them goes. */
struct _TdmCudnnKeep {
  const TdmCudnn *dnn;
  GPtrArray *descriptors;
  int refs;
};
typedef struct _TdmCudnnKeep Keep;

static void
keep_unref(Keep *k)
{
  if (k == NULL || --k->refs > 0)
    return;
  for (guint i = 0; i < k->descriptors->len; i++)
    k->dnn->destroy_descriptor(g_ptr_array_index(k->descriptors, i));
  g_ptr_array_free(k->descriptors, TRUE);
  g_free(k);
}

typedef TdmCudnnBuild Build;

void
tdm_cudnn_build_init(TdmCudnnBuild *bd, const TdmCudnn *dnn)
{
  bd->dnn = dnn;
  bd->keep = g_new0(Keep, 1);
  bd->keep->dnn = dnn;
  bd->keep->descriptors = g_ptr_array_new();
  bd->keep->refs = 1;
  bd->status = CUDNN_STATUS_SUCCESS;
  bd->what = NULL;
}

static gboolean
ok(Build *bd, cudnnStatus_t status, const char *what)
{
  if (bd->status == CUDNN_STATUS_SUCCESS && status != CUDNN_STATUS_SUCCESS) {
    bd->status = status;
    bd->what = what;
  }
  return bd->status == CUDNN_STATUS_SUCCESS;
}

cudnnBackendDescriptor_t
tdm_cudnn_build_make(TdmCudnnBuild *bd, int type)
{
  cudnnBackendDescriptor_t d = NULL;
  if (bd->status != CUDNN_STATUS_SUCCESS)
    return NULL;
  if (ok(bd, bd->dnn->create_descriptor(type, &d), "cudnnBackendCreateDescriptor"))
    g_ptr_array_add(bd->keep->descriptors, d);
  return d;
}

void
tdm_cudnn_build_set(TdmCudnnBuild *bd, cudnnBackendDescriptor_t d, int name, int type,
                    int64_t count, const void *value, const char *what)
{
  if (bd->status == CUDNN_STATUS_SUCCESS)
    ok(bd, bd->dnn->set_attribute(d, name, type, count, value), what);
}

void
tdm_cudnn_build_finalize(TdmCudnnBuild *bd, cudnnBackendDescriptor_t d, const char *what)
{
  if (bd->status == CUDNN_STATUS_SUCCESS)
    ok(bd, bd->dnn->finalize(d), what);
}

/* Short names for this file's graphs. */
static cudnnBackendDescriptor_t
make(Build *bd, int type)
{
  return tdm_cudnn_build_make(bd, type);
}

static void
set(Build *bd, cudnnBackendDescriptor_t d, int name, int type, int64_t count, const void *value,
    const char *what)
{
  tdm_cudnn_build_set(bd, d, name, type, count, value, what);
}

static void
finalize(Build *bd, cudnnBackendDescriptor_t d, const char *what)
{
  tdm_cudnn_build_finalize(bd, d, what);
}

cudnnBackendDescriptor_t
tdm_cudnn_build_view(TdmCudnnBuild *bd, int64_t uid, int type, const TdmCudnnView *v,
                     gboolean is_virtual)
{
  cudnnBackendDescriptor_t t = make(bd, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  int64_t alignment = TDM_CUDNN_ALIGNMENT;
  bool virtual_flag = is_virtual;
  set(bd, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor type");
  set(bd, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, v->dims, "tensor dimensions");
  set(bd, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, v->strides, "tensor strides");
  set(bd, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id");
  set(bd, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment,
      "tensor alignment");
  if (is_virtual)
    set(bd, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virtual_flag,
        "tensor virtual");
  finalize(bd, t, "tensor");
  return t;
}

TdmCudnnView
tdm_cudnn_packed(int64_t n, int64_t c, int64_t h, int64_t w)
{
  TdmCudnnView v = {{n, c, h, w}, {h * w * c, 1, w * c, c}};
  return v;
}

cudnnBackendDescriptor_t
tdm_cudnn_build_tensor(TdmCudnnBuild *bd, int64_t uid, int type, int64_t n, int64_t c,
                       int64_t h, int64_t w, gboolean is_virtual)
{
  TdmCudnnView v = tdm_cudnn_packed(n, c, h, w);
  return tdm_cudnn_build_view(bd, uid, type, &v, is_virtual);
}

cudnnBackendDescriptor_t
tdm_cudnn_build_convolution_padded(TdmCudnnBuild *bd, int64_t stride, const int64_t pre[2],
                                   const int64_t post[2])
{
  cudnnBackendDescriptor_t conv = make(bd, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  int compute = CUDNN_DATA_FLOAT, mode = CUDNN_CROSS_CORRELATION;
  int64_t dims = 2, ones[2] = {1, 1}, strides[2] = {stride, stride};
  set(bd, conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute,
      "convolution compute type");
  set(bd, conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode,
      "convolution mode");
  set(bd, conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims,
      "convolution dimensions");
  set(bd, conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, ones, "dilations");
  set(bd, conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides, "strides");
  set(bd, conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre, "padding");
  set(bd, conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post, "padding");
  finalize(bd, conv, "convolution descriptor");
  return conv;
}

cudnnBackendDescriptor_t
tdm_cudnn_build_convolution(TdmCudnnBuild *bd, const TdmConvShape *s)
{
  int64_t pads[2] = {s->pad, s->pad};
  return tdm_cudnn_build_convolution_padded(bd, s->stride, pads, pads);
}

cudnnBackendDescriptor_t
tdm_cudnn_build_conv_graph(TdmCudnnBuild *bd, cudnnHandle_t handle, TdmConvDirection dir,
                           const TdmConvShape *s, int operand, int output)
{
  TdmCudnnView image = tdm_cudnn_packed(s->n, s->c, s->h, s->w);
  TdmCudnnView filter = tdm_cudnn_packed(s->out_c, s->c, s->kernel, s->kernel);
  TdmCudnnView out = tdm_cudnn_packed(s->n, s->out_c, tdm_conv_out_h(s), tdm_conv_out_w(s));
  int64_t pads[2] = {s->pad, s->pad};
  return tdm_cudnn_build_view_graph(bd, handle, dir, &image, &filter, &out, s->stride, pads,
                                    pads, operand, output);
}

cudnnBackendDescriptor_t
tdm_cudnn_build_view_graph(TdmCudnnBuild *bd, cudnnHandle_t handle, TdmConvDirection dir,
                           const TdmCudnnView *image_view, const TdmCudnnView *filter_view,
                           const TdmCudnnView *out_view, int64_t stride, const int64_t pre[2],
                           const int64_t post[2], int operand, int output)
{
  int image_type = dir == TDM_CONV_DGRAD ? output : operand;
  int filter_type = dir == TDM_CONV_WGRAD ? output : operand;
  int out_type = dir == TDM_CONV_FORWARD ? output : operand;
  cudnnBackendDescriptor_t image = tdm_cudnn_build_view(bd, UID_IMAGE, image_type, image_view,
                                                        FALSE);
  cudnnBackendDescriptor_t filter =
      tdm_cudnn_build_view(bd, UID_FILTER, filter_type, filter_view, FALSE);
  cudnnBackendDescriptor_t out = tdm_cudnn_build_view(bd, UID_OUT, out_type, out_view, FALSE);
  cudnnBackendDescriptor_t conv = tdm_cudnn_build_convolution_padded(bd, stride, pre, post);

  static const int kinds[] = {
    [TDM_CONV_FORWARD] = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
    [TDM_CONV_DGRAD] = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
    [TDM_CONV_WGRAD] = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
  };
  /* Per direction: the attributes of alpha, beta, the descriptor, image, filter, out. */
  static const int attrs[][6] = {
    [TDM_CONV_FORWARD] = {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
    [TDM_CONV_DGRAD] = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
    [TDM_CONV_WGRAD] = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
  };
  cudnnBackendDescriptor_t op = make(bd, kinds[dir]);
  float alpha = 1.0f, beta = 0.0f;
  set(bd, op, attrs[dir][0], CUDNN_TYPE_FLOAT, 1, &alpha, "alpha");
  set(bd, op, attrs[dir][1], CUDNN_TYPE_FLOAT, 1, &beta, "beta");
  set(bd, op, attrs[dir][2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv, "operation's convolution");
  set(bd, op, attrs[dir][3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &image, "operation's image");
  set(bd, op, attrs[dir][4], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &filter, "operation's filter");
  set(bd, op, attrs[dir][5], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out, "operation's output");
  finalize(bd, op, "convolution operation");

  cudnnBackendDescriptor_t graph = make(bd, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(bd, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "graph handle");
  set(bd, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op,
      "graph operations");
  finalize(bd, graph, "operation graph");
  return bd->status == CUDNN_STATUS_SUCCESS ? graph : NULL;
}

static gboolean
has_note(const int *notes, int64_t count, int note)
{
  for (int64_t i = 0; i < count; i++)
    if (notes[i] == note)
      return TRUE;
  return FALSE;
}

gboolean
tdm_cudnn_notes_accepted(const int *notes, int64_t count, const int *behavior,
                         int64_t behavior_count, TdmCudnnFilter filter,
                         gboolean runtime_compiled)
{
  /* Runtime-compiled engines compile with NVRTC as their plan is finalized (seconds a
   * shape): a plain convolution has precompiled engines enough; a fused graph asks for
   * them (runtime_compiled). */
  if (!runtime_compiled &&
      has_note(behavior, behavior_count, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION))
    return FALSE;
  if (has_note(notes, count, CUDNN_NUMERICAL_NOTE_FFT) ||
      has_note(notes, count, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION))
    return FALSE;
  /* Never an engine whose sums depend on the order threads finish in (atomics): two runs
   * of a step must give the same bits (the pre-warm leaves no trace, a replica equals
   * itself), whatever --exact says. */
  if (has_note(notes, count, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC))
    return FALSE;
  if (filter.precision == TDM_PRECISION_FP32 &&
      (has_note(notes, count, CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
       has_note(notes, count, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) ||
       has_note(notes, count, CUDNN_NUMERICAL_NOTE_WINOGRAD) ||
       has_note(notes, count, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4) ||
       has_note(notes, count, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6) ||
       has_note(notes, count, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13)))
    return FALSE;
  if (filter.precision == TDM_PRECISION_TF32 &&
      has_note(notes, count, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
    return FALSE;
  return TRUE;
}

void
tdm_cudnn_plan_free(TdmCudnnPlan *plan)
{
  if (plan == NULL)
    return;
  if (plan->shared > 0) {
    plan->shared--;
    return;
  }
  if (plan->plan != NULL)
    plan->keep->dnn->destroy_descriptor(plan->plan);
  keep_unref(plan->keep);
  g_free(plan);
}

TdmCudnnPlan *
tdm_cudnn_plan_share(TdmCudnnPlan *plan)
{
  plan->shared++;
  return plan;
}

/* Plan from configuration cfg (rank r), or NULL when the engine is refused, is not
 * only_engine (when that is >= 0) or does not finalize (an engine may decline a shape
 * only at this point; a runtime-compiled one fails here where NVRTC is missing). */
static TdmCudnnPlan *
plan_of(const TdmCudnn *dnn, cudnnHandle_t handle, cudnnBackendDescriptor_t cfg, int rank,
        TdmCudnnFilter filter, gboolean runtime_compiled, gint64 only_engine, Keep *keep)
{
  cudnnBackendDescriptor_t engine = NULL;
  if (dnn->create_descriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS)
    return NULL;
  int64_t count = 0, index = -1, note_count = 0, behavior_count = 0;
  int notes[TDM_CUDNN_NOTES_MAX] = {0}, behavior[TDM_CUDNN_NOTES_MAX] = {0};
  gboolean read =
      dnn->get_attribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                         &count, &engine) == CUDNN_STATUS_SUCCESS &&
      dnn->get_attribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count,
                         &index) == CUDNN_STATUS_SUCCESS &&
      dnn->get_attribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                         TDM_CUDNN_NOTES_MAX, &note_count, notes) == CUDNN_STATUS_SUCCESS &&
      dnn->get_attribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                         TDM_CUDNN_NOTES_MAX, &behavior_count,
                         behavior) == CUDNN_STATUS_SUCCESS;
  dnn->destroy_descriptor(engine);
  note_count = CLAMP(note_count, 0, TDM_CUDNN_NOTES_MAX);
  behavior_count = CLAMP(behavior_count, 0, TDM_CUDNN_NOTES_MAX);
  if (!read || (only_engine >= 0 && index != only_engine))
    return NULL;
  if (!tdm_cudnn_notes_accepted(notes, note_count, behavior, behavior_count, filter,
                                runtime_compiled)) {
    if (runtime_compiled)
      g_debug("cuDNN engine %" G_GINT64_FORMAT " (rank %d) left out by its notes", index, rank);
    return NULL;
  }

  cudnnBackendDescriptor_t plan = NULL;
  if (dnn->create_descriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) !=
      CUDNN_STATUS_SUCCESS)
    return NULL;
  int64_t workspace = 0;
  cudnnStatus_t status = dnn->set_attribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                            CUDNN_TYPE_HANDLE, 1, &handle);
  const char *what = "plan's handle";
  if (status == CUDNN_STATUS_SUCCESS) {
    what = "plan's engine configuration";
    status = dnn->set_attribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
  }
  if (status == CUDNN_STATUS_SUCCESS) {
    what = "cudnnBackendFinalize (execution plan)";
    status = dnn->finalize(plan);
  }
  if (status == CUDNN_STATUS_SUCCESS) {
    what = "plan's workspace size";
    status = dnn->get_attribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                CUDNN_TYPE_INT64, 1, &count, &workspace);
  }
  if (status != CUDNN_STATUS_SUCCESS || workspace < 0) {
    if (runtime_compiled) {
      g_autofree char *text = tdm_cudnn_describe(dnn, status);
      g_debug("cuDNN engine %" G_GINT64_FORMAT " (rank %d%s): %s: %s", index, rank,
              has_note(behavior, behavior_count, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
                  ? ", runtime-compiled"
                  : "",
              what, text);
    }
    dnn->destroy_descriptor(plan);
    return NULL;
  }
  TdmCudnnPlan *p = g_new0(TdmCudnnPlan, 1);
  p->plan = plan;
  p->workspace = workspace;
  p->engine = index;
  p->rank = rank;
  p->runtime_compiled =
      has_note(behavior, behavior_count, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
  p->keep = keep;
  keep->refs++;
  return p;
}

void
tdm_cudnn_build_end(TdmCudnnBuild *bd)
{
  keep_unref(bd->keep);
  bd->keep = NULL;
}

GPtrArray *
tdm_cudnn_build_plans(TdmCudnnBuild *bd, cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                      const int *modes, int mode_count, TdmCudnnFilter filter,
                      gboolean runtime_compiled, int most, int only_rank, gint64 only_engine,
                      char **why_not)
{
  const TdmCudnn *dnn = bd->dnn;
  GPtrArray *plans = g_ptr_array_new();
  *why_not = NULL;
  /* Every mode's configurations, one after the other: a rank is a place in that list. A
   * mode that refuses the graph adds none (the debug log says so); the graph's own
   * failure, or every mode's, is the answer. */
  GPtrArray *cfgs = g_ptr_array_new();
  gboolean graph_ok = bd->status == CUDNN_STATUS_SUCCESS;
  cudnnStatus_t mode_status = CUDNN_STATUS_SUCCESS;
  const char *mode_what = NULL;
  for (int m = 0; graph_ok && m < mode_count; m++) {
    cudnnBackendDescriptor_t heur = make(bd, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    set(bd, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &graph, "heuristics' graph");
    set(bd, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m],
        "heuristics' mode");
    finalize(bd, heur, "heuristics");
    int64_t count = 0;
    if (bd->status == CUDNN_STATUS_SUCCESS)
      ok(bd, dnn->get_attribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL),
         "heuristics' result count");
    count = CLAMP(count, 0, 256);
    g_autofree cudnnBackendDescriptor_t *mine = g_new0(cudnnBackendDescriptor_t, MAX(count, 1));
    for (int64_t i = 0; i < count; i++)
      mine[i] = make(bd, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    int64_t got = 0;
    if (bd->status == CUDNN_STATUS_SUCCESS && count > 0)
      ok(bd, dnn->get_attribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, mine),
         "heuristics' results");
    for (int64_t i = 0; bd->status == CUDNN_STATUS_SUCCESS && i < MIN(got, count); i++)
      g_ptr_array_add(cfgs, mine[i]);
    if (bd->status != CUDNN_STATUS_SUCCESS) {
      if (mode_count > 1) {
        g_autofree char *text = tdm_cudnn_describe(dnn, bd->status);
        g_debug("cuDNN heuristics' mode %d: %s: %s", modes[m], bd->what, text);
      }
      mode_status = bd->status;
      mode_what = bd->what;
      bd->status = CUDNN_STATUS_SUCCESS;
      bd->what = NULL;
    }
  }
  if (!graph_ok || (cfgs->len == 0 && mode_status != CUDNN_STATUS_SUCCESS)) {
    cudnnStatus_t status = graph_ok ? mode_status : bd->status;
    g_autofree char *text = tdm_cudnn_describe(dnn, status);
    *why_not = g_strdup_printf("%s: %s", graph_ok ? mode_what : bd->what, text);
    g_ptr_array_free(cfgs, TRUE);
    keep_unref(bd->keep);
    bd->keep = NULL;
    return plans;
  }
  /* A runtime-compiled plan that fails may have spent seconds compiling: a fused graph
   * tries its first RUNTIME_TRIES configurations only. */
  guint tries = runtime_compiled ? MIN(cfgs->len, RUNTIME_TRIES) : cfgs->len;
  for (guint i = 0; i < tries && (int)plans->len < most; i++) {
    if (only_rank >= 0 && (int)i != only_rank)
      continue;
    TdmCudnnPlan *p = plan_of(dnn, handle, g_ptr_array_index(cfgs, i), (int)i, filter,
                              runtime_compiled, only_engine, bd->keep);
    if (p == NULL)
      continue;
    /* A later mode lists engines an earlier one did: one plan an engine. */
    gboolean again = FALSE;
    for (guint k = 0; k < plans->len; k++)
      again = again || ((TdmCudnnPlan *)g_ptr_array_index(plans, k))->engine == p->engine;
    if (again && mode_count > 1)
      tdm_cudnn_plan_free(p);
    else
      g_ptr_array_add(plans, p);
  }
  if (plans->len == 0)
    *why_not = g_strdup_printf("none of cuDNN's %u engine configurations takes it", cfgs->len);
  g_ptr_array_free(cfgs, TRUE);
  keep_unref(bd->keep);
  bd->keep = NULL;
  return plans;
}

GPtrArray *
tdm_cudnn_conv_plans(const TdmCudnn *dnn, cudnnHandle_t handle, TdmConvDirection dir,
                     const TdmConvShape *s, int operand, int output, TdmCudnnFilter filter,
                     int most, int only_rank, gint64 only_engine, char **why_not)
{
  Build bd;
  tdm_cudnn_build_init(&bd, dnn);
  cudnnBackendDescriptor_t graph =
      tdm_cudnn_build_conv_graph(&bd, handle, dir, s, operand, output);
  static const int modes[] = {CUDNN_HEUR_MODE_A};
  return tdm_cudnn_build_plans(&bd, handle, graph, modes, G_N_ELEMENTS(modes), filter, FALSE,
                               most, only_rank, only_engine, why_not);
}

gboolean
tdm_cudnn_refusal(cudnnStatus_t status)
{
  int category = CUDNN_STATUS_CATEGORY((int)status);
  return (category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_BAD_PARAM) &&
         cudaPeekAtLastError() == cudaSuccess;
}

gboolean
tdm_cudnn_plan_execute(const TdmCudnn *dnn, cudnnHandle_t handle, const TdmCudnnPlan *plan,
                       int count, const int64_t *uids, void *const *pointers, void *workspace,
                       gboolean *refused, char **error)
{
  if (refused != NULL)
    *refused = FALSE;
  cudnnBackendDescriptor_t pack = NULL;
  cudnnStatus_t status = dnn->create_descriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  const char *what = "variant pack";
  if (status == CUDNN_STATUS_SUCCESS)
    status = dnn->set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                count, uids);
  if (status == CUDNN_STATUS_SUCCESS)
    status = dnn->set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                CUDNN_TYPE_VOID_PTR, count, pointers);
  if (status == CUDNN_STATUS_SUCCESS)
    status = dnn->set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                &workspace);
  if (status == CUDNN_STATUS_SUCCESS)
    status = dnn->finalize(pack);
  if (status == CUDNN_STATUS_SUCCESS) {
    what = "cudnnBackendExecute";
    status = dnn->execute(handle, plan->plan, pack);
  }
  if (pack != NULL)
    dnn->destroy_descriptor(pack);
  if (status == CUDNN_STATUS_SUCCESS)
    return TRUE;
  if (refused != NULL)
    *refused = tdm_cudnn_refusal(status);
  g_autofree char *text = tdm_cudnn_describe(dnn, status);
  *error = g_strdup_printf("%s (cuDNN engine %" G_GINT64_FORMAT "): %s", what, plan->engine,
                           text);
  return FALSE;
}

gboolean
tdm_cudnn_plan_run(const TdmCudnn *dnn, cudnnHandle_t handle, const TdmCudnnPlan *plan,
                   void *image, void *filter, void *out, void *workspace, gboolean *refused,
                   char **error)
{
  int64_t uids[3] = {UID_IMAGE, UID_FILTER, UID_OUT};
  void *pointers[3] = {image, filter, out};
  return tdm_cudnn_plan_execute(dnn, handle, plan, 3, uids, pointers, workspace, refused,
                                error);
}
