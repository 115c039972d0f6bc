/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-conv-small.c — the host side of the engine's few-channel candidates
 * (tdm-backend-cuda-conv-small.h): conv-small-plan.h decides the shapes and the scratch,
 * conv-small.cu's launchers run them on the call's operands as the layout has them (the
 * weights as bf16, dy as bf16 at the workspace's start in backward; x as the caller
 * stores it, a bn before normalized as it is read). Both are deterministic: the forward
 * sums each output in one order, the weight gradient its partials in a fixed one.
 */
#include "tdm-backend-cuda-conv-small.h"
#include "conv-small-plan.h"

const char *
tdm_conv_small_name(TdmConvDirection dir)
{
  switch (dir) {
  case TDM_CONV_FORWARD:
    return "own:fwd";
  case TDM_CONV_WGRAD:
    return "own:wgrad";
  case TDM_CONV_DGRAD:
    break;
  }
  return NULL;
}

static gboolean
plan_of(const TdmConvLayout *l, TdmKSmallPlan *p)
{
  const TdmConvShape *s = &l->a->shape;
  return tdm_k_small_plan(s->n, s->h, s->w, s->c, s->out_c, s->kernel, s->pad, s->stride, p);
}

gboolean
tdm_conv_small_takes(TdmBackend *b, const TdmConvLayout *l)
{
  const TdmConvArgs *a = l->a;
  TdmKSmallPlan p;
  if (!l->bf16 || CUDA_B(b)->major < 8 || a->x == NULL || !plan_of(l, &p))
    return FALSE;
  switch (l->dir) {
  case TDM_CONV_FORWARD: {
    const void *y = a->y16 != NULL ? (const void *)a->y16 : (const void *)a->y;
    return y != NULL && ((uintptr_t)y & 15u) == 0;
  }
  case TDM_CONV_WGRAD:
    return a->dw != NULL && l->dy16 != NULL;
  case TDM_CONV_DGRAD:
    break;
  }
  return FALSE;
}

size_t
tdm_conv_small_scratch(const TdmConvLayout *l)
{
  TdmKSmallPlan p;
  if (l->dir != TDM_CONV_WGRAD || !plan_of(l, &p))
    return 0;
  return p.partial_bytes;
}

void
tdm_conv_small_run(TdmBackend *b, const TdmConvLayout *l, void *scratch)
{
  const TdmConvArgs *a = l->a;
  const TdmConvShape *s = &a->shape;
  gboolean x16 = a->x_type == TDM_DTYPE_BF16;
  cudaStream_t stream = CUDA_B(b)->stream;
  if (l->dir == TDM_CONV_FORWARD) {
    gboolean y16 = a->y16 != NULL;
    void *y = y16 ? (void *)a->y16 : (void *)a->y;
    TDM_CUDA_OK(b, tdm_k_conv_small_forward(y, y16, a->x, x16, a->bn_mean, a->bn_invstd,
                                            a->bn_gamma, a->bn_beta, a->bn_relu, l->w16, s->n,
                                            s->h, s->w, s->c, s->out_c, s->kernel, s->pad,
                                            s->stride, stream));
  } else if (l->dir == TDM_CONV_WGRAD) {
    TDM_CUDA_OK(b, tdm_k_conv_small_wgrad(a->dw, scratch, l->dy16, a->x, x16, a->bn_mean,
                                          a->bn_invstd, a->bn_gamma, a->bn_beta, a->bn_relu,
                                          s->n, s->h, s->w, s->c, s->out_c, s->kernel, s->pad,
                                          s->stride, stream));
  }
}
