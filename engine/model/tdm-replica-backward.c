/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-backward.c — the backward walk of a replica over the flat tree of layers
 * (tdm-network.h), from the loss gradient in grad_a down to the backward stop: each
 * layer's gradients as backend operations, the gradient moving between the halves of
 * the gradient region; blocks as RES_END … RES_BEGIN with the skip path's gradient kept
 * aside until the walk back reaches the block's start; batch normalization's sums
 * handed to the synchronized BN hook between its steps; the gradient a bn hands to a
 * bf16 conv before it written as that conv's bf16 operand (bn_dx_as_conv_dy16()), and
 * a conv's as bf16 for the bn before it (conv_dx_as_bf16()); a block's gradients kept
 * as bf16 where block_grad_bf16() says (the skip buffer holds the block's bf16 output
 * gradient, or a projection's compact one, and the block's start sums the two shares in
 * float32, rounded once, with the sums of the bn below in the same pass where it can,
 * start_sums_bn()); outputs that have no buffer (a frozen bn's, the stem's, a
 * projection's conv) computed again as the forward computed them, the stem's with its
 * bn and its weight gradient in two passes of the backend where it takes them
 * (stem_bn_in_two_passes()). Each layer's
 * parameters are announced to the gradient all-reduce as their gradients are ready. A
 * conv layer's own backward is tdm-replica-conv.c's, the forward walk
 * tdm-replica-forward.c's. */
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"

/* 1 / the rows the batch statistics run over: this shard's, or every replica's when
 * synchronized (the backward's; the forward's counts travel in the slots). */
static float
bn_inv_count(TdmReplica *r, int n, int pixels)
{
  int samples = r->bn_reduce != NULL && r->global_count > 0 ? r->global_count : n;
  return (float)(1.0 / ((double)samples * pixels));
}

/* The sums a bn's input gradient (its backward's step 2) reads, from this replica's
 * parameter gradients dgamma and dbeta (contiguous: dbeta = dgamma + C): those, or where
 * synchronized, every replica's: a copy of them all-reduced in work's first 2·C floats
 * (the gradients stay this replica's; the gradient all-reduce sums them). NULL where the
 * all-reduce failed. */
static const float *
bn_batch_sums(TdmReplica *r, float *dgamma, float *work, int c)
{
  if (r->bn_reduce == NULL)
    return dgamma;
  tdm_backend_copy(r->backend, work, dgamma, 2 * (size_t)c * sizeof(float));
  if (!tdm_replica_bn_reduce(r, work, 2 * (size_t)c))
    return NULL;
  return work;
}

/* dx from dy (of type dy_type: bf16 where the conv after the bn wrote it so,
 * conv_dx_as_bf16()) through BN (and its fused ReLU when relu: the backend recomputes
 * the mask from x), and the parameter gradients into dgamma and dbeta (contiguous:
 * dbeta = dgamma + C). With dx16, dx goes there as bfloat16 instead
 * (bn_dx_as_conv_dy16()). sums_ready: the block's start above wrote dgamma and dbeta
 * already, with the bits of the sums step (start_sums_bn()), so that step is skipped;
 * the synchronized step after it is the same. */
static void
bn_backward(TdmReplica *r, float *dx, uint16_t *dx16, const void *dy, TdmDtype dy_type,
            const void *x, TdmDtype x_type, int n, int pixels, int c, const float *gamma,
            const float *beta, bool relu, float *dgamma, float *work, gboolean sums_ready)
{
  TdmBackend *b = r->backend;
  int rows = n * pixels;
  const float *saved = work + 2 * c;
  if (!sums_ready)
    tdm_backend_bn_backward_sums(b, dgamma, dgamma + c, dy, dy_type, x, x_type, saved,
                                 saved + c, gamma, beta, relu, rows, c);
  const float *sums = bn_batch_sums(r, dgamma, work, c);
  if (sums == NULL)
    return;
  float inv_count = bn_inv_count(r, n, pixels);
  if (dx16 != NULL)
    tdm_backend_bn_backward_dx_bf16(b, dx16, dy, dy_type, x, x_type, saved, saved + c, gamma,
                                    beta, relu, sums, sums + c, inv_count, rows, c);
  else
    tdm_backend_bn_backward_dx(b, dx, dy, dy_type, x, x_type, saved, saved + c, gamma, beta,
                               relu, sums, sums + c, inv_count, rows, c);
}

/* Where the input gradient of bn layer i goes straight into the bf16 output gradient
 * of the conv before it (the second half of the conv's columns, tdm_replica_conv_bf16()): when
 * that conv reads its output gradient only as bf16 (its products on bf16 operands, its
 * input gradient too if it passes one on, no bias and no ReLU of its own), so the
 * float32 gradient would only be written to be rounded. The rounding is to_bf16's:
 * the same bits. NULL where the float32 path stays. Where the bn's own output gradient
 * dy is bf16 in the gradient region and the conv passes no gradient on
 * (bn_dx_in_place(): torchvision's stem), in place over dy; where the bn's input x is
 * the conv's bf16 output (bn_dx_over_input()), over x. */
static uint16_t *
bn_dx_as_conv_dy16(TdmReplica *r, int i, int n, const void *dy, TdmDtype dy_type,
                   const void *x, TdmDtype x_type)
{
  gboolean bn16 = tdm_replica_bn16(r->backend);
  if (!bn_dx_to_conv(r->net, i, bn16) || r->conv_work[i - 1] != NULL)
    return NULL;
  if (bn_dx_in_place(r->net, i, r->stores_bf16, bn16)) {
    g_assert(dy_type == TDM_DTYPE_BF16 && in_gradient_region(r, dy));
    return (uint16_t *)dy;
  }
  if (bn_dx_over_input(r->net, i, r->stores_bf16, bn16)) {
    g_assert(x != NULL && x_type == TDM_DTYPE_BF16);
    return (uint16_t *)x;
  }
  /* At the workspace's start, where the conv's backward reads it whatever way it was
   * chosen; the workspace grows where it holds less (a shape it was not sized for), so
   * that the gradient buffers never need to hold it (tdm_replica_gradient_bytes()).
   * Where it cannot grow (a step being captured, which runs again eagerly; no memory,
   * which stops the run), the float32 way issues what is never run. */
  const TdmLayer *conv = &r->net->layers[i - 1];
  size_t bytes = (size_t)n * conv->out_h * conv->out_w * conv->out_c * sizeof(uint16_t);
  if (!tdm_replica_workspace_holds(r, bytes, 0))
    return NULL;
  return (uint16_t *)r->columns;
}

/* Whether conv layer i writes its input gradient as bf16, in a run that stores
 * activations as bf16: for the bn before it, whose backward (its sums and its dx) reads
 * it widened; or as the first layer of a block that keeps its gradients as bf16
 * (block_grad_bf16()), for the block's start, which sums it with the skip's share in
 * float32 (block_begin_backward()). Half the bytes written and read, and no float32 copy
 * of a gradient the conv computed from bf16 operands (cuDNN writes bf16 itself). The
 * conv writes it so where its way allows (tdm_replica_conv_backward() says which it
 * wrote). */
static gboolean
conv_dx_as_bf16(TdmReplica *r, int i)
{
  if (!r->stores_bf16 || i < 1)
    return FALSE;
  const TdmLayer *before = &r->net->layers[i - 1];
  if (before->kind == TDM_LAYER_RES_BEGIN)
    return block_grad_bf16(r->net, before->partner, r->stores_bf16);
  return before->kind == TDM_LAYER_BN && tdm_backend_has_bn_bf16_input(r->backend);
}

/* For conv layer i in training, the bn before it whose output the forward left to it
 * (bn_output_left_to_next()), filled into *gather: its backward builds its columns
 * again from the same input. NULL where the conv read acts[i]. */
static const BnGather *
bn_input_of(TdmReplica *r, int i, int n, BnGather *gather)
{
  if (i < 1 || r->net->layers[i - 1].kind != TDM_LAYER_BN || layer_frozen(r, i - 1) ||
      !bn_output_left_to_next(r, i - 1, n, MODE_TRAIN))
    return NULL;
  const TdmLayer *l = &r->net->layers[i - 1];
  *gather = (BnGather){r->acts[i - 1],
                       act_type(r, i - 1),
                       r->bn_work[i - 1] + 2 * l->out_c,
                       r->params + l->weight_offset,
                       r->params + l->bias_offset,
                       l->fused_relu};
  return gather;
}

/* The gradient block end i hands on, from dy (of dy_type) into dx (of dx_type; dx may
 * be dy where the types agree): through its ReLU when relu, its mask the bits its
 * forward wrote where it keeps them (relu_bits_kept(): its output stored as bf16), else
 * its float32 output y; without, converted as it is (also where the block's start after
 * it applied the ReLU already, relu_mask_before()). */
static void
block_end_grad(TdmReplica *r, int i, void *dx, TdmDtype dx_type, const void *dy,
               TdmDtype dy_type, const float *y, size_t count, bool relu)
{
  TdmBackend *b = r->backend;
  if (relu && r->relu_bits[i] != NULL) {
    tdm_backend_relu_backward_bf16(b, dx, dx_type, dy, dy_type, r->relu_bits[i], count);
  } else if (relu) {
    g_assert(dx_type == TDM_DTYPE_F32 && dy_type == TDM_DTYPE_F32); /* block_grad_bf16() */
    tdm_backend_relu_backward(b, dx, dy, y, count);
  } else if (dx_type != dy_type) {
    if (dx_type == TDM_DTYPE_BF16)
      tdm_backend_to_bf16(b, dx, dy, count);
    else
      tdm_backend_from_bf16(b, dx, dy, count);
  } else if (dx != dy) {
    tdm_backend_copy(b, dx, dy, count * tdm_dtype_size(dx_type));
  }
}

/* The other half of the gradient region from p (grad_a or grad_b). */
static float *
other_half(TdmReplica *r, const float *p)
{
  return p == r->grad_a ? r->grad_b : r->grad_a;
}

/* Where a projection's bn wrote its conv's bf16 output gradient: over the conv's output
 * computed again (over), else at the workspace's start, read anew each time since the
 * workspace moves where the conv grows it. */
static uint16_t *
projection_dy16(TdmReplica *r, uint16_t *over)
{
  return over != NULL ? over : (uint16_t *)r->columns;
}

/* The backward of residual block end i (RES_END): the gradient after its ReLU goes on
 * to the block's layers in *dy (with *dy_type), and the skip path's share waits in
 * skip_grad for the block's start: a copy of it, or a projection's input gradient
 * (its bn's backward into the free gradient buffer *dx, then its conv's). Where the
 * block's gradients are kept as bf16 (block_grad_bf16()), the gradient is written as
 * bf16, into the skip buffer itself for a block without a projection (*dy then points
 * there; in place where the block after it left its input's gradient there), and a
 * projection's input gradient is kept compact in float32: its bn's gradient goes to its
 * conv as bf16 (projection_dy16()), its conv's backward gives the weight gradient (*dx
 * its spare), its input gradient is a product of its own into the skip buffer, past the
 * room of its start's sum where skip_grad_of() sized the buffer for both
 * (projection_share()). The ReLU's gradient goes to a half of the gradient region
 * where it is not the skip buffer's: in place in *dy where *dy is there and of its
 * type, else into *dx (grad_a where *dy is outside the region), the other half free.
 * masked: the block's start after it applied the ReLU to *dy already
 * (relu_mask_before()), so the gradient is only moved or converted. */
static void
block_end_backward(TdmReplica *r, int i, int n, float **dy, float **dx, TdmDtype *dy_type,
                   gboolean masked)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  const TdmLayer *l = &net->layers[i], *begin = &net->layers[l->partner];
  gboolean g16 = block_grad_bf16(net, i, r->stores_bf16);
  TdmDtype type = g16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
  size_t out = (size_t)n * layer_out_floats(l);
  float *skip = r->skip_grad[i];
  float *target = g16 && !l->projection                             ? skip
                  : type == *dy_type && in_gradient_region(r, *dy) ? *dy
                                                                   : *dx;
  block_end_grad(r, i, target, type, *dy, *dy_type, r->acts[i + 1], out,
                 l->fused_relu && !masked);
  if (target == *dx) {
    *dy = target;
    *dx = other_half(r, target);
  } else if (target != *dy) {
    *dy = target; /* both halves of the gradient region are free */
  }
  *dy_type = type;
  const float *w = r->params + l->weight_offset;
  float *dw = r->grads + l->weight_offset;
  if (!l->projection) {
    if (!g16)
      tdm_backend_copy(b, skip, *dy, out * sizeof(float));
    return;
  }
  int pixels = l->out_h * l->out_w;
  const float *gamma = r->params + l->bias_offset, *beta = gamma + l->out_c;
  if (!g16) {
    bn_backward(r, *dx, NULL, *dy, type, r->proj_conv[i], projection_type(r), n, pixels,
                l->out_c, gamma, beta, false, r->grads + l->bias_offset, r->bn_work[i],
                FALSE);
    tdm_replica_conv_backward(r, skip, FALSE, dw, *dx, NULL, r->acts[l->partner],
                              act_type(r, l->partner), NULL, r->cols[i], NULL, w, n,
                              begin->in_h, begin->in_w, begin->in_c, l->out_c, 1, 0, l->stride,
                              l->out_h, l->out_w, TRUE);
    return;
  }
  /* Its bn's input gradient as its conv's bf16 output gradient (as bn_dx_as_conv_dy16()
   * for a conv before a bn; both kinds of backend have bn_backward_dx_bf16:
   * tdm_replica_gradient_bytes()): over the conv's output computed again, where no
   * buffer keeps it (projection_output_recomputed(): into the free half of the gradient
   * region, as the forward computed it; nothing reads it after the bn), else at the
   * workspace's start; where the workspace cannot grow to hold it (a step being
   * captured, which runs again eagerly; no memory, which stops the run), nothing that
   * follows would count. */
  g_assert(tdm_replica_bn16(b));
  size_t rows = (size_t)n * pixels;
  const float *proj = r->proj_conv[i];
  uint16_t *over = NULL; /* the gradient over the conv's output computed again */
  if (proj == NULL) {
    g_assert(in_gradient_region(r, *dx) && projection_type(r) == TDM_DTYPE_BF16);
    tdm_replica_conv_forward(r, *dx, (uint16_t *)*dx, r->acts[l->partner],
                             act_type(r, l->partner), NULL, r->cols[i], NULL, w, n, begin->in_h,
                             begin->in_w, begin->in_c, l->out_c, 1, 0, l->stride, l->out_h,
                             l->out_w);
    proj = *dx;
    over = (uint16_t *)*dx;
  } else if (!tdm_replica_workspace_holds(r, rows * l->out_c * sizeof(uint16_t), 0)) {
    return;
  }
  bn_backward(r, NULL, projection_dy16(r, over), *dy, type, proj, projection_type(r), n,
              pixels, l->out_c, gamma, beta, false, r->grads + l->bias_offset, r->bn_work[i],
              FALSE);
  tdm_replica_conv_backward(r, *dx, FALSE, dw, NULL, projection_dy16(r, over),
                            r->acts[l->partner], act_type(r, l->partner), NULL, r->cols[i],
                            NULL, w, n, begin->in_h, begin->in_w, begin->in_c, l->out_c, 1, 0,
                            l->stride, l->out_h, l->out_w, FALSE);
  /* The compact input gradient, the pixels its 1×1 conv of no padding reads: that bf16
   * gradient times the bf16 weights, summed in float32, straight into the skip buffer. */
  tdm_backend_gemm_bf16(b, false, false, (int)rows, begin->in_c, l->out_c, 1.0f,
                        projection_dy16(r, over), l->out_c, r->params16 + (w - r->params),
                        begin->in_c, 0.0f, projection_share(r, i, n), begin->in_c);
}

/* The mask of the ReLU of the layer before residual block start i, where its start may
 * apply it as it sums (block_begin_backward()): a block's end with a ReLU whose output,
 * the block's input, is stored as bf16, whose forward wrote the mask as bits beside it
 * (relu_bits_kept()); NULL elsewhere (a bn, a pool, or an end without a ReLU, hand
 * their gradient on as they do). */
static const uint32_t *
relu_mask_before(const TdmReplica *r, int i)
{
  return r->relu_bits[i - 1];
}

/* The bn whose backward sums block start i's pass can make as it writes the gradient
 * (add_relu_backward_bn_sums_bf16), or -1: the bn below the block (start_sums_below();
 * masked: below the end that only hands the gradient on, its bf16 gradient the same
 * bits), trained, reading its stored input, where the replica makes them so
 * (tdm_replica_start_sums(), the backend's op). Its gradient is the pass's output, so
 * its sums are the same bits. */
static int
start_sums_bn(TdmReplica *r, int i)
{
  int k = start_sums_below(r->net, i, r->stores_bf16);
  if (!r->start_sums || k < 0 || k < r->backward_stop || layer_frozen(r, k) ||
      r->acts[k] == NULL)
    return -1;
  return k;
}

/* The backward of residual block start i (RES_BEGIN): its first layer's input gradient
 * dy plus the skip path's share. Where the block's gradients are kept as float32, dy is
 * float32 and the share is added in place. Where they are kept as bf16, dy is bf16 where
 * the first layer wrote it so (conv_dx_as_bf16(): the conv's float32 sum rounded once),
 * else float32, and the two are summed in float32 and rounded once into the skip buffer
 * (then *dy), for the layer before the block, with that layer's ReLU applied in the same
 * pass where it is a block's end that reads its mask from a bf16 output
 * (relu_mask_before(); *masked then says so, and that end only hands the gradient on):
 * in place over the block's bf16 output gradient (add_relu_backward_bf16), or for a
 * projection, its compact share (projection_share()) added into dy in place at the
 * pixels its conv reads (add_strided_bf16, in dy's type), then the whole moved into the
 * skip buffer, masked and rounded (relu_backward_bf16), or rounded or copied. The bits
 * are those of the sum rounded, then masked: masking commutes with rounding. Where the
 * bn below takes the sum as its gradient (start_sums_bn()), one pass sums, masks and
 * makes that bn's backward sums (add_relu_backward_bn_sums_bf16, the same bits; *sums_ready
 * then names the bn), a projection's share added as it reads dy where the sum overwrites
 * none of it. dy may fill the whole gradient region (tdm-replica-plan.c's
 * tdm_replica_gradient_bytes_of()): the skip buffer holds the sum, and the region is
 * free for the layer before. */
static void
block_begin_backward(TdmReplica *r, int i, int n, float **dy, float **dx, TdmDtype *dy_type,
                     gboolean *masked, int *sums_ready)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  const TdmLayer *l = &net->layers[i], *end = &net->layers[l->partner];
  size_t count = (size_t)n * block_in_floats(net, end);
  *masked = FALSE;
  if (!block_grad_bf16(net, l->partner, r->stores_bf16)) {
    g_assert(*dy_type == TDM_DTYPE_F32); /* conv_dx_as_bf16() */
    tdm_backend_add(b, *dy, r->skip_grad[l->partner], count);
    return;
  }
  uint16_t *sum = start_sum_of(r, i);
  /* The skip path's share: the block's bf16 output gradient, or a projection's compact
   * float32 input gradient. */
  const float *share =
      end->projection ? projection_share(r, l->partner, n) : r->skip_grad[l->partner];
  const uint32_t *mask = relu_mask_before(r, i);
  int k = start_sums_bn(r, i);
  if (k >= 0 && (!end->projection || projection_share_clear(r, l->partner, n))) {
    /* The pass below with the bn's sums: the bits of both (bn_backward() skips them). */
    const TdmLayer *bn = &net->layers[k];
    const float *saved = r->bn_work[k] + 2 * bn->out_c;
    const float *gamma = r->params + bn->weight_offset;
    float *dgamma = r->grads + bn->weight_offset;
    g_assert((size_t)n * bn->out_h * bn->out_w * bn->out_c == count);
    TdmBlockStart in = {.a = *dy, .a_type = *dy_type, .mask = mask};
    if (end->projection) {
      in.strided = share;
      in.h = l->in_h;
      in.w = l->in_w;
      in.stride = end->stride;
    } else {
      in.skip = (const uint16_t *)share;
    }
    tdm_backend_add_relu_backward_bn_sums_bf16(
        b, sum, &in, r->acts[k], act_type(r, k), saved, saved + bn->out_c, gamma,
        r->params + bn->bias_offset, bn->fused_relu, n * bn->out_h * bn->out_w, bn->out_c,
        dgamma, dgamma + bn->out_c);
    *sums_ready = k;
  } else if (end->projection) {
    tdm_backend_add_strided_bf16(b, *dy, *dy_type, *dy, *dy_type, share, n, l->in_h, l->in_w,
                                 l->in_c, end->stride);
    if (mask != NULL)
      tdm_backend_relu_backward_bf16(b, sum, TDM_DTYPE_BF16, *dy, *dy_type, mask, count);
    else if (*dy_type == TDM_DTYPE_F32)
      tdm_backend_to_bf16(b, sum, *dy, count);
    else
      tdm_backend_copy(b, sum, *dy, count * sizeof(uint16_t));
  } else {
    tdm_backend_add_relu_backward_bf16(b, sum, *dy, *dy_type, share, TDM_DTYPE_BF16, mask,
                                       count);
  }
  *masked = mask != NULL;
  *dx = *dy;
  *dy = (float *)sum;
  *dy_type = TDM_DTYPE_BF16;
}

static void
announce(TdmReplica *r, const TdmLayer *l)
{
  if (l->param_count > 0 && r->grads_ready != NULL)
    r->grads_ready(r, l->param_offset, l->param_count, r->grads_ready_data);
}

/* The output of frozen bn layer i, which has no buffer (bn_output_to_conv()), computed
 * again into spare for the conv after it, as bf16 as the forward wrote it
 * (frozen_bn_to_conv(); *type says): the first trained layer, which passes no gradient
 * on, so its input gradient's buffer is free. */
static const float *
frozen_bn_again(TdmReplica *r, int i, int n, float *spare, gboolean need_dx, TdmDtype *type)
{
  const TdmLayer *l = &r->net->layers[i];
  g_assert(l->kind == TDM_LAYER_BN && layer_frozen(r, i) && !need_dx);
  *type = frozen_bn_to_conv(r, i) ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
  tdm_replica_bn_forward(r, MODE_EVAL, spare,
                         *type == TDM_DTYPE_BF16 ? (uint16_t *)spare : NULL, r->acts[i],
                         act_type(r, i), n, l->out_h * l->out_w, l->out_c,
                         r->params + l->weight_offset, r->params + l->bias_offset,
                         r->bn_work[i], r->state + l->state_offset, l->fused_relu, FALSE);
  return spare;
}

/* The stem's output, which has no buffer (stem_output_recomputed()), computed again from
 * the stored input into the gradient region's start for the bn after it, as the forward
 * wrote it there (the same call: the same bits); the bn writes its input gradient over
 * it (bn_dx_over_input()). The bn's output gradient is in the skip buffer, so the region
 * is free. */
static const float *
stem_output_again(TdmReplica *r, int n, const void *dy)
{
  const TdmLayer *l = &r->net->layers[0];
  g_assert(!in_gradient_region(r, dy) && act_type(r, 1) == TDM_DTYPE_BF16);
  tdm_replica_conv_forward(r, r->grad_a, (uint16_t *)r->grad_a, r->acts[0], act_type(r, 0),
                           NULL, r->cols[0], r->conv_work[0], r->params + l->weight_offset, n,
                           l->in_h, l->in_w, l->in_c, l->out_c, l->kernel, l->pad, l->stride,
                           l->out_h, l->out_w);
  return r->grad_a;
}

/* Why the stem's conv and its bn (layers 0 and 1, stem_output_recomputed()) do not go
 * back in two passes, or NULL where they do (stem_bn_in_two_passes()); *work_bytes the
 * passes' scratch. */
static const char *
stem_bn_refused(TdmReplica *r, const TdmConvShape *s, int sums_ready, size_t *work_bytes)
{
  const TdmLayer *conv = &r->net->layers[0];
  if (!r->stem_bn)
    return "TANDEM_STEM_BN=0";
  if (r->backward_stop > 0 || layer_frozen(r, 0) || layer_frozen(r, 1))
    return "frozen";
  /* Never so where the stem's output is computed again (conv_output_bf16()); the passes
   * have neither. */
  if (conv->bias_count != 0 || conv->fused_relu)
    return "a bias or a ReLU of the conv's own";
  if (sums_ready == 1 || r->conv_work[0] != NULL || r->params16 == NULL)
    return "not the replica's way for this stem";
  if (!tdm_backend_stem_bn_takes(r->backend, s, act_type(r, 0), work_bytes))
    return "not a shape the backend takes";
  return NULL;
}

/* The stem's conv and its bn (layers 0 and 1, whose output no buffer keeps:
 * stem_output_recomputed()) in backward in two passes, where the backend takes them and
 * nothing above forbids: the bn's sums (tdm_backend_stem_bn_sums()), synchronized BN's
 * all-reduce of them as bn_backward() does it, then the bn's input gradient and from it
 * the conv's weight gradient (tdm_backend_stem_bn_dx_wgrad()), the stem's output made
 * again in both: in place of stem_output_again(), bn_backward() and the conv's own
 * backward, with their bits on the CPU. Their scratch is the workspace, free here as
 * for the conv's backward (which would grow it the same way); the room for the stem's
 * output (TdmStemBn.spare) the gradient region's start, which the plan gives it
 * (forward_region(), backward_region()). The way is logged when it changes. TRUE where
 * they ran: layers 0 and 1 have their gradients. dy: the bn's output gradient, bf16,
 * outside the region (the first block's start's sum in its skip buffer). */
static gboolean
stem_bn_in_two_passes(TdmReplica *r, int n, const void *dy, TdmDtype dy_type, int sums_ready)
{
  const TdmNetwork *net = r->net;
  const TdmLayer *conv = &net->layers[0], *bn = &net->layers[1];
  g_assert(dy_type == TDM_DTYPE_BF16 && !in_gradient_region(r, dy));
  TdmConvShape shape = {n,           conv->in_h,   conv->in_w, conv->in_c,
                        conv->out_c, conv->kernel, conv->pad,  conv->stride};
  size_t bytes = 0;
  const char *why = stem_bn_refused(r, &shape, sums_ready, &bytes);
  if (why == NULL && !tdm_replica_workspace_holds(r, bytes, 0))
    why = "no room for the passes' scratch";
  int c = bn->out_c;
  float *dgamma = r->grads + bn->weight_offset, *work = r->bn_work[1];
  const float *saved = work + 2 * c;
  const TdmStemBn a = {
      .shape = shape,
      .x = r->acts[0],
      .x_type = act_type(r, 0),
      .w = r->params + conv->weight_offset,
      .w16 = r->params16 != NULL ? r->params16 + conv->weight_offset : NULL,
      .mean = saved,
      .invstd = saved + c,
      .gamma = r->params + bn->weight_offset,
      .beta = r->params + bn->bias_offset,
      .relu = bn->fused_relu,
      .dy = dy,
      .spare = (uint16_t *)r->grad_a,
      .work = r->columns,
      .work_bytes = r->columns_bytes,
  };
  if (why == NULL && !tdm_backend_stem_bn_aligned(&a))
    why = "dy, the gradient region or the workspace not aligned";
  static const char taken[] = "";
  if (r->stem_way != (why != NULL ? why : taken)) {
    r->stem_way = why != NULL ? why : taken;
    g_debug("%s: stem n%d h%d w%d c%d o%d k%d: backward %s%s%s", r->backend->name, n,
            conv->in_h, conv->in_w, conv->in_c, conv->out_c, conv->kernel,
            why == NULL ? "in two passes" : "in separate steps (", why != NULL ? why : "",
            why != NULL ? ")" : "");
  }
  if (why != NULL)
    return FALSE;
  tdm_backend_stem_bn_sums(r->backend, &a, dgamma, dgamma + c);
  const float *sums = bn_batch_sums(r, dgamma, work, c);
  if (sums == NULL)
    return TRUE; /* the all-reduce failed: the step is lost (tdm_replica_aborted()) */
  tdm_backend_stem_bn_dx_wgrad(r->backend, &a, sums, sums + c,
                               bn_inv_count(r, n, bn->out_h * bn->out_w),
                               r->grads + conv->weight_offset);
  r->stem_bn_runs++;
  return TRUE;
}

void
tdm_replica_backward(TdmReplica *r, int n)
{
  TdmBackend *b = r->backend;
  const TdmNetwork *net = r->net;
  tdm_replica_use_window(r, net->layer_count - 1);
  float *dy = r->grad_a, *dx = r->grad_b;
  /* dy as bf16 where the bn after a conv wrote it (at the workspace's start, or in place
   * in the gradient region), dy itself then not read; else NULL. */
  const uint16_t *dy16 = NULL;
  gboolean dy_masked = FALSE;       /* a block's start applied the ReLU of the end below it */
  TdmDtype dy_type = TDM_DTYPE_F32; /* a conv's input gradient for the bn below it */
  int sums_ready = -1; /* the bn whose sums a block's start wrote (start_sums_bn()) */
  BnGather gather;             /* a conv's input left to it by the bn before it */

  const int stop = r->backward_stop;
  for (int i = net->layer_count - 1; i >= stop; i--) {
    const TdmLayer *l = &net->layers[i];
    tdm_replica_use_window(r, i);
    const float *x = r->acts[i];
    const float *y = r->acts[i + 1];
    const float *w = r->params + l->weight_offset;
    float *dw = r->grads + l->weight_offset;
    float *dbias = r->grads + l->bias_offset;
    gboolean need_dx = i > stop;
    size_t out = (size_t)n * layer_out_floats(l);
    int pixels = l->out_h * l->out_w;
    uint16_t *dx16 = NULL; /* a bn's input gradient, written as bf16 for the conv below */
    TdmDtype dx_type = TDM_DTYPE_F32;
    /* conv_dx_as_bf16(), block_grad_bf16() */
    g_assert(dy_type == TDM_DTYPE_F32 || l->kind == TDM_LAYER_BN ||
             l->kind == TDM_LAYER_RES_END || l->kind == TDM_LAYER_RES_BEGIN ||
             (l->kind == TDM_LAYER_POOL &&
              (!tdm_layer_pool_tiles(l) || pool_bf16(net, i, r->stores_bf16))));
    /* dy outside the gradient region (a block's skip buffer, or as bf16 in the conv's
     * workspace): the region is free, and what this layer writes goes at its start,
     * where the plan gives it the whole region (tdm-replica-plan.c's
     * tdm_replica_gradient_bytes_of()). */
    if ((dy16 != NULL && !in_gradient_region(r, dy16)) || !in_gradient_region(r, dy))
      dx = r->grad_a;
    /* dy16 in place in the region (bn_dx_in_place()) only for a conv that passes no
     * gradient on. */
    g_assert(dy16 == NULL || !in_gradient_region(r, dy16) || !need_dx);
    /* The plan's promise: the input gradient fits where it goes (a half, or the whole
     * region from its start). */
    g_assert(l->kind == TDM_LAYER_RES_END || l->kind == TDM_LAYER_RES_BEGIN ||
             l->kind == TDM_LAYER_FLATTEN || !need_dx || (i == 1 && conv_pool_first(net)) ||
             (size_t)n * l->in_h * l->in_w * l->in_c *
                     tdm_replica_input_grad_size(net, i, r->stores_bf16,
                                                 tdm_replica_bn16(b)) <=
                 (dx == r->grad_a ? 2 : 1) * r->grad_half_bytes);

    switch (l->kind) {
    case TDM_LAYER_LINEAR: {
      int in = l->in_h * l->in_w * l->in_c;
      if (l->fused_relu)
        tdm_backend_relu_backward(b, dy, dy, y, out);
      tdm_backend_gemm(b, true, false, l->out_c, in, n, 1.0f, dy, l->out_c, x, in, 0.0f, dw,
                       in);
      if (l->bias_count > 0)
        tdm_backend_bias_backward(b, dbias, dy, n, l->out_c, 1);
      if (need_dx)
        tdm_backend_gemm(b, false, false, n, in, l->out_c, 1.0f, dy, l->out_c, w, in, 0.0f, dx,
                         in);
      break;
    }
    case TDM_LAYER_CONV: {
      /* With its bias and ReLU in the pool, the pool's backward did both. */
      if (!bias_in_pool(net, i)) {
        if (l->fused_relu)
          tdm_backend_relu_backward(b, dy, dy, y, out);
        if (l->bias_count > 0)
          tdm_backend_bias_backward(b, dbias, dy, n * pixels, l->out_c, 1);
      }
      const BnGather *from_bn = bn_input_of(r, i, n, &gather);
      TdmDtype x_type = act_type(r, i);
      if (from_bn == NULL && x == NULL)
        x = frozen_bn_again(r, i - 1, n, dx, need_dx, &x_type);
      dx_type = tdm_replica_conv_backward(r, dx, conv_dx_as_bf16(r, i), dw, dy, dy16, x, x_type,
                                          from_bn, r->cols[i], r->conv_work[i], w, n, l->in_h,
                                          l->in_w, l->in_c, l->out_c, l->kernel, l->pad,
                                          l->stride, l->out_h, l->out_w, need_dx);
      break;
    }
    case TDM_LAYER_POOL:
      if (i == 1 && conv_pool_first(net)) {
        const TdmLayer *c = l - 1;
        tdm_backend_conv_pool_backward(b, r->grads + c->weight_offset,
                                       r->grads + c->bias_offset, dy, r->argmax[1], y,
                                       r->acts[0], c->fused_relu, n, c->in_h, c->in_w, c->in_c,
                                       c->out_c, c->kernel, c->kernel, c->pad, l->kernel);
        announce(r, c);
        return;
      }
      if (need_dx && pool_bf16(net, i, r->stores_bf16)) {
        /* As bf16 for the bn before it (pool_dx_bf16()). */
        dx_type = TDM_DTYPE_BF16;
        tdm_backend_maxpool_backward_bf16(b, dx, dx_type, dy, dy_type, r->argmax[i], n, l->in_h,
                                          l->in_w, l->in_c, l->kernel);
      } else if (need_dx && !tdm_layer_pool_tiles(l)) {
        /* As bf16 for the bn before it where it keeps gradients so (pool_dx_bf16()). */
        dx_type = pool_dx_bf16(net, i, r->stores_bf16) ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
        tdm_backend_maxpool2d_backward(b, dx, dx_type, dy, dy_type, r->argmax[i],
                                       pool2d_of(l, n));
      } else if (need_dx) {
        /* The conv below handed this pool its bias (and ReLU): their gradients too. */
        const TdmLayer *c = bias_in_pool(net, i - 1) ? l - 1 : NULL;
        tdm_backend_maxpool_backward(b, dx, c ? r->grads + c->bias_offset : NULL, dy,
                                     r->argmax[i], c && c->fused_relu ? y : NULL, n, l->in_h,
                                     l->in_w, l->in_c, l->kernel);
      }
      break;
    case TDM_LAYER_RELU:
      if (need_dx)
        tdm_backend_relu_backward(b, dx, dy, y, out);
      break;
    case TDM_LAYER_FLATTEN:
      continue; /* dy already is the input's gradient */
    case TDM_LAYER_BN:
      if (i == 1 && x == NULL && stem_output_recomputed(net, 0, r->stores_bf16)) {
        if (stem_bn_in_two_passes(r, n, dy, dy_type, sums_ready)) {
          /* Layer 0's gradient too, and the walk ends there (backward_stop 0). */
          announce(r, l);
          announce(r, &net->layers[0]);
          return;
        }
        x = stem_output_again(r, n, dy);
      }
      dx16 = bn_dx_as_conv_dy16(r, i, n, dy, dy_type, x, act_type(r, i));
      bn_backward(r, dx, dx16, dy, dy_type, x, act_type(r, i), n, pixels, l->out_c, w,
                  r->params + l->bias_offset, l->fused_relu, dw, r->bn_work[i],
                  sums_ready == i);
      sums_ready = -1;
      break;
    case TDM_LAYER_AVGPOOL:
      if (need_dx && !tdm_layer_pool_tiles(l))
        tdm_backend_avgpool2d_backward(b, dx, dy, pool2d_of(l, n));
      else if (need_dx)
        tdm_backend_avgpool_backward(b, dx, dy, n, l->in_h, l->in_w, l->in_c, l->kernel);
      break;
    case TDM_LAYER_GLOBAL_AVG:
      if (need_dx)
        tdm_backend_global_avgpool_backward(b, dx, dy, n, l->in_h * l->in_w, l->in_c);
      break;
    case TDM_LAYER_GLOBAL_MAX:
      if (need_dx)
        tdm_backend_global_maxpool_backward(b, dx, dy, r->argmax[i], n, l->in_h * l->in_w,
                                            l->in_c);
      break;
    case TDM_LAYER_DROPOUT:
      if (need_dx) {
        if (l->rate == 0.0f)
          tdm_backend_copy(b, dx, dy, out * sizeof(float));
        else
          tdm_backend_dropout_backward(b, dx, dy, r->indices, n, (int)layer_out_floats(l),
                                       l->rate, dropout_key(r, i), r->epoch);
      }
      break;
    case TDM_LAYER_SCALE:
      if (need_dx) {
        tdm_backend_copy(b, dx, dy, out * sizeof(float));
        tdm_backend_scale(b, dx, l->factor, out);
      }
      break;
    case TDM_LAYER_RES_END:
      block_end_backward(r, i, n, &dy, &dx, &dy_type, dy_masked);
      dy_masked = FALSE;
      announce(r, l);
      if (tdm_replica_aborted(r))
        return;
      continue;
    case TDM_LAYER_RES_BEGIN:
      block_begin_backward(r, i, n, &dy, &dx, &dy_type, &dy_masked, &sums_ready);
      continue;
    }

    announce(r, l);
    dy16 = dx16;
    dy_type = dx_type;
    /* dx holds the gradient now; the next goes to the other half of the region. */
    dy = dx;
    dx = other_half(r, dy);
    if (tdm_replica_aborted(r))
      return;
  }
  /* The frozen layers below: no gradient, but zeros for the all-reduce's buckets. */
  for (int i = stop - 1; i >= 0; i--) {
    const TdmLayer *l = &net->layers[i];
    if (l->param_count == 0)
      continue;
    tdm_backend_zero(b, r->grads + l->param_offset, l->param_count * sizeof(float));
    announce(r, l);
  }
}
