/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cuda-stem-bn.c — the CUDA backend's stem and bn in two passes
 * (tdm-backend.h's TdmStemBn; kernels/conv-stem-bn.cu): taken in a bf16 run on sm_80 or
 * later, for a float32 image and a shape the kernels' plan takes
 * (conv-small-plan.h's tdm_k_stem_bn_plan()), and only where the convolution engine's
 * last forward of that stem ran conv-small's own:fwd: the passes make the stem's output
 * again with its tiles and MMAs, its bits, which cuDNN's or im2col's forward would not
 * have written. Not the four steps they replace (the replica's), nor the all-reduce of
 * synchronized bn's sums between them.
 */
#include "tdm-backend-cuda-private.h"
#include "conv-small-plan.h"

/* The key of the stem's forward as the replica calls the engine (tdm-replica-conv.c):
 * an image of x_type in, the output as bf16, no bn before it. */
static gboolean
forward_ran_own(TdmBackend *b, const TdmConvShape *s, TdmDtype x_type)
{
  static uint16_t bf16_output; /* only its address: "a bf16 output" */
  TdmConvArgs a = {.shape = *s, .x_type = x_type, .y16 = &bf16_output};
  return tdm_cuda_conv_ran(b, &a, "own:fwd");
}

static gboolean
plan_of(const TdmConvShape *s, TdmKStemBnPlan *p)
{
  return tdm_k_stem_bn_plan(s->n, s->h, s->w, s->c, s->out_c, s->kernel, s->pad, s->stride, p);
}

/* Taken only with TANDEM_STEM_BN=1 until the kernels have run on a GPU (built and
 * tested on the CPU side only, 2026-12-08). */
static gboolean
passes_wanted(void)
{
  return g_strcmp0(g_getenv("TANDEM_STEM_BN"), "1") == 0;
}

gboolean
tdm_cuda_stem_bn_takes(TdmBackend *b, const TdmConvShape *s, TdmDtype x_type,
                       size_t *work_bytes)
{
  TdmKStemBnPlan p;
  if (!passes_wanted() || b->precision != TDM_PRECISION_BF16 || CUDA_B(b)->major < 8 || x_type != TDM_DTYPE_F32 ||
      !plan_of(s, &p) || !forward_ran_own(b, s, x_type))
    return FALSE;
  *work_bytes = p.scratch_bytes;
  return TRUE;
}

/* The bf16 weights the forward read: the caller's (own:fwd reads a->w16 where it is
 * given and 16-byte aligned), else a->w rounded as the engine rounds it (to_bf16's
 * bits), at the spare's start, which the passes leave alone otherwise. */
static const uint16_t *
weights16(TdmBackend *b, const TdmStemBn *a)
{
  if (a->w16 != NULL && ((uintptr_t)a->w16 & 15u) == 0)
    return a->w16;
  const TdmConvShape *s = &a->shape;
  size_t count = (size_t)s->out_c * s->kernel * s->kernel * s->c;
  TDM_CUDA_OK(b, tdm_k_to_bf16(a->spare, a->w, count, tdm_backend_cuda_stream(b)));
  return a->spare;
}

void
tdm_cuda_stem_bn_sums(TdmBackend *b, const TdmStemBn *a, float *dgamma, float *dbeta)
{
  const TdmConvShape *s = &a->shape;
  if (!tdm_cuda_begin(b))
    return;
  const uint16_t *w16 = weights16(b, a);
  TDM_CUDA_OK(b, tdm_k_stem_bn_sums(dgamma, dbeta, a->dy, a->x, w16, a->mean, a->invstd,
                                    a->gamma, a->beta, a->relu, s->n, s->h, s->w, s->c,
                                    s->out_c, s->kernel, s->pad, s->stride, a->work,
                                    a->work_bytes, tdm_backend_cuda_stream(b)));
}

void
tdm_cuda_stem_bn_dx_wgrad(TdmBackend *b, const TdmStemBn *a, const float *sum_dgamma,
                          const float *sum_dbeta, float inv_count, float *dw)
{
  const TdmConvShape *s = &a->shape;
  if (!tdm_cuda_begin(b))
    return;
  const uint16_t *w16 = weights16(b, a);
  TDM_CUDA_OK(b, tdm_k_stem_bn_dx_wgrad(dw, a->dy, a->x, w16, a->mean, a->invstd, a->gamma,
                                        a->beta, a->relu, sum_dgamma, sum_dbeta, inv_count,
                                        s->n, s->h, s->w, s->c, s->out_c, s->kernel, s->pad,
                                        s->stride, a->work, a->work_bytes,
                                        tdm_backend_cuda_stream(b)));
}
