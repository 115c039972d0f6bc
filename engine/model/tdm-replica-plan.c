/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica-plan.c — how many bytes a replica takes, before it is made: each layer's
 * buffers with the storage decided (what a bf16 run stores as bf16), the gradient
 * region, the column workspace at its upper bound, the skip-gradient buffers, the two
 * windows those two backward-only buffers lie in (tdm_replica_gradient_windows(): the
 * low one over the later layers' pieces in the arena; their rules in
 * tdm-replica-windows.h), and the plan that sums them (tdm_replica_plan(), which
 * tdm_replica_new_planned() allocates and the memory estimate reads), the evaluation
 * chunk that fits beside the training, and which bn outputs are stored for their conv
 * (tdm_replica_bn_store(): by default the most that grows the plan by at most
 * 1/TDM_BN_STORE_GROWTH, computed with the plan).
 * No allocation here: tdm-replica.c makes the replica the plan describes. */
#include "tdm-replica-private.h"
#include "tdm-replica-windows.h"
#include "tdm-conv-columns.h"

#include <stdlib.h>
#include <string.h>

/* Layer i's buffers with the storage decided (stores16: tdm_replica_stores_bf16()). */
TdmLayerBuffers
tdm_replica_buffers_of(const TdmNetwork *net, int i, TdmBackendKind kind,
                       TdmPrecision precision, gboolean stores16)
{
  const TdmLayer *l = &net->layers[i];
  size_t out = layer_out_floats(l);
  TdmLayerBuffers buf = {0};
  if (owns_output(net, i) && !bn_output_to_block_end(net, i) &&
      !bn_output_to_conv(net, i, stores16) && !bn_output_to_pool(net, i, stores16) &&
      !bn_output_to_pool_bf16(net, i, stores16) &&
      !bn_relu_output_to_block_end(net, i, stores16) &&
      !stem_output_recomputed(net, i, stores16)) {
    buf.output = out;
    buf.output_type = output_bf16(net, i, stores16) ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
  }
  if (has_argmax(l)) {
    buf.argmax = out;
    buf.argmax_size = argmax_size(l);
  }
  /* A whole convolution computes in float32: a bf16 run composes every one from
   * bf16 columns (tdm-replica-conv.c). */
  if (l->kind == TDM_LAYER_CONV && !(i == 0 && conv_pool_first(net)) &&
      precision != TDM_PRECISION_BF16)
    buf.conv_work = tdm_backend_conv_work_floats(kind, l->in_h, l->in_w, l->in_c, l->out_c,
                                                 l->kernel, l->pad, l->stride);
  if (!(i == 0 && conv_pool_first(net)) && buf.conv_work == 0)
    buf.columns = col_floats_per_sample(net, l);
  /* saved mean and invstd, the backward's sums, one slot of statistics. */
  if (bn_channels(l) > 0)
    buf.bn_work = 4 * (size_t)bn_channels(l) + TDM_BN_SLOT_FLOATS(bn_channels(l));
  if (relu_bits_kept(net, i, stores16))
    buf.relu_bits = out;
  if (l->kind == TDM_LAYER_RES_END) {
    skip_grad_of(net, i, stores16, &buf.skip, &buf.skip_type);
    if (l->projection && !projection_output_recomputed(net, i, stores16)) {
      buf.projection = out;
      buf.projection_type = stores16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32;
    }
  }
  return buf;
}

TdmLayerBuffers
tdm_replica_layer_buffers(const TdmNetwork *net, int i, TdmBackendKind kind,
                          TdmPrecision precision)
{
  return tdm_replica_buffers_of(net, i, kind, precision,
                                tdm_replica_stores_bf16(kind, precision));
}

/* Bytes per sample of each element of the gradient layer i > 0 writes for its input in
 * backward, as written: bf16 where its reader takes it (a conv's with bf16 columns for
 * the bn before it, or for its block's start where it is a block's first layer and the
 * block keeps its gradients as bf16: conv_dx_as_bf16(); a block's start where the
 * block's gradients are kept so, block_grad_bf16(); a max pool's for the bn before it,
 * pool_dx_bf16()), none where a bn writes it into its conv's workspace
 * (bn_dx_to_conv()), float32 otherwise. A block's end writes its ReLU's gradient in
 * the type the block keeps. */
size_t
tdm_replica_input_grad_size(const TdmNetwork *net, int i, gboolean stores16, gboolean bn16)
{
  const TdmLayer *l = &net->layers[i];
  switch (l->kind) {
  case TDM_LAYER_BN:
    return bn_dx_to_conv(net, i, bn16) ? 0 : sizeof(float);
  case TDM_LAYER_POOL:
    return pool_dx_bf16(net, i, stores16) ? sizeof(uint16_t) : sizeof(float);
  case TDM_LAYER_CONV: {
    const TdmLayer *before = &net->layers[i - 1];
    gboolean reader16 =
        before->kind == TDM_LAYER_BN || (before->kind == TDM_LAYER_RES_BEGIN &&
                                         block_grad_bf16(net, before->partner, stores16));
    return stores16 && reader16 && conv_bf16_columns(net, l) ? sizeof(uint16_t) : sizeof(float);
  }
  case TDM_LAYER_RES_BEGIN:
    return block_grad_bf16(net, l->partner, stores16) ? sizeof(uint16_t) : sizeof(float);
  case TDM_LAYER_RES_END:
    return block_grad_bf16(net, i, stores16) ? sizeof(uint16_t) : sizeof(float);
  default:
    return sizeof(float);
  }
}

/* What the gradient region must hold per sample: `narrow` bytes at either half's start
 * (grad_a or grad_b, while the other half may hold something live), `wide` bytes from
 * the region's start (grad_a) while nothing else lives in it. */
typedef struct {
  size_t narrow, wide;
} RegionNeed;

static void
need_narrow(RegionNeed *need, size_t bytes)
{
  need->narrow = MAX(need->narrow, bytes);
}

static void
need_wide(RegionNeed *need, size_t bytes)
{
  need->wide = MAX(need->wide, bytes);
}

/* Whether layer i's input is stored as bf16 in training (act_type()'s rule, without a
 * replica: a block's start and a flatten rename the tensor before them). */
static gboolean
input_bf16(const TdmNetwork *net, int i, gboolean stores16)
{
  while (i >= 1 && (net->layers[i - 1].kind == TDM_LAYER_RES_BEGIN ||
                    net->layers[i - 1].kind == TDM_LAYER_FLATTEN))
    i--;
  return i >= 1 && output_bf16(net, i - 1, stores16);
}

/* Floats per sample a conv's float32 columns path keeps of its bf16 input x, widened,
 * in a gradient buffer (tdm-replica-conv.c's widened_columns()): its float32 columns where they
 * are fewer than its input (a strided 1×1 conv, a projection), else the input. */
static size_t
widened_input_floats(size_t in, size_t columns)
{
  return columns > 0 && columns < in ? columns : in;
}

/* The forward's use of the gradient region by layer i, float32 all (the forward leaves
 * the region free but for these; tdm-replica-forward.c and tdm-replica-conv.c place them):
 * a frozen bn's output for the layer after it that has no buffer for it (below); a
 * conv without bf16 columns: the float32 product rounded into its bf16 output, at grad_a
 * where its input is float32 and it has no columns (with columns, each chunk's product
 * is staged after the chunk's columns in the workspace: TdmConvComposition's y16), else
 * at grad_b beside its input widened at grad_a; the
 * global pools' input widened, at grad_a; a block's end's frozen
 * last bn at grad_a, beside a projection's bn output at grad_b (and that projection's
 * conv as a conv's). */
static void
forward_region(const TdmNetwork *net, int i, gboolean stores16, RegionNeed *need)
{
  const TdmLayer *l = &net->layers[i];
  size_t in = (size_t)l->in_h * l->in_w * l->in_c, out = layer_out_floats(l);
  switch (l->kind) {
  case TDM_LAYER_CONV:
    /* A stem's bf16 output that has no buffer (stem_output_recomputed()), at grad_a, for
     * the bn after it; its float32 product is staged beside its columns. */
    if (stem_output_recomputed(net, i, stores16))
      need_wide(need, out * sizeof(uint16_t));
    if (!stores16 || conv_bf16_columns(net, l))
      break;
    if (input_bf16(net, i, stores16))
      need_narrow(need, MAX(widened_input_floats(in, col_floats_per_sample(net, l)), out) *
                            sizeof(float));
    else if (conv_output_bf16(net, i, stores16) && col_floats_per_sample(net, l) == 0)
      need_wide(need, out * sizeof(float));
    break;
  case TDM_LAYER_BN:
    /* A frozen bn writes a bf16 output straight (bn_forward_eval_bf16); its output for
     * the conv after it (bn_output_to_conv(): a conv that takes bf16 operands) at grad_a,
     * bf16 (frozen_bn_to_conv()); for the block's end
     * that adds it (bn_relu_output_to_block_end()) at grad_a, float32, beside a
     * projection's bn output; for its bf16 pool (bn_output_to_pool()) at grad_a, bf16. */
    if (bn_output_to_conv(net, i, stores16))
      need_wide(need, out * sizeof(uint16_t));
    if (bn_relu_output_to_block_end(net, i, stores16))
      need_narrow(need, out * sizeof(float));
    if (bn_output_to_pool(net, i, stores16))
      need_narrow(need, out * sizeof(uint16_t));
    /* For the pool that does not tile after it (bn_output_to_pool_bf16()), at grad_a, bf16,
     * the region free but for it (the stem). */
    if (bn_output_to_pool_bf16(net, i, stores16))
      need_wide(need, out * sizeof(uint16_t));
    break;
  case TDM_LAYER_GLOBAL_AVG:
    if (input_bf16(net, i, stores16))
      need_wide(need, in * sizeof(float));
    break;
  case TDM_LAYER_GLOBAL_MAX:
    if (input_bf16(net, i, stores16))
      need_wide(need, in * sizeof(float));
    break;
  case TDM_LAYER_RES_END:
    /* A projection's bn output at grad_b, bf16 where the block's output is
     * (projection_bn_bf16()); its conv, a 1×1 one, takes bf16 operands in a bf16 run (a
     * bf16 input is read as it is, never widened here). A frozen last bn's output at
     * grad_a: into a bf16 output a chunk of rows at a time that fits a half (one row
     * at least), else into the block's float32 output itself. */
    if (l->projection)
      need_narrow(need, out * (projection_bn_bf16(net, i, stores16) ? sizeof(uint16_t)
                                                                   : sizeof(float)));
    /* Its conv's bf16 output at grad_a, which no buffer keeps
     * (projection_output_recomputed()). */
    if (projection_output_recomputed(net, i, stores16))
      need_narrow(need, out * sizeof(uint16_t));
    if (block_output_bf16(net, i, stores16))
      need_narrow(need, (size_t)l->out_c * sizeof(float));
    break;
  default:
    break;
  }
}

/* The backward's use of the gradient region by layer i, whose output gradient dy lives
 * outside the region (dy_out: in the skip buffer or the workspace; the pass then puts
 * what layer i writes at grad_a, tdm_replica_backward()) or in it: its input gradient
 * as written (input_grad_size()), and the float32 scratch it keeps with it in the same
 * half (a frozen bn's output for the first trained conv, as bf16; a bf16 input widened); a
 * block's end with a projection whose gradients are kept bf16 writes its ReLU's gradient
 * in one half and its projection's input gradient, compact, in the other. Returns
 * whether layer i's input gradient lives outside the region. */
static gboolean
backward_region(const TdmNetwork *net, int i, gboolean stores16, gboolean bn16,
                gboolean dy_out, RegionNeed *need)
{
  const TdmLayer *l = &net->layers[i];
  size_t in = (size_t)l->in_h * l->in_w * l->in_c;
  size_t bytes = in * tdm_replica_input_grad_size(net, i, stores16, bn16);
  switch (l->kind) {
  case TDM_LAYER_FLATTEN:
    return dy_out; /* renames dy */
  case TDM_LAYER_RES_BEGIN:
    /* The sum goes into the skip buffer where the block keeps bf16 gradients. */
    return block_grad_bf16(net, l->partner, stores16);
  case TDM_LAYER_RES_END:
    if (!block_grad_bf16(net, i, stores16)) {
      need_narrow(need, layer_out_floats(l) * sizeof(float));
      return FALSE;
    }
    if (!l->projection)
      return TRUE; /* the ReLU's gradient into the skip buffer */
    /* The ReLU's gradient in a half; its conv's output computed again in the other half
     * (projection_output_recomputed()), its bn's gradient over it as bf16 (else at the
     * workspace's start), its compact input gradient straight into the skip buffer. */
    need_narrow(need, bytes);
    if (projection_output_recomputed(net, i, stores16))
      need_narrow(need, layer_out_floats(l) * sizeof(uint16_t));
    return FALSE;
  case TDM_LAYER_CONV:
    if (i >= 1 && bn_output_to_conv(net, i - 1, stores16))
      bytes = MAX(bytes, in * sizeof(uint16_t)); /* frozen_bn_again(), bf16 */
    if (stores16 && !conv_bf16_columns(net, l) && input_bf16(net, i, stores16))
      bytes = MAX(bytes, widened_input_floats(in, col_floats_per_sample(net, l)) *
                             sizeof(float));
    break;
  case TDM_LAYER_BN:
    /* The stem's output again at grad_a for its bn (stem_output_recomputed()), whose
     * output gradient is in the skip buffer and whose input gradient goes over it
     * (bn_dx_over_input()). */
    if (i == 1 && stem_output_recomputed(net, 0, stores16)) {
      g_assert(dy_out && bytes == 0);
      need_wide(need, in * sizeof(uint16_t));
    }
    break;
  default:
    break;
  }
  if (dy_out)
    need_wide(need, bytes);
  else
    need_narrow(need, bytes);
  return l->kind == TDM_LAYER_BN && bn_dx_to_conv(net, i, bn16);
}

/* A region's half, bytes a sample, for what `need` says, in 64-byte steps. */
static size_t
half_of(const RegionNeed *need)
{
  size_t half = MAX(need->narrow, (need->wide + 1) / 2);
  return (half + 63) / 64 * 64;
}

/* The halves of the two windows' gradient regions (TdmGradientWindows), bytes a sample:
 * the layers before split use the low window's, the others the high one's. Backward
 * writes the loss's gradient (the logits') at the high window's grad_a, then each layer
 * i > 0 its input's; the pool of a fused first conv stops there and writes none, so the
 * conv's output, often the largest activation, needs no gradient buffer. Where the walk
 * crosses from one window to the other, the gradient it carries is where the layer left
 * it (a block's start's sum in a skip buffer, outside either region: dy_out). */
static void
gradient_halves(const TdmNetwork *net, gboolean stores16, gboolean bn16, int split,
                size_t *low, size_t *high)
{
  RegionNeed needs[2] = {{0, 0}, {(size_t)net->classes * sizeof(float), 0}};
  for (int i = 0; i < net->layer_count; i++)
    forward_region(net, i, stores16, &needs[i >= split]);
  gboolean dy_out = FALSE;
  for (int i = net->layer_count - 1; i >= 1 && !(i == 1 && conv_pool_first(net)); i--)
    dy_out = backward_region(net, i, stores16, bn16, dy_out, &needs[i >= split]);
  *low = half_of(&needs[0]);
  *high = half_of(&needs[1]);
}

/* tdm_replica_gradient_bytes() with the storage decided (stores16) and bn16
 * (tdm_replica_bn16()): the half of the gradient region, grad_a and grad_b, each as
 * wide as what is written there beside something live, and the two together as wide
 * as what is written there alone; a multiple of 64 bytes, so that grad_b starts
 * aligned. One window (TdmGradientWindows' split 0). */
size_t
tdm_replica_gradient_bytes_of(const TdmNetwork *net, gboolean stores16, gboolean bn16)
{
  size_t low, high;
  gradient_halves(net, stores16, bn16, 0, &low, &high);
  return high;
}

size_t
tdm_replica_gradient_bytes(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision)
{
  /* Both kinds of backend have bn_backward_dx_bf16. */
  return tdm_replica_gradient_bytes_of(net, tdm_replica_stores_bf16(kind, precision),
                                       precision == TDM_PRECISION_BF16);
}

/* The widest columns and the largest whole-convolution scratch over the layers: the
 * one workspace holds any layer's (a layer uses one or the other, and nothing in it
 * outlives the layer: backward builds its columns again). */
static void
widest_scratch(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
               gboolean stores16, size_t *columns, size_t *conv_work)
{
  *columns = 0;
  *conv_work = 0;
  for (int i = 0; i < net->layer_count; i++) {
    TdmLayerBuffers buf = tdm_replica_buffers_of(net, i, kind, precision, stores16);
    *columns = MAX(*columns, buf.columns);
    *conv_work = MAX(*conv_work, buf.conv_work);
  }
}

/* Layer i's convolution at n samples, as the replica calls it: a conv's (not the first
 * conv that runs fused with its pool, nor one a backend runs whole), or a block end's
 * projection, a 1×1 conv of the block's input. FALSE for any other layer. */
static gboolean
conv_call_of(const TdmNetwork *net, int i, const TdmLayerBuffers *buf, int n, TdmConvShape *s)
{
  const TdmLayer *l = &net->layers[i];
  if (buf->conv_work > 0)
    return FALSE;
  if (l->kind == TDM_LAYER_CONV && !(i == 0 && conv_pool_first(net))) {
    *s = (TdmConvShape){n, l->in_h, l->in_w, l->in_c, l->out_c, l->kernel, l->pad, l->stride};
    return TRUE;
  }
  if (l->kind == TDM_LAYER_RES_END && l->projection) {
    const TdmLayer *begin = &net->layers[l->partner];
    *s = (TdmConvShape){n, begin->in_h, begin->in_w, begin->in_c, l->out_c, 1, 0, l->stride};
    return TRUE;
  }
  return FALSE;
}

/* How the replica composes convolution s (tdm-replica-conv.c's tdm_replica_conv_bf16()
 * and _bf16_dx(); columns: the layer has columns) in a run of that precision (bf16)
 * whose replica keeps params16 or not: a 1×1 conv of no padding on bf16 operands in a
 * bf16 run, its columns its input (conv_bf16_columns()); y16, dy16: the staged float32
 * way where the columns are float32; dy16_outside: a backward's output gradient as bf16
 * outside the workspace (bn_dx_in_place()). */
static TdmConvComposition
composition_of(const TdmConvShape *s, gboolean columns, gboolean bf16, gboolean params16,
               gboolean y16, gboolean dy16, gboolean dy16_outside)
{
  size_t rows = (size_t)s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s);
  size_t k = (size_t)s->kernel * s->kernel * s->c, out_c = (size_t)s->out_c;
  gboolean one = s->kernel == 1 && s->pad == 0 && params16;
  TdmConvComposition how = {
      .columns = columns || (bf16 && one),
      .bf16 = bf16 && (one || (columns && out_c <= k && (params16 || out_c <= rows))),
      .bf16_dx = params16 || rows * out_c + out_c * k <= rows * k,
      .params16 = params16,
      .dy16_outside = dy16_outside,
  };
  /* Float32 columns (tdm-replica-conv.c): a bf16 output staged a chunk at a time, a bf16
   * output gradient widened so. */
  how.y16 = y16 && how.columns && !how.bf16;
  how.dy16 = dy16 && how.columns && !how.bf16;
  return how;
}

/* The most convolution s (of a layer with columns or not) may take of the workspace on
 * a backend that builds its columns in chunks, forward or backward (with the input
 * gradient where need_dx, and its output gradient as bf16 outside the workspace where
 * dy16_outside): the engine's budget (tdm_conv_budget_beyond(), beyond the call's
 * reservations) of its column way's need, the convolution engine's "im2col" candidate's
 * or the replica's own composition's, whichever is more. */
static size_t
chunked_call_bound(const TdmConvShape *s, gboolean columns, TdmBackendKind kind,
                   TdmPrecision precision, gboolean backward, gboolean need_dx, gboolean y16,
                   gboolean dy16, gboolean dy16_outside)
{
  gboolean bf16 = precision == TDM_PRECISION_BF16;
  /* tdm_replica_conv_bf16() and _bf16_dx() for this replica: a bf16 one keeps params16
   * (tdm_replica_params16_bytes()). */
  gboolean params16 = bf16;
  dy16_outside = dy16_outside && backward && bf16;
  TdmConvComposition how = composition_of(s, columns, bf16, params16, y16, dy16, dy16_outside);
  size_t most = tdm_conv_replica_bytes(s, &how, backward, need_dx,
                                       tdm_conv_columns_bound(kind, precision));
  /* Both directions of backward reserve the same (the output gradient, the weights). */
  TdmConvDirection dir = backward ? TDM_CONV_WGRAD : TDM_CONV_FORWARD;
  most = MAX(most, tdm_conv_engine_im2col_bytes(s, dir, precision, FALSE, dy16_outside));
  if (backward && need_dx)
    most = MAX(most,
               tdm_conv_engine_im2col_bytes(s, TDM_CONV_DGRAD, precision, FALSE, dy16_outside));
  return (size_t)tdm_conv_budget_beyond(
      most, tdm_conv_engine_reserved_bytes(s, dir, bf16, dy16_outside), precision);
}

/* What the bf16 composition of a 1×1 conv of no padding takes of a CPU's workspace
 * (the whole batch's columns at once), forward or backward: 0 for any other conv. */
static size_t
one_by_one_bytes(const TdmConvShape *s, gboolean columns, gboolean backward, gboolean need_dx)
{
  if (s->kernel != 1 || s->pad != 0)
    return 0;
  TdmConvComposition how = composition_of(s, columns, TRUE, TRUE, FALSE, FALSE, FALSE);
  return tdm_conv_replica_bytes(s, &how, backward, need_dx, 0);
}

/* Whether conv call i of a training step stages a float32 chunk beside its float32
 * columns (TdmConvComposition's y16 and dy16: tdm-replica-conv.c), forward (its output
 * stored as bf16, conv_output_bf16(), from a float32 input) or backward (its output
 * gradient written as bf16 by the bn after it, bn_dx_to_conv(): the first layer); and
 * whether the bf16 output gradient of its backward lies outside the workspace
 * (*dy16_outside: the bn wrote it in place in the gradient region, bn_dx_in_place(), or
 * over its input, the conv's output, bn_dx_over_input(); a projection's bn over its
 * conv's output computed again, projection_output_recomputed()), whatever its columns. */
static void
staged_of(const TdmNetwork *net, int i, TdmPrecision precision, gboolean stores16,
          gboolean *y16, gboolean *dy16, gboolean *dy16_outside)
{
  gboolean conv = net->layers[i].kind == TDM_LAYER_CONV;
  gboolean bf16 = precision == TDM_PRECISION_BF16;
  *y16 = conv && conv_output_bf16(net, i, stores16) && !input_bf16(net, i, stores16);
  *dy16 = conv && i + 1 < net->layer_count && bn_dx_to_conv(net, i + 1, bf16);
  *dy16_outside = (*dy16 && (bn_dx_in_place(net, i + 1, stores16, bf16) ||
                             bn_dx_over_input(net, i + 1, stores16, bf16))) ||
                  projection_output_recomputed(net, i, stores16);
}

/* What the staged float32 way of conv call s takes of a CPU's workspace (the whole batch
 * at once) where it stages (staged_of()): 0 elsewhere. */
static size_t
staged_bytes(const TdmConvShape *s, gboolean columns, gboolean backward, gboolean y16,
             gboolean dy16, gboolean dy16_outside)
{
  TdmConvComposition how =
      composition_of(s, columns, TRUE, TRUE, y16, dy16, backward && dy16_outside);
  if ((backward && !how.dy16) || (!backward && !how.y16))
    return 0;
  return tdm_conv_replica_bytes(s, &how, backward, FALSE, 0);
}

/* The column workspace (bytes) of a replica training `capacity` samples a step and
 * evaluating `eval_capacity` a chunk: 0 where no layer has columns or a whole
 * convolution's scratch. On a backend that builds whole columns (the CPU), the widest
 * layer's at the larger capacity, or the largest whole-convolution scratch. On one that
 * builds them in chunks (a GPU, tdm-conv-columns.h), the most of the convolution
 * engine's budgets (tdm_conv_budget_beyond(), beyond each call's reservations) of each
 * call's column way, forward at the larger capacity, backward (the output gradient as
 * bf16 kept whole beside a chunk of columns, unless it lies outside the workspace) at
 * the training's: every call's least-needing candidate needs no more than its column
 * way, so no candidate the engine may choose, or time while choosing, needs more (the
 * replica's columns_limit is the engine's work_limit, and the replica's own
 * composition is the column way), and the training's forward at its capacity too where
 * the composition stages a bf16 output (staged_of()). Float32 outputs in a float32 run:
 * no bf16 output is staged. */
size_t
tdm_replica_column_workspace(const TdmNetwork *net, TdmBackendKind kind,
                             TdmPrecision precision, gboolean stores16, size_t capacity,
                             size_t eval_capacity)
{
  size_t columns, conv_work;
  widest_scratch(net, kind, precision, stores16, &columns, &conv_work);
  size_t most = MAX(capacity, eval_capacity);
  if (tdm_conv_columns_bound(kind, precision) == 0) {
    /* The whole batch's columns at once; a bf16 1×1 conv's composition beside them
     * (its bf16 output gradient before its bf16 columns: more than its float32 columns
     * where its outputs are more than its inputs); a stem's staged float32 way
     * (staged_of(): its product, or its widened output gradient after that gradient as
     * bf16, beside its float32 columns). */
    size_t need = MAX(most * columns, conv_work) * sizeof(float);
    for (int i = 0; precision == TDM_PRECISION_BF16 && i < net->layer_count; i++) {
      TdmLayerBuffers buf = tdm_replica_buffers_of(net, i, kind, precision, stores16);
      TdmConvShape s;
      gboolean y16, dy16, dy16_outside;
      staged_of(net, i, precision, stores16, &y16, &dy16, &dy16_outside);
      if (most > 0 && conv_call_of(net, i, &buf, (int)most, &s))
        need = MAX(need, one_by_one_bytes(&s, buf.columns > 0, FALSE, FALSE));
      if (capacity > 0 && conv_call_of(net, i, &buf, (int)capacity, &s)) {
        need = MAX(need, one_by_one_bytes(&s, buf.columns > 0, TRUE, i > 0));
        need = MAX(need, staged_bytes(&s, buf.columns > 0, FALSE, y16, dy16, FALSE));
        need = MAX(need, staged_bytes(&s, buf.columns > 0, TRUE, y16, dy16, dy16_outside));
      }
    }
    return need;
  }
  size_t need =
      conv_work > 0 ? (size_t)tdm_conv_budget(conv_work * sizeof(float), precision) : 0;
  for (int i = 0; i < net->layer_count; i++) {
    TdmLayerBuffers buf = tdm_replica_buffers_of(net, i, kind, precision, stores16);
    TdmConvShape s;
    gboolean y16, dy16, dy16_outside;
    staged_of(net, i, precision, stores16, &y16, &dy16, &dy16_outside);
    if (most > 0 && conv_call_of(net, i, &buf, (int)most, &s))
      need = MAX(need, chunked_call_bound(&s, buf.columns > 0, kind, precision, FALSE, FALSE,
                                          FALSE, FALSE, FALSE));
    /* The training's forward, which may stage its bf16 output; the network's first layer
     * passes no gradient on; where the bn after it wrote its output gradient in place in
     * the gradient region (bn_dx_in_place()), its workspace holds none. */
    if (capacity > 0 && conv_call_of(net, i, &buf, (int)capacity, &s)) {
      need = MAX(need, chunked_call_bound(&s, buf.columns > 0, kind, precision, FALSE, FALSE,
                                          y16, FALSE, FALSE));
      need = MAX(need, chunked_call_bound(&s, buf.columns > 0, kind, precision, TRUE, i > 0,
                                          FALSE, dy16, dy16_outside));
    }
  }
  /* No layer with columns, a whole convolution's scratch or a bf16 1×1 conv: none. */
  return need;
}

/* A block's skip gradient lives from the walk back reaching its end to reaching its
 * start, so blocks at one level of nesting take turns in one buffer (the largest of
 * that level's, in bytes as kept): widths[level − 1]; *skips their sum. Bytes per
 * sample. (A projection's bn output has no buffer of its own: the training's forward
 * writes it into the second gradient buffer, free until backward, which the block's
 * add reads; tdm-replica-backward.c's block_end_backward() finds its conv's gradient
 * room.) */
void
tdm_replica_shared_block_buffers(const TdmNetwork *net, TdmBackendKind kind,
                                 TdmPrecision precision, gboolean stores16, size_t *widths,
                                 size_t *skips)
{
  tdm_replica_block_buffers_in(net, kind, precision, stores16, 0, net->layer_count, widths,
                               skips);
}

void
tdm_replica_block_buffers_in(const TdmNetwork *net, TdmBackendKind kind,
                             TdmPrecision precision, gboolean stores16, int lo, int hi,
                             size_t *widths, size_t *skips)
{
  int levels = tdm_replica_infer_count(net) - 2;
  g_autofree size_t *w = g_new0(size_t, MAX(levels, 1));
  for (int i = lo; i < hi; i++) {
    TdmLayerBuffers buf = tdm_replica_buffers_of(net, i, kind, precision, stores16);
    if (buf.skip > 0) {
      const TdmLayer *l = &net->layers[i];
      int level = l->depth;
      g_assert(level >= 1 && level <= levels);
      size_t bytes = buf.skip * tdm_dtype_size(buf.skip_type);
      /* A projection block whose start hands its sum to the end below it
       * (sum_to_end_below()) keeps only its compact input gradient. */
      if (l->projection && l->partner == lo && sum_to_end_below(net, lo, stores16))
        bytes = projection_share_bytes(net, i, 1);
      w[level - 1] = MAX(w[level - 1], bytes);
    }
  }
  *skips = 0;
  for (int k = 0; k < levels; k++) {
    *skips += w[k];
    if (widths != NULL)
      widths[k] = w[k];
  }
}

/* TANDEM_GRADIENT_WINDOWS=0: one window, the buffers apart from the arena (for A/B and
 * the same-bits tests). */
static gboolean
windows_allowed(void)
{
  const char *v = g_getenv("TANDEM_GRADIENT_WINDOWS");
  return v == NULL || !g_str_equal(v, "0");
}

/* The low window's bytes for cap samples: its skip buffer, then its region. */
static size_t
low_window_bytes(const TdmGradientWindows *w, size_t cap)
{
  return TDM_WINDOW_PIECE(cap * w->low_skip) + 2 * cap * w->low_half;
}

TdmGradientWindows
tdm_replica_gradient_windows(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
                             gboolean stores16, gboolean bn16, size_t bn_store, size_t cap)
{
  int n = net->layer_count;
  /* ends[i]: where the arena's pieces of the layers before i end (the input's first). */
  g_autofree size_t *ends = g_new(size_t, n + 1);
  ends[0] = arena_piece(cap * net->in_h * net->in_w * net->in_c * sizeof(float));
  for (int i = 0; i < n; i++) {
    TdmLayerBuffers buf = with_bn_store(net, i, stores16, bn_store,
                                        tdm_replica_buffers_of(net, i, kind, precision, stores16));
    ends[i + 1] = ends[i] + training_pieces(&buf, cap);
  }
  TdmGradientWindows best = {0};
  size_t skips;
  tdm_replica_shared_block_buffers(net, kind, precision, stores16, NULL, &skips);
  best.high_skip = skips;
  best.high_half = tdm_replica_gradient_bytes_of(net, stores16, bn16);
  best.arena = ends[n];
  if (!stores16 || cap == 0 || tdm_replica_infer_count(net) - 2 != 1 || !windows_allowed())
    return best;
  size_t best_cost = cap * (best.high_skip + 2 * best.high_half);
  int open = 0;
  for (int s = 1; s < n; s++) {
    const TdmLayer *l = &net->layers[s];
    open += net->layers[s - 1].kind == TDM_LAYER_RES_BEGIN;
    open -= net->layers[s - 1].kind == TDM_LAYER_RES_END;
    if (open != 0 || l->kind != TDM_LAYER_RES_BEGIN ||
        !block_grad_bf16(net, l->partner, stores16))
      continue;
    TdmGradientWindows w = {.split = s, .low_at = TDM_WINDOW_PIECE(ends[s])};
    gradient_halves(net, stores16, bn16, s, &w.low_half, &w.high_half);
    tdm_replica_block_buffers_in(net, kind, precision, stores16, 0, s, NULL, &w.low_skip);
    tdm_replica_block_buffers_in(net, kind, precision, stores16, s, n, NULL, &w.high_skip);
    w.arena = MAX(ends[n], w.low_at + low_window_bytes(&w, cap));
    size_t cost = w.arena - ends[n] + cap * (w.high_skip + 2 * w.high_half);
    if (cost < best_cost) {
      best = w;
      best_cost = cost;
    }
  }
  return best;
}

TdmReplicaPlan
tdm_replica_plan(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
                 int capacity, int eval_capacity)
{
  return tdm_replica_plan_stored(net, kind, precision, capacity, eval_capacity,
                                 tdm_replica_bn_store(net, kind, precision, capacity));
}

TdmReplicaPlan
tdm_replica_plan_stored(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
                        int capacity, int eval_capacity, size_t bn_store)
{
  TdmReplicaPlan p = {0};
  /* Auto is a run's choice, resolved before any plan (tdm-precision-auto.h). */
  g_return_val_if_fail(precision != TDM_PRECISION_AUTO, p);
  gboolean stores16 = tdm_replica_stores_bf16(kind, precision);
  size_t cap = (size_t)MAX(capacity, 0), ecap = (size_t)MAX(eval_capacity, 0);
  size_t most = MAX(cap, ecap);
  /* Never an empty allocation: a network without parameters or state gets one float. */
  p.parameters = MAX(1, net->parameter_count) * sizeof(float) +
                 MAX(1, net->state_count) * sizeof(float) +
                 tdm_replica_params16_bytes(net, kind, precision);
  p.gradients = MAX(1, net->parameter_count) * sizeof(float);
  p.columns = tdm_replica_column_workspace(net, kind, precision, stores16, cap, ecap);
  p.workspace = p.columns;
  for (int i = 0; i < net->layer_count; i++) {
    TdmLayerBuffers buf = with_bn_store(
        net, i, stores16, bn_store, tdm_replica_buffers_of(net, i, kind, precision, stores16));
    p.workspace += buf.bn_work * sizeof(float);
  }
  /* The input and each layer's pieces, with the low window of the skip buffer and the
   * gradient region where it lies past them; the high window's skip buffer and its two
   * activation-gradient buffers apart (both kinds of backend have bn_backward_dx_bf16);
   * the chunk's labels and indices, the metrics. */
  TdmGradientWindows windows = tdm_replica_gradient_windows(
      net, kind, precision, stores16, precision == TDM_PRECISION_BF16, bn_store, cap);
  p.activations = windows.arena;
  p.workspace += cap * windows.high_skip + 2 * cap * windows.high_half;
  p.workspace += 2 * most * sizeof(int32_t) + sizeof(TdmMetrics);
  /* The inference pass's rotating buffers, its pools' argmax, the views' logits: in
   * the activation arena, over the training's activations, beyond them where they
   * need more. */
  size_t infer = tdm_replica_infer_arena_bytes(net, stores16, ecap);
  p.inference = infer > p.activations ? infer - p.activations : 0;
  return p;
}

size_t
tdm_replica_plan_total(const TdmReplicaPlan *plan)
{
  return plan->parameters + plan->gradients + plan->activations + plan->workspace +
         plan->inference;
}

int
tdm_replica_eval_capacity(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
                          int capacity, int wanted)
{
  wanted = MAX(wanted, 1);
  TdmReplicaPlan train = tdm_replica_plan(net, kind, precision, capacity, 0);
  size_t budget = MAX(train.activations, TDM_EVAL_BUDGET_FLOOR);
  /* The inference buffers grow by `per` a sample; the workspace, once a chunk's
   * columns pass what it holds for training (`base`), by `col` a sample. */
  size_t columns, conv_work;
  widest_scratch(net, kind, precision, tdm_replica_stores_bf16(kind, precision), &columns,
                 &conv_work);
  size_t per =
      (size_t)tdm_replica_infer_count(net) * tdm_replica_infer_floats(net) * sizeof(float) +
      tdm_replica_infer_argmax_bytes(net) + net->classes * sizeof(float);
  if (tdm_conv_columns_bound(kind, precision) > 0) {
    /* Columns in chunks no longer grow with the evaluation's chunk, which then stays
     * the training's shard (its inference buffers, beyond the training's activations
     * they lie over, are what a larger chunk costs) unless they take no more than the
     * floor; and it widens the column workspace (only by the forward's bounded chunk,
     * where the training's shard is small) by no more than the floor. */
    gboolean stores16 = tdm_replica_stores_bf16(kind, precision);
    size_t cap = (size_t)MAX(capacity, 0);
    size_t held = tdm_replica_column_workspace(net, kind, precision, stores16, cap, 0);
    size_t low = 1,
           high = CLAMP(MIN(budget / per, MAX(cap, TDM_EVAL_BUDGET_FLOOR / per)), (size_t)1,
                        (size_t)wanted);
    while (low < high) {
      size_t mid = low + (high - low + 1) / 2;
      if (tdm_replica_column_workspace(net, kind, precision, stores16, cap, mid) - held <=
          TDM_EVAL_BUDGET_FLOOR)
        low = mid;
      else
        high = mid - 1;
    }
    return (int)CLAMP(low, 1, (size_t)wanted);
  }
  size_t col = columns * sizeof(float);
  size_t base = MAX((size_t)MAX(capacity, 0) * col, conv_work * sizeof(float));
  size_t fits = budget / per;
  if (col > 0 && fits * col > base) {
    fits = MAX(base / col, (budget + base) / (per + col));
    /* Columns are the widest scratch by far (k² times an activation): a chunk may
     * widen the workspace by the floor's worth, no more. */
    fits = MIN(fits, (base + TDM_EVAL_BUDGET_FLOOR) / col);
  }
  return (int)CLAMP(fits, 1, (size_t)wanted);
}


/* Whether the environment variable `name` is unset or anything but "0". */
static gboolean
not_zero(const char *name)
{
  const char *v = g_getenv(name);
  return v == NULL || strcmp(v, "0") != 0;
}

gboolean
tdm_replica_bf16_activations(void)
{
  return not_zero("TANDEM_BF16_ACTIVATIONS");
}

gboolean
tdm_replica_start_sums(void)
{
  return not_zero("TANDEM_START_SUMS");
}

gboolean
tdm_replica_stem_bn(void)
{
  return not_zero("TANDEM_STEM_BN");
}

static int
size_compare(const void *a, const void *b)
{
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

int
tdm_replica_bn_store_sizes(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
                           size_t *sizes)
{
  gboolean stores16 = tdm_replica_stores_bf16(kind, precision);
  int n = 0;
  for (int i = 0; i < net->layer_count; i++)
    if (bn_output_stored(net, i, stores16, G_MAXSIZE))
      sizes[n++] = layer_out_floats(&net->layers[i]) * sizeof(uint16_t);
  qsort(sizes, (size_t)n, sizeof *sizes, size_compare);
  int distinct = 0;
  for (int k = 0; k < n; k++)
    if (distinct == 0 || sizes[distinct - 1] != sizes[k])
      sizes[distinct++] = sizes[k];
  return distinct;
}

/* Whether the training's plan storing the bn outputs of at most bn_store bytes a sample
 * totals at most 1/TDM_BN_STORE_GROWTH more than `none`, the total of the plan storing
 * none: (total − none) · TDM_BN_STORE_GROWTH ≤ none, in integers. */
static gboolean
bn_store_fits(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision, int capacity,
              size_t none, size_t bn_store)
{
  TdmReplicaPlan p = tdm_replica_plan_stored(net, kind, precision, capacity, 0, bn_store);
  size_t total = tdm_replica_plan_total(&p);
  return total <= none || (total - none) * TDM_BN_STORE_GROWTH <= none;
}

size_t
tdm_replica_bn_store_auto(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
                          int capacity)
{
  /* Nothing to store (no bf16 storage, no bn before a conv that takes bf16): no plan. */
  g_autofree size_t *sizes = g_new(size_t, MAX(net->layer_count, 1));
  int n = tdm_replica_bn_store_sizes(net, kind, precision, sizes);
  if (n == 0)
    return 0;
  TdmReplicaPlan p = tdm_replica_plan_stored(net, kind, precision, capacity, 0, 0);
  size_t none = tdm_replica_plan_total(&p);
  /* A larger threshold stores what a smaller one does and more, so the plan's total
   * never shrinks as it grows: the largest size that fits, by bisection (sizes[low] fits
   * for low ≥ 0; −1: none does). */
  int low = -1, high = n - 1;
  while (low < high) {
    int mid = low + (high - low + 1) / 2;
    if (bn_store_fits(net, kind, precision, capacity, none, sizes[mid]))
      low = mid;
    else
      high = mid - 1;
  }
  return low >= 0 ? sizes[low] : 0;
}

/* The last value of TANDEM_BN_STORE warned about: a plan is computed many times a run
 * (the estimate, each replica), and one warning says it. */
G_LOCK_DEFINE_STATIC(bn_store_warned);
static char *bn_store_warned;

/* TANDEM_BN_STORE's value as a threshold in MiB (0 or more): FALSE where it is none. */
static gboolean
bn_store_mib(const char *v, guint64 *mib)
{
  return g_ascii_string_to_unsigned(v, 10, 0, G_MAXSIZE / (1024 * 1024), mib, NULL);
}

gboolean
tdm_replica_bn_store_automatic(void)
{
  const char *v = g_getenv("TANDEM_BN_STORE");
  guint64 mib;
  return v == NULL || (strcmp(v, "all") != 0 && !bn_store_mib(v, &mib));
}

size_t
tdm_replica_bn_store(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision,
                     int capacity)
{
  const char *v = g_getenv("TANDEM_BN_STORE");
  if (v == NULL)
    return tdm_replica_bn_store_auto(net, kind, precision, capacity);
  if (strcmp(v, "all") == 0)
    return G_MAXSIZE;
  const guint64 mib = 1024 * 1024;
  guint64 limit;
  if (!bn_store_mib(v, &limit)) {
    G_LOCK(bn_store_warned);
    if (g_strcmp0(bn_store_warned, v) != 0) {
      g_warning("TANDEM_BN_STORE=\"%s\" is neither 0, all nor a whole number of MiB: "
                "the bn outputs stored for their conv are chosen as when it is unset "
                "(the plan grows by at most 1/%d)",
                v, TDM_BN_STORE_GROWTH);
      g_free(bn_store_warned);
      bn_store_warned = g_strdup(v);
    }
    G_UNLOCK(bn_store_warned);
    return tdm_replica_bn_store_auto(net, kind, precision, capacity);
  }
  /* n·h·w·c·2 ≤ N MiB for n samples is h·w·c·2 ≤ ⌊N MiB / n⌋. */
  return (size_t)(limit * mib / (guint64)MAX(capacity, 1));
}

gboolean
tdm_replica_stores_bf16(TdmBackendKind kind, TdmPrecision precision)
{
  return precision == TDM_PRECISION_BF16 && tdm_backend_kind_has_bn_bf16_input(kind) &&
         tdm_backend_kind_has_bf16_blocks(kind) && tdm_replica_bf16_activations();
}

size_t
tdm_replica_params16_bytes(const TdmNetwork *net, TdmBackendKind kind, TdmPrecision precision)
{
  if (precision != TDM_PRECISION_BF16)
    return 0;
  return MAX(1, net->parameter_count) * sizeof(uint16_t);
}
