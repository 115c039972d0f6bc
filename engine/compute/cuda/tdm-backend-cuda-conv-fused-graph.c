/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-fused-graph.c — the bn-prologue forward and weight gradient as
 * one cuDNN graph each (tdm-backend-cuda-conv-fused-graph.h), built from
 * tdm-backend-cuda-conv-cudnn.c's blocks.
 *
 * Operations, in cuDNN's terms (the operation graph finds their order from the tensors
 * they share): MUL(x, scale) → t1, ADD(t1, shift) → t2, RELU_FWD(t2) → t3 (without the
 * bn's ReLU, t2 is the convolution's input), then CONVOLUTION_FORWARD(t3, w) → y or
 * CONVOLUTION_BACKWARD_FILTER(t3, dy) → dw. The per-channel vectors are 1 × c × 1 × 1
 * and broadcast over n, h, w; the intermediates are virtual, float32 where cuDNN takes
 * that (the pointwise math is float32 always), else of the operands' type (NVIDIA's
 * samples of these patterns keep them in fp16 for the weight gradient): a graph of
 * float32 intermediates is tried first, and one of bf16 only where cuDNN refuses it or
 * finalizes no plan of it. Unique ids in the variant pack: 1 x, 2 w or dw, 3 y or dy,
 * 4 scale, 5 shift.
 */
#include "tdm-backend-cuda-conv-fused-graph.h"

#define UID_X 1
#define UID_W 2
#define UID_Y 3
#define UID_SCALE 4
#define UID_SHIFT 5
#define UID_SCALED 6
#define UID_SHIFTED 7
#define UID_ACTIVATED 8

/* One pointwise operation: y = mode(x) or mode(x, b) in float32. */
static void
pointwise(TdmCudnnBuild *bd, int mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
          cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t *op)
{
  cudnnBackendDescriptor_t pw = tdm_cudnn_build_make(bd, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  int precision = CUDNN_DATA_FLOAT;
  tdm_cudnn_build_set(bd, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode,
                      "pointwise mode");
  tdm_cudnn_build_set(bd, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
                      &precision, "pointwise precision");
  tdm_cudnn_build_finalize(bd, pw, "pointwise descriptor");
  *op = tdm_cudnn_build_make(bd, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  tdm_cudnn_build_set(bd, *op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, "pointwise operation's mode");
  tdm_cudnn_build_set(bd, *op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "pointwise operation's x");
  if (b != NULL)
    tdm_cudnn_build_set(bd, *op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "pointwise operation's b");
  tdm_cudnn_build_set(bd, *op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "pointwise operation's y");
  tdm_cudnn_build_finalize(bd, *op, "pointwise operation");
}

/* The finalized graph of direction dir (forward or weight gradient) with intermediates
 * of type `between`, or NULL with bd's status set. */
static cudnnBackendDescriptor_t
fused_graph(TdmCudnnBuild *bd, cudnnHandle_t handle, TdmConvDirection dir, const TdmConvShape *s,
            gboolean relu, int operand, int output, int between)
{
  int oh = tdm_conv_out_h(s), ow = tdm_conv_out_w(s);
  int f32 = CUDNN_DATA_FLOAT;
  gboolean forward = dir == TDM_CONV_FORWARD;
  cudnnBackendDescriptor_t x =
      tdm_cudnn_build_tensor(bd, UID_X, operand, s->n, s->c, s->h, s->w, FALSE);
  cudnnBackendDescriptor_t scale = tdm_cudnn_build_tensor(bd, UID_SCALE, f32, 1, s->c, 1, 1, FALSE);
  cudnnBackendDescriptor_t shift = tdm_cudnn_build_tensor(bd, UID_SHIFT, f32, 1, s->c, 1, 1, FALSE);
  cudnnBackendDescriptor_t scaled =
      tdm_cudnn_build_tensor(bd, UID_SCALED, between, s->n, s->c, s->h, s->w, TRUE);
  cudnnBackendDescriptor_t shifted =
      tdm_cudnn_build_tensor(bd, UID_SHIFTED, between, s->n, s->c, s->h, s->w, TRUE);
  cudnnBackendDescriptor_t activated =
      relu ? tdm_cudnn_build_tensor(bd, UID_ACTIVATED, between, s->n, s->c, s->h, s->w, TRUE)
           : NULL;
  /* The filter is the forward's operand or the weight gradient's output; the output
   * side the forward's output or the weight gradient's operand dy. */
  cudnnBackendDescriptor_t w = tdm_cudnn_build_tensor(
      bd, UID_W, forward ? operand : output, s->out_c, s->c, s->kernel, s->kernel, FALSE);
  cudnnBackendDescriptor_t y = tdm_cudnn_build_tensor(bd, UID_Y, forward ? output : operand,
                                                      s->n, s->out_c, oh, ow, FALSE);

  cudnnBackendDescriptor_t ops[4] = {NULL};
  int count = 0;
  pointwise(bd, CUDNN_POINTWISE_MUL, x, scale, scaled, &ops[count++]);
  pointwise(bd, CUDNN_POINTWISE_ADD, scaled, shift, shifted, &ops[count++]);
  if (relu)
    pointwise(bd, CUDNN_POINTWISE_RELU_FWD, shifted, NULL, activated, &ops[count++]);
  cudnnBackendDescriptor_t image = relu ? activated : shifted;

  cudnnBackendDescriptor_t conv = tdm_cudnn_build_convolution(bd, s);
  /* alpha, beta, the descriptor, image, filter, output side: the forward's attributes
   * or the weight gradient's. */
  static const int forward_attrs[6] = {
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
  };
  static const int wgrad_attrs[6] = {
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
  };
  const int *attrs = forward ? forward_attrs : wgrad_attrs;
  cudnnBackendDescriptor_t op = tdm_cudnn_build_make(
      bd, forward ? CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
                  : CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
  float alpha = 1.0f, beta = 0.0f;
  tdm_cudnn_build_set(bd, op, attrs[0], CUDNN_TYPE_FLOAT, 1, &alpha, "alpha");
  tdm_cudnn_build_set(bd, op, attrs[1], CUDNN_TYPE_FLOAT, 1, &beta, "beta");
  tdm_cudnn_build_set(bd, op, attrs[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv,
                      "operation's convolution");
  tdm_cudnn_build_set(bd, op, attrs[3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &image,
                      "operation's image");
  tdm_cudnn_build_set(bd, op, attrs[4], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w,
                      "operation's filter");
  tdm_cudnn_build_set(bd, op, attrs[5], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y,
                      "operation's output side");
  tdm_cudnn_build_finalize(bd, op, "convolution operation");
  ops[count++] = op;

  cudnnBackendDescriptor_t graph =
      tdm_cudnn_build_make(bd, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  tdm_cudnn_build_set(bd, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                      &handle, "graph handle");
  tdm_cudnn_build_set(bd, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                      count, ops, "graph operations");
  tdm_cudnn_build_finalize(bd, graph, "operation graph");
  return bd->status == CUDNN_STATUS_SUCCESS ? graph : NULL;
}

GPtrArray *
tdm_cudnn_fused_plans(const TdmCudnn *dnn, cudnnHandle_t handle, TdmConvDirection dir,
                      const TdmConvShape *s, gboolean relu, int operand, int output,
                      TdmCudnnFilter filter, int most, int only_rank, gint64 only_engine,
                      char **why_not)
{
  static const int modes[] = {CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_FALLBACK};
  const int betweens[2] = {CUDNN_DATA_FLOAT, operand};
  GPtrArray *plans = NULL;
  *why_not = NULL;
  for (int i = 0; i < (operand == CUDNN_DATA_FLOAT ? 1 : 2); i++) {
    if (plans != NULL)
      g_ptr_array_free(plans, TRUE);
    g_autofree char *why = NULL;
    TdmCudnnBuild bd;
    tdm_cudnn_build_init(&bd, dnn);
    cudnnBackendDescriptor_t graph =
        fused_graph(&bd, handle, dir, s, relu, operand, output, betweens[i]);
    plans = tdm_cudnn_build_plans(&bd, handle, graph, modes, G_N_ELEMENTS(modes), filter, TRUE,
                                  most, only_rank, only_engine, &why);
    if (plans->len > 0)
      break;
    g_autofree char *before = g_steal_pointer(why_not);
    *why_not = g_strdup_printf("%s%s%s intermediates: %s", before != NULL ? before : "",
                               before != NULL ? "; " : "", i == 0 ? "float32" : "bf16", why);
  }
  if (plans->len > 0)
    g_clear_pointer(why_not, g_free);
  return plans;
}

gboolean
tdm_cudnn_fused_run(const TdmCudnn *dnn, cudnnHandle_t handle, const TdmCudnnPlan *plan,
                    const void *x, const void *filter, void *out, const float *scale,
                    const float *shift, void *workspace, char **error)
{
  int64_t uids[5] = {UID_X, UID_W, UID_Y, UID_SCALE, UID_SHIFT};
  void *pointers[5] = {(void *)x, (void *)filter, out, (void *)scale, (void *)shift};
  return tdm_cudnn_plan_execute(dnn, handle, plan, 5, uids, pointers, workspace, NULL, error);
}
